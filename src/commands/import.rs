//! `understudy import --from har|postman|wiremock|openapi FILE… --integration NAME --out DIR`
//! ([`crate::author::import`]): read the sources, check every draft in-process, write, and print the
//! report — per operation what was written, and per source item what could not be mapped
//! (file + JSON path + why). Exit 0 when every draft passes `check` and nothing was left
//! unmapped, 1 when the report lists something, 2 for usage errors.
//!
//! Paths are confined (docs/src/operations/security.md): `--out` must lie inside the project
//! (the directory of the project file, else the current directory), reached without a
//! symbolic link and without a `..` that climbs out; a source directory (WireMock) may not
//! hold a symbolic link that leads outside it, and a `bodyFileName` is read only from inside
//! it. HAR, Postman and OpenAPI sources are read as named and refer to no other file
//! (`externalValue`, remote `$ref`s and Postman `file` bodies are not fetched). Each refusal
//! is a usage error naming the path.

use std::path::{Path, PathBuf};

use super::Exit;
use crate::author::import::{self, Imported, Report};
use crate::cli::{ImportArgs, ImportFrom, OutputFormat};
use crate::config::{Config, Scrub, PROJECT_FILE};
use crate::contract::ProfileKind;

/// `understudy import`.
pub fn import(args: &ImportArgs) -> Exit {
    let config = match &args.config {
        Some(f) => match Config::load(f) {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("understudy import: {e}");
                return Exit::Usage;
            }
        },
        None if Path::new(PROJECT_FILE).is_file() => match Config::load(Path::new(PROJECT_FILE)) {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("understudy import: {e}");
                return Exit::Usage;
            }
        },
        None => None,
    };
    let integ = config
        .as_ref()
        .and_then(|c| c.integrations.get(&args.integration));
    if config.is_some() && integ.is_none() {
        eprintln!(
            "understudy import: the project file names no integration `{}`",
            args.integration
        );
        return Exit::Usage;
    }
    let profile = integ.map(|i| i.profile).unwrap_or(ProfileKind::Rest);
    if profile == ProfileKind::Mcp {
        eprintln!(
            "understudy import: integration `{}` is an MCP integration: imports make HTTP operations (use `discover` for MCP)",
            args.integration
        );
        return Exit::Usage;
    }
    let root = match &args.config {
        Some(f) => f
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
        None => PathBuf::from("."),
    };
    if let Err(e) = crate::util::fs::confined_dir(&root, &args.out, "--out") {
        eprintln!("understudy import: {e}");
        return Exit::Usage;
    }
    for f in &args.files {
        if f.is_dir() {
            if let Err(e) = crate::util::fs::links_stay_inside(f) {
                eprintln!("understudy import: {e}");
                return Exit::Usage;
            }
        }
    }
    let scrub = config.as_ref().map(|c| c.scrub.clone()).unwrap_or_default();
    let upstream = integ.and_then(|i| i.upstream.clone());
    let mut all = Imported::default();
    for f in &args.files {
        match read_one(
            args.from,
            f,
            &args.integration,
            profile,
            &scrub,
            upstream.as_deref(),
        ) {
            Ok(i) => {
                all.drafts.extend(i.drafts);
                all.notes.extend(i.notes);
                all.info.extend(i.info);
            }
            Err(e) => {
                eprintln!("understudy import: {e}");
                return Exit::Usage;
            }
        }
    }
    let report = match import::finish(all, &args.out, profile, args.force) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("understudy import: {e}");
            return Exit::Problems;
        }
    };
    print_report(args, &report);
    if report.clean() {
        Exit::Ok
    } else {
        Exit::Problems
    }
}

fn read_one(
    from: ImportFrom,
    file: &PathBuf,
    integration: &str,
    profile: ProfileKind,
    scrub: &Scrub,
    upstream: Option<&str>,
) -> Result<Imported, String> {
    if from == ImportFrom::Wiremock {
        return import::wiremock::import(file, profile);
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    match from {
        ImportFrom::Har => import::har::import(file, &text, integration, profile, scrub, upstream),
        ImportFrom::Postman => {
            import::postman::import(file, &text, integration, profile, scrub, upstream)
        }
        ImportFrom::Openapi => import::openapi::import(file, &text, profile),
        ImportFrom::Wiremock => unreachable!("handled above"),
    }
}

fn print_report(args: &ImportArgs, report: &Report) {
    match args.format {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()
        ),
        OutputFormat::Text => {
            for o in &report.outcomes {
                let file = o
                    .file
                    .as_ref()
                    .map(|f| f.display().to_string())
                    .unwrap_or_default();
                println!("  {:<9} {:<40} {file}", o.status, o.operation_id);
                for p in &o.problems {
                    println!("            check: {p}");
                }
                for r in &o.reasons {
                    println!("            not mapped: {r}");
                }
            }
            for i in &report.info {
                println!("  note: {i}");
            }
            for n in &report.notes {
                println!("  not mapped: {n}");
            }
            println!(
                "summary: {} written, {} contract only, {} draft (check problems), {} exist (not replaced), {} not mapped",
                report.count("written"),
                report.count("contract"),
                report.count("draft"),
                report.count("exists"),
                report.notes.len()
                    + report.outcomes.iter().map(|o| o.reasons.len()).sum::<usize>()
            );
        }
    }
}
