//! `understudy mcp wrap`'s other side (docs/src/guides/mcp-stdio.md): a real stdio MCP server
//! started as a child, made reachable as a Streamable HTTP server on a loopback port, so that
//! the integration's `upstream` can name it and the MCP forward path (record, dry-run,
//! record-missing: `crate::proxy::mcp::forward`) applies its per-message policy unchanged —
//! the agent talks stdio to [`super::stdio`], which posts to the endpoint, which forwards
//! what the mode lets through to this bridge, which writes it to the child's stdin.
//!
//! - The child runs in its own process group (`process_group(0)`), with the caller's
//!   environment plus the variables the caller adds (`mcp wrap`: understudy's proxy and CA),
//!   stdin/stdout piped, stderr inherited (its logs stay logs).
//! - A POSTed request is written to the child as one line; the answer is an SSE stream of the
//!   child's lines up to the response with the request's id: notifications and
//!   server-to-client requests the child sends meanwhile go on the stream of the most recent
//!   request still waiting (stdio has no per-request stream). A notification or a client
//!   response is written and answered 202.
//! - What the child sends while no request waits (a list change, a resource update, a log
//!   line, a server-to-client request such as `roots/list`) goes on the standalone `GET`
//!   stream, the Streamable HTTP place for messages outside any request; until a client opens
//!   one it is kept (at most [`OUTSIDE_KEPT`] messages, the oldest dropped with a warning) and
//!   handed to the next stream opened, `GET` or request. The answer to `initialize` carries
//!   an `Mcp-Session-Id` so that clients open that stream. DELETE: 405.
//! - [`ChildServer::shutdown`], the order of the SDK clients: close the child's stdin, wait,
//!   SIGTERM to the process group, wait, SIGKILL to the process group — so a server started
//!   through `npx` or `sh -c` (a grandchild) is gone too — and the child is reaped.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::http::{Response, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use crate::http::{full, HttpBody};
use crate::profile::mcp::sse;
use crate::profile::mcp::stdio::{to_line, Frame as LineFrame, LineSplitter};

/// How long the child gets after its stdin closed, then after SIGTERM.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// How many messages of the child outside any request are kept until a stream takes them.
pub const OUTSIDE_KEPT: usize = 1024;

/// Where the child's lines go: the requests waiting for their response (by JSON-RPC id, in
/// order), the standalone `GET` stream, and what arrived while neither was there.
#[derive(Default)]
struct Routes {
    waiting: Vec<(String, mpsc::UnboundedSender<Value>)>,
    listener: Option<mpsc::UnboundedSender<Value>>,
    kept: std::collections::VecDeque<Value>,
}

type Waiters = Arc<Mutex<Routes>>;

/// A running child and its loopback endpoint.
pub struct ChildServer {
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    child: Child,
    pgid: Option<u32>,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Start `command` (with `env` added to the caller's environment) and its loopback endpoint.
pub async fn start(
    command: &[String],
    env: &[(String, String)],
    max_line: usize,
) -> std::io::Result<ChildServer> {
    let Some((program, args)) = command.split_first() else {
        return Err(std::io::Error::other("no command to start"));
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd.spawn()?;
    let pgid = child.id();
    let stdin = Arc::new(tokio::sync::Mutex::new(child.stdin.take()));
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("the child has no stdout"))?;
    let waiters: Waiters = Arc::new(Mutex::new(Routes::default()));
    // The child's lines → the waiting requests.
    let w = waiters.clone();
    let reader = tokio::spawn(async move {
        let mut splitter = LineSplitter::new(max_line);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match stdout.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mut frames = Vec::new();
            splitter.push(&buf[..n], &mut frames);
            for f in frames {
                let LineFrame::Line(line) = f else {
                    tracing::warn!("wrap: the child wrote a line over the limit; dropped");
                    continue;
                };
                let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                    tracing::warn!(line = %String::from_utf8_lossy(&line), "wrap: the child wrote a line that is not JSON; dropped");
                    continue;
                };
                deliver(&w, v);
            }
        }
        tracing::debug!("wrap: the child's stdout closed");
        // Nobody will answer the waiting requests now; the GET stream ends too.
        if let Ok(mut w) = w.lock() {
            w.waiting.clear();
            w.listener = None;
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let st = stdin.clone();
    // One child, one session: its id lets clients open the standalone GET stream.
    let session: Arc<str> = Arc::from(session_id(addr.port()).as_str());
    let server = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let waiters = waiters.clone();
            let stdin = st.clone();
            let session = session.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    handle(req, waiters.clone(), stdin.clone(), session.clone())
                });
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
            });
        }
    });
    Ok(ChildServer {
        url: format!("http://{addr}/mcp"),
        child,
        pgid,
        stdin,
        tasks: vec![reader, server],
    })
}

