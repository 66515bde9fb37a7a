//! The embedded backend's evidence and durability: appending calls and agent events to the
//! evidence files, reading them back, and the journal checkpoints that make them durable
//! (split from `mod.rs` to keep each file readable).

use super::*;

impl Embedded {
    // ---- evidence ------------------------------------------------------------------------

    /// The ids and depths are checked by the facade.
    pub(in crate::store) fn write_call(
        &self,
        attempt_id: &str,
        mut rec: CallRecord,
    ) -> Result<u64, StoreError> {
        let state = match &rec.state {
            Some((integration, map)) => {
                Some((state_key(attempt_id, integration), encode_json(map)?))
            }
            None => None,
        };
        self.write_entry(
            attempt_id,
            |seq| {
                rec.event.sequence = seq;
                super::super::event_json::encode(
                    &rec.event,
                    rec.result_json.as_ref().map(EncodedResult::as_bytes),
                )
            },
            state,
        )
    }

    /// An agent-side event: a frame `{"agent_event":{…}}` in the same evidence file, under
    /// the same lane and journal as calls (so it shares their sequence and durability).
    pub(in crate::store) fn write_agent_event(
        &self,
        attempt_id: &str,
        mut ev: AgentEvent,
    ) -> Result<u64, StoreError> {
        self.write_entry(
            attempt_id,
            |seq| {
                ev.sequence = seq;
                encode_json(&AgentFrame { agent_event: &ev })
            },
            None,
        )
    }

    /// Assigns the attempt's next sequence under its lane, writes the entry `encode(seq)`
    /// gives to its evidence file and the state write if any, and queues the journal frame
    /// listing the same writes and the new counter. The counter itself is the lane's `last`
    /// until the lane is next made clean — at a checkpoint or before it is closed — which
    /// saves it to sled ([`super::super::events::Lanes::clean`]): no sled write per call for it;
    /// its journal frame carries it until then.
    fn write_entry(
        &self,
        attempt_id: &str,
        encode: impl FnOnce(u64) -> Result<Vec<u8>, StoreError>,
        state: Option<(Vec<u8>, Vec<u8>)>,
    ) -> Result<u64, StoreError> {
        let lane = self.lane(attempt_id)?;
        let mut lane = lock(&lane);
        let seq = lane.last + 1;
        let event = encode(seq)?;
        let (event_key, seq_key) = (event_key(attempt_id, seq), meta_key(META_SEQ, attempt_id));
        // Event before counter (see the module doc); the journal frame lists the writes.
        let mut payload =
            Vec::with_capacity(event.len() + 64 + state.as_ref().map_or(0, |s| s.1.len()));
        put_op(&mut payload, TREE_EVENTS, &event_key, &event);
        events::append(&mut lane, seq, &event).map_err(|e| {
            StoreError::Backend(format!(
                "cannot write the evidence of attempt {attempt_id}: {}",
                io_message(&e)
            ))
        })?;
        // The sequence is spent once its event is in the file, whatever fails next.
        lane.last = seq;
        if let Some((k, v)) = state {
            put_op(&mut payload, TREE_STATE, &k, &v);
            self.state.insert(k, v)?;
        }
        put_op(&mut payload, TREE_META, &seq_key, &seq.to_be_bytes());
        self.journal.push(&payload);
        Ok(seq)
    }

    /// The attempt's lane, created on first use for an attempt that exists: its last
    /// sequence (the store's counter) and its evidence file, opened for appending after its
    /// last whole frame.
    fn lane(&self, attempt_id: &str) -> Result<Arc<Mutex<Lane>>, StoreError> {
        let lanes = &self.journal.lanes;
        if let Some(l) = lanes.get(attempt_id) {
            return Ok(l);
        }
        if !self.attempts.contains_key(attempt_id.as_bytes())? {
            return Err(StoreError::Invalid(format!(
                "cannot record a call for unknown attempt {attempt_id}"
            )));
        }
        lanes.open(attempt_id, || self.saved_counter(attempt_id))
    }

    /// The attempt's last sequence: its open lane's, else the one saved in sled (a lane is
    /// closed only once a checkpoint has saved its counter).
    fn counter(&self, attempt_id: &str) -> Result<u64, StoreError> {
        match self.journal.lanes.get(attempt_id) {
            Some(lane) => Ok(lock(&lane).last),
            None => self.saved_counter(attempt_id),
        }
    }

