//! Drafting what an MCP server does besides answering tool calls (docs/src/reference/mcp.md): the tools'
//! contracts as the server listed them, resources and prompts as files beside the tools,
//! completions, and what a tool call's response stream carried before its result
//! (notifications, server-to-client requests and the client's answers).
//!
//! # Decisions
//! - **Listings** (`tools/list`, `resources/list`, `resources/templates/list`,
//!   `prompts/list`, every page) are the catalogue: a listed tool's contract is the server's
//!   (as `understudy discover` writes it), not one inferred from the calls; every listed
//!   resource, template and prompt gets a file. What was listed but never called, read or got
//!   is a **contract-only** file (no `mock`, noted): replay lists it, and a call of it is the
//!   harness error `no_mock` — understudy cannot invent an answer it never saw.
//! - **Resources**: a `resources/read` belongs to the listed resource with that URI, else to
//!   the first listed template that matches (its variables are the input), else to an existing
//!   resource file, else to a new resource named after the URI. Its answer is the `contents`
//!   array. A read answered with a JSON-RPC error is noted and left out (replay answers an
//!   unknown URI with -32002 itself).
//! - **Prompts**: a `prompts/get` belongs to the prompt of that name (a prompt never listed
//!   gets its arguments from the calls, none required); its answer is `{description?,
//!   messages}`; its input the arguments.
//! - **Completions**: the values a `completion/complete` answered are kept, per argument, in
//!   the `completions` of the prompt or template it referenced (union, in first-seen order).
//!   Replay filters them by the typed prefix: a value that does not start with what was typed
//!   when it was recorded is noted (replay would not offer it for that prefix).
//! - **Notifications** on a tool call's stream: `notifications/message` become `log`
//!   declarations (`level`, `logger`, `data`), `notifications/progress` become `progress`
//!   ones (`progress`, `total`, `message`; the token is the live request's in replay). Any
//!   other notification is noted and not drafted.
//! - **Asking the client**: a call during which the server sent one request
//!   (`elicitation/create`, `sampling/createMessage`) drafts `ask_client` with the request's
//!   params, a string equal to one of the call's string arguments written as `{"$input": …}`;
//!   the client's answer becomes the input's `$response`, so answers that differ select their
//!   own recorded result by rules on the answer's members (`source: "response"`). A call whose
//!   request got no answer, or a JSON-RPC error, or that asked more than once, is noted and
//!   left out (replay cannot ask twice, and turns a client error into an input error).
//! - A 2026-07-28 `input_required` result (the stateless form of asking) is noted and left
//!   out: its rounds are not recorded.
//! - Names: a resource or prompt file is named by its `name`, which must be a valid operation
//!   id and unique among the integration's tools, resources and prompts; anything else is
//!   noted and skipped.

use super::ctx::{problem_text, Ctx, Sample, MAX_ARRAY_ITEMS};
use super::infer::{is_empty_body, shape_key, trim_arrays};
use super::limits::shrink;
use super::variants::build_definition;
use super::{Call, DraftFile, Exchange, McpCall, ToolCall, ToolOutcome};
use crate::author::discover::operation_of_tool;
use crate::contract::{valid_operation_id, OperationFile};
use crate::mock::model::RESPONSE_MEMBER;
use crate::operation::check::check_operation;
use crate::operation::mcp_files::{
    extra_operation, ExtraKind, PromptArgument, PromptFile, ResourceFile, PROMPT_KEY, RESOURCE_KEY,
};
use crate::operation::LoadedOperation;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::path::Path;

/// What a tool call's stream carried, in mock form.
pub(super) struct StreamExtras {
    pub(super) notifications: Option<Vec<Value>>,
    pub(super) ask: Option<Value>,
    /// The client's answer (the `result` of its JSON-RPC response): the input's `$response`.
    pub(super) response: Option<Value>,
}

/// One resource or prompt file being drafted.
struct Extra {
    kind: ExtraKind,
    /// The file without its mock (`ResourceFile` / `PromptFile` as JSON).
    file: Value,
    existing: bool,
    samples: Vec<Sample>,
    trimmed: usize,
}

impl Extra {
    fn name(&self) -> String {
        self.file["name"].as_str().unwrap_or_default().to_string()
    }
}

