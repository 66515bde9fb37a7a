//! The two values a proxied call is decided by (STYLE habit 5: decisions, not side effects):
//!
//! - [`Plan`] — what happens to the call, chosen by `super::call::plan` from the mode and
//!   whether the attempt pinned a mock of the matched operation (docs/src/reference/modes.md; the mode rule is
//!   [`plan_for`] and [`unmocked`], the table of `super::forward`): the mock answers,
//!   the real system answers, understudy blocks or simulates the write, or the call is refused
//!   before either (a lease that is over, a request that names nothing).
//! - [`Decision`] — how the call ended, before its evidence is written: the native response,
//!   the recorded result and status, who answered, the state change to commit. Only
//!   `super::call::commit` turns a decision into evidence.
//!
//! - [`Committed`] / [`StoreFailed`] — what `super::call::commit` made of a decision: its
//!   evidence is durable and the response may leave, or the store refused it and the 500
//!   leaves instead.
//!
//! A decision is built for its wire ([`Decision::harness_on`], [`Decision::input_on`]): on MCP
//! a harness error travels as a JSON-RPC error over HTTP 200 and an input error as an
//! `isError: true` tool result, and that is what the evidence records.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::answer::StaticAnswer;
use crate::app::attempt::IdempotentEntry;
use crate::app::{App, Integration};
use crate::config::{Mode, UnmatchedWrites};
use crate::error::{CallError, HarnessCode, HarnessError, InputError};
use crate::http::NativeResponse;
use crate::mock::model::Fault;
use crate::profile::mcp::jsonrpc;
use crate::profile::{self, Profile, Wire};
use crate::records::{EventSource, FaultRecord, ResultStatus};

/// What happens to one identified call (docs/src/reference/modes.md; the table of `super::forward`).
#[derive(Debug, Clone)]
pub enum Plan {
    /// The pinned mock decides (`replay`; `dry-run` and `record-missing` for an operation
    /// the attempt pinned): `super::call::prepare_mock`, then `run_mocked`.
    Mock,
    /// The real system answers (`tag`: marked as test traffic; `capture`: kept for drafts).
    Forward { tag: bool, capture: bool },
    /// An unmocked write the mode does not let out: the profile's native 403.
    Block,
    /// An unmocked write in `dry-run` with `unmatched_writes: simulate`.
    Simulate,
    /// Refused before any mock or upstream: this decision is the call's end, recorded as is.
    Refuse(Box<Decision>),
}

/// How a call ended, before its evidence is written.
#[derive(Debug, Clone)]
pub struct Decision {
    pub response: NativeResponse,
    /// The envelope recorded as the event's `result`.
    pub result: Value,
    /// `ok`, `input_error`, `harness_error`, `replayed`, `forwarded`, `blocked`, `simulated`.
    pub result_status: ResultStatus,
    /// Who answered: the mock (also for refusals, blocked and simulated writes), the real
    /// system, or the real system as tagged test traffic.
    pub source: EventSource,
    pub error: Option<CallError>,
    pub revision: Option<u64>,
    pub variant: Option<String>,
    pub rule: Option<usize>,
    pub delay_ms: u64,
    /// The integration's whole new state, when the call changed it.
    pub new_state: Option<(String, Map<String, Value>)>,
    /// The first response of an idempotent call, to remember once recorded.
    pub remember: Option<((String, String), IdempotentEntry)>,
    /// The definition's fault for this answer (the matched rule's, else the variant's), as
    /// the engine selected it: an input to `crate::operation::fault::decide`, not yet a decision.
    pub fault: Option<Fault>,
    /// The event's `fault` member: the call's answer fails on purpose
    /// (`super::call::run_mocked` sets it with the fault plan).
    pub fault_record: Option<FaultRecord>,
    /// A static result's answer settled for its pinned revision (`super::answer`), shared
    /// instead of copied: then `response` holds only its head (no body) and `result` is
    /// `null` — the wire bytes and the event's `result` JSON are the shared answer's.
    /// [`Decision::unshare`] puts the copies back for a caller that needs them.
    pub shared: Option<Arc<StaticAnswer>>,
    /// A call of the Salesforce default org, answered under the state lock from the org the
    /// attempt's state holds (`super::call::settle_org`): until then `response` is a
    /// placeholder.
    pub org: Option<Box<crate::profile::salesforce::model::Call>>,
    /// The operation key (`<integration>/<operation_id>`) of a built-in operation's default
    /// answer (a Salesforce built-in without a file): decided without evaluation, yet the
    /// attempt's chaos for that key applies to it (`super::call::run_mocked_with_faults`).
    pub chaos: Option<String>,
}

impl Decision {
    /// A call answered with `response`, recorded as its envelope.
    pub fn answered(response: NativeResponse, result_status: ResultStatus) -> Decision {
        Decision {
            result: response.to_envelope(),
            response,
            result_status,
            source: EventSource::Mock,
            error: None,
            revision: None,
            variant: None,
            rule: None,
            delay_ms: 0,
            new_state: None,
            remember: None,
            fault: None,
            fault_record: None,
            shared: None,
            org: None,
            chaos: None,
        }
    }

    /// A decision that shares a settled answer ([`Decision::shared`]) made whole: its
    /// response's body and its result copied from the answer (a faulted answer is built
    /// from them).
    pub fn unshare(&mut self) {
        if let Some(s) = self.shared.take() {
            self.response = s.response.clone();
            self.result = Value::clone(&s.result);
        }
    }

