//! Regression tests: one per bug, each comment naming what broke. Most guard a rule that was
//! written twice and whose copies disagreed, until the layout issue (#13) left one copy.

use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    // A real handshake (it carries `protocolVersion`) is session era whatever else it
    // carries; an `initialize` with only a 2026 `_meta` is a stateless request for a method
    // 2026-07-28 removed (404, the conformance suite's server-stateless scenario).
    let mut handshake = modern.clone();
    handshake.insert("protocolVersion".into(), json!("2026-07-28"));
    assert!(!is_stateless_era(Some("initialize"), Some(&handshake), &h));
    assert!(is_stateless_era(Some("initialize"), Some(&modern), &h));
}

/// A real MCP server (rmcp, session era, SSE answers) behind a recorder: each request's
/// JSON-RPC method and the protocol version it carried (`initialize`'s proposed
/// `protocolVersion`, else the `MCP-Protocol-Version` header; `-` when none).
async fn recording_mcp_server(seen: Arc<Mutex<Vec<(String, String)>>>) -> std::net::SocketAddr {
    use http_body_util::{BodyExt, Full};
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    use rmcp::{ErrorData, RoleServer, ServerHandler};

    #[derive(Clone)]
    struct Real;
    impl ServerHandler for Real {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }
        async fn list_tools(
            &self,
            _r: Option<PaginatedRequestParams>,
            _c: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let tool: Tool = serde_json::from_value(json!({
                "name": "lookup", "inputSchema": { "type": "object" },
                "annotations": { "readOnlyHint": true } }))
            .unwrap();
            Ok(ListToolsResult::with_all_items(vec![tool]))
        }
        async fn call_tool(
            &self,
            _r: CallToolRequestParams,
            _c: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            Ok(CallToolResult::structured(json!({ "found": true })).into())
        }
    }

    let service = StreamableHttpService::new(
        || Ok(Real),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let rmcp = hyper_util::service::TowerToHyperService::new(service.clone());
            let seen = seen.clone();
            let svc =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let rmcp = rmcp.clone();
                    let seen = seen.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let bytes = body.collect().await.unwrap().to_bytes();
                        let msg: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                        let method = msg["method"].as_str().unwrap_or(parts.method.as_str());
                        let version = match msg.pointer("/params/protocolVersion") {
                            Some(v) if method == "initialize" => {
                                v.as_str().unwrap_or("?").to_string()
                            }
                            _ => parts
                                .headers
                                .get("mcp-protocol-version")
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("-")
                                .to_string(),
                        };
                        seen.lock().unwrap().push((method.to_string(), version));
                        let req = hyper::Request::from_parts(parts, Full::new(bytes));
                        hyper::service::Service::call(&rmcp, req).await
                    }
                });
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

