//! `understudy evidence ATTEMPT`: open the data dir, build the attempt's envelope
//! ([`crate::evidence`], pure: calls, agent-side events, pinned contracts evaluated) and print
//! it; exit 0 when the verdict is `pass`, 1 when `fail` (every `verdict_reasons` line on
//! stderr), 2 when it cannot be read or holds no verdict (`--url` at something that is not
//! understudy). [`crate::store::Store::attempt_evidence`] is the one reader of an attempt's
//! records, shared with the admin routes and `understudy verify`. With `--url` the envelope
//! comes from a running server's admin API instead ([`crate::admin::client`]), as `verify`'s
//! and `report`'s do ([`envelope_from`]): `serve` holds the data dir while it runs.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Exit;
use crate::cli::{EvidenceArgs, RemoteArgs};
use crate::evidence::{envelope_of, Inputs, Verdict};
use crate::store::{Store, StoreError};

/// Loads an attempt's envelope from an open store; `Ok(None)` when the attempt is unknown.
pub fn load_envelope(
    store: &Store,
    attempt_id: &str,
    redact: &[String],
) -> Result<Option<Value>, StoreError> {
    Ok(store
        .attempt_evidence(attempt_id)?
        .map(|a| envelope_of(&Inputs::of(&a, redact))))
}

/// `understudy evidence`: see [`run_with`]; with `--url`, [`envelope_from`] the server.
pub fn evidence(args: &EvidenceArgs) -> Exit {
    match &args.remote.url {
        Some(url) => match envelope_from(url, &args.remote, &args.attempt) {
            Ok(env) => print_envelope(&env),
            Err(e) => {
                eprintln!("understudy evidence: {e}");
                Exit::Usage
            }
        },
        None => run_with(
            &args.attempt,
            args.data_dir.as_deref(),
            args.config.as_deref(),
        ),
    }
}

/// The envelope of `attempt_id` from the running server at `url` (`--url`, with
/// `--admin-token`), for `evidence`, `verify` and `report`.
pub(crate) fn envelope_from(
    url: &str,
    remote: &RemoteArgs,
    attempt_id: &str,
) -> Result<Value, String> {
    crate::admin::client::evidence(url, remote.admin_token.as_deref(), attempt_id)
}

/// `understudy evidence ATTEMPT [--data-dir D] [--config F]` with the flags as given:
/// resolves the data dir and the redaction list, then calls [`run`].
///
/// The project file is `--config F`, else `understudy.json` in the current directory when
/// present; its `redact` list always applies (a project file that cannot be loaded is an
/// error, exit 2, rather than an export without its redactions). The data dir is
/// `--data-dir D`, else the project file's `data_dir`, else `.understudy`.
pub fn run_with(attempt_id: &str, data_dir: Option<&Path>, config: Option<&Path>) -> Exit {
    match resolve_store(data_dir, config, "evidence") {
        Ok((dir, redact)) => run(attempt_id, &dir, &redact),
        Err(exit) => exit,
    }
}

/// The data dir and the redaction list of `evidence` and `verify` (rules of [`run_with`]);
/// `Err` after reporting a project file that cannot be loaded.
pub(crate) fn resolve_store(
    data_dir: Option<&Path>,
    config: Option<&Path>,
    cmd: &str,
) -> Result<(PathBuf, Vec<String>), Exit> {
    resolve(data_dir, config).map_err(|e| {
        eprintln!("understudy {cmd}: {e}");
        Exit::Usage
    })
}

/// The data dir and the redaction list of `evidence`, `verify` and `report` (rules of
/// [`run_with`]); `Err` names a project file that cannot be loaded.
pub fn resolve(
    data_dir: Option<&Path>,
    config: Option<&Path>,
) -> Result<(PathBuf, Vec<String>), String> {
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
    Ok((dir, redact))
}

/// `understudy evidence ATTEMPT --data-dir D`: prints the envelope as pretty JSON on stdout.
/// Exit 0 when the verdict is `pass`, 1 when `fail` (the reasons go to stderr), 2 when the
/// data dir or the attempt does not exist or the store cannot be opened (for example while
/// `understudy serve` holds the data dir).
pub fn run(attempt_id: &str, data_dir: &Path, redact: &[String]) -> Exit {
    let store = match Store::open_existing(data_dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("understudy evidence: {e}");
            return Exit::Usage;
        }
    };
    // `default` names the default attempt (the calls without a token), as with `--url`: the
    // one the last server start opened.
    let resolved;
    let attempt_id = if attempt_id == "default" {
        match latest_default(&store) {
            Ok(Some(id)) => {
                resolved = id;
                resolved.as_str()
            }
            Ok(None) => {
                eprintln!(
                    "understudy evidence: no default attempt in data dir {} (no server has run on it)",
                    data_dir.display()
                );
                return Exit::Usage;
            }
            Err(e) => {
                eprintln!("understudy evidence: {e}");
                return Exit::Usage;
            }
        }
    } else {
        attempt_id
    };
    let found = match store.attempt_evidence(attempt_id) {
        Ok(Some(a)) => a,
        Ok(None) => {
            eprintln!(
                "understudy evidence: no attempt `{attempt_id}` in data dir {}",
                data_dir.display()
            );
            return Exit::Usage;
        }
        Err(e) => {
            eprintln!("understudy evidence: {e}");
            return Exit::Usage;
        }
    };
    print_envelope(&envelope_of(&crate::evidence::Inputs::of(&found, redact)))
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

/// Prints the envelope as pretty JSON on stdout and its `verdict_reasons` on stderr; the exit
/// code of [`run`]: 0 pass, 1 fail, 2 when the value holds no verdict (not understudy's).
fn print_envelope(env: &Value) -> Exit {
    let verdict = match Verdict::from_envelope(env) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("understudy evidence: cannot judge: {e}");
            return Exit::Usage;
        }
    };
    match serde_json::to_string_pretty(env) {
        Ok(s) => println!("{s}"),
        Err(e) => {
            eprintln!("understudy evidence: cannot print the envelope: {e}");
            return Exit::Usage;
        }
    }
    if verdict.passed() {
        Exit::Ok
    } else {
        for r in &verdict.reasons {
            eprintln!("verdict fail: {}: {}", r.code, r.message);
        }
        Exit::Problems
    }
}
