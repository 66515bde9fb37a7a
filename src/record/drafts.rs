//! Draft generation (SPEC 7): captured [`Exchange`]s + the integration's existing operations →
//! draft operation files with mocks. Pure: no I/O, no clock, no randomness.
//!
//! # How exchanges become operations
//! 1. Every exchange is scrubbed ([`scrub_exchange`]) and the list is put in `at_ms` order.
//! 2. An HTTP exchange belongs to the existing operation the server says it matched, else to
//!    the most specific existing operation whose `match` holds (as `serve` routes), else to a
//!    new operation keyed by method + path template. An MCP tool call belongs to the operation
//!    named like the tool.
//! 3. A new operation's path template replaces id-like segments ([`super::infer::is_id_segment`]) by
//!    `{id}`, `{id2}`, … (and the Salesforce API version `vNN.N` by `*`). Query parameters present
//!    in every call of the operation (secrets excepted) become constraints: a value that never
//!    varies stays literal; one that varies becomes a template whose constant prefix and
//!    suffix stay literal around one capture (`SELECT … WHERE Phone = '{phone}'`: the name is
//!    the field compared with `=` or `:` just before it, else the parameter name). Every template is verified against
//!    every recorded request; on a failure it falls back to a whole-value capture, then to no
//!    query constraint (noted). Parameters seen only sometimes are not constrained (and so are
//!    not in the input).
//! 4. The input of each call is what `serve` would build: captures, then the JSON body's
//!    members (another body under `body`). MCP: the arguments.
//!
//! # How answers become a mock
//! - An answer is the native envelope `{"status","data"?,"headers"?}` (no `data` without a
//!   body, nor for 204/304; `headers` keeps only `Location`, `Content-Location`,
//!   `Sforce-Limit-Info`, `Retry-After`, `ETag`, `Last-Modified`, `Link`, `WWW-Authenticate`,
//!   rate-limit and deprecation headers, never a secret one), or for MCP the tool's structured
//!   output (operations with `result_form` structured) or the CallToolResult (`content`,
//!   `structuredContent`, `isError`; a new tool is drafted as `call_tool_result`).
//!   Arrays longer than [`MAX_ARRAY_ITEMS`] are cut (noted).
//! - Inputs are told apart by their top-level members that vary between calls (members
//!   holding a scrubbed secret and names with a `.` are left out): `eq` on each, `exists: false`
//!   for one a call did not send.
//! - **Outcomes**: an outcome class is the status class and the coarse body shape
//!   ([`super::infer::shape_key`]; MCP: `isError` and shape). Each class gets a variant named after it
//!   (`ok`, `ok_empty`, `created`, `not_found`, `tool_error`, …) answering, per input, the first
//!   answer of that class that input got. With one class there is only that variant; with
//!   several, the default variant `recorded` reproduces the recording (below) and the class
//!   variants are there for tests that want one outcome throughout.
//! - **Recorded order**: the same input answered differently over time (a lookup that finds
//!   nothing, then finds the record after a create) becomes a state sequence: a counter
//!   `<operation>_step` (`…_step_2`, … for further inputs) starting at 0 in `initial_state`,
//!   one rule per step `input = X and state.counter = k → answer k, set_state counter = k+1`,
//!   and a last rule answering the last answer from then on. Consecutive equal answers at the
//!   end of a sequence are one step; answers are compared by status and data (headers such as
//!   `Sforce-Limit-Info` change on every call and do not make a new step). Replay therefore
//!   gives the answers in the order they were recorded.
//! - An input the recording never saw gets the variant's own result: the first recorded answer
//!   (of that class, for class variants).
//! - **Examples**: one per distinct input and variant; one per step of a sequence, with the
//!   `state` that selects it.
//! - **Schemas**: a new operation's input and output schemas are inferred from the calls
//!   ([`super::infer::infer_schema`]); an existing operation keeps its contract, except that an empty
//!   output schema (`{}`/`true`) is replaced by an inferred one (noted: the contract changes).
//! - **Limits** (SPEC 3.4): at most 100 rules per variant (a longer sequence is cut to the
//!   rules left, later inputs that do not fit are left out), 30
//!   variants (later classes are left out), 100 examples (the first example of every variant is
//!   kept first); above 100 KB: examples beyond one per variant are dropped, then class
//!   variants, then arrays are cut to 10, 3, then 1 element. Each drop is noted.
//! - Every draft is run through [`check_operation`] and the cross-file checks; whatever is
//!   left is reported in [`DraftFile::problems`] and the notes (the draft is still returned and
//!   written: it is a draft, and `check` will say the same).

