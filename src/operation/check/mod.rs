//! `understudy check` (docs/src/reference/mock-definition.md#checks-and-limits).
//!
//! - [`check_operation`] (this file): every check of one operation file — identity, profile
//!   rules, match template, schemas — and, through `mock.rs`, the mock definition (limits,
//!   variants, examples evaluated and compared, output schema, native envelope, fixture
//!   literals, stale contract hash).
//! - [`check_integration`] (`integration.rs`): the cross-file checks of one integration
//!   (`initial_state` conflicts, match ties, duplicate operation ids).
//! - [`schema_errors`] (`output.rs`): the output schema rule, shared with the call core
//!   ([`super::call`]); the envelope rule is [`crate::profile::envelope`].
//!
//! Every [`Problem`] prints as `file: json/path: what is wrong, what was expected`.

mod integration;
mod mock;
mod output;

pub use integration::{check_cross, check_integration, CrossItem};
pub use output::schema_errors;

use crate::contract::ProfileKind;
use crate::contract::{
    compile_schema_shared, json_stem, valid_operation_id, CompiledMatch, OperationFile,
};
use crate::mock::path::{pointer_push, DotPath};
use mock::{check_mock, MockCtx};
use serde_json::Value;
use std::path::Path;

pub use crate::error::Problem;

/// Every docs/src/reference/mock-definition.md#checks-and-limits check of one operation file, as loaded for `profile`. `file` names the
/// problems; when it ends in `.json` its stem must equal `operation_id` (inline operations of
/// the admin API pass a path without `.json`, which skips that rule).
pub fn check_operation(op: &OperationFile, profile: ProfileKind, file: &Path) -> Vec<Problem> {
    check_operation_hashed(op, profile, file, None, None)
}

/// What [`check_operation_hashed`] compiled while checking (the schemas' validators and the
/// `match`) and whether the mock compiled, for [`super::Operation::compile_with`] to reuse
/// instead of compiling them again.
#[derive(Default)]
pub struct Compiled {
    pub input: Option<std::sync::Arc<jsonschema::Validator>>,
    pub output: Option<std::sync::Arc<jsonschema::Validator>>,
    pub matcher: Option<CompiledMatch>,
    /// The mock's engine was built by the checks of its examples. Only that is kept: the
    /// engine itself is built again on a first call ([`crate::operation::lazy`]), so a
    /// start-up that checks 10 000 files does not hold 10 000 engines at once.
    pub mock_compiled: bool,
    /// The mock's definition hash, when known: from the check cache
    /// ([`crate::operation::cache`]), or computed by the check of a mock that compiled.
    pub definition_hash: Option<String>,
}

