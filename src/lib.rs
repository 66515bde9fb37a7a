//! understudy — a record/replay mock proxy for the real integrations that AI agents call.
//!
//! An agent's base URL points at understudy. Each request is matched to a named operation,
//! answered from a pinned, versioned mock definition in the integration's native wire format,
//! and written to an evidence log that a CI gate can judge. `shared/SPEC.md` is the contract.
//!
//! # Layout
//!
//! | module | owns |
//! |---|---|
//! | [`commands`] | one file per CLI subcommand; the only code that prints or picks an exit code ([`commands::Exit`]) |
//! | [`cli`] | clap definitions only; the serve flags shared by `serve` and `record` |
//! | [`server`] | the listener, TLS, CONNECT, the hot-reload task, dispatch to admin or proxy |
//! | [`admin`] | the `/_understudy/api` routes, the on-demand upstream call of `POST /tools/execute` |
//! | [`proxy`] | one proxied call: routing, the pipeline stages of SPEC section 5, MCP, forwarding |
//! | [`app`] | the state of a running server: start-up, integrations and their generations, engines, recorder, host table, counters |
//! | [`http`] | the buffered request every stage takes, response helpers, connection limits |
//! | [`config`] | `understudy.json`: serde model, validation, merge with CLI flags |
//! | [`error`] | the error vocabulary shared by every layer: who is at fault, harness codes |
//! | [`contract`] | operation files: model, directory loading, match templates, contract hash |
//! | [`discover`] | a live MCP server's tools/list → operation files |
//! | [`mock`] | the version-1 definition: model, references, evaluation, check, drafts |
//! | [`profile`] | one file per wire dialect: request → (operation, input), result → response; [`profile::mcp::client`], the one MCP client (`discover`, `POST /tools/execute` upstream) |
//! | [`attempt`] | tokens, leases, pins, the per-attempt state lock |
//! | [`evidence`] | events, the exported envelope, verdict, redaction |
//! | [`fault`] | faults on purpose: their checks, seeded chaos, the plan the pipeline follows, the evidence member (pure) |
//! | [`store`] | sled trees, per-attempt evidence files, the write-ahead journal and its group commit — the only module that touches the data dir |
//! | [`record`] | captured exchanges → draft operation files (a pure transformation), secret scrubbing, the writer |
//! | [`upstream`] | the upstream HTTP(S) client of record/dry-run/passthrough: rustls, header hygiene, streaming |
//! | [`import`] | `understudy import`: HAR, Postman, WireMock, OpenAPI → operation files, with a report of what could not be mapped |
//! | [`drift`] | `understudy drift`'s pure shape/value diff of a real answer against a mock's |
//! | [`tls`] | the local test CA, leaf certificates, rustls configs, forward-proxy parsing |

pub mod admin;
pub mod app;
pub mod attempt;
pub mod cli;
pub mod commands;
pub mod config;
pub mod contract;
pub mod discover;
pub mod drift;
pub mod error;
pub mod evidence;
pub mod fault;
pub mod http;
pub mod import;
pub mod mock;
pub mod operation;
pub mod profile;
pub mod proxy;
pub mod record;
pub mod records;
pub mod report;
pub mod server;
pub mod store;
pub mod tls;
pub mod upstream;
pub mod util;
pub mod verify;
