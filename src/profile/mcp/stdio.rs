//! The stdio framing of the MCP endpoint (docs/src/guides/mcp-stdio.md), as data: one JSON-RPC
//! message per line on stdin and stdout, UTF-8, no embedded newline. The front that reads and
//! writes the lines (`crate::server::stdio`) turns each client line into the POST the HTTP
//! endpoint reads and each answer of the endpoint back into lines, so the stdio transport and
//! Streamable HTTP are two framings of one endpoint: the same sessions, calls, evidence,
//! faults and contracts.
//!
//! - [`LineSplitter`]: bytes → lines, bounded: a line longer than the body limit is never held
//!   whole; it becomes [`Frame::Oversize`] and its bytes are dropped up to the next newline.
//! - [`read_line`]: a line → the JSON message, or the JSON-RPC parse error line (`-32700`,
//!   `id: null`) that answers a malformed or oversize line; the session goes on.
//! - [`Outbound::headers`]: the headers a POST of the message carries — the session's
//!   `Mcp-Session-Id` and negotiated `MCP-Protocol-Version` in the session era; in 2026-07-28
//!   the headers a stdio client never sends but the HTTP endpoint requires, mirrored from the
//!   body (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, the `Mcp-Param-*` of the tool's
//!   `x-mcp-header` annotations, from the last `tools/list` the client read).
//! - [`SseDecoder`]: an SSE answer, chunk by chunk, into the `data` of each event (the priming
//!   event's empty data skipped), so notifications and server-to-client requests reach stdout
//!   before the result, as they are produced.
//! - [`answer_lines`]: a whole (non-SSE) answer into the lines it puts on stdout: a JSON-RPC
//!   body as it is; a body that is not JSON (a `malformed_body` fault) as it is, on one line;
//!   an answer with no JSON-RPC message to a request (a harness error of the HTTP layer, a 4xx
//!   without a body) as a JSON-RPC error naming the status, so a request is never left
//!   unanswered by a transport difference.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::http::encode_header_value;
use super::jsonrpc::{self, INTERNAL_ERROR, PARSE_ERROR};
use super::tools::{param_headers, primitive_text};
use super::META_PROTOCOL_VERSION;

/// One framed unit of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A line without its `\n` (and without a trailing `\r`).
    Line(Vec<u8>),
    /// A line longer than the limit: how many bytes it had when it was refused (at least the
    /// limit + 1; the rest is dropped unread up to the next newline).
    Oversize(usize),
}

/// Bytes → [`Frame`]s, holding at most `max` bytes of a line.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
    /// Dropping the rest of an oversize line.
    discarding: bool,
}

impl LineSplitter {
    pub fn new(max: usize) -> LineSplitter {
        LineSplitter {
            buf: Vec::new(),
            max,
            discarding: false,
        }
    }

    /// Feed a chunk; complete frames are appended to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Frame>) {
        while !chunk.is_empty() {
            let nl = chunk.iter().position(|&b| b == b'\n');
            let (part, rest, ended) = match nl {
                Some(i) => (&chunk[..i], &chunk[i + 1..], true),
                None => (chunk, &chunk[chunk.len()..], false),
            };
            if self.discarding {
                if ended {
                    self.discarding = false;
                }
            } else if self.buf.len() + part.len() > self.max {
                out.push(Frame::Oversize(self.buf.len() + part.len()));
                self.buf.clear();
                self.discarding = !ended;
            } else {
                self.buf.extend_from_slice(part);
                if ended {
                    let mut line = std::mem::take(&mut self.buf);
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    out.push(Frame::Line(line));
                }
            }
            chunk = rest;
        }
    }

    /// At end of input: the last line when it had no newline.
    pub fn finish(&mut self) -> Option<Frame> {
        if self.discarding || self.buf.is_empty() {
            self.discarding = false;
            self.buf.clear();
            return None;
        }
        let mut line = std::mem::take(&mut self.buf);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Some(Frame::Line(line))
    }
}

/// A line as a message: `Ok(None)` for a blank line (ignored), `Err(line)` with the JSON-RPC
/// parse error that answers a line that is not JSON.
pub fn read_line(line: &[u8]) -> Result<Option<Value>, Value> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(v) => Ok(Some(v)),
        Err(e) => Err(jsonrpc::error(
            &Value::Null,
            PARSE_ERROR,
            &format!("Parse error: the line is not one JSON value ({e})"),
            None,
        )),
    }
}

