//! The store: sled trees, keys and codecs — the only module that touches sled (SPEC 12).
//!
//! Nothing sled-specific leaks out of this module: callers see [`Store`], the record types
//! and [`StoreError`], so a second backend (PostgreSQL with per-attempt row locks is planned)
//! can sit behind the same methods.
//!
//! # Layout on disk
//!
//! `<data_dir>/sled/` (directories created mode 0700) holds one sled database with these trees.
//! Keys are built so that a prefix scan returns records in their natural order.
//!
//! | tree | key | value |
//! |---|---|---|
//! | `revisions` | `<integration>/<operation_id>/` + revision as big-endian u64 | JSON [`RevisionRecord`] |
//! | `attempts` | `<attempt_id>` | JSON [`AttemptRecord`] |
//! | `tokens` | `<token_hash>` | `<attempt_id>` |
//! | `state` | `<attempt_id>` `0x00` `<integration>` | JSON object: that integration's state |
//! | `events` | `<attempt_id>` `0x00` + sequence as big-endian u64 | JSON [`ToolEvent`] |
//! | `meta` | `rev` `0x00` `<integration>/<operation_id>` | latest revision number (big-endian u64) |
//! | `meta` | `seq` `0x00` `<attempt_id>` | last event sequence of the attempt (big-endian u64) |
//!
//! Attempt ids must not contain `0x00`, so `<attempt_id> 0x00` is an unambiguous prefix.
//!
//! # Atomicity
//!
//! - [`Store::sync_revision`] reads the latest number and appends `n + 1` in one transaction
//!   over `revisions` and `meta`: two concurrent syncs can never produce the same number, and
//!   a revision is never rewritten.
//! - [`Store::record_call`] assigns the attempt's next sequence, inserts the event and writes
//!   the integration's new state in one transaction over `events`, `state` and `meta`: the
//!   state change and the evidence of the call that made it are never separated, and
//!   sequences are contiguous (1, 2, 3…) per attempt.
//!
//! # Durability: group commit
//!
//! sled writes are durable only after an fsync (`Db::flush`). Evidence must be durable
//! before a call is answered (SPEC 8: an acknowledged call is never missing), but one fsync
//! per call would cap throughput at the disk's fsync rate. So `record_call` uses a group
//! commit:
//!
//! 1. The caller runs its transaction (in memory + sled's log buffer). When it returns, the
//!    write has a reserved position in sled's log.
//! 2. The caller then enqueues a waiter (a oneshot channel) for the single **flusher thread**
//!    and awaits it. The flusher is a plain OS thread, so it works from any tokio runtime
//!    (or none) and never blocks a tokio worker.
//! 3. The flusher blocks until a waiter arrives, then drains *every* waiter queued so far
//!    into one batch, calls `Db::flush()` once (sled flushes up to the highest log position
//!    reserved when the flush starts), and answers the whole batch with its result.
//!
//! Invariant: a waiter is enqueued only after its write completed, and a batch is drained
//! before its flush starts, so every write of a batch is covered by that batch's flush.
//! Waiters that arrive while a flush runs form the next batch: under load N concurrent
//! callers share one fsync instead of paying N. [`Store::flush_count`] counts the flushes
//! performed (exported as a metric and asserted on in tests).
//!
//! There is no timer and no batching delay: a batch forms naturally while the previous fsync
//! runs, so a lone caller pays one fsync and a crowd shares them.
//!
//! If the flush fails, every waiter of the batch gets the error and `record_call` returns
//! `Err`: the caller must not answer the call as a success. A `record_call` future dropped
//! after its transaction (client gone) leaves its event in the store: evidence may hold a call
//! that was never answered, but never lacks one that was. `tests/it/store.rs`
//! (`acknowledged_calls_survive_kill_9`) kills a recording process with SIGKILL and checks
//! that every acknowledged sequence is in the reopened store.
//!
//! The rarer synchronous writes ([`Store::sync_revision`] when it appends, [`Store::put_attempt`],
//! [`Store::put_state`], [`Store::clear_state`]) flush before returning, so every `Store` method
//! returns only once its write is durable. [`Store::flush`] waits for a group flush covering
//! every write made before it was called (used at shutdown).
//!
//! Dropping the last `Store` handle stops the flusher thread after it has answered every
//! queued waiter, and releases sled's exclusive lock on the data dir.
//!
//! sled allows one process per data dir: `understudy evidence` against a data dir that a
//! running `serve` holds fails with [`StoreError::Locked`], whose message points to the
//! admin API instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};

