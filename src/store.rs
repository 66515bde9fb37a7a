//! The store: sled trees, evidence files, the journal, keys and codecs — the only module that
//! touches sled or the data dir (SPEC 12).
//!
//! Nothing sled-specific leaks out of this module: callers see [`Store`], the record types
//! and [`StoreError`], so a second backend (PostgreSQL with per-attempt row locks is planned)
//! can sit behind the same methods.
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
//! | `attempts` | `<attempt_id>` | JSON [`AttemptRecord`] |
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
//! event JSON`, appended by the attempt's lane, read whole by [`Store::evidence`] (which stops
//! at a torn tail), so memory stays flat however long a run is.
//!
//! # Atomicity and order
//!
//! - [`Store::sync_revision`] reads the latest number and appends `n + 1` in one transaction
//!   over `revisions` and `meta`: two concurrent syncs can never produce the same number, and
//!   a revision is never rewritten.
//! - [`Store::write_call`] assigns the attempt's next sequence and writes the event (to the
//!   attempt's evidence file), the integration's new state and the sequence counter (sled)
//!   under that attempt's **lane** (a mutex per attempt holding its file, never one across
//!   attempts): sequences are contiguous (1, 2, 3…) per attempt,
//!   and the state left behind is the one of the highest sequence. The event is written before
//!   the counter, so a reader that reads the counter first never sees a counter ahead of its
//!   events (`evidence` reports exactly that as missing evidence).
//!
//! # Durability: a write-ahead journal with group commit
//!
//! Evidence must be durable before a call is answered (SPEC 8, 12: an acknowledged call is
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
//! **Checkpoint.** When the journal passes [`JOURNAL_LIMIT`], and on every synchronous write
//! ([`Store::flush_now`]: revisions, attempts, `put_state`, `clear_state`) and at close, the
//! flusher fsyncs every evidence file written since the last checkpoint, makes sled durable
//! (`Db::flush`) and starts a new journal epoch (frames of older epochs no longer count):
//! every frame in the journal had reached its file and sled before, so nothing is lost.
//! [`Store::open`] replays the journal (events a file lacks are appended to it, state and
//! counters written to sled, in order), stops at the first torn or corrupt frame (a tail
//! that was never acknowledged — it is logged), checkpoints, and only then serves.
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

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};

use crate::evidence::ToolEvent;

/// Page cache of the sled database (sled's default is 1 GB). Evidence is read back rarely
/// (verdicts, the evidence endpoint), so a small cache keeps a long run's memory flat.
const CACHE_CAPACITY: u64 = 16 * 1024 * 1024;
/// Sub-directory of the data dir that holds the sled database.
const SLED_DIR: &str = "sled";
/// Sub-directory of the data dir that holds one evidence file per attempt.
const EVENTS_DIR: &str = "events";
/// Past this many open evidence files, idle ones are closed (see `Store::lane`).
const MAX_OPEN_LANES: usize = 256;
/// The write-ahead journal of calls, in the data dir.
const JOURNAL_FILE: &str = "journal";
/// Past this many bytes the flusher checkpoints (sled flush + a new journal epoch).
pub const JOURNAL_LIMIT: u64 = 16 * 1024 * 1024;
/// The journal grows in steps of this many bytes of zeros.
const JOURNAL_CHUNK: u64 = 4 * 1024 * 1024;
/// `understudy journal v1` magic, then the epoch (u64 LE).
const JOURNAL_HEADER: u64 = 16;
const JOURNAL_MAGIC: &[u8; 8] = b"USJRNL01";

/// The deepest JSON value (arguments, result, error, state) a call may store. Records are
/// read back with serde_json, which refuses more than 128 levels; an evidence export wraps
/// an event's values in three more. [`Store::write_call`] refuses deeper values, so an
/// acknowledged call can never make an attempt's evidence unreadable.
pub const MAX_STORED_DEPTH: usize = 100;

/// Whether `v` nests more than `limit` arrays/objects (stops at the first path that does).
pub fn deeper_than(v: &Value, limit: usize) -> bool {
    match v {
        Value::Array(a) => limit == 0 || a.iter().any(|x| deeper_than(x, limit - 1)),
        Value::Object(m) => limit == 0 || m.values().any(|x| deeper_than(x, limit - 1)),
        _ => false,
    }
}

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

/// What `write_call` writes: the event (its `sequence` is assigned by the store) and, when
/// the call changed it, the integration's whole new state.
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
    revisions: sled::Tree,
    attempts: sled::Tree,
    tokens: sled::Tree,
    state: sled::Tree,
    events: sled::Tree,
    meta: sled::Tree,
    journal: Arc<Journal>,
    flusher: Option<JoinHandle<()>>,
}

/// A caller waiting for a commit that covers its write.
type Waiter = tokio::sync::oneshot::Sender<Result<(), String>>;

/// The journal and its group commit, shared with the flusher thread.
struct Journal {
    db: sled::Db,
    /// `<data_dir>/events`: one append-only file of evidence per attempt.
    events_dir: PathBuf,
    /// Per attempt: its lane (last sequence and evidence file), behind its own mutex.
    lanes: RwLock<HashMap<String, Arc<Mutex<Lane>>>>,
    /// Frames and waiters not yet taken by a commit.
    pending: Mutex<Pending>,
    /// Wakes the flusher when a waiter arrives or the store closes.
    wake: Condvar,
    /// The file; held through a whole commit, so commits never interleave.
    io: Mutex<JournalFile>,
    flushes: AtomicU64,
    /// Test hook: while `true` the flusher waits before committing (see `pause_flushes`).
    paused: Mutex<bool>,
    resumed: Condvar,
}

