//! What goes on the wire for a mocked answer: the answer of a static result, settled once per
//! pinned revision (issue 20) — everything about it that does not depend on the call, so that
//! a call which selects it copies no value and serializes nothing of it — and the answer of a
//! faulted HTTP call ([`faulted`]).
//!
//! A static result (no `$input`/`$state`: `crate::mock::eval::StaticResult`) belongs to a
//! compiled revision, which never changes (a reload compiles a new one), so what is derived
//! from it is kept in the result's memo (`super::call::evaluate`'s `settled`, which also checks that
//! the contract and wire are the ones it was settled for): the native response; on an HTTP
//! wire, the response's head and body bytes exactly as [`crate::http::to_http`] builds them
//! (each answer is one clone of them: a small header map and a reference-counted `Bytes`);
//! and the result encoded once as the JSON of the event's `result` member (the store copies
//! it into the event instead of serializing the result again: `crate::store::CallRecord`).

use std::sync::Arc;

use bytes::Bytes;
use hyper::http::Response;
use serde_json::{json, Value};

use crate::error::InputError;
use crate::http::{self, to_http, to_http_with, HttpResponse};
use crate::operation::fault::{FaultAnswer, FaultPlan};
use crate::profile::{NativeResponse, Profile};
use crate::store::EncodedResult;

/// A static result's answer, settled for one contract and wire.
#[derive(Debug)]
pub struct StaticAnswer {
    /// The native response: what a faulted answer is built from, and an MCP wire's.
    pub response: NativeResponse,
    /// On an HTTP wire, what [`crate::http::to_http`] makes of `response`.
    wire: Option<Response<Bytes>>,
    /// The result, shared with the compiled revision.
    pub result: Arc<Value>,
    /// `result` as the event's JSON; `None` when it is too deep to store (the store then
    /// refuses the call's copy of it, as before).
    pub result_json: Option<EncodedResult>,
}

impl StaticAnswer {
    /// Settles `response`, the checked and rendered answer of `result`; `http`: the wire
    /// is an HTTP profile's (its bytes are built now).
    pub fn new(response: NativeResponse, result: Arc<Value>, http: bool) -> StaticAnswer {
        StaticAnswer {
            wire: http.then(|| http::wire_response(response.clone())),
            result_json: EncodedResult::new(&result),
            response,
            result,
        }
    }

    /// Whether a decision shares this answer instead of copying it
    /// (`crate::proxy::decision::Decision::shared`): its HTTP answer and its event's
    /// `result` are prebuilt.
    pub fn shareable(&self) -> bool {
        self.wire.is_some() && self.result_json.is_some()
    }

    /// The response without its body: what a decision that shares this answer carries.
    pub fn head(&self) -> NativeResponse {
        NativeResponse {
            status: self.response.status,
            headers: self.response.headers.clone(),
            body: None,
        }
    }

    /// The HTTP answer: a clone of the prebuilt head and body bytes.
    pub fn to_http(&self) -> HttpResponse {
        match &self.wire {
            Some(w) => http::send_prebuilt(w),
            None => http::to_http(self.response.clone()),
        }
    }
}

/// What goes on the wire for a faulted HTTP call instead of its decided `response`
/// ([`FaultAnswer`]; `crate::http::fault` for the aborts). `profile`: the integration's, for
/// a `status` fault's native error body.
pub fn faulted(
    plan: &FaultPlan,
    response: NativeResponse,
    profile: Option<&Profile>,
) -> HttpResponse {
    use crate::http::fault::{self as wire, Abort};
    match &plan.answer {
        FaultAnswer::Reset => wire::aborted(Abort::Reset),
        FaultAnswer::Close => wire::aborted(Abort::Close),
        FaultAnswer::Hold { ms } => wire::aborted(Abort::Hold { ms: *ms }),
        FaultAnswer::SlowBody { chunks, ms } => {
            to_http_with(response, |b| wire::slow(b, *chunks, *ms))
        }
        FaultAnswer::Truncated => to_http_with(response, wire::truncated),
        FaultAnswer::Status { status, headers } => to_http(fault_status(*status, headers, profile)),
        // `check` refuses MCP kinds on HTTP operations (and chaos specs alike); should one
        // get here, no answer leaves rather than an unfaulted one.
        FaultAnswer::JsonRpcError { .. } | FaultAnswer::StreamCut => wire::aborted(Abort::Close),
    }
}

/// A `status` fault's answer: the profile's native error body (its input-error shape, with
/// the error code it gives that status) at `status`, with the fault's extra headers.
pub fn fault_status(
    status: u16,
    headers: &[(String, String)],
    profile: Option<&Profile>,
) -> NativeResponse {
    let reason = hyper::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("error");
    let mut e = InputError::new(format!(
        "{status} {reason} (a fault injected by understudy)"
    ));
    e.status = status;
    let mut r = match profile {
        Some(p) => p.input_error(&e),
        None => NativeResponse {
            status,
            headers: Vec::new(),
            body: Some(json!({"error": {"message": e.message}})),
        },
    };
    r.status = status;
    r.headers.extend(headers.iter().cloned());
    r
}
