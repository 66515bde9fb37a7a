//! End-to-end tests of [`McpEndpoint::handle`] with an in-test backend: every status and
//! header rule of both eras, JSON and SSE answers, ids, pagination, tool outcomes, batches,
//! Origin, and the session lifecycle.

use std::sync::Mutex;

use hyper::header::{HeaderName, HeaderValue};
use serde_json::{json, Value};

use super::*;
use crate::error::{HarnessCode, HarnessError, InputError};

struct Fake {
    tools: Vec<ToolInfo>,
    calls: Mutex<Vec<(String, Value)>>,
}

fn tool(name: &str) -> ToolInfo {
    ToolInfo {
        name: name.into(),
        title: None,
        description: None,
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: None,
        result_form: ResultForm::Structured,
    }
}

impl Fake {
    fn new() -> Fake {
        let mut lookup = tool("lookup");
        lookup.title = Some("Look up".into());
        lookup.description = Some("Find a contact".into());
        lookup.input_schema =
            json!({"type": "object", "properties": {"phone": {"type": "string"}}});
        lookup.output_schema = Some(json!({"type": "object"}));
        lookup.annotations = Some(json!({"readOnlyHint": true}));
        let mut raw = tool("raw");
        raw.result_form = ResultForm::CallToolResult;
        let mut region = tool("regional");
        region.input_schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"}
        }});
        Fake {
            tools: vec![
                lookup,
                raw,
                tool("bad_input"),
                tool("broken"),
                tool("scalar"),
                region,
            ],
            calls: Mutex::new(Vec::new()),
        }
    }

    fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().clone()
    }
}

impl McpBackend for Fake {
    fn tools(&self) -> Vec<ToolInfo> {
        self.tools.clone()
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
    ) -> Pin<Box<dyn Future<Output = ToolCallOutcome> + Send + 'a>> {
        Box::pin(async move {
            self.calls
                .lock()
                .unwrap()
                .push((name.to_string(), arguments.clone()));
            match name {
                "lookup" => ToolCallOutcome::Ok(json!({"found": true, "args": arguments})),
                "raw" => ToolCallOutcome::Ok(json!({
                    "content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}],
                    "isError": true
                })),
                "bad_input" => {
                    let mut e = InputError::new("phone must be a string").at("phone");
                    e.details = vec!["phone: expected string, got number".into()];
                    ToolCallOutcome::InputError(e)
                }
                "broken" => ToolCallOutcome::Harness(HarnessError::new(
                    HarnessCode::NoMock,
                    "operation `broken` has no mock",
                )),
                "scalar" => ToolCallOutcome::Ok(json!(42)),
                "regional" => ToolCallOutcome::Ok(json!({"ok": true})),
                _ => ToolCallOutcome::UnknownTool,
            }
        })
    }

    fn server_name(&self) -> String {
        "understudy-tools".into()
    }
}

const BOTH: &str = "application/json, text/event-stream";

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

/// POST headers with both media types accepted, plus `extra`.
fn post_headers(extra: &[(&str, &str)]) -> HeaderMap {
    let mut pairs = vec![("accept", BOTH), ("content-type", "application/json")];
    pairs.extend_from_slice(extra);
    headers(&pairs)
}

async fn post(ep: &McpEndpoint, b: &Fake, h: &HeaderMap, body: &Value) -> McpResponse {
    ep.handle(&Method::POST, h, body.to_string().as_bytes(), b)
        .await
}

fn req(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The single JSON-RPC message of an answer.
fn msg(r: &McpResponse) -> Value {
    let m = r.messages();
    assert_eq!(m.len(), 1, "one message expected in {r:?}");
    m[0].clone()
}

fn error_code(r: &McpResponse) -> i64 {
    msg(r)["error"]["code"].as_i64().unwrap()
}

/// Initialize a session speaking `version`; returns its id.
async fn init(ep: &McpEndpoint, b: &Fake, version: &str) -> String {
    let r = post(
        ep,
        b,
        &post_headers(&[]),
        &req(
            json!(0),
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        ),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    r.header("mcp-session-id").unwrap().to_string()
}

fn session_headers(sid: &str, extra: &[(&str, &str)]) -> HeaderMap {
    let mut pairs = vec![("mcp-session-id", sid)];
    pairs.extend_from_slice(extra);
    post_headers(&pairs)
}

const MODERN: &str = "2026-07-28";

fn modern_req(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        META_PROTOCOL_VERSION: MODERN,
        META_CLIENT_CAPABILITIES: {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    });
    req(id, method, params)
}

fn modern_headers(method: &str, name: Option<&str>, extra: &[(&str, &str)]) -> HeaderMap {
    let mut pairs = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
    if let Some(n) = name {
        pairs.push(("mcp-name", n));
    }
    pairs.extend_from_slice(extra);
    post_headers(&pairs)
}

// ---------------------------------------------------------------- session era

#[tokio::test]
async fn initialize_negotiates_and_mints_a_session() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    for (asked, got) in [
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2024-11-05", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
        ("banana", "2025-11-25"),
    ] {
        let r = post(
            &ep,
            &b,
            &post_headers(&[]),
            &req(
                json!("init"),
                "initialize",
                json!({"protocolVersion": asked}),
            ),
        )
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("application/json"));
        let m = msg(&r);
        assert_eq!(m["id"], json!("init"));
        assert_eq!(m["result"]["protocolVersion"], json!(got), "asked {asked}");
        assert_eq!(
            m["result"]["capabilities"],
            json!({"tools": {"listChanged": false}, "logging": {}})
        );
        assert_eq!(m["result"]["serverInfo"]["name"], json!("understudy-tools"));
        assert!(m["result"].get("resultType").is_none());
        let sid = r.header("mcp-session-id").unwrap();
        assert_eq!(sid.len(), 32);
        assert_eq!(ep.session(sid).unwrap().protocol_version, got);
    }
    let a = init(&ep, &b, "2025-06-18").await;
    let c = init(&ep, &b, "2025-06-18").await;
    assert_ne!(a, c, "every initialize mints a fresh id");
}

