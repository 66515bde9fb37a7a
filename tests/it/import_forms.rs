//! Form-encoded and multipart request bodies as input (`understudy::http::form`): a real
//! server in replay answers a form body and a multipart body of the same fields alike, with
//! the fields typed by the operation's input schema (an integer field echoes as a number,
//! repeated keys as an array), refuses a field that does not spell its type as an input
//! error naming it, and records the typed input in evidence with a secret field scrubbed.

use serde_json::{json, Value};

use crate::support::{Project, Server};

const FORM_SECRET: &str = "FormFieldPassword-3e81";

fn message_op() -> Value {
    let result = json!({"status": 201, "data": {
        "to": {"$input": "To"}, "media": {"$input": "MediaUrl"},
        "price": {"$input": "Price"}, "send": {"$input": "Send"},
        "account": {"$input": "AccountSid"}
    }});
    let expected = json!({"status": 201, "data": {
        "to": "+15551230000", "media": ["a", "b"], "price": 12, "send": true,
        "account": "AC1"
    }});
    json!({
        "operation_id": "create_message",
        "description": "Send a message (form-encoded, like Twilio's)",
        "match": {"method": "POST", "path": "/Accounts/{AccountSid}/Messages"},
        "write": true,
        "input_schema": {"type": "object", "required": ["AccountSid", "To", "Price"], "properties": {
            "AccountSid": {"type": "string"},
            "To": {"type": "string"},
            "MediaUrl": {"type": "array", "items": {"type": "string"}},
            "Price": {"type": "integer", "minimum": 0},
            "Send": {"type": "boolean"},
            "password": {"type": "string"}
        }},
        "output_schema": {"type": "object", "required": ["status", "data"], "properties": {
            "status": {"const": 201},
            "data": {"type": "object", "required": ["price", "send"], "properties": {
                "price": {"type": "integer"}, "send": {"type": "boolean"},
                "media": {"type": "array"}
            }}
        }},
        "mock": {
            "schema_version": 1,
            "default_variant": "sent",
            "variants": {"sent": {"result": result}},
            "examples": [{"variant": "sent", "input": {
                "AccountSid": "AC1", "To": "+15551230000", "MediaUrl": ["a", "b"],
                "Price": 12, "Send": true
            }, "expected": expected}]
        }
    })
}

fn multipart(boundary: &str, fields: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (k, v) in fields {
        s.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
        ));
    }
    s.push_str(&format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"note\"; filename=\"n.txt\"\r\nContent-Type: text/plain\r\n\r\nattached\r\n--{boundary}--\r\n"
    ));
    s
}

#[tokio::test]
async fn form_and_multipart_bodies_are_typed_input_in_replay() {
    let p = Project::new(&[("tw", "rest")]);
    p.op("tw", message_op());
    let s = Server::start(&p).await;
    let form_ct = ("content-type", "application/x-www-form-urlencoded");
    let body = format!(
        "To=%2B15551230000&MediaUrl=a&MediaUrl=b&Price=12&Send=true&password={FORM_SECRET}"
    );
    let r = s
        .call_raw("POST", "/tw/Accounts/AC1/Messages", &body, &[form_ct])
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let want = json!({"to": "+15551230000", "media": ["a", "b"], "price": 12, "send": true, "account": "AC1"});
    assert_eq!(r.json(), want);

    // The same fields as multipart/form-data (and a file part).
    let mp = multipart(
        "XbOuNd",
        &[
            ("To", "+15551230000"),
            ("MediaUrl", "a"),
            ("MediaUrl", "b"),
            ("Price", "12"),
            ("Send", "true"),
        ],
    );
    let r = s
        .call_raw(
            "POST",
            "/tw/Accounts/AC1/Messages",
            &mp,
            &[("content-type", "multipart/form-data; boundary=XbOuNd")],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json(), want);

    // A field that does not spell its schema's type: an input error naming the field.
    let r = s
        .call_raw(
            "POST",
            "/tw/Accounts/AC1/Messages",
            "To=x&Price=twelve",
            &[form_ct],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("Price"), "{}", r.text);
    // A required field missing.
    let r = s
        .call_raw("POST", "/tw/Accounts/AC1/Messages", "To=x", &[form_ct])
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("Price"), "{}", r.text);
    // A broken multipart body is an input error, not a harness error.
    let r = s
        .call_raw(
            "POST",
            "/tw/Accounts/AC1/Messages",
            "--XbOuNd\r\nContent-Disposition: form-data; name=\"To\"\r\n\r\nx",
            &[("content-type", "multipart/form-data; boundary=XbOuNd")],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("multipart"), "{}", r.text);

    // Evidence: the typed input, the secret field scrubbed.
    let ev = s.evidence(&s.default_attempt()).await;
    let events = ev["tool_events"].as_array().unwrap();
    let args = &events[0]["arguments"];
    assert_eq!(args["Price"], 12, "{args}");
    assert_eq!(args["MediaUrl"], json!(["a", "b"]), "{args}");
    assert_eq!(args["Send"], true, "{args}");
    let pw = args["password"].as_str().unwrap_or("");
    assert!(pw.starts_with("[redacted:"), "{args}");
    assert_eq!(events[1]["arguments"]["note"], "attached");
    let text = ev.to_string();
    assert!(
        !text.contains(FORM_SECRET),
        "the form secret reached evidence"
    );
    s.stop().await.unwrap();
}

