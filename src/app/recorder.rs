//! The recorder of `record` and `record-missing` (docs/src/guides/record.md): the exchanges captured while
//! forwarding, kept in memory per integration in arrival order, and [`flush_drafts`], which
//! turns them into draft operation files (`crate::author::record::drafts` + `write_drafts`).
//!
//! # Decisions
//! - Exchanges are scrubbed ([`crate::author::record::scrub_exchange`]) **before** they are kept, so
//!   not even the in-memory buffer holds a credential; `drafts()` scrubs again.
//! - Drafts of integration `<name>` go to `<out>/<name>/` (one operations directory per
//!   integration: each has its own profile and operation ids, and `"operations":
//!   "<out>/<name>"` makes it servable as it is).
//! - A flush is **cumulative**: it drafts every exchange of the run so far, so the second
//!   flush of a run holds what the first held plus what came since. Files this run wrote
//!   before are replaced when nobody changed them since (their SHA-256 is remembered); a file
//!   that was edited in between is left alone and the new draft goes beside it as
//!   `<id>.json.draft` (the rule of `write_drafts`).
//! - The exchange buffer is bounded ([`MAX_EXCHANGES`] per integration); later exchanges are
//!   counted and said in the flush answer instead of growing memory without bound.
//! - MCP server-to-client requests: the client answers them in a POST of its own, which
//!   arrives (and is kept here, [`Recorder::keep_answer`]) before the real server can finish
//!   the tool call that asked; the call's capture takes its answers
//!   ([`Recorder::take_answer`]) by integration, `Mcp-Session-Id` and request id. At most
//!   [`MAX_ANSWERS`] answers wait; the oldest goes first. A server may also send such a
//!   request on the session's `GET` stream instead of the call's own stream (the TypeScript
//!   SDK does, for `server.request`): it is kept ([`Recorder::keep_ask`]) and attributed to
//!   the tool call of that session that was in flight when it came ([`Recorder::take_asks`]).
//! - What the capture had to leave out is kept as notes ([`Recorder::note`]) that the next
//!   flush adds to `record-notes.txt`.
//! - Shutdown ([`flush_at_shutdown`]) flushes when there is an output directory and anything
//!   was captured; the written files and the notes are logged.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{json, Value};

use super::App;
use crate::author::record::{self, Exchange, ToolOutcome};
use crate::config::Mode;
use crate::contract::hash::sha256_hex;
use crate::operation::LoadedOperation;

/// At most this many exchanges are kept per integration.
pub const MAX_EXCHANGES: usize = 10_000;

/// At most this many client answers wait for the tool call that asked.
pub const MAX_ANSWERS: usize = 1_000;

/// (integration, session id or "", canonical JSON of the request id).
type AnswerKey = (String, String, String);

/// The exchange buffer and what the flushes of this run wrote.
#[derive(Debug)]
pub struct Recorder {
    out: Option<PathBuf>,
    inner: Mutex<Inner>,
    /// One clone per capture still in flight ([`Recorder::flight`]).
    flights: Flight,
}

/// A token held by each capture until its call is finished (its exchange kept or not): the
/// answer can reach the agent before the upstream's stream ends and the call is finished,
/// so a flush first waits for the calls in flight ([`Recorder::settle`]).
#[derive(Debug, Clone, Default)]
pub struct Flight(std::sync::Arc<()>);

/// How long a flush waits for the calls in flight to finish.
pub const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Debug, Default)]
struct Inner {
    exchanges: BTreeMap<String, Vec<Exchange>>,
    dropped: BTreeMap<String, usize>,
    /// Files written by earlier flushes → SHA-256 of what was written.
    written: HashMap<PathBuf, String>,
    /// Client answers to server-to-client requests, oldest first (module doc).
    answers: Vec<(AnswerKey, ToolOutcome)>,
    /// Requests the server sent on a `GET` stream: (integration, session, order seen, id,
    /// method, params), oldest first.
    asks: Vec<(String, String, u64, Value, String, Value)>,
    /// integration → what the capture left out.
    notes: BTreeMap<String, Vec<String>>,
}

