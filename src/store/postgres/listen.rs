//! The listener: other processes' revisions and attempt changes, published as [`Changes`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_postgres::NoTls;

use super::{lock, Postgres, Shared};

/// The listener's poll interval (the fallback when a notification is missed).
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// The notification channel of revision and attempt changes.
pub(super) const CHANNEL: &str = "understudy_changes";

/// What the listener has seen change in the database (counters only grow).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    /// Bumped when the number of revisions grew.
    pub revisions: u64,
    /// Bumped when attempt records changed ([`super::Store::take_changed_attempts`]).
    pub attempts: u64,
}

impl Postgres {
    pub(in crate::store) fn subscribe(&self) -> watch::Receiver<Changes> {
        self.shared.changes.subscribe()
    }

    pub(in crate::store) fn take_changed_attempts(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.shared.changed_attempts))
    }
}

/// The listener: LISTEN on [`CHANNEL`], and on each notification or every
/// [`POLL_INTERVAL`] compare the revision count and the attempts' change counter.
pub(super) async fn listen(cfg: tokio_postgres::Config, s: Arc<Shared>) {
    let mut revisions: Option<i64> = None;
    let mut changed: Option<i64> = None;
    loop {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let client = match cfg.connect(NoTls).await {
            Ok((client, mut conn)) => {
                let s = s.clone();
                tokio::spawn(async move {
                    while let Some(m) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                        match m {
                            Ok(tokio_postgres::AsyncMessage::Notification(n))
                                if n.channel() == super::lane::WANT =>
                            {
                                s.wanted(n.payload());
                            }
                            Ok(tokio_postgres::AsyncMessage::Notification(_)) => {
                                let _ = tx.send(());
                            }
                            Ok(_) => {}
                            Err(_) => break,
                        }
                    }
                });
                client
            }
            Err(_) => {
                tokio::time::sleep(POLL_INTERVAL).await;
                continue;
            }
        };
        if client
            .batch_execute(&format!("LISTEN {CHANNEL}; LISTEN {}", super::lane::WANT))
            .await
            .is_err()
        {
            tokio::time::sleep(POLL_INTERVAL).await;
            continue;
        }
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                m = rx.recv() => if m.is_none() { break },
                _ = tick.tick() => {}
            }
            if poll(&client, &s, &mut revisions, &mut changed)
                .await
                .is_err()
            {
                break;
            }
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

async fn poll(
    client: &tokio_postgres::Client,
    s: &Shared,
    revisions: &mut Option<i64>,
    changed: &mut Option<i64>,
) -> Result<(), tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM understudy_revisions), (SELECT coalesce(max(changed), 0) FROM understudy_attempts)",
            &[],
        )
        .await?;
    let (n, c): (i64, i64) = (row.get(0), row.get(1));
    if revisions.is_some_and(|old| old != n) {
        s.changes.send_modify(|ch| ch.revisions += 1);
    }
    *revisions = Some(n);
    if let Some(old) = *changed {
        if c > old {
            let rows = client
                .query(
                    "SELECT attempt_id FROM understudy_attempts WHERE changed > $1",
                    &[&old],
                )
                .await?;
            lock(&s.changed_attempts).extend(rows.iter().map(|r| r.get::<_, String>(0)));
            s.changes.send_modify(|ch| ch.attempts += 1);
        }
    }
    *changed = Some(c);
    Ok(())
}
