//! The replay proxy: start-up, the listener, routing and the call pipeline (SPEC 4, 5, 12, 13).
//!
//! | module | owns |
//! |---|---|
//! | [`request`] | the buffered, normalized request every stage takes |
//! | [`http`] | the listener (HTTP/1.1 + h2c), limits, watchdog, graceful shutdown |
//! | [`route`] | attempt → integration → operation, the `unmatched_request` message |
//! | [`pipeline`] | the call stages of SPEC 5, one documented function each, and evidence |
//! | [`transport`] | `--tls`, the per-connection serving shared by connections and tunnels |
//! | [`connect`] | `--forward-proxy`: CONNECT interception and absolute-form requests, host → integration |
//! | [`reload`] | hot reload of operation files, the swappable operation sets, which one an attempt sees |
//! | [`forward`] | every mode but `replay`: forwarding to the real system, unmatched writes, on-demand upstream calls |
//! | [`recorder`] | record modes: the captured exchanges and the drafts written from them |
//!
//! Start-up ([`App::build`]): load the project file's integrations, run `check` on every
//! operation file (any problem refuses the start, with the `check` messages), open the store,
//! sync every file's mock into a revision (`source: "file"`, when the file changed since its
//! last sync: the file rule of [`reload`]), and create the default attempt
//! (latest revisions pinned, no token, no lease). Pinned revisions are compiled once into
//! [`Engines`], shared by every attempt that pins them. While serving, [`reload`] watches the
//! operation files (hot reload).
//!
//! Entry points: [`run_serve`] for `understudy serve` (prints the readiness line
//! `understudy listening on http://HOST:PORT` — `https://` under `--tls` — on stdout once it
//! accepts connections), and [`serve`] / [`serve_with`] for tests and embedders: they take a
//! bound listener and a shutdown future.

pub mod connect;
pub mod forward;
pub mod http;
pub mod mcp;
pub mod pipeline;
pub mod recorder;
pub mod reload;
pub mod request;
pub mod route;
pub mod transport;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value};

use crate::attempt::{self, Attempt, AttemptState, Attempts, Clock, SystemClock};
use crate::config::{Config, IntegrationConfig, Mode};
use crate::contract::template::CompiledMatch;
use crate::error::Problem;
use crate::error::{CallError, HarnessCode, HarnessError};
use crate::mock::{Definition, Engine};
use crate::operation::Operation;
use crate::profile::Profile;
use crate::records::Pin;
use crate::store::{Store, StoreError};

pub use http::Limits;
pub use transport::Transport;

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Operation files failed `check`.
    #[error("{} problem(s) in operation files; fix them (see `understudy check`):\n{}", .0.len(), .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Check(Vec<Problem>),
    #[error("{0}")]
    Store(#[from] StoreError),
    /// Something this build cannot serve (a mode or profile of a later release).
    #[error("{0}")]
    Unsupported(String),
}

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
    /// The HTTP wire dialect; `None` for `mcp`, whose endpoint is [`mcp`].
    pub profile: Option<Arc<Profile>>,
    /// Its operation files, checked and compiled.
    pub operations: Vec<Arc<Operation>>,
    /// The profile's built-in templates that no operation file overrides (same id).
    pub builtins: Vec<Arc<BuiltinOp>>,
    /// `operations` indexed for routing ([`route::RouteIndex`]); rebuilt with them.
    pub routes: Arc<route::RouteIndex>,
}

impl Integration {
    pub fn name(&self) -> &str {
        &self.config.name
    }
    pub fn operation(&self, id: &str) -> Option<&Arc<Operation>> {
        self.operations.iter().find(|o| o.id() == id)
    }
}

/// Pinned revisions compiled once, keyed by (`"<integration>/<operation_id>"`, revision) and
/// shared by every attempt.
#[derive(Default)]
pub struct Engines {
    map: Mutex<HashMap<(String, u64), Arc<Engine>>>,
}

