//! Fault injection: kill -9 of the real binary under a 64-connection load (no acknowledged
//! call lost, the store reopens, revisions intact), a disk that fills up under load (the real
//! binary with a lowered `RLIMIT_FSIZE`: failed writes answer 500 `store_error`, never 200, the
//! server keeps answering, and no acknowledged call is lost), upstreams that reset, stall or
//! answer garbage in dry-run mode (the harness error `upstream_unavailable`, never a hang), and
//! a data dir that cannot be created (a clear start error naming the path).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::{self, standard_project, Project, Server};

// ---- kill -9 under load -------------------------------------------------------------------

/// Start `understudy serve` on 127.0.0.1:0; returns the child, its base URL and its stdout
/// (kept open so the server never writes into a closed pipe).
fn spawn_serve(p: &Project) -> (Child, String, Lines) {
    spawn_serve_with(p, |_| {})
}

pub(crate) type Lines = std::io::Lines<BufReader<std::process::ChildStdout>>;
/// What the server wrote to stderr so far.
pub(crate) type Log = Arc<Mutex<Vec<u8>>>;

/// [`spawn_serve`], letting `prepare` adjust the command first (e.g. a resource limit).
fn spawn_serve_with(p: &Project, prepare: impl FnOnce(&mut Command)) -> (Child, String, Lines) {
    let (child, base, lines, _) =
        try_spawn_serve_with(p, prepare).unwrap_or_else(|e| panic!("{e}"));
    (child, base, lines)
}

/// [`spawn_serve_with`], returning the reason when the server exits before its readiness line,
/// and the server's stderr as it is written.
pub(crate) fn try_spawn_serve_with(
    p: &Project,
    prepare: impl FnOnce(&mut Command),
) -> Result<(Child, String, Lines, Log), String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_understudy"));
    cmd.args(["serve", "--config"])
        .arg(p.config_path())
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    prepare(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = match lines.next() {
        Some(Ok(l)) => l,
        other => {
            let _ = child.kill();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            let status = child.wait();
            return Err(format!(
                "no readiness line ({other:?}, exit {status:?}); stderr:\n{err}"
            ));
        }
    };
    let base = ready
        .strip_prefix("understudy listening on ")
        .unwrap_or_else(|| panic!("unexpected readiness line {ready:?}"))
        .to_string();
    // Drain stderr so logging never blocks the server; keep it for messages.
    let mut stderr = child.stderr.take().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    Ok((child, base, lines, log))
}

pub(crate) async fn get_json(client: &reqwest::Client, url: &str) -> Value {
    let r = support::send(client, "GET", url, None, &[]).await;
    assert_eq!(r.status, 200, "GET {url}: {}", r.text);
    r.json()
}

