//! What the server holds for the forwarding modes (dry-run, record, record-missing,
//! passthrough; `crate::proxy::forward` uses it): the pooled upstream client, the record
//! options, the recorder ([`super::recorder`]), and what was learned from real MCP servers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::recorder::Recorder;
use crate::config::{Config, Mode};
use crate::upstream::{self, Upstream};

/// How [`Forwarding`] is built (the `record`/`serve` flags).
#[derive(Debug, Clone)]
pub struct ForwardOptions {
    /// `--out`: where drafts are written.
    pub out_dir: Option<PathBuf>,
    /// `--allow-writes` (record modes).
    pub allow_writes: bool,
    /// `serve --allow-upstream-writes`: `POST /tools/execute` may send a write upstream.
    pub allow_upstream_writes: bool,
    /// Bound on the wait for an upstream's response head.
    pub upstream_timeout: Duration,
}

impl Default for ForwardOptions {
    fn default() -> Self {
        ForwardOptions {
            out_dir: None,
            allow_writes: false,
            allow_upstream_writes: false,
            upstream_timeout: upstream::DEFAULT_TIMEOUT,
        }
    }
}

/// What the server holds for forwarding: the pooled upstream client, the record options, the
/// recorder, and what was learned from the real MCP servers.
#[derive(Debug)]
pub struct Forwarding {
    pub upstream: Upstream,
    pub allow_writes: bool,
    /// `serve --allow-upstream-writes` (`crate::admin::execute`).
    pub allow_upstream_writes: bool,
    pub recorder: Recorder,
    /// (integration, tool) → is a write, from forwarded `tools/list` answers.
    learned: Mutex<HashMap<(String, String), bool>>,
    /// attempt id → simulated writes so far (deterministic fake ids).
    simulated: Mutex<HashMap<String, u64>>,
    /// Arrival order of captured calls.
    order: AtomicU64,
}

impl Forwarding {
    /// Build the upstream client (trusting `upstream_ca`) and the recorder.
    pub fn new(config: &Config, opts: ForwardOptions) -> Result<Forwarding, String> {
        let upstream = Upstream::new(config.upstream_ca.as_deref(), opts.upstream_timeout)?;
        if config.mode != Mode::Replay {
            for i in config
                .integrations
                .values()
                .filter(|i| i.upstream.is_none())
            {
                tracing::warn!(
                    integration = %i.name,
                    mode = %config.mode,
                    "no `upstream`: what this mode would forward is not (HTTP profiles: the harness error upstream_unavailable; MCP: the mocks answer, as in replay)"
                );
            }
        }
        Ok(Forwarding {
            upstream,
            allow_writes: opts.allow_writes,
            allow_upstream_writes: opts.allow_upstream_writes,
            recorder: Recorder::new(opts.out_dir),
            learned: Mutex::new(HashMap::new()),
            simulated: Mutex::new(HashMap::new()),
            order: AtomicU64::new(0),
        })
    }

    /// The next arrival number of a captured call.
    pub fn next_order(&self) -> u64 {
        self.order.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Remember whether an MCP tool of the real server is a write.
    pub fn learn_tool(&self, integration: &str, tool: &str, is_write: bool) {
        self.learned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((integration.to_string(), tool.to_string()), is_write);
    }

    /// What a forwarded `tools/list` said about a tool.
    pub fn learned_write(&self, integration: &str, tool: &str) -> Option<bool> {
        self.learned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(integration.to_string(), tool.to_string()))
            .copied()
    }

    pub(crate) fn next_simulated(&self, attempt_id: &str) -> u64 {
        let mut m = self.simulated.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(attempt_id.to_string()).or_default();
        *n += 1;
        *n
    }
}
