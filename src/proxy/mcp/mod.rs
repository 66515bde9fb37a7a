//! The one MCP endpoint of `mcp` integrations, wired into the server (docs/src/reference/mcp.md#the-endpoint): the bridge
//! between the MCP dialect ([`crate::profile::mcp`], which owns the wire and renders every
//! answer) and the call's stages ([`super::call`], which own attempts, pins, state and
//! evidence). A POST body is parsed once, here ([`Posted`]), and the parse travels.
//!
//! | module | owns |
//! |---|---|
//! | this one | routing to the endpoint, the lease, the replay endpoint's serving |
//! | [`backend`] | the [`McpBackend`](crate::profile::mcp::McpBackend) running the call's stages on [`Wire::Mcp`] |
//! | [`body`] | the dialect's answer on the wire, and a faulted answer |
//! | [`forward`] | the endpoint outside `replay`: messages forwarded to the real MCP server |
//! | `tool_call` | one `tools/call` outside `replay`: mocked, forwarded, blocked or simulated |
//! | [`extras`] | resources, prompts and the rest of MCP beyond tools (docs/src/reference/mcp.md) |
//!
//! - **Outside `replay`** an integration with an `upstream` is proxied to the real MCP server
//!   ([`forward`]) while the attempt's lease is active; without one, or after the
//!   lease, it is answered here as in `replay`. A request carrying [`UPSTREAM_HEADER`] (from
//!   `understudy mcp wrap` joined to this server: the stdio server it wraps) is proxied to
//!   that loopback URL instead ([`joined_upstream`]).
//! - **Routing**: a request whose path is exactly an `mcp` integration's base — `/<integration>`
//!   or `/~<token>/<integration>`, with or without a trailing slash, or the upstream's own
//!   endpoint URL through the forward proxy — is this module's ([`is_endpoint`]); the attempt
//!   is resolved as for every call (path token, `Understudy-Attempt` header or proxy
//!   credentials, else the default attempt; an unknown token is the same 401 as elsewhere). Any other path under an `mcp` integration goes through the HTTP call's order and
//!   is an `unmatched_request` harness error naming the endpoint.
//! - **One [`McpEndpoint`] per (attempt, integration)** (`crate::app::endpoints::Endpoints`), created on first use:
//!   sessions belong to one attempt (a session id of one attempt is unknown under another).
//!   The endpoints of an attempt whose lease is over are forgotten when it is next addressed,
//!   or by `Endpoints::forget_attempt` when the attempt ends.
//! - **Tools** (`McpBackend::tools`): every operation file of the integration, in file-name
//!   order, as `ToolInfo` (name = operation_id, title, description, input/output schema,
//!   annotations, result form). A tool without a pinned mock is still listed (docs/src/reference/operation-files.md: it is
//!   known); calling it is the harness error `no_mock`.
//! - **Calls** (`McpBackend::call_tool`) run the call's own stages with
//!   [`Wire::Mcp`]: [`call::prepare_operation`] (input = the `arguments`, input
//!   validation, the pin, `stale_contract`, the engine, the idempotency key) →
//!   [`call::run_mocked_with_faults`] (evaluate under the attempt's state lock, shared with HTTP calls
//!   of every integration of the attempt → [`call::commit`] → the delay after the lock is
//!   released). The event's `operation_id` is the tool name, `arguments` the
//!   arguments, `result` the mock's result (for an input error, the `isError: true` tool result
//!   the agent saw; for a harness error, the JSON-RPC `error` object), `http_status` 200 (MCP
//!   answers are JSON-RPC over HTTP 200), `is_write` the operation's `write` or the MCP rule
//!   ([`tool_is_write`]). An unknown tool is recorded as the harness error `unknown_tool`.
//! - **Before the dialect**: a POST carrying a JSON-RPC request after the attempt's lease is
//!   recorded as the harness error `lease_expired` and answered with [`harness_reply`]
//!   (HTTP 200, JSON-RPC error -32603, `Understudy-Error: lease_expired`). A store failure
//!   while recording a tool call answers HTTP 500 `store_error` instead of any MCP answer: an
//!   unrecorded call is never answered.
//! - **Asking the client** (docs/src/reference/mcp.md, a variant's `ask_client`): a `tools/call`, `prompts/get`
//!   or `resources/read` POST runs in its own task; when its variant asks, in the session era
//!   the endpoint sends the head of a streaming SSE answer early
//!   (`McpEndpoint::handle_streaming`) and [`Backend`](backend) waits for the client's answers before
//!   evaluating: they are the input's `$response` member and the event's
//!   `arguments["$response"]`; a client that cannot or does not answer makes the call an
//!   input error. Once the head is out, a store failure can no longer be a 500: the stream
//!   ends with the JSON-RPC error instead. In 2026-07-28 the asker answers `input_required`
//!   until a retry carries every answer (`ToolCallOutcome::InputRequired`: not a call,
//!   nothing recorded); the retry is then the one call.
//! - **Resource updates**: when the integration serves resources, the state before and after
//!   each call is compared, and `McpBackend::updated_resources` names the subscribed
//!   resources whose mock reads a state path that changed.
//! - **SSE answers** are written one event per body frame; the body yields to the connection
//!   after each event, so each is flushed on its own (no `Content-Length`).