#[test]
fn kill_9_during_a_64_connection_load_loses_no_acknowledged_call() {
    const CLIENTS: usize = 64;
    const MAX_CALLS: i64 = 2000;
    const KILL_AFTER: usize = 300;
    let p = standard_project();
    let (child, base, _out) = spawn_serve(&p);
    // The task that receives the KILL_AFTER-th acknowledgement kills the server at once, so
    // the kill lands while the other 63 connections have calls in flight.
    let child = Arc::new(Mutex::new(child));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let (attempt_id, revisions_before, acked, sent) = rt.block_on(async {
        let client = support::client();
        let default = get_json(&client, &format!("{base}/_understudy/api/attempts/default")).await;
        let attempt_id = default["attempt_id"]
            .as_str()
            .unwrap_or_else(|| panic!("default attempt id: {default}"))
            .to_string();
        let revisions = get_json(
            &client,
            &format!("{base}/_understudy/api/revisions/api/bump"),
        )
        .await;

        let next = Arc::new(AtomicI64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::<i64>::new()));
        let mut tasks = Vec::new();
        for _ in 0..CLIENTS {
            // One client per task: 64 connections.
            let client = support::client();
            let url = format!("{base}/api/counter");
            let (next, stop, acked, child) =
                (next.clone(), stop.clone(), acked.clone(), child.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= MAX_CALLS {
                        break;
                    }
                    let Ok(resp) = client.post(&url).json(&json!({ "n": n })).send().await else {
                        break;
                    };
                    if resp.status().as_u16() != 200 {
                        break;
                    }
                    let Ok(body) = resp.bytes().await else { break };
                    // The answer is the pre-call counter: a JSON object with `previous`.
                    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    assert!(v.get("previous").is_some(), "unexpected answer {v}");
                    let count = {
                        let mut a = acked.lock().unwrap();
                        a.push(n);
                        a.len()
                    };
                    if count == KILL_AFTER {
                        child.lock().unwrap().kill().unwrap(); // SIGKILL
                        stop.store(true, Ordering::SeqCst);
                    }
                }
            }));
        }
        let joined = tokio::time::timeout(Duration::from_secs(120), async {
            for t in tasks {
                t.await.expect("client task");
            }
        })
        .await;
        let _ = child.lock().unwrap().kill();
        assert!(joined.is_ok(), "the load finished within 120 s");
        let acked = acked.lock().unwrap().clone();
        let sent = next.load(Ordering::SeqCst).min(MAX_CALLS);
        (attempt_id, revisions, acked, sent)
    });
    let _ = child.lock().unwrap().wait();
    assert!(
        acked.len() >= KILL_AFTER,
        "{KILL_AFTER} calls acknowledged before the kill"
    );
    eprintln!(
        "kill -9: {} acknowledged of {sent} numbered calls",
        acked.len()
    );

    // The binary starts again on the same data dir: the store opens.
    let (mut child2, base2, _out2) = spawn_serve(&p);
    let result = rt.block_on(async {
        let client = support::client();
        let ev = get_json(
            &client,
            &format!("{base2}/_understudy/api/attempts/{attempt_id}/evidence"),
        )
        .await;
        let revisions_after = get_json(
            &client,
            &format!("{base2}/_understudy/api/revisions/api/bump"),
        )
        .await;
        (ev, revisions_after)
    });
    let _ = child2.kill();
    let _ = child2.wait();
    let (ev, revisions_after) = result;

    let events = ev["tool_events"].as_array().expect("tool_events").clone();
    let recorded: BTreeSet<i64> = events
        .iter()
        .filter_map(|e| e["arguments"]["n"].as_i64())
        .collect();
    let missing: Vec<i64> = acked
        .iter()
        .copied()
        .filter(|n| !recorded.contains(n))
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged calls missing from the evidence after kill -9 (first: {:?})",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    // Sequences stay dense.
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence"], json!(i as u64 + 1), "dense sequences");
    }
    // Revisions intact.
    assert_eq!(
        revisions_before["revisions"][0]["revision"], 1,
        "{revisions_before}"
    );
    assert_eq!(revisions_after["revisions"], revisions_before["revisions"]);
}

// ---- a disk that fills up under load --------------------------------------------------------

