//! Faults on purpose (issue 15) through real servers and real clients: every HTTP fault kind
//! as reqwest (HTTP/1.1 and h2 prior knowledge), Python `requests` (a timeout, urllib3
//! retries) and curl see it, with the evidence each leaves (`result_status` + the `fault`
//! member); the idempotency interplay on the HealthPlus booking (a timeout after the write,
//! retried with the same key → `replayed`, contract passes; with a new key → two effective
//! bookings, `calls.exactly_once` fails); a fault before the effect changes nothing; seeded
//! chaos is reproducible and never leaks into another attempt; thousands of faulted calls
//! leave no connection or task behind.
//!
//! Python `requests` and curl must be installed: outside CI a missing one skips its test with
//! a note, in CI (`CI=true`) it fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use understudy::app::AppOptions;
use understudy::config::Config;

use crate::support::{self, Attempt, Project, Server};

/// `api` (rest) with `POST /book`: sets `booked`, answers 201 with a body long enough to
/// cut, keyed by `Idempotency-Key`.
fn project() -> Project {
    let p = Project::new(&[("api", "rest")]);
    let result = json!({"status": 201, "data": {"id": "apt-1", "booked": true,
        "note": "a confirmation long enough to be cut in half and dribbled in pieces"}});
    p.op(
        "api",
        json!({
            "operation_id": "book",
            "description": "book",
            "match": {"method": "POST", "path": "/book"},
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object", "required": ["status"]},
            "idempotency": {"header": "Idempotency-Key"},
            "mock": {
                "schema_version": 1,
                "default_variant": "ok",
                "initial_state": {"booked": 0},
                "variants": {"ok": {"result": result.clone(),
                                    "set_state": {"booked": {"$input": "n"}}}},
                "examples": [{"variant": "ok", "input": {"n": 1}, "expected": result}]
            }
        }),
    );
    p
}

/// An attempt whose every `api/book` call faults with `fault` (chaos, probability 1) unless
/// the spec says otherwise.
async fn chaos_attempt(s: &Server, fault: Value) -> Attempt {
    s.attempt(json!({"faults": {"api/book": fault}})).await
}

fn book_url(s: &Server, a: &Attempt) -> String {
    s.url(&format!("{}/book", a.base("api")))
}

async fn calls(s: &Server, a: &Attempt) -> Vec<Value> {
    s.evidence(&a.id).await["tool_events"]
        .as_array()
        .unwrap()
        .clone()
}

/// The whole error chain of a reqwest error, for assertions on what the client saw.
fn chain(e: &reqwest::Error) -> String {
    let mut s = format!("{e}");
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        s.push_str(&format!(" / {c}"));
        src = c.source();
    }
    s
}

async fn post(c: &reqwest::Client, url: &str, n: i64) -> Result<reqwest::Response, reqwest::Error> {
    c.post(url)
        .header("content-type", "application/json")
        .body(json!({ "n": n }).to_string())
        .send()
        .await
}

fn assert_fault(ev: &Value, status: &str, kind: &str, after_effect: bool) {
    assert_eq!(ev["result_status"], status, "{ev:#}");
    assert_eq!(ev["fault"]["kind"], kind, "{ev:#}");
    assert_eq!(ev["fault"]["after_effect"], after_effect, "{ev:#}");
    assert_eq!(ev["fault"]["origin"], "chaos", "{ev:#}");
    // The decided answer is what the evidence (and a replay) keeps.
    assert_eq!(ev["http_status"], 201, "{ev:#}");
}

