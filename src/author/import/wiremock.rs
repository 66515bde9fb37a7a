//! WireMock import (`--from wiremock`): stub mappings → operation files, one per method +
//! path, each mapping a rule of the operation's one variant.
//!
//! The source is a `mappings/` directory (or a directory holding one, as WireMock's
//! `--root-dir` does), one mapping file, or a file with `{"mappings": [...]}`. WireMock has
//! no Rust parser: the subset below is read with serde structs; every other member of a
//! mapping is reported.
//!
//! # What maps
//! - `request.method` + `url` / `urlPath` → `match.method` + `match.path` (a query in `url`
//!   becomes literal `match.query` values); `urlPathPattern` / `urlPattern` whose segments are
//!   literals or one-segment regexes (`[^/]+`, `[0-9]+`, `\d+`, `[a-z]+`, …) → a path with `*`
//!   for each regex segment (a regex narrower than "any one segment" is widened: warned).
//! - `queryParameters.NAME.equalTo` (or `hasExactly` with one `equalTo`, as WireMock's
//!   recorder writes) and `headers.NAME.equalTo`: the same value in every mapping of the
//!   operation → a literal in `match`; different values → a `{NAME}` query capture and an
//!   `eq` condition on the input per mapping (headers: only literals can be matched, so a
//!   header that differs between mappings is reported and not matched).
//! - `bodyPatterns[].equalToJson` of an object → `eq` conditions on each top-level member of
//!   the input (the JSON body's members are merged into the input).
//! - `response.status` + `jsonBody` / `body` (JSON text) / `base64Body` / `bodyFileName`
//!   (read from the `__files` directory beside `mappings/`) → the native envelope
//!   `{"status","data"}`; `Location`, `Retry-After`, `ETag`, `Link`, `Sforce-Limit-Info` and
//!   rate-limit headers are kept, others (`Date`, `Server`, `Set-Cookie`, …) are not part of a
//!   mock; `fixedDelayMilliseconds` → `delay_ms`.
//! - Scenarios: `scenarioName` → a state key (`initial_state` `"Started"`),
//!   `requiredScenarioState` → a `state` condition, `newScenarioState` → `set_state`.
//! - Order: WireMock tries the lowest `priority` first (default 5), then the newest mapping;
//!   the rules are in that order. A mapping without conditions becomes the variant's own
//!   result (later ones could never answer: reported); without one, a call no mapping matches
//!   answers 404 as WireMock does. Across operations understudy picks the most specific
//!   `match`; where that disagrees with the priorities, a warning names both.
//! - One example per mapping (its query values, body members and required state), so
//!   `check` proves each mapping answers what it answered in WireMock.
//!
//! # What does not (reported per mapping with its JSON path)
//! Other matchers (`matches`, `contains`, `absent`, `equalToXml`, `matchesJsonPath`,
//! `caseInsensitive`, …), `method: ANY`, `urlPattern` with a query part, mappings without a
//! URL, non-JSON bodies, `fault`, `proxyBaseUrl`, response `transformers` (templating),
//! random delays (`delayDistribution`, `chunkedDribbleDelay`), `postServeActions`/`serveEventListeners`.

