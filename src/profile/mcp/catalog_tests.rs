//! [`super::catalog`] through [`McpEndpoint::handle`]: resources, templates, prompts,
//! completion, subscribe and logging in both eras, JSON and SSE answers.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, Method};
use serde_json::{json, Value};

use super::super::*;
use super::*;
use crate::error::InputError;

#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<(String, Value)>>,
}

impl McpBackend for Fake {
    fn tools(&self) -> Vec<ToolInfo> {
        Vec::new()
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
                .push((name.into(), arguments.clone()));
            match name {
                "text" => ToolCallOutcome::Ok(
                    json!({"contents": [{"uri": "test://text", "text": "hello"}]}),
                ),
                "item" => ToolCallOutcome::Ok(
                    json!({"contents": [{"uri": "test://items/x", "text": arguments["id"]}]}),
                ),
                "greet" if arguments.get("who").is_none() => {
                    ToolCallOutcome::InputError(InputError::new("`who` is required"))
                }
                "greet" => ToolCallOutcome::Ok(json!({"messages": [
                    {"role": "user", "content": {"type": "text", "text": arguments["who"]}}]})),
                "noisy" => ToolCallOutcome::Ok(json!({"ok": true})),
                _ => ToolCallOutcome::UnknownTool,
            }
        })
    }
    fn server_name(&self) -> String {
        "understudy-x".into()
    }
    fn take_notifications(&self) -> Vec<Value> {
        vec![
            json!({"log": {"level": "info", "data": "started"}}),
            json!({"progress": {"progress": 1, "total": 2}}),
        ]
    }
    fn catalog(&self) -> Catalog {
        Catalog {
            resources: vec![
                ResourceInfo {
                    name: "text".into(),
                    uri: Some("test://text".into()),
                    mime_type: Some("text/plain".into()),
                    size: Some(5),
                    ..Default::default()
                },
                ResourceInfo {
                    name: "item".into(),
                    uri_template: Some("test://items/{id}".into()),
                    completions: [(
                        "id".to_string(),
                        vec!["apple".into(), "apricot".into(), "pear".into()],
                    )]
                    .into(),
                    ..Default::default()
                },
            ],
            prompts: vec![PromptInfo {
                name: "greet".into(),
                description: Some("Say hello".into()),
                arguments: vec![json!({"name": "who", "required": true})],
                completions: [("who".to_string(), vec!["Ada".into(), "Alan".into()])].into(),
                ..Default::default()
            }],
        }
    }
}

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

fn req(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
}

