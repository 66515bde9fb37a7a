//! The version-1 definition of one drafted operation: inputs told apart by the top-level
//! members that vary, one variant per outcome class (and `recorded` when there are several),
//! the same input answered differently over time as a state sequence, and the examples.

use super::answers::same_answer;
use super::ctx::{Ctx, Sample};
use super::limits::cap_examples;
use crate::contract::hash::canonical_json;
use crate::mock::model::{
    limits, Condition, Definition, Example, Op, Rule, Source, Variant, RESPONSE_MEMBER,
};
use crate::mock::path::json_equal;
use crate::util::scrub::SCRUBBED;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

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
pub(super) fn build_definition(
    id: &str,
    samples: &[Sample],
    ctx: &Ctx<'_>,
    notes: &mut Vec<String>,
) -> Definition {
    // Identities.
    let mut idents: Vec<Ident> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    for (i, s) in samples.iter().enumerate() {
        let proj = projection(&s.input);
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
            .map(|k| {
                let (source, path) = match k.strip_prefix(RESPONSE_KEY_PREFIX) {
                    Some(p) => (Source::Response, p.to_string()),
                    None => (Source::Input, (*k).clone()),
                };
                match d.proj.get(*k) {
                    Some(v) => Condition {
                        source,
                        path,
                        op: Op::Eq,
                        value: Some(v.clone()),
                    },
                    None => Condition {
                        source,
                        path,
                        op: Op::Exists,
                        value: Some(Value::Bool(false)),
                    },
                }
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
    // Each rule with the sample it answers (for its notifications, set at the end).
    let mut rules: Vec<(Rule, usize)> = Vec::new();
    let mut examples: Vec<Example> = Vec::new();
    let mut main_result = samples[0].answer.clone();
    let mut main_si = 0usize;
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
            if !when.is_empty() && !same_sample(&samples[st[0]], &samples[main_si]) {
                rules.push((answer_rule(when, answer.clone()), st[0]));
            }
            examples.push(example(
                main_name.clone(),
                d.input.clone(),
                answer.clone(),
                None,
            ));
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
                rules.push((
                    Rule {
                        fault: None,
                        notifications: None,
                        when: w,
                        result: Some(answer.clone()),
                        set_state: Some(set),
                        delay_ms: None,
                    },
                    si,
                ));
            } else if when.is_empty() {
                main_result = answer.clone();
                main_si = si;
            } else {
                rules.push((answer_rule(when.clone(), answer.clone()), si));
            }
            examples.push(example(
                main_name.clone(),
                d.input.clone(),
                answer,
                Some(Map::from_iter([(counter.clone(), json!(k))])),
            ));
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
        variant(main_result, rules, main_si, samples),
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
            let Some(first_si) = samples.iter().position(|s| s.class == c.key) else {
                continue;
            };
            let fallback = samples[first_si].answer.clone();
            let mut rules = Vec::new();
            let mut left_out = 0usize;
            for d in &idents {
                let Some(&si) = d.answers.iter().find(|&&i| samples[i].class == c.key) else {
                    continue;
                };
                let answer = &samples[si].answer;
                let when = conds(d);
                if !when.is_empty() && !same_sample(&samples[si], &samples[first_si]) {
                    if rules.len() >= limits::MAX_RULES {
                        left_out += 1;
                        continue;
                    }
                    rules.push((answer_rule(when, answer.clone()), si));
                }
                examples.push(example(
                    c.name.clone(),
                    d.input.clone(),
                    answer.clone(),
                    None,
                ));
            }
            if left_out > 0 {
                ctx.note(
                    notes,
                    id,
                    format!("{left_out} recorded input(s) left out of variant `{}`: at most {} rules per variant", c.name, limits::MAX_RULES),
                );
            }
            variants.insert(c.name.clone(), variant(fallback, rules, first_si, samples));
        }
    }

    cap_examples(&mut examples, id, ctx, notes);
    Definition {
        contract_hash: None,
        schema_version: 1,
        default_variant: main_name,
        initial_state: (!initial_state.is_empty()).then_some(initial_state),
        variants,
        examples,
    }
}

/// Input members told apart as `source: "response"` (the client's answer, docs/src/reference/mcp.md): the
/// projection's key of answer member `k` is this prefix + `k`.
const RESPONSE_KEY_PREFIX: &str = "$response.";

/// The addressable, secret-free top-level members of an input; the client's answer
/// (`$response`) by its own top-level members.
fn projection(input: &Value) -> Map<String, Value> {
    let usable = |k: &String, v: &Value| !k.is_empty() && !k.contains('.') && !holds_scrubbed(v);
    let mut out = Map::new();
    for (k, v) in input.as_object().into_iter().flatten() {
        if k == RESPONSE_MEMBER {
            for (rk, rv) in v.as_object().into_iter().flatten() {
                if usable(rk, rv) {
                    out.insert(format!("{RESPONSE_KEY_PREFIX}{rk}"), rv.clone());
                }
            }
        } else if usable(k, v) {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// Equal as what a call gets: the answer and the notifications before it.
fn same_sample(a: &Sample, b: &Sample) -> bool {
    a.answer == b.answer && a.notifications == b.notifications
}

/// A variant answering `result` (the answer of sample `main`), its rules carrying their own
/// notifications where they differ from the variant's; MCP: the client is asked what the
/// samples asked (they all ask the same, or nothing).
fn variant(result: Value, rules: Vec<(Rule, usize)>, main: usize, samples: &[Sample]) -> Variant {
    let own = &samples[main].notifications;
    let rules = rules
        .into_iter()
        .map(|(mut r, si)| {
            if samples[si].notifications != *own {
                r.notifications = Some(samples[si].notifications.clone().unwrap_or_default());
            }
            r
        })
        .collect();
    Variant {
        fault: None,
        notifications: own.clone(),
        ask_client: samples[main].ask.clone(),
        result,
        set_state: None,
        delay_ms: None,
        rules,
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

/// A rule answering `result` when `when` holds, changing nothing else.
fn answer_rule(when: Vec<Condition>, result: Value) -> Rule {
    Rule {
        fault: None,
        notifications: None,
        when,
        result: Some(result),
        set_state: None,
        delay_ms: None,
    }
}

fn example(
    variant: String,
    input: Value,
    expected: Value,
    state: Option<Map<String, Value>>,
) -> Example {
    Example {
        variant,
        input,
        expected,
        state,
    }
}