use super::{normalise_id, Imported, Note};
use crate::contract::template::parse_query;
use crate::contract::ProfileKind;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Mapping {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    request: Option<Req>,
    #[serde(default)]
    response: Option<Resp>,
    #[serde(default)]
    priority: Option<i64>,
    #[serde(default)]
    scenario_name: Option<String>,
    #[serde(default)]
    required_scenario_state: Option<String>,
    #[serde(default)]
    new_scenario_state: Option<String>,
    #[serde(default)]
    insertion_index: Option<i64>,
    #[serde(flatten)]
    other: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Req {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    url_path: Option<String>,
    #[serde(default)]
    url_path_pattern: Option<String>,
    #[serde(default)]
    url_pattern: Option<String>,
    #[serde(default)]
    query_parameters: BTreeMap<String, Value>,
    #[serde(default)]
    headers: BTreeMap<String, Value>,
    #[serde(default)]
    body_patterns: Vec<Value>,
    #[serde(flatten)]
    other: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Resp {
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    json_body: Option<Value>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    base64_body: Option<String>,
    #[serde(default)]
    body_file_name: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, Value>,
    #[serde(default)]
    fixed_delay_milliseconds: Option<u64>,
    #[serde(flatten)]
    other: Map<String, Value>,
}

/// Bookkeeping members WireMock writes that say nothing about matching or answering.
const IGNORED: &[&str] = &["id", "uuid", "persistent", "metadata", "insertionIndex"];

const KEPT_HEADERS: &[&str] = &[
    "location",
    "content-location",
    "retry-after",
    "etag",
    "last-modified",
    "link",
    "sforce-limit-info",
    "deprecation",
    "sunset",
];

/// One mapping read and converted, before grouping.
struct Stub {
    at: String,
    file: PathBuf,
    method: String,
    path: String,
    /// Literal query values and header values.
    query: BTreeMap<String, String>,
    headers: BTreeMap<String, String>,
    body: Vec<(String, Value)>,
    priority: i64,
    insertion: i64,
    scenario: Option<String>,
    required: Option<String>,
    new_state: Option<String>,
    result: Value,
    delay_ms: Option<u64>,
}

/// Read `source` (a directory or a file) into drafts.
pub fn import(source: &Path, profile: ProfileKind) -> Result<Imported, String> {
    let mut notes = Vec::new();
    let (files, files_dir) = sources(source)?;
    let mut stubs = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", f.display()))?;
        let list: Vec<(String, Value)> = match v.get("mappings") {
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("mappings/{i}"), m.clone()))
                .collect(),
            Some(_) => return Err(format!("{}: mappings: expected an array", f.display())),
            None => vec![(String::new(), v)],
        };
        for (at, m) in list {
            if let Some(name) = m.pointer("/response/bodyFileName").and_then(Value::as_str) {
                confine(
                    f,
                    &join(&at, "response/bodyFileName"),
                    name,
                    files_dir.as_deref(),
                )?;
            }
            match serde_path_to_error::deserialize::<_, Mapping>(&m) {
                Ok(m) => {
                    if let Some(s) = convert(f, &at, m, files_dir.as_deref(), &mut notes) {
                        stubs.push(s);
                    }
                }
                Err(e) => notes.push(Note::new(
                    f,
                    join(&at, &crate::config::slash_path(e.path())),
                    format!("not a WireMock stub mapping: {}: skipped", e.inner()),
                )),
            }
        }
    }
    let drafts = group(stubs, profile, &mut notes);
    Ok(Imported {
        drafts,
        notes,
        info: Vec::new(),
    })
}

/// `bodyFileName` is read only from inside the input's own directory (the parent of
/// `__files`): an absolute path, a `..` that climbs out, or a symbolic link that leads out
/// is refused, naming the file and the JSON path.
fn confine(file: &Path, at: &str, name: &str, files_dir: Option<&Path>) -> Result<(), String> {
    use std::path::Component;
    let root = files_dir.and_then(Path::parent).unwrap_or(Path::new("."));
    let refuse = || {
        Err(format!(
            "{}: {at}: `{name}` is outside the input's directory {}: import reads files only from inside it",
            file.display(),
            root.display()
        ))
    };
    let p = Path::new(name);
    // `__files` is one level below the root.
    let mut depth: i64 = 1;
    for c in p.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return refuse();
                }
            }
            Component::RootDir | Component::Prefix(_) => return refuse(),
        }
    }
    if let (Some(dir), Ok(r)) = (files_dir, root.canonicalize()) {
        if let Ok(real) = dir.join(p).canonicalize() {
            if !real.starts_with(&r) {
                return refuse();
            }
        }
    }
    Ok(())
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}/{b}"),
    }
}

