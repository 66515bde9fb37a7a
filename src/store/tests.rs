//! Tests of the store through its facade: opening and locking, lanes, depth limits, and the
//! journal's replay and checkpoints.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;

use serde_json::{Map, Value};

use super::embedded::{EVENTS_DIR, SLED_DIR};
use super::events::{self, Lanes};
use super::journal::{parse_frames, JOURNAL_CHUNK, JOURNAL_FILE, JOURNAL_LIMIT, JOURNAL_MAGIC};
use super::*;
use crate::util::time::now_rfc3339;

#[cfg(unix)]
#[test]
fn open_creates_private_dirs() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data").join("dir");
    let store = Store::open(&dir).unwrap();
    for d in [dir.clone(), dir.join(SLED_DIR)] {
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
    }
    assert_eq!(store.data_dir(), dir.as_path());
}

#[test]
fn a_second_open_of_the_same_dir_is_locked_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let _first = Store::open(tmp.path()).unwrap();
    let err = Store::open(tmp.path())
        .err()
        .expect("second open must fail");
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&tmp.path().display().to_string()), "{msg}");
    assert!(
        msg.contains("/_understudy/api/attempts/{id}/evidence"),
        "{msg}"
    );
    assert!(msg.contains("--url http://HOST:PORT"), "{msg}");
}

#[test]
fn open_existing_does_not_create_a_missing_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nope");
    let err = Store::open_existing(&dir).err().unwrap();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("nope"));
    assert!(!dir.exists());
}

#[test]
fn dropping_the_store_releases_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    for _ in 0..3 {
        let s = Store::open(tmp.path()).unwrap();
        drop(s);
    }
}

/// A store with attempts `att` and `other`, and an event to record.
fn store_with_attempt(dir: &Path) -> (Store, ToolEvent) {
    let store = Store::open(dir).unwrap();
    let mut a = AttemptRecord {
        attempt_id: "att".into(),
        token_hash: "h".into(),
        secret: String::new(),
        test_run_id: None,
        started_at: now_rfc3339(),
        ended_at: None,
        expires_at: None,
        pins: Default::default(),
        revision_set: None,
        variants: BTreeMap::new(),
        is_default: false,
        cleanup: None,
        contracts: Default::default(),
        final_state: None,
        faults: BTreeMap::new(),
        durability: Default::default(),
        interrupted: false,
        ..Default::default()
    };
    store.put_attempt(&a).unwrap();
    a.attempt_id = "other".into();
    a.token_hash = "h2".into();
    store.put_attempt(&a).unwrap();
    let event = ToolEvent {
        sequence: 0,
        execution_attempt_id: "att".into(),
        integration: "crm".into(),
        operation_id: Some("op".into()),
        revision: Some(1),
        variant: None,
        rule: None,
        is_write: false,
        arguments: Value::Null,
        result: Value::Null,
        result_status: "ok".into(),
        http_status: 200,
        latency_ms: 0.0,
        delay_ms: 0,
        idempotency_key_ref: None,
        trace_id: None,
        source: "mock".into(),
        error: None,
        timestamp: now_rfc3339(),
        fault: None,
    };
    (store, event)
}

