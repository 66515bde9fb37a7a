//! docs/src/getting-started/first-test.md end to end: `understudy test -- CMD` (environment, exit codes, SIGINT and
//! `--timeout`), `understudy report` (JUnit validated against the vendored Jenkins
//! `junit-10.xsd` with xmlschema and read by junitparser), the HTML report and the live pages
//! in real headless Chromium (DOM asserted with `--dump-dom`, screenshots kept under
//! `target/tmp/report-screenshots/`), a 10 000-event page (size and load time printed), and
//! the CI recipes in `examples/ci/`.
//!
//! Python packages (xmlschema, junitparser, requests) and Chromium must be installed
//! (`.ci/run` does); outside CI a missing one skips its test with a note, in CI (`CI=true`)
//! it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{self, Server};

const BIN: &str = env!("CARGO_BIN_EXE_understudy");
const LOOKUP_Q: &str = "q=SELECT Id, FirstName FROM Contact WHERE Phone = '+15550001'";

/// The Chromium binary; fails in CI when missing.
fn chromium() -> Option<&'static str> {
    for c in ["chromium", "chromium-browser"] {
        if Command::new(c)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            return Some(c);
        }
    }
    assert!(
        !support::in_ci(),
        "CI must install chromium (.ci/run: apt-get install -y chromium)"
    );
    eprintln!("note: chromium not installed; skipping the browser test");
    None
}

/// `chromium --headless --dump-dom URL`: the DOM after load, and how long it took.
fn dump_dom(chromium: &str, url: &str) -> (String, Duration) {
    let profile = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("chromium runs");
    let took = t.elapsed();
    assert!(out.status.success(), "chromium --dump-dom {url}: {out:?}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), took)
}

/// A screenshot kept under `target/tmp/report-screenshots/NAME.png`; prints its path.
fn screenshot(chromium: &str, url: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.png"));
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--window-size=1400,1000")
        .arg(format!("--screenshot={}", file.display()))
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("chromium runs");
    assert!(out.status.success(), "chromium --screenshot: {out:?}");
    assert!(file.is_file(), "no screenshot at {}", file.display());
    eprintln!("screenshot: {}", file.display());
    file
}

/// A project: `crm` (salesforce, upstream acme.my.salesforce.com) with the contact lookup and
/// update of `support`; `mode` replay unless given.
fn project(mode: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("mocks/crm")).unwrap();
    for op in [support::sf_lookup_op(), support::sf_update_op()] {
        let id = op["operation_id"].as_str().unwrap().to_string();
        std::fs::write(
            dir.path().join(format!("mocks/crm/{id}.json")),
            serde_json::to_vec_pretty(&op).unwrap(),
        )
        .unwrap();
    }
    let cfg = json!({
        "data_dir": "data", "mode": mode,
        "integrations": { "crm": { "profile": "salesforce",
            "upstream": "https://acme.my.salesforce.com", "operations": "mocks/crm" } }
    });
    std::fs::write(
        dir.path().join("understudy.json"),
        serde_json::to_vec_pretty(&cfg).unwrap(),
    )
    .unwrap();
    dir
}

/// `understudy test --config P --report-dir P/report EXTRA… -- sh -c SCRIPT`.
fn run_test(dir: &Path, extra: &[&str], script: &str) -> Output {
    Command::new(BIN)
        .arg("test")
        .arg("--config")
        .arg(dir.join("understudy.json"))
        .arg("--report-dir")
        .arg(dir.join("report"))
        .args(extra)
        .args(["--", "sh", "-c", script])
        .current_dir(dir)
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("understudy test runs")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn evidence_json(dir: &Path) -> Value {
    let s = std::fs::read_to_string(dir.join("report/evidence.json")).expect("evidence.json");
    serde_json::from_str(&s).unwrap()
}

fn lookup_curl(base_var: &str) -> String {
    format!("curl -sf -G \"${base_var}/services/data/v60.0/query\" --data-urlencode \"{LOOKUP_Q}\"")
}

#[test]
fn test_runs_the_command_with_the_attempt_environment_and_passes() {
    let dir = project("replay");
    let script = format!(
        r#"set -e
[ -n "$UNDERSTUDY_ATTEMPT" ] && [ -n "$UNDERSTUDY_ATTEMPT_ID" ]
case "$UNDERSTUDY_URL" in http://127.0.0.1:*) ;; *) echo "bad UNDERSTUDY_URL $UNDERSTUDY_URL"; exit 9;; esac
case "$UNDERSTUDY_URL_CRM" in "$UNDERSTUDY_URL/~$UNDERSTUDY_ATTEMPT/crm") ;; *) echo "bad URL_CRM"; exit 9;; esac
{} > out.json
curl -sf "$UNDERSTUDY_URL/_understudy/api/attempts/$UNDERSTUDY_ATTEMPT_ID" > attempt.json
echo "stdout of the command""#,
        lookup_curl("UNDERSTUDY_URL_CRM")
    );
    let o = run_test(dir.path(), &[], &script);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "stdout of the command\n",
        "stdout is the command's alone"
    );
    let out: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out.json")).unwrap())
            .unwrap();
    assert_eq!(out["totalSize"], 1, "{out}");
    let env = evidence_json(dir.path());
    assert_eq!(env["verdict"], "pass");
    assert_eq!(env["tool_events"].as_array().unwrap().len(), 1);
    assert_eq!(env["test_run"]["exit_code"], 0);
    assert_eq!(env["test_run"]["command"], json!(["sh", "-c", script]));
    assert!(env["ended_at"].is_string(), "the attempt was ended");
    for f in ["junit.xml", "report.html", "understudy.log"] {
        assert!(dir.path().join("report").join(f).is_file(), "{f}");
    }
    let log = std::fs::read_to_string(dir.path().join("report/understudy.log")).unwrap();
    assert!(log.contains("attempt created"), "{log}");
}

