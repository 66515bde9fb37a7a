//! Arbitrary bytes as the body of a Salesforce SOAP login (`POST /services/Soap/u/{v}`):
//! `profile::salesforce::soap::parse_login` (quick-xml, bounded depth and size) and, when it
//! reads a login, the XML of the answer. Never panics; an error is always a SOAP fault code.
#![no_main]

use libfuzzer_sys::fuzz_target;
use understudy::profile::salesforce::soap;

fuzz_target!(|data: &[u8]| {
    match soap::parse_login(data) {
        Ok(l) => {
            assert!(!l.username.is_empty() && !l.password.is_empty());
            let x = soap::login_response(&soap::LoginResult {
                server_url: "https://x.my.salesforce.com/services/Soap/u/59.0/00D",
                metadata_server_url: "https://x.my.salesforce.com/services/Soap/m/59.0/00D",
                session_id: "00D!x",
                user_id: "005",
                org_id: "00D",
                username: &l.username,
                valid_seconds: 7200,
            });
            // The answer is itself well-formed for the parser (no raw `<` from the input).
            assert!(!x.contains(&format!("<userName>{}<", l.username)) || !l.username.contains('<'));
        }
        Err(e) => assert!(matches!(e.exception_code, "INVALID_REQUEST" | "INVALID_LOGIN")),
    }
});
