//! No secret reaches disk, reports, drafts or logs: the scrub matrix. Every secret form — a
//! form body, a query parameter, JSON at depth (a password, a JWT, a Salesforce session id),
//! an XML/SOAP body, headers, an MCP argument, an agent-side event, an upstream result — is
//! sent to the real binary in replay, dry-run and record (at `RUST_LOG=trace`); then the
//! evidence, every file of the data dir, the reports (json, junit, html), the drafts and the
//! logs are searched for the raw values: zero hits. A secret the agent traced from a result
//! into a later argument still passes argument provenance (and a different one fails it).
//! Also in the matrix: a multipart/form-data body, an MCP elicitation answer (a real rmcp
//! client answers `elicitation/create`), and a name the project adds once (`redact`) sent as a
//! JSON field, a header and a form field and answered by the upstream — values short enough
//! that only the name can catch them. `drift`'s output (text and JSON) holds no secret of a
//! real request or answer either.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::control::counting_upstream;
use crate::support::{self, rest_op, Project};

const FORM_PASS: &str = "FormPass-7a1c9e";
const FORM_CS: &str = "FormClientSecret-55b2";
const QUERY_TOK: &str = "QueryAccessTok-93fe0";
const DEEP_PASS: &str = "DeepPassword-4410aa";
const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtYXRyaXgifQ.c2lnLW1hdHJpeC1qd3Q";
const SF_SID: &str = "00D5g000004MATR!AQ0AQMatrixSessionSecret.1a";
const SOAP_PASS: &str = "SoapPassw0rd-21ce";
const HEADER_KEY: &str = "HeaderApiKey-0b7d11";
const HEADER_BEARER: &str = "HeaderBearer-6c3f2e";
const MCP_KEY: &str = "McpArgApiKey-8d2e77";
const EVENT_TEXT: &str = "EventBearer-19af3c";
const EVENT_DATA: &str = "EventDataSecret-b0c4";
/// What the upstream answers: its own token and a session id the agent passes on.
const UP_TOKEN: &str = "UpstreamAccessTok-f00d";
const UP_SID: &str = "00D5g000004UPST!AQ0AQUpstreamSession.9z";

const MULTI_PASS: &str = "MultipartPass-3e8d";
const MULTI_KEY: &str = "MultipartKeyFile-71aa";
const ELICIT_PASS: &str = "ElicitPassword-c4d1";
const ELICIT_BEARER: &str = "ElicitBearer-5b9e02";
/// Under the project's own name `tax_ref` (7 characters: only the name can catch them).
const TAX_ARG: &str = "TaxA-7q";
const TAX_HDR: &str = "TaxH-2k";
const TAX_FORM: &str = "TaxF-9m";
const TAX_UP: &str = "TaxU-3w";

const ALL: [&str; 22] = [
    MULTI_PASS,
    MULTI_KEY,
    ELICIT_PASS,
    ELICIT_BEARER,
    TAX_ARG,
    TAX_HDR,
    TAX_FORM,
    TAX_UP,
    FORM_PASS,
    FORM_CS,
    QUERY_TOK,
    DEEP_PASS,
    JWT,
    SF_SID,
    SOAP_PASS,
    HEADER_KEY,
    HEADER_BEARER,
    MCP_KEY,
    EVENT_TEXT,
    EVENT_DATA,
    UP_TOKEN,
    UP_SID,
];

