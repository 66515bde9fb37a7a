//! Record, then replay, the Salesforce surface agents reach (docs/src/guides/salesforce.md):
//! the real binary records from a loopback Salesforce — understudy's own default org, served
//! in replay — an OAuth and a SOAP login, then every write endpoint of the default org:
//! sObject rows, Collections (create, update, upsert, delete), Composite, Composite Graph,
//! Bulk API 2.0 ingest (create, CSV upload, close, polls, CSV results) and query (create,
//! polls, CSV pages by `Sforce-Locator`). The logins are not drafted and nothing secret is
//! stored; a second real binary replays the drafts: the same calls get the same answers,
//! each from a draft (not from the replaying server's own org), the logins answer the
//! replaying attempt's synthetic session, and simple-salesforce logs in through the forward
//! proxy and reads the recorded answers.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::salesforce::{ca_init, files, spawn_serve, Served};
use crate::support::{self, Project, Server};

const PASSWORD: &str = "Pa55-recorded-never-stored";
const CONSUMER_SECRET: &str = "Consumer-recorded-never-stored";
const USER: &str = "ada@healthplus.example";
const V: &str = "services/data/v59.0";

/// One answer as compared between recording and replay.
#[derive(Debug, Clone, PartialEq)]
struct Step {
    what: String,
    status: u16,
    /// JSON when the body is JSON, else the text as a string.
    body: Value,
    content_type: String,
    locator: Option<String>,
}

