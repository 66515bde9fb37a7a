//! Pure parsing of forward-proxy requests: the CONNECT authority, the attempt token carried
//! as proxy credentials (docs/src/concepts/attempts.md), and absolute-form request targets.

use base64::Engine as _;
use hyper::header::PROXY_AUTHORIZATION;
use hyper::http::HeaderMap;
use hyper::Uri;

use super::normalize_host;

/// The authority-form target of `CONNECT`: `host:port` or `[v6]:port` (RFC 9110 9.3.6, the
/// port is required). Returns the normalized host (lowercase, no brackets, no trailing dot)
/// and the port.
pub fn parse_connect_authority(authority: &str) -> Result<(String, u16), String> {
    let bad = |why: &str| format!("CONNECT target `{authority}`: {why}");
    if authority.is_empty() {
        return Err(bad("empty"));
    }
    if authority
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(bad("contains whitespace"));
    }
    if authority.contains('@') {
        return Err(bad(
            "user information is not allowed (send Proxy-Authorization)",
        ));
    }
    let (host, port) = if authority.starts_with('[') {
        let end = authority.find(']').ok_or_else(|| bad("unbalanced `[`"))?;
        let port = authority[end + 1..]
            .strip_prefix(':')
            .ok_or_else(|| bad("expected host:port"))?;
        (&authority[..=end], port)
    } else {
        let (host, port) = authority
            .rsplit_once(':')
            .ok_or_else(|| bad("expected host:port"))?;
        if host.contains(':') {
            return Err(bad(
                "an IPv6 address must be written in brackets, [v6]:port",
            ));
        }
        (host, port)
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("the port must be a number"));
    }
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| bad("the port must be in 1..=65535"))?;
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    let host = normalize_host(host).map_err(|e| bad(&e.to_string()))?;
    Ok((host, port))
}

/// The attempt token sent as proxy credentials: `HTTPS_PROXY=http://<token>@HOST:PORT` makes
/// clients send `Proxy-Authorization: Basic base64("<token>:")`; a password after the colon
/// is ignored. `Ok(None)` without the header. A header that is present but unusable (another
/// scheme, bad base64, not UTF-8, empty user, repeated) is an `Err`: the caller fails closed
/// with 407/401 instead of falling back to the default attempt.
pub fn proxy_credentials_token(headers: &HeaderMap) -> Result<Option<String>, String> {
    let mut values = headers.get_all(PROXY_AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err("more than one Proxy-Authorization header".into());
    }
    let value = value
        .to_str()
        .map_err(|_| "Proxy-Authorization is not ASCII".to_string())?
        .trim();
    let (scheme, credentials) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(format!(
            "Proxy-Authorization scheme `{scheme}` is not supported: use Basic, e.g. HTTPS_PROXY=http://<token>@host:port"
        ));
    }
    let decoded = base64::engine::general_purpose::STANDARD_PAD_INDIFFERENT
        .decode(credentials.trim())
        .map_err(|_| "Proxy-Authorization: the Basic credentials are not base64".to_string())?;
    let decoded = String::from_utf8(decoded)
        .map_err(|_| "Proxy-Authorization: the Basic credentials are not UTF-8".to_string())?;
    let user = decoded.split_once(':').map_or(decoded.as_str(), |(u, _)| u);
    if user.is_empty() {
        return Err("Proxy-Authorization: the user name (the attempt token) is empty".into());
    }
    Ok(Some(user.to_string()))
}

