//! The `mcp` profile: understudy as a Streamable HTTP MCP server (docs/src/reference/mock-definition.md#the-envelope-rule, docs/src/reference/mcp.md#the-endpoint, docs/src/concepts/errors.md;
//! docs/src/reference/mcp.md), in both protocol eras, as a self-contained protocol module
//! the HTTP server calls. It owns the wire — transport rules, JSON-RPC, sessions, SSE framing,
//! `tools/list` and the rendering of `tools/call` outcomes — and nothing else: it never sees
//! attempts, revisions, state or evidence.
//!
//! # The seam
//!
//! ```text
//! server (src/proxy)                               this module
//! ──────────────────                               ───────────
//! request to /<integration> (mcp profile) ──────▶  McpEndpoint::handle(method, headers, body, &backend)
//!                                        ◀──────  McpResponse { status, headers, body: Empty | Json | Sse(events) }
//! backend: impl McpBackend                ◀──────  backend.tools()                (tools/list, result forms, Mcp-Param-*)
//!                                         ◀──────  backend.call_tool(name, args)  (every tools/call, known tool or not)
//! ```
//!
//! - [`McpBackend::tools`] lists the pinned contracts of the integration for the attempt, in a
//!   stable order (the order of `tools/list`). [`ToolInfo::output_schema`] is the contract's
//!   output schema as written; the endpoint decides what to advertise (see
//!   [`tools::advertised_output_schema`]).
//! - [`McpBackend::call_tool`] runs the docs/src/reference/operation-files.md#matching pipeline for one call — validate, evaluate,
//!   record evidence, sleep `delay_ms` — and returns a [`ToolCallOutcome`]. It is called for
//!   **every** `tools/call` whose params are well formed, including names that `tools()` does
//!   not list, so the backend records the `unknown_tool` harness error in evidence and
//!   returns [`ToolCallOutcome::UnknownTool`]. Protocol-level refusals before that point
//!   (bad headers, bad params) are not tool calls and reach no backend.
//! - The server writes [`McpResponse::headers`] as given (it adds nothing but framing
//!   headers of its own; never a `Content-Length` on SSE) and, for [`McpBody::Sse`], writes the
//!   events one by one, flushing each. A harness error adds `Understudy-Error: <code>`.
//! - Helpers for the server: [`tool_is_write`] (the MCP write rule); [`harness_reply`] (a
//!   harness error found before `handle` could run, e.g. `lease_expired`, answered as MCP);
//!   [`simulated_result`] (dry-run `simulate`: return it as `ToolCallOutcome::Ok`, it is shaped
//!   for the tool's result form) and [`blocked_result`] (dry-run `block`: the agent sees a tool
//!   error; return `ToolCallOutcome::InputError` with the same message, which renders the same
//!   `isError: true` result, and record `blocked_result` in evidence).
//!
//! **One [`McpEndpoint`] per (attempt, integration).** Sessions then belong to exactly one
//! attempt: a session id minted under one attempt's token is unknown (404) under another, and
//! dropping the endpoint when the attempt ends forgets its sessions. Session ids are 128 random
//! bits from the OS generator (`getrandom`), hex-encoded. An endpoint keeps at most
//! `max_sessions` (profile data, 10 000) sessions: ended ones are forgotten first, then the
//! oldest live one.
//!
//! # Behaviour (decisions in **bold** are ours where the sources leave room)
//!
//! Every request, in this order:
//! 1. `Origin`: absent passes; `http(s)://localhost|127.0.0.1|[::1]` with any port passes, as
//!    does an origin configured with [`McpEndpoint::with_allowed_origins`]; anything else —
//!    `null`, several `Origin` headers — is **403**.
//! 2. Method: `POST`; `DELETE` (sessions); `GET` (a session's notification stream,
//!    [`listen`]; no `Last-Event-ID` resumption); anything else **405** with `Allow`.
//! 3. `POST`: `Accept` must allow `application/json` or `text/event-stream` (**406**
//!    otherwise; an absent `Accept` allows both — **lenient where the spec says a client MUST
//!    list both**, because docs/src/reference/mcp.md#the-endpoint answers SSE to a client that accepts only SSE);
//!    `Content-Type` must be `application/json` (**415**); the body must be JSON (**400**,
//!    -32700, id null) and a JSON-RPC message (**400**, -32600, the caller's id when readable).
//!
//! The era of a POST: an `initialize` request is session era whatever it names; a message whose
//! `params._meta` carries `io.modelcontextprotocol/protocolVersion`, a `server/discover`, or an
//! `MCP-Protocol-Version` header naming a 2026-or-later version is stateless era; anything
//! else is session era (docs/src/reference/mcp.md, the 2026-07-28 "dual-era server" rules). This rule is
//! [`is_stateless_era`], the one copy: forwarded tool calls (`proxy::forward::mcp`) use it too.
//!
//! Session era (2025-03-26, 2025-06-18, 2025-11-25):
//! - `initialize` negotiates (the requested version if supported, else the newest session-era
//!   one, **also when the client asks for 2026-07-28 through `initialize`**), answers
//!   `{protocolVersion, capabilities: {tools: {listChanged: false}}, serverInfo}` and mints
//!   `Mcp-Session-Id`. `MCP-Protocol-Version` is not checked on `initialize`.
//! - Every other message needs `Mcp-Session-Id` (400, -32000), naming a live session (404,
//!   -32001: unknown or ended). `MCP-Protocol-Version`, when present, must be a supported
//!   session-era version (400, -32000); when absent the session's negotiated version applies.
//!   The transport-error bodies follow the official TypeScript SDK server (`-32000`/`-32001`,
//!   id `null` unless the caller's request id is known).
//! - Notifications and client responses: 202, no body (a response whose id is a pending
//!   server-to-client request of the session resolves it, see [`ask`]). **Requests are not refused before
//!   `notifications/initialized`** (clients pipeline `tools/list` right after `initialize`).
//! - `ping` → `{}`. JSON-RPC errors travel with HTTP 200.
//! - `DELETE` with a live session id → **204** and the session ends (later: 404); without the
//!   header 400; unknown/ended 404; with a 2026-or-later `MCP-Protocol-Version` 405.
//! - Batches (a JSON array body) only where the negotiated version allows them (2025-03-26):
//!   requests are answered in order in one JSON array (or one SSE event each), notifications
//!   and responses produce nothing, only-notifications gives 202, `initialize` inside a batch
//!   is an element error; in every other version an array is 400, -32600.
//!
//! Stateless era (2026-07-28): no sessions (`Mcp-Session-Id` is ignored, none is minted;
//! an `initialize` without `protocolVersion` whose `_meta` names 2026-07-28 is a stateless
//! request, for a removed method). Server-to-client requests are `input_required` results and
//! their retries ([`mrtr`]).
//! A request needs `_meta` `protocolVersion` (a string) and `clientCapabilities` (an object)
//! (400, -32602); the `MCP-Protocol-Version` header, equal to the `_meta` version (400,
//! -32020); a supported version (400, -32022 with `data {supported, requested}`); `Mcp-Method`
//! equal to `method`; `Mcp-Name` equal to `params.name`/`params.uri` for `tools/call`,
//! `prompts/get`, `resources/read` (Base64 sentinel decoded); and, for `tools/call` of a listed
//! tool whose input schema annotates properties with `x-mcp-header`, each `Mcp-Param-{X}`
//! matching its argument (absent when the argument is absent or null; integers compared
//! numerically) — all 400, -32020. Unknown methods (`ping` and `initialize` included) are
//! **404**, -32601 (so are `resources/subscribe`/`unsubscribe`). Every result carries
//! `resultType` (`"complete"`, or `"input_required"`, [`mrtr`]) and
//! `_meta["io.modelcontextprotocol/serverInfo"]`; `tools/list` and `server/discover` also
//! carry `ttlMs` and `cacheScope` (profile data: **0 and `private`** — the list is the
//! attempt's pins, and the attempt token is the authorization context). `server/discover`
//! lists every supported version, stateless first. Notifications: 202. Client responses: 400.
//!
//! Answers: `application/json` by default; `text/event-stream` when the client accepts only
//! that, or accepts it and the endpoint was built with `sse = true` (`mcp_sse`). One event per
//! JSON-RPC message; session-era events carry ids `<stream>-<n>` unique within the endpoint,
//! and a 2025-11-25 stream starts with the priming event (id, empty data); stateless events
//! carry no id (no resumption in 2026-07-28). SSE answers send `Cache-Control: no-cache` and
//! `X-Accel-Buffering: no`. **Answers with a status other than 200 are always JSON.**
//!
//! `tools/list` and `tools/call` (both eras): see [`tools`]. Pages of `page_size` tools
//! (profile data, **100**: clients that read only the first page still see every tool of an
//! ordinary integration; [`McpEndpoint::with_page_size`] changes it) with opaque cursors
//! bound to the tool-name list (an invalid cursor is -32602). A structured result becomes
//! `{"content":[{"type":"text","text":<JSON text>}],"structuredContent":<result>,"isError":false}`
//! (**without `structuredContent` in the session era when the result is not an object**, which
//! those clients reject); a `call_tool_result` result is sent as it is (a non-object is a
//! harness error `output_schema_violation`); an input error is `{"content":[{"type":"text",
//! "text":<problem>}],"isError":true}`; a harness error is JSON-RPC -32603 (-32602 for
//! `unknown_tool`) with `data {"understudy_error":{"kind":"harness_error","code","message"}}`
//! **and HTTP 200**: docs/src/concepts/errors.md's HTTP 500 is for HTTP profiles — an MCP client turns a 500
//! into a transport failure and never shows the agent the JSON-RPC error. The answer's
//! JSON-RPC `id` is always the caller's, string or number, as received.

