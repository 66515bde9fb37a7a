//! OpenAPI schemas as JSON Schema 2020-12: local `$ref`s followed (bounded), OpenAPI-only
//! keywords (`nullable`, `example`, …) converted, what cannot be converted noted.

use super::Cx;
use crate::author::import::normalise_id;
use crate::mock::path::pointer_push;
use serde_json::{json, Map, Value};

impl Cx<'_> {
    /// A parameter / request body / response object with a local `$ref` followed.
    pub(super) fn follow(&mut self, v: &Value, at: &str) -> Option<Value> {
        let mut cur = v.clone();
        for _ in 0..16 {
            let Some(r) = cur.get("$ref").and_then(Value::as_str) else {
                return Some(cur);
            };
            match r.strip_prefix('#').and_then(|p| self.doc.pointer(p)) {
                Some(t) => cur = t.clone(),
                None => {
                    self.note(
                        at,
                        format!(
                            "`$ref` `{r}` cannot be resolved (only local `#/…` references are)"
                        ),
                    );
                    return None;
                }
            }
        }
        self.note(at, "`$ref` chain too long");
        None
    }

    /// A schema with every local `$ref` inlined and 3.0 keywords converted (module doc).
    pub(super) fn schema(&mut self, s: &Value, at: &str) -> Value {
        let mut defs = Map::new();
        let mut stack = Vec::new();
        let mut out = self.schema_in(s, at, &mut stack, &mut defs);
        if !defs.is_empty() {
            if let Value::Object(m) = &mut out {
                m.insert("$defs".into(), Value::Object(defs));
            } else {
                out = json!({"allOf": [out], "$defs": defs});
            }
        }
        out
    }

    pub(super) fn schema_in(
        &mut self,
        s: &Value,
        at: &str,
        stack: &mut Vec<String>,
        defs: &mut Map<String, Value>,
    ) -> Value {
        match s {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                    let Some(target) = r.strip_prefix('#').and_then(|p| self.doc.pointer(p)) else {
                        self.note(
                            at,
                            format!("`$ref` `{r}` cannot be resolved (only local `#/…` references are): the schema there accepts anything"),
                        );
                        return json!({});
                    };
                    let name = normalise_id(r.rsplit('/').next().unwrap_or("ref"));
                    if stack.iter().any(|x| x == r) {
                        // A recursive schema: keep it as a `$defs` reference.
                        if !defs.contains_key(&name) {
                            defs.insert(name.clone(), json!({}));
                            let t = target.clone();
                            let inner = self.schema_in(&t, at, stack, defs);
                            defs.insert(name.clone(), inner);
                        }
                        return json!({"$ref": format!("#/$defs/{name}")});
                    }
                    stack.push(r.to_string());
                    let t = target.clone();
                    let mut inner = self.schema_in(&t, at, stack, defs);
                    stack.pop();
                    // 3.1 allows siblings of `$ref`: they add to the target.
                    if let Value::Object(im) = &mut inner {
                        for (k, v) in m {
                            if k != "$ref" {
                                let v = self.schema_in(v, &format!("{at}/{k}"), stack, defs);
                                im.insert(k.clone(), v);
                            }
                        }
                    }
                    return inner;
                }
                let mut out = Map::new();
                for (k, v) in m {
                    let sub = format!("{at}/{k}");
                    let v = match k.as_str() {
                        "properties" | "patternProperties" | "$defs" | "definitions"
                        | "dependentSchemas" => match v {
                            Value::Object(p) => Value::Object(
                                p.iter()
                                    .map(|(n, s)| {
                                        (
                                            n.clone(),
                                            self.schema_in(s, &pointer_push(&sub, n), stack, defs),
                                        )
                                    })
                                    .collect(),
                            ),
                            other => other.clone(),
                        },
                        "items"
                        | "additionalProperties"
                        | "not"
                        | "if"
                        | "then"
                        | "else"
                        | "contains"
                        | "propertyNames"
                        | "unevaluatedItems"
                        | "unevaluatedProperties"
                        | "additionalItems" => match v {
                            Value::Array(a) => Value::Array(
                                a.iter()
                                    .enumerate()
                                    .map(|(i, s)| {
                                        self.schema_in(s, &format!("{sub}/{i}"), stack, defs)
                                    })
                                    .collect(),
                            ),
                            Value::Object(_) => self.schema_in(v, &sub, stack, defs),
                            other => other.clone(),
                        },
                        "allOf" | "anyOf" | "oneOf" | "prefixItems" => match v {
                            Value::Array(a) => Value::Array(
                                a.iter()
                                    .enumerate()
                                    .map(|(i, s)| {
                                        self.schema_in(s, &format!("{sub}/{i}"), stack, defs)
                                    })
                                    .collect(),
                            ),
                            other => other.clone(),
                        },
                        _ => v.clone(),
                    };
                    out.insert(k.clone(), v);
                }
                self.convert(&mut out);
                Value::Object(out)
            }
            other => other.clone(),
        }
    }

    /// OpenAPI-only schema keywords → 2020-12.
    pub(super) fn convert(&self, m: &mut Map<String, Value>) {
        if let Some(ex) = m.remove("example") {
            if !m.contains_key("examples") {
                m.insert("examples".into(), json!([ex]));
            }
        }
        for k in ["discriminator", "xml", "externalDocs"] {
            m.remove(k);
        }
        if self.v30 {
            if m.remove("nullable") == Some(Value::Bool(true)) {
                match m.get("type").cloned() {
                    Some(Value::String(t)) => {
                        m.insert("type".into(), json!([t, "null"]));
                    }
                    Some(Value::Array(mut a)) => {
                        if !a.contains(&json!("null")) {
                            a.push(json!("null"));
                        }
                        m.insert("type".into(), Value::Array(a));
                    }
                    _ => {}
                }
                if let Some(Value::Array(e)) = m.get_mut("enum") {
                    if !e.contains(&Value::Null) {
                        e.push(Value::Null);
                    }
                }
            }
            for (ex, bound) in [
                ("exclusiveMinimum", "minimum"),
                ("exclusiveMaximum", "maximum"),
            ] {
                if let Some(Value::Bool(b)) = m.get(ex).cloned() {
                    m.remove(ex);
                    if b {
                        if let Some(n) = m.remove(bound) {
                            m.insert(ex.into(), n);
                        }
                    }
                }
            }
        }
    }
}
