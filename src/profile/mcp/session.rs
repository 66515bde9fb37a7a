//! Session-era sessions (`Mcp-Session-Id`): unguessable ids, the negotiated version, ending
//! by DELETE, and a bound on how many one endpoint keeps.

use std::collections::HashMap;
use std::sync::Mutex;

/// Random bytes in a session id (128 bits), hex-encoded: 32 visible ASCII characters.
pub const SESSION_ID_BYTES: usize = 16;

/// What the endpoint remembers of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The version `initialize` negotiated.
    pub protocol_version: String,
    /// Ended by DELETE: later requests with this id get 404.
    pub ended: bool,
    /// `notifications/initialized` was received (informational; requests are not refused
    /// before it, see the module doc of `profile::mcp`).
    pub initialized: bool,
    /// The `capabilities` the client declared at `initialize` (`{}` when none), read before
    /// a server-to-client request (docs/src/reference/mcp.md).
    pub client_capabilities: serde_json::Value,
    /// Order of last use (created or looked up), for least-recently-used eviction.
    last_used: u64,
}

/// The sessions of one endpoint.
#[derive(Debug)]
pub struct Sessions {
    inner: Mutex<Inner>,
    max: usize,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<String, SessionInfo>,
    next: u64,
}

/// A new random session id: 128 bits from the operating system's generator.
pub fn new_session_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; SESSION_ID_BYTES];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Sessions {
    /// A table that keeps at most `max` sessions (at least 1).
    pub fn new(max: usize) -> Sessions {
        Sessions {
            inner: Mutex::new(Inner::default()),
            max: max.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the map inconsistent (every update
        // is a single insert or remove), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start a session with the negotiated version and return its id. When the table is
    /// full, ended sessions are forgotten first (they answer 404 like unknown ids anyway),
    /// then the least recently used live one (a client that opens a session per call must
    /// not push out the session another client is using).
    pub fn create(&self, protocol_version: &str) -> Result<String, getrandom::Error> {
        let id = new_session_id()?;
        let mut inner = self.lock();
        if inner.map.len() >= self.max {
            inner.map.retain(|_, s| !s.ended);
        }
        while inner.map.len() >= self.max {
            let oldest = inner
                .map
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    inner.map.remove(&k);
                }
                None => break,
            }
        }
        let last_used = inner.next;
        inner.next += 1;
        inner.map.insert(
            id.clone(),
            SessionInfo {
                protocol_version: protocol_version.to_string(),
                ended: false,
                initialized: false,
                client_capabilities: serde_json::json!({}),
                last_used,
            },
        );
        Ok(id)
    }

    /// The live session with this id, marked as just used; `None` when unknown or ended.
    pub fn get(&self, id: &str) -> Option<SessionInfo> {
        let mut inner = self.lock();
        let now = inner.next;
        let s = inner.map.get_mut(id).filter(|s| !s.ended)?;
        s.last_used = now;
        let found = s.clone();
        inner.next += 1;
        Some(found)
    }

    /// Remember what the client declared at `initialize`.
    pub fn set_client_capabilities(&self, id: &str, capabilities: serde_json::Value) {
        if let Some(s) = self.lock().map.get_mut(id) {
            s.client_capabilities = capabilities;
        }
    }

    pub fn mark_initialized(&self, id: &str) {
        if let Some(s) = self.lock().map.get_mut(id) {
            s.initialized = true;
        }
    }

    /// End a live session; `false` when it was unknown or already ended.
    pub fn end(&self, id: &str) -> bool {
        match self.lock().map.get_mut(id) {
            Some(s) if !s.ended => {
                s.ended = true;
                true
            }
            _ => false,
        }
    }

    /// Sessions held (live and ended).
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_hex_of_128_bits() {
        let a = new_session_id().unwrap();
        let b = new_session_id().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn lifecycle() {
        let s = Sessions::new(10);
        let id = s.create("2025-06-18").unwrap();
        let info = s.get(&id).unwrap();
        assert_eq!(info.protocol_version, "2025-06-18");
        assert!(!info.initialized);
        s.mark_initialized(&id);
        assert!(s.get(&id).unwrap().initialized);
        assert!(s.end(&id));
        assert!(s.get(&id).is_none());
        assert!(!s.end(&id));
        assert!(s.get("nope").is_none());
    }

    #[test]
    fn full_table_forgets_ended_then_least_recently_used() {
        let s = Sessions::new(2);
        let a = s.create("2025-06-18").unwrap();
        let b = s.create("2025-06-18").unwrap();
        s.end(&a);
        let c = s.create("2025-06-18").unwrap();
        assert_eq!(s.len(), 2);
        assert!(s.get(&b).is_some() && s.get(&c).is_some());
        // `b` is the oldest but was just used: `c` goes.
        s.get(&b);
        let d = s.create("2025-06-18").unwrap();
        assert!(
            s.get(&c).is_none(),
            "the least recently used live session is evicted"
        );
        assert!(s.get(&b).is_some() && s.get(&d).is_some());
        // A session in active use survives any number of sessions opened one per call.
        let busy = b;
        for _ in 0..10 {
            assert!(
                s.get(&busy).is_some(),
                "the session in use is never evicted"
            );
            s.create("2025-06-18").unwrap();
        }
        assert!(s.get(&busy).is_some());
    }
}
