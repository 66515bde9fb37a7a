//! A real PostgreSQL server for the tests of the fleet store (docs/src/operations/fleet-store.md), and the two backends
//! the storage tests run against ("one test body, two backends").
//!
//! [`PgServer::start`] runs Debian's PostgreSQL (`/usr/lib/postgresql/*/bin`): `initdb` into a
//! temp dir and `pg_ctl start` on a free loopback port with its socket in /tmp — as the
//! non-root user `pgtest` (created when missing) when the tests run as root, since the server
//! refuses root. Trust authentication on loopback; `fsync=off` (the tests kill understudy
//! processes, never the machine). Dropping it stops the server and removes the dir; the
//! shared server of [`shared`] is stopped by a watchdog once the test process is gone.
//!
//! When PostgreSQL cannot start, a test that needs it is skipped with a message — except
//! under `CI=true`, where it FAILS (`.ci/run` installs PostgreSQL, so a skip there would hide
//! a broken setup).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use understudy::store::Store;

use crate::support::Project;

/// One running PostgreSQL server.
pub struct PgServer {
    bin: PathBuf,
    dir: PathBuf,
    pub port: u16,
    /// `Some(user)` when commands run through `runuser -u user --`.
    run_as: Option<String>,
    user: String,
}

const USER: &str = "pgtest";

fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|b| b.join("pg_ctl").is_file() && b.join("initdb").is_file())
        .collect();
    dirs.sort();
    dirs.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