fn project(upstream: &str, mode: &str) -> Project {
    let p = Project::new(&[("crm", "rest"), ("tools", "mcp")]);
    p.write_config(json!({ "redact": ["tax_ref"], "integrations": {
        "crm": { "profile": "rest", "operations": "mocks/crm", "upstream": upstream },
        "tools": { "profile": "mcp", "operations": "mocks/tools" }
    }}));
    let ok = |r: Value| Some(support::mock(r, json!({})));
    // In replay the mock answers the login; in dry-run and record the upstream does (a read
    // without a mock is forwarded).
    let login_mock = (mode == "replay").then(|| {
        support::mock(
            json!({"status": 200, "data": {"sid": "mock-sid"}}),
            json!({}),
        )
    });
    p.op("crm", rest_op("login", "GET", "/session", login_mock));
    let mut use_session = rest_op("use_session", "POST", "/use", ok(json!({"status": 201})));
    use_session["write"] = json!(true);
    p.op("crm", use_session);
    let mut create = rest_op(
        "create",
        "POST",
        "/records",
        ok(json!({"status": 201, "data": {"id": "r1"}})),
    );
    create["write"] = json!(true);
    p.op("crm", create);
    p.op(
        "tools",
        json!({
            "operation_id": "lookup",
            "description": "Look something up",
            "annotations": { "readOnlyHint": true },
            "input_schema": { "type": "object" },
            "output_schema": { "type": "object" },
            "mock": support::mock(json!({"found": true}), json!({}))
        }),
    );
    let schema = json!({"type": "object", "properties": {
        "password": {"type": "string"}, "note": {"type": "string"}}});
    p.op(
        "tools",
        json!({
            "operation_id": "sign_in",
            "description": "Asks the user for a password",
            "annotations": { "readOnlyHint": true },
            "input_schema": { "type": "object" },
            "output_schema": { "type": "object" },
            "mock": {"schema_version": 1, "default_variant": "ok", "variants": {"ok": {
                "ask_client": {"method": "elicitation/create",
                               "params": {"message": "Your password?", "requestedSchema": schema}},
                "result": {"action": {"$response": "action"}, "echo": {"$response": "content.note"}}}},
                "examples": [{"variant": "ok",
                              "input": {"$response": {"action": "accept", "content": {"note": "n"}}},
                              "expected": {"action": "accept", "echo": "n"}}]}
        }),
    );
    let contracts = p.path().join("contracts");
    std::fs::create_dir_all(&contracts).unwrap();
    std::fs::write(
        contracts.join("session_provenance.yaml"),
        "version: 1\nid: session_provenance\nrisk: blocking\ntool: crm/use_session\narguments:\n  sources:\n    session: { result_of: crm/login, path: \"data.sid\" }\n",
    )
    .unwrap();
    p
}

/// Every file under `dir` that holds one of the raw secrets: `(file, secret)`.
fn hits(dir: &Path) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                for s in ALL {
                    if bytes.windows(s.len()).any(|w| w == s.as_bytes()) {
                        out.push((p.display().to_string(), s));
                    }
                }
            }
        }
    }
    out
}

fn text_hits(what: &str, text: &str) -> Vec<String> {
    ALL.iter()
        .filter(|s| text.contains(**s))
        .map(|s| format!("{what}: {s}"))
        .collect()
}

