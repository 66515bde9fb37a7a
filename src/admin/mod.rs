//! The admin API on the proxy's own listener, under `/_understudy/api` (SPEC 6, 8, 9).
//!
//! | method and path | does |
//! |---|---|
//! | `GET /_understudy/api/health` | liveness: `{"status":"ok","mode","version","integrations":[…]}` |
//! | `GET /_understudy/api/tools` | every integration's operations: `{"tools":[{"integration","profile","operation_id","description","input_schema","is_write","has_mock"}]}` |
//! | `POST /_understudy/api/attempts` | create an attempt (SPEC 6.2): body `{"test_run_id"?, "variants"?: {"crm/op": "variant"}, "ttl_s"?: 3600}`; 201 `{"attempt_id","token","expires_at","base_urls","pins"}`; 409 `stale_contract` listing stale operations in `details` |
//! | `GET /_understudy/api/attempts/{id}` | the attempt: `{"attempt_id","test_run_id","status","started_at","ended_at","expires_at","is_default","pins","variants","cleanup","events"}` (never the token or the secret) |
//! | `GET /_understudy/api/attempts/{id}/evidence` | the evidence envelope of SPEC 8, with `verdict` (the project's `redact` list applied) |
//! | `DELETE /_understudy/api/attempts/{id}` | end the attempt: state dropped, evidence kept; `{"attempt_id","ended_at","cleanup":{"status":"verified","remaining_state_keys":0}}` |
//!
//! **Auth** (SPEC 9): with an admin token (`--admin-token` / `UNDERSTUDY_ADMIN_TOKEN`) every
//! route needs `Authorization: Bearer <token>`, compared in constant time; without one the API
//! answers only loopback peers (and `serve` refuses a non-loopback listener without a token).
//!
//! **Errors** have one shape: `{"error":{"code","message","details":[…]}}` with codes
//! `unauthorized` (401), `not_found` (404), `method_not_allowed` (405), `bad_request` (400),
//! `unknown_operation` (422), `stale_contract` (409), `default_attempt` (409),
//! `store_error` (500).

use std::collections::BTreeMap;

use hyper::http::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::attempt::{self, Lease};
use crate::proxy::http::{json_response, HttpResponse};
use crate::proxy::request::Request;
use crate::proxy::{cleanup_report, App};

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

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            details: Vec::new(),
        }
    }
    fn with_details(mut self, d: Vec<Value>) -> ApiError {
        self.details = d;
        self
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

fn store_err(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "store_error",
        e.to_string(),
    )
}

type ApiResult = Result<(StatusCode, Value), ApiError>;

/// Answer one admin request.
pub async fn handle(app: &App, req: Request) -> HttpResponse {
    if let Err(e) = authorize(app, &req) {
        return e.response();
    }
    match route(app, &req).await {
        Ok((status, body)) => json_response(status, &body),
        Err(e) => e.response(),
    }
}

/// SPEC 9: bearer token in constant time, or loopback only when no token is configured.
fn authorize(app: &App, req: &Request) -> Result<(), ApiError> {
    match &app.admin_token {
        Some(expected) => {
            let given = req
                .header("authorization")
                .and_then(|h| {
                    let (scheme, rest) = h.trim().split_once(' ')?;
                    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
                })
                .unwrap_or("");
            // Compare digests so the comparison time does not depend on the token length.
            let a = attempt::token_hash(given);
            let b = attempt::token_hash(expected);
            if !given.is_empty() && attempt::ct_eq(a.as_bytes(), b.as_bytes()) {
                Ok(())
            } else {
                Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "the admin API needs `Authorization: Bearer <admin token>`",
                ))
            }
        }
        None if req.peer.ip().is_loopback() => Ok(()),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "without an admin token the admin API answers only loopback clients",
        )),
    }
}

async fn route(app: &App, req: &Request) -> ApiResult {
    let rest = req.path.strip_prefix(PREFIX).unwrap_or("");
    if !(rest.is_empty() || rest.starts_with('/')) || !req.path.starts_with(PREFIX) {
        return Err(not_found(req));
    }
    let parts: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let m = req.method.as_str();
    match (m, parts.as_slice()) {
        ("GET" | "HEAD", ["health"]) => Ok(health(app)),
        ("GET" | "HEAD", ["tools"]) => Ok(tools(app)),
        ("POST", ["attempts"]) => create_attempt(app, req),
        ("GET" | "HEAD", ["attempts", id]) => get_attempt(app, id).await,
        ("GET" | "HEAD", ["attempts", id, "evidence"]) => evidence(app, id).await,
        ("DELETE", ["attempts", id]) => end_attempt(app, id).await,
        (
            _,
            ["health"] | ["tools"] | ["attempts"] | ["attempts", _] | ["attempts", _, "evidence"],
        ) => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("{} is not allowed on {}", req.method, req.path),
        )),
        _ => Err(not_found(req)),
    }
}

fn not_found(req: &Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no admin route {} {}; routes: GET {PREFIX}/health, GET {PREFIX}/tools, POST {PREFIX}/attempts, GET|DELETE {PREFIX}/attempts/{{id}}, GET {PREFIX}/attempts/{{id}}/evidence",
            req.method, req.path
        ),
    )
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

fn tools(app: &App) -> (StatusCode, Value) {
    let mut out = Vec::new();
    for integ in app.integrations.values() {
        for op in &integ.operations {
            out.push(json!({
                "integration": integ.name(),
                "profile": integ.config.profile.as_str(),
                "operation_id": op.id(),
                "description": op.op.description,
                "input_schema": op.op.input_schema,
                "is_write": op.is_write,
                "has_mock": op.definition.is_some(),
            }));
        }
    }
    (StatusCode::OK, json!({ "tools": out }))
}

