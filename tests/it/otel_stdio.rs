//! The caller's trace over stdio (docs/src/guides/traces.md): over `understudy mcp stdio`
//! and `mcp wrap` it travels only in `params._meta.traceparent`. The evidence event takes its
//! `trace_id` from there, so the agent's own spans of that trace join the attempt and
//! `agent_trace.reported_calls_arrived` judges them; and `mcp wrap --mode dry-run` and
//! `--mode record` export one span per call under that `_meta` span, the blocked write with
//! its guardrail event.

use std::time::Duration;

use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{json, Value};

use crate::otel_export::{receiver, spans_until, str_attr};
use crate::otel_modes::{
    assert_tool_span, guardrail, tool_span, tp, Running, OTEL_VARS, PASSWORD, SPANS,
};
use crate::support::Project;

const OTLP: &str = "/_understudy/api/otlp/v1/traces";

/// One agent `execute_tool` span (OTLP/JSON) of `trace`.
fn agent_span(trace: &str, span: &str, tool: &str, arguments: Value, start: u64) -> Value {
    json!({"traceId": trace, "spanId": span, "name": format!("execute_tool {tool}"), "kind": 3,
    "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 1).to_string(),
    "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "gen_ai.tool.name", "value": {"stringValue": tool}},
        {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": arguments.to_string()}}
    ]})
}

/// An MCP session over a child's stdin and stdout, one JSON-RPC message per line.
struct Stdio {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Stdio {
    /// `cmd` without the variables that would point an exporter elsewhere.
    fn spawn(cmd: &mut tokio::process::Command) -> Stdio {
        for v in OTEL_VARS {
            cmd.env_remove(v);
        }
        let mut child = cmd
            .env_remove("UNDERSTUDY_ATTEMPT")
            .env_remove("UNDERSTUDY_URL")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the stdio command starts");
        let stdin = child.stdin.take().unwrap();
        let lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
            child.stdout.take().unwrap(),
        ));
        Stdio {
            child,
            stdin,
            lines,
        }
    }

    /// Send `m`; a request's answer (what else the server sends meanwhile — a log, a list
    /// change, a request of its own — is skipped), `Null` for a notification.
    async fn send(&mut self, m: Value) -> Value {
        use tokio::io::AsyncWriteExt;
        let id = m["id"].clone();
        self.stdin
            .write_all(format!("{m}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
        if id.is_null() {
            return Value::Null;
        }
        let lines = &mut self.lines;
        tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(l) = lines.next_line().await.unwrap() {
                let v: Value = serde_json::from_str(&l).unwrap();
                if v["id"] == id && v.get("method").is_none() {
                    return v;
                }
            }
            panic!("stdout ended without the answer to {id}")
        })
        .await
        .expect("answered over stdio")
    }

    async fn initialize(&mut self) {
        let r = self
            .send(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "otel-modes", "version": "1"}}}),
            )
            .await;
        assert!(r.get("result").is_some(), "{r}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// Close stdin; the session ends, exit 0.
    async fn end(self) {
        let Stdio {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let st = tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .expect("the session ends with stdin")
            .unwrap();
        assert!(st.success(), "{st}");
    }
}

/// A `tools/call` whose only trace context is `params._meta.traceparent`.
fn meta_call(id: &str, tool: &str, arguments: Value, traceparent: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments, "_meta": {"traceparent": traceparent}}})
}

/// `understudy mcp stdio --url <server> --attempt <token>`: one `create_ticket` carrying
/// `traceparent` in `_meta` only; its answer.
async fn stdio_ticket(p: &Project, base: &str, token: &str, subject: &str, tp: &str) -> Value {
    let mut s = Stdio::spawn(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
            .args(["mcp", "stdio", "--integration", "tools", "--config"])
            .arg(p.config_path())
            .args(["--url", base, "--attempt", token]),
    );
    s.initialize().await;
    let answer = s
        .send(meta_call(
            "t-1",
            "create_ticket",
            json!({"subject": subject}),
            tp,
        ))
        .await;
    s.end().await;
    answer
}

