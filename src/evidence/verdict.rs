//! The one verdict: every rule that can fail an attempt, each with a stable code ([`Rule`]),
//! and the one function that judges an attempt ([`Judge`], a fold over its timeline with
//! bounded state, so the evidence can be streamed through it). Every reader — the evidence
//! route, `understudy evidence|verify|report|test`, JUnit, HTML, the UI list and the pytest
//! plugin — shows the [`Verdict`] computed here and never recomputes it or reads the text of
//! a reason: a reason's `code` is what tools match on.
//!
//! The verdict reads no clock: the same evidence always gives the same verdict. It is `fail`
//! when any rule below holds (one [`Reason`] per finding, in timeline order, then the
//! attempt's own marks, then contracts), else `pass`. The table is `docs/src/reference/verdict.md`.
//!
//! | code | fails when |
//! |---|---|
//! | `harness_error` | a call has `result_status: "harness_error"` (other than the codes below) |
//! | `store_failure` | a call was answered 500 `store_error` (the attempt's durable `store_failures` counter, or a recorded withdrawal) |
//! | `lease_expired` | a call arrived after the lease expired (recorded as such, or stamped after `expires_at`) |
//! | `attempt_ended` | a call arrived with the token of the attempt after it ended (answered 410), or is stamped after `ended_at` |
//! | `duplicate_side_effect` | two writes under one `idempotency_key_ref` both took effect |
//! | `missing_evidence` | the sequences of calls and agent-side events are not exactly 1..n |
//! | `unknown_status` | a `result_status` outside the known list |
//! | `interrupted` | the process serving the attempt died before its evidence was durable |
//! | `no_calls` | no tool call and no agent-side event (unless created with `expect_calls: false`) |
//! | `outside_attempt` | during the run of an exclusive attempt, a call reached the server without its token |
//! | `cleanup_not_verified` | the cleanup recorded at the end left state behind, or is missing its fields |
//! | `contract:<id>:<check>` | a check of a blocking contract did not pass |
//!
//! Input errors alone never fail the attempt.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::verify::{ContractResult, Risk, Status};
use crate::records::{AgentEvent, AttemptRecord, ResultStatus, ToolEvent};

/// A rule of the verdict: its stable code is what a report or a tool matches on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    HarnessError,
    StoreFailure,
    LeaseExpired,
    AttemptEnded,
    DuplicateSideEffect,
    MissingEvidence,
    UnknownStatus,
    Interrupted,
    NoCalls,
    OutsideAttempt,
    CleanupNotVerified,
    /// A check (`check`) of the blocking contract `id` did not pass.
    Contract {
        id: String,
        check: String,
    },
}

impl Rule {
    /// Every rule of the attempt itself (not contracts), in the order of the module doc:
    /// the JUnit report has one test case per rule.
    pub const ATTEMPT_RULES: [Rule; 11] = [
        Rule::HarnessError,
        Rule::StoreFailure,
        Rule::LeaseExpired,
        Rule::AttemptEnded,
        Rule::DuplicateSideEffect,
        Rule::MissingEvidence,
        Rule::UnknownStatus,
        Rule::Interrupted,
        Rule::NoCalls,
        Rule::OutsideAttempt,
        Rule::CleanupNotVerified,
    ];

    /// The stable code.
    pub fn code(&self) -> String {
        match self {
            Rule::Contract { id, check } => format!("contract:{id}:{check}"),
            other => other.fixed_code().to_string(),
        }
    }

    fn fixed_code(&self) -> &'static str {
        match self {
            Rule::HarnessError => "harness_error",
            Rule::StoreFailure => "store_failure",
            Rule::LeaseExpired => "lease_expired",
            Rule::AttemptEnded => "attempt_ended",
            Rule::DuplicateSideEffect => "duplicate_side_effect",
            Rule::MissingEvidence => "missing_evidence",
            Rule::UnknownStatus => "unknown_status",
            Rule::Interrupted => "interrupted",
            Rule::NoCalls => "no_calls",
            Rule::OutsideAttempt => "outside_attempt",
            Rule::CleanupNotVerified => "cleanup_not_verified",
            Rule::Contract { .. } => "contract",
        }
    }

    /// What passing the rule means, for people (the JUnit test case's title).
    pub fn title(&self) -> &'static str {
        match self {
            Rule::HarnessError => "no call was a harness error",
            Rule::StoreFailure => "every call's evidence was recorded (no store_error)",
            Rule::LeaseExpired => "no call arrived after the lease expired",
            Rule::AttemptEnded => "no call arrived after the attempt ended",
            Rule::DuplicateSideEffect => "no write took effect twice under one idempotency key",
            Rule::MissingEvidence => "sequences are 1..n without gaps or repeats",
            Rule::UnknownStatus => "every result_status is a known one",
            Rule::Interrupted => "the serving process did not die before the evidence was durable",
            Rule::NoCalls => "the agent made at least one tool call or agent-side event",
            Rule::OutsideAttempt => "no call of the run missed the attempt",
            Rule::CleanupNotVerified => "cleanup verified with 0 remaining state keys",
            Rule::Contract { .. } => "every check of the blocking contract passed",
        }
    }
}

