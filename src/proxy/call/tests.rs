//! Tests of the call stages (`super`).

use super::*;
use crate::contract::template::CompiledMatch;
use crate::contract::MatchSpec;
use crate::mock::path::DotPath;
use hyper::http::HeaderMap;
use serde_json::{json, Map};

fn builtin_match(captures: Map<String, Value>) -> Matched {
    let m = CompiledMatch::compile(&MatchSpec {
        method: "GET".into(),
        path: "/x".into(),
        query: Default::default(),
        headers: Default::default(),
        body: None,
    })
    .unwrap();
    Matched {
        target: Target::Builtin(Arc::new(crate::app::BuiltinOp {
            operation_id: "x".into(),
            description: None,
            matcher: m,
            write: None,
        })),
        captures,
        near_files: None,
    }
}

#[test]
fn input_merges_captures_query_and_body() {
    let mut caps = Map::new();
    caps.insert("id".into(), json!("001"));
    let m = builtin_match(caps);
    let q = vec![("q".to_string(), "SELECT Id".to_string())];
    let v = build_input(&m, &q, true, Ok(Some(json!({"Name": "A"})))).unwrap();
    assert_eq!(v, json!({"id": "001", "q": "SELECT Id", "Name": "A"}));
    let v = build_input(&m, &q, false, Ok(Some(json!([1, 2])))).unwrap();
    assert_eq!(v, json!({"id": "001", "body": [1, 2]}));
    let v = build_input(&m, &q, false, Ok(Some(json!({"id": "body wins"})))).unwrap();
    assert_eq!(v, json!({"id": "body wins"}));
    let e = build_input(
        &m,
        &q,
        false,
        Err(crate::http::request::BodyError::NotJson("x".into())),
    )
    .unwrap_err();
    assert_eq!(e.status, 400);
}

fn req_with(headers: &[(&str, &str)]) -> Request {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.append(
            hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    Request::new(
        "POST",
        "/crm/x",
        None,
        h,
        bytes::Bytes::new(),
        "127.0.0.1:9".parse().unwrap(),
        std::time::Instant::now(),
    )
}

#[test]
fn idempotency_keys() {
    let by_header = IdempotencySource::Header("Idempotency-Key".into());
    let r = req_with(&[("idempotency-key", "\"8e03978e\"")]);
    assert_eq!(
        idempotency_key(Some(&by_header), &r, &json!({})).as_deref(),
        Some("8e03978e")
    );
    let r = req_with(&[("idempotency-key", "abc")]);
    assert_eq!(
        idempotency_key(Some(&by_header), &r, &json!({})).as_deref(),
        Some("abc")
    );
    assert_eq!(
        idempotency_key(Some(&by_header), &req_with(&[]), &json!({})),
        None
    );
    let by_input = IdempotencySource::Input(DotPath::parse("order.key").unwrap());
    let input = json!({"order": {"key": "k-1"}});
    assert_eq!(
        idempotency_key(Some(&by_input), &r, &input).as_deref(),
        Some("k-1")
    );
    assert_eq!(idempotency_key(None, &r, &input), None);
}

#[test]
fn traceparent_header() {
    let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_eq!(
        trace_id(&req_with(&[("traceparent", ok)])).as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    assert_eq!(
        trace_id(&req_with(&[("traceparent", ok), ("traceparent", ok)])),
        None
    );
    assert_eq!(trace_id(&req_with(&[("traceparent", "nope")])), None);
}

#[test]
fn harness_decision_shape() {
    let d = Decision::harness(HarnessError::new(HarnessCode::UnmatchedRequest, "m"));
    assert_eq!(d.response.status, 500);
    assert_eq!(d.result_status, ResultStatus::HarnessError);
    assert_eq!(d.result["status"], 500);
    assert_eq!(
        d.result["data"]["understudy_error"]["code"],
        "unmatched_request"
    );
}
