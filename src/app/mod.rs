//! The state of a running server, shared by every connection and read by the handlers
//! (`crate::admin`, `crate::proxy`) that `crate::server` dispatches to; it imports none of
//! them.
//!
//! | module | owns |
//! |---|---|
//! | [`attempt`] | tokens, leases, pins, the per-attempt state lock; the lease and pin rules |
//! | [`integration`] | [`Integration`], [`BuiltinOp`]: one integration ready to serve |
//! | [`routes`] | the routing index of an integration's operation files |
//! | [`generations`] | the swappable operation sets, which one an attempt sees, the file rule, applying a reload |
//! | [`engines`] | pinned revisions compiled once |
//! | [`hosts`] | the forward proxy's host table (upstream host → integration) |
//! | [`forwarding`] | the forwarding modes' upstream client, record options and learned tools |
//! | [`recorder`] | record modes: the captured exchanges and the drafts written from them |
//! | [`endpoints`] | the MCP endpoints (and so sessions) per attempt and integration |
//! | [`metrics`] | the counters of `GET /metrics` |
//! | [`telemetry`] | traces out: the OTLP exporter of `"otel"` / `OTEL_*`, each served call's span, the attempt span with the verdict, the flush at shutdown |
//! | [`retention`] | the default attempt's retention bound: rolls it over after a call that reaches `default_attempt.max_entries` |
//! | [`contracts`] | the tool-call contracts (docs/src/reference/contracts.md): loaded, checked, hot-reloaded, pinned by attempts |
//!
//! Start-up ([`App::build`]): load the project file's integrations, run `check` on every
//! operation file (any problem refuses the start, with the `check` messages), open the store,
//! sync every file's mock into a revision (`source: "file"`, when the file changed since its
//! last sync: the file rule of [`generations`]), load and check the tool-call contracts (any
//! problem refuses the start too; [`contracts`]), build the host table, and create the default
//! attempt (latest revisions pinned, no token, no lease). Pinned revisions are compiled once
//! into [`Engines`], shared by every attempt that pins them.
//!
//! **Revision sets** (issue 20). The latest revisions are pinned as ONE shared set
//! ([`crate::records::Pins`], named by its content hash), computed once per generation and
//! revision epoch ([`App::pin_latest`]; a recomputation reads only revisions it has not seen)
//! together with its initial state: creating an attempt copies no pin and reads no revision,
//! and its record stores the set's id (`revision_set`), the set itself stored once.

pub mod attempt;
pub mod contracts;
pub mod endpoints;
pub mod engines;
pub mod forwarding;
pub mod generations;
pub mod hosts;
pub mod integration;
pub mod metrics;
pub mod recorder;
pub mod retention;
pub mod routes;
pub mod telemetry;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use crate::config::{Config, Mode};
use crate::error::Problem;
use crate::http::Limits;
use crate::operation::cache::CheckCache;
use crate::operation::Operation;
use crate::profile::Wire;
use crate::records::{Pin, Pins};
use crate::store::{Store, StoreError};
use attempt::{Attempt, AttemptState, Attempts, Clock, SystemClock};

pub use engines::Engines;
pub use forwarding::{ForwardOptions, Forwarding};
pub use hosts::UpstreamHost;
pub use integration::{builtins_of, BuiltinOp, Integration};
pub use metrics::Metrics;

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Operation or contract files failed `check`.
    #[error("{} problem(s) in operation or contract files; fix them (see `understudy check`):\n{}", .0.len(), .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Check(Vec<Problem>),
    #[error("{0}")]
    Store(#[from] StoreError),
    /// Something this build cannot serve (a mode or profile of a later release).
    #[error("{0}")]
    Unsupported(String),
    /// The OpenTelemetry export settings (`"otel"`, `OTEL_*`) are wrong.
    #[error("OpenTelemetry export: {0}")]
    Otel(String),
}

/// The project's own secret names and credentials, added to the store's scrubber
/// (`crate::util::scrub`): the `redact` list and `scrub` names, the admin token, and every
/// `UNDERSTUDY_UPSTREAM_AUTH_*` value of the environment.
pub fn configure_scrubber(store: &Store, config: &Config, admin_token: Option<&str>) {
    configure(store.scrubber(), config, admin_token);
}

