//! References and expressions of docs/src/reference/mock-definition.md#rendering-expressions — `$input`, `$state`, `$number`, `$dateAdd` — compiled
//! once into a [`Template`] tree, then rendered per call without parsing anything.
//!
//! # What is an expression
//! An object is an expression only when it has exactly one member and that member's name is
//! `$input`, `$state`, `$number` or `$dateAdd`. Such an object must be well formed, or the
//! definition is rejected with `invalid_fixture_literal` at the expression's JSON path
//! (`{"$input": 3}`, `{"$dateAdd": {"value": …, "weeks": 1}}`). Every other object — one with
//! more members (`{"$input": "a", "note": 1}`), or a single other `$`-name (`{"$ref": "#/x"}`)
//! — is plain data, rendered member by member. Strings are never interpolated.
//!
//! # Literals are settled at compile time
//! `{"$number": "42.50"}` and `{"$dateAdd": {"value": "2024-02-29", "days": 1}}` become constants
//! when the definition is compiled, so a bad literal fails [`Template::compile`] (and `check`)
//! before any call. Only expressions that read `$input`/`$state` do work per call.
//!
//! # `$number` grammar (decision)
//! A JSON number stays as it is. A string must be exactly `-?[0-9]+(\.[0-9]+)?` — no sign `+`,
//! no leading or trailing `.` (`".5"`, `"5."`), no whitespace anywhere, no exponent, no hex, no
//! `NaN`/`Infinity` — and must be finite as an f64. Without a fraction it becomes an integer
//! (`"7"` → `7`; one beyond 64 bits becomes the nearest f64); with one, an f64 (`"42.50"` →
//! `42.5`). Booleans, null, arrays and objects are rejected. Leading zeros are allowed (`"007"`
//! → `7`), as the grammar of docs/src/reference/mock-definition.md allows them.
//!
//! # `$dateAdd` (decision)
//! `value` is `YYYY-MM-DD` or an RFC 3339 date-time (`T` or `t` between date and time, `Z`/`z`
//! or `±HH:MM` offset, optional fraction; no space separator). A date-time is first converted to
//! UTC and its UTC calendar date is used (`2024-03-01T01:00:00+05:00` → 2024-02-29). `days` and
//! `hours` are integer literals (a number with a zero fraction such as `2.0` counts as an
//! integer, as in JSON Schema), |days| ≤ 3660, |hours| ≤ 24, default 0. The result is
//! `YYYY-MM-DDTHH:MM:SSZ` and must lie in the years 1–9999. All calendar arithmetic is chrono's.
//!
//! # Who is at fault
//! A bad value read through `$input` is the caller's: [`CallError::Input`] naming the input path
//! and what was expected. Read through `$state`, or written as a literal, it is the
//! definition's: harness `invalid_fixture_literal`. A reference whose path does not resolve is
//! harness `missing_reference`, wherever it points.

use crate::error::{CallError, HarnessCode, HarnessError, InputError};
use crate::mock::model::{limits, Source};
use crate::mock::path::{pointer_push, DotPath};
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Timelike};
use serde_json::{Map, Number, Value};

/// A compiled piece of a result or of a `set_state` value.
#[derive(Debug, Clone)]
pub enum Template {
    /// A subtree without expressions (or whose expressions were all literals), cloned as is.
    Const(Value),
    /// An object with at least one dynamic member; members in key order.
    Object(Box<[(String, Template)]>),
    /// An array with at least one dynamic element.
    Array(Box<[Template]>),
    /// `{"$input": path}` / `{"$state": path}`.
    Ref(Reference),
    /// `{"$number": reference}`.
    Number(Reference),
    /// `{"$dateAdd": {"value": reference, "days": D, "hours": H}}`.
    DateAdd(DateAdd),
}

/// A compiled `$input`/`$state` reference.
#[derive(Debug, Clone)]
pub struct Reference {
    pub source: Source,
    pub path: DotPath,
    /// JSON path of the reference object inside the definition, for errors.
    pub at: Box<str>,
}

