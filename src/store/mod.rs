//! The store: sled trees, evidence files, the journal, keys and codecs — the only module that
//! touches sled or the data dir (docs/src/operations/durability.md).
//!
//! Nothing sled-specific leaks out of this module: callers see [`Store`], the record types of
//! [`crate::records`] and [`StoreError`]. Two backends sit behind the same methods: the
//! embedded one (sled + evidence files + journal, the default) and PostgreSQL (`postgres.rs`,
//! docs/src/operations/fleet-store.md: the fleet store, selected by a `postgres://` store URL).
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | the facade [`Store`]: the public API, argument checks (ids, JSON depth), [`StoreError`] |
//! | `revisions.rs` | the facade's revisions, attempts and per-attempt state |
//! | `calls.rs` | the facade's evidence (calls, agent events, reads) and durability |
//! | `embedded/mod.rs` | the embedded backend: sled trees and transactions, open and close, revisions, attempts, state |
//! | `embedded/calls.rs` | the embedded backend's evidence writes and reads, journal checkpoints |
//! | `journal.rs` | the write-ahead journal and the group-commit flusher thread |
//! | `events.rs` | the per-attempt evidence files and their lanes |
//! | `frame.rs` | the `length | crc | payload` frame of the journal and the evidence files: one writer, one reader |
//! | `keys.rs` | the sled key encodings |
//! | `postgres/` | the PostgreSQL backend: schema and migrations, the attempts' leases and the commit lane (many attempts' calls per transaction), the change listener |
//!
//! # Backend interface
//!
//! Each public method of [`Store`] checks its arguments (ids without NUL, values no deeper
//! than [`MAX_STORED_DEPTH`]) and calls the backend: `Store` holds a `Backend` enum
//! (`Embedded` or `Postgres`; an enum, not a trait object, so the facade keeps its sync
//! signatures and each method is one `match`). Each backend provides: `open`, `data_dir`; `sync_revision_unflushed`,
//! `latest_revision`, `revision`, `revisions`, `latest_revision_head`, `revision_head` (the
//! head only: [`RevisionHead`]); `put_attempt` (durable when it returns),
//! `attempt`, `attempts`, `attempt_by_token_hash`; `state`, `put_state`, `clear_state`
//! (durable when they return); `write_call` and `write_agent_event` (visible at once, not
//! yet durable), `wait_durable`, `timeline` (calls and agent-side events; `evidence` is its
//! calls); `flush_now`, `flush_count`; and, with the `test-hooks`
//! feature, `pause_flushes`, `resume_flushes`, `remove_event_for_test`. Every rule under
//! "Atomicity and order" and "Durability" below is part of that interface; the journal, the
//! lanes and the frames are how the embedded backend keeps them.
//!
//! **Shared stores** (PostgreSQL, [`Store::is_shared`]) add the call lock: several processes
//! serve one attempt, so the in-memory state and idempotency table of `crate::app::attempt` are
//! only a cache. A call takes the attempt's row lock with [`Store::lock_call`] (through
//! `crate::app::attempt::lock_in_store`, right after the in-memory lock), which also returns the
//! pre-call state read under it when another process wrote since; its `write_call` then
//! runs in that transaction and `wait_durable` awaits the commit. An agent-side event
//! (`write_agent_event`) takes the same row lock (the one `lock_call` took, else its own)
//! and the next sequence of the same counter, so calls and events share one sequence across
//! processes; `timeline` reads both kinds in sequence order. For the embedded store
//! `lock_call` returns at once. [`Store::subscribe`] reports revisions and attempt records
//! changed by other processes (`crate::server::reload::follow_store`).
//!
//! # Layout on disk
//!
//! `<data_dir>/sled/` (directories created mode 0700) holds one sled database with these trees;
//! `<data_dir>/events/<hex SHA-256 of the attempt id>.log` (mode 0600) holds each attempt's
//! evidence, and `<data_dir>/journal` (mode 0600) is the write-ahead journal of calls (see
//! Durability). Keys are built so that a prefix scan returns records in their natural order.
//!
//! | tree | key | value |
//! |---|---|---|
//! | `revisions` | `<integration>/<operation_id>/` + revision as big-endian u64 | JSON [`RevisionRecord`] |
//! | `attempts` | `<attempt_id>` | JSON [`AttemptRecord`], its pins replaced by `revision_set` (records of earlier versions hold their pins inline and still read) |
//! | `revision_sets` | `rs_…` (the set's content hash, [`crate::records::Pins::id`]) | JSON pins: `"<integration>/<operation_id>"` → `{"revision","contract_hash"}`, stored once for every attempt that pins it |
//! | `tokens` | `<token_hash>` | `<attempt_id>` |
//! | `state` | `<attempt_id>` `0x00` `<integration>` | JSON object: that integration's state |
//! | `events` | `<attempt_id>` `0x00` + sequence as big-endian u64 | JSON [`ToolEvent`]: only read, for data dirs written before evidence files |
//! | `meta` | `rev` `0x00` `<integration>/<operation_id>` | latest revision number (big-endian u64) |
//! | `meta` | `seq` `0x00` `<attempt_id>` | last event sequence of the attempt (big-endian u64) |
//!
//! Attempt ids must not contain `0x00`, so `<attempt_id> 0x00` is an unambiguous prefix.
//!
//! **Why evidence is not in sled.** sled keeps an in-memory entry for every page it ever
//! wrote: with one key per call its resident memory grew by ~100 bytes per call without bound
//! (78 MB after 30 s at 16k calls/s; 47 MB with the events elsewhere, `bench/README.md`). An
//! evidence file is a sequence of frames `length u32 LE | crc32 u32 LE | sequence u64 LE |
//! event JSON`, appended by the attempt's lane (an agent-side event of docs/src/reference/events.md is the frame
//! JSON `{"agent_event":{…}}`, in the same file and the same sequence as calls), read whole by [`Store::evidence`] (which stops
//! at a torn tail), so memory stays flat however long a run is.
//!
//! # Atomicity and order
//!
//! - [`Store::sync_revision`] reads the latest number and appends `n + 1` in one transaction
//!   over `revisions` and `meta`: two concurrent syncs can never produce the same number, and
//!   a revision is never rewritten.
//! - [`Store::write_call`] assigns the attempt's next sequence and writes the event (to the
//!   attempt's evidence file) and the integration's new state (sled) under that attempt's
//!   **lane** (a mutex per attempt holding its file and its counter, never one across
//!   attempts): sequences are contiguous (1, 2, 3…) per attempt,
//!   and the state left behind is the one of the highest sequence. The event is written before
//!   the lane's counter moves, so a reader that reads the counter first (the open lane's,
//!   else the one saved in sled) never sees a counter ahead of its events (`evidence` reports
//!   exactly that as missing evidence).
//! - The counter is **not written per call** (issue 20: it was a sled insert per call): the
//!   call's journal frame carries it, and it is saved to sled's `meta` tree when the lane is
//!   made clean — its file fsynced, at a checkpoint or before the lane is closed — so a
//!   reopened lane, which cuts its file after the saved counter, always reads a current one.
//!   Replaying the journal never lowers a saved counter (a checkpoint may save one past frames
//!   still queued then, whose events its fsync already covered).
//!
//! # Durability: a write-ahead journal with group commit
//!
//! Evidence must be durable before a call is answered (docs/src/reference/evidence-envelope.md, docs/src/operations/durability.md: an acknowledged call is
//! never missing), but one fsync per call would cap throughput at the disk's fsync rate, and
//! a sled flush per batch costs more than the call itself (sled hands every flushed buffer
//! to its own thread pool). So a call's writes go two ways:
//!
//! 1. into the attempt's evidence file and sled, unflushed: readers (`evidence`, `state`) see
//!    them at once;
//! 2. as one framed record into the **journal**, `<data_dir>/journal`, an append-only file
//!    that only the flusher writes. A frame is `length u32 LE | crc32 u32 LE | payload`; the
//!    payload lists the sled writes of the call (`tree u8 | key | value`, lengths u32 LE).
//!
//! [`Store::wait_durable`] enqueues a waiter and awaits it. The **flusher thread** (a plain
//! OS thread, so it works from any tokio runtime and never blocks a worker) sleeps until a
//! waiter arrives, then takes *every* pending frame and waiter, appends the frames with one
//! `write` and makes them durable with one `fdatasync`, and answers the whole batch. Waiters
//! that arrive meanwhile form the next batch: N concurrent callers share one fsync. There is
//! no timer and no batching delay. [`Store::flush_count`] counts the batches (a metric; tests
//! assert on it).
//!
//! Invariant: a call's frame is queued before `write_call` returns, so before its caller's
//! waiter; frames and waiters are taken together under one lock and committed in order under
//! the journal's I/O lock. Every waiter is therefore answered only after a commit that
//! covers every frame queued before it.
//!
//! **Checkpoint.** When the journal passes `JOURNAL_LIMIT` (16 MiB), and on every synchronous write
//! ([`Store::flush_now`]: revisions, attempts, `put_state`, `clear_state`) and at close, the
//! flusher fsyncs every evidence file written since the last checkpoint, makes sled durable
//! (`Db::flush`) and starts a new journal epoch (frames of older epochs no longer count):
//! every frame in the journal had reached its file and sled before, so nothing is lost.
//! [`Store::open`] replays the journal (events a file lacks are appended to it, state and
//! counters written to sled, in order; a counter only upwards), stops at the first torn or corrupt frame (a tail
//! that was never acknowledged — it is logged), checkpoints, and only then serves.
//!
//! **Open files.** The store keeps at most a quarter of the soft open-files limit
//! (`RLIMIT_NOFILE`, read and logged at open; 8..=256 files) of evidence files open, the
//! replay included: at the cap the least recently used idle lane is closed — after an
//! `fdatasync` when it holds writes not yet synced, since a checkpoint only syncs open lanes
//! — and reopened from its file and counter on its next write. An open that still fails for
//! want of descriptors closes every idle lane and retries once; failing again, the call is
//! answered `store_error` with nothing written, and the next call tries afresh.
//!
//! A failed append or fsync (disk full, I/O error) answers every waiter of the batch with the
//! error, so `wait_durable` returns `Err` and the caller must not answer the call as a
//! success; its frames go back to the front of the queue (a caller whose frame was in the
//! failed batch but whose waiter came later is covered only by a commit that wrote it), and
//! the journal's failed bytes are zeroed before the next write, so a later batch never lands
//! behind a torn frame. A call whose future is dropped after
//! `write_call` (client gone) leaves its event in the store: evidence may hold a call that was
//! never answered, but never lacks one that was. `tests/it/store.rs`
//! (`acknowledged_calls_survive_kill_9`) kills a recording process with SIGKILL and checks
//! that every acknowledged sequence is in the reopened store.
//!
//! **Durability `attempt`** (issue 20, opt-in per attempt: [`Durability`]). A call's writes
//! are the same, but its answer does not wait: [`Store::acknowledge`] asks the flusher for a
//! background commit (`journal::BACKGROUND_FLUSH`, 5 ms, or sooner with the next waiter)
//! instead of enqueuing a waiter; the `call` path is untouched. [`Store::make_durable`]
//! (verdict reads) awaits a commit covering every write so far; ending an attempt writes its
//! record, a checkpoint. A crash can lose such an unflushed tail, so the embedded store
//! keeps the marker `<data_dir>/open`: created and fsynced at open, removed after the final
//! checkpoint of a clean close. Found at open, the last holder died: every attempt with
//! durability `attempt` not yet ended is marked `interrupted` in its record before the store
//! is returned (`Store::interrupt_open_attempts`), and `crate::evidence` fails it. PostgreSQL
//! keeps `call` semantics for both values (its commit is what the fleet reads; a kill of
//! understudy loses nothing committed), so nothing is interrupted there.
//!
//! **Store failures are never forgotten.** A call answered 500 `store_error` is counted in
//! its attempt's record (`store_failures`) by [`Store::mark_store_failure`] before the answer
//! leaves: on the embedded store a sled update made durable by sled's own flush, which does
//! not go through the journal whose write failed; on PostgreSQL its own transaction. When
//! even that fails, [`Store::store_failure_unrecorded`] renames the open marker to
//! `<data_dir>/open-store-failure` (a rename needs no free space); found at the next open,
//! every attempt not yet ended is marked `interrupted`, whatever its durability.
//!
//! Durability is `fdatasync` for the journal; sled's own flush (checkpoints, revisions,
//! attempts) uses `sync_file_range`, which survives a process or OS crash but does not flush
//! a device's volatile write cache.
//!
//! Dropping the last `Store` handle stops the flusher after it has answered every queued
//! waiter, checkpoints, and releases sled's exclusive lock on the data dir.
//!
//! sled allows one process per data dir: `understudy evidence` against a data dir that a
//! running `serve` holds fails with [`StoreError::Locked`], whose message points to the
//! admin API instead.