#[tokio::test]
async fn initialize_without_protocol_version_is_invalid_params() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let r = post(
        &ep,
        &b,
        &post_headers(&[]),
        &req(json!(1), "initialize", json!({})),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(error_code(&r), -32602);
    assert!(r.header("mcp-session-id").is_none());
}

#[tokio::test]
async fn session_lifecycle() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let sid = init(&ep, &b, "2025-06-18").await;

    // notifications/initialized → 202, no body
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[]),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(r.status, 202);
    assert_eq!(r.body, McpBody::Empty);
    assert!(ep.session(&sid).unwrap().initialized);

    // a client response → 202
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[]),
        &json!({"jsonrpc": "2.0", "id": 9, "result": {}}),
    )
    .await;
    assert_eq!(r.status, 202);

    // missing session id → 400
    let r = post(
        &ep,
        &b,
        &post_headers(&[]),
        &req(json!(1), "tools/list", json!({})),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(error_code(&r), -32000);
    assert_eq!(msg(&r)["id"], json!(1));

    // unknown session id → 404
    let r = post(
        &ep,
        &b,
        &session_headers("0123456789abcdef0123456789abcdef", &[]),
        &req(json!(1), "tools/list", json!({})),
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(error_code(&r), -32001);

    // the live session works, and its id is echoed
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[]),
        &req(json!(2), "ping", json!({})),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(msg(&r)["result"], json!({}));
    assert_eq!(r.header("mcp-session-id"), Some(sid.as_str()));

    // DELETE without the header → 400; with it → 204; again → 404
    let del = |h: HeaderMap| {
        let ep = &ep;
        let b = &b;
        async move { ep.handle(&Method::DELETE, &h, b"", b).await }
    };
    assert_eq!(del(headers(&[])).await.status, 400);
    let r = del(headers(&[("mcp-session-id", &sid)])).await;
    assert_eq!(r.status, 204);
    assert_eq!(r.body, McpBody::Empty);
    assert_eq!(del(headers(&[("mcp-session-id", &sid)])).await.status, 404);

    // after DELETE the session answers 404
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[]),
        &req(json!(3), "ping", json!({})),
    )
    .await;
    assert_eq!(r.status, 404);
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[]),
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    )
    .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn protocol_version_header_in_the_session_era() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let sid = init(&ep, &b, "2025-06-18").await;
    let ping = req(json!(1), "ping", json!({}));
    for (v, status) in [
        ("2025-06-18", 200),
        ("2025-03-26", 200),
        ("1999-01-01", 400),
        ("nonsense", 400),
    ] {
        let r = post(
            &ep,
            &b,
            &session_headers(&sid, &[("mcp-protocol-version", v)]),
            &ping,
        )
        .await;
        assert_eq!(r.status, status, "{v}");
    }
    // absent → the negotiated version applies
    let r = post(&ep, &b, &session_headers(&sid, &[]), &ping).await;
    assert_eq!(r.status, 200);
    // an unsupported version on DELETE → 400, the session survives
    let r = ep
        .handle(
            &Method::DELETE,
            &headers(&[
                ("mcp-session-id", &sid),
                ("mcp-protocol-version", "1999-01-01"),
            ]),
            b"",
            &b,
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(ep.session(&sid).is_some());
}

#[tokio::test]
async fn other_methods_are_405() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let sid = init(&ep, &b, "2025-11-25").await;
    for m in [Method::PUT, Method::PATCH, Method::HEAD, Method::OPTIONS] {
        let r = ep
            .handle(
                &m,
                &headers(&[("accept", "text/event-stream"), ("mcp-session-id", &sid)]),
                b"",
                &b,
            )
            .await;
        assert_eq!(r.status, 405, "{m}");
        assert_eq!(r.header("allow"), Some("GET, POST, DELETE"));
    }
}

#[tokio::test]
async fn accept_and_content_type_rules() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let sid = init(&ep, &b, "2025-06-18").await;
    let ping = req(json!(1), "ping", json!({})).to_string();
    let send = |pairs: Vec<(&'static str, &'static str)>| {
        let mut h = headers(&pairs);
        h.insert("mcp-session-id", HeaderValue::from_str(&sid).unwrap());
        let (ep, b, body) = (&ep, &b, ping.clone());
        async move { ep.handle(&Method::POST, &h, body.as_bytes(), b).await }
    };
    let ct = ("content-type", "application/json");
    assert_eq!(send(vec![("accept", "text/html"), ct]).await.status, 406);
    assert_eq!(
        send(vec![("accept", "application/json;q=0, text/html"), ct])
            .await
            .status,
        406
    );
    assert_eq!(
        send(vec![("accept", BOTH), ("content-type", "text/plain")])
            .await
            .status,
        415
    );
    assert_eq!(send(vec![("accept", BOTH)]).await.status, 415);
    let r = send(vec![
        ("accept", BOTH),
        ("content-type", "application/json; charset=utf-8"),
    ])
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    // only JSON accepted → JSON
    let r = send(vec![("accept", "application/json"), ct]).await;
    assert!(matches!(r.body, McpBody::Json(_)));
    // only SSE accepted → SSE
    let r = send(vec![("accept", "text/event-stream"), ct]).await;
    assert!(matches!(r.body, McpBody::Sse(_)));
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(msg(&r)["result"], json!({}));
    // no Accept at all → JSON
    let r = send(vec![ct]).await;
    assert!(matches!(r.body, McpBody::Json(_)));
}