/// A `$dateAdd` whose value is a reference.
#[derive(Debug, Clone)]
pub struct DateAdd {
    pub value: Reference,
    pub days: i64,
    pub hours: i64,
}

const NUMBER_EXPECTED: &str =
    "a JSON number or a decimal string (optional `-`, digits, optional `.` and digits, e.g. \"42.50\")";
const DATE_EXPECTED: &str = "a date `YYYY-MM-DD` or an RFC 3339 date-time";

fn literal_problem(at: impl Into<String>, message: impl Into<String>) -> HarnessError {
    HarnessError::new(HarnessCode::InvalidFixtureLiteral, message).at(at)
}

/// Short JSON text of a value for messages (at most ~80 characters).
pub(crate) fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 80 {
        s
    } else {
        let cut: String = s.chars().take(77).collect();
        format!("{cut}...")
    }
}

// ---------------------------------------------------------------------------------------------
// $number

/// Parse a `$number` string: exactly `-?[0-9]+(\.[0-9]+)?`, finite. `None` otherwise.
pub fn parse_decimal(s: &str) -> Option<Number> {
    let b = s.as_bytes();
    let digits_from = usize::from(b.first() == Some(&b'-'));
    let int_len = b[digits_from..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    if int_len == 0 {
        return None;
    }
    let rest = &b[digits_from + int_len..];
    if rest.is_empty() {
        // An integer: exact when it fits 64 bits, else the nearest f64.
        if let Ok(i) = s.parse::<i64>() {
            return Some(Number::from(i));
        }
        if digits_from == 0 {
            if let Ok(u) = s.parse::<u64>() {
                return Some(Number::from(u));
            }
        }
    } else if rest[0] != b'.' || rest.len() == 1 || !rest[1..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    // The grammar is a subset of Rust's float syntax; a finite result is the value it spells.
    let f: f64 = s.parse().ok()?;
    Number::from_f64(f)
}

/// What `$number` makes of a value, or `None` when the value is not acceptable.
pub fn number_of(v: &Value) -> Option<Value> {
    match v {
        Value::Number(_) => Some(v.clone()),
        Value::String(s) => parse_decimal(s).map(Value::Number),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// $dateAdd

/// Parse a `$dateAdd` value: `YYYY-MM-DD`, or an RFC 3339 date-time whose UTC calendar date is
/// taken. `None` when it is neither.
pub fn parse_date_value(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    if b.len() < 10 || !is_date_shape(&b[..10]) {
        return None;
    }
    if b.len() == 10 {
        let num = |r: std::ops::Range<usize>| s[r].parse::<u32>().ok();
        return NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?);
    }
    if !is_rfc3339_time_shape(&b[10..]) {
        return None;
    }
    // Shape checked above (chrono alone also takes a space separator and U+2212 in offsets);
    // chrono checks the ranges (month, day, hour, offset < 24 h…) and converts.
    let dt = DateTime::parse_from_rfc3339(s).ok()?;
    Some(dt.naive_utc().date())
}

fn is_date_shape(b: &[u8]) -> bool {
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
}

/// `Thh:mm:ss[.f+](Z|±hh:mm)` (T and Z in either case).
fn is_rfc3339_time_shape(b: &[u8]) -> bool {
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let is = |i: usize, c: u8| b.get(i) == Some(&c);
    if !matches!(b.first(), Some(b'T' | b't')) {
        return false;
    }
    if !(digit(1) && digit(2) && is(3, b':') && digit(4) && digit(5) && is(6, b':'))
        || !(digit(7) && digit(8))
    {
        return false;
    }
    let mut i = 9;
    if is(i, b'.') {
        let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        i += 1 + n;
    }
    match &b[i..] {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

/// Midnight UTC of `date`, plus `days` and `hours`, as `YYYY-MM-DDTHH:MM:SSZ`; `None` when the
/// result leaves the years 1–9999.
pub fn date_add(date: NaiveDate, days: i64, hours: i64) -> Option<String> {
    let delta = TimeDelta::try_days(days)?.checked_add(&TimeDelta::try_hours(hours)?)?;
    let t: NaiveDateTime = date.and_time(NaiveTime::MIN).checked_add_signed(delta)?;
    if !(1..=9999).contains(&t.year()) {
        return None;
    }
    Some(format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    ))
}

// ---------------------------------------------------------------------------------------------
// Compilation

/// The expression a one-member object spells, if any.
fn expression_name(m: &Map<String, Value>) -> Option<(&'static str, &Value)> {
    if m.len() != 1 {
        return None;
    }
    let (k, v) = m.iter().next()?;
    let name = match k.as_str() {
        "$input" => "$input",
        "$state" => "$state",
        "$response" => "$response",
        "$number" => "$number",
        "$dateAdd" => "$dateAdd",
        _ => return None,
    };
    Some((name, v))
}

/// True when `v` contains an expression anywhere (used to reject references in condition
/// values, which are literals).
pub fn contains_expression(v: &Value) -> bool {
    match v {
        Value::Object(m) => expression_name(m).is_some() || m.values().any(contains_expression),
        Value::Array(a) => a.iter().any(contains_expression),
        _ => false,
    }
}

impl Template {
    /// Compile `v`, found at definition path `at`. Problems are pushed to `problems` (all of
    /// them, not only the first); the returned template is then meaningless.
    pub fn compile(v: &Value, at: &str, problems: &mut Vec<HarnessError>) -> Template {
        match v {
            Value::Object(m) => match expression_name(m) {
                Some(("$input", p)) => compile_ref(Source::Input, "$input", p, at, problems)
                    .map_or(Template::Const(Value::Null), Template::Ref),
                Some(("$state", p)) => compile_ref(Source::State, "$state", p, at, problems)
                    .map_or(Template::Const(Value::Null), Template::Ref),
                Some(("$response", p)) => {
                    compile_ref(Source::Response, "$response", p, at, problems)
                        .map_or(Template::Const(Value::Null), Template::Ref)
                }
                Some(("$number", x)) => compile_number(x, at, problems),
                Some((_, x)) => compile_date_add(x, at, problems),
                None => {
                    let members: Vec<(String, Template)> = m
                        .iter()
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                Template::compile(v, &pointer_push(at, k), problems),
                            )
                        })
                        .collect();
                    if members.iter().all(|(_, t)| matches!(t, Template::Const(_))) {
                        Template::Const(Value::Object(
                            members
                                .into_iter()
                                .map(|(k, t)| (k, t.into_const()))
                                .collect(),
                        ))
                    } else {
                        Template::Object(members.into_boxed_slice())
                    }
                }
            },
            Value::Array(a) => {
                let items: Vec<Template> = a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| Template::compile(v, &pointer_push(at, &i.to_string()), problems))
                    .collect();
                if items.iter().all(|t| matches!(t, Template::Const(_))) {
                    Template::Const(Value::Array(
                        items.into_iter().map(Template::into_const).collect(),
                    ))
                } else {
                    Template::Array(items.into_boxed_slice())
                }
            }
            scalar => Template::Const(scalar.clone()),
        }
    }

    fn into_const(self) -> Value {
        match self {
            Template::Const(v) => v,
            _ => unreachable!("into_const on a dynamic template"),
        }
    }

    /// True when rendering needs neither input nor state.
    pub fn is_const(&self) -> bool {
        matches!(self, Template::Const(_))
    }
}

