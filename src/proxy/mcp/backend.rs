//! The call stages behind one MCP request (one attempt, one integration): the
//! [`McpBackend`] the dialect (`crate::profile::mcp`) calls for tools, resources, prompts and
//! notifications, running `crate::proxy::call`'s stages on [`Wire::Mcp`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use serde_json::Value;

use crate::app::attempt::Attempt;
use crate::app::{App, Integration};
use crate::contract::ResultForm;
use crate::error::{CallError, HarnessCode, HarnessError, InputError};
use crate::http::Request;
use crate::mock::model::RESPONSE_MEMBER;
use crate::operation::fault::FaultPlan;
use crate::operation::Operation;
use crate::profile::mcp::ask::{Asked, Asker};
use crate::profile::mcp::{tool_is_write, McpBackend, ToolCallOutcome, ToolInfo};
use crate::profile::Wire;
use crate::proxy::call::{self, CallInfo};
use crate::proxy::decision::{Decision, StoreFailed};
use crate::records::AttemptRecord;

/// An operation's write flag: its `write`, else the MCP rule (a write unless
/// `readOnlyHint: true`).
pub fn write_flag(op: &Operation) -> bool {
    op.op
        .write
        .unwrap_or_else(|| tool_is_write(op.op.annotations.as_ref()))
}

/// A tool of the integration as `tools/list` shows it.
pub fn tool_info(op: &Operation) -> ToolInfo {
    let o = &op.op;
    ToolInfo {
        name: o.operation_id.clone(),
        title: o.title.clone(),
        description: o.description.clone(),
        input_schema: o.input_schema.as_ref().clone(),
        output_schema: Some(o.output_schema.as_ref().clone()),
        annotations: o.annotations.clone(),
        result_form: o.result_form.unwrap_or(ResultForm::Structured),
    }
}

/// The pipeline behind one MCP request: one attempt, one integration.
pub(super) struct Backend<'a> {
    pub(super) app: &'a App,
    pub(super) attempt: &'a Attempt,
    pub(super) record: &'a AttemptRecord,
    pub(super) integ: &'a Integration,
    pub(super) req: &'a Request,
    /// The 500 to answer instead of the MCP answer when a call could not be recorded.
    pub(super) store_failure: Mutex<Option<StoreFailed>>,
    /// What the last call's variant declares to send before its result (docs/src/reference/mcp.md).
    pub(super) notifications: Mutex<Vec<Value>>,
    /// The last call's fault ([`call::plan_fault`]): `serve` puts it on the wire instead
    /// of the dialect's answer ([`faulted`]).
    pub(super) fault: Mutex<Option<FaultPlan>>,
    /// The integration's state before and after the last call, when it changed and the
    /// integration serves resources (for `notifications/resources/updated`).
    pub(super) state_change: Mutex<Option<(StateMap, StateMap)>>,
}

type StateMap = serde_json::Map<String, Value>;

impl McpBackend for Backend<'_> {
    fn tools(&self) -> Vec<ToolInfo> {
        self.integ
            .operations
            .iter()
            .filter(|op| super::extras::is_tool(op))
            .map(|op| tool_info(op))
            .collect()
    }

    fn catalog(&self) -> crate::profile::mcp::catalog::Catalog {
        super::extras::catalog(self.integ)
    }

    fn take_notifications(&self) -> Vec<Value> {
        std::mem::take(&mut *self.notifications.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn updated_resources(&self, subscribed: &[String]) -> Vec<String> {
        let Some((before, after)) = self
            .state_change
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return Vec::new();
        };
        let catalog = self.catalog();
        subscribed
            .iter()
            .filter(|uri| {
                crate::profile::mcp::catalog::resolve(&catalog, uri)
                    .and_then(|(name, _)| self.integ.operation(&name))
                    .is_some_and(|op| {
                        let paths = super::extras::state_paths(op);
                        super::extras::state_differs(&paths, &before, &after)
                    })
            })
            .cloned()
            .collect()
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
    ) -> Pin<Box<dyn Future<Output = ToolCallOutcome> + Send + 'a>> {
        Box::pin(self.call(name, arguments, None))
    }

    fn call_tool_asking<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
        asker: &'a dyn Asker,
    ) -> Pin<Box<dyn Future<Output = ToolCallOutcome> + Send + 'a>> {
        Box::pin(self.call(name, arguments, Some(asker)))
    }

    fn server_name(&self) -> String {
        format!("understudy-{}", self.integ.name())
    }
}

