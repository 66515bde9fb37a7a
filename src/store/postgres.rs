//! The PostgreSQL backend (SPEC 17): the fleet store, so that several `understudy serve`
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
//! is ONE transaction on one pooled connection:
//!
//! 1. `BEGIN`; insert the attempt's `understudy_calls` row if missing; `SELECT last_seq,
//!    writer … FOR UPDATE` — the attempt's row lock, held until the commit, so calls of one
//!    attempt through any process are serialized; the pre-call state and the idempotency
//!    table are read under it (`Fresh`) unless this process wrote the row last (`writer` is
//!    this process's random id and `last_seq` the sequence it wrote: its in-memory copy is
//!    then current);
//! 2. the caller evaluates (pure, in memory) and calls `write_call`, which takes the locked
//!    connection (sequence = `last_seq + 1`) and spawns the commit: the event, the new
//!    `last_seq`, the state and the first-`ok` idempotency row, then `COMMIT`, pipelined in
//!    one round trip;
//! 3. `wait_durable` (from the task that called `write_call`) awaits that commit:
//!    acknowledged means committed.
//!
//! **An agent-side event** (SPEC 15, [`Postgres::write_agent_event`]) is the same
//! transaction without evaluation: under the attempt's row lock (the one `lock_call` took
//! for it, else taken there) it gets `last_seq + 1` — the calls' sequence — and is inserted
//! into `understudy_events` with kind `agent`; `wait_durable` awaits its commit. The
//! timeline ([`Postgres::timeline`]) reads both kinds in sequence order.
//!
//! `lock_timeout` (5 s) and `statement_timeout` (10 s) are set on every connection; pool waits
//! and connects time out after 5 s; any failure is a [`StoreError`] (the pipeline answers
//! `store_error`, never a pass). A failed lock is kept for the attempt so that its
//! `write_call` returns the error; a lock not consumed is released by [`Postgres::release_call`]
//! (its connection is dropped, which rolls the transaction back).
//!
//! **Revisions** are appended under a transaction-scoped advisory lock on the operation key
//! and the unique (integration, operation, revision) key, so processes syncing the same
//! files agree on the numbers; a commit notifies `understudy_changes`. A listener task
//! (LISTEN, with a 500 ms poll of the revision count and the attempts' change counter as
//! fallback) publishes [`Changes`] so the server re-pins its default attempt and refreshes
//! attempt records changed elsewhere.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

use super::embedded::{decode_json, encode_json};
use super::{lock, CallRecord, EncodedResult, StoreError};
use crate::records::{
    AgentEvent, AttemptRecord, EvidenceEntry, Pin, ResultStatus, RevisionHead, RevisionRecord,
    ToolEvent,
};
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
/// The listener's poll interval (the fallback when a notification is missed).
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// The notification channel of revision and attempt changes.
const CHANNEL: &str = "understudy_changes";

/// The schema, one migration per version: version `n` is `MIGRATIONS[n - 1]`. Applied at
/// open under an advisory lock, each in its own transaction with its row in
/// `understudy_schema`. Never edit a released migration: append one.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE SEQUENCE understudy_change_seq;
CREATE TABLE understudy_revisions (
    integration     text   NOT NULL,
    operation       text   NOT NULL,
    revision        bigint NOT NULL,
    contract_hash   text   NOT NULL,
    definition_hash text   NOT NULL,
    source          text   NOT NULL,
    saved_at        text   NOT NULL,
    record          text   NOT NULL,
    PRIMARY KEY (integration, operation, revision)
);
CREATE TABLE understudy_attempts (
    attempt_id text    PRIMARY KEY,
    token_hash text    NOT NULL UNIQUE,
    is_default boolean NOT NULL,
    live       boolean NOT NULL,
    changed    bigint  NOT NULL,
    record     text    NOT NULL
);
CREATE UNIQUE INDEX understudy_one_live_default ON understudy_attempts ((true))
    WHERE is_default AND live;
