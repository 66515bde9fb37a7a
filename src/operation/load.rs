//! Loading operation files: one file ([`load_file`]), an inline JSON value ([`parse_operation`],
//! for the admin API) or the files of a directory ([`list_dir`]; a whole operations directory,
//! MCP resources and prompts included, is [`super::load_dir`]). Loading only parses;
//! the checks of docs/src/reference/mock-definition.md#checks-and-limits are [`crate::operation::check`]. Problems carry the file and the
//! JSON path.

use super::cache::{CheckCache, Passed};
use crate::config::slash_path;
use crate::contract::{OperationFile, ProfileKind};
use crate::error::Problem;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A parsed operation file and its current contract hash (for the profile it was loaded as).
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedOperation {
    pub file: PathBuf,
    pub op: OperationFile,
    pub contract_hash: String,
}

/// Parse an operation file from a JSON value (the admin API's inline operations use this
/// with a made-up `file` such as `crm/<operation_id>`).
pub fn parse_operation(
    value: &Value,
    file: &Path,
    profile: ProfileKind,
) -> Result<LoadedOperation, Problem> {
    precheck(value, file)?;
    let value = crate::util::json::without_schema_member(value)
        .map_err(|m| Problem::new(file, crate::util::json::SCHEMA_MEMBER, m))?;
    let op: OperationFile = serde_path_to_error::deserialize(value.as_ref())
        .map_err(|e| Problem::new(file, slash_path(e.path()), e.inner().to_string()))?;
    Ok(loaded(op, file, profile))
}

fn loaded(op: OperationFile, file: &Path, profile: ProfileKind) -> LoadedOperation {
    let contract_hash = op.contract_hash(profile);
    LoadedOperation {
        file: file.to_path_buf(),
        op,
        contract_hash,
    }
}

/// The text of an operation file parsed straight into [`OperationFile`], without the
/// intermediate `Value` tree (issue 20: building that tree and then the file from it was the
/// largest part of a warm start's parse). `None` when this fast path does not apply; the
/// caller then parses through `Value`, which gives the problems their messages and paths, so
/// a file either parses here to what that path would give or goes that way. serde accepts a
/// JSON array for a struct ([`precheck`] refuses it): text that is not an object, or that
/// may have an array as `match` or `idempotency` anywhere (or a `\u` escape that could spell
/// those names), takes the `Value` path.
fn parse_direct(text: &str) -> Option<OperationFile> {
    if !text.trim_start().starts_with('{') || text.contains("\\u") {
        return None;
    }
    let array_after = |key: &str| {
        text.match_indices(key).any(|(i, k)| {
            let rest = text[i + k.len()..].trim_start();
            rest.strip_prefix(':')
                .is_some_and(|r| !r.trim_start().starts_with('{'))
        })
    };
    if array_after("\"match\"") || array_after("\"idempotency\"") {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// What serde would accept but an operation file must not be.
fn precheck(value: &Value, file: &Path) -> Result<(), Problem> {
    if !value.is_object() {
        return Err(Problem::new(
            file,
            "",
            "expected a JSON object (an operation file: operation_id, description, match, input_schema, output_schema, mock)",
        ));
    }
    // serde accepts a JSON array for a struct (its fields in order): refuse it up front.
    for key in ["match", "idempotency"] {
        if value.get(key).is_some_and(|v| !v.is_object()) {
            return Err(Problem::new(file, key, "expected an object"));
        }
    }
    Ok(())
}

/// What a file looked like when it was read: size and modification time (from the open
/// file) and the SHA-256 of the bytes read — the baseline of the hot-reload watcher, so
/// start-up does not read every file a second time to take it.
#[derive(Debug, Clone, PartialEq)]
pub struct FileSig {
    pub len: u64,
    pub modified: Option<std::time::SystemTime>,
    pub hash: String,
}

/// Read a file and take its [`FileSig`].
pub fn read_signed(file: &Path) -> std::io::Result<(Vec<u8>, FileSig)> {
    use std::io::Read;
    let mut f = std::fs::File::open(file)?;
    let meta = f.metadata()?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.read_to_end(&mut bytes)?;
    let sig = FileSig {
        len: meta.len(),
        modified: meta.modified().ok(),
        hash: crate::contract::hash::sha256_hex(&bytes),
    };
    Ok((bytes, sig))
}

/// Read and parse one operation file.
pub fn load_file(file: &Path, profile: ProfileKind) -> Result<LoadedOperation, Problem> {
    load_file_signed(file, profile).map(|(op, _)| op)
}

/// [`load_file`] with the file's [`FileSig`].
pub fn load_file_signed(
    file: &Path,
    profile: ProfileKind,
) -> Result<(LoadedOperation, FileSig), Problem> {
    load_file_cached(file, profile, &CheckCache::default()).map(|(op, sig, _)| (op, sig))
}

/// [`load_file_signed`] consulting the check cache: a file whose entry is there (it passed
/// `check` before, [`super::cache`]) is not hashed again, and its entry is returned.
pub fn load_file_cached(
    file: &Path,
    profile: ProfileKind,
    cache: &CheckCache,
) -> Result<(LoadedOperation, FileSig, Option<Passed>), Problem> {
    let (bytes, sig) = read_signed(file)
        .map_err(|e| Problem::new(file, "", format!("cannot read the operation file: {e}")))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        Problem::new(
            file,
            "",
            format!("cannot read the operation file: not UTF-8: {e}"),
        )
    })?;
    let op = match parse_direct(text) {
        Some(op) => op,
        None => {
            let mut value: Value = serde_json::from_str(text)
                .map_err(|e| Problem::new(file, "", format!("not valid JSON: {e}")))?;
            precheck(&value, file)?;
            crate::util::json::strip_schema_member(&mut value)
                .map_err(|m| Problem::new(file, crate::util::json::SCHEMA_MEMBER, m))?;
            serde_path_to_error::deserialize(value)
                .map_err(|e| Problem::new(file, slash_path(e.path()), e.inner().to_string()))?
        }
    };
    drop(bytes);
    let passed = cache
        .get(&super::cache::key(profile, file, &sig.hash))
        .cloned();
    let loaded = match &passed {
        Some(p) => LoadedOperation {
            file: file.to_path_buf(),
            op,
            contract_hash: p.contract_hash.clone(),
        },
        None => loaded(op, file, profile),
    };
    Ok((loaded, sig, passed))
}