fn compile_ref(
    source: Source,
    name: &str,
    p: &Value,
    at: &str,
    problems: &mut Vec<HarnessError>,
) -> Option<Reference> {
    let Value::String(text) = p else {
        problems.push(literal_problem(
            at,
            format!(
                "`{name}` takes a dot path string such as \"a.b.0\", got {}",
                show(p)
            ),
        ));
        return None;
    };
    match DotPath::parse(text) {
        Ok(path) => Some(Reference {
            source,
            path,
            at: at.into(),
        }),
        Err(why) => {
            problems.push(literal_problem(at, format!("`{name}`: {why}")));
            None
        }
    }
}

/// The `(source, name, path)` of a `{"$input": …}` / `{"$state": …}` object — the only
/// expressions `$number` and `$dateAdd.value` accept as operands.
fn reference_shape(x: &Value) -> Option<(Source, &'static str, &Value)> {
    match x {
        Value::Object(m) => match expression_name(m)? {
            ("$input", p) => Some((Source::Input, "$input", p)),
            ("$state", p) => Some((Source::State, "$state", p)),
            ("$response", p) => Some((Source::Response, "$response", p)),
            _ => None,
        },
        _ => None,
    }
}

fn compile_number(x: &Value, at: &str, problems: &mut Vec<HarnessError>) -> Template {
    let inner_at = pointer_push(at, "$number");
    if let Some((source, name, p)) = reference_shape(x) {
        return compile_ref(source, name, p, &inner_at, problems)
            .map_or(Template::Const(Value::Null), Template::Number);
    }
    match number_of(x) {
        Some(n) => Template::Const(n),
        None => {
            let why = match x {
                Value::Object(_) | Value::Array(_) => format!(
                    "`$number` takes a literal or a `$input`/`$state` reference, got {}",
                    show(x)
                ),
                _ => format!("`$number` literal {} is not {NUMBER_EXPECTED}", show(x)),
            };
            problems.push(literal_problem(inner_at, why));
            Template::Const(Value::Null)
        }
    }
}

