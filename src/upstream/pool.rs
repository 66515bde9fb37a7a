//! Plain `http://` upstreams (issue 20, the request path): a pool of HTTP/1.1 connections
//! that the **calling task drives itself**, instead of hyper-util's pooled client, which
//! gives every connection a task of its own and spawns one more task per request to put the
//! connection back when its body ends. On a loaded 2-core machine each of those hand-offs
//! between tasks could wake the other worker thread; a forwarded call paid for them at every
//! step (request written, head parsed, body read, connection returned).
//!
//! - [`Pool::send`]: take an idle connection to `host:port` (or connect: TCP with
//!   `TCP_NODELAY`, bounded by the connect timeout, then the HTTP/1.1 handshake), write the
//!   request and poll the connection *in this task* until the response head arrives.
//! - [`PooledBody`]: the response body; reading it polls the same connection (body first,
//!   then the connection, then the body again, so a frame that was already in the socket
//!   buffer is returned in the same poll). When the body ends and the connection can take
//!   another request it goes back to the pool; a body dropped early, or a connection that
//!   broke or that the upstream asked to close, is dropped (closed).
//! - A body that is relayed as it arrives (SSE, or larger or slower than what is read whole)
//!   is [`PooledBody::detach`]ed: from then on a task of its own drives the connection, so
//!   the end of the stream is seen as soon as the upstream sends it, whatever the agent
//!   reads.
//! - A connection that the upstream closed while it sat idle is found out when it is reused:
//!   the request was not written (hyper hands it back), so it is sent again on a fresh
//!   connection — once per stale connection, never after a byte of it left.
//! - Idle connections are kept at most [`IDLE_TIMEOUT`] (as the client before) and at most
//!   [`MAX_IDLE_PER_HOST`] per host; an idle connection is not polled, so holds no task.
//!
//! `https://` upstreams keep hyper-util's client (TLS, HTTP/2 by ALPN).

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1;
use hyper::http::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{UpstreamError, UpstreamErrorKind};

/// How long an unused connection is kept.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Idle connections kept per `host:port`; more are closed when they come back.
pub const MAX_IDLE_PER_HOST: usize = 64;

type Conn = http1::Connection<TokioIo<TcpStream>, Full<Bytes>>;

/// One HTTP/1.1 connection: its request side and the connection future, polled by whoever
/// holds it (`None` once it finished: closed or failed).
struct Link {
    tx: http1::SendRequest<Full<Bytes>>,
    conn: Option<Conn>,
    idle_since: Instant,
}

impl Link {
    /// Poll the connection (reads, writes); drop it once it finished.
    fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(conn) = self.conn.as_mut() {
            if Pin::new(conn).poll(cx).is_ready() {
                self.conn = None;
            }
        }
    }
}

/// The idle connections of every plain-HTTP upstream, by `host:port`.
#[derive(Default)]
pub struct Pool {
    /// Boxed so that a connection moves between the pool and a body without a copy.
    #[allow(clippy::vec_box)]
    idle: Mutex<HashMap<String, Vec<Box<Link>>>>,
}

impl Pool {
    /// Send `req` (origin-form URI, `Host` set) to `host:port` and return the response once
    /// its head arrived. `connect_timeout` bounds the TCP connect; the caller bounds the rest.
    pub async fn send(
        self: &Arc<Self>,
        host: &str,
        port: u16,
        connect_timeout: Duration,
        mut req: Request<Full<Bytes>>,
    ) -> Result<Response<PooledBody>, UpstreamError> {
        let key = format!("{host}:{port}");
        loop {
            let (mut link, reused) = match self.take(&key) {
                Some(link) => (link, true),
                None => (connect(host, port, &key, connect_timeout).await?, false),
            };
            let sent = link.tx.try_send_request(req);
            match head(&mut link, sent).await {
                Ok(resp) => {
                    let pool = Arc::clone(self);
                    return Ok(resp.map(|inner| PooledBody {
                        inner,
                        link: Some(link),
                        pool,
                        key,
                    }));
                }
                Err(mut e) => match e.take_message() {
                    // Closed while idle: nothing was written; try a fresh connection.
                    Some(back) if reused => req = back,
                    _ => {
                        return Err(UpstreamError::new(
                            key,
                            UpstreamErrorKind::Protocol,
                            format!(
                                "the connection failed before a response ({})",
                                chain(e.error())
                            ),
                        ))
                    }
                },
            }
        }
    }

