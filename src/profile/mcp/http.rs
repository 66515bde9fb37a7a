//! The HTTP side of the Streamable HTTP transport: content negotiation (`Accept`,
//! `Content-Type`), `Origin` validation, single-valued header reads, and the Base64 helpers
//! (the `=?base64?…?=` sentinel of mirrored 2026-07-28 headers, and opaque cursors).

use hyper::header::{HeaderMap, ACCEPT, CONTENT_TYPE, ORIGIN};

/// What the client's `Accept` lets us answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepts {
    pub json: bool,
    pub sse: bool,
}

/// Read `Accept`. An absent header accepts anything (RFC 9110 12.5.1); for each of
/// `application/json` and `text/event-stream` the most specific matching media range decides
/// (exact, then `type/*`, then `*/*`), and `q=0` refuses.
pub fn accepts(headers: &HeaderMap) -> Accepts {
    let values: Vec<&hyper::header::HeaderValue> = headers.get_all(ACCEPT).iter().collect();
    if values.is_empty() {
        return Accepts {
            json: true,
            sse: true,
        };
    }
    // (type, subtype, q) for every media range; an unreadable header accepts nothing.
    let mut ranges: Vec<(String, String, f32)> = Vec::new();
    for v in values {
        let Ok(text) = v.to_str() else {
            return Accepts {
                json: false,
                sse: false,
            };
        };
        for item in text.split(',') {
            let mut parts = item.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let Some((ty, sub)) = media.split_once('/') else {
                continue;
            };
            let mut q = 1.0f32;
            for p in parts {
                if let Some((k, val)) = p.split_once('=') {
                    if k.trim().eq_ignore_ascii_case("q") {
                        q = val.trim().parse().unwrap_or(0.0);
                    }
                }
            }
            ranges.push((ty.trim().to_string(), sub.trim().to_string(), q));
        }
    }
    let ok = |ty: &str, sub: &str| {
        let best = ranges
            .iter()
            .filter_map(|(t, s, q)| {
                let rank = if t == ty && s == sub {
                    3
                } else if t == ty && s == "*" {
                    2
                } else if t == "*" && s == "*" {
                    1
                } else {
                    return None;
                };
                Some((rank, *q))
            })
            .max_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        matches!(best, Some((_, q)) if q > 0.0)
    };
    Accepts {
        json: ok("application", "json"),
        sse: ok("text", "event-stream"),
    }
}

/// `Content-Type` is `application/json` (any parameters, any case).
pub fn is_json_content_type(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
        .unwrap_or(false)
}

/// `Origin` validation (DNS-rebinding defence): an absent `Origin` passes; a present one must
/// be a loopback origin — `http`/`https` with host `localhost`, `127.0.0.1` or `[::1]`, any
/// port — or equal (ASCII case-insensitively, after trimming a trailing `/`) one of `extra`.
/// Several `Origin` headers, `null`, or anything unreadable is refused.
pub fn origin_allowed(headers: &HeaderMap, extra: &[String]) -> bool {
    let mut all = headers.get_all(ORIGIN).iter();
    let Some(first) = all.next() else {
        return true;
    };
    if all.next().is_some() {
        return false;
    }
    let Ok(origin) = first.to_str() else {
        return false;
    };
    let origin = origin.trim();
    let normalized = origin.trim_end_matches('/');
    if extra.iter().any(|e| {
        e.trim()
            .trim_end_matches('/')
            .eq_ignore_ascii_case(normalized)
    }) {
        return true;
    }
    let lower = origin.to_ascii_lowercase();
    let rest = match lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
    {
        Some(r) => r,
        None => return false,
    };
    let host_port = rest.strip_suffix('/').unwrap_or(rest);
    if host_port.contains(['/', '?', '#', '@']) {
        return false;
    }
    let (host, port) = if let Some(after) = host_port.strip_prefix('[') {
        match after.split_once(']') {
            Some((h, p)) => (format!("[{h}]"), p),
            None => return false,
        }
    } else {
        match host_port.find(':') {
            Some(i) => (host_port[..i].to_string(), &host_port[i..]),
            None => (host_port.to_string(), ""),
        }
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| !p.is_empty() && p.parse::<u16>().is_ok());
    port_ok && matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]")
}

