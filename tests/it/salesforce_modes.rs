//! The Salesforce login and Bulk API 2.0 outside replay (docs/src/guides/salesforce.md): in
//! dry-run the login reaches the real system (a loopback upstream here) and nothing secret of
//! it is stored — not the password, the consumer secret nor the real token it answered — a
//! Bulk *query* job goes through (a read sent as POST) while the ingest writes are blocked;
//! in record mode the login is not drafted (replay answers it) and the data dir holds no secret;
//! a query's pages (`nextRecordsUrl`) are recorded and a replay of the drafts answers them in
//! the same order.

use std::path::Path;

use hyper::Response;
use serde_json::{json, Value};

use crate::dryrun::{json_resp, upstream, Seen, TestBody};
use crate::support::{Project, Server};

const PASSWORD: &str = "Pa55-real-never-stored";
const CONSUMER_SECRET: &str = "Consumer-real-never-stored";
const REAL_TOKEN: &str = "00Dreal!REAL-TOKEN-never-stored";

fn real_salesforce() -> impl Fn(&Seen) -> Response<TestBody> + Send + Sync + 'static {
    |s: &Seen| match (s.method.as_str(), s.path()) {
        ("POST", "/services/oauth2/token") => json_resp(
            200,
            &json!({"access_token": REAL_TOKEN, "instance_url": "https://real.my.salesforce.com",
                    "id": "https://login.salesforce.com/id/00Dreal/005real", "token_type": "Bearer",
                    "issued_at": "1700000000000", "signature": "c2lnbmF0dXJl"}),
        ),
        ("POST", p) if p.ends_with("/jobs/query") => json_resp(
            200,
            &json!({"id": "750real000000001AAA", "operation": "query", "object": "Contact",
                    "state": "UploadComplete"}),
        ),
        _ => json_resp(404, &json!([{"errorCode": "NOT_FOUND", "message": "nope"}])),
    }
}

fn project(mode: &str, upstream: &str) -> Project {
    let p = Project::new(&[("crm", "salesforce")]);
    p.write_config(json!({ "mode": mode, "integrations": { "crm": {
        "profile": "salesforce", "operations": "mocks/crm", "upstream": upstream } } }));
    p
}

fn login_form() -> String {
    format!(
        "grant_type=password&client_id=CK-real&client_secret={CONSUMER_SECRET}&username=ada%40healthplus.example&password={PASSWORD}"
    )
}