pub mod backend;
pub mod body;
pub mod extras;
pub mod forward;
mod tool_call;

use std::future::Future;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hyper::http::{Method, Response, StatusCode};
use serde_json::{json, Value};

use self::backend::{write_flag, Backend};
use self::body::{faulted, mcp_response};
use self::forward::{forward_plain, session_of, Keep, PlainCapture, Sent};
use self::tool_call::tools_call;
use super::call::{self, CallInfo};
use super::decision::{self as decision, Decision};
use super::route;
use crate::app::attempt::Attempt;
use crate::app::{App, Integration};
use crate::author::record::{self, ToolOutcome};
use crate::config::Mode;
use crate::error::{CallError, HarnessCode, HarnessError};
use crate::http::{full, to_http, HttpResponse, Request};
use crate::profile::mcp::jsonrpc::{self, classify, Message, Posted, INVALID_REQUEST};
use crate::profile::mcp::{harness_reply_to, tool_is_write, McpEndpoint};
use crate::profile::Wire;
use crate::proxy::forward::capture::Capture;
use crate::proxy::forward::send::rest_of;

/// Whether `req` addresses the endpoint of an `mcp` integration: its path, after an optional
/// `~<token>` segment, is exactly the integration's name.
pub fn is_endpoint(app: &App, req: &Request) -> bool {
    // As in `route::attempt`: no path token through the forward proxy.
    let token = req.via_proxy.is_none() && req.segments.first().is_some_and(|s| s.starts_with('~'));
    let i = usize::from(token);
    req.segments.len() == i + 1
        && app
            .integration(&req.segments[i])
            .is_some_and(|g| matches!(g.wire, Wire::Mcp))
}

