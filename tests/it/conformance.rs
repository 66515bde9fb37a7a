//! Conformance vectors of the version-1 definition engine (docs/src/reference/mock-definition.md), and property tests
//! of `$number` and `$dateAdd` against independent oracles (Rust's f64/integer parsing, chrono).
//!
//! Every `tests/conformance/*.json` file is
//! `{"description", "vectors": [{"name", "definition", "compile_error"?, "calls": [call…]}]}`
//! where a call is `{"input", "variant"?, "state"?, "expect": {…}}`:
//! - `state` is the pre-call state; when absent, the state carried from the previous call of the
//!   same vector (starting from the definition's `initial_state`). After a successful call the
//!   outcome's `state_patch` is applied key by key; a failed call changes nothing.
//! - `expect` may hold `result`, `state_after` (the whole state after the call), `rule` (index or
//!   null), `variant`, `delay_ms`, `error_kind` (`input_error` | `harness_error`), `error_code`
//!   (`CallError::to_json()["code"]`, `input_error` for input errors) and `error_path`. Only the
//!   keys present are compared; a call without `error_kind` must succeed.
//! - `compile_error` (`{"code", "path"?, "count"?}`) says `Engine::new` must refuse the
//!   definition; `count` is the number of problems `compile_problems` must list. Calls of such a
//!   vector are compared against the compile error, as the call would fail with it.
//!
//! Results compare with exact JSON equality (`7` is not `7.0`), so type preservation is tested.
//! The runner reports every failure (vector name and what differed) before panicking.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use understudy::error::CallError;
use understudy::mock::eval::compile_problems;
use understudy::mock::{Definition, Engine};

fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

