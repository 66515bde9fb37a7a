//! TLS (docs/src/reference/https.md): the local test CA, leaf certificates, the rustls server
//! configurations of `serve --tls` and of the CONNECT forward proxy, and the pure parsing
//! helpers of forward-proxy requests.
//!
//! This module owns no socket. The proxy (`crate::proxy`) owns the listener and the CONNECT
//! handling and calls:
//!
//! - [`init_crypto`] once at start (installs rustls's `ring` provider as the process default,
//!   for clients that do not take a provider explicitly).
//! - [`Ca::load`] with the CA directory (`--ca-dir`, `"ca_dir"`, default `certs/`).
//! - `serve --tls`: [`server_config_for_hosts`] with [`listen_hosts`] of the bound address, then
//!   `tokio_rustls::TlsAcceptor::from(config).accept(tcp)`.
//! - `serve --forward-proxy`: one [`LeafCache`] per server; per CONNECT,
//!   [`parse_connect_authority`] and [`proxy_credentials_token`], answer 200, then
//!   `TlsAcceptor::from(intercept_config(&cache, &host)).accept(upgraded)`; plain-HTTP proxy
//!   requests carry an absolute-form target: [`absolute_form`].
//!
//! # Decisions
//!
//! - Keys are ECDSA P-256 (fast to generate and sign, accepted everywhere). Every leaf gets a
//!   **fresh key**; the CA key only signs certificates, never a handshake.
//! - The CA is constrained (`pathlen:0`, key usage `keyCertSign`/`cRLSign`), valid from one day
//!   ago for two years, and says in its name that it is a local test CA. Its subject carries a
//!   short fingerprint of its key, so two CAs of two checkouts are told apart in a trust store.
//! - Leaves: one SAN per host (an IP SAN for an IP literal, webpki never matches a DNS SAN
//!   holding an address), EKU `serverAuth`, `CA:FALSE`, a random serial, valid from one hour
//!   ago for seven days. [`LeafCache`] re-signs an entry after one day, far inside that life.
//! - SNI versus the CONNECT host: the leaf is made for the SNI name when the client sends one
//!   (that is the name the client verifies), else for the CONNECT host (IP-literal targets
//!   carry no SNI). Routing stays with the proxy, by the CONNECT authority; a proxy that wants
//!   the two to agree compares `ServerConnection::server_name()` after the handshake.
//! - The rustls configurations take the `ring` provider explicitly (`builder_with_provider`), so
//!   they work whatever else is compiled in. ALPN is `h2`, `http/1.1`: the listener serves both.
//! - `Ca::load` proves the pair before serving: the key must match the certificate, and a leaf
//!   it signs must verify against the certificate at the current time (an expired CA or a
//!   foreign certificate is a clear start-up error, not a failed handshake later).

mod ca;
mod cache;
mod connect;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::ServerConfig;

pub use ca::{Ca, CaPaths, CA_CERT_FILE, CA_COMMON_NAME, CA_KEY_FILE};
pub use cache::{FallbackResolver, LeafCache, DEFAULT_CACHE_CAPACITY};
pub use connect::{absolute_form, parse_connect_authority, proxy_credentials_token};

/// Everything that can go wrong here. Messages are user-facing and name the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{} already exists; pass --force to replace the CA (clients that trust the old one must be updated)", path.display())]
    Exists { path: PathBuf },
    #[error("{} not found: create a local CA with `understudy ca init --dir {}`", path.display(), dir.display())]
    Missing { path: PathBuf, dir: PathBuf },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("invalid host `{host}` for a certificate: {message}")]
    Host { host: String, message: String },
    #[error("certificate generation failed: {0}")]
    Generate(String),
    #[error("TLS configuration failed: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The crypto provider every configuration here is built with.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Install the `ring` provider as rustls's process default, once. A provider installed
/// earlier (by this or another caller) is kept: that is not an error.
pub fn init_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// ALPN protocols of every server configuration: HTTP/2 preferred, HTTP/1.1 kept (WebSockets
/// and clients without h2).
pub fn alpn_protocols() -> Vec<Vec<u8>> {
    vec![b"h2".to_vec(), b"http/1.1".to_vec()]
}

