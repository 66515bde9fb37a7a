//! Hostile input at the edge (issue "Reliability and security hardening"): request smuggling
//! shapes, oversized and malformed heads, invalid UTF-8, absurd JSON nesting, huge numbers and
//! dates for `$number`/`$dateAdd`, values nested too deep for the store to read back (a deep
//! definition rendering a deep input, a deep upstream answer in dry-run), path traversal in
//! operation ids, a slowloris crowd, and bodies over the limit: refused at once on their
//! declared length or as soon as a chunked body passes the limit (proxy and admin paths),
//! then a lingering close bounded in bytes and time.
//! Every test checks that the bad client gets a clear refusal (or a closed connection) and
//! that the server keeps serving everybody else. Basic slowloris, 413, `kill -9` and garbage
//! on a socket are in `serve.rs`; this file does not repeat them.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{self, recorded_calls, rest_op, standard_project, Project, Server};

/// Send `bytes` on a fresh connection and read until the server closes it. The read timeout
/// is only a safety net against a hung test (never an assertion).
async fn raw(addr: SocketAddr, bytes: Vec<u8>) -> String {
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // The server may close while we are still writing (an early refusal): fine.
        let _ = s.write_all(&bytes);
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
    .await
    .unwrap()
}

/// How many HTTP/1.1 responses a raw exchange produced.
fn responses(text: &str) -> usize {
    text.matches("HTTP/1.1 ").count()
}

/// The default attempt's counter (the `api/counter` operation stores the caller's `n`).
async fn counter(s: &Server) -> Value {
    s.evidence(&s.default_attempt()).await["final_state"]["api"]["counter"].clone()
}

async fn still_serving(s: &Server) {
    let r = s
        .call("POST", "/api/counter", Some(&json!({ "n": 7 })), &[])
        .await;
    assert_eq!(r.status, 200, "the server keeps serving: {}", r.text);
}