/// The body of `POST /attempts`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateAttempt {
    #[serde(default)]
    test_run_id: Option<String>,
    #[serde(default)]
    variants: BTreeMap<String, String>,
    #[serde(default)]
    ttl_s: Option<u64>,
}

fn create_attempt(app: &App, req: &Request) -> ApiResult {
    let body: CreateAttempt = match req.json_body() {
        Ok(None) => CreateAttempt::default(),
        Ok(Some(v)) => serde_path_to_error::deserialize(&v).map_err(|e| {
            let p = e.path().to_string();
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                if p == "." {
                    format!("attempt creation body: {}", e.inner())
                } else {
                    format!("attempt creation body: {p}: {}", e.inner())
                },
            )
        })?,
        Err(m) => return Err(ApiError::new(StatusCode::BAD_REQUEST, "bad_request", m)),
    };
    let ttl = body.ttl_s.unwrap_or(DEFAULT_TTL_S);
    if ttl == 0 || ttl > MAX_TTL_S {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("ttl_s must be 1..={MAX_TTL_S} seconds, got {ttl}"),
        ));
    }
    let unknown: Vec<Value> = body
        .variants
        .keys()
        .filter(|k| app.operation(k).is_none())
        .map(|k| json!(k))
        .collect();
    if !unknown.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown_operation",
            "`variants` names operations this server does not have: expected keys \"<integration>/<operation_id>\"",
        )
        .with_details(unknown));
    }
    let pinned = app.pin_latest().map_err(store_err)?;
    if !pinned.stale.is_empty() {
        let details = pinned
            .stale
            .iter()
            .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
            .collect();
        let names: Vec<&str> = pinned.stale.iter().map(|s| s.operation.as_str()).collect();
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "stale_contract",
            format!(
                "cannot pin stale mocks (their contract changed since they were checked): {}; save a new revision for each",
                names.join(", ")
            ),
        )
        .with_details(details));
    }
    let token = attempt::new_token();
    let rec = attempt::new_record(
        app.clock.now(),
        Some(&token),
        Some(ttl),
        body.test_run_id,
        pinned.pins,
        body.variants,
        false,
    );
    let a = app.create_attempt(rec).map_err(store_err)?;
    let rec = a.record();
    let host = req
        .header("host")
        .map(str::to_string)
        .or_else(|| app.local_addr().map(|a| a.to_string()))
        .unwrap_or_else(|| "127.0.0.1".into());
    let base_urls: BTreeMap<&str, String> = app
        .integrations
        .keys()
        .map(|name| (name.as_str(), format!("http://{host}/~{token}/{name}")))
        .collect();
    tracing::info!(attempt = %rec.attempt_id, test_run_id = ?rec.test_run_id, "attempt created");
    Ok((
        StatusCode::CREATED,
        json!({
            "attempt_id": rec.attempt_id,
            "token": token,
            "expires_at": rec.expires_at,
            "base_urls": base_urls,
            "pins": rec.pins,
        }),
    ))
}

fn lookup(app: &App, id: &str) -> Result<std::sync::Arc<crate::attempt::Attempt>, ApiError> {
    app.attempts
        .get(&app.store, id)
        .map_err(store_err)?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no attempt `{id}`"),
            )
        })
}

async fn get_attempt(app: &App, id: &str) -> ApiResult {
    let a = lookup(app, id)?;
    let events = {
        let _g = a.lock.lock().await;
        app.store.evidence(id).map_err(store_err)?.len()
    };
    let r = a.record();
    Ok((
        StatusCode::OK,
        json!({
            "attempt_id": r.attempt_id,
            "test_run_id": r.test_run_id,
            "status": a.lease(app.clock.now()).as_str(),
            "started_at": r.started_at,
            "ended_at": r.ended_at,
            "expires_at": r.expires_at,
            "is_default": r.is_default,
            "pins": r.pins,
            "variants": r.variants,
            "cleanup": r.cleanup,
            "events": events,
        }),
    ))
}

async fn evidence(app: &App, id: &str) -> ApiResult {
    let a = lookup(app, id)?;
    // Under the state lock: events and final state from the same instant.
    let _g = a.lock.lock().await;
    let rec = a.record();
    let events = app.store.evidence(id).map_err(store_err)?;
    let state = app.store.state(id).map_err(store_err)?;
    Ok((
        StatusCode::OK,
        crate::evidence::envelope(&rec, &events, &state, &app.config.redact),
    ))
}

async fn end_attempt(app: &App, id: &str) -> ApiResult {
    let a = lookup(app, id)?;
    if a.is_default() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "default_attempt",
            "the default attempt lives as long as the server; end attempts created with POST /attempts",
        ));
    }
    // Under the state lock: no call is half-way through this attempt.
    let mut g = a.lock.lock().await;
    let mut rec = a.record();
    if a.lease(app.clock.now()) != Lease::Ended {
        let remaining = app.store.clear_state(id).map_err(store_err)?;
        rec.ended_at = Some(attempt::rfc3339(app.clock.now()));
        rec.cleanup = Some(cleanup_report(remaining));
        app.store.put_attempt(&rec).map_err(store_err)?;
        app.store.flush().await.map_err(store_err)?;
        a.set_record(rec.clone());
        g.state.clear();
        g.idempotency.clear();
        tracing::info!(attempt = %id, remaining, "attempt ended");
    }
    Ok((
        StatusCode::OK,
        json!({
            "attempt_id": rec.attempt_id,
            "ended_at": rec.ended_at,
            "cleanup": rec.cleanup,
        }),
    ))
}
