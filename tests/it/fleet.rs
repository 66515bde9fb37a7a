//! The fleet store (docs/src/operations/fleet-store.md, issue 17) with real components: a real PostgreSQL server
//! (`super::pg`) and real `understudy serve` processes sharing it — linearizable calls of one
//! attempt across processes, kill -9 of one process under load, revisions seen by the other
//! process within a second, idempotency across processes, PostgreSQL stopped mid-run, and
//! the fleet recipe of `examples/fleet/` behind real nginx.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::pg::{self, eventually};
use crate::support::{self, standard_project, Project, Resp};

/// One `understudy serve` process on a free port, killed (SIGKILL) when dropped.
pub(crate) struct Proc {
    child: Child,
    base: String,
}

impl Proc {
    pub(crate) fn start(p: &Project, store: &str) -> Proc {
        let log = std::fs::File::create(p.path().join(format!(
            "serve-{}.log",
            understudy::util::ids::random_hex(4)
        )))
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_understudy"))
            .args(["serve", "--config"])
            .arg(p.config_path())
            .args(["--listen", "127.0.0.1:0", "--store", store])
            .env_remove("UNDERSTUDY_ADMIN_TOKEN")
            .env_remove("UNDERSTUDY_STORE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn understudy serve");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = lines
            .next()
            .expect("a readiness line (see serve-*.log)")
            .unwrap();
        let base = ready
            .strip_prefix("understudy listening on ")
            .unwrap_or_else(|| panic!("unexpected readiness line {ready:?}"))
            .to_string();
        Proc { child, base }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(crate) async fn send(
    url: &str,
    method: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> Resp {
    support::send(&support::client(), method, url, body, headers).await
}

pub(crate) async fn new_attempt(p: &Proc) -> (String, String) {
    let r = send(
        &p.url("/_understudy/api/attempts"),
        "POST",
        Some(&json!({})),
        &[],
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let v = r.json();
    (
        v["attempt_id"].as_str().unwrap().to_string(),
        v["token"].as_str().unwrap().to_string(),
    )
}

async fn evidence(p: &Proc, id: &str) -> Value {
    let r = send(
        &p.url(&format!("/_understudy/api/attempts/{id}/evidence")),
        "GET",
        None,
        &[],
    )
    .await;
    assert_eq!(r.status, 200, "evidence: {}", r.text);
    r.json()
}

/// A project whose store is a fresh database of the shared server; `None`: skipped.
pub(crate) fn fleet_project() -> Option<(Project, String)> {
    let pg = pg::shared()?;
    let url = pg.fresh_db();
    let p = standard_project();
    p.write_config(json!({ "store": url }));
    Some((p, url))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_concurrent_calls_on_one_attempt_over_two_processes_never_lose_an_update() {
    const N: i64 = 200;
    let Some((p, url)) = fleet_project() else {
        return;
    };
    let (a, b) = (Proc::start(&p, &url), Proc::start(&p, &url));
    let (id, token) = new_attempt(&a).await;
    let client = support::client();
    let urls = (0..N)
        .map(|n| {
            let base = if n % 2 == 0 { &a.base } else { &b.base };
            format!("{base}/~{token}/api/counter")
        })
        .collect();
    let previous = support::post_counter_concurrently(&client, urls).await;
    let distinct: BTreeSet<i64> = previous.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        N as usize,
        "a value was read twice across processes"
    );
    assert!(distinct.contains(&-1));
    // Through either process: every call, dense, each saw the previous one's write.
    for via in [&a, &b] {
        let ev = evidence(via, &id).await;
        let events = ev["tool_events"].as_array().unwrap();
        assert_eq!(events.len(), N as usize);
        let mut expected_prev = -1;
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e["sequence"], i as u64 + 1);
            assert_eq!(e["result"]["data"]["previous"], expected_prev, "event {i}");
            expected_prev = e["arguments"]["n"].as_i64().unwrap();
        }
        assert_eq!(ev["final_state"]["api"]["counter"], expected_prev);
        assert_eq!(ev["verdict"], "pass");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_one_process_under_load_loses_no_acknowledged_call() {
    let Some((p, url)) = fleet_project() else {
        return;
    };
    let mut a = Proc::start(&p, &url);
    let b = Proc::start(&p, &url);
    let (id, token) = new_attempt(&b).await;
    let acked = Arc::new(Mutex::new(Vec::new()));
    let client = support::client();
    let mut tasks = Vec::new();
    for n in 0..160i64 {
        let base = if n % 2 == 0 {
            a.base.clone()
        } else {
            b.base.clone()
        };
        let url = format!("{base}/~{token}/api/counter");
        let (client, acked_by_task) = (client.clone(), acked.clone());
        tasks.push(tokio::spawn(async move {
            if let Ok(resp) = client.post(&url).json(&json!({ "n": n })).send().await {
                if resp.status().as_u16() == 200 && resp.bytes().await.is_ok() {
                    acked_by_task.lock().unwrap().push(n);
                }
            }
        }));
        if n == 80 {
            while acked.lock().unwrap().len() < 30 {
                tokio::task::yield_now().await;
            }
            a.kill(); // SIGKILL, calls in flight
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let acked = acked.lock().unwrap().clone();
    // B kept serving the same attempt: every odd call after the kill was acknowledged.
    for n in (81..160).filter(|n| n % 2 == 1) {
        assert!(acked.contains(&n), "call {n} through the surviving process");
    }
    let ev = evidence(&b, &id).await;
    let events = ev["tool_events"].as_array().unwrap();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence"], i as u64 + 1, "sequences are dense");
    }
    let recorded: BTreeSet<i64> = events
        .iter()
        .map(|e| e["arguments"]["n"].as_i64().unwrap())
        .collect();
    for n in &acked {
        assert!(
            recorded.contains(n),
            "acknowledged call {n} is in the evidence"
        );
    }
    // The chain holds across the kill: each event saw the previous one's write.
    let mut prev = -1;
    for e in events {
        assert_eq!(e["result"]["data"]["previous"], prev);
        prev = e["arguments"]["n"].as_i64().unwrap();
    }
    // A restarted process rejoins: it serves the same attempt, after the last write.
    let a2 = Proc::start(&p, &url);
    let r = send(
        &a2.url(&format!("/~{token}/api/counter")),
        "POST",
        Some(&json!({ "n": 1000 })),
        &[],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["previous"], prev);
    let ev = evidence(&b, &id).await;
    assert_eq!(
        ev["tool_events"].as_array().unwrap().len(),
        events.len() + 1
    );
    assert_eq!(ev["verdict"], "pass");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_saved_through_one_process_is_pinned_through_the_other_within_a_second() {
    let Some((p, url)) = fleet_project() else {
        return;
    };
    let (a, b) = (Proc::start(&p, &url), Proc::start(&p, &url));
    // Both synced the same files: they agree on revision 1.
    for via in [&a, &b] {
        let (_, _) = new_attempt(via).await;
    }
    let r = send(
        &a.url("/_understudy/api/tools/api/testing"),
        "GET",
        None,
        &[],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let t = r.json();
    let op = t["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation_id"] == "bump")
        .unwrap()
        .clone();
    assert_eq!(op["latest_revision"]["revision"], 1);
    let mut def = support::counter_op()["mock"].clone();
    def["variants"]["ok"]["result"]["data"]["v"] = json!(2);
    def["examples"][0]["expected"]["data"]["v"] = json!(2);
    let r = send(
        &a.url("/_understudy/api/tools/api/testing"),
        "POST",
        Some(&json!({ "action": "save", "operation_id": "bump", "contract_hash": op["contract_hash"], "definition": def })),
        &[],
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json()["revision"], 2);
    let saved = std::time::Instant::now();
    // A new attempt created through B pins revision 2 (and answers with it)...
    let (b_id, token) = eventually(Duration::from_secs(1), "B pins revision 2", || async {
        let r = send(
            &b.url("/_understudy/api/attempts?pins=true"),
            "POST",
            Some(&json!({})),
            &[],
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text);
        let v = r.json();
        (v["pins"]["api/bump"]["revision"] == 2).then(|| {
            (
                v["attempt_id"].as_str().unwrap().to_string(),
                v["token"].as_str().unwrap().to_string(),
            )
        })
    })
    .await;
    let r = send(
        &b.url(&format!("/~{token}/api/counter")),
        "POST",
        Some(&json!({ "n": 1 })),
        &[],
    )
    .await;
    assert_eq!(r.json(), json!({ "previous": -1, "v": 2 }), "{}", r.text);
    assert_eq!(evidence(&b, &b_id).await["tool_events"][0]["revision"], 2);
    // ...and B's default attempt follows the notification too.
    eventually(
        Duration::from_secs(1).saturating_sub(saved.elapsed()) + Duration::from_millis(200),
        "B's default attempt re-pinned",
        || async {
            let r = send(
                &b.url("/api/counter"),
                "POST",
                Some(&json!({ "n": 5 })),
                &[],
            )
            .await;
            assert_eq!(r.status, 200, "{}", r.text);
            (r.json()["v"] == 2).then_some(())
        },
    )
    .await;
}

fn idempotent_op() -> Value {
    json!({
        "operation_id": "create_order",
        "match": { "method": "POST", "path": "/orders" },
        "idempotency": { "header": "Idempotency-Key" },
        "input_schema": { "type": "object", "required": ["item"] },
        "output_schema": { "type": "object", "required": ["status"] },
        "mock": {
            "schema_version": 1, "default_variant": "ok",
            "initial_state": { "orders": 0, "last": null },
            "variants": { "ok": {
                "result": { "status": 201, "data": { "item": { "$input": "item" }, "before": { "$state": "last" } } },
                "set_state": { "last": { "$input": "item" } }
            } },
            "examples": [ { "variant": "ok", "input": { "item": "a" },
                            "expected": { "status": 201, "data": { "item": "a", "before": null } } } ]
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_write_repeated_through_the_other_process_is_replayed() {
    let Some((p, url)) = fleet_project() else {
        return;
    };
    p.op("api", idempotent_op());
    let (a, b) = (Proc::start(&p, &url), Proc::start(&p, &url));
    let (id, token) = new_attempt(&a).await;
    let key = [("Idempotency-Key", "order-1")];
    let path = format!("/~{token}/api/orders");
    let first = send(&a.url(&path), "POST", Some(&json!({ "item": "a" })), &key).await;
    assert_eq!(first.status, 201, "{}", first.text);
    let again = send(&b.url(&path), "POST", Some(&json!({ "item": "a" })), &key).await;
    assert_eq!(again.status, 201, "{}", again.text);
    assert_eq!(again.text, first.text, "replayed byte for byte");
    let other = send(&b.url(&path), "POST", Some(&json!({ "item": "b" })), &key).await;
    assert_eq!(other.status, 422, "{}", other.text);
    // No second side effect: a new key through A sees `a`, the first call's write, once.
    let third = send(
        &a.url(&path),
        "POST",
        Some(&json!({ "item": "c" })),
        &[("Idempotency-Key", "k2")],
    )
    .await;
    assert_eq!(third.json(), json!({ "item": "c", "before": "a" }));
    let ev = evidence(&b, &id).await;
    let statuses: Vec<&str> = ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["result_status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["ok", "replayed", "input_error", "ok"]);
    assert_eq!(ev["verdict"], "pass");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stopped_mid_run_is_store_error_and_the_process_recovers() {
    let Some(pg) = pg::own() else {
        return;
    };
    let url = pg.fresh_db();
    let p = standard_project();
    let a = Proc::start(&p, &url);
    let (id, token) = new_attempt(&a).await;
    let call = |n: i64| {
        let u = a.url(&format!("/~{token}/api/counter"));
        async move { send(&u, "POST", Some(&json!({ "n": n })), &[]).await }
    };
    assert_eq!(call(1).await.status, 200);
    pg.stop();
    let r = call(2).await;
    assert_eq!(r.status, 500, "{}", r.text);
    assert_eq!(r.header("understudy-error"), Some("store_error"));
    assert_eq!(r.json()["understudy_error"]["code"], "store_error");
    // The process keeps serving what needs no database.
    let h = send(&a.url("/_understudy/api/health"), "GET", None, &[]).await;
    assert_eq!(h.status, 200, "{}", h.text);
    pg.restart();
    let r = eventually(Duration::from_secs(20), "calls succeed again", || async {
        let r = call(3).await;
        (r.status == 200).then_some(r)
    })
    .await;
    assert_eq!(r.json()["previous"], 1, "the failed call changed nothing");
    let ev = evidence(&a, &id).await;
    assert_eq!(ev["verdict"], "fail", "a store_error is never a pass: {ev}");
}

// ---- the fleet recipe: examples/fleet/ behind real nginx ------------------------------------

#[test]
fn the_fleet_recipe_serves_the_quick_start_through_nginx() {
    let ci = crate::support::in_ci();
    let nginx_missing = Command::new("sh")
        .args(["-c", "command -v nginx || test -x /usr/sbin/nginx"])
        .stdout(Stdio::null())
        .status()
        .map(|s| !s.success())
        .unwrap_or(true);
    if nginx_missing {
        assert!(
            !ci,
            "nginx is required under CI=true (.ci/run installs nginx-light)"
        );
        eprintln!("SKIPPED (fleet recipe): nginx is not installed");
        return;
    }
    if pg::shared().is_none() {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let work = tempfile::tempdir().unwrap();
    let mut child = Command::new("bash")
        .arg(root.join("examples/fleet/fleet.sh"))
        .env("UNDERSTUDY_BIN", env!("CARGO_BIN_EXE_understudy"))
        .env("FLEET_PORT", port.to_string())
        .env("FLEET_DIR", work.path())
        .env("FLEET_DATA", work.path().join("pgdata"))
        .env("FLEET_ADMIN_TOKEN", "fleet-test-admin-token-1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(work.path().join("fleet.log")).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut base = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(b) = line.strip_prefix("fleet listening on ") {
            base = Some(b.to_string());
            break;
        }
    }
    let log = || std::fs::read_to_string(work.path().join("fleet.log")).unwrap_or_default();
    let Some(base) = base else {
        let _ = child.wait();
        panic!("the fleet did not start:\n{}", log());
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            // The README's quick-start calls, through the load balancer (round robin).
            let q = send(&format!("{base}/crm/services/data/v60.0/query?q=SELECT+Id,+FirstName,+LastName,+Phone+FROM+Contact+WHERE+Phone+=+'555-0100'"), "GET", None, &[]).await;
            assert_eq!(q.status, 200, "{}", q.text);
            let book = send(
                &format!("{base}/crm/services/data/v60.0/sobjects/Appointment__c"),
                "POST",
                Some(&json!({ "Contact__c": "003Hp00000Ab12CAAR", "Requested_Date__c": "2026-12-01" })),
                &[],
            )
            .await;
            assert!(book.status < 300, "{}", book.text);
            // Behind nginx loopback grants nothing: the admin API needs the fleet's token.
            let auth = ("authorization", "Bearer fleet-test-admin-token-1");
            let r = send(&format!("{base}/_understudy/api/attempts/default/evidence"), "GET", None, &[]).await;
            assert_eq!(r.status, 401, "{}", r.text);
            // A wrong token is refused too, and so are a hostile Host (DNS rebinding through
            // the front) and a foreign Origin, even with the right token: the gate stands
            // behind the reverse proxy as it does in front of it.
            let evidence = format!("{base}/_understudy/api/attempts/default/evidence");
            let r = send(&evidence, "GET", None, &[("authorization", "Bearer not-the-token")]).await;
            assert_eq!(r.status, 401, "{}", r.text);
            let r = send(&evidence, "GET", None, &[auth, ("host", "evil.test")]).await;
            assert_eq!(r.status, 403, "{}", r.text);
            assert!(r.text.contains("forbidden_host"), "{}", r.text);
            let r = send(&evidence, "GET", None, &[auth, ("origin", "http://evil.test")]).await;
            assert_eq!(r.status, 403, "{}", r.text);
            assert!(r.text.contains("forbidden_origin"), "{}", r.text);
            let ev = send(&evidence, "GET", None, &[auth]).await;
            assert_eq!(ev.status, 200, "{}", ev.text);
            let ev = ev.json();
            let events = ev["tool_events"].as_array().unwrap();
            assert!(events.len() >= 2, "both calls in the shared default attempt: {ev}");
            // An attempt's calls and evidence through the load balancer.
            let a = send(&format!("{base}/_understudy/api/attempts"), "POST", Some(&json!({ "test_run_id": "fleet" })), &[auth]).await;
            assert_eq!(a.status, 201, "{}", a.text);
            let a = a.json();
            let crm = a["base_urls"]["crm"].as_str().unwrap().to_string();
            let id = a["attempt_id"].as_str().unwrap();
            let path = crm.split_once("/~").map(|(_, t)| format!("/~{t}")).unwrap();
            for _ in 0..4 {
                let r = send(&format!("{base}{path}/services/data/v60.0/query?q=SELECT+Id,+FirstName,+LastName,+Phone+FROM+Contact+WHERE+Phone+=+'555-0100'"), "GET", None, &[]).await;
                assert_eq!(r.status, 200, "{}", r.text);
            }
            let ev = send(&format!("{base}/_understudy/api/attempts/{id}/evidence"), "GET", None, &[auth]).await;
            assert_eq!(ev.status, 200, "{}", ev.text);
            let ev = ev.json();
            assert_eq!(ev["tool_events"].as_array().unwrap().len(), 4);
            assert_eq!(ev["verdict"], "pass");
        })
    }));
    // SIGTERM: the script stops nginx, the servers and PostgreSQL.
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    if let Err(e) = result {
        eprintln!("fleet log:\n{}", log());
        std::panic::resume_unwind(e);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_starting_together_agree_on_revisions_and_share_one_default_attempt() {
    let Some((p, url)) = fleet_project() else {
        return;
    };
    // Both sync the same files (and create the schema, and the default attempt) at once.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| Proc::start(&p, &url));
        let b = s.spawn(|| Proc::start(&p, &url));
        (a.join().unwrap(), b.join().unwrap())
    });
    for via in [&a, &b] {
        let r = send(
            &via.url("/_understudy/api/revisions/api/bump"),
            "GET",
            None,
            &[],
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text);
        let v = r.json();
        let revs = v["revisions"].as_array().unwrap_or_else(|| panic!("{v}"));
        assert_eq!(revs.len(), 1, "one revision, not one per process: {v}");
        assert_eq!(revs[0]["revision"], 1);
    }
    // Calls without a token reach the same default attempt through either process.
    let r = send(
        &a.url("/api/counter"),
        "POST",
        Some(&json!({ "n": 7 })),
        &[],
    )
    .await;
    assert_eq!(r.json()["previous"], -1, "{}", r.text);
    let r = send(
        &b.url("/api/counter"),
        "POST",
        Some(&json!({ "n": 8 })),
        &[],
    )
    .await;
    assert_eq!(r.json()["previous"], 7, "{}", r.text);
    let ev = send(
        &b.url("/_understudy/api/attempts/default/evidence"),
        "GET",
        None,
        &[],
    )
    .await;
    assert_eq!(ev.json()["tool_events"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_execute_and_the_state_route_read_the_state_another_process_wrote() {
    let Some((p, url)) = fleet_project() else {
        return;
    };
    let (a, b) = (Proc::start(&p, &url), Proc::start(&p, &url));
    let (id, token) = new_attempt(&a).await;
    let bump = |via: &Proc, n: i64| {
        let url = via.url(&format!("/~{token}/api/counter"));
        async move {
            let r = send(&url, "POST", Some(&json!({ "n": n })), &[]).await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.json()["previous"].as_i64().unwrap()
        }
    };
    // A holds the attempt's state in memory (counter 1); then B writes 2.
    assert_eq!(bump(&a, 1).await, -1);
    assert_eq!(bump(&b, 2).await, 1);
    // Through A: what B wrote, not A's copy (read under the attempt's row lock).
    let r = send(
        &a.url("/_understudy/api/tools/execute"),
        "POST",
        Some(&json!({"integration": "api", "operation_id": "bump", "input": {"n": 3}, "attempt": id})),
        &[],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["result"]["data"]["previous"], 2, "{v}");
    assert_eq!(v["state_after"]["counter"], 3, "{v}");
    let r = send(
        &a.url(&format!("/_understudy/api/attempts/{id}/state")),
        "GET",
        None,
        &[],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["state"]["api"]["counter"], 2, "{}", r.text);
    // An execute commits nothing: the next call through A still reads 2, then B sees A's 4.
    assert_eq!(bump(&a, 4).await, 2);
    assert_eq!(bump(&b, 5).await, 4);
    let ev = evidence(&b, &id).await;
    assert_eq!(ev["tool_events"].as_array().unwrap().len(), 4);
    assert_eq!(ev["verdict"], "pass");
}

/// A late call on the fleet store: the attempt is ended through one process, then called
/// with its token through the other, which may not have seen the end yet. Whether that
/// process refuses it (410 `attempt_ended`) or answers it, the call is recorded after
/// `ended_at`, so the attempt's verdict — read through either process — is `fail` with
/// `attempt_ended`. The end took the attempt's row lock like a call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_call_through_the_other_process_fails_attempt_ended() {
    let Some((p, url)) = fleet_project() else {
        return;
    };
    let (a, b) = (Proc::start(&p, &url), Proc::start(&p, &url));
    let (id, token) = new_attempt(&a).await;
    let call = |via: &Proc| {
        let u = via.url(&format!("/~{token}/api/counter"));
        async move { send(&u, "POST", Some(&json!({ "n": 1 })), &[]).await }
    };
    assert_eq!(call(&b).await.status, 200);
    let r = send(
        &a.url(&format!("/_understudy/api/attempts/{id}")),
        "DELETE",
        None,
        &[],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(evidence(&b, &id).await["verdict"], "pass");
    // The clock's resolution is a millisecond: the late call is stamped after the end.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let late = call(&b).await;
    assert!(
        late.status == 410 || late.status == 200,
        "{} {}",
        late.status,
        late.text
    );
    for via in [&a, &b] {
        let ev = evidence(via, &id).await;
        assert_eq!(ev["verdict"], "fail", "{ev:#}");
        assert!(
            ev["verdict_reasons"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["code"] == "attempt_ended"),
            "{ev:#}"
        );
    }
}

/// Chaos counters across processes: a fault that `times: 1` allows once fires once, however
/// the calls alternate between two processes on one PostgreSQL (each process derives the
/// counters from the attempt's evidence under its row lock when the other wrote last); and a
/// seeded `probability` draws one sequence, the same as one process would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_that_times_1_allows_fires_once_across_two_processes() {
    let Some((p, url)) = fleet_project() else {
        return;
    };
    let (a, b) = (Proc::start(&p, &url), Proc::start(&p, &url));
    let create = |faults: Value| {
        let url = a.url("/_understudy/api/attempts");
        async move {
            let r = send(&url, "POST", Some(&json!({ "faults": faults })), &[]).await;
            assert_eq!(r.status, 201, "{}", r.text);
            let v = r.json();
            (
                v["attempt_id"].as_str().unwrap().to_string(),
                v["token"].as_str().unwrap().to_string(),
            )
        }
    };
    let once =
        json!({"api/bump": {"kind": "status", "after_effect": false, "status": 503, "times": 1}});
    let (id, token) = create(once).await;
    let path = format!("/~{token}/api/counter");
    let mut statuses = Vec::new();
    for i in 0..6 {
        let proc = if i % 2 == 0 { &a } else { &b };
        let r = send(&proc.url(&path), "POST", Some(&json!({ "n": i })), &[]).await;
        statuses.push(r.status);
    }
    assert_eq!(statuses, [503, 200, 200, 200, 200, 200]);
    let ev = evidence(&b, &id).await;
    let faulted = ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.get("fault").is_some())
        .count();
    assert_eq!(faulted, 1, "{ev:#}");

    // A seeded draw: the statuses through two processes are those of one process.
    let seeded = json!({"api/bump": {"kind": "status", "after_effect": false, "status": 503,
        "probability": 0.5, "seed": 7, "times": 3}});
    let mut runs = Vec::new();
    for alternate in [false, true] {
        let (_, token) = create(seeded.clone()).await;
        let path = format!("/~{token}/api/counter");
        let mut statuses = Vec::new();
        for i in 0..12 {
            let proc = if alternate && i % 2 == 1 { &b } else { &a };
            let r = send(&proc.url(&path), "POST", Some(&json!({ "n": i })), &[]).await;
            statuses.push(r.status);
        }
        runs.push(statuses);
    }
    assert_eq!(runs[0], runs[1]);
    assert!(
        runs[0].iter().filter(|s| **s == 503).count() <= 3,
        "{runs:?}"
    );
    assert!(
        runs[0].contains(&503),
        "the seed draws at least one fault: {runs:?}"
    );
}

/// The commit lane (docs/src/operations/fleet-store.md): concurrent calls of many attempts
/// through one process share transactions — fewer commits than calls — and each attempt's
/// evidence stays dense and chained (every call saw the previous one's write).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_of_many_attempts_share_commits_and_each_attempt_stays_linearizable() {
    const ATTEMPTS: usize = 8;
    const PER: usize = 24;
    let Some((p, url)) = fleet_project() else {
        return;
    };
    let a = Proc::start(&p, &url);
    let mut attempts = Vec::new();
    for _ in 0..ATTEMPTS {
        attempts.push(new_attempt(&a).await);
    }
    let flushes = |text: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix("understudy_store_flushes_total "))
            .and_then(|v| v.trim().parse().ok())
            .expect("the flush counter in /metrics")
    };
    let before = flushes(
        &send(&a.url("/_understudy/api/metrics"), "GET", None, &[])
            .await
            .text,
    );
    let client = support::client();
    let urls = (0..ATTEMPTS * PER)
        .map(|n| a.url(&format!("/~{}/api/counter", attempts[n % ATTEMPTS].1)))
        .collect();
    support::post_counter_concurrently(&client, urls).await;
    let after = flushes(
        &send(&a.url("/_understudy/api/metrics"), "GET", None, &[])
            .await
            .text,
    );
    let commits = after - before;
    assert!(
        commits < (ATTEMPTS * PER) as u64 * 3 / 4,
        "{} calls took {commits} commits: calls do not share transactions",
        ATTEMPTS * PER
    );
    for (id, _) in &attempts {
        let ev = evidence(&a, id).await;
        let events = ev["tool_events"].as_array().unwrap();
        assert_eq!(events.len(), PER);
        let mut prev = -1;
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e["sequence"], i as u64 + 1);
            assert_eq!(e["result"]["data"]["previous"], prev, "event {i} of {id}");
            prev = e["arguments"]["n"].as_i64().unwrap();
        }
        assert_eq!(ev["verdict"], "pass");
    }
}

/// A lease another process holds is handed over on request: a call through the second
/// process of an attempt the first one has just served is answered well within the lease
/// wait (not after the first process's idle release), and reads the first one's write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_held_by_another_process_is_handed_over_on_request() {
    let Some((p, url)) = fleet_project() else {
        return;
    };
    let (a, b) = (Proc::start(&p, &url), Proc::start(&p, &url));
    let (_, token) = new_attempt(&a).await;
    let call = |base: String, n: i64| {
        let u = format!("{base}/~{token}/api/counter");
        async move { send(&u, "POST", Some(&json!({ "n": n })), &[]).await }
    };
    for round in 0..5i64 {
        let r = call(a.base.clone(), 2 * round).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let started = std::time::Instant::now();
        let r = call(b.base.clone(), 2 * round + 1).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.json()["previous"], 2 * round, "B read A's write");
        // The idle release is 2 s: a hand-over on request is far quicker.
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "hand-over took {:?}",
            started.elapsed()
        );
    }
}

/// One call of the counter through a raw connection that its client closes after `hang_up`
/// (the call still in flight, as every connection of a load generator at its end); the
/// answer, when it came sooner, is ignored.
async fn call_and_hang_up(base: &str, token: &str, n: i64, hang_up: Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = base.strip_prefix("http://").unwrap();
    let Ok(mut s) = tokio::net::TcpStream::connect(host).await else {
        return;
    };
    let body = json!({ "n": n }).to_string();
    let req = format!(
        "POST /~{token}/api/counter HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    if s.write_all(req.as_bytes()).await.is_err() {
        return;
    }
    let mut buf = [0u8; 512];
    let _ = tokio::time::timeout(hang_up, s.read(&mut buf)).await;
    // Dropped: the socket closes, and the server drops the call wherever it is.
}

/// Clients that hang up mid-call never keep the attempt's lease: while B keeps taking the
/// lease back, 32 connections to A each send a call of the same attempt and close within
/// 0–23 ms (so that many close while their call waits for the hand-over), for 1.5 s. Then
/// B's calls are answered 200 within the hand-over bound — not `store_error` after the 5 s
/// lease wait, which is what a hold left counted by a dropped call gives, on every call, for
/// as long as A lives. And every call that was recorded, through either process, saw the
/// previous one's write (a lease taken for a call that went away must not leave A serving
/// the next call from a copy older than B's writes: it did, before, from the state read for
/// a call that had gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clients_hanging_up_mid_call_never_keep_the_attempts_lease() {
    let Some((p, url)) = fleet_project() else {
        return;
    };
    let (a, b) = (Proc::start(&p, &url), Proc::start(&p, &url));
    let (id, token) = new_attempt(&a).await;
    let churn = Duration::from_millis(1500);
    let until = std::time::Instant::now() + churn;
    let next = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let mut tasks = Vec::new();
    for c in 0..32u64 {
        let (base, token, next) = (a.base.clone(), token.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = c;
            while std::time::Instant::now() < until {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                call_and_hang_up(&base, &token, n, Duration::from_millis(i % 24)).await;
                i += 7;
            }
        }));
    }
    let (b_base, b_token, b_next) = (b.base.clone(), token.clone(), next.clone());
    tasks.push(tokio::spawn(async move {
        let u = format!("{b_base}/~{b_token}/api/counter");
        while std::time::Instant::now() < until {
            let n = 1_000_000 + b_next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = send(&u, "POST", Some(&json!({ "n": n })), &[]).await;
        }
    }));
    for t in tasks {
        t.await.unwrap();
    }
    let u = b.url(&format!("/~{token}/api/counter"));
    for n in [-10i64, -11, -12] {
        let started = std::time::Instant::now();
        let r = send(&u, "POST", Some(&json!({ "n": n })), &[]).await;
        assert_eq!(
            r.status,
            200,
            "a call through B after A's clients hung up ({:?}): {}",
            started.elapsed(),
            r.text
        );
        // The lease wait is 5 s; a hand-over (even behind calls A's store still runs for
        // clients that went away) is well within it.
        assert!(
            started.elapsed() < Duration::from_millis(4000),
            "hand-over took {:?}",
            started.elapsed()
        );
    }
    let ev = evidence(&b, &id).await;
    let events = ev["tool_events"].as_array().unwrap();
    assert!(events.len() > 3, "calls went through: {}", events.len());
    let shown: Vec<String> = events
        .iter()
        .map(|e| {
            let (d, a) = (&e["result"]["data"], &e["arguments"]);
            format!("#{} n={} previous={}", e["sequence"], a["n"], d["previous"])
        })
        .collect();
    let mut prev = -1;
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence"], i as u64 + 1, "sequences are dense");
        assert_eq!(
            e["result"]["data"]["previous"],
            prev,
            "event {} did not see the previous call's write (A's calls are n < 1000000):\n{}",
            i + 1,
            shown.join("\n")
        );
        prev = e["arguments"]["n"].as_i64().unwrap();
    }
    assert_eq!(ev["verdict"], "pass");
}
