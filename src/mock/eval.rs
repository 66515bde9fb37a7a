//! Evaluation of a version-1 definition (docs/src/reference/mock-definition.md#selection, docs/src/reference/mock-definition.md#state). See [`Engine::evaluate`].
//!
//! [`Engine::new`] compiles a [`Definition`] once: every dot path, reference and literal is
//! parsed and checked (see [`crate::mock::expr`] and [`crate::mock::path`]), so a call only
//! walks the compiled tree. The engine is pure — no clock, no I/O — and never applies state:
//! it returns an [`Outcome`] whose `state_patch` the caller commits.
//!
//! # Rules (docs/src/reference/mock-definition.md#selection)
//! - Variant: the one named by the attempt, else `default_variant`; an unknown name is harness
//!   `unknown_variant`.
//! - Rules are tried in order; the first whose conditions all hold wins (an empty `when` always
//!   holds). `result`, `set_state` and `delay_ms` each fall back to the variant's own when the
//!   rule omits them (an explicit `"set_state": {}` in a rule means "change nothing").
//!   `fault` falls back the same way; the engine only selects it (it is data, carried in
//!   [`Outcome::fault`]) and never acts on it: [`crate::operation::fault`] plans what it does.
//! - Conditions read the input or the pre-call state and never fail the call: `eq` is deep
//!   equality with numbers by value, `ne` its negation (a missing path makes `ne` true), `in`
//!   holds when the value equals an element of `value` (a missing path makes it false),
//!   `exists` holds when presence equals `value` (default `true`; a present `null` is present).
//!
//! # Decisions on malformed conditions (all `invalid_fixture_literal` at compile time)
//! A malformed `path`; `in` whose `value` is absent or not an array;
//! `exists` whose `value` is not a boolean; a condition `value` that contains a reference or
//! expression object (condition values are literals — they are never rendered).
//!
//! `eq`/`ne` with `value` absent compare with `null`: the file model reads `"value": null` as
//! absent, so the two cannot be told apart, and `null` is what `"value": null` means.
//!
//! # Results without references
//! A `result` whose compiled template is a constant (no `$input`/`$state` anywhere; literal
//! `$number`/`$dateAdd` are settled at compile time) becomes a [`StaticResult`]: one shared
//! `Arc<Value>` for every call that selects it. [`Engine::decide`] hands it out without
//! copying, and the caller may keep what it derives from it once (checks, wire bytes) in the
//! result's [`StaticResult::memo`]; [`Engine::evaluate`] returns an owned copy as before.
//!
//! # Error paths
//! Errors carry the JSON path inside the definition, segments joined by `/` and escaped as in
//! JSON Pointer, without a leading `/`: `variants/found/rules/0/result/data/amount/$number`.

use crate::error::{CallError, HarnessCode, HarnessError};
use crate::mock::expr::{contains_expression, show, Template};
use crate::mock::model::{
    ClientRequest, ClientRequests, Condition, Definition, Fault, Op, Source, Variant,
};
use crate::mock::path::{pointer_push, DotPath};
use serde_json::{Map, Value};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

pub use crate::mock::path::json_equal;

/// What one call decided. The caller commits `state_patch` (key by key at the top level),
/// sleeps `delay_ms`, and answers `result` — unless `fault` says how the answer fails
/// (see [`crate::operation::fault`]: whether to commit, and what goes on the wire instead).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub result: Value,
    pub state_patch: Map<String, Value>,
    pub delay_ms: u64,
    /// The matched rule's fault, else the variant's.
    pub fault: Option<Fault>,
    pub variant: String,
    /// Index of the rule that matched inside the variant, or `None`.
    pub rule: Option<usize>,
}

/// What [`Engine::decide`] selected for one call: like [`Outcome`], but the result is either
/// rendered for this call or a [`StaticResult`] shared by every call, and the variant name is
/// borrowed from the engine.
#[derive(Debug)]
pub struct Decided<'e> {
    pub result: Rendered<'e>,
    pub state_patch: Map<String, Value>,
    pub delay_ms: u64,
    /// The matched rule's fault, else the variant's (borrowed from the definition).
    pub fault: Option<&'e Fault>,
    pub variant: &'e str,
    /// Index of the rule that matched inside the variant, or `None`.
    pub rule: Option<usize>,
}

/// The result of one call.
#[derive(Debug)]
pub enum Rendered<'e> {
    /// A result without references, compiled once and shared.
    Static(&'e StaticResult),
    /// A result rendered against this call's input and state.
    Dynamic(Value),
}

impl Rendered<'_> {
    /// The result value.
    pub fn value(&self) -> &Value {
        match self {
            Rendered::Static(s) => s.value(),
            Rendered::Dynamic(v) => v,
        }
    }

    /// The result as an owned value (a copy of a static one).
    pub fn into_value(self) -> Value {
        match self {
            Rendered::Static(s) => Value::clone(s.value()),
            Rendered::Dynamic(v) => v,
        }
    }
}

/// A `result` without references, settled when the definition is compiled. Every call that
/// selects it gets this same value.
pub struct StaticResult {
    value: Arc<Value>,
    memo: OnceLock<Box<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for StaticResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticResult")
            .field("value", &self.value)
            .field("memoized", &self.memo.get().is_some())
            .finish()
    }
}

