//! `understudy mcp wrap --integration NAME [--mode record|dry-run|record-missing] [--out DIR]
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
//! The child's own HTTP calls land in the same attempt (the default attempt of this process):
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

/// The child's proxy and CA variables for a forward proxy at `addr` with the CA certificate
/// `cert` (module doc).
pub fn proxy_env(addr: std::net::SocketAddr, cert: &std::path::Path) -> Vec<(String, String)> {
    let mut env = Vec::new();
    let proxy = format!("http://{addr}");
    for k in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
        env.push((k.to_string(), proxy.clone()));
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

/// `understudy mcp wrap` (module doc).
pub fn wrap(args: &McpWrapArgs) -> Exit {
    super::mcp_project::init_logging();
    if !matches!(args.mode, Mode::Record | Mode::DryRun | Mode::RecordMissing) {
        eprintln!("understudy mcp wrap: --mode must be record, dry-run or record-missing");
        return Exit::Usage;
    }
    if matches!(args.mode, Mode::Record | Mode::RecordMissing) && args.out.is_none() {
        eprintln!(
            "understudy mcp wrap: mode `{}` writes draft operation files: give the directory with --out DIR",
            args.mode
        );
        return Exit::Usage;
    }
    let mut config = match super::mcp_project::load_project(
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
        let max_line = crate::http::Limits::default().max_body;
        // The forward proxy the child's own HTTP calls go through.
        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("understudy mcp wrap: cannot listen on 127.0.0.1:0: {e}");
                return Exit::Problems;
            }
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => {
                eprintln!("understudy mcp wrap: {e}");
                return Exit::Problems;
            }
        };
        let ca_dir = args.ca_dir.clone().unwrap_or_else(|| config.ca_dir.clone());
        let (transport, env) = match Transport::for_serve(&ca_dir, false, true, "127.0.0.1:0", addr) {
            Ok(t) => {
                let cert = crate::tls::CaPaths::in_dir(&ca_dir).cert;
                let cert = std::path::absolute(&cert).unwrap_or(cert);
                (t, proxy_env(addr, &cert))
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
                eprintln!("understudy mcp wrap: cannot start {:?}: {e}", args.command[0]);
                return Exit::Problems;
            }
        };
        config.mode = args.mode;
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
                return Exit::Problems;
            }
        };
        let attempt = app
            .attempts
            .default_attempt()
            .map(|a| a.id.clone())
            .unwrap_or_default();
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
            "understudy mcp wrap: {:?} (process group {}) serves `{}` in mode {}; the default attempt {attempt}{}",
            args.command.join(" "),
            child.pgid().unwrap_or(0),
            args.integration,
            args.mode,
            if proxied {
                format!("; the child's HTTP calls go through the forward proxy http://{addr}")
            } else {
                String::new()
            }
        );
        let end = stdio::run(
            Target::Local(app),
            &args.integration,
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
        match end {
            End::Eof => Exit::Ok,
            End::Fault(why) | End::Io(why) => {
                eprintln!("understudy mcp wrap: the session ended: {why}");
                Exit::Problems
            }
        }
    });
    rt.shutdown_timeout(Duration::from_millis(100));
    code
}
