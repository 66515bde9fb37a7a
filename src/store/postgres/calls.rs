//! A call under the attempt's row lock (the module doc of [`super`]): the statements, the
//! lock (`lock_call`, `lock_row`), the pipelined commit (`write_call`, `write_agent_event`,
//! `commit`), who awaits it, and the timeline read back in sequence order.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use deadpool_postgres::Object;
use serde_json::{Map, Value};

use super::{lock, pg_err, pool_err, text, to_i64, to_u64, Postgres, Shared};
use crate::records::{AgentEvent, EvidenceEntry, ResultStatus, ToolEvent};
use crate::store::embedded::{decode_json, encode_json};
use crate::store::{CallRecord, EncodedResult, StoreError};

pub(super) const S_CALL_ROW: &str = "INSERT INTO understudy_calls (attempt_id) SELECT $1::text \
     WHERE EXISTS (SELECT 1 FROM understudy_attempts WHERE attempt_id = $1::text) ON CONFLICT DO NOTHING";
const S_LOCK: &str =
    "SELECT last_seq, writer FROM understudy_calls WHERE attempt_id = $1 FOR UPDATE";
const S_STATE: &str =
    "SELECT integration, state FROM understudy_state WHERE attempt_id = $1 ORDER BY integration";
const S_IDEM: &str =
    "SELECT event FROM understudy_idempotency WHERE attempt_id = $1 ORDER BY sequence";
/// The chaos counters of an attempt from its evidence (the rule of
/// `crate::app::attempt::AttemptState::with_evidence`: a call of the mock that was evaluated
/// — `ok`, or `blocked` with a `fault` — advances its operation's index, a fault of origin
/// `chaos` its fired count). Only for an attempt created with `faults`: for the others the
/// `EXISTS` is false and no event is read.
const S_CHAOS: &str = "SELECT (e.event::jsonb->>'integration') || '/' || (e.event::jsonb->>'operation_id'), \
     count(*), count(*) FILTER (WHERE e.event::jsonb->'fault'->>'origin' = 'chaos') \
     FROM understudy_events e WHERE e.attempt_id = $1 AND e.kind = 'tool' \
     AND EXISTS (SELECT 1 FROM understudy_attempts a WHERE a.attempt_id = $1 AND a.record::jsonb ? 'faults') \
     AND e.event::jsonb->>'source' = 'mock' AND e.event::jsonb->>'operation_id' IS NOT NULL \
     AND (e.event::jsonb->>'result_status' = 'ok' OR (e.event::jsonb->>'result_status' = 'blocked' AND e.event::jsonb ? 'fault')) \
     GROUP BY 1";
const S_EVENT: &str =
    "INSERT INTO understudy_events (attempt_id, sequence, kind, event) VALUES ($1, $2, $4, $3)";
/// `understudy_events.kind` of a call's event.
const KIND_TOOL: &str = "tool";
/// `understudy_events.kind` of an agent-side event (docs/src/reference/events.md): same table, same sequence.
const KIND_AGENT: &str = "agent";
const S_SEQ: &str = "UPDATE understudy_calls SET last_seq = $2, writer = $3 WHERE attempt_id = $1";
pub(super) const S_PUT_STATE: &str =
    "INSERT INTO understudy_state (attempt_id, integration, state) VALUES ($1, $2, $3) \
     ON CONFLICT (attempt_id, integration) DO UPDATE SET state = EXCLUDED.state";
const S_PUT_IDEM: &str =
    "INSERT INTO understudy_idempotency (attempt_id, operation, key_ref, sequence, event) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";

/// The pre-call state read under the row lock, when this process's copy is not current.
#[derive(Debug, Default)]
pub struct Fresh {
    pub state: BTreeMap<String, Map<String, Value>>,
    /// The first `ok` event of each (operation, idempotency key ref), oldest first.
    pub idempotent: Vec<ToolEvent>,
    /// For an attempt with seeded chaos: per operation (`"<integration>/<operation_id>"`),
    /// how many of its calls were evaluated by the mock and how many of those faulted by
    /// chaos — derived from the attempt's own evidence under the row lock, so every process
    /// of a fleet goes on with one sequence (`times` is never exceeded). Empty otherwise.
    pub chaos: Vec<(String, u64, u64)>,
}

/// A row lock taken for one call, with the token of its [`super::CallLock`] (so that a late
/// release never drops the next call's lock).
pub(super) enum Held {
    Locked {
        conn: TxConn,
        last_seq: u64,
        token: u64,
    },
    Failed(String, u64),
}

