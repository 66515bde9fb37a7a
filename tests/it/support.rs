//! Test support: a project in a temp dir (understudy.json + operation files), a real server
//! on `127.0.0.1:0` with a real sled store in that dir, and a small HTTP client.
//!
//! Servers are started through the library entry [`understudy::proxy::serve`] with a
//! shutdown future, so a test never sleeps waiting for a server: the listener is bound before
//! the server task starts.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use understudy::app::{App, AppOptions};
use understudy::config::Config;

/// A project directory: `understudy.json`, `mocks/<integration>/*.json`, data dir `data/`.
pub struct Project {
    pub dir: tempfile::TempDir,
    integrations: Vec<(String, String)>,
}

impl Project {
    /// A project with these `(name, profile)` integrations (operations in `mocks/<name>`).
    pub fn new(integrations: &[(&str, &str)]) -> Project {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = Project {
            dir,
            integrations: integrations
                .iter()
                .map(|(n, p)| (n.to_string(), p.to_string()))
                .collect(),
        };
        p.write_config(json!({}));
        for (n, _) in integrations {
            std::fs::create_dir_all(p.ops_dir(n)).expect("mocks dir");
        }
        p
    }

    /// Rewrite `understudy.json`, merging `extra` top-level members.
    pub fn write_config(&self, extra: Value) {
        let mut integ = serde_json::Map::new();
        for (n, prof) in &self.integrations {
            integ.insert(
                n.clone(),
                json!({ "profile": prof, "operations": format!("mocks/{n}") }),
            );
        }
        let mut cfg = json!({ "data_dir": "data", "integrations": integ });
        if let (Value::Object(c), Value::Object(e)) = (&mut cfg, extra) {
            for (k, v) in e {
                c.insert(k, v);
            }
        }
        std::fs::write(self.config_path(), serde_json::to_vec_pretty(&cfg).unwrap())
            .expect("write understudy.json");
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("understudy.json")
    }
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }
    pub fn ops_dir(&self, integration: &str) -> PathBuf {
        self.dir.path().join("mocks").join(integration)
    }

    /// Write `mocks/<integration>/<operation_id>.json`.
    pub fn op(&self, integration: &str, op: Value) -> &Project {
        let id = op["operation_id"]
            .as_str()
            .expect("operation_id")
            .to_string();
        std::fs::write(
            self.ops_dir(integration).join(format!("{id}.json")),
            serde_json::to_vec_pretty(&op).unwrap(),
        )
        .expect("write operation file");
        self
    }

    pub fn config(&self) -> Config {
        Config::load(&self.config_path()).expect("project file loads")
    }

    pub fn options(&self) -> AppOptions {
        AppOptions::new(self.config())
    }
}

/// The tests run under `CI=true` (`.ci/run` exports it): there a missing tool fails the test.
pub fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Whether `cmd ARGS…` runs and succeeds. A missing tool skips the caller's test with a note
/// locally and fails it in CI (`what` says what CI must install).
pub fn tool_available(cmd: &str, args: &[&str], what: &str) -> bool {
    let ok = std::process::Command::new(cmd)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(!in_ci(), "CI must install {what} (.ci/run installs it)");
        eprintln!("note: {what} is not installed; skipping");
    }
    ok
}

/// Whether python3 can import every module of `modules` (see [`tool_available`]).
pub fn python_has(modules: &[&str]) -> bool {
    let import = format!("import {}", modules.join(", "));
    tool_available(
        "python3",
        &["-c", &import],
        &format!("the python modules {modules:?}"),
    )
}

/// Copy a directory tree (an example project), leaving out data dirs (`.understudy`).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let p = e.expect("dir entry").path();
        let name = p.file_name().expect("file name");
        if name == ".understudy" {
            continue;
        }
        if p.is_dir() {
            copy_dir(&p, &to.join(name));
        } else {
            std::fs::copy(&p, to.join(name)).expect("copy file");
        }
    }
}

