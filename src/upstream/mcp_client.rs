//! The one MCP client of understudy: how it talks to a real MCP server over Streamable HTTP
//! when it is the caller — `understudy discover` ([`crate::author::discover`]: every tool of
//! `tools/list`) and the on-demand real call of `POST /tools/execute` with
//! `"target": "upstream"` ([`crate::admin::execute_upstream`]: one `tools/call`). Both
//! negotiate here, so they speak the same protocol version to the same server.
//!
//! [`McpClient::connect`] negotiates, in either protocol era (docs/src/reference/mcp.md):
//! 1. Stateless first, as a dual-era client should: `server/discover` with the 2026-07-28
//!    `_meta` and the mirrored `MCP-Protocol-Version` / `Mcp-Method` headers. If the server
//!    lists `2026-07-28` among its `supportedVersions`, every later request is asked the same
//!    way (`_meta` in `params`, `Mcp-Name` and the `Mcp-Param-*` of `x-mcp-header` arguments
//!    mirrored for `tools/call`).
//! 2. Otherwise (any refusal: an HTTP error, a JSON-RPC error, an unexpected answer) the
//!    session era: `initialize` proposing [`SESSION_VERSION`], `notifications/initialized`,
//!    then every request with `Mcp-Session-Id` (when the server gave one) and
//!    `MCP-Protocol-Version` (the negotiated version; one of [`SESSION_VERSIONS`], anything
//!    else is refused). [`McpClient::close`] ends the session with `DELETE`.
//!
//! Answers may be JSON or SSE (the priming event and any notification are skipped; an SSE
//! stream is read only until the answer to our request id arrives). Every read is bounded by
//! [`Limits`]. `tools/list` is paged with `nextCursor` ([`McpClient::list_tools`]).
//!
//! Failures are a [`ClientError`]: [`ClientError::Unreachable`] when the server could not be
//! talked to at all (connect, TLS, timeout: no fallback helps), [`ClientError::Refused`] when
//! it answered but not as asked. Connection failures before an answer may be retried
//! ([`McpClient::with_retries`]) for the requests the caller marks safe to repeat.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::http::{header, HeaderMap, HeaderName, HeaderValue, Method};
use serde_json::{json, Map, Value};

use super::client::{Upstream, UpstreamErrorKind};
use crate::profile::mcp::http::encode_header_value;
use crate::profile::mcp::sse::parse_events;
use crate::profile::mcp::tools::{param_headers, primitive_text};
use crate::profile::mcp::{
    HEADER_METHOD, HEADER_NAME, HEADER_PROTOCOL_VERSION, HEADER_SESSION_ID,
    META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, META_SERVER_INFO,
};

/// The version proposed in the session era's `initialize`.
pub const SESSION_VERSION: &str = "2025-11-25";
/// The stateless era's version.
pub const STATELESS_VERSION: &str = "2026-07-28";
/// Session-era versions this client speaks, should the server offer an older one.
pub const SESSION_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
/// A server that keeps answering `nextCursor` is cut off after this many pages.
pub const MAX_PAGES: usize = 1000;
/// `_meta` key of the client's name and version in 2026-07-28 requests.
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

/// Which era to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EraChoice {
    /// Stateless first, then the session era.
    #[default]
    Auto,
    Session,
    Stateless,
}

/// Why the server could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// Connect, TLS, timeout, a broken read: the server could not be talked to at all.
    Unreachable(String),
    /// The server answered, but not as asked (an HTTP error, a JSON-RPC error, a bad answer).
    Refused(String),
}

impl ClientError {
    pub fn message(&self) -> &str {
        match self {
            ClientError::Unreachable(m) | ClientError::Refused(m) => m,
        }
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// Bounds on reading one answer.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long reading one answer's body may take, after its head arrived.
    pub read_timeout: Duration,
    /// The most bytes read of one answer.
    pub max_body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            read_timeout: Duration::from_secs(30),
            max_body: usize::MAX,
        }
    }
}

