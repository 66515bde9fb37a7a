//! docs/src/reference/mcp.md in both eras, end to end: server-to-client requests in 2026-07-28 as
//! `input_required` results and their retries (MRTR: `inputRequests`, `inputResponses`, a
//! sealed `requestState`), driven by the official Rust SDK (rmcp) and by raw HTTP; and
//! `notifications/resources/updated` after a call changes state a subscribed resource reads,
//! on the session's GET stream (rmcp and raw HTTP) or, without one, on the caller's response
//! stream.

// rmcp deprecates roots (SEP-2577, after 2026-07-28); `roots/list` is still an input request
// of that revision, and rmcp marks `resources/subscribe` legacy-only (it is the session era's).
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ProtocolVersion, ResourceUpdatedNotificationParam, SubscribeRequestParams,
};
use rmcp::model::{ListRootsResult, Root};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use understudy::profile::mcp::sse::parse_events;

use crate::support::{Project, Resp, Server};

const ACCEPT_BOTH: (&str, &str) = ("accept", "application/json, text/event-stream");
const MODERN: &str = "2026-07-28";

// ---------------------------------------------------------------------------------------------
// The project: one `mcp` integration `tools` whose tools ask the client and change state, and
// two resources that read that state.

fn elicit(message: Value) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message,
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}})
}

/// Asks a name (single form), stores it in `last_name`.
fn ask_name() -> Value {
    json!({
        "operation_id": "ask_name",
        "description": "Asks the user for a name and remembers it",
        "input_schema": {"type": "object", "properties": {"why": {"type": "string"}}, "required": ["why"]},
        "output_schema": {"type": "object"},
        "mock": {"schema_version": 1, "default_variant": "ok",
            "initial_state": {"last_name": "nobody", "other": "0"},
            "variants": {"ok": {
                "ask_client": elicit(json!({"$input": "why"})),
                "result": {"action": {"$response": "action"}},
                "rules": [{"when": [{"source": "response", "path": "action", "op": "eq", "value": "accept"}],
                           "result": {"name": {"$response": "content.name"}, "was": {"$state": "last_name"}},
                           "set_state": {"last_name": {"$response": "content.name"}}}]}},
            "examples": [{"variant": "ok", "state": {"last_name": "nobody"},
                          "input": {"why": "w", "$response": {"action": "accept", "content": {"name": "Ann"}}},
                          "expected": {"name": "Ann", "was": "nobody"}}]}
    })
}

/// Two rounds (list form): a name, then the client's roots.
fn two_rounds() -> Value {
    json!({
        "operation_id": "two_rounds",
        "description": "Asks a name, then the roots",
        "input_schema": {"type": "object", "properties": {}},
        "output_schema": {"type": "object"},
        "mock": {"schema_version": 1, "default_variant": "ok", "variants": {"ok": {
            "ask_client": [
                {"key": "who", "method": "elicitation/create",
                 "params": {"message": "Name?", "requestedSchema": {"type": "object",
                            "properties": {"name": {"type": "string"}}}}},
                {"key": "where", "round": 2, "method": "roots/list"}],
            "result": {"who": {"$response": "who.content.name"}, "roots": {"$response": "where.roots"}}}},
            "examples": [{"variant": "ok",
                          "input": {"$response": {"who": {"action": "accept", "content": {"name": "Ann"}},
                                                  "where": {"roots": []}}},
                          "expected": {"who": "Ann", "roots": []}}]}
    })
}

/// Stores `n` in `other` (a state the `last-name` resource does not read).
fn set_other() -> Value {
    json!({
        "operation_id": "set_other",
        "description": "Stores n",
        "input_schema": {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]},
        "output_schema": {"type": "object"},
        "mock": {"schema_version": 1, "default_variant": "ok", "variants": {"ok": {
            "result": {"stored": {"$input": "n"}}, "set_state": {"other": {"$input": "n"}}}},
            "examples": [{"variant": "ok", "input": {"n": "1"}, "expected": {"stored": "1"}}]}
    })
}

/// A resource whose text is the state at `path`.
fn resource(name: &str, uri: &str, path: &str) -> Value {
    json!({"name": name, "uri": uri, "mime_type": "text/plain", "mock": {
        "schema_version": 1, "default_variant": "ok",
        "variants": {"ok": {"result": [{"uri": uri, "text": {"$state": path}}]}},
        "examples": [{"variant": "ok", "input": {}, "state": {path: "x"},
                      "expected": [{"uri": uri, "text": "x"}]}]}})
}

