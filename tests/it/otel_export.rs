//! Traces out (docs/src/guides/traces.md#traces-out): with `"otel": {"endpoint": …}` every
//! served call is an `execute_tool` span under the caller's `traceparent` span, and an
//! ended attempt is a span with its verdict and one evaluation event per contract check —
//! received here by a loopback OTLP/HTTP receiver that decodes the protobuf bodies with
//! `opentelemetry-proto`'s own types. A collector that is down or hangs costs a counter in
//! `/metrics`, never an answer's latency.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Value};

use crate::otel::project;
use crate::support::{self, Server};

/// One export request as the receiver got it: its head, its raw body, and its spans with
/// their resource's `service.name`.
pub(crate) struct Export {
    pub head: String,
    pub body: Vec<u8>,
    pub spans: Vec<(String, Span)>,
}

/// A loopback OTLP/HTTP receiver on a free port ([`support::otlp_collector`]): every
/// export decoded and handed to the channel.
pub(crate) async fn receiver() -> (u16, tokio::sync::mpsc::UnboundedReceiver<Export>) {
    let mut c = support::otlp_collector(None).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some((head, body)) = c.rx.recv().await {
            let req = ExportTraceServiceRequest::decode(&body[..])
                .unwrap_or_else(|e| panic!("not an ExportTraceServiceRequest ({e}): {head}"));
            let mut spans = Vec::new();
            for rs in req.resource_spans {
                let service = rs
                    .resource
                    .as_ref()
                    .and_then(|r| str_attr(&r.attributes, "service.name"))
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for s in ss.spans {
                        spans.push((service.clone(), s));
                    }
                }
            }
            let _ = tx.send(Export { head, body, spans });
        }
    });
    (c.port, rx)
}

/// The spans of the exports `rx` gets until there are `n` (at most 15 s).
pub(crate) async fn spans_until(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Export>,
    n: usize,
) -> (Vec<Export>, Vec<(String, Span)>) {
    let mut exports = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let all: Vec<(String, Span)> = exports
            .iter()
            .flat_map(|e: &Export| e.spans.clone())
            .collect();
        if all.len() >= n {
            return (exports, all);
        }
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) => exports.push(e),
            _ => panic!(
                "the receiver got {} spans: {:?}",
                all.len(),
                all.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
            ),
        }
    }
}

pub(crate) fn attr<'a>(kvs: &'a [KeyValue], k: &str) -> Option<&'a Any> {
    kvs.iter()
        .find(|kv| kv.key == k)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