pub mod ask;
pub mod catalog;
pub mod http;
pub mod jsonrpc;
pub mod listen;
pub mod mrtr;
pub mod notify;
pub mod profile;
pub mod session;
mod session_era;
pub mod sse;
mod stateless;
pub mod stdio;
pub mod tools;

mod reply;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};

use hyper::header::HeaderName;
use hyper::{HeaderMap, Method};
use serde_json::{json, Map, Value};

use self::http::{accepts, one, Accepts, One};
use self::jsonrpc::{
    classify, Message, Posted, HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
    METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY, PARSE_ERROR, SESSION_NOT_FOUND,
    TRANSPORT_ERROR, UNSUPPORTED_PROTOCOL_VERSION,
};
use self::profile::profile;
use self::reply::{accepted, json_response, method_not_allowed, refuse, Answer, Framing};
use self::session::Sessions;
use self::tools::{finish_stateless, render_outcome, CallAnswer};
use crate::contract::ResultForm;
use crate::error::{HarnessCode, HarnessError, InputError};

pub use self::session::SessionInfo;
pub use self::tools::{blocked_result, input_error_result, simulated_result, tool_is_write};

/// `Mcp-Session-Id` (older texts; header names are case-insensitive).
pub const HEADER_SESSION_ID: &str = "mcp-session-id";
pub const HEADER_PROTOCOL_VERSION: &str = "mcp-protocol-version";
pub const HEADER_METHOD: &str = "mcp-method";
pub const HEADER_NAME: &str = "mcp-name";
/// Set on answers that carry a harness error (docs/src/concepts/errors.md).
pub const HEADER_UNDERSTUDY_ERROR: &str = "Understudy-Error";
/// `_meta` keys of 2026-07-28 requests and results.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// One tool as the backend knows it: a pinned contract of the integration.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Value,
    /// The contract's output schema as written (for `call_tool_result` it describes the whole
    /// CallToolResult); see [`tools::advertised_output_schema`] for what is advertised.
    pub output_schema: Option<Value>,
    pub annotations: Option<Value>,
    pub result_form: ResultForm,
}