CREATE INDEX understudy_attempts_changed ON understudy_attempts (changed);
CREATE TABLE understudy_calls (
    attempt_id text   PRIMARY KEY REFERENCES understudy_attempts ON DELETE CASCADE,
    last_seq   bigint NOT NULL DEFAULT 0,
    writer     text   NOT NULL DEFAULT ''
);
CREATE TABLE understudy_state (
    attempt_id  text NOT NULL REFERENCES understudy_attempts ON DELETE CASCADE,
    integration text NOT NULL,
    state       text NOT NULL,
    PRIMARY KEY (attempt_id, integration)
);
CREATE TABLE understudy_events (
    attempt_id text   NOT NULL REFERENCES understudy_attempts ON DELETE CASCADE,
    sequence   bigint NOT NULL,
    kind       text   NOT NULL DEFAULT 'tool',
    event      text   NOT NULL,
    PRIMARY KEY (attempt_id, sequence)
);
CREATE TABLE understudy_idempotency (
    attempt_id text   NOT NULL REFERENCES understudy_attempts ON DELETE CASCADE,
    operation  text   NOT NULL,
    key_ref    text   NOT NULL,
    sequence   bigint NOT NULL,
    event      text   NOT NULL,
    PRIMARY KEY (attempt_id, operation, key_ref)
);
"#,
    r#"
CREATE TABLE understudy_revision_sets (
    id   text PRIMARY KEY,
    pins text NOT NULL
);
"#,
    // The fleet's scrubber key (`crate::util::scrub`): one row, made by the first process.
    r#"
CREATE TABLE understudy_scrub_key (
    id  integer PRIMARY KEY CHECK (id = 1),
    key text    NOT NULL
);
"#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

const S_CALL_ROW: &str = "INSERT INTO understudy_calls (attempt_id) SELECT $1::text \
     WHERE EXISTS (SELECT 1 FROM understudy_attempts WHERE attempt_id = $1::text) ON CONFLICT DO NOTHING";
const S_LOCK: &str =
    "SELECT last_seq, writer FROM understudy_calls WHERE attempt_id = $1 FOR UPDATE";
const S_STATE: &str =
    "SELECT integration, state FROM understudy_state WHERE attempt_id = $1 ORDER BY integration";
const S_IDEM: &str =
    "SELECT event FROM understudy_idempotency WHERE attempt_id = $1 ORDER BY sequence";
const S_EVENT: &str =
    "INSERT INTO understudy_events (attempt_id, sequence, kind, event) VALUES ($1, $2, $4, $3)";
/// `understudy_events.kind` of a call's event.
const KIND_TOOL: &str = "tool";
/// `understudy_events.kind` of an agent-side event (SPEC 15): same table, same sequence.
const KIND_AGENT: &str = "agent";
const S_SEQ: &str = "UPDATE understudy_calls SET last_seq = $2, writer = $3 WHERE attempt_id = $1";
const S_PUT_STATE: &str =
    "INSERT INTO understudy_state (attempt_id, integration, state) VALUES ($1, $2, $3) \
     ON CONFLICT (attempt_id, integration) DO UPDATE SET state = EXCLUDED.state";
const S_PUT_IDEM: &str =
    "INSERT INTO understudy_idempotency (attempt_id, operation, key_ref, sequence, event) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";

/// What the listener has seen change in the database (counters only grow).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    /// Bumped when the number of revisions grew.
    pub revisions: u64,
    /// Bumped when attempt records changed ([`super::Store::take_changed_attempts`]).
    pub attempts: u64,
}

/// The pre-call state read under the row lock, when this process's copy is not current.
#[derive(Debug, Default)]
pub struct Fresh {
    pub state: BTreeMap<String, Map<String, Value>>,
    /// The first `ok` event of each (operation, idempotency key ref), oldest first.
    pub idempotent: Vec<ToolEvent>,
}

/// A row lock taken for one call, with the token of its [`super::CallLock`] (so that a late
/// release never drops the next call's lock).
enum Held {
    Locked {
        conn: TxConn,
        last_seq: u64,
        token: u64,
    },
    Failed(String, u64),
}

impl Held {
    fn token(&self) -> u64 {
        match self {
            Held::Locked { token, .. } | Held::Failed(_, token) => *token,
        }
    }
}

/// A pooled connection inside a transaction. Dropped without [`TxConn::done`] (a failure, a
/// lock nobody consumed, a caller gone) it is taken out of the pool and closed, which rolls
/// the transaction back and releases the row lock; it never goes back to the pool mid-
/// transaction.
struct TxConn(Option<Box<Object>>);

impl TxConn {
    fn get(&self) -> &Object {
        self.0.as_ref().expect("a live connection")
    }
    /// The transaction ended (committed): the connection goes back to the pool.
    fn done(mut self) {
        self.0.take();
    }
}

impl Drop for TxConn {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            drop(Object::take(*conn));
        }
    }
}

