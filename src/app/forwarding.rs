//! What the server holds for the forwarding modes (dry-run, record, record-missing,
//! passthrough; `crate::proxy::forward` uses it): the pooled upstream client, the record
//! options, the recorder ([`super::recorder`]), and what was learned from real MCP servers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::recorder::Recorder;
use crate::config::{Config, Mode};
use crate::upstream::{self, Upstream};

/// How [`Forwarding`] is built (the `record`/`serve` flags).
#[derive(Debug, Clone)]
pub struct ForwardOptions {
    /// `--out`: where drafts are written.
    pub out_dir: Option<PathBuf>,
    /// `--allow-writes` (record modes).
    pub allow_writes: bool,
    /// `serve --allow-upstream-writes`: `POST /tools/execute` may send a write upstream.
    pub allow_upstream_writes: bool,
    /// Bound on the wait for an upstream's response head.
    pub upstream_timeout: Duration,
}

impl Default for ForwardOptions {
    fn default() -> Self {
        ForwardOptions {
            out_dir: None,
            allow_writes: false,
            allow_upstream_writes: false,
            upstream_timeout: upstream::DEFAULT_TIMEOUT,
        }
    }
}

/// What the server holds for forwarding: the pooled upstream client, the record options, the
/// recorder, and what was learned from the real MCP servers.
#[derive(Debug)]
pub struct Forwarding {
    pub upstream: Upstream,
    pub allow_writes: bool,
    /// `serve --allow-upstream-writes` (`crate::admin::execute`).
    pub allow_upstream_writes: bool,
    pub recorder: Recorder,
    /// (integration, tool) → is a write, from forwarded `tools/list` answers.
    learned: Mutex<HashMap<(String, String), bool>>,
    /// attempt id → simulated writes so far (deterministic fake ids).
    simulated: Mutex<HashMap<String, u64>>,
    /// Arrival order of captured calls.
    order: AtomicU64,
    /// The MCP sessions whose `GET` stream is being opened upstream.
    pub opening: OpeningStreams,
}

impl Forwarding {
    /// Build the upstream client (trusting `upstream_ca`) and the recorder.
    pub fn new(config: &Config, opts: ForwardOptions) -> Result<Forwarding, String> {
        let upstream = Upstream::new(config.upstream_ca.as_deref(), opts.upstream_timeout)?;
        if config.mode != Mode::Replay {
            for i in config
                .integrations
                .values()
                .filter(|i| i.upstream.is_none())
            {
                tracing::warn!(
                    integration = %i.name,
                    mode = %config.mode,
                    "no `upstream`: what this mode would forward is not (HTTP profiles: the harness error upstream_unavailable; MCP: the mocks answer, as in replay)"
                );
            }
        }
        Ok(Forwarding {
            upstream,
            allow_writes: opts.allow_writes,
            allow_upstream_writes: opts.allow_upstream_writes,
            recorder: Recorder::new(opts.out_dir),
            learned: Mutex::new(HashMap::new()),
            simulated: Mutex::new(HashMap::new()),
            order: AtomicU64::new(0),
            opening: OpeningStreams::default(),
        })
    }

    /// The next arrival number of a captured call.
    pub fn next_order(&self) -> u64 {
        self.order.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Remember whether an MCP tool of the real server is a write.
    pub fn learn_tool(&self, integration: &str, tool: &str, is_write: bool) {
        self.learned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((integration.to_string(), tool.to_string()), is_write);
    }

    /// What a forwarded `tools/list` said about a tool.
    pub fn learned_write(&self, integration: &str, tool: &str) -> Option<bool> {
        self.learned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(integration.to_string(), tool.to_string()))
            .copied()
    }

    pub(crate) fn next_simulated(&self, attempt_id: &str) -> u64 {
        let mut m = self.simulated.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(attempt_id.to_string()).or_default();
        *n += 1;
        *n
    }
}