/// Answer one request to an MCP endpoint (see the module doc). Outside `replay`, an
/// integration with an `upstream` whose attempt's lease is active is the transparent proxy's
/// ([`forward`]). A POST body is parsed here, once ([`Posted`]), and that parse travels to
/// every stage that reads the message. `otherwise` answers a request that turned out to
/// address no endpoint (its path named no integration of the attempt): the HTTP call's order,
/// wired by `super::handle`.
pub async fn handle<F, Fut>(app: Arc<App>, req: Request, otherwise: F) -> HttpResponse
where
    F: FnOnce(Arc<App>, Request) -> Fut + Send + 'static,
    Fut: Future<Output = HttpResponse> + Send,
{
    let (attempt, consumed) = match route::attempt(&app, &req) {
        Ok(x) => x,
        Err(r) => return to_http(r.response()),
    };
    let Some(integ) = req
        .segments
        .get(consumed)
        .and_then(|n| app.integration_for(&attempt, n))
    else {
        // Not an endpoint after all (the path named no integration): the HTTP order says so.
        return otherwise(app.clone(), req).await;
    };
    let method = Method::from_bytes(req.method.as_bytes()).unwrap_or(Method::GET);
    let posted = if method == Method::POST {
        Posted::parse(&req.body)
    } else {
        Posted::none()
    };
    let joined = match joined_upstream(&req) {
        Ok(u) => u,
        Err(msg) => {
            let body = jsonrpc::error(&Value::Null, INVALID_REQUEST, &msg, None);
            return Response::builder()
                .status(StatusCode::BAD_REQUEST)
                .header("content-type", "application/json")
                .body(full(body.to_string()))
                .expect("static response");
        }
    };
    let lease = call::check_lease(&app, &attempt.read_record());
    if app.mode != Mode::Replay
        && (integ.config.upstream.is_some() || joined.is_some())
        && lease.is_ok()
    {
        let mut integ = integ.clone();
        if let Some(u) = joined {
            integ.config.upstream = Some(u);
        }
        return outside_replay(app.clone(), attempt, consumed, integ, req, &posted).await;
    }
    let active = lease.is_ok();
    if let Err(decision) = lease {
        app.mcp.forget_attempt(&attempt.id);
        if method == Method::POST {
            if let Some(message) = request_message(&posted) {
                return after_lease(&app, &attempt, integ, &req, &posted, message, *decision).await;
            }
        }
    }
    if !(active && method == Method::POST && may_ask(&posted)) {
        return serve(&app, &attempt, integ, &req, &posted, active, None).await;
    }
    // A call may ask the client something first (docs/src/reference/mcp.md): it runs in its own task, so
    // that the head of a streaming answer can go out while the call waits for the answer.
    let name = integ.name().to_string();
    let (early_tx, early_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let Some(integ) = app.integration_for(&attempt, &name) else {
            return otherwise(app.clone(), req).await;
        };
        serve(&app, &attempt, integ, &req, &posted, true, Some(early_tx)).await
    });
    match early_rx.await {
        Ok(head) => mcp_response(head),
        Err(_) => task.await.unwrap_or_else(|_| {
            Response::builder()
                .status(StatusCode::INTERNAL_SERVER_ERROR)
                .body(full(Bytes::new()))
                .expect("static response")
        }),
    }
}

/// The header by which `understudy mcp wrap`, joined to a running server, names the stdio
/// server it started (its loopback bridge) as the integration's upstream for this request.
pub const UPSTREAM_HEADER: &str = "understudy-mcp-upstream";

/// The upstream a joined `understudy mcp wrap` names ([`UPSTREAM_HEADER`]): outside `replay`
/// the request is forwarded there instead of the integration's `upstream`. Only from a
/// loopback peer (not through the forward proxy), and only a loopback `http://` URL: the
/// header can never send a call off the machine. `Err`: the header is there but refused.
fn joined_upstream(req: &Request) -> Result<Option<String>, String> {
    let Some(v) = req.headers.get(UPSTREAM_HEADER) else {
        return Ok(None);
    };
    let refuse = |why: &str| {
        Err(format!(
            "Invalid request: the {UPSTREAM_HEADER} header (sent by `understudy mcp wrap`) {why}"
        ))
    };
    if req.via_proxy.is_some() || !req.peer.ip().is_loopback() {
        return refuse("is taken only from a loopback client, not through the forward proxy");
    }
    let Some(url) = v.to_str().ok().map(str::trim) else {
        return refuse("is not text");
    };
    let host = url
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .and_then(|hp| hp.rsplit_once(':'))
        .filter(|(_, port)| port.parse::<u16>().is_ok())
        .map(|(h, _)| h);
    match host {
        Some("127.0.0.1" | "[::1]" | "localhost") => Ok(Some(url.to_string())),
        _ => refuse("must be http://127.0.0.1:PORT/… (the wrapped server's loopback bridge)"),
    }
}