/// Who awaits a commit: the tokio task that called `write_call` (so an `.await` between
/// `write_call` and `wait_durable` is harmless), else the thread (sync callers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Waiter {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

impl Waiter {
    fn current() -> Waiter {
        match tokio::task::try_id() {
            Some(id) => Waiter::Task(id),
            None => Waiter::Thread(std::thread::current().id()),
        }
    }
}

type Commit = tokio::task::JoinHandle<Result<(), StoreError>>;

struct Shared {
    pool: Pool,
    /// This process's writer id (random): `understudy_calls.writer` of the calls it commits.
    writer: String,
    /// Row locks taken by `lock_call`, by attempt (one per attempt: the caller holds the
    /// attempt's in-memory lock).
    held: Mutex<HashMap<String, Held>>,
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
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.listener.abort();
        lock(&self.shared.held).clear();
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// The URL without its password, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Whether `url` names the PostgreSQL backend.
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
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
        let shown = redact_url(url);
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
            writer: crate::attempt::random_hex(8),
            held: Mutex::new(HashMap::new()),
            seen: Mutex::new(HashMap::new()),
            commits: AtomicU64::new(0),
            pending: Mutex::new(HashMap::new()),
            inflight: watch::Sender::new(0),
            changes: watch::Sender::new(Changes::default()),
            changed_attempts: Mutex::new(Vec::new()),
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
        Ok(Postgres {
            shared,
            rt: Some(rt),
            handle,
            data_dir: data_dir.to_path_buf(),
            listener,
        })
    }

    pub(super) fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    fn block<T, F>(&self, f: impl FnOnce(Arc<Shared>) -> F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        block_on(&self.handle, f(self.shared.clone()))
    }

    pub(super) fn subscribe(&self) -> watch::Receiver<Changes> {
        self.shared.changes.subscribe()
    }

    pub(super) fn take_changed_attempts(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.shared.changed_attempts))
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
                     live = EXCLUDED.live, changed = EXCLUDED.changed, record = EXCLUDED.record",
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

    // ---- state ---------------------------------------------------------------------------

    pub(super) fn state(
        &self,
        attempt_id: &str,
    ) -> Result<BTreeMap<String, Map<String, Value>>, StoreError> {
        let id = attempt_id.to_string();
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            read_state(&conn, &id).await
        })
    }

    /// Outside a call: under the attempt's row lock, and it marks the row so that every
    /// process reloads the state on its next call.
    pub(super) fn put_state(
        &self,
        attempt_id: &str,
        integration: &str,
        state: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        let (id, integ) = (attempt_id.to_string(), integration.to_string());
        let json = text(encode_json(state)?);
        self.block(move |s| async move {
            let mut conn = s.pool.get().await.map_err(pool_err)?;
            let tx = conn.transaction().await.map_err(pg_err)?;
            tx.execute(S_CALL_ROW, &[&id]).await.map_err(pg_err)?;
            tx.execute(
                "UPDATE understudy_calls SET writer = '' WHERE attempt_id = $1",
                &[&id],
            )
            .await
            .map_err(pg_err)?;
            tx.execute(S_PUT_STATE, &[&id, &integ, &json])
                .await
                .map_err(pg_err)?;
            tx.commit().await.map_err(pg_err)
        })
    }

    pub(super) fn clear_state(&self, attempt_id: &str) -> Result<usize, StoreError> {
        let id = attempt_id.to_string();
        self.block(move |s| async move {
            let mut conn = s.pool.get().await.map_err(pool_err)?;
            let tx = conn.transaction().await.map_err(pg_err)?;
            tx.execute(
                "UPDATE understudy_calls SET writer = '' WHERE attempt_id = $1",
                &[&id],
            )
            .await
            .map_err(pg_err)?;
            tx.execute("DELETE FROM understudy_state WHERE attempt_id = $1", &[&id])
                .await
                .map_err(pg_err)?;
            tx.commit().await.map_err(pg_err)?;
            let row = conn
                .query_one(
                    "SELECT count(*) FROM understudy_state WHERE attempt_id = $1",
                    &[&id],
                )
                .await
                .map_err(pg_err)?;
            Ok(to_u64(row.get(0)) as usize)
        })
    }

    // ---- calls ---------------------------------------------------------------------------

    /// Step 1 of a call (module doc): the attempt's row lock. `Ok(None)`: this process's
    /// in-memory state is current; `Ok(Some)`: the state and idempotency entries to use.
    /// On `Err` the failure is also kept, so the attempt's `write_call` returns it.
    pub(super) async fn lock_call(
        &self,
        attempt_id: &str,
        token: u64,
    ) -> Result<Option<Fresh>, StoreError> {
        let s = self.shared.clone();
        let id = attempt_id.to_string();
        let seen = lock(&s.seen).get(attempt_id).copied();
        // Inserted into `held` here, after the await: a caller dropped meanwhile leaves the
        // connection in the task's output, which closes it.
        let r = self
            .handle
            .spawn(async move { lock_row(&s, &id, seen).await })
            .await
            .unwrap_or_else(|_| Err(StoreError::Backend("the store runtime stopped".into())));
        let mut held = lock(&self.shared.held);
        match r {
            Ok((conn, last_seq, fresh)) => {
                held.insert(
                    attempt_id.to_string(),
                    Held::Locked {
                        conn,
                        last_seq,
                        token,
                    },
                );
                Ok(fresh)
            }
            Err(e) => {
                held.insert(attempt_id.to_string(), Held::Failed(e.to_string(), token));
                Err(e)
            }
        }
    }

    /// Drops a row lock that no `write_call` consumed (rolls its transaction back).
    pub(super) fn release_call(&self, attempt_id: &str, token: u64) {
        let held = {
            let mut held = lock(&self.shared.held);
            match held.get(attempt_id) {
                Some(h) if h.token() == token => held.remove(attempt_id),
                _ => None,
            }
        };
        if let Some(Held::Locked { conn, .. }) = held {
            lock(&self.shared.seen).remove(attempt_id);
            // Closing the connection ends its transaction; the pool opens a new one.
            drop(conn);
        }
    }

    /// The row lock of the attempt's next write: the one `lock_call` took (whose pre-call
    /// state the caller applied), else taken now (a path without `lock_call`: blocking).
    /// Returns the locked connection, the row's `last_seq`, and whether this process's
    /// in-memory copy of the attempt is current.
    fn take_lock(&self, attempt_id: &str) -> Result<(TxConn, u64, bool), StoreError> {
        let held = lock(&self.shared.held).remove(attempt_id);
        match held {
            Some(Held::Locked { conn, last_seq, .. }) => Ok((conn, last_seq, true)),
            Some(Held::Failed(m, _)) => Err(StoreError::Backend(m)),
            None => {
                let id = attempt_id.to_string();
                let seen = lock(&self.shared.seen).get(attempt_id).copied();
                let (conn, last_seq, fresh) =
                    self.block(move |s| async move { lock_row(&s, &id, seen).await })?;
                Ok((conn, last_seq, fresh.is_none()))
            }
        }
    }

    pub(super) fn write_call(
        &self,
        attempt_id: &str,
        mut rec: CallRecord,
    ) -> Result<u64, StoreError> {
        let (conn, last_seq, current) = self.take_lock(attempt_id)?;
        let seq = last_seq + 1;
        rec.event.sequence = seq;
        let event = text(super::event_json::encode(
            &rec.event,
            rec.result_json.as_ref().map(EncodedResult::as_bytes),
        )?);
        let state = match &rec.state {
            Some((integ, map)) => Some((integ.clone(), text(encode_json(map)?))),
            None => None,
        };
        let idem = match (&rec.event.idempotency_key_ref, &rec.event.operation_id) {
            (Some(r), Some(op)) if rec.event.result_status == ResultStatus::Ok => {
                Some((format!("{}/{op}", rec.event.integration), r.clone()))
            }
            _ => None,
        };
        let entry = Entry {
            seq,
            kind: KIND_TOOL,
            event,
            state,
            idem,
        };
        self.spawn_commit(attempt_id, conn, current, entry);
        Ok(seq)
    }

    /// An agent-side event: the attempt's next sequence under its row lock, kind `agent`;
    /// durable once `wait_durable` (from this task) returns.
    pub(super) fn write_agent_event(
        &self,
        attempt_id: &str,
        mut ev: AgentEvent,
    ) -> Result<u64, StoreError> {
        let (conn, last_seq, current) = self.take_lock(attempt_id)?;
        let seq = last_seq + 1;
        ev.sequence = seq;
        let entry = Entry {
            seq,
            kind: KIND_AGENT,
            event: text(encode_json(&ev)?),
            state: None,
            idem: None,
        };
        self.spawn_commit(attempt_id, conn, current, entry);
        Ok(seq)
    }

    /// Spawns the commit of one entry on the locked connection and queues it for the
    /// current task's `wait_durable`. `current`: this process's in-memory copy of the
    /// attempt was current under the lock, so it stays current after this write (the row's
    /// `writer` says so); otherwise the row is marked for every process to reload.
    fn spawn_commit(&self, attempt_id: &str, conn: TxConn, current: bool, entry: Entry) {
        let seq = entry.seq;
        if current {
            lock(&self.shared.seen).insert(attempt_id.to_string(), seq);
        } else {
            lock(&self.shared.seen).remove(attempt_id);
        }
        let s = self.shared.clone();
        let id = attempt_id.to_string();
        s.inflight.send_modify(|n| *n += 1);
        let job = self.handle.spawn(async move {
            let writer = if current { s.writer.as_str() } else { "" };
            let r = commit(&s, conn, &id, writer, entry).await;
            if r.is_err() {
                lock(&s.seen).remove(&id);
            } else {
                s.commits.fetch_add(1, Ordering::Relaxed);
            }
            s.inflight.send_modify(|n| *n -= 1);
            r
        });
        lock(&self.shared.pending)
            .entry(Waiter::current())
            .or_default()
            .push(job);
    }

    /// The commits spawned by the current task (or thread) and not yet awaited.
    pub(super) fn take_pending(&self) -> Vec<Commit> {
        lock(&self.shared.pending)
            .remove(&Waiter::current())
            .unwrap_or_default()
    }

    /// Every commit in flight, whichever thread spawned it (shutdown's `flush`).
    pub(super) async fn wait_idle(&self) {
        let mut rx = self.shared.inflight.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) fn remove_event_for_test(
        &self,
        attempt_id: &str,
        seq: u64,
    ) -> std::io::Result<bool> {
        let id = attempt_id.to_string();
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            let n = conn
                .execute(
                    "DELETE FROM understudy_events WHERE attempt_id = $1 AND sequence = $2",
                    &[&id, &to_i64(seq)],
                )
                .await
                .map_err(pg_err)?;
            Ok(n > 0)
        })
        .map_err(std::io::Error::other)
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) fn pause_flushes(&self) {
        self.shared.paused.send_replace(true);
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) fn resume_flushes(&self) {
        self.shared.paused.send_replace(false);
    }

    /// Calls and agent-side events, in sequence order (dense up to the row's `last_seq`).
    pub(super) fn timeline(&self, attempt_id: &str) -> Result<Vec<EvidenceEntry>, StoreError> {
        let id = attempt_id.to_string();
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            // The counter first: writes only add events (see the embedded backend).
            let recorded = conn
                .query_opt(
                    "SELECT last_seq FROM understudy_calls WHERE attempt_id = $1",
                    &[&id],
                )
                .await
                .map_err(pg_err)?
                .map_or(0, |r| to_u64(r.get(0)));
            let rows = conn
                .query(
                    "SELECT sequence, kind, event FROM understudy_events WHERE attempt_id = $1 AND sequence <= $2 ORDER BY sequence",
                    &[&id, &to_i64(recorded)],
                )
                .await
                .map_err(pg_err)?;
            let mut out = Vec::with_capacity(rows.len());
            let mut last = 0u64;
            for r in &rows {
                let seq = to_u64(r.get(0));
                if seq != last + 1 {
                    break;
                }
                last = seq;
                let (kind, json) = (r.get::<_, &str>(1), r.get::<_, &str>(2).as_bytes());
                let what = format!("event {id}#{seq}");
                out.push(match kind {
                    KIND_TOOL => {
                        let mut e: ToolEvent = decode_json(json, &what)?;
                        e.sequence = seq;
                        EvidenceEntry::Call(e)
                    }
                    KIND_AGENT => {
                        let mut e: AgentEvent = decode_json(json, &what)?;
                        e.sequence = seq;
                        EvidenceEntry::Agent(e)
                    }
                    other => {
                        return Err(StoreError::Corrupt {
                            key: what,
                            message: format!("unknown event kind {other:?}"),
                        })
                    }
                });
            }
            super::missing_tail(&id, recorded, last)?;
            Ok(out)
        })
    }

    /// The fleet's scrubber key: `proposed` when no process stored one before.
    pub(super) fn scrub_key(&self, proposed: String) -> Result<String, StoreError> {
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

    pub(super) fn flush_count(&self) -> u64 {
        self.shared.commits.load(Ordering::Relaxed)
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

async fn migrate(pool: &Pool) -> Result<(), StoreError> {
    let mut conn = pool.get().await.map_err(pool_err)?;
    // One process migrates at a time; the others wait, then find nothing to do.
    conn.batch_execute(
        "SELECT pg_advisory_lock(8231017); CREATE TABLE IF NOT EXISTS understudy_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .map_err(pg_err)?;
    let result = async {
        let current: i32 = conn
            .query_one("SELECT coalesce(max(version), 0) FROM understudy_schema", &[])
            .await
            .map_err(pg_err)?
            .get(0);
        if current > SCHEMA_VERSION {
            return Err(StoreError::Backend(format!(
                "the database's understudy schema is version {current}, newer than this build's {SCHEMA_VERSION}: upgrade understudy"
            )));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            let version = i as i32 + 1;
            let tx = conn.transaction().await.map_err(pg_err)?;
            tx.batch_execute(sql).await.map_err(pg_err)?;
            tx.execute(
                "INSERT INTO understudy_schema (version) VALUES ($1)",
                &[&version],
            )
            .await
            .map_err(pg_err)?;
            tx.commit().await.map_err(pg_err)?;
            tracing::info!(version, "store schema migrated");
        }
        Ok(())
    }
    .await;
    let unlocked = conn
        .batch_execute("SELECT pg_advisory_unlock(8231017)")
        .await
        .map_err(pg_err);
    result.and(unlocked)
}

async fn read_state(
    conn: &Object,
    id: &str,
) -> Result<BTreeMap<String, Map<String, Value>>, StoreError> {
    let st = conn.prepare_cached(S_STATE).await.map_err(pg_err)?;
    let rows = conn.query(&st, &[&id]).await.map_err(pg_err)?;
    let mut out = BTreeMap::new();
    for r in &rows {
        let integ: String = r.get(0);
        let map = decode_json(
            r.get::<_, &str>(1).as_bytes(),
            &format!("state {id}/{integ}"),
        )?;
        out.insert(integ, map);
    }
    Ok(out)
}

/// BEGIN, insert-if-missing, `SELECT … FOR UPDATE` (one round trip), and the pre-call state
/// when `seen` (the sequence this process last wrote) is not what the row says.
async fn lock_row(
    s: &Shared,
    id: &str,
    seen: Option<u64>,
) -> Result<(TxConn, u64, Option<Fresh>), StoreError> {
    let conn = TxConn(Some(Box::new(s.pool.get().await.map_err(pool_err)?)));
    let run = async {
        let conn = conn.get();
        let (ins, sel) =
            tokio::try_join!(conn.prepare_cached(S_CALL_ROW), conn.prepare_cached(S_LOCK))
                .map_err(pg_err)?;
        let p_id: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&id];
        let (_, _, row) = tokio::try_join!(
            conn.batch_execute("BEGIN"),
            conn.execute(&ins, &p_id),
            conn.query_opt(&sel, &p_id),
        )
        .map_err(pg_err)?;
        let Some(row) = row else {
            return Err(StoreError::Invalid(format!(
                "cannot record a call for unknown attempt {id}"
            )));
        };
        let last_seq = to_u64(row.get(0));
        let writer: &str = row.get(1);
        if seen == Some(last_seq) && writer == s.writer {
            return Ok((last_seq, None));
        }
        let idem = conn.prepare_cached(S_IDEM).await.map_err(pg_err)?;
        let (state, rows) = tokio::try_join!(read_state(conn, id), async {
            conn.query(&idem, &[&id]).await.map_err(pg_err)
        })?;
        let idempotent = rows
            .iter()
            .map(|r| {
                decode_json(
                    r.get::<_, &str>(0).as_bytes(),
                    &format!("idempotency entry of {id}"),
                )
            })
            .collect::<Result<Vec<ToolEvent>, _>>()?;
        Ok((last_seq, Some(Fresh { state, idempotent })))
    };
    // On `Err`, `conn` is dropped: closed, never back in the pool mid-transaction.
    let (last_seq, fresh) = run.await?;
    Ok((conn, last_seq, fresh))
}

/// One write under a row lock: a call's event (with its state change and first-`ok`
/// idempotency row) or an agent-side event.
struct Entry {
    seq: u64,
    /// [`KIND_TOOL`] or [`KIND_AGENT`].
    kind: &'static str,
    event: String,
    state: Option<(String, String)>,
    idem: Option<(String, String)>,
}

/// Step 2 of a call (or an agent event): the writes and COMMIT, pipelined; on failure the
/// connection is dropped (the server rolls back). `writer` is what the row's `writer`
/// becomes (this process's id, or empty: every process reloads).
async fn commit(
    #[allow(unused_variables)] s: &Shared,
    conn: TxConn,
    id: &str,
    writer: &str,
    entry: Entry,
) -> Result<(), StoreError> {
    let Entry {
        seq,
        kind,
        event,
        state,
        idem,
    } = entry;
    #[cfg(any(test, feature = "test-hooks"))]
    {
        let mut rx = s.paused.subscribe();
        let _ = rx.wait_for(|p| !p).await;
    }
    let seq = to_i64(seq);
    let run = async {
        let conn = conn.get();
        let (ev, up, st, im) = tokio::try_join!(
            conn.prepare_cached(S_EVENT),
            conn.prepare_cached(S_SEQ),
            conn.prepare_cached(S_PUT_STATE),
            conn.prepare_cached(S_PUT_IDEM),
        )?;
        let p_ev: [&(dyn tokio_postgres::types::ToSql + Sync); 4] = [&id, &seq, &event, &kind];
        let p_up: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&id, &seq, &writer];
        tokio::try_join!(
            conn.execute(&ev, &p_ev),
            conn.execute(&up, &p_up),
            async {
                match &state {
                    Some((integ, json)) => conn.execute(&st, &[&id, integ, json]).await,
                    None => Ok(0),
                }
            },
            async {
                match &idem {
                    Some((op, r)) => conn.execute(&im, &[&id, op, r, &seq, &event]).await,
                    None => Ok(0),
                }
            },
            conn.batch_execute("COMMIT"),
        )
    };
    match run.await {
        Ok(_) => {
            conn.done();
            Ok(())
        }
        Err(e) => Err(pg_err(e)), // `conn` is dropped: closed
    }
}

/// The listener: LISTEN on [`CHANNEL`], and on each notification or every
/// [`POLL_INTERVAL`] compare the revision count and the attempts' change counter.
async fn listen(cfg: tokio_postgres::Config, s: Arc<Shared>) {
    let mut revisions: Option<i64> = None;
    let mut changed: Option<i64> = None;
    loop {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let client = match cfg.connect(NoTls).await {
            Ok((client, mut conn)) => {
                tokio::spawn(async move {
                    while let Some(m) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                        match m {
                            Ok(tokio_postgres::AsyncMessage::Notification(_)) => {
                                let _ = tx.send(());
                            }
                            Ok(_) => {}
                            Err(_) => break,
                        }
                    }
                });
                client
            }
            Err(_) => {
                tokio::time::sleep(POLL_INTERVAL).await;
                continue;
            }
        };
        if client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .await
            .is_err()
        {
            tokio::time::sleep(POLL_INTERVAL).await;
            continue;
        }
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                m = rx.recv() => if m.is_none() { break },
                _ = tick.tick() => {}
            }
            if poll(&client, &s, &mut revisions, &mut changed)
                .await
                .is_err()
            {
                break;
            }
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

async fn poll(
    client: &tokio_postgres::Client,
    s: &Shared,
    revisions: &mut Option<i64>,
    changed: &mut Option<i64>,
) -> Result<(), tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM understudy_revisions), (SELECT coalesce(max(changed), 0) FROM understudy_attempts)",
            &[],
        )
        .await?;
    let (n, c): (i64, i64) = (row.get(0), row.get(1));
    if revisions.is_some_and(|old| old != n) {
        s.changes.send_modify(|ch| ch.revisions += 1);
    }
    *revisions = Some(n);
    if let Some(old) = *changed {
        if c > old {
            let rows = client
                .query(
                    "SELECT attempt_id FROM understudy_attempts WHERE changed > $1",
                    &[&old],
                )
                .await?;
            lock(&s.changed_attempts).extend(rows.iter().map(|r| r.get::<_, String>(0)));
            s.changes.send_modify(|ch| ch.attempts += 1);
        }
    }
    *changed = Some(c);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_their_password() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact_url("postgres://h/db"), "postgres://h/db");
        assert!(is_postgres_url("postgresql://h/db"));
        assert!(!is_postgres_url("sqlite://x"));
    }

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