/// A line of the child to the request it answers; else (a notification or a request of the
/// child) to the most recent waiting request, else to the `GET` stream, else kept.
fn deliver(waiters: &Waiters, v: Value) {
    let Ok(mut w) = waiters.lock() else { return };
    let is_response = v.get("method").is_none() && v.get("id").is_some();
    if is_response {
        let key = v["id"].to_string();
        if let Some(i) = w.waiting.iter().position(|(k, _)| *k == key) {
            let (_, tx) = w.waiting.remove(i);
            let _ = tx.send(v);
            return;
        }
        tracing::warn!(id = %key, "wrap: the child answered a request nobody waits for");
        return;
    }
    if let Some((_, tx)) = w.waiting.last() {
        let _ = tx.send(v);
        return;
    }
    let v = match &w.listener {
        Some(tx) => match tx.send(v) {
            Ok(()) => return,
            // The GET stream went away: keep the message for the next one.
            Err(mpsc::error::SendError(v)) => {
                w.listener = None;
                v
            }
        },
        None => v,
    };
    if w.kept.len() >= OUTSIDE_KEPT {
        w.kept.pop_front();
        tracing::warn!(
            kept = OUTSIDE_KEPT,
            "wrap: too many messages of the child outside any request with no stream open; the oldest was dropped"
        );
    }
    w.kept.push_back(v);
}

/// A new stream (`GET`, or a request's) takes the messages kept for want of one.
fn hand_kept(w: &mut Routes, tx: &mpsc::UnboundedSender<Value>) {
    while let Some(v) = w.kept.pop_front() {
        let _ = tx.send(v);
    }
}

/// An SSE response carrying `rx`.
fn sse_response(rx: mpsc::UnboundedReceiver<Value>, session: Option<&str>) -> Response<HttpBody> {
    let mut r = Response::new(
        SseBody {
            rx: Some(rx),
            done: false,
        }
        .boxed(),
    );
    for (k, v) in sse::headers() {
        if let (Ok(k), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            hyper::header::HeaderValue::from_str(&v),
        ) {
            r.headers_mut().insert(k, v);
        }
    }
    if let Some(s) = session.and_then(|s| hyper::header::HeaderValue::from_str(s).ok()) {
        r.headers_mut().insert("mcp-session-id", s);
    }
    r
}

async fn handle(
    req: hyper::Request<Incoming>,
    waiters: Waiters,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    session: Arc<str>,
) -> Result<Response<HttpBody>, Infallible> {
    let reply = |status: StatusCode| {
        let mut r = Response::new(full(Bytes::new()));
        *r.status_mut() = status;
        Ok(r)
    };
    if req.method() == hyper::Method::GET {
        // The standalone stream: the child's messages outside any request.
        let (tx, rx) = mpsc::unbounded_channel();
        let Ok(mut w) = waiters.lock() else {
            return reply(StatusCode::INTERNAL_SERVER_ERROR);
        };
        hand_kept(&mut w, &tx);
        w.listener = Some(tx);
        return Ok(sse_response(rx, None));
    }
    if req.method() != hyper::Method::POST {
        return reply(StatusCode::METHOD_NOT_ALLOWED);
    }
    let Ok(body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return reply(StatusCode::BAD_REQUEST);
    };
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return reply(StatusCode::BAD_REQUEST);
    };
    let is_request = msg.get("method").is_some() && msg.get("id").is_some();
    let rx = if is_request {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut w) = waiters.lock() {
            hand_kept(&mut w, &tx);
            w.waiting.push((msg["id"].to_string(), tx));
        }
        Some(rx)
    } else {
        None
    };
    let written = {
        let mut guard = stdin.lock().await;
        match guard.as_mut() {
            Some(s) => {
                let line = to_line(msg.to_string().as_bytes());
                s.write_all(&line).await.is_ok() && s.flush().await.is_ok()
            }
            None => false,
        }
    };
    if !written {
        return reply(StatusCode::BAD_GATEWAY);
    }
    let Some(rx) = rx else {
        return reply(StatusCode::ACCEPTED);
    };
    let initialize = msg.get("method").and_then(Value::as_str) == Some("initialize");
    Ok(sse_response(rx, initialize.then_some(&*session)))
}

