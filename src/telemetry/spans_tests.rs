use super::*;
use crate::records::{EventSource, FaultRecord};
use serde_json::json;

fn event(status: ResultStatus) -> ToolEvent {
    ToolEvent {
        sequence: 0,
        execution_attempt_id: "call-1".into(),
        integration: "desk".into(),
        operation_id: Some("book_room".into()),
        revision: Some(3),
        variant: Some("busy".into()),
        rule: None,
        is_write: true,
        arguments: json!({"room": "A", "api_key": "sk-live-123"}),
        result: json!({"booked": true}),
        result_status: status,
        http_status: 200,
        latency_ms: 12.0,
        delay_ms: 0,
        idempotency_key_ref: None,
        trace_id: None,
        source: EventSource::Mock,
        error: None,
        timestamp: "2026-12-03T20:00:00Z".into(),
        fault: None,
    }
}

fn attr<'a>(s: &'a SpanData, k: &str) -> Option<&'a OtelValue> {
    s.attributes
        .iter()
        .find(|kv| kv.key.as_str() == k)
        .map(|kv| &kv.value)
}

const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn traceparents() {
    let c = Caller::parse(TP).unwrap();
    assert_eq!(
        format!("{}", c.trace_id),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(format!("{}", c.span_id), "00f067aa0ba902b7");
    assert!(c.sampled);
    assert!(
        !Caller::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
            .unwrap()
            .sampled
    );
    for bad in [
        "",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
    ] {
        assert_eq!(Caller::parse(bad), None, "{bad}");
    }
}

#[test]
fn a_call_span_is_an_execute_tool_span_under_its_caller() {
    let cx = CallContext {
        caller: Caller::parse(TP),
        ..Default::default()
    };
    let s = call_span(
        &event(ResultStatus::Ok),
        None,
        "att-1",
        &cx,
        None,
        None,
        SystemTime::now(),
    )
    .unwrap();
    assert_eq!(s.name, "execute_tool book_room");
    assert_eq!(s.span_kind, SpanKind::Server);
    assert_eq!(s.span_context.trace_id(), cx.caller.unwrap().trace_id);
    assert_eq!(s.parent_span_id, cx.caller.unwrap().span_id);
    assert!(s.parent_span_is_remote);
    assert_eq!(
        attr(&s, "gen_ai.operation.name").unwrap().as_str(),
        "execute_tool"
    );
    assert_eq!(attr(&s, "gen_ai.tool.name").unwrap().as_str(), "book_room");
    assert_eq!(attr(&s, "gen_ai.tool.call.id").unwrap().as_str(), "call-1");
    assert_eq!(attr(&s, "understudy.attempt_id").unwrap().as_str(), "att-1");
    assert_eq!(attr(&s, "understudy.revision"), Some(&OtelValue::I64(3)));
    assert_eq!(attr(&s, "understudy.variant").unwrap().as_str(), "busy");
    assert_eq!(attr(&s, "understudy.result_status").unwrap().as_str(), "ok");
    assert_eq!(s.status, Status::Unset);
    // No content unless asked for; no MCP attributes on an HTTP call.
    assert!(attr(&s, "gen_ai.tool.call.arguments").is_none());
    assert!(attr(&s, "input.value").is_none());
    assert!(attr(&s, "mcp.method.name").is_none());
    let d = s.end_time.duration_since(s.start_time).unwrap();
    assert_eq!(d, Duration::from_millis(12));
    // Without a caller: a root span of a trace of its own.
    let root = call_span(
        &event(ResultStatus::Ok),
        None,
        "att-1",
        &CallContext::default(),
        None,
        None,
        SystemTime::now(),
    )
    .unwrap();
    assert_eq!(root.parent_span_id, SpanId::INVALID);
    assert_ne!(root.span_context.trace_id(), TraceId::INVALID);
    // A caller that did not sample: no span.
    let unsampled = CallContext {
        caller: Caller::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
        ..Default::default()
    };
    assert!(call_span(
        &event(ResultStatus::Ok),
        None,
        "a",
        &unsampled,
        None,
        None,
        SystemTime::now()
    )
    .is_none());
}

#[test]
fn content_only_when_asked_and_through_the_scrubber() {
    let scrub = |v: &mut Value| {
        if let Some(k) = v.get_mut("api_key") {
            *k = json!("[scrubbed]");
        }
    };
    let s = call_span(
        &event(ResultStatus::Ok),
        None,
        "a",
        &CallContext::default(),
        None,
        Some(&scrub),
        SystemTime::now(),
    )
    .unwrap();
    let args = attr(&s, "gen_ai.tool.call.arguments")
        .unwrap()
        .as_str()
        .to_string();
    assert!(
        args.contains("[scrubbed]") && !args.contains("sk-live-123"),
        "{args}"
    );
    assert_eq!(attr(&s, "input.value").unwrap().as_str(), args);
    assert_eq!(
        attr(&s, "gen_ai.tool.call.result").unwrap().as_str(),
        r#"{"booked":true}"#
    );
}

#[test]
fn failures_faults_guardrails_and_mcp() {
    let mut ev = event(ResultStatus::Ok);
    ev.http_status = 503;
    ev.fault = Some(FaultRecord {
        kind: "status".into(),
        after_effect: false,
        origin: Some("chaos".into()),
        wire_status: Some(503),
    });
    let cx = CallContext {
        caller: None,
        mcp_session_id: Some("sess-9".into()),
        mcp_protocol_version: Some("2025-06-18".into()),
        ..Default::default()
    };
    let s = call_span(
        &ev,
        None,
        "a",
        &cx,
        Some(&cx.mcp_message(ev.operation_id.as_deref())),
        None,
        SystemTime::now(),
    )
    .unwrap();
    assert_eq!(attr(&s, "understudy.fault").unwrap().as_str(), "status");
    assert_eq!(attr(&s, "error.type").unwrap().as_str(), "status");
    assert!(matches!(s.status, Status::Error { .. }));
    assert_eq!(attr(&s, "mcp.method.name").unwrap().as_str(), "tools/call");
    assert_eq!(attr(&s, "mcp.session.id").unwrap().as_str(), "sess-9");
    assert_eq!(
        attr(&s, "mcp.protocol.version").unwrap().as_str(),
        "2025-06-18"
    );
    assert!(s.events.events.is_empty());

    for (st, decision) in [
        (ResultStatus::Blocked, "deny"),
        (ResultStatus::Simulated, "modify"),
    ] {
        let s = call_span(
            &event(st.clone()),
            None,
            "a",
            &CallContext::default(),
            None,
            None,
            SystemTime::now(),
        )
        .unwrap();
        assert_eq!(s.events.events.len(), 1, "{st:?}");
        let e = &s.events.events[0];
        assert_eq!(e.name, "apply_guardrail");
        let d = e
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == "gen_ai.guardrail.decision.type")
            .unwrap();
        assert_eq!(d.value.as_str(), decision);
        assert_eq!(
            matches!(s.status, Status::Error { .. }),
            st == ResultStatus::Blocked
        );
    }
    let mut e = event(ResultStatus::InputError);
    e.error = Some(json!({"code": "input_error", "message": "room: required"}));
    let s = call_span(
        &e,
        None,
        "a",
        &CallContext::default(),
        None,
        None,
        SystemTime::now(),
    )
    .unwrap();
    assert_eq!(s.status, Status::error("input_error: room: required"));
}