use crate::evidence::ToolEvent;

/// Page cache of the sled database (sled's default is 1 GB).
const CACHE_CAPACITY: u64 = 64 * 1024 * 1024;
/// Sub-directory of the data dir that holds the sled database.
const SLED_DIR: &str = "sled";

/// A store failure. Messages name the data dir where it helps.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("data dir {} is in use by another process (a running `understudy serve`?): only one process may open it; while serve runs, use GET /_understudy/api/attempts/{{id}}/evidence", path.display())]
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

impl From<sled::Error> for StoreError {
    fn from(e: sled::Error) -> Self {
        StoreError::Backend(e.to_string())
    }
}

/// An immutable, numbered copy of a mock definition (SPEC 1, 12).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevisionRecord {
    pub revision: u64,
    pub contract_hash: String,
    /// `sha256:` + hex SHA-256 of the RFC 8785 canonical JSON of `definition`.
    pub definition_hash: String,
    pub definition: Value,
    /// RFC 3339.
    pub saved_at: String,
    /// `file`, `api` or `record`.
    pub source: String,
}

/// The revision an attempt pinned for one operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    pub revision: u64,
    pub contract_hash: String,
}

/// One attempt (SPEC 6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Must not contain a NUL character.
    pub attempt_id: String,
    /// Lowercase hex SHA-256 of the capability token.
    pub token_hash: String,
    /// Hex, 32 bytes: the HMAC key of idempotency key refs.
    pub secret: String,
    pub test_run_id: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub expires_at: Option<String>,
    /// `"<integration>/<operation_id>"` → pin.
    pub pins: BTreeMap<String, Pin>,
    pub variants: BTreeMap<String, String>,
    pub is_default: bool,
    /// `{"status":"verified","remaining_state_keys":0}` once cleanup ran.
    pub cleanup: Option<Value>,
}

/// What `record_call` writes atomically: the event (its `sequence` is assigned by the store)
/// and, when the call changed it, the integration's whole new state.
#[derive(Debug, Clone)]
pub struct CallRecord {
    pub event: ToolEvent,
    pub state: Option<(String, Map<String, Value>)>,
}

/// The store handle: cheap to clone (an `Arc` inside), `Send + Sync`.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    data_dir: PathBuf,
    db: sled::Db,
    revisions: sled::Tree,
    attempts: sled::Tree,
    tokens: sled::Tree,
    state: sled::Tree,
    events: sled::Tree,
    meta: sled::Tree,
    /// Queue of the flusher thread; `None` only while dropping.
    flush_tx: Option<mpsc::Sender<Waiter>>,
    flusher: Option<JoinHandle<()>>,
    shared: Arc<FlushShared>,
}

/// A caller waiting for a flush that covers its write.
type Waiter = tokio::sync::oneshot::Sender<Result<(), String>>;

/// State shared with the flusher thread.
struct FlushShared {
    flushes: AtomicU64,
    /// Test hook: while `true` the flusher waits before flushing (see `pause_flushes`).
    paused: Mutex<bool>,
    resumed: Condvar,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the queue ends the flusher once it has answered every queued waiter;
        // joining it releases its handle on the database (and so sled's file lock).
        self.flush_tx = None;
        self.shared.resume();
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
    }
}

