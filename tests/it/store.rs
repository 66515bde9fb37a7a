//! The store and evidence against a real sled database in a temp dir: revision numbering,
//! record_call atomicity and group commit, reopening, attempts and state, the exported
//! envelope and the `understudy evidence` exit codes. The tests of the store's promises run
//! one body against both backends ([`Backend::all`]: embedded, then a real PostgreSQL);
//! those about the embedded store's own mechanics (group commit, data dir, journal) don't.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Map, Value};
use understudy::commands::evidence as cmd_evidence;
use understudy::records::{
    AgentEvent, AgentEventKind, AttemptRecord, EvidenceEntry, Pin, RevisionHead, ToolEvent,
};
use understudy::store::{CallRecord, Store, StoreError};

use crate::pg::Backend;

fn attempt(id: &str) -> AttemptRecord {
    AttemptRecord {
        attempt_id: id.to_string(),
        token_hash: format!("tokenhash-{id}"),
        secret: "ab".repeat(32),
        test_run_id: Some("run_1".into()),
        started_at: "2026-01-01T10:00:00.000Z".into(),
        ended_at: None,
        expires_at: Some("2099-01-01T00:00:00.000Z".into()),
        pins: BTreeMap::from([(
            "crm/lookup".to_string(),
            Pin {
                revision: 1,
                contract_hash: "sha256:c".into(),
            },
        )])
        .into(),
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
    }
}

fn event(i: u64) -> ToolEvent {
    ToolEvent {
        sequence: 0,
        execution_attempt_id: format!("exec_{i}"),
        integration: "crm".into(),
        operation_id: Some("lookup".into()),
        revision: Some(1),
        variant: Some("found".into()),
        rule: None,
        is_write: false,
        arguments: json!({ "i": i }),
        result: json!({ "status": 200, "data": { "i": i } }),
        result_status: "ok".into(),
        http_status: 200,
        latency_ms: 0.1,
        delay_ms: 0,
        idempotency_key_ref: None,
        trace_id: None,
        source: "mock".into(),
        error: None,
        timestamp: "2026-01-01T10:01:00.000Z".into(),
        fault: None,
    }
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("an object")
}

fn call(i: u64) -> CallRecord {
    CallRecord {
        event: event(i),
        state: None,
        result_json: None,
    }
}

fn open(dir: &Path) -> Store {
    Store::open(dir).expect("open store")
}

// ---- revisions ------------------------------------------------------------------------------

#[test]
fn sync_revision_appends_only_when_definition_or_contract_changes() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let store = backend.open(tmp.path());
        let def1 = json!({"schema_version": 1, "default_variant": "a", "variants": {"a": {"result": {"status": 200}}}});
        // same content, different member order: same canonical JSON, same revision
        let def1_reordered = json!({"variants": {"a": {"result": {"status": 200}}}, "default_variant": "a", "schema_version": 1});
        let def2 = json!({"schema_version": 1, "default_variant": "a", "variants": {"a": {"result": {"status": 201}}}});

        assert_eq!(store.latest_revision("crm/lookup").unwrap(), None);
        let (r1, created) = store
            .sync_revision("crm/lookup", "sha256:c1", &def1, "file")
            .unwrap();
        assert!(created);
        assert_eq!(r1.revision, 1);
        assert_eq!(r1.source, "file");
        assert!(r1.definition_hash.starts_with("sha256:"));
        assert_eq!(r1.definition_hash.len(), "sha256:".len() + 64);

        let (again, created) = store
            .sync_revision("crm/lookup", "sha256:c1", &def1_reordered, "api")
            .unwrap();
        assert!(!created);
        assert_eq!(again, r1);

        let (r2, created) = store
            .sync_revision("crm/lookup", "sha256:c1", &def2, "api")
            .unwrap();
        assert!(created);
        assert_eq!(r2.revision, 2);
        // a contract change alone makes a new revision too
        let (r3, created) = store
            .sync_revision("crm/lookup", "sha256:c2", &def2, "file")
            .unwrap();
        assert!(created);
        assert_eq!(r3.revision, 3);
        assert_eq!(r3.definition_hash, r2.definition_hash);
        // going back to an older definition appends, it never rewinds
        let (r4, created) = store
            .sync_revision("crm/lookup", "sha256:c2", &def1, "file")
            .unwrap();
        assert!(created);
        assert_eq!(r4.revision, 4);

        let all = store.revisions("crm/lookup").unwrap();
        assert_eq!(
            all.iter().map(|r| r.revision).collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        assert_eq!(all[0], r1, "revision 1 is never rewritten");
        assert_eq!(store.revision("crm/lookup", 2).unwrap(), Some(r2));
        assert_eq!(store.revision("crm/lookup", 9).unwrap(), None);
        assert_eq!(store.latest_revision("crm/lookup").unwrap(), Some(r4));
    }
}