impl Recorder {
    /// A recorder writing drafts under `out` (`None`: capture only; a flush is refused).
    pub fn new(out: Option<PathBuf>) -> Recorder {
        Recorder {
            out,
            inner: Mutex::new(Inner::default()),
            flights: Flight::default(),
        }
    }

    /// The token of a capture starting now.
    pub fn flight(&self) -> Flight {
        self.flights.clone()
    }

    /// How many captures are in flight.
    pub fn in_flight(&self) -> usize {
        std::sync::Arc::strong_count(&self.flights.0) - 1
    }

    /// Waits (at most [`SETTLE_LIMIT`]) until no capture is in flight, so a flush includes
    /// the calls whose answer was already sent; returns how many were still in flight.
    pub async fn settle(&self) -> usize {
        let until = tokio::time::Instant::now() + SETTLE_LIMIT;
        while self.in_flight() > 0 && tokio::time::Instant::now() < until {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        self.in_flight()
    }

    /// The output directory (`--out`).
    pub fn out_dir(&self) -> Option<&Path> {
        self.out.as_deref()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keep one (already scrubbed) exchange.
    pub fn push(&self, ex: Exchange) {
        let mut g = self.lock();
        let list = g.exchanges.entry(ex.integration.clone()).or_default();
        if list.len() >= MAX_EXCHANGES {
            *g.dropped.entry(ex.integration).or_default() += 1;
            return;
        }
        list.push(ex);
    }

    /// Keep the client's answer to the server's request `id` (already scrubbed).
    pub fn keep_answer(&self, integration: &str, session: &str, id: &Value, answer: ToolOutcome) {
        let key = (integration.to_string(), session.to_string(), id.to_string());
        let mut g = self.lock();
        g.answers.retain(|(k, _)| *k != key);
        if g.answers.len() >= MAX_ANSWERS {
            g.answers.remove(0);
        }
        g.answers.push((key, answer));
    }

    /// Keep a request the server sent on a `GET` stream of `session` (seen at `order`).
    pub fn keep_ask(&self, integration: &str, session: &str, order: u64, message: &Value) {
        let mut g = self.lock();
        if g.asks.len() >= MAX_ANSWERS {
            g.asks.remove(0);
        }
        g.asks.push((
            integration.to_string(),
            session.to_string(),
            order,
            message.get("id").cloned().unwrap_or(Value::Null),
            message["method"].as_str().unwrap_or_default().to_string(),
            record::stable_params(message.get("params")),
        ));
    }

    /// Take the requests sent on a `GET` stream of `session` after `since` (the order of a
    /// tool call's start): `(id, method, params)` in the order they came.
    pub fn take_asks(
        &self,
        integration: &str,
        session: &str,
        since: u64,
    ) -> Vec<(Value, String, Value)> {
        let mut g = self.lock();
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut g.asks)
            .into_iter()
            .partition(|a| a.0 == integration && a.1 == session && a.2 > since);
        g.asks = rest;
        mine.into_iter().map(|a| (a.3, a.4, a.5)).collect()
    }

    /// Note what the capture of `integration` had to leave out (said by the next flush).
    pub fn note(&self, integration: &str, text: String) {
        let mut g = self.lock();
        let list = g.notes.entry(integration.to_string()).or_default();
        if list.len() < 100 && !list.contains(&text) {
            list.push(text);
        }
    }

    /// Take the client's answer to the server's request `id`, when it was kept.
    pub fn take_answer(&self, integration: &str, session: &str, id: &Value) -> Option<ToolOutcome> {
        let key = (integration.to_string(), session.to_string(), id.to_string());
        let mut g = self.lock();
        let i = g.answers.iter().position(|(k, _)| *k == key)?;
        Some(g.answers.remove(i).1)
    }

    /// How many exchanges are kept, over every integration.
    pub fn len(&self) -> usize {
        self.lock().exchanges.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of the exchanges of one integration, in arrival order.
    pub fn exchanges(&self, integration: &str) -> Vec<Exchange> {
        self.lock()
            .exchanges
            .get(integration)
            .cloned()
            .unwrap_or_default()
    }
}

/// The drafts as they may be written: every value through the one scrubber
/// (`crate::util::scrub`: shapes and known secrets the name-based capture scrub cannot see),
/// the contract hash renewed when a contract changed.
fn scrub_drafts(
    scrubber: &crate::util::scrub::Scrubber,
    set: &mut record::DraftSet,
    profile: crate::contract::ProfileKind,
) {
    for d in &mut set.files {
        if let Some((_, v)) = &mut d.extra {
            scrubber.json(v);
        }
        let Ok(mut v) = serde_json::to_value(&d.op) else {
            continue;
        };
        // The schemas describe members, they hold no call's values: a member named like a
        // secret (`password`) keeps its schema (marking it would break the contract); the
        // strings inside are scrubbed like any other (after the values are learned).
        let schemas: Vec<(&str, Value)> = ["input_schema", "output_schema"]
            .into_iter()
            .filter_map(|k| Some((k, v.as_object_mut()?.remove(k)?)))
            .collect();
        let mut changed = scrubber.json(&mut v);
        for (k, mut s) in schemas {
            changed |= scrub_schema(scrubber, &mut s, 0);
            v[k] = s;
        }
        if changed {
            if let Ok(op) = serde_json::from_value(v) {
                d.op = op;
                crate::author::import::rehash(&mut d.op, profile);
            }
        }
    }
    for n in &mut set.notes {
        if let Some(t) = scrubber.text(n) {
            *n = t;
        }
    }
}

/// Scrub the strings of a JSON Schema without marking a subschema by its member name
/// (`properties.password` stays a schema); bounded like every JSON walk.
fn scrub_schema(scrubber: &crate::util::scrub::Scrubber, v: &mut Value, depth: usize) -> bool {
    if depth > crate::util::json::MAX_STORED_DEPTH {
        return false;
    }
    match v {
        Value::Object(m) => m
            .values_mut()
            .fold(false, |c, x| scrub_schema(scrubber, x, depth + 1) | c),
        Value::Array(a) => a
            .iter_mut()
            .fold(false, |c, x| scrub_schema(scrubber, x, depth + 1) | c),
        Value::String(s) => match scrubber.text(s) {
            Some(t) => {
                *s = t;
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// Write the drafts of every integration that captured something into `<out>/<integration>/`
/// (module doc). The answer:
/// `{"out": DIR, "exchanges": n, "integrations": {"<name>": {"dir", "exchanges", "dropped",
/// "files": [paths], "drafts": [{"operation_id","file","existing","exchanges","problems"}],
/// "notes": [..]}}}`. `Err` names what failed (no `--out`, a file that cannot be written).
pub async fn flush_drafts(app: &App) -> Result<Value, String> {
    let recorder = &app.forwarding.recorder;
    let Some(out) = recorder.out_dir().map(Path::to_path_buf) else {
        return Err(format!(
            "no drafts directory: drafts are written by `understudy record --out DIR` (or `serve --mode {} --out DIR`)",
            if app.mode == Mode::RecordMissing { "record-missing" } else { "record" }
        ));
    };
    let unfinished = recorder.settle().await;
    if unfinished > 0 {
        tracing::warn!(
            unfinished,
            "record: calls still in flight after {SETTLE_LIMIT:?} are not in these drafts"
        );
    }
    let (snapshot, dropped, capture_notes) = {
        let g = recorder.lock();
        (g.exchanges.clone(), g.dropped.clone(), g.notes.clone())
    };
    let mut report = serde_json::Map::new();
    let mut total = 0usize;
    for (name, exchanges) in snapshot {
        if exchanges.is_empty() {
            continue;
        }
        total += exchanges.len();
        let Some(integ) = app.integration(&name) else {
            continue;
        };
        let existing: Vec<LoadedOperation> = integ
            .operations
            .iter()
            .map(|o| LoadedOperation {
                file: o.file.clone(),
                op: o.op.clone(),
                contract_hash: o.contract_hash.clone(),
            })
            .collect();
        let profile = integ.config.profile;
        let scrub = app.config.scrub.clone();
        let dir = out.join(&name);
        let earlier: HashMap<PathBuf, String> = recorder.lock().written.clone();
        let job_dir = dir.clone();
        let left_out = capture_notes.get(&name).cloned().unwrap_or_default();
        let scrubber = app.store.scrubber().clone();
        let result = tokio::task::spawn_blocking(move || {
            let mut set = record::drafts(&exchanges, &existing, profile, &scrub);
            set.notes.extend(left_out);
            scrub_drafts(&scrubber, &mut set, profile);
            remove_unchanged(&job_dir, &earlier);
            let files = record::write_drafts(&job_dir, &set)?;
            let hashes: Vec<(PathBuf, String)> = files
                .iter()
                .filter_map(|f| Some((f.clone(), sha256_hex(&std::fs::read(f).ok()?))))
                .collect();
            Ok::<_, String>((set, files, hashes, exchanges.len()))
        })
        .await
        .map_err(|e| format!("writing the drafts of `{name}` failed: {e}"))??;
        let (set, files, hashes, n) = result;
        recorder.lock().written.extend(hashes);
        for note in &set.notes {
            tracing::info!(integration = %name, "record: {note}");
        }
        let drafts: Vec<Value> = set
            .files
            .iter()
            .map(|d| {
                json!({
                    "operation_id": d.operation_id,
                    "file": files.iter().find(|f| {
                        f.file_name().and_then(|s| s.to_str()).is_some_and(|s| {
                            s == format!("{}.json", d.operation_id)
                                || s == format!("{}.json.draft", d.operation_id)
                        })
                    }),
                    "existing": d.existing,
                    "exchanges": d.exchanges,
                    "problems": d.problems,
                })
            })
            .collect();
        report.insert(
            name.clone(),
            json!({
                "dir": dir,
                "exchanges": n,
                "dropped": dropped.get(&name).copied().unwrap_or(0),
                "files": files,
                "drafts": drafts,
                "notes": set.notes,
            }),
        );
    }
    Ok(json!({ "out": out, "exchanges": total, "integrations": report }))
}

/// Remove the files an earlier flush wrote into `dir` that still hold exactly what was
/// written (a later flush rewrites them); edited files stay.
fn remove_unchanged(dir: &Path, earlier: &HashMap<PathBuf, String>) {
    for (path, hash) in earlier {
        // Drafts, and the `resources/` and `prompts/` files beside them.
        if !path.starts_with(dir) {
            continue;
        }
        let same = std::fs::symlink_metadata(path)
            .map(|m| m.is_file())
            .unwrap_or(false)
            && std::fs::read(path)
                .map(|b| sha256_hex(&b) == *hash)
                .unwrap_or(false);
        if same {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// At shutdown: flush when there is an output directory and something was captured.
pub async fn flush_at_shutdown(app: &App) {
    let recorder = &app.forwarding.recorder;
    recorder.settle().await;
    if recorder.out_dir().is_none() || recorder.is_empty() {
        if matches!(app.mode, Mode::Record | Mode::RecordMissing) && !recorder.is_empty() {
            tracing::warn!(
                exchanges = recorder.len(),
                "record: no --out directory, the captured exchanges are not written"
            );
        }
        return;
    }
    match flush_drafts(app).await {
        Ok(v) => {
            let files: Vec<String> = v["integrations"]
                .as_object()
                .map(|m| {
                    m.values()
                        .flat_map(|i| i["files"].as_array().cloned().unwrap_or_default())
                        .filter_map(|f| f.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            tracing::info!(
                exchanges = v["exchanges"].as_u64().unwrap_or(0),
                "record: drafts written: {}",
                files.join(", ")
            );
        }
        Err(e) => tracing::error!("record: writing drafts at shutdown failed: {e}"),
    }
}