impl StaticResult {
    fn new(value: Value) -> StaticResult {
        StaticResult {
            value: Arc::new(value),
            memo: OnceLock::new(),
        }
    }

    pub fn value(&self) -> &Arc<Value> {
        &self.value
    }

    /// What the caller derives from this result once (the server: the output check and the
    /// rendered response), computed by `init` on first use and kept as long as the engine.
    /// The evaluator never reads it. `None` when a value of another type was kept first.
    pub fn memo<T: Any + Send + Sync>(&self, init: impl FnOnce(&Value) -> T) -> Option<&T> {
        self.memo
            .get_or_init(|| Box::new(init(&self.value)))
            .downcast_ref::<T>()
    }
}

/// A compiled `result`: static (shared) or a template rendered per call.
#[derive(Debug)]
enum CompiledResult {
    Static(StaticResult),
    Dynamic(Template),
}

impl CompiledResult {
    fn compile(v: &Value, at: &str, problems: &mut Vec<HarnessError>) -> CompiledResult {
        match Template::compile(v, at, problems) {
            Template::Const(v) => CompiledResult::Static(StaticResult::new(v)),
            t => CompiledResult::Dynamic(t),
        }
    }

    fn render<'e>(
        &'e self,
        input: &Value,
        state: &Map<String, Value>,
    ) -> Result<Rendered<'e>, CallError> {
        match self {
            CompiledResult::Static(s) => Ok(Rendered::Static(s)),
            CompiledResult::Dynamic(t) => t.render(input, state).map(Rendered::Dynamic),
        }
    }
}

/// A definition compiled once per pinned revision: references, paths and literals parsed,
/// ready to evaluate many calls. `Send + Sync`.
#[derive(Debug)]
pub struct Engine {
    def: Definition,
    variants: BTreeMap<String, CompiledVariant>,
}

#[derive(Debug)]
struct CompiledVariant {
    result: CompiledResult,
    set_state: Option<StatePatch>,
    delay_ms: u64,
    fault: Option<Fault>,
    rules: Box<[CompiledRule]>,
    /// `ask_client` (docs/src/reference/mcp.md), compiled.
    ask: Option<CompiledAsk>,
}

/// A compiled `ask_client`: the single form or the list form, requests in asking order.
#[derive(Debug)]
struct CompiledAsk {
    single: bool,
    /// (key, round, method, params)
    requests: Box<[(String, u64, String, Template)]>,
}

/// The server-to-client request methods a variant may declare in `ask_client`.
pub const ASK_METHODS: [&str; 3] = ["elicitation/create", "sampling/createMessage", "roots/list"];

#[derive(Debug)]
struct CompiledRule {
    when: Box<[CompiledCondition]>,
    result: Option<CompiledResult>,
    set_state: Option<StatePatch>,
    delay_ms: Option<u64>,
    fault: Option<Fault>,
}

/// The compiled `set_state` object: top-level keys with value templates.
#[derive(Debug)]
struct StatePatch(Box<[(String, Template)]>);

#[derive(Debug)]
struct CompiledCondition {
    source: Source,
    path: DotPath,
    test: Test,
}

#[derive(Debug)]
enum Test {
    Eq(Value),
    Ne(Value),
    In(Box<[Value]>),
    Exists(bool),
}

/// Every literal and reference problem of a definition (not only the first), each an
/// `invalid_fixture_literal` harness error with its JSON path. Empty when the definition
/// compiles. For `check`.
pub fn compile_problems(def: &Definition) -> Vec<HarnessError> {
    let mut problems = Vec::new();
    compile_variants(def, &mut problems);
    problems
}

fn compile_variants(
    def: &Definition,
    problems: &mut Vec<HarnessError>,
) -> BTreeMap<String, CompiledVariant> {
    def.variants
        .iter()
        .map(|(name, v)| {
            let at = pointer_push("variants", name);
            (name.clone(), compile_variant(v, &at, problems))
        })
        .collect()
}

fn compile_variant(v: &Variant, at: &str, problems: &mut Vec<HarnessError>) -> CompiledVariant {
    let result = CompiledResult::compile(&v.result, &pointer_push(at, "result"), problems);
    let set_state = v
        .set_state
        .as_ref()
        .map(|m| compile_patch(m, &pointer_push(at, "set_state"), problems));
    let rules_at = pointer_push(at, "rules");
    let rules =
        v.rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let at = pointer_push(&rules_at, &i.to_string());
                let when_at = pointer_push(&at, "when");
                CompiledRule {
                    when: r
                        .when
                        .iter()
                        .enumerate()
                        .filter_map(|(j, c)| {
                            compile_condition(c, &pointer_push(&when_at, &j.to_string()), problems)
                        })
                        .collect(),
                    result: r.result.as_ref().map(|t| {
                        CompiledResult::compile(t, &pointer_push(&at, "result"), problems)
                    }),
                    set_state: r
                        .set_state
                        .as_ref()
                        .map(|m| compile_patch(m, &pointer_push(&at, "set_state"), problems)),
                    delay_ms: r.delay_ms,
                    fault: r.fault.clone(),
                }
            })
            .collect();
    let ask = v
        .ask_client
        .as_ref()
        .and_then(|a| compile_ask(a, &pointer_push(at, "ask_client"), problems));
    CompiledVariant {
        result,
        set_state,
        delay_ms: v.delay_ms.unwrap_or(0),
        fault: v.fault.clone(),
        rules,
        ask,
    }
}

