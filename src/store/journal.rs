//! The write-ahead journal of calls, `<data_dir>/journal` (mode 0600), and its group commit
//! (the discipline is in the store's module doc, under Durability).
//!
//! The file is a 16-byte header (`USJRNL01` and the epoch, u64 LE) followed by frames (see
//! [`super::frame`]) whose checksum is the CRC-32 of `epoch ++ payload`, so frames of an
//! earlier epoch end the log instead of being replayed. A payload lists the sled writes of
//! one call: `tree u8 | key | value`, lengths u32 LE ([`put_op`]).
//!
//! Only the flusher thread ([`flusher_loop`]) and the synchronous checkpoint
//! ([`Journal::commit`] with `checkpoint`) write the file; callers only queue frames
//! ([`Journal::push`]) and waiters ([`Journal::enqueue`]), or ask for a background commit
//! without waiting ([`Journal::flush_soon`], durability `attempt`).

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::events::{self, Lane, Lanes};
use super::keys::{decode_u64, meta_key, META_SEQ};
use super::{frame, io_message, lock, StoreError};

/// The write-ahead journal of calls, in the data dir.
pub(super) const JOURNAL_FILE: &str = "journal";
/// Past this many bytes the flusher checkpoints (sled flush + a new journal epoch).
pub const JOURNAL_LIMIT: u64 = 16 * 1024 * 1024;
/// The journal grows in steps of this many bytes of zeros.
pub(super) const JOURNAL_CHUNK: u64 = 4 * 1024 * 1024;
/// `understudy journal v1` magic, then the epoch (u64 LE).
pub(super) const JOURNAL_HEADER: u64 = 16;
pub(super) const JOURNAL_MAGIC: &[u8; 8] = b"USJRNL01";

/// How long frames queued without a waiter (durability `attempt`: [`Journal::flush_soon`])
/// wait before the flusher commits them in the background. Short, so the unflushed tail a
/// crash can lose is small; a waiter arriving meanwhile commits them at once.
pub(super) const BACKGROUND_FLUSH: std::time::Duration = std::time::Duration::from_millis(5);

/// A caller waiting for a commit that covers its write.
pub(super) type Waiter = tokio::sync::oneshot::Sender<Result<(), String>>;

/// The journal and its group commit, shared with the flusher thread.
pub(super) struct Journal {
    pub(super) db: sled::Db,
    /// `<data_dir>/events` and the open lanes (last sequence and evidence file) per attempt.
    pub(super) lanes: Lanes,
    /// Frames and waiters not yet taken by a commit.
    pub(super) pending: Mutex<Pending>,
    /// Wakes the flusher when a waiter arrives or the store closes.
    pub(super) wake: Condvar,
    /// The file; held through a whole commit, so commits never interleave.
    pub(super) io: Mutex<JournalFile>,
    pub(super) flushes: AtomicU64,
    /// Test hook: while `true` the flusher waits before committing (see `pause_flushes`).
    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) paused: Mutex<bool>,
    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) resumed: Condvar,
}

#[derive(Default)]
pub(super) struct Pending {
    frames: Vec<u8>,
    waiters: Vec<Waiter>,
    /// Frames were queued that no waiter will ask for ([`Journal::flush_soon`]): the
    /// flusher commits them within [`BACKGROUND_FLUSH`].
    background: bool,
    pub(super) closed: bool,
}