/// Every file under `dir` (recursively) whose name ends in `.json`.
fn json_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(json_files(&p));
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    out
}

/// A replay project serving the operation files of `from` under integration `tw`.
async fn replay_of(from: &std::path::Path) -> (Project, Server) {
    let p = Project::new(&[("tw", "rest")]);
    let ops = p.ops_dir("tw");
    std::fs::create_dir_all(&ops).unwrap();
    let files = json_files(from);
    assert!(!files.is_empty(), "no operation file in {}", from.display());
    for f in files {
        std::fs::copy(&f, ops.join(f.file_name().unwrap())).unwrap();
    }
    let s = Server::start(&p).await;
    (p, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_mode_captures_a_form_body_and_its_draft_replays_it() {
    let up = crate::control::counting_upstream(json!({"sid": "SM1", "status": "queued"})).await;
    let p = Project::new(&[("tw", "rest")]);
    p.write_config(json!({"mode": "record", "integrations": {"tw": {
        "profile": "rest", "upstream": up.url, "operations": "mocks/tw"}}}));
    let drafts = p.path().join("drafts");
    let mut opts = p.options();
    opts.forward.out_dir = Some(drafts.clone());
    opts.forward.allow_writes = true;
    let s = Server::start_with(opts).await;
    let form_ct = ("content-type", "application/x-www-form-urlencoded");
    let body = format!("To=%2B15551230000&Body=hello&MediaUrl=a&MediaUrl=b&password={FORM_SECRET}");
    let r = s
        .call_raw("POST", "/tw/Accounts/AC1/Messages", &body, &[form_ct])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The upstream got the form as sent.
    let seen = up.seen.lock().unwrap().join("\n");
    assert!(seen.contains("MediaUrl=a&MediaUrl=b"), "{seen}");
    let r = s
        .call("POST", "/_understudy/api/drafts/flush", None, &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    s.stop().await.unwrap();
    let files = json_files(&drafts);
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        !text.contains(FORM_SECRET),
        "the form secret reached the draft: {text}"
    );
    let op: Value = serde_json::from_str(&text).unwrap();
    let input = &op["mock"]["examples"][0]["input"];
    assert_eq!(input["To"], "+15551230000", "{op:#}");
    assert_eq!(input["MediaUrl"], json!(["a", "b"]), "{op:#}");
    // `drift` will send it as the form it was.
    assert_eq!(op["match"]["body"], "form", "{op:#}");
    // The draft, served in replay, answers the same form body as recorded.
    let (_p2, s2) = replay_of(&drafts).await;
    let same = "To=%2B15551230000&Body=hello&MediaUrl=a&MediaUrl=b&password=x";
    let r = s2
        .call_raw("POST", "/tw/Accounts/AC1/Messages", same, &[form_ct])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json(), json!({"sid": "SM1", "status": "queued"}));
    s2.stop().await.unwrap();
}

/// The `match.body` of every operation file of `tw`, sorted (`-` where it has none).
fn match_bodies(p: &Project) -> Vec<String> {
    let mut out: Vec<String> = json_files(&p.ops_dir("tw"))
        .iter()
        .map(|f| {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            v["match"]["body"].as_str().unwrap_or("-").to_string()
        })
        .collect();
    out.sort();
    out
}

fn run_import(p: &Project, from: &str, file: &std::path::Path) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args([
            "import",
            "--from",
            from,
            "--integration",
            "tw",
            "--format",
            "json",
            "--config",
        ])
        .arg(p.config_path())
        .arg("--out")
        .arg(p.ops_dir("tw"))
        .arg(file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "{from} report is not JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[tokio::test]
async fn har_and_postman_form_bodies_import_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let har = json!({"log": {"version": "1.2", "creator": {"name": "test", "version": "1"}, "entries": [
        {"request": {"method": "POST", "url": "https://api.example.test/Accounts/AC1/Messages",
            "headers": [{"name": "Content-Type", "value": "application/x-www-form-urlencoded"}],
            "postData": {"mimeType": "application/x-www-form-urlencoded",
                "text": format!("To=%2B15551230000&MediaUrl=a&MediaUrl=b&password={FORM_SECRET}"),
                "params": [{"name": "To", "value": "+15551230000"}, {"name": "MediaUrl", "value": "a"},
                           {"name": "MediaUrl", "value": "b"}, {"name": "password", "value": FORM_SECRET}]}},
         "response": {"status": 201, "headers": [{"name": "Content-Type", "value": "application/json"}],
            "content": {"mimeType": "application/json", "text": "{\"sid\":\"SM1\"}"}}},
        {"request": {"method": "POST", "url": "https://api.example.test/Uploads",
            "headers": [],
            "postData": {"mimeType": "multipart/form-data; boundary=zz",
                "text": "--zz\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nreport\r\n--zz--\r\n"}},
         "response": {"status": 201, "headers": [],
            "content": {"mimeType": "application/json", "text": "{\"id\":\"U1\"}"}}}
    ]}});
    let har_file = dir.path().join("forms.har");
    std::fs::write(&har_file, har.to_string()).unwrap();
    let p = Project::new(&[("tw", "rest")]);
    p.write_config(json!({"integrations": {"tw": {
        "profile": "rest", "upstream": "https://api.example.test", "operations": "mocks/tw"}}}));
    let report = run_import(&p, "har", &har_file);
    assert_eq!(report["summary"]["written"], 2, "{report:#}");
    assert_eq!(match_bodies(&p), ["form", "multipart"], "{report:#}");
    let text: String = json_files(&p.ops_dir("tw"))
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert!(
        !text.contains(FORM_SECRET),
        "the form secret reached an import"
    );
    let s = Server::start(&p).await;
    let form_ct = ("content-type", "application/x-www-form-urlencoded");
    let r = s
        .call_raw(
            "POST",
            "/tw/Accounts/AC1/Messages",
            // The recorded call had a password: the draft requires one (its value scrubbed).
            "To=%2B15551230000&MediaUrl=a&MediaUrl=b&password=another",
            &[form_ct],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json(), json!({"sid": "SM1"}));
    let r = s
        .call_raw(
            "POST",
            "/tw/Uploads",
            "--q\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nreport\r\n--q--\r\n",
            &[("content-type", "multipart/form-data; boundary=q")],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json(), json!({"id": "U1"}));
    s.stop().await.unwrap();

    // Postman: `urlencoded` and `formdata` bodies (a `file` field is noted, left out).
    let coll = json!({"info": {"name": "forms", "schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"},
        "variable": [{"key": "baseUrl", "value": "https://api.example.test"}],
        "item": [{"name": "send", "request": {"method": "POST", "url": "{{baseUrl}}/Accounts/AC2/Messages",
            "body": {"mode": "urlencoded", "urlencoded": [
                {"key": "To", "value": "+15550000000"}, {"key": "MediaUrl", "value": "x"},
                {"key": "MediaUrl", "value": "y"}, {"key": "Off", "value": "1", "disabled": true}]}},
          "response": [{"name": "ok", "code": 201, "header": [{"key": "Content-Type", "value": "application/json"}],
            "body": "{\"sid\":\"SM2\"}",
            "originalRequest": {"method": "POST", "url": "{{baseUrl}}/Accounts/AC2/Messages",
              "body": {"mode": "urlencoded", "urlencoded": [
                {"key": "To", "value": "+15550000000"}, {"key": "MediaUrl", "value": "x"},
                {"key": "MediaUrl", "value": "y"}, {"key": "Off", "value": "1", "disabled": true}]}}}]},
         {"name": "upload", "request": {"method": "POST", "url": "{{baseUrl}}/Files",
            "body": {"mode": "formdata", "formdata": [{"key": "name", "value": "a.txt", "type": "text"},
                {"key": "file", "type": "file", "src": "/tmp/a.txt"}]}},
          "response": [{"name": "ok", "code": 201, "body": "{\"id\":\"F1\"}"}]}]});
    let pm_file = dir.path().join("forms.postman_collection.json");
    std::fs::write(&pm_file, coll.to_string()).unwrap();
    let p = Project::new(&[("tw", "rest")]);
    p.write_config(json!({"integrations": {"tw": {
        "profile": "rest", "upstream": "https://api.example.test", "operations": "mocks/tw"}}}));
    let report = run_import(&p, "postman", &pm_file);
    assert_eq!(report["summary"]["written"], 2, "{report:#}");
    // Postman sends `urlencoded` / `formdata` bodies as forms without a header saying so.
    assert_eq!(match_bodies(&p), ["form", "multipart"], "{report:#}");
    let notes = report["not_mapped"].to_string();
    assert!(
        notes.contains("item/1/request/body/formdata/1") && notes.contains("file field `file`"),
        "{notes}"
    );
    let s = Server::start(&p).await;
    let r = s
        .call_raw(
            "POST",
            "/tw/Accounts/AC2/Messages",
            "To=%2B15550000000&MediaUrl=x&MediaUrl=y",
            &[form_ct],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json(), json!({"sid": "SM2"}));
    let r = s
        .call_raw("POST", "/tw/Files", "name=a.txt", &[form_ct])
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    s.stop().await.unwrap();
}

/// A read operation (`write: false`) whose request body is a form, for `drift`.
fn form_read_op(id: &str, path: &str, body: Option<&str>, input: Value) -> Value {
    let result = json!({"status": 200, "data": {"sid": "SM1", "status": "queued"}});
    let mut op = json!({
        "operation_id": id,
        "match": {"method": "POST", "path": path},
        "write": false,
        "input_schema": {"type": "object"},
        "output_schema": {"type": "object", "required": ["status", "data"],
                          "properties": {"status": {"type": "integer"}}},
        "mock": {"schema_version": 1, "default_variant": "ok",
                 "variants": {"ok": {"result": result.clone()}},
                 "examples": [{"variant": "ok", "input": input, "expected": result}]},
    });
    if let Some(b) = body {
        op["match"]["body"] = json!(b);
    }
    op
}

/// `understudy drift` sends an operation's example as a form when its `match` says
/// `"body": "form"` / `"multipart"` (and as JSON without it): the loopback upstream sees the
/// Content-Type and the encoded fields — repeated keys, bracket names, spelled numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_sends_form_bodies_as_forms() {
    let up = crate::control::counting_upstream(json!({"sid": "SM1", "status": "queued"})).await;
    let p = Project::new(&[("tw", "rest")]);
    p.write_config(json!({"integrations": {"tw": {
        "profile": "rest", "upstream": up.url, "operations": "mocks/tw"}}}));
    p.op(
        "tw",
        form_read_op(
            "search_messages",
            "/Accounts/{AccountSid}/Search.json",
            Some("form"),
            json!({"AccountSid": "AC1", "To": "+1 555", "MediaUrl": ["a", "b"],
                   "metadata": {"k": "v"}, "Price": 12}),
        ),
    );
    p.op(
        "tw",
        form_read_op(
            "search_uploads",
            "/Uploads/search",
            Some("multipart"),
            json!({"title": "report"}),
        ),
    );
    p.op(
        "tw",
        form_read_op("lookup", "/lookup", None, json!({"title": "report"})),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args([
            "drift",
            "--integration",
            "tw",
            "--format",
            "json",
            "--config",
        ])
        .arg(p.config_path())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "drift report is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(report["summary"]["ok"], 3, "{report:#}");
    let seen = up.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    // Each seen request is its head (lines ending in CRLF), a bare `\n`, its body.
    let find = |line: &str| -> (String, String) {
        let s = seen
            .iter()
            .find(|s| s.starts_with(line))
            .unwrap_or_else(|| panic!("no `{line}` among {seen:?}"));
        let b = s.as_bytes();
        let cut = (0..b.len())
            .find(|&i| b[i] == b'\n' && (i == 0 || b[i - 1] != b'\r'))
            .unwrap_or(b.len());
        (
            s[..cut].to_string(),
            s[(cut + 1).min(s.len())..].to_string(),
        )
    };
    let (head, body) = find("post /accounts/ac1/search.json");
    assert!(
        head.contains("content-type: application/x-www-form-urlencoded"),
        "{head}"
    );
    // (Heads are read in lower case; the body is as sent.)
    assert_eq!(
        body,
        "MediaUrl=a&MediaUrl=b&Price=12&To=%2B1%20555&metadata%5Bk%5D=v"
    );
    let (head, body) = find("post /uploads/search");
    let boundary = head
        .lines()
        .find_map(|l| l.strip_prefix("content-type: multipart/form-data; boundary="))
        .unwrap_or_else(|| panic!("not multipart: {head}"));
    assert_eq!(
        understudy::http::form::parse_multipart(body.as_bytes(), boundary).unwrap(),
        json!({"title": "report"})
    );
    let (head, body) = find("post /lookup");
    assert!(head.contains("content-type: application/json"), "{head}");
    assert_eq!(body, r#"{"title":"report"}"#);
}
