//! The commit lane and the attempts' leases (docs/src/operations/fleet-store.md).
//!
//! **The lease.** A process serves an attempt's calls only while it holds the attempt's
//! *lease*: a session-level advisory lock (`pg_try_advisory_lock(hashtextextended(id, 34))`)
//! taken on this process's one lane connection. While it holds it, no other process writes
//! the attempt (every writer of an attempt's events, state or idempotency rows holds it), so
//! this process's in-memory state of the attempt is current and a call needs no round trip
//! before it is evaluated. The lease is taken (then the attempt's row is read, and its state,
//! idempotency entries and chaos counters when another process wrote last) on the attempt's
//! first call, kept across commits, and given back (after the commit of its last write):
//! when idle for [`IDLE_RELEASE`], when another process asks for it (`NOTIFY understudy_want`,
//! sent by a process whose `pg_try_advisory_lock` failed; it retries every [`RETRY`] until
//! [`super::LOCK_TIMEOUT_MS`]), and when this process has more than [`MAX_OWNED`]. The
//! session ends with the process (kill -9 closes its socket; PostgreSQL ends the session and
//! its locks at once), so a survivor takes the attempt over on its next call, after reading
//! what was committed. A lease can never be held by a dead session's writes: writes go over
//! the session that holds it, and a connection that fails loses every lease with it (calls
//! in flight are answered `store_error`, and every attempt is read afresh on its next call).
//!
//! **The lane.** Calls' writes are queued in the open batch and committed by one task, one
//! batch at a time: `BEGIN`; the events, states, first-`ok` idempotency rows and each
//! attempt's `last_seq` (multi-row statements over arrays, so a batch costs the same five
//! statements however many calls it carries); `COMMIT` — pipelined in one round trip. While
//! a batch commits, the next one fills (group commit, no timer). A call is answered only
//! after the commit of its batch (`wait_durable`). A failed batch drops the connection (its
//! leases with it) and fails the open batch too, whose calls may have read its state.
//! The `last_seq` update checks the sequence the batch started from (`last_seq = prev`) and
//! a batch whose update misses an attempt fails: a second writer can never slip in unseen.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch, Notify};
use tokio_postgres::NoTls;

mod holds;

use super::batch::{Entry, LaneConn};
use super::{lock, pg_err, Shared};
use crate::store::StoreError;
use holds::Hold;

/// A lease unused this long is given back.
pub const IDLE_RELEASE: Duration = Duration::from_secs(2);
/// Leases kept at most (each is an entry of PostgreSQL's shared lock table).
pub const MAX_OWNED: usize = 1024;
/// How often a process waiting for another's lease tries again.
pub const RETRY: Duration = Duration::from_millis(2);
/// After giving a lease to a process that asked, this process does not take it back
/// sooner (so that the asker, retrying every [`RETRY`], gets it).
const YIELD: Duration = Duration::from_millis(50);
/// How often a process waiting for a lease asks again (`NOTIFY understudy_want`).
const ASK_AGAIN: Duration = Duration::from_millis(20);
/// Asked for its lease, a process still serves the attempt's calls this long (so that a
/// hand-over carries several calls, not one), then gives it back.
const GRACE: Duration = Duration::from_millis(5);
/// The notification channel of lease requests: payload `"<writer> <attempt_id>"`.
pub(super) const WANT: &str = "understudy_want";

const S_TRY: &str = "SELECT pg_try_advisory_lock(hashtextextended($1, 34))";
const S_UNLOCK: &str =
    "SELECT pg_advisory_unlock(hashtextextended(x, 34)) FROM unnest($1::text[]) AS x";
/// An attempt whose lease this process holds.
struct Owned {
    /// The connection generation that holds it.
    gen: u64,
    /// Unique per acquisition: a hold taken under another one is void.
    own_id: u64,
    /// Calls between `lock_call` and their write (at most one per attempt: the caller holds
    /// the attempt's in-memory lock), plus exclusive operations in progress.
    holders: u32,
    /// Another process asked for it (when): no new holder after [`GRACE`], given back once
    /// free.
    wanted: Option<Instant>,
    /// A state write outside calls runs: calls wait.
    exclusive: bool,
    /// This process's in-memory copy is current (false: read it under the lease first).
    current: bool,
    last_seq: u64,
    /// The batch holding its last write (given back only once that one has committed).
    last_batch: u64,
    last_used: Instant,
}

