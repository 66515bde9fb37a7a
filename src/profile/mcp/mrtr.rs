//! Server-to-client requests in 2026-07-28: Multi Round-Trip Requests (MRTR, SEP-2322).
//! There is no session and no stream to ask on, so a `tools/call`, `prompts/get` or
//! `resources/read` whose variant declares `ask_client` is answered with an
//! `InputRequiredResult` and the client retries the same request with the answers:
//!
//! ```text
//! → tools/call {name, arguments}
//! ← {"resultType": "input_required",
//!    "inputRequests": {"<key>": {"method": "elicitation/create", "params": {…}}},
//!    "requestState": "<payload>.<mac>"}
//! → tools/call {name, arguments, "inputResponses": {"<key>": {"action": "accept", …}},
//!               "requestState": "<payload>.<mac>"}           (a new JSON-RPC id)
//! ← the complete result, evaluated with `$response`
//! ```
//!
//! Rules (decisions in **bold**):
//! - The `inputRequests` of one answer are the unanswered requests of the lowest round that
//!   has any; a retry that still lacks one (a wrong key, a missing one) gets a new
//!   `InputRequiredResult` for what is missing (the spec's SHOULD); keys nobody asked are
//!   ignored. When every request is answered, the call is evaluated with the answers.
//! - Every `InputRequiredResult` carries `requestState`: base64url of a JSON payload (the
//!   request's identity — method, name or URI, a digest of the arguments —, the answers so far
//!   and an expiry) and an HMAC-SHA256 over it with a random key of the endpoint (one attempt
//!   and integration). A retry whose `requestState` fails the MAC, or names another request, is
//!   refused with -32602 before anything runs; so is an `inputResponses` that is not an object
//!   of objects. A state from another attempt fails the MAC.
//! - **The expiry is the ask bound of the session era** (30 s): a retry after it is the
//!   session era's "no answer within the bound" — the call is recorded as an input error with
//!   `$response` `{"timed_out_ms": n}`.
//! - A retry without `requestState` is read from its `inputResponses` alone (the spec lets a
//!   server keep no state; earlier rounds' answers are then missing and asked again).
//! - Capabilities come from `_meta["io.modelcontextprotocol/clientCapabilities"]`: a request
//!   whose capability (`elicitation`, `sampling`, `roots`) the client did not declare is never
//!   sent (the spec's MUST NOT). The call is recorded as an input error at once, as in the
//!   session era, and answered with the 2026-07-28 `MissingRequiredClientCapabilityError`:
//!   HTTP 400, JSON-RPC -32021, `data {"requiredCapabilities": {"<capability>": {}}}`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{KeyInit, Mac};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::ask::{capability_for, duration_ms, Asked, Asker, ClientAnswer};
use super::http::{b64url_decode, b64url_encode};
use crate::mock::model::ClientRequests;
use std::future::Future;
use std::pin::Pin;

/// Params members of a retry.
pub const INPUT_RESPONSES: &str = "inputResponses";
pub const REQUEST_STATE: &str = "requestState";

/// The methods that may answer `input_required`.
pub const SUPPORTED: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// The random key an endpoint seals `requestState` with.
pub type StateKey = [u8; 32];

/// A fresh key; `None` when the OS has no randomness (asking then fails as a harness error).
pub fn new_key() -> Option<StateKey> {
    let mut k = [0u8; 32];
    getrandom::fill(&mut k).ok().map(|_| k)
}

/// The asker of one stateless request (see the module doc).
pub(super) struct MrtrAsker {
    capabilities: Value,
    /// Answers by key: those the verified `requestState` carried, then `inputResponses`.
    answers: Map<String, Value>,
    /// The verified `requestState` had expired.
    expired: bool,
    key: Option<StateKey>,
    identity: String,
    ttl: Duration,
    /// The undeclared capability a request needed (the answer becomes -32021).
    missing: std::sync::Mutex<Option<&'static str>>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(duration_ms)
        .unwrap_or(0)
}

