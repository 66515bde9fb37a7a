//! `understudy discover --integration NAME [--config F] [--out DIR]` (SPEC 7, 10): ask the
//! integration's real MCP server for its tools and write one operation file per tool.
//!
//! **Connecting** (the integration's `upstream` URL, `http://` or `https://` through
//! [`crate::upstream::Upstream`]: rustls with the web PKI roots plus `upstream_ca`). A small
//! MCP client, in either protocol era (PROTOCOLS.md 1.1–1.3):
//! 1. Stateless first, as a dual-era client should: `server/discover` with the 2026-07-28
//!    `_meta` and the mirrored `MCP-Protocol-Version` / `Mcp-Method` headers. If the server
//!    lists `2026-07-28` among its `supportedVersions`, `tools/list` is asked the same way.
//! 2. Otherwise (any refusal: an HTTP error, a JSON-RPC error, an unexpected answer) the
//!    session era: `initialize` proposing `2025-11-25`, `notifications/initialized`, then
//!    `tools/list` with `Mcp-Session-Id` (when the server gave one) and
//!    `MCP-Protocol-Version`; the session is ended with `DELETE` at the end.
//!
//! Answers may be JSON or SSE (the priming event and any notification are skipped; the SSE
//! stream is read only until the answer arrives). `tools/list` is paged with `nextCursor`.
//! A server that cannot be reached, or that refuses both eras, is exit code 1 with the reason.
//!
//! **Writing** `<operations dir>/<tool>.json` (or `--out DIR`) per tool:
//! - `operation_id` = the tool name; a name that is not a valid operation id
//!   (`[a-z0-9_.-]{1,128}`: MCP allows capitals, understudy's file names do not) is reported
//!   and skipped, as is a repeated name;
//! - `title`, `description`, `input_schema` (`inputSchema`; `{"type":"object"}` when absent),
//!   `annotations` as discovered; `icons`, `execution` and `_meta` are not part of a contract
//!   and are dropped;
//! - with an `outputSchema`: `output_schema` = it (a mock's result is then the structured
//!   output); without one: `"result_form": "call_tool_result"` and an output schema of the
//!   CallToolResult object ([`call_tool_result_schema`]) — SPEC 5.1's default for a tool
//!   discovered without an `outputSchema`.
//!
//! An existing file keeps everything that is not the discovered contract (`mock`, `write`,
//! `idempotency`). What happens to it, as the summary reports:
//! - **unchanged**: same contract and metadata, the file is not touched;
//! - **updated**: same contract hash, other metadata (`title`, `annotations`, `result_form`)
//!   rewritten; its mock stays valid;
//! - **changed**: the contract hash changed and the file had no mock: rewritten;
//! - **stale**: the contract hash changed and the file has a mock: the contract is rewritten
//!   and the mock kept **as it is** — never relabelled with the new hash. A mock that
//!   carried no `contract_hash` gets the hash of the contract it was written against (the old
//!   one), so `understudy check` reports it stale until someone updates it;
//! - tools the server no longer offers are reported, and their files left alone.
//!
//! Every written file is run through the per-file checks of `check`; problems are reported
//! (the file is still written: the contract is what the server says).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::http::{header, HeaderMap, Method, Request};
use serde_json::{json, Value};

use crate::config::ProfileKind;
use crate::contract::{valid_operation_id, OperationFile, ResultForm};
use crate::operation::load::load_file;
use crate::profile::mcp::sse::parse_events;
use crate::upstream::Upstream;

/// The version proposed in the session era's `initialize`.
pub const SESSION_VERSION: &str = "2025-11-25";
/// The stateless era's version.
pub const STATELESS_VERSION: &str = "2026-07-28";
/// Session-era versions this client speaks, should the server offer an older one.
const SESSION_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
/// How long one request may take (connect + answer).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// A server that keeps answering `nextCursor` is cut off after this many pages.
const MAX_PAGES: usize = 1000;

