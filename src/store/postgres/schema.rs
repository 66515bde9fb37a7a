//! The PostgreSQL schema: one migration per version ([`MIGRATIONS`]), applied at open
//! ([`migrate`]) under an advisory lock.

use deadpool_postgres::Pool;

use super::{pg_err, pool_err};
use crate::store::StoreError;

/// The schema, one migration per version: version `n` is `MIGRATIONS[n - 1]`. Applied at
/// open under an advisory lock, each in its own transaction with its row in
/// `understudy_schema`. Never edit a released migration: append one.
pub(super) const MIGRATIONS: &[&str] = &[
    r#"
CREATE SEQUENCE understudy_change_seq;
CREATE TABLE understudy_revisions (
    integration     text   NOT NULL,
    operation       text   NOT NULL,
    revision        bigint NOT NULL,
    contract_hash   text   NOT NULL,
    definition_hash text   NOT NULL,
    source          text   NOT NULL,
    saved_at        text   NOT NULL,
    record          text   NOT NULL,
    PRIMARY KEY (integration, operation, revision)
);
CREATE TABLE understudy_attempts (
    attempt_id text    PRIMARY KEY,
    token_hash text    NOT NULL UNIQUE,
    is_default boolean NOT NULL,
    live       boolean NOT NULL,
    changed    bigint  NOT NULL,
    record     text    NOT NULL
);
CREATE UNIQUE INDEX understudy_one_live_default ON understudy_attempts ((true))
    WHERE is_default AND live;
CREATE INDEX understudy_attempts_changed ON understudy_attempts (changed);
CREATE TABLE understudy_calls (
    attempt_id text   PRIMARY KEY REFERENCES understudy_attempts ON DELETE CASCADE,
    last_seq   bigint NOT NULL DEFAULT 0,
    writer     text   NOT NULL DEFAULT ''
);
CREATE TABLE understudy_state (
    attempt_id  text NOT NULL REFERENCES understudy_attempts ON DELETE CASCADE,
    integration text NOT NULL,
    state       text NOT NULL,
    PRIMARY KEY (attempt_id, integration)
);
CREATE TABLE understudy_events (
    attempt_id text   NOT NULL REFERENCES understudy_attempts ON DELETE CASCADE,
    sequence   bigint NOT NULL,
    kind       text   NOT NULL DEFAULT 'tool',
    event      text   NOT NULL,
    PRIMARY KEY (attempt_id, sequence)
);
CREATE TABLE understudy_idempotency (
    attempt_id text   NOT NULL REFERENCES understudy_attempts ON DELETE CASCADE,
    operation  text   NOT NULL,
    key_ref    text   NOT NULL,
    sequence   bigint NOT NULL,
    event      text   NOT NULL,
    PRIMARY KEY (attempt_id, operation, key_ref)
);
"#,
    r#"
CREATE TABLE understudy_revision_sets (
    id   text PRIMARY KEY,
    pins text NOT NULL
);
"#,
    // The fleet's scrubber key (`crate::util::scrub`): one row, made by the first process.
    r#"
CREATE TABLE understudy_scrub_key (
    id  integer PRIMARY KEY CHECK (id = 1),
    key text    NOT NULL
);
"#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

pub(super) async fn migrate(pool: &Pool) -> Result<(), StoreError> {
    let mut conn = pool.get().await.map_err(pool_err)?;
    // One process migrates at a time; the others wait, then find nothing to do.
    conn.batch_execute(
        "SELECT pg_advisory_lock(8231017); CREATE TABLE IF NOT EXISTS understudy_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .map_err(pg_err)?;
    let result = async {
        let current: i32 = conn
            .query_one("SELECT coalesce(max(version), 0) FROM understudy_schema", &[])
            .await
            .map_err(pg_err)?
            .get(0);
        if current > SCHEMA_VERSION {
            return Err(StoreError::Backend(format!(
                "the database's understudy schema is version {current}, newer than this build's {SCHEMA_VERSION}: upgrade understudy"
            )));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            let version = i as i32 + 1;
            let tx = conn.transaction().await.map_err(pg_err)?;
            tx.batch_execute(sql).await.map_err(pg_err)?;
            tx.execute(
                "INSERT INTO understudy_schema (version) VALUES ($1)",
                &[&version],
            )
            .await
            .map_err(pg_err)?;
            tx.commit().await.map_err(pg_err)?;
            tracing::info!(version, "store schema migrated");
        }
        Ok(())
    }
    .await;
    let unlocked = conn
        .batch_execute("SELECT pg_advisory_unlock(8231017)")
        .await
        .map_err(pg_err);
    result.and(unlocked)
}
