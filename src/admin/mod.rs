//! The admin API on the proxy's own listener, under `/_understudy/api` (docs/src/concepts/attempts.md, docs/src/reference/evidence-envelope.md, docs/src/reference/admin-api.md).
//!
//! | method and path | scope | does | module |
//! |---|---|---|---|
//! | `GET /health` | any token | liveness: `{"status":"ok","mode","version","integrations":[…]}` | here |
//! | `GET /metrics` | read | Prometheus text (`text/plain; version=0.0.4`): calls by integration/operation/result_status, latency histogram, open attempts, revisions saved | [`metrics`] |
//! | `GET /tools` | read | every integration with its operations: `{"integrations":[{"integration","profile","upstream","operations":[{"operation_id","title","description","input_schema","output_schema","is_write","contract_hash","has_mock","latest_revision","stale"}],"builtin_operations":[…]}]}` | [`testing`] |
//! | `GET /tools/{integration}/testing` | read | per operation: `contract` (the hashed object), `contract_hash`, `latest_revision` `{revision,contract_hash,definition_hash,saved_at,source}` or null, `revisions` (count), `file_definition_hash`, `stale` (+ `stale_reason`); and `problems` of the last refused hot reload | [`testing`] |
//! | `POST /tools/{integration}/testing` | manage | `{"action":"generate","operation_id"}` → schema-derived draft (`supported:false` + `reasons` when beyond it); `{"action":"save","operation_id","contract_hash","definition"}` → 201 new revision (200 `created:false` when equal to the latest), 409 `contract_changed`, 422 `check_failed`; `{"action":"check",…}` → the save's checks without saving | [`testing`] |
//! | `POST /tools/testing` | read | inline operation: `{"action":"check"\|"generate","operation":{…operation file…},"definition"?,"profile"?\|"integration"?}` — same checks (422 listing problems) and drafts, stores nothing | [`testing`] |
//! | `POST /tools/execute` | manage | run one operation in isolation: `{"integration","operation_id","input","variant"?,"state"?,"attempt"?,"dry_run"?,"target"?,"allow_write"?,"stream_response"?,"timeout_seconds"?,"test_context"?}` (headers `Request-Timeout`, `Request-Timeout-Millis`) → the object of `understudy exec` plus the tool-test members (`dry_run`, `source`, `is_write`, `blocked_side_effects`, …); `stream_response` → SSE `heartbeat` events then one `result` event | [`execute`], [`execute_request`], [`execute_upstream`] |
//! | `POST /drafts/flush` | manage | record modes: write the draft operation files captured so far into `--out` (also done at shutdown); 409 `not_recording` without `--out` | [`crate::app::recorder`] |
//! | `GET /revisions/{integration}/{operation_id}` | read | the revision history, oldest first, definitions included | [`testing`] |
//! | `POST /attempts` | run | create an attempt (docs/src/concepts/attempts.md, docs/src/reference/contracts.md): body `{"test_run_id"?, "variants"?: {"crm/op": "variant"}, "ttl_s"?: 3600, "contracts"?: ["contract_id"], "faults"?: {"crm/op": {"kind","after_effect",…,"probability"?,"seed"?,"times"?}}, "expect_calls"?: true, "exclusive"?: false}` (seeded chaos, [`crate::operation::fault`]; 422 `unknown_operation` / `invalid_fault`); 201 `{"attempt_id","token","expires_at","base_urls","pins","contracts":{id:{"contract_hash"}}}`; 409 `stale_contract` listing stale operations in `details`; 422 `unknown_contract` naming unknown contract ids | `attempts.rs` |
//! | `GET /attempts/{id}` | read | the attempt: `{"attempt_id","test_run_id","status","started_at","ended_at","expires_at","is_default","pins","contracts","variants","faults","cleanup","events"}` (`events`: how many evidence entries, calls and agent-side events; never the token or the secret) | `attempts.rs` |
//! | (`{id}` = `default`) | | every `/attempts/{id}…` route also accepts `default` for the server's default attempt |
//! | `GET /attempts/{id}/evidence` | read | the evidence envelope of docs/src/reference/evidence-envelope.md with `events` (agent-side), `contract_results` (the pinned contracts, evaluated now), `verdict_reasons` and `verdict` (the project's `redact` list applied; `store_failures: n`, a reason and verdict `fail` when calls of this run were answered `store_error`) | `attempts.rs` |
//! | `POST /attempts/{id}/events` | run | record an agent-side event (docs/src/reference/events.md): `{"name","kind":"agent_message"\|"caller_message"\|"checkpoint"\|"final_state","test_run_id"?,"text"?,"data"?}` → 201 `{"sequence"}` once durable; 409 `attempt_ended`; 422 `invalid_event` naming the member | [`verify`] |
//! | `POST /attempts/{id}/verify` | run | evaluate tool-call contracts now: `{"contracts"?:[ids of the loaded set]}` (none: the pinned ones) → `{"attempt_id","contract_results","passed"}`; 422 `unknown_contract` | [`verify`] |
//! | `POST /otlp/v1/traces` | run | the agent's own spans, OTLP/HTTP (`application/x-protobuf` or `application/json`; docs/src/guides/traces.md): joined to an attempt by the resource attribute `understudy.attempt_id` or the trace id its calls carried, its tool calls, model turns and final message recorded as agent-side events → 200 `ExportTraceServiceResponse` (`partialSuccess` counts the spans no open attempt took); 400 for a body that does not decode, 415 `unsupported_media_type` | [`otlp`] |
//! | `GET /attempts/{id}/state` | read | debugging: `{"attempt_id","status","pins","variants","state":{integration:{…}}}` (not redacted: the admin API is trusted) | [`execute`] |
//! | `DELETE /attempts/{id}` | run | end the attempt: the state as it stood is kept in the record as `final_state`, then the live state is dropped, evidence kept; `{"attempt_id","ended_at","cleanup":{"status":"verified","remaining_state_keys":0}}` | `attempts.rs` |
//!
//! [`client`] is this API's reader for the commands that read evidence from a running server
//! (`--url`).
//!
//! The pages of [`ui`] (`GET /_understudy/ui/`, `…/ui/attempts/{id}`,
//! `…/ui/attempts/{id}/junit.xml`) need `read`. The router dispatches from one table,
//! [`ROUTES`], which carries each route's scope.
//!
//! **Who may call** ([`gate`], the security model in `docs/src/operations/security.md`):
//! first the Host, Origin and Content-Type rules (403 `forbidden_host`,
//! `forbidden_origin`, `content_type` in the shape `{"understudy_error":{…}}`); then a
//! bearer token — `--admin-token` / `UNDERSTUDY_ADMIN_TOKEN` has every scope, an
//! `admin_tokens` entry of `understudy.json` (`{"name","sha256","scopes"}`) its own — or,
//! when no token is configured, a loopback peer without proxy headers unless
//! `"trust_loopback": false`; then the route's scope (403 `forbidden_scope` naming it).
//! `serve` refuses a non-loopback listener without a token.
//!
//! **Errors** have one shape: `{"error":{"code","message","details":[…]}}`; the message says
//! what to do, `details` carries the machine-readable facts. Codes: `unauthorized` (401),
//! `forbidden_scope` (403: `details` `[{"scope_needed","token"}]`), `upstream_writes_disabled` (403),
//! `not_found` (404: names the unknown integration/operation/attempt and lists the known
//! ones), `method_not_allowed` (405), `bad_request` (400: the body's JSON path and what was
//! expected), `unknown_operation` (422), `check_failed` (422: every problem as
//! `{"file","path","message"}`, `file` null for a definition sent in the body, `path` relative
//! to the request body), `no_upstream` (422), `stream_required` /
//! `timeout_too_long` / `invalid_test_context` (422), `contract_changed` (409:
//! `{"operation","sent_contract_hash","current_contract_hash","contract"}`), `stale_contract`
//! (409), `default_attempt` (409), `attempt_ended` (409), `invalid_event` (422),
//! `unknown_contract` (422), `not_recording` (409), `not_implemented` (501), `timeout` (504), `store_error`
//! (500).