impl Backend<'_> {
    /// One tool call through the pipeline stages (see the module doc); with `asker`, the
    /// variant's `ask_client` request is sent first ([`Backend::ask_first`]).
    async fn call(
        &self,
        name: &str,
        arguments: Value,
        asker: Option<&dyn Asker>,
    ) -> ToolCallOutcome {
        let op = self.integ.operation(name).cloned();
        let mut info = CallInfo::new(self.req, self.integ.name(), arguments.clone());
        info.operation_id = Some(name.to_string());
        // A tool with no operation is answered `unknown_tool` here and reaches nothing: it is
        // not a write (only the forward paths treat an unknown tool as one, to keep it away
        // from the real system).
        info.is_write = op.as_deref().is_some_and(write_flag);
        let prepared = match op {
            Some(op) => call::prepare_operation(
                self.app,
                self.record,
                self.integ,
                op,
                arguments,
                self.req,
                &mut info,
            ),
            None => Err(Box::new(Decision::harness_on(
                &Wire::Mcp,
                HarnessError::new(HarnessCode::UnknownTool, self.unknown_tool_message(name)),
            ))),
        };
        let prepared = match prepared {
            Ok(p) => match self.ask_first(p, asker, &mut info).await {
                Ok(Ok(p)) => Ok(p),
                // 2026-07-28: the client answers on a retry; this round is not a call.
                Ok(Err(input_required)) => return ToolCallOutcome::InputRequired(input_required),
                Err(d) => Err(d),
            },
            Err(d) => Err(d),
        };
        let integ = self.integ;
        let notifications = &self.notifications;
        let seen = |d: &Decision| {
            if let (Some(op), None) = (integ.operation(name), &d.error) {
                *notifications.lock().unwrap_or_else(|p| p.into_inner()) =
                    super::extras::declared_notifications(op, d.variant.as_deref(), d.rule);
            }
            outcome_of(d)
        };
        let serves_resources = self
            .integ
            .operations
            .iter()
            .any(|op| !super::extras::is_tool(op));
        let before = match serves_resources {
            true => Some(self.integ_state().await),
            false => None,
        };
        let ran =
            call::run_mocked_with_faults(self.app, self.attempt, info, prepared, true, seen).await;
        if let Some(before) = before {
            let after = self.integ_state().await;
            if before != after {
                *self.state_change.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((before, after));
            }
        }
        match ran {
            Ok((_, plan, outcome)) => {
                if plan.is_some() {
                    *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = plan;
                }
                outcome
            }
            Err(f) => {
                *self.store_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
                // The dialect's rendering of this outcome is discarded: `handle` answers the 500.
                ToolCallOutcome::Harness(HarnessError::new(
                    HarnessCode::NoMock,
                    "the call could not be recorded, so it was not answered",
                ))
            }
        }
    }

    /// The server-to-client requests of the call's variant (`ask_client`, docs/src/reference/mcp.md), sent
    /// before evaluation: their params render against the input and the pre-call state; the
    /// client's answers ([`Asked::evidence`]: the one answer, or an object by key) go into the
    /// input's reserved member `$response` (read by `{"$response": path}` and
    /// `source: "response"`) and into the event's `arguments` under the same member. A client
    /// that cannot be asked, answers a JSON-RPC error or does not answer within the bound
    /// makes the call an input error (the agent's side did not answer; the mock is fine). A
    /// `$response` member the client sent itself is dropped. `Ok(Err(result))`: a 2026-07-28
    /// `InputRequiredResult` to answer instead — nothing is evaluated or recorded.
    async fn ask_first(
        &self,
        mut p: call::Prepared,
        asker: Option<&dyn Asker>,
        info: &mut CallInfo,
    ) -> Result<Result<call::Prepared, Value>, Box<Decision>> {
        if let Value::Object(m) = &mut p.input {
            m.remove(RESPONSE_MEMBER);
        }
        let Some(asker) = asker else {
            return Ok(Ok(p));
        };
        let state = {
            let s = self.attempt.lock.lock().await;
            s.state.get(&p.op.integration).cloned().unwrap_or_default()
        };
        let requests = match p.engine.ask(p.variant.as_deref(), &p.input, &state) {
            None => return Ok(Ok(p)),
            Some(Ok(r)) => r,
            Some(Err(e)) => {
                return Err(Box::new(
                    Decision::error_on(&p.wire, e).at(Some(p.revision), p.variant.clone()),
                ))
            }
        };
        let answers = match asker.ask(&requests).await {
            Asked::InputRequired(result) => return Ok(Err(result)),
            Asked::Answers(a) => a,
        };
        let recorded = Asked::evidence(&answers, requests.single);
        if let Value::Object(m) = &mut info.arguments {
            m.insert(RESPONSE_MEMBER.into(), recorded.clone());
        }
        match Asked::problem(&answers, &requests) {
            None => {
                if let Value::Object(m) = &mut p.input {
                    m.insert(RESPONSE_MEMBER.into(), recorded);
                }
                Ok(Ok(p))
            }
            Some(problem) => Err(Box::new(
                Decision::input_on(&p.wire, InputError::new(problem))
                    .at(Some(p.revision), p.variant.clone()),
            )),
        }
    }

    /// The integration's state now.
    async fn integ_state(&self) -> StateMap {
        let s = self.attempt.lock.lock().await;
        s.state.get(self.integ.name()).cloned().unwrap_or_default()
    }

    fn unknown_tool_message(&self, name: &str) -> String {
        let known: Vec<&str> = self.integ.operations.iter().map(|o| o.id()).collect();
        if known.is_empty() {
            format!(
                "Unknown tool: {name} (`{}` has no tools: add operation files to {})",
                self.integ.name(),
                self.integ.config.operations.display()
            )
        } else {
            format!(
                "Unknown tool: {name} (the tools of `{}`: {})",
                self.integ.name(),
                known.join(", ")
            )
        }
    }
}

