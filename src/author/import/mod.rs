//! `understudy import` (docs/src/reference/import-drift.md): other tools' traffic and mocks → operation files.
//!
//! | module | reads | becomes |
//! |---|---|---|
//! | [`har`] | HAR 1.2/1.3 (`log.entries`) | [`Exchange`]s → the record draft builder ([`crate::author::record::drafts()`]) |
//! | [`postman`] | Postman v2.0/v2.1 collections with saved responses | [`Exchange`]s → the record draft builder |
//! | [`wiremock`] | WireMock stub mappings (a `mappings/` directory or one file with `mappings`) | operation files: `match`, variants, state rules |
//! | [`openapi`] | OpenAPI 3.0/3.1, JSON or YAML | one operation per path + method, mocks from named examples or [`crate::author::generate`] |
//!
//! Every importer returns an [`Imported`]: operation files plus [`Note`]s, one for every
//! thing of the source that could not be mapped (file + JSON path + why): nothing is dropped
//! silently. [`finish`] then runs every docs/src/reference/mock-definition.md#checks-and-limits check in-process ([`check_loaded`]) on
//! what will be in the output directory, and [`write`] writes the files: a draft that passes
//! goes to `DIR/<id>.json`; one that does not goes to `DIR/<id>.json.draft` (never loaded by
//! `serve`/`check`) with its problems in the report; an existing `DIR/<id>.json` is never
//! replaced without `--force` (the item is then `exists`).
//!
//! Importers are pure (no network); they read only the files they are given.

pub mod har;
pub mod openapi;
pub mod postman;
pub mod wiremock;

use crate::author::record::Exchange;
use crate::config::Scrub;
use crate::contract::ProfileKind;
use crate::contract::{valid_operation_id, OperationFile};
use crate::operation::check::{check_integration, check_operation_hashed, Problem};
use crate::operation::load::par_map;
use crate::operation::load_dir;
use crate::operation::LoadedOperation;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Something of the source that was not mapped, or mapped only in part.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Note {
    /// The source file.
    pub file: String,
    /// `/`-separated JSON path inside it (`log/entries/3/response/content`); empty for the
    /// file as a whole.
    pub path: String,
    pub message: String,
}

impl Note {
    pub fn new(file: &Path, path: impl Into<String>, message: impl Into<String>) -> Note {
        Note {
            file: file.display().to_string(),
            path: path.into(),
            message: message.into(),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({"file": self.file, "path": self.path, "message": self.message})
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.path, self.message)
        }
    }
}

/// One drafted operation and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub op: OperationFile,
    /// Source places it was made from (`file#json/path`), for the report.
    pub sources: Vec<String>,
    /// Why it has no mock or only part of one (also counted as not mapped).
    pub reasons: Vec<String>,
}

/// What an importer produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Imported {
    pub drafts: Vec<Draft>,
    pub notes: Vec<Note>,
    /// What was done that loses nothing the mock needs (secrets scrubbed).
    pub info: Vec<String>,
}

/// Exchanges (HAR, Postman) → drafts through the record draft builder (scrubbing included).
/// `place` names the JSON path of the source entry an exchange came from, by its `at_ms`
/// (the importers number their exchanges with it): a draft lists its entries, and a note
/// of the draft builder about one operation names the first entry it was drafted from.
pub fn from_exchanges(
    exchanges: &[Exchange],
    place: &dyn Fn(u64) -> String,
    profile: ProfileKind,
    scrub: &Scrub,
    mut notes: Vec<Note>,
    file: &Path,
) -> Imported {
    let set = crate::author::record::drafts(exchanges, &[], profile, scrub);
    let mut info = Vec::new();
    for n in &set.notes {
        if n.contains("secrets scrubbed") {
            info.push(n.clone());
            continue;
        }
        // `integration/operation: why` is about the entries that operation was drafted from;
        // anything else (`integration: …`) is about the whole file.
        let of = set.files.iter().find(|f| {
            n.strip_prefix(&set.integration)
                .and_then(|r| r.strip_prefix('/'))
                .and_then(|r| r.strip_prefix(f.operation_id.as_str()))
                .is_some_and(|r| r.starts_with(": "))
        });
        match of.and_then(|f| f.from.first().map(|&at| (f, at))) {
            Some((f, at)) => {
                let more = match f.from.len() {
                    1 => String::new(),
                    k => format!(" (drafted from {k} entries; this is the first)"),
                };
                notes.push(Note::new(
                    file,
                    place(at),
                    format!("draft builder: {n}{more}"),
                ));
            }
            None => notes.push(Note::new(file, "", format!("draft builder: {n}"))),
        }
    }
    let drafts = set
        .files
        .into_iter()
        .map(|f| Draft {
            sources: f
                .from
                .iter()
                .map(|&at| format!("{}#{}", file.display(), place(at)))
                .collect(),
            op: f.op,
            reasons: Vec::new(),
        })
        .collect();
    Imported {
        drafts,
        notes,
        info,
    }
}