/// `ask_client`: one request `{"method": one of [`ASK_METHODS`], "params"?: {...}, "key"?}`
/// or a non-empty list of them, each with a unique `key` and an optional `round` (an integer
/// from 1, default 1). Params compile as a template (they may read `$input` and `$state`, not
/// `$response`).
fn compile_ask(a: &Value, at: &str, problems: &mut Vec<HarnessError>) -> Option<CompiledAsk> {
    let (single, items): (bool, Vec<(String, &Value)>) = match a {
        Value::Array(list) if !list.is_empty() => (
            false,
            list.iter()
                .enumerate()
                .map(|(i, v)| (pointer_push(at, &i.to_string()), v))
                .collect(),
        ),
        Value::Object(_) => (true, vec![(at.to_string(), a)]),
        _ => {
            problems.push(
                HarnessError::new(
                    HarnessCode::InvalidFixtureLiteral,
                    "`ask_client` must be an object {\"method\", \"params\"} or a non-empty list of them",
                )
                .at(at),
            );
            return None;
        }
    };
    let mut requests: Vec<(String, u64, String, Template)> = Vec::with_capacity(items.len());
    for (item_at, item) in items {
        let (key, round, method, t) = compile_ask_request(item, &item_at, single, problems)?;
        if requests.iter().any(|(k, ..)| *k == key) {
            problems.push(
                HarnessError::new(
                    HarnessCode::InvalidFixtureLiteral,
                    format!("`ask_client` has two requests with the key `{key}`"),
                )
                .at(&item_at),
            );
            return None;
        }
        requests.push((key, round, method, t));
    }
    requests.sort_by_key(|(_, round, ..)| *round); // stable: declaration order within a round
    Some(CompiledAsk {
        single,
        requests: requests.into_boxed_slice(),
    })
}

/// One request of `ask_client` (see [`compile_ask`]): (key, round, method, params).
fn compile_ask_request(
    a: &Value,
    at: &str,
    single: bool,
    problems: &mut Vec<HarnessError>,
) -> Option<(String, u64, String, Template)> {
    let bad = |m: String| HarnessError::new(HarnessCode::InvalidFixtureLiteral, m).at(at);
    let Some(obj) = a.as_object() else {
        problems.push(bad(
            "an `ask_client` request must be an object {\"key\", \"method\", \"params\"}".into(),
        ));
        return None;
    };
    const MEMBERS: [&str; 4] = ["method", "params", "key", "round"];
    if let Some(k) = obj.keys().find(|k| !MEMBERS.contains(&k.as_str())) {
        problems.push(bad(format!(
            "`ask_client` has an unknown member `{k}` (expected {})",
            MEMBERS.join(", ")
        )));
        return None;
    }
    let method = obj.get("method").and_then(Value::as_str).unwrap_or("");
    if !ASK_METHODS.contains(&method) {
        problems.push(bad(format!(
            "`ask_client.method` must be one of {}",
            ASK_METHODS.join(", ")
        )));
        return None;
    }
    let key = match obj.get("key") {
        None if single => crate::mock::model::DEFAULT_ASK_KEY.to_string(),
        Some(Value::String(k)) if !k.is_empty() => k.clone(),
        _ => {
            problems.push(bad(if single {
                "`ask_client.key` must be a non-empty string".into()
            } else {
                "every request of an `ask_client` list needs a `key` (a non-empty string)".into()
            }));
            return None;
        }
    };
    let round = match obj.get("round") {
        None => 1,
        Some(r) => match r.as_u64().filter(|r| *r >= 1) {
            Some(r) => r,
            None => {
                problems.push(bad("`ask_client.round` must be an integer from 1".into()));
                return None;
            }
        },
    };
    let params = obj
        .get("params")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    if !params.is_object() {
        problems.push(bad("`ask_client.params` must be an object".into()));
        return None;
    }
    if contains_response(&params) {
        problems.push(bad(
            "`ask_client.params` cannot read `$response` (the client has not answered yet)".into(),
        ));
        return None;
    }
    let t = Template::compile(&params, &pointer_push(at, "params"), problems);
    Some((key, round, method.to_string(), t))
}

fn contains_response(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key("$response") || m.values().any(contains_response),
        Value::Array(a) => a.iter().any(contains_response),
        _ => false,
    }
}

fn compile_patch(m: &Map<String, Value>, at: &str, problems: &mut Vec<HarnessError>) -> StatePatch {
    StatePatch(
        m.iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    Template::compile(v, &pointer_push(at, k), problems),
                )
            })
            .collect(),
    )
}

