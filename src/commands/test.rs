//! `understudy test [--config F] [--contract ID…] [--variant I/OP=V…] [--mode M]
//! [--forward-proxy] [--report-dir D] [--timeout S] -- CMD ARGS…` (docs/src/getting-started/first-test.md).
//!
//! 1. Starts the server in process on `127.0.0.1:<free port>` (the project's integrations,
//!    store and mode; `--mode` overrides; the record modes are refused: use `record`).
//! 2. Creates one attempt through the admin API (`POST /_understudy/api/attempts` with
//!    `test_run_id`, `variants` and, when given, `contracts`), with
//!    `Authorization: Bearer $UNDERSTUDY_ADMIN_TOKEN` when that is set (a project with
//!    `"trust_loopback": false` needs a token; the `run` scope is enough). CMD inherits it.
//! 3. Runs CMD in its own process group with stdin/stdout/stderr inherited and this
//!    environment: `UNDERSTUDY_URL`, `UNDERSTUDY_ATTEMPT` (the token), `UNDERSTUDY_ATTEMPT_ID`,
//!    `UNDERSTUDY_URL_<INTEGRATION>` (upper-cased, other characters `_`), the OpenTelemetry
//!    variables of [`otel_env`] (the agent's spans come to the attempt; `--otel-forward URL`
//!    also passes them on to the user's collector); with
//!    `--forward-proxy` also `HTTPS_PROXY`/`HTTP_PROXY` (and lower-case) as
//!    `http://<token>:x@127.0.0.1:<port>` (the password is ignored by understudy, but Python
//!    requests drops proxy credentials that have none), `NO_PROXY=127.0.0.1,localhost,::1` (so nothing
//!    inherited bypasses the proxy), and `SSL_CERT_FILE`, `CURL_CA_BUNDLE`,
//!    `REQUESTS_CA_BUNDLE`, `NODE_EXTRA_CA_CERTS` naming the CA certificate.
//! 4. When CMD exits — or on `--timeout`, SIGINT or SIGTERM, after which its process group
//!    gets SIGTERM and, 5 s later, SIGKILL — whatever is left in its process group gets
//!    SIGTERM, the attempt is ended and its evidence read once, in process (the admin
//!    route's own functions, no HTTP round trip), the server stopped, and
//!    `evidence.json`, `junit.xml` and `report.html` written to `--report-dir` (default
//!    `understudy-report`) with a `test_run` member saying how CMD ended.
//!    understudy's log goes to `<report dir>/understudy.log` (`--log-stderr` to keep it on
//!    stderr); a one-line summary goes to stderr; stdout is CMD's alone.
//!
//! Exit code: CMD's own code when it failed (124 timed out, 130 interrupted, 128+N killed by
//! signal N, 127 could not be started), else 1 when the verdict is `fail`, else 0; 2 for usage
//! errors (a bad `--variant` or `--timeout`, unknown contracts or operations) and whenever understudy could not judge (ending the attempt or reading its evidence
//! failed: `evidence.json` then holds `judge_error`), 1 when the server cannot start.
//!
//! The attempt is created `exclusive` (a call of the run that reaches the server without its
//! token fails it, `outside_attempt`) and expecting calls (a run with no tool call and no
//! agent-side event fails `no_calls`; `--allow-no-calls` when that is the point).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

use super::Exit;
use crate::app::{App, AppOptions};
use crate::cli::TestArgs;
use crate::config::{Config, Mode};
use crate::evidence::report::TestRun;
use crate::server::{self, Transport};

const SIGINT: i32 = 2;
const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;
/// How long a stopped command gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

