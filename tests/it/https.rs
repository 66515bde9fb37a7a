//! HTTPS wired into the server (docs/src/reference/https.md): `serve --tls` and `serve --forward-proxy` with
//! real certificates from a CA made in the test, real TLS clients (reqwest over rustls
//! trusting only that CA; curl when installed), over loopback only.
//!
//! The project: `crm` (salesforce, upstream `https://acme.my.salesforce.com`) with a
//! `get_contact` mock, and `api` (rest, upstream `http://api.internal.test:8080`) with the
//! counter. No name here resolves: a call that reaches the mock proves nothing left the
//! machine. These tests exercise replay; dry-run/record forwarding through the proxy is
//! the upstream wiring's (tests/it/record.rs and later).
//!
//! Key file permissions (0600) are covered by `tls::ca_init_writes_the_pair_with_a_private_key_file`
//! and again by the `ca init` of [`the_done_statement_with_curl_and_the_real_binary`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use reqwest::{StatusCode, Version};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use understudy::app::{App, AppOptions};
use understudy::server::Transport;
use understudy::tls::{self, Ca};

use crate::support::{self, counter_op, Project};

const SF_HOST: &str = "acme.my.salesforce.com";
const CONTACT_PATH: &str = "/services/data/v60.0/sobjects/Contact/003000000000001AAA";

// ---- fixtures --------------------------------------------------------------------------

fn get_contact_op() -> Value {
    let found = json!({ "status": 200, "data": {
        "attributes": { "type": "Contact" }, "Id": "003000000000001AAA", "FirstName": "Ada" } });
    json!({
        "operation_id": "get_contact",
        "description": "Read one contact",
        "match": { "method": "GET", "path": "/services/data/*/sobjects/Contact/{id}" },
        "input_schema": { "type": "object", "required": ["id"],
                          "properties": { "id": { "type": "string" } } },
        "output_schema": { "type": "object", "required": ["status", "data"] },
        "mock": {
            "schema_version": 1,
            "default_variant": "found",
            "variants": { "found": { "result": found.clone() } },
            "examples": [ { "variant": "found", "input": { "id": "003000000000001AAA" },
                            "expected": found } ]
        }
    })
}

/// The project and a CA in `<project>/certs` (what `understudy ca init` writes).
fn project() -> (Project, PathBuf) {
    let p = Project::new(&[("crm", "salesforce"), ("api", "rest")]);
    p.write_config(json!({ "integrations": {
        "crm": { "profile": "salesforce", "upstream": format!("https://{SF_HOST}"),
                 "operations": "mocks/crm" },
        "api": { "profile": "rest", "upstream": "http://api.internal.test:8080",
                 "operations": "mocks/api" },
    } }));
    p.op("crm", get_contact_op());
    p.op("api", counter_op());
    let certs = p.path().join("certs");
    Ca::init(&certs, false).unwrap();
    (p, certs)
}