    /// The counter saved in sled: when the lane was last made clean, or replayed from the
    /// journal.
    pub(in crate::store) fn saved_counter(&self, attempt_id: &str) -> Result<u64, StoreError> {
        Ok(match self.meta.get(meta_key(META_SEQ, attempt_id))? {
            Some(v) => decode_u64(&v, attempt_id)?,
            None => 0,
        })
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(in crate::store) fn remove_event_for_test(
        &self,
        attempt_id: &str,
        seq: u64,
    ) -> std::io::Result<bool> {
        events::remove_for_test(&self.journal.lanes.dir, attempt_id, seq)
    }

    pub(in crate::store) fn last_sequence(&self, attempt_id: &str) -> Result<u64, StoreError> {
        self.counter(attempt_id)
    }

    /// One chunk of the timeline from the evidence file, from the cursor's byte offset (or,
    /// the first time, skipping whole frames by their headers up to `after`).
    pub(in crate::store) fn timeline_chunk(
        &self,
        attempt_id: &str,
        cur: &mut crate::store::TimelineCursor,
        limit: usize,
    ) -> Result<Vec<EvidenceEntry>, StoreError> {
        use std::io::{BufReader, Read, Seek, SeekFrom};
        let path = events::file_path(&self.journal.lanes.dir, attempt_id);
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A data dir written before evidence files (events in sled): read whole,
                // once. Such attempts predate long histories.
                let (after, upto) = (cur.after, cur.upto);
                cur.after = upto;
                return Ok(self
                    .timeline(attempt_id, after)?
                    .into_iter()
                    .filter(|e| e.sequence() > after && e.sequence() <= upto)
                    .collect());
            }
            Err(e) => {
                return Err(StoreError::Backend(format!(
                    "cannot read the evidence file {}: {}",
                    path.display(),
                    io_message(&e)
                )))
            }
        };
        let io = |e: std::io::Error| {
            StoreError::Backend(format!(
                "cannot read the evidence file {}: {}",
                path.display(),
                io_message(&e)
            ))
        };
        let mut r = BufReader::with_capacity(256 * 1024, file);
        let mut pos = cur.offset.unwrap_or(0);
        r.seek(SeekFrom::Start(pos)).map_err(io)?;
        let mut out = Vec::new();
        let mut header = [0u8; 16];
        let mut payload = Vec::new();
        while out.len() < limit {
            // `length u32 | crc u32 | sequence u64 | event`: a short or empty header ends it.
            if r.read_exact(&mut header).is_err() {
                break;
            }
            let n = u32::from_le_bytes(header[0..4].try_into().unwrap()) as usize;
            let crc = u32::from_le_bytes(header[4..8].try_into().unwrap());
            let seq = u64::from_le_bytes(header[8..16].try_into().unwrap());
            if n < 8 {
                break;
            }
            if seq <= cur.after {
                r.seek_relative((n - 8) as i64).map_err(io)?;
                pos += (8 + n) as u64;
                continue;
            }
            if seq > cur.upto {
                break;
            }
            payload.clear();
            payload.extend_from_slice(&header[8..16]);
            payload.resize(n, 0);
            if r.read_exact(&mut payload[8..]).is_err() || crc32fast::hash(&payload) != crc {
                break; // a torn tail
            }
            let json = &payload[8..];
            let what = format!("event {attempt_id}#{seq}");
            out.push(if json.starts_with(AGENT_FRAME_PREFIX) {
                let mut e: AgentFrameOwned = decode_json(json, &what)?;
                e.agent_event.sequence = seq;
                EvidenceEntry::Agent(e.agent_event)
            } else {
                let mut e: ToolEvent = decode_json(json, &what)?;
                e.sequence = seq;
                EvidenceEntry::Call(e)
            });
            pos += (8 + n) as u64;
            cur.after = seq;
        }
        cur.offset = Some(pos);
        if out.is_empty() {
            cur.after = cur.upto; // nothing more can be read: the reader stops
        }
        Ok(out)
    }

    /// The entries after `floor` (those up to it rolled out: [`Embedded::roll_over`]).
    pub(in crate::store) fn timeline(
        &self,
        attempt_id: &str,
        floor: u64,
    ) -> Result<Vec<EvidenceEntry>, StoreError> {
        // The sequence counter, read before the scan (writes only add events): a trailing
        // event that is gone would otherwise leave a gap-free 1..n that passes the verdict.
        let recorded = self.counter(attempt_id)?;
        let mut out = Vec::new();
        let mut last = floor;
        let path = events::file_path(&self.journal.lanes.dir, attempt_id);
        match std::fs::read(&path) {
            Ok(bytes) => {
                for (seq, json) in events::parse(&bytes).0 {
                    if seq <= floor {
                        continue; // rolled out (a crash left it before the file was emptied)
                    }
                    if seq > recorded {
                        break; // written, never committed (a crash, or a write in flight)
                    }
                    let what = format!("event {attempt_id}#{seq}");
                    let entry = if json.starts_with(AGENT_FRAME_PREFIX) {
                        let mut e: AgentFrameOwned = decode_json(json, &what)?;
                        e.agent_event.sequence = seq;
                        EvidenceEntry::Agent(e.agent_event)
                    } else {
                        let mut e: ToolEvent = decode_json(json, &what)?;
                        e.sequence = seq;
                        EvidenceEntry::Call(e)
                    };
                    last = seq;
                    out.push(entry);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A data dir written before evidence files: its events are in sled.
                let prefix = attempt_prefix(attempt_id);
                for item in self.events.scan_prefix(&prefix) {
                    let (k, v) = item?;
                    let seq = decode_u64(&k[prefix.len()..], attempt_id)?;
                    if seq <= floor {
                        continue;
                    }
                    last = seq;
                    out.push(EvidenceEntry::Call(decode_json(
                        &v,
                        &format!("event {attempt_id}#{seq}"),
                    )?));
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
        super::super::missing_tail(attempt_id, recorded, last)?;
        Ok(out)
    }

    /// [`crate::store::Store::roll_over`]: the record's `rolled_over` set in one sled
    /// update (so a concurrent store-failure mark is never overwritten), then a checkpoint
    /// (the record durable, and no journal frame left that a replay would append again),
    /// then the evidence file emptied under the attempt's lane.
    pub(in crate::store) fn roll_over(
        &self,
        attempt_id: &str,
        expected: u64,
        rolled: &crate::records::RolledOver,
    ) -> Result<bool, StoreError> {
        let what = format!("attempt {attempt_id}");
        let (mut moved, mut bad) = (false, None);
        self.attempts
            .fetch_and_update(attempt_id.as_bytes(), |old| {
                let old = old?;
                (moved, bad) = (false, None);
                match decode_json::<AttemptRecord>(old, &what) {
                    Ok(mut a) if a.rolled_through() == expected => {
                        a.rolled_over = Some(rolled.clone());
                        match encode_json(&a) {
                            Ok(b) => {
                                moved = true;
                                Some(b)
                            }
                            Err(e) => {
                                bad = Some(e);
                                Some(old.to_vec())
                            }
                        }
                    }
                    Ok(_) => Some(old.to_vec()),
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
        if !moved {
            return Ok(false);
        }
        self.flush_now()?;
        let lane = self.lane(attempt_id)?;
        let mut lane = lock(&lane);
        if lane.last != rolled.through {
            // Written past the roll meanwhile (the caller did not hold the attempt's lock):
            // the entries stay, and every reader skips those up to `through`.
            return Err(StoreError::Invalid(format!(
                "attempt {attempt_id} rolled over through #{} but its last entry is #{}: its evidence file was kept",
                rolled.through, lane.last
            )));
        }
        let io = |e: std::io::Error| {
            StoreError::Backend(format!(
                "cannot empty the evidence file of attempt {attempt_id}: {}",
                io_message(&e)
            ))
        };
        lane.file.set_len(0).map_err(io)?;
        lane.file.sync_all().map_err(io)?;
        lane.len = 0;
        Ok(true)
    }

    /// [`crate::store::Store::count_outside_call`]: one sled update of the stored record (a
    /// concurrent store-failure mark is never overwritten), made durable by sled's flush.
    pub(in crate::store) fn count_outside_call(
        &self,
        attempt_id: &str,
        line: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool, StoreError> {
        let what = format!("attempt {attempt_id}");
        let (mut counted, mut bad) = (false, None);
        self.attempts
            .fetch_and_update(attempt_id.as_bytes(), |old| {
                let old = old?;
                (counted, bad) = (false, None);
                match decode_json::<AttemptRecord>(old, &what) {
                    Ok(mut a) if crate::store::calls::open_exclusive(&a, now) => {
                        crate::store::calls::add_outside(&mut a, line);
                        match encode_json(&a) {
                            Ok(b) => {
                                counted = true;
                                Some(b)
                            }
                            Err(e) => {
                                bad = Some(e);
                                Some(old.to_vec())
                            }
                        }
                    }
                    Ok(_) => Some(old.to_vec()),
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
        if counted {
            self.journal.db.flush()?;
        }
        Ok(counted)
    }

    // ---- durability ----------------------------------------------------------------------

    pub(in crate::store) fn flush_count(&self) -> u64 {
        self.journal.flushes.load(Ordering::Relaxed)
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(in crate::store) fn pause_flushes(&self) {
        *lock(&self.journal.paused) = true;
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(in crate::store) fn resume_flushes(&self) {
        self.journal.resume();
    }

    pub(in crate::store) async fn wait_durable(&self) -> Result<(), StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.journal.enqueue(tx)?;
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.flush_failed(e)),
            Err(_) => Err(StoreError::Backend("the store flusher has stopped".into())),
        }
    }

    /// Durability `attempt`: the call's frame is committed in the background.
    pub(in crate::store) fn flush_soon(&self) {
        self.journal.flush_soon();
    }

    pub(in crate::store) fn flush_now(&self) -> Result<(), StoreError> {
        let (result, waiters) = self.journal.commit(true);
        answer(waiters, &result);
        result.map_err(|e| self.flush_failed(e))
    }

    fn flush_failed(&self, e: String) -> StoreError {
        StoreError::Backend(format!(
            "flush of data dir {} failed: {e}",
            self.data_dir.display()
        ))
    }
}