/// `understudy test` (module doc).
pub fn test(args: &TestArgs) -> Exit {
    let mut variants = BTreeMap::new();
    for v in &args.variants {
        match v.split_once('=') {
            Some((op, var)) if op.contains('/') && !var.is_empty() => {
                variants.insert(op.to_string(), var.to_string());
            }
            _ => {
                eprintln!(
                    "understudy test: --variant {v:?}: expected INTEGRATION/OPERATION=VARIANT"
                );
                return Exit::Usage;
            }
        }
    }
    if let Some(t) = args.timeout {
        if !(t.is_finite() && t > 0.0) {
            eprintln!("understudy test: --timeout must be a positive number of seconds, got {t}");
            return Exit::Usage;
        }
    }
    let path = args
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::config::PROJECT_FILE));
    let mut config = match Config::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("understudy test: {e}");
            return if e.not_found {
                Exit::Usage
            } else {
                Exit::Problems
            };
        }
    };
    if let Err(e) = config.apply_overrides(Some("127.0.0.1:0"), args.mode, args.data_dir.as_deref())
    {
        eprintln!("understudy test: {e}");
        return Exit::Usage;
    }
    if let Some(url) = &args.otel_forward {
        match crate::telemetry::forward_url(url) {
            Ok(u) => config.otel.forward = Some(u),
            Err(e) => {
                eprintln!("understudy test: --otel-forward: {e}");
                return Exit::Usage;
            }
        }
    }
    if matches!(config.mode, Mode::Record | Mode::RecordMissing) {
        eprintln!(
            "understudy test: mode `{}` writes drafts; use `understudy record` for recording",
            config.mode
        );
        return Exit::Usage;
    }
    let report_dir = std::path::absolute(&args.report_dir).unwrap_or(args.report_dir.clone());
    if let Err(e) = std::fs::create_dir_all(&report_dir) {
        eprintln!(
            "understudy test: cannot create the report dir {}: {e}",
            report_dir.display()
        );
        return Exit::Usage;
    }
    if !args.log_stderr {
        let log = report_dir.join("understudy.log");
        match std::fs::File::create(&log) {
            Ok(f) => init_logging(Some(f)),
            Err(e) => {
                eprintln!("understudy test: cannot create {}: {e}", log.display());
                return Exit::Usage;
            }
        }
    } else {
        init_logging(None);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("understudy test: cannot start the runtime: {e}");
            return Exit::Problems;
        }
    };
    let code = rt.block_on(run(args, config, variants, report_dir));
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}