/// The scrubber of a command that opens no store (`drift`): the data dir's key when it has
/// one (so its marks equal the evidence's), configured as [`configure_scrubber`].
pub fn command_scrubber(config: &Config) -> crate::util::scrub::Scrubber {
    let key =
        crate::util::scrub::read_key(&config.data_dir).unwrap_or_else(crate::util::scrub::new_key);
    let s = crate::util::scrub::Scrubber::new(key);
    let token = std::env::var("UNDERSTUDY_ADMIN_TOKEN").ok();
    configure(&s, config, token.as_deref());
    s
}

fn configure(s: &crate::util::scrub::Scrubber, config: &Config, admin_token: Option<&str>) {
    s.add_names(
        config
            .redact
            .iter()
            .chain(&config.scrub.fields)
            .chain(&config.scrub.headers),
    );
    let env: Vec<String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("UNDERSTUDY_UPSTREAM_AUTH_"))
        .map(|(_, v)| v)
        .collect();
    s.add_credentials(env.iter().map(String::as_str).chain(admin_token));
    // `Bearer <token>` values: the token alone too.
    s.add_credentials(
        env.iter()
            .filter_map(|v| v.split_once(' ').map(|(_, t)| t.trim())),
    );
}

/// How to build an [`App`].
pub struct AppOptions {
    pub config: Config,
    /// The admin bearer token (`--admin-token` / `UNDERSTUDY_ADMIN_TOKEN`); `None` → admin API
    /// on loopback only.
    pub admin_token: Option<String>,
    pub clock: Arc<dyn Clock>,
    pub limits: Limits,
    /// Forwarding modes: `--out`, `--allow-writes`, the upstream timeout (`crate::proxy::forward`).
    pub forward: ForwardOptions,
}

impl AppOptions {
    pub fn new(config: Config) -> AppOptions {
        AppOptions {
            config,
            admin_token: None,
            clock: Arc::new(SystemClock),
            limits: Limits::default(),
            forward: ForwardOptions::default(),
        }
    }
}

