//! Server-to-client requests (docs/src/reference/mcp.md): a variant's `ask_client` (`elicitation/create`,
//! `sampling/createMessage` or `roots/list`; one request, or a list with keys and rounds)
//! sent to the client before a `tools/call`, `prompts/get` or `resources/read` is answered.
//!
//! Session era: the answer becomes a **streaming** SSE body ([`McpBody::Stream`]); the
//! requests are asked one after the other, in order, and asking stops at the first answer
//! that is not a result.
//! The head goes out as soon as the first request must be sent (through the `early` channel
//! of [`McpEndpoint::handle_streaming`]); the request travels on that stream with an id of
//! ours (`"understudy-<n>"`); the endpoint keeps a [`Pending`] map (session → request id →
//! waiter); the client's POSTed JSON-RPC response resolves it (and is acknowledged 202); the
//! call is then evaluated with the answer and its result event ends the stream.
//!
//! What the backend is told ([`ClientAnswer`]):
//! - `Result(v)`: the client's `result` (e.g. `{"action": "accept", "content": {…}}`, or a
//!   sampling `{role, content, model, stopReason}`), readable as `$response`. A decline or
//!   cancel is a result like any other: rules select on `action`.
//! - `Error(e)`: the client answered with a JSON-RPC error.
//! - `Unavailable(why)`: the client cannot be asked — it did not declare the capability at
//!   `initialize`, it does not accept `text/event-stream`, or the request is part of a batch.
//! - `TimedOut(ms)`: no answer within the bound (profile data, the delay limit, 30 s).
//!
//! The backend records the last three as input errors: the agent's client is the party that
//! did not answer (see `proxy::mcp`).
//!
//! 2026-07-28 (no session, no stream to ask on): [`super::mrtr`] answers
//! [`Asked::InputRequired`] until a retry carries every answer.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use super::{sse, Framing, McpBody, McpEndpoint, McpResponse};
use crate::mock::model::{ClientRequest, ClientRequests};

/// What became of one server-to-client request.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientAnswer {
    Result(Value),
    Error(Value),
    Unavailable(String),
    TimedOut(u64),
}

impl ClientAnswer {
    /// The value recorded in evidence and readable as `$response`: the result as the client
    /// sent it; otherwise `{"error": …}`, `{"unavailable": why}` or `{"timed_out_ms": n}`.
    pub fn evidence(&self) -> Value {
        match self {
            ClientAnswer::Result(v) => v.clone(),
            ClientAnswer::Error(e) => json!({ "error": e }),
            ClientAnswer::Unavailable(why) => json!({ "unavailable": why }),
            ClientAnswer::TimedOut(ms) => json!({ "timed_out_ms": ms }),
        }
    }

    /// Why the call cannot go on, for anything but a result.
    pub fn problem(&self, method: &str) -> Option<String> {
        match self {
            ClientAnswer::Result(_) => None,
            ClientAnswer::Error(e) => Some(format!(
                "the client answered {method} with an error: {}",
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("(no message)")
            )),
            ClientAnswer::Unavailable(why) => Some(format!("{method} could not be sent: {why}")),
            ClientAnswer::TimedOut(ms) => {
                Some(format!("the client did not answer {method} within {ms} ms"))
            }
        }
    }
}

/// What came of asking a call's requests.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// The answers by key, in asking order. Asking stops at the first answer that is not a
    /// result, so that one, if any, is last.
    Answers(Vec<(String, ClientAnswer)>),
    /// 2026-07-28: the client must answer first; the `InputRequiredResult` to send
    /// ([`super::mrtr`]).
    InputRequired(Value),
}

impl Asked {
    /// The value recorded in evidence and readable as `$response`: the single form's one
    /// answer, or an object of the answers by key ([`ClientAnswer::evidence`]).
    pub fn evidence(answers: &[(String, ClientAnswer)], single: bool) -> Value {
        if single {
            return answers
                .first()
                .map(|(_, a)| a.evidence())
                .unwrap_or(Value::Null);
        }
        Value::Object(
            answers
                .iter()
                .map(|(k, a)| (k.clone(), a.evidence()))
                .collect(),
        )
    }