async fn run(
    args: &TestArgs,
    config: Config,
    variants: BTreeMap<String, String>,
    report_dir: PathBuf,
) -> Exit {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("understudy test: cannot listen on 127.0.0.1:0: {e}");
            return Exit::Problems;
        }
    };
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("understudy test: {e}");
            return Exit::Problems;
        }
    };
    let ca_dir = args.ca_dir.clone().unwrap_or_else(|| config.ca_dir.clone());
    let transport =
        match Transport::for_serve(&ca_dir, false, args.forward_proxy, "127.0.0.1:0", addr) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("understudy test: {e}");
                return Exit::Problems;
            }
        };
    let app = match tokio::task::block_in_place(|| App::build(AppOptions::new(config))) {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("understudy test: {e}");
            return Exit::Problems;
        }
    };
    tracing::info!(%addr, mode = %app.mode, "serving for understudy test");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server_task = tokio::spawn(server::serve_with(
        listener,
        app.clone(),
        transport,
        async move {
            let _ = stop_rx.await;
        },
    ));
    let stop_server = |task: tokio::task::JoinHandle<std::io::Result<()>>| async move {
        let _ = stop_tx.send(());
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "server stopped with an error"),
            Err(e) => tracing::warn!(error = %e, "server task failed"),
        }
    };

    let base = format!("http://{addr}");
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let test_run_id = args.test_run_id.clone().unwrap_or_else(|| {
        format!(
            "understudy-test-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        )
    });
    // Exclusive: a call of the run that misses the attempt fails it (`outside_attempt`).
    let mut body = json!({ "test_run_id": test_run_id, "variants": variants,
        "exclusive": true, "expect_calls": !args.allow_no_calls });
    if !args.contracts.is_empty() {
        body["contracts"] = json!(args.contracts);
    }
    let created = call(
        &client,
        "POST",
        &format!("{base}/_understudy/api/attempts"),
        Some(&body),
    )
    .await;
    let created = match created {
        Ok((201, v)) => v,
        Ok((status, v)) => {
            let msg = v["error"]["message"].as_str().unwrap_or("");
            eprintln!(
                "understudy test: the attempt could not be created ({status}): {msg}{}",
                match v["error"]["details"].as_array() {
                    Some(d) if !d.is_empty() => format!(" {}", Value::Array(d.clone())),
                    _ => String::new(),
                }
            );
            stop_server(server_task).await;
            return if status >= 500 {
                Exit::Problems
            } else {
                Exit::Usage
            };
        }
        Err(e) => {
            eprintln!("understudy test: the attempt could not be created: {e}");
            stop_server(server_task).await;
            return Exit::Problems;
        }
    };
    let attempt_id = created["attempt_id"].as_str().unwrap_or("").to_string();
    let token = created["token"].as_str().unwrap_or("").to_string();
    // `understudy mcp stdio` started by CMD's agent gets a cleaned environment (no
    // UNDERSTUDY_ATTEMPT): it finds this server and the attempt through the data dir.
    let _published = super::mcp::publish(
        &app.config.data_dir,
        &base,
        "test",
        Some((&token, &attempt_id)),
    );
    let mut env: Vec<(String, String)> = vec![
        ("UNDERSTUDY_URL".into(), base.clone()),
        ("UNDERSTUDY_ATTEMPT".into(), token.clone()),
        ("UNDERSTUDY_ATTEMPT_ID".into(), attempt_id.clone()),
    ];
    if let Some(urls) = created["base_urls"].as_object() {
        for (name, url) in urls {
            if let Some(u) = url.as_str() {
                env.push((format!("UNDERSTUDY_URL_{}", env_name(name)), u.to_string()));
            }
        }
    }
    if args.forward_proxy {
        // A password is needed: Python requests (and so simple-salesforce) drops proxy
        // credentials without one, which would send the calls to the default attempt.
        let proxy = format!("http://{token}:x@{addr}");
        for k in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
            env.push((k.into(), proxy.clone()));
        }
        for k in ["NO_PROXY", "no_proxy"] {
            env.push((k.into(), "127.0.0.1,localhost,::1".into()));
        }
        let cert = crate::tls::CaPaths::in_dir(&ca_dir).cert;
        let cert = std::path::absolute(&cert).unwrap_or(cert);
        for k in [
            "SSL_CERT_FILE",
            "CURL_CA_BUNDLE",
            "REQUESTS_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",
        ] {
            env.push((k.into(), cert.display().to_string()));
        }
    }
    otel_env(&mut env, &base, &attempt_id, |k| {
        std::env::var(k).ok().filter(|v| !v.is_empty())
    });
    tracing::info!(attempt = %attempt_id, command = ?args.command, "running the command");

    let started = Instant::now();
    let mut run = run_command(&args.command, &env, args.timeout).await;
    run.duration_s = started.elapsed().as_secs_f64();

    // End the attempt, then read its evidence once, in process (the evidence route's own
    // functions: its lock, its durability, the one verdict). Either failing means
    // understudy could not judge: exit 2.
    let ended = crate::admin::end_attempt(&app, &attempt_id).await;
    let read = match ended {
        Ok(_) => crate::admin::evidence(&app, &attempt_id)
            .await
            .map(|(_, env)| env)
            .map_err(|e| format!("reading the evidence failed: {e}")),
        Err(e) => Err(format!("ending the attempt failed: {e}")),
    };
    drop(app);
    stop_server(server_task).await;
    let judged = read.and_then(|env| {
        crate::evidence::Verdict::from_envelope(&env)
            .map(|v| (env, v))
            .map_err(|e| format!("the evidence holds no verdict: {e}"))
    });
    let (envelope, verdict) = match judged {
        Ok(x) => x,
        Err(why) => {
            eprintln!("understudy test: {why}; the run cannot be judged (exit 2)");
            run.understudy_exit_code = Exit::Usage.code();
            let env = json!({ "attempt_id": attempt_id, "test_run": run,
                "judge_error": why });
            if let Err(e) = std::fs::create_dir_all(&report_dir).and_then(|()| {
                std::fs::write(
                    report_dir.join(crate::evidence::report::JSON_FILE),
                    serde_json::to_vec_pretty(&env).unwrap_or_default(),
                )
            }) {
                eprintln!("understudy test: {e}");
            }
            return Exit::Usage;
        }
    };

    let exit = if let Some(c) = run.understudy_code() {
        Exit::Code(c)
    } else if !verdict.passed() {
        Exit::Problems
    } else {
        Exit::Ok
    };
    run.understudy_exit_code = exit.code();
    let mut envelope = envelope;
    if let Value::Object(m) = &mut envelope {
        m.insert(
            "test_run".into(),
            serde_json::to_value(&run).unwrap_or(Value::Null),
        );
    }
    let written = crate::commands::report::write_all(&report_dir, &envelope);
    let reasons: Vec<String> = verdict
        .reasons
        .iter()
        .map(|r| format!("{}: {}", r.code, r.message))
        .collect();
    let calls = envelope["tool_events"].as_array().map_or(0, Vec::len);
    // One reason a line, in the verdict's order (a forgotten token first, with its fix).
    eprintln!(
        "understudy test: {}; verdict {} ({calls} tool calls); exit {}{}",
        run.reason.as_deref().unwrap_or(""),
        verdict.word(),
        exit.code(),
        if reasons.is_empty() {
            String::new()
        } else {
            format!("; {} reason(s):", reasons.len())
        }
    );
    for r in &reasons {
        eprintln!("  - {r}");
    }
    match written {
        Ok(()) => eprintln!(
            "understudy test: reports in {} ({}, {}, {})",
            report_dir.display(),
            crate::evidence::report::HTML_FILE,
            crate::evidence::report::JUNIT_FILE,
            crate::evidence::report::JSON_FILE
        ),
        Err(e) => {
            eprintln!("understudy test: {e}");
            if exit == Exit::Ok {
                return Exit::Problems;
            }
        }
    }
    exit
}

