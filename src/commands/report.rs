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
//!
//! Memory stays bounded whatever the attempt's size: the JSON report is the envelope
//! streamed as it is read; JUnit and HTML render one page of it ([`REPORT_PAGE`] entries,
//! the verdict and contract results over the whole timeline).

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use super::Exit;
use crate::cli::ReportArgs;
use crate::evidence::report::{self, Format};
use crate::evidence::stream::Window;
use crate::evidence::Verdict;
use crate::store::Store;

/// Entries the JUnit and HTML reports hold (one page of the envelope; the verdict and the
/// contract results are over the whole timeline, and the HTML says when entries are left
/// out). The JSON report is the whole envelope, streamed.
pub const REPORT_PAGE: u64 = 5_000;

/// Where the envelope comes from.
enum Source<'a> {
    Url(&'a str),
    Store(Store, Vec<String>),
}

impl Source<'_> {
    fn page(&self, args: &ReportArgs, window: Window) -> Result<Value, String> {
        match self {
            Source::Url(url) => {
                super::evidence::page_from(url, &args.remote, &args.attempt, window)
            }
            Source::Store(store, redact) => {
                super::evidence::page_from_store(store, &args.attempt, redact, window)?
                    .ok_or_else(|| no_attempt(&args.attempt))
            }
        }
    }

    /// The whole envelope written to `out` as it is read; the verdict it carried.
    fn stream(&self, args: &ReportArgs, out: &mut dyn Write) -> Result<Verdict, String> {
        let v = match self {
            Source::Url(url) => crate::admin::client::evidence_to(
                url,
                args.remote.admin_token.as_deref(),
                &args.attempt,
                out,
            )
            .and_then(|v| Verdict::from_envelope(&v))?,
            Source::Store(store, redact) => {
                super::evidence::write_from_store(store, &args.attempt, redact, None, out)?
                    .ok_or_else(|| no_attempt(&args.attempt))?
                    .verdict
            }
        };
        out.write_all(b"\n").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
        Ok(v)
    }
}

fn no_attempt(attempt_id: &str) -> String {
    format!("no attempt `{attempt_id}` in the data dir")
}

/// `understudy report` (module doc).
pub fn report(args: &ReportArgs) -> Exit {
    if args.format.is_none() && args.report_dir.is_none() {
        eprintln!(
            "understudy report: give --format json|junit|html (or --report-dir DIR for all three)"
        );
        return Exit::Usage;
    }
    let source = match &args.remote.url {
        Some(url) => Ok((Source::Url(url), args.attempt.clone())),
        None => super::evidence::resolve(args.data_dir.as_deref(), args.config.as_deref())
            .and_then(|local| {
                let store = local.open().map_err(|e| e.to_string())?;
                // `default`: the data dir's default attempt, as `evidence` reads it.
                let id = super::evidence::resolve_default(&store, &args.attempt, &local.dir)?;
                Ok((Source::Store(store, local.redact), id))
            }),
    };
    let (source, args) = match source {
        Ok((s, attempt)) => (
            Ok(s),
            ReportArgs {
                attempt,
                ..args.clone()
            },
        ),
        Err(e) => (Err(e), args.clone()),
    };
    let args = &args;
    let source = match source {
        Ok(s) => s,
        Err(e) => {
            eprintln!("understudy report: {e}");
            return Exit::Usage;
        }
    };
    match write_reports(args, &source) {
        Ok(true) => Exit::Ok,
        Ok(false) => Exit::Problems,
        Err(e) => {
            eprintln!(
                "understudy report: cannot judge attempt `{}`: {e}",
                args.attempt
            );
            Exit::Usage
        }
    }
}

/// Writes what was asked; whether every verdict read passed (a live attempt is read more
/// than once: the least favourable reading decides).
fn write_reports(args: &ReportArgs, source: &Source<'_>) -> Result<bool, String> {
    let window = Window {
        after: 0,
        limit: REPORT_PAGE,
    };
    if let Some(d) = &args.report_dir {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        let page = source.page(args, window)?;
        let verdict = Verdict::from_envelope(&page)?;
        let json = d.join(Format::Json.file_name());
        let streamed = {
            let f = std::fs::File::create(&json)
                .map_err(|e| format!("cannot write {}: {e}", json.display()))?;
            source.stream(args, &mut std::io::BufWriter::new(f))?
        };
        for f in [Format::Junit, Format::Html] {
            let p = d.join(f.file_name());
            std::fs::write(&p, report::render(&page, f))
                .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        }
        eprintln!("understudy report: wrote {}", d.display());
        return Ok(verdict.passed() && streamed.passed());
    }
    let Some(format) = args.format else {
        return Err("no format".into());
    };
    let mut file;
    let stdout;
    let mut lock;
    let out: &mut dyn Write = match &args.out {
        Some(f) => {
            file = std::io::BufWriter::new(
                std::fs::File::create(f)
                    .map_err(|e| format!("cannot write {}: {e}", f.display()))?,
            );
            &mut file
        }
        None => {
            stdout = std::io::stdout();
            lock = stdout.lock();
            &mut lock
        }
    };
    let verdict = if format == Format::Json {
        source.stream(args, out)?
    } else {
        let page = source.page(args, window)?;
        let verdict = Verdict::from_envelope(&page)?;
        out.write_all(&report::render(&page, format))
            .and_then(|()| out.flush())
            .map_err(|e| format!("cannot write the report: {e}"))?;
        verdict
    };
    Ok(verdict.passed())
}

/// The whole envelope of a stored attempt, in memory (small attempts and tests).
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
    super::evidence::load_envelope(store, attempt_id, redact).map_err(|e| e.to_string())
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
