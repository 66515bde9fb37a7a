//! File descriptors: the real binary under a low `RLIMIT_NOFILE` (256, soft and hard) serves
//! 2 000 attempts with calls interleaved across all of them (no checkpoint in between, so
//! every evidence file written is unsynced when the next attempt's is opened): every call is
//! answered 200, and every attempt's evidence reads back whole — before and after a kill -9
//! and a restart under the same limit (whose journal replay touches all 2 000 files). And
//! out of descriptors anyway (connections took them), a call is still recorded and the
//! server serves new connections once those go.

use std::future::Future;
use std::os::unix::process::CommandExt;
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::net::TcpStream;

use crate::faults::{get_json, try_spawn_serve_with, Lines, Log};
use crate::https::exchange;
use crate::support::{self, standard_project, Project};

const NOFILE: u64 = 256;
const ATTEMPTS: usize = 2000;
const CLIENTS: usize = 32;

/// A server process, killed (SIGKILL) when dropped — also when an assertion fails.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `understudy serve` with its open files limited to [`NOFILE`].
fn spawn_limited(p: &Project) -> (Killed, String, Lines, Log) {
    let (child, base, lines, log) = try_spawn_serve_with(p, |cmd| {
        // SAFETY: between fork and exec the closure only calls `setrlimit`, an
        // async-signal-safe system call.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: NOFILE,
                    rlim_max: NOFILE,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
    .unwrap_or_else(|e| panic!("{e}"));
    (Killed(child), base, lines, log)
}

/// Runs `f(0..n)` on [`CLIENTS`] concurrent tasks and returns the failures it reported.
async fn on_clients<F, Fut>(n: usize, f: F) -> Vec<String>
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (next, failures, f) = (next.clone(), failures.clone(), f.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    break;
                }
                if let Err(e) = f(i).await {
                    failures.lock().unwrap().push(e);
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
    let f = failures.lock().unwrap().clone();
    f
}

fn assert_none(what: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{what}: {} failures, first: {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
}

/// Every attempt's evidence holds its two calls, `n` = `2i` then `2i + 1`, sequences 1 and 2.
async fn assert_evidence_complete(client: &reqwest::Client, base: &str, ids: &Arc<Vec<String>>) {
    let (client, base, ids) = (client.clone(), base.to_string(), ids.clone());
    let failures = on_clients(ATTEMPTS, move |i| {
        let (client, base, ids) = (client.clone(), base.clone(), ids.clone());
        async move {
            let url = format!("{base}/_understudy/api/attempts/{}/evidence", ids[i]);
            let r = support::send(&client, "GET", &url, None, &[]).await;
            if r.status != 200 {
                return Err(format!("GET {url}: {} {}", r.status, r.text));
            }
            let ev = r.json();
            let got: Vec<(Value, Value)> = ev["tool_events"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|e| (e["sequence"].clone(), e["arguments"]["n"].clone()))
                        .collect()
                })
                .unwrap_or_default();
            let want = vec![(json!(1), json!(2 * i)), (json!(2), json!(2 * i + 1))];
            if got != want {
                return Err(format!("attempt {i}: evidence {got:?}, want {want:?}"));
            }
            Ok(())
        }
    })
    .await;
    assert_none("evidence read back", &failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_thousand_attempts_under_a_256_open_files_limit_are_all_answered_and_recorded() {
    let p = standard_project();
    let (server, base, _out, log) = spawn_limited(&p);
    let client = support::client();
    let (ids, tokens) = {
        // The attempts first: creating one checkpoints the store, so the calls below leave
        // every evidence file they touch unsynced until the next checkpoint.
        let slots = Arc::new(Mutex::new(vec![None; ATTEMPTS]));
        let (c, b, s) = (client.clone(), base.clone(), slots.clone());
        let failures = on_clients(ATTEMPTS, move |i| {
            let (client, base, slots) = (c.clone(), b.clone(), s.clone());
            async move {
                let url = format!("{base}/_understudy/api/attempts");
                let r = support::send(&client, "POST", &url, Some(&json!({})), &[]).await;
                if r.status != 201 {
                    return Err(format!("attempt {i}: {} {}", r.status, r.text));
                }
                let v = r.json();
                slots.lock().unwrap()[i] = Some((
                    v["attempt_id"].as_str().unwrap().to_string(),
                    v["token"].as_str().unwrap().to_string(),
                ));
                Ok(())
            }
        })
        .await;
        assert_none("attempt creation", &failures);
        let (ids, tokens): (Vec<String>, Vec<String>) =
            slots.lock().unwrap().drain(..).map(Option::unwrap).unzip();
        (Arc::new(ids), Arc::new(tokens))
    };

    // Two rounds over all attempts: the second reopens every evidence file (and its
    // state) where the first left it; the counter answers the previous call's `n`.
    for round in 0..2 {
        let (c, b, t) = (client.clone(), base.clone(), tokens.clone());
        let failures = on_clients(ATTEMPTS, move |i| {
            let (client, base, tokens) = (c.clone(), b.clone(), t.clone());
            async move {
                let url = format!("{base}/~{}/api/counter", tokens[i]);
                let n = 2 * i + round;
                let r = support::send(&client, "POST", &url, Some(&json!({ "n": n })), &[]).await;
                if r.status != 200 {
                    return Err(format!(
                        "round {round}, attempt {i}: {} {}",
                        r.status, r.text
                    ));
                }
                let want = if round == 0 { -1 } else { n as i64 - 1 };
                if r.json()["previous"] != json!(want) {
                    return Err(format!("attempt {i}: answered {}, want {want}", r.text));
                }
                Ok(())
            }
        })
        .await;
        assert_none(&format!("calls of round {round}"), &failures);
    }
    assert_evidence_complete(&client, &base, &ids).await;
    let log = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    assert!(
        log.contains(&format!("open_files_limit={NOFILE}")),
        "the start-up log names the open files limit:\n{log}"
    );

    // kill -9: the journal still holds every call; the restart replays it into 2 000 files.
    drop(server);
    let (server, base, _out, _log) = spawn_limited(&p);
    assert_evidence_complete(&client, &base, &ids).await;
    // The restarted server serves too: the default attempt answers a call.
    let r = support::send(
        &client,
        "POST",
        &format!("{base}/api/counter"),
        Some(&json!({ "n": 1 })),
        &[],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let _ = get_json(&client, &format!("{base}/_understudy/api/attempts/default")).await;
    drop(server);
}

/// How many file descriptors process `pid` has open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// One HTTP/1.1 request on an open connection; the answer's status and body.
async fn request_on(conn: &mut TcpStream, method: &str, path: &str, body: &str) -> (u16, String) {
    // The listener's own name: the control plane refuses any other Host.
    let host = conn.peer_addr().unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (status, _, body) = exchange(conn, &req).await;
    (status, body)
}

/// Out of file descriptors anyway — idle connections hold every one the limit leaves — a call
/// whose evidence file must be opened closes the idle evidence files and is recorded (200),
/// and once those connections go the server accepts and serves new ones as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_a_call_is_still_recorded_and_the_server_recovers() {
    let p = standard_project();
    let (server, base, _out, log) = spawn_limited(&p);
    let client = support::client();
    let attempt = |client: reqwest::Client, base: String| async move {
        let url = format!("{base}/_understudy/api/attempts");
        let r = support::send(&client, "POST", &url, Some(&json!({})), &[]).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let v = r.json();
        let s = |k: &str| v[k].as_str().unwrap().to_string();
        (s("attempt_id"), s("token"))
    };
    // Evidence files open, fewer than the cap (a quarter of 256): calls on 30 attempts.
    for n in 0..30 {
        let (_, token) = attempt(client.clone(), base.clone()).await;
        let url = format!("{base}/~{token}/api/counter");
        let r = support::send(&client, "POST", &url, Some(&json!({ "n": n })), &[]).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let (probe_id, probe_token) = attempt(client.clone(), base.clone()).await;
    let addr = base.strip_prefix("http://").unwrap().to_string();
    let mut conn = TcpStream::connect(&addr).await.unwrap();
    let (status, _) = request_on(&mut conn, "GET", "/_understudy/api/health", "").await;
    assert_eq!(status, 200, "the probe connection is accepted");

    // Connections the server accepts until it has no descriptor left.
    let pid = server.0.id();
    let mut hogs = Vec::new();
    loop {
        let free = (NOFILE as usize).saturating_sub(open_fds(pid));
        if free == 0 {
            break;
        }
        assert!(
            hogs.len() < 4 * NOFILE as usize,
            "the server's descriptors never ran out"
        );
        for _ in 0..free {
            hogs.push(TcpStream::connect(&addr).await.unwrap());
        }
        // Let the server accept them (it backs off once accept fails).
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let path = format!("/~{probe_token}/api/counter");
    let (status, body) = request_on(&mut conn, "POST", &path, r#"{"n":1000}"#).await;
    assert_eq!(status, 200, "a call with no descriptor left: {body}");

    drop(hogs);
    let client = support::client();
    let (_, token) = attempt(client.clone(), base.clone()).await;
    let url = format!("{base}/~{token}/api/counter");
    let r = support::send(&client, "POST", &url, Some(&json!({ "n": 1001 })), &[]).await;
    assert_eq!(
        r.status, 200,
        "a new connection after the others went: {}",
        r.text
    );
    let ev = get_json(
        &client,
        &format!("{base}/_understudy/api/attempts/{probe_id}/evidence"),
    )
    .await;
    assert_eq!(ev["tool_events"][0]["arguments"]["n"], 1000, "{ev}");
    let log = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    assert!(
        log.contains("out of file descriptors opening an evidence file"),
        "the call ran out of descriptors (and said so):\n{log}"
    );
    drop(server);
}
