//! Faults on purpose (issue 15): a call whose answer fails in a chosen way, with its side
//! effect applied or not, decided reproducibly and recorded as evidence.
//!
//! Everything here is pure — no clock, no I/O, no runtime, no randomness source other than
//! SHA-256 of the seed — so the proxy's part is a small `match` over [`FaultAnswer`].
//!
//! | piece | what |
//! |---|---|
//! | [`fault_problems`] | `check` of a definition's [`Fault`] (and of a chaos spec): fields per kind, limits, MCP-only kinds |
//! | [`ChaosFault`] (a stored type, in `crate::records`), [`chaos_fault`] | per-attempt seeded chaos (`POST /attempts` `"faults"`) |
//! | [`decide`] | which fault a call gets: chaos or the definition's |
//! | [`FaultPlan`], [`FaultAnswer`] | what the pipeline does with it: commit or not, and what goes on the wire |
//! | [`FaultRecord`] | the `fault` member of the call's evidence |
//! | [`fault_after_effect`] | the contracts adapter's `Call.fault_after_effect` |
//!
//! # Kinds and fields
//!
//! | kind | fields | on the wire |
//! |---|---|---|
//! | `reset` | — | TCP reset (h2: `RST_STREAM`) instead of an answer |
//! | `close` | — | the connection closes with no response |
//! | `timeout` | `ms` 1–30000, default 30000 | nothing is sent for `ms`, then as `close` |
//! | `slow_body` | `ms` 1–30000 (required), `chunks` 2–1000, default 10 | the decided answer, its body in `chunks` pieces spread over `ms` |
//! | `malformed_body` | — | the decided status and content type, the body cut short ([`crate::http::fault::truncated_body`]) |
//! | `status` | `status` 400–599 (required), `headers` (e.g. `Retry-After`) | a bare status in the profile's native error shape |
//! | `jsonrpc_error` (mcp) | `code` (required, a 32-bit integer), `message` (default `fault injected`) | a JSON-RPC error response instead of the result |
//! | `stream_cut` (mcp) | — | the SSE stream (or JSON body) ends before the result |
//!
//! A field another kind takes is rejected (`chunks` on a `timeout` is a mistake, not a no-op).
//! `status` headers may not be the framing ones (`content-length`, `transfer-encoding`,
//! `connection`, `upgrade`, `content-type`). `delay_ms` still applies first: the call sleeps
//! `delay_ms` after the commit, then the fault answers.
//!
//! # `after_effect` and `result_status`
//!
//! - `after_effect: true` — the call took effect: `set_state` is committed and an idempotency
//!   key is remembered (so a retry with the same key is `replayed`); only the answer is lost.
//!   Evidence: `result_status: "ok"` with a `fault` member. It is an effective call for
//!   contracts (exactly-once, max_writes), but not a success the agent may report
//!   (`Call::succeeded` is false: the agent never got the answer).
//! - `after_effect: false` — nothing changed: no commit, no idempotency entry. Evidence:
//!   `result_status: "blocked"` with a `fault` member — a side effect held back, not
//!   effective, listed in `blocked_side_effects`. This stays within docs/src/reference/evidence-envelope.md's list on
//!   purpose: a reader that ignores the `fault` member still sees *no effect*, so a fault
//!   can never turn a missing effect into a pass (`ok` + fault would read as a success to
//!   such a reader; `harness_error` would fail a run that asked for the fault).
//!
//! Either way the event's `result` and `http_status` are what the call **decided** (what a
//! replay of it returns); [`FaultRecord::wire_status`] is the status the client actually
//! received, if any. Neither status fails the verdict by itself.
//!
//! # Which fault a call gets
//!
//! Only a call that evaluated to an answer can fault: input errors, harness errors and
//! idempotent replays are answered as they are (a replay returns the remembered response,
//! unfaulted, and consumes no chaos index). For such a call, **chaos wins**: when the
//! attempt's chaos spec for the operation fires, its fault is used; otherwise the
//! definition's (the matched rule's, else the variant's). Chaos is the per-attempt override —
//! "for this run, the first booking times out" — just as the attempt's `variants` override
//! `default_variant`; and because the chaos index advances on every evaluated call of the
//! operation whichever variant answers, the same seed gives the same faults on the same
//! call sequence.
//!
//! # Chaos
//!
//! `{"kind", "after_effect", …fault fields, "probability"?: 0..=1 (default 1), "seed"?: u64
//! (default 0), "times"?: ≥ 1}`. The `n`-th evaluated call (0-based) of the operation draws
//! `u = first 8 bytes of SHA-256("understudy.chaos.v1" ‖ seed (LE u64) ‖ operation key ‖ 0x00
//! ‖ n (LE u64))` as a number in [0, 1) (53 bits) and fires when `u < probability` and fewer
//! than `times` have fired. Probability 1 always fires, 0 never.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::mock::model::{limits, Fault, FaultKind};
use crate::records::{ChaosFault, ResultStatus};