/// Issue 20: the sync and pinning read only a revision's head; it says what the whole record
/// says (number, hashes, source, the definition's top-level `initial_state` when an object),
/// for the latest revision and a given one, on both stores.
#[test]
fn revision_heads_say_what_the_whole_record_says() {
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let store = backend.open(tmp.path());
        let state = json!({"orders": {"o1": {"n": [1, 2.5, "x"]}}, "empty": {}});
        let defs = [
            json!({"schema_version": 1, "initial_state": state.clone(),
                   "variants": {"a": {"result": {"initial_state": {"no": 1}}}}}),
            json!({"schema_version": 1, "variants": {"a": {"result": {"initial_state": {"no": 1}}}}}),
            json!({"schema_version": 1, "initial_state": [1, 2]}),
            json!({"initial_state": null}),
            json!([1, {"initial_state": {"no": 1}}]),
        ];
        for (i, d) in defs.iter().enumerate() {
            store
                .sync_revision("crm/op", &format!("sha256:c{i}"), d, ["file", "api"][i % 2])
                .unwrap();
        }
        assert_eq!(
            store.latest_revision_head("crm/op").unwrap(),
            store.revision_head("crm/op", 5).unwrap()
        );
        for n in 1..=5u64 {
            let full = store.revision("crm/op", n).unwrap().unwrap();
            let head = store.revision_head("crm/op", n).unwrap().unwrap();
            assert_eq!(head, RevisionHead::from(full.clone()), "revision {n}");
            assert_eq!(
                (
                    head.revision,
                    head.contract_hash.as_str(),
                    head.source.as_str()
                ),
                (
                    n,
                    format!("sha256:c{}", n - 1).as_str(),
                    ["file", "api"][(n as usize - 1) % 2]
                ),
            );
            assert_eq!(head.definition_hash, full.definition_hash);
            let expected = (n == 1).then(|| state.as_object().unwrap().clone());
            assert_eq!(head.initial_state, expected, "revision {n}");
        }
        assert_eq!(store.revision_head("crm/op", 6).unwrap(), None);
        assert_eq!(store.revision_head("crm/other", 1).unwrap(), None);
        assert_eq!(store.latest_revision_head("crm/other").unwrap(), None);
    }
}

#[test]
fn revision_keys_do_not_leak_into_each_other() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let store = backend.open(tmp.path());
        let d = json!({"schema_version": 1});
        store
            .sync_revision("crm/op", "sha256:a", &d, "file")
            .unwrap();
        store
            .sync_revision("crm/op2", "sha256:a", &d, "file")
            .unwrap();
        store
            .sync_revision("crm/op2", "sha256:b", &d, "file")
            .unwrap();
        store
            .sync_revision("crm/o", "sha256:a", &d, "file")
            .unwrap();
        assert_eq!(store.revisions("crm/op").unwrap().len(), 1);
        assert_eq!(store.revisions("crm/op2").unwrap().len(), 2);
        assert_eq!(store.revisions("crm/o").unwrap().len(), 1);
        assert_eq!(store.revisions("tools/op").unwrap().len(), 0);
    }
}

