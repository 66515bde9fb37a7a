//! The control plane (`/_understudy/…`): who may drive understudy. Each foreign `Host`,
//! `Origin` and simple-request `Content-Type` is refused alone (so each test fails when its
//! rule is removed) and nothing reaches a loopback upstream that counts what it receives;
//! loopback is trusted only without proxy headers; every route of the router's own table is
//! walked with each scope; a real upstream write needs `--allow-upstream-writes`; a headless
//! Chromium page on another loopback origin cannot drive it; a WireMock import cannot read
//! outside its directory and never keeps a credential.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use understudy::admin::{Need, ROUTES};
use understudy::config::Scope;

use crate::support::{self, rest_op, Project, Server};

/// A loopback upstream that counts every request it receives and answers 200 JSON.
pub(crate) struct Counting {
    pub url: String,
    pub count: Arc<AtomicUsize>,
    /// Every request head and body it received.
    pub seen: Arc<std::sync::Mutex<Vec<String>>>,
}

pub(crate) async fn counting_upstream(answer: Value) -> Counting {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (c, s) = (count.clone(), seen.clone());
    let body = answer.to_string();
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = l.accept().await else {
                return;
            };
            let (c, s, body) = (c.clone(), s.clone(), body.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while let Some((head, b)) = support::read_raw_request(&mut tcp, &mut buf).await {
                    c.fetch_add(1, Ordering::SeqCst);
                    s.lock()
                        .unwrap()
                        .push(format!("{head}\n{}", String::from_utf8_lossy(&b)));
                    let r = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if tcp.write_all(r.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Counting { url, count, seen }
}

/// A REST project whose `book` operation is a write, with `crm` pointing at `upstream`.
fn project(upstream: &str, extra: Value) -> Project {
    let p = Project::new(&[("crm", "rest")]);
    let mut cfg = json!({ "integrations": { "crm": {
        "profile": "rest", "operations": "mocks/crm", "upstream": upstream } } });
    if let (Value::Object(c), Value::Object(e)) = (&mut cfg, extra) {
        for (k, v) in e {
            c.insert(k, v);
        }
    }
    p.write_config(cfg);
    let mut op = rest_op(
        "book",
        "POST",
        "/book",
        Some(support::mock(json!({"status": 201}), json!({}))),
    );
    op["write"] = json!(true);
    p.op("crm", op);
    p.op(
        "crm",
        rest_op(
            "list",
            "GET",
            "/things",
            Some(support::mock(json!({"status": 200}), json!({}))),
        ),
    );
    p
}

const EXECUTE: &str = "/_understudy/api/tools/execute";

fn write_body() -> String {
    json!({"integration": "crm", "operation_id": "book", "target": "upstream",
           "allow_write": true, "input": {}})
    .to_string()
}

/// POST the upstream write with these headers (the body as given, raw).
async fn post(s: &Server, body: &str, headers: &[(&str, &str)]) -> support::Resp {
    s.call_raw("POST", EXECUTE, body, headers).await
}

fn code(r: &support::Resp) -> String {
    let v = r.json();
    v["understudy_error"]["code"]
        .as_str()
        .or_else(|| v["error"]["code"].as_str())
        .unwrap_or("")
        .to_string()
}

fn no_cors_headers(r: &support::Resp) {
    for (k, _) in r.headers.iter() {
        assert!(
            !k.as_str().starts_with("access-control-"),
            "a CORS header was sent: {k} ({:?})",
            r.headers
        );
    }
}

async fn refusals(s: &Server) -> String {
    let r = s.call("GET", "/_understudy/api/metrics", None, &[]).await;
    assert_eq!(r.status, 200);
    r.text
        .lines()
        .filter(|l| l.starts_with("understudy_admin_refusals_total{"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn each_foreign_header_is_refused_alone_and_nothing_reaches_the_upstream() {
    let up = counting_upstream(json!({"id": "a1"})).await;
    let p = project(&up.url, json!({}));
    let s = Server::start(&p).await;
    let port = s.addr.port();
    let json_ct = ("content-type", "application/json");
    let evil_host = format!("evil.test:{port}");
    let other_loopback = "http://127.0.0.1:1".to_string();
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        // DNS rebinding: the page's name now resolves to 127.0.0.1.
        (
            vec![json_ct, ("host", evil_host.as_str())],
            "forbidden_host",
        ),
        (vec![json_ct, ("host", "localhost:1")], "forbidden_host"),
        // A page the developer visits.
        (
            vec![json_ct, ("origin", "http://evil.test")],
            "forbidden_origin",
        ),
        (
            vec![json_ct, ("origin", other_loopback.as_str())],
            "forbidden_origin",
        ),
        (vec![json_ct, ("origin", "null")], "forbidden_origin"),
        // The simple requests a page sends without a preflight.
        (vec![("content-type", "text/plain")], "content_type"),
        (
            vec![("content-type", "text/plain;charset=UTF-8")],
            "content_type",
        ),
        (
            vec![("content-type", "application/x-www-form-urlencoded")],
            "content_type",
        ),
        (
            vec![("content-type", "multipart/form-data; boundary=x")],
            "content_type",
        ),
        (vec![], "content_type"),
    ];
    for (headers, want) in &cases {
        let r = post(&s, &write_body(), headers).await;
        assert_eq!(r.status, 403, "{headers:?}: {}", r.text);
        assert_eq!(code(&r), *want, "{headers:?}: {}", r.text);
        no_cors_headers(&r);
    }
    // A read through a foreign Host is refused too (DNS rebinding reads evidence).
    let r = s
        .call(
            "GET",
            "/_understudy/api/attempts/default/evidence",
            None,
            &[("host", &evil_host)],
        )
        .await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (403, "forbidden_host"),
        "{}",
        r.text
    );
    let r = s
        .call(
            "GET",
            "/_understudy/ui/",
            None,
            &[("origin", "http://evil.test")],
        )
        .await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (403, "forbidden_origin"),
        "{}",
        r.text
    );
    // The request itself, from the listener's own origin, is still not a write upstream:
    // this server was started without --allow-upstream-writes.
    let own = format!("http://127.0.0.1:{port}");
    let r = post(&s, &write_body(), &[json_ct, ("origin", &own)]).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (403, "upstream_writes_disabled"),
        "{}",
        r.text
    );
    no_cors_headers(&r);
    assert_eq!(
        up.count.load(Ordering::SeqCst),
        0,
        "the upstream received {:?}",
        up.seen
    );
    // Counted, by code.
    let m = refusals(&s).await;
    for (code, n) in [
        ("forbidden_host", 3),
        ("forbidden_origin", 4),
        ("content_type", 5),
        ("upstream_writes_disabled", 1),
    ] {
        assert!(
            m.contains(&format!(
                "understudy_admin_refusals_total{{code=\"{code}\"}} {n}"
            )),
            "{code} {n} in\n{m}"
        );
    }
    s.stop().await.unwrap();
}

#[tokio::test]
async fn opened_deliberately_hosts_origins_and_upstream_writes() {
    let up = counting_upstream(json!({"id": "a1"})).await;
    let p = project(
        &up.url,
        json!({"allowed_hosts": ["understudy.internal"],
               "allowed_origins": ["https://dash.example.com"]}),
    );
    let mut opts = p.options();
    opts.forward.allow_upstream_writes = true;
    let s = Server::start_with(opts).await;
    let json_ct = ("content-type", "application/json");
    // A name from allowed_hosts, an origin from allowed_origins.
    let r = s
        .call(
            "GET",
            "/_understudy/api/health",
            None,
            &[("host", "understudy.internal")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    no_cors_headers(&r);
    let r = s
        .call(
            "GET",
            "/_understudy/api/tools",
            None,
            &[("origin", "https://dash.example.com")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://dash.example.com")
    );
    // Its preflight.
    let r = s
        .call(
            "OPTIONS",
            EXECUTE,
            None,
            &[
                ("origin", "https://dash.example.com"),
                ("access-control-request-method", "POST"),
            ],
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://dash.example.com")
    );
    // Another origin still gets nothing.
    let r = s
        .call(
            "OPTIONS",
            EXECUTE,
            None,
            &[
                ("origin", "https://other.example.com"),
                ("access-control-request-method", "POST"),
            ],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    no_cors_headers(&r);
    // With --allow-upstream-writes the write is sent, once: the counter sees it.
    let r = post(&s, &write_body(), &[json_ct]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(up.count.load(Ordering::SeqCst), 1, "{}", r.text);
    s.stop().await.unwrap();
}

#[tokio::test]
async fn loopback_is_trusted_only_without_proxy_headers() {
    let up = counting_upstream(json!({})).await;
    let p = project(&up.url, json!({}));
    let s = Server::start(&p).await;
    let health = "/_understudy/api/health";
    assert_eq!(s.call("GET", health, None, &[]).await.status, 200);
    for h in ["x-forwarded-for", "forwarded", "x-real-ip"] {
        let r = s.call("GET", health, None, &[(h, "203.0.113.9")]).await;
        assert_eq!(r.status, 401, "{h}: {}", r.text);
        assert!(r.text.contains("proxy header"), "{}", r.text);
    }
    s.stop().await.unwrap();
    // "trust_loopback": false: loopback alone grants nothing, a token does.
    let token = "tok-loopback-off-123";
    p.write_config(json!({
        "integrations": {"crm": {"profile": "rest", "operations": "mocks/crm", "upstream": up.url}},
        "trust_loopback": false,
        "admin_tokens": [{"name": "ci", "sha256": understudy::app::attempt::token_hash(token), "scopes": ["read"]}]
    }));
    let s = Server::start(&p).await;
    let r = s.call("GET", health, None, &[]).await;
    assert_eq!(r.status, 401, "{}", r.text);
    let bearer = format!("Bearer {token}");
    let r = s
        .call("GET", health, None, &[("authorization", &bearer)])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    s.stop().await.unwrap();
}

/// The scope each route must need: a route added to the router without an entry here fails.
fn expected_need(method: &str, path: &str) -> Need {
    let p = path.trim_start_matches("/_understudy");
    match (method, p) {
        ("GET", "/api/health") => Need::AnyCaller,
        ("GET", "/api/metrics" | "/api/tools" | "/api/tools/{integration}/testing") => {
            Need::Scope(Scope::Read)
        }
        ("POST", "/api/tools/testing") => Need::Scope(Scope::Read),
        ("GET", "/api/revisions/{integration}/{operation_id}") => Need::Scope(Scope::Read),
        (
            "GET",
            "/api/attempts/{id}" | "/api/attempts/{id}/evidence" | "/api/attempts/{id}/state",
        ) => Need::Scope(Scope::Read),
        ("GET", "/ui" | "/ui/attempts/{id}" | "/ui/attempts/{id}/junit.xml") => {
            Need::Scope(Scope::Read)
        }
        (
            "POST",
            "/api/attempts"
            | "/api/attempts/{id}/events"
            | "/api/attempts/{id}/verify"
            | "/api/otlp/v1/traces",
        ) => Need::Scope(Scope::Run),
        ("DELETE", "/api/attempts/{id}") => Need::Scope(Scope::Run),
        (
            "POST",
            "/api/tools/{integration}/testing" | "/api/tools/execute" | "/api/drafts/flush",
        ) => Need::Scope(Scope::Manage),
        other => {
            panic!("route {other:?} has no scope in this test: add it (and to the docs' table)")
        }
    }
}

#[tokio::test]
async fn every_route_of_the_router_with_each_scope() {
    let up = counting_upstream(json!({})).await;
    let tokens = [
        ("reader", "tok-read-0123456789", vec!["read"]),
        ("runner", "tok-run-0123456789", vec!["run"]),
        ("manager", "tok-manage-0123456789", vec!["manage"]),
        ("ci", "tok-ci-0123456789", vec!["read", "run"]),
    ];
    let admin_tokens: Vec<Value> = tokens
        .iter()
        .map(|(n, t, s)| json!({"name": n, "sha256": understudy::app::attempt::token_hash(t), "scopes": s}))
        .collect();
    let p = project(&up.url, json!({"admin_tokens": admin_tokens}));
    let s = Server::start(&p).await;
    let ci = format!("Bearer {}", tokens[3].1);
    let attempt = s
        .call(
            "POST",
            "/_understudy/api/attempts",
            Some(&json!({})),
            &[("authorization", &ci)],
        )
        .await;
    assert_eq!(attempt.status, 201, "{}", attempt.text);
    let id = attempt.json()["attempt_id"].as_str().unwrap().to_string();
    assert!(ROUTES.len() >= 19, "the route table: {}", ROUTES.len());
    let mut walked = 0;
    for route in ROUTES {
        assert_eq!(
            route.need,
            expected_need(route.method, route.path),
            "{} {}",
            route.method,
            route.path
        );
        let path = route
            .path
            .replace("{integration}", "crm")
            .replace("{operation_id}", "list")
            .replace("{id}", &id);
        let body = (route.method == "POST").then(|| json!({}));
        // No token at all: 401 for every route.
        let r = s
            .call(
                route.method,
                &path,
                body.as_ref(),
                &[("authorization", "Bearer nope-not-a-token")],
            )
            .await;
        assert_eq!(
            r.status, 401,
            "{} {path} without a valid token: {}",
            route.method, r.text
        );
        for (name, token, scopes) in &tokens[..3] {
            let bearer = format!("Bearer {token}");
            let r = s
                .call(
                    route.method,
                    &path,
                    body.as_ref(),
                    &[("authorization", &bearer)],
                )
                .await;
            let allowed = match route.need {
                Need::AnyCaller => true,
                Need::Scope(sc) => scopes.contains(&sc.as_str()),
            };
            if allowed {
                assert!(
                    r.status != 403 && r.status != 401,
                    "{} {path} with `{name}` ({scopes:?}) should be allowed: {} {}",
                    route.method,
                    r.status,
                    r.text
                );
            } else {
                assert_eq!(
                    r.status, 403,
                    "{} {path} with `{name}`: {}",
                    route.method, r.text
                );
                let v = r.json();
                assert_eq!(v["error"]["code"], "forbidden_scope", "{}", r.text);
                let Need::Scope(need) = route.need else {
                    unreachable!()
                };
                assert_eq!(v["error"]["details"][0]["scope_needed"], need.as_str());
                assert!(
                    v["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains(&format!("`{}`", need.as_str())),
                    "{}",
                    r.text
                );
            }
        }
        walked += 1;
    }
    assert_eq!(walked, ROUTES.len());
    // An unknown route is not a way around the scopes.
    let r = s
        .call(
            "GET",
            "/_understudy/api/nothing",
            None,
            &[("authorization", &format!("Bearer {}", tokens[1].1))],
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.text);
    assert_eq!(up.count.load(Ordering::SeqCst), 0);
    s.stop().await.unwrap();
}

#[tokio::test]
async fn scoped_tokens_drive_evidence_and_report_from_the_command_line() {
    let up = counting_upstream(json!({})).await;
    let token = "tok-ci-cli-0123456789";
    let reader = "tok-ro-cli-0123456789";
    let p = project(
        &up.url,
        json!({"admin_tokens": [
            {"name": "ci", "sha256": understudy::app::attempt::token_hash(token), "scopes": ["read", "run"]},
            {"name": "ro", "sha256": understudy::app::attempt::token_hash(reader), "scopes": ["read"]}
        ]}),
    );
    let s = Server::start(&p).await;
    let bearer = format!("Bearer {token}");
    let r = s
        .call(
            "POST",
            "/_understudy/api/attempts",
            Some(&json!({"expect_calls": false})),
            &[("authorization", &bearer)],
        )
        .await;
    let r = if r.status == 400 {
        s.call(
            "POST",
            "/_understudy/api/attempts",
            Some(&json!({})),
            &[("authorization", &bearer)],
        )
        .await
    } else {
        r
    };
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.json()["attempt_id"].as_str().unwrap().to_string();
    let url = format!("http://{}", s.addr);
    let run = |args: Vec<String>| {
        let url = url.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                std::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
                    .args(&args)
                    .args(["--url", &url])
                    .env_remove("UNDERSTUDY_ADMIN_TOKEN")
                    .output()
                    .unwrap()
            })
            .await
            .unwrap()
        }
    };
    let reports = tempfile::tempdir().unwrap();
    let report_dir = reports.path().display().to_string();
    for (cmd, tok) in [
        ("evidence", token),
        ("evidence", reader),
        ("report", reader),
    ] {
        let mut args = vec![
            cmd.to_string(),
            id.clone(),
            "--admin-token".into(),
            tok.into(),
        ];
        if cmd == "report" {
            args.extend(["--report-dir".to_string(), report_dir.clone()]);
        }
        let out = run(args).await;
        let code = out.status.code();
        assert!(
            code == Some(0) || code == Some(1),
            "understudy {cmd} --url with a scoped token: {code:?}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        std::fs::read_dir(reports.path()).unwrap().count() > 0,
        "no report written"
    );
    s.stop().await.unwrap();
}

#[test]
fn a_wiremock_body_file_outside_the_input_is_refused_naming_file_and_path() {
    let dir = tempfile::tempdir().unwrap();
    let mappings = dir.path().join("wm/mappings");
    std::fs::create_dir_all(&mappings).unwrap();
    std::fs::create_dir_all(dir.path().join("wm/__files")).unwrap();
    std::fs::write(dir.path().join("secret.json"), r#"{"stolen": true}"#).unwrap();
    let file = mappings.join("steal.json");
    for name in [
        "../../etc/passwd",
        "/etc/passwd",
        "../../secret.json",
        "a/../../../secret.json",
    ] {
        std::fs::write(
            &file,
            json!({"mappings": [
                {"request": {"method": "GET", "url": "/ok"}, "response": {"status": 200, "jsonBody": {}}},
                {"request": {"method": "GET", "url": "/x"}, "response": {"status": 200, "bodyFileName": name}}
            ]})
            .to_string(),
        )
        .unwrap();
        let e = understudy::author::import::wiremock::import(
            &dir.path().join("wm"),
            understudy::contract::ProfileKind::Rest,
        )
        .err()
        .unwrap_or_else(|| panic!("{name} was read"));
        assert!(e.contains(&file.display().to_string()), "{e}");
        assert!(e.contains("mappings/1/response/bodyFileName"), "{e}");
        assert!(e.contains(name), "{e}");
    }
    // Inside the directory it is read.
    std::fs::write(dir.path().join("wm/__files/b.json"), r#"{"n": 1}"#).unwrap();
    std::fs::write(
        &file,
        json!({"request": {"method": "GET", "url": "/x"}, "response": {"status": 200, "bodyFileName": "b.json"}}).to_string(),
    )
    .unwrap();
    let ok = understudy::author::import::wiremock::import(
        &dir.path().join("wm"),
        understudy::contract::ProfileKind::Rest,
    );
    assert!(ok.is_ok(), "{:?}", ok.err());
}

/// `understudy import` writes only inside the project: an `--out` outside it, one that climbs
/// out with `..`, and one through a symbolic link that leads out are refused (exit 2) naming
/// the path, and nothing is written there; a WireMock directory holding a mapping that links
/// outside it is refused naming the link. The same import into the project's own directory
/// works (the refusals are the paths, not the import).
#[cfg(unix)]
#[test]
fn import_paths_are_confined_to_the_project_and_the_input() {
    let p = Project::new(&[("crm", "rest")]);
    p.write_config(json!({ "integrations": { "crm": {
        "profile": "rest", "upstream": "http://127.0.0.1:9", "operations": "mocks/crm" } } }));
    let src = tempfile::tempdir().unwrap();
    let maps = src.path().join("mappings");
    std::fs::create_dir_all(&maps).unwrap();
    std::fs::write(
        maps.join("get.json"),
        json!({"request": {"method": "GET", "url": "/items/1"},
               "response": {"status": 200, "jsonBody": {"id": "1"}}})
        .to_string(),
    )
    .unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), p.path().join("linked")).unwrap();
    let run = |out: &Path, input: &Path| {
        let o = Command::new(env!("CARGO_BIN_EXE_understudy"))
            .args([
                "import",
                "--from",
                "wiremock",
                "--integration",
                "crm",
                "--config",
            ])
            .arg(p.config_path())
            .arg("--out")
            .arg(out)
            .arg(input)
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let climbing = p.path().join("mocks/../../escaped");
    for (out, says) in [
        (
            outside.path().to_path_buf(),
            "outside the project directory",
        ),
        (climbing.clone(), "outside the project directory"),
        (p.path().join("linked/crm"), "is a symbolic link"),
    ] {
        let (code, err) = run(&out, src.path());
        assert_eq!(code, 2, "{}: {err}", out.display());
        assert!(
            err.contains("--out") && err.contains(says),
            "{}: {err}",
            out.display()
        );
        assert!(
            err.contains(&out.display().to_string()),
            "names the path: {err}"
        );
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert!(!p.path().parent().unwrap().join("escaped").exists());
    // Into the project: written.
    let (code, err) = run(&p.ops_dir("crm"), src.path());
    assert!(code == 0 || code == 1, "{err}");
    assert!(
        std::fs::read_dir(p.ops_dir("crm")).unwrap().count() > 0,
        "{err}"
    );
    // A mapping that links out of the input's directory.
    let secret = outside.path().join("stolen.json");
    std::fs::write(&secret, "{}").unwrap();
    std::os::unix::fs::symlink(&secret, maps.join("z.json")).unwrap();
    let (code, err) = run(&p.ops_dir("crm"), src.path());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("z.json: is a symbolic link to") && err.contains("outside"),
        "{err}"
    );
}

#[test]
fn an_imported_authorization_matcher_becomes_a_presence_match() {
    let dir = tempfile::tempdir().unwrap();
    let mappings = dir.path().join("mappings");
    std::fs::create_dir_all(&mappings).unwrap();
    let secret = "Bearer sk-imported-secret-987654";
    std::fs::write(
        mappings.join("a.json"),
        json!({"request": {"method": "GET", "url": "/x",
                           "headers": {"Authorization": {"equalTo": secret}, "Accept": {"equalTo": "application/json"}}},
               "response": {"status": 200, "jsonBody": {"a": 1}}})
        .to_string(),
    )
    .unwrap();
    let imported = understudy::author::import::wiremock::import(
        dir.path(),
        understudy::contract::ProfileKind::Rest,
    )
    .unwrap();
    let text = format!("{:?}", imported.drafts);
    assert!(!text.contains("sk-imported-secret-987654"), "{text}");
    let d = &imported.drafts[0];
    let m = d.op.match_spec.as_ref().unwrap();
    assert_eq!(
        m.headers.get("Authorization").map(String::as_str),
        Some("*"),
        "{m:?}"
    );
    assert_eq!(
        m.headers.get("Accept").map(String::as_str),
        Some("application/json")
    );
}

/// The Chromium binary, when installed (the report tests require it under CI).
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|c| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// A page server on another loopback origin: every GET answers `html`.
async fn page_server(html: String) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = l.accept().await else {
                return;
            };
            let html = html.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while support::read_raw_request(&mut tcp, &mut buf)
                    .await
                    .is_some()
                {
                    let r = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\r\n{html}",
                        html.len()
                    );
                    if tcp.write_all(r.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://127.0.0.1:{port}/")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_page_in_chromium_cannot_drive_understudy() {
    let Some(chrome) = chromium() else {
        assert!(!crate::support::in_ci(), "CI must install chromium");
        eprintln!("note: chromium not installed; skipping the browser test");
        return;
    };
    let up = counting_upstream(json!({"id": "a1"})).await;
    let p = project(&up.url, json!({}));
    // Upstream writes allowed: only the gate stands between the page and the upstream.
    let mut opts = p.options();
    opts.forward.allow_upstream_writes = true;
    let s = Server::start_with(opts).await;
    let port = s.addr.port();
    let body = write_body();
    let target = format!("http://127.0.0.1:{port}{EXECUTE}");
    let rebound = format!("http://rebind.test:{port}{EXECUTE}");
    // The form's one field spells the JSON body in text/plain (`name=value`).
    let field_name = r#"{"integration":"crm","operation_id":"book","target":"upstream","allow_write":true,"input":{},"pad":""#;
    let html = format!(
        r#"<!DOCTYPE html><html><body><div id="out">started</div>
<form id="f" method="POST" action="{target}" enctype="text/plain" target="sink"><input type="hidden" name='{field_name}' value='"}}'></form>
<iframe name="sink"></iframe>
<script>
const out = (t) => {{ document.getElementById("out").textContent += " " + t; }};
fetch("{target}", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body: {body_js}}})
  .then(() => out("no-cors-sent"), (e) => out("no-cors-error"));
fetch("{rebound}", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body: {body_js}}})
  .then(() => out("rebind-sent"), (e) => out("rebind-error"));
document.getElementById("f").submit();
out("form-submitted");
</script></body></html>"#,
        body_js = serde_json::to_string(&body).unwrap(),
    );
    let page = page_server(html).await;
    let profile = tempfile::tempdir().unwrap();
    let chrome = chrome.to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(chrome)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--host-resolver-rules=MAP rebind.test 127.0.0.1",
                "--virtual-time-budget=5000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("--dump-dom")
            .arg(&page)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("form-submitted"),
        "the page ran: {dom}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Give the browser's requests time to land (they were sent before the DOM was dumped).
    let mut m = String::new();
    for _ in 0..50 {
        m = refusals(&s).await;
        if m.contains("forbidden_host") && m.contains("forbidden_origin\"} 2") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Each attempt reached understudy and was refused: the no-cors POST and the form POST by
    // their foreign Origin, the rebound name by its Host.
    assert!(
        m.contains("understudy_admin_refusals_total{code=\"forbidden_host\"} 1"),
        "{m}\n{dom}"
    );
    assert!(
        m.contains("understudy_admin_refusals_total{code=\"forbidden_origin\"} 2"),
        "{m}\n{dom}"
    );
    assert_eq!(
        up.count.load(Ordering::SeqCst),
        0,
        "the upstream received {:?}",
        up.seen
    );
    s.stop().await.unwrap();
}

#[tokio::test]
async fn a_body_nested_too_deep_is_the_input_error_too_deep() {
    let up = counting_upstream(json!({})).await;
    let p = project(&up.url, json!({}));
    let s = Server::start(&p).await;
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let body = format!("{{\"a\": {deep}}}");
    let r = s
        .call_raw(
            "POST",
            "/crm/book",
            &body,
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let ev = s.evidence(&s.default_attempt()).await;
    let last = ev["tool_events"]
        .as_array()
        .unwrap()
        .last()
        .cloned()
        .unwrap();
    assert_eq!(last["error"]["code"], "too_deep", "{last}");
    // Not JSON is another input error, told apart by its kind, not by its message.
    let r = s
        .call_raw(
            "POST",
            "/crm/book",
            "{nope",
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let ev = s.evidence(&s.default_attempt()).await;
    let last = ev["tool_events"]
        .as_array()
        .unwrap()
        .last()
        .cloned()
        .unwrap();
    assert_eq!(last["error"]["code"], "input_error", "{last}");
    // The admin API too, on every route that reads a body.
    let json = [("content-type", "application/json")];
    let a = s.default_attempt();
    for path in [
        EXECUTE.to_string(),
        "/_understudy/api/attempts".to_string(),
        format!("/_understudy/api/attempts/{a}/events"),
        format!("/_understudy/api/attempts/{a}/verify"),
        "/_understudy/api/tools/testing".to_string(),
        "/_understudy/api/tools/crm/testing".to_string(),
    ] {
        let r = s.call_raw("POST", &path, &body, &json).await;
        assert_eq!(
            (r.status, code(&r).as_str()),
            (400, "too_deep"),
            "{path}: {}",
            r.text
        );
        let r = s.call_raw("POST", &path, "{nope", &json).await;
        assert_eq!(
            (r.status, code(&r).as_str()),
            (400, "bad_request"),
            "{path}: {}",
            r.text
        );
    }
    s.stop().await.unwrap();
}

/// `understudy test` against a project that trusts no loopback peer (`trust_loopback: false`)
/// and has scoped tokens: with a token of the `run` scope only, the attempt is created and the
/// command posts an agent event with it (exit 0); with a `read` token the run fails clearly
/// (the 403 naming the scope `run`), and without a token it is refused (401).
#[test]
fn understudy_test_works_with_a_run_scoped_token_and_fails_clearly_without_it() {
    let (runner, reader) = ("run-only-token-6f1e2d", "read-only-token-0a9b8c");
    let p = project(
        "http://127.0.0.1:9",
        json!({"trust_loopback": false, "admin_tokens": [
            {"name": "ci", "sha256": understudy::app::attempt::token_hash(runner), "scopes": ["run"]},
            {"name": "viewer", "sha256": understudy::app::attempt::token_hash(reader), "scopes": ["read"]}]}),
    );
    let reports = p.path().join("reports");
    let agent = r#"curl -sS -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $UNDERSTUDY_ADMIN_TOKEN" -H 'Content-Type: application/json' -d '{"name":"said","kind":"agent_message","text":"hi"}' "$UNDERSTUDY_URL/_understudy/api/attempts/$UNDERSTUDY_ATTEMPT_ID/events" | grep -qx 201"#;
    let run = |token: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_understudy"));
        c.args(["test", "--allow-no-calls", "--config"])
            .arg(p.config_path())
            .arg("--report-dir")
            .arg(&reports)
            .args(["--", "sh", "-c", agent])
            .env_remove("UNDERSTUDY_ADMIN_TOKEN");
        if let Some(t) = token {
            c.env("UNDERSTUDY_ADMIN_TOKEN", t);
        }
        let o = c.output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = run(Some(runner));
    assert_eq!(code, 0, "{err}");
    let ev: Value =
        serde_json::from_slice(&std::fs::read(reports.join("evidence.json")).unwrap()).unwrap();
    assert_eq!(
        ev["events"].as_array().map(Vec::len),
        Some(1),
        "the command's event was accepted with the run token: {ev}"
    );
    let (code, err) = run(Some(reader));
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("forbidden_scope") || err.contains("`run`") || err.contains("run"),
        "{err}"
    );
    assert!(err.contains("403"), "{err}");
    let (code, err) = run(None);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("401"), "{err}");
}
