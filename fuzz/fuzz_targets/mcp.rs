//! Arbitrary bytes as a JSON-RPC POST body (and a few header shapes) into the MCP endpoint
//! with a fake backend. Never panics; every answer is a well-formed HTTP answer.
#![no_main]

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use understudy::contract::ResultForm;
use understudy::error::{HarnessCode, HarnessError, InputError};
use understudy::profile::mcp::{McpBackend, McpEndpoint, ToolCallOutcome, ToolInfo};

struct Fake;

impl McpBackend for Fake {
    fn tools(&self) -> Vec<ToolInfo> {
        (0..3)
            .map(|i| ToolInfo {
                name: format!("tool_{i}"),
                title: None,
                description: Some("a tool".into()),
                input_schema: json!({ "type": "object" }),
                output_schema: (i != 2).then(|| json!({ "type": "object" })),
                annotations: None,
                result_form: if i == 2 { ResultForm::CallToolResult } else { ResultForm::Structured },
            })
            .collect()
    }
    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
    ) -> Pin<Box<dyn Future<Output = ToolCallOutcome> + Send + 'a>> {
        Box::pin(async move {
            match name {
                "tool_0" => ToolCallOutcome::Ok(json!({ "echo": arguments })),
                "tool_1" => ToolCallOutcome::InputError(InputError::new("bad input")),
                "tool_2" => ToolCallOutcome::Harness(HarnessError::new(
                    HarnessCode::MissingReference,
                    "no such value",
                )),
                _ => ToolCallOutcome::UnknownTool,
            }
        })
    }
    fn server_name(&self) -> String {
        "understudy-fuzz".into()
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().build().unwrap())
}

fuzz_target!(|data: &[u8]| {
    let (flags, body) = match data.split_first() {
        Some((f, rest)) => (*f, rest),
        None => (0, data),
    };
    let mut h = http::HeaderMap::new();
    h.insert("content-type", http::HeaderValue::from_static("application/json"));
    h.insert(
        "accept",
        http::HeaderValue::from_static(if flags & 1 == 0 {
            "application/json, text/event-stream"
        } else {
            "text/event-stream"
        }),
    );
    if flags & 2 != 0 {
        h.insert("mcp-protocol-version", http::HeaderValue::from_static("2026-07-28"));
    }
    if flags & 4 != 0 {
        h.insert("mcp-protocol-version", http::HeaderValue::from_static("2025-06-18"));
    }
    let endpoint = McpEndpoint::new(flags & 8 != 0);
    let r = runtime().block_on(endpoint.handle(&http::Method::POST, &h, body, &Fake));
    assert!((100..600).contains(&r.status));
    let _ = r.messages();
});