/// Calls write no sequence counter to sled (their journal frames carry it; the lane holds it
/// in memory); a checkpoint saves it, and a reopened store continues from it.
#[tokio::test]
async fn the_counter_is_saved_by_checkpoints_not_by_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, event) = store_with_attempt(tmp.path());
    let saved = |s: &Store| s.embedded().saved_counter("att").unwrap();
    let call = || CallRecord {
        event: event.clone(),
        state: None,
        result_json: None,
    };
    for n in 1..=3 {
        assert_eq!(store.record_call("att", call()).await.unwrap(), n);
    }
    assert_eq!(saved(&store), 0, "no counter write per call");
    // Readers count what the lane counts: the third event is no missing tail.
    assert_eq!(store.evidence("att").unwrap().len(), 3);
    store.flush_now().unwrap();
    assert_eq!(saved(&store), 3);
    assert_eq!(store.record_call("att", call()).await.unwrap(), 4);
    drop(store);
    let store = Store::open(tmp.path()).unwrap();
    assert_eq!(saved(&store), 4, "the closing checkpoint saved it");
    assert_eq!(store.record_call("att", call()).await.unwrap(), 5);
    let seqs: Vec<u64> = store
        .evidence("att")
        .unwrap()
        .iter()
        .map(|e| e.sequence)
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn evidence_files_open_stay_under_the_cap_and_reopen_where_they_left_off() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, event) = store_with_attempt(tmp.path());
    let cap = events::lane_cap(events::open_files_limit());
    let n = cap + 40;
    let mut a = store.attempt("att").unwrap().unwrap();
    // Every attempt first (each a checkpoint), then the calls: no checkpoint between them,
    // so every lane is dirty when the next one opens.
    for i in 0..n {
        a.attempt_id = format!("a{i}");
        a.token_hash = format!("t{i}");
        store.put_attempt(&a).unwrap();
    }
    for _ in 0..2 {
        for i in 0..n {
            let rec = CallRecord {
                event: event.clone(),
                state: None,
                result_json: None,
            };
            store.record_call(&format!("a{i}"), rec).await.unwrap();
            assert!(store.embedded().journal.lanes.open_count() <= cap);
        }
    }
    // Every attempt continues its numbering, closed lane or not.
    for i in [0, 1, n / 2, n - 1] {
        let id = format!("a{i}");
        let rec = CallRecord {
            event: event.clone(),
            state: None,
            result_json: None,
        };
        assert_eq!(store.record_call(&id, rec).await.unwrap(), 3, "{id}");
        let seqs: Vec<u64> = store
            .evidence(&id)
            .unwrap()
            .iter()
            .map(|e| e.sequence)
            .collect();
        assert_eq!(seqs, [1, 2, 3], "{id}");
    }
}

#[test]
fn at_the_cap_the_least_recently_used_idle_lane_is_closed_with_its_events() {
    let tmp = tempfile::tempdir().unwrap();
    // The counters closing saves, where a reopened lane reads them (sled's `meta` tree in
    // the store).
    let saved = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::<String, u64>::new()));
    let into = saved.clone();
    let lanes = Lanes::new(
        tmp.path().to_path_buf(),
        4,
        Box::new(move |id, last| {
            into.lock().unwrap().insert(id.to_string(), last);
            Ok(())
        }),
    );
    let open = |id: &str, last: u64| lanes.open(id, move || Ok(last)).unwrap();
    for id in ["a", "b", "c", "d"] {
        // As `write_call` does: the frame, then the lane's counter.
        let lane = open(id, 0);
        let mut l = lock(&lane);
        events::append(&mut l, 1, b"{}").unwrap();
        l.last = 1;
    }
    // `a` is the least recently used but in use: `b`, the next, is closed instead.
    let held = open("a", 0);
    open("e", 0);
    assert_eq!(lanes.open_count(), 4);
    assert!(lanes.is_open("a") && !lanes.is_open("b"));
    let bytes = std::fs::read(events::file_path(tmp.path(), "b")).unwrap();
    assert_eq!(events::parse(&bytes).0, vec![(1, &b"{}"[..])]);
    // Closed, its counter was saved (calls do not write it); reopened from it, `b`
    // continues after its last event.
    let counter = saved.lock().unwrap().get("b").copied();
    assert_eq!(counter, Some(1));
    let b = open("b", counter.unwrap());
    let reopened = {
        let l = lock(&b);
        (l.last, l.len)
    };
    assert_eq!(reopened, (1, bytes.len() as u64));
    drop(b);
    assert!(
        !lanes.is_open("c"),
        "c was the least recently used idle lane"
    );
    // With every lane in use, a new one opens past the cap rather than fail.
    let all: Vec<_> = ["a", "b", "d", "e"].iter().map(|id| open(id, 1)).collect();
    open("f", 0);
    assert_eq!(lanes.open_count(), 5);
    drop((held, all));
}

#[tokio::test]
async fn a_call_too_deep_to_read_back_is_refused_and_evidence_stays_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, mut event) = store_with_attempt(tmp.path());
    let mut deep = Value::from(1);
    for _ in 0..MAX_STORED_DEPTH {
        deep = Value::Array(vec![deep]);
    }
    event.result = deep.clone(); // exactly the limit: kept
    let ok = CallRecord {
        event: event.clone(),
        state: None,
        result_json: None,
    };
    assert_eq!(store.record_call("att", ok).await.unwrap(), 1);
    event.result = Value::Array(vec![deep]);
    let err = store
        .record_call(
            "att",
            CallRecord {
                event,
                state: None,
                result_json: None,
            },
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("result nests more than 100"),
        "{err}"
    );
    assert_eq!(store.evidence("att").unwrap().len(), 1);
}

fn header_epoch(journal: &[u8]) -> u64 {
    assert_eq!(&journal[..8], JOURNAL_MAGIC);
    u64::from_le_bytes(journal[8..16].try_into().unwrap())
}

