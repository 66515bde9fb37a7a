use super::*;
use crate::evidence::envelope::Envelope;
use crate::records::{AgentEvent, AgentEventKind, ToolEvent};
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
        is_write: status == "blocked",
        arguments: json!({"phone": "+1555", "n": seq}),
        result: json!({"ok": true}),
        result_status: status.into(),
        http_status: 200,
        latency_ms: 0.5,
        delay_ms: 0,
        idempotency_key_ref: None,
        trace_id: None,
        source: "mock".into(),
        error: (status.ends_with("error"))
            .then(|| json!({"code": "no_mock", "message": "m", "path": "/x"})),
        timestamp: "2026-01-01T10:05:00Z".into(),
        fault: None,
    }
}

fn agent(seq: u64) -> AgentEvent {
    AgentEvent {
        sequence: seq,
        name: "said".into(),
        kind: AgentEventKind::AgentMessage,
        test_run_id: None,
        text: Some("hello".into()),
        data: Some(json!({"phone": "+1"})),
        timestamp: "2026-01-01T10:05:00Z".into(),
    }
}

/// A timeline of every kind of entry: ok, input error, harness error, blocked, agent event.
fn timeline(n: u64) -> Vec<EvidenceEntry> {
    (1..=n)
        .map(|s| match s % 5 {
            0 => EvidenceEntry::Agent(agent(s)),
            1 => EvidenceEntry::Call(call(s, "ok")),
            2 => EvidenceEntry::Call(call(s, "input_error")),
            3 => EvidenceEntry::Call(call(s, "harness_error")),
            _ => EvidenceEntry::Call(call(s, "blocked")),
        })
        .collect()
}

fn write(
    a: &AttemptRecord,
    entries: &[EvidenceEntry],
    last: u64,
    window: Option<Window>,
    chunk: usize,
) -> (Vec<u8>, Result<Verdict, StreamError>) {
    let state = BTreeMap::new();
    let snap = Snapshot {
        attempt: a,
        final_state: &state,
        last_sequence: last,
        redact: &["phone".to_string()],
    };
    let mut chunks = entries.chunks(chunk).map(<[EvidenceEntry]>::to_vec);
    let mut out = Vec::new();
    let r = write_envelope(&mut out, &snap, window, &mut || Ok(chunks.next()));
    (out, r.map(|w| w.verdict))
}