impl Held {
    fn token(&self) -> u64 {
        match self {
            Held::Locked { token, .. } | Held::Failed(_, token) => *token,
        }
    }
}

/// A pooled connection inside a transaction. Dropped without [`TxConn::done`] (a failure, a
/// lock nobody consumed, a caller gone) it is taken out of the pool and closed, which rolls
/// the transaction back and releases the row lock; it never goes back to the pool mid-
/// transaction.
pub(super) struct TxConn(Option<Box<Object>>);

impl TxConn {
    fn get(&self) -> &Object {
        self.0.as_ref().expect("a live connection")
    }
    /// The transaction ended (committed): the connection goes back to the pool.
    fn done(mut self) {
        self.0.take();
    }
}

impl Drop for TxConn {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            drop(Object::take(*conn));
        }
    }
}

/// Who awaits a commit: the tokio task that called `write_call` (so an `.await` between
/// `write_call` and `wait_durable` is harmless), else the thread (sync callers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Waiter {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

impl Waiter {
    fn current() -> Waiter {
        match tokio::task::try_id() {
            Some(id) => Waiter::Task(id),
            None => Waiter::Thread(std::thread::current().id()),
        }
    }
}

pub(super) type Commit = tokio::task::JoinHandle<Result<(), StoreError>>;

impl Postgres {
    // ---- calls ---------------------------------------------------------------------------

    /// Step 1 of a call (module doc): the attempt's row lock. `Ok(None)`: this process's
    /// in-memory state is current; `Ok(Some)`: the state and idempotency entries to use.
    /// On `Err` the failure is also kept, so the attempt's `write_call` returns it.
    pub(in crate::store) async fn lock_call(
        &self,
        attempt_id: &str,
        token: u64,
    ) -> Result<Option<Fresh>, StoreError> {
        let s = self.shared.clone();
        let id = attempt_id.to_string();
        let seen = lock(&s.seen).get(attempt_id).copied();
        // Inserted into `held` here, after the await: a caller dropped meanwhile leaves the
        // connection in the task's output, which closes it.
        let r = self
            .handle
            .spawn(async move { lock_row(&s, &id, seen).await })
            .await
            .unwrap_or_else(|_| Err(StoreError::Backend("the store runtime stopped".into())));
        let mut held = lock(&self.shared.held);
        match r {
            Ok((conn, last_seq, fresh)) => {
                held.insert(
                    attempt_id.to_string(),
                    Held::Locked {
                        conn,
                        last_seq,
                        token,
                    },
                );
                Ok(fresh)
            }
            Err(e) => {
                held.insert(attempt_id.to_string(), Held::Failed(e.to_string(), token));
                Err(e)
            }
        }
    }

    /// Drops a row lock that no `write_call` consumed (rolls its transaction back).
    pub(in crate::store) fn release_call(&self, attempt_id: &str, token: u64) {
        let held = {
            let mut held = lock(&self.shared.held);
            match held.get(attempt_id) {
                Some(h) if h.token() == token => held.remove(attempt_id),
                _ => None,
            }
        };
        if let Some(Held::Locked { conn, .. }) = held {
            lock(&self.shared.seen).remove(attempt_id);
            // Closing the connection ends its transaction; the pool opens a new one.
            drop(conn);
        }
    }

    /// The row lock of the attempt's next write: the one `lock_call` took (whose pre-call
    /// state the caller applied), else taken now (a path without `lock_call`: blocking).
    /// Returns the locked connection, the row's `last_seq`, and whether this process's
    /// in-memory copy of the attempt is current.
    fn take_lock(&self, attempt_id: &str) -> Result<(TxConn, u64, bool), StoreError> {
        let held = lock(&self.shared.held).remove(attempt_id);
        match held {
            Some(Held::Locked { conn, last_seq, .. }) => Ok((conn, last_seq, true)),
            Some(Held::Failed(m, _)) => Err(StoreError::Backend(m)),
            None => {
                let id = attempt_id.to_string();
                let seen = lock(&self.shared.seen).get(attempt_id).copied();
                let (conn, last_seq, fresh) =
                    self.block(move |s| async move { lock_row(&s, &id, seen).await })?;
                Ok((conn, last_seq, fresh.is_none()))
            }
        }
    }

