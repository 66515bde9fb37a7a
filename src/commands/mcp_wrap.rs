//! `understudy mcp wrap` (docs/src/guides/mcp-stdio.md).

use super::Exit;
use crate::cli::McpWrapArgs;

/// `understudy mcp wrap`.
pub fn wrap(_args: &McpWrapArgs) -> Exit {
    eprintln!("understudy mcp wrap: not available in this build");
    Exit::Usage
}