impl Ctx<'_> {
    /// A listed tool's contract (as `discover` writes it), when the server listed it.
    pub(super) fn listed_tool(&self, name: &str) -> Option<OperationFile> {
        operation_of_tool(self.listing.tool(name)?).ok()
    }

    /// Notifications and the server-to-client request of one tool call (module doc); `None`
    /// (noted) when the call cannot be drafted.
    pub(super) fn stream_extras(
        &self,
        t: &ToolCall,
        id: &str,
        notes: &mut Vec<String>,
    ) -> Option<StreamExtras> {
        if let ToolOutcome::Result(r) = &t.outcome {
            if r.get("resultType").and_then(Value::as_str) == Some("input_required") {
                self.note(notes, id, "a call answered `resultType: \"input_required\"` (the 2026-07-28 form of asking the client) was skipped: those rounds are not recorded");
                return None;
            }
        }
        let mut declared = Vec::new();
        let mut others = BTreeSet::new();
        for n in &t.notifications {
            let method = n["method"].as_str().unwrap_or_default();
            let p = &n["params"];
            let pick = |keys: &[&str]| -> Map<String, Value> {
                keys.iter()
                    .filter_map(|k| Some((k.to_string(), p.get(*k)?.clone())))
                    .collect()
            };
            match method {
                "notifications/message" => {
                    declared.push(json!({"log": pick(&["level", "logger", "data"])}))
                }
                "notifications/progress" if p.get("progress").is_some_and(Value::is_number) => {
                    declared.push(json!({"progress": pick(&["progress", "total", "message"])}))
                }
                other => {
                    others.insert(other.to_string());
                }
            }
        }
        if !others.is_empty() {
            let list: Vec<String> = others.into_iter().collect();
            self.note(notes, id, format!("notifications on a call's stream other than log messages and progress are not drafted: {}", list.join(", ")));
        }
        let notifications = (!declared.is_empty()).then_some(declared);
        let (ask, response) = match t.asks.as_slice() {
            [] => (None, None),
            [a] => {
                match &a.answer {
                    Some(ToolOutcome::Result(r)) => {
                        let params = with_inputs(&a.params, &t.arguments);
                        (
                            Some(json!({"method": a.method, "params": params})),
                            Some(r.clone()),
                        )
                    }
                    Some(ToolOutcome::Error(e)) => {
                        self.note(notes, id, format!("a call whose `{}` request the client answered with the JSON-RPC error {} was skipped: replay makes a client error an input error", a.method, e.get("code").cloned().unwrap_or(Value::Null)));
                        return None;
                    }
                    None => {
                        self.note(notes, id, format!("a call whose `{}` request got no answer the recording saw was skipped", a.method));
                        return None;
                    }
                }
            }
            more => {
                self.note(notes, id, format!("a call that asked the client {} times was skipped: a mock asks at most once", more.len()));
                return None;
            }
        };
        Some(StreamExtras {
            notifications,
            ask,
            response,
        })
    }

    /// The resource, prompt and contract-only tool files of the recording (module doc).
    pub(super) fn mcp_files(
        &self,
        mcp: &[Exchange],
        existing: &[LoadedOperation],
        taken: &mut BTreeSet<String>,
        notes: &mut Vec<String>,
    ) -> Vec<DraftFile> {
        let mut files = self.contract_only_tools(taken, notes);
        let mut extras = self.listed_extras(existing);
        for ex in mcp {
            let Call::Mcp(m) = &ex.call else { continue };
            match m.method.as_str() {
                "resources/read" => self.read(m, &mut extras, notes),
                "prompts/get" => self.get(m, &mut extras, notes),
                "completion/complete" => self.completion(m, &mut extras, notes),
                _ => {}
            }
        }
        for e in extras {
            let name = e.name();
            if !e.existing {
                if !valid_operation_id(&name) {
                    notes.push(format!("{}: {} `{name}` skipped: its name is not a valid operation id (1-128 characters of a-z, 0-9, `_`, `.`, `-`)", self.integration, e.kind.dir()));
                    continue;
                }
                if !taken.insert(name.clone()) {
                    notes.push(format!("{}: {} `{name}` skipped: a tool, resource or prompt of this integration already has that name", self.integration, e.kind.dir()));
                    continue;
                }
            }
            if let Some(f) = self.draft_extra(e, notes) {
                files.push(f);
            }
        }
        files
    }

    /// Listed tools never called (nor known): their contracts without a mock.
    fn contract_only_tools(
        &self,
        taken: &mut BTreeSet<String>,
        notes: &mut Vec<String>,
    ) -> Vec<DraftFile> {
        let mut files = Vec::new();
        for t in &self.listing.tools {
            let name = t["name"].as_str().unwrap_or("?");
            if taken.contains(name) {
                continue;
            }
            let op = match operation_of_tool(t) {
                Ok(op) => op,
                Err(why) => {
                    notes.push(format!("{}: listed tool skipped: {why}", self.integration));
                    continue;
                }
            };
            taken.insert(op.operation_id.clone());
            self.note(notes, &op.operation_id, "listed by the server but never called: its contract only, no mock (a call of it in replay is the harness error `no_mock`)");
            files.push(self.finished(op, None, false, 0, notes));
        }
        files
    }

    /// Every listed resource, template and prompt, then the existing ones.
    fn listed_extras(&self, existing: &[LoadedOperation]) -> Vec<Extra> {
        let mut out = Vec::new();
        let listed = self.listing.resources.iter().chain(&self.listing.templates);
        for r in listed.filter_map(ResourceFile::from_listed) {
            out.push(new_extra(ExtraKind::Resource, &r, false));
        }
        for p in self
            .listing
            .prompts
            .iter()
            .filter_map(PromptFile::from_listed)
        {
            out.push(new_extra(ExtraKind::Prompt, &p, false));
        }
        for l in existing {
            let s = &l.op.input_schema;
            let (kind, meta) = match (s.get(RESOURCE_KEY), s.get(PROMPT_KEY)) {
                (Some(m), _) => (ExtraKind::Resource, m),
                (None, Some(m)) => (ExtraKind::Prompt, m),
                _ => continue,
            };
            if !out
                .iter()
                .any(|e| e.kind == kind && e.file["name"] == meta["name"])
            {
                let mut e = new_extra(kind, meta, true);
                e.file = meta.clone();
                out.push(e);
            }
        }
        out
    }

    fn read(&self, m: &McpCall, extras: &mut Vec<Extra>, notes: &mut Vec<String>) {
        let uri = m.params["uri"].as_str().unwrap_or_default();
        let contents = match &m.outcome {
            ToolOutcome::Result(r) => r.get("contents").cloned().unwrap_or(json!([])),
            ToolOutcome::Error(e) => {
                notes.push(format!("{}: a resources/read of `{uri}` answered with the JSON-RPC error {} was skipped: mocks answer contents, not protocol errors", self.integration, e.get("code").cloned().unwrap_or(Value::Null)));
                return;
            }
        };
        let found = extras.iter().enumerate().find_map(|(i, e)| {
            let r: ResourceFile = serde_json::from_value(e.file.clone()).ok()?;
            (e.kind == ExtraKind::Resource).then_some(())?;
            r.input_for(uri).map(|input| (i, input))
        });
        let (i, input) = match found {
            Some(f) => f,
            None => {
                let name = unique_name(&slug(uri), extras);
                let r = ResourceFile {
                    name,
                    uri: Some(uri.to_string()),
                    ..resource_default()
                };
                notes.push(format!(
                    "{}: resource `{uri}` was read but never listed: drafted as resources/{}.json",
                    self.integration, r.name
                ));
                extras.push(new_extra(ExtraKind::Resource, &r, false));
                (extras.len() - 1, json!({}))
            }
        };
        let e = &mut extras[i];
        let mut answer = contents;
        e.trimmed += trim_arrays(&mut answer, MAX_ARRAY_ITEMS);
        e.samples.push(plain_sample(input, answer));
    }

    fn get(&self, m: &McpCall, extras: &mut Vec<Extra>, notes: &mut Vec<String>) {
        let name = m.params["name"].as_str().unwrap_or_default();
        let result = match &m.outcome {
            ToolOutcome::Result(r) => {
                let mut kept = Map::new();
                for k in ["description", "messages"] {
                    if let Some(v) = r.get(k) {
                        kept.insert(k.into(), v.clone());
                    }
                }
                Value::Object(kept)
            }
            ToolOutcome::Error(e) => {
                notes.push(format!("{}/{name}: a prompts/get answered with the JSON-RPC error {} was skipped: mocks answer messages, not protocol errors", self.integration, e.get("code").cloned().unwrap_or(Value::Null)));
                return;
            }
        };
        let input = match m.params.get("arguments") {
            Some(a @ Value::Object(_)) => a.clone(),
            _ => json!({}),
        };
        let at = extras
            .iter()
            .position(|e| e.kind == ExtraKind::Prompt && e.file["name"] == name);
        let i = match at {
            Some(i) => i,
            None => {
                let p = PromptFile {
                    name: name.to_string(),
                    title: None,
                    description: None,
                    arguments: Vec::new(),
                    completions: Default::default(),
                    mock: None,
                };
                self.note(notes, name, "prompt got but never listed: its arguments are the ones the calls sent, none required");
                extras.push(new_extra(ExtraKind::Prompt, &p, false));
                extras.len() - 1
            }
        };
        let e = &mut extras[i];
        if !e.existing {
            add_prompt_arguments(&mut e.file, &input);
        }
        let mut answer = result;
        e.trimmed += trim_arrays(&mut answer, MAX_ARRAY_ITEMS);
        e.samples.push(plain_sample(input, answer));
    }

    fn completion(&self, m: &McpCall, extras: &mut [Extra], notes: &mut Vec<String>) {
        let ToolOutcome::Result(r) = &m.outcome else {
            return;
        };
        let reference = &m.params["ref"];
        let arg = m.params["argument"]["name"].as_str().unwrap_or_default();
        let typed = m.params["argument"]["value"].as_str().unwrap_or_default();
        let (kind, key, field) = match reference["type"].as_str() {
            Some("ref/prompt") => (ExtraKind::Prompt, &reference["name"], "name"),
            Some("ref/resource") => (ExtraKind::Resource, &reference["uri"], "uri_template"),
            _ => return,
        };
        let target = extras
            .iter_mut()
            .find(|e| e.kind == kind && (e.file[field] == *key || e.file.get("uri") == Some(key)));
        let Some(e) = target else {
            notes.push(format!("{}: a completion/complete for {key} was skipped: no listed prompt or resource template has that reference", self.integration));
            return;
        };
        let known: Vec<String> = match kind {
            ExtraKind::Prompt => e.file["arguments"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a["name"].as_str().map(str::to_string))
                .collect(),
            ExtraKind::Resource => serde_json::from_value::<ResourceFile>(e.file.clone())
                .map(|r| r.variables())
                .unwrap_or_default(),
        };
        let name = e.name();
        if !known.iter().any(|k| k == arg) {
            notes.push(format!("{}/{name}: completions for `{arg}` skipped: it is not an argument (or template variable) of the file", self.integration));
            return;
        }
        let values: Vec<String> = r["completion"]["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        if values.is_empty() {
            return;
        }
        if let Some(v) = values.iter().find(|v| !v.starts_with(typed)) {
            notes.push(format!("{}/{name}: completion value `{v}` was offered for `{arg}` = `{typed}` but does not start with it: replay filters by prefix and will not offer it there", self.integration));
        }
        let map = e.file.as_object_mut().map(|m| {
            m.entry("completions")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .map(|c| c.entry(arg.to_string()).or_insert_with(|| json!([])))
                .and_then(Value::as_array_mut)
                .map(|a| {
                    for v in values {
                        if !a.iter().any(|x| x == v.as_str()) {
                            a.push(Value::String(v));
                        }
                    }
                })
        });
        debug_assert!(map.is_some());
    }

    /// One resource or prompt file: its mock from the samples (none without), checked as
    /// the operation it loads as.
    fn draft_extra(&self, e: Extra, notes: &mut Vec<String>) -> Option<DraftFile> {
        let name = e.name();
        let rel = Path::new(e.kind.dir()).join(format!("{name}.json"));
        let load = |file: &Value| extra_operation(file, &rel, e.kind);
        let contract = match load(&e.file) {
            Ok(l) => l,
            Err(problems) => {
                for p in problems {
                    self.note(
                        notes,
                        &name,
                        format!("skipped: {}", problem_text(&p.path, &p.message)),
                    );
                }
                return None;
            }
        };
        let mut file = e.file.clone();
        if e.samples.is_empty() {
            if !e.existing {
                let what = match e.kind {
                    ExtraKind::Resource => "listed by the server but never read",
                    ExtraKind::Prompt => "listed by the server but never got",
                };
                self.note(notes, &name, format!("{what}: its description only, no mock (replay lists it; reading or getting it is the harness error `no_mock`)"));
                return Some(self.finished(contract.op, Some((e.kind, file)), false, 0, notes));
            }
            return None;
        }
        if e.trimmed > 0 {
            self.note(
                notes,
                &name,
                format!(
                    "{} array(s) in recorded answers were cut to {} items",
                    e.trimmed, MAX_ARRAY_ITEMS
                ),
            );
        }
        let mut def = build_definition(&name, &e.samples, self, notes);
        def.contract_hash = Some(contract.op.contract_hash(self.profile));
        shrink(&mut def, &name, self, notes);
        file["mock"] = serde_json::to_value(&def).unwrap_or(Value::Null);
        let op = match load(&file) {
            Ok(l) => l.op,
            Err(problems) => {
                for p in problems {
                    self.note(
                        notes,
                        &name,
                        format!("check: {}", problem_text(&p.path, &p.message)),
                    );
                }
                contract.op
            }
        };
        let n = e.samples.len();
        Some(self.finished(op, Some((e.kind, file)), e.existing, n, notes))
    }

    /// A draft file with its `check` problems (noted).
    fn finished(
        &self,
        op: OperationFile,
        extra: Option<(ExtraKind, Value)>,
        existing: bool,
        exchanges: usize,
        notes: &mut Vec<String>,
    ) -> DraftFile {
        let mut d = DraftFile {
            operation_id: op.operation_id.clone(),
            op,
            extra,
            existing,
            exchanges,
            from: Vec::new(),
            problems: Vec::new(),
        };
        d.problems = check_operation(&d.op, self.profile, &d.rel_path())
            .into_iter()
            .map(|p| problem_text(&p.path, &p.message))
            .collect();
        for p in &d.problems {
            self.note(notes, &d.operation_id, format!("check: {p}"));
        }
        d
    }
}

