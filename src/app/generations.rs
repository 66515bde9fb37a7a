//! The swappable operation sets of a running server ([`Integrations`], the type of
//! `App::integrations`), what a hot reload (docs/src/operations/durability.md; the polling task is
//! `crate::server::reload`) does to them, and the file rule.
//!
//! **Generations.** `App::integrations` derefs to the *current generation*: the map of
//! integrations with their compiled operations and built-in templates. A successful reload of
//! one integration builds a new generation (the current map with that integration's
//! operations replaced) and swaps it in atomically; readers never see half an update. A
//! generation is never freed while the process runs: attempts created under it keep using it,
//! and reloads are human-paced file edits (a few KB of compiled schemas each).
//!
//! **Which generation an attempt sees** ([`Integrations::for_attempt`]). An attempt created
//! with `POST /attempts` is bound to the generation that was current when it pinned its
//! revisions: its calls are matched, validated and rendered with exactly the operations its
//! pins were checked against (a pin keeps the compiled operation it was created with), so a
//! contract edit never turns a running attempt's calls into `stale_contract`. The default
//! attempt is not bound: it follows the current generation and is re-pinned to the latest
//! revisions after every reload and every admin save ([`repin_default`]; keys of a newly
//! pinned `initial_state` that its state lacks are added). An attempt brought back from the
//! store after a restart sees the current generation (an earlier process's compiled
//! operations are gone): if its contract changed meanwhile, its calls answer `stale_contract`.
//!
//! **The file rule** ([`sync_file_revision`]), at start and on every reload: an operation
//! file's mock becomes a new revision (`source: "file"`) when its definition or its contract
//! hash differs from the last revision *that came from the file* (or there is none) — that
//! is, when the file changed since it was last synced. So a definition saved through the
//! admin API (`source: "api"`, never written to the file) is not undone by an unchanged file,
//! neither at the next poll nor at the next start; editing the file's mock or its contract
//! supersedes it with a new, checked revision. Content equal to the latest revision is never
//! appended twice, and revisions are never rewritten or relabelled.

use std::collections::{BTreeMap, HashMap};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, SystemTime};

use super::{builtins_of, App, Integration};
use crate::contract::hash::sha256_hex;
use crate::error::Problem;
use crate::operation::load::FileSig;
use crate::operation::{Operation, Part};
use crate::records::{RevisionHead, RevisionRecord};
use crate::store::{Store, StoreError};

/// A file modified less than this long ago is re-hashed at every poll.
const RACY_WINDOW: Duration = Duration::from_secs(2);

/// Integration name → the integration, ready to serve.
pub type IntegrationMap = BTreeMap<String, Integration>;

#[derive(Clone, Copy)]
enum Generation {
    /// The map built at start (owned by [`Integrations`]).
    Initial,
    /// A map built by a reload, kept for the process's lifetime.
    Reloaded(&'static IntegrationMap),
}

/// What each file looked like at the last poll.
type Files = BTreeMap<PathBuf, FileSig>;

/// The integrations of the running server: the current generation (what `Deref` gives), the
/// generation each attempt is bound to, the reload problems, and the change lock.
pub struct Integrations {
    initial: IntegrationMap,
    current: RwLock<Generation>,
    /// Attempt id → the generation it was created under.
    bound: RwLock<HashMap<String, Generation>>,
    change: Mutex<()>,
    problems: RwLock<BTreeMap<String, Vec<Problem>>>,
    seen: Mutex<BTreeMap<String, Files>>,
    /// Counts finished reloads (successful or refused), for waiters.
    reloads: tokio::sync::watch::Sender<u64>,
    /// Counts generations swapped in ([`Integrations::generation`]).
    generation: std::sync::atomic::AtomicU64,
}

impl Deref for Integrations {
    type Target = IntegrationMap;
    fn deref(&self) -> &IntegrationMap {
        self.resolve(*read(&self.current))
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Integrations {
    /// The start-up generation; the files' current content is the baseline of the watcher.
    pub fn new(map: IntegrationMap) -> Integrations {
        let me = Integrations {
            initial: map,
            current: RwLock::new(Generation::Initial),
            bound: RwLock::new(HashMap::new()),
            change: Mutex::new(()),
            problems: RwLock::new(BTreeMap::new()),
            seen: Mutex::new(BTreeMap::new()),
            reloads: tokio::sync::watch::Sender::new(0),
            generation: std::sync::atomic::AtomicU64::new(0),
        };
        // The baseline is what loading read (no file is read again); a file that changed
        // since differs at the first poll.
        {
            let mut seen = lock(&me.seen);
            for (name, integ) in me.initial.iter() {
                let dir = &integ.config.operations;
                let files: Files = integ
                    .operations
                    .iter()
                    .filter(|o| o.file.parent() == Some(dir.as_path()))
                    .filter_map(|o| Some((o.file.clone(), o.file_sig.clone()?)))
                    .collect();
                seen.insert(name.clone(), files);
            }
        }
        me
    }

    fn resolve(&self, g: Generation) -> &IntegrationMap {
        match g {
            Generation::Initial => &self.initial,
            Generation::Reloaded(m) => m,
        }
    }

    /// The integrations as attempt `attempt_id` sees them: the generation it was created
    /// under, or the current one (the default attempt, attempts loaded from the store).
    pub fn for_attempt(&self, attempt_id: &str) -> &IntegrationMap {
        let g = read(&self.bound).get(attempt_id).copied();
        match g {
            Some(g) => self.resolve(g),
            None => self,
        }
    }

    /// Bind attempt `attempt_id` to the current generation (at creation, after pinning, under
    /// the change lock).
    pub fn bind(&self, attempt_id: &str) {
        let g = *read(&self.current);
        write(&self.bound).insert(attempt_id.to_string(), g);
    }

    /// Forget an attempt's binding (it ended).
    pub fn unbind(&self, attempt_id: &str) {
        write(&self.bound).remove(attempt_id);
    }

    /// The lock held while revisions are appended and the generation swapped (reload, admin
    /// save) and while an attempt pins revisions and binds its generation. Never held across
    /// an `.await`.
    pub fn change_lock(&self) -> MutexGuard<'_, ()> {
        lock(&self.change)
    }

    /// The problems that refused the last reload of `integration` (empty once a reload
    /// succeeds).
    pub fn problems(&self, integration: &str) -> Vec<Problem> {
        read(&self.problems)
            .get(integration)
            .cloned()
            .unwrap_or_default()
    }

    /// A receiver whose value counts finished reloads (successful or refused).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reloads.subscribe()
    }

