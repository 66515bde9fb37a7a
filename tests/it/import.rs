//! `understudy import` on real inputs (tests/fixtures/import/README.md says how each was
//! made): import → check → a real server → the imported mocks answer what the source
//! answered.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::support::{send, Project, Server};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(rel)
}

/// Run the real binary; (exit code, stdout, stderr).
fn understudy(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(args)
        .output()
        .expect("run understudy");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A project with one integration `crm` of `profile` (and `upstream`, never contacted).
fn project(profile: &str, upstream: &str) -> Project {
    let p = Project::new(&[("crm", profile)]);
    p.write_config(json!({ "integrations": { "crm": {
        "profile": profile, "upstream": upstream, "operations": "mocks/crm" } } }));
    p
}

fn import(p: &Project, from: &str, files: &[&Path], extra: &[&str]) -> (i32, Value) {
    let cfg = p.config_path();
    let out = p.ops_dir("crm");
    let mut args = vec![
        "import",
        "--from",
        from,
        "--integration",
        "crm",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--format",
        "json",
    ];
    let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(files.iter().map(String::as_str));
    args.extend(extra);
    let (code, stdout, stderr) = understudy(&args);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("report is not JSON ({e}): {stdout}\n{stderr}"));
    (code, report)
}

fn check_ok(p: &Project) {
    let (code, out, err) = understudy(&["check", "--config", p.config_path().to_str().unwrap()]);
    assert_eq!(code, 0, "check failed:\n{out}\n{err}");
}

/// Every file of `dir`, as text.
fn all_text(dir: &Path) -> String {
    let mut s = String::new();
    for e in std::fs::read_dir(dir).unwrap() {
        s.push_str(&std::fs::read_to_string(e.unwrap().path()).unwrap());
    }
    s
}

const SECRETS: &[&str] = &[
    "00D5g000004SECRET",
    "FakeSessionTokenValue",
    "Zq3Xk9vPEe6secretcookie",
];

/// `(method, path+query, request body, status, response body)`.
type Entry = (String, String, Option<Value>, u16, Option<Value>);

/// Every HAR entry.
fn har_entries(file: &Path) -> Vec<Entry> {
    let har: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    har["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let url = e["request"]["url"].as_str().unwrap();
            let tail = &url[url.find("/services").unwrap()..];
            let req = e["request"]["postData"]["text"]
                .as_str()
                .map(|t| serde_json::from_str(t).unwrap());
            let resp = e["response"]["content"]["text"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(|t| serde_json::from_str(t).unwrap());
            (
                e["request"]["method"].as_str().unwrap().to_string(),
                tail.to_string(),
                req,
                e["response"]["status"].as_u64().unwrap() as u16,
                resp,
            )
        })
        .collect()
}

#[tokio::test]
async fn har_from_mitmproxy_replays_every_entry() {
    let har = fixture("har/salesforce.har");
    let p = project("salesforce", "http://127.0.0.1:18181");
    let (code, report) = import(&p, "har", &[&har], &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["summary"]["written"], 4, "{report:#}");
    assert!(report["info"][0]
        .as_str()
        .unwrap()
        .contains("secrets scrubbed"));
    let text = all_text(&p.ops_dir("crm"));
    for s in SECRETS {
        assert!(!text.contains(s), "secret {s} reached the drafts");
    }
    check_ok(&p);

    // A second import does not replace what is there.
    let (code, again) = import(&p, "har", &[&har], &[]);
    assert_eq!(code, 1);
    assert_eq!(again["summary"]["exists"], 4, "{again:#}");
    let (code, forced) = import(&p, "har", &[&har], &["--force"]);
    assert_eq!(code, 0, "{forced:#}");

    let server = Server::start(&p).await;
    for (method, tail, body, status, data) in har_entries(&har) {
        let r = send(
            &server.http,
            &method,
            &server.url(&format!("/crm{tail}")),
            body.as_ref(),
            &[],
        )
        .await;
        assert_eq!(r.status, status, "{method} {tail}: {}", r.text);
        match data {
            Some(d) => assert_eq!(r.json(), d, "{method} {tail}"),
            None => assert!(r.text.is_empty(), "{method} {tail}: {}", r.text),
        }
    }
    server.stop().await.unwrap();
}