    pub(in crate::store) fn write_call(
        &self,
        attempt_id: &str,
        mut rec: CallRecord,
    ) -> Result<u64, StoreError> {
        let (conn, last_seq, current) = self.take_lock(attempt_id)?;
        let seq = last_seq + 1;
        rec.event.sequence = seq;
        let event = text(crate::store::event_json::encode(
            &rec.event,
            rec.result_json.as_ref().map(EncodedResult::as_bytes),
        )?);
        let state = match &rec.state {
            Some((integ, map)) => Some((integ.clone(), text(encode_json(map)?))),
            None => None,
        };
        let idem = match (&rec.event.idempotency_key_ref, &rec.event.operation_id) {
            (Some(r), Some(op)) if rec.event.result_status == ResultStatus::Ok => {
                Some((format!("{}/{op}", rec.event.integration), r.clone()))
            }
            _ => None,
        };
        let entry = Entry {
            seq,
            kind: KIND_TOOL,
            event,
            state,
            idem,
        };
        self.spawn_commit(attempt_id, conn, current, entry);
        Ok(seq)
    }

    /// An agent-side event: the attempt's next sequence under its row lock, kind `agent`;
    /// durable once `wait_durable` (from this task) returns.
    pub(in crate::store) fn write_agent_event(
        &self,
        attempt_id: &str,
        mut ev: AgentEvent,
    ) -> Result<u64, StoreError> {
        let (conn, last_seq, current) = self.take_lock(attempt_id)?;
        let seq = last_seq + 1;
        ev.sequence = seq;
        let entry = Entry {
            seq,
            kind: KIND_AGENT,
            event: text(encode_json(&ev)?),
            state: None,
            idem: None,
        };
        self.spawn_commit(attempt_id, conn, current, entry);
        Ok(seq)
    }

    /// Spawns the commit of one entry on the locked connection and queues it for the
    /// current task's `wait_durable`. `current`: this process's in-memory copy of the
    /// attempt was current under the lock, so it stays current after this write (the row's
    /// `writer` says so); otherwise the row is marked for every process to reload.
    fn spawn_commit(&self, attempt_id: &str, conn: TxConn, current: bool, entry: Entry) {
        let seq = entry.seq;
        if current {
            lock(&self.shared.seen).insert(attempt_id.to_string(), seq);
        } else {
            lock(&self.shared.seen).remove(attempt_id);
        }
        let s = self.shared.clone();
        let id = attempt_id.to_string();
        s.inflight.send_modify(|n| *n += 1);
        let job = self.handle.spawn(async move {
            let writer = if current { s.writer.as_str() } else { "" };
            let r = commit(&s, conn, &id, writer, entry).await;
            if r.is_err() {
                lock(&s.seen).remove(&id);
            } else {
                s.commits.fetch_add(1, Ordering::Relaxed);
            }
            s.inflight.send_modify(|n| *n -= 1);
            r
        });
        lock(&self.shared.pending)
            .entry(Waiter::current())
            .or_default()
            .push(job);
    }

    /// The commits spawned by the current task (or thread) and not yet awaited.
    pub(in crate::store) fn take_pending(&self) -> Vec<Commit> {
        lock(&self.shared.pending)
            .remove(&Waiter::current())
            .unwrap_or_default()
    }