/// Answer one request to an MCP endpoint outside `replay` ([`forward`]'s module doc):
/// [`handle`] hands it an integration with an `upstream` and an attempt whose lease
/// is active.
async fn outside_replay(
    app: Arc<App>,
    attempt: Arc<Attempt>,
    consumed: usize,
    integ: Integration,
    req: Request,
    posted: &Posted,
) -> HttpResponse {
    let rest = &rest_of(&req, consumed);
    // The one parse of the JSON-RPC message, made by the endpoint (`super::handle`; not
    // `Request::json`: the dialect's bound on nesting is not applied to what only passes
    // through).
    let message = posted.value();
    // The DNS-rebinding defence of the replay endpoint holds here too: understudy is the
    // local server the agent talks to, and the real server only ever sees its own Host.
    if !crate::profile::mcp::http::origin_allowed(&req.headers, &[]) {
        let body = jsonrpc::error(
            &Value::Null,
            jsonrpc::TRANSPORT_ERROR,
            "Forbidden: Origin is not allowed",
            None,
        );
        return Response::builder()
            .status(StatusCode::FORBIDDEN)
            .header("content-type", "application/json")
            .body(full(body.to_string()))
            .expect("static response");
    }
    // A request does not overtake the session's `GET` stream opened before it (the server
    // may send on that stream what this request makes it ask: `OpeningStreams`).
    if req.method == "POST" {
        app.forwarding.opening.settled(&session_of(&req)).await;
    }
    let sent = Sent {
        rest,
        message,
        posted,
    };
    let capturing = decision::captures(&app);
    let method_of = |v: &Value| v.get("method").and_then(Value::as_str).map(str::to_string);
    match message {
        Some(m @ Value::Object(o)) if o.contains_key("id") => match method_of(m).as_deref() {
            Some("tools/call") => tools_call(app.clone(), attempt, &integ, req, sent, o).await,
            Some(method) => {
                let capture =
                    (capturing && record::MCP_CAPTURED.contains(&method)).then(|| PlainCapture {
                        capture: Capture::new(&app, &integ, None, String::new()),
                        method: method.to_string(),
                        params: record::stable_params(o.get("params")),
                        id: o.get("id").cloned().unwrap_or(Value::Null),
                    });
                let keep = Keep {
                    learn: method == "tools/list",
                    capture,
                    ..Keep::default()
                };
                forward_plain(app.clone(), attempt, &integ, req, sent, keep).await
            }
            None => {
                // The client's answer to a request of the server (elicitation, sampling): kept
                // for the capture of the tool call that asked, before the server can see it.
                if let (true, Some(mut answer)) = (capturing, ToolOutcome::of_response(m)) {
                    app.store.scrubber().json(answer.value_mut());
                    app.forwarding.recorder.keep_answer(
                        integ.name(),
                        &session_of(&req),
                        &o["id"],
                        answer,
                    );
                }
                forward_plain(app.clone(), attempt, &integ, req, sent, Keep::default()).await
            }
        },
        Some(Value::Array(items))
            if items
                .iter()
                .any(|i| method_of(i).as_deref() == Some("tools/call")) =>
        {
            let msg = format!(
                "understudy does not forward a batch holding tools/call in {} mode: send each tools/call as its own request",
                app.mode
            );
            let body = jsonrpc::error(&Value::Null, INVALID_REQUEST, &msg, None);
            Response::builder()
                .status(StatusCode::BAD_REQUEST)
                .header("content-type", "application/json")
                .body(full(body.to_string()))
                .expect("static response")
        }
        _ => {
            // A `GET` stream of a session: the server may ask the client things on it.
            let get = req.method == "GET";
            let session = session_of(&req);
            let keep = Keep {
                watch: (capturing && get).then(|| session.clone()),
                opening: (get && !session.is_empty())
                    .then(|| app.forwarding.opening.open(&session)),
                ..Keep::default()
            };
            forward_plain(app.clone(), attempt, &integ, req, sent, keep).await
        }
    }
}

/// Whether a POST body is a single request that may ask the client something first
/// (`tools/call`, `prompts/get`, `resources/read`).
fn may_ask(posted: &Posted) -> bool {
    posted.value().is_some_and(|v| {
        v.get("method")
            .and_then(Value::as_str)
            .is_some_and(|m| crate::profile::mcp::mrtr::SUPPORTED.contains(&m))
    })
}

/// Answer one request from the replay endpoint of (attempt, integration); `early` as in
/// [`McpEndpoint::handle_streaming`].
async fn serve(
    app: &Arc<App>,
    attempt: &Arc<Attempt>,
    integ: &Integration,
    req: &Request,
    posted: &Posted,
    active: bool,
    early: Option<crate::profile::mcp::ask::Early>,
) -> HttpResponse {
    let method = Method::from_bytes(req.method.as_bytes()).unwrap_or(Method::GET);
    let record = attempt.record();
    let endpoint = if active {
        app.mcp.get(&attempt.id, integ)
    } else {
        // Notifications, DELETE, GET… of an attempt that is over: answered by a throwaway
        // endpoint that knows no session.
        Arc::new(McpEndpoint::new(integ.config.mcp_sse))
    };
    let backend = Backend {
        app,
        attempt,
        record: &record,
        integ,
        req,
        store_failure: Mutex::new(None),
        notifications: Mutex::new(Vec::new()),
        fault: Mutex::new(None),
        state_change: Mutex::new(None),
    };
    let answer = endpoint
        .handle_posted(&method, &req.headers, posted, &backend, early)
        .await;
    let failed = backend
        .store_failure
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    let fault = backend
        .fault
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    match (failed, fault) {
        (Some(f), _) => to_http(f.response),
        (None, Some(plan)) => {
            let id = posted.value().and_then(|v| v.get("id").cloned());
            faulted(&plan, answer, id.unwrap_or(Value::Null))
        }
        (None, None) => mcp_response(answer),
    }
}

