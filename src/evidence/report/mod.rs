//! Reports of one attempt (SPEC 16): pure functions from the SPEC 8 evidence envelope (JSON)
//! to bytes. No I/O here; `understudy report`, `understudy test` and the live pages
//! (`crate::admin::ui`) feed them.
//!
//! | module | renders |
//! |---|---|
//! | [`junit`] | JUnit XML: one `testsuite` per attempt, a `testcase` per contract check and per verdict rule |
//! | [`html`] | one self-contained HTML page: header, verdict, contract results, the timeline |
//!
//! The envelope is read loosely (members may be absent): `verdict_reasons`, `contract_results`
//! and `events` (agent-side events, SPEC 15) are rendered when present. When an envelope has
//! no `verdict_reasons`, [`with_verdict_reasons`] fills them from the stored records with
//! [`crate::evidence::verdict_reasons`]. `understudy test` adds a `test_run` member
//! ([`TestRun`]) saying how the command ended; the reports show it.

pub mod html;
pub mod junit;

use serde_json::{json, Value};

use crate::records::{AttemptRecord, ToolEvent};

/// The reports `--report-dir` writes, by file name.
pub const JSON_FILE: &str = "evidence.json";
pub const JUNIT_FILE: &str = "junit.xml";
pub const HTML_FILE: &str = "report.html";

/// One verdict rule of SPEC 8 (module doc of [`crate::evidence`]), as a JUnit test case.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Stable id: the JUnit test-case name.
    pub id: &'static str,
    /// What passing means, for people.
    pub title: &'static str,
}

/// The six rules, in the order of the evidence module doc.
pub const RULES: [Rule; 6] = [
    Rule {
        id: "harness_error",
        title: "no call was a harness error",
    },
    Rule {
        id: "call_after_lease",
        title: "no call arrived after the lease expired",
    },
    Rule {
        id: "cleanup",
        title: "cleanup verified with 0 remaining state keys",
    },
    Rule {
        id: "duplicate_side_effect",
        title: "no write took effect twice under one idempotency key",
    },
    Rule {
        id: "missing_evidence",
        title: "sequences are 1..n without gaps or repeats",
    },
    Rule {
        id: "unknown_status",
        title: "every result_status is a known one",
    },
];

/// The rule a verdict reason (text of [`crate::evidence::verdict_reasons`]) belongs to;
/// `None` for reasons of other origins (contracts, store failures).
pub fn rule_of(reason: &str) -> Option<&'static str> {
    let r = reason.trim_start();
    Some(if r.starts_with("harness error") {
        "harness_error"
    } else if r.starts_with("lease check") || r.contains("after the lease expired") {
        "call_after_lease"
    } else if r.starts_with("cleanup not verified") {
        "cleanup"
    } else if r.starts_with("duplicate side effect") {
        "duplicate_side_effect"
    } else if r.starts_with("missing evidence") {
        "missing_evidence"
    } else if r.starts_with("unknown result_status") {
        "unknown_status"
    } else {
        return None;
    })
}

/// The verdict reasons of an envelope: its `verdict_reasons`, plus a reason for
/// `store_failures` and, when the verdict is `fail` with no reason at all, a generic one.
pub fn reasons(env: &Value) -> Vec<String> {
    let mut out: Vec<String> = env
        .get("verdict_reasons")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|r| match r {
                    Value::String(s) => s.clone(),
                    Value::Object(o) => o
                        .get("message")
                        .or_else(|| o.get("reason"))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| r.to_string()),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(n) = env.get("store_failures").and_then(Value::as_u64) {
        if n > 0 && !out.iter().any(|r| r.contains("store_error")) {
            out.push(format!(
                "{n} call(s) answered store_error: their evidence is missing or unconfirmed"
            ));
        }
    }
    if out.is_empty() && str_at(env, "verdict") == "fail" {
        out.push("the verdict is fail (the envelope gives no reason)".to_string());
    }
    out
}

/// `env` with `verdict_reasons` filled from the records when it has none.
pub fn with_verdict_reasons(
    mut env: Value,
    attempt: &AttemptRecord,
    events: &[ToolEvent],
) -> Value {
    if env.get("verdict_reasons").is_none() {
        if let Value::Object(m) = &mut env {
            m.insert(
                "verdict_reasons".into(),
                json!(crate::evidence::verdict_reasons(attempt, events)),
            );
        }
    }
    env
}

