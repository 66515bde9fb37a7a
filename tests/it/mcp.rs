//! MCP integrations end to end (issue "MCP integrations: a Streamable HTTP MCP server from
//! pinned mocks, in both protocol eras, and discovery"): the official Rust SDK (rmcp) as a
//! real client of understudy's endpoint, raw HTTP for every status and header rule in both
//! eras with JSON and SSE answers, evidence shared with HTTP calls, and `discover` against a
//! real rmcp server on loopback.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{
    StreamableHttpClientTransport, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use understudy::app::attempt::{Clock, ManualClock, SystemClock};
use understudy::profile::mcp::sse::parse_events;

use crate::support::{self, Project, Resp, Server};

// ---------------------------------------------------------------------------------------------
// The project: `tools` (JSON answers) and `stream` (`mcp_sse: true`) serve the same tool files;
// `crm` is Salesforce, for comparing evidence.

const ACCEPT_BOTH: (&str, &str) = ("accept", "application/json, text/event-stream");

fn lookup_customer() -> Value {
    let found = json!({ "found": true, "name": "Ada", "phone": "+15550001" });
    json!({
        "operation_id": "lookup_customer",
        "title": "Look up a customer",
        "description": "Find a customer by phone number",
        "annotations": { "readOnlyHint": true },
        "input_schema": { "type": "object", "required": ["phone"],
                          "properties": { "phone": { "type": "string", "pattern": "^[+0-9]+$" } } },
        "output_schema": { "type": "object", "required": ["found"],
                           "properties": { "found": { "type": "boolean" }, "name": { "type": "string" },
                                           "phone": { "type": "string" } } },
        "mock": {
            "schema_version": 1,
            "default_variant": "found",
            "variants": { "found": { "result": { "found": true, "name": "Ada", "phone": { "$input": "phone" } } } },
            "examples": [ { "variant": "found", "input": { "phone": "+15550001" }, "expected": found } ]
        }
    })
}

fn create_ticket() -> Value {
    json!({
        "operation_id": "create_ticket",
        "description": "Open a support ticket",
        "input_schema": { "type": "object", "required": ["subject"],
                          "properties": { "subject": { "type": "string", "minLength": 3 },
                                          "priority": { "enum": ["low", "high"] },
                                          "request_id": { "type": "string" } } },
        "output_schema": { "type": "object", "required": ["ticket_id"],
                           "properties": { "ticket_id": { "type": "string" }, "subject": { "type": "string" } } },
        "idempotency": { "input": "request_id" },
        "mock": {
            "schema_version": 1,
            "default_variant": "ok",
            "variants": { "ok": {
                "result": { "ticket_id": "T-100", "subject": { "$input": "subject" } },
                "set_state": { "last_subject": { "$input": "subject" } }
            } },
            "examples": [ { "variant": "ok", "input": { "subject": "Printer on fire" },
                            "expected": { "ticket_id": "T-100", "subject": "Printer on fire" } } ]
        }
    })
}

fn last_ticket() -> Value {
    json!({
        "operation_id": "last_ticket",
        "description": "The subject of the last ticket opened",
        "annotations": { "readOnlyHint": true },
        "input_schema": { "type": "object" },
        "output_schema": { "type": "object", "required": ["last"] },
        "mock": {
            "schema_version": 1,
            "default_variant": "ok",
            "initial_state": { "last_subject": "none" },
            "variants": { "ok": { "result": { "last": { "$state": "last_subject" } } } },
            "examples": [ { "variant": "ok", "input": {}, "expected": { "last": "none" } } ]
        }
    })
}

fn call_tool_result_schema() -> Value {
    json!({
        "type": "object", "required": ["content"],
        "properties": {
            "content": { "type": "array", "items": { "type": "object", "required": ["type"] } },
            "isError": { "type": "boolean" }
        }
    })
}

fn chart_ok() -> Value {
    json!({ "content": [
        { "type": "text", "text": "Sales by month" },
        { "type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png" },
        { "type": "resource", "resource": { "uri": "file:///report.csv", "mimeType": "text/csv", "text": "month,sales\njan,3" } }
    ], "isError": false })
}

fn chart_failed() -> Value {
    json!({ "content": [ { "type": "text", "text": "the chart service is down" } ], "isError": true })
}

fn render_chart() -> Value {
    json!({
        "operation_id": "render_chart",
        "description": "Render a chart",
        "annotations": { "readOnlyHint": true },
        "result_form": "call_tool_result",
        "input_schema": { "type": "object", "required": ["kind"],
                          "properties": { "kind": { "enum": ["bar", "broken"] } } },
        "output_schema": call_tool_result_schema(),
        "mock": {
            "schema_version": 1,
            "default_variant": "ok",
            "variants": { "ok": {
                "result": chart_ok(),
                "rules": [ { "when": [ { "source": "input", "path": "kind", "op": "eq", "value": "broken" } ],
                             "result": chart_failed() } ]
            } },
            "examples": [ { "variant": "ok", "input": { "kind": "bar" }, "expected": chart_ok() } ]
        }
    })
}

/// A tool without a mock: listed, and a call to it is `no_mock`.
fn escalate() -> Value {
    json!({
        "operation_id": "escalate",
        "description": "Escalate to a human",
        "input_schema": { "type": "object" },
        "output_schema": { "type": "object" }
    })
}

