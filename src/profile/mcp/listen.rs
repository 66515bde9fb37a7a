//! The session era's standalone GET stream (docs/src/reference/mcp.md: `notifications/resources/updated`).
//!
//! `GET` with `Accept: text/event-stream` and a live `Mcp-Session-Id` opens the session's
//! server-to-client stream: an SSE answer that stays open (the priming event first in
//! 2025-11-25) and carries only notifications — never a response. One stream per session:
//! a second GET replaces the first (the old one ends); `DELETE` of the session, or the end
//! of the attempt (the endpoint is dropped), ends it. `Last-Event-ID` is not honoured (no
//! replay: a resumed GET is a new stream). Stateless era: 405, as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::mpsc;

use super::ask::SseStream;
use super::{sse, McpBody, McpResponse};

struct Listener {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    stream: u64,
    n: u64,
}

/// The open GET streams of an endpoint's sessions.
#[derive(Default)]
pub struct Listeners {
    map: Mutex<HashMap<String, Listener>>,
}

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Listeners({})", self.lock().len())
    }
}

impl Listeners {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Listener>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Open `session`'s stream (stream number `stream`, priming first when `priming`): the
    /// answer to the GET.
    pub fn open(&self, session: &str, stream: u64, priming: bool) -> McpResponse {
        let (tx, rx) = mpsc::unbounded_channel();
        if priming {
            let _ = tx.send(sse::priming(&format!("{stream}-0")));
        }
        self.lock()
            .insert(session.to_string(), Listener { tx, stream, n: 0 });
        let mut headers = super::reply::session_header(Some(session));
        headers.extend(sse::headers());
        McpResponse {
            status: 200,
            headers,
            body: McpBody::Stream(SseStream(Arc::new(Mutex::new(Some(rx))))),
        }
    }

    /// Send a notification on `session`'s stream; false when it has none (or it is gone).
    pub fn send(&self, session: &str, message: &Value) -> bool {
        let mut map = self.lock();
        let Some(l) = map.get_mut(session) else {
            return false;
        };
        l.n += 1;
        let id = format!("{}-{}", l.stream, l.n);
        if l.tx.send(sse::event(Some(&id), message)).is_err() {
            map.remove(session);
            return false;
        }
        true
    }

    /// End `session`'s stream.
    pub fn close(&self, session: &str) {
        self.lock().remove(session);
    }

    /// Whether `session` has an open stream.
    pub fn is_open(&self, session: &str) -> bool {
        self.lock().get(session).is_some_and(|l| !l.tx.is_closed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn one_stream_per_session_ends_when_replaced_or_closed() {
        let l = Listeners::default();
        assert!(!l.send("s", &json!({"method": "x"})), "no stream yet");
        let first = l.open("s", 1, true);
        let McpBody::Stream(s1) = first.body else {
            panic!("a stream")
        };
        let mut rx1 = s1.take().unwrap();
        assert_eq!(rx1.recv().await.unwrap(), sse::priming("1-0"));
        assert!(l.send("s", &json!({"method": "x"})));
        let e = String::from_utf8(rx1.recv().await.unwrap()).unwrap();
        assert!(e.starts_with("id: 1-1\n"), "{e}");
        let McpBody::Stream(s2) = l.open("s", 2, false).body else {
            panic!("a stream")
        };
        assert!(rx1.recv().await.is_none(), "the replaced stream ends");
        let mut rx2 = s2.take().unwrap();
        assert!(l.is_open("s"));
        l.close("s");
        assert!(rx2.recv().await.is_none(), "a closed stream ends");
        assert!(!l.is_open("s"));
    }
}