/// A file-size limit for a child process: `RLIMIT_FSIZE` lowered and `SIGXFSZ` ignored, so a
/// write past the limit fails with `EFBIG` (what a full disk looks like to the writer: the
/// write fails, nothing else) instead of killing the process. No root needed.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod fsize {
    use std::ffi::c_int;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    /// `struct rlimit` on 64-bit Linux (`rlim_t` is an unsigned 64-bit integer).
    #[repr(C)]
    struct RLimit {
        cur: u64,
        max: u64,
    }

    extern "C" {
        fn setrlimit(resource: c_int, rlim: *const RLimit) -> c_int;
        fn signal(signum: c_int, handler: usize) -> usize;
    }

    const RLIMIT_FSIZE: c_int = 1;
    const SIGXFSZ: c_int = 25;
    const SIG_IGN: usize = 1;
    const SIG_ERR: usize = usize::MAX;

    /// Run `cmd` with regular files limited to `bytes` bytes.
    pub fn limit(cmd: &mut Command, bytes: u64) {
        let lim = RLimit {
            cur: bytes,
            max: bytes,
        };
        // SAFETY: between fork and exec the closure only calls `signal` and `setrlimit`, both
        // async-signal-safe system-call wrappers; `lim` is moved in and outlives the call.
        unsafe {
            cmd.pre_exec(move || {
                if signal(SIGXFSZ, SIG_IGN) == SIG_ERR || setrlimit(RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// The size of the largest regular file under `dir`.
fn largest_file(dir: &std::path::Path) -> u64 {
    let mut max = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            max = max.max(largest_file(&entry.path()));
        } else if meta.is_file() {
            max = max.max(meta.len());
        }
    }
    max
}

/// Evidence writes start failing in the middle of a 32-connection load: the real binary runs
/// with every file capped at (largest file after a first start + 1 MiB, doubled until the
/// server starts and records a first call), so the store's files (sled, the journal) hit `EFBIG` after some hundreds
/// of calls. Every call must then be
/// answered 500 `Understudy-Error: store_error` — never 200 — or succeed; the server must keep
/// answering (no crash, no dropped connection); and after a restart without the limit every
/// call that was answered 200 must be in the evidence, which must still be readable.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[test]
fn a_disk_full_under_load_answers_store_error_and_loses_no_acknowledged_call() {
    const CLIENTS: usize = 32;
    const MAX_CALLS: i64 = 50_000;
    /// Enough failures to know the store is past the limit; the load stops there.
    const STOP_AFTER_FAILURES: usize = 300;
    const HEADROOM: u64 = 1024 * 1024;
    let p = standard_project();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();

    // Start once without a limit: the store is created and the revisions synced.
    let (mut child, _, _out) = spawn_serve(&p);
    child.kill().unwrap();
    child.wait().unwrap();

    // The store grows its files by whole segments or chunks: when the server cannot start
    // under the limit, or cannot record even one call, double the headroom (each failed try
    // ends at once). The probe calls that succeed count as acknowledged.
    let after_start = largest_file(&p.data_dir());
    let mut headroom = HEADROOM;
    let mut probes_acked = Vec::new();
    let (child, base, _out, log, limit) = loop {
        let limit = after_start + headroom;
        let retry = match try_spawn_serve_with(&p, |cmd| fsize::limit(cmd, limit)) {
            Ok((mut child, base, out, log)) => {
                let n = -1 - probes_acked.len() as i64 - (headroom / HEADROOM) as i64 * 1000;
                let r = rt.block_on(support::send(
                    &support::client(),
                    "POST",
                    &format!("{base}/api/counter"),
                    Some(&json!({ "n": n })),
                    &[],
                ));
                if r.status == 200 {
                    probes_acked.push(n);
                    break (child, base, out, log, limit);
                }
                assert_eq!(
                    r.header("understudy-error"),
                    Some("store_error"),
                    "probe: {} {}",
                    r.status,
                    r.text
                );
                child.kill().unwrap();
                child.wait().unwrap();
                format!("the first call failed: {}", r.text)
            }
            Err(e) => e,
        };
        assert!(
            headroom < 256 * HEADROOM,
            "the server never recorded a call under a file-size limit: {retry}"
        );
        eprintln!("files capped at {limit} bytes: {retry}");
        headroom *= 2;
    };
    // Every start has its own default attempt: the one of this server holds the load.
    let attempt_id = rt.block_on(async {
        let default = get_json(
            &support::client(),
            &format!("{base}/_understudy/api/attempts/default"),
        )
        .await;
        default["attempt_id"]
            .as_str()
            .unwrap_or_else(|| panic!("default attempt id: {default}"))
            .to_string()
    });
    let child = Arc::new(Mutex::new(child));

    #[derive(Default)]
    struct Outcomes {
        acked: Vec<i64>,
        store_errors: Vec<i64>,
        /// Anything else: (n, status or transport error, body).
        unexpected: Vec<(i64, String, String)>,
    }
    let outcomes = rt.block_on(async {
        let next = Arc::new(AtomicI64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let out = Arc::new(Mutex::new(Outcomes::default()));
        let mut tasks = Vec::new();
        for _ in 0..CLIENTS {
            let client = support::client();
            let url = format!("{base}/api/counter");
            let (next, stop, out) = (next.clone(), stop.clone(), out.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= MAX_CALLS {
                        break;
                    }
                    let r = match client.post(&url).json(&json!({ "n": n })).send().await {
                        Ok(r) => r,
                        Err(e) => {
                            out.lock().unwrap().unexpected.push((
                                n,
                                format!("transport error: {e}"),
                                String::new(),
                            ));
                            continue;
                        }
                    };
                    let status = r.status().as_u16();
                    let code = r
                        .headers()
                        .get("understudy-error")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    let body = r.text().await.unwrap_or_default();
                    let mut o = out.lock().unwrap();
                    match (status, code.as_deref()) {
                        (200, None) => o.acked.push(n),
                        (500, Some("store_error")) => {
                            o.store_errors.push(n);
                            if o.store_errors.len() >= STOP_AFTER_FAILURES {
                                stop.store(true, Ordering::SeqCst);
                            }
                        }
                        _ => o.unexpected.push((n, format!("{status} {code:?}"), body)),
                    }
                }
            }));
        }
        let joined = tokio::time::timeout(Duration::from_secs(300), async {
            for t in tasks {
                t.await.expect("client task");
            }
        })
        .await;
        assert!(joined.is_ok(), "the load finished within 300 s");
        // Still serving after the failures: the process is alive and a fresh connection gets
        // an answer (a success or, with the store still failing, a store_error).
        assert!(
            child.lock().unwrap().try_wait().unwrap().is_none(),
            "the server exited under a full disk"
        );
        let r = support::send(
            &support::client(),
            "POST",
            &format!("{base}/api/counter"),
            Some(&json!({ "n": MAX_CALLS + 1 })),
            &[],
        )
        .await;
        assert!(
            r.status == 200 || r.header("understudy-error") == Some("store_error"),
            "after the failures: {} {}",
            r.status,
            r.text
        );
        // The admin API answers too (the evidence read from the live store, or a clear error).
        let r = support::send(
            &support::client(),
            "GET",
            &format!("{base}/_understudy/api/attempts/{attempt_id}/evidence"),
            None,
            &[],
        )
        .await;
        assert!(
            r.status == 200 || r.status == 500,
            "admin API: {} {}",
            r.status,
            r.text
        );
        if r.status == 200 {
            let failed: BTreeSet<i64> = out.lock().unwrap().store_errors.iter().copied().collect();
            let shown = r.json()["tool_events"]
                .as_array()
                .map(|evs| {
                    evs.iter()
                        .filter(|e| {
                            e["arguments"]["n"]
                                .as_i64()
                                .is_some_and(|n| failed.contains(&n))
                        })
                        .count()
                })
                .unwrap_or(0);
            eprintln!(
                "live evidence under the limit lists {shown} of the calls answered store_error"
            );
            // The agent saw failures: the live verdict says so, whatever the events say.
            let env = r.json();
            assert_eq!(
                env["verdict"], "fail",
                "a run with store_error answers cannot pass"
            );
            assert!(
                env["store_failures"].as_u64().unwrap_or(0) >= failed.len() as u64,
                "store_failures {} < {} calls answered store_error",
                env["store_failures"],
                failed.len()
            );
        }
        let mut out = Arc::try_unwrap(out).ok().unwrap().into_inner().unwrap();
        out.acked.extend(probes_acked);
        out
    });
    {
        let mut c = child.lock().unwrap();
        c.kill().unwrap(); // SIGKILL: no shutdown flush to rescue anything
        c.wait().unwrap();
    }
    let log = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    eprintln!(
        "disk full at {limit} bytes per file: {} acknowledged, {} store_error, {} other; \
         server log (last 2000 bytes):\n{}",
        outcomes.acked.len(),
        outcomes.store_errors.len(),
        outcomes.unexpected.len(),
        &log[log.len().saturating_sub(2000)..]
    );
    assert!(
        outcomes.unexpected.is_empty(),
        "every call is answered 200 or 500 store_error; others (first 5): {:?}",
        &outcomes.unexpected[..outcomes.unexpected.len().min(5)]
    );
    assert!(
        outcomes.store_errors.len() >= STOP_AFTER_FAILURES,
        "the file-size limit ({limit} bytes) was never reached in {} calls: the test proves nothing",
        outcomes.acked.len()
    );
    assert!(
        !outcomes.acked.is_empty(),
        "some calls succeeded before the limit"
    );

    // Restart without the limit: the store opens and every acknowledged call is there.
    let (mut child, base, _out) = spawn_serve(&p);
    let ev = rt.block_on(async {
        let r = support::send(
            &support::client(),
            "GET",
            &format!("{base}/_understudy/api/attempts/{attempt_id}/evidence"),
            None,
            &[],
        )
        .await;
        (r.status, r.text)
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(ev.0, 200, "evidence after the disk-full run: {}", ev.1);
    let ev: Value = serde_json::from_str(&ev.1).unwrap();
    let recorded: BTreeSet<i64> = ev["tool_events"]
        .as_array()
        .expect("tool_events")
        .iter()
        .filter_map(|e| e["arguments"]["n"].as_i64())
        .collect();
    eprintln!(
        "after the restart: {} events, verdict {} {}",
        recorded.len(),
        ev["verdict"],
        ev["verdict_reasons"]
    );
    // Calls were answered store_error: after a kill -9 and a restart the verdict is still
    // fail, by the durable mark (`store_failure`) or, when even the mark could not be
    // written on the full disk, by the interruption of every open attempt.
    assert_eq!(ev["verdict"], "fail", "{}", ev["verdict_reasons"]);
    let codes: Vec<&str> = ev["verdict_reasons"]
        .as_array()
        .expect("verdict_reasons")
        .iter()
        .filter_map(|r| r["code"].as_str())
        .collect();
    assert!(
        codes.contains(&"store_failure") || codes.contains(&"interrupted"),
        "the failure is remembered after the restart: {codes:?}"
    );
    let missing: Vec<i64> = outcomes
        .acked
        .iter()
        .copied()
        .filter(|n| !recorded.contains(n))
        .collect();
    assert!(
        missing.is_empty(),
        "{} calls answered 200 are missing from the evidence after the disk filled up (first: {:?})",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
}

/// Issue 22 (4), docs/src/reference/mock-definition.md#state (a failed call changes nothing): a call whose evidence cannot be
/// made durable is answered 500 `store_error`, and the next call does not see its state
/// change — live, and after a restart. The flush fails through the store's test hook, as a
/// transient disk error would (the write stays queued and lands with the next flush), so the
/// evidence must also say the change was withdrawn: it records a harness error
/// `store_error`, and the verdict is `fail` even after the restart (the attempt's durable
/// `store_failures` counter says so too). The disk-full load test above covers the
/// answers under a real full disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_answered_store_error_changes_no_state() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let url = format!("{}/counter", a.base("api"));
    let bump = |n: i64| {
        let (s, url) = (&s, url.clone());
        async move { s.call("POST", &url, Some(&json!({ "n": n })), &[]).await }
    };
    assert_eq!(bump(1).await.json()["previous"], -1);
    s.app.store.fail_next_flushes_for_test(1);
    let r = bump(2).await;
    assert_eq!(r.status, 500, "{}", r.text);
    assert_eq!(r.header("understudy-error"), Some("store_error"));
    let r = bump(3).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json()["previous"],
        1,
        "the call after a store_error saw its state change"
    );
    // The evidence explains every answer: n=2 was withdrawn before n=3 ran.
    let ev = s.evidence(&a.id).await;
    assert_eq!(ev["verdict"], "fail", "{ev:#}");
    let errors = ev["harness_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{ev:#}");
    assert_eq!(errors[0]["code"], "store_error");
    // One more failure, then a restart: the store's state is the one the answers saw.
    s.app.store.fail_next_flushes_for_test(1);
    assert_eq!(bump(4).await.status, 500);
    s.stop().await.unwrap();
    let s = Server::start(&p).await;
    let r = s
        .call(
            "GET",
            &format!("/_understudy/api/attempts/{}/state", a.id),
            None,
            &[],
        )
        .await;
    assert_eq!(r.json()["state"]["api"]["counter"], 3, "{}", r.text);
    let ev = s.evidence(&a.id).await;
    assert_eq!(ev["verdict"], "fail", "{ev:#}");
    assert_eq!(ev["store_failures"], 2, "{ev:#}");
    s.stop().await.unwrap();
}

// ---- upstream faults in dry-run mode --------------------------------------------------------

const CONTACT_ID: &str = "003000000000042AAA";

/// A `crm` (salesforce) project in dry-run mode forwarding to `upstream`.
fn crm_dry_run(upstream: SocketAddr) -> Project {
    let p = Project::new(&[("crm", "salesforce")]);
    p.write_config(json!({ "mode": "dry-run", "integrations": { "crm": {
        "profile": "salesforce", "operations": "mocks/crm", "upstream": format!("http://{upstream}")
    } } }));
    p
}

/// How a faulty loopback upstream treats each connection.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Accept, then reset (SO_LINGER 0) without reading.
    Reset,
    /// Accept, read the request, close without answering.
    Close,
    /// Accept, read, never answer (the connection stays open).
    Stall,
    /// Accept, read, answer bytes that are not HTTP, then close.
    Garbage,
    /// Accept, read, answer a valid head announcing 100 body bytes, send 10, close.
    TruncatedBody,
}

async fn faulty_upstream(fault: Fault) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                match fault {
                    Fault::Reset => {
                        // Zero linger: the drop sends RST and does not block.
                        #[allow(deprecated)]
                        let _ = tcp.set_linger(Some(Duration::ZERO));
                        drop(tcp);
                    }
                    Fault::Close => {
                        let _ = tcp.read(&mut buf).await;
                        drop(tcp);
                    }
                    Fault::Stall => {
                        let _ = tcp.read(&mut buf).await;
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        drop(tcp);
                    }
                    Fault::Garbage => {
                        let _ = tcp.read(&mut buf).await;
                        let _ = tcp
                            .write_all(b"\x00\x01\x02 this is not HTTP \xff\xfe\r\n\r\n")
                            .await;
                        let _ = tcp.shutdown().await;
                    }
                    Fault::TruncatedBody => {
                        let _ = tcp.read(&mut buf).await;
                        let _ = tcp
                            .write_all(
                                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                                  content-length: 100\r\n\r\n{\"Id\": \"0",
                            )
                            .await;
                        let _ = tcp.shutdown().await;
                    }
                }
            });
        }
    });
    addr
}

