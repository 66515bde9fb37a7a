//! Match templates (docs/src/reference/operation-files.md): which HTTP request an operation answers.
//!
//! A [`MatchSpec`] is compiled once into a [`CompiledMatch`]:
//! - `method`, compared case-insensitively;
//! - `path`: `/`-separated segments, each a literal, `{name}` (captures the whole segment into
//!   the input), literal text around captures inside one segment (`{Sid}.json`, `v{version}`,
//!   `{name}:archive`: the segment must have that text, each capture takes a non-empty
//!   rest, as query value templates do below) or `*` (any one segment). Empty segments are ignored on both sides, so a
//!   trailing slash (`…/sobjects/Contact/`, as simple-salesforce and jsforce send) never
//!   matters;
//! - `query`: parameter → value template. A template is literal text with `{name}` captures
//!   (`{{` and `}}` spell literal braces). Before matching, runs of whitespace are collapsed to
//!   one space and the ends trimmed, in the template and in the actual value alike; a capture
//!   takes any text (possibly empty) up to the next literal part, trying later occurrences of
//!   that literal when an earlier one leaves the rest unmatched. Extra parameters the template
//!   does not name are ignored;
//! - `headers`: header name (case-insensitive) → literal value (compared after trimming), or
//!   `*`: the header is present, whatever its value (what an import makes of a credential,
//!   which is never stored).
//!
//! No regular expressions are involved. [`CompiledMatch::specificity`] orders candidates
//! (more literal segments first, then more segments with literal text around a capture — so
//! `/Accounts/{Sid}.json` wins over `/Accounts/{Sid}` —, then more query/header constraints), and
//! [`CompiledMatch::ties_with`] tells `check` when two operations could answer the same request
//! with equal specificity.

use crate::contract::MatchSpec;
use hyper::http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

/// A header template that matches any value of a present header.
pub const ANY_VALUE: &str = "*";

/// A request as the matcher sees it, normalized once at the edge.
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    pub method: &'a str,
    /// Percent-decoded path segments relative to the integration base, no empty segments
    /// (see [`path_segments`]).
    pub segments: &'a [String],
    /// Decoded query parameters in order, `+` already turned into a space (see [`parse_query`]).
    pub query: &'a [(String, String)],
    pub headers: &'a HeaderMap,
}

/// Why a request did not match: the first thing that differed, in words
/// (`method: expected GET, got POST`, `path segment 3: expected `query`, got `sobjects``,
/// `query `q`: missing`, …). `score` counts the constraints that did hold before it (method,
/// segments, parameters, headers): a higher score is a closer operation, for the
/// `unmatched_request` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub what: String,
    pub score: usize,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Capture(String),
    /// Literal text around one or more captures inside one segment.
    Mixed(ValueTemplate),
    Any,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Lit(String),
    Cap(String),
}

/// A query value template, whitespace-collapsed and split into literal text and captures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueTemplate {
    source: String,
    parts: Vec<Part>,
}

impl ValueTemplate {
    /// Compile a template. Errors: `{` starting a capture name that is not closed by `}`, two
    /// captures with no literal text between them.
    pub fn parse(template: &str) -> Result<ValueTemplate, String> {
        let text = collapse_whitespace(template);
        let chars: Vec<char> = text.chars().collect();
        let mut parts: Vec<Part> = Vec::new();
        let mut lit = String::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '{' && chars.get(i + 1) == Some(&'{') {
                lit.push('{');
                i += 2;
            } else if c == '}' && chars.get(i + 1) == Some(&'}') {
                lit.push('}');
                i += 2;
            } else if c == '{' && chars.get(i + 1).is_some_and(|n| is_ident_start(*n)) {
                let mut j = i + 1;
                while j < chars.len() && is_ident_char(chars[j]) {
                    j += 1;
                }
                if chars.get(j) != Some(&'}') {
                    return Err(format!(
                        "`{{` at character {} starts a capture but is not closed by `}}` after a name of letters, digits and `_` (write `{{{{` for a literal brace)",
                        i + 1
                    ));
                }
                let name: String = chars[i + 1..j].iter().collect();
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                if matches!(parts.last(), Some(Part::Cap(_))) {
                    return Err(format!(
                        "capture `{{{name}}}` follows another capture with no literal text between them"
                    ));
                }
                parts.push(Part::Cap(name));
                i = j + 1;
            } else {
                lit.push(c);
                i += 1;
            }
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        Ok(ValueTemplate {
            source: template.to_string(),
            parts,
        })
    }

