//! Tool-call contracts and agent-side events end to end (docs/src/reference/contracts.md, docs/src/reference/events.md): a scripted agent plays
//! the HealthPlus booking flow over plain HTTP against a copy of `examples/healthplus`, then
//! variants each break one rule and fail that check; the settlement contract; the five
//! negative tests of seed 003 through the `understudy verify` / `understudy evidence` exit
//! codes; `check` over contracts; the events endpoint (201/409/404/422, durability).

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use understudy::app::AppOptions;
use understudy::config::Config;

use crate::support::{healthplus, Attempt, Resp, Server};

const PHONE: &str = "+1 555 0100";
const ADA: &str = "003Hp00000Ab12CAAR";
const BOOKING: &str = "book_appointment_contract";
const SETTLEMENT: &str = "settlement_contract";

fn config(dir: &Path) -> Config {
    Config::load(&dir.join("understudy.json")).expect("project loads")
}

async fn start(dir: &Path) -> Server {
    Server::start_with(AppOptions::new(config(dir))).await
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn understudy(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(args)
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run understudy");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The scripted agent: one attempt, plain HTTP through the attempt's base URL.
struct Agent<'a> {
    server: &'a Server,
    attempt: Attempt,
}

impl<'a> Agent<'a> {
    async fn new(server: &'a Server, body: Value) -> Agent<'a> {
        let attempt = server.attempt(body).await;
        Agent { server, attempt }
    }

    fn id(&self) -> &str {
        &self.attempt.id
    }

    async fn lookup(&self, phone: &str) -> Value {
        let soql =
            format!("SELECT Id, FirstName, LastName, Phone FROM Contact WHERE Phone = '{phone}'");
        let q: String = soql
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let r = self
            .server
            .call(
                "GET",
                &format!(
                    "{}/services/data/v59.0/query?q={q}",
                    self.attempt.base("crm")
                ),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    }

    async fn post(&self, sobject: &str, body: Value, key: Option<&str>) -> Resp {
        let mut headers = Vec::new();
        if let Some(k) = key {
            headers.push(("Idempotency-Key", k));
        }
        self.server
            .call(
                "POST",
                &format!(
                    "{}/services/data/v59.0/sobjects/{sobject}",
                    self.attempt.base("crm")
                ),
                Some(&body),
                &headers,
            )
            .await
    }

    async fn book(&self, contact: &str, key: Option<&str>) -> Resp {
        self.post(
            "Appointment__c",
            json!({"Contact__c": contact, "Requested_Date__c": "2025-03-10"}),
            key,
        )
        .await
    }

    async fn event(&self, body: Value) -> Resp {
        self.server
            .call(
                "POST",
                &format!("/_understudy/api/attempts/{}/events", self.id()),
                Some(&body),
                &[],
            )
            .await
    }

    async fn say(&self, name: &str) -> u64 {
        let r = self
            .event(json!({"name": name, "kind": "agent_message", "text": "You're booked."}))
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        r.json()["sequence"].as_u64().unwrap()
    }

    async fn end(&self) -> Value {
        let r = self
            .server
            .call(
                "DELETE",
                &format!("/_understudy/api/attempts/{}", self.id()),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    }

    async fn evidence(&self) -> Value {
        self.server.evidence(self.id()).await
    }
}

/// The contract result `id` of an envelope.
fn result<'v>(env: &'v Value, id: &str) -> &'v Value {
    env["contract_results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["contract_id"] == id)
        .unwrap_or_else(|| panic!("no result for {id}: {env:#}"))
}

/// The ids of the checks of contract `id` that did not pass, with their status.
fn not_passed(env: &Value, id: &str) -> Vec<(String, String)> {
    result(env, id)["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] != "passed")
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn failed(ids: &[&str]) -> Vec<(String, String)> {
    ids.iter()
        .map(|i| (i.to_string(), "failed".to_string()))
        .collect()
}

fn booking() -> Value {
    json!({"test_run_id": "run_1", "contracts": [BOOKING]})
}

/// The booking flow as the contract wants it: lookup → book with the looked-up id → tell the
/// caller → end.
async fn good_booking(agent: &Agent<'_>) {
    let found = agent.lookup(PHONE).await;
    let id = found["records"][0]["Id"].as_str().unwrap().to_string();
    assert_eq!(id, ADA);
    let r = agent.book(&id, Some("book-1")).await;
    assert_eq!(r.status, 201, "{}", r.text);
    agent.say("told_caller_booked").await;
    agent.end().await;
}

#[tokio::test]
async fn the_scripted_agent_satisfies_the_booking_contract() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let agent = Agent::new(&server, booking()).await;
    assert!(agent.attempt.body["contracts"][BOOKING]["contract_hash"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    good_booking(&agent).await;
    let env = agent.evidence().await;
    assert_eq!(not_passed(&env, BOOKING), vec![], "{env:#}");
    assert_eq!(result(&env, BOOKING)["status"], "passed");
    assert_eq!(env["verdict"], "pass", "{:#}", env["verdict_reasons"]);
    assert_eq!(env["verdict_reasons"], json!([]));
    // Calls and the event share one sequence; the end snapshot is the final state.
    assert_eq!(env["tool_events"].as_array().unwrap().len(), 2);
    assert_eq!(env["events"][0]["sequence"], 3);
    assert_eq!(env["events"][0]["name"], "told_caller_booked");
    assert_eq!(env["final_state"]["crm"]["appointment_booked"], true);
    assert_eq!(env["cleanup"]["remaining_state_keys"], 0);
    // POST /verify over the loaded set gives the same result.
    let r = server
        .call(
            "POST",
            &format!("/_understudy/api/attempts/{}/verify", agent.id()),
            Some(&json!({"contracts": [BOOKING]})),
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["passed"], true);
    assert_eq!(r.json()["contract_results"][0]["status"], "passed");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn booking_before_the_lookup_fails_required_before() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let agent = Agent::new(&server, booking()).await;
    assert_eq!(agent.book(ADA, Some("k")).await.status, 201);
    agent.lookup(PHONE).await;
    agent.say("told_caller_booked").await;
    agent.end().await;
    let env = agent.evidence().await;
    // Booking before any lookup also means the contact id cannot have come from one.
    assert_eq!(
        not_passed(&env, BOOKING),
        failed(&[
            "preconditions.required_before[crm/lookup_contact_by_phone]",
            "arguments.sources[Contact__c]"
        ]),
        "{env:#}"
    );
    let check = &result(&env, BOOKING)["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "preconditions.required_before[crm/lookup_contact_by_phone]")
        .unwrap()["evidence"];
    assert!(check.as_str().unwrap().contains("sequence 1"), "{check}");
    assert_eq!(env["verdict"], "fail");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn an_invented_contact_id_fails_the_source_check() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let agent = Agent::new(&server, booking()).await;
    agent.lookup(PHONE).await;
    assert_eq!(
        agent.book("003Hp00000Zz999AAA", Some("k")).await.status,
        201
    );
    agent.say("told_caller_booked").await;
    agent.end().await;
    let env = agent.evidence().await;
    assert_eq!(
        not_passed(&env, BOOKING),
        failed(&["arguments.sources[Contact__c]"]),
        "{env:#}"
    );
    assert_eq!(env["verdict"], "fail");
    let reasons = env["verdict_reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert_eq!(
        reasons[0]["code"],
        format!("contract:{BOOKING}:arguments.sources[Contact__c]"),
        "{reasons:?}"
    );
    // The UI's attempt list shows the same verdict and its codes (not one of its own).
    let list = server.call("GET", "/_understudy/ui/", None, &[]).await;
    assert_eq!(list.status, 200);
    let row = list
        .text
        .lines()
        .find(|l| l.contains(&format!("data-attempt=\"{}\"", agent.id())))
        .expect("the attempt's row");
    assert!(row.contains("class=\"fail\""), "{row}");
    assert!(
        row.contains(&format!("contract:{BOOKING}:arguments.sources[Contact__c]")),
        "{row}"
    );
    // And its JUnit: the failing check is a failure of the contract's own case.
    let junit = server
        .call(
            "GET",
            &format!("/_understudy/ui/attempts/{}/junit.xml", agent.id()),
            None,
            &[],
        )
        .await;
    assert!(
        junit
            .text
            .contains(&format!("classname=\"understudy.contract.{BOOKING}\"")),
        "{}",
        junit.text
    );
    assert!(!junit.text.contains("name=\"other"), "{}", junit.text);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn booking_twice_with_different_keys_fails_exactly_once_while_a_replayed_retry_passes() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let agent = Agent::new(&server, booking()).await;
    agent.lookup(PHONE).await;
    assert_eq!(agent.book(ADA, Some("k1")).await.status, 201);
    assert_eq!(agent.book(ADA, Some("k2")).await.status, 201);
    agent.say("told_caller_booked").await;
    agent.end().await;
    let env = agent.evidence().await;
    assert_eq!(
        not_passed(&env, BOOKING),
        failed(&["calls.exactly_once"]),
        "{env:#}"
    );
    assert_eq!(env["verdict"], "fail");

    // The retry of one logical action (same Idempotency-Key) is answered `replayed`: passes.
    let agent = Agent::new(&server, booking()).await;
    agent.lookup(PHONE).await;
    assert_eq!(agent.book(ADA, Some("k1")).await.status, 201);
    assert_eq!(agent.book(ADA, Some("k1")).await.status, 201);
    agent.say("told_caller_booked").await;
    agent.end().await;
    let env = agent.evidence().await;
    assert_eq!(env["tool_events"][2]["result_status"], "replayed");
    assert_eq!(not_passed(&env, BOOKING), vec![], "{env:#}");
    assert_eq!(env["verdict"], "pass");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn telling_the_caller_before_the_booking_fails_after_success_only() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let agent = Agent::new(&server, booking()).await;
    agent.lookup(PHONE).await;
    agent.say("told_caller_booked").await;
    assert_eq!(agent.book(ADA, Some("k")).await.status, 201);
    agent.end().await;
    let env = agent.evidence().await;
    assert_eq!(
        not_passed(&env, BOOKING),
        failed(&["expected.after_success_only[told_caller_booked]"]),
        "{env:#}"
    );

    // Without any booking at all: nothing proves the contract, so nothing passes.
    let agent = Agent::new(&server, booking()).await;
    agent.lookup(PHONE).await;
    agent.say("told_caller_booked").await;
    agent.end().await;
    let env = agent.evidence().await;
    assert_ne!(result(&env, BOOKING)["status"], "passed");
    assert!(not_passed(&env, BOOKING)
        .iter()
        .any(|(id, _)| id == "tool[crm/book_appointment]"));
    assert_eq!(env["verdict"], "fail");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn an_attempt_that_was_not_ended_fails_cleanup() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let agent = Agent::new(&server, booking()).await;
    agent.lookup(PHONE).await;
    assert_eq!(agent.book(ADA, Some("k")).await.status, 201);
    agent.say("told_caller_booked").await;
    let env = agent.evidence().await;
    // The live state stands in for the final state while the attempt runs.
    assert_eq!(env["final_state"]["crm"]["appointment_booked"], true);
    assert_eq!(
        not_passed(&env, BOOKING),
        failed(&["cleanup.required"]),
        "{env:#}"
    );
    assert_eq!(env["verdict"], "fail");
    server.stop().await.unwrap();
}

/// The settlement flow: the caller agrees to an amount (a `caller_message` event), the agent
/// records exactly that amount, the CRM stores it as a number (`$number`).
async fn settle(agent: &Agent<'_>, agreed: &str, sent: &str, run: &str) -> Value {
    let r = agent
        .event(json!({"name": "caller_agreed_amount", "kind": "caller_message",
                      "test_run_id": run, "text": "Yes, 1250.50 is fine", "data": {"amount": agreed}}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = agent
        .post(
            "Settlement__c",
            json!({"Claim__c": "a0AHp000002ClMbMAK", "Amount__c": sent, "CurrencyIsoCode": "USD"}),
            Some("settle-1"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    agent.end().await;
    agent.evidence().await
}

#[tokio::test]
async fn the_settlement_amount_comes_from_the_caller_and_is_stored_as_a_number() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let body = json!({"test_run_id": "run_s", "contracts": [SETTLEMENT]});
    let agent = Agent::new(&server, body.clone()).await;
    let env = settle(&agent, "1250.50", "1250.50", "run_s").await;
    assert_eq!(not_passed(&env, SETTLEMENT), vec![], "{env:#}");
    assert_eq!(env["tool_events"][0]["result"]["data"]["Amount__c"], 1250.5);
    assert_eq!(env["verdict"], "pass");

    // An amount the caller never agreed to: the source check fails (and the stored number).
    let agent = Agent::new(&server, body.clone()).await;
    let env = settle(&agent, "1250.50", "1520.50", "run_s").await;
    assert_eq!(
        not_passed(&env, SETTLEMENT),
        failed(&[
            "arguments.sources[Amount__c]",
            "expected.result[data.Amount__c]",
            "expected.final_state[crm.last_settlement_amount]"
        ]),
        "{env:#}"
    );
    server.stop().await.unwrap();
}

// ---- the five negative tests of seed 003, through the binary's exit codes ------------------

fn data_dir(dir: &Path) -> String {
    dir.join("data").display().to_string()
}

fn contract_file(dir: &Path, id: &str) -> String {
    dir.join("contracts")
        .join(format!("{id}.yaml"))
        .display()
        .to_string()
}

fn verify(dir: &Path, attempt: &str, contract: &str, format: &str) -> Run {
    understudy(&[
        "verify",
        attempt,
        "--contract",
        &contract_file(dir, contract),
        "--data-dir",
        &data_dir(dir),
        "--format",
        format,
    ])
}

fn evidence(dir: &Path, attempt: &str) -> Run {
    understudy(&[
        "evidence",
        attempt,
        "--config",
        &dir.join("understudy.json").display().to_string(),
    ])
}

#[tokio::test]
async fn negative_1_a_missing_tool_event_is_inconclusive_and_exits_1() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    // The expected booking never happens.
    let agent = Agent::new(&server, booking()).await;
    agent.lookup(PHONE).await;
    agent.end().await;
    let id = agent.id().to_string();
    // …and a good run, for the exit 0 beside it.
    let good = Agent::new(&server, booking()).await;
    good_booking(&good).await;
    let good_id = good.id().to_string();
    server.stop().await.unwrap();

    let r = verify(dir.path(), &id, BOOKING, "json");
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["passed"], false);
    assert_eq!(
        v["contract_results"][0]["status"], "inconclusive",
        "{:#}",
        v["contract_results"][0]["checks"]
    );
    let tool = &v["contract_results"][0]["checks"][0];
    assert_eq!(
        (tool["id"].as_str(), tool["status"].as_str()),
        (Some("tool[crm/book_appointment]"), Some("inconclusive"))
    );
    let r = evidence(dir.path(), &id);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains(
            "verdict fail: contract:book_appointment_contract:tool[crm/book_appointment]"
        ),
        "{}",
        r.stderr
    );

    let r = verify(dir.path(), &good_id, BOOKING, "text");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(
            "contract book_appointment_contract (blocking, policy healthplus_booking_v1, sha256:"
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("PASSED       preconditions.required_before[crm/lookup_contact_by_phone]: "),
        "{}",
        r.stdout
    );
    assert_eq!(evidence(dir.path(), &good_id).code, 0);
    // Without --contract: the pinned contracts.
    let r = understudy(&["verify", &good_id, "--data-dir", &data_dir(dir.path())]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}

#[tokio::test]
async fn negative_2_a_duplicate_side_effect_fails_while_a_replayed_retry_passes() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let dup = Agent::new(&server, booking()).await;
    dup.lookup(PHONE).await;
    dup.book(ADA, None).await;
    dup.book(ADA, None).await;
    dup.say("told_caller_booked").await;
    dup.end().await;
    let retry = Agent::new(&server, booking()).await;
    retry.lookup(PHONE).await;
    retry.book(ADA, Some("same")).await;
    retry.book(ADA, Some("same")).await;
    retry.say("told_caller_booked").await;
    retry.end().await;
    let (dup, retry) = (dup.id().to_string(), retry.id().to_string());
    server.stop().await.unwrap();

    let r = verify(dir.path(), &dup, BOOKING, "text");
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("FAILED       calls.exactly_once: "),
        "{}",
        r.stdout
    );
    assert_eq!(evidence(dir.path(), &dup).code, 1);
    assert_eq!(verify(dir.path(), &retry, BOOKING, "text").code, 0);
    assert_eq!(evidence(dir.path(), &retry).code, 0);
}

#[tokio::test]
async fn negative_3_an_event_of_another_run_breaks_the_correlation() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let body = json!({"test_run_id": "run_s", "contracts": [SETTLEMENT]});
    let agent = Agent::new(&server, body).await;
    let env = settle(&agent, "1250.50", "1250.50", "run_other").await;
    assert_eq!(
        not_passed(&env, SETTLEMENT),
        failed(&["evidence.correlation"]),
        "{env:#}"
    );
    let id = agent.id().to_string();
    server.stop().await.unwrap();
    let r = verify(dir.path(), &id, SETTLEMENT, "text");
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("FAILED       evidence.correlation: "),
        "{}",
        r.stdout
    );
    assert_eq!(evidence(dir.path(), &id).code, 1);
}

#[tokio::test]
async fn negative_4_a_booked_claim_after_a_failed_booking_fails_after_success_only() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let mut ids = Vec::new();
    // (a) an input error (no date), (b) the mock's `no_slots` answer (400), then "booked".
    let a = Agent::new(&server, booking()).await;
    a.lookup(PHONE).await;
    let r = a
        .post("Appointment__c", json!({"Contact__c": ADA}), Some("k"))
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    a.say("told_caller_booked").await;
    a.end().await;
    ids.push(a.id().to_string());
    let b = Agent::new(
        &server,
        json!({"contracts": [BOOKING], "variants": {"crm/book_appointment": "no_slots"}}),
    )
    .await;
    b.lookup(PHONE).await;
    assert_eq!(b.book(ADA, Some("k")).await.status, 400);
    b.say("told_caller_booked").await;
    b.end().await;
    ids.push(b.id().to_string());
    for id in &ids {
        let env = server.evidence(id).await;
        let checks = not_passed(&env, BOOKING);
        assert!(
            checks.contains(&(
                "expected.after_success_only[told_caller_booked]".to_string(),
                "failed".to_string()
            )),
            "{id}: {checks:?}"
        );
        assert_eq!(env["verdict"], "fail");
    }
    server.stop().await.unwrap();
    for id in &ids {
        let r = verify(dir.path(), id, BOOKING, "text");
        assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
        assert!(r
            .stdout
            .contains("FAILED       expected.after_success_only[told_caller_booked]: "));
    }
}

#[tokio::test]
async fn negative_5_unverified_cleanup_fails() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let agent = Agent::new(&server, booking()).await;
    agent.lookup(PHONE).await;
    agent.book(ADA, Some("k")).await;
    agent.say("told_caller_booked").await;
    let id = agent.id().to_string();
    server.stop().await.unwrap();
    // Never ended: the contract's cleanup check fails (the attempt's own rules do not).
    let r = verify(dir.path(), &id, BOOKING, "text");
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("FAILED       cleanup.required: "),
        "{}",
        r.stdout
    );
    let r = evidence(dir.path(), &id);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("cleanup.required"), "{}", r.stderr);
}