impl FlushShared {
    fn resume(&self) {
        let mut p = self.paused.lock().unwrap_or_else(|e| e.into_inner());
        *p = false;
        self.resumed.notify_all();
    }
    fn wait_while_paused(&self) {
        let mut p = self.paused.lock().unwrap_or_else(|e| e.into_inner());
        while *p {
            p = self.resumed.wait(p).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The flusher thread: one `Db::flush` per batch of waiters (see the module doc).
fn flusher_loop(db: sled::Db, rx: mpsc::Receiver<Waiter>, shared: Arc<FlushShared>) {
    while let Ok(first) = rx.recv() {
        shared.wait_while_paused();
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let result = db.flush().map(|_| ()).map_err(|e| e.to_string());
        shared.flushes.fetch_add(1, Ordering::Relaxed);
        for w in batch {
            // A waiter whose future was dropped (client gone) is simply skipped.
            let _ = w.send(result.clone());
        }
    }
}

impl Store {
    /// Opens the store in `data_dir`, creating the directories (mode 0700) when missing.
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        create_private_dir(&data_dir.join(SLED_DIR)).map_err(|e| StoreError::Open {
            path: data_dir.to_path_buf(),
            message: io_message(&e),
        })?;
        Self::open_sled(data_dir)
    }

    /// Opens an existing store without creating anything; [`StoreError::NotFound`] when
    /// `data_dir` holds none (used by `understudy evidence`).
    pub fn open_existing(data_dir: &Path) -> Result<Store, StoreError> {
        if !data_dir.join(SLED_DIR).join("conf").is_file() {
            return Err(StoreError::NotFound {
                path: data_dir.to_path_buf(),
            });
        }
        Self::open_sled(data_dir)
    }

    fn open_sled(data_dir: &Path) -> Result<Store, StoreError> {
        let open_err = |e: sled::Error| {
            let message = match &e {
                sled::Error::Io(io) => io_message(io),
                other => other.to_string(),
            };
            if message.contains("could not acquire lock") {
                StoreError::Locked {
                    path: data_dir.to_path_buf(),
                }
            } else {
                StoreError::Open {
                    path: data_dir.to_path_buf(),
                    message,
                }
            }
        };
        // sled's own 500 ms background flusher is off: every write here is made durable
        // explicitly (group flush or an fsync before returning), and without that thread a
        // dropped store releases the file lock as soon as its last handle goes.
        let config = sled::Config::new()
            .path(data_dir.join(SLED_DIR))
            .cache_capacity(CACHE_CAPACITY)
            .flush_every_ms(None);
        // A store dropped a moment ago in this process (a restart in tests, `serve` after a
        // check) may still hold sled's lock while sled's IO threads wind down: retry briefly
        // before reporting `Locked` (another *process* holding it stays locked throughout).
        let mut tries = 0;
        let db = loop {
            match config.open().map_err(open_err) {
                Err(StoreError::Locked { .. }) if tries < 20 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                other => break other?,
            }
        };
        let tree = |name: &str| db.open_tree(name).map_err(open_err);
        let shared = Arc::new(FlushShared {
            flushes: AtomicU64::new(0),
            paused: Mutex::new(false),
            resumed: Condvar::new(),
        });
        let (tx, rx) = mpsc::channel();
        let flusher = {
            let db = db.clone();
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("understudy-store-flusher".into())
                .spawn(move || flusher_loop(db, rx, shared))
                .map_err(|e| StoreError::Open {
                    path: data_dir.to_path_buf(),
                    message: format!("cannot start the flusher thread: {e}"),
                })?
        };
        Ok(Store {
            inner: Arc::new(Inner {
                data_dir: data_dir.to_path_buf(),
                revisions: tree("revisions")?,
                attempts: tree("attempts")?,
                tokens: tree("tokens")?,
                state: tree("state")?,
                events: tree("events")?,
                meta: tree("meta")?,
                db,
                flush_tx: Some(tx),
                flusher: Some(flusher),
                shared,
            }),
        })
    }

    /// The data dir this store was opened in.
    pub fn data_dir(&self) -> &Path {
        &self.inner.data_dir
    }

    // ---- revisions -----------------------------------------------------------------------

    /// Appends a revision for `key` (`"<integration>/<operation_id>"`) when `definition`'s
    /// hash or `contract_hash` differs from the latest revision; otherwise returns the latest.
    /// `created` tells which. Numbering starts at 1; revisions are never rewritten.
    pub fn sync_revision(
        &self,
        key: &str,
        contract_hash: &str,
        definition: &Value,
        source: &str,
    ) -> Result<(RevisionRecord, bool), StoreError> {
        check_key(key)?;
        let definition_hash = crate::contract::hash::definition_hash(definition);
        let (record, created) =
            self.sync_revision_unflushed(key, contract_hash, definition, definition_hash, source)?;
        if created {
            self.flush_now()?;
        }
        Ok((record, created))
    }

    /// [`Store::sync_revision`] with `definition`'s hash already computed, WITHOUT the flush:
    /// an appended revision is durable only after the caller's [`Store::flush_now`], which
    /// must come before the revision is reported or used (start-up syncs many files this
    /// way and flushes once).
    pub fn sync_revision_unflushed(
        &self,
        key: &str,
        contract_hash: &str,
        definition: &Value,
        definition_hash: String,
        source: &str,
    ) -> Result<(RevisionRecord, bool), StoreError> {
        check_key(key)?;
        let latest_key = meta_key(META_REV, key);
        let saved_at = now_rfc3339();
        let inner = &self.inner;
        let (record, created) = (&inner.revisions, &inner.meta)
            .transaction(|(revs, meta)| {
                let latest = match meta.get(&latest_key)? {
                    Some(v) => decode_u64(&v, key).map_err(ConflictableTransactionError::Abort)?,
                    None => 0,
                };
                if latest > 0 {
                    let rk = revision_key(key, latest);
                    let rec: RevisionRecord = match revs.get(&rk)? {
                        Some(v) => decode_json(&v, &format!("revision {key}#{latest}"))
                            .map_err(ConflictableTransactionError::Abort)?,
                        None => {
                            return Err(ConflictableTransactionError::Abort(StoreError::Corrupt {
                                key: format!("revision {key}#{latest}"),
                                message: "the latest revision number points to no record".into(),
                            }))
                        }
                    };
                    if rec.definition_hash == definition_hash && rec.contract_hash == contract_hash
                    {
                        return Ok((rec, false));
                    }
                }
                let rec = RevisionRecord {
                    revision: latest + 1,
                    contract_hash: contract_hash.to_string(),
                    definition_hash: definition_hash.clone(),
                    definition: definition.clone(),
                    saved_at: saved_at.clone(),
                    source: source.to_string(),
                };
                let bytes = encode_json(&rec).map_err(ConflictableTransactionError::Abort)?;
                revs.insert(revision_key(key, rec.revision), bytes)?;
                meta.insert(latest_key.as_slice(), &rec.revision.to_be_bytes())?;
                Ok((rec, true))
            })
            .map_err(tx_error)?;
        Ok((record, created))
    }

    /// The latest revision of `key`, if any.
    pub fn latest_revision(&self, key: &str) -> Result<Option<RevisionRecord>, StoreError> {
        check_key(key)?;
        match self.inner.meta.get(meta_key(META_REV, key))? {
            Some(v) => self.revision(key, decode_u64(&v, key)?),
            None => Ok(None),
        }
    }

    /// Revision `n` of `key`, if it exists.
    pub fn revision(&self, key: &str, n: u64) -> Result<Option<RevisionRecord>, StoreError> {
        check_key(key)?;
        self.inner
            .revisions
            .get(revision_key(key, n))?
            .map(|v| decode_json(&v, &format!("revision {key}#{n}")))
            .transpose()
    }

    /// Every revision of `key`, oldest first.
    pub fn revisions(&self, key: &str) -> Result<Vec<RevisionRecord>, StoreError> {
        check_key(key)?;
        let prefix = revision_prefix(key);
        let mut out = Vec::new();
        for item in self.inner.revisions.scan_prefix(&prefix) {
            let (k, v) = item?;
            // `<key>/` followed by exactly the 8 bytes of the number.
            if k.len() != prefix.len() + 8 {
                continue;
            }
            out.push(decode_json(&v, &format!("revision {key}"))?);
        }
        Ok(out)
    }

    // ---- attempts ------------------------------------------------------------------------

    /// Inserts or replaces an attempt and its token index entry; durable when it returns.
    pub fn put_attempt(&self, a: &AttemptRecord) -> Result<(), StoreError> {
        check_attempt_id(&a.attempt_id)?;
        if a.token_hash.is_empty() {
            return Err(StoreError::Invalid("an attempt needs a token hash".into()));
        }
        let bytes = encode_json(a)?;
        let inner = &self.inner;
        (&inner.attempts, &inner.tokens)
            .transaction(|(attempts, tokens)| {
                if let Some(owner) = tokens.get(a.token_hash.as_bytes())? {
                    if owner.as_ref() != a.attempt_id.as_bytes() {
                        return Err(ConflictableTransactionError::Abort(StoreError::Invalid(
                            format!(
                                "token hash of attempt {} already belongs to another attempt",
                                a.attempt_id
                            ),
                        )));
                    }
                }
                if let Some(old) = attempts.get(a.attempt_id.as_bytes())? {
                    let old: AttemptRecord =
                        decode_json(&old, &format!("attempt {}", a.attempt_id))
                            .map_err(ConflictableTransactionError::Abort)?;
                    if old.token_hash != a.token_hash {
                        tokens.remove(old.token_hash.as_bytes())?;
                    }
                }
                attempts.insert(a.attempt_id.as_bytes(), bytes.as_slice())?;
                tokens.insert(a.token_hash.as_bytes(), a.attempt_id.as_bytes())?;
                Ok(())
            })
            .map_err(tx_error)?;
        self.flush_now()
    }

    /// The attempt `id`, if it exists.
    pub fn attempt(&self, id: &str) -> Result<Option<AttemptRecord>, StoreError> {
        self.inner
            .attempts
            .get(id.as_bytes())?
            .map(|v| decode_json(&v, &format!("attempt {id}")))
            .transpose()
    }

    /// Every attempt, ordered by id.
    pub fn attempts(&self) -> Result<Vec<AttemptRecord>, StoreError> {
        let mut out = Vec::new();
        for item in self.inner.attempts.iter() {
            let (k, v) = item?;
            out.push(decode_json(
                &v,
                &format!("attempt {}", String::from_utf8_lossy(&k)),
            )?);
        }
        Ok(out)
    }

    /// The attempt whose capability token hashes to `token_hash`.
    pub fn attempt_by_token_hash(
        &self,
        token_hash: &str,
    ) -> Result<Option<AttemptRecord>, StoreError> {
        match self.inner.tokens.get(token_hash.as_bytes())? {
            Some(id) => self.attempt(&String::from_utf8_lossy(&id)),
            None => Ok(None),
        }
    }

    // ---- state ---------------------------------------------------------------------------

    /// The attempt's state: integration → state object (only integrations that have one).
    pub fn state(
        &self,
        attempt_id: &str,
    ) -> Result<BTreeMap<String, Map<String, Value>>, StoreError> {
        check_attempt_id(attempt_id)?;
        let prefix = attempt_prefix(attempt_id);
        let mut out = BTreeMap::new();
        for item in self.inner.state.scan_prefix(&prefix) {
            let (k, v) = item?;
            let integration = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
            let map = decode_json(&v, &format!("state {attempt_id}/{integration}"))?;
            out.insert(integration, map);
        }
        Ok(out)
    }

    /// Writes one integration's whole state outside a call (initial state at attempt
    /// creation). Calls change state through [`Store::record_call`].
    pub fn put_state(
        &self,
        attempt_id: &str,
        integration: &str,
        state: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        check_attempt_id(attempt_id)?;
        self.inner
            .state
            .insert(state_key(attempt_id, integration), encode_json(state)?)?;
        self.flush_now()
    }

    /// Removes every state key of the attempt, then scans again and returns how many remain:
    /// `0` means the cleanup is verified. Evidence is kept.
    pub fn clear_state(&self, attempt_id: &str) -> Result<usize, StoreError> {
        check_attempt_id(attempt_id)?;
        let prefix = attempt_prefix(attempt_id);
        let keys: Vec<sled::IVec> = self
            .inner
            .state
            .scan_prefix(&prefix)
            .keys()
            .collect::<Result<_, _>>()?;
        for k in keys {
            self.inner.state.remove(k)?;
        }
        self.flush_now()?;
        Ok(self.inner.state.scan_prefix(&prefix).keys().count())
    }

    // ---- evidence ------------------------------------------------------------------------

    /// Records one call: assigns the attempt's next sequence, stores the event and (when
    /// given) the integration's new state in one transaction, then waits for a group flush
    /// covering the write. Returns the sequence once the call's evidence is durable.
    pub async fn record_call(&self, attempt_id: &str, rec: CallRecord) -> Result<u64, StoreError> {
        let seq = self.write_call(attempt_id, &rec)?;
        self.group_flush().await?;
        Ok(seq)
    }

    /// The transaction half of `record_call`: the event and the state are written atomically
    /// but are NOT yet durable. A caller that answers must first await
    /// [`Store::wait_durable`], whose flush covers every write that returned before it.
    /// (Lets the server release an attempt's state lock before the fsync, so calls to one
    /// attempt share flushes too.)
    pub fn write_call(&self, attempt_id: &str, rec: &CallRecord) -> Result<u64, StoreError> {
        check_attempt_id(attempt_id)?;
        let inner = &self.inner;
        if !inner.attempts.contains_key(attempt_id.as_bytes())? {
            return Err(StoreError::Invalid(format!(
                "cannot record a call for unknown attempt {attempt_id}"
            )));
        }
        let seq_key = meta_key(META_SEQ, attempt_id);
        let state = match &rec.state {
            Some((integration, map)) => {
                Some((state_key(attempt_id, integration), encode_json(map)?))
            }
            None => None,
        };
        (&inner.events, &inner.state, &inner.meta)
            .transaction(|(events, states, meta)| {
                let last = match meta.get(&seq_key)? {
                    Some(v) => {
                        decode_u64(&v, attempt_id).map_err(ConflictableTransactionError::Abort)?
                    }
                    None => 0,
                };
                let seq = last + 1;
                let mut event = rec.event.clone();
                event.sequence = seq;
                let bytes = encode_json(&event).map_err(ConflictableTransactionError::Abort)?;
                meta.insert(seq_key.as_slice(), &seq.to_be_bytes())?;
                events.insert(event_key(attempt_id, seq), bytes)?;
                if let Some((k, v)) = &state {
                    states.insert(k.as_slice(), v.as_slice())?;
                }
                Ok(seq)
            })
            .map_err(tx_error)
    }

    /// Every event of the attempt, in sequence order.
    pub fn evidence(&self, attempt_id: &str) -> Result<Vec<ToolEvent>, StoreError> {
        check_attempt_id(attempt_id)?;
        // The sequence counter, read before the scan (writes only add events): a trailing
        // event that is gone would otherwise leave a gap-free 1..n that passes the verdict.
        let recorded = match self.inner.meta.get(meta_key(META_SEQ, attempt_id))? {
            Some(v) => decode_u64(&v, attempt_id)?,
            None => 0,
        };
        let prefix = attempt_prefix(attempt_id);
        let mut out = Vec::new();
        let mut last = 0;
        for item in self.inner.events.scan_prefix(&prefix) {
            let (k, v) = item?;
            let seq = decode_u64(&k[prefix.len()..], attempt_id)?;
            last = seq;
            out.push(decode_json(&v, &format!("event {attempt_id}#{seq}"))?);
        }
        if last < recorded {
            return Err(StoreError::Corrupt {
                key: format!("events of {attempt_id}"),
                message: format!(
                    "missing evidence: {recorded} calls were recorded but the last event found is #{last}"
                ),
            });
        }
        Ok(out)
    }

    // ---- durability ----------------------------------------------------------------------

    /// Waits for a group flush covering every write made before this call (shutdown).
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.group_flush().await
    }

    /// How many group flushes (fsyncs) the flusher thread has performed since open.
    pub fn flush_count(&self) -> u64 {
        self.inner.shared.flushes.load(Ordering::Relaxed)
    }

    /// Test hook: the flusher holds its next flush until [`Store::resume_flushes`]. Writes
    /// continue; `record_call` waits. Lets tests observe batching without timing.
    #[doc(hidden)]
    pub fn pause_flushes(&self) {
        *self
            .inner
            .shared
            .paused
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = true;
    }

    /// Test hook: releases [`Store::pause_flushes`].
    #[doc(hidden)]
    pub fn resume_flushes(&self) {
        self.inner.shared.resume();
    }

    /// The durability half of `record_call`: returns once a group flush that started after
    /// this call has completed, so every [`Store::write_call`] that returned before is durable.
    pub async fn wait_durable(&self) -> Result<(), StoreError> {
        self.group_flush().await
    }

    async fn group_flush(&self) -> Result<(), StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let queue = self
            .inner
            .flush_tx
            .as_ref()
            .ok_or_else(|| StoreError::Backend("the store is closing".into()))?;
        queue
            .send(tx)
            .map_err(|_| StoreError::Backend("the store flusher has stopped".into()))?;
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(StoreError::Backend(format!(
                "flush of data dir {} failed: {e}",
                self.inner.data_dir.display()
            ))),
            Err(_) => Err(StoreError::Backend("the store flusher has stopped".into())),
        }
    }

    /// A synchronous fsync, for the rare writes outside `record_call`.
    pub fn flush_now(&self) -> Result<(), StoreError> {
        self.inner.db.flush().map(|_| ()).map_err(|e| {
            StoreError::Backend(format!(
                "flush of data dir {} failed: {e}",
                self.inner.data_dir.display()
            ))
        })
    }
}