async fn send(
    c: &reqwest::Client,
    method: &str,
    url: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> support::Resp {
    let mut rb = c
        .request(method.parse().unwrap(), url)
        .body(body.to_string());
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let r = tokio::time::timeout(std::time::Duration::from_secs(20), rb.send())
        .await
        .unwrap_or_else(|_| panic!("{method} {url}: no answer in 20 s"))
        .expect("sent");
    support::Resp {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        text: r.text().await.unwrap(),
    }
}

/// One mode of the matrix; returns what leaked (empty: nothing).
async fn run_mode(mode: &str) -> Vec<String> {
    let up = counting_upstream(json!({
        "access_token": UP_TOKEN, "sid": UP_SID, "note": format!("issued {UP_TOKEN}"),
        "tax_ref": TAX_UP
    }))
    .await;
    let p = project(&up.url, mode);
    let drafts = p.path().join("drafts");
    // stderr goes to a file from the first byte: at trace level the server logs more before
    // its readiness line than a pipe holds.
    let log_file = p.path().join("serve.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_understudy"));
    cmd.args(["serve", "--config"])
        .arg(p.config_path())
        .args(["--listen", "127.0.0.1:0", "--mode", mode])
        .env("RUST_LOG", "trace")
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log_file).unwrap());
    if mode == "record" {
        // Writes go through too (to the loopback upstream): the traced session is used.
        cmd.arg("--out").arg(&drafts).arg("--allow-writes");
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let ready = lines.next().and_then(Result::ok).unwrap_or_else(|| {
        let _ = child.kill();
        panic!(
            "{mode}: no readiness line: {}",
            std::fs::read_to_string(&log_file).unwrap_or_default()
        )
    });
    let base = ready
        .strip_prefix("understudy listening on ")
        .unwrap_or_else(|| panic!("{ready}"))
        .to_string();
    std::thread::spawn(move || for _ in lines {});
    let c = support::client();
    let json_ct = ("content-type", "application/json");
    let a = send(
        &c,
        "POST",
        &format!("{base}/_understudy/api/attempts"),
        "{}",
        &[json_ct],
    )
    .await;
    assert_eq!(a.status, 201, "{mode}: {}", a.text);
    let a = a.json();
    let (id, token) = (
        a["attempt_id"].as_str().unwrap().to_string(),
        a["token"].as_str().unwrap().to_string(),
    );
    let crm = format!("{base}/~{token}/crm");
    // A form body (an OAuth password grant nobody mocked).
    send(
        &c,
        "POST",
        &format!("{crm}/services/oauth2/token"),
        &format!("grant_type=password&username=ada&password={FORM_PASS}&client_secret={FORM_CS}&tax_ref={TAX_FORM}"),
        &[("content-type", "application/x-www-form-urlencoded")],
    )
    .await;
    // A query parameter.
    send(
        &c,
        "GET",
        &format!("{crm}/things?access_token={QUERY_TOK}&n=1"),
        "",
        &[],
    )
    .await;
    // JSON at depth, a JWT and a Salesforce session id under innocent names, secret headers.
    let bearer = format!("Bearer {HEADER_BEARER}");
    let r = send(
        &c,
        "POST",
        &format!("{crm}/records"),
        &json!({"a": {"b": {"c": {"password": DEEP_PASS}}}, "note": format!("jwt {JWT}"), "org": [SF_SID], "tax_ref": TAX_ARG}).to_string(),
        &[json_ct, ("x-api-key", HEADER_KEY), ("authorization", &bearer)],
    )
    .await;
    assert!(r.status < 500, "{mode}: {}", r.text);
    // A multipart/form-data body (nobody mocked the upload).
    let multipart = format!(
        "--b0und\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\nada\r\n--b0und\r\nContent-Disposition: form-data; name=\"password\"\r\n\r\n{MULTI_PASS}\r\n--b0und\r\nContent-Disposition: form-data; name=\"api_key\"; filename=\"key.txt\"\r\nContent-Type: text/plain\r\n\r\n{MULTI_KEY}\r\n--b0und--\r\n"
    );
    send(
        &c,
        "POST",
        &format!("{crm}/uploads"),
        &multipart,
        &[("content-type", "multipart/form-data; boundary=b0und")],
    )
    .await;
    // An XML/SOAP body.
    send(
        &c,
        "POST",
        &format!("{crm}/services/Soap/u/60.0"),
        &format!("<?xml version=\"1.0\"?><soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" xmlns:urn=\"urn:partner.soap.sforce.com\"><soapenv:Body><urn:login><urn:username>ada</urn:username><urn:password>{SOAP_PASS}</urn:password></urn:login></soapenv:Body></soapenv:Envelope>"),
        &[("content-type", "text/xml"), ("soapaction", "login")],
    )
    .await;
    // An MCP argument.
    let tools = format!("{base}/~{token}/tools");
    let accept = ("accept", "application/json, text/event-stream");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "matrix", "version": "1"}}});
    let r = send(&c, "POST", &tools, &init.to_string(), &[json_ct, accept]).await;
    assert_eq!(r.status, 200, "{mode}: {}", r.text);
    let sid = r.header("mcp-session-id").expect("session").to_string();
    send(
        &c,
        "POST",
        &tools,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        &[json_ct, accept, ("mcp-session-id", &sid)],
    )
    .await;
    let r = send(
        &c,
        "POST",
        &tools,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "lookup", "arguments": {"q": "ada", "api_key": MCP_KEY}}})
        .to_string(),
        &[json_ct, accept, ("mcp-session-id", &sid)],
    )
    .await;
    assert_eq!(r.status, 200, "{mode}: {}", r.text);
    // An elicitation answer (a real MCP client answers the server's elicitation/create).
    elicit(&tools, mode).await;
    // An upstream result (dry-run and record forward this read), then the session it
    // returned passed on: argument provenance over a secret.
    let r = send(
        &c,
        "GET",
        &format!("{crm}/session"),
        "",
        &[("tax-ref", TAX_HDR)],
    )
    .await;
    assert_eq!(r.status, 200, "{mode}: {}", r.text);
    let traced = if mode == "replay" { "mock-sid" } else { UP_SID };
    if mode != "replay" {
        assert!(
            r.text.contains(UP_SID),
            "{mode}: the agent gets the real answer: {}",
            r.text
        );
    }
    send(
        &c,
        "POST",
        &format!("{crm}/use"),
        &json!({"session": traced}).to_string(),
        &[json_ct],
    )
    .await;
    // An agent-side event.
    let r = send(
        &c,
        "POST",
        &format!("{base}/_understudy/api/attempts/{id}/events"),
        &json!({"name": "said", "kind": "agent_message", "text": format!("using Bearer {EVENT_TEXT}"),
                "data": {"client_secret": EVENT_DATA}})
        .to_string(),
        &[json_ct],
    )
    .await;
    assert_eq!(r.status, 201, "{mode}: {}", r.text);
    let mut leaks = Vec::new();
    // Provenance still holds over the scrubbed values…
    let v = send(
        &c,
        "POST",
        &format!("{base}/_understudy/api/attempts/{id}/verify"),
        &json!({"contracts": ["session_provenance"]}).to_string(),
        &[json_ct],
    )
    .await;
    assert_eq!(v.status, 200, "{mode}: {}", v.text);
    // The contract's own result: the attempt's verdict also fails on the matrix's unmatched
    // calls (harness errors), so `passed` is false whatever the contract says.
    assert_eq!(
        v.json()["contract_results"][0]["status"],
        "passed",
        "{mode}: provenance over a secret: {}",
        v.text
    );
    assert!(v.text.contains("arguments.sources[session]"), "{}", v.text);
    leaks.extend(text_hits("verify answer", &v.text));
    // …and fails for a session the login never returned (the check can fail).
    let a2 = send(
        &c,
        "POST",
        &format!("{base}/_understudy/api/attempts"),
        "{}",
        &[json_ct],
    )
    .await
    .json();
    let crm2 = format!("{base}/~{}/crm", a2["token"].as_str().unwrap());
    send(&c, "GET", &format!("{crm2}/session"), "", &[]).await;
    send(
        &c,
        "POST",
        &format!("{crm2}/use"),
        &json!({"session": "00D5g000004OTHE!AQ0AQNotTheSameOne.77"}).to_string(),
        &[json_ct],
    )
    .await;
    let v2 = send(
        &c,
        "POST",
        &format!(
            "{base}/_understudy/api/attempts/{}/verify",
            a2["attempt_id"].as_str().unwrap()
        ),
        &json!({"contracts": ["session_provenance"]}).to_string(),
        &[json_ct],
    )
    .await;
    assert_eq!(
        v2.json()["contract_results"][0]["status"],
        "failed",
        "{mode}: {}",
        v2.text
    );
    assert_eq!(v2.json()["passed"], false, "{mode}: {}", v2.text);
    // The live evidence and the pages.
    for path in [
        format!("/_understudy/api/attempts/{id}/evidence"),
        format!("/_understudy/ui/attempts/{id}"),
        format!("/_understudy/ui/attempts/{id}/junit.xml"),
        "/_understudy/ui/".to_string(),
        format!("/_understudy/api/attempts/{}/evidence", "default"),
    ] {
        let r = send(&c, "GET", &format!("{base}{path}"), "", &[]).await;
        assert_eq!(r.status, 200, "{mode} {path}: {}", r.text);
        leaks.extend(text_hits(&format!("GET {path}"), &r.text));
    }
    if mode == "record" {
        let r = send(
            &c,
            "POST",
            &format!("{base}/_understudy/api/drafts/flush"),
            "",
            &[],
        )
        .await;
        assert_eq!(r.status, 200, "{mode}: {}", r.text);
    }
    drop(c);
    // A graceful stop (the store flushed, the drafts written).
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
    // The reports, made from the data dir.
    let reports = p.path().join("reports");
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["report", &id, "--config"])
        .arg(p.config_path())
        .arg("--report-dir")
        .arg(&reports)
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    assert!(
        reports.read_dir().map(|d| d.count()).unwrap_or(0) >= 3,
        "{mode}: report: {out:?}"
    );
    leaks.extend(text_hits(
        "report stdout",
        &String::from_utf8_lossy(&out.stdout),
    ));
    leaks.extend(text_hits(
        "report stderr",
        &String::from_utf8_lossy(&out.stderr),
    ));
    for (f, s) in hits(&p.data_dir())
        .into_iter()
        .chain(hits(&reports))
        .chain(hits(&drafts))
        .filter(|(f, _)| !f.ends_with("serve.log"))
    {
        leaks.push(format!("{f}: {s}"));
    }
    if mode == "record" {
        assert!(hits_any_file(&drafts), "{mode}: no drafts were written");
    }
    let log = String::from_utf8_lossy(&std::fs::read(&log_file).unwrap()).into_owned();
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "{mode}: the log is at trace level"
    );
    leaks.extend(text_hits("log", &log));
    leaks.into_iter().map(|l| format!("{mode}: {l}")).collect()
}

