//! The SOAP side of the Salesforce login (docs/src/guides/salesforce.md#login): the partner
//! API's `login` request read with a pull parser (quick-xml, no DOM), bounded in size and
//! element depth like a JSON body, and the XML of the `loginResponse` and of a SOAP fault.
//!
//! Only what a login needs is read: the `username` and `password` children of the `login`
//! element of the envelope's `Body` (namespace prefixes are ignored, as Salesforce does).
//! Anything else — not XML, too deep, too large, no `login`, an empty user name — is a
//! [`SoapError`] that the caller answers as a SOAP fault (HTTP 500), never a panic.

use quick_xml::escape::{escape, resolve_predefined_entity};
use quick_xml::events::Event;
use quick_xml::Reader;

/// The deepest element nesting a login request may have (a real one has 4 levels).
pub const MAX_DEPTH: usize = 32;
/// The largest login request body read (a real one is under 1 KiB).
pub const MAX_BYTES: usize = 64 * 1024;

/// What a SOAP `login` carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoapLogin {
    pub username: String,
    /// The password with the security token appended (never recorded).
    pub password: String,
}

/// Why a SOAP body is not a usable login request: the fault code and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoapError {
    /// `soapenv:Client` faults: `INVALID_LOGIN`, or the parser's `sf:INVALID_REQUEST`.
    pub exception_code: &'static str,
    pub message: String,
}

impl SoapError {
    fn bad(message: impl Into<String>) -> SoapError {
        SoapError {
            exception_code: "INVALID_REQUEST",
            message: message.into(),
        }
    }
}