// ---- keys and codecs -----------------------------------------------------------------------

const META_REV: &[u8] = b"rev";
const META_SEQ: &[u8] = b"seq";

fn check_attempt_id(id: &str) -> Result<(), StoreError> {
    if id.is_empty() || id.contains('\0') {
        return Err(StoreError::Invalid(format!(
            "attempt id {id:?} must be non-empty and contain no NUL"
        )));
    }
    Ok(())
}

fn check_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() || key.contains('\0') {
        return Err(StoreError::Invalid(format!(
            "revision key {key:?} must be non-empty and contain no NUL"
        )));
    }
    Ok(())
}

fn revision_prefix(key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 9);
    k.extend_from_slice(key.as_bytes());
    k.push(b'/');
    k
}

fn revision_key(key: &str, n: u64) -> Vec<u8> {
    let mut k = revision_prefix(key);
    k.extend_from_slice(&n.to_be_bytes());
    k
}

fn attempt_prefix(attempt_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(attempt_id.len() + 9);
    k.extend_from_slice(attempt_id.as_bytes());
    k.push(0);
    k
}

fn event_key(attempt_id: &str, seq: u64) -> Vec<u8> {
    let mut k = attempt_prefix(attempt_id);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn state_key(attempt_id: &str, integration: &str) -> Vec<u8> {
    let mut k = attempt_prefix(attempt_id);
    k.extend_from_slice(integration.as_bytes());
    k
}

fn meta_key(kind: &[u8], name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(kind.len() + 1 + name.len());
    k.extend_from_slice(kind);
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k
}

fn decode_u64(bytes: &[u8], what: &str) -> Result<u64, StoreError> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| StoreError::Corrupt {
        key: what.to_string(),
        message: format!("expected an 8-byte number, found {} bytes", bytes.len()),
    })?;
    Ok(u64::from_be_bytes(arr))
}

