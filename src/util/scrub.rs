//! The one scrubber: what must never reach disk, a report, a log or an artifact.
//!
//! A secret becomes `[redacted:<first 12 hex of HMAC-SHA256(key, secret)>]` ([`Scrubber::mark`])
//! under a key kept per data dir (per fleet in PostgreSQL) by the store, so two equal secrets
//! stay equal — argument provenance and idempotency still compare them — while the value is
//! gone. A mark is never scrubbed again.
//!
//! **By name** (case-insensitive, `_` and `-` ignored: `sessionId` = `session_id`), anywhere in
//! a JSON path, a form field, a query parameter, a cookie, an XML element or a header:
//! [`SECRET_NAMES`] plus the project's `"redact"` list and `scrub.fields` / `scrub.headers`;
//! for headers also every name ending in `-token`, `-secret`, `-session`, `-api-key` or
//! starting with `x-auth`. A named value goes whole (an object under `password` too); `null`
//! and `""` hold nothing and are kept.
//!
//! **By value shape**, inside any string: `Bearer …` and `Basic …` credentials, JWTs
//! (`eyJ…`, three base64url parts), Salesforce session ids (`00D` + 12 + `!` + …), PEM
//! private keys, attempt tokens (`ust_` + 64 hex), and every value the project itself holds
//! as a credential ([`Scrubber::add_credentials`]: `UNDERSTUDY_UPSTREAM_AUTH_*`, admin
//! tokens) or that was seen under a secret name before (learned, so a secret echoed later
//! under another name is cut too). Strings that hold JSON are scrubbed inside; so are
//! form-encoded and query text (`a=1&password=…`), `"name": "value"` pairs quoted in a
//! message, and XML/SOAP elements (`<urn:password>…</urn:password>`).

use std::io::Write;
use std::sync::{Arc, RwLock};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The built-in secret names, normalized (lower case, no `_` or `-`).
pub const SECRET_NAMES: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "clientsecret",
    "token",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "authtoken",
    "bearertoken",
    "assertion",
    "clientassertion",
    "apikey",
    "xapikey",
    "authorization",
    "proxyauthorization",
    "cookie",
    "setcookie",
    "sessionid",
    "securitytoken",
    "privatekey",
    "signature",
    "understudyattempt",
    "xsfdcsession",
    "xamzsecuritytoken",
    "ocpapimsubscriptionkey",
    "privatetoken",
];

/// What the name-based scrub of captured exchanges (`crate::author::record::scrub`) writes in
/// place of a secret in drafts; the drafts then pass through [`Scrubber`] too.
pub const SCRUBBED: &str = "[scrubbed]";

/// The prefix of a mark.
pub const MARK_PREFIX: &str = "[redacted:";

/// Secrets shorter than this are not searched for inside other strings.
const MIN_CUT: usize = 8;
/// At most this many learned secrets are kept (the oldest are forgotten).
const MAX_LEARNED: usize = 4096;

