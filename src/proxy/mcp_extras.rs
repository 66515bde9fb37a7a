//! The backend side of MCP beyond tools (SPEC 18): which operations of an `mcp` integration
//! are resources or prompts (their input schema carries the metadata of
//! [`crate::operation::mcp_files`]), and the [`Catalog`] the endpoint serves from them.
//! Reads and gets run as ordinary calls of the pipeline under the resource's or prompt's
//! name (operation id), so they are pinned, evaluated and recorded like tool calls.

use crate::app::Integration;
use crate::operation::mcp_files::{PROMPT_KEY, RESOURCE_KEY};
use crate::operation::Operation;
use crate::profile::mcp::catalog::Catalog;

/// Whether `op` is a tool (not a resource or prompt file).
pub fn is_tool(op: &Operation) -> bool {
    let s = &op.op.input_schema;
    s.get(RESOURCE_KEY).is_none() && s.get(PROMPT_KEY).is_none()
}

/// The resources and prompts of an integration, in file-name order.
pub fn catalog(integ: &Integration) -> Catalog {
    let mut c = Catalog::default();
    for op in &integ.operations {
        let s = &op.op.input_schema;
        if let Some(r) = s
            .get(RESOURCE_KEY)
            .and_then(|m| serde_json::from_value(m.clone()).ok())
        {
            c.resources.push(r);
        } else if let Some(p) = s
            .get(PROMPT_KEY)
            .and_then(|m| serde_json::from_value(m.clone()).ok())
        {
            c.prompts.push(p);
        }
    }
    c
}