/// A copy of `examples/healthplus` (mocks, contracts, tests) with its data dir `data/`.
pub fn healthplus() -> tempfile::TempDir {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/healthplus");
    let dir = tempfile::tempdir().expect("temp dir");
    copy_dir(&example, dir.path());
    let file = dir.path().join("understudy.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    cfg["data_dir"] = json!("data");
    std::fs::write(&file, serde_json::to_vec_pretty(&cfg).unwrap()).expect("write config");
    dir
}

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    pub app: Arc<App>,
    pub http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

/// One response, fully read.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?} (status {})", self.text, self.status))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Server {
    /// Build the app from a project and serve it on `127.0.0.1:0`.
    pub async fn start(project: &Project) -> Server {
        Server::start_with(project.options()).await
    }

    pub async fn start_with(opts: AppOptions) -> Server {
        let app = Arc::new(App::build(opts).unwrap_or_else(|e| panic!("server starts: {e}")));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(understudy::server::serve(
            listener,
            app.clone(),
            async move {
                let _ = rx.await;
            },
        ));
        Server {
            addr,
            app,
            http: client(),
            stop: Some(tx),
            task: Some(task),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Trigger the shutdown future and wait for the server to drain and flush.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.take().unwrap().await.expect("server task")
    }

    /// A trigger for the shutdown future, for tests that stop the server mid-call.
    pub fn take_stop(&mut self) -> oneshot::Sender<()> {
        self.stop.take().expect("not stopped yet")
    }

    pub async fn join(mut self) -> std::io::Result<()> {
        self.task.take().unwrap().await.expect("server task")
    }

    /// Send a request; `body` is sent as JSON when given.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Resp {
        send(&self.http, method, &self.url(path), body, headers).await
    }

    /// Send a raw body (no JSON encoding).
    pub async fn call_raw(
        &self,
        method: &str,
        path: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> Resp {
        let mut rb = self
            .http
            .request(method.parse().unwrap(), self.url(path))
            .body(body.to_string());
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        read(rb.send().await.expect("request sent")).await
    }

    /// `POST /_understudy/api/attempts?pins=true` (the answer lists the pins), asserting 201.
    pub async fn attempt(&self, body: Value) -> Attempt {
        let r = self
            .call(
                "POST",
                "/_understudy/api/attempts?pins=true",
                Some(&body),
                &[],
            )
            .await;
        assert_eq!(r.status, 201, "attempt creation: {}", r.text);
        let v = r.json();
        Attempt {
            id: v["attempt_id"].as_str().unwrap().to_string(),
            token: v["token"].as_str().unwrap().to_string(),
            body: v,
        }
    }

    /// `GET /_understudy/api/attempts/{id}/evidence`, asserting 200.
    pub async fn evidence(&self, attempt_id: &str) -> Value {
        let r = self
            .call(
                "GET",
                &format!("/_understudy/api/attempts/{attempt_id}/evidence"),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 200, "evidence: {}", r.text);
        r.json()
    }

    /// `DELETE /_understudy/api/attempts/{id}`, asserting 200.
    pub async fn end_attempt(&self, attempt_id: &str) {
        let r = self
            .call(
                "DELETE",
                &format!("/_understudy/api/attempts/{attempt_id}"),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 200, "ending the attempt: {}", r.text);
    }

    /// The default attempt's id.
    pub fn default_attempt(&self) -> String {
        self.app
            .attempts
            .default_attempt()
            .expect("default attempt")
            .id
            .clone()
    }
}

/// A created attempt.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub id: String,
    pub token: String,
    pub body: Value,
}

impl Attempt {
    /// The path prefix of an integration in this attempt: `/~<token>/<integration>`.
    pub fn base(&self, integration: &str) -> String {
        format!("/~{}/{integration}", self.token)
    }
}

/// reqwest is built with `rustls-no-provider`: install ring once before any client.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// An HTTP/1.1 client.
/// One HTTP/1.1 request read off a raw connection by a test's hand-written upstream: its
/// head (lowercased) and its `Content-Length` body; bytes past it stay in `buf` for the next
/// request. `None` when the peer closed the connection first.
pub async fn read_raw_request<S: tokio::io::AsyncRead + Unpin>(
    tcp: &mut S,
    buf: &mut Vec<u8>,
) -> Option<(String, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().expect("a numeric content-length"));
            if buf.len() >= head_end + 4 + len {
                let body = buf[head_end + 4..head_end + 4 + len].to_vec();
                buf.drain(..head_end + 4 + len);
                return Some((head, body));
            }
        }
        match tcp.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

pub fn client() -> reqwest::Client {
    install_crypto_provider();
    reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap()
}

/// An h2c (HTTP/2 prior knowledge, cleartext) client.
pub fn h2c_client() -> reqwest::Client {
    install_crypto_provider();
    reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap()
}