mod attempts;
pub mod client;
pub mod execute;
pub mod execute_request;
pub mod execute_upstream;
pub mod gate;
pub mod metrics;
pub mod otlp;
pub mod testing;
pub mod ui;
pub mod verify;

use std::collections::BTreeMap;
use std::sync::Arc;

use hyper::http::StatusCode;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::app::attempt::{self, Lease};
use crate::app::generations::IntegrationMap;
use crate::app::{cleanup_report, App, Integration};
use crate::config::Scope;
use crate::error::Problem;
use crate::http::{json_response, HttpResponse, Request};
use attempts::{create_attempt, get_attempt};
pub(crate) use attempts::{end_attempt, evidence, lookup, verdict_evidence};

/// The prefix of every admin route.
pub const PREFIX: &str = "/_understudy/api";

/// Longest lease an attempt may ask for: 30 days.
pub const MAX_TTL_S: u64 = 30 * 24 * 3600;
/// The lease when `ttl_s` is absent.
pub const DEFAULT_TTL_S: u64 = 3600;

/// Whether a raw request path belongs to the admin API (everything under `/_understudy/`).
pub fn is_admin_path(path: &str) -> bool {
    path == "/_understudy" || path.starts_with("/_understudy/")
}

/// An admin error in the one JSON shape.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Vec<Value>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            details: Vec::new(),
        }
    }
    pub fn with_details(mut self, d: Vec<Value>) -> ApiError {
        self.details = d;
        self
    }
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
    /// A request body that could not be read as JSON: 400 `too_deep` for a body nested too
    /// deep (decided by the variant), else 400 `bad_request`; the message starts with `what`.
    pub fn of_body(e: crate::http::request::BodyError, what: &str) -> ApiError {
        let code = match e {
            crate::http::request::BodyError::TooDeep { .. } => "too_deep",
            crate::http::request::BodyError::NotJson(_)
            | crate::http::request::BodyError::Form(_) => "bad_request",
        };
        ApiError::new(StatusCode::BAD_REQUEST, code, format!("{what}: {e}"))
    }
    pub fn response(&self) -> HttpResponse {
        let mut r = json_response(
            self.status,
            &json!({ "error": { "code": self.code, "message": self.message, "details": self.details } }),
        );
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::http::HeaderValue::from_static("Bearer realm=\"understudy\""),
            );
        }
        r
    }
}

