//! What stood in the way of the agent frameworks (issue 33, item 4), each end to end with the
//! real binary: a forgotten attempt token is said once, first, with its fix; `understudy
//! evidence default --data-dir D` reads the default attempt. (The `$json` path step, the
//! least-recently-used session eviction and the unknown tool that is not a write have their
//! tests beside the code: `evidence::verify::{path, eval_tests}`, `profile::mcp::session`,
//! `tests/it/mcp.rs`; the framework matrix in `clients/agents/` runs all of them for real.)

use std::process::Command;

use serde_json::{json, Value};

use crate::support::{standard_project, Server};

const LOOKUP: &str = "/services/data/v60.0/query?q=SELECT%20Id,%20FirstName%20FROM%20Contact%20WHERE%20Phone%20=%20'%2B15550001'";

fn understudy(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(args)
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `default` names the default attempt with `--data-dir` too (it was an alias of `--url`
/// only): the one the last server start opened, holding the calls without a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_default_reads_the_default_attempt_from_the_data_dir() {
    let p = standard_project();
    let dir = p.data_dir();
    let dir = dir.to_str().unwrap();
    let (code, _, err) = understudy(&["evidence", "default", "--data-dir", dir]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = understudy(&["verify", "default", "--data-dir", dir]);
    assert_eq!(code, 2, "{err}");
    let s = Server::start(&p).await;
    let default_id = s.default_attempt();
    // One call without a token: it lands in the default attempt.
    let r = s.call("GET", &format!("/crm{LOOKUP}"), None, &[]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let a = s.attempt(json!({})).await;
    assert_ne!(a.id, default_id);
    s.stop().await.unwrap();
    let (code, out, err) = understudy(&["evidence", "default", "--data-dir", dir]);
    assert!(!err.contains("no attempt"), "{err}");
    assert!(code == 0 || code == 1, "{code}: {err}");
    let env: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(env["attempt_id"], json!(default_id), "{env:#}");
    assert_eq!(env["tool_events"].as_array().unwrap().len(), 1, "{env:#}");

    // `verify` and `report` take the same alias: a contract the default attempt's one lookup
    // breaks (the update was never called) fails it, by name.
    let contract = p.path().join("update_contract.yaml");
    std::fs::write(
        &contract,
        "version: 1\nid: update_contract\nrisk: blocking\ntool: crm/update_contact\n\
         preconditions:\n  required_before: [crm/lookup_contact_by_phone]\n",
    )
    .unwrap();
    let contract = contract.to_str().unwrap();
    let (code, out, err) = understudy(&[
        "verify",
        "default",
        "--data-dir",
        dir,
        "--contract",
        contract,
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["verdict"], json!("fail"), "{v:#}");
    assert!(v.to_string().contains("update_contract"), "{v:#}");
    let reports = p.path().join("reports");
    let (code, out, err) = understudy(&[
        "report",
        "default",
        "--data-dir",
        dir,
        "--report-dir",
        reports.to_str().unwrap(),
    ]);
    assert!(code == 0 || code == 1, "{code}: {out}{err}");
    let env: Value =
        serde_json::from_str(&std::fs::read_to_string(reports.join("evidence.json")).unwrap())
            .unwrap();
    assert_eq!(env["attempt_id"], json!(default_id), "{env:#}");
}

/// An agent that calls `$UNDERSTUDY_URL/crm/…` without the `Understudy-Attempt` header during
/// `understudy test`: the run fails `outside_attempt`, and that reason comes first, once,
/// saying which header or variable was missing and how many calls went to the default attempt.
#[test]
fn a_forgotten_attempt_header_is_said_first_with_the_fix() {
    let dir = crate::support::healthplus();
    let cfg = dir.path().join("understudy.json");
    let reports = dir.path().join("reports");
    let agent = format!(
        "for i in 1 2 3; do curl -s -o /dev/null \"$UNDERSTUDY_URL/crm{LOOKUP}\" || exit 9; done"
    );
    let (code, _, err) = understudy(&[
        "test",
        "--config",
        cfg.to_str().unwrap(),
        "--contract",
        "book_appointment_contract",
        "--allow-no-calls",
        "--report-dir",
        reports.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &agent,
    ]);
    assert_eq!(code, 1, "{err}");
    let env: Value =
        serde_json::from_slice(&std::fs::read(reports.join("evidence.json")).unwrap()).unwrap();
    let reasons = env["verdict_reasons"].as_array().unwrap();
    assert_eq!(reasons[0]["code"], "outside_attempt", "{env:#}");
    let first = reasons[0]["message"].as_str().unwrap();
    for needle in [
        "3 call(s) reached the default attempt",
        "Understudy-Attempt: $UNDERSTUDY_ATTEMPT",
        "$UNDERSTUDY_URL_<INTEGRATION>",
    ] {
        assert!(first.contains(needle), "{needle:?} missing from {first}");
    }
    let outside = reasons
        .iter()
        .filter(|r| r["code"] == "outside_attempt")
        .count();
    assert_eq!(outside, 1, "said once: {env:#}");
    // On the terminal: one reason a line, the forgotten header first.
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("  - ")).collect();
    assert!(lines[0].starts_with("  - outside_attempt: "), "{err}");
    assert_eq!(lines.len(), reasons.len(), "{err}");
}