/// What a `requestState` is bound to: method, name or URI, and a digest of the arguments.
fn identity(method: &str, params: Option<&Map<String, Value>>) -> String {
    let p = |k: &str| {
        params
            .and_then(|m| m.get(k))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let target = if method == "resources/read" {
        p("uri")
    } else {
        p("name")
    };
    // serde_json maps are sorted (no preserve_order), so the text is canonical.
    let text = json!([method, target, p("arguments")]).to_string();
    let d = Sha256::digest(text.as_bytes());
    b64url_encode(&d[..16])
}

fn mac(key: &StateKey, payload: &str) -> hmac::Hmac<Sha256> {
    let mut m = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    m.update(payload.as_bytes());
    m
}

impl MrtrAsker {
    /// The asker of a request: `requestState` verified, `inputResponses` read. `Err` is the
    /// -32602 message.
    pub(super) fn new(
        key: Option<StateKey>,
        ttl: Duration,
        method: &str,
        params: Option<&Map<String, Value>>,
        capabilities: Value,
    ) -> Result<MrtrAsker, String> {
        let identity = identity(method, params);
        let mut asker = MrtrAsker {
            capabilities,
            answers: Map::new(),
            expired: false,
            key,
            identity,
            ttl,
            missing: std::sync::Mutex::new(None),
        };
        match params.and_then(|p| p.get(REQUEST_STATE)) {
            None => {}
            Some(Value::String(state)) => asker.open(state)?,
            Some(_) => return Err(format!("Invalid params: {REQUEST_STATE} must be a string")),
        }
        match params.and_then(|p| p.get(INPUT_RESPONSES)) {
            None => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    if !v.is_object() {
                        return Err(format!(
                            "Invalid params: {INPUT_RESPONSES}.{k} must be an object (the client's result for that request)"
                        ));
                    }
                    asker.answers.insert(k.clone(), v.clone());
                }
            }
            Some(_) => {
                return Err(format!(
                    "Invalid params: {INPUT_RESPONSES} must be an object (request key → the client's result)"
                ))
            }
        }
        Ok(asker)
    }

    /// Verify a `requestState` and take its answers.
    fn open(&mut self, state: &str) -> Result<(), String> {
        let refused = || {
            format!("Invalid params: {REQUEST_STATE} failed verification (it was not issued by this server for this attempt, or it was altered)")
        };
        let key = self.key.as_ref().ok_or_else(refused)?;
        let (payload, tag) = state.split_once('.').ok_or_else(refused)?;
        let tag = b64url_decode(tag).ok_or_else(refused)?;
        mac(key, payload)
            .verify_slice(&tag)
            .map_err(|_| refused())?;
        let body: Value = b64url_decode(payload)
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(refused)?;
        if body["id"].as_str() != Some(self.identity.as_str()) {
            return Err(format!(
                "Invalid params: {REQUEST_STATE} belongs to another request (a retry repeats the method, name and arguments of the request that was answered input_required)"
            ));
        }
        self.expired = body["exp"].as_u64().is_none_or(|e| now_ms() > e);
        if let Some(a) = body["answers"].as_object() {
            self.answers.extend(a.clone());
        }
        Ok(())
    }

    /// A `requestState` carrying `answers`, valid for the ask bound.
    fn seal(&self, answers: Map<String, Value>) -> Option<String> {
        let key = self.key.as_ref()?;
        let body = json!({
            "id": self.identity,
            "answers": answers,
            "exp": now_ms().saturating_add(duration_ms(self.ttl)),
        });
        let payload = b64url_encode(body.to_string().as_bytes());
        let tag = mac(key, &payload).finalize().into_bytes();
        Some(format!("{payload}.{}", b64url_encode(&tag)))
    }

    fn decide(&self, requests: &ClientRequests) -> Asked {
        for r in &requests.requests {
            let cap = capability_for(&r.method);
            if self.capabilities.get(cap).is_none() {
                *self.missing.lock().unwrap_or_else(|p| p.into_inner()) = Some(cap);
                return Asked::Answers(vec![(
                    r.key.clone(),
                    ClientAnswer::Unavailable(format!(
                        "the client did not declare the `{cap}` capability in _meta \"{}\"",
                        super::META_CLIENT_CAPABILITIES
                    )),
                )]);
            }
        }
        if self.expired {
            let key = requests.requests.first().map(|r| r.key.clone());
            return Asked::Answers(vec![(
                key.unwrap_or_default(),
                ClientAnswer::TimedOut(duration_ms(self.ttl)),
            )]);
        }
        let missing = requests
            .requests
            .iter()
            .filter(|r| !self.answers.contains_key(&r.key))
            .map(|r| r.round)
            .min();
        let Some(round) = missing else {
            return Asked::Answers(
                requests
                    .requests
                    .iter()
                    .map(|r| {
                        (
                            r.key.clone(),
                            ClientAnswer::Result(self.answers[&r.key].clone()),
                        )
                    })
                    .collect(),
            );
        };
        let mut input_requests = Map::new();
        let mut kept = Map::new();
        for r in &requests.requests {
            match self.answers.get(&r.key) {
                Some(a) => {
                    kept.insert(r.key.clone(), a.clone());
                }
                None if r.round == round => {
                    input_requests.insert(
                        r.key.clone(),
                        json!({"method": r.method, "params": r.params}),
                    );
                }
                None => {}
            }
        }
        let Some(state) = self.seal(kept) else {
            let key = requests.requests.first().map(|r| r.key.clone());
            return Asked::Answers(vec![(
                key.unwrap_or_default(),
                ClientAnswer::Unavailable(
                    "the server has no randomness to protect requestState with".into(),
                ),
            )]);
        };
        Asked::InputRequired(json!({
            "resultType": "input_required",
            "inputRequests": input_requests,
            "requestState": state,
        }))
    }
}

