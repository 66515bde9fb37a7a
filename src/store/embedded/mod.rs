//! The embedded backend: one sled database, the per-attempt evidence files ([`super::events`])
//! and the write-ahead journal ([`super::journal`]) in the data dir — the layout, order and
//! durability rules of the store's module doc. Methods here trust their arguments: the
//! facade ([`super::Store`]) checks ids and depths before it calls them.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use serde::Serialize;
use serde_json::{Map, Value};
use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};

use super::events::{self, Lane, Lanes};
use super::journal::{
    self, answer, flusher_loop, put_op, Journal, Pending, TREE_EVENTS, TREE_META, TREE_STATE,
};
use super::keys::{
    attempt_prefix, decode_u64, event_key, meta_key, revision_key, revision_prefix, state_key,
    META_REV, META_SEQ,
};
use super::{io_message, lock, CallRecord, EncodedResult, StoreError};
use crate::records::{
    AgentEvent, AttemptRecord, EvidenceEntry, Pin, RevisionHead, RevisionRecord, ToolEvent,
};
use crate::util::time::now_rfc3339;

mod calls;

/// Page cache of the sled database (sled's default is 1 GB). Evidence is read back rarely
/// (verdicts, the evidence endpoint), so a small cache keeps a long run's memory flat.
const CACHE_CAPACITY: u64 = 16 * 1024 * 1024;
/// Sub-directory of the data dir that holds the sled database.
pub(super) const SLED_DIR: &str = "sled";
/// Sub-directory of the data dir that holds one evidence file per attempt.
pub(super) const EVENTS_DIR: &str = "events";
/// `<data_dir>/open`: created (durably) when the store opens, removed after the final
/// checkpoint of a clean close. Found at open, it says the last process holding the store
/// died without closing it (`Store::open` then interrupts its open `attempt`-durability
/// attempts).
pub(super) const OPEN_MARKER: &str = "open";
/// The open marker renamed when a store failure's mark could not be written
/// ([`super::Store::store_failure_unrecorded`]): the next open interrupts every open attempt.
pub(super) const UNRECORDED_FAILURE_MARKER: &str = "open-store-failure";

/// The open data dir: sled's trees, the journal (which holds the lanes) and its flusher.
pub(super) struct Embedded {
    data_dir: PathBuf,
    revisions: sled::Tree,
    attempts: sled::Tree,
    tokens: sled::Tree,
    state: sled::Tree,
    events: sled::Tree,
    meta: sled::Tree,
    pub(super) revision_sets: sled::Tree,
    pub(super) journal: Arc<Journal>,
    flusher: Option<JoinHandle<()>>,
    /// [`OPEN_MARKER`] was there at open: the previous holder did not close the store.
    pub(super) unclean: bool,
    /// [`UNRECORDED_FAILURE_MARKER`] was there at open.
    pub(super) unrecorded_failure: bool,
}

impl Drop for Embedded {
    fn drop(&mut self) {
        // Closing ends the flusher once it has answered every queued waiter; the final
        // checkpoint leaves sled durable and the journal empty; joining the thread and dropping
        // the journal release their handles on the database (and so sled's file lock).
        lock(&self.journal.pending).closed = true;
        self.journal.wake.notify_all();
        #[cfg(any(test, feature = "test-hooks"))]
        self.journal.resume();
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
        let (result, waiters) = self.journal.commit(true);
        answer(waiters, &result);
        match result {
            // Everything is durable: the next open is a clean one.
            Ok(()) => {
                let _ = std::fs::remove_file(self.data_dir.join(OPEN_MARKER));
            }
            Err(e) => tracing::error!("closing the store in {}: {e}", self.data_dir.display()),
        }
    }
}

impl From<sled::Error> for StoreError {
    fn from(e: sled::Error) -> Self {
        StoreError::Backend(e.to_string())
    }
}

impl Embedded {
    /// Opens the store in `data_dir`; with `create`, creates the directories (mode 0700)
    /// when missing, else [`StoreError::NotFound`] when `data_dir` holds no store.
    pub(super) fn open(data_dir: &Path, create: bool) -> Result<Embedded, StoreError> {
        if create {
            create_private_dir(&data_dir.join(SLED_DIR)).map_err(|e| StoreError::Open {
                path: data_dir.to_path_buf(),
                message: io_message(&e),
            })?;
        } else if !data_dir.join(SLED_DIR).join("conf").is_file() {
            return Err(StoreError::NotFound {
                path: data_dir.to_path_buf(),
            });
        }
        Self::open_sled(data_dir)
    }

