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
//! | [`cli`] | clap definitions only |
//! | [`config`] | `understudy.json`: serde model, validation, merge with CLI flags |
//! | [`error`] | the error vocabulary shared by every layer: who is at fault, harness codes |
//! | [`contract`] | operation files: model, directory loading, match templates, contract hash |
//! | [`discover`] | `understudy discover`: a live MCP server's tools/list → operation files |
//! | [`mock`] | the version-1 definition: model, references, evaluation, check, drafts |
//! | [`profile`] | one file per wire dialect: request → (operation, input), result → response |
//! | [`proxy`] | listener, routing, the pipeline stages of SPEC section 5 |
//! | [`attempt`] | tokens, leases, pins, the per-attempt state lock |
//! | [`evidence`] | events, the exported envelope, verdict, redaction |
//! | [`store`] | sled trees, per-attempt evidence files, the write-ahead journal and its group commit — the only module that touches the data dir |
//! | [`record`] | captured exchanges → draft operation files (a pure transformation), secret scrubbing, the writer |
//! | [`upstream`] | the upstream HTTP(S) client of record/dry-run/passthrough: rustls, header hygiene, streaming |
//! | [`tls`] | the local test CA, leaf certificates, rustls configs, forward-proxy parsing |
//! | [`admin`] | the `/_understudy/api` routes |
//! | [`commands`] | one function per CLI subcommand, returning an exit code |

pub mod admin;
pub mod attempt;
pub mod cli;
pub mod commands;
pub mod config;
pub mod contract;
pub mod discover;
pub mod error;
pub mod evidence;
pub mod mock;
pub mod profile;
pub mod proxy;
pub mod record;
pub mod store;
pub mod tls;
pub mod upstream;
pub mod verify;
