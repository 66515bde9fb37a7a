//! JUnit XML of one attempt (docs/src/getting-started/first-test.md), in the dialect GitLab, Jenkins and the GitHub
//! test-report actions read (valid against the Jenkins xunit-plugin `junit-10.xsd`, vendored
//! in `tests/fixtures/junit/`):
//!
//! ```xml
//! <testsuites name="understudy" tests="9" failures="1" errors="0" time="0.412">
//!   <testsuite name="understudy attempt <id>" id="<id>" tests="9" failures="1" errors="0" skipped="0" time="0.412" timestamp="…">
//!     <properties><property name="attempt_id" value="…"/> … </properties>
//!     <testcase classname="understudy.verdict" name="harness_error: no call was a harness error" time="0"/>
//!     <testcase classname="understudy.contract.book_appointment_contract" name="calls.exactly_once[crm/book_appointment]" time="0">
//!       <failure type="failed" message="…">evidence text</failure>
//!     </testcase>
//!   </testsuite>
//! </testsuites>
//! ```
//!
//! - One test case per rule of the attempt ([`Rule::ATTEMPT_RULES`], named by its code),
//!   failing with every reason of that code; reasons of no rule (a contract reason without a
//!   contract result, a reason of an older envelope) fail a case `other`, present only then.
//! - One test case per check of every contract result: `failed` and `inconclusive` checks
//!   of a blocking contract are `<failure>` (inconclusive never passes); those of an advisory
//!   contract are `<skipped>` (reported, not gating). A contract that is not `passed` but has
//!   no check gets one case `contract`.
//! - With a `test_run` member (`understudy test`), a case `command` fails when the command
//!   failed or was stopped.

use serde_json::Value;

use super::{contract_results, reasons, str_at};
use crate::evidence::verdict::{Reason, Rule};

/// One test case.
struct Case {
    classname: String,
    name: String,
    outcome: Outcome,
}

enum Outcome {
    Pass,
    Failure {
        kind: String,
        message: String,
        text: String,
    },
    Skipped {
        message: String,
    },
}

/// The JUnit XML document.
pub fn render(env: &Value) -> String {
    let cases = cases(env);
    let failures = cases
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Failure { .. }))
        .count();
    let skipped = cases
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Skipped { .. }))
        .count();
    let id = str_at(env, "attempt_id");
    let time = duration_s(env);
    let mut x = String::with_capacity(4096);
    x.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites name=\"understudy\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{time:.3}\">\n",
        cases.len()
    ));
    let mut suite_name = format!("understudy attempt {id}");
    if let Some(run) = env.get("test_run_id").and_then(Value::as_str) {
        suite_name = format!("{run} ({suite_name})");
    }
    x.push_str(&format!(
        "  <testsuite name=\"{}\" id=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{time:.3}\"",
        attr(&suite_name),
        attr(id),
        cases.len()
    ));
    if let Some(t) = env.get("started_at").and_then(Value::as_str) {
        // The schema's timestamp is free text; ISO 8601 without the zone is the Ant form.
        x.push_str(&format!(" timestamp=\"{}\"", attr(t)));
    }
    x.push_str(">\n    <properties>\n");
    for (k, v) in properties(env) {
        x.push_str(&format!(
            "      <property name=\"{}\" value=\"{}\"/>\n",
            attr(&k),
            attr(&v)
        ));
    }
    x.push_str("    </properties>\n");
    for c in &cases {
        x.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"0\"",
            attr(&c.classname),
            attr(&c.name)
        ));
        match &c.outcome {
            Outcome::Pass => x.push_str("/>\n"),
            Outcome::Failure {
                kind,
                message,
                text,
            } => x.push_str(&format!(
                ">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                attr(kind),
                attr(&first_line(message)),
                text_node(text)
            )),
            Outcome::Skipped { message } => x.push_str(&format!(
                ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                attr(&first_line(message))
            )),
        }
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// `code: message` per reason, one per line.
fn lines(reasons: &[&Reason]) -> String {
    reasons
        .iter()
        .map(|r| format!("{}: {}", r.code, r.message))
        .collect::<Vec<_>>()
        .join("\n")
}

