//! The compiled operation: an operation file's contract ([`crate::contract`]) and its mock
//! engine ([`crate::mock`]) built together, once, for serving.
//!
//! - [`Operation`]: matcher, validators, the compiled idempotency path and the file's engine
//!   ([`Operation::compile`]); [`load_integration`] loads, checks and compiles a whole
//!   integration, as `serve` and hot reload do;
//! - [`load`]: reading operation files (parse only); [`load_dir`]: a whole operations directory,
//!   MCP resources and prompts ([`mcp_files`]) included;
//! - [`lazy`]: the file's mock engine, compiled on first use;
//! - [`check`]: every docs/src/reference/mock-definition.md#checks-and-limits check of one file and the cross-file checks ([`check_loaded`]);
//! - [`call`]: THE call core — validate the input, decide (engine), validate the output,
//!   render — shared by the live proxy call, `understudy exec` and `POST /tools/execute`;
//! - [`fault`]: faults on purpose — their checks, seeded chaos, the plan a call follows (pure).
//!
//! This is the only layer that names both `contract` and `mock`; neither of those imports
//! the other.

pub mod cache;
pub mod call;
pub mod check;
pub mod fault;
pub mod lazy;
pub mod load;
pub mod mcp_files;

pub use load::LoadedOperation;

use crate::config::IntegrationConfig;

use crate::contract::ProfileKind;
use crate::contract::{compile_schema_shared, hash, CompiledMatch, OperationFile};
use crate::error::{CallError, Problem};
use crate::mock::eval::Engine;
use crate::mock::model::Definition;
use crate::mock::path::DotPath;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the idempotency key of a write comes from (docs/src/reference/operation-files.md#idempotency), compiled from the file's
/// `idempotency` (`check` refuses a file that names both or neither).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencySource {
    /// A request header (its name as written).
    Header(String),
    /// A dot path inside the input, parsed once when the operation is compiled and walked
    /// with [`DotPath::resolve`] — the one dot-path walker, so `01` and `+1` are member
    /// names here as in every condition and reference.
    Input(DotPath),
}

/// One operation compiled once for serving: matcher, validators and the file's mock engine.
///
/// Built by [`Operation::compile`] (one file) or [`load_integration`] (a whole integration,
/// after every `check`). Everything here is immutable and `Send + Sync`; share it with `Arc`.
/// A pinned revision whose definition differs from the file's compiles its own
/// [`Engine`] (`Definition::from_value` + `Engine::new`) and runs with
/// [`call::execute_with`].
pub struct Operation {
    /// The integration name from `understudy.json` (or the one given by the caller).
    pub integration: String,
    pub profile: ProfileKind,
    /// The operation file this came from.
    pub file: PathBuf,
    /// The file as written.
    pub op: OperationFile,
    /// The current contract hash (docs/src/concepts/operations.md) under `profile`.
    pub contract_hash: String,
    /// HTTP profiles: the compiled `match`. `None` for MCP.
    pub matcher: Option<CompiledMatch>,
    /// `write` or the profile's default ([`OperationFile::is_write`]).
    pub is_write: bool,
    /// Where a write's idempotency key comes from, compiled once here; `None` when the file
    /// declares no `idempotency`.
    pub idempotency: Option<IdempotencySource>,
    pub input_validator: Arc<jsonschema::Validator>,
    pub output_validator: Arc<jsonschema::Validator>,
    /// The file's mock, compiled on first use ([`Operation::engine`]).
    engine: lazy::LazyEngine,
    /// `definition_hash` of the file's mock without `contract_hash`
    /// ([`OperationFile::definition_value`], not kept: rebuild it from [`Operation::op`] when
    /// needed); `None` when the file has no `mock`.
    pub definition_hash: Option<String>,
    /// The mock's `contract_hash` is present and differs from [`Operation::contract_hash`].
    pub stale: bool,
    /// The file as it was read ([`load_integration`]; `None` for inline operations and MCP
    /// resources and prompts): the hot-reload watcher's baseline.
    pub file_sig: Option<load::FileSig>,
}