    /// A call that ended in a harness error (docs/src/concepts/errors.md), on an HTTP wire.
    pub fn harness(e: HarnessError) -> Decision {
        let mut d = Decision::answered(profile::harness_response(&e), ResultStatus::HarnessError);
        d.error = Some(CallError::Harness(e));
        d
    }

    /// A harness error on `wire` (on MCP: a JSON-RPC error over HTTP 200).
    pub fn harness_on(wire: &Wire, e: HarnessError) -> Decision {
        let d = Decision::harness(e);
        match wire {
            Wire::Http(_) => d,
            Wire::Mcp => d.for_mcp(),
        }
    }

    /// A call that ended in an input error, in the profile's native shape (docs/src/concepts/errors.md).
    pub fn input(profile: &Profile, e: InputError) -> Decision {
        let mut d = Decision::answered(profile.input_error(&e), ResultStatus::InputError);
        d.error = Some(CallError::Input(e));
        d
    }

    /// An input error on `wire`; on MCP the recorded result is the `isError: true` tool
    /// result the agent sees.
    pub fn input_on(wire: &Wire, e: InputError) -> Decision {
        let Wire::Http(profile) = wire else {
            let result = profile::mcp::input_error_result(&e);
            let mut d = Decision::answered(
                NativeResponse {
                    status: 200,
                    headers: Vec::new(),
                    body: Some(result.clone()),
                },
                ResultStatus::InputError,
            );
            d.result = result;
            d.error = Some(CallError::Input(e));
            return d;
        };
        Decision::input(profile, e)
    }

    /// A call error on `wire`.
    pub fn error_on(wire: &Wire, e: CallError) -> Decision {
        match e {
            CallError::Input(e) => Decision::input_on(wire, e),
            CallError::Harness(e) => Decision::harness_on(wire, e),
        }
    }

    /// A forwarded call: the real answer's status, and `result` (scrubbed) as the evidence.
    pub fn forwarded(status: u16, result: Value, source: EventSource) -> Decision {
        let mut d = Decision::answered(
            NativeResponse {
                status,
                headers: Vec::new(),
                body: None,
            },
            ResultStatus::Forwarded,
        );
        d.result = result;
        d.source = source;
        d
    }

    /// A decision as an MCP call is recorded: a harness error travels as a JSON-RPC error over
    /// HTTP 200, and that error object is the event's `result`.
    pub fn for_mcp(self) -> Decision {
        let mut d = self;
        if let Some(CallError::Harness(e)) = &d.error {
            let code = if e.code == HarnessCode::UnknownTool {
                jsonrpc::INVALID_PARAMS
            } else {
                jsonrpc::INTERNAL_ERROR
            };
            let data = profile::mcp::tools::harness_data(e.code, &e.message);
            d.result = jsonrpc::error(&Value::Null, code, &e.message, Some(data))["error"].clone();
            d.response = NativeResponse {
                status: 200,
                headers: vec![("Understudy-Error".into(), e.code.as_str().into())],
                body: Some(d.result.clone()),
            };
        }
        d
    }

    /// Who answered the call.
    pub fn from(mut self, source: EventSource) -> Decision {
        self.source = source;
        self
    }

    /// The pinned revision (and the variant, unless the decision set one) of the call.
    pub fn at(mut self, revision: Option<u64>, variant: Option<String>) -> Decision {
        self.revision = revision;
        if self.variant.is_none() {
            self.variant = variant;
        }
        self
    }
}

/// The plan of a call outside `replay` (the table of `crate::proxy::forward`): the mock's when the
/// attempt pinned one (`pinned`) in `dry-run` and `record-missing`, else [`unmocked`].
pub fn plan_for(app: &App, pinned: bool, is_write: bool, integ: &Integration) -> Plan {
    if pinned && matches!(app.mode, Mode::DryRun | Mode::RecordMissing) {
        return Plan::Mock;
    }
    unmocked(app, is_write, integ.config.unmatched_writes)
}

/// The mode's rule for a call without a mock.
pub fn unmocked(app: &App, is_write: bool, unmatched_writes: UnmatchedWrites) -> Plan {
    match app.mode {
        Mode::DryRun if is_write => match unmatched_writes {
            UnmatchedWrites::Block => Plan::Block,
            UnmatchedWrites::Simulate => Plan::Simulate,
            UnmatchedWrites::Tag => Plan::Forward {
                tag: true,
                capture: false,
            },
        },
        Mode::Record | Mode::RecordMissing if is_write && !app.forwarding.allow_writes => {
            Plan::Block
        }
        Mode::Record | Mode::RecordMissing => Plan::Forward {
            tag: false,
            capture: true,
        },
        _ => Plan::Forward {
            tag: false,
            capture: false,
        },
    }
}

/// Whether the mode keeps what is forwarded for drafts (`record`, `record-missing`).
pub fn captures(app: &App) -> bool {
    matches!(app.mode, Mode::Record | Mode::RecordMissing)
}

/// The evidence of a committed call.
#[derive(Debug)]
pub struct Committed {
    /// The event's sequence number in its attempt.
    pub sequence: u64,
    /// The answer (the decision's native response).
    pub response: NativeResponse,
    pub delay_ms: u64,
}

/// The store refused (or could not make durable) a call's evidence: the 500
/// (`Understudy-Error: store_error`) to answer instead of anything the call decided.
#[derive(Debug)]
pub struct StoreFailed {
    pub response: NativeResponse,
}
