//! Routing (SPEC 5 step 1, 6.1): attempt → integration → operation.
//!
//! 1. **Attempt**: a first path segment `~<token>` (base URL `http://HOST:PORT/~<token>/<integration>`),
//!    else the `Understudy-Attempt: <token>` header (or, through the forward proxy, the proxy
//!    credentials: `super::connect`), else the server's default attempt. A token
//!    that names no attempt fails closed with 401 JSON — never another attempt's data. A path
//!    token and a header token that disagree are refused the same way.
//! 2. **Integration**: the next path segment is the integration name (through the forward
//!    proxy the target host chose it, and the request's segments were normalized to name it).
//! 3. **Operation**: every operation file of the integration whose match template holds; the
//!    most specific wins (more literal segments, then more query/header constraints). Only when
//!    no file matches are the profile's built-in templates tried (user files always win). When
//!    nothing matches, the message names the closest operations and the first thing that
//!    differed for each.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::request::Request;
use super::{App, BuiltinOp, Integration};
use crate::attempt::Attempt;
use crate::contract::template::{Mismatch, RequestView};
use crate::contract::Operation;

/// The header that carries a capability token.
pub const ATTEMPT_HEADER: &str = "understudy-attempt";

/// Why a request was refused before it reached any attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// 401: the token names no attempt (or path and header tokens disagree).
    UnknownToken(String),
    /// 500: the store could not be read.
    Store(String),
}

/// The attempt a request belongs to, and how many leading path segments named it.
pub fn attempt(app: &App, req: &Request) -> Result<(Arc<Attempt>, usize), Refusal> {
    // Through the forward proxy the path is the upstream's: no path token there.
    let path_token = req
        .segments
        .first()
        .filter(|_| req.via_proxy.is_none())
        .and_then(|s| s.strip_prefix('~'))
        .map(str::to_string);
    let header_token = req
        .header(ATTEMPT_HEADER)
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty());
    if req.header_count(ATTEMPT_HEADER) > 1 {
        return Err(Refusal::UnknownToken(
            "more than one Understudy-Attempt header".into(),
        ));
    }
    // A header that is present but unreadable (not visible ASCII) or empty names no attempt:
    // fail closed rather than fall back to the default attempt.
    if req.header_count(ATTEMPT_HEADER) == 1 && header_token.is_none() {
        return Err(Refusal::UnknownToken(
            "the Understudy-Attempt header is empty or not visible ASCII".into(),
        ));
    }
    // Proxy credentials (`HTTPS_PROXY=http://<token>@HOST:PORT`) count as the header.
    let proxy_token = req.via_proxy.as_ref().and_then(|v| v.token.clone());
    let header_token = match (header_token, proxy_token) {
        (Some(h), Some(p)) if !crate::attempt::ct_eq(h.as_bytes(), p.as_bytes()) => {
            return Err(Refusal::UnknownToken(
                "the proxy credentials and the Understudy-Attempt header name different attempts"
                    .into(),
            ))
        }
        (h, p) => h.or(p),
    };
    let (token, consumed) = match (&path_token, &header_token) {
        (Some(p), Some(h)) if !crate::attempt::ct_eq(p.as_bytes(), h.as_bytes()) => {
            return Err(Refusal::UnknownToken(
                "the path token and the Understudy-Attempt header name different attempts".into(),
            ))
        }
        (Some(p), _) => (Some(p.clone()), 1),
        (None, Some(h)) => (Some(h.clone()), 0),
        (None, None) => (None, 0),
    };
    match token {
        Some(t) => match app.attempts.by_token(&app.store, &t) {
            Ok(Some(a)) => Ok((a, consumed)),
            Ok(None) => Err(Refusal::UnknownToken(
                "the attempt token is not known to this server".into(),
            )),
            Err(e) => Err(Refusal::Store(e.to_string())),
        },
        None => match app.attempts.default_attempt() {
            Some(a) => Ok((a, 0)),
            None => Err(Refusal::Store("the server has no default attempt".into())),
        },
    }
}

/// What a request resolved to inside its integration.
#[derive(Debug, Clone)]
pub enum Target {
    /// An operation file.
    File(Arc<Operation>),
    /// A built-in template of the profile (a known operation without a file).
    Builtin(Arc<BuiltinOp>),
}