    /// The template as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// True when the template has no capture.
    pub fn is_literal(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Lit(_)))
    }

    /// Names of the captures, in order.
    pub fn capture_names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Cap(n) => Some(n.as_str()),
            Part::Lit(_) => None,
        })
    }

    /// Match an actual value (whitespace-collapsed first); captures in template order.
    pub fn matches(&self, actual: &str) -> Option<Vec<(String, String)>> {
        let text = collapse_whitespace(actual);
        let mut caps = Vec::new();
        if match_parts(&self.parts, &text, &mut caps) {
            Some(caps)
        } else {
            None
        }
    }

    fn prefix(&self) -> &str {
        match self.parts.first() {
            Some(Part::Lit(l)) => l,
            _ => "",
        }
    }

    fn suffix(&self) -> &str {
        match self.parts.last() {
            Some(Part::Lit(l)) => l,
            _ => "",
        }
    }

    fn literal_text(&self) -> Option<String> {
        if self.is_literal() {
            Some(
                self.parts
                    .iter()
                    .map(|p| match p {
                        Part::Lit(l) => l.as_str(),
                        Part::Cap(_) => "",
                    })
                    .collect(),
            )
        } else {
            None
        }
    }

    /// False only when no value can match both templates (a conservative test).
    fn may_overlap(&self, other: &ValueTemplate) -> bool {
        match (self.literal_text(), other.literal_text()) {
            (Some(a), Some(b)) => a == b,
            (Some(a), None) => other.matches(&a).is_some(),
            (None, Some(b)) => self.matches(&b).is_some(),
            (None, None) => {
                let (p, q) = (self.prefix(), other.prefix());
                let (s, t) = (self.suffix(), other.suffix());
                (p.starts_with(q) || q.starts_with(p)) && (s.ends_with(t) || t.ends_with(s))
            }
        }
    }
}