#[test]
fn concurrent_syncs_never_share_a_revision_number() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let store = backend.open(tmp.path());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    (0..10)
                        .map(|i| {
                            let def = json!({"schema_version": 1, "thread": t, "i": i});
                            let (rec, created) = store
                                .sync_revision("crm/lookup", "sha256:c", &def, "file")
                                .unwrap();
                            assert!(created);
                            rec.revision
                        })
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut numbers: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        numbers.sort_unstable();
        assert_eq!(numbers, (1..=80).collect::<Vec<_>>());
        let stored = store.revisions("crm/lookup").unwrap();
        assert_eq!(stored.len(), 80);
        let hashes: BTreeSet<&str> = stored.iter().map(|r| r.definition_hash.as_str()).collect();
        assert_eq!(hashes.len(), 80, "every definition kept its own revision");
    }
}

#[test]
fn concurrent_syncs_of_one_definition_create_one_revision() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let store = backend.open(tmp.path());
        let def = json!({"schema_version": 1, "same": true});
        let created: usize = (0..8)
            .map(|_| {
                let store = store.clone();
                let def = def.clone();
                std::thread::spawn(move || {
                    store
                        .sync_revision("crm/lookup", "sha256:c", &def, "file")
                        .unwrap()
                        .1
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap() as usize)
            .sum();
        assert_eq!(created, 1);
        assert_eq!(store.revisions("crm/lookup").unwrap().len(), 1);
    }
}

// ---- record_call ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn record_call_sequences_are_contiguous_under_200_concurrent_tasks() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let store = backend.open(tmp.path());
        store.put_attempt(&attempt("att")).unwrap();
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move { store.record_call("att", call(i)).await.unwrap() })
            })
            .collect();
        let mut seqs = Vec::new();
        for t in tasks {
            seqs.push(t.await.unwrap());
        }
        seqs.sort_unstable();
        assert_eq!(seqs, (1..=200).collect::<Vec<u64>>());

        let events = store.evidence("att").unwrap();
        assert_eq!(
            events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
            (1..=200).collect::<Vec<u64>>(),
            "evidence comes back in sequence order"
        );
        let args: BTreeSet<u64> = events
            .iter()
            .map(|e| e.arguments["i"].as_u64().unwrap())
            .collect();
        assert_eq!(args.len(), 200, "every call has its own event");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn state_is_written_atomically_with_its_event() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let store = backend.open(tmp.path());
        store.put_attempt(&attempt("att")).unwrap();
        let tasks: Vec<_> = (0..100u64)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let rec = CallRecord {
                        event: event(i),
                        state: Some(("crm".to_string(), obj(json!({ "last": i })))),
                        result_json: None,
                    };
                    store.record_call("att", rec).await.unwrap()
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        // The state left behind is the one written by the call with the highest sequence:
        // event and state went in together, in sequence order.
        let events = store.evidence("att").unwrap();
        let last = events.last().unwrap();
        assert_eq!(last.sequence, 100);
        let state = store.state("att").unwrap();
        assert_eq!(state["crm"]["last"], last.arguments["i"]);
    }
}

#[tokio::test]
async fn a_call_without_state_leaves_state_alone_and_other_attempts_are_separate() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let store = backend.open(tmp.path());
        store.put_attempt(&attempt("a1")).unwrap();
        store.put_attempt(&attempt("a10")).unwrap();
        let with_state = CallRecord {
            event: event(1),
            state: Some(("crm".to_string(), obj(json!({"n": 1})))),
            result_json: None,
        };
        assert_eq!(store.record_call("a1", with_state).await.unwrap(), 1);
        assert_eq!(store.record_call("a1", call(2)).await.unwrap(), 2);
        assert_eq!(store.record_call("a10", call(3)).await.unwrap(), 1);
        assert_eq!(store.state("a1").unwrap()["crm"], obj(json!({"n": 1})));
        assert!(store.state("a10").unwrap().is_empty());
        assert_eq!(store.evidence("a1").unwrap().len(), 2);
        assert_eq!(store.evidence("a10").unwrap().len(), 1);
    }
}

