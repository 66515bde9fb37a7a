//! `understudy mcp wrap --integration NAME [--mode record|dry-run|record-missing] [--out DIR]
//! [--attempt TOKEN] [--url URL]
//! [--allow-writes] -- CMD ARGS…` (docs/src/guides/mcp-stdio.md): the agent starts this
//! command instead of a real stdio MCP server; it starts the server as a child
//! ([`crate::server::stdio_child`]: own process group, the caller's environment) and serves
//! the agent over stdio ([`crate::server::stdio`]) through the integration's MCP endpoint in
//! the chosen mode, with the child as the integration's upstream. So the per-message policy
//! is the HTTP MCP forward path's: `record` forwards and captures every exchange into scrubbed
//! draft operation files under `--out DIR/<integration>/` (written when stdin closes);
//! `dry-run` forwards reads and answers writes itself (blocked, simulated or tagged by the
//! tool annotations and the operation file's `write`), so a write never reaches the child;
//! `record-missing` forwards only what no operation answers. When the agent closes stdin the
//! child's stdin is closed, then SIGTERM, then SIGKILL go to its process group.
//!
//! The child's own HTTP calls land in the same attempt (the one the MCP calls use; with
//! `--attempt` or `UNDERSTUDY_ATTEMPT` its token is the proxy's credentials):
//! understudy listens on a loopback port as a forward proxy (HTTPS intercepted with the
//! project's CA, `--ca-dir`, default the project's `ca_dir`) and the child gets, beside the
//! caller's environment, `HTTPS_PROXY`/`HTTP_PROXY` (and lower-case) naming it,
//! `NO_PROXY=127.0.0.1,localhost,::1`, and `SSL_CERT_FILE`, `CURL_CA_BUNDLE`,
//! `REQUESTS_CA_BUNDLE`, `NODE_EXTRA_CA_CERTS` naming the CA certificate — the variables of
//! `understudy test --forward-proxy`. Calls to hosts of the project's integrations are
//! answered in the mode (`record` forwards and records them, `dry-run` blocks their writes…);
//! others are refused. Without a CA (`understudy ca init`) the child gets none of these and a
//! line on stderr says so.
//!
//! **Joined to a running server.** With `--url`, or when a running `understudy serve`/`test`
//! of the project is published in the data dir (as for `understudy mcp stdio`), `wrap` opens
//! no store: the agent's messages go to that server's endpoint for the integration, with the
//! attempt chosen as `mcp stdio` chooses it (`--attempt`, `UNDERSTUDY_ATTEMPT`, the running
//! test's attempt, the default attempt), and each names the child's loopback bridge as the
//! integration's upstream for that message (`crate::proxy::mcp::UPSTREAM_HEADER`). That
//! server's mode applies (`--mode`, `--out` and `--allow-writes` are ignored, a line on stderr
//! says so): in `replay` its mocks answer and the child gets nothing; in `dry-run` reads reach
//! the child and writes never do; a recording `serve` drafts into its own `--out`. The
//! child's proxy is that server, with the attempt's token as the proxy credentials (answered
//! when it runs with `--forward-proxy`), so both layers land in that server's attempt.
//!
//! Exit codes: 0 when the session ended with stdin; 1 when the child or the server state
//! could not start or a fault ended the session; 2 for usage errors.

use std::sync::Arc;
use std::time::Duration;

use super::Exit;
use crate::app::{App, AppOptions};
use crate::cli::McpWrapArgs;
use crate::config::Mode;
use crate::server::stdio::{self, End, Target};
use crate::server::stdio_child;
use crate::server::transport::Transport;

/// The child's proxy and CA variables for a forward proxy at `proxy` (`http://[TOKEN:x@]HOST:PORT`)
/// with the CA certificate `cert` (module doc).
pub fn proxy_env(proxy: &str, cert: &std::path::Path) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for k in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
        env.push((k.to_string(), proxy.to_string()));
    }
    for k in ["NO_PROXY", "no_proxy"] {
        env.push((k.to_string(), "127.0.0.1,localhost,::1".to_string()));
    }
    for k in [
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
    ] {
        env.push((k.to_string(), cert.display().to_string()));
    }
    env
}

