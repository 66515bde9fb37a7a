//! HAR import (`--from har`): HTTP Archive 1.2 (and 1.3) entries → exchanges → the record
//! draft builder, exactly as if record mode had seen the traffic.
//!
//! # What maps
//! - Each `log.entries[i]` becomes one exchange, in file order (HAR writers list entries in
//!   the order they started): `request.method`, the path and query of `request.url`,
//!   `request.headers`, `request.postData` (JSON `text`; a form-encoded or multipart body —
//!   its `params`, else its `text` — becomes the object of its fields, repeated names an
//!   array, as record mode sees a form body); `response.status`, `response.headers`,
//!   `response.content.text` (`encoding: "base64"` decoded).
//! - The draft builder then does what record mode does: id-like path segments become `{id}`,
//!   varying query values become templates, one variant per outcome, one example per distinct
//!   input, inferred input/output schemas, the same input answered differently over time
//!   becomes a state sequence, and secrets are scrubbed before anything is written
//!   (`Authorization`, `Cookie`, `Set-Cookie`, API-key headers, `access_token`/`sessionId`-like
//!   body fields and query parameters, plus the project's `scrub` list). HAR's own
//!   `request.cookies` / `response.cookies` arrays are never read.
//! - Only one host is imported: the host of the integration's `upstream` when the project file
//!   names one (its path is the prefix removed from every entry), else the host with the most
//!   entries.
//!
//! # What does not (each one is listed in the report with its JSON path)
//! - entries of other hosts; entries whose answer is not JSON (HTML, scripts, images,
//!   `text/event-stream`) or whose text was not saved by the producer; non-HTTP(S) URLs;
//!   WebSocket messages (`_webSocketMessages`); timings, cache and redirects (an answer is
//!   replayed as it was, a 3xx included, never followed).
//!
//! The HAR is read with serde structs for the subset above rather than the `har` crate: that
//! crate builds, but brings `serde_with` (and with it `schemars`, `jiff` twice, `darling`) for
//! eight fields, and refuses files with any required HAR member missing, which real
//! producers do omit.

use super::{from_exchanges, Imported, Note};
use crate::author::record::{parse_body, Call, Exchange, HttpCall};
use crate::config::Scrub;
use crate::contract::template::parse_query;
use crate::contract::ProfileKind;
use base64::Engine as _;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Deserialize)]
struct Har {
    log: Log,
}

#[derive(Debug, Deserialize)]
struct Log {
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    entries: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    request: Request,
    response: Response,
    #[serde(default, rename = "_webSocketMessages")]
    websocket: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Request {
    method: String,
    url: String,
    #[serde(default)]
    headers: Vec<NameValue>,
    #[serde(default, rename = "postData")]
    post_data: Option<PostData>,
}

#[derive(Debug, Deserialize)]
struct NameValue {
    name: String,
    value: String,
}

#[derive(Debug, Deserialize)]
struct PostData {
    #[serde(default, rename = "mimeType")]
    mime_type: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    params: Vec<Param>,
}

#[derive(Debug, Deserialize)]
struct Param {
    name: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default, rename = "fileName")]
    file_name: Option<String>,
}

/// A request's `postData` as the proxy would see its body: a form (`params`, else its
/// `text` parsed by `crate::http::form`) becomes the object of its fields, like a form body
/// in record mode; anything else is `text` as JSON (else text). `Err` says why a form body
/// could not be read.
fn post_body(p: &PostData) -> Result<Option<serde_json::Value>, String> {
    use crate::http::form::{body_kind, parse, BodyKind};
    let kind = body_kind(p.mime_type.as_deref());
    if kind == BodyKind::Json {
        return Ok(p.text.as_deref().and_then(|t| parse_body(t.as_bytes())));
    }
    if !p.params.is_empty() {
        let mut m = serde_json::Map::new();
        for q in &p.params {
            let v = match (&q.value, &q.file_name) {
                (Some(v), _) => serde_json::Value::String(v.clone()),
                (None, Some(f)) => {
                    return Err(format!(
                        "file field `{}` ({f}) has no saved content",
                        q.name
                    ))
                }
                (None, None) => serde_json::Value::String(String::new()),
            };
            crate::http::form::insert_field(&mut m, q.name.clone(), v);
        }
        return Ok(Some(serde_json::Value::Object(m)));
    }
    parse(&kind, p.text.as_deref().unwrap_or("").as_bytes())
}

#[derive(Debug, Deserialize)]
struct Response {
    status: i64,
    #[serde(default)]
    headers: Vec<NameValue>,
    #[serde(default)]
    content: Option<Content>,
}