/// A client that answers every elicitation with a password and a bearer credential.
#[derive(Clone)]
struct Answers;

impl rmcp::ClientHandler for Answers {
    async fn create_elicitation(
        &self,
        _: rmcp::model::ElicitRequestParams,
        _: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        Ok(
            rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept).with_content(
                json!({"password": ELICIT_PASS, "note": format!("Bearer {ELICIT_BEARER}")}),
            ),
        )
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut c = rmcp::model::ClientConfig::default();
        c.capabilities = rmcp::model::ClientCapabilities::builder()
            .enable_elicitation()
            .build();
        c
    }
}

async fn elicit(url: &str, mode: &str) {
    use rmcp::ServiceExt;
    let c = Answers
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            url.to_string(),
        ))
        .await
        .expect("initialize");
    let r = c
        .call_tool(rmcp::model::CallToolRequestParams::new("sign_in"))
        .await
        .expect("tools/call");
    // The agent gets its answer (the echo holds the credential: the live answer is not
    // what is scrubbed, what is kept is).
    let got = r.structured_content.unwrap_or_default();
    assert_eq!(got["action"], "accept", "{mode}: {got}");
    assert!(
        got["echo"].as_str().unwrap_or("").contains(ELICIT_BEARER),
        "{mode}: {got}"
    );
    c.cancel().await.unwrap();
}

