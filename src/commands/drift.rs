//! `understudy drift --integration NAME [--operation ID…] [--values] [--format text|json]`
//! ([`crate::author::drift`]): load and check the integration's operations, ask the real upstream
//! every read example's question, and print per operation what differs, with JSON paths.
//! Exit 0 when every real answer satisfies its output schema (shape differences are
//! reported, not failures), 1 when one violates it or the upstream could not be asked (or
//! the operations do not pass `check`), 2 for usage errors.

use std::path::{Path, PathBuf};

use super::Exit;
use crate::author::drift::{self, Report};
use crate::cli::{DriftArgs, OutputFormat};
use crate::config::{Config, PROJECT_FILE};
use crate::contract::ProfileKind;
use crate::operation::load_integration;
use crate::profile::Profile;
use crate::upstream::{Upstream, DEFAULT_TIMEOUT};

/// `understudy drift`.
pub fn drift(args: &DriftArgs) -> Exit {
    let file = args
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(PROJECT_FILE));
    let config = match Config::load(&file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("understudy drift: {e}");
            return if e.not_found {
                Exit::Usage
            } else {
                Exit::Problems
            };
        }
    };
    let Some(integ) = config.integrations.get(&args.integration) else {
        let names: Vec<&str> = config.integrations.keys().map(String::as_str).collect();
        eprintln!(
            "understudy drift: {}: no integration named `{}` (integrations: {})",
            config.file.display(),
            args.integration,
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
        return Exit::Usage;
    };
    if integ.profile == ProfileKind::Mcp {
        eprintln!(
            "understudy drift: integration `{}` is an MCP integration: drift compares HTTP answers (rest, salesforce)",
            integ.name
        );
        return Exit::Usage;
    }
    let Some(base) = integ.upstream.clone() else {
        eprintln!(
            "understudy drift: {}: integrations/{}/upstream: missing: drift asks the real system, set its base URL",
            config.file.display(),
            integ.name
        );
        return Exit::Usage;
    };
    let mut ops = match load_integration(integ, false) {
        Ok(o) => o,
        Err(problems) => {
            eprintln!(
                "understudy drift: the operations of `{}` do not pass check (run `understudy check`):",
                integ.name
            );
            for p in problems {
                eprintln!("  {p}");
            }
            return Exit::Problems;
        }
    };
    ops.sort_by(|a, b| a.id().cmp(b.id()));
    if !args.operations.is_empty() {
        for want in &args.operations {
            if !ops.iter().any(|o| o.id() == want) {
                eprintln!(
                    "understudy drift: integration `{}` has no operation `{want}` (in {})",
                    integ.name,
                    integ.operations.display()
                );
                return Exit::Usage;
            }
        }
        ops.retain(|o| args.operations.iter().any(|w| w == o.id()));
    }
    let ca: Option<&Path> = args
        .upstream_ca
        .as_deref()
        .or(config.upstream_ca.as_deref());
    let upstream = match Upstream::new(ca, DEFAULT_TIMEOUT) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("understudy drift: {e}");
            return Exit::Usage;
        }
    };
    crate::upstream::init_crypto();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("understudy drift: cannot start the runtime: {e}");
            return Exit::Problems;
        }
    };
    let profile = Profile::builtin(integ.profile.as_str());
    let report = rt.block_on(drift::run(
        &integ.name,
        &ops,
        profile.as_deref(),
        &upstream,
        &base,
        args.values,
        &crate::app::command_scrubber(&config),
    ));
    print(args.format, &report);
    if report.failed() {
        Exit::Problems
    } else {
        Exit::Ok
    }
}

fn print(format: OutputFormat, report: &Report) {
    if format == OutputFormat::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()
        );
        return;
    }
    println!(
        "understudy drift: `{}` against {}",
        report.integration, report.upstream
    );
    for op in &report.operations {
        match op.status {
            "write" => println!("  {:<40} write: never sent", op.operation_id),
            "no_mock" => println!("  {:<40} no mock: nothing to compare", op.operation_id),
            _ => {
                let n = op.examples.len();
                let bad = op.examples.iter().filter(|e| e.outcome != "ok").count();
                println!(
                    "  {:<40} {n} example(s){}",
                    op.operation_id,
                    if bad == 0 {
                        ", no drift".to_string()
                    } else {
                        String::new()
                    }
                );
                for e in op.examples.iter().filter(|e| e.outcome != "ok") {
                    let status = e
                        .real
                        .as_ref()
                        .and_then(|r| r.get("status"))
                        .map(|s| format!(" → {s}"))
                        .unwrap_or_default();
                    println!(
                        "    example {} ({}) {}{status}: {}",
                        e.index,
                        e.variant,
                        e.request.as_deref().unwrap_or("-"),
                        e.outcome
                    );
                    if let Some(m) = &e.message {
                        println!("      {m}");
                    }
                    for s in &e.schema_errors {
                        println!("      schema: {s}");
                    }
                    for d in &e.differences {
                        println!("      {}", d.describe());
                    }
                }
            }
        }
    }
    println!(
        "summary: {} operation(s) checked, {} write(s) not sent, {} without mock; examples: {} ok, {} drifted, {} violate the schema, {} skipped, {} unavailable",
        report.count_ops("checked"),
        report.count_ops("write"),
        report.count_ops("no_mock"),
        report.count("ok"),
        report.count("drifted"),
        report.count("violation"),
        report.count("skipped") + report.count("write"),
        report.count("unavailable"),
    );
}