fn resource_default() -> ResourceFile {
    ResourceFile {
        name: String::new(),
        uri: None,
        uri_template: None,
        title: None,
        description: None,
        mime_type: None,
        size: None,
        completions: Default::default(),
        mock: None,
    }
}

fn new_extra<T: serde::Serialize>(kind: ExtraKind, file: &T, existing: bool) -> Extra {
    let mut file = serde_json::to_value(file).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut file {
        m.remove("mock");
    }
    Extra {
        kind,
        file,
        existing,
        samples: Vec::new(),
        trimmed: 0,
    }
}

/// A sample of a read or a get: one outcome class per body shape.
fn plain_sample(input: Value, answer: Value) -> Sample {
    let empty = is_empty_body(Some(&answer));
    Sample {
        input,
        class: shape_key(Some(&answer)),
        class_name: if empty { "ok_empty" } else { "ok" }.to_string(),
        answer,
        notifications: None,
        ask: None,
    }
}

/// A prompt never listed: the arguments its calls sent (strings, none required).
fn add_prompt_arguments(file: &mut Value, input: &Value) {
    let Some(list) = file
        .as_object_mut()
        .map(|m| m.entry("arguments").or_insert_with(|| json!([])))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for k in input.as_object().into_iter().flatten().map(|(k, _)| k) {
        if !list.iter().any(|a| a["name"] == k.as_str()) {
            let a = PromptArgument {
                name: k.clone(),
                title: None,
                description: None,
                required: false,
            };
            list.push(serde_json::to_value(a).unwrap_or(Value::Null));
        }
    }
}