fn project() -> Project {
    let p = Project::new(&[("tools", "mcp"), ("crm", "salesforce")]);
    p.write_config(json!({ "integrations": {
        "tools": { "profile": "mcp", "operations": "mocks/tools" },
        "stream": { "profile": "mcp", "operations": "mocks/tools", "mcp_sse": true },
        "crm": { "profile": "salesforce", "operations": "mocks/crm" }
    } }));
    for op in [
        lookup_customer(),
        create_ticket(),
        last_ticket(),
        render_chart(),
        escalate(),
    ] {
        p.op("tools", op);
    }
    p.op("crm", support::sf_lookup_op());
    p
}

const TOOL_NAMES: [&str; 5] = [
    "create_ticket",
    "escalate",
    "last_ticket",
    "lookup_customer",
    "render_chart",
];

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().expect("arguments object").clone()
}

fn call(name: &'static str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name).with_arguments(args(arguments))
}

/// The JSON-RPC error of a failed rmcp call.
fn mcp_error(e: rmcp::service::ServiceError) -> ErrorData {
    match e {
        rmcp::service::ServiceError::McpError(d) => d,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

type Client = RunningService<RoleClient, ()>;

/// An rmcp client in the session era (initialize) at `url`, with extra headers.
async fn session_client(url: String, headers: &[(&'static str, &str)]) -> Client {
    let mut custom = HashMap::new();
    for (k, v) in headers {
        custom.insert(
            reqwest::header::HeaderName::from_static(k),
            reqwest::header::HeaderValue::from_str(v).unwrap(),
        );
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize")
}

/// An rmcp client in the stateless era (server/discover, 2026-07-28).
async fn stateless_client(url: String) -> Client {
    ().serve_with_lifecycle(
        StreamableHttpClientTransport::from_uri(url),
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("discover")
}

// ---------------------------------------------------------------------------------------------
// 1–4. rmcp as the client

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_lists_and_calls_tools_through_an_attempt_path() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let client = session_client(s.url(&a.base("tools")), &[]).await;

    let info = client.peer_info().expect("server info");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
    assert_eq!(info.server_info.as_ref().unwrap().name, "understudy-tools");
    assert!(info.capabilities.tools.is_some());

    // tools/list: every pinned contract, with schemas and annotations.
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, TOOL_NAMES);
    let by_name = |n: &str| tools.iter().find(|t| t.name == n).unwrap().clone();
    let lookup = by_name("lookup_customer");
    assert_eq!(lookup.title.as_deref(), Some("Look up a customer"));
    assert_eq!(
        lookup.description.as_deref(),
        Some("Find a customer by phone number")
    );
    assert_eq!(
        Value::Object((*lookup.input_schema).clone()),
        lookup_customer()["input_schema"]
    );
    assert_eq!(
        Value::Object((*lookup.output_schema.clone().unwrap()).clone()),
        lookup_customer()["output_schema"]
    );
    assert_eq!(lookup.annotations.unwrap().read_only_hint, Some(true));
    assert!(by_name("create_ticket").annotations.is_none());
    assert!(
        by_name("render_chart").output_schema.is_none(),
        "a call_tool_result tool without required structuredContent advertises no outputSchema"
    );

    // Success: structured content is the mock's result.
    let r = client
        .call_tool(call("lookup_customer", json!({ "phone": "+15550001" })))
        .await
        .expect("lookup");
    assert_eq!(r.is_error, Some(false));
    assert_eq!(
        r.structured_content,
        Some(json!({ "found": true, "name": "Ada", "phone": "+15550001" }))
    );

    // Bad arguments: a tool result with isError, naming the problem.
    let r = client
        .call_tool(call("create_ticket", json!({ "subject": "ab" })))
        .await
        .expect("an input error is a result, not a JSON-RPC error");
    assert_eq!(r.is_error, Some(true));
    let text = serde_json::to_value(&r.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("subject"), "{text}");

    // State: a write changes what a read of the same attempt answers.
    let before = client
        .call_tool(call("last_ticket", json!({})))
        .await
        .unwrap();
    assert_eq!(before.structured_content, Some(json!({ "last": "none" })));
    let created = client
        .call_tool(call(
            "create_ticket",
            json!({ "subject": "Printer on fire", "priority": "high" }),
        ))
        .await
        .unwrap();
    assert_eq!(
        created.structured_content,
        Some(json!({ "ticket_id": "T-100", "subject": "Printer on fire" }))
    );
    let after = client
        .call_tool(call("last_ticket", json!({})))
        .await
        .unwrap();
    assert_eq!(
        after.structured_content,
        Some(json!({ "last": "Printer on fire" }))
    );

    // call_tool_result: sent as it is (image and resource blocks), and a tool-level failure.
    let chart = client
        .call_tool(call("render_chart", json!({ "kind": "bar" })))
        .await
        .unwrap();
    let v = serde_json::to_value(&chart).unwrap();
    assert_eq!(v["content"], chart_ok()["content"]);
    assert_eq!(chart.is_error, Some(false));
    let broken = client
        .call_tool(call("render_chart", json!({ "kind": "broken" })))
        .await
        .unwrap();
    assert_eq!(broken.is_error, Some(true));
    assert_eq!(
        serde_json::to_value(&broken.content).unwrap(),
        chart_failed()["content"]
    );
    client.cancel().await.unwrap();

    let ev = s.evidence(&a.id).await;
    let statuses: Vec<(&str, &str)> = ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["operation_id"].as_str().unwrap(),
                e["result_status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("lookup_customer", "ok"),
            ("create_ticket", "input_error"),
            ("last_ticket", "ok"),
            ("create_ticket", "ok"),
            ("last_ticket", "ok"),
            ("render_chart", "ok"),
            ("render_chart", "ok"),
        ]
    );
    let input_errors = ev["tool_input_errors"].as_array().unwrap();
    assert_eq!(input_errors.len(), 1);
    assert_eq!(input_errors[0]["operation_id"], "create_ticket");
    assert_eq!(input_errors[0]["arguments"], json!({ "subject": "ab" }));
    assert_eq!(ev["harness_errors"], json!([]));
    assert_eq!(
        ev["verdict"], "pass",
        "an input error alone does not fail the attempt"
    );
    assert_eq!(
        ev["final_state"]["tools"]["last_subject"],
        "Printer on fire"
    );
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tool_is_a_harness_error_through_the_attempt_header() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let client = session_client(s.url("/tools"), &[("understudy-attempt", &a.token)]).await;

    let e = mcp_error(
        client
            .call_tool(call("no_such_tool", json!({ "x": 1 })))
            .await
            .expect_err("unknown tool"),
    );
    assert_eq!(e.code.0, -32602);
    let data = e.data.expect("understudy_error data");
    assert_eq!(data["understudy_error"]["kind"], "harness_error");
    assert_eq!(data["understudy_error"]["code"], "unknown_tool");

    // A listed tool without a mock: -32603 with the harness code no_mock.
    let e = mcp_error(
        client
            .call_tool(call("escalate", json!({})))
            .await
            .expect_err("no mock"),
    );
    assert_eq!(e.code.0, -32603);
    assert_eq!(e.data.unwrap()["understudy_error"]["code"], "no_mock");
    client.cancel().await.unwrap();

    let ev = s.evidence(&a.id).await;
    let harness: Vec<(&str, &str)> = ev["harness_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["operation_id"].as_str().unwrap(),
                h["code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        harness,
        vec![("no_such_tool", "unknown_tool"), ("escalate", "no_mock")]
    );
    let first = &ev["tool_events"][0];
    assert_eq!(first["arguments"], json!({ "x": 1 }));
    assert_eq!(first["result_status"], "harness_error");
    assert_eq!(first["result"]["code"], -32602);
    // An unknown tool reached nothing: it is not a write (no_upstream_writes would list it).
    assert_eq!(first["is_write"], false, "{first:#}");
    assert_eq!(ev["verdict"], "fail");
    // The default attempt saw nothing: the header routed every call.
    let default = s.evidence(&s.default_attempt()).await;
    assert_eq!(default["tool_events"], json!([]));
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_in_the_stateless_era_with_json_and_sse() {
    let p = project();
    let s = Server::start(&p).await;
    for integration in ["tools", "stream"] {
        let client = stateless_client(s.url(&format!("/{integration}"))).await;
        let tools = client.list_all_tools().await.expect("tools/list");
        assert_eq!(tools.len(), TOOL_NAMES.len(), "{integration}");
        let r = client
            .call_tool(call("lookup_customer", json!({ "phone": "+1" })))
            .await
            .expect("lookup");
        assert_eq!(
            r.structured_content,
            Some(json!({ "found": true, "name": "Ada", "phone": "+1" })),
            "{integration}"
        );
        let r = client
            .call_tool(call("lookup_customer", json!({ "phone": "not a phone" })))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true), "{integration}");
        let e = mcp_error(
            client
                .call_tool(call("nope", json!({})))
                .await
                .expect_err("unknown tool"),
        );
        assert_eq!(e.code.0, -32602, "{integration}");
        client.cancel().await.unwrap();
    }
    let ev = s.evidence(&s.default_attempt()).await;
    let integrations: BTreeSet<&str> = ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["integration"].as_str().unwrap())
        .collect();
    assert_eq!(integrations, BTreeSet::from(["stream", "tools"]));
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_in_the_session_era_over_sse() {
    let p = project();
    let s = Server::start(&p).await;
    let client = session_client(s.url("/stream/"), &[]).await;
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), TOOL_NAMES.len());
    let r = client
        .call_tool(call("render_chart", json!({ "kind": "bar" })))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&r).unwrap()["content"],
        chart_ok()["content"]
    );
    client.cancel().await.unwrap();
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP: status codes and headers, session era

