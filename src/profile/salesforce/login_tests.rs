//! Tests of the Salesforce login's default answers (`super`).

use super::*;
use bytes::Bytes;
use hyper::http::HeaderMap;

fn req(method: &str, path: &str, ctype: &str, body: &str) -> Request {
    let mut h = HeaderMap::new();
    h.insert("content-type", ctype.parse().unwrap());
    h.insert("host", "127.0.0.1:7777".parse().unwrap());
    Request::new(
        method,
        path,
        None,
        h,
        Bytes::from(body.to_string()),
        "127.0.0.1:1".parse().unwrap(),
        std::time::Instant::now(),
    )
}

fn ctx(variant: Option<&str>) -> Ctx<'_> {
    Ctx {
        instance_url: "http://127.0.0.1:7777/~tok/crm".into(),
        secret: "00112233",
        attempt_id: "a1",
        integration: "crm",
        variant,
        now_ms: 1_700_000_000_000,
        calls: 1,
    }
}

const FORM: &str = "application/x-www-form-urlencoded";

#[test]
fn password_grant_answers_a_stable_synthetic_session() {
    let body = "grant_type=password&client_id=CK&client_secret=CS&username=ada%40example.com&password=pw%26TOKEN";
    let a = token(
        &ctx(None),
        &req("POST", "/~tok/crm/services/oauth2/token", FORM, body),
    );
    assert_eq!(a.response.status, 200);
    let b = a.response.body.clone().unwrap();
    assert_eq!(b["instance_url"], "http://127.0.0.1:7777/~tok/crm");
    assert_eq!(b["token_type"], "Bearer");
    let tok = b["access_token"].as_str().unwrap();
    assert!(tok.starts_with("00D") && tok.contains('!'), "{tok}");
    // Stable per attempt, different between attempts.
    let again = token(&ctx(None), &req("POST", "/x", FORM, body));
    assert_eq!(again.response.body.unwrap()["access_token"], tok);
    assert_eq!(tok, session_id("00112233", "a1", "crm"));
    assert_ne!(session_id("other", "a1", "crm"), tok);
    assert_ne!(session_id("00112233", "a1", "crm2"), tok);
    assert_eq!(session_claim(tok), Some(("a1".into(), "crm".into())));
    // The evidence: grant type, client id, user name; nothing secret.
    assert_eq!(
        a.arguments,
        json!({"grant_type": "password", "client_id": "CK", "username": "ada@example.com"})
    );
    let recorded = a.result.to_string();
    for secret in [tok, "CS", "pw", "TOKEN"] {
        assert!(
            !recorded.contains(secret) && !a.arguments.to_string().contains(secret),
            "{secret}"
        );
    }
    assert_eq!(a.result["data"]["access_token"], REDACTED);
}

#[test]
fn each_grant_checks_what_salesforce_requires() {
    let cases = [
        ("grant_type=password&username=u&password=p", 400, "invalid_client_id"),
        ("grant_type=password&client_id=c&username=u", 400, "invalid_grant"),
        ("grant_type=client_credentials&client_id=c", 400, "invalid_client"),
        ("grant_type=client_credentials&client_id=c&client_secret=s", 200, ""),
        ("grant_type=refresh_token&client_id=c&refresh_token=r", 200, ""),
        ("grant_type=refresh_token&client_id=c", 400, "invalid_grant"),
        ("grant_type=authorization_code&client_id=c&code=x&redirect_uri=https%3A%2F%2Fa%2Fcb&code_verifier=v", 200, ""),
        ("grant_type=authorization_code&client_id=c&redirect_uri=https%3A%2F%2Fa%2Fcb", 400, "invalid_grant"),
        ("grant_type=implicit", 400, "unsupported_grant_type"),
        ("", 400, "unsupported_grant_type"),
        ("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=nope", 400, "invalid_grant"),
    ];
    for (body, status, error) in cases {
        let a = token(&ctx(None), &req("POST", "/t", FORM, body));
        assert_eq!(a.response.status, status, "{body}");
        if status != 200 {
            assert_eq!(a.response.body.unwrap()["error"], error, "{body}");
            assert!(a.input_error, "{body}");
        }
    }
    let mut r = req("POST", "/t", FORM, "grant_type=client_credentials");
    r.headers
        .insert("authorization", "Basic Q0s6Q1M=".parse().unwrap());
    let a = token(&ctx(None), &r);
    assert_eq!(a.response.status, 200);
    assert_eq!(
        a.arguments,
        json!({"grant_type": "client_credentials", "client_id": "CK"})
    );
    let a = token(&ctx(None), &req("POST", "/t", FORM, cases[6].0));
    assert_eq!(a.arguments["pkce"], true);
    assert_eq!(a.arguments["redirect_uri"], "https://a/cb");
    assert!(a.response.body.unwrap()["refresh_token"].is_string());
}