#[tokio::test]
async fn verify_usage_errors_exit_2() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let agent = Agent::new(&server, json!({})).await;
    let id = agent.id().to_string();
    server.stop().await.unwrap();
    // No contract given and none pinned.
    let r = understudy(&["verify", &id, "--data-dir", &data_dir(dir.path())]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--contract"), "{}", r.stderr);
    // A broken contract file, an unknown attempt, a missing data dir.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "version: 1\nid: bad\ntool: crm/x\nextra: 1\n").unwrap();
    let r = understudy(&[
        "verify",
        &id,
        "--contract",
        bad.to_str().unwrap(),
        "--data-dir",
        &data_dir(dir.path()),
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("bad.yaml: extra"), "{}", r.stderr);
    assert_eq!(verify(dir.path(), "nope", BOOKING, "text").code, 2);
    let r = understudy(&[
        "verify",
        &id,
        "--contract",
        &contract_file(dir.path(), BOOKING),
        "--data-dir",
        "/nonexistent/understudy",
    ]);
    assert_eq!(r.code, 2);
}

// ---- binding, hot reload, check ---------------------------------------------------------

#[tokio::test]
async fn creating_an_attempt_with_an_unknown_contract_is_422_naming_it() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let r = server
        .call(
            "POST",
            "/_understudy/api/attempts",
            Some(&json!({"contracts": [BOOKING, "nope"]})),
            &[],
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.text);
    let v = r.json();
    assert_eq!(v["error"]["code"], "unknown_contract");
    assert!(v["error"]["message"].as_str().unwrap().contains("`nope`"));
    assert_eq!(
        v["error"]["details"][0]["unknown_contracts"],
        json!(["nope"])
    );
    let r = server
        .call(
            "POST",
            &format!(
                "/_understudy/api/attempts/{}/verify",
                server.default_attempt()
            ),
            Some(&json!({"contracts": ["nope"]})),
            &[],
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.text);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn contracts_hot_reload_for_new_attempts_and_running_ones_keep_their_pin() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let _watcher = understudy::server::reload::Watcher::start(server.app.clone());
    let old = Agent::new(&server, booking()).await;
    let old_hash = old.attempt.body["contracts"][BOOKING]["contract_hash"].clone();
    let file = dir.path().join("contracts").join(format!("{BOOKING}.yaml"));
    let text = std::fs::read_to_string(&file).unwrap();
    let mut reloads = server.app.integrations.subscribe();

    // A broken edit is refused: the previous set keeps serving.
    std::fs::write(
        &file,
        text.replace("exactly_once: true", "exactly_once: true\n  sometimes: 2"),
    )
    .unwrap();
    // Wait (bounded) until the reload has seen the edit: the poller may tick between writes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.app.contracts.problems().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the broken edit was never seen"
        );
        let _ =
            tokio::time::timeout(std::time::Duration::from_millis(500), reloads.changed()).await;
    }
    let same = Agent::new(&server, booking()).await;
    assert_eq!(
        same.attempt.body["contracts"][BOOKING]["contract_hash"],
        old_hash
    );

    // A good edit (now advisory) serves new attempts; a new file is available too.
    std::fs::write(&file, text.replace("risk: blocking", "risk: advisory")).unwrap();
    std::fs::write(
        dir.path().join("contracts").join("lookup_only.json"),
        r#"{"version": 1, "id": "lookup_only", "tool": "crm/lookup_contact_by_phone"}"#,
    )
    .unwrap();
    // Both files may land in one poll or in two: wait (bounded) until both are served.
    let both = vec![BOOKING.to_string(), "lookup_only".to_string()];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !(server.app.contracts.problems().is_empty() && server.app.contracts.pin(&both).is_ok()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the good edit was never served"
        );
        let _ =
            tokio::time::timeout(std::time::Duration::from_millis(500), reloads.changed()).await;
    }
    let new = Agent::new(&server, json!({"contracts": [BOOKING, "lookup_only"]})).await;
    assert_ne!(
        new.attempt.body["contracts"][BOOKING]["contract_hash"],
        old_hash
    );

    // The old attempt still evaluates its pinned (blocking) version: nothing booked → fail.
    old.lookup(PHONE).await;
    old.end().await;
    let env = old.evidence().await;
    assert_eq!(result(&env, BOOKING)["risk"], "blocking");
    assert_eq!(result(&env, BOOKING)["contract_hash"], old_hash);
    assert_eq!(env["verdict"], "fail");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_broken_contract_refuses_the_start() {
    let dir = healthplus();
    std::fs::write(
        dir.path().join("contracts").join("x.yaml"),
        "version: 1\nid: x\ntool: crm/no_such_tool\n",
    )
    .unwrap();
    let err = understudy::app::App::build(AppOptions::new(config(dir.path())))
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("x.yaml: tool: unknown operation `crm/no_such_tool`"),
        "{msg}"
    );
}

