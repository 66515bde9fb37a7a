//! What a fault ([`crate::operation::fault`]) puts on the wire, as HTTP: the bodies that still carry
//! the decided answer (cut short, or dribbled in), and the [`Abort`] a handler returns when
//! no answer must leave at all — a response *extension* the server (`crate::server::http`)
//! acts on instead of sending the response:
//!
//! | [`Abort`] | HTTP/1.1 | h2 |
//! |---|---|---|
//! | `Reset` | the connection is closed with `SO_LINGER` 0: a TCP RST, no response byte | `RST_STREAM` (`INTERNAL_ERROR`) of the call's stream; the connection lives on |
//! | `Close` | the connection is closed (FIN) without a response byte | `RST_STREAM`, as `Reset` (h2 has no per-stream close) |
//! | `Hold { ms }` | nothing for `ms` (less when the server shuts down), then as `Close` | the same wait, then as `Close` |
//!
//! Inside a decrypted CONNECT tunnel the byte stream is not a socket of ours: a `Reset`
//! closes the tunnel's stream like `Close`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use hyper::http::{Response, StatusCode};

use super::{full, HttpBody, HttpResponse};

/// A response that must not be sent: the server aborts the connection (HTTP/1.1) or the
/// stream (h2) instead (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    /// A TCP reset (h2: `RST_STREAM`).
    Reset,
    /// The connection closes with no response (h2: `RST_STREAM`).
    Close,
    /// Nothing for `ms`, then as [`Abort::Close`].
    Hold { ms: u64 },
}

/// A placeholder response carrying `abort` (its status and empty body never leave).
pub fn aborted(abort: Abort) -> HttpResponse {
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    r.extensions_mut().insert(abort);
    r
}

/// The [`Abort`] a response carries, if any.
pub fn abort_of(r: &HttpResponse) -> Option<Abort> {
    r.extensions().get::<Abort>().copied()
}

/// A `malformed_body` fault's body: [`crate::operation::fault::truncated_body`] of the decided one
/// (sent with its own, matching, `Content-Length`).
pub fn truncated(body: Bytes) -> HttpBody {
    full(crate::operation::fault::truncated_body(&body))
}

/// A `slow_body` fault's body: the decided body whole (`Content-Length` is its length), in
/// `chunks` pieces, the pauses before them summing to `ms` ([`crate::operation::fault::slow_chunks`]).
pub fn slow(body: Bytes, chunks: u64, ms: u64) -> HttpBody {
    let plan: VecDeque<_> = crate::operation::fault::slow_chunks(&body, chunks, ms).into();
    SlowBody {
        remaining: body.len() as u64,
        body,
        plan,
        sleep: None,
    }
    .boxed()
}

struct SlowBody {
    body: Bytes,
    /// (pause before it in ms, the slice of `body`), in order.
    plan: VecDeque<(u64, Range<usize>)>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    remaining: u64,
}

impl Body for SlowBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        loop {
            let Some((wait, range)) = this.plan.front().cloned() else {
                return Poll::Ready(None);
            };
            if wait > 0 {
                let sleep = this.sleep.get_or_insert_with(|| {
                    Box::pin(tokio::time::sleep(Duration::from_millis(wait)))
                });
                ready!(sleep.as_mut().poll(cx));
                this.sleep = None;
            }
            this.plan.pop_front();
            if range.is_empty() {
                continue;
            }
            this.remaining -= range.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(this.body.slice(range)))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.plan.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_slow_body_is_whole_and_takes_its_time() {
        let start = std::time::Instant::now();
        let mut b = slow(Bytes::from_static(b"0123456789"), 5, 100);
        assert_eq!(b.size_hint().exact(), Some(10));
        let mut got = Vec::new();
        let mut frames = 0;
        while let Some(f) = b.frame().await {
            got.extend_from_slice(&f.unwrap().into_data().unwrap());
            frames += 1;
        }
        assert_eq!((got.as_slice(), frames), (&b"0123456789"[..], 5));
        assert!(start.elapsed() >= Duration::from_millis(100));
    }

    #[test]
    fn an_abort_travels_as_an_extension() {
        assert_eq!(abort_of(&aborted(Abort::Reset)), Some(Abort::Reset));
        assert_eq!(abort_of(&full_response()), None);
    }

    fn full_response() -> HttpResponse {
        Response::new(full(Bytes::new()))
    }
}