#[tokio::test]
async fn record_call_for_an_unknown_attempt_is_refused() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let store = backend.open(tmp.path());
        let err = store.record_call("ghost", call(1)).await.unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
        assert!(store.evidence("ghost").unwrap().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_share_flushes_and_none_is_acknowledged_before_its_flush() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    store.put_attempt(&attempt("att")).unwrap();
    let before = store.flush_count();

    // Hold the flusher: writes go on, acknowledgements must wait.
    store.pause_flushes();
    let calls = 200u64;
    let tasks: Vec<_> = (0..calls)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.record_call("att", call(i)).await.unwrap() })
        })
        .collect();
    while (store.evidence("att").unwrap().len() as u64) < calls {
        tokio::task::yield_now().await;
    }
    assert!(
        tasks.iter().all(|t| !t.is_finished()),
        "no call may be acknowledged before a flush covers it"
    );
    store.resume_flushes();
    for t in tasks {
        t.await.unwrap();
    }
    let flushes = store.flush_count() - before;
    assert!(flushes >= 1);
    assert!(
        flushes < calls,
        "{calls} concurrent calls must share flushes, got {flushes} flushes"
    );
}

#[tokio::test]
async fn flush_waits_for_a_group_flush() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let before = store.flush_count();
    store.flush().await.unwrap();
    assert_eq!(store.flush_count(), before + 1);
}

#[tokio::test]
async fn everything_survives_closing_and_reopening() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let def = json!({"schema_version": 1});
        {
            let store = backend.open(tmp.path());
            store
                .sync_revision("crm/lookup", "sha256:c", &def, "file")
                .unwrap();
            store.put_attempt(&attempt("att")).unwrap();
            for i in 0..5 {
                let rec = CallRecord {
                    event: event(i),
                    state: Some(("crm".to_string(), obj(json!({ "n": i })))),
                    result_json: None,
                };
                store.record_call("att", rec).await.unwrap();
            }
            store.flush().await.unwrap();
        }
        let store = backend.open(tmp.path());
        assert_eq!(store.revisions("crm/lookup").unwrap().len(), 1);
        assert_eq!(store.attempt("att").unwrap(), Some(attempt("att")));
        assert_eq!(store.evidence("att").unwrap().len(), 5);
        assert_eq!(store.state("att").unwrap()["crm"], obj(json!({"n": 4})));
        // numbering continues where it stopped
        assert_eq!(store.record_call("att", call(9)).await.unwrap(), 6);
        let (r, created) = store
            .sync_revision("crm/lookup", "sha256:c2", &def, "file")
            .unwrap();
        assert!(created);
        assert_eq!(r.revision, 2);
    }
}

fn agent_event(name: &str) -> AgentEvent {
    AgentEvent {
        sequence: 0,
        name: name.into(),
        kind: AgentEventKind::AgentMessage,
        test_run_id: Some("run_1".into()),
        text: Some("You are booked.".into()),
        data: Some(json!({ "amount": "12.50" })),
        timestamp: "2026-01-01T10:02:00.000Z".into(),
    }
}

/// `(sequence, "call" | event name)` of every entry of the attempt's timeline.
fn timeline_of(store: &Store, id: &str) -> Vec<(u64, String)> {
    store
        .timeline(id)
        .unwrap()
        .into_iter()
        .map(|e| match e {
            EvidenceEntry::Call(c) => (c.sequence, "call".to_string()),
            EvidenceEntry::Agent(a) => (a.sequence, a.name),
        })
        .collect()
}

