//! The check cache (issue 20): which operation files already passed every per-file `check`
//! of this understudy version, with the two hashes computed from them, so a warm start
//! neither checks them again nor hashes them again.
//!
//! An entry is keyed by the SHA-256 of (cache format, understudy version, profile, file
//! name, SHA-256 of the file's bytes): the per-file checks and both hashes are functions of
//! exactly these (the file name because `operation_id` must equal its stem), so a cached
//! entry gives the values `check` and hashing would give — the persisted contract and
//! definition hashes are unchanged. The cross-file checks always run. The cache lives in
//! `<data_dir>/check-cache`, written after a successful start when it differs; an empty data
//! dir (a cold start) has none, so everything is checked; a file of another version or
//! format, or one that cannot be read, is ignored (everything checked again).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::Operation;
use crate::contract::hash::sha256_hex;
use crate::contract::ProfileKind;

/// The first line of the cache file.
fn header() -> String {
    format!("understudy check cache 1 {}", env!("CARGO_PKG_VERSION"))
}

/// The hashes of one file that passed `check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passed {
    pub contract_hash: String,
    /// `None` for a file without `mock`.
    pub definition_hash: Option<String>,
}

/// Key → [`Passed`] (module doc).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CheckCache {
    passed: HashMap<String, Passed>,
}

/// The cache key of `file` (its bytes hash to `content_hash`) under `profile`.
pub fn key(profile: ProfileKind, file: &Path, content_hash: &str) -> String {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    sha256_hex(format!("{}\0{profile}\0{name}\0{content_hash}", header()).as_bytes())
}

impl CheckCache {
    /// The cache file of `data_dir`.
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("check-cache")
    }

    /// Read the cache of `data_dir`; empty when there is none (a cold start) or it is of
    /// another version or unreadable.
    pub fn read(data_dir: &Path) -> CheckCache {
        let Ok(text) = std::fs::read_to_string(CheckCache::path(data_dir)) else {
            return CheckCache::default();
        };
        let mut lines = text.lines();
        if lines.next() != Some(header().as_str()) {
            return CheckCache::default();
        }
        let mut passed = HashMap::new();
        for line in lines {
            let mut f = line.split(' ');
            let (Some(k), Some(c), Some(d), None) = (f.next(), f.next(), f.next(), f.next()) else {
                return CheckCache::default();
            };
            passed.insert(
                k.to_string(),
                Passed {
                    contract_hash: c.to_string(),
                    definition_hash: (d != "-").then(|| d.to_string()),
                },
            );
        }
        CheckCache { passed }
    }

    /// The entry of `key`, when that file passed `check`.
    pub fn get(&self, key: &str) -> Option<&Passed> {
        self.passed.get(key)
    }

    /// The cache of operations that passed every check (those read from a file).
    pub fn of<'a>(ops: impl IntoIterator<Item = &'a Operation>) -> CheckCache {
        let passed = ops
            .into_iter()
            .filter_map(|o| {
                let sig = o.file_sig.as_ref()?;
                Some((
                    key(o.profile, &o.file, &sig.hash),
                    Passed {
                        contract_hash: o.contract_hash.clone(),
                        definition_hash: o.definition_hash.clone(),
                    },
                ))
            })
            .collect();
        CheckCache { passed }
    }

    /// Write the cache into `data_dir` (atomically).
    pub fn write(&self, data_dir: &Path) -> std::io::Result<()> {
        let mut keys: Vec<&String> = self.passed.keys().collect();
        keys.sort();
        let mut out = header();
        out.push('\n');
        for k in keys {
            let p = &self.passed[k];
            out.push_str(k);
            out.push(' ');
            out.push_str(&p.contract_hash);
            out.push(' ');
            out.push_str(p.definition_hash.as_deref().unwrap_or("-"));
            out.push('\n');
        }
        crate::util::fs::write_atomic_mode(&CheckCache::path(data_dir), out.as_bytes(), 0o600)
    }
}