impl std::fmt::Debug for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operation")
            .field("integration", &self.integration)
            .field("profile", &self.profile)
            .field("file", &self.file)
            .field("operation_id", &self.op.operation_id)
            .field("contract_hash", &self.contract_hash)
            .field("is_write", &self.is_write)
            .field("has_mock", &self.op.mock.is_some())
            .field("stale", &self.stale)
            .finish_non_exhaustive()
    }
}

impl Operation {
    /// The operation id (the MCP tool name).
    pub fn id(&self) -> &str {
        &self.op.operation_id
    }

    /// The file's mock engine, compiled by the first call that needs it ([`lazy`]); `None`
    /// when the file has no `mock` (a replayed call is then the harness error `no_mock`).
    pub fn engine(&self) -> Result<Option<Arc<Engine>>, CallError> {
        let Some(mock) = &self.op.mock else {
            return Ok(None);
        };
        self.engine
            .get(mock, || format!("the mock of `{}`", self.key()))
            .map(Some)
    }

    /// `"<integration>/<operation_id>"`, the key of revisions, pins and variants.
    pub fn key(&self) -> String {
        format!("{}/{}", self.integration, self.op.operation_id)
    }

    /// Compile a parsed operation file. This does not run the checks of docs/src/reference/mock-definition.md#checks-and-limits (see
    /// [`check::check_operation`]); it fails only when something cannot be
    /// compiled at all (schema, match template, definition).
    pub fn compile(
        integration: &str,
        profile: ProfileKind,
        loaded: LoadedOperation,
    ) -> Result<Operation, Vec<Problem>> {
        Operation::compile_with(integration, profile, loaded, Default::default())
    }