/// The proxy URL for `host_port`, with the attempt's token as the proxy credentials (a
/// password is needed: Python requests drops credentials without one).
fn proxy_url(host_port: &str, attempt: Option<&str>) -> String {
    match attempt {
        Some(t) => format!("http://{t}:x@{host_port}"),
        None => format!("http://{host_port}"),
    }
}

/// `understudy mcp wrap` (module doc).
pub fn wrap(args: &McpWrapArgs) -> Exit {
    super::mcp_project::init_logging();
    if let Some(u) = &args.url {
        if !u.starts_with("http://") {
            eprintln!("understudy mcp wrap: --url {u}: expected http://HOST:PORT of a running understudy server");
            return Exit::Usage;
        }
    }
    let config = match super::mcp_project::load_project(
        "mcp wrap",
        args.config.as_ref(),
        args.data_dir.as_deref(),
        &args.integration,
    ) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("understudy mcp wrap: cannot start the runtime: {e}");
            return Exit::Problems;
        }
    };
    let code = rt.block_on(async move {
        let route = super::mcp_project::route(
            args.url.as_deref(),
            args.attempt.as_deref(),
            &config.data_dir,
        )
        .await;
        let end = match route.server {
            Some((url, place)) => {
                joined(args, &config, &url, &place, route.attempt, &route.which).await
            }
            None => standalone(args, config, route.attempt, route.which).await,
        };
        match end {
            Ok(End::Eof) => Exit::Ok,
            Ok(End::Fault(why) | End::Io(why)) => {
                eprintln!("understudy mcp wrap: the session ended: {why}");
                Exit::Problems
            }
            Err(code) => code,
        }
    });
    rt.shutdown_timeout(Duration::from_millis(100));
    code
}

/// The child's proxy variables for a proxy at `host_port` when the CA in `ca_dir` exists;
/// else none, and a line on stderr says why.
fn child_env(
    ca_dir: &std::path::Path,
    host_port: &str,
    attempt: Option<&str>,
) -> Vec<(String, String)> {
    let cert = crate::tls::CaPaths::in_dir(ca_dir).cert;
    if !cert.exists() {
        eprintln!(
            "understudy mcp wrap: no CA in {} (`understudy ca init` creates it): the child gets no proxy, its own HTTP calls are not in the attempt",
            ca_dir.display()
        );
        return Vec::new();
    }
    let cert = std::path::absolute(&cert).unwrap_or(cert);
    proxy_env(&proxy_url(host_port, attempt), &cert)
}

/// Joined to the running server at `url` (module doc).
async fn joined(
    args: &McpWrapArgs,
    config: &crate::config::Config,
    url: &str,
    place: &str,
    attempt: Option<String>,
    which: &str,
) -> Result<End, Exit> {
    if args.mode.is_some() || args.out.is_some() || args.allow_writes {
        eprintln!(
            "understudy mcp wrap: joined the running server: its mode, drafts directory and write policy apply (--mode, --out and --allow-writes are ignored)"
        );
    }
    let max_line = crate::http::Limits::default().max_body;
    let ca_dir = args.ca_dir.clone().unwrap_or_else(|| config.ca_dir.clone());
    let host_port = url.trim_start_matches("http://").trim_end_matches('/');
    let env = child_env(&ca_dir, host_port, attempt.as_deref());
    let child = match stdio_child::start(&args.command, &env, max_line).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "understudy mcp wrap: cannot start {:?}: {e}",
                args.command[0]
            );
            return Err(Exit::Problems);
        }
    };
    eprintln!(
        "understudy mcp wrap: {:?} (process group {}) serves `{}` {place}, in that server's mode; {which}{}",
        args.command.join(" "),
        child.pgid().unwrap_or(0),
        args.integration,
        if env.is_empty() {
            String::new()
        } else {
            format!("; the child's HTTP calls go through that server as a forward proxy (http://{host_port})")
        }
    );
    let end = stdio::run(
        Target::Remote(url.to_string()),
        &args.integration,
        attempt,
        Some(child.url.clone()),
        max_line,
        tokio::io::stdin(),
        tokio::io::stdout(),
    )
    .await;
    let status = child.shutdown().await;
    tracing::info!(?status, "wrap: the child stopped");
    Ok(end)
}

