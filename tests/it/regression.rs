//! Regression tests: one per bug, each comment naming what broke. Most guard a rule that was
//! written twice and whose copies disagreed, until the layout issue (#13) left one copy.

use serde_json::{json, Value};

use crate::support::{Project, Server};

/// An operation whose rule 0 (hit by id `bad`) has no `result` of its own, so the variant
/// `o/k`'s result is rendered — and with the input `d` below, it breaks the output schema
/// (the example, which `check` runs, does not).
fn broken_rest_op() -> Value {
    json!({
        "operation_id": "put_item",
        "match": { "method": "POST", "path": "/items/{id}" },
        "input_schema": { "type": "object" },
        "output_schema": { "type": "object", "required": ["status", "data"],
                           "properties": { "data": { "type": "object", "required": ["name"] } } },
        "mock": {
            "schema_version": 1, "default_variant": "o/k",
            "variants": { "o/k": {
                "result": { "status": 200, "data": { "$input": "d" } },
                "rules": [ { "when": [ { "source": "input", "path": "id", "op": "eq", "value": "bad" } ],
                             "set_state": { "seen": true } } ]
            } },
            "examples": [ { "variant": "o/k", "input": { "id": "1", "d": { "name": "x" } },
                            "expected": { "status": 200, "data": { "name": "x" } } } ]
        }
    })
}

// What broke: the live proxy call (`proxy/pipeline.rs`) and `POST /tools/execute` (then
// `mock/check.rs::execute_with`) each built the `output_schema_violation` themselves. The
// live call named `variants/o/k/rules/0/result` — unescaped, and a rule that has no `result`
// — with the wording "the result rendered for …", while execute said
// `variants/o~1k/result` and "the rendered result does not match …". One builder now
// (`operation::call::validate_output`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_violation_reads_the_same_live_and_through_tools_execute() {
    let p = Project::new(&[("api", "rest")]);
    p.op("api", broken_rest_op());
    let s = Server::start(&p).await;
    let input = json!({"d": {"nom": "x"}});
    let live = s.call("POST", "/api/items/bad", Some(&input), &[]).await;
    assert_eq!(live.status, 500);
    assert_eq!(
        live.header("understudy-error"),
        Some("output_schema_violation")
    );
    let ev = s.evidence(&s.default_attempt()).await;
    let live_error = ev["tool_events"][0]["error"].clone();
    let body = json!({"integration": "api", "operation_id": "put_item",
                      "input": {"id": "bad", "d": {"nom": "x"}}});
    let r = s
        .call("POST", "/_understudy/api/tools/execute", Some(&body), &[])
        .await;
    let exec_error = r.json()["error"].clone();
    assert_eq!(exec_error["code"], "output_schema_violation", "{}", r.text);
    assert_eq!(
        live_error, exec_error,
        "live {live_error} vs execute {exec_error}"
    );
    assert_eq!(live_error["path"], "variants/o~1k/result");
    assert_eq!(
        live.json()["understudy_error"]["message"],
        exec_error["message"]
    );
    s.stop().await.unwrap();
}

// What broke: `proxy/pipeline.rs` walked the idempotency dot path itself and read `"01"` and
// `"+1"` as array indexes (`str::parse::<usize>`), while every other dot path
// (`mock/path.rs`) reads them as member names. The idempotency path is now a `DotPath`
// compiled with the operation: `items.01.key` names the member `01`, so an array in the
// input gives no key and two different requests are not mistaken for a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_dot_path_reads_leading_zero_and_plus_segments_as_member_names() {
    let p = Project::new(&[("api", "rest")]);
    for (id, path) in [("zero", "items.01.key"), ("plus", "items.+1.key")] {
        p.op(
            "api",
            json!({
                "operation_id": format!("create_{id}"),
                "match": { "method": "POST", "path": format!("/{id}") },
                "input_schema": { "type": "object" },
                "output_schema": { "type": "object" },
                "idempotency": { "input": path },
                "mock": {
                    "schema_version": 1, "default_variant": "ok",
                    "variants": { "ok": { "result": { "status": 201, "data": { "n": { "$input": "n" } } } } },
                    "examples": [ { "variant": "ok", "input": { "n": 1 },
                                    "expected": { "status": 201, "data": { "n": 1 } } } ]
                }
            }),
        );
    }
    let s = Server::start(&p).await;
    for id in ["zero", "plus"] {
        // The array's element 1 holds the same key in both requests; the arguments differ.
        // Read as an index, the second request reused the key with other arguments: 422.
        for n in [1, 2] {
            let body = json!({"items": [{"key": "a"}, {"key": "same"}], "n": n});
            let r = s
                .call("POST", &format!("/api/{id}"), Some(&body), &[])
                .await;
            assert_eq!(r.status, 201, "{id} call {n}: {}", r.text);
        }
        // As a member name the path does resolve: a retry with the same key replays.
        let body = json!({"items": {"01": {"key": "k"}, "+1": {"key": "k"}}, "n": 3});
        let first = s
            .call("POST", &format!("/api/{id}"), Some(&body), &[])
            .await;
        assert_eq!(first.status, 201, "{}", first.text);
        let other = json!({"items": {"01": {"key": "k"}, "+1": {"key": "k"}}, "n": 4});
        let r = s
            .call("POST", &format!("/api/{id}"), Some(&other), &[])
            .await;
        assert_eq!(
            r.status, 422,
            "{id}: the same key with other arguments: {}",
            r.text
        );
    }
    s.stop().await.unwrap();
}

// What broke: the MCP era rule was written twice. The replay endpoint (`profile/mcp`) reads
// a `_meta` protocol version that names a session-era version as session era (some clients
// attach `_meta` to every request), and needs the `MCP-Protocol-Version` header to name a
// 2026-or-later version; forwarded tool calls (`proxy/forward/mcp.rs`) called any `_meta`
// version stateless, and ignored a date-shaped future version in the header. One rule now,
// `profile::mcp::is_stateless_era`, used by both.
#[test]
fn mcp_era_rule_is_one_rule_for_replay_and_forwarded_calls() {
    use hyper::http::{HeaderMap, HeaderValue};
    use understudy::profile::mcp::is_stateless_era;
    let params = |v: &str| {
        json!({"name": "lookup", "_meta": {"io.modelcontextprotocol/protocolVersion": v}})
            .as_object()
            .cloned()
            .unwrap()
    };
    let none = HeaderMap::new();
    // A session-era client that attaches `_meta` everywhere stays in the session era.
    let session = params("2025-06-18");
    assert!(!is_stateless_era(Some("tools/call"), Some(&session), &none));
    let modern = params("2026-07-28");
    assert!(is_stateless_era(Some("tools/call"), Some(&modern), &none));
    // A header naming a later, date-shaped version is stateless era too.
    let mut h = HeaderMap::new();
    h.insert(
        "mcp-protocol-version",
        HeaderValue::from_static("2027-01-01"),
    );
    assert!(is_stateless_era(Some("tools/call"), None, &h));
    assert!(!is_stateless_era(Some("initialize"), Some(&modern), &h));
}