/// The fate of one drafted operation in the output directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub operation_id: String,
    /// `written` (passes check), `draft` (written as `.json.draft`: check problems),
    /// `contract` (written without a mock: see reasons), `exists` (not replaced: no --force).
    pub status: &'static str,
    pub file: Option<PathBuf>,
    pub sources: Vec<String>,
    pub problems: Vec<String>,
    pub reasons: Vec<String>,
}

impl Outcome {
    pub fn to_json(&self) -> Value {
        json!({
            "operation_id": self.operation_id,
            "status": self.status,
            "file": self.file.as_ref().map(|f| f.display().to_string()),
            "sources": self.sources,
            "problems": self.problems,
            "reasons": self.reasons,
        })
    }
}

/// The whole import, as printed (text) or `--format json`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    pub outcomes: Vec<Outcome>,
    pub notes: Vec<Note>,
    pub info: Vec<String>,
}

impl Report {
    pub fn count(&self, status: &str) -> usize {
        self.outcomes.iter().filter(|o| o.status == status).count()
    }

    /// Everything passed check and nothing was left unmapped.
    pub fn clean(&self) -> bool {
        self.notes.is_empty()
            && self
                .outcomes
                .iter()
                .all(|o| o.status == "written" && o.reasons.is_empty())
    }

    pub fn to_json(&self) -> Value {
        json!({
            "ok": self.clean(),
            "operations": self.outcomes.iter().map(Outcome::to_json).collect::<Vec<_>>(),
            "not_mapped": self.notes.iter().map(Note::to_json).collect::<Vec<_>>(),
            "info": self.info,
            "summary": {
                "written": self.count("written"),
                "draft": self.count("draft"),
                "exists": self.count("exists"),
                "not_mapped": self.notes.len(),
            },
        })
    }
}