#[tokio::test]
async fn every_http_fault_kind_through_reqwest_on_http1_and_h2() {
    let p = project();
    let s = Server::start(&p).await;
    for (proto, client) in [("h1", support::client()), ("h2", support::h2c_client())] {
        // reset: h1 sees a TCP reset, h2 a reset stream.
        let a = chaos_attempt(&s, json!({"kind": "reset", "after_effect": true})).await;
        let e = post(&client, &book_url(&s, &a), 1).await.unwrap_err();
        let seen = chain(&e).to_lowercase();
        if proto == "h1" {
            assert!(seen.contains("reset"), "{proto} reset: {seen}");
        } else {
            assert!(
                seen.contains("stream error") || seen.contains("internal"),
                "{proto} reset: {seen}"
            );
        }
        assert_fault(&calls(&s, &a).await[0], "ok", "reset", true);

        // close: h1 sees the connection end with no response; h2 a reset stream.
        let a = chaos_attempt(&s, json!({"kind": "close", "after_effect": false})).await;
        let e = post(&client, &book_url(&s, &a), 1).await.unwrap_err();
        let seen = chain(&e).to_lowercase();
        if proto == "h1" {
            assert!(
                seen.contains("connection closed before message completed")
                    || seen.contains("incomplete"),
                "{proto} close: {seen}"
            );
        } else {
            assert!(seen.contains("stream error"), "{proto} close: {seen}");
        }
        assert_fault(&calls(&s, &a).await[0], "blocked", "close", false);

        // timeout: nothing arrives; a client with a timeout gives up.
        let a = chaos_attempt(
            &s,
            json!({"kind": "timeout", "after_effect": true, "ms": 5000}),
        )
        .await;
        let started = Instant::now();
        let e = client
            .post(book_url(&s, &a))
            .header("content-type", "application/json")
            .body(r#"{"n": 1}"#)
            .timeout(Duration::from_millis(300))
            .send()
            .await
            .unwrap_err();
        assert!(e.is_timeout(), "{proto} timeout: {}", chain(&e));
        assert!(started.elapsed() < Duration::from_secs(4));
        assert_fault(&calls(&s, &a).await[0], "ok", "timeout", true);
        // A short hold without a client timeout ends like `close`.
        let a = chaos_attempt(
            &s,
            json!({"kind": "timeout", "after_effect": true, "ms": 100}),
        )
        .await;
        let started = Instant::now();
        assert!(post(&client, &book_url(&s, &a), 1).await.is_err());
        assert!(started.elapsed() >= Duration::from_millis(100));

        // slow_body: the whole answer, in pieces, over `ms`.
        let a = chaos_attempt(
            &s,
            json!({"kind": "slow_body", "after_effect": true, "ms": 300, "chunks": 3}),
        )
        .await;
        let started = Instant::now();
        let r = post(&client, &book_url(&s, &a), 1).await.unwrap();
        assert_eq!(r.status(), 201);
        let len = r.content_length();
        let body = r.text().await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(300), "{proto}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["id"], "apt-1");
        if proto == "h1" {
            assert_eq!(len, Some(body.len() as u64), "{proto}: Content-Length");
        }
        let ev = &calls(&s, &a).await[0];
        assert_fault(ev, "ok", "slow_body", true);
        assert_eq!(ev["fault"]["wire_status"], 201);

        // malformed_body: the status and content type, half the body (a matching length).
        let a = chaos_attempt(&s, json!({"kind": "malformed_body", "after_effect": true})).await;
        let r = post(&client, &book_url(&s, &a), 1).await.unwrap();
        assert_eq!(r.status(), 201);
        assert_eq!(r.headers()["content-type"], "application/json");
        let len = r.content_length();
        let body = r.text().await.unwrap();
        assert!(serde_json::from_str::<Value>(&body).is_err(), "{body}");
        assert!(body.starts_with("{\"booked\":true"), "{body}");
        if proto == "h1" {
            assert_eq!(len, Some(body.len() as u64));
        }
        assert_fault(&calls(&s, &a).await[0], "ok", "malformed_body", true);

        // status: a bare 503 with Retry-After in the native error shape.
        let a = chaos_attempt(
            &s,
            json!({"kind": "status", "after_effect": false, "status": 503,
                   "headers": {"Retry-After": "2"}}),
        )
        .await;
        let r = post(&client, &book_url(&s, &a), 1).await.unwrap();
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()["retry-after"], "2");
        let v: Value = r.json().await.unwrap();
        assert!(v.to_string().contains("503"), "{v}");
        let ev = &calls(&s, &a).await[0];
        assert_fault(ev, "blocked", "status", false);
        assert_eq!(ev["fault"]["wire_status"], 503);
        let env = s.evidence(&a.id).await;
        assert_eq!(env["blocked_side_effects"][0]["fault"]["kind"], "status");
        assert_eq!(env["final_state"]["api"]["booked"], 0, "nothing changed");
    }
    // h2: a reset stream leaves the connection to the other streams.
    let h2 = support::h2c_client();
    let a = chaos_attempt(
        &s,
        json!({"kind": "reset", "after_effect": true, "times": 1}),
    )
    .await;
    assert!(post(&h2, &book_url(&s, &a), 1).await.is_err());
    let r = post(&h2, &book_url(&s, &a), 2).await.unwrap();
    assert_eq!(r.status(), 201);
    s.stop().await.unwrap();
}