    /// [`Operation::compile`] reusing what [`check::check_operation_hashed`]
    /// already compiled from the same file (anything missing there is compiled here).
    pub fn compile_with(
        integration: &str,
        profile: ProfileKind,
        loaded: LoadedOperation,
        pre: check::Compiled,
    ) -> Result<Operation, Vec<Problem>> {
        let LoadedOperation {
            file,
            op,
            contract_hash,
        } = loaded;
        let mut problems = Vec::new();
        let input = pre
            .input
            .map(Ok)
            .unwrap_or_else(|| compile_schema_shared(&op.input_schema))
            .map_err(|e| problems.push(Problem::new(&file, "input_schema", e)))
            .ok();
        let output = pre
            .output
            .map(Ok)
            .unwrap_or_else(|| compile_schema_shared(&op.output_schema))
            .map_err(|e| problems.push(Problem::new(&file, "output_schema", e)))
            .ok();
        let matcher = match (&op.match_spec, profile.is_http()) {
            (Some(m), true) => pre
                .matcher
                .map(Ok)
                .unwrap_or_else(|| CompiledMatch::compile(m))
                .map_err(|e| problems.push(Problem::new(&file, "match", e)))
                .ok(),
            (None, true) => {
                problems.push(Problem::new(
                    &file,
                    "match",
                    format!("missing: a `{profile}` operation needs a `match` {{method, path}}"),
                ));
                None
            }
            _ => None,
        };
        let idempotency = match op.idempotency.as_ref().map(|i| (&i.header, &i.input)) {
            None => None,
            Some((Some(h), _)) => Some(IdempotencySource::Header(h.clone())),
            Some((None, Some(p))) => DotPath::parse(p)
                .map(IdempotencySource::Input)
                .map_err(|e| problems.push(Problem::new(&file, "idempotency/input", e)))
                .ok(),
            Some((None, None)) => None,
        };
        let known_good = pre.mock_compiled || pre.definition_hash.is_some();
        let definition_hash = match pre.definition_hash {
            Some(h) => Some(h),
            None => op
                .mock
                .as_ref()
                .map(|m| hash::mock_definition_hash(&m.parse())),
        };
        // A mock `check` compiled (cold start) or the check cache says passed (warm start) is
        // known to compile: it is compiled again on first use, so start-up keeps no engine.
        // Anything else (an operation compiled without `check`) is compiled now, so a
        // definition that cannot be compiled is still refused here.
        let engine = match &op.mock {
            Some(_) if known_good => lazy::LazyEngine::default(),
            None => lazy::LazyEngine::default(),
            Some(m) => match Definition::from_value(&m.parse()) {
                Err(e) => {
                    problems.push(Problem::new(&file, "mock", e));
                    lazy::LazyEngine::default()
                }
                Ok(def) => match Engine::new(def) {
                    Ok(engine) => lazy::LazyEngine::ready(engine),
                    Err(e) => {
                        let path = e
                            .path()
                            .map(|p| format!("mock/{p}"))
                            .unwrap_or_else(|| "mock".into());
                        problems.push(Problem::new(&file, path, e.message()));
                        lazy::LazyEngine::default()
                    }
                },
            },
        };
        let (Some(input), Some(output)) = (input, output) else {
            return Err(problems);
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        let stale = op
            .recorded_contract_hash()
            .is_some_and(|h| h != contract_hash);
        Ok(Operation {
            integration: integration.to_string(),
            profile,
            is_write: op.is_write(profile),
            idempotency,
            definition_hash,
            file,
            op,
            contract_hash,
            matcher,
            input_validator: input,
            output_validator: output,
            engine,
            stale,
            file_sig: None,
        })
    }
}

/// Load, check (every docs/src/reference/mock-definition.md#checks-and-limits check plus the cross-file ones) and compile every operation of
/// one integration. Any problem refuses the whole integration, as `serve` refuses to start.
/// With `missing_is_empty` (the forwarding modes: [`crate::config::Mode::tolerates_missing_operations`])
/// an operations directory that does not exist yet is an integration without operations
/// (logged once), not a problem.
pub fn load_integration(
    integ: &IntegrationConfig,
    missing_is_empty: bool,
) -> Result<Vec<Operation>, Vec<Problem>> {
    if missing_is_empty && !integ.operations.exists() {
        tracing::info!(
            integration = %integ.name,
            operations = %integ.operations.display(),
            "the operations directory does not exist yet: treated as empty (every call follows the mode's rule for unmocked calls; record modes draft into --out)"
        );
        return Ok(Vec::new());
    }
    load_integration_cached(integ, &cache::CheckCache::default())
}

/// [`load_integration`] (of an existing operations directory) skipping the per-file checks
/// and hashing of the files `cache` says passed them ([`cache`]).
pub fn load_integration_cached(
    integ: &IntegrationConfig,
    cache: &cache::CheckCache,
) -> Result<Vec<Operation>, Vec<Problem>> {
    let files = load::list_dir(&integ.operations).map_err(|p| vec![p])?;
    let ops = load_parts(integ, files.into_iter().map(Part::Read).collect(), cache)?;
    // Every operation was compiled just now: no other owner of its `Arc` yet.
    Ok(ops.ops.into_iter().filter_map(Arc::into_inner).collect())
}

/// One operation file of an integration being (re)loaded by [`load_parts`].
pub enum Part {
    /// Unchanged since it was compiled: the compiled operation is kept as it is.
    Keep(Arc<Operation>),
    /// New or changed: read, check and compile it.
    Read(PathBuf),
}

/// What [`load_parts`] built: the operations in file order (MCP resources and prompts last),
/// the files it read and the ones it checked (those read that the check cache did not know).
pub struct Parts {
    pub ops: Vec<Arc<Operation>>,
    pub read: Vec<PathBuf>,
    pub checked: Vec<PathBuf>,
}

/// Load, check and compile the [`Part::Read`] files of one integration (and, for `mcp`, its
/// resources and prompts), keep the [`Part::Keep`] operations as they are, then run the
/// cross-file checks over all of them (reusing the kept operations' compiled `match`). So a
/// reload of one changed file among thousands does per-file work for that file only. Any
/// problem refuses the whole integration.
pub fn load_parts(
    integ: &IntegrationConfig,
    parts: Vec<Part>,
    cache: &cache::CheckCache,
) -> Result<Parts, Vec<Problem>> {
    let profile = integ.profile;
    let mut problems = Vec::new();
    let read: Vec<PathBuf> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Read(f) => Some(f.clone()),
            Part::Keep(_) => None,
        })
        .collect();
    // Per slot: a kept operation or the index of a freshly loaded file.
    let mut fresh: Vec<(
        LoadedOperation,
        Option<load::FileSig>,
        Option<cache::Passed>,
    )> = Vec::new();
    let mut loads =
        load::par_map(read.clone(), |f| load::load_file_cached(&f, profile, cache)).into_iter();
    let mut slots: Vec<Result<Arc<Operation>, usize>> = Vec::with_capacity(parts.len());
    for p in parts {
        match p {
            Part::Keep(op) => slots.push(Ok(op)),
            Part::Read(_) => match loads.next() {
                Some(Ok((l, sig, passed))) => {
                    slots.push(Err(fresh.len()));
                    fresh.push((l, Some(sig), passed));
                }
                Some(Err(p)) => problems.push(p),
                None => {}
            },
        }
    }
    if profile == ProfileKind::Mcp {
        // docs/src/reference/mcp.md: `resources/` and `prompts/` beside the tools (few; always re-read).
        let (o, p) = mcp_files::load_extras(&integ.operations);
        for l in o {
            slots.push(Err(fresh.len()));
            fresh.push((l, None, None));
        }
        problems.extend(p);
    }
    // As `check_loaded`, keeping what the checks compiled for `Operation::compile_with`.
    let checked = load::par_map(fresh.iter().collect(), |(l, _, passed)| {
        let mut c = check::Compiled::default();
        if let Some(p) = passed {
            // It passed every per-file check before (the cache): only its hash is reused.
            c.definition_hash = p.definition_hash.clone();
            return (Vec::new(), c);
        }
        let p = check::check_operation_hashed(
            &l.op,
            profile,
            &l.file,
            Some(&l.contract_hash),
            Some(&mut c),
        );
        (p, c)
    });
    let checked_files = fresh
        .iter()
        .filter(|(_, _, passed)| passed.is_none())
        .map(|(l, _, _)| l.file.clone())
        .collect();
    let mut pre = Vec::with_capacity(fresh.len());
    for (p, c) in checked {
        problems.extend(p);
        pre.push(c);
    }
    let items: Vec<check::CrossItem> = slots
        .iter()
        .map(|s| match s {
            Ok(op) => check::CrossItem {
                file: &op.file,
                op: &op.op,
                matcher: op.matcher.as_ref(),
            },
            Err(i) => check::CrossItem {
                file: &fresh[*i].0.file,
                op: &fresh[*i].0.op,
                matcher: pre[*i].matcher.as_ref(),
            },
        })
        .collect();
    problems.extend(check::check_cross(&items, profile));
    drop(items);
    if !problems.is_empty() {
        return Err(problems);
    }
    let compiled = load::par_map(fresh.into_iter().zip(pre).collect(), |((l, sig, _), c)| {
        Operation::compile_with(&integ.name, integ.profile, l, c).map(|mut op| {
            op.file_sig = sig;
            Arc::new(op)
        })
    });
    let mut compiled: Vec<Option<Arc<Operation>>> = compiled
        .into_iter()
        .map(|r| r.map_err(|p| problems.extend(p)).ok())
        .collect();
    if !problems.is_empty() {
        return Err(problems);
    }
    let ops = slots
        .into_iter()
        .filter_map(|s| match s {
            Ok(op) => Some(op),
            Err(i) => compiled[i].take(),
        })
        .collect();
    Ok(Parts {
        ops,
        read,
        checked: checked_files,
    })
}

