//! Per-host leaves for CONNECT interception, signed on the fly and cached.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::ca::LEAF_LIFETIME;
use super::{normalize_host, Ca, TlsError};

/// Default bound of a [`LeafCache`].
pub const DEFAULT_CACHE_CAPACITY: usize = 1000;

/// A cached leaf is re-signed after this long: far inside its seven-day life (and its one-hour
/// backdating), so a long-running proxy never presents an expired leaf.
const REFRESH_AFTER: Duration = Duration::from_secs(24 * 3600);
const _: () = assert!(REFRESH_AFTER.as_secs() < LEAF_LIFETIME.as_secs());

struct Entry {
    leaf: Arc<CertifiedKey>,
    made: Instant,
}

/// A bounded map host → leaf (`Arc<CertifiedKey>`), filled on demand by signing with the CA.
///
/// Keys are normalized hosts (lowercase, no port, no IPv6 brackets, no trailing dot). When
/// full, the oldest entry makes room. Signing happens outside the lock (an ECDSA P-256 key and
/// signature take well under a millisecond); two handshakes racing for a new host may both
/// sign, and the first insert wins.
///
/// As a [`ResolvesServerCert`] it answers the SNI name and aborts a handshake without SNI; a
/// CONNECT tunnel uses [`LeafCache::with_fallback`] (or [`super::intercept_config`]) so an
/// IP-literal target without SNI still gets the CONNECT host's leaf.
pub struct LeafCache {
    ca: Arc<Ca>,
    capacity: usize,
    entries: Mutex<HashMap<String, Entry>>,
}

impl fmt::Debug for LeafCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeafCache")
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl LeafCache {
    /// A cache of at most [`DEFAULT_CACHE_CAPACITY`] leaves signed by `ca`.
    pub fn new(ca: Arc<Ca>) -> LeafCache {
        LeafCache::with_capacity(ca, DEFAULT_CACHE_CAPACITY)
    }

    /// A cache of at most `capacity` (≥ 1) leaves signed by `ca`.
    pub fn with_capacity(ca: Arc<Ca>, capacity: usize) -> LeafCache {
        LeafCache {
            ca,
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The signing CA.
    pub fn ca(&self) -> &Arc<Ca> {
        &self.ca
    }

    /// The leaf for `host` (any form [`normalize_host`] accepts), signed now if absent or due.
    pub fn get(&self, host: &str) -> Result<Arc<CertifiedKey>, TlsError> {
        let key = normalize_host(host)?;
        if let Some(e) = self.lock().get(&key) {
            if e.made.elapsed() < REFRESH_AFTER {
                return Ok(e.leaf.clone());
            }
        }
        let leaf = self.ca.leaf(&key)?;
        let mut entries = self.lock();
        if let Some(e) = entries.get(&key) {
            if e.made.elapsed() < REFRESH_AFTER {
                return Ok(e.leaf.clone());
            }
        }
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            if let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, e)| e.made)
                .map(|(k, _)| k.clone())
            {
                entries.remove(&oldest);
            }
        }
        entries.insert(
            key,
            Entry {
                leaf: leaf.clone(),
                made: Instant::now(),
            },
        );
        Ok(leaf)
    }

    /// Number of cached leaves.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A resolver for one CONNECT tunnel: the SNI name when the client sends one, else
    /// `fallback_host` (the CONNECT host; a port, brackets or upper case are tolerated).
    pub fn with_fallback(self: &Arc<Self>, fallback_host: &str) -> FallbackResolver {
        FallbackResolver {
            cache: self.clone(),
            fallback: fallback_host.to_string(),
        }
    }

    fn resolve_host(&self, host: &str) -> Option<Arc<CertifiedKey>> {
        match self.get(host) {
            Ok(leaf) => Some(leaf),
            Err(e) => {
                tracing::warn!(host, error = %e, "no leaf certificate: TLS handshake refused");
                None
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ResolvesServerCert for LeafCache {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        match hello.server_name() {
            Some(sni) => self.resolve_host(sni),
            None => {
                tracing::warn!("TLS client sent no SNI and no fallback host is known");
                None
            }
        }
    }
}

/// [`LeafCache`] with a fallback host for clients that send no SNI (see
/// [`LeafCache::with_fallback`]).
#[derive(Debug, Clone)]
pub struct FallbackResolver {
    cache: Arc<LeafCache>,
    fallback: String,
}

impl FallbackResolver {
    /// The host used when the client sends no SNI.
    pub fn fallback_host(&self) -> &str {
        &self.fallback
    }
}

impl ResolvesServerCert for FallbackResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let host = hello
            .server_name()
            .unwrap_or_else(|| strip_port(&self.fallback));
        self.cache.resolve_host(host)
    }
}

/// `host:port` → `host`, `[v6]:port` → `[v6]`; anything else unchanged.
fn strip_port(authority: &str) -> &str {
    if let Some(end) = authority.find(']') {
        return &authority[..=end];
    }
    match authority.rsplit_once(':') {
        Some((host, port))
            if !host.contains(':')
                && !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit()) =>
        {
            host
        }
        _ => authority,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(capacity: usize) -> LeafCache {
        LeafCache::with_capacity(Arc::new(Ca::generate().unwrap()), capacity)
    }

    #[test]
    fn same_host_same_leaf_whatever_the_spelling() {
        let c = cache(10);
        let a = c.get("Acme.Example.").unwrap();
        let b = c.get("acme.example").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let v6a = c.get("[::1]").unwrap();
        let v6b = c.get("::1").unwrap();
        assert!(Arc::ptr_eq(&v6a, &v6b));
        assert_eq!(c.len(), 2);
        assert!(c.get("not a host").is_err());
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn bounded_by_capacity() {
        let c = cache(3);
        for h in ["a.test", "b.test", "c.test", "d.test", "e.test"] {
            c.get(h).unwrap();
        }
        assert_eq!(c.len(), 3);
        // The newest host is kept.
        let e1 = c.get("e.test").unwrap();
        let e2 = c.get("e.test").unwrap();
        assert!(Arc::ptr_eq(&e1, &e2));
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn cached_leaves_verify_for_their_host() {
        let c = cache(10);
        let leaf = c.get("api.example.com").unwrap();
        c.ca()
            .verify_leaf(&leaf.cert[0], "api.example.com")
            .unwrap();
    }

    #[test]
    fn fallback_authority_forms() {
        assert_eq!(strip_port("example.com:443"), "example.com");
        assert_eq!(strip_port("example.com"), "example.com");
        assert_eq!(strip_port("[::1]:443"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
        assert_eq!(strip_port("::1"), "::1");
        assert_eq!(strip_port("10.0.0.1:8443"), "10.0.0.1");
        let c = Arc::new(cache(4));
        assert_eq!(c.with_fallback("x.test:443").fallback_host(), "x.test:443");
    }
}