/// Everything a running server shares between connections.
pub struct App {
    pub config: Config,
    pub mode: Mode,
    pub store: Store,
    /// Derefs to the current operation sets (`BTreeMap<String, Integration>`); an attempt's
    /// own view is [`App::integration_for`] ([`generations`]).
    pub integrations: generations::Integrations,
    pub engines: Engines,
    pub attempts: Attempts,
    pub admin_token: Option<String>,
    pub clock: Arc<dyn Clock>,
    pub limits: Limits,
    pub metrics: Metrics,
    /// The MCP endpoints of `mcp` integrations, one per (attempt, integration).
    pub mcp: endpoints::Endpoints,
    /// The upstream client, record options and recorder of the forwarding modes (`crate::proxy::forward`).
    pub forwarding: Forwarding,
    /// The forward proxy's host table ([`hosts`]), built when the integrations are.
    pub hosts: Vec<UpstreamHost>,
    /// The tool-call contracts attempts may pin ([`contracts`]).
    pub contracts: contracts::Contracts,
    /// Traces out ([`telemetry`]): `None` when no OTLP endpoint is configured.
    pub otel: Option<Arc<crate::telemetry::Exporter>>,
    /// `--otel-forward` ([`telemetry::start_forward`]): `None` without the flag.
    pub otel_forward: Option<Arc<crate::telemetry::Forwarder>>,
    /// The last [`App::pin_latest`], keyed by (generation, revision epoch).
    pinned: std::sync::Mutex<Option<PinnedAt>>,
    /// The latest revision of each operation as last read by [`App::pin_latest`].
    latest: std::sync::Mutex<HashMap<String, Latest>>,
    /// Each revision set's initial state (set id → integration → state), computed once.
    initial_states: std::sync::Mutex<HashMap<String, Arc<InitialState>>>,
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
        let forwarding = Forwarding::new(&config, forward).map_err(StartError::Unsupported)?;
        let otel = telemetry::start(&config).map_err(StartError::Otel)?;
        let otel_forward = telemetry::start_forward(&config).map_err(StartError::Otel)?;
        let started = std::time::Instant::now();
        let mut problems = Vec::new();
        let mut integrations = BTreeMap::new();
        // Files that passed `check` at an earlier start of this version are not checked
        // again (`crate::operation::cache`); an empty data dir has no cache.
        let cache = CheckCache::read(&config.data_dir);
        for integ in config.integrations.values() {
            let loaded = if mode.tolerates_missing_operations() && !integ.operations.exists() {
                crate::operation::load_integration(integ, true)
            } else {
                crate::operation::load_integration_cached(integ, &cache)
            };
            match loaded {
                Ok(ops) => {
                    let ops: Vec<Arc<Operation>> = ops.into_iter().map(Arc::new).collect();
                    let wire = Wire::of(integ.profile);
                    let builtins = builtins_of(&wire, &ops);
                    integrations.insert(
                        integ.name.clone(),
                        Integration {
                            config: integ.clone(),
                            wire,
                            routes: Arc::new(routes::RouteIndex::new(&ops)),
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
        let contract_set = match &config.contracts {
            Some(dir) => contracts::load_checked(
                dir,
                &contracts::SchemaCatalog::from_integrations(&integrations),
            )
            .map_err(StartError::Check)?,
            None => contracts::ContractSet::new(),
        };
        let contracts_dir = config.contracts.clone();
        let loaded = started.elapsed();
        let store = Store::open_configured(config.store.as_deref(), &config.data_dir)?;
        configure_scrubber(&store, &config, admin_token.as_deref());
        crate::util::scrub::set_log_scrubber(store.scrubber().clone());
        // The file rule of `reload`: only a file changed since its last sync appends (one
        // flush for all of them).
        let ops = integrations.values().flat_map(|i| i.operations.iter());
        for (key, rev) in generations::sync_file_revisions(&store, ops.map(|o| &**o))? {
            tracing::info!(operation = %key, revision = rev, "new revision from file");
        }
        let synced = started.elapsed();
        let passed = CheckCache::of(
            integrations
                .values()
                .flat_map(|i| i.operations.iter().map(|o| &**o)),
        );
        if passed != cache {
            if let Err(e) = passed.write(&config.data_dir) {
                tracing::warn!(error = %e, "cannot write the check cache (the next start checks every file)");
            }
        }
        let hosts = hosts::upstream_hosts(&integrations);
        let mcp =
            endpoints::Endpoints::with_allowed_origins(config.control.allowed_origins.clone());
        let app = App {
            config,
            mode,
            store,
            integrations: generations::Integrations::new(integrations),
            engines: Engines::default(),
            attempts: Attempts::new(),
            admin_token: admin_token.filter(|t| !t.is_empty()),
            clock,
            limits,
            metrics: Metrics::default(),
            mcp,
            forwarding,
            hosts,
            contracts: contracts::Contracts::new(contracts_dir, contract_set),
            otel,
            otel_forward,
            pinned: Default::default(),
            initial_states: Default::default(),
            latest: Default::default(),
            local_addr: OnceLock::new(),
            scheme: OnceLock::new(),
        };
        app.start_default_attempt()?;
        // Exclusive attempts open before a restart keep failing calls that miss them.
        app.attempts
            .load_open_exclusive(&app.store, app.clock.now())?;
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

    /// End the default attempts of earlier runs and create this run's. A shared store
    /// (PostgreSQL, docs/src/operations/fleet-store.md) keeps ONE default attempt for the whole fleet: a process adopts
    /// the live one (created by whichever process started first) instead of ending it, so
    /// calls without a token reach the same attempt through any process.
    fn start_default_attempt(&self) -> Result<(), StartError> {
        let now = self.clock.now();
        if self.store.is_shared() {
            for _ in 0..3 {
                let live = self
                    .store
                    .attempts()?
                    .into_iter()
                    .find(|a| a.is_default && a.ended_at.is_none());
                if let Some(live) = live {
                    self.attempts.get(&self.store, &live.attempt_id)?;
                    return Ok(());
                }
                match self.create_default_attempt(now) {
                    // Another process created it meanwhile: adopt that one.
                    Err(StartError::Store(e)) if Store::is_default_taken(&e) => continue,
                    other => return other,
                }
            }
        }
        for mut old in self.store.attempts()? {
            if old.is_default && old.ended_at.is_none() {
                old.final_state = Some(self.store.state(&old.attempt_id)?);
                let remaining = self.store.clear_state(&old.attempt_id)?;
                old.ended_at = Some(crate::util::time::rfc3339(now));
                old.cleanup = Some(cleanup_report(remaining));
                self.store.put_attempt(&old)?;
            }
        }
        self.create_default_attempt(now)
    }

    fn create_default_attempt(&self, now: chrono::DateTime<chrono::Utc>) -> Result<(), StartError> {
        let pinned = self.pin_latest()?;
        // Stale operations stay unpinned in the default attempt: their calls answer
        // `stale_contract` rather than refusing the whole server.
        // The store keys attempts by token hash: the default attempt gets a token nobody
        // ever sees (requests without a token reach it).
        let unused_token = attempt::new_token();
        let new = attempt::NewAttempt {
            token: Some(&unused_token),
            pins: pinned.pins.clone(),
            is_default: true,
            durability: self.config.durability,
            ..attempt::NewAttempt::default()
        };
        let rec = attempt::new_record(now, new);
        self.create_attempt(rec)?;
        Ok(())
    }

    /// The latest revision of every operation file (docs/src/concepts/attempts.md) as one shared revision set,
    /// listing stale ones: a latest revision checked against another contract hash than the
    /// file's current one. Computed once per (generation, [`Store::revision_epoch`]): every
    /// attempt created between two changes shares the same set, and creating one reads no
    /// revision.
    pub fn pin_latest(&self) -> Result<Arc<Pinned>, StoreError> {
        let at = (self.integrations.generation(), self.store.revision_epoch());
        if let Some((k, p)) = &*self.pinned.lock().unwrap_or_else(|p| p.into_inner()) {
            if *k == at {
                return Ok(p.clone());
            }
        }
        let p = Arc::new(self.pin_latest_now()?);
        *self.pinned.lock().unwrap_or_else(|p| p.into_inner()) = Some((at, p.clone()));
        Ok(p)
    }

    /// [`App::pin_latest`] computed: one scan of the latest revision numbers; only a
    /// revision not seen before is read (its contract hash and `initial_state` are kept).
    fn pin_latest_now(&self) -> Result<Pinned, StoreError> {
        let numbers = self.store.latest_revision_numbers()?;
        let mut seen = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        let mut pins = BTreeMap::new();
        let mut initial = InitialState::new();
        let mut out = Pinned::default();
        for integ in self.integrations.values() {
            let state = initial.entry(integ.name().to_string()).or_default();
            for op in &integ.operations {
                let key = op.key();
                let Some(&n) = numbers.get(&key) else {
                    continue;
                };
                if seen.get(&key).is_none_or(|l| l.revision != n) {
                    let Some(rev) = self.store.revision_head(&key, n)? else {
                        continue;
                    };
                    seen.insert(key.clone(), Latest::of(rev));
                }
                let Some(l) = seen.get(&key) else { continue };
                if l.contract_hash != op.contract_hash {
                    out.stale.push(StaleOp {
                        operation: key,
                        revision: l.revision,
                        revision_contract_hash: l.contract_hash.clone(),
                        current_contract_hash: op.contract_hash.clone(),
                    });
                    continue;
                }
                for (k, v) in l.initial_state.iter().flatten() {
                    state.entry(k.clone()).or_insert_with(|| v.clone());
                }
                pins.insert(
                    key,
                    Pin {
                        revision: l.revision,
                        contract_hash: l.contract_hash.clone(),
                    },
                );
            }
        }
        out.pins = Pins::new(pins);
        self.initial_states
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(out.pins.id().to_string(), Arc::new(initial));
        Ok(out)
    }

    /// Store a new attempt with its initial state (the union of the pinned definitions'
    /// `initial_state` per integration) and register it.
    pub fn create_attempt(
        &self,
        rec: crate::records::AttemptRecord,
    ) -> Result<Arc<Attempt>, StoreError> {
        let state = self.initial_state(&rec.pins)?.as_ref().clone();
        self.store.create_attempt(&rec, &state)?;
        if !rec.is_default {
            // It keeps the operation set its pins were made with (`reload`).
            self.integrations.bind(&rec.attempt_id);
        }
        let a = Attempt::new(
            rec,
            AttemptState {
                state,
                idempotency: HashMap::new(),
                chaos: HashMap::new(),
                published: 0,
                calls: 0,
            },
        );
        Ok(self.attempts.insert(a))
    }

    /// The initial state of an attempt pinning `pins`: per integration, the union of the
    /// pinned definitions' `initial_state`. Computed once per revision set (a pinned
    /// revision's `initial_state` never changes).
    pub fn initial_state(&self, pins: &Pins) -> Result<Arc<InitialState>, StoreError> {
        let id = pins.id().to_string();
        if let Some(s) = self
            .initial_states
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
        {
            return Ok(s.clone());
        }
        let mut state = InitialState::new();
        for integ in self.integrations.values() {
            let mut s = Map::new();
            for op in &integ.operations {
                let key = op.key();
                if let Some(pin) = pins.get(&key) {
                    for (k, v) in self.revision_initial_state(&key, pin)? {
                        s.entry(k).or_insert(v);
                    }
                }
            }
            state.insert(integ.name().to_string(), s);
        }
        let state = Arc::new(state);
        self.initial_states
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, state.clone());
        Ok(state)
    }

    /// The `initial_state` of revision `pin` of `key` (empty when it declares none).
    pub fn revision_initial_state(
        &self,
        key: &str,
        pin: &Pin,
    ) -> Result<Map<String, Value>, StoreError> {
        Ok(self
            .store
            .revision_head(key, pin.revision)?
            .and_then(|r| r.initial_state)
            .unwrap_or_default())
    }

    /// Called by the server once it listens: its address and the scheme of its own URLs.
    pub fn set_serving(&self, addr: Option<SocketAddr>, scheme: &'static str) {
        if let Some(a) = addr {
            let _ = self.local_addr.set(a);
        }
        let _ = self.scheme.set(scheme);
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
    /// even after a hot reload replaced them for new attempts ([`generations`]).
    pub fn integration_for(&self, attempt: &Attempt, name: &str) -> Option<&Integration> {
        self.integrations.for_attempt(&attempt.id).get(name)
    }

    /// The operation `"<integration>/<operation_id>"`.
    pub fn operation(&self, key: &str) -> Option<&Arc<Operation>> {
        let (i, o) = key.split_once('/')?;
        self.integrations.get(i)?.operation(o)
    }

    /// Whether `"<integration>/<operation_id>"` is a built-in operation with a default
    /// answer that no operation file overrides (the Salesforce login and reads): an attempt
    /// may select its variants (`invalid_grant`).
    pub fn builtin_default(&self, key: &str) -> bool {
        let Some((i, o)) = key.split_once('/') else {
            return false;
        };
        self.integrations.get(i).is_some_and(|integ| {
            integ.wire.http().and_then(|p| p.kind())
                == Some(crate::contract::ProfileKind::Salesforce)
                && integ.builtins.iter().any(|b| b.operation_id == o)
                && crate::profile::salesforce::defaults::has_default(o)
        })
    }
}

/// `{"status":"verified"|"unverified","remaining_state_keys":n}`.
pub fn cleanup_report(remaining: usize) -> Value {
    serde_json::json!({
        "status": if remaining == 0 { "verified" } else { "unverified" },
        "remaining_state_keys": remaining,
    })
}

/// A [`Pinned`] and the (generation, revision epoch) it was computed at.
type PinnedAt = ((u64, u64), Arc<Pinned>);

/// What pinning keeps of an operation's latest revision.
struct Latest {
    revision: u64,
    contract_hash: String,
    initial_state: Option<Map<String, Value>>,
}

impl Latest {
    fn of(rev: crate::records::RevisionHead) -> Latest {
        Latest {
            revision: rev.revision,
            contract_hash: rev.contract_hash,
            initial_state: rev.initial_state,
        }
    }
}

/// Integration → the state an attempt starts with.
pub type InitialState = BTreeMap<String, Map<String, Value>>;

/// The result of pinning latest revisions.
#[derive(Debug, Default)]
pub struct Pinned {
    pub pins: Pins,
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
