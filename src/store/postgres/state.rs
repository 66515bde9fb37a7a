//! An attempt's state outside calls (docs/src/operations/fleet-store.md): read, replaced
//! and cleared with nobody else writing the attempt (its lease, [`super::lane`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::calls::{read_state, S_CALL_ROW, S_PUT_STATE};
use super::{lane, pg_err, pool_err, text, to_i64, to_u64, Postgres, Shared};
use crate::store::embedded::encode_json;
use crate::store::StoreError;

impl Postgres {
    // ---- state ---------------------------------------------------------------------------

    pub(in crate::store) fn state(
        &self,
        attempt_id: &str,
    ) -> Result<BTreeMap<String, Map<String, Value>>, StoreError> {
        let id = attempt_id.to_string();
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            read_state(&conn, &id).await
        })
    }

    /// Outside a call: with nobody else writing the attempt (its lease, or the lock's
    /// transaction-scoped form: [`lane`]), and it marks the row so that every process reloads
    /// the state on its next call.
    pub(in crate::store) fn put_state(
        &self,
        attempt_id: &str,
        integration: &str,
        state: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        let (id, integ) = (attempt_id.to_string(), integration.to_string());
        let json = text(encode_json(state)?);
        self.block(move |s| async move {
            s.exclusive(&id.clone(), move |s, leased| async move {
                let mut conn = s.pool.get().await.map_err(pool_err)?;
                let tx = conn.transaction().await.map_err(pg_err)?;
                if !leased {
                    lease_in_tx(&s, &tx, &id).await?;
                }
                tx.execute(S_CALL_ROW, &[&id]).await.map_err(pg_err)?;
                tx.execute(
                    "UPDATE understudy_calls SET writer = '' WHERE attempt_id = $1",
                    &[&id],
                )
                .await
                .map_err(pg_err)?;
                tx.execute(S_PUT_STATE, &[&id, &integ, &json])
                    .await
                    .map_err(pg_err)?;
                tx.commit().await.map_err(pg_err)
            })
            .await
        })
    }

    pub(in crate::store) fn clear_state(&self, attempt_id: &str) -> Result<usize, StoreError> {
        let id = attempt_id.to_string();
        self.block(move |s| async move {
            s.exclusive(&id.clone(), move |s, leased| async move {
                let mut conn = s.pool.get().await.map_err(pool_err)?;
                let tx = conn.transaction().await.map_err(pg_err)?;
                if !leased {
                    lease_in_tx(&s, &tx, &id).await?;
                }
                tx.execute(
                    "UPDATE understudy_calls SET writer = '' WHERE attempt_id = $1",
                    &[&id],
                )
                .await
                .map_err(pg_err)?;
                tx.execute("DELETE FROM understudy_state WHERE attempt_id = $1", &[&id])
                    .await
                    .map_err(pg_err)?;
                tx.commit().await.map_err(pg_err)?;
                let row = conn
                    .query_one(
                        "SELECT count(*) FROM understudy_state WHERE attempt_id = $1",
                        &[&id],
                    )
                    .await
                    .map_err(pg_err)?;
                Ok(to_u64(row.get(0)) as usize)
            })
            .await
        })
    }

    /// [`crate::store::Store::roll_over`]: under the attempt's lease, one transaction sets
    /// the record's `rolled_over` (only while it still rolls through `expected`; the other
    /// members are left as they are, a concurrent store-failure mark included) and deletes
    /// the events up to `rolled.through`.
    pub(in crate::store) fn roll_over(
        &self,
        attempt_id: &str,
        expected: u64,
        rolled: &crate::records::RolledOver,
    ) -> Result<bool, StoreError> {
        let id = attempt_id.to_string();
        let json = text(encode_json(rolled)?);
        let (expected, through) = (to_i64(expected), to_i64(rolled.through));
        self.block(move |s| async move {
            s.exclusive(&id.clone(), move |s, leased| async move {
                let mut conn = s.pool.get().await.map_err(pool_err)?;
                let tx = conn.transaction().await.map_err(pg_err)?;
                if !leased {
                    lease_in_tx(&s, &tx, &id).await?;
                }
                let moved = tx
                    .execute(
                        "UPDATE understudy_attempts SET changed = nextval('understudy_change_seq'), \
                         record = jsonb_set(record::jsonb, '{rolled_over}', $2::text::jsonb)::text \
                         WHERE attempt_id = $1 \
                         AND COALESCE((record::jsonb->'rolled_over'->>'through')::bigint, 0) = $3",
                        &[&id, &json, &expected],
                    )
                    .await
                    .map_err(pg_err)?;
                if moved == 0 {
                    return Ok(false);
                }
                tx.execute(
                    "DELETE FROM understudy_events WHERE attempt_id = $1 AND sequence <= $2",
                    &[&id, &through],
                )
                .await
                .map_err(pg_err)?;
                tx.execute("SELECT pg_notify($1, 'attempt')", &[&super::CHANNEL])
                    .await
                    .map_err(pg_err)?;
                tx.commit().await.map_err(pg_err)?;
                Ok(true)
            })
            .await
        })
    }

    /// [`crate::store::Store::open_exclusive_attempts`].
    /// Awaited on the store runtime, never blocking the caller's thread: every call of the
    /// default attempt on a fleet asks it (`crate::app::attempt::Attempts::note_outside`), and
    /// a blocked server worker per call made the default attempt's throughput one round trip
    /// per worker. The calls share reads, each served by one that started after it arrived
    /// ([`super::fresh`]): one query per round trip, not per call, and no call is answered
    /// from a read older than itself. A caller that goes away leaves a read to finish.
    pub(in crate::store) async fn open_exclusive_attempts(
        &self,
    ) -> Result<Vec<String>, StoreError> {
        let s = self.shared.clone();
        let read = async move {
            let s2 = s.clone();
            s.exclusive_reads
                .get(|| async move {
                    let read = async {
                        let conn = s2.pool.get().await.map_err(pool_err)?;
                        let rows = conn
                            .query(
                                "SELECT attempt_id FROM understudy_attempts WHERE live AND NOT is_default \
                                 AND (record::jsonb->>'exclusive')::boolean IS TRUE ORDER BY attempt_id",
                                &[],
                            )
                            .await
                            .map_err(pg_err)?;
                        Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
                    };
                    read.await.map_err(message)
                })
                .await
                .map_err(StoreError::Backend)
        };
        self.handle
            .spawn(read)
            .await
            .unwrap_or_else(|_| Err(StoreError::Backend("the store runtime stopped".into())))
    }

    /// [`crate::store::Store::count_outside_call`]: one statement under the attempt row's
    /// lock, so the calls of several processes all count and nothing else of the record
    /// (its end, its store failures) is written back from an older copy.
    pub(in crate::store) fn count_outside_call(
        &self,
        attempt_id: &str,
        line: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool, StoreError> {
        let (id, line) = (attempt_id.to_string(), line.to_string());
        let now = crate::util::time::rfc3339(now);
        let listed = crate::records::MAX_OUTSIDE_LISTED as i32;
        self.block(move |s| async move {
            let conn = s.pool.get().await.map_err(pool_err)?;
            let n = conn
                .execute(
                    "UPDATE understudy_attempts SET changed = nextval('understudy_change_seq'), \
                     record = jsonb_set(jsonb_set(record::jsonb, '{outside_calls}', \
                       to_jsonb(COALESCE((record::jsonb->>'outside_calls')::bigint, 0) + 1)), \
                       '{outside}', CASE WHEN jsonb_array_length(COALESCE(record::jsonb->'outside', '[]'::jsonb)) < $3 \
                         THEN COALESCE(record::jsonb->'outside', '[]'::jsonb) || to_jsonb($2::text) \
                         ELSE record::jsonb->'outside' END)::text \
                     WHERE attempt_id = $1 AND live AND NOT is_default \
                     AND (record::jsonb->>'exclusive')::boolean IS TRUE \
                     AND (record::jsonb->>'expires_at' IS NULL \
                          OR (record::jsonb->>'expires_at')::timestamptz > $4::text::timestamptz)",
                    &[&id, &line, &listed, &now],
                )
                .await
                .map_err(pg_err)?;
            if n > 0 {
                conn.execute("SELECT pg_notify($1, 'attempt')", &[&super::CHANNEL])
                    .await
                    .map_err(pg_err)?;
            }
            Ok(n > 0)
        })
    }
}

/// A write outside calls by a process that does not hold the attempt's lease: the lock's
/// transaction-scoped form, asking whoever holds the lease (this process included) to give
/// it back; waits up to `lock_timeout`.
async fn lease_in_tx(
    s: &Shared,
    tx: &deadpool_postgres::Transaction<'_>,
    id: &str,
) -> Result<(), StoreError> {
    let got: bool = tx
        .query_one(
            "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 34))",
            &[&id],
        )
        .await
        .map_err(pg_err)?
        .get(0);
    if got {
        return Ok(());
    }
    // "-": every process honours it, this one too. Outside the transaction (a
    // notification inside one is sent at its commit).
    let payload = format!("- {id}");
    s.pool
        .get()
        .await
        .map_err(pool_err)?
        .execute("SELECT pg_notify($1, $2)", &[&lane::WANT, &payload])
        .await
        .map_err(pg_err)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 34))",
        &[&id],
    )
    .await
    .map_err(pg_err)?;
    Ok(())
}

/// The text of a store error without its "store error:" prefix (shared reads carry text and
/// are made `StoreError::Backend` again by each caller).
fn message(e: StoreError) -> String {
    match e {
        StoreError::Backend(m) => m,
        other => other.to_string(),
    }
}