fn cases(env: &Value) -> Vec<Case> {
    let mut out = Vec::new();
    let all = reasons(env);
    let contracts = contract_results(env);
    for rule in Rule::ATTEMPT_RULES {
        let mine: Vec<&Reason> = all.iter().filter(|r| r.is(&rule)).collect();
        let code = rule.code();
        out.push(Case {
            classname: "understudy.verdict".into(),
            name: format!("{code}: {}", rule.title()),
            outcome: if mine.is_empty() {
                Outcome::Pass
            } else {
                Outcome::Failure {
                    kind: code,
                    message: mine[0].message.clone(),
                    text: lines(&mine),
                }
            },
        });
    }
    // Reasons of no attempt rule; a contract reason whose contract has a result is covered
    // by that result's checks (matched by code, `contract:<id>:<check>`).
    let other: Vec<&Reason> = all
        .iter()
        .filter(|r| !Rule::ATTEMPT_RULES.iter().any(|rule| r.is(rule)))
        .filter(|r| {
            !contracts.iter().any(|c| {
                let id = str_at(c, "contract_id");
                !id.is_empty() && r.code.starts_with(&format!("contract:{id}:"))
            })
        })
        .collect();
    if !other.is_empty() {
        out.push(Case {
            classname: "understudy.verdict".into(),
            name: "other: no other reason fails the verdict".into(),
            outcome: Outcome::Failure {
                kind: other[0].code.clone(),
                message: other[0].message.clone(),
                text: lines(&other),
            },
        });
    }
    for c in contracts {
        let id = str_at(c, "contract_id");
        let advisory = str_at(c, "risk") == "advisory";
        let classname = format!("understudy.contract.{id}");
        let checks = c.get("checks").and_then(Value::as_array);
        let policy = str_at(c, "policy_version");
        let not_passed = |status: &str, message: String, text: String| {
            if advisory {
                Outcome::Skipped {
                    message: format!(
                        "advisory contract, {status} (does not change the verdict): {message}"
                    ),
                }
            } else {
                Outcome::Failure {
                    kind: status.to_string(),
                    message,
                    text,
                }
            }
        };
        match checks {
            Some(checks) if !checks.is_empty() => {
                for ch in checks {
                    let status = str_at(ch, "status");
                    let evidence = str_at(ch, "evidence").to_string();
                    let outcome = if status == "passed" {
                        Outcome::Pass
                    } else {
                        let st = if status.is_empty() { "unknown" } else { status };
                        let text = format!(
                            "{evidence}\n(contract {id}, policy {policy}, risk {}, check status {st})",
                            if advisory { "advisory" } else { "blocking" }
                        );
                        not_passed(st, format!("{st}: {evidence}"), text)
                    };
                    out.push(Case {
                        classname: classname.clone(),
                        name: str_at(ch, "id").to_string(),
                        outcome,
                    });
                }
            }
            _ => {
                let status = str_at(c, "status");
                out.push(Case {
                    classname,
                    name: "contract".into(),
                    outcome: if status == "passed" {
                        Outcome::Pass
                    } else {
                        not_passed(
                            if status.is_empty() { "unknown" } else { status },
                            format!("contract {id} is {status} with no check results"),
                            format!("contract {id} is {status} with no check results"),
                        )
                    },
                });
            }
        }
    }
    if let Some(run) = env.get("test_run") {
        let code = run.get("exit_code").and_then(Value::as_i64);
        let reason = str_at(run, "reason");
        let cmd = run
            .get("command")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let ok = code == Some(0) && run.get("stopped").is_none_or(Value::is_null);
        out.push(Case {
            classname: "understudy.command".into(),
            name: format!("command: {cmd}"),
            outcome: if ok {
                Outcome::Pass
            } else {
                let msg = match (reason.is_empty(), code) {
                    (false, _) => reason.to_string(),
                    (true, Some(c)) => format!("the command failed (exit code {c})"),
                    (true, None) => "the command failed (no exit code)".to_string(),
                };
                Outcome::Failure {
                    kind: "command".into(),
                    message: msg.clone(),
                    text: msg,
                }
            },
        });
    }
    out
}

fn properties(env: &Value) -> Vec<(String, String)> {
    let mut p = Vec::new();
    for k in [
        "attempt_id",
        "test_run_id",
        "started_at",
        "ended_at",
        "verdict",
    ] {
        if let Some(v) = env.get(k).and_then(Value::as_str) {
            p.push((k.to_string(), v.to_string()));
        }
    }
    if let Some(pins) = env.get("pins").and_then(Value::as_object) {
        for (op, pin) in pins {
            p.push((
                format!("pin.{op}"),
                format!(
                    "revision {} {}",
                    pin.get("revision")
                        .map(Value::to_string)
                        .unwrap_or_default(),
                    str_at(pin, "contract_hash")
                ),
            ));
        }
    }
    p
}

