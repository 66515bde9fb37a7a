//! The stdio front of the MCP endpoint (docs/src/guides/mcp-stdio.md): `understudy mcp stdio`
//! reads one JSON-RPC message per line on stdin and writes one per line on stdout, and each
//! message goes through the very endpoint that serves Streamable HTTP — in process
//! ([`Target::Local`], through [`super::dispatch`], the project's own store) or over HTTP to a
//! running `understudy serve`/`test` ([`Target::Remote`]). Sessions, calls, state, evidence,
//! contracts and faults are therefore the HTTP endpoint's own; this module only frames
//! ([`crate::profile::mcp::stdio`] holds the framing as data).
//!
//! - A request line becomes a POST of the line to `/<integration>` with the headers an HTTP
//!   client would send (session id and negotiated version in the session era, the mirrored
//!   headers of 2026-07-28) and the attempt token (`Understudy-Attempt`) when one was chosen.
//!   Requests run concurrently (a tool call that asks the client waits for the client's answer,
//!   which arrives as a later line); `initialize`, notifications and client responses are
//!   posted in order, before the next line is read.
//! - An answer goes to stdout as it arrives: a JSON answer as its line, an SSE answer event by
//!   event (log and progress notifications, elicitation and sampling requests, then the result).
//!   After `notifications/initialized` of a session-era session, the endpoint's GET stream is
//!   opened and its messages (resource updates, list changes) are relayed too.
//! - Faults as on HTTP: `jsonrpc_error` and `malformed_body` are what the endpoint answered (a
//!   truncated body is written as it came, on one line); a `timeout` never answers; `reset` and
//!   `close` end the stdio session (stdout is closed, [`End::Fault`]) as they end the HTTP
//!   connection. Over HTTP a connection that fails without an answer ends the session too.
//!   `stream_cut` — an answer to a request that ends before its result (an SSE stream without
//!   the result event, an empty success body) — writes what came before the result, then
//!   closes stdout and ends the session: stdout is the one stream over stdio, so the stream is
//!   cut there (the call and every later one fail, as with `close`; the notifications sent
//!   before the result did reach the client).
//! - stdin at EOF: the requests in flight get [`EOF_GRACE`] to finish, then the session ends
//!   ([`End::Eof`]); in process the drafts of a recording and the store are flushed.
//! - Nothing but MCP messages is ever written to stdout (logs go through `tracing`, which the
//!   command sends to stderr).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use crate::app::App;
use crate::http::fault::{abort_of, Abort};
use crate::http::{HttpBody, Request};
use crate::profile::mcp::stdio::{
    answer_lines, cut_before_result, read_frame, to_line, Frame, LineSplitter, Outbound, SseDecoder,
};

/// How long requests in flight may still answer after stdin closed.
pub const EOF_GRACE: Duration = Duration::from_secs(3);

/// Where the messages go.
pub enum Target {
    /// This process's own server state (the project's store).
    Local(Arc<App>),
    /// A running understudy server: `http://HOST:PORT`.
    Remote(String),
}

/// How a stdio session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// stdin closed.
    Eof,
    /// A `reset` or `close` fault (or, over HTTP, a connection that failed without an answer).
    Fault(String),
    /// stdin or stdout failed.
    Io(String),
}

type Client = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

struct Shared {
    target: Target,
    client: Client,
    path: String,
    attempt: Option<String>,
    /// `mcp wrap` joined to a running server: the wrapped server's loopback URL, sent on every
    /// message ([`crate::proxy::mcp::UPSTREAM_HEADER`]).
    upstream: Option<String>,
    outbound: Mutex<Outbound>,
    out: mpsc::UnboundedSender<Out>,
    end: watch::Sender<Option<End>>,
    /// A cut stream ended the session: what was queued before it still goes out.
    cut: AtomicBool,
}

/// What the one writer of stdout is given.
enum Out {
    /// A whole line.
    Line(Vec<u8>),
    /// Close stdout after what was queued before (a cut stream).
    Close,
}

/// One answer of the endpoint, whichever way it came.
enum Body {
    Local(HttpBody),
    Remote(hyper::body::Incoming),
}

