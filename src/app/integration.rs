//! One integration of the project as the running server holds it: its config, wire
//! profile, compiled operation files, the profile's built-in templates that no file
//! overrides, and the routing index of its operations ([`super::routes`]).

use std::sync::Arc;

use crate::config::IntegrationConfig;
use crate::contract::template::CompiledMatch;
use crate::operation::Operation;
use crate::profile::Wire;

use super::routes::RouteIndex;

/// A built-in operation template of an integration's profile, compiled.
#[derive(Debug)]
pub struct BuiltinOp {
    pub operation_id: String,
    pub description: Option<String>,
    pub matcher: CompiledMatch,
    pub write: Option<bool>,
}

/// One integration of the project, ready to serve.
#[derive(Debug, Clone)]
pub struct Integration {
    pub config: IntegrationConfig,
    /// The wire dialect it serves with (built from `config.profile`): an HTTP profile, or
    /// MCP, whose endpoint is `crate::proxy::mcp`.
    pub wire: Wire,
    /// Its operation files, checked and compiled.
    pub operations: Vec<Arc<Operation>>,
    /// The profile's built-in templates that no operation file overrides (same id).
    pub builtins: Vec<Arc<BuiltinOp>>,
    /// `operations` indexed for routing ([`RouteIndex`]); rebuilt with them.
    pub routes: Arc<RouteIndex>,
}

impl Integration {
    pub fn name(&self) -> &str {
        &self.config.name
    }
    pub fn operation(&self, id: &str) -> Option<&Arc<Operation>> {
        self.operations.iter().find(|o| o.id() == id)
    }
}

/// The built-in templates of `wire`'s profile that no operation file overrides (none on MCP).
pub fn builtins_of(wire: &Wire, ops: &[Arc<Operation>]) -> Vec<Arc<BuiltinOp>> {
    let Some(profile) = wire.http() else {
        return Vec::new();
    };
    profile
        .templates()
        .iter()
        .filter(|t| !ops.iter().any(|o| o.id() == t.operation_id))
        .filter_map(|t| {
            let matcher = CompiledMatch::compile(&t.match_spec)
                .map_err(|e| tracing::error!(template = %t.operation_id, error = %e, "bad built-in template"))
                .ok()?;
            Some(Arc::new(BuiltinOp {
                operation_id: t.operation_id.clone(),
                description: t.description.clone(),
                matcher,
                write: t.write,
            }))
        })
        .collect()
}
