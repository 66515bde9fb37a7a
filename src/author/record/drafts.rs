//! Draft generation (docs/src/guides/record.md): captured [`Exchange`]s + the integration's existing operations →
//! draft operation files with mocks. Pure: no I/O, no clock, no randomness.
//!
//! This file owns the entry point ([`drafts()`], [`exchange_input`]) and the drafting of one
//! group into one file (contract, mock, `check`). The steps live beside it in `record/`:
//! `group.rs` (exchanges → operations), `templates.rs` (path and query templates of new
//! operations), `answers.rs` (envelopes and tool results), `variants.rs` (variants, rules,
//! state sequences, examples) and `limits.rs` (the docs/src/reference/mock-definition.md#checks-and-limits limits, shrinking).
//!
//! # How exchanges become operations
//! 1. Every exchange is scrubbed ([`scrub_exchange`]) and the list is put in `at_ms` order.
//!    A Salesforce login exchange (token endpoint, SOAP login, userinfo, revoke) is left out
//!    (noted): its answer names the real session, and replay answers the login itself.
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
//!   `Sforce-Limit-Info`, `Sforce-Locator`, `Sforce-NumberOfRecords`, `Retry-After`, `ETag`,
//!   `Last-Modified`, `Link`, `WWW-Authenticate`, rate-limit and deprecation headers, and the
//!   `Content-Type` of a text answer that is not JSON such as a CSV — never a secret one), or
//!   for MCP the tool's structured
//!   output (operations with `result_form` structured) or the CallToolResult (`content`,
//!   `structuredContent`, `isError`; a new tool is drafted as `call_tool_result`).
//!   Arrays longer than `MAX_ARRAY_ITEMS` (50, `ctx.rs`) are cut (noted).
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
//! - **Limits** (docs/src/reference/mock-definition.md#checks-and-limits): at most 100 rules per variant (a longer sequence is cut to the
//!   rules left, later inputs that do not fit are left out), 30
//!   variants (later classes are left out), 100 examples (the first example of every variant is
//!   kept first); above 100 KB: examples beyond one per variant are dropped, then class
//!   variants, then arrays are cut to 10, 3, then 1 element. Each drop is noted.
//! - Every draft is run through [`check_operation`] and the cross-file checks; whatever is
//!   left is reported in [`DraftFile::problems`] and the notes (the draft is still returned and
//!   written: it is a draft, and `check` will say the same).

