//! The Salesforce login as built-in operations with default answers
//! (docs/src/guides/salesforce.md#login): the OAuth 2.0 token endpoint
//! (`POST /services/oauth2/token`, grants `password`, `client_credentials`, `refresh_token`,
//! `authorization_code` with or without PKCE, and the JWT bearer grant), the partner API's
//! SOAP `login` (`POST /services/Soap/u/{version}`), `GET /services/oauth2/userinfo` and
//! `POST /services/oauth2/revoke`.
//!
//! In replay the answer carries a synthetic session id that is stable per attempt and
//! integration (shaped like a real one, `00D…!…`: it names the attempt and the integration and
//! carries a MAC under the attempt's own secret, [`session_id`]) and an instance URL that
//! brings the client back to understudy ([`instance_url`]). A call whose path names no
//! integration but whose bearer is such a session is routed by it (`crate::proxy::route`). No credential is checked — there
//! is nothing to check it against — but a request that lacks what Salesforce requires gets
//! Salesforce's own error, and the variant `invalid_grant` (the attempt's variant of the
//! login operation) answers every login as a wrong password does (`invalid_grant` /
//! `INVALID_LOGIN`), so an agent's handling of a failed login can be tested. The JWT
//! assertion's signature is not verified; its claims `iss`, `sub`, `aud` and `exp` are
//! recorded.
//!
//! What the evidence records of a login ([`Answer::arguments`]) is the grant type, the
//! client id, the user name, the redirect URI, whether PKCE was used and the JWT claims —
//! never a password, client secret, assertion, code, code verifier or token; the recorded
//! result has every token replaced by [`REDACTED`].

use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::soap;
use crate::contract::template::parse_query;
use crate::http::{NativeResponse, Request};
use crate::util::scrub::hmac_sha256;

/// What a synthetic token is recorded as (the token itself never reaches the evidence).
pub const REDACTED: &str = "[redacted]";
/// The JWT bearer grant's `grant_type`.
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// The variant of a login operation that fails every login as a wrong password does.
pub const VARIANT_INVALID_GRANT: &str = "invalid_grant";
/// How long a synthetic session is said to be valid (seconds).
const SESSION_SECONDS: u64 = 7200;

/// What a default answer needs to know of its call.
#[derive(Debug, Clone)]
pub struct Ctx<'a> {
    /// Where the client's next calls must go: `scheme://host[:port][/base]`, no trailing `/`.
    pub instance_url: String,
    /// The attempt's secret (hex): every synthetic id and token derives from it.
    pub secret: &'a str,
    /// The attempt's id and the integration's name: what the session id names.
    pub attempt_id: &'a str,
    pub integration: &'a str,
    /// The attempt's variant of this operation, if any.
    pub variant: Option<&'a str>,
    /// Milliseconds since the epoch (the token's `issued_at`).
    pub now_ms: i64,
    /// Calls the attempt has made so far, this one included (`Sforce-Limit-Info`, `/limits`).
    pub calls: u64,
}

/// A default answer: the response the client gets, what the evidence records as the call's
/// arguments and result, and whether it is an input error (the agent's mistake).
#[derive(Debug, Clone)]
pub struct Answer {
    pub response: NativeResponse,
    pub arguments: Value,
    pub result: Value,
    pub input_error: bool,
    /// The test setup is broken (a variant this built-in does not have): the call is this
    /// harness error instead (`response` is unused).
    pub harness: Option<crate::error::HarnessError>,
}

impl Answer {
    /// An answer recorded as it was sent.
    pub fn plain(response: NativeResponse, arguments: Value) -> Answer {
        Answer {
            result: response.to_envelope(),
            response,
            arguments,
            input_error: false,
            harness: None,
        }
    }

