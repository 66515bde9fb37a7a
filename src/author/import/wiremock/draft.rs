//! WireMock stubs grouped into operations and each group drafted as one operation file:
//! a variant per response, `rules` for the request conditions, scenarios as state.

use super::Stub;
use crate::author::import::{capture_name, normalise_id, rehash, Draft, Note};
use crate::contract::ProfileKind;
use crate::contract::{CompiledMatch, MatchSpec, OperationFile};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub(super) fn group(stubs: Vec<Stub>, profile: ProfileKind, notes: &mut Vec<Note>) -> Vec<Draft> {
    let mut groups: BTreeMap<(String, String), Vec<Stub>> = BTreeMap::new();
    for s in stubs {
        groups
            .entry((s.method.clone(), s.path.clone()))
            .or_default()
            .push(s);
    }
    let mut drafts = Vec::new();
    let mut best_priority: Vec<(CompiledMatch, i64, String)> = Vec::new();
    for ((method, path), mut list) in groups {
        // WireMock's order: lowest priority number first, then the newest mapping.
        list.sort_by_key(|s| (s.priority, -s.insertion));
        let d = draft(&method, &path, &list, profile, notes);
        if let Some(m) =
            d.op.match_spec
                .as_ref()
                .and_then(|m| CompiledMatch::compile(m).ok())
        {
            best_priority.push((m, list[0].priority, d.op.operation_id.clone()));
        }
        drafts.push(d);
    }
    // understudy picks the most specific match; WireMock the lowest priority.
    for (i, (a, pa, ida)) in best_priority.iter().enumerate() {
        for (b, pb, idb) in &best_priority[i + 1..] {
            if a.method() != b.method() || !a.may_overlap(b) {
                continue;
            }
            let (sa, sb) = (a.specificity(), b.specificity());
            let (pref, other, pp, po) = if sa >= sb {
                (ida, idb, pa, pb)
            } else {
                (idb, ida, pb, pa)
            };
            if pp > po {
                notes.push(Note::new(
                    Path::new(ida),
                    "",
                    format!(
                        "priority: WireMock tries `{other}` first (priority {po}) but understudy picks the more specific `{pref}` (priority {pp}) for a request both match"
                    ),
                ));
            }
        }
    }
    drafts
}