impl Engines {
    /// The engine of revision `pin` of `op`: the file's own engine when the revision is the
    /// file's definition, else the stored definition compiled (once).
    pub fn get(&self, store: &Store, op: &Operation, pin: &Pin) -> Result<Arc<Engine>, CallError> {
        let key = (op.key(), pin.revision);
        if let Some(e) = self.lock().get(&key) {
            return Ok(e.clone());
        }
        let rev = store
            .revision(&key.0, pin.revision)
            .map_err(|e| {
                HarnessError::new(
                    HarnessCode::NoMock,
                    format!("cannot read revision {} of `{}`: {e}", pin.revision, key.0),
                )
            })?
            .ok_or_else(|| {
                HarnessError::new(
                    HarnessCode::NoMock,
                    format!(
                        "revision {} of `{}` is not in the store",
                        pin.revision, key.0
                    ),
                )
            })?;
        let engine = match (&op.engine, &op.definition_hash) {
            (Some(e), Some(h)) if *h == rev.definition_hash => e.clone(),
            _ => {
                let def = Definition::from_value(&rev.definition).map_err(|m| {
                    HarnessError::new(
                        HarnessCode::InvalidFixtureLiteral,
                        format!(
                            "revision {} of `{}` is not a valid definition: {m}",
                            pin.revision, key.0
                        ),
                    )
                })?;
                Arc::new(Engine::new(def)?)
            }
        };
        Ok(self.lock().entry(key).or_insert(engine).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u64), Arc<Engine>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Counters for a later `/metrics` (cheap: atomics and one small map).
#[derive(Debug, Default)]
pub struct Metrics {
    pub connections: AtomicU64,
    /// Revisions appended while serving (admin saves, hot reloads).
    pub revisions_saved: AtomicU64,
    pub requests: AtomicU64,
    /// (integration, operation, result_status) → count.
    calls: Mutex<BTreeMap<(String, String, String), u64>>,
    /// Latency histogram: bucket upper bounds in ms ([`Metrics::BUCKETS_MS`]) plus +Inf.
    latency: Mutex<([u64; 12], f64, u64)>,
}

impl Metrics {
    pub const BUCKETS_MS: [f64; 11] = [
        0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 1000.0, 5000.0,
    ];

    pub fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    pub fn observe(&self, integration: &str, operation: &str, status: &str, latency_ms: f64) {
        *self
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((integration.into(), operation.into(), status.into()))
            .or_default() += 1;
        let mut l = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        let i = Self::BUCKETS_MS
            .iter()
            .position(|b| latency_ms <= *b)
            .unwrap_or(Self::BUCKETS_MS.len());
        l.0[i] += 1;
        l.1 += latency_ms;
        l.2 += 1;
    }

    /// A snapshot of the call counters.
    pub fn calls(&self) -> BTreeMap<(String, String, String), u64> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A snapshot of the latency histogram: (per-bucket counts, sum ms, count).
    pub fn latency(&self) -> ([u64; 12], f64, u64) {
        *self.latency.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How to build an [`App`].
pub struct AppOptions {
    pub config: Config,
    /// The admin bearer token (`--admin-token` / `UNDERSTUDY_ADMIN_TOKEN`); `None` → admin API
    /// on loopback only.
    pub admin_token: Option<String>,
    pub clock: Arc<dyn Clock>,
    pub limits: Limits,
    /// Forwarding modes: `--out`, `--allow-writes`, the upstream timeout ([`forward`]).
    pub forward: forward::ForwardOptions,
}

impl AppOptions {
    pub fn new(config: Config) -> AppOptions {
        AppOptions {
            config,
            admin_token: None,
            clock: Arc::new(SystemClock),
            limits: Limits::default(),
            forward: forward::ForwardOptions::default(),
        }
    }
}

/// Everything a running server shares between connections.
pub struct App {
    pub config: Config,
    pub mode: Mode,
    pub store: Store,
    /// Derefs to the current operation sets (`BTreeMap<String, Integration>`); an attempt's
    /// own view is [`App::integration_for`] ([`reload`]).
    pub integrations: reload::Integrations,
    pub engines: Engines,
    pub attempts: Attempts,
    pub admin_token: Option<String>,
    pub clock: Arc<dyn Clock>,
    pub limits: Limits,
    pub metrics: Metrics,
    /// The MCP endpoints of `mcp` integrations, one per (attempt, integration).
    pub mcp: mcp::Endpoints,
    /// The upstream client, record options and recorder of the forwarding modes ([`forward`]).
    pub forwarding: forward::Forwarding,
    local_addr: OnceLock<SocketAddr>,
    /// `https` under `--tls`, once serving.
    scheme: OnceLock<&'static str>,
}

impl App {
    /// Load, check, open the store, sync revisions, create the default attempt.
    pub fn build(opts: AppOptions) -> Result<App, StartError> {
        let AppOptions {
            config,
            admin_token,
            clock,
            limits,
            forward,
        } = opts;
        let mode = config.mode;
        let forwarding =
            forward::Forwarding::new(&config, forward).map_err(StartError::Unsupported)?;
        let started = std::time::Instant::now();
        let mut problems = Vec::new();
        let mut integrations = BTreeMap::new();
        for integ in config.integrations.values() {
            match crate::operation::load_integration(integ) {
                Ok(ops) => {
                    let ops: Vec<Arc<Operation>> = ops.into_iter().map(Arc::new).collect();
                    let profile = Profile::builtin(integ.profile.as_str());
                    let builtins = profile
                        .as_ref()
                        .map(|p| builtins_of(p, &ops))
                        .unwrap_or_default();
                    integrations.insert(
                        integ.name.clone(),
                        Integration {
                            config: integ.clone(),
                            profile,
                            routes: Arc::new(route::RouteIndex::new(&ops)),
                            operations: ops,
                            builtins,
                        },
                    );
                }
                Err(p) => problems.extend(p),
            }
        }
        if !problems.is_empty() {
            return Err(StartError::Check(problems));
        }
        let loaded = started.elapsed();
        let store = Store::open(&config.data_dir)?;
        // The file rule of `reload`: only a file changed since its last sync appends (one
        // flush for all of them).
        let ops = integrations.values().flat_map(|i| i.operations.iter());
        for (key, rev) in reload::sync_file_revisions(&store, ops.map(|o| &**o))? {
            tracing::info!(operation = %key, revision = rev, "new revision from file");
        }
        let synced = started.elapsed();
        let app = App {
            config,
            mode,
            store,
            integrations: reload::Integrations::new(integrations),
            engines: Engines::default(),
            attempts: Attempts::new(),
            admin_token: admin_token.filter(|t| !t.is_empty()),
            clock,
            limits,
            metrics: Metrics::default(),
            mcp: mcp::Endpoints::default(),
            forwarding,
            local_addr: OnceLock::new(),
            scheme: OnceLock::new(),
        };
        app.start_default_attempt()?;
        tracing::info!(
            operations = app
                .integrations
                .values()
                .map(|i| i.operations.len())
                .sum::<usize>(),
            load_and_check_ms = loaded.as_millis() as u64,
            store_sync_ms = (synced - loaded).as_millis() as u64,
            default_attempt_ms = (started.elapsed() - synced).as_millis() as u64,
            "start-up"
        );
        Ok(app)
    }

    /// End the default attempts of earlier runs and create this run's.
    fn start_default_attempt(&self) -> Result<(), StartError> {
        let now = self.clock.now();
        for mut old in self.store.attempts()? {
            if old.is_default && old.ended_at.is_none() {
                let remaining = self.store.clear_state(&old.attempt_id)?;
                old.ended_at = Some(crate::util::time::rfc3339(now));
                old.cleanup = Some(cleanup_report(remaining));
                self.store.put_attempt(&old)?;
            }
        }
        let pinned = self.pin_latest()?;
        // Stale operations stay unpinned in the default attempt: their calls answer
        // `stale_contract` rather than refusing the whole server.
        // The store keys attempts by token hash: the default attempt gets a token nobody
        // ever sees (requests without a token reach it).
        let unused_token = attempt::new_token();
        let rec = attempt::new_record(
            now,
            Some(&unused_token),
            None,
            None,
            pinned.pins,
            BTreeMap::new(),
            true,
        );
        self.create_attempt(rec)?;
        Ok(())
    }

    /// Pin the latest revision of every operation file (SPEC 6.2), listing stale ones: a
    /// latest revision checked against another contract hash than the file's current one.
    pub fn pin_latest(&self) -> Result<Pinned, StoreError> {
        let mut out = Pinned::default();
        for integ in self.integrations.values() {
            for op in &integ.operations {
                let key = op.key();
                if let Some(rev) = self.store.latest_revision(&key)? {
                    if rev.contract_hash != op.contract_hash {
                        out.stale.push(StaleOp {
                            operation: key,
                            revision: rev.revision,
                            revision_contract_hash: rev.contract_hash,
                            current_contract_hash: op.contract_hash.clone(),
                        });
                    } else {
                        out.pins.insert(
                            key,
                            Pin {
                                revision: rev.revision,
                                contract_hash: rev.contract_hash,
                            },
                        );
                    }
                }
            }
        }
        Ok(out)
    }

    /// Store a new attempt with its initial state (the union of the pinned definitions'
    /// `initial_state` per integration) and register it.
    pub fn create_attempt(
        &self,
        rec: crate::records::AttemptRecord,
    ) -> Result<Arc<Attempt>, StoreError> {
        let mut state: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
        for integ in self.integrations.values() {
            let mut s = Map::new();
            for op in &integ.operations {
                if let Some(pin) = rec.pins.get(&op.key()) {
                    match self.engines.get(&self.store, op, pin) {
                        Ok(engine) => {
                            for (k, v) in engine.initial_state() {
                                s.entry(k).or_insert(v);
                            }
                        }
                        Err(e) => {
                            tracing::warn!(operation = %op.key(), error = %e, "pinned revision does not compile");
                        }
                    }
                }
            }
            state.insert(integ.name().to_string(), s);
        }
        self.store.put_attempt(&rec)?;
        for (integ, s) in &state {
            self.store.put_state(&rec.attempt_id, integ, s)?;
        }
        if !rec.is_default {
            // It keeps the operation set its pins were made with (`reload`).
            self.integrations.bind(&rec.attempt_id);
        }
        let a = Attempt::new(
            rec,
            AttemptState {
                state,
                idempotency: HashMap::new(),
            },
        );
        Ok(self.attempts.insert(a))
    }

    /// The address the server listens on, once serving.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr.get().copied()
    }

    /// The scheme of the listener's own URLs: `https` under `--tls`, else `http`.
    pub fn scheme(&self) -> &'static str {
        self.scheme.get().copied().unwrap_or("http")
    }

    pub fn integration(&self, name: &str) -> Option<&Integration> {
        self.integrations.get(name)
    }

    /// The integration `name` as `attempt` sees it: the operations its pins were made with,
    /// even after a hot reload replaced them for new attempts ([`reload`]).
    pub fn integration_for(&self, attempt: &Attempt, name: &str) -> Option<&Integration> {
        self.integrations.for_attempt(&attempt.id).get(name)
    }

    /// The operation `"<integration>/<operation_id>"`.
    pub fn operation(&self, key: &str) -> Option<&Arc<Operation>> {
        let (i, o) = key.split_once('/')?;
        self.integrations.get(i)?.operation(o)
    }
}

/// `{"status":"verified"|"unverified","remaining_state_keys":n}`.
pub fn cleanup_report(remaining: usize) -> Value {
    serde_json::json!({
        "status": if remaining == 0 { "verified" } else { "unverified" },
        "remaining_state_keys": remaining,
    })
}

/// The result of pinning latest revisions.
#[derive(Debug, Default)]
pub struct Pinned {
    pub pins: BTreeMap<String, Pin>,
    pub stale: Vec<StaleOp>,
}

/// An operation whose latest revision was checked against another contract.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StaleOp {
    pub operation: String,
    pub revision: u64,
    pub revision_contract_hash: String,
    pub current_contract_hash: String,
}

pub(crate) fn builtins_of(profile: &Profile, ops: &[Arc<Operation>]) -> Vec<Arc<BuiltinOp>> {
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

/// Serve `app` on a bound listener until `shutdown` resolves; then finish in-flight calls and
/// flush the store (STYLE habit 2: tests bind `127.0.0.1:0` and pass their own shutdown).
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_with(listener, app, Transport::plain(), shutdown).await
}

/// [`serve`] with a [`Transport`]: TLS (`--tls`) and/or the forward proxy (`--forward-proxy`).
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    transport: Transport,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        let _ = app.local_addr.set(addr);
    }
    let _ = app.scheme.set(transport.scheme());
    // Hot reload of operation files while serving (`reload`), stopped before returning.
    let watcher = reload::Watcher::start(app.clone());
    let r = http::serve_listener(listener, app.clone(), transport, shutdown).await;
    watcher.stop().await;
    // Record modes: the drafts of this run (`recorder`).
    recorder::flush_at_shutdown(&app).await;
    r
}