fn initialize(id: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": { "name": "raw-test", "version": "1" } } })
}

fn request(id: Value, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

async fn post(s: &Server, path: &str, body: &Value, headers: &[(&str, &str)]) -> Resp {
    s.call("POST", path, Some(body), headers).await
}

/// Initialize a session at `path`; its id.
async fn open_session(s: &Server, path: &str) -> String {
    let r = post(s, path, &initialize(json!(0)), &[ACCEPT_BOTH]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let sid = r.header("mcp-session-id").expect("session id").to_string();
    let r = post(
        s,
        path,
        &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        &[ACCEPT_BOTH, ("mcp-session-id", &sid)],
    )
    .await;
    assert_eq!(r.status, 202);
    assert_eq!(r.text, "");
    sid
}

/// The JSON-RPC messages of an SSE body (priming events skipped).
fn sse_messages(text: &str) -> Vec<Value> {
    parse_events(text.as_bytes())
        .into_iter()
        .filter(|(_, d)| !d.is_empty())
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_era_status_codes_and_headers() {
    let p = project();
    let s = Server::start(&p).await;

    // initialize: JSON, a session id, the caller's id (a string) echoed.
    let r = post(&s, "/tools", &initialize(json!("init-α")), &[ACCEPT_BOTH]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    assert_eq!(v["id"], "init-α");
    assert_eq!(v["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(v["result"]["serverInfo"]["name"], "understudy-tools");
    let sid = r.header("mcp-session-id").unwrap().to_string();
    assert!(sid.len() >= 32, "{sid}");
    let session = [ACCEPT_BOTH, ("mcp-session-id", sid.as_str())];

    // Notifications and responses: 202, no body.
    let r = post(
        &s,
        "/tools",
        &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        &session,
    )
    .await;
    assert_eq!((r.status, r.text.as_str()), (202, ""));
    let r = post(
        &s,
        "/tools",
        &json!({ "jsonrpc": "2.0", "id": 99, "result": {} }),
        &session,
    )
    .await;
    assert_eq!(r.status, 202);

    // A numeric id is echoed as a number.
    let r = post(
        &s,
        "/tools",
        &request(
            json!(7),
            "tools/call",
            json!({ "name": "lookup_customer", "arguments": { "phone": "+1" } }),
        ),
        &session,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["id"], 7);
    assert_eq!(v["result"]["isError"], false);
    assert_eq!(v["result"]["structuredContent"]["phone"], "+1");
    assert_eq!(
        serde_json::from_str::<Value>(v["result"]["content"][0]["text"].as_str().unwrap()).unwrap(),
        v["result"]["structuredContent"],
        "the text block carries the same JSON"
    );

    // Unknown method: -32601 (HTTP 200 in this era); unknown tool: -32602 + understudy_error.
    let r = post(
        &s,
        "/tools",
        &request(json!(8), "resources/list", json!({})),
        &session,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["error"]["code"], -32601);
    assert_eq!(r.json()["id"], 8);
    let r = post(
        &s,
        "/tools",
        &request(json!(9), "tools/call", json!({ "name": "nope" })),
        &session,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("understudy-error"), Some("unknown_tool"));
    assert_eq!(r.json()["error"]["code"], -32602);
    assert_eq!(
        r.json()["error"]["data"]["understudy_error"]["code"],
        "unknown_tool"
    );

    // Missing session: 400; GET: 405 with Allow; bad Accept: 406; bad Content-Type: 415.
    let r = post(
        &s,
        "/tools",
        &request(json!(10), "tools/list", json!({})),
        &[ACCEPT_BOTH],
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.json()["error"]["code"], -32000);
    // GET is the session's stream (mcp_era.rs): it needs a session; 2026-07-28 has none (405).
    let r = s
        .call("GET", "/tools", None, &[("accept", "text/event-stream")])
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32000);
    let r = s
        .call(
            "GET",
            "/tools",
            None,
            &[
                ("accept", "text/event-stream"),
                ("mcp-protocol-version", "2026-07-28"),
            ],
        )
        .await;
    assert_eq!(r.status, 405);
    assert!(r.header("allow").unwrap().contains("POST"));
    let r = post(
        &s,
        "/tools",
        &request(json!(11), "tools/list", json!({})),
        &[("accept", "text/html"), ("mcp-session-id", &sid)],
    )
    .await;
    assert_eq!(r.status, 406);
    let r = s
        .call_raw(
            "POST",
            "/tools",
            &request(json!(12), "tools/list", json!({})).to_string(),
            &[
                ACCEPT_BOTH,
                ("content-type", "text/plain"),
                ("mcp-session-id", &sid),
            ],
        )
        .await;
    assert_eq!(r.status, 415);
    // Malformed JSON: 400, -32700.
    let r = s
        .call_raw(
            "POST",
            "/tools",
            "{not json",
            &[
                ACCEPT_BOTH,
                ("content-type", "application/json"),
                ("mcp-session-id", &sid),
            ],
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32700);

    // A client that accepts only SSE gets SSE: priming event, then the answer; no length.
    let r = post(
        &s,
        "/tools",
        &request(json!("s-1"), "tools/list", json!({})),
        &[("accept", "text/event-stream"), ("mcp-session-id", &sid)],
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert!(r.header("content-length").is_none());
    let events = parse_events(r.text.as_bytes());
    assert_eq!(events[0].1, "", "2025-11-25 starts with a priming event");
    assert!(events[0].0.is_some());
    let msgs = sse_messages(&r.text);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["id"], "s-1");
    assert_eq!(msgs[0]["result"]["tools"].as_array().unwrap().len(), 5);

    // DELETE ends the session: 204, then 404 for it.
    let r = s
        .call("DELETE", "/tools", None, &[("mcp-session-id", &sid)])
        .await;
    assert_eq!(r.status, 204);
    let r = post(
        &s,
        "/tools",
        &request(json!(13), "tools/list", json!({})),
        &session,
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], -32001);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sse_integration_answers_sse_to_clients_that_accept_both() {
    let p = project();
    let s = Server::start(&p).await;
    let r = post(&s, "/stream", &initialize(json!(1)), &[ACCEPT_BOTH]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    let sid = r.header("mcp-session-id").unwrap().to_string();
    let init = sse_messages(&r.text);
    assert_eq!(init[0]["result"]["serverInfo"]["name"], "understudy-stream");
    let r = post(
        &s,
        "/stream",
        &request(
            json!(2),
            "tools/call",
            json!({ "name": "create_ticket", "arguments": { "subject": "x" } }),
        ),
        &[ACCEPT_BOTH, ("mcp-session-id", &sid)],
    )
    .await;
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let m = sse_messages(&r.text);
    assert_eq!(m[0]["id"], 2);
    assert_eq!(m[0]["result"]["isError"], true);
    // A client that accepts only JSON still gets JSON.
    let r = post(
        &s,
        "/stream",
        &request(json!(3), "ping", json!({})),
        &[("accept", "application/json"), ("mcp-session-id", &sid)],
    )
    .await;
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json()["result"], json!({}));
    // The `tools` integration (no mcp_sse) answers JSON to the same Accept.
    let r = post(&s, "/tools", &initialize(json!(1)), &[ACCEPT_BOTH]).await;
    assert_eq!(r.header("content-type"), Some("application/json"));
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_belong_to_one_attempt() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let b = s.attempt(json!({})).await;
    let sid = open_session(&s, &a.base("tools")).await;
    let list = request(json!(1), "tools/list", json!({}));
    let ok = post(
        &s,
        &a.base("tools"),
        &list,
        &[ACCEPT_BOTH, ("mcp-session-id", &sid)],
    )
    .await;
    assert_eq!(ok.status, 200);
    let other = post(
        &s,
        &b.base("tools"),
        &list,
        &[ACCEPT_BOTH, ("mcp-session-id", &sid)],
    )
    .await;
    assert_eq!(
        other.status, 404,
        "a session of attempt A is unknown under B"
    );
    // An unknown token fails closed, before any MCP handling.
    let r = post(
        &s,
        "/~ust_nope/tools",
        &initialize(json!(1)),
        &[ACCEPT_BOTH],
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("understudy-error"), Some("unknown_attempt"));
    // A path below the endpoint is not the endpoint: unmatched_request, recorded.
    let r = s
        .call("POST", "/tools/extra", Some(&json!({})), &[ACCEPT_BOTH])
        .await;
    assert_eq!(r.status, 500);
    assert_eq!(r.header("understudy-error"), Some("unmatched_request"));
    assert!(r.text.contains("base URL /tools"), "{}", r.text);
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP: stateless era (2026-07-28)

fn meta() -> Value {
    json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {} })
}

fn modern(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    request(id, method, params)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_era_status_codes_and_headers() {
    let p = project();
    let s = Server::start(&p).await;
    let h = |method: &'static str| {
        vec![
            ACCEPT_BOTH,
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method),
        ]
    };

    let r = post(
        &s,
        "/tools",
        &modern(json!("d"), "server/discover", json!({})),
        &h("server/discover"),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["id"], "d");
    assert!(v["result"]["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2026-07-28")));
    assert!(
        r.header("mcp-session-id").is_none(),
        "no sessions in 2026-07-28"
    );

    let r = post(
        &s,
        "/tools",
        &modern(json!(1), "tools/list", json!({})),
        &h("tools/list"),
    )
    .await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(v["result"]["cacheScope"], "private");
    assert!(v["result"]["ttlMs"].is_number());
    assert_eq!(v["result"]["tools"].as_array().unwrap().len(), 5);

    // tools/call needs Mcp-Name; with it the answer is the caller's id and the mock's result.
    let call_body = modern(
        json!(2),
        "tools/call",
        json!({ "name": "lookup_customer", "arguments": { "phone": "+2" } }),
    );
    let mut with_name = h("tools/call");
    with_name.push(("mcp-name", "lookup_customer"));
    let r = post(&s, "/tools", &call_body, &with_name).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["id"], 2);
    assert_eq!(r.json()["result"]["structuredContent"]["phone"], "+2");
    // Mismatches: 400 with -32020.
    let r = post(&s, "/tools", &call_body, &h("tools/call")).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32020);
    assert_eq!(r.json()["id"], 2);
    let r = post(&s, "/tools", &call_body, &h("tools/list")).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32020);
    let r = post(
        &s,
        "/tools",
        &modern(json!(3), "tools/list", json!({})),
        &[
            ACCEPT_BOTH,
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ],
    )
    .await;
    assert_eq!(r.status, 200);
    let r = post(
        &s,
        "/tools",
        &modern(json!(3), "tools/list", json!({})),
        &[ACCEPT_BOTH, ("mcp-method", "tools/list")],
    )
    .await;
    assert_eq!(r.status, 400, "MCP-Protocol-Version is required");
    assert_eq!(r.json()["error"]["code"], -32020);
    // Unknown method: 404, -32601.
    let r = post(
        &s,
        "/tools",
        &modern(json!(4), "prompts/list", json!({})),
        &h("prompts/list"),
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], -32601);
    // Notifications: 202.
    let r = post(
        &s,
        "/tools",
        &json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "_meta": meta(), "requestId": 1 } }),
        &h("notifications/cancelled"),
    )
    .await;
    assert_eq!((r.status, r.text.as_str()), (202, ""));
    // GET and DELETE: 405.
    let r = s
        .call(
            "GET",
            "/tools",
            None,
            &[
                ("accept", "text/event-stream"),
                ("mcp-protocol-version", "2026-07-28"),
            ],
        )
        .await;
    assert_eq!(r.status, 405);
    let r = s
        .call(
            "DELETE",
            "/tools",
            None,
            &[("mcp-protocol-version", "2026-07-28")],
        )
        .await;
    assert_eq!(r.status, 405);

    // SSE: the mcp_sse integration, and a client accepting only SSE; no event ids.
    for (path, accept) in [
        ("/stream", "application/json, text/event-stream"),
        ("/tools", "text/event-stream"),
    ] {
        let r = post(
            &s,
            path,
            &call_body,
            &[
                ("accept", accept),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "lookup_customer"),
            ],
        )
        .await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
        assert_eq!(
            r.header("content-type"),
            Some("text/event-stream"),
            "{path}"
        );
        let events = parse_events(r.text.as_bytes());
        assert_eq!(events.len(), 1, "{path}: {}", r.text);
        assert_eq!(events[0].0, None);
        let m: Value = serde_json::from_str(&events[0].1).unwrap();
        assert_eq!(m["id"], 2);
        assert_eq!(m["result"]["resultType"], "complete");
    }
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 5. Attempts: evidence shared with HTTP calls, idempotency, the lease

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_evidence_has_the_shape_of_salesforce_evidence() {
    let p = project();
    let s = Server::start(&p).await;
    let sf = s.attempt(json!({})).await;
    let r = s
        .call(
            "GET",
            &format!(
                "{}/services/data/v59.0/query?q=SELECT+Id,+FirstName+FROM+Contact+WHERE+Phone+=+'%2B15550001'",
                sf.base("crm")
            ),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let mcp = s.attempt(json!({})).await;
    let sid = open_session(&s, &mcp.base("tools")).await;
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let headers = [
        ACCEPT_BOTH,
        ("mcp-session-id", sid.as_str()),
        ("traceparent", tp),
    ];
    for (id, name, arguments) in [
        (1, "lookup_customer", json!({ "phone": "+15550001" })),
        (2, "create_ticket", json!({ "subject": "Broken chair" })),
    ] {
        let r = post(
            &s,
            &mcp.base("tools"),
            &request(
                json!(id),
                "tools/call",
                json!({ "name": name, "arguments": arguments }),
            ),
            &headers,
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let a = s.evidence(&sf.id).await;
    let b = s.evidence(&mcp.id).await;
    let keys = |v: &Value| {
        v.as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(keys(&a), keys(&b), "same top-level members");
    assert_eq!(
        keys(&a["tool_events"][0]),
        keys(&b["tool_events"][0]),
        "same event members"
    );
    let e = &b["tool_events"][0];
    assert_eq!(e["integration"], "tools");
    assert_eq!(e["operation_id"], "lookup_customer");
    assert_eq!(e["arguments"], json!({ "phone": "+15550001" }));
    assert_eq!(
        e["result"],
        json!({ "found": true, "name": "Ada", "phone": "+15550001" })
    );
    assert_eq!(e["result_status"], "ok");
    assert_eq!(e["is_write"], false);
    assert_eq!(e["http_status"], 200);
    assert_eq!(e["revision"], 1);
    assert_eq!(e["variant"], "found");
    assert_eq!(e["source"], "mock");
    assert_eq!(e["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    let w = &b["tool_events"][1];
    assert_eq!(w["operation_id"], "create_ticket");
    assert_eq!(w["is_write"], true);
    assert_eq!(b["pins"]["tools/lookup_customer"]["revision"], 1);
    assert_eq!(b["final_state"]["tools"]["last_subject"], "Broken chair");
    assert_eq!(b["verdict"], "pass");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_tool_calls_replay_the_first_answer() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let client = session_client(s.url(&a.base("tools")), &[]).await;
    let first = client
        .call_tool(call(
            "create_ticket",
            json!({ "subject": "Once", "request_id": "r-1" }),
        ))
        .await
        .unwrap();
    let again = client
        .call_tool(call(
            "create_ticket",
            json!({ "subject": "Once", "request_id": "r-1" }),
        ))
        .await
        .unwrap();
    assert_eq!(first.structured_content, again.structured_content);
    let reused = client
        .call_tool(call(
            "create_ticket",
            json!({ "subject": "Other", "request_id": "r-1" }),
        ))
        .await
        .unwrap();
    assert_eq!(reused.is_error, Some(true), "same key, other arguments");
    client.cancel().await.unwrap();
    let ev = s.evidence(&a.id).await;
    let statuses: Vec<&str> = ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["result_status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["ok", "replayed", "input_error"]);
    let refs: BTreeSet<&str> = ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["idempotency_key_ref"].as_str().unwrap())
        .collect();
    assert_eq!(refs.len(), 1, "one opaque key ref");
    assert!(!refs.contains("r-1"), "the raw key never leaves the proxy");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_after_the_lease_is_a_recorded_harness_error() {
    let p = project();
    let clock = Arc::new(ManualClock::new(SystemClock.now()));
    let mut opts = p.options();
    opts.clock = clock.clone();
    let s = Server::start_with(opts).await;
    let a = s.attempt(json!({ "ttl_s": 60 })).await;
    let sid = open_session(&s, &a.base("tools")).await;
    clock.advance(chrono::Duration::seconds(61));
    let r = post(
        &s,
        &a.base("tools"),
        &request(
            json!("late"),
            "tools/call",
            json!({ "name": "create_ticket", "arguments": { "subject": "Too late" } }),
        ),
        &[ACCEPT_BOTH, ("mcp-session-id", &sid)],
    )
    .await;
    assert_eq!(
        r.status, 200,
        "MCP clients see the JSON-RPC error, not a 500"
    );
    assert_eq!(r.header("understudy-error"), Some("lease_expired"));
    let v = r.json();
    assert_eq!(v["id"], "late");
    assert_eq!(v["error"]["code"], -32603);
    assert_eq!(
        v["error"]["data"]["understudy_error"]["code"],
        "lease_expired"
    );
    // The attempt's sessions ended with its lease: a notification (not a call, not recorded)
    // names an unknown session.
    let r = post(
        &s,
        &a.base("tools"),
        &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        &[ACCEPT_BOTH, ("mcp-session-id", &sid)],
    )
    .await;
    assert_eq!(r.status, 404);
    assert!(
        s.app.mcp.is_empty(),
        "the attempt's endpoints are forgotten"
    );
    let ev = s.evidence(&a.id).await;
    let events = ev["tool_events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["operation_id"], "create_ticket");
    assert_eq!(events[0]["is_write"], true);
    assert_eq!(events[0]["arguments"], json!({ "subject": "Too late" }));
    assert_eq!(ev["harness_errors"][0]["code"], "lease_expired");
    assert_eq!(ev["verdict"], "fail");
    assert_eq!(
        ev["final_state"]["tools"]["last_subject"], "none",
        "nothing was applied"
    );
    s.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 6. discover against a real rmcp server

/// A real MCP server (rmcp) with a mutable tool list, paged two tools at a time.
#[derive(Clone)]
struct Upstream {
    tools: Arc<Mutex<Vec<Value>>>,
}

impl ServerHandler for Upstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let all: Vec<Tool> = self
            .tools
            .lock()
            .unwrap()
            .iter()
            .map(|t| serde_json::from_value(t.clone()).expect("a Tool"))
            .collect();
        let start: usize = request
            .and_then(|r| r.cursor)
            .map(|c| c.trim_start_matches("page-").parse().unwrap())
            .unwrap_or(0);
        let end = (start + 2).min(all.len());
        let mut page = ListToolsResult::with_all_items(all[start..end].to_vec());
        if end < all.len() {
            page.next_cursor = Some(format!("page-{end}"));
        }
        Ok(page)
    }

    async fn call_tool(
        &self,
        _r: CallToolRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResult::structured(json!({ "found": true })).into())
    }
}

fn upstream_tools() -> Vec<Value> {
    vec![
        json!({ "name": "lookup", "title": "Lookup", "description": "Find a record",
                "inputSchema": { "type": "object", "required": ["phone"],
                                 "properties": { "phone": { "type": "string" } } },
                "outputSchema": { "type": "object", "properties": { "found": { "type": "boolean" } } },
                "annotations": { "readOnlyHint": true } }),
        json!({ "name": "send_email", "description": "Send an email",
                "inputSchema": { "type": "object", "properties": { "to": { "type": "string" } } },
                "annotations": { "destructiveHint": false } }),
        json!({ "name": "Bad.Name", "description": "capitals are not operation ids",
                "inputSchema": { "type": "object" } }),
    ]
}

async fn start_upstream(tools: Arc<Mutex<Vec<Value>>>) -> std::net::SocketAddr {
    let service = StreamableHttpService::new(
        move || {
            Ok(Upstream {
                tools: tools.clone(),
            })
        },
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let svc = hyper_util::service::TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
            });
        }
    });
    addr
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn understudy(args: Vec<String>) -> Run {
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
            .args(&args)
            .env_remove("UNDERSTUDY_ADMIN_TOKEN")
            .output()
            .expect("run understudy");
        Run {
            code: out.status.code().expect("exit code"),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

fn discover_project(upstream: &str) -> Project {
    let p = Project::new(&[("remote", "mcp")]);
    p.write_config(json!({ "integrations": {
        "remote": { "profile": "mcp", "upstream": upstream, "operations": "mocks/remote" }
    } }));
    p
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_writes_operations_and_marks_changed_mocks_stale() {
    let tools = Arc::new(Mutex::new(upstream_tools()));
    let addr = start_upstream(tools.clone()).await;
    let p = discover_project(&format!("http://{addr}/mcp"));
    let config = p.config_path().display().to_string();
    let discover = || {
        understudy(vec![
            "discover".into(),
            "--integration".into(),
            "remote".into(),
            "--config".into(),
            config.clone(),
        ])
    };

    let run = discover().await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("protocol 2026-07-28, stateless"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("summary: 2 new, 0 unchanged, 0 updated, 0 changed, 0 stale, 1 skipped"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("Bad.Name"), "{}", run.stdout);
    let dir = p.ops_dir("remote");
    let lookup = read_json(&dir.join("lookup.json"));
    assert_eq!(lookup["operation_id"], "lookup");
    assert_eq!(lookup["title"], "Lookup");
    assert_eq!(lookup["description"], "Find a record");
    assert_eq!(lookup["input_schema"], upstream_tools()[0]["inputSchema"]);
    assert_eq!(lookup["output_schema"], upstream_tools()[0]["outputSchema"]);
    assert_eq!(lookup["annotations"], json!({ "readOnlyHint": true }));
    assert!(lookup.get("result_form").is_none());
    assert!(lookup.get("mock").is_none());
    let send = read_json(&dir.join("send_email.json"));
    assert_eq!(send["result_form"], "call_tool_result");
    assert_eq!(send["output_schema"]["required"], json!(["content"]));
    assert!(!dir.join("Bad.Name.json").exists());

    // The user writes a mock for `lookup`, checked against the current contract.
    let hash = understudy::operation::load::load_file(
        &dir.join("lookup.json"),
        understudy::contract::ProfileKind::Mcp,
    )
    .unwrap()
    .contract_hash;
    let mut with_mock = lookup.clone();
    with_mock["mock"] = json!({
        "contract_hash": hash,
        "schema_version": 1,
        "default_variant": "ok",
        "variants": { "ok": { "result": { "found": true } } },
        "examples": [ { "variant": "ok", "input": { "phone": "+1" }, "expected": { "found": true } } ]
    });
    std::fs::write(
        dir.join("lookup.json"),
        serde_json::to_vec_pretty(&with_mock).unwrap(),
    )
    .unwrap();
    let check = understudy(vec!["check".into(), "--config".into(), config.clone()]).await;
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);

    // Unchanged server: nothing rewritten.
    let run = discover().await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("0 new, 2 unchanged"), "{}", run.stdout);
    assert_eq!(read_json(&dir.join("lookup.json")), with_mock);

    // The server changes lookup's input schema: the mock is kept, never relabelled, stale.
    tools.lock().unwrap()[0]["inputSchema"]["properties"]["region"] = json!({ "type": "string" });
    let run = discover().await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("1 stale"), "{}", run.stdout);
    assert!(run.stdout.contains("stale      lookup"), "{}", run.stdout);
    let after = read_json(&dir.join("lookup.json"));
    assert_eq!(
        after["mock"], with_mock["mock"],
        "the mock is kept as it was"
    );
    assert_eq!(after["mock"]["contract_hash"], json!(hash));
    assert_eq!(
        after["input_schema"]["properties"]["region"],
        json!({ "type": "string" })
    );
    let check = understudy(vec!["check".into(), "--config".into(), config.clone()]).await;
    assert_eq!(check.code, 1, "{}{}", check.stdout, check.stderr);
    let text = format!("{}{}", check.stdout, check.stderr);
    assert!(
        text.contains("lookup.json: mock/contract_hash: stale"),
        "{text}"
    );

    // A tool the server drops is reported; its file stays.
    tools.lock().unwrap().remove(1);
    let run = discover().await;
    assert!(run.stdout.contains("gone"), "{}", run.stdout);
    assert!(dir.join("send_email.json").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_speaks_the_session_era_and_pages() {
    use understudy::author::discover::{discover_tools, EraChoice};
    let tools = Arc::new(Mutex::new(upstream_tools()));
    let addr = start_upstream(tools).await;
    let upstream = understudy::upstream::Upstream::new(None, Duration::from_secs(10)).unwrap();
    let url = format!("http://{addr}/mcp");
    let found = discover_tools(&upstream, &url, EraChoice::Session)
        .await
        .unwrap();
    assert!(!found.stateless);
    assert_eq!(found.protocol_version, "2025-11-25");
    let names: Vec<&str> = found
        .tools
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lookup", "send_email", "Bad.Name"], "every page");
    let found = discover_tools(&upstream, &url, EraChoice::Stateless)
        .await
        .unwrap();
    assert!(found.stateless);
    assert_eq!(found.tools.len(), 3);

    // understudy's own endpoint answers discover in both eras, too.
    let p = project();
    let s = Server::start(&p).await;
    for era in [EraChoice::Session, EraChoice::Stateless] {
        for integration in ["tools", "stream"] {
            let found = discover_tools(&upstream, &s.url(&format!("/{integration}")), era)
                .await
                .unwrap_or_else(|e| panic!("{integration} {era:?}: {e}"));
            assert_eq!(found.tools.len(), TOOL_NAMES.len());
            assert_eq!(
                found.server_name.as_deref(),
                Some(&*format!("understudy-{integration}"))
            );
        }
    }
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_fails_clearly_when_the_server_is_unreachable() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let p = discover_project(&format!("http://{closed}/mcp"));
    let run = understudy(vec![
        "discover".into(),
        "--integration".into(),
        "remote".into(),
        "--config".into(),
        p.config_path().display().to_string(),
    ])
    .await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("cannot list the tools of `remote`"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(&closed.to_string()), "{}", run.stderr);
    let run = understudy(vec![
        "discover".into(),
        "--integration".into(),
        "nope".into(),
        "--config".into(),
        p.config_path().display().to_string(),
    ])
    .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
}