fn mcp_cx(body: Value) -> CallContext {
    CallContext {
        body: RawBody(bytes::Bytes::from(body.to_string())),
        ..Default::default()
    }
}

const META_TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

#[test]
fn mcp_spans_carry_the_request_id_and_the_meta_traceparent() {
    let span = |ev: &ToolEvent, cx: &CallContext| {
        call_span(
            ev,
            None,
            "a",
            cx,
            Some(&cx.mcp_message(ev.operation_id.as_deref())),
            None,
            SystemTime::now(),
        )
        .unwrap()
    };
    let call = |id: Value, meta: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "book_room", "arguments": {"room": "A"}, "_meta": meta}})
    };
    let ev = event(ResultStatus::Ok);
    // A number id as its decimal text, a string id as it is.
    let s = span(&ev, &mcp_cx(call(json!(7), json!({}))));
    assert_eq!(attr(&s, "jsonrpc.request.id").unwrap().as_str(), "7");
    assert_eq!(attr(&s, "mcp.method.name").unwrap().as_str(), "tools/call");
    assert_eq!(s.name, "execute_tool book_room");
    assert!(attr(&s, "error.type").is_none());
    let s = span(&ev, &mcp_cx(call(json!("req-7"), json!({}))));
    assert_eq!(attr(&s, "jsonrpc.request.id").unwrap().as_str(), "req-7");
    // A null id, a body that is not a message: no id.
    let s = span(&ev, &mcp_cx(call(Value::Null, json!({}))));
    assert!(attr(&s, "jsonrpc.request.id").is_none());
    let mut cx = mcp_cx(json!(null));
    cx.body = RawBody(bytes::Bytes::from_static(b"{not json"));
    assert!(attr(&span(&ev, &cx), "jsonrpc.request.id").is_none());
    // A batch: the member calling this tool.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "other"}},
        call(json!(2), json!({}))
    ]);
    let s = span(&ev, &mcp_cx(batch));
    assert_eq!(attr(&s, "jsonrpc.request.id").unwrap().as_str(), "2");

    // `params._meta.traceparent` is the parent; the header's span becomes a link.
    let mut cx = mcp_cx(call(json!(3), json!({"traceparent": META_TP})));
    cx.caller = Caller::parse(TP);
    let s = span(&ev, &cx);
    let meta = Caller::parse(META_TP).unwrap();
    assert_eq!(s.span_context.trace_id(), meta.trace_id);
    assert_eq!(s.parent_span_id, meta.span_id);
    assert!(s.parent_span_is_remote);
    assert_eq!(s.links.links.len(), 1);
    assert_eq!(
        s.links.links[0].span_context.span_id(),
        Caller::parse(TP).unwrap().span_id
    );
    // Only in `_meta` (stdio has no headers): still the parent, no link.
    let s = span(
        &ev,
        &mcp_cx(call(json!(3), json!({"traceparent": META_TP}))),
    );
    assert_eq!(s.parent_span_id, meta.span_id);
    assert!(s.links.links.is_empty());
    // An unsampled `_meta` context: no span.
    let unsampled = META_TP.replace("-01", "-00");
    let cx = mcp_cx(call(json!(3), json!({"traceparent": unsampled})));
    assert!(call_span(
        &ev,
        None,
        "a",
        &cx,
        Some(&cx.mcp_message(ev.operation_id.as_deref())),
        None,
        SystemTime::now()
    )
    .is_none());
    // An HTTP call's body is never read as a message.
    let cx = mcp_cx(call(json!(9), json!({"traceparent": META_TP})));
    let s = call_span(&ev, None, "a", &cx, None, None, SystemTime::now()).unwrap();
    assert!(attr(&s, "jsonrpc.request.id").is_none());
    assert_eq!(s.parent_span_id, SpanId::INVALID);
}