    /// The harness error `unknown_variant`: the attempt selected variant `v` of a built-in
    /// operation that has no such variant.
    pub fn unknown_variant(operation_id: &str, v: &str, expected: &str) -> Answer {
        let e = crate::error::HarnessError::new(
            crate::error::HarnessCode::UnknownVariant,
            format!(
                "the built-in operation `{operation_id}` has no variant `{v}`: expected {expected}"
            ),
        );
        let mut a = Answer::plain(crate::profile::harness_response(&e), json!({}));
        a.harness = Some(e);
        a
    }
}

/// The attempt's synthetic identity: org id and user id.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub org_id: String,
    pub user_id: String,
}

/// The synthetic identity of the attempt whose secret is `secret` (the same for every call
/// of that attempt, different between attempts).
pub fn identity(secret: &str) -> Identity {
    let key = secret.as_bytes();
    let part = |label: &str| -> [u8; 12] {
        let h = hmac_sha256(key, label.as_bytes());
        let mut b = [0u8; 12];
        b.copy_from_slice(&h[..12]);
        b
    };
    let org_id = super::record_id("00D", &part("salesforce org"));
    let user_id = super::record_id("005", &part("salesforce user"));
    Identity { org_id, user_id }
}

/// The synthetic session id of `integration` in the attempt `attempt_id` whose secret is
/// `secret`: `<org id, 15 characters>!<hex of "attempt id NUL integration">.<MAC>`, the MAC
/// being HMAC-SHA256 under the secret of what precedes it, so only the server that holds the
/// secret can make one, and [`session_claim`] reads whose it is without a table.
pub fn session_id(secret: &str, attempt_id: &str, integration: &str) -> String {
    let org_id = identity(secret).org_id;
    let payload = crate::util::ids::hex(format!("{attempt_id}\0{integration}").as_bytes());
    let mut s = format!("{}!{payload}.", &org_id[..15]);
    for label in ["salesforce session 1", "salesforce session 2"] {
        let mut msg = label.as_bytes().to_vec();
        msg.push(0);
        msg.extend_from_slice(s.as_bytes());
        for b in hmac_sha256(secret.as_bytes(), &msg) {
            s.push(BASE64ISH[(b as usize) % BASE64ISH.len()] as char);
        }
    }
    s
}

/// Whose session `bearer` says it is, (attempt id, integration), read from its shape
/// alone: `None` when it is not shaped like a [`session_id`]. The claim proves nothing
/// until [`session_id`] of the claimed attempt's secret equals `bearer`.
pub fn session_claim(bearer: &str) -> Option<(String, String)> {
    let (_, rest) = bearer.split_once('!')?;
    let (payload, _) = rest.split_once('.')?;
    let text = String::from_utf8(crate::util::ids::unhex(payload)?).ok()?;
    let (attempt, integration) = text.split_once('\0')?;
    (!attempt.is_empty() && !integration.is_empty())
        .then(|| (attempt.to_string(), integration.to_string()))
}

/// The bearer of `Authorization: Bearer <token>` (or `OAuth <token>`, the older spelling
/// Salesforce also takes), if the request carries exactly one such header.
pub fn bearer(req: &Request) -> Option<&str> {
    if req.header_count("authorization") != 1 {
        return None;
    }
    let (scheme, token) = req.header("authorization")?.trim().split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("oauth"))
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Whether `method path` (the path after the integration, as sent) is one of the login
/// family — the OAuth token endpoint, the SOAP `login`, `userinfo` and `revoke` — whose
/// answers name a real session: its token, its instance URL, its user. Record mode does not
/// draft them; in replay the built-in operations answer them with the attempt's synthetic
/// session ([`identity`], [`instance_url`]).
pub fn is_login_exchange(method: &str, path: &str) -> bool {
    let segs: Vec<&str> = path
        .split('?')
        .next()
        .unwrap_or("")
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let post = method.eq_ignore_ascii_case("POST");
    match segs.as_slice() {
        ["services", "oauth2", "token" | "revoke"] => post,
        ["services", "oauth2", "userinfo"] => true,
        ["services", "Soap", "u", _] => post,
        _ => false,
    }
}

