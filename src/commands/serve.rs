//! `understudy serve` and `understudy record`: load the project file, bind the listener,
//! build the [`App`], print the readiness line `understudy listening on http://HOST:PORT`
//! (`https://` under `--tls`) on stdout once it accepts connections, and serve until SIGINT
//! or SIGTERM ([`crate::server`]).
//!
//! Exit codes: 0 after a clean shutdown; 1 when the server cannot start (`check` problems, a
//! broken project file, the store, the port); 2 for usage errors (no project file, a bad
//! flag, a mode this build does not serve, a non-loopback listener without an admin token).

use std::sync::Arc;

use super::Exit;
use crate::app::{App, AppOptions, StartError};
use crate::cli::{LogFormat, RecordArgs, ServeArgs};
use crate::config::{Config, Mode};
use crate::server::{self, Transport};

/// The environment variable of `--store` (read when the flag is absent).
pub const STORE_ENV: &str = "UNDERSTUDY_STORE";

/// `understudy record`: `serve` in a record mode with drafts written to `--out`.
pub fn record(args: &RecordArgs) -> Exit {
    if !matches!(
        args.mode,
        None | Some(Mode::Record) | Some(Mode::RecordMissing)
    ) {
        eprintln!("understudy record: --mode must be record or record-missing");
        return Exit::Usage;
    }
    serve(&args.to_serve())
}