/// Which era to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EraChoice {
    /// Stateless first, then the session era (the CLI's behaviour).
    #[default]
    Auto,
    Session,
    Stateless,
}

/// The tools a server listed, and how they were asked for.
#[derive(Debug, Clone)]
pub struct Discovered {
    pub url: String,
    /// The negotiated protocol version.
    pub protocol_version: String,
    pub stateless: bool,
    /// `serverInfo.name`, when the server said.
    pub server_name: Option<String>,
    /// The tool objects, in the server's order, across pages.
    pub tools: Vec<Value>,
}

/// How one tool fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    New,
    Unchanged,
    Updated,
    Changed,
    Stale {
        mock_hash: String,
        current_hash: String,
    },
    Skipped(String),
}

impl Fate {
    pub fn label(&self) -> &'static str {
        match self {
            Fate::New => "new",
            Fate::Unchanged => "unchanged",
            Fate::Updated => "updated",
            Fate::Changed => "changed",
            Fate::Stale { .. } => "stale",
            Fate::Skipped(_) => "skipped",
        }
    }
}

/// One line of the summary.
#[derive(Debug, Clone)]
pub struct Entry {
    pub tool: String,
    pub file: Option<PathBuf>,
    pub fate: Fate,
    /// `check` problems of the written file.
    pub problems: Vec<String>,
}

/// What `discover` did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub entries: Vec<Entry>,
    /// Operation files of tools the server no longer lists (left alone).
    pub gone: Vec<String>,
}

impl Report {
    pub fn count(&self, label: &str) -> usize {
        self.entries
            .iter()
            .filter(|e| e.fate.label() == label)
            .count()
    }
}

// ---------------------------------------------------------------------------------------------
// The MCP client

/// One answer of the server.
struct Reply {
    status: u16,
    headers: HeaderMap,
    /// The JSON-RPC response carrying our id, when there is one.
    message: Option<Value>,
    /// What was read of the body, for messages.
    text: String,
}

impl Reply {
    /// `result`, or why there is none.
    fn result(&self, what: &str) -> Result<&Value, String> {
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

/// A failure to talk to the server at all (connect, TLS, timeout): no fallback helps.
struct Unreachable(String);

struct Client<'a> {
    upstream: &'a Upstream,
    url: &'a str,
    next_id: u64,
}

impl Client<'_> {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    async fn send(
        &self,
        method: Method,
        body: Option<&Value>,
        headers: &[(&str, String)],
        id: Option<u64>,
    ) -> Result<Reply, Unreachable> {
        let mut b = Request::builder()
            .method(method)
            .uri(self.url)
            .header(header::ACCEPT, "application/json, text/event-stream")
            .header(
                header::USER_AGENT,
                concat!("understudy/", env!("CARGO_PKG_VERSION")),
            );
        if body.is_some() {
            b = b.header(header::CONTENT_TYPE, "application/json");
        }
        for (k, v) in headers {
            b = b.header(*k, v.as_str());
        }
        let bytes = body.map(|v| v.to_string()).unwrap_or_default();
        let req = b
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| Unreachable(format!("bad request: {e}")))?;
        let resp = self
            .upstream
            .forward(req)
            .await
            .map_err(|e| Unreachable(e.to_string()))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let sse = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
        let mut body = resp.into_body();
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
        match tokio::time::timeout(REQUEST_TIMEOUT, read).await {
            Err(_) => {
                return Err(Unreachable(format!(
                    "no complete answer within {} s",
                    REQUEST_TIMEOUT.as_secs()
                )))
            }
            Ok(Err(e)) => return Err(Unreachable(e)),
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

    async fn post(&self, body: &Value, headers: &[(&str, String)]) -> Result<Reply, Unreachable> {
        let id = body.get("id").and_then(Value::as_u64);
        self.send(Method::POST, Some(body), headers, id).await
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
    json!({ "name": "understudy-discover", "version": env!("CARGO_PKG_VERSION") })
}

fn stateless_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": client_info(),
    })
}

