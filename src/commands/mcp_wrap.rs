//! `understudy mcp wrap --integration NAME [--mode record|dry-run|record-missing] [--out DIR]
//! [--allow-writes] -- CMD ARGS…` (docs/src/guides/mcp-stdio.md): the agent starts this
//! command instead of a real stdio MCP server; it starts the server as a child
//! ([`crate::server::stdio_child`]: own process group, the caller's environment) and serves
//! the agent over stdio ([`crate::server::stdio`]) through the integration's MCP endpoint in
//! the chosen mode, with the child as the integration's upstream. So the per-message policy
//! is the HTTP MCP forward path's: `record` forwards and captures every exchange into scrubbed
//! draft operation files under `--out DIR/<integration>/` (written when stdin closes);
//! `dry-run` forwards reads and answers writes itself (blocked, simulated or tagged by the
//! tool annotations and the operation file's `write`), so a write never reaches the child;
//! `record-missing` forwards only what no operation answers. When the agent closes stdin the
//! child's stdin is closed, then SIGTERM, then SIGKILL go to its process group.
//!
//! Exit codes: 0 when the session ended with stdin; 1 when the child or the server state
//! could not start or a fault ended the session; 2 for usage errors.

use std::sync::Arc;
use std::time::Duration;

use super::Exit;
use crate::app::{App, AppOptions};
use crate::cli::McpWrapArgs;
use crate::config::Mode;
use crate::server::stdio::{self, End, Target};
use crate::server::stdio_child;

/// `understudy mcp wrap` (module doc).
pub fn wrap(args: &McpWrapArgs) -> Exit {
    super::mcp::init_logging();
    if !matches!(args.mode, Mode::Record | Mode::DryRun | Mode::RecordMissing) {
        eprintln!("understudy mcp wrap: --mode must be record, dry-run or record-missing");
        return Exit::Usage;
    }
    if matches!(args.mode, Mode::Record | Mode::RecordMissing) && args.out.is_none() {
        eprintln!(
            "understudy mcp wrap: mode `{}` writes draft operation files: give the directory with --out DIR",
            args.mode
        );
        return Exit::Usage;
    }
    let mut config = match super::mcp::load_project(
        "mcp wrap",
        args.config.as_ref(),
        args.data_dir.as_deref(),
        &args.integration,
    ) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("understudy mcp wrap: cannot start the runtime: {e}");
            return Exit::Problems;
        }
    };
    let code = rt.block_on(async move {
        let max_line = crate::http::Limits::default().max_body;
        let child = match stdio_child::start(&args.command, max_line).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("understudy mcp wrap: cannot start {:?}: {e}", args.command[0]);
                return Exit::Problems;
            }
        };
        config.mode = args.mode;
        if let Some(i) = config.integrations.get_mut(&args.integration) {
            i.upstream = Some(child.url.clone());
        }
        let mut opts = AppOptions::new(config);
        opts.forward.out_dir = args.out.clone();
        opts.forward.allow_writes = args.allow_writes;
        let app = match tokio::task::block_in_place(|| App::build(opts)) {
            Ok(a) => Arc::new(a),
            Err(e) => {
                eprintln!("understudy mcp wrap: {e}");
                child.shutdown().await;
                return Exit::Problems;
            }
        };
        let attempt = app
            .attempts
            .default_attempt()
            .map(|a| a.id.clone())
            .unwrap_or_default();
        eprintln!(
            "understudy mcp wrap: {:?} (process group {}) serves `{}` in mode {}; the default attempt {attempt}",
            args.command.join(" "),
            child.pgid().unwrap_or(0),
            args.integration,
            args.mode
        );
        let end = stdio::run(
            Target::Local(app),
            &args.integration,
            None,
            max_line,
            tokio::io::stdin(),
            tokio::io::stdout(),
        )
        .await;
        let status = child.shutdown().await;
        tracing::info!(?status, "wrap: the child stopped");
        match end {
            End::Eof => Exit::Ok,
            End::Fault(why) | End::Io(why) => {
                eprintln!("understudy mcp wrap: the session ended: {why}");
                Exit::Problems
            }
        }
    });
    rt.shutdown_timeout(Duration::from_millis(100));
    code
}
