//! Arbitrary bytes as the stdin of `understudy mcp stdio`: the property is
//! `profile::mcp::stdio::fuzz_stdin` (one frame per line, split with a small limit over uneven
//! chunks; every frame posted, ignored when blank, or answered by one `-32700` line; the POST
//! headers, the SSE decoder and the answer lines over the same bytes). The library's tests run
//! the same function over a seeded corpus on every `cargo test`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    understudy::profile::mcp::stdio::fuzz_stdin(data);
});
