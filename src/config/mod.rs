//! The project file `understudy.json` (docs/src/reference/config.md): serde model (`deny_unknown_fields`),
//! validation, resolved paths, and the one merge with command-line flags.
//!
//! Relative paths in the file are relative to the file's own directory; paths given on the
//! command line are relative to the current directory. Every error names the file, the JSON
//! path and what was expected.

pub mod retention;

use crate::{contract::ProfileKind, error::Problem};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::{collections::BTreeMap, fmt};

/// The listen address when neither the file nor `--listen` gives one.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7777";
/// The project file name looked for in the current directory (and, to infer an operation
/// file's profile, in its ancestors).
pub const PROJECT_FILE: &str = "understudy.json";

/// Server mode (docs/src/reference/modes.md).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[schemars(description = "Server mode (default `replay`).")]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    #[default]
    Replay,
    DryRun,
    Record,
    RecordMissing,
    Passthrough,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Replay => "replay",
            Mode::DryRun => "dry-run",
            Mode::Record => "record",
            Mode::RecordMissing => "record-missing",
            Mode::Passthrough => "passthrough",
        }
    }

    /// Whether an operations directory that does not exist yet counts as empty (every mode
    /// that can reach the real upstream: someone recording for the first time has none).
    /// In `replay` a missing directory is a start error: it is almost always a typo.
    pub fn tolerates_missing_operations(self) -> bool {
        self != Mode::Replay
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub use crate::records::Durability;

/// What `dry-run` does with a write that matches no mocked operation (docs/src/concepts/errors.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[schemars(description = "What `dry-run` does with a write that matches no mocked operation.")]
#[serde(rename_all = "lowercase")]
pub enum UnmatchedWrites {
    #[default]
    Block,
    Simulate,
    Tag,
}

/// `scrub` (record mode): extra header names and body/query field names to scrub, on top of
/// the built-in secret denylist.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scrub {
    /// Header names scrubbed from recordings, beside the built-in secret denylist.
    #[serde(default)]
    #[schemars(inner(regex(pattern = crate::util::json::HEADER_NAME_PATTERN)))]
    pub headers: Vec<String>,
    /// Body and query field names scrubbed from recordings.
    #[serde(default)]
    pub fields: Vec<String>,
}

impl Scrub {
    /// The project's secret names, one set for headers, fields and parameters alike (the
    /// loaded `fields` include the `redact` list).
    pub fn names(&self) -> Vec<String> {
        self.fields.iter().chain(&self.headers).cloned().collect()
    }
}

/// The project file `understudy.json` as written (its JSON Schema is `understudy schema project`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "understudy.json", rename = "ProjectFile")]
pub(crate) struct RawConfig {
    /// Listen address `HOST:PORT` (default `127.0.0.1:7777`); `--listen` overrides it.
    #[serde(default)]
    #[schemars(regex(
        pattern = r"^.+:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})$"
    ))]
    listen: Option<String>,
    /// Where revisions, attempts and evidence are stored (default `.understudy` beside this file).
    #[serde(default)]
    data_dir: Option<PathBuf>,
    /// The fleet store, `postgres://USER@HOST:PORT/DB`, instead of the embedded store in `data_dir`.
    #[serde(default)]
    #[schemars(regex(pattern = r"^(postgres|postgresql)://"))]
    store: Option<String>,
    /// Server mode (default `replay`).
    #[serde(default)]
    mode: Option<Mode>,
    /// Directory of the local CA for `serve --tls` and `--forward-proxy` (default `certs` beside this file).
    #[serde(default)]
    ca_dir: Option<PathBuf>,
    /// Extra CA certificate (PEM) trusted for upstream calls.
    #[serde(default)]
    upstream_ca: Option<PathBuf>,
    /// Record mode: extra header and field names to scrub.
    #[serde(default)]
    scrub: Scrub,
    /// Secret values cut out of evidence and reports.
    #[serde(default)]
    redact: Vec<String>,
    /// The tool-call contracts directory (default `contracts` beside this file, when it exists).
    #[serde(default)]
    contracts: Option<PathBuf>,
    /// When calls become durable: `call` (before the answer, the default) or `attempt`.
    #[serde(default)]
    durability: Durability,
    /// Extra `Host` values the control plane answers to (`name` or `name:port`).
    #[serde(default)]
    allowed_hosts: Vec<String>,
    /// Extra `Origin`s that may drive the control plane (and the only ones sent CORS headers).
    #[serde(default)]
    allowed_origins: Vec<String>,
    /// Whether a loopback peer without proxy headers needs no admin token (default true).
    #[serde(default)]
    trust_loopback: Option<bool>,
    /// Scoped admin tokens, stored as SHA-256 only.
    #[serde(default)]
    admin_tokens: Vec<AdminToken>,
    /// Traces out: each served call as an OpenTelemetry span sent to an OTLP/HTTP collector.
    #[serde(default)]
    otel: crate::telemetry::Otel,
    /// The default attempt's retention bound (docs/src/reference/evidence-envelope.md#retention).
    #[serde(default)]
    default_attempt: retention::DefaultAttempt,
    /// Integration name (`[a-z0-9_-]{1,64}`, not starting with `_`) → its definition; at least one.
    #[schemars(extend("propertyNames" = {"pattern": "^[a-z0-9-][a-z0-9_-]{0,63}$"}, "minProperties" = 1))]
    integrations: BTreeMap<String, RawIntegration>,
}