#[test]
fn test_exit_codes_command_failure_then_verdict_then_success() {
    let dir = project("replay");
    // the command fails: its own code, even with a passing verdict
    let o = run_test(dir.path(), &[], "exit 7");
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    assert_eq!(evidence_json(dir.path())["test_run"]["exit_code"], 7);
    // the verdict fails (an unmatched call is a harness error), the command passes: 1
    let script = "curl -s \"$UNDERSTUDY_URL_CRM/services/data/v60.0/sobjects/Nope\" > /dev/null";
    let o = run_test(dir.path(), &[], script);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let env = evidence_json(dir.path());
    assert_eq!(env["verdict"], "fail");
    assert!(
        env["verdict_reasons"][0]["code"] == "harness_error",
        "{env}"
    );
    // both fail: the command's code wins
    let o = run_test(dir.path(), &[], &format!("{script}; exit 3"));
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    // a variant that does not exist: usage error
    let o = run_test(dir.path(), &["--variant", "crm/nope=x"], "true");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // a variant is applied
    let o = run_test(
        dir.path(),
        &["--variant", "crm/lookup_contact_by_phone=missing"],
        &format!("{} > out.json", lookup_curl("UNDERSTUDY_URL_CRM")),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out.json")).unwrap())
            .unwrap();
    assert_eq!(out["totalSize"], 0);
}

/// The user's own OpenTelemetry endpoint is kept (the agent exports where they said); an
/// empty one counts as unset, so the agent exports to the attempt.
#[test]
fn test_keeps_the_users_otel_endpoint_and_treats_an_empty_one_as_unset() {
    let dir = project("replay");
    let endpoint = |value: &str| {
        let o = Command::new(BIN)
            .arg("test")
            .arg("--config")
            .arg(dir.path().join("understudy.json"))
            .arg("--report-dir")
            .arg(dir.path().join("report"))
            .args(["--allow-no-calls", "--", "sh", "-c"])
            .arg("printf %s \"$OTEL_EXPORTER_OTLP_ENDPOINT\"")
            .current_dir(dir.path())
            .env_remove("UNDERSTUDY_ADMIN_TOKEN")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", value)
            .stdin(Stdio::null())
            .output()
            .expect("understudy test runs");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert_eq!(
        endpoint("http://127.0.0.1:9/mine"),
        "http://127.0.0.1:9/mine"
    );
    let ours = endpoint("");
    assert!(
        ours.starts_with("http://127.0.0.1:") && ours.ends_with("/_understudy/api/otlp"),
        "{ours}"
    );
}

/// Reports that cannot be written turn a passing run into exit 1 (the run is not proven to
/// CI), and never hide a failing command's own code.
#[test]
fn test_a_report_that_cannot_be_written_is_not_a_pass() {
    let dir = project("replay");
    // A directory where the JUnit file goes: the report write fails.
    std::fs::create_dir_all(dir.path().join("report/junit.xml")).unwrap();
    let o = run_test(dir.path(), &["--allow-no-calls"], "true");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("reports in"),
        "{}",
        text(&o)
    );
    let o = run_test(dir.path(), &["--allow-no-calls"], "exit 5");
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
}

/// A malformed `--variant` or `--timeout` is a usage error (exit 2) that names the flag, before
/// the command runs; the same flags well formed run it.
#[test]
fn test_refuses_a_malformed_variant_or_timeout_before_the_command_runs() {
    let dir = project("replay");
    let ran = dir.path().join("ran");
    for (args, says) in [
        (
            &["--variant", "crm/lookup_contact_by_phone="][..],
            "--variant",
        ),
        (
            &["--variant", "lookup_contact_by_phone=missing"],
            "--variant",
        ),
        (&["--variant", "crm/lookup_contact_by_phone"], "--variant"),
        (&["--timeout", "0"], "--timeout"),
        (&["--timeout=-1"], "--timeout"),
        (&["--timeout", "inf"], "--timeout"),
        (&["--timeout", "NaN"], "--timeout"),
    ] {
        let o = run_test(dir.path(), args, "touch ran");
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(says),
            "{args:?}: {}",
            text(&o)
        );
        assert!(!ran.exists(), "{args:?}: the command ran");
    }
    let o = run_test(
        dir.path(),
        &[
            "--variant",
            "crm/lookup_contact_by_phone=missing",
            "--timeout",
            "30",
            "--allow-no-calls",
        ],
        "touch ran",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(ran.exists());
}

#[test]
fn test_refuses_an_unknown_contract_before_the_command_runs() {
    // An unknown contract id is refused before CMD runs (422 from the attempt API: usage),
    // and the message names it.
    let dir = project("replay");
    let o = run_test(dir.path(), &["--contract", "book_contract"], "touch ran");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the attempt could not be created (422)") && err.contains("book_contract"),
        "{}",
        text(&o)
    );
    assert!(!dir.path().join("ran").exists(), "the command ran");
}