#[test]
fn mcp_errors_are_typed_as_the_mcp_conventions_say() {
    let cx = mcp_cx(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "book_room"}}));
    let span = |ev: &ToolEvent| {
        call_span(
            ev,
            None,
            "a",
            &cx,
            Some(&cx.mcp_message(ev.operation_id.as_deref())),
            None,
            SystemTime::now(),
        )
        .unwrap()
    };
    // An input error is an `isError: true` result: `tool_error`.
    let mut ev = event(ResultStatus::InputError);
    ev.error = Some(json!({"code": "input_error", "message": "room: required"}));
    let s = span(&ev);
    assert_eq!(attr(&s, "error.type").unwrap().as_str(), "tool_error");
    assert_eq!(
        attr(&s, "understudy.error.code").unwrap().as_str(),
        "input_error"
    );
    assert!(attr(&s, "rpc.response.status_code").is_none());
    assert_eq!(s.status, Status::error("input_error: room: required"));
    // A harness error is a JSON-RPC error answer: its code.
    let mut ev = event(ResultStatus::HarnessError);
    ev.result = json!({"code": -32602, "message": "no tool `nope`"});
    ev.error = Some(json!({"code": "unknown_tool", "message": "no tool `nope`"}));
    let s = span(&ev);
    assert_eq!(attr(&s, "error.type").unwrap().as_str(), "-32602");
    assert_eq!(
        attr(&s, "rpc.response.status_code").unwrap().as_str(),
        "-32602"
    );
    assert_eq!(
        attr(&s, "understudy.error.code").unwrap().as_str(),
        "unknown_tool"
    );
    // A result the tool itself marked as an error.
    let mut ev = event(ResultStatus::Ok);
    ev.result = json!({"content": [], "isError": true});
    assert_eq!(
        attr(&span(&ev), "error.type").unwrap().as_str(),
        "tool_error"
    );
    // A blocked write: `tool_error` too.
    let s = span(&event(ResultStatus::Blocked));
    assert_eq!(attr(&s, "error.type").unwrap().as_str(), "tool_error");
}

