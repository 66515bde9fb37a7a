//! The secrets of a call the mock does not answer (forwarded, blocked, simulated): the secret
//! values its request carries, computed once per call and kept in `CallInfo::secrets`, and
//! the scrub of every value that goes into its evidence ([`scrub`]).

use serde_json::Value;

use crate::app::App;
use crate::author::record;
use crate::http::Request;
use crate::util::json::cut_secrets;

/// The secret values a request carries, at least 8 characters long: secret headers (whole,
/// and the credential after a scheme such as `Bearer `; each cookie value), secret query
/// parameters and secret fields of a JSON body (the denylist of [`crate::author::record::scrub`] plus
/// the project's `scrub`). `body`: the request's JSON body, parsed once by the caller.
pub fn secret_values(app: &App, req: &Request, body: Option<&Value>) -> Vec<String> {
    let mut out = Vec::new();
    let fields = &app.config.scrub.fields;
    for (k, v) in &req.query {
        if record::is_secret_field(k, fields) && v.len() >= 8 {
            out.push(v.clone());
        }
    }
    if let Some(body) = body {
        secret_fields(body, fields, &mut out);
    }
    for (k, v) in &req.headers {
        if !record::is_secret_header(k.as_str(), &app.config.scrub.headers) {
            continue;
        }
        let Ok(v) = v.to_str() else { continue };
        let v = v.trim();
        for part in std::iter::once(v).chain(v.split_once(' ').map(|(_, t)| t.trim())) {
            if part.len() >= 8 && !out.iter().any(|o| o == part) {
                out.push(part.to_string());
            }
        }
        // Cookies: each value.
        if k == hyper::header::COOKIE {
            for c in v.split(';') {
                if let Some((_, val)) = c.split_once('=') {
                    let val = val.trim();
                    if val.len() >= 8 {
                        out.push(val.to_string());
                    }
                }
            }
        }
    }
    // Longest first, so a value containing another is cut whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// The values of secret fields anywhere in `v`.
fn secret_fields(v: &Value, fields: &[String], out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if record::is_secret_field(k, fields) {
                    let text = match x {
                        Value::String(s) => s.clone(),
                        Value::Null => continue,
                        other => other.to_string(),
                    };
                    if text.len() >= 8 {
                        out.push(text);
                    }
                } else {
                    secret_fields(x, fields, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| secret_fields(x, fields, out)),
        _ => {}
    }
}

/// Scrub a value for evidence: secret fields, then the request's secret values.
pub fn scrub(app: &App, secrets: &[String], v: &mut Value) {
    // The one scrubber (`crate::util::scrub`): names, shapes and known secrets, so an echo
    // of a named secret gets the same mark.
    app.store.scrubber().json(v);
    cut_secrets(v, secrets);
}
