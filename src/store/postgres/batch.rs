//! One batch of the commit lane ([`super::lane`]): its statements, pipelined in one round
//! trip, and the leases given back after it.

use std::collections::HashMap;

use tokio_postgres::{Client, Statement};

use super::{pg_err, to_i64, Shared};
use crate::store::StoreError;

/// One write: a call's event (with its state change and first-`ok` idempotency row) or an
/// agent-side event.
pub(super) struct Entry {
    pub seq: u64,
    pub kind: &'static str,
    pub event: String,
    pub state: Option<(String, String)>,
    pub idem: Option<(String, String)>,
}

/// The lane's connection: the session that holds this process's leases.
pub(super) struct LaneConn {
    pub(super) client: Client,
    pub(super) gen: u64,
    pub(super) s_try: Statement,
    pub(super) s_unlock: Statement,
    pub(super) s_events: Statement,
    pub(super) s_states: Statement,
    pub(super) s_idems: Statement,
    pub(super) s_seqs: Statement,
}

pub(super) const S_EVENTS: &str =
    "INSERT INTO understudy_events (attempt_id, sequence, kind, event) \
     SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[])";
pub(super) const S_STATES: &str = "INSERT INTO understudy_state (attempt_id, integration, state) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) \
     ON CONFLICT (attempt_id, integration) DO UPDATE SET state = EXCLUDED.state";
pub(super) const S_IDEMS: &str =
    "INSERT INTO understudy_idempotency (attempt_id, operation, key_ref, sequence, event) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[]) ON CONFLICT DO NOTHING";
pub(super) const S_SEQS: &str = "UPDATE understudy_calls c SET last_seq = u.seq, writer = $4 \
     FROM unnest($1::text[], $2::int8[], $3::int8[]) AS u(id, prev, seq) \
     WHERE c.attempt_id = u.id AND c.last_seq = u.prev";

/// One batch: BEGIN, the multi-row writes, COMMIT, pipelined.
pub(super) async fn commit(
    s: &Shared,
    c: &LaneConn,
    entries: &[(String, u64, Entry)],
) -> Result<(), StoreError> {
    let mut ev_id: Vec<&str> = Vec::with_capacity(entries.len());
    let mut ev_seq: Vec<i64> = Vec::with_capacity(entries.len());
    let mut ev_kind: Vec<&str> = Vec::with_capacity(entries.len());
    let mut ev_json: Vec<&str> = Vec::with_capacity(entries.len());
    // The last state per (attempt, integration): one row each (an upsert may not touch a
    // row twice).
    let mut states: HashMap<(&str, &str), &str> = HashMap::new();
    let (mut im_id, mut im_op, mut im_ref, mut im_seq, mut im_ev) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // attempt → (prev, last)
    let mut seqs: HashMap<&str, (u64, u64)> = HashMap::new();
    for (id, prev, e) in entries {
        ev_id.push(id);
        ev_seq.push(to_i64(e.seq));
        ev_kind.push(e.kind);
        ev_json.push(&e.event);
        if let Some((integ, json)) = &e.state {
            states.insert((id, integ), json);
        }
        if let Some((op, r)) = &e.idem {
            im_id.push(id.as_str());
            im_op.push(op.as_str());
            im_ref.push(r.as_str());
            im_seq.push(to_i64(e.seq));
            im_ev.push(e.event.as_str());
        }
        seqs.entry(id)
            .and_modify(|(_, last)| *last = e.seq)
            .or_insert((*prev, e.seq));
    }
    let (st_id, st_integ, st_json): (Vec<&str>, Vec<&str>, Vec<&str>) = {
        let mut a = (Vec::new(), Vec::new(), Vec::new());
        for ((id, integ), json) in &states {
            a.0.push(*id);
            a.1.push(*integ);
            a.2.push(*json);
        }
        a
    };
    let (mut sq_id, mut sq_prev, mut sq_last) = (Vec::new(), Vec::new(), Vec::new());
    for (id, (prev, last)) in &seqs {
        sq_id.push(*id);
        sq_prev.push(to_i64(*prev));
        sq_last.push(to_i64(*last));
    }
    let writer = s.writer.as_str();
    let cl = &c.client;
    type P<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);
    let p_ev: [P; 4] = [&ev_id, &ev_seq, &ev_kind, &ev_json];
    let p_st: [P; 3] = [&st_id, &st_integ, &st_json];
    let p_im: [P; 5] = [&im_id, &im_op, &im_ref, &im_seq, &im_ev];
    let p_sq: [P; 4] = [&sq_id, &sq_prev, &sq_last, &writer];
    let r = tokio::try_join!(
        cl.batch_execute("BEGIN"),
        cl.execute(&c.s_events, &p_ev),
        async {
            if st_id.is_empty() {
                Ok(0)
            } else {
                cl.execute(&c.s_states, &p_st).await
            }
        },
        async {
            if im_id.is_empty() {
                Ok(0)
            } else {
                cl.execute(&c.s_idems, &p_im).await
            }
        },
        cl.execute(&c.s_seqs, &p_sq),
        cl.batch_execute("COMMIT"),
    );
    match r {
        Ok((_, _, _, _, updated, _)) if updated as usize == sq_id.len() => Ok(()),
        // The COMMIT above ran in a transaction whose update missed a row: its sequence
        // check failed, which the transaction cannot undo any more — it committed. This
        // cannot happen while every writer holds the lease; the connection is dropped so
        // every attempt is read afresh.
        Ok((_, _, _, _, updated, _)) => Err(StoreError::Backend(format!(
            "a batch's sequence check matched {updated} of {} attempts: another writer wrote without the lease",
            sq_id.len()
        ))),
        Err(e) => Err(pg_err(e)),
    }
}