    /// Why the call cannot go on: the first answer that is not a result.
    pub fn problem(
        answers: &[(String, ClientAnswer)],
        requests: &ClientRequests,
    ) -> Option<String> {
        answers.iter().find_map(|(key, a)| {
            let method = requests
                .requests
                .iter()
                .find(|r| r.key == *key)
                .map(|r| r.method.as_str())
                .unwrap_or("the request");
            a.problem(method)
        })
    }
}

/// Sends server-to-client requests for one client request (see the module doc).
pub trait Asker: Send + Sync {
    /// Ask `requests` (in their order) and wait for the answers.
    fn ask<'a>(
        &'a self,
        requests: &'a ClientRequests,
    ) -> Pin<Box<dyn Future<Output = Asked> + Send + 'a>>;

    /// The capability a request needed that the client did not declare, once asked (the
    /// 2026-07-28 asker: the answer is then -32021, see [`super::mrtr`]).
    fn missing_capability(&self) -> Option<&'static str> {
        None
    }
}

/// An asker that cannot ask (batches, tests, callers without a streaming response): the first
/// request is unavailable.
pub struct NoAsker(pub &'static str);

impl Asker for NoAsker {
    fn ask<'a>(
        &'a self,
        requests: &'a ClientRequests,
    ) -> Pin<Box<dyn Future<Output = Asked> + Send + 'a>> {
        let key = requests
            .requests
            .first()
            .map(|r| r.key.clone())
            .unwrap_or_default();
        let why = self.0.to_string();
        Box::pin(async move { Asked::Answers(vec![(key, ClientAnswer::Unavailable(why))]) })
    }
}

/// The client capability a server-to-client request needs.
pub fn capability_for(method: &str) -> &'static str {
    match method {
        "sampling/createMessage" => "sampling",
        "roots/list" => "roots",
        _ => "elicitation",
    }
}

/// The server-to-client requests awaiting an answer: (session id, request id as JSON text) →
/// the waiter.
#[derive(Debug, Default)]
pub struct Pending {
    map: Mutex<HashMap<(String, String), oneshot::Sender<Value>>>,
}

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), oneshot::Sender<Value>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for the answer to request `id` of `session`.
    pub fn register(&self, session: &str, id: &Value) -> oneshot::Receiver<Value> {
        let (tx, rx) = oneshot::channel();
        self.lock()
            .insert((session.to_string(), id.to_string()), tx);
        rx
    }

    /// Hand a client's response message to its waiter; false when nothing waits for it (an
    /// unknown id, another session's, or one that timed out).
    pub fn resolve(&self, session: &str, message: &Value) -> bool {
        let Some(id) = message.get("id") else {
            return false;
        };
        let waiter = self.lock().remove(&(session.to_string(), id.to_string()));
        waiter.is_some_and(|tx| tx.send(message.clone()).is_ok())
    }

    /// Stop waiting for `id` of `session`.
    pub fn forget(&self, session: &str, id: &Value) {
        self.lock().remove(&(session.to_string(), id.to_string()));
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The channel-backed SSE body of a streaming answer: framed events, the stream ends when
/// the sender is dropped.
#[derive(Clone)]
pub struct SseStream(pub Arc<Mutex<Option<mpsc::UnboundedReceiver<Vec<u8>>>>>);

impl SseStream {
    /// The receiver, once.
    pub fn take(&self) -> Option<mpsc::UnboundedReceiver<Vec<u8>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl std::fmt::Debug for SseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SseStream")
    }
}

impl PartialEq for SseStream {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Where the head of a streaming answer goes as soon as it is known.
pub type Early = oneshot::Sender<McpResponse>;

/// An open streaming answer: its sender, stream number and event counter.
struct Open {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    stream: u64,
    n: u64,
}

/// The session-era asker of one `tools/call` POST.
pub(super) struct StreamAsker<'e> {
    endpoint: &'e McpEndpoint,
    session: String,
    framing: Framing,
    capabilities: Value,
    early: Mutex<Option<Early>>,
    open: Mutex<Option<Open>>,
}