/// An integer literal (a number with zero fraction counts) with |n| ≤ `max`.
fn bounded_integer(
    v: &Value,
    name: &str,
    max: i64,
    at: &str,
    problems: &mut Vec<HarnessError>,
) -> Option<i64> {
    let n = match v {
        Value::Number(n) => n,
        _ => {
            problems.push(literal_problem(
                at,
                format!(
                    "`$dateAdd` `{name}` must be an integer literal, got {}",
                    show(v)
                ),
            ));
            return None;
        }
    };
    let int = match (n.as_i64(), n.as_f64()) {
        (Some(i), _) => Some(i128::from(i)),
        (None, Some(f)) if f.fract() == 0.0 => {
            Some(if f.abs() > 1e30 { i128::MAX } else { f as i128 })
        }
        _ => None,
    };
    match int {
        None => {
            problems.push(literal_problem(
                at,
                format!("`$dateAdd` `{name}` must be an integer, got {n}"),
            ));
            None
        }
        Some(i) if i.abs() > i128::from(max) => {
            problems.push(literal_problem(
                at,
                format!("`$dateAdd` `{name}` is {n}; it must lie between -{max} and {max}"),
            ));
            None
        }
        Some(i) => Some(i as i64),
    }
}

fn compile_date_add(x: &Value, at: &str, problems: &mut Vec<HarnessError>) -> Template {
    let at = pointer_push(at, "$dateAdd");
    let Value::Object(m) = x else {
        problems.push(literal_problem(
            at,
            format!(
                "`$dateAdd` takes an object {{\"value\", \"days\"?, \"hours\"?}}, got {}",
                show(x)
            ),
        ));
        return Template::Const(Value::Null);
    };
    let before = problems.len();
    for k in m.keys() {
        if !matches!(k.as_str(), "value" | "days" | "hours") {
            problems.push(literal_problem(
                pointer_push(&at, k),
                format!("unknown key `{k}` in `$dateAdd` (expected `value`, `days`, `hours`)"),
            ));
        }
    }
    let days = m.get("days").map_or(Some(0), |v| {
        bounded_integer(
            v,
            "days",
            limits::MAX_DATE_DAYS,
            &pointer_push(&at, "days"),
            problems,
        )
    });
    let hours = m.get("hours").map_or(Some(0), |v| {
        bounded_integer(
            v,
            "hours",
            limits::MAX_DATE_HOURS,
            &pointer_push(&at, "hours"),
            problems,
        )
    });
    let value_at = pointer_push(&at, "value");
    let Some(value) = m.get("value") else {
        problems.push(literal_problem(at, "`$dateAdd` needs a `value`"));
        return Template::Const(Value::Null);
    };
    enum Operand {
        Reference(Reference),
        Literal(NaiveDate),
    }
    let operand = if let Some((source, name, p)) = reference_shape(value) {
        compile_ref(source, name, p, &value_at, problems).map(Operand::Reference)
    } else if let Value::String(s) = value {
        let date = parse_date_value(s);
        if date.is_none() {
            problems.push(literal_problem(
                &*value_at,
                format!("`$dateAdd` value {} is not {DATE_EXPECTED}", show(value)),
            ));
        }
        date.map(Operand::Literal)
    } else {
        problems.push(literal_problem(
            &*value_at,
            format!(
                "`$dateAdd` value must be a date string or a `$input`/`$state` reference, got {}",
                show(value)
            ),
        ));
        None
    };
    let (Some(days), Some(hours), Some(operand)) = (days, hours, operand) else {
        return Template::Const(Value::Null);
    };
    if problems.len() > before {
        // An unknown key: the expression is malformed even though its parts are fine.
        return Template::Const(Value::Null);
    }
    match operand {
        Operand::Reference(value) => Template::DateAdd(DateAdd { value, days, hours }),
        // A literal date folds now; a result outside 1–9999 is the definition's fault.
        Operand::Literal(date) => match date_add(date, days, hours) {
            Some(s) => Template::Const(Value::String(s)),
            None => {
                problems.push(literal_problem(
                    at,
                    format!("{date} plus {days} days and {hours} hours leaves the years 1-9999"),
                ));
                Template::Const(Value::Null)
            }
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Rendering

/// The client's answer a call carries (docs/src/reference/mcp.md, `ask_client`): the input's reserved member
/// [`crate::mock::model::RESPONSE_MEMBER`], or `null` when the call asked nothing.
#[inline]
pub fn response_of(input: &Value) -> &Value {
    static NULL: Value = Value::Null;
    input
        .get(crate::mock::model::RESPONSE_MEMBER)
        .unwrap_or(&NULL)
}

impl Reference {
    /// The value this reference points at, or harness `missing_reference`.
    #[inline]
    pub fn get<'a>(
        &self,
        input: &'a Value,
        state: &'a Map<String, Value>,
    ) -> Result<&'a Value, CallError> {
        let found = match self.source {
            Source::Input => self.path.resolve(input),
            Source::State => self.path.resolve_in(state),
            Source::Response => self.path.resolve(response_of(input)),
        };
        found.map_err(|i| {
            let (name, whole) = match self.source {
                Source::Input => ("$input", "input"),
                Source::State => ("$state", "state"),
                Source::Response => ("$response", "client's response"),
            };
            HarnessError::new(
                HarnessCode::MissingReference,
                format!(
                    "`{name}` path `{}` does not resolve in the {whole}: {}",
                    self.path,
                    self.path.describe_miss(i)
                ),
            )
            .at(&*self.at)
            .into()
        })
    }

    /// A value read through this reference is not what `op` needs: the caller's fault when it
    /// came from the input, the definition's when it came from the state.
    fn fault(&self, op: &str, expected: &str, got: &Value) -> CallError {
        match self.source {
            Source::Input | Source::Response => InputError::new(format!(
                "`{}` must be {expected}, got {}",
                self.path,
                show(got)
            ))
            .at(self.path.as_str())
            .into(),
            Source::State => literal_problem(
                &*self.at,
                format!(
                    "state `{}` handed to `{op}` must be {expected}, got {}",
                    self.path,
                    show(got)
                ),
            )
            .into(),
        }
    }

    fn range_fault(&self, date: NaiveDate, days: i64, hours: i64) -> CallError {
        let what = format!("{date} plus {days} days and {hours} hours leaves the years 1-9999");
        match self.source {
            Source::Input | Source::Response => {
                { InputError::new(format!("`{}`: {what}", self.path)) }
                    .at(self.path.as_str())
                    .into()
            }
            Source::State => {
                literal_problem(&*self.at, format!("state `{}`: {what}", self.path)).into()
            }
        }
    }
}

impl Template {
    /// Render against the call's input and pre-call state.
    pub fn render(&self, input: &Value, state: &Map<String, Value>) -> Result<Value, CallError> {
        match self {
            Template::Const(v) => Ok(v.clone()),
            Template::Object(members) => {
                let mut out = Map::new();
                for (k, t) in members.iter() {
                    out.insert(k.clone(), t.render(input, state)?);
                }
                Ok(Value::Object(out))
            }
            Template::Array(items) => items
                .iter()
                .map(|t| t.render(input, state))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Template::Ref(r) => r.get(input, state).cloned(),
            Template::Number(r) => {
                let v = r.get(input, state)?;
                number_of(v).ok_or_else(|| r.fault("$number", NUMBER_EXPECTED, v))
            }
            Template::DateAdd(d) => {
                let v = d.value.get(input, state)?;
                let date = v
                    .as_str()
                    .and_then(parse_date_value)
                    .ok_or_else(|| d.value.fault("$dateAdd", DATE_EXPECTED, v))?;
                date_add(date, d.days, d.hours)
                    .map(Value::String)
                    .ok_or_else(|| d.value.range_fault(date, d.days, d.hours))
            }
        }
    }
}

#[cfg(test)]
mod number_tests {
    use super::*;
    use serde_json::json;

    fn n(s: &str) -> Option<Value> {
        parse_decimal(s).map(Value::Number)
    }

    #[test]
    fn accepts_the_grammar() {
        assert_eq!(n("42.50"), Some(json!(42.5)));
        assert_eq!(n("7"), Some(json!(7)));
        assert!(n("7").unwrap().is_i64());
        assert_eq!(n("-7"), Some(json!(-7)));
        assert_eq!(n("-0"), Some(json!(0)));
        assert_eq!(n("007"), Some(json!(7)));
        assert_eq!(n("0.1"), Some(json!(0.1)));
        assert_eq!(n("18446744073709551615"), Some(json!(u64::MAX)));
        assert_eq!(n("-9223372036854775808"), Some(json!(i64::MIN)));
        assert_eq!(
            n("18446744073709551616"),
            Some(json!(18446744073709551616.0))
        );
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            "",
            " ",
            " 1",
            "1 ",
            "1 000",
            "+5",
            "-",
            ".5",
            "5.",
            "1.2.3",
            "0x1A",
            "1e5",
            "1E5",
            "NaN",
            "nan",
            "Infinity",
            "-Infinity",
            "inf",
            "1,5",
            "١",
            "--1",
            "1-",
            "1.-2",
        ] {
            assert_eq!(n(bad), None, "{bad:?} should be rejected");
        }
    }

    #[test]
    fn rejects_non_finite() {
        let huge = "9".repeat(400);
        assert_eq!(n(&huge), None);
        assert_eq!(n(&format!("{huge}.5")), None);
    }

    #[test]
    fn number_of_keeps_numbers_and_rejects_other_types() {
        assert_eq!(number_of(&json!(3.25)), Some(json!(3.25)));
        assert_eq!(number_of(&json!(3)), Some(json!(3)));
        for bad in [json!(true), json!(null), json!([1]), json!({"a": 1})] {
            assert_eq!(number_of(&bad), None);
        }
    }
}

