//! `understudy evidence ATTEMPT`: open the data dir and write the attempt's envelope
//! ([`crate::evidence::stream`]: calls, agent-side events, pinned contracts evaluated, the
//! verdict last) to stdout as it is read from the store, one compact JSON line; exit 0 when
//! the verdict is `pass`, 1 when `fail` (every `verdict_reasons` line on stderr), 2 when it
//! cannot be read or holds no verdict (`--url` at something that is not understudy, or an
//! answer that breaks off). With `--url` the envelope is streamed from a running server's
//! admin API instead ([`crate::admin::client::evidence_to`]): `serve` holds the data dir
//! while it runs. Neither way holds the whole envelope in memory; `verify` and `report`
//! read one page of it ([`page_from`], [`page_from_store`]) for the verdict, the contract
//! results and the entries they show.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Exit;
use crate::cli::{EvidenceArgs, RemoteArgs};
use crate::evidence::stream::{write_envelope, Snapshot, Window, Written};
use crate::evidence::Verdict;
use crate::store::{Store, StoreError};

/// Loads an attempt's whole envelope from an open store into memory (small attempts and
/// tests; the commands stream it or read a page); `Ok(None)` when the attempt is unknown.
pub fn load_envelope(
    store: &Store,
    attempt_id: &str,
    redact: &[String],
) -> Result<Option<Value>, StoreError> {
    let mut out = Vec::new();
    match write_from_store(store, attempt_id, redact, None, &mut out) {
        Ok(None) => Ok(None),
        Ok(Some(_)) => serde_json::from_slice(&out)
            .map(Some)
            .map_err(|e| StoreError::Backend(format!("the envelope does not read back: {e}"))),
        Err(e) => Err(StoreError::Backend(e)),
    }
}

/// Writes the envelope of `attempt_id` (with `window`: one page of it) from an open store to
/// `out` as it is read, chunk by chunk; `Ok(None)` when the attempt is unknown. `Err` may
/// leave a partial envelope without its verdict in `out`.
pub fn write_from_store(
    store: &Store,
    attempt_id: &str,
    redact: &[String],
    window: Option<Window>,
    out: &mut dyn Write,
) -> Result<Option<Written>, String> {
    let Some(attempt) = store.attempt(attempt_id).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let final_state = match &attempt.final_state {
        Some(s) => s.clone(),
        None => store.state(attempt_id).map_err(|e| e.to_string())?,
    };
    let last_sequence = store.last_sequence(attempt_id).map_err(|e| e.to_string())?;
    let mut chunks = store.timeline_chunks(attempt_id, attempt.rolled_through(), last_sequence);
    let mut next = || chunks().map_err(|e| e.to_string());
    let snap = Snapshot {
        attempt: &attempt,
        final_state: &final_state,
        last_sequence,
        redact,
    };
    write_envelope(out, &snap, window, &mut next)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// One page of the envelope from an open store, as a JSON value; `Ok(None)` for an unknown
/// attempt.
pub fn page_from_store(
    store: &Store,
    attempt_id: &str,
    redact: &[String],
    window: Window,
) -> Result<Option<Value>, String> {
    let mut out = Vec::new();
    match write_from_store(store, attempt_id, redact, Some(window), &mut out)? {
        None => Ok(None),
        Some(_) => serde_json::from_slice(&out)
            .map(Some)
            .map_err(|e| format!("the envelope does not read back: {e}")),
    }
}

/// `understudy evidence`: see [`run_with`]; with `--url`, the envelope streamed from the
/// server to stdout.
pub fn evidence(args: &EvidenceArgs) -> Exit {
    match &args.remote.url {
        Some(url) => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let got = crate::admin::client::evidence_to(
                url,
                args.remote.admin_token.as_deref(),
                &args.attempt,
                &mut out,
            );
            let _ = out.write_all(b"\n").and_then(|()| out.flush());
            match got {
                Ok(verdict) => exit_for(&verdict),
                Err(e) => {
                    eprintln!("understudy evidence: {e}");
                    Exit::Usage
                }
            }
        }
        None => run_with(
            &args.attempt,
            args.data_dir.as_deref(),
            args.config.as_deref(),
        ),
    }
}