pub(crate) fn str_attr(kvs: &[KeyValue], k: &str) -> Option<String> {
    match attr(kvs, k) {
        Some(Any::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

pub(crate) fn int_attr(kvs: &[KeyValue], k: &str) -> Option<i64> {
    match attr(kvs, k) {
        Some(Any::IntValue(i)) => Some(*i),
        _ => None,
    }
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const AGENT_SPAN_1: &str = "00f067aa0ba902b7";
const AGENT_SPAN_2: &str = "00f067aa0ba902b8";
const SECRET: &str = "hunter2-s3cr3t-value";

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[tokio::test]
async fn every_call_is_a_tool_span_under_the_callers_span_and_the_attempt_carries_the_verdict() {
    let (port, mut rx) = receiver().await;
    let p = project();
    p.write_config(json!({
        "contracts": "contracts",
        "otel": {
            "endpoint": format!("http://127.0.0.1:{port}"),
            "service_name": "understudy-under-test",
            "content": true
        }
    }));
    let s = Server::start(&p).await;
    let a = s.attempt(json!({"contracts": ["booking"]})).await;
    let tp = |span: &str| format!("00-{TRACE}-{span}-01");
    let r = s
        .call(
            "GET",
            &format!("{}/contacts?phone=1", a.base("crm")),
            None,
            &[
                ("traceparent", &tp(AGENT_SPAN_1)),
                ("authorization", &format!("Bearer {SECRET}")),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = s
        .call(
            "POST",
            &format!("{}/appointments", a.base("crm")),
            Some(&json!({"when": "tomorrow", "password": SECRET})),
            &[("traceparent", &tp(AGENT_SPAN_2))],
        )
        .await;
    assert!(r.status < 500, "{}", r.text);
    // A call without a traceparent: a root span of its own trace.
    let r = s
        .call(
            "GET",
            &format!("{}/contacts?phone=1", a.base("crm")),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200);
    s.end_attempt(&a.id).await;
    let app = s.app.clone();
    // The shutdown flushes the queue (and waits for the attempt span).
    s.stop().await.unwrap();

    let (exports, spans) = spans_until(&mut rx, 4).await;
    assert_eq!(
        spans.len(),
        4,
        "{:?}",
        spans.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
    );
    for e in &exports {
        assert!(e.head.starts_with("post /v1/traces "), "{}", e.head);
        assert!(
            e.head.contains("content-type: application/x-protobuf"),
            "{}",
            e.head
        );
        // No secret anywhere in what left the process.
        let raw = String::from_utf8_lossy(&e.body);
        assert!(
            !raw.contains(SECRET),
            "a secret reached the collector: {raw}"
        );
    }
    assert!(spans.iter().all(|(svc, _)| svc == "understudy-under-test"));
    let by_name = |n: &str| -> Vec<&Span> {
        spans
            .iter()
            .map(|(_, s)| s)
            .filter(|s| s.name == n)
            .collect()
    };

    let lookups = by_name("execute_tool lookup");
    assert_eq!(lookups.len(), 2);
    let lookup = lookups
        .iter()
        .find(|s| hex(&s.trace_id) == TRACE)
        .expect("the lookup with a traceparent is in the agent's trace");
    assert_eq!(hex(&lookup.parent_span_id), AGENT_SPAN_1);
    assert_eq!(lookup.kind, 2, "SPAN_KIND_SERVER");
    let at = &lookup.attributes;
    assert_eq!(
        str_attr(at, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(str_attr(at, "gen_ai.tool.name").as_deref(), Some("lookup"));
    assert_eq!(
        str_attr(at, "openinference.span.kind").as_deref(),
        Some("TOOL")
    );
    assert_eq!(
        str_attr(at, "understudy.attempt_id").as_deref(),
        Some(a.id.as_str())
    );
    assert_eq!(
        str_attr(at, "understudy.operation").as_deref(),
        Some("lookup")
    );
    assert_eq!(
        str_attr(at, "understudy.result_status").as_deref(),
        Some("ok")
    );
    assert_eq!(str_attr(at, "understudy.mode").as_deref(), Some("replay"));
    assert_eq!(int_attr(at, "understudy.sequence"), Some(1));
    // The revision the attempt pinned.
    assert_eq!(
        int_attr(at, "understudy.revision"),
        a.body["pins"]["crm/lookup"]["revision"].as_i64(),
        "{}",
        a.body
    );
    assert!(str_attr(at, "gen_ai.tool.call.id").is_some_and(|c| !c.is_empty()));
    // `"content": true`: the arguments and the result, as JSON text.
    let args: Value =
        serde_json::from_str(&str_attr(at, "gen_ai.tool.call.arguments").unwrap()).unwrap();
    assert_eq!(args["phone"], "1", "{args}");
    assert!(str_attr(at, "gen_ai.tool.call.result")
        .unwrap()
        .contains("c_1"));
    assert!(lookup.end_time_unix_nano >= lookup.start_time_unix_nano);
    let root = lookups.iter().find(|s| hex(&s.trace_id) != TRACE).unwrap();
    assert!(
        root.parent_span_id.is_empty(),
        "no traceparent: a root span"
    );

    let book = by_name("execute_tool book");
    assert_eq!(book.len(), 1);
    let book = book[0];
    assert_eq!(hex(&book.trace_id), TRACE);
    assert_eq!(hex(&book.parent_span_id), AGENT_SPAN_2);
    assert_eq!(int_attr(&book.attributes, "understudy.sequence"), Some(2));
    let args = str_attr(&book.attributes, "gen_ai.tool.call.arguments").unwrap();
    assert!(
        args.contains("password") && !args.contains(SECRET),
        "{args}"
    );

    // The attempt span: in the agent's trace under its first span, the verdict (the agent
    // sent no spans: its agent_trace checks are inconclusive, so the verdict fails), one
    // evaluation event per check and one for the verdict.
    let att = by_name("understudy attempt");
    assert_eq!(att.len(), 1);
    let att = att[0];
    assert_eq!(hex(&att.trace_id), TRACE);
    assert_eq!(hex(&att.parent_span_id), AGENT_SPAN_1);
    assert_eq!(
        str_attr(&att.attributes, "understudy.verdict").as_deref(),
        Some("fail")
    );
    assert_eq!(int_attr(&att.attributes, "understudy.calls"), Some(3));
    let evals: Vec<(String, String)> = att
        .events
        .iter()
        .map(|e| {
            assert_eq!(e.name, "gen_ai.evaluation.result");
            (
                str_attr(&e.attributes, "gen_ai.evaluation.name").unwrap(),
                str_attr(&e.attributes, "gen_ai.evaluation.score.label").unwrap(),
            )
        })
        .collect();
    for check in [
        "reported_calls_arrived",
        "arrived_calls_reported",
        "claims_match_results",
        "no_unknown_tools",
    ] {
        let name = format!("booking:agent_trace.{check}");
        assert!(
            evals.contains(&(name.clone(), "inconclusive".into())),
            "{name} missing: {evals:?}"
        );
    }
    assert_eq!(
        evals.last().unwrap(),
        &("understudy.verdict".into(), "fail".into())
    );
    assert_eq!(
        att.status.as_ref().map(|s| s.code),
        Some(2),
        "STATUS_CODE_ERROR"
    );

    let otel = app.otel.as_ref().unwrap();
    assert_eq!(otel.exported(), 4);
    assert_eq!(otel.dropped(), 0);
}

/// `understudy_otel_spans_dropped_total` of `/metrics`.
async fn dropped(s: &Server) -> Option<u64> {
    let m = s.call("GET", "/_understudy/api/metrics", None, &[]).await;
    assert_eq!(m.status, 200, "{}", m.text);
    m.text
        .lines()
        .find_map(|l| l.strip_prefix("understudy_otel_spans_dropped_total "))
        .map(|n| n.trim().parse().unwrap())
}

/// A collector that is down (connection refused) and one that accepts and never answers:
/// every call is answered at once all the same, and the spans they cost are counted.
#[tokio::test]
async fn a_dead_or_hanging_collector_costs_a_counter_never_latency() {
    // Down: a port that was just free.
    let dead_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    // Hanging: accepts, reads, never answers (the export times out after 5 s).
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hang_port = hang.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = hang.accept().await {
            held.push(tcp);
        }
    });
    const CALLS: u64 = 40;
    let mut servers = Vec::new();
    for port in [dead_port, hang_port] {
        let p = project();
        p.write_config(json!({
            "contracts": "contracts",
            "otel": {"endpoint": format!("http://127.0.0.1:{port}")}
        }));
        let s = Server::start(&p).await;
        let a = s.attempt(json!({})).await;
        let mut slowest = Duration::ZERO;
        for i in 0..CALLS {
            // Paced over more than one batch window: later calls are served while an
            // export is failing or hanging.
            if i % 10 == 0 {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            let t = Instant::now();
            let r = s
                .call(
                    "GET",
                    &format!("{}/contacts?phone=1", a.base("crm")),
                    None,
                    &[("traceparent", &format!("00-{TRACE}-{AGENT_SPAN_1}-01"))],
                )
                .await;
            assert_eq!(r.status, 200);
            slowest = slowest.max(t.elapsed());
        }
        // An export on the call path would take seconds (a refused connection is retried
        // with backoff; the hanging collector never answers within the 5 s timeout).
        assert!(
            slowest < Duration::from_millis(900),
            "collector on port {port}: the slowest call took {slowest:?}"
        );
        servers.push(s);
    }
    // Every span is eventually counted as dropped (after the exporter's retries / timeout).
    let deadline = Instant::now() + Duration::from_secs(20);
    for s in &servers {
        loop {
            let n = dropped(s)
                .await
                .expect("the counter is exported when export is on");
            if n == CALLS {
                break;
            }
            assert!(n < CALLS, "dropped {n} > {CALLS}");
            assert!(
                Instant::now() < deadline,
                "only {n} of {CALLS} spans counted as dropped"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(s.app.otel.as_ref().unwrap().exported(), 0);
    }
    // Export off: no counter at all.
    let p = project();
    let s = Server::start(&p).await;
    assert_eq!(dropped(&s).await, None);
    assert!(s.app.otel.is_none());
}

/// A bad `"otel"` section or variable refuses the start, naming it.
#[test]
fn bad_settings_are_named() {
    let p = project();
    p.write_config(json!({"otel": {"endpoint": "collector:4318"}}));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["check", "--config"])
        .arg(p.config_path())
        .output()
        .unwrap();
    let err =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("otel") && err.contains("endpoint"), "{err}");
    let p = project();
    p.write_config(json!({"otel": {"endpont": "http://x:1"}}));
    let e = understudy::config::Config::load(&p.config_path()).unwrap_err();
    assert!(e.to_string().contains("endpont"), "{e}");
}

const ACCEPT_BOTH: (&str, &str) = ("accept", "application/json, text/event-stream");
/// The trace of the `traceparent` an MCP client puts in `params._meta`.
const META_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const META_SPAN_HTTP: &str = "b7ad6b7169203331";
const META_SPAN_STDIO: &str = "b7ad6b7169203332";

fn tools_call(id: Value, tool: &str, arguments: Value, meta_span: Option<&str>) -> Value {
    let mut params = json!({"name": tool, "arguments": arguments});
    if let Some(span) = meta_span {
        params["_meta"] = json!({"traceparent": format!("00-{META_TRACE}-{span}-01")});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

fn initialize(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "otel-test", "version": "1"}}})
}

/// MCP tool calls over HTTP and over `mcp stdio`: each span carries what the MCP
/// conventions require of a server span — `mcp.method.name`, `jsonrpc.request.id` (string
/// and number ids), the session and the protocol version, `error.type = tool_error` for an
/// input error — and its parent is the `traceparent` of the request's `params._meta` (MCP's
/// own propagation, the only one stdio has) or else the HTTP header's; with both, the
/// header's span is a link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_spans_carry_the_request_id_and_the_callers_context_over_http_and_stdio() {
    let (port, mut rx) = receiver().await;
    let p = crate::mcp_stdio::project();
    p.write_config(json!({"otel": {"endpoint": format!("http://127.0.0.1:{port}")}}));

    // Over HTTP (session era).
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let path = a.base("tools");
    let r = s
        .call("POST", &path, Some(&initialize(json!(0))), &[ACCEPT_BOTH])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let sid = r
        .header("mcp-session-id")
        .expect("a session id")
        .to_string();
    let session = [
        ACCEPT_BOTH,
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let r = s
        .call(
            "POST",
            &path,
            Some(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            &session,
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let tp = |span: &str| format!("00-{TRACE}-{span}-01");
    let (tp1, tp2) = (tp(AGENT_SPAN_1), tp(AGENT_SPAN_2));
    let with = |t: &'static str, v: &str| {
        let mut h: Vec<(&str, String)> = session.iter().map(|(k, v)| (*k, v.to_string())).collect();
        h.push((t, v.to_string()));
        h
    };
    for (body, traceparent) in [
        // The header only: its span is the parent.
        (
            tools_call(
                json!("call-7"),
                "create_ticket",
                json!({"subject": "Printer on fire"}),
                None,
            ),
            &tp1,
        ),
        // `_meta` and the header: `_meta` wins, the header's span is a link.
        (
            tools_call(json!(8), "last_ticket", json!({}), Some(META_SPAN_HTTP)),
            &tp2,
        ),
        // An input error (subject too short).
        (
            tools_call(json!(9), "create_ticket", json!({"subject": "ab"}), None),
            &tp1,
        ),
    ] {
        let h = with("traceparent", traceparent);
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = s.call("POST", &path, Some(&body), &h).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    s.stop().await.unwrap();

    // Over stdio: the same project, `_meta` the only carrier of the caller's context.
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["mcp", "stdio", "--integration", "tools", "--config"])
        .arg(p.config_path())
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("understudy mcp stdio starts");
    {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let mut stdin = child.stdin.take().unwrap();
        for m in [
            initialize(json!(1)),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            tools_call(
                json!("s-5"),
                "create_ticket",
                json!({"subject": "Over stdio"}),
                Some(META_SPAN_STDIO),
            ),
        ] {
            stdin.write_all(format!("{m}\n").as_bytes()).await.unwrap();
        }
        stdin.flush().await.unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let answered = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(l) = lines.next_line().await.unwrap() {
                if serde_json::from_str::<Value>(&l).is_ok_and(|v| v["id"] == "s-5") {
                    return l;
                }
            }
            panic!("stdout ended without the tool call's answer")
        })
        .await
        .expect("the tool call is answered over stdio");
        assert!(answered.contains("T-100"), "{answered}");
        drop(stdin);
    }
    let st = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the session ends with stdin")
        .unwrap();
    assert!(st.success(), "{st}");

    let (_, spans) = spans_until(&mut rx, 4).await;
    let spans: Vec<Span> = spans.into_iter().map(|(_, s)| s).collect();
    assert_eq!(
        spans.len(),
        4,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let by_id = |id: &str| -> &Span {
        spans
            .iter()
            .find(|s| str_attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some(id))
            .unwrap_or_else(|| panic!("no span with jsonrpc.request.id {id}: {spans:#?}"))
    };
    for id in ["call-7", "8", "9", "s-5"] {
        let s = by_id(id);
        assert_eq!(s.kind, 2, "SPAN_KIND_SERVER");
        let at = &s.attributes;
        assert_eq!(
            str_attr(at, "mcp.method.name").as_deref(),
            Some("tools/call"),
            "{id}"
        );
        assert_eq!(
            str_attr(at, "gen_ai.operation.name").as_deref(),
            Some("execute_tool")
        );
        assert_eq!(
            str_attr(at, "mcp.protocol.version").as_deref(),
            Some("2025-06-18"),
            "{id}"
        );
        assert!(str_attr(at, "mcp.session.id").is_some(), "{id}: {at:?}");
    }
    // Over HTTP, the session the client was given.
    assert_eq!(
        str_attr(&by_id("call-7").attributes, "mcp.session.id").as_deref(),
        Some(sid.as_str())
    );

    let first = by_id("call-7");
    assert_eq!(first.name, "execute_tool create_ticket");
    assert_eq!(hex(&first.trace_id), TRACE);
    assert_eq!(hex(&first.parent_span_id), AGENT_SPAN_1);
    assert!(first.links.is_empty());
    assert!(str_attr(&first.attributes, "error.type").is_none());

    let meta = by_id("8");
    assert_eq!(meta.name, "execute_tool last_ticket");
    assert_eq!(hex(&meta.trace_id), META_TRACE);
    assert_eq!(hex(&meta.parent_span_id), META_SPAN_HTTP);
    assert_eq!(meta.links.len(), 1, "the header's span as a link");
    assert_eq!(hex(&meta.links[0].trace_id), TRACE);
    assert_eq!(hex(&meta.links[0].span_id), AGENT_SPAN_2);

    let bad = by_id("9");
    assert_eq!(
        str_attr(&bad.attributes, "error.type").as_deref(),
        Some("tool_error")
    );
    assert_eq!(
        str_attr(&bad.attributes, "understudy.result_status").as_deref(),
        Some("input_error")
    );
    assert!(str_attr(&bad.attributes, "understudy.error.code").is_some());
    assert_eq!(
        bad.status.as_ref().map(|s| s.code),
        Some(2),
        "STATUS_CODE_ERROR"
    );

    let stdio = by_id("s-5");
    assert_eq!(stdio.name, "execute_tool create_ticket");
    assert_eq!(hex(&stdio.trace_id), META_TRACE);
    assert_eq!(hex(&stdio.parent_span_id), META_SPAN_STDIO);
    assert_eq!(
        str_attr(&stdio.attributes, "understudy.result_status").as_deref(),
        Some("ok")
    );
}

/// Run `tests/otel/mcp_client.py ARGS…` (the MCP Python SDK with OpenTelemetry); its output.
async fn sdk_client(args: &[String]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/otel/mcp_client.py");
    let out = tokio::process::Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .await
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the MCP client failed (pip install mcp==2.3.0 opentelemetry-sdk==1.45.2): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(out.stdout.trim_ascii()).expect("the client prints its spans")
}

/// The real client: the official MCP Python SDK makes its own CLIENT span for a tool call
/// and propagates it in `params._meta` (SEP-414). Over `mcp stdio` and over HTTP,
/// understudy's span of that call is in the client's trace, the child of that CLIENT span,
/// with the same `jsonrpc.request.id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_python_sdks_client_span_is_the_parent_over_stdio_and_http() {
    if !support::otel_sdk_available() || !support::python_has(&["mcp.client.stdio"]) {
        return;
    }
    let (port, mut rx) = receiver().await;
    let p = crate::mcp_stdio::project();
    p.write_config(json!({"otel": {"endpoint": format!("http://127.0.0.1:{port}")}}));
    let stdio = sdk_client(&[
        "stdio".into(),
        env!("CARGO_BIN_EXE_understudy").into(),
        "mcp".into(),
        "stdio".into(),
        "--integration".into(),
        "tools".into(),
        "--config".into(),
        p.config_path().display().to_string(),
    ])
    .await;
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let http = sdk_client(&["http".into(), s.url(&a.base("tools"))]).await;
    s.stop().await.unwrap();
    let (_, spans) = spans_until(&mut rx, 2).await;
    let spans: Vec<Span> = spans.into_iter().map(|(_, s)| s).collect();
    assert_eq!(spans.len(), 2, "{spans:#?}");
    for (transport, out) in [("stdio", &stdio), ("http", &http)] {
        assert_eq!(
            out["result"]["structuredContent"]["ticket_id"], "T-100",
            "{transport}: {out}"
        );
        let client = out["spans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["kind"] == "CLIENT" && s["attributes"]["mcp.method.name"] == "tools/call")
            .unwrap_or_else(|| panic!("{transport}: no client span of the tool call: {out:#}"));
        let id = client["attributes"]["jsonrpc.request.id"]
            .as_str()
            .unwrap_or_else(|| panic!("{transport}: {client:#}"));
        let mine = spans
            .iter()
            .find(|s| hex(&s.trace_id) == client["trace_id"].as_str().unwrap())
            .unwrap_or_else(|| {
                panic!("{transport}: no span in the client's trace {client:#}: {spans:#?}")
            });
        assert_eq!(mine.name, "execute_tool create_ticket", "{transport}");
        assert_eq!(
            hex(&mine.parent_span_id),
            client["span_id"].as_str().unwrap(),
            "{transport}: the child of the SDK's client span"
        );
        assert_eq!(
            str_attr(&mine.attributes, "jsonrpc.request.id").as_deref(),
            Some(id),
            "{transport}"
        );
        assert_eq!(
            str_attr(&mine.attributes, "mcp.method.name").as_deref(),
            Some("tools/call")
        );
    }
}

/// Traces out to an `https://` collector: through the same rustls client, trusting the web
/// PKI roots plus `OTEL_EXPORTER_OTLP_CERTIFICATE`. Untrusted, the span is dropped and
/// counted, never sent; trusted, it arrives.
#[tokio::test]
async fn export_to_an_https_collector_needs_its_ca() {
    use understudy::telemetry::{attempt_span, AttemptOutcome, Exporter, FileSettings, Settings};
    let (ca_pem, tls) = support::loopback_tls();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let mut collector = support::otlp_collector(Some(tls)).await;
    let endpoint = format!("https://127.0.0.1:{}", collector.port);
    let outcome = AttemptOutcome {
        attempt_id: "att-https".into(),
        started: std::time::SystemTime::now(),
        ended: std::time::SystemTime::now(),
        verdict: "pass".into(),
        reasons: vec![],
        checks: vec![],
        calls: 0,
    };
    for trusted in [false, true] {
        let ca = ca.display().to_string();
        let settings = Settings::resolve(
            &FileSettings {
                endpoint: Some(endpoint.as_str()),
                ..Default::default()
            },
            |k| (trusted && k == "OTEL_EXPORTER_OTLP_CERTIFICATE").then(|| ca.clone()),
        )
        .unwrap()
        .unwrap();
        let e = Exporter::start(settings).unwrap();
        e.send(attempt_span(&outcome, None));
        e.flush(Duration::from_secs(10)).await;
        if trusted {
            assert_eq!((e.exported(), e.dropped()), (1, 0));
            let (head, body) = collector.rx.recv().await.unwrap();
            assert!(head.starts_with("post /v1/traces "), "{head}");
            assert!(String::from_utf8_lossy(&body).contains("att-https"));
        } else {
            assert_eq!((e.exported(), e.dropped()), (0, 1));
            assert!(collector.rx.try_recv().is_err());
            assert!(
                collector
                    .failed_handshakes
                    .load(std::sync::atomic::Ordering::SeqCst)
                    >= 1
            );
        }
    }
}
