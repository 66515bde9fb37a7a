//! What the listener speaks (docs/src/reference/https.md, docs/src/operations/limits.md): plain HTTP or TLS (`serve --tls`), whether it is
//! also a forward proxy (`serve --forward-proxy`, [`super::connect`]), and the serving of one
//! connection — shared by the listener's connections and the decrypted CONNECT tunnels, so
//! every one of them gets the same limits, watchdog and graceful shutdown.
//!
//! - [`Transport`]: the TLS server configuration (one leaf for the listen hosts, ALPN `h2` +
//!   `http/1.1`) and the forward proxy's leaf cache, both from the local CA
//!   ([`Transport::for_serve`]; a missing or unusable CA is a start-up error that suggests
//!   `understudy ca init`). [`Transport::plain`] is neither.
//! - [`Edge`]: the transport plus what every connection shares — the hyper-util auto builder
//!   (HTTP/1.1 and HTTP/2: by ALPN over TLS, by prior knowledge in clear) and the graceful
//!   shutdown that watches listener connections and tunnels alike.
//! - `serve_accepted`: one accepted TCP connection — the TLS handshake first under `--tls`
//!   (bounded by the header read timeout: a client that connects and never finishes its
//!   handshake is closed like one that never finishes its request head), then `serve_io`.
//! - `serve_io`: HTTP on any byte stream. The stream is wrapped in the listener's
//!   read tracker *after* decryption, so the watchdog sees requests, not TLS records (an h2
//!   client is recognised by its preface, as in clear).
//!
//! `--tls` and `--forward-proxy` combine: the proxy is then an HTTPS proxy
//! (`HTTPS_PROXY=https://<token>@HOST:PORT`, the client trusting the CA for both the proxy
//! and the intercepted hosts).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::connect::Tunnel;
use super::http::{self, ConnState, Tracked};
use crate::app::App;
use crate::tls::{self, Ca, LeafCache, TlsError};

/// What the listener speaks.
#[derive(Clone, Default)]
pub struct Transport {
    /// `serve --tls`: the listener's TLS configuration.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// `serve --forward-proxy`: per-host leaves for CONNECT interception.
    pub forward_proxy: Option<Arc<LeafCache>>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("tls", &self.tls.is_some())
            .field("forward_proxy", &self.forward_proxy.is_some())
            .finish()
    }
}

impl Transport {
    /// Plain HTTP, no forward proxy.
    pub fn plain() -> Transport {
        Transport::default()
    }

    /// `http` or `https`: the scheme of the listener's own URLs.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// TLS for a listener bound to `bound` with `ca`: a leaf naming the listen hosts
    /// ([`tls::listen_hosts`], plus the host of `listen` when it is a name, e.g.
    /// `myhost:7777`).
    pub fn with_tls(mut self, ca: &Ca, listen: &str, bound: SocketAddr) -> Result<Self, TlsError> {
        let mut hosts = tls::listen_hosts(&bound);
        if let Some(name) = listen_name(listen) {
            if !hosts.contains(&name) {
                hosts.push(name);
            }
        }
        self.tls = Some(tls::server_config_for_hosts(ca, &hosts)?);
        Ok(self)
    }

    /// The forward proxy, its leaves signed by `ca`.
    pub fn with_forward_proxy(mut self, ca: Arc<Ca>) -> Self {
        self.forward_proxy = Some(Arc::new(LeafCache::new(ca)));
        self
    }

    /// What `understudy serve` asked for: the CA is loaded from `ca_dir` only when `tls` or
    /// `forward_proxy` is set (its error names the file and suggests `understudy ca init`).
    pub fn for_serve(
        ca_dir: &Path,
        tls_on: bool,
        forward_proxy: bool,
        listen: &str,
        bound: SocketAddr,
    ) -> Result<Transport, TlsError> {
        if !tls_on && !forward_proxy {
            return Ok(Transport::plain());
        }
        tls::init_crypto();
        let ca = Arc::new(Ca::load(ca_dir)?);
        let mut t = Transport::plain();
        if tls_on {
            t = t.with_tls(&ca, listen, bound)?;
        }
        if forward_proxy {
            t = t.with_forward_proxy(ca);
        }
        Ok(t)
    }
}

/// The host of `HOST:PORT` when it is a DNS name (not an IP literal), normalized.
fn listen_name(listen: &str) -> Option<String> {
    let (host, _) = listen.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || host.parse::<IpAddr>().is_ok() {
        return None;
    }
    tls::normalize_host(host).ok()
}

/// What every connection of one server shares.
pub struct Edge {
    pub transport: Transport,
    acceptor: Option<TlsAcceptor>,
    builder: auto::Builder<TokioExecutor>,
    /// `None` once shutdown began: no new connection or tunnel is watched (nor served).
    graceful: Mutex<Option<GracefulShutdown>>,
    /// `true` once shutdown began (a held fault answer stops waiting).
    closing: tokio::sync::watch::Sender<bool>,
}