/// What one tool call came to, as the backend decided it.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCallOutcome {
    /// The mock's rendered result: the structured output, or the whole CallToolResult for
    /// `result_form: call_tool_result`.
    Ok(Value),
    /// The caller's mistake: a result with `isError: true` whose text names the problem.
    InputError(InputError),
    /// The test setup is broken: JSON-RPC error -32603 (-32602 for `unknown_tool`) with
    /// `data {"understudy_error":{"kind":"harness_error","code","message"}}`.
    Harness(HarnessError),
    /// No such tool: -32602 with the `understudy_error` object, code `unknown_tool`.
    UnknownTool,
    /// 2026-07-28: the call needs the client's answers first; the `InputRequiredResult` to
    /// send as it is ([`mrtr`]). Nothing was evaluated or recorded.
    InputRequired(Value),
}

/// The integration behind an endpoint, for one attempt.
pub trait McpBackend: Send + Sync {
    /// The pinned contracts of the integration for this attempt, in stable order.
    fn tools(&self) -> Vec<ToolInfo>;
    /// Run one call (every `tools/call`, known tool or not; see the module doc).
    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
    ) -> Pin<Box<dyn Future<Output = ToolCallOutcome> + Send + 'a>>;
    /// [`McpBackend::call_tool`] for a call that may ask the client something first (a
    /// variant's `ask_client`, docs/src/reference/mcp.md): the backend sends it with `asker` and evaluates the
    /// call with the [`ask::ClientAnswer`]. By default the call asks nothing.
    fn call_tool_asking<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
        asker: &'a dyn ask::Asker,
    ) -> Pin<Box<dyn Future<Output = ToolCallOutcome> + Send + 'a>> {
        let _ = asker;
        self.call_tool(name, arguments)
    }
    /// `serverInfo.name`, e.g. `"understudy-<integration>"`.
    fn server_name(&self) -> String;
    /// Resources and prompts (docs/src/reference/mcp.md; see [`catalog`]); reads and gets go through
    /// [`McpBackend::call_tool`] under their names.
    fn catalog(&self) -> catalog::Catalog {
        catalog::Catalog::default()
    }
    /// The `notifications` the variant (or rule) of the last [`McpBackend::call_tool`]
    /// declared (see [`notify`]), taken once.
    fn take_notifications(&self) -> Vec<Value> {
        Vec::new()
    }
    /// Of the `subscribed` resource URIs, those whose resource reads state that the calls
    /// made for this request changed (docs/src/reference/mcp.md, `notifications/resources/updated`), taken once.
    fn updated_resources(&self, subscribed: &[String]) -> Vec<String> {
        let _ = subscribed;
        Vec::new()
    }
}

