//! OpenTelemetry: the agent's own trace as evidence (docs/src/guides/traces.md).
//!
//! | file | owns |
//! |---|---|
//! | [`ingest`] | OTLP/HTTP trace bodies (protobuf and JSON) decoded with bounds, and the agent's spans read as agent-side events: model turns, its tool calls as it saw them, its final message — pure, no I/O |
//!
//! The route that takes the spans (`POST /_understudy/api/otlp/v1/traces`) is the admin
//! API's (`admin/otlp.rs`); the checks that compare the agent's account with what arrived are
//! the tool-call contracts' (`agent_trace.*`, `evidence/verify/eval/agent_trace.rs`).

pub mod ingest;

pub use ingest::{decode, AgentSpan, SpanKind, TraceBatch, MAX_BODY};
