//! Arbitrary OTLP/HTTP trace bodies, as protobuf (first byte even) or OTLP/JSON (odd),
//! decoded and read as agent spans. Never panics; what it keeps stays within the bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use understudy::telemetry::ingest::{decode, MAX_SPANS, MAX_STRING};

fuzz_target!(|data: &[u8]| {
    let Some((flag, body)) = data.split_first() else {
        return;
    };
    let ct = if flag % 2 == 0 {
        "application/x-protobuf"
    } else {
        "application/json"
    };
    if let Ok(batch) = decode(body, ct) {
        assert!(batch.spans.len() <= MAX_SPANS);
        for s in batch.agent_spans() {
            let ev = s.event.as_ref().unwrap();
            assert!(ev.text.as_ref().is_none_or(|t| t.len() <= MAX_STRING + 3));
            let _ = serde_json::to_string(&ev.data).unwrap();
        }
    }
});
