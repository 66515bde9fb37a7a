//! The evidence pages of a running server (docs/src/getting-started/first-test.md), under the admin API's access rules
//! (`super::authorize`: loopback only without an admin token, else the bearer token):
//!
//! | method and path | answers |
//! |---|---|
//! | `GET /_understudy/ui/` | the attempts, newest first (at most [`LIST_MAX`]): verdict, calls, events, started/ended |
//! | `GET /_understudy/ui/attempts/{id}` | the HTML report of `crate::evidence::report::html` for the live evidence |
//! | `GET /_understudy/ui/attempts/{id}/junit.xml` | its JUnit XML (`crate::evidence::report::junit`) |
//!
//! The envelope is the one of `GET /_understudy/api/attempts/{id}/evidence` (same lock, same
//! redaction, the one verdict with its reasons).

use hyper::http::StatusCode;
use serde_json::Value;

use super::{ApiError, Reply};
use crate::app::App;
use crate::evidence::report::html::esc;
use crate::http::{full, HttpResponse, Request};

/// The prefix of the pages.
pub const UI_PREFIX: &str = "/_understudy/ui";
/// The most attempts the list shows.
pub const LIST_MAX: usize = 200;

/// Whether a raw path is one of the pages.
pub fn is_ui_path(path: &str) -> bool {
    path == UI_PREFIX || path.starts_with("/_understudy/ui/")
}

/// Answer a page request (already authorized).
pub(crate) async fn handle(app: &App, req: &Request) -> Result<Reply, ApiError> {
    let rest = req.path.strip_prefix(UI_PREFIX).unwrap_or("");
    let parts: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let get = matches!(req.method.as_str(), "GET" | "HEAD");
    match (get, parts.as_slice()) {
        (true, []) => list(app).map(|b| page(b, "text/html; charset=utf-8")),
        (true, ["attempts", id]) => {
            let env = envelope(app, id).await?;
            Ok(page(
                crate::evidence::report::html::render(&env).into_bytes(),
                "text/html; charset=utf-8",
            ))
        }
        (true, ["attempts", id, "junit.xml"]) => {
            let env = envelope(app, id).await?;
            Ok(page(
                crate::evidence::report::junit::render(&env).into_bytes(),
                "application/xml; charset=utf-8",
            ))
        }
        (false, [] | ["attempts", _] | ["attempts", _, "junit.xml"]) => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("{} is not allowed on {}: use GET", req.method, req.path),
        )),
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "no page {}; pages: GET {UI_PREFIX}/, GET {UI_PREFIX}/attempts/{{id}}, GET {UI_PREFIX}/attempts/{{id}}/junit.xml",
                req.path
            ),
        )),
    }
}

async fn envelope(app: &App, id: &str) -> Result<Value, ApiError> {
    let id = if id == "default" {
        app.attempts
            .default_attempt()
            .map(|a| a.id.clone())
            .unwrap_or_else(|| id.to_string())
    } else {
        id.to_string()
    };
    let (_, env) = super::evidence(app, &id).await?;
    Ok(env)
}

fn list(app: &App) -> Result<Vec<u8>, ApiError> {
    let mut attempts = app.store.attempts().map_err(super::store_err)?;
    attempts.sort_by(|a, b| b.started_at.cmp(&a.started_at));
    let total = attempts.len();
    let mut h = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>understudy · attempts</title><style>\
         body{font:14px/1.45 system-ui,sans-serif;margin:20px}table{border-collapse:collapse}\
         td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left}.pass{color:#1a7f37;font-weight:700}\
         .fail{color:#cf222e;font-weight:700}code{font:12px ui-monospace,monospace}</style></head><body>\n\
         <h1>understudy attempts</h1>\n",
    );
    h.push_str(&format!(
        "<p>{total} attempt(s){}; newest first.</p>\n<table id=\"attempts\"><tr><th>started</th><th>attempt</th><th>test run</th><th>verdict</th><th>reasons</th><th>tool calls</th><th>status</th></tr>\n",
        if total > LIST_MAX {
            format!(", the newest {LIST_MAX} shown")
        } else {
            String::new()
        }
    ));
    for rec in attempts.iter().take(LIST_MAX) {
        // The one verdict, as the evidence route computes it (contracts, marks, the
        // store failures this process saw).
        let Some(mut found) = app
            .store
            .attempt_evidence(&rec.attempt_id)
            .map_err(super::store_err)?
        else {
            continue;
        };
        if let Ok(Some(a)) = app.attempts.get(&app.store, &rec.attempt_id) {
            let live = a.store_failures.load(std::sync::atomic::Ordering::Relaxed);
            found.attempt.store_failures = found.attempt.store_failures.max(live);
        }
        let inputs = crate::evidence::Inputs::of(&found, &app.config.redact);
        let results = crate::evidence::contract_results(&inputs);
        let v = crate::evidence::verdict_of(&inputs, &results);
        let verdict = v.word();
        let codes: Vec<String> = v.reasons.iter().map(|r| esc(&r.code)).collect();
        h.push_str(&format!(
            "<tr class=\"attempt\" data-attempt=\"{id}\"><td>{}</td><td><a href=\"{UI_PREFIX}/attempts/{id}\"><code>{id}</code></a>{}</td><td>{}</td><td class=\"{verdict}\">{verdict}</td><td class=\"reasons\">{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&rec.started_at),
            if rec.is_default { " (default)" } else { "" },
            esc(rec.test_run_id.as_deref().unwrap_or("—")),
            codes.join(" "),
            found.calls.len(),
            if rec.ended_at.is_some() { "ended" } else { "open" },
            id = esc(&rec.attempt_id),
        ));
    }
    h.push_str("</table></body></html>\n");
    Ok(h.into_bytes())
}

fn page(body: Vec<u8>, content_type: &str) -> Reply {
    let r = hyper::Response::builder()
        .status(StatusCode::OK)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .header(hyper::header::CACHE_CONTROL, "no-store")
        .header("x-content-type-options", "nosniff")
        // Self-contained: nothing may be loaded from anywhere.
        .header(
            "content-security-policy",
            "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:",
        )
        .body(full(body))
        .expect("static response");
    Reply::Http(r as HttpResponse)
}
