//! `understudy check`: validate operation files (docs/src/reference/mock-definition.md#checks-and-limits) and, with a project file, its
//! tool-call contracts (docs/src/reference/contracts.md: the model, known tool names, argument paths the tool's input
//! schema allows, patterns that compile), and print every problem with its file and path (a
//! JSON path for operation files, the contract's key path for contracts); exit 1 when there
//! are problems, 2 for usage errors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::{resolve_profile, Exit};
use crate::app::contracts::{load_checked, SchemaCatalog};
use crate::cli::{CheckArgs, OutputFormat};
use crate::config::{Config, PROJECT_FILE};
use crate::contract::ProfileKind;
use crate::error::Problem;
use crate::operation::load::load_file;
use crate::operation::load_dir;
use crate::operation::{check_loaded, LoadedOperation};

/// `understudy check`.
pub fn check(args: &CheckArgs) -> Exit {
    let mut problems: Vec<Problem> = Vec::new();
    let mut operations = 0usize;
    let mut contracts = 0usize;
    if args.paths.is_empty() {
        let file = args
            .config
            .clone()
            .unwrap_or_else(|| PathBuf::from(PROJECT_FILE));
        match Config::load(&file) {
            Err(e) if e.not_found => {
                eprintln!(
                    "understudy check: {e}\nexpected a project file (--config FILE, default ./{PROJECT_FILE}) or operation files/directories as arguments"
                );
                return Exit::Usage;
            }
            Err(e) => problems.push(e.problem),
            Ok(cfg) => {
                let mut catalog = SchemaCatalog::default();
                for integ in cfg.integrations.values() {
                    let profile = integ.profile;
                    let (loaded, p) = load_dir(&integ.operations, profile);
                    problems.extend(p);
                    problems.extend(check_loaded(&loaded, profile));
                    operations += loaded.len();
                    for l in &loaded {
                        catalog.tools.insert(
                            format!("{}/{}", integ.name, l.op.operation_id),
                            l.op.input_schema.as_ref().clone(),
                        );
                    }
                    catalog.add_builtin_defaults(&integ.name, profile);
                }
                // The tool-call contracts (docs/src/reference/contracts.md), against the operations just loaded.
                if let Some(dir) = &cfg.contracts {
                    match load_checked(dir, &catalog) {
                        Ok(set) => contracts = set.len(),
                        Err(p) => problems.extend(p),
                    }
                }
            }
        }
    } else {
        let cfg = match args.config.as_deref().map(Config::load).transpose() {
            Ok(c) => c,
            Err(e) if e.not_found => {
                eprintln!("understudy check: {e}");
                return Exit::Usage;
            }
            Err(e) => {
                problems.push(e.problem);
                None
            }
        };
        // Keyed by name: the problems come out in the profiles' name order.
        let mut loose: BTreeMap<&'static str, (ProfileKind, Vec<LoadedOperation>)> =
            BTreeMap::new();
        for path in &args.paths {
            if !path.exists() {
                eprintln!(
                    "understudy check: {}: no such file or directory",
                    path.display()
                );
                return Exit::Usage;
            }
            let (profile, _) = resolve_profile(args.profile, cfg.as_ref(), path);
            if path.is_dir() {
                let (loaded, p) = load_dir(path, profile);
                problems.extend(p);
                problems.extend(check_loaded(&loaded, profile));
                operations += loaded.len();
            } else {
                match load_file(path, profile) {
                    Ok(l) => loose
                        .entry(profile.as_str())
                        .or_insert_with(|| (profile, Vec::new()))
                        .1
                        .push(l),
                    Err(p) => problems.push(p),
                }
            }
        }
        for (profile, loaded) in loose.values() {
            problems.extend(check_loaded(loaded, *profile));
            operations += loaded.len();
        }
    }
    report_check(args.format, operations, contracts, &problems)
}

fn report_check(
    format: OutputFormat,
    operations: usize,
    contracts: usize,
    problems: &[Problem],
) -> Exit {
    let and_contracts = match contracts {
        0 => String::new(),
        1 => ", 1 tool-call contract".to_string(),
        n => format!(", {n} tool-call contracts"),
    };
    match format {
        OutputFormat::Json => {
            let out = json!({
                "ok": problems.is_empty(),
                "operations": operations,
                "contracts": contracts,
                "problems": problems.iter().map(Problem::to_json).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        }
        OutputFormat::Text => {
            for p in problems {
                println!("{p}");
            }
            if problems.is_empty() {
                eprintln!(
                    "understudy check: ok ({operations} operation{}){and_contracts}",
                    if operations == 1 { "" } else { "s" }
                );
            } else {
                let files: std::collections::BTreeSet<&Path> =
                    problems.iter().map(|p| p.file.as_path()).collect();
                eprintln!(
                    "understudy check: {} problem{} in {} file{} ({operations} operation{})",
                    problems.len(),
                    if problems.len() == 1 { "" } else { "s" },
                    files.len(),
                    if files.len() == 1 { "" } else { "s" },
                    if operations == 1 { "" } else { "s" },
                );
            }
        }
    }
    if problems.is_empty() {
        Exit::Ok
    } else {
        Exit::Problems
    }
}