/// Ask the MCP server at `url` for every tool, in the era `era` allows (see the module doc).
pub async fn discover_tools(
    upstream: &Upstream,
    url: &str,
    era: EraChoice,
) -> Result<Discovered, String> {
    let mut c = Client {
        upstream,
        url,
        next_id: 0,
    };
    let mut refusal = None;
    if era != EraChoice::Session {
        match stateless(&mut c).await {
            Ok(found) => return Ok(found),
            Err(Failure::Unreachable(e)) => return Err(e),
            Err(Failure::Refused(e)) if era == EraChoice::Stateless => return Err(e),
            Err(Failure::Refused(e)) => refusal = Some(e),
        }
    }
    match session(&mut c).await {
        Ok(found) => Ok(found),
        Err(Failure::Unreachable(e)) => Err(e),
        Err(Failure::Refused(e)) => Err(match refusal {
            Some(r) => format!("{e} (and the {STATELESS_VERSION} form was refused: {r})"),
            None => e,
        }),
    }
}

enum Failure {
    Unreachable(String),
    Refused(String),
}

impl From<Unreachable> for Failure {
    fn from(u: Unreachable) -> Self {
        Failure::Unreachable(u.0)
    }
}

async fn stateless(c: &mut Client<'_>) -> Result<Discovered, Failure> {
    let headers = |method: &str| {
        vec![
            ("mcp-protocol-version", STATELESS_VERSION.to_string()),
            ("mcp-method", method.to_string()),
        ]
    };
    let body = json!({ "jsonrpc": "2.0", "id": c.id(), "method": "server/discover",
                       "params": { "_meta": stateless_meta() } });
    let reply = c.post(&body, &headers("server/discover")).await?;
    let result = reply
        .result("server/discover")
        .map_err(Failure::Refused)?
        .clone();
    let versions: Vec<&str> = result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !versions.contains(&STATELESS_VERSION) {
        return Err(Failure::Refused(format!(
            "server/discover: the server supports {versions:?}, not {STATELESS_VERSION}"
        )));
    }
    let server_name = result
        .get("_meta")
        .and_then(|m| m.get("io.modelcontextprotocol/serverInfo"))
        .or_else(|| result.get("serverInfo"))
        .and_then(|s| s.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut params = json!({ "_meta": stateless_meta() });
        if let Some(cur) = &cursor {
            params["cursor"] = json!(cur);
        }
        let body =
            json!({ "jsonrpc": "2.0", "id": c.id(), "method": "tools/list", "params": params });
        let reply = c.post(&body, &headers("tools/list")).await?;
        let result = reply.result("tools/list").map_err(Failure::Refused)?;
        cursor = page(result, &mut tools, cursor.as_deref()).map_err(Failure::Refused)?;
        if cursor.is_none() {
            return Ok(Discovered {
                url: c.url.to_string(),
                protocol_version: STATELESS_VERSION.to_string(),
                stateless: true,
                server_name,
                tools,
            });
        }
    }
    Err(Failure::Refused(format!(
        "tools/list: still paging after {MAX_PAGES} pages"
    )))
}

/// Take one `tools/list` page: its tools, and the next cursor (`None` at the end).
fn page(
    result: &Value,
    tools: &mut Vec<Value>,
    previous: Option<&str>,
) -> Result<Option<String>, String> {
    let Some(list) = result.get("tools").and_then(Value::as_array) else {
        return Err("tools/list: the result has no `tools` array".into());
    };
    tools.extend(list.iter().cloned());
    match result.get("nextCursor") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(c)) if c.is_empty() => Ok(None),
        Some(Value::String(c)) if Some(c.as_str()) == previous => Err(format!(
            "tools/list: the server answered the same nextCursor {c:?} twice"
        )),
        Some(Value::String(c)) => Ok(Some(c.clone())),
        Some(other) => Err(format!(
            "tools/list: nextCursor is {other}, expected a string"
        )),
    }
}

