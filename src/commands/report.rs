//! `understudy report ATTEMPT --format json|junit|html [--out FILE] [--report-dir D]
//! [--data-dir D] [--config F]` (docs/src/getting-started/first-test.md): the attempt's envelope from the store (as
//! `understudy evidence` reads it, with the project's redactions), rendered by
//! [`crate::evidence::report`]. `--report-dir D` writes all three formats into D.
//!
//! Exit codes: 0 written and the verdict is `pass`; 1 written and the verdict is `fail` (as
//! `understudy evidence`, so CI can gate on it); 2 usage (no format, an unknown attempt, a
//! data dir that is missing or held by a running server, a file that cannot be written, an
//! answer without a `verdict` member: whenever understudy could not judge).
//!
//! `--url http://HOST:PORT` (and `--admin-token`) reads the envelope from a running server's
//! admin API instead of the data dir it holds (the same envelope).

use std::path::Path;

use serde_json::Value;

use super::evidence::load_envelope;
use super::Exit;
use crate::cli::ReportArgs;
use crate::evidence::report::{self, Format};
use crate::evidence::Verdict;
use crate::store::Store;

/// `understudy report` (module doc).
pub fn report(args: &ReportArgs) -> Exit {
    if args.format.is_none() && args.report_dir.is_none() {
        eprintln!(
            "understudy report: give --format json|junit|html (or --report-dir DIR for all three)"
        );
        return Exit::Usage;
    }
    let env = match &args.remote.url {
        Some(url) => super::evidence::envelope_from(url, &args.remote, &args.attempt),
        None => super::evidence::resolve(args.data_dir.as_deref(), args.config.as_deref())
            .and_then(|(dir, redact)| load(&args.attempt, &dir, &redact)),
    };
    let env = match env {
        Ok(e) => e,
        Err(e) => {
            eprintln!("understudy report: {e}");
            return Exit::Usage;
        }
    };
    // Not a verdict of understudy (a foreign server's answer): nothing to report on.
    let verdict = match Verdict::from_envelope(&env) {
        Ok(v) => v,
        Err(e) => {
            eprintln!(
                "understudy report: cannot judge attempt `{}`: {e}",
                args.attempt
            );
            return Exit::Usage;
        }
    };
    if let Some(d) = &args.report_dir {
        if let Err(e) = write_all(d, &env) {
            eprintln!("understudy report: {e}");
            return Exit::Usage;
        }
        eprintln!("understudy report: wrote {}", d.display());
    } else if let Some(format) = args.format {
        let bytes = report::render(&env, format);
        match &args.out {
            Some(f) => {
                if let Err(e) = std::fs::write(f, &bytes) {
                    eprintln!("understudy report: cannot write {}: {e}", f.display());
                    return Exit::Usage;
                }
            }
            None => {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                if out.write_all(&bytes).and_then(|_| out.flush()).is_err() {
                    return Exit::Usage;
                }
            }
        }
    }
    if verdict.passed() {
        Exit::Ok
    } else {
        Exit::Problems
    }
}

/// The envelope of a stored attempt.
pub fn load(attempt_id: &str, data_dir: &Path, redact: &[String]) -> Result<Value, String> {
    let store = Store::open_existing(data_dir).map_err(|e| e.to_string())?;
    from_store(&store, attempt_id, redact)?.ok_or_else(|| {
        format!(
            "no attempt `{attempt_id}` in data dir {}",
            data_dir.display()
        )
    })
}

/// [`load`] from an open store; `Ok(None)` for an unknown attempt.
pub fn from_store(
    store: &Store,
    attempt_id: &str,
    redact: &[String],
) -> Result<Option<Value>, String> {
    load_envelope(store, attempt_id, redact).map_err(|e| e.to_string())
}

/// Write evidence.json, junit.xml and report.html into `dir` (created when missing).
pub fn write_all(dir: &Path, env: &Value) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for f in [Format::Json, Format::Junit, Format::Html] {
        let p = dir.join(f.file_name());
        std::fs::write(&p, report::render(env, f))
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(())
}