/// The attempt's wall time in seconds (`ended_at - started_at`), 0 when unknown.
fn duration_s(env: &Value) -> f64 {
    let t = |k: &str| {
        env.get(k)
            .and_then(Value::as_str)
            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
    };
    match (t("started_at"), t("ended_at")) {
        (Some(a), Some(b)) if b >= a => (b - a).num_microseconds().unwrap_or(0) as f64 / 1e6,
        _ => 0.0,
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > 300 {
        let mut t: String = line.chars().take(300).collect();
        t.push('…');
        t
    } else {
        line.to_string()
    }
}

/// Characters XML 1.0 cannot carry at all are replaced by U+FFFD.
fn xml_char(c: char) -> char {
    match c {
        '\t' | '\n' | '\r' => c,
        c if (c as u32) < 0x20 => '\u{FFFD}',
        '\u{FFFE}' | '\u{FFFF}' => '\u{FFFD}',
        c => c,
    }
}

/// An attribute value, escaped for `"…"` (newlines kept as character references).
pub fn attr(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars().map(xml_char) {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\n' => o.push_str("&#10;"),
            '\r' => o.push_str("&#13;"),
            '\t' => o.push_str("&#9;"),
            c => o.push(c),
        }
    }
    o
}

/// Element text, escaped.
pub fn text_node(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars().map(xml_char) {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes_and_replaces_what_xml_cannot_carry() {
        assert_eq!(
            attr("a<b>&\"'\n\u{1}"),
            "a&lt;b&gt;&amp;&quot;&apos;&#10;\u{FFFD}"
        );
        assert_eq!(text_node("<x> & \u{0}"), "&lt;x&gt; &amp; \u{FFFD}");
    }

    #[test]
    fn a_case_per_rule_and_per_check_with_failures() {
        let env = json!({
            "attempt_id": "a1", "verdict": "fail", "started_at": "2026-01-01T00:00:00Z",
            "ended_at": "2026-01-01T00:00:01.5Z",
            "verdict_reasons": [
                {"code": "harness_error", "message": "harness error at sequence 2: no_mock: boom", "sequence": 2},
                {"code": "contract:c1:calls.exactly_once[crm/book]", "message": "contract c1: failed — calls.exactly_once[crm/book]: 2 effective calls (failed)"}],
            "contract_results": [
                {"contract_id": "c1", "risk": "blocking", "status": "failed", "policy_version": "p",
                 "checks": [{"id": "calls.exactly_once[crm/book]", "status": "failed", "evidence": "2 effective calls: sequences 3, 4"},
                            {"id": "arguments.required[Contact__c]", "status": "passed", "evidence": "sequence 3"}]},
                {"contract_id": "c2", "risk": "advisory", "status": "inconclusive",
                 "checks": [{"id": "x", "status": "inconclusive", "evidence": "never called"}]}
            ]
        });
        let x = render(&env);
        // 11 attempt rules + 2 checks of c1 + 1 of c2.
        assert!(x.contains("tests=\"14\" failures=\"2\""), "{x}");
        assert!(x.contains("skipped=\"1\""), "{x}");
        assert!(x.contains("time=\"1.500\""), "{x}");
        assert!(x.contains("<failure type=\"harness_error\""), "{x}");
        // The failure's text: each reason of the rule as `code: message`.
        assert!(
            x.contains(">harness_error: harness error at sequence 2: no_mock: boom<"),
            "{x}"
        );
        assert!(x.contains("2 effective calls: sequences 3, 4"), "{x}");
        // The blocking contract's check fails the case; the advisory one's is skipped.
        assert!(x.contains("<failure type=\"failed\""), "{x}");
        assert!(
            x.contains(
                "advisory contract, inconclusive (does not change the verdict): inconclusive: never called"
            ),
            "{x}"
        );
        assert!(
            !x.contains("name=\"other"),
            "a contract reason is covered by its checks: {x}"
        );
        assert_eq!(x.matches("<testcase").count(), 14);
        // A contract reason of a contract without a result is not dropped: `other` fails.
        let mut env = env;
        env["verdict_reasons"][1]["code"] = json!("contract:gone:tool[crm/book]");
        let x = render(&env);
        assert!(x.contains("name=\"other"), "{x}");
        assert!(x.contains("contract:gone:tool[crm/book]"), "{x}");
    }

    #[test]
    fn a_passing_attempt_has_only_passing_cases() {
        let x = render(&json!({"attempt_id": "a", "verdict": "pass", "verdict_reasons": []}));
        assert!(x.contains("failures=\"0\""));
        assert!(!x.contains("<failure"));
        assert_eq!(x.matches("<testcase").count(), Rule::ATTEMPT_RULES.len());
    }

    #[test]
    fn a_contract_without_checks_is_one_case_that_passes_only_when_it_passed() {
        let env = |status: &str, checks: Value| {
            let verdict = if status == "passed" { "pass" } else { "fail" };
            json!({"attempt_id": "a", "verdict": verdict, "verdict_reasons": [],
                "contract_results": [{"contract_id": "c3", "risk": "blocking", "status": status, "checks": checks}]})
        };
        for checks in [json!([]), Value::Null] {
            let x = render(&env("failed", checks.clone()));
            assert!(x.contains("classname=\"understudy.contract.c3\" name=\"contract\" time=\"0\">\n      <failure type=\"failed\" message=\"contract c3 is failed with no check results\""), "{x}");
            let x = render(&env("passed", checks));
            assert!(x.contains("name=\"contract\" time=\"0\"/>"), "{x}");
            assert!(!x.contains("<failure"), "{x}");
        }
    }

    #[test]
    fn the_command_case_fails_on_a_nonzero_exit_or_a_stop() {
        let case = |run: Value| {
            let x = render(
                &json!({"attempt_id": "a", "verdict": "pass", "verdict_reasons": [], "test_run": run}),
            );
            let at = x
                .find("name=\"command: pytest -q\"")
                .expect("a command case");
            x[at..].split("  </testsuite>").next().unwrap().to_string()
        };
        let cmd = json!(["pytest", "-q"]);
        assert!(case(json!({"command": cmd, "exit_code": 0})).ends_with("time=\"0\"/>\n"));
        assert!(
            case(json!({"command": cmd, "exit_code": 0, "stopped": null}))
                .ends_with("time=\"0\"/>\n")
        );
        let c = case(
            json!({"command": cmd, "exit_code": 0, "stopped": "timeout", "reason": "timed out after 5 s"}),
        );
        assert!(
            c.contains("<failure type=\"command\" message=\"timed out after 5 s\""),
            "{c}"
        );
        let c = case(json!({"command": cmd, "exit_code": 3}));
        assert!(
            c.contains("message=\"the command failed (exit code 3)\""),
            "{c}"
        );
        let c = case(json!({"command": cmd}));
        assert!(
            c.contains("message=\"the command failed (no exit code)\""),
            "{c}"
        );
    }

    #[test]
    fn properties_time_and_long_messages() {
        let env = json!({"attempt_id": "a", "verdict": "fail", "test_run_id": "run-1",
            "started_at": "2026-01-01T00:00:02Z", "ended_at": "2026-01-01T00:00:01Z",
            "pins": {"crm/book": {"revision": 3, "contract_hash": "sha256:ab"}},
            "verdict_reasons": [{"code": "no_calls", "message": "x".repeat(301)}]});
        let x = render(&env);
        for p in [
            "<property name=\"attempt_id\" value=\"a\"/>",
            "<property name=\"test_run_id\" value=\"run-1\"/>",
            "<property name=\"started_at\" value=\"2026-01-01T00:00:02Z\"/>",
            "<property name=\"ended_at\" value=\"2026-01-01T00:00:01Z\"/>",
            "<property name=\"verdict\" value=\"fail\"/>",
            "<property name=\"pin.crm/book\" value=\"revision 3 sha256:ab\"/>",
        ] {
            assert!(x.contains(p), "{p}: {x}");
        }
        assert_eq!(x.matches("<property ").count(), 6, "{x}");
        // An end before the start is no time at all, never a negative one.
        assert!(x.contains("time=\"0.000\""), "{x}");
        // A failure's message attribute is its first line, cut past 300 characters.
        assert_eq!(first_line(&"y".repeat(300)), "y".repeat(300));
        assert_eq!(
            first_line(&format!("{}\nsecond", "y".repeat(301))),
            format!("{}…", "y".repeat(300))
        );
        assert!(
            x.contains(&format!("message=\"{}…\"", "x".repeat(300))),
            "{x}"
        );
    }
}
