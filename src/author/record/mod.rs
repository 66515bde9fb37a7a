//! Record mode (docs/src/guides/record.md): captured exchanges → draft operation files. A pure transformation
//! ([`drafts()`]) plus one writer ([`write_drafts`]); no HTTP, no tokio, no store.
//!
//! The server captures each forwarded call as an [`Exchange`] (an HTTP request/response, or an
//! MCP `tools/call` with its result), keeps them in order, and on stop (or
//! `POST /_understudy/api/drafts/flush`) calls [`drafts()`] with the integration's loaded
//! operations, then [`write_drafts`] into `--out DIR`. Secrets are scrubbed ([`scrub`])
//! inside [`drafts()`] whatever the caller did before; the server should also call
//! [`scrub::scrub_exchange`] before it keeps an exchange in memory or evidence.
//!
//! - [`drafts()`] (module [`drafts`](mod@self::drafts)): the entry point, contracts and `check`
//!   of every draft; its steps in private modules beside it — `group.rs` (exchanges →
//!   operations), `templates.rs` (path and query templates), `answers.rs` (envelopes, tool
//!   results), `variants.rs` (variants, state sequences, examples), `limits.rs` (docs/src/reference/mock-definition.md#checks-and-limits
//!   limits, shrinking).
//! - [`infer`]: id-like segments, operation names, schema inference, outcome shapes.
//! - [`scrub`]: the secret denylist.
//!
//! # Writing (decisions)
//! - A draft goes to `DIR/<operation_id>.json` when no such file exists, or when the existing
//!   file has no `mock` and exactly the draft's contract (only the mock is added).
//!   Otherwise — the file has a mock, or its contract differs (e.g. the draft inferred an
//!   output schema) — the draft goes to `DIR/<operation_id>.json.draft`: an existing
//!   operation file's contract and mock are never overwritten, and `*.json.draft` is never
//!   loaded by `serve`/`check` (they read `*.json`), so a review step is explicit: rename it.
//! - The operation id must be a valid one (`[a-z0-9_.-]{1,128}`, not `.`/`..`), the file must
//!   land directly inside `DIR`, and an existing target that is a symlink is refused. Files are
//!   written to a fresh temporary file in `DIR` and renamed into place.
//! - `DIR/record-notes.txt` lists every note of the draft set (what was scrubbed, trimmed or
//!   dropped, and every `check` problem left) when there are notes.

mod answers;
mod ctx;
pub mod drafts;
mod group;
pub mod infer;
mod limits;
mod mcp;
pub mod scrub;
mod templates;
mod variants;

pub use drafts::{drafts, exchange_input};
pub use scrub::{is_secret_field, is_secret_header, scrub_exchange, scrub_json};

use crate::contract::ProfileKind;
use crate::contract::{valid_operation_id, OperationFile};
use crate::operation::mcp_files::ExtraKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One captured call of one integration, as the server saw it (after forwarding).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub integration: String,
    pub profile: ProfileKind,
    /// The operation file the request matched, when it matched one (the server knows);
    /// `None` lets [`drafts()`] match it against the existing operations itself. A built-in
    /// profile template id without a file counts as unmatched.
    pub matched_operation: Option<String>,
    /// Order of the calls (a sequence number or milliseconds): drafts replay them in it.
    pub at_ms: u64,
    pub call: Call,
}