// ---------------------------------------------------------------------------------------------
// Request smuggling shapes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_length_with_transfer_encoding_never_smuggles_a_second_request() {
    let p = standard_project();
    let s = Server::start(&p).await;
    // CL.TE: a front end honouring Content-Length would see one request; one honouring
    // Transfer-Encoding would see a second one hidden in the body. The smuggled request
    // must never be executed.
    let smuggled = "POST /api/counter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\nConnection: close\r\n\r\n{\"n\":666}\n";
    let body = format!("0\r\n\r\n{smuggled}");
    let req = format!(
        "POST /api/counter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n{body}",
        body.len()
    );
    let out = raw(s.addr, req.into_bytes()).await;
    assert!(
        out.starts_with("HTTP/1.1 4"),
        "a message with both Content-Length and Transfer-Encoding is refused: {out:?}"
    );
    assert_eq!(
        responses(&out),
        1,
        "one answer, then the connection closes: {out:?}"
    );
    // TE.CL the other way round: Transfer-Encoding first, an obfuscated second TE header.
    let req = format!(
        "POST /api/counter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\nContent-Length: 4\r\n\r\n5c\r\n{smuggled}\r\n0\r\n\r\n"
    );
    let out = raw(s.addr, req.into_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 4"), "{out:?}");
    assert_eq!(responses(&out), 1, "{out:?}");
    assert_ne!(
        counter(&s).await,
        json!(666),
        "the smuggled request never ran"
    );
    still_serving(&s).await;
    // (The arguments only: ids and timestamps elsewhere in the evidence may contain "666".)
    let ev = s.evidence(&s.default_attempt()).await;
    let events = ev["tool_events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .all(|e| !e["arguments"].to_string().contains("666")),
        "no trace of the smuggled call in the evidence: {ev}"
    );
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_different_content_lengths_are_refused() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let req = "POST /api/counter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9\r\nContent-Length: 30\r\n\r\n{\"n\":666}POST /api/counter HTTP/1.1\r\n";
    let out = raw(s.addr, req.as_bytes().to_vec()).await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out:?}");
    assert_eq!(responses(&out), 1, "{out:?}");
    // A comma list of two values is the same conflict.
    let req = "POST /api/counter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9, 30\r\n\r\n{\"n\":666}";
    let out = raw(s.addr, req.as_bytes().to_vec()).await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out:?}");
    // A Transfer-Encoding that is not chunked-last cannot be framed: refused.
    let req = "POST /api/counter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n{\"n\":666}";
    let out = raw(s.addr, req.as_bytes().to_vec()).await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out:?}");
    assert_ne!(counter(&s).await, json!(666));
    still_serving(&s).await;
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Oversized and malformed heads

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_get_431_or_a_close_and_the_server_keeps_serving() {
    let p = standard_project();
    let s = Server::start(&p).await;
    // One 100 KB header.
    let big = "a".repeat(100 * 1024);
    let req = format!("GET /_understudy/api/health HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n");
    let out = raw(s.addr, req.into_bytes()).await;
    assert!(
        out.is_empty() || out.starts_with("HTTP/1.1 431"),
        "431 or closed: {:?}",
        &out[..out.len().min(200)]
    );
    // Many small headers (more than any client sends).
    let mut req = String::from("GET /_understudy/api/health HTTP/1.1\r\nHost: x\r\n");
    for i in 0..500 {
        req.push_str(&format!("X-H{i}: v\r\n"));
    }
    req.push_str("\r\n");
    let out = raw(s.addr, req.into_bytes()).await;
    assert!(
        out.is_empty() || out.starts_with("HTTP/1.1 431") || out.starts_with("HTTP/1.1 400"),
        "{:?}",
        &out[..out.len().min(200)]
    );
    // A 1 MB request line.
    let req = format!(
        "GET /api/{} HTTP/1.1\r\nHost: x\r\n\r\n",
        "x".repeat(1024 * 1024)
    );
    let out = raw(s.addr, req.into_bytes()).await;
    assert!(
        out.is_empty() || out.starts_with("HTTP/1.1 4"),
        "{:?}",
        &out[..out.len().min(200)]
    );
    still_serving(&s).await;
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_in_path_query_header_and_body_is_a_clear_4xx() {
    let p = standard_project();
    let s = Server::start(&p).await;
    // Raw bytes ≥ 0x80 in the request target: not a valid URI.
    let out = raw(
        s.addr,
        b"GET /api/\xff\xfe?q=\xc3\x28 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
    )
    .await;
    assert!(out.is_empty() || out.starts_with("HTTP/1.1 400"), "{out:?}");
    // Percent-encoded invalid UTF-8 in path and query: decoded lossily, matched against
    // nothing (a harness error naming the request), never a panic.
    let r = s
        .call("GET", "/api/%FF%FE/x?q=%C3%28&%ff=%80", None, &[])
        .await;
    assert_eq!(r.status, 500, "{}", r.text);
    assert_eq!(r.header("understudy-error"), Some("unmatched_request"));
    // A Salesforce query whose `q` is invalid UTF-8: the capture fails the input schema.
    let r = s
        .call(
            "GET",
            "/crm/services/data/v59.0/query?q=SELECT+Id,+FirstName+FROM+Contact+WHERE+Phone+=+'%FF%FE'",
            None,
            &[],
        )
        .await;
    assert!(matches!(r.status, 400 | 500), "{}: {}", r.status, r.text);
    // Invalid UTF-8 in the body: an input error in the native shape.
    let r = s
        .http
        .post(s.url("/api/counter"))
        .header("content-type", "application/json")
        .body(b"{\"n\": \"\xff\xfe\"}".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"]["message"].as_str().unwrap().contains("JSON"),
        "{v}"
    );
    // Non-ASCII bytes in a header value reach no handler as text (and break nothing).
    let out = raw(
        s.addr,
        [
            format!(
                "GET /_understudy/api/health HTTP/1.1\r\nHost: {}\r\nX-Odd: ",
                s.addr
            )
            .as_bytes(),
            b"\xff\xfe\r\nConnection: close\r\n\r\n",
        ]
        .concat(),
    )
    .await;
    assert!(
        out.starts_with("HTTP/1.1 200") || out.starts_with("HTTP/1.1 400"),
        "{out:?}"
    );
    // Invalid UTF-8 in an admin body.
    let r = s
        .http
        .post(s.url("/_understudy/api/attempts"))
        .header("content-type", "application/json")
        .body(b"{\"test_run_id\": \"\xff\"}".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    still_serving(&s).await;
    s.stop().await.unwrap();
}

/// An attempt header the server cannot read as a token (not visible ASCII, or empty) is an
/// unknown token (401), never a request of the default attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_or_empty_attempt_headers_fail_closed() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let out = raw(
        s.addr,
        b"POST /api/counter HTTP/1.1\r\nHost: x\r\nUnderstudy-Attempt: \xff\xfe\r\nContent-Type: application/json\r\nContent-Length: 9\r\nConnection: close\r\n\r\n{\"n\":666}"
            .to_vec(),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 401"), "{out:?}");
    let r = s
        .call(
            "POST",
            "/api/counter",
            Some(&json!({ "n": 666 })),
            &[("Understudy-Attempt", "")],
        )
        .await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert_ne!(
        counter(&s).await,
        json!(666),
        "the default attempt saw nothing"
    );
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Absurd JSON

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurdly_nested_json_bodies_are_input_errors_without_a_stack_overflow() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let deep = nested(100_000);
    let unclosed = "[".repeat(100_000);
    let objects = "{\"a\":".repeat(100_000);
    for body in [&deep, &unclosed, &objects] {
        let r = s
            .call_raw(
                "POST",
                "/api/counter",
                body,
                &[("content-type", "application/json")],
            )
            .await;
        assert_eq!(r.status, 400, "{}", &r.text[..r.text.len().min(300)]);
        assert!(r.json()["error"]["message"].is_string());
        // The admin API and the MCP-less paths parse bodies too.
        for path in [
            "/_understudy/api/attempts",
            "/_understudy/api/tools/execute",
            "/_understudy/api/tools/testing",
            "/_understudy/api/tools/api/testing",
        ] {
            let r = s
                .call_raw("POST", path, body, &[("content-type", "application/json")])
                .await;
            assert_eq!(
                r.status,
                400,
                "{path}: {}",
                &r.text[..r.text.len().min(300)]
            );
        }
    }
    still_serving(&s).await;
    s.stop().await.unwrap();
}

/// A body nested just under the parser's own limit (127) used to be accepted, and its event
/// (the arguments and the rendered result a few levels deeper) could then not be read back:
/// the whole attempt's evidence failed with a "corrupt record". Bodies are now refused beyond
/// 64 levels (`util::json::MAX_BODY_DEPTH`), and evidence stays readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_but_accepted_bodies_keep_the_evidence_readable() {
    let p = Project::new(&[("api", "rest")]);
    let echo = json!({ "status": 200, "data": { "a": { "b": { "c": { "$input": "x" } } } } });
    let mut op = rest_op("echo", "POST", "/echo", None);
    op["mock"] = json!({
        "schema_version": 1, "default_variant": "ok",
        "variants": { "ok": { "result": echo, "set_state": { "last": { "$input": "x" } } } },
        "examples": [ { "variant": "ok", "input": { "x": 1 },
                        "expected": { "status": 200, "data": { "a": { "b": { "c": 1 } } } } } ]
    });
    p.op("api", op);
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    for (i, depth) in [10usize, 62, 63, 64, 100, 125, 126, 127, 128]
        .into_iter()
        .enumerate()
    {
        // `{"x": <depth levels>}`: depth + 1 levels in all.
        let body = format!("{{\"x\":{}}}", nested(depth));
        let r = s
            .call_raw(
                "POST",
                &format!("{}/echo", a.base("api")),
                &body,
                &[("content-type", "application/json")],
            )
            .await;
        if depth < 64 {
            assert_eq!(r.status, 200, "depth {depth}: {}", r.text);
        } else {
            assert_eq!(r.status, 400, "depth {depth}: {}", r.text);
            assert!(
                r.text.contains("nested") || r.text.contains("recursion"),
                "{}",
                r.text
            );
        }
        // Whatever was answered, the evidence reads back with it (and the state).
        let ev = s.evidence(&a.id).await;
        assert_eq!(
            ev["tool_events"].as_array().unwrap().len(),
            i + 1,
            "depth {depth}"
        );
        let st = s
            .call(
                "GET",
                &format!("/_understudy/api/attempts/{}/state", a.id),
                None,
                &[],
            )
            .await;
        assert_eq!(st.status, 200, "depth {depth}: {}", st.text);
    }
    s.stop().await.unwrap();
    // And offline, through the CLI, after the server stopped.
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["evidence", &a.id, "--data-dir"])
        .arg(p.data_dir())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `{"a": {"a": … leaf …}}`, `levels` objects around `leaf`.
