//! The running server's published address (docs/src/guides/mcp-stdio.md): `understudy serve`
//! and `understudy test` write `<data dir>/server.json` once they listen — the URL of the
//! listener and, for `test`, the run's attempt (its token and id) — so that
//! `understudy mcp stdio`, started by an agent with a cleaned environment, finds the server
//! of the same project and lands its calls in that attempt. The file is created with mode
//! 0600 (only its user can read the token) and removed when the server stops
//! ([`Published`] is a guard). A file left by a server that died is recognized by a refused
//! connection to its address (`crate::server::stdio`) and is then ignored.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file name inside the data dir.
pub const FILE: &str = "server.json";

/// The attempt of a running `understudy test`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PublishedAttempt {
    pub token: String,
    pub id: String,
}

/// What `<data dir>/server.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServerAddress {
    /// `http://127.0.0.1:PORT` (or `https://` under `--tls`).
    pub url: String,
    /// `serve` or `test`.
    pub command: String,
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<PublishedAttempt>,
}

/// The published file; removed when dropped (only when it is still this process's).
#[derive(Debug)]
pub struct Published {
    path: PathBuf,
}

impl Published {
    /// Write `address` to `<data_dir>/server.json` (0600, atomically), creating the data dir
    /// when needed.
    pub fn write(data_dir: &Path, address: &ServerAddress) -> std::io::Result<Published> {
        std::fs::create_dir_all(data_dir)?;
        let path = data_dir.join(FILE);
        let bytes = serde_json::to_vec_pretty(address).map_err(std::io::Error::other)?;
        crate::util::fs::write_atomic_mode(&path, &bytes, 0o600)?;
        Ok(Published { path })
    }

    /// Replace the published content (the attempt of `test`, once created).
    pub fn update(&self, address: &ServerAddress) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(address).map_err(std::io::Error::other)?;
        crate::util::fs::write_atomic_mode(&self.path, &bytes, 0o600)
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        if read_file(&self.path).is_some_and(|a| a.pid == std::process::id()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The address published in `data_dir`, if a readable one is there.
pub fn read(data_dir: &Path) -> Option<ServerAddress> {
    read_file(&data_dir.join(FILE))
}

fn read_file(path: &Path) -> Option<ServerAddress> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod published_tests {
    use super::*;

    #[test]
    fn written_private_read_back_and_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let mut a = ServerAddress {
            url: "http://127.0.0.1:1".into(),
            command: "test".into(),
            pid: std::process::id(),
            attempt: None,
        };
        let p = Published::write(&data, &a).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(data.join(FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        a.attempt = Some(PublishedAttempt {
            token: "t".into(),
            id: "att_1".into(),
        });
        p.update(&a).unwrap();
        assert_eq!(read(&data), Some(a));
        drop(p);
        assert_eq!(read(&data), None);
        assert!(!data.join(FILE).exists());
    }
}