#[cfg(test)]
mod date_tests {
    use super::*;

    fn d(s: &str) -> Option<NaiveDate> {
        parse_date_value(s)
    }

    #[test]
    fn parses_dates_and_date_times_in_utc() {
        assert_eq!(d("2024-02-29"), NaiveDate::from_ymd_opt(2024, 2, 29));
        assert_eq!(
            d("2024-03-01T01:00:00+05:00"),
            NaiveDate::from_ymd_opt(2024, 2, 29)
        );
        assert_eq!(
            d("2024-02-29T23:30:00-01:00"),
            NaiveDate::from_ymd_opt(2024, 3, 1)
        );
        assert_eq!(
            d("2024-02-29t10:00:00.123456789z"),
            NaiveDate::from_ymd_opt(2024, 2, 29)
        );
        assert_eq!(
            d("2016-12-31T23:59:60Z"),
            NaiveDate::from_ymd_opt(2016, 12, 31)
        );
    }

    #[test]
    fn rejects_non_dates() {
        for bad in [
            "",
            "2023-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-1-01",
            "24-01-01",
            "2024/01/01",
            "tomorrow",
            "2024-01-01 ",
            " 2024-01-01",
            "2024-01-01T10:00:00",
            "2024-01-01 10:00:00Z",
            "2024-01-01T25:00:00Z",
            "2024-01-01T10:00:00+24:00",
            "2024-01-01T10:00:00.Z",
            "2024-01-01T10:00:00+0500",
            "2024-01-01T10:00Z",
            "+2024-01-01",
            "2024-01-01T10:00:00\u{2212}05:00",
        ] {
            assert_eq!(d(bad), None, "{bad:?} should be rejected");
        }
    }

