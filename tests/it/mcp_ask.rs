//! Server-to-client requests end to end (docs/src/reference/mcp.md, `ask_client`): the official Rust SDK (rmcp)
//! as a real client that answers `elicitation/create` — the tools/call answer streams, the
//! request travels on it, the client's POSTed answer resolves it, the call is evaluated with
//! `$response` and `source: "response"`, and the answer is in the call's evidence.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::support::{Project, Server};

fn ask_name() -> Value {
    let schema =
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    json!({
        "operation_id": "ask_name",
        "description": "Asks the user for a name",
        "annotations": {"readOnlyHint": true},
        "input_schema": {"type": "object", "properties": {"why": {"type": "string"}}, "required": ["why"]},
        "output_schema": {"type": "object", "properties": {"action": {"type": "string"}, "name": {"type": "string"}}},
        "mock": {"schema_version": 1, "default_variant": "ok", "variants": {"ok": {
            "ask_client": {"method": "elicitation/create",
                           "params": {"message": {"$input": "why"}, "requestedSchema": schema}},
            "result": {"action": {"$response": "action"}},
            "rules": [{"when": [{"source": "response", "path": "action", "op": "eq", "value": "accept"}],
                       "result": {"action": "accept", "name": {"$response": "content.name"}}}]}},
        "examples": [{"variant": "ok",
                      "input": {"why": "w", "$response": {"action": "accept", "content": {"name": "Ann"}}},
                      "expected": {"action": "accept", "name": "Ann"}}]}
    })
}

fn project() -> Project {
    let p = Project::new(&[("tools", "mcp")]);
    p.write_config(json!({ "integrations": {
        "tools": { "profile": "mcp", "operations": "mocks/tools" }
    } }));
    p.op("tools", ask_name());
    p
}

/// A client that answers every elicitation with `action` (and a name when accepting).
#[derive(Clone)]
struct Answers {
    action: ElicitationAction,
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Answers {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.asked.lock().unwrap().push(message.clone());
        }
        Ok(match self.action.clone() {
            ElicitationAction::Accept => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Ann"}))
            }
            a => ElicitResult::new(a),
        })
    }

    fn get_info(&self) -> ClientConfig {
        let mut c = ClientConfig::default();
        c.capabilities = ClientCapabilities::builder().enable_elicitation().build();
        c
    }
}

async fn client(
    url: String,
    action: ElicitationAction,
) -> (RunningService<RoleClient, Answers>, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let handler = Answers {
        action,
        asked: asked.clone(),
    };
    let c = handler
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            url,
        ))
        .await
        .expect("initialize");
    (c, asked)
}

fn call(why: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("ask_name")
        .with_arguments(json!({"why": why}).as_object().unwrap().clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_answers_an_elicitation_and_the_answer_fills_the_result() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let (c, asked) = client(s.url(&a.base("tools")), ElicitationAction::Accept).await;
    let r = c.call_tool(call("Who are you?")).await.expect("tools/call");
    assert_eq!(asked.lock().unwrap().as_slice(), ["Who are you?"]);
    assert_eq!(r.is_error, Some(false));
    assert_eq!(
        r.structured_content,
        Some(json!({"action": "accept", "name": "Ann"}))
    );
    c.cancel().await.unwrap();

    let ev = s.evidence(&a.id).await;
    let e = &ev["tool_events"][0];
    assert_eq!(e["operation_id"], "ask_name");
    assert_eq!(e["result_status"], "ok");
    assert_eq!(e["rule"], 0);
    assert_eq!(
        e["arguments"],
        json!({"why": "Who are you?", "$response": {"action": "accept", "content": {"name": "Ann"}}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decline_is_an_answer_the_rules_select_on() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let (c, _) = client(s.url(&a.base("tools")), ElicitationAction::Decline).await;
    let r = c.call_tool(call("Who?")).await.expect("tools/call");
    assert_eq!(r.structured_content, Some(json!({"action": "decline"})));
    c.cancel().await.unwrap();
    let ev = s.evidence(&a.id).await;
    assert_eq!(ev["tool_events"][0]["result_status"], "ok");
    assert_eq!(ev["tool_events"][0]["rule"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_capability_gets_an_input_error() {
    let p = project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let c = ()
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            s.url(&a.base("tools")),
        ))
        .await
        .expect("initialize");
    let r = c.call_tool(call("Who?")).await.expect("tools/call");
    assert_eq!(r.is_error, Some(true));
    let text = serde_json::to_value(&r.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("`elicitation` capability"), "{text}");
    c.cancel().await.unwrap();
    let ev = s.evidence(&a.id).await;
    let e = &ev["tool_events"][0];
    assert_eq!(e["result_status"], "input_error");
    assert!(
        e["arguments"]["$response"]["unavailable"].is_string(),
        "{e}"
    );
}
