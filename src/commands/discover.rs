//! `understudy discover --integration NAME`: ask a live MCP server for its tools, resources
//! and prompts
//! ([`crate::author::discover`]) and write operation files; this file reads the project file and
//! prints the report.

use std::path::{Path, PathBuf};

use super::Exit;
use crate::author::discover::{
    discover_tools, write_extras, write_operations, Discovered, EraChoice, Fate, Report,
    REQUEST_TIMEOUT,
};
use crate::cli::DiscoverArgs;
use crate::config::{Config, PROJECT_FILE};
use crate::contract::ProfileKind;
use crate::upstream::Upstream;

/// What to discover and where to write it.
#[derive(Debug, Clone)]
pub struct Options {
    pub config: PathBuf,
    pub integration: String,
    pub out: Option<PathBuf>,
    pub era: EraChoice,
}

/// `understudy discover` from its CLI arguments: exit 0 when the tools were written, 1 when
/// the server could not be asked (or a file not written), 2 for usage errors.
pub fn discover(args: &DiscoverArgs) -> Exit {
    run(&Options {
        config: args
            .config
            .clone()
            .unwrap_or_else(|| PathBuf::from(PROJECT_FILE)),
        integration: args.integration.clone(),
        out: args.out.clone(),
        era: EraChoice::Auto,
    })
}

/// [`discover`] from plain options.
pub fn run(opts: &Options) -> Exit {
    let config = match Config::load(&opts.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("understudy discover: {e}");
            return if e.not_found {
                Exit::Usage
            } else {
                Exit::Problems
            };
        }
    };
    let Some(integ) = config.integrations.get(&opts.integration) else {
        let names: Vec<&str> = config.integrations.keys().map(String::as_str).collect();
        eprintln!(
            "understudy discover: {}: no integration named `{}` (integrations: {})",
            config.file.display(),
            opts.integration,
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
        return Exit::Usage;
    };
    if integ.profile != ProfileKind::Mcp {
        eprintln!(
            "understudy discover: {}: integrations/{}/profile: `{}`, but discover asks an MCP server for its tools: expected an `mcp` integration",
            config.file.display(),
            integ.name,
            integ.profile
        );
        return Exit::Usage;
    }
    let Some(url) = integ.upstream.clone() else {
        eprintln!(
            "understudy discover: {}: integrations/{}/upstream: missing: set it to the real MCP server's endpoint URL (e.g. \"http://127.0.0.1:9000/mcp\")",
            config.file.display(),
            integ.name
        );
        return Exit::Usage;
    };
    let dir = opts.out.clone().unwrap_or_else(|| integ.operations.clone());
    let upstream = match Upstream::new(config.upstream_ca.as_deref(), REQUEST_TIMEOUT) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("understudy discover: {e}");
            return Exit::Problems;
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("understudy discover: cannot start the runtime: {e}");
            return Exit::Problems;
        }
    };
    let found = rt.block_on(discover_tools(&upstream, &url, opts.era));
    let found = match found {
        Ok(f) => f,
        Err(e) => {
            eprintln!(
                "understudy discover: cannot list the tools of `{}` at {url}: {e}",
                integ.name
            );
            return Exit::Problems;
        }
    };
    let report = match write_operations(&dir, &found.tools).and_then(|mut r| {
        write_extras(&dir, &found.resources, &found.prompts, &mut r)?;
        Ok(r)
    }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("understudy discover: {e}");
            return Exit::Problems;
        }
    };
    print_report(&integ.name, &found, &dir, &report);
    Exit::Ok
}

fn print_report(integration: &str, found: &Discovered, dir: &Path, report: &Report) {
    println!(
        "understudy discover: `{integration}` at {} (protocol {}{}{}): {} tool(s) into {}",
        found.url,
        found.protocol_version,
        if found.stateless {
            ", stateless"
        } else {
            ", session"
        },
        found
            .server_name
            .as_deref()
            .map(|n| format!(", server {n}"))
            .unwrap_or_default(),
        found.tools.len(),
        dir.display()
    );
    println!(
        "  and {} resource(s) or template(s), {} prompt(s)",
        found.resources.len(),
        found.prompts.len()
    );
    for r in &found.refused {
        println!("  not listed: {r}");
    }
    for e in &report.entries {
        let file = e
            .file
            .as_ref()
            .map(|f| f.display().to_string())
            .unwrap_or_default();
        let note = match &e.fate {
            Fate::Stale {
                mock_hash,
                current_hash,
            } => format!(
                "  contract changed: its mock was written for {mock_hash}, the contract is now {current_hash}; the mock is kept and stale — update it, then set mock.contract_hash"
            ),
            Fate::Skipped(why) => format!("  {why}"),
            _ => String::new(),
        };
        println!("  {:<10} {:<32} {file}{note}", e.fate.label(), e.tool);
        for p in &e.problems {
            println!("             check: {p}");
        }
    }
    for g in &report.gone {
        println!(
            "  {:<10} {g:<32} no longer offered by the server; its file is kept",
            "gone"
        );
    }
    println!(
        "summary: {} new, {} unchanged, {} updated, {} changed, {} stale, {} skipped, {} gone",
        report.count("new"),
        report.count("unchanged"),
        report.count("updated"),
        report.count("changed"),
        report.count("stale"),
        report.count("skipped"),
        report.gone.len()
    );
}
