//! Per-attempt evidence files: `<data_dir>/events/<hex SHA-256 of the attempt id>.log`
//! (mode 0600), each an append-only sequence of frames (see [`super::frame`]) whose payload
//! is `sequence u64 LE | event JSON` and whose checksum is the CRC-32 of that payload.
//!
//! An attempt's **lane** holds its open file, the last sequence written and where the next
//! frame goes; it is the per-attempt mutex under which `write_call` assigns sequences.
//! Appends are not fsynced here: the journal holds the same event until a checkpoint
//! ([`Lanes::sync_dirty`]) fsyncs every file written since the last one. Nor is the
//! lane's counter (`last`, the commit point a reopened lane cuts its file at) written per
//! call: making a lane clean ([`Lanes::clean`]) fsyncs it and then saves its counter.
//!
//! Open lanes are bounded: at most a quarter of the soft `RLIMIT_NOFILE` read at open
//! ([`open_files_limit`], [`lane_cap`]; 8..=256). At the cap the least recently used idle
//! lanes are closed, each made clean first if it has writes since, since the next
//! checkpoint drops their events from the journal and only syncs the lanes still open,
//! and the lane reopens from the saved counter ([`Lanes::close_idle`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::{frame, io_message, lock, StoreError};

/// At most this many evidence files are kept open, however high the open-files limit.
pub(super) const MAX_OPEN_LANES: usize = 256;
/// …and at least this many, however low.
const MIN_OPEN_LANES: usize = 8;
/// Evidence files take at most this share (1/n) of the soft open-files limit: the rest is
/// for connections, sled, the journal and reads.
const LIMIT_SHARE: u64 = 4;

/// One attempt's writer: the last sequence written and its evidence file.
pub(super) struct Lane {
    pub(super) last: u64,
    pub(super) file: File,
    /// Where the next event goes: the end of the file's whole frames.
    pub(super) len: u64,
    /// Written since it was last made clean ([`Lanes::clean`]: fsynced and its counter
    /// saved, by a checkpoint or before the lane was closed). Only a clean lane may be
    /// closed: a lane reopens from the saved counter, and cuts every frame past it.
    pub(super) dirty: bool,
}

impl Lane {
    /// Makes the lane's writes durable (`fdatasync`) if it has unsynced ones.
    pub(super) fn sync(&mut self) -> std::io::Result<()> {
        if self.dirty {
            self.file.sync_data()?;
            self.dirty = false;
        }
        Ok(())
    }
}

/// An open lane and when it was last used (a tick of [`Lanes::clock`]).
struct Slot {
    lane: Arc<Mutex<Lane>>,
    used: AtomicU64,
}

/// The directory of evidence files and the open lanes, each behind its own mutex — at most
/// `cap` of them while any is idle (see [`Lanes::open`]).
pub(super) struct Lanes {
    pub(super) dir: PathBuf,
    cap: usize,
    clock: AtomicU64,
    lanes: RwLock<HashMap<String, Slot>>,
    /// Saves an attempt's counter (its lane's `last`) where a reopened lane reads it.
    save: SaveCounter,
}

/// How [`Lanes`] saves a lane's counter when it makes the lane clean (the embedded store:
/// into sled's `meta` tree). Calls do not write the counter; their journal frames carry it.
pub(super) type SaveCounter = Box<dyn Fn(&str, u64) -> Result<(), String> + Send + Sync>;

impl Lanes {
    pub(super) fn new(dir: PathBuf, cap: usize, save: SaveCounter) -> Lanes {
        Lanes {
            dir,
            cap,
            clock: AtomicU64::new(0),
            lanes: RwLock::new(HashMap::new()),
            save,
        }
    }

    /// Makes attempt `id`'s lane clean if it is dirty: its writes fsynced, then its counter
    /// saved — before a checkpoint drops its events from the journal, and before the lane is
    /// closed (it reopens from the saved counter). A failure leaves it dirty.
    pub(super) fn clean(&self, id: &str, lane: &mut Lane) -> Result<(), String> {
        if lane.dirty {
            lane.file
                .sync_data()
                .map_err(|e| format!("cannot sync an evidence file: {}", io_message(&e)))?;
            (self.save)(id, lane.last)?;
            lane.dirty = false;
        }
        Ok(())
    }

