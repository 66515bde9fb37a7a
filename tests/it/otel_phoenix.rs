//! Traces out, into a real tracing backend: Arize Phoenix (PyPI `arize-phoenix`, pinned in
//! `.ci/run`), started here on free loopback ports with its SQLite store in a temp dir. The
//! agent (`tests/otel/agent.py`, OpenTelemetry Python SDK) exports its own spans to Phoenix;
//! understudy, given only `"otel": {"endpoint": <Phoenix>}`, exports a span per served call.
//! Read back through Phoenix's REST API, understudy's tool spans sit inside the agent's
//! trace, under the agent's own `execute_tool` spans, with their attributes — and no secret.
//!
//! Ignored by a plain `cargo test` (Phoenix takes minutes to install): `.ci/run` runs it in
//! its own phase with `PHOENIX=<venv>/bin/phoenix`; without `PHOENIX` it looks for
//! `/opt/understudy-phoenix/bin/phoenix` and `target/phoenix-venv/bin/phoenix`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::otel::project;
use crate::support::Server;

const SECRET: &str = "sk-live-phoenix-7f3a9c";

fn phoenix_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("PHOENIX") {
        return PathBuf::from(p);
    }
    for p in [
        "/opt/understudy-phoenix/bin/phoenix",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/target/phoenix-venv/bin/phoenix"
        ),
    ] {
        if std::path::Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!("Arize Phoenix is not installed: python3 -m venv target/phoenix-venv && target/phoenix-venv/bin/pip install arize-phoenix==20.26.1 (or set PHOENIX)");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
#[ignore = "needs Arize Phoenix (installed by .ci/run's Phoenix phase, which runs it)"]
async fn understudys_tool_spans_appear_inside_the_agents_trace_in_phoenix() {
    let work = tempfile::tempdir().unwrap();
    let (port, grpc) = (free_port(), free_port());
    let mut phoenix = tokio::process::Command::new(phoenix_bin())
        .arg("serve")
        .env("PHOENIX_WORKING_DIR", work.path())
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", grpc.to_string())
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .env_remove("PHOENIX_SQL_DATABASE_URL")
        .env_remove("PHOENIX_COLLECTOR_ENDPOINT")
        .stdout(std::fs::File::create(work.path().join("phoenix.log")).unwrap())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("phoenix starts");
    let base = format!("http://127.0.0.1:{port}");
    let http = crate::support::client();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    loop {
        if let Ok(r) = http.get(format!("{base}/v1/projects")).send().await {
            if r.status().is_success() {
                break;
            }
        }
        if let Ok(Some(st)) = phoenix.try_wait() {
            panic!(
                "phoenix exited ({st}): {}",
                std::fs::read_to_string(work.path().join("phoenix.log")).unwrap_or_default()
            );
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "phoenix did not answer within 240 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The user's whole change: an endpoint (and, here, content on to see the arguments).
    let p = project();
    p.write_config(json!({
        "contracts": "contracts",
        "otel": {"endpoint": base, "content": true}
    }));
    let s = Server::start(&p).await;
    // No contract pinned: the agent's spans go to Phoenix, not to understudy, so the
    // agent_trace checks would be inconclusive (tests/it/otel.rs judges those).
    let a = s.attempt(json!({})).await;
    let out = crate::support::otel_agent("honest")
        .env("AGENT_BASE_URL", s.url(&a.base("crm")))
        .env("AGENT_SECRET", SECRET)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &base)
        .output()
        .await
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "agent: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.end_attempt(&a.id).await;
    let app = s.app.clone();
    s.stop().await.unwrap();
    let otel = app.otel.as_ref().unwrap();
    assert_eq!(otel.dropped(), 0, "spans dropped on the way to Phoenix");

    // Read every span of the default project back through Phoenix's REST API.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let spans: Vec<Value> = loop {
        let r: Value = http
            .get(format!("{base}/v1/projects/default/spans?limit=1000"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let spans = r["data"].as_array().cloned().unwrap_or_default();
        let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
        if names.contains(&"understudy attempt")
            && names.iter().filter(|n| **n == "execute_tool book").count() == 2
            && names
                .iter()
                .filter(|n| **n == "execute_tool lookup")
                .count()
                == 2
        {
            break spans;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Phoenix holds only {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let attr = |s: &Value, k: &str| -> Value {
        let a = &s["attributes"];
        if let Some(v) = a.get(k) {
            return v.clone();
        }
        // Nested form: {"gen_ai": {"tool": {"name": …}}}.
        let mut cur = a;
        for part in k.split('.') {
            cur = &cur[part];
        }
        cur.clone()
    };
    let span_id = |s: &Value| s["context"]["span_id"].as_str().unwrap().to_string();
    let trace_id = |s: &Value| s["context"]["trace_id"].as_str().unwrap().to_string();
    let ours: Vec<&Value> = spans
        .iter()
        .filter(|s| !attr(s, "understudy.attempt_id").is_null())
        .collect();
    assert!(ours.len() >= 3, "{spans:#?}");
    let agent_root = spans
        .iter()
        .find(|s| s["name"] == "invoke_agent booking-agent")
        .unwrap_or_else(|| panic!("the agent's span: {spans:#?}"));
    for tool in ["lookup", "book"] {
        let name = format!("execute_tool {tool}");
        let agent_tool = spans
            .iter()
            .find(|s| s["name"] == name.as_str() && attr(s, "understudy.attempt_id").is_null())
            .unwrap_or_else(|| panic!("the agent's {name}: {spans:#?}"));
        let mine = ours
            .iter()
            .find(|s| s["name"] == name.as_str())
            .unwrap_or_else(|| panic!("understudy's {name}: {spans:#?}"));
        // Inside the agent's trace, under the agent's own tool span.
        assert_eq!(trace_id(mine), trace_id(agent_root), "{mine:#}");
        assert_eq!(
            mine["parent_id"].as_str(),
            Some(span_id(agent_tool).as_str()),
            "{mine:#}"
        );
        assert_eq!(
            attr(mine, "gen_ai.operation.name"),
            "execute_tool",
            "{mine:#}"
        );
        assert_eq!(attr(mine, "gen_ai.tool.name"), tool, "{mine:#}");
        assert_eq!(
            attr(mine, "understudy.attempt_id"),
            a.id.as_str(),
            "{mine:#}"
        );
        assert_eq!(attr(mine, "understudy.result_status"), "ok", "{mine:#}");
        assert_eq!(
            mine["span_kind"], "TOOL",
            "Phoenix shows it as a tool: {mine:#}"
        );
    }
    let att = ours
        .iter()
        .find(|s| s["name"] == "understudy attempt")
        .unwrap();
    assert_eq!(trace_id(att), trace_id(agent_root));
    assert_eq!(attr(att, "understudy.verdict"), "pass", "{att:#}");
    // No secret in anything understudy sent (the agent's own span carries what it chose to).
    for s in &ours {
        assert!(
            !s.to_string().contains(SECRET),
            "a secret reached Phoenix: {s:#}"
        );
    }
    let book = ours
        .iter()
        .find(|s| s["name"] == "execute_tool book")
        .unwrap();
    assert!(
        book.to_string().contains("api_key"),
        "the arguments are on the span: {book:#}"
    );
    phoenix.kill().await.ok();
}