#[tokio::test]
async fn sse_endpoint_answers_sse_with_priming_where_the_version_calls_for_it() {
    let (ep, b) = (McpEndpoint::new(true), Fake::new());
    // initialize in 2025-11-25 over SSE: priming event first
    let r = post(
        &ep,
        &b,
        &post_headers(&[]),
        &req(
            json!(1),
            "initialize",
            json!({"protocolVersion": "2025-11-25"}),
        ),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    let sid = r.header("mcp-session-id").unwrap().to_string();
    let McpBody::Sse(events) = &r.body else {
        panic!("SSE expected")
    };
    assert_eq!(events.len(), 2);
    let parsed = sse::parse_events(&r.body_bytes());
    assert!(
        parsed[0].0.is_some() && parsed[0].1.is_empty(),
        "priming: id, empty data"
    );
    assert!(parsed[1].0.is_some());
    assert_ne!(parsed[0].0, parsed[1].0);
    assert_eq!(msg(&r)["result"]["protocolVersion"], json!("2025-11-25"));
    for e in events {
        assert!(e.ends_with(b"\n\n"));
    }

    // a tools/call on that session: priming + response
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[]),
        &req(
            json!(2),
            "tools/call",
            json!({"name": "lookup", "arguments": {}}),
        ),
    )
    .await;
    let McpBody::Sse(events) = &r.body else {
        panic!("SSE expected")
    };
    assert_eq!(events.len(), 2);
    assert_eq!(msg(&r)["result"]["isError"], json!(false));

    // 2025-06-18 has no priming event
    let sid = init(&ep, &b, "2025-06-18").await;
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[]),
        &req(json!(3), "ping", json!({})),
    )
    .await;
    let McpBody::Sse(events) = &r.body else {
        panic!("SSE expected")
    };
    assert_eq!(events.len(), 1);
    assert!(events[0].starts_with(b"id: "));

    // a client that accepts only JSON still gets JSON
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[("accept", "application/json")]),
        &req(json!(4), "ping", json!({})),
    )
    .await;
    // (two Accept headers: the union accepts both; the endpoint prefers SSE)
    assert!(matches!(r.body, McpBody::Sse(_)));
    let mut h = session_headers(&sid, &[]);
    h.insert("accept", HeaderValue::from_static("application/json"));
    let r = post(&ep, &b, &h, &req(json!(4), "ping", json!({}))).await;
    assert!(matches!(r.body, McpBody::Json(_)));

    // errors with a non-200 status are JSON even on an SSE endpoint
    let r = post(
        &ep,
        &b,
        &post_headers(&[]),
        &req(json!(5), "ping", json!({})),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn parse_errors_and_invalid_requests() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let sid = init(&ep, &b, "2025-06-18").await;
    let r = ep
        .handle(&Method::POST, &session_headers(&sid, &[]), b"{not json", &b)
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(error_code(&r), -32700);
    assert_eq!(msg(&r)["id"], Value::Null);
    let r = ep
        .handle(&Method::POST, &session_headers(&sid, &[]), b"", &b)
        .await;
    assert_eq!(error_code(&r), -32700);
    // Arguments nested beyond the body bound are refused before any tool runs.
    let deep = (0..70).fold(json!(1), |v, _| json!([v]));
    let body = req(
        json!(9),
        "tools/call",
        json!({"name": "lookup", "arguments": {"x": deep}}),
    );
    let r = post(&ep, &b, &session_headers(&sid, &[]), &body).await;
    assert_eq!(r.status, 400);
    assert_eq!(error_code(&r), -32700);

    for (body, id) in [
        (json!({"id": 5, "method": "ping"}), json!(5)),
        (
            json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
            Value::Null,
        ),
        (
            json!({"jsonrpc": "2.0", "id": "x", "method": 3}),
            json!("x"),
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": 3}),
            json!(1),
        ),
        (json!("hello"), Value::Null),
        (json!({"jsonrpc": "2.0", "id": 1}), json!(1)),
    ] {
        let r = post(&ep, &b, &session_headers(&sid, &[]), &body).await;
        assert_eq!(r.status, 400, "{body}");
        assert_eq!(error_code(&r), -32600, "{body}");
        assert_eq!(msg(&r)["id"], id, "{body}");
    }
}

#[tokio::test]
async fn ids_are_echoed_exactly() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let sid = init(&ep, &b, "2025-06-18").await;
    for id in [
        json!("abc-1"),
        json!(7),
        json!(0),
        json!(-3),
        json!(2.5),
        json!(""),
    ] {
        for body in [
            req(id.clone(), "ping", json!({})),
            req(id.clone(), "tools/list", json!({})),
            req(id.clone(), "tools/call", json!({"name": "lookup"})),
            req(id.clone(), "tools/call", json!({"name": "nope"})),
            req(id.clone(), "no/such/method", json!({})),
        ] {
            let r = post(&ep, &b, &session_headers(&sid, &[]), &body).await;
            assert_eq!(msg(&r)["id"], id, "{body}");
            assert_eq!(msg(&r)["jsonrpc"], json!("2.0"));
        }
    }
    // the raw bytes keep the id's spelling
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[]),
        &req(json!(12345678901u64), "ping", json!({})),
    )
    .await;
    assert!(String::from_utf8(r.body_bytes())
        .unwrap()
        .contains("\"id\":12345678901"));
}