/// [`check_operation`] with the operation's current contract hash under `profile` already
/// computed (as [`super::LoadedOperation::contract_hash`]), so it is not computed again; with
/// `keep`, what the checks compiled is moved there.
pub fn check_operation_hashed(
    op: &OperationFile,
    profile: ProfileKind,
    file: &Path,
    contract_hash: Option<&str>,
    keep: Option<&mut Compiled>,
) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut push = |path: &str, msg: String| out.push(Problem::new(file, path, msg));
    let kind = profile;
    if !valid_operation_id(&op.operation_id) {
        push(
            "operation_id",
            format!(
                "`{}` is not a valid operation id: expected 1-128 characters of a-z, 0-9, `_`, `.` and `-`",
                op.operation_id
            ),
        );
    }
    if let Some(stem) = json_stem(file) {
        if stem != op.operation_id {
            push(
                "operation_id",
                format!(
                    "`{}` differs from the file name `{stem}.json`: expected \"{stem}\" (the file is named after the operation)",
                    op.operation_id
                ),
            );
        }
    }
    let mut matcher = None;
    if kind.is_http() {
        match &op.match_spec {
            None => push(
                "match",
                format!("missing: a `{kind}` operation needs `match` with `method` and `path`"),
            ),
            Some(m) => match CompiledMatch::compile(m) {
                Ok(c) => matcher = Some(c),
                Err(e) => {
                    let (path, msg) = match_error_path(&e);
                    push(&path, msg);
                }
            },
        }
        for (key, present) in [
            ("title", op.title.is_some()),
            ("annotations", op.annotations.is_some()),
            ("result_form", op.result_form.is_some()),
        ] {
            if present {
                push(
                    key,
                    format!("only `mcp` operations have `{key}`; this is a `{kind}` operation"),
                );
            }
        }
    } else if op.match_spec.is_some() {
        push(
            "match",
            "an `mcp` operation has no `match`: tools are called by name (the operation_id)"
                .to_string(),
        );
    }
    if let Some(a) = &op.annotations {
        if !a.is_object() {
            push(
                "annotations",
                "expected an object, as in `tools/list`".to_string(),
            );
        }
    }
    if let Some(i) = &op.idempotency {
        match (&i.header, &i.input) {
            (Some(h), None) => {
                if hyper::http::HeaderName::from_bytes(h.as_bytes()).is_err() {
                    push("idempotency/header", format!("`{h}` is not a valid header name"));
                }
            }
            (None, Some(p)) => {
                if DotPath::parse(p).is_err() {
                    push(
                        "idempotency/input",
                        format!("`{p}` is not a dot path into the input, expected e.g. `request_id` or `meta.key`"),
                    );
                }
            }
            _ => push(
                "idempotency",
                "expected exactly one of `header` (a request header) or `input` (a dot path into the input)".into(),
            ),
        }
    }
    let input_v = compile_schema_shared(&op.input_schema)
        .map_err(|e| push("input_schema", format!("not a usable JSON Schema: {e}")))
        .ok();
    let output_v = compile_schema_shared(&op.output_schema)
        .map_err(|e| push("output_schema", format!("not a usable JSON Schema: {e}")))
        .ok();
    if let Some(m) = &matcher {
        check_captures_allowed(m, &op.input_schema, &mut push);
    }
    let (mut mock_compiled, mut definition_hash) = (false, None);
    if let Some(mock) = &op.mock {
        let ctx = MockCtx {
            kind,
            result_form: op.result_form,
            contract_hash: contract_hash
                .map(str::to_string)
                .unwrap_or_else(|| op.contract_hash(profile)),
            input_v: input_v.as_deref(),
            output_v: output_v.as_deref(),
        };
        let parsed = mock.parse();
        mock_compiled = check_mock(&parsed, &ctx, &mut push).is_some();
        // What `compile_with` hashes, from the value parsed here rather than parsed again.
        if mock_compiled && keep.is_some() {
            definition_hash = Some(crate::contract::hash::mock_definition_hash(&parsed));
        }
    }
    if let Some(k) = keep {
        *k = Compiled {
            input: input_v,
            output: output_v,
            matcher,
            mock_compiled,
            definition_hash,
        };
    }
    out
}

/// `match` compile errors start with the part they concern: turn that into a JSON path.
fn match_error_path(e: &str) -> (String, String) {
    for (prefix, path) in [("method: ", "match/method"), ("path: ", "match/path")] {
        if let Some(rest) = e.strip_prefix(prefix) {
            return (path.to_string(), rest.to_string());
        }
    }
    if let Some(rest) = e.strip_prefix("query `") {
        if let Some((key, msg)) = rest.split_once("`: ") {
            return (pointer_push("match/query", key), msg.to_string());
        }
    }
    if let Some(rest) = e.strip_prefix("headers `") {
        if let Some((key, msg)) = rest.split_once("`: ") {
            return (pointer_push("match/headers", key), msg.to_string());
        }
    }
    ("match".to_string(), e.to_string())
}