    #[test]
    fn adds_days_and_hours() {
        let leap = NaiveDate::from_ymd_opt(2024, 2, 29).unwrap();
        assert_eq!(date_add(leap, 1, 0).unwrap(), "2024-03-01T00:00:00Z");
        assert_eq!(date_add(leap, -1, 0).unwrap(), "2024-02-28T00:00:00Z");
        assert_eq!(date_add(leap, 365, 0).unwrap(), "2025-02-28T00:00:00Z");
        assert_eq!(date_add(leap, 0, -24).unwrap(), "2024-02-28T00:00:00Z");
        assert_eq!(date_add(leap, 0, 5).unwrap(), "2024-02-29T05:00:00Z");
    }

    #[test]
    fn keeps_to_years_1_to_9999() {
        let last = NaiveDate::from_ymd_opt(9999, 12, 31).unwrap();
        assert_eq!(date_add(last, 0, 23).unwrap(), "9999-12-31T23:00:00Z");
        assert_eq!(date_add(last, 0, 24), None);
        let first = NaiveDate::from_ymd_opt(1, 1, 1).unwrap();
        assert_eq!(date_add(first, 0, 0).unwrap(), "0001-01-01T00:00:00Z");
        assert_eq!(date_add(first, 0, -1), None);
    }
}