/// The healthplus example (its mocks and contracts) in a temp dir of its own.
fn healthplus_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/healthplus");
    for sub in ["mocks/crm", "contracts"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, dir.path().join(sub).join(p.file_name().unwrap())).unwrap();
        }
    }
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("understudy.json")).unwrap())
            .unwrap();
    cfg["data_dir"] = json!("data");
    std::fs::write(
        dir.path().join("understudy.json"),
        serde_json::to_vec_pretty(&cfg).unwrap(),
    )
    .unwrap();
    dir
}

// The newcomer's loop of the README: the booking contract, an agent run under `understudy
// test`, a red run whose reports say what went wrong — and green once the agent is fixed.
#[test]
fn test_with_the_booking_contract_is_red_for_a_broken_agent_and_green_for_a_fixed_one() {
    let dir = healthplus_copy();
    let book = r#"curl -sf -X POST "$UNDERSTUDY_URL_CRM/services/data/v60.0/sobjects/Appointment__c" -H 'content-type: application/json' -H 'Idempotency-Key: b1' -d "{\"Contact__c\":\"$CONTACT\",\"Requested_Date__c\":\"2026-12-01\"}" > /dev/null"#;
    let told = r#"curl -sf -X POST "$UNDERSTUDY_URL/_understudy/api/attempts/$UNDERSTUDY_ATTEMPT_ID/events" -H 'content-type: application/json' -d '{"name":"told_caller_booked","kind":"agent_message","text":"You are booked."}' > /dev/null"#;
    let lookup = r#"CONTACT=$(curl -sf -G "$UNDERSTUDY_URL_CRM/services/data/v60.0/query" --data-urlencode "q=SELECT Id, FirstName, LastName, Phone FROM Contact WHERE Phone = '555-0100'" | python3 -c 'import json,sys; print(json.load(sys.stdin)["records"][0]["Id"])')"#;
    // Broken: books an invented contact without looking the caller up.
    let broken = format!("set -e\nCONTACT=003000000000000AAA\n{book}\n{told}\n");
    let o = run_test(
        dir.path(),
        &["--contract", "book_appointment_contract"],
        &broken,
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let ev = evidence_json(dir.path());
    assert_eq!(ev["verdict"], "fail");
    let checks = &ev["contract_results"][0]["checks"];
    let failed: Vec<&str> = checks
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] != "passed")
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        failed,
        [
            "preconditions.required_before[crm/lookup_contact_by_phone]",
            "arguments.sources[Contact__c]"
        ],
        "{checks:#}"
    );
    // The reasons carry the contract's id in their codes; JUnit covers them by the
    // contract's own cases (no reason dropped, none left to `other`).
    let codes: Vec<&str> = ev["verdict_reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "contract:book_appointment_contract:preconditions.required_before[crm/lookup_contact_by_phone]",
            "contract:book_appointment_contract:arguments.sources[Contact__c]"
        ],
        "{ev:#}"
    );
    let junit = std::fs::read_to_string(dir.path().join("report/junit.xml")).unwrap();
    assert!(
        junit.contains("came before any effective crm/lookup_contact_by_phone"),
        "{junit}"
    );
    assert_eq!(junit.matches("<failure").count(), 2, "{junit}");
    assert!(!junit.contains("name=\"other"), "{junit}");
    let html = std::fs::read_to_string(dir.path().join("report/report.html")).unwrap();
    assert!(html.contains("preconditions.required_before[crm/lookup_contact_by_phone]"));
    // Fixed: looks the caller up and books the contact it found.
    let fixed = format!("set -e\n{lookup}\n{book}\n{told}\n");
    let o = run_test(
        dir.path(),
        &["--contract", "book_appointment_contract"],
        &fixed,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ev = evidence_json(dir.path());
    assert_eq!(ev["verdict"], "pass", "{:#}", ev["contract_results"]);
    assert_eq!(ev["contract_results"][0]["status"], "passed");
}