    fn open_sled(data_dir: &Path) -> Result<Embedded, StoreError> {
        let open_err = |e: sled::Error| {
            let message = match &e {
                sled::Error::Io(io) => io_message(io),
                other => other.to_string(),
            };
            if super::is_locked(&e) {
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
        let db = super::open_sled_retrying(&config).map_err(open_err)?;
        let tree = |name: &str| db.open_tree(name).map_err(open_err);
        let (events, state, meta) = (tree("events")?, tree("state")?, tree("meta")?);
        let events_dir = data_dir.join(EVENTS_DIR);
        create_private_dir(&events_dir).map_err(|e| StoreError::Open {
            path: data_dir.to_path_buf(),
            message: io_message(&e),
        })?;
        let limit = events::open_files_limit();
        let max_open = events::lane_cap(limit);
        tracing::info!(
            open_files_limit = %limit.map_or("unlimited".to_string(), |l| l.to_string()),
            evidence_files_open_max = max_open,
            "open files (RLIMIT_NOFILE soft limit)"
        );
        let file = journal::open(data_dir, &db, &events_dir, max_open, [&state, &meta]).map_err(
            |message| StoreError::Open {
                path: data_dir.to_path_buf(),
                message,
            },
        )?;
        let unrecorded_failure = data_dir.join(UNRECORDED_FAILURE_MARKER).exists();
        let unclean = mark_open(data_dir).map_err(|e| StoreError::Open {
            path: data_dir.to_path_buf(),
            message: format!("cannot write {}: {}", OPEN_MARKER, io_message(&e)),
        })?;
        let journal = Arc::new(Journal {
            db: db.clone(),
            lanes: Lanes::new(events_dir, max_open, save_counter(meta.clone())),
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            io: Mutex::new(file),
            flushes: AtomicU64::new(0),
            #[cfg(any(test, feature = "test-hooks"))]
            paused: Mutex::new(false),
            #[cfg(any(test, feature = "test-hooks"))]
            resumed: Condvar::new(),
        });
        let flusher = {
            let journal = journal.clone();
            std::thread::Builder::new()
                .name("understudy-store-flusher".into())
                .spawn(move || flusher_loop(journal))
                .map_err(|e| StoreError::Open {
                    path: data_dir.to_path_buf(),
                    message: format!("cannot start the flusher thread: {e}"),
                })?
        };
        Ok(Embedded {
            data_dir: data_dir.to_path_buf(),
            revisions: tree("revisions")?,
            attempts: tree("attempts")?,
            tokens: tree("tokens")?,
            state,
            events,
            meta,
            revision_sets: tree("revision_sets")?,
            journal,
            flusher: Some(flusher),
            unclean,
            unrecorded_failure,
        })
    }

    pub(super) fn data_dir(&self) -> &Path {
        &self.data_dir
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
        let latest_key = meta_key(META_REV, key);
        let saved_at = now_rfc3339();
        let (record, created) = (&self.revisions, &self.meta)
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

    pub(super) fn latest_revision(&self, key: &str) -> Result<Option<RevisionRecord>, StoreError> {
        self.latest_as(key)
    }

    pub(super) fn latest_revision_head(
        &self,
        key: &str,
    ) -> Result<Option<RevisionHead>, StoreError> {
        self.latest_as(key)
    }

    /// The stored record decoded as its head: the definition's other members are skipped.
    pub(super) fn revision_head(
        &self,
        key: &str,
        n: u64,
    ) -> Result<Option<RevisionHead>, StoreError> {
        self.revision_as(key, n)
    }

    /// The latest revision of `key` decoded as `T` (the whole record or its head).
    fn latest_as<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        match self.meta.get(meta_key(META_REV, key))? {
            Some(v) => self.revision_as(key, decode_u64(&v, key)?),
            None => Ok(None),
        }
    }

    /// Revision `n` of `key` decoded as `T` (the whole record or its head).
    fn revision_as<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
        n: u64,
    ) -> Result<Option<T>, StoreError> {
        self.revisions
            .get(revision_key(key, n))?
            .map(|v| decode_json(&v, &format!("revision {key}#{n}")))
            .transpose()
    }

    pub(super) fn latest_revision_numbers(&self) -> Result<HashMap<String, u64>, StoreError> {
        let prefix = meta_key(META_REV, "");
        let mut out = HashMap::new();
        for item in self.meta.scan_prefix(&prefix) {
            let (k, v) = item?;
            let key = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
            let n = decode_u64(&v, &key)?;
            out.insert(key, n);
        }
        Ok(out)
    }

    pub(super) fn revision(&self, key: &str, n: u64) -> Result<Option<RevisionRecord>, StoreError> {
        self.revision_as(key, n)
    }

    pub(super) fn revisions(&self, key: &str) -> Result<Vec<RevisionRecord>, StoreError> {
        let prefix = revision_prefix(key);
        let mut out = Vec::new();
        for item in self.revisions.scan_prefix(&prefix) {
            let (k, v) = item?;
            // `<key>/` followed by exactly the 8 bytes of the number.
            if k.len() != prefix.len() + 8 {
                continue;
            }
            out.push(decode_json(&v, &format!("revision {key}"))?);
        }
        Ok(out)
    }

    // ---- revision sets -------------------------------------------------------------------

    /// Stores a revision set under `id` unless it is there (sets are named by their content);
    /// durable with the next flush (the `put_attempt` that names it).
    pub(super) fn put_revision_set(
        &self,
        id: &str,
        pins: &BTreeMap<String, Pin>,
    ) -> Result<(), StoreError> {
        if !self.revision_sets.contains_key(id.as_bytes())? {
            self.revision_sets
                .insert(id.as_bytes(), encode_json(pins)?)?;
        }
        Ok(())
    }

    pub(super) fn revision_set(
        &self,
        id: &str,
    ) -> Result<Option<BTreeMap<String, Pin>>, StoreError> {
        self.revision_sets
            .get(id.as_bytes())?
            .map(|v| decode_json(&v, &format!("revision set {id}")))
            .transpose()
    }

    // ---- attempts ------------------------------------------------------------------------

    pub(super) fn put_attempt(&self, a: &AttemptRecord) -> Result<(), StoreError> {
        let bytes = encode_json(a)?;
        (&self.attempts, &self.tokens)
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
                let mut merged = None;
                if let Some(old) = attempts.get(a.attempt_id.as_bytes())? {
                    let old: AttemptRecord =
                        decode_json(&old, &format!("attempt {}", a.attempt_id))
                            .map_err(ConflictableTransactionError::Abort)?;
                    if old.token_hash != a.token_hash {
                        tokens.remove(old.token_hash.as_bytes())?;
                    }
                    // A store failure's durable mark is never lowered by a record written
                    // from a copy taken before it (`mark_store_failure`).
                    if old.store_failures > a.store_failures {
                        let mut m = a.clone();
                        m.store_failures = old.store_failures;
                        merged =
                            Some(encode_json(&m).map_err(ConflictableTransactionError::Abort)?);
                    }
                }
                let bytes = merged.as_deref().unwrap_or(bytes.as_slice());
                attempts.insert(a.attempt_id.as_bytes(), bytes)?;
                tokens.insert(a.token_hash.as_bytes(), a.attempt_id.as_bytes())?;
                Ok(())
            })
            .map_err(tx_error)?;
        self.flush_now()
    }

    /// [`super::Store::mark_store_failure`]: the record's counter, updated in sled and made
    /// durable by sled's own flush (the journal, whose write failed, is not involved).
    pub(super) fn mark_store_failure(&self, attempt_id: &str) -> Result<u64, StoreError> {
        let what = format!("attempt {attempt_id}");
        let mut count = 0;
        let mut bad = None;
        self.attempts
            .fetch_and_update(attempt_id.as_bytes(), |old| {
                let old = old?;
                match decode_json::<AttemptRecord>(old, &what) {
                    Ok(mut a) => {
                        a.store_failures += 1;
                        count = a.store_failures;
                        match encode_json(&a) {
                            Ok(b) => Some(b),
                            Err(e) => {
                                bad = Some(e);
                                Some(old.to_vec())
                            }
                        }
                    }
                    Err(e) => {
                        bad = Some(e);
                        Some(old.to_vec())
                    }
                }
            })?
            .ok_or_else(|| StoreError::Invalid(format!("no attempt {attempt_id}")))?;
        if let Some(e) = bad {
            return Err(e);
        }
        self.journal.db.flush()?;
        Ok(count)
    }

    /// [`super::Store::store_failure_unrecorded`]: the open marker becomes
    /// [`UNRECORDED_FAILURE_MARKER`] (a rename: no data block is needed).
    pub(super) fn store_failure_unrecorded(&self) -> Result<(), StoreError> {
        let to = self.data_dir.join(UNRECORDED_FAILURE_MARKER);
        let from = self.data_dir.join(OPEN_MARKER);
        let io = |e: std::io::Error| StoreError::Backend(io_message(&e));
        if !to.exists() {
            std::fs::rename(&from, &to).map_err(io)?;
        }
        std::fs::File::open(&self.data_dir)
            .and_then(|d| d.sync_all())
            .map_err(io)
    }

    /// After the attempts were interrupted at open: the sign is consumed.
    pub(super) fn clear_unrecorded_failure(&self) -> Result<(), String> {
        let p = self.data_dir.join(UNRECORDED_FAILURE_MARKER);
        std::fs::remove_file(&p)
            .and_then(|()| std::fs::File::open(&self.data_dir)?.sync_all())
            .map_err(|e| format!("cannot remove {}: {}", p.display(), io_message(&e)))
    }

    pub(super) fn attempt(&self, id: &str) -> Result<Option<AttemptRecord>, StoreError> {
        self.attempts
            .get(id.as_bytes())?
            .map(|v| decode_json(&v, &format!("attempt {id}")))
            .transpose()
    }

    pub(super) fn attempts(&self) -> Result<Vec<AttemptRecord>, StoreError> {
        let mut out = Vec::new();
        for item in self.attempts.iter() {
            let (k, v) = item?;
            out.push(decode_json(
                &v,
                &format!("attempt {}", String::from_utf8_lossy(&k)),
            )?);
        }
        Ok(out)
    }

    pub(super) fn attempt_by_token_hash(
        &self,
        token_hash: &str,
    ) -> Result<Option<AttemptRecord>, StoreError> {
        match self.tokens.get(token_hash.as_bytes())? {
            Some(id) => self.attempt(&String::from_utf8_lossy(&id)),
            None => Ok(None),
        }
    }

    // ---- state ---------------------------------------------------------------------------

    pub(super) fn state(
        &self,
        attempt_id: &str,
    ) -> Result<BTreeMap<String, Map<String, Value>>, StoreError> {
        let prefix = attempt_prefix(attempt_id);
        let mut out = BTreeMap::new();
        for item in self.state.scan_prefix(&prefix) {
            let (k, v) = item?;
            let integration = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
            let map = decode_json(&v, &format!("state {attempt_id}/{integration}"))?;
            out.insert(integration, map);
        }
        Ok(out)
    }

    pub(super) fn put_state(
        &self,
        attempt_id: &str,
        integration: &str,
        state: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        self.put_state_unflushed(attempt_id, integration, state)?;
        self.flush_now()
    }

    /// [`Embedded::put_state`] without the flush: durable with the next one.
    pub(super) fn put_state_unflushed(
        &self,
        attempt_id: &str,
        integration: &str,
        state: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        self.state
            .insert(state_key(attempt_id, integration), encode_json(state)?)?;
        Ok(())
    }

    pub(super) fn clear_state(&self, attempt_id: &str) -> Result<usize, StoreError> {
        let prefix = attempt_prefix(attempt_id);
        let keys: Vec<sled::IVec> = self
            .state
            .scan_prefix(&prefix)
            .keys()
            .collect::<Result<_, _>>()?;
        for k in keys {
            self.state.remove(k)?;
        }
        self.flush_now()?;
        Ok(self.state.scan_prefix(&prefix).keys().count())
    }
}

