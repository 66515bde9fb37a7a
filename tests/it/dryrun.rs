//! Dry-run, record, record-missing and passthrough against real upstreams on loopback (issue
//! "Dry-run and record: reaching the real system safely, and turning real traffic into
//! checked draft mocks"): a small HTTP server that logs every request reaching it (a blocked
//! write must never arrive), an HTTPS upstream with a certificate from a test CA
//! (`upstream_ca`), an SSE upstream forwarded event by event, record → drafts → `check` →
//! replay of the same answers in the same order, MCP through a real rmcp server and client,
//! the on-demand upstream execute, and a scrubbing test that greps every written file and the
//! server's logs for the secrets it sent.

use std::convert::Infallible;
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::http::HeaderMap;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use understudy::admin::execute_upstream::{execute_upstream, UpstreamOptions};
use understudy::app::recorder::flush_drafts;
use understudy::app::AppOptions;

use crate::support::{self, Project, Server};

// ---- a loopback upstream that logs what reaches it -------------------------------------

pub(crate) type TestBody = UnsyncBoxBody<Bytes, Infallible>;

/// One request as the upstream received it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub method: String,
    /// Path and query as received.
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Seen {
    pub(crate) fn path(&self) -> &str {
        self.uri.split('?').next().unwrap_or("")
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

pub(crate) type Log = Arc<Mutex<Vec<Seen>>>;

fn body(b: impl Into<Bytes>) -> TestBody {
    Full::new(b.into()).boxed_unsync()
}

pub(crate) fn json_resp(status: u16, v: &Value) -> Response<TestBody> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json;charset=UTF-8")
        .body(body(v.to_string()))
        .unwrap()
}

/// A body fed by a channel: one frame per message; the stream ends when the sender drops.
struct ChannelBody(mpsc::UnboundedReceiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

/// A server on 127.0.0.1:0 (HTTP/1.1 and HTTP/2; TLS when `tls` is given) that logs every
/// request (body read whole) and answers with `handler`.
pub(crate) async fn upstream<F>(
    tls: Option<Arc<rustls::ServerConfig>>,
    handler: F,
) -> (SocketAddr, Log)
where
    F: Fn(&Seen) -> Response<TestBody> + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let handler = Arc::new(handler);
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let log2 = log.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let handler = handler.clone();
            let log = log2.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let handler = handler.clone();
                    let log = log.clone();
                    async move {
                        let (parts, b) = req.into_parts();
                        let bytes = b.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                        let seen = Seen {
                            method: parts.method.to_string(),
                            uri: parts
                                .uri
                                .path_and_query()
                                .map(|p| p.as_str().to_string())
                                .unwrap_or_default(),
                            headers: parts.headers,
                            body: bytes,
                        };
                        log.lock().unwrap().push(seen.clone());
                        Ok::<_, Infallible>(handler(&seen))
                    }
                });
                let builder = auto::Builder::new(TokioExecutor::new());
                match acceptor {
                    Some(a) => {
                        if let Ok(s) = a.accept(tcp).await {
                            let _ = builder.serve_connection(TokioIo::new(s), service).await;
                        }
                    }
                    None => {
                        let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
                    }
                }
            });
        }
    });
    (addr, log)
}

fn methods(log: &Log) -> Vec<String> {
    log.lock()
        .unwrap()
        .iter()
        .map(|s| format!("{} {}", s.method, s.path()))
        .collect()
}

const CONTACT_ID: &str = "003000000000042AAA";

/// A Salesforce-shaped upstream: the contact lookup finds nothing until the contact is
/// created; create 201, update/delete 204, read by id, composite, 404 otherwise. Every answer
/// carries a changing `Sforce-Limit-Info`.
pub(crate) fn salesforce_handler() -> impl Fn(&Seen) -> Response<TestBody> + Send + Sync + 'static {
    let created = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    move |s: &Seen| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        let segs: Vec<&str> = s.path().split('/').filter(|x| !x.is_empty()).collect();
        // services/data/vNN.N/…
        let tail: Vec<&str> = segs.iter().skip(3).copied().collect();
        let record = json!({ "attributes": { "type": "Contact",
            "url": format!("/services/data/v60.0/sobjects/Contact/{CONTACT_ID}") },
            "Id": CONTACT_ID, "FirstName": "Ada" });
        let mut r = match (s.method.as_str(), tail.as_slice()) {
            ("GET", ["query"]) => {
                if created.load(Ordering::SeqCst) {
                    json_resp(
                        200,
                        &json!({"totalSize": 1, "done": true, "records": [record]}),
                    )
                } else {
                    json_resp(200, &json!({"totalSize": 0, "done": true, "records": []}))
                }
            }
            ("POST", ["sobjects", "Contact"]) => {
                created.store(true, Ordering::SeqCst);
                json_resp(
                    201,
                    &json!({"id": CONTACT_ID, "success": true, "errors": []}),
                )
            }
            ("GET", ["sobjects", "Contact", _]) => json_resp(200, &record),
            ("PATCH", ["sobjects", "Contact", _]) | ("DELETE", ["sobjects", "Contact", _]) => {
                Response::builder().status(204).body(body("")).unwrap()
            }
            ("POST", ["composite"]) => json_resp(200, &json!({"compositeResponse": []})),
            _ => json_resp(
                404,
                &json!([{"message": "The requested resource does not exist", "errorCode": "NOT_FOUND"}]),
            ),
        };
        r.headers_mut().insert(
            "sforce-limit-info",
            format!("api-usage={n}/15000").parse().unwrap(),
        );
        r
    }
}

/// Percent-encode a query value.
fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn lookup_path(prefix: &str) -> String {
    format!(
        "{prefix}/services/data/v60.0/query?q={}",
        enc("SELECT Id, FirstName FROM Contact WHERE Phone = '+15550001'")
    )
}

/// A project with one integration `crm` (salesforce) pointed at `upstream`, the mocked lookup
/// operation, and `extra` members of the integration.
fn crm_project(mode: &str, upstream: &str, extra: Value) -> Project {
    let p = Project::new(&[("crm", "salesforce")]);
    let mut integ =
        json!({ "profile": "salesforce", "operations": "mocks/crm", "upstream": upstream });
    if let (Value::Object(i), Value::Object(e)) = (&mut integ, extra) {
        i.extend(e);
    }
    p.write_config(json!({ "mode": mode, "integrations": { "crm": integ } }));
    p
}

async fn start(p: &Project, f: impl FnOnce(&mut AppOptions)) -> Server {
    let mut opts = p.options();
    f(&mut opts);
    Server::start_with(opts).await
}

fn events(ev: &Value) -> Vec<Value> {
    ev["tool_events"].as_array().cloned().unwrap_or_default()
}