/// Check every draft in-process against what `dir` will hold, then write (module doc).
/// `force` replaces existing `DIR/<id>.json` files.
pub fn finish(
    imported: Imported,
    dir: &Path,
    profile: ProfileKind,
    force: bool,
) -> Result<Report, String> {
    let mut report = Report {
        outcomes: Vec::new(),
        notes: imported.notes,
        info: imported.info,
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let (existing, _) = if dir.is_dir() {
        load_dir(dir, profile)
    } else {
        (Vec::new(), Vec::new())
    };
    // Duplicate ids inside one import: the later one gets a suffix.
    let mut seen = BTreeSet::new();
    let mut drafts = imported.drafts;
    for d in &mut drafts {
        let base = d.op.operation_id.clone();
        let mut id = base.clone();
        let mut n = 2;
        while !seen.insert(id.clone()) {
            id = format!("{base}_{n}");
            n += 1;
        }
        if id != base {
            d.op.operation_id = id;
            d.reasons
                .push(format!("operation id `{base}` was taken: renamed"));
            rehash(&mut d.op, profile);
        }
    }
    let existing_ids: BTreeSet<String> =
        existing.iter().map(|l| l.op.operation_id.clone()).collect();
    // What the directory will hold: kept existing files + the drafts that may be written.
    let draft_ids: BTreeSet<&str> = drafts.iter().map(|d| d.op.operation_id.as_str()).collect();
    let mut all: Vec<LoadedOperation> = existing
        .iter()
        .filter(|l| !(force && draft_ids.contains(l.op.operation_id.as_str())))
        .cloned()
        .collect();
    let kept = all.len();
    let new: Vec<&Draft> = drafts
        .iter()
        .filter(|d| force || !existing_ids.contains(&d.op.operation_id))
        .collect();
    // Hashing and checking each file are independent: on every core (as `check_loaded`
    // does them one after another), then the cross-file checks.
    all.extend(par_map(new, |d| LoadedOperation {
        file: dir.join(format!("{}.json", d.op.operation_id)),
        contract_hash: d.op.contract_hash(profile),
        op: d.op.clone(),
    }));
    let mut problems: Vec<Problem> = par_map(all[kept..].iter().collect(), |l| {
        check_operation_hashed(&l.op, profile, &l.file, Some(&l.contract_hash), None)
    })
    .into_iter()
    .flatten()
    .collect();
    for l in &all[..kept] {
        problems.extend(check_operation_hashed(
            &l.op,
            profile,
            &l.file,
            Some(&l.contract_hash),
            None,
        ));
    }
    problems.extend(check_integration(&all, profile));
    let mut by_file: BTreeMap<&Path, Vec<&Problem>> = BTreeMap::new();
    for p in &problems {
        by_file.entry(p.file.as_path()).or_default().push(p);
    }
    let mut pending: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for d in drafts {
        let id = d.op.operation_id.clone();
        if !valid_operation_id(&id) {
            report.notes.push(Note::new(
                Path::new(d.sources.first().map(String::as_str).unwrap_or("")),
                "",
                format!("operation id `{id}` is not valid: not written"),
            ));
            continue;
        }
        let main = dir.join(format!("{id}.json"));
        if existing_ids.contains(&id) && !force {
            report.outcomes.push(Outcome {
                operation_id: id,
                status: "exists",
                file: Some(main),
                sources: d.sources,
                problems: vec!["the file exists: not replaced (pass --force to replace it)".into()],
                reasons: d.reasons,
            });
            continue;
        }
        let mine: Vec<String> = by_file
            .get(main.as_path())
            .into_iter()
            .flatten()
            .map(|p| {
                if p.path.is_empty() {
                    p.message.clone()
                } else {
                    format!("{}: {}", p.path, p.message)
                }
            })
            .collect();
        let (target, status) = if mine.is_empty() {
            (
                main,
                if d.op.mock.is_none() {
                    "contract"
                } else {
                    "written"
                },
            )
        } else {
            (dir.join(format!("{id}.json.draft")), "draft")
        };
        if std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(format!(
                "{}: refusing to write through a symbolic link",
                target.display()
            ));
        }
        let mut text = serde_json::to_string_pretty(&d.op).unwrap_or_default();
        text.push('\n');
        pending.push((target.clone(), text.into_bytes()));
        report.outcomes.push(Outcome {
            operation_id: id,
            status,
            file: Some(target),
            sources: d.sources,
            problems: mine,
            reasons: d.reasons,
        });
    }
    // Written together once every file is known (no symbolic link among the targets): one
    // fsync after another was most of a large import's time (`write_atomic_all`).
    crate::util::fs::write_atomic_all(&pending)
        .map_err(|(f, e)| format!("{}: cannot write: {e}", f.display()))?;
    Ok(report)
}

/// Set `mock.contract_hash` to the operation's current contract hash.
pub fn rehash(op: &mut OperationFile, profile: ProfileKind) {
    let h = op.contract_hash(profile);
    if let Some(mock) = op.mock.as_mut() {
        mock.edit(|v| {
            if let Value::Object(m) = v {
                m.insert("contract_hash".into(), Value::String(h));
            }
        });
    }
}

/// `snake_case` operation id from any name (`get-board` → `get_board`, `listPets` →
/// `list_pets`): lowercase ASCII letters, digits, `_`, `.`, `-` kept; camelCase split; other
/// characters become `_`; at most 128 characters; `op` when nothing is left.
pub fn normalise_id(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
            prev_lower = true;
        } else if c == '.' {
            out.push('.');
            prev_lower = false;
        } else if !out.ends_with('_') {
            out.push('_');
            prev_lower = false;
        }
    }
    let t = out.trim_matches(|c| c == '_' || c == '.').to_string();
    let mut t: String = t.chars().take(128).collect();
    if t.is_empty() || t == "." || t == ".." {
        t = "op".into();
    }
    t
}

/// A capture name usable in a `match` template (`{name}`): ASCII letters, digits and `_`.
pub fn capture_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("p_{s}")
    } else {
        s
    }
}

/// `/`-joined JSON path.
pub fn jpath(parts: &[&dyn std::fmt::Display]) -> String {
    parts
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_normalised() {
        assert_eq!(normalise_id("get-board"), "get_board");
        assert_eq!(normalise_id("listPets"), "list_pets");
        assert_eq!(normalise_id("getVersionDetailsv2"), "get_version_detailsv2");
        assert_eq!(normalise_id("GET /pets/{id}"), "get_pets_id");
        assert_eq!(normalise_id("???"), "op");
        assert!(valid_operation_id(&normalise_id(&"A".repeat(300))));
    }

    #[test]
    fn capture_names() {
        assert_eq!(capture_name("petId"), "petId");
        assert_eq!(capture_name("x-y"), "x_y");
        assert_eq!(capture_name("1a"), "p_1a");
    }
}