#[test]
fn jwt_claims_are_recorded_and_the_assertion_is_not() {
    let enc = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let jwt = format!(
        "{}.{}.c2lnbmF0dXJl",
        enc(&json!({"alg": "RS256"})),
        enc(
            &json!({"iss": "CK", "sub": "ada@example.com", "aud": "https://login.salesforce.com", "exp": 1, "extra": "x"})
        )
    );
    let body = format!(
        "grant_type={}&assertion={jwt}",
        JWT_BEARER.replace(':', "%3A")
    );
    let a = token(&ctx(None), &req("POST", "/t", FORM, &body));
    assert_eq!(a.response.status, 200);
    assert_eq!(a.arguments["client_id"], "CK");
    assert_eq!(a.arguments["username"], "ada@example.com");
    assert_eq!(
        a.arguments["claims"],
        json!({"iss": "CK", "sub": "ada@example.com", "aud": "https://login.salesforce.com", "exp": 1})
    );
    assert!(!a.arguments.to_string().contains("c2lnbmF0dXJl"));
    let no_sub = format!(
        "{}.{}.x",
        enc(&json!({})),
        enc(&json!({"iss": "CK", "aud": "a"}))
    );
    let body = format!("grant_type={}&assertion={no_sub}", JWT_BEARER);
    let a = token(&ctx(None), &req("POST", "/t", FORM, &body));
    assert_eq!(a.response.status, 400);
    assert!(a.response.body.unwrap()["error_description"]
        .as_str()
        .unwrap()
        .contains("`sub`"));
}

#[test]
fn the_invalid_grant_variant_fails_the_login_as_salesforce_does() {
    let body = "grant_type=password&client_id=CK&username=u&password=wrong";
    let a = token(&ctx(Some("invalid_grant")), &req("POST", "/t", FORM, body));
    assert_eq!(a.response.status, 400);
    assert_eq!(
        a.response.body.unwrap(),
        json!({"error": "invalid_grant", "error_description": "authentication failure"})
    );
    assert!(!a.input_error);
    let soap_body = "<Envelope><Body><login><username>u</username><password>p</password></login></Body></Envelope>";
    let a = soap_login(
        &ctx(Some("invalid_grant")),
        &req("POST", "/s", "text/xml", soap_body),
        "59.0",
    );
    assert_eq!(a.response.status, 500);
    assert!(a
        .response
        .body
        .unwrap()
        .as_str()
        .unwrap()
        .contains("<sf:exceptionCode>INVALID_LOGIN</sf:exceptionCode>"));
    let a = token(&ctx(Some("nope")), &req("POST", "/t", FORM, body));
    assert_eq!(
        a.harness.unwrap().code,
        crate::error::HarnessCode::UnknownVariant
    );
}