/// The JSON-RPC message of a POST body that is neither a notification nor a response (a
/// request, a batch, or something the dialect would refuse): `None` for notifications and
/// responses, which an attempt that is over still acknowledges.
fn request_message(posted: &Posted) -> Option<Value> {
    let v = posted.value().cloned().unwrap_or(Value::Null);
    match classify(&v) {
        Ok(Message::Notification { .. }) | Ok(Message::Response(_)) => None,
        _ => Some(v),
    }
}

/// A request after the attempt's lease: recorded as `lease_expired`, answered as MCP.
async fn after_lease(
    app: &App,
    attempt: &Attempt,
    integ: &Integration,
    req: &Request,
    posted: &Posted,
    message: Value,
    decision: Decision,
) -> HttpResponse {
    let err = match &decision.error {
        Some(CallError::Harness(e)) => e.clone(),
        _ => HarnessError::new(HarnessCode::LeaseExpired, "the attempt's lease is over"),
    };
    let (operation_id, arguments) = match message.get("method").and_then(Value::as_str) {
        Some("tools/call") => (
            message["params"]["name"].as_str().map(str::to_string),
            message["params"]
                .get("arguments")
                .cloned()
                .unwrap_or_else(|| json!({})),
        ),
        _ => (
            None,
            json!({ "method": message.get("method"), "params": message.get("params") }),
        ),
    };
    let is_write = match operation_id.as_deref().and_then(|n| integ.operation(n)) {
        Some(op) => write_flag(op),
        None => operation_id.is_some() && tool_is_write(None),
    };
    let mut info = CallInfo::new(req, integ.name(), arguments);
    info.operation_id = operation_id;
    info.is_write = is_write;
    let d = Box::new(decision.for_mcp());
    if let Err(f) = call::run_mocked(app, attempt, info, Err(d), |_| ()).await {
        return to_http(f.response);
    }
    mcp_response(harness_reply_to(posted, &err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::{HeaderMap, HeaderValue};
    use std::net::SocketAddr;

    fn req(peer: &str, upstream: Option<&str>) -> Request {
        let mut h = HeaderMap::new();
        if let Some(u) = upstream {
            h.insert(UPSTREAM_HEADER, HeaderValue::from_str(u).unwrap());
        }
        let peer: SocketAddr = peer.parse().unwrap();
        Request::new(
            "POST",
            "/child",
            None,
            h,
            Bytes::new(),
            peer,
            std::time::Instant::now(),
        )
    }

    #[test]
    fn a_joined_wrap_names_only_a_loopback_upstream_from_loopback() {
        assert_eq!(joined_upstream(&req("127.0.0.1:5000", None)), Ok(None));
        let ok = "http://127.0.0.1:41234/mcp";
        assert_eq!(
            joined_upstream(&req("127.0.0.1:5000", Some(ok))),
            Ok(Some(ok.to_string()))
        );
        assert!(
            joined_upstream(&req("[::1]:5000", Some("http://[::1]:9/mcp")))
                .unwrap()
                .is_some()
        );
        for bad in [
            "http://10.0.0.8:80/mcp",
            "https://127.0.0.1:443/mcp",
            "http://127.0.0.1.evil.test:80/",
            "http://127.0.0.1/mcp",
            "http://user@127.0.0.1:80/",
        ] {
            let e = joined_upstream(&req("127.0.0.1:5000", Some(bad))).unwrap_err();
            assert!(e.contains(UPSTREAM_HEADER), "{bad}: {e}");
        }
        // Never from another machine.
        let e = joined_upstream(&req("192.168.1.9:5000", Some(ok))).unwrap_err();
        assert!(e.contains("loopback client"), "{e}");
    }
}
