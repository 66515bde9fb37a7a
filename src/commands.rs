//! One function per CLI subcommand, each returning the process exit code (SPEC section 10):
//! 0 success, 1 problems found, 2 usage error (clap's included), and for `exec` 3 input error,
//! 4 harness error.

use crate::cli::{
    CaArgs, CaCommand, CheckArgs, Cli, Command, DiscoverArgs, EvidenceArgs, ExecArgs, GenerateArgs,
    OutputFormat, RecordArgs, ServeArgs,
};
use crate::config::{Config, Mode, ProfileKind, PROJECT_FILE};
use crate::error::Problem;
use crate::error::{HarnessCode, HarnessError};
use crate::operation::call::{execute, ExecResult};
use crate::operation::generate::generate;
use crate::operation::load::{load_dir, load_file};
use crate::operation::{check_loaded, LoadedOperation, Operation};
use clap::Parser;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Exit code of a usage error.
pub const USAGE: i32 = 2;

/// The environment variable `--admin-token` falls back to.
pub const ADMIN_TOKEN_ENV: &str = "UNDERSTUDY_ADMIN_TOKEN";

/// Parse the process arguments and run the subcommand.
pub fn main() -> i32 {
    run(std::env::args_os())
}

/// Parse `args` (program name first) and run the subcommand.
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // Help and version print on stdout with 0; every real parse error is a usage error.
            return if e.use_stderr() { USAGE } else { 0 };
        }
    };
    // `--admin-token` falls back to UNDERSTUDY_ADMIN_TOKEN (clap's `env` feature is off).
    let env_token = || {
        std::env::var(ADMIN_TOKEN_ENV)
            .ok()
            .filter(|t| !t.is_empty())
    };
    match &mut cli.command {
        Command::Serve(a) if a.admin_token.is_none() => a.admin_token = env_token(),
        Command::Record(a) if a.admin_token.is_none() => a.admin_token = env_token(),
        _ => {}
    }
    match &cli.command {
        Command::Serve(a) => serve(a),
        Command::Record(a) => record(a),
        Command::Check(a) => check(a),
        Command::Exec(a) => exec(a),
        Command::Generate(a) => generate_cmd(a),
        Command::Evidence(a) => evidence(a),
        Command::Discover(a) => discover(a),
        Command::Ca(a) => ca(a),
    }
}

/// `understudy serve`: the proxy (owned by `crate::proxy`).
pub fn serve(args: &ServeArgs) -> i32 {
    crate::proxy::run_serve(args)
}

/// `understudy record`: `serve` in a record mode with drafts written to `--out`.
pub fn record(args: &RecordArgs) -> i32 {
    if !matches!(
        args.mode,
        None | Some(Mode::Record) | Some(Mode::RecordMissing)
    ) {
        eprintln!("understudy record: --mode must be record or record-missing");
        return USAGE;
    }
    serve(&args.to_serve())
}

/// `understudy evidence ATTEMPT`.
pub fn evidence(args: &EvidenceArgs) -> i32 {
    crate::evidence::run_with(
        &args.attempt,
        args.data_dir.as_deref(),
        args.config.as_deref(),
    )
}

/// `understudy discover --integration NAME`.
pub fn discover(args: &DiscoverArgs) -> i32 {
    crate::discover::run_cli(args)
}

/// `understudy ca init`.
pub fn ca(args: &CaArgs) -> i32 {
    match &args.command {
        CaCommand::Init(a) => crate::tls::ca_init_cli(&a.dir, a.force),
    }
}

/// The profile of an operation file or directory: `--profile`, else the integration of
/// `config` (or of the nearest `understudy.json` above the path) whose operations directory
/// holds it, else `rest`. Also returns that integration's name.
fn resolve_profile(
    explicit: Option<ProfileKind>,
    config: Option<&Config>,
    path: &Path,
) -> (ProfileKind, Option<String>) {
    if let Some(p) = explicit {
        return (p, None);
    }
    let found;
    let cfg = match config {
        Some(c) => Some(c),
        None => {
            found = Config::find_upward(path).and_then(|f| Config::load(&f).ok());
            found.as_ref()
        }
    };
    match cfg.and_then(|c| c.integration_for_file(path)) {
        Some(i) => (i.profile, Some(i.name.clone())),
        None => (ProfileKind::Rest, None),
    }
}