// ---- real clients: Python requests + urllib3, curl --------------------------------------

/// A Python `requests` client: POST `url` with `{"n": 1}`, a timeout and urllib3 retries
/// (`retries` for reads and 503 statuses, Retry-After honoured; none: requests' default
/// adapter), printing what it saw.
const PY_CLIENT: &str = r#"
import json, sys, requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry
url, timeout, retries = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
s = requests.Session()
retry = Retry(total=retries, connect=0, read=retries, status=retries, status_forcelist=[503],
              allowed_methods=None, backoff_factor=0, respect_retry_after_header=True)
if retries > 0:
    s.mount("http://", HTTPAdapter(max_retries=retry))
try:
    r = s.post(url, json={"n": 1}, timeout=timeout, headers={"Idempotency-Key": "py-1"})
    print(json.dumps({"status": r.status_code, "body": r.text}))
except requests.exceptions.ReadTimeout as e:
    print(json.dumps({"error": "ReadTimeout"}))
except requests.exceptions.ConnectionError as e:
    print(json.dumps({"error": "ConnectionError", "detail": str(e)}))
except requests.exceptions.RetryError as e:
    print(json.dumps({"error": "RetryError", "detail": str(e)}))
"#;

async fn python(url: String, timeout: f64, retries: u32) -> Value {
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .args([
                "-c",
                PY_CLIENT,
                &url,
                &timeout.to_string(),
                &retries.to_string(),
            ])
            .output()
            .expect("python3 runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "python client ({e}): {stdout} / {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[tokio::test]
async fn python_requests_with_a_timeout_and_urllib3_retries() {
    if !support::python_has(&["requests", "urllib3"]) {
        return;
    }
    let p = project();
    let s = Server::start(&p).await;
    // A hold longer than the client's timeout: ReadTimeout (no retries).
    let a = chaos_attempt(
        &s,
        json!({"kind": "timeout", "after_effect": true, "ms": 5000}),
    )
    .await;
    let v = python(book_url(&s, &a), 0.3, 0).await;
    assert_eq!(v["error"], "ReadTimeout", "{v}");
    assert_fault(&calls(&s, &a).await[0], "ok", "timeout", true);

    // A reset on the first call: urllib3 retries the read and gets the replay (same key:
    // the first call took effect).
    let a = chaos_attempt(
        &s,
        json!({"kind": "reset", "after_effect": true, "times": 1}),
    )
    .await;
    let v = python(book_url(&s, &a), 5.0, 2).await;
    assert_eq!(v["status"], 201, "{v}");
    let c = calls(&s, &a).await;
    assert_eq!(c.len(), 2);
    assert_fault(&c[0], "ok", "reset", true);
    assert_eq!(c[1]["result_status"], "replayed");
    assert!(c[1].get("fault").is_none());

    // Without retries the reset is a ConnectionError.
    let a = chaos_attempt(&s, json!({"kind": "reset", "after_effect": false})).await;
    let v = python(book_url(&s, &a), 5.0, 0).await;
    assert_eq!(v["error"], "ConnectionError", "{v}");
    assert!(v["detail"].as_str().unwrap().contains("reset"), "{v}");

    // A 503 with Retry-After once, before the effect: urllib3 waits and retries, the second
    // call is evaluated afresh (nothing was remembered) and succeeds.
    let a = chaos_attempt(
        &s,
        json!({"kind": "status", "after_effect": false, "status": 503,
               "headers": {"Retry-After": "1"}, "times": 1}),
    )
    .await;
    let started = Instant::now();
    let v = python(book_url(&s, &a), 5.0, 2).await;
    assert_eq!(v["status"], 201, "{v}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
    let c = calls(&s, &a).await;
    assert_fault(&c[0], "blocked", "status", false);
    assert_eq!(c[1]["result_status"], "ok");
    s.stop().await.unwrap();
}

/// `curl` POSTing `{"n":1}` to `url`: (exit code, stdout, stderr).
async fn curl(url: String, extra: &'static [&'static str]) -> (i32, String, String) {
    let out = tokio::task::spawn_blocking(move || {
        Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "1",
                "-H",
                "content-type: application/json",
            ])
            .args(["-d", r#"{"n":1}"#, "-w", "\n%{http_code}"])
            .args(extra)
            .arg(&url)
            .output()
            .expect("curl runs")
    })
    .await
    .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn curl_sees_each_fault() {
    if !support::tool_available("curl", &["--version"], "curl") {
        return;
    }
    let p = project();
    let s = Server::start(&p).await;
    let h2: &'static [&'static str] = &["--http2-prior-knowledge"];
    // (fault, curl flags, expected exit code, expected stderr text)
    let cases: Vec<(Value, &'static [&'static str], i32, &str)> = vec![
        (
            json!({"kind": "reset", "after_effect": true}),
            &[],
            56,
            "reset",
        ),
        (
            json!({"kind": "close", "after_effect": true}),
            &[],
            52,
            "empty reply",
        ),
        (
            json!({"kind": "timeout", "after_effect": true, "ms": 5000}),
            &[],
            28,
            "timed out",
        ),
        (
            json!({"kind": "reset", "after_effect": true}),
            h2,
            92,
            "stream",
        ),
        (
            json!({"kind": "close", "after_effect": true}),
            h2,
            92,
            "stream",
        ),
        (
            json!({"kind": "timeout", "after_effect": true, "ms": 5000}),
            h2,
            28,
            "timed out",
        ),
    ];
    for (fault, flags, code, text) in cases {
        let a = chaos_attempt(&s, fault.clone()).await;
        let (got, out, err) = curl(book_url(&s, &a), flags).await;
        assert_eq!(got, code, "{fault} {flags:?}: {out} / {err}");
        assert!(
            err.to_lowercase().contains(text),
            "{fault} {flags:?}: {err}"
        );
        assert_eq!(calls(&s, &a).await[0]["fault"]["kind"], fault["kind"]);
    }
    for flags in [&[][..], h2] {
        let a = chaos_attempt(
            &s,
            json!({"kind": "status", "after_effect": false, "status": 503,
                   "headers": {"Retry-After": "7"}}),
        )
        .await;
        let (got, out, err) = curl(book_url(&s, &a), flags).await;
        assert_eq!(got, 0, "{err}");
        assert!(out.ends_with("\n503"), "{out}");
        let a = chaos_attempt(&s, json!({"kind": "malformed_body", "after_effect": true})).await;
        let (got, out, err) = curl(book_url(&s, &a), flags).await;
        assert_eq!(got, 0, "{err}");
        let body = out.strip_suffix("\n201").expect("201");
        assert!(serde_json::from_str::<Value>(body).is_err(), "{body}");
    }
    s.stop().await.unwrap();
}

// ---- the idempotency interplay on the HealthPlus booking --------------------------------

const PHONE: &str = "+1 555 0100";
const BOOKING: &str = "book_appointment_contract";

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/healthplus")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

async fn healthplus() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&example().join("mocks"), &dir.path().join("mocks"));
    copy_dir(&example().join("contracts"), &dir.path().join("contracts"));
    let mut cfg: Value =
        serde_json::from_slice(&std::fs::read(example().join("understudy.json")).unwrap()).unwrap();
    cfg["data_dir"] = json!("data");
    let file = dir.path().join("understudy.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
    let s = Server::start_with(AppOptions::new(Config::load(&file).unwrap())).await;
    (dir, s)
}

/// The booking agent with a retrying client: look up, book (timing out after 300 ms), retry
/// once with `retry_key`, tell the caller, end. Returns the evidence.
async fn book_with_retry(s: &Server, a: &Attempt, retry_key: &str) -> Value {
    let c = support::client();
    let base = s.url(&a.base("crm"));
    let soql =
        format!("SELECT Id, FirstName, LastName, Phone FROM Contact WHERE Phone = '{PHONE}'");
    let found: Value = c
        .get(
            reqwest::Url::parse_with_params(
                &format!("{base}/services/data/v59.0/query"),
                &[("q", soql)],
            )
            .unwrap(),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = found["records"][0]["Id"].as_str().unwrap().to_string();
    let book = |key: &str| {
        c.post(format!(
            "{base}/services/data/v59.0/sobjects/Appointment__c"
        ))
        .header("Idempotency-Key", key)
        .json(&json!({"Contact__c": id, "Requested_Date__c": "2025-03-10"}))
        .timeout(Duration::from_millis(300))
        .send()
    };
    let first = book("book-1").await.unwrap_err();
    assert!(first.is_timeout(), "{}", chain(&first));
    let second = book(retry_key).await.unwrap();
    assert_eq!(second.status(), 201);
    let r = s
        .call(
            "POST",
            &format!("/_understudy/api/attempts/{}/events", a.id),
            Some(
                &json!({"name": "told_caller_booked", "kind": "agent_message",
                         "text": "You're booked."}),
            ),
            &[],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = s
        .call(
            "DELETE",
            &format!("/_understudy/api/attempts/{}", a.id),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    s.evidence(&a.id).await
}

fn timeout_after_write() -> Value {
    json!({"test_run_id": "run_retry", "contracts": [BOOKING], "faults": {
        "crm/book_appointment": {"kind": "timeout", "after_effect": true, "ms": 2000, "times": 1}}})
}

fn check_status<'v>(env: &'v Value, check: &str) -> &'v Value {
    let r = env["contract_results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["contract_id"] == BOOKING)
        .unwrap();
    &r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == check)
        .unwrap_or_else(|| panic!("no check {check}: {r:#}"))["status"]
}

#[tokio::test]
async fn a_timeout_after_the_write_retried_with_the_same_key_replays_and_passes() {
    let (_dir, s) = healthplus().await;
    let a = s.attempt(timeout_after_write()).await;
    let env = book_with_retry(&s, &a, "book-1").await;
    let ev = env["tool_events"].as_array().unwrap();
    let bookings: Vec<&Value> = ev
        .iter()
        .filter(|e| e["operation_id"] == "book_appointment")
        .collect();
    assert_eq!(bookings[0]["result_status"], "ok");
    assert_eq!(bookings[0]["fault"]["kind"], "timeout");
    assert_eq!(bookings[1]["result_status"], "replayed");
    assert_eq!(check_status(&env, "calls.exactly_once"), "passed");
    assert_eq!(env["verdict"], "pass", "{:#}", env["verdict_reasons"]);
    assert_eq!(env["final_state"]["crm"]["appointment_booked"], true);
    s.stop().await.unwrap();
}

#[tokio::test]
async fn a_timeout_after_the_write_retried_with_a_new_key_books_twice_and_fails() {
    let (_dir, s) = healthplus().await;
    let a = s.attempt(timeout_after_write()).await;
    let env = book_with_retry(&s, &a, "book-2").await;
    let ev = env["tool_events"].as_array().unwrap();
    let statuses: Vec<&Value> = ev
        .iter()
        .filter(|e| e["operation_id"] == "book_appointment")
        .map(|e| &e["result_status"])
        .collect();
    assert_eq!(statuses, [&json!("ok"), &json!("ok")]);
    assert_eq!(check_status(&env, "calls.exactly_once"), "failed");
    assert_eq!(env["verdict"], "fail");
    s.stop().await.unwrap();
}

#[tokio::test]
async fn a_fault_before_the_effect_changes_nothing() {
    let p = project();
    let s = Server::start(&p).await;
    let a = chaos_attempt(
        &s,
        json!({"kind": "reset", "after_effect": false, "times": 1}),
    )
    .await;
    let c = support::client();
    let key = [("Idempotency-Key", "k")];
    let url = book_url(&s, &a);
    let send = |n: i64| {
        let mut rb = c.post(&url).json(&json!({ "n": n }));
        for (k, v) in key {
            rb = rb.header(k, v);
        }
        rb.send()
    };
    assert!(send(5).await.is_err());
    let env = s.evidence(&a.id).await;
    assert_eq!(env["final_state"]["api"]["booked"], 0, "state unchanged");
    assert_fault(&env["tool_events"][0], "blocked", "reset", false);
    // Nothing was remembered: the same key with the same input is evaluated, not replayed.
    assert_eq!(send(5).await.unwrap().status(), 201);
    let env = s.evidence(&a.id).await;
    assert_eq!(env["tool_events"][1]["result_status"], "ok");
    assert_eq!(env["final_state"]["api"]["booked"], 5);
    s.stop().await.unwrap();
}

// ---- chaos: seeded, per attempt ---------------------------------------------------------

/// Twenty calls of one attempt under `spec`: which were faulted (a 503 on the wire).
async fn pattern(s: &Server, spec: Value) -> Vec<bool> {
    let a = chaos_attempt(s, spec).await;
    let c = support::client();
    let mut out = Vec::new();
    for n in 0..20 {
        let r = post(&c, &book_url(s, &a), n).await.unwrap();
        out.push(r.status() == 503);
    }
    let ev = calls(s, &a).await;
    let recorded: Vec<bool> = ev.iter().map(|e| e.get("fault").is_some()).collect();
    assert_eq!(recorded, out, "the evidence says which calls faulted");
    out
}

#[tokio::test]
async fn seeded_chaos_is_reproducible_and_stays_in_its_attempt() {
    let p = project();
    let s = Server::start(&p).await;
    let spec = |seed: u64| {
        json!({"kind": "status", "after_effect": false, "status": 503,
               "probability": 0.5, "seed": seed})
    };
    let first = pattern(&s, spec(42)).await;
    let second = pattern(&s, spec(42)).await;
    assert_eq!(first, second, "same seed, same call sequence, same faults");
    assert!(first.contains(&true) && first.contains(&false), "{first:?}");
    assert_ne!(pattern(&s, spec(7)).await, first, "another seed differs");
    // `times` bounds it.
    let capped = pattern(
        &s,
        json!({"kind": "status", "after_effect": false, "status": 503,
                                    "probability": 0.5, "seed": 42, "times": 2}),
    )
    .await;
    assert_eq!(capped.iter().filter(|f| **f).count(), 2);

    // Chaos on attempt A never reaches attempt B, interleaved call by call.
    let a = chaos_attempt(&s, json!({"kind": "reset", "after_effect": true})).await;
    let b = s.attempt(json!({})).await;
    let c = support::client();
    for n in 0..10 {
        assert!(post(&c, &book_url(&s, &a), n).await.is_err());
        let r = post(&c, &book_url(&s, &b), n).await.unwrap();
        assert_eq!(r.status(), 201);
    }
    assert!(calls(&s, &b).await.iter().all(|e| e.get("fault").is_none()));
    assert_eq!(calls(&s, &a).await.len(), 10);
    s.stop().await.unwrap();
}

// ---- thousands of faulted calls ---------------------------------------------------------

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Wait (bounded) until `f` holds; the last value either way.
async fn settle<T: Copy>(mut get: impl FnMut() -> T, ok: impl Fn(T) -> bool) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = get();
        if ok(v) || Instant::now() > deadline {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousands_of_faulted_calls_leave_no_connection_or_task_behind() {
    if !Path::new("/proc/self/fd").exists() {
        eprintln!("note: no /proc/self/fd; skipping the fd count");
        return;
    }
    let p = project();
    let s = Server::start(&p).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    // Warm up (store files open, one evidence file per attempt) before counting.
    let kinds = [
        json!({"kind": "reset", "after_effect": true}),
        json!({"kind": "close", "after_effect": false}),
        json!({"kind": "timeout", "after_effect": true, "ms": 10}),
    ];
    let mut attempts = Vec::new();
    for k in &kinds {
        let a = chaos_attempt(&s, k.clone()).await;
        let c = support::client();
        let _ = post(&c, &book_url(&s, &a), 0).await;
        attempts.push(a);
    }
    let fds_before = settle(open_fds, |_| true).await;
    let tasks_before = metrics.num_alive_tasks();
    let mut joins = tokio::task::JoinSet::new();
    for w in 0..30 {
        let url = book_url(&s, &attempts[w % 3]);
        joins.spawn(async move {
            let c = support::client();
            let mut errors = 0;
            for n in 0..70 {
                if post(&c, &url, n).await.is_err() {
                    errors += 1;
                }
            }
            errors
        });
    }
    let mut errors = 0;
    while let Some(e) = joins.join_next().await {
        errors += e.unwrap();
    }
    assert_eq!(errors, 2100, "every faulted call failed on the client");
    let fds = settle(open_fds, |n| n <= fds_before + 4).await;
    assert!(
        fds <= fds_before + 4,
        "fds: {fds_before} before, {fds} after"
    );
    let tasks = settle(|| metrics.num_alive_tasks(), |n| n <= tasks_before + 2).await;
    assert!(
        tasks <= tasks_before + 2,
        "tasks: {tasks_before} before, {tasks} after"
    );
    // Still serving, and every call is in the evidence.
    let b = s.attempt(json!({})).await;
    let r = post(&support::client(), &book_url(&s, &b), 1)
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let total: usize = {
        let mut t = 0;
        for a in &attempts {
            t += calls(&s, a).await.len();
        }
        t
    };
    assert_eq!(total, 2100 + 3);
    s.stop().await.unwrap();
}

// ---- MCP tool calls ----------------------------------------------------------------------

/// `tools` (mcp) with the write tool `create`: sets `made`.
fn mcp_project() -> Project {
    let p = Project::new(&[("tools", "mcp")]);
    let result = json!({"id": "t-1"});
    p.op(
        "tools",
        json!({
            "operation_id": "create",
            "description": "create a thing",
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object", "required": ["id"]},
            "mock": {
                "schema_version": 1,
                "default_variant": "ok",
                "initial_state": {"made": 0},
                "variants": {"ok": {"result": result.clone(),
                                    "set_state": {"made": {"$input": "n"}}}},
                "examples": [{"variant": "ok", "input": {"n": 1}, "expected": result}]
            }
        }),
    );
    p
}

/// Initialize a session on `url` with plain HTTP, then send `tools/call` `create` (id 7).
async fn mcp_call(c: &reqwest::Client, url: &str) -> Result<reqwest::Response, reqwest::Error> {
    let accept = "application/json, text/event-stream";
    let r = c
        .post(url)
        .header("accept", accept)
        .json(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let r = c
        .post(url)
        .header("accept", accept)
        .header("mcp-session-id", &sid)
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    c.post(url)
        .header("accept", accept)
        .header("mcp-session-id", &sid)
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "create", "arguments": {"n": 3}}}))
        .send()
        .await
}