use super::infer::{
    capture_ident, disambiguate, http_variant_name, infer_schema, is_empty_body, is_id_segment,
    operation_name, shape_key, trim_arrays,
};
use super::scrub::{is_secret_field, is_secret_header, scrub_exchange, SCRUBBED};
use super::{Call, DraftFile, DraftSet, Exchange, HttpCall, ToolCall, ToolOutcome};
use crate::config::{ProfileKind, Scrub};
use crate::contract::hash::canonical_json;
use crate::contract::template::{collapse_whitespace, path_segments, CompiledMatch, RequestView};
use crate::contract::{MatchSpec, OperationFile, ResultForm};
use crate::mock::model::{limits, Condition, Definition, Example, Op, Rule, Source, Variant};
use crate::mock::path::json_equal;
use crate::operation::check::{check_integration, check_operation};
use crate::operation::LoadedOperation;
use crate::profile::Profile;
use hyper::http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

/// Arrays in recorded answers are cut to this many elements.
pub const MAX_ARRAY_ITEMS: usize = 50;

/// Response headers worth keeping in an envelope (lowercase name, spelling written).
const KEPT_HEADERS: &[(&str, &str)] = &[
    ("location", "Location"),
    ("content-location", "Content-Location"),
    ("sforce-limit-info", "Sforce-Limit-Info"),
    ("retry-after", "Retry-After"),
    ("etag", "ETag"),
    ("last-modified", "Last-Modified"),
    ("link", "Link"),
    ("www-authenticate", "WWW-Authenticate"),
    ("deprecation", "Deprecation"),
    ("sunset", "Sunset"),
];

fn kept_header(name: &str) -> Option<String> {
    let n = name.to_ascii_lowercase();
    if let Some((_, spelled)) = KEPT_HEADERS.iter().find(|(l, _)| *l == n) {
        return Some((*spelled).to_string());
    }
    (n.starts_with("x-ratelimit-") || n.starts_with("ratelimit")).then_some(n)
}

/// Build the drafts of one integration from its captured exchanges (see the module doc).
///
/// `exchanges` are the calls of one integration (the first exchange's; any other is skipped
/// and noted), in any order; `existing` its loaded operation files; `scrub` the user's extra
/// secret names. Never fails: whatever cannot be drafted is noted.
pub fn drafts(
    exchanges: &[Exchange],
    existing: &[LoadedOperation],
    profile: ProfileKind,
    scrub: &Scrub,
) -> DraftSet {
    let integration = exchanges
        .first()
        .map(|e| e.integration.clone())
        .unwrap_or_default();
    let mut notes = Vec::new();
    let mut list: Vec<Exchange> = Vec::new();
    let mut scrubbed: BTreeMap<String, usize> = BTreeMap::new();
    let mut foreign = 0usize;
    for ex in exchanges {
        if ex.integration != integration {
            foreign += 1;
            continue;
        }
        let mut ex = ex.clone();
        for p in scrub_exchange(&mut ex, scrub) {
            *scrubbed.entry(p).or_default() += 1;
        }
        list.push(ex);
    }
    list.sort_by_key(|e| e.at_ms);
    if foreign > 0 {
        notes.push(format!(
            "{integration}: {foreign} exchange(s) of other integrations were passed and skipped (drafts are made per integration)"
        ));
    }
    if !scrubbed.is_empty() {
        let places: Vec<String> = scrubbed.iter().map(|(p, n)| format!("{p} ×{n}")).collect();
        notes.push(format!(
            "{integration}: secrets scrubbed (written as \"{SCRUBBED}\", never their values): {}",
            places.join(", ")
        ));
    }

    let ctx = Ctx::new(&integration, profile, scrub);
    let groups = ctx.group(&list, existing, &mut notes);
    let mut files = Vec::new();
    let mut taken: BTreeSet<String> = existing.iter().map(|l| l.op.operation_id.clone()).collect();
    for g in groups {
        if let Some(f) = ctx.draft_group(g, &mut taken, &mut notes) {
            files.push(f);
        }
    }

    // Cross-file checks: the untouched existing operations, then the drafts.
    let drafted: BTreeSet<&str> = files.iter().map(|f| f.operation_id.as_str()).collect();
    let mut all: Vec<LoadedOperation> = existing
        .iter()
        .filter(|l| !drafted.contains(l.op.operation_id.as_str()))
        .cloned()
        .collect();
    for f in &files {
        all.push(LoadedOperation {
            file: draft_path(&f.operation_id),
            contract_hash: f.op.contract_hash(profile.as_str()),
            op: f.op.clone(),
        });
    }
    let cross = check_integration(&all, profile.as_str());
    for p in cross {
        if let Some(f) = files
            .iter_mut()
            .find(|f| draft_path(&f.operation_id) == p.file)
        {
            let msg = problem_text(&p.path, &p.message);
            notes.push(format!("{integration}/{}: check: {msg}", f.operation_id));
            f.problems.push(msg);
        }
    }
    DraftSet {
        integration,
        profile,
        files,
        notes,
    }
}