/// An answer of the endpoint, before it becomes an HTTP response.
#[derive(Debug, Clone, PartialEq)]
pub struct McpResponse {
    pub status: u16,
    /// Every header to send (`Content-Type`, `Mcp-Session-Id`, `Allow`, `Understudy-Error`…).
    pub headers: Vec<(String, String)>,
    pub body: McpBody,
}

#[derive(Debug, Clone, PartialEq)]
pub enum McpBody {
    Empty,
    Json(Vec<u8>),
    /// Complete events, each already framed (`id: …\ndata: …\n\n`); the server writes them one
    /// by one, flushing each.
    Sse(Vec<Vec<u8>>),
    /// A streaming SSE answer (a `tools/call` that asks the client something, [`ask`]):
    /// framed events arrive on the channel until its sender is dropped.
    Stream(ask::SseStream),
}

impl McpResponse {
    /// The first header called `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body bytes as they go on the wire (SSE events concatenated).
    pub fn body_bytes(&self) -> Vec<u8> {
        match &self.body {
            McpBody::Empty => Vec::new(),
            McpBody::Json(b) => b.clone(),
            McpBody::Sse(events) => events.concat(),
            McpBody::Stream(_) => Vec::new(),
        }
    }

    /// The JSON-RPC messages of the answer, for evidence and tests: the JSON body (an array
    /// for a batch is flattened) or the `data` of every SSE event that is not a priming event.
    pub fn messages(&self) -> Vec<Value> {
        match &self.body {
            McpBody::Empty => Vec::new(),
            McpBody::Json(b) => match serde_json::from_slice(b) {
                Ok(Value::Array(a)) => a,
                Ok(v) => vec![v],
                Err(_) => Vec::new(),
            },
            McpBody::Sse(events) => sse::parse_events(&events.concat())
                .into_iter()
                .filter(|(_, data)| !data.is_empty())
                .filter_map(|(_, data)| serde_json::from_str(&data).ok())
                .collect(),
            McpBody::Stream(_) => Vec::new(),
        }
    }
}