#[derive(Debug, Deserialize)]
struct Content {
    #[serde(default)]
    size: Option<i64>,
    #[serde(default, rename = "mimeType")]
    mime_type: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    encoding: Option<String>,
}

/// `scheme://authority` and the path+query of an absolute URL.
fn split_url(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        return None;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let origin = format!("{}://{}", scheme.to_ascii_lowercase(), &rest[..end]);
    let mut tail = rest[end..].to_string();
    if let Some(i) = tail.find('#') {
        tail.truncate(i);
    }
    if !tail.starts_with('/') {
        tail.insert(0, '/');
    }
    Some((origin, tail))
}

/// Read one HAR file into drafts. `upstream`: the integration's upstream URL, if any.
pub fn import(
    file: &Path,
    text: &str,
    integration: &str,
    profile: ProfileKind,
    scrub: &Scrub,
    upstream: Option<&str>,
) -> Result<Imported, String> {
    let har: Har = serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text))
        .map_err(|e| {
            format!(
                "{}: {}: not a HAR file: {}",
                file.display(),
                crate::config::slash_path(e.path()),
                e.inner()
            )
        })?;
    let mut notes = Vec::new();
    if let Some(v) = har.log.version.as_deref() {
        if !matches!(v, "1.1" | "1.2" | "1.3") {
            notes.push(Note::new(
                file,
                "log/version",
                format!("HAR version `{v}`: read as 1.2"),
            ));
        }
    }
    let (want_origin, prefix) = match upstream.and_then(split_url) {
        Some((o, p)) => (Some(o), p.trim_end_matches('/').to_string()),
        None => (None, String::new()),
    };
    let origin = want_origin.or_else(|| {
        let mut count: BTreeMap<String, usize> = BTreeMap::new();
        for e in &har.log.entries {
            if let Some((o, _)) = split_url(&e.request.url) {
                *count.entry(o).or_default() += 1;
            }
        }
        count.into_iter().max_by_key(|(_, n)| *n).map(|(o, _)| o)
    });
    let mut exchanges = Vec::new();
    for (i, e) in har.log.entries.iter().enumerate() {
        let at = format!("log/entries/{i}");
        let Some((o, tail)) = split_url(&e.request.url) else {
            notes.push(Note::new(
                file,
                format!("{at}/request/url"),
                format!("`{}` is not an http(s) URL: skipped", e.request.url),
            ));
            continue;
        };
        if Some(&o) != origin.as_ref() {
            notes.push(Note::new(
                file,
                format!("{at}/request/url"),
                format!(
                    "host {o} is not the integration's ({}): skipped",
                    origin.as_deref().unwrap_or("?")
                ),
            ));
            continue;
        }
        if e.websocket.is_some() {
            notes.push(Note::new(
                file,
                format!("{at}/_webSocketMessages"),
                "WebSocket messages are not mapped: the entry is skipped",
            ));
            continue;
        }
        let (path, query) = match tail.split_once('?') {
            Some((p, q)) => (p.to_string(), parse_query(q)),
            None => (tail.clone(), Vec::new()),
        };
        let Some(path) = path.strip_prefix(&prefix).map(str::to_string) else {
            notes.push(Note::new(
                file,
                format!("{at}/request/url"),
                format!("path `{path}` is outside the upstream's base path `{prefix}`: skipped"),
            ));
            continue;
        };
        let path = if path.is_empty() { "/".into() } else { path };
        let status = match u16::try_from(e.response.status) {
            Ok(s) if (100..=599).contains(&s) => s,
            _ => {
                notes.push(Note::new(
                    file,
                    format!("{at}/response/status"),
                    format!(
                        "status {} is not an HTTP status (an aborted or blocked request): skipped",
                        e.response.status
                    ),
                ));
                continue;
            }
        };
        let response_body = match &e.response.content {
            None => None,
            Some(c) => match body_of(c) {
                Ok(b) => b,
                Err(why) => {
                    notes.push(Note::new(file, format!("{at}/response/content"), why));
                    continue;
                }
            },
        };
        if let Some(serde_json::Value::String(_)) = response_body {
            notes.push(Note::new(
                file,
                format!("{at}/response/content"),
                format!(
                    "the answer is not JSON ({}): skipped",
                    e.response
                        .content
                        .as_ref()
                        .and_then(|c| c.mime_type.as_deref())
                        .unwrap_or("no content type")
                ),
            ));
            continue;
        }
        let request_body = match e.request.post_data.as_ref().map(post_body) {
            None => None,
            Some(Ok(b)) => b,
            Some(Err(why)) => {
                notes.push(Note::new(
                    file,
                    format!("{at}/request/postData"),
                    format!("the form body cannot be read ({why}): entry skipped"),
                ));
                continue;
            }
        };
        // The body's media type, when the headers lost it (`postData.mimeType` keeps it):
        // the draft's `match.body` is read from it.
        let mut request_headers = pairs(&e.request.headers);
        if let Some(mt) = e
            .request
            .post_data
            .as_ref()
            .and_then(|p| p.mime_type.clone())
        {
            if !mt.is_empty()
                && !request_headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            {
                request_headers.push(("Content-Type".into(), mt));
            }
        }
        exchanges.push(Exchange {
            integration: integration.to_string(),
            profile,
            matched_operation: None,
            at_ms: i as u64,
            call: Call::Http(HttpCall {
                method: e.request.method.to_ascii_uppercase(),
                path,
                query,
                request_headers,
                request_body,
                status,
                response_headers: pairs(&e.response.headers),
                response_body,
            }),
        });
    }
    if exchanges.is_empty() {
        notes.push(Note::new(file, "log/entries", "no entry could be imported"));
    }
    Ok(from_exchanges(
        &exchanges,
        &|at| format!("log/entries/{at}"),
        profile,
        scrub,
        notes,
        file,
    ))
}