#[tokio::test]
async fn an_uncheckpointed_journal_is_replayed_at_open_and_a_torn_tail_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let journal_copy;
    {
        let (store, event) = store_with_attempt(tmp.path());
        for i in 0..3 {
            let mut state = Map::new();
            state.insert("n".into(), Value::from(i));
            let mut event = event.clone();
            event.arguments = serde_json::json!({ "i": i });
            store
                .record_call(
                    "att",
                    CallRecord {
                        event,
                        state: Some(("crm".into(), state)),
                        result_json: None,
                    },
                )
                .await
                .unwrap();
        }
        // What a crash would leave: the journal as committed, sled possibly behind.
        journal_copy = std::fs::read(tmp.path().join(JOURNAL_FILE)).unwrap();
        assert!(
            !journal_copy.is_empty(),
            "calls are committed to the journal"
        );
    }
    // Closing checkpointed: the journal's epoch moved on, so it holds no frame to replay.
    let closed = std::fs::read(tmp.path().join(JOURNAL_FILE)).unwrap();
    let epoch = header_epoch(&closed);
    assert!(epoch > header_epoch(&journal_copy));
    assert_eq!(parse_frames(&closed[16..], epoch).0.len(), 0);
    // Wipe the calls from sled and put the journal back with a torn frame after it.
    {
        let db = sled::open(tmp.path().join(SLED_DIR)).unwrap();
        for t in ["state", "meta"] {
            db.open_tree(t).unwrap().clear().unwrap();
        }
        db.flush().unwrap();
    }
    // …and the evidence files: what a crash before their checkpoint could leave (the
    // other attempt's file keeps a torn tail to cut).
    let events = tmp.path().join(EVENTS_DIR);
    std::fs::remove_file(events::file_path(&events, "att")).unwrap();
    std::fs::write(events::file_path(&events, "other"), [9, 0, 0, 0, 1]).unwrap();
    let mut torn = journal_copy.clone();
    let (frames, valid) = parse_frames(&torn[16..], header_epoch(&torn));
    assert_eq!(frames.len(), 3);
    torn[16 + valid..16 + valid + 7].copy_from_slice(&[200, 0, 0, 0, 1, 2, 3]);
    std::fs::write(tmp.path().join(JOURNAL_FILE), &torn).unwrap();

    let store = Store::open(tmp.path()).unwrap();
    let events = store.evidence("att").unwrap();
    assert_eq!(
        events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(events[2].arguments["i"], 2);
    assert_eq!(store.state("att").unwrap()["crm"]["n"], 2);
    // Numbering continues after the replayed calls; other attempts start at 1.
    let event = events[0].clone();
    let rec = CallRecord {
        event,
        state: None,
        result_json: None,
    };
    assert_eq!(store.record_call("att", rec.clone()).await.unwrap(), 4);
    assert_eq!(store.record_call("other", rec).await.unwrap(), 1);
}

#[tokio::test]
async fn past_the_limit_the_journal_checkpoints_and_reuses_its_space() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, event) = store_with_attempt(tmp.path());
    let big = "x".repeat(100 * 1024);
    let calls = (JOURNAL_LIMIT / (100 * 1024)) * 3 / 2; // ~1.5 times the limit
    for i in 0..calls {
        let mut e = event.clone();
        e.arguments = serde_json::json!({ "i": i, "pad": big });
        let rec = CallRecord {
            event: e,
            state: None,
            result_json: None,
        };
        assert_eq!(store.record_call("att", rec).await.unwrap(), i + 1);
    }
    let size = std::fs::metadata(tmp.path().join(JOURNAL_FILE))
        .unwrap()
        .len();
    assert!(
        size <= JOURNAL_LIMIT + 2 * JOURNAL_CHUNK,
        "the journal is reused after a checkpoint, not grown: {size} bytes"
    );
    let journal = std::fs::read(tmp.path().join(JOURNAL_FILE)).unwrap();
    assert!(
        header_epoch(&journal) >= 2,
        "a checkpoint started a new epoch"
    );
    drop(store);
    let store = Store::open(tmp.path()).unwrap();
    let events = store.evidence("att").unwrap();
    assert_eq!(events.len() as u64, calls);
    assert_eq!(events.last().unwrap().arguments["i"], calls - 1);
}