/// The MCP endpoint of one integration for one attempt (see the module doc).
#[derive(Debug)]
pub struct McpEndpoint {
    sessions: Sessions,
    sse: bool,
    allowed_origins: Vec<String>,
    page_size: usize,
    streams: AtomicU64,
    extras: catalog::ExtrasState,
    /// Server-to-client requests awaiting the client's answer ([`ask`]).
    pending: ask::Pending,
    /// Ids of server-to-client requests (`understudy-<n>`).
    asks: AtomicU64,
    /// How long a server-to-client request waits for its answer (and how long a 2026-07-28
    /// `requestState` stays valid).
    ask_timeout: std::time::Duration,
    /// The key 2026-07-28 `requestState` is sealed with ([`mrtr`]).
    state_key: Option<mrtr::StateKey>,
    /// The sessions' GET streams ([`listen`]).
    listeners: listen::Listeners,
}

/// The era a request is served in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    Session,
    Stateless,
}

/// One request as the endpoint dispatches it: its era, the caller's session (session era),
/// and the JSON-RPC `id`, `method` and `params`.
#[derive(Clone, Copy)]
struct Req<'a> {
    era: Era,
    session: Option<&'a str>,
    id: &'a Value,
    method: &'a str,
    params: Option<&'a Map<String, Value>>,
}

impl<'a> Req<'a> {
    fn session(
        sid: &'a str,
        id: &'a Value,
        method: &'a str,
        params: Option<&'a Map<String, Value>>,
    ) -> Req<'a> {
        Req {
            era: Era::Session,
            session: Some(sid),
            id,
            method,
            params,
        }
    }
}

fn unsupported_header_version(v: &str) -> String {
    format!(
        "Bad Request: Unsupported MCP-Protocol-Version: {v} (supported: {})",
        profile().mcp.session_era.versions.join(", ")
    )
}

/// The `_meta` object of a message's params.
/// THE era rule (docs/src/reference/mcp.md), for the replay endpoint and for forwarded tool calls alike:
/// an `initialize` request (`method`) carrying `params.protocolVersion` is session era whatever
/// it names (one without it, whose `_meta` names a 2026-or-later version, is a stateless
/// request for a removed method: 404), `server/discover` is
/// stateless; otherwise a `_meta` protocol version in `params` makes the message stateless
/// unless it names a session-era version (some clients attach `_meta` to every request), and
/// so does exactly one `MCP-Protocol-Version` header naming a 2026-or-later version. Anything
/// else is session era.
pub fn is_stateless_era(
    method: Option<&str>,
    params: Option<&Map<String, Value>>,
    headers: &HeaderMap,
) -> bool {
    let modern_meta = || {
        meta(params)
            .and_then(|m| m.get(META_PROTOCOL_VERSION))
            .and_then(Value::as_str)
            .is_some_and(|v| profile().is_modern_version(v))
    };
    match method {
        Some("initialize") => {
            return params.is_none_or(|p| !p.contains_key("protocolVersion")) && modern_meta()
        }
        Some("server/discover") => return true,
        _ => {}
    }
    if let Some(v) = meta(params).and_then(|m| m.get(META_PROTOCOL_VERSION)) {
        if !v.as_str().is_some_and(|v| profile().is_session_version(v)) {
            return true;
        }
    }
    matches!(one(headers, HEADER_PROTOCOL_VERSION), One::Value(v) if profile().is_modern_version(v))
}