fn match_parts(parts: &[Part], text: &str, caps: &mut Vec<(String, String)>) -> bool {
    match parts.first() {
        None => text.is_empty(),
        Some(Part::Lit(l)) => match text.strip_prefix(l.as_str()) {
            Some(rest) => match_parts(&parts[1..], rest, caps),
            None => false,
        },
        Some(Part::Cap(name)) => match parts.get(1) {
            None => {
                caps.push((name.clone(), text.to_string()));
                true
            }
            Some(Part::Lit(l)) => {
                let saved = caps.len();
                let mut from = 0;
                while let Some(i) = text[from..].find(l.as_str()) {
                    let at = from + i;
                    caps.push((name.clone(), text[..at].to_string()));
                    if match_parts(&parts[1..], &text[at..], caps) {
                        return true;
                    }
                    caps.truncate(saved);
                    from = at + text[at..].chars().next().map_or(1, char::len_utf8);
                }
                false
            }
            // `ValueTemplate::parse` never puts two captures side by side.
            Some(Part::Cap(_)) => false,
        },
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Trim, and turn every run of whitespace into one space.
pub fn collapse_whitespace(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// A compiled `match` (see the module doc). Cheap to clone; `Send + Sync`.
#[derive(Debug, Clone)]
pub struct CompiledMatch {
    method: String,
    path: String,
    segments: Vec<Segment>,
    query: Vec<(String, ValueTemplate)>,
    headers: Vec<(HeaderName, String)>,
}

impl CompiledMatch {
    /// Compile a `match` member. The error says what is wrong, e.g.
    /// "path: segment 4 `v{version}`: a capture must be a whole segment".
    pub fn compile(spec: &MatchSpec) -> Result<CompiledMatch, String> {
        let method = spec.method.trim().to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(format!(
                "method: `{}` is not an HTTP method, expected e.g. GET or POST",
                spec.method
            ));
        }
        if !spec.path.starts_with('/') {
            return Err(format!(
                "path: `{}` must start with `/` (relative to the integration's base URL)",
                spec.path
            ));
        }
        let mut names: Vec<String> = Vec::new();
        let mut add_name = |name: &str, where_: &str| -> Result<(), String> {
            if names.iter().any(|n| n == name) {
                return Err(format!("{where_}: capture `{{{name}}}` is used twice"));
            }
            names.push(name.to_string());
            Ok(())
        };
        let mut segments = Vec::new();
        for (i, seg) in spec.path.split('/').filter(|s| !s.is_empty()).enumerate() {
            if seg == "*" {
                segments.push(Segment::Any);
            } else if let Some(name) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                let mut chars = name.chars();
                let ok = chars.next().is_some_and(is_ident_start) && chars.all(is_ident_char);
                if !ok {
                    return Err(format!(
                        "path: segment {} `{seg}`: a capture name is letters, digits and `_`, not starting with a digit",
                        i + 1
                    ));
                }
                add_name(name, "path")?;
                segments.push(Segment::Capture(name.to_string()));
            } else if seg.contains('*') {
                return Err(format!(
                    "path: segment {} `{seg}`: `*` must be a whole segment",
                    i + 1
                ));
            } else if seg.contains(['{', '}']) {
                let t = ValueTemplate::parse(seg)
                    .map_err(|e| format!("path: segment {} `{seg}`: {e}", i + 1))?;
                if t.is_literal() {
                    segments.push(Segment::Literal(t.literal_text().unwrap_or_default()));
                    continue;
                }
                for n in t.capture_names() {
                    add_name(n, "path")?;
                }
                segments.push(Segment::Mixed(t));
            } else {
                segments.push(Segment::Literal(seg.to_string()));
            }
        }
        let mut query = Vec::new();
        for (key, value) in &spec.query {
            if key.is_empty() {
                return Err("query: a parameter name is empty".to_string());
            }
            let t = ValueTemplate::parse(value).map_err(|e| format!("query `{key}`: {e}"))?;
            for n in t.capture_names() {
                add_name(n, &format!("query `{key}`"))?;
            }
            query.push((key.clone(), t));
        }
        let mut headers = Vec::new();
        for (name, value) in &spec.headers {
            let h = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("headers: `{name}` is not a valid header name"))?;
            if HeaderValue::from_str(value.trim()).is_err() {
                return Err(format!(
                    "headers `{name}`: `{value}` is not a valid header value"
                ));
            }
            headers.push((h, value.trim().to_string()));
        }
        Ok(CompiledMatch {
            method,
            path: spec.path.clone(),
            segments,
            query,
            headers,
        })
    }

    /// The method, upper-case.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The path template as written.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Every capture name (path, then query), in order.
    pub fn capture_names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .segments
            .iter()
            .flat_map(|s| -> Vec<&str> {
                match s {
                    Segment::Capture(n) => vec![n.as_str()],
                    Segment::Mixed(t) => t.capture_names().collect(),
                    _ => Vec::new(),
                }
            })
            .collect();
        for (_, t) in &self.query {
            out.extend(t.capture_names());
        }
        out
    }

    /// `(literal path segments, segments with literal text around a capture, query + header
    /// constraints)`; compare tuples, higher wins.
    pub fn specificity(&self) -> (usize, usize, usize) {
        let count = |f: fn(&Segment) -> bool| self.segments.iter().filter(|s| f(s)).count();
        (
            count(|s| matches!(s, Segment::Literal(_))),
            count(|s| matches!(s, Segment::Mixed(_))),
            self.query.len() + self.headers.len(),
        )
    }

    /// Match a request; on success the captures (path, then query) as JSON strings.
    pub fn matches(&self, req: &RequestView<'_>) -> Result<Map<String, Value>, Mismatch> {
        let mut score = 0;
        let mut caps = Map::new();
        if !req.method.eq_ignore_ascii_case(&self.method) {
            return Err(Mismatch {
                what: format!("method: expected {}, got {}", self.method, req.method),
                score,
            });
        }
        score += 1;
        for (i, (want, got)) in self.segments.iter().zip(req.segments).enumerate() {
            match want {
                Segment::Literal(l) if l != got => {
                    return Err(Mismatch {
                        what: format!(
                            "path segment {}: expected `{l}`, got `{got}` (template `{}`)",
                            i + 1,
                            self.path
                        ),
                        score,
                    });
                }
                Segment::Capture(n) => {
                    caps.insert(n.clone(), Value::String(got.clone()));
                }
                Segment::Mixed(t) => match t
                    .matches(got)
                    .filter(|c| c.iter().all(|(_, v)| !v.is_empty()))
                {
                    Some(found) => {
                        for (n, v) in found {
                            caps.insert(n, Value::String(v));
                        }
                    }
                    None => {
                        return Err(Mismatch {
                            what: format!(
                                "path segment {}: expected `{}`, got `{got}` (template `{}`)",
                                i + 1,
                                t.source(),
                                self.path
                            ),
                            score,
                        });
                    }
                },
                _ => {}
            }
            score += 1;
        }
        if self.segments.len() != req.segments.len() {
            return Err(Mismatch {
                what: format!(
                    "path: expected {} segments (template `{}`), got {} (`/{}`)",
                    self.segments.len(),
                    self.path,
                    req.segments.len(),
                    req.segments.join("/")
                ),
                score,
            });
        }
        for (key, t) in &self.query {
            let mut values = req.query.iter().filter(|(k, _)| k == key).map(|(_, v)| v);
            let first = match values.clone().next() {
                Some(v) => v,
                None => {
                    return Err(Mismatch {
                        what: format!("query `{key}`: missing, expected `{}`", t.source()),
                        score,
                    })
                }
            };
            match values.find_map(|v| t.matches(v)) {
                Some(found) => {
                    for (n, v) in found {
                        caps.insert(n, Value::String(v));
                    }
                }
                None => {
                    return Err(Mismatch {
                        what: format!(
                            "query `{key}`: expected `{}`, got `{}`",
                            t.source(),
                            collapse_whitespace(first)
                        ),
                        score,
                    })
                }
            }
            score += 1;
        }
        for (name, want) in &self.headers {
            let mut values = req.headers.get_all(name).iter().peekable();
            if values.peek().is_none() {
                return Err(Mismatch {
                    what: format!("header `{name}`: missing, expected `{want}`"),
                    score,
                });
            }
            let got: Vec<String> = values
                .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_string())
                .collect();
            if want != ANY_VALUE && !got.iter().any(|g| g == want) {
                return Err(Mismatch {
                    what: format!("header `{name}`: expected `{want}`, got `{}`", got[0]),
                    score,
                });
            }
            score += 1;
        }
        Ok(caps)
    }

    /// Whether some request could match both (conservative: `true` unless provably disjoint).
    pub fn may_overlap(&self, other: &CompiledMatch) -> bool {
        if self.method != other.method || self.segments.len() != other.segments.len() {
            return false;
        }
        let segs_ok = self
            .segments
            .iter()
            .zip(&other.segments)
            .all(|(a, b)| match (a, b) {
                (Segment::Literal(x), Segment::Literal(y)) => x == y,
                (Segment::Literal(x), Segment::Mixed(t))
                | (Segment::Mixed(t), Segment::Literal(x)) => t.matches(x).is_some(),
                (Segment::Mixed(s), Segment::Mixed(t)) => s.may_overlap(t),
                _ => true,
            });
        if !segs_ok {
            return false;
        }
        let query_ok = self.query.iter().all(|(k, a)| {
            other
                .query
                .iter()
                .filter(|(k2, _)| k2 == k)
                .all(|(_, b)| a.may_overlap(b))
        });
        let headers_ok = self.headers.iter().all(|(k, a)| {
            other
                .headers
                .iter()
                .filter(|(k2, _)| k2 == k)
                .all(|(_, b)| a == b || a == ANY_VALUE || b == ANY_VALUE)
        });
        query_ok && headers_ok
    }

    /// Two matchers of one integration tie when a request can match both with equal
    /// specificity — a `check` error (docs/src/reference/operation-files.md).
    pub fn ties_with(&self, other: &CompiledMatch) -> bool {
        self.specificity() == other.specificity() && self.may_overlap(other)
    }
}

