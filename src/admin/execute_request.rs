//! What a `POST /tools/execute` asks for beyond the operation and its input, checked before
//! anything runs; every refusal names the header or JSON field at fault.
//!
//! - **The time budget** ([`budget`]): the body's `timeout_seconds` (a number, fractions
//!   allowed) and the headers `Request-Timeout` (whole seconds) and `Request-Timeout-Millis`
//!   (whole milliseconds), as seed 004 gives them; when several are given the smallest wins,
//!   when none [`DEFAULT_TIMEOUT_S`]. A budget is at most [`MAX_PLAIN_TIMEOUT_S`] for a plain
//!   JSON answer and at most [`MAX_STREAMED_TIMEOUT_S`] with `stream_response: true`
//!   (heartbeats keep the connection alive): beyond the first without streaming is 422
//!   `stream_required`, beyond the second 422 `timeout_too_long`. A value that is not a
//!   positive number is 400.
//! - **`test_context`** ([`TestContext::parse`]): `{"secrets"?: {"authorization": "…"},
//!   "metadata"?: {…}}`. `secrets.authorization` is the `Authorization` header of this one
//!   upstream call, instead of `UNDERSTUDY_UPSTREAM_AUTH_<INTEGRATION>`; it is the only secret
//!   understudy can send (it runs no code that could read others), so another name is 422.
//!   `metadata` (any JSON object) is echoed back. A secret value never appears in an answer,
//!   a message or a log line: the answer lists the secret *names* only, and the messages here
//!   name fields, never values.

use std::time::Duration;

use hyper::http::{HeaderValue, StatusCode};
use serde_json::{json, Map, Value};

use super::ApiError;
use crate::http::Request;
use crate::util::json::type_name;

/// The budget when none is given: seed 004's default.
pub const DEFAULT_TIMEOUT_S: f64 = 30.0;
/// The longest budget of a non-streamed execute (seed 004).
pub const MAX_PLAIN_TIMEOUT_S: f64 = 300.0;
/// The longest budget of a streamed execute (seed 004).
pub const MAX_STREAMED_TIMEOUT_S: f64 = 21600.0;

/// The header giving the budget in whole seconds.
pub const TIMEOUT_HEADER: &str = "Request-Timeout";
/// The header giving the budget in whole milliseconds.
pub const TIMEOUT_MILLIS_HEADER: &str = "Request-Timeout-Millis";

/// How long an execute may take, and who said so (for messages).
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    pub seconds: f64,
    /// `timeout_seconds`, `the Request-Timeout header`, … or `the default`.
    pub source: String,
}

impl Budget {
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.seconds)
    }
}

/// The budget of one execute (module doc).
pub fn budget(
    req: &Request,
    timeout_seconds: Option<f64>,
    streamed: bool,
) -> Result<Budget, ApiError> {
    let mut given: Vec<Budget> = Vec::new();
    if let Some(s) = timeout_seconds {
        if !(s.is_finite() && s > 0.0) {
            return Err(ApiError::bad_request(format!(
                "timeout_seconds: expected a number of seconds > 0, got {s}"
            )));
        }
        given.push(Budget {
            seconds: s,
            source: "timeout_seconds".into(),
        });
    }
    for (name, per_second) in [(TIMEOUT_HEADER, 1.0), (TIMEOUT_MILLIS_HEADER, 1000.0)] {
        if let Some(n) = whole_header(req, name)? {
            given.push(Budget {
                seconds: n as f64 / per_second,
                source: format!("the {name} header"),
            });
        }
    }
    let b = given
        .into_iter()
        .min_by(|a, b| a.seconds.total_cmp(&b.seconds))
        .unwrap_or(Budget {
            seconds: DEFAULT_TIMEOUT_S,
            source: "the default".into(),
        });
    if b.seconds > MAX_STREAMED_TIMEOUT_S {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "timeout_too_long",
            format!(
                "{}: a budget of {} s is longer than any execute may take ({MAX_STREAMED_TIMEOUT_S} s, streamed)",
                b.source, b.seconds
            ),
        ));
    }
    if b.seconds > MAX_PLAIN_TIMEOUT_S && !streamed {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "stream_required",
            format!(
                "{}: a budget of {} s is longer than a non-streaming execute may take ({MAX_PLAIN_TIMEOUT_S} s): set `stream_response: true` (heartbeats keep the connection open, up to {MAX_STREAMED_TIMEOUT_S} s) or ask for at most {MAX_PLAIN_TIMEOUT_S} s",
                b.source, b.seconds
            ),
        ));
    }
    Ok(b)
}