impl Body {
    async fn chunk(&mut self) -> Option<Result<Bytes, String>> {
        loop {
            let frame = match self {
                Body::Local(b) => b.frame().await.map(|f| f.map_err(|e| e.to_string())),
                Body::Remote(b) => b.frame().await.map(|f| f.map_err(|e| e.to_string())),
            };
            match frame? {
                Ok(f) => match f.into_data() {
                    Ok(d) => return Some(Ok(d)),
                    Err(_) => continue, // trailers
                },
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Body,
}

/// What came of posting one message.
enum Posted {
    Answer(Answer),
    /// `timeout`: no answer, ever.
    Never,
}

/// Serve one stdio session: `input` is the agent's stdin, `output` its stdout. `integration`
/// is the endpoint's integration, `attempt` the token sent with every message (none: the
/// server's default attempt), `upstream` the wrapped server's URL when `mcp wrap` joined a
/// running server. `max_line`: the body limit.
pub async fn run(
    target: Target,
    integration: &str,
    attempt: Option<String>,
    upstream: Option<String>,
    max_line: usize,
    mut input: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin + Send + 'static,
) -> End {
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Out>();
    let (end_tx, mut end_rx) = watch::channel::<Option<End>>(None);
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let shared = Arc::new(Shared {
        target,
        client,
        path: format!("/{integration}"),
        attempt,
        upstream,
        outbound: Mutex::new(Outbound::default()),
        out: out_tx,
        end: end_tx,
        cut: AtomicBool::new(false),
    });
    // The one writer: whole lines, flushed one by one.
    let writer_end = shared.end.clone();
    let writer = tokio::spawn(async move {
        while let Some(Out::Line(line)) = out_rx.recv().await {
            let r = async {
                output.write_all(&line).await?;
                output.flush().await
            }
            .await;
            if let Err(e) = r {
                writer_end.send_if_modified(|v| {
                    v.get_or_insert(End::Io(format!("writing stdout: {e}")));
                    true
                });
                break;
            }
        }
        let _ = output.shutdown().await;
    });
    let mut tasks = tokio::task::JoinSet::new();
    let mut splitter = LineSplitter::new(max_line);
    let mut buf = vec![0u8; 64 * 1024];
    let mut listener: Option<tokio::task::JoinHandle<()>> = None;
    let mut ended: Option<End> = None;
    'read: loop {
        let n = tokio::select! {
            biased;
            _ = end_rx.wait_for(Option::is_some) => break 'read,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            r = input.read(&mut buf) => match r {
                Ok(n) => n,
                Err(e) => { ended = Some(End::Io(format!("reading stdin: {e}"))); break 'read }
            },
        };
        let mut frames = Vec::new();
        if n == 0 {
            frames.extend(splitter.finish());
        } else {
            splitter.push(&buf[..n], &mut frames);
        }
        for frame in frames {
            let msg = match read_frame(&frame, max_line) {
                Ok(Some(v)) => v,
                Ok(None) => continue,
                Err(e) => {
                    match frame {
                        Frame::Oversize(len) => tracing::warn!(
                            bytes = len,
                            limit = max_line,
                            "stdio: a line over the limit was refused"
                        ),
                        Frame::Line(_) => tracing::warn!(
                            "stdio: a line that is not JSON was answered with a parse error"
                        ),
                    }
                    shared.write(&e);
                    continue;
                }
            };
            let method = msg
                .get("method")
                .and_then(Value::as_str)
                .map(str::to_string);
            let is_request = method.is_some() && msg.get("id").is_some();
            let stateless = msg
                .pointer("/params/_meta")
                .and_then(|m| m.get(crate::profile::mcp::META_PROTOCOL_VERSION))
                .is_some();
            // A session-era `initialize` is answered before the next line is read (the
            // session id it mints goes on every later message).
            let handshake = method.as_deref() == Some("initialize") && !stateless;
            if is_request && !handshake {
                let s = shared.clone();
                tasks.spawn(async move { s.exchange(msg).await });
            } else {
                let initialized = method.as_deref() == Some("notifications/initialized");
                shared.clone().exchange(msg).await;
                if initialized && listener.is_none() && !stateless {
                    let s = shared.clone();
                    listener = Some(tokio::spawn(async move { s.listen().await }));
                }
            }
        }
        if n == 0 {
            tracing::debug!("stdio: stdin closed");
            break;
        }
    }
    if ended.is_none() {
        ended = end_rx.borrow().clone();
    }
    if ended.is_none() {
        // stdin closed: the requests in flight may still answer (the GET stream never ends
        // by itself, so it is not waited for).
        let deadline = tokio::time::sleep(EOF_GRACE);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                _ = end_rx.wait_for(Option::is_some) => break,
                j = tasks.join_next() => if j.is_none() { break },
            }
        }
        ended = Some(end_rx.borrow().clone().unwrap_or(End::Eof));
    }
    tasks.shutdown().await;
    if let Some(l) = listener {
        l.abort();
        let _ = l.await;
    }
    let end = ended.unwrap_or(End::Eof);
    tracing::debug!(?end, "stdio: the session ended");
    drop(end_rx);
    // Closing the channel ends the writer once it wrote what was queued — unless a fault
    // ended the session: then nothing more goes out (a cut stream's writer stops by itself
    // after the lines queued before the cut).
    let drain = shared.cut.load(Ordering::SeqCst);
    let Ok(shared) = Arc::try_unwrap(shared) else {
        if drain {
            let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
        } else {
            writer.abort();
        }
        return end;
    };
    let Shared { out, target, .. } = shared;
    drop(out);
    if matches!(end, End::Fault(_)) && !drain {
        writer.abort();
    } else {
        let _ = writer.await;
    }
    if let Target::Local(app) = target {
        tracing::debug!("stdio: flushing the store");
        crate::app::recorder::flush_at_shutdown(&app).await;
        if let Err(e) = app.store.flush().await {
            tracing::error!(error = %e, "flushing the store at the end of the stdio session failed");
        }
        tracing::debug!("stdio: store flushed");
        // Traces out: the session's last spans sent (bounded wait).
        app.flush_telemetry().await;
    }
    end
}