pub async fn send(
    client: &reqwest::Client,
    method: &str,
    url: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> Resp {
    let mut rb = client.request(method.parse().unwrap(), url);
    if let Some(b) = body {
        rb = rb
            .header("content-type", "application/json")
            .body(serde_json::to_vec(b).unwrap());
    }
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    read(rb.send().await.expect("request sent")).await
}

async fn read(r: reqwest::Response) -> Resp {
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.expect("body read");
    Resp {
        status,
        headers,
        text,
    }
}

/// A minimal valid mock: one variant `ok` answering `result`, with one example for `input`.
pub fn mock(result: Value, input: Value) -> Value {
    json!({
        "schema_version": 1,
        "default_variant": "ok",
        "variants": { "ok": { "result": result.clone() } },
        "examples": [ { "variant": "ok", "input": input, "expected": result } ]
    })
}

/// A rest operation file.
pub fn rest_op(id: &str, method: &str, path: &str, mock: Option<Value>) -> Value {
    let mut v = json!({
        "operation_id": id,
        "description": format!("test operation {id}"),
        "match": { "method": method, "path": path },
        "input_schema": { "type": "object" },
        "output_schema": { "type": "object", "required": ["status"] },
    });
    if let Some(m) = mock {
        v["mock"] = m;
    }
    v
}

/// The Salesforce contact lookup of docs/src/reference/operation-files.md: `found` answers one record, `missing` none.
pub fn sf_lookup_op() -> Value {
    let found = json!({ "status": 200, "data": { "totalSize": 1, "done": true, "records": [
        { "attributes": { "type": "Contact" }, "Id": "003000000000001AAA", "FirstName": "Ada" } ] } });
    let missing = json!({ "status": 200, "data": { "totalSize": 0, "done": true, "records": [] } });
    json!({
        "operation_id": "lookup_contact_by_phone",
        "description": "Find a contact by phone number",
        "match": { "method": "GET", "path": "/services/data/*/query",
                   "query": { "q": "SELECT Id, FirstName FROM Contact WHERE Phone = '{phone}'" } },
        "input_schema": { "type": "object", "required": ["phone"],
                          "properties": { "phone": { "type": "string", "pattern": "^[+0-9]+$" } } },
        "output_schema": { "type": "object", "required": ["status", "data"],
                           "properties": { "status": { "type": "integer" } } },
        "mock": {
            "schema_version": 1,
            "default_variant": "found",
            "variants": {
                "found": { "result": found.clone() },
                "missing": { "result": missing.clone() }
            },
            "examples": [
                { "variant": "found", "input": { "phone": "+15550001" }, "expected": found },
                { "variant": "missing", "input": { "phone": "+15550001" }, "expected": missing }
            ]
        }
    })
}

/// A Salesforce contact update (PATCH, 204 no body) that records the phone in state.
pub fn sf_update_op() -> Value {
    json!({
        "operation_id": "update_contact",
        "description": "Update a contact's phone",
        "match": { "method": "PATCH", "path": "/services/data/*/sobjects/Contact/{id}" },
        "input_schema": { "type": "object", "required": ["id", "Phone"],
                          "properties": { "id": { "type": "string" }, "Phone": { "type": "string" } } },
        "output_schema": { "type": "object", "required": ["status"] },
        "mock": {
            "schema_version": 1,
            "default_variant": "ok",
            "variants": { "ok": {
                "result": { "status": 204, "data": null },
                "set_state": { "last_phone": { "$input": "Phone" } }
            } },
            "examples": [ { "variant": "ok", "input": { "id": "003A", "Phone": "+1" },
                            "expected": { "status": 204, "data": null } } ]
        }
    })
}

/// `/counter`: answers the pre-call `counter` and writes the caller's `n` (the lost-update
/// probe of docs/src/reference/mock-definition.md#state).
pub fn counter_op() -> Value {
    json!({
        "operation_id": "bump",
        "description": "Swap the counter: answer the old value, store n",
        "match": { "method": "POST", "path": "/counter" },
        "input_schema": { "type": "object", "required": ["n"], "properties": { "n": { "type": "integer" } } },
        "output_schema": { "type": "object", "required": ["status", "data"] },
        "mock": {
            "schema_version": 1,
            "default_variant": "ok",
            "initial_state": { "counter": -1 },
            "variants": { "ok": {
                "result": { "status": 200, "data": { "previous": { "$state": "counter" } } },
                "set_state": { "counter": { "$input": "n" } }
            } },
            "examples": [ { "variant": "ok", "input": { "n": 1 },
                            "expected": { "status": 200, "data": { "previous": -1 } } } ]
        }
    })
}

/// The standard Salesforce test project: `crm` (salesforce) with the lookup and update
/// operations, `api` (rest) with the counter.
pub fn standard_project() -> Project {
    let p = Project::new(&[("crm", "salesforce"), ("api", "rest")]);
    p.op("crm", sf_lookup_op());
    p.op("crm", sf_update_op());
    p.op("api", counter_op());
    p
}

/// POSTs `{"n": i}` to `urls[i]` concurrently (one task each) and returns every answer's
/// `previous` (the counter operation of [`counter_op`]), asserting each was a 200. The
/// single-process and the cross-process atomicity tests share it.
pub async fn post_counter_concurrently(client: &reqwest::Client, urls: Vec<String>) -> Vec<i64> {
    let mut tasks = Vec::new();
    for (n, url) in urls.into_iter().enumerate() {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let r = send(&client, "POST", &url, Some(&json!({ "n": n })), &[]).await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.json()["previous"].as_i64().unwrap()
        }));
    }
    let mut previous = Vec::new();
    for t in tasks {
        previous.push(t.await.unwrap());
    }
    previous
}

