//! The forward proxy's host table (docs/src/reference/https.md): which integration an upstream host:port (and
//! base path) names. Built once with the integrations ([`super::App::build`]) instead of per
//! proxied request; `crate::server::connect` selects from it.
//!
//! Besides every integration's `upstream`, the Salesforce login hosts reach the project's
//! Salesforce integration (docs/src/guides/salesforce.md#login): a client logs in at
//! `login.salesforce.com` or `test.salesforce.com` (or a My Domain host,
//! `*.my.salesforce.com`) before it calls its instance. With one `salesforce` integration
//! those hosts are its own; with several, only the hosts an integration names in
//! `login_hosts` are routed. Every other host stays refused.

use hyper::http::Uri;

use super::generations::IntegrationMap;
use crate::contract::template::path_segments;
use crate::contract::ProfileKind;
use crate::tls;

/// The login hosts of a project with one `salesforce` integration that names none.
pub const SALESFORCE_LOGIN_HOSTS: &[&str] = &[
    "login.salesforce.com",
    "test.salesforce.com",
    "*.my.salesforce.com",
];

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

    /// Whether this entry serves `host:port`: the same host, or a host under a `*.` pattern
    /// (`*.my.salesforce.com` serves `acme.my.salesforce.com`, not `my.salesforce.com`).
    pub fn serves(&self, host: &str, port: u16) -> bool {
        if self.port != port {
            return false;
        }
        match self.host.strip_prefix("*.") {
            Some(suffix) => host
                .strip_suffix(suffix)
                .and_then(|h| h.strip_suffix('.'))
                .is_some_and(|h| !h.is_empty()),
            None => self.host == host,
        }
    }

    fn is_pattern(&self) -> bool {
        self.host.starts_with("*.")
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

/// Every integration with an `upstream`, in name order, then the Salesforce login hosts
/// (module doc). An integration's `upstream` comes from the project file, which a hot
/// reload does not re-read: the table built at start stays right for every generation.
pub fn upstream_hosts(integrations: &IntegrationMap) -> Vec<UpstreamHost> {
    let mut hosts: Vec<UpstreamHost> = integrations
        .values()
        .filter_map(|i| UpstreamHost::parse(i.name(), i.config.upstream.as_deref()?))
        .collect();
    let salesforce: Vec<_> = integrations
        .values()
        .filter(|i| i.config.profile == ProfileKind::Salesforce)
        .collect();
    let named = salesforce.iter().any(|i| i.config.login_hosts.is_some());
    for i in &salesforce {
        let list: Vec<String> = match &i.config.login_hosts {
            Some(l) => l.clone(),
            None if !named && salesforce.len() == 1 => SALESFORCE_LOGIN_HOSTS
                .iter()
                .map(|h| h.to_string())
                .collect(),
            None => Vec::new(),
        };
        for h in list {
            let h = h.trim().trim_end_matches('.').to_ascii_lowercase();
            if !hosts.iter().any(|e| e.host == h && e.port == 443) {
                hosts.push(UpstreamHost {
                    integration: i.name().to_string(),
                    host: h,
                    port: 443,
                    base: Vec::new(),
                });
            }
        }
    }
    hosts
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
    let exact = || {
        hosts
            .iter()
            .filter(|h| !h.is_pattern() && h.serves(host, port))
    };
    let pattern = || {
        hosts
            .iter()
            .filter(|h| h.is_pattern() && h.serves(host, port))
    };
    exact()
        .filter(|h| segments.starts_with(&h.base))
        .min_by_key(|h| std::cmp::Reverse(h.base.len()))
        .or_else(|| exact().next())
        .or_else(|| pattern().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(integration: &str, host: &str) -> UpstreamHost {
        UpstreamHost {
            integration: integration.into(),
            host: host.into(),
            port: 443,
            base: Vec::new(),
        }
    }

    #[test]
    fn login_host_patterns_serve_subdomains_and_exact_hosts_win() {
        let hosts = vec![
            entry("crm", "healthplus.my.salesforce.com"),
            entry("crm", "login.salesforce.com"),
            entry("other", "*.my.salesforce.com"),
        ];
        let pick = |h: &str, port| select(&hosts, h, port, &[]).map(|e| e.integration.as_str());
        assert_eq!(pick("healthplus.my.salesforce.com", 443), Some("crm"));
        assert_eq!(pick("acme.my.salesforce.com", 443), Some("other"));
        assert_eq!(pick("login.salesforce.com", 443), Some("crm"));
        assert_eq!(pick("my.salesforce.com", 443), None);
        assert_eq!(pick("evil-my.salesforce.com", 443), None);
        assert_eq!(pick("login.salesforce.com", 8443), None);
        assert_eq!(pick("example.com", 443), None);
    }
}