#[tokio::test]
async fn tools_list_fields_and_pagination() {
    let (ep, b) = (McpEndpoint::new(false).with_page_size(2), Fake::new());
    let sid = init(&ep, &b, "2025-06-18").await;
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let r = post(
            &ep,
            &b,
            &session_headers(&sid, &[]),
            &req(json!(pages), "tools/list", params),
        )
        .await;
        assert_eq!(r.status, 200);
        let result = msg(&r)["result"].clone();
        assert!(result.get("ttlMs").is_none() && result.get("resultType").is_none());
        let page = result["tools"].as_array().unwrap().clone();
        assert!(page.len() <= 2);
        if pages == 0 {
            assert_eq!(
                page[0],
                json!({"name": "lookup", "title": "Look up", "description": "Find a contact",
                       "inputSchema": {"type": "object", "properties": {"phone": {"type": "string"}}},
                       "outputSchema": {"type": "object"},
                       "annotations": {"readOnlyHint": true}})
            );
            assert_eq!(
                page[1],
                json!({"name": "raw", "inputSchema": {"type": "object"}})
            );
        }
        names.extend(page.iter().map(|t| t["name"].as_str().unwrap().to_string()));
        pages += 1;
        match result.get("nextCursor") {
            Some(c) => cursor = Some(c.as_str().unwrap().to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        names,
        ["lookup", "raw", "bad_input", "broken", "scalar", "regional"]
    );

    for bad in [json!("garbage"), json!("AAAAAAAAAAAAAAAAAAAAAA"), json!(17)] {
        let r = post(
            &ep,
            &b,
            &session_headers(&sid, &[]),
            &req(json!("c"), "tools/list", json!({"cursor": bad})),
        )
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(error_code(&r), -32602, "{bad}");
        assert_eq!(msg(&r)["id"], json!("c"));
    }
    // a null cursor is the first page
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[]),
        &req(json!(1), "tools/list", json!({"cursor": null})),
    )
    .await;
    assert_eq!(msg(&r)["result"]["tools"][0]["name"], json!("lookup"));
    // the default page size shows every tool at once
    let ep2 = McpEndpoint::new(false);
    let sid2 = init(&ep2, &b, "2025-06-18").await;
    let r = post(
        &ep2,
        &b,
        &session_headers(&sid2, &[]),
        &req(json!(1), "tools/list", json!({})),
    )
    .await;
    assert_eq!(msg(&r)["result"]["tools"].as_array().unwrap().len(), 6);
    assert!(msg(&r)["result"].get("nextCursor").is_none());
}

#[tokio::test]
async fn tools_call_outcomes() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let sid = init(&ep, &b, "2025-11-25").await;
    let call = |id: i64, name: &str, args: Option<Value>| {
        let mut p = json!({"name": name});
        if let Some(a) = args {
            p["arguments"] = a;
        }
        let body = req(json!(id), "tools/call", p);
        let h = session_headers(&sid, &[]);
        let (ep, b) = (&ep, &b);
        async move { post(ep, b, &h, &body).await }
    };

    // structured result
    let r = call(1, "lookup", Some(json!({"phone": "+1"}))).await;
    assert_eq!(r.status, 200);
    assert!(r.header("understudy-error").is_none());
    let res = msg(&r)["result"].clone();
    let expected = json!({"found": true, "args": {"phone": "+1"}});
    assert_eq!(res["structuredContent"], expected);
    assert_eq!(res["isError"], json!(false));
    assert_eq!(res["content"][0]["type"], json!("text"));
    let text: Value = serde_json::from_str(res["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, expected);
    assert_eq!(
        b.calls().last().unwrap(),
        &("lookup".to_string(), json!({"phone": "+1"}))
    );

    // arguments default to {}
    call(2, "lookup", None).await;
    assert_eq!(b.calls().last().unwrap().1, json!({}));

    // call_tool_result is sent as it is
    let r = call(3, "raw", None).await;
    assert_eq!(
        msg(&r)["result"],
        json!({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}], "isError": true})
    );

    // input error → isError result naming the problem
    let r = call(4, "bad_input", Some(json!({"phone": 5}))).await;
    assert_eq!(r.status, 200);
    let res = msg(&r)["result"].clone();
    assert_eq!(res["isError"], json!(true));
    let text = res["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("phone must be a string") && text.contains("expected string"));
    assert!(res.get("structuredContent").is_none());

    // harness error → -32603 with understudy_error, Understudy-Error header, HTTP 200
    let r = call(5, "broken", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("understudy-error"), Some("no_mock"));
    let e = msg(&r)["error"].clone();
    assert_eq!(e["code"], json!(-32603));
    assert_eq!(
        e["data"],
        json!({"understudy_error": {"kind": "harness_error", "code": "no_mock",
                                    "message": "operation `broken` has no mock"}})
    );

    // unknown tool → the backend is still asked (it records evidence), -32602 unknown_tool
    let r = call(6, "nope", None).await;
    assert_eq!(b.calls().last().unwrap().0, "nope");
    assert_eq!(r.header("understudy-error"), Some("unknown_tool"));
    let e = msg(&r)["error"].clone();
    assert_eq!(e["code"], json!(-32602));
    assert_eq!(e["data"]["understudy_error"]["code"], json!("unknown_tool"));
    assert_eq!(
        e["data"]["understudy_error"]["kind"],
        json!("harness_error")
    );

    // a non-object structured result: no structuredContent in the session era
    let r = call(7, "scalar", None).await;
    let res = msg(&r)["result"].clone();
    assert!(res.get("structuredContent").is_none());
    assert_eq!(res["content"][0]["text"], json!("42"));

    // malformed params never reach the backend
    let before = b.calls().len();
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[]),
        &req(json!(8), "tools/call", json!({})),
    )
    .await;
    assert_eq!(error_code(&r), -32602);
    let r = call(9, "lookup", Some(json!([1]))).await;
    assert_eq!(error_code(&r), -32602);
    assert_eq!(b.calls().len(), before);

    // unknown method → -32601 (HTTP 200 in the session era)
    for m in ["resources/list", "prompts/list", "server/discover-ish"] {
        let r = post(
            &ep,
            &b,
            &session_headers(&sid, &[]),
            &req(json!(10), m, json!({})),
        )
        .await;
        assert_eq!(r.status, 200, "{m}");
        assert_eq!(error_code(&r), -32601, "{m}");
    }
}

