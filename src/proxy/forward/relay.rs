//! Relaying a real answer's body to the agent frame by frame (an SSE stream, or a body larger
//! or slower than [`super::send::buffer`] reads whole), keeping a copy of its first
//! [`CAPTURE_LIMIT`] bytes, and finishing the call — its evidence, its capture — when the
//! upstream ends the body and **before the end of the stream is passed on** (or when the
//! agent drops the stream: the evidence is still written with what was seen).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use tokio::task::JoinHandle;

use crate::http::HttpBody;
use crate::proxy::call::CallInfo;
use crate::proxy::decision::StoreFailed;

/// A streamed body is copied (for evidence and drafts) up to this many bytes.
pub const CAPTURE_LIMIT: usize = 10 * 1024 * 1024;

/// The end of a relayed body.
#[derive(Debug, Clone)]
pub struct BodyEnd {
    /// The first bytes of the body (up to the capture limit).
    pub bytes: Bytes,
    /// Every byte that went through.
    pub total: u64,
    pub truncated: bool,
    /// The upstream ended the body normally.
    pub complete: bool,
    pub error: Option<String>,
}

impl BodyEnd {
    /// A body read whole and ended normally (small enough to keep in full).
    pub(crate) fn complete(bytes: Bytes) -> BodyEnd {
        BodyEnd {
            total: bytes.len() as u64,
            bytes,
            truncated: false,
            complete: true,
            error: None,
        }
    }
}

/// Something that finishes a relayed call when its body ends (evidence, capture).
pub(crate) trait Finisher: Send + Sync + 'static {
    /// Write what the call came to. `Err` is the answer to send instead (a store failure),
    /// when the answer was not sent yet.
    fn finish(
        self: Arc<Self>,
        info: CallInfo,
        end: BodyEnd,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreFailed>> + Send>>;

    /// Called after each data frame with everything captured so far, before the frame is
    /// passed on (a `tools/list` is learned before the agent can act on it).
    fn on_data(&self, _captured: &[u8]) {}
}

/// Stream `prefix` then `rest` to the agent; when the upstream ends, `done` runs before the
/// end of the stream is passed on (module doc).
pub(crate) fn relay(
    done: Arc<dyn Finisher>,
    info: CallInfo,
    prefix: Bytes,
    rest: Incoming,
) -> HttpBody {
    let limit = CAPTURE_LIMIT;
    let mut buf = BytesMut::new();
    let take = prefix.len().min(limit);
    buf.extend_from_slice(&prefix[..take]);
    Relay {
        total: prefix.len() as u64,
        truncated: prefix.len() > limit,
        prefix: (!prefix.is_empty()).then_some(prefix),
        inner: rest,
        buf,
        limit,
        finisher: Some((done, info)),
        finishing: None,
        done: false,
    }
    .boxed()
}

/// The relayed body (see [`relay`]).
struct Relay {
    prefix: Option<Bytes>,
    inner: Incoming,
    buf: BytesMut,
    limit: usize,
    total: u64,
    truncated: bool,
    finisher: Option<(Arc<dyn Finisher>, CallInfo)>,
    finishing: Option<JoinHandle<Result<(), StoreFailed>>>,
    done: bool,
}

impl Relay {
    fn end(&mut self, complete: bool, error: Option<String>) {
        if let Some((f, info)) = self.finisher.take() {
            let end = BodyEnd {
                bytes: std::mem::take(&mut self.buf).freeze(),
                total: self.total,
                truncated: self.truncated,
                complete,
                error,
            };
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                self.finishing = Some(rt.spawn(f.finish(info, end)));
            }
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // The agent went away before the end: the evidence is still written.
        self.end(false, Some("the agent closed the stream early".into()));
    }
}

impl Body for Relay {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        loop {
            if let Some(h) = &mut this.finishing {
                return match Pin::new(h).poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(r) => {
                        if let Ok(Err(f)) = r {
                            tracing::error!(
                                status = f.response.status,
                                "the evidence of a streamed call could not be written"
                            );
                        }
                        this.finishing = None;
                        this.done = true;
                        Poll::Ready(None)
                    }
                };
            }
            if this.done {
                return Poll::Ready(None);
            }
            if let Some(p) = this.prefix.take() {
                return Poll::Ready(Some(Ok(Frame::data(p))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Some(d) = frame.data_ref() {
                        this.total += d.len() as u64;
                        let room = this.limit.saturating_sub(this.buf.len());
                        if d.len() > room {
                            this.truncated = true;
                        }
                        this.buf.extend_from_slice(&d[..d.len().min(room)]);
                        if let Some((f, _)) = &this.finisher {
                            f.on_data(&this.buf);
                        }
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                Poll::Ready(Some(Err(e))) => {
                    this.end(false, Some(e.to_string()));
                    if this.finishing.is_none() {
                        this.done = true;
                    }
                }
                Poll::Ready(None) => {
                    this.end(true, None);
                    if this.finishing.is_none() {
                        this.done = true;
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}
