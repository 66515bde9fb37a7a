//! The running server's edge: the listener, TLS and CONNECT, the hot-reload task, and the
//! dispatch of each buffered request to the admin API or the proxy. This is the only module
//! that names both `crate::admin` and `crate::proxy`; the state they share is `crate::app`.
//!
//! | module | owns |
//! |---|---|
//! | [`http`] | the listener (HTTP/1.1 + h2c), limits, watchdog, graceful shutdown |
//! | [`transport`] | `--tls`, the per-connection serving shared by connections and tunnels |
//! | [`connect`] | `--forward-proxy`: CONNECT interception and absolute-form requests, host → integration |
//! | [`reload`] | the hot-reload task that polls the operation files while serving |
//! | [`stdio`] | `understudy mcp stdio`: MCP over stdin/stdout through [`dispatch`] (in process) or a running server's endpoint |
//! | [`stdio_child`] | `understudy mcp wrap`: a real stdio MCP server as a child behind a loopback Streamable HTTP endpoint |
//!
//! Entry points: [`serve`] / [`serve_with`] take a bound listener and a shutdown future
//! (STYLE habit 2: tests bind `127.0.0.1:0` and pass their own); [`shutdown_signal`] is the
//! one `understudy serve` passes. The server recursion: a CONNECT tunnel's decrypted stream
//! is served by the same [`transport`] code as a listener connection, so HTTP inside a tunnel
//! goes through `dispatch` too.

pub mod connect;
pub mod http;
pub mod reload;
pub mod stdio;
pub mod stdio_child;
pub mod transport;

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;

use crate::app::App;
use crate::http::{full, HttpResponse, Request};

pub use transport::Transport;

/// Serve `app` on a bound listener until `shutdown` resolves; then finish in-flight calls and
/// flush the store.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_with(listener, app, Transport::plain(), shutdown).await
}

/// [`serve`] with a [`Transport`]: TLS (`--tls`) and/or the forward proxy (`--forward-proxy`).
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    transport: Transport,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    app.set_serving(listener.local_addr().ok(), transport.scheme());
    // Hot reload of operation files while serving (`reload`), stopped before returning.
    let watcher = reload::Watcher::start(app.clone());
    let r = http::serve_listener(listener, app.clone(), transport, shutdown).await;
    watcher.stop().await;
    // Record modes: the drafts of this run (`crate::app::recorder`).
    crate::app::recorder::flush_at_shutdown(&app).await;
    // Traces out: the last spans sent (bounded wait).
    app.flush_telemetry().await;
    r
}

/// Answer one buffered request: the admin API on the listener's own origin, else the proxy
/// (`crate::proxy::handle`, in every mode). A HEAD answer keeps its headers and loses its
/// body.
pub(crate) async fn dispatch(app: Arc<App>, request: Request) -> HttpResponse {
    let is_head = request.method == "HEAD";
    let mut resp = if request.via_proxy.is_none() && crate::admin::is_admin_path(&request.path) {
        crate::admin::handle(&app, request).await
    } else {
        crate::proxy::handle(app, request).await
    };
    if is_head {
        *resp.body_mut() = full(Bytes::new());
    }
    resp
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutdown signal received");
}
