//! Sending a call to the real system: the path and query joined to the integration's
//! `upstream` ([`rest_of`]), the request with the agent's headers minus `Understudy-*` and
//! hop-by-hop ones ([`send_upstream`], through `crate::upstream`), and reading the answer's
//! body whole when it is small and quick enough ([`buffer`]) — else it is relayed
//! (`super::relay`).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::http::{HeaderValue, Method, Response};

use super::SOURCE_HEADER;
use crate::app::{App, Integration};
use crate::error::{HarnessCode, HarnessError};
use crate::http::Request;
use crate::upstream;

/// The path and query to join to the integration's `upstream`: what follows `/~<token>` and
/// `/<integration>` (escapes kept), or, through the forward proxy, the path relative to the
/// upstream's base.
pub fn rest_of(req: &Request, consumed: usize) -> String {
    if let Some(v) = &req.via_proxy {
        return v.rest.clone();
    }
    let mut rest = skip_segments(&req.path, consumed + 1);
    if let Some(q) = &req.raw_query {
        rest.push('?');
        rest.push_str(q);
    }
    rest
}

/// `path` without its first `n` non-empty segments, keeping the rest as written
/// (`/~t/crm/a//b/`, 2 → `/a//b/`; `/crm`, 1 → ``).
pub fn skip_segments(path: &str, n: usize) -> String {
    let mut rest = path;
    for _ in 0..n {
        rest = rest.trim_start_matches('/');
        rest = match rest.find('/') {
            Some(i) => &rest[i..],
            None => "",
        };
    }
    rest.to_string()
}

/// The upstream's authority, for messages.
pub(crate) fn upstream_host(integ: &Integration) -> String {
    integ
        .config
        .upstream
        .as_deref()
        .and_then(|u| u.parse::<hyper::Uri>().ok())
        .and_then(|u| u.authority().map(|a| a.to_string()))
        .unwrap_or_else(|| integ.config.upstream.clone().unwrap_or_default())
}

/// Send the request upstream (`Understudy-Source: tool_test` added when `tag`); the harness
/// error `upstream_unavailable` when there is no upstream or it does not answer.
pub(crate) async fn send_upstream(
    app: &App,
    integ: &Integration,
    req: &Request,
    rest: &str,
    tag: bool,
    body: Bytes,
) -> Result<Response<Incoming>, HarnessError> {
    let Some(base) = integ.config.upstream.as_deref() else {
        return Err(HarnessError::new(
            HarnessCode::UpstreamUnavailable,
            format!(
                "integration `{}` has no `upstream` in understudy.json (integrations.{}.upstream), so {} mode cannot forward {} {}",
                integ.name(),
                integ.name(),
                app.mode,
                req.method,
                req.path
            ),
        ));
    };
    let method = Method::from_bytes(req.method.as_bytes()).unwrap_or(Method::GET);
    let mut p =
        upstream::prepare_forward(&method, base, rest, &req.headers).map_err(|e| e.to_harness())?;
    if tag {
        p.headers
            .insert(SOURCE_HEADER, HeaderValue::from_static("tool_test"));
    }
    app.forwarding
        .upstream
        .forward(p.into_request(body))
        .await
        .map_err(|e| e.to_harness())
}

/// What reading a response body into memory came to.
pub(crate) enum Buffered {
    Complete(Bytes),
    /// Larger than the limit, or slower than the deadline: stream `prefix` then `rest`.
    Partial {
        prefix: Bytes,
        rest: Incoming,
    },
    Failed(String),
}

/// Read a body whole if it ends within `limit` bytes and `deadline`.
pub(crate) async fn buffer(mut body: Incoming, limit: usize, deadline: Duration) -> Buffered {
    let until = tokio::time::Instant::now() + deadline;
    let mut buf = BytesMut::new();
    loop {
        match tokio::time::timeout_at(until, body.frame()).await {
            Err(_) => {
                return Buffered::Partial {
                    prefix: buf.freeze(),
                    rest: body,
                }
            }
            Ok(None) => return Buffered::Complete(buf.freeze()),
            Ok(Some(Err(e))) => return Buffered::Failed(e.to_string()),
            Ok(Some(Ok(frame))) => {
                if let Ok(d) = frame.into_data() {
                    buf.extend_from_slice(&d);
                    if buf.len() > limit {
                        return Buffered::Partial {
                            prefix: buf.freeze(),
                            rest: body,
                        };
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_skipped_as_written() {
        assert_eq!(skip_segments("/~t/crm/a//b/", 2), "/a//b/");
        assert_eq!(skip_segments("/crm", 1), "");
        assert_eq!(skip_segments("/crm/", 1), "/");
        assert_eq!(skip_segments("//crm/x%2Fy", 1), "/x%2Fy");
    }
}