#[tokio::test]
async fn agent_events_share_the_sequence_with_calls_and_survive_a_restart() {
    // One body, both stores (issues 15 and 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let store = backend.open(tmp.path());
            store.put_attempt(&attempt("att")).unwrap();
            assert_eq!(store.record_call("att", call(0)).await.unwrap(), 1);
            let said = store
                .record_agent_event("att", agent_event("said"))
                .await
                .unwrap();
            assert_eq!(said, 2, "{backend:?}");
            assert_eq!(store.record_call("att", call(1)).await.unwrap(), 3);
            let found = store.attempt_evidence("att").unwrap().expect("the attempt");
            assert_eq!(
                found.calls.iter().map(|c| c.sequence).collect::<Vec<_>>(),
                [1, 3]
            );
            assert_eq!(found.events.len(), 1);
            assert_eq!(found.events[0].sequence, 2);
            assert_eq!(found.events[0].data.as_ref().unwrap()["amount"], "12.50");
            // `evidence` is the calls alone.
            assert_eq!(store.evidence("att").unwrap().len(), 2);
            // Acknowledged means durable: no flush before the store goes away.
        }
        let store = backend.open(tmp.path());
        let want = |names: &[&str]| -> Vec<(u64, String)> {
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (i as u64 + 1, n.to_string()))
                .collect()
        };
        assert_eq!(
            timeline_of(&store, "att"),
            want(&["call", "said", "call"]),
            "{backend:?}"
        );
        // Numbering continues after the restart, for both kinds.
        assert_eq!(
            store
                .record_agent_event("att", agent_event("next"))
                .await
                .unwrap(),
            4
        );
        assert_eq!(store.record_call("att", call(2)).await.unwrap(), 5);
        if let Backend::Postgres(_) = backend {
            // A second process on the same database: its calls and events interleave with
            // the first one's in the one sequence (the attempt's row lock).
            let other = backend.open(tmp.path());
            assert_eq!(
                other
                    .record_agent_event("att", agent_event("elsewhere"))
                    .await
                    .unwrap(),
                6
            );
            assert_eq!(other.record_call("att", call(3)).await.unwrap(), 7);
            assert_eq!(
                store
                    .record_agent_event("att", agent_event("back"))
                    .await
                    .unwrap(),
                8
            );
            assert_eq!(
                timeline_of(&other, "att"),
                want(&[
                    "call",
                    "said",
                    "call",
                    "next",
                    "call",
                    "elsewhere",
                    "call",
                    "back"
                ])
            );
        }
    }
}

// ---- attempts and state ---------------------------------------------------------------------

#[test]
fn attempts_by_id_list_and_token() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let store = backend.open(tmp.path());
        store.put_attempt(&attempt("b")).unwrap();
        store.put_attempt(&attempt("a")).unwrap();
        assert_eq!(store.attempt("a").unwrap(), Some(attempt("a")));
        assert_eq!(store.attempt("zz").unwrap(), None);
        let ids: Vec<String> = store
            .attempts()
            .unwrap()
            .into_iter()
            .map(|a| a.attempt_id)
            .collect();
        assert_eq!(ids, vec!["a", "b"]);
        assert_eq!(
            store.attempt_by_token_hash("tokenhash-b").unwrap(),
            Some(attempt("b"))
        );
        assert_eq!(store.attempt_by_token_hash("nope").unwrap(), None);

        // updating an attempt (ended, cleanup) keeps its token index
        let mut ended = attempt("b");
        ended.ended_at = Some("2026-01-01T11:00:00Z".into());
        ended.cleanup = Some(json!({"status": "verified", "remaining_state_keys": 0}));
        store.put_attempt(&ended).unwrap();
        assert_eq!(
            store.attempt_by_token_hash("tokenhash-b").unwrap(),
            Some(ended.clone())
        );
        // a new token replaces the old index entry
        let mut rotated = ended.clone();
        rotated.token_hash = "tokenhash-new".into();
        store.put_attempt(&rotated).unwrap();
        assert_eq!(store.attempt_by_token_hash("tokenhash-b").unwrap(), None);
        assert_eq!(
            store.attempt_by_token_hash("tokenhash-new").unwrap(),
            Some(rotated)
        );
        // a token hash cannot belong to two attempts
        let mut thief = attempt("c");
        thief.token_hash = "tokenhash-a".into();
        assert!(matches!(
            store.put_attempt(&thief),
            Err(StoreError::Invalid(_))
        ));
    }
}

