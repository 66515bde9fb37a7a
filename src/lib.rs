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
//! | [`server`] | the listener, TLS, CONNECT, the hot-reload task, dispatch to admin or proxy — the only module naming both |
//! | [`admin`] | the `/_understudy/api` routes (one router, one error shape) and the `/_understudy/ui` pages; never imports proxy or server |
//! | [`proxy`] | one proxied call from routing to commit: identify → plan → prepare_mock → run_mocked → commit; MCP; forwarding |
//! | [`app`] | the state of a running server, importing no handler: start-up, integrations and their generations, engines, contracts, recorder, host table, counters |
//! | [`operation`] | contract + engine compiled together: `Operation`, loading, every `check`, `generate`, and the one call core ([`operation::call`]) |
//! | [`contract`] | the operation-file model, match templates, contract hash (imports no mock) |
//! | [`mock`] | the version-1 engine: model, references and expressions, evaluation — pure, imports no contract |
//! | [`verify`] | tool-call contracts (SPEC 14): model, static checks, the pure evaluator over evidence |
//! | [`fault`] | faults on purpose: their checks, seeded chaos, the plan the pipeline follows, the evidence member (pure) |
//! | [`profile`] | wire dialects: request → (operation, input), result → response; [`profile::Wire`]; [`profile::mcp`] with its one era rule (no I/O) |
//! | [`attempt`] | tokens, leases, pins, the per-attempt state lock; the lease and pin rules |
//! | [`evidence`] | the exported envelope, verdict and its reasons, contract results, redaction (pure) |
//! | [`report`] | JUnit XML and the self-contained HTML report of an envelope (pure) |
//! | [`store`] | the only module that touches the data dir: the facade, sled, per-attempt evidence files, the journal and its group commit |
//! | [`records`] | the serde types the store keeps: revisions, pins, attempts, tool events, agent-side events |
//! | [`record`] | captured exchanges → draft operation files (a pure transformation), secret scrubbing, the writer |
//! | [`import`] | `understudy import`: HAR, Postman, WireMock, OpenAPI → operation files, with a report of what could not be mapped |
//! | [`author`] | offline writers and checkers of operation files: record, import, discover, generate, drift (a real answer against a mock's, through [`upstream`]) |
//! | [`upstream`] | the only code that reaches the real system: the HTTP(S) client (rustls, header hygiene, streaming), the MCP client, the request built from an input, the real answer as an envelope, the mock-vs-real diff |
//! | [`http`] | the buffered request every stage takes (body parsed once), response helpers, connection limits |
//! | [`config`] | `understudy.json`: serde model, validation, merge with CLI flags |
//! | [`error`] | the error vocabulary shared by every layer: who is at fault, harness codes, `Problem` |
//! | [`tls`] | the local test CA, leaf certificates, rustls configs, forward-proxy parsing |
//! | [`util`] | JSON depth bounds, the RFC 3339 clock format, atomic file writes |
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
pub mod report;
pub mod server;
pub mod store;
pub mod tls;
pub mod upstream;
pub mod util;
pub mod verify;
