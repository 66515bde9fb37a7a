//! Arbitrary match templates (method, path, query and header templates) compiled and matched
//! against arbitrary request paths and queries. Never panics.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use understudy::contract::template::{parse_query, path_segments, CompiledMatch, RequestView};
use understudy::contract::MatchSpec;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // Lines: method, path template, query template `k=v&…`, header template `k: v`,
    // request method, request path, request query.
    let mut l = text.split('\n');
    let mut next = || l.next().unwrap_or("").to_string();
    let (method, path, qt, ht, rmethod, rpath, rquery) =
        (next(), next(), next(), next(), next(), next(), next());
    let mut query = BTreeMap::new();
    for (k, v) in parse_query(&qt) {
        query.insert(k, v);
    }
    let mut headers = BTreeMap::new();
    if let Some((k, v)) = ht.split_once(':') {
        headers.insert(k.trim().to_string(), v.trim().to_string());
    }
    let spec = MatchSpec { method, path, query, headers };
    let Ok(m) = CompiledMatch::compile(&spec) else {
        return;
    };
    let _ = m.specificity();
    let segments = path_segments(&rpath);
    let q = parse_query(&rquery);
    let mut hm = http::HeaderMap::new();
    if let (Ok(n), Ok(v)) = (
        http::header::HeaderName::from_bytes(rmethod.as_bytes()),
        http::HeaderValue::from_str(&rpath),
    ) {
        hm.insert(n, v);
    }
    let view = RequestView { method: &rmethod, segments: &segments, query: &q, headers: &hm };
    let _ = m.matches(&view);
});