/// Creates [`OPEN_MARKER`] (file and directory entry fsynced) and returns whether it was
/// already there.
fn mark_open(data_dir: &Path) -> std::io::Result<bool> {
    let path = data_dir.join(OPEN_MARKER);
    let found = path.exists();
    if !found {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        opts.open(&path)?.sync_all()?;
        std::fs::File::open(data_dir)?.sync_all()?;
    }
    Ok(found)
}

/// Saves an attempt's counter (its last sequence) into the `meta` tree when its lane is made
/// clean ([`super::events::Lanes::clean`]): calls do not write it, their journal frames carry
/// it until then.
fn save_counter(meta: sled::Tree) -> super::events::SaveCounter {
    Box::new(move |attempt_id, last| {
        meta.insert(meta_key(META_SEQ, attempt_id), &last.to_be_bytes())
            .map(|_| ())
            .map_err(|e| format!("cannot save the sequence counter of {attempt_id}: {e}"))
    })
}

/// How an agent-side event is framed in an evidence file (a call's frame is the bare
/// [`ToolEvent`], which has no `agent_event` member): `{"agent_event":{…}}`.
#[derive(Serialize)]
struct AgentFrame<'a> {
    agent_event: &'a AgentEvent,
}

#[derive(serde::Deserialize)]
struct AgentFrameOwned {
    agent_event: AgentEvent,
}

/// The bytes an [`AgentFrame`] starts with (serde_json writes no whitespace).
const AGENT_FRAME_PREFIX: &[u8] = b"{\"agent_event\":";

pub(super) fn encode_json<T: Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(v).map_err(|e| StoreError::Backend(format!("cannot encode a record: {e}")))
}

pub(super) fn decode_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &str,
) -> Result<T, StoreError> {
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

#[cfg(unix)]
pub(super) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
pub(super) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}
