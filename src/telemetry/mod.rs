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

/// The URL `--otel-forward` sends to: an `http://` OTLP/HTTP endpoint, `/v1/traces` appended
/// unless it ends with it. HTTPS collectors are not supported yet (the error says so).
pub fn forward_url(url: &str) -> Result<String, String> {
    let u = url.trim().trim_end_matches('/');
    let Some(rest) = u.strip_prefix("http://") else {
        return Err(format!(
            "expected an http:// OTLP/HTTP endpoint (e.g. http://127.0.0.1:4318), got `{url}` (https:// is not supported yet)"
        ));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("`{url}` names no host"));
    }
    Ok(if u.ends_with("/v1/traces") {
        u.to_string()
    } else {
        format!("{u}/v1/traces")
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn forward_urls() {
        assert_eq!(
            super::forward_url("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            super::forward_url("http://c:4318/v1/traces").unwrap(),
            "http://c:4318/v1/traces"
        );
        assert!(super::forward_url("https://c")
            .unwrap_err()
            .contains("https"));
        assert!(super::forward_url("http:///x").is_err());
    }
}
