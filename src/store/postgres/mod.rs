//! The PostgreSQL backend (docs/src/operations/fleet-store.md): the fleet store, so that several `understudy serve`
//! processes serve the same revisions and attempts. Selected by a `postgres://` (or
//! `postgresql://`) store URL; the facade ([`super::Store`]) checks arguments before calling.
//!
//! **Runtime.** The facade's methods stay synchronous (callers and the other backend are
//! sync), so every query runs on this backend's own small tokio runtime (2 threads): a sync
//! method spawns its future there and blocks on a channel, an async one (`lock_call`,
//! `wait_durable`) awaits the spawned task. Connections and their driver tasks therefore live
//! on one runtime whatever runtime (or none) the caller has. A sync method must never be
//! called from this runtime's own threads (nothing here does).
//!
//! **A call** ([`Postgres::lock_call`] → [`Postgres::write_call`] → [`Postgres::wait_durable`])
//! runs under the attempt's **lease** and is committed by the **commit lane** ([`lane`]):
//!
//! 1. `lock_call` holds the lease: at once when this process holds it (its in-memory state is
//!    then current: no round trip before evaluation); otherwise it takes it
//!    (`pg_try_advisory_lock` on the lane's connection, asking the holder with
//!    `NOTIFY understudy_want` and retrying until `lock_timeout`), then reads the attempt's
//!    row and — unless this process wrote it last (`writer` is this process's random id and
//!    `last_seq` the sequence it wrote) — the pre-call state, idempotency entries and chaos
//!    counters (`Fresh`);
//! 2. the caller evaluates (pure, in memory) and calls `write_call`, which gives the call
//!    `last_seq + 1` and queues its event, state and first-`ok` idempotency row in the open
//!    batch;
//! 3. `wait_durable` (from the task that called `write_call`) awaits the commit of that
//!    batch — one transaction carrying many attempts' calls ([`batch`]): acknowledged means
//!    committed.
//!
//! **An agent-side event** (docs/src/reference/events.md, [`Postgres::write_agent_event`]) is
//! queued the same way without evaluation, under the hold `lock_call` took for it (else one
//! taken there): it gets `last_seq + 1` — the calls' sequence — with kind `agent`. The
//! timeline ([`Postgres::timeline`]) reads both kinds in sequence order.
//!
//! `lock_timeout` (5 s, also the longest wait for another process's lease) and
//! `statement_timeout` (10 s) are set on every connection; pool waits and connects time out
//! after 5 s; any failure is a [`StoreError`] (the pipeline answers `store_error`, never a
//! pass). A failed hold is kept for the attempt so that its `write_call` returns the error; a
//! hold not consumed ends with [`Postgres::release_call`].
//!
//! **Revisions** are appended under a transaction-scoped advisory lock on the operation key
//! and the unique (integration, operation, revision) key, so processes syncing the same
//! files agree on the numbers; a commit notifies `understudy_changes`. A listener task
//! (LISTEN, with a 500 ms poll of the revision count and the attempts' change counter as
//! fallback) publishes [`Changes`] so the server re-pins its default attempt and refreshes
//! attempt records changed elsewhere.
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | opening (pool, runtime), revisions, attempt records, state |
//! | [`schema`] | the migrations and applying them |
//! | [`calls`] | a call's row lock and pipelined commit, agent-side events, the timeline |
//! | [`lane`] | the attempts' leases and the commit lane (batches of many attempts' calls) |
//! | `lane/holds.rs` | a call's hold of the lease and how it ends without a write (a caller that went away included) |
//! | [`batch`] | one batch's statements and the leases given back |
//! | `state.rs` | an attempt's state outside calls |
//! | [`listen`] | the listener of other processes' changes ([`Changes`]) and of lease requests |

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use serde_json::Value;
use tokio::sync::watch;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

mod batch;
mod calls;
mod fresh;
mod lane;
mod listen;
mod schema;
mod state;

pub use calls::Fresh;
pub use listen::Changes;
pub use schema::SCHEMA_VERSION;

use calls::{Commit, Waiter};
use listen::{listen, CHANNEL};
use schema::migrate;

