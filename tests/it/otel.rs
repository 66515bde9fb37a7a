//! Traces in (docs/src/guides/traces.md): real agents instrumented with the OpenTelemetry
//! Python SDK (`tests/otel/agent.py`, `opentelemetry-sdk` + `opentelemetry-exporter-otlp-proto-http`
//! 1.45.2) call a REST mock through an attempt and export their spans over OTLP/HTTP protobuf
//! to `POST /_understudy/api/otlp/v1/traces`; the `agent_trace.*` checks of a contract judge
//! what each agent said against what arrived. Plus the route itself: OTLP/JSON, the join by
//! trace id, a duplicate export, refusals.

use serde_json::{json, Value};

use crate::support::{self, mock, rest_op, Project, Server};

const OTLP: &str = "/_understudy/api/otlp/v1/traces";

pub(crate) fn project() -> Project {
    let p = Project::new(&[("crm", "rest")]);
    p.write_config(json!({"contracts": "contracts"}));
    let mut lookup = rest_op(
        "lookup",
        "GET",
        "/contacts",
        Some(mock(
            json!({"status": 200, "data": {"id": "c_1"}}),
            json!({"phone": "1"}),
        )),
    );
    // The query parameter is the operation's input (`phone`), as the agent's tool argument.
    lookup["match"]["query"] = json!({"phone": "{phone}"});
    p.op("crm", lookup);
    let mut book = rest_op(
        "book",
        "POST",
        "/appointments",
        Some(mock(
            json!({"status": 201, "data": {"id": "apt_1"}}),
            json!({}),
        )),
    );
    book["write"] = json!(true);
    p.op("crm", book);
    std::fs::create_dir_all(p.path().join("contracts")).unwrap();
    std::fs::write(
        p.path().join("contracts/booking.yaml"),
        "version: 1\nid: booking\ntool: crm/book\nagent_trace:\n  reported_calls_arrived: true\n  arrived_calls_reported: true\n  claims_match_results: true\n  no_unknown_tools: true\n",
    )
    .unwrap();
    p
}

/// Runs the scripted agent in `mode` against the attempt; returns its stdout line.
async fn run_agent(s: &Server, attempt: &support::Attempt, mode: &str) -> Value {
    let out = support::otel_agent(mode)
        .env("AGENT_BASE_URL", s.url(&attempt.base("crm")))
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            s.url("/_understudy/api/otlp"),
        )
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            format!("understudy.attempt_id={}", attempt.id),
        )
        .output()
        .await
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "agent {mode} failed (pip install opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(out.stdout.trim_ascii()).expect("agent prints its outcome")
}