fn draft_path(id: &str) -> PathBuf {
    PathBuf::from(format!("{id}.json"))
}

fn problem_text(path: &str, message: &str) -> String {
    if path.is_empty() {
        message.to_string()
    } else {
        format!("{path}: {message}")
    }
}

/// The input `serve` builds for this exchange under `op` (captures, then the JSON body; MCP:
/// the arguments). `Err` when the operation's `match` does not hold for the request.
pub fn exchange_input(
    op: &OperationFile,
    profile: ProfileKind,
    ex: &Exchange,
) -> Result<Value, String> {
    match &ex.call {
        Call::Http(h) => {
            let spec = op
                .match_spec
                .as_ref()
                .ok_or_else(|| format!("operation `{}` has no `match`", op.operation_id))?;
            let m = CompiledMatch::compile(spec)?;
            let req = Req::new(h, salesforce_profile(profile).as_deref());
            let caps = m.matches(&req.view()).map_err(|e| e.what)?;
            Ok(http_input(caps, h.request_body.as_ref()))
        }
        Call::Tool(t) => Ok(tool_input(t)),
    }
}

fn salesforce_profile(profile: ProfileKind) -> Option<Arc<Profile>> {
    (profile == ProfileKind::Salesforce)
        .then(|| Profile::builtin("salesforce"))
        .flatten()
}

/// An HTTP request normalized as the matcher sees it.
struct Req {
    method: String,
    segments: Vec<String>,
    query: Vec<(String, String)>,
    headers: HeaderMap,
}

impl Req {
    fn new(h: &HttpCall, sf: Option<&Profile>) -> Req {
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

    fn view(&self) -> RequestView<'_> {
        RequestView {
            method: &self.method,
            segments: &self.segments,
            query: &self.query,
            headers: &self.headers,
        }
    }

    fn first_query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Stage 2 of the pipeline: captures, then the JSON body.
fn http_input(captures: Map<String, Value>, body: Option<&Value>) -> Value {
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

fn tool_input(t: &ToolCall) -> Value {
    match &t.arguments {
        Value::Object(_) => t.arguments.clone(),
        Value::Null => json!({}),
        other => json!({ "arguments": other }),
    }
}

/// Which operation a group of exchanges drafts.
enum Target<'a> {
    Existing(&'a LoadedOperation),
    NewHttp {
        method: String,
        template: Vec<String>,
    },
    NewTool {
        name: String,
    },
}

struct Group<'a> {
    target: Target<'a>,
    /// (exchange, normalized request for HTTP)
    members: Vec<(&'a Exchange, Option<Req>)>,
}

struct Ctx<'a> {
    integration: &'a str,
    profile: ProfileKind,
    scrub: &'a Scrub,
    sf: Option<Arc<Profile>>,
}

/// One recorded call reduced to what a mock needs.
struct Sample {
    input: Value,
    answer: Value,
    /// Outcome class key.
    class: String,
    /// The variant name its class would get.
    class_name: String,
}

impl<'a> Ctx<'a> {
    fn new(integration: &'a str, profile: ProfileKind, scrub: &'a Scrub) -> Ctx<'a> {
        Ctx {
            integration,
            profile,
            scrub,
            sf: salesforce_profile(profile),
        }
    }

    fn note(&self, notes: &mut Vec<String>, op: &str, msg: impl AsRef<str>) {
        notes.push(format!("{}/{op}: {}", self.integration, msg.as_ref()));
    }

    /// Step 2 of the module doc: every exchange to its operation, groups in first-seen order.
    fn group<'e>(
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