fn agent_event(name: &str) -> crate::records::AgentEvent {
    crate::records::AgentEvent {
        sequence: 0,
        name: name.into(),
        kind: crate::records::AgentEventKind::AgentMessage,
        test_run_id: Some("run".into()),
        text: Some("booked".into()),
        data: Some(serde_json::json!({"amount": "12.50"})),
        timestamp: now_rfc3339(),
    }
}

#[tokio::test]
async fn agent_events_share_the_sequence_with_calls_and_survive_a_journal_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let journal_copy;
    {
        let (store, event) = store_with_attempt(tmp.path());
        let call = || CallRecord {
            event: event.clone(),
            state: None,
            result_json: None,
        };
        assert_eq!(store.record_call("att", call()).await.unwrap(), 1);
        assert_eq!(
            store
                .record_agent_event("att", agent_event("said"))
                .await
                .unwrap(),
            2
        );
        assert_eq!(store.record_call("att", call()).await.unwrap(), 3);
        let t = store.timeline("att").unwrap();
        assert_eq!(
            t.iter().map(|e| e.sequence()).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        match &t[1] {
            crate::records::EvidenceEntry::Agent(a) => {
                assert_eq!((a.sequence, a.name.as_str()), (2, "said"));
                assert_eq!(a.data.as_ref().unwrap()["amount"], "12.50");
            }
            other => panic!("{other:?}"),
        }
        // `evidence` is the calls alone.
        let calls: Vec<u64> = store
            .evidence("att")
            .unwrap()
            .iter()
            .map(|e| e.sequence)
            .collect();
        assert_eq!(calls, [1, 3]);
        journal_copy = std::fs::read(tmp.path().join(JOURNAL_FILE)).unwrap();
    }
    // A crash before the checkpoint: the evidence file and the counters gone, the journal
    // as committed. The replay puts the event back where it was.
    {
        let db = sled::open(tmp.path().join(SLED_DIR)).unwrap();
        db.open_tree("meta").unwrap().clear().unwrap();
        db.flush().unwrap();
    }
    let events = tmp.path().join(EVENTS_DIR);
    std::fs::remove_file(events::file_path(&events, "att")).unwrap();
    std::fs::write(tmp.path().join(JOURNAL_FILE), &journal_copy).unwrap();
    let store = Store::open(tmp.path()).unwrap();
    let t = store.timeline("att").unwrap();
    assert_eq!(t.len(), 3);
    assert!(matches!(&t[1], crate::records::EvidenceEntry::Agent(a) if a.name == "said"));
    assert_eq!(
        store
            .record_agent_event("att", agent_event("next"))
            .await
            .unwrap(),
        4
    );
}

/// Issue 20: an attempt record stores the id of its revision set, the set is stored once for
/// every attempt that pins it, and a record written before revision sets (its pins inline)
/// still reads.
#[test]
fn attempts_store_one_revision_set_and_old_records_with_inline_pins_still_read() {
    let tmp = tempfile::tempdir().unwrap();
    let pins: crate::records::Pins = BTreeMap::from([(
        "crm/op".to_string(),
        crate::records::Pin {
            revision: 3,
            contract_hash: "sha256:c".into(),
        },
    )])
    .into();
    let rec = |id: &str| AttemptRecord {
        attempt_id: id.into(),
        token_hash: format!("h-{id}"),
        started_at: now_rfc3339(),
        pins: pins.clone(),
        ..AttemptRecord::default()
    };
    {
        let store = Store::open(tmp.path()).unwrap();
        store.put_attempt(&rec("a")).unwrap();
        store.put_attempt(&rec("b")).unwrap();
        // The stored form names the set and lists no pin.
        for id in ["a", "b"] {
            let raw = store.embedded().attempt(id).unwrap().unwrap();
            assert!(raw.pins.is_empty(), "{raw:?}");
            assert_eq!(raw.revision_set.as_deref(), Some(pins.id()));
        }
        assert_eq!(
            store.embedded().revision_sets.len(),
            1,
            "one set, stored once"
        );
        // A record in the format of earlier versions: pins inline, no set.
        store.embedded().put_attempt(&rec("old")).unwrap();
    }
    // Read back by a new process (nothing cached).
    let store = Store::open(tmp.path()).unwrap();
    for id in ["a", "b", "old"] {
        let got = store.attempt(id).unwrap().unwrap();
        assert_eq!(got.pins, pins, "{id}");
        assert_eq!(got.revision_set, None, "resolved in memory");
    }
    let all = store.attempts().unwrap();
    assert_eq!(all.len(), 3);
    assert!(all.iter().all(|a| a.pins == pins));
    // The two new records share one set in memory too.
    let a = store.attempt("a").unwrap().unwrap();
    let b = store.attempt_by_token_hash("h-b").unwrap().unwrap();
    assert!(a.pins.same(&b.pins));
}

