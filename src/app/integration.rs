//! One integration of the project as the running server holds it: its config, wire
//! profile, compiled operation files, the profile's built-in templates that no file
//! overrides, and the routing index of its operations ([`super::routes`]).

use std::sync::Arc;

use crate::config::IntegrationConfig;
use crate::contract::template::CompiledMatch;
use crate::operation::Operation;
use crate::profile::Profile;

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
    /// The HTTP wire dialect; `None` for `mcp`, whose endpoint is `crate::proxy::mcp`.
    pub profile: Option<Arc<Profile>>,
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

pub fn builtins_of(profile: &Profile, ops: &[Arc<Operation>]) -> Vec<Arc<BuiltinOp>> {
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