use super::answers::envelope;
use super::ctx::{problem_text, salesforce_profile, Ctx, Listing, Sample, MAX_ARRAY_ITEMS};
use super::group::http_input;
use super::group::{tool_input, Group, Req, Target};
use super::infer::{
    disambiguate, http_variant_name, infer_schema, is_empty_body, operation_name, shape_key,
    trim_arrays,
};
use super::limits::shrink;
use super::scrub::scrub_exchange;
use super::variants::build_definition;
use super::{Call, DraftFile, DraftSet, Exchange};
use crate::config::Scrub;
use crate::contract::template::CompiledMatch;
use crate::contract::ProfileKind;
use crate::contract::{OperationFile, ResultForm};
use crate::mock::model::RESPONSE_MEMBER;
use crate::operation::check::{check_integration, check_operation};
use crate::operation::LoadedOperation;
use crate::util::scrub::SCRUBBED;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

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
    let mut logins = 0usize;
    for ex in exchanges {
        if ex.integration != integration {
            foreign += 1;
            continue;
        }
        if is_salesforce_login(profile, ex) {
            logins += 1;
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
    if logins > 0 {
        notes.push(format!(
            "{integration}: {logins} login exchange(s) not drafted (the OAuth token endpoint, the SOAP login, userinfo, revoke): their answers name the real session and instance URL; in replay the built-in login answers with a synthetic session that brings the client back to understudy"
        ));
    }
    if !scrubbed.is_empty() {
        let places: Vec<String> = scrubbed.iter().map(|(p, n)| format!("{p} ×{n}")).collect();
        notes.push(format!(
            "{integration}: secrets scrubbed (written as \"{SCRUBBED}\", never their values): {}",
            places.join(", ")
        ));
    }

    // MCP requests other than tool calls are what the resources, prompts, completions and
    // the tools' contracts are drafted from (`mcp.rs`), not operations of their own.
    let (mcp, list): (Vec<Exchange>, Vec<Exchange>) = list
        .into_iter()
        .partition(|e| matches!(e.call, Call::Mcp(_)));
    let mut ctx = Ctx::new(&integration, profile, scrub);
    ctx.listing = Listing::of(&mcp);
    let groups = ctx.group(&list, existing, &mut notes);
    let mut files = Vec::new();
    let mut taken: BTreeSet<String> = existing.iter().map(|l| l.op.operation_id.clone()).collect();
    for g in groups {
        if let Some(f) = ctx.draft_group(g, &mut taken, &mut notes) {
            files.push(f);
        }
    }
    files.extend(ctx.mcp_files(&mcp, existing, &mut taken, &mut notes));

    // Cross-file checks: the untouched existing operations, then the drafts.
    let drafted: BTreeSet<&str> = files.iter().map(|f| f.operation_id.as_str()).collect();
    let mut all: Vec<LoadedOperation> = existing
        .iter()
        .filter(|l| !drafted.contains(l.op.operation_id.as_str()))
        .cloned()
        .collect();
    for f in &files {
        all.push(LoadedOperation {
            file: f.rel_path(),
            contract_hash: f.op.contract_hash(profile),
            op: f.op.clone(),
        });
    }
    let cross = check_integration(&all, profile);
    for p in cross {
        if let Some(f) = files.iter_mut().find(|f| f.rel_path() == p.file) {
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
        Call::Mcp(m) => Err(format!(
            "`{}` is not a call of an operation: it is drafted into the resources, prompts and contracts",
            m.method
        )),
    }
}

impl Ctx<'_> {
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
                    input_schema: json!({}).into(),
                    output_schema: json!({}).into(),
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
                // The contract the server listed (`tools/list`), else one inferred below.
                let op = self.listed_tool(name).unwrap_or_else(|| OperationFile {
                    operation_id: name.clone(),
                    description: None,
                    title: None,
                    match_spec: None,
                    write: None,
                    input_schema: json!({}).into(),
                    output_schema: json!({}).into(),
                    idempotency: None,
                    annotations: None,
                    result_form: Some(ResultForm::CallToolResult),
                    mock: None,
                });
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
                        notifications: None,
                        ask: None,
                    }
                }
                (Call::Tool(t), _) => {
                    let form = op.result_form.unwrap_or(ResultForm::Structured);
                    let Some(stream) = self.stream_extras(t, &id, notes) else {
                        continue;
                    };
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
                    let mut input = tool_input(t);
                    if let (Some(r), Value::Object(m)) = (stream.response, &mut input) {
                        m.insert(RESPONSE_MEMBER.into(), r);
                    }
                    Sample {
                        input,
                        class: format!("{is_error} {}", shape_key(body)),
                        class_name,
                        answer,
                        notifications: stream.notifications,
                        ask: stream.ask,
                    }
                }
                _ => continue,
            };
            samples.push(s);
        }
        same_ask(&mut samples, &mut skipped);
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

        // Contract (a listed tool's is the server's own).
        if !existing && self.listing.tool(&id).is_none() {
            let inputs: Vec<Value> = samples.iter().map(|s| without_response(&s.input)).collect();
            op.input_schema = object_schema(&inputs).into();
        }
        if is_empty_schema(&op.output_schema) {
            op.output_schema = infer_schema(samples.iter().map(|s| &s.answer)).into();
            if existing {
                self.note(notes, &id, "output_schema was empty and is now inferred from the recorded answers: the contract (and its hash) changes — review it");
            }
        }

        // Mock.
        let mut def = build_definition(&id, &samples, self, notes);
        let hash = op.contract_hash(profile);
        def.contract_hash = Some(hash);
        shrink(&mut def, &id, self, notes);
        op.mock = serde_json::to_value(&def).ok().map(Into::into);
        let problems: Vec<String> = check_operation(&op, profile, &draft_path(&id))
            .into_iter()
            .map(|p| problem_text(&p.path, &p.message))
            .collect();
        for p in &problems {
            self.note(notes, &id, format!("check: {p}"));
        }
        Some(DraftFile {
            operation_id: id,
            op,
            extra: None,
            existing,
            exchanges: g.members.len(),
            from: g.members.iter().map(|(e, _)| e.at_ms).collect(),
            problems,
        })
    }
}

/// The samples of one tool all ask the client the same thing (a variant has one
/// `ask_client`): those that ask differently from the first are left out (counted in
/// `skipped`).
fn same_ask(samples: &mut Vec<Sample>, skipped: &mut BTreeMap<String, usize>) {
    let Some(first) = samples.first().map(|s| s.ask.clone()) else {
        return;
    };
    let before = samples.len();
    samples.retain(|s| s.ask == first);
    if samples.len() < before {
        *skipped
            .entry("it asked the client something other than the first recorded call did (a variant has one `ask_client`)".to_string())
            .or_default() += before - samples.len();
    }
}

/// An input without the client's answer (the reserved member `$response`).
pub(super) fn without_response(input: &Value) -> Value {
    let mut v = input.clone();
    if let Value::Object(m) = &mut v {
        m.remove(RESPONSE_MEMBER);
    }
    v
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

/// A Salesforce login exchange ([`crate::profile::salesforce::login::is_login_exchange`]):
/// never drafted, whatever it matched.
fn is_salesforce_login(profile: ProfileKind, ex: &Exchange) -> bool {
    match &ex.call {
        Call::Http(h) => {
            profile == ProfileKind::Salesforce
                && crate::profile::salesforce::login::is_login_exchange(&h.method, &h.path)
        }
        _ => false,
    }
}