    /// An idle connection to `key` that is still open and not expired.
    fn take(&self, key: &str) -> Option<Box<Link>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let links = idle.get_mut(key)?;
        while let Some(link) = links.pop() {
            if link.conn.is_some()
                && !link.tx.is_closed()
                && link.idle_since.elapsed() < IDLE_TIMEOUT
            {
                return Some(link);
            }
        }
        None
    }

    /// Keep a connection that can take another request.
    fn put(&self, key: String, mut link: Box<Link>) {
        let now = Instant::now();
        link.idle_since = now;
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let links = idle.entry(key).or_default();
        // Oldest first (connections are taken from the end): drop the expired ones.
        let expired = links
            .iter()
            .take_while(|l| now.duration_since(l.idle_since) >= IDLE_TIMEOUT)
            .count();
        links.drain(..expired);
        if links.len() < MAX_IDLE_PER_HOST {
            links.push(link);
        }
    }
}

/// A new connection: TCP (`TCP_NODELAY`) within `timeout`, then the HTTP/1.1 handshake.
async fn connect(
    host: &str,
    port: u16,
    key: &str,
    timeout: Duration,
) -> Result<Box<Link>, UpstreamError> {
    let err = |kind, cause: String| UpstreamError::new(key, kind, cause);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let reach = async {
        let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((bare, port))
                .await
                .map_err(|e| {
                    err(
                        UpstreamErrorKind::Connect,
                        format!("DNS lookup failed ({e})"),
                    )
                })?
                .collect(),
        };
        TcpStream::connect(&addrs[..]).await.map_err(|e| {
            use std::io::ErrorKind as K;
            match e.kind() {
                K::ConnectionRefused => {
                    err(UpstreamErrorKind::Connect, "connection refused".into())
                }
                K::TimedOut => err(UpstreamErrorKind::Timeout, "connect timed out".into()),
                _ => err(UpstreamErrorKind::Connect, format!("connect failed ({e})")),
            }
        })
    };
    let stream = match tokio::time::timeout(timeout, reach).await {
        Err(_) => return Err(err(UpstreamErrorKind::Timeout, "connect timed out".into())),
        Ok(r) => r?,
    };
    let _ = stream.set_nodelay(true);
    let (tx, conn) = http1::Builder::new()
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| {
            err(
                UpstreamErrorKind::Protocol,
                format!("the connection failed before a response ({})", chain(&e)),
            )
        })?;
    Ok(Box::new(Link {
        tx,
        conn: Some(conn),
        idle_since: Instant::now(),
    }))
}

/// Poll `sent` (the response head) and the connection that carries it, in this task.
async fn head<F, T>(link: &mut Link, sent: F) -> T
where
    F: Future<Output = T>,
{
    let mut sent = pin!(sent);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = sent.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        link.drive(cx);
        sent.as_mut().poll(cx)
    })
    .await
}

/// An error and its causes, in words.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let text = err.to_string();
        if !text.is_empty() && !parts.contains(&text) {
            parts.push(text);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// The body of a pooled connection's response: reading it drives the connection (module doc).
pub struct PooledBody {
    inner: Incoming,
    /// Boxed: the connection is large, and moves between the pool and its bodies.
    link: Option<Box<Link>>,
    pool: Arc<Pool>,
    key: String,
}

impl PooledBody {
    /// The body ended (or failed): let the connection see the end of the message, then keep
    /// it when it can take another request.
    fn release(&mut self, cx: &mut Context<'_>, ok: bool) {
        let Some(mut link) = self.link.take() else {
            return;
        };
        if !ok {
            return;
        }
        link.drive(cx);
        if link.conn.is_some() && link.tx.is_ready() {
            self.pool.put(std::mem::take(&mut self.key), link);
        }
    }
}

impl PooledBody {
    /// For a body that is relayed as it arrives (SSE, large or slow): a task of its own
    /// drives the connection from now on — reading ahead of the agent, seeing the end of the
    /// stream as soon as the upstream sends it — and puts it back in the pool after the
    /// message, as hyper-util's client does for every body.
    pub fn detach(mut self) -> Incoming {
        if let Some(mut link) = self.link.take() {
            let pool = self.pool.clone();
            let key = std::mem::take(&mut self.key);
            tokio::spawn(async move {
                std::future::poll_fn(|cx| {
                    link.drive(cx);
                    if link.conn.is_none() || link.tx.is_ready() {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                })
                .await;
                if link.conn.is_some() {
                    pool.put(key, link);
                }
            });
        }
        self.inner
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let mut polled = Pin::new(&mut this.inner).poll_frame(cx);
        if polled.is_pending() {
            if let Some(link) = this.link.as_mut() {
                link.drive(cx);
                polled = Pin::new(&mut this.inner).poll_frame(cx);
            }
        }
        match &polled {
            Poll::Ready(None) => this.release(cx, true),
            Poll::Ready(Some(Err(_))) => this.release(cx, false),
            // A reader may stop at `is_end_stream` without asking for the end.
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.release(cx, true),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
