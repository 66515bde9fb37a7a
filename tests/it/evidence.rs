//! The evidence envelope as readers receive it, on both stores: `GET …/evidence` streamed
//! (the verdict last), paged with `?after=SEQ&limit=N` (each page carries the cursor of the
//! next and the verdict over the whole timeline), valid against `schemas/evidence.schema.json`
//! and the typed `understudy::evidence::Envelope` byte for byte; `understudy evidence --url`
//! and `understudy report --url` read the stream or a page. A run with calls, a chaos fault,
//! an agent-side event and a harness error (a fail).

use std::process::Command;

use serde_json::{json, Value};
use understudy::cli::SchemaName;
use understudy::commands::schema::schema;

use crate::pg::Backend;
use crate::support::{standard_project, Server};

const LOOKUP: &str = "/services/data/v60.0/query?q=SELECT%20Id,%20FirstName%20FROM%20Contact%20WHERE%20Phone%20=%20'%2B15550001'";

/// Schema errors of `v` against the evidence schema (empty: valid).
fn schema_errors(v: &Value) -> Vec<String> {
    let s = schema(SchemaName::Evidence);
    let validator = jsonschema::validator_for(&s).expect("the schema compiles");
    validator
        .iter_errors(v)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn understudy(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(args)
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn codes(env: &Value) -> Vec<String> {
    env["verdict_reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_envelope_streams_pages_and_validates_on_both_stores() {
    for backend in Backend::all() {
        let p = standard_project();
        backend.apply(&p);
        let s = Server::start(&p).await;
        let a = s
            .attempt(
                json!({"faults": {"api/bump": {"kind": "status", "after_effect": false,
                "status": 503, "times": 1}}}),
            )
            .await;
        let lookup = format!("{}{LOOKUP}", a.base("crm"));
        let bump = format!("{}/counter", a.base("api"));
        // 1: the fault (503, held back); 2..: ok calls; an input error; an agent event;
        // a harness error (no operation matches).
        let r = s.call("POST", &bump, Some(&json!({"n": 1})), &[]).await;
        assert_eq!(r.status, 503, "{backend:?}: {}", r.text);
        for n in 0..6 {
            let r = s.call("POST", &bump, Some(&json!({"n": n})), &[]).await;
            assert_eq!(r.status, 200, "{}", r.text);
            assert_eq!(s.call("GET", &lookup, None, &[]).await.status, 200);
        }
        let r = s.call("POST", &bump, Some(&json!({"n": "x"})), &[]).await;
        assert!(r.status >= 400, "{}", r.text);
        let r = s
            .call(
                "POST",
                &format!("/_understudy/api/attempts/{}/events", a.id),
                Some(&json!({"name": "told_caller", "kind": "agent_message", "text": "done"})),
                &[],
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        let r = s
            .call("GET", &format!("{}/nothing/here", a.base("api")), None, &[])
            .await;
        assert!(r.status >= 400, "{}", r.text);
        let total: u64 = 1 + 12 + 1 + 1 + 1;

        // The stream: valid, typed byte for byte, the verdict last and fail.
        let r = s
            .call(
                "GET",
                &format!("/_understudy/api/attempts/{}/evidence", a.id),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.header("content-length").is_none(), "streamed, not sized");
        let whole: Value = serde_json::from_str(&r.text).unwrap();
        let errors = schema_errors(&whole);
        assert!(errors.is_empty(), "{backend:?}: {errors:#?}");
        let typed: understudy::evidence::Envelope = serde_json::from_str(&r.text).unwrap();
        assert_eq!(serde_json::to_string(&typed).unwrap(), r.text);
        assert!(r.text.ends_with(r#","verdict":"fail"}"#), "{}", r.text);
        assert_eq!(whole["last_sequence"], total);
        assert_eq!(
            whole["tool_events"].as_array().unwrap().len() as u64,
            total - 1
        );
        assert_eq!(whole["events"].as_array().unwrap().len(), 1);
        assert_eq!(whole["tool_events"][0]["fault"]["kind"], "status");
        assert_eq!(whole["blocked_side_effects"][0]["sequence"], 1);
        assert_eq!(whole["tool_input_errors"].as_array().unwrap().len(), 1);
        assert_eq!(whole["harness_errors"].as_array().unwrap().len(), 1);
        assert_eq!(codes(&whole), ["harness_error"], "{whole:#}");

        // Pages of 4: every entry once, each page valid, each with the whole verdict.
        let mut after = 0;
        let mut seen = Vec::new();
        let mut pages = 0;
        loop {
            let r = s
                .call(
                    "GET",
                    &format!(
                        "/_understudy/api/attempts/{}/evidence?after={after}&limit=4",
                        a.id
                    ),
                    None,
                    &[],
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.text);
            let page = r.json();
            let errors = schema_errors(&page);
            assert!(
                errors.is_empty(),
                "{backend:?} page after {after}: {errors:#?}"
            );
            assert_eq!(page["verdict_reasons"], whole["verdict_reasons"]);
            assert_eq!(page["verdict"], "fail");
            for k in ["tool_events", "events"] {
                for e in page[k].as_array().unwrap() {
                    seen.push(e["sequence"].as_u64().unwrap());
                }
            }
            pages += 1;
            match page["page"]["next_after"].as_u64() {
                Some(n) => after = n,
                None => break,
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (1..=total).collect::<Vec<_>>());
        assert_eq!(pages, total.div_ceil(4));

        // Bad paging parameters are 400 naming the parameter.
        for (q, name) in [
            ("limit=0", "limit"),
            ("after=x", "after"),
            ("limit=10001", "limit"),
        ] {
            let r = s
                .call(
                    "GET",
                    &format!("/_understudy/api/attempts/{}/evidence?{q}", a.id),
                    None,
                    &[],
                )
                .await;
            assert_eq!(r.status, 400, "{q}: {}", r.text);
            assert!(r.text.contains(&format!("`{name}`")), "{}", r.text);
        }

        // The UI pages the report and links the next page.
        let r = s
            .call(
                "GET",
                &format!("/_understudy/ui/attempts/{}?limit=5", a.id),
                None,
                &[],
            )
            .await;
        assert_eq!(r.status, 200);
        assert!(r.text.contains("next page: entries after #5"), "{}", r.text);
        assert!(r.text.contains("the verdict is over all"), "{}", r.text);

        // The CLI streams it (--url) with the verdict's exit code, and reports from a page.
        let base = s.url("");
        let (code, out, err) = understudy(&["evidence", &a.id, "--url", &base]);
        assert_eq!(code, 1, "{err}");
        let cli: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(cli["verdict_reasons"], whole["verdict_reasons"]);
        assert_eq!(cli["tool_events"], whole["tool_events"]);
        assert!(err.contains("harness_error"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let rd = dir.path().join("r");
        let (code, _, err) = understudy(&[
            "report",
            &a.id,
            "--url",
            &base,
            "--report-dir",
            rd.to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{err}");
        let json: Value =
            serde_json::from_slice(&std::fs::read(rd.join("evidence.json")).unwrap()).unwrap();
        assert_eq!(json["tool_events"], whole["tool_events"]);
        let junit = std::fs::read_to_string(rd.join("junit.xml")).unwrap();
        assert!(junit.contains("harness_error"), "{junit}");
        s.stop().await.unwrap();

        // After the stop, the data dir (embedded) streams the same envelope.
        if matches!(backend, Backend::Embedded) {
            let dir = p.data_dir();
            let (code, out, _) =
                understudy(&["evidence", &a.id, "--data-dir", dir.to_str().unwrap()]);
            assert_eq!(code, 1);
            let cli: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(cli["tool_events"], whole["tool_events"]);
            assert!(schema_errors(&cli).is_empty());
        }
    }
}

/// A stream that breaks off carries no verdict, and a missing entry fails the attempt: an
/// evidence file cut in the middle of the timeline reads back as `missing_evidence`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_entry_is_never_a_pass_in_the_stream_or_a_page() {
    let p = standard_project();
    let s = Server::start(&p).await;
    let a = s.attempt(json!({})).await;
    let bump = format!("{}/counter", a.base("api"));
    for n in 0..5 {
        assert_eq!(
            s.call("POST", &bump, Some(&json!({"n": n})), &[])
                .await
                .status,
            200
        );
    }
    assert_eq!(s.evidence(&a.id).await["verdict"], "pass");
    let end = s
        .call(
            "DELETE",
            &format!("/_understudy/api/attempts/{}", a.id),
            None,
            &[],
        )
        .await;
    assert_eq!(end.status, 200);
    assert!(s.app.store.remove_event_for_test(&a.id, 3).unwrap());
    let env = s.evidence(&a.id).await;
    assert_eq!(env["verdict"], "fail", "{env:#}");
    assert_eq!(codes(&env), ["missing_evidence"]);
    let r = s
        .call(
            "GET",
            &format!(
                "/_understudy/api/attempts/{}/evidence?after=3&limit=1",
                a.id
            ),
            None,
            &[],
        )
        .await;
    assert_eq!(r.json()["verdict"], "fail");
    assert_eq!(codes(&r.json()), ["missing_evidence"]);
    s.stop().await.unwrap();
}