/// The characters of a session id's secret part.
const BASE64ISH: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._";

/// The instance URL a login answers: in forward-proxy mode the real host the client asked
/// (the integration's `upstream` when it has one, else the host of the request), which the
/// proxy intercepts again; in base-URL mode the attempt's base URL itself
/// (`http://<host>/~<token>/<integration>` or `http://<host>/<integration>`), read from the
/// request's `Host` and the path segments that named the attempt and the integration.
pub fn instance_url(req: &Request, consumed: usize, upstream: Option<&str>) -> String {
    if let Some(v) = &req.via_proxy {
        if let Some(u) = upstream {
            return u.trim_end_matches('/').to_string();
        }
        let default_port = if v.scheme == "https" { 443 } else { 80 };
        let host = if v.host.contains(':') {
            format!("[{}]", v.host)
        } else {
            v.host.clone()
        };
        return if v.port == default_port {
            format!("{}://{host}", v.scheme)
        } else {
            format!("{}://{host}:{}", v.scheme, v.port)
        };
    }
    let host = req
        .header("host")
        .map(str::to_string)
        .or_else(|| {
            req.headers
                .get(":authority")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "localhost".to_string());
    let scheme = match req.header("x-forwarded-proto") {
        Some(p) if p.eq_ignore_ascii_case("https") => "https",
        _ => "http",
    };
    let base: Vec<&str> = req
        .path
        .split('/')
        .filter(|s| !s.is_empty())
        .take(consumed + 1)
        .collect();
    format!("{scheme}://{host}/{}", base.join("/"))
}

fn json_answer(status: u16, body: Value) -> NativeResponse {
    NativeResponse {
        status,
        headers: Vec::new(),
        body: Some(body),
    }
}

/// An OAuth error answer (`{"error","error_description"}`).
fn oauth_error(
    status: u16,
    error: &str,
    description: &str,
    arguments: Value,
    input: bool,
) -> Answer {
    let mut a = Answer::plain(
        json_answer(
            status,
            json!({"error": error, "error_description": description}),
        ),
        arguments,
    );
    a.input_error = input;
    a
}

/// The form fields of a token or revoke request (`application/x-www-form-urlencoded`, read
/// once at the edge by `crate::http::form`; a JSON object is accepted too, as some clients
/// send one), plus the query string's (some clients put them there), or why they cannot be
/// read. A field sent twice counts by its first value.
fn form(req: &Request) -> Result<Vec<(String, String)>, String> {
    let body = req.json().map_err(|e| e.to_string())?;
    let mut fields: Vec<(String, String)> = body
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| {
                    let v = match v {
                        Value::Array(a) => a.first()?,
                        v => v,
                    };
                    Some((k.clone(), v.as_str()?.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    fields.extend(req.query.iter().cloned());
    Ok(fields)
}

/// `client_id` and `client_secret` of an `Authorization: Basic` header (each
/// form-urlencoded, RFC 6749 2.3.1), or nothing.
fn basic_client(req: &Request) -> Vec<(String, String)> {
    let Some(b64) = req.header("authorization").and_then(|a| {
        a.strip_prefix("Basic ")
            .or_else(|| a.strip_prefix("basic "))
    }) else {
        return Vec::new();
    };
    let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(b64.trim()) else {
        return Vec::new();
    };
    let Ok(text) = String::from_utf8(raw) else {
        return Vec::new();
    };
    let Some((id, secret)) = text.split_once(':') else {
        return Vec::new();
    };
    let decode = |s: &str| {
        parse_query(&format!("v={s}"))
            .pop()
            .map(|(_, v)| v)
            .unwrap_or_default()
    };
    vec![
        ("client_id".to_string(), decode(id)),
        ("client_secret".to_string(), decode(secret)),
    ]
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// Per grant: the form fields it requires (all of each group), and Salesforce's error
/// (`error`, `error_description`) when one is missing — checked in this order.
type Requirement = (&'static [&'static str], &'static str, &'static str);
const GRANT_REQUIRES: &[(&str, &[Requirement])] = &[
    (
        "password",
        &[
            (
                &["client_id"],
                "invalid_client_id",
                "client identifier invalid",
            ),
            (
                &["username", "password"],
                "invalid_grant",
                "authentication failure",
            ),
        ],
    ),
    (
        "client_credentials",
        &[(
            &["client_id", "client_secret"],
            "invalid_client",
            "invalid client credentials",
        )],
    ),
    (
        "refresh_token",
        &[
            (
                &["client_id"],
                "invalid_client_id",
                "client identifier invalid",
            ),
            (
                &["refresh_token"],
                "invalid_grant",
                "expired access/refresh token",
            ),
        ],
    ),
    (
        "authorization_code",
        &[
            (
                &["client_id"],
                "invalid_client_id",
                "client identifier invalid",
            ),
            (&["code"], "invalid_grant", "invalid authorization code"),
            (
                &["redirect_uri"],
                "redirect_uri_mismatch",
                "redirect_uri must match configuration",
            ),
        ],
    ),
];

/// `POST /services/oauth2/token`.
pub fn token(ctx: &Ctx<'_>, req: &Request) -> Answer {
    let mut fields = match form(req) {
        Ok(f) => f,
        Err(m) => return oauth_error(400, "invalid_request", &m, json!({}), true),
    };
    // Client authentication by HTTP Basic (RFC 6749 2.3.1), as simple-salesforce sends
    // the client credentials grant: the id and secret count as the form's.
    fields.extend(basic_client(req));
    let grant = field(&fields, "grant_type").unwrap_or_default().to_string();
    let mut args = Map::new();
    args.insert("grant_type".into(), json!(grant));
    if let Some(c) = field(&fields, "client_id") {
        args.insert("client_id".into(), json!(c));
    }
    match grant.as_str() {
        "password" => {
            if let Some(u) = field(&fields, "username") {
                args.insert("username".into(), json!(u));
            }
        }
        "authorization_code" => {
            if let Some(r) = field(&fields, "redirect_uri") {
                args.insert("redirect_uri".into(), json!(r));
            }
            args.insert(
                "pkce".into(),
                json!(field(&fields, "code_verifier").is_some()),
            );
        }
        JWT_BEARER => {
            let claims = field(&fields, "assertion").map(jwt_claims);
            match claims {
                Some(Ok(c)) => {
                    if let Some(iss) = c.get("iss").and_then(Value::as_str) {
                        args.insert("client_id".into(), json!(iss));
                    }
                    if let Some(sub) = c.get("sub").and_then(Value::as_str) {
                        args.insert("username".into(), json!(sub));
                    }
                    let missing = ["iss", "sub", "aud"]
                        .into_iter()
                        .find(|k| !c.get(*k).is_some_and(Value::is_string));
                    args.insert("claims".into(), Value::Object(c));
                    if let Some(k) = missing {
                        return oauth_error(
                            400,
                            "invalid_grant",
                            &format!("invalid assertion: the `{k}` claim is missing"),
                            Value::Object(args),
                            true,
                        );
                    }
                }
                Some(Err(m)) => {
                    return oauth_error(
                        400,
                        "invalid_grant",
                        &format!("invalid assertion: {m}"),
                        Value::Object(args),
                        true,
                    )
                }
                None => {
                    return oauth_error(
                        400,
                        "invalid_grant",
                        "invalid assertion: no `assertion`",
                        Value::Object(args),
                        true,
                    )
                }
            }
        }
        "client_credentials" | "refresh_token" => {}
        _ => {
            return oauth_error(
                400,
                "unsupported_grant_type",
                "grant type not supported",
                Value::Object(args),
                true,
            )
        }
    }
    // What the grant requires, in the order Salesforce checks it: the first requirement a
    // request misses is its error.
    let required = GRANT_REQUIRES
        .iter()
        .find(|(g, _)| *g == grant)
        .map_or(&[][..], |(_, r)| *r);
    for (names, error, description) in required {
        if names.iter().any(|n| field(&fields, n).is_none()) {
            return oauth_error(400, error, description, Value::Object(args), true);
        }
    }
    let refresh_issued = grant == "authorization_code";
    let args = Value::Object(args);
    if ctx.variant == Some(VARIANT_INVALID_GRANT) {
        return oauth_error(400, "invalid_grant", "authentication failure", args, false);
    }
    if let Some(v) = ctx.variant {
        let mut a = Answer::unknown_variant("oauth_token", v, LOGIN_VARIANTS);
        a.arguments = args;
        return a;
    }
    let id = identity(ctx.secret);
    let body = |token: &str, refresh: &str, signature: &str| {
        let mut b = json!({
            "access_token": token,
            "instance_url": ctx.instance_url,
            "id": format!("{}/id/{}/{}", ctx.instance_url, id.org_id, id.user_id),
            "token_type": "Bearer",
            "issued_at": ctx.now_ms.to_string(),
            "signature": signature,
            "scope": "api refresh_token",
        });
        if refresh_issued {
            b["refresh_token"] = json!(refresh);
        }
        b
    };
    let refresh = {
        let h = hmac_sha256(ctx.secret.as_bytes(), b"salesforce refresh token");
        let mut s = String::from("5Aep");
        for b in h {
            s.push(BASE64ISH[(b as usize) % 62] as char);
        }
        s
    };
    let signature = base64::engine::general_purpose::STANDARD.encode(hmac_sha256(
        ctx.secret.as_bytes(),
        format!("{}{}", id.user_id, ctx.now_ms).as_bytes(),
    ));
    let response = json_answer(
        200,
        body(
            &session_id(ctx.secret, ctx.attempt_id, ctx.integration),
            &refresh,
            &signature,
        ),
    );
    let result = json!({"status": 200, "data": body(REDACTED, REDACTED, REDACTED)});
    Answer {
        response,
        arguments: args,
        result,
        input_error: false,
        harness: None,
    }
}

/// The variants of a built-in login operation.
const LOGIN_VARIANTS: &str = "`invalid_grant` or `request_limit_exceeded`";

/// The claims of a JWT (its payload, base64url JSON); the signature is not verified.
fn jwt_claims(assertion: &str) -> Result<Map<String, Value>, String> {
    // The JWT compact form: header, payload and signature, separated by dots.
    let parts: Vec<&str> = assertion.splitn(4, '.').collect();
    if parts.len() != 3 {
        return Err("expected a JWT (three base64url parts separated by `.`)".into());
    }
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(parts[1].trim_end_matches('='))
        .map_err(|_| "the JWT payload is not base64url".to_string())?;
    let v: Value =
        serde_json::from_slice(&payload).map_err(|_| "the JWT payload is not JSON".to_string())?;
    let Value::Object(o) = v else {
        return Err("the JWT payload is not a JSON object".into());
    };
    Ok(o.into_iter()
        .filter(|(k, _)| matches!(k.as_str(), "iss" | "sub" | "aud" | "exp"))
        .collect())
}

/// A SOAP answer: text/xml with the given status.
fn xml(status: u16, text: String) -> NativeResponse {
    NativeResponse {
        status,
        headers: vec![("Content-Type".into(), "text/xml; charset=utf-8".into())],
        body: Some(Value::String(text)),
    }
}

/// `POST /services/Soap/u/{version}` with `SOAPAction: login`.
pub fn soap_login(ctx: &Ctx<'_>, req: &Request, version: &str) -> Answer {
    let mut args = Map::new();
    args.insert("grant_type".into(), json!("password"));
    args.insert("via".into(), json!("soap"));
    let login = match soap::parse_login(&req.body) {
        Ok(l) => l,
        Err(e) => {
            let mut a = Answer::plain(
                xml(500, soap::fault(e.exception_code, &e.message)),
                Value::Object(args),
            );
            a.input_error = e.exception_code == "INVALID_REQUEST";
            return a;
        }
    };
    args.insert("username".into(), json!(login.username));
    let args = Value::Object(args);
    if ctx.variant == Some(VARIANT_INVALID_GRANT) {
        let m = "INVALID_LOGIN: Invalid username, password, security token; or user locked out.";
        return Answer::plain(xml(500, soap::fault("INVALID_LOGIN", m)), args);
    }
    if let Some(v) = ctx.variant {
        let mut a = Answer::unknown_variant("soap_login", v, LOGIN_VARIANTS);
        a.arguments = args;
        return a;
    }
    let id = identity(ctx.secret);
    let version = version.trim_start_matches(['v', 'V']);
    let server_url = format!(
        "{}/services/Soap/u/{version}/{}",
        ctx.instance_url,
        &id.org_id[..15]
    );
    let meta_url = format!(
        "{}/services/Soap/m/{version}/{}",
        ctx.instance_url,
        &id.org_id[..15]
    );
    let text = |session: &str| {
        soap::login_response(&soap::LoginResult {
            server_url: &server_url,
            metadata_server_url: &meta_url,
            session_id: session,
            user_id: &id.user_id,
            org_id: &id.org_id,
            username: &login.username,
            valid_seconds: SESSION_SECONDS,
        })
    };
    let response = xml(
        200,
        text(&session_id(ctx.secret, ctx.attempt_id, ctx.integration)),
    );
    let result = xml(200, text(REDACTED)).to_envelope();
    Answer {
        response,
        arguments: args,
        result,
        input_error: false,
        harness: None,
    }
}

/// `GET /services/oauth2/userinfo`.
pub fn userinfo(ctx: &Ctx<'_>, req: &Request) -> Answer {
    if req.header("authorization").is_none_or(|a| a.len() <= 7) {
        return Answer::plain(
            json_answer(
                403,
                json!({"error": "forbidden", "error_description": "Bad_OAuth_Token"}),
            ),
            json!({}),
        );
    }
    let id = identity(ctx.secret);
    Answer::plain(
        json_answer(
            200,
            json!({
                "sub": format!("{}/id/{}/{}", ctx.instance_url, id.org_id, id.user_id),
                "user_id": id.user_id,
                "organization_id": id.org_id,
                "preferred_username": "agent@example.com",
                "name": "Agent User",
                "email": "agent@example.com",
                "email_verified": true,
                "user_type": "STANDARD",
                "active": true,
                "urls": {
                    "rest": format!("{}/services/data/v{{version}}/", ctx.instance_url),
                    "sobjects": format!("{}/services/data/v{{version}}/sobjects/", ctx.instance_url),
                    "query": format!("{}/services/data/v{{version}}/query/", ctx.instance_url),
                },
            }),
        ),
        json!({}),
    )
}

/// `POST /services/oauth2/revoke` (`token=`): 200 with no body.
pub fn revoke(_ctx: &Ctx<'_>, req: &Request) -> Answer {
    let has_token = match form(req) {
        Ok(f) => field(&f, "token").is_some(),
        Err(_) => false,
    };
    if !has_token {
        let mut a = Answer::plain(
            json_answer(
                400,
                json!({"error": "unsupported_token_type", "error_description": "this token type is not supported"}),
            ),
            json!({}),
        );
        a.input_error = true;
        return a;
    }
    Answer::plain(
        NativeResponse {
            status: 200,
            headers: Vec::new(),
            body: None,
        },
        json!({}),
    )
}

#[cfg(test)]
#[path = "login_tests.rs"]
mod tests;