pub(crate) fn store_err(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "store_error",
        e.to_string(),
    )
}

/// A JSON answer.
pub(crate) type ApiResult = Result<(StatusCode, Value), ApiError>;

/// What a route answers: JSON, or a response of its own (SSE, Prometheus text).
pub(crate) enum Reply {
    Json(StatusCode, Value),
    Http(HttpResponse),
}

impl From<(StatusCode, Value)> for Reply {
    fn from((s, v): (StatusCode, Value)) -> Reply {
        Reply::Json(s, v)
    }
}

type Routed = Result<Reply, ApiError>;

/// What a route needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Any authenticated caller, whatever its scopes (liveness).
    AnyCaller,
    /// A token with this scope.
    Scope(Scope),
}

/// Which handler answers a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteId {
    Health,
    Metrics,
    Tools,
    InlineTesting,
    Execute,
    FlushDrafts,
    GetTesting,
    PostTesting,
    Revisions,
    CreateAttempt,
    GetAttempt,
    Evidence,
    State,
    EndAttempt,
    Events,
    Verify,
    OtlpTraces,
    Ui,
}

/// One route of the control plane: method (`GET` also answers `HEAD`), path pattern
/// (`{name}` matches one segment), the scope it needs, and its handler.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub need: Need,
    pub id: RouteId,
}

const fn r(method: &'static str, path: &'static str, need: Need, id: RouteId) -> Route {
    Route {
        method,
        path,
        need,
        id,
    }
}

const READ: Need = Need::Scope(Scope::Read);
const RUN: Need = Need::Scope(Scope::Run);
const MANAGE: Need = Need::Scope(Scope::Manage);

/// Every route of `/_understudy/…`, the one table the router dispatches from (the module
/// doc's table says what each does; `docs/src/operations/security.md` lists the scopes).
pub const ROUTES: &[Route] = &[
    r(
        "GET",
        "/_understudy/api/health",
        Need::AnyCaller,
        RouteId::Health,
    ),
    r("GET", "/_understudy/api/metrics", READ, RouteId::Metrics),
    r("GET", "/_understudy/api/tools", READ, RouteId::Tools),
    r(
        "POST",
        "/_understudy/api/tools/testing",
        READ,
        RouteId::InlineTesting,
    ),
    r(
        "POST",
        "/_understudy/api/tools/execute",
        MANAGE,
        RouteId::Execute,
    ),
    r(
        "POST",
        "/_understudy/api/drafts/flush",
        MANAGE,
        RouteId::FlushDrafts,
    ),
    r(
        "GET",
        "/_understudy/api/tools/{integration}/testing",
        READ,
        RouteId::GetTesting,
    ),
    r(
        "POST",
        "/_understudy/api/tools/{integration}/testing",
        MANAGE,
        RouteId::PostTesting,
    ),
    r(
        "GET",
        "/_understudy/api/revisions/{integration}/{operation_id}",
        READ,
        RouteId::Revisions,
    ),
    r(
        "POST",
        "/_understudy/api/attempts",
        RUN,
        RouteId::CreateAttempt,
    ),
    r(
        "GET",
        "/_understudy/api/attempts/{id}",
        READ,
        RouteId::GetAttempt,
    ),
    r(
        "DELETE",
        "/_understudy/api/attempts/{id}",
        RUN,
        RouteId::EndAttempt,
    ),
    r(
        "GET",
        "/_understudy/api/attempts/{id}/evidence",
        READ,
        RouteId::Evidence,
    ),
    r(
        "GET",
        "/_understudy/api/attempts/{id}/state",
        READ,
        RouteId::State,
    ),
    r(
        "POST",
        "/_understudy/api/attempts/{id}/events",
        RUN,
        RouteId::Events,
    ),
    r(
        "POST",
        "/_understudy/api/attempts/{id}/verify",
        RUN,
        RouteId::Verify,
    ),
    r("POST", otlp::PATH, RUN, RouteId::OtlpTraces),
    r("GET", "/_understudy/ui", READ, RouteId::Ui),
    r("GET", "/_understudy/ui/attempts/{id}", READ, RouteId::Ui),
    r(
        "GET",
        "/_understudy/ui/attempts/{id}/junit.xml",
        READ,
        RouteId::Ui,
    ),
];

