//! `understudy verify ATTEMPT [--contract FILE…] [--data-dir D] [--config F] [--format
//! text|json]` (SPEC 14): evaluate tool-call contracts over an attempt's recorded evidence,
//! after the fact. The contracts are the given files (parsed and validated like the contracts
//! directory; a broken file is a usage error), else the ones the attempt pinned.
//!
//! Text prints, per contract, a header line and one line per check: `STATUS check-id:
//! evidence`. JSON prints `{"attempt_id","contract_results","passed"}` (plus `interrupted` and
//! `reasons` for an interrupted attempt, which never passes). Exit 0 when every
//! blocking contract passed, 1 otherwise, 2 for usage errors (no contract, a broken contract
//! file, a data dir or attempt that does not exist or cannot be opened).
//!
//! `--url http://HOST:PORT` (and `--admin-token`) reads the pinned contracts' results from a
//! running server's evidence envelope instead of the data dir it holds; the results are the
//! same (the envelope's `contract_results` are evaluated by the same code). `--contract FILE`
//! needs the recorded evidence itself, so it reads the data dir only.

use super::evidence::resolve_store;
use super::Exit;
use crate::cli::{OutputFormat, VerifyArgs};
use crate::evidence::verify::{self, ContractResult};
use crate::store::Store;

/// `understudy verify`.
pub fn verify(args: &VerifyArgs) -> Exit {
    if let Some(url) = &args.remote.url {
        return match remote_results(args, url) {
            Ok((results, blocked)) => print_results(args, &results, blocked.as_deref()),
            Err(e) => {
                eprintln!("understudy verify: {e}");
                Exit::Usage
            }
        };
    }
    let (dir, redact) =
        match resolve_store(args.data_dir.as_deref(), args.config.as_deref(), "verify") {
            Ok(x) => x,
            Err(exit) => return exit,
        };
    let mut given = Vec::new();
    for f in &args.contracts {
        let name = f.display().to_string();
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("understudy verify: {name}: cannot read: {e}");
                return Exit::Usage;
            }
        };
        match verify::parse(&name, &text) {
            Ok(c) => {
                let h = verify::contract_hash(&c);
                given.push((c, h));
            }
            Err(problems) => {
                for p in problems {
                    eprintln!("understudy verify: {p}");
                }
                return Exit::Usage;
            }
        }
    }
    let store = match Store::open_existing(&dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("understudy verify: {e}");
            return Exit::Usage;
        }
    };
    let found = match store.attempt_evidence(&args.attempt) {
        Ok(Some(a)) => a,
        Ok(None) => {
            eprintln!(
                "understudy verify: no attempt `{}` in data dir {}",
                args.attempt,
                dir.display()
            );
            return Exit::Usage;
        }
        Err(e) => {
            eprintln!("understudy verify: {e}");
            return Exit::Usage;
        }
    };
    let inputs = crate::evidence::Inputs::of(&found, &redact);
    let blocked = crate::evidence::interrupted_reason(&found.attempt);
    let results = if given.is_empty() {
        if found.attempt.contracts.is_empty() {
            eprintln!("understudy verify: {}", no_contract(&args.attempt));
            return Exit::Usage;
        }
        crate::evidence::contract_results(&inputs)
    } else {
        crate::evidence::evaluate_contracts(&inputs, &given)
    };
    print_results(args, &results, blocked.as_deref())
}

/// The pinned contracts' results from the running server at `url` (`--url`), and the
/// envelope's `interrupted` reason when it has one.
fn remote_results(
    args: &VerifyArgs,
    url: &str,
) -> Result<(Vec<ContractResult>, Option<String>), String> {
    if !args.contracts.is_empty() {
        return Err(
            "--contract FILE evaluates the recorded evidence itself, which only the data dir holds: with --url the server's pinned contracts are verified (stop the server to verify other files)"
                .into(),
        );
    }
    let env = super::evidence::envelope_from(url, &args.remote, &args.attempt)?;
    let results: Vec<ContractResult> = serde_json::from_value(env["contract_results"].clone())
        .map_err(|e| {
            format!("the server at {url} answered an envelope without valid contract_results: {e}")
        })?;
    if results.is_empty() {
        return Err(no_contract(&args.attempt));
    }
    let blocked = env["verdict_reasons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str())
        .find(|r| r.starts_with("interrupted"))
        .map(str::to_string);
    Ok((results, blocked))
}

fn no_contract(attempt: &str) -> String {
    format!("attempt `{attempt}` pinned no tool-call contract: name one with --contract FILE")
}

/// Prints `results` in `--format` and picks the exit code. `blocked`: the reason an
/// interrupted attempt fails whatever its contracts say (`crate::evidence::interrupted_reason`).
fn print_results(args: &VerifyArgs, results: &[ContractResult], blocked: Option<&str>) -> Exit {
    let (passed, out) = verify::verification(&args.attempt, results, blocked);
    match args.format {
        OutputFormat::Json => {
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        }
        OutputFormat::Text => {
            print!("{}", text_report(results));
            if let Some(reason) = blocked {
                println!("FAIL {reason}");
            }
        }
    }
    if passed {
        Exit::Ok
    } else {
        Exit::Problems
    }
}

/// The text form: per contract `contract ID (risk, policy P, HASH): STATUS`, then one line per
/// check `STATUS id: evidence`.
pub fn text_report(results: &[ContractResult]) -> String {
    let mut out = String::new();
    for r in results {
        out.push_str(&format!(
            "contract {} ({}{}, {}): {}\n",
            r.contract_id,
            r.risk.as_str(),
            r.policy_version
                .as_deref()
                .map(|p| format!(", policy {p}"))
                .unwrap_or_default(),
            r.contract_hash,
            r.status.as_str().to_uppercase()
        ));
        for c in &r.checks {
            out.push_str(&format!(
                "  {:<12} {}: {}\n",
                c.status.as_str().to_uppercase(),
                c.id,
                c.evidence
            ));
        }
    }
    out
}