/// `understudy serve` (module doc). `--admin-token` has been filled from the environment by
/// [`super::run`].
pub fn serve(args: &ServeArgs) -> Exit {
    bound_freed_memory();
    let flags = &args.flags;
    init_logging(flags.log_format == LogFormat::Json);
    let admin_token = flags.admin_token.clone().filter(|t| !t.is_empty());
    let path = flags
        .config
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from(crate::config::PROJECT_FILE));
    let mut config = match Config::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("understudy serve: {e}");
            return if e.not_found {
                Exit::Usage
            } else {
                Exit::Problems
            };
        }
    };
    if let Err(e) = config.apply_overrides(
        flags.listen.as_deref(),
        args.mode,
        flags.data_dir.as_deref(),
    ) {
        eprintln!("understudy serve: {e}");
        return Exit::Usage;
    }
    // The store: --store, else UNDERSTUDY_STORE, else the project file's `store`.
    if let Some(url) = flags
        .store
        .clone()
        .or_else(|| std::env::var(STORE_ENV).ok().filter(|u| !u.is_empty()))
    {
        if !crate::config::is_postgres_url(&url) {
            eprintln!(
                "understudy serve: --store / {STORE_ENV}: expected a postgres:// or postgresql:// URL, got {:?}",
                crate::config::redact_url(&url)
            );
            return Exit::Usage;
        }
        config.store = Some(url);
    }
    if let Some(ca) = &flags.upstream_ca {
        config.upstream_ca = Some(ca.clone());
    }
    if matches!(config.mode, Mode::Record | Mode::RecordMissing) && args.out.is_none() {
        eprintln!(
            "understudy serve: mode `{}` writes draft operation files: give the directory with --out DIR (or use `understudy record --out DIR`)",
            config.mode
        );
        return Exit::Usage;
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("understudy serve: cannot start the runtime: {e}");
            return Exit::Problems;
        }
    };
    let code = rt.block_on(async move {
        // Refuse a non-loopback address without an admin token before opening any socket.
        let has_token = admin_token.is_some() || !config.control.admin_tokens.is_empty();
        if !has_token {
            match tokio::net::lookup_host(&config.listen).await {
                Ok(addrs) => {
                    if let Some(a) = addrs.into_iter().find(|a| !a.ip().is_loopback()) {
                        eprintln!(
                            "understudy serve: refusing to listen on {} ({}, not loopback) without an admin token: set --admin-token or UNDERSTUDY_ADMIN_TOKEN, or `admin_tokens` in understudy.json",
                            config.listen,
                            a.ip()
                        );
                        return Exit::Usage;
                    }
                }
                Err(e) => {
                    eprintln!("understudy serve: cannot resolve the listen address {}: {e}", config.listen);
                    return Exit::Usage;
                }
            }
        }
        let listener = match tokio::net::TcpListener::bind(&config.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("understudy serve: cannot listen on {}: {e}", config.listen);
                return Exit::Problems;
            }
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => {
                eprintln!("understudy serve: {e}");
                return Exit::Problems;
            }
        };
        if !has_token && !addr.ip().is_loopback() {
            eprintln!(
                "understudy serve: refusing to listen on {addr} (not loopback) without an admin token: set --admin-token or UNDERSTUDY_ADMIN_TOKEN"
            );
            return Exit::Usage;
        }
        // --tls / --forward-proxy: the local CA (docs/src/reference/https.md), before anything is served.
        let ca_dir = flags.ca_dir.clone().unwrap_or_else(|| config.ca_dir.clone());
        let transport = match Transport::for_serve(
            &ca_dir,
            flags.tls,
            flags.forward_proxy,
            &config.listen,
            addr,
        ) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("understudy serve: {e}");
                return Exit::Problems;
            }
        };
        let mut app_opts = AppOptions::new(config);
        app_opts.admin_token = admin_token;
        app_opts.forward.out_dir = args.out.clone();
        app_opts.forward.allow_writes = flags.allow_writes;
        app_opts.forward.allow_upstream_writes = flags.allow_upstream_writes;
        let app = match tokio::task::block_in_place(|| App::build(app_opts)) {
            Ok(a) => Arc::new(a),
            Err(e) => {
                eprintln!("understudy serve: {e}");
                return if matches!(e, StartError::Unsupported(_)) {
                    Exit::Usage
                } else {
                    Exit::Problems
                };
            }
        };
        release_start_up_memory();
        // Calls without a token land in the default attempt: its id is what a user needs to
        // read them (`understudy evidence default` names it too).
        let default_attempt = app
            .attempts
            .default_attempt()
            .map(|a| a.id.clone())
            .unwrap_or_default();
        tracing::info!(%addr, mode = %app.mode, %default_attempt, "serving (calls without an attempt token go to the default attempt; read them with `understudy evidence default`)");
        if transport.forward_proxy.is_some() {
            server::connect::log_forward_proxy(&app, transport.scheme(), addr, &ca_dir);
        }
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "understudy listening on {}://{addr}", transport.scheme());
            let _ = out.flush();
        }
        // For `understudy mcp stdio` started by an agent: this server's address.
        let _published = super::mcp::publish(
            &app.config.data_dir,
            &format!("{}://{addr}", transport.scheme()),
            "serve",
            None,
        );
        match server::serve_with(listener, app, transport, server::shutdown_signal()).await {
            Ok(()) => Exit::Ok,
            Err(e) => {
                eprintln!("understudy serve: {e}");
                Exit::Problems
            }
        }
    });
    // Everything that matters (in-flight calls, the store flush) finished inside `block_on`;
    // do not wait for idle blocking-pool threads.
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    code
}

/// glibc raises its mmap threshold each time a large block is freed, so the journal's batch
/// buffers (hundreds of KB under load) end up in the heap arenas, which keep freed memory:
/// RSS after 30 s at c=64 was ~57 MB of which ~27 MB free (`malloc_trim` released it). A fixed
/// threshold keeps blocks ≥ 128 KiB in their own mappings, returned on free: 35–37 MB, same
/// throughput (bench/README.md, 2026-11-30).
fn bound_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before the server's threads.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Loading and checking thousands of operation files allocates and frees far more than the
/// server keeps (a cold start with 10 000 files: ~490 MiB resident after start-up, most of
/// it freed parse trees left in the allocator's arenas); give the free pages back once,
/// before serving (README, issue 20 start-up).
fn release_start_up_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Logs go to stderr through `tracing` (`RUST_LOG` filters, default `info`); stdout carries
/// only the readiness line. A subscriber installed earlier (by a test) is kept.
fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(|| crate::util::scrub::LogWriter::new(std::io::stderr()));
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