impl PgServer {
    /// initdb + start on a free port.
    pub fn start() -> Result<PgServer, String> {
        let bin = bin_dir()
            .ok_or("no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql)")?;
        let run_as = if is_root() {
            if Command::new("id")
                .arg(USER)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| !s.success())
                .unwrap_or(true)
            {
                run(Command::new("useradd").args(["-m", USER]), "useradd pgtest")?;
            }
            Some(USER.to_string())
        } else {
            None
        };
        let user = run_as
            .clone()
            .unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "postgres".to_string()));
        let dir = tempfile::Builder::new()
            .prefix("understudy-pg-")
            .tempdir_in("/tmp")
            .map_err(|e| format!("temp dir: {e}"))?
            .keep();
        if let Some(u) = &run_as {
            run(Command::new("chown").arg(u).arg(&dir), "chown the data dir")?;
        }
        let mut pg = PgServer {
            bin,
            dir,
            port: free_port(),
            run_as,
            user,
        };
        let data = pg.dir.join("data");
        pg.run(
            "initdb",
            &[
                "-D",
                &data.to_string_lossy(),
                "-A",
                "trust",
                "-U",
                &pg.user.clone(),
                "--no-sync",
                "-E",
                "UTF8",
            ],
        )?;
        // A port taken between free_port and start: try a few.
        let mut last = String::new();
        for _ in 0..3 {
            match pg.pg_ctl_start() {
                Ok(()) => return Ok(pg),
                Err(e) => {
                    last = e;
                    pg.port = free_port();
                }
            }
        }
        let _ = std::fs::remove_dir_all(&pg.dir);
        Err(last)
    }

    fn command(&self, tool: &str) -> Command {
        match &self.run_as {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(self.bin.join(tool));
                c
            }
            None => Command::new(self.bin.join(tool)),
        }
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<(), String> {
        run(self.command(tool).args(args), tool)
    }

    fn pg_ctl_start(&self) -> Result<(), String> {
        let data = self.dir.join("data");
        let log = self.dir.join("log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                &data.to_string_lossy(),
                "-l",
                &log.to_string_lossy(),
                "-w",
                "-t",
                "60",
                "-o",
                &format!(
                    "-p {} -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300",
                    self.port
                ),
                "start",
            ],
        )
    }

    /// `pg_ctl stop -m fast`: the server is gone when it returns.
    pub fn stop(&self) {
        let data = self.dir.join("data");
        let _ = self.run(
            "pg_ctl",
            &["-D", &data.to_string_lossy(), "-w", "-m", "fast", "stop"],
        );
    }

    /// Start again after [`PgServer::stop`], on the same port.
    pub fn restart(&self) {
        self.pg_ctl_start().expect("PostgreSQL starts again");
    }

    /// The URL of database `db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{}@127.0.0.1:{}/{db}", self.user, self.port)
    }

    /// A new, empty database; its URL.
    pub fn fresh_db(&self) -> String {
        let name = format!("t_{}", understudy::util::ids::random_hex(8));
        let psql = self.bin.join("psql");
        let mut c = match &self.run_as {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(psql);
                c
            }
            None => Command::new(psql),
        };
        run(
            c.args([
                "-X",
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
            ])
            .arg(&self.user)
            .args(["-d", "postgres", "-c", &format!("CREATE DATABASE {name}")]),
            "CREATE DATABASE",
        )
        .expect("create a test database");
        self.url(&name)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = self.run(
            "pg_ctl",
            &["-D", &data.to_string_lossy(), "-m", "immediate", "stop"],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ci() -> bool {
    crate::support::in_ci()
}

/// What to do when PostgreSQL cannot start: fail under CI=true, else skip (None).
pub fn unavailable<T>(why: &str) -> Option<T> {
    if ci() {
        panic!("PostgreSQL is required under CI=true but did not start: {why}");
    }
    eprintln!("SKIPPED (PostgreSQL tests): {why}");
    None
}

/// A server of its own (a test that stops PostgreSQL), or `None` (skipped).
pub fn own() -> Option<PgServer> {
    match PgServer::start() {
        Ok(pg) => Some(pg),
        Err(e) => unavailable(&e),
    }
}

/// The server shared by the tests of this process (each takes a fresh database), started
/// once, stopped by a watchdog after the test process exits.
pub fn shared() -> Option<&'static PgServer> {
    static PG: OnceLock<Result<PgServer, String>> = OnceLock::new();
    let r = PG.get_or_init(|| {
        let pg = PgServer::start()?;
        let data = pg.dir.join("data");
        let stop = match &pg.run_as {
            Some(u) => format!(
                "runuser -u {u} -- {} -D {} -m immediate stop",
                pg.bin.join("pg_ctl").display(),
                data.display()
            ),
            None => format!(
                "{} -D {} -m immediate stop",
                pg.bin.join("pg_ctl").display(),
                data.display()
            ),
        };
        let script = format!(
            "while kill -0 {} 2>/dev/null; do sleep 1; done; {stop} >/dev/null 2>&1; rm -rf {}",
            std::process::id(),
            pg.dir.display()
        );
        let _ = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        Ok(pg)
    });
    match r {
        Ok(pg) => Some(pg),
        Err(e) => unavailable(e),
    }
}

/// The two stores a storage test runs against.
#[derive(Debug, Clone)]
pub enum Backend {
    Embedded,
    /// A fresh database of the shared server.
    Postgres(String),
}

impl Backend {
    /// Embedded, then PostgreSQL (when it runs: see the module doc).
    pub fn all() -> Vec<Backend> {
        let mut v = vec![Backend::Embedded];
        if let Some(pg) = shared() {
            v.push(Backend::Postgres(pg.fresh_db()));
        }
        v
    }

    /// Opens (or reopens) this backend's store; `dir` is the embedded store's data dir.
    pub fn open(&self, dir: &Path) -> Store {
        match self {
            Backend::Embedded => Store::open(dir).expect("open the embedded store"),
            Backend::Postgres(url) => {
                Store::open_postgres(url, dir).expect("open the PostgreSQL store")
            }
        }
    }

    /// Points `project` at this backend (`"store"` in its project file).
    pub fn apply(&self, project: &Project) {
        if let Backend::Postgres(url) = self {
            project.write_config(serde_json::json!({ "store": url }));
        }
    }
}

/// Polls `f` every 20 ms until it returns `Some`, failing after `deadline`.
pub async fn eventually<T, F, Fut>(deadline: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            start.elapsed() < deadline,
            "{what}: not within {deadline:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