/// One reason the verdict is `fail`: `{"code","message","sequence"?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
}

impl Reason {
    pub fn new(rule: &Rule, message: impl Into<String>) -> Reason {
        Reason {
            code: rule.code(),
            message: message.into(),
            sequence: None,
        }
    }

    pub fn at(rule: &Rule, sequence: u64, message: impl Into<String>) -> Reason {
        Reason {
            sequence: Some(sequence),
            ..Reason::new(rule, message)
        }
    }

    /// Whether this reason belongs to `rule` (a contract rule matches any contract reason).
    pub fn is(&self, rule: &Rule) -> bool {
        match rule {
            Rule::Contract { .. } => self.code.starts_with("contract:"),
            r => self.code == r.fixed_code(),
        }
    }
}

/// `pass` or `fail`, with every reason.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Verdict {
    pub reasons: Vec<Reason>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.reasons.is_empty()
    }

    /// `"pass"` or `"fail"`.
    pub fn word(&self) -> &'static str {
        if self.passed() {
            "pass"
        } else {
            "fail"
        }
    }

    /// The verdict as every reader finds it in an envelope (or an answer): its `verdict` and
    /// `verdict_reasons` members. `Err` says why the value is not a verdict of understudy:
    /// no `verdict` member, a word other than `pass`/`fail`, or a `fail` without reasons.
    /// Reasons written as plain strings (envelopes of earlier versions) are read with the
    /// code `unknown`.
    pub fn from_envelope(env: &Value) -> Result<Verdict, String> {
        let word = match env.get("verdict") {
            Some(Value::String(w)) => w.as_str(),
            Some(other) => {
                return Err(format!(
                    "`verdict` is {other}, expected \"pass\" or \"fail\""
                ))
            }
            None => return Err(
                "the answer has no `verdict` member: it is not an evidence envelope of understudy"
                    .to_string(),
            ),
        };
        let reasons: Vec<Reason> = match env.get("verdict_reasons") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|r| match r {
                    Value::String(s) => Reason {
                        code: "unknown".into(),
                        message: s.clone(),
                        sequence: None,
                    },
                    other => serde_json::from_value(other.clone()).unwrap_or_else(|_| Reason {
                        code: "unknown".into(),
                        message: other.to_string(),
                        sequence: None,
                    }),
                })
                .collect(),
            Some(other) => return Err(format!("`verdict_reasons` is {other}, expected an array")),
        };
        match (word, reasons.is_empty()) {
            ("pass", true) => Ok(Verdict { reasons }),
            ("pass", false) => Err("the verdict is `pass` but it lists reasons to fail".into()),
            ("fail", false) => Ok(Verdict { reasons }),
            ("fail", true) => Ok(Verdict {
                reasons: vec![Reason {
                    code: "unknown".into(),
                    message: "the verdict is fail (the envelope gives no reason)".into(),
                    sequence: None,
                }],
            }),
            (w, _) => Err(format!(
                "`verdict` is \"{w}\", expected \"pass\" or \"fail\""
            )),
        }
    }
}

/// The fold that judges one attempt: feed its calls and agent-side events **in sequence
/// order** ([`Judge::call`], [`Judge::event`]), then [`Judge::finish`]. State is bounded by
/// the number of distinct idempotency keys of applied writes, never by the number of calls.
#[derive(Debug)]
pub struct Judge<'a> {
    attempt: &'a AttemptRecord,
    expires: Option<Result<chrono::DateTime<chrono::FixedOffset>, ()>>,
    ended: Option<chrono::DateTime<chrono::FixedOffset>>,
    reasons: Vec<Reason>,
    /// The next sequence expected (1..n without gaps or repeats).
    next: u64,
    gap_reported: bool,
    calls: u64,
    events: u64,
    applied: HashMap<String, u64>,
}

