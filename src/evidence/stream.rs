//! The one writer of the evidence envelope ([`super::envelope::Envelope`]): it writes the
//! envelope as the attempt's timeline is read, chunk by chunk, and judges it in the same
//! pass ([`super::verdict::Judge`], bounded state), so `GET …/evidence` of an attempt with a
//! million events needs no more memory than one chunk. The in-memory envelope
//! ([`envelope_of`]) is written by the same function.
//!
//! Order of the members (that of [`super::envelope::Envelope`]): the head (record, pins,
//! state, marks, `last_sequence`), `tool_events` as they are read, then `events`,
//! `tool_input_errors`, `harness_errors` and `blocked_side_effects` — collected during the
//! same pass in a buffer that moves to an unlinked temporary file past [`SPILL_IN_MEMORY`]
//! bytes — then `contract_results`, `verdict_reasons`, `page` (paged reads) and `verdict`,
//! always last: a stream that breaks off (a read error, a dropped connection) never carries
//! a verdict, so no reader can take it for a pass.
//!
//! With a [`Window`] (`?after=SEQ&limit=N`) the lists hold only the entries of that page,
//! while the verdict and the contract results are over the whole timeline (every entry is
//! still read once, to judge it).
//!
//! Contracts: an attempt that pins tool-call contracts keeps the evaluator's view of every
//! entry ([`crate::evidence::verify::Item`], values redacted) until the end of the pass —
//! memory proportional to its history. The default attempt never pins contracts.

use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};

use serde::Serialize;
use serde_json::{Map, Value};

use super::envelope::{
    blocked_side_effect, call_item, evaluator_evidence, event_item, exported_call, exported_event,
    harness_error, head, input_error, pinned_results, Page, VerdictWord,
};
use super::verdict::{Judge, Verdict};
use crate::records::{AttemptRecord, EvidenceEntry};

/// Bytes a derived list keeps in memory before it moves to a temporary file.
pub const SPILL_IN_MEMORY: usize = 1 << 20;

/// The attempt as it stood when the read began: its record, its state, and its counter
/// (the timeline is `1..=last_sequence`; entries past it are not part of this read).
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    pub attempt: &'a AttemptRecord,
    pub final_state: &'a BTreeMap<String, Map<String, Value>>,
    pub last_sequence: u64,
    pub redact: &'a [String],
}

/// A page: the entries with `sequence > after`, at most `limit` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub after: u64,
    pub limit: u64,
}

/// Why a stream stopped before its verdict.
#[derive(Debug)]
pub enum StreamError {
    /// The store could not be read.
    Read(String),
    /// The output could not be written (the client went away).
    Write(std::io::Error),
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Read(e) => write!(f, "the evidence could not be read: {e}"),
            StreamError::Write(e) => write!(f, "the envelope could not be written: {e}"),
        }
    }
}

impl From<std::io::Error> for StreamError {
    fn from(e: std::io::Error) -> StreamError {
        StreamError::Write(e)
    }
}

impl From<serde_json::Error> for StreamError {
    fn from(e: serde_json::Error) -> StreamError {
        StreamError::Write(e.into())
    }
}

/// What a written envelope said: its verdict, and how many calls and agent-side events it
/// judged (the whole timeline, whatever the window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub verdict: Verdict,
    pub calls: u64,
    pub events: u64,
}

/// The next chunk of the timeline in sequence order (`None`: no more).
pub type Chunks<'a> = dyn FnMut() -> Result<Option<Vec<EvidenceEntry>>, String> + 'a;