/// The answer to a line over the limit.
pub fn oversize_error(len: usize, max: usize) -> Value {
    jsonrpc::error(
        &Value::Null,
        PARSE_ERROR,
        &format!(
            "Parse error: a message of more than {max} bytes is refused (this line had at least {len} bytes before it was dropped)"
        ),
        Some(json!({ "limit_bytes": max })),
    )
}

/// What the front does with one frame: `Ok(Some(message))` to post, `Ok(None)` for a blank
/// line (nothing), `Err(line)` the JSON-RPC parse error that answers a line that is not JSON
/// or is over `max` bytes. Every frame gets exactly one of the three.
pub fn read_frame(frame: &Frame, max: usize) -> Result<Option<Value>, Value> {
    match frame {
        Frame::Oversize(len) => Err(oversize_error(*len, max)),
        Frame::Line(line) => read_line(line),
    }
}

/// Whether a whole (non-SSE) answer to a request ended before its result: a success status
/// with no body at all. Over stdio that is a cut stream (`stream_cut`, or a server that
/// closed the connection without its answer): the session ends, since stdout is the one
/// stream a result could still come on ([`answer_lines`] is not asked for its lines).
pub fn cut_before_result(status: u16, body: &[u8], request_id: Option<&Value>) -> bool {
    request_id.is_some() && (200..300).contains(&status) && body.trim_ascii().is_empty()
}

/// The property of the fuzz target `fuzz/fuzz_targets/stdio_lines.rs` (also run over a
/// seeded corpus by this module's tests, so it runs on every `cargo test`): arbitrary bytes
/// as stdin, split into lines with a small limit over chunks of a size chosen by the first
/// byte. Panics when it fails: every `\n`-ended piece of the input (and a last piece without
/// one) is exactly one frame — the piece itself (without a trailing `\r`) when it fits, else
/// one oversize frame; every frame is posted, ignored (blank) or answered by one `-32700` line
/// with `id: null` that is one JSON line; the POST headers of a message, the SSE decoder and
/// the answer lines never panic and the answer lines are single lines.
pub fn fuzz_stdin(data: &[u8]) {
    const MAX: usize = 256;
    let (cut, body) = match data.split_first() {
        Some((c, rest)) => (usize::from(*c).max(1), rest),
        None => (1, data),
    };
    let mut s = LineSplitter::new(MAX);
    let mut frames = Vec::new();
    for chunk in body.chunks(cut) {
        s.push(chunk, &mut frames);
    }
    frames.extend(s.finish());
    let mut pieces: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
    if pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    assert_eq!(frames.len(), pieces.len(), "one frame per line: {body:?}");
    let mut outbound = Outbound::default();
    for (frame, raw) in frames.iter().zip(&pieces) {
        let piece = raw.strip_suffix(b"\r").unwrap_or(*raw);
        match frame {
            Frame::Oversize(n) => assert!(*n > MAX && raw.len() > MAX, "{raw:?}"),
            Frame::Line(l) => assert!(l.as_slice() == piece && raw.len() <= MAX, "{raw:?}"),
        }
        match read_frame(frame, MAX) {
            Ok(Some(v)) => {
                let _ = outbound.headers(&v);
                outbound.learn("tools/list", &v);
                outbound.learn("initialize", &v);
            }
            Ok(None) => assert!(piece.iter().all(u8::is_ascii_whitespace)),
            Err(e) => {
                assert_eq!(e["error"]["code"], Value::from(PARSE_ERROR));
                assert_eq!(e["id"], Value::Null);
                let line = to_line(e.to_string().as_bytes());
                assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
                assert!(serde_json::from_slice::<Value>(&line).is_ok());
            }
        }
    }
    let mut d = SseDecoder::default();
    let mut events = Vec::new();
    for chunk in body.chunks(cut) {
        d.push(chunk, &mut events);
    }
    let id = Value::from(1);
    for status in [200, 503] {
        if cut_before_result(status, body, Some(&id)) {
            continue;
        }
        for line in answer_lines(status, body, Some(&id)) {
            assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
            assert_eq!(line.last(), Some(&b'\n'));
        }
    }
}

/// What the stdio session knows that the HTTP client would carry in headers.
#[derive(Debug, Default, Clone)]
pub struct Outbound {
    /// `Mcp-Session-Id` minted by `initialize` (session era).
    pub session_id: Option<String>,
    /// The version `initialize` negotiated (session era).
    pub protocol_version: Option<String>,
    /// `x-mcp-header` annotations of the tools the client last listed: tool → (path, suffix).
    pub param_headers: HashMap<String, Vec<(Vec<String>, String)>>,
}