#[test]
fn soap_login_answers_a_server_url_back_to_understudy() {
    let soap_body = "<Envelope><Body><login><username>ada@example.com</username><password>pwTOKEN</password></login></Body></Envelope>";
    let mut c = ctx(None);
    c.instance_url = "https://healthplus.my.salesforce.com".into();
    let a = soap_login(
        &c,
        &req("POST", "/services/Soap/u/59.0", "text/xml", soap_body),
        "59.0",
    );
    assert_eq!(a.response.status, 200);
    let x = a.response.body.unwrap();
    let x = x.as_str().unwrap();
    assert!(
        x.contains("<serverUrl>https://healthplus.my.salesforce.com/services/Soap/u/59.0/00D"),
        "{x}"
    );
    assert!(x.contains(&session_id("00112233", "a1", "crm")));
    assert_eq!(
        a.arguments,
        json!({"grant_type": "password", "via": "soap", "username": "ada@example.com"})
    );
    let recorded = a.result.to_string();
    assert!(
        !recorded.contains(&session_id("00112233", "a1", "crm")) && !recorded.contains("pwTOKEN")
    );
    let bad = soap_login(&c, &req("POST", "/s", "text/xml", "<nope"), "59.0");
    assert_eq!(bad.response.status, 500);
    assert!(bad.input_error);
}

#[test]
fn instance_url_of_a_base_url_call() {
    let r = req("POST", "/~abc/crm/services/oauth2/token", FORM, "");
    assert_eq!(instance_url(&r, 1, None), "http://127.0.0.1:7777/~abc/crm");
    let r = req("POST", "/crm/services/oauth2/token", FORM, "");
    assert_eq!(
        instance_url(&r, 0, Some("https://x")),
        "http://127.0.0.1:7777/crm"
    );
}

#[test]
fn revoke_and_userinfo() {
    let a = revoke(&ctx(None), &req("POST", "/r", FORM, "token=abc"));
    assert_eq!(a.response.status, 200);
    assert!(!a.arguments.to_string().contains("abc"));
    assert_eq!(
        revoke(&ctx(None), &req("POST", "/r", FORM, ""))
            .response
            .status,
        400
    );
    let mut r = req("GET", "/u", FORM, "");
    assert_eq!(userinfo(&ctx(None), &r).response.status, 403);
    r.headers
        .insert("authorization", "Bearer 00Dxx!yy".parse().unwrap());
    let a = userinfo(&ctx(None), &r);
    assert_eq!(
        a.response.body.unwrap()["organization_id"],
        identity("00112233").org_id
    );
}

#[test]
fn the_login_family_is_told_from_the_rest() {
    for (m, p) in [
        ("POST", "/services/oauth2/token"),
        ("post", "/services/oauth2/token/"),
        ("POST", "/services/oauth2/revoke"),
        ("GET", "/services/oauth2/userinfo"),
        ("POST", "/services/Soap/u/59.0"),
        ("POST", "/services/Soap/u/59.0?x=1"),
    ] {
        assert!(is_login_exchange(m, p), "{m} {p}");
    }
    for (m, p) in [
        ("GET", "/services/oauth2/token"),
        ("POST", "/services/Soap/c/59.0"),
        ("POST", "/services/data/v59.0/sobjects/Account"),
        ("GET", "/services/data/v59.0/query"),
        ("POST", "/services/oauth2/token/extra"),
    ] {
        assert!(!is_login_exchange(m, p), "{m} {p}");
    }
}

#[test]
fn only_the_shape_of_a_session_is_claimed_and_only_a_bearer_is_read() {
    for junk in [
        "",
        "00D!",
        "00Dxx!nothex.mac",
        "00Dxx!6131.mac",
        "00Dxx!0063726d.mac",
        "00Dxx!613100.mac",
    ] {
        assert_eq!(session_claim(junk), None, "{junk}");
    }
    let with = |v: &str| {
        let mut r = req("GET", "/services/data", FORM, "");
        r.headers.insert("authorization", v.parse().unwrap());
        r
    };
    assert_eq!(bearer(&with("Bearer 00D!x")), Some("00D!x"));
    assert_eq!(bearer(&with("OAuth 00D!x")), Some("00D!x"));
    assert_eq!(bearer(&with("Basic 00D!x")), None);
    assert_eq!(bearer(&with("Bearer ")), None);
    assert_eq!(bearer(&req("GET", "/", FORM, "")), None);
}
