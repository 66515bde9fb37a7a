//! The pooled connections of a plain `http://` upstream (issue 20, the request path;
//! `understudy::upstream::Upstream`): forwarded calls share one upstream connection, and a
//! connection the upstream closed while it sat idle costs no call and no evidence. The
//! upstream is a raw loopback HTTP/1.1 responder that counts the connections it accepted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::support::{self, Project, Server};

const PATH: &str = "/crm/services/data/v60.0/sobjects/Contact/003000000000042AAA";

/// A loopback upstream answering every GET with `{"Id":…,"n":<request number>}`; with
/// `close_after_each` it closes the connection after each answer without announcing it
/// (no `Connection: close`), as an upstream whose keep-alive timer fired would.
async fn counting_upstream(close_after_each: bool) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(answer(tcp, requests.clone(), close_after_each));
        }
    });
    (format!("http://{addr}"), accepted)
}

async fn answer(mut tcp: TcpStream, requests: Arc<AtomicUsize>, close_after_each: bool) {
    let mut buf = Vec::new();
    // One request at a time (the forwarded GETs carry no body).
    while support::read_raw_request(&mut tcp, &mut buf)
        .await
        .is_some()
    {
        let n = requests.fetch_add(1, Ordering::SeqCst) + 1;
        let body = json!({ "Id": "003000000000042AAA", "n": n }).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        if tcp
            .write_all(format!("{head}{body}").as_bytes())
            .await
            .is_err()
        {
            return;
        }
        if close_after_each {
            let _ = tcp.shutdown().await;
            return;
        }
    }
}

/// A dry-run server forwarding `crm` to `upstream` (the project holds its data dir).
async fn dry_run_server(upstream: &str) -> (Project, Server) {
    let p = Project::new(&[("crm", "salesforce")]);
    p.write_config(json!({ "mode": "dry-run", "integrations": { "crm": {
        "profile": "salesforce", "operations": "mocks/crm", "upstream": upstream } } }));
    let s = Server::start_with(p.options()).await;
    (p, s)
}

/// The `data` of every forwarded call's evidence, in order.
async fn forwarded_data(s: &Server) -> Vec<Value> {
    let ev = s.evidence(&s.default_attempt()).await;
    ev["tool_events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| e["result"]["data"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_calls_reuse_one_pooled_upstream_connection() {
    let (upstream, accepted) = counting_upstream(false).await;
    let (_p, s) = dry_run_server(&upstream).await;
    for n in 1..=3 {
        let r = s.call("GET", PATH, None, &[]).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.json()["n"], n);
        assert_eq!(r.header("understudy-source"), Some("upstream"));
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "three sequential forwarded calls should share one upstream connection"
    );
    let data = forwarded_data(&s).await;
    assert_eq!(data.len(), 3);
    assert_eq!(data[2]["n"], 3);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_survives_an_upstream_that_closed_the_pooled_connection() {
    let (upstream, accepted) = counting_upstream(true).await;
    let (_p, s) = dry_run_server(&upstream).await;
    for n in 1..=3 {
        let r = s.call("GET", PATH, None, &[]).await;
        assert_eq!(r.status, 200, "call {n}: {}", r.text);
        assert_eq!(r.json()["n"], n);
    }
    // Each call found the previous connection closed and went on a fresh one.
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
    let data = forwarded_data(&s).await;
    let ns: Vec<Value> = data.iter().map(|d| d["n"].clone()).collect();
    assert_eq!(ns, vec![json!(1), json!(2), json!(3)], "{data:?}");
    s.stop().await.unwrap();
}