    /// A new operation's path template segments (`{id}`, `{id2}`, `*`, literals).
    fn path_template(&self, segments: &[String]) -> Vec<String> {
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

    /// One group → one draft file (or `None`, noted, when nothing of it can be drafted).
    fn draft_group(
        &self,
        g: Group<'_>,
        taken: &mut BTreeSet<String>,
        notes: &mut Vec<String>,
    ) -> Option<DraftFile> {
        let profile = self.profile;
        let (mut op, existing, matcher) = match &g.target {
            Target::Existing(l) => {
                let m =
                    l.op.match_spec
                        .as_ref()
                        .and_then(|s| CompiledMatch::compile(s).ok());
                (l.op.clone(), true, m)
            }
            Target::NewHttp { method, template } => {
                let (spec, m) = self.new_match(method, template, &g, notes);
                let base = operation_name(method, template, self.sf.is_some());
                let id = if taken.contains(&base) {
                    disambiguate(&base, &format!("{method} {}", spec.path))
                } else {
                    base
                };
                let op = OperationFile {
                    operation_id: id,
                    description: Some(format!("Recorded by understudy: {method} {}", spec.path)),
                    title: None,
                    match_spec: Some(spec),
                    write: None,
                    input_schema: json!({}),
                    output_schema: json!({}),
                    idempotency: None,
                    annotations: None,
                    result_form: None,
                    mock: None,
                };
                (op, false, Some(m))
            }
            Target::NewTool { name } => {
                if !crate::contract::valid_operation_id(name) {
                    notes.push(format!(
                        "{}: tool `{name}` skipped: its name is not a valid operation id (1-128 characters of a-z, 0-9, `_`, `.`, `-`); write its operation file by hand or with `understudy discover`",
                        self.integration
                    ));
                    return None;
                }
                let op = OperationFile {
                    operation_id: name.clone(),
                    description: None,
                    title: None,
                    match_spec: None,
                    write: None,
                    input_schema: json!({}),
                    output_schema: json!({}),
                    idempotency: None,
                    annotations: None,
                    result_form: Some(ResultForm::CallToolResult),
                    mock: None,
                };
                (op, false, None)
            }
        };
        let id = op.operation_id.clone();
        taken.insert(id.clone());

        // Samples: input + answer per exchange.
        let mut samples = Vec::new();
        let mut trimmed = 0usize;
        let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
        for (ex, req) in &g.members {
            let s = match (&ex.call, req) {
                (Call::Http(h), Some(req)) => {
                    let caps = match matcher.as_ref().map(|m| m.matches(&req.view())) {
                        Some(Ok(c)) => c,
                        Some(Err(e)) => {
                            *skipped
                                .entry(format!("the operation's match does not hold ({e})"))
                                .or_default() += 1;
                            continue;
                        }
                        None => {
                            *skipped
                                .entry("the operation's match does not compile".to_string())
                                .or_default() += 1;
                            continue;
                        }
                    };
                    let input = http_input(caps, h.request_body.as_ref());
                    let mut answer = envelope(h);
                    trimmed += trim_arrays(&mut answer, MAX_ARRAY_ITEMS);
                    let data = answer.get("data");
                    Sample {
                        input,
                        class: format!("{}xx {}", h.status / 100, shape_key(data)),
                        class_name: http_variant_name(h.status, data),
                        answer,
                    }
                }
                (Call::Tool(t), _) => {
                    let form = op.result_form.unwrap_or(ResultForm::Structured);
                    let Some(mut answer) = self.tool_answer(t, form, &id, notes) else {
                        continue;
                    };
                    trimmed += trim_arrays(&mut answer, MAX_ARRAY_ITEMS);
                    let is_error = answer.get("isError") == Some(&Value::Bool(true));
                    let body = match form {
                        ResultForm::CallToolResult => {
                            answer.get("structuredContent").or(Some(&answer))
                        }
                        ResultForm::Structured => Some(&answer),
                    };
                    let class_name = if is_error {
                        "tool_error".to_string()
                    } else if is_empty_body(body) {
                        "ok_empty".to_string()
                    } else {
                        "ok".to_string()
                    };
                    Sample {
                        input: tool_input(t),
                        class: format!("{is_error} {}", shape_key(body)),
                        class_name,
                        answer,
                    }
                }
                _ => continue,
            };
            samples.push(s);
        }
        for (why, n) in &skipped {
            self.note(notes, &id, format!("{n} recorded call(s) skipped: {why}"));
        }
        if samples.is_empty() {
            self.note(
                notes,
                &id,
                "no draft: none of its recorded calls could be used",
            );
            return None;
        }
        if trimmed > 0 {
            self.note(
                notes,
                &id,
                format!("{trimmed} array(s) in recorded answers were longer than {MAX_ARRAY_ITEMS} items and were cut to {MAX_ARRAY_ITEMS} (counts such as `totalSize` were kept as recorded)"),
            );
        }

        // Contract.
        if !existing {
            op.input_schema = object_schema(samples.iter().map(|s| &s.input));
        }
        if is_empty_schema(&op.output_schema) {
            op.output_schema = infer_schema(samples.iter().map(|s| &s.answer));
            if existing {
                self.note(notes, &id, "output_schema was empty and is now inferred from the recorded answers: the contract (and its hash) changes — review it");
            }
        }

        // Mock.
        let mut def = build_definition(&id, &samples, self, notes);
        let hash = op.contract_hash(profile.as_str());
        def.contract_hash = Some(hash);
        shrink(&mut def, &id, self, notes);
        op.mock = serde_json::to_value(&def).ok();
        let problems: Vec<String> = check_operation(&op, profile.as_str(), &draft_path(&id))
            .into_iter()
            .map(|p| problem_text(&p.path, &p.message))
            .collect();
        for p in &problems {
            self.note(notes, &id, format!("check: {p}"));
        }
        Some(DraftFile {
            operation_id: id,
            op,
            existing,
            exchanges: g.members.len(),
            problems,
        })
    }

    /// The answer of one tool call in the operation's result form, or `None` (noted).
    fn tool_answer(
        &self,
        t: &ToolCall,
        form: ResultForm,
        id: &str,
        notes: &mut Vec<String>,
    ) -> Option<Value> {
        let result = match &t.outcome {
            ToolOutcome::Error(e) => {
                self.note(
                    notes,
                    id,
                    format!(
                        "a call answered with the JSON-RPC error {} was skipped: mocks answer tool results, not protocol errors",
                        e.get("code").cloned().unwrap_or(Value::Null)
                    ),
                );
                return None;
            }
            ToolOutcome::Result(r) => r,
        };
        match form {
            ResultForm::CallToolResult => {
                let mut m = Map::new();
                for k in ["content", "structuredContent", "isError"] {
                    if let Some(v) = result.get(k) {
                        m.insert(k.to_string(), v.clone());
                    }
                }
                if !m.contains_key("content") {
                    m.insert("content".into(), json!([]));
                }
                Some(Value::Object(m))
            }
            ResultForm::Structured => {
                if result.get("isError") == Some(&Value::Bool(true)) {
                    self.note(notes, id, "a call that ended with `isError: true` was skipped: the operation's result form is structured output, which has no place for a tool error (use \"result_form\": \"call_tool_result\" to record those)");
                    return None;
                }
                if let Some(s) = result.get("structuredContent").filter(|s| s.is_object()) {
                    return Some(s.clone());
                }
                let from_text = result
                    .get("content")
                    .and_then(Value::as_array)
                    .filter(|c| c.len() == 1)
                    .and_then(|c| c[0].get("text"))
                    .and_then(Value::as_str)
                    .and_then(|t| serde_json::from_str::<Value>(t).ok())
                    .filter(Value::is_object);
                if from_text.is_none() {
                    self.note(notes, id, "a call without `structuredContent` (nor one JSON text block) was skipped: the operation's result form is structured output");
                }
                from_text
            }
        }
    }

    /// The `match` of a new HTTP operation (step 3 of the module doc), verified against every
    /// recorded request of the group.
    fn new_match(
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
        let spec_with = |query: BTreeMap<String, String>| MatchSpec {
            method: method.to_string(),
            path: path.clone(),
            query,
            headers: BTreeMap::new(),
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
            })
            .expect("a literal root template compiles")
        });
        (spec, m)
    }
}