impl Outbound {
    /// The headers of the POST carrying `msg` (module doc).
    pub fn headers(&self, msg: &Value) -> Vec<(String, String)> {
        let mut h = vec![
            ("content-type".to_string(), "application/json".to_string()),
            (
                "accept".to_string(),
                "application/json, text/event-stream".to_string(),
            ),
        ];
        let method = msg.get("method").and_then(Value::as_str);
        let params = msg.get("params").and_then(Value::as_object);
        let stateless = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(META_PROTOCOL_VERSION))
            .and_then(Value::as_str);
        if let (Some(version), Some(method)) = (stateless, method) {
            h.push(("mcp-protocol-version".into(), version.to_string()));
            h.push(("mcp-method".into(), method.to_string()));
            let key = match method {
                "tools/call" | "prompts/get" => Some("name"),
                "resources/read" => Some("uri"),
                _ => None,
            };
            if let Some(name) = key
                .and_then(|k| params.and_then(|p| p.get(k)))
                .and_then(Value::as_str)
            {
                h.push(("mcp-name".into(), encode_header_value(name)));
                if method == "tools/call" {
                    let args = params.and_then(|p| p.get("arguments"));
                    for (path, suffix) in self.param_headers.get(name).into_iter().flatten() {
                        let value = args
                            .and_then(|a| value_at(a, path))
                            .and_then(primitive_text);
                        if let Some(v) = value {
                            h.push((format!("mcp-param-{suffix}"), encode_header_value(&v)));
                        }
                    }
                }
            }
            return h;
        }
        if let Some(v) = &self.protocol_version {
            h.push(("mcp-protocol-version".into(), v.clone()));
        }
        if let Some(s) = &self.session_id {
            h.push(("mcp-session-id".into(), s.clone()));
        }
        h
    }

    /// Learn from an answer line: the negotiated version of an `initialize` result, the
    /// `x-mcp-header` annotations of a `tools/list` result.
    pub fn learn(&mut self, request_method: &str, answer: &Value) {
        let Some(result) = answer.get("result") else {
            return;
        };
        match request_method {
            "initialize" => {
                if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
                    self.protocol_version = Some(v.to_string());
                }
            }
            "tools/list" => {
                for t in result
                    .get("tools")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let (Some(name), Some(schema)) =
                        (t.get("name").and_then(Value::as_str), t.get("inputSchema"))
                    {
                        let found = param_headers(schema);
                        if found.is_empty() {
                            self.param_headers.remove(name);
                        } else {
                            self.param_headers.insert(name.to_string(), found);
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

fn value_at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.get(k.as_str()))
}

/// An SSE body decoded chunk by chunk into the `data` of each event.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
}

impl SseDecoder {
    /// Feed a chunk; the data of every completed event (empty data skipped) is appended.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<String>) {
        self.buf.extend_from_slice(chunk);
        loop {
            let end = find_event_end(&self.buf);
            let Some((at, len)) = end else { break };
            let block: Vec<u8> = self.buf.drain(..at + len).collect();
            let text = String::from_utf8_lossy(&block[..at]).replace("\r\n", "\n");
            let mut data: Option<String> = None;
            for line in text.split('\n') {
                if line.starts_with(':') {
                    continue;
                }
                let (field, value) = match line.split_once(':') {
                    Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                    None => (line, ""),
                };
                if field == "data" {
                    match &mut data {
                        Some(d) => {
                            d.push('\n');
                            d.push_str(value);
                        }
                        None => data = Some(value.to_string()),
                    }
                }
            }
            if let Some(d) = data.filter(|d| !d.trim().is_empty()) {
                out.push(d);
            }
        }
    }
}

/// The end of the first event: (index of the blank line's start, length of the separator).
fn find_event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i + 1 < buf.len() {
        if buf[i] == b'\n' && buf[i + 1] == b'\n' {
            return Some((i, 2));
        }
        if i + 3 < buf.len() && &buf[i..i + 4] == b"\r\n\r\n" {
            return Some((i, 4));
        }
        i += 1;
    }
    None
}

/// One message as one line: JSON without a newline (serde escapes control characters, so a
/// re-serialized value never spans lines; raw bytes have their line breaks turned to spaces).
pub fn to_line(text: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = text
        .iter()
        .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
        .collect();
    out.push(b'\n');
    out
}

