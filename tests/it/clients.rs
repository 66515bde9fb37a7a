//! Real client libraries against understudy. The Salesforce wire is proven with the real
//! simple-salesforce (Python) client, run through `serve --forward-proxy` on the bundled
//! example project. The client must be installed (`.ci/run` installs it); outside CI a missing
//! client skips the test with a note, in CI (`CI=true`) it fails.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support;

#[test]
fn simple_salesforce_through_the_forward_proxy_on_the_example() {
    if !support::python_has(&["simple_salesforce"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate::support::copy_dir(&root.join("examples/healthplus"), dir.path());
    let bin = env!("CARGO_BIN_EXE_understudy");
    let out = Command::new(bin)
        .args(["ca", "init"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    let mut child = Command::new(bin)
        .args(["serve", "--forward-proxy", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env_remove("UNDERSTUDY_ADMIN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.next().expect("readiness line").unwrap();
    let addr = ready
        .strip_prefix("understudy listening on http://")
        .unwrap_or_else(|| panic!("unexpected readiness line {ready:?}"))
        .to_string();

    let out = Command::new("python3")
        .arg(root.join("tests/clients/simple_salesforce_client.py"))
        .env("HTTPS_PROXY", format!("http://{addr}"))
        .env("https_proxy", format!("http://{addr}"))
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env(
            "REQUESTS_CA_BUNDLE",
            dir.path().join("certs/understudy-ca.pem"),
        )
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.status.success(),
        "simple-salesforce client failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("simple-salesforce: ok"));
}