#[derive(Default)]
struct Batch {
    /// (attempt, previous last_seq in the database for its first entry here, entry)
    entries: Vec<(String, u64, Entry)>,
    waiters: Vec<oneshot::Sender<Result<(), StoreError>>>,
}

#[derive(Default)]
struct State {
    conn: Option<Arc<LaneConn>>,
    gen: u64,
    owned: HashMap<String, Owned>,
    holds: HashMap<String, Hold>,
    open: Batch,
    /// The number of the open batch (the committing one is `open_no - 1`).
    open_no: u64,
    /// Given back to a process that asked: when.
    yielded: HashMap<String, Instant>,
    /// Asked another process for its lease: when.
    asked: HashMap<String, Instant>,
    /// Asked by another process for a lease this one did not hold (yet): when.
    wants: HashMap<String, Instant>,
    /// Attempts whose lease a task of this process is taking now (one at a time: the lock
    /// is re-entrant, a second take would count twice).
    taking: std::collections::HashSet<String>,
}

pub(super) struct Lane {
    st: Mutex<State>,
    wake: Notify,
    /// The last batch number whose commit ended (successfully or not).
    done: watch::Sender<u64>,
    connecting: tokio::sync::Mutex<()>,
    ids: AtomicU64,
    gens: AtomicU64,
}

/// What `acquire` hands back: the pre-call state to apply when this process's copy is not
/// current.
pub(super) type Acquired = Option<super::Fresh>;

impl Lane {
    pub(super) fn new() -> Lane {
        Lane {
            st: Mutex::new(State {
                open_no: 1,
                ..State::default()
            }),
            wake: Notify::new(),
            done: watch::Sender::new(0),
            connecting: tokio::sync::Mutex::new(()),
            ids: AtomicU64::new(1),
            gens: AtomicU64::new(1),
        }
    }
}

fn lost() -> StoreError {
    StoreError::Backend(
        "the attempt's lease was lost (the store connection failed): the call is not recorded"
            .into(),
    )
}

/// The lane connection, connecting when there is none.
async fn conn(s: &Shared) -> Result<Arc<LaneConn>, StoreError> {
    if let Some(c) = lock(&s.lane.st).conn.clone() {
        return Ok(c);
    }
    let _g = s.lane.connecting.lock().await;
    if let Some(c) = lock(&s.lane.st).conn.clone() {
        return Ok(c);
    }
    let (client, connection) = tokio::time::timeout(super::POOL_TIMEOUT, s.cfg.connect(NoTls))
        .await
        .map_err(|_| StoreError::Backend("PostgreSQL unavailable: connect timed out".into()))?
        .map_err(pg_err)?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let (s_try, s_unlock, s_events, s_states, s_idems, s_seqs) = tokio::try_join!(
        client.prepare(S_TRY),
        client.prepare(S_UNLOCK),
        client.prepare(super::batch::S_EVENTS),
        client.prepare(super::batch::S_STATES),
        client.prepare(super::batch::S_IDEMS),
        client.prepare(super::batch::S_SEQS),
    )
    .map_err(pg_err)?;
    let gen = s.lane.gens.fetch_add(1, Ordering::Relaxed);
    let c = Arc::new(LaneConn {
        client,
        gen,
        s_try,
        s_unlock,
        s_events,
        s_states,
        s_idems,
        s_seqs,
    });
    let mut st = lock(&s.lane.st);
    st.gen = gen;
    st.conn = Some(c.clone());
    Ok(c)
}

/// The connection of generation `gen` failed: every lease goes with it, the open batch
/// fails, every attempt is read afresh on its next call.
pub(super) fn fail_conn(s: &Shared, gen: u64, why: &str) {
    let open = {
        let mut st = lock(&s.lane.st);
        if st.gen != gen || st.conn.is_none() {
            return;
        }
        st.conn = None;
        st.owned.clear();
        std::mem::take(&mut st.open)
    };
    lock(&s.seen).clear();
    tracing::warn!(error = %why, "the store's lane connection failed: its leases are given up");
    let n = open.entries.len();
    for w in open.waiters {
        let _ = w.send(Err(StoreError::Backend(why.to_string())));
    }
    s.inflight.send_modify(|x| *x = x.saturating_sub(n));
}