fn wrap(levels: usize, leaf: Value) -> Value {
    (0..levels).fold(leaf, |v, _| json!({ "a": v }))
}

/// The store backstop: records are read back with serde_json, which refuses more than 127
/// levels. A value deeper than that must never be written as an acknowledged call — the call
/// is refused, or its evidence reads back. Here a 70-level result renders a 60-level caller
/// value (each within its own limit: the file parses, the body is under `MAX_BODY_DEPTH`),
/// so the rendered result is 130+ levels deep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_definition_rendering_a_deep_input_never_makes_evidence_unreadable() {
    let p = Project::new(&[("api", "rest")]);
    let mut op = rest_op("echo_deep", "POST", "/deep", None);
    op["mock"] = json!({
        "schema_version": 1, "default_variant": "ok",
        "variants": { "ok": { "result": { "status": 200, "data": wrap(70, json!({ "$input": "x" })) } } },
        "examples": [ { "variant": "ok", "input": { "x": 1 },
                        "expected": { "status": 200, "data": wrap(70, json!(1)) } } ]
    });
    p.op("api", op);
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let url = format!("{}/deep", a.base("api"));
    for (i, depth) in [1usize, 40, 60, 62].into_iter().enumerate() {
        let body = format!("{{\"x\":{}}}", nested(depth));
        let r = s
            .call_raw("POST", &url, &body, &[("content-type", "application/json")])
            .await;
        let ev = s
            .call(
                "GET",
                &format!("/_understudy/api/attempts/{}/evidence", a.id),
                None,
                &[],
            )
            .await;
        assert_eq!(
            ev.status,
            200,
            "input depth {depth} (call answered {}): the evidence must stay readable: {}",
            r.status,
            &ev.text[..ev.text.len().min(400)]
        );
        let ev: Value = serde_json::from_str(&ev.text).unwrap_or_else(|e| {
            panic!("input depth {depth}: the evidence export is not readable JSON: {e}")
        });
        let events = ev["tool_events"].as_array().unwrap().len();
        if r.status == 200 {
            assert_eq!(
                events,
                i + 1,
                "input depth {depth}: the answered call is recorded"
            );
        }
    }
    s.stop().await.unwrap();
}

