//! Arbitrary bytes as a Bulk API 2.0 upload (`PUT …/jobs/ingest/{id}/batches`):
//! `profile::salesforce::csv::parse` (bounded bytes, rows and columns). Never panics; what
//! parses has rows as long as its header, and writes back to text that parses to the same
//! table (the results CSV the org answers).
#![no_main]

use libfuzzer_sys::fuzz_target;
use understudy::profile::salesforce::csv;

fuzz_target!(|data: &[u8]| {
    let (delim, body) = match data.split_first() {
        Some((d, rest)) => ([b',', b'\t', b'|', b';'][(*d % 4) as usize], rest),
        None => (b',', data),
    };
    if let Ok(t) = csv::parse(body, delim) {
        assert!(t.rows.iter().all(|r| r.len() == t.header.len()));
        let text = csv::write(&t.header, &t.rows, delim);
        assert_eq!(csv::parse(text.as_bytes(), delim).as_ref(), Ok(&t));
    }
});