fn draft(
    method: &str,
    path: &str,
    list: &[Stub],
    profile: ProfileKind,
    notes: &mut Vec<Note>,
) -> Draft {
    let id = normalise_id(&format!("{} {}", method.to_ascii_lowercase(), path));
    // Query: one literal everywhere → match literal; in every mapping, varying → capture.
    let mut query = BTreeMap::new();
    let mut captured: BTreeSet<String> = BTreeSet::new();
    let names: BTreeSet<&String> = list.iter().flat_map(|s| s.query.keys()).collect();
    for n in names {
        let vals: BTreeSet<Option<&String>> = list.iter().map(|s| s.query.get(n)).collect();
        if vals.contains(&None) {
            for s in list.iter().filter(|s| s.query.contains_key(n)) {
                notes.push(Note::new(
                    &s.file,
                    "request/queryParameters",
                    format!(
                        "`{n}` is matched by only some mappings of {method} {path}: not matched"
                    ),
                ));
            }
        } else if vals.len() == 1 {
            query.insert(n.clone(), list[0].query[n].clone());
        } else {
            let c = capture_name(n);
            query.insert(n.clone(), format!("{{{c}}}"));
            captured.insert(n.clone());
        }
    }
    let mut headers = BTreeMap::new();
    let hnames: BTreeSet<&String> = list.iter().flat_map(|s| s.headers.keys()).collect();
    for n in hnames {
        let vals: BTreeSet<Option<&String>> = list.iter().map(|s| s.headers.get(n)).collect();
        if vals.len() == 1 && !vals.contains(&None) {
            headers.insert(n.clone(), list[0].headers[n].clone());
        } else {
            notes.push(Note::new(
                &list[0].file,
                "request/headers",
                format!("`{n}` differs between the mappings of {method} {path} (a match header is a literal): not matched"),
            ));
        }
    }
    let inputs: Vec<Map<String, Value>> = list
        .iter()
        .map(|s| {
            let mut m = Map::new();
            for n in &captured {
                m.insert(capture_name(n), Value::String(s.query[n].clone()));
            }
            for (k, v) in &s.body {
                m.insert(k.clone(), v.clone());
            }
            m
        })
        .collect();
    let mut initial_state = Map::new();
    let mut rules = Vec::new();
    let mut fallback: Option<(usize, Value)> = None;
    let mut conds_of = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let mut when: Vec<Value> = inputs[i]
            .iter()
            .map(|(k, v)| json!({"source": "input", "path": k, "op": "eq", "value": v}))
            .collect();
        if let Some(key) = &s.scenario {
            initial_state.insert(key.clone(), json!("Started"));
            if let Some(r) = &s.required {
                when.push(json!({"source": "state", "path": key, "op": "eq", "value": r}));
            }
        }
        conds_of.push(when.clone());
        let mut rule = json!({ "result": s.result });
        if let (Some(key), Some(n)) = (&s.scenario, &s.new_state) {
            rule["set_state"] = json!({ key: n });
        }
        if let Some(d) = s.delay_ms {
            rule["delay_ms"] = json!(d);
        }
        if fallback.is_some() {
            notes.push(Note::new(
                &s.file,
                "",
                format!("{}: never answers: an earlier mapping of {method} {path} matches every request it would", s.at),
            ));
            continue;
        }
        if when.is_empty() {
            fallback = Some((i, rule));
        } else {
            rule["when"] = Value::Array(when);
            rules.push((i, rule));
        }
    }
    let mut variant = match &fallback {
        Some((_, r)) => r.clone(),
        None => json!({ "result": { "status": 404, "data": {
            "message": "No response could be served: no WireMock stub mapping matched this request" } } }),
    };
    if !rules.is_empty() {
        variant["rules"] = Value::Array(rules.iter().map(|(_, r)| r.clone()).collect());
    }
    // Examples: each reachable mapping's input and required state; the expected answer is
    // the first rule whose conditions hold (as the engine decides).
    let mut examples = Vec::new();
    let reachable: Vec<usize> = rules
        .iter()
        .map(|(i, _)| *i)
        .chain(fallback.iter().map(|(i, _)| *i))
        .collect();
    for &i in &reachable {
        let s = &list[i];
        let mut state = initial_state.clone();
        if let (Some(k), Some(r)) = (&s.scenario, &s.required) {
            state.insert(k.clone(), json!(r));
        }
        let input = Value::Object(inputs[i].clone());
        let winner = rules
            .iter()
            .find(|(j, _)| holds(&conds_of[*j], &input, &state))
            .map(|(j, _)| *j)
            .or(fallback.as_ref().map(|(j, _)| *j));
        if winner != Some(i) {
            notes.push(Note::new(
                &s.file,
                "",
                format!("{}: shadowed by an earlier mapping of {method} {path} (WireMock's priority order) for the same request", s.at),
            ));
        }
        let expected = winner
            .map(|j| list[j].result.clone())
            .unwrap_or_else(|| variant["result"].clone());
        let mut ex = json!({"variant": "default", "input": input, "expected": expected});
        if s.required.is_some() {
            ex["state"] = Value::Object(state);
        }
        examples.push(ex);
    }
    if examples.is_empty() {
        examples.push(json!({"variant": "default", "input": {}, "expected": variant["result"]}));
    }
    let mut mock = json!({
        "schema_version": 1,
        "default_variant": "default",
        "variants": { "default": variant },
        "examples": examples,
    });
    if !initial_state.is_empty() {
        mock["initial_state"] = Value::Object(initial_state);
    }
    let props: Map<String, Value> = inputs
        .iter()
        .flat_map(|m| m.keys())
        .map(|k| {
            let schema = if captured.iter().any(|c| capture_name(c) == *k) {
                json!({"type": "string"})
            } else {
                json!({})
            };
            (k.clone(), schema)
        })
        .collect();
    let required: Vec<Value> = captured.iter().map(|c| json!(capture_name(c))).collect();
    let mut op = OperationFile {
        operation_id: id,
        description: Some(format!("Imported from WireMock: {method} {path}")),
        title: None,
        match_spec: Some(MatchSpec {
            method: method.to_string(),
            path: path.to_string(),
            query,
            headers,
            body: None,
        }),
        write: None,
        input_schema: json!({"type": "object", "properties": props, "required": required}).into(),
        output_schema: json!({
            "type": "object", "required": ["status"],
            "properties": {"status": {"type": "integer"}, "headers": {"type": "object"}}
        })
        .into(),
        idempotency: None,
        annotations: None,
        result_form: None,
        mock: Some(mock.into()),
    };
    rehash(&mut op, profile);
    Draft {
        op,
        sources: list.iter().map(|s| s.at.clone()).collect(),
        reasons: Vec::new(),
    }
}

fn holds(conds: &[Value], input: &Value, state: &Map<String, Value>) -> bool {
    conds.iter().all(|c| {
        let key = c["path"].as_str().unwrap_or_default();
        let v = if c["source"] == "state" {
            state.get(key)
        } else {
            input.get(key)
        };
        v.is_some_and(|v| crate::mock::path::json_equal(v, &c["value"]))
    })
}