/// A server of the project on 127.0.0.1:0 with `--tls` and/or `--forward-proxy`, built the
/// way `understudy serve` builds it ([`Transport::for_serve`] with the project's CA).
struct Running {
    addr: SocketAddr,
    app: Arc<App>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Running {
    async fn start(p: &Project, certs: &Path, tls_on: bool, proxy: bool) -> Running {
        Running::start_with(p.options(), certs, tls_on, proxy).await
    }

    async fn start_with(opts: AppOptions, certs: &Path, tls_on: bool, proxy: bool) -> Running {
        let app = Arc::new(App::build(opts).unwrap_or_else(|e| panic!("server starts: {e}")));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let transport = Transport::for_serve(certs, tls_on, proxy, "127.0.0.1:0", addr).unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(understudy::server::serve_with(
            listener,
            app.clone(),
            transport,
            async move {
                let _ = rx.await;
            },
        ));
        Running {
            addr,
            app,
            stop: Some(tx),
            task,
        }
    }

    /// `http://<token>@127.0.0.1:PORT` (no token: `http://127.0.0.1:PORT`).
    fn proxy_url(&self, scheme: &str, token: Option<&str>) -> String {
        match token {
            Some(t) => format!("{scheme}://{t}@{}", self.addr),
            None => format!("{scheme}://{}", self.addr),
        }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap().unwrap();
    }
}

/// A reqwest client trusting `certs/understudy-ca.pem` and nothing else, ignoring the
/// environment's proxies.
fn trusting(certs: &Path) -> reqwest::ClientBuilder {
    tls::init_crypto();
    let pem = std::fs::read(certs.join(tls::CA_CERT_FILE)).unwrap();
    let root = reqwest::Certificate::from_pem(&pem).unwrap();
    reqwest::Client::builder().no_proxy().tls_certs_only([root])
}

/// A client that sends everything through the forward proxy.
fn via_proxy(certs: &Path, proxy: &str) -> reqwest::ClientBuilder {
    trusting(certs).proxy(reqwest::Proxy::all(proxy).unwrap())
}

fn plain_client() -> reqwest::Client {
    tls::init_crypto();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn json_of(r: reqwest::Response) -> (StatusCode, Version, Value) {
    let status = r.status();
    let version = r.version();
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, version, v)
}

/// `POST /_understudy/api/attempts` on `base` (the listener's own origin): (id, token).
async fn new_attempt(c: &reqwest::Client, base: &str) -> (String, String) {
    let r = c
        .post(format!("{base}/_understudy/api/attempts"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let (status, _, v) = json_of(r).await;
    assert_eq!(status, 201, "{v}");
    (
        v["attempt_id"].as_str().unwrap().to_string(),
        v["token"].as_str().unwrap().to_string(),
    )
}

async fn evidence(c: &reqwest::Client, base: &str, id: &str) -> Value {
    let r = c
        .get(format!("{base}/_understudy/api/attempts/{id}/evidence"))
        .send()
        .await
        .unwrap();
    let (status, _, v) = json_of(r).await;
    assert_eq!(status, 200, "{v}");
    v
}

fn operations(ev: &Value) -> Vec<String> {
    ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}/{} {}",
                e["integration"].as_str().unwrap_or(""),
                e["operation_id"].as_str().unwrap_or("-"),
                e["result_status"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// Send a raw HTTP/1.1 request head on a new connection; returns the response head and body
/// (read to `Content-Length`) and the stream.
async fn raw(addr: SocketAddr, head: &str) -> (u16, String, String, TcpStream) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let (status, head, body) = exchange(&mut s, head).await;
    (status, head, body, s)
}

/// Send raw request bytes (head and body) on an open connection; returns the response's
/// status, head and body (read to `Content-Length`).
pub(crate) async fn exchange(s: &mut TcpStream, request: &str) -> (u16, String, String) {
    s.write_all(request.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let end = loop {
        let mut chunk = [0u8; 1024];
        let n = s.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "closed before a response head: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status: u16 = head[9..12].parse().unwrap();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[end..].to_vec();
    while body.len() < len {
        let mut chunk = [0u8; 1024];
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed inside the body");
        body.extend_from_slice(&chunk[..n]);
    }
    (status, head, String::from_utf8_lossy(&body).into_owned())
}

/// `Proxy-Authorization: Basic base64("<token>:")`, as clients send for `http://<token>@…`.
fn basic(token: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{token}:"))
    )
}

/// curl with no proxy or CA settings inherited from the environment.
fn curl() -> tokio::process::Command {
    let mut c = tokio::process::Command::new("curl");
    for v in [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "CURL_CA_BUNDLE",
        "CURL_HOME",
    ] {
        c.env_remove(v);
    }
    c.arg("-q");
    c
}

// ---- serve --tls -----------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_listener_serves_calls_and_the_admin_api_over_http1_and_http2() {
    let (p, certs) = project();
    let s = Running::start(&p, &certs, true, false).await;
    let base = format!("https://127.0.0.1:{}", s.addr.port());
    let h2 = trusting(&certs).build().unwrap();
    let h1 = trusting(&certs).http1_only().build().unwrap();
    let (id, token) = new_attempt(&h2, &base).await;
    assert_eq!(s.app.scheme(), "https");

    for (c, version) in [(&h1, Version::HTTP_11), (&h2, Version::HTTP_2)] {
        let r = c
            .get(format!("{base}/~{token}/crm{CONTACT_PATH}"))
            .send()
            .await
            .unwrap();
        let (status, v, body) = json_of(r).await;
        assert_eq!((status, v), (StatusCode::OK, version), "{body}");
        assert_eq!(body["FirstName"], "Ada");
    }
    // The leaf also names `localhost`.
    let r = trusting(&certs)
        .resolve("localhost", s.addr)
        .build()
        .unwrap()
        .get(format!(
            "https://localhost:{}/crm{CONTACT_PATH}",
            s.addr.port()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    let ev = evidence(&h1, &base, &id).await;
    assert_eq!(
        operations(&ev),
        ["crm/get_contact ok", "crm/get_contact ok"]
    );
    // Plain HTTP on the TLS port is not served.
    let err = plain_client()
        .get(format!(
            "http://127.0.0.1:{}/_understudy/api/health",
            s.addr.port()
        ))
        .send()
        .await;
    assert!(
        err.is_err() || !err.unwrap().status().is_success(),
        "clear text is refused"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trusting_another_ca_fails_the_handshake() {
    let (p, certs) = project();
    let s = Running::start(&p, &certs, true, false).await;
    let other = tempfile::tempdir().unwrap();
    Ca::init(other.path(), false).unwrap();
    let url = format!("https://127.0.0.1:{}/crm{CONTACT_PATH}", s.addr.port());
    let err = trusting(other.path())
        .build()
        .unwrap()
        .get(&url)
        .send()
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    assert!(format!("{err:?}").contains("UnknownIssuer"), "{err:?}");
    // Nothing was called.
    let default_id = s.app.attempts.default_attempt().unwrap().id.clone();
    assert!(s.app.store.evidence(&default_id).unwrap().is_empty());
    // The right CA works on the same listener.
    let ok = trusting(&certs)
        .build()
        .unwrap()
        .get(&url)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_handshake_that_never_comes_is_cut_off() {
    let (p, certs) = project();
    let mut opts = p.options();
    opts.limits.header_read_timeout = std::time::Duration::from_millis(200);
    let s = Running::start_with(opts, &certs, true, false).await;
    // Connects, sends nothing: closed by the server (read returns EOF, not a hang).
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    let mut buf = Vec::new();
    let n = silent.read_to_end(&mut buf).await.unwrap_or(0);
    assert_eq!(n, 0);
    s.stop().await;
}

// ---- serve --forward-proxy -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_is_intercepted_and_answered_by_the_mock_in_the_tokens_attempt() {
    let (p, certs) = project();
    let s = Running::start(&p, &certs, false, true).await;
    let base = format!("http://{}", s.addr);
    let admin = plain_client();
    let (id, token) = new_attempt(&admin, &base).await;
    let url = format!("https://{SF_HOST}{CONTACT_PATH}");

    // HTTP/2 inside the tunnel (ALPN), then HTTP/1.1.
    // The client trusts only the CA and verifies the name: the leaf was made for SF_HOST.
    let h2 = via_proxy(&certs, &s.proxy_url("http", Some(&token)))
        .build()
        .unwrap();
    let r = h2.get(&url).send().await.unwrap();
    let (status, version, body) = json_of(r).await;
    assert_eq!(
        (status, version),
        (StatusCode::OK, Version::HTTP_2),
        "{body}"
    );
    assert_eq!(body["FirstName"], "Ada");

    let h1 = via_proxy(&certs, &s.proxy_url("http", Some(&token)))
        .http1_only()
        .build()
        .unwrap();
    let r = h1.get(&url).send().await.unwrap();
    let (status, version, _) = json_of(r).await;
    assert_eq!((status, version), (StatusCode::OK, Version::HTTP_11));

    // The calls are the token's attempt's, not the default attempt's.
    let ev = evidence(&admin, &base, &id).await;
    assert_eq!(
        operations(&ev),
        ["crm/get_contact ok", "crm/get_contact ok"]
    );
    assert_eq!(
        ev["tool_events"][0]["arguments"]["id"],
        "003000000000001AAA"
    );
    assert_eq!(ev["verdict"], "pass");
    let default_id = s.app.attempts.default_attempt().unwrap().id.clone();
    assert!(s.app.store.evidence(&default_id).unwrap().is_empty());

    // Without credentials: the default attempt.
    let anon = via_proxy(&certs, &s.proxy_url("http", None))
        .build()
        .unwrap();
    assert_eq!(anon.get(&url).send().await.unwrap().status(), 200);
    assert_eq!(s.app.store.evidence(&default_id).unwrap().len(), 1);

    // A path of no operation inside the tunnel is an unmatched request of `crm`, recorded.
    let r = h2
        .get(format!(
            "https://{SF_HOST}/services/data/v60.0/nothing/here"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["understudy-error"], "unmatched_request");
    let ev = evidence(&admin, &base, &id).await;
    assert_eq!(operations(&ev)[2], "crm/- harness_error");

    // The admin API is not reachable through the proxy: inside a tunnel the path is the
    // upstream's, so this is an unmatched call of `crm`.
    let r = h2
        .get(format!("https://{SF_HOST}/_understudy/api/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["understudy-error"], "unmatched_request");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_of_no_integration_is_refused_and_never_tunnelled() {
    let (p, certs) = project();
    let s = Running::start(&p, &certs, false, true).await;
    let c = via_proxy(&certs, &s.proxy_url("http", None))
        .build()
        .unwrap();
    // `.invalid` never resolves: a proxy that tried to reach it would answer a gateway
    // error after a DNS failure; this one refuses before anything.
    let err = c
        .get("https://not-configured.invalid/anything")
        .send()
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");

    let (status, head, body, mut stream) = raw(
        s.addr,
        "CONNECT not-configured.invalid:443 HTTP/1.1\r\nHost: not-configured.invalid:443\r\n\r\n",
    )
    .await;
    assert_eq!(status, 403, "{head}{body}");
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["understudy_error"]["code"], "unknown_upstream_host");
    let msg = v["understudy_error"]["message"].as_str().unwrap();
    assert!(msg.contains("not-configured.invalid:443"), "{msg}");
    assert!(msg.contains("acme.my.salesforce.com:443 (crm)"), "{msg}");
    assert!(msg.contains("never tunnels blind"), "{msg}");
    // The connection is closed: nothing is tunnelled.
    let mut rest = Vec::new();
    assert_eq!(stream.read_to_end(&mut rest).await.unwrap_or(0), 0);

    // A configured host on another port is another host.
    let (status, _, _, _) = raw(
        s.addr,
        "CONNECT acme.my.salesforce.com:8443 HTTP/1.1\r\nHost: acme.my.salesforce.com:8443\r\n\r\n",
    )
    .await;
    assert_eq!(status, 403);

    // Plain HTTP to an unknown host.
    let r = c
        .get("http://not-configured.invalid/x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(r.headers()["understudy-error"], "unknown_upstream_host");

    // Nothing was tunnelled, but every refusal is in the evidence of the default attempt
    // (no credentials named another): a harness error `unknown_host` naming the host, so the
    // attempt cannot pass (issue 22). The reqwest CONNECT, the raw CONNECT, the other port,
    // the plain request.
    let default_id = s.app.attempts.default_attempt().unwrap().id.clone();
    let ev = evidence(&plain_client(), &format!("http://{}", s.addr), &default_id).await;
    assert_eq!(harness(&ev, "code"), ["unknown_host"; 4], "{ev:#}");
    let messages = harness(&ev, "message");
    assert!(
        messages[0].contains("not-configured.invalid:443"),
        "{messages:?}"
    );
    assert!(
        messages[2].contains("acme.my.salesforce.com:8443"),
        "{messages:?}"
    );
    assert!(
        messages[3].contains("not-configured.invalid:80"),
        "{messages:?}"
    );
    assert_eq!(ev["tool_events"][0]["http_status"], 403);
    assert_eq!(ev["verdict"], "fail");
    s.stop().await;
}

/// Issue 22 (3): an agent that reaches a system the test does not cover gets a 403, and the
/// attempt its proxy credentials (or `Understudy-Attempt` header) name records the harness
/// error `unknown_host`: its verdict is `fail`, as the evidence API and `understudy
/// evidence` say. Another attempt stays clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_host_fails_the_attempt_that_reached_it() {
    let (p, certs) = project();
    let s = Running::start(&p, &certs, false, true).await;
    let base = format!("http://{}", s.addr);
    let admin = plain_client();
    let (id, token) = new_attempt(&admin, &base).await;
    let (clean_id, clean_token) = new_attempt(&admin, &base).await;
    let agent = via_proxy(&certs, &s.proxy_url("http", Some(&token)))
        .build()
        .unwrap();
    // A covered call passes…
    let r = agent
        .get(format!("https://{SF_HOST}{CONTACT_PATH}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let clean = via_proxy(&certs, &s.proxy_url("http", Some(&clean_token)))
        .build()
        .unwrap();
    assert_eq!(
        clean
            .get(format!("https://{SF_HOST}{CONTACT_PATH}"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // …then the agent reaches an uncovered system: CONNECT with the token's credentials.
    assert!(agent
        .get("https://payments.example.invalid/charge")
        .send()
        .await
        .is_err());
    // And an absolute-form request naming the attempt with the header instead.
    let r = plain_client_via(&s.proxy_url("http", None))
        .get("http://ledger.example.invalid:8081/entries")
        .header("Understudy-Attempt", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    let ev = evidence(&admin, &base, &id).await;
    assert_eq!(ev["verdict"], "fail", "{ev:#}");
    assert_eq!(harness(&ev, "code"), ["unknown_host"; 2], "{ev:#}");
    let messages = harness(&ev, "message");
    assert!(messages[0].contains("payments.example.invalid:443"));
    assert!(messages[1].contains("ledger.example.invalid:8081"));
    assert!(
        ev["verdict_reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["code"] == "harness_error"
                && r["message"].as_str().unwrap().contains("unknown_host")),
        "{ev:#}"
    );
    assert_eq!(evidence(&admin, &base, &clean_id).await["verdict"], "pass");
    let default_id = s.app.attempts.default_attempt().unwrap().id.clone();
    assert!(s.app.store.evidence(&default_id).unwrap().is_empty());
    s.stop().await;

    // `understudy evidence` on the data dir agrees (exit 1, the reason on stderr).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["evidence", &id, "--data-dir"])
        .arg(p.data_dir())
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown_host"));
}

/// The member `field` of every `harness_errors` entry of an envelope.
fn harness(ev: &Value, field: &str) -> Vec<String> {
    ev["harness_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[field].as_str().unwrap().to_string())
        .collect()
}

/// A plain client that sends everything through `proxy`.
fn plain_client_via(proxy: &str) -> reqwest::Client {
    tls::init_crypto();
    reqwest::Client::builder()
        .proxy(reqwest::Proxy::all(proxy).unwrap())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_credentials_fail_closed() {
    let (p, certs) = project();
    let s = Running::start(&p, &certs, false, true).await;
    let base = format!("http://{}", s.addr);
    let (_, token) = new_attempt(&plain_client(), &base).await;
    let connect = |auth: &str| {
        format!("CONNECT {SF_HOST}:443 HTTP/1.1\r\nHost: {SF_HOST}:443\r\nProxy-Authorization: {auth}\r\n\r\n")
    };
    // A token of no attempt: 407 before any tunnel, never the default attempt.
    let (status, head, body, _) = raw(s.addr, &connect(&basic("no-such-token"))).await;
    assert_eq!(status, 407, "{head}{body}");
    assert!(
        head.to_ascii_lowercase()
            .contains("proxy-authenticate: basic"),
        "{head}"
    );
    assert!(body.contains("unknown_attempt"), "{body}");
    // Unusable credentials.
    let (status, _, body, _) = raw(s.addr, &connect("Bearer abc")).await;
    assert_eq!(status, 407);
    assert!(body.contains("bad_proxy_credentials"), "{body}");
    // A known token opens the tunnel.
    let (status, _, _, _) = raw(s.addr, &connect(&basic(&token))).await;
    assert_eq!(status, 200);

    // reqwest reports the 407 as a connect error.
    let err = via_proxy(&certs, &s.proxy_url("http", Some("no-such-token")))
        .build()
        .unwrap()
        .get(format!("https://{SF_HOST}{CONTACT_PATH}"))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");

    // Inside a tunnel, an Understudy-Attempt header naming another attempt is refused.
    let (_, other) = new_attempt(&plain_client(), &base).await;
    let r = via_proxy(&certs, &s.proxy_url("http", Some(&token)))
        .build()
        .unwrap()
        .get(format!("https://{SF_HOST}{CONTACT_PATH}"))
        .header("Understudy-Attempt", other)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // Plain proxy requests: an unknown token is the docs/src/concepts/attempts.md 401.
    let r = via_proxy(&certs, &s.proxy_url("http", Some("no-such-token")))
        .build()
        .unwrap()
        .post("http://api.internal.test:8080/counter")
        .json(&json!({ "n": 1 }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let default_id = s.app.attempts.default_attempt().unwrap().id.clone();
    assert!(s.app.store.evidence(&default_id).unwrap().is_empty());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_proxy_requests_are_routed_by_host() {
    let (p, certs) = project();
    let s = Running::start(&p, &certs, false, true).await;
    let base = format!("http://{}", s.addr);
    let admin = plain_client();
    let (id, token) = new_attempt(&admin, &base).await;
    let c = via_proxy(&certs, &s.proxy_url("http", Some(&token)))
        .build()
        .unwrap();
    for n in [5, 6] {
        let r = c
            .post("http://api.internal.test:8080/counter")
            .json(&json!({ "n": n }))
            .send()
            .await
            .unwrap();
        let (status, _, body) = json_of(r).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["previous"], if n == 5 { -1 } else { 5 });
    }
    let ev = evidence(&admin, &base, &id).await;
    assert_eq!(operations(&ev), ["api/bump ok", "api/bump ok"]);
    // The proxy credentials never reach evidence.
    assert!(!ev.to_string().contains(&token));

    // An absolute-form target naming the listener itself is an ordinary request.
    let (status, _, body, _) = raw(
        s.addr,
        &format!(
            "GET http://127.0.0.1:{}/_understudy/api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            s.addr.port()
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_server_name_other_than_the_connect_host_closes_the_tunnel() {
    let (p, certs) = project();
    let s = Running::start(&p, &certs, false, true).await;
    let ca = Ca::load(&certs).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert_der().clone()).unwrap();
    let config = Arc::new(
        rustls::ClientConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let connector = tokio_rustls::TlsConnector::from(config);
    let tunnel = |sni: &'static str| {
        let connector = connector.clone();
        let addr = s.addr;
        async move {
            let (status, _, _, stream) = raw(
                addr,
                &format!("CONNECT {SF_HOST}:443 HTTP/1.1\r\nHost: {SF_HOST}:443\r\n\r\n"),
            )
            .await;
            assert_eq!(status, 200);
            let name = rustls::pki_types::ServerName::try_from(sni).unwrap();
            connector.connect(name, stream).await
        }
    };
    let err = tunnel("other.example").await.unwrap_err();
    assert!(!err.to_string().is_empty());
    // The CONNECT host itself is fine.
    let mut ok = tunnel(SF_HOST).await.unwrap();
    // The leaf: signed by the CA, for the CONNECT host.
    let leaf = ok.get_ref().1.peer_certificates().unwrap()[0].clone();
    ca.verify_leaf(&leaf, SF_HOST).unwrap();
    assert!(ca.verify_leaf(&leaf, "other.example").is_err());
    ok.write_all(
        format!("GET {CONTACT_PATH} HTTP/1.1\r\nHost: {SF_HOST}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = String::new();
    let _ = ok.read_to_string(&mut answer).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"FirstName\":\"Ada\""), "{answer}");

    // A tunnel that does not start with a TLS ClientHello is closed, never relayed.
    let (status, _, _, mut clear) = raw(
        s.addr,
        &format!("CONNECT {SF_HOST}:443 HTTP/1.1\r\nHost: {SF_HOST}:443\r\n\r\n"),
    )
    .await;
    assert_eq!(status, 200);
    clear
        .write_all(format!("GET {CONTACT_PATH} HTTP/1.1\r\nHost: {SF_HOST}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    let _ = clear.read_to_end(&mut got).await;
    assert!(
        !String::from_utf8_lossy(&got).contains("Ada"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_without_the_flag_is_not_served() {
    let (p, certs) = project();
    let s = Running::start(&p, &certs, false, false).await;
    let (status, _, body, _) = raw(
        s.addr,
        &format!("CONNECT {SF_HOST}:443 HTTP/1.1\r\nHost: {SF_HOST}:443\r\n\r\n"),
    )
    .await;
    assert_eq!(status, 405, "{body}");
    assert!(body.contains("--forward-proxy"), "{body}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_open_tunnels() {
    let (p, certs) = project();
    let mut opts = p.options();
    // A hang here would be a test timeout, not a pass after the grace period.
    opts.limits.shutdown_grace = std::time::Duration::from_secs(3600);
    let s = Running::start_with(opts, &certs, false, true).await;
    let c = via_proxy(&certs, &s.proxy_url("http", None))
        .http1_only()
        .build()
        .unwrap();
    let r = c
        .get(format!("https://{SF_HOST}{CONTACT_PATH}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    // The client keeps the tunnel open (keep-alive); shutdown closes it and returns.
    s.stop().await;
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_forward_proxy_together_make_an_https_proxy() {
    let (p, certs) = project();
    let s = Running::start(&p, &certs, true, true).await;
    let c = via_proxy(&certs, &s.proxy_url("https", None))
        .build()
        .unwrap();
    let r = c
        .get(format!("https://{SF_HOST}{CONTACT_PATH}"))
        .send()
        .await
        .unwrap();
    let (status, _, body) = json_of(r).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["FirstName"], "Ada");
    s.stop().await;
}

// ---- curl ------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_through_the_forward_proxy_with_a_token_over_http1_and_http2() {
    if !support::tool_available("curl", &["--version"], "curl") {
        return;
    }
    let (p, certs) = project();
    let s = Running::start(&p, &certs, false, true).await;
    let base = format!("http://{}", s.addr);
    let admin = plain_client();
    let (id, token) = new_attempt(&admin, &base).await;
    let cafile = certs.join(tls::CA_CERT_FILE);
    for (flag, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
        let out = curl()
            .args(["-sS", "--cacert"])
            .arg(&cafile)
            .args(["--proxy", &s.proxy_url("http", Some(&token)), flag])
            .args(["-w", "\n%{http_code} %{http_version}"])
            .arg(format!("https://{SF_HOST}{CONTACT_PATH}"))
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "curl {flag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("\"FirstName\":\"Ada\""), "{stdout}");
        assert!(stdout.ends_with(&format!("\n200 {version}")), "{stdout}");
    }
    let ev = evidence(&admin, &base, &id).await;
    assert_eq!(
        operations(&ev),
        ["crm/get_contact ok", "crm/get_contact ok"]
    );
    // An unknown host: curl reports the refused CONNECT.
    let out = curl()
        .args(["-sS", "--cacert"])
        .arg(&cafile)
        .args(["--proxy", &s.proxy_url("http", None)])
        .arg("https://not-configured.invalid/")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("403"), "{stderr}");
    s.stop().await;

    // --tls --forward-proxy: an HTTPS proxy, the CA trusted for the proxy and the host.
    let s = Running::start(&p, &certs, true, true).await;
    let out = curl()
        .args(["-sS", "--cacert"])
        .arg(&cafile)
        .arg("--proxy-cacert")
        .arg(&cafile)
        .args(["--proxy", &s.proxy_url("https", None)])
        .arg(format!("https://{SF_HOST}{CONTACT_PATH}"))
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "curl via an HTTPS proxy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\"FirstName\":\"Ada\""), "{stdout}");
    s.stop().await;
}

/// The "done" statement, as a user types it, against the real binary:
/// `HTTPS_PROXY=http://127.0.0.1:7777 SSL_CERT_FILE=certs/understudy-ca.pem curl https://acme.my.salesforce.com/services/data/v60.0/sobjects/Contact/003…`
/// answers from the mock in replay mode (port 0 instead of 7777).
#[test]
fn the_done_statement_with_curl_and_the_real_binary() {
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    if !support::tool_available("curl", &["--version"], "curl") {
        return;
    }
    let p = Project::new(&[("crm", "salesforce")]);
    p.write_config(json!({ "integrations": { "crm": {
        "profile": "salesforce", "upstream": format!("https://{SF_HOST}"), "operations": "mocks/crm" } } }));
    p.op("crm", get_contact_op());
    let bin = env!("CARGO_BIN_EXE_understudy");
    let out = Command::new(bin)
        .args(["ca", "init"])
        .current_dir(p.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let key = p.path().join("certs").join(tls::CA_KEY_FILE);
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the CA key is private");

    let mut child = Command::new(bin)
        .args(["serve", "--forward-proxy", "--listen", "127.0.0.1:0"])
        .current_dir(p.path())
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.next().expect("readiness line").unwrap();
    let addr = ready
        .strip_prefix("understudy listening on http://")
        .unwrap_or_else(|| panic!("unexpected readiness line {ready:?}"))
        .to_string();
    let out = std::process::Command::new("curl")
        .args(["-q", "-sS"])
        .arg(format!("https://{SF_HOST}{CONTACT_PATH}"))
        .current_dir(p.path())
        .env_remove("CURL_CA_BUNDLE")
        .env_remove("SSL_CERT_DIR")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env("HTTPS_PROXY", format!("http://{addr}"))
        .env("SSL_CERT_FILE", "certs/understudy-ca.pem")
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(v["Id"], "003000000000001AAA");
    assert_eq!(v["FirstName"], "Ada");
}

#[test]
fn serve_refuses_to_start_without_a_ca_and_says_how_to_make_one() {
    let p = Project::new(&[("crm", "salesforce")]);
    for flag in ["--tls", "--forward-proxy"] {
        let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
            .args(["serve", flag, "--listen", "127.0.0.1:0", "--config"])
            .arg(p.config_path())
            .env_remove("UNDERSTUDY_ADMIN_TOKEN")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{flag}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("understudy-ca.pem") && stderr.contains("understudy ca init"),
            "{flag}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "never ready: {out:?}");
    }
}

#[test]
fn serve_tls_prints_an_https_readiness_line() {
    use std::io::BufRead;
    let p = Project::new(&[("crm", "salesforce")]);
    let certs = p.path().join("elsewhere");
    Ca::init(&certs, false).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["serve", "--tls", "--listen", "127.0.0.1:0", "--config"])
        .arg(p.config_path())
        .arg("--ca-dir")
        .arg(&certs)
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.next().expect("readiness line").unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        ready.starts_with("understudy listening on https://127.0.0.1:"),
        "{ready}"
    );
}