fn is_empty_schema(s: &Value) -> bool {
    s == &Value::Bool(true) || s.as_object().is_some_and(Map::is_empty)
}

/// The input schema: an object schema even when no call carried anything.
fn object_schema<'v>(inputs: impl IntoIterator<Item = &'v Value>) -> Value {
    let mut s = infer_schema(inputs);
    if let Value::Object(m) = &mut s {
        m.insert("type".into(), json!("object"));
    }
    s
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

/// The native envelope of an HTTP answer (see the module doc).
fn envelope(h: &HttpCall) -> Value {
    let mut m = Map::new();
    m.insert("status".into(), json!(h.status));
    let no_body = h.status == 204 || h.status == 304 || h.status < 200;
    if !no_body {
        if let Some(b) = &h.response_body {
            m.insert("data".into(), b.clone());
        }
    }
    let mut headers = Map::new();
    for (k, v) in &h.response_headers {
        if is_secret_header(k, &[]) || v.contains(SCRUBBED) {
            continue;
        }
        if let Some(name) = kept_header(k) {
            if crate::profile::header_problem(&name, v).is_none() {
                headers
                    .entry(name)
                    .or_insert_with(|| Value::String(v.clone()));
            }
        }
    }
    if !headers.is_empty() {
        m.insert("headers".into(), Value::Object(headers));
    }
    Value::Object(m)
}

/// Equal as answers: status and data (headers ignored).
fn same_answer(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| match v {
        Value::Object(m) if m.contains_key("status") => {
            let mut m = m.clone();
            m.remove("headers");
            Value::Object(m)
        }
        other => other.clone(),
    };
    json_equal(&strip(a), &strip(b))
}

fn holds_scrubbed(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains(SCRUBBED),
        Value::Array(a) => a.iter().any(holds_scrubbed),
        Value::Object(m) => m.values().any(holds_scrubbed),
        _ => false,
    }
}