/// (status of each agent_trace check, the contract's status, the verdict).
async fn judged(s: &Server, id: &str) -> (Vec<(String, String)>, Value, Value) {
    let env = s.evidence(id).await;
    let r = env["contract_results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["contract_id"] == "booking")
        .cloned()
        .unwrap_or_else(|| panic!("no booking result: {env:#}"));
    let checks = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"].as_str().unwrap().starts_with("agent_trace."))
        .map(|c| {
            (
                c["id"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("agent_trace.")
                    .to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (checks, r["status"].clone(), env["verdict"].clone())
}

fn status_of<'a>(checks: &'a [(String, String)], k: &str) -> &'a str {
    &checks.iter().find(|(id, _)| id == k).unwrap().1
}

#[tokio::test]
async fn instrumented_python_agents_are_judged_by_their_own_spans() {
    if !support::otel_sdk_available() {
        return;
    }
    let p = project();
    let s = Server::start(&p).await;

    // Honest: every check passes, and the agent's account is in the evidence.
    let a = s.attempt(json!({"contracts": ["booking"]})).await;
    assert_eq!(run_agent(&s, &a, "honest").await["booked"], true);
    let (checks, contract, verdict) = judged(&s, &a.id).await;
    assert!(checks.iter().all(|(_, st)| st == "passed"), "{checks:?}");
    assert_eq!(checks.len(), 4);
    assert_eq!(contract, "passed");
    assert_eq!(verdict, "pass");
    let env = s.evidence(&a.id).await;
    let names: Vec<&str> = env["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.iter().filter(|n| **n == "otel.tool_call").count(),
        2,
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|n| **n == "otel.model_turn").count(),
        2,
        "{names:?}"
    );
    assert!(names.contains(&"otel.final_message"), "{names:?}");
    let book = env["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "otel.tool_call" && e["data"]["tool"] == "book")
        .unwrap();
    assert_eq!(book["data"]["resolves_to"], "crm/book");
    assert_eq!(book["data"]["arguments"]["date"], "2026-12-03");
    // The calls carried the agent's trace (traceparent): they recorded the spans' trace id.
    let trace = book["data"]["trace_id"].as_str().unwrap();
    let calls = env["tool_events"].as_array().unwrap();
    assert!(
        calls.iter().all(|c| c["trace_id"] == trace),
        "calls: {calls:#?} trace {trace}"
    );

    // A tool result reported for a call never made.
    let a = s.attempt(json!({"contracts": ["booking"]})).await;
    run_agent(&s, &a, "phantom").await;
    let (checks, contract, verdict) = judged(&s, &a.id).await;
    assert_eq!(
        status_of(&checks, "reported_calls_arrived"),
        "failed",
        "{checks:?}"
    );
    assert_eq!(
        status_of(&checks, "claims_match_results"),
        "failed",
        "{checks:?}"
    );
    assert_eq!(
        status_of(&checks, "no_unknown_tools"),
        "passed",
        "{checks:?}"
    );
    assert_eq!(contract, "failed");
    assert_eq!(verdict, "fail");

    // "Booked" after a faulted write.
    let a = s
        .attempt(json!({"contracts": ["booking"],
            "faults": {"crm/book": {"kind": "status", "status": 503, "after_effect": false}}}))
        .await;
    assert_eq!(run_agent(&s, &a, "false_booked").await["booked"], false);
    let (checks, _, verdict) = judged(&s, &a.id).await;
    assert_eq!(
        status_of(&checks, "claims_match_results"),
        "failed",
        "{checks:?}"
    );
    assert_eq!(
        status_of(&checks, "reported_calls_arrived"),
        "passed",
        "{checks:?}"
    );
    assert_eq!(
        status_of(&checks, "arrived_calls_reported"),
        "passed",
        "{checks:?}"
    );
    assert_eq!(verdict, "fail");

    // The right work, then a hallucinated tool.
    let a = s.attempt(json!({"contracts": ["booking"]})).await;
    run_agent(&s, &a, "hallucinated").await;
    let (checks, _, verdict) = judged(&s, &a.id).await;
    assert_eq!(
        status_of(&checks, "no_unknown_tools"),
        "failed",
        "{checks:?}"
    );
    assert_eq!(
        status_of(&checks, "reported_calls_arrived"),
        "passed",
        "{checks:?}"
    );
    assert_eq!(verdict, "fail");

    // No agent spans at all: the checks are inconclusive, so the verdict fails.
    let a = s.attempt(json!({"contracts": ["booking"]})).await;
    let r = s
        .call(
            "GET",
            &format!("{}/contacts?phone=1", a.base("crm")),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (checks, _, verdict) = judged(&s, &a.id).await;
    assert!(
        checks.iter().all(|(_, st)| st == "inconclusive"),
        "{checks:?}"
    );
    assert_eq!(verdict, "fail");
    s.stop().await.unwrap();
}

fn json_span(trace: &str, span: &str, tool: &str, start: u64) -> Value {
    json!({"traceId": trace, "spanId": span, "name": format!("execute_tool {tool}"), "kind": 1,
    "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 1).to_string(),
    "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "gen_ai.tool.name", "value": {"stringValue": tool}},
        {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": "{\"password\":\"hunter2-very-secret\"}"}}
    ]})
}

#[tokio::test]
async fn otlp_json_spans_join_by_trace_id_once_and_refusals_say_why() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({"contracts": ["booking"]})).await;
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let tp = format!("00-{trace}-b7ad6b7169203331-01");
    let r = s
        .call(
            "GET",
            &format!("{}/contacts?phone=1", a.base("crm")),
            None,
            &[("traceparent", tp.as_str())],
        )
        .await;
    assert_eq!(r.status, 200);
    // No resource attribute: joined by the trace id the call carried.
    let body = json!({"resourceSpans": [{"resource": {"attributes": []},
        "scopeSpans": [{"spans": [json_span(trace, "00f067aa0ba902b7", "lookup", 10)]}]}]});
    for _ in 0..2 {
        // An exporter's retry is not taken twice.
        let r = s
            .call(
                "POST",
                OTLP,
                Some(&body),
                &[("content-type", "application/json")],
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.json(), json!({}));
    }
    let env = s.evidence(&a.id).await;
    let evs: Vec<&Value> = env["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "otel.tool_call")
        .collect();
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0]["data"]["trace_id"], trace);
    // Scrubbed like any event: the secret is not in the evidence, nor on disk.
    assert!(!env.to_string().contains("hunter2-very-secret"));

    // A trace no call carried: taken by no attempt, counted in partialSuccess.
    let other = json!({"resourceSpans": [{"scopeSpans": [{"spans": [
        json_span("11111111111111111111111111111111", "00f067aa0ba902b8", "lookup", 10)]}]}]});
    let r = s
        .call(
            "POST",
            OTLP,
            Some(&other),
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["partialSuccess"]["rejectedSpans"], "1", "{v}");
    assert!(v["partialSuccess"]["errorMessage"]
        .as_str()
        .unwrap()
        .contains("11111111111111111111111111111111"));

    // Not OTLP: 400 naming the member; another media type: 415.
    let r = s
        .call_raw(
            "POST",
            OTLP,
            "{\"resourceSpans\": 7}",
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("resourceSpans"), "{}", r.text);
    let r = s
        .call_raw(
            "POST",
            OTLP,
            "\u{1}\u{2}",
            &[("content-type", "application/x-protobuf")],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let r = s
        .call_raw("POST", OTLP, "x", &[("content-type", "text/plain")])
        .await;
    assert_eq!(
        r.status, 403,
        "the gate refuses a simple request: {}",
        r.text
    );
    // After the attempt ended, its spans are refused.
    let r = s
        .call(
            "DELETE",
            &format!("/_understudy/api/attempts/{}", a.id),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200);
    let late = json!({"resourceSpans": [{"resource": {"attributes": [
        {"key": "understudy.attempt_id", "value": {"stringValue": a.id}}]},
        "scopeSpans": [{"spans": [json_span(trace, "00f067aa0ba902b9", "book", 20)]}]}]});
    let r = s
        .call(
            "POST",
            OTLP,
            Some(&late),
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(
        r.json()["partialSuccess"]["rejectedSpans"],
        "1",
        "{}",
        r.text
    );
    s.stop().await.unwrap();
}

/// `understudy test` points the agent's OpenTelemetry SDK at the attempt with no
/// configuration: the honest agent passes (exit 0), the phantom one fails (exit 1) on its
/// own spans.
#[tokio::test]
async fn understudy_test_wires_the_agents_exporter_to_the_attempt() {
    if !support::otel_sdk_available() {
        return;
    }
    let p = project();
    for (mode, code, status) in [("honest", 0, "passed"), ("phantom", 1, "failed")] {
        let report = p.path().join(format!("report-{mode}"));
        let report_arg = report.display().to_string();
        let out = support::understudy_test_otel_agent(
            &p,
            &["--contract", "booking", "--report-dir", &report_arg],
            mode,
        )
        .output()
        .await
        .expect("understudy test runs");
        let env: Value =
            serde_json::from_slice(&std::fs::read(report.join("evidence.json")).unwrap()).unwrap();
        let r = &env["contract_results"][0];
        let arrived = r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "agent_trace.reported_calls_arrived")
            .unwrap_or_else(|| panic!("{env:#}"));
        assert_eq!(arrived["status"], status, "{mode}: {arrived}");
        assert_eq!(
            out.status.code(),
            Some(code),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Wait (at most 10 s) for an export whose body holds the agent's `execute_tool book` span;
/// its head. Every export is a `POST /v1/traces` of protobuf.
async fn book_export(c: &mut support::OtlpCollector) -> String {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        let (head, body) = tokio::time::timeout_at(deadline, c.rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no export with the book span; got {seen:?}"))
            .unwrap();
        assert!(head.starts_with("post /v1/traces "), "{head}");
        assert!(
            head.contains("content-type: application/x-protobuf"),
            "{head}"
        );
        if String::from_utf8_lossy(&body).contains("execute_tool book") {
            return head;
        }
        seen.push(body.len());
    }
}

/// `--otel-forward URL`: the agent's spans also reach the user's own collector (a loopback
/// receiver here), unchanged, while understudy still judges them.
#[tokio::test]
async fn otel_forward_passes_the_agents_spans_on() {
    if !support::otel_sdk_available() {
        return;
    }
    let p = project();
    let mut collector = support::otlp_collector(None).await;
    let report = p.path().join("report-forward").display().to_string();
    let url = format!("http://127.0.0.1:{}", collector.port);
    let out = support::understudy_test_otel_agent(
        &p,
        &[
            "--contract",
            "booking",
            "--otel-forward",
            &url,
            "--report-dir",
            &report,
        ],
        "honest",
    )
    .output()
    .await
    .expect("understudy test runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The agent's span names travel inside the protobuf bodies.
    book_export(&mut collector).await;
    // A URL that is neither http:// nor https:// is a usage error naming the flag.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
        .arg("test")
        .arg("--config")
        .arg(p.config_path())
        .args(["--otel-forward", "collector.example:4318", "--report-dir"])
        .arg(&report)
        .args(["--", "true"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--otel-forward"));
}

/// `--otel-forward https://…`: over TLS through understudy's one rustls stack. A collector
/// whose certificate chains to no trusted root gets nothing — the handshake is refused, the
/// run is not disturbed, and `understudy.log` says why and where the CA goes; with its CA in
/// `OTEL_EXPORTER_OTLP_CERTIFICATE` the agent's spans arrive, with the collector's key from
/// `OTEL_EXPORTER_OTLP_HEADERS`. A trust file that is not a certificate refuses the start.
#[tokio::test]
async fn otel_forward_to_an_https_collector_trusts_only_a_known_ca() {
    if !support::otel_sdk_available() {
        return;
    }
    let p = project();
    let (ca_pem, tls) = support::loopback_tls();
    let ca = p.path().join("collector-ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let mut collector = support::otlp_collector(Some(tls)).await;
    let url = format!("https://127.0.0.1:{}", collector.port);
    let run = |name: &str| p.path().join(name).display().to_string();

    // Untrusted: the web PKI roots do not know the loopback CA.
    let report = run("report-untrusted");
    let out = support::understudy_test_otel_agent(
        &p,
        &[
            "--contract",
            "booking",
            "--otel-forward",
            &url,
            "--report-dir",
            &report,
        ],
        "honest",
    )
    .env_remove("OTEL_EXPORTER_OTLP_CERTIFICATE")
    .env_remove("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
    .output()
    .await
    .expect("understudy test runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "the agent's run is not disturbed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log =
        std::fs::read_to_string(std::path::Path::new(&report).join("understudy.log")).unwrap();
    let warning = log
        .lines()
        .find(|l| l.contains("OTLP forward failed"))
        .unwrap_or_else(|| panic!("no forward failure in the log: {log}"));
    assert!(
        warning.contains("certificate") && warning.contains("OTEL_EXPORTER_OTLP_CERTIFICATE"),
        "{warning}"
    );
    assert!(
        collector
            .failed_handshakes
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 1,
        "the collector saw no refused handshake"
    );
    assert!(
        collector.rx.try_recv().is_err(),
        "a request reached the untrusted collector"
    );

    // Trusted through the standard variable, with the collector's key.
    let report = run("report-trusted");
    let out = support::understudy_test_otel_agent(
        &p,
        &[
            "--contract",
            "booking",
            "--otel-forward",
            &url,
            "--report-dir",
            &report,
        ],
        "honest",
    )
    .env("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca)
    .env("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=k%201")
    .output()
    .await
    .expect("understudy test runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = book_export(&mut collector).await;
    assert!(head.contains("x-collector-key: k 1"), "{head}");

    // A trust file that holds no certificate: the start is refused, naming it.
    let bad = p.path().join("not-a-ca.pem");
    std::fs::write(&bad, "hello").unwrap();
    let out = support::understudy_test_otel_agent(
        &p,
        &["--otel-forward", &url, "--report-dir", &run("report-bad")],
        "honest",
    )
    .env("OTEL_EXPORTER_OTLP_CERTIFICATE", &bad)
    .output()
    .await
    .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_CERTIFICATE") && err.contains("not-a-ca.pem"),
        "{err}"
    );
}