fn compile_condition(
    c: &Condition,
    at: &str,
    problems: &mut Vec<HarnessError>,
) -> Option<CompiledCondition> {
    let problem = |sub: &str, msg: String| {
        let at = if sub.is_empty() {
            at.to_string()
        } else {
            pointer_push(at, sub)
        };
        HarnessError::new(HarnessCode::InvalidFixtureLiteral, msg).at(at)
    };
    let before = problems.len();
    let path = DotPath::parse(&c.path)
        .map_err(|why| problems.push(problem("path", format!("condition path: {why}"))))
        .ok();
    let op = match c.op {
        Op::Eq => "eq",
        Op::Ne => "ne",
        Op::In => "in",
        Op::Exists => "exists",
    };
    if let Some(v) = &c.value {
        if contains_expression(v) {
            problems.push(problem(
                "value",
                format!(
                    "condition values are literals and are never rendered; `{op}` got {}",
                    show(v)
                ),
            ));
        }
    }
    let test = match (c.op, &c.value) {
        // The file model reads `"value": null` as absent, so absent means null here.
        (Op::Eq, v) => Some(Test::Eq(v.clone().unwrap_or(Value::Null))),
        (Op::Ne, v) => Some(Test::Ne(v.clone().unwrap_or(Value::Null))),
        (Op::In, None) => {
            problems.push(problem("", "condition `in` needs an array `value`".into()));
            None
        }
        (Op::In, Some(Value::Array(a))) => Some(Test::In(a.clone().into_boxed_slice())),
        (Op::In, Some(v)) => {
            problems.push(problem(
                "value",
                format!("condition `in` needs an array `value`, got {}", show(v)),
            ));
            None
        }
        (Op::Exists, None) => Some(Test::Exists(true)),
        (Op::Exists, Some(Value::Bool(b))) => Some(Test::Exists(*b)),
        (Op::Exists, Some(v)) => {
            problems.push(problem(
                "value",
                format!(
                    "condition `exists` takes a boolean `value`, got {}",
                    show(v)
                ),
            ));
            None
        }
    };
    if problems.len() > before {
        return None;
    }
    Some(CompiledCondition {
        source: c.source,
        path: path?,
        test: test?,
    })
}

impl CompiledCondition {
    #[inline]
    fn holds(&self, input: &Value, state: &Map<String, Value>) -> bool {
        let found = match self.source {
            Source::Input => self.path.resolve(input),
            Source::State => self.path.resolve_in(state),
            Source::Response => self.path.resolve(super::expr::response_of(input)),
        }
        .ok();
        match (&self.test, found) {
            (Test::Eq(want), Some(v)) => json_equal(v, want),
            (Test::Eq(_), None) => false,
            (Test::Ne(want), Some(v)) => !json_equal(v, want),
            (Test::Ne(_), None) => true,
            (Test::In(set), Some(v)) => set.iter().any(|w| json_equal(v, w)),
            (Test::In(_), None) => false,
            (Test::Exists(want), found) => found.is_some() == *want,
        }
    }
}

impl StatePatch {
    fn render(
        &self,
        input: &Value,
        state: &Map<String, Value>,
    ) -> Result<Map<String, Value>, CallError> {
        let mut out = Map::new();
        for (k, t) in self.0.iter() {
            out.insert(k.clone(), t.render(input, state)?);
        }
        Ok(out)
    }
}

impl Engine {
    /// Compile a parsed definition. Fails with harness `invalid_fixture_literal` (the first
    /// problem [`compile_problems`] would list) when a literal or reference is malformed.
    pub fn new(def: Definition) -> Result<Engine, CallError> {
        let mut problems = Vec::new();
        let variants = compile_variants(&def, &mut problems);
        match problems.into_iter().next() {
            Some(first) => Err(first.into()),
            None => Ok(Engine { def, variants }),
        }
    }

    pub fn definition(&self) -> &Definition {
        &self.def
    }

    /// The union of this definition's `initial_state` (empty object when absent).
    pub fn initial_state(&self) -> Map<String, Value> {
        self.def.initial_state.clone().unwrap_or_default()
    }

    /// The server-to-client requests the variant declares (`ask_client`, docs/src/reference/mcp.md), params
    /// rendered against the input and state; `None` when the variant asks nothing (or does not
    /// exist: evaluation reports that).
    pub fn ask(
        &self,
        variant: Option<&str>,
        input: &Value,
        state: &Map<String, Value>,
    ) -> Option<Result<ClientRequests, CallError>> {
        let name = variant.unwrap_or(&self.def.default_variant);
        let ask = self.variants.get(name)?.ask.as_ref()?;
        let mut requests = Vec::with_capacity(ask.requests.len());
        for (key, round, method, params) in ask.requests.iter() {
            match params.render(input, state) {
                Ok(params) => requests.push(ClientRequest {
                    key: key.clone(),
                    round: *round,
                    method: method.clone(),
                    params,
                }),
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(ClientRequests {
            single: ask.single,
            requests,
        }))
    }

    /// Evaluate one call. `variant` None → `default_variant`. `state` is the pre-call state of
    /// the attempt's integration. Pure: reads no clock, does no I/O.
    ///
    /// The result renders first, then `set_state` (against the same pre-call state and input);
    /// any error in either ends the call with no patch. A static result is copied; see
    /// [`Engine::decide`] to share it instead.
    pub fn evaluate(
        &self,
        variant: Option<&str>,
        input: &Value,
        state: &Map<String, Value>,
    ) -> Result<Outcome, CallError> {
        let d = self.decide(variant, input, state)?;
        Ok(Outcome {
            result: d.result.into_value(),
            state_patch: d.state_patch,
            delay_ms: d.delay_ms,
            fault: d.fault.cloned(),
            variant: d.variant.to_string(),
            rule: d.rule,
        })
    }

    /// [`Engine::evaluate`] without copying a static result: the same selection, rendering
    /// and errors, with a [`StaticResult`] handed out by reference.
    pub fn decide<'e>(
        &'e self,
        variant: Option<&str>,
        input: &Value,
        state: &Map<String, Value>,
    ) -> Result<Decided<'e>, CallError> {
        let name = variant.unwrap_or(&self.def.default_variant);
        let Some((name, v)) = self.variants.get_key_value(name) else {
            return Err(self.unknown_variant(name));
        };
        let matched = v
            .rules
            .iter()
            .position(|r| r.when.iter().all(|c| c.holds(input, state)));
        let rule = matched.map(|i| &v.rules[i]);
        let result = rule
            .and_then(|r| r.result.as_ref())
            .unwrap_or(&v.result)
            .render(input, state)?;
        let state_patch = match rule
            .and_then(|r| r.set_state.as_ref())
            .or(v.set_state.as_ref())
        {
            Some(p) => p.render(input, state)?,
            None => Map::new(),
        };
        Ok(Decided {
            result,
            state_patch,
            delay_ms: rule.and_then(|r| r.delay_ms).unwrap_or(v.delay_ms),
            fault: rule.and_then(|r| r.fault.as_ref()).or(v.fault.as_ref()),
            variant: name,
            rule: matched,
        })
    }

    fn unknown_variant(&self, name: &str) -> CallError {
        let known: Vec<&str> = self.variants.keys().map(String::as_str).collect();
        HarnessError::new(
            HarnessCode::UnknownVariant,
            format!(
                "variant `{name}` is not defined; the definition has: {}",
                known.join(", ")
            ),
        )
        .into()
    }
}

