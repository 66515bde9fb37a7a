//! The listener (docs/src/operations/limits.md): HTTP/1.1 and h2c (prior knowledge) on one socket through
//! hyper-util's auto builder, the connection limits, buffering of request bodies, and
//! graceful shutdown. Under `--tls` the same after the handshake (h2 by ALPN), and CONNECT
//! tunnels of `--forward-proxy` get the same too: [`super::transport`], [`super::connect`].
//!
//! Limits ([`Limits`], defaults from docs/src/operations/limits.md):
//! - request body ≤ 10 MiB: a larger body is answered 413 without reading on — at once when
//!   its `Content-Length` says so, as soon as the limit is passed when it is streamed
//!   (chunked, or h2 without a length). HTTP/1.1: the 413 says `Connection: close`, and the
//!   close is a lingering one ([`Tracked`]): the write side is shut down, then what the
//!   client still sends is read and discarded, at most [`Limits::drain_bytes`] (40 MiB) for
//!   at most [`Limits::drain_time`] (5 s), so that a client that writes its whole body before
//!   reading reads the 413 rather than a reset. HTTP/2: the 413 ends the stream, whose body
//!   is dropped unread: the stream is reset (`RST_STREAM` `NO_ERROR`), the connection stays;
//! - header read timeout 10 s: an HTTP/1 connection that started a request head and has
//!   not completed it within that time is closed;
//! - idle keep-alive 60 s: a connection with no request in flight for that long is closed
//!   (hyper's own header timer also runs on idle keep-alive connections, so both timers are
//!   kept here, by a per-connection watchdog, instead);
//! - a slow body: 60 s to read it whole, then 408;
//! - garbage on a socket is a protocol error of that connection only: hyper answers 400 (or
//!   drops it), the connection closes, nothing else is affected.
//!
//! Shutdown: when the shutdown future resolves the listener stops accepting, every
//! connection is asked to finish (in-flight calls complete, keep-alive connections close),
//! and [`crate::store::Store::flush`] runs before [`serve_listener`] returns.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::http::{HeaderValue, StatusCode};
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use crate::app::App;
use crate::http::fault::Abort;
use crate::http::{json_response, HttpResponse, Limits, Request};

/// Accept connections until `shutdown` resolves, then drain and flush the store.
/// `transport`: plain or TLS, forward proxy or not ([`super::transport`]).
pub async fn serve_listener(
    listener: TcpListener,
    app: Arc<App>,
    transport: super::transport::Transport,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .keep_alive(true)
        // Our watchdog owns the header timer (see the module doc).
        .header_read_timeout(None)
        .max_buf_size(64 * 1024);
    builder.http2().max_concurrent_streams(256);
    // The builder and the graceful shutdown, shared with CONNECT tunnels.
    let edge = Arc::new(super::transport::Edge::new(transport, builder));
    // Every connection task, so shutdown can wait until none holds the app (and its store).
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            _ = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        // EMFILE and friends: back off a little instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                app.metrics.connection_opened();
                let Some(watcher) = edge.watcher() else { continue };
                // TLS handshake (under --tls), then HTTP with the watchdog: `transport`.
                tasks.spawn(super::transport::serve_accepted(stream, peer, app.clone(), edge.clone(), watcher));
            }
        }
    }
    drop(listener);
    tracing::info!("shutting down: finishing in-flight calls");
    let drain = async {
        if let Some(graceful) = edge.begin_shutdown() {
            graceful.shutdown().await;
        }
        while tasks.join_next().await.is_some() {}
    };
    tokio::select! {
        _ = drain => {}
        _ = tokio::time::sleep(app.limits.shutdown_grace) => {
            tracing::warn!("shutdown grace period over; closing the remaining connections");
        }
    }
    tasks.shutdown().await;
    if let Err(e) = app.store.flush().await {
        tracing::error!(error = %e, "flushing the store at shutdown failed");
        return Err(std::io::Error::other(e.to_string()));
    }
    tracing::info!("stopped: in-flight calls finished, store flushed");
    Ok(())
}