async fn send(
    c: &reqwest::Client,
    method: &str,
    url: &str,
    body: Option<(&str, String)>,
    token: &str,
) -> Step {
    let mut rb = c
        .request(method.parse().unwrap(), url)
        .header("authorization", format!("Bearer {token}"));
    if let Some((ct, b)) = body {
        rb = rb.header("content-type", ct).body(b);
    }
    let r = rb
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = r.status().as_u16();
    let header = |n: &str| {
        r.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header("content-type").unwrap_or_default();
    let locator = header("sforce-locator");
    let text = r.text().await.unwrap();
    let body = if content_type.contains("json") {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {url}: {e}: {text}"))
    } else {
        Value::String(text)
    };
    Step {
        what: format!(
            "{method} {}",
            url.split_once("/services/").map_or(url, |x| x.1)
        ),
        status,
        body,
        content_type,
        locator,
    }
}

fn js(v: Value) -> Option<(&'static str, String)> {
    Some(("application/json", v.to_string()))
}

/// Every write endpoint of the default org, each answer feeding the next call's ids.
async fn walk(c: &reqwest::Client, base: &str, token: &str) -> Vec<Step> {
    let u = |p: &str| format!("{base}/{V}/{p}");
    let mut out = Vec::new();
    macro_rules! call {
        ($m:expr, $p:expr, $b:expr) => {{
            let s = send(c, $m, &u(&$p), $b, token).await;
            out.push(s.clone());
            s
        }};
    }
    let acct = call!("POST", "sobjects/Account", js(json!({"Name": "Acme"})));
    let acct_id = acct.body["id"].as_str().expect("account id").to_string();
    call!("GET", "query?q=SELECT+Id,+Name+FROM+Account", None);
    let coll = call!(
        "POST",
        "composite/sobjects",
        js(json!({"allOrNone": false, "records": [
            {"attributes": {"type": "Contact"}, "LastName": "Lovelace", "AccountId": acct_id},
            {"attributes": {"type": "Contact"}, "FirstName": "NoLastName"}]}))
    );
    let ada = coll.body[0]["id"].as_str().expect("contact id").to_string();
    call!(
        "PATCH",
        "composite/sobjects",
        js(json!({"allOrNone": false, "records": [
            {"attributes": {"type": "Contact"}, "id": ada, "Title": "Countess"}]}))
    );
    call!(
        "PATCH",
        "composite/sobjects/Contact/Email",
        js(json!({"allOrNone": false, "records": [
            {"attributes": {"type": "Contact"}, "Email": "grace@example.org", "LastName": "Hopper"}]}))
    );
    call!(
        "POST",
        "composite",
        js(json!({"allOrNone": true, "compositeRequest": [
            {"method": "POST", "url": format!("/{V}/sobjects/Account"), "referenceId": "a", "body": {"Name": "Ref Co"}},
            {"method": "GET", "url": format!("/{V}/sobjects/Account/@{{a.id}}"), "referenceId": "back"}]}))
    );
    call!(
        "POST",
        "composite/graph",
        js(json!({"graphs": [{"graphId": "g1", "compositeRequest": [
            {"method": "POST", "url": format!("/{V}/sobjects/Account"), "referenceId": "acct", "body": {"Name": "Graph Co"}},
            {"method": "POST", "url": format!("/{V}/sobjects/Contact"), "referenceId": "ct",
             "body": {"LastName": "Graph", "AccountId": "@{acct.id}"}}]}]}))
    );
    call!(
        "DELETE",
        format!("composite/sobjects?ids={ada}&allOrNone=false"),
        None
    );
    let job = call!(
        "POST",
        "jobs/ingest",
        js(json!({"object": "Contact", "operation": "insert"}))
    );
    let j = job.body["id"].as_str().expect("ingest job id").to_string();
    call!(
        "PUT",
        format!("jobs/ingest/{j}/batches"),
        Some((
            "text/csv",
            "FirstName,LastName\nKatherine,Johnson\nNo,\n".to_string()
        ))
    );
    call!(
        "PATCH",
        format!("jobs/ingest/{j}"),
        js(json!({"state": "UploadComplete"}))
    );
    call!("GET", format!("jobs/ingest/{j}"), None);
    let done = call!("GET", format!("jobs/ingest/{j}"), None);
    assert_eq!(done.body["state"], "JobComplete", "{done:?}");
    let ok = call!("GET", format!("jobs/ingest/{j}/successfulResults"), None);
    assert!(ok.content_type.starts_with("text/csv"), "{ok:?}");
    call!("GET", format!("jobs/ingest/{j}/failedResults"), None);
    let q = call!(
        "POST",
        "jobs/query",
        js(
            json!({"operation": "query", "query": "SELECT Id, LastName FROM Contact ORDER BY LastName"})
        )
    );
    let qj = q.body["id"].as_str().expect("query job id").to_string();
    call!("GET", format!("jobs/query/{qj}"), None);
    call!("GET", format!("jobs/query/{qj}"), None);
    let page = call!("GET", format!("jobs/query/{qj}/results?maxRecords=1"), None);
    let locator = page.locator.clone().expect("a first page names the next");
    assert_ne!(locator, "null", "{page:?}");
    let second = call!(
        "GET",
        format!("jobs/query/{qj}/results?maxRecords=1&locator={locator}"),
        None
    );
    assert!(second.content_type.starts_with("text/csv"), "{second:?}");
    out
}

async fn form_login(c: &reqwest::Client, base: &str) -> Value {
    let form = format!(
        "grant_type=password&client_id=CK-rec&client_secret={CONSUMER_SECRET}&username=ada%40healthplus.example&password={PASSWORD}"
    );
    let r = c
        .post(format!("{base}/services/oauth2/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// The SOAP login's `serverUrl` and `sessionId`.
async fn soap_login(c: &reqwest::Client, base: &str) -> (String, String) {
    let body = format!(
        r#"<?xml version="1.0" encoding="utf-8" ?><env:Envelope xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:env="http://schemas.xmlsoap.org/soap/envelope/"><env:Body><n1:login xmlns:n1="urn:partner.soap.sforce.com"><n1:username>{USER}</n1:username><n1:password>{PASSWORD}</n1:password></n1:login></env:Body></env:Envelope>"#
    );
    let r = c
        .post(format!("{base}/services/Soap/u/59.0"))
        .header("content-type", "text/xml; charset=UTF-8")
        .header("soapaction", "login")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let tag = |t: &str| {
        let open = format!("<{t}>");
        let start = text.find(&open).unwrap_or_else(|| panic!("{t} in {text}")) + open.len();
        let end = start + text[start..].find('<').unwrap();
        text[start..end].to_string()
    };
    (tag("serverUrl"), tag("sessionId"))
}

async fn post_json(c: &reqwest::Client, url: &str, body: Value) -> Value {
    let r = c.post(url).json(&body).send().await.unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert!(status.is_success(), "{url}: {status} {v}");
    v
}

fn no_secret_under(dir: &Path, secrets: &[&str]) {
    let mut all = Vec::new();
    files(dir, &mut all);
    assert!(!all.is_empty(), "{} holds files", dir.display());
    for (path, bytes) in &all {
        for s in secrets {
            assert!(
                !bytes.windows(s.len()).any(|w| w == s.as_bytes()),
                "{s} found in {}",
                path.display()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_are_not_drafted_and_every_write_endpoint_records_then_replays() {
    let c = crate::support::client();
    // The "real" Salesforce: understudy's default org on a loopback port.
    let org = Project::new(&[("crm", "salesforce")]);
    let real = Server::start(&org).await;
    let real_base = real.url("/crm");

    // Record with the real binary.
    let rec = Project::new(&[("crm", "salesforce")]);
    rec.write_config(json!({ "integrations": { "crm": {
        "profile": "salesforce", "operations": "mocks/crm", "upstream": real_base } } }));
    let out = rec.path().join("drafts");
    let recorder = spawn_serve(
        rec.path(),
        &[
            "serve",
            "--mode",
            "record",
            "--allow-writes",
            "--out",
            out.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
    );
    let rbase = format!("http://{}/crm", recorder.addr);
    let login = form_login(&c, &rbase).await;
    let real_token = login["access_token"].as_str().unwrap().to_string();
    assert_eq!(
        login["instance_url"], real_base,
        "recording answers the real session"
    );
    let (real_server_url, real_session) = soap_login(&c, &rbase).await;
    assert!(real_server_url.starts_with(&real_base), "{real_server_url}");
    let recorded = walk(&c, &rbase, &real_token).await;
    let flushed = post_json(
        &c,
        &format!("http://{}/_understudy/api/drafts/flush", recorder.addr),
        json!({}),
    )
    .await;
    drop(recorder);
    let dir = out.join("crm");
    let mut drafted: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    drafted.sort();
    assert!(
        drafted.len() >= 15,
        "a draft per endpoint: {drafted:?} {flushed}"
    );
    assert!(
        !drafted
            .iter()
            .any(|n| n.contains("oauth2") || n.contains("soap")),
        "no login draft: {drafted:?}"
    );
    let notes = std::fs::read_to_string(dir.join("record-notes.txt")).unwrap();
    assert!(notes.contains("2 login exchange(s) not drafted"), "{notes}");
    // Nothing secret, and not the real session's instance, in the drafts or the data dir.
    let real_origin = format!("127.0.0.1:{}", real.addr.port());
    let session_secret = real_session.split_once('!').unwrap().1.to_string();
    let token_secret = real_token.split_once('!').unwrap().1.to_string();
    let secrets = [
        PASSWORD,
        CONSUMER_SECRET,
        session_secret.as_str(),
        token_secret.as_str(),
    ];
    no_secret_under(&dir, &[&secrets[..], &[real_origin.as_str()]].concat());
    no_secret_under(&rec.data_dir(), &secrets);
    real.stop().await.unwrap();

    // Replay the drafts with the real binary, the forward proxy on for simple-salesforce.
    let rep = Project::new(&[("crm", "salesforce")]);
    rep.write_config(json!({ "integrations": { "crm": {
        "profile": "salesforce", "operations": dir.to_str().unwrap(),
        "upstream": "https://rec.my.salesforce.com" } } }));
    ca_init(rep.path());
    let replayer: Served = spawn_serve(
        rep.path(),
        &["serve", "--forward-proxy", "--listen", "127.0.0.1:0"],
    );
    let admin = format!("http://{}/_understudy/api", replayer.addr);
    let attempt = post_json(&c, &format!("{admin}/attempts"), json!({})).await;
    let base = attempt["base_urls"]["crm"].as_str().unwrap().to_string();
    let login = form_login(&c, &base).await;
    let token = login["access_token"].as_str().unwrap().to_string();
    assert_eq!(
        login["instance_url"], base,
        "replay answers its own session"
    );
    assert!(token.starts_with("00D") && token != real_token, "{token}");
    let (server_url, session) = soap_login(&c, &base).await;
    assert!(server_url.starts_with(&base), "{server_url}");
    assert_eq!(session, token, "one synthetic session per attempt");
    let replayed = walk(&c, &base, &token).await;
    for (r, p) in recorded.iter().zip(&replayed) {
        assert_eq!(p, r, "replayed answer differs from the recorded one");
    }
    assert_eq!(replayed.len(), recorded.len());
    let ev: Value = c
        .get(format!(
            "{admin}/attempts/{}/evidence",
            attempt["attempt_id"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let events = ev["tool_events"].as_array().unwrap();
    let ops: Vec<&str> = events
        .iter()
        .map(|e| e["operation_id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(&ops[..2], &["oauth_token", "soap_login"], "{ops:?}");
    // Every other call was answered by a draft, not by the replaying server's own org.
    for (e, op) in events.iter().zip(&ops).skip(2) {
        assert!(
            drafted.contains(&format!("{op}.json")),
            "{op} is not a draft ({drafted:?}): {e}"
        );
        assert_eq!(e["result_status"], "ok", "{e}");
    }
    assert_eq!(ops.len(), 2 + recorded.len(), "{ops:?}");

    // simple-salesforce logs in to the replay (SOAP, through the forward proxy) and reads
    // the recorded answers.
    let python = support::tool_available(
        "python3",
        &["-c", "import simple_salesforce, pytest_understudy"],
        "simple-salesforce and pytest-understudy",
    );
    if python {
        let expected = json!({
            "accounts": recorded[1].body,
            "collections_request": {"allOrNone": false, "records": [
                {"attributes": {"type": "Contact"}, "LastName": "Lovelace",
                 "AccountId": recorded[0].body["id"]},
                {"attributes": {"type": "Contact"}, "FirstName": "NoLastName"}]},
            "collections": recorded[2].body,
            "drafted": drafted,
        });
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new("python3")
            .arg(root.join("tests/clients/salesforce_replay.py"))
            .env("UNDERSTUDY_URL", format!("http://{}", replayer.addr))
            .env("UNDERSTUDY_CA", rep.path().join("certs/understudy-ca.pem"))
            .env("EXPECTED", expected.to_string())
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("salesforce-replay: ok"),
            "simple-salesforce on the replay failed:\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    drop(replayer);
}