fn vector_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(conformance_dir())
        .expect("tests/conformance exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

fn load(file: &Path) -> Value {
    let text = std::fs::read_to_string(file).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

const EXPECT_KEYS: &[&str] = &[
    "result",
    "state_after",
    "rule",
    "variant",
    "delay_ms",
    "error_kind",
    "error_code",
    "error_path",
];

/// Compare the expected error fields with an actual error; push differences.
fn compare_error(expect: &Map<String, Value>, err: &CallError, diffs: &mut Vec<String>) {
    let actual = err.to_json();
    let pairs = [
        ("error_kind", json!(err.kind())),
        ("error_code", actual["code"].clone()),
        ("error_path", actual["path"].clone()),
    ];
    for (key, got) in pairs {
        if let Some(want) = expect.get(key) {
            if *want != got {
                diffs.push(format!("{key}: expected {want}, got {got}"));
            }
        }
    }
    if !expect.contains_key("error_kind") {
        diffs.push(format!("expected success, got {}: {}", err.kind(), actual));
    }
    for key in ["result", "rule", "variant", "delay_ms"] {
        if expect.contains_key(key) {
            diffs.push(format!("expected `{key}` but the call failed: {actual}"));
        }
    }
}

/// Run one vector; return its failures as messages.
fn run_vector(v: &Value) -> Vec<String> {
    let mut failures = Vec::new();
    let def_value = &v["definition"];
    let def = match Definition::from_value(def_value) {
        Ok(d) => d,
        Err(e) => return vec![format!("definition does not parse: {e}")],
    };
    let problems = compile_problems(&def);
    let compiled = Engine::new(def);
    let want_compile = v.get("compile_error");
    let engine = match (compiled, want_compile) {
        (Ok(engine), None) => {
            if !problems.is_empty() {
                failures.push(format!(
                    "compile_problems not empty for a good definition: {problems:?}"
                ));
            }
            Some(engine)
        }
        (Ok(_), Some(want)) => {
            failures.push(format!(
                "Engine::new accepted the definition; expected {want}"
            ));
            return failures;
        }
        (Err(err), want) => {
            let Some(want) = want else {
                failures.push(format!("Engine::new failed: {err}"));
                return failures;
            };
            let got = err.to_json();
            if want["code"] != got["code"] {
                failures.push(format!(
                    "compile error code: expected {}, got {}",
                    want["code"], got["code"]
                ));
            }
            if let Some(path) = want.get("path") {
                if *path != got["path"] {
                    failures.push(format!(
                        "compile error path: expected {path}, got {}",
                        got["path"]
                    ));
                }
            }
            if let Some(count) = want.get("count") {
                if *count != json!(problems.len()) {
                    failures.push(format!(
                        "compile_problems: expected {count} problems, got {}: {problems:?}",
                        problems.len()
                    ));
                }
            }
            if let CallError::Harness(first) = &err {
                if problems.first() != Some(first) {
                    failures
                        .push("compile_problems does not start with Engine::new's error".into());
                }
            }
            for (i, call) in v["calls"].as_array().into_iter().flatten().enumerate() {
                let expect = call["expect"].as_object().cloned().unwrap_or_default();
                let mut diffs = Vec::new();
                compare_error(&expect, &err, &mut diffs);
                failures.extend(diffs.into_iter().map(|d| format!("call {i}: {d}")));
            }
            None
        }
    };
    let Some(engine) = engine else {
        return failures;
    };

    let mut state = engine.initial_state();
    let calls = v["calls"].as_array().cloned().unwrap_or_default();
    if calls.is_empty() {
        failures.push("vector has no calls".into());
    }
    for (i, call) in calls.iter().enumerate() {
        let Some(expect) = call["expect"].as_object() else {
            failures.push(format!("call {i}: no `expect` object"));
            continue;
        };
        for k in expect.keys() {
            if !EXPECT_KEYS.contains(&k.as_str()) {
                failures.push(format!("call {i}: unknown expect key `{k}`"));
            }
        }
        if let Some(s) = call.get("state") {
            match s.as_object() {
                Some(m) => state = m.clone(),
                None => failures.push(format!("call {i}: `state` is not an object")),
            }
        }
        let input = call.get("input").cloned().unwrap_or_else(|| json!({}));
        let variant = call.get("variant").and_then(Value::as_str);
        let mut diffs = Vec::new();
        match engine.evaluate(variant, &input, &state) {
            Ok(out) => {
                if let Some(kind) = expect.get("error_kind") {
                    diffs.push(format!(
                        "expected {kind} {}, got success with result {}",
                        expect.get("error_code").unwrap_or(&Value::Null),
                        out.result
                    ));
                }
                let got_rule = out.rule.map_or(Value::Null, |r| json!(r));
                let checks = [
                    ("result", out.result.clone()),
                    ("rule", got_rule),
                    ("variant", json!(out.variant)),
                    ("delay_ms", json!(out.delay_ms)),
                ];
                for (key, got) in checks {
                    if let Some(want) = expect.get(key) {
                        if *want != got {
                            diffs.push(format!("{key}: expected {want}, got {got}"));
                        }
                    }
                }
                for (k, val) in out.state_patch {
                    state.insert(k, val);
                }
            }
            Err(err) => compare_error(expect, &err, &mut diffs),
        }
        if let Some(want) = expect.get("state_after") {
            let got = Value::Object(state.clone());
            if *want != got {
                diffs.push(format!("state_after: expected {want}, got {got}"));
            }
        }
        failures.extend(diffs.into_iter().map(|d| format!("call {i}: {d}")));
    }
    failures
}

#[test]
fn every_conformance_vector_passes() {
    let mut failures = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for file in vector_files() {
        let doc = load(&file);
        let fname = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(doc["description"].is_string(), "{fname}: no description");
        for v in doc["vectors"].as_array().expect("vectors array") {
            let name = v["name"].as_str().unwrap_or("<unnamed>").to_string();
            if !names.insert(name.clone()) {
                failures.push(format!("{fname}: duplicate vector name `{name}`"));
            }
            for f in run_vector(v) {
                failures.push(format!("{fname} / {name}: {f}"));
            }
        }
    }
    if !failures.is_empty() {
        panic!(
            "{} conformance failure(s):\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

#[test]
fn there_are_enough_vectors() {
    let count: usize = vector_files()
        .iter()
        .map(|f| load(f)["vectors"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(count >= 90, "only {count} conformance vectors");
}

// ---------------------------------------------------------------------------------------------
// Property tests

fn engine(result: Value) -> Engine {
    let def =
        json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {"result": result}}});
    Engine::new(Definition::from_value(&def).unwrap()).unwrap()
}

fn number_engine() -> Engine {
    engine(json!({"$number": {"$input": "x"}}))
}

/// The decimal grammar `-?[0-9]+(\.[0-9]+)?`, written independently of the engine's scanner.
fn is_decimal(s: &str) -> bool {
    let body = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    digits(int) && frac.is_none_or(digits)
}

/// What the string must become: an exact integer when it has no fraction and fits 64 bits,
/// else the f64 Rust parses (None when not finite).
fn oracle(s: &str) -> Option<Value> {
    if !s.contains('.') {
        if let Ok(i) = s.parse::<i64>() {
            return Some(json!(i));
        }
        if let Ok(u) = s.parse::<u64>() {
            return Some(json!(u));
        }
    }
    let f: f64 = s.parse().unwrap();
    f.is_finite().then(|| json!(f))
}

fn decimal_strategy() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        "[0-9]{1,25}",
        proptest::option::of("[0-9]{1,20}"),
    )
        .prop_map(|(neg, int, frac)| {
            let mut s = String::new();
            if neg {
                s.push('-');
            }
            s.push_str(&int);
            if let Some(f) = frac {
                s.push('.');
                s.push_str(&f);
            }
            s
        })
}

fn near_decimal_strategy() -> impl Strategy<Value = String> {
    // Arbitrary strings, plus strings made of the characters that almost spell numbers.
    prop_oneof![
        any::<String>(),
        "[-+.0-9eExXaAnNfiIty \t]{0,12}",
        "[ \t\n]?-?[0-9]{0,3}[.]?[0-9]{0,3}[ \t\ne]?",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn number_round_trips_every_decimal(s in decimal_strategy()) {
        let out = number_engine().evaluate(None, &json!({"x": s}), &Map::new());
        match oracle(&s) {
            Some(want) => prop_assert_eq!(out.unwrap().result, want),
            None => prop_assert!(matches!(out, Err(CallError::Input(_)))),
        }
    }

    /// Arbitrary and near-miss strings: accepted exactly when they match the grammar.
    #[test]
    fn number_accepts_exactly_the_grammar(s in near_decimal_strategy()) {
        let out = number_engine().evaluate(None, &json!({"x": s}), &Map::new());
        match (is_decimal(&s), out) {
            (true, out) => match oracle(&s) {
                Some(want) => prop_assert_eq!(out.unwrap().result, want),
                None => prop_assert!(matches!(out, Err(CallError::Input(_)))),
            },
            (false, Err(CallError::Input(e))) => prop_assert_eq!(e.path.as_deref(), Some("x")),
            (false, other) => prop_assert!(false, "{:?} accepted: {:?}", s, other),
        }
    }

    #[test]
    fn date_add_agrees_with_chrono(
        day in 1i32..=3_652_059,
        days in -3660i64..=3660,
        hours in -24i64..=24,
        offset_min in -(23i32 * 60 + 59)..=(23 * 60 + 59),
        with_time in any::<bool>(),
        secs in 0u32..86_400,
    ) {
        use chrono::{Datelike, NaiveDate, TimeDelta, FixedOffset, TimeZone};
        // `day` spans 0001-01-01 ..= 9999-12-31 (days from the common era).
        let date = NaiveDate::from_num_days_from_ce_opt(day).unwrap();
        let (text, utc_date) = if with_time {
            let offset = FixedOffset::east_opt(offset_min * 60).unwrap();
            let local = date.and_hms_opt(secs / 3600, secs / 60 % 60, secs % 60).unwrap();
            let dt = offset.from_local_datetime(&local).unwrap();
            let sign = if offset_min < 0 { '-' } else { '+' };
            let text = format!(
                "{}{}{:02}:{:02}",
                local.format("%Y-%m-%dT%H:%M:%S"),
                sign,
                offset_min.abs() / 60,
                offset_min.abs() % 60
            );
            (text, dt.naive_utc().date())
        } else {
            (date.format("%Y-%m-%d").to_string(), date)
        };
        // The oracle: chrono's own day/hour arithmetic on the UTC midnight.
        let want = utc_date
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .checked_add_signed(TimeDelta::days(days))
            .and_then(|t| t.checked_add_signed(TimeDelta::hours(hours)))
            .filter(|t| (1..=9999).contains(&t.year()))
            .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
        let e = engine(json!({"$dateAdd": {"value": {"$input": "d"}, "days": days, "hours": hours}}));
        let got = e.evaluate(None, &json!({"d": text}), &Map::new());
        match want.clone() {
            Some(w) => prop_assert_eq!(got.unwrap().result, json!(w), "{}", text),
            None => prop_assert!(matches!(got, Err(CallError::Input(_))), "{} {:?}", text, got),
        }
        // The same date as a literal folds at compile time to the same answer, or is refused.
        let def = json!({"schema_version": 1, "default_variant": "v", "variants": {"v": {
            "result": {"$dateAdd": {"value": text, "days": days, "hours": hours}}}}});
        let lit = Engine::new(Definition::from_value(&def).unwrap());
        match (lit, want.map(Value::String)) {
            (Ok(e), Some(w)) => prop_assert_eq!(e.evaluate(None, &json!({}), &Map::new()).unwrap().result, w),
            (Err(CallError::Harness(h)), None) => prop_assert_eq!(h.code.as_str(), "invalid_fixture_literal"),
            (other, w) => prop_assert!(false, "literal {} gave {:?}, reference gave {:?}", text, other.map(|_| ()), w),
        }
    }
}