/// Percent-encode a query value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn wiremock_recordings_replay_every_mapping() {
    let dir = fixture("wiremock");
    let p = project("salesforce", "http://127.0.0.1:18181");
    let (code, report) = import(&p, "wiremock", &[&dir], &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["summary"]["written"], 5, "{report:#}");
    let text = all_text(&p.ops_dir("crm"));
    for s in SECRETS {
        assert!(!text.contains(s), "secret {s} reached the operations");
    }
    check_ok(&p);

    let mut mappings: Vec<Value> = std::fs::read_dir(dir.join("mappings"))
        .unwrap()
        .map(|e| {
            serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap()
        })
        .collect();
    // A scenario's first step before the steps that need its later states.
    mappings.sort_by_key(|m| {
        let later = m["requiredScenarioState"]
            .as_str()
            .is_some_and(|s| s != "Started");
        (later, m["insertionIndex"].as_i64())
    });
    let server = Server::start(&p).await;
    for m in &mappings {
        let req = &m["request"];
        let mut url = req["url"]
            .as_str()
            .or(req["urlPath"].as_str())
            .unwrap()
            .to_string();
        if let Some(q) = req["queryParameters"].as_object() {
            let parts: Vec<String> = q
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{k}={}",
                        enc(v["hasExactly"][0]["equalTo"].as_str().unwrap())
                    )
                })
                .collect();
            url = format!("{url}?{}", parts.join("&"));
        }
        let body: Option<Value> = req["bodyPatterns"][0]["equalToJson"]
            .as_str()
            .map(|s| serde_json::from_str(s).unwrap());
        let method = req["method"].as_str().unwrap();
        let r = send(
            &server.http,
            method,
            &server.url(&format!("/crm{url}")),
            body.as_ref(),
            &[("Accept", "application/json")],
        )
        .await;
        let resp = &m["response"];
        assert_eq!(
            r.status as u64,
            resp["status"].as_u64().unwrap(),
            "{method} {url}: {}",
            r.text
        );
        let want: Value = serde_json::from_str(resp["body"].as_str().unwrap()).unwrap();
        assert_eq!(r.json(), want, "{method} {url}");
    }
    server.stop().await.unwrap();
}

/// Every example of every operation file in `dir` asked of `server` (its variant chosen by an
/// attempt): the answer is the example's `expected` status and JSON body. Returns how many.
async fn replay_examples(server: &Server, dir: &Path) -> usize {
    let mut n = 0;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for f in files {
        let op: understudy::contract::OperationFile =
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let Some(mock) = &op.mock else { continue };
        for ex in mock["examples"].as_array().unwrap() {
            let req = understudy::upstream::request::request_for(
                op.match_spec.as_ref().unwrap(),
                &ex["input"],
            )
            .unwrap_or_else(|e| panic!("{}: {e}", op.operation_id));
            let attempt = server
                .attempt(json!({"variants": {format!("crm/{}", op.operation_id): ex["variant"]}}))
                .await;
            let url = server.url(&format!("{}{}", attempt.base("crm"), req.rest()));
            let headers: Vec<(&str, &str)> = req
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let r = send(&server.http, &req.method, &url, req.body.as_ref(), &headers).await;
            let want = &ex["expected"];
            assert_eq!(
                r.status as u64,
                want["status"].as_u64().unwrap(),
                "{} {}: {}",
                op.operation_id,
                req.line(),
                r.text
            );
            match want.get("data") {
                Some(d) => assert_eq!(&r.json(), d, "{} {}", op.operation_id, req.line()),
                None => assert!(r.text.is_empty(), "{}: {}", op.operation_id, r.text),
            }
            n += 1;
        }
    }
    n
}

