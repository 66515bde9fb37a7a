//! Server-Sent Events framing for MCP responses (docs/src/reference/mcp.md): one JSON-RPC
//! message per event as single-line JSON in `data:`, and the 2025-11-25 priming event (an id
//! with empty data, which a client must not parse as JSON-RPC).

use serde_json::Value;

/// Response headers of every SSE answer (besides any `Mcp-Session-Id`).
pub fn headers() -> Vec<(String, String)> {
    vec![
        ("Content-Type".into(), "text/event-stream".into()),
        ("Cache-Control".into(), "no-cache".into()),
        ("X-Accel-Buffering".into(), "no".into()),
    ]
}

/// One complete event: `id: <id>\n` (when given) then `data: <json>\n\n`. `serde_json`
/// escapes control characters, so the JSON never spans lines.
pub fn event(id: Option<&str>, message: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(message.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
    out
}

/// The priming event: an event id and an empty `data` field.
pub fn priming(id: &str) -> Vec<u8> {
    format!("id: {id}\ndata: \n\n").into_bytes()
}

/// The `data` payloads of the events of a stream (test helper and recorder aid): splits on
/// blank lines, joins multi-line data, skips comments; events without `data` are skipped.
pub fn parse_events(stream: &[u8]) -> Vec<(Option<String>, String)> {
    let text = String::from_utf8_lossy(stream).replace("\r\n", "\n");
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut id = None;
        let mut data: Option<String> = None;
        for line in block.lines() {
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line, ""),
            };
            match field {
                "id" => id = Some(value.to_string()),
                "data" => match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_string()),
                },
                _ => {}
            }
        }
        if let Some(d) = data {
            out.push((id, d));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_one_message_per_event() {
        let e = event(Some("3-1"), &json!({"a": "line\nbreak"}));
        let s = String::from_utf8(e).unwrap();
        assert_eq!(s, "id: 3-1\ndata: {\"a\":\"line\\nbreak\"}\n\n");
        assert_eq!(
            String::from_utf8(event(None, &json!(1))).unwrap(),
            "data: 1\n\n"
        );
    }

    #[test]
    fn priming_has_an_id_and_empty_data() {
        let mut stream = priming("7-0");
        stream.extend(event(Some("7-1"), &json!({"x": 1})));
        let events = parse_events(&stream);
        assert_eq!(events[0], (Some("7-0".into()), String::new()));
        assert_eq!(events[1], (Some("7-1".into()), "{\"x\":1}".into()));
    }
}