/// Counts one hold on a lease this process owns, when it may be used now: held on the live
/// connection, not held exclusively, and nobody has waited for it past the grace period.
/// Returns the acquisition id and whether the in-memory copy is current; `None`: wait.
fn count_hold(o: &mut Owned, gen: u64, connected: bool) -> Option<(u64, bool)> {
    let usable =
        connected && o.gen == gen && !o.exclusive && o.wanted.is_none_or(|t| t.elapsed() < GRACE);
    if !usable {
        return None;
    }
    o.holders += 1;
    o.last_used = Instant::now();
    Some((o.own_id, o.current))
}

impl Shared {
    /// [`Shared::hold`]'s first step when it needs no wait and no read: this process holds
    /// the attempt's lease on the live connection, nobody has waited for it past the grace
    /// period, and the in-memory copy is current. Then one hold is counted and its
    /// acquisition id returned at once, with no task on the store runtime (the common case
    /// of a busy attempt: every call of it but the first). `None`: take the slow path.
    fn hold_if_current(&self, st: &mut State, attempt_id: &str) -> Option<u64> {
        let (gen, connected) = (st.gen, st.conn.is_some());
        let o = st.owned.get_mut(attempt_id).filter(|o| o.current)?;
        count_hold(o, gen, connected).map(|(own_id, _)| own_id)
    }