impl Target {
    pub fn operation_id(&self) -> &str {
        match self {
            Target::File(op) => op.id(),
            Target::Builtin(b) => &b.operation_id,
        }
    }
}

/// A matched operation and its captures (strings).
#[derive(Debug, Clone)]
pub struct Matched {
    pub target: Target,
    pub captures: Map<String, Value>,
    /// When a built-in template matched: the closest operation files and what differed, for
    /// the `no_mock` message (`None` when the integration has no operation files).
    pub near_files: Option<String>,
}

/// Match a request (segments relative to the integration base) against the integration's
/// operations; `Err` carries the `unmatched_request` message.
pub fn operation(
    integ: &Integration,
    view: &RequestView<'_>,
    line: &str,
) -> Result<Matched, String> {
    let mut misses: Vec<(usize, bool, String, Mismatch)> = Vec::new();
    let mut best: Option<((usize, usize), Matched)> = None;
    for op in &integ.operations {
        let Some(m) = &op.matcher else { continue };
        match m.matches(view) {
            Ok(captures) => {
                let spec = m.specificity();
                if best.as_ref().is_none_or(|(s, _)| spec > *s) {
                    best = Some((
                        spec,
                        Matched {
                            target: Target::File(op.clone()),
                            captures,
                            near_files: None,
                        },
                    ));
                }
            }
            Err(miss) => misses.push((miss.score, true, op.id().to_string(), miss)),
        }
    }
    if let Some((_, m)) = best {
        return Ok(m);
    }
    for b in &integ.builtins {
        match b.matcher.matches(view) {
            Ok(captures) => {
                let spec = b.matcher.specificity();
                if best.as_ref().is_none_or(|(s, _)| spec > *s) {
                    best = Some((
                        spec,
                        Matched {
                            target: Target::Builtin(b.clone()),
                            captures,
                            near_files: None,
                        },
                    ));
                }
            }
            Err(miss) => misses.push((miss.score, false, b.operation_id.clone(), miss)),
        }
    }
    if let Some((_, mut m)) = best {
        let files: Vec<_> = misses.iter().filter(|m| m.1).cloned().collect();
        if !files.is_empty() {
            m.near_files = Some(closest(files));
        }
        return Ok(m);
    }
    Err(unmatched_message(&integ.config.name, line, misses))
}

/// `` `id`: what differed; `id2` (built-in): … `` for the closest few, best first.
fn closest(mut misses: Vec<(usize, bool, String, Mismatch)>) -> String {
    // Highest score first; operation files before built-in templates on equal score.
    misses.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    misses
        .iter()
        .take(CLOSEST)
        .map(|(_, file, id, miss)| {
            let kind = if *file { "" } else { " (built-in)" };
            format!("`{id}`{kind}: {}", miss.what)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// How many closest operations an `unmatched_request` message names.
const CLOSEST: usize = 3;

fn unmatched_message(
    integration: &str,
    line: &str,
    misses: Vec<(usize, bool, String, Mismatch)>,
) -> String {
    if misses.is_empty() {
        return format!(
            "no operation of `{integration}` matches {line}: the integration has no operations"
        );
    }
    format!(
        "no operation of `{integration}` matches {line}; closest: {}",
        closest(misses)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_orders_by_score_and_caps() {
        let m = |s: usize, w: &str| Mismatch {
            what: w.into(),
            score: s,
        };
        let msg = unmatched_message(
            "crm",
            "GET /crm/x",
            vec![
                (1, true, "a".into(), m(1, "method: expected POST, got GET")),
                (
                    3,
                    false,
                    "query".into(),
                    m(3, "path segment 3: expected `query`, got `x`"),
                ),
                (3, true, "b".into(), m(3, "query `q`: missing")),
                (0, true, "c".into(), m(0, "nothing")),
            ],
        );
        assert_eq!(
            msg,
            "no operation of `crm` matches GET /crm/x; closest: `b`: query `q`: missing; `query` (built-in): path segment 3: expected `query`, got `x`; `a`: method: expected POST, got GET"
        );
        let none = unmatched_message("crm", "GET /crm", vec![]);
        assert!(none.contains("has no operations"));
    }
}