/// What an admin token may do (`docs/src/operations/security.md` has the route table).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Evidence, attempts, the UI, metrics, the tool list.
    Read,
    /// Create and end attempts, post agent events, verify.
    Run,
    /// Save revisions, flush drafts, `POST /tools/execute`.
    Manage,
}

impl Scope {
    /// Every scope (what `--admin-token` grants).
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Run, Scope::Manage];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Run => "run",
            Scope::Manage => "manage",
        }
    }
}

/// One entry of `"admin_tokens"`: a named token, stored as the lower-case hex SHA-256 of
/// the token (never the token itself), with its scopes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminToken {
    pub name: String,
    pub sha256: String,
    pub scopes: Vec<Scope>,
}

/// Who may drive the control plane (`/_understudy/…`): the project file's
/// `allowed_hosts`, `allowed_origins`, `trust_loopback` and `admin_tokens`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    /// Extra `Host` values the listener answers to (`name` or `name:port`).
    pub allowed_hosts: Vec<String>,
    /// Extra `Origin`s (`https://dash.example.com`) that may drive it; also the only
    /// origins ever sent `Access-Control-Allow-*`.
    pub allowed_origins: Vec<String>,
    /// Whether a loopback peer without proxy headers needs no token (default true).
    pub trust_loopback: bool,
    pub admin_tokens: Vec<AdminToken>,
}

impl Default for Control {
    fn default() -> Control {
        Control {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            trust_loopback: true,
            admin_tokens: Vec::new(),
        }
    }
}

/// One integration of the project file.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Integration")]
#[schemars(extend("if" = {"not": {"properties": {"profile": {"const": "mcp"}}}}, "then" = {"properties": {"mcp_sse": {"const": false}}}))]
struct RawIntegration {
    /// The wire dialect.
    profile: ProfileKind,
    /// The real system's base URL (`http://` or `https://`), used by record, dry-run and passthrough.
    #[serde(default)]
    #[schemars(regex(pattern = r"^[hH][tT][tT][pP][sS]?://[^/?#\s]+([/?#]\S*)?$"))]
    upstream: Option<String>,
    /// The operations directory (default `mocks/<name>` beside this file).
    #[serde(default)]
    operations: Option<PathBuf>,
    /// What `dry-run` does with a write that matches no mocked operation (default `block`).
    #[serde(default)]
    unmatched_writes: UnmatchedWrites,
    /// `mcp` only: also serve the legacy HTTP+SSE transport.
    #[serde(default)]
    mcp_sse: bool,
    /// `salesforce` only: the login hosts (`login.salesforce.com`, `*.my.salesforce.com`…)
    /// the forward proxy routes to this integration. Default: with one `salesforce`
    /// integration, `login.salesforce.com`, `test.salesforce.com` and `*.my.salesforce.com`.
    #[serde(default)]
    login_hosts: Option<Vec<String>>,
}