    /// Every commit in flight, whichever thread spawned it (shutdown's `flush`).
    pub(in crate::store) async fn wait_idle(&self) {
        let mut rx = self.shared.inflight.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(in crate::store) fn remove_event_for_test(
        &self,
        attempt_id: &str,
        seq: u64,
    ) -> std::io::Result<bool> {
        let id = attempt_id.to_string();
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            let n = conn
                .execute(
                    "DELETE FROM understudy_events WHERE attempt_id = $1 AND sequence = $2",
                    &[&id, &to_i64(seq)],
                )
                .await
                .map_err(pg_err)?;
            Ok(n > 0)
        })
        .map_err(std::io::Error::other)
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(in crate::store) fn pause_flushes(&self) {
        self.shared.paused.send_replace(true);
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(in crate::store) fn resume_flushes(&self) {
        self.shared.paused.send_replace(false);
    }

    pub(in crate::store) fn last_sequence(&self, attempt_id: &str) -> Result<u64, StoreError> {
        let id = attempt_id.to_string();
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            Ok(conn
                .query_opt(
                    "SELECT last_seq FROM understudy_calls WHERE attempt_id = $1",
                    &[&id],
                )
                .await
                .map_err(pg_err)?
                .map_or(0, |r| to_u64(r.get(0))))
        })
    }

    /// One chunk of the timeline: one indexed range query (the primary key).
    pub(in crate::store) fn timeline_chunk(
        &self,
        attempt_id: &str,
        cur: &mut crate::store::TimelineCursor,
        limit: usize,
    ) -> Result<Vec<EvidenceEntry>, StoreError> {
        let id = attempt_id.to_string();
        let (after, upto) = (cur.after, cur.upto);
        let out = self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            let rows = conn
                .query(
                    "SELECT sequence, kind, event FROM understudy_events WHERE attempt_id = $1 AND sequence > $2 AND sequence <= $3 ORDER BY sequence LIMIT $4",
                    &[&id, &to_i64(after), &to_i64(upto), &(limit as i64)],
                )
                .await
                .map_err(pg_err)?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                let seq = to_u64(r.get(0));
                out.push(decode_row(&id, seq, r.get(1), r.get::<_, &str>(2).as_bytes())?);
            }
            Ok(out)
        })?;
        cur.after = out.last().map_or(upto, EvidenceEntry::sequence);
        Ok(out)
    }

    /// Calls and agent-side events, in sequence order (dense up to the row's `last_seq`).
    pub(in crate::store) fn timeline(
        &self,
        attempt_id: &str,
    ) -> Result<Vec<EvidenceEntry>, StoreError> {
        let id = attempt_id.to_string();
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            // The counter first: writes only add events (see the embedded backend).
            let recorded = conn
                .query_opt(
                    "SELECT last_seq FROM understudy_calls WHERE attempt_id = $1",
                    &[&id],
                )
                .await
                .map_err(pg_err)?
                .map_or(0, |r| to_u64(r.get(0)));
            let rows = conn
                .query(
                    "SELECT sequence, kind, event FROM understudy_events WHERE attempt_id = $1 AND sequence <= $2 ORDER BY sequence",
                    &[&id, &to_i64(recorded)],
                )
                .await
                .map_err(pg_err)?;
            let mut out = Vec::with_capacity(rows.len());
            let mut last = 0u64;
            for r in &rows {
                let seq = to_u64(r.get(0));
                if seq != last + 1 {
                    break;
                }
                last = seq;
                out.push(decode_row(&id, seq, r.get(1), r.get::<_, &str>(2).as_bytes())?);
            }
            crate::store::missing_tail(&id, recorded, last)?;
            Ok(out)
        })
    }

    pub(in crate::store) fn flush_count(&self) -> u64 {
        self.shared.commits.load(Ordering::Relaxed)
    }
}

/// One row of `understudy_events` as an entry of the timeline.
fn decode_row(id: &str, seq: u64, kind: &str, json: &[u8]) -> Result<EvidenceEntry, StoreError> {
    let what = format!("event {id}#{seq}");
    Ok(match kind {
        KIND_TOOL => {
            let mut e: ToolEvent = decode_json(json, &what)?;
            e.sequence = seq;
            EvidenceEntry::Call(e)
        }
        KIND_AGENT => {
            let mut e: AgentEvent = decode_json(json, &what)?;
            e.sequence = seq;
            EvidenceEntry::Agent(e)
        }
        other => {
            return Err(StoreError::Corrupt {
                key: what,
                message: format!("unknown event kind {other:?}"),
            })
        }
    })
}

pub(super) async fn read_state(
    conn: &Object,
    id: &str,
) -> Result<BTreeMap<String, Map<String, Value>>, StoreError> {
    let st = conn.prepare_cached(S_STATE).await.map_err(pg_err)?;
    let rows = conn.query(&st, &[&id]).await.map_err(pg_err)?;
    let mut out = BTreeMap::new();
    for r in &rows {
        let integ: String = r.get(0);
        let map = decode_json(
            r.get::<_, &str>(1).as_bytes(),
            &format!("state {id}/{integ}"),
        )?;
        out.insert(integ, map);
    }
    Ok(out)
}

