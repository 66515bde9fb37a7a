//! One real call of an operation on demand (the tool-testing API's `execute` with
//! `"target": "upstream"`, whose rules are `crate::admin::execute_upstream`'s module doc):
//! an HTTP-profile call built from the operation's `match` ([`super::request`]) or one MCP
//! `tools/call` through the one MCP client ([`super::mcp_client`]), with what it came to.

use hyper::http::HeaderMap;
use serde_json::{json, Value};

use super::answer::{envelope, parse_body};
use super::client::Upstream;
use super::mcp_client::{ClientError, EraChoice, McpClient};
use super::request::{self, CallFailure, Limits};
use crate::contract::ResultForm;
use crate::operation::Operation;

/// What one real call came to.
#[derive(Debug)]
pub struct Called {
    /// The request as sent (`{"method","url",…}`, the query's pairs as they are: the
    /// caller's report scrubs them).
    pub request: Value,
    pub status: u16,
    pub headers: HeaderMap,
    /// The answer's body (an MCP call: its JSON-RPC message).
    pub body: Option<Value>,
    /// The native envelope (HTTP profiles) or the tool's output (MCP).
    pub result: Value,
    pub retries: u32,
}

/// How a real call reaches the system: the client, the integration's upstream `base`, the
/// bounds of reading an answer and the `Authorization` to send.
pub struct Reach<'a> {
    pub upstream: &'a Upstream,
    pub base: &'a str,
    pub limits: Limits,
    pub authorization: Option<&'a str>,
}

/// An HTTP-profile call built from the operation's `match`; reads are retried when the
/// connection fails before an answer, writes never are.
pub async fn http_call(
    reach: &Reach<'_>,
    op: &Operation,
    input: &Value,
) -> Result<Called, CallFailure> {
    let fail = |m: String| CallFailure::new("cannot_build_request", m, 0);
    let spec = op
        .op
        .match_spec
        .as_ref()
        .ok_or_else(|| fail(format!("operation `{}` has no `match`", op.id())))?;
    let planned = request::build(spec, input, Some(op.profile)).map_err(fail)?;
    let headers = planned.header_map(reach.authorization).map_err(fail)?;
    let answer = request::send(
        reach.upstream,
        reach.base,
        &planned,
        &headers,
        reach.limits,
        !op.is_write,
    )
    .await?;
    let result = envelope(answer.status, &answer.body);
    Ok(Called {
        request: json!({
            "method": planned.method,
            "url": format!("{}{}", reach.base.trim_end_matches('/'), planned.path),
            "query": planned.query,
        }),
        status: answer.status,
        headers: answer.headers,
        body: parse_body(&answer.body),
        result,
        retries: answer.retries,
    })
}

/// The output of a tool from its `tools/call` result: the whole CallToolResult for
/// `result_form: call_tool_result`, else its `structuredContent`, else the JSON of its first
/// text block, else the result as it is.
pub fn tool_output(result: &Value, form: ResultForm) -> Value {
    match form {
        ResultForm::CallToolResult => result.clone(),
        ResultForm::Structured => result.get("structuredContent").cloned().unwrap_or_else(|| {
            result
                .pointer("/content/0/text")
                .and_then(Value::as_str)
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or(result.clone())
        }),
    }
}

/// One tool call through the MCP client, negotiated as `discover` negotiates.
pub async fn mcp_call(
    reach: &Reach<'_>,
    op: &Operation,
    input: &Value,
) -> Result<Called, CallFailure> {
    let mut client = McpClient::new(reach.upstream, reach.base)
        .with_authorization(reach.authorization.map(str::to_string))
        .with_limits(reach.limits)
        .with_retries(2);
    let unavailable = |e: ClientError, retries: u32| {
        let message = match e {
            ClientError::Refused(m) => format!("the MCP server refused the handshake: {m}"),
            ClientError::Unreachable(m) => m,
        };
        CallFailure::new("upstream_unavailable", message, retries)
    };
    if let Err(e) = client.connect(EraChoice::Auto).await {
        return Err(unavailable(e, client.retries()));
    }
    let sent = client
        .call_tool(op.id(), input, Some(&op.op.input_schema), !op.is_write)
        .await;
    client.close().await;
    let retries = client.retries();
    let reply = match sent {
        Ok(r) => r,
        Err(ClientError::Unreachable(m)) => {
            return Err(CallFailure::new("upstream_unavailable", m, retries))
        }
        Err(ClientError::Refused(m)) => return Err(CallFailure::new("upstream_error", m, retries)),
    };
    let result = match &reply.message {
        Some(m) if m.get("result").is_some() => tool_output(
            &m["result"],
            op.op.result_form.unwrap_or(ResultForm::Structured),
        ),
        Some(m) => {
            return Err(CallFailure::new(
                "upstream_error",
                format!(
                    "the MCP server answered tools/call with a JSON-RPC error: {}",
                    m.get("error").cloned().unwrap_or(Value::Null)
                ),
                retries,
            ))
        }
        None => {
            return Err(CallFailure::new(
                "upstream_unavailable",
                format!(
                    "the MCP server gave no answer to tools/call (HTTP {})",
                    reply.status
                ),
                retries,
            ))
        }
    };
    Ok(Called {
        request: json!({"method": "tools/call", "url": reach.base, "name": op.id()}),
        status: reply.status,
        headers: reply.headers,
        body: reply.message,
        result,
        retries,
    })
}