#[cfg(test)]
fn engine(def: Value) -> Engine {
    Engine::new(Definition::from_value(&def).unwrap()).unwrap()
}

#[cfg(test)]
fn state(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[cfg(test)]
mod selection_tests {
    use super::*;
    use serde_json::json;

    fn two() -> Engine {
        engine(
            json!({"schema_version": 1, "default_variant": "a", "variants": {
            "a": {"result": "A"}, "b": {"result": "B", "delay_ms": 7}}}),
        )
    }

    #[test]
    fn none_selects_the_default() {
        let o = two().evaluate(None, &json!({}), &Map::new()).unwrap();
        assert_eq!(
            (o.result, o.variant, o.rule, o.delay_ms),
            (json!("A"), "a".into(), None, 0)
        );
    }

    #[test]
    fn named_variant() {
        let o = two().evaluate(Some("b"), &json!({}), &Map::new()).unwrap();
        assert_eq!((o.result, o.delay_ms), (json!("B"), 7));
    }

    #[test]
    fn unknown_variant_is_a_harness_error() {
        let e = two()
            .evaluate(Some("c"), &json!({}), &Map::new())
            .unwrap_err();
        assert!(
            matches!(e, CallError::Harness(ref h) if h.code == HarnessCode::UnknownVariant),
            "{e:?}"
        );
        assert!(e.message().contains("a, b"));
    }
}

#[cfg(test)]
mod rule_tests {
    use super::*;
    use serde_json::json;

    fn def() -> Engine {
        engine(
            json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "result": "base", "set_state": {"k": "base"}, "delay_ms": 5,
            "rules": [
                {"when": [{"source": "input", "path": "x", "op": "eq", "value": 1}], "result": "first"},
                {"when": [{"source": "input", "path": "x", "op": "in", "value": [1, 2]}], "set_state": {}, "delay_ms": 9},
                {"when": [], "result": "always"}
            ]}}}),
        )
    }

    #[test]
    fn first_match_wins_and_falls_back_per_field() {
        let e = def();
        let o = e.evaluate(None, &json!({"x": 1.0}), &Map::new()).unwrap();
        assert_eq!(
            (o.rule, &o.result, o.delay_ms),
            (Some(0), &json!("first"), 5)
        );
        assert_eq!(o.state_patch, state(json!({"k": "base"})));
        let o = e.evaluate(None, &json!({"x": 2}), &Map::new()).unwrap();
        assert_eq!(
            (o.rule, &o.result, o.delay_ms),
            (Some(1), &json!("base"), 9)
        );
        assert!(
            o.state_patch.is_empty(),
            "explicit empty set_state changes nothing"
        );
        let o = e.evaluate(None, &json!({"x": 3}), &Map::new()).unwrap();
        assert_eq!((o.rule, o.result), (Some(2), json!("always")));
    }

    #[test]
    fn no_rule_uses_the_variant() {
        let e = engine(
            json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "result": "base", "rules": [{"when": [{"source": "input", "path": "x", "op": "exists"}], "result": "r"}]}}}),
        );
        let o = e.evaluate(None, &json!({}), &Map::new()).unwrap();
        assert_eq!((o.rule, o.result), (None, json!("base")));
    }
}

#[cfg(test)]
mod condition_tests {
    use super::*;
    use serde_json::json;

