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
struct Export {
    head: String,
    body: Vec<u8>,
    spans: Vec<(String, Span)>,
}

/// A loopback OTLP/HTTP receiver on a free port: every export decoded and handed to the
/// channel, answered 200 with an empty `ExportTraceServiceResponse`.
async fn receiver() -> (u16, tokio::sync::mpsc::UnboundedReceiver<Export>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Ok((mut tcp, _)) = l.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while let Some((head, body)) = support::read_raw_request(&mut tcp, &mut buf).await {
                    let req = ExportTraceServiceRequest::decode(&body[..]).unwrap_or_else(|e| {
                        panic!("not an ExportTraceServiceRequest ({e}): {head}")
                    });
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
                    let _ = tcp
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n")
                        .await;
                }
            });
        }
    });
    (port, rx)
}

fn attr<'a>(kvs: &'a [KeyValue], k: &str) -> Option<&'a Any> {
    kvs.iter()
        .find(|kv| kv.key == k)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn str_attr(kvs: &[KeyValue], k: &str) -> Option<String> {
    match attr(kvs, k) {
        Some(Any::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

fn int_attr(kvs: &[KeyValue], k: &str) -> Option<i64> {
    match attr(kvs, k) {
        Some(Any::IntValue(i)) => Some(*i),
        _ => None,
    }
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const AGENT_SPAN_1: &str = "00f067aa0ba902b7";
const AGENT_SPAN_2: &str = "00f067aa0ba902b8";
const SECRET: &str = "hunter2-s3cr3t-value";

fn hex(b: &[u8]) -> String {
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
    let end = s
        .call(
            "DELETE",
            &format!("/_understudy/api/attempts/{}", a.id),
            None,
            &[],
        )
        .await;
    assert_eq!(end.status, 200, "{}", end.text);
    let app = s.app.clone();
    // The shutdown flushes the queue (and waits for the attempt span).
    s.stop().await.unwrap();

    let mut exports = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let spans = loop {
        let all: Vec<(String, Span)> = exports
            .iter()
            .flat_map(|e: &Export| e.spans.clone())
            .collect();
        if all.len() >= 4 {
            break all;
        }
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) => exports.push(e),
            _ => panic!(
                "the receiver got {} spans: {:?}",
                all.len(),
                all.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
            ),
        }
    };
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