mod embedded;
mod event_json;
mod events;
mod frame;
mod journal;
mod keys;
mod postgres;
pub mod published;
#[cfg(test)]
mod tests;

use crate::util::scrub::Scrubber;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};

use crate::records::{
    AgentEvent, AttemptEvidence, AttemptRecord, Durability, EvidenceEntry, Pins, RevisionHead,
    RevisionRecord, ToolEvent,
};
use crate::util::json::{deeper_than, MAX_STORED_DEPTH};
pub use calls::{TimelineCursor, TIMELINE_CHUNK, UNMARKED_STORE_FAILURES};
use embedded::Embedded;
use keys::{check_attempt_id, check_key};
use postgres::Postgres;
pub use postgres::{Changes, Fresh, LOCK_TIMEOUT_MS, SCHEMA_VERSION, STATEMENT_TIMEOUT_MS};

/// A store failure. Messages name the data dir where it helps.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("data dir {} is in use by another process (a running `understudy serve`?): only one process may open it; while serve runs, read from it with --url http://HOST:PORT (`understudy evidence|verify|report ATTEMPT --url …`, plus --admin-token when it has one; it reads GET /_understudy/api/attempts/{{id}}/evidence)", path.display())]
    Locked { path: PathBuf },
    #[error("data dir {} does not exist or holds no understudy store", path.display())]
    NotFound { path: PathBuf },
    #[error("cannot open the store in data dir {}: {message}", path.display())]
    Open { path: PathBuf, message: String },
    #[error("store error: {0}")]
    Backend(String),
    #[error("corrupt store record {key}: {message}")]
    Corrupt { key: String, message: String },
    #[error("invalid store argument: {0}")]
    Invalid(String),
}