#[test]
fn check_rejects_an_unknown_tool_and_an_argument_path_the_schema_forbids() {
    let dir = healthplus();
    let cfg = dir.path().join("understudy.json").display().to_string();
    let r = understudy(&["check", "--config", &cfg]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("ok (6 operations), 3 tool-call contracts"),
        "{}",
        r.stderr
    );
    std::fs::write(
        dir.path().join("contracts").join("bad_contact.yaml"),
        "version: 1\nid: bad_contact\ntool: crm/create_contact\narguments:\n  required: [FirstName, Phone_Number]\n  sources:\n    Phone: {result_of: crm/lookup_by_email, path: \"data.*\"}\n  values:\n    LastName: {pattern: \"([a-z\"}\n",
    )
    .unwrap();
    let r = understudy(&["check", "--config", &cfg, "--format", "json"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let file = dir
        .path()
        .join("contracts")
        .join("bad_contact.yaml")
        .display()
        .to_string();
    let problems: Vec<(String, String)> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["file"], json!(file));
            (
                p["path"].as_str().unwrap().to_string(),
                p["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let paths: Vec<&str> = problems.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        paths.contains(&"arguments.values.LastName.pattern"),
        "{problems:?}"
    );
    // The model's problems come first; the catalog checks run once the model is valid.
    let fixed = std::fs::read_to_string(dir.path().join("contracts/bad_contact.yaml"))
        .unwrap()
        .replace("([a-z", "^[A-Z]");
    std::fs::write(dir.path().join("contracts/bad_contact.yaml"), fixed).unwrap();
    let r = understudy(&["check", "--config", &cfg]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(&format!("{file}: arguments.required[1]: the input schema of crm/create_contact does not allow `Phone_Number`")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "{file}: arguments.sources.Phone.result_of: unknown operation `crm/lookup_by_email`"
        )),
        "{}",
        r.stdout
    );
}

// ---- the events endpoint ----------------------------------------------------------------

#[tokio::test]
async fn events_endpoint_answers_201_404_409_422_and_events_are_durable() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let agent = Agent::new(&server, json!({"test_run_id": "r"})).await;
    agent.lookup(PHONE).await;
    let r = agent
        .event(json!({"name": "checkpoint_1", "kind": "checkpoint", "test_run_id": "r", "data": {"step": 1}}))
        .await;
    assert_eq!((r.status, r.json()), (201, json!({"sequence": 2})));
    for (body, path) in [
        (json!({"kind": "checkpoint"}), "name"),
        (json!({"name": "", "kind": "checkpoint"}), "name"),
        (json!({"name": "n", "kind": "shout"}), "kind"),
        (json!({"name": "n"}), "kind"),
        (
            json!({"name": "n", "kind": "checkpoint", "data": [1]}),
            "data",
        ),
        (
            json!({"name": "n", "kind": "checkpoint", "text": 3}),
            "text",
        ),
        (
            json!({"name": "n", "kind": "checkpoint", "test_run_id": 3}),
            "test_run_id",
        ),
        (
            json!({"name": "n", "kind": "checkpoint", "extra": 1}),
            "extra",
        ),
        (json!([1]), ""),
    ] {
        let r = agent.event(body.clone()).await;
        assert_eq!(r.status, 422, "{body}: {}", r.text);
        let v = r.json();
        assert_eq!(v["error"]["code"], "invalid_event");
        assert_eq!(v["error"]["details"][0]["path"], path, "{body}");
    }
    let r = server
        .call_raw(
            "POST",
            &format!("/_understudy/api/attempts/{}/events", agent.id()),
            "{not json",
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let r = server
        .call(
            "POST",
            "/_understudy/api/attempts/00000000-0000-4000-8000-000000000000/events",
            Some(&json!({"name": "n", "kind": "checkpoint"})),
            &[],
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.text);
    let r = server
        .call(
            "GET",
            &format!("/_understudy/api/attempts/{}/events", agent.id()),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 405);
    // The next call continues the one sequence.
    agent.lookup(PHONE).await;
    agent.end().await;
    let r = agent
        .event(json!({"name": "late", "kind": "agent_message"}))
        .await;
    assert_eq!(r.status, 409, "{}", r.text);
    assert_eq!(r.json()["error"]["code"], "attempt_ended");
    let id = agent.id().to_string();
    server.stop().await.unwrap();

    // After a restart the event is still there, in its place.
    let server = start(dir.path()).await;
    let env = server.evidence(&id).await;
    assert_eq!(env["events"].as_array().unwrap().len(), 1, "{env:#}");
    assert_eq!(env["events"][0]["sequence"], 2);
    assert_eq!(env["events"][0]["data"], json!({"step": 1}));
    assert_eq!(env["tool_events"][1]["sequence"], 3);
    assert_eq!(env["verdict"], "pass", "{:#}", env["verdict_reasons"]);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn event_data_is_redacted_on_export() {
    let dir = healthplus();
    let mut cfg = config(dir.path());
    cfg.redact = vec!["amount".into()];
    let server = Server::start_with(AppOptions::new(cfg)).await;
    let agent = Agent::new(&server, json!({})).await;
    let r = agent
        .event(json!({"name": "caller_agreed_amount", "kind": "caller_message", "data": {"amount": "1250.50", "keep": 1}}))
        .await;
    assert_eq!(r.status, 201);
    let env = agent.evidence().await;
    assert_eq!(
        env["events"][0]["data"],
        json!({"amount": "[redacted]", "keep": 1})
    );
    server.stop().await.unwrap();
}

// ---- reading a running server's evidence (issue 22, item 5) ------------------------------

/// `evidence`, `verify` (text and JSON, pinned contracts) and `report` (every format) of
/// `attempt`, reading from `source` (`--url …` or `--data-dir …`): (exit code, stdout) each.
fn readers(attempt: &str, source: &[&str]) -> Vec<(String, i32, String)> {
    let commands: [&[&str]; 6] = [
        &["evidence"],
        &["verify"],
        &["verify", "--format", "json"],
        &["report", "--format", "json"],
        &["report", "--format", "junit"],
        &["report", "--format", "html"],
    ];
    commands
        .iter()
        .map(|c| {
            let mut args = c.to_vec();
            args.insert(1, attempt);
            args.extend_from_slice(source);
            let r = understudy(&args);
            (c.join(" "), r.code, r.stdout)
        })
        .collect()
}

/// Issue 22 (5): while a server holds the data dir, `evidence`, `verify` and `report` read
/// the attempt from its admin API with `--url` and print exactly what the data dir gives once
/// the server stopped; opening the held data dir fails with a message that names `--url`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_verify_and_report_read_a_running_server_with_url() {
    let dir = healthplus();
    let server = start(dir.path()).await;
    let good = Agent::new(&server, booking()).await;
    good_booking(&good).await;
    let bad = Agent::new(&server, booking()).await;
    bad.lookup(PHONE).await;
    bad.end().await;
    let ids = [good.id().to_string(), bad.id().to_string()];
    let url = format!("http://{}", server.addr);
    let data = data_dir(dir.path());

    let (live, locked) = {
        let (ids, url, data) = (ids.clone(), url.clone(), data.clone());
        tokio::task::spawn_blocking(move || {
            let live: Vec<_> = ids.iter().map(|id| readers(id, &["--url", &url])).collect();
            let locked: Vec<Run> = ["evidence", "verify", "report"]
                .iter()
                .map(|c| {
                    let mut args = vec![*c, &ids[0], "--data-dir", &data];
                    if *c == "report" {
                        args.extend(["--format", "json"]);
                    }
                    understudy(&args)
                })
                .collect();
            (live, locked)
        })
        .await
        .unwrap()
    };
    for (c, r) in ["evidence", "verify", "report"].iter().zip(&locked) {
        assert_eq!(r.code, 2, "{c} on a held data dir: {}", r.stderr);
        assert!(
            r.stderr.contains("--url"),
            "{c}: the locked error names --url: {}",
            r.stderr
        );
    }
    server.stop().await.unwrap();

    let stopped: Vec<_> = ids
        .iter()
        .map(|id| readers(id, &["--data-dir", &data]))
        .collect();
    assert_eq!(live, stopped);
    // Not a comparison of two empty outputs: the good run passes, the bad one fails.
    assert!(
        live[0]
            .iter()
            .all(|(_, code, out)| *code == 0 && !out.is_empty()),
        "{live:?}"
    );
    assert!(
        live[1]
            .iter()
            .all(|(_, code, out)| *code == 1 && !out.is_empty()),
        "{live:?}"
    );
    assert!(
        live[0][0].2.contains("\"verdict\":\"pass\"}"),
        "{}",
        live[0][0].2
    );
}

/// `--url` with a server that has an admin token: `--admin-token` is sent as the bearer; a
/// refusal (no token) is a clear error naming `--admin-token`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_with_url_sends_the_admin_token() {
    let dir = healthplus();
    let mut opts = AppOptions::new(config(dir.path()));
    opts.admin_token = Some("s3cret-admin".into());
    let server = Server::start_with(opts).await;
    let url = format!("http://{}", server.addr);
    let (with, without) = tokio::task::spawn_blocking(move || {
        (
            understudy(&[
                "evidence",
                "default",
                "--url",
                &url,
                "--admin-token",
                "s3cret-admin",
            ]),
            understudy(&["evidence", "default", "--url", &url]),
        )
    })
    .await
    .unwrap();
    // The default attempt saw nothing: the verdict (read through the token) is `no_calls`.
    assert_eq!(with.code, 1, "{}", with.stderr);
    assert!(with.stderr.contains("no_calls"), "{}", with.stderr);
    assert!(
        with.stdout.contains("\"verdict\":\"fail\"}"),
        "{}",
        with.stdout
    );
    assert_eq!(without.code, 2, "{}", without.stderr);
    assert!(
        without.stderr.contains("--admin-token"),
        "{}",
        without.stderr
    );
    assert!(!without.stderr.contains("s3cret"), "{}", without.stderr);
    server.stop().await.unwrap();
}