/// A header that must appear at most once, as visible ASCII.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum One<'a> {
    Absent,
    Value(&'a str),
    /// Repeated, or not representable as a string.
    Bad,
}

pub fn one<'a>(headers: &'a HeaderMap, name: &str) -> One<'a> {
    let mut all = headers.get_all(name).iter();
    let Some(first) = all.next() else {
        return One::Absent;
    };
    if all.next().is_some() {
        return One::Bad;
    }
    match first.to_str() {
        Ok(s) => One::Value(s.trim()),
        Err(_) => One::Bad,
    }
}

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64url without padding (RFC 4648 section 5).
pub fn b64url_encode(bytes: &[u8]) -> String {
    b64_encode(bytes, URL, false)
}

fn b64_encode(bytes: &[u8], alphabet: &[u8; 64], padded: bool) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (chunk[0] as u32) << 16
            | (*chunk.get(1).unwrap_or(&0) as u32) << 8
            | *chunk.get(2).unwrap_or(&0) as u32;
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(alphabet[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
        if padded {
            out.extend(std::iter::repeat_n('=', 4 - chars));
        }
    }
    out
}

fn b64_decode(text: &str, alphabet: &[u8; 64], padded: bool) -> Option<Vec<u8>> {
    let body = if padded {
        if !text.len().is_multiple_of(4) {
            return None;
        }
        text.trim_end_matches('=')
    } else {
        text
    };
    if padded && text.len() - body.len() > 2 {
        return None;
    }
    if body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for c in body.bytes() {
        let v = alphabet.iter().position(|&a| a == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // Non-canonical encodings (stray low bits) are refused.
    if acc != 0 {
        return None;
    }
    Some(out)
}

/// Decode base64url without padding.
pub fn b64url_decode(text: &str) -> Option<Vec<u8>> {
    b64_decode(text, URL, false)
}

/// Decode a mirrored header value: `=?base64?<standard Base64>?=` is decoded (it must be
/// UTF-8), anything else is taken literally.
pub fn decode_header_value(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(inner) => String::from_utf8(b64_decode(inner, STD, true)?).ok(),
        None => Some(value.to_string()),
    }
}

/// The mirrored header form of a value (the inverse of [`decode_header_value`]): visible
/// ASCII without surrounding spaces as it is, anything else `=?base64?<standard Base64>?=`.
pub fn encode_header_value(value: &str) -> String {
    let safe = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !value.starts_with("=?base64?");
    if safe {
        value.to_string()
    } else {
        format!("=?base64?{}?=", b64_encode(value.as_bytes(), STD, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn hm(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn mirrored_values_encode_and_decode() {
        for v in ["lookup", "a b", " lead", "ü", "=?base64?x?=", ""] {
            let e = encode_header_value(v);
            assert!(e.bytes().all(|b| (0x20..0x7f).contains(&b)), "{e}");
            assert_eq!(decode_header_value(&e).as_deref(), Some(v));
        }
        assert_eq!(encode_header_value("lookup"), "lookup");
        assert_eq!(encode_header_value("ü"), "=?base64?w7w=?=");
    }

    #[test]
    fn accept_negotiation() {
        let a = |v: &str| accepts(&hm(&[("accept", v)]));
        assert_eq!(
            accepts(&HeaderMap::new()),
            Accepts {
                json: true,
                sse: true
            }
        );
        assert_eq!(
            a("application/json, text/event-stream"),
            Accepts {
                json: true,
                sse: true
            }
        );
        assert_eq!(
            a("text/event-stream"),
            Accepts {
                json: false,
                sse: true
            }
        );
        assert_eq!(
            a("application/json"),
            Accepts {
                json: true,
                sse: false
            }
        );
        assert_eq!(
            a("*/*"),
            Accepts {
                json: true,
                sse: true
            }
        );
        assert_eq!(
            a("text/*"),
            Accepts {
                json: false,
                sse: true
            }
        );
        assert_eq!(
            a("text/html"),
            Accepts {
                json: false,
                sse: false
            }
        );
        assert_eq!(
            a("application/json;q=0, */*"),
            Accepts {
                json: false,
                sse: true
            }
        );
        assert_eq!(
            a("Application/JSON; charset=utf-8"),
            Accepts {
                json: true,
                sse: false
            }
        );
        let two = hm(&[
            ("accept", "application/json"),
            ("accept", "text/event-stream"),
        ]);
        assert_eq!(
            accepts(&two),
            Accepts {
                json: true,
                sse: true
            }
        );
    }

    #[test]
    fn content_type() {
        assert!(is_json_content_type(&hm(&[(
            "content-type",
            "application/json"
        )])));
        assert!(is_json_content_type(&hm(&[(
            "content-type",
            "Application/JSON; charset=utf-8"
        )])));
        assert!(!is_json_content_type(&hm(&[(
            "content-type",
            "text/plain"
        )])));
        assert!(!is_json_content_type(&hm(&[(
            "content-type",
            "application/jsonx"
        )])));
        assert!(!is_json_content_type(&HeaderMap::new()));
    }

    #[test]
    fn origins() {
        let ok = |o: &str| origin_allowed(&hm(&[("origin", o)]), &[]);
        assert!(origin_allowed(&HeaderMap::new(), &[]));
        for o in [
            "http://localhost",
            "http://localhost:3000",
            "https://127.0.0.1:8443",
            "http://[::1]:7777",
            "HTTP://LOCALHOST:1/",
        ] {
            assert!(ok(o), "{o}");
        }
        for o in [
            "https://evil.example",
            "null",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io",
            "http://localhost:notaport",
            "file://localhost",
            "http://user@localhost",
            "http://localhost/path",
        ] {
            assert!(!ok(o), "{o}");
        }
        let extra = vec!["https://app.example.com".to_string()];
        assert!(origin_allowed(
            &hm(&[("origin", "https://app.example.com")]),
            &extra
        ));
        assert!(!origin_allowed(
            &hm(&[("origin", "https://app.example.com:444")]),
            &extra
        ));
        let twice = hm(&[
            ("origin", "http://localhost"),
            ("origin", "http://localhost"),
        ]);
        assert!(!origin_allowed(&twice, &[]));
    }

    #[test]
    fn single_headers() {
        let h = hm(&[("a", "x"), ("b", "1"), ("b", "2")]);
        assert_eq!(one(&h, "a"), One::Value("x"));
        assert_eq!(one(&h, "b"), One::Bad);
        assert_eq!(one(&h, "c"), One::Absent);
    }

    #[test]
    fn base64_round_trips_and_sentinels() {
        for bytes in [&b""[..], b"f", b"fo", b"foo", b"foob", b"\xff\x00\x10hello"] {
            assert_eq!(b64url_decode(&b64url_encode(bytes)).unwrap(), bytes);
        }
        assert_eq!(b64url_encode(b"foob"), "Zm9vYg");
        assert!(b64url_decode("Zm9vYh").is_none(), "non-canonical");
        assert!(b64url_decode("Zm9v+g").is_none(), "standard alphabet");
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=").unwrap(),
            "Hello, 世界"
        );
        assert_eq!(
            decode_header_value("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=").unwrap(),
            "=?base64?literal?="
        );
        assert_eq!(decode_header_value("us-west1").unwrap(), "us-west1");
        assert!(decode_header_value("=?base64?!!!?=").is_none());
    }
}
