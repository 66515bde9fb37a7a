//! Arbitrary bytes as the stdin of `understudy mcp stdio`: split into lines with a small
//! limit (`LineSplitter`, fed in uneven chunks), each line read as a message (`read_line`)
//! and turned into the POST headers the front would send, and the same bytes as an SSE answer
//! and as a whole answer. Never panics; every frame is bounded; every error is a JSON-RPC
//! parse error line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use understudy::profile::mcp::stdio::{
    answer_lines, read_line, Frame, LineSplitter, Outbound, SseDecoder,
};

fuzz_target!(|data: &[u8]| {
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
    let mut outbound = Outbound::default();
    for f in frames {
        match f {
            Frame::Oversize(n) => assert!(n > MAX),
            Frame::Line(l) => {
                assert!(l.len() <= MAX && !l.contains(&b'\n'));
                match read_line(&l) {
                    Ok(Some(v)) => {
                        let _ = outbound.headers(&v);
                        outbound.learn("tools/list", &v);
                        outbound.learn("initialize", &v);
                    }
                    Ok(None) => {}
                    Err(e) => assert_eq!(e["error"]["code"], Value::from(-32700)),
                }
            }
        }
    }
    let mut d = SseDecoder::default();
    let mut events = Vec::new();
    for chunk in body.chunks(cut) {
        d.push(chunk, &mut events);
    }
    for line in answer_lines(200, body, Some(&Value::from(1))) {
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
    }
});