impl TestRun {
    /// The exit code `understudy test` passes on for the command, `None` when it succeeded.
    fn understudy_code(&self) -> Option<i32> {
        match self.stopped.as_deref() {
            Some("timeout") => return Some(124),
            Some("interrupted") => return Some(130),
            _ => {}
        }
        match (self.exit_code, self.signal) {
            (Some(0), _) => None,
            (Some(c), _) => Some(c),
            (None, Some(s)) => Some(128 + s),
            (None, None) => Some(127),
        }
    }
}

/// Run the command to its end (or stop it); how it ended.
async fn run_command(
    command: &[String],
    env: &[(String, String)],
    timeout: Option<f64>,
) -> TestRun {
    let mut run = TestRun {
        command: command.to_vec(),
        ..TestRun::default()
    };
    // Signals are taken over before the child exists: a Ctrl-C from now on stops it.
    #[cfg(unix)]
    let (mut sigint, mut sigterm) = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::interrupt()).ok(),
            signal(SignalKind::terminate()).ok(),
        )
    };
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::inherit())
        .stdout(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            run.reason = Some(format!(
                "the command {:?} could not be started: {e}",
                command[0]
            ));
            return run;
        }
    };
    let pid = child.id();
    let stop_reason: Option<(&str, String)>;
    let deadline = async {
        match timeout {
            Some(t) => tokio::time::sleep(Duration::from_secs_f64(t)).await,
            None => std::future::pending().await,
        }
    };
    #[cfg(unix)]
    let interrupted = async {
        let int = async {
            match sigint.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        let term = async {
            match sigterm.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = int => SIGINT,
            _ = term => SIGTERM,
        }
    };
    #[cfg(not(unix))]
    let interrupted = async {
        let _ = tokio::signal::ctrl_c().await;
        SIGINT
    };
    let status = tokio::select! {
        s = child.wait() => { stop_reason = None; s }
        _ = deadline => {
            stop_reason = Some(("timeout", format!("timed out after {} s", timeout.unwrap_or(0.0))));
            stop(&mut child, pid).await
        }
        sig = interrupted => {
            stop_reason = Some(("interrupted", format!(
                "interrupted ({} to understudy)",
                if sig == SIGINT { "SIGINT" } else { "SIGTERM" }
            )));
            stop(&mut child, pid).await
        }
    };
    // Whatever CMD left behind in its process group.
    if let Some(p) = pid {
        signal_group(p, SIGTERM);
    }
    match status {
        Ok(s) => {
            run.exit_code = s.code();
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                run.signal = s.signal();
            }
        }
        Err(e) => {
            run.reason = Some(format!("waiting for the command failed: {e}"));
        }
    }
    run.reason = Some(match (&stop_reason, run.exit_code, run.signal) {
        (Some((kind, why)), _, _) => {
            run.stopped = Some(kind.to_string());
            format!(
                "{why}: the command (process group {}) was stopped",
                pid.unwrap_or(0)
            )
        }
        (None, Some(0), _) => "the command exited with code 0".to_string(),
        (None, Some(c), _) => format!("the command failed with exit code {c}"),
        (None, None, Some(s)) => format!("the command was killed by signal {s}"),
        (None, None, None) => run
            .reason
            .clone()
            .unwrap_or_else(|| "the command ended".into()),
    });
    run
}

/// SIGTERM to the command's process group, SIGKILL after [`GRACE`]; its exit status.
async fn stop(
    child: &mut tokio::process::Child,
    pid: Option<u32>,
) -> std::io::Result<std::process::ExitStatus> {
    if let Some(p) = pid {
        signal_group(p, SIGTERM);
    }
    match tokio::time::timeout(GRACE, child.wait()).await {
        Ok(s) => s,
        Err(_) => {
            if let Some(p) = pid {
                signal_group(p, SIGKILL);
            }
            let _ = child.start_kill();
            child.wait().await
        }
    }
}

