//! The JSON of a call's event in the evidence, written member by member so that a `result`
//! already encoded once (a static result: `crate::proxy::answer`, per pinned revision) is
//! copied in as bytes instead of being serialized again for every call.
//!
//! The bytes are exactly `serde_json::to_vec(&event)` with `result` replaced: the members of
//! [`ToolEvent`] in declaration order, each value written by serde_json, `fault` left out when
//! absent. Readers parse it as a [`ToolEvent`] as before. The unit test compares the two
//! encodings over events that fill every member both ways, so a member added to
//! [`ToolEvent`] and not here fails it.

use serde::Serialize;

use super::StoreError;
use crate::records::ToolEvent;

/// The event's JSON; `result`, when given, is the already encoded `result` member (and
/// `event.result` is not read).
pub(super) fn encode(event: &ToolEvent, result: Option<&[u8]>) -> Result<Vec<u8>, StoreError> {
    let ToolEvent {
        sequence,
        execution_attempt_id,
        integration,
        operation_id,
        revision,
        variant,
        rule,
        is_write,
        arguments,
        result: result_value,
        result_status,
        http_status,
        latency_ms,
        delay_ms,
        idempotency_key_ref,
        trace_id,
        source,
        error,
        timestamp,
        fault,
    } = event;
    let mut out = Vec::with_capacity(320 + result.map_or(256, <[u8]>::len));
    let mut w = Members(&mut out);
    w.put("sequence", sequence)?;
    w.put("execution_attempt_id", execution_attempt_id)?;
    w.put("integration", integration)?;
    w.put("operation_id", operation_id)?;
    w.put("revision", revision)?;
    w.put("variant", variant)?;
    w.put("rule", rule)?;
    w.put("is_write", is_write)?;
    w.put("arguments", arguments)?;
    match result {
        Some(raw) => w.raw("result", raw),
        None => w.put("result", result_value)?,
    }
    w.put("result_status", result_status)?;
    w.put("http_status", http_status)?;
    w.put("latency_ms", latency_ms)?;
    w.put("delay_ms", delay_ms)?;
    w.put("idempotency_key_ref", idempotency_key_ref)?;
    w.put("trace_id", trace_id)?;
    w.put("source", source)?;
    w.put("error", error)?;
    w.put("timestamp", timestamp)?;
    if let Some(f) = fault {
        w.put("fault", f)?;
    }
    out.push(b'}');
    Ok(out)
}

/// Writes `{"name":value,…` (the caller closes the object).
struct Members<'a>(&'a mut Vec<u8>);

impl Members<'_> {
    fn key(&mut self, name: &str) {
        self.0.push(if self.0.is_empty() { b'{' } else { b',' });
        self.0.push(b'"');
        self.0.extend_from_slice(name.as_bytes()); // member names need no escaping
        self.0.extend_from_slice(b"\":");
    }

    fn put(&mut self, name: &str, v: &impl Serialize) -> Result<(), StoreError> {
        self.key(name);
        serde_json::to_writer(&mut *self.0, v)
            .map_err(|e| StoreError::Backend(format!("cannot encode a record: {e}")))
    }

    fn raw(&mut self, name: &str, json: &[u8]) {
        self.key(name);
        self.0.extend_from_slice(json);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{EventSource, FaultRecord, ResultStatus};
    use serde_json::json;

    fn events() -> Vec<ToolEvent> {
        let full = ToolEvent {
            sequence: 7,
            execution_attempt_id: "e-1 \"quoted\" \u{1F600}".into(),
            integration: "crm".into(),
            operation_id: Some("get_contact".into()),
            revision: Some(3),
            variant: Some("found".into()),
            rule: Some(2),
            is_write: true,
            arguments: json!({"b": [1, 2.5, null], "a": "x\ny"}),
            result: json!({"status": 201, "data": {"z": 1, "a": {"nested": true}}}),
            result_status: ResultStatus::Unknown("weird".into()),
            http_status: 201,
            latency_ms: 0.123_456_789,
            delay_ms: 20,
            idempotency_key_ref: Some("k".into()),
            trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
            source: EventSource::ToolTest,
            error: Some(json!({"code": "c", "message": "m", "path": null})),
            timestamp: "2026-12-01T12:00:00.000Z".into(),
            fault: Some(FaultRecord {
                kind: "timeout".into(),
                after_effect: false,
                origin: Some("chaos".into()),
                wire_status: None,
            }),
        };
        let bare = ToolEvent {
            sequence: 1,
            execution_attempt_id: String::new(),
            integration: "i".into(),
            operation_id: None,
            revision: None,
            variant: None,
            rule: None,
            is_write: false,
            arguments: json!(null),
            result: json!([]),
            result_status: ResultStatus::Ok,
            http_status: 200,
            latency_ms: f64::NAN,
            delay_ms: 0,
            idempotency_key_ref: None,
            trace_id: None,
            source: EventSource::Mock,
            error: None,
            timestamp: String::new(),
            fault: None,
        };
        vec![full, bare]
    }

    #[test]
    fn the_encoding_is_serde_jsons_with_or_without_an_encoded_result() {
        for ev in events() {
            let expected = serde_json::to_vec(&ev).unwrap();
            assert_eq!(encode(&ev, None).unwrap(), expected);
            let raw = serde_json::to_vec(&ev.result).unwrap();
            let mut blank = ev.clone();
            blank.result = serde_json::Value::Null;
            assert_eq!(
                String::from_utf8(encode(&blank, Some(&raw)).unwrap()).unwrap(),
                String::from_utf8(expected).unwrap()
            );
        }
    }
}
