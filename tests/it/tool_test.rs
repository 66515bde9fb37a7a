//! `POST /tools/execute` as the tool-testing APIs of the seeds describe it (issue 21), through
//! HTTP on a copy of `examples/healthplus` whose `crm` upstream is a counting loopback
//! server: a dry run simulates a write instead of failing (seed 002 "Execute a tool in test
//! mode": `dry_run`, `source`, `is_write`, `blocked_side_effects`, `duration_ms` in every
//! answer), the time budget from `timeout_seconds` and the `Request-Timeout` /
//! `Request-Timeout-Millis` headers (seed 004 "Test Lambda tool"), and `test_context` secrets
//! for one upstream call. (That no secret reaches the answer, the logs or a file is
//! `dryrun::no_secret_reaches_the_store_the_drafts_or_the_logs`.)

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{json, Value};
use understudy::app::AppOptions;
use understudy::config::Config;

use crate::dryrun::{salesforce_handler, upstream, Log};
use crate::support::{self, Resp, Server};

const EXECUTE: &str = "/_understudy/api/tools/execute";

/// The HealthPlus copy with its upstream at `addr`, plus three operations of its own: a write
/// without a mock (the profile's `simulate` stands in), a write nothing can stand in for (a
/// `GET` marked `write`, no mock), and a slow read (its variant delays 400 ms).
fn example(addr: SocketAddr) -> tempfile::TempDir {
    let dir = support::healthplus();
    let file = dir.path().join("understudy.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    cfg["integrations"]["crm"]["upstream"] = json!(format!("http://{addr}"));
    std::fs::write(&file, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
    let ops = dir.path().join("mocks/crm");
    let cancel = json!({
        "operation_id": "cancel_appointment",
        "description": "Cancel an appointment",
        "match": { "method": "PATCH", "path": "/services/data/*/sobjects/Appointment__c/{id}" },
        "input_schema": { "type": "object", "required": ["id"],
                          "properties": { "id": { "type": "string" } } },
        "output_schema": { "type": "object", "required": ["status"] }
    });
    let sync = json!({
        "operation_id": "trigger_sync",
        "description": "Start a sync (a GET that changes things)",
        "write": true,
        "match": { "method": "GET", "path": "/services/data/*/sync" },
        "input_schema": { "type": "object" },
        "output_schema": { "type": "object", "required": ["status"] }
    });
    let slow_result = json!({ "status": 200, "data": { "done": true } });
    let mut slow_mock = support::mock(slow_result, json!({}));
    slow_mock["variants"]["ok"]["delay_ms"] = json!(400);
    let slow = support::rest_op(
        "slow_report",
        "GET",
        "/services/data/*/slow",
        Some(slow_mock),
    );
    for op in [cancel, sync, slow] {
        let id = op["operation_id"].as_str().unwrap();
        std::fs::write(
            ops.join(format!("{id}.json")),
            serde_json::to_vec_pretty(&op).unwrap(),
        )
        .unwrap();
    }
    dir
}

async fn start(dir: &Path) -> Server {
    let cfg = Config::load(&dir.join("understudy.json")).expect("the example loads");
    Server::start_with(AppOptions::new(cfg)).await
}

async fn exec(s: &Server, body: Value, headers: &[(&str, &str)]) -> Resp {
    s.call("POST", EXECUTE, Some(&body), headers).await
}

/// The example's booking input and the answer its `booked` variant documents.
fn booking() -> (Value, Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/healthplus/mocks/crm/book_appointment.json");
    let file: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let ex = &file["mock"]["examples"][0];
    (ex["input"].clone(), ex["expected"].clone())
}

/// Seed 002's members, present in every execute answer.
fn assert_tool_test_members(v: &Value, dry_run: bool, is_write: bool, blocked: &[&str]) {
    assert_eq!(v["dry_run"], dry_run, "{v}");
    assert_eq!(v["source"], "tool_test", "{v}");
    assert_eq!(v["is_write"], is_write, "{v}");
    assert_eq!(v["blocked_side_effects"], json!(blocked), "{v}");
    assert!(v["duration_ms"].as_f64().is_some_and(|d| d >= 0.0), "{v}");
}

fn writes(log: &Log) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|s| s.method != "GET")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_simulates_a_write_and_never_sends_it() {
    let (addr, log) = upstream(None, salesforce_handler()).await;
    let dir = example(addr);
    let s = start(dir.path()).await;
    let (input, booked) = booking();
    let book = |extra: Value| {
        let mut b = json!({ "integration": "crm", "operation_id": "book_appointment",
                            "input": input.clone() });
        if let (Value::Object(m), Value::Object(e)) = (&mut b, extra) {
            m.extend(e);
        }
        b
    };

    // The call: a dry run on the mock answers the mock's result, commits nothing.
    let r = exec(&s, book(json!({ "dry_run": true })), &[]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["target"], "mock", "{v}");
    assert_eq!(v["error"], Value::Null, "{v}");
    assert_eq!(v["result"], booked, "{v}");
    assert_tool_test_members(&v, true, true, &["crm/book_appointment"]);
    // Without dry_run the mock still commits nothing: the write is held back all the same.
    let v = exec(&s, book(json!({})), &[]).await.json();
    assert_eq!(v["result"], booked, "{v}");
    assert_tool_test_members(&v, false, true, &["crm/book_appointment"]);
    // A read on the mock holds nothing back.
    let lookup = json!({ "integration": "crm", "operation_id": "lookup_contact_by_phone",
                         "input": { "phone": "+1 555 0100" } });
    let v = exec(&s, lookup.clone(), &[]).await.json();
    assert_eq!(v["error"], Value::Null, "{v}");
    assert_tool_test_members(&v, false, false, &[]);

    // Upstream, dry run: the write is not sent; the pinned mock's result stands in.
    for allow_write in [false, true] {
        let r = exec(
            &s,
            book(json!({ "target": "upstream", "dry_run": true, "allow_write": allow_write })),
            &[],
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text);
        let v = r.json();
        assert_eq!(v["target"], "upstream", "{v}");
        assert_eq!(v["error"], Value::Null, "{v}");
        assert_eq!(v["error_kind"], Value::Null, "{v}");
        assert_eq!(v["result"], booked, "{v}");
        assert_eq!(v["simulated_from"], "mock", "{v}");
        assert_eq!(v["status_code"], Value::Null, "nothing was sent: {v}");
        assert_eq!(v["validation_results"]["output_valid"], true, "{v}");
        assert_tool_test_members(&v, true, true, &["crm/book_appointment"]);
    }
    // A write without a mock: the profile's `simulate` answer (Salesforce PATCH: 204).
    let v = exec(
        &s,
        json!({ "integration": "crm", "operation_id": "cancel_appointment",
                "input": { "id": "a0BHp000001AbCdMAK" }, "target": "upstream", "dry_run": true }),
        &[],
    )
    .await
    .json();
    assert_eq!(v["error"], Value::Null, "{v}");
    assert_eq!(v["simulated_from"], "profile", "{v}");
    assert_eq!(v["result"], json!({ "status": 204 }), "{v}");
    assert_tool_test_members(&v, true, true, &["crm/cancel_appointment"]);
    // Nothing can stand in: an error that says why for each.
    let v = exec(
        &s,
        json!({ "integration": "crm", "operation_id": "trigger_sync", "input": {},
                "target": "upstream", "dry_run": true }),
        &[],
    )
    .await
    .json();
    assert_eq!(v["error"]["code"], "no_simulated_answer", "{v}");
    assert_eq!(v["error_kind"], "harness_error", "{v}");
    let m = v["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("no mock") && m.contains("simulate") && m.contains("GET"),
        "{m}"
    );
    assert_tool_test_members(&v, true, true, &["crm/trigger_sync"]);
    // Without dry_run or allow_write a write still fails as before (and is listed).
    let v = exec(&s, book(json!({ "target": "upstream" })), &[])
        .await
        .json();
    assert_eq!(v["error"]["code"], "write_blocked", "{v}");
    assert_tool_test_members(&v, false, true, &["crm/book_appointment"]);
    assert_eq!(writes(&log), 0, "no write reached the upstream");
    assert!(
        log.lock().unwrap().is_empty(),
        "nothing reached the upstream"
    );

    // A read under dry run goes to the real system as usual.
    let mut up = lookup.clone();
    up["target"] = json!("upstream");
    up["dry_run"] = json!(true);
    let v = exec(&s, up, &[]).await.json();
    assert_eq!(v["error"], Value::Null, "{v}");
    assert_eq!(v["status_code"], 200, "{v}");
    assert_tool_test_members(&v, true, false, &[]);
    assert_eq!(log.lock().unwrap().len(), 1, "the read was sent once");
    assert_eq!(writes(&log), 0, "and still no write");

    // `target: "upstream"` on an integration without one is refused, naming what to add.
    let bare = support::healthplus();
    let file = bare.path().join("understudy.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    cfg["integrations"]["crm"]
        .as_object_mut()
        .unwrap()
        .remove("upstream");
    std::fs::write(&file, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
    let no_up = start(bare.path()).await;
    let r = exec(
        &no_up,
        book(json!({ "target": "upstream", "dry_run": true })),
        &[],
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.json()["error"]["code"], "no_upstream");
    let r = exec(&no_up, book(json!({ "dry_run": true })), &[]).await;
    assert_eq!(
        r.status, 200,
        "a dry run on the mock needs no upstream: {}",
        r.text
    );
    no_up.stop().await.unwrap();
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_comes_from_timeout_seconds_and_the_request_timeout_headers() {
    let (addr, _log) = upstream(None, salesforce_handler()).await;
    let dir = example(addr);
    let s = start(dir.path()).await;
    let slow = json!({ "integration": "crm", "operation_id": "slow_report", "input": {} });
    let with = |extra: Value| {
        let mut b = slow.clone();
        if let (Value::Object(m), Value::Object(e)) = (&mut b, extra) {
            m.extend(e);
        }
        b
    };
    let timed_out = |r: &Resp, seconds: f64, from: &str| {
        assert_eq!(r.status, 504, "{}", r.text);
        let e = &r.json()["error"];
        assert_eq!(e["code"], "timeout", "{e}");
        assert_eq!(e["details"][0]["timeout_seconds"], seconds, "{e}");
        assert_eq!(e["details"][0]["budget_from"], from, "{e}");
        assert_eq!(e["details"][0]["delay_ms"], 400, "{e}");
    };
    // Each source alone.
    let r = exec(&s, slow.clone(), &[("Request-Timeout-Millis", "100")]).await;
    timed_out(&r, 0.1, "the Request-Timeout-Millis header");
    let r = exec(&s, with(json!({ "timeout_seconds": 0.1 })), &[]).await;
    timed_out(&r, 0.1, "timeout_seconds");
    let r = exec(&s, slow.clone(), &[("Request-Timeout", "5")]).await;
    assert_eq!(r.status, 200, "5 s is enough: {}", r.text);
    // The smallest wins, whichever says it.
    let r = exec(
        &s,
        with(json!({ "timeout_seconds": 5 })),
        &[("Request-Timeout", "1"), ("Request-Timeout-Millis", "150")],
    )
    .await;
    timed_out(&r, 0.15, "the Request-Timeout-Millis header");
    let r = exec(
        &s,
        with(json!({ "timeout_seconds": 0.2 })),
        &[("Request-Timeout", "3")],
    )
    .await;
    timed_out(&r, 0.2, "timeout_seconds");

    // Beyond a non-streaming call's limit: 422 telling to stream; streamed it runs.
    for (body, headers) in [
        (slow.clone(), vec![("Request-Timeout", "301")]),
        (slow.clone(), vec![("Request-Timeout-Millis", "300001")]),
        (with(json!({ "timeout_seconds": 600 })), vec![]),
    ] {
        let r = exec(&s, body.clone(), &headers).await;
        assert_eq!(r.status, 422, "{}", r.text);
        let e = &r.json()["error"];
        assert_eq!(e["code"], "stream_required", "{e}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("stream_response: true"),
            "{e}"
        );
        let mut streamed = body.clone();
        streamed["stream_response"] = json!(true);
        let r = exec(&s, streamed, &headers).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.text.contains("event: result"), "{}", r.text);
    }
    let r = exec(
        &s,
        with(json!({ "stream_response": true })),
        &[("Request-Timeout", "21601")],
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.json()["error"]["code"], "timeout_too_long");

    // Bad values: 400 naming the header or field.
    for (header, value) in [
        ("Request-Timeout", "soon"),
        ("Request-Timeout", "1.5"),
        ("Request-Timeout", "0"),
        ("Request-Timeout-Millis", "-5"),
        ("Request-Timeout-Millis", "99999999999999999999999"),
    ] {
        let r = exec(&s, slow.clone(), &[(header, value)]).await;
        assert_eq!(r.status, 400, "{header}: {value}: {}", r.text);
        let m = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(m.starts_with(&format!("{header} header:")), "{m}");
    }
    for t in [json!("10"), json!(0), json!(-1)] {
        let r = exec(&s, with(json!({ "timeout_seconds": t })), &[]).await;
        assert_eq!(r.status, 400, "{}", r.text);
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("timeout_seconds"),
            "{}",
            r.text
        );
    }
    s.stop().await.unwrap();
}

/// An upstream that accepts connections and never answers.
async fn silent_upstream() -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((c, _)) = l.accept().await {
            held.push(c);
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_bounds_an_upstream_call_too() {
    let dir = example(silent_upstream().await);
    let s = start(dir.path()).await;
    let lookup = json!({ "integration": "crm", "operation_id": "lookup_contact_by_phone",
                         "input": { "phone": "+1 555 0100" }, "target": "upstream" });
    let r = exec(&s, lookup.clone(), &[("Request-Timeout-Millis", "200")]).await;
    assert_eq!(r.status, 504, "{}", r.text);
    let e = &r.json()["error"];
    assert_eq!(e["code"], "timeout", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("the real system"),
        "{e}"
    );
    // Streamed: heartbeats, then the stream ends without a result.
    let mut streamed = lookup.clone();
    streamed["stream_response"] = json!(true);
    let r = exec(&s, streamed, &[("Request-Timeout-Millis", "200")]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(!r.text.contains("event: result"), "{}", r.text);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_context_supplies_the_credential_of_one_upstream_call() {
    let (addr, log) = upstream(None, salesforce_handler()).await;
    let dir = example(addr);
    let s = start(dir.path()).await;
    let lookup = json!({ "integration": "crm", "operation_id": "lookup_contact_by_phone",
                         "input": { "phone": "+1 555 0100" }, "target": "upstream" });
    let with_context = |ctx: Value| {
        let mut b = lookup.clone();
        b["test_context"] = ctx;
        b
    };
    let r = exec(
        &s,
        with_context(
            json!({ "secrets": { "authorization": "Bearer ctx-token-0123456789" },
                             "metadata": { "tenant_corpus": "kb" } }),
        ),
        &[],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["error"], Value::Null, "{v}");
    assert_eq!(
        v["test_context"],
        json!({ "metadata": { "tenant_corpus": "kb" }, "secrets": ["authorization"] })
    );
    assert!(!r.text.contains("ctx-token-0123456789"), "{}", r.text);
    let sent = log.lock().unwrap()[0].headers.clone();
    assert_eq!(
        sent.get("authorization").and_then(|h| h.to_str().ok()),
        Some("Bearer ctx-token-0123456789"),
        "the upstream got the test_context credential"
    );
    // For this one call only: the next one sends none (no environment variable is set).
    let r = exec(&s, lookup.clone(), &[]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(log.lock().unwrap()[1]
        .headers
        .get("authorization")
        .is_none());

    // Bad shapes: 400/422 naming the field, never echoing the value.
    for (ctx, status, field) in [
        (json!("Bearer ctx-LEAK-0042"), 400, "test_context:"),
        (
            json!({ "secrets": "Bearer ctx-LEAK-0042" }),
            400,
            "test_context.secrets:",
        ),
        (
            json!({ "secrets": ["Bearer ctx-LEAK-0042"] }),
            400,
            "test_context.secrets:",
        ),
        (
            json!({ "secrets": { "authorization": 42 } }),
            400,
            "test_context.secrets.authorization:",
        ),
        (
            json!({ "secrets": { "ticket_api_token": "ctx-LEAK-0042" } }),
            422,
            "test_context.secrets.ticket_api_token:",
        ),
        (
            json!({ "secrets": { "authorization": "Bearer ctx-LEAK-0042\r\nX: y" } }),
            422,
            "test_context.secrets.authorization:",
        ),
        (json!({ "metadata": [1] }), 400, "test_context.metadata:"),
        (json!({ "agent": {} }), 400, "test_context.agent:"),
    ] {
        let r = exec(&s, with_context(ctx.clone()), &[]).await;
        assert_eq!(r.status, status, "{ctx}: {}", r.text);
        let m = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(m.starts_with(field), "{ctx}: {m}");
        assert!(!r.text.contains("LEAK"), "{ctx}: {}", r.text);
    }
    assert_eq!(
        log.lock().unwrap().len(),
        2,
        "a refused execute sends nothing"
    );
    s.stop().await.unwrap();
}