/// A capture must be able to land in the input: flag a capture the input schema forbids
/// (`additionalProperties: false` without a property of that name).
fn check_captures_allowed(
    m: &CompiledMatch,
    input_schema: &Value,
    push: &mut impl FnMut(&str, String),
) {
    if input_schema.get("additionalProperties") != Some(&Value::Bool(false)) {
        return;
    }
    let props = input_schema.get("properties").and_then(Value::as_object);
    for name in m.capture_names() {
        if !props.is_some_and(|p| p.contains_key(name)) {
            push(
                "match",
                format!(
                    "capture `{{{name}}}` goes into the input, but input_schema forbids additional properties and has no property `{name}`: add it to input_schema/properties"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ResultForm;
    use crate::profile::envelope::envelope_problem;
    use serde_json::json;

    fn op(v: Value) -> OperationFile {
        serde_json::from_value(v).unwrap()
    }

    fn base(profile: ProfileKind, mock: Value) -> OperationFile {
        let mut o = op(json!({
            "operation_id": "get_thing",
            "match": {"method": "GET", "path": "/things/{id}"},
            "input_schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
            "output_schema": {"type": "object", "required": ["status"], "properties": {"status": {"type": "integer"}}},
            "mock": mock
        }));
        if profile == ProfileKind::Mcp {
            o.match_spec = None;
        }
        let h = o.contract_hash(profile);
        if let Some(mock) = &mut o.mock {
            mock.edit(|v| {
                v.as_object_mut()
                    .map(|m| m.entry("contract_hash").or_insert(Value::String(h)));
            });
        }
        o
    }

    fn good_mock() -> Value {
        json!({
            "schema_version": 1, "default_variant": "found",
            "variants": {"found": {"result": {"status": 200, "data": {"id": {"$input": "id"}}}}},
            "examples": [{"variant": "found", "input": {"id": "7"}, "expected": {"status": 200, "data": {"id": "7"}}}]
        })
    }

    /// [`check`] under a profile named as written: an unknown name stops at the parse.
    fn check_named(o: &OperationFile, name: &str) -> Vec<String> {
        match name.parse::<ProfileKind>() {
            Ok(kind) => check(o, kind),
            Err(e) => vec![e],
        }
    }

    fn check(o: &OperationFile, profile: ProfileKind) -> Vec<String> {
        check_operation(o, profile, Path::new("ops/get_thing.json"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn clean_operation_has_no_problem() {
        assert_eq!(
            check(
                &base(crate::contract::ProfileKind::Rest, good_mock()),
                crate::contract::ProfileKind::Rest
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn identity_and_profile_rules() {
        let mut o = base(crate::contract::ProfileKind::Rest, good_mock());
        o.operation_id = "Get-Thing".into();
        let p = check(&o, crate::contract::ProfileKind::Rest);
        assert!(
            p.iter()
                .any(|p| p
                    .starts_with("ops/get_thing.json: operation_id: `Get-Thing` is not a valid")),
            "{p:?}"
        );
        assert!(
            p.iter().any(|p| p.contains("differs from the file name")),
            "{p:?}"
        );
        let mut o = base(crate::contract::ProfileKind::Rest, good_mock());
        o.match_spec = None;
        o.title = Some("t".into());
        let p = check(&o, crate::contract::ProfileKind::Rest);
        assert!(p.iter().any(|p| p.contains(": match: missing")), "{p:?}");
        assert!(p.iter().any(|p| p.contains(": title: only `mcp`")), "{p:?}");
        let o = base(crate::contract::ProfileKind::Rest, good_mock());
        let p = check(&o, crate::contract::ProfileKind::Mcp);
        assert!(
            p.iter()
                .any(|p| p.contains(": match: an `mcp` operation has no `match`")),
            "{p:?}"
        );
        let mut o = base(crate::contract::ProfileKind::Rest, good_mock());
        // `x{id}` is a template since literals may surround a capture; a `*` inside a segment is not.
        o.match_spec.as_mut().unwrap().path = "/things/x*".into();
        let p = check(&o, crate::contract::ProfileKind::Rest);
        assert!(
            p.iter().any(|p| p.contains(": match/path: segment 2")),
            "{p:?}"
        );
        assert!(check_named(
            &base(crate::contract::ProfileKind::Rest, good_mock()),
            "soap"
        )[0]
        .contains("unknown profile"));
    }

    #[test]
    fn mock_limits_and_structure() {
        let mut m = good_mock();
        m["variants"]["found"]["delay_ms"] = json!(30001);
        m["variants"]["other"] = json!({"result": {"status": 404}});
        m["default_variant"] = json!("missing");
        m["examples"]
            .as_array_mut()
            .unwrap()
            .push(json!({"variant": "nope", "input": {}, "expected": {}}));
        let p = check(
            &base(crate::contract::ProfileKind::Rest, m),
            crate::contract::ProfileKind::Rest,
        );
        for want in [
            "mock/variants/found/delay_ms: 30001: at most 30000",
            "mock/variants/other: no example",
            "mock/default_variant: `missing` names no variant",
            "mock/examples/1/variant: `nope` names no variant",
        ] {
            assert!(p.iter().any(|p| p.contains(want)), "{want}: {p:?}");
        }
        let mut m = good_mock();
        m["variants"]["found"]["resutl"] = json!(1);
        let p = check(
            &base(crate::contract::ProfileKind::Rest, m),
            crate::contract::ProfileKind::Rest,
        );
        assert!(
            p[0].contains("mock/variants/found/resutl: unknown field `resutl`"),
            "{p:?}"
        );
        let mut m = good_mock();
        m["examples"][0] = json!(["found", {"id": "7"}, {"status": 200}]);
        let p = check(
            &base(crate::contract::ProfileKind::Rest, m),
            crate::contract::ProfileKind::Rest,
        );
        assert!(
            p[0].contains("mock/examples/0: expected an object (an example), got an array"),
            "{p:?}"
        );
        let mut m = good_mock();
        m["schema_version"] = json!(2);
        let p = check(
            &base(crate::contract::ProfileKind::Rest, m),
            crate::contract::ProfileKind::Rest,
        );
        assert!(p[0].contains("mock/schema_version: 2: expected 1"), "{p:?}");
        let mut m = good_mock();
        for i in 0..31 {
            m["variants"][format!("v{i}")] = json!({"result": {"status": 200}});
        }
        let p = check(
            &base(crate::contract::ProfileKind::Rest, m),
            crate::contract::ProfileKind::Rest,
        );
        assert!(
            p.iter()
                .any(|p| p.contains("mock/variants: 32 variants: at most 30")),
            "{p:?}"
        );
    }

    #[test]
    fn examples_are_evaluated_compared_and_validated() {
        let mut m = good_mock();
        m["examples"][0]["expected"]["data"]["id"] = json!("8");
        let p = check(
            &base(crate::contract::ProfileKind::Rest, m),
            crate::contract::ProfileKind::Rest,
        );
        assert!(
            p.iter().any(|p| p.contains("mock/examples/0/expected/data/id: the rendered result is \"7\" but expected says \"8\"")),
            "{p:?}"
        );
        let mut m = good_mock();
        m["examples"][0]["input"] = json!({"id": 7});
        let p = check(
            &base(crate::contract::ProfileKind::Rest, m),
            crate::contract::ProfileKind::Rest,
        );
        assert!(
            p.iter()
                .any(|p| p.contains("mock/examples/0/input: does not match input_schema: at /id")),
            "{p:?}"
        );
        let mut o = base(crate::contract::ProfileKind::Rest, good_mock());
        o.output_schema = json!({"type": "object", "properties": {"data": {"properties": {"id": {"type": "integer"}}}}}).into();
        let h = o.contract_hash(crate::contract::ProfileKind::Rest);
        o.mock
            .as_mut()
            .unwrap()
            .edit(|v| v["contract_hash"] = json!(h));
        let p = check(&o, crate::contract::ProfileKind::Rest);
        assert!(
            p.iter().any(|p| p.contains(
                "mock/examples/0: the rendered result does not match output_schema: at /data/id"
            )),
            "{p:?}"
        );
    }

    #[test]
    fn envelope_rules() {
        let mut m = good_mock();
        m["variants"]["found"]["result"] = json!({"totalSize": 0, "done": true, "records": []});
        m["examples"][0]["expected"] = json!({"totalSize": 0, "done": true, "records": []});
        let mut o = base(crate::contract::ProfileKind::Rest, m);
        o.output_schema = json!({}).into();
        let h = o.contract_hash(crate::contract::ProfileKind::Rest);
        o.mock
            .as_mut()
            .unwrap()
            .edit(|v| v["contract_hash"] = json!(h));
        let p = check(&o, crate::contract::ProfileKind::Rest);
        assert!(
            p.iter()
                .any(|p| p.contains("mock/examples/0: the rendered result has the member `done`")),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|p| p.contains("mock/variants/found/result: has the member `done`")),
            "{p:?}"
        );
        let k = ProfileKind::Rest;
        assert!(envelope_problem(k, None, &json!({"status": 200})).is_none());
        assert!(envelope_problem(k, None, &json!({"status": 600})).is_some());
        assert!(envelope_problem(k, None, &json!({"status": 200.5})).is_some());
        assert!(envelope_problem(k, None, &json!({"status": 200, "headers": {"a": 1}})).is_some());
        let mcp = ProfileKind::Mcp;
        assert!(envelope_problem(mcp, None, &json!({"a": 1})).is_none());
        assert!(envelope_problem(mcp, None, &json!([1])).is_some());
        let ctr = Some(ResultForm::CallToolResult);
        assert!(envelope_problem(
            mcp,
            ctr,
            &json!({"content": [{"type": "text", "text": "x"}], "isError": true})
        )
        .is_none());
        assert!(envelope_problem(mcp, ctr, &json!({"text": "x"})).is_some());
        assert!(envelope_problem(mcp, ctr, &json!({"content": [{"text": "x"}]})).is_some());
    }

    #[test]
    fn stale_hash_names_both() {
        let mut o = base(crate::contract::ProfileKind::Rest, good_mock());
        o.description = Some("changed".into());
        let p = check(&o, crate::contract::ProfileKind::Rest);
        let stale: Vec<_> = p
            .iter()
            .filter(|p| p.contains("mock/contract_hash: stale"))
            .collect();
        assert_eq!(stale.len(), 1, "{p:?}");
        assert_eq!(stale[0].matches("sha256:").count(), 2);
    }

    #[test]
    fn bad_literal_is_reported() {
        let mut m = good_mock();
        m["variants"]["found"]["result"]["data"]["n"] = json!({"$number": "abc"});
        let p = check(
            &base(crate::contract::ProfileKind::Rest, m),
            crate::contract::ProfileKind::Rest,
        );
        assert!(
            p.iter()
                .any(|p| p.contains("mock/variants/found/result/data/n")),
            "{p:?}"
        );
    }
    #[test]
    fn faults_are_checked_with_their_paths() {
        let with = |fault: Value, rule_fault: Option<Value>| {
            let mut m = good_mock();
            m["variants"]["found"]["fault"] = fault;
            if let Some(rf) = rule_fault {
                m["variants"]["found"]["rules"] = json!([{"when": [], "fault": rf}]);
            }
            m
        };
        // Good faults pass, on HTTP and MCP.
        for f in [
            json!({"kind": "timeout", "after_effect": true}),
            json!({"kind": "timeout", "after_effect": true, "ms": 30000}),
            json!({"kind": "reset", "after_effect": false}),
            json!({"kind": "slow_body", "after_effect": true, "ms": 2000, "chunks": 4}),
            json!({"kind": "status", "after_effect": false, "status": 503, "headers": {"Retry-After": "2"}}),
            json!({"kind": "malformed_body", "after_effect": true}),
        ] {
            assert_eq!(
                check(
                    &base(crate::contract::ProfileKind::Rest, with(f.clone(), None)),
                    crate::contract::ProfileKind::Rest
                ),
                Vec::<String>::new(),
                "{f}"
            );
        }
        let mcp = with(
            json!({"kind": "jsonrpc_error", "after_effect": false, "code": -32000, "message": "busy"}),
            Some(json!({"kind": "stream_cut", "after_effect": true})),
        );
        assert_eq!(
            check(
                &base(crate::contract::ProfileKind::Mcp, mcp.clone()),
                crate::contract::ProfileKind::Mcp
            ),
            Vec::<String>::new()
        );
        // MCP-only kinds on an HTTP profile, with the file and both paths.
        let p = check(
            &base(crate::contract::ProfileKind::Rest, mcp),
            crate::contract::ProfileKind::Rest,
        );
        assert!(p.iter().any(|p| p.starts_with(
            "ops/get_thing.json: mock/variants/found/fault/kind: `jsonrpc_error` is an MCP fault and this is an HTTP operation: expected one of reset, close, timeout, slow_body, malformed_body, status")), "{p:?}");
        assert!(
            p.iter().any(|p| p
                .contains("mock/variants/found/rules/0/fault/kind: `stream_cut` is an MCP fault")),
            "{p:?}"
        );
        // Limits, missing and foreign fields.
        for (f, want) in [
            (json!({"kind": "timeout", "after_effect": true, "ms": 30001}), "mock/variants/found/fault/ms: 30001: expected 1..=30000 milliseconds"),
            (json!({"kind": "timeout", "after_effect": true, "ms": 0}), "mock/variants/found/fault/ms: 0: expected 1..=30000"),
            (json!({"kind": "slow_body", "after_effect": true}), "mock/variants/found/fault: a `slow_body` fault needs `ms`"),
            (json!({"kind": "slow_body", "after_effect": true, "ms": 10, "chunks": 1}), "mock/variants/found/fault/chunks: 1: expected 2..=1000 chunks"),
            (json!({"kind": "timeout", "after_effect": true, "chunks": 3}), "mock/variants/found/fault/chunks: a `timeout` fault takes no `chunks`: expected `ms` besides"),
            (json!({"kind": "reset", "after_effect": true, "ms": 3}), "mock/variants/found/fault/ms: a `reset` fault takes no `ms`: expected no other field"),
            (json!({"kind": "status", "after_effect": true}), "mock/variants/found/fault: a `status` fault needs `status`"),
            (json!({"kind": "status", "after_effect": true, "status": 200}), "mock/variants/found/fault/status: 200: expected an HTTP error status 400..=599"),
            (json!({"kind": "status", "after_effect": true, "status": 503, "headers": {"Content-Length": "1"}}), "mock/variants/found/fault/headers/Content-Length: `Content-Length` frames the response"),
            (json!({"kind": "status", "after_effect": true, "status": 503, "headers": {"bad header": "1"}}), "mock/variants/found/fault/headers/bad header: `bad header` is not a valid header name"),
            (json!({"kind": "teleport", "after_effect": true}), "mock/variants/found/fault/kind: unknown variant `teleport`, expected one of `reset`"),
            (json!({"kind": "reset"}), "mock/variants/found/fault: missing field `after_effect`"),
        ] {
            let p = check(&base(crate::contract::ProfileKind::Rest, with(f, None)), crate::contract::ProfileKind::Rest);
            assert!(p.iter().any(|p| p.contains(want)), "{want}: {p:?}");
        }
        let bad_rule = with(
            json!({"kind": "reset", "after_effect": true}),
            Some(json!({"kind": "timeout", "after_effect": false, "ms": 99999})),
        );
        let p = check(
            &base(crate::contract::ProfileKind::Rest, bad_rule),
            crate::contract::ProfileKind::Rest,
        );
        assert_eq!(p, vec!["ops/get_thing.json: mock/variants/found/rules/0/fault/ms: 99999: expected 1..=30000 milliseconds (the delay limit)".to_string()]);
        let p = check(
            &base(
                crate::contract::ProfileKind::Mcp,
                with(
                    json!({"kind": "jsonrpc_error", "after_effect": true, "code": 1_i64 << 40}),
                    None,
                ),
            ),
            crate::contract::ProfileKind::Mcp,
        );
        assert!(
            p.iter()
                .any(|p| p.contains("fault/code: 1099511627776: expected a 32-bit integer")),
            "{p:?}"
        );
    }
}