/// Every `*.json` file directly inside `dir` (hidden files skipped), in file-name order. A
/// missing directory is a problem (whose message suggests `understudy record` for a first
/// recording).
pub fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, Problem> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Problem::new(
                dir,
                "",
                "the operations directory does not exist: check `operations` in the project file for a typo, or record the first operations with `understudy record --out DIR` (the recording modes start without it)",
            ));
        }
        Err(e) => {
            return Err(Problem::new(
                dir,
                "",
                format!("cannot read the operations directory: {e}"),
            ));
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.extension().is_some_and(|x| x == "json")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// `items.map(f)` on every core (`std::thread::available_parallelism`), in order: start-up
/// reads, checks and compiles thousands of independent files. The workers take small blocks
/// from a shared queue (not one fixed half each), so a thread the busy machine slows down
/// leaves no long tail to the other; each block's results are put back at the block's place.
/// Small inputs stay on the calling thread.
pub(crate) fn par_map<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    const BLOCK: usize = 32;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || items.len() < 64 {
        return items.into_iter().map(f).collect();
    }
    let len = items.len();
    let mut blocks: Vec<Vec<T>> = Vec::with_capacity(len.div_ceil(BLOCK));
    let mut items = items.into_iter();
    loop {
        let b: Vec<T> = items.by_ref().take(BLOCK).collect();
        if b.is_empty() {
            break;
        }
        blocks.push(b);
    }
    let queue = std::sync::Mutex::new(blocks.into_iter().enumerate());
    let next = || queue.lock().unwrap_or_else(|p| p.into_inner()).next();
    let f = &f;
    let next = &next;
    let mut done: Vec<(usize, Vec<R>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    while let Some((i, b)) = next() {
                        out.push((i, b.into_iter().map(f).collect::<Vec<R>>()));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_unstable_by_key(|(i, _)| *i);
    let mut out = Vec::with_capacity(len);
    out.extend(done.into_iter().flat_map(|(_, r)| r));
    out
}

#[cfg(test)]
mod tests {

    /// A `fault` is part of the definition, so the definition hash covers it (issue 15).
    #[test]
    fn a_fault_changes_the_definition_hash() {
        let with = serde_json::json!({"schema_version": 1, "default_variant": "a", "variants": {
            "a": {"result": 1, "fault": {"kind": "close", "after_effect": false}}},
            "examples": []});
        let mut without = with.clone();
        without["variants"]["a"]
            .as_object_mut()
            .unwrap()
            .remove("fault");
        assert_ne!(
            crate::contract::hash::definition_hash(&with),
            crate::contract::hash::definition_hash(&without)
        );
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn par_map_keeps_the_order_of_its_input() {
        for n in [0, 1, 63, 64, 65, 1000] {
            let v: Vec<usize> = (0..n).collect();
            assert_eq!(
                par_map(v, |i| i * 2),
                (0..n).map(|i| i * 2).collect::<Vec<_>>()
            );
        }
        // Early items slower than late ones: a worker finishes its later blocks first.
        let v: Vec<u64> = (0..300).collect();
        let slow = |i: u64| {
            if i < 32 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            i
        };
        assert_eq!(par_map(v, slow), (0..300).collect::<Vec<_>>());
    }

    #[test]
    fn unknown_keys_are_reported_with_their_path() {
        let f = Path::new("ops/x.json");
        let e = parse_operation(
            &json!({"operation_id":"x","descripton":"d"}),
            f,
            crate::contract::ProfileKind::Rest,
        )
        .unwrap_err();
        assert_eq!(e.path, "descripton");
        assert!(e.message.contains("unknown field `descripton`"), "{e}");
        let e = parse_operation(
            &json!({"operation_id":"x","match":{"method":"GET","path":"/x","querry":{}}}),
            f,
            crate::contract::ProfileKind::Rest,
        )
        .unwrap_err();
        assert_eq!(e.path, "match/querry");
        assert!(e
            .to_string()
            .starts_with("ops/x.json: match/querry: unknown field `querry`"));
        let e = parse_operation(
            &json!({"operation_id":"x","result_form":"nope"}),
            f,
            crate::contract::ProfileKind::Mcp,
        )
        .unwrap_err();
        assert_eq!(e.path, "result_form");
        let e = parse_operation(&json!([1]), f, crate::contract::ProfileKind::Mcp).unwrap_err();
        assert!(e.message.contains("JSON object"), "{e}");
    }

    /// The fast path (text straight into `OperationFile`) gives what the `Value` path gives,
    /// and what only the `Value` path refuses is still refused with its message and path.
    #[test]
    fn parsing_the_text_directly_equals_parsing_through_value() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.json");
        let good = json!({"operation_id": "x", "description": "d \u{e9}",
            "match": {"method": "GET", "path": "/x", "query": {"a": "1"}},
            "idempotency": {"header": "Idempotency-Key"},
            "input_schema": {"type": "object", "properties": {"match": {"enum": [1]}}},
            "mock": {"schema_version": 1, "n": [1.5, -2, 18446744073709551615u64]}});
        std::fs::write(&f, serde_json::to_string_pretty(&good).unwrap()).unwrap();
        assert!(parse_direct(&std::fs::read_to_string(&f).unwrap()).is_some());
        assert_eq!(
            load_file(&f, crate::contract::ProfileKind::Rest).unwrap(),
            parse_operation(&good, &f, crate::contract::ProfileKind::Rest).unwrap()
        );
        for (text, path, message) in [
            (
                r#"{"operation_id":"x","match":["GET","/x"]}"#,
                "match",
                "expected an object",
            ),
            (
                r#"{"operation_id":"x","idempotency" : ["h"]}"#,
                "idempotency",
                "expected an object",
            ),
            (
                r#"{"operation_id":"x","m\u0061tch":["GET","/x"]}"#,
                "match",
                "expected an object",
            ),
            (r#"["x"]"#, "", "expected a JSON object"),
            (r#"{"operation_id":"x","operation_id":"y"}"#, "", "!"),
            (
                r#"{"operation_id":"x","descripton":"d"}"#,
                "descripton",
                "unknown field",
            ),
        ] {
            std::fs::write(&f, text).unwrap();
            match load_file(&f, crate::contract::ProfileKind::Rest) {
                // A duplicate key: the `Value` path keeps the last one, as before.
                Ok(l) if message == "!" => assert_eq!(l.op.operation_id, "y"),
                Ok(l) => panic!("{text} parsed: {l:?}"),
                Err(e) => {
                    assert_eq!(e.path, path, "{text}");
                    assert!(e.message.contains(message), "{text}: {e}");
                }
            }
        }
    }
}