/// BEGIN, insert-if-missing, `SELECT … FOR UPDATE` (one round trip), and the pre-call state
/// when `seen` (the sequence this process last wrote) is not what the row says.
async fn lock_row(
    s: &Shared,
    id: &str,
    seen: Option<u64>,
) -> Result<(TxConn, u64, Option<Fresh>), StoreError> {
    let conn = TxConn(Some(Box::new(s.pool.get().await.map_err(pool_err)?)));
    let run = async {
        let conn = conn.get();
        let (ins, sel) =
            tokio::try_join!(conn.prepare_cached(S_CALL_ROW), conn.prepare_cached(S_LOCK))
                .map_err(pg_err)?;
        let p_id: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&id];
        let (_, _, row) = tokio::try_join!(
            conn.batch_execute("BEGIN"),
            conn.execute(&ins, &p_id),
            conn.query_opt(&sel, &p_id),
        )
        .map_err(pg_err)?;
        let Some(row) = row else {
            return Err(StoreError::Invalid(format!(
                "cannot record a call for unknown attempt {id}"
            )));
        };
        let last_seq = to_u64(row.get(0));
        let writer: &str = row.get(1);
        if seen == Some(last_seq) && writer == s.writer {
            return Ok((last_seq, None));
        }
        let (idem, chaos) =
            tokio::try_join!(conn.prepare_cached(S_IDEM), conn.prepare_cached(S_CHAOS))
                .map_err(pg_err)?;
        let (state, rows, chaos) = tokio::try_join!(
            read_state(conn, id),
            async { conn.query(&idem, &[&id]).await.map_err(pg_err) },
            async { conn.query(&chaos, &[&id]).await.map_err(pg_err) },
        )?;
        let chaos = chaos
            .iter()
            .map(|r| {
                (
                    r.get::<_, Option<String>>(0).unwrap_or_default(),
                    to_u64(r.get(1)),
                    to_u64(r.get(2)),
                )
            })
            .collect();
        let idempotent = rows
            .iter()
            .map(|r| {
                decode_json(
                    r.get::<_, &str>(0).as_bytes(),
                    &format!("idempotency entry of {id}"),
                )
            })
            .collect::<Result<Vec<ToolEvent>, _>>()?;
        Ok((
            last_seq,
            Some(Fresh {
                state,
                idempotent,
                chaos,
            }),
        ))
    };
    // On `Err`, `conn` is dropped: closed, never back in the pool mid-transaction.
    let (last_seq, fresh) = run.await?;
    Ok((conn, last_seq, fresh))
}

/// One write under a row lock: a call's event (with its state change and first-`ok`
/// idempotency row) or an agent-side event.
struct Entry {
    seq: u64,
    /// [`KIND_TOOL`] or [`KIND_AGENT`].
    kind: &'static str,
    event: String,
    state: Option<(String, String)>,
    idem: Option<(String, String)>,
}

/// Step 2 of a call (or an agent event): the writes and COMMIT, pipelined; on failure the
/// connection is dropped (the server rolls back). `writer` is what the row's `writer`
/// becomes (this process's id, or empty: every process reloads).
async fn commit(
    #[allow(unused_variables)] s: &Shared,
    conn: TxConn,
    id: &str,
    writer: &str,
    entry: Entry,
) -> Result<(), StoreError> {
    let Entry {
        seq,
        kind,
        event,
        state,
        idem,
    } = entry;
    #[cfg(any(test, feature = "test-hooks"))]
    {
        let mut rx = s.paused.subscribe();
        let _ = rx.wait_for(|p| !p).await;
    }
    let seq = to_i64(seq);
    let run = async {
        let conn = conn.get();
        let (ev, up, st, im) = tokio::try_join!(
            conn.prepare_cached(S_EVENT),
            conn.prepare_cached(S_SEQ),
            conn.prepare_cached(S_PUT_STATE),
            conn.prepare_cached(S_PUT_IDEM),
        )?;
        let p_ev: [&(dyn tokio_postgres::types::ToSql + Sync); 4] = [&id, &seq, &event, &kind];
        let p_up: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&id, &seq, &writer];
        tokio::try_join!(
            conn.execute(&ev, &p_ev),
            conn.execute(&up, &p_up),
            async {
                match &state {
                    Some((integ, json)) => conn.execute(&st, &[&id, integ, json]).await,
                    None => Ok(0),
                }
            },
            async {
                match &idem {
                    Some((op, r)) => conn.execute(&im, &[&id, op, r, &seq, &event]).await,
                    None => Ok(0),
                }
            },
            conn.batch_execute("COMMIT"),
        )
    };
    match run.await {
        Ok(_) => {
            conn.done();
            Ok(())
        }
        Err(e) => Err(pg_err(e)), // `conn` is dropped: closed
    }
}