const LAST_NAME: &str = "test://last-name";
const OTHER: &str = "test://other";

fn project() -> Project {
    let p = Project::new(&[("tools", "mcp")]);
    p.write_config(json!({ "integrations": {
        "tools": { "profile": "mcp", "operations": "mocks/tools" }
    } }));
    p.op("tools", ask_name())
        .op("tools", two_rounds())
        .op("tools", set_other());
    let dir = p.ops_dir("tools").join("resources");
    std::fs::create_dir_all(&dir).unwrap();
    for (file, r) in [
        ("last-name", resource("last-name", LAST_NAME, "last_name")),
        ("other", resource("other", OTHER, "other")),
    ] {
        std::fs::write(
            dir.join(format!("{file}.json")),
            serde_json::to_vec_pretty(&r).unwrap(),
        )
        .unwrap();
    }
    p
}

// ---------------------------------------------------------------------------------------------
// rmcp as the client

/// Answers elicitations with the name Ann and roots with one root; reports updated resources.
#[derive(Clone)]
struct Client {
    asked: Arc<Mutex<Vec<String>>>,
    updated: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Client {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.asked.lock().unwrap().push(message.clone());
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Ann"})))
    }

    async fn list_roots(
        &self,
        _: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.asked.lock().unwrap().push("roots".into());
        Ok(ListRootsResult::new(vec![Root::new("file:///work")]))
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let _ = self.updated.send(params.uri);
    }

    fn get_info(&self) -> ClientConfig {
        let mut c = ClientConfig::default();
        c.capabilities = ClientCapabilities::builder()
            .enable_elicitation()
            .enable_roots()
            .build();
        c
    }
}

fn handler() -> (
    Client,
    Arc<Mutex<Vec<String>>>,
    mpsc::UnboundedReceiver<String>,
) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::unbounded_channel();
    let c = Client {
        asked: asked.clone(),
        updated: tx,
    };
    (c, asked, rx)
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_stateless_client_answers_input_required_and_the_retry_is_the_one_call() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let (h, asked, _) = handler();
    let c: RunningService<RoleClient, Client> = h
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(s.url(&a.base("tools"))),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover");
    let r = c
        .call_tool(call("ask_name", json!({"why": "Who are you?"})))
        .await
        .expect("tools/call");
    assert_eq!(asked.lock().unwrap().as_slice(), ["Who are you?"]);
    assert_eq!(
        r.structured_content,
        Some(json!({"name": "Ann", "was": "nobody"}))
    );
    let r = c
        .call_tool(call("two_rounds", json!({})))
        .await
        .expect("tools/call");
    assert_eq!(
        asked.lock().unwrap().as_slice(),
        ["Who are you?", "Name?", "roots"],
        "round 2 is asked after round 1"
    );
    assert_eq!(
        r.structured_content,
        Some(json!({"who": "Ann", "roots": [{"uri": "file:///work"}]}))
    );
    c.cancel().await.unwrap();

    // Each call is one event, recorded when it completed, with every answer it got.
    let ev = s.evidence(&a.id).await;
    let events = ev["tool_events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["operation_id"], "ask_name");
    assert_eq!(events[0]["result_status"], "ok");
    assert_eq!(
        events[0]["arguments"],
        json!({"why": "Who are you?", "$response": {"action": "accept", "content": {"name": "Ann"}}})
    );
    assert_eq!(
        events[1]["arguments"]["$response"],
        json!({"who": {"action": "accept", "content": {"name": "Ann"}},
               "where": {"roots": [{"uri": "file:///work"}]}})
    );
    assert_eq!(ev["final_state"]["tools"]["last_name"], "Ann");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_session_client_hears_resources_updated_on_its_get_stream() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let (h, _, mut updated) = handler();
    let c = h
        .serve(StreamableHttpClientTransport::from_uri(
            s.url(&a.base("tools")),
        ))
        .await
        .expect("initialize");
    for uri in [LAST_NAME, OTHER] {
        c.subscribe(SubscribeRequestParams::new(uri))
            .await
            .expect("subscribe");
    }
    // Changes `other` only: the first update names it, not the last-name resource.
    c.call_tool(call("set_other", json!({"n": "5"})))
        .await
        .expect("tools/call");
    let first = next(&mut updated).await;
    assert_eq!(first, OTHER);
    // Asks (session era: a request on the response stream), then changes `last_name`.
    let r = c
        .call_tool(call("ask_name", json!({"why": "Name?"})))
        .await
        .expect("tools/call");
    assert_eq!(r.structured_content.unwrap()["name"], "Ann");
    assert_eq!(next(&mut updated).await, LAST_NAME);
    c.cancel().await.unwrap();
}