    fn holds(
        source: &str,
        path: &str,
        op: &str,
        value: Option<Value>,
        input: Value,
        st: Value,
    ) -> bool {
        let mut c = json!({"source": source, "path": path, "op": op});
        if let Some(v) = value {
            c["value"] = v;
        }
        let e = engine(
            json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "result": false, "rules": [{"when": [c], "result": true}]}}}),
        );
        e.evaluate(None, &input, &state(st)).unwrap().result == json!(true)
    }

    #[test]
    fn eq_is_deep_and_numeric() {
        assert!(holds(
            "input",
            "a",
            "eq",
            Some(json!({"b": [1]})),
            json!({"a": {"b": [1.0]}}),
            json!({})
        ));
        assert!(!holds(
            "input",
            "a",
            "eq",
            Some(json!("1")),
            json!({"a": 1}),
            json!({})
        ));
        assert!(!holds(
            "input",
            "missing",
            "eq",
            Some(json!(null)),
            json!({}),
            json!({})
        ));
        assert!(holds(
            "input",
            "a",
            "eq",
            Some(json!(null)),
            json!({"a": null}),
            json!({})
        ));
    }

    #[test]
    fn ne_is_true_on_missing() {
        assert!(holds(
            "input",
            "missing",
            "ne",
            Some(json!(1)),
            json!({}),
            json!({})
        ));
        assert!(!holds(
            "input",
            "a",
            "ne",
            Some(json!(1)),
            json!({"a": 1.0}),
            json!({})
        ));
    }

    #[test]
    fn in_needs_presence() {
        assert!(holds(
            "state",
            "s",
            "in",
            Some(json!(["x", "y"])),
            json!({}),
            json!({"s": "y"})
        ));
        assert!(!holds(
            "state",
            "s",
            "in",
            Some(json!(["x"])),
            json!({}),
            json!({})
        ));
        assert!(!holds(
            "state",
            "s",
            "in",
            Some(json!([])),
            json!({}),
            json!({"s": 1})
        ));
    }

    #[test]
    fn exists_compares_presence() {
        assert!(holds(
            "input",
            "a.0",
            "exists",
            None,
            json!({"a": [null]}),
            json!({})
        ));
        assert!(holds(
            "input",
            "a.1",
            "exists",
            Some(json!(false)),
            json!({"a": [null]}),
            json!({})
        ));
        assert!(!holds(
            "input",
            "a.0",
            "exists",
            Some(json!(false)),
            json!({"a": [null]}),
            json!({})
        ));
    }

    #[test]
    fn malformed_conditions_fail_compilation_with_paths() {
        let def = Definition::from_value(
            &json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "result": 1, "rules": [{"when": [
                {"source": "input", "path": "a..b", "op": "eq", "value": 1},
                {"source": "input", "path": "a", "op": "in", "value": 1},
                {"source": "input", "path": "a", "op": "exists", "value": "yes"},
                {"source": "input", "path": "a", "op": "in"},
                {"source": "input", "path": "a", "op": "eq", "value": {"$state": "x"}}
            ]}]}}}),
        )
        .unwrap();
        let p: Vec<String> = compile_problems(&def)
            .into_iter()
            .map(|e| e.path.unwrap())
            .collect();
        assert_eq!(
            p,
            vec![
                "variants/v/rules/0/when/0/path",
                "variants/v/rules/0/when/1/value",
                "variants/v/rules/0/when/2/value",
                "variants/v/rules/0/when/3",
                "variants/v/rules/0/when/4/value",
            ]
        );
        assert!(Engine::new(def).is_err());
    }
}

#[cfg(test)]
mod state_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_state_reads_the_pre_call_state_and_is_not_applied() {
        let e = engine(
            json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "result": {"before": {"$state": "n"}},
            "set_state": {"n": {"$input": "n"}, "old": {"$state": "n"}}}}}),
        );
        let pre = state(json!({"n": 1}));
        let o = e.evaluate(None, &json!({"n": 2}), &pre).unwrap();
        assert_eq!(o.result, json!({"before": 1}));
        assert_eq!(o.state_patch, state(json!({"n": 2, "old": 1})));
        assert_eq!(pre, state(json!({"n": 1})));
    }

    #[test]
    fn an_error_in_set_state_fails_the_call() {
        let e = engine(
            json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "result": "ok", "set_state": {"n": {"$input": "missing"}}}}}),
        );
        let err = e.evaluate(None, &json!({}), &Map::new()).unwrap_err();
        assert_eq!(err.path(), Some("variants/v/set_state/n"));
    }

    #[test]
    fn initial_state_defaults_to_empty() {
        let e = engine(
            json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {"result": 1}}}),
        );
        assert!(e.initial_state().is_empty());
    }
}