/// One attempt's writer: the last sequence written and its evidence file.
struct Lane {
    last: u64,
    file: File,
    /// Where the next event goes: the end of the file's whole frames.
    len: u64,
    /// Written since the last checkpoint (the checkpoint fsyncs it).
    dirty: bool,
}

#[derive(Default)]
struct Pending {
    frames: Vec<u8>,
    waiters: Vec<Waiter>,
    closed: bool,
}

struct JournalFile {
    file: File,
    /// Frames carry the checksum of `epoch ++ payload`: frames of an earlier epoch (the
    /// journal is reused after each checkpoint) end the log instead of being replayed.
    epoch: u64,
    /// Where the next frame goes: the end of the committed frames.
    len: u64,
    /// The file's size: zeros past the last frame, written ahead (see `reserve`).
    capacity: u64,
    /// A failed write may have left bytes in `len..dirty`: zero them before the next one.
    dirty: u64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing ends the flusher once it has answered every queued waiter; the final
        // checkpoint leaves sled durable and the journal empty; joining the thread and dropping
        // the journal release their handles on the database (and so sled's file lock).
        lock(&self.journal.pending).closed = true;
        self.journal.wake.notify_all();
        self.journal.resume();
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
        let (result, waiters) = self.journal.commit(true);
        answer(waiters, &result);
        if let Err(e) = result {
            tracing::error!("closing the store in {}: {e}", self.data_dir.display());
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn answer(waiters: Vec<Waiter>, result: &Result<(), String>) {
    for w in waiters {
        // A waiter whose future was dropped (client gone) is simply skipped.
        let _ = w.send(result.clone());
    }
}

impl Journal {
    fn resume(&self) {
        *lock(&self.paused) = false;
        self.resumed.notify_all();
    }

    fn wait_while_paused(&self) {
        let mut p = lock(&self.paused);
        while *p {
            p = self.resumed.wait(p).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Queues one call's frame (before its caller can wait for it).
    fn push(&self, payload: &[u8]) {
        let mut p = lock(&self.pending);
        p.frames
            .extend_from_slice(&(payload.len() as u32).to_le_bytes());
        p.frames.extend_from_slice(&[0; 4]); // the checksum, filled in by the commit
        p.frames.extend_from_slice(payload);
    }

    fn enqueue(&self, w: Waiter) -> Result<(), StoreError> {
        let mut p = lock(&self.pending);
        if p.closed {
            return Err(StoreError::Backend("the store is closing".into()));
        }
        p.waiters.push(w);
        drop(p);
        self.wake.notify_one();
        Ok(())
    }

    /// One group commit: takes every pending frame and waiter, appends and fsyncs the frames;
    /// with `checkpoint` (or past [`JOURNAL_LIMIT`]) also makes sled durable and empties the
    /// journal. Returns the result the taken waiters must get.
    fn commit(&self, checkpoint: bool) -> (Result<(), String>, Vec<Waiter>) {
        let mut io = lock(&self.io);
        let (mut frames, waiters) = {
            let mut p = lock(&self.pending);
            (
                std::mem::take(&mut p.frames),
                std::mem::take(&mut p.waiters),
            )
        };
        let mut result = io.append(&mut frames);
        if result.is_err() {
            // The frames go back in front of the queue: a caller whose frame was in this batch
            // but whose waiter arrives later must not be told "durable" by a later commit
            // with nothing to write. The next commit retries them first, in order.
            let mut p = lock(&self.pending);
            frames.extend_from_slice(&p.frames);
            p.frames = frames;
        } else if checkpoint || io.len > JOURNAL_LIMIT {
            result = self
                .sync_event_files()
                .and_then(|()| self.db.flush().map(|_| ()).map_err(|e| e.to_string()))
                .and_then(|()| io.reset());
        }
        self.flushes.fetch_add(1, Ordering::Relaxed);
        (result, waiters)
    }
}

impl Journal {
    /// Makes every evidence file written since the last checkpoint durable (before the
    /// journal that also holds their events starts a new epoch).
    fn sync_event_files(&self) -> Result<(), String> {
        let lanes: Vec<Arc<Mutex<Lane>>> = self
            .lanes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for lane in lanes {
            let mut l = lock(&lane);
            if l.dirty {
                l.file
                    .sync_data()
                    .map_err(|e| format!("cannot sync an evidence file: {}", io_message(&e)))?;
                l.dirty = false;
            }
        }
        Ok(())
    }
}

impl JournalFile {
    /// Seals `frames` (queued as `length | 0000 | payload`) with this epoch's checksums,
    /// writes them at `len` and makes them durable with one `fdatasync`. The bytes land in
    /// space already written with zeros, so the fsync flushes data only, not the file's
    /// size or extents (on ext4 that is ~10x cheaper than an appending write).
    fn append(&mut self, frames: &mut [u8]) -> Result<(), String> {
        use std::os::unix::fs::FileExt;
        if self.dirty > self.len {
            let zeros = vec![0; (self.dirty - self.len) as usize];
            self.file
                .write_all_at(&zeros, self.len)
                .and_then(|()| self.file.sync_data())
                .map_err(|e| format!("cannot clear a failed journal write: {}", io_message(&e)))?;
            self.dirty = 0;
        }
        if frames.is_empty() {
            return Ok(());
        }
        seal_frames(frames, self.epoch);
        let end = self.len + frames.len() as u64;
        self.reserve(end)
            .map_err(|e| format!("cannot grow the journal: {}", io_message(&e)))?;
        self.dirty = end;
        self.file
            .write_all_at(frames, self.len)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| format!("cannot write the journal: {}", io_message(&e)))?;
        self.dirty = 0;
        self.len = end;
        Ok(())
    }

    /// Makes the file at least `end` bytes long, in [`JOURNAL_CHUNK`] steps of real zeros
    /// (not a sparse `set_len`, not `fallocate`: writing into those later changes extents
    /// and makes every fsync a metadata commit).
    fn reserve(&mut self, end: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        if end <= self.capacity {
            return Ok(());
        }
        let target = end.div_ceil(JOURNAL_CHUNK) * JOURNAL_CHUNK;
        let zeros = vec![0; (target - self.capacity) as usize];
        self.file.write_all_at(&zeros, self.capacity)?;
        self.file.sync_all()?;
        self.capacity = target;
        Ok(())
    }

    /// Starts a new epoch: every frame written so far stops counting (sled holds their
    /// writes durably by now), and the space is reused from the start.
    fn reset(&mut self) -> Result<(), String> {
        self.write_header(self.epoch + 1)
            .map_err(|e| format!("cannot reset the journal: {}", io_message(&e)))?;
        self.len = JOURNAL_HEADER;
        self.dirty = 0;
        Ok(())
    }

    fn write_header(&mut self, epoch: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut h = [0u8; JOURNAL_HEADER as usize];
        h[..8].copy_from_slice(JOURNAL_MAGIC);
        h[8..].copy_from_slice(&epoch.to_le_bytes());
        self.file.write_all_at(&h, 0)?;
        if self.capacity < JOURNAL_HEADER {
            self.capacity = JOURNAL_HEADER;
            self.file.sync_all()?;
        } else {
            self.file.sync_data()?;
        }
        self.epoch = epoch;
        Ok(())
    }
}

/// Fills in each frame's checksum: CRC-32 of `epoch` (LE) followed by the payload.
fn seal_frames(frames: &mut [u8], epoch: u64) {
    let mut at = 0;
    while at + 8 <= frames.len() {
        let n = u32::from_le_bytes(frames[at..at + 4].try_into().unwrap()) as usize;
        let crc = frame_crc(epoch, &frames[at + 8..at + 8 + n]);
        frames[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        at += 8 + n;
    }
}

fn frame_crc(epoch: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&epoch.to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// The flusher thread: one commit per batch of waiters (see the module doc).
fn flusher_loop(journal: Arc<Journal>) {
    loop {
        {
            let mut p = lock(&journal.pending);
            while p.waiters.is_empty() && !p.closed {
                p = journal.wake.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            if p.waiters.is_empty() {
                return; // closed, nobody waiting
            }
        }
        journal.wait_while_paused();
        let (result, waiters) = journal.commit(false);
        answer(waiters, &result);
    }
}

// ---- journal frames ------------------------------------------------------------------------

const TREE_EVENTS: u8 = 1;
const TREE_STATE: u8 = 2;
const TREE_META: u8 = 3;

fn put_op(payload: &mut Vec<u8>, tree: u8, key: &[u8], value: &[u8]) {
    payload.push(tree);
    payload.extend_from_slice(&(key.len() as u32).to_le_bytes());
    payload.extend_from_slice(key);
    payload.extend_from_slice(&(value.len() as u32).to_le_bytes());
    payload.extend_from_slice(value);
}

/// One sled write of a journal frame: tree, key, value.
type Op<'a> = (u8, &'a [u8], &'a [u8]);

/// The sled writes of one frame's payload; `None` if it does not parse.
fn parse_ops(mut p: &[u8]) -> Option<Vec<Op<'_>>> {
    fn take<'a>(p: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if p.len() < n {
            return None;
        }
        let (a, b) = p.split_at(n);
        *p = b;
        Some(a)
    }
    fn len(p: &mut &[u8]) -> Option<usize> {
        Some(u32::from_le_bytes(take(p, 4)?.try_into().ok()?) as usize)
    }
    let mut ops = Vec::new();
    while !p.is_empty() {
        let tree = take(&mut p, 1)?[0];
        let n = len(&mut p)?;
        let key = take(&mut p, n)?;
        let n = len(&mut p)?;
        let value = take(&mut p, n)?;
        ops.push((tree, key, value));
    }
    Some(ops)
}

/// Splits the frames area of a journal (the bytes after the header) into its valid frames of
/// `epoch`; the second value is the offset where the valid prefix ends. The log ends at the
/// first frame that is empty (zeros), torn, or fails its checksum (a torn write, or a frame
/// left from an earlier epoch).
fn parse_frames(bytes: &[u8], epoch: u64) -> (Vec<&[u8]>, usize) {
    whole_frames(bytes, |p, crc| {
        frame_crc(epoch, p) == crc && parse_ops(p).is_some()
    })
}

/// The frames `length u32 LE | crc32 u32 LE | payload` at the start of `bytes` — the format of
/// the journal and of the evidence files — up to the first one that is torn, empty, or that
/// `valid(payload, crc)` refuses; and the offset where they end.
fn whole_frames(bytes: &[u8], valid: impl Fn(&[u8], u32) -> bool) -> (Vec<&[u8]>, usize) {
    let mut frames = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= 8 {
        let n = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
        let Some(payload) = bytes.get(at + 8..at + 8 + n) else {
            break;
        };
        if n == 0 || !valid(payload, crc) {
            break;
        }
        frames.push(payload);
        at += 8 + n;
    }
    (frames, at)
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
        let (events, state, meta) = (tree("events")?, tree("state")?, tree("meta")?);
        let events_dir = data_dir.join(EVENTS_DIR);
        create_private_dir(&events_dir).map_err(|e| StoreError::Open {
            path: data_dir.to_path_buf(),
            message: io_message(&e),
        })?;
        let file =
            open_journal(data_dir, &db, &events_dir, [&state, &meta]).map_err(|message| {
                StoreError::Open {
                    path: data_dir.to_path_buf(),
                    message,
                }
            })?;
        let journal = Arc::new(Journal {
            db: db.clone(),
            events_dir,
            lanes: RwLock::new(HashMap::new()),
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            io: Mutex::new(file),
            flushes: AtomicU64::new(0),
            paused: Mutex::new(false),
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
        Ok(Store {
            inner: Arc::new(Inner {
                data_dir: data_dir.to_path_buf(),
                revisions: tree("revisions")?,
                attempts: tree("attempts")?,
                tokens: tree("tokens")?,
                state,
                events,
                meta,
                journal,
                flusher: Some(flusher),
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

    /// Records one call: [`Store::write_call`], then [`Store::wait_durable`]. Returns the
    /// sequence once the call's evidence is durable.
    pub async fn record_call(&self, attempt_id: &str, rec: CallRecord) -> Result<u64, StoreError> {
        let seq = self.write_call(attempt_id, rec)?;
        self.wait_durable().await?;
        Ok(seq)
    }

    /// The write half of `record_call`: assigns the attempt's next sequence and writes the
    /// event and the state (visible to readers at once) and queues their journal frame, but
    /// the call is NOT yet durable. A caller that answers must first await
    /// [`Store::wait_durable`], whose commit covers every write that returned before it.
    /// (Lets the server release an attempt's state lock before the fsync, so calls to one
    /// attempt share fsyncs too.)
    pub fn write_call(&self, attempt_id: &str, mut rec: CallRecord) -> Result<u64, StoreError> {
        check_attempt_id(attempt_id)?;
        let e = &rec.event;
        let state = rec.state.as_ref().map(|(_, m)| m);
        for (what, v) in [
            ("arguments", Some(&e.arguments)),
            ("result", Some(&e.result)),
        ]
        .into_iter()
        .chain([("error", e.error.as_ref())])
        {
            if v.is_some_and(|v| deeper_than(v, MAX_STORED_DEPTH)) {
                return Err(StoreError::Invalid(format!(
                    "the call's {what} nests more than {MAX_STORED_DEPTH} levels: it could not be read back, so it is not stored"
                )));
            }
        }
        if state.is_some_and(|m| m.values().any(|v| deeper_than(v, MAX_STORED_DEPTH - 1))) {
            return Err(StoreError::Invalid(format!(
                "the call's new state nests more than {MAX_STORED_DEPTH} levels: it could not be read back, so it is not stored"
            )));
        }
        let lane = self.lane(attempt_id)?;
        let mut lane = lock(&lane);
        let seq = lane.last + 1;
        rec.event.sequence = seq;
        let event = encode_json(&rec.event)?;
        let state = match &rec.state {
            Some((integration, map)) => {
                Some((state_key(attempt_id, integration), encode_json(map)?))
            }
            None => None,
        };
        let (event_key, seq_key) = (event_key(attempt_id, seq), meta_key(META_SEQ, attempt_id));
        let inner = &self.inner;
        // Event before counter (see the module doc); the journal frame lists the same writes.
        let mut payload =
            Vec::with_capacity(event.len() + 64 + state.as_ref().map_or(0, |s| s.1.len()));
        put_op(&mut payload, TREE_EVENTS, &event_key, &event);
        append_event(&mut lane, seq, &event).map_err(|e| {
            StoreError::Backend(format!(
                "cannot write the evidence of attempt {attempt_id}: {}",
                io_message(&e)
            ))
        })?;
        // The sequence is spent once its event is in the file, whatever fails next.
        lane.last = seq;
        if let Some((k, v)) = state {
            put_op(&mut payload, TREE_STATE, &k, &v);
            inner.state.insert(k, v)?;
        }
        put_op(&mut payload, TREE_META, &seq_key, &seq.to_be_bytes());
        inner.meta.insert(seq_key, &seq.to_be_bytes())?;
        inner.journal.push(&payload);
        Ok(seq)
    }

    /// The attempt's lane, created on first use for an attempt that exists: its last
    /// sequence (the store's counter) and its evidence file, opened for appending after its
    /// last whole frame.
    fn lane(&self, attempt_id: &str) -> Result<Arc<Mutex<Lane>>, StoreError> {
        let inner = &self.inner;
        let j = &inner.journal;
        if let Some(l) = j
            .lanes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(attempt_id)
        {
            return Ok(l.clone());
        }
        if !inner.attempts.contains_key(attempt_id.as_bytes())? {
            return Err(StoreError::Invalid(format!(
                "cannot record a call for unknown attempt {attempt_id}"
            )));
        }
        let mut lanes = j.lanes.write().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = lanes.get(attempt_id) {
            return Ok(l.clone());
        }
        let last = match inner.meta.get(meta_key(META_SEQ, attempt_id))? {
            Some(v) => decode_u64(&v, attempt_id)?,
            None => 0,
        };
        let (file, len, _) =
            open_event_file(&j.events_dir, attempt_id, Some(last)).map_err(|e| {
                StoreError::Backend(format!(
                    "cannot open the evidence file of attempt {attempt_id}: {}",
                    io_message(&e)
                ))
            })?;
        let l = Arc::new(Mutex::new(Lane {
            last,
            file,
            len,
            dirty: false,
        }));
        if lanes.len() >= MAX_OPEN_LANES {
            // Close idle lanes (nobody holds them, nothing unsynced): one file descriptor per
            // attempt ever written would run out in a long-lived server. A closed lane is
            // reopened from its file and the counter on its next call.
            lanes.retain(|_, l| Arc::strong_count(l) > 1 || l.try_lock().map_or(true, |g| g.dirty));
        }
        lanes.insert(attempt_id.to_string(), l.clone());
        Ok(l)
    }

    /// Test hook: removes event `seq` of a closed attempt from its evidence file, as a lost
    /// write would (the verdict must then fail). Not for serving code.
    #[doc(hidden)]
    pub fn remove_event_for_test(&self, attempt_id: &str, seq: u64) -> std::io::Result<bool> {
        let path = event_file_path(&self.inner.journal.events_dir, attempt_id);
        let bytes = std::fs::read(&path)?;
        let (frames, _) = parse_event_frames(&bytes);
        let mut out = Vec::new();
        let mut removed = false;
        let mut at = 0;
        for (s, json) in frames {
            let len = 16 + json.len();
            if s == seq {
                removed = true;
            } else {
                out.extend_from_slice(&bytes[at..at + len]);
            }
            at += len;
        }
        std::fs::write(&path, out)?;
        Ok(removed)
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
        let mut out = Vec::new();
        let mut last = 0;
        let path = event_file_path(&self.inner.journal.events_dir, attempt_id);
        match std::fs::read(&path) {
            Ok(bytes) => {
                for (seq, json) in parse_event_frames(&bytes).0 {
                    if seq > recorded {
                        break; // written, never committed (a crash, or a write in flight)
                    }
                    let mut e: ToolEvent = decode_json(json, &format!("event {attempt_id}#{seq}"))?;
                    e.sequence = seq;
                    last = seq;
                    out.push(e);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A data dir written before evidence files: its events are in sled.
                let prefix = attempt_prefix(attempt_id);
                for item in self.inner.events.scan_prefix(&prefix) {
                    let (k, v) = item?;
                    let seq = decode_u64(&k[prefix.len()..], attempt_id)?;
                    last = seq;
                    out.push(decode_json(&v, &format!("event {attempt_id}#{seq}"))?);
                }
            }
            Err(e) => {
                return Err(StoreError::Backend(format!(
                    "cannot read the evidence file {}: {}",
                    path.display(),
                    io_message(&e)
                )))
            }
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

    /// Waits for a group commit covering every write made before this call (shutdown).
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.wait_durable().await
    }

    /// How many group commits (journal fsyncs) have been performed since open.
    pub fn flush_count(&self) -> u64 {
        self.inner.journal.flushes.load(Ordering::Relaxed)
    }

    /// Test hook: the flusher holds its next commit until [`Store::resume_flushes`]. Writes
    /// continue; `record_call` waits. Lets tests observe batching without timing.
    #[doc(hidden)]
    pub fn pause_flushes(&self) {
        *lock(&self.inner.journal.paused) = true;
    }

    /// Test hook: releases [`Store::pause_flushes`].
    #[doc(hidden)]
    pub fn resume_flushes(&self) {
        self.inner.journal.resume();
    }

    /// The durability half of `record_call`: returns once a group commit that took every
    /// frame queued before this call has completed, so every [`Store::write_call`] that
    /// returned before is durable.
    pub async fn wait_durable(&self) -> Result<(), StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.inner.journal.enqueue(tx)?;
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.flush_failed(e)),
            Err(_) => Err(StoreError::Backend("the store flusher has stopped".into())),
        }
    }

    /// A synchronous checkpoint, for the rare writes outside calls: commits the journal,
    /// fsyncs the evidence files, makes sled durable and starts a new journal epoch.
    pub fn flush_now(&self) -> Result<(), StoreError> {
        let (result, waiters) = self.inner.journal.commit(true);
        answer(waiters, &result);
        result.map_err(|e| self.flush_failed(e))
    }

    fn flush_failed(&self, e: String) -> StoreError {
        StoreError::Backend(format!(
            "flush of data dir {} failed: {e}",
            self.inner.data_dir.display()
        ))
    }
}

/// Opens (creating, mode 0600) the journal, replays its valid frames into sled, makes sled
/// durable and starts a new epoch. A torn or corrupt tail was never acknowledged: it is
/// dropped with a warning.
fn open_journal(
    data_dir: &Path,
    db: &sled::Db,
    events_dir: &Path,
    trees: [&sled::Tree; 2],
) -> Result<JournalFile, String> {
    let path = data_dir.join(JOURNAL_FILE);
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true).write(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let fail = |what: &str, e: std::io::Error| {
        format!(
            "cannot {what} the journal {}: {}",
            path.display(),
            io_message(&e)
        )
    };
    let mut file = opts.open(&path).map_err(|e| fail("open", e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| fail("read", e))?;
    let header = bytes.get(..JOURNAL_HEADER as usize);
    let epoch = match header {
        Some(h) if &h[..8] == JOURNAL_MAGIC => u64::from_le_bytes(h[8..].try_into().unwrap()),
        _ if bytes.iter().all(|b| *b == 0) => 0, // new (or never written)
        _ => {
            return Err(format!(
                "the journal {} is not an understudy journal (bad header); move it away to start without it",
                path.display()
            ))
        }
    };
    let area = bytes.get(JOURNAL_HEADER as usize..).unwrap_or_default();
    let (frames, valid) = parse_frames(area, epoch);
    // Events go to their attempt's file when the file does not have them yet (it may:
    // files are written before their frame is queued); state and counters to sled.
    let mut files: HashMap<String, Lane> = HashMap::new();
    for payload in &frames {
        for (tree, key, value) in parse_ops(payload).unwrap_or_default() {
            let t = match tree {
                TREE_EVENTS => {
                    let bad = || format!("journal {}: a malformed event key", path.display());
                    let nul = key.iter().position(|b| *b == 0).ok_or_else(bad)?;
                    let id = String::from_utf8(key[..nul].to_vec()).map_err(|_| bad())?;
                    let seq = decode_u64(&key[nul + 1..], &id).map_err(|_| bad())?;
                    let lane = match files.entry(id) {
                        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                        std::collections::hash_map::Entry::Vacant(v) => {
                            let (file, len, last) = open_event_file(events_dir, v.key(), None)
                                .map_err(|e| fail("replay", e))?;
                            v.insert(Lane {
                                last,
                                file,
                                len,
                                dirty: false,
                            })
                        }
                    };
                    if seq > lane.last {
                        append_event(lane, seq, value).map_err(|e| fail("replay", e))?;
                        lane.last = seq;
                    }
                    continue;
                }
                TREE_STATE => trees[0],
                TREE_META => trees[1],
                other => return Err(format!("journal {}: unknown tree {other}", path.display())),
            };
            t.insert(key, value).map_err(|e| e.to_string())?;
        }
    }
    for lane in files.values() {
        lane.file.sync_data().map_err(|e| fail("replay", e))?;
    }
    let tail = &area[valid..];
    if tail.len() >= 4 && tail[..4] != [0; 4] {
        tracing::warn!(
            "journal {}: the log ends at byte {} (a write that was never acknowledged, or frames of an earlier epoch)",
            path.display(),
            JOURNAL_HEADER as usize + valid
        );
    }
    if !frames.is_empty() {
        db.flush().map_err(|e| e.to_string())?;
        tracing::info!(
            "journal {}: replayed {} calls into the store",
            path.display(),
            frames.len()
        );
    }
    let mut j = JournalFile {
        file,
        epoch,
        len: JOURNAL_HEADER,
        capacity: bytes.len() as u64,
        dirty: 0,
    };
    j.write_header(epoch + 1).map_err(|e| fail("reset", e))?;
    Ok(j)
}

// ---- evidence files -------------------------------------------------------------------------

/// `<events_dir>/<hex SHA-256 of the attempt id>.log` (ids may hold any character but NUL).
fn event_file_path(events_dir: &Path, attempt_id: &str) -> PathBuf {
    let hash = crate::contract::hash::sha256_hex(attempt_id.as_bytes());
    events_dir.join(format!("{hash}.log"))
}

/// Opens (creating, mode 0600) an attempt's evidence file, cuts a torn tail after its last
/// whole frame — and, with `keep_upto`, every frame past that sequence (events a crash left
/// written but never committed: the store's counter is the commit point) — and returns it
/// with its length and the last sequence in it.
fn open_event_file(
    events_dir: &Path,
    attempt_id: &str,
    keep_upto: Option<u64>,
) -> std::io::Result<(File, u64, u64)> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true).write(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut file = opts.open(event_file_path(events_dir, attempt_id))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let (frames, mut valid) = parse_event_frames(&bytes);
    let mut last = 0;
    let mut at = 0;
    for (seq, json) in &frames {
        if keep_upto.is_some_and(|k| *seq > k) {
            valid = at;
            break;
        }
        last = *seq;
        at += 16 + json.len();
    }
    if valid < bytes.len() {
        file.set_len(valid as u64)?;
    }
    Ok((file, valid as u64, last))
}

/// Appends one event frame (`length u32 LE | crc32 u32 LE | sequence u64 LE | event JSON`)
/// at the lane's end. Not fsynced: the journal holds the same event until a checkpoint
/// fsyncs the file.
fn append_event(lane: &mut Lane, seq: u64, event: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut frame = Vec::with_capacity(event.len() + 16);
    frame.extend_from_slice(&((event.len() + 8) as u32).to_le_bytes());
    frame.extend_from_slice(&[0; 4]);
    frame.extend_from_slice(&seq.to_le_bytes());
    frame.extend_from_slice(event);
    let crc = crc32fast::hash(&frame[8..]);
    frame[4..8].copy_from_slice(&crc.to_le_bytes());
    lane.file.write_all_at(&frame, lane.len)?;
    lane.len += frame.len() as u64;
    lane.dirty = true;
    Ok(())
}

/// The whole frames of an evidence file as (sequence, event JSON), and where they end.
fn parse_event_frames(bytes: &[u8]) -> (Vec<(u64, &[u8])>, usize) {
    let (frames, end) = whole_frames(bytes, |p, crc| p.len() >= 8 && crc32fast::hash(p) == crc);
    let events = frames
        .into_iter()
        .map(|p| (u64::from_le_bytes(p[..8].try_into().unwrap()), &p[8..]))
        .collect();
    (events, end)
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

    /// A store with attempts `att` and `other`, and an event to record.
    fn store_with_attempt(dir: &Path) -> (Store, ToolEvent) {
        let store = Store::open(dir).unwrap();
        let mut a = AttemptRecord {
            attempt_id: "att".into(),
            token_hash: "h".into(),
            secret: String::new(),
            test_run_id: None,
            started_at: now_rfc3339(),
            ended_at: None,
            expires_at: None,
            pins: BTreeMap::new(),
            variants: BTreeMap::new(),
            is_default: false,
            cleanup: None,
        };
        store.put_attempt(&a).unwrap();
        a.attempt_id = "other".into();
        a.token_hash = "h2".into();
        store.put_attempt(&a).unwrap();
        let event = ToolEvent {
            sequence: 0,
            execution_attempt_id: "att".into(),
            integration: "crm".into(),
            operation_id: Some("op".into()),
            revision: Some(1),
            variant: None,
            rule: None,
            is_write: false,
            arguments: Value::Null,
            result: Value::Null,
            result_status: "ok".into(),
            http_status: 200,
            latency_ms: 0.0,
            delay_ms: 0,
            idempotency_key_ref: None,
            trace_id: None,
            source: "mock".into(),
            error: None,
            timestamp: now_rfc3339(),
        };
        (store, event)
    }

    #[tokio::test]
    async fn idle_evidence_files_are_closed_and_reopened_where_they_left_off() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, event) = store_with_attempt(tmp.path());
        let n = MAX_OPEN_LANES + 40;
        let mut a = store.attempt("att").unwrap().unwrap();
        for i in 0..n {
            a.attempt_id = format!("a{i}");
            a.token_hash = format!("t{i}");
            store.put_attempt(&a).unwrap();
            for _ in 0..2 {
                let rec = CallRecord {
                    event: event.clone(),
                    state: None,
                };
                store.record_call(&a.attempt_id, rec).await.unwrap();
            }
            if i % 64 == 0 {
                store.flush_now().unwrap(); // a checkpoint: lanes become idle
            }
        }
        assert!(store.inner.journal.lanes.read().unwrap().len() <= MAX_OPEN_LANES + 64);
        // Every attempt continues its numbering, closed lane or not.
        for i in [0, 1, n / 2, n - 1] {
            let id = format!("a{i}");
            let rec = CallRecord {
                event: event.clone(),
                state: None,
            };
            assert_eq!(store.record_call(&id, rec).await.unwrap(), 3, "{id}");
            let seqs: Vec<u64> = store
                .evidence(&id)
                .unwrap()
                .iter()
                .map(|e| e.sequence)
                .collect();
            assert_eq!(seqs, [1, 2, 3], "{id}");
        }
    }

    #[test]
    fn depth_is_counted_in_nested_arrays_and_objects() {
        let mut v = Value::from(1);
        assert!(!deeper_than(&v, 0));
        for _ in 0..3 {
            v = serde_json::json!([{ "a": v }]);
        }
        assert!(deeper_than(&v, 5) && !deeper_than(&v, 6));
    }

    #[tokio::test]
    async fn a_call_too_deep_to_read_back_is_refused_and_evidence_stays_readable() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, mut event) = store_with_attempt(tmp.path());
        let mut deep = Value::from(1);
        for _ in 0..MAX_STORED_DEPTH {
            deep = Value::Array(vec![deep]);
        }
        event.result = deep.clone(); // exactly the limit: kept
        let ok = CallRecord {
            event: event.clone(),
            state: None,
        };
        assert_eq!(store.record_call("att", ok).await.unwrap(), 1);
        event.result = Value::Array(vec![deep]);
        let err = store
            .record_call("att", CallRecord { event, state: None })
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("result nests more than 100"),
            "{err}"
        );
        assert_eq!(store.evidence("att").unwrap().len(), 1);
    }

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_le_bytes().to_vec();
        f.extend_from_slice(&frame_crc(7, payload).to_le_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn header_epoch(journal: &[u8]) -> u64 {
        assert_eq!(&journal[..8], JOURNAL_MAGIC);
        u64::from_le_bytes(journal[8..16].try_into().unwrap())
    }

    #[test]
    fn frames_parse_up_to_a_torn_or_corrupt_tail() {
        let mut p1 = Vec::new();
        put_op(&mut p1, TREE_EVENTS, b"k1", b"v1");
        put_op(&mut p1, TREE_META, b"seq", &1u64.to_be_bytes());
        let mut p2 = Vec::new();
        put_op(&mut p2, TREE_STATE, b"k2", b"");
        let whole = [frame(&p1), frame(&p2)].concat();
        let (frames, valid) = parse_frames(&whole, 7);
        assert_eq!(frames, vec![p1.as_slice(), p2.as_slice()]);
        // Frames of another epoch end the log at once; so do zeros after the last frame.
        assert_eq!(parse_frames(&whole, 8), (vec![], 0));
        let padded = [whole.clone(), vec![0; 64]].concat();
        assert_eq!(parse_frames(&padded, 7).1, whole.len());
        assert_eq!(valid, whole.len());
        assert_eq!(
            parse_ops(&p1).unwrap(),
            vec![
                (TREE_EVENTS, &b"k1"[..], &b"v1"[..]),
                (TREE_META, &b"seq"[..], &1u64.to_be_bytes()[..])
            ]
        );
        // Every cut inside the second frame keeps exactly the first.
        let first = frame(&p1).len();
        for cut in first..whole.len() {
            let (frames, valid) = parse_frames(&whole[..cut], 7);
            assert_eq!((frames.len(), valid), (1, first), "cut at {cut}");
        }
        // A flipped bit in the second frame's payload fails its checksum.
        let mut bad = whole.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(parse_frames(&bad, 7).1, first);
        // A payload whose lengths overrun is refused even with a matching checksum.
        let lying = frame(&[TREE_EVENTS, 255, 0, 0, 0, b'k']);
        assert_eq!(parse_frames(&lying, 7), (vec![], 0));
    }

    #[tokio::test]
    async fn an_uncheckpointed_journal_is_replayed_at_open_and_a_torn_tail_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let journal_copy;
        {
            let (store, event) = store_with_attempt(tmp.path());
            for i in 0..3 {
                let mut state = Map::new();
                state.insert("n".into(), Value::from(i));
                let mut event = event.clone();
                event.arguments = serde_json::json!({ "i": i });
                store
                    .record_call(
                        "att",
                        CallRecord {
                            event,
                            state: Some(("crm".into(), state)),
                        },
                    )
                    .await
                    .unwrap();
            }
            // What a crash would leave: the journal as committed, sled possibly behind.
            journal_copy = std::fs::read(tmp.path().join(JOURNAL_FILE)).unwrap();
            assert!(
                !journal_copy.is_empty(),
                "calls are committed to the journal"
            );
        }
        // Closing checkpointed: the journal's epoch moved on, so it holds no frame to replay.
        let closed = std::fs::read(tmp.path().join(JOURNAL_FILE)).unwrap();
        let epoch = header_epoch(&closed);
        assert!(epoch > header_epoch(&journal_copy));
        assert_eq!(parse_frames(&closed[16..], epoch).0.len(), 0);
        // Wipe the calls from sled and put the journal back with a torn frame after it.
        {
            let db = sled::open(tmp.path().join(SLED_DIR)).unwrap();
            for t in ["state", "meta"] {
                db.open_tree(t).unwrap().clear().unwrap();
            }
            db.flush().unwrap();
        }
        // …and the evidence files: what a crash before their checkpoint could leave (the
        // other attempt's file keeps a torn tail to cut).
        let events = tmp.path().join(EVENTS_DIR);
        std::fs::remove_file(event_file_path(&events, "att")).unwrap();
        std::fs::write(event_file_path(&events, "other"), [9, 0, 0, 0, 1]).unwrap();
        let mut torn = journal_copy.clone();
        let (frames, valid) = parse_frames(&torn[16..], header_epoch(&torn));
        assert_eq!(frames.len(), 3);
        torn[16 + valid..16 + valid + 7].copy_from_slice(&[200, 0, 0, 0, 1, 2, 3]);
        std::fs::write(tmp.path().join(JOURNAL_FILE), &torn).unwrap();

        let store = Store::open(tmp.path()).unwrap();
        let events = store.evidence("att").unwrap();
        assert_eq!(
            events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(events[2].arguments["i"], 2);
        assert_eq!(store.state("att").unwrap()["crm"]["n"], 2);
        // Numbering continues after the replayed calls; other attempts start at 1.
        let event = events[0].clone();
        let rec = CallRecord { event, state: None };
        assert_eq!(store.record_call("att", rec.clone()).await.unwrap(), 4);
        assert_eq!(store.record_call("other", rec).await.unwrap(), 1);
    }

    #[tokio::test]
    async fn past_the_limit_the_journal_checkpoints_and_reuses_its_space() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, event) = store_with_attempt(tmp.path());
        let big = "x".repeat(100 * 1024);
        let calls = (JOURNAL_LIMIT / (100 * 1024)) * 3 / 2; // ~1.5 times the limit
        for i in 0..calls {
            let mut e = event.clone();
            e.arguments = serde_json::json!({ "i": i, "pad": big });
            let rec = CallRecord {
                event: e,
                state: None,
            };
            assert_eq!(store.record_call("att", rec).await.unwrap(), i + 1);
        }
        let size = std::fs::metadata(tmp.path().join(JOURNAL_FILE))
            .unwrap()
            .len();
        assert!(
            size <= JOURNAL_LIMIT + 2 * JOURNAL_CHUNK,
            "the journal is reused after a checkpoint, not grown: {size} bytes"
        );
        let journal = std::fs::read(tmp.path().join(JOURNAL_FILE)).unwrap();
        assert!(
            header_epoch(&journal) >= 2,
            "a checkpoint started a new epoch"
        );
        drop(store);
        let store = Store::open(tmp.path()).unwrap();
        let events = store.evidence("att").unwrap();
        assert_eq!(events.len() as u64, calls);
        assert_eq!(events.last().unwrap().arguments["i"], calls - 1);
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = now_rfc3339();
        assert!(chrono::DateTime::parse_from_rfc3339(&t).is_ok(), "{t}");
        assert!(t.ends_with('Z'), "{t}");
    }
}