/// The route `method path` names: `Ok(route)`, `Err(Some(allow))` for a known path and
/// another method (405), `Err(None)` for an unknown path.
pub fn find_route(method: &str, path: &str) -> Result<&'static Route, Option<String>> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let matches = |route: &Route| {
        let pat: Vec<&str> = route.path.split('/').filter(|s| !s.is_empty()).collect();
        pat.len() == segs.len()
            && pat
                .iter()
                .zip(&segs)
                .all(|(p, s)| (p.starts_with('{') && p.ends_with('}')) || p == s)
    };
    let mut methods = Vec::new();
    for route in ROUTES.iter().filter(|r| matches(r)) {
        if route.method == method || (route.method == "GET" && method == "HEAD") {
            return Ok(route);
        }
        methods.push(route.method);
    }
    if methods.is_empty() {
        Err(None)
    } else {
        Err(Some(methods.join(" or ")))
    }
}

/// Answer one request to `/_understudy/…`: the gate ([`gate`]: Host, Origin,
/// Content-Type), the caller and its scope, then the route.
pub async fn handle(app: &Arc<App>, req: Request) -> HttpResponse {
    if let Err(refusal) = gate::check(app, &req) {
        gate::note_refusal(app, &req, refusal.code);
        return refusal.response();
    }
    if let Some(r) = gate::preflight(app, &req) {
        return r;
    }
    let mut resp = answer(app, &req).await;
    gate::cors(app, &req, &mut resp);
    resp
}

async fn answer(app: &Arc<App>, req: &Request) -> HttpResponse {
    let caller = match gate::authenticate(app, req) {
        Ok(c) => c,
        Err(e) => {
            gate::note_refusal(app, req, "unauthorized");
            return e.response();
        }
    };
    let route = match find_route(&req.method, &req.path) {
        Ok(r) => r,
        Err(Some(allow)) => {
            let mut r = ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!("{} is not allowed on {}: use {allow}", req.method, req.path),
            )
            .response();
            if let Ok(v) = hyper::http::HeaderValue::from_str(&allow.replace(" or ", ", ")) {
                r.headers_mut().insert(hyper::header::ALLOW, v);
            }
            return r;
        }
        Err(None) => return not_found(req).response(),
    };
    if let Need::Scope(need) = route.need {
        if !caller.may(need) {
            gate::note_refusal(app, req, "forbidden_scope");
            return gate::forbidden_scope(
                &caller,
                need,
                &format!("{} {}", route.method, route.path),
            )
            .response();
        }
    }
    match dispatch(app, req, route.id).await {
        Ok(Reply::Json(status, body)) => json_response(status, &body),
        Ok(Reply::Http(r)) => r,
        Err(e) => e.response(),
    }
}