/// What the handshake settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The protocol version every later request carries.
    pub protocol_version: String,
    pub stateless: bool,
    /// `serverInfo.name`, when the server said.
    pub server_name: Option<String>,
    /// `Mcp-Session-Id`, when the server gave one (session era only).
    pub session_id: Option<String>,
}

/// One answer of the server.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    /// The answer's headers, hop-by-hop ones removed.
    pub headers: HeaderMap,
    /// The JSON-RPC response carrying our request id, when there is one.
    pub message: Option<Value>,
    /// What was read of the body, for messages.
    pub text: String,
}

impl Reply {
    /// `result`, or why there is none (`what` names the request in the message).
    pub fn result(&self, what: &str) -> Result<&Value, String> {
        match &self.message {
            Some(m) => match (m.get("result"), m.get("error")) {
                (Some(r), _) => Ok(r),
                (None, Some(e)) => Err(format!(
                    "{what}: JSON-RPC error {} {}",
                    e.get("code").unwrap_or(&Value::Null),
                    e.get("message").and_then(Value::as_str).unwrap_or("")
                )),
                _ => Err(format!("{what}: the answer has neither result nor error")),
            },
            None => Err(format!(
                "{what}: HTTP {} without a JSON-RPC answer{}",
                self.status,
                if self.text.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", clip(&self.text))
                }
            )),
        }
    }
}

fn clip(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() > 300 {
        format!("{}…", s.chars().take(300).collect::<String>())
    } else {
        s.to_string()
    }
}

/// A client of one MCP endpoint (module doc). Not shared between tasks: one per job.
pub struct McpClient<'a> {
    upstream: &'a Upstream,
    url: &'a str,
    authorization: Option<String>,
    limits: Limits,
    max_retries: u32,
    retries: u32,
    next_id: u64,
    negotiated: Option<Negotiated>,
}

impl<'a> McpClient<'a> {
    /// A client of the MCP endpoint `url` (absolute `http(s)://…`), sending through
    /// `upstream`. It has not talked to the server yet: [`McpClient::connect`] does.
    pub fn new(upstream: &'a Upstream, url: &'a str) -> Self {
        McpClient {
            upstream,
            url,
            authorization: None,
            limits: Limits::default(),
            max_retries: 0,
            retries: 0,
            next_id: 0,
            negotiated: None,
        }
    }

