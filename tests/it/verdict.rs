//! A verdict that cannot be fooled, end to end with the real binary and server: a store
//! failure survives a restart (durable mark, and the fallback that interrupts every open
//! attempt), nothing happened is `no_calls`, a call after the end is 410 `attempt_ended`, a
//! call that missed an exclusive attempt is `outside_attempt`, `verify` follows the verdict,
//! and a judge that could not judge exits 2 (`--url` at a server that is not understudy).
//! The rules are listed in `docs/src/reference/verdict.md`; their unit tests are in
//! `src/evidence/verdict.rs`.

use std::process::Command;

use serde_json::{json, Value};

use crate::support::{standard_project, Project, Server};

/// `understudy ARGS…`: exit code, stdout, stderr.
fn understudy(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(args)
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn evidence_cli(p: &Project, id: &str) -> (i32, Value, String) {
    let dir = p.data_dir();
    let (code, out, err) = understudy(&["evidence", id, "--data-dir", dir.to_str().unwrap()]);
    let v = serde_json::from_str(&out).unwrap_or(Value::Null);
    (code, v, err)
}

fn codes(env: &Value) -> Vec<String> {
    env["verdict_reasons"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["code"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default()
}

const LOOKUP: &str = "/services/data/v60.0/query?q=SELECT%20Id,%20FirstName%20FROM%20Contact%20WHERE%20Phone%20=%20'%2B15550001'";

/// The first way to a wrong pass: a read-only call (no state change, so nothing is
/// withdrawn) answered `store_error`, then a restart. The evidence read by another process
/// (`understudy evidence --data-dir`) must still fail with `store_failure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_is_never_forgotten_after_a_restart() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let url = format!("{}{LOOKUP}", a.base("crm"));
    assert_eq!(s.call("GET", &url, None, &[]).await.status, 200);
    s.app.store.fail_next_flushes_for_test(1);
    let r = s.call("GET", &url, None, &[]).await;
    assert_eq!(r.status, 500, "{}", r.text);
    assert_eq!(r.header("understudy-error"), Some("store_error"));
    let live = s.evidence(&a.id).await;
    assert_eq!(live["verdict"], "fail", "{live:#}");
    assert!(
        codes(&live).contains(&"store_failure".to_string()),
        "{live:#}"
    );
    s.stop().await.unwrap();

    let (code, env, err) = evidence_cli(&p, &a.id);
    assert_eq!(
        code, 1,
        "after the restart the verdict is still fail: {err}"
    );
    assert_eq!(env["verdict"], "fail");
    assert_eq!(env["store_failures"], 1, "{env:#}");
    assert!(
        codes(&env).contains(&"store_failure".to_string()),
        "{env:#}"
    );
    assert!(err.contains("store_failure"), "{err}");

    // And through a restarted server (the API reader), and its verify.
    let s = Server::start(&p).await;
    let env = s.evidence(&a.id).await;
    assert_eq!(env["verdict"], "fail");
    let v = s
        .call(
            "POST",
            &format!("/_understudy/api/attempts/{}/verify", a.id),
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!(v.status, 200, "{}", v.text);
    assert_eq!(v.json()["passed"], false, "{}", v.text);
    s.stop().await.unwrap();
}

/// When even the durable mark cannot be written, the attempt fails in memory at once and
/// every attempt that was open is `interrupted` at the next start (whatever its durability).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrecorded_store_failure_interrupts_every_open_attempt_at_the_next_start() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let other = s.attempt(json!({})).await;
    let ended = s.attempt(json!({})).await;
    for att in [&a, &other, &ended] {
        let url = format!("{}{LOOKUP}", att.base("crm"));
        assert_eq!(s.call("GET", &url, None, &[]).await.status, 200);
    }
    let r = s
        .call(
            "DELETE",
            &format!("/_understudy/api/attempts/{}", ended.id),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    s.app.store.fail_next_marks_for_test(1);
    s.app.store.fail_next_flushes_for_test(1);
    let url = format!("{}{LOOKUP}", a.base("crm"));
    assert_eq!(s.call("GET", &url, None, &[]).await.status, 500);
    let live = s.evidence(&a.id).await;
    assert_eq!(
        live["verdict"], "fail",
        "failed in memory at once: {live:#}"
    );
    assert!(codes(&live).contains(&"store_failure".to_string()));
    s.stop().await.unwrap();

    for id in [&a.id, &other.id] {
        let (code, env, err) = evidence_cli(&p, id);
        assert_eq!(code, 1, "{err}");
        assert!(
            codes(&env).contains(&"interrupted".to_string()),
            "every open attempt is interrupted: {env:#}"
        );
    }
    // An attempt that had ended lost nothing.
    let (code, env, err) = evidence_cli(&p, &ended.id);
    assert_eq!(code, 0, "{err} {env:#}");
    // The sign is consumed: a later start interrupts nothing new.
    let s = Server::start(&p).await;
    let b = s.attempt(json!({})).await;
    let url = format!("{}{LOOKUP}", b.base("crm"));
    assert_eq!(s.call("GET", &url, None, &[]).await.status, 200);
    s.stop().await.unwrap();
    let s = Server::start(&p).await;
    assert_eq!(s.evidence(&b.id).await["verdict"], "pass");
    s.stop().await.unwrap();
}

/// On PostgreSQL, a store failure whose durable mark cannot be written either (the database
/// is what failed) is kept in the process's own data dir and written to the database at the
/// next start: a restarted process, or another one, still reads `fail` with `store_failure`.
/// Without it the mark lived only in memory and a restart forgot it (found by the model
/// test, `verdict_model`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrecorded_store_failure_on_postgres_is_written_at_the_next_start() {
    let Some(pg) = crate::pg::shared() else {
        return;
    };
    let p = standard_project();
    crate::pg::Backend::Postgres(pg.fresh_db()).apply(&p);
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let url = format!("{}{LOOKUP}", a.base("crm"));
    assert_eq!(s.call("GET", &url, None, &[]).await.status, 200);
    s.app.store.fail_next_marks_for_test(1);
    s.app.store.fail_next_flushes_for_test(1);
    assert_eq!(s.call("GET", &url, None, &[]).await.status, 500);
    assert_eq!(s.evidence(&a.id).await["verdict"], "fail");
    let pending = p
        .data_dir()
        .join(understudy::store::UNMARKED_STORE_FAILURES);
    assert_eq!(
        std::fs::read_to_string(&pending).unwrap().trim(),
        a.id,
        "the unwritten mark is kept in the data dir"
    );
    s.stop().await.unwrap();

    let s = Server::start(&p).await;
    let env = s.evidence(&a.id).await;
    assert_eq!(env["verdict"], "fail", "{env:#}");
    assert_eq!(env["store_failures"], 1, "{env:#}");
    assert!(
        codes(&env).contains(&"store_failure".to_string()),
        "{env:#}"
    );
    assert!(!pending.exists(), "written, then removed");
    s.stop().await.unwrap();
}

/// An attempt with no call and no agent-side event fails `no_calls`, unless created with
/// `"expect_calls": false`; an agent-side event alone is something that happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_happened_is_not_a_pass() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let quiet = s.attempt(json!({ "expect_calls": false })).await;
    let talked = s.attempt(json!({})).await;
    let r = s
        .call(
            "POST",
            &format!("/_understudy/api/attempts/{}/events", talked.id),
            Some(&json!({ "name": "said_hello", "kind": "agent_message" })),
            &[],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let env = s.evidence(&a.id).await;
    assert_eq!(env["verdict"], "fail");
    assert_eq!(codes(&env), ["no_calls"]);
    assert_eq!(s.evidence(&quiet.id).await["verdict"], "pass");
    assert_eq!(s.evidence(&talked.id).await["verdict"], "pass");
    // verify follows the verdict, with or without contracts.
    let v = s
        .call(
            "POST",
            &format!("/_understudy/api/attempts/{}/verify", a.id),
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!(v.json()["passed"], false, "{}", v.text);
    assert_eq!(v.json()["verdict_reasons"][0]["code"], "no_calls");
    s.stop().await.unwrap();
}

/// A call with the token of an ended attempt is refused 410 `attempt_ended`, recorded on
/// that attempt, and fails it — read live and after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_call_is_refused_410_and_fails_the_ended_attempt() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let url = format!("{}{LOOKUP}", a.base("crm"));
    assert_eq!(s.call("GET", &url, None, &[]).await.status, 200);
    let r = s
        .call(
            "DELETE",
            &format!("/_understudy/api/attempts/{}", a.id),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(s.evidence(&a.id).await["verdict"], "pass");
    let late = s.call("GET", &url, None, &[]).await;
    assert_eq!(late.status, 410, "{}", late.text);
    assert_eq!(late.header("understudy-error"), Some("attempt_ended"));
    let env = s.evidence(&a.id).await;
    assert_eq!(env["verdict"], "fail", "{env:#}");
    assert_eq!(codes(&env), ["attempt_ended"]);
    assert_eq!(env["verdict_reasons"][0]["sequence"], 2);
    s.stop().await.unwrap();
    let (code, env, _) = evidence_cli(&p, &a.id);
    assert_eq!(code, 1);
    assert_eq!(codes(&env), ["attempt_ended"]);
}

/// A call that reaches the server without the token of an open exclusive attempt (it lands
/// in the default attempt) fails that attempt with `outside_attempt`, listed in its
/// evidence; an attempt that is not exclusive is not affected, nor is one that ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_missed_an_exclusive_attempt_fails_it() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let ex = s.attempt(json!({ "exclusive": true })).await;
    let plain = s.attempt(json!({})).await;
    for att in [&ex, &plain] {
        let url = format!("{}{LOOKUP}", att.base("crm"));
        assert_eq!(s.call("GET", &url, None, &[]).await.status, 200);
    }
    assert_eq!(s.evidence(&ex.id).await["verdict"], "pass");
    // No token: the default attempt.
    let r = s.call("GET", &format!("/crm{LOOKUP}"), None, &[]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let env = s.evidence(&ex.id).await;
    assert_eq!(env["verdict"], "fail", "{env:#}");
    assert_eq!(codes(&env), ["outside_attempt"]);
    assert_eq!(env["outside_attempt"]["calls"], 1);
    assert!(
        env["outside_attempt"]["listed"][0]
            .as_str()
            .unwrap()
            .contains("crm/lookup_contact_by_phone"),
        "{env:#}"
    );
    assert_eq!(s.evidence(&plain.id).await["verdict"], "pass");
    s.stop().await.unwrap();
    let (code, env, _) = evidence_cli(&p, &ex.id);
    assert_eq!(code, 1, "the mark is durable: {env:#}");
    assert_eq!(codes(&env), ["outside_attempt"]);
}

/// `understudy test -- true`: the agent never reached understudy, so the run fails
/// `no_calls` (exit 1) — unless `--allow-no-calls`.
#[test]
fn understudy_test_of_a_command_that_calls_nothing_fails_no_calls() {
    let dir = crate::support::healthplus();
    let cfg = dir.path().join("understudy.json");
    let reports = dir.path().join("reports");
    let args = |extra: &[&str]| {
        let mut v = vec![
            "test".to_string(),
            "--config".into(),
            cfg.display().to_string(),
            "--report-dir".into(),
            reports.display().to_string(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v.extend(["--".to_string(), "true".to_string()]);
        v
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        understudy(&a)
    };
    let (code, _, err) = run(&[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no_calls"), "{err}");
    let env: Value =
        serde_json::from_slice(&std::fs::read(reports.join("evidence.json")).unwrap()).unwrap();
    assert_eq!(codes(&env), ["no_calls"]);
    let junit = std::fs::read_to_string(reports.join("junit.xml")).unwrap();
    assert!(junit.contains("<failure type=\"no_calls\""), "{junit}");
    let (code, _, err) = run(&["--allow-no-calls"]);
    assert_eq!(code, 0, "{err}");
}

/// A server that answers `{}` to everything (not understudy).
fn foreign_server() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let mut buf = [0u8; 8192];
            let _ = c.read(&mut buf);
            let _ = c.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            );
        }
    });
    addr
}

/// The judge's own failure is exit 2, never 0 or 1: `--url` at something that is not
/// understudy answers no `verdict` member.
#[test]
fn a_foreign_server_cannot_be_judged_exit_2() {
    let url = format!("http://{}", foreign_server());
    for cmd in [
        vec!["evidence", "att_x", "--url", &url],
        vec!["verify", "att_x", "--url", &url],
        vec!["report", "att_x", "--format", "json", "--url", &url],
    ] {
        let (code, out, err) = understudy(&cmd);
        assert_eq!(code, 2, "{cmd:?}: {err}\n{out}");
        assert!(err.contains("verdict"), "{cmd:?} says why: {err}");
    }
    // Nothing listening at all: exit 2 too.
    let (code, _, err) = understudy(&["evidence", "att_x", "--url", "http://127.0.0.1:9"]);
    assert_eq!(code, 2, "{err}");
}

/// Entries of attempt `id` physically in the store, rolled out or not (the reader from
/// sequence 0 skips nothing).
fn stored_sequences(s: &Server, id: &str) -> Vec<u64> {
    let last = s.app.store.last_sequence(id).unwrap();
    let mut chunks = s.app.store.timeline_chunks(id, 0, last);
    let mut out = Vec::new();
    while let Some(c) = chunks().unwrap() {
        out.extend(c.iter().map(|e| e.sequence()));
    }
    out
}

fn sequences(env: &Value) -> Vec<u64> {
    let mut v: Vec<u64> = env["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .chain(env["events"].as_array().unwrap())
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    v.sort_unstable();
    v
}

/// The default attempt's retention bound on one store (`default_attempt.max_entries` 3):
/// rolling over good calls keeps a pass (no `no_calls`, no `missing_evidence`); a harness
/// error that rolled out still fails the verdict through the API, `evidence`, `verify` and
/// `report`, with its sequence; every entry after the roll is present; the store never
/// keeps more than the bound.
async fn retention_on(p: &Project) {
    let max = 3;
    let s = Server::start(p).await;
    let d = s.default_attempt();
    let ok = format!("/crm{LOOKUP}");
    let bound = |s: &Server| {
        let kept = stored_sequences(s, &d);
        assert!(
            kept.len() <= max,
            "the store keeps {kept:?}, more than {max}"
        );
        kept
    };
    for _ in 0..3 {
        assert_eq!(s.call("GET", &ok, None, &[]).await.status, 200);
        bound(&s);
    }
    assert!(bound(&s).is_empty(), "rolled over at 3");
    let env = s.evidence(&d).await;
    assert_eq!(
        env["verdict"], "pass",
        "good calls rolled out pass: {env:#}"
    );
    assert_eq!(env["rolled_over"]["through"], 3, "{env:#}");
    assert_eq!(env["rolled_over"]["calls"], 3);
    assert_eq!(env["last_sequence"], 3);
    assert!(sequences(&env).is_empty());

    // Sequence 4: a harness error (nothing matches), then good calls until the next roll.
    let bad = s.call("GET", "/api/nothing-matches-this", None, &[]).await;
    assert!(bad.status >= 400, "{}", bad.text);
    let live = s.evidence(&d).await;
    assert_eq!(live["verdict"], "fail", "{live:#}");
    for _ in 0..2 {
        assert_eq!(s.call("GET", &ok, None, &[]).await.status, 200);
        bound(&s);
    }
    let env = s.evidence(&d).await;
    assert_eq!(env["rolled_over"]["through"], 6, "{env:#}");
    assert_eq!(env["rolled_over"]["rolls"], 2);
    assert_eq!(env["rolled_over"]["findings"]["harness_error"]["count"], 1);
    assert_eq!(
        env["verdict"], "fail",
        "the rolled-out harness error: {env:#}"
    );
    assert_eq!(codes(&env), ["harness_error"], "{env:#}");
    assert_eq!(env["verdict_reasons"][0]["sequence"], 4);

    // After the roll: a call and an agent-side event, both present, and the bound holds.
    assert_eq!(s.call("GET", &ok, None, &[]).await.status, 200);
    let r = s
        .call(
            "POST",
            &format!("/_understudy/api/attempts/{d}/events"),
            Some(&json!({ "name": "said_hello", "kind": "agent_message" })),
            &[],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let env = s.evidence(&d).await;
    assert_eq!(sequences(&env), [7, 8], "{env:#}");
    assert_eq!(codes(&env), ["harness_error"], "{env:#}");
    assert_eq!(bound(&s), [7, 8]);
    let v = s
        .call(
            "POST",
            &format!("/_understudy/api/attempts/{d}/verify"),
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!(v.json()["passed"], false, "{}", v.text);
    assert_eq!(v.json()["verdict_reasons"][0]["code"], "harness_error");
    // Many rolls: the finding is counted once, and the bound holds.
    for _ in 0..7 {
        assert_eq!(s.call("GET", &ok, None, &[]).await.status, 200);
        bound(&s);
    }
    let env = s.evidence(&d).await;
    assert_eq!(env["rolled_over"]["findings"]["harness_error"]["count"], 1);
    assert_eq!(env["verdict"], "fail");

    // The CLI readers, through the running server (`--url`: either store).
    let base = s.url("");
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--url", base.as_str()]);
        understudy(&all)
    };
    let (code, out, err) = cli(&["evidence", &d]);
    assert_eq!(code, 1, "{err}");
    let env: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(codes(&env), ["harness_error"], "{env:#}");
    let (code, out, err) = cli(&["report", &d, "--format", "junit"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("<failure"), "{out}");
    assert!(out.contains("rolled out"), "{out}");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_attempt_rolls_over_at_its_bound_and_keeps_its_failures_embedded() {
    let p = standard_project();
    p.write_config(json!({ "default_attempt": { "max_entries": 3 } }));
    retention_on(&p).await;
    // After the stop, from the data dir: the rolled-out failure is still there.
    let (code, env, err) = evidence_cli(&p, "default");
    assert_eq!(code, 1, "{err}");
    assert_eq!(codes(&env), ["harness_error"], "{env:#}");
    assert_eq!(env["rolled_over"]["rolls"], 5, "{env:#}");
    // `verify` with a contract the default attempt kept calling: it cannot be proven over a
    // rolled-over attempt (inconclusive, never a pass), and the rolled-out harness error
    // fails it first.
    let contract = p.path().join("lookup_contract.yaml");
    std::fs::write(
        &contract,
        "version: 1\nid: lookup_contract\nrisk: blocking\ntool: crm/lookup_contact_by_phone\n",
    )
    .unwrap();
    let dir = p.data_dir();
    let (code, out, err) = understudy(&[
        "verify",
        "default",
        "--data-dir",
        dir.to_str().unwrap(),
        "--contract",
        contract.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["passed"], false, "{v:#}");
    assert_eq!(v["verdict_reasons"][0]["code"], "harness_error", "{v:#}");
    assert_eq!(v["contract_results"][0]["status"], "inconclusive", "{v:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_attempt_rolls_over_at_its_bound_and_keeps_its_failures_postgres() {
    let Some(pg) = crate::pg::shared() else {
        return;
    };
    let p = standard_project();
    p.write_config(json!({ "store": pg.fresh_db(), "default_attempt": { "max_entries": 3 } }));
    retention_on(&p).await;
}

/// A fleet: an exclusive attempt created through process A, and a call without its token
/// that reaches process B, which never loaded that attempt — at once, before any change
/// notification could have told B about it. The attempt fails `outside_attempt`, read
/// through either process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_missed_an_exclusive_attempt_through_another_process_of_a_fleet_fails_it() {
    use crate::verdict_model::Proc;
    let Some(pg) = crate::pg::shared() else {
        return;
    };
    let url = pg.fresh_db();
    let p = standard_project();
    p.write_config(json!({ "store": url }));
    let a = Proc::start(&p, Some(&url));
    let b = Proc::start(&p, Some(&url));
    let http = crate::support::client();
    let send = |base: &str, method: &'static str, path: String, body: Option<Value>| {
        let (http, url) = (http.clone(), format!("{base}{path}"));
        async move { crate::support::send(&http, method, &url, body.as_ref(), &[]).await }
    };
    let r = send(
        &a.base,
        "POST",
        "/_understudy/api/attempts".into(),
        Some(json!({ "exclusive": true })),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let (id, token) = (
        r.json()["attempt_id"].as_str().unwrap().to_string(),
        r.json()["token"].as_str().unwrap().to_string(),
    );
    let r = send(&a.base, "GET", format!("/~{token}/crm{LOOKUP}"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let evidence = |base: String| {
        let id = id.clone();
        async move {
            let r = send(
                &base,
                "GET",
                format!("/_understudy/api/attempts/{id}/evidence"),
                None,
            )
            .await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.json()
        }
    };
    assert_eq!(evidence(a.base.clone()).await["verdict"], "pass");
    // No token, through B.
    let r = send(&b.base, "GET", format!("/crm{LOOKUP}"), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    for via in [&a.base, &b.base] {
        let env = evidence(via.clone()).await;
        assert_eq!(env["verdict"], "fail", "through {via}: {env:#}");
        assert_eq!(codes(&env), ["outside_attempt"], "{env:#}");
        assert_eq!(env["outside_attempt"]["calls"], 1, "{env:#}");
    }
    // Two more through A and B: every one counts, whichever process wrote last.
    for via in [&a.base, &b.base] {
        assert_eq!(
            send(via, "GET", format!("/crm{LOOKUP}"), None).await.status,
            200
        );
    }
    let env = evidence(b.base.clone()).await;
    assert_eq!(env["outside_attempt"]["calls"], 3, "{env:#}");
    assert_eq!(
        env["outside_attempt"]["listed"].as_array().unwrap().len(),
        3
    );
}