impl<'a> Judge<'a> {
    pub fn new(attempt: &'a AttemptRecord) -> Judge<'a> {
        let expires = attempt
            .expires_at
            .as_deref()
            .map(|e| parse_time(e).ok_or(()));
        let mut reasons = Vec::new();
        if let Some(Err(())) = expires {
            reasons.push(Reason::new(
                &Rule::LeaseExpired,
                format!(
                    "lease check inconclusive: expires_at `{}` is not an RFC 3339 time",
                    attempt.expires_at.as_deref().unwrap_or("")
                ),
            ));
        }
        Judge {
            attempt,
            expires,
            ended: attempt.ended_at.as_deref().and_then(parse_time),
            reasons,
            next: 1,
            gap_reported: false,
            calls: 0,
            events: 0,
            applied: HashMap::new(),
        }
    }

    fn sequence(&mut self, seq: u64) {
        if seq != self.next && !self.gap_reported {
            self.gap_reported = true;
            self.reasons.push(Reason::at(
                &Rule::MissingEvidence,
                seq,
                format!(
                    "missing evidence: expected sequence {}, found {seq} (sequences must be 1..n without gaps or repeats)",
                    self.next
                ),
            ));
        }
        self.next = self.next.max(seq.saturating_add(1));
    }

    /// One agent-side event, in sequence order.
    pub fn event(&mut self, e: &AgentEvent) {
        self.events += 1;
        self.sequence(e.sequence);
    }

    /// One tool call, in sequence order.
    pub fn call(&mut self, e: &ToolEvent) {
        self.calls += 1;
        self.sequence(e.sequence);
        let seq = e.sequence;
        match &e.result_status {
            ResultStatus::HarnessError => {
                let field = |k: &str| {
                    e.error
                        .as_ref()
                        .and_then(|v| v.get(k))
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string()
                };
                let code = field("code");
                let rule = match code.as_str() {
                    "lease_expired" => Rule::LeaseExpired,
                    "attempt_ended" => Rule::AttemptEnded,
                    "store_error" => Rule::StoreFailure,
                    _ => Rule::HarnessError,
                };
                self.reasons.push(Reason::at(
                    &rule,
                    seq,
                    format!("harness error at sequence {seq}: {code}: {}", field("message")),
                ));
            }
            ResultStatus::Unknown(status) => self.reasons.push(Reason::at(
                &Rule::UnknownStatus,
                seq,
                format!(
                    "unknown result_status `{status}` at sequence {seq}: the outcome of that call is unknown"
                ),
            )),
            _ if self.after_end(e) => self.reasons.push(Reason::at(
                &Rule::AttemptEnded,
                seq,
                format!(
                    "call at sequence {seq} ({}) was recorded after the attempt ended at {}",
                    e.timestamp,
                    self.attempt.ended_at.as_deref().unwrap_or("")
                ),
            )),
            _ => {
                if let Some(Ok(exp)) = &self.expires {
                    match parse_time(&e.timestamp) {
                        Some(t) if t > *exp => self.reasons.push(Reason::at(
                            &Rule::LeaseExpired,
                            seq,
                            format!(
                                "call at sequence {seq} ({}) arrived after the lease expired at {}",
                                e.timestamp,
                                self.attempt.expires_at.as_deref().unwrap_or("")
                            ),
                        )),
                        Some(_) => {}
                        None => self.reasons.push(Reason::at(
                            &Rule::LeaseExpired,
                            seq,
                            format!(
                                "lease check inconclusive: timestamp `{}` of sequence {seq} is not an RFC 3339 time",
                                e.timestamp
                            ),
                        )),
                    }
                }
            }
        }
        if let Some(key) = e.idempotency_key_ref.as_deref() {
            if e.is_write && matches!(e.result_status, ResultStatus::Ok | ResultStatus::Forwarded) {
                if let Some(first) = self.applied.get(key) {
                    self.reasons.push(Reason::at(
                        &Rule::DuplicateSideEffect,
                        seq,
                        format!(
                            "duplicate side effect: sequences {first} and {seq} are both applied writes with idempotency_key_ref {key}"
                        ),
                    ));
                } else {
                    self.applied.insert(key.to_string(), seq);
                }
            }
        }
    }

    /// A call stamped after the attempt's end (another process of a fleet that had not yet
    /// seen the end answered it): it counts as a late call, whatever its status.
    fn after_end(&self, e: &ToolEvent) -> bool {
        match (&self.ended, parse_time(&e.timestamp)) {
            (Some(end), Some(t)) => t > *end,
            _ => false,
        }
    }

    /// The verdict, after every call and event: the attempt's own marks (store failures,
    /// interruption, calls outside it, cleanup, nothing happened), then every check of a
    /// blocking contract that did not pass.
    pub fn finish(mut self, contracts: &[ContractResult]) -> Verdict {
        let a = self.attempt;
        // First: a forgotten token explains every contract reason after it (the tools look
        // "never called" because their calls went elsewhere), so the fix is said once, here.
        if a.outside_calls > 0 {
            let seen = a
                .outside
                .iter()
                .map(|o| o.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            self.reasons.push(Reason::new(
                &Rule::OutsideAttempt,
                format!(
                    "outside attempt: {} call(s) reached the default attempt during the run instead of this one: they carried no token of this attempt (no `Understudy-Attempt` header, a base URL without `/~<token>`, or proxy credentials dropped). Fix: call the attempt's base URL `$UNDERSTUDY_URL_<INTEGRATION>` (it carries the token), or send the header `Understudy-Attempt: $UNDERSTUDY_ATTEMPT` with every call to `$UNDERSTUDY_URL/<integration>`, or keep the credentials of `HTTPS_PROXY`; the other reasons below may only be this{}",
                    a.outside_calls,
                    if seen.is_empty() { String::new() } else { format!(". Calls: {seen}") }
                ),
            ));
        }
        if a.store_failures > 0 {
            self.reasons.push(Reason::new(
                &Rule::StoreFailure,
                format!(
                    "store failures: {} call(s) of this attempt were answered 500 `store_error`: their evidence is missing or unconfirmed",
                    a.store_failures
                ),
            ));
        }
        if a.interrupted {
            self.reasons.push(Reason::new(
                &Rule::Interrupted,
                "interrupted: the process serving this attempt died (or could not record a store failure) before its evidence was made durable; calls answered after the last flush may be missing, so the attempt cannot pass",
            ));
        }
        if let Some(cleanup) = &a.cleanup {
            let status = cleanup.get("status").and_then(Value::as_str);
            let remaining = cleanup.get("remaining_state_keys");
            if status != Some("verified") || remaining.and_then(Value::as_u64) != Some(0) {
                self.reasons.push(Reason::new(
                    &Rule::CleanupNotVerified,
                    format!(
                        "cleanup not verified: status {}, remaining_state_keys {}",
                        status.map_or_else(|| "missing".to_string(), |s| format!("`{s}`")),
                        remaining.map_or_else(|| "missing".to_string(), Value::to_string)
                    ),
                ));
            }
        }
        if self.calls == 0 && self.events == 0 && a.expect_calls {
            self.reasons.push(Reason::new(
                &Rule::NoCalls,
                "no calls: the attempt saw no tool call and no agent-side event, so nothing was judged (create it with \"expect_calls\": false, or run `understudy test --allow-no-calls`, when that is the point)",
            ));
        }
        self.reasons.extend(contract_reasons(contracts));
        Verdict {
            reasons: self.reasons,
        }
    }
}

/// One reason per check that did not pass, for every blocking contract that is not
/// `passed` (`contract:<id>:<check>`); advisory contracts contribute nothing.
pub fn contract_reasons(results: &[ContractResult]) -> Vec<Reason> {
    let mut out = Vec::new();
    for r in results {
        if r.risk != Risk::Blocking || r.status == Status::Passed {
            continue;
        }
        let mut any = false;
        for c in r.checks.iter().filter(|c| c.status != Status::Passed) {
            any = true;
            out.push(Reason::new(
                &Rule::Contract {
                    id: r.contract_id.clone(),
                    check: c.id.clone(),
                },
                format!(
                    "contract {}: {} — {}: {} ({})",
                    r.contract_id, r.status, c.id, c.evidence, c.status
                ),
            ));
        }
        if !any {
            out.push(Reason::new(
                &Rule::Contract {
                    id: r.contract_id.clone(),
                    check: "contract".into(),
                },
                format!("contract {}: {} — no check ran", r.contract_id, r.status),
            ));
        }
    }
    out
}

/// The answer of a verification (`POST …/verify`, `understudy verify --format json`):
/// `{"attempt_id","contract_results","passed","verdict","verdict_reasons"}`. `verdict` is the
/// attempt's own (its pinned contracts included); the reasons of `results` (contracts given
/// to this verification) are added. `passed` is `false` whenever the verdict fails, whatever
/// the contracts say. Returns whether it passed, and the answer.
pub fn verification(
    attempt_id: &str,
    results: &[ContractResult],
    verdict: &Verdict,
) -> (bool, Value) {
    let mut reasons = verdict.reasons.clone();
    for r in contract_reasons(results) {
        if !reasons.contains(&r) {
            reasons.push(r);
        }
    }
    let v = Verdict { reasons };
    let answer = serde_json::json!({
        "attempt_id": attempt_id,
        "contract_results": results,
        "passed": v.passed(),
        "verdict": v.word(),
        "verdict_reasons": v.reasons,
    });
    (v.passed(), answer)
}

/// The verdict of an attempt from its calls and events in any order (sorted here, calls
/// before events of one sequence), and its contract results: [`Judge`] in one call.
pub fn judge(
    attempt: &AttemptRecord,
    calls: &[ToolEvent],
    events: &[AgentEvent],
    contracts: &[ContractResult],
) -> Verdict {
    let mut c: Vec<&ToolEvent> = calls.iter().collect();
    c.sort_by_key(|e| e.sequence);
    let mut ev: Vec<&AgentEvent> = events.iter().collect();
    ev.sort_by_key(|e| e.sequence);
    let mut j = Judge::new(attempt);
    let (mut ci, mut ei) = (0, 0);
    while ci < c.len() || ei < ev.len() {
        let take_call = match (c.get(ci), ev.get(ei)) {
            (Some(a), Some(b)) => a.sequence <= b.sequence,
            (Some(_), None) => true,
            _ => false,
        };
        if take_call {
            j.call(c[ci]);
            ci += 1;
        } else {
            j.event(ev[ei]);
            ei += 1;
        }
    }
    j.finish(contracts)
}

fn parse_time(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc3339(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(seq: u64, status: &str) -> ToolEvent {
        ToolEvent {
            sequence: seq,
            execution_attempt_id: format!("e{seq}"),
            integration: "crm".into(),
            operation_id: Some("op".into()),
            revision: Some(1),
            variant: None,
            rule: None,
            is_write: false,
            arguments: json!({}),
            result: json!({}),
            result_status: status.into(),
            http_status: 200,
            latency_ms: 0.0,
            delay_ms: 0,
            idempotency_key_ref: None,
            trace_id: None,
            source: "mock".into(),
            error: None,
            timestamp: "2026-01-01T10:05:00Z".into(),
            fault: None,
        }
    }

    fn harness(seq: u64, code: &str) -> ToolEvent {
        ToolEvent {
            error: Some(json!({"code": code, "message": "m"})),
            ..call(seq, "harness_error")
        }
    }

    fn codes(a: &AttemptRecord, calls: &[ToolEvent]) -> Vec<String> {
        judge(a, calls, &[], &[])
            .reasons
            .into_iter()
            .map(|r| r.code)
            .collect()
    }

    #[test]
    fn every_attempt_rule_has_its_own_stable_code() {
        let codes: Vec<String> = Rule::ATTEMPT_RULES.iter().map(Rule::code).collect();
        assert_eq!(
            codes,
            [
                "harness_error",
                "store_failure",
                "lease_expired",
                "attempt_ended",
                "duplicate_side_effect",
                "missing_evidence",
                "unknown_status",
                "interrupted",
                "no_calls",
                "outside_attempt",
                "cleanup_not_verified"
            ]
        );
        let c = Rule::Contract {
            id: "book".into(),
            check: "tool[crm/book]".into(),
        };
        assert_eq!(c.code(), "contract:book:tool[crm/book]");
        let r = Reason::new(&c, "m");
        assert!(r.is(&c) && !r.is(&Rule::HarnessError));
    }

    #[test]
    fn harness_codes_map_to_their_rules_with_the_sequence() {
        let a = AttemptRecord::default();
        assert_eq!(
            codes(
                &a,
                &[
                    harness(1, "no_mock"),
                    harness(2, "lease_expired"),
                    harness(3, "attempt_ended"),
                    harness(4, "store_error"),
                ]
            ),
            [
                "harness_error",
                "lease_expired",
                "attempt_ended",
                "store_failure"
            ]
        );
        let v = judge(&a, &[call(1, "ok"), harness(2, "attempt_ended")], &[], &[]);
        assert_eq!(v.reasons[0].sequence, Some(2));
        assert_eq!(v.word(), "fail");
    }

    #[test]
    fn the_records_marks_fail_the_attempt() {
        let calls = [call(1, "ok")];
        let base = AttemptRecord::default();
        assert!(codes(&base, &calls).is_empty());
        let a = AttemptRecord {
            store_failures: 1,
            ..base.clone()
        };
        assert_eq!(codes(&a, &calls), ["store_failure"]);
        let a = AttemptRecord {
            outside_calls: 2,
            outside: vec!["GET /x: no token".into()],
            ..base.clone()
        };
        let v = judge(&a, &calls, &[], &[]);
        assert_eq!(v.reasons[0].code, "outside_attempt");
        assert!(v.reasons[0].message.contains("GET /x: no token"));
        let a = AttemptRecord {
            interrupted: true,
            ..base.clone()
        };
        assert_eq!(codes(&a, &calls), ["interrupted"]);
        // No call, no event: `no_calls` unless not expected.
        assert_eq!(codes(&base, &[]), ["no_calls"]);
        let a = AttemptRecord {
            expect_calls: false,
            ..base
        };
        assert!(codes(&a, &[]).is_empty());
    }

    #[test]
    fn a_call_stamped_after_the_end_fails_whatever_its_status() {
        let a = AttemptRecord {
            ended_at: Some("2026-01-01T10:05:00Z".into()),
            ..AttemptRecord::default()
        };
        // At the end instant: inside.
        assert!(codes(&a, &[call(1, "ok")]).is_empty());
        let late = ToolEvent {
            timestamp: "2026-01-01T10:05:00.001Z".into(),
            ..call(2, "ok")
        };
        assert_eq!(codes(&a, &[call(1, "ok"), late]), ["attempt_ended"]);
    }

    #[test]
    fn an_agent_event_alone_is_something_that_happened() {
        let a = AttemptRecord::default();
        let e = AgentEvent {
            sequence: 1,
            name: "said".into(),
            kind: crate::records::AgentEventKind::AgentMessage,
            test_run_id: None,
            text: None,
            data: None,
            timestamp: "2026-01-01T10:05:00Z".into(),
        };
        assert!(judge(&a, &[], &[e], &[]).passed());
    }

    #[test]
    fn the_fold_reports_one_gap_and_repeats() {
        let a = AttemptRecord::default();
        assert_eq!(
            codes(&a, &[call(1, "ok"), call(3, "ok"), call(5, "ok")]),
            ["missing_evidence"]
        );
        assert_eq!(
            codes(&a, &[call(1, "ok"), call(1, "ok")]),
            ["missing_evidence"]
        );
        assert_eq!(codes(&a, &[call(2, "ok")]), ["missing_evidence"]);
        assert!(codes(&a, &[call(2, "ok"), call(1, "ok")]).is_empty());
    }

    #[test]
    fn a_verdict_is_read_back_from_an_envelope_and_a_missing_one_is_an_error() {
        let v = Verdict {
            reasons: vec![Reason::at(&Rule::NoCalls, 3, "m")],
        };
        let env = json!({"verdict": v.word(), "verdict_reasons": v.reasons});
        assert_eq!(Verdict::from_envelope(&env).unwrap(), v);
        assert!(Verdict::from_envelope(&json!({})).is_err());
        assert!(Verdict::from_envelope(&json!({"verdict": "maybe"})).is_err());
        assert!(Verdict::from_envelope(&json!({"verdict": true})).is_err());
        assert!(
            Verdict::from_envelope(&json!({"verdict": "pass", "verdict_reasons": ["x"]})).is_err()
        );
        let old = Verdict::from_envelope(&json!({"verdict": "fail", "verdict_reasons": ["x"]}));
        assert_eq!(old.unwrap().reasons[0].code, "unknown");
        assert!(Verdict::from_envelope(&json!({"verdict": "pass"}))
            .unwrap()
            .passed());
    }

    #[test]
    fn verification_fails_whenever_the_verdict_fails() {
        let failing = Verdict {
            reasons: vec![Reason::new(&Rule::HarnessError, "m")],
        };
        let (passed, answer) = verification("a1", &[], &failing);
        assert!(!passed);
        assert_eq!(answer["passed"], false);
        assert_eq!(answer["verdict"], "fail");
        assert_eq!(answer["verdict_reasons"][0]["code"], "harness_error");
        let (passed, answer) = verification("a1", &[], &Verdict::default());
        assert!(passed);
        assert_eq!(answer["verdict"], "pass");
    }
}