/// `serve --tls`: one leaf signed by `ca` naming every host of `hosts` (DNS names or IP
/// literals, `[::1]` accepted), ALPN `h2` + `http/1.1`.
pub fn server_config_for_hosts(ca: &Ca, hosts: &[String]) -> Result<Arc<ServerConfig>, TlsError> {
    let leaf = ca.leaf_for_hosts(hosts)?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(leaf)));
    config.alpn_protocols = alpn_protocols();
    Ok(Arc::new(config))
}

/// The CONNECT interception configuration of one tunnel: leaves come from `cache` for the
/// SNI name, or for `fallback_host` (the CONNECT host, without port) when the client sends
/// no SNI. ALPN `h2` + `http/1.1`. Building one per connection is cheap (no key material is
/// made here; leaves are made or reused during the handshake).
pub fn intercept_config(cache: &Arc<LeafCache>, fallback_host: &str) -> Arc<ServerConfig> {
    let resolver = cache.with_fallback(fallback_host);
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("the ring provider supports the default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = alpn_protocols();
    Arc::new(config)
}

/// The names a leaf for a listener bound to `addr` should carry: for a loopback or unspecified
/// address `localhost`, `127.0.0.1` and `::1` (and the address itself), else the address.
/// Clients that reach the listener by another name need that name in the list.
pub fn listen_hosts(addr: &SocketAddr) -> Vec<String> {
    let ip = addr.ip();
    let mut hosts = Vec::new();
    if ip.is_loopback() || ip.is_unspecified() {
        hosts.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
    }
    if !ip.is_unspecified() && !hosts.contains(&ip.to_string()) {
        hosts.push(ip.to_string());
    }
    hosts
}

/// A host as a certificate and cache key: lowercase, no brackets around an IPv6 literal, no
/// trailing dot, no port. IP literals are returned in canonical form.
pub fn normalize_host(host: &str) -> Result<String, TlsError> {
    let bad = |message: &str| TlsError::Host {
        host: host.to_string(),
        message: message.to_string(),
    };
    let trimmed = host.trim();
    let inner = match trimmed.strip_prefix('[') {
        Some(rest) => rest
            .strip_suffix(']')
            .ok_or_else(|| bad("unbalanced `[`"))?,
        None => trimmed,
    };
    if let Ok(ip) = inner.parse::<IpAddr>() {
        return Ok(ip.to_string());
    }
    if inner.len() != trimmed.len() {
        return Err(bad("only an IPv6 address may be written in brackets"));
    }
    let name = inner
        .strip_suffix('.')
        .unwrap_or(inner)
        .to_ascii_lowercase();
    if name.is_empty() {
        return Err(bad("empty host"));
    }
    if !name.is_ascii() {
        return Err(bad(
            "not ASCII: write an internationalized name in its xn-- form",
        ));
    }
    rustls::pki_types::DnsName::try_from(name.as_str())
        .map_err(|_| bad("not a valid DNS name or IP address"))?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_host_forms() {
        assert_eq!(normalize_host("Example.COM.").unwrap(), "example.com");
        assert_eq!(normalize_host("[::1]").unwrap(), "::1");
        assert_eq!(normalize_host("::1").unwrap(), "::1");
        assert_eq!(normalize_host("[0:0::1]").unwrap(), "::1");
        assert_eq!(normalize_host("127.0.0.1").unwrap(), "127.0.0.1");
        assert_eq!(
            normalize_host("under_score.local").unwrap(),
            "under_score.local"
        );
        for bad in [
            "",
            ".",
            "[::1",
            "[example.com]",
            "exa mple.com",
            "bücher.de",
            "a..b",
        ] {
            assert!(normalize_host(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn listen_hosts_cover_loopback_names() {
        let v4: SocketAddr = "127.0.0.1:7777".parse().unwrap();
        assert_eq!(listen_hosts(&v4), ["localhost", "127.0.0.1", "::1"]);
        let any: SocketAddr = "0.0.0.0:7777".parse().unwrap();
        assert_eq!(listen_hosts(&any), ["localhost", "127.0.0.1", "::1"]);
        let lan: SocketAddr = "10.1.2.3:443".parse().unwrap();
        assert_eq!(listen_hosts(&lan), ["10.1.2.3"]);
        let other_loop: SocketAddr = "127.0.0.2:1".parse().unwrap();
        assert_eq!(
            listen_hosts(&other_loop),
            ["localhost", "127.0.0.1", "::1", "127.0.0.2"]
        );
    }

    #[test]
    fn init_crypto_twice_is_fine() {
        init_crypto();
        init_crypto();
        assert!(CryptoProvider::get_default().is_some());
    }
}