    /// Takes one hold on the attempt's lease; returns the acquisition id and the state to
    /// apply when this process's copy is not current.
    ///
    /// Not cancel-safe (a hold counted before its read, `taking`, a lock granted before it
    /// is recorded): it runs only in a task of its own on the store runtime, which nothing
    /// cancels — `lock_call`'s spawned task, or a sync method's `block`.
    async fn hold(self: &Arc<Self>, attempt_id: &str) -> Result<(u64, Acquired), StoreError> {
        let deadline = Instant::now() + Duration::from_millis(super::LOCK_TIMEOUT_MS);
        loop {
            enum Next {
                Wait(Duration),
                Read(u64),
                Take,
            }
            let next = {
                let mut st = lock(&self.lane.st);
                let gen = st.gen;
                let connected = st.conn.is_some();
                match st.owned.get_mut(attempt_id) {
                    Some(o) if connected && o.gen == gen => match count_hold(o, gen, connected) {
                        None => Next::Wait(RETRY),
                        Some((own_id, true)) => return Ok((own_id, None)),
                        Some((own_id, false)) => Next::Read(own_id),
                    },
                    _ => match st.yielded.get(attempt_id) {
                        Some(t) if t.elapsed() < YIELD => Next::Wait(YIELD - t.elapsed()),
                        _ if st.taking.contains(attempt_id) => Next::Wait(RETRY),
                        _ => {
                            st.taking.insert(attempt_id.to_string());
                            Next::Take
                        }
                    },
                }
            };
            match next {
                Next::Wait(d) => {
                    if Instant::now() >= deadline {
                        return Err(timeout());
                    }
                    tokio::time::sleep(d).await;
                }
                Next::Read(own_id) => {
                    return match self.read_owned(attempt_id, own_id).await {
                        Ok(f) => Ok((own_id, f)),
                        Err(e) => {
                            self.unhold(attempt_id, own_id);
                            Err(e)
                        }
                    };
                }
                Next::Take => {
                    let took = self.take(attempt_id).await;
                    lock(&self.lane.st).taking.remove(attempt_id);
                    if let Some(r) = took? {
                        return Ok(r);
                    }
                    if Instant::now() >= deadline {
                        return Err(timeout());
                    }
                    self.ask(attempt_id).await;
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }

    fn unhold(&self, attempt_id: &str, own_id: u64) {
        let mut st = lock(&self.lane.st);
        if let Some(o) = st.owned.get_mut(attempt_id) {
            if o.own_id == own_id {
                o.holders = o.holders.saturating_sub(1);
            }
        }
        self.lane.wake.notify_one();
    }

    /// One try at the lease; `None`: another process holds it.
    async fn take(
        self: &Arc<Self>,
        attempt_id: &str,
    ) -> Result<Option<(u64, Acquired)>, StoreError> {
        let c = conn(self).await?;
        let got: bool = match c.client.query_one(&c.s_try, &[&attempt_id]).await {
            Ok(row) => row.get(0),
            Err(e) => {
                let e = pg_err(e);
                fail_conn(self, c.gen, &e.to_string());
                return Err(e);
            }
        };
        if !got {
            return Ok(None);
        }
        let own_id = self.lane.ids.fetch_add(1, Ordering::Relaxed);
        {
            let mut st = lock(&self.lane.st);
            if st.gen != c.gen || st.conn.is_none() {
                // The session that took it is gone, and the lock with it.
                return Err(lost());
            }
            let prior = st.owned.insert(
                attempt_id.to_string(),
                Owned {
                    gen: c.gen,
                    own_id,
                    holders: 1,
                    wanted: None,
                    exclusive: false,
                    current: false,
                    last_seq: 0,
                    last_batch: 0,
                    last_used: Instant::now(),
                },
            );
            if let Some(p) = prior {
                // Taken twice (re-entrant lock): keep the first acquisition's writes' place.
                let o = st.owned.get_mut(attempt_id).expect("just inserted");
                o.last_batch = p.last_batch;
            }
            st.yielded.remove(attempt_id);
            st.asked.remove(attempt_id);
            // Asked for while it was being taken: the notification found nothing to mark.
            if let Some(t) = st.wants.remove(attempt_id).filter(|t| t.elapsed() < YIELD) {
                if let Some(o) = st.owned.get_mut(attempt_id) {
                    o.wanted = Some(t);
                }
            }
        }
        match self.read_owned(attempt_id, own_id).await {
            Ok(f) => Ok(Some((own_id, f))),
            Err(e) => {
                self.unhold(attempt_id, own_id);
                Err(e)
            }
        }
    }

    /// Under the lease: the attempt's row, and its state when this process did not write it
    /// last. Its own earlier writes have committed (a lease is given back only then, and a
    /// copy marked not current waits for them here).
    async fn read_owned(&self, attempt_id: &str, own_id: u64) -> Result<Acquired, StoreError> {
        let wait_for = lock(&self.lane.st)
            .owned
            .get(attempt_id)
            .map_or(0, |o| o.last_batch);
        let mut done = self.lane.done.subscribe();
        let _ = done.wait_for(|d| *d >= wait_for).await;
        let seen = lock(&self.seen).get(attempt_id).copied();
        let conn = self.pool.get().await.map_err(super::pool_err)?;
        let (last_seq, fresh) = super::calls::read_row(self, &conn, attempt_id, seen).await?;
        let mut st = lock(&self.lane.st);
        match st.owned.get_mut(attempt_id) {
            // Another writer of this process read it first and may have written since.
            Some(o) if o.own_id == own_id && o.current => Ok(None),
            Some(o) if o.own_id == own_id => {
                // Never below a sequence already given out under this lease.
                o.last_seq = o.last_seq.max(last_seq);
                o.current = true;
                Ok(fresh)
            }
            _ => Err(lost()),
        }
    }

    /// Asks the holder of the attempt's lease to give it back (at most every
    /// [`ASK_AGAIN`]).
    async fn ask(&self, attempt_id: &str) {
        {
            let mut st = lock(&self.lane.st);
            if st
                .asked
                .get(attempt_id)
                .is_some_and(|t| t.elapsed() < ASK_AGAIN)
            {
                return;
            }
            st.asked.insert(attempt_id.to_string(), Instant::now());
        }
        let payload = format!("{} {attempt_id}", self.writer);
        if let Ok(c) = self.pool.get().await {
            let _ = c
                .execute("SELECT pg_notify($1, $2)", &[&WANT, &payload])
                .await;
        }
    }

    /// Another process asked for the attempt's lease (the listener).
    pub(super) fn wanted(&self, payload: &str) {
        let Some((writer, attempt_id)) = payload.split_once(' ') else {
            return;
        };
        if writer == self.writer {
            return;
        }
        let mut st = lock(&self.lane.st);
        match st.owned.get_mut(attempt_id) {
            Some(o) => {
                o.wanted.get_or_insert_with(Instant::now);
                self.lane.wake.notify_one();
            }
            None => {
                st.wants.insert(attempt_id.to_string(), Instant::now());
            }
        }
    }

    /// Step 2 of a call: queues the write under the hold `lock_call` took (taking one now
    /// when it did not: `None` from `current_hold`). Returns the sequence, whether the
    /// in-memory copy was current, and the receiver of the batch's commit.
    pub(super) fn queue(
        &self,
        attempt_id: &str,
        direct: Option<u64>,
        mut encode: impl FnMut(u64) -> Result<Entry, StoreError>,
    ) -> Result<(u64, oneshot::Receiver<Result<(), StoreError>>), StoreError> {
        let own_id = match direct {
            Some(own_id) => own_id,
            None => {
                let mut st = lock(&self.lane.st);
                match st.holds.remove(attempt_id) {
                    Some(Hold::Owned { own_id, .. }) => own_id,
                    Some(Hold::Failed { message, .. }) => return Err(StoreError::Backend(message)),
                    None => {
                        return Err(StoreError::Invalid(format!(
                            "no hold of attempt {attempt_id} to write under"
                        )))
                    }
                }
            }
        };
        // The hold (counted in `holders`) ends here, whatever happens.
        let end_hold = |st: &mut State| {
            if let Some(o) = st.owned.get_mut(attempt_id).filter(|o| o.own_id == own_id) {
                o.holders = o.holders.saturating_sub(1);
                if o.wanted.is_some() && o.holders == 0 {
                    self.lane.wake.notify_one();
                }
            }
        };
        loop {
            let seq = {
                let mut st = lock(&self.lane.st);
                let live = st.conn.is_some();
                let gen = st.gen;
                match st.owned.get(attempt_id) {
                    Some(o) if o.own_id == own_id && o.gen == gen && live => o.last_seq + 1,
                    _ => {
                        end_hold(&mut st);
                        return Err(lost());
                    }
                }
            };
            // Encoded outside the lock; a concurrent write of the same attempt (several
            // writers without `lock_call`) that took the sequence first makes it encode again.
            let entry = encode(seq);
            let mut st = lock(&self.lane.st);
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    end_hold(&mut st);
                    return Err(e);
                }
            };
            let open_no = st.open_no;
            let Some(o) = st.owned.get_mut(attempt_id).filter(|o| o.own_id == own_id) else {
                return Err(lost());
            };
            if o.last_seq + 1 != seq {
                continue;
            }
            let prev = o.last_seq;
            // A copy in memory that is not current must not pass for current once this
            // write commits (`seen` is what `read_row` trusts).
            let current = o.current;
            o.last_seq = seq;
            o.last_batch = open_no;
            o.last_used = Instant::now();
            end_hold(&mut st);
            let (tx, rx) = oneshot::channel();
            // Counted before the lane can take it (its commit subtracts it).
            self.inflight.send_modify(|n| *n += 1);
            st.open.entries.push((attempt_id.to_string(), prev, entry));
            st.open.waiters.push(tx);
            drop(st);
            if current {
                lock(&self.seen).insert(attempt_id.to_string(), seq);
            } else {
                lock(&self.seen).remove(attempt_id);
            }
            self.lane.wake.notify_one();
            return Ok((seq, rx));
        }
    }

    /// A hold for a write without `lock_call` (its own acquisition id, for [`Shared::queue`]).
    pub(super) async fn hold_direct(self: &Arc<Self>, attempt_id: &str) -> Result<u64, StoreError> {
        let (own_id, fresh) = self.hold(attempt_id).await?;
        if fresh.is_some() {
            // No in-memory copy to apply it to here: the sequence is right (read under the
            // lease), but the attempt's copy in memory is not — the next call reads it.
            let mut st = lock(&self.lane.st);
            if let Some(o) = st.owned.get_mut(attempt_id).filter(|o| o.own_id == own_id) {
                o.current = false;
            }
            lock(&self.seen).remove(attempt_id);
        }
        Ok(own_id)
    }

    /// Runs `f` (a state write outside calls) with nobody else writing the attempt: under
    /// this process's lease when it holds it (calls wait, its own writes have committed
    /// first, and the next call reads the state afresh), else under the transaction-scoped
    /// form of the same lock, asking its holder for it.
    pub(super) async fn exclusive<T, F, Fut>(
        self: &Arc<Self>,
        attempt_id: &str,
        f: F,
    ) -> Result<T, StoreError>
    where
        F: FnOnce(Arc<Self>, bool) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let deadline = Instant::now() + Duration::from_millis(super::LOCK_TIMEOUT_MS);
        loop {
            let mine = {
                let mut st = lock(&self.lane.st);
                let gen = st.gen;
                match st.owned.get_mut(attempt_id) {
                    Some(o) if o.gen == gen && !o.exclusive => {
                        if o.holders == 0 {
                            o.exclusive = true;
                            o.holders += 1;
                            Some(Some((o.own_id, o.last_batch)))
                        } else {
                            Some(None)
                        }
                    }
                    Some(_) => Some(None),
                    None => None,
                }
            };
            let Some(mine) = mine else {
                return f(self.clone(), false).await;
            };
            let Some((own_id, last_batch)) = mine else {
                if Instant::now() >= deadline {
                    return Err(timeout());
                }
                tokio::time::sleep(RETRY).await;
                continue;
            };
            let mut done = self.lane.done.subscribe();
            let _ = done.wait_for(|d| *d >= last_batch).await;
            let r = f(self.clone(), true).await;
            let mut st = lock(&self.lane.st);
            if let Some(o) = st.owned.get_mut(attempt_id) {
                if o.own_id == own_id {
                    o.exclusive = false;
                    o.current = false;
                    o.holders = o.holders.saturating_sub(1);
                }
            }
            lock(&self.seen).remove(attempt_id);
            self.lane.wake.notify_one();
            return r;
        }
    }
}