/// The statuses of the `ticket` contract's `agent_trace.*` checks.
async fn agent_trace_checks(s: &Running, id: &str) -> Vec<(String, String)> {
    let env = s.evidence(id).await;
    let r = env["contract_results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["contract_id"] == "ticket")
        .cloned()
        .unwrap_or_else(|| panic!("no ticket result: {env:#}"));
    r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let id = c["id"].as_str()?.strip_prefix("agent_trace.")?;
            Some((id.to_string(), c["status"].as_str()?.to_string()))
        })
        .collect()
}

/// Over `mcp stdio` (joined to a running `serve`, so each line reaches it as an HTTP POST
/// without a `traceparent` header) the caller's trace is only in `params._meta`: the
/// evidence event's `trace_id` is that trace, the agent's own spans of it (no
/// `understudy.attempt_id` resource attribute) join the attempt, and
/// `reported_calls_arrived` passes for the honest account and fails for the one that
/// reports a call that never arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_meta_traceparent_joins_the_agents_spans_to_the_attempt() {
    let p = crate::mcp_stdio::project();
    p.write_config(json!({"contracts": "contracts"}));
    std::fs::create_dir_all(p.path().join("contracts")).unwrap();
    std::fs::write(
        p.path().join("contracts/ticket.yaml"),
        "version: 1\nid: ticket\ntool: tools/create_ticket\nagent_trace:\n  reported_calls_arrived: true\n  arrived_calls_reported: true\n",
    )
    .unwrap();
    let s = Running::start(&p, &[]);
    let honest_trace = "6bf92f3577b34da6a3ce929d0e0e4736";
    let phantom_trace = "7bf92f3577b34da6a3ce929d0e0e4736";
    let mut ids = Vec::new();
    for (trace, agent_spans) in [
        (
            honest_trace,
            vec![agent_span(
                honest_trace,
                "20f067aa0ba902b7",
                "create_ticket",
                json!({"subject": "Printer on fire"}),
                10,
            )],
        ),
        (
            phantom_trace,
            vec![
                agent_span(
                    phantom_trace,
                    "30f067aa0ba902b7",
                    "create_ticket",
                    json!({"subject": "Printer on fire"}),
                    10,
                ),
                // Reported, never sent.
                agent_span(
                    phantom_trace,
                    "30f067aa0ba902b8",
                    "create_ticket",
                    json!({"subject": "Coffee machine"}),
                    20,
                ),
            ],
        ),
    ] {
        let (id, token) = s.attempt(json!({"contracts": ["ticket"]})).await;
        let tp = format!("00-{trace}-40f067aa0ba902b7-01");
        let answer = stdio_ticket(&p, &s.base, &token, "Printer on fire", &tp).await;
        assert_eq!(
            answer["result"]["structuredContent"]["ticket_id"], "T-100",
            "{answer}"
        );
        // The event carries the trace of `_meta`.
        let ev = s.evidence(&id).await;
        let events = ev["tool_events"].as_array().unwrap();
        assert_eq!(events.len(), 1, "{ev:#}");
        assert_eq!(events[0]["trace_id"], trace, "{:#}", events[0]);
        // The agent's spans, joined by that trace alone.
        let body = json!({"resourceSpans": [{"resource": {"attributes": []},
            "scopeSpans": [{"spans": agent_spans}]}]});
        let r = s.call("POST", OTLP, Some(&body), &[]).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.json(), json!({}), "every span joined the attempt");
        ids.push(id);
    }
    let honest = agent_trace_checks(&s, &ids[0]).await;
    assert!(
        honest.contains(&("reported_calls_arrived".into(), "passed".into()))
            && honest.contains(&("arrived_calls_reported".into(), "passed".into())),
        "{honest:?}"
    );
    let phantom = agent_trace_checks(&s, &ids[1]).await;
    assert!(
        phantom.contains(&("reported_calls_arrived".into(), "failed".into())),
        "{phantom:?}"
    );
    assert!(
        phantom.contains(&("arrived_calls_reported".into(), "passed".into())),
        "{phantom:?}"
    );
    s.stop().await;
}