impl<'e> StreamAsker<'e> {
    pub(super) fn new(
        endpoint: &'e McpEndpoint,
        session: String,
        framing: Framing,
        capabilities: Value,
        early: Option<Early>,
    ) -> Self {
        StreamAsker {
            endpoint,
            session,
            framing,
            capabilities,
            early: Mutex::new(early),
            open: Mutex::new(None),
        }
    }

    /// Send one message on the stream, opening it (and sending the head) first if needed.
    fn send(&self, message: &Value) -> Result<(), String> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.is_none() {
            let Some(early) = self.early.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                return Err("this answer cannot be streamed".into());
            };
            let (tx, rx) = mpsc::unbounded_channel();
            let stream = self.endpoint.streams.fetch_add(1, Ordering::Relaxed) + 1;
            if self.framing.priming {
                let _ = tx.send(sse::priming(&format!("{stream}-0")));
            }
            let mut headers = super::reply::session_header(self.framing.session_id.as_deref());
            headers.extend(sse::headers());
            let head = McpResponse {
                status: 200,
                headers,
                body: McpBody::Stream(SseStream(Arc::new(Mutex::new(Some(rx))))),
            };
            if early.send(head).is_err() {
                return Err("the client's connection is gone".into());
            }
            *open = Some(Open { tx, stream, n: 0 });
        }
        let o = open.as_mut().expect("opened above");
        o.n += 1;
        let id = self
            .framing
            .event_ids
            .then(|| format!("{}-{}", o.stream, o.n));
        o.tx.send(sse::event(id.as_deref(), message))
            .map_err(|_| "the client's connection is gone".to_string())
    }

    /// Whether the answer is streaming (the head has gone out).
    pub(super) fn is_open(&self) -> bool {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Send the last messages and end the stream.
    pub(super) fn finish(&self, messages: impl IntoIterator<Item = Value>) {
        for m in messages {
            let _ = self.send(&m);
        }
        self.open.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Send one request on the stream and wait for its answer.
    async fn ask_one(&self, request: &ClientRequest) -> ClientAnswer {
        let method = request.method.as_str();
        let cap = capability_for(method);
        if self.capabilities.get(cap).is_none() {
            return ClientAnswer::Unavailable(format!(
                "the client did not declare the `{cap}` capability at initialize"
            ));
        }
        if !self.framing.accepts.sse {
            return ClientAnswer::Unavailable(
                    "the client does not accept text/event-stream, so the request has no stream to travel on".into(),
                );
        }
        let n = self.endpoint.asks.fetch_add(1, Ordering::Relaxed) + 1;
        let id = json!(format!("understudy-{n}"));
        let waiter = self.endpoint.pending.register(&self.session, &id);
        let message =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": request.params});
        if let Err(why) = self.send(&message) {
            self.endpoint.pending.forget(&self.session, &id);
            return ClientAnswer::Unavailable(why);
        }
        let bound = self.endpoint.ask_timeout;
        match tokio::time::timeout(bound, waiter).await {
            Ok(Ok(reply)) => match (reply.get("result"), reply.get("error")) {
                (Some(r), _) => ClientAnswer::Result(r.clone()),
                (None, Some(e)) => ClientAnswer::Error(e.clone()),
                (None, None) => ClientAnswer::Error(json!({"message": "no result"})),
            },
            Ok(Err(_)) => ClientAnswer::Unavailable("the request was abandoned".into()),
            Err(_) => {
                self.endpoint.pending.forget(&self.session, &id);
                ClientAnswer::TimedOut(duration_ms(bound))
            }
        }
    }
}

impl Asker for StreamAsker<'_> {
    fn ask<'a>(
        &'a self,
        requests: &'a ClientRequests,
    ) -> Pin<Box<dyn Future<Output = Asked> + Send + 'a>> {
        Box::pin(async move {
            let mut answers = Vec::with_capacity(requests.requests.len());
            for r in &requests.requests {
                let a = self.ask_one(r).await;
                let stop = !matches!(a, ClientAnswer::Result(_));
                answers.push((r.key.clone(), a));
                if stop {
                    break;
                }
            }
            Asked::Answers(answers)
        })
    }
}