/// The service error of a call whose answer a fault replaced with an abort
/// ([`crate::http::fault::Abort`]): hyper then closes the HTTP/1.1 connection without a
/// response byte (a TCP reset when [`ConnState`] says so), or resets the h2 stream.
#[derive(Debug)]
pub struct Aborted;

impl std::fmt::Display for Aborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the answer was aborted by an injected fault")
    }
}

impl std::error::Error for Aborted {}

/// [`handle`], then carry out the [`Abort`] its response may carry (the `crate::http::fault`
/// table): wait out a hold (cut short by shutdown), mark an HTTP/1.1 reset for the socket's
/// close, and fail the service call so that nothing is sent.
pub(super) async fn serve_request(
    app: Arc<App>,
    edge: Arc<super::transport::Edge>,
    conn: Arc<ConnState>,
    peer: SocketAddr,
    tunnel: Option<Arc<super::connect::Tunnel>>,
    req: hyper::Request<Incoming>,
) -> Result<HttpResponse, Aborted> {
    let h2 = req.version() == hyper::Version::HTTP_2;
    let _guard = conn.request_started();
    let mut resp = handle(app, edge.clone(), peer, tunnel, req).await;
    if resp.extensions().get::<BodyRefused>().is_some() && !h2 {
        // The rest of the body is unread: the connection cannot be reused.
        resp.headers_mut()
            .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        conn.drain_on_close();
    }
    let Some(abort) = crate::http::fault::abort_of(&resp) else {
        return Ok(resp);
    };
    drop(resp);
    match abort {
        Abort::Reset if !h2 => conn.reset_on_close(),
        Abort::Reset | Abort::Close => {}
        Abort::Hold { ms } => {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = edge.closing() => {}
            }
        }
    }
    Err(Aborted)
}

/// Buffer one request and hand it to [`super::dispatch`] (admin or proxy). `tunnel`: the
/// request came through a CONNECT tunnel ([`super::connect`]).
async fn handle(
    app: Arc<App>,
    edge: Arc<super::transport::Edge>,
    peer: SocketAddr,
    tunnel: Option<Arc<super::connect::Tunnel>>,
    req: hyper::Request<Incoming>,
) -> HttpResponse {
    if req.method() == hyper::Method::CONNECT {
        return super::connect::connect(app, edge, peer, tunnel.as_deref(), req).await;
    }
    let received = Instant::now();
    let (parts, body) = req.into_parts();
    let limits = app.limits;
    let declared = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|len| len > limits.max_body as u64) {
        // Refused before a byte of the body is read.
        return too_large(limits.max_body);
    }
    let body = match tokio::time::timeout(
        limits.body_read_timeout,
        read_body(body, limits.max_body),
    )
    .await
    {
        Ok(Ok(b)) => b,
        Ok(Err(BodyError::TooLarge)) => return too_large(limits.max_body),
        Ok(Err(BodyError::Read(e))) => {
            return plain_error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!("cannot read the request body: {e}"),
            )
        }
        Err(_) => {
            return plain_error(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "the request body was not received in time",
            )
        }
    };
    let mut headers = parts.headers;
    // HTTP/2 carries the host as `:authority`, an absolute-form target as its authority
    // (which then wins over `Host`, RFC 9112 3.2.2): the control-plane gate reads it as
    // `Host` (`crate::admin::gate`).
    if crate::admin::is_admin_path(parts.uri.path()) {
        if let Some(v) = parts
            .uri
            .authority()
            .and_then(|a| hyper::http::HeaderValue::from_str(a.as_str()).ok())
        {
            headers.insert(hyper::header::HOST, v);
        }
    }
    let request = Request::new(
        parts.method.as_str(),
        parts.uri.path(),
        parts.uri.query(),
        headers,
        body,
        peer,
        received,
    );
    // Forward proxy: the target host selects the integration (or the request is refused).
    let request = match super::connect::route_request(
        &app,
        &edge,
        tunnel.as_deref(),
        &parts.uri,
        parts.version,
        request,
    )
    .await
    {
        Ok(r) => r,
        Err(refused) => return *refused,
    };
    super::dispatch(app, request).await
}

