//! Step 3 of drafting: the `match` of a new HTTP operation — the path template (id-like
//! segments as `{id}`, `{id2}`, …, the Salesforce API version as `*`) and the query
//! constraints (a constant value literal, a varying one a template with one capture between
//! its constant prefix and suffix), each verified against every recorded request; and
//! `match.body` `form` / `multipart` when every recorded request that says its body's type
//! sent that one.

use super::ctx::Ctx;
use super::group::{Group, Req};
use super::infer::{capture_ident, is_id_segment};
use super::scrub::is_secret_field;
use crate::contract::template::{collapse_whitespace, CompiledMatch};
use crate::contract::{BodyEncoding, MatchSpec};
use crate::util::scrub::SCRUBBED;
use std::collections::BTreeMap;

impl Ctx<'_> {
    /// A new operation's path template segments (`{id}`, `{id2}`, `*`, literals).
    pub(super) fn path_template(&self, segments: &[String]) -> Vec<String> {
        let sf = self.sf.is_some();
        let mut n = 0;
        segments
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let sf_version = sf
                    && i == 2
                    && segments[0] == "services"
                    && segments[1] == "data"
                    && s.len() > 1
                    && s.starts_with('v')
                    && s[1..].chars().all(|c| c.is_ascii_digit() || c == '.');
                if sf_version {
                    "*".to_string()
                } else if is_id_segment(s, sf) {
                    n += 1;
                    if n == 1 {
                        "{id}".to_string()
                    } else {
                        format!("{{id{n}}}")
                    }
                } else if s.contains(['{', '}', '*', '/']) || s == SCRUBBED {
                    "*".to_string()
                } else {
                    s.clone()
                }
            })
            .collect()
    }

    /// The `match` of a new HTTP operation (step 3 of the module doc), verified against every
    /// recorded request of the group.
    pub(super) fn new_match(
        &self,
        method: &str,
        template: &[String],
        g: &Group<'_>,
        notes: &mut Vec<String>,
    ) -> (MatchSpec, CompiledMatch) {
        let path = format!("/{}", template.join("/"));
        let reqs: Vec<&Req> = g.members.iter().filter_map(|(_, r)| r.as_ref()).collect();
        let mut used: Vec<String> = template
            .iter()
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(str::to_string)
            .collect();
        // Parameters present in every request, secrets excepted, in first-seen order.
        let mut keys: Vec<String> = Vec::new();
        if let Some(first) = reqs.first() {
            for (k, _) in &first.query {
                let everywhere = reqs.iter().all(|r| {
                    r.first_query(k)
                        .is_some_and(|v| v != SCRUBBED && !v.contains(SCRUBBED))
                });
                if everywhere && !keys.contains(k) && !is_secret_field(k, &self.scrub.fields) {
                    keys.push(k.clone());
                }
            }
        }
        let mut smart = BTreeMap::new();
        let mut whole = BTreeMap::new();
        for k in &keys {
            let values: Vec<String> = reqs
                .iter()
                .map(|r| collapse_whitespace(r.first_query(k).unwrap_or("")))
                .collect();
            if values.iter().all(|v| *v == values[0]) {
                smart.insert(k.clone(), escape_braces(&values[0]));
                whole.insert(k.clone(), escape_braces(&values[0]));
            } else {
                let base = capture_ident(k).unwrap_or_else(|| "q".into());
                let mut whole_used = used.clone();
                smart.insert(k.clone(), varying_template(&values, &base, &mut used));
                let whole_name = unique(&base, &mut whole_used);
                used.push(whole_name.clone());
                whole.insert(k.clone(), format!("{{{whole_name}}}"));
            }
        }
        // `match.body`: the form encoding every recorded request with a body type used.
        let kinds: Vec<BodyEncoding> = reqs.iter().filter_map(|r| r.body_encoding()).collect();
        let body = kinds
            .first()
            .copied()
            .filter(|k| *k != BodyEncoding::Json && kinds.iter().all(|x| x == k));
        let spec_with = |query: BTreeMap<String, String>| MatchSpec {
            method: method.to_string(),
            path: path.clone(),
            query,
            headers: BTreeMap::new(),
            body,
        };
        let fits = |spec: &MatchSpec| -> Option<CompiledMatch> {
            let m = CompiledMatch::compile(spec).ok()?;
            reqs.iter()
                .all(|r| m.matches(&r.view()).is_ok())
                .then_some(m)
        };
        for (i, query) in [smart, whole, BTreeMap::new()].into_iter().enumerate() {
            let spec = spec_with(query);
            if let Some(m) = fits(&spec) {
                if i == 2 && !keys.is_empty() {
                    notes.push(format!(
                        "{}: {method} {path}: the query parameters {} could not be turned into a match template that holds for every recorded call; the draft does not constrain them",
                        self.integration,
                        keys.join(", ")
                    ));
                }
                return (spec, m);
            }
        }
        // The bare path always compiles and matches: its segments came from these requests.
        let spec = spec_with(BTreeMap::new());
        let m = CompiledMatch::compile(&spec).unwrap_or_else(|_| {
            CompiledMatch::compile(&MatchSpec {
                method: "GET".into(),
                path: "/".into(),
                query: BTreeMap::new(),
                headers: BTreeMap::new(),
                body: None,
            })
            .expect("a literal root template compiles")
        });
        (spec, m)
    }
}