/// `name` normalized for comparison: lower case, `_` and `-` dropped.
pub fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether a field, parameter or element name is one of [`SECRET_NAMES`] (the built-in rules
/// alone; [`Scrubber::is_secret_name`] adds the project's names).
pub fn is_secret_name(name: &str) -> bool {
    let n = normalize(name);
    !n.is_empty() && SECRET_NAMES.contains(&n.as_str())
}

/// Whether a header carries a secret by the built-in rules alone (the names of
/// [`SECRET_NAMES`] and the header patterns of the module doc).
pub fn is_secret_header(name: &str) -> bool {
    let n = name.trim().to_ascii_lowercase();
    SECRET_NAMES.contains(&normalize(&n).as_str()) || secret_header_pattern(&n)
}

/// The header-name patterns of the module doc (`…-token`, `…-secret`, `…api-key…`,
/// `x-auth…`), over a trimmed, lower-case name.
pub fn secret_header_pattern(n: &str) -> bool {
    n.ends_with("-token")
        || n.ends_with("-secret")
        || n.ends_with("-session")
        || n.ends_with("-api-key")
        || n.ends_with("-apikey")
        || n.contains("api-key")
        || n.contains("apikey")
        || n.starts_with("x-auth")
}

/// Whether `s` is a mark (never scrubbed again).
pub fn is_mark(s: &str) -> bool {
    s.len() == MARK_PREFIX.len() + 13
        && s.starts_with(MARK_PREFIX)
        && s.ends_with(']')
        && s[MARK_PREFIX.len()..s.len() - 1]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(msg);
    let ih = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(ih);
    let mut out = [0u8; 32];
    out.copy_from_slice(&outer.finalize());
    out
}

/// A fresh random key.
pub fn new_key() -> [u8; 32] {
    let mut k = [0u8; 32];
    getrandom::fill(&mut k).expect("the OS random source is unavailable");
    k
}

/// The scrubber of one store (module doc).
#[derive(Debug)]
pub struct Scrubber {
    key: [u8; 32],
    extra: RwLock<Extra>,
}

#[derive(Debug, Default)]
struct Extra {
    /// Normalized extra names.
    names: Vec<String>,
    /// Configured credentials and learned secrets, longest first.
    values: Vec<String>,
    learned: usize,
}

impl Scrubber {
    pub fn new(key: [u8; 32]) -> Scrubber {
        Scrubber {
            key,
            extra: RwLock::new(Extra::default()),
        }
    }

    fn extra(&self) -> std::sync::RwLockReadGuard<'_, Extra> {
        self.extra.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Add secret names (the project's `redact`, `scrub.fields`, `scrub.headers`).
    pub fn add_names<'a>(&self, names: impl IntoIterator<Item = &'a String>) {
        let mut e = self.extra.write().unwrap_or_else(|p| p.into_inner());
        for n in names {
            let n = normalize(n);
            if !n.is_empty() && !e.names.contains(&n) {
                e.names.push(n);
            }
        }
    }

    /// Add values the project holds as credentials (cut out of every string).
    pub fn add_credentials<'a>(&self, values: impl IntoIterator<Item = &'a str>) {
        for v in values {
            self.learn(v, false);
        }
    }

    fn learn(&self, v: &str, learned: bool) {
        let v = v.trim();
        if v.len() < MIN_CUT || is_mark(v) {
            return;
        }
        {
            if self.extra().values.iter().any(|x| x == v) {
                return;
            }
        }
        let mut e = self.extra.write().unwrap_or_else(|p| p.into_inner());
        if learned {
            if e.learned >= MAX_LEARNED {
                return;
            }
            e.learned += 1;
        }
        e.values.push(v.to_string());
        e.values.sort_by_key(|x| std::cmp::Reverse(x.len()));
    }

    /// What `secret` becomes.
    pub fn mark(&self, secret: &str) -> String {
        let h = hmac_sha256(&self.key, secret.as_bytes());
        let mut s = String::with_capacity(MARK_PREFIX.len() + 13);
        s.push_str(MARK_PREFIX);
        for b in &h[..6] {
            s.push_str(&format!("{b:02x}"));
        }
        s.push(']');
        s
    }

    /// Whether a field, parameter or element name is secret.
    pub fn is_secret_name(&self, name: &str) -> bool {
        let n = normalize(name);
        !n.is_empty() && (SECRET_NAMES.contains(&n.as_str()) || self.extra().names.contains(&n))
    }

    /// Whether a header carries a secret.
    pub fn is_secret_header(&self, name: &str) -> bool {
        self.is_secret_name(name) || is_secret_header(name)
    }

    /// A header's value as it may be kept.
    pub fn header(&self, name: &str, value: &str) -> String {
        if self.is_secret_header(name) {
            if value.is_empty() || is_mark(value) {
                return value.to_string();
            }
            // `Bearer <token>`: the token's mark (equal to the same token elsewhere).
            if let Some((scheme, rest)) = value.trim().split_once(' ') {
                if matches!(scheme.to_ascii_lowercase().as_str(), "bearer" | "basic") {
                    self.learn(rest.trim(), true);
                    return format!("{scheme} {}", self.mark(rest.trim()));
                }
            }
            self.learn(value, true);
            return self.mark(value);
        }
        self.text(value).unwrap_or_else(|| value.to_string())
    }

    /// Scrub a JSON value in place (names, then shapes and known secrets in every string).
    /// Returns whether anything changed.
    pub fn json(&self, v: &mut Value) -> bool {
        self.collect(v);
        self.walk(v)
    }

    /// Scrub a value found at `path` (names of the members above it, outermost first): the
    /// whole value is a secret when one of them is a secret name (a diff's `$.data.token`
    /// shows the value alone), else as [`Scrubber::json`].
    pub fn json_at<'a>(&self, path: impl IntoIterator<Item = &'a str>, v: &mut Value) -> bool {
        if path.into_iter().any(|n| self.is_secret_name(n)) {
            if let Value::String(s) = v {
                self.learn(strip_scheme(s), true);
            }
            return self.mark_value(v);
        }
        self.json(v)
    }

    /// Scrub a string; `None` when it holds nothing to scrub.
    pub fn text(&self, s: &str) -> Option<String> {
        if is_mark(s) || s.is_empty() {
            return None;
        }
        let t = s.trim_start();
        if t.starts_with('{') || t.starts_with('[') {
            if let Ok(mut v) = serde_json::from_str::<Value>(s) {
                if v.is_object() || v.is_array() {
                    return self.json(&mut v).then(|| v.to_string());
                }
            }
        }
        let spans = self.spans(s);
        if spans.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(s.len());
        let mut at = 0;
        for (start, end, secret) in spans {
            out.push_str(&s[at..start]);
            out.push_str(&self.mark(&secret));
            at = end;
        }
        out.push_str(&s[at..]);
        Some(out)
    }

    /// Learn the string values under secret names (before the walk, so a secret that also
    /// appears under an innocent name earlier in the same value is cut there too).
    fn collect(&self, v: &Value) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match x {
                        Value::String(s) if self.is_secret_name(k) => {
                            let secret = strip_scheme(s);
                            self.learn(secret, true)
                        }
                        _ => self.collect(x),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| self.collect(x)),
            _ => {}
        }
    }

    fn walk(&self, v: &mut Value) -> bool {
        match v {
            Value::Object(m) => {
                let mut changed = false;
                for (k, x) in m.iter_mut() {
                    changed |= if self.is_secret_name(k) {
                        self.mark_value(x)
                    } else {
                        self.walk(x)
                    };
                }
                changed
            }
            Value::Array(a) => a.iter_mut().fold(false, |c, x| self.walk(x) | c),
            Value::String(s) => match self.text(s) {
                Some(n) => {
                    *s = n;
                    true
                }
                None => false,
            },
            _ => false,
        }
    }

    fn mark_value(&self, v: &mut Value) -> bool {
        match v {
            Value::Null => false,
            Value::String(s) if s.is_empty() || is_mark(s) => false,
            Value::String(s) => {
                // `Bearer <token>` under `authorization`: the scheme stays readable.
                *s = match s.split_once(' ') {
                    Some((scheme, rest))
                        if matches!(scheme.to_ascii_lowercase().as_str(), "bearer" | "basic") =>
                    {
                        format!("{scheme} {}", self.mark(rest.trim()))
                    }
                    _ => self.mark(s),
                };
                true
            }
            other => {
                *other = Value::String(self.mark(&other.to_string()));
                true
            }
        }
    }

    /// The secret spans of a string: `(start, end, secret)`, sorted, not overlapping.
    fn spans(&self, s: &str) -> Vec<(usize, usize, String)> {
        let mut found: Vec<(usize, usize, String)> = Vec::new();
        let b = s.as_bytes();
        // Known values (configured credentials, learned secrets).
        {
            let e = self.extra();
            for v in &e.values {
                let mut from = 0;
                while let Some(i) = s[from..].find(v.as_str()) {
                    let st = from + i;
                    found.push((st, st + v.len(), v.clone()));
                    from = st + v.len();
                }
            }
        }
        schemes(s, &mut found);
        jwts(b, &mut found);
        salesforce_sessions(b, &mut found);
        attempt_tokens(b, &mut found);
        pem_keys(s, &mut found);
        self.name_value_pairs(s, &mut found);
        self.multipart_parts(s, &mut found);
        self.quoted_pairs(s, &mut found);
        self.xml_elements(s, &mut found);
        // Earliest first, the longest at one start; drop overlaps.
        found.sort_by(|x, y| x.0.cmp(&y.0).then(y.1.cmp(&x.1)));
        let mut out: Vec<(usize, usize, String)> = Vec::with_capacity(found.len());
        for f in found {
            if f.0 >= f.1 || !s.is_char_boundary(f.0) || !s.is_char_boundary(f.1) {
                continue;
            }
            if is_mark(&s[f.0..f.1]) || out.last().is_some_and(|l| f.0 < l.1) {
                continue;
            }
            out.push(f);
        }
        out
    }

    /// `name=value` (form bodies, query strings, cookies, URLs inside text).
    fn name_value_pairs(&self, s: &str, found: &mut Vec<(usize, usize, String)>) {
        let b = s.as_bytes();
        for (eq, _) in s.match_indices('=') {
            let mut st = eq;
            while st > 0 && is_name_byte(b[st - 1]) {
                st -= 1;
            }
            if st == eq {
                continue;
            }
            let name = &s[st..eq];
            // `user.password=…`: the last part of a dotted form name.
            let name = name.rfind('.').map_or(name, |i| &name[i + 1..]);
            if !self.is_secret_name(&percent_decode(name)) {
                continue;
            }
            let mut end = eq + 1;
            while end < b.len() && !b"&; \t\r\n\"'#<>".contains(&b[end]) {
                end += 1;
            }
            if end > eq + 1 {
                let raw = &s[eq + 1..end];
                if !is_mark(raw) {
                    let secret = percent_decode(raw);
                    self.learn(&secret, true);
                    found.push((eq + 1, end, secret));
                }
            }
        }
    }

    /// A multipart/form-data part (`Content-Disposition: form-data; name="password"`, a blank
    /// line, the value up to the next boundary line) whose name is secret: the value.
    fn multipart_parts(&self, s: &str, found: &mut Vec<(usize, usize, String)>) {
        let lower = s.to_ascii_lowercase();
        for (i, _) in lower.match_indices("form-data;") {
            let line_end = s[i..].find('\n').map_or(s.len(), |e| i + e);
            let Some(n) = lower[i..line_end].find("name=\"").map(|x| i + x + 6) else {
                continue;
            };
            let Some(ne) = s[n..line_end].find('"').map(|x| n + x) else {
                continue;
            };
            if !self.is_secret_name(&s[n..ne]) {
                continue;
            }
            // The part's headers end at the first blank line.
            let Some((vs, _)) = ["\r\n\r\n", "\n\n"]
                .iter()
                .filter_map(|sep| s[ne..].find(sep).map(|x| (ne + x + sep.len(), x)))
                .min_by_key(|(_, x)| *x)
            else {
                continue;
            };
            let ve = ["\r\n--", "\n--"]
                .iter()
                .filter_map(|sep| s[vs..].find(sep))
                .min()
                .map_or(s.len(), |x| vs + x);
            if ve > vs && !is_mark(&s[vs..ve]) {
                let secret = s[vs..ve].to_string();
                self.learn(&secret, true);
                found.push((vs, ve, secret));
            }
        }
    }

    /// `"name": "value"` quoted inside a message.
    fn quoted_pairs(&self, s: &str, found: &mut Vec<(usize, usize, String)>) {
        let b = s.as_bytes();
        let mut i = 0;
        while let Some(q) = s[i..].find('"') {
            let open = i + q;
            let Some(close_rel) = s[open + 1..].find('"') else {
                break;
            };
            let close = open + 1 + close_rel;
            let name = &s[open + 1..close];
            i = close + 1;
            if name.is_empty() || name.len() > 64 || !self.is_secret_name(name) {
                i = close;
                continue;
            }
            let mut j = close + 1;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\\') {
                j += 1;
            }
            if j >= b.len() || b[j] != b':' {
                i = close;
                continue;
            }
            j += 1;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\\') {
                j += 1;
            }
            if j >= b.len() || b[j] != b'"' {
                continue;
            }
            let vs = j + 1;
            let mut k = vs;
            while k < b.len() && b[k] != b'"' {
                if b[k] == b'\\' && k + 1 < b.len() && b[k + 1] != b'"' {
                    k += 1;
                } else if b[k] == b'\\' {
                    break;
                }
                k += 1;
            }
            if k > vs {
                let secret = s[vs..k].to_string();
                self.learn(&secret, true);
                found.push((vs, k, secret));
            }
            i = k.min(b.len());
        }
    }

    /// `<prefix:name attrs>value</…>`.
    fn xml_elements(&self, s: &str, found: &mut Vec<(usize, usize, String)>) {
        let b = s.as_bytes();
        for (lt, _) in s.match_indices('<') {
            let mut e = lt + 1;
            while e < b.len() && (is_name_byte(b[e]) || b[e] == b':') {
                e += 1;
            }
            if e == lt + 1 {
                continue;
            }
            let tag = &s[lt + 1..e];
            let local = tag.rsplit(':').next().unwrap_or(tag);
            if !self.is_secret_name(local) {
                continue;
            }
            let Some(gt_rel) = s[e..].find('>') else {
                continue;
            };
            let gt = e + gt_rel;
            if b[gt - 1] == b'/' {
                continue;
            }
            let vs = gt + 1;
            let ve = s[vs..].find('<').map(|x| vs + x).unwrap_or(b.len());
            if ve > vs {
                let secret = s[vs..ve].to_string();
                if !secret.trim().is_empty() {
                    self.learn(&secret, true);
                    found.push((vs, ve, secret));
                }
            }
        }
    }
}

