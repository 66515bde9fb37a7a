//! `understudy evidence ATTEMPT`: open the data dir, build the attempt's envelope
//! ([`crate::evidence`], pure) and print it; exit 0 when the verdict is `pass`, 1 when
//! `fail`, 2 when it cannot be read.

use std::path::Path;

use serde_json::Value;

use super::Exit;
use crate::cli::EvidenceArgs;
use crate::evidence::{envelope, verdict_reasons};
use crate::store::{Store, StoreError};

/// Loads an attempt's envelope from an open store; `Ok(None)` when the attempt is unknown.
/// The admin route `GET /attempts/{id}/evidence` and the CLI share it.
pub fn load_envelope(
    store: &Store,
    attempt_id: &str,
    redact: &[String],
) -> Result<Option<Value>, StoreError> {
    let Some(attempt) = store.attempt(attempt_id)? else {
        return Ok(None);
    };
    let events = store.evidence(attempt_id)?;
    let state = store.state(attempt_id)?;
    Ok(Some(envelope(&attempt, &events, &state, redact)))
}

/// `understudy evidence`: see [`run_with`].
pub fn evidence(args: &EvidenceArgs) -> Exit {
    run_with(
        &args.attempt,
        args.data_dir.as_deref(),
        args.config.as_deref(),
    )
}

/// `understudy evidence ATTEMPT [--data-dir D] [--config F]` with the flags as given:
/// resolves the data dir and the redaction list, then calls [`run`].
///
/// The project file is `--config F`, else `understudy.json` in the current directory when
/// present; its `redact` list always applies (a project file that cannot be loaded is an
/// error, exit 2, rather than an export without its redactions). The data dir is
/// `--data-dir D`, else the project file's `data_dir`, else `.understudy`.
pub fn run_with(attempt_id: &str, data_dir: Option<&Path>, config: Option<&Path>) -> Exit {
    let default_file = Path::new(crate::config::PROJECT_FILE);
    let file = match config {
        Some(f) => Some(f),
        None if default_file.is_file() => Some(default_file),
        None => None,
    };
    let cfg = match file.map(crate::config::Config::load).transpose() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("understudy evidence: {e}");
            return Exit::Usage;
        }
    };
    let redact = cfg.as_ref().map(|c| c.redact.clone()).unwrap_or_default();
    let dir = match (data_dir, &cfg) {
        (Some(d), _) => d.to_path_buf(),
        (None, Some(c)) => c.data_dir.clone(),
        (None, None) => std::path::PathBuf::from(".understudy"),
    };
    run(attempt_id, &dir, &redact)
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
    let attempt = match store.attempt(attempt_id) {
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
    let (events, state) = match (store.evidence(attempt_id), store.state(attempt_id)) {
        (Ok(ev), Ok(st)) => (ev, st),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("understudy evidence: {e}");
            return Exit::Usage;
        }
    };
    let env = envelope(&attempt, &events, &state, redact);
    match serde_json::to_string_pretty(&env) {
        Ok(s) => println!("{s}"),
        Err(e) => {
            eprintln!("understudy evidence: cannot print the envelope: {e}");
            return Exit::Usage;
        }
    }
    let reasons = verdict_reasons(&attempt, &events);
    if reasons.is_empty() {
        Exit::Ok
    } else {
        for r in &reasons {
            eprintln!("verdict fail: {r}");
        }
        Exit::Problems
    }
}