#[test]
fn the_stream_is_the_typed_envelope_byte_for_byte_and_the_one_verdict() {
    let a = AttemptRecord {
        attempt_id: "a1".into(),
        ..AttemptRecord::default()
    };
    let entries = timeline(23);
    let (bytes, verdict) = write(&a, &entries, 23, None, 4);
    let verdict = verdict.unwrap();
    let env: Envelope = serde_json::from_slice(&bytes).expect("a typed envelope");
    // Re-serialised, the typed value is exactly what was streamed: same members, same order.
    assert_eq!(serde_json::to_vec(&env).unwrap(), bytes);
    assert_eq!(env.tool_events.len(), 19);
    assert_eq!(env.events.len(), 4);
    assert_eq!(env.tool_input_errors.len(), 5);
    assert_eq!(env.harness_errors.len(), 5);
    assert_eq!(env.blocked_side_effects.len(), 4);
    assert_eq!(env.head.last_sequence, 23);
    assert_eq!(env.tool_events[0].arguments["phone"], "[redacted]");
    assert_eq!(env.events[0].data.as_ref().unwrap()["phone"], "[redacted]");
    // The verdict written is the one judge's over the same entries.
    let calls: Vec<ToolEvent> = entries
        .iter()
        .filter_map(|e| match e {
            EvidenceEntry::Call(c) => Some(c.clone()),
            _ => None,
        })
        .collect();
    let events: Vec<AgentEvent> = entries
        .iter()
        .filter_map(|e| match e {
            EvidenceEntry::Agent(c) => Some(c.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        verdict,
        crate::evidence::verdict::judge(&a, &calls, &events, &[])
    );
    assert_eq!(env.verdict, VerdictWord::Fail);
    assert_eq!(env.verdict_reasons, verdict.reasons);
    // The verdict is the last member.
    assert!(bytes.ends_with(b",\"verdict\":\"fail\"}"));
}

#[test]
fn pages_cover_the_timeline_once_and_each_carries_the_whole_verdict() {
    let a = AttemptRecord::default();
    let entries = timeline(23);
    let (_, whole) = write(&a, &entries, 23, None, 7);
    let whole = whole.unwrap();
    let mut after = 0;
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let (bytes, v) = write(&a, &entries, 23, Some(Window { after, limit: 5 }), 7);
        assert_eq!(v.unwrap(), whole);
        let env: Envelope = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(serde_json::to_vec(&env).unwrap(), bytes);
        pages += 1;
        seen.extend(env.tool_events.iter().map(|e| e.sequence));
        seen.extend(env.events.iter().map(|e| e.sequence));
        let page = env.page.unwrap();
        assert_eq!((page.after, page.limit), (after, 5));
        match page.next_after {
            Some(n) => {
                assert!(n > after);
                after = n;
            }
            None => break,
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (1..=23).collect::<Vec<_>>());
    assert_eq!(pages, 5);
    // Past the end: an empty last page.
    let (bytes, _) = write(
        &a,
        &entries,
        23,
        Some(Window {
            after: 23,
            limit: 5,
        }),
        7,
    );
    let env: Envelope = serde_json::from_slice(&bytes).unwrap();
    assert!(env.tool_events.is_empty() && env.page.unwrap().next_after.is_none());
}

#[test]
fn a_read_error_leaves_no_verdict_and_a_short_read_fails_missing_evidence() {
    let a = AttemptRecord::default();
    let state = BTreeMap::new();
    let snap = Snapshot {
        attempt: &a,
        final_state: &state,
        last_sequence: 10,
        redact: &[],
    };
    let mut first = Some(timeline(3));
    let mut out = Vec::new();
    let r = write_envelope(&mut out, &snap, None, &mut || match first.take() {
        Some(c) => Ok(Some(c)),
        None => Err("disk on fire".into()),
    });
    assert!(matches!(r, Err(StreamError::Read(_))));
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("\"verdict\""), "{text}");
    assert!(serde_json::from_str::<Value>(&text).is_err());
    // The counter says 10 but only 1..=4 of ok calls can be read: fail, never a pass.
    let oks: Vec<EvidenceEntry> = (1..=4)
        .map(|s| EvidenceEntry::Call(call(s, "ok")))
        .collect();
    let (_, v) = write(&a, &oks, 10, None, 2);
    let v = v.unwrap();
    assert_eq!(v.reasons.len(), 1, "{v:?}");
    assert_eq!(v.reasons[0].code, "missing_evidence");
    assert_eq!(v.reasons[0].sequence, Some(5));
    // Entries past the snapshot's counter are not part of it.
    let (bytes, v) = write(&a, &oks, 2, None, 2);
    assert!(v.unwrap().passed());
    let env: Envelope = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(env.tool_events.len(), 2);
}

#[test]
fn long_derived_lists_spill_and_come_back_whole() {
    let a = AttemptRecord::default();
    let big = "x".repeat(2000);
    let entries: Vec<EvidenceEntry> = (1..=1500)
        .map(|s| {
            let mut c = call(s, "input_error");
            c.error = Some(json!({"code": "bad", "message": big}));
            EvidenceEntry::Call(c)
        })
        .collect();
    let (bytes, v) = write(&a, &entries, 1500, None, 100);
    assert!(v.unwrap().passed(), "input errors alone never fail");
    let env: Envelope = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(env.tool_input_errors.len(), 1500);
    assert!(
        env.tool_input_errors
            .iter()
            .enumerate()
            .all(|(i, e)| e.sequence == i as u64 + 1),
        "in order"
    );
    assert!(bytes.len() > 2 * SPILL_IN_MEMORY);
}

#[test]
fn reasons_of_one_code_are_bounded_and_the_rest_counted() {
    let a = AttemptRecord::default();
    let entries: Vec<EvidenceEntry> = (1..=250)
        .map(|s| EvidenceEntry::Call(call(s, "harness_error")))
        .collect();
    let (_, v) = write(&a, &entries, 250, None, 64);
    let v = v.unwrap();
    let max = crate::evidence::verdict::MAX_REASONS_PER_CODE as usize;
    assert_eq!(v.reasons.len(), max + 1);
    assert!(v.reasons.iter().all(|r| r.code == "harness_error"));
    assert!(
        v.reasons[max].message.contains("150 more"),
        "{:?}",
        v.reasons[max]
    );
}

#[test]
fn judging_only_reads_everything_and_writes_nothing() {
    let a = AttemptRecord::default();
    let entries = timeline(23);
    let (_, whole) = write(&a, &entries, 23, None, 7);
    let state = BTreeMap::new();
    let snap = Snapshot {
        attempt: &a,
        final_state: &state,
        last_sequence: 23,
        redact: &[],
    };
    let mut chunks = entries.chunks(7).map(<[EvidenceEntry]>::to_vec);
    let w = judge_only(&snap, &mut || Ok(chunks.next())).unwrap();
    assert_eq!(w.verdict, whole.unwrap());
    assert_eq!((w.calls, w.events), (19, 4));
}

#[test]
fn a_stream_error_says_which_side_failed() {
    let read = StreamError::Read("disk gone".into()).to_string();
    assert_eq!(read, "the evidence could not be read: disk gone");
    let write = StreamError::Write(std::io::Error::other("peer left")).to_string();
    assert_eq!(write, "the envelope could not be written: peer left");
}

/// A derived list holds at most about [`SPILL_IN_MEMORY`] bytes in memory, whatever its
/// length (the rest waits in the temporary file), and a short list makes no file; both give
/// back the same bytes.
#[test]
fn a_spill_keeps_a_bounded_part_in_memory_and_a_short_list_makes_no_file() {
    let item = "x".repeat(1000);
    let mut short = Spill::new();
    for _ in 0..10 {
        short.push(&item).unwrap();
    }
    assert!(short.file.is_none(), "a short list stays in memory");
    let mut long = Spill::new();
    for _ in 0..3000 {
        long.push(&item).unwrap();
        assert!(long.buf.len() <= SPILL_IN_MEMORY + item.len() + 3);
    }
    assert!(long.file.is_some(), "3 MB moved to the file");
    for (s, n) in [(&mut short, 10), (&mut long, 3000)] {
        let mut out = Vec::new();
        s.copy_to(&mut out).unwrap();
        let back: Vec<String> = serde_json::from_slice(&[b"[", &out[..], b"]"].concat()).unwrap();
        assert_eq!(back.len(), n);
        assert!(back.iter().all(|b| *b == item));
    }
}