#[tokio::test]
async fn openapi_documents_import_check_and_answer_their_examples() {
    // (fixture, operations, variants from named examples, not-mapped notes expected)
    let cases: &[(&str, usize, usize, &[&str])] = &[
        (
            "openapi/tictactoe-3.1.yaml",
            3,
            3,
            &[
                "header parameter `progressUrl`",
                "minimum, maximum of an integer",
            ],
        ),
        (
            "openapi/petstore-3.0.yaml",
            3,
            3,
            &["optional query parameter `limit`"],
        ),
        ("openapi/api-with-examples-3.0.json", 2, 2, &[]),
    ];
    for (rel, ops, asked, notes) in cases {
        let doc = fixture(rel);
        let p = project("rest", "http://127.0.0.1:18181");
        let (code, report) = import(&p, "openapi", &[&doc], &[]);
        assert_eq!(report["summary"]["written"], *ops, "{rel}: {report:#}");
        assert_eq!(
            code,
            if notes.is_empty() { 0 } else { 1 },
            "{rel}: {report:#}"
        );
        let not_mapped: Vec<String> = report["not_mapped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                assert!(n["file"].as_str().unwrap().ends_with(rel), "{n}");
                assert!(n["path"].as_str().unwrap().starts_with("paths/"), "{n}");
                n["message"].as_str().unwrap().to_string()
            })
            .collect();
        assert!(not_mapped.len() >= notes.len(), "{rel}: {not_mapped:?}");
        for want in *notes {
            assert!(
                not_mapped.iter().any(|m| m.contains(want)),
                "{rel}: no note {want:?} in {not_mapped:?}"
            );
        }
        check_ok(&p);
        let server = Server::start(&p).await;
        let n = replay_examples(&server, &p.ops_dir("crm")).await;
        assert_eq!(n, *asked, "{rel}");
        server.stop().await.unwrap();
    }
}

#[tokio::test]
async fn postman_saved_responses_replay() {
    let file = fixture("postman/petstore.postman_collection.json");
    let p = project("rest", "http://petstore.swagger.io/v1");
    let (code, report) = import(&p, "postman", &[&file], &[]);
    assert_eq!(report["summary"]["written"], 3, "{report:#}");
    // The converter's `default` responses have no status code: listed, never dropped silently.
    assert_eq!(code, 1, "{report:#}");
    let no_code: Vec<&Value> = report["not_mapped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["message"].as_str().unwrap().contains("without `code`"))
        .collect();
    assert_eq!(no_code.len(), 3, "{report:#}");
    assert!(no_code[0]["path"]
        .as_str()
        .unwrap()
        .starts_with("item/0/item/0/response/"));
    check_ok(&p);

    let c: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let server = Server::start(&p).await;
    let mut replayed = 0;
    for item in c["item"][0]["item"].as_array().unwrap() {
        for resp in item["response"].as_array().unwrap() {
            let Some(status) = resp["code"].as_u64() else {
                continue;
            };
            let req = &resp["originalRequest"];
            let vars: std::collections::BTreeMap<&str, &str> = req["url"]["variable"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| (v["key"].as_str().unwrap(), v["value"].as_str().unwrap()))
                .collect();
            let path: Vec<String> = req["url"]["path"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    let s = s.as_str().unwrap();
                    let s = s
                        .strip_prefix(':')
                        .map(|n| vars[n].to_string())
                        .unwrap_or(s.to_string());
                    enc(&s)
                })
                .collect();
            let query: Vec<String> = req["url"]["query"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| {
                    format!(
                        "{}={}",
                        q["key"].as_str().unwrap(),
                        enc(q["value"].as_str().unwrap())
                    )
                })
                .collect();
            let mut url = format!("/crm/{}", path.join("/"));
            if !query.is_empty() {
                url = format!("{url}?{}", query.join("&"));
            }
            let body: Option<Value> = req["body"]["raw"]
                .as_str()
                .map(|r| serde_json::from_str(r).unwrap());
            let method = req["method"].as_str().unwrap();
            let r = send(&server.http, method, &server.url(&url), body.as_ref(), &[]).await;
            assert_eq!(r.status as u64, status, "{method} {url}: {}", r.text);
            match resp["body"].as_str().filter(|b| !b.is_empty()) {
                Some(b) => assert_eq!(
                    r.json(),
                    serde_json::from_str::<Value>(b).unwrap(),
                    "{method} {url}"
                ),
                None => assert!(r.text.is_empty(), "{method} {url}: {}", r.text),
            }
            replayed += 1;
        }
    }
    assert_eq!(replayed, 3);
    server.stop().await.unwrap();
}