fn meta(params: Option<&Map<String, Value>>) -> Option<&Map<String, Value>> {
    params?.get("_meta")?.as_object()
}

fn value_at<'v>(v: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(v, |cur, k| cur.get(k))
}

impl McpEndpoint {
    /// An endpoint answering JSON by default, or SSE to clients that accept it when `sse`
    /// is set (`mcp_sse` of the integration).
    pub fn new(sse: bool) -> Self {
        let p = &profile().mcp;
        McpEndpoint {
            sessions: Sessions::new(p.max_sessions),
            sse,
            allowed_origins: Vec::new(),
            page_size: p.tools_list_page_size,
            streams: AtomicU64::new(0),
            extras: catalog::ExtrasState::default(),
            pending: ask::Pending::default(),
            asks: AtomicU64::new(0),
            ask_timeout: std::time::Duration::from_millis(crate::mock::model::limits::MAX_DELAY_MS),
            state_key: mrtr::new_key(),
            listeners: listen::Listeners::default(),
        }
    }

    /// How long a server-to-client request waits for the client's answer (default: the
    /// delay limit, 30 s).
    pub fn with_ask_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.ask_timeout = timeout;
        self
    }

    /// Origins allowed besides the loopback ones (`scheme://host[:port]`, exact).
    pub fn with_allowed_origins(mut self, origins: Vec<String>) -> Self {
        self.allowed_origins = origins;
        self
    }

    /// Tools per `tools/list` page (at least 1).
    pub fn with_page_size(mut self, page_size: usize) -> Self {
        self.page_size = page_size.max(1);
        self
    }

    /// Sessions kept before eviction (at least 1).
    pub fn with_max_sessions(mut self, max: usize) -> Self {
        self.sessions = Sessions::new(max);
        self
    }

    /// The live session with this id, if any.
    pub fn session(&self, id: &str) -> Option<SessionInfo> {
        self.sessions.get(id)
    }

    /// Handle one HTTP request to the endpoint (the integration's base URL). `method`,
    /// `headers`, `body` as received.
    pub async fn handle<B: McpBackend + ?Sized>(
        &self,
        method: &Method,
        headers: &HeaderMap,
        body: &[u8],
        backend: &B,
    ) -> McpResponse {
        self.handle_streaming(method, headers, body, backend, None)
            .await
    }

    /// [`McpEndpoint::handle`] for a caller that can stream: when the answer must stream (a
    /// call whose variant asks the client something, [`ask`]), its head — status, headers and
    /// an [`McpBody::Stream`] — is sent on `early` as soon as it is known, the rest of the
    /// answer goes on that stream, and the value returned at the end is to be ignored.
    pub async fn handle_streaming<B: McpBackend + ?Sized>(
        &self,
        method: &Method,
        headers: &HeaderMap,
        body: &[u8],
        backend: &B,
        early: Option<ask::Early>,
    ) -> McpResponse {
        let posted = if *method == Method::POST {
            Posted::parse(body)
        } else {
            Posted::none()
        };
        self.handle_posted(method, headers, &posted, backend, early)
            .await
    }

    /// [`McpEndpoint::handle_streaming`] of a body the caller parsed already ([`Posted`]: the
    /// one parse of the request's body).
    pub async fn handle_posted<B: McpBackend + ?Sized>(
        &self,
        method: &Method,
        headers: &HeaderMap,
        body: &Posted,
        backend: &B,
        early: Option<ask::Early>,
    ) -> McpResponse {
        if !http::origin_allowed(headers, &self.allowed_origins) {
            return refuse(
                403,
                TRANSPORT_ERROR,
                "Forbidden: Origin is not allowed",
                &Value::Null,
            );
        }
        if *method == Method::POST {
            self.post(headers, body, backend, early).await
        } else if *method == Method::DELETE {
            self.delete(headers)
        } else if *method == Method::GET {
            self.get(headers)
        } else {
            method_not_allowed("GET, POST, DELETE")
        }
    }

    async fn post<B: McpBackend + ?Sized>(
        &self,
        headers: &HeaderMap,
        body: &Posted,
        backend: &B,
        early: Option<ask::Early>,
    ) -> McpResponse {
        let accepts = accepts(headers);
        if !accepts.json && !accepts.sse {
            return refuse(
                406,
                TRANSPORT_ERROR,
                "Not Acceptable: Client must accept application/json and text/event-stream",
                &Value::Null,
            );
        }
        if !http::is_json_content_type(headers) {
            return refuse(
                415,
                TRANSPORT_ERROR,
                "Unsupported Media Type: Content-Type must be application/json",
                &Value::Null,
            );
        }
        let value: &Value = match body.parsed() {
            Ok(v) => v,
            Err(e) => return refuse(400, PARSE_ERROR, &format!("Parse error: {e}"), &Value::Null),
        };
        // The same nesting bound as every other request body: arguments nested deeper would
        // be recorded into evidence the store could not read back.
        let max = crate::util::json::MAX_BODY_DEPTH;
        if crate::util::json::json_depth(value) > max {
            let message = format!("Parse error: the message is nested more than {max} levels deep");
            return refuse(400, PARSE_ERROR, &message, &Value::Null);
        }
        if let Value::Array(items) = value {
            return self.batch(items, headers, accepts, backend).await;
        }
        let msg = match classify(value) {
            Ok(m) => m,
            Err(inv) => return refuse(400, INVALID_REQUEST, &inv.message, &inv.id),
        };
        if self.is_stateless(&msg, headers) {
            self.stateless(msg, headers, accepts, backend).await
        } else {
            self.session_post(msg, headers, accepts, backend, early)
                .await
        }
    }

    fn is_stateless(&self, msg: &Message, headers: &HeaderMap) -> bool {
        let method = match msg {
            Message::Request { method, .. } => Some(method.as_str()),
            _ => None,
        };
        is_stateless_era(method, msg.params(), headers)
    }

    /// Answer one request; `session` is the caller's session (session era). After a call
    /// (`tools/call`, `prompts/get`, `resources/read`), `notifications/resources/updated` go
    /// to the sessions subscribed to a resource whose state the call changed
    /// ([`McpEndpoint::resource_updates`]).
    async fn dispatch<B: McpBackend + ?Sized>(
        &self,
        req: Req<'_>,
        backend: &B,
        asker: &dyn ask::Asker,
    ) -> Answer {
        let mut answer = self.answer(req, backend, asker).await;
        if mrtr::SUPPORTED.contains(&req.method) {
            answer
                .before
                .extend(self.resource_updates(backend, req.session));
        }
        answer
    }

    /// Send `notifications/resources/updated` for the subscribed URIs the backend says the
    /// last call changed: on each subscriber's GET stream; the caller's own, when it has no
    /// GET stream open, are returned to go on its response stream before the result (they
    /// relate to that request); any other subscriber without a stream misses them.
    fn resource_updates<B: McpBackend + ?Sized>(
        &self,
        backend: &B,
        session: Option<&str>,
    ) -> Vec<Value> {
        let subscribed = self.extras.subscribed();
        if subscribed.is_empty() {
            return Vec::new();
        }
        let mut own = Vec::new();
        for uri in backend.updated_resources(&subscribed) {
            let message = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                "params": {"uri": uri}});
            for s in self.extras.subscribers(&uri) {
                if !self.listeners.send(&s, &message) && session == Some(s.as_str()) {
                    own.push(message.clone());
                }
            }
        }
        own
    }

    async fn answer<B: McpBackend + ?Sized>(
        &self,
        req: Req<'_>,
        backend: &B,
        asker: &dyn ask::Asker,
    ) -> Answer {
        let Req {
            era,
            id,
            method,
            params,
            ..
        } = req;
        let p = profile();
        let stateless = era == Era::Stateless;
        let finish = |mut result: Value| {
            if stateless {
                finish_stateless(&mut result, &backend.server_name());
            }
            Answer::ok(id, result)
        };
        let invalid = |message: &str| Answer::err(id, INVALID_PARAMS, message, None, 200);
        let param = |k: &str| params.and_then(|m| m.get(k)).filter(|v| !v.is_null());
        if let Some(a) = catalog::dispatch(self, req, backend, asker).await {
            return a;
        }
        match method {
            "ping" if !stateless => Answer::ok(id, json!({})),
            "server/discover" if stateless => {
                let s = &p.mcp.stateless_era;
                finish(json!({
                    "supportedVersions": p.all_versions(),
                    "capabilities": catalog::capabilities(&p.mcp.capabilities, backend, true),
                    "ttlMs": s.discover_ttl_ms,
                    "cacheScope": s.discover_cache_scope,
                }))
            }
            "tools/list" => {
                let cursor = match param("cursor") {
                    None => None,
                    Some(Value::String(c)) => Some(c.as_str()),
                    Some(_) => return invalid("Invalid params: cursor must be a string"),
                };
                let tools = backend.tools();
                match tools::list_page(&tools, cursor, self.page_size, stateless) {
                    Ok(mut result) => {
                        if stateless {
                            let s = &p.mcp.stateless_era;
                            result["ttlMs"] = json!(s.list_ttl_ms);
                            result["cacheScope"] = json!(s.list_cache_scope);
                        }
                        finish(result)
                    }
                    Err(message) => invalid(&format!("Invalid params: {message}")),
                }
            }
            "tools/call" => {
                let Some(name) = param("name").and_then(Value::as_str) else {
                    return invalid("Invalid params: tools/call needs params.name (a string)");
                };
                let arguments = match param("arguments") {
                    None => json!({}),
                    Some(a @ Value::Object(_)) => a.clone(),
                    Some(_) => {
                        return invalid(
                            "Invalid params: tools/call params.arguments must be an object",
                        )
                    }
                };
                let form = backend
                    .tools()
                    .into_iter()
                    .find(|t| t.name == name)
                    .map(|t| t.result_form)
                    .unwrap_or(ResultForm::Structured);
                let outcome = backend.call_tool_asking(name, arguments, asker).await;
                let before = notify::messages(
                    backend.take_notifications(),
                    params,
                    &self.extras,
                    stateless,
                );
                let mut answer = match render_outcome(name, outcome, form, stateless) {
                    CallAnswer::Result(r) => finish(r),
                    CallAnswer::Error {
                        code,
                        message,
                        data,
                        harness,
                    } => Answer {
                        message: jsonrpc::error(id, code, &message, data),
                        status: 200,
                        harness,
                        before: Vec::new(),
                    },
                };
                answer.before = before;
                answer
            }
            _ => Answer::err(
                id,
                METHOD_NOT_FOUND,
                &format!("Method not found: {method}"),
                None,
                if stateless { 404 } else { 200 },
            ),
        }
    }
}

/// A harness error answered before the endpoint could handle the request (the server found
/// the attempt's lease expired, or could not route the call): HTTP 200, JSON, a JSON-RPC error
/// -32603 (-32602 for `unknown_tool`) with the `understudy_error` data, echoing the id of
/// `body` when it is a single request, and `Understudy-Error: <code>`.
pub fn harness_reply(body: &[u8], e: &HarnessError) -> McpResponse {
    harness_reply_to(&Posted::parse(body), e)
}

/// [`harness_reply`] to a message parsed already.
pub fn harness_reply_to(message: &Posted, e: &HarnessError) -> McpResponse {
    let id = message.id();
    let code = if e.code == HarnessCode::UnknownTool {
        INVALID_PARAMS
    } else {
        INTERNAL_ERROR
    };
    let data = tools::harness_data(e.code, &e.message);
    json_response(
        200,
        vec![(HEADER_UNDERSTUDY_ERROR.into(), e.code.as_str().into())],
        &jsonrpc::error(&id, code, &e.message, Some(data)),
    )
}