#[tokio::test]
async fn batches_only_in_2025_03_26() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let sid = init(&ep, &b, "2025-03-26").await;
    let batch = json!([
        req(json!(1), "ping", json!({})),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        req(json!("two"), "tools/call", json!({"name": "lookup", "arguments": {"phone": "1"}})),
        {"jsonrpc": "2.0", "id": 99, "result": {}},
        req(json!(3), "initialize", json!({"protocolVersion": "2025-03-26"})),
        [1],
    ]);
    let r = post(&ep, &b, &session_headers(&sid, &[]), &batch).await;
    assert_eq!(r.status, 200);
    let McpBody::Json(bytes) = &r.body else {
        panic!("JSON expected")
    };
    let v: Value = serde_json::from_slice(bytes).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 4);
    assert_eq!(arr[0]["id"], json!(1));
    assert_eq!(arr[0]["result"], json!({}));
    assert_eq!(arr[1]["id"], json!("two"));
    assert_eq!(arr[1]["result"]["isError"], json!(false));
    assert_eq!(arr[2]["id"], json!(3));
    assert_eq!(arr[2]["error"]["code"], json!(-32600));
    assert_eq!(arr[3]["id"], Value::Null);
    assert_eq!(arr[3]["error"]["code"], json!(-32600));
    assert!(ep.session(&sid).unwrap().initialized);

    // only notifications → 202
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[]),
        &json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}]),
    )
    .await;
    assert_eq!(r.status, 202);

    // SSE: one event per response
    let mut h = session_headers(&sid, &[]);
    h.insert("accept", HeaderValue::from_static("text/event-stream"));
    let r = post(
        &ep,
        &b,
        &h,
        &json!([
            req(json!(1), "ping", json!({})),
            req(json!(2), "ping", json!({}))
        ]),
    )
    .await;
    let McpBody::Sse(events) = &r.body else {
        panic!("SSE expected")
    };
    assert_eq!(events.len(), 2, "2025-03-26 has no priming event");
    assert_eq!(r.messages().len(), 2);

    // empty batch → 400
    let r = post(&ep, &b, &session_headers(&sid, &[]), &json!([])).await;
    assert_eq!(r.status, 400);
    assert_eq!(error_code(&r), -32600);

    // later versions refuse batches
    for v in ["2025-06-18", "2025-11-25"] {
        let sid = init(&ep, &b, v).await;
        let r = post(
            &ep,
            &b,
            &session_headers(&sid, &[]),
            &json!([req(json!(1), "ping", json!({}))]),
        )
        .await;
        assert_eq!(r.status, 400, "{v}");
        assert_eq!(error_code(&r), -32600);
    }
    // a batch without a session → 400
    let r = post(
        &ep,
        &b,
        &post_headers(&[]),
        &json!([req(json!(1), "ping", json!({}))]),
    )
    .await;
    assert_eq!(r.status, 400);
    // the stateless era refuses batches
    let r = post(
        &ep,
        &b,
        &post_headers(&[("mcp-protocol-version", MODERN)]),
        &json!([req(json!(1), "ping", json!({}))]),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(error_code(&r), -32600);
}

#[tokio::test]
async fn origin_validation() {
    let (ep, b) = (
        McpEndpoint::new(false).with_allowed_origins(vec!["https://agent.example.com".into()]),
        Fake::new(),
    );
    let init_body = req(
        json!(1),
        "initialize",
        json!({"protocolVersion": "2025-06-18"}),
    );
    for (origin, status) in [
        ("https://evil.example", 403),
        ("null", 403),
        ("http://localhost.evil.example:80", 403),
        ("http://localhost:5173", 200),
        ("https://127.0.0.1", 200),
        ("http://[::1]:9", 200),
        ("https://agent.example.com", 200),
    ] {
        let r = post(&ep, &b, &post_headers(&[("origin", origin)]), &init_body).await;
        assert_eq!(r.status, status, "{origin}");
    }
    for m in [Method::GET, Method::DELETE] {
        let r = ep
            .handle(&m, &headers(&[("origin", "https://evil.example")]), b"", &b)
            .await;
        assert_eq!(r.status, 403, "{m}");
    }
}