/// The same backstop for a real upstream's answer in dry-run: a forwarded read whose JSON
/// body is nested up to what serde_json parses (127 levels) is recorded inside an event a few
/// levels deeper. The evidence must stay readable whatever the call answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deeply_nested_upstream_answer_never_makes_evidence_unreadable() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A loopback upstream answering `GET /deep/<n>` with n nested arrays.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tcp.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head).into_owned();
                let n: usize = line
                    .split_whitespace()
                    .nth(1)
                    .and_then(|p| p.rsplit('/').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1);
                let body = nested(n);
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tcp.write_all(resp.as_bytes()).await;
                let _ = tcp.shutdown().await;
            });
        }
    });
    let p = Project::new(&[("api", "rest")]);
    p.write_config(json!({ "mode": "dry-run", "integrations": { "api": {
        "profile": "rest", "operations": "mocks/api", "upstream": format!("http://{upstream}")
    } } }));
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    for (i, depth) in [1usize, 60, 100, 120, 124, 125, 126, 127]
        .into_iter()
        .enumerate()
    {
        let r = s
            .call("GET", &format!("{}/deep/{depth}", a.base("api")), None, &[])
            .await;
        let ev = s
            .call(
                "GET",
                &format!("/_understudy/api/attempts/{}/evidence", a.id),
                None,
                &[],
            )
            .await;
        assert_eq!(
            ev.status,
            200,
            "upstream depth {depth} (call answered {}): the evidence must stay readable: {}",
            r.status,
            &ev.text[..ev.text.len().min(400)]
        );
        let ev: Value = serde_json::from_str(&ev.text).unwrap_or_else(|e| {
            panic!("upstream depth {depth}: the evidence export is not readable JSON: {e}")
        });
        assert_eq!(
            ev["tool_events"].as_array().unwrap().len(),
            i + 1,
            "upstream depth {depth}"
        );
    }
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Huge numbers and dates