enum BodyError {
    TooLarge,
    Read(String),
}

/// Read a whole body of at most `max` bytes: [`BodyError::TooLarge`] as soon as it passes
/// `max` (the rest is not read).
async fn read_body(mut body: Incoming, max: usize) -> Result<Bytes, BodyError> {
    let mut buf = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > max {
                return Err(BodyError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(buf))
}

fn plain_error(status: StatusCode, code: &str, message: &str) -> HttpResponse {
    json_response(
        status,
        &serde_json::json!({ "error": { "code": code, "message": message, "details": [] } }),
    )
}

/// Marks the 413 of a body refused unread: [`serve_request`] closes an HTTP/1.1 connection
/// after it, with a bounded drain.
#[derive(Debug, Clone, Copy)]
struct BodyRefused;

fn too_large(max: usize) -> HttpResponse {
    let mut r = plain_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        &format!("the request body exceeds the limit of {max} bytes"),
    );
    r.extensions_mut().insert(BodyRefused);
    r
}

// ---------------------------------------------------------------------------------------------
// Per-connection watchdog

#[derive(Debug)]
struct ConnInner {
    in_flight: usize,
    /// When the connection last became idle (no request in flight).
    idle_since: Instant,
    /// When the first byte of a not-yet-dispatched request head arrived.
    head_since: Option<Instant>,
    /// The client spoke the HTTP/2 prior-knowledge preface: no head timer.
    h2: bool,
    first_read: bool,
}

/// Activity of one connection, shared by its IO wrapper, its service and its watchdog.
#[derive(Debug)]
pub struct ConnState {
    inner: Mutex<ConnInner>,
    changed: Notify,
    /// A `reset` fault aborted an HTTP/1.1 call: the socket closes with `SO_LINGER` 0.
    reset: AtomicBool,
    /// A body was refused unread (413 on HTTP/1.1): the close drains ([`Drain`]).
    drain: AtomicBool,
    /// The bounds of that drain: bytes, time.
    drain_bounds: (u64, Duration),
}

impl ConnState {
    pub(super) fn new(limits: &Limits) -> ConnState {
        ConnState {
            inner: Mutex::new(ConnInner {
                in_flight: 0,
                idle_since: Instant::now(),
                head_since: None,
                h2: false,
                first_read: true,
            }),
            changed: Notify::new(),
            reset: AtomicBool::new(false),
            drain: AtomicBool::new(false),
            drain_bounds: (limits.drain_bytes, limits.drain_time),
        }
    }

    /// Drain what the client still sends when the connection closes ([`Tracked`]).
    fn drain_on_close(&self) {
        self.drain.store(true, Ordering::Relaxed);
    }

    /// Close the connection with a TCP reset when its byte stream is dropped ([`Tracked`]).
    fn reset_on_close(&self) {
        self.reset.store(true, Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ConnInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn on_read(&self, data: &[u8]) {
        let mut st = self.lock();
        if st.first_read {
            st.first_read = false;
            st.h2 = data.starts_with(b"PRI * HTTP/2.0");
        }
        if st.in_flight == 0 && st.head_since.is_none() && !st.h2 {
            st.head_since = Some(Instant::now());
            drop(st);
            self.changed.notify_one();
        }
    }

    fn request_started(self: &Arc<Self>) -> InFlight {
        let mut st = self.lock();
        st.in_flight += 1;
        st.head_since = None;
        drop(st);
        self.changed.notify_one();
        InFlight(self.clone())
    }
}

/// Marks one request in flight until dropped.
struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.in_flight = st.in_flight.saturating_sub(1);
        if st.in_flight == 0 {
            st.idle_since = Instant::now();
        }
        drop(st);
        self.0.changed.notify_one();
    }
}

