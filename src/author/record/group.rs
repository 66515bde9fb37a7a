//! Step 2 of drafting: every captured exchange to the operation it drafts — the existing one
//! the server says it matched, else the most specific existing `match` that holds, else a new
//! operation keyed by method + path template (MCP: the operation named like the tool) — and
//! the input `serve` would build for it.

use super::ctx::Ctx;
use super::{Call, Exchange, HttpCall, ToolCall};
use crate::contract::template::{path_segments, CompiledMatch, RequestView};
use crate::contract::BodyEncoding;
use crate::http::form::BodyKind;
use crate::operation::LoadedOperation;
use crate::profile::Profile;
use hyper::http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// An HTTP request normalized as the matcher sees it.
pub(super) struct Req {
    pub(super) method: String,
    pub(super) segments: Vec<String>,
    pub(super) query: Vec<(String, String)>,
    headers: HeaderMap,
}

impl Req {
    pub(super) fn new(h: &HttpCall, sf: Option<&Profile>) -> Req {
        let mut query = h.query.clone();
        let method = match sf {
            Some(p) => p.effective_method(&h.method, &mut query),
            None => h.method.to_ascii_uppercase(),
        };
        let mut headers = HeaderMap::new();
        for (k, v) in &h.request_headers {
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(v),
            ) {
                headers.append(n, v);
            }
        }
        Req {
            method,
            segments: path_segments(h.path.split('?').next().unwrap_or("")),
            query,
            headers,
        }
    }

    pub(super) fn view(&self) -> RequestView<'_> {
        RequestView {
            method: &self.method,
            segments: &self.segments,
            query: &self.query,
            headers: &self.headers,
        }
    }

    /// How its `Content-Type` says the body is encoded: `None` without one.
    pub(super) fn body_encoding(&self) -> Option<BodyEncoding> {
        let ct = self.headers.get(hyper::http::header::CONTENT_TYPE)?;
        Some(match crate::http::form::body_kind(ct.to_str().ok()) {
            BodyKind::Form => BodyEncoding::Form,
            BodyKind::Multipart(_) => BodyEncoding::Multipart,
            BodyKind::Json => BodyEncoding::Json,
        })
    }

    pub(super) fn first_query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Stage 2 of the pipeline: captures, then the JSON body.
pub(super) fn http_input(captures: Map<String, Value>, body: Option<&Value>) -> Value {
    let mut input = captures;
    match body {
        None => {}
        Some(Value::Object(o)) => {
            for (k, v) in o {
                input.insert(k.clone(), v.clone());
            }
        }
        Some(other) => {
            input.insert("body".into(), other.clone());
        }
    }
    Value::Object(input)
}

pub(super) fn tool_input(t: &ToolCall) -> Value {
    match &t.arguments {
        Value::Object(_) => t.arguments.clone(),
        Value::Null => json!({}),
        other => json!({ "arguments": other }),
    }
}

/// Which operation a group of exchanges drafts.
pub(super) enum Target<'a> {
    Existing(&'a LoadedOperation),
    NewHttp {
        method: String,
        template: Vec<String>,
    },
    NewTool {
        name: String,
    },
}

pub(super) struct Group<'a> {
    pub(super) target: Target<'a>,
    /// (exchange, normalized request for HTTP)
    pub(super) members: Vec<(&'a Exchange, Option<Req>)>,
}

impl Ctx<'_> {
    /// Step 2 of the module doc: every exchange to its operation, groups in first-seen order.
    pub(super) fn group<'e>(
        &self,
        list: &'e [Exchange],
        existing: &'e [LoadedOperation],
        notes: &mut Vec<String>,
    ) -> Vec<Group<'e>> {
        let compiled: Vec<(&LoadedOperation, CompiledMatch)> = existing
            .iter()
            .filter_map(|l| Some((l, CompiledMatch::compile(l.op.match_spec.as_ref()?).ok()?)))
            .collect();
        let mut groups: Vec<Group<'e>> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut mismatched = 0usize;
        for ex in list {
            let (key, target, req) = match (&ex.call, self.profile.is_http()) {
                (Call::Http(h), true) => {
                    let req = Req::new(h, self.sf.as_deref());
                    let view = req.view();
                    let named = ex.matched_operation.as_deref().and_then(|id| {
                        compiled
                            .iter()
                            .find(|(l, m)| l.op.operation_id == id && m.matches(&view).is_ok())
                    });
                    let best = named.or_else(|| {
                        compiled
                            .iter()
                            .filter(|(_, m)| m.matches(&view).is_ok())
                            .max_by_key(|(_, m)| m.specificity())
                    });
                    match best {
                        Some((l, _)) => (
                            format!("existing:{}", l.op.operation_id),
                            Target::Existing(l),
                            Some(req),
                        ),
                        None => {
                            let template = self.path_template(&req.segments);
                            let key = format!("new:{} /{}", req.method, template.join("/"));
                            (
                                key,
                                Target::NewHttp {
                                    method: req.method.clone(),
                                    template,
                                },
                                Some(req),
                            )
                        }
                    }
                }
                (Call::Tool(t), false) => {
                    match existing.iter().find(|l| l.op.operation_id == t.name) {
                        Some(l) => (format!("existing:{}", t.name), Target::Existing(l), None),
                        None => (
                            format!("tool:{}", t.name),
                            Target::NewTool {
                                name: t.name.clone(),
                            },
                            None,
                        ),
                    }
                }
                _ => {
                    mismatched += 1;
                    continue;
                }
            };
            let i = *index.entry(key).or_insert_with(|| {
                groups.push(Group {
                    target,
                    members: Vec::new(),
                });
                groups.len() - 1
            });
            groups[i].members.push((ex, req));
        }
        if mismatched > 0 {
            notes.push(format!(
                "{}: {mismatched} exchange(s) skipped: an HTTP call in an `mcp` integration or a tool call in an HTTP one",
                self.integration
            ));
        }
        groups
    }
}