/// The child's messages for one request as SSE events, ending after its response.
struct SseBody {
    rx: Option<mpsc::UnboundedReceiver<Value>>,
    done: bool,
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let Some(rx) = self.rx.as_mut() else {
            return Poll::Ready(None);
        };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(v)) => {
                if v.get("method").is_none() {
                    self.done = true;
                }
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(sse::event(None, &v))))))
            }
            Poll::Ready(None) => {
                self.rx = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A session id no other bridge of this host uses at the same time.
fn session_id(port: u16) -> String {
    let mut r = [0u8; 8];
    let _ = getrandom::fill(&mut r);
    let hex: String = r.iter().map(|b| format!("{b:02x}")).collect();
    format!("stdio-{}-{port}-{hex}", std::process::id())
}

impl ChildServer {
    /// The child's process group id (its pid: it leads its own group).
    pub fn pgid(&self) -> Option<u32> {
        self.pgid
    }

    /// Stop the child in the SDK clients' order (module doc); its exit status.
    pub async fn shutdown(mut self) -> Option<std::process::ExitStatus> {
        if let Some(s) = self.stdin.lock().await.take() {
            drop(s);
        }
        let mut status = tokio::time::timeout(STOP_GRACE, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok);
        if status.is_none() {
            signal_group(self.pgid, SIGTERM);
            status = tokio::time::timeout(STOP_GRACE, self.child.wait())
                .await
                .ok()
                .and_then(Result::ok);
        }
        // Whatever is left of the group (a grandchild that outlived its parent: `npx`, `sh -c`).
        signal_group(self.pgid, SIGTERM);
        if status.is_none() {
            signal_group(self.pgid, SIGKILL);
            let _ = self.child.start_kill();
            status = self.child.wait().await.ok();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        signal_group(self.pgid, SIGKILL);
        for t in &self.tasks {
            t.abort();
        }
        status
    }
}

const SIGTERM: i32 = 15;
const SIGKILL: i32 = 9;

/// Send `sig` to the process group `pgid`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn signal_group(pgid: Option<u32>, sig: i32) {
    if let Some(p) = pgid.and_then(|p| i32::try_from(p).ok()) {
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
fn signal_group(pgid: Option<u32>, sig: i32) {
    if let Some(p) = pgid.filter(|p| *p > 1) {
        let _ = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg("--")
            .arg(format!("-{p}"))
            .status();
    }
}

#[cfg(not(unix))]
fn signal_group(_pgid: Option<u32>, _sig: i32) {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn drain(rx: &mut mpsc::UnboundedReceiver<Value>) -> Vec<Value> {
        let mut v = Vec::new();
        while let Ok(m) = rx.try_recv() {
            v.push(m);
        }
        v
    }

    #[test]
    fn the_childs_messages_go_to_their_request_else_the_get_stream_else_are_kept() {
        let w: Waiters = Arc::new(Mutex::new(Routes::default()));
        let note = |n: u64| json!({ "jsonrpc": "2.0", "method": "notifications/message", "params": { "n": n } });
        // Nothing open: kept, in order.
        deliver(&w, note(1));
        deliver(
            &w,
            json!({ "jsonrpc": "2.0", "id": "s-1", "method": "roots/list" }),
        );
        // A request stream opens: it takes what was kept, then its own messages and response.
        let (tx, mut rx) = mpsc::unbounded_channel();
        {
            let mut r = w.lock().unwrap();
            hand_kept(&mut r, &tx);
            r.waiting.push(("7".into(), tx));
        }
        deliver(&w, note(2));
        deliver(&w, json!({ "jsonrpc": "2.0", "id": 7, "result": {} }));
        let got = drain(&mut rx);
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0]["params"]["n"], 1);
        assert_eq!(got[1]["method"], "roots/list");
        assert_eq!(got[2]["params"]["n"], 2);
        assert_eq!(got[3]["id"], 7);
        assert!(w.lock().unwrap().waiting.is_empty());
        // No request waits: the GET stream gets it; once that stream is gone, kept again.
        let (gtx, mut grx) = mpsc::unbounded_channel();
        w.lock().unwrap().listener = Some(gtx);
        deliver(&w, note(3));
        assert_eq!(drain(&mut grx), vec![note(3)]);
        drop(grx);
        deliver(&w, note(4));
        let r = w.lock().unwrap();
        assert!(r.listener.is_none());
        assert_eq!(r.kept.iter().cloned().collect::<Vec<_>>(), vec![note(4)]);
        drop(r);
        // A response nobody waits for is dropped, not kept.
        deliver(&w, json!({ "jsonrpc": "2.0", "id": 99, "result": {} }));
        assert_eq!(w.lock().unwrap().kept.len(), 1);
        // Bounded: past OUTSIDE_KEPT the oldest goes.
        for n in 0..OUTSIDE_KEPT as u64 + 5 {
            deliver(&w, note(100 + n));
        }
        let r = w.lock().unwrap();
        assert_eq!(r.kept.len(), OUTSIDE_KEPT);
        assert_eq!(
            r.kept.back().unwrap()["params"]["n"],
            100 + OUTSIDE_KEPT as u64 + 4
        );
    }
}