fn hits_any_file(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|d| d.count() > 0)
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_of_the_matrix_reaches_disk_reports_drafts_or_logs_in_any_mode() {
    let mut leaks = Vec::new();
    for mode in ["replay", "dry-run", "record"] {
        leaks.extend(run_mode(mode).await);
    }
    assert!(leaks.is_empty(), "raw secrets found:\n{}", leaks.join("\n"));
}

/// `drift` against a loopback upstream whose real answers carry secrets (a token, a session
/// id, a JWT under an innocent name, the project's `tax_ref`) and whose request carries one
/// in its query: neither the text nor the JSON output shows any of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_output_holds_no_secret_of_a_real_request_or_answer() {
    const Q_TOKEN: &str = "DriftQueryToken-aa31";
    const D_TOKEN: &str = "DriftAnswerTok-0c55";
    const D_TAX: &str = "TaxD-8p";
    let up = counting_upstream(json!({
        "id": "p1", "access_token": D_TOKEN, "sid": SF_SID, "note": format!("signed {JWT}"),
        "tax_ref": D_TAX, "extra": {"password": DEEP_PASS}
    }))
    .await;
    let p = Project::new(&[("crm", "rest")]);
    p.write_config(json!({ "redact": ["tax_ref"], "integrations": {
        "crm": { "profile": "rest", "operations": "mocks/crm", "upstream": up.url }
    }}));
    let result = json!({"status": 200, "data": {"id": "p1", "access_token": "mock-token", "tax_ref": "m", "note": "n"}});
    let mut op = rest_op(
        "profile",
        "GET",
        "/profile",
        Some(json!({"schema_version": 1, "default_variant": "ok",
            "variants": {"ok": {"result": result.clone()}},
            "examples": [{"variant": "ok", "input": {"access_token": Q_TOKEN}, "expected": result}]})),
    );
    op["match"]["query"] = json!({"access_token": "{access_token}"});
    p.op("crm", op);
    let secrets = [Q_TOKEN, D_TOKEN, D_TAX, SF_SID, JWT, DEEP_PASS];
    let mut leaks = Vec::new();
    for format in ["text", "json"] {
        let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
            .args([
                "drift",
                "--integration",
                "crm",
                "--values",
                "--format",
                format,
                "--config",
            ])
            .arg(p.config_path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The example was sent and compared (the check can see the answer).
        assert!(
            stdout.contains("access_token") && stdout.contains("[redacted:"),
            "{format}: {stdout}\n{stderr}"
        );
        for s in secrets {
            if stdout.contains(s) || stderr.contains(s) {
                leaks.push(format!("{format}: {s}"));
            }
        }
    }
    assert!(
        up.count.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "the upstream was asked"
    );
    assert!(leaks.is_empty(), "raw secrets in drift output: {leaks:?}\n");
}
