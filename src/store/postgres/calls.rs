//! A call under the attempt's row lock (the module doc of [`super`]): the statements, the
//! lock (`lock_call`, `lock_row`), the pipelined commit (`write_call`, `write_agent_event`,
//! `commit`), who awaits it, and the timeline read back in sequence order.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use deadpool_postgres::Object;
use serde_json::{Map, Value};

use super::batch::Entry;
use super::{lock, pg_err, pool_err, text, to_i64, to_u64, Postgres, Shared};
use crate::records::{AgentEvent, EvidenceEntry, ResultStatus, ToolEvent};
use crate::store::embedded::{decode_json, encode_json};
use crate::store::{CallRecord, EncodedResult, StoreError};

pub(super) const S_CALL_ROW: &str = "INSERT INTO understudy_calls (attempt_id) SELECT $1::text \
     WHERE EXISTS (SELECT 1 FROM understudy_attempts WHERE attempt_id = $1::text) ON CONFLICT DO NOTHING";
const S_ROW: &str = "SELECT last_seq, writer FROM understudy_calls WHERE attempt_id = $1";
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
/// `understudy_events.kind` of a call's event.
const KIND_TOOL: &str = "tool";
/// `understudy_events.kind` of an agent-side event (docs/src/reference/events.md): same table, same sequence.
const KIND_AGENT: &str = "agent";
pub(super) const S_PUT_STATE: &str =
    "INSERT INTO understudy_state (attempt_id, integration, state) VALUES ($1, $2, $3) \
     ON CONFLICT (attempt_id, integration) DO UPDATE SET state = EXCLUDED.state";

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

pub(super) type Commit = tokio::sync::oneshot::Receiver<Result<(), StoreError>>;

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

impl Postgres {
    // ---- calls ---------------------------------------------------------------------------

    /// Step 1 of a call (module doc): a hold on the attempt's lease ([`super::lane`]).
    /// `Ok(None)`: this process's in-memory state is current; `Ok(Some)`: the state and
    /// idempotency entries to use. On `Err` the failure is also kept, so the attempt's
    /// `write_call` returns it.
    pub(in crate::store) async fn lock_call(
        &self,
        attempt_id: &str,
        token: u64,
    ) -> Result<Option<Fresh>, StoreError> {
        // The lease held and the copy current: nothing to wait for or read.
        if self.shared.lock_call_now(attempt_id, token) {
            return Ok(None);
        }
        let s = self.shared.clone();
        let id = attempt_id.to_string();
        // The caller's future may be dropped while it waits (a client that hangs up: every
        // connection of a load generator at its end). The spawned task still takes the hold;
        // nobody would release it, the lease would never be given back and every other
        // process would time out on the attempt — and a state read for the caller would never
        // be applied, so this process would serve the next call from a stale copy. So a
        // dropped wait tells the lane ([`Shared::abandon`]), which ends the hold whichever
        // of the two comes second.
        let gone = Arc::new(AtomicBool::new(false));
        let mut guard = Abandoned {
            gone: gone.clone(),
            shared: self.shared.clone(),
            attempt_id: attempt_id.to_string(),
            token,
            armed: true,
        };
        let r = self
            .handle
            .spawn(async move { s.lock_call(&id, token, &gone).await })
            .await;
        guard.armed = false;
        r.unwrap_or_else(|_| Err(StoreError::Backend("the store runtime stopped".into())))
    }

    /// Ends a hold that no `write_call` consumed.
    pub(in crate::store) fn release_call(&self, attempt_id: &str, token: u64) {
        self.shared.release_call(attempt_id, token);
    }

    /// The hold a write goes under: the one `lock_call` took for the attempt (`None`), else
    /// one taken now (blocking; several such writers of one attempt may run at once).
    fn direct_hold(&self, attempt_id: &str) -> Result<Option<u64>, StoreError> {
        if self.shared.has_hold(attempt_id) {
            return Ok(None);
        }
        let id = attempt_id.to_string();
        self.block(move |s| async move { s.hold_direct(&id).await })
            .map(Some)
    }

    pub(in crate::store) fn write_call(
        &self,
        attempt_id: &str,
        mut rec: CallRecord,
    ) -> Result<u64, StoreError> {
        let direct = self.direct_hold(attempt_id)?;
        let (seq, rx) = self.shared.queue(attempt_id, direct, |seq| {
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
            Ok(Entry {
                seq,
                kind: KIND_TOOL,
                event,
                state,
                idem,
            })
        })?;
        self.pend(rx);
        Ok(seq)
    }

    /// An agent-side event: the attempt's next sequence under its lease, kind `agent`;
    /// durable once `wait_durable` (from this task) returns.
    pub(in crate::store) fn write_agent_event(
        &self,
        attempt_id: &str,
        mut ev: AgentEvent,
    ) -> Result<u64, StoreError> {
        let direct = self.direct_hold(attempt_id)?;
        let (seq, rx) = self.shared.queue(attempt_id, direct, |seq| {
            ev.sequence = seq;
            Ok(Entry {
                seq,
                kind: KIND_AGENT,
                event: text(encode_json(&ev)?),
                state: None,
                idem: None,
            })
        })?;
        self.pend(rx);
        Ok(seq)
    }

    /// Queues a commit for the current task's `wait_durable`.
    fn pend(&self, rx: Commit) {
        lock(&self.shared.pending)
            .entry(Waiter::current())
            .or_default()
            .push(rx);
    }

    /// The commits awaited by the current task (or thread) and not yet awaited.
    pub(in crate::store) fn take_pending(&self) -> Vec<Commit> {
        lock(&self.shared.pending)
            .remove(&Waiter::current())
            .unwrap_or_default()
    }

    /// Every commit in flight, whichever thread queued it (shutdown's `flush`).
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

    /// Calls and agent-side events after `floor` (those up to it rolled out), in sequence
    /// order (dense up to the row's `last_seq`).
    pub(in crate::store) fn timeline(
        &self,
        attempt_id: &str,
        floor: u64,
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
                    "SELECT sequence, kind, event FROM understudy_events WHERE attempt_id = $1 AND sequence > $3 AND sequence <= $2 ORDER BY sequence",
                    &[&id, &to_i64(recorded), &to_i64(floor)],
                )
                .await
                .map_err(pg_err)?;
            let mut out = Vec::with_capacity(rows.len());
            let mut last = floor;
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

/// Under the attempt's lease: its row (inserted when missing) and, unless `seen` (the
/// sequence this process last wrote) is what the row says and this process wrote it, the
/// pre-call state, idempotency entries and chaos counters. Returns the row's `last_seq`.
pub(super) async fn read_row(
    s: &Shared,
    conn: &Object,
    id: &str,
    seen: Option<u64>,
) -> Result<(u64, Option<Fresh>), StoreError> {
    let (ins, sel) = tokio::try_join!(conn.prepare_cached(S_CALL_ROW), conn.prepare_cached(S_ROW))
        .map_err(pg_err)?;
    let p_id: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&id];
    let (_, row) = tokio::try_join!(conn.execute(&ins, &p_id), conn.query_opt(&sel, &p_id),)
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
    let (idem, chaos) = tokio::try_join!(conn.prepare_cached(S_IDEM), conn.prepare_cached(S_CHAOS))
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
}

/// A `lock_call` whose caller went away before it returned ([`Postgres::lock_call`]).
struct Abandoned {
    gone: Arc<AtomicBool>,
    shared: Arc<Shared>,
    attempt_id: String,
    token: u64,
    armed: bool,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if self.armed {
            self.shared
                .abandon(&self.attempt_id, self.token, &self.gone);
        }
    }
}