/// One distinct input (by its addressable, secret-free top-level members).
struct Ident {
    proj: Map<String, Value>,
    /// The first input seen with this identity (what examples use).
    input: Value,
    /// Sample indices, in time order.
    answers: Vec<usize>,
}

struct Class {
    key: String,
    name: String,
}

/// The version-1 definition for one operation's samples (see the module doc).
fn build_definition(
    id: &str,
    samples: &[Sample],
    ctx: &Ctx<'_>,
    notes: &mut Vec<String>,
) -> Definition {
    // Identities.
    let mut idents: Vec<Ident> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    for (i, s) in samples.iter().enumerate() {
        let proj: Map<String, Value> = s
            .input
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, v)| !k.is_empty() && !k.contains('.') && !holds_scrubbed(v))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let key = canonical_json(&Value::Object(proj.clone()));
        let j = *by_key.entry(key).or_insert_with(|| {
            idents.push(Ident {
                proj,
                input: s.input.clone(),
                answers: Vec::new(),
            });
            idents.len() - 1
        });
        idents[j].answers.push(i);
    }
    // Varying members → conditions.
    let all_keys: BTreeSet<&String> = idents.iter().flat_map(|d| d.proj.keys()).collect();
    let varying: Vec<&String> = all_keys
        .into_iter()
        .filter(|k| {
            let first = idents[0].proj.get(*k);
            idents.iter().any(|d| match (d.proj.get(*k), first) {
                (Some(a), Some(b)) => !json_equal(a, b),
                (None, None) => false,
                _ => true,
            })
        })
        .collect();
    let conds = |d: &Ident| -> Vec<Condition> {
        varying
            .iter()
            .map(|k| match d.proj.get(*k) {
                Some(v) => Condition {
                    source: Source::Input,
                    path: (*k).clone(),
                    op: Op::Eq,
                    value: Some(v.clone()),
                },
                None => Condition {
                    source: Source::Input,
                    path: (*k).clone(),
                    op: Op::Exists,
                    value: Some(Value::Bool(false)),
                },
            })
            .collect()
    };
    // Classes, in first-seen order, with unique names.
    let mut classes: Vec<Class> = Vec::new();
    for s in samples {
        if !classes.iter().any(|c| c.key == s.class) {
            let mut name = s.class_name.clone();
            let mut n = 2;
            while name == "recorded" || classes.iter().any(|c| c.name == name) {
                name = format!("{}_{n}", s.class_name);
                n += 1;
            }
            classes.push(Class {
                key: s.class.clone(),
                name,
            });
        }
    }
    let main_name = if classes.len() == 1 {
        classes[0].name.clone()
    } else {
        "recorded".to_string()
    };

    // The recorded variant.
    let state_base = id.replace('.', "_");
    let sequences = idents
        .iter()
        .filter(|d| steps(d, samples).len() > 1)
        .count();
    let mut initial_state = Map::new();
    let mut rules: Vec<Rule> = Vec::new();
    let mut examples: Vec<Example> = Vec::new();
    let mut main_result = samples[0].answer.clone();
    let mut seq_n = 0;
    let mut left_out = 0usize;
    for d in &idents {
        let mut st = steps(d, samples);
        let when = conds(d);
        let needed = if st.len() == 1 {
            usize::from(!when.is_empty())
        } else {
            st.len() - usize::from(when.is_empty())
        };
        let room = limits::MAX_RULES - rules.len();
        if needed > room {
            // A long sequence is cut to the rules left; a single answer that does not fit is
            // left out.
            let keep = room + usize::from(when.is_empty());
            if st.len() > 1 && keep >= 2 {
                ctx.note(
                    notes,
                    id,
                    format!(
                        "a sequence of {} answers to one input was cut to its first {keep}: at most {} rules per variant",
                        st.len(),
                        limits::MAX_RULES
                    ),
                );
                st.truncate(keep);
            } else {
                left_out += 1;
                continue;
            }
        }
        if st.len() == 1 {
            let answer = &samples[st[0]].answer;
            if !when.is_empty() && answer != &main_result {
                rules.push(Rule {
                    when,
                    result: Some(answer.clone()),
                    set_state: None,
                    delay_ms: None,
                    notifications: None,
                });
            }
            examples.push(Example {
                variant: main_name.clone(),
                input: d.input.clone(),
                expected: answer.clone(),
                state: None,
            });
            continue;
        }
        seq_n += 1;
        let counter = if sequences == 1 {
            format!("{state_base}_step")
        } else {
            format!("{state_base}_step_{seq_n}")
        };
        initial_state.insert(counter.clone(), json!(0));
        for (k, &si) in st.iter().enumerate() {
            let last = k + 1 == st.len();
            let answer = samples[si].answer.clone();
            if !last {
                let mut w = when.clone();
                w.push(Condition {
                    source: Source::State,
                    path: counter.clone(),
                    op: Op::Eq,
                    value: Some(json!(k)),
                });
                let mut set = Map::new();
                set.insert(counter.clone(), json!(k + 1));
                rules.push(Rule {
                    when: w,
                    result: Some(answer.clone()),
                    set_state: Some(set),
                    delay_ms: None,
                    notifications: None,
                });
            } else if when.is_empty() {
                main_result = answer.clone();
            } else {
                rules.push(Rule {
                    when: when.clone(),
                    result: Some(answer.clone()),
                    set_state: None,
                    delay_ms: None,
                    notifications: None,
                });
            }
            examples.push(Example {
                variant: main_name.clone(),
                input: d.input.clone(),
                expected: answer,
                state: Some(Map::from_iter([(counter.clone(), json!(k))])),
            });
        }
    }
    if left_out > 0 {
        ctx.note(
            notes,
            id,
            format!("{left_out} recorded input(s) left out of variant `{main_name}`: at most {} rules per variant", limits::MAX_RULES),
        );
    }
    // Example states are whole states: complete them with the other counters' initial values.
    for e in &mut examples {
        if let Some(s) = &mut e.state {
            let mut full = initial_state.clone();
            full.extend(std::mem::take(s));
            *s = full;
        }
    }
    let mut variants = BTreeMap::new();
    variants.insert(
        main_name.clone(),
        Variant {
            result: main_result,
            set_state: None,
            delay_ms: None,
            rules,
            notifications: None,
        },
    );

    // One variant per outcome class (when there are several).
    if classes.len() > 1 {
        let room = limits::MAX_VARIANTS - 1;
        if classes.len() > room {
            let dropped: Vec<&str> = classes[room..].iter().map(|c| c.name.as_str()).collect();
            ctx.note(
                notes,
                id,
                format!(
                    "variants {} left out: at most {} variants",
                    dropped.join(", "),
                    limits::MAX_VARIANTS
                ),
            );
        }
        for c in classes.iter().take(room) {
            let first = samples
                .iter()
                .find(|s| s.class == c.key)
                .map(|s| s.answer.clone());
            let Some(fallback) = first else { continue };
            let mut rules = Vec::new();
            let mut left_out = 0usize;
            for d in &idents {
                let Some(&si) = d.answers.iter().find(|&&i| samples[i].class == c.key) else {
                    continue;
                };
                let answer = &samples[si].answer;
                let when = conds(d);
                if !when.is_empty() && answer != &fallback {
                    if rules.len() >= limits::MAX_RULES {
                        left_out += 1;
                        continue;
                    }
                    rules.push(Rule {
                        when,
                        result: Some(answer.clone()),
                        set_state: None,
                        delay_ms: None,
                        notifications: None,
                    });
                }
                examples.push(Example {
                    variant: c.name.clone(),
                    input: d.input.clone(),
                    expected: answer.clone(),
                    state: None,
                });
            }
            if left_out > 0 {
                ctx.note(
                    notes,
                    id,
                    format!("{left_out} recorded input(s) left out of variant `{}`: at most {} rules per variant", c.name, limits::MAX_RULES),
                );
            }
            variants.insert(
                c.name.clone(),
                Variant {
                    result: fallback,
                    set_state: None,
                    delay_ms: None,
                    rules,
                    notifications: None,
                },
            );
        }
    }

    // At most 100 examples: the first of every variant first.
    if examples.len() > limits::MAX_EXAMPLES {
        let total = examples.len();
        let mut keep = vec![false; total];
        let mut seen = BTreeSet::new();
        for (i, e) in examples.iter().enumerate() {
            if seen.insert(e.variant.clone()) {
                keep[i] = true;
            }
        }
        let mut kept = keep.iter().filter(|k| **k).count();
        for k in keep.iter_mut() {
            if kept >= limits::MAX_EXAMPLES {
                break;
            }
            if !*k {
                *k = true;
                kept += 1;
            }
        }
        let mut it = keep.into_iter();
        examples.retain(|_| it.next().unwrap_or(false));
        ctx.note(
            notes,
            id,
            format!(
                "{} of {total} examples kept: at most {}",
                examples.len(),
                limits::MAX_EXAMPLES
            ),
        );
    }
    Definition {
        contract_hash: None,
        schema_version: 1,
        default_variant: main_name,
        initial_state: (!initial_state.is_empty()).then_some(initial_state),
        variants,
        examples,
    }
}