/// How `understudy test` ran its command: the envelope's `test_run` member.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct TestRun {
    /// The command line as given.
    pub command: Vec<String>,
    /// The command's own exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// `timeout` or `interrupted` when understudy stopped it, else `None`.
    pub stopped: Option<String>,
    /// Why, in words (`"timed out after 5 s: the command was stopped"`).
    pub reason: Option<String>,
    pub duration_s: f64,
    /// The exit code `understudy test` returns.
    pub understudy_exit_code: i32,
}

/// The member `name` as a string, `""` when absent or not a string.
pub fn str_at<'a>(v: &'a Value, name: &str) -> &'a str {
    v.get(name).and_then(Value::as_str).unwrap_or("")
}

/// One row of the timeline: a tool call or an agent-side event, by sequence.
pub(crate) enum Row<'a> {
    Call(&'a Value),
    Event(&'a Value),
}

impl Row<'_> {
    pub(crate) fn sequence(&self) -> u64 {
        let v = match self {
            Row::Call(v) | Row::Event(v) => v,
        };
        v.get("sequence")
            .and_then(Value::as_u64)
            .unwrap_or(u64::MAX)
    }
}

/// Tool calls and agent-side events merged in sequence order (a stable sort: calls before
/// events of the same sequence, which only a broken envelope has).
pub(crate) fn timeline(env: &Value) -> Vec<Row<'_>> {
    let mut rows: Vec<Row<'_>> = Vec::new();
    if let Some(a) = env.get("tool_events").and_then(Value::as_array) {
        rows.extend(a.iter().map(Row::Call));
    }
    if let Some(a) = env.get("events").and_then(Value::as_array) {
        rows.extend(a.iter().map(Row::Event));
    }
    rows.sort_by_key(Row::sequence);
    rows
}

/// The contract results of the envelope (empty when absent).
pub(crate) fn contract_results(env: &Value) -> &[Value] {
    env.get("contract_results")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Render one format.
pub fn render(env: &Value, format: Format) -> Vec<u8> {
    match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(env).unwrap_or_else(|_| "{}".into());
            s.push('\n');
            s.into_bytes()
        }
        Format::Junit => junit::render(env).into_bytes(),
        Format::Html => html::render(env).into_bytes(),
    }
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Json,
    Junit,
    Html,
}

impl Format {
    /// The file name `--report-dir` uses.
    pub fn file_name(self) -> &'static str {
        match self {
            Format::Json => JSON_FILE,
            Format::Junit => JUNIT_FILE,
            Format::Html => HTML_FILE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_evidence_reason_maps_to_its_rule() {
        let cases = [
            (
                "harness error at sequence 2: no_mock: boom",
                "harness_error",
            ),
            (
                "call at sequence 1 (t) arrived after the lease expired at x",
                "call_after_lease",
            ),
            ("lease check inconclusive: expires_at", "call_after_lease"),
            ("cleanup not verified: status", "cleanup"),
            (
                "duplicate side effect: sequences 1 and 2",
                "duplicate_side_effect",
            ),
            ("missing evidence: expected sequence 2", "missing_evidence"),
            ("unknown result_status `pending` at", "unknown_status"),
        ];
        for (r, id) in cases {
            assert_eq!(rule_of(r), Some(id), "{r}");
        }
        assert_eq!(rule_of("contract x failed"), None);
    }

    #[test]
    fn reasons_cover_store_failures_and_bare_fail() {
        assert!(reasons(&json!({"verdict": "pass"})).is_empty());
        assert_eq!(reasons(&json!({"verdict": "fail"})).len(), 1);
        let r = reasons(&json!({"verdict": "fail", "store_failures": 2, "verdict_reasons": []}));
        assert!(r[0].contains("2 call(s) answered store_error"), "{r:?}");
    }

    #[test]
    fn timeline_merges_calls_and_events_by_sequence() {
        let env = json!({"tool_events": [{"sequence": 1}, {"sequence": 3}],
                         "events": [{"sequence": 2, "name": "x"}]});
        let seqs: Vec<u64> = timeline(&env).iter().map(Row::sequence).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
    }
}
