//! Traces out in the modes that reach the real system (docs/src/guides/traces.md#traces-out):
//! the real binary (`understudy serve --mode dry-run` / `--mode record`) in front of a
//! loopback upstream exports exactly one `execute_tool` span per served call — forwarded,
//! blocked, simulated — each under the caller's `traceparent` span, with the mode, the
//! attempt, the operation, the result status and (for a write that never reached the
//! upstream) the guardrail event, and no secret of the request or of the upstream's answer in
//! anything that leaves the process. The stdio side is `otel_stdio.rs`.

use std::process::Child;
use std::time::Duration;

use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{json, Value};

use crate::dryrun::{json_resp, upstream, Seen};
use crate::otel_export::{hex, receiver, spans_until, str_attr};
use crate::support::{self, Project, Resp};

/// The agent's trace and its tool spans (one per call).
const TRACE: &str = "5bf92f3577b34da6a3ce929d0e0e4736";
pub(crate) const SPANS: [&str; 3] = ["10f067aa0ba902b7", "10f067aa0ba902b8", "10f067aa0ba902b9"];
/// Secrets the agent sends: its `Authorization` value (the upstream echoes it back) and a
/// password in a write's body.
const AUTH: &str = "Bearer sk-live-otelmodes-7f3e9a1b2c";
pub(crate) const PASSWORD: &str = "pw-otelmodes-5d4c3b2a19";

/// The variables that would point the binary's exporter elsewhere.
pub(crate) const OTEL_VARS: [&str; 4] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_SERVICE_NAME",
];

/// `understudy serve --config <p> --listen 127.0.0.1:0 ARGS…`, the real binary.
pub(crate) struct Running {
    child: Option<Child>,
    pub base: String,
    _stdout: crate::faults::Lines,
    log: crate::faults::Log,
    http: reqwest::Client,
}