#[test]
fn an_mcp_message_other_than_a_tool_call_is_named_after_its_method() {
    let mut ev = event(ResultStatus::HarnessError);
    ev.operation_id = None;
    ev.arguments = json!({"method": "resources/read", "params": {"uri": "mem://a"}});
    ev.result = json!({"code": -32603, "message": "lease over"});
    let cx = mcp_cx(
        json!({"jsonrpc": "2.0", "id": "r1", "method": "resources/read",
                           "params": {"uri": "mem://a"}}),
    );
    let s = call_span(
        &ev,
        None,
        "a",
        &cx,
        Some(&cx.mcp_message(ev.operation_id.as_deref())),
        None,
        SystemTime::now(),
    )
    .unwrap();
    assert_eq!(s.name, "resources/read");
    assert_eq!(
        attr(&s, "mcp.method.name").unwrap().as_str(),
        "resources/read"
    );
    assert_eq!(attr(&s, "mcp.resource.uri").unwrap().as_str(), "mem://a");
    assert_eq!(attr(&s, "jsonrpc.request.id").unwrap().as_str(), "r1");
    assert!(attr(&s, "gen_ai.operation.name").is_none());
    assert!(attr(&s, "gen_ai.tool.name").is_none());
    let cx = mcp_cx(json!({"jsonrpc": "2.0", "id": 4, "method": "prompts/get",
                           "params": {"name": "greet"}}));
    let s = call_span(
        &ev,
        None,
        "a",
        &cx,
        Some(&cx.mcp_message(ev.operation_id.as_deref())),
        None,
        SystemTime::now(),
    )
    .unwrap();
    assert_eq!(s.name, "prompts/get greet");
    assert_eq!(attr(&s, "gen_ai.prompt.name").unwrap().as_str(), "greet");
}

#[test]
fn a_raw_body_never_shows_in_debug_output() {
    let cx = mcp_cx(json!({"password": "hunter2"}));
    let d = format!("{cx:?}");
    assert!(!d.contains("hunter2") && d.contains("bytes"), "{d}");
}

#[test]
fn the_attempt_span_carries_the_verdict_and_each_check() {
    let now = SystemTime::now();
    let o = AttemptOutcome {
        attempt_id: "att-1".into(),
        started: now - Duration::from_secs(2),
        ended: now,
        verdict: "fail".into(),
        reasons: vec!["contract:desk:agent_trace.claims_match_results: said booked".into()],
        checks: vec![
            CheckOutcome {
                name: "desk:agent_trace.reported_calls_arrived".into(),
                label: "passed".into(),
                explanation: "2 of 2".into(),
            },
            CheckOutcome {
                name: "desk:agent_trace.claims_match_results".into(),
                label: "failed".into(),
                explanation: "said booked".into(),
            },
        ],
        calls: 2,
    };
    let c = Caller::parse(TP).unwrap();
    let s = attempt_span(&o, Some((c.trace_id, c.span_id)));
    assert_eq!(s.name, "understudy attempt");
    assert_eq!(s.span_context.trace_id(), c.trace_id);
    assert_eq!(s.parent_span_id, c.span_id);
    assert_eq!(attr(&s, "understudy.verdict").unwrap().as_str(), "fail");
    assert_eq!(s.events.events.len(), 3);
    let names: Vec<String> = s
        .events
        .events
        .iter()
        .map(|e| {
            assert_eq!(e.name, "gen_ai.evaluation.result");
            let g = |k: &str| {
                e.attributes
                    .iter()
                    .find(|kv| kv.key.as_str() == k)
                    .unwrap()
                    .value
                    .as_str()
                    .to_string()
            };
            format!(
                "{}={}",
                g("gen_ai.evaluation.name"),
                g("gen_ai.evaluation.score.label")
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "desk:agent_trace.reported_calls_arrived=passed",
            "desk:agent_trace.claims_match_results=failed",
            "understudy.verdict=fail"
        ]
    );
    assert!(matches!(s.status, Status::Error { .. }));
    assert_eq!(
        s.end_time.duration_since(s.start_time).unwrap(),
        Duration::from_secs(2)
    );
}

/// The one answer for a call's span parent and its evidence event's `trace_id`: an MCP
/// call's `params._meta.traceparent`, else the header's; an invalid `_meta` value falls back
/// to the header; an HTTP call's body is never read.
#[test]
fn the_callers_span_is_metas_then_the_headers() {
    let header = Caller::parse(TP).unwrap();
    let meta = Caller::parse(META_TP).unwrap();
    let call = |meta: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "book_room", "_meta": meta}})
    };
    let mut cx = mcp_cx(call(json!({"traceparent": META_TP})));
    let msg = cx.mcp_message(Some("book_room"));
    assert_eq!(
        cx.caller_of(Some(&msg)),
        Some(meta),
        "only in _meta (stdio)"
    );
    cx.caller = Some(header);
    assert_eq!(cx.caller_of(Some(&msg)), Some(meta), "_meta wins");
    assert_eq!(cx.caller_of(None), Some(header), "not MCP: the header");
    let mut cx = mcp_cx(call(json!({"traceparent": "00-nope-01"})));
    let msg = cx.mcp_message(Some("book_room"));
    assert_eq!(cx.caller_of(Some(&msg)), None);
    cx.caller = Some(header);
    assert_eq!(
        cx.caller_of(Some(&msg)),
        Some(header),
        "an invalid _meta value"
    );
}