impl Asker for MrtrAsker {
    fn ask<'a>(
        &'a self,
        requests: &'a ClientRequests,
    ) -> Pin<Box<dyn Future<Output = Asked> + Send + 'a>> {
        let asked = self.decide(requests);
        Box::pin(async move { asked })
    }

    fn missing_capability(&self) -> Option<&'static str> {
        *self.missing.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::model::ClientRequest;

    fn requests() -> ClientRequests {
        let r = |key: &str, round: u64, method: &str| ClientRequest {
            key: key.into(),
            round,
            method: method.into(),
            params: json!({"k": key}),
        };
        ClientRequests {
            single: false,
            requests: vec![
                r("name", 1, "elicitation/create"),
                r("roots", 1, "roots/list"),
                r("color", 2, "elicitation/create"),
            ],
        }
    }

    fn caps() -> Value {
        json!({"elicitation": {}, "roots": {}})
    }

    fn call(extra: Value) -> Map<String, Value> {
        let mut p = json!({"name": "t", "arguments": {"a": 1}});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p.as_object().unwrap().clone()
    }

    fn asker(key: StateKey, params: &Map<String, Value>) -> Result<MrtrAsker, String> {
        MrtrAsker::new(
            Some(key),
            Duration::from_secs(30),
            "tools/call",
            Some(params),
            caps(),
        )
    }

    fn required(a: Asked) -> Value {
        match a {
            Asked::InputRequired(v) => v,
            other => panic!("expected input_required, got {other:?}"),
        }
    }

    #[test]
    fn rounds_are_asked_in_order_and_answers_ride_in_the_state() {
        let key = [7u8; 32];
        let first = required(asker(key, &call(json!({}))).unwrap().decide(&requests()));
        assert_eq!(first["resultType"], "input_required");
        let keys: Vec<&String> = first["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "roots"], "round 1 only");
        assert_eq!(
            first["inputRequests"]["roots"],
            json!({"method": "roots/list", "params": {"k": "roots"}})
        );
        // round 1 answered (plus a key nobody asked): round 2 is asked, answers carried
        let retry = call(json!({
            "inputResponses": {"name": {"action": "accept"}, "roots": {"roots": []}, "extra": {}},
            "requestState": first["requestState"]}));
        let second = required(asker(key, &retry).unwrap().decide(&requests()));
        let keys: Vec<&String> = second["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["color"]);
        assert_ne!(second["requestState"], first["requestState"]);
        // round 2 answered with the new state only: everything, in order
        let last = call(json!({"inputResponses": {"color": {"action": "decline"}},
            "requestState": second["requestState"]}));
        match asker(key, &last).unwrap().decide(&requests()) {
            Asked::Answers(a) => {
                let got: Vec<(&str, &ClientAnswer)> =
                    a.iter().map(|(k, v)| (k.as_str(), v)).collect();
                assert_eq!(
                    got,
                    [
                        ("name", &ClientAnswer::Result(json!({"action": "accept"}))),
                        ("roots", &ClientAnswer::Result(json!({"roots": []}))),
                        ("color", &ClientAnswer::Result(json!({"action": "decline"}))),
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        // a missing answer is asked again, not an error
        let partial = call(json!({"inputResponses": {"name": {"action": "accept"}}}));
        let again = required(asker(key, &partial).unwrap().decide(&requests()));
        let keys: Vec<&String> = again["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["roots"]);
    }

    #[test]
    fn altered_foreign_or_misplaced_state_is_refused() {
        let key = [7u8; 32];
        let first = required(asker(key, &call(json!({}))).unwrap().decide(&requests()));
        let state = first["requestState"].as_str().unwrap().to_string();
        let tampered = call(json!({"requestState": format!("{state}-TAMPERED")}));
        assert!(asker(key, &tampered)
            .err()
            .unwrap()
            .contains("failed verification"));
        let other_key = call(json!({"requestState": state}));
        assert!(
            asker([8u8; 32], &other_key).is_err(),
            "another endpoint's key"
        );
        let mut other_args = call(json!({"requestState": state}));
        other_args.insert("arguments".into(), json!({"a": 2}));
        assert!(asker(key, &other_args)
            .err()
            .unwrap()
            .contains("another request"));
        for bad in [
            json!({"inputResponses": null}),
            json!({"inputResponses": {"name": 12345}}),
            json!({"requestState": 5}),
        ] {
            assert!(asker(key, &call(bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn undeclared_capabilities_and_expired_state_end_the_call() {
        let key = [7u8; 32];
        let no_roots = MrtrAsker::new(
            Some(key),
            Duration::from_secs(30),
            "tools/call",
            Some(&call(json!({}))),
            json!({"elicitation": {}}),
        )
        .unwrap();
        match no_roots.decide(&requests()) {
            Asked::Answers(a) => {
                assert_eq!(a.len(), 1);
                assert_eq!(a[0].0, "roots");
                assert!(matches!(&a[0].1, ClientAnswer::Unavailable(w) if w.contains("`roots`")));
            }
            other => panic!("{other:?}"),
        }
        let zero = MrtrAsker::new(
            Some(key),
            Duration::ZERO,
            "tools/call",
            Some(&call(json!({}))),
            caps(),
        )
        .unwrap();
        let first = required(zero.decide(&requests()));
        std::thread::sleep(Duration::from_millis(2));
        let late = MrtrAsker::new(
            Some(key),
            Duration::ZERO,
            "tools/call",
            Some(&call(json!({"requestState": first["requestState"]}))),
            caps(),
        )
        .unwrap();
        assert_eq!(
            late.decide(&requests()),
            Asked::Answers(vec![("name".into(), ClientAnswer::TimedOut(0))])
        );
    }
}