impl Shared {
    fn write(&self, v: &Value) {
        self.line(to_line(v.to_string().as_bytes()));
    }

    fn line(&self, line: Vec<u8>) {
        let _ = self.out.send(Out::Line(line));
    }

    /// The answer to request `id` ended before its result (`stream_cut`): what came before it
    /// goes out, then stdout closes and the session ends — stdout is the one stream over
    /// stdio, so a cut stream is stdout ending before the result.
    fn cut(&self, id: &Value) {
        if self.ended() {
            return;
        }
        tracing::warn!(%id, "stdio: an answer ended before its result; ending the session");
        self.cut.store(true, Ordering::SeqCst);
        let _ = self.out.send(Out::Close);
        self.end(End::Fault(format!(
            "the answer to request {id} ended before its result (a `stream_cut` fault, or the server closed the stream)"
        )));
    }

    fn end(&self, end: End) {
        self.end.send_if_modified(|v| {
            if v.is_none() {
                *v = Some(end);
                true
            } else {
                false
            }
        });
    }

    fn ended(&self) -> bool {
        self.end.borrow().is_some()
    }

    /// Post one client message and relay its answer.
    async fn exchange(self: Arc<Self>, msg: Value) {
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let id = if method.is_some() {
            msg.get("id").cloned()
        } else {
            None
        };
        let headers = self
            .outbound
            .lock()
            .map(|o| o.headers(&msg))
            .unwrap_or_default();
        let body = Bytes::from(msg.to_string());
        let answer = match self.send("POST", headers, body).await {
            Ok(Posted::Answer(a)) => a,
            Ok(Posted::Never) => return,
            Err(e) => {
                tracing::warn!(error = %e, "stdio: the endpoint failed without an answer; ending the session");
                self.end(End::Fault(e));
                return;
            }
        };
        if method.as_deref() == Some("initialize") {
            if let Some(sid) = answer
                .headers
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                if let Ok(mut o) = self.outbound.lock() {
                    o.session_id = Some(sid.to_string());
                }
            }
        }
        self.relay(answer, method.as_deref(), id.as_ref()).await;
    }

    /// Write an answer's messages to stdout, learning from the one that answers `method`.
    async fn relay(&self, answer: Answer, method: Option<&str>, id: Option<&Value>) {
        let Answer {
            status,
            headers,
            mut body,
        } = answer;
        let sse = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.trim_start().starts_with("text/event-stream"));
        let learn = |line: &[u8]| {
            if let (Some(m), Ok(v)) = (method, serde_json::from_slice::<Value>(line)) {
                if v.get("id").is_some() && v.get("method").is_none() {
                    if let Ok(mut o) = self.outbound.lock() {
                        o.learn(m, &v);
                    }
                }
            }
        };
        if sse && status == 200 {
            let mut decoder = SseDecoder::default();
            let mut answered = false;
            while let Some(chunk) = body.chunk().await {
                if self.ended() {
                    return;
                }
                let Ok(chunk) = chunk else {
                    break;
                };
                let mut events = Vec::new();
                decoder.push(&chunk, &mut events);
                for data in events {
                    learn(data.as_bytes());
                    if let (Some(id), Ok(v)) = (id, serde_json::from_str::<Value>(&data)) {
                        if v.get("id") == Some(id) && v.get("method").is_none() {
                            answered = true;
                        }
                    }
                    self.line(to_line(data.as_bytes()));
                }
            }
            if let (false, Some(id)) = (answered, id) {
                self.cut(id);
            }
            return;
        }
        let mut all = Vec::new();
        while let Some(chunk) = body.chunk().await {
            match chunk {
                Ok(c) => all.extend_from_slice(&c),
                Err(e) => {
                    tracing::warn!(error = %e, "stdio: reading the endpoint's answer failed; ending the session");
                    self.end(End::Fault(e));
                    return;
                }
            }
        }
        if let (true, Some(id)) = (cut_before_result(status, &all, id), id) {
            self.cut(id);
            return;
        }
        for line in answer_lines(status, &all, id) {
            learn(&line);
            self.line(line);
        }
    }

    /// The session era's GET stream: server messages outside any request.
    async fn listen(self: Arc<Self>) {
        let headers = {
            let Ok(o) = self.outbound.lock() else { return };
            let mut h = vec![("accept".to_string(), "text/event-stream".to_string())];
            if let Some(s) = &o.session_id {
                h.push(("mcp-session-id".into(), s.clone()));
            } else {
                return;
            }
            if let Some(v) = &o.protocol_version {
                h.push(("mcp-protocol-version".into(), v.clone()));
            }
            h
        };
        if let Ok(Posted::Answer(a)) = self.send("GET", headers, Bytes::new()).await {
            if a.status == 200 {
                self.relay(a, None, None).await;
            }
        }
    }

    /// One HTTP exchange with the endpoint.
    async fn send(
        &self,
        method: &str,
        headers: Vec<(String, String)>,
        body: Bytes,
    ) -> Result<Posted, String> {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            if let (Ok(k), Ok(v)) = (
                HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(&v),
            ) {
                map.append(k, v);
            }
        }
        if let Some(t) = &self.attempt {
            if let Ok(v) = HeaderValue::from_str(t) {
                map.insert(crate::proxy::route::ATTEMPT_HEADER, v);
            }
        }
        if let Some(u) = &self.upstream {
            if let Ok(v) = HeaderValue::from_str(u) {
                map.insert(crate::proxy::mcp::UPSTREAM_HEADER, v);
            }
        }
        match &self.target {
            Target::Local(app) => {
                map.insert(hyper::header::HOST, HeaderValue::from_static("127.0.0.1"));
                let peer = SocketAddr::from(([127, 0, 0, 1], 0));
                let req = Request::new(method, &self.path, None, map, body, peer, Instant::now());
                let resp = super::dispatch(app.clone(), req).await;
                match abort_of(&resp) {
                    Some(Abort::Hold { .. }) => return Ok(Posted::Never),
                    Some(Abort::Reset) => return Err("a `reset` fault ended the session".into()),
                    Some(Abort::Close) => return Err("a `close` fault ended the session".into()),
                    None => {}
                }
                let (parts, body) = resp.into_parts();
                Ok(Posted::Answer(Answer {
                    status: parts.status.as_u16(),
                    headers: parts.headers,
                    body: Body::Local(body),
                }))
            }
            Target::Remote(base) => {
                let uri = format!("{}{}", base.trim_end_matches('/'), self.path);
                let mut req = hyper::Request::builder().method(method).uri(&uri);
                if let Some(h) = req.headers_mut() {
                    *h = map;
                }
                let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
                let resp =
                    self.client.request(req).await.map_err(|e| {
                        format!("the server at {base} failed without an answer: {e}")
                    })?;
                let (parts, body) = resp.into_parts();
                Ok(Posted::Answer(Answer {
                    status: parts.status.as_u16(),
                    headers: parts.headers,
                    body: Body::Remote(body),
                }))
            }
        }
    }
}