    /// Send this `Authorization` header value with every request.
    pub fn with_authorization(mut self, value: Option<String>) -> Self {
        self.authorization = value;
        self
    }

    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Retry a request marked repeatable up to `n` times when the connection fails before
    /// an answer (refused, reset). 0, the default, never retries.
    pub fn with_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// How many retries were needed so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    pub fn url(&self) -> &str {
        self.url
    }

    /// What [`McpClient::connect`] settled, once it has.
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    /// Negotiate with the server in the era `era` allows (module doc).
    pub async fn connect(&mut self, era: EraChoice) -> Result<&Negotiated, ClientError> {
        let mut refusal = None;
        if era != EraChoice::Session {
            match self.discover().await {
                Ok(n) => return Ok(self.negotiated.insert(n)),
                Err(e @ ClientError::Unreachable(_)) => return Err(e),
                Err(e) if era == EraChoice::Stateless => return Err(e),
                Err(ClientError::Refused(e)) => refusal = Some(e),
            }
        }
        match self.initialize().await {
            Ok(n) => Ok(self.negotiated.insert(n)),
            Err(ClientError::Refused(e)) => Err(ClientError::Refused(match refusal {
                Some(r) => format!("{e} (and the {STATELESS_VERSION} form was refused: {r})"),
                None => e,
            })),
            Err(e) => Err(e),
        }
    }

    /// Every tool of `tools/list`, in the server's order, across pages.
    pub async fn list_tools(&mut self) -> Result<Vec<Value>, ClientError> {
        self.list("tools/list", "tools").await
    }

    /// Every item of a paged list (`tools/list` → `tools`, `resources/list` → `resources`,
    /// `resources/templates/list` → `resourceTemplates`, `prompts/list` → `prompts`).
    pub async fn list(&mut self, method: &str, member: &str) -> Result<Vec<Value>, ClientError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
            let reply = self.request(method, params, &[], true).await?;
            let result = reply.result(method).map_err(ClientError::Refused)?;
            match page(result, method, member, &mut items, cursor.as_deref())
                .map_err(ClientError::Refused)?
            {
                Some(next) => cursor = Some(next),
                None => return Ok(items),
            }
        }
        Err(ClientError::Refused(format!(
            "{method}: still paging after {MAX_PAGES} pages"
        )))
    }

    /// One `tools/call` of `name` with `arguments`. `input_schema` (the tool's) names the
    /// arguments mirrored as `Mcp-Param-*` in the stateless era; `repeatable` allows the
    /// retry of [`McpClient::with_retries`] (never for a write). The answer is the server's,
    /// as it came: a JSON-RPC error is the caller's to read.
    pub async fn call_tool(
        &mut self,
        name: &str,
        arguments: &Value,
        input_schema: Option<&Value>,
        repeatable: bool,
    ) -> Result<Reply, ClientError> {
        let mut extra = vec![(HEADER_NAME.to_string(), encode_header_value(name))];
        if let Some(schema) = input_schema {
            for (path, suffix) in param_headers(schema) {
                let value = path
                    .iter()
                    .try_fold(arguments, |v, k| v.get(k))
                    .and_then(primitive_text);
                if let Some(v) = value {
                    extra.push((format!("mcp-param-{suffix}"), encode_header_value(&v)));
                }
            }
        }
        let params = json!({ "name": name, "arguments": arguments });
        self.request("tools/call", Some(params), &extra, repeatable)
            .await
    }

    /// End the session (`DELETE`), when the server gave one. A server that does not allow
    /// it answers 405, which is fine; nothing is reported.
    pub async fn close(&mut self) {
        if self
            .negotiated
            .as_ref()
            .is_some_and(|n| n.session_id.is_some())
        {
            let headers = self.headers(None, &[]);
            let _ = self
                .send(Method::DELETE, Bytes::new(), headers, None, false)
                .await;
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The headers of a request after the handshake.
    fn headers(&self, method: Option<&str>, extra: &[(String, String)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(n) = &self.negotiated {
            insert(&mut h, HEADER_PROTOCOL_VERSION, &n.protocol_version);
            if n.stateless {
                if let Some(m) = method {
                    insert(&mut h, HEADER_METHOD, m);
                }
                for (k, v) in extra {
                    insert(&mut h, k, v);
                }
            } else if let Some(s) = &n.session_id {
                insert(&mut h, HEADER_SESSION_ID, s);
            }
        }
        h
    }

    /// A request after the handshake, in the negotiated era.
    async fn request(
        &mut self,
        method: &str,
        params: Option<Value>,
        extra: &[(String, String)],
        repeatable: bool,
    ) -> Result<Reply, ClientError> {
        let id = self.id();
        let mut body = json!({ "jsonrpc": "2.0", "id": id, "method": method });
        if let Some(p) = params {
            body["params"] = p;
        }
        if self.negotiated.as_ref().is_some_and(|n| n.stateless) {
            let params = body
                .as_object_mut()
                .and_then(|b| {
                    b.entry("params")
                        .or_insert_with(|| json!({}))
                        .as_object_mut()
                })
                .expect("params is an object");
            params.insert("_meta".into(), stateless_meta());
        }
        let headers = self.headers(Some(method), extra);
        self.post(&body, headers, Some(id), repeatable).await
    }

    /// `server/discover`: the stateless handshake.
    async fn discover(&mut self) -> Result<Negotiated, ClientError> {
        let id = self.id();
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": "server/discover",
                           "params": { "_meta": stateless_meta() } });
        let mut headers = HeaderMap::new();
        insert(&mut headers, HEADER_PROTOCOL_VERSION, STATELESS_VERSION);
        insert(&mut headers, HEADER_METHOD, "server/discover");
        let reply = self.post(&body, headers, Some(id), true).await?;
        let result = reply
            .result("server/discover")
            .map_err(ClientError::Refused)?;
        let versions: Vec<&str> = result
            .get("supportedVersions")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if !versions.contains(&STATELESS_VERSION) {
            return Err(ClientError::Refused(format!(
                "server/discover: the server supports {versions:?}, not {STATELESS_VERSION}"
            )));
        }
        let server_name = result
            .get("_meta")
            .and_then(|m| m.get(META_SERVER_INFO))
            .or_else(|| result.get("serverInfo"))
            .and_then(|s| s.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(Negotiated {
            protocol_version: STATELESS_VERSION.to_string(),
            stateless: true,
            server_name,
            session_id: None,
        })
    }

    /// `initialize` + `notifications/initialized`: the session-era handshake.
    async fn initialize(&mut self) -> Result<Negotiated, ClientError> {
        let id = self.id();
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": SESSION_VERSION, "capabilities": {}, "clientInfo": client_info() } });
        let reply = self.post(&body, HeaderMap::new(), Some(id), true).await?;
        let result = reply.result("initialize").map_err(ClientError::Refused)?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !SESSION_VERSIONS.contains(&version.as_str()) {
            return Err(ClientError::Refused(format!(
                "initialize: the server offered protocol version {version:?}; understudy speaks {}",
                SESSION_VERSIONS.join(", ")
            )));
        }
        let server_name = result
            .get("serverInfo")
            .and_then(|s| s.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let session_id = reply
            .headers
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let negotiated = Negotiated {
            protocol_version: version,
            stateless: false,
            server_name,
            session_id,
        };
        self.negotiated = Some(negotiated.clone());
        let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        let headers = self.headers(None, &[]);
        let r = self.post(&note, headers, None, false).await;
        let refused = match r {
            Ok(r) if (200..300).contains(&r.status) => None,
            Ok(r) => Some(ClientError::Refused(format!(
                "notifications/initialized: HTTP {}: {}",
                r.status,
                clip(&r.text)
            ))),
            Err(e) => Some(e),
        };
        if let Some(e) = refused {
            self.negotiated = None;
            return Err(e);
        }
        Ok(negotiated)
    }

    async fn post(
        &mut self,
        body: &Value,
        mut headers: HeaderMap,
        id: Option<u64>,
        repeatable: bool,
    ) -> Result<Reply, ClientError> {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let bytes = Bytes::from(body.to_string());
        self.send(Method::POST, bytes, headers, id, repeatable)
            .await
    }

    /// Send one request (with the retry rule) and read its answer (module doc).
    async fn send(
        &mut self,
        method: Method,
        body: Bytes,
        mut headers: HeaderMap,
        id: Option<u64>,
        repeatable: bool,
    ) -> Result<Reply, ClientError> {
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static(concat!("understudy/", env!("CARGO_PKG_VERSION"))),
        );
        if let Some(a) = self
            .authorization
            .as_deref()
            .and_then(|a| HeaderValue::from_str(a).ok())
        {
            headers.insert(header::AUTHORIZATION, a);
        }
        let mut attempt = 0;
        let resp = loop {
            match self
                .upstream
                .forward_parts(&method, self.url, "", &headers, body.clone())
                .await
            {
                Ok(r) => break r,
                Err(e)
                    if repeatable
                        && attempt < self.max_retries
                        && matches!(
                            e.kind,
                            UpstreamErrorKind::Connect | UpstreamErrorKind::Protocol
                        ) =>
                {
                    attempt += 1;
                    self.retries += 1;
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                }
                Err(e) => return Err(ClientError::Unreachable(e.to_string())),
            }
        };
        let status = resp.status().as_u16();
        let mut headers = resp.headers().clone();
        super::client::strip_response_headers(&mut headers);
        let sse = crate::http::is_sse(&headers);
        let mut body = http_body_util::Limited::new(resp.into_body(), self.limits.max_body);
        let mut buf = Vec::new();
        let mut message = None;
        let read = async {
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| format!("reading the answer: {e}"))?;
                if let Ok(data) = frame.into_data() {
                    buf.extend_from_slice(&data);
                }
                if sse {
                    if let Some(m) = find_answer_sse(&buf, id) {
                        message = Some(m);
                        break;
                    }
                }
            }
            Ok::<(), String>(())
        };
        match tokio::time::timeout(self.limits.read_timeout, read).await {
            Err(_) => {
                return Err(ClientError::Unreachable(format!(
                    "no complete answer within {} s",
                    self.limits.read_timeout.as_secs()
                )))
            }
            Ok(Err(e)) => return Err(ClientError::Unreachable(e)),
            Ok(Ok(())) => {}
        }
        if !sse {
            message = serde_json::from_slice::<Value>(&buf)
                .ok()
                .filter(|v| is_answer(v, id));
        }
        Ok(Reply {
            status,
            headers,
            message,
            text: String::from_utf8_lossy(&buf).into_owned(),
        })
    }
}