/// Every file under `dir` holds none of the secrets.
fn assert_no_secret_under(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let bytes = std::fs::read(&p).unwrap_or_default();
            seen += 1;
            for s in [PASSWORD, CONSUMER_SECRET, "REAL-TOKEN-never-stored"] {
                assert!(
                    !bytes.windows(s.len()).any(|w| w == s.as_bytes()),
                    "{s} found in {}",
                    p.display()
                );
            }
        }
    }
    assert!(seen > 0, "{} holds files", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_logs_in_for_real_stores_nothing_secret_and_lets_only_the_bulk_query_through() {
    let (addr, log) = upstream(None, real_salesforce()).await;
    let p = project("dry-run", &format!("http://{addr}"));
    let s = Server::start(&p).await;
    let form = [("content-type", "application/x-www-form-urlencoded")];
    let r = s
        .call_raw("POST", "/crm/services/oauth2/token", &login_form(), &form)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The agent gets the real session: the real reads need it.
    assert_eq!(r.json()["access_token"], REAL_TOKEN);
    let base = "/crm/services/data/v60.0";
    let q = json!({"operation": "query", "query": "SELECT Id FROM Contact"});
    let r = s
        .call("POST", &format!("{base}/jobs/query"), Some(&q), &[])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["id"], "750real000000001AAA");
    let job = json!({"object": "Contact", "operation": "insert"});
    let r = s
        .call("POST", &format!("{base}/jobs/ingest"), Some(&job), &[])
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(r.json()[0]["errorCode"], "INSUFFICIENT_ACCESS_OR_READONLY");
    let r = s
        .call_raw(
            "PUT",
            &format!("{base}/jobs/ingest/750x/batches"),
            "LastName\nLovelace\n",
            &[("content-type", "text/csv")],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    let seen: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .map(|x| format!("{} {}", x.method, x.path()))
        .collect();
    assert_eq!(
        seen,
        vec![
            "POST /services/oauth2/token".to_string(),
            "POST /services/data/v60.0/jobs/query".to_string()
        ],
        "the login and the query job reached the real system, the ingest writes did not"
    );
    let ev = s.evidence(&s.default_attempt()).await;
    let events: Vec<Value> = ev["tool_events"].as_array().unwrap().clone();
    let statuses: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["operation_id"].as_str().unwrap(),
                e["result_status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("oauth_token", "forwarded"),
            ("bulk_query_create", "forwarded"),
            ("bulk_ingest_create", "blocked"),
            ("bulk_ingest_upload", "blocked"),
        ]
    );
    let text = ev.to_string();
    for secret in [PASSWORD, CONSUMER_SECRET, "REAL-TOKEN-never-stored"] {
        assert!(
            !text.contains(secret),
            "{secret} reached the evidence: {text}"
        );
    }
    s.stop().await.unwrap();
    assert_no_secret_under(&p.data_dir());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_does_not_draft_the_login_and_stores_no_secret() {
    let (addr, _log) = upstream(None, real_salesforce()).await;
    let p = project("record", &format!("http://{addr}"));
    let out = p.path().join("drafts");
    let mut opts = p.options();
    opts.forward.out_dir = Some(out.clone());
    let s = Server::start_with(opts).await;
    let form = [("content-type", "application/x-www-form-urlencoded")];
    let r = s
        .call_raw("POST", "/crm/services/oauth2/token", &login_form(), &form)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // Recording talks to the real system: the client gets the real session.
    assert_eq!(r.json()["access_token"], REAL_TOKEN);
    s.stop().await.unwrap();
    // No draft of the login (its answer names the real session and instance URL; replay
    // answers the login itself), and the notes say why.
    let listing = walk(&out);
    assert!(
        !listing.iter().any(|f| f.ends_with(".json")),
        "no draft: {listing:?}"
    );
    let notes = std::fs::read_to_string(out.join("crm/record-notes.txt"))
        .unwrap_or_else(|e| panic!("notes ({e}): {listing:?}"));
    assert!(notes.contains("1 login exchange(s) not drafted"), "{notes}");
    assert!(!notes.contains("real.my.salesforce.com"), "{notes}");
    assert_no_secret_under(&out);
    assert_no_secret_under(&p.data_dir());
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    out
}

/// A real org whose query answers three pages, each naming the next by `nextRecordsUrl`.
fn paged_salesforce() -> impl Fn(&Seen) -> Response<TestBody> + Send + Sync + 'static {
    |s: &Seen| {
        let page = |n: usize, next: Option<&str>| {
            let recs: Vec<Value> = (0..2)
                .map(|i| json!({"attributes": {"type": "Contact"}, "Id": format!("003{n}{i}"), "LastName": format!("L{n}{i}")}))
                .collect();
            let mut b = json!({"totalSize": 6, "done": next.is_none(), "records": recs});
            if let Some(u) = next {
                b["nextRecordsUrl"] = json!(u);
            }
            json_resp(200, &b)
        };
        match s.path() {
            "/services/data/v60.0/query" => {
                page(1, Some("/services/data/v60.0/query/01gR00000000001-2"))
            }
            "/services/data/v60.0/query/01gR00000000001-2" => {
                page(2, Some("/services/data/v60.0/query/01gR00000000001-4"))
            }
            "/services/data/v60.0/query/01gR00000000001-4" => page(3, None),
            _ => json_resp(404, &json!([{"errorCode": "NOT_FOUND", "message": "nope"}])),
        }
    }
}

/// Follow `nextRecordsUrl` from the first page, as simple-salesforce's `query_all` does.
async fn all_pages(s: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    let r = s
        .call(
            "GET",
            "/crm/services/data/v60.0/query?q=SELECT+Id,+LastName+FROM+Contact",
            None,
            &[],
        )
        .await;
    let mut page = r.json();
    loop {
        out.push(page.clone());
        let Some(next) = page["nextRecordsUrl"].as_str() else {
            break;
        };
        page = s
            .call("GET", &format!("/crm{next}"), None, &[])
            .await
            .json();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_pages_are_recorded_and_replayed_in_order() {
    let (addr, _log) = upstream(None, paged_salesforce()).await;
    let p = project("record", &format!("http://{addr}"));
    let out = p.path().join("drafts");
    let mut opts = p.options();
    opts.forward.out_dir = Some(out.clone());
    let s = Server::start_with(opts).await;
    let recorded = all_pages(&s).await;
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    assert_eq!(recorded[2]["records"][1]["LastName"], "L31");
    s.stop().await.unwrap();
    let dir = out.join("crm");
    let replay = Project::new(&[("crm", "salesforce")]);
    replay.write_config(json!({ "integrations": { "crm": {
        "profile": "salesforce", "operations": dir.to_str().unwrap() } } }));
    let r = Server::start(&replay).await;
    let replayed = all_pages(&r).await;
    assert_eq!(replayed, recorded, "drafts: {:?}", walk(&dir));
    let ev = r.evidence(&r.default_attempt()).await;
    let ops: Vec<&str> = ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["result_status"].as_str().unwrap())
        .collect();
    assert_eq!(ops, vec!["ok", "ok", "ok"]);
    r.stop().await.unwrap();
}