pub use crate::records::FaultRecord;

/// The default `timeout` hold.
pub const DEFAULT_TIMEOUT_MS: u64 = limits::MAX_FAULT_MS;
/// The default `slow_body` chunk count.
pub const DEFAULT_CHUNKS: u64 = 10;
/// The default `jsonrpc_error` message.
pub const DEFAULT_MESSAGE: &str = "fault injected";
/// Headers a `status` fault may not set: they frame the response.
pub const FRAMING_HEADERS: [&str; 5] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "content-type",
];

// ---------------------------------------------------------------------------------------------
// Checks

/// Every problem of one fault, as `(path below the fault, message)`; the path is `""` for
/// the fault itself, else a field name. `mcp`: the operation is on an `mcp` integration.
pub fn fault_problems(f: &Fault, mcp: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut push = |at: &str, msg: String| out.push((at.to_string(), msg));
    let kind = f.kind;
    if kind.mcp_only() && !mcp {
        let http: Vec<&str> = FaultKind::ALL
            .iter()
            .filter(|k| !k.mcp_only())
            .map(|k| k.as_str())
            .collect();
        push(
            "kind",
            format!(
                "`{kind}` is an MCP fault and this is an HTTP operation: expected one of {}",
                http.join(", ")
            ),
        );
    }
    let takes: &[&str] = match kind {
        FaultKind::Reset | FaultKind::Close | FaultKind::MalformedBody | FaultKind::StreamCut => {
            &[]
        }
        FaultKind::Timeout => &["ms"],
        FaultKind::SlowBody => &["ms", "chunks"],
        FaultKind::Status => &["status", "headers"],
        FaultKind::JsonrpcError => &["code", "message"],
    };
    let present = [
        ("ms", f.ms.is_some()),
        ("chunks", f.chunks.is_some()),
        ("status", f.status.is_some()),
        ("headers", f.headers.is_some()),
        ("code", f.code.is_some()),
        ("message", f.message.is_some()),
    ];
    for (field, is) in present {
        if is && !takes.contains(&field) {
            let expected = if takes.is_empty() {
                "no other field".to_string()
            } else {
                takes
                    .iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            push(
                field,
                format!("a `{kind}` fault takes no `{field}`: expected {expected} besides `kind` and `after_effect`"),
            );
        }
    }
    let max = limits::MAX_FAULT_MS;
    match kind {
        FaultKind::Timeout | FaultKind::SlowBody => match f.ms {
            None if kind == FaultKind::SlowBody => push(
                "",
                format!("a `slow_body` fault needs `ms`: the time over which the body dribbles in, 1..={max}"),
            ),
            Some(ms) if ms == 0 || ms > max => push(
                "ms",
                format!("{ms}: expected 1..={max} milliseconds (the delay limit)"),
            ),
            _ => {}
        },
        _ => {}
    }
    if kind == FaultKind::SlowBody {
        if let Some(c) = f.chunks {
            if !(2..=limits::MAX_FAULT_CHUNKS).contains(&c) {
                push(
                    "chunks",
                    format!("{c}: expected 2..={} chunks", limits::MAX_FAULT_CHUNKS),
                );
            }
        }
    }
    if kind == FaultKind::Status {
        match f.status {
            None => push(
                "",
                "a `status` fault needs `status`: an HTTP error status 400..=599, e.g. 503".into(),
            ),
            Some(s) if !(400..=599).contains(&s) => push(
                "status",
                format!("{s}: expected an HTTP error status 400..=599"),
            ),
            _ => {}
        }
        for (name, value) in f.headers.iter().flatten() {
            let at = format!("headers/{}", name.replace('~', "~0").replace('/', "~1"));
            match hyper::http::HeaderName::from_bytes(name.as_bytes()) {
                Err(_) => push(&at, format!("`{name}` is not a valid header name")),
                Ok(h) if FRAMING_HEADERS.contains(&h.as_str()) => push(
                    &at,
                    format!(
                        "`{name}` frames the response and cannot be set by a fault: expected another header, e.g. Retry-After"
                    ),
                ),
                Ok(_) => {}
            }
            if hyper::http::HeaderValue::from_str(value).is_err() {
                push(
                    &at,
                    format!(
                        "{value:?} is not a valid header value (visible ASCII, spaces and tabs)"
                    ),
                );
            }
        }
    }
    if kind == FaultKind::JsonrpcError {
        match f.code {
            None => push(
                "",
                "a `jsonrpc_error` fault needs `code`: a JSON-RPC error code, e.g. -32603".into(),
            ),
            Some(c) if i32::try_from(c).is_err() => push(
                "code",
                format!("{c}: expected a 32-bit integer JSON-RPC error code, e.g. -32603"),
            ),
            _ => {}
        }
        if let Some(m) = &f.message {
            if m.is_empty() || m.len() > 1000 {
                push(
                    "message",
                    format!("expected 1..=1000 bytes of text, got {} bytes", m.len()),
                );
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Chaos

/// Every problem of one chaos entry (`key` is its `"<integration>/<operation_id>"`), each
/// `faults/<key>[/field]: message`. `mcp`: the operation is on an `mcp` integration.
pub fn chaos_problems(key: &str, c: &ChaosFault, mcp: bool) -> Vec<String> {
    let at = |sub: &str| {
        if sub.is_empty() {
            format!("faults/{key}")
        } else {
            format!("faults/{key}/{sub}")
        }
    };
    let mut out: Vec<String> = fault_problems(&c.fault, mcp)
        .into_iter()
        .map(|(sub, msg)| format!("{}: {msg}", at(&sub)))
        .collect();
    if !(c.probability.is_finite() && (0.0..=1.0).contains(&c.probability)) {
        out.push(format!(
            "{}: {}: expected a number 0..=1",
            at("probability"),
            c.probability
        ));
    }
    if c.times == Some(0) {
        out.push(format!(
            "{}: 0: expected at least 1 (omit `times` for no bound)",
            at("times")
        ));
    }
    out
}

/// How far one operation's chaos has gone in one attempt: kept under the attempt's state
/// lock, advanced by [`chaos_fault`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChaosCounter {
    /// Evaluated calls of the operation so far: the index of the next one.
    pub calls: u64,
    /// How many of them faulted by chaos.
    pub fired: u64,
}

/// The deterministic draw of call `index` (0-based) of `operation`: a number in [0, 1).
pub fn chaos_draw(seed: u64, operation: &str, index: u64) -> f64 {
    let mut h = Sha256::new();
    h.update(b"understudy.chaos.v1");
    h.update(seed.to_le_bytes());
    h.update(operation.as_bytes());
    h.update([0u8]);
    h.update(index.to_le_bytes());
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    (u64::from_be_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}

/// Would call `index` of `operation` fault, having `fired` chaos faults before it? Pure.
pub fn chaos_fires(spec: &ChaosFault, operation: &str, index: u64, fired: u64) -> bool {
    if spec.times.is_some_and(|t| fired >= t) {
        return false;
    }
    chaos_draw(spec.seed, operation, index) < spec.probability
}

/// The chaos fault of the next evaluated call of `operation`, advancing `counter` (every
/// call advances the index, whether or not it faults).
pub fn chaos_fault<'s>(
    spec: &'s ChaosFault,
    operation: &str,
    counter: &mut ChaosCounter,
) -> Option<&'s Fault> {
    let index = counter.calls;
    counter.calls += 1;
    if chaos_fires(spec, operation, index, counter.fired) {
        counter.fired += 1;
        Some(&spec.fault)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// The plan

/// Where a call's fault came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultOrigin {
    /// The pinned definition's variant or rule.
    Mock,
    /// The attempt's seeded chaos.
    Chaos,
}

/// What a call that evaluated to an answer does instead (module doc, "Which fault"): call
/// it under the state lock after evaluation (and the output check), before committing.
/// `chaos` is the attempt's entry for the operation, `counter` its progress.
pub fn decide(
    definition: Option<&Fault>,
    chaos: Option<&ChaosFault>,
    counter: &mut ChaosCounter,
    operation: &str,
) -> Option<FaultPlan> {
    if let Some(f) = chaos.and_then(|c| chaos_fault(c, operation, counter)) {
        return Some(FaultPlan::of(f, FaultOrigin::Chaos));
    }
    definition.map(|f| FaultPlan::of(f, FaultOrigin::Mock))
}

/// What the pipeline does with a faulted call.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPlan {
    /// Commit `set_state` and remember the idempotency key (`after_effect: true`), or change
    /// nothing.
    pub commit_effect: bool,
    /// What goes on the wire instead of the answer.
    pub answer: FaultAnswer,
    pub kind: FaultKind,
    pub origin: FaultOrigin,
}

/// What goes on the wire. Variants that still send the decided answer say so.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAnswer {
    /// Abort the connection with a TCP RST (HTTP/1.1: `SO_LINGER` 0, then drop), or the
    /// stream with `RST_STREAM` (h2).
    Reset,
    /// No response: HTTP/1.1 closes the connection (FIN, no `SO_LINGER` 0) without a byte;
    /// h2 has no per-stream close, so the stream is reset like [`FaultAnswer::Reset`]
    /// (other streams of the connection live on).
    Close,
    /// Send nothing for `ms`, then as [`FaultAnswer::Close`].
    Hold { ms: u64 },
    /// The decided answer with its body in `chunks` pieces, one every `ms / chunks`.
    SlowBody { chunks: u64, ms: u64 },
    /// The decided status and headers, the body cut by [`crate::http::fault::truncated_body`] (with a matching
    /// `Content-Length`).
    Truncated,
    /// A bare status in the profile's native error shape, with these extra headers.
    Status {
        status: u16,
        headers: Vec<(String, String)>,
    },
    /// MCP: a JSON-RPC error response (same `id`) instead of the result.
    JsonRpcError { code: i64, message: String },
    /// MCP: end the SSE stream (or the JSON body) before the result event.
    StreamCut,
}

impl FaultPlan {
    /// The plan of a fault that passed [`fault_problems`] (defaults filled in).
    pub fn of(f: &Fault, origin: FaultOrigin) -> FaultPlan {
        let answer = match f.kind {
            FaultKind::Reset => FaultAnswer::Reset,
            FaultKind::Close => FaultAnswer::Close,
            FaultKind::Timeout => FaultAnswer::Hold {
                ms: f.ms.unwrap_or(DEFAULT_TIMEOUT_MS).min(limits::MAX_FAULT_MS),
            },
            FaultKind::SlowBody => FaultAnswer::SlowBody {
                chunks: f
                    .chunks
                    .unwrap_or(DEFAULT_CHUNKS)
                    .clamp(1, limits::MAX_FAULT_CHUNKS),
                ms: f.ms.unwrap_or(0).min(limits::MAX_FAULT_MS),
            },
            FaultKind::MalformedBody => FaultAnswer::Truncated,
            FaultKind::Status => FaultAnswer::Status {
                status: f.status.unwrap_or(503),
                headers: f
                    .headers
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            },
            FaultKind::JsonrpcError => FaultAnswer::JsonRpcError {
                code: f.code.unwrap_or(-32603),
                message: f
                    .message
                    .clone()
                    .unwrap_or_else(|| DEFAULT_MESSAGE.to_string()),
            },
            FaultKind::StreamCut => FaultAnswer::StreamCut,
        };
        FaultPlan {
            commit_effect: f.after_effect,
            answer,
            kind: f.kind,
            origin,
        }
    }

    /// The event's `result_status`: `ok` when the effect happened, else `blocked` (module
    /// doc).
    pub fn result_status(&self) -> ResultStatus {
        if self.commit_effect {
            ResultStatus::Ok
        } else {
            ResultStatus::Blocked
        }
    }

    /// The status line the client receives, given the decided one; `None` when none is
    /// sent (`reset`, `close`, `timeout`).
    pub fn wire_status(&self, decided: u16) -> Option<u16> {
        match &self.answer {
            FaultAnswer::Reset | FaultAnswer::Close | FaultAnswer::Hold { .. } => None,
            FaultAnswer::SlowBody { .. } | FaultAnswer::Truncated => Some(decided),
            FaultAnswer::Status { status, .. } => Some(*status),
            // The MCP endpoint answers 200 and fails inside the body.
            FaultAnswer::JsonRpcError { .. } | FaultAnswer::StreamCut => Some(200),
        }
    }

    /// The event's `fault` member.
    pub fn record(&self, decided_status: u16) -> FaultRecord {
        FaultRecord {
            kind: self.kind.as_str().to_string(),
            after_effect: self.commit_effect,
            origin: Some(
                match self.origin {
                    FaultOrigin::Mock => "mock",
                    FaultOrigin::Chaos => "chaos",
                }
                .to_string(),
            ),
            wire_status: self.wire_status(decided_status),
        }
    }
}

/// The contracts adapter's `Call.fault_after_effect` of an event: the call took effect but
/// its answer was lost. True only for `ok` events whose fault says `after_effect` (a fault
/// member can never make another status effective).
pub fn fault_after_effect(status: &ResultStatus, fault: Option<&FaultRecord>) -> bool {
    *status == ResultStatus::Ok && fault.is_some_and(|f| f.after_effect)
}

#[cfg(test)]
mod tests;