#[cfg(test)]
mod compile_tests {
    use super::*;
    use serde_json::json;

    fn compile(v: Value) -> (Template, Vec<HarnessError>) {
        let mut problems = Vec::new();
        let t = Template::compile(&v, "result", &mut problems);
        (t, problems)
    }

    fn paths(p: &[HarnessError]) -> Vec<&str> {
        p.iter().map(|e| e.path.as_deref().unwrap()).collect()
    }

    #[test]
    fn literals_fold_to_constants() {
        let (t, p) = compile(
            json!({"a": {"$number": "42.50"}, "b": [{"$dateAdd": {"value": "2024-02-29", "days": 1}}]}),
        );
        assert!(p.is_empty());
        match t {
            Template::Const(v) => {
                assert_eq!(v, json!({"a": 42.5, "b": ["2024-03-01T00:00:00Z"]}))
            }
            other => panic!("not folded: {other:?}"),
        }
    }

    #[test]
    fn only_single_member_known_names_are_expressions() {
        let (t, p) = compile(json!({"$input": "a", "note": 1}));
        assert!(p.is_empty());
        assert!(t.is_const());
        let (t, p) = compile(json!({"$ref": "#/defs/x"}));
        assert!(p.is_empty());
        assert!(t.is_const());
    }

    #[test]
    fn malformed_references_are_reported_with_paths() {
        let (_, p) =
            compile(json!({"a": {"$input": 3}, "b": {"$state": ""}, "c": {"$input": "x..y"}}));
        assert_eq!(paths(&p), vec!["result/a", "result/b", "result/c"]);
        assert!(p
            .iter()
            .all(|e| e.code == HarnessCode::InvalidFixtureLiteral));
    }

    #[test]
    fn bad_number_literals() {
        let (_, p) = compile(
            json!([{"$number": "abc"}, {"$number": true}, {"$number": [1]}, {"$number": {"$number": "1"}}]),
        );
        assert_eq!(
            paths(&p),
            vec![
                "result/0/$number",
                "result/1/$number",
                "result/2/$number",
                "result/3/$number"
            ]
        );
    }