/// What `understudy serve` was asked for (mirrors the CLI flags this module reads).
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    pub config: Option<std::path::PathBuf>,
    pub listen: Option<String>,
    pub mode: Option<Mode>,
    pub data_dir: Option<std::path::PathBuf>,
    pub admin_token: Option<String>,
    /// `--log-format json`.
    pub json_logs: bool,
    /// `--tls`: HTTPS on the listener.
    pub tls: bool,
    /// `--forward-proxy`: CONNECT interception and absolute-form proxy requests.
    pub forward_proxy: bool,
    /// `--ca-dir` (default: the project file's `ca_dir`).
    pub ca_dir: Option<std::path::PathBuf>,
    /// `--upstream-ca` (default: the project file's `upstream_ca`).
    pub upstream_ca: Option<std::path::PathBuf>,
    /// `--allow-writes` (record modes).
    pub allow_writes: bool,
    /// `--out`: the drafts directory (record modes; required there).
    pub out: Option<std::path::PathBuf>,
}

/// `understudy serve`: returns the process exit code — 0 after a clean shutdown; 1 when the
/// server cannot start (`check` problems, a broken project file, the store, the port); 2 for
/// usage errors (no project file, a bad flag, a mode this build does not serve, a
/// non-loopback listener without an admin token).
pub fn run_serve(args: &crate::cli::ServeArgs) -> i32 {
    bound_freed_memory();
    run_serve_with(serve_options(args))
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

fn serve_options(args: &crate::cli::ServeArgs) -> ServeOptions {
    ServeOptions {
        config: args.config.clone(),
        listen: args.listen.clone(),
        mode: args.mode,
        data_dir: args.data_dir.clone(),
        json_logs: args.log_format == crate::cli::LogFormat::Json,
        tls: args.tls,
        forward_proxy: args.forward_proxy,
        ca_dir: args.ca_dir.clone(),
        upstream_ca: args.upstream_ca.clone(),
        allow_writes: args.allow_writes,
        out: args.out.clone(),
        admin_token: args
            .admin_token
            .clone()
            .or_else(|| std::env::var("UNDERSTUDY_ADMIN_TOKEN").ok())
            .filter(|t| !t.is_empty()),
    }
}

/// [`run_serve`] from plain options.
pub fn run_serve_with(opts: ServeOptions) -> i32 {
    init_logging(opts.json_logs);
    let path = opts
        .config
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from(crate::config::PROJECT_FILE));
    let mut config = match Config::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("understudy serve: {e}");
            return if e.not_found { 2 } else { 1 };
        }
    };
    if let Err(e) =
        config.apply_overrides(opts.listen.as_deref(), opts.mode, opts.data_dir.as_deref())
    {
        eprintln!("understudy serve: {e}");
        return 2;
    }
    if let Some(ca) = &opts.upstream_ca {
        config.upstream_ca = Some(ca.clone());
    }
    if matches!(config.mode, Mode::Record | Mode::RecordMissing) && opts.out.is_none() {
        eprintln!(
            "understudy serve: mode `{}` writes draft operation files: give the directory with --out DIR (or use `understudy record --out DIR`)",
            config.mode
        );
        return 2;
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("understudy serve: cannot start the runtime: {e}");
            return 1;
        }
    };
    let code = rt.block_on(async move {
        // Refuse a non-loopback address without an admin token before opening any socket.
        if opts.admin_token.is_none() {
            match tokio::net::lookup_host(&config.listen).await {
                Ok(addrs) => {
                    if let Some(a) = addrs.into_iter().find(|a| !a.ip().is_loopback()) {
                        eprintln!(
                            "understudy serve: refusing to listen on {} ({}, not loopback) without an admin token: set --admin-token or UNDERSTUDY_ADMIN_TOKEN",
                            config.listen,
                            a.ip()
                        );
                        return 2;
                    }
                }
                Err(e) => {
                    eprintln!("understudy serve: cannot resolve the listen address {}: {e}", config.listen);
                    return 2;
                }
            }
        }
        let listener = match tokio::net::TcpListener::bind(&config.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("understudy serve: cannot listen on {}: {e}", config.listen);
                return 1;
            }
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => {
                eprintln!("understudy serve: {e}");
                return 1;
            }
        };
        if opts.admin_token.is_none() && !addr.ip().is_loopback() {
            eprintln!(
                "understudy serve: refusing to listen on {addr} (not loopback) without an admin token: set --admin-token or UNDERSTUDY_ADMIN_TOKEN"
            );
            return 2;
        }
        // --tls / --forward-proxy: the local CA (SPEC 11), before anything is served.
        let ca_dir = opts.ca_dir.clone().unwrap_or_else(|| config.ca_dir.clone());
        let transport = match Transport::for_serve(
            &ca_dir,
            opts.tls,
            opts.forward_proxy,
            &config.listen,
            addr,
        ) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("understudy serve: {e}");
                return 1;
            }
        };
        let mut app_opts = AppOptions::new(config);
        app_opts.admin_token = opts.admin_token.clone();
        app_opts.forward.out_dir = opts.out.clone();
        app_opts.forward.allow_writes = opts.allow_writes;
        let app = match tokio::task::block_in_place(|| App::build(app_opts)) {
            Ok(a) => Arc::new(a),
            Err(e) => {
                eprintln!("understudy serve: {e}");
                return if matches!(e, StartError::Unsupported(_)) { 2 } else { 1 };
            }
        };
        tracing::info!(%addr, mode = %app.mode, "serving");
        if transport.forward_proxy.is_some() {
            connect::log_forward_proxy(&app, transport.scheme(), addr, &ca_dir);
        }
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "understudy listening on {}://{addr}", transport.scheme());
            let _ = out.flush();
        }
        match serve_with(listener, app, transport, shutdown_signal()).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("understudy serve: {e}");
                1
            }
        }
    });
    // Everything that matters (in-flight calls, the store flush) finished inside `block_on`;
    // do not wait for idle blocking-pool threads.
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    code
}

/// Logs go to stderr through `tracing` (`RUST_LOG` filters, default `info`); stdout carries
/// only the readiness line. A subscriber installed earlier (by a test) is kept.
fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutdown signal received");
}