#[cfg(test)]
mod compile_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn engine_new_reports_the_first_problem_and_compile_problems_all() {
        let def = Definition::from_value(&json!({"schema_version": 1, "default_variant": "found", "variants": {
            "found": {"result": {"data": {"amount": {"$number": "abc"}}},
                       "set_state": {"due": {"$dateAdd": {"value": "2024-01-01", "days": 9000}}}}}})).unwrap();
        let all = compile_problems(&def);
        let paths: Vec<_> = all.iter().map(|e| e.path.clone().unwrap()).collect();
        assert_eq!(
            paths,
            vec![
                "variants/found/result/data/amount/$number",
                "variants/found/set_state/due/$dateAdd/days"
            ]
        );
        match Engine::new(def).unwrap_err() {
            CallError::Harness(h) => {
                assert_eq!(h.code, HarnessCode::InvalidFixtureLiteral);
                assert_eq!(h, all[0]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn engine_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Engine>();
    }
}

#[cfg(test)]
mod static_tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn def() -> Engine {
        engine(
            json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "result": {"status": 200, "data": {"n": {"$number": "4.50"}, "d": {"$dateAdd": {"value": "2024-02-28", "days": 1}}}},
            "rules": [{"when": [{"source": "input", "path": "x", "op": "exists"}],
                       "result": {"status": 200, "data": {"x": {"$input": "x"}}}}]}}}),
        )
    }

    #[test]
    fn reference_free_results_are_shared_and_literals_settled() {
        let e = def();
        let a = e.decide(None, &json!({}), &Map::new()).unwrap();
        let b = e.decide(None, &json!({}), &Map::new()).unwrap();
        let (Rendered::Static(a), Rendered::Static(b)) = (a.result, b.result) else {
            panic!("expected a static result");
        };
        assert!(Arc::ptr_eq(a.value(), b.value()));
        assert_eq!(
            **a.value(),
            json!({"status": 200, "data": {"n": 4.5, "d": "2024-02-29T00:00:00Z"}})
        );
        let o = e.evaluate(None, &json!({}), &Map::new()).unwrap();
        assert_eq!(&o.result, &**a.value());
    }

    #[test]
    fn results_with_references_render_per_call() {
        let e = def();
        let d = e.decide(None, &json!({"x": 1}), &Map::new()).unwrap();
        assert_eq!(d.rule, Some(0));
        assert_eq!(d.variant, "v");
        assert!(
            matches!(&d.result, Rendered::Dynamic(v) if *v == json!({"status": 200, "data": {"x": 1}}))
        );
    }

    #[test]
    fn memo_is_computed_once_per_result() {
        let e = def();
        let calls = AtomicUsize::new(0);
        for _ in 0..3 {
            let d = e.decide(None, &json!({}), &Map::new()).unwrap();
            let Rendered::Static(s) = d.result else {
                panic!("expected a static result");
            };
            let len = s.memo(|v| {
                calls.fetch_add(1, Ordering::Relaxed);
                v.to_string().len()
            });
            assert_eq!(len.copied(), Some(s.value().to_string().len()));
            assert_eq!(s.memo(|_| "another type"), None);
        }
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }
}

#[cfg(test)]
mod fault_tests {
    use super::*;
    use crate::mock::model::FaultKind;
    use serde_json::json;

    fn def() -> Engine {
        engine(
            json!({"schema_version": 1, "default_variant": "timeout_after_write", "variants": {
            "timeout_after_write": {
                "result": {"status": 201, "data": {"ok": true}},
                "set_state": {"booked": true},
                "fault": {"kind": "timeout", "after_effect": true, "ms": 5000},
                "rules": [
                    {"when": [{"source": "input", "path": "slot", "op": "eq", "value": "S-1"}],
                     "result": {"status": 409, "data": []}},
                    {"when": [{"source": "input", "path": "slot", "op": "eq", "value": "S-2"}],
                     "fault": {"kind": "reset", "after_effect": false}}
                ]},
            "plain": {"result": {"status": 200}}}}),
        )
    }

    #[test]
    fn the_variant_fault_is_carried_and_rules_inherit_or_override_it() {
        let e = def();
        let o = e
            .evaluate(None, &json!({"slot": "S-9"}), &Map::new())
            .unwrap();
        let f = o.fault.unwrap();
        assert_eq!(
            (f.kind, f.after_effect, f.ms),
            (FaultKind::Timeout, true, Some(5000))
        );
        assert_eq!(o.state_patch, state(json!({"booked": true})));
        let inherited = e
            .evaluate(None, &json!({"slot": "S-1"}), &Map::new())
            .unwrap();
        assert_eq!(inherited.rule, Some(0));
        assert_eq!(inherited.fault.unwrap().kind, FaultKind::Timeout);
        let own = e
            .decide(None, &json!({"slot": "S-2"}), &Map::new())
            .unwrap();
        assert_eq!(
            own.fault.map(|f| (f.kind, f.after_effect)),
            Some((FaultKind::Reset, false))
        );
        let none = e.evaluate(Some("plain"), &json!({}), &Map::new()).unwrap();
        assert_eq!(none.fault, None);
    }

    #[test]
    fn a_fault_is_part_of_the_definition() {
        let with = json!({"schema_version": 1, "default_variant": "a", "variants": {
            "a": {"result": 1, "fault": {"kind": "close", "after_effect": false}}},
            "examples": []});
        let mut without = with.clone();
        without["variants"]["a"]
            .as_object_mut()
            .unwrap()
            .remove("fault");
        let d = Definition::from_value(&with).unwrap();
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            with,
            "round trip keeps the fault"
        );
        // The definition hash covers it: `operation::tests` (the engine names no contract).
        assert_ne!(with, without);
    }

    #[test]
    fn unknown_kinds_and_fields_are_rejected_with_their_path() {
        let bad = |fault: Value| {
            Definition::from_value(&json!({"schema_version": 1, "default_variant": "a",
                "variants": {"a": {"result": 1, "fault": fault}}}))
            .unwrap_err()
        };
        let e = bad(json!({"kind": "explode", "after_effect": true}));
        assert!(
            e.starts_with("variants.a.fault.kind: unknown variant `explode`"),
            "{e}"
        );
        let e = bad(json!({"kind": "reset", "after_effect": true, "bytes": 3}));
        assert!(
            e.starts_with("variants.a.fault.bytes: unknown field `bytes`"),
            "{e}"
        );
        let e = bad(json!({"kind": "reset"}));
        assert!(e.contains("missing field `after_effect`"), "{e}");
    }
}

#[cfg(test)]
mod response_tests {
    use super::*;
    use serde_json::json;