/// Every pair `(i, j)` with `i < j` where `matches[i].ties_with(matches[j])`, ordered by `j`
/// then `i` (the order of the plain all-pairs loop), without comparing all pairs: two
/// templates can only tie when they share the method, the segment count and the specificity,
/// and, at any position where both have a literal segment, the literal. Within such a bucket
/// each template is compared only with the templates that have its literal (or no literal) at
/// its most selective literal position.
pub fn find_ties<'a>(matches: &[&'a CompiledMatch]) -> Vec<(usize, usize)> {
    use std::collections::HashMap;
    type Key<'a> = (&'a str, usize, (usize, usize, usize));
    // Per bucket: per position, literal → indices, and the indices with no literal there.
    struct Bucket<'a> {
        members: Vec<usize>,
        lits: Vec<HashMap<&'a str, Vec<usize>>>,
        wild: Vec<Vec<usize>>,
    }
    let mut buckets: HashMap<Key<'a>, Bucket<'a>> = HashMap::new();
    let mut out = Vec::new();
    for (j, &m) in matches.iter().enumerate() {
        let len = m.segments.len();
        let b = buckets
            .entry((m.method.as_str(), len, m.specificity()))
            .or_insert_with(|| Bucket {
                members: Vec::new(),
                lits: (0..len).map(|_| HashMap::new()).collect(),
                wild: vec![Vec::new(); len],
            });
        // The candidates: the smallest set over this template's literal positions.
        let mut best: Option<(usize, &str)> = None;
        let mut best_size = b.members.len();
        for (p, s) in m.segments.iter().enumerate() {
            if let Segment::Literal(l) = s {
                let size = b.lits[p].get(l.as_str()).map_or(0, Vec::len) + b.wild[p].len();
                if size < best_size {
                    best_size = size;
                    best = Some((p, l.as_str()));
                }
            }
        }
        let mut candidates: Vec<usize> = match best {
            None => b.members.clone(),
            Some((p, l)) => {
                let mut c = b.wild[p].clone();
                c.extend(b.lits[p].get(l).into_iter().flatten().copied());
                c.sort_unstable();
                c
            }
        };
        candidates.retain(|&i| matches[i].ties_with(m));
        out.extend(candidates.into_iter().map(|i| (i, j)));
        b.members.push(j);
        for (p, s) in m.segments.iter().enumerate() {
            match s {
                Segment::Literal(l) => b.lits[p].entry(l.as_str()).or_default().push(j),
                _ => b.wild[p].push(j),
            }
        }
    }
    out
}

/// Split a raw request path into percent-decoded segments, dropping empty ones
/// (`/a//b/` → `["a", "b"]`). Invalid escapes are kept as written.
pub fn path_segments(raw_path: &str) -> Vec<String> {
    raw_path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode(s, false))
        .collect()
}

/// Parse a raw query string (without `?`) into decoded pairs, `+` meaning a space
/// (`q=SELECT+Id+FROM+Contact` and `q=SELECT%20Id%20FROM%20Contact` are the same).
pub fn parse_query(raw_query: &str) -> Vec<(String, String)> {
    raw_query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k, true), percent_decode(v, true)),
            None => (percent_decode(p, true), String::new()),
        })
        .collect()
}

fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' && i + 2 < bytes.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        if b == b'+' && plus_is_space {
            out.push(b' ');
        } else {
            out.push(b);
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