    /// Count `n` finished reloads and wake [`Integrations::subscribe`] waiters.
    pub fn reloads_finished(&self, n: u64) {
        self.reloads.send_modify(|c| *c += n);
    }

    /// Swap in a new generation where `name` is `integ`. The caller holds the change lock.
    fn replace(&self, name: &str, integ: Integration) {
        let mut map: IntegrationMap = (**self).clone();
        map.insert(name.to_string(), integ);
        let leaked: &'static IntegrationMap = Box::leak(Box::new(map));
        *write(&self.current) = Generation::Reloaded(leaked);
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// The number of the current generation (0 at start, +1 per swap).
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the operations directory of `name` changed since the last call (and remember
    /// what it looks like now).
    pub fn files_changed(&self, name: &str, dir: &Path) -> bool {
        let mut seen = lock(&self.seen);
        let old = seen.entry(name.to_string()).or_default();
        let new = signatures(dir, |p| old.get(p));
        let changed = new.len() != old.len()
            || new
                .iter()
                .any(|(p, sig)| old.get(p).is_none_or(|o| o.hash != sig.hash));
        *old = new;
        changed
    }
}

/// The [`FileSig`] of every operation file directly inside `dir` ([`listing`]): a file whose
/// size and modification time equal its `old` signature keeps that hash (unless it was
/// modified less than [`RACY_WINDOW`] ago: a same-size rewrite inside the file system's
/// timestamp granularity); any other file is read and hashed.
fn signatures<'a>(dir: &Path, old: impl Fn(&Path) -> Option<&'a FileSig>) -> Files {
    let now = SystemTime::now();
    let mut new = Files::new();
    for (path, meta) in listing(dir) {
        let len = meta.len();
        let modified = meta.modified().ok();
        let racy =
            modified.is_none_or(|m| now.duration_since(m).map_or(true, |age| age < RACY_WINDOW));
        let hash = match old(&path) {
            Some(o) if o.len == len && o.modified == modified && !racy => o.hash.clone(),
            _ => std::fs::read(&path)
                .map(|b| sha256_hex(&b))
                .unwrap_or_default(),
        };
        new.insert(
            path,
            FileSig {
                len,
                modified,
                hash,
            },
        );
    }
    new
}

/// The `*.json` files directly inside `dir`, hidden ones skipped (as `load_dir` reads them).
fn listing(dir: &Path) -> Vec<(PathBuf, std::fs::Metadata)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.starts_with('.') && name.ends_with(".json")
        })
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            meta.is_file().then(|| (e.path(), meta))
        })
        .collect()
}

