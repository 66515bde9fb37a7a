//! `understudy drift` against a real loopback upstream (a hyper server in the test that
//! counts the requests it gets per method + path): a changed field type, a dropped member and
//! an added one are each reported at their JSON path; a write is never sent; a schema
//! violation exits 1; `--values` adds value changes; `--format json` parses.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::support::Project;

type Counts = Arc<Mutex<BTreeMap<String, usize>>>;

/// The real system after it changed: `age` became a string, `email` is gone, `phone` is new,
/// the name changed its value; an order's `total` became a string its schema refuses.
fn answer(method: &str, path: &str, query: &str, body: &[u8]) -> (u16, Value) {
    match (method, path) {
        ("GET", "/contacts/c1") => (
            200,
            json!({"id": "c1", "name": "Ada L.", "age": "36", "phone": "+1 555"}),
        ),
        ("GET", "/search") if query == "q=name%3AAda" => (200, json!({"hits": [{"id": "c1"}]})),
        ("POST", "/contacts/lookup") => {
            let b: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            if b == json!({"email": "ada@example.com"}) {
                (200, json!({"id": "c1"}))
            } else {
                (400, json!({"error": format!("unexpected body {b}")}))
            }
        }
        ("GET", "/orders/o1") => (200, json!({"id": "o1", "total": "12.50"})),
        _ => (200, json!({"written": true})),
    }
}

async fn upstream() -> (SocketAddr, Counts) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts: Counts = Arc::new(Mutex::new(BTreeMap::new()));
    let c2 = counts.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let counts = c2.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let counts = counts.clone();
                    async move {
                        let (parts, b) = req.into_parts();
                        let body = b.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                        let path = parts.uri.path().to_string();
                        let query = parts.uri.query().unwrap_or("").to_string();
                        *counts
                            .lock()
                            .unwrap()
                            .entry(format!("{} {path}", parts.method))
                            .or_default() += 1;
                        let (status, v) = answer(parts.method.as_str(), &path, &query, &body);
                        Ok::<_, Infallible>(
                            Response::builder()
                                .status(status)
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(v.to_string())))
                                .unwrap(),
                        )
                    }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    (addr, counts)
}

fn op(id: &str, method: &str, path: &str, write: Option<bool>, input: Value, data: Value) -> Value {
    let result = json!({"status": 200, "data": data});
    let mut v = json!({
        "operation_id": id,
        "match": {"method": method, "path": path},
        "input_schema": {"type": "object"},
        "output_schema": {"type": "object", "required": ["status", "data"],
                          "properties": {"status": {"type": "integer"}}},
        "mock": {"schema_version": 1, "default_variant": "ok",
                 "variants": {"ok": {"result": result.clone()}},
                 "examples": [{"variant": "ok", "input": input, "expected": result}]},
    });
    if let Some(w) = write {
        v["write"] = json!(w);
    }
    v
}

fn project(addr: SocketAddr) -> Project {
    let p = Project::new(&[("api", "rest")]);
    p.write_config(json!({"integrations": {"api": {
        "profile": "rest", "upstream": format!("http://{addr}"), "operations": "mocks/api"}}}));
    p.op(
        "api",
        op(
            "get_contact",
            "GET",
            "/contacts/{id}",
            None,
            json!({"id": "c1"}),
            json!({"id": "c1", "name": "Ada", "age": 36, "email": "ada@example.com"}),
        ),
    );
    let mut search = op(
        "search",
        "GET",
        "/search",
        None,
        json!({"term": "Ada"}),
        json!({"hits": [{"id": "c1"}]}),
    );
    search["match"]["query"] = json!({"q": "name:{term}"});
    p.op("api", search);
    p.op(
        "api",
        op(
            "lookup_by_email",
            "POST",
            "/contacts/lookup",
            Some(false),
            json!({"email": "ada@example.com"}),
            json!({"id": "c1"}),
        ),
    );
    // Writes: by method, and a GET the file declares a write.
    p.op(
        "api",
        op(
            "create_contact",
            "POST",
            "/contacts",
            None,
            json!({"name": "Bo"}),
            json!({"id": "c2"}),
        ),
    );
    p.op(
        "api",
        op(
            "touch_contact",
            "GET",
            "/contacts/{id}/touch",
            Some(true),
            json!({"id": "c1"}),
            json!({"ok": true}),
        ),
    );
    let mut order = op(
        "get_order",
        "GET",
        "/orders/{id}",
        None,
        json!({"id": "o1"}),
        json!({"id": "o1", "total": 12.5}),
    );
    order["output_schema"]["properties"]["data"] = json!({"type": "object", "required": ["total"],
        "properties": {"total": {"type": "number"}}});
    p.op("api", order);
    p
}

