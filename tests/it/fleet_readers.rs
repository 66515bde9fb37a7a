//! `understudy evidence`, `verify` and `report` of a project whose store is the fleet store
//! (docs/src/operations/fleet-store.md): without `--url` they read the attempt from the
//! PostgreSQL database the project (or `UNDERSTUDY_STORE`) names, as `serve` does — not from
//! an embedded data dir the fleet never wrote. A real PostgreSQL server and a real `serve`
//! process, stopped before the readers run.

use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::fleet::{fleet_project, new_attempt, send, Proc};

fn understudy(args: &[&str], store_env: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_understudy"));
    c.args(args).env_remove("UNDERSTUDY_STORE");
    if let Some(url) = store_env {
        c.env("UNDERSTUDY_STORE", url);
    }
    c.output().expect("run understudy")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("an exit code")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readers_judge_an_attempt_from_the_projects_fleet_store() {
    let Some((p, url)) = fleet_project() else {
        return;
    };
    let mut serve = Proc::start(&p, &url);
    let (good, good_token) = new_attempt(&serve).await;
    let (bad, bad_token) = new_attempt(&serve).await;
    let r = send(
        &serve.url(&format!("/~{good_token}/api/counter")),
        "POST",
        Some(&json!({ "n": 1 })),
        &[],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // A harness error: a request no operation matches.
    let r = send(
        &serve.url(&format!("/~{bad_token}/api/no-such-operation")),
        "GET",
        None,
        &[],
    )
    .await;
    assert_ne!(r.status, 200, "{}", r.text);
    for id in [&good, &bad] {
        let r = send(
            &serve.url(&format!("/_understudy/api/attempts/{id}")),
            "DELETE",
            None,
            &[],
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    serve.kill();

    let cfg = p.config_path();
    let cfg = cfg.to_str().unwrap();
    // evidence: the stored envelope, exit by its verdict.
    let o = understudy(&["evidence", &good, "--config", cfg], None);
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let ev: Value = serde_json::from_slice(&o.stdout).expect("the envelope on stdout");
    assert_eq!(ev["verdict"], "pass", "{ev:#}");
    assert_eq!(ev["tool_events"].as_array().unwrap().len(), 1, "{ev:#}");
    let o = understudy(&["evidence", &bad, "--config", cfg], None);
    assert_eq!(code(&o), 1, "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("unmatched_request"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // verify and report read the same store.
    let contract = p.path().join("bump_once.yaml");
    std::fs::write(
        &contract,
        "version: 1\nid: bump_once\nrisk: blocking\npolicy_version: t1\ntool: api/bump\nexpected:\n  result_status: ok\n",
    )
    .unwrap();
    let contract = contract.to_str().unwrap();
    let o = understudy(
        &["verify", &good, "--config", cfg, "--contract", contract],
        None,
    );
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    // The bad attempt never bumped and made a harness error: fail.
    let o = understudy(
        &["verify", &bad, "--config", cfg, "--contract", contract],
        None,
    );
    assert_eq!(code(&o), 1, "{}", String::from_utf8_lossy(&o.stderr));
    let o = understudy(&["report", &bad, "--config", cfg, "--format", "json"], None);
    assert_eq!(code(&o), 1, "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).expect("a JSON report");
    assert_eq!(report["verdict"], "fail", "{report:#}");
    let o = understudy(
        &["report", &good, "--config", cfg, "--format", "json"],
        None,
    );
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));

    // An explicit --data-dir is the embedded store in it: the fleet never wrote there, so
    // there is nothing to judge (exit 2), never a pass.
    let elsewhere = p.path().join("elsewhere");
    let o = understudy(
        &[
            "evidence",
            &good,
            "--config",
            cfg,
            "--data-dir",
            elsewhere.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code(&o), 2, "{}", String::from_utf8_lossy(&o.stderr));

    // UNDERSTUDY_STORE names the fleet store for a project file without `store`.
    p.write_config(json!({}));
    let o = understudy(&["evidence", &good, "--config", cfg], Some(&url));
    assert_eq!(code(&o), 0, "{}", String::from_utf8_lossy(&o.stderr));
    let o = understudy(&["evidence", &good, "--config", cfg], None);
    assert_eq!(
        code(&o),
        2,
        "without the fleet store the attempt is not found: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = understudy(
        &["evidence", &good, "--config", cfg],
        Some("mysql://x@127.0.0.1/db"),
    );
    assert_eq!(code(&o), 2);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("UNDERSTUDY_STORE"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