#[tokio::test]
async fn clear_state_removes_every_key_and_verifies_it() {
    // One body, both stores (issue 17): embedded, then PostgreSQL.
    for backend in Backend::all() {
        let tmp = tempfile::tempdir().unwrap();
        let store = backend.open(tmp.path());
        store.put_attempt(&attempt("a1")).unwrap();
        store.put_attempt(&attempt("a10")).unwrap();
        store
            .put_state("a1", "crm", &obj(json!({"reference": "TEST-742"})))
            .unwrap();
        store
            .put_state("a1", "tools", &obj(json!({"x": 1})))
            .unwrap();
        store
            .put_state("a10", "crm", &obj(json!({"keep": true})))
            .unwrap();
        store.record_call("a1", call(1)).await.unwrap();
        assert_eq!(store.state("a1").unwrap().len(), 2);

        assert_eq!(store.clear_state("a1").unwrap(), 0, "cleanup verified");
        assert!(store.state("a1").unwrap().is_empty());
        assert_eq!(store.evidence("a1").unwrap().len(), 1, "evidence is kept");
        assert_eq!(
            store.state("a10").unwrap()["crm"],
            obj(json!({"keep": true})),
            "another attempt whose id shares a prefix is untouched"
        );
        assert_eq!(store.clear_state("a1").unwrap(), 0, "idempotent");
    }
}

// ---- evidence export ------------------------------------------------------------------------

#[tokio::test]
async fn exported_envelope_from_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    store.put_attempt(&attempt("att")).unwrap();
    let mut secret_call = event(1);
    secret_call.arguments = json!({"phone": "+15550100", "nested": [{"phone": "x"}]});
    store
        .record_call(
            "att",
            CallRecord {
                event: secret_call,
                state: Some(("crm".into(), obj(json!({"phone": "+1", "booked": true})))),
                result_json: None,
            },
        )
        .await
        .unwrap();
    let env = cmd_evidence::load_envelope(&store, "att", &["phone".to_string()])
        .unwrap()
        .unwrap();
    let keys: Vec<&str> = env
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        vec![
            "attempt_id",
            "blocked_side_effects",
            "cleanup",
            "contract_results",
            "contracts",
            "ended_at",
            "events",
            "final_state",
            "harness_errors",
            "last_sequence",
            "outside_attempt",
            "pins",
            "schema_version",
            "started_at",
            "store_failures",
            "test_run_id",
            "tool_events",
            "tool_input_errors",
            "verdict",
            "verdict_reasons"
        ]
    );
    assert_eq!(env["schema_version"], "understudy.evidence.v1");
    assert_eq!(env["attempt_id"], "att");
    assert_eq!(env["test_run_id"], "run_1");
    assert_eq!(env["verdict"], "pass");
    assert_eq!(env["tool_events"][0]["sequence"], 1);
    assert_eq!(
        env["tool_events"][0]["arguments"],
        json!({"phone": "[redacted]", "nested": [{"phone": "[redacted]"}]})
    );
    assert_eq!(
        env["final_state"],
        json!({"crm": {"phone": "[redacted]", "booked": true}})
    );
    // the stored evidence itself is not redacted
    assert_eq!(
        store.evidence("att").unwrap()[0].arguments["phone"],
        "+15550100"
    );
    assert_eq!(
        cmd_evidence::load_envelope(&store, "ghost", &[]).unwrap(),
        None
    );
}

#[tokio::test]
async fn evidence_command_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    // no data dir: 2, and nothing is created
    assert_eq!(cmd_evidence::run("att", &dir, &[]).code(), 2);
    assert!(!dir.exists());

    {
        let store = open(&dir);
        store.put_attempt(&attempt("good")).unwrap();
        store.record_call("good", call(1)).await.unwrap();
        store.put_attempt(&attempt("bad")).unwrap();
        let mut harness = event(1);
        harness.result_status = "harness_error".into();
        harness.http_status = 500;
        harness.error = Some(json!({"code": "no_mock", "message": "no mock", "path": null}));
        store
            .record_call(
                "bad",
                CallRecord {
                    event: harness,
                    state: None,
                    result_json: None,
                },
            )
            .await
            .unwrap();

        // while another handle holds the data dir (as `serve` would): 2, with a clear message
        assert_eq!(cmd_evidence::run("good", &dir, &[]).code(), 2);
        let err = Store::open_existing(&dir).err().unwrap();
        assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    }
    assert_eq!(cmd_evidence::run("good", &dir, &[]).code(), 0);
    assert_eq!(cmd_evidence::run("bad", &dir, &[]).code(), 1);
    assert_eq!(cmd_evidence::run("ghost", &dir, &[]).code(), 2);
}

