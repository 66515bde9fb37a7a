//! Reports of one attempt (docs/src/getting-started/first-test.md): pure functions from the docs/src/reference/evidence-envelope.md evidence envelope (JSON)
//! to bytes. No I/O here; `understudy report`, `understudy test` and the live pages
//! (`crate::admin::ui`) feed them.
//!
//! | module | renders |
//! |---|---|
//! | [`junit`] | JUnit XML: one `testsuite` per attempt, a `testcase` per contract check and per verdict rule |
//! | [`html`] | one self-contained HTML page: header, verdict, contract results, the timeline |
//!
//! The envelope is read loosely (members may be absent): `contract_results` and `events`
//! (agent-side events) are rendered when present. The verdict and its reasons are the
//! envelope's own (`crate::evidence::verdict`), read by [`reasons`]: nothing here judges or
//! reads the text of a reason. `understudy test` adds a `test_run` member ([`TestRun`])
//! saying how the command ended; the reports show it.

pub mod html;
pub mod junit;

use serde_json::Value;

use crate::evidence::verdict::{Reason, Verdict};

/// The reports `--report-dir` writes, by file name.
pub const JSON_FILE: &str = "evidence.json";
pub const JUNIT_FILE: &str = "junit.xml";
pub const HTML_FILE: &str = "report.html";

/// The verdict reasons of an envelope, as [`Verdict::from_envelope`] reads them; an
/// envelope that holds no verdict gives one reason (code `unknown`) saying so, so a report
/// never shows such an envelope as passing.
pub fn reasons(env: &Value) -> Vec<Reason> {
    match Verdict::from_envelope(env) {
        Ok(v) => v.reasons,
        Err(e) => vec![Reason {
            code: "unknown".into(),
            message: e,
            sequence: None,
        }],
    }
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
    use serde_json::json;

    #[test]
    fn reasons_are_the_envelopes_and_a_missing_verdict_is_never_a_pass() {
        assert!(reasons(&json!({"verdict": "pass", "verdict_reasons": []})).is_empty());
        // A bare fail still says so.
        assert_eq!(reasons(&json!({"verdict": "fail"})).len(), 1);
        // Not an envelope of understudy: one reason, never an empty list.
        let r = reasons(&json!({}));
        assert_eq!(r.len(), 1);
        assert!(r[0].message.contains("no `verdict` member"), "{r:?}");
        let r = reasons(&json!({"verdict": "fail", "verdict_reasons": [
            {"code": "store_failure", "message": "m"}]}));
        assert_eq!(r[0].code, "store_failure");
    }

    /// Each format renders its own document of the envelope: JSON that reads back as the
    /// envelope (one trailing newline), JUnit XML, an HTML page — never nothing.
    #[test]
    fn render_writes_each_format_of_the_envelope() {
        let env = json!({"attempt_id": "a-1", "verdict": "fail",
                         "verdict_reasons": [{"code": "no_calls", "message": "no tool call"}],
                         "tool_events": []});
        let j = render(&env, Format::Json);
        assert_eq!(j.last(), Some(&b'\n'));
        assert_eq!(serde_json::from_slice::<Value>(&j).unwrap(), env);
        let x = String::from_utf8(render(&env, Format::Junit)).unwrap();
        assert!(x.starts_with("<?xml") && x.contains("<testsuite"), "{x}");
        assert!(x.contains("no_calls"), "{x}");
        let h = String::from_utf8(render(&env, Format::Html)).unwrap();
        assert!(h.contains("<html") && h.contains("a-1"), "{h}");
        assert_eq!(Format::Html.file_name(), HTML_FILE);
    }

    #[test]
    fn timeline_merges_calls_and_events_by_sequence() {
        let env = json!({"tool_events": [{"sequence": 1}, {"sequence": 3}],
                         "events": [{"sequence": 2, "name": "x"}]});
        let seqs: Vec<u64> = timeline(&env).iter().map(Row::sequence).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
    }
}