pub(super) struct JournalFile {
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

/// The zero length word written after the last frame (and after a new epoch's header): the
/// log ends there cleanly, so the bytes of an earlier epoch past it — the space is reused
/// after each checkpoint — are not mistaken for a torn write when the journal is opened.
const END_MARK: [u8; 4] = [0; 4];

pub(super) fn answer(waiters: Vec<Waiter>, result: &Result<(), String>) {
    for w in waiters {
        // A waiter whose future was dropped (client gone) is simply skipped.
        let _ = w.send(result.clone());
    }
}

impl Journal {
    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) fn resume(&self) {
        *lock(&self.paused) = false;
        self.resumed.notify_all();
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn wait_while_paused(&self) {
        let mut p = lock(&self.paused);
        while *p {
            p = self.resumed.wait(p).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Queues one call's frame (before its caller can wait for it).
    pub(super) fn push(&self, payload: &[u8]) {
        // The checksum is filled in by the commit, which knows the epoch.
        frame::push(&mut lock(&self.pending).frames, &[payload]);
    }

    /// Asks for a background commit of the frames queued so far, without waiting for it
    /// (durability `attempt`). Wakes the flusher only when no background commit is due yet,
    /// so a run of such calls costs one wake-up per commit, not one per call.
    pub(super) fn flush_soon(&self) {
        let mut p = lock(&self.pending);
        if p.background || p.closed {
            return;
        }
        p.background = true;
        drop(p);
        self.wake.notify_one();
    }

    pub(super) fn enqueue(&self, w: Waiter) -> Result<(), StoreError> {
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
    pub(super) fn commit(&self, checkpoint: bool) -> (Result<(), String>, Vec<Waiter>) {
        let mut io = lock(&self.io);
        let (mut frames, waiters) = {
            let mut p = lock(&self.pending);
            p.background = false;
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
            // Frames nobody waits for are retried in the background too.
            p.background = true;
        } else if checkpoint || io.len > JOURNAL_LIMIT {
            result = self
                .lanes
                .sync_dirty()
                .and_then(|()| self.db.flush().map(|_| ()).map_err(|e| e.to_string()))
                .and_then(|()| io.reset());
        }
        self.flushes.fetch_add(1, Ordering::Relaxed);
        (result, waiters)
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
        let epoch = self.epoch;
        frame::seal(frames, |p| frame_crc(epoch, p));
        let end = self.len + frames.len() as u64;
        self.reserve(end + END_MARK.len() as u64)
            .map_err(|e| format!("cannot grow the journal: {}", io_message(&e)))?;
        self.dirty = end;
        self.file
            .write_all_at(frames, self.len)
            .and_then(|()| self.file.write_all_at(&END_MARK, end))
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
    pub(super) fn reset(&mut self) -> Result<(), String> {
        self.write_header(self.epoch + 1)
            .map_err(|e| format!("cannot reset the journal: {}", io_message(&e)))?;
        self.len = JOURNAL_HEADER;
        self.dirty = 0;
        Ok(())
    }

    /// Writes the header of `epoch` and the [`END_MARK`] after it (the frames of the epoch
    /// before are durable elsewhere by now: sled and the events files).
    pub(super) fn write_header(&mut self, epoch: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut h = [0u8; JOURNAL_HEADER as usize + END_MARK.len()];
        h[..8].copy_from_slice(JOURNAL_MAGIC);
        h[8..16].copy_from_slice(&epoch.to_le_bytes());
        self.file.write_all_at(&h, 0)?;
        let written = h.len() as u64;
        if self.capacity < written {
            self.capacity = written;
            self.file.sync_all()?;
        } else {
            self.file.sync_data()?;
        }
        self.epoch = epoch;
        Ok(())
    }
}

/// One replayed write to the `meta` tree. A counter never goes down: a checkpoint may have
/// saved a lane's counter past frames still queued then (their events were already in the
/// file it synced), and a replayed frame of those must not lower it.
fn replay_meta(meta: &sled::Tree, key: &[u8], value: &[u8]) -> Result<(), String> {
    if key.starts_with(&meta_key(META_SEQ, "")) {
        let number = |b: &[u8]| <[u8; 8]>::try_from(b).map(u64::from_be_bytes).ok();
        let saved = meta.get(key).map_err(|e| e.to_string())?;
        if saved.is_some_and(|s| number(&s) > number(value)) {
            return Ok(());
        }
    }
    meta.insert(key, value)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A journal frame's checksum: CRC-32 of `epoch` (LE) followed by the payload.
pub(super) fn frame_crc(epoch: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&epoch.to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// The flusher thread: one commit per batch of waiters (see the module doc), and one within
/// [`BACKGROUND_FLUSH`] of a [`Journal::flush_soon`] when no waiter comes first.
pub(super) fn flusher_loop(journal: Arc<Journal>) {
    loop {
        {
            let mut p = lock(&journal.pending);
            while p.waiters.is_empty() && !p.closed {
                if !p.background {
                    p = journal.wake.wait(p).unwrap_or_else(|e| e.into_inner());
                    continue;
                }
                let (g, t) = journal
                    .wake
                    .wait_timeout(p, BACKGROUND_FLUSH)
                    .unwrap_or_else(|e| e.into_inner());
                p = g;
                if t.timed_out() && p.background {
                    break;
                }
            }
            if p.waiters.is_empty() && p.closed {
                return; // closed, nobody waiting: the close's checkpoint takes the rest
            }
        }
        #[cfg(any(test, feature = "test-hooks"))]
        journal.wait_while_paused();
        let (result, waiters) = journal.commit(false);
        answer(waiters, &result);
    }
}

/// The sled tree of one write in a journal frame.
pub(super) const TREE_EVENTS: u8 = 1;
pub(super) const TREE_STATE: u8 = 2;
pub(super) const TREE_META: u8 = 3;

/// Appends one sled write (`tree u8 | key | value`, lengths u32 LE) to a frame's payload.
pub(super) fn put_op(payload: &mut Vec<u8>, tree: u8, key: &[u8], value: &[u8]) {
    payload.push(tree);
    payload.extend_from_slice(&(key.len() as u32).to_le_bytes());
    payload.extend_from_slice(key);
    payload.extend_from_slice(&(value.len() as u32).to_le_bytes());
    payload.extend_from_slice(value);
}

/// One sled write of a journal frame: tree, key, value.
pub(super) type Op<'a> = (u8, &'a [u8], &'a [u8]);

/// The sled writes of one frame's payload; `None` if it does not parse.
pub(super) fn parse_ops(mut p: &[u8]) -> Option<Vec<Op<'_>>> {
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
pub(super) fn parse_frames(bytes: &[u8], epoch: u64) -> (Vec<&[u8]>, usize) {
    frame::read(bytes, |p, crc| {
        frame_crc(epoch, p) == crc && parse_ops(p).is_some()
    })
}

/// Opens (creating, mode 0600) the journal, replays its valid frames into sled, makes sled
/// durable and starts a new epoch. A torn or corrupt tail was never acknowledged: it is
/// dropped with a warning.
pub(super) fn open(
    data_dir: &Path,
    db: &sled::Db,
    events_dir: &Path,
    max_open: usize,
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
    // files are written before their frame is queued); state and counters to sled. At most
    // `max_open` files are open at once: past that, the open ones are synced and closed.
    let mut files: HashMap<String, Lane> = HashMap::new();
    let sync_all = |files: &mut HashMap<String, Lane>| -> Result<(), String> {
        for lane in files.values_mut() {
            lane.sync().map_err(|e| fail("replay", e))?;
        }
        Ok(())
    };
    for payload in &frames {
        for (tree, key, value) in parse_ops(payload).unwrap_or_default() {
            let t = match tree {
                TREE_EVENTS => {
                    let bad = || format!("journal {}: a malformed event key", path.display());
                    let nul = key.iter().position(|b| *b == 0).ok_or_else(bad)?;
                    let id = String::from_utf8(key[..nul].to_vec()).map_err(|_| bad())?;
                    let seq = decode_u64(&key[nul + 1..], &id).map_err(|_| bad())?;
                    if files.len() >= max_open && !files.contains_key(&id) {
                        sync_all(&mut files)?;
                        files.clear();
                    }
                    let lane = match files.entry(id) {
                        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                        std::collections::hash_map::Entry::Vacant(v) => {
                            let (file, len, last) = events::open_file(events_dir, v.key(), None)
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
                        events::append(lane, seq, value).map_err(|e| fail("replay", e))?;
                        lane.last = seq;
                    }
                    continue;
                }
                TREE_STATE => trees[0],
                TREE_META => {
                    replay_meta(trees[1], key, value)?;
                    continue;
                }
                other => return Err(format!("journal {}: unknown tree {other}", path.display())),
            };
            t.insert(key, value).map_err(|e| e.to_string())?;
        }
    }
    sync_all(&mut files)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_le_bytes().to_vec();
        f.extend_from_slice(&frame_crc(7, payload).to_le_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn a_replayed_counter_never_lowers_the_saved_one() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let meta = db.open_tree("meta").unwrap();
        let seq = meta_key(META_SEQ, "att");
        let n = |v: u64| v.to_be_bytes();
        let get = |k: &[u8]| {
            u64::from_be_bytes(meta.get(k).unwrap().unwrap().as_ref().try_into().unwrap())
        };
        replay_meta(&meta, &seq, &n(3)).unwrap();
        assert_eq!(get(&seq), 3);
        // A frame queued before the checkpoint that saved 3, replayed after it.
        replay_meta(&meta, &seq, &n(2)).unwrap();
        assert_eq!(get(&seq), 3);
        replay_meta(&meta, &seq, &n(4)).unwrap();
        assert_eq!(get(&seq), 4);
        // Other meta writes (the latest revision number) are replayed as written.
        let rev = meta_key(b"rev", "crm/op");
        replay_meta(&meta, &rev, &n(5)).unwrap();
        replay_meta(&meta, &rev, &n(1)).unwrap();
        assert_eq!(get(&rev), 1);
    }

    /// The journal as `open` leaves it after `calls` group commits and `checkpoints`.
    fn journal_bytes(dir: &Path, calls: usize, checkpoint: bool) -> Vec<u8> {
        // As the store opens it: without sled's background flusher, and waiting out the lock
        // that the last open, dropped a moment ago, may still hold (`open_sled_retrying`).
        let config = sled::Config::new()
            .path(dir.join("db"))
            .flush_every_ms(None);
        let db = crate::store::open_sled_retrying(&config).unwrap();
        let (state, meta) = (
            db.open_tree("state").unwrap(),
            db.open_tree("meta").unwrap(),
        );
        let mut j = open(dir, &db, &dir.join("events"), 8, [&state, &meta]).unwrap();
        for i in 0..calls {
            let mut p = Vec::new();
            put_op(
                &mut p,
                TREE_STATE,
                format!("k{i}").as_bytes(),
                b"some value",
            );
            let mut frames = Vec::new();
            frame::push(&mut frames, &[&p]);
            j.append(&mut frames).unwrap();
        }
        if checkpoint {
            db.flush().unwrap();
            j.reset().unwrap();
        }
        drop(j);
        std::fs::read(dir.join(JOURNAL_FILE)).unwrap()
    }

    #[test]
    fn a_new_epoch_and_every_commit_end_the_log_with_zeros() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("events")).unwrap();
        let h = JOURNAL_HEADER as usize;
        // Three commits: the log ends cleanly after the third frame.
        let b = journal_bytes(dir.path(), 3, false);
        let epoch = u64::from_le_bytes(b[8..16].try_into().unwrap());
        let (frames, valid) = parse_frames(&b[h..], epoch);
        assert_eq!(frames.len(), 3);
        assert_eq!(b[h + valid..h + valid + 4], END_MARK);
        // A checkpoint (and the next open, which starts another epoch): the frames of the
        // earlier epoch are still in the file but the log ends at the header, with zeros —
        // so opening it finds no torn tail to warn about.
        let b = journal_bytes(dir.path(), 0, true);
        assert_eq!(b[h..h + 4], END_MARK);
        assert!(
            b[h + 4..].iter().any(|x| *x != 0),
            "the earlier epoch's bytes are reused, not erased"
        );
        // One frame after that: it ends with the mark, in front of the older bytes.
        let b = journal_bytes(dir.path(), 1, false);
        let epoch = u64::from_le_bytes(b[8..16].try_into().unwrap());
        let (frames, valid) = parse_frames(&b[h..], epoch);
        assert_eq!(
            (frames.len(), &b[h + valid..h + valid + 4]),
            (1, &END_MARK[..])
        );
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
}