fn escape_braces(s: &str) -> String {
    s.replace('{', "{{").replace('}', "}}")
}

fn unique(base: &str, used: &mut Vec<String>) -> String {
    let mut name = base.to_string();
    let mut n = 2;
    while used.contains(&name) {
        name = format!("{base}_{n}");
        n += 1;
    }
    used.push(name.clone());
    name
}

/// Characters that end a token in a query value: whitespace, quotes, brackets, operators and
/// separators (`-`, `.`, `_`, `/`, `@` and `:` belong to tokens: phone numbers, dates, emails).
fn is_boundary(c: char) -> bool {
    c.is_whitespace() || "'\"`=<>()[]{},;&|!".contains(c)
}

/// Common prefix and suffix of the values, cut back to token boundaries, around one capture.
fn varying_template(values: &[String], param: &str, used: &mut Vec<String>) -> String {
    let chars: Vec<Vec<char>> = values.iter().map(|v| v.chars().collect()).collect();
    let min_len = chars.iter().map(Vec::len).min().unwrap_or(0);
    let mut p = 0;
    while p < min_len && chars.iter().all(|c| c[p] == chars[0][p]) {
        p += 1;
    }
    // The prefix must end on a token boundary, or the capture would start inside a token
    // (`'555-01{x}'`); the suffix must start on one.
    while p > 0 && !is_boundary(chars[0][p - 1]) {
        p -= 1;
    }
    let mut s = 0;
    while s < min_len - p
        && chars
            .iter()
            .all(|c| c[c.len() - 1 - s] == chars[0][chars[0].len() - 1 - s])
    {
        s += 1;
    }
    while s > 0 && !is_boundary(chars[0][chars[0].len() - s]) {
        s -= 1;
    }
    let prefix: String = chars[0][..p].iter().collect();
    let suffix: String = chars[0][chars[0].len() - s..].iter().collect();
    // Name: the field compared with the capture (`… WHERE Phone = '` → `phone`, also `:`),
    // else the parameter.
    let head = prefix.trim_end_matches(|c: char| !c.is_alphanumeric() && c != '_');
    let separator = &prefix[head.len()..];
    let word: String = head
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let base = if separator.contains(['=', ':']) {
        capture_ident(&word).unwrap_or_else(|| param.to_string())
    } else {
        param.to_string()
    };
    let name = unique(&base, used);
    format!(
        "{}{{{name}}}{}",
        escape_braces(&prefix),
        escape_braces(&suffix)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varying_values_keep_their_constant_frame() {
        let mut used = Vec::new();
        let v = vec![
            "SELECT Id FROM Contact WHERE Phone = '555'".to_string(),
            "SELECT Id FROM Contact WHERE Phone = '577'".to_string(),
        ];
        assert_eq!(
            varying_template(&v, "q", &mut used),
            "SELECT Id FROM Contact WHERE Phone = '{phone}'"
        );
        let v = vec!["abc".to_string(), "xyz".to_string()];
        assert_eq!(varying_template(&v, "q", &mut used), "{q}");
        let v = vec!["a{1}".to_string(), "a{2}".to_string()];
        assert_eq!(varying_template(&v, "name", &mut used), "a{{{name}}}");
        assert_eq!(used, vec!["phone", "q", "name"]);
    }
}