/// The key a data dir keeps in `scrub.key` (64 hex), when it has one: read, never made here
/// (a command that opens no store uses it so its marks equal the evidence's).
pub fn read_key(data_dir: &std::path::Path) -> Option<[u8; 32]> {
    let h = std::fs::read_to_string(data_dir.join("scrub.key")).ok()?;
    let h = h.trim();
    if h.len() != 64 || !h.is_ascii() {
        return None;
    }
    let mut k = [0u8; 32];
    for (i, out) in k.iter_mut().enumerate() {
        *out = u8::from_str_radix(&h[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(k)
}

/// A URL with its user information (`https://user:pass@host/…`) spelled `[redacted]@`.
pub fn url_without_userinfo(url: &str) -> String {
    let Some(at) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let end = url[at..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |e| at + e);
    match url[at..end].rfind('@') {
        Some(i) => format!("{}[redacted]@{}", &url[..at], &url[at + i + 1..]),
        None => url.to_string(),
    }
}

/// The scrubber the logs go through ([`LogWriter`]): the store's once it is open
/// ([`set_log_scrubber`]), before that one with a key of this process (shapes and names are
/// caught all the same).
static LOG_SCRUBBER: RwLock<Option<Arc<Scrubber>>> = RwLock::new(None);

/// Make the logs use `s` from now on.
pub fn set_log_scrubber(s: Arc<Scrubber>) {
    *LOG_SCRUBBER.write().unwrap_or_else(|p| p.into_inner()) = Some(s);
}

fn log_scrubber() -> Arc<Scrubber> {
    if let Some(s) = LOG_SCRUBBER
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
    {
        return s.clone();
    }
    let mut w = LOG_SCRUBBER.write().unwrap_or_else(|p| p.into_inner());
    w.get_or_insert_with(|| Arc::new(Scrubber::new(new_key())))
        .clone()
}

/// A log writer that scrubs each line before it reaches `inner`: every log line, at every
/// level and from every crate, passes the one scrubber. Lines are buffered until a newline,
/// a flush or the writer's end (the log formatter makes one writer per event).
pub struct LogWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> LogWriter<W> {
    pub fn new(inner: W) -> LogWriter<W> {
        LogWriter {
            inner,
            buf: Vec::new(),
        }
    }

    fn emit(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        let s = log_scrubber();
        let mut out = String::with_capacity(text.len());
        for line in text.split_inclusive('\n') {
            let (body, nl) = match line.strip_suffix('\n') {
                Some(b) => (b, "\n"),
                None => (line, ""),
            };
            match s.text(body) {
                Some(t) => out.push_str(&t),
                None => out.push_str(body),
            }
            out.push_str(nl);
        }
        self.inner.write_all(out.as_bytes())
    }
}

impl<W: Write> Write for LogWriter<W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        if b.ends_with(b"\n") {
            self.emit()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.emit()?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for LogWriter<W> {
    fn drop(&mut self) {
        let _ = self.emit();
        let _ = self.inner.flush();
    }
}

/// `Bearer x` / `Basic x` → `x`; anything else as it is.
fn strip_scheme(s: &str) -> &str {
    match s.split_once(' ') {
        Some((scheme, rest))
            if matches!(scheme.to_ascii_lowercase().as_str(), "bearer" | "basic") =>
        {
            rest.trim()
        }
        _ => s,
    }
}

fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.' || c == b'[' || c == b']'
}

fn is_token_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-._~+/=".contains(&c)
}

fn is_b64url(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_'
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[path = "scrub_shapes.rs"]
mod shapes;
use shapes::{attempt_tokens, jwts, pem_keys, salesforce_sessions, schemes};

#[cfg(test)]
#[path = "scrub_tests.rs"]
mod tests;