fn encode_json<T: Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(v).map_err(|e| StoreError::Backend(format!("cannot encode a record: {e}")))
}

fn decode_json<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        key: what.to_string(),
        message: e.to_string(),
    })
}

fn tx_error(e: TransactionError<StoreError>) -> StoreError {
    match e {
        TransactionError::Abort(e) => e,
        TransactionError::Storage(e) => StoreError::Backend(e.to_string()),
    }
}

fn io_message(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => format!("{e} (is the directory writable?)"),
        std::io::ErrorKind::ReadOnlyFilesystem => format!("{e} (the data dir must be writable)"),
        _ => e.to_string(),
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// The current time as RFC 3339 UTC with milliseconds (`2026-01-02T03:04:05.678Z`).
pub fn now_rfc3339() -> String {
    chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_keys_sort_by_sequence_within_an_attempt() {
        let mut keys: Vec<Vec<u8>> = (1..=600).rev().map(|n| event_key("a1", n)).collect();
        keys.push(event_key("a10", 1));
        keys.sort();
        let prefix = attempt_prefix("a1");
        let seqs: Vec<u64> = keys
            .iter()
            .filter(|k| k.starts_with(&prefix))
            .map(|k| decode_u64(&k[prefix.len()..], "t").unwrap())
            .collect();
        assert_eq!(seqs, (1..=600).collect::<Vec<_>>());
    }

    #[test]
    fn attempt_prefix_does_not_cover_a_longer_id() {
        assert!(!event_key("a10", 1).starts_with(&attempt_prefix("a1")));
        assert!(!state_key("a10", "crm").starts_with(&attempt_prefix("a1")));
    }

    #[test]
    fn revision_keys_sort_numerically() {
        assert!(revision_key("crm/op", 255) < revision_key("crm/op", 256));
        assert!(revision_key("crm/op", 9) < revision_key("crm/op", 10));
        assert_eq!(revision_key("crm/op", 1).len(), "crm/op/".len() + 8);
    }

    #[test]
    fn decode_u64_rejects_a_wrong_length() {
        assert!(matches!(
            decode_u64(b"abc", "x"),
            Err(StoreError::Corrupt { .. })
        ));
        assert_eq!(decode_u64(&7u64.to_be_bytes(), "x").unwrap(), 7);
    }

    #[test]
    fn ids_with_nul_are_rejected() {
        assert!(check_attempt_id("a\0b").is_err());
        assert!(check_attempt_id("").is_err());
        assert!(check_key("crm\0op").is_err());
        assert!(check_attempt_id("att_1").is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn open_creates_private_dirs() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data").join("dir");
        let store = Store::open(&dir).unwrap();
        for d in [dir.clone(), dir.join(SLED_DIR)] {
            let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.display());
        }
        assert_eq!(store.data_dir(), dir.as_path());
    }

    #[test]
    fn a_second_open_of_the_same_dir_is_locked_and_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let _first = Store::open(tmp.path()).unwrap();
        let err = Store::open(tmp.path())
            .err()
            .expect("second open must fail");
        assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&tmp.path().display().to_string()), "{msg}");
        assert!(
            msg.contains("/_understudy/api/attempts/{id}/evidence"),
            "{msg}"
        );
    }

    #[test]
    fn open_existing_does_not_create_a_missing_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("nope");
        let err = Store::open_existing(&dir).err().unwrap();
        assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
        assert!(err.to_string().contains("nope"));
        assert!(!dir.exists());
    }

    #[test]
    fn dropping_the_store_releases_the_lock() {
        let tmp = tempfile::tempdir().unwrap();
        for _ in 0..3 {
            let s = Store::open(tmp.path()).unwrap();
            drop(s);
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = now_rfc3339();
        assert!(chrono::DateTime::parse_from_rfc3339(&t).is_ok(), "{t}");
        assert!(t.ends_with('Z'), "{t}");
    }
}