    /// The attempt's lane if it is open (and now its most recently used).
    pub(super) fn get(&self, attempt_id: &str) -> Option<Arc<Mutex<Lane>>> {
        let lanes = self.lanes.read().unwrap_or_else(|e| e.into_inner());
        let slot = lanes.get(attempt_id)?;
        slot.used.store(self.tick(), Ordering::Relaxed);
        Some(slot.lane.clone())
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    /// The attempt's lane, opened when it is not: `last()` gives its last sequence (the
    /// store's counter, the commit point), and the file is opened for appending after its
    /// last whole frame up to that sequence.
    ///
    /// One open file per attempt ever written would run out of file descriptors in a
    /// long-lived server, so at `cap` open lanes the least recently used idle ones are closed
    /// first ([`Lanes::close_idle`]; a closed lane is reopened from its file and the counter on
    /// its next call). Lanes in use are never closed: past `cap` only while more than `cap`
    /// attempts are being written at once. When the open still fails for want of file
    /// descriptors (connections use them too), every idle lane is closed and the open retried
    /// once; if it fails again the call fails (`store_error`) and nothing was written.
    pub(super) fn open(
        &self,
        attempt_id: &str,
        last: impl Fn() -> Result<u64, StoreError>,
    ) -> Result<Arc<Mutex<Lane>>, StoreError> {
        let mut full_tries = 0;
        let mut emfile_retried = false;
        loop {
            let mut lanes = self.lanes.write().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = lanes.get(attempt_id) {
                s.used.store(self.tick(), Ordering::Relaxed);
                return Ok(s.lane.clone());
            }
            if lanes.len() >= self.cap && full_tries < 2 {
                // Room is made outside the map's lock: closing a dirty lane waits for its fsync.
                drop(lanes);
                full_tries += 1;
                self.close_idle((self.cap / 8).max(1));
                continue;
            }
            // Under the map's write lock: with the lane closed nobody writes this attempt, so
            // the counter cannot move before the lane is in the map.
            let counter = last()?;
            let (file, len, _) = match open_file(&self.dir, attempt_id, Some(counter)) {
                Ok(f) => f,
                Err(e) if is_out_of_fds(&e) && !emfile_retried => {
                    drop(lanes);
                    emfile_retried = true;
                    let closed = self.close_idle(usize::MAX);
                    tracing::warn!(
                        attempt = %attempt_id,
                        closed_evidence_files = closed,
                        "out of file descriptors opening an evidence file: idle ones closed, retrying"
                    );
                    continue;
                }
                Err(e) => {
                    return Err(StoreError::Backend(format!(
                        "cannot open the evidence file of attempt {attempt_id}: {}",
                        io_message(&e)
                    )))
                }
            };
            let lane = Arc::new(Mutex::new(Lane {
                last: counter,
                file,
                len,
                dirty: false,
            }));
            let slot = Slot {
                lane: lane.clone(),
                used: AtomicU64::new(self.tick()),
            };
            lanes.insert(attempt_id.to_string(), slot);
            return Ok(lane);
        }
    }

    /// Closes up to `n` idle lanes (no caller holds them), least recently used first, and
    /// returns how many it closed. A lane with unsynced writes is fsynced before it is
    /// closed (its events are acknowledged once the journal has them, and the next
    /// checkpoint, which drops them from the journal, only fsyncs the lanes still open); one
    /// whose fsync fails stays open and dirty, for the checkpoint to retry and report.
    pub(super) fn close_idle(&self, n: usize) -> usize {
        let mut idle: Vec<(u64, String, Arc<Mutex<Lane>>)> = self
            .lanes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, s)| Arc::strong_count(&s.lane) == 1)
            .map(|(id, s)| (s.used.load(Ordering::Relaxed), id.clone(), s.lane.clone()))
            .collect();
        idle.sort_unstable_by_key(|(used, _, _)| *used);
        idle.truncate(n);
        idle.retain(|(_, id, lane)| match self.clean(id, &mut lock(lane)) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(attempt = %id, "{e}");
                false
            }
        });
        let mut lanes = self.lanes.write().unwrap_or_else(|e| e.into_inner());
        let mut closed = 0;
        for (_, id, lane) in &idle {
            let still_idle = lanes.get(id).is_some_and(|s| {
                // Ours and the map's: nobody else took it since, and nothing was written.
                Arc::ptr_eq(&s.lane, lane)
                    && Arc::strong_count(lane) == 2
                    && lane.try_lock().is_ok_and(|l| !l.dirty)
            });
            if still_idle {
                lanes.remove(id);
                closed += 1;
            }
        }
        closed
    }

    /// Makes every lane written since the last checkpoint clean ([`Lanes::clean`]) before
    /// the journal that also holds their events starts a new epoch.
    pub(super) fn sync_dirty(&self) -> Result<(), String> {
        let lanes: Vec<(String, Arc<Mutex<Lane>>)> = self
            .lanes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, s)| (id.clone(), s.lane.clone()))
            .collect();
        for (id, lane) in lanes {
            self.clean(&id, &mut lock(&lane))?;
        }
        Ok(())
    }

    #[cfg(test)]
    pub(super) fn open_count(&self) -> usize {
        self.lanes.read().unwrap().len()
    }

    #[cfg(test)]
    pub(super) fn is_open(&self, attempt_id: &str) -> bool {
        self.lanes.read().unwrap().contains_key(attempt_id)
    }
}