#[test]
fn a_record_naming_a_missing_revision_set_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).unwrap();
    let rec = AttemptRecord {
        attempt_id: "x".into(),
        token_hash: "hx".into(),
        revision_set: Some("rs_gone".into()),
        ..AttemptRecord::default()
    };
    store.embedded().put_attempt(&rec).unwrap();
    let e = store.attempt("x").unwrap_err().to_string();
    assert!(e.contains("rs_gone") && e.contains("attempt x"), "{e}");
}

/// Durability `attempt`: the answer does not wait for the group commit (the flusher is held
/// and the acknowledgement still returns), the flusher commits the frame in the background
/// with no waiter at all, and a verdict read's [`Store::make_durable`] waits for a commit.
#[tokio::test]
async fn attempt_durability_answers_before_the_commit_and_flushes_in_the_background() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, event) = store_with_attempt(tmp.path());
    let call = || CallRecord {
        event: event.clone(),
        state: None,
        result_json: None,
    };
    let before = store.flush_count();
    store.pause_flushes();
    assert_eq!(store.write_call("att", call()).unwrap(), 1);
    // With the flusher held, only an acknowledgement that does not wait can return.
    store.acknowledge(Durability::Attempt).await.unwrap();
    assert_eq!(store.flush_count(), before, "nothing committed yet");
    store.resume_flushes();
    // No waiter anywhere: only the background trigger commits it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while store.flush_count() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the background flush never came"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let committed = store.flush_count();
    // A verdict read waits for a commit of its own (covering everything written so far).
    assert_eq!(store.write_call("att", call()).unwrap(), 2);
    store.acknowledge(Durability::Attempt).await.unwrap();
    store.make_durable(Durability::Attempt).await.unwrap();
    assert!(store.flush_count() > committed);
    assert_eq!(store.evidence("att").unwrap().len(), 2);
    // Durability `call` still waits: the default path is unchanged.
    store.pause_flushes();
    assert_eq!(store.write_call("att", call()).unwrap(), 3);
    let waiting = store.acknowledge(Durability::Call);
    tokio::pin!(waiting);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(
        waiting.as_mut().poll(&mut cx).is_pending(),
        "a `call` acknowledgement waits for the commit"
    );
    store.resume_flushes();
    waiting.await.unwrap();
}

/// The open marker: a clean close removes it and the next open interrupts nothing; found at
/// open (the last holder died), every open attempt with durability `attempt` is marked
/// `interrupted`, durably — ended attempts and `call` attempts are left alone.
#[test]
fn an_unclean_open_interrupts_open_attempt_durability_attempts_only() {
    use super::embedded::OPEN_MARKER;
    let tmp = tempfile::tempdir().unwrap();
    let rec = |id: &str, durability: Durability, ended: bool| AttemptRecord {
        attempt_id: id.into(),
        token_hash: format!("h-{id}"),
        started_at: now_rfc3339(),
        ended_at: ended.then(now_rfc3339),
        durability,
        ..AttemptRecord::default()
    };
    {
        let store = Store::open(tmp.path()).unwrap();
        assert!(tmp.path().join(OPEN_MARKER).is_file(), "marked while open");
        store
            .put_attempt(&rec("lazy", Durability::Attempt, false))
            .unwrap();
        store
            .put_attempt(&rec("lazy-ended", Durability::Attempt, true))
            .unwrap();
        store
            .put_attempt(&rec("eager", Durability::Call, false))
            .unwrap();
    }
    assert!(!tmp.path().join(OPEN_MARKER).exists(), "a clean close");
    let interrupted = |s: &Store, id: &str| s.attempt(id).unwrap().unwrap().interrupted;
    {
        let store = Store::open(tmp.path()).unwrap();
        assert!(
            !interrupted(&store, "lazy"),
            "a clean restart interrupts nothing"
        );
    }
    // As a killed process leaves it.
    std::fs::write(tmp.path().join(OPEN_MARKER), b"").unwrap();
    {
        let store = Store::open_existing(tmp.path()).unwrap();
        assert!(interrupted(&store, "lazy"));
        assert!(!interrupted(&store, "lazy-ended"));
        assert!(!interrupted(&store, "eager"));
    }
    let store = Store::open(tmp.path()).unwrap();
    assert!(interrupted(&store, "lazy"), "persisted in the record");
}