fn pairs(h: &[NameValue]) -> Vec<(String, String)> {
    h.iter()
        .filter(|h| !h.name.starts_with(':'))
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect()
}

fn body_of(c: &Content) -> Result<Option<serde_json::Value>, String> {
    let Some(text) = c.text.as_deref() else {
        return if c.size.unwrap_or(0) > 0 {
            Err("the producer did not save the answer's text: skipped".into())
        } else {
            Ok(None)
        };
    };
    if c.encoding.as_deref() == Some("base64") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| format!("`encoding: base64` but the text is not base64 ({e}): skipped"))?;
        Ok(parse_body(&bytes))
    } else {
        Ok(parse_body(text.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            split_url("HTTP://h:1/a/b?q=1#x"),
            Some(("http://h:1".into(), "/a/b?q=1".into()))
        );
        assert_eq!(
            split_url("https://h"),
            Some(("https://h".into(), "/".into()))
        );
        assert_eq!(split_url("ws://h/a"), None);
        assert_eq!(split_url("data:xyz"), None);
    }

    fn entry(path: &str, items: usize) -> serde_json::Value {
        let body = serde_json::json!({ "items": (0..items).collect::<Vec<_>>() }).to_string();
        serde_json::json!({
            "startedDateTime": "2026-12-04T00:00:00Z",
            "time": 1,
            "request": { "method": "GET", "url": format!("http://up.test{path}"), "httpVersion": "HTTP/1.1",
                         "headers": [], "queryString": [], "cookies": [], "headersSize": -1, "bodySize": 0 },
            "response": { "status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "headers": [],
                          "cookies": [], "content": { "size": body.len(), "mimeType": "application/json", "text": body },
                          "redirectURL": "", "headersSize": -1, "bodySize": -1 },
            "cache": {}, "timings": { "send": 0, "wait": 1, "receive": 0 }
        })
    }

    /// A note of the draft builder about one operation names the first entry it was drafted
    /// from, and the draft lists every entry (`file#log/entries/N`).
    #[test]
    fn draft_builder_notes_name_the_entries_of_their_operation() {
        let har = serde_json::json!({ "log": { "version": "1.2", "creator": { "name": "t", "version": "1" },
            "entries": [entry("/health", 1), entry("/items", 60), entry("/items", 70)] } });
        let file = Path::new("rec.har");
        let imported = import(
            file,
            &har.to_string(),
            "api",
            ProfileKind::Rest,
            &Scrub::default(),
            Some("http://up.test"),
        )
        .unwrap();
        let cut: Vec<_> = imported
            .notes
            .iter()
            .filter(|n| n.message.contains("were cut to"))
            .collect();
        assert_eq!(cut.len(), 1, "{:?}", imported.notes);
        assert_eq!(cut[0].path, "log/entries/1");
        assert!(
            cut[0].message.contains("drafted from 2 entries"),
            "{}",
            cut[0].message
        );
        let items = imported
            .drafts
            .iter()
            .find(|d| d.sources.len() == 2)
            .expect("the /items draft");
        assert_eq!(
            items.sources,
            vec!["rec.har#log/entries/1", "rec.har#log/entries/2"]
        );
        assert!(
            imported.notes.iter().all(|n| !n.path.is_empty()),
            "{:?}",
            imported.notes
        );
    }
}
