//! Salesforce as agents reach it (docs/src/guides/salesforce.md): the real simple-salesforce
//! (Python) and jsforce 3 (Node) log in to understudy — SOAP, OAuth password, JWT bearer,
//! client credentials, a wrong password — and then read, through the forward proxy
//! (simple-salesforce) and through the attempt's base URL (jsforce, `loginUrl`); then both
//! write to the default org through the forward proxy — Bulk API 2.0 insert (and query,
//! simple-salesforce), `query_all` / `autoFetch` over three pages, Composite, Collections with
//! `allOrNone`, Composite Graph — and read back what they wrote; jsforce's Bulk API 2.0
//! insert and query also run through the base URL, routed by the session. One server,
//! one Python process and one Node process; afterwards no secret the clients sent is
//! anywhere in the data dir or the attempts' reports. The clients must be installed (`.ci/run`); outside CI a
//! missing one skips its half with a note, in CI (`CI=true`) it fails.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::support;

const SECRETS: &[&str] = &[
    "Pa55-word-never-stored",
    "SecTokNeverStored42",
    "Consumer-Secret-Never-Stored",
];

/// jsforce 3 installed under target/ (`.ci/run`: `npm install --prefix target/jsforce`).
fn jsforce_dir(root: &Path) -> Option<PathBuf> {
    let dir = root.join("target/jsforce/node_modules/jsforce");
    if dir.join("package.json").exists() {
        return Some(dir);
    }
    assert!(
        !crate::support::in_ci(),
        "CI must install jsforce under target/jsforce (.ci/run)"
    );
    eprintln!("note: jsforce is not installed under target/jsforce; skipping its part");
    None
}

pub(crate) struct Served {
    child: Child,
    pub(crate) addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path) -> Served {
    ca_init(dir);
    spawn_serve(
        dir,
        &["serve", "--forward-proxy", "--listen", "127.0.0.1:0"],
    )
}

/// `understudy ca init` in the project `dir` (the forward proxy's CA).
pub(crate) fn ca_init(dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["ca", "init"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// The real binary run with `args` in the project `dir`, once it said where it listens.
pub(crate) fn spawn_serve(dir: &Path, args: &[&str]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(args)
        .current_dir(dir)
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
    Served { child, addr }
}

/// Every file under `dir`, as bytes.
pub(crate) fn files(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if let Ok(b) = std::fs::read(&p) {
            out.push((p, b));
        }
    }
}

#[test]
fn real_clients_log_in_and_read_without_leaving_a_secret() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = support::tool_available(
        "python3",
        &[
            "-c",
            "import simple_salesforce, pytest_understudy, cryptography, jwt",
        ],
        "simple-salesforce, pytest-understudy, cryptography and PyJWT",
    );
    let jsforce = jsforce_dir(root);
    let dir = tempfile::tempdir().unwrap();
    crate::support::copy_dir(&root.join("examples/healthplus"), dir.path());
    let served = serve(dir.path());
    let url = format!("http://{}", served.addr);

    if python {
        let out = Command::new("python3")
            .arg(root.join("tests/clients/salesforce_login.py"))
            .env("UNDERSTUDY_URL", &url)
            .env("UNDERSTUDY_CA", dir.path().join("certs/understudy-ca.pem"))
            .env("SALESFORCE_REPORTS", dir.path().join("reports"))
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("salesforce-login: ok"),
            "simple-salesforce failed:\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if let Some(js) = &jsforce {
        let out = Command::new("node")
            .arg(root.join("tests/clients/jsforce_login.mjs"))
            .env("UNDERSTUDY_URL", &url)
            .env("JSFORCE_DIR", js)
            .env(
                "NODE_EXTRA_CA_CERTS",
                dir.path().join("certs/understudy-ca.pem"),
            )
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("jsforce-login: ok"),
            "jsforce failed:\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    drop(served);
    // No secret the clients sent reached the data dir (evidence, journal, state) or the
    // attempts' HTML and JUnit reports.
    let mut all = Vec::new();
    files(&dir.path().join(".understudy"), &mut all);
    assert!(!all.is_empty(), "the data dir holds the evidence");
    if python {
        let before = all.len();
        files(&dir.path().join("reports"), &mut all);
        assert_eq!(
            all.len() - before,
            8,
            "four attempts' HTML and JUnit reports"
        );
    }
    for (path, bytes) in &all {
        for s in SECRETS {
            assert!(
                !bytes.windows(s.len()).any(|w| w == s.as_bytes()),
                "{s} found in {}",
                path.display()
            );
        }
    }
}