async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    // A guard against hanging, not a timed assertion.
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("a notifications/resources/updated")
        .expect("the client is alive")
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP

fn meta(caps: Value) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN,
           "io.modelcontextprotocol/clientCapabilities": caps})
}

async fn modern_call(s: &Server, path: &str, id: i64, params: Value) -> Resp {
    let name = params["name"].as_str().unwrap().to_string();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    s.call(
        "POST",
        path,
        Some(&body),
        &[
            ACCEPT_BOTH,
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/call"),
            ("mcp-name", &name),
        ],
    )
    .await
}

async fn event_count(s: &Server, attempt: &str) -> usize {
    s.evidence(attempt).await["tool_events"]
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_required_rounds_over_raw_http() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let path = a.base("tools");
    let caps = json!({"elicitation": {}});
    let params = |extra: Value| {
        let mut p =
            json!({"name": "ask_name", "arguments": {"why": "Who?"}, "_meta": meta(caps.clone())});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };

    // Round 1: input_required, nothing evaluated or recorded.
    let r = modern_call(&s, &path, 1, params(json!({}))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let first = r.json()["result"].clone();
    assert_eq!(first["resultType"], "input_required");
    assert_eq!(
        first["inputRequests"],
        json!({"ask": elicit(json!("Who?"))}),
        "the request's params render against the input"
    );
    let state = first["requestState"]
        .as_str()
        .expect("requestState")
        .to_string();
    assert_eq!(event_count(&s, &a.id).await, 0);

    // An altered state, or one presented for other arguments: -32602, not a call.
    let r = modern_call(
        &s,
        &path,
        2,
        params(json!({"requestState": format!("{state}x"),
            "inputResponses": {"ask": {"action": "accept", "content": {"name": "Eve"}}}})),
    )
    .await;
    assert_eq!(r.json()["error"]["code"], -32602, "{}", r.text);
    let mut other = params(json!({"requestState": state,
        "inputResponses": {"ask": {"action": "accept", "content": {"name": "Eve"}}}}));
    other["arguments"]["why"] = json!("Other?");
    let r = modern_call(&s, &path, 3, other).await;
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("another request"));
    // A retry that answers another key is asked again.
    let r = modern_call(
        &s,
        &path,
        4,
        params(json!({"requestState": state, "inputResponses": {"wrong": {"action": "accept"}}})),
    )
    .await;
    assert_eq!(r.json()["result"]["resultType"], "input_required");
    assert_eq!(event_count(&s, &a.id).await, 0);

    // The retry with the answer: the complete result, the one event, the one state change.
    let r = modern_call(
        &s,
        &path,
        5,
        params(json!({"requestState": state,
            "inputResponses": {"ask": {"action": "accept", "content": {"name": "Bo"}}}})),
    )
    .await;
    let done = r.json()["result"].clone();
    assert_eq!(done["resultType"], "complete");
    assert_eq!(
        done["structuredContent"],
        json!({"name": "Bo", "was": "nobody"})
    );
    let ev = s.evidence(&a.id).await;
    assert_eq!(ev["tool_events"].as_array().unwrap().len(), 1);
    assert_eq!(ev["final_state"]["tools"]["last_name"], "Bo");

    // A state from another attempt fails the MAC.
    let b = s.attempt(json!({})).await;
    let r = modern_call(
        &s,
        &b.base("tools"),
        6,
        params(json!({"requestState": state,
            "inputResponses": {"ask": {"action": "accept", "content": {"name": "Bo"}}}})),
    )
    .await;
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("failed verification"));

    // No elicitation capability: never asked; -32021 over HTTP 400; an input error event.
    let mut no_cap = params(json!({}));
    no_cap["_meta"] = meta(json!({"sampling": {}}));
    let r = modern_call(&s, &path, 7, no_cap).await;
    assert_eq!(r.status, 400, "{}", r.text);
    let e = r.json()["error"].clone();
    assert_eq!(e["code"], -32021);
    assert_eq!(
        e["data"]["requiredCapabilities"],
        json!({"elicitation": {}})
    );
    let ev = s.evidence(&a.id).await;
    let last = &ev["tool_events"][1];
    assert_eq!(last["result_status"], "input_error");
    assert!(last["arguments"]["$response"]["unavailable"]
        .as_str()
        .unwrap()
        .contains("`elicitation`"));
    assert_eq!(ev["final_state"]["tools"]["last_name"], "Bo", "no change");
}

