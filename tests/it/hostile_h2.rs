//! Hostile HTTP/2 on the plain listener (h2c by prior knowledge, docs/src/operations/limits.md): a body over
//! 10 MiB (declared or streamed) is refused with 413 or a stream reset and never reaches the
//! pipeline — at once, without waiting for the rest of a body the client keeps open, and its
//! stream reset so the client stops sending — hundreds of concurrent streams on one connection are all answered and recorded
//! with dense sequences, a stream whose body never comes blocks neither its connection's other
//! streams nor other connections nor its attempt (and is answered 408 when the body read
//! timeout passes), and a bad preface, a frame-level protocol error, an undecodable header
//! block or a flood of reset streams closes (at most) that one connection while everyone else
//! keeps being served.
//!
//! The client is hyper's own HTTP/2 client over a raw TCP stream (one connection, many
//! streams, full control of bodies); the garbage cases write raw frames.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{recorded_calls, standard_project, Server};

type ReqBody = BoxBody<Bytes, Infallible>;

/// The HTTP/2 connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame.
const SETTINGS: &[u8] = &[0, 0, 0, 0x4, 0, 0, 0, 0, 0];
const MIB: usize = 1024 * 1024;
/// Guard against a hang: no assertion is about time, but a broken server must not hang CI.
const GUARD: Duration = Duration::from_secs(60);

async fn guard<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {GUARD:?}"))
}

/// A body of `left` bytes of `b' '` (valid JSON whitespace), sent in 64 KiB frames.
struct Repeat {
    left: usize,
    chunk: Bytes,
}

impl Repeat {
    fn new(len: usize) -> Repeat {
        Repeat {
            left: len,
            chunk: Bytes::from(vec![b' '; 64 * 1024]),
        }
    }
}

impl Body for Repeat {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(self.chunk.len());
        self.left -= n;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n)))))
    }
}

/// A body that never sends a byte and never ends.
struct Never;

impl Body for Never {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Pending
    }
}

/// A body that sends `len` bytes and then never ends (the client keeps it open). It reports
/// its drop: the client stopped sending it (the server reset the stream).
struct Stall {
    head: Repeat,
    dropped: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Stall {
    fn new(len: usize) -> (Stall, tokio::sync::oneshot::Receiver<()>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let body = Stall {
            head: Repeat::new(len),
            dropped: Some(tx),
        };
        (body, rx)
    }
}

impl Body for Stall {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.head.left == 0 {
            return Poll::Pending;
        }
        Pin::new(&mut self.head).poll_frame(cx)
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        if let Some(tx) = self.dropped.take() {
            let _ = tx.send(());
        }
    }
}

fn json_body(v: &Value) -> ReqBody {
    Full::new(Bytes::from(serde_json::to_vec(v).unwrap())).boxed()
}

