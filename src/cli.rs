//! Command-line definitions (clap derive) — definitions only; [`crate::commands`] runs them.
//!
//! Every subcommand of docs/src/reference/cli.md. Exit codes: 0 success, 1 problems found (`check`,
//! `generate` unsupported, `evidence` verdict `fail`), 2 usage errors (clap's too), and for
//! `exec` 3 input error, 4 harness error.

use crate::config::Mode;

use crate::contract::ProfileKind;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// understudy — a record/replay mock proxy for the integrations AI agents call.
#[derive(Debug, Parser)]
#[command(name = "understudy", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the proxy.
    Serve(ServeArgs),
    /// Run the proxy in record mode and write draft operation files on stop.
    Record(RecordArgs),
    /// Validate operation files (docs/src/reference/mock-definition.md#checks-and-limits); prints every problem with file and JSON path.
    Check(CheckArgs),
    /// Evaluate one call of an operation offline; prints the object of `POST /tools/execute`.
    Exec(ExecArgs),
    /// Print a schema-derived draft mock for an operation.
    Generate(GenerateArgs),
    /// Print an attempt's evidence; exit 1 when its verdict is `fail`.
    Evidence(EvidenceArgs),
    /// Evaluate tool-call contracts over an attempt's evidence; exit 1 unless every blocking
    /// contract passed.
    Verify(VerifyArgs),
    /// Ask a live MCP server for tools/list and write operation files.
    Discover(DiscoverArgs),
    /// Local certificate authority for `serve --tls` and `--forward-proxy`.
    Ca(CaArgs),
    /// Run CMD against an in-process server and one attempt; write JSON, JUnit and HTML reports.
    Test(TestArgs),
    /// Write an attempt's report as JSON, JUnit XML or HTML.
    Report(ReportArgs),
    /// Turn a HAR, a Postman collection, WireMock mappings or an OpenAPI document into
    /// operation files (docs/src/reference/import-drift.md).
    Import(ImportArgs),
    /// Send each read example to the real upstream and report where the answers drifted from
    /// the mocks (docs/src/reference/import-drift.md); exit 1 when a real answer violates its output schema.
    Drift(DriftArgs),
    /// Print the JSON Schema of a file you write (for editors), or write them all with --all.
    Schema(SchemaArgs),
    /// MCP over stdio: serve an integration's mocks as the command an agent starts, wrap a
    /// real stdio MCP server, print client configuration (docs/src/guides/mcp-stdio.md).
    Mcp(McpArgs),
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

/// `check --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

/// The flags `serve` and `record` share (flattened into both). They override the project
/// file.
#[derive(Debug, Clone, Default, Args)]
pub struct ServeFlags {
    /// Project file (default: ./understudy.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Listen address HOST:PORT (default 127.0.0.1:7777).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Where revisions, attempts and evidence are stored (default: .understudy beside the
    /// project file).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The fleet store, `postgres://USER@HOST:PORT/DB` (docs/src/operations/fleet-store.md), instead of the embedded
    /// store in the data dir; overrides the project file's `store`.
    /// [env: UNDERSTUDY_STORE] (read by `serve` when the flag is absent)
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Bearer token of the admin API; required for a non-loopback listener.
    /// [env: UNDERSTUDY_ADMIN_TOKEN] (filled in by `commands::run` when the flag is absent)
    #[arg(long, value_name = "TOKEN")]
    pub admin_token: Option<String>,
    /// Serve HTTPS with a leaf certificate signed by the local CA.
    #[arg(long)]
    pub tls: bool,
    /// Act as an HTTPS forward proxy (CONNECT terminated with per-host leaves).
    #[arg(long)]
    pub forward_proxy: bool,
    /// Directory of the local CA (default: certs/ beside the project file).
    #[arg(long, value_name = "DIR")]
    pub ca_dir: Option<PathBuf>,
    /// Extra CA certificate (PEM) trusted for upstream calls.
    #[arg(long, value_name = "FILE")]
    pub upstream_ca: Option<PathBuf>,
    /// Record modes: let writes through to the real upstream instead of blocking them (403).
    #[arg(long)]
    pub allow_writes: bool,
    /// Let `POST /_understudy/api/tools/execute` with `target: "upstream"` and
    /// `allow_write: true` send a write to the real system (refused with 403
    /// `upstream_writes_disabled` without it).
    #[arg(long)]
    pub allow_upstream_writes: bool,
    #[arg(long, value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,
}