#[test]
fn test_forward_proxy_with_the_ca_variables_for_curl_and_python_requests() {
    if !support::python_has(&["requests"]) {
        return;
    }
    let dir = project("replay");
    let o = Command::new(BIN)
        .args(["ca", "init", "--dir"])
        .arg(dir.path().join("certs"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let script = format!(
        r#"set -e
case "$HTTPS_PROXY" in "http://$UNDERSTUDY_ATTEMPT:x@127.0.0.1:"*) ;; *) echo "bad HTTPS_PROXY"; exit 9;; esac
[ -f "$SSL_CERT_FILE" ] && [ "$REQUESTS_CA_BUNDLE" = "$SSL_CERT_FILE" ] && [ "$NODE_EXTRA_CA_CERTS" = "$SSL_CERT_FILE" ]
curl -sf -G "https://acme.my.salesforce.com/services/data/v60.0/query" --data-urlencode "{LOOKUP_Q}" > curl.json
python3 -c '
import requests
r = requests.get("https://acme.my.salesforce.com/services/data/v60.0/query",
                 params={{"q": "SELECT Id, FirstName FROM Contact WHERE Phone = '"'"'+15550001'"'"'"}})
assert r.status_code == 200, (r.status_code, r.text)
assert r.json()["totalSize"] == 1, r.text
print("requests ok")
'"#
    );
    let o = run_test(dir.path(), &["--forward-proxy"], &script);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("requests ok"));
    let curl: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("curl.json")).unwrap())
            .unwrap();
    assert_eq!(curl["totalSize"], 1);
    let env = evidence_json(dir.path());
    assert_eq!(
        env["tool_events"].as_array().unwrap().len(),
        2,
        "both calls are in the attempt's evidence: {env}"
    );
    assert_eq!(env["verdict"], "pass");
}