/// A loaded, validated project file with every path resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The project file itself.
    pub file: PathBuf,
    /// Its directory: the base of every relative path in it.
    pub base_dir: PathBuf,
    /// `host:port` (default [`DEFAULT_LISTEN`]).
    pub listen: String,
    /// Default `<base>/.understudy`.
    pub data_dir: PathBuf,
    /// `"store": "postgres://…"` (docs/src/operations/fleet-store.md): the fleet store instead of the embedded one in
    /// `data_dir`; `--store URL` / `UNDERSTUDY_STORE` override it.
    pub store: Option<String>,
    pub mode: Mode,
    /// Default `<base>/certs` (docs/src/reference/https.md).
    pub ca_dir: PathBuf,
    pub upstream_ca: Option<PathBuf>,
    pub scrub: Scrub,
    pub redact: Vec<String>,
    /// The tool-call contracts directory (docs/src/reference/contracts.md): `contracts` resolved, else
    /// `<base>/contracts` when that directory exists, else none.
    pub contracts: Option<PathBuf>,
    /// `"durability"`: when calls of the default attempt, and of attempts whose
    /// `POST /attempts` body names none, are durable (default `call`: before the answer).
    pub durability: Durability,
    /// `allowed_hosts`, `allowed_origins`, `trust_loopback`, `admin_tokens`.
    pub control: Control,
    pub integrations: BTreeMap<String, IntegrationConfig>,
    /// `"otel"` as written (`OTEL_*` are read at start-up), and `--otel-forward`.
    pub otel: crate::telemetry::Otel,
    /// `"default_attempt"`: the default attempt's retention bound.
    pub default_attempt: retention::DefaultAttempt,
}

/// One integration of the project file.
#[derive(Debug, Clone, PartialEq)]
pub struct IntegrationConfig {
    pub name: String,
    pub profile: ProfileKind,
    /// The real system's base URL (`https://acme.my.salesforce.com`), when given.
    pub upstream: Option<String>,
    /// The operations directory, resolved (default `<base>/mocks/<name>`).
    pub operations: PathBuf,
    pub unmatched_writes: UnmatchedWrites,
    pub mcp_sse: bool,
    /// `salesforce` only: the login hosts routed to it in forward-proxy mode (`None`: the
    /// defaults, when it is the project's only `salesforce` integration).
    pub login_hosts: Option<Vec<String>>,
}

/// A project file that cannot be used: the [`Problem`] (file, JSON path such as
/// `integrations/crm/profile`, message), and whether the file is missing altogether.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub problem: Problem,
    /// The file does not exist (a usage error rather than a broken file).
    pub not_found: bool,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.problem.fmt(f)
    }
}

impl std::error::Error for ConfigError {}

/// `[a-z0-9_-]{1,64}`, not starting with `_` (reserved: `/_understudy`) or `~` (tokens).
pub fn valid_integration_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('_')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Turn a serde_path_to_error path into `a/b/0/c` (empty for the root).
pub(crate) fn slash_path(p: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let parts: Vec<String> = p
        .iter()
        .filter_map(|s| match s {
            Segment::Seq { index } => Some(index.to_string()),
            Segment::Map { key } => Some(key.clone()),
            Segment::Enum { variant } => Some(variant.clone()),
            Segment::Unknown => None,
        })
        .collect();
    parts.join("/")
}

