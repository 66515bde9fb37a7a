//! Durability as a choice (issue 20): `"durability": "attempt"` in the project file or the
//! `POST /attempts` body. A real `understudy serve` answers calls, is killed with SIGKILL,
//! and starts again on the same data dir: an attempt with durability `attempt` that was open
//! is `interrupted` and fails (evidence verdict and `POST …/verify`), never passes; what a
//! verdict read saw before the kill is kept; an attempt with durability `call` keeps every
//! acknowledged call and passes (`faults.rs` covers the default under load).

use std::collections::BTreeSet;
use std::process::Child;

use serde_json::{json, Value};

use crate::faults::{get_json, try_spawn_serve_with, Lines};
use crate::support::{self, standard_project};

const API: &str = "/_understudy/api";

fn spawn(p: &support::Project) -> (Child, String, Lines) {
    let (child, base, lines, _) = try_spawn_serve_with(p, |_| {}).unwrap_or_else(|e| panic!("{e}"));
    (child, base, lines)
}

/// `POST /attempts` with `body`: the attempt id and the `api` base URL.
async fn create(client: &reqwest::Client, base: &str, body: Value) -> (String, String, Value) {
    let r = support::send(
        client,
        "POST",
        &format!("{base}{API}/attempts"),
        Some(&body),
        &[],
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let v = r.json();
    let id = v["attempt_id"].as_str().unwrap().to_string();
    let api = v["base_urls"]["api"].as_str().unwrap().to_string();
    (id, api, v)
}

/// `n` counter calls through `api` (each answered 200), numbered from `from`.
async fn calls(client: &reqwest::Client, api: &str, from: i64, n: i64) {
    for i in from..from + n {
        let r = support::send(
            client,
            "POST",
            &format!("{api}/counter"),
            Some(&json!({ "n": i })),
            &[],
        )
        .await;
        assert_eq!(r.status, 200, "call {i}: {}", r.text);
    }
}

/// The `n` arguments of the evidence's calls.
fn numbers(ev: &Value) -> BTreeSet<i64> {
    ev["tool_events"]
        .as_array()
        .expect("tool_events")
        .iter()
        .filter_map(|e| e["arguments"]["n"].as_i64())
        .collect()
}

/// The attempt's record, its evidence envelope and its `POST …/verify` answer.
async fn read_verdict(client: &reqwest::Client, base: &str, id: &str) -> (Value, Value, Value) {
    let attempt = get_json(client, &format!("{base}{API}/attempts/{id}")).await;
    let ev = get_json(client, &format!("{base}{API}/attempts/{id}/evidence")).await;
    let url = format!("{base}{API}/attempts/{id}/verify");
    let verify = support::send(client, "POST", &url, None, &[]).await;
    assert_eq!(verify.status, 200, "{}", verify.text);
    (attempt, ev, verify.json())
}

fn kill_9(mut child: Child) {
    child.kill().unwrap(); // SIGKILL: no destructor, no final flush
    let _ = child.wait();
}

fn assert_interrupted_fail(attempt: &Value, ev: &Value, verify: &Value) {
    assert_eq!(attempt["durability"], "attempt", "{attempt}");
    assert_eq!(attempt["interrupted"], true, "{attempt}");
    assert_eq!(ev["verdict"], "fail", "never a pass: {ev}");
    let reasons = ev["verdict_reasons"].as_array().expect("verdict_reasons");
    assert!(
        reasons.iter().any(|r| r["code"] == "interrupted"),
        "the reason names `interrupted`: {reasons:?}"
    );
    assert_eq!(verify["passed"], false, "verify says no: {verify}");
    assert!(
        verify["verdict_reasons"]
            .as_array()
            .is_some_and(|a| a.iter().any(|r| r["code"] == "interrupted")),
        "{verify}"
    );
}

#[test]
fn an_open_attempt_durability_attempt_killed_before_a_verdict_read_is_interrupted_and_fails() {
    let p = standard_project();
    p.write_config(json!({ "durability": "attempt" }));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = support::client();
    let (child, base, _out) = spawn(&p);
    let (lazy, eager) = rt.block_on(async {
        // The project's durability, and the body's override.
        let (lazy, api, created) = create(&client, &base, json!({})).await;
        assert_eq!(created["durability"], "attempt", "{created}");
        let (eager, eager_api, created) =
            create(&client, &base, json!({ "durability": "call" })).await;
        assert_eq!(created["durability"], "call", "{created}");
        // The default attempt (no token) follows the project file.
        let default = get_json(&client, &format!("{base}{API}/attempts/default")).await;
        assert_eq!(default["durability"], "attempt", "{default}");
        calls(&client, &api, 1, 20).await;
        calls(&client, &eager_api, 1, 20).await;
        (lazy, eager)
    });
    kill_9(child);

    let (child, base, _out) = spawn(&p);
    let ((attempt, ev, verify), (eager_attempt, eager_ev, _)) = rt.block_on(async {
        (
            read_verdict(&client, &base, &lazy).await,
            read_verdict(&client, &base, &eager).await,
        )
    });
    kill_9(child);
    assert_interrupted_fail(&attempt, &ev, &verify);
    // Durability `call`: every acknowledged call is there, nothing is interrupted.
    assert_eq!(eager_attempt["interrupted"], false, "{eager_attempt}");
    assert_eq!(numbers(&eager_ev), (1..=20).collect(), "{eager_ev}");
    assert_eq!(eager_ev["verdict"], "pass", "{eager_ev}");
}

#[test]
fn a_verdict_read_before_the_kill_keeps_every_event_it_read() {
    // Default project durability (`call`); the attempt asks for `attempt` in its body.
    let p = standard_project();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = support::client();
    let (child, base, _out) = spawn(&p);
    let (id, read) = rt.block_on(async {
        let (id, api, created) = create(&client, &base, json!({ "durability": "attempt" })).await;
        assert_eq!(created["durability"], "attempt", "{created}");
        let default = get_json(&client, &format!("{base}{API}/attempts/default")).await;
        assert_eq!(default["durability"], "call", "{default}");
        calls(&client, &api, 1, 30).await;
        let ev = get_json(&client, &format!("{base}{API}/attempts/{id}/evidence")).await;
        let read = numbers(&ev);
        assert_eq!(
            read,
            (1..=30).collect(),
            "the read sees every answered call"
        );
        // More calls after the read: they may be lost by the kill, the read ones may not.
        calls(&client, &api, 31, 10).await;
        (id, read)
    });
    kill_9(child);

    let (child, base, _out) = spawn(&p);
    let (attempt, ev, verify) = rt.block_on(read_verdict(&client, &base, &id));
    kill_9(child);
    let kept = numbers(&ev);
    let lost: Vec<&i64> = read.difference(&kept).collect();
    assert!(
        lost.is_empty(),
        "events read for a verdict were lost: {lost:?}"
    );
    assert_interrupted_fail(&attempt, &ev, &verify);
}

#[test]
fn an_unknown_durability_is_refused_naming_the_field_and_the_values() {
    let p = standard_project();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = support::client();
    let (child, base, _out) = spawn(&p);
    let r = rt.block_on(support::send(
        &client,
        "POST",
        &format!("{base}{API}/attempts"),
        Some(&json!({ "durability": "sometimes" })),
        &[],
    ));
    kill_9(child);
    assert_eq!(r.status, 400, "{}", r.text);
    for word in ["durability", "`call`", "`attempt`"] {
        assert!(r.text.contains(word), "names {word}: {}", r.text);
    }
    // The same in the project file: `serve` refuses to start.
    p.write_config(json!({ "durability": "sometimes" }));
    let e = match try_spawn_serve_with(&p, |_| {}) {
        Ok((child, ..)) => {
            kill_9(child);
            panic!("serve started with an unknown durability")
        }
        Err(e) => e,
    };
    for word in ["understudy.json", "durability", "`call`", "`attempt`"] {
        assert!(e.contains(word), "names {word}: {e}");
    }
}

#[test]
fn a_clean_stop_interrupts_nothing_and_keeps_every_call() {
    let p = standard_project();
    p.write_config(json!({ "durability": "attempt" }));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = support::client();
    let (mut child, base, _out) = spawn(&p);
    let id = rt.block_on(async {
        let (id, api, _) = create(&client, &base, json!({})).await;
        calls(&client, &api, 1, 20).await;
        id
    });
    // SIGTERM: the shutdown's final checkpoint makes everything durable and clears the marker.
    let pid = child.id().to_string();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(term.unwrap().success());
    assert!(child.wait().unwrap().success(), "serve exits 0 on SIGTERM");

    let (child, base, _out) = spawn(&p);
    let (attempt, ev, verify) = rt.block_on(read_verdict(&client, &base, &id));
    kill_9(child);
    assert_eq!(attempt["durability"], "attempt", "{attempt}");
    assert_eq!(attempt["interrupted"], false, "{attempt}");
    assert_eq!(numbers(&ev), (1..=20).collect(), "{ev}");
    assert_eq!(ev["verdict"], "pass", "{ev}");
    assert_eq!(verify["passed"], true, "{verify}");
}