// What broke: two MCP clients negotiated differently with the same real server. `discover`
// (`src/discover.rs`) tried `server/discover` (2026-07-28) first and then proposed
// `2025-11-25` in `initialize`; the on-demand real call of `POST /tools/execute` with
// `target: "upstream"` (then `proxy/forward/execute.rs`) went straight to `initialize`
// proposing `2025-06-18`, so a dual-era server (rmcp speaks 2026-07-28) saw one understudy
// speak two protocol versions.
// One client now (`upstream::mcp_client`), used by both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_and_execute_upstream_negotiate_the_same_mcp_version() {
    use understudy::author::discover::{discover_tools, EraChoice};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let addr = recording_mcp_server(seen.clone()).await;
    let url = format!("http://{addr}/mcp");

    let upstream = understudy::upstream::Upstream::new(None, Duration::from_secs(10)).unwrap();
    let found = discover_tools(&upstream, &url, EraChoice::Auto)
        .await
        .unwrap();
    let negotiated = found.protocol_version.clone();
    let by_discover = std::mem::take(&mut *seen.lock().unwrap());

    let p = Project::new(&[("remote", "mcp")]);
    p.write_config(json!({ "integrations": { "remote": {
        "profile": "mcp", "operations": "mocks/remote", "upstream": url } } }));
    p.op(
        "remote",
        json!({ "operation_id": "lookup", "annotations": { "readOnlyHint": true },
                "input_schema": { "type": "object" }, "output_schema": { "type": "object" } }),
    );
    let s = Server::start(&p).await;
    let body = json!({"integration": "remote", "operation_id": "lookup", "input": {},
                      "target": "upstream"});
    let r = s
        .call("POST", "/_understudy/api/tools/execute", Some(&body), &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["error"], Value::Null, "{}", r.text);
    assert_eq!(r.json()["result"], json!({"found": true}), "{}", r.text);
    let by_execute = std::mem::take(&mut *seen.lock().unwrap());
    s.stop().await.unwrap();

    // The same handshake, then the same version on the request that does the work (discover
    // also lists resources, templates and prompts).
    let handshake = |v: &[(String, String)]| -> Vec<(String, String)> {
        v.iter()
            .filter(|(m, _)| !m.starts_with("tools/") && !m.ends_with("/list"))
            .cloned()
            .collect()
    };
    assert_eq!(
        handshake(&by_discover),
        handshake(&by_execute),
        "discover {by_discover:?} vs execute {by_execute:?}"
    );
    let version_of = |v: &[(String, String)], method: &str| {
        v.iter()
            .find(|(m, _)| m == method)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {method} in {v:?}"))
    };
    assert_eq!(version_of(&by_discover, "tools/list"), negotiated);
    assert_eq!(version_of(&by_execute, "tools/call"), negotiated);
}

// What broke: a harness error's message quoted the request line, and an unmatched call's
// evidence recorded its path — both with the `/~ust_…` capability token in it, so the token
// reached the evidence, `understudy report`'s JUnit/HTML files (CI artifacts) and the logs.
// The token is now spelled `/~[token]` wherever a request path is named (`Request::line`,
// `Request::describe`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attempt_token_never_reaches_an_error_message_or_the_evidence() {
    let p = Project::new(&[("api", "rest")]);
    p.op(
        "api",
        crate::support::rest_op("get_item", "GET", "/items/{id}", None),
    );
    let s = Server::start(&p).await;
    let a = s.attempt(json!({"test_run_id": "tok"})).await;
    let r = s
        .call(
            "GET",
            &format!("/~{}/api/nothing/here?x=1", a.token),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 500, "{}", r.text);
    assert!(
        !r.text.contains(&a.token),
        "answer names the token: {}",
        r.text
    );
    assert!(r.text.contains("/~[token]/api/nothing/here"), "{}", r.text);
    let ev = s.evidence(&a.id).await;
    let text = ev.to_string();
    assert!(
        !text.contains(&a.token),
        "the evidence holds the token: {text}"
    );
    assert_eq!(ev["tool_events"][0]["result_status"], "harness_error");
}

// What broke (issue 27): `drift.rs` and `admin/execute_upstream.rs` each built the request an
// input stands for, and disagreed on a `*` path segment: drift refused every one, execute
// sent Salesforce's API version. One builder now (`upstream::request::build`): the `*` of a
// `salesforce` operation (the API version recorded drafts templatize) is `v62.0`; any other
// profile's `*` cannot be built, and says which segment.
#[test]
fn a_star_segment_is_the_salesforce_api_version_and_nothing_else() {
    use understudy::contract::MatchSpec;
    use understudy::contract::ProfileKind;
    use understudy::upstream::request::{build, SALESFORCE_API_VERSION};
    let spec: MatchSpec = serde_json::from_value(
        json!({"method": "GET", "path": "/services/data/*/query", "query": {"q": "{q}"}}),
    )
    .unwrap();
    let input = json!({"q": "SELECT Id FROM Contact"});
    let sf = build(&spec, &input, Some(ProfileKind::Salesforce)).unwrap();
    assert_eq!(SALESFORCE_API_VERSION, "v62.0");
    assert_eq!(sf.path, "/services/data/v62.0/query");
    assert_eq!(
        sf.rest(),
        "/services/data/v62.0/query?q=SELECT%20Id%20FROM%20Contact"
    );
    for other in [Some(ProfileKind::Rest), None] {
        let e = build(&spec, &input, other).unwrap_err();
        assert!(e.contains("path segment 3") && e.contains("`*`"), "{e}");
    }
}

