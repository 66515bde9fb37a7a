//! The command line: one file per subcommand, and the only code of the crate that prints or
//! picks the process exit code (docs/src/reference/cli.md, [`Exit`]).
//!
//! | module | subcommand |
//! |---|---|
//! | [`serve`] | `serve`, `record` |
//! | [`check`] | `check` |
//! | [`exec`] | `exec` |
//! | [`generate`] | `generate` |
//! | [`evidence`] | `evidence` |
//! | [`verify`] | `verify` |
//! | [`discover`] | `discover` |
//! | [`ca`] | `ca init` |
//! | [`test`] | `test` |
//! | [`report`] | `report` |
//! | [`import`] | `import` |
//! | [`drift`] | `drift` |
//! | [`schema`] | `schema` |

pub mod ca;
pub mod check;
pub mod discover;
pub mod drift;
pub mod evidence;
pub mod exec;
pub mod generate;
pub mod import;
pub mod mcp;
pub mod mcp_project;
pub mod mcp_wrap;
pub mod report;
pub mod schema;
pub mod serve;
pub mod test;
pub mod verify;

use std::ffi::OsString;
use std::path::Path;

use clap::Parser;

use crate::cli::{CaCommand, Cli, Command};
use crate::config::Config;
use crate::contract::ProfileKind;

/// The process exit code of a subcommand (docs/src/reference/cli.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: success (`evidence`: verdict `pass`; `verify`: every blocking contract passed).
    Ok,
    /// 1: problems found (`check`, `generate` unsupported, `evidence` verdict `fail`,
    /// `verify` a blocking contract not passed), or a
    /// server or tool that could not run.
    Problems,
    /// 2: a usage error (clap's included).
    Usage,
    /// 3: `exec`: the input does not match the operation's input schema.
    InputError,
    /// 4: `exec`: a harness error (the mock or the fixture is at fault).
    HarnessError,
    /// `test`: the exit code of the command under test when it failed (124 timed out, 130
    /// interrupted, 128+N killed by signal N).
    Code(i32),
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Ok => 0,
            Exit::Problems => 1,
            Exit::Usage => 2,
            Exit::InputError => 3,
            Exit::HarnessError => 4,
            Exit::Code(c) => c,
        }
    }
}

/// The environment variable `--admin-token` falls back to.
pub const ADMIN_TOKEN_ENV: &str = "UNDERSTUDY_ADMIN_TOKEN";

/// Parse the process arguments and run the subcommand.
pub fn main() -> Exit {
    run(std::env::args_os())
}

/// Parse `args` (program name first) and run the subcommand.
pub fn run<I, T>(args: I) -> Exit
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // Help and version print on stdout with 0; every real parse error is a usage error.
            return if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Ok
            };
        }
    };
    // `--admin-token` falls back to UNDERSTUDY_ADMIN_TOKEN (clap's `env` feature is off).
    let token = match &mut cli.command {
        Command::Serve(a) => Some(&mut a.flags.admin_token),
        Command::Record(a) => Some(&mut a.flags.admin_token),
        Command::Evidence(a) => Some(&mut a.remote.admin_token),
        Command::Verify(a) => Some(&mut a.remote.admin_token),
        Command::Report(a) => Some(&mut a.remote.admin_token),
        _ => None,
    };
    if let Some(t) = token.filter(|t| t.is_none()) {
        *t = std::env::var(ADMIN_TOKEN_ENV)
            .ok()
            .filter(|t| !t.is_empty());
    }
    match &cli.command {
        Command::Serve(a) => serve::serve(a),
        Command::Record(a) => serve::record(a),
        Command::Check(a) => check::check(a),
        Command::Exec(a) => exec::exec(a),
        Command::Generate(a) => generate::generate(a),
        Command::Evidence(a) => evidence::evidence(a),
        Command::Verify(a) => verify::verify(a),
        Command::Discover(a) => discover::discover(a),
        Command::Ca(a) => match &a.command {
            CaCommand::Init(a) => ca::init(&a.dir, a.force),
        },
        Command::Test(a) => test::test(a),
        Command::Report(a) => report::report(a),
        Command::Import(a) => import::import(a),
        Command::Drift(a) => drift::drift(a),
        Command::Schema(a) => schema::schema_command(a),
        Command::Mcp(a) => mcp::mcp(a),
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

/// Load `--config` when given: `Ok(None)` without one; `Err(exit)` after reporting.
fn optional_config(path: Option<&Path>, cmd: &str) -> Result<Option<Config>, Exit> {
    match path.map(Config::load).transpose() {
        Ok(c) => Ok(c),
        Err(e) => {
            eprintln!("understudy {cmd}: {e}");
            Err(Exit::Usage)
        }
    }
}