pub(super) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pending_requests_resolve_once_per_session_and_id() {
        let p = Pending::default();
        let rx = p.register("s1", &json!("understudy-1"));
        assert_eq!(p.len(), 1);
        // another session's answer with the same id does not resolve it
        assert!(!p.resolve("s2", &json!({"id": "understudy-1", "result": {}})));
        // a number id is not the string id
        assert!(!p.resolve("s1", &json!({"id": 1, "result": {}})));
        let answer =
            json!({"jsonrpc": "2.0", "id": "understudy-1", "result": {"action": "accept"}});
        assert!(p.resolve("s1", &answer));
        assert_eq!(rx.await.unwrap(), answer);
        assert!(p.is_empty());
        assert!(!p.resolve("s1", &answer), "resolved only once");
        let _rx = p.register("s1", &json!(7));
        p.forget("s1", &json!(7));
        assert!(p.is_empty());
    }

    /// A backend whose one tool asks the client and returns what came back.
    struct Asking;

    impl super::super::McpBackend for Asking {
        fn tools(&self) -> Vec<super::super::ToolInfo> {
            Vec::new()
        }
        fn call_tool<'a>(
            &'a self,
            _: &'a str,
            _: Value,
        ) -> Pin<Box<dyn Future<Output = super::super::ToolCallOutcome> + Send + 'a>> {
            Box::pin(async { super::super::ToolCallOutcome::Ok(json!("not asked")) })
        }
        fn call_tool_asking<'a>(
            &'a self,
            _: &'a str,
            _: Value,
            asker: &'a dyn Asker,
        ) -> Pin<Box<dyn Future<Output = super::super::ToolCallOutcome> + Send + 'a>> {
            Box::pin(async move {
                let requests = ClientRequests {
                    single: true,
                    requests: vec![ClientRequest {
                        key: "ask".into(),
                        round: 1,
                        method: "elicitation/create".into(),
                        params: json!({"message": "?"}),
                    }],
                };
                match asker.ask(&requests).await {
                    Asked::Answers(a) => {
                        super::super::ToolCallOutcome::Ok(Asked::evidence(&a, true))
                    }
                    Asked::InputRequired(r) => super::super::ToolCallOutcome::InputRequired(r),
                }
            })
        }
        fn server_name(&self) -> String {
            "t".into()
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> hyper::HeaderMap {
        let mut h = hyper::HeaderMap::new();
        h.insert("content-type", "application/json".parse().unwrap());
        h.insert(
            "accept",
            "application/json, text/event-stream".parse().unwrap(),
        );
        for (k, v) in pairs {
            h.insert(
                hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    async fn events(rx: &mut mpsc::UnboundedReceiver<Vec<u8>>, n: usize) -> Vec<Value> {
        let mut out = Vec::new();
        while out.len() < n {
            let e = rx.recv().await.expect("an event");
            for (_, d) in sse::parse_events(&e) {
                if !d.is_empty() {
                    out.push(serde_json::from_str(&d).unwrap());
                }
            }
        }
        out
    }

    /// initialize (declaring `caps`); the session id.
    async fn initialize(ep: &Arc<McpEndpoint>, caps: Value) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "c", "version": "1"}}});
        let r = ep
            .handle(
                &hyper::Method::POST,
                &headers(&[]),
                init.to_string().as_bytes(),
                &Asking,
            )
            .await;
        r.header("mcp-session-id").unwrap().to_string()
    }

    /// initialize (declaring `caps`), then a streaming tools/call; its stream's receiver.
    async fn open(
        ep: &Arc<McpEndpoint>,
        caps: Value,
    ) -> (
        String,
        mpsc::UnboundedReceiver<Vec<u8>>,
        tokio::task::JoinHandle<McpResponse>,
    ) {
        let sid = initialize(ep, caps).await;
        let (tx, rx) = oneshot::channel();
        let call =
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        let (ep2, sid2) = (ep.clone(), sid.clone());
        let task = tokio::spawn(async move {
            let h = headers(&[("mcp-session-id", &sid2)]);
            ep2.handle_streaming(
                &hyper::Method::POST,
                &h,
                call.to_string().as_bytes(),
                &Asking,
                Some(tx),
            )
            .await
        });
        let head = rx.await.expect("the head goes out early");
        assert_eq!(head.status, 200);
        assert_eq!(head.header("content-type"), Some("text/event-stream"));
        let McpBody::Stream(s) = head.body else {
            panic!("a streaming body")
        };
        (sid, s.take().unwrap(), task)
    }

    #[tokio::test]
    async fn the_request_streams_and_the_posted_answer_resolves_it() {
        let ep = Arc::new(McpEndpoint::new(false));
        let (sid, mut rx, task) = open(&ep, json!({"elicitation": {}})).await;
        let first = events(&mut rx, 1).await;
        assert_eq!(first[0]["method"], "elicitation/create");
        assert_eq!(first[0]["id"], "understudy-1");
        let answer = json!({"jsonrpc": "2.0", "id": "understudy-1", "result": {"action": "accept", "content": {"n": 1}}});
        let h = headers(&[("mcp-session-id", &sid)]);
        let r = ep
            .handle(
                &hyper::Method::POST,
                &h,
                answer.to_string().as_bytes(),
                &Asking,
            )
            .await;
        assert_eq!(r.status, 202);
        let last = events(&mut rx, 1).await;
        assert_eq!(last[0]["id"], 1);
        assert_eq!(
            last[0]["result"]["structuredContent"],
            json!({"action": "accept", "content": {"n": 1}})
        );
        task.await.unwrap();
        assert!(ep.pending.is_empty());
    }

    #[tokio::test]
    async fn no_answer_within_the_bound_times_out_and_no_capability_does_not_ask() {
        let ep = Arc::new(McpEndpoint::new(false).with_ask_timeout(Duration::from_millis(50)));
        let (_, mut rx, task) = open(&ep, json!({"elicitation": {}})).await;
        let got = events(&mut rx, 2).await;
        assert_eq!(got[0]["method"], "elicitation/create");
        assert_eq!(
            got[1]["result"]["structuredContent"],
            json!({"timed_out_ms": 50})
        );
        task.await.unwrap();
        assert!(ep.pending.is_empty(), "a timed-out request is forgotten");

        // Without the capability nothing streams: a plain answer.
        let sid = initialize(&ep, json!({})).await;
        let call =
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        let (tx, _rx) = oneshot::channel();
        let r = ep
            .handle_streaming(
                &hyper::Method::POST,
                &headers(&[("mcp-session-id", &sid), ("accept", "application/json")]),
                call.to_string().as_bytes(),
                &Asking,
                Some(tx),
            )
            .await;
        let m = r.messages();
        assert!(m[0]["result"]["structuredContent"]["unavailable"]
            .as_str()
            .unwrap()
            .contains("`elicitation` capability"));
    }

    #[test]
    fn answers_other_than_results_are_problems() {
        let r = ClientAnswer::Result(json!({"action": "decline"}));
        assert!(r.problem("elicitation/create").is_none());
        assert_eq!(r.evidence(), json!({"action": "decline"}));
        let t = ClientAnswer::TimedOut(30_000);
        assert_eq!(t.evidence(), json!({"timed_out_ms": 30000}));
        assert!(t
            .problem("sampling/createMessage")
            .unwrap()
            .contains("30000 ms"));
        let e = ClientAnswer::Error(json!({"code": -32601, "message": "nope"}));
        assert!(e.problem("elicitation/create").unwrap().contains("nope"));
    }
}