fn insert(h: &mut HeaderMap, name: &str, value: &str) {
    if let (Ok(n), Ok(v)) = (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(value),
    ) {
        h.insert(n, v);
    }
}

/// A JSON-RPC response (result or error) carrying `id`.
fn is_answer(v: &Value, id: Option<u64>) -> bool {
    let Some(id) = id else { return false };
    v.get("id").and_then(Value::as_u64) == Some(id)
        && (v.get("result").is_some() || v.get("error").is_some())
}

/// The answer to request `id` among the complete SSE events read so far.
fn find_answer_sse(buf: &[u8], id: Option<u64>) -> Option<Value> {
    parse_events(buf)
        .into_iter()
        .filter(|(_, data)| !data.trim().is_empty())
        .filter_map(|(_, data)| serde_json::from_str::<Value>(&data).ok())
        .find(|v| is_answer(v, id))
}

fn client_info() -> Value {
    json!({ "name": "understudy", "version": env!("CARGO_PKG_VERSION") })
}

fn stateless_meta() -> Value {
    let mut m = Map::new();
    m.insert(META_PROTOCOL_VERSION.into(), json!(STATELESS_VERSION));
    m.insert(META_CLIENT_CAPABILITIES.into(), json!({}));
    m.insert(META_CLIENT_INFO.into(), client_info());
    Value::Object(m)
}