/// Resolves when the connection should be closed: a request head took longer than the
/// header read timeout, or no request was in flight for the idle timeout.
pub(super) async fn watchdog(state: Arc<ConnState>, limits: Limits) -> &'static str {
    loop {
        let notified = state.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (deadline, why) = {
            let st = state.lock();
            if st.in_flight > 0 {
                (None, "")
            } else if let Some(h) = st.head_since {
                (Some(h + limits.header_read_timeout), "header read timeout")
            } else {
                (
                    Some(st.idle_since + limits.idle_timeout),
                    "idle keep-alive timeout",
                )
            }
        };
        match deadline {
            Some(d) if Instant::now() >= d => return why,
            Some(d) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(d.into()) => {}
                    _ = &mut notified => {}
                }
            }
            None => notified.await,
        }
    }
}

/// A connection's byte stream (TCP, or the decrypted TLS stream), reporting reads to the
/// watchdog. Dropped after a `reset` fault ([`ConnState::reset_on_close`]), it sets
/// `SO_LINGER` 0 on its socket first (`linger_zero`), so the close is a TCP RST. Shut down
/// after a refused body ([`ConnState::drain_on_close`]), it drains first ([`Drain`]).
pub(super) struct Tracked<S = TcpStream> {
    inner: S,
    state: Arc<ConnState>,
    linger_zero: fn(&S),
    drain: Option<Drain>,
}

impl<S> Tracked<S> {
    pub(super) fn new(inner: S, state: Arc<ConnState>, linger_zero: fn(&S)) -> Tracked<S> {
        Tracked {
            inner,
            state,
            linger_zero,
            drain: None,
        }
    }
}

/// A lingering close (as nginx does after an early answer): the write side is shut down (the
/// client reads the answer, then the end), then what the client still sends is read and
/// discarded until it closes, an error, `left` bytes or the deadline — whichever comes first.
/// Closing with unread bytes would make the kernel send a reset, which can destroy the
/// answer before the client reads it.
struct Drain {
    shut: bool,
    left: u64,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl Drain {
    fn new((bytes, time): (u64, Duration)) -> Drain {
        Drain {
            shut: false,
            left: bytes,
            deadline: Box::pin(tokio::time::sleep(time)),
        }
    }

    /// Shut down `io`'s write side, then read and discard; `Ready` when the drain is over.
    fn poll<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        io: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.shut {
            std::task::ready!(Pin::new(&mut *io).poll_shutdown(cx))?;
            self.shut = true;
        }
        let mut scratch = [0u8; 16 * 1024];
        loop {
            if self.left == 0 || self.deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match std::task::ready!(Pin::new(&mut *io).poll_read(cx, &mut buf)) {
                Ok(()) if !buf.filled().is_empty() => {
                    self.left = self.left.saturating_sub(buf.filled().len() as u64);
                }
                // The client closed (or broke) its side: nothing left to wait for.
                Ok(()) | Err(_) => return Poll::Ready(Ok(())),
            }
        }
    }
}

impl<S> Drop for Tracked<S> {
    fn drop(&mut self) {
        if self.state.reset.load(Ordering::Relaxed) {
            (self.linger_zero)(&self.inner);
        }
    }
}

/// `SO_LINGER` 0 on a TCP socket: its close sends a RST.
pub(super) fn tcp_linger_zero(s: &TcpStream) {
    if let Err(e) = s.set_zero_linger() {
        tracing::debug!(error = %e, "cannot set SO_LINGER 0; the connection closes with a FIN");
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &r {
            let new = &buf.filled()[before..];
            if !new.is_empty() {
                self.state.on_read(new);
            }
        }
        r
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if !this.state.drain.load(Ordering::Relaxed) {
            return Pin::new(&mut this.inner).poll_shutdown(cx);
        }
        let bounds = this.state.drain_bounds;
        this.drain
            .get_or_insert_with(|| Drain::new(bounds))
            .poll(&mut this.inner, cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