/// `understudy mcp wrap --mode MODE` around a real stdio server (`child_server.py`, the
/// standard library only): the caller's trace only in `params._meta`, a read forwarded to the
/// child and a write answered `blocked` without reaching it — one span each, under the
/// `_meta` span, with the mode and (for the write) the guardrail event; the password the
/// write carried is in no export.
async fn wrap_spans(mode: &str) {
    let (collector, mut rx) = receiver().await;
    let p = Project::new(&[("child", "mcp")]);
    p.write_config(json!({"otel": {
        "endpoint": format!("http://127.0.0.1:{collector}"), "content": true}}));
    let writes = p.path().join("child-writes.txt");
    let child_server = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/mcp-stdio/child_server.py"
    );
    let drafts = p.path().join("drafts");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_understudy"));
    cmd.args(["mcp", "wrap", "--integration", "child", "--mode", mode])
        .arg("--out")
        .arg(&drafts)
        .arg("--config")
        .arg(p.config_path())
        .args(["--", "python3", child_server])
        .env("CHILD_WRITES", &writes);
    let mut s = Stdio::spawn(&mut cmd);
    s.initialize().await;
    // The child's annotations tell its reads from its writes.
    let listed = s
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await;
    assert!(listed.to_string().contains("remember"), "{listed}");
    let read = s
        .send(meta_call(
            "r",
            "noisy",
            json!({"task": "traced"}),
            &tp(SPANS[0]),
        ))
        .await;
    assert_eq!(
        read["result"]["structuredContent"]["done"], "traced",
        "forwarded to the child: {read}"
    );
    let write = s
        .send(meta_call(
            "w",
            "remember",
            json!({"text": "a note", "password": PASSWORD}),
            &tp(SPANS[1]),
        ))
        .await;
    assert_eq!(write["result"]["isError"], true, "blocked: {write}");
    s.end().await;
    assert!(!writes.exists(), "the write reached the child");
    if mode == "record" {
        assert!(
            drafts.join("child/noisy.json").exists(),
            "the read is drafted"
        );
    }
    // The exit flushed the last spans: both are at the collector.
    let (exports, spans) = spans_until(&mut rx, 2).await;
    let mut spans: Vec<Span> = spans.into_iter().map(|(_, s)| s).collect();
    while let Ok(e) = rx.try_recv() {
        spans.extend(e.spans.into_iter().map(|(_, s)| s));
    }
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let attempt = str_attr(&spans[0].attributes, "understudy.attempt_id").unwrap();
    let read = tool_span(&spans, "noisy");
    assert_tool_span(read, SPANS[0], &attempt, "noisy", "forwarded", mode);
    assert_eq!(
        str_attr(&read.attributes, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        str_attr(&read.attributes, "jsonrpc.request.id").as_deref(),
        Some("r")
    );
    assert_eq!(guardrail(read), None);
    let blocked = tool_span(&spans, "remember");
    assert_tool_span(blocked, SPANS[1], &attempt, "remember", "blocked", mode);
    assert_eq!(guardrail(blocked), Some(("deny".into(), "blocked".into())));
    assert_eq!(
        str_attr(&blocked.attributes, "error.type").as_deref(),
        Some("tool_error")
    );
    for e in &exports {
        assert!(
            !String::from_utf8_lossy(&e.body).contains(PASSWORD),
            "the write's secret reached the collector"
        );
    }
}

/// `dry-run`: the read forwarded, the write blocked by the mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_wrap_dry_run_exports_a_span_per_call_under_the_meta_span() {
    wrap_spans("dry-run").await;
}

/// `record` without `--allow-writes`: the read forwarded and captured, the write blocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_wrap_record_exports_a_span_per_call_under_the_meta_span() {
    wrap_spans("record").await;
}
