//! The embedded profile data `profiles/mcp.json`: protocol versions per era, the write rule,
//! the native tool-error shapes and the `simulate` answers. Parsed once; unknown keys are
//! rejected so a typo in the file fails the unit tests instead of being ignored.
//!
//! The file follows the top-level layout of the HTTP profiles (`profile`, `description`,
//! `write`, `errors`, `templates`, `simulate`) where a key means the same thing, and keeps
//! what only MCP has under `mcp`:
//! ```text
//! { "profile": "mcp", "description": "…",
//!   "write": { "rule": "annotations", "read_only_hint": "readOnlyHint", "description": "…" },
//!   "errors": { "input_error": { "result": <CallToolResult template> },
//!               "blocked_write": { "result": <CallToolResult template> } },
//!   "templates": [],
//!   "simulate": { "structured": <structured output template>, "call_tool_result": <CallToolResult template> },
//!   "mcp": { "session_era": { "versions": [newest first…], "assumed_without_header", "batching": […], "sse_priming": […] },
//!            "stateless_era": { "versions": […], "list_ttl_ms", "list_cache_scope", "discover_ttl_ms", "discover_cache_scope" },
//!            "capabilities": {…}, "tools_list_page_size", "max_sessions" } }
//! ```
//! In templates a string that is exactly `"{message}"` is replaced by the message; nothing
//! else is interpolated (the same rule as the HTTP profiles).

use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

/// The text of `profiles/mcp.json`, embedded in the binary.
pub const PROFILE_JSON: &str = include_str!("../../../profiles/mcp.json");