/// One page of the envelope of `attempt_id` from the running server at `url` (`--url`,
/// with `--admin-token`), for `verify` and `report`: the entries after `window.after`, the
/// verdict and contract results over the whole timeline.
pub(crate) fn page_from(
    url: &str,
    remote: &RemoteArgs,
    attempt_id: &str,
    window: Window,
) -> Result<Value, String> {
    crate::admin::client::evidence_page(
        url,
        remote.admin_token.as_deref(),
        attempt_id,
        window.after,
        window.limit,
    )
}

/// `understudy evidence ATTEMPT [--data-dir D] [--config F]` with the flags as given:
/// resolves the store and the redaction list, then writes the envelope as [`run`] does.
///
/// The project file is `--config F`, else `understudy.json` in the current directory when
/// present; its `redact` list always applies (a project file that cannot be loaded is an
/// error, exit 2, rather than an export without its redactions). The store is the fleet
/// store `UNDERSTUDY_STORE` or the project file's `store` names (`postgres://…`), as `serve`
/// finds it; else the embedded store in `--data-dir D`, else the project file's `data_dir`,
/// else `.understudy`.
pub fn run_with(attempt_id: &str, data_dir: Option<&Path>, config: Option<&Path>) -> Exit {
    match resolve_store(data_dir, config, "evidence") {
        Ok(local) => match local.open() {
            Ok(store) => write_stored(&store, attempt_id, &local.dir, &local.redact),
            Err(e) => {
                eprintln!("understudy evidence: {e}");
                Exit::Usage
            }
        },
        Err(exit) => exit,
    }
}

/// Where `evidence`, `verify` and `report` read an attempt from without `--url`: the data
/// dir, the fleet store's URL when the project uses one, and the project's redactions.
pub(crate) struct Local {
    pub dir: PathBuf,
    pub redact: Vec<String>,
    /// `postgres://…` from `UNDERSTUDY_STORE` or the project file's `store`.
    pub store_url: Option<String>,
}

impl Local {
    /// Opens the store without creating one: the fleet store when a URL is given (an
    /// invalid URL is an error naming where it came from), else the embedded store in `dir`.
    pub fn open(&self) -> Result<Store, StoreError> {
        match &self.store_url {
            Some(url) if crate::config::is_postgres_url(url) => {
                Store::open_postgres(url, &self.dir)
            }
            Some(url) => Err(StoreError::Invalid(format!(
                "{}: expected a postgres:// or postgresql:// URL, got {:?}",
                crate::commands::serve::STORE_ENV,
                crate::config::redact_url(url)
            ))),
            None => Store::open_existing(&self.dir),
        }
    }
}

/// The store and the redaction list of `evidence` and `verify` (rules of [`run_with`]);
/// `Err` after reporting a project file that cannot be loaded.
pub(crate) fn resolve_store(
    data_dir: Option<&Path>,
    config: Option<&Path>,
    cmd: &str,
) -> Result<Local, Exit> {
    resolve(data_dir, config).map_err(|e| {
        eprintln!("understudy {cmd}: {e}");
        Exit::Usage
    })
}

/// The store and the redaction list of `evidence`, `verify` and `report` (rules of
/// [`run_with`]); `Err` names a project file that cannot be loaded.
pub(crate) fn resolve(data_dir: Option<&Path>, config: Option<&Path>) -> Result<Local, String> {
    let default_file = Path::new(crate::config::PROJECT_FILE);
    let file = match config {
        Some(f) => Some(f),
        None if default_file.is_file() => Some(default_file),
        None => None,
    };
    let cfg = file
        .map(crate::config::Config::load)
        .transpose()
        .map_err(|e| e.to_string())?;
    let redact = cfg.as_ref().map(|c| c.redact.clone()).unwrap_or_default();
    let dir = match (data_dir, &cfg) {
        (Some(d), _) => d.to_path_buf(),
        (None, Some(c)) => c.data_dir.clone(),
        (None, None) => PathBuf::from(".understudy"),
    };
    // An explicit data dir means the embedded store in it, whatever the project names.
    let store_url = match data_dir {
        Some(_) => None,
        None => std::env::var(crate::commands::serve::STORE_ENV)
            .ok()
            .filter(|u| !u.is_empty())
            .or_else(|| cfg.as_ref().and_then(|c| c.store.clone())),
    };
    Ok(Local {
        dir,
        redact,
        store_url,
    })
}