/// The file rule (see the module doc): append the file's definition as a revision
/// (`source: "file"`) when it or the contract hash differs from the last revision that came
/// from the file. `Some` when a revision was appended.
pub fn sync_file_revision(
    store: &Store,
    op: &Operation,
) -> Result<Option<RevisionRecord>, StoreError> {
    let rec = sync_file_revision_unflushed(store, op)?;
    if rec.is_some() {
        store.flush_now()?;
    }
    Ok(rec)
}

/// [`sync_file_revision`] for many operations with ONE flush at the end (start-up on a cold
/// data dir appends a revision per file): returns `("<integration>/<operation_id>", revision)`
/// per appended revision, all durable when this returns `Ok`. On an error, what was
/// appended before it is still flushed.
pub fn sync_file_revisions<'a>(
    store: &Store,
    ops: impl IntoIterator<Item = &'a Operation>,
) -> Result<Vec<(String, u64)>, StoreError> {
    let mut created = Vec::new();
    let mut failed = None;
    for op in ops {
        match sync_file_revision_unflushed(store, op) {
            Ok(Some(rec)) => created.push((op.key(), rec.revision)),
            Ok(None) => {}
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if !created.is_empty() {
        store.flush_now()?;
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(created),
    }
}

fn sync_file_revision_unflushed(
    store: &Store,
    op: &Operation,
) -> Result<Option<RevisionRecord>, StoreError> {
    let Some(def_hash) = op.definition_hash.clone() else {
        return Ok(None);
    };
    let key = op.key();
    // Usually the latest revision is the file's (one read); else the newest one that is.
    let last_from_file = match store.latest_revision_head(&key)? {
        Some(r) if r.source == "file" => Some(r),
        None => None,
        Some(_) => store
            .revisions(&key)?
            .into_iter()
            .rev()
            .find(|r| r.source == "file")
            .map(RevisionHead::from),
    };
    if last_from_file
        .is_some_and(|r| r.definition_hash == def_hash && r.contract_hash == op.contract_hash)
    {
        return Ok(None);
    }
    // Built only when a revision may be appended (`definition_hash` is `Some` iff it is).
    let Some(def) = op.op.definition_value() else {
        return Ok(None);
    };
    let (rec, created) =
        store.sync_revision_unflushed(&key, &op.contract_hash, &def, def_hash, "file")?;
    Ok(created.then_some(rec))
}

/// What one reload of an integration did.
#[derive(Debug, Clone)]
pub struct ReloadOutcome {
    pub integration: String,
    /// `("<integration>/<operation_id>", revision)` appended by the file rule.
    pub revisions: Vec<(String, u64)>,
    /// The operation files read (parsed, checked, compiled): the new and changed ones; the
    /// others kept their compiled operations.
    pub read: Vec<PathBuf>,
    /// Why the reload was refused (empty when it was applied).
    pub problems: Vec<Problem>,
}

/// Reload one integration from its files now (steps 1–3 of the module doc, without the
/// re-pin of the default attempt, which `crate::server::reload::poll` does). Blocking: file IO, compiling, fsync.
pub fn reload_integration(app: &App, name: &str) -> ReloadOutcome {
    let mut out = ReloadOutcome {
        integration: name.to_string(),
        revisions: Vec::new(),
        read: Vec::new(),
        problems: Vec::new(),
    };
    let Some(current) = app.integrations.get(name) else {
        return out;
    };
    let config = current.config.clone();
    // The operations read from a file whose content is unchanged are kept (their file rule
    // ran when they were read).
    let previous: HashMap<&Path, &Arc<Operation>> = current
        .operations
        .iter()
        .filter(|o| o.file_sig.is_some())
        .map(|o| (o.file.as_path(), o))
        .collect();
    let loaded = if config.operations.is_dir() {
        let files = signatures(&config.operations, |p| {
            previous.get(p).and_then(|o| o.file_sig.as_ref())
        });
        let parts = files
            .into_iter()
            .map(|(path, sig)| match previous.get(path.as_path()) {
                Some(o) if o.file_sig.as_ref().is_some_and(|s| s.hash == sig.hash) => {
                    Part::Keep(Arc::clone(o))
                }
                _ => Part::Read(path),
            })
            .collect();
        crate::operation::load_parts(&config, parts, &Default::default()).map(|p| (p.ops, p.read))
    } else {
        crate::operation::load_integration(&config, app.mode.tolerates_missing_operations())
            .map(|ops| (ops.into_iter().map(Arc::new).collect(), Vec::new()))
    };
    let kept: std::collections::HashSet<*const Operation> =
        previous.values().map(|o| Arc::as_ptr(o)).collect();
    let ops = match loaded {
        Ok((ops, read)) => {
            out.read = read;
            ops
        }
        Err(problems) => {
            refuse(app, name, problems, &mut out);
            return out;
        }
    };
    let _g = app.integrations.change_lock();
    for op in ops.iter().filter(|o| !kept.contains(&Arc::as_ptr(o))) {
        match sync_file_revision(&app.store, op) {
            Ok(Some(rev)) => out.revisions.push((op.key(), rev.revision)),
            Ok(None) => {}
            Err(e) => out.problems.push(Problem::new(
                &op.file,
                "",
                format!("cannot store the file's definition as a revision: {e}"),
            )),
        }
    }
    app.metrics.revisions_saved.fetch_add(
        out.revisions.len() as u64,
        std::sync::atomic::Ordering::Relaxed,
    );
    if !out.problems.is_empty() {
        let problems = std::mem::take(&mut out.problems);
        refuse(app, name, problems, &mut out);
        return out;
    }
    let Some(mut integ) = app.integrations.get(name).cloned() else {
        return out;
    };
    integ.builtins = builtins_of(&integ.wire, &ops);
    let count = ops.len();
    integ.routes = Arc::new(super::routes::RouteIndex::new(&ops));
    integ.operations = ops;
    app.integrations.replace(name, integ);
    write(&app.integrations.problems).remove(name);
    tracing::info!(
        integration = %name,
        operations = count,
        files_read = out.read.len(),
        revisions = ?out.revisions,
        "hot reload: operation files changed; new attempts use them (running attempts keep their pins)"
    );
    out
}

fn refuse(app: &App, name: &str, problems: Vec<Problem>, out: &mut ReloadOutcome) {
    tracing::warn!(
        integration = %name,
        problems = problems.len(),
        "hot reload refused; the previous operations and revisions keep serving"
    );
    for p in &problems {
        tracing::warn!(integration = %name, "  {p}");
    }
    write(&app.integrations.problems).insert(name.to_string(), problems.clone());
    out.problems = problems;
}

/// Re-pin the default attempt to the latest usable revisions (after a reload or an admin
/// save), under its state lock; `initial_state` keys of newly pinned revisions that its state
/// lacks are added. Failures are logged: the default attempt then keeps its previous pins.
pub async fn repin_default(app: &App) {
    let Some(a) = app.attempts.default_attempt() else {
        return;
    };
    let mut g = a.lock.lock().await;
    let pinned = match app.pin_latest() {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, "cannot re-pin the default attempt");
            return;
        }
    };
    let mut rec = a.record();
    if rec.pins == pinned.pins {
        return;
    }
    for (name, integ) in app.integrations.iter() {
        let state = g.state.entry(name.clone()).or_default();
        let mut added = false;
        for op in &integ.operations {
            let key = op.key();
            let Some(pin) = pinned.pins.get(&key) else {
                continue;
            };
            if rec.pins.get(&key) == Some(pin) {
                continue;
            }
            if let Ok(init) = app.revision_initial_state(&key, pin) {
                for (k, v) in init {
                    if !state.contains_key(&k) {
                        state.insert(k, v);
                        added = true;
                    }
                }
            }
        }
        if added {
            if let Err(e) = app.store.put_state(&rec.attempt_id, name, state) {
                tracing::error!(error = %e, "cannot store the default attempt's state");
            }
        }
    }
    rec.pins = pinned.pins.clone();
    match app.store.put_attempt(&rec) {
        Ok(()) => {
            tracing::info!(attempt = %rec.attempt_id, "default attempt re-pinned to the latest revisions");
            a.set_record(rec);
        }
        Err(e) => tracing::error!(error = %e, "cannot re-pin the default attempt"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_changes_are_seen_once() {
        let dir = tempfile::tempdir().unwrap();
        let i = Integrations::new(BTreeMap::new());
        assert!(!i.files_changed("x", dir.path()), "empty stays empty");
        std::fs::write(dir.path().join("a.json"), "{}").unwrap();
        std::fs::write(dir.path().join(".hidden.json"), "{}").unwrap();
        std::fs::write(dir.path().join("notes.md"), "x").unwrap();
        assert!(i.files_changed("x", dir.path()), "a new file");
        assert!(!i.files_changed("x", dir.path()), "nothing new");
        // Same size, same second: the content hash still tells.
        std::fs::write(dir.path().join("a.json"), "[]").unwrap();
        assert!(i.files_changed("x", dir.path()), "rewritten");
        std::fs::write(dir.path().join(".hidden.json"), "{\"a\":1}").unwrap();
        std::fs::write(dir.path().join("notes.md"), "y").unwrap();
        assert!(!i.files_changed("x", dir.path()), "ignored files");
        std::fs::remove_file(dir.path().join("a.json")).unwrap();
        assert!(i.files_changed("x", dir.path()), "a removed file");
        assert!(!i.files_changed("x", dir.path()));
    }
}