impl Edge {
    pub(super) fn new(transport: Transport, builder: auto::Builder<TokioExecutor>) -> Edge {
        Edge {
            acceptor: transport.tls.clone().map(TlsAcceptor::from),
            transport,
            builder,
            graceful: Mutex::new(Some(GracefulShutdown::new())),
            closing: tokio::sync::watch::Sender::new(false),
        }
    }

    /// Resolves once shutdown began.
    pub(super) async fn closing(&self) {
        let mut rx = self.closing.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// A graceful-shutdown watcher for a new connection or tunnel; `None` once shutting down.
    pub(super) fn watcher(&self) -> Option<Watcher> {
        self.lock().as_ref().map(GracefulShutdown::watcher)
    }

    /// Begin shutdown: the returned handle signals every watched connection and resolves when
    /// all of them finished.
    pub(super) fn begin_shutdown(&self) -> Option<GracefulShutdown> {
        self.closing.send_replace(true);
        self.lock().take()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<GracefulShutdown>> {
        self.graceful.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Serve one accepted TCP connection: the TLS handshake first under `--tls`.
pub(super) async fn serve_accepted(
    stream: TcpStream,
    peer: SocketAddr,
    app: Arc<App>,
    edge: Arc<Edge>,
    watcher: Watcher,
) {
    let Some(acceptor) = edge.acceptor.clone() else {
        return serve_io(
            stream,
            peer,
            app,
            edge,
            watcher,
            None,
            http::tcp_linger_zero,
        )
        .await;
    };
    match tokio::time::timeout(app.limits.header_read_timeout, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => {
            let linger = |s: &tokio_rustls::server::TlsStream<TcpStream>| {
                http::tcp_linger_zero(s.get_ref().0)
            };
            serve_io(tls, peer, app, edge, watcher, None, linger).await
        }
        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake not finished in time; closing"),
    }
}

/// Serve HTTP/1.1 and HTTP/2 (with upgrades, for CONNECT) on `io` until the connection ends,
/// the watchdog closes it, or shutdown drains it. `tunnel` marks every request of a decrypted
/// CONNECT tunnel. `linger_zero` makes the close of `io` a TCP reset (a `reset` fault), when
/// it is a socket of ours.
pub(super) async fn serve_io<IO>(
    io: IO,
    peer: SocketAddr,
    app: Arc<App>,
    edge: Arc<Edge>,
    watcher: Watcher,
    tunnel: Option<Arc<Tunnel>>,
    linger_zero: fn(&IO),
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn_state = Arc::new(ConnState::new(&app.limits));
    let io = TokioIo::new(Tracked::new(io, conn_state.clone(), linger_zero));
    let svc_app = app.clone();
    let svc_edge = edge.clone();
    let svc_state = conn_state.clone();
    let svc = hyper::service::service_fn(move |req| {
        let app = svc_app.clone();
        let edge = svc_edge.clone();
        let st = svc_state.clone();
        let tunnel = tunnel.clone();
        http::serve_request(app, edge, st, peer, tunnel, req)
    });
    let conn = edge
        .builder
        .serve_connection_with_upgrades(io, svc)
        .into_owned();
    let conn = watcher.watch(conn);
    tokio::select! {
        r = conn => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }
        why = http::watchdog(conn_state, app.limits) => {
            tracing::debug!(%peer, why, "closing connection");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_names() {
        assert_eq!(listen_name("127.0.0.1:7777"), None);
        assert_eq!(listen_name("[::1]:7777"), None);
        assert_eq!(listen_name("0.0.0.0:1"), None);
        assert_eq!(
            listen_name("MyHost.Local:7777").as_deref(),
            Some("myhost.local")
        );
        assert_eq!(listen_name("localhost:0").as_deref(), Some("localhost"));
        assert_eq!(listen_name("nonsense"), None);
    }

    #[test]
    fn plain_needs_no_ca() {
        let t = Transport::for_serve(
            Path::new("/nonexistent/certs"),
            false,
            false,
            "127.0.0.1:0",
            "127.0.0.1:1".parse().unwrap(),
        )
        .unwrap();
        assert_eq!(t.scheme(), "http");
        assert!(t.forward_proxy.is_none());
    }

    #[test]
    fn a_missing_ca_suggests_ca_init() {
        let tmp = tempfile::tempdir().unwrap();
        for (tls_on, proxy) in [(true, false), (false, true)] {
            let err = Transport::for_serve(
                &tmp.path().join("certs"),
                tls_on,
                proxy,
                "127.0.0.1:0",
                "127.0.0.1:1".parse().unwrap(),
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("understudy ca init"), "{err}");
        }
    }

    #[test]
    fn tls_and_proxy_from_one_ca() {
        let tmp = tempfile::tempdir().unwrap();
        Ca::init(tmp.path(), false).unwrap();
        let t = Transport::for_serve(
            tmp.path(),
            true,
            true,
            "localhost:7777",
            "127.0.0.1:7777".parse().unwrap(),
        )
        .unwrap();
        assert_eq!(t.scheme(), "https");
        assert!(t.forward_proxy.is_some());
        let alpn = &t.tls.as_ref().unwrap().alpn_protocols;
        assert_eq!(alpn, &[b"h2".to_vec(), b"http/1.1".to_vec()]);
    }
}
