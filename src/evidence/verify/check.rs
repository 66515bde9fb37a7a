//! Static checks of a tool-call contract for `understudy check` (docs/src/reference/contracts.md): every tool it
//! names exists, and every argument path it names is one the tool's input schema allows.
//!
//! The schema walk only reports what it can prove: at each segment it follows `properties`
//! (and `items` for an array index); a member that is not in `properties` is a problem only
//! where the schema says `additionalProperties: false` and offers no other way in
//! (`patternProperties`, `$ref`, `allOf`/`anyOf`/`oneOf`, `if`). Anywhere else the walk stops
//! and the path is allowed.

use serde_json::Value;

use super::model::{split_tool, Problem, ToolCallContract};
use super::path::VPath;

/// What the contract checks need to know about the project's operations.
pub trait ToolCatalog {
    /// Is `integration/operation_id` an operation of the project?
    fn exists(&self, tool: &str) -> bool;
    /// Is `integration` an integration of the project?
    fn has_integration(&self, integration: &str) -> bool;
    /// The input JSON Schema of `integration/operation_id`.
    fn input_schema(&self, tool: &str) -> Option<&Value>;
}

/// Every problem of `contract` (from `file`) against the project's operations.
pub fn check_contract(
    contract: &ToolCallContract,
    file: &str,
    cat: &dyn ToolCatalog,
) -> Vec<Problem> {
    let mut out = Vec::new();
    let tool = |path: String, t: &str, out: &mut Vec<Problem>| {
        if !cat.exists(t) {
            let hint = match split_tool(t) {
                Some((i, _)) if !cat.has_integration(i) => format!(" (no integration `{i}`)"),
                _ => String::new(),
            };
            out.push(Problem::new(
                file,
                path,
                format!("unknown operation `{t}`{hint}"),
            ));
        }
    };
    tool("tool".into(), &contract.tool, &mut out);
    if let Some(pre) = &contract.preconditions {
        for (i, t) in pre.required_before.iter().enumerate() {
            tool(format!("preconditions.required_before[{i}]"), t, &mut out);
        }
        for (i, t) in pre.forbidden_before.iter().enumerate() {
            tool(format!("preconditions.forbidden_before[{i}]"), t, &mut out);
        }
    }
    if let Some(a) = &contract.arguments {
        for (arg, s) in &a.sources {
            if let Some(t) = &s.result_of {
                tool(format!("arguments.sources.{arg}.result_of"), t, &mut out);
            }
        }
    }
    if let Some(o) = &contract.order {
        for (i, t) in o.tools.iter().enumerate() {
            match t.strip_suffix("/*") {
                Some(integration) => {
                    if !cat.has_integration(integration) {
                        out.push(Problem::new(
                            file,
                            format!("order.tools[{i}]"),
                            format!("unknown integration `{integration}`"),
                        ));
                    }
                }
                None => tool(format!("order.tools[{i}]"), t, &mut out),
            }
        }
    }
    if let Some(s) = &contract.side_effects {
        for (i, t) in s.forbidden.iter().enumerate() {
            tool(format!("side_effects.forbidden[{i}]"), t, &mut out);
        }
        for k in s.max_writes.keys() {
            if !cat.has_integration(k) {
                out.push(Problem::new(
                    file,
                    format!("side_effects.max_writes.{k}"),
                    format!("unknown integration `{k}`"),
                ));
            }
        }
    }

    // Argument paths against the input schema of `tool`.
    if let (Some(a), Some(schema)) = (&contract.arguments, cat.input_schema(&contract.tool)) {
        let mut paths: Vec<(String, &str)> = Vec::new();
        paths.extend(
            a.required
                .iter()
                .enumerate()
                .map(|(i, p)| (format!("arguments.required[{i}]"), p.as_str())),
        );
        paths.extend(
            a.forbidden
                .iter()
                .enumerate()
                .map(|(i, p)| (format!("arguments.forbidden[{i}]"), p.as_str())),
        );
        paths.extend(
            a.sources
                .keys()
                .map(|p| (format!("arguments.sources.{p}"), p.as_str())),
        );
        paths.extend(
            a.values
                .keys()
                .map(|p| (format!("arguments.values.{p}"), p.as_str())),
        );
        for (at, p) in paths {
            let Ok(vp) = VPath::parse(p, false) else {
                continue; // reported by the model's validation
            };
            if let Err(msg) = schema_allows(schema, &vp) {
                out.push(Problem::new(
                    file,
                    at,
                    format!(
                        "the input schema of {} does not allow `{p}`: {msg}",
                        contract.tool
                    ),
                ));
            }
        }
    }
    out
}