/// One forwarded read through a faulty upstream: a 500 with `Understudy-Error:
/// upstream_unavailable`, recorded as a harness error; never a hang.
async fn assert_upstream_unavailable(fault: Fault) {
    let addr = faulty_upstream(fault).await;
    let p = crm_dry_run(addr);
    let mut opts = p.options();
    opts.forward.upstream_timeout = Duration::from_millis(500);
    let s = Server::start_with(opts).await;
    let path = format!("/crm/services/data/v60.0/sobjects/Contact/{CONTACT_ID}");
    let call = s.call("GET", &path, None, &[]);
    let r = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap_or_else(|_| panic!("{fault:?}: the call did not complete within 30 s"));
    assert_eq!(r.status, 500, "{fault:?}: {}", r.text);
    assert_eq!(
        r.header("understudy-error"),
        Some("upstream_unavailable"),
        "{fault:?}: {}",
        r.text
    );
    let msg = r.json()["understudy_error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(msg.contains(&addr.to_string()), "{fault:?}: {msg}");
    let ev = s.evidence(&s.default_attempt()).await;
    assert_eq!(
        ev["harness_errors"][0]["code"], "upstream_unavailable",
        "{fault:?}: {ev}"
    );
    assert_eq!(ev["verdict"], "fail");
    tokio::time::timeout(Duration::from_secs(30), s.stop())
        .await
        .unwrap_or_else(|_| panic!("{fault:?}: the server did not stop within 30 s"))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_resets_the_connection_is_upstream_unavailable() {
    assert_upstream_unavailable(Fault::Reset).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_closes_without_answering_is_upstream_unavailable() {
    assert_upstream_unavailable(Fault::Close).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_upstream_is_upstream_unavailable_within_the_timeout() {
    assert_upstream_unavailable(Fault::Stall).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_answering_garbage_is_upstream_unavailable() {
    assert_upstream_unavailable(Fault::Garbage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_cuts_its_body_short_is_upstream_unavailable() {
    assert_upstream_unavailable(Fault::TruncatedBody).await;
}

// ---- start errors ---------------------------------------------------------------------------

/// The test runs as root (permissions are ignored), so the data dir is made impossible by
/// putting it under a regular file.
#[test]
fn a_read_only_data_dir_is_a_clear_start_error() {
    let p = standard_project();
    std::fs::write(p.path().join("blocker"), b"a regular file").unwrap();
    p.write_config(json!({ "data_dir": "blocker/data" }));
    let mut child = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["serve", "--config"])
        .arg(p.config_path())
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Guard: a server that starts anyway must not hang the test.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve with an impossible data dir did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        !stdout.contains("understudy listening on"),
        "never ready: {stdout}"
    );
    assert!(
        stderr.contains("blocker"),
        "the message names the path: {stderr}"
    );
}

// ---- seeded chaos at attempt creation (issue 15) -------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempt_creation_validates_and_keeps_seeded_faults() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let create = |body: Value| {
        let s = &s;
        async move {
            s.call("POST", "/_understudy/api/attempts", Some(&body), &[])
                .await
        }
    };
    let r =
        create(json!({"faults": {"crm/nope": {"kind": "timeout", "after_effect": true}}})).await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.json()["error"]["code"], "unknown_operation", "{}", r.text);
    assert!(r.text.contains("crm/nope"), "{}", r.text);
    let r = create(json!({"faults": {"api/bump": {"kind": "stream_cut", "after_effect": true, "probability": 2}}})).await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(
        r.text
            .contains("faults/api/bump/kind: `stream_cut` is an MCP fault"),
        "{}",
        r.text
    );
    assert!(
        r.text
            .contains("faults/api/bump/probability: 2: expected a number 0..=1"),
        "{}",
        r.text
    );
    let r = create(
        json!({"faults": {"api/bump": {"kind": "timeout", "after_effect": true, "bogus": 1}}}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let spec = json!({"kind": "timeout", "after_effect": true, "probability": 0.5, "seed": 42, "times": 1});
    let r = create(json!({"faults": {"api/bump": spec}})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.json()["attempt_id"].as_str().unwrap().to_string();
    let got = s
        .call("GET", &format!("/_understudy/api/attempts/{id}"), None, &[])
        .await;
    assert_eq!(got.json()["faults"]["api/bump"], spec, "{}", got.text);
}
