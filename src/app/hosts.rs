//! The forward proxy's host table (docs/src/reference/https.md): which integration an upstream host:port (and
//! base path) names. Built once with the integrations ([`super::App::build`]) instead of per
//! proxied request; `crate::server::connect` selects from it.

use hyper::http::Uri;

use super::generations::IntegrationMap;
use crate::contract::template::path_segments;
use crate::tls;

/// One integration's upstream as the proxy matches it.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamHost {
    pub integration: String,
    pub host: String,
    pub port: u16,
    /// The upstream URL's own path, as decoded segments (empty for a bare host).
    pub base: Vec<String>,
}

impl UpstreamHost {
    /// `None` when `upstream` is not an http(s) URL with a host (config validation refuses
    /// those already).
    pub fn parse(integration: &str, upstream: &str) -> Option<UpstreamHost> {
        let uri: Uri = upstream.trim().parse().ok()?;
        let (_, host, port, pq) = tls::absolute_form(&uri)?;
        let path = pq.split('?').next().unwrap_or("");
        Some(UpstreamHost {
            integration: integration.to_string(),
            host,
            port,
            base: path_segments(path),
        })
    }

    pub fn label(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let base: String = self.base.iter().map(|s| format!("/{s}")).collect();
        format!("{host}:{}{base} ({})", self.port, self.integration)
    }
}

/// Every integration with an `upstream`, in name order. An integration's `upstream` comes
/// from the project file, which a hot reload does not re-read: the table built at start
/// stays right for every generation.
pub fn upstream_hosts(integrations: &IntegrationMap) -> Vec<UpstreamHost> {
    integrations
        .values()
        .filter_map(|i| UpstreamHost::parse(i.name(), i.config.upstream.as_deref()?))
        .collect()
}

/// The integration serving `host:port` for a request with these (decoded) path segments: the
/// longest upstream base path that prefixes them (ties: the first by name); when none does,
/// the first integration on that host (its routing then says what did not match).
pub fn select<'a>(
    hosts: &'a [UpstreamHost],
    host: &str,
    port: u16,
    segments: &[String],
) -> Option<&'a UpstreamHost> {
    let on_host = || hosts.iter().filter(|h| h.host == host && h.port == port);
    on_host()
        .filter(|h| segments.starts_with(&h.base))
        .min_by_key(|h| std::cmp::Reverse(h.base.len()))
        .or_else(|| on_host().next())
}