/// `understudy evidence ATTEMPT --data-dir D`: writes the envelope to stdout as it is read
/// (compact JSON, then a newline). Exit 0 when the verdict is `pass`, 1 when `fail` (the
/// reasons go to stderr), 2 when the data dir or the attempt does not exist, the store cannot
/// be opened (for example while `understudy serve` holds the data dir) or read to the end.
pub fn run(attempt_id: &str, data_dir: &Path, redact: &[String]) -> Exit {
    match Store::open_existing(data_dir) {
        Ok(store) => write_stored(&store, attempt_id, data_dir, redact),
        Err(e) => {
            eprintln!("understudy evidence: {e}");
            Exit::Usage
        }
    }
}

/// [`run`] on an open store (`data_dir` names it in messages).
fn write_stored(store: &Store, attempt_id: &str, data_dir: &Path, redact: &[String]) -> Exit {
    let resolved = match resolve_default(store, attempt_id, data_dir) {
        Ok(id) => id,
        Err(e) => {
            eprintln!("understudy evidence: {e}");
            return Exit::Usage;
        }
    };
    let attempt_id = resolved.as_str();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = write_from_store(store, attempt_id, redact, None, &mut out);
    let _ = out.write_all(b"\n").and_then(|()| out.flush());
    match written {
        Ok(Some(w)) => verdict_exit(&w.verdict),
        Ok(None) => {
            eprintln!(
                "understudy evidence: no attempt `{attempt_id}` in data dir {}",
                data_dir.display()
            );
            Exit::Usage
        }
        Err(e) => {
            eprintln!("understudy evidence: cannot judge: {e}");
            Exit::Usage
        }
    }
}

/// `attempt_id` itself, or for `default` (the calls without a token, as with `--url`) the id
/// of the default attempt the last server start on `data_dir` opened. Used by `evidence`,
/// `verify` and `report`.
pub(crate) fn resolve_default(
    store: &Store,
    attempt_id: &str,
    data_dir: &Path,
) -> Result<String, String> {
    if attempt_id != "default" {
        return Ok(attempt_id.to_string());
    }
    match latest_default(store) {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err(format!(
            "no default attempt in data dir {} (no server has run on it)",
            data_dir.display()
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// The id of the default attempt the last server start opened (the latest `started_at`; RFC
/// 3339 times of one clock compare as text).
pub(crate) fn latest_default(store: &Store) -> Result<Option<String>, StoreError> {
    Ok(store
        .attempts()?
        .into_iter()
        .filter(|a| a.is_default)
        .max_by(|a, b| a.started_at.cmp(&b.started_at))
        .map(|a| a.attempt_id))
}

/// The exit code of a value carrying `verdict` (and `verdict_reasons`): 0 pass, 1 fail
/// (reasons on stderr), 2 when it holds no verdict of understudy.
fn exit_for(v: &Value) -> Exit {
    match Verdict::from_envelope(v) {
        Ok(v) => verdict_exit(&v),
        Err(e) => {
            eprintln!("understudy evidence: cannot judge: {e}");
            Exit::Usage
        }
    }
}

fn verdict_exit(verdict: &Verdict) -> Exit {
    if verdict.passed() {
        Exit::Ok
    } else {
        for r in &verdict.reasons {
            eprintln!("verdict fail: {}: {}", r.code, r.message);
        }
        Exit::Problems
    }
}