    #[test]
    fn bad_date_add_literals_are_all_reported() {
        let (_, p) =
            compile(json!({"$dateAdd": {"value": "nope", "days": 9000, "hours": 25, "weeks": 1}}));
        let mut got = paths(&p);
        got.sort();
        assert_eq!(
            got,
            vec![
                "result/$dateAdd/days",
                "result/$dateAdd/hours",
                "result/$dateAdd/value",
                "result/$dateAdd/weeks"
            ]
        );
        let (_, p) = compile(json!({"$dateAdd": {"value": {"$input": "d"}, "days": 1.5}}));
        assert_eq!(paths(&p), vec!["result/$dateAdd/days"]);
        let (_, p) = compile(json!({"$dateAdd": {"days": 1}}));
        assert_eq!(paths(&p), vec!["result/$dateAdd"]);
        let (_, p) = compile(json!({"$dateAdd": {"value": "9999-12-31", "days": 1}}));
        assert_eq!(paths(&p), vec!["result/$dateAdd"]);
        let (_, p) = compile(json!({"$dateAdd": "2024-01-01"}));
        assert_eq!(paths(&p), vec!["result/$dateAdd"]);
    }

    #[test]
    fn integral_floats_count_as_integers() {
        let (t, p) = compile(json!({"$dateAdd": {"value": "2024-01-01", "days": 2.0}}));
        assert!(p.is_empty());
        assert!(matches!(t, Template::Const(Value::String(s)) if s == "2024-01-03T00:00:00Z"));
    }
}

#[cfg(test)]
mod render_tests {
    use super::*;
    use serde_json::json;

    fn render(t: Value, input: Value, state: Value) -> Result<Value, CallError> {
        let mut problems = Vec::new();
        let t = Template::compile(&t, "result", &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        t.render(&input, state.as_object().unwrap())
    }

    #[test]
    fn references_keep_types() {
        let out = render(
            json!({"n": {"$input": "n"}, "o": {"$state": "o"}, "lit": "x"}),
            json!({"n": 1.5}),
            json!({"o": {"a": [null, true]}}),
        );
        assert_eq!(
            out.unwrap(),
            json!({"n": 1.5, "o": {"a": [null, true]}, "lit": "x"})
        );
    }

    #[test]
    fn missing_reference_is_a_harness_error_with_the_definition_path() {
        let err = render(
            json!({"a": [{"$input": "x.y"}]}),
            json!({"x": {}}),
            json!({}),
        )
        .unwrap_err();
        match err {
            CallError::Harness(h) => {
                assert_eq!(h.code, HarnessCode::MissingReference);
                assert_eq!(h.path.as_deref(), Some("result/a/0"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn number_from_input_is_the_callers_fault() {
        let err = render(
            json!({"$number": {"$input": "amount"}}),
            json!({"amount": "abc"}),
            json!({}),
        )
        .unwrap_err();
        match err {
            CallError::Input(e) => assert_eq!(e.path.as_deref(), Some("amount")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn number_from_state_is_the_fixtures_fault() {
        let err = render(
            json!({"$number": {"$state": "amount"}}),
            json!({}),
            json!({"amount": "1e5"}),
        )
        .unwrap_err();
        match err {
            CallError::Harness(h) => {
                assert_eq!(h.code, HarnessCode::InvalidFixtureLiteral);
                assert_eq!(h.path.as_deref(), Some("result/$number"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn date_add_from_input() {
        let t = json!({"$dateAdd": {"value": {"$input": "d"}, "days": 1}});
        assert_eq!(
            render(t.clone(), json!({"d": "2024-02-28"}), json!({})).unwrap(),
            json!("2024-02-29T00:00:00Z")
        );
        assert!(matches!(
            render(t.clone(), json!({"d": "9999-12-31"}), json!({})),
            Err(CallError::Input(_))
        ));
        assert!(matches!(
            render(t, json!({"d": 20240228}), json!({})),
            Err(CallError::Input(_))
        ));
    }
}
