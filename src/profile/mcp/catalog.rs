//! MCP beyond tools (docs/src/reference/mcp.md), the wire side: `resources/list`, `resources/templates/list`,
//! `resources/read`, `resources/subscribe`/`unsubscribe`, `prompts/list`, `prompts/get`,
//! `completion/complete` and `logging/setLevel`, in both eras.
//!
//! The backend describes what it serves with [`McpBackend::catalog`] (resources and prompts
//! of the integration's pinned contracts, in stable order); a read or a get runs through
//! [`McpBackend::call_tool`] under the resource's or prompt's name, so it is evaluated,
//! pinned and recorded exactly like a tool call (the input is the template variables or the
//! prompt arguments).
//!
//! Decisions:
//! - `resources/read` of a URI no resource or template matches: JSON-RPC **-32002**
//!   "Resource not found" with `data {uri}` (the code the MCP specification names); nothing
//!   reaches the backend, so nothing is recorded. `prompts/get` of an unknown prompt, and
//!   `completion/complete` of an unknown reference: -32602.
//! - A read whose mock answers an input error (a template variable failing its schema) or a
//!   prompt get missing a required argument: -32602 with the problem as message (there is no
//!   `isError` result for these methods). Harness errors: -32603 with `understudy_error`, as
//!   for tools.
//! - Every list is paginated with opaque cursors (page size as for `tools/list`); a bad
//!   cursor is -32602. Stateless results carry `ttlMs`/`cacheScope` on lists and reads.
//! - `resources/subscribe`/`unsubscribe` are acknowledged with `{}` for a URI the catalog
//!   serves (else -32002).
//! - `logging/setLevel` (session era only; 404/-32601 in 2026-07-28, where it is gone) takes
//!   one of the eight syslog levels (else -32602) and answers `{}`; the level is kept per
//!   endpoint (one attempt's sessions of one integration) and filters the log notifications
//!   variants declare.
//! - `completion/complete` filters the file's `completions` values for the argument by the
//!   typed prefix (case-sensitive), at most 100, with `total` and `hasMore`.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::http::{b64url_decode, b64url_encode};
use super::jsonrpc::{self, INVALID_PARAMS};
use super::tools::{input_error_text, render_outcome, CallAnswer};
use super::{
    finish_stateless, profile, Answer, Era, McpBackend, McpEndpoint, Req, ToolCallOutcome,
};
use crate::contract::ResultForm;

/// The MCP resource-not-found error code.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// The syslog levels of `logging/setLevel`, least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// One resource or resource template as the backend knows it.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct ResourceInfo {
    pub name: String,
    #[serde(default)]
    pub uri: Option<String>,
    #[serde(default)]
    pub uri_template: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub completions: BTreeMap<String, Vec<String>>,
}

/// One prompt as the backend knows it.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct PromptInfo {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// As in `prompts/list`: `{name, title?, description?, required?}`.
    #[serde(default)]
    pub arguments: Vec<Value>,
    #[serde(default)]
    pub completions: BTreeMap<String, Vec<String>>,
}

/// What an integration serves besides tools.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Catalog {
    pub resources: Vec<ResourceInfo>,
    pub prompts: Vec<PromptInfo>,
}

/// Per-endpoint state of these methods.
#[derive(Debug, Default)]
pub struct ExtrasState {
    /// The `logging/setLevel` level (an index into [`LOG_LEVELS`]); `None` until set.
    level: Mutex<Option<usize>>,
    /// Subscribed URI → the sessions subscribed to it.
    subscriptions: Mutex<BTreeMap<String, HashSet<String>>>,
}

impl ExtrasState {
    /// Whether a log message at `level` passes the level set with `logging/setLevel` (all
    /// pass before one is set).
    pub fn log_passes(&self, level: &str) -> bool {
        let set = *self.level.lock().unwrap_or_else(|p| p.into_inner());
        let at = LOG_LEVELS.iter().position(|l| *l == level).unwrap_or(0);
        set.is_none_or(|s| at >= s)
    }