/// Read a SOAP `login` request.
pub fn parse_login(body: &[u8]) -> Result<SoapLogin, SoapError> {
    if body.len() > MAX_BYTES {
        return Err(SoapError::bad(format!(
            "the SOAP request is larger than {MAX_BYTES} bytes"
        )));
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| SoapError::bad("the SOAP request is not UTF-8 text"))?;
    let mut reader = Reader::from_str(text);
    reader.config_mut().trim_text(false);
    // The element names from the root down (local names, prefixes dropped).
    let mut stack: Vec<String> = Vec::new();
    let mut in_login = false;
    let mut saw_login = false;
    let mut field: Option<&'static str> = None;
    let mut username: Option<String> = None;
    let mut password: Option<String> = None;
    let mut value = String::new();
    loop {
        let event = reader.read_event().map_err(|e| {
            SoapError::bad(format!(
                "the SOAP request is not well-formed XML at byte {}: {e}",
                reader.error_position()
            ))
        })?;
        match event {
            Event::Start(e) => {
                let name = local(e.local_name().as_ref());
                if stack.len() >= MAX_DEPTH {
                    return Err(SoapError::bad(format!(
                        "the SOAP request is nested more than {MAX_DEPTH} elements deep"
                    )));
                }
                if stack.len() == 2
                    && name == "login"
                    && stack[0] == "Envelope"
                    && stack[1] == "Body"
                {
                    in_login = true;
                    saw_login = true;
                } else if in_login && stack.len() == 3 {
                    field = match name.as_str() {
                        "username" => Some("username"),
                        "password" => Some("password"),
                        _ => None,
                    };
                    value.clear();
                }
                stack.push(name);
            }
            Event::Empty(e) => {
                let name = local(e.local_name().as_ref());
                if stack.len() == 2 && name == "login" && stack[1] == "Body" {
                    saw_login = true;
                }
                if in_login && stack.len() == 3 {
                    match name.as_str() {
                        "username" => username = Some(String::new()),
                        "password" => password = Some(String::new()),
                        _ => {}
                    }
                }
            }
            Event::End(_) => {
                let name = stack.pop();
                if in_login && stack.len() == 3 {
                    match field.take() {
                        Some("username") => username = Some(std::mem::take(&mut value)),
                        Some("password") => password = Some(std::mem::take(&mut value)),
                        _ => {}
                    }
                } else if in_login && stack.len() == 2 && name.as_deref() == Some("login") {
                    in_login = false;
                }
            }
            Event::Text(t) if field.is_some() => {
                let s = t
                    .decode()
                    .map_err(|e| SoapError::bad(format!("bad text in the SOAP request: {e}")))?;
                value.push_str(&s);
            }
            Event::CData(t) if field.is_some() => {
                value.push_str(&String::from_utf8_lossy(&t.into_inner()));
            }
            Event::GeneralRef(r) if field.is_some() => {
                if r.is_char_ref() {
                    match r.resolve_char_ref() {
                        Ok(Some(c)) => value.push(c),
                        _ => {
                            return Err(SoapError::bad(
                                "a bad character reference in the SOAP request",
                            ))
                        }
                    }
                } else {
                    let name = r.decode().map_err(|e| {
                        SoapError::bad(format!("bad entity in the SOAP request: {e}"))
                    })?;
                    match resolve_predefined_entity(&name) {
                        Some(s) => value.push_str(s),
                        None => {
                            return Err(SoapError::bad(format!(
                                "the SOAP request uses the undefined entity `&{name};`"
                            )))
                        }
                    }
                }
            }
            Event::DocType(_) => {
                return Err(SoapError::bad(
                    "the SOAP request has a DOCTYPE: expected a SOAP envelope",
                ))
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !stack.is_empty() {
        return Err(SoapError::bad("the SOAP request ends inside an element"));
    }
    if !saw_login {
        return Err(SoapError::bad(
            "expected a SOAP Envelope whose Body holds a `login` element (urn:partner.soap.sforce.com)",
        ));
    }
    let username = username.unwrap_or_default().trim().to_string();
    let password = password.unwrap_or_default();
    if username.is_empty() || password.is_empty() {
        return Err(SoapError {
            exception_code: "INVALID_LOGIN",
            message:
                "INVALID_LOGIN: Invalid username, password, security token; or user locked out."
                    .into(),
        });
    }
    Ok(SoapLogin { username, password })
}

/// The local part of an element name (`n1:login` → `login`), as text.
fn local(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// What a `loginResponse` carries.
#[derive(Debug, Clone)]
pub struct LoginResult<'a> {
    pub server_url: &'a str,
    pub metadata_server_url: &'a str,
    pub session_id: &'a str,
    pub user_id: &'a str,
    pub org_id: &'a str,
    pub username: &'a str,
    pub valid_seconds: u64,
}

/// The SOAP envelope of a successful login (the partner API's `loginResponse`).
pub fn login_response(r: &LoginResult<'_>) -> String {
    format!(
        concat!(
            r#"<?xml version="1.0" encoding="UTF-8"?>"#,
            r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns="urn:partner.soap.sforce.com" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">"#,
            "<soapenv:Body><loginResponse><result>",
            "<metadataServerUrl>{meta}</metadataServerUrl>",
            "<passwordExpired>false</passwordExpired>",
            "<sandbox>false</sandbox>",
            "<serverUrl>{server}</serverUrl>",
            "<sessionId>{session}</sessionId>",
            "<userId>{user}</userId>",
            "<userInfo><organizationId>{org}</organizationId><userId>{user}</userId>",
            "<userName>{name}</userName><sessionSecondsValid>{valid}</sessionSecondsValid></userInfo>",
            "</result></loginResponse></soapenv:Body></soapenv:Envelope>"
        ),
        meta = escape(r.metadata_server_url),
        server = escape(r.server_url),
        session = escape(r.session_id),
        user = escape(r.user_id),
        org = escape(r.org_id),
        name = escape(r.username),
        valid = r.valid_seconds,
    )
}

/// The SOAP fault of a failed login (HTTP 500), as Salesforce sends it:
/// `faultcode` `sf:<code>`, `faultstring`, and the `sf:LoginFault` detail.
pub fn fault(code: &str, message: &str) -> String {
    format!(
        concat!(
            r#"<?xml version="1.0" encoding="UTF-8"?>"#,
            r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:sf="urn:fault.partner.soap.sforce.com" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">"#,
            "<soapenv:Body><soapenv:Fault><faultcode>sf:{code}</faultcode><faultstring>{msg}</faultstring>",
            r#"<detail><sf:LoginFault xsi:type="sf:LoginFault"><sf:exceptionCode>{code}</sf:exceptionCode>"#,
            "<sf:exceptionMessage>{msg}</sf:exceptionMessage></sf:LoginFault></detail>",
            "</soapenv:Fault></soapenv:Body></soapenv:Envelope>"
        ),
        code = escape(code),
        msg = escape(message),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body simple-salesforce 1.12 sends (`simple_salesforce/login.py`).
    const SIMPLE_SALESFORCE: &str = r#"<?xml version="1.0" encoding="utf-8" ?>
<env:Envelope
        xmlns:xsd="http://www.w3.org/2001/XMLSchema"
        xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
        xmlns:env="http://schemas.xmlsoap.org/soap/envelope/"
        xmlns:urn="urn:partner.soap.sforce.com">
    <env:Header>
        <urn:CallOptions>
            <urn:client>simple-salesforce</urn:client>
            <urn:defaultNamespace>sf</urn:defaultNamespace>
        </urn:CallOptions>
    </env:Header>
    <env:Body>
        <n1:login xmlns:n1="urn:partner.soap.sforce.com">
            <n1:username>ada@example.com</n1:username>
            <n1:password>p&amp;ss&#33;TOKEN</n1:password>
        </n1:login>
    </env:Body>
</env:Envelope>"#;

    #[test]
    fn reads_the_login_simple_salesforce_sends() {
        let l = parse_login(SIMPLE_SALESFORCE.as_bytes()).unwrap();
        assert_eq!(l.username, "ada@example.com");
        assert_eq!(l.password, "p&ss!TOKEN");
    }

    #[test]
    fn refuses_what_is_not_a_login() {
        for (body, want) in [
            ("not xml <", "INVALID_REQUEST"),
            ("<a><b></a>", "INVALID_REQUEST"),
            ("<Envelope><Body><logout/></Body></Envelope>", "INVALID_REQUEST"),
            ("<Envelope><Body><login><username>u</username></login></Body></Envelope>", "INVALID_LOGIN"),
            ("<Envelope><Body><login><username></username><password>p</password></login></Body></Envelope>", "INVALID_LOGIN"),
            ("<!DOCTYPE x [<!ENTITY a 'b'>]><Envelope/>", "INVALID_REQUEST"),
            ("<Envelope><Body><login><username>&bogus;</username><password>p</password></login></Body></Envelope>", "INVALID_REQUEST"),
            ("<Envelope><Body><login><username>u", "INVALID_REQUEST"),
        ] {
            let e = parse_login(body.as_bytes()).unwrap_err();
            assert_eq!(e.exception_code, want, "{body}: {e:?}");
        }
    }

    #[test]
    fn depth_and_size_are_bounded() {
        let deep = format!(
            "{}{}",
            "<a>".repeat(MAX_DEPTH + 1),
            "</a>".repeat(MAX_DEPTH + 1)
        );
        let e = parse_login(deep.as_bytes()).unwrap_err();
        assert!(e.message.contains("nested more than"), "{e:?}");
        let ok_depth = format!("{}{}", "<a>".repeat(MAX_DEPTH), "</a>".repeat(MAX_DEPTH));
        let e = parse_login(ok_depth.as_bytes()).unwrap_err();
        assert!(e.message.contains("expected a SOAP Envelope"), "{e:?}");
        let big = vec![b' '; MAX_BYTES + 1];
        assert!(parse_login(&big)
            .unwrap_err()
            .message
            .contains("larger than"));
    }

    #[test]
    fn answers_are_escaped_xml() {
        let x = fault("INVALID_LOGIN", "a <b> & c");
        assert!(x.contains("<faultcode>sf:INVALID_LOGIN</faultcode>"));
        assert!(x.contains("a &lt;b&gt; &amp; c"));
        let r = login_response(&LoginResult {
            server_url: "https://x.my.salesforce.com/services/Soap/u/59.0/00D",
            metadata_server_url: "https://x.my.salesforce.com/services/Soap/m/59.0/00D",
            session_id: "00D!x",
            user_id: "005",
            org_id: "00D",
            username: "a&b",
            valid_seconds: 7200,
        });
        assert!(r.contains(
            "<serverUrl>https://x.my.salesforce.com/services/Soap/u/59.0/00D</serverUrl>"
        ));
        assert!(r.contains("<userName>a&amp;b</userName>"));
    }
}