/// `EMFILE` (this process) or `ENFILE` (the system): out of file descriptors.
fn is_out_of_fds(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(23 | 24))
}

/// How many evidence files to keep open under a soft open-files limit of `limit`
/// (`None`: unlimited or unknown): a quarter of it, within 8..=256.
pub(super) fn lane_cap(limit: Option<u64>) -> usize {
    limit.map_or(MAX_OPEN_LANES, |l| {
        usize::try_from(l / LIMIT_SHARE)
            .unwrap_or(usize::MAX)
            .clamp(MIN_OPEN_LANES, MAX_OPEN_LANES)
    })
}

/// The soft limit on open files (`RLIMIT_NOFILE`) of this process; `None` when unlimited or
/// unknown.
pub(super) fn open_files_limit() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit only writes the struct it is given.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            return (lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur);
        }
        None
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        // `Max open files  <soft>  <hard>  files` (Linux without glibc); elsewhere unknown.
        let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
        let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
        line["Max open files".len()..]
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }
}

/// `<events_dir>/<hex SHA-256 of the attempt id>.log` (ids may hold any character but NUL).
pub(super) fn file_path(events_dir: &Path, attempt_id: &str) -> PathBuf {
    let hash = crate::contract::hash::sha256_hex(attempt_id.as_bytes());
    events_dir.join(format!("{hash}.log"))
}

/// Opens (creating, mode 0600) an attempt's evidence file, cuts a torn tail after its last
/// whole frame — and, with `keep_upto`, every frame past that sequence (events a crash left
/// written but never committed: the store's counter is the commit point) — and returns it
/// with its length and the last sequence in it.
pub(super) fn open_file(
    events_dir: &Path,
    attempt_id: &str,
    keep_upto: Option<u64>,
) -> std::io::Result<(File, u64, u64)> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true).write(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut file = opts.open(file_path(events_dir, attempt_id))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let (frames, mut valid) = parse(&bytes);
    let mut last = 0;
    let mut at = 0;
    for (seq, json) in &frames {
        if keep_upto.is_some_and(|k| *seq > k) {
            valid = at;
            break;
        }
        last = *seq;
        at += frame::OVERHEAD + 8 + json.len();
    }
    if valid < bytes.len() {
        file.set_len(valid as u64)?;
    }
    Ok((file, valid as u64, last))
}

/// Appends one event frame at the lane's end. Not fsynced: the journal holds the same event
/// until a checkpoint fsyncs the file.
pub(super) fn append(lane: &mut Lane, seq: u64, event: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut f = Vec::with_capacity(event.len() + frame::OVERHEAD + 8);
    frame::push(&mut f, &[&seq.to_le_bytes(), event]);
    frame::seal(&mut f, crc32fast::hash);
    lane.file.write_all_at(&f, lane.len)?;
    lane.len += f.len() as u64;
    lane.dirty = true;
    Ok(())
}

/// The whole frames of an evidence file as (sequence, event JSON), and where they end.
pub(super) fn parse(bytes: &[u8]) -> (Vec<(u64, &[u8])>, usize) {
    let (frames, end) = frame::read(bytes, |p, crc| p.len() >= 8 && crc32fast::hash(p) == crc);
    let events = frames
        .into_iter()
        .map(|p| (u64::from_le_bytes(p[..8].try_into().unwrap()), &p[8..]))
        .collect();
    (events, end)
}

/// Removes event `seq` from the attempt's evidence file, as a lost write would (a test hook:
/// the verdict must then fail).
#[cfg(any(test, feature = "test-hooks"))]
pub(super) fn remove_for_test(
    events_dir: &Path,
    attempt_id: &str,
    seq: u64,
) -> std::io::Result<bool> {
    let path = file_path(events_dir, attempt_id);
    let bytes = std::fs::read(&path)?;
    let (frames, _) = parse(&bytes);
    let mut out = Vec::new();
    let mut removed = false;
    let mut at = 0;
    for (s, json) in frames {
        let len = frame::OVERHEAD + 8 + json.len();
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