/// `params` with every string equal to exactly one of the call's string arguments written as
/// `{"$input": name}` (the request the server made carried the argument).
fn with_inputs(params: &Value, arguments: &Value) -> Value {
    let args: Vec<(&String, &str)> = arguments
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != RESPONSE_MEMBER && !k.contains('.'))
        .filter_map(|(k, v)| Some((k, v.as_str().filter(|s| !s.is_empty())?)))
        .collect();
    fn walk(v: &Value, args: &[(&String, &str)]) -> Value {
        match v {
            Value::String(s) => {
                let hits: Vec<&&String> = args
                    .iter()
                    .filter(|(_, a)| a == s)
                    .map(|(k, _)| k)
                    .collect();
                match hits.as_slice() {
                    [k] => json!({"$input": k}),
                    _ => v.clone(),
                }
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| walk(x, args)).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, x)| (k.clone(), walk(x, args))).collect())
            }
            other => other.clone(),
        }
    }
    walk(params, &args)
}

/// An operation id made from a URI: lowercase, every run of other characters one `-`.
fn slug(uri: &str) -> String {
    let mut out = String::new();
    for c in uri.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let s: String = out.trim_matches(['-', '.']).chars().take(120).collect();
    if s.is_empty() {
        "resource".into()
    } else {
        s
    }
}

fn unique_name(base: &str, extras: &[Extra]) -> String {
    let mut name = base.to_string();
    let mut n = 2;
    while extras.iter().any(|e| e.file["name"] == name.as_str()) {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

#[cfg(test)]
mod tests;