/// Serving from the project's own store, with a forward proxy of its own (module doc).
async fn standalone(
    args: &McpWrapArgs,
    mut config: crate::config::Config,
    attempt: Option<String>,
    mut which: String,
) -> Result<End, Exit> {
    let mode = args.mode.unwrap_or(Mode::Record);
    if !matches!(mode, Mode::Record | Mode::DryRun | Mode::RecordMissing) {
        eprintln!("understudy mcp wrap: --mode must be record, dry-run or record-missing");
        return Err(Exit::Usage);
    }
    if matches!(mode, Mode::Record | Mode::RecordMissing) && args.out.is_none() {
        eprintln!(
            "understudy mcp wrap: mode `{mode}` writes draft operation files: give the directory with --out DIR"
        );
        return Err(Exit::Usage);
    }
    let max_line = crate::http::Limits::default().max_body;
    // The forward proxy the child's own HTTP calls go through.
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("understudy mcp wrap: cannot listen on 127.0.0.1:0: {e}");
            return Err(Exit::Problems);
        }
    };
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("understudy mcp wrap: {e}");
            return Err(Exit::Problems);
        }
    };
    let ca_dir = args.ca_dir.clone().unwrap_or_else(|| config.ca_dir.clone());
    let (transport, env) = match Transport::for_serve(&ca_dir, false, true, "127.0.0.1:0", addr) {
        Ok(t) => {
            let cert = crate::tls::CaPaths::in_dir(&ca_dir).cert;
            let cert = std::path::absolute(&cert).unwrap_or(cert);
            let proxy = proxy_url(&addr.to_string(), attempt.as_deref());
            (t, proxy_env(&proxy, &cert))
        }
        Err(e) => {
            eprintln!(
                "understudy mcp wrap: no forward proxy for the child ({e}): its own HTTP calls are not in the attempt (`understudy ca init` creates the CA)"
            );
            (Transport::plain(), Vec::new())
        }
    };
    let child = match stdio_child::start(&args.command, &env, max_line).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "understudy mcp wrap: cannot start {:?}: {e}",
                args.command[0]
            );
            return Err(Exit::Problems);
        }
    };
    config.mode = mode;
    if let Some(i) = config.integrations.get_mut(&args.integration) {
        i.upstream = Some(child.url.clone());
    }
    let mut opts = AppOptions::new(config);
    opts.forward.out_dir = args.out.clone();
    opts.forward.allow_writes = args.allow_writes;
    let app = match tokio::task::block_in_place(|| App::build(opts)) {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("understudy mcp wrap: {e}");
            child.shutdown().await;
            return Err(Exit::Problems);
        }
    };
    if attempt.is_none() {
        if let Some(d) = app.attempts.default_attempt() {
            which = format!("the default attempt {}", d.id);
        }
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let proxied = !env.is_empty();
    let proxy = tokio::spawn(crate::server::serve_with(
        listener,
        app.clone(),
        transport,
        async move {
            let _ = stop_rx.await;
        },
    ));
    eprintln!(
        "understudy mcp wrap: {:?} (process group {}) serves `{}` in mode {mode}; {which}{}",
        args.command.join(" "),
        child.pgid().unwrap_or(0),
        args.integration,
        if proxied {
            format!("; the child's HTTP calls go through the forward proxy http://{addr}")
        } else {
            String::new()
        }
    );
    let end = stdio::run(
        Target::Local(app),
        &args.integration,
        attempt,
        None,
        max_line,
        tokio::io::stdin(),
        tokio::io::stdout(),
    )
    .await;
    let status = child.shutdown().await;
    tracing::info!(?status, "wrap: the child stopped");
    let _ = stop_tx.send(());
    match proxy.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "wrap: the forward proxy stopped with an error"),
        Err(e) => tracing::warn!(error = %e, "wrap: the forward proxy task failed"),
    }
    Ok(end)
}