fn drift(cfg: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["drift", "--integration", "api", "--config"])
        .arg(cfg)
        .args(extra)
        .output()
        .expect("run understudy drift");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_run(cfg: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["--format", "json"];
    args.extend(extra);
    let (code, out, err) = drift(cfg, &args);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"));
    (code, v)
}

fn operation<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation_id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {report:#}"))
}

fn diffs(report: &Value, id: &str) -> Vec<(String, String)> {
    operation(report, id)["examples"][0]["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap().to_string(),
                d["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_reports_shapes_at_their_paths_and_never_sends_a_write() {
    let (addr, counts) = upstream().await;
    let p = project(addr);

    let cfg = p.config_path();
    // The binary runs on a blocking thread: the upstream keeps serving meanwhile.
    let run = |extra: &'static [&'static str]| {
        let cfg = cfg.clone();
        tokio::task::spawn_blocking(move || json_run(&cfg, extra))
    };

    // Every operation: the order's answer violates its schema → exit 1.
    let (code, all) = run(&[]).await.unwrap();
    assert_eq!(code, 1, "{all:#}");
    assert_eq!(all["ok"], false);
    assert_eq!(
        diffs(&all, "get_contact"),
        vec![
            ("$.data.age".to_string(), "changed_type".to_string()),
            ("$.data.email".to_string(), "removed".to_string()),
            ("$.data.phone".to_string(), "added".to_string()),
        ],
        "{all:#}"
    );
    let order = &operation(&all, "get_order")["examples"][0];
    assert_eq!(order["outcome"], "violation", "{order:#}");
    assert!(
        order["schema_errors"][0]
            .as_str()
            .unwrap()
            .contains("total"),
        "{order:#}"
    );
    for id in ["search", "lookup_by_email"] {
        assert_eq!(
            operation(&all, id)["examples"][0]["outcome"],
            "ok",
            "{id}: {all:#}"
        );
    }
    assert_eq!(operation(&all, "create_contact")["status"], "write");
    assert_eq!(operation(&all, "touch_contact")["status"], "write");
    assert_eq!(all["summary"]["writes_not_sent"], 2);
    assert_eq!(all["summary"]["violations"], 1);

    // Shapes only: reported, exit 0; the text names each path. --values adds the name.
    let (code, text, err) = {
        let cfg = cfg.clone();
        tokio::task::spawn_blocking(move || drift(&cfg, &["--operation", "get_contact"]))
            .await
            .unwrap()
    };
    assert_eq!(code, 0, "{text}\n{err}");
    for line in [
        "$.data.age: changed type: number → string",
        "$.data.email: removed (was string)",
        "$.data.phone: added (string)",
    ] {
        assert!(text.contains(line), "{line} missing:\n{text}");
    }
    assert!(!text.contains("$.data.name"), "{text}");
    let (code, values) = run(&["--operation", "get_contact", "--values"])
        .await
        .unwrap();
    assert_eq!(code, 0, "{values:#}");
    assert!(
        diffs(&values, "get_contact").contains(&("$.data.name".into(), "changed_value".into())),
        "{values:#}"
    );

    // The upstream saw the reads only: never a write, whatever the flags.
    let counts = counts.lock().unwrap().clone();
    assert_eq!(counts.get("POST /contacts"), None, "{counts:?}");
    assert_eq!(counts.get("GET /contacts/c1/touch"), None, "{counts:?}");
    assert_eq!(counts.get("GET /contacts/c1"), Some(&3), "{counts:?}");
    assert_eq!(counts.get("POST /contacts/lookup"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("GET /search"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("GET /orders/o1"), Some(&1), "{counts:?}");
}

#[test]
fn drift_refuses_an_unknown_operation_and_an_unreachable_upstream_fails() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let p = project(addr);
    let (code, _, err) = drift(&p.config_path(), &["--operation", "nope"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no operation `nope`"), "{err}");
    let (code, report) = json_run(&p.config_path(), &["--operation", "get_contact"]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        operation(&report, "get_contact")["examples"][0]["outcome"],
        "unavailable"
    );
}
