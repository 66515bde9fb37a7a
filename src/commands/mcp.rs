//! `understudy mcp stdio|wrap|config` (docs/src/guides/mcp-stdio.md).
//!
//! `mcp stdio --integration NAME [--config F] [--attempt TOKEN] [--url URL] [--data-dir D]`
//! serves an `mcp` integration over stdio ([`crate::server::stdio`]). Where the calls go:
//! with `--url`, to that server; else to a running `understudy serve`/`test` of the project
//! found through `<data dir>/server.json` ([`crate::store::published`]) when it still accepts
//! connections; else to this process's own server state over the project's store. The
//! attempt, in order: `--attempt`, `UNDERSTUDY_ATTEMPT` (when the client passes it), the
//! running `understudy test`'s attempt, the default attempt. One line on stderr says which
//! (never the token). stdout carries MCP messages only; logs go to stderr (`RUST_LOG`,
//! default `warn`).
//!
//! Exit codes: 0 when stdin closed; 1 when a `reset`/`close` fault or a failed server ended
//! the session, or the server state could not be opened; 2 for usage errors (no project file,
//! an integration that is not `mcp`, a `--url` that is not `http://`).
//!
//! `mcp config --integration NAME --client claude|cursor|vscode|json` prints the snippet that
//! makes the client start `understudy mcp stdio` for the integration.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::mcp_project::{init_logging, load_project, route, Route};
use super::Exit;
use crate::app::{App, AppOptions};
use crate::cli::{McpArgs, McpClient, McpCommand, McpConfigArgs, McpStdioArgs};
use crate::server::stdio::{self, End, Target};
use crate::store::published::{Published, PublishedAttempt, ServerAddress};

/// `understudy mcp stdio|wrap|config` (`mcp wrap` is [`super::mcp_wrap`]; both load the
/// project through [`super::mcp_project`]).
pub fn mcp(args: &McpArgs) -> Exit {
    match &args.command {
        McpCommand::Stdio(a) => mcp_stdio(a),
        McpCommand::Wrap(a) => super::mcp_wrap::wrap(a),
        McpCommand::Config(a) => config(a),
    }
}

/// Publish this server's address (and the test's attempt) in the data dir, for
/// `understudy mcp stdio` started by an agent (`crate::store::published`). A failure is
/// logged, not fatal: the stdio command then opens the store itself.
pub(super) fn publish(
    data_dir: &Path,
    url: &str,
    command: &str,
    attempt: Option<(&str, &str)>,
) -> Option<Published> {
    let address = ServerAddress {
        url: url.to_string(),
        command: command.to_string(),
        pid: std::process::id(),
        attempt: attempt.map(|(token, id)| PublishedAttempt {
            token: token.to_string(),
            id: id.to_string(),
        }),
    };
    match Published::write(data_dir, &address) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(error = %e, dir = %data_dir.display(), "cannot publish the server's address for `understudy mcp stdio`");
            None
        }
    }
}

fn mcp_stdio(args: &McpStdioArgs) -> Exit {
    init_logging();
    let config = match load_project(
        "mcp stdio",
        args.config.as_ref(),
        args.data_dir.as_deref(),
        &args.integration,
    ) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(u) = &args.url {
        if !u.starts_with("http://") {
            eprintln!("understudy mcp stdio: --url {u}: expected http://HOST:PORT of a running understudy server");
            return Exit::Usage;
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("understudy mcp stdio: cannot start the runtime: {e}");
            return Exit::Problems;
        }
    };
    let code = rt.block_on(async move {
        let Route {
            server,
            attempt,
            mut which,
        } = route(
            args.url.as_deref(),
            args.attempt.as_deref(),
            &config.data_dir,
        )
        .await;
        let max_line = crate::http::Limits::default().max_body;
        let (target, place) = if let Some((url, place)) = server {
            (Target::Remote(url), place)
        } else {
            let app = match tokio::task::block_in_place(|| App::build(AppOptions::new(config))) {
                Ok(a) => Arc::new(a),
                Err(e) => {
                    eprintln!("understudy mcp stdio: {e}");
                    return Exit::Problems;
                }
            };
            if attempt.is_none() {
                if let Some(d) = app.attempts.default_attempt() {
                    which = format!("the default attempt {}", d.id);
                }
            }
            (Target::Local(app), "from the project's store".to_string())
        };
        eprintln!(
            "understudy mcp stdio: serving `{}` {place}; {which}",
            args.integration
        );
        let end = stdio::run(
            target,
            &args.integration,
            attempt,
            None,
            max_line,
            tokio::io::stdin(),
            tokio::io::stdout(),
        )
        .await;
        match end {
            End::Eof => Exit::Ok,
            End::Fault(why) => {
                eprintln!("understudy mcp stdio: the session ended: {why}");
                Exit::Problems
            }
            End::Io(why) => {
                eprintln!("understudy mcp stdio: {why}");
                Exit::Problems
            }
        }
    });
    // stdin may still be read by a blocking thread: do not wait for it.
    rt.shutdown_timeout(Duration::from_millis(100));
    code
}

/// The snippet of `understudy mcp config` (module doc).
pub fn config_snippet(client: McpClient, integration: &str, project: &Path, binary: &str) -> Value {
    let args = json!([
        "mcp",
        "stdio",
        "--integration",
        integration,
        "--config",
        project.display().to_string()
    ]);
    let server = json!({ "command": binary, "args": args });
    match client {
        McpClient::Claude | McpClient::Cursor => json!({ "mcpServers": { integration: server } }),
        McpClient::Vscode => json!({ "servers": { integration: {
            "type": "stdio", "command": binary, "args": args } } }),
        McpClient::Json => server,
    }
}

fn config(args: &McpConfigArgs) -> Exit {
    let path = args
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::config::PROJECT_FILE));
    if let Err(code) = load_project("mcp config", Some(&path), None, &args.integration) {
        return code;
    }
    let project = std::path::absolute(&path).unwrap_or(path);
    let binary = std::env::current_exe()
        .ok()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "understudy".into());
    let snippet = config_snippet(args.client, &args.integration, &project, &binary);
    println!(
        "{}",
        serde_json::to_string_pretty(&snippet).unwrap_or_default()
    );
    Exit::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_have_each_clients_shape() {
        let p = Path::new("/p/understudy.json");
        let c = config_snippet(McpClient::Claude, "tools", p, "/bin/understudy");
        assert_eq!(c["mcpServers"]["tools"]["command"], "/bin/understudy");
        assert_eq!(
            c["mcpServers"]["tools"]["args"],
            json!([
                "mcp",
                "stdio",
                "--integration",
                "tools",
                "--config",
                "/p/understudy.json"
            ])
        );
        let v = config_snippet(McpClient::Vscode, "tools", p, "u");
        assert_eq!(v["servers"]["tools"]["type"], "stdio");
        let j = config_snippet(McpClient::Json, "tools", p, "u");
        assert_eq!(j["command"], "u");
    }
}