/// How long a request of an MCP session waits, at most, for a `GET` stream of that session
/// that the client opened before it (see [`OpeningStreams`]).
pub const OPENING_WAIT: Duration = Duration::from_secs(1);

/// The `GET` streams of MCP sessions being opened upstream, so that a later request of the
/// same session does not overtake them (docs/src/reference/mcp.md, "Recording an MCP server").
///
/// A client opens a session's `GET` stream and sends its next `POST` at once, on two
/// connections. Straight to the server the `GET` nearly always arrives first; through a proxy
/// the `POST` may reuse a pooled connection while the `GET` waits for a new one, and a server
/// that sends a request it does not tie to a call (the reference server's `sampling`) only on
/// the `GET` stream drops it when that stream is not open yet — the client then waits
/// forever. A `POST` of the session therefore waits until the `GET`s opened before it have
/// their answer's head (or [`OPENING_WAIT`] since the oldest of them began).
#[derive(Debug, Default)]
pub struct OpeningStreams {
    inner: Arc<Mutex<HashMap<String, Opening>>>,
}

#[derive(Debug)]
struct Opening {
    count: usize,
    since: Instant,
    done: tokio::sync::watch::Sender<usize>,
}

/// A `GET` stream being opened: the session's later requests wait until this is dropped.
#[derive(Debug)]
pub struct OpeningGuard {
    inner: Arc<Mutex<HashMap<String, Opening>>>,
    session: String,
}

impl OpeningStreams {
    /// A `GET` stream of `session` begins to be opened upstream.
    pub fn open(&self, session: &str) -> OpeningGuard {
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let o = m.entry(session.to_string()).or_insert_with(|| Opening {
            count: 0,
            since: Instant::now(),
            done: tokio::sync::watch::channel(0).0,
        });
        o.count += 1;
        o.done.send_replace(o.count);
        OpeningGuard {
            inner: self.inner.clone(),
            session: session.to_string(),
        }
    }

    /// Wait until no `GET` stream of `session` is being opened (bounded: module doc).
    pub async fn settled(&self, session: &str) {
        if session.is_empty() {
            return;
        }
        let waiting = {
            let m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            m.get(session).map(|o| (o.done.subscribe(), o.since))
        };
        let Some((mut rx, since)) = waiting else {
            return;
        };
        let left = OPENING_WAIT.saturating_sub(since.elapsed());
        let _ = tokio::time::timeout(left, rx.wait_for(|n| *n == 0)).await;
    }
}

impl Drop for OpeningGuard {
    fn drop(&mut self) {
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(o) = m.get_mut(&self.session) {
            o.count = o.count.saturating_sub(1);
            o.done.send_replace(o.count);
            if o.count == 0 {
                m.remove(&self.session);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_waits_for_the_stream_opened_before_it() {
        let streams = OpeningStreams::default();
        let guard = streams.open("s1");
        let waited = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = waited.clone();
        let opened = Instant::now();
        let releaser = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            flag.store(true, Ordering::SeqCst);
            drop(guard);
        });
        streams.settled("s1").await;
        assert!(
            waited.load(Ordering::SeqCst),
            "settled before the stream was open"
        );
        assert!(opened.elapsed() < OPENING_WAIT, "waited the whole bound");
        releaser.await.unwrap();
        // Nothing left behind once every stream is open; another session never waits.
        assert!(streams.inner.lock().unwrap().is_empty());
        let _other = streams.open("s2");
        tokio::time::timeout(Duration::from_millis(200), streams.settled("s1"))
            .await
            .expect("a request of another session waited");
    }

    #[tokio::test]
    async fn the_wait_is_bounded_from_the_oldest_open() {
        let streams = OpeningStreams::default();
        let _never = streams.open("s1");
        tokio::time::timeout(OPENING_WAIT * 5, streams.settled("s1"))
            .await
            .expect("a stream whose head never came held the request past its bound");
    }
}