async fn dispatch(app: &Arc<App>, req: &Request, id: RouteId) -> Routed {
    if id == RouteId::Ui {
        return ui::handle(app, req).await;
    }
    let rest = req.path.strip_prefix(PREFIX).unwrap_or("");
    let mut parts: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    // `attempts/default/…` names the default attempt, so a local user can read the evidence
    // of token-less calls without looking up its id (attempt ids are UUIDs: no collision).
    let default_id: String;
    if parts.len() >= 2 && parts[0] == "attempts" && parts[1] == "default" {
        if let Some(a) = app.attempts.default_attempt() {
            default_id = a.id.clone();
            parts[1] = &default_id;
        }
    }
    let at = |i: usize| parts.get(i).copied().unwrap_or("");
    let json = |r: ApiResult| r.map(Reply::from);
    match id {
        RouteId::Health => Ok(health(app).into()),
        RouteId::Metrics => metrics::render(app),
        RouteId::Tools => json(testing::tools(app)),
        RouteId::InlineTesting => json(testing::inline(app, req)),
        RouteId::Execute => execute::execute(app, req).await,
        RouteId::FlushDrafts => match crate::app::recorder::flush_drafts(app).await {
            Ok(v) => Ok(Reply::Json(StatusCode::OK, v)),
            Err(e) => Err(ApiError::new(StatusCode::CONFLICT, "not_recording", e)),
        },
        RouteId::GetTesting => json(testing::get_testing(app, at(1))),
        RouteId::PostTesting => json(testing::post_testing(app, at(1), req).await),
        RouteId::Revisions => json(testing::revisions(app, at(1), at(2))),
        RouteId::CreateAttempt => json(create_attempt(app, req)),
        RouteId::GetAttempt => json(get_attempt(app, at(1), req).await),
        RouteId::Evidence => json(evidence(app, at(1)).await),
        RouteId::State => json(execute::attempt_state(app, at(1)).await),
        RouteId::EndAttempt => json(end_attempt(app, at(1)).await),
        RouteId::Events => json(verify::post_event(app, at(1), req).await),
        RouteId::Verify => json(verify::verify(app, at(1), req).await),
        RouteId::OtlpTraces => otlp::traces(app, req).await,
        RouteId::Ui => ui::handle(app, req).await,
    }
}

fn not_found(req: &Request) -> ApiError {
    let routes: Vec<String> = ROUTES
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no route {} {}; routes: {}",
            req.method,
            req.path,
            routes.join(", ")
        ),
    )
}

/// 404 for an integration name that is not in the project file, listing the known ones.
pub(crate) fn unknown_integration(map: &IntegrationMap, name: &str) -> ApiError {
    let known: Vec<&str> = map.keys().map(String::as_str).collect();
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no integration named `{name}`; the project's integrations are: {}",
            if known.is_empty() {
                "(none)".to_string()
            } else {
                known.join(", ")
            }
        ),
    )
    .with_details(vec![
        json!({ "unknown_integration": name, "known_integrations": known }),
    ])
}

/// 404 for an operation id the integration does not have, listing its operations.
pub(crate) fn unknown_operation(integ: &Integration, id: &str) -> ApiError {
    let known: Vec<&str> = integ.operations.iter().map(|o| o.id()).collect();
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "integration `{}` has no operation `{id}` (one file per operation in {}); its operations are: {}",
            integ.name(),
            integ.config.operations.display(),
            if known.is_empty() {
                "(none)".to_string()
            } else {
                known.join(", ")
            }
        ),
    )
    .with_details(vec![json!({
        "integration": integ.name(),
        "unknown_operation": id,
        "known_operations": known,
    })])
}

/// A request body as `T`; a body that is missing, not JSON or not of the expected shape is a
/// 400 naming the JSON path and what was expected.
pub(crate) fn parse_body<T: DeserializeOwned>(req: &Request, what: &str) -> Result<T, ApiError> {
    match req.json_body() {
        Ok(Some(v)) => from_value(&v, what),
        Ok(None) => Err(ApiError::bad_request(format!(
            "{what}: expected a JSON object body, got an empty body"
        ))),
        Err(e) => Err(ApiError::of_body(e, what)),
    }
}

/// `v` as `T`, or a 400 naming the JSON path and what was expected.
pub(crate) fn from_value<T: DeserializeOwned>(v: &Value, what: &str) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let p = e.path().to_string();
        ApiError::bad_request(if p == "." {
            format!("{what}: {}", e.inner())
        } else {
            format!("{what}: {p}: {}", e.inner())
        })
    })
}

/// A problem as the API shows it: `{"file","path","message"}` (`file` null when none).
pub(crate) fn problem_json(file: Option<String>, path: &str, message: &str) -> Value {
    json!({ "file": file, "path": path, "message": message })
}

/// A problem of an operation file (hot reload), with its file.
pub(crate) fn file_problem_json(p: &Problem) -> Value {
    problem_json(Some(p.file.display().to_string()), &p.path, &p.message)
}

fn health(app: &App) -> (StatusCode, Value) {
    (
        StatusCode::OK,
        json!({
            "status": "ok",
            "mode": app.mode.as_str(),
            "version": env!("CARGO_PKG_VERSION"),
            "integrations": app.integrations.keys().collect::<Vec<_>>(),
        }),
    )
}
