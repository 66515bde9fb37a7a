//! Arbitrary form-encoded and multipart bodies (`understudy::http::form`): parsed, then typed
//! by an arbitrary schema. Never panics; every bound holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use understudy::http::form::{parse, parse_multipart, parse_urlencoded, type_by_schema, BodyKind, MAX_FIELDS};

fuzz_target!(|data: &[u8]| {
    // First line: a boundary; second: a schema (JSON, if it parses); the rest: the body.
    let mut it = data.splitn(3, |b| *b == b'\n');
    let boundary = String::from_utf8_lossy(it.next().unwrap_or(b"")).into_owned();
    let schema: serde_json::Value =
        serde_json::from_slice(it.next().unwrap_or(b"")).unwrap_or(serde_json::Value::Null);
    let body = it.next().unwrap_or(b"");
    for v in [
        parse_urlencoded(body).ok(),
        parse_multipart(body, &boundary).ok(),
        parse(&BodyKind::Multipart(boundary.clone()), body).ok().flatten(),
    ]
    .into_iter()
    .flatten()
    {
        let n: usize = v
            .as_object()
            .map(|m| m.values().map(|x| x.as_array().map_or(1, Vec::len)).sum())
            .unwrap_or(0);
        assert!(n <= MAX_FIELDS);
        let mut v = v;
        type_by_schema(&mut v, &schema);
    }
});