/// Load `--config` when given: `Ok(None)` without one; `Err(exit code)` after reporting.
fn optional_config(path: Option<&Path>, cmd: &str) -> Result<Option<Config>, i32> {
    match path.map(Config::load).transpose() {
        Ok(c) => Ok(c),
        Err(e) => {
            eprintln!("understudy {cmd}: {e}");
            Err(USAGE)
        }
    }
}

/// `understudy check`.
pub fn check(args: &CheckArgs) -> i32 {
    let mut problems: Vec<Problem> = Vec::new();
    let mut operations = 0usize;
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
                return USAGE;
            }
            Err(e) => problems.push(e.problem),
            Ok(cfg) => {
                for integ in cfg.integrations.values() {
                    let profile = integ.profile.as_str();
                    let (loaded, p) = load_dir(&integ.operations, profile);
                    problems.extend(p);
                    problems.extend(check_loaded(&loaded, profile));
                    operations += loaded.len();
                }
            }
        }
    } else {
        let cfg = match args.config.as_deref().map(Config::load).transpose() {
            Ok(c) => c,
            Err(e) if e.not_found => {
                eprintln!("understudy check: {e}");
                return USAGE;
            }
            Err(e) => {
                problems.push(e.problem);
                None
            }
        };
        let mut loose: BTreeMap<&'static str, Vec<LoadedOperation>> = BTreeMap::new();
        for path in &args.paths {
            if !path.exists() {
                eprintln!(
                    "understudy check: {}: no such file or directory",
                    path.display()
                );
                return USAGE;
            }
            let (profile, _) = resolve_profile(args.profile, cfg.as_ref(), path);
            if path.is_dir() {
                let (loaded, p) = load_dir(path, profile.as_str());
                problems.extend(p);
                problems.extend(check_loaded(&loaded, profile.as_str()));
                operations += loaded.len();
            } else {
                match load_file(path, profile.as_str()) {
                    Ok(l) => loose.entry(profile.as_str()).or_default().push(l),
                    Err(p) => problems.push(p),
                }
            }
        }
        for (profile, loaded) in &loose {
            problems.extend(check_loaded(loaded, profile));
            operations += loaded.len();
        }
    }
    report_check(args.format, operations, &problems)
}

fn report_check(format: OutputFormat, operations: usize, problems: &[Problem]) -> i32 {
    match format {
        OutputFormat::Json => {
            let out = json!({
                "ok": problems.is_empty(),
                "operations": operations,
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
                    "understudy check: ok ({operations} operation{})",
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
        0
    } else {
        1
    }
}

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
pub fn exec(args: &ExecArgs) -> i32 {
    let input = match json_arg("--input", &args.input) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("understudy exec: {e}");
            return USAGE;
        }
    };
    let state: Option<Map<String, Value>> =
        match args.state.as_deref().map(|s| json_arg("--state", s)) {
            None => None,
            Some(Ok(Value::Object(m))) => Some(m),
            Some(Ok(_)) => {
                eprintln!("understudy exec: --state: expected a JSON object");
                return USAGE;
            }
            Some(Err(e)) => {
                eprintln!("understudy exec: {e}");
                return USAGE;
            }
        };
    let cfg = match optional_config(args.config.as_deref(), "exec") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (profile, integration) = resolve_profile(args.profile, cfg.as_ref(), &args.operation);
    let loaded = match load_file(&args.operation, profile.as_str()) {
        Ok(l) => l,
        Err(p) => {
            eprintln!("understudy exec: {p}");
            return USAGE;
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
                    return USAGE;
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
            op.engine
                .as_ref()
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

fn print_exec(r: &ExecResult) -> i32 {
    println!(
        "{}",
        serde_json::to_string_pretty(&r.to_json()).unwrap_or_default()
    );
    r.exit_code()
}

/// `understudy generate`.
pub fn generate_cmd(args: &GenerateArgs) -> i32 {
    let cfg = match optional_config(args.config.as_deref(), "generate") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (profile, _) = resolve_profile(args.profile, cfg.as_ref(), &args.operation);
    let loaded = match load_file(&args.operation, profile.as_str()) {
        Ok(l) => l,
        Err(p) => {
            eprintln!("understudy generate: {p}");
            return USAGE;
        }
    };
    let r = generate(&loaded.op, profile.as_str());
    println!(
        "{}",
        serde_json::to_string_pretty(&r.to_json()).unwrap_or_default()
    );
    if r.supported {
        0
    } else {
        for reason in &r.reasons {
            eprintln!(
                "understudy generate: {}: {reason}",
                args.operation.display()
            );
        }
        1
    }
}