/// A client that drops the proxy credentials under `--forward-proxy` (curl given the proxy
/// without the token): its call lands in the default attempt, so the run's exclusive attempt
/// fails `outside_attempt`, even though the call itself was answered 200.
#[test]
fn test_forward_proxy_a_client_without_the_credentials_fails_outside_attempt() {
    if !support::tool_available("curl", &["--version"], "curl") {
        return;
    }
    let dir = project("replay");
    let o = Command::new(BIN)
        .args(["ca", "init", "--dir"])
        .arg(dir.path().join("certs"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let script = format!(
        r#"set -e
curl -sf -G "https://acme.my.salesforce.com/services/data/v60.0/query" --data-urlencode "{LOOKUP_Q}" > /dev/null
NOCRED=$(echo "$HTTPS_PROXY" | sed 's#//[^@]*@#//#')
curl -sf --proxy "$NOCRED" -G "https://acme.my.salesforce.com/services/data/v60.0/query" --data-urlencode "{LOOKUP_Q}" > /dev/null
"#
    );
    let o = run_test(dir.path(), &["--forward-proxy"], &script);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let env = evidence_json(dir.path());
    assert_eq!(env["tool_events"].as_array().unwrap().len(), 1, "{env}");
    assert_eq!(env["verdict"], "fail");
    assert_eq!(
        env["verdict_reasons"][0]["code"], "outside_attempt",
        "{env}"
    );
    assert_eq!(env["outside_attempt"]["calls"], 1, "{env}");
    let junit = std::fs::read_to_string(dir.path().join("report/junit.xml")).unwrap();
    assert!(
        junit.contains("<failure type=\"outside_attempt\""),
        "{junit}"
    );
}

fn pid_alive(pid: u32) -> bool {
    // A zombie is gone for our purposes only once reaped; /proc/PID/stat says `Z`.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn wait_for_file(p: &Path) -> String {
    let t = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(p) {
            if s.ends_with('\n') {
                return s;
            }
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no {}", p.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `understudy test` with a command that records its pids and hangs (after `prelude`,
/// e.g. a `trap`); returns the child, the shell's pid and the grandchild's.
fn start_hanging(dir: &Path, extra: &[&str], prelude: &str) -> (std::process::Child, u32, u32) {
    let script = format!(
        "{prelude}{} > /dev/null; sleep 600 & echo \"$$ $!\" > pids.tmp; mv pids.tmp pids; wait",
        lookup_curl("UNDERSTUDY_URL_CRM")
    );
    let child = Command::new(BIN)
        .arg("test")
        .arg("--config")
        .arg(dir.join("understudy.json"))
        .arg("--report-dir")
        .arg(dir.join("report"))
        .args(extra)
        .args(["--", "sh", "-c", &script])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pids = wait_for_file(&dir.join("pids"));
    let mut it = pids.split_whitespace().map(|p| p.parse::<u32>().unwrap());
    (child, it.next().unwrap(), it.next().unwrap())
}

fn assert_gone(pids: &[u32]) {
    let t = Instant::now();
    while pids.iter().any(|p| pid_alive(*p)) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "processes left behind: {:?}",
            pids.iter().filter(|p| pid_alive(**p)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigint_stops_the_command_and_its_children_ends_the_attempt_and_writes_reports() {
    let dir = project("replay");
    let (child, sh, sleep) = start_hanging(dir.path(), &[], "");
    assert!(pid_alive(sh) && pid_alive(sleep));
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    assert_gone(&[sh, sleep]);
    let env = evidence_json(dir.path());
    assert_eq!(env["test_run"]["stopped"], "interrupted");
    assert!(env["ended_at"].is_string(), "the attempt was ended: {env}");
    assert_eq!(env["tool_events"].as_array().unwrap().len(), 1);
    let html = std::fs::read_to_string(dir.path().join("report/report.html")).unwrap();
    assert!(
        html.contains("interrupted (SIGINT to understudy)"),
        "the report says why"
    );
    let junit = std::fs::read_to_string(dir.path().join("report/junit.xml")).unwrap();
    assert!(junit.contains("interrupted (SIGINT to understudy)"));
}

#[test]
fn timeout_stops_the_command_and_its_children_and_writes_reports() {
    let dir = project("replay");
    let t = Instant::now();
    let (child, sh, sleep) = start_hanging(dir.path(), &["--timeout", "2"], "");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(124), "{}", text(&o));
    assert!(t.elapsed() < Duration::from_secs(15));
    assert_gone(&[sh, sleep]);
    let env = evidence_json(dir.path());
    assert_eq!(env["test_run"]["stopped"], "timeout");
    assert!(env["test_run"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("timed out after 2 s"));
    let html = std::fs::read_to_string(dir.path().join("report/report.html")).unwrap();
    assert!(html.contains("timed out after 2 s"));
}

/// A command that ignores SIGTERM (and its children, which inherit that) is killed with
/// SIGKILL after the grace period: nothing is left running when `understudy test` returns.
#[test]
fn timeout_kills_a_command_that_ignores_sigterm_after_the_grace_period() {
    let dir = project("replay");
    let t = Instant::now();
    let (mut child, sh, sleep) = start_hanging(dir.path(), &["--timeout", "1"], "trap '' TERM; ");
    // Its exit, not its output: a command left running would hold the stderr pipe open.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "understudy test did not return"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let left: Vec<u32> = [sh, sleep].into_iter().filter(|p| pid_alive(*p)).collect();
    for p in &left {
        // Not left for the next test: SIGKILL what understudy left behind.
        let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
    }
    assert!(left.is_empty(), "processes left behind: {left:?}");
    assert_eq!(status.code(), Some(124));
    // SIGTERM at 1 s, SIGKILL 5 s later.
    assert!(t.elapsed() >= Duration::from_secs(5), "{:?}", t.elapsed());
    let env = evidence_json(dir.path());
    assert_eq!(env["test_run"]["stopped"], "timeout");
    assert_eq!(env["test_run"]["signal"], 9, "{}", env["test_run"]);
}

/// Runs python's JUnit check (xmlschema against the vendored XSD, then junitparser).
fn check_junit(file: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report/check_junit.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "JUnit check failed: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn report_command_writes_junit_that_validates_and_parses() {
    if !support::python_has(&["xmlschema", "junitparser"]) {
        return;
    }
    let dir = project("replay");
    let script = format!(
        "{} > /dev/null; curl -s \"$UNDERSTUDY_URL_CRM/services/data/v60.0/sobjects/Nope\" > /dev/null",
        lookup_curl("UNDERSTUDY_URL_CRM")
    );
    let o = run_test(dir.path(), &[], &script);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let id = evidence_json(dir.path())["attempt_id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = dir.path().join("junit.xml");
    let o = Command::new(BIN)
        .args(["report", &id, "--format", "junit", "--out"])
        .arg(&out)
        .arg("--config")
        .arg(dir.path().join("understudy.json"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "verdict fail: {}", text(&o));
    let j = check_junit(&out);
    // One case per rule of the verdict (harness_error … cleanup_not_verified), one failing.
    assert_eq!(j["tests"], 11, "{j}");
    assert_eq!(j["failures"], 1, "{j}");
    let failed: Vec<&Value> = j["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["result"] == "failure")
        .collect();
    assert!(failed[0]["name"]
        .as_str()
        .unwrap()
        .starts_with("harness_error"));
    assert!(failed[0]["text"]
        .as_str()
        .unwrap()
        .contains("unmatched_request"));
    // the report dir of `understudy test` validates too (it has the `command` case)
    let j = check_junit(&dir.path().join("report/junit.xml"));
    assert_eq!(j["tests"], 12, "{j}"); // one case per verdict rule + the `command` case
                                       // json and html to stdout, usage errors
    let o = Command::new(BIN)
        .args(["report", &id, "--format", "json", "--config"])
        .arg(dir.path().join("understudy.json"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["attempt_id"], id.as_str());
    assert!(v["verdict_reasons"].is_array());
    let o = Command::new(BIN)
        .args(["report", &id, "--config"])
        .arg(dir.path().join("understudy.json"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "no format");
    let o = Command::new(BIN)
        .args(["report", "nope", "--format", "html", "--config"])
        .arg(dir.path().join("understudy.json"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "unknown attempt");
}

/// An envelope with everything the page shows: calls of every kind, agent-side events,
/// contract results with a failing check (the shape of docs/src/reference/contracts.md).
fn rich_envelope() -> Value {
    let call = |seq: u64, op: &str, status: &str, write: bool, http: u16| {
        json!({"sequence": seq, "execution_attempt_id": format!("x{seq}"), "integration": "crm",
               "operation_id": op, "revision": 1, "variant": "found", "rule": null, "is_write": write,
               "arguments": {"phone": "[redacted]", "Contact__c": "003A"}, "result": {"status": http, "data": {"ok": true}},
               "result_status": status, "http_status": http, "latency_ms": 0.7, "delay_ms": 0,
               "idempotency_key_ref": null, "trace_id": null, "source": "mock",
               "error": if status == "harness_error" { json!({"code": "no_mock", "message": "no mock", "path": null}) } else { Value::Null },
               "timestamp": format!("2026-12-01T10:00:0{seq}.000Z")})
    };
    json!({
        "schema_version": "understudy.evidence.v1", "attempt_id": "att-rich", "test_run_id": "ci-42",
        "started_at": "2026-12-01T10:00:00.000Z", "ended_at": "2026-12-01T10:00:09.000Z",
        "pins": {"crm/lookup_contact_by_phone": {"revision": 1, "contract_hash": "sha256:ab"}},
        "tool_events": [
            call(1, "lookup_contact_by_phone", "ok", false, 200),
            call(3, "book_appointment", "blocked", true, 403),
            call(4, "book_appointment", "simulated", true, 201),
            call(5, "get_contact", "harness_error", false, 500),
        ],
        "events": [
            {"sequence": 2, "name": "caller_confirmed", "kind": "caller_message", "text": "yes please", "data": {"date": "2026-12-03"}},
            {"sequence": 6, "name": "told_caller_booked", "kind": "agent_message", "text": "You are booked."}
        ],
        "tool_input_errors": [], "harness_errors": [{"sequence": 5}],
        "blocked_side_effects": [{"sequence": 3, "action": "blocked"}, {"sequence": 4, "action": "simulated"}],
        "final_state": {"crm": {}},
        "contract_results": [{
            "contract_id": "book_appointment_contract", "contract_hash": "sha256:cd", "policy_version": "booking_v3",
            "risk": "blocking", "status": "failed",
            "checks": [
                {"id": "preconditions.required_before[crm/lookup_contact_by_phone]", "status": "passed",
                 "evidence": "sequence 1 (ok) precedes the first effective call at sequence 4"},
                {"id": "calls.exactly_once[crm/book_appointment]", "status": "failed",
                 "evidence": "0 effective calls of crm/book_appointment; sequence 3 was blocked"}
            ]}],
        "verdict_reasons": [
            {"code": "harness_error", "message": "harness error at sequence 5: no_mock: no mock", "sequence": 5},
            {"code": "contract:book_appointment_contract:calls.exactly_once[crm/book_appointment]",
             "message": "contract book_appointment_contract: failed — calls.exactly_once[crm/book_appointment]: 0 effective calls (failed)"}],
        "verdict": "fail"
    })
}

fn data_seqs(dom: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find(" data-seq=\"") {
        rest = &rest[i + 11..];
        let end = rest.find('"').unwrap();
        out.push(rest[..end].parse().unwrap());
        rest = &rest[end..];
    }
    out
}

fn assert_rich_dom(dom: &str) {
    assert_eq!(
        data_seqs(dom),
        vec![1, 2, 3, 4, 5, 6],
        "one row per call and event, in order"
    );
    assert!(dom.contains("Verdict: FAIL"), "verdict text");
    assert!(
        dom.contains("side-effect blocked")
            && dom.contains("<span class=\"label\">blocked write</span>"),
        "blocked write marked"
    );
    assert!(dom.contains("<span class=\"label\">simulated write</span>"));
    assert!(dom.contains("harness-error"));
    assert!(
        dom.contains(
            "class=\"check status-failed\" data-check=\"calls.exactly_once[crm/book_appointment]\""
        ),
        "failing contract check"
    );
    assert!(dom.contains("0 effective calls of crm/book_appointment; sequence 3 was blocked"));
    assert!(dom.contains("event: told_caller_booked"));
    assert!(dom.contains("data-load-ms=\""), "the inline script ran");
}

#[test]
fn html_report_file_in_headless_chromium() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.html");
    std::fs::write(
        &file,
        understudy::evidence::report::html::render(&rich_envelope()),
    )
    .unwrap();
    let url = format!("file://{}", file.display());
    let (dom, _) = dump_dom(chromium, &url);
    assert_rich_dom(&dom);
    screenshot(chromium, &url, "report-file");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_pages_in_headless_chromium_under_the_admin_access_rules() {
    let Some(chromium) = chromium() else { return };
    let p = support::standard_project();
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(p.config_path()).unwrap()).unwrap();
    cfg["mode"] = json!("dry-run");
    cfg["integrations"]["crm"]["upstream"] = json!("https://acme.my.salesforce.com");
    std::fs::write(p.config_path(), serde_json::to_vec(&cfg).unwrap()).unwrap();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({"test_run_id": "live-1"})).await;
    let crm = a.base("crm");
    let r = s
        .call("GET", &format!("{crm}/services/data/v60.0/query?q=SELECT%20Id,%20FirstName%20FROM%20Contact%20WHERE%20Phone%20=%20'%2B15550001'"), None, &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // an unmatched write in dry-run is blocked
    let r = s
        .call(
            "POST",
            &format!("{crm}/services/data/v60.0/sobjects/Lead"),
            Some(&json!({"LastName": "X"})),
            &[],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);

    let list = s.call("GET", "/_understudy/ui/", None, &[]).await;
    assert_eq!(list.status, 200);
    assert!(list
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(
        list.text.contains(&a.id) && list.text.contains("live-1"),
        "{}",
        list.text
    );
    let page_url = s.url(&format!("/_understudy/ui/attempts/{}", a.id));
    let junit = s
        .call(
            "GET",
            &format!("/_understudy/ui/attempts/{}/junit.xml", a.id),
            None,
            &[],
        )
        .await;
    assert_eq!(junit.status, 200);
    assert!(junit.text.contains("<testsuite "));
    let missing = s
        .call("GET", "/_understudy/ui/attempts/nope", None, &[])
        .await;
    assert_eq!(missing.status, 404);

    let c = chromium.to_string();
    let (dom, list_dom) = tokio::task::spawn_blocking({
        let page_url = page_url.clone();
        let list_url = s.url("/_understudy/ui/");
        move || {
            let (dom, _) = dump_dom(&c, &page_url);
            let (list_dom, _) = dump_dom(&c, &list_url);
            screenshot(&c, &page_url, "report-live");
            (dom, list_dom)
        }
    })
    .await
    .unwrap();
    assert_eq!(data_seqs(&dom), vec![1, 2]);
    assert!(dom.contains("Verdict: PASS"), "blocked writes alone pass");
    assert!(dom.contains("<span class=\"label\">blocked write</span>"));
    assert!(list_dom.contains(&format!("data-attempt=\"{}\"", a.id)));
    s.stop().await.unwrap();

    // With an admin token, the pages need it like the API.
    let mut opts = p.options();
    opts.admin_token = Some("sekret".into());
    let s = Server::start_with(opts).await;
    let r = s.call("GET", "/_understudy/ui/", None, &[]).await;
    assert_eq!(r.status, 401);
    let r = s
        .call(
            "GET",
            "/_understudy/ui/",
            None,
            &[("authorization", "Bearer sekret")],
        )
        .await;
    assert_eq!(r.status, 200);
    s.stop().await.unwrap();
}

#[test]
fn ten_thousand_events_stay_small_and_load_fast_in_chromium() {
    let mut env = rich_envelope();
    let mut calls = Vec::new();
    let mut events = Vec::new();
    let template = env["tool_events"][0].clone();
    for seq in 1..=10_000u64 {
        if seq % 10 == 0 {
            events.push(
                json!({"sequence": seq, "name": "caller_said", "kind": "caller_message",
                               "text": format!("utterance {seq}"), "data": {"turn": seq}}),
            );
        } else {
            let mut c = template.clone();
            c["sequence"] = json!(seq);
            c["result_status"] = json!(if seq % 97 == 0 { "blocked" } else { "ok" });
            c["is_write"] = json!(seq % 97 == 0);
            c["result"] = json!({"status": 200, "data": {"totalSize": 1, "records": [
                {"attributes": {"type": "Contact"}, "Id": "003000000000001AAA", "FirstName": "Ada", "Phone": "[redacted]"}]}});
            calls.push(c);
        }
    }
    env["tool_events"] = json!(calls);
    env["events"] = json!(events);
    let t = Instant::now();
    let html = understudy::evidence::report::html::render(&env);
    let render_ms = t.elapsed().as_millis();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.html");
    std::fs::write(&file, &html).unwrap();
    let mb = html.len() as f64 / 1e6;
    eprintln!(
        "10 000-event report: {:.2} MB, rendered in {render_ms} ms",
        mb
    );
    assert!(html.len() < 15_000_000, "{} bytes", html.len());
    let Some(chromium) = chromium() else { return };
    let blank = dir.path().join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><title>b</title>").unwrap();
    let (_, base) = dump_dom(chromium, &format!("file://{}", blank.display()));
    let (dom, took) = dump_dom(chromium, &format!("file://{}", file.display()));
    let load_ms: u64 = dom
        .split("data-load-ms=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|s| s.parse().ok())
        .expect("the load script ran");
    eprintln!(
        "chromium --headless --dump-dom: {:.2} s wall ({:.2} s for an empty page), load event at {load_ms} ms",
        took.as_secs_f64(),
        base.as_secs_f64()
    );
    assert_eq!(data_seqs(&dom).len(), 10_000, "one row per event");
    assert!(load_ms < 10_000, "load event at {load_ms} ms");
}

/// Every `understudy <subcommand>` in a shell line.
fn subcommands_in(line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let w = w.trim_matches(|c| c == '"' || c == '\'');
        if w.contains('=') {
            continue; // UNDERSTUDY_BIN=…/understudy names the binary, runs nothing
        }
        if (w == "understudy" || w.ends_with("/understudy")) && i + 1 < words.len() {
            let next = words[i + 1];
            if !next.starts_with('-') && next.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
                out.push(next.to_string());
            }
        }
    }
    out
}

fn collect_scripts(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                match (k.as_str(), child) {
                    ("run" | "script" | "before_script" | "after_script", Value::String(s)) => {
                        out.push(s.clone())
                    }
                    ("script" | "before_script" | "after_script", Value::Array(a)) => {
                        out.extend(a.iter().filter_map(Value::as_str).map(str::to_string))
                    }
                    _ => collect_scripts(child, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|c| collect_scripts(c, out)),
        _ => {}
    }
}

#[test]
fn ci_recipes_are_valid_yaml_and_run_real_subcommands() {
    use clap::CommandFactory;
    let known: Vec<String> = understudy::cli::Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ci");
    for (file, must) in [
        ("github-actions.yml", vec!["test", "report"]),
        ("gitlab-ci.yml", vec!["test"]),
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let v: Value = yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut scripts = Vec::new();
        collect_scripts(&v, &mut scripts);
        let used: Vec<String> = scripts
            .iter()
            .flat_map(|s| s.lines().flat_map(subcommands_in).collect::<Vec<_>>())
            .collect();
        for u in &used {
            assert!(
                known.contains(u),
                "{file} runs `understudy {u}`, not a subcommand: {known:?}"
            );
        }
        for m in must {
            assert!(
                used.iter().any(|u| u == m),
                "{file} must run `understudy {m}`: {used:?}"
            );
        }
        if file == "gitlab-ci.yml" {
            let junit = v
                .as_object()
                .unwrap()
                .values()
                .find_map(|job| job.pointer("/artifacts/reports/junit"))
                .expect("a job publishes artifacts:reports:junit");
            assert!(junit.is_string() || junit.is_array());
        } else {
            let steps: Vec<&Value> = v["jobs"]
                .as_object()
                .unwrap()
                .values()
                .flat_map(|j| j["steps"].as_array().unwrap().iter())
                .collect();
            let uses: Vec<&str> = steps.iter().filter_map(|s| s["uses"].as_str()).collect();
            assert!(
                uses.iter()
                    .any(|u| u.starts_with("actions/upload-artifact@")),
                "{uses:?}"
            );
            assert!(
                uses.iter()
                    .any(|u| u.starts_with("mikepenz/action-junit-report@")
                        || u.starts_with("dorny/test-reporter@")),
                "{uses:?}"
            );
        }
    }
}