/// Writes the envelope of `snap` to `out`, reading the timeline from `next`, and returns
/// the verdict it wrote with the counts it judged (module doc). `Err` leaves `out` without a verdict.
pub fn write_envelope(
    out: &mut dyn Write,
    snap: &Snapshot<'_>,
    window: Option<Window>,
    next: &mut Chunks<'_>,
) -> Result<Written, StreamError> {
    let redact = snap.redact;
    let attempt = snap.attempt;
    let mut h = serde_json::to_vec(&head(attempt, snap.final_state, snap.last_sequence, redact))?;
    h.pop(); // the closing brace: the timeline follows
    out.write_all(&h)?;
    out.write_all(b",\"tool_events\":[")?;

    let mut judge = Judge::new(attempt);
    let mut items = (!attempt.contracts.is_empty()).then(Vec::new);
    let (mut events, mut inputs, mut harness, mut blocked) =
        (Spill::new(), Spill::new(), Spill::new(), Spill::new());
    let mut calls_written = 0u64;
    let mut shown = 0u64;
    let mut last_shown = None;
    let mut more = false;
    while let Some(chunk) = next().map_err(StreamError::Read)? {
        for entry in chunk {
            let seq = entry.sequence();
            if seq > snap.last_sequence {
                continue; // written after the read began: not part of this snapshot
            }
            if seq <= attempt.rolled_through() {
                continue; // rolled out of the store: judged into the record's summary
            }
            let show = match window {
                None => true,
                Some(w) if seq > w.after => {
                    if shown < w.limit {
                        true
                    } else {
                        more = true;
                        false
                    }
                }
                Some(_) => false,
            };
            if show {
                shown += 1;
                last_shown = Some(seq);
            }
            match &entry {
                EvidenceEntry::Call(e) => {
                    judge.call(e);
                    if let Some(it) = &mut items {
                        it.push(call_item(e, redact));
                    }
                    if show {
                        if calls_written > 0 {
                            out.write_all(b",")?;
                        }
                        calls_written += 1;
                        serde_json::to_writer(&mut *out, &exported_call(e, redact))?;
                        if let Some(x) = input_error(e, redact) {
                            inputs.push(&x)?;
                        }
                        if let Some(x) = harness_error(e, redact) {
                            harness.push(&x)?;
                        }
                        if let Some(x) = blocked_side_effect(e, redact) {
                            blocked.push(&x)?;
                        }
                    }
                }
                EvidenceEntry::Agent(e) => {
                    judge.event(e);
                    if let Some(it) = &mut items {
                        it.push(event_item(e, redact));
                    }
                    if show {
                        events.push(&exported_event(e, redact))?;
                    }
                }
            }
        }
    }
    out.write_all(b"]")?;
    for (name, spill) in [
        ("events", &mut events),
        ("tool_input_errors", &mut inputs),
        ("harness_errors", &mut harness),
        ("blocked_side_effects", &mut blocked),
    ] {
        write!(out, ",\"{name}\":[")?;
        spill.copy_to(out)?;
        out.write_all(b"]")?;
    }
    judge.expect_last(snap.last_sequence);
    let (calls, agent_events) = judge.counts();
    let results = match items {
        Some(it) => pinned_results(
            attempt,
            &evaluator_evidence(attempt, snap.final_state, it, redact),
        ),
        None => Vec::new(),
    };
    let verdict = judge.finish(&results);
    out.write_all(b",\"contract_results\":")?;
    serde_json::to_writer(&mut *out, &results)?;
    out.write_all(b",\"verdict_reasons\":")?;
    serde_json::to_writer(&mut *out, &verdict.reasons)?;
    if let Some(w) = window {
        out.write_all(b",\"page\":")?;
        let page = Page {
            after: w.after,
            limit: w.limit,
            next_after: more.then_some(last_shown.unwrap_or(w.after)),
        };
        serde_json::to_writer(&mut *out, &page)?;
    }
    out.write_all(b",\"verdict\":")?;
    serde_json::to_writer(&mut *out, &VerdictWord::of(&verdict))?;
    out.write_all(b"}")?;
    out.flush()?;
    Ok(Written {
        verdict,
        calls,
        events: agent_events,
    })
}

/// The verdict of the timeline without writing it out: every entry is read and judged, none
/// is serialised (a window past every sequence).
pub fn judge_only(snap: &Snapshot<'_>, next: &mut Chunks<'_>) -> Result<Written, StreamError> {
    let window = Window {
        after: u64::MAX,
        limit: 1,
    };
    write_envelope(&mut std::io::sink(), snap, Some(window), next)
}

/// The items of one derived list, comma-separated: in memory, then (past
/// [`SPILL_IN_MEMORY`]) in a temporary file that no other process can open (created mode
/// 0600 and unlinked at once; it holds redacted evidence only).
struct Spill {
    buf: Vec<u8>,
    file: Option<std::fs::File>,
    n: u64,
}

impl Spill {
    fn new() -> Spill {
        Spill {
            buf: Vec::new(),
            file: None,
            n: 0,
        }
    }

    fn push<T: Serialize>(&mut self, item: &T) -> std::io::Result<()> {
        if self.n > 0 {
            self.buf.push(b',');
        }
        self.n += 1;
        serde_json::to_writer(&mut self.buf, item)?;
        if self.buf.len() > SPILL_IN_MEMORY {
            if self.file.is_none() {
                self.file = Some(temp_file()?);
            }
            if let Some(f) = &mut self.file {
                f.write_all(&self.buf)?;
            }
            self.buf.clear();
        }
        Ok(())
    }

    fn copy_to(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        if let Some(f) = &mut self.file {
            f.rewind()?;
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let n = f.read(&mut chunk)?;
                if n == 0 {
                    break;
                }
                out.write_all(&chunk[..n])?;
            }
        }
        out.write_all(&self.buf)
    }
}

fn temp_file() -> std::io::Result<std::fs::File> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "understudy-evidence-{}-{}.spill",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true).write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let f = opts.open(&path)?;
    let _ = std::fs::remove_file(&path);
    Ok(f)
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;

/// The docs/src/reference/evidence-envelope.md envelope of one attempt without agent-side events (see [`envelope_of`]).
pub fn envelope(
    attempt: &AttemptRecord,
    events: &[crate::records::ToolEvent],
    final_state: &BTreeMap<String, Map<String, Value>>,
    redact: &[String],
) -> Value {
    envelope_of(&super::envelope::Inputs {
        attempt,
        calls: events,
        events: &[],
        live_state: final_state,
        redact,
    })
}

/// The envelope of one attempt held in memory, as a JSON value: written by the one writer
/// of every envelope ([`write_envelope`]), so it is byte for byte what
/// `GET …/evidence` streams for the same evidence. The last sequence is the highest read.
pub fn envelope_of(inputs: &super::envelope::Inputs<'_>) -> Value {
    let entries = inputs.timeline();
    let last = entries.last().map_or(0, EvidenceEntry::sequence);
    let snap = Snapshot {
        attempt: inputs.attempt,
        final_state: inputs.final_state(),
        last_sequence: last,
        redact: inputs.redact,
    };
    let mut out = Vec::new();
    let mut chunk = Some(entries);
    let written = write_envelope(&mut out, &snap, None, &mut || Ok(chunk.take()));
    match written {
        Ok(_) => serde_json::from_slice(&out).unwrap_or(Value::Null),
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    }
}