/// The mapping files and the `__files` directory.
fn sources(source: &Path) -> Result<(Vec<PathBuf>, Option<PathBuf>), String> {
    if source.is_file() {
        let files_dir = source
            .parent()
            .and_then(Path::parent)
            .map(|p| p.join("__files"));
        return Ok((vec![source.to_path_buf()], files_dir));
    }
    let dir = if source.join("mappings").is_dir() {
        source.join("mappings")
    } else {
        source.to_path_buf()
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("{}: no *.json mapping files", dir.display()));
    }
    Ok((files, dir.parent().map(|p| p.join("__files"))))
}

fn convert(
    file: &Path,
    at: &str,
    m: Mapping,
    files_dir: Option<&Path>,
    notes: &mut Vec<Note>,
) -> Option<Stub> {
    let note = |notes: &mut Vec<Note>, p: &str, msg: String| {
        notes.push(Note::new(file, join(at, p), msg));
    };
    for k in m.other.keys().filter(|k| !IGNORED.contains(&k.as_str())) {
        note(notes, k, format!("`{k}` is not mapped"));
    }
    let (Some(req), Some(resp)) = (m.request, m.response) else {
        note(
            notes,
            "",
            "a mapping needs `request` and `response`: skipped".into(),
        );
        return None;
    };
    for k in req.other.keys() {
        note(
            notes,
            &format!("request/{k}"),
            format!("request matcher `{k}` is not mapped: the operation accepts any value there"),
        );
    }
    let method = req
        .method
        .clone()
        .unwrap_or_else(|| "ANY".into())
        .to_ascii_uppercase();
    if method == "ANY" {
        note(
            notes,
            "request/method",
            "`ANY` method: an operation matches one method: skipped".into(),
        );
        return None;
    }
    let mut query = BTreeMap::new();
    let path = if let Some(u) = req.url.as_deref() {
        let (p, q) = u.split_once('?').unwrap_or((u, ""));
        for (k, v) in parse_query(q) {
            query.insert(k, v);
        }
        p.to_string()
    } else if let Some(p) = req.url_path.as_deref() {
        p.to_string()
    } else if let Some((p, key)) = req
        .url_path_pattern
        .as_deref()
        .map(|p| (p, "urlPathPattern"))
        .or(req.url_pattern.as_deref().map(|p| (p, "urlPattern")))
    {
        match pattern_path(p) {
            Ok((path, warnings)) => {
                for w in warnings {
                    note(notes, &format!("request/{key}"), w);
                }
                path
            }
            Err(why) => {
                note(notes, &format!("request/{key}"), format!("{why}: skipped"));
                return None;
            }
        }
    } else {
        note(
            notes,
            "request",
            "no `url`, `urlPath` or `urlPathPattern`: an operation needs a path: skipped".into(),
        );
        return None;
    };
    for (k, v) in &req.query_parameters {
        match equal_to(v) {
            Some(s) => {
                query.insert(k.clone(), s);
            }
            None => note(
                notes,
                &format!("request/queryParameters/{k}"),
                format!("only `equalTo` is mapped (got {v}): the parameter is not matched"),
            ),
        }
    }
    let mut headers = BTreeMap::new();
    for (k, v) in &req.headers {
        match equal_to(v) {
            // A credential is never stored: the header only has to be present.
            Some(_) if crate::util::scrub::is_secret_header(k) => {
                headers.insert(k.clone(), crate::contract::template::ANY_VALUE.to_string());
                note(
                    notes,
                    &format!("request/headers/{k}"),
                    "a credential: matched as present (`*`), its value is not kept".into(),
                );
            }
            Some(s) => {
                headers.insert(k.clone(), s);
            }
            None => note(
                notes,
                &format!("request/headers/{k}"),
                format!("only `equalTo` is mapped (got {v}): the header is not matched"),
            ),
        }
    }
    let mut body = Vec::new();
    for (i, b) in req.body_patterns.iter().enumerate() {
        let at_b = format!("request/bodyPatterns/{i}");
        let j = b.get("equalToJson").map(|j| match j {
            Value::String(s) => serde_json::from_str::<Value>(s).ok(),
            other => Some(other.clone()),
        });
        match j {
            Some(Some(Value::Object(o))) => {
                if b.get("ignoreExtraElements") != Some(&Value::Bool(true)) {
                    note(
                        notes,
                        &at_b,
                        "`equalToJson` without `ignoreExtraElements`: mapped to its members' values; extra members are accepted".into(),
                    );
                }
                body.extend(o.into_iter().filter(|(k, _)| !k.contains('.')));
            }
            _ => note(
                notes,
                &at_b,
                format!("body matcher {b} is not mapped (only `equalToJson` of an object): the body is not matched"),
            ),
        }
    }
    for k in resp.other.keys() {
        note(
            notes,
            &format!("response/{k}"),
            format!("response `{k}` is not mapped: skipped"),
        );
        if matches!(k.as_str(), "fault" | "proxyBaseUrl") {
            return None;
        }
    }
    let status = resp.status.unwrap_or(200);
    let data = if let Some(j) = resp.json_body {
        Some(j)
    } else if let Some(b) = resp.body.as_deref() {
        match json_text(b.as_bytes()) {
            Ok(d) => d,
            Err(()) => {
                note(
                    notes,
                    "response/body",
                    "the body is not JSON: skipped".into(),
                );
                return None;
            }
        }
    } else if let Some(b) = resp.base64_body.as_deref() {
        let bytes = base64::engine::general_purpose::STANDARD.decode(b.trim());
        match bytes.map_err(|_| ()).and_then(|b| json_text(&b)) {
            Ok(d) => d,
            Err(()) => {
                note(
                    notes,
                    "response/base64Body",
                    "the body is not JSON: skipped".into(),
                );
                return None;
            }
        }
    } else if let Some(name) = resp.body_file_name.as_deref() {
        let f = files_dir.map(|d| d.join(name));
        match f.as_ref().map(std::fs::read) {
            Some(Ok(bytes)) => match json_text(&bytes) {
                Ok(d) => d,
                Err(()) => {
                    note(
                        notes,
                        "response/bodyFileName",
                        format!("`{name}` is not JSON: skipped"),
                    );
                    return None;
                }
            },
            _ => {
                note(
                    notes,
                    "response/bodyFileName",
                    format!(
                        "`{name}` is not in the `__files` directory beside `mappings/`: skipped"
                    ),
                );
                return None;
            }
        }
    } else {
        None
    };
    let mut result = json!({ "status": status });
    if let Some(d) = data.filter(|_| status != 204 && status != 304) {
        result["data"] = d;
    }
    let kept: Map<String, Value> = resp
        .headers
        .iter()
        .filter(|(k, _)| {
            let l = k.to_ascii_lowercase();
            KEPT_HEADERS.contains(&l.as_str())
                || l.starts_with("x-ratelimit-")
                || l.starts_with("ratelimit")
        })
        .filter_map(|(k, v)| {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Array(a) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => return None,
            };
            Some((k.clone(), Value::String(s)))
        })
        .collect();
    if !kept.is_empty() {
        result["headers"] = Value::Object(kept);
    }
    let scenario = m.scenario_name.as_deref().map(state_key);
    if scenario.is_none() && (m.required_scenario_state.is_some() || m.new_scenario_state.is_some())
    {
        note(
            notes,
            "",
            "scenario states without `scenarioName`: not mapped".into(),
        );
    }
    let delay_ms = resp.fixed_delay_milliseconds.map(|d| {
        if d > 30_000 {
            note(
                notes,
                "response/fixedDelayMilliseconds",
                format!("{d} ms is above the 30000 ms a mock may wait: cut to 30000"),
            );
        }
        d.min(30_000)
    });
    let _ = &m.name;
    Some(Stub {
        at: format!("{}#{}", file.display(), at),
        file: file.to_path_buf(),
        method,
        path,
        query,
        headers,
        body,
        priority: m.priority.unwrap_or(5),
        insertion: m.insertion_index.unwrap_or(0),
        scenario: scenario.clone(),
        required: m.required_scenario_state.filter(|_| scenario.is_some()),
        new_state: m.new_scenario_state.filter(|_| scenario.is_some()),
        result,
        delay_ms,
    })
}

