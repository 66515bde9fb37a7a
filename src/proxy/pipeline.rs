//! One proxied HTTP-profile call from routing to commit (docs/src/reference/modes.md, docs/src/reference/operation-files.md#matching): the ORDER of the stages
//! only — each stage is a function of [`super::call`] that returns a value, and [`handle`]
//! runs them in this order for every call in every mode:
//!
//! 1. [`call::identify`] — the attempt (`super::route`; 401 for an unknown token), its lease
//!    ([`call::check_lease`]), the integration, the operation, the input
//!    ([`call::build_input`]) and the write flag. A lease that is over, or a request that
//!    names no integration, ends the call here;
//! 2. [`call::plan`] — from the mode and whether the attempt pinned a mock of the matched
//!    operation: a [`Plan`] (the mock, the real system, a blocked or simulated write, or a
//!    refusal; the mode rule is [`super::decision::plan_for`]). Every plan but
//!    [`Plan::Mock`] is carried out by `super::forward`;
//! 3. [`call::prepare_mock`] — only for [`Plan::Mock`]: the operation file, input validation,
//!    the pinned revision, its engine, the idempotency key;
//! 4. [`call::run_mocked_with_faults`] — under the attempt's state lock: evaluate, the fault
//!    plan, the one commit, then the delay; a faulted call's answer is then put on the wire
//!    by [`super::answer::faulted`];
//! 5. [`call::commit`] — the one commit of every call, whatever stage or plan ended it.
//!
//! Stages 1–4 return values ([`Plan`], [`call::Prepared`], [`super::decision::Decision`]);
//! only stage 5 commits. MCP tool calls (`super::mcp`) run stages 3–5 with
//! [`crate::profile::Wire::Mcp`].

use std::sync::Arc;

use serde_json::Value;

use super::answer::faulted;
use super::call::{self, CallInfo, Identified, Prepared};
use super::decision::{Decision, Plan};
use super::route;
use crate::app::App;
use crate::http::{to_http, HttpResponse, Request};
use crate::profile::Wire;

/// Run one proxied HTTP-profile call through every stage and answer it.
pub async fn handle(app: Arc<App>, mut req: Request) -> HttpResponse {
    // A path that names no integration may be a Salesforce session's (`route::by_session`).
    let routed =
        route::attempt(&app, &req).and_then(|(a, c)| route::by_session(&app, &mut req, a, c));
    let (attempt, consumed) = match routed {
        Ok(x) => x,
        Err(r) => return to_http(r.response()),
    };
    let integration = req.segments.get(consumed).cloned().unwrap_or_default();
    // `arguments` is set by `identify` once the input is built (always an object);
    // otherwise the raw request's description below.
    let mut info = CallInfo::new(&req, &integration, Value::Null);
    // Stages 1–3 read the attempt's record, borrowed (not held across an await).
    let staged = {
        let record = attempt.read_record();
        match call::identify(&app, &attempt, &record, consumed, &req, &mut info) {
            Err(d) => Staged::Mocked(Err(d)),
            Ok(id) => match call::plan(&app, &record, &id, &info) {
                Plan::Mock => {
                    Staged::Mocked(call::prepare_mock(&app, &record, id, &req, &mut info))
                }
                Plan::Refuse(d) => Staged::Mocked(Err(d)),
                unmocked => Staged::Unmocked(id, unmocked),
            },
        }
    };
    if info.arguments.is_null() {
        info.arguments = req.describe();
    }
    let prepared = match staged {
        Staged::Mocked(p) => p,
        Staged::Unmocked(id, plan) => {
            return super::forward::run(&app, attempt, req, info, id, plan).await
        }
    };
    // The profile a `status` fault answers in: the operation's, or for a call decided
    // before evaluation (a built-in's default answer) the integration's.
    let profile = match &prepared {
        Ok(Prepared {
            wire: Wire::Http(p),
            ..
        }) => Some(p.clone()),
        _ => app
            .integration_for(&attempt, &integration)
            .and_then(|i| i.wire.http().cloned()),
    };
    let limit_info = app
        .integration_for(&attempt, &integration)
        .and_then(|i| i.wire.http().and_then(|p| p.kind()))
        == Some(crate::contract::ProfileKind::Salesforce);
    // A settled static answer goes out as its prebuilt bytes (`super::answer`).
    let shared = |d: &Decision| d.shared.clone();
    let mut answer =
        match call::run_mocked_with_faults(&app, &attempt, info, prepared, true, shared).await {
            Ok((_, None, Some(answer))) => answer.to_http(),
            Ok((response, None, None)) => to_http(response),
            Ok((response, Some(plan), _)) => faulted(&plan, response, profile.as_deref()),
            Err(f) => to_http(f.response),
        };
    if limit_info {
        // Every Salesforce answer says how much of the daily API allowance the attempt used.
        let n = attempt.calls.load(std::sync::atomic::Ordering::Relaxed);
        if let Ok(v) =
            hyper::http::HeaderValue::from_str(&crate::profile::salesforce::defaults::limit_info(n))
        {
            answer.headers_mut().insert("sforce-limit-info", v);
        }
    }
    answer
}

/// Where stages 1–3 left a call: the mock's (prepared, or its decided end), or another plan
/// with what stage 1 identified.
enum Staged<'a> {
    Mocked(Result<Prepared, Box<Decision>>),
    Unmocked(Identified<'a>, Plan),
}