#[tokio::test]
async fn mcp_jsonrpc_error_fault_answers_the_error_and_changes_nothing() {
    let p = mcp_project();
    let s = Server::start(&p).await;
    let a = s
        .attempt(json!({"faults": {"tools/create": {"kind": "jsonrpc_error",
            "after_effect": false, "code": -32000}}}))
        .await;
    let url = s.url(&a.base("tools"));
    let r = mcp_call(&support::client(), &url).await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["id"], 7, "{v:#}");
    assert_eq!(v["error"]["code"], -32000, "{v:#}");
    assert_eq!(v["error"]["message"], "fault injected", "{v:#}");
    assert!(v.get("result").is_none(), "{v:#}");
    let env = s.evidence(&a.id).await;
    let ev = &env["tool_events"][0];
    assert_eq!(ev["result_status"], "blocked", "{ev:#}");
    assert_eq!(ev["fault"]["kind"], "jsonrpc_error", "{ev:#}");
    assert_eq!(ev["fault"]["after_effect"], false, "{ev:#}");
    assert_eq!(env["final_state"]["tools"]["made"], 0, "state unchanged");
    s.stop().await.unwrap();
}

#[tokio::test]
async fn mcp_close_fault_after_the_effect_sends_no_response() {
    let p = mcp_project();
    let s = Server::start(&p).await;
    let a = s
        .attempt(json!({"faults": {"tools/create": {"kind": "close", "after_effect": true}}}))
        .await;
    let url = s.url(&a.base("tools"));
    let e = mcp_call(&support::client(), &url).await.unwrap_err();
    let seen = chain(&e).to_lowercase();
    assert!(
        seen.contains("connection closed before message completed") || seen.contains("incomplete"),
        "close: {seen}"
    );
    let env = s.evidence(&a.id).await;
    let ev = &env["tool_events"][0];
    assert_eq!(ev["result_status"], "ok", "{ev:#}");
    assert_eq!(ev["fault"]["kind"], "close", "{ev:#}");
    assert_eq!(ev["fault"]["after_effect"], true, "{ev:#}");
    assert_eq!(
        env["final_state"]["tools"]["made"], 3,
        "the effect happened"
    );
    s.stop().await.unwrap();
}