/// `understudy serve`.
#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub flags: ServeFlags,
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Record modes: directory the draft operation files are written to.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `understudy record`: `serve --mode record` that writes drafts to `--out` on stop.
#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    #[command(flatten)]
    pub flags: ServeFlags,
    /// Directory the draft operation files are written to.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// `record` (default) or `record-missing`.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
}

impl RecordArgs {
    /// The equivalent `serve` arguments (mode `record` unless `record-missing` was asked).
    pub fn to_serve(&self) -> ServeArgs {
        ServeArgs {
            flags: self.flags.clone(),
            mode: Some(self.mode.unwrap_or(Mode::Record)),
            out: Some(self.out.clone()),
        }
    }
}

/// `understudy check [--config F] [--profile P] [--format text|json] [PATHS…]`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Project file: check every integration (default ./understudy.json when no PATHS).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Profile of the given PATHS when no project file says (default: from the nearest
    /// understudy.json that lists the directory, else rest).
    #[arg(long, value_enum)]
    pub profile: Option<ProfileKind>,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Operation files or operations directories.
    #[arg(value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

/// `understudy exec --operation FILE --input JSON [--variant V] [--state JSON]`.
#[derive(Debug, Clone, Args)]
pub struct ExecArgs {
    /// The operation file.
    #[arg(long, value_name = "FILE")]
    pub operation: PathBuf,
    /// The call's input as JSON, or @FILE to read it from a file.
    #[arg(long, value_name = "JSON")]
    pub input: String,
    /// Variant (default: the definition's default_variant).
    #[arg(long, value_name = "V")]
    pub variant: Option<String>,
    /// Pre-call state as a JSON object, or @FILE (default: the definition's initial_state).
    #[arg(long, value_name = "JSON")]
    pub state: Option<String>,
    /// Profile (default: from the nearest understudy.json listing the file, else rest).
    #[arg(long, value_enum)]
    pub profile: Option<ProfileKind>,
    /// Project file used to find the operation's profile.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// `understudy generate --operation FILE`.
#[derive(Debug, Clone, Args)]
pub struct GenerateArgs {
    #[arg(long, value_name = "FILE")]
    pub operation: PathBuf,
    #[arg(long, value_enum)]
    pub profile: Option<ProfileKind>,
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// `--url` and `--admin-token` of the commands that read evidence (`evidence`, `verify`,
/// `report`): read from a running server's admin API instead of the data dir it holds.
#[derive(Debug, Clone, Default, Args)]
pub struct RemoteArgs {
    /// Read from the running server at URL (`http://HOST:PORT`, its admin API) instead of
    /// opening the data dir, which `serve` holds while it runs.
    #[arg(long, value_name = "URL", conflicts_with_all = ["data_dir", "config"])]
    pub url: Option<String>,
    /// Bearer token of that server's admin API.
    /// [env: UNDERSTUDY_ADMIN_TOKEN] (filled in by `commands::run` when the flag is absent)
    #[arg(long, value_name = "TOKEN", requires = "url")]
    pub admin_token: Option<String>,
}

/// `understudy evidence ATTEMPT [--data-dir D] [--config F] [--url URL [--admin-token T]]`.
#[derive(Debug, Clone, Args)]
pub struct EvidenceArgs {
    /// The attempt id.
    #[arg(value_name = "ATTEMPT")]
    pub attempt: String,
    /// The embedded data dir to read (default: the project file's `data_dir`; when the
    /// project file's `store` or UNDERSTUDY_STORE names a fleet store and this flag is
    /// absent, that PostgreSQL store is read instead).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The project file (default: understudy.json in the current directory when present):
    /// its `redact` list, `data_dir` and `store`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// `understudy verify ATTEMPT [--contract FILE…] [--data-dir D] [--config F] [--format
/// text|json] [--url URL [--admin-token T]]`.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The attempt id.
    #[arg(value_name = "ATTEMPT")]
    pub attempt: String,
    /// A tool-call contract file (YAML or JSON); repeatable. Without one, the contracts the
    /// attempt pinned.
    #[arg(long = "contract", value_name = "FILE")]
    pub contracts: Vec<PathBuf>,
    /// The embedded data dir to read (default: the project file's `data_dir`; when the
    /// project file's `store` or UNDERSTUDY_STORE names a fleet store and this flag is
    /// absent, that PostgreSQL store is read instead).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The project file (default: understudy.json in the current directory when present):
    /// its `redact` list, `data_dir` and `store`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// `understudy test [--config F] [--contract ID…] [--variant I/OP=V…] [--mode M]
/// [--forward-proxy] [--report-dir D] [--timeout S] -- CMD ARGS…` (docs/src/getting-started/first-test.md).
#[derive(Debug, Clone, Args)]
pub struct TestArgs {
    /// Project file (default: ./understudy.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Contract ids the attempt pins (repeatable).
    #[arg(long = "contract", value_name = "ID")]
    pub contracts: Vec<String>,
    /// Variant of an operation for this attempt: INTEGRATION/OPERATION=VARIANT (repeatable).
    #[arg(long = "variant", value_name = "I/OP=V")]
    pub variants: Vec<String>,
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Also act as an HTTPS forward proxy; CMD gets HTTPS_PROXY and the CA variables.
    #[arg(long)]
    pub forward_proxy: bool,
    /// Directory of the local CA (default: certs/ beside the project file).
    #[arg(long, value_name = "DIR")]
    pub ca_dir: Option<PathBuf>,
    /// Data dir (default: the project file's).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Where evidence.json, junit.xml, report.html and understudy.log go.
    #[arg(long, value_name = "DIR", default_value = "understudy-report")]
    pub report_dir: PathBuf,
    /// Stop CMD after this many seconds (exit 124).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// The attempt's test_run_id (default: `understudy-test-<unix time>`).
    #[arg(long, value_name = "ID")]
    pub test_run_id: Option<String>,
    /// Log to stderr instead of <report dir>/understudy.log.
    #[arg(long)]
    pub log_stderr: bool,
    /// A run with no tool call and no agent-side event may pass (else it fails `no_calls`).
    #[arg(long)]
    pub allow_no_calls: bool,
    /// Also pass the agent's OpenTelemetry spans on to this OTLP/HTTP collector
    /// (`http://host:4318` or `https://…`; `/v1/traces` is appended unless the URL ends with
    /// it; `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_EXPORTER_OTLP_CERTIFICATE` apply).
    #[arg(long, value_name = "URL")]
    pub otel_forward: Option<String>,
    /// The command and its arguments (after `--`).
    #[arg(value_name = "CMD", required = true, last = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// `understudy report ATTEMPT --format json|junit|html [--out FILE] [--report-dir D]
/// [--data-dir D] [--config F] [--url URL [--admin-token T]]`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The attempt id.
    #[arg(value_name = "ATTEMPT")]
    pub attempt: String,
    /// Required unless --report-dir is given.
    #[arg(long, value_enum)]
    pub format: Option<crate::evidence::report::Format>,
    /// Write to FILE instead of stdout.
    #[arg(long, value_name = "FILE", conflicts_with = "report_dir")]
    pub out: Option<PathBuf>,
    /// Write all three reports (evidence.json, junit.xml, report.html) into DIR.
    #[arg(long, value_name = "DIR")]
    pub report_dir: Option<PathBuf>,
    /// The embedded data dir to read (default: the project file's `data_dir`; when the
    /// project file's `store` or UNDERSTUDY_STORE names a fleet store and this flag is
    /// absent, that PostgreSQL store is read instead).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The project file (default: understudy.json in the current directory when present):
    /// its `redact` list, `data_dir` and `store`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// `understudy discover --integration NAME`.
#[derive(Debug, Clone, Args)]
pub struct DiscoverArgs {
    #[arg(long, value_name = "NAME")]
    pub integration: String,
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where to write the operation files (default: the integration's operations directory).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `import --from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportFrom {
    Har,
    Postman,
    Wiremock,
    Openapi,
}

/// `understudy import --from KIND FILE… --integration NAME --out DIR`.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    #[arg(long, value_enum)]
    pub from: ImportFrom,
    /// Source files (WireMock: a mappings directory or a file with `mappings`).
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// The integration the operations belong to (its profile, upstream and scrub list come
    /// from the project file when it names it; else the rest profile).
    #[arg(long, value_name = "NAME")]
    pub integration: String,
    /// Where to write the operation files.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Project file (default: ./understudy.json when it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Replace existing operation files.
    #[arg(long)]
    pub force: bool,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

/// The files `understudy schema` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaName {
    /// The project file, understudy.json.
    Project,
    /// An operation file with its mock definition.
    Operation,
    /// An MCP resource file (`resources/<name>.json` in an operations directory).
    Resource,
    /// An MCP prompt file (`prompts/<name>.json` in an operations directory).
    Prompt,
    /// A tool-call contract (YAML or JSON).
    Contract,
    /// The evidence envelope of an attempt (`GET …/evidence`, `understudy evidence`): written
    /// by understudy, read by CI tools.
    Evidence,
}

impl SchemaName {
    pub const ALL: [SchemaName; 6] = [
        SchemaName::Project,
        SchemaName::Operation,
        SchemaName::Resource,
        SchemaName::Prompt,
        SchemaName::Contract,
        SchemaName::Evidence,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SchemaName::Project => "project",
            SchemaName::Operation => "operation",
            SchemaName::Resource => "resource",
            SchemaName::Prompt => "prompt",
            SchemaName::Contract => "contract",
            SchemaName::Evidence => "evidence",
        }
    }
}

/// `understudy schema NAME` | `understudy schema --all --out DIR [--check]`.
#[derive(Debug, Clone, Args)]
pub struct SchemaArgs {
    /// Which file's schema to print.
    #[arg(value_enum, required_unless_present = "all", conflicts_with = "all")]
    pub name: Option<SchemaName>,
    /// Write every schema to DIR/NAME.schema.json.
    #[arg(long, requires = "out")]
    pub all: bool,
    /// With --all: the directory written (the repository keeps them in schemas/).
    #[arg(long, value_name = "DIR", requires = "all")]
    pub out: Option<PathBuf>,
    /// With --all: write nothing; exit 1 when a file in DIR differs from what would be written.
    #[arg(long, requires = "all")]
    pub check: bool,
}

/// `understudy drift --integration NAME [--operation ID…] [--values]`.
#[derive(Debug, Clone, Args)]
pub struct DriftArgs {
    #[arg(long, value_name = "NAME")]
    pub integration: String,
    /// Only these operations (repeatable).
    #[arg(long = "operation", value_name = "ID")]
    pub operations: Vec<String>,
    /// Also report values that differ (not only shapes).
    #[arg(long)]
    pub values: bool,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Project file (default: ./understudy.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Extra CA certificate (PEM) trusted for upstream calls.
    #[arg(long, value_name = "FILE")]
    pub upstream_ca: Option<PathBuf>,
}

/// `understudy mcp …`.
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: McpCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum McpCommand {
    /// Serve an `mcp` integration over stdio (one JSON-RPC message per line): bridged to a
    /// running `understudy serve`/`test` of the project, else from the project's store.
    Stdio(McpStdioArgs),
    /// Start a real stdio MCP server as a child and relay to it through understudy (record,
    /// dry-run or record-missing).
    Wrap(McpWrapArgs),
    /// Print the configuration snippet that makes an MCP client start `understudy mcp stdio`.
    Config(McpConfigArgs),
}

/// `understudy mcp stdio --integration NAME [--config F] [--attempt TOKEN] [--url URL]`.
#[derive(Debug, Clone, Args)]
pub struct McpStdioArgs {
    /// The `mcp` integration served.
    #[arg(long, value_name = "NAME")]
    pub integration: String,
    /// Project file (default: ./understudy.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The attempt's token (else UNDERSTUDY_ATTEMPT, else the running `understudy test`'s
    /// attempt, else the default attempt).
    #[arg(long, value_name = "TOKEN")]
    pub attempt: Option<String>,
    /// A running understudy server (http://HOST:PORT) to send the calls to, instead of the one
    /// found through the data dir or the project's own store.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Data directory (overrides the project file's `data_dir`).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// `understudy mcp wrap --integration NAME [--mode M] -- CMD ARGS…`.
#[derive(Debug, Clone, Args)]
pub struct McpWrapArgs {
    /// The `mcp` integration the wrapped server stands for (its operations directory receives
    /// the drafts of a recording).
    #[arg(long, value_name = "NAME")]
    pub integration: String,
    /// Project file (default: ./understudy.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// record, dry-run or record-missing (default record). Joined to a running server, that
    /// server's mode applies instead.
    #[arg(long, value_enum)]
    pub mode: Option<crate::config::Mode>,
    /// The attempt's token (else UNDERSTUDY_ATTEMPT, else the running `understudy test`'s
    /// attempt, else the default attempt).
    #[arg(long, value_name = "TOKEN")]
    pub attempt: Option<String>,
    /// A running understudy server (http://HOST:PORT) to join, instead of the one found
    /// through the data dir; without either, wrap serves from the project's own store.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Record modes: where the draft operation files go (DIR/<integration>/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Record modes: forward writes to the child too (by default a write is blocked, as in
    /// `understudy record`).
    #[arg(long)]
    pub allow_writes: bool,
    /// Data directory (overrides the project file's `data_dir`).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The CA the forward proxy of the child's own HTTPS calls signs with (default: the
    /// project's `ca_dir`).
    #[arg(long, value_name = "DIR")]
    pub ca_dir: Option<PathBuf>,
    /// The stdio MCP server's command and arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `understudy mcp config --integration NAME --client claude|cursor|vscode|json`.
#[derive(Debug, Clone, Args)]
pub struct McpConfigArgs {
    #[arg(long, value_name = "NAME")]
    pub integration: String,
    #[arg(long, value_enum, default_value_t = McpClient::Json)]
    pub client: McpClient,
    /// Project file named in the snippet (default: ./understudy.json, made absolute).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// `--client` of `understudy mcp config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum McpClient {
    Claude,
    Cursor,
    Vscode,
    Json,
}

/// `understudy ca …`.
#[derive(Debug, Clone, Args)]
pub struct CaArgs {
    #[command(subcommand)]
    pub command: CaCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum CaCommand {
    /// Create a local CA: DIR/understudy-ca.pem and DIR/understudy-ca-key.pem (mode 0600).
    Init(CaInitArgs),
}

#[derive(Debug, Clone, Args)]
pub struct CaInitArgs {
    /// Directory (default: certs).
    #[arg(long, value_name = "DIR", default_value = "certs")]
    pub dir: PathBuf,
    /// Replace an existing CA (clients that trust the old one must be updated).
    #[arg(long)]
    pub force: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_each_subcommand() {
        let c = Cli::try_parse_from(["understudy", "check", "--format", "json", "a", "b"]).unwrap();
        match c.command {
            Command::Check(a) => {
                assert_eq!(a.format, OutputFormat::Json);
                assert_eq!(a.paths.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        let c = Cli::try_parse_from(["understudy", "serve", "--mode", "dry-run", "--tls"]).unwrap();
        match c.command {
            Command::Serve(a) => {
                assert_eq!(a.mode, Some(Mode::DryRun));
                assert!(a.flags.tls);
            }
            other => panic!("{other:?}"),
        }
        let c = Cli::try_parse_from(["understudy", "record", "--out", "drafts"]).unwrap();
        match c.command {
            Command::Record(a) => assert_eq!(a.to_serve().mode, Some(Mode::Record)),
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["understudy", "exec", "--input", "{}"]).is_err());
        assert!(Cli::try_parse_from(["understudy", "ca", "init"]).is_ok());
    }
}