use super::embedded::{decode_json, encode_json};
use super::{lock, StoreError};
use crate::records::{AttemptRecord, Pin, RevisionHead, RevisionRecord};
use crate::util::time::now_rfc3339;

/// `lock_timeout` of every connection: a call that waits longer for its attempt's row lock
/// fails with `store_error`.
pub const LOCK_TIMEOUT_MS: u64 = 5_000;
/// `statement_timeout` of every connection.
pub const STATEMENT_TIMEOUT_MS: u64 = 10_000;
/// Pool wait and connect timeout.
const POOL_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections per process.
const POOL_SIZE: usize = 32;

struct Shared {
    pool: Pool,
    /// This process's writer id (random): `understudy_calls.writer` of the calls it commits.
    writer: String,
    /// The connection settings (the lane and the listener open their own).
    cfg: tokio_postgres::Config,
    /// The commit lane and the leases this process holds ([`lane`]).
    lane: lane::Lane,
    /// The sequence this process last wrote per attempt (its in-memory state is current when
    /// the locked row still says so).
    seen: Mutex<HashMap<String, u64>>,
    commits: AtomicU64,
    /// Commits spawned by `write_call` and not yet awaited, by who must await them
    /// (`wait_durable` takes its own).
    pending: Mutex<HashMap<Waiter, Vec<Commit>>>,
    inflight: watch::Sender<usize>,
    changes: watch::Sender<Changes>,
    changed_attempts: Mutex<Vec<String>>,
    /// The fleet's open exclusive attempts, read once per round trip for every call that
    /// arrived before the read started ([`fresh`]); errors as text (the read is shared).
    exclusive_reads: fresh::FreshRead<Result<Vec<String>, String>>,
    #[cfg(any(test, feature = "test-hooks"))]
    paused: watch::Sender<bool>,
}

pub(super) struct Postgres {
    shared: Arc<Shared>,
    rt: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    /// The data dir of the project (drafts, certificates live there; not the store).
    data_dir: PathBuf,
    listener: tokio::task::JoinHandle<()>,
    lane_task: tokio::task::JoinHandle<()>,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.listener.abort();
        self.lane_task.abort();
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

fn pg_err(e: tokio_postgres::Error) -> StoreError {
    if let Some(db) = e.as_db_error() {
        if *db.code() == SqlState::LOCK_NOT_AVAILABLE {
            return StoreError::Backend(format!(
                "store timeout: the attempt's row lock was not granted within {LOCK_TIMEOUT_MS} ms ({})",
                db.message()
            ));
        }
        if *db.code() == SqlState::QUERY_CANCELED {
            return StoreError::Backend(format!(
                "store timeout: a statement ran longer than {STATEMENT_TIMEOUT_MS} ms ({})",
                db.message()
            ));
        }
        return StoreError::Backend(format!("PostgreSQL: {}", db.message()));
    }
    StoreError::Backend(format!("PostgreSQL: {e}"))
}

/// The point read every record lookup here is: one row or none, its first column a JSON
/// record decoded (`what` names it in a decoding error, from the row).
async fn read_json<T: serde::de::DeserializeOwned>(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    what: impl FnOnce(&tokio_postgres::Row) -> String,
) -> Result<Option<T>, StoreError> {
    let conn = pool.get().await.map_err(pool_err)?;
    let row = conn.query_opt(sql, params).await.map_err(pg_err)?;
    row.map(|r| decode_json(r.get::<_, &str>(0).as_bytes(), &what(&r)))
        .transpose()
}

fn pool_err(e: deadpool_postgres::PoolError) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => pg_err(e),
        other => StoreError::Backend(format!("PostgreSQL unavailable: {other}")),
    }
}

fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or((key, ""))
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn text(bytes: Vec<u8>) -> String {
    // serde_json writes UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

impl Postgres {
    /// Connects, creates or migrates the schema, starts the listener.
    pub(super) fn open(url: &str, data_dir: &Path) -> Result<Postgres, StoreError> {
        let shown = crate::config::redact_url(url);
        let open_err = |message: String| StoreError::Open {
            path: PathBuf::from(&shown),
            message,
        };
        let mut cfg: tokio_postgres::Config = url
            .parse()
            .map_err(|e| open_err(format!("not a PostgreSQL URL: {e}")))?;
        cfg.options(format!(
            "-c lock_timeout={LOCK_TIMEOUT_MS} -c statement_timeout={STATEMENT_TIMEOUT_MS}"
        ));
        cfg.connect_timeout(POOL_TIMEOUT);
        cfg.application_name("understudy");
        if cfg.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            return Err(open_err(
                "sslmode=require is not supported: this build has no TLS for PostgreSQL (use a loopback or private network)".into(),
            ));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("understudy-pg")
            .enable_all()
            .build()
            .map_err(|e| open_err(format!("cannot start the store runtime: {e}")))?;
        let handle = rt.handle().clone();
        let mgr = Manager::from_config(
            cfg.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = {
            let _g = rt.enter();
            Pool::builder(mgr)
                .max_size(POOL_SIZE)
                .wait_timeout(Some(POOL_TIMEOUT))
                .create_timeout(Some(POOL_TIMEOUT))
                .recycle_timeout(Some(POOL_TIMEOUT))
                .runtime(Runtime::Tokio1)
                .build()
                .map_err(|e| open_err(format!("cannot build the connection pool: {e}")))?
        };
        let shared = Arc::new(Shared {
            pool,
            writer: crate::util::ids::random_hex(8),
            cfg: cfg.clone(),
            lane: lane::Lane::new(),
            seen: Mutex::new(HashMap::new()),
            commits: AtomicU64::new(0),
            pending: Mutex::new(HashMap::new()),
            inflight: watch::Sender::new(0),
            changes: watch::Sender::new(Changes::default()),
            changed_attempts: Mutex::new(Vec::new()),
            exclusive_reads: fresh::FreshRead::new(),
            #[cfg(any(test, feature = "test-hooks"))]
            paused: watch::Sender::new(false),
        });
        let s = shared.clone();
        let migrated = block_on(&handle, async move { migrate(&s.pool).await });
        if let Err(e) = migrated {
            rt.shutdown_background();
            return Err(open_err(e.to_string()));
        }
        let listener = handle.spawn(listen(cfg, shared.clone()));
        let lane_task = handle.spawn(lane::run(shared.clone()));
        Ok(Postgres {
            shared,
            rt: Some(rt),
            handle,
            data_dir: data_dir.to_path_buf(),
            listener,
            lane_task,
        })
    }

    pub(super) fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The fleet's scrubber key: `proposed` when no process stored one before.
    pub(in crate::store) fn scrub_key(&self, proposed: String) -> Result<String, StoreError> {
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            conn.execute(
                "INSERT INTO understudy_scrub_key (id, key) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
                &[&proposed],
            )
            .await
            .map_err(pg_err)?;
            let row = conn
                .query_one("SELECT key FROM understudy_scrub_key WHERE id = 1", &[])
                .await
                .map_err(pg_err)?;
            Ok(row.get::<_, String>(0))
        })
    }

    fn block<T, F>(&self, f: impl FnOnce(Arc<Shared>) -> F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        block_on(&self.handle, f(self.shared.clone()))
    }

    // ---- revisions -----------------------------------------------------------------------

    pub(super) fn sync_revision_unflushed(
        &self,
        key: &str,
        contract_hash: &str,
        definition: &Value,
        definition_hash: String,
        source: &str,
    ) -> Result<(RevisionRecord, bool), StoreError> {
        let (key, contract_hash, source) = (
            key.to_string(),
            contract_hash.to_string(),
            source.to_string(),
        );
        let definition = definition.clone();
        self.block(move |s| async move {
            let mut conn = s.pool.get().await.map_err(pool_err)?;
            let tx = conn.transaction().await.map_err(pg_err)?;
            let (integ, op) = split_key(&key);
            tx.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 17))", &[&key])
                .await
                .map_err(pg_err)?;
            let latest = tx
                .query_opt(
                    "SELECT revision, record FROM understudy_revisions WHERE integration = $1 AND operation = $2 ORDER BY revision DESC LIMIT 1",
                    &[&integ, &op],
                )
                .await
                .map_err(pg_err)?;
            let mut n = 0u64;
            if let Some(row) = latest {
                n = to_u64(row.get(0));
                let rec: RevisionRecord =
                    decode_json(row.get::<_, &str>(1).as_bytes(), &format!("revision {key}#{n}"))?;
                if rec.definition_hash == definition_hash && rec.contract_hash == contract_hash {
                    return Ok((rec, false));
                }
            }
            let rec = RevisionRecord {
                revision: n + 1,
                contract_hash,
                definition_hash,
                definition,
                saved_at: now_rfc3339(),
                source,
            };
            let json = text(encode_json(&rec)?);
            let inserted = tx
                .execute(
                    "INSERT INTO understudy_revisions (integration, operation, revision, contract_hash, definition_hash, source, saved_at, record) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (integration, operation, revision) DO NOTHING",
                    &[&integ, &op, &to_i64(rec.revision), &rec.contract_hash, &rec.definition_hash, &rec.source, &rec.saved_at, &json],
                )
                .await
                .map_err(pg_err)?;
            if inserted == 0 {
                return Err(StoreError::Backend(format!(
                    "revision {key}#{} was appended concurrently; retry",
                    rec.revision
                )));
            }
            tx.execute("SELECT pg_notify($1, 'revision')", &[&CHANNEL])
                .await
                .map_err(pg_err)?;
            tx.commit().await.map_err(pg_err)?;
            Ok((rec, true))
        })
    }

    pub(super) fn latest_revision(&self, key: &str) -> Result<Option<RevisionRecord>, StoreError> {
        let key = key.to_string();
        self.block(move |s| async move {
            let (integ, op) = split_key(&key);
            read_json(
                &s.pool,
                "SELECT record FROM understudy_revisions WHERE integration = $1 AND operation = $2 ORDER BY revision DESC LIMIT 1",
                &[&integ, &op],
                |_| format!("revision {key}"),
            )
            .await
        })
    }

    pub(super) fn revision(&self, key: &str, n: u64) -> Result<Option<RevisionRecord>, StoreError> {
        let key = key.to_string();
        self.block(move |s| async move {
            let (integ, op) = split_key(&key);
            read_json(
                &s.pool,
                "SELECT record FROM understudy_revisions WHERE integration = $1 AND operation = $2 AND revision = $3",
                &[&integ, &op, &to_i64(n)],
                |_| format!("revision {key}#{n}"),
            )
            .await
        })
    }

    pub(super) fn latest_revision_head(
        &self,
        key: &str,
    ) -> Result<Option<RevisionHead>, StoreError> {
        self.read_head(key, None)
    }

    pub(super) fn revision_head(
        &self,
        key: &str,
        n: u64,
    ) -> Result<Option<RevisionHead>, StoreError> {
        self.read_head(key, Some(n))
    }

    /// The head of revision `n` (the latest when `None`) of `key`: its columns, and of the
    /// record only the definition's `initial_state`, extracted by the server.
    fn read_head(&self, key: &str, n: Option<u64>) -> Result<Option<RevisionHead>, StoreError> {
        let key = key.to_string();
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            let (integ, op) = split_key(&key);
            const HEAD: &str = "SELECT revision, contract_hash, definition_hash, source, \
                 (record::json -> 'definition' -> 'initial_state')::text \
                 FROM understudy_revisions WHERE integration = $1 AND operation = $2";
            let row = match n {
                Some(n) => {
                    conn.query_opt(
                        &format!("{HEAD} AND revision = $3"),
                        &[&integ, &op, &to_i64(n)],
                    )
                    .await
                }
                None => {
                    conn.query_opt(
                        &format!("{HEAD} ORDER BY revision DESC LIMIT 1"),
                        &[&integ, &op],
                    )
                    .await
                }
            }
            .map_err(pg_err)?;
            let Some(r) = row else { return Ok(None) };
            let revision = r.get::<_, i64>(0) as u64;
            let initial_state = match r.get::<_, Option<&str>>(4) {
                Some(text) => match decode_json::<Value>(
                    text.as_bytes(),
                    &format!("revision {key}#{revision}"),
                )? {
                    Value::Object(o) => Some(o),
                    _ => None,
                },
                None => None,
            };
            Ok(Some(RevisionHead {
                revision,
                contract_hash: r.get::<_, String>(1),
                definition_hash: r.get::<_, String>(2),
                source: r.get::<_, String>(3),
                initial_state,
            }))
        })
    }

    pub(super) fn latest_revision_numbers(&self) -> Result<HashMap<String, u64>, StoreError> {
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            let rows = conn
                .query(
                    "SELECT integration, operation, max(revision) FROM understudy_revisions GROUP BY integration, operation",
                    &[],
                )
                .await
                .map_err(pg_err)?;
            Ok(rows
                .iter()
                .map(|r| {
                    let key = format!("{}/{}", r.get::<_, &str>(0), r.get::<_, &str>(1));
                    (key, r.get::<_, i64>(2) as u64)
                })
                .collect())
        })
    }

    pub(super) fn revisions(&self, key: &str) -> Result<Vec<RevisionRecord>, StoreError> {
        let key = key.to_string();
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            let (integ, op) = split_key(&key);
            let rows = conn
                .query(
                    "SELECT record FROM understudy_revisions WHERE integration = $1 AND operation = $2 ORDER BY revision",
                    &[&integ, &op],
                )
                .await
                .map_err(pg_err)?;
            rows.iter()
                .map(|r| decode_json(r.get::<_, &str>(0).as_bytes(), &format!("revision {key}")))
                .collect()
        })
    }

    // ---- revision sets -------------------------------------------------------------------

    /// Stores a revision set under `id` unless it is there (committed when this returns).
    pub(super) fn put_revision_set(
        &self,
        id: &str,
        pins: &BTreeMap<String, Pin>,
    ) -> Result<(), StoreError> {
        let id = id.to_string();
        let json = text(encode_json(pins)?);
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            conn.execute(
                "INSERT INTO understudy_revision_sets (id, pins) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                &[&id, &json],
            )
            .await
            .map_err(pg_err)?;
            Ok(())
        })
    }

    pub(super) fn revision_set(
        &self,
        id: &str,
    ) -> Result<Option<BTreeMap<String, Pin>>, StoreError> {
        let id = id.to_string();
        self.block(move |s| async move {
            read_json(
                &s.pool,
                "SELECT pins FROM understudy_revision_sets WHERE id = $1",
                &[&id],
                |_| format!("revision set {id}"),
            )
            .await
        })
    }

    // ---- attempts ------------------------------------------------------------------------

    /// [`super::Store::mark_store_failure`]: one statement in its own transaction (apart
    /// from the failed call's, which rolled back), under the attempt record's row lock, so
    /// concurrent marks of several processes all count. A record written later from an
    /// older copy never lowers the counter ([`Postgres::put_attempt`] keeps the larger).
    pub(super) fn mark_store_failure(&self, attempt_id: &str) -> Result<u64, StoreError> {
        let id = attempt_id.to_string();
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            let row = conn
                .query_opt(
                    "UPDATE understudy_attempts SET changed = nextval('understudy_change_seq'), \
                     record = jsonb_set(record::jsonb, '{store_failures}', \
                       to_jsonb(COALESCE((record::jsonb->>'store_failures')::bigint, 0) + 1))::text \
                     WHERE attempt_id = $1 \
                     RETURNING (record::jsonb->>'store_failures')::bigint",
                    &[&id],
                )
                .await
                .map_err(pg_err)?
                .ok_or_else(|| StoreError::Invalid(format!("no attempt {id}")))?;
            conn.execute("SELECT pg_notify($1, 'attempt')", &[&CHANNEL])
                .await
                .map_err(pg_err)?;
            let n: i64 = row.get(0);
            Ok(n.max(0) as u64)
        })
    }

    pub(super) fn put_attempt(&self, a: &AttemptRecord) -> Result<(), StoreError> {
        let a = a.clone();
        self.block(move |s| async move {
            let json = text(encode_json(&a)?);
            let mut conn = s.pool.get().await.map_err(pool_err)?;
            let tx = conn.transaction().await.map_err(pg_err)?;
            let owner = tx
                .query_opt(
                    "SELECT attempt_id FROM understudy_attempts WHERE token_hash = $1",
                    &[&a.token_hash],
                )
                .await
                .map_err(pg_err)?;
            if let Some(owner) = owner {
                if owner.get::<_, &str>(0) != a.attempt_id {
                    return Err(StoreError::Invalid(format!(
                        "token hash of attempt {} already belongs to another attempt",
                        a.attempt_id
                    )));
                }
            }
            let live = a.ended_at.is_none();
            let put = tx
                .execute(
                    "INSERT INTO understudy_attempts (attempt_id, token_hash, is_default, live, changed, record) \
                     VALUES ($1, $2, $3, $4, nextval('understudy_change_seq'), $5) \
                     ON CONFLICT (attempt_id) DO UPDATE SET token_hash = EXCLUDED.token_hash, is_default = EXCLUDED.is_default, \
                     live = EXCLUDED.live, changed = EXCLUDED.changed, \
                     record = CASE WHEN COALESCE((understudy_attempts.record::jsonb->>'store_failures')::bigint, 0) \
                                      > COALESCE((EXCLUDED.record::jsonb->>'store_failures')::bigint, 0) \
                              THEN jsonb_set(EXCLUDED.record::jsonb, '{store_failures}', understudy_attempts.record::jsonb->'store_failures')::text \
                              ELSE EXCLUDED.record END",
                    &[&a.attempt_id, &a.token_hash, &a.is_default, &live, &json],
                )
                .await;
            if let Err(e) = put {
                if e.as_db_error().is_some_and(|d| {
                    d.constraint() == Some("understudy_one_live_default")
                }) {
                    return Err(StoreError::Invalid(DEFAULT_TAKEN.into()));
                }
                return Err(pg_err(e));
            }
            tx.execute(
                "INSERT INTO understudy_calls (attempt_id) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&a.attempt_id],
            )
            .await
            .map_err(pg_err)?;
            tx.execute("SELECT pg_notify($1, 'attempt')", &[&CHANNEL])
                .await
                .map_err(pg_err)?;
            tx.commit().await.map_err(pg_err)
        })
    }

    pub(super) fn attempt(&self, id: &str) -> Result<Option<AttemptRecord>, StoreError> {
        let id = id.to_string();
        self.block(move |s| async move {
            read_json(
                &s.pool,
                "SELECT record FROM understudy_attempts WHERE attempt_id = $1",
                &[&id],
                |_| format!("attempt {id}"),
            )
            .await
        })
    }

    pub(super) fn attempts(&self) -> Result<Vec<AttemptRecord>, StoreError> {
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            let rows = conn
                .query(
                    "SELECT attempt_id, record FROM understudy_attempts ORDER BY attempt_id",
                    &[],
                )
                .await
                .map_err(pg_err)?;
            rows.iter()
                .map(|r| {
                    decode_json(
                        r.get::<_, &str>(1).as_bytes(),
                        &format!("attempt {}", r.get::<_, &str>(0)),
                    )
                })
                .collect()
        })
    }

    pub(super) fn attempt_by_token_hash(
        &self,
        token_hash: &str,
    ) -> Result<Option<AttemptRecord>, StoreError> {
        let h = token_hash.to_string();
        self.block(move |s| async move {
            read_json(
                &s.pool,
                "SELECT record, attempt_id FROM understudy_attempts WHERE token_hash = $1",
                &[&h],
                |r| format!("attempt {}", r.get::<_, &str>(1)),
            )
            .await
        })
    }
}

/// A live default attempt exists already (the fleet shares one).
pub const DEFAULT_TAKEN: &str = "a live default attempt exists already in this store";

fn block_on<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    f: impl Future<Output = Result<T, StoreError>> + Send + 'static,
) -> Result<T, StoreError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(f.await);
    });
    rx.recv()
        .unwrap_or_else(|_| Err(StoreError::Backend("the store runtime stopped".into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_into_integration_and_operation() {
        assert_eq!(split_key("crm/lookup"), ("crm", "lookup"));
        assert_eq!(split_key("crm/a/b"), ("crm", "a/b"));
        assert_eq!(split_key("x"), ("x", ""));
    }

    #[test]
    fn a_refused_url_is_an_open_error_without_the_password() {
        let e = match Postgres::open("postgres://u:pw@h/db?sslmode=require", Path::new("d")) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("sslmode=require must be refused"),
        };
        assert!(e.contains("sslmode=require"), "{e}");
        assert!(!e.contains("pw@"), "{e}");
    }
}