// ---- dry-run ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_answers_mocks_forwards_reads_and_never_lets_a_blocked_write_through() {
    let (addr, log) = upstream(None, salesforce_handler()).await;
    let p = crm_project("dry-run", &format!("http://{addr}"), json!({}));
    p.op("crm", support::sf_lookup_op());
    let s = start(&p, |_| {}).await;
    let base = "/crm/services/data/v60.0";

    // A mocked operation: the mock answers, nothing reaches the upstream.
    let r = s.call("GET", &lookup_path("/crm"), None, &[]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["records"][0]["FirstName"], "Ada");
    assert!(log.lock().unwrap().is_empty());

    // An unmatched read (built-in sobject_get, no mock) is forwarded with the agent's
    // credentials and without understudy's own headers.
    let r = s
        .call(
            "GET",
            &format!("{base}/sobjects/Contact/{CONTACT_ID}"),
            None,
            &[("authorization", "Bearer real-session-0001")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["Id"], CONTACT_ID);
    assert_eq!(r.header("understudy-source"), Some("upstream"));
    assert!(r.header("sforce-limit-info").is_some());
    {
        let seen = log.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(
            seen[0].uri,
            format!("/services/data/v60.0/sobjects/Contact/{CONTACT_ID}")
        );
        assert_eq!(seen[0].headers["authorization"], "Bearer real-session-0001");
        assert!(seen[0]
            .headers
            .keys()
            .all(|k| !k.as_str().starts_with("understudy-")));
    }

    // Writes without a mock: blocked in the native shape, never forwarded.
    let create = s
        .call(
            "POST",
            &format!("{base}/sobjects/Contact/"),
            Some(&json!({"LastName": "Lovelace"})),
            &[],
        )
        .await;
    assert_eq!(create.status, 403, "{}", create.text);
    assert_eq!(
        create.json()[0]["errorCode"],
        "INSUFFICIENT_ACCESS_OR_READONLY"
    );
    assert!(create.json()[0]["message"]
        .as_str()
        .unwrap()
        .contains("dry-run"));
    let patch_by_post = s
        .call(
            "POST",
            &format!("{base}/sobjects/Contact/{CONTACT_ID}?_HttpMethod=PATCH"),
            Some(&json!({"Phone": "+1"})),
            &[],
        )
        .await;
    assert_eq!(patch_by_post.status, 403);
    let delete = s
        .call(
            "DELETE",
            &format!("{base}/sobjects/Contact/{CONTACT_ID}"),
            None,
            &[],
        )
        .await;
    assert_eq!(delete.status, 403);
    let composite_write = json!({"compositeRequest": [
        {"method": "GET", "url": "/services/data/v60.0/sobjects/Contact/x", "referenceId": "a"},
        {"method": "PATCH", "url": "/services/data/v60.0/sobjects/Contact/x", "referenceId": "b", "body": {}}]});
    let r = s
        .call(
            "POST",
            &format!("{base}/composite"),
            Some(&composite_write),
            &[],
        )
        .await;
    assert_eq!(r.status, 403);
    // A composite of GETs only is a read: forwarded.
    let composite_read = json!({"compositeRequest": [
        {"method": "GET", "url": "/services/data/v60.0/sobjects/Contact/x", "referenceId": "a"}]});
    let r = s
        .call(
            "POST",
            &format!("{base}/composite"),
            Some(&composite_read),
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);

    assert_eq!(
        methods(&log),
        vec![
            format!("GET /services/data/v60.0/sobjects/Contact/{CONTACT_ID}"),
            "POST /services/data/v60.0/composite".to_string(),
        ],
        "only the reads reached the real system"
    );

    let ev = s.evidence(&s.default_attempt()).await;
    let tool_events = events(&ev);
    let summary: Vec<(String, String, bool, u64)> = tool_events
        .iter()
        .map(|e| {
            (
                e["result_status"].as_str().unwrap().to_string(),
                e["source"].as_str().unwrap().to_string(),
                e["is_write"].as_bool().unwrap(),
                e["http_status"].as_u64().unwrap(),
            )
        })
        .collect();
    let row = |a: &str, b: &str, w: bool, h: u64| (a.to_string(), b.to_string(), w, h);
    assert_eq!(
        summary,
        vec![
            row("ok", "mock", false, 200),
            row("forwarded", "upstream", false, 200),
            row("blocked", "mock", true, 403),
            row("blocked", "mock", true, 403),
            row("blocked", "mock", true, 403),
            row("blocked", "mock", true, 403),
            row("forwarded", "upstream", false, 200),
        ]
    );
    assert_eq!(tool_events[1]["operation_id"], "sobject_get");
    assert_eq!(tool_events[1]["result"]["data"]["FirstName"], "Ada");
    assert_eq!(tool_events[2]["operation_id"], "sobject_create");
    let blocked = ev["blocked_side_effects"].as_array().unwrap();
    assert_eq!(blocked.len(), 4);
    assert!(blocked.iter().all(|b| b["action"] == "blocked"));
    assert_eq!(ev["verdict"], "pass", "{ev}");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_simulate_answers_deterministic_synthetic_successes() {
    let (addr, log) = upstream(None, salesforce_handler()).await;
    let p = crm_project(
        "dry-run",
        &format!("http://{addr}"),
        json!({"unmatched_writes": "simulate"}),
    );
    let s = start(&p, |_| {}).await;
    let run = |s: &Server, token: String| {
        let base = format!("/~{token}/crm/services/data/v60.0");
        let http = s.http.clone();
        let url = s.url("");
        async move {
            let mut out = Vec::new();
            for (m, path, b) in [
                (
                    "POST",
                    format!("{base}/sobjects/Contact"),
                    Some(json!({"LastName": "L"})),
                ),
                (
                    "POST",
                    format!("{base}/sobjects/Account"),
                    Some(json!({"Name": "A"})),
                ),
                (
                    "PATCH",
                    format!("{base}/sobjects/Contact/{CONTACT_ID}"),
                    Some(json!({"Phone": "+1"})),
                ),
                (
                    "DELETE",
                    format!("{base}/sobjects/Contact/{CONTACT_ID}"),
                    None,
                ),
            ] {
                out.push(support::send(&http, m, &format!("{url}{path}"), b.as_ref(), &[]).await);
            }
            out
        }
    };
    let a1 = s.attempt(json!({"test_run_id": "run-7"})).await;
    let r = run(&s, a1.token.clone()).await;
    assert_eq!(r[0].status, 201, "{}", r[0].text);
    let id = r[0].json()["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 18);
    assert!(id.starts_with("003"), "{id}");
    assert_eq!(r[0].json()["success"], true);
    assert_eq!(r[0].json()["errors"], json!([]));
    let account = r[1].json()["id"].as_str().unwrap().to_string();
    assert!(account.starts_with("001"), "{account}");
    assert_ne!(id, account);
    assert_eq!(r[2].status, 204);
    assert!(r[2].text.is_empty());
    assert_eq!(r[3].status, 204);
    assert!(
        log.lock().unwrap().is_empty(),
        "nothing reached the upstream"
    );

    // The same test run gets the same ids in the same order.
    let a2 = s.attempt(json!({"test_run_id": "run-7"})).await;
    let again = run(&s, a2.token.clone()).await;
    assert_eq!(again[0].json()["id"], json!(id));
    assert_eq!(again[1].json()["id"], json!(account));

    let ev = s.evidence(&a1.id).await;
    let statuses: Vec<&str> = ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["result_status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, vec!["simulated"; 4]);
    assert_eq!(ev["tool_events"][0]["result"]["status"], 201);
    assert_eq!(ev["tool_events"][0]["result"]["data"]["id"], json!(id));
    let actions: Vec<&str> = ev["blocked_side_effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, vec!["simulated"; 4]);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_tag_forwards_writes_marked_as_test_traffic() {
    let (addr, log) = upstream(None, salesforce_handler()).await;
    let p = crm_project(
        "dry-run",
        &format!("http://{addr}"),
        json!({"unmatched_writes": "tag"}),
    );
    let s = start(&p, |_| {}).await;
    let r = s
        .call(
            "POST",
            "/crm/services/data/v60.0/sobjects/Contact",
            Some(&json!({"LastName": "L"})),
            &[],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json()["id"], CONTACT_ID);
    assert_eq!(r.header("understudy-source"), Some("tool_test"));
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["understudy-source"], "tool_test");
    assert_eq!(seen[0].json(), json!({"LastName": "L"}));
    let ev = s.evidence(&s.default_attempt()).await;
    assert_eq!(ev["tool_events"][0]["source"], "tool_test");
    assert_eq!(ev["tool_events"][0]["result_status"], "forwarded");
    assert_eq!(ev["tool_events"][0]["result"]["data"]["id"], CONTACT_ID);
    assert_eq!(ev["blocked_side_effects"][0]["action"], "tagged");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_the_harness_error_upstream_unavailable() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let p = crm_project("dry-run", &format!("http://127.0.0.1:{port}"), json!({}));
    let s = start(&p, |_| {}).await;
    let r = s
        .call(
            "GET",
            &format!("/crm/services/data/v60.0/sobjects/Contact/{CONTACT_ID}"),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 500);
    assert_eq!(r.header("understudy-error"), Some("upstream_unavailable"));
    let msg = r.json()["understudy_error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
    assert!(msg.contains("refused"), "{msg}");
    let ev = s.evidence(&s.default_attempt()).await;
    assert_eq!(ev["harness_errors"][0]["code"], "upstream_unavailable");
    assert_eq!(ev["verdict"], "fail");
    s.stop().await.unwrap();
}

/// A test CA (rcgen) and a leaf for 127.0.0.1 signed by it: (CA PEM, server config).
fn test_ca() -> (String, Arc<rustls::ServerConfig>) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "understudy dry-run test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        leaf_key.serialize_der(),
    ));
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![leaf.der().clone()], key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    (ca.pem(), Arc::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_upstream_is_trusted_through_the_upstream_ca() {
    let (ca_pem, tls) = test_ca();
    let (addr, log) = upstream(Some(tls), salesforce_handler()).await;
    let url = format!("https://127.0.0.1:{}", addr.port());
    let p = crm_project("passthrough", &url, json!({}));
    let ca_file = p.path().join("upstream-ca.pem");
    std::fs::write(&ca_file, &ca_pem).unwrap();

    // Without the CA: the TLS failure is named, nothing is answered as a success.
    let s = start(&p, |_| {}).await;
    let r = s.call("GET", &lookup_path("/crm"), None, &[]).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.header("understudy-error"), Some("upstream_unavailable"));
    assert!(r.text.contains("TLS"), "{}", r.text);
    s.stop().await.unwrap();

    // With it (`upstream_ca` in understudy.json; `--upstream-ca` sets the same).
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(p.config_path()).unwrap()).unwrap();
    cfg["upstream_ca"] = json!("upstream-ca.pem");
    std::fs::write(p.config_path(), cfg.to_string()).unwrap();
    let s = start(&p, |_| {}).await;
    let r = s.call("GET", &lookup_path("/crm"), None, &[]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["totalSize"], 0);
    assert_eq!(log.lock().unwrap().len(), 1);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_upstream_is_forwarded_event_by_event() {
    let (release_tx, release_rx) = oneshot::channel::<()>();
    let release = Arc::new(Mutex::new(Some(release_rx)));
    let (addr, _log) = upstream(None, move |_s: &Seen| {
        let (tx, rx) = mpsc::unbounded_channel();
        let wait = release.lock().unwrap().take();
        tokio::spawn(async move {
            let _ = tx.send(Bytes::from_static(b"id: 1\ndata: {\"n\":1}\n\n"));
            if let Some(w) = wait {
                let _ = w.await;
            }
            let _ = tx.send(Bytes::from_static(
                b": keep-alive\n\nid: 2\ndata: {\"n\":2}\n\n",
            ));
        });
        Response::builder()
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .body(ChannelBody(rx).boxed_unsync())
            .unwrap()
    })
    .await;
    let p = Project::new(&[("events", "rest")]);
    p.write_config(json!({ "mode": "dry-run", "integrations": { "events": {
        "profile": "rest", "operations": "mocks/events", "upstream": format!("http://{addr}") } } }));
    let s = start(&p, |_| {}).await;
    let mut resp = s
        .http
        .get(s.url("/events/stream"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["cache-control"], "no-cache");
    let first = resp.chunk().await.unwrap().unwrap();
    assert_eq!(
        &first[..],
        b"id: 1\ndata: {\"n\":1}\n\n",
        "the first event arrives while the upstream still holds the second"
    );
    release_tx.send(()).unwrap();
    let mut rest = Vec::new();
    while let Some(c) = resp.chunk().await.unwrap() {
        rest.extend_from_slice(&c);
    }
    assert_eq!(&rest[..], b": keep-alive\n\nid: 2\ndata: {\"n\":2}\n\n");
    // The evidence was written before the stream's end was passed on.
    let ev = s.evidence(&s.default_attempt()).await;
    let e = &ev["tool_events"][0];
    assert_eq!(e["result_status"], "forwarded");
    assert_eq!(e["result"]["data"]["events"], json!([{"n": 1}, {"n": 2}]));
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_forward_proxy_reads_are_forwarded_and_writes_blocked() {
    let (addr, log) = upstream(None, |s: &Seen| json_resp(200, &json!({"seen": s.uri}))).await;
    let p = Project::new(&[("api", "rest")]);
    p.write_config(json!({ "mode": "dry-run", "integrations": { "api": {
        "profile": "rest", "operations": "mocks/api", "upstream": format!("http://{addr}/base") } } }));
    let certs = p.path().join("certs");
    understudy::tls::Ca::init(&certs, false).unwrap();
    let app = Arc::new(understudy::app::App::build(p.options()).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let me = listener.local_addr().unwrap();
    let transport =
        understudy::server::Transport::for_serve(&certs, false, true, "127.0.0.1:0", me).unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(understudy::server::serve_with(
        listener,
        app.clone(),
        transport,
        async move {
            let _ = rx.await;
        },
    ));
    let agent = reqwest::Client::builder()
        .proxy(reqwest::Proxy::http(format!("http://{me}")).unwrap())
        .build()
        .unwrap();
    let r = agent
        .get(format!("http://{addr}/base/items/7?x=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["understudy-source"], "upstream");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["seen"], "/base/items/7?x=1");
    let r = agent
        .post(format!("http://{addr}/base/items"))
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(methods(&log), vec!["GET /base/items/7"]);
    let _ = tx.send(());
    task.await.unwrap().unwrap();
}

#[test]
fn serve_in_a_record_mode_needs_an_out_directory() {
    let p = Project::new(&[("api", "rest")]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args([
            "serve",
            "--config",
            p.config_path().to_str().unwrap(),
            "--mode",
            "record",
            "--listen",
            "127.0.0.1:0",
        ])
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--out"), "{err}");
}

// ---- record → drafts → check → replay --------------------------------------------------

/// The calls of the recording: lookup (nothing), create, lookup (found), read by id.
async fn sf_session(s: &Server) -> Vec<(u16, Value)> {
    let base = "/crm/services/data/v60.0";
    let mut out = Vec::new();
    let auth = [("authorization", "Bearer 00Dxx0000001gPL!AR8AQJXg5oqT")];
    let r = s.call("GET", &lookup_path("/crm"), None, &auth).await;
    out.push((r.status, r.json()));
    let r = s
        .call(
            "POST",
            &format!("{base}/sobjects/Contact/"),
            Some(&json!({"FirstName": "Ada", "Phone": "+15550001"})),
            &auth,
        )
        .await;
    out.push((r.status, r.json()));
    let r = s.call("GET", &lookup_path("/crm"), None, &auth).await;
    out.push((r.status, r.json()));
    let r = s
        .call(
            "GET",
            &format!("{base}/sobjects/Contact/{CONTACT_ID}"),
            None,
            &auth,
        )
        .await;
    out.push((r.status, r.json()));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_writes_drafts_that_pass_check_and_replay_the_same_answers_in_order() {
    let (addr, log) = upstream(None, salesforce_handler()).await;
    let p = crm_project("record", &format!("http://{addr}"), json!({}));
    let out = p.path().join("drafts");
    let s = start(&p, |o| {
        o.forward.out_dir = Some(out.clone());
        o.forward.allow_writes = true;
    })
    .await;
    let recorded = sf_session(&s).await;
    assert_eq!(recorded[0].1["totalSize"], 0);
    assert_eq!(recorded[1].0, 201);
    assert_eq!(recorded[2].1["totalSize"], 1);
    assert_eq!(recorded[3].1["Id"], CONTACT_ID);
    assert_eq!(
        log.lock().unwrap().len(),
        4,
        "every call reached the upstream"
    );

    // Through the admin route, as a user would flush.
    let r = s
        .call(
            "POST",
            "/_understudy/api/drafts/flush",
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let flushed = r.json();
    assert_eq!(flushed["exchanges"], 4, "{flushed}");
    let crm = &flushed["integrations"]["crm"];
    assert!(
        crm["drafts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["problems"] == json!([])),
        "{flushed}"
    );
    let ev = s.evidence(&s.default_attempt()).await;
    assert!(ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["result_status"] == "forwarded" && e["source"] == "upstream"));
    // Stopping writes the drafts again (a cumulative flush replaces its own files).
    s.stop().await.unwrap();
    let dir = out.join("crm");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert!(
        files.iter().all(|f| !f.ends_with(".draft")),
        "no second copy: {files:?}"
    );
    assert!(
        files.iter().filter(|f| f.ends_with(".json")).count() >= 3,
        "{files:?}"
    );
    // No secret on disk.
    for f in &files {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(!text.contains("AR8AQJXg5oqT"), "{f}: {text}");
    }

    // `understudy check` passes on the drafts.
    let code = understudy::commands::run([
        "understudy",
        "check",
        "--profile",
        "salesforce",
        dir.to_str().unwrap(),
    ])
    .code();
    assert_eq!(code, 0, "check of {}", dir.display());

    // A replay server on the drafts answers the same calls the same way, in the same order,
    // without any upstream.
    let replay = Project::new(&[("crm", "salesforce")]);
    replay.write_config(json!({ "integrations": { "crm": {
        "profile": "salesforce", "operations": dir.to_str().unwrap() } } }));
    let r = Server::start(&replay).await;
    let replayed = sf_session(&r).await;
    assert_eq!(replayed, recorded);
    let ev = r.evidence(&r.default_attempt()).await;
    assert!(ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["result_status"] == "ok" && e["source"] == "mock"));
    assert_eq!(ev["verdict"], "pass", "{ev}");
    assert_eq!(
        log.lock().unwrap().len(),
        4,
        "replay never reaches the upstream"
    );
    r.stop().await.unwrap();
}

/// Issue 22 (2): someone recording for the first time has no operations directory yet. The
/// forwarding modes start with it treated as empty (record still drafts into `--out`); replay
/// refuses to start (almost always a typo) with a message that names the directory and
/// suggests `understudy record`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_operations_directory_is_empty_when_forwarding_and_a_start_error_in_replay() {
    let (addr, log) = upstream(None, salesforce_handler()).await;
    let upstream_url = format!("http://{addr}");
    for mode in ["record", "record-missing", "dry-run"] {
        let p = crm_project(mode, &upstream_url, json!({ "operations": "mocks/new" }));
        assert!(!p.path().join("mocks/new").exists());
        let out = p.path().join("drafts");
        let s = start(&p, |o| {
            if mode != "dry-run" {
                o.forward.out_dir = Some(out.clone());
            }
        })
        .await;
        let r = s.call("GET", &lookup_path("/crm"), None, &[]).await;
        assert_eq!(r.status, 200, "{mode}: {}", r.text);
        assert_eq!(
            r.json()["totalSize"],
            0,
            "{mode}: forwarded to the upstream"
        );
        if mode != "dry-run" {
            let flushed = flush_drafts(&s.app).await.unwrap();
            assert_eq!(flushed["exchanges"], 1, "{mode}: {flushed}");
            assert!(
                files_under(&out.join("crm"))
                    .iter()
                    .any(|f| f.extension().is_some_and(|x| x == "json")),
                "{mode}: a draft in --out"
            );
        }
        s.stop().await.unwrap();
    }
    assert_eq!(log.lock().unwrap().len(), 3);

    let p = crm_project(
        "replay",
        &upstream_url,
        json!({ "operations": "mocks/new" }),
    );
    let e = match understudy::app::App::build(p.options()) {
        Ok(_) => panic!("replay started without its operations directory"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("mocks/new"), "{e}");
    assert!(e.contains("does not exist"), "{e}");
    assert!(e.contains("understudy record"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_blocks_writes_without_allow_writes_and_does_not_draft_them() {
    let (addr, log) = upstream(None, salesforce_handler()).await;
    let p = crm_project("record", &format!("http://{addr}"), json!({}));
    let out = p.path().join("drafts");
    let s = start(&p, |o| o.forward.out_dir = Some(out.clone())).await;
    let r = s.call("GET", &lookup_path("/crm"), None, &[]).await;
    assert_eq!(r.status, 200);
    let r = s
        .call(
            "POST",
            "/crm/services/data/v60.0/sobjects/Contact",
            Some(&json!({"LastName": "L"})),
            &[],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.json()[0]["message"]
        .as_str()
        .unwrap()
        .contains("--allow-writes"));
    assert_eq!(methods(&log), vec!["GET /services/data/v60.0/query"]);
    let flushed = flush_drafts(&s.app).await.unwrap();
    assert_eq!(flushed["exchanges"], 1);
    let ev = s.evidence(&s.default_attempt()).await;
    assert_eq!(ev["blocked_side_effects"][0]["action"], "blocked");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_missing_answers_mocks_and_records_only_the_rest() {
    let (addr, log) = upstream(None, salesforce_handler()).await;
    let p = crm_project("record-missing", &format!("http://{addr}"), json!({}));
    p.op("crm", support::sf_lookup_op());
    let out = p.path().join("drafts");
    let s = start(&p, |o| o.forward.out_dir = Some(out.clone())).await;
    let r = s.call("GET", &lookup_path("/crm"), None, &[]).await;
    assert_eq!(r.json()["totalSize"], 1, "the mock (found) answers");
    let r = s
        .call(
            "GET",
            &format!("/crm/services/data/v60.0/sobjects/Contact/{CONTACT_ID}"),
            None,
            &[],
        )
        .await;
    assert_eq!(r.json()["Id"], CONTACT_ID);
    assert_eq!(methods(&log).len(), 1);
    let flushed = flush_drafts(&s.app).await.unwrap();
    assert_eq!(flushed["exchanges"], 1, "{flushed}");
    let ids: Vec<&str> = flushed["integrations"]["crm"]["drafts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["operation_id"].as_str().unwrap())
        .collect();
    assert!(!ids.contains(&"lookup_contact_by_phone"), "{ids:?}");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_forwards_even_mocked_operations_and_logs_every_call() {
    let (addr, log) = upstream(None, salesforce_handler()).await;
    let p = crm_project("passthrough", &format!("http://{addr}"), json!({}));
    p.op("crm", support::sf_lookup_op());
    let s = start(&p, |_| {}).await;
    let recorded = sf_session(&s).await;
    assert_eq!(
        recorded[0].1["totalSize"], 0,
        "the real system, not the mock"
    );
    assert_eq!(recorded[1].0, 201, "writes reach the real system");
    assert_eq!(log.lock().unwrap().len(), 4);
    let ev = s.evidence(&s.default_attempt()).await;
    let rows: Vec<(String, bool)> = events(&ev)
        .iter()
        .map(|e| {
            assert_eq!(e["source"], "upstream");
            (
                e["operation_id"].as_str().unwrap_or("").to_string(),
                e["is_write"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("lookup_contact_by_phone".to_string(), false),
            ("sobject_create".to_string(), true),
            ("lookup_contact_by_phone".to_string(), false),
            ("sobject_get".to_string(), false),
        ]
    );
    // The recorded arguments are the mock pipeline's input, credentials scrubbed.
    assert_eq!(events(&ev)[0]["arguments"], json!({"phone": "+15550001"}));
    assert!(!ev.to_string().contains("AR8AQJXg5oqT"));
    assert!(
        flush_drafts(&s.app).await.is_err(),
        "no --out: nothing to flush"
    );
    let r = s
        .call(
            "POST",
            "/_understudy/api/drafts/flush",
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.text);
    assert_eq!(r.json()["error"]["code"], "not_recording");
    s.stop().await.unwrap();
}

// ---- the on-demand upstream execute ----------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_upstream_reports_the_real_answer_and_its_difference_from_the_mock() {
    let (addr, log) = upstream(None, salesforce_handler()).await;
    let p = crm_project("replay", &format!("http://{addr}"), json!({}));
    p.op("crm", support::sf_lookup_op());
    p.op("crm", support::sf_update_op());
    // A real write upstream through POST /tools/execute needs `serve --allow-upstream-writes`.
    let s = start(&p, |o| o.forward.allow_upstream_writes = true).await;
    let v = execute_upstream(
        &s.app,
        "crm",
        "lookup_contact_by_phone",
        &json!({"phone": "+15550001"}),
        UpstreamOptions::default(),
    )
    .await;
    assert_eq!(v["error"], Value::Null, "{v}");
    assert_eq!(v["status_code"], 200);
    assert_eq!(v["retries"], 0);
    assert!(v["duration_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(v["result"]["data"]["totalSize"], 0);
    assert_eq!(v["validation_results"]["output_valid"], true, "{v}");
    assert_eq!(v["mock"]["variant"], "found");
    let diff = v["diff"].as_array().unwrap();
    assert!(
        diff.iter()
            .any(|d| d["path"] == "/data/totalSize" && d["mock"] == 1 && d["upstream"] == 0),
        "{v}"
    );
    assert_eq!(
        log.lock().unwrap()[0].uri,
        format!(
            "/services/data/v62.0/query?q={}",
            enc("SELECT Id, FirstName FROM Contact WHERE Phone = '+15550001'")
        )
    );
    // A write runs only when allowed.
    let input = json!({"id": CONTACT_ID, "Phone": "+15550002"});
    let v = execute_upstream(
        &s.app,
        "crm",
        "update_contact",
        &input,
        UpstreamOptions::default(),
    )
    .await;
    assert_eq!(v["error"]["code"], "write_blocked", "{v}");
    assert_eq!(log.lock().unwrap().len(), 1);
    let allow = UpstreamOptions {
        allow_write: true,
        ..UpstreamOptions::default()
    };
    let v = execute_upstream(&s.app, "crm", "update_contact", &input, allow).await;
    assert_eq!(v["status_code"], 204, "{v}");
    assert_eq!(v["result"], json!({"status": 204}));
    let seen = log.lock().unwrap()[1].clone();
    assert_eq!(seen.method, "PATCH");
    assert_eq!(
        seen.path(),
        format!("/services/data/v62.0/sobjects/Contact/{CONTACT_ID}")
    );
    assert_eq!(seen.json(), json!({"Phone": "+15550002"}));
    // Invalid input is never sent.
    let v = execute_upstream(
        &s.app,
        "crm",
        "lookup_contact_by_phone",
        &json!({"phone": "x y"}),
        UpstreamOptions::default(),
    )
    .await;
    assert_eq!(v["error_kind"], "input_error");
    assert_eq!(log.lock().unwrap().len(), 2);

    // The same through `POST /tools/execute`: `target: "upstream"` reaches the real system,
    // `dry_run` never lets a write through even with `allow_write` (it is simulated).
    let exec = |body: Value| {
        let s = &s;
        async move {
            s.call("POST", "/_understudy/api/tools/execute", Some(&body), &[])
                .await
        }
    };
    let r = exec(
        json!({"integration": "crm", "operation_id": "lookup_contact_by_phone",
                        "input": {"phone": "+15550001"}, "target": "upstream"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["status_code"], 200);
    assert_eq!(log.lock().unwrap().len(), 3);
    let r = exec(
        json!({"integration": "crm", "operation_id": "update_contact", "input": input,
                        "target": "upstream", "dry_run": true, "allow_write": true}),
    )
    .await;
    assert_eq!(r.json()["error"], Value::Null, "{}", r.text);
    assert_eq!(
        r.json()["blocked_side_effects"],
        json!(["crm/update_contact"])
    );
    assert_eq!(
        log.lock().unwrap().len(),
        3,
        "a dry-run write never arrives"
    );
    let r = exec(
        json!({"integration": "crm", "operation_id": "update_contact", "input": input,
                        "target": "upstream", "allow_write": true}),
    )
    .await;
    assert_eq!(r.json()["status_code"], 204, "{}", r.text);
    assert_eq!(log.lock().unwrap().len(), 4);
    s.stop().await.unwrap();
}

// ---- MCP: a real rmcp server upstream, a real rmcp client ------------------------------

mod mcp_forward {
    use super::*;
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{
        StreamableHttpClientTransport, StreamableHttpServerConfig, StreamableHttpService,
    };
    use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

    #[derive(Clone)]
    struct Real {
        calls: Arc<Mutex<Vec<String>>>,
    }

    impl ServerHandler for Real {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            _r: Option<PaginatedRequestParams>,
            _c: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let tools: Vec<Tool> = vec![
                serde_json::from_value(json!({ "name": "lookup", "description": "Find a record",
                    "inputSchema": { "type": "object", "properties": { "phone": { "type": "string" } } },
                    "annotations": { "readOnlyHint": true } }))
                .unwrap(),
                serde_json::from_value(json!({ "name": "send_email", "description": "Send an email",
                    "inputSchema": { "type": "object", "properties": { "to": { "type": "string" } } },
                    "annotations": { "destructiveHint": false } }))
                .unwrap(),
            ];
            Ok(ListToolsResult::with_all_items(tools))
        }

        async fn call_tool(
            &self,
            r: CallToolRequestParams,
            _c: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            self.calls.lock().unwrap().push(r.name.to_string());
            Ok(CallToolResult::structured(json!({ "found": true, "name": "Real Ada" })).into())
        }
    }

    async fn start_real(calls: Arc<Mutex<Vec<String>>>) -> SocketAddr {
        let service = StreamableHttpService::new(
            move || {
                Ok(Real {
                    calls: calls.clone(),
                })
            },
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let svc = hyper_util::service::TowerToHyperService::new(service.clone());
                tokio::spawn(async move {
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        addr
    }

    fn greet_op() -> Value {
        let out = json!({ "greeting": "hello from the mock" });
        json!({
            "operation_id": "greet",
            "description": "Say hello",
            "annotations": { "readOnlyHint": true },
            "input_schema": { "type": "object" },
            "output_schema": { "type": "object", "required": ["greeting"] },
            "mock": { "schema_version": 1, "default_variant": "ok",
                      "variants": { "ok": { "result": out.clone() } },
                      "examples": [ { "variant": "ok", "input": {}, "expected": out } ] }
        })
    }

    fn args(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mcp_dry_run_forwards_reads_blocks_unmocked_writes_and_answers_mocks() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let addr = start_real(calls.clone()).await;
        let p = Project::new(&[("remote", "mcp")]);
        p.write_config(json!({ "mode": "dry-run", "integrations": { "remote": {
            "profile": "mcp", "operations": "mocks/remote", "upstream": format!("http://{addr}/mcp") } } }));
        p.op("remote", greet_op());
        let s = start(&p, |_| {}).await;
        let client =
            ().serve(StreamableHttpClientTransport::from_uri(s.url("/remote")))
                .await
                .expect("initialize through understudy");
        let tools = client.list_all_tools().await.unwrap();
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(
            names,
            vec!["lookup", "send_email"],
            "the real server's list"
        );

        let r = client
            .call_tool(
                CallToolRequestParams::new("lookup").with_arguments(args(json!({"phone": "+1"}))),
            )
            .await
            .unwrap();
        assert_eq!(
            r.structured_content,
            Some(json!({"found": true, "name": "Real Ada"}))
        );
        let r = client
            .call_tool(
                CallToolRequestParams::new("send_email")
                    .with_arguments(args(json!({"to": "a@b.c"}))),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        let text = serde_json::to_string(&r.content).unwrap();
        assert!(text.contains("dry-run"), "{text}");
        let r = client
            .call_tool(CallToolRequestParams::new("greet").with_arguments(args(json!({}))))
            .await
            .unwrap();
        assert_eq!(
            r.structured_content,
            Some(json!({"greeting": "hello from the mock"}))
        );
        assert_eq!(
            *calls.lock().unwrap(),
            vec!["lookup".to_string()],
            "the blocked write and the mocked tool never reached the real server"
        );
        client.cancel().await.unwrap();

        let ev = s.evidence(&s.default_attempt()).await;
        let rows: Vec<(String, String, String, bool)> = events(&ev)
            .iter()
            .map(|e| {
                (
                    e["operation_id"].as_str().unwrap().to_string(),
                    e["result_status"].as_str().unwrap().to_string(),
                    e["source"].as_str().unwrap().to_string(),
                    e["is_write"].as_bool().unwrap(),
                )
            })
            .collect();
        let row =
            |a: &str, b: &str, c: &str, w: bool| (a.to_string(), b.to_string(), c.to_string(), w);
        assert_eq!(
            rows,
            vec![
                row("lookup", "forwarded", "upstream", false),
                row("send_email", "blocked", "mock", true),
                row("greet", "ok", "mock", false),
            ]
        );
        assert_eq!(
            events(&ev)[0]["result"]["structuredContent"],
            json!({"found": true, "name": "Real Ada"})
        );
        assert_eq!(ev["blocked_side_effects"][0]["operation_id"], "send_email");
        s.stop().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn execute_upstream_calls_a_real_mcp_tool_in_a_short_session() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let addr = start_real(calls.clone()).await;
        let p = Project::new(&[("remote", "mcp")]);
        p.write_config(json!({ "integrations": { "remote": {
            "profile": "mcp", "operations": "mocks/remote", "upstream": format!("http://{addr}/mcp") } } }));
        let mocked = json!({ "found": true, "name": "Mock Ada" });
        p.op(
            "remote",
            json!({
                "operation_id": "lookup",
                "description": "Find a record",
                "annotations": { "readOnlyHint": true },
                "input_schema": { "type": "object", "properties": { "phone": { "type": "string" } } },
                "output_schema": { "type": "object", "required": ["found"] },
                "mock": { "schema_version": 1, "default_variant": "ok",
                          "variants": { "ok": { "result": mocked.clone() } },
                          "examples": [ { "variant": "ok", "input": {}, "expected": mocked } ] }
            }),
        );
        let s = start(&p, |_| {}).await;
        let v = execute_upstream(
            &s.app,
            "remote",
            "lookup",
            &json!({"phone": "+1"}),
            UpstreamOptions::default(),
        )
        .await;
        assert_eq!(v["error"], Value::Null, "{v}");
        assert_eq!(v["result"], json!({"found": true, "name": "Real Ada"}));
        assert_eq!(v["validation_results"]["output_valid"], true);
        assert_eq!(
            v["diff"],
            json!([{"path": "/name", "mock": "Mock Ada", "upstream": "Real Ada"}])
        );
        assert_eq!(*calls.lock().unwrap(), vec!["lookup".to_string()]);
        s.stop().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mcp_record_captures_tool_calls_into_drafts_that_pass_check() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let addr = start_real(calls.clone()).await;
        let p = Project::new(&[("remote", "mcp")]);
        p.write_config(json!({ "mode": "record", "integrations": { "remote": {
            "profile": "mcp", "operations": "mocks/remote", "upstream": format!("http://{addr}/mcp") } } }));
        let out = p.path().join("drafts");
        let s = start(&p, |o| o.forward.out_dir = Some(out.clone())).await;
        let client =
            ().serve(StreamableHttpClientTransport::from_uri(s.url("/remote")))
                .await
                .unwrap();
        client.list_all_tools().await.unwrap();
        let r = client
            .call_tool(
                CallToolRequestParams::new("lookup").with_arguments(args(json!({"phone": "+1"}))),
            )
            .await
            .unwrap();
        assert_eq!(
            r.structured_content,
            Some(json!({"found": true, "name": "Real Ada"}))
        );
        // A write in record mode without --allow-writes: blocked.
        let r = client
            .call_tool(
                CallToolRequestParams::new("send_email").with_arguments(args(json!({"to": "x"}))),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        client.cancel().await.unwrap();
        assert_eq!(*calls.lock().unwrap(), vec!["lookup".to_string()]);
        let flushed = flush_drafts(&s.app).await.unwrap();
        // The tools/list answer and the one forwarded call (the blocked write never was).
        assert_eq!(flushed["exchanges"], 2, "{flushed}");
        s.stop().await.unwrap();
        let dir = out.join("remote");
        assert!(dir.join("lookup.json").exists());
        // Listed, never forwarded: the server's contract without a mock.
        let send: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("send_email.json")).unwrap())
                .unwrap();
        assert!(send.get("mock").is_none(), "{send}");
        let code = understudy::commands::run([
            "understudy",
            "check",
            "--profile",
            "mcp",
            dir.to_str().unwrap(),
        ])
        .code();
        assert_eq!(code, 0);
    }

    /// A raw MCP upstream: `tools/list` and `tools/call` answered on an SSE stream that stays
    /// open for `hold` after the result, as a server that ends its streams lazily would;
    /// anything else answered at once (JSON).
    async fn lingering_upstream(hold: std::time::Duration) -> SocketAddr {
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while let Some((_, body)) = support::read_raw_request(&mut tcp, &mut buf).await
                    {
                        let msg: Value = serde_json::from_slice(&body).unwrap();
                        let id = msg["id"].clone();
                        let lingering = match msg["method"].as_str() {
                            Some("tools/call") => Some(json!({
                                "content": [{"type": "text", "text": "{\"found\":true}"}],
                                "structuredContent": {"found": true}})),
                            Some("tools/list") => Some(json!({"tools": [{"name": "lookup",
                                "inputSchema": {"type": "object"},
                                "annotations": {"readOnlyHint": true}}]})),
                            _ => None,
                        };
                        if let Some(result) = lingering {
                            let result = json!({"jsonrpc": "2.0", "id": id, "result": result});
                            let event = format!("event: message\ndata: {result}\n\n");
                            let out = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                                event.len()
                            );
                            let _ = tcp.write_all(out.as_bytes()).await;
                            tokio::time::sleep(hold).await;
                            let _ = tcp.write_all(b"0\r\n\r\n").await;
                            continue;
                        }
                        let body = json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string();
                        let out = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = tcp.write_all(out.as_bytes()).await;
                    }
                });
            }
        });
        addr
    }

    /// The agent has its answer once the result's event arrives; the upstream may end the
    /// stream later, and only then is the call finished and its exchange kept. A flush of the
    /// drafts made in between waits for it instead of leaving the call out; an answer whose
    /// stream the agent left early is kept too (it arrived whole).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flush_waits_for_a_call_whose_answer_arrived_before_its_stream_ended() {
        let addr = lingering_upstream(std::time::Duration::from_millis(400)).await;
        let p = Project::new(&[("remote", "mcp")]);
        p.write_config(json!({ "mode": "record", "integrations": { "remote": {
            "profile": "mcp", "operations": "mocks/remote", "upstream": format!("http://{addr}/mcp") } } }));
        let out = p.path().join("drafts");
        let s = start(&p, |o| o.forward.out_dir = Some(out.clone())).await;
        let http = reqwest::Client::new();
        let post = |body: Value| {
            http.post(s.url("/remote"))
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-06-18")
                .json(&body)
                .send()
        };
        // The agent reads the list's event and leaves before the stream ends.
        let mut listed = post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .await
            .unwrap();
        assert_eq!(listed.status(), 200);
        let first = listed.chunk().await.unwrap().expect("the list's event");
        assert!(String::from_utf8_lossy(&first).contains("lookup"));
        drop(listed);
        let mut call = post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "lookup", "arguments": {}}}))
        .await
        .unwrap();
        assert_eq!(call.status(), 200);
        // The result's event, while the upstream still holds the stream open.
        let first = call.chunk().await.unwrap().expect("the result's event");
        assert!(String::from_utf8_lossy(&first).contains("\"found\":true"));
        let flushed = flush_drafts(&s.app).await.unwrap();
        assert_eq!(
            flushed["exchanges"], 2,
            "tools/list and the call: {flushed}"
        );
        assert!(out.join("remote").join("lookup.json").exists(), "{flushed}");
        drop(call);
        s.stop().await.unwrap();
    }
}

// ---- secrets never reach disk ----------------------------------------------------------

const SECRETS: &[&str] = &[
    "sk-live-AUTH-5f1e2d3c4b",
    "tok-QUERY-9a8b7c6d5e",
    "pw-BODY-1029384756",
    "cookie-SESSION-77aa88bb",
    "setcookie-RESP-3344ccdd",
    "apikey-HEADER-5566eeff",
    "env-AUTH-8c7d6e5f4a",
    "ctx-AUTH-1a2b3c4d5e",
];

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_the_store_the_drafts_or_the_logs() {
    // The upstream echoes everything it got (headers included, the Authorization value also
    // under a name that is no secret's) and sets a cookie.
    let (addr, log) = upstream(None, |s: &Seen| {
        let mut headers = serde_json::Map::new();
        for (k, v) in &s.headers {
            headers.insert(k.to_string(), json!(v.to_str().unwrap_or("")));
        }
        let mut r = json_resp(
            200,
            &json!({ "uri": s.uri, "headers": headers, "body": String::from_utf8_lossy(&s.body),
                     "seen": s.headers.get("authorization").and_then(|h| h.to_str().ok()),
                     "marker": "visible-marker-0042" }),
        );
        r.headers_mut().insert(
            "set-cookie",
            "sid=setcookie-RESP-3344ccdd; HttpOnly".parse().unwrap(),
        );
        r
    })
    .await;
    let p = Project::new(&[("api", "rest")]);
    p.write_config(json!({ "integrations": { "api": {
        "profile": "rest", "operations": "mocks/api", "upstream": format!("http://{addr}") } } }));
    // For `POST /tools/execute` with `target: "upstream"` (no other call matches it).
    p.op("api", support::rest_op("whoami", "GET", "/whoami", None));
    let out = p.path().join("drafts");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args([
            "record",
            "--config",
            p.config_path().to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--allow-writes",
        ])
        .env("RUST_LOG", "debug")
        .env("UNDERSTUDY_UPSTREAM_AUTH_API", "Bearer env-AUTH-8c7d6e5f4a")
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("understudy record starts");
    let stderr = child.stderr.take().unwrap();
    let logs = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stderr), &mut s);
        s
    });
    let stdout = child.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut l = String::new();
        std::io::BufReader::new(stdout).read_line(&mut l).unwrap();
        l
    })
    .await
    .unwrap();
    let url = line
        .trim()
        .strip_prefix("understudy listening on ")
        .unwrap_or_else(|| panic!("readiness line: {line:?}"))
        .to_string();
    let http = support::client();
    let headers = [
        ("authorization", "Bearer sk-live-AUTH-5f1e2d3c4b"),
        ("cookie", "session=cookie-SESSION-77aa88bb"),
        ("x-api-key", "apikey-HEADER-5566eeff"),
    ];
    let r = support::send(
        &http,
        "GET",
        &format!("{url}/api/items/17?access_token=tok-QUERY-9a8b7c6d5e&page=2"),
        None,
        &headers,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.text.contains("sk-live-AUTH"),
        "the agent gets the real answer"
    );
    let r = support::send(
        &http,
        "POST",
        &format!("{url}/api/login"),
        Some(&json!({"user": "visible-user-0042", "password": "pw-BODY-1029384756"})),
        &headers,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The tool-testing API's upstream execute: the environment's credential, then one given
    // in `test_context` for one call, then a malformed one. The upstream echoes each; no
    // answer shows it.
    let execute = format!("{url}/_understudy/api/tools/execute");
    let whoami = json!({"integration": "api", "operation_id": "whoami", "input": {},
                        "target": "upstream"});
    let mut with_ctx = whoami.clone();
    with_ctx["test_context"] = json!({"secrets": {"authorization": "Bearer ctx-AUTH-1a2b3c4d5e"},
                                      "metadata": {"tenant": "visible-tenant-0042"}});
    let mut malformed = whoami.clone();
    malformed["test_context"] = json!({"secrets": "Bearer ctx-AUTH-1a2b3c4d5e"});
    let mut answers = String::new();
    for (body, status) in [(&whoami, 200), (&with_ctx, 200), (&malformed, 400)] {
        let r = support::send(&http, "POST", &execute, Some(body), &[]).await;
        assert_eq!(r.status, status, "{}", r.text);
        answers.push_str(&r.text);
    }
    let seen: Vec<Option<String>> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.path() == "/whoami")
        .map(|s| {
            s.headers
                .get("authorization")
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })
        .collect();
    assert_eq!(
        seen,
        [
            Some("Bearer env-AUTH-8c7d6e5f4a".to_string()),
            Some("Bearer ctx-AUTH-1a2b3c4d5e".to_string())
        ],
        "the upstream got each credential once; the malformed call sent nothing"
    );
    assert!(answers.contains("visible-tenant-0042"), "{answers}");
    for s in ["env-AUTH-8c7d6e5f4a", "ctx-AUTH-1a2b3c4d5e"] {
        assert!(!answers.contains(s), "{s} in an execute answer:\n{answers}");
    }
    // SIGTERM: a graceful stop that writes the drafts.
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(
        status.success(),
        "understudy record exits cleanly: {status:?}"
    );
    let logs = logs.join().unwrap();

    let written = files_under(p.path());
    assert!(
        written.iter().any(|f| f.starts_with(out.join("api"))),
        "drafts were written: {written:?}\n{logs}"
    );
    // Controls: what is not secret did reach the store and the drafts.
    let all: Vec<u8> = written
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap_or_default())
        .collect();
    assert!(contains(&all, "visible-user-0042"));
    assert!(contains(&all, "visible-marker-0042"));
    for f in &written {
        let bytes = std::fs::read(f).unwrap_or_default();
        for s in SECRETS {
            assert!(!contains(&bytes, s), "{s} found in {}", f.display());
        }
    }
    for s in SECRETS {
        assert!(!logs.contains(s), "{s} found in the server's log:\n{logs}");
    }
}