fn json_text(bytes: &[u8]) -> Result<Option<Value>, ()> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(bytes).map(Some).map_err(|_| ())
}

/// A state key for a scenario: no `.` (a dot path separator).
fn state_key(name: &str) -> String {
    format!("wiremock_{}", normalise_id(name).replace('.', "_"))
}

/// `{"equalTo": v}` or `{"hasExactly": [{"equalTo": v}]}` → v.
fn equal_to(v: &Value) -> Option<String> {
    if v.get("caseInsensitive") == Some(&Value::Bool(true)) {
        return None;
    }
    if let Some(s) = v.get("equalTo").and_then(Value::as_str) {
        return (v.as_object()?.len() == 1).then(|| s.to_string());
    }
    match v
        .get("hasExactly")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([one]) if v.as_object()?.len() == 1 => equal_to(one),
        _ => None,
    }
}

/// A path regex → a path template with `*` for each regex segment (module doc).
fn pattern_path(p: &str) -> Result<(String, Vec<String>), String> {
    let body = p.strip_prefix('^').unwrap_or(p);
    let body = body.strip_suffix('$').unwrap_or(body);
    if body.contains("\\?") {
        return Err(format!("pattern `{p}` constrains the query: not mapped"));
    }
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for seg in split_segments(body).into_iter().skip(1) {
        let seg = seg.as_str();
        let lit = unescape_literal(seg);
        match lit {
            Some(l) => out.push(l),
            None => {
                let any = matches!(seg, "[^/]+" | "([^/]+)" | "[^/]*" | "([^/]*)");
                let narrow = !any
                    && regex::Regex::new(&format!("^(?:{seg})$")).is_ok()
                    && !seg.contains(".*")
                    && !seg.contains(".+");
                if !any && !narrow {
                    return Err(format!(
                        "segment `{seg}` of `{p}` may span several path segments"
                    ));
                }
                if narrow {
                    warnings.push(format!(
                        "segment regex `{seg}` is widened to any one segment (`*`)"
                    ));
                }
                out.push("*".into());
            }
        }
    }
    Ok((format!("/{}", out.join("/")), warnings))
}

