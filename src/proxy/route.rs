//! Routing (docs/src/reference/operation-files.md#matching step 1, 6.1): attempt → integration → operation.
//!
//! 1. **Attempt**: a first path segment `~<token>` (base URL `http://HOST:PORT/~<token>/<integration>`),
//!    else the `Understudy-Attempt: <token>` header (or, through the forward proxy, the proxy
//!    credentials: `super::connect`), else the server's default attempt. A token
//!    that names no attempt fails closed with 401 JSON — never another attempt's data. A path
//!    token and a header token that disagree are refused the same way.
//! 2. **Integration**: the next path segment is the integration name (through the forward
//!    proxy the target host chose it, and the request's segments were normalized to name it).
//!    A path that names none may still be routed by the Salesforce session it carries
//!    ([`by_session`]), and only by one the login handed out.
//! 3. **Operation**: every operation file of the integration whose match template holds; the
//!    most specific wins (more literal segments, then more query/header constraints). Only when
//!    no file matches are the profile's built-in templates tried (user files always win). When
//!    nothing matches, the message names the closest operations and the first thing that
//!    differed for each.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::app::attempt::Attempt;
pub use crate::app::routes::RouteIndex;
use crate::app::{App, BuiltinOp, Integration};
use crate::contract::template::{CompiledMatch, Mismatch, RequestView};
use crate::http::NativeResponse;
use crate::http::Request;
use crate::operation::Operation;

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

