//! Tool-call contracts (docs/src/reference/contracts.md and the contract side of 15): what the agent should have
//! done with its tools, proven from the attempt's own evidence.
//!
//! # Words
//!
//! docs/src/concepts/operations.md already says **contract** for an operation's description + schemas (its
//! *contract hash* pins a revision; see [`crate::contract`]). This module never uses the bare
//! word for anything else: it is `verify`, its file model is [`ToolCallContract`], its
//! results are [`ContractResult`]s of [`CheckResult`]s. "Contract hash" here always means
//! the hash of a tool-call contract file ([`contract_hash`]).
//!
//! # What it owns
//!
//! | file | owns |
//! |---|---|
//! | [`model`] | the file model (YAML and JSON, unknown keys rejected everywhere), validation, the hash |
//! | [`check`] | `understudy check` of contracts against the project's operations ([`ToolCatalog`]) |
//! | [`input`] | the evaluator's own view of an attempt's evidence ([`Evidence`]) — the adapter from the store is the only coupling |
//! | [`eval`] | the pure evaluator and the verdict reasons of blocking contracts |
//! | [`path`] | dot paths with `*` for `sources` |
//! | this file | [`load_dir`], the only I/O |
//!
//! # YAML
//!
//! `yaml_serde` (the YAML organization's maintained fork of the archived `serde_yaml`): same
//! API and behaviour as `serde_yaml`, its `Deserializer` composes with `serde_path_to_error`
//! (so a YAML error names the key path like a JSON one) and its errors carry line and column;
//! it adds two small crates (`libyaml-rs`, its maintained parser, and `ryu`) and keeps our
//! minimum Rust (it needs 1.82). Not chosen: `serde_yaml_ng` (maintained, but still on the
//! archived `unsafe-libyaml`), `serde_norway` (one maintainer, a private fork of the parser),
//! `serde_yml` (deprecated after an advisory, now a shim over another crate), `serde-saphyr`
//! (pure safe Rust with good messages, but it needs Rust 1.89 and a larger dependency set).
//!
//! # Decisions (docs/src/reference/contracts.md is silent on them)
//!
//! - The hash is over the parsed model (defaults filled in), so YAML and JSON spellings,
//!   comments and key order of one contract share a hash.
//! - Every contract gets a `tool[<tool>]` check (an effective call of `tool` exists), unless
//!   `calls.max` is 0: a contract about a tool the agent never used cannot pass.
//! - `arguments.required`, `sources` and `values` read every call of `tool` except input
//!   errors (the agent's recoverable mistake, docs/src/concepts/errors.md); `forbidden` reads every call. A
//!   `sources`/`values` argument absent from a call is left to `required`.
//! - `sources.result_of` with no earlier effective call of that tool fails (the value came
//!   from elsewhere); `sources.event` whose event was never recorded is inconclusive.
//! - `preconditions.forbidden_before` and `side_effects.forbidden` count effective calls only
//!   (a blocked delete deleted nothing).
//! - `order` entries may be `integration/*`; that is where maximum matching matters.
//! - `expected.*` reads the last effective call of `tool`, else its last call; with no call of
//!   `tool` at all every `expected.*` check is inconclusive (`final_state` included: the state
//!   cannot speak for a tool that was never used).
//! - A "success" for `after_success_only` is `result_status: ok` with no HTTP status ≥ 400.
//! - `calls.exactly_once`/`max` failures name sequences that share an idempotency key (or
//!   carry none); a `replayed` repeat is not effective and does not count.
//! - `evidence.correlation`: an event without a `test_run_id` fails (it cannot be shown to
//!   belong to the run); no events at all, or an attempt without a `test_run_id`, is
//!   inconclusive.
//! - A gap in the evidence makes every check inconclusive (the text keeps what it found); an
//!   unreadable store makes every check inconclusive.
//! - `side_effects.*` and `calls.max` are inconclusive when nothing at all was recorded.

pub mod check;
pub mod eval;
pub mod input;
pub mod model;
pub mod path;

#[cfg(test)]
mod eval_tests;

use std::path::{Path, PathBuf};

pub use check::{check_contract, ToolCatalog};
pub use eval::{evaluate, CheckResult, ContractResult, Status};
pub use input::{AgentEvent, Call, Evidence, Item};
pub use model::{contract_hash, parse, Problem, Risk, ToolCallContract};

/// One loaded contract: the model, its hash, the file it came from.
pub type Loaded = (ToolCallContract, String, PathBuf);

/// Reads every `*.yaml`, `*.yml` and `*.json` file of `dir` (not recursing), in file-name
/// order. A file that does not parse or validate contributes its problems and no contract;
/// two files with one id (`a.yaml` and `a.json`) are a problem on the second.
pub fn load_dir(dir: &Path) -> (Vec<Loaded>, Vec<Problem>) {
    let mut loaded: Vec<Loaded> = Vec::new();
    let mut problems = Vec::new();
    let shown = dir.display().to_string();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            problems.push(Problem::new(
                &shown,
                "",
                format!("cannot read the contracts directory: {e}"),
            ));
            return (loaded, problems);
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                    matches!(e.to_ascii_lowercase().as_str(), "yaml" | "yml" | "json")
                })
        })
        .collect();
    files.sort();
    for f in files {
        let name = f.display().to_string();
        let text = match std::fs::read_to_string(&f) {
            Ok(t) => t,
            Err(e) => {
                problems.push(Problem::new(&name, "", format!("cannot read: {e}")));
                continue;
            }
        };
        match parse(&name, &text) {
            Ok(c) => {
                if let Some((_, _, first)) = loaded.iter().find(|(o, _, _)| o.id == c.id) {
                    problems.push(Problem::new(
                        &name,
                        "id",
                        format!("`{}` is already defined by {}", c.id, first.display()),
                    ));
                    continue;
                }
                let h = contract_hash(&c);
                loaded.push((c, h, f));
            }
            Err(ps) => problems.extend(ps),
        }
    }
    (loaded, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_dir_reads_yaml_yml_and_json_and_reports_problems() {
        let d = tempfile::tempdir().unwrap();
        let w = |n: &str, t: &str| std::fs::write(d.path().join(n), t).unwrap();
        w("a.yaml", "version: 1\nid: a\ntool: crm/x\n");
        w("b.yml", "version: 1\nid: b\ntool: crm/x\nrisk: advisory\n");
        w("c.json", r#"{"version": 1, "id": "c", "tool": "crm/x"}"#);
        w("a.json", r#"{"version": 1, "id": "a", "tool": "crm/y"}"#);
        w("bad.yaml", "version: 1\nid: bad\ntool: crm/x\nextra: 1\n");
        w("notes.txt", "ignored");
        let (ok, probs) = load_dir(d.path());
        let ids: Vec<&str> = ok.iter().map(|(c, _, _)| c.id.as_str()).collect();
        assert_eq!(ids, vec!["a", "b", "c"], "a.json comes first in file order");
        assert_eq!(ok[0].0.tool, "crm/y");
        assert!(ok.iter().all(|(c, h, _)| h == &contract_hash(c)));
        assert_eq!(probs.len(), 2, "{probs:?}");
        assert!(
            probs[0].file.ends_with("a.yaml") && probs[0].message.contains("already defined"),
            "{}",
            probs[0]
        );
        assert!(
            probs[1].file.ends_with("bad.yaml") && probs[1].path == "extra",
            "{}",
            probs[1]
        );
        let (none, p) = load_dir(&d.path().join("missing"));
        assert!(none.is_empty() && p[0].message.contains("cannot read"));
    }
}
