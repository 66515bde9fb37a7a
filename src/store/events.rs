//! Per-attempt evidence files: `<data_dir>/events/<hex SHA-256 of the attempt id>.log`
//! (mode 0600), each an append-only sequence of frames (see [`super::frame`]) whose payload
//! is `sequence u64 LE | event JSON` and whose checksum is the CRC-32 of that payload.
//!
//! An attempt's **lane** holds its open file, the last sequence written and where the next
//! frame goes; it is the per-attempt mutex under which `write_call` assigns sequences.
//! Appends are not fsynced here: the journal holds the same event until a checkpoint
//! ([`Lanes::sync_dirty`]) fsyncs every file written since the last one.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use super::{frame, io_message, lock, StoreError};

/// Past this many open evidence files, idle ones are closed (see [`Lanes::open`]).
pub(super) const MAX_OPEN_LANES: usize = 256;

/// One attempt's writer: the last sequence written and its evidence file.
pub(super) struct Lane {
    pub(super) last: u64,
    pub(super) file: File,
    /// Where the next event goes: the end of the file's whole frames.
    pub(super) len: u64,
    /// Written since the last checkpoint (the checkpoint fsyncs it and saves `last` as the
    /// store's counter). Only a clean lane may be closed: a lane reopens from the saved
    /// counter, and cuts every frame past it.
    pub(super) dirty: bool,
}

/// The directory of evidence files and the open lanes, each behind its own mutex.
pub(super) struct Lanes {
    pub(super) dir: PathBuf,
    lanes: RwLock<HashMap<String, Arc<Mutex<Lane>>>>,
}

impl Lanes {
    pub(super) fn new(dir: PathBuf) -> Lanes {
        Lanes {
            dir,
            lanes: RwLock::new(HashMap::new()),
        }
    }

    /// The attempt's lane if it is open.
    pub(super) fn get(&self, attempt_id: &str) -> Option<Arc<Mutex<Lane>>> {
        self.lanes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(attempt_id)
            .cloned()
    }

    /// The attempt's lane, opened when it is not: `last()` gives its last sequence (the
    /// store's counter, the commit point), and the file is opened for appending after its
    /// last whole frame up to that sequence.
    pub(super) fn open(
        &self,
        attempt_id: &str,
        last: impl FnOnce() -> Result<u64, StoreError>,
    ) -> Result<Arc<Mutex<Lane>>, StoreError> {
        let mut lanes = self.lanes.write().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = lanes.get(attempt_id) {
            return Ok(l.clone());
        }
        let last = last()?;
        let (file, len, _) = open_file(&self.dir, attempt_id, Some(last)).map_err(|e| {
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

    /// Makes every evidence file written since the last checkpoint durable (before the
    /// journal that also holds their events starts a new epoch), and gives `save` each one's
    /// attempt and last sequence (its counter) before the lane counts as clean.
    pub(super) fn sync_dirty(
        &self,
        save: impl Fn(&str, u64) -> Result<(), String>,
    ) -> Result<(), String> {
        let lanes: Vec<(String, Arc<Mutex<Lane>>)> = self
            .lanes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, l)| (id.clone(), l.clone()))
            .collect();
        for (id, lane) in lanes {
            let mut l = lock(&lane);
            if l.dirty {
                l.file
                    .sync_data()
                    .map_err(|e| format!("cannot sync an evidence file: {}", io_message(&e)))?;
                save(&id, l.last)?;
                l.dirty = false;
            }
        }
        Ok(())
    }

    #[cfg(test)]
    pub(super) fn open_count(&self) -> usize {
        self.lanes.read().unwrap().len()
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