/// An absolute-form request target (`GET http://host:port/path?q HTTP/1.1`, what clients send
/// to an HTTP proxy): `(scheme, host, port, path_and_query)` with the scheme lowercase (`http`
/// or `https` only), the host normalized (no brackets), the port defaulted from the scheme and
/// the path never empty (`/`). `None` for an origin-form target or another scheme.
pub fn absolute_form(uri: &Uri) -> Option<(String, String, u16, String)> {
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let host = normalize_host(uri.host()?).ok()?;
    let port = uri.port_u16().unwrap_or(default_port);
    let pq = uri.path_and_query().map_or("", |pq| pq.as_str());
    let path_and_query = if pq.starts_with('/') {
        pq.to_string()
    } else {
        format!("/{pq}")
    };
    Some((scheme, host, port, path_and_query))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn connect_authorities() {
        let ok = |s: &str| parse_connect_authority(s).unwrap();
        assert_eq!(
            ok("acme.my.salesforce.com:443"),
            ("acme.my.salesforce.com".into(), 443)
        );
        assert_eq!(
            ok("API.Example.COM.:8443"),
            ("api.example.com".into(), 8443)
        );
        assert_eq!(ok("127.0.0.1:443"), ("127.0.0.1".into(), 443));
        assert_eq!(ok("[::1]:443"), ("::1".into(), 443));
        assert_eq!(ok("[2001:DB8::1]:65535"), ("2001:db8::1".into(), 65535));
        for bad in [
            "",
            "example.com",
            "example.com:",
            ":443",
            "example.com:0",
            "example.com:65536",
            "example.com:+443",
            "example.com:44x",
            "::1:443",
            "[::1]",
            "[::1]443",
            "[::1:443",
            "[example.com]:443",
            "user@example.com:443",
            "exa mple.com:443",
            "example.com/path:443",
            "http://example.com:443",
        ] {
            let e = parse_connect_authority(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")), "{bad:?}: {e}");
        }
    }

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(PROXY_AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn proxy_credentials() {
        use base64::engine::general_purpose::STANDARD;
        let basic = |s: &str| format!("Basic {}", STANDARD.encode(s));
        assert_eq!(proxy_credentials_token(&HeaderMap::new()), Ok(None));
        // What curl sends for HTTPS_PROXY=http://tok123@127.0.0.1:7777.
        assert_eq!(
            proxy_credentials_token(&headers(&[&basic("tok123:")])),
            Ok(Some("tok123".into()))
        );
        assert_eq!(
            proxy_credentials_token(&headers(&[&basic("tok123:anything:else")])),
            Ok(Some("tok123".into()))
        );
        assert_eq!(
            proxy_credentials_token(&headers(&[&basic("tok123")])),
            Ok(Some("tok123".into()))
        );
        let unpadded = format!("basic  {}", STANDARD.encode("ab:").trim_end_matches('='));
        assert_eq!(
            proxy_credentials_token(&headers(&[&unpadded])),
            Ok(Some("ab".into()))
        );
        for bad in [
            headers(&["Bearer tok123"]),
            headers(&["Basic !!!"]),
            headers(&["Basic"]),
            headers(&[&basic(":password")]),
            headers(&[&format!("Basic {}", STANDARD.encode([0xff, 0xfe, b':']))]),
            headers(&[&basic("a:"), &basic("b:")]),
        ] {
            assert!(proxy_credentials_token(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn absolute_forms() {
        let f = |s: &str| absolute_form(&s.parse::<Uri>().unwrap());
        let t = |a: &str, b: &str, c: u16, d: &str| Some((a.into(), b.into(), c, d.into()));
        assert_eq!(
            f("http://Api.Example.com/v1/items?q=1"),
            t("http", "api.example.com", 80, "/v1/items?q=1")
        );
        assert_eq!(
            f("HTTPS://example.com:8443"),
            t("https", "example.com", 8443, "/")
        );
        assert_eq!(
            f("http://example.com?x=1"),
            t("http", "example.com", 80, "/?x=1")
        );
        assert_eq!(f("http://[::1]:7777/p"), t("http", "::1", 7777, "/p"));
        assert_eq!(
            f("http://user@example.com/p"),
            t("http", "example.com", 80, "/p")
        );
        assert_eq!(f("/origin/form?x"), None);
        assert_eq!(f("ftp://example.com/"), None);
        assert_eq!(f("example.com:443"), None);
    }
}