// What broke (issue 27): the two builders disagreed on which methods carry the rest of the
// input as a JSON body — drift sent one with DELETE, execute sent one with OPTIONS. One rule
// now: GET, HEAD, DELETE and OPTIONS send none; every other method sends the input members
// that are not captures.
#[test]
fn get_head_delete_and_options_send_no_body() {
    use understudy::contract::MatchSpec;
    use understudy::upstream::request::{build, carries_body};
    let input = json!({"id": "7", "name": "Ada"});
    for (method, body) in [
        ("GET", None),
        ("HEAD", None),
        ("DELETE", None),
        ("OPTIONS", None),
        ("POST", Some(json!({"name": "Ada"}))),
        ("PUT", Some(json!({"name": "Ada"}))),
        ("PATCH", Some(json!({"name": "Ada"}))),
    ] {
        let spec: MatchSpec =
            serde_json::from_value(json!({"method": method, "path": "/items/{id}"})).unwrap();
        let r = build(&spec, &input, None).unwrap();
        assert_eq!(r.path, "/items/7");
        assert_eq!(r.body, body, "{method}");
        assert_eq!(carries_body(method), body.is_some(), "{method}");
        let h = r.header_map(None).unwrap();
        assert_eq!(h.contains_key("content-type"), body.is_some(), "{method}");
    }
}

// What broke (issue 27): the two diffs named places differently (`$.a[0]` in drift's report,
// `/a/0` in the execute API's `diff`), disagreed on arrays of different lengths (drift: one
// `.length` value, execute: each element), and execute compared a mock envelope's `headers`
// with a real answer's envelope that never has any. One walk now (`upstream::diff`): each
// difference carries both notations of one place, an element only one side has is `added`
// or `removed` at its index, and an envelope's `status` and `data` are compared, not its
// `headers`.
#[test]
fn one_diff_names_each_place_in_both_notations() {
    use understudy::upstream::diff::{diff, diff_value, Kind};
    let mock = json!({"status": 200, "headers": {"ETag": "x"},
                      "data": {"list": [1, 2], "a/b": {"~k": 1}}});
    let real = json!({"status": 200, "data": {"list": [1], "a/b": {"~k": "1"}}});
    let d = diff(&mock, &real, true);
    let places: Vec<(&str, &str, Kind)> = d
        .iter()
        .map(|d| (d.path.as_str(), d.pointer.as_str(), d.kind))
        .collect();
    assert_eq!(
        places,
        vec![
            (
                "$.data[\"a/b\"][\"~k\"]",
                "/data/a~1b/~0k",
                Kind::ChangedType
            ),
            ("$.data.list[1]", "/data/list/1", Kind::Removed),
        ]
    );
    // Shapes only: an element only one side has is a value difference, not reported.
    assert_eq!(diff(&mock, &real, false).len(), 1);
    // Two whole values (an MCP tool's output): the root is `$`, `/`.
    let d = diff_value(&json!(1), &json!(2), true);
    assert_eq!((d[0].path.as_str(), d[0].pointer.as_str()), ("$", "/"));
    assert_eq!(
        d[0].to_api_json(),
        json!({"path": "/", "mock": 1, "upstream": 2})
    );
}

// What broke (issue 27): drift's real-answer envelope kept the body of a 204 or 304 as
// `data`, execute's left it out. One conversion now (`upstream::answer::envelope`), with the
// rule record mode and the rendering of a mock follow: 1xx, 204 and 304 carry no content.
#[test]
fn a_no_content_answer_has_no_data_in_its_envelope() {
    use understudy::upstream::answer::envelope;
    assert_eq!(envelope(204, br#"{"x":1}"#), json!({"status": 204}));
    assert_eq!(envelope(304, b"stale"), json!({"status": 304}));
    assert_eq!(
        envelope(200, br#"{"x":1}"#),
        json!({"status": 200, "data": {"x": 1}})
    );
    assert_eq!(envelope(200, b"  "), json!({"status": 200}));
    assert_eq!(
        envelope(404, b"gone"),
        json!({"status": 404, "data": "gone"})
    );
}
