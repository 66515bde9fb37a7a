//! What an MCP answer of the dialect ([`McpResponse`], built by `crate::profile::mcp`) becomes
//! on the wire: [`mcp_response`] (a JSON body buffered, SSE events one body frame each) and,
//! for a faulted `tools/call`, [`faulted`].

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use hyper::http::{HeaderValue, Response, StatusCode};
use serde_json::{json, Value};

use crate::http::{full, HttpResponse};
use crate::operation::fault::{FaultAnswer, FaultPlan};
use crate::profile::mcp::{McpBody, McpResponse};

/// The dialect's answer as an HTTP response: its status and headers as given; a JSON body
/// buffered; SSE events one body frame each.
pub fn mcp_response(r: McpResponse) -> HttpResponse {
    let mut b =
        Response::builder().status(StatusCode::from_u16(r.status).unwrap_or(StatusCode::OK));
    for (k, v) in &r.headers {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            b = b.header(name, value);
        }
    }
    let body = match r.body {
        McpBody::Empty => full(Bytes::new()),
        McpBody::Json(bytes) => full(bytes),
        McpBody::Sse(events) => SseBody {
            events: events.into_iter().map(Bytes::from).collect(),
            just_sent: false,
        }
        .boxed(),
        McpBody::Stream(s) => StreamBody { rx: s.take() }.boxed(),
    };
    b.body(body).unwrap_or_else(|_| {
        Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(full(Bytes::new()))
            .expect("static response")
    })
}

/// What goes on the wire for a faulted `tools/call` instead of the dialect's `answer`
/// ([`FaultAnswer`]): `jsonrpc_error` answers a JSON-RPC error with the request's `id` (as
/// JSON, or as the last SSE event); `stream_cut` drops the result (a JSON body is empty, an
/// SSE answer ends before its last event); the aborts are the HTTP path's
/// (`crate::http::fault`); `status` is that bare status with the fault's headers and no
/// JSON-RPC body; `slow_body` and `malformed_body` act on the answer's bytes (an SSE answer's
/// events as one body). A streaming answer (one whose head went out early, docs/src/reference/mcp.md) is sent
/// as it is: its head has left already.
pub(super) fn faulted(plan: &FaultPlan, answer: McpResponse, id: Value) -> HttpResponse {
    use crate::http::fault::{self as wire, Abort};
    if matches!(answer.body, McpBody::Stream(_)) {
        return mcp_response(answer);
    }
    let bytes = |body: &McpBody| -> Bytes {
        match body {
            McpBody::Json(b) => Bytes::from(b.clone()),
            McpBody::Sse(events) => Bytes::from(events.concat()),
            _ => Bytes::new(),
        }
    };
    match &plan.answer {
        FaultAnswer::Reset => wire::aborted(Abort::Reset),
        FaultAnswer::Close => wire::aborted(Abort::Close),
        FaultAnswer::Hold { ms } => wire::aborted(Abort::Hold { ms: *ms }),
        FaultAnswer::Status { status, headers } => mcp_response(McpResponse {
            status: *status,
            headers: headers.clone(),
            body: McpBody::Empty,
        }),
        FaultAnswer::SlowBody { chunks, ms } => {
            let b = bytes(&answer.body);
            let (chunks, ms) = (*chunks, *ms);
            mcp_response(McpResponse {
                body: McpBody::Empty,
                ..answer
            })
            .map(|_| wire::slow(b, chunks, ms))
        }
        FaultAnswer::Truncated => {
            let b = bytes(&answer.body);
            mcp_response(McpResponse {
                body: McpBody::Empty,
                ..answer
            })
            .map(|_| wire::truncated(b))
        }
        FaultAnswer::JsonRpcError { code, message } => {
            let error = json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": { "code": code, "message": message },
            });
            let text = serde_json::to_vec(&error).unwrap_or_default();
            let body = match answer.body {
                McpBody::Sse(mut events) => {
                    let last = events.pop().unwrap_or_default();
                    events.push(sse_with_data(&last, &text));
                    McpBody::Sse(events)
                }
                _ => McpBody::Json(text),
            };
            mcp_response(McpResponse { body, ..answer })
        }
        FaultAnswer::StreamCut => {
            let body = match answer.body {
                McpBody::Sse(mut events) => {
                    events.pop();
                    McpBody::Sse(events)
                }
                _ => McpBody::Json(Vec::new()),
            };
            mcp_response(McpResponse { body, ..answer })
        }
    }
}

/// An SSE event like `event` (its `id:`/`event:` lines kept) whose data is `data`.
fn sse_with_data(event: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(event).lines() {
        if !line.is_empty() && !line.starts_with("data:") {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    out
}

/// An SSE answer: one frame per event. After each event the body reports `Pending` once
/// (waking itself at once), so the connection flushes that event before the next.
struct SseBody {
    events: VecDeque<Bytes>,
    just_sent: bool,
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.just_sent && !self.events.is_empty() {
            self.just_sent = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        match self.events.pop_front() {
            Some(e) => {
                self.just_sent = true;
                Poll::Ready(Some(Ok(Frame::data(e))))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.events.is_empty()
    }
}

/// A streaming SSE answer: one frame per event as the endpoint sends them; the body ends when
/// the endpoint drops the sender.
struct StreamBody {
    rx: Option<tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>>,
}

impl Body for StreamBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let Some(rx) = self.rx.as_mut() else {
            return Poll::Ready(None);
        };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(e)) => Poll::Ready(Some(Ok(Frame::data(Bytes::from(e))))),
            Poll::Ready(None) => {
                self.rx = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rx.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sse_events_are_separate_frames() {
        let r = mcp_response(McpResponse {
            status: 200,
            headers: vec![("Content-Type".into(), "text/event-stream".into())],
            body: McpBody::Sse(vec![
                b"id: 1-0\ndata: \n\n".to_vec(),
                b"data: {}\n\n".to_vec(),
            ]),
        });
        assert_eq!(r.headers()["content-type"], "text/event-stream");
        let mut body = r.into_body();
        let mut frames = Vec::new();
        while let Some(f) = body.frame().await {
            frames.push(f.unwrap().into_data().unwrap());
        }
        assert_eq!(
            frames,
            vec![
                Bytes::from_static(b"id: 1-0\ndata: \n\n"),
                Bytes::from_static(b"data: {}\n\n")
            ]
        );
    }
}
