//! The store's evidence and durability: the part of the facade [`Store`] that records calls
//! and agent events, reads them back, and makes them durable (split from `mod.rs` to keep
//! each file readable).

use super::*;

/// Where a chunked read of an attempt's timeline is ([`Store::timeline_chunk`]): past
/// sequence `after`, up to `upto` (the counter when the read began).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineCursor {
    pub after: u64,
    pub upto: u64,
    /// The embedded backend's byte offset of the frame after `after` in the evidence file
    /// (`None`: not known yet, found by skipping frame headers).
    pub(in crate::store) offset: Option<u64>,
}

impl TimelineCursor {
    pub fn new(after: u64, upto: u64) -> TimelineCursor {
        TimelineCursor {
            after,
            upto,
            offset: None,
        }
    }
}

/// The file, in the data dir of a process on the PostgreSQL store, of the store-failure marks
/// it could not write to the database ([`Store::store_failure_unrecorded`]).
pub const UNMARKED_STORE_FAILURES: &str = "unmarked-store-failures";

/// Entries one [`Store::timeline_chunks`] read takes from the store at a time.
pub const TIMELINE_CHUNK: usize = 1_024;

impl Store {
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
        // The one place a call's evidence is made durable: nothing secret passes
        // (`crate::util::scrub`), in every mode.
        self.scrub_event(&mut rec.event);
        if let Some(s) = rec
            .result_json
            .as_ref()
            .and_then(|r| r.scrubbed(&self.scrubber))
        {
            rec.result_json = Some(s);
        }
        if let Some((_, m)) = &mut rec.state {
            m.values_mut().for_each(|v| {
                self.scrubber.json(v);
            });
        }
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
        on!(self, b => b.write_call(attempt_id, rec))
    }

    /// Records one agent-side event (docs/src/reference/events.md) in the attempt's evidence, with the attempt's
    /// next sequence (shared with calls), and returns that sequence once it is durable (the
    /// same group commit as calls).
    pub async fn record_agent_event(
        &self,
        attempt_id: &str,
        event: AgentEvent,
    ) -> Result<u64, StoreError> {
        let seq = self.write_agent_event(attempt_id, event)?;
        self.wait_durable().await?;
        Ok(seq)
    }

    /// The write half of [`Store::record_agent_event`] (not yet durable: await
    /// [`Store::wait_durable`] before answering).
    pub fn write_agent_event(
        &self,
        attempt_id: &str,
        mut event: AgentEvent,
    ) -> Result<u64, StoreError> {
        check_attempt_id(attempt_id)?;
        if let Some(t) = &event.text {
            if let Some(n) = self.scrubber.text(t) {
                event.text = Some(n);
            }
        }
        if let Some(d) = &mut event.data {
            self.scrubber.json(d);
        }
        if event
            .data
            .as_ref()
            .is_some_and(|v| deeper_than(v, MAX_STORED_DEPTH))
        {
            return Err(StoreError::Invalid(format!(
                "the event's data nests more than {MAX_STORED_DEPTH} levels: it could not be read back, so it is not stored"
            )));
        }
        on!(self, b => b.write_agent_event(attempt_id, event))
    }

    /// The attempt's record, calls, agent-side events and live state in one read; `Ok(None)`
    /// when the attempt is unknown. The one reader shared by the admin routes and the CLI.
    pub fn attempt_evidence(
        &self,
        attempt_id: &str,
    ) -> Result<Option<AttemptEvidence>, StoreError> {
        let Some(attempt) = self.attempt(attempt_id)? else {
            return Ok(None);
        };
        let mut calls = Vec::new();
        let mut events = Vec::new();
        let floor = attempt.rolled_through();
        for e in on!(self, b => b.timeline(attempt_id, floor))? {
            match e {
                EvidenceEntry::Call(c) => calls.push(c),
                EvidenceEntry::Agent(a) => events.push(a),
            }
        }
        let live_state = self.state(attempt_id)?;
        Ok(Some(AttemptEvidence {
            attempt,
            calls,
            events,
            live_state,
        }))
    }

    /// Every entry of the attempt's evidence — calls and agent-side events — in sequence
    /// order (after those that rolled out: [`AttemptRecord::rolled_through`]).
    pub fn timeline(&self, attempt_id: &str) -> Result<Vec<EvidenceEntry>, StoreError> {
        check_attempt_id(attempt_id)?;
        let floor = self.attempt(attempt_id)?.map_or(0, |a| a.rolled_through());
        on!(self, b => b.timeline(attempt_id, floor))
    }

    /// A call reached the server without the token of the exclusive attempt `attempt_id`:
    /// counted in its stored record (`outside_calls`, and the first
    /// [`crate::records::MAX_OUTSIDE_LISTED`] `line`s) in one atomic update, durably, when
    /// the stored record says it is still open at `now` — whichever process of a fleet ended
    /// it or wrote it last. Returns the record as stored then (`None`: not open, nothing
    /// counted).
    pub fn count_outside_call(
        &self,
        attempt_id: &str,
        line: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<AttemptRecord>, StoreError> {
        check_attempt_id(attempt_id)?;
        if !on!(self, b => b.count_outside_call(attempt_id, line, now))? {
            return Ok(None);
        }
        self.attempt(attempt_id)
    }

    /// The ids of the attempts created `exclusive` that are open (not ended, not the default
    /// attempt), whichever process of a shared store created them: a process that never
    /// loaded one still fails it for a call that missed it. The embedded store has one
    /// process, whose registry holds them all: none.
    pub async fn open_exclusive_attempts(&self) -> Result<Vec<String>, StoreError> {
        match &*self.inner {
            Backend::Embedded(_) => Ok(Vec::new()),
            Backend::Postgres(p) => p.open_exclusive_attempts().await,
        }
    }

    /// The default attempt's retention bound (docs/src/reference/evidence-envelope.md#retention):
    /// the entries up to `rolled.through`, judged into `rolled` by the caller, roll out of
    /// the store. First the record's `rolled_over` becomes `rolled` (durably, and only when
    /// it still rolls through `expected`: else `Ok(false)`, another writer rolled first),
    /// then the entries go — so a crash between the two leaves entries every reader skips,
    /// never a gap. The caller holds the attempt's lock, and `rolled.through` is its last
    /// sequence. Embedded: a checkpoint, then the evidence file is emptied. PostgreSQL: both
    /// in one transaction with the attempt's lease.
    pub fn roll_over(
        &self,
        attempt_id: &str,
        expected: u64,
        rolled: &crate::records::RolledOver,
    ) -> Result<bool, StoreError> {
        check_attempt_id(attempt_id)?;
        on!(self, b => b.roll_over(attempt_id, expected, rolled))
    }

    /// The attempt's last sequence (its counter): every entry up to it was written. Read it
    /// under the attempt's lock before a [`Store::timeline_chunk`] read, so the read is the
    /// snapshot of that instant (writes only add entries past it).
    pub fn last_sequence(&self, attempt_id: &str) -> Result<u64, StoreError> {
        check_attempt_id(attempt_id)?;
        on!(self, b => b.last_sequence(attempt_id))
    }

    /// The next entries of the attempt's timeline after `cursor` (sequence `> cursor.after`,
    /// `<= cursor.upto`), at most `limit`, in sequence order; the cursor moves past them.
    /// Empty when there are no more (or the rest cannot be read as a dense run: the
    /// verdict's reader then finds fewer entries than the counter says). Memory is one chunk,
    /// whatever the attempt's size.
    pub fn timeline_chunk(
        &self,
        attempt_id: &str,
        cursor: &mut TimelineCursor,
        limit: usize,
    ) -> Result<Vec<EvidenceEntry>, StoreError> {
        check_attempt_id(attempt_id)?;
        if cursor.after >= cursor.upto || limit == 0 {
            return Ok(Vec::new());
        }
        on!(self, b => b.timeline_chunk(attempt_id, cursor, limit))
    }

    /// The attempt's timeline after sequence `after` (the record's
    /// [`AttemptRecord::rolled_through`]: what rolled out is not read) up to `upto` (its
    /// counter, read first: see [`Store::last_sequence`]), read [`TIMELINE_CHUNK`] entries at
    /// a time: each call of the returned reader gives the next chunk in sequence order,
    /// `None` after the last. The one chunked reader of every evidence writer and of an
    /// attempt's load.
    pub fn timeline_chunks<'a>(
        &'a self,
        attempt_id: &'a str,
        after: u64,
        upto: u64,
    ) -> impl FnMut() -> Result<Option<Vec<EvidenceEntry>>, StoreError> + 'a {
        let mut cursor = TimelineCursor::new(after, upto);
        move || {
            let chunk = self.timeline_chunk(attempt_id, &mut cursor, TIMELINE_CHUNK)?;
            Ok((!chunk.is_empty()).then_some(chunk))
        }
    }

    /// Test hook: removes event `seq` of a closed attempt from its evidence file, as a lost
    /// write would (the verdict must then fail). Not for serving code.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn remove_event_for_test(&self, attempt_id: &str, seq: u64) -> std::io::Result<bool> {
        on!(self, b => b.remove_event_for_test(attempt_id, seq))
    }

    /// Every call of the attempt, in sequence order (agent-side events left out: see
    /// [`Store::timeline`]).
    pub fn evidence(&self, attempt_id: &str) -> Result<Vec<ToolEvent>, StoreError> {
        Ok(self
            .timeline(attempt_id)?
            .into_iter()
            .filter_map(|e| match e {
                EvidenceEntry::Call(c) => Some(c),
                EvidenceEntry::Agent(_) => None,
            })
            .collect())
    }

    // ---- durability ----------------------------------------------------------------------

    /// Waits for a group commit covering every write made before this call (shutdown);
    /// on PostgreSQL, for every commit in flight.
    pub async fn flush(&self) -> Result<(), StoreError> {
        if let Backend::Postgres(p) = &*self.inner {
            p.wait_idle().await;
            return Ok(());
        }
        self.wait_durable().await
    }

    /// The durability half of a call's answer, by the attempt's durability: `call` →
    /// [`Store::wait_durable`]; `attempt` on the embedded store → a background commit is
    /// asked for (within `journal::BACKGROUND_FLUSH`) and the answer does
    /// not wait for it. PostgreSQL keeps `call` semantics for both (README, decisions: the
    /// commit is what other processes read, and a kill of understudy loses nothing there).
    pub fn acknowledge(
        &self,
        durability: Durability,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send + '_ {
        let background = match (&*self.inner, durability) {
            (Backend::Embedded(e), Durability::Attempt) => {
                e.flush_soon();
                true
            }
            _ => false,
        };
        let wait = (!background).then(|| self.wait_durable());
        async move {
            match wait {
                Some(w) => w.await,
                None => Ok(()),
            }
        }
    }

    /// Makes the attempt's evidence durable before it is read for a verdict: for durability
    /// `attempt`, awaits a commit covering every write made so far (a no-op for `call`,
    /// whose acknowledged calls are durable already).
    pub async fn make_durable(&self, durability: Durability) -> Result<(), StoreError> {
        match durability {
            Durability::Call => Ok(()),
            Durability::Attempt => self.flush().await,
        }
    }

    /// How many group commits (journal fsyncs) have been performed since open.
    pub fn flush_count(&self) -> u64 {
        on!(self, b => b.flush_count())
    }

    /// A call of `attempt_id` is answered 500 `store_error`: count it in the attempt's
    /// record, durably, before the answer leaves, on a path independent of the failed event
    /// write (embedded: sled's own flush, not the journal; PostgreSQL: its own transaction).
    /// Returns the new count. When this fails too, the caller fails the attempt in memory
    /// and calls [`Store::store_failure_unrecorded`].
    pub fn mark_store_failure(&self, attempt_id: &str) -> Result<u64, StoreError> {
        check_attempt_id(attempt_id)?;
        #[cfg(any(test, feature = "test-hooks"))]
        {
            use std::sync::atomic::Ordering;
            if self
                .fail_marks
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(StoreError::Backend(
                    "test hook: the store-failure mark cannot be written".into(),
                ));
            }
        }
        match &*self.inner {
            Backend::Embedded(e) => e.mark_store_failure(attempt_id),
            Backend::Postgres(p) => p.mark_store_failure(attempt_id),
        }
    }

    /// Even the mark of [`Store::mark_store_failure`] could not be written for `attempt_id`:
    /// leave a sign for the next start. Embedded: the open marker is renamed (no free space
    /// needed) and the next open marks every attempt open then `interrupted`. PostgreSQL: the
    /// attempt id is appended to [`UNMARKED_STORE_FAILURES`] in this process's own data dir
    /// (the database is what failed), and the next open of the store writes the marks it
    /// lists ([`Store::open_postgres`]). `Err` when not even that worked.
    pub fn store_failure_unrecorded(&self, attempt_id: &str) -> Result<(), StoreError> {
        match &*self.inner {
            Backend::Embedded(e) => e.store_failure_unrecorded(),
            Backend::Postgres(p) => {
                use std::io::Write;
                check_attempt_id(attempt_id)?;
                let dir = p.data_dir();
                let io = |e: std::io::Error| StoreError::Backend(e.to_string());
                std::fs::create_dir_all(dir).map_err(io)?;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join(UNMARKED_STORE_FAILURES))
                    .map_err(io)?;
                f.write_all(format!("{attempt_id}\n").as_bytes())
                    .and_then(|()| f.sync_all())
                    .and_then(|()| std::fs::File::open(dir)?.sync_all())
                    .map_err(io)
            }
        }
    }

    /// At open of a PostgreSQL store: the store-failure marks this process could not write
    /// before ([`Store::store_failure_unrecorded`]) are written now, one per line of
    /// [`UNMARKED_STORE_FAILURES`], which is then removed. `Err` (the store does not open)
    /// when a mark still cannot be written: serving on would forget a failure.
    pub(super) fn write_unmarked_store_failures(&self) -> Result<(), StoreError> {
        let path = self.data_dir().join(UNMARKED_STORE_FAILURES);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(StoreError::Backend(format!(
                    "cannot read {}: {e}",
                    path.display()
                )))
            }
        };
        for id in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            match self.mark_store_failure(id) {
                Ok(_) => {}
                // An attempt that is not in this database (another store, since removed).
                Err(StoreError::Invalid(why)) => {
                    tracing::warn!(attempt = id, %why, "an unmarked store failure names no attempt of this store")
                }
                Err(e) => {
                    return Err(StoreError::Backend(format!(
                        "cannot write the store failure of attempt {id} left in {}: {e}",
                        path.display()
                    )))
                }
            }
        }
        std::fs::remove_file(&path)
            .map_err(|e| StoreError::Backend(format!("cannot remove {}: {e}", path.display())))
    }

    /// Test hook: the next `n` [`Store::mark_store_failure`] calls fail.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn fail_next_marks_for_test(&self, n: u64) {
        self.fail_marks
            .store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Test hook: the flusher holds its next commit until [`Store::resume_flushes`]. Writes
    /// continue; `record_call` waits. Lets tests observe batching without timing.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn pause_flushes(&self) {
        on!(self, b => b.pause_flushes());
    }

    /// Test hook: the next `n` [`Store::wait_durable`] calls fail as a failed group commit
    /// does, without touching the writes (they stay queued and the next flush commits them,
    /// as after a transient disk error).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn fail_next_flushes_for_test(&self, n: u64) {
        self.fail_flushes
            .store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Test hook: releases [`Store::pause_flushes`].
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn resume_flushes(&self) {
        on!(self, b => b.resume_flushes());
    }

    /// The durability half of `record_call`: returns once a group commit that took every
    /// frame queued before this call has completed, so every [`Store::write_call`] that
    /// returned before is durable. On PostgreSQL: once the commits of the `write_call`s
    /// made by the calling task (or, outside tokio tasks, thread) since its last
    /// `wait_durable` are done; call it from the task that called `write_call`.
    pub fn wait_durable(
        &self,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send + '_ {
        let pending = match &*self.inner {
            Backend::Embedded(_) => None,
            Backend::Postgres(p) => Some(p.take_pending()),
        };
        async move {
            #[cfg(any(test, feature = "test-hooks"))]
            if self
                .fail_flushes
                .fetch_update(
                    std::sync::atomic::Ordering::SeqCst,
                    std::sync::atomic::Ordering::SeqCst,
                    |n| n.checked_sub(1),
                )
                .is_ok()
            {
                return Err(StoreError::Backend(
                    "the flush failed (a failure injected by a test hook)".into(),
                ));
            }
            match (pending, &*self.inner) {
                (Some(jobs), _) => {
                    let mut result = Ok(());
                    for j in jobs {
                        let r = j.await.unwrap_or_else(|_| {
                            Err(StoreError::Backend("the store runtime stopped".into()))
                        });
                        if result.is_ok() {
                            result = r;
                        }
                    }
                    result
                }
                (None, Backend::Embedded(e)) => e.wait_durable().await,
                (None, Backend::Postgres(_)) => Ok(()),
            }
        }
    }

    /// A synchronous checkpoint, for the rare writes outside calls: commits the journal,
    /// fsyncs the evidence files, makes sled durable and starts a new journal epoch.
    pub fn flush_now(&self) -> Result<(), StoreError> {
        match &*self.inner {
            Backend::Embedded(e) => e.flush_now(),
            // Every PostgreSQL write outside calls is committed when it returns.
            Backend::Postgres(_) => Ok(()),
        }
    }
}

/// Whether `a` is an exclusive attempt still open at `now` (not ended, lease not expired;
/// an `expires_at` that does not parse counts as open, so the call still fails it).
pub(in crate::store) fn open_exclusive(
    a: &AttemptRecord,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    let expired = a
        .expires_at
        .as_deref()
        .and_then(|e| chrono::DateTime::parse_from_rfc3339(e).ok())
        .is_some_and(|e| now >= e);
    a.exclusive && !a.is_default && a.ended_at.is_none() && !expired
}

/// One more call outside the exclusive attempt `a`, listed while fewer than
/// [`crate::records::MAX_OUTSIDE_LISTED`] are.
pub(in crate::store) fn add_outside(a: &mut AttemptRecord, line: &str) {
    a.outside_calls += 1;
    if a.outside.len() < crate::records::MAX_OUTSIDE_LISTED {
        a.outside.push(line.to_string());
    }
}