fn timeout() -> StoreError {
    StoreError::Backend(format!(
        "store timeout: the attempt's lease was not handed over within {} ms (another process holds it)",
        super::LOCK_TIMEOUT_MS
    ))
}

/// The lane task: commits the open batch whenever there is one and the previous commit has
/// ended, then gives back the leases due.
pub(super) async fn run(s: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let (batch, no, conn) = {
            let mut st = lock(&s.lane.st);
            if st.open.entries.is_empty() {
                (None, 0, st.conn.clone())
            } else {
                let b = std::mem::take(&mut st.open);
                let no = st.open_no;
                st.open_no += 1;
                (Some(b), no, st.conn.clone())
            }
        };
        if let Some(batch) = batch {
            #[cfg(any(test, feature = "test-hooks"))]
            {
                let mut rx = s.paused.subscribe();
                let _ = rx.wait_for(|p| !p).await;
            }
            let n = batch.entries.len();
            let r = match &conn {
                Some(c) => super::batch::commit(&s, c, &batch.entries).await,
                None => Err(lost()),
            };
            match &r {
                Ok(()) => {
                    s.commits.fetch_add(1, Ordering::Relaxed);
                    for w in batch.waiters {
                        let _ = w.send(Ok(()));
                    }
                }
                Err(e) => {
                    let m = e.to_string();
                    if let Some(c) = &conn {
                        fail_conn(&s, c.gen, &m);
                    }
                    for w in batch.waiters {
                        let _ = w.send(Err(StoreError::Backend(m.clone())));
                    }
                }
            }
            s.inflight.send_modify(|x| *x = x.saturating_sub(n));
            s.lane.done.send_replace(no);
            give_back(&s).await;
            continue;
        }
        give_back(&s).await;
        tokio::select! {
            _ = s.lane.wake.notified() => {}
            _ = tick.tick() => {}
        }
    }
}