/// Split a path regex on the `/` that are not inside a `[…]` class.
fn split_segments(p: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut in_class = false;
    let mut escaped = false;
    for c in p.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' => in_class = true,
            ']' => in_class = false,
            '/' if !in_class => {
                out.push(String::new());
                continue;
            }
            _ => {}
        }
        out.last_mut().expect("one segment").push(c);
    }
    out
}

/// A regex segment that is a plain literal (`\.` allowed), unescaped.
fn unescape_literal(seg: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = seg.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let n = chars.next()?;
                if n.is_ascii_alphanumeric() {
                    return None; // \d, \w, …
                }
                out.push(n);
            }
            '.' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '^' | '$' => {
                return None
            }
            c => out.push(c),
        }
    }
    Some(out)
}

mod draft;

use draft::group;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert_eq!(
            pattern_path("/api/users/[^/]+/orders").unwrap().0,
            "/api/users/*/orders"
        );
        let (p, w) = pattern_path("^/v1/items/[0-9]+$").unwrap();
        assert_eq!(p, "/v1/items/*");
        assert_eq!(w.len(), 1);
        assert_eq!(pattern_path("/v1\\.0/x").unwrap().0, "/v1.0/x");
        assert!(pattern_path("/files/.*").is_err());
    }

    #[test]
    fn equal_to_forms() {
        assert_eq!(equal_to(&json!({"equalTo": "a"})), Some("a".into()));
        assert_eq!(
            equal_to(&json!({"hasExactly": [{"equalTo": "b"}]})),
            Some("b".into())
        );
        assert_eq!(equal_to(&json!({"matches": "a.*"})), None);
        assert_eq!(
            equal_to(&json!({"equalTo": "a", "caseInsensitive": true})),
            None
        );
    }
}
