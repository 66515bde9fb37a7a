//! What `understudy mcp stdio` and `understudy mcp wrap` share ([`super::mcp`],
//! [`super::mcp_wrap`]): loading the project with its `mcp` integration, logging to stderr
//! only (stdout is the MCP stream), and where their calls go ([`route`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Exit;
use crate::config::Config;
use crate::contract::ProfileKind;
use crate::store::published::{self, ServerAddress};

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

/// A published server that still accepts connections.
async fn running_server(data_dir: &Path) -> Option<ServerAddress> {
    let found = published::read(data_dir)?;
    let hostport = found
        .url
        .strip_prefix("http://")?
        .trim_end_matches('/')
        .to_string();
    match tokio::time::timeout(
        Duration::from_millis(500),
        tokio::net::TcpStream::connect(&hostport),
    )
    .await
    {
        Ok(Ok(_)) => Some(found),
        _ => {
            tracing::info!(url = %found.url, "the published server does not answer; ignoring it");
            None
        }
    }
}

/// Where the calls of a stdio front go and with which attempt (module doc).
pub(super) struct Route {
    /// A running server: (its URL, how it was found, for the stderr line).
    pub server: Option<(String, String)>,
    /// The attempt token sent with every message (none: the default attempt).
    pub attempt: Option<String>,
    /// Which attempt, for the stderr line (never the token).
    pub which: String,
}

/// The server (`--url`, else a running `serve`/`test` published in `data_dir`) and the attempt
/// (`--attempt`, `UNDERSTUDY_ATTEMPT`, the running test's, the default) of `mcp stdio` and
/// `mcp wrap`.
pub(super) async fn route(url: Option<&str>, attempt: Option<&str>, data_dir: &Path) -> Route {
    let running = if url.is_some() {
        None
    } else {
        running_server(data_dir).await
    };
    let env_attempt = std::env::var("UNDERSTUDY_ATTEMPT")
        .ok()
        .filter(|t| !t.is_empty());
    let (attempt, which) = if let Some(t) = attempt {
        (Some(t.to_string()), "the attempt of --attempt".to_string())
    } else if let Some(t) = env_attempt {
        (Some(t), "the attempt of UNDERSTUDY_ATTEMPT".to_string())
    } else if let Some(a) = running.as_ref().and_then(|r| r.attempt.clone()) {
        (
            Some(a.token),
            format!("the running understudy test's attempt {}", a.id),
        )
    } else {
        (None, "the default attempt".to_string())
    };
    let server = if let Some(u) = url {
        Some((u.to_string(), format!("through the server at {u}")))
    } else {
        running.map(|r| {
            let place = format!("through the running understudy {} at {}", r.command, r.url);
            (r.url, place)
        })
    };
    Route {
        server,
        attempt,
        which,
    }
}
