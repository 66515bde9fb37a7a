//! [`Wire`], the dialect a running integration serves with — the one type the proxy passes
//! (an HTTP [`Profile`] or MCP), built from the [`ProfileKind`] a project file names.

use std::sync::Arc;

use serde_json::Value;

use super::Profile;
use crate::contract::ProfileKind;
use crate::error::HarnessError;
use crate::http::NativeResponse;

/// The dialect a running integration serves with (built once per integration from its
/// [`ProfileKind`]): an HTTP profile's native envelope, or MCP tool results (rendered by the
/// MCP dialect, [`super::mcp`]: a mock's result passes through with HTTP status 200, as MCP
/// answers travel as JSON-RPC over 200).
#[derive(Debug, Clone)]
pub enum Wire {
    Http(Arc<Profile>),
    Mcp,
}

impl Wire {
    /// The wire of `kind` (`rest` and `salesforce` are embedded HTTP profiles).
    pub fn of(kind: ProfileKind) -> Wire {
        match kind {
            ProfileKind::Mcp => Wire::Mcp,
            k => Wire::Http(
                Profile::builtin(k.as_str()).expect("every HTTP profile kind is embedded"),
            ),
        }
    }

    /// The HTTP profile, `None` for MCP.
    pub fn http(&self) -> Option<&Arc<Profile>> {
        match self {
            Wire::Http(p) => Some(p),
            Wire::Mcp => None,
        }
    }

    /// A mock's result (the adapter envelope, or an MCP tool result) as the native response
    /// on this wire (docs/src/reference/mock-definition.md#the-envelope-rule, stage 6 of the call pipeline).
    pub fn render(&self, result: &Value) -> Result<NativeResponse, HarnessError> {
        match self {
            Wire::Http(p) => p.render(result),
            Wire::Mcp => Ok(NativeResponse {
                status: 200,
                headers: Vec::new(),
                body: Some(result.clone()),
            }),
        }
    }
}