/// A header holding a whole number > 0, or `None` when absent.
fn whole_header(req: &Request, name: &str) -> Result<Option<u64>, ApiError> {
    let mut values = req.headers.get_all(name).iter();
    let Some(v) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::bad_request(format!(
            "{name} header: given more than once; send it once"
        )));
    }
    let unit = if name == TIMEOUT_HEADER {
        "seconds"
    } else {
        "milliseconds"
    };
    let text = v.to_str().unwrap_or("").trim();
    match text.parse::<u64>() {
        Ok(n) if n > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(n)),
        _ => Err(ApiError::bad_request(format!(
            "{name} header: expected a whole number of {unit} > 0, got {:?}",
            v.to_str().unwrap_or("(not text)")
        ))),
    }
}

/// The `test_context` of an execute (module doc). No `Debug`: it holds a secret.
pub struct TestContext {
    /// `secrets.authorization`: the upstream call's `Authorization` header.
    pub authorization: Option<String>,
    metadata: Option<Map<String, Value>>,
    secret_names: Vec<String>,
}

impl TestContext {
    /// Check `test_context` (absent → `None`).
    pub fn parse(v: Option<&Value>) -> Result<Option<TestContext>, ApiError> {
        let Some(v) = v else {
            return Ok(None);
        };
        let unprocessable =
            |m: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_test_context", m);
        let Value::Object(m) = v else {
            return Err(ApiError::bad_request(format!(
                "test_context: expected a JSON object {{\"secrets\"?, \"metadata\"?}}, got {}",
                type_name(v)
            )));
        };
        if let Some(k) = m
            .keys()
            .find(|k| !matches!(k.as_str(), "secrets" | "metadata"))
        {
            return Err(ApiError::bad_request(format!(
                "test_context.{k}: unknown member; expected `secrets` (an object of strings) and/or `metadata` (an object)"
            )));
        }
        let metadata = match m.get("metadata") {
            None => None,
            Some(Value::Object(md)) => Some(md.clone()),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "test_context.metadata: expected a JSON object, got {}",
                    type_name(other)
                )))
            }
        };
        let mut ctx = TestContext {
            authorization: None,
            metadata,
            secret_names: Vec::new(),
        };
        let secrets = match m.get("secrets") {
            None => return Ok(Some(ctx)),
            Some(Value::Object(s)) => s,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "test_context.secrets: expected a JSON object of strings ({{\"authorization\": \"Bearer …\"}}), got {}",
                    type_name(other)
                )))
            }
        };
        for (name, value) in secrets {
            let at = format!("test_context.secrets.{name}");
            let Value::String(s) = value else {
                return Err(ApiError::bad_request(format!(
                    "{at}: expected a string, got {}",
                    type_name(value)
                )));
            };
            if !name.eq_ignore_ascii_case("authorization") {
                return Err(unprocessable(format!(
                    "{at}: understudy can send only `authorization` (the upstream call's Authorization header); it runs no code that could use another secret"
                )));
            }
            if s.trim().is_empty() || HeaderValue::from_str(s).is_err() {
                return Err(unprocessable(format!(
                    "{at}: expected a non-empty header value (visible ASCII, e.g. \"Bearer …\"); the value is not shown"
                )));
            }
            ctx.authorization = Some(s.clone());
            ctx.secret_names.push(name.clone());
        }
        Ok(Some(ctx))
    }

    /// What the answer shows of it: the metadata as given, the secrets by name only.
    pub fn to_json(&self) -> Value {
        json!({ "metadata": self.metadata, "secrets": self.secret_names })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_context_messages_never_show_a_secret() {
        for bad in [
            json!("Bearer sk-SHOWN-1"),
            json!({"secrets": "Bearer sk-SHOWN-1"}),
            json!({"secrets": {"authorization": ["Bearer sk-SHOWN-1"]}}),
            json!({"secrets": {"api_token": "sk-SHOWN-1"}}),
            json!({"secrets": {"authorization": "Bearer sk-SHOWN-1\n"}}),
        ] {
            let e = TestContext::parse(Some(&bad)).err().expect("refused");
            assert!(e.message.contains("test_context"), "{}", e.message);
            assert!(!e.message.contains("SHOWN"), "{}", e.message);
        }
        let c = TestContext::parse(Some(
            &json!({"secrets": {"Authorization": "Bearer sk-x"}, "metadata": {"a": 1}}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(c.authorization.as_deref(), Some("Bearer sk-x"));
        assert_eq!(
            c.to_json(),
            json!({"metadata": {"a": 1}, "secrets": ["Authorization"]})
        );
    }
}