/// What `write_call` writes: the event (its `sequence` is assigned by the store) and, when
/// the call changed it, the integration's whole new state.
#[derive(Debug, Clone)]
pub struct CallRecord {
    pub event: ToolEvent,
    pub state: Option<(String, Map<String, Value>)>,
    /// The event's `result` already encoded (a static result's, encoded once per pinned
    /// revision: `crate::proxy::answer`); when set, `event.result` is not read (the caller
    /// leaves it `null`) and these bytes are the event's `result` member.
    pub result_json: Option<EncodedResult>,
}

/// The scrubber key of a backend: the fleet's row in PostgreSQL, else `<data_dir>/scrub.key`
/// (32 random bytes as hex, mode 0600), made on first use. A key that cannot be kept is
/// made for this process only (marks then differ between runs; secrets still never pass).
fn scrub_key(backend: &Backend) -> [u8; 32] {
    let proposed = crate::util::scrub::new_key();
    let kept = match backend {
        Backend::Postgres(p) => p.scrub_key(hex_of(&proposed)),
        Backend::Embedded(e) => {
            let file = e.data_dir().join("scrub.key");
            match std::fs::read_to_string(&file) {
                Ok(t) => Ok(t.trim().to_string()),
                Err(_) => {
                    crate::util::fs::write_atomic_mode(&file, hex_of(&proposed).as_bytes(), 0o600)
                        .map(|()| hex_of(&proposed))
                        .map_err(|e| StoreError::Backend(format!("{}: {e}", file.display())))
                }
            }
        }
    };
    match kept.map(|h| key_of_hex(&h)) {
        Ok(Some(k)) => k,
        Ok(None) | Err(_) => {
            tracing::warn!(
                "the scrubber key cannot be read or kept: using one for this process only"
            );
            proposed
        }
    }
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn key_of_hex(h: &str) -> Option<[u8; 32]> {
    if h.len() != 64 {
        return None;
    }
    let mut k = [0u8; 32];
    for (i, out) in k.iter_mut().enumerate() {
        *out = u8::from_str_radix(h.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(k)
}

impl Store {
    /// A call's event as it may be stored: arguments, result and error scrubbed.
    fn scrub_event(&self, e: &mut ToolEvent) {
        self.scrubber.json(&mut e.arguments);
        self.scrubber.json(&mut e.result);
        if let Some(err) = &mut e.error {
            self.scrubber.json(err);
        }
    }

    fn scrub_states(&self, states: &mut BTreeMap<String, Map<String, Value>>) {
        for m in states.values_mut() {
            for v in m.values_mut() {
                self.scrubber.json(v);
            }
        }
    }
}

/// A call's `result` encoded once as JSON for the events of many calls: checked against
/// [`MAX_STORED_DEPTH`] like every stored value (so it can be read back) when it is made,
/// and shared by reference counting.
#[derive(Debug, Clone)]
pub struct EncodedResult(
    bytes::Bytes,
    /// Its scrubbed form (`None`: nothing to scrub), computed at its first store write and
    /// shared by every clone: once per revision, not per call.
    Arc<std::sync::OnceLock<Option<bytes::Bytes>>>,
);

impl EncodedResult {
    /// `None` when `result` nests too deep to be stored (the call then carries its value,
    /// which the store refuses as it refuses any such value).
    pub fn new(result: &Value) -> Option<EncodedResult> {
        if deeper_than(result, MAX_STORED_DEPTH) {
            return None;
        }
        serde_json::to_vec(result)
            .ok()
            .map(|v| EncodedResult(bytes::Bytes::from(v), Arc::default()))
    }

    /// The form to store, when scrubbing changes it.
    fn scrubbed(&self, s: &Scrubber) -> Option<EncodedResult> {
        let done = self.1.get_or_init(|| {
            let mut v: Value = serde_json::from_slice(&self.0).ok()?;
            s.json(&mut v)
                .then(|| serde_json::to_vec(&v).ok().map(bytes::Bytes::from))
                .flatten()
        });
        done.clone()
            .map(|b| EncodedResult(b, Arc::new(std::sync::OnceLock::from(None))))
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The row lock of one call ([`Store::lock_call`]); dropping it releases a lock that no
/// `write_call` consumed (a no-op once consumed, and for the embedded store).
#[must_use = "keep the call lock until after write_call"]
pub struct CallLock {
    held: Option<(Store, String, u64)>,
}

impl Drop for CallLock {
    fn drop(&mut self) {
        if let Some((store, attempt_id, token)) = self.held.take() {
            if let Backend::Postgres(p) = &*store.inner {
                p.release_call(&attempt_id, token);
            }
        }
    }
}

/// The store handle: cheap to clone (an `Arc` inside), `Send + Sync`.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Backend>,
    sets: Arc<Sets>,
    /// The one scrubber (`crate::util::scrub`), keyed per data dir (per fleet).
    scrubber: Arc<Scrubber>,
    /// Test hook: how many coming [`Store::wait_durable`] calls fail ([`Store::fail_next_flushes_for_test`]).
    #[cfg(any(test, feature = "test-hooks"))]
    fail_flushes: Arc<std::sync::atomic::AtomicU64>,
    /// Test hook: how many coming [`Store::mark_store_failure`] calls fail
    /// ([`Store::fail_next_marks_for_test`]).
    #[cfg(any(test, feature = "test-hooks"))]
    fail_marks: Arc<std::sync::atomic::AtomicU64>,
}

/// The revision sets this process has stored or read (id → set: a set is immutable and
/// named by its content, so a cached one is never stale), and the count of revisions this
/// process appended ([`Store::revision_epoch`]).
#[derive(Default)]
struct Sets {
    known: Mutex<HashMap<String, Pins>>,
    appended: std::sync::atomic::AtomicU64,
}

/// The two backends behind the facade: an enum, not a trait object — the facade's methods
/// stay as they were (sync, plus the async `wait_durable`), and each arm is one call.
enum Backend {
    Embedded(Embedded),
    Postgres(Postgres),
}

/// One expression per backend: `on!(self, b => b.method(args))`.
macro_rules! on {
    ($s:expr, $b:ident => $e:expr) => {
        match &*$s.inner {
            Backend::Embedded($b) => $e,
            Backend::Postgres($b) => $e,
        }
    };
}

// The facade continues in these two files, which use `on!` and so come after it.
mod calls;
mod revisions;

impl Store {
    /// The embedded backend (unit tests of its internals).
    #[cfg(test)]
    fn embedded(&self) -> &Embedded {
        match &*self.inner {
            Backend::Embedded(e) => e,
            Backend::Postgres(_) => panic!("not the embedded store"),
        }
    }

    fn of(backend: Backend) -> Store {
        let scrubber = Arc::new(Scrubber::new(scrub_key(&backend)));
        Store {
            scrubber,
            inner: Arc::new(backend),
            sets: Arc::default(),
            #[cfg(any(test, feature = "test-hooks"))]
            fail_flushes: Default::default(),
            #[cfg(any(test, feature = "test-hooks"))]
            fail_marks: Default::default(),
        }
    }

    /// Opens the store in `data_dir`, creating the directories (mode 0700) when missing.
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        Store::of_embedded(Embedded::open(data_dir, true)?)
    }

    /// The opened embedded store; when the last process holding it died without closing it,
    /// first marks its interrupted attempts ([`Store::interrupt_open_attempts`]).
    fn of_embedded(e: Embedded) -> Result<Store, StoreError> {
        let unclean = e.unclean;
        let unrecorded = e.unrecorded_failure;
        let store = Store::of(Backend::Embedded(e));
        if unrecorded {
            store.interrupt_every_open_attempt()?;
            if let Backend::Embedded(e) = &*store.inner {
                e.clear_unrecorded_failure().map_err(|e| StoreError::Open {
                    path: store.data_dir().to_path_buf(),
                    message: e,
                })?;
            }
        } else if unclean {
            store.interrupt_open_attempts()?;
        }
        Ok(store)
    }

    /// A store failure whose durable mark could not be written was left behind
    /// ([`Store::store_failure_unrecorded`]): which attempt it hit is unknown, so every
    /// attempt that was open (not ended), whatever its durability, is marked `interrupted`
    /// before anything is served.
    fn interrupt_every_open_attempt(&self) -> Result<(), StoreError> {
        for mut a in on!(self, b => b.attempts())? {
            if a.ended_at.is_none() && !a.interrupted && !a.is_default {
                a.interrupted = true;
                tracing::warn!(
                    attempt = %a.attempt_id,
                    "a call was answered store_error and its mark could not be written: every attempt open then is marked interrupted and its verdict is fail"
                );
                on!(self, b => b.put_attempt(&a))?;
            }
        }
        Ok(())
    }

    /// After a crash (the embedded store's open marker was left behind): every attempt
    /// with durability `attempt` still open (not ended) may have lost calls answered after
    /// the last flush, so it is marked `interrupted` — durably, before anything is served —
    /// and its verdict is `fail` from then on. Attempts with durability `call` lost nothing
    /// acknowledged and are left alone.
    fn interrupt_open_attempts(&self) -> Result<(), StoreError> {
        for mut a in on!(self, b => b.attempts())? {
            if a.durability == Durability::Attempt && a.ended_at.is_none() && !a.interrupted {
                a.interrupted = true;
                tracing::warn!(
                    attempt = %a.attempt_id,
                    "the process holding the store died while this attempt (durability `attempt`) was open: calls answered after the last flush may be lost, so it is marked interrupted and its verdict is fail"
                );
                // The stored form (revision set by name) is written back as it was read.
                on!(self, b => b.put_attempt(&a))?;
            }
        }
        Ok(())
    }

    /// Opens the store a project names: `url` (`postgres://…`, docs/src/operations/fleet-store.md) when given, else
    /// the embedded store in `data_dir`. Any other URL scheme is refused.
    pub fn open_configured(url: Option<&str>, data_dir: &Path) -> Result<Store, StoreError> {
        match url {
            None => Store::open(data_dir),
            Some(u) if crate::config::is_postgres_url(u) => Store::open_postgres(u, data_dir),
            Some(u) => Err(StoreError::Invalid(format!(
                "store {:?}: expected a postgres:// or postgresql:// URL (or no `store` for the embedded store in data_dir)",
                crate::config::redact_url(u)
            ))),
        }
    }

    /// Connects to PostgreSQL at `url`, creating or migrating the schema (`data_dir` is
    /// only reported by [`Store::data_dir`]).
    pub fn open_postgres(url: &str, data_dir: &Path) -> Result<Store, StoreError> {
        let store = Store::of(Backend::Postgres(Postgres::open(url, data_dir)?));
        store.write_unmarked_store_failures()?;
        Ok(store)
    }

    /// Opens an existing store without creating anything; [`StoreError::NotFound`] when
    /// `data_dir` holds none (used by `understudy evidence`).
    pub fn open_existing(data_dir: &Path) -> Result<Store, StoreError> {
        Store::of_embedded(Embedded::open(data_dir, false)?)
    }

    /// Whether several processes may share this store (PostgreSQL): their in-memory copies
    /// of an attempt are then not authoritative ([`Store::lock_call`]).
    pub fn is_shared(&self) -> bool {
        matches!(&*self.inner, Backend::Postgres(_))
    }

    /// What changed in a shared store since open (revisions appended, attempt records
    /// written), by any process; `None` for the embedded store (one process).
    pub fn subscribe(&self) -> Option<tokio::sync::watch::Receiver<Changes>> {
        match &*self.inner {
            Backend::Embedded(_) => None,
            Backend::Postgres(p) => Some(p.subscribe()),
        }
    }

    /// The ids of attempts whose records changed (by any process) since the last call.
    pub fn take_changed_attempts(&self) -> Vec<String> {
        match &*self.inner {
            Backend::Embedded(_) => Vec::new(),
            Backend::Postgres(p) => p.take_changed_attempts(),
        }
    }

    /// Whether `e` is the refusal of a second live default attempt in a shared store.
    pub fn is_default_taken(e: &StoreError) -> bool {
        matches!(e, StoreError::Invalid(m) if m == postgres::DEFAULT_TAKEN)
    }

    // ---- the call lock (docs/src/operations/fleet-store.md) ---------------------------------------------------------

    /// Takes the attempt's row lock for one call, to be consumed by this attempt's next
    /// [`Store::write_call`] (the caller holds the attempt's in-memory lock from before this
    /// until after that `write_call`). The result: `Ok(None)` — the caller's in-memory state
    /// and idempotency table are current (always, for the embedded store: one process);
    /// `Ok(Some(fresh))` — replace them with `fresh`, read under the lock; `Err` (database
    /// down, lock timeout) — the error is also kept, so the attempt's `write_call` returns
    /// it and the call ends as `store_error`. Keep the [`CallLock`] until after
    /// `write_call`: dropping it gives back a lock no `write_call` consumed (its transaction
    /// is rolled back). `crate::app::attempt::lock_in_store` applies `fresh` for the caller.
    pub async fn lock_call(
        &self,
        attempt_id: &str,
    ) -> (CallLock, Result<Option<Fresh>, StoreError>) {
        static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        match &*self.inner {
            Backend::Embedded(_) => (CallLock { held: None }, Ok(None)),
            Backend::Postgres(p) => {
                if let Err(e) = check_attempt_id(attempt_id) {
                    return (CallLock { held: None }, Err(e));
                }
                let token = TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let r = p.lock_call(attempt_id, token).await;
                let held = Some((self.clone(), attempt_id.to_string(), token));
                (CallLock { held }, r)
            }
        }
    }

    /// The scrubber of everything this store keeps and everything exported from it
    /// (`crate::util::scrub`): its key is this data dir's (this fleet's).
    pub fn scrubber(&self) -> &Arc<Scrubber> {
        &self.scrubber
    }

    /// The data dir this store was opened in (for PostgreSQL: the project's data dir, which
    /// then holds no store).
    pub fn data_dir(&self) -> &Path {
        on!(self, b => b.data_dir())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The one "missing evidence" rule of both backends: the attempt's counter says `recorded`
/// entries were written, but the readable entries are dense only up to `last` — an
/// acknowledged entry is missing, which is corruption, never a shorter pass.
fn missing_tail(attempt_id: &str, recorded: u64, last: u64) -> Result<(), StoreError> {
    if last < recorded {
        return Err(StoreError::Corrupt {
            key: format!("events of {attempt_id}"),
            message: format!(
                "missing evidence: {recorded} entries were recorded but the events are dense only up to #{last}"
            ),
        });
    }
    Ok(())
}

/// Opens sled as `config` says. A store dropped a moment ago in this process (a restart in
/// tests, `serve` after a check) may still hold sled's lock while sled's IO threads wind down:
/// retry briefly (20 × 50 ms) before answering that error (another *process* holding the lock
/// keeps it throughout).
fn open_sled_retrying(config: &sled::Config) -> sled::Result<sled::Db> {
    let mut tries = 0;
    loop {
        match config.open() {
            Err(e) if tries < 20 && is_locked(&e) => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// sled could not take its directory's lock.
fn is_locked(e: &sled::Error) -> bool {
    e.to_string().contains("could not acquire lock")
}

fn io_message(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => format!("{e} (is the directory writable?)"),
        std::io::ErrorKind::ReadOnlyFilesystem => format!("{e} (the data dir must be writable)"),
        _ => e.to_string(),
    }
}