/// Every per-file check of each loaded operation, then the cross-file checks.
pub fn check_loaded(loaded: &[LoadedOperation], profile: ProfileKind) -> Vec<Problem> {
    let mut problems = Vec::new();
    for l in loaded {
        problems.extend(check::check_operation_hashed(
            &l.op,
            profile,
            &l.file,
            Some(&l.contract_hash),
            None,
        ));
    }
    problems.extend(check::check_integration(loaded, profile));
    problems
}

impl Operation {
    /// Whether the file's engine was compiled yet ([`lazy`]).
    #[cfg(test)]
    pub(crate) fn engine_is_compiled(&self) -> bool {
        self.engine.is_compiled()
    }
}

/// Every `*.json` file directly inside `dir` (hidden files skipped), in file-name order,
/// parsed; the files that cannot be parsed become problems. A missing directory is a problem
/// (whose message suggests `understudy record` for a first recording).
pub fn load_dir(dir: &Path, profile: ProfileKind) -> (Vec<LoadedOperation>, Vec<Problem>) {
    let (ops, problems) = load_dir_signed(dir, profile);
    (ops.into_iter().map(|(o, _)| o).collect(), problems)
}

/// [`load_dir`] with the [`load::FileSig`] of each file read (`None` for MCP resources and
/// prompts, which live in sub-directories).
pub fn load_dir_signed(
    dir: &Path,
    profile: ProfileKind,
) -> (Vec<(LoadedOperation, Option<load::FileSig>)>, Vec<Problem>) {
    let mut ops = Vec::new();
    let mut problems = Vec::new();
    let files = match load::list_dir(dir) {
        Ok(f) => f,
        Err(p) => {
            problems.push(p);
            return (ops, problems);
        }
    };
    for r in load::par_map(files, |f| load::load_file_signed(&f, profile)) {
        match r {
            Ok((op, sig)) => ops.push((op, Some(sig))),
            Err(p) => problems.push(p),
        }
    }
    if profile == ProfileKind::Mcp {
        // docs/src/reference/mcp.md: `resources/` and `prompts/` beside the tools.
        let (o, p) = mcp_files::load_extras(dir);
        ops.extend(o.into_iter().map(|o| (o, None)));
        problems.extend(p);
    }
    (ops, problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(i: u32) -> serde_json::Value {
        json!({
            "operation_id": format!("op_{i}"),
            "match": {"method": "GET", "path": format!("/things{i}/{{id}}")},
            "input_schema": {"type": "object", "required": ["id"]},
            "output_schema": {"type": "object", "required": ["status"]},
            "mock": {"schema_version": 1, "default_variant": "ok",
                     "variants": {"ok": {"result": {"status": 200, "data": {"id": {"$input": "id"}}}}},
                     "examples": [{"variant": "ok", "input": {"id": "1"}, "expected": {"status": 200, "data": {"id": "1"}}}]}
        })
    }

    fn integration(dir: &std::path::Path) -> IntegrationConfig {
        IntegrationConfig {
            name: "crm".into(),
            profile: ProfileKind::Rest,
            upstream: None,
            operations: dir.to_path_buf(),
            unmatched_writes: Default::default(),
            mcp_sse: false,
            login_hosts: None,
        }
    }

    /// Issue 20: loading (cold: checked; warm: from the check cache) compiles no engine and
    /// keeps one copy of each repeated schema and each mock as unparsed text; the first call
    /// compiles the engine, once.
    #[test]
    fn loading_compiles_no_engine_and_shares_repeated_schemas() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..3 {
            // With its `contract_hash`, which the definition hash leaves out.
            let mut f = file(i);
            let op: OperationFile = serde_json::from_value(f.clone()).unwrap();
            f["mock"]["contract_hash"] = json!(op.contract_hash(ProfileKind::Rest));
            std::fs::write(dir.path().join(format!("op_{i}.json")), f.to_string()).unwrap();
        }
        let integ = integration(dir.path());
        let cold = load_integration(&integ, false).unwrap();
        let warm = load_integration_cached(&integ, &cache::CheckCache::of(&cold)).unwrap();
        for ops in [&cold, &warm] {
            assert!(ops.iter().all(|o| !o.engine_is_compiled()));
            assert!(ops.iter().all(|o| !o.op.mock.as_ref().unwrap().is_parsed()));
            for o in ops.iter() {
                let mock = o.op.mock.as_ref().unwrap().parse();
                assert_eq!(o.definition_hash, Some(hash::mock_definition_hash(&mock)));
            }
            assert!(Arc::ptr_eq(
                &ops[0].op.input_schema,
                &ops[2].op.input_schema
            ));
            assert!(Arc::ptr_eq(
                &ops[0].op.output_schema,
                &ops[1].op.output_schema
            ));
            let r = call::execute(&ops[1], &json!({"id": "7"}), None, None);
            assert_eq!(r.error, None);
            assert_eq!(r.result, Some(json!({"status": 200, "data": {"id": "7"}})));
            assert!(ops[1].engine_is_compiled());
            assert!(!ops[0].engine_is_compiled());
            let first = ops[1].engine().unwrap().unwrap();
            assert!(Arc::ptr_eq(&first, &ops[1].engine().unwrap().unwrap()));
        }
    }

    /// Loading is spread over the cores, but the problems of several bad files come out as a
    /// one-thread load gives them: the files that do not parse in file order, then the
    /// per-file check problems in file order, then the cross-file ones. Enough files that
    /// the work is split (bad ones in every block), so a reordering shows.
    #[test]
    fn problems_of_several_bad_files_come_out_in_file_order() {
        let dir = tempfile::tempdir().unwrap();
        let unparsable = [5, 70, 140, 199];
        let failing = [2, 100, 180];
        for i in 0..200 {
            let mut f = file(i);
            f["operation_id"] = json!(format!("op_{i:03}"));
            if failing.contains(&i) {
                f["mock"]["examples"][0]["expected"]["status"] = json!(201);
            }
            if i == 150 {
                f["match"] = file(20)["match"].clone();
            }
            let text = if unparsable.contains(&i) {
                "{\"operation_id\":".to_string()
            } else {
                f.to_string()
            };
            std::fs::write(dir.path().join(format!("op_{i:03}.json")), text).unwrap();
        }
        let name = |i: u32| dir.path().join(format!("op_{i:03}.json"));
        let problems = load_integration(&integration(dir.path()), false).unwrap_err();
        let files: Vec<_> = problems.iter().map(|p| p.file.clone()).collect();
        let mut expected: Vec<_> = unparsable
            .iter()
            .chain(&failing)
            .map(|&i| name(i))
            .collect();
        let cross: Vec<_> = files[expected.len().min(files.len())..].to_vec();
        assert!(!cross.is_empty(), "{problems:?}");
        assert!(
            cross.iter().all(|f| *f == name(20) || *f == name(150)),
            "{problems:?}"
        );
        expected.extend(cross);
        assert_eq!(files, expected, "{problems:?}");
        assert!(problems[0].message.starts_with("not valid JSON"));
        assert!(!problems[unparsable.len()]
            .message
            .starts_with("not valid JSON"));
    }

    /// An operation compiled without `check` (nothing says its mock compiles) is compiled
    /// at once, so a broken definition is still refused as a problem, not on the first call.
    #[test]
    fn compiling_without_check_still_refuses_a_broken_mock() {
        let mut f = file(1);
        f["mock"]["variants"]["ok"]["result"]["data"] = json!({"n": {"$number": "abc"}});
        let l = load::parse_operation(
            &f,
            std::path::Path::new("crm/op_1"),
            crate::contract::ProfileKind::Rest,
        )
        .unwrap();
        let problems = Operation::compile("crm", ProfileKind::Rest, l).unwrap_err();
        assert_eq!(
            problems[0].path, "mock/variants/ok/result/data/n/$number",
            "{problems:?}"
        );
        let l = load::parse_operation(
            &file(1),
            std::path::Path::new("crm/op_1"),
            crate::contract::ProfileKind::Rest,
        )
        .unwrap();
        assert!(Operation::compile("crm", ProfileKind::Rest, l)
            .unwrap()
            .engine_is_compiled());
    }

    #[test]
    fn load_dir_reads_json_files_in_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.json"), r#"{"operation_id":"b"}"#).unwrap();
        std::fs::write(dir.path().join("a.json"), r#"{"operation_id":"a"}"#).unwrap();
        std::fs::write(dir.path().join("c.json"), r#"{"operation_id":"#).unwrap();
        std::fs::write(dir.path().join(".hidden.json"), "x").unwrap();
        std::fs::write(dir.path().join("README.md"), "x").unwrap();
        let (ops, problems) = load_dir(dir.path(), crate::contract::ProfileKind::Rest);
        let ids: Vec<_> = ops.iter().map(|o| o.op.operation_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.starts_with("not valid JSON"));
        let (_, problems) = load_dir(
            &dir.path().join("missing"),
            crate::contract::ProfileKind::Rest,
        );
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].message.contains("understudy record"),
            "{}",
            problems[0]
        );
    }
}