fn convert_project() -> Project {
    let p = Project::new(&[("api", "rest")]);
    let result = json!({ "status": 200, "data": {
        "amount": { "$number": { "$input": "amount" } },
        "due": { "$dateAdd": { "value": { "$input": "date" }, "days": 30 } }
    } });
    p.op(
        "api",
        json!({
            "operation_id": "convert",
            "match": { "method": "POST", "path": "/convert" },
            "input_schema": { "type": "object", "required": ["amount", "date"] },
            "output_schema": { "type": "object", "required": ["status"] },
            "mock": {
                "schema_version": 1, "default_variant": "ok",
                "variants": { "ok": { "result": result } },
                "examples": [ { "variant": "ok", "input": { "amount": "42.50", "date": "2025-01-01" },
                                "expected": { "status": 200, "data": { "amount": 42.5, "due": "2025-01-31T00:00:00Z" } } } ]
            }
        }),
    );
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_numbers_and_dates_from_the_caller_are_input_errors() {
    let p = convert_project();
    let s = Server::start(&p).await;
    let ok = s
        .call(
            "POST",
            "/api/convert",
            Some(&json!({ "amount": "42.50", "date": "2025-01-01" })),
            &[],
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    let mb_digits = "9".repeat(1024 * 1024);
    let one_e400 = format!("1{}", "0".repeat(400));
    let long_fraction = format!("0.{}", "1".repeat(1024 * 1024));
    let bad_amounts = [
        json!(mb_digits),
        json!(one_e400),
        json!(format!("-{one_e400}")),
        json!("1e400"),
        json!("NaN"),
        json!(" 1"),
        json!(""),
        json!(true),
        json!(null),
        json!({ "$number": "1" }),
    ];
    for amount in bad_amounts {
        let r = s
            .call(
                "POST",
                "/api/convert",
                Some(&json!({ "amount": amount, "date": "2025-01-01" })),
                &[],
            )
            .await;
        assert_eq!(r.status, 400, "{}", &r.text[..r.text.len().min(300)]);
        assert!(
            r.header("understudy-error").is_none(),
            "the caller's fault, not the harness's"
        );
    }
    // A long but finite fraction is a number.
    let r = s
        .call(
            "POST",
            "/api/convert",
            Some(&json!({ "amount": long_fraction, "date": "2025-01-01" })),
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", &r.text[..r.text.len().min(300)]);
    let bad_dates = [
        json!("99999-01-01"),
        json!("9999-12-31"), // + 30 days leaves year 9999
        json!("0000-01-01"),
        json!("2025-02-30"),
        json!("2025-01-01T25:00:00Z"),
        json!(format!("2025-01-01{}", "Z".repeat(100_000))),
        json!(1_700_000_000),
        json!("２０２５-01-01"),
    ];
    for date in bad_dates {
        let r = s
            .call(
                "POST",
                "/api/convert",
                Some(&json!({ "amount": "1", "date": date })),
                &[],
            )
            .await;
        assert_eq!(
            r.status,
            400,
            "{date:.80}: {}",
            &r.text[..r.text.len().min(300)]
        );
    }
    // A 100 000-digit fraction of a second is still RFC 3339: accepted, and truncated.
    let r = s
        .call(
            "POST",
            "/api/convert",
            Some(&json!({ "amount": "1", "date": format!("2025-01-01T00:00:00.{}Z", "9".repeat(100_000)) })),
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", &r.text[..r.text.len().min(300)]);
    assert_eq!(r.json()["due"], "2025-01-31T00:00:00Z");
    // A JSON number literal beyond f64 in the body is a body error, not a crash.
    let r = s
        .call_raw(
            "POST",
            "/api/convert",
            &format!("{{\"amount\": {one_e400}, \"date\": \"2025-01-01\"}}"),
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let ev = s.evidence(&s.default_attempt()).await;
    assert_eq!(
        ev["verdict"], "pass",
        "input errors alone never fail the attempt"
    );
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Path traversal through operation ids

#[test]
fn operation_ids_that_climb_out_of_the_directory_are_check_problems() {
    let p = Project::new(&[("api", "rest")]);
    let mut op = rest_op("x", "GET", "/x", None);
    op["operation_id"] = json!("../../etc");
    std::fs::write(
        p.ops_dir("api").join("x.json"),
        serde_json::to_vec(&op).unwrap(),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["check", "--config"])
        .arg(p.config_path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("not a valid operation id"), "{text}");
    // `serve` refuses to start on it.
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["serve", "--config"])
        .arg(p.config_path())
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traversal_in_admin_operation_names_finds_nothing() {
    let p = standard_project();
    let s = Server::start(&p).await;
    for path in [
        "/_understudy/api/revisions/api/..%2F..%2Fetc%2Fpasswd",
        "/_understudy/api/revisions/api/..",
        "/_understudy/api/revisions/..%2Fapi/bump",
        "/_understudy/api/tools/..%2F..%2Fetc/testing",
    ] {
        let r = s.call("GET", path, None, &[]).await;
        assert!(
            matches!(r.status, 404 | 400),
            "{path}: {} {}",
            r.status,
            r.text
        );
        assert!(!r.text.contains("root:"), "{path}");
    }
    let r = s
        .call(
            "POST",
            "/_understudy/api/tools/api/testing",
            Some(&json!({ "action": "save", "operation_id": "../../etc",
                          "definition": support::mock(json!({"status": 200}), json!({})) })),
            &[],
        )
        .await;
    assert!(
        matches!(r.status, 404 | 400 | 422),
        "{} {}",
        r.status,
        r.text
    );
    let r = s
        .call(
            "POST",
            "/_understudy/api/tools/execute",
            Some(&json!({ "integration": "api", "operation_id": "../../etc", "input": {} })),
            &[],
        )
        .await;
    assert!(matches!(r.status, 404 | 400), "{} {}", r.status, r.text);
    still_serving(&s).await;
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Slowloris crowd

/// Twenty connections trickle a request head one byte at a time; each is cut off by the
/// header read timeout (counted from the head's first byte, not reset by later bytes), and a
/// normal client is answered all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_trickling_connections_do_not_starve_a_normal_client() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let p = standard_project();
    let mut opts = p.options();
    opts.limits.header_read_timeout = Duration::from_millis(300);
    let s = Server::start_with(opts).await;
    let addr = s.addr;
    let head = b"POST /api/counter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    let mut trickles = Vec::new();
    for _ in 0..20 {
        trickles.push(tokio::spawn(async move {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            // One byte every 25 ms: the whole head would take > 10 s; the server must cut
            // it off long before. A cap keeps a broken server from hanging the test.
            for b in head.iter() {
                if c.write_all(&[*b]).await.is_err() {
                    return true;
                }
                let mut buf = [0u8; 64];
                match tokio::time::timeout(Duration::from_millis(25), c.read(&mut buf)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => return true, // closed by the server
                    Ok(Ok(_)) => return false,             // answered a partial head?!
                    Err(_) => {}                           // still open: next byte
                }
            }
            false
        }));
    }
    // Meanwhile a normal client is served.
    for n in 0..20 {
        let r = s
            .call("POST", "/api/counter", Some(&json!({ "n": n })), &[])
            .await;
        assert_eq!(r.status, 200);
    }
    for t in trickles {
        assert!(
            t.await.unwrap(),
            "every trickling connection is closed before its head completes"
        );
    }
    still_serving(&s).await;
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Oversized bodies: refused at once, not read first

/// The request body limit (docs/src/operations/limits.md).
const BODY_LIMIT: usize = 10 * 1024 * 1024;

/// The head of `POST path` declaring a JSON body of `len` bytes.
fn declared_head(path: &str, len: u64) -> String {
    format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n")
}

/// What a client that keeps its connection open read: one response and whether the server
/// then closed the connection.
#[derive(Debug)]
struct Answer {
    head: String,
    body: String,
    closed: bool,
}

/// Write `bytes` on a fresh connection (a request whose body may be unfinished), then write
/// nothing more but keep the connection open, and read one response (head, then the Content-Length body) and whether the server closes
/// the connection after it. The read timeout (20 s, a third of the 60 s body read timeout)
/// is what fails a server that waits for the rest of the body; no assertion is about time.
async fn answer_keeping_open(addr: SocketAddr, bytes: Vec<u8>) -> Answer {
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(&bytes)
            .expect("the server reads what the client sends");
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let head_end = loop {
            if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match s.read(&mut buf) {
                Ok(0) | Err(_) => panic!(
                    "no response while the body is unsent: {:?}",
                    String::from_utf8_lossy(&got)
                ),
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        };
        let head = String::from_utf8_lossy(&got[..head_end]).into_owned();
        let len: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .expect("a Content-Length");
        while got.len() < head_end + len {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        let body = String::from_utf8_lossy(&got[head_end..]).into_owned();
        // A closed connection reads as its end (or a reset); an open one times out.
        let closed = match s.read(&mut buf) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        };
        Answer { head, body, closed }
    })
    .await
    .unwrap()
}

fn assert_refused(a: &Answer, case: &str) {
    assert!(a.head.starts_with("HTTP/1.1 413"), "{case}: {a:?}");
    assert!(
        a.head
            .to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "{case}: {a:?}"
    );
    let v: Value = serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{case}: {e}: {a:?}"));
    assert_eq!(v["error"]["code"], "payload_too_large", "{case}: {v}");
    assert!(
        a.closed,
        "{case}: the connection closes after the 413: {a:?}"
    );
}

/// A `Content-Length` over the limit is answered 413 at once, while the client has sent one
/// byte of its body and keeps the connection open — on a proxy path and on an admin path —
/// and the refusal is recorded nowhere, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_length_over_the_limit_is_refused_at_once_on_proxy_and_admin_paths() {
    let p = standard_project();
    let s = Server::start(&p).await;
    still_serving(&s).await;
    let before = recorded_calls(&s).await;
    let declared = BODY_LIMIT + 1024 * 1024; // 11534336, 1 MiB over
    for path in ["/api/counter", "/_understudy/api/attempts"] {
        let head = declared_head(path, declared as u64);
        let a = answer_keeping_open(s.addr, [head.as_bytes(), b"{"].concat()).await;
        assert_refused(&a, path);
    }
    assert_eq!(recorded_calls(&s).await, before, "a 413 records no call");
    still_serving(&s).await;
    s.stop().await.unwrap();
}

/// A chunked body is refused as soon as it passes the limit, while the client keeps the body
/// open (no last chunk).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_is_refused_as_soon_as_it_passes_the_limit() {
    let p = standard_project();
    let s = Server::start(&p).await;
    still_serving(&s).await;
    let before = recorded_calls(&s).await;
    let mut req = b"POST /api/counter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    const CHUNK: usize = 64 * 1024;
    for _ in 0..BODY_LIMIT / CHUNK + 1 {
        req.extend_from_slice(format!("{CHUNK:x}\r\n").as_bytes());
        req.extend_from_slice(&[b' '; CHUNK]);
        req.extend_from_slice(b"\r\n");
    }
    let a = answer_keeping_open(s.addr, req).await;
    assert_refused(&a, "chunked");
    assert_eq!(recorded_calls(&s).await, before, "a 413 records no call");
    still_serving(&s).await;
    s.stop().await.unwrap();
}

/// A client that writes its whole oversized body before it reads still reads the 413: the
/// server drains the body after answering instead of closing on it (which would reset the
/// connection and could destroy the answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_writing_its_whole_oversized_body_first_still_reads_the_413() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let declared = BODY_LIMIT + 1024 * 1024;
    let head = declared_head("/api/counter", declared as u64);
    let req = [head.as_bytes(), &vec![b' '; declared]].concat();
    let a = answer_keeping_open(s.addr, req).await;
    assert_refused(&a, "whole body first");
    still_serving(&s).await;
    s.stop().await.unwrap();
}

/// Declare a 1 GiB body and write it in `chunk`-byte writes, `pause` apart, until a write
/// fails because the server closed the connection; the body bytes written by then. Panics if
/// the server neither reads nor closes (a write blocked for 20 s) or `cap` bytes went out
/// while the connection stayed open.
async fn write_until_closed(addr: SocketAddr, chunk: usize, pause: Duration, cap: u64) -> u64 {
    const DECLARED: u64 = 1 << 30;
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
        let head = declared_head("/api/counter", DECLARED);
        s.write_all(head.as_bytes()).unwrap();
        let block = vec![b' '; chunk];
        let mut written = 0u64;
        while written < cap {
            match s.write(&block) {
                Ok(n) => written += n as u64,
                Err(e) => {
                    assert!(
                        !matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ),
                        "the server neither reads nor closes after {written} bytes"
                    );
                    return written;
                }
            }
            std::thread::sleep(pause);
        }
        panic!("the connection is still open after {written} bytes of a refused body");
    })
    .await
    .unwrap()
}