/// The steps of an identity's answers: every answer in order, consecutive equal answers at
/// the end folded into one.
fn steps(d: &Ident, samples: &[Sample]) -> Vec<usize> {
    let mut st = d.answers.clone();
    while st.len() >= 2
        && same_answer(
            &samples[st[st.len() - 1]].answer,
            &samples[st[st.len() - 2]].answer,
        )
    {
        st.pop();
    }
    st
}

fn mock_size(def: &Definition) -> usize {
    serde_json::to_string(def).map(|s| s.len()).unwrap_or(0)
}

/// Bring a definition under the 100 KB limit (see the module doc), noting every drop.
fn shrink(def: &mut Definition, id: &str, ctx: &Ctx<'_>, notes: &mut Vec<String>) {
    let max = limits::MAX_BYTES;
    if mock_size(def) <= max {
        return;
    }
    let before = def.examples.len();
    let mut seen = BTreeSet::new();
    def.examples.retain(|e| seen.insert(e.variant.clone()));
    if def.examples.len() < before {
        ctx.note(
            notes,
            id,
            format!(
                "over 100 KB: {} examples dropped (one per variant kept)",
                before - def.examples.len()
            ),
        );
    }
    let mut dropped = Vec::new();
    while mock_size(def) > max {
        let Some(name) = def
            .variants
            .keys()
            .rev()
            .find(|n| **n != def.default_variant)
            .cloned()
        else {
            break;
        };
        def.variants.remove(&name);
        def.examples.retain(|e| e.variant != name);
        dropped.push(name);
    }
    if !dropped.is_empty() {
        ctx.note(
            notes,
            id,
            format!("over 100 KB: variants {} dropped", dropped.join(", ")),
        );
    }
    for cap in [10, 3, 1] {
        if mock_size(def) <= max {
            return;
        }
        for v in def.variants.values_mut() {
            trim_arrays(&mut v.result, cap);
            for r in &mut v.rules {
                if let Some(res) = &mut r.result {
                    trim_arrays(res, cap);
                }
            }
        }
        for e in &mut def.examples {
            trim_arrays(&mut e.expected, cap);
        }
        ctx.note(
            notes,
            id,
            format!("over 100 KB: arrays in answers cut to {cap} item(s)"),
        );
    }
    let size = mock_size(def);
    if size > max {
        ctx.note(
            notes,
            id,
            format!("still {size} bytes after shrinking (limit {max}): `check` will refuse it; record fewer or smaller calls for this operation, or edit the draft"),
        );
    }
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

    #[test]
    fn envelope_keeps_meaningful_headers_only() {
        let h = HttpCall {
            method: "POST".into(),
            path: "/x".into(),
            query: vec![],
            request_headers: vec![],
            request_body: None,
            status: 201,
            response_headers: vec![
                ("location".into(), "/x/1".into()),
                ("Sforce-Limit-Info".into(), "api-usage=1/15000".into()),
                ("Set-Cookie".into(), "[scrubbed]".into()),
                ("Date".into(), "Mon".into()),
                ("Content-Type".into(), "application/json".into()),
            ],
            response_body: Some(json!({"id": "1"})),
        };
        assert_eq!(
            envelope(&h),
            json!({"status": 201, "data": {"id": "1"}, "headers": {"Location": "/x/1", "Sforce-Limit-Info": "api-usage=1/15000"}})
        );
        let h = HttpCall {
            status: 204,
            response_headers: vec![],
            response_body: Some(json!("")),
            ..h
        };
        assert_eq!(envelope(&h), json!({"status": 204}));
    }
}