/// `profiles/mcp.json` as written (see the module doc).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpProfileFile {
    pub profile: String,
    #[serde(default)]
    pub description: String,
    pub write: WriteRule,
    pub errors: ErrorShapes,
    /// Always empty: MCP operations are tools, known from operation files or discovery.
    #[serde(default)]
    pub templates: Vec<Value>,
    pub simulate: SimulateShapes,
    pub mcp: ProtocolData,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteRule {
    /// `"annotations"`: a tool is a write unless `annotations[read_only_hint]` is `true`.
    pub rule: String,
    pub read_only_hint: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorShapes {
    pub input_error: ResultShape,
    pub blocked_write: ResultShape,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultShape {
    /// A CallToolResult template.
    pub result: Value,
}

/// The synthetic success of a simulated write (dry-run, `unmatched_writes: simulate`), one
/// per result form.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimulateShapes {
    pub structured: Value,
    pub call_tool_result: Value,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolData {
    pub session_era: SessionEra,
    pub stateless_era: StatelessEra,
    /// `capabilities` of `initialize` and `server/discover`.
    pub capabilities: Value,
    pub tools_list_page_size: usize,
    /// Live sessions kept per endpoint before the oldest is evicted.
    pub max_sessions: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionEra {
    /// Newest first; the first is offered when a client asks for a version we lack.
    pub versions: Vec<String>,
    /// The version assumed for a request with no `MCP-Protocol-Version` and no other clue.
    pub assumed_without_header: String,
    /// Versions in which a POST body may be a JSON-RPC batch.
    pub batching: Vec<String>,
    /// Versions whose SSE responses start with a priming event (an id and empty data).
    pub sse_priming: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatelessEra {
    /// Newest first.
    pub versions: Vec<String>,
    pub list_ttl_ms: u64,
    pub list_cache_scope: String,
    pub discover_ttl_ms: u64,
    pub discover_cache_scope: String,
}

impl McpProfileFile {
    /// Parse and check a profile text.
    pub fn parse(text: &str) -> Result<McpProfileFile, String> {
        let file: McpProfileFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let p = &file.mcp;
        if crate::contract::ProfileKind::parse(&file.profile)
            != Some(crate::contract::ProfileKind::Mcp)
        {
            return Err(format!("profile: expected \"mcp\", got {:?}", file.profile));
        }
        if file.write.rule != "annotations" {
            return Err(format!(
                "write/rule: only \"annotations\" is supported, got {:?}",
                file.write.rule
            ));
        }
        if p.session_era.versions.is_empty() || p.stateless_era.versions.is_empty() {
            return Err("mcp: each era needs at least one version".into());
        }
        if !p
            .session_era
            .versions
            .contains(&p.session_era.assumed_without_header)
        {
            return Err("mcp/session_era/assumed_without_header: not a supported version".into());
        }
        for scope in [
            &p.stateless_era.list_cache_scope,
            &p.stateless_era.discover_cache_scope,
        ] {
            if scope != "public" && scope != "private" {
                return Err(format!(
                    "mcp/stateless_era: cache scope must be public or private, got {scope:?}"
                ));
            }
        }
        if p.tools_list_page_size == 0 || p.max_sessions == 0 {
            return Err("mcp: tools_list_page_size and max_sessions must be positive".into());
        }
        Ok(file)
    }

    pub fn is_session_version(&self, v: &str) -> bool {
        self.mcp.session_era.versions.iter().any(|s| s == v)
    }

    pub fn is_stateless_version(&self, v: &str) -> bool {
        self.mcp.stateless_era.versions.iter().any(|s| s == v)
    }

    /// The newest session-era version: the answer to `initialize` asking for one we lack.
    pub fn latest_session_version(&self) -> &str {
        &self.mcp.session_era.versions[0]
    }

    /// Every supported version, stateless era first, newest first within an era.
    pub fn all_versions(&self) -> Vec<String> {
        let mut v = self.mcp.stateless_era.versions.clone();
        v.extend(self.mcp.session_era.versions.iter().cloned());
        v
    }

    /// Whether a protocol version belongs to the stateless era: a supported stateless version,
    /// or an unknown date-shaped version newer than every session-era version (a future
    /// revision — it gets `UnsupportedProtocolVersionError`, the modern answer).
    pub fn is_modern_version(&self, v: &str) -> bool {
        if self.is_stateless_version(v) {
            return true;
        }
        let date_shaped = v.len() == 10
            && v.bytes().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            });
        date_shaped && v > self.latest_session_version()
    }
}

/// The embedded profile, parsed once.
pub fn profile() -> &'static McpProfileFile {
    static CELL: OnceLock<McpProfileFile> = OnceLock::new();
    CELL.get_or_init(|| McpProfileFile::parse(PROFILE_JSON).expect("profiles/mcp.json is valid"))
}

/// Replace every string that is exactly `"{message}"` in `template` by `message`.
pub fn fill(template: &Value, message: &str) -> Value {
    match template {
        Value::String(s) if s == "{message}" => Value::String(message.to_string()),
        Value::Array(a) => Value::Array(a.iter().map(|v| fill(v, message)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), fill(v, message)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn embedded_profile_parses() {
        let p = profile();
        assert_eq!(p.profile, "mcp");
        assert_eq!(p.latest_session_version(), "2025-11-25");
        assert!(p.is_session_version("2025-03-26"));
        assert!(p.is_stateless_version("2026-07-28"));
        assert!(p.templates.is_empty());
    }

    #[test]
    fn modern_versions() {
        let p = profile();
        assert!(p.is_modern_version("2026-07-28"));
        assert!(p.is_modern_version("2027-01-01"));
        assert!(!p.is_modern_version("2025-06-18"));
        assert!(!p.is_modern_version("1900-01-01"));
        assert!(!p.is_modern_version("latest"));
    }

    #[test]
    fn fill_replaces_exact_placeholders_only() {
        let t = json!({"a": "{message}", "b": ["{message}", "x {message}"], "c": 1});
        assert_eq!(
            fill(&t, "hi"),
            json!({"a": "hi", "b": ["hi", "x {message}"], "c": 1})
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let mut v: Value = serde_json::from_str(PROFILE_JSON).unwrap();
        v["mcp"]["typo"] = json!(1);
        assert!(McpProfileFile::parse(&v.to_string()).is_err());
    }
}
