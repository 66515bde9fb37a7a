//! OpenTelemetry: the agent's own trace as evidence (docs/src/guides/traces.md).
//!
//! | file | owns |
//! |---|---|
//! | [`ingest`] | OTLP/HTTP trace bodies (protobuf and JSON) decoded with bounds, and the agent's spans read as agent-side events: model turns, its tool calls as it saw them, its final message — pure, no I/O |
//! | [`spans`] | traces out: a served call's evidence event → its `execute_tool` span (GenAI, MCP and OpenInference attributes, guardrail events); an ended attempt → its span with one evaluation event per contract check — pure |
//! | [`export`] | traces out: the settings (`"otel"`, `OTEL_*`), the OTLP/HTTP protobuf exporter (`opentelemetry-otlp`) over its own hyper-util client (rustls: web PKI roots plus `OTEL_EXPORTER_OTLP_CERTIFICATE`), the bounded queue and export thread, the dropped-span counter |
//! | [`forward`] | `--otel-forward`: the agent's OTLP bodies passed on to the user's collector (`http://` or `https://`) through the same client, bounded, counted, flushed at shutdown |
//!
//! The route that takes the spans (`POST /_understudy/api/otlp/v1/traces`) is the admin
//! API's (`admin/otlp.rs`); the checks that compare the agent's account with what arrived are
//! the tool-call contracts' (`agent_trace.*`, `evidence/verify/eval/agent_trace.rs`).

pub mod export;
pub mod forward;
pub mod ingest;
pub mod spans;

pub use export::{Exporter, FileSettings, Settings};
pub use forward::{forward_url, Forwarder};
pub use ingest::{decode, AgentSpan, SpanKind, TraceBatch, MAX_BODY};
pub use spans::{
    attempt_span, call_span, AttemptOutcome, CallContext, Caller, CheckOutcome, McpMessage,
};

/// `"otel"` of the project file: traces out (docs/src/guides/traces.md#traces-out). Without
/// an `endpoint` here, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`
/// decide; with none anywhere nothing is exported. Export headers come only from
/// `OTEL_EXPORTER_OTLP_HEADERS` (a collector's key never sits in the project file).
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Otel {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`; Arize Phoenix: `http://127.0.0.1:6006`); `/v1/traces` is appended unless the URL ends with it.
    #[serde(
        default,
        deserialize_with = "endpoint",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(regex(pattern = r"^[hH][tT][tT][pP][sS]?://[^/?#\s]+([/?#]\S*)?$"))]
    pub endpoint: Option<String>,
    /// `service.name` of the spans (default `understudy`; `OTEL_SERVICE_NAME` overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Put each call's arguments and result on its span, scrubbed (default false).
    #[serde(default)]
    pub content: bool,
    /// `understudy test --otel-forward URL` (not a project-file key): the OTLP traces route
    /// also sends each body it takes to this `http://` or `https://` collector, off the
    /// answer's path ([`forward`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub forward: Option<String>,
}

/// `otel.endpoint`: an `http://` or `https://` URL with a host.
fn endpoint<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let e: String = serde::Deserialize::deserialize(d)?;
    let rest = e
        .strip_prefix("http://")
        .or_else(|| e.strip_prefix("https://"))
        .unwrap_or("");
    if rest.is_empty() || rest.starts_with('/') || e.parse::<hyper::Uri>().is_err() {
        return Err(serde::de::Error::custom(format!(
            "expected the collector's http:// or https:// OTLP/HTTP URL (e.g. http://127.0.0.1:4318), got `{e}`"
        )));
    }
    Ok(Some(e))
}