    fn asking() -> Engine {
        engine(
            json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "ask_client": {"method": "elicitation/create",
                           "params": {"message": {"$input": "m"}, "n": {"$state": "n"}}},
            "result": {"declined": true},
            "rules": [{"when": [{"source": "response", "path": "action", "op": "eq", "value": "accept"}],
                       "result": {"who": {"$response": "content.name"}, "age": {"$response": "content.age"},
                                  "all": {"$response": "content"}}}]},
            "plain": {"result": {"x": {"$response": "content"}}}}}),
        )
    }

    #[test]
    fn ask_renders_params_against_input_and_state() {
        let e = asking();
        let r = e
            .ask(None, &json!({"m": "hi"}), &state(json!({"n": 3})))
            .unwrap()
            .unwrap();
        assert!(r.single);
        assert_eq!(
            r.requests,
            vec![ClientRequest {
                key: "ask".into(),
                round: 1,
                method: "elicitation/create".into(),
                params: json!({"message": "hi", "n": 3}),
            }]
        );
        assert!(e.ask(Some("plain"), &json!({}), &Map::new()).is_none());
        let miss = e.ask(None, &json!({}), &state(json!({"n": 1}))).unwrap();
        assert!(
            matches!(miss, Err(CallError::Harness(h)) if h.code == HarnessCode::MissingReference)
        );
    }

    #[test]
    fn response_conditions_select_and_references_keep_types() {
        let e = asking();
        let accepted = json!({"m": "hi", "$response": {"action": "accept",
            "content": {"name": "Ann", "age": 30, "tags": ["a"]}}});
        let o = e.evaluate(None, &accepted, &Map::new()).unwrap();
        assert_eq!(o.rule, Some(0));
        assert_eq!(o.result["who"], json!("Ann"));
        assert_eq!(o.result["age"], json!(30), "numbers stay numbers");
        assert_eq!(o.result["all"]["tags"], json!(["a"]));
        // a decline does not match the rule: the variant's result
        let declined = json!({"m": "hi", "$response": {"action": "decline"}});
        let o = e.evaluate(None, &declined, &Map::new()).unwrap();
        assert_eq!((o.rule, o.result), (None, json!({"declined": true})));
        // `$input` of the same path does not see it under another name
        assert!(e.evaluate(None, &json!({"m": "hi"}), &Map::new()).is_ok());
    }

    #[test]
    fn a_missing_response_path_fails_like_a_missing_input() {
        let e = asking();
        let err = e
            .evaluate(Some("plain"), &json!({}), &Map::new())
            .unwrap_err();
        match err {
            CallError::Harness(h) => {
                assert_eq!(h.code, HarnessCode::MissingReference);
                assert!(
                    h.message.contains("`$response` path `content`"),
                    "{}",
                    h.message
                );
                assert_eq!(h.path.as_deref(), Some("variants/plain/result/x"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_list_form_keeps_keys_and_orders_by_round() {
        let e = engine(
            json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "ask_client": [
                {"key": "later", "round": 2, "method": "roots/list"},
                {"key": "name", "method": "elicitation/create", "params": {"message": {"$input": "m"}}},
                {"key": "text", "method": "sampling/createMessage", "params": {"maxTokens": 5}}],
            "result": {"n": {"$response": "name.content.n"}, "roots": {"$response": "later.roots"}}}}}),
        );
        let r = e
            .ask(None, &json!({"m": "hi"}), &Map::new())
            .unwrap()
            .unwrap();
        assert!(!r.single);
        let order: Vec<(&str, u64)> = r
            .requests
            .iter()
            .map(|q| (q.key.as_str(), q.round))
            .collect();
        assert_eq!(order, [("name", 1), ("text", 1), ("later", 2)]);
        assert_eq!(r.requests[0].params, json!({"message": "hi"}));
        assert_eq!(r.requests[2].params, json!({}));
        let answered = json!({"m": "hi", "$response": {"name": {"action": "accept", "content": {"n": 1}},
            "text": {}, "later": {"roots": [{"uri": "file:///r"}]}}});
        let o = e.evaluate(None, &answered, &Map::new()).unwrap();
        assert_eq!(o.result, json!({"n": 1, "roots": [{"uri": "file:///r"}]}));
    }

    #[test]
    fn malformed_ask_client_is_a_compile_problem() {
        for bad in [
            json!("elicitation/create"),
            json!({"method": "tools/call"}),
            json!([]),
            json!([{"method": "roots/list"}]),
            json!([{"key": "a", "method": "roots/list"}, {"key": "a", "method": "roots/list"}]),
            json!([{"key": "a", "method": "roots/list", "round": 0}]),
            json!({"method": "roots/list", "key": ""}),
            json!({"method": "elicitation/create", "params": []}),
            json!({"method": "elicitation/create", "extra": 1}),
            json!({"method": "elicitation/create", "params": {"x": {"$response": "a"}}}),
            json!({"method": "elicitation/create", "params": {"x": {"$input": 3}}}),
        ] {
            let def = Definition::from_value(&json!({"schema_version": 1, "default_variant": "v",
                "variants": {"v": {"result": 1, "ask_client": bad}}}))
            .unwrap();
            let p = compile_problems(&def);
            assert_eq!(p.len(), 1, "{bad}: {p:?}");
            assert!(p[0]
                .path
                .as_deref()
                .unwrap()
                .starts_with("variants/v/ask_client"));
        }
    }
}