/// What was exchanged: an HTTP call (`rest`, `salesforce`), an MCP tool call, or another MCP
/// request whose answer a draft needs ([`McpCall`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Call {
    Http(HttpCall),
    Tool(ToolCall),
    Mcp(McpCall),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpCall {
    /// As received (`POST ?_HttpMethod=PATCH` is resolved by [`drafts()`] for Salesforce).
    pub method: String,
    /// Raw path relative to the integration base (`/services/data/v60.0/query`), as
    /// received: percent-escapes kept; the `/~token` and `/<integration>` prefixes removed.
    pub path: String,
    /// Decoded query parameters in order (`+` already a space).
    pub query: Vec<(String, String)>,
    pub request_headers: Vec<(String, String)>,
    /// The request body ([`parse_body`]); `None` when there was none.
    pub request_body: Option<Value>,
    pub status: u16,
    pub response_headers: Vec<(String, String)>,
    /// The response body ([`parse_body`]); `None` when there was none.
    pub response_body: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool name (the operation id).
    pub name: String,
    /// `params.arguments` (`{}` when absent).
    pub arguments: Value,
    pub outcome: ToolOutcome,
    /// The notifications the server sent on the call's response stream before the result
    /// (`{"method", "params"}` as sent: `notifications/message`, `notifications/progress`…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<Value>,
    /// The requests the server sent the client on the call's stream (elicitation, sampling)
    /// and the client's answers, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asks: Vec<Ask>,
}

/// One server-to-client request made during a tool call, and what the client answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ask {
    /// `elicitation/create`, `sampling/createMessage`, …
    pub method: String,
    /// The request's `params` (volatile `_meta` members removed).
    pub params: Value,
    /// The client's JSON-RPC answer (`result` or `error`); `None` when none was seen.
    pub answer: Option<ToolOutcome>,
}

/// An MCP request other than `tools/call` that drafts use: `tools/list`, `resources/list`,
/// `resources/templates/list`, `resources/read`, `prompts/list`, `prompts/get`,
/// `completion/complete` (the methods of [`MCP_CAPTURED`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpCall {
    pub method: String,
    /// The request's `params` (`{}` when absent; volatile `_meta` members removed).
    pub params: Value,
    pub outcome: ToolOutcome,
}

/// The MCP methods besides `tools/call` whose answers record mode keeps ([`McpCall`]).
pub const MCP_CAPTURED: [&str; 7] = [
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
];

/// The `_meta` members that change from call to call and are never part of a recording:
/// the progress token and the W3C trace context.
pub const VOLATILE_META: [&str; 4] = ["progressToken", "traceparent", "tracestate", "baggage"];

/// `params` as kept in an exchange: the volatile `_meta` members removed, and `_meta`
/// itself when nothing else is left in it.
pub fn stable_params(params: Option<&Value>) -> Value {
    let mut p = params
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    if let Some(m) = p.as_object_mut() {
        if let Some(Value::Object(meta)) = m.get_mut("_meta") {
            for k in VOLATILE_META {
                meta.remove(k);
            }
            if meta.is_empty() {
                m.remove("_meta");
            }
        }
    }
    p
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutcome {
    /// The JSON-RPC `result`: a CallToolResult (`content`, `structuredContent`?, `isError`?),
    /// or the result of the [`McpCall`]'s method.
    Result(Value),
    /// A JSON-RPC `error` object (a protocol error: mocks cannot answer those; noted, skipped).
    Error(Value),
}

impl ToolOutcome {
    /// The `result` or `error` of a JSON-RPC response message (`None` for anything else).
    pub fn of_response(message: &Value) -> Option<ToolOutcome> {
        if message.get("method").is_some() {
            return None;
        }
        message
            .get("result")
            .cloned()
            .map(ToolOutcome::Result)
            .or_else(|| message.get("error").cloned().map(ToolOutcome::Error))
    }

    /// The JSON value either way.
    pub fn value_mut(&mut self) -> &mut Value {
        match self {
            ToolOutcome::Result(v) | ToolOutcome::Error(v) => v,
        }
    }
}

pub use crate::upstream::answer::parse_body;

/// The drafts of one integration (see [`drafts()`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DraftSet {
    pub integration: String,
    pub profile: ProfileKind,
    pub files: Vec<DraftFile>,
    /// Everything worth telling the user, one line each, prefixed with `<integration>/<op>: `
    /// where it concerns one operation: scrubbed places, trimmed arrays, dropped
    /// examples/variants/rules, skipped exchanges, `check` problems left.
    pub notes: Vec<String>,
}