    fn subs(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, HashSet<String>>> {
        self.subscriptions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The URIs some session is subscribed to, sorted.
    pub fn subscribed(&self) -> Vec<String> {
        self.subs().keys().cloned().collect()
    }

    /// The sessions subscribed to `uri`, sorted.
    pub fn subscribers(&self, uri: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .subs()
            .get(uri)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Drop an ended session's subscriptions.
    pub fn forget_session(&self, session: &str) {
        let mut subs = self.subs();
        subs.retain(|_, s| {
            s.remove(session);
            !s.is_empty()
        });
    }
}

/// The methods of this module, or `None` for every other method.
pub(super) async fn dispatch<B: McpBackend + ?Sized>(
    ep: &McpEndpoint,
    req: Req<'_>,
    backend: &B,
    asker: &dyn super::ask::Asker,
) -> Option<Answer> {
    let Req {
        era,
        session,
        id,
        method,
        params,
    } = req;
    let stateless = era == Era::Stateless;
    let finish = |mut result: Value, cache: bool| {
        if stateless {
            if cache {
                let s = &profile().mcp.stateless_era;
                result["ttlMs"] = json!(s.list_ttl_ms);
                result["cacheScope"] = json!(s.list_cache_scope);
            }
            finish_stateless(&mut result, &backend.server_name());
        }
        Answer::ok(id, result)
    };
    let invalid = |message: String| Answer::err(id, INVALID_PARAMS, &message, None, 200);
    let param = |k: &str| params.and_then(|m| m.get(k)).filter(|v| !v.is_null());
    let cursor = || match param("cursor") {
        None => Ok(None),
        Some(Value::String(c)) => Ok(Some(c.as_str())),
        Some(_) => Err(invalid("Invalid params: cursor must be a string".into())),
    };
    let page_size = ep.page_size;
    let served = |cat: &Catalog| match method {
        m if m.starts_with("resources/") => !cat.resources.is_empty(),
        m if m.starts_with("prompts/") => !cat.prompts.is_empty(),
        "completion/complete" => !cat.resources.is_empty() || !cat.prompts.is_empty(),
        _ => true,
    };
    if !served(&backend.catalog()) {
        return None; // a capability the server does not have: method not found
    }
    Some(match method {
        "resources/list" | "resources/templates/list" | "prompts/list" => {
            let cursor = match cursor() {
                Ok(c) => c,
                Err(a) => return Some(a),
            };
            let cat = backend.catalog();
            let (key, items): (&str, Vec<(String, Value)>) = match method {
                "resources/list" => (
                    "resources",
                    cat.resources
                        .iter()
                        .filter_map(|r| {
                            Some((r.name.clone(), resource_json(r, r.uri.as_ref()?, "uri")))
                        })
                        .collect(),
                ),
                "resources/templates/list" => (
                    "resourceTemplates",
                    cat.resources
                        .iter()
                        .filter_map(|r| {
                            Some((
                                r.name.clone(),
                                resource_json(r, r.uri_template.as_ref()?, "uriTemplate"),
                            ))
                        })
                        .collect(),
                ),
                _ => (
                    "prompts",
                    cat.prompts
                        .iter()
                        .map(|p| (p.name.clone(), prompt_json(p)))
                        .collect(),
                ),
            };
            match page(key, items, cursor, page_size) {
                Ok(r) => finish(r, true),
                Err(m) => invalid(m),
            }
        }
        "resources/subscribe" | "resources/unsubscribe" if stateless => return None, // removed in 2026-07-28
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            let Some(uri) = param("uri").and_then(Value::as_str) else {
                return Some(invalid(format!(
                    "Invalid params: {method} needs params.uri (a string)"
                )));
            };
            let cat = backend.catalog();
            let Some((name, input)) = resolve(&cat, uri) else {
                return Some(Answer::err(
                    id,
                    RESOURCE_NOT_FOUND,
                    &format!("Resource not found: {uri}"),
                    Some(json!({"uri": uri})),
                    200,
                ));
            };
            if method != "resources/read" {
                let session = session.unwrap_or_default().to_string();
                let mut subs = ep.extras.subs();
                if method == "resources/subscribe" {
                    subs.entry(uri.to_string()).or_default().insert(session);
                } else if let Some(s) = subs.get_mut(uri) {
                    s.remove(&session);
                    if s.is_empty() {
                        subs.remove(uri);
                    }
                }
                return Some(finish(json!({}), false));
            }
            match backend
                .call_tool_asking(&name, Value::Object(input), asker)
                .await
            {
                ToolCallOutcome::InputRequired(r) => finish(r, false),
                ToolCallOutcome::Ok(r) => finish(
                    json!({"contents": r.get("contents").cloned().unwrap_or_else(|| json!([]))}),
                    true,
                ),
                ToolCallOutcome::InputError(e) => {
                    invalid(format!("Invalid params: {}", input_error_text(&e)))
                }
                outcome => error_answer(id, &name, outcome),
            }
        }
        "prompts/get" => {
            let Some(name) = param("name").and_then(Value::as_str) else {
                return Some(invalid(
                    "Invalid params: prompts/get needs params.name (a string)".into(),
                ));
            };
            let arguments = match param("arguments") {
                None => json!({}),
                Some(a @ Value::Object(_)) => a.clone(),
                Some(_) => {
                    return Some(invalid(
                        "Invalid params: prompts/get params.arguments must be an object".into(),
                    ))
                }
            };
            let cat = backend.catalog();
            if !cat.prompts.iter().any(|p| p.name == name) {
                let known: Vec<&str> = cat.prompts.iter().map(|p| p.name.as_str()).collect();
                return Some(invalid(format!(
                    "Invalid params: unknown prompt `{name}` (the prompts: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )));
            }
            match backend.call_tool_asking(name, arguments, asker).await {
                ToolCallOutcome::Ok(r) | ToolCallOutcome::InputRequired(r) => finish(r, false),
                ToolCallOutcome::InputError(e) => {
                    invalid(format!("Invalid params: {}", input_error_text(&e)))
                }
                outcome => error_answer(id, name, outcome),
            }
        }
        "completion/complete" => {
            let cat = backend.catalog();
            let reference = param("ref");
            let arg = param("argument");
            let (Some(arg_name), value) = (
                arg.and_then(|a| a.get("name")).and_then(Value::as_str),
                arg.and_then(|a| a.get("value"))
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ) else {
                return Some(invalid(
                    "Invalid params: completion/complete needs params.argument.name (a string)"
                        .into(),
                ));
            };
            let kind = reference
                .and_then(|r| r.get("type"))
                .and_then(Value::as_str);
            let completions = match kind {
                Some("ref/prompt") => {
                    let name = reference
                        .and_then(|r| r.get("name"))
                        .and_then(Value::as_str);
                    cat.prompts
                        .iter()
                        .find(|p| Some(p.name.as_str()) == name)
                        .map(|p| &p.completions)
                }
                Some("ref/resource") => {
                    let uri = reference.and_then(|r| r.get("uri")).and_then(Value::as_str);
                    cat.resources
                        .iter()
                        .find(|r| {
                            uri.is_some()
                                && (r.uri_template.as_deref() == uri || r.uri.as_deref() == uri)
                        })
                        .map(|r| &r.completions)
                }
                _ => None,
            };
            let Some(completions) = completions else {
                return Some(invalid("Invalid params: completion/complete params.ref names no prompt or resource of this server".into()));
            };
            let all: Vec<&String> = completions
                .get(arg_name)
                .map(|v| v.iter().filter(|c| c.starts_with(value)).collect())
                .unwrap_or_default();
            let shown: Vec<&String> = all.iter().take(100).copied().collect();
            finish(
                json!({"completion": {"values": shown, "total": all.len(), "hasMore": all.len() > shown.len()}}),
                false,
            )
        }
        "logging/setLevel" if !stateless => {
            let Some(at) = param("level")
                .and_then(Value::as_str)
                .and_then(|l| LOG_LEVELS.iter().position(|x| *x == l))
            else {
                return Some(invalid(format!(
                    "Invalid params: logging/setLevel needs params.level, one of {}",
                    LOG_LEVELS.join(", ")
                )));
            };
            *ep.extras.level.lock().unwrap_or_else(|p| p.into_inner()) = Some(at);
            Answer::ok(id, json!({}))
        }
        _ => return None,
    })
}

/// The capabilities to advertise: the profile's (tools), plus `resources` (with
/// `subscribe`), `prompts` and `completions` when the catalog has any, plus `logging` in the
/// session era (it is gone in 2026-07-28).
pub fn capabilities<B: McpBackend + ?Sized>(base: &Value, backend: &B, stateless: bool) -> Value {
    let mut caps = base.clone();
    let cat = backend.catalog();
    if let Value::Object(m) = &mut caps {
        if !cat.resources.is_empty() {
            // 2026-07-28 removed resources/subscribe (its successor, subscriptions/listen, is
            // not served), so only the session era advertises it.
            m.insert(
                "resources".into(),
                json!({"subscribe": !stateless, "listChanged": false}),
            );
        }
        if !cat.prompts.is_empty() {
            m.insert("prompts".into(), json!({"listChanged": false}));
        }
        if !cat.resources.is_empty() || !cat.prompts.is_empty() {
            m.insert("completions".into(), json!({}));
        }
        if !stateless {
            m.insert("logging".into(), json!({}));
        }
    }
    caps
}

fn error_answer(id: &Value, name: &str, outcome: ToolCallOutcome) -> Answer {
    match render_outcome(name, outcome, ResultForm::CallToolResult, false) {
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
        CallAnswer::Result(r) => Answer::ok(id, r),
    }
}

/// The resource (name and input) a URI names: a fixed URI first, then the first template
/// that matches.
pub fn resolve(cat: &Catalog, uri: &str) -> Option<(String, Map<String, Value>)> {
    if let Some(r) = cat.resources.iter().find(|r| r.uri.as_deref() == Some(uri)) {
        return Some((r.name.clone(), Map::new()));
    }
    cat.resources.iter().find_map(|r| {
        let t = r.uri_template.as_deref()?;
        crate::contract::uri_template::match_template(t, uri).map(|vars| (r.name.clone(), vars))
    })
}

fn resource_json(r: &ResourceInfo, uri: &str, key: &str) -> Value {
    let mut m = Map::new();
    m.insert(key.into(), json!(uri));
    m.insert("name".into(), json!(r.name));
    for (k, v) in [
        ("title", &r.title),
        ("description", &r.description),
        ("mimeType", &r.mime_type),
    ] {
        if let Some(v) = v {
            m.insert(k.into(), json!(v));
        }
    }
    if let (Some(s), "uri") = (r.size, key) {
        m.insert("size".into(), json!(s));
    }
    Value::Object(m)
}

fn prompt_json(p: &PromptInfo) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(p.name));
    for (k, v) in [("title", &p.title), ("description", &p.description)] {
        if let Some(v) = v {
            m.insert(k.into(), json!(v));
        }
    }
    if !p.arguments.is_empty() {
        m.insert("arguments".into(), json!(p.arguments));
    }
    Value::Object(m)
}

fn digest(names: &[&str]) -> [u8; 8] {
    let mut h = Sha256::new();
    for n in names {
        h.update(n.as_bytes());
        h.update(b"\n");
    }
    let d = h.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&d[..8]);
    out
}

/// One page of a list: `{<key>: [...], nextCursor?}`; cursors are bound to the name list.
fn page(
    key: &str,
    items: Vec<(String, Value)>,
    cursor: Option<&str>,
    page_size: usize,
) -> Result<Value, String> {
    let names: Vec<&str> = items.iter().map(|(n, _)| n.as_str()).collect();
    let d = digest(&names);
    let start = match cursor {
        None => 0,
        Some(c) => b64url_decode(c)
            .filter(|b| b.len() == 16 && b[8..] == d)
            .and_then(|b| usize::try_from(u64::from_be_bytes(b[..8].try_into().ok()?)).ok())
            .filter(|o| *o > 0 && *o < items.len())
            .ok_or_else(|| format!("Invalid params: Invalid cursor: {c:?}"))?,
    };
    let end = start.saturating_add(page_size.max(1)).min(items.len());
    let mut m = Map::new();
    m.insert(
        key.into(),
        Value::Array(items[start..end].iter().map(|(_, v)| v.clone()).collect()),
    );
    if end < items.len() {
        let mut b = (end as u64).to_be_bytes().to_vec();
        b.extend_from_slice(&d);
        m.insert("nextCursor".into(), json!(b64url_encode(&b)));
    }
    Ok(Value::Object(m))
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