/// Send `sig` to the process group `pgid` (the command's: it was started as its leader).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn signal_group(pgid: u32, sig: i32) {
    if let Ok(p) = i32::try_from(pgid) {
        if p > 1 {
            // SAFETY: kill(2) with a negative pid signals that process group; no memory is
            // touched.
            unsafe {
                libc::kill(-p, sig);
            }
        }
    }
}

#[cfg(all(unix, not(all(target_os = "linux", target_env = "gnu"))))]
fn signal_group(pgid: u32, sig: i32) {
    if pgid > 1 {
        let _ = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg("--")
            .arg(format!("-{pgid}"))
            .status();
    }
}

#[cfg(not(unix))]
fn signal_group(_pgid: u32, _sig: i32) {}

/// The OpenTelemetry variables for CMD (docs/src/guides/traces.md): an instrumented agent
/// reports its spans to the attempt's OTLP traces endpoint with no configuration.
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (the SDKs append `/v1/traces`) and
/// `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf` unless the user set an endpoint (either
/// `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or a protocol, and
/// with `UNDERSTUDY_ADMIN_TOKEN` set, `OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20…`
/// unless the user set headers;
/// `OTEL_RESOURCE_ATTRIBUTES` gains `understudy.attempt_id=<id>` unless it names one already
/// (the user's own attributes are kept).
pub fn otel_env(
    env: &mut Vec<(String, String)>,
    base: &str,
    attempt_id: &str,
    user: impl Fn(&str) -> Option<String>,
) {
    if user("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
        && user("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
    {
        env.push((
            "OTEL_EXPORTER_OTLP_ENDPOINT".into(),
            format!("{base}/_understudy/api/otlp"),
        ));
        if user("OTEL_EXPORTER_OTLP_PROTOCOL").is_none()
            && user("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").is_none()
        {
            env.push(("OTEL_EXPORTER_OTLP_PROTOCOL".into(), "http/protobuf".into()));
        }
        // A project that needs a token for the admin API needs it for the traces route
        // too; CMD inherits the token already, the exporter gets it as its header.
        if let Some(t) = user("UNDERSTUDY_ADMIN_TOKEN") {
            if user("OTEL_EXPORTER_OTLP_HEADERS").is_none()
                && user("OTEL_EXPORTER_OTLP_TRACES_HEADERS").is_none()
            {
                env.push((
                    "OTEL_EXPORTER_OTLP_HEADERS".into(),
                    format!("Authorization=Bearer%20{t}"),
                ));
            }
        }
    }
    let attr = format!("understudy.attempt_id={attempt_id}");
    match user("OTEL_RESOURCE_ATTRIBUTES") {
        None => env.push(("OTEL_RESOURCE_ATTRIBUTES".into(), attr)),
        Some(v)
            if v.split(',')
                .any(|kv| kv.trim().starts_with("understudy.attempt_id=")) => {}
        Some(v) => env.push(("OTEL_RESOURCE_ATTRIBUTES".into(), format!("{v},{attr}"))),
    }
}

/// `UNDERSTUDY_URL_<NAME>`: upper-cased, every character other than `A-Z0-9` as `_`.
pub fn env_name(integration: &str) -> String {
    integration
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// One admin API call on the in-process server.
async fn call(
    client: &hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Full<Bytes>,
    >,
    method: &str,
    url: &str,
    body: Option<&Value>,
) -> Result<(u16, Value), String> {
    let bytes = body
        .map(|b| serde_json::to_vec(b).unwrap_or_default())
        .unwrap_or_default();
    let mut req = hyper::Request::builder().method(method).uri(url);
    if let Some(t) = std::env::var("UNDERSTUDY_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    if body.is_some() {
        req = req.header(hyper::header::CONTENT_TYPE, "application/json");
    }
    let req = req
        .body(Full::new(Bytes::from(bytes)))
        .map_err(|e| e.to_string())?;
    let resp = client.request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let v = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Ok((status, v))
}

/// Logs to `file` (or stderr) through `tracing` (`RUST_LOG` filters, default `info`).
fn init_logging(file: Option<std::fs::File>) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match file {
        Some(f) => builder
            .with_ansi(false)
            .with_writer(move || {
                crate::util::scrub::LogWriter::new(f.try_clone().expect("the log file handle"))
            })
            .try_init(),
        None => builder
            .with_writer(|| crate::util::scrub::LogWriter::new(std::io::stderr()))
            .try_init(),
    };
}

#[cfg(test)]
#[path = "test_tests.rs"]
mod tests;