async fn session(c: &mut Client<'_>) -> Result<Discovered, Failure> {
    let body = json!({ "jsonrpc": "2.0", "id": c.id(), "method": "initialize", "params": {
        "protocolVersion": SESSION_VERSION, "capabilities": {}, "clientInfo": client_info() } });
    let reply = c.post(&body, &[]).await?;
    let result = reply.result("initialize").map_err(Failure::Refused)?;
    let version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !SESSION_VERSIONS.contains(&version.as_str()) {
        return Err(Failure::Refused(format!(
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
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut headers = vec![("mcp-protocol-version", version.clone())];
    if let Some(s) = &session_id {
        headers.push(("mcp-session-id", s.clone()));
    }
    let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let r = c.post(&note, &headers).await?;
    if !(200..300).contains(&r.status) {
        return Err(Failure::Refused(format!(
            "notifications/initialized: HTTP {}: {}",
            r.status,
            clip(&r.text)
        )));
    }
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut outcome = Err(Failure::Refused(format!(
        "tools/list: still paging after {MAX_PAGES} pages"
    )));
    for _ in 0..MAX_PAGES {
        let mut body = json!({ "jsonrpc": "2.0", "id": c.id(), "method": "tools/list" });
        if let Some(cur) = &cursor {
            body["params"] = json!({ "cursor": cur });
        }
        let reply = match c.post(&body, &headers).await {
            Ok(r) => r,
            Err(e) => {
                outcome = Err(e.into());
                break;
            }
        };
        let next = reply
            .result("tools/list")
            .and_then(|r| page(r, &mut tools, cursor.as_deref()));
        match next {
            Err(e) => {
                outcome = Err(Failure::Refused(e));
                break;
            }
            Ok(Some(next)) => cursor = Some(next),
            Ok(None) => {
                outcome = Ok(());
                break;
            }
        }
    }
    if session_id.is_some() {
        // End the session; a server that does not allow it answers 405, which is fine.
        let _ = c.send(Method::DELETE, None, &headers, None).await;
    }
    outcome.map(|()| Discovered {
        url: c.url.to_string(),
        protocol_version: version,
        stateless: false,
        server_name,
        tools,
    })
}

// ---------------------------------------------------------------------------------------------
// Tools → operation files

/// The output schema of a `call_tool_result` operation: the CallToolResult object.
pub fn call_tool_result_schema() -> Value {
    json!({
        "type": "object",
        "required": ["content"],
        "properties": {
            "content": {
                "type": "array",
                "items": { "type": "object", "required": ["type"],
                           "properties": { "type": { "type": "string" } } }
            },
            "structuredContent": {},
            "isError": { "type": "boolean" }
        }
    })
}

/// The contract of a discovered tool as an operation file without a mock, or why the tool
/// cannot be one.
pub fn operation_of_tool(tool: &Value) -> Result<OperationFile, String> {
    let Some(name) = tool.get("name").and_then(Value::as_str) else {
        return Err("the tool has no string `name`".into());
    };
    if !valid_operation_id(name) {
        return Err(format!(
            "`{name}` is not a valid operation_id ([a-z0-9_.-]{{1,128}}, the operation file's name): understudy cannot mock this tool"
        ));
    }
    let text = |k: &str| {
        tool.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let input_schema = match tool.get("inputSchema") {
        Some(s @ Value::Object(_)) => s.clone(),
        _ => json!({ "type": "object" }),
    };
    let (output_schema, result_form) = match tool.get("outputSchema") {
        Some(s @ Value::Object(o)) if !o.is_empty() => (s.clone(), None),
        _ => (call_tool_result_schema(), Some(ResultForm::CallToolResult)),
    };
    Ok(OperationFile {
        operation_id: name.to_string(),
        description: text("description"),
        title: text("title"),
        match_spec: None,
        write: None,
        input_schema,
        output_schema,
        idempotency: None,
        annotations: tool
            .get("annotations")
            .filter(|a| a.as_object().is_some_and(|o| !o.is_empty()))
            .cloned(),
        result_form,
        mock: None,
    })
}

/// Write (or update) one operation file per tool in `dir` (see the module doc).
pub fn write_operations(dir: &Path, tools: &[Value]) -> Result<Report, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{}: cannot create the directory: {e}", dir.display()))?;
    let profile = ProfileKind::Mcp.as_str();
    let mut report = Report::default();
    let mut seen = BTreeSet::new();
    for tool in tools {
        let label = tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        let discovered = match operation_of_tool(tool) {
            Ok(o) => o,
            Err(why) => {
                report.entries.push(Entry {
                    tool: label,
                    file: None,
                    fate: Fate::Skipped(why),
                    problems: Vec::new(),
                });
                continue;
            }
        };
        if !seen.insert(discovered.operation_id.clone()) {
            report.entries.push(Entry {
                tool: label,
                file: None,
                fate: Fate::Skipped(
                    "the server listed this name more than once; the first is kept".into(),
                ),
                problems: Vec::new(),
            });
            continue;
        }
        let file = dir.join(format!("{}.json", discovered.operation_id));
        let (fate, content) = if file.exists() {
            match load_file(&file, profile) {
                Ok(existing) => merge(existing.op, discovered, profile),
                Err(p) => {
                    report.entries.push(Entry {
                        tool: label,
                        file: Some(file),
                        fate: Fate::Skipped(format!(
                            "the existing file cannot be read ({}); left as it is",
                            p.message
                        )),
                        problems: Vec::new(),
                    });
                    continue;
                }
            }
        } else {
            (Fate::New, Some(discovered))
        };
        let mut problems = Vec::new();
        if let Some(op) = content {
            write_file(&file, &op)?;
            problems = crate::operation::check::check_operation(&op, profile, &file)
                .into_iter()
                .map(|p| {
                    if p.path.is_empty() {
                        p.message
                    } else {
                        format!("{}: {}", p.path, p.message)
                    }
                })
                .collect();
        }
        report.entries.push(Entry {
            tool: label,
            file: Some(file),
            fate,
            problems,
        });
    }
    report.gone = existing_ids(dir)
        .into_iter()
        .filter(|id| !seen.contains(id))
        .collect();
    Ok(report)
}

/// The discovered contract merged into an existing file: the fate, and the file to write
/// (`None` when nothing changes).
fn merge(
    existing: OperationFile,
    discovered: OperationFile,
    profile: &str,
) -> (Fate, Option<OperationFile>) {
    let old_hash = existing.contract_hash(profile);
    let new_hash = discovered.contract_hash(profile);
    let mut merged = OperationFile {
        mock: existing.mock.clone(),
        write: existing.write,
        idempotency: existing.idempotency.clone(),
        match_spec: existing.match_spec.clone(),
        ..discovered
    };
    if old_hash == new_hash {
        return if merged == existing {
            (Fate::Unchanged, None)
        } else {
            (Fate::Updated, Some(merged))
        };
    }
    let Some(mock) = merged.mock.as_mut() else {
        return (Fate::Changed, Some(merged));
    };
    // The mock stays exactly as it was, labelled with the contract it was written against.
    let mock_hash = existing
        .recorded_contract_hash()
        .map(str::to_string)
        .unwrap_or_else(|| old_hash.clone());
    if let Value::Object(m) = mock {
        m.entry("contract_hash")
            .or_insert_with(|| Value::String(old_hash.clone()));
    }
    (
        Fate::Stale {
            mock_hash,
            current_hash: new_hash,
        },
        Some(merged),
    )
}

/// Write an operation file atomically (a temporary file renamed over it).
fn write_file(file: &Path, op: &OperationFile) -> Result<(), String> {
    let mut text = serde_json::to_string_pretty(op)
        .map_err(|e| format!("{}: cannot serialize: {e}", file.display()))?;
    text.push('\n');
    crate::util::fs::write_atomic(file, text.as_bytes())
        .map_err(|e| format!("{}: cannot write: {e}", file.display()))
}

/// The operation ids of the `*.json` files in `dir`.
fn existing_ids(dir: &Path) -> Vec<String> {
    let mut ids = BTreeSet::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "json") {
                if let Some(stem) = p.file_stem().and_then(|s| s.to_str()) {
                    if !stem.starts_with('.') {
                        ids.insert(stem.to_string());
                    }
                }
            }
        }
    }
    ids.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_with_output_schema_is_structured() {
        let t = json!({"name": "lookup", "title": "Lookup", "description": "Find",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "annotations": {"readOnlyHint": true}, "icons": []});
        let op = operation_of_tool(&t).unwrap();
        assert_eq!(op.operation_id, "lookup");
        assert_eq!(op.title.as_deref(), Some("Lookup"));
        assert_eq!(op.result_form, None);
        assert_eq!(op.output_schema, t["outputSchema"]);
        assert_eq!(op.annotations, Some(json!({"readOnlyHint": true})));
    }

    #[test]
    fn tool_without_output_schema_is_a_call_tool_result() {
        let op = operation_of_tool(&json!({"name": "send"})).unwrap();
        assert_eq!(op.result_form, Some(ResultForm::CallToolResult));
        assert_eq!(op.input_schema, json!({"type": "object"}));
        assert_eq!(op.output_schema, call_tool_result_schema());
        assert!(operation_of_tool(&json!({"name": "Send"}))
            .unwrap_err()
            .contains("not a valid operation_id"));
        assert!(operation_of_tool(&json!({"title": "x"})).is_err());
    }

    #[test]
    fn merge_keeps_the_mock_and_marks_it_stale() {
        let old = operation_of_tool(&json!({"name": "t", "description": "old"})).unwrap();
        let mut with_mock = old.clone();
        with_mock.mock = Some(json!({"schema_version": 1}));
        with_mock.write = Some(false);
        let same = old.clone();
        assert_eq!(merge(with_mock.clone(), same, "mcp").0, Fate::Unchanged);
        let mut retitled = old.clone();
        retitled.title = Some("T".into());
        let (fate, file) = merge(with_mock.clone(), retitled, "mcp");
        assert_eq!(fate, Fate::Updated);
        assert_eq!(file.unwrap().write, Some(false));
        let new = operation_of_tool(&json!({"name": "t", "description": "new"})).unwrap();
        let (fate, file) = merge(with_mock.clone(), new.clone(), "mcp");
        let file = file.unwrap();
        let old_hash = old.contract_hash("mcp");
        assert_eq!(
            fate,
            Fate::Stale {
                mock_hash: old_hash.clone(),
                current_hash: new.contract_hash("mcp")
            }
        );
        assert_eq!(file.description.as_deref(), Some("new"));
        assert_eq!(file.mock.unwrap()["contract_hash"], json!(old_hash));
        let (fate, _) = merge(old, new, "mcp");
        assert_eq!(fate, Fate::Changed);
    }

    #[test]
    fn pages_and_sse_answers() {
        let mut tools = Vec::new();
        let next = page(
            &json!({"tools": [{"name": "a"}], "nextCursor": "c1"}),
            &mut tools,
            None,
        )
        .unwrap();
        assert_eq!(next.as_deref(), Some("c1"));
        assert!(page(
            &json!({"tools": [], "nextCursor": "c1"}),
            &mut tools,
            Some("c1")
        )
        .is_err());
        assert_eq!(
            page(&json!({"tools": []}), &mut tools, Some("c1")).unwrap(),
            None
        );
        let stream = b"id: 0\ndata: \n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n";
        assert_eq!(
            find_answer_sse(stream, Some(3)),
            Some(json!({"jsonrpc": "2.0", "id": 3, "result": {}}))
        );
        assert_eq!(find_answer_sse(stream, Some(4)), None);
    }
}