/// Keywords that let members in by another way than `properties`.
const OTHER_WAYS: [&str; 7] = [
    "patternProperties",
    "$ref",
    "$dynamicRef",
    "allOf",
    "anyOf",
    "oneOf",
    "if",
];

/// `Ok` unless the schema provably forbids the path; `Err` says where.
pub fn schema_allows(schema: &Value, path: &VPath) -> Result<(), String> {
    let mut cur = schema;
    let mut walked: Vec<&str> = Vec::new();
    for seg in path.segments() {
        let Some(seg) = seg else { return Ok(()) };
        let Value::Object(s) = cur else {
            // `true`/`false` schemas: `false` allows nothing, `true` anything.
            return if cur == &Value::Bool(false) {
                Err(format!("the schema at {} is `false`", place(&walked)))
            } else {
                Ok(())
            };
        };
        if OTHER_WAYS.iter().any(|k| s.contains_key(*k)) {
            return Ok(());
        }
        if let Some(sub) = s.get("properties").and_then(|p| p.get(seg)) {
            cur = sub;
        } else if let (Some(items), true) =
            (s.get("items"), seg.bytes().all(|b| b.is_ascii_digit()))
        {
            cur = items;
        } else {
            match s.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    let known: Vec<&str> = s
                        .get("properties")
                        .and_then(Value::as_object)
                        .map(|m| m.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    return Err(format!(
                        "no member `{seg}` at {} and additionalProperties is false (members: {})",
                        place(&walked),
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ));
                }
                Some(extra @ Value::Object(_)) => cur = extra,
                _ => return Ok(()),
            }
        }
        walked.push(seg);
    }
    Ok(())
}