/// The lines a whole, non-SSE answer puts on stdout (module doc). `request_id` is the id of
/// the request posted, `None` for a notification or a client response.
pub fn answer_lines(status: u16, body: &[u8], request_id: Option<&Value>) -> Vec<Vec<u8>> {
    let trimmed = body.trim_ascii();
    let parsed: Option<Value> = serde_json::from_slice(trimmed).ok();
    let is_jsonrpc = |v: &Value| match v {
        Value::Array(items) => items.iter().all(|i| i.get("jsonrpc").is_some()),
        v => v.get("jsonrpc").is_some(),
    };
    match (&parsed, request_id) {
        (Some(v), _) if is_jsonrpc(v) => vec![to_line(trimmed)],
        (None, _) if !trimmed.is_empty() && (200..300).contains(&status) => {
            // Not JSON with a success status: a `malformed_body` fault, sent as it came.
            vec![to_line(trimmed)]
        }
        (_, None) => Vec::new(),
        (_, Some(id)) => {
            let (message, data) = match &parsed {
                Some(v) => (
                    v.pointer("/error/message")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string()),
                    Some(json!({ "http_status": status, "body": v })),
                ),
                None => (
                    String::from_utf8_lossy(trimmed).chars().take(500).collect(),
                    Some(json!({ "http_status": status })),
                ),
            };
            let message = if message.is_empty() {
                format!("the MCP endpoint answered HTTP {status} without a message")
            } else {
                format!("the MCP endpoint answered HTTP {status}: {message}")
            };
            vec![to_line(
                jsonrpc::error(id, INTERNAL_ERROR, &message, data)
                    .to_string()
                    .as_bytes(),
            )]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(max: usize, chunks: &[&[u8]]) -> Vec<Frame> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, &mut out);
        }
        out.extend(s.finish());
        out
    }

    #[test]
    fn lines_split_across_chunks_and_crlf() {
        let f = frames(100, &[b"{\"a\"", b":1}\r\n{\"b\":2}\n", b"{\"c\":3}"]);
        assert_eq!(
            f,
            vec![
                Frame::Line(b"{\"a\":1}".to_vec()),
                Frame::Line(b"{\"b\":2}".to_vec()),
                Frame::Line(b"{\"c\":3}".to_vec()),
            ]
        );
    }

    #[test]
    fn an_oversize_line_is_refused_and_the_next_line_survives() {
        let long = [b'x'; 50];
        let f = frames(10, &[&long[..20], &long[20..], b"\n{}\n"]);
        assert_eq!(f, vec![Frame::Oversize(20), Frame::Line(b"{}".to_vec())]);
        // Exactly the limit is accepted.
        let f = frames(2, &[b"{}\n"]);
        assert_eq!(f, vec![Frame::Line(b"{}".to_vec())]);
        let e = oversize_error(20, 10);
        assert_eq!(e["error"]["code"], -32700);
        assert_eq!(e["id"], Value::Null);
    }

    /// The fuzz target's property ([`fuzz_stdin`]) over a seeded corpus: inputs made of
    /// whole messages, pieces of them, raw bytes that matter to the framing (`\n`, `\r`,
    /// invalid UTF-8, JSON punctuation) and runs longer than the limit, cut into chunks of
    /// every size from 1 byte.
    #[test]
    fn arbitrary_stdin_never_panics_and_every_line_is_posted_ignored_or_answered() {
        let messages: [&[u8]; 5] = [
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            br#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t","arguments":{"a":[1,2]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            br#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"t","inputSchema":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"}}}}]}}"#,
            b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
        ];
        let alphabet: &[u8] = b"{}[]\":,\\ a1\n\r\t\xff\xc3";
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        let (mut lines, mut oversize) = (0, 0);
        for _ in 0..5_000 {
            let mut input = vec![(next() % 64) as u8 + 1];
            for _ in 0..next() % 8 {
                match next() % 6 {
                    0 | 1 => input.extend_from_slice(messages[(next() % 5) as usize]),
                    2 => {
                        let m = messages[(next() % 5) as usize];
                        input.extend_from_slice(&m[..(next() as usize) % m.len()]);
                    }
                    3 => input.extend(std::iter::repeat_n(b'a', 200 + (next() % 200) as usize)),
                    _ => {
                        for _ in 0..next() % 12 {
                            input.push(alphabet[(next() as usize) % alphabet.len()]);
                        }
                    }
                }
                if next() % 3 > 0 {
                    input.extend_from_slice(if next() % 4 == 0 { &b"\r\n"[..] } else { b"\n" });
                }
            }
            fuzz_stdin(&input);
            let mut s = LineSplitter::new(256);
            let mut f = Vec::new();
            s.push(&input[1..], &mut f);
            f.extend(s.finish());
            lines += f.len();
            oversize += f.iter().filter(|x| matches!(x, Frame::Oversize(_))).count();
        }
        // The corpus reaches what it is for: many lines, some of them over the limit.
        assert!(
            lines > 5_000 && oversize > 500,
            "{lines} lines, {oversize} oversize"
        );
    }

    #[test]
    fn an_empty_success_to_a_request_is_a_cut_stream() {
        let id = json!(3);
        assert!(cut_before_result(200, b"", Some(&id)));
        assert!(cut_before_result(200, b" \r\n", Some(&id)));
        // A notification's 202, an error status, a body: not cut.
        assert!(!cut_before_result(202, b"", None));
        assert!(!cut_before_result(503, b"", Some(&id)));
        assert!(!cut_before_result(200, b"{", Some(&id)));
        assert_eq!(
            read_frame(&Frame::Oversize(300), 256).unwrap_err()["error"]["data"]["limit_bytes"],
            256
        );
    }

    #[test]
    fn malformed_lines_get_the_parse_error_and_blank_lines_nothing() {
        assert_eq!(read_line(b"   ").unwrap(), None);
        let e = read_line(b"{\"jsonrpc\":").unwrap_err();
        assert_eq!(e["error"]["code"], -32700);
        assert_eq!(e["id"], Value::Null);
        assert!(read_line(b"{\"jsonrpc\":\"2.0\"}").unwrap().is_some());
    }

    #[test]
    fn stateless_requests_get_mirrored_headers() {
        let mut o = Outbound::default();
        o.learn(
            "tools/list",
            &json!({"result": {"tools": [{"name": "t", "inputSchema": {"type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}}]}}),
        );
        let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "t", "arguments": {"region": "eu"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        let h: HashMap<String, String> = o.headers(&msg).into_iter().collect();
        assert_eq!(h["mcp-protocol-version"], "2026-07-28");
        assert_eq!(h["mcp-method"], "tools/call");
        assert_eq!(h["mcp-name"], "t");
        assert_eq!(h["mcp-param-Region"], "eu");
        assert!(!h.contains_key("mcp-session-id"));
    }

    #[test]
    fn session_era_requests_carry_the_session() {
        let mut o = Outbound {
            session_id: Some("s1".into()),
            ..Outbound::default()
        };
        o.learn(
            "initialize",
            &json!({"result": {"protocolVersion": "2025-06-18"}}),
        );
        let h: HashMap<String, String> = o
            .headers(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
            .into_iter()
            .collect();
        assert_eq!(h["mcp-session-id"], "s1");
        assert_eq!(h["mcp-protocol-version"], "2025-06-18");
    }

    #[test]
    fn sse_events_decode_incrementally() {
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        d.push(b"id: 1-0\ndata: \n\nid: 1-1\nda", &mut out);
        assert!(out.is_empty());
        d.push(
            b"ta: {\"x\":1}\n\n: keep-alive\n\ndata: {\"y\":2}\r\n\r\n",
            &mut out,
        );
        assert_eq!(out, vec!["{\"x\":1}".to_string(), "{\"y\":2}".to_string()]);
    }

    #[test]
    fn answers_become_lines() {
        let id = json!(7);
        let ok = answer_lines(200, br#"{"jsonrpc":"2.0","id":7,"result":{}}"#, Some(&id));
        assert_eq!(
            ok,
            vec![b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n".to_vec()]
        );
        assert!(answer_lines(202, b"", None).is_empty());
        // A harness error of the HTTP layer becomes a JSON-RPC error with the request's id.
        let e = answer_lines(
            401,
            br#"{"error":{"code":"unknown_attempt","message":"no such attempt"}}"#,
            Some(&id),
        );
        let v: Value = serde_json::from_slice(&e[0]).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], -32603);
        assert!(v["error"]["message"].as_str().unwrap().contains("401"));
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no such attempt"));
        // A truncated body (the malformed_body fault) goes out as it came, on one line.
        let t = answer_lines(200, b"{\"jsonrpc\":\"2.0\",\n\"id\"", Some(&id));
        assert_eq!(t, vec![b"{\"jsonrpc\":\"2.0\", \"id\"\n".to_vec()]);
    }
}
