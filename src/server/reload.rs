//! The hot-reload task of a running server (SPEC 12): it polls the operations directories
//! and applies what changed to the operation sets of `crate::app::generations` (whose doc
//! says which generation an attempt sees, and the file rule).
//!
//! **Watching** ([`Watcher`], started by [`super::serve_with`]). Every [`POLL_INTERVAL`] the
//! `*.json` files directly inside each operations directory (hidden files skipped, as when
//! loading) are listed with size and modification time; a file's content is hashed
//! (SHA-256) when those changed, when it is new, or when it was modified less than 2 s ago (a
//! same-size rewrite inside the file system's timestamp granularity). An integration whose
//! file set or any file's content changed since the last poll is reloaded
//! (`crate::app::generations::reload_integration`):
//! 1. load, every `check`, compile (`crate::operation::load_integration`), exactly as at
//!    start;
//! 2. on problems: each is logged (`warn`) and kept for `GET /tools/{integration}/testing`
//!    (`problems`); nothing else changes — the previous operations and revisions keep
//!    serving — until the next change of the directory;
//! 3. otherwise, under the change lock (`Integrations::change_lock`, also held by admin
//!    saves and attempt creation so a pin never mixes two generations): every operation's
//!    file definition is synced by the file rule, the new generation is swapped in,
//!    the integration's problems are cleared; then the default attempt is re-pinned.
//!
//! The tool-call contracts directory is polled at the same tick (`crate::app::contracts::poll`):
//! a changed set is checked against the current operations and serves new attempts, a broken
//! one is logged and the previous set keeps serving.
//!
//! **Following a shared store** ([`follow_store`], SPEC 17). With PostgreSQL, other processes
//! append revisions (their file syncs and admin saves) and write attempt records (creation,
//! re-pins, `DELETE`). The store's listener (LISTEN/NOTIFY with a 500 ms poll as fallback)
//! reports it; then this process re-pins its default attempt to the latest revisions and
//! replaces the records of the changed attempts it holds in memory (a lease ended elsewhere
//! ends here too). New attempts pin straight from the store, so they see a revision saved
//! through another process at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::app::generations::{reload_integration, repin_default, ReloadOutcome};
use crate::app::App;

/// How often the operations directories are polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(300);

/// Check every operations directory once and reload the integrations whose files changed;
/// then re-pin the default attempt and wake `Integrations::subscribe` waiters.
pub async fn poll(app: &Arc<App>) -> Vec<ReloadOutcome> {
    let a = app.clone();
    let outcomes = tokio::task::spawn_blocking(move || {
        let names: Vec<(String, PathBuf)> = a
            .integrations
            .iter()
            .map(|(n, i)| (n.clone(), i.config.operations.clone()))
            .collect();
        names
            .into_iter()
            .filter(|(n, dir)| a.integrations.files_changed(n, dir))
            .map(|(n, _)| reload_integration(&a, &n))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    if outcomes.iter().any(|o| o.problems.is_empty()) {
        repin_default(app).await;
    }
    // The tool-call contracts directory too (`crate::app::contracts`).
    let a = app.clone();
    let contracts = tokio::task::spawn_blocking(move || crate::app::contracts::poll(&a))
        .await
        .ok()
        .flatten();
    let finished = outcomes.len() as u64 + u64::from(contracts.is_some());
    if finished > 0 {
        app.integrations.reloads_finished(finished);
    }
    outcomes
}

/// Follow a shared store's changes (module doc) until `rx` closes; `None` for a store that
/// only this process writes.
pub fn follow_store(app: Arc<App>) -> Option<tokio::task::JoinHandle<()>> {
    let mut rx = app.store.subscribe()?;
    Some(tokio::spawn(async move {
        let mut seen = *rx.borrow_and_update();
        while rx.changed().await.is_ok() {
            let now = *rx.borrow_and_update();
            if now.attempts != seen.attempts {
                let a = app.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    for id in a.store.take_changed_attempts() {
                        let Some(held) = a.attempts.loaded(&id) else {
                            continue;
                        };
                        match a.store.attempt(&id) {
                            Ok(Some(rec)) if rec != held.record() => held.set_record(rec),
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(attempt = %id, error = %e, "cannot refresh the attempt")
                            }
                        }
                    }
                })
                .await;
            }
            if now.revisions != seen.revisions {
                repin_default(&app).await;
            }
            seen = now;
        }
    }))
}

/// The polling task of a running server; [`Watcher::stop`] ends it (dropping it aborts it).
pub struct Watcher {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    follower: Option<tokio::task::JoinHandle<()>>,
}

impl Watcher {
    /// Start polling every [`POLL_INTERVAL`].
    pub fn start(app: Arc<App>) -> Watcher {
        let follower = follow_store(app.clone());
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(POLL_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick is immediate; the baseline was taken when the app was built.
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = &mut rx => return,
                    _ = tick.tick() => {}
                }
                poll(&app).await;
            }
        });
        Watcher {
            stop: Some(tx),
            task: Some(task),
            follower,
        }
    }

    /// Stop polling and wait for a reload in progress to finish.
    pub async fn stop(mut self) {
        if let Some(f) = self.follower.take() {
            f.abort();
        }
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
        if let Some(f) = self.follower.take() {
            f.abort();
        }
    }
}
