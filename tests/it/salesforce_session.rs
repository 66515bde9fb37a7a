//! A Salesforce call whose path names no integration, routed by the session the login handed
//! out (docs/src/guides/salesforce.md#bulk-api-20-through-a-base-url): what jsforce's Bulk
//! API 2.0 sends after a login at the attempt's base URL (`/services/data/…` at the root,
//! `/~<token>/services/data/…`). Only a session understudy handed out moves such a call —
//! to its own attempt and integration; an unknown bearer, a forged MAC, or another attempt's
//! session under a token leave it unmatched, refused and recorded as before, and the
//! session itself is never stored.

use serde_json::json;

use crate::support::{Attempt, Project, Resp, Server};

const FORM: &str =
    "grant_type=password&client_id=CK&client_secret=CS&username=ada%40example.com&password=pw";

async fn login(s: &Server, base: &str) -> String {
    let r = s
        .call_raw(
            "POST",
            &format!("{base}/services/oauth2/token"),
            FORM,
            &[("content-type", "application/x-www-form-urlencoded")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["access_token"].as_str().unwrap().to_string()
}

async fn create_job(s: &Server, path: &str, auth: Option<&str>) -> Resp {
    let job = json!({"object": "Contact", "operation": "insert"});
    let headers: Vec<(&str, &str)> = auth.map(|a| ("authorization", a)).into_iter().collect();
    s.call("POST", path, Some(&job), &headers).await
}

/// (operation or error code, integration) of every call of an attempt.
async fn calls(s: &Server, attempt_id: &str) -> Vec<(String, String)> {
    let ev = s.evidence(attempt_id).await;
    ev["tool_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let what = e["operation_id"]
                .as_str()
                .or_else(|| e["error"]["code"].as_str())
                .unwrap_or("?");
            (
                what.to_string(),
                e["integration"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn refused_unmatched(r: &Resp) {
    assert_eq!(r.status, 500, "{}", r.text);
    assert_eq!(
        r.header("understudy-error"),
        Some("unmatched_request"),
        "{}",
        r.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_out_session_routes_a_path_without_an_integration_and_nothing_else_does() {
    let p = Project::new(&[("crm", "salesforce"), ("ledger", "salesforce")]);
    let s = Server::start(&p).await;
    let a: Attempt = s.attempt(json!({})).await;
    let b: Attempt = s.attempt(json!({})).await;
    let sa = login(&s, &a.base("crm")).await;
    let sa_ledger = login(&s, &a.base("ledger")).await;
    let sb = login(&s, &b.base("crm")).await;
    assert_ne!(sa, sb);
    assert_ne!(sa, sa_ledger, "a session names its integration");

    // At the root (an ingest path jsforce resolved against the instance URL's origin).
    let bulk = "/services/data/v59.0/jobs/ingest";
    let r = create_job(&s, bulk, Some(&format!("Bearer {sa}"))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let job = r.json()["id"].as_str().unwrap().to_string();
    assert_eq!(r.json()["state"], "Open");
    // `OAuth <session>` is Salesforce's older spelling of the same header.
    let r = s
        .call(
            "GET",
            &format!("{bulk}/{job}"),
            None,
            &[("authorization", &format!("OAuth {sa}"))],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["id"], job.as_str());
    // Under the attempt's token (a query-job path that replaced the base URL's last segment).
    let q = json!({"operation": "query", "query": "SELECT Id FROM Contact"});
    let r = s
        .call(
            "POST",
            &format!("/~{}/services/data/v59.0/jobs/query", a.token),
            Some(&q),
            &[("authorization", &format!("Bearer {sa}"))],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The other integration's session reaches that integration.
    let r = create_job(&s, bulk, Some(&format!("Bearer {sa_ledger}"))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let crm = |op: &str| (op.to_string(), "crm".to_string());
    assert_eq!(
        calls(&s, &a.id).await,
        vec![
            crm("oauth_token"),
            ("oauth_token".into(), "ledger".into()),
            crm("bulk_ingest_create"),
            crm("bulk_ingest_get"),
            crm("bulk_query_create"),
            ("bulk_ingest_create".into(), "ledger".into()),
        ]
    );

    // What does not move a call: no bearer, a bearer that is no session of this server, a
    // session whose MAC was tampered with, a token's path with another attempt's session.
    let before_default = calls(&s, &s.default_attempt()).await.len();
    refused_unmatched(&create_job(&s, bulk, None).await);
    refused_unmatched(&create_job(&s, bulk, Some("Bearer 00D000000000001!AQ4AQjunk")).await);
    let mut forged = sa.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    refused_unmatched(&create_job(&s, bulk, Some(&format!("Bearer {forged}"))).await);
    // A session made under another secret, claiming attempt A.
    let claim = sa.split_once('!').unwrap().1.split_once('.').unwrap().0;
    let foreign = format!("00D000000000001!{claim}.{}", "x".repeat(64));
    refused_unmatched(&create_job(&s, bulk, Some(&format!("Bearer {foreign}"))).await);
    let r = create_job(
        &s,
        &format!("/~{}/services/data/v59.0/jobs/ingest", b.token),
        Some(&format!("Bearer {sa}")),
    )
    .await;
    refused_unmatched(&r);
    // Each refusal is recorded where the call landed without the session: the default
    // attempt at the root, attempt B under B's token; attempt A saw none of them.
    let default_calls = calls(&s, &s.default_attempt()).await;
    assert_eq!(
        default_calls[before_default..],
        vec![("unmatched_request".to_string(), "services".to_string()); 4]
    );
    assert_eq!(
        calls(&s, &b.id).await,
        vec![
            crm("oauth_token"),
            ("unmatched_request".into(), "services".into())
        ]
    );
    assert_eq!(calls(&s, &a.id).await.len(), 6);

    // A session of an ended attempt still names that attempt: the call is its `attempt_ended`.
    s.end_attempt(&a.id).await;
    let r = create_job(&s, bulk, Some(&format!("Bearer {sa}"))).await;
    assert_eq!(r.status, 410, "{}", r.text);
    assert_eq!(
        calls(&s, &s.default_attempt()).await.len(),
        before_default + 4
    );

    // No session reached the store.
    let data = p.data_dir();
    s.stop().await.unwrap();
    let mut all = Vec::new();
    crate::salesforce::files(&data, &mut all);
    assert!(!all.is_empty());
    for (path, bytes) in &all {
        for tok in [&sa, &sb, &sa_ledger] {
            // The MAC (after the first dot; it may hold dots itself).
            let secret_part = tok.split_once('.').unwrap().1;
            if let Some(at) = bytes
                .windows(secret_part.len())
                .position(|w| w == secret_part.as_bytes())
            {
                let lo = at.saturating_sub(250);
                let hi = (at + 250).min(bytes.len());
                panic!(
                    "a session reached {}: …{}…",
                    path.display(),
                    String::from_utf8_lossy(&bytes[lo..hi])
                );
            }
        }
    }
}
