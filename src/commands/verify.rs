//! `understudy verify ATTEMPT [--contract FILE…] [--data-dir D] [--config F] [--format
//! text|json]` (docs/src/reference/contracts.md): evaluate tool-call contracts over an attempt's recorded evidence,
//! after the fact. The contracts are the given files (parsed and validated like the contracts
//! directory; a broken file is a usage error), else the ones the attempt pinned.
//!
//! Text prints, per contract, a header line and one line per check: `STATUS check-id:
//! evidence`, then one line per verdict reason `FAIL code: message` and `verdict pass|fail`.
//! JSON prints `{"attempt_id","contract_results","passed","verdict","verdict_reasons"}`: the
//! attempt's one verdict (`crate::evidence::verdict`), with the reasons of the contracts
//! given. Exit 0 when the verdict passes and every blocking contract passed, 1 otherwise, 2
//! when understudy could not judge (a broken contract file, a data dir or attempt that does
//! not exist or cannot be opened, a server that cannot be reached or answers no verdict).
//!
//! `--url http://HOST:PORT` (and `--admin-token`) reads the pinned contracts' results from a
//! running server's evidence envelope instead of the data dir it holds; the results are the
//! same (the envelope's `contract_results` are evaluated by the same code). `--contract FILE`
//! needs the recorded evidence itself, so it reads the data dir only.

use super::evidence::resolve_store;
use super::Exit;
use crate::cli::{OutputFormat, VerifyArgs};
use crate::evidence::verdict::{verification, Verdict};
use crate::evidence::verify::{self, ContractResult};

/// `understudy verify`.
pub fn verify(args: &VerifyArgs) -> Exit {
    if let Some(url) = &args.remote.url {
        return match remote_results(args, url) {
            Ok((results, verdict)) => print_results(args, &results, &verdict),
            Err(e) => {
                eprintln!("understudy verify: {e}");
                Exit::Usage
            }
        };
    }
    let local = match resolve_store(args.data_dir.as_deref(), args.config.as_deref(), "verify") {
        Ok(x) => x,
        Err(exit) => return exit,
    };
    let (dir, redact) = (&local.dir, &local.redact);
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
    let store = match local.open() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("understudy verify: {e}");
            return Exit::Usage;
        }
    };
    let attempt = match super::evidence::resolve_default(&store, &args.attempt, dir) {
        Ok(id) => id,
        Err(e) => {
            eprintln!("understudy verify: {e}");
            return Exit::Usage;
        }
    };
    let found = match store.attempt_evidence(&attempt) {
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
    let inputs = crate::evidence::Inputs::of(&found, redact);
    let pinned = crate::evidence::contract_results(&inputs);
    let verdict = crate::evidence::verdict_of(&inputs, &pinned);
    let results = if given.is_empty() {
        if pinned.is_empty() {
            eprintln!("understudy verify: {}", no_contract(&args.attempt));
            return Exit::Usage;
        }
        pinned
    } else {
        crate::evidence::evaluate_contracts(&inputs, &given)
    };
    print_results(args, &results, &verdict)
}

/// The pinned contracts' results and the verdict from the running server at `url`
/// (`--url`). An answer without a `verdict` member is not understudy's: `Err`.
fn remote_results(args: &VerifyArgs, url: &str) -> Result<(Vec<ContractResult>, Verdict), String> {
    if !args.contracts.is_empty() {
        return Err(
            "--contract FILE evaluates the recorded evidence itself, which only the data dir holds: with --url the server's pinned contracts are verified (stop the server to verify other files)"
                .into(),
        );
    }
    // One entry is enough: a page carries the verdict and the contract results of the
    // whole timeline.
    let window = crate::evidence::stream::Window { after: 0, limit: 1 };
    let env = super::evidence::page_from(url, &args.remote, &args.attempt, window)?;
    let verdict = Verdict::from_envelope(&env)
        .map_err(|e| format!("the server at {url} answered no verdict: {e}"))?;
    let results: Vec<ContractResult> = match env.get("contract_results") {
        None => Vec::new(),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
            format!("the server at {url} answered an envelope without valid contract_results: {e}")
        })?,
    };
    if results.is_empty() {
        return Err(no_contract(&args.attempt));
    }
    Ok((results, verdict))
}

fn no_contract(attempt: &str) -> String {
    format!(
        "attempt `{attempt}` pinned no tool-call contract: name one with --contract FILE (its verdict alone: `understudy evidence`)"
    )
}

/// Prints `results` and the verdict in `--format` and picks the exit code: 0 only when the
/// verdict passes (whatever the contracts say) and every blocking contract given passed.
fn print_results(args: &VerifyArgs, results: &[ContractResult], verdict: &Verdict) -> Exit {
    let (passed, out) = verification(&args.attempt, results, verdict);
    match args.format {
        OutputFormat::Json => {
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        }
        OutputFormat::Text => {
            print!("{}", text_report(results));
            let reasons: Vec<crate::evidence::Reason> =
                serde_json::from_value(out["verdict_reasons"].clone()).unwrap_or_default();
            for r in &reasons {
                println!("FAIL {}: {}", r.code, r.message);
            }
            println!("verdict {}", if passed { "pass" } else { "fail" });
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
