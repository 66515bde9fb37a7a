//! The hot-reload task of a running server (docs/src/operations/durability.md): it watches the operations directories
//! and applies what changed to the operation sets of `crate::app::generations` (whose doc
//! says which generation an attempt sees, and the file rule).
//!
//! **Watching** ([`Watcher`], started by [`super::serve_with`]). The operations directories
//! and the contracts directory are watched through the OS (inotify, by the `notify` crate):
//! a look ([`poll`]) runs only when the OS reports a change in one of them (events arriving
//! within [`SETTLE`] of each other are one look), so an idle server stats no file. When the
//! OS watch cannot be set up (no inotify, a directory missing, or `UNDERSTUDY_WATCH=poll`)
//! the watcher falls back to a look every [`POLL_INTERVAL`], logged at start; an OS watch
//! that fails later (its event queue overflowed) triggers a look too. A look lists the
//! `*.json` files directly inside each operations directory (hidden files skipped, as when
//! loading) with size and modification time; a file's content is hashed
//! (SHA-256) when those changed, when it is new, or when it was modified less than 2 s ago (a
//! same-size rewrite inside the file system's timestamp granularity). An integration whose
//! file set or any file's content changed since the last poll is reloaded
//! (`crate::app::generations::reload_integration`):
//! 1. the files whose content hash differs from the one the current operation was read
//!    from (and new files) are loaded, checked and compiled as at start; every other
//!    operation is kept as it is (its compiled form shared, `Arc`), and the cross-file
//!    checks run over all of them (`crate::operation::load_parts`);
//! 2. on problems: each is logged (`warn`) and kept for `GET /tools/{integration}/testing`
//!    (`problems`); nothing else changes — the previous operations and revisions keep
//!    serving — until the next change of the directory;
//! 3. otherwise, under the change lock (`Integrations::change_lock`, also held by admin
//!    saves and attempt creation so a pin never mixes two generations): the file definition
//!    of every operation read in step 1 is synced by the file rule (the kept ones were
//!    synced when they were read), the new generation is swapped in,
//!    the integration's problems are cleared; then the default attempt is re-pinned.
//!
//! The tool-call contracts directory is polled at the same tick (`crate::app::contracts::poll`):
//! a changed set is checked against the current operations and serves new attempts, a broken
//! one is logged and the previous set keeps serving.
//!
//! **Following a shared store** ([`follow_store`], docs/src/operations/fleet-store.md). With PostgreSQL, other processes
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

/// How often the operations directories are polled when the OS cannot watch them.
pub const POLL_INTERVAL: Duration = Duration::from_millis(300);

/// How long the watcher waits after an OS event for the rest of one save (an editor's write,
/// rename and attribute change) before it looks.
pub const SETTLE: Duration = Duration::from_millis(30);

/// How the watcher learns of changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// OS notifications (inotify), polling when they cannot be set up.
    Os,
    /// A look every [`POLL_INTERVAL`].
    Poll,
}

impl WatchMode {
    /// `UNDERSTUDY_WATCH=poll` → [`WatchMode::Poll`], else [`WatchMode::Os`].
    pub fn from_env() -> WatchMode {
        match std::env::var("UNDERSTUDY_WATCH").as_deref() {
            Ok("poll") => WatchMode::Poll,
            _ => WatchMode::Os,
        }
    }
}

/// The directories a watcher watches: every operations directory and the contracts one.
fn watched_dirs(app: &App) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = app
        .integrations
        .values()
        .map(|i| i.config.operations.clone())
        .collect();
    dirs.extend(app.config.contracts.clone());
    dirs.sort();
    dirs.dedup();
    dirs
}

/// An OS watch of `dirs` (not recursive, as loading reads them) and the channel its events
/// arrive on (one `()` per event or watch error).
pub fn os_watch(
    dirs: &[PathBuf],
) -> notify::Result<(
    notify::RecommendedWatcher,
    tokio::sync::mpsc::UnboundedReceiver<()>,
)> {
    use notify::Watcher as _;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut w = notify::recommended_watcher(move |_: notify::Result<notify::Event>| {
        let _ = tx.send(());
    })?;
    for d in dirs {
        w.watch(d, notify::RecursiveMode::NonRecursive)?;
    }
    Ok((w, rx))
}

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

/// The watching task of a running server; [`Watcher::stop`] ends it (dropping it aborts it).
pub struct Watcher {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    follower: Option<tokio::task::JoinHandle<()>>,
}

impl Watcher {
    /// Start watching ([`WatchMode::from_env`]).
    pub fn start(app: Arc<App>) -> Watcher {
        Watcher::start_with(app, WatchMode::from_env())
    }

    /// Start watching through the OS, or polling every [`POLL_INTERVAL`] (the module doc).
    pub fn start_with(app: Arc<App>, mode: WatchMode) -> Watcher {
        let follower = follow_store(app.clone());
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let os = match mode {
            WatchMode::Poll => None,
            WatchMode::Os => match os_watch(&watched_dirs(&app)) {
                Ok(w) => Some(w),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch the operation files through the OS; polling every {} ms instead", POLL_INTERVAL.as_millis());
                    None
                }
            },
        };
        let task = tokio::spawn(async move {
            if let Some((_keep, mut events)) = os {
                // The baseline was taken when the app was built.
                loop {
                    tokio::select! {
                        _ = &mut rx => return,
                        e = events.recv() => if e.is_none() { return },
                    }
                    tokio::time::sleep(SETTLE).await;
                    while events.try_recv().is_ok() {}
                    poll(&app).await;
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An OS watch reports a change of a watched directory; a directory that cannot be
    /// watched is an error (the watcher then polls).
    #[tokio::test]
    async fn the_os_watch_reports_changes_and_refuses_a_missing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let (_w, mut events) = os_watch(&[dir.path().to_path_buf()]).expect("inotify");
        std::fs::write(dir.path().join("a.json"), "{}").unwrap();
        tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("an event for the new file")
            .expect("channel open");
        assert!(os_watch(&[dir.path().join("missing")]).is_err());
    }
}