/// The drain after a 413 ends at its byte bound (a client that never stops sending is cut
/// off) and at its time bound (a client that trickles is cut off); the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_after_a_413_is_bounded_in_bytes_and_in_time() {
    const MIB: u64 = 1024 * 1024;
    let p = standard_project();
    // Bytes: 1 MiB, with a time bound far away.
    let mut opts = p.options();
    opts.limits.drain_bytes = MIB;
    opts.limits.drain_time = Duration::from_secs(3600);
    let s = Server::start_with(opts).await;
    let written = write_until_closed(s.addr, 64 * 1024, Duration::ZERO, 1 << 30).await;
    // Beyond the drained 1 MiB only what the two socket buffers and hyper's read buffer held.
    assert!(written < MIB + 32 * MIB, "{written} bytes written");
    still_serving(&s).await;
    s.stop().await.unwrap();
    // Time: 200 ms, with the byte bound (40 MiB) and the idle timeout far away; a byte every
    // 20 ms, 500 bytes at most (the connection must be closed long before).
    let mut opts = p.options();
    opts.limits.drain_time = Duration::from_millis(200);
    opts.limits.idle_timeout = Duration::from_secs(3600);
    let s = Server::start_with(opts).await;
    write_until_closed(s.addr, 1, Duration::from_millis(20), 500).await;
    still_serving(&s).await;
    s.stop().await.unwrap();
}