impl Refusal {
    /// The answer: 401 (`unknown_attempt`) or 500 (`store_error`), JSON.
    pub fn response(self) -> NativeResponse {
        let (status, code, message) = match self {
            Refusal::UnknownToken(m) => (401, "unknown_attempt", m),
            Refusal::Store(m) => (500, "store_error", m),
        };
        NativeResponse {
            status,
            headers: vec![("Understudy-Error".into(), code.into())],
            body: Some(
                json!({ "understudy_error": { "kind": "auth_error", "code": code, "message": message } }),
            ),
        }
    }
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
        (Some(h), Some(p)) if !crate::app::attempt::ct_eq(h.as_bytes(), p.as_bytes()) => {
            return Err(Refusal::UnknownToken(
                "the proxy credentials and the Understudy-Attempt header name different attempts"
                    .into(),
            ))
        }
        (h, p) => h.or(p),
    };
    let (token, consumed) = match (&path_token, &header_token) {
        (Some(p), Some(h)) if !crate::app::attempt::ct_eq(p.as_bytes(), h.as_bytes()) => {
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

/// A call whose path names no integration of its attempt, routed by the Salesforce session it
/// carries (docs/src/guides/salesforce.md#bulk-api-20-through-a-base-url): jsforce's Bulk API
/// 2.0 resolves its URLs against the instance URL's origin (`/services/data/…`) or replaces
/// its last segment (`/~<token>/services/data/…`), so neither names the integration. When
/// `Authorization: Bearer` (or `OAuth`) holds a synthetic session the login handed out
/// (`crate::profile::salesforce::login::session_id`: it names the attempt and the
/// integration, with a MAC under the attempt's secret), the call goes to that attempt and
/// integration, and `req` is rewritten as if it had been sent to the base URL
/// (`/[~<token>/]<integration>/services/…`). The attempt a token chose must be the session's;
/// without a token the session's attempt replaces the default one. Anything else — no
/// bearer, a bearer that is no such session, a MAC that does not hold, an integration that is
/// not the attempt's Salesforce integration — changes nothing: the call stays unmatched,
/// refused and recorded as before. Nothing of the bearer is kept or logged.
pub fn by_session(
    app: &App,
    req: &mut Request,
    attempt: Arc<Attempt>,
    consumed: usize,
) -> Result<(Arc<Attempt>, usize), Refusal> {
    use crate::profile::salesforce::login;
    let names_integration = req
        .segments
        .get(consumed)
        .is_some_and(|n| app.integration_for(&attempt, n).is_some());
    if req.via_proxy.is_some() || names_integration {
        return Ok((attempt, consumed));
    }
    let Some(bearer) = login::bearer(req) else {
        return Ok((attempt, consumed));
    };
    let Some((id, integration)) = login::session_claim(bearer) else {
        return Ok((attempt, consumed));
    };
    if attempt.id != id && !attempt.is_default() {
        // A token chose another attempt: the session does not move the call.
        return Ok((attempt, consumed));
    }
    let proves = |secret: &str| {
        let want = login::session_id(secret, &id, &integration);
        crate::app::attempt::ct_eq(want.as_bytes(), bearer.as_bytes())
    };
    let found = if attempt.id == id {
        let ok = proves(&attempt.read_record().secret);
        ok.then_some(attempt.clone())
    } else {
        app.attempts
            .proven(&app.store, &id, proves)
            .map_err(|e| Refusal::Store(e.to_string()))?
    };
    let Some(found) = found else {
        return Ok((attempt, consumed));
    };
    let salesforce = app
        .integration_for(&found, &integration)
        .and_then(|i| i.wire.http().and_then(|p| p.kind()))
        == Some(crate::contract::ProfileKind::Salesforce);
    if !salesforce {
        return Ok((attempt, consumed));
    }
    req.segments.insert(consumed, integration.clone());
    req.path = insert_segment(&req.path, consumed, &integration);
    Ok((found, consumed))
}

/// `path` with `segment` inserted after its first `n` non-empty segments (`/~t/a`, 1, `crm`
/// → `/~t/crm/a`; `/a`, 0, `crm` → `/crm/a`).
fn insert_segment(path: &str, n: usize, segment: &str) -> String {
    let mut at = 0;
    for _ in 0..n {
        let rest = &path[at..];
        let start = rest.len() - rest.trim_start_matches('/').len();
        at += rest[start..].find('/').map_or(rest.len(), |i| start + i);
    }
    let (head, tail) = path.split_at(at);
    let sep = if tail.starts_with('/') || tail.is_empty() {
        ""
    } else {
        "/"
    };
    format!("{head}/{segment}{sep}{tail}")
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

/// Match a request (segments relative to the integration base, in `view`) against the
/// integration's operations; `Err` carries the `unmatched_request` message, which names
/// `req`'s request line.
///
/// Operation files are tried in two passes: first only those [`may_match`] lets through
/// (no allocation for the others), and only when none matches, every file again for what
/// differed — the messages that name the closest operations.
pub fn operation(
    integ: &Integration,
    view: &RequestView<'_>,
    req: &Request,
) -> Result<Matched, String> {
    operation_with(integ, None, view, req)
}

/// [`operation`], trying in the first pass only the operation files `index` (built from
/// `integ.operations`) names as candidates, instead of every file.
pub fn operation_with(
    integ: &Integration,
    index: Option<&RouteIndex>,
    view: &RequestView<'_>,
    req: &Request,
) -> Result<Matched, String> {
    let mut best: Option<((usize, usize, usize), Matched)> = None;
    let candidates: Box<dyn Iterator<Item = &Arc<Operation>>> = match index {
        Some(ix) => Box::new(
            ix.candidates(view)
                .into_iter()
                .filter_map(|i| integ.operations.get(i)),
        ),
        None => Box::new(integ.operations.iter()),
    };
    for op in candidates {
        let Some(m) = &op.matcher else { continue };
        if !may_match(m, view) {
            continue;
        }
        if let Ok(captures) = m.matches(view) {
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
    }
    if let Some((_, m)) = best {
        return Ok(m);
    }
    // No file matches (the first pass tried every one that can): what differed, per file.
    let mut misses: Vec<Miss<'_>> = Vec::new();
    for op in &integ.operations {
        let Some(m) = &op.matcher else { continue };
        if let Err(miss) = m.matches(view) {
            misses.push((miss.score, true, op.id(), miss));
        }
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
            Err(miss) => misses.push((miss.score, false, &b.operation_id, miss)),
        }
    }
    if let Some((_, mut m)) = best {
        let files: Vec<_> = misses.iter().filter(|m| m.1).cloned().collect();
        if !files.is_empty() {
            m.near_files = Some(closest(files));
        }
        return Ok(m);
    }
    Err(unmatched_message(&integ.config.name, &req.line(), misses))
}

/// False only when [`CompiledMatch::matches`] fails for `view`, found without allocating: a
/// different method, number of path segments or literal path segment (a template segment
/// is `*`, `{name}` or a literal compared as is with the decoded request segment). Any
/// segment with `*`, `{` or `}` counts as a wildcard here; query and headers are left to
/// `matches`.
pub fn may_match(m: &CompiledMatch, view: &RequestView<'_>) -> bool {
    if !view.method.eq_ignore_ascii_case(m.method()) {
        return false;
    }
    let mut n = 0;
    for want in m.path().split('/').filter(|s| !s.is_empty()) {
        let Some(got) = view.segments.get(n) else {
            return false;
        };
        if !want.contains(['*', '{', '}']) && want != got {
            return false;
        }
        n += 1;
    }
    n == view.segments.len()
}

/// An operation that did not match: (score, is an operation file, operation id, why).
type Miss<'a> = (usize, bool, &'a str, Mismatch);

/// `` `id`: what differed; `id2` (built-in): … `` for the closest few, best first.
fn closest(mut misses: Vec<Miss<'_>>) -> String {
    // Highest score first; operation files before built-in templates on equal score.
    misses.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(b.2)));
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

fn unmatched_message(integration: &str, line: &str, misses: Vec<Miss<'_>>) -> String {
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

    fn op(id: &str, method: &str, path: &str) -> Arc<Operation> {
        let file = serde_json::json!({
            "operation_id": id,
            "match": {"method": method, "path": path},
            "input_schema": {"type": "object"},
            "output_schema": {},
        });
        let loaded = crate::operation::load::parse_operation(
            &file,
            std::path::Path::new(&format!("crm/{id}.json")),
            crate::contract::ProfileKind::Rest,
        )
        .unwrap();
        Arc::new(Operation::compile("crm", crate::contract::ProfileKind::Rest, loaded).unwrap())
    }

    /// The index names every operation `may_match` accepts, in file order, and leaves out
    /// most of the others.
    #[test]
    fn route_index_candidates_cover_every_possible_match() {
        let mut ops = vec![
            op("any", "GET", "/sobjects/*/{id}"),
            op("post", "POST", "/sobjects/Contact/{id}"),
            op("root", "GET", "/"),
            op("short", "GET", "/sobjects/Contact"),
        ];
        for i in 0..50 {
            ops.push(op(
                &format!("o{i}"),
                "GET",
                &format!("/sobjects/Obj{i}/{{id}}"),
            ));
        }
        ops.push(op("late", "GET", "/sobjects/Obj7/{id}"));
        let ix = RouteIndex::new(&ops);
        let headers = hyper::http::HeaderMap::new();
        for (method, path) in [
            ("GET", "/sobjects/Obj7/1"),
            ("get", "/sobjects/Obj7/1"),
            ("GET", "/sobjects/Contact/1"),
            ("POST", "/sobjects/Contact/1"),
            ("GET", "/sobjects/Contact"),
            ("GET", "/"),
            ("GET", "/sobjects/Nope/1"),
            ("PUT", "/sobjects/Obj7/1"),
            ("GET", "/a/b/c/d"),
        ] {
            let segments = crate::contract::template::path_segments(path);
            let view = RequestView {
                method,
                segments: &segments,
                query: &[],
                headers: &headers,
            };
            let possible: Vec<usize> = (0..ops.len())
                .filter(|&i| may_match(ops[i].matcher.as_ref().unwrap(), &view))
                .collect();
            let got = ix.candidates(&view);
            assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
            assert!(
                possible.iter().all(|i| got.contains(i)),
                "{method} {path}: {possible:?} not all in {got:?}"
            );
            assert!(got.len() <= possible.len() + 1, "{method} {path}: {got:?}");
        }
        let segments = crate::contract::template::path_segments("/sobjects/Obj7/1");
        let view = RequestView {
            method: "GET",
            segments: &segments,
            query: &[],
            headers: &headers,
        };
        let names: Vec<&str> = ix
            .candidates(&view)
            .into_iter()
            .map(|i| ops[i].id())
            .collect();
        assert_eq!(names, ["any", "o7", "late"]);
    }

    /// `may_match` is only a shortcut: it never turns away a request that `matches` accepts
    /// (and turns away those that differ in method, segment count or a literal segment).
    #[test]
    fn may_match_never_rejects_a_match() {
        use crate::contract::MatchSpec;
        let templates = [
            ("GET", "/services/data/*/sobjects/Contact/{id}", &[][..]),
            ("get", "/a/{x}/", &[][..]),
            ("POST", "/", &[][..]),
            ("GET", "/a%20b/c", &[][..]),
            ("GET", "//a//*/", &[][..]),
            ("GET", "/q", &[("q", "SELECT {what}")][..]),
        ];
        let requests = [
            ("GET", "/services/data/v60.0/sobjects/Contact/003"),
            ("GET", "/services/data/v60.0/sobjects/Account/003"),
            ("GET", "/services/data/v60.0/sobjects/Contact"),
            ("GET", "/services/data/v60.0/sobjects/Contact/003/x"),
            ("POST", "/services/data/v60.0/sobjects/Contact/003"),
            ("GET", "/a/1"),
            ("Get", "/a/1/"),
            ("GET", "/a"),
            ("POST", "/"),
            ("POST", ""),
            ("GET", "/a%20b/c"),
            ("GET", "/a b/c"),
            ("GET", "/a/anything"),
            ("GET", "/q?q=SELECT+Id"),
            ("GET", "/q?x=1"),
        ];
        let headers = hyper::http::HeaderMap::new();
        let mut agreed = 0;
        for (method, path, query) in templates {
            let m = CompiledMatch::compile(&MatchSpec {
                method: method.into(),
                path: path.into(),
                query: query
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                headers: Default::default(),
                body: None,
            })
            .unwrap();
            for (rm, target) in requests {
                let (p, q) = target.split_once('?').unwrap_or((target, ""));
                let segments = crate::contract::template::path_segments(p);
                let query = crate::contract::template::parse_query(q);
                let view = RequestView {
                    method: &rm.to_ascii_uppercase(),
                    segments: &segments,
                    query: &query,
                    headers: &headers,
                };
                let matched = m.matches(&view).is_ok();
                let may = may_match(&m, &view);
                assert!(may || !matched, "{method} {path} vs {rm} {target}");
                if may == matched {
                    agreed += 1;
                }
            }
        }
        // Only the query template makes `matches` stricter than `may_match` here.
        assert!(agreed >= templates.len() * requests.len() - 2, "{agreed}");
    }

    #[test]
    fn insert_segment_keeps_the_rest_as_written() {
        assert_eq!(
            insert_segment("/services/data", 0, "crm"),
            "/crm/services/data"
        );
        assert_eq!(
            insert_segment("/~t/services/a//b/", 1, "crm"),
            "/~t/crm/services/a//b/"
        );
        assert_eq!(insert_segment("/~t", 1, "crm"), "/~t/crm");
        assert_eq!(insert_segment("", 0, "crm"), "/crm");
        assert_eq!(insert_segment("//~t//x", 1, "crm"), "//~t/crm//x");
    }

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
                (1, true, "a", m(1, "method: expected POST, got GET")),
                (
                    3,
                    false,
                    "query",
                    m(3, "path segment 3: expected `query`, got `x`"),
                ),
                (3, true, "b", m(3, "query `q`: missing")),
                (0, true, "c", m(0, "nothing")),
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
