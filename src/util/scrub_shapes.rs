//! The value shapes of the one scrubber (`super`): `Bearer`/`Basic` credentials, JWTs,
//! Salesforce session ids, attempt tokens and PEM private keys, each found as byte spans.

use super::{is_b64url, is_mark, is_token_byte, MIN_CUT};

/// `Bearer <token>` and `Basic <credentials>` (the token: 8+ characters with a digit or a
/// symbol, so prose such as "Bearer authentication" is left alone).
pub(super) fn schemes(s: &str, found: &mut Vec<(usize, usize, String)>) {
    let lower = s.to_ascii_lowercase();
    let b = s.as_bytes();
    for word in ["bearer ", "basic "] {
        for (i, _) in lower.match_indices(word) {
            if i > 0 && b[i - 1].is_ascii_alphanumeric() {
                continue;
            }
            let st = i + word.len();
            let mut e = st;
            while e < b.len() && is_token_byte(b[e]) {
                e += 1;
            }
            let tok = &s[st..e];
            let tokenish = tok.len() >= MIN_CUT
                && tok.bytes().any(|c| !c.is_ascii_alphabetic())
                && !is_mark(tok);
            if tokenish {
                found.push((st, e, tok.to_string()));
            }
        }
    }
}

/// `eyJ…` `.` `…` `.` `…` (base64url; the third part may be empty).
pub(super) fn jwts(b: &[u8], found: &mut Vec<(usize, usize, String)>) {
    let mut i = 0;
    while i + 3 <= b.len() {
        if &b[i..i + 3] == b"eyJ" && (i == 0 || !is_b64url(b[i - 1])) {
            let mut e = i;
            let mut parts = [0usize; 3];
            let mut ok = true;
            for (n, part) in parts.iter_mut().enumerate() {
                let st = e;
                while e < b.len() && is_b64url(b[e]) {
                    e += 1;
                }
                *part = e - st;
                if n < 2 {
                    if e < b.len() && b[e] == b'.' {
                        e += 1;
                    } else {
                        ok = false;
                        break;
                    }
                }
            }
            if ok && parts[0] >= 4 && parts[1] >= 4 {
                let v = String::from_utf8_lossy(&b[i..e]).into_owned();
                found.push((i, e, v));
                i = e;
                continue;
            }
        }
        i += 1;
    }
}

/// `00D` + 12 (or 15: the 18-character org id) alphanumerics + `!` + 8 or more of
/// `[A-Za-z0-9._]`.
pub(super) fn salesforce_sessions(b: &[u8], found: &mut Vec<(usize, usize, String)>) {
    let mut i = 0;
    while i + 16 < b.len() {
        let bang = [15usize, 18].into_iter().find(|&n| {
            i + n < b.len()
                && b[i + 3..i + n].iter().all(u8::is_ascii_alphanumeric)
                && b[i + n] == b'!'
        });
        if let Some(n) =
            bang.filter(|_| &b[i..i + 3] == b"00D" && (i == 0 || !b[i - 1].is_ascii_alphanumeric()))
        {
            let mut e = i + n + 1;
            while e < b.len() && (b[e].is_ascii_alphanumeric() || b[e] == b'.' || b[e] == b'_') {
                e += 1;
            }
            if e - (i + n + 1) >= 8 {
                found.push((i, e, String::from_utf8_lossy(&b[i..e]).into_owned()));
                i = e;
                continue;
            }
        }
        i += 1;
    }
}

/// `ust_` + 64 hex: an attempt token.
pub(super) fn attempt_tokens(b: &[u8], found: &mut Vec<(usize, usize, String)>) {
    let mut i = 0;
    while i + 68 <= b.len() {
        if &b[i..i + 4] == b"ust_" && b[i + 4..i + 68].iter().all(u8::is_ascii_hexdigit) {
            found.push((
                i,
                i + 68,
                String::from_utf8_lossy(&b[i..i + 68]).into_owned(),
            ));
            i += 68;
            continue;
        }
        i += 1;
    }
}

/// `-----BEGIN … PRIVATE KEY-----` … `-----END … PRIVATE KEY-----` (an unterminated block:
/// to the end of the string).
pub(super) fn pem_keys(s: &str, found: &mut Vec<(usize, usize, String)>) {
    let mut from = 0;
    while let Some(i) = s[from..].find("-----BEGIN ") {
        let st = from + i;
        let Some(hdr_end) = s[st + 11..].find("-----").map(|x| st + 11 + x + 5) else {
            break;
        };
        if !s[st..hdr_end].contains("PRIVATE KEY") {
            from = hdr_end;
            continue;
        }
        let end = match s[hdr_end..].find("-----END ") {
            Some(x) => {
                let e = hdr_end + x + 9;
                s[e..].find("-----").map(|y| e + y + 5).unwrap_or(s.len())
            }
            None => s.len(),
        };
        found.push((st, end, s[st..end].to_string()));
        from = end;
    }
}
