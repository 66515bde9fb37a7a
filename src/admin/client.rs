//! The client side of this API, for the commands that read evidence (`evidence`, `verify`,
//! `report`) while `understudy serve` holds the data dir: `--url http://HOST:PORT` (and
//! `--admin-token`) reads `GET /attempts/{id}/evidence` from the running server instead of
//! opening the store. The envelope is the one those commands build from the data dir (the
//! server applies its project's `redact` list), plus `store_failures` of the running process.
//! Errors are sentences that say what to do; a token never appears in them.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::http::{header, Method, Request};
use serde_json::Value;

use super::PREFIX;
use crate::upstream::Upstream;

/// How long to wait for the server's answer.
const TIMEOUT: Duration = Duration::from_secs(60);

/// The evidence envelope of `attempt_id` (`default` names the server's default attempt) from
/// the server at `base` (`http://HOST:PORT`). Blocking: runs its own small runtime.
pub fn evidence(base: &str, token: Option<&str>, attempt_id: &str) -> Result<Value, String> {
    if !attempt_id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!(
            "`{attempt_id}` is not an attempt id (letters, digits, `-` and `_`)"
        ));
    }
    get_json(base, &format!("/attempts/{attempt_id}/evidence"), token)
}

/// `GET {base}/_understudy/api{path}` → the JSON body of a 200; any other answer is an error
/// naming the server and carrying the admin API's message.
pub fn get_json(base: &str, path: &str, token: Option<&str>) -> Result<Value, String> {
    let base = base.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(format!(
            "--url {base}: expected the running server's base URL, http://HOST:PORT (as printed by `understudy serve`)"
        ));
    }
    let uri = format!("{base}{PREFIX}{path}");
    let mut req = Request::builder()
        .method(Method::GET)
        .uri(&uri)
        .header(header::ACCEPT, "application/json");
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = req
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("--url {base}: not a valid URL: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let (status, body) = rt.block_on(async {
        let client = Upstream::new(None, TIMEOUT)?;
        let resp = client
            .forward(req)
            .await
            .map_err(|e| format!("cannot reach the server at {base}: {}", e.cause))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("the server at {base} broke off its answer: {e}"))?
            .to_bytes();
        Ok::<_, String>((status, body))
    })?;
    let json: Option<Value> = serde_json::from_slice(&body).ok();
    if status == 200 {
        return json.ok_or_else(|| {
            format!("the server at {base} answered {uri} with a body that is not JSON")
        });
    }
    let message = json
        .as_ref()
        .and_then(|v| v["error"]["message"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(200).collect());
    Err(match status {
        401 if token.is_some() => format!(
            "the server at {base} refused the admin token (401): check --admin-token / UNDERSTUDY_ADMIN_TOKEN"
        ),
        401 => format!(
            "the server at {base} needs its admin token (401): give --admin-token TOKEN or set UNDERSTUDY_ADMIN_TOKEN"
        ),
        _ => format!("the server at {base} answered {status}: {message}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_urls_and_attempt_ids_are_refused_before_any_request() {
        let e = evidence("http://127.0.0.1:1", None, "../x").unwrap_err();
        assert!(e.contains("not an attempt id"), "{e}");
        let e = get_json("localhost:1", "/health", None).unwrap_err();
        assert!(e.contains("http://HOST:PORT"), "{e}");
    }
}