/// Initialize a session; its id.
async fn session(s: &Server, path: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let r = s.call("POST", path, Some(&init), &[ACCEPT_BOTH]).await;
    r.header("mcp-session-id").expect("a session").to_string()
}

async fn session_post(
    s: &Server,
    path: &str,
    sid: &str,
    id: i64,
    method: &str,
    params: Value,
) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    s.call(
        "POST",
        path,
        Some(&body),
        &[ACCEPT_BOTH, ("mcp-session-id", sid)],
    )
    .await
}

async fn set_other_in(s: &Server, path: &str, sid: &str, id: i64, n: &str) -> Resp {
    let params = json!({"name": "set_other", "arguments": {"n": n}});
    session_post(s, path, sid, id, "tools/call", params).await
}

/// The JSON-RPC messages of SSE text (priming events skipped).
fn sse_messages(text: &str) -> Vec<Value> {
    parse_events(text.as_bytes())
        .into_iter()
        .filter(|(_, d)| !d.is_empty())
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect()
}

/// The JSON-RPC messages in the next chunks of a GET stream, until one arrives.
async fn stream_messages(resp: &mut reqwest::Response) -> Vec<Value> {
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(20), resp.chunk())
            .await
            .expect("a guard against hanging")
            .expect("the stream is readable")
            .expect("the stream is open");
        let messages = sse_messages(std::str::from_utf8(&chunk).unwrap());
        if !messages.is_empty() {
            return messages;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_updated_go_to_get_streams_or_the_callers_response_stream() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let path = a.base("tools");

    // Session A subscribes to `other` and listens on its GET stream.
    let sa = session(&s, &path).await;
    let r = session_post(
        &s,
        &path,
        &sa,
        1,
        "resources/subscribe",
        json!({"uri": OTHER}),
    )
    .await;
    assert_eq!(r.json()["result"], json!({}), "{}", r.text);
    let mut get = s
        .http
        .get(s.url(&path))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sa)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 200);
    assert_eq!(get.headers()["content-type"], "text/event-stream");

    // Session B (not subscribed, no GET stream) changes `other`: A hears of it, B does not.
    let sb = session(&s, &path).await;
    let r = set_other_in(&s, &path, &sb, 2, "7").await;
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{}",
        r.text
    );
    assert_eq!(
        stream_messages(&mut get).await,
        [
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": OTHER}})
        ]
    );
    let read = session_post(&s, &path, &sb, 3, "resources/read", json!({"uri": OTHER})).await;
    assert_eq!(
        read.json()["result"]["contents"][0]["text"],
        "7",
        "{}",
        read.text
    );

    // Session C subscribes to both without a GET stream and changes `other`: its notification
    // rides on its own response stream, before the result; A hears of it on its stream.
    let sc = session(&s, &path).await;
    for uri in [LAST_NAME, OTHER] {
        session_post(
            &s,
            &path,
            &sc,
            4,
            "resources/subscribe",
            json!({"uri": uri}),
        )
        .await;
    }
    let r = set_other_in(&s, &path, &sc, 5, "8").await;
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let messages = sse_messages(&r.text);
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["method"], "notifications/resources/updated");
    assert_eq!(
        messages[0]["params"]["uri"], OTHER,
        "only the resource whose state changed"
    );
    assert_eq!(messages[1]["id"], 5);
    assert_eq!(stream_messages(&mut get).await[0]["params"]["uri"], OTHER);

    // A call that changes nothing sends nothing: plain JSON for C.
    let r = set_other_in(&s, &path, &sc, 6, "8").await;
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{}",
        r.text
    );
}