fn place(walked: &[&str]) -> String {
    if walked.is_empty() {
        "the top level".to_string()
    } else {
        format!("`{}`", walked.join("."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::verify::model::parse;
    use serde_json::json;
    use std::collections::BTreeMap;

    struct Cat(BTreeMap<String, Value>);

    impl ToolCatalog for Cat {
        fn exists(&self, tool: &str) -> bool {
            self.0.contains_key(tool)
        }
        fn has_integration(&self, integration: &str) -> bool {
            self.0
                .keys()
                .any(|k| k.split_once('/').is_some_and(|(i, _)| i == integration))
        }
        fn input_schema(&self, tool: &str) -> Option<&Value> {
            self.0.get(tool)
        }
    }

    fn cat() -> Cat {
        Cat(BTreeMap::from([
            (
                "crm/book_appointment".to_string(),
                json!({"type": "object", "additionalProperties": false, "properties": {
                    "Contact__c": {"type": "string"},
                    "Requested_Date__c": {"type": "string"},
                    "Phone": {"type": "string"},
                    "payment": {"type": "object", "properties": {"card_number": {}}},
                    "slots": {"type": "array", "items": {"type": "object", "additionalProperties": false, "properties": {"id": {}}}}
                }}),
            ),
            ("crm/lookup_contact_by_phone".to_string(), json!({})),
            ("crm/delete_contact".to_string(), json!({})),
        ]))
    }

    #[test]
    fn the_spec_example_checks_clean() {
        let c = parse(
            "book_appointment_contract.yaml",
            crate::evidence::verify::model::tests_support::SPEC_YAML,
        )
        .unwrap();
        assert_eq!(
            check_contract(&c, "book_appointment_contract.yaml", &cat()),
            vec![]
        );
    }

    #[test]
    fn unknown_tools_are_named_with_file_and_path() {
        let text = crate::evidence::verify::model::tests_support::SPEC_YAML
            .replace(
                "result_of: crm/lookup_contact_by_phone",
                "result_of: crm/lookup_contact",
            )
            .replace(
                "forbidden: [crm/delete_contact]",
                "forbidden: [billing/refund]",
            )
            .replace("max_writes: { crm: 1 }", "max_writes: { erp: 1 }")
            .replace(
                "tools: [crm/lookup_contact_by_phone, crm/book_appointment]",
                "tools: [crm/lookup_contact_by_phone, crm/*, sms/*]",
            );
        let c = parse("book_appointment_contract.yaml", &text).unwrap();
        let p: Vec<String> = check_contract(&c, "f.yaml", &cat())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            p,
            vec![
                "f.yaml: arguments.sources.Contact__c.result_of: unknown operation `crm/lookup_contact`",
                "f.yaml: order.tools[2]: unknown integration `sms`",
                "f.yaml: side_effects.forbidden[0]: unknown operation `billing/refund` (no integration `billing`)",
                "f.yaml: side_effects.max_writes.erp: unknown integration `erp`",
            ]
        );
        let c = parse("c.yaml", "version: 1\nid: c\ntool: crm/nope\npreconditions: {required_before: [x/y], forbidden_before: [crm/z]}\n").unwrap();
        let p: Vec<String> = check_contract(&c, "c.yaml", &cat())
            .iter()
            .map(|p| p.path.clone())
            .collect();
        assert_eq!(
            p,
            vec![
                "tool",
                "preconditions.required_before[0]",
                "preconditions.forbidden_before[0]"
            ]
        );
    }

    #[test]
    fn argument_paths_the_schema_forbids() {
        let c = parse(
            "c.yaml",
            "version: 1\nid: c\ntool: crm/book_appointment\narguments:\n  required: [Contact__c, Contact_Id]\n  forbidden: [payment.card_number, payment.anything.deep]\n  values: {slots.0.id: {equals: 1}, slots.0.name: {equals: 1}}\n  sources: {Nope: {event: e, path: x}}\n",
        )
        .unwrap();
        let p = check_contract(&c, "c.yaml", &cat());
        let got: Vec<(&str, bool)> = p
            .iter()
            .map(|p| {
                (
                    p.path.as_str(),
                    p.message.contains("additionalProperties is false"),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("arguments.required[1]", true),
                ("arguments.sources.Nope", true),
                ("arguments.values.slots.0.name", true),
            ],
            "{p:?}"
        );
        assert!(p[2].message.contains("at `slots.0`"), "{}", p[2]);
        assert!(p[0].to_string().starts_with("c.yaml: arguments.required[1]: the input schema of crm/book_appointment does not allow `Contact_Id`"), "{}", p[0]);
    }

    #[test]
    fn schema_walk_only_reports_what_it_proves() {
        let allows =
            |s: Value, p: &str| schema_allows(&s, &VPath::parse(p, false).unwrap()).is_ok();
        assert!(allows(json!({}), "a.b"));
        assert!(allows(json!({"additionalProperties": true}), "a"));
        assert!(!allows(json!({"additionalProperties": false}), "a"));
        assert!(allows(
            json!({"additionalProperties": false, "patternProperties": {"^a": {}}}),
            "a"
        ));
        assert!(allows(
            json!({"additionalProperties": false, "anyOf": []}),
            "a"
        ));
        assert!(!allows(
            json!({"additionalProperties": {"additionalProperties": false}}),
            "a.b"
        ));
        assert!(allows(
            json!({"additionalProperties": {"type": "object"}}),
            "a.b"
        ));
        assert!(!allows(json!({"properties": {"a": false}}), "a.b"));
        assert!(allows(json!(true), "a"));
    }
}