#[tokio::test]
async fn the_get_stream_needs_a_live_session_and_accepting_sse() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let sid = init(&ep, &b, "2025-11-25").await;
    let get = |h: HeaderMap| {
        let ep = &ep;
        let b = &b;
        async move { ep.handle(&Method::GET, &h, b"", b).await }
    };
    let sse = ("accept", "text/event-stream");
    assert_eq!(get(headers(&[sse])).await.status, 400, "no session id");
    assert_eq!(
        get(headers(&[sse, ("mcp-session-id", "nope")]))
            .await
            .status,
        404
    );
    assert_eq!(
        get(headers(&[
            ("accept", "application/json"),
            ("mcp-session-id", &sid)
        ]))
        .await
        .status,
        406
    );
    let r = get(headers(&[sse, ("mcp-session-id", &sid)])).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let McpBody::Stream(s) = r.body else {
        panic!("a streaming body")
    };
    let mut rx = s.take().unwrap();
    let priming = rx.recv().await.unwrap();
    assert!(sse::parse_events(&priming)[0].1.is_empty(), "priming first");
    // DELETE ends the session and its stream
    let r = ep
        .handle(
            &Method::DELETE,
            &headers(&[("mcp-session-id", &sid)]),
            b"",
            &b,
        )
        .await;
    assert_eq!(r.status, 204);
    assert!(rx.recv().await.is_none());
}

#[tokio::test]
async fn sessions_are_bounded() {
    let (ep, b) = (McpEndpoint::new(false).with_max_sessions(2), Fake::new());
    let a = init(&ep, &b, "2025-06-18").await;
    let c = init(&ep, &b, "2025-06-18").await;
    let d = init(&ep, &b, "2025-06-18").await;
    assert!(ep.session(&a).is_none(), "oldest evicted");
    assert!(ep.session(&c).is_some() && ep.session(&d).is_some());
}

// ---------------------------------------------------------------- stateless era

#[tokio::test]
async fn server_discover() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let r = post(
        &ep,
        &b,
        &modern_headers("server/discover", None, &[]),
        &modern_req(json!("d"), "server/discover", json!({})),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.header("mcp-session-id").is_none(), "no sessions in 2026");
    let m = msg(&r);
    assert_eq!(m["id"], json!("d"));
    let res = &m["result"];
    assert_eq!(res["supportedVersions"][0], json!(MODERN));
    assert!(res["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2025-03-26")));
    assert_eq!(
        res["capabilities"],
        json!({"tools": {"listChanged": false}})
    );
    assert_eq!(res["resultType"], json!("complete"));
    assert_eq!(res["ttlMs"], json!(0));
    assert_eq!(res["cacheScope"], json!("private"));
    assert_eq!(
        res["_meta"][META_SERVER_INFO]["name"],
        json!("understudy-tools")
    );
}