/// The calls `s` recorded so far: the default attempt's tool events and the call counters
/// that `/metrics` renders (a refused request, e.g. a 413, adds to neither).
pub async fn recorded_calls(s: &Server) -> (usize, Vec<((String, String, String), u64)>) {
    let events = s.evidence(&s.default_attempt()).await["tool_events"]
        .as_array()
        .unwrap()
        .len();
    (events, s.app.metrics.calls().into_iter().collect())
}

// ---- OpenTelemetry (tests/it/otel*.rs) -------------------------------------------------

/// The scripted agent instrumented with the OpenTelemetry Python SDK (`opentelemetry-sdk`,
/// `opentelemetry-exporter-otlp-proto-http`).
pub const OTEL_AGENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/otel/agent.py");

/// The OpenTelemetry and agent variables a test process may carry that would send the
/// agent's spans (or calls) elsewhere: removed from every command these helpers build.
const OTEL_INHERITED: [&str; 6] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_SDK_DISABLED",
    "AGENT_BASE_URL",
    "UNDERSTUDY_ADMIN_TOKEN",
];

/// The OpenTelemetry Python SDK and its OTLP/HTTP exporter, which `tests/otel/agent.py` uses
/// (a test without them skips locally and fails in CI, [`tool_available`]).
pub fn otel_sdk_available() -> bool {
    python_has(&[
        "opentelemetry.sdk.trace",
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    ])
}

/// `python3 tests/otel/agent.py MODE` (tokio's Command: the test's runtime keeps serving
/// the agent's calls meanwhile); the caller adds `AGENT_BASE_URL` and the exporter's
/// endpoint.
pub fn otel_agent(mode: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new("python3");
    c.arg(OTEL_AGENT).arg(mode);
    for v in OTEL_INHERITED {
        c.env_remove(v);
    }
    c
}

/// `understudy test --config <project> ARGS… -- python3 tests/otel/agent.py MODE`:
/// `understudy test` wires the agent's exporter and base URL itself.
pub fn understudy_test_otel_agent(
    p: &Project,
    args: &[&str],
    mode: &str,
) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_understudy"));
    c.arg("test")
        .arg("--config")
        .arg(p.config_path())
        .args(args);
    c.args(["--", "python3", OTEL_AGENT, mode]);
    for v in OTEL_INHERITED {
        c.env_remove(v);
    }
    c
}

/// A loopback OTLP/HTTP collector ([`otlp_collector`]).
pub struct OtlpCollector {
    pub port: u16,
    /// Every request: its head (lower-cased) and its body.
    pub rx: tokio::sync::mpsc::UnboundedReceiver<(String, Vec<u8>)>,
    /// Over TLS: the handshakes that failed (a client that did not trust the certificate).
    pub failed_handshakes: Arc<std::sync::atomic::AtomicUsize>,
}

/// A collector on a free loopback port — over TLS with `tls` — handing every request to
/// its channel and answering each `200` with an empty body.
pub async fn otlp_collector(tls: Option<Arc<rustls::ServerConfig>>) -> OtlpCollector {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
        mut io: S,
        tx: tokio::sync::mpsc::UnboundedSender<(String, Vec<u8>)>,
    ) {
        let mut buf = Vec::new();
        while let Some(req) = read_raw_request(&mut io, &mut buf).await {
            let _ = tx.send(req);
            let _ = io
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n")
                .await;
            let _ = io.flush().await;
        }
    }
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let failed = Arc::new(AtomicUsize::new(0));
    let failed_handshakes = failed.clone();
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let (tx, acceptor, failed) = (tx.clone(), acceptor.clone(), failed.clone());
            tokio::spawn(async move {
                match acceptor {
                    None => serve(tcp, tx).await,
                    Some(a) => match a.accept(tcp).await {
                        Ok(s) => serve(s, tx).await,
                        Err(_) => {
                            failed.fetch_add(1, Ordering::SeqCst);
                        }
                    },
                }
            });
        }
    });
    OtlpCollector {
        port,
        rx,
        failed_handshakes,
    }
}

/// A CA made by understudy's own `tls::Ca` and a TLS server configuration for `127.0.0.1`
/// signed by it: (the CA certificate's PEM, the configuration).
pub fn loopback_tls() -> (String, Arc<rustls::ServerConfig>) {
    let ca = understudy::tls::Ca::generate().expect("a test CA");
    let config = understudy::tls::server_config_for_hosts(&ca, &["127.0.0.1".to_string()])
        .expect("a leaf for 127.0.0.1");
    (ca.cert_pem().to_string(), config)
}
