//! The evidence pages of a running server (docs/src/getting-started/first-test.md), under the admin API's access rules
//! (`super::authorize`: loopback only without an admin token, else the bearer token):
//!
//! | method and path | answers |
//! |---|---|
//! | `GET /_understudy/ui/` | the attempts, newest first (at most [`LIST_MAX`]): verdict, calls, events, started/ended |
//! | `GET /_understudy/ui/attempts/{id}[?after=SEQ&limit=N]` | the HTML report of `crate::evidence::report::html` for one page of the live evidence ([`PAGE`] entries unless `limit` says otherwise), with a link to the next page |
//! | `GET /_understudy/ui/attempts/{id}/junit.xml` | its JUnit XML (`crate::evidence::report::junit`) |
//!
//! The envelope is a page of `GET /_understudy/api/attempts/{id}/evidence?after=&limit=`
//! (same snapshot, same redaction, the one verdict over the whole timeline with its
//! reasons): a page never holds more than one page of entries in memory, however long the
//! attempt is. The list judges each attempt in one pass without keeping its entries.

use hyper::http::StatusCode;
use serde_json::Value;

use std::sync::Arc;

use super::{ApiError, Reply};
use crate::app::App;
use crate::evidence::report::html::esc;
use crate::evidence::stream::Window;
use crate::http::{full, HttpResponse, Request};

/// The prefix of the pages.
pub const UI_PREFIX: &str = "/_understudy/ui";
/// The most attempts the list shows.
pub const LIST_MAX: usize = 200;
/// Entries on one page of an attempt's report.
pub const PAGE: u64 = 500;

/// Whether a raw path is one of the pages.
pub fn is_ui_path(path: &str) -> bool {
    path == UI_PREFIX || path.starts_with("/_understudy/ui/")
}

/// Answer a page request (already authorized).
pub(crate) async fn handle(app: &Arc<App>, req: &Request) -> Result<Reply, ApiError> {
    let rest = req.path.strip_prefix(UI_PREFIX).unwrap_or("");
    let parts: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let get = matches!(req.method.as_str(), "GET" | "HEAD");
    match (get, parts.as_slice()) {
        (true, []) => {
            let app = app.clone();
            tokio::task::spawn_blocking(move || list(&app))
                .await
                .map_err(|e| super::store_err(format!("the attempt list stopped: {e}")))?
                .map(|b| page(b, "text/html; charset=utf-8"))
        }
        (true, ["attempts", id]) => {
            let window = super::attempts::evidence_window(req)?.unwrap_or(Window {
                after: 0,
                limit: PAGE,
            });
            let env = envelope(app, id, window).await?;
            let mut html = crate::evidence::report::html::render(&env);
            if let Some(next) = env["page"]["next_after"].as_u64() {
                let link = format!(
                    "<p class=\"next-page\"><a href=\"{UI_PREFIX}/attempts/{}?after={next}&amp;limit={}\">next page: entries after #{next}</a> (of {})</p>\n",
                    esc(env["attempt_id"].as_str().unwrap_or("")),
                    window.limit,
                    env["last_sequence"]
                );
                if let Some(at) = html.rfind("</body>") {
                    html.insert_str(at, &link);
                }
            }
            Ok(page(html.into_bytes(), "text/html; charset=utf-8"))
        }
        (true, ["attempts", id, "junit.xml"]) => {
            // JUnit reads the verdict, its reasons and the contract results: one small page.
            let env = envelope(app, id, Window { after: 0, limit: 1 }).await?;
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

async fn envelope(app: &Arc<App>, id: &str, window: Window) -> Result<Value, ApiError> {
    let id = if id == "default" {
        app.attempts
            .default_attempt()
            .map(|a| a.id.clone())
            .unwrap_or_else(|| id.to_string())
    } else {
        id.to_string()
    };
    let snap = super::attempts::evidence_snapshot(app, &id).await?;
    let app = app.clone();
    let bytes = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        super::attempts::write_evidence(&app, &snap, Some(window), &mut out).map(|_| out)
    })
    .await
    .map_err(|e| super::store_err(format!("the evidence reader stopped: {e}")))?
    .map_err(super::store_err)?;
    serde_json::from_slice(&bytes).map_err(super::store_err)
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
        // store failures this process saw), judged in one pass without keeping entries.
        let mut attempt = rec.clone();
        if let Ok(Some(a)) = app.attempts.get(&app.store, &rec.attempt_id) {
            let live = a.store_failures.load(std::sync::atomic::Ordering::Relaxed);
            attempt.store_failures = attempt.store_failures.max(live);
        }
        let final_state = match &attempt.final_state {
            Some(s) => s.clone(),
            None => app.store.state(&rec.attempt_id).map_err(super::store_err)?,
        };
        let last_sequence = app
            .store
            .last_sequence(&rec.attempt_id)
            .map_err(super::store_err)?;
        let snap = super::attempts::EvidenceSnapshot {
            attempt,
            final_state,
            last_sequence,
        };
        let judged = super::attempts::judge_evidence(app, &snap).map_err(super::store_err)?;
        let v = &judged.verdict;
        let verdict = v.word();
        let codes: Vec<String> = v.reasons.iter().map(|r| esc(&r.code)).collect();
        h.push_str(&format!(
            "<tr class=\"attempt\" data-attempt=\"{id}\"><td>{}</td><td><a href=\"{UI_PREFIX}/attempts/{id}\"><code>{id}</code></a>{}</td><td>{}</td><td class=\"{verdict}\">{verdict}</td><td class=\"reasons\">{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&rec.started_at),
            if rec.is_default { " (default)" } else { "" },
            esc(rec.test_run_id.as_deref().unwrap_or("—")),
            codes.join(" "),
            judged.calls,
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