/// Take one `tools/list` page: its tools, and the next cursor (`None` at the end).
fn page(
    result: &Value,
    method: &str,
    member: &str,
    items: &mut Vec<Value>,
    previous: Option<&str>,
) -> Result<Option<String>, String> {
    let Some(list) = result.get(member).and_then(Value::as_array) else {
        return Err(format!("{method}: the result has no `{member}` array"));
    };
    items.extend(list.iter().cloned());
    match result.get("nextCursor") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(c)) if c.is_empty() => Ok(None),
        Some(Value::String(c)) if Some(c.as_str()) == previous => Err(format!(
            "{method}: the server answered the same nextCursor {c:?} twice"
        )),
        Some(Value::String(c)) => Ok(Some(c.clone())),
        Some(other) => Err(format!(
            "{method}: nextCursor is {other}, expected a string"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_sse_answers() {
        let mut tools = Vec::new();
        let next = page(
            &json!({"tools": [{"name": "a"}], "nextCursor": "c1"}),
            "tools/list",
            "tools",
            &mut tools,
            None,
        )
        .unwrap();
        assert_eq!(next.as_deref(), Some("c1"));
        assert!(page(
            &json!({"tools": [], "nextCursor": "c1"}),
            "tools/list",
            "tools",
            &mut tools,
            Some("c1")
        )
        .is_err());
        assert_eq!(
            page(
                &json!({"tools": []}),
                "tools/list",
                "tools",
                &mut tools,
                Some("c1")
            )
            .unwrap(),
            None
        );
        let e = page(&json!({}), "prompts/list", "prompts", &mut tools, None).unwrap_err();
        assert!(e.contains("no `prompts` array"), "{e}");
        let stream = b"id: 0\ndata: \n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n";
        assert_eq!(
            find_answer_sse(stream, Some(3)),
            Some(json!({"jsonrpc": "2.0", "id": 3, "result": {}}))
        );
        assert_eq!(find_answer_sse(stream, Some(4)), None);
    }
}