#[tokio::test]
async fn stateless_tools_list_and_call() {
    let (ep, b) = (McpEndpoint::new(false).with_page_size(4), Fake::new());
    let r = post(
        &ep,
        &b,
        &modern_headers("tools/list", None, &[("mcp-session-id", "ignored")]),
        &modern_req(json!(1), "tools/list", json!({})),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.header("mcp-session-id").is_none());
    let res = msg(&r)["result"].clone();
    assert_eq!(res["resultType"], json!("complete"));
    assert_eq!(res["ttlMs"], json!(0));
    assert_eq!(res["cacheScope"], json!("private"));
    assert_eq!(res["tools"].as_array().unwrap().len(), 4);
    let next = res["nextCursor"].as_str().unwrap().to_string();
    let r = post(
        &ep,
        &b,
        &modern_headers("tools/list", None, &[]),
        &modern_req(json!(2), "tools/list", json!({"cursor": next})),
    )
    .await;
    let res = msg(&r)["result"].clone();
    assert_eq!(res["tools"].as_array().unwrap().len(), 2);
    assert!(res.get("nextCursor").is_none());
    assert_eq!(res["cacheScope"], json!("private"));

    let r = post(
        &ep,
        &b,
        &modern_headers("tools/call", Some("lookup"), &[]),
        &modern_req(
            json!(3),
            "tools/call",
            json!({"name": "lookup", "arguments": {"phone": "1"}}),
        ),
    )
    .await;
    assert_eq!(r.status, 200);
    let res = msg(&r)["result"].clone();
    assert_eq!(res["resultType"], json!("complete"));
    assert_eq!(res["isError"], json!(false));
    assert_eq!(res["structuredContent"]["found"], json!(true));

    // a scalar structured result keeps structuredContent in 2026
    let r = post(
        &ep,
        &b,
        &modern_headers("tools/call", Some("scalar"), &[]),
        &modern_req(json!(4), "tools/call", json!({"name": "scalar"})),
    )
    .await;
    assert_eq!(msg(&r)["result"]["structuredContent"], json!(42));

    // the Mcp-Name header may be Base64-encoded
    let r = post(
        &ep,
        &b,
        &modern_headers("tools/call", Some("=?base64?bG9va3Vw?="), &[]),
        &modern_req(json!(5), "tools/call", json!({"name": "lookup"})),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");

    // unknown tool → 200 with -32602; unknown method → 404 with -32601; ping is gone
    let r = post(
        &ep,
        &b,
        &modern_headers("tools/call", Some("nope"), &[]),
        &modern_req(json!(6), "tools/call", json!({"name": "nope"})),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(error_code(&r), -32602);
    assert_eq!(r.header("understudy-error"), Some("unknown_tool"));
    for m in ["ping", "resources/list", "no/such"] {
        let r = post(
            &ep,
            &b,
            &modern_headers(m, None, &[]),
            &modern_req(json!(7), m, json!({})),
        )
        .await;
        assert_eq!(r.status, 404, "{m}");
        assert_eq!(error_code(&r), -32601, "{m}");
        assert_eq!(msg(&r)["id"], json!(7));
    }

    // harness error in 2026: same JSON-RPC error, HTTP 200
    let r = post(
        &ep,
        &b,
        &modern_headers("tools/call", Some("broken"), &[]),
        &modern_req(json!(8), "tools/call", json!({"name": "broken"})),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(error_code(&r), -32603);

    // a call_tool_result gets resultType added
    let r = post(
        &ep,
        &b,
        &modern_headers("tools/call", Some("raw"), &[]),
        &modern_req(json!(9), "tools/call", json!({"name": "raw"})),
    )
    .await;
    assert_eq!(msg(&r)["result"]["resultType"], json!("complete"));
    assert_eq!(msg(&r)["result"]["content"][0]["type"], json!("image"));
}

#[tokio::test]
async fn stateless_header_rules() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let call = modern_req(
        json!(1),
        "tools/call",
        json!({"name": "lookup", "arguments": {}}),
    );
    let cases: Vec<(HeaderMap, Value, u16, i64)> = vec![
        // Mcp-Method mismatch / missing
        (
            modern_headers("tools/list", Some("lookup"), &[]),
            call.clone(),
            400,
            -32020,
        ),
        (
            post_headers(&[("mcp-protocol-version", MODERN), ("mcp-name", "lookup")]),
            call.clone(),
            400,
            -32020,
        ),
        // Mcp-Name missing / mismatched / bad Base64
        (
            modern_headers("tools/call", None, &[]),
            call.clone(),
            400,
            -32020,
        ),
        (
            modern_headers("tools/call", Some("other"), &[]),
            call.clone(),
            400,
            -32020,
        ),
        (
            modern_headers("tools/call", Some("=?base64?***?="), &[]),
            call.clone(),
            400,
            -32020,
        ),
        // MCP-Protocol-Version missing / different from _meta
        (
            post_headers(&[("mcp-method", "tools/call"), ("mcp-name", "lookup")]),
            call.clone(),
            400,
            -32020,
        ),
        (
            post_headers(&[
                ("mcp-protocol-version", "2027-01-01"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "lookup"),
            ]),
            call.clone(),
            400,
            -32020,
        ),
    ];
    for (h, body, status, code) in cases {
        let r = post(&ep, &b, &h, &body).await;
        assert_eq!(r.status, status, "{h:?}");
        assert_eq!(error_code(&r), code, "{h:?}");
        assert_eq!(msg(&r)["id"], json!(1));
        assert_eq!(r.header("content-type"), Some("application/json"));
    }
    assert!(b.calls().is_empty(), "refused requests reach no backend");

    // unsupported version in both places → -32022 with the supported list
    let mut body = modern_req(json!(2), "tools/list", json!({}));
    body["params"]["_meta"][META_PROTOCOL_VERSION] = json!("2027-01-01");
    let r = post(
        &ep,
        &b,
        &post_headers(&[
            ("mcp-protocol-version", "2027-01-01"),
            ("mcp-method", "tools/list"),
        ]),
        &body,
    )
    .await;
    assert_eq!(r.status, 400);
    let e = msg(&r)["error"].clone();
    assert_eq!(e["code"], json!(-32022));
    assert_eq!(e["data"]["requested"], json!("2027-01-01"));
    assert!(e["data"]["supported"]
        .as_array()
        .unwrap()
        .contains(&json!(MODERN)));

    // missing clientCapabilities / missing _meta version (modern header) → 400 -32602
    let mut body = modern_req(json!(3), "tools/list", json!({}));
    body["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove(META_CLIENT_CAPABILITIES);
    let r = post(&ep, &b, &modern_headers("tools/list", None, &[]), &body).await;
    assert_eq!((r.status, error_code(&r)), (400, -32602));
    let r = post(
        &ep,
        &b,
        &modern_headers("tools/list", None, &[]),
        &req(json!(4), "tools/list", json!({})),
    )
    .await;
    assert_eq!((r.status, error_code(&r)), (400, -32602));
    // server/discover without _meta → 400 -32602
    let r = post(
        &ep,
        &b,
        &post_headers(&[]),
        &req(json!(5), "server/discover", json!({})),
    )
    .await;
    assert_eq!((r.status, error_code(&r)), (400, -32602));

    // notifications → 202; responses → 400
    let r = post(
        &ep,
        &b,
        &modern_headers("notifications/cancelled", None, &[]),
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    )
    .await;
    assert_eq!(r.status, 202);
    let r = post(
        &ep,
        &b,
        &modern_headers("x", None, &[]),
        &json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
    )
    .await;
    assert_eq!(r.status, 400);

    // GET and DELETE → 405
    let r = ep
        .handle(
            &Method::GET,
            &headers(&[("mcp-protocol-version", MODERN)]),
            b"",
            &b,
        )
        .await;
    assert_eq!(r.status, 405);
    let r = ep
        .handle(
            &Method::DELETE,
            &headers(&[("mcp-protocol-version", MODERN), ("mcp-session-id", "x")]),
            b"",
            &b,
        )
        .await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST"));
}

#[tokio::test]
async fn stateless_param_headers() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let body = |args: Value| {
        modern_req(
            json!(1),
            "tools/call",
            json!({"name": "regional", "arguments": args}),
        )
    };
    let h = |extra: &[(&str, &str)]| modern_headers("tools/call", Some("regional"), extra);
    let cases: Vec<(HeaderMap, Value, u16)> = vec![
        (
            h(&[("mcp-param-region", "us-west1")]),
            body(json!({"region": "us-west1"})),
            200,
        ),
        (h(&[]), body(json!({})), 200),
        (h(&[]), body(json!({"region": null})), 200),
        (
            h(&[("mcp-param-region", "eu")]),
            body(json!({"region": "us-west1"})),
            400,
        ),
        (h(&[]), body(json!({"region": "us-west1"})), 400),
        (h(&[("mcp-param-region", "us-west1")]), body(json!({})), 400),
        (
            h(&[("Mcp-Param-Region", "=?base64?SGVsbG8sIOS4lueVjA==?=")]),
            body(json!({"region": "Hello, 世界"})),
            200,
        ),
        (
            h(&[("mcp-param-region", "us-west1"), ("mcp-param-count", "42")]),
            body(json!({"region": "us-west1", "count": 42.0})),
            200,
        ),
        (
            h(&[("mcp-param-region", "us-west1"), ("mcp-param-count", "41")]),
            body(json!({"region": "us-west1", "count": 42})),
            400,
        ),
    ];
    for (i, (hm, body, status)) in cases.into_iter().enumerate() {
        let r = post(&ep, &b, &hm, &body).await;
        assert_eq!(r.status, status, "case {i}: {r:?}");
        if status == 400 {
            assert_eq!(error_code(&r), -32020, "case {i}");
        }
    }
}

#[tokio::test]
async fn stateless_sse_has_no_priming_and_no_ids() {
    let (ep, b) = (McpEndpoint::new(true), Fake::new());
    let r = post(
        &ep,
        &b,
        &modern_headers("tools/list", None, &[]),
        &modern_req(json!(1), "tools/list", json!({})),
    )
    .await;
    assert_eq!(r.status, 200);
    let McpBody::Sse(events) = &r.body else {
        panic!("SSE expected")
    };
    assert_eq!(events.len(), 1);
    assert!(events[0].starts_with(b"data: "));
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    assert_eq!(msg(&r)["result"]["resultType"], json!("complete"));
    // a 404 is JSON even here
    let r = post(
        &ep,
        &b,
        &modern_headers("ping", None, &[]),
        &modern_req(json!(2), "ping", json!({})),
    )
    .await;
    assert_eq!(r.status, 404);
    assert!(matches!(r.body, McpBody::Json(_)));
}

#[tokio::test]
async fn era_selection() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    // initialize carrying modern _meta and header is still the session handshake
    let mut body = modern_req(json!(1), "initialize", json!({"protocolVersion": MODERN}));
    body["params"]["protocolVersion"] = json!(MODERN);
    let r = post(&ep, &b, &modern_headers("initialize", None, &[]), &body).await;
    assert_eq!(r.status, 200);
    assert!(r.header("mcp-session-id").is_some());
    assert_eq!(msg(&r)["result"]["protocolVersion"], json!("2025-11-25"));
    // a legacy request without a session and without modern signals is session era → 400
    let r = post(
        &ep,
        &b,
        &post_headers(&[]),
        &req(json!(2), "tools/list", json!({})),
    )
    .await;
    assert_eq!((r.status, error_code(&r)), (400, -32000));
    // a session-era header with a session id is session era
    let sid = init(&ep, &b, "2025-11-25").await;
    let r = post(
        &ep,
        &b,
        &session_headers(&sid, &[("mcp-protocol-version", "2025-11-25")]),
        &req(json!(3), "tools/list", json!({})),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(msg(&r)["result"].get("resultType").is_none());
}

#[test]
fn harness_reply_echoes_the_id() {
    let e = HarnessError::new(HarnessCode::LeaseExpired, "the attempt's lease expired");
    let r = harness_reply(
        req(json!("q1"), "tools/call", json!({"name": "x"}))
            .to_string()
            .as_bytes(),
        &e,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("understudy-error"), Some("lease_expired"));
    let m = msg(&r);
    assert_eq!(m["id"], json!("q1"));
    assert_eq!(m["error"]["code"], json!(-32603));
    assert_eq!(
        m["error"]["data"]["understudy_error"]["code"],
        json!("lease_expired")
    );
    let r = harness_reply(
        b"not json",
        &HarnessError::new(HarnessCode::UnknownTool, "x"),
    );
    assert_eq!(msg(&r)["id"], Value::Null);
    assert_eq!(msg(&r)["error"]["code"], json!(-32602));
}

#[tokio::test]
async fn session_era_meta_version_stays_in_the_session() {
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let sid = init(&ep, &b, "2025-11-25").await;
    let body = req(
        json!(1),
        "tools/list",
        json!({"_meta": {META_PROTOCOL_VERSION: "2025-11-25", "progressToken": 3}}),
    );
    let r = post(&ep, &b, &session_headers(&sid, &[]), &body).await;
    assert_eq!(r.status, 200);
    assert!(msg(&r)["result"].get("resultType").is_none());
}

#[test]
fn handle_future_is_send() {
    fn is_send<T: Send>(_: &T) {}
    let (ep, b) = (McpEndpoint::new(false), Fake::new());
    let h = HeaderMap::new();
    let f = ep.handle(&Method::POST, &h, b"", &b);
    is_send(&f);
    let dyn_backend: &dyn McpBackend = &b;
    let g = ep.handle(&Method::POST, &h, b"", dyn_backend);
    is_send(&g);
}