/// One draft operation file.
#[derive(Debug, Clone, PartialEq)]
pub struct DraftFile {
    pub operation_id: String,
    /// The whole operation file: contract + `mock` (with `contract_hash`); for an MCP resource
    /// or prompt, the operation its file loads as.
    pub op: OperationFile,
    /// An MCP resource or prompt (docs/src/reference/mcp.md): which, and the file as written
    /// (`resources/<name>.json`, `prompts/<name>.json`); `None` for an operation file.
    pub extra: Option<(ExtraKind, Value)>,
    /// The exchange matched an existing operation file, whose contract was kept.
    pub existing: bool,
    /// How many exchanges went into it.
    pub exchanges: usize,
    /// The `at_ms` of each HTTP exchange it was drafted from (an importer's index of the
    /// source entry, by which it names that entry's place); empty for an MCP draft.
    pub from: Vec<u64>,
    /// `check` problems left in this draft (also in [`DraftSet::notes`]); empty = passes.
    pub problems: Vec<String>,
}

impl DraftFile {
    /// The file as pretty JSON, as [`write_drafts`] writes it.
    pub fn to_json_pretty(&self) -> String {
        let mut s = match &self.extra {
            Some((_, v)) => serde_json::to_string_pretty(v),
            None => serde_json::to_string_pretty(&self.op),
        }
        .unwrap_or_default();
        s.push('\n');
        s
    }

    /// The file's path relative to the drafts directory: `<id>.json`, or
    /// `resources/<id>.json` / `prompts/<id>.json`.
    pub fn rel_path(&self) -> PathBuf {
        match &self.extra {
            Some((kind, _)) => Path::new(kind.dir()).join(format!("{}.json", self.operation_id)),
            None => PathBuf::from(format!("{}.json", self.operation_id)),
        }
    }
}

/// The notes file [`write_drafts`] writes beside the drafts.
pub const NOTES_FILE: &str = "record-notes.txt";

/// Write a draft set into `dir` (created when missing) following the module doc's rules.
/// Returns every file written (drafts, then the notes file). Stops at the first error, with a
/// message naming the file.
pub fn write_drafts(dir: &Path, set: &DraftSet) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let mut written = Vec::new();
    for d in &set.files {
        let id = &d.operation_id;
        if !valid_operation_id(id) || d.op.operation_id != *id {
            return Err(format!(
                "refusing to write operation `{id}`: not a valid operation id (expected 1-128 characters of a-z, 0-9, `_`, `.` and `-`)"
            ));
        }
        let sub = match &d.extra {
            Some((kind, _)) => sub_dir(dir, kind.dir())?,
            None => dir.to_path_buf(),
        };
        let main = safe_child(&sub, &format!("{id}.json"))?;
        let target = match existing_file(&main)? {
            None => main,
            Some(text) => {
                if same_contract_without_mock(d, &text) {
                    main
                } else {
                    safe_child(&sub, &format!("{id}.json.draft"))?
                }
            }
        };
        existing_file(&target)?;
        write_atomic(&target, d.to_json_pretty().as_bytes())?;
        written.push(target);
    }
    if !set.notes.is_empty() {
        let notes = safe_child(dir, NOTES_FILE)?;
        existing_file(&notes)?;
        let mut text = format!(
            "understudy record: notes on the drafts of `{}` ({} profile)\n\n",
            set.integration, set.profile
        );
        for n in &set.notes {
            text.push_str(n);
            text.push('\n');
        }
        write_atomic(&notes, text.as_bytes())?;
        written.push(notes);
    }
    Ok(written)
}