async fn session(ep: &McpEndpoint, b: &Fake) -> String {
    let r = ep
        .handle(
            &Method::POST,
            &headers(&[("accept", "application/json, text/event-stream"), ("content-type", "application/json")]),
            req("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
                .to_string()
                .as_bytes(),
            b,
        )
        .await;
    let caps = &r.messages()[0]["result"]["capabilities"];
    assert!(
        caps["resources"].is_object() && caps["prompts"].is_object(),
        "{caps}"
    );
    r.header("mcp-session-id").unwrap().to_string()
}

/// One request in the session era (`accept` as given) → its single JSON-RPC message.
async fn call(
    ep: &McpEndpoint,
    b: &Fake,
    sid: &str,
    accept: &str,
    method: &str,
    params: Value,
) -> (McpResponse, Value) {
    let h = headers(&[
        ("accept", accept),
        ("content-type", "application/json"),
        ("mcp-session-id", sid),
    ]);
    let r = ep
        .handle(
            &Method::POST,
            &h,
            req(method, params).to_string().as_bytes(),
            b,
        )
        .await;
    let m = r.messages();
    assert_eq!(m.len(), 1, "{r:?}");
    (r.clone(), m[0].clone())
}

/// One request in the 2026-07-28 era.
async fn modern(
    ep: &McpEndpoint,
    b: &Fake,
    method: &str,
    name: Option<&str>,
    mut params: Value,
) -> (McpResponse, Value) {
    params["_meta"] = json!({META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}});
    let mut pairs = vec![
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(n) = name {
        pairs.push(("mcp-name", n));
    }
    let r = ep
        .handle(
            &Method::POST,
            &headers(&pairs),
            req(method, params).to_string().as_bytes(),
            b,
        )
        .await;
    let m = r.messages();
    (r.clone(), m[0].clone())
}

const JSON: &str = "application/json, text/event-stream";
const SSE: &str = "text/event-stream";

#[tokio::test]
async fn resources_in_the_session_era_json_and_sse() {
    let (ep, b) = (McpEndpoint::new(false), Fake::default());
    let sid = session(&ep, &b).await;
    for accept in [JSON, SSE] {
        let (r, m) = call(&ep, &b, &sid, accept, "resources/list", json!({})).await;
        assert_eq!(
            r.header("content-type")
                .unwrap()
                .starts_with("text/event-stream"),
            accept == SSE
        );
        assert_eq!(
            m["result"],
            json!({"resources": [{"uri": "test://text", "name": "text", "mimeType": "text/plain", "size": 5}]})
        );
        let (_, m) = call(&ep, &b, &sid, accept, "resources/templates/list", json!({})).await;
        assert_eq!(
            m["result"],
            json!({"resourceTemplates": [{"uriTemplate": "test://items/{id}", "name": "item"}]})
        );
        let (_, m) = call(
            &ep,
            &b,
            &sid,
            accept,
            "resources/read",
            json!({"uri": "test://text"}),
        )
        .await;
        assert_eq!(
            m["result"],
            json!({"contents": [{"uri": "test://text", "text": "hello"}]})
        );
        let (_, m) = call(
            &ep,
            &b,
            &sid,
            accept,
            "resources/read",
            json!({"uri": "test://items/a%20b"}),
        )
        .await;
        assert_eq!(m["result"]["contents"][0]["text"], "a b");
        let (_, m) = call(
            &ep,
            &b,
            &sid,
            accept,
            "resources/read",
            json!({"uri": "test://nope"}),
        )
        .await;
        assert_eq!(m["error"]["code"], RESOURCE_NOT_FOUND);
        assert_eq!(m["error"]["data"]["uri"], "test://nope");
    }
    let calls = b.calls.lock().unwrap().clone();
    assert_eq!(calls[0], ("text".to_string(), json!({})));
    assert_eq!(calls[1], ("item".to_string(), json!({"id": "a b"})));
    let (_, m) = call(
        &ep,
        &b,
        &sid,
        JSON,
        "resources/subscribe",
        json!({"uri": "test://text"}),
    )
    .await;
    assert_eq!(m["result"], json!({}));
    assert_eq!(ep.extras.subscribed(), ["test://text"]);
    let (_, m) = call(
        &ep,
        &b,
        &sid,
        JSON,
        "resources/unsubscribe",
        json!({"uri": "test://text"}),
    )
    .await;
    assert_eq!(m["result"], json!({}));
    assert!(ep.extras.subscribed().is_empty());
    let (_, m) = call(
        &ep,
        &b,
        &sid,
        JSON,
        "resources/subscribe",
        json!({"uri": "test://nope"}),
    )
    .await;
    assert_eq!(m["error"]["code"], RESOURCE_NOT_FOUND);
}

#[tokio::test]
async fn prompts_completion_and_logging_in_the_session_era() {
    let (ep, b) = (McpEndpoint::new(true), Fake::default());
    let sid = session(&ep, &b).await;
    let (r, m) = call(&ep, &b, &sid, JSON, "prompts/list", json!({})).await;
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/event-stream"),
        "mcp_sse"
    );
    assert_eq!(
        m["result"],
        json!({"prompts": [{"name": "greet", "description": "Say hello", "arguments": [{"name": "who", "required": true}]}]})
    );
    let (_, m) = call(
        &ep,
        &b,
        &sid,
        JSON,
        "prompts/get",
        json!({"name": "greet", "arguments": {"who": "Ada"}}),
    )
    .await;
    assert_eq!(m["result"]["messages"][0]["content"]["text"], "Ada");
    let (_, m) = call(&ep, &b, &sid, JSON, "prompts/get", json!({"name": "greet"})).await;
    assert_eq!(m["error"]["code"], INVALID_PARAMS);
    assert!(
        m["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`who` is required"),
        "{m}"
    );
    let (_, m) = call(&ep, &b, &sid, JSON, "prompts/get", json!({"name": "nope"})).await;
    assert_eq!(m["error"]["code"], INVALID_PARAMS);
    let (_, m) = call(&ep, &b, &sid, JSON, "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "A"}})).await;
    assert_eq!(
        m["result"],
        json!({"completion": {"values": ["Ada", "Alan"], "total": 2, "hasMore": false}})
    );
    let (_, m) = call(&ep, &b, &sid, JSON, "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "test://items/{id}"}, "argument": {"name": "id", "value": "ap"}})).await;
    assert_eq!(
        m["result"]["completion"]["values"],
        json!(["apple", "apricot"])
    );
    let (_, m) = call(&ep, &b, &sid, JSON, "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "who", "value": ""}})).await;
    assert_eq!(m["error"]["code"], INVALID_PARAMS);
    assert!(ep.extras.log_passes("debug"));
    let (_, m) = call(
        &ep,
        &b,
        &sid,
        JSON,
        "logging/setLevel",
        json!({"level": "warning"}),
    )
    .await;
    assert_eq!(m["result"], json!({}));
    assert!(!ep.extras.log_passes("info") && ep.extras.log_passes("error"));
    let (_, m) = call(
        &ep,
        &b,
        &sid,
        JSON,
        "logging/setLevel",
        json!({"level": "loud"}),
    )
    .await;
    assert_eq!(m["error"]["code"], INVALID_PARAMS);
}

#[tokio::test]
async fn the_stateless_era_serves_the_same_with_cache_fields() {
    let (ep, b) = (McpEndpoint::new(false), Fake::default());
    let (_, m) = modern(&ep, &b, "resources/list", None, json!({})).await;
    assert_eq!(m["result"]["resultType"], "complete");
    assert_eq!(m["result"]["cacheScope"], "private");
    assert_eq!(m["result"]["resources"][0]["uri"], "test://text");
    let (_, m) = modern(
        &ep,
        &b,
        "resources/read",
        Some("test://items/9"),
        json!({"uri": "test://items/9"}),
    )
    .await;
    assert_eq!(m["result"]["contents"][0]["text"], "9");
    assert!(m["result"]["ttlMs"].is_number());
    let (r, _) = modern(
        &ep,
        &b,
        "resources/read",
        Some("test://other"),
        json!({"uri": "test://items/9"}),
    )
    .await;
    assert_eq!(r.status, 400, "Mcp-Name is checked");
    let (_, m) = modern(
        &ep,
        &b,
        "prompts/get",
        Some("greet"),
        json!({"name": "greet", "arguments": {"who": "Al"}}),
    )
    .await;
    assert_eq!(m["result"]["resultType"], "complete");
    assert_eq!(m["result"]["messages"][0]["content"]["text"], "Al");
    let (_, m) = modern(&ep, &b, "prompts/list", None, json!({})).await;
    assert_eq!(m["result"]["prompts"][0]["name"], "greet");
    let (r, m) = modern(&ep, &b, "logging/setLevel", None, json!({"level": "info"})).await;
    assert_eq!(
        (r.status, m["error"]["code"].as_i64()),
        (404, Some(METHOD_NOT_FOUND))
    );
}

#[tokio::test]
async fn lists_are_paginated_with_opaque_cursors() {
    let (ep, b) = (McpEndpoint::new(false).with_page_size(1), Fake::default());
    let sid = session(&ep, &b).await;
    let (_, m) = call(&ep, &b, &sid, JSON, "resources/templates/list", json!({})).await;
    assert!(m["result"].get("nextCursor").is_none());
    let b2 = Fake::default();
    let (_, m) = call(
        &ep,
        &b2,
        &sid,
        JSON,
        "prompts/list",
        json!({"cursor": "bogus"}),
    )
    .await;
    assert_eq!(m["error"]["code"], INVALID_PARAMS);
    let items: Vec<(String, Value)> = (0..3).map(|i| (format!("n{i}"), json!(i))).collect();
    let p1 = page("k", items.clone(), None, 2).unwrap();
    assert_eq!(p1["k"], json!([0, 1]));
    let c = p1["nextCursor"].as_str().unwrap();
    let p2 = page("k", items.clone(), Some(c), 2).unwrap();
    assert_eq!(p2["k"], json!([2]));
    assert!(p2.get("nextCursor").is_none());
    assert!(
        page("k", items[..2].to_vec(), Some(c), 2).is_err(),
        "bound to the name list"
    );
}

#[tokio::test]
async fn declared_notifications_precede_the_result_on_sse() {
    let (ep, b) = (McpEndpoint::new(false), Fake::default());
    let sid = session(&ep, &b).await;
    let h = headers(&[
        ("accept", JSON),
        ("content-type", "application/json"),
        ("mcp-session-id", &sid),
    ]);
    let body = req(
        "tools/call",
        json!({"name": "noisy", "_meta": {"progressToken": 5}}),
    );
    let r = ep
        .handle(&Method::POST, &h, body.to_string().as_bytes(), &b)
        .await;
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/event-stream"),
        "{r:?}"
    );
    let m = r.messages();
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(m[0]["method"], "notifications/message");
    assert_eq!(
        m[1]["params"],
        json!({"progressToken": 5, "progress": 1, "total": 2})
    );
    assert_eq!(m[2]["id"], 7);
    // A JSON-only client gets the result alone; a level above `info` drops the log.
    let h2 = headers(&[
        ("accept", "application/json"),
        ("content-type", "application/json"),
        ("mcp-session-id", &sid),
    ]);
    let r = ep
        .handle(&Method::POST, &h2, body.to_string().as_bytes(), &b)
        .await;
    assert_eq!(r.messages().len(), 1);
    call(
        &ep,
        &b,
        &sid,
        JSON,
        "logging/setLevel",
        json!({"level": "error"}),
    )
    .await;
    let r = ep
        .handle(&Method::POST, &h, body.to_string().as_bytes(), &b)
        .await;
    let m = r.messages();
    assert_eq!(m.len(), 2);
    assert_eq!(m[0]["method"], "notifications/progress");
}
