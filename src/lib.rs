//! understudy — a record/replay mock proxy for the real integrations that AI agents call.
//!
//! An agent's base URL points at understudy. Each request is matched to a named operation,
//! answered from a pinned, versioned mock definition in the integration's native wire format,
//! and written to an evidence log that a CI gate can judge.
//!
//! # Layout
//!
//! Floors, top down; an import runs only down a floor (or within a room):
//! commands → server → {admin, proxy} → app → {author, evidence} → {operation, upstream} →
//! {profile, store} → {config, http, records, telemetry, tls} → {contract, mock} → {error, util}.
//!
//! | module | owns |
//! |---|---|
//! | [`commands`] | one file per CLI subcommand; the only code that prints or picks an exit code ([`commands::Exit`]) |
//! | [`cli`] | clap definitions only; the serve flags shared by `serve` and `record` |
//! | [`server`] | the listener, TLS, CONNECT, the hot-reload task, dispatch to admin or proxy — the only module naming both; the stdio front of MCP (`mcp stdio`, `mcp wrap`) |
//! | [`admin`] | the `/_understudy/api` routes (one router, one error shape) and the `/_understudy/ui` pages; never imports proxy or server |
//! | [`proxy`] | one proxied call from routing to commit: identify → plan → prepare_mock → run_mocked → commit; MCP; forwarding |
//! | [`app`] | the state of a running server, importing no handler: start-up, integrations and their generations, engines, contracts, recorder, host table, counters, [`app::attempt`] (tokens, leases, pins, the per-attempt state lock) |
//! | [`author`] | offline writers and checkers of operation files: [`author::record`] (captured exchanges → drafts, scrubbing), [`author::import`] (HAR, Postman, WireMock, OpenAPI), [`author::discover`], [`author::generate`], [`author::drift`] (a real answer against a mock's, through [`upstream`]) |
//! | [`evidence`] | after the calls: the exported envelope, the one verdict and its reasons, redaction (pure); `evidence::verify` (tool-call contracts: model, static checks, the pure evaluator) and `evidence::report` (JUnit XML, the self-contained HTML report) |
//! | [`operation`] | contract + engine compiled together: `Operation`, loading, every `check`, the one call core ([`operation::call`]), faults on purpose ([`operation::fault`]) |
//! | [`upstream`] | the only code that reaches the real system: the HTTP(S) client (rustls, header hygiene, streaming), the MCP client, the request built from an input, the real answer as an envelope, the mock-vs-real diff |
//! | [`profile`] | the wire as data, no I/O: the envelope rule ([`profile::envelope`]), rest, salesforce, [`profile::Wire`], [`profile::mcp`] (server side) |
//! | [`store`] | the only module that touches the data dir or PostgreSQL: the facade, sled, the journal and its group commit, `store/postgres/` |
//! | [`config`] | `understudy.json`: serde model, validation, merge with CLI flags; store URLs |
//! | [`http`] | the buffered request every stage takes (body parsed once), a profile's answer ([`http::NativeResponse`]) as HTTP, what a fault puts on the wire, connection limits |
//! | [`telemetry`] | OpenTelemetry: OTLP trace bodies decoded with bounds and the agent's spans read as agent-side events (pure; imports records and util) |
//! | [`records`] | the serde types the store keeps: revisions, pins, attempts, tool events, agent-side events, seeded chaos |
//! | [`tls`] | the local test CA, leaf certificates, rustls configs, forward-proxy parsing |
//! | [`contract`] | the operation-file model and [`contract::ProfileKind`], match templates, URI templates, the contract hash (imports no mock) |
//! | [`mock`] | the version-1 engine: model, references and expressions, evaluation — pure, imports no contract |
//! | [`error`] | the error vocabulary shared by every layer: who is at fault, harness codes, `Problem` |
//! | [`util`] | JSON depth bounds and type names, the RFC 3339 clock format, atomic file writes, random ids, the scrubbed marker |
//!
//! The arrows run one way; `scripts/check-layout.sh` lists the imports that must never exist.
//! One deliberate circle remains inside [`server`]: a CONNECT tunnel serves HTTP inside the
//! tunnel, so the listener (`server/http.rs`), TLS (`server/transport.rs`) and CONNECT
//! (`server/connect.rs`) call each other.

pub mod admin;
pub mod app;
pub mod author;
pub mod cli;
pub mod commands;
pub mod config;
pub mod contract;
pub mod error;
pub mod evidence;
pub mod http;
pub mod mock;
pub mod operation;
pub mod profile;
pub mod proxy;
pub mod records;
pub mod server;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod upstream;
pub mod util;