/// What the dialect is told about a decided call.
pub fn outcome_of(d: &Decision) -> ToolCallOutcome {
    match &d.error {
        None => ToolCallOutcome::Ok(d.result.clone()),
        Some(CallError::Input(e)) => ToolCallOutcome::InputError(e.clone()),
        Some(CallError::Harness(e)) if e.code == HarnessCode::UnknownTool => {
            ToolCallOutcome::UnknownTool
        }
        Some(CallError::Harness(e)) => ToolCallOutcome::Harness(e.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::HarnessError;
    use crate::profile::mcp::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS};
    use serde_json::json;

    #[test]
    fn harness_decisions_travel_as_json_rpc_errors() {
        let d = Decision::harness(HarnessError::new(
            HarnessCode::UnknownTool,
            "Unknown tool: x",
        ))
        .for_mcp();
        assert_eq!(d.response.status, 200);
        assert_eq!(d.result["code"], INVALID_PARAMS);
        assert_eq!(
            d.result["data"]["understudy_error"]["code"],
            json!("unknown_tool")
        );
        assert!(matches!(outcome_of(&d), ToolCallOutcome::UnknownTool));
        let d = Decision::harness(HarnessError::new(HarnessCode::NoMock, "m")).for_mcp();
        assert_eq!(d.result["code"], INTERNAL_ERROR);
        assert!(matches!(outcome_of(&d), ToolCallOutcome::Harness(_)));
    }
}
