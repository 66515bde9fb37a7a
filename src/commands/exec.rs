//! `understudy exec`: evaluate one call of an operation offline and print the object of
//! `POST /tools/execute`; exit 0 ok, 3 input error, 4 harness error, 2 for usage errors.

use serde_json::{Map, Value};

use super::{optional_config, resolve_profile, Exit};
use crate::cli::ExecArgs;
use crate::error::{CallError, HarnessCode, HarnessError};
use crate::operation::call::{execute, ExecResult};
use crate::operation::load::load_file;
use crate::operation::Operation;

/// A JSON command-line value, or `@FILE` to read it from a file.
fn json_arg(flag: &str, text: &str) -> Result<Value, String> {
    let (text, from) = match text.strip_prefix('@') {
        Some(file) => (
            std::fs::read_to_string(file)
                .map_err(|e| format!("{flag} @{file}: cannot read: {e}"))?,
            format!(" (from {file})"),
        ),
        None => (text.to_string(), String::new()),
    };
    serde_json::from_str(&text).map_err(|e| format!("{flag}{from}: not valid JSON: {e}"))
}

/// `understudy exec`.
pub fn exec(args: &ExecArgs) -> Exit {
    let input = match json_arg("--input", &args.input) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("understudy exec: {e}");
            return Exit::Usage;
        }
    };
    let state: Option<Map<String, Value>> =
        match args.state.as_deref().map(|s| json_arg("--state", s)) {
            None => None,
            Some(Ok(Value::Object(m))) => Some(m),
            Some(Ok(_)) => {
                eprintln!("understudy exec: --state: expected a JSON object");
                return Exit::Usage;
            }
            Some(Err(e)) => {
                eprintln!("understudy exec: {e}");
                return Exit::Usage;
            }
        };
    let cfg = match optional_config(args.config.as_deref(), "exec") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (profile, integration) = resolve_profile(args.profile, cfg.as_ref(), &args.operation);
    let loaded = match load_file(&args.operation, profile) {
        Ok(l) => l,
        Err(p) => {
            eprintln!("understudy exec: {p}");
            return Exit::Usage;
        }
    };
    let integration = integration.unwrap_or_else(|| "local".to_string());
    let state_or_empty = state.clone().unwrap_or_default();
    let op =
        match Operation::compile(&integration, profile, loaded.clone()) {
            Ok(op) => op,
            Err(problems) => {
                // A contract that does not compile is a broken file (usage); a mock that does not
                // compile is what a call would meet as a harness error.
                let mut bare = loaded;
                bare.op.mock = None;
                if Operation::compile(&integration, profile, bare).is_err() {
                    for p in &problems {
                        eprintln!("understudy exec: {p}");
                    }
                    return Exit::Usage;
                }
                let p = &problems[0];
                let e = HarnessError::new(HarnessCode::InvalidFixtureLiteral, p.message.clone())
                    .at(p.path.strip_prefix("mock/").unwrap_or(&p.path).to_string());
                return print_exec(&ExecResult::failed(
                    e.into(),
                    args.variant.clone(),
                    state_or_empty,
                ));
            }
        };
    if op.stale {
        let e = HarnessError::new(
            HarnessCode::StaleContract,
            format!(
                "the mock was checked against {} but the current contract hash is {}: run `understudy check` and update the mock",
                op.op.recorded_contract_hash().unwrap_or_default(),
                op.contract_hash
            ),
        )
        .at("contract_hash");
        let state = state.unwrap_or_else(|| {
            op.engine()
                .ok()
                .flatten()
                .map(|e| e.initial_state())
                .unwrap_or_default()
        });
        return print_exec(&ExecResult::failed(e.into(), args.variant.clone(), state));
    }
    print_exec(&execute(
        &op,
        &input,
        args.variant.as_deref(),
        state.as_ref(),
    ))
}

fn print_exec(r: &ExecResult) -> Exit {
    println!(
        "{}",
        serde_json::to_string_pretty(&r.to_json()).unwrap_or_default()
    );
    match &r.error {
        None => Exit::Ok,
        Some(CallError::Input(_)) => Exit::InputError,
        Some(CallError::Harness(_)) => Exit::HarnessError,
    }
}
