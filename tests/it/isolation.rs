//! Isolation and secrets (issue "Reliability and security hardening"): an attempt token never
//! unlocks another attempt (path prefix, header, admin API), the admin API refuses every route
//! without its bearer token, data files are private, and raw secrets (Authorization values,
//! idempotency keys, redacted fields) never reach disk, logs or exports.
//!
//! The CA key's 0600 mode is tested in `tls.rs` (`ca_init_writes_the_pair_with_a_private_key_file`).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::support::{self, standard_project, Project, Server};

const ADMIN: &str = "admin-s3cret-token";

/// The counter operation answers the pre-call `counter`: what each attempt sees.
async fn bump(s: &Server, path: &str, n: i64, headers: &[(&str, &str)]) -> support::Resp {
    s.call("POST", path, Some(&json!({ "n": n })), headers)
        .await
}

async fn create(s: &Server, admin: &[(&str, &str)]) -> support::Attempt {
    let r = s
        .call("POST", "/_understudy/api/attempts", Some(&json!({})), admin)
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let v = r.json();
    support::Attempt {
        id: v["attempt_id"].as_str().unwrap().into(),
        token: v["token"].as_str().unwrap().into(),
        body: v,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_token_never_unlocks_another_attempt() {
    let p = standard_project();
    let mut opts = p.options();
    opts.admin_token = Some(ADMIN.into());
    let s = Server::start_with(opts).await;
    let bearer = format!("Bearer {ADMIN}");
    let admin = [("Authorization", bearer.as_str())];
    let a = create(&s, &admin).await;
    let b = create(&s, &admin).await;
    assert_eq!(
        bump(&s, &format!("{}/counter", a.base("api")), 100, &[])
            .await
            .status,
        200
    );
    assert_eq!(
        bump(&s, &format!("{}/counter", b.base("api")), 200, &[])
            .await
            .status,
        200
    );
    // Each attempt sees only its own state, by path and by header.
    let r = bump(&s, &format!("{}/counter", a.base("api")), 101, &[]).await;
    assert_eq!(r.json()["previous"], 100);
    let r = bump(&s, "/api/counter", 201, &[("Understudy-Attempt", &b.token)]).await;
    assert_eq!(r.json()["previous"], 200);
    // Mixing the two tokens in one request is refused, whichever way round.
    for (path, header) in [
        (format!("{}/counter", a.base("api")), b.token.as_str()),
        (format!("{}/counter", b.base("api")), a.token.as_str()),
    ] {
        let r = bump(&s, &path, 666, &[("Understudy-Attempt", header)]).await;
        assert_eq!(r.status, 401, "{}", r.text);
        assert!(!r.text.contains("previous"));
    }
    // Two headers (one of each) are refused too.
    let r = s
        .http
        .post(s.url("/api/counter"))
        .header("Understudy-Attempt", &a.token)
        .header("Understudy-Attempt", &b.token)
        .json(&json!({ "n": 666 }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // A token-prefixed admin path is not the admin API: it reaches no evidence.
    let r = s
        .call(
            "GET",
            &format!("/~{}/_understudy/api/attempts/{}/evidence", a.token, b.id),
            None,
            &[],
        )
        .await;
    assert_ne!(r.status, 200, "{}", r.text);
    assert!(!r.text.contains(&b.id) || !r.text.contains("tool_events"));
    // An attempt token is never an admin token: not as a bearer, not as the attempt header.
    for (who, headers) in [
        (
            "bearer a",
            vec![("Authorization", format!("Bearer {}", a.token))],
        ),
        (
            "bearer b",
            vec![("Authorization", format!("Bearer {}", b.token))],
        ),
        ("header b", vec![("Understudy-Attempt", b.token.clone())]),
        (
            "header b + bearer b",
            vec![
                ("Understudy-Attempt", b.token.clone()),
                ("Authorization", format!("Bearer {}", b.token)),
            ],
        ),
    ] {
        let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        for (method, path) in [
            (
                "GET",
                format!("/_understudy/api/attempts/{}/evidence", b.id),
            ),
            ("GET", format!("/_understudy/api/attempts/{}/state", b.id)),
            ("GET", format!("/_understudy/api/attempts/{}", b.id)),
            ("DELETE", format!("/_understudy/api/attempts/{}", b.id)),
        ] {
            let r = s.call(method, &path, None, &h).await;
            assert_eq!(r.status, 401, "{who}: {method} {path}: {}", r.text);
            assert!(!r.text.contains("tool_events") && !r.text.contains("counter"));
        }
    }
    // B is untouched: its two calls only, its state its own.
    let r = s
        .call(
            "GET",
            &format!("/_understudy/api/attempts/{}/evidence", b.id),
            None,
            &admin,
        )
        .await;
    assert_eq!(r.status, 200);
    let ev = r.json();
    let events = ev["tool_events"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e["arguments"]["n"] != 666));
    assert_eq!(ev["final_state"]["api"]["counter"], 201);
    // The tokens themselves are not in the evidence, and the attempt view does not repeat them.
    assert!(!r.text.contains(&b.token) && !r.text.contains(&a.token));
    let r = s
        .call(
            "GET",
            &format!("/_understudy/api/attempts/{}", b.id),
            None,
            &admin,
        )
        .await;
    assert_eq!(r.status, 200);
    assert!(!r.text.contains(&b.token), "{}", r.text);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admin_route_refuses_without_the_admin_token() {
    let p = standard_project();
    let mut opts = p.options();
    opts.admin_token = Some(ADMIN.into());
    let s = Server::start_with(opts).await;
    let id = s.default_attempt();
    let routes: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", "/_understudy/api/health".into(), None),
        ("GET", "/_understudy/api/metrics".into(), None),
        ("GET", "/_understudy/api/tools".into(), None),
        ("GET", "/_understudy/api/tools/api/testing".into(), None),
        (
            "POST",
            "/_understudy/api/tools/api/testing".into(),
            Some(json!({ "action": "generate", "operation_id": "bump" })),
        ),
        (
            "POST",
            "/_understudy/api/tools/testing".into(),
            Some(json!({})),
        ),
        (
            "POST",
            "/_understudy/api/tools/execute".into(),
            Some(json!({ "integration": "api", "operation_id": "bump", "input": { "n": 1 } })),
        ),
        ("GET", "/_understudy/api/revisions/api/bump".into(), None),
        ("POST", "/_understudy/api/attempts".into(), Some(json!({}))),
        ("GET", format!("/_understudy/api/attempts/{id}"), None),
        (
            "GET",
            format!("/_understudy/api/attempts/{id}/evidence"),
            None,
        ),
        ("GET", format!("/_understudy/api/attempts/{id}/state"), None),
        (
            "GET",
            "/_understudy/api/attempts/default/evidence".into(),
            None,
        ),
        ("DELETE", format!("/_understudy/api/attempts/{id}"), None),
        ("GET", "/_understudy/api/no-such-route".into(), None),
        ("PUT", "/_understudy/api/attempts".into(), None),
    ];
    let wrong = [
        vec![],
        vec![("Authorization", "Bearer")],
        vec![("Authorization", "Bearer ")],
        vec![("Authorization", "Bearer wrong")],
        vec![("Authorization", "Basic YWRtaW4tczNjcmV0LXRva2Vu")],
        vec![("Authorization", ADMIN)],
        vec![("Authorization", "Bearer admin-s3cret-toke")],
        vec![("Authorization", "Bearer admin-s3cret-tokenX")],
        vec![("X-Admin-Token", ADMIN)],
    ];
    for (method, path, body) in &routes {
        for h in &wrong {
            let r = s.call(method, path, body.as_ref(), h).await;
            assert_eq!(r.status, 401, "{method} {path} with {h:?}: {}", r.text);
            assert_eq!(r.json()["error"]["code"], "unauthorized");
        }
        let bearer = format!("bearer {ADMIN}");
        let r = s
            .call(method, path, body.as_ref(), &[("Authorization", &bearer)])
            .await;
        assert_ne!(r.status, 401, "{method} {path} with the token: {}", r.text);
    }
    // Nothing above changed anything without the token: the default attempt still runs.
    let r = bump(&s, "/api/counter", 1, &[]).await;
    assert_eq!(r.status, 200);
    s.stop().await.unwrap();
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_dir_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let p = standard_project();
    let s = Server::start(&p).await;
    assert_eq!(bump(&s, "/api/counter", 1, &[]).await.status, 200);
    s.stop().await.unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&p.data_dir()), 0o700, "the data dir is created 0700");
    assert_eq!(mode(&p.data_dir().join("sled")), 0o700);
    // Nothing below it is writable by others (and the dirs above keep everything private).
    for f in walk(&p.data_dir()) {
        assert_eq!(
            mode(&f) & 0o022,
            0,
            "{} is group/world writable",
            f.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Secrets

const AUTH: &str = "SECRET-AUTH-123";
const IDEM: &str = "SECRET-IDEM-456";
const SSN: &str = "SECRET-SSN-789";

fn secrets_project() -> Project {
    let p = Project::new(&[("api", "rest")]);
    p.write_config(json!({ "redact": ["ssn"] }));
    p.op(
        "api",
        json!({
            "operation_id": "create_order",
            "match": { "method": "POST", "path": "/orders" },
            "idempotency": { "header": "Idempotency-Key" },
            "input_schema": { "type": "object", "required": ["item"] },
            "output_schema": { "type": "object", "required": ["status"] },
            "mock": {
                "schema_version": 1, "default_variant": "ok",
                "initial_state": { "last": null },
                "variants": { "ok": {
                    "result": { "status": 201, "data": { "item": { "$input": "item" }, "ssn": { "$input": "ssn" } } },
                    "set_state": { "last": { "$input": "item" }, "ssn": { "$input": "ssn" } }
                } },
                "examples": [ { "variant": "ok", "input": { "item": "a", "ssn": "x" },
                                "expected": { "status": 201, "data": { "item": "a", "ssn": "x" } } } ]
            }
        }),
    );
    p
}

/// docs/src/reference/operation-files.md#idempotency, docs/src/reference/evidence-envelope.md: raw idempotency keys and Authorization values never leave the proxy (not
/// in the store, not in the logs at debug level, not in any answer); redacted fields never
/// leave it through an export (API or CLI). The real binary runs with JSON logs at `debug`.
#[test]
fn secrets_never_reach_disk_logs_or_answers() {
    let p = secrets_project();
    let mut child = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["serve", "--config"])
        .arg(p.config_path())
        .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    stdout.read_line(&mut ready).unwrap();
    let base = ready
        .trim()
        .strip_prefix("understudy listening on ")
        .unwrap_or_else(|| panic!("unexpected readiness line {ready:?}"))
        .to_string();
    // Drain stderr on a thread so the server never blocks on a full pipe.
    let mut stderr = child.stderr.take().unwrap();
    let logs = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let auth = format!("Bearer {AUTH}");
    let (attempt_id, answers) = rt.block_on(async {
        let c = support::client();
        let mut answers = String::new();
        let r = support::send(
            &c,
            "POST",
            &format!("{base}/_understudy/api/attempts"),
            Some(&json!({ "test_run_id": "secrets" })),
            &[("Authorization", &auth)],
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text);
        answers.push_str(&r.text);
        let a = r.json();
        let token = a["token"].as_str().unwrap().to_string();
        let id = a["attempt_id"].as_str().unwrap().to_string();
        let orders = format!("{base}/~{token}/api/orders");
        let headers = [
            ("Authorization", auth.as_str()),
            ("Idempotency-Key", IDEM),
            ("Cookie", "session=SECRET-AUTH-123"),
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
        ];
        let body = json!({ "item": "book", "ssn": SSN });
        for (b, status) in [
            (body.clone(), 201),
            (body.clone(), 201), // replayed
            (json!({ "item": "other", "ssn": SSN }), 422),
        ] {
            let r = support::send(&c, "POST", &orders, Some(&b), &headers).await;
            assert_eq!(r.status, status, "{}", r.text);
            answers.push_str(&r.text);
            for (k, v) in r.headers.iter() {
                answers.push_str(&format!("{k}: {v:?}\n"));
            }
        }
        // An unmatched request carrying the same secrets (a harness error, logged at warn).
        let r = support::send(
            &c,
            "POST",
            &format!("{base}/~{token}/api/nowhere"),
            Some(&json!({ "ssn": SSN })),
            &headers,
        )
        .await;
        assert_eq!(r.status, 500);
        answers.push_str(&r.text);
        for path in [
            format!("/_understudy/api/attempts/{id}/evidence"),
            format!("/_understudy/api/attempts/{id}"),
            format!("/_understudy/api/attempts/{id}/state"),
            "/_understudy/api/metrics".to_string(),
        ] {
            let r = support::send(&c, "GET", &format!("{base}{path}"), None, &[]).await;
            assert_eq!(r.status, 200, "{path}: {}", r.text);
            answers.push_str(&r.text);
        }
        let ev = support::send(
            &c,
            "GET",
            &format!("{base}/_understudy/api/attempts/{id}/evidence"),
            None,
            &[],
        )
        .await
        .json();
        let statuses: Vec<&str> = ev["tool_events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["result_status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses, ["ok", "replayed", "input_error", "harness_error"]);
        assert!(ev["tool_events"][0]["idempotency_key_ref"].is_string());
        assert_eq!(ev["tool_events"][0]["arguments"]["ssn"], "[redacted]");
        assert_eq!(ev["tool_events"][0]["result"]["data"]["ssn"], "[redacted]");
        assert_eq!(ev["final_state"]["api"]["ssn"], "[redacted]");
        (id, answers)
    });
    // Graceful stop (SIGTERM), so the logs are complete and the store is flushed.
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = child.wait().unwrap();
    assert!(status.success(), "serve exits 0 on SIGTERM: {status:?}");
    let logs = logs.join().unwrap();
    assert!(
        logs.contains("\"level\":\"DEBUG\"") || logs.to_lowercase().contains("debug"),
        "debug logs were captured"
    );
    // The CLI export.
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["evidence", &attempt_id, "--config"])
        .arg(p.config_path())
        .output()
        .unwrap();
    let cli =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the harness error fails it: {cli}"
    );
    assert!(cli.contains("[redacted]"), "{cli}");

    for secret in [AUTH, IDEM] {
        assert!(!logs.contains(secret), "{secret} in the logs:\n{logs}");
        assert!(
            !answers.contains(secret),
            "{secret} in an answer:\n{answers}"
        );
        assert!(!cli.contains(secret), "{secret} in `understudy evidence`");
        for f in walk(&p.data_dir()) {
            if f.is_file() {
                let bytes = std::fs::read(&f).unwrap();
                assert!(
                    !contains(&bytes, secret.as_bytes()),
                    "{secret} in {}",
                    f.display()
                );
            }
        }
    }
    // A redacted field never leaves through an export or a log line (the store keeps the raw
    // value: redaction applies to exports, docs/src/reference/evidence-envelope.md).
    assert!(!cli.contains(SSN), "{cli}");
    assert!(!logs.contains(SSN), "{SSN} in the logs");
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