#[test]
fn store_handles_are_send_sync_and_cheap_to_share() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<Store>();
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(open(tmp.path()));
    let s2 = store.as_ref().clone();
    drop(store);
    // the clone keeps the database open
    s2.put_attempt(&attempt("x")).unwrap();
}

// ---- crash durability -------------------------------------------------------------------------

/// Env var that turns `crash_child_records_until_killed` into the child of
/// `acknowledged_calls_survive_kill_9`.
const CRASH_CHILD_DIR: &str = "UNDERSTUDY_STORE_CRASH_CHILD_DIR";

/// Child process half of the crash test: records calls from 8 concurrent tasks forever and
/// prints `ack <sequence>` after each `record_call` returned. A no-op in a normal test run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child_records_until_killed() {
    let Some(dir) = std::env::var_os(CRASH_CHILD_DIR) else {
        return;
    };
    let store = open(Path::new(&dir));
    store.put_attempt(&attempt("att")).unwrap();
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                let rec = CallRecord {
                    event: event(t * 1_000_000 + i),
                    state: Some(("crm".into(), obj(json!({ "t": t, "i": i })))),
                    result_json: None,
                };
                let seq = store.record_call("att", rec).await.unwrap();
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                writeln!(out, "ack {seq}").unwrap();
                out.flush().unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// docs/src/reference/evidence-envelope.md, docs/src/operations/durability.md: a crash loses no acknowledged call. A child process records calls and reports
/// each acknowledgement; it is killed with SIGKILL mid-stream; every acknowledged sequence
/// must be in the reopened store, and the sequences must stay contiguous.
#[cfg(unix)]
#[test]
fn acknowledged_calls_survive_kill_9() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "store::crash_child_records_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_CHILD_DIR, tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked = BTreeSet::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("ack ") {
            acked.insert(n.parse::<u64>().unwrap());
            if acked.len() >= 500 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL: no destructor, no final flush
    child.wait().unwrap();
    assert!(acked.len() >= 500, "the child stopped early");

    let store = open(tmp.path());
    let events = store.evidence("att").unwrap();
    let stored: BTreeSet<u64> = events.iter().map(|e| e.sequence).collect();
    let missing: Vec<u64> = acked.difference(&stored).copied().collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    assert_eq!(
        events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "no gap after the crash"
    );
    // the state left behind belongs to the last stored call
    let last = events.last().unwrap();
    let (t, i) = (
        last.arguments["i"].as_u64().unwrap() / 1_000_000,
        last.arguments["i"].as_u64().unwrap() % 1_000_000,
    );
    assert_eq!(
        store.state("att").unwrap()["crm"],
        obj(json!({ "t": t, "i": i }))
    );
}

#[tokio::test]
async fn evidence_command_takes_data_dir_and_redaction_from_the_project_file() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("understudy.json");
    std::fs::write(
        &cfg,
        r#"{"data_dir": "state", "redact": ["phone"],
            "integrations": {"crm": {"profile": "rest", "operations": "mocks/crm"}}}"#,
    )
    .unwrap();
    {
        let store = open(&tmp.path().join("state"));
        store.put_attempt(&attempt("att")).unwrap();
        store.record_call("att", call(1)).await.unwrap();
    }
    assert_eq!(cmd_evidence::run_with("att", None, Some(&cfg)).code(), 0);
    // --data-dir overrides the file
    let elsewhere = tmp.path().join("elsewhere");
    assert_eq!(
        cmd_evidence::run_with("att", Some(&elsewhere), Some(&cfg)).code(),
        2
    );
    // a project file that cannot be loaded is an error, not an unredacted export
    let broken = tmp.path().join("broken.json");
    std::fs::write(&broken, r#"{"data_dir": "state", "redcat": []}"#).unwrap();
    assert_eq!(cmd_evidence::run_with("att", None, Some(&broken)).code(), 2);
    let missing = tmp.path().join("missing.json");
    assert_eq!(
        cmd_evidence::run_with("att", None, Some(&missing)).code(),
        2
    );
}
