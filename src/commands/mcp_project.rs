//! What `understudy mcp stdio` and `understudy mcp wrap` share ([`super::mcp`],
//! [`super::mcp_wrap`]): loading the project with its `mcp` integration, and logging to stderr
//! only (stdout is the MCP stream).

use std::path::{Path, PathBuf};

use super::Exit;
use crate::config::Config;
use crate::contract::ProfileKind;

/// Load the project file and check that `integration` is an `mcp` integration.
pub fn load_project(
    who: &str,
    path: Option<&PathBuf>,
    data_dir: Option<&Path>,
    integration: &str,
) -> Result<Config, Exit> {
    let path = path
        .cloned()
        .unwrap_or_else(|| PathBuf::from(crate::config::PROJECT_FILE));
    let mut config = match Config::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("understudy {who}: {e}");
            return Err(if e.not_found {
                Exit::Usage
            } else {
                Exit::Problems
            });
        }
    };
    if let Err(e) = config.apply_overrides(None, None, data_dir) {
        eprintln!("understudy {who}: {e}");
        return Err(Exit::Usage);
    }
    match config.integrations.get(integration) {
        Some(i) if i.profile == ProfileKind::Mcp => Ok(config),
        Some(_) => {
            eprintln!(
                "understudy {who}: --integration {integration}: {} says this integration's profile is not `mcp`",
                path.display()
            );
            Err(Exit::Usage)
        }
        None => {
            eprintln!(
                "understudy {who}: --integration {integration}: no such integration in {} (it has: {})",
                path.display(),
                config.integrations.keys().cloned().collect::<Vec<_>>().join(", ")
            );
            Err(Exit::Usage)
        }
    }
}

/// Logs go to stderr only (stdout is the MCP stream): `RUST_LOG`, default `warn`.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(|| crate::util::scrub::LogWriter::new(std::io::stderr()))
        .try_init();
}
