//! The MCP endpoints of `mcp` integrations ([`Endpoints`]), one per (attempt, integration):
//! each holds its MCP sessions (`crate::profile::mcp`); served by `crate::proxy::mcp`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Integration;
use crate::profile::mcp::McpEndpoint;

/// The MCP endpoints of the running server, one per (attempt id, integration).
#[derive(Debug, Default)]
pub struct Endpoints {
    map: Mutex<HashMap<(String, String), Arc<McpEndpoint>>>,
    /// The project's `allowed_origins`: MCP's own Origin rule (loopback origins) extended
    /// by the same list as the control plane's.
    allowed_origins: Vec<String>,
}

impl Endpoints {
    /// Endpoints whose Origin rule also admits `allowed_origins`.
    pub fn with_allowed_origins(allowed_origins: Vec<String>) -> Endpoints {
        Endpoints {
            allowed_origins,
            ..Endpoints::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<McpEndpoint>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The endpoint of `integ` in attempt `attempt_id`, created on first use.
    pub fn get(&self, attempt_id: &str, integ: &Integration) -> Arc<McpEndpoint> {
        self.lock()
            .entry((attempt_id.to_string(), integ.name().to_string()))
            .or_insert_with(|| {
                Arc::new(
                    McpEndpoint::new(integ.config.mcp_sse)
                        .with_allowed_origins(self.allowed_origins.clone()),
                )
            })
            .clone()
    }

    /// Forget every endpoint (and so every MCP session) of an attempt (it ended).
    pub fn forget_attempt(&self, attempt_id: &str) {
        self.lock().retain(|(a, _), _| a != attempt_id);
    }

    /// How many endpoints are alive.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