/// Whether an existing file's `text` has no mock and exactly the draft's contract (the draft
/// then only adds the mock).
fn same_contract_without_mock(d: &DraftFile, text: &str) -> bool {
    match &d.extra {
        None => serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|mut v| {
                crate::util::json::strip_schema_member(&mut v).ok()?;
                serde_json::from_value::<OperationFile>(v).ok()
            })
            .is_some_and(|old| {
                old.mock.is_none() && {
                    let mut draft_contract = d.op.clone();
                    draft_contract.mock = None;
                    draft_contract == old
                }
            }),
        Some((_, file)) => serde_json::from_str::<Value>(text).ok().is_some_and(|old| {
            let mut draft = file.clone();
            if let Value::Object(m) = &mut draft {
                m.remove("mock");
            }
            let mut old = old;
            crate::util::json::strip_schema_member(&mut old).is_ok()
                && old.get("mock").is_none()
                && old == draft
        }),
    }
}

/// `dir/name` as a directory (created when missing), refusing a symbolic link.
fn sub_dir(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let p = safe_child(dir, name)?;
    match std::fs::symlink_metadata(&p) {
        Ok(m) if m.file_type().is_symlink() || !m.is_dir() => {
            return Err(format!(
                "{}: refusing to write drafts into something that is not a plain directory",
                p.display()
            ))
        }
        _ => {}
    }
    std::fs::create_dir_all(&p).map_err(|e| format!("{}: cannot create: {e}", p.display()))?;
    Ok(p)
}

/// `dir/name`, refusing any name that is not one plain file name.
fn safe_child(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let p = dir.join(name);
    let plain = Path::new(name).components().count() == 1
        && !name.contains(['/', '\\'])
        && p.parent() == Some(dir)
        && p.file_name().is_some_and(|f| f == name);
    if plain {
        Ok(p)
    } else {
        Err(format!(
            "refusing to write `{name}`: the file would not stay directly inside {}",
            dir.display()
        ))
    }
}

/// The text of an existing regular file; `None` when absent; an error for a symlink or
/// anything else that is not a regular file.
fn existing_file(p: &Path) -> Result<Option<String>, String> {
    match std::fs::symlink_metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", p.display())),
        Ok(m) if m.file_type().is_symlink() => Err(format!(
            "{}: refusing to write through a symbolic link",
            p.display()
        )),
        Ok(m) if !m.is_file() => Err(format!("{}: exists and is not a regular file", p.display())),
        Ok(_) => std::fs::read_to_string(p)
            .map(Some)
            .map_err(|e| format!("{}: {e}", p.display())),
    }
}

/// Write through a fresh temporary file beside `target`, then rename
/// ([`crate::util::fs::write_atomic`]).
fn write_atomic(target: &Path, bytes: &[u8]) -> Result<(), String> {
    crate::util::fs::write_atomic(target, bytes)
        .map_err(|e| format!("{}: cannot write: {e}", target.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies() {
        assert_eq!(parse_body(b""), None);
        assert_eq!(parse_body(b" \n"), None);
        let deep = format!("{}{}", "[".repeat(93), "]".repeat(93));
        assert_eq!(parse_body(deep.as_bytes()), None, "too deep to store");
        let ok = format!("{}{}", "[".repeat(92), "]".repeat(92));
        assert!(parse_body(ok.as_bytes()).is_some());
        assert_eq!(parse_body(br#"{"a":1}"#), Some(serde_json::json!({"a": 1})));
        assert_eq!(
            parse_body(b"a=1&b=2"),
            Some(Value::String("a=1&b=2".into()))
        );
        assert_eq!(parse_body(&[0xff, 0xfe, 0x00]), None);
    }

    #[test]
    fn safe_child_refuses_traversal() {
        let d = Path::new("/tmp/x");
        assert!(safe_child(d, "a.json").is_ok());
        assert!(safe_child(d, "../a.json").is_err());
        assert!(safe_child(d, "a/b.json").is_err());
        assert!(safe_child(d, "/etc/passwd").is_err());
        assert!(safe_child(d, "..").is_err());
    }
}
