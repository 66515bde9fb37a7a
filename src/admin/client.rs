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
    check_id(attempt_id)?;
    get_json(base, &format!("/attempts/{attempt_id}/evidence"), token)
}

/// One page of the evidence envelope of `attempt_id` (`?after=&limit=`): the entries of
/// the page, the verdict and contract results over the whole timeline.
pub fn evidence_page(
    base: &str,
    token: Option<&str>,
    attempt_id: &str,
    after: u64,
    limit: u64,
) -> Result<Value, String> {
    check_id(attempt_id)?;
    get_json(
        base,
        &format!("/attempts/{attempt_id}/evidence?after={after}&limit={limit}"),
        token,
    )
}

/// The whole evidence envelope of `attempt_id`, streamed: every byte of the answer is
/// copied to `out` as it arrives, and only the verdict is kept (its `verdict` and
/// `verdict_reasons` members; the rest is read past without being held). `Err` when the
/// server cannot be reached, answers anything but 200, or breaks off before the end.
pub fn evidence_to(
    base: &str,
    token: Option<&str>,
    attempt_id: &str,
    out: &mut dyn std::io::Write,
) -> Result<Value, String> {
    check_id(attempt_id)?;
    let base = base.trim_end_matches('/');
    let (rt, resp) = send_get(base, &format!("/attempts/{attempt_id}/evidence"), token)?;
    let status = resp.status().as_u16();
    if status != 200 {
        let body = rt
            .block_on(resp.into_body().collect())
            .map_err(|e| format!("the server at {base} broke off its answer: {e}"))?
            .to_bytes();
        return Err(answer_error(base, status, &body, token));
    }
    let reader = BodyReader {
        rt: &rt,
        body: resp.into_body(),
        pending: Bytes::new(),
    };
    let tee = Tee { inner: reader, out };
    #[derive(serde::Deserialize)]
    struct VerdictPart {
        verdict: Option<Value>,
        verdict_reasons: Option<Value>,
    }
    let part: VerdictPart = serde_json::from_reader(std::io::BufReader::new(tee)).map_err(|e| {
        format!("the server at {base} answered an evidence envelope that cannot be read whole: {e}")
    })?;
    let mut v = serde_json::Map::new();
    if let Some(x) = part.verdict {
        v.insert("verdict".into(), x);
    }
    if let Some(x) = part.verdict_reasons {
        v.insert("verdict_reasons".into(), x);
    }
    Ok(Value::Object(v))
}

fn check_id(attempt_id: &str) -> Result<(), String> {
    if !attempt_id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!(
            "`{attempt_id}` is not an attempt id (letters, digits, `-` and `_`)"
        ));
    }
    Ok(())
}

/// A blocking `Read` over a response body (frames pulled on the client's own runtime).
struct BodyReader<'a> {
    rt: &'a tokio::runtime::Runtime,
    body: hyper::body::Incoming,
    pending: Bytes,
}

impl std::io::Read for BodyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pending.is_empty() {
            match self.rt.block_on(self.body.frame()) {
                None => return Ok(0),
                Some(Err(e)) => return Err(std::io::Error::other(e)),
                Some(Ok(f)) => {
                    if let Ok(d) = f.into_data() {
                        self.pending = d;
                    }
                }
            }
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending.split_to(n));
        Ok(n)
    }
}

/// Copies what is read to `out`.
struct Tee<'a, R> {
    inner: R,
    out: &'a mut dyn std::io::Write,
}

impl<R: std::io::Read> std::io::Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out.write_all(&buf[..n])?;
        Ok(n)
    }
}

/// `GET {base}/_understudy/api{path}` → the JSON body of a 200; any other answer is an error
/// naming the server and carrying the admin API's message.
pub fn get_json(base: &str, path: &str, token: Option<&str>) -> Result<Value, String> {
    let base = base.trim_end_matches('/');
    let (rt, resp) = send_get(base, path, token)?;
    let status = resp.status().as_u16();
    let body = rt
        .block_on(resp.into_body().collect())
        .map_err(|e| format!("the server at {base} broke off its answer: {e}"))?
        .to_bytes();
    if status == 200 {
        return serde_json::from_slice(&body).map_err(|_| {
            format!(
                "the server at {base} answered {base}{PREFIX}{path} with a body that is not JSON"
            )
        });
    }
    Err(answer_error(base, status, &body, token))
}

/// Sends `GET {base}/_understudy/api{path}` on a small runtime of its own (returned: the
/// body is read on it).
fn send_get(
    base: &str,
    path: &str,
    token: Option<&str>,
) -> Result<
    (
        tokio::runtime::Runtime,
        hyper::Response<hyper::body::Incoming>,
    ),
    String,
> {
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
    let resp = rt.block_on(async {
        let client = Upstream::new(None, TIMEOUT)?;
        client
            .forward(req)
            .await
            .map_err(|e| format!("cannot reach the server at {base}: {}", e.cause))
    })?;
    Ok((rt, resp))
}

/// The error of an answer other than 200, with the admin API's message.
fn answer_error(base: &str, status: u16, body: &[u8], token: Option<&str>) -> String {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let message = json
        .as_ref()
        .and_then(|v| v["error"]["message"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(200).collect());
    match status {
        401 if token.is_some() => format!(
            "the server at {base} refused the admin token (401): check --admin-token / UNDERSTUDY_ADMIN_TOKEN"
        ),
        401 => format!(
            "the server at {base} needs its admin token (401): give --admin-token TOKEN or set UNDERSTUDY_ADMIN_TOKEN"
        ),
        _ => format!("the server at {base} answered {status}: {message}"),
    }
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