impl Config {
    /// Read, parse and validate a project file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            problem: Problem::new(path, "", format!("cannot read the project file: {e}")),
            not_found: e.kind() == std::io::ErrorKind::NotFound,
        })?;
        Config::parse(&text, path)
    }

    /// Parse the text of a project file located at `file` (paths resolve against its
    /// directory).
    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        let err = |path: String, message: String| ConfigError {
            problem: Problem::new(file, path, message),
            not_found: false,
        };
        let mut value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| err(String::new(), format!("not valid JSON: {e}")))?;
        if !value.is_object() {
            return Err(err(
                String::new(),
                "expected a JSON object with `integrations` (and optionally listen, data_dir, mode, …)".into(),
            ));
        }
        crate::util::json::strip_schema_member(&mut value)
            .map_err(|m| err(crate::util::json::SCHEMA_MEMBER.into(), m))?;
        let raw: RawConfig = serde_path_to_error::deserialize(&value)
            .map_err(|e| err(slash_path(e.path()), e.inner().to_string()))?;
        let base_dir = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let resolve = |p: &Path| -> PathBuf {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base_dir.join(p)
            }
        };
        let listen = raw.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        validate_listen(&listen).map_err(|m| err("listen".into(), m))?;
        if raw.integrations.is_empty() {
            return Err(err(
                "integrations".into(),
                "no integration: expected at least one, e.g. {\"crm\": {\"profile\": \"salesforce\", \"operations\": \"mocks/crm\"}}".into(),
            ));
        }
        for (i, h) in raw.scrub.headers.iter().enumerate() {
            if hyper::http::HeaderName::from_bytes(h.as_bytes()).is_err() {
                return Err(err(
                    format!("scrub/headers/{i}"),
                    format!("`{h}` is not a valid header name"),
                ));
            }
        }
        for (i, t) in raw.admin_tokens.iter().enumerate() {
            let hex = t.sha256.len() == 64
                && t.sha256
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !hex {
                return Err(err(
                    format!("admin_tokens/{i}/sha256"),
                    "expected the lower-case hex SHA-256 of the token (64 characters, e.g. the output of `printf %s \"$TOKEN\" | sha256sum`), never the token itself".into(),
                ));
            }
            if t.scopes.is_empty() {
                return Err(err(
                    format!("admin_tokens/{i}/scopes"),
                    "expected at least one of \"read\", \"run\", \"manage\"".into(),
                ));
            }
        }
        for (i, o) in raw.allowed_origins.iter().enumerate() {
            let ok = (o.starts_with("http://") || o.starts_with("https://"))
                && o.trim_end_matches('/')
                    .splitn(4, '/')
                    .nth(3)
                    .is_none_or(|r| r.is_empty());
            if !ok {
                return Err(err(
                    format!("allowed_origins/{i}"),
                    format!("`{o}` is not an origin: expected scheme://host[:port], e.g. https://dash.example.com"),
                ));
            }
        }
        let mut integrations = BTreeMap::new();
        for (name, ri) in raw.integrations {
            let at = |k: &str| format!("integrations/{name}{k}");
            if !valid_integration_name(&name) {
                return Err(err(
                    at(""),
                    format!("`{name}` is not a valid integration name: expected lower-case letters, digits, `_` and `-` (1-64), not starting with `_`"),
                ));
            }
            if let Some(u) = &ri.upstream {
                validate_upstream(u).map_err(|m| err(at("/upstream"), m))?;
            }
            if ri.mcp_sse && ri.profile != ProfileKind::Mcp {
                return Err(err(
                    at("/mcp_sse"),
                    format!(
                        "`mcp_sse` applies only to the `mcp` profile, this integration is `{}`",
                        ri.profile
                    ),
                ));
            }
            if let Some(hosts) = &ri.login_hosts {
                if ri.profile != ProfileKind::Salesforce {
                    return Err(err(
                        at("/login_hosts"),
                        format!(
                            "`login_hosts` applies only to the `salesforce` profile, this integration is `{}`",
                            ri.profile
                        ),
                    ));
                }
                for (i, h) in hosts.iter().enumerate() {
                    let bare = h.strip_prefix("*.").unwrap_or(h);
                    let ok = !bare.is_empty()
                        && !bare.starts_with('.')
                        && !bare.ends_with('.')
                        && !bare.contains("..")
                        && bare
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
                    if !ok {
                        return Err(err(
                            format!("integrations/{name}/login_hosts/{i}"),
                            format!("`{h}` is not a host name: expected e.g. `login.salesforce.com` or `*.my.salesforce.com` (no scheme, port or path)"),
                        ));
                    }
                }
            }
            let operations = match &ri.operations {
                Some(p) => resolve(p),
                None => base_dir.join("mocks").join(&name),
            };
            integrations.insert(
                name.clone(),
                IntegrationConfig {
                    name,
                    profile: ri.profile,
                    upstream: ri.upstream,
                    operations,
                    unmatched_writes: ri.unmatched_writes,
                    mcp_sse: ri.mcp_sse,
                    login_hosts: ri.login_hosts,
                },
            );
        }
        Ok(Config {
            file: file.to_path_buf(),
            listen,
            data_dir: resolve(raw.data_dir.as_deref().unwrap_or(Path::new(".understudy"))),
            store: match raw.store {
                Some(u) if !is_postgres_url(&u) => {
                    return Err(err(
                        "store".into(),
                        format!(
                            "expected a postgres:// or postgresql:// URL, got {:?} (leave `store` out for the embedded store in data_dir)",
                            redact_url(&u)
                        ),
                    ))
                }
                other => other.filter(|u| !u.is_empty()),
            },
            mode: raw.mode.unwrap_or_default(),
            ca_dir: resolve(raw.ca_dir.as_deref().unwrap_or(Path::new("certs"))),
            upstream_ca: raw.upstream_ca.as_deref().map(resolve),
            // A `redact` name is a secret name everywhere, record mode's drafts included.
            scrub: Scrub {
                fields: raw
                    .scrub
                    .fields
                    .iter()
                    .chain(raw.redact.iter().filter(|r| !raw.scrub.fields.contains(r)))
                    .cloned()
                    .collect(),
                headers: raw.scrub.headers,
            },
            redact: raw.redact,
            contracts: match &raw.contracts {
                Some(p) => Some(resolve(p)),
                None => Some(base_dir.join("contracts")).filter(|d| d.is_dir()),
            },
            durability: raw.durability,
            control: Control {
                allowed_hosts: raw.allowed_hosts,
                allowed_origins: raw.allowed_origins,
                trust_loopback: raw.trust_loopback.unwrap_or(true),
                admin_tokens: raw.admin_tokens,
            },
            integrations,
            base_dir,
            otel: raw.otel,
            default_attempt: raw.default_attempt,
        })
    }

    /// Command-line flags override the file (docs/src/reference/config.md). Paths given here are relative to the
    /// current directory, as usual for flags.
    pub fn apply_overrides(
        &mut self,
        listen: Option<&str>,
        mode: Option<Mode>,
        data_dir: Option<&Path>,
    ) -> Result<(), String> {
        if let Some(l) = listen {
            validate_listen(l).map_err(|m| format!("--listen: {m}"))?;
            self.listen = l.to_string();
        }
        if let Some(m) = mode {
            self.mode = m;
        }
        if let Some(d) = data_dir {
            self.data_dir = d.to_path_buf();
        }
        Ok(())
    }

    /// The integration whose operations directory holds `file` (compared after resolving
    /// both paths), if any.
    pub fn integration_for_file(&self, file: &Path) -> Option<&IntegrationConfig> {
        let file = std::fs::canonicalize(file).ok()?;
        self.integrations.values().find(|i| {
            std::fs::canonicalize(&i.operations)
                .map(|dir| file.starts_with(&dir))
                .unwrap_or(false)
        })
    }

    /// The nearest `understudy.json` in `start` or one of its ancestors.
    pub fn find_upward(start: &Path) -> Option<PathBuf> {
        let start = std::fs::canonicalize(start).ok()?;
        let mut dir: Option<&Path> = Some(if start.is_dir() {
            &start
        } else {
            start.parent()?
        });
        while let Some(d) = dir {
            let candidate = d.join(PROJECT_FILE);
            if candidate.is_file() {
                return Some(candidate);
            }
            dir = d.parent();
        }
        None
    }
}

fn validate_listen(listen: &str) -> Result<(), String> {
    let ok = listen
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{listen}` is not an address: expected HOST:PORT, e.g. {DEFAULT_LISTEN}"
        ))
    }
}

fn validate_upstream(u: &str) -> Result<(), String> {
    let uri: hyper::Uri = u.parse().map_err(|e| {
        format!("`{u}` is not a URL ({e}): expected e.g. https://acme.my.salesforce.com")
    })?;
    match uri.scheme_str() {
        Some("http") | Some("https") if uri.authority().is_some() => Ok(()),
        _ => Err(format!(
            "`{u}` is not an http(s) URL with a host: expected e.g. https://acme.my.salesforce.com"
        )),
    }
}

/// A store URL without its password, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Whether a store URL names the PostgreSQL backend (`postgres://` or `postgresql://`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

#[cfg(test)]
mod tests;
