//! An attempt's state outside calls (docs/src/operations/fleet-store.md): read, replaced
//! and cleared with nobody else writing the attempt (its lease, [`super::lane`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::calls::{read_state, S_CALL_ROW, S_PUT_STATE};
use super::{lane, pg_err, pool_err, text, to_u64, Postgres, Shared};
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