/// One h2c connection (prior knowledge), driven by a background task.
async fn h2c(addr: SocketAddr) -> SendRequest<ReqBody> {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .expect("h2c handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// A response: status and body text.
#[derive(Debug)]
struct H2Resp {
    status: u16,
    text: String,
}

/// `method path` on `send` with `body` and extra headers; `Err` for a reset stream or a
/// closed connection.
async fn request(
    send: &SendRequest<ReqBody>,
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: ReqBody,
    headers: &[(&str, &str)],
) -> Result<H2Resp, hyper::Error> {
    let mut b = hyper::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/json");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let mut send = send.clone();
    let resp = send.send_request(b.body(body).unwrap()).await?;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await?.to_bytes();
    Ok(H2Resp {
        status,
        text: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

/// A counter bump over h2 that must succeed.
async fn bump(send: &SendRequest<ReqBody>, addr: SocketAddr, path: &str, n: i64) -> Value {
    let r = guard(
        "bump",
        request(send, addr, "POST", path, json_body(&json!({ "n": n })), &[]),
    )
    .await
    .unwrap_or_else(|e| panic!("bump {n} over h2: {e}"));
    assert_eq!(r.status, 200, "bump {n}: {r:?}");
    serde_json::from_str(&r.text).unwrap()
}

/// A fresh h2c connection and an HTTP/1.1 client both still get answers.
async fn still_serving(s: &Server, n: i64) {
    let fresh = h2c(s.addr).await;
    bump(&fresh, s.addr, "/api/counter", n).await;
    let r = guard(
        "HTTP/1.1 call",
        s.call("POST", "/api/counter", Some(&json!({ "n": n + 1 })), &[]),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// Write `bytes` on a raw connection and read until the server closes it. Returns what the
/// server sent. Panics (through the guard) if the connection is never closed.
async fn raw_until_closed(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    // The server may close before reading everything: a failed write is fine.
    let _ = tcp.write_all(bytes).await;
    let mut got = Vec::new();
    guard(
        "the server closes a connection that broke the protocol",
        async {
            let mut buf = [0u8; 4096];
            loop {
                match tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        },
    )
    .await;
    got
}

/// The frame types in `bytes` (a server's frames after its preface-less start).
fn frame_types(mut bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while bytes.len() >= 9 {
        let len =
            (usize::from(bytes[0]) << 16) | (usize::from(bytes[1]) << 8) | usize::from(bytes[2]);
        types.push(bytes[3]);
        if bytes.len() < 9 + len {
            break;
        }
        bytes = &bytes[9 + len..];
    }
    types
}

const GOAWAY: u8 = 0x7;

/// A frame header + payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A minimal HPACK header block for `POST /api/counter` (static-table indices and literals
/// without indexing, no Huffman coding).
fn hpack_post_counter() -> Vec<u8> {
    let mut h = vec![0x83, 0x86]; // :method POST, :scheme http
    h.push(0x04); // :path, literal without indexing, name index 4
    h.push(12);
    h.extend_from_slice(b"/api/counter");
    h.push(0x01); // :authority, literal without indexing, name index 1
    h.push(9);
    h.extend_from_slice(b"localhost");
    h
}

// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_body_over_10_mib_is_refused_and_the_server_keeps_serving() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let conn = h2c(s.addr).await;
    bump(&conn, s.addr, "/api/counter", 1).await;
    let events_before = s.evidence(&s.default_attempt()).await["tool_events"]
        .as_array()
        .unwrap()
        .len();
    let too_big = 10 * MIB + 1;
    let len = too_big.to_string();
    for (case, headers) in [
        ("declared", vec![("content-length", len.as_str())]),
        ("streamed", vec![]),
    ] {
        let r = guard(
            case,
            request(
                &conn,
                s.addr,
                "POST",
                "/api/counter",
                Repeat::new(too_big).boxed(),
                &headers,
            ),
        )
        .await;
        match r {
            Ok(r) => {
                assert_eq!(r.status, 413, "{case}: {r:?}");
                let v: Value = serde_json::from_str(&r.text).unwrap();
                assert_eq!(v["error"]["code"], "payload_too_large", "{case}: {v}");
            }
            // A reset of that stream (after or instead of the 413) is a refusal too.
            Err(e) => eprintln!("{case}: stream refused: {e}"),
        }
        // The refused stream did not take its connection down: the same connection, a fresh
        // one and HTTP/1.1 are all answered.
        bump(&conn, s.addr, "/api/counter", 2).await;
        still_serving(&s, 3).await;
    }
    // The oversized calls never reached the pipeline: only the 2 + 2×3 good calls of the loop
    // were recorded.
    let events_after = s.evidence(&s.default_attempt()).await["tool_events"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(events_after, events_before + 6);
    s.stop().await.unwrap();
}

/// A body over the limit — declared with one byte sent, or streamed just past the limit —
/// while the client keeps the stream open: answered 413 at once, and the stream is reset
/// (the client is told to stop sending; the server reads no more of it). The 20 s wait, a
/// third of the 60 s body read timeout, is what fails a server that waits for the body; no
/// assertion is about time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_h2_body_is_answered_413_at_once_and_its_stream_reset() {
    const ANSWER: Duration = Duration::from_secs(20);
    let p = standard_project();
    let s = Server::start(&p).await;
    let conn = h2c(s.addr).await;
    bump(&conn, s.addr, "/api/counter", 1).await;
    let declared = (11 * MIB).to_string();
    for (case, sent, headers) in [
        ("declared", 1, vec![("content-length", declared.as_str())]),
        ("streamed", 10 * MIB + 1, vec![]),
    ] {
        let before = recorded_calls(&s).await;
        let (body, dropped) = Stall::new(sent);
        let r = tokio::time::timeout(
            ANSWER,
            request(
                &conn,
                s.addr,
                "POST",
                "/api/counter",
                body.boxed(),
                &headers,
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("{case}: no answer within {ANSWER:?} while the body is open"))
        .unwrap_or_else(|e| panic!("{case}: no 413 but {e}"));
        assert_eq!(r.status, 413, "{case}: {r:?}");
        let v: Value = serde_json::from_str(&r.text).unwrap();
        assert_eq!(v["error"]["code"], "payload_too_large", "{case}: {v}");
        guard(&format!("{case}: the stream is reset"), dropped)
            .await
            .expect("dropped once");
        assert_eq!(
            recorded_calls(&s).await,
            before,
            "{case}: a 413 records no call"
        );
        // The connection, a fresh one and HTTP/1.1 are all served.
        bump(&conn, s.addr, "/api/counter", 2).await;
        still_serving(&s, 3).await;
    }
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_concurrent_streams_on_one_connection_are_all_answered_and_recorded() {
    const STREAMS: i64 = 300; // more than the server's 256 concurrent streams per connection
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let conn = h2c(s.addr).await;
    let path = format!("{}/counter", a.base("api"));
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..STREAMS {
        let (conn, path, addr) = (conn.clone(), path.clone(), s.addr);
        tasks.spawn(async move {
            let v = bump(&conn, addr, &path, n).await;
            (n, v["previous"].as_i64().unwrap())
        });
    }
    let mut previous = BTreeSet::new();
    while let Some(r) = tasks.join_next().await {
        let (_, prev) = r.expect("stream task");
        previous.insert(prev);
    }
    // The attempt's calls ran one after another (no lost update): the answered "previous"
    // values are -1 and all but one of the written numbers, each exactly once.
    assert_eq!(previous.len(), STREAMS as usize, "{previous:?}");
    assert!(previous.contains(&-1));
    let ev = s.evidence(&a.id).await;
    let events = ev["tool_events"].as_array().unwrap();
    assert_eq!(events.len(), STREAMS as usize);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence"], json!(i as u64 + 1), "dense sequences");
        assert_eq!(e["result_status"], "ok");
    }
    assert_eq!(ev["verdict"], "pass", "{}", ev["verdict"]);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_body_never_comes_blocks_nothing_else() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let conn = h2c(s.addr).await;
    let path = format!("{}/counter", a.base("api"));
    // Two stalled streams of the same attempt: one announcing a length, one not.
    let mut stalled = Vec::new();
    for headers in [vec![("content-length", "100")], vec![]] {
        let (conn, path, addr) = (conn.clone(), path.clone(), s.addr);
        stalled.push(tokio::spawn(async move {
            request(&conn, addr, "POST", &path, Never.boxed(), &headers).await
        }));
    }
    // Meanwhile the same connection, the same attempt, another connection and HTTP/1.1 are
    // all answered.
    for n in 0..10 {
        bump(&conn, s.addr, &path, n).await;
    }
    still_serving(&s, 100).await;
    let other = h2c(s.addr).await;
    bump(&other, s.addr, &path, 10).await;
    for t in &stalled {
        assert!(
            !t.is_finished(),
            "a stalled stream was answered without its body"
        );
    }
    for t in stalled {
        t.abort();
    }
    // The attempt's evidence holds exactly the 11 answered calls.
    let ev = s.evidence(&a.id).await;
    assert_eq!(ev["tool_events"].as_array().unwrap().len(), 11, "{ev}");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_h2_connection_is_closed_alone() {
    let p = standard_project();
    let s = Server::start(&p).await;
    // A healthy h2 connection opened before the attacks, used again after each one.
    let healthy = h2c(s.addr).await;
    bump(&healthy, s.addr, "/api/counter", 0).await;

    let oversized_frame = {
        // A frame header announcing 16 MiB - 1 bytes (over the 16 KiB default frame size).
        let mut f = vec![0xff, 0xff, 0xff, 0x0, 0x0, 0, 0, 0, 1];
        f.extend_from_slice(&[0u8; 64]);
        f
    };
    let bad_hpack = frame(0x1, 0x4 | 0x1, 1, &[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
    let data_on_idle_stream = frame(0x0, 0x1, 7, b"{}");
    let settings_bad_length = frame(0x4, 0, 0, &[0, 1, 0]);
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        // (name, bytes after nothing, the server must send GOAWAY before closing)
        (
            "a preface with the wrong magic",
            b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n".to_vec(),
            false,
        ),
        (
            "garbage after the preface",
            [PREFACE, &[0x13u8; 200][..]].concat(),
            false,
        ),
        (
            "an oversized frame",
            [PREFACE, SETTINGS, &oversized_frame].concat(),
            true,
        ),
        (
            "an undecodable header block",
            [PREFACE, SETTINGS, &bad_hpack].concat(),
            true,
        ),
        (
            "DATA on an idle stream",
            [PREFACE, SETTINGS, &data_on_idle_stream].concat(),
            true,
        ),
        (
            "a SETTINGS frame of 3 bytes",
            [PREFACE, SETTINGS, &settings_bad_length].concat(),
            true,
        ),
    ];
    for (i, (case, bytes, want_goaway)) in cases.into_iter().enumerate() {
        let got = raw_until_closed(s.addr, &bytes).await;
        if want_goaway {
            assert!(
                frame_types(&got).contains(&GOAWAY),
                "{case}: the server closes with GOAWAY; got frame types {:?}",
                frame_types(&got)
            );
        }
        // Only that connection: the old one and new ones still work.
        bump(&healthy, s.addr, "/api/counter", i as i64 + 1).await;
        still_serving(&s, 100 + i as i64).await;
    }
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_reset_streams_does_not_starve_other_clients() {
    let p = standard_project();
    let s = Server::start(&p).await;
    // "Rapid reset": open a stream and cancel it at once, 2000 times, in one write.
    let mut bytes = [PREFACE, SETTINGS].concat();
    let block = hpack_post_counter();
    for i in 0..2000u32 {
        let id = 2 * i + 1;
        bytes.extend(frame(0x1, 0x4, id, &block)); // HEADERS, END_HEADERS, body to follow
        bytes.extend(frame(0x3, 0, id, &8u32.to_be_bytes())); // RST_STREAM CANCEL
    }
    let addr = s.addr;
    let flood = tokio::spawn(async move {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        // The server may give up on this connection (GOAWAY) before reading it all.
        let _ = tcp.write_all(&bytes).await;
        tcp
    });
    // Other clients are served while the flood is processed, and after it.
    still_serving(&s, 1).await;
    let tcp = guard("the flood is written", flood).await.unwrap();
    still_serving(&s, 3).await;
    drop(tcp);
    // A cancelled stream never became a call: only the 4 good calls are in the evidence.
    let ev = s.evidence(&s.default_attempt()).await;
    assert_eq!(ev["tool_events"].as_array().unwrap().len(), 4, "{ev}");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_h2_body_is_cut_off_by_the_body_read_timeout() {
    let p = standard_project();
    let mut opts = p.options();
    opts.limits.body_read_timeout = Duration::from_millis(300);
    let s = Server::start_with(opts).await;
    let conn = h2c(s.addr).await;
    for headers in [vec![("content-length", "100")], vec![]] {
        let r = guard(
            "a stalled body",
            request(
                &conn,
                s.addr,
                "POST",
                "/api/counter",
                Never.boxed(),
                &headers,
            ),
        )
        .await;
        match r {
            Ok(r) => {
                assert_eq!(r.status, 408, "{r:?}");
                let v: Value = serde_json::from_str(&r.text).unwrap();
                assert_eq!(v["error"]["code"], "request_timeout", "{v}");
            }
            Err(e) => eprintln!("stalled stream reset: {e}"),
        }
    }
    // Never recorded as calls; the connection still serves.
    bump(&conn, s.addr, "/api/counter", 1).await;
    let ev = s.evidence(&s.default_attempt()).await;
    assert_eq!(ev["tool_events"].as_array().unwrap().len(), 1, "{ev}");
    s.stop().await.unwrap();
}