/// Gives back the leases due: asked for by another process, idle for [`IDLE_RELEASE`], or
/// beyond [`MAX_OWNED`] — only those with no hold and every write committed.
async fn give_back(s: &Shared) {
    let committed = *s.lane.done.borrow();
    let (conn, ids) = {
        let mut st = lock(&s.lane.st);
        let Some(conn) = st.conn.clone() else { return };
        let over = st.owned.len().saturating_sub(MAX_OWNED);
        let mut idle: Vec<(Instant, String)> = Vec::new();
        let mut ids = Vec::new();
        for (id, o) in &st.owned {
            if o.holders > 0 || o.exclusive || o.last_batch > committed {
                continue;
            }
            if o.wanted.is_some() || o.last_used.elapsed() >= IDLE_RELEASE {
                ids.push((id.clone(), o.wanted.is_some()));
            } else if over > 0 {
                idle.push((o.last_used, id.clone()));
            }
        }
        idle.sort();
        ids.extend(idle.into_iter().take(over).map(|(_, id)| (id, false)));
        if ids.is_empty() {
            return;
        }
        for (id, wanted) in &ids {
            st.owned.remove(id);
            if *wanted {
                st.yielded.insert(id.clone(), Instant::now());
            }
        }
        st.yielded.retain(|_, t| t.elapsed() < YIELD);
        st.asked.retain(|_, t| t.elapsed() < ASK_AGAIN);
        st.wants.retain(|_, t| t.elapsed() < YIELD);
        (conn, ids)
    };
    let ids: Vec<&str> = ids.iter().map(|(id, _)| id.as_str()).collect();
    if let Err(e) = conn.client.execute(&conn.s_unlock, &[&ids]).await {
        fail_conn(s, conn.gen, &pg_err(e).to_string());
    }
}