impl Running {
    pub(crate) fn start(p: &Project, args: &[&str]) -> Running {
        let (child, base, stdout, log) = crate::faults::try_spawn_serve_with(p, |c| {
            c.args(args);
            for v in OTEL_VARS {
                c.env_remove(v);
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
        Running {
            child: Some(child),
            base,
            _stdout: stdout,
            log,
            http: support::client(),
        }
    }

    pub(crate) async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Resp {
        support::send(
            &self.http,
            method,
            &format!("{}{path}", self.base),
            body,
            headers,
        )
        .await
    }

    /// A new attempt: (its id, its token).
    pub(crate) async fn attempt(&self, body: Value) -> (String, String) {
        let r = self
            .call("POST", "/_understudy/api/attempts", Some(&body), &[])
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        let v = r.json();
        (
            v["attempt_id"].as_str().unwrap().to_string(),
            v["token"].as_str().unwrap().to_string(),
        )
    }

    async fn end_attempt(&self, id: &str) {
        let r = self
            .call(
                "DELETE",
                &format!("/_understudy/api/attempts/{id}"),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }

    pub(crate) async fn evidence(&self, id: &str) -> Value {
        let r = self
            .call(
                "GET",
                &format!("/_understudy/api/attempts/{id}/evidence"),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    }

    /// A counter of `/metrics`.
    async fn metric(&self, name: &str) -> Option<u64> {
        let r = self
            .call("GET", "/_understudy/api/metrics", None, &[])
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .map(|n| n.trim().parse().unwrap())
    }

    /// Waits (at most 20 s) until the collector accepted `n` spans; fails when more left.
    async fn exported(&self, n: u64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let x = self
                .metric("understudy_otel_spans_exported_total")
                .await
                .expect("export is on");
            assert!(x <= n, "{x} spans exported, expected {n}");
            assert_eq!(
                self.metric("understudy_otel_spans_dropped_total").await,
                Some(0)
            );
            if x == n {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "only {x} of {n} spans exported"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM: the graceful stop (the last spans flushed); exits 0. Its log.
    pub(crate) async fn stop(mut self) -> String {
        let mut child = self.child.take().unwrap();
        let st = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let st = tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap();
        let log = String::from_utf8_lossy(&self.log.lock().unwrap()).to_string();
        assert!(st.success(), "serve exits 0 on SIGTERM: {st}\n{log}");
        log
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `crm` (reads forwarded, writes blocked) and `erp` (writes simulated) in front of the
/// same upstream, operations without mocks; export on, content included.
fn project(upstream: &str, collector: u16) -> Project {
    let p = Project::new(&[("crm", "rest"), ("erp", "rest")]);
    p.write_config(json!({
        "otel": {"endpoint": format!("http://127.0.0.1:{collector}"), "content": true},
        "integrations": {
            "crm": {"profile": "rest", "operations": "mocks/crm", "upstream": upstream},
            "erp": {"profile": "rest", "operations": "mocks/erp", "upstream": upstream,
                    "unmatched_writes": "simulate"}
        }
    }));
    let mut lookup = support::rest_op("lookup", "GET", "/contacts", None);
    lookup["match"]["query"] = json!({"phone": "{phone}"});
    p.op("crm", lookup);
    let mut book = support::rest_op("book", "POST", "/appointments", None);
    book["write"] = json!(true);
    p.op("crm", book);
    let mut order = support::rest_op("place_order", "POST", "/orders", None);
    order["write"] = json!(true);
    p.op("erp", order);
    p
}

/// The upstream: every read answered with what it got, the `Authorization` value included.
fn echo(s: &Seen) -> hyper::Response<crate::dryrun::TestBody> {
    let auth = s
        .headers
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    json_resp(
        200,
        &json!({"id": "c_real", "uri": s.uri, "auth_seen": auth}),
    )
}

pub(crate) fn tp(span: &str) -> String {
    format!("00-{TRACE}-{span}-01")
}

/// The one span named `execute_tool {op}`.
pub(crate) fn tool_span<'a>(spans: &'a [Span], op: &str) -> &'a Span {
    let named: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == format!("execute_tool {op}"))
        .collect();
    assert_eq!(
        named.len(),
        1,
        "one span for {op}: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    named[0]
}

/// What every tool span must say: the caller's span as parent, the attempt, the operation,
/// the result status and the mode.
pub(crate) fn assert_tool_span(
    s: &Span,
    parent: &str,
    attempt: &str,
    op: &str,
    status: &str,
    mode: &str,
) {
    let at = &s.attributes;
    assert_eq!(hex(&s.trace_id), TRACE, "{op}");
    assert_eq!(hex(&s.parent_span_id), parent, "{op}: the caller's span");
    assert_eq!(s.kind, 2, "{op}: SPAN_KIND_SERVER");
    let want = [
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", op),
        ("understudy.attempt_id", attempt),
        ("understudy.operation", op),
        ("understudy.result_status", status),
        ("understudy.mode", mode),
    ];
    for (k, v) in want {
        assert_eq!(str_attr(at, k).as_deref(), Some(v), "{op}: {k} in {at:?}");
    }
}

/// The guardrail event of a write that never reached the upstream: (decision, action).
pub(crate) fn guardrail(s: &Span) -> Option<(String, String)> {
    let g: Vec<_> = s
        .events
        .iter()
        .filter(|e| e.name == "apply_guardrail")
        .collect();
    assert!(g.len() <= 1, "{g:?}");
    g.first().map(|e| {
        assert_eq!(
            str_attr(&e.attributes, "gen_ai.guardrail.name").as_deref(),
            Some("understudy.write_policy")
        );
        (
            str_attr(&e.attributes, "gen_ai.guardrail.decision.type").unwrap(),
            str_attr(&e.attributes, "understudy.guardrail.action").unwrap(),
        )
    })
}

/// Nothing of `secrets` in any export the collector received.
fn assert_no_secret(exports: &[crate::otel_export::Export]) {
    for e in exports {
        let raw = String::from_utf8_lossy(&e.body);
        for secret in [AUTH.trim_start_matches("Bearer "), PASSWORD] {
            assert!(
                !raw.contains(secret),
                "a secret reached the collector: {raw}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_exports_one_span_per_call_with_the_guardrail_and_no_secret() {
    let (collector, mut rx) = receiver().await;
    let (addr, seen) = upstream(None, echo).await;
    let p = project(&format!("http://{addr}"), collector);
    let s = Running::start(&p, &["--mode", "dry-run"]);
    let (id, token) = s.attempt(json!({})).await;
    let auth = ("authorization", AUTH);
    // A read: forwarded to the real upstream (which echoes the Authorization value).
    let r = s
        .call(
            "GET",
            &format!("/~{token}/crm/contacts?phone=1"),
            None,
            &[("traceparent", &tp(SPANS[0])), auth],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.contains("c_real"), "the real answer: {}", r.text);
    // A write of `crm`: blocked.
    let r = s
        .call(
            "POST",
            &format!("/~{token}/crm/appointments"),
            Some(&json!({"when": "tomorrow", "password": PASSWORD})),
            &[("traceparent", &tp(SPANS[1])), auth],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    // A write of `erp`: simulated.
    let r = s
        .call(
            "POST",
            &format!("/~{token}/erp/orders"),
            Some(&json!({"sku": "X-1", "password": PASSWORD})),
            &[("traceparent", &tp(SPANS[2])), auth],
        )
        .await;
    assert!(r.status < 300, "{}", r.text);
    s.end_attempt(&id).await;
    // Three calls and the attempt span, and not one more.
    s.exported(4).await;
    let (exports, spans) = spans_until(&mut rx, 4).await;
    let spans: Vec<Span> = spans.into_iter().map(|(_, s)| s).collect();
    assert_eq!(spans.len(), 4, "{spans:#?}");
    s.stop().await;
    let reached: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| format!("{} {}", s.method, s.path()))
        .collect();
    assert_eq!(
        reached,
        vec!["GET /contacts"],
        "no write reached the upstream"
    );

    let read = tool_span(&spans, "lookup");
    assert_tool_span(read, SPANS[0], &id, "lookup", "forwarded", "dry-run");
    assert_eq!(
        str_attr(&read.attributes, "understudy.source").as_deref(),
        Some("upstream")
    );
    assert_eq!(
        guardrail(read),
        None,
        "a forwarded read passed no guardrail"
    );
    // The upstream's answer is on the span, its echo of the `Authorization` value scrubbed.
    let result = str_attr(&read.attributes, "gen_ai.tool.call.result").unwrap();
    assert!(
        result.contains("c_real") && result.contains("auth_seen"),
        "{result}"
    );

    let blocked = tool_span(&spans, "book");
    assert_tool_span(blocked, SPANS[1], &id, "book", "blocked", "dry-run");
    assert_eq!(guardrail(blocked), Some(("deny".into(), "blocked".into())));
    assert_eq!(
        blocked.status.as_ref().map(|s| s.code),
        Some(2),
        "STATUS_CODE_ERROR"
    );
    let args = str_attr(&blocked.attributes, "gen_ai.tool.call.arguments").unwrap();
    assert!(args.contains("password"), "{args}");

    let simulated = tool_span(&spans, "place_order");
    assert_tool_span(
        simulated,
        SPANS[2],
        &id,
        "place_order",
        "simulated",
        "dry-run",
    );
    assert_eq!(
        guardrail(simulated),
        Some(("modify".into(), "simulated".into()))
    );

    let att: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "understudy attempt")
        .collect();
    assert_eq!(att.len(), 1);
    assert_eq!(hex(&att[0].trace_id), TRACE);
    assert_no_secret(&exports);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_exports_one_span_per_call_and_no_secret() {
    let (collector, mut rx) = receiver().await;
    let (addr, seen) = upstream(None, echo).await;
    let p = project(&format!("http://{addr}"), collector);
    let out = p.path().join("drafts");
    let s = Running::start(&p, &["--mode", "record", "--out", out.to_str().unwrap()]);
    let (id, token) = s.attempt(json!({})).await;
    let auth = ("authorization", AUTH);
    // A read: forwarded and captured.
    let r = s
        .call(
            "GET",
            &format!("/~{token}/crm/contacts?phone=1"),
            None,
            &[("traceparent", &tp(SPANS[0])), auth],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // A write without --allow-writes: blocked.
    let r = s
        .call(
            "POST",
            &format!("/~{token}/crm/appointments"),
            Some(&json!({"when": "tomorrow", "password": PASSWORD})),
            &[("traceparent", &tp(SPANS[1])), auth],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    s.end_attempt(&id).await;
    s.exported(3).await;
    let (exports, spans) = spans_until(&mut rx, 3).await;
    let spans: Vec<Span> = spans.into_iter().map(|(_, s)| s).collect();
    assert_eq!(spans.len(), 3, "{spans:#?}");
    s.stop().await;
    assert_eq!(seen.lock().unwrap().len(), 1, "only the read reached it");

    let read = tool_span(&spans, "lookup");
    assert_tool_span(read, SPANS[0], &id, "lookup", "forwarded", "record");
    assert_eq!(guardrail(read), None);
    let result = str_attr(&read.attributes, "gen_ai.tool.call.result").unwrap();
    assert!(result.contains("auth_seen"), "{result}");
    let blocked = tool_span(&spans, "book");
    assert_tool_span(blocked, SPANS[1], &id, "book", "blocked", "record");
    assert_eq!(guardrail(blocked), Some(("deny".into(), "blocked".into())));
    assert_no_secret(&exports);
    // The recording itself happened: the read is drafted.
    assert!(out.join("crm").exists(), "drafts in {}", out.display());
}
