//! Model-based test of the verdict: seeded, generated histories of an attempt — calls of each
//! result status (ok, input error, harness error, write), agent-side events, store failures
//! (the event write failing, and the durable mark failing too), restarts, the end, late calls,
//! calls outside the attempt and histories with nothing in them — run against the real server
//! with the real embedded store. An oracle written here, independently of
//! `src/evidence/verdict.rs`, says which histories must fail; the property is "never `pass`
//! where the oracle says `fail`". proptest shrinks a failing history to a minimal one.
//!
//! `UNDERSTUDY_MODEL_CASES` (default 1000) and `UNDERSTUDY_MODEL_SEED` (default 29) set the
//! number of histories and the seed; many histories share one server process.
//!
//! Not covered here: kill -9 (the in-process server cannot be killed; `tests/it/store.rs` and
//! `durability.rs` kill real processes) and the PostgreSQL store.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::json;

use crate::support::{standard_project, Project, Server};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// A lookup answered 200 (`ok`).
    Ok,
    /// A lookup whose phone breaks the input schema (`input_error`, 400).
    Input,
    /// A request no operation matches (`harness_error` `unmatched_request`).
    Harness,
    /// A write (the counter).
    Write,
    /// An agent-side event.
    Event,
    /// A lookup whose event write fails (500 `store_error`).
    StoreFail,
    /// The same, and the durable mark of the failure fails too.
    MarkFail,
    /// The server stops and starts again.
    Restart,
    /// `DELETE /attempts/{id}`.
    End,
    /// A lookup without the attempt's token (the default attempt).
    Outside,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::Ok),
        2 => Just(Op::Input),
        1 => Just(Op::Harness),
        3 => Just(Op::Write),
        2 => Just(Op::Event),
        1 => Just(Op::StoreFail),
        1 => Just(Op::MarkFail),
        1 => Just(Op::Restart),
        1 => Just(Op::End),
        1 => Just(Op::Outside),
    ]
}

/// The oracle: whether the history must fail. Written from the rules as a user reads them,
/// not from the verdict's code.
fn must_fail(exclusive: bool, ops: &[Op]) -> bool {
    let mut ended = false;
    let mut happened = 0;
    let mut fail = false;
    for op in ops {
        match op {
            Op::Ok | Op::Input | Op::Write => {
                if ended {
                    fail = true; // a late call
                }
                happened += 1;
            }
            Op::Harness | Op::StoreFail | Op::MarkFail => {
                fail = true;
                happened += 1;
            }
            // Refused after the end (409), so it is not evidence then.
            Op::Event if !ended => happened += 1,
            Op::Event => {}
            Op::Outside if exclusive && !ended => fail = true,
            Op::Outside => {}
            Op::End => ended = true,
            Op::Restart => {}
        }
    }
    fail || happened == 0
}

const LOOKUP: &str = "/services/data/v60.0/query?q=SELECT%20Id,%20FirstName%20FROM%20Contact%20WHERE%20Phone%20=%20'%2B15550001'";
const BAD_LOOKUP: &str = "/services/data/v60.0/query?q=SELECT%20Id,%20FirstName%20FROM%20Contact%20WHERE%20Phone%20=%20'abc'";

/// Runs one history on `server` (restarting it in place); the verdict it ends with.
async fn run(server: &mut Option<Server>, p: &Project, exclusive: bool, ops: &[Op]) -> String {
    let a = server
        .as_ref()
        .unwrap()
        .attempt(json!({ "exclusive": exclusive }))
        .await;
    let crm = a.base("crm");
    for (i, op) in ops.iter().enumerate() {
        let s = server.as_ref().unwrap();
        match op {
            Op::Ok => {
                s.call("GET", &format!("{crm}{LOOKUP}"), None, &[]).await;
            }
            Op::Input => {
                s.call("GET", &format!("{crm}{BAD_LOOKUP}"), None, &[])
                    .await;
            }
            Op::Harness => {
                s.call(
                    "GET",
                    // A built-in without a default answer: `no_mock` (sObject rows answer
                    // from the Salesforce default org).
                    &format!("{crm}/services/data/v60.0/sobjects/Nope/describe"),
                    None,
                    &[],
                )
                .await;
            }
            Op::Write => {
                s.call(
                    "POST",
                    &format!("{}/counter", a.base("api")),
                    Some(&json!({ "n": i })),
                    &[],
                )
                .await;
            }
            Op::Event => {
                s.call(
                    "POST",
                    &format!("/_understudy/api/attempts/{}/events", a.id),
                    Some(&json!({ "name": "said", "kind": "agent_message" })),
                    &[],
                )
                .await;
            }
            Op::StoreFail | Op::MarkFail => {
                if *op == Op::MarkFail {
                    s.app.store.fail_next_marks_for_test(1);
                }
                s.app.store.fail_next_flushes_for_test(1);
                s.call("GET", &format!("{crm}{LOOKUP}"), None, &[]).await;
                s.app.store.fail_next_flushes_for_test(0);
                s.app.store.fail_next_marks_for_test(0);
            }
            Op::Restart => {
                server.take().unwrap().stop().await.unwrap();
                *server = Some(Server::start(p).await);
            }
            Op::End => {
                s.call(
                    "DELETE",
                    &format!("/_understudy/api/attempts/{}", a.id),
                    None,
                    &[],
                )
                .await;
            }
            Op::Outside => {
                s.call("GET", &format!("/crm{LOOKUP}"), None, &[]).await;
            }
        }
    }
    let env = server.as_ref().unwrap().evidence(&a.id).await;
    env["verdict"].as_str().unwrap_or("?").to_string()
}

#[test]
fn never_pass_where_the_oracle_says_fail_on_the_embedded_store() {
    let cases: u32 = std::env::var("UNDERSTUDY_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let seed: u64 = std::env::var("UNDERSTUDY_MODEL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(29);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let p = standard_project();
    let server = std::cell::RefCell::new(Some(rt.block_on(Server::start(&p))));
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let histories = (any::<bool>(), proptest::collection::vec(op(), 0..8));
    let ran = std::cell::Cell::new(0u32);
    let failing = std::cell::Cell::new(0u32);
    let result = runner.run(&histories, |(exclusive, ops)| {
        ran.set(ran.get() + 1);
        let expected_fail = must_fail(exclusive, &ops);
        failing.set(failing.get() + u32::from(expected_fail));
        let mut guard = server.borrow_mut();
        let verdict = rt.block_on(run(&mut guard, &p, exclusive, &ops));
        if expected_fail && verdict != "fail" {
            return Err(TestCaseError::fail(format!(
                "verdict {verdict} where the oracle says fail: exclusive {exclusive}, {ops:?}"
            )));
        }
        if verdict != "pass" && verdict != "fail" {
            return Err(TestCaseError::fail(format!("no verdict: {verdict}")));
        }
        Ok(())
    });
    let (ran, failing) = (ran.get(), failing.get());
    eprintln!(
        "verdict model: {ran} histories run (shrinking included), {failing} the oracle fails, seed {seed}"
    );
    if let Some(s) = server.borrow_mut().take() {
        rt.block_on(s.stop()).unwrap();
    }
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(ran >= cases, "only {ran} of {cases} histories ran");
}
