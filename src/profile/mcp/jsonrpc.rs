//! JSON-RPC 2.0 messages as MCP uses them: classifying what a client POSTed, building
//! results and errors, and the error codes of both protocol eras.

use serde_json::{json, Map, Value};

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON is not a valid JSON-RPC message.
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Transport-level refusals (missing session, wrong Accept…): implementation-defined range,
/// the code the official TypeScript SDK server uses for them.
pub const TRANSPORT_ERROR: i64 = -32000;
/// An unknown or ended session (TypeScript SDK convention, sent with HTTP 404).
pub const SESSION_NOT_FOUND: i64 = -32001;
/// 2026-07-28: HTTP headers do not match the body, or a required header is missing.
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28 `MissingRequiredClientCapabilityError`: the request needs a capability the
/// client did not declare in `_meta`.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// 2026-07-28: the requested protocol version is not supported.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A POST body as the MCP endpoint reads it: parsed once, where it arrives, then passed on —
/// to the dialect ([`super::McpEndpoint::handle_posted`]), to the forwarding of a message the
/// real server answers, and to every answer that echoes its `id` ([`Posted::id`]) — so no
/// later stage parses the body again.
#[derive(Debug, Clone)]
pub struct Posted {
    /// The JSON value, or why the body is not JSON (serde's message).
    parsed: Result<Value, String>,
}

impl Posted {
    /// Parse a POST body (the one parse of an MCP request's body).
    pub fn parse(body: &[u8]) -> Posted {
        Posted {
            parsed: serde_json::from_slice(body).map_err(|e| e.to_string()),
        }
    }

    /// Nothing was posted (a `GET` or `DELETE`, which carry no message).
    pub fn none() -> Posted {
        Posted {
            parsed: Err("no message".into()),
        }
    }

    /// The JSON value, when the body is JSON.
    pub fn value(&self) -> Option<&Value> {
        self.parsed.as_ref().ok()
    }

    /// The JSON value, or serde's message for a body that is not JSON.
    pub fn parsed(&self) -> Result<&Value, &str> {
        self.parsed.as_ref().map_err(String::as_str)
    }

    /// The `id` an answer to this message echoes: a request's id, else `null`.
    pub fn id(&self) -> Value {
        self.value()
            .and_then(|v| classify(v).ok())
            .map(|m| m.id())
            .unwrap_or(Value::Null)
    }
}

/// One client message, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request: `id` is a string or a number, kept exactly as received.
    Request {
        id: Value,
        method: String,
        params: Option<Map<String, Value>>,
    },
    Notification {
        method: String,
        params: Option<Map<String, Value>>,
    },
    /// A response to a server-to-client request (docs/src/reference/mcp.md, [`super::ask`]): the whole
    /// message as received.
    Response(Value),
}

impl Message {
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            Message::Response(_) => None,
        }
    }

    pub fn params(&self) -> Option<&Map<String, Value>> {
        match self {
            Message::Request { params, .. } | Message::Notification { params, .. } => {
                params.as_ref()
            }
            Message::Response(_) => None,
        }
    }

    /// The caller's id for a request, `null` otherwise.
    pub fn id(&self) -> Value {
        match self {
            Message::Request { id, .. } => id.clone(),
            _ => Value::Null,
        }
    }
}

/// Why a value is not a valid message; `id` is the caller's id when it could be read, else
/// `null` (JSON-RPC 2.0 section 5).
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub id: Value,
    pub message: String,
}

fn valid_id(v: &Value) -> bool {
    v.is_string() || v.is_number()
}

/// Classify one JSON value of a POST body (or one element of a batch).
pub fn classify(v: &Value) -> Result<Message, Invalid> {
    let invalid = |id: Value, message: &str| Invalid {
        id,
        message: format!("Invalid Request: {message}"),
    };
    let Some(obj) = v.as_object() else {
        return Err(invalid(
            Value::Null,
            "a JSON-RPC message must be a JSON object",
        ));
    };
    let id = obj.get("id");
    let echo = id.filter(|i| valid_id(i)).cloned().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(echo, "\"jsonrpc\" must be \"2.0\""));
    }
    if let Some(method) = obj.get("method") {
        let Some(method) = method.as_str() else {
            return Err(invalid(echo, "\"method\" must be a string"));
        };
        let params = match obj.get("params") {
            None => None,
            Some(Value::Object(m)) => Some(m.clone()),
            Some(_) => return Err(invalid(echo, "\"params\" must be an object")),
        };
        return match id {
            None => Ok(Message::Notification {
                method: method.to_string(),
                params,
            }),
            Some(i) if valid_id(i) => Ok(Message::Request {
                id: i.clone(),
                method: method.to_string(),
                params,
            }),
            Some(_) => Err(invalid(
                Value::Null,
                "a request \"id\" must be a string or a number",
            )),
        };
    }
    if id.is_some() && (obj.contains_key("result") || obj.contains_key("error")) {
        return Ok(Message::Response(v.clone()));
    }
    Err(invalid(
        echo,
        "a message needs \"method\" (request, notification) or \"result\"/\"error\" (response)",
    ))
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`.
pub fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// `{"jsonrpc":"2.0","id":…,"error":{"code","message","data"?}}`.
pub fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut e = Map::new();
    e.insert("code".into(), json!(code));
    e.insert("message".into(), json!(message));
    if let Some(d) = data {
        e.insert("data".into(), d);
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": e })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_requests_notifications_responses() {
        let r = classify(&json!({"jsonrpc":"2.0","id":"a","method":"ping"})).unwrap();
        assert_eq!(r.id(), json!("a"));
        assert_eq!(r.method(), Some("ping"));
        let n = classify(&json!({"jsonrpc":"2.0","method":"notifications/initialized"})).unwrap();
        assert!(matches!(n, Message::Notification { .. }));
        let s = classify(&json!({"jsonrpc":"2.0","id":3,"result":{}})).unwrap();
        assert!(matches!(s, Message::Response(_)));
        let e =
            classify(&json!({"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x"}})).unwrap();
        assert!(matches!(e, Message::Response(_)));
    }

    #[test]
    fn rejects_invalid_messages_keeping_a_readable_id() {
        let e = classify(&json!({"id":7,"method":"ping"})).unwrap_err();
        assert_eq!(e.id, json!(7));
        let e = classify(&json!({"jsonrpc":"2.0","id":null,"method":"ping"})).unwrap_err();
        assert_eq!(e.id, Value::Null);
        let e = classify(&json!({"jsonrpc":"2.0","id":{"x":1},"method":"ping"})).unwrap_err();
        assert_eq!(e.id, Value::Null);
        let e = classify(&json!({"jsonrpc":"2.0","id":1,"method":5})).unwrap_err();
        assert_eq!(e.id, json!(1));
        let e = classify(&json!({"jsonrpc":"2.0","id":1,"method":"x","params":[1]})).unwrap_err();
        assert!(e.message.contains("params"));
        assert!(classify(&json!([1])).is_err());
        assert!(classify(&json!({"jsonrpc":"2.0","id":1})).is_err());
    }

    #[test]
    fn ids_are_kept_exactly() {
        for id in [json!("abc"), json!(42), json!(-1), json!(1.5), json!("")] {
            let m = classify(&json!({"jsonrpc":"2.0","id":id,"method":"ping"})).unwrap();
            assert_eq!(m.id(), id);
            assert_eq!(result(&m.id(), json!({}))["id"], id);
        }
    }
}
