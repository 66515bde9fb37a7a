use super::*;
use serde_json::json;

fn sc() -> Scrubber {
    Scrubber::new([7u8; 32])
}

#[test]
fn hmac_matches_rfc_4231_case_2() {
    let h = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
    let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex,
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[test]
fn equal_secrets_stay_equal_and_marks_are_stable() {
    let s = sc();
    let a = s.mark("hunter2-password");
    assert!(is_mark(&a), "{a}");
    assert_eq!(a, s.mark("hunter2-password"));
    assert_ne!(a, s.mark("other"));
    assert_ne!(a, Scrubber::new([8u8; 32]).mark("hunter2-password"));
    assert_eq!(s.text(&a), None);
}

#[test]
fn names_at_any_depth() {
    let s = sc();
    let mut v = json!({"a": {"b": [{"Client_Secret": "cs-1234567890"}]}, "sessionId": 5, "password": null, "x": "ok"});
    assert!(s.json(&mut v));
    let t = v.to_string();
    assert!(!t.contains("cs-1234567890"), "{t}");
    assert!(v["password"].is_null());
    assert_eq!(v["x"], "ok");
    assert!(is_mark(v["sessionId"].as_str().unwrap()));
}

#[test]
fn shapes_inside_strings() {
    let s = sc();
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl";
    let sf = "00D5g000004ABCD!AQ0AQHXvZx9.Lq_Tu1rV2";
    let pem = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----";
    let tok = format!("ust_{}", "ab".repeat(32));
    for raw in [
        "header Bearer sk-live-0123456789 end".to_string(),
        "Basic dXNlcjpwYXNzd29yZA== x".to_string(),
        format!("token is {jwt}."),
        format!("sid {sf} here"),
        format!("key {pem} done"),
        format!("/~{tok}/crm"),
        "grant_type=password&username=u&password=Sup3r%21secret&client_secret=cs99999999".into(),
        "https://x/a?access_token=at-123456789&b=1".into(),
        "<soapenv:Body><urn:login><urn:password>SoapPass99</urn:password></urn:login>".into(),
        r#"body was {"password": "quoted-secret-1"} and more"#.into(),
    ] {
        let out = s
            .text(&raw)
            .unwrap_or_else(|| panic!("nothing scrubbed in {raw}"));
        for secret in [
            "sk-live-0123456789",
            "dXNlcjpwYXNzd29yZA==",
            jwt,
            sf,
            "MIIB",
            &tok,
            "Sup3r",
            "cs99999999",
            "at-123456789",
            "SoapPass99",
            "quoted-secret-1",
        ] {
            assert!(!out.contains(secret), "{secret} left in {out}");
        }
        assert!(out.contains(MARK_PREFIX), "{out}");
    }
    assert_eq!(s.text("Bearer authentication is used"), None);
    assert_eq!(s.text("a plain message with a=b"), None);
}

#[test]
fn learned_and_configured_values_are_cut_everywhere() {
    let s = sc();
    s.add_credentials(["upstream-cred-XYZ"]);
    let mut v =
        json!({"token": "learned-secret-1", "note": "echo learned-secret-1 and upstream-cred-XYZ"});
    s.json(&mut v);
    let t = v.to_string();
    assert!(
        !t.contains("learned-secret-1") && !t.contains("upstream-cred-XYZ"),
        "{t}"
    );
    // The same secret under the name and inside the note: one mark.
    let m = v["token"].as_str().unwrap().to_string();
    assert!(v["note"].as_str().unwrap().contains(&m));
}

#[test]
fn json_text_and_headers() {
    let s = sc();
    let out = s
        .text(r#"{"refresh_token":"rt-1234567890","n":1}"#)
        .unwrap();
    assert!(!out.contains("rt-1234567890"));
    assert!(s
        .header("Authorization", "Bearer abcdefgh12")
        .starts_with("Bearer [redacted:"));
    assert!(is_mark(&s.header("X-Custom-Token", "zzz")));
    assert_eq!(s.header("Accept", "application/json"), "application/json");
    s.add_names([&"ssn".to_string()]);
    assert!(s.is_secret_name("SSN"));
}

#[test]
fn multipart_parts_by_name() {
    let s = sc();
    let body = "--XyZ\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\nada\r\n--XyZ\r\nContent-Disposition: form-data; name=\"password\"\r\n\r\nMultiPass-1\r\n--XyZ\r\nContent-Disposition: form-data; name=\"api_key\"; filename=\"k.txt\"\r\nContent-Type: text/plain\r\n\r\nkey-file-body\n--XyZ--\r\n";
    let t = s.text(body).unwrap();
    assert!(
        !t.contains("MultiPass-1") && !t.contains("key-file-body"),
        "{t}"
    );
    assert!(t.contains(&s.mark("MultiPass-1")), "{t}");
    assert!(t.contains("\r\n\r\nada\r\n--XyZ"), "{t}");
    assert!(t.ends_with("--XyZ--\r\n"), "{t}");
    // A part with an innocent name is kept.
    assert_eq!(
        s.text("Content-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\n--b--"),
        None
    );
}

#[test]
fn a_value_at_a_secret_path_goes_whole() {
    let s = sc();
    let mut v = json!("short1");
    assert!(s.json_at(["", "data", "token"], &mut v));
    assert_eq!(v, json!(s.mark("short1")));
    let mut v = json!({"n": 5});
    assert!(s.json_at(["data", "Password", "x"], &mut v));
    assert!(is_mark(v.as_str().unwrap()));
    let mut v = json!("short1");
    assert!(!s.json_at(["data", "name"], &mut v));
    assert_eq!(v, json!("short1"));
}

#[test]
fn userinfo_and_the_key_file() {
    assert_eq!(
        url_without_userinfo("https://ada:pw@api.test:8443/v1?x=1"),
        "https://[redacted]@api.test:8443/v1?x=1"
    );
    assert_eq!(url_without_userinfo("http://h/a@b"), "http://h/a@b");
    let d = tempfile::tempdir().unwrap();
    assert_eq!(read_key(d.path()), None);
    std::fs::write(d.path().join("scrub.key"), format!("{}\n", "0a".repeat(32))).unwrap();
    assert_eq!(read_key(d.path()), Some([10u8; 32]));
    std::fs::write(d.path().join("scrub.key"), "zz").unwrap();
    assert_eq!(read_key(d.path()), None);
}
