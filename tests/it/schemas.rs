//! The JSON Schemas of the files a user writes (`schemas/`, `understudy schema NAME`).
//!
//! - The committed `schemas/*.schema.json` are what the code generates (`UPDATE_SCHEMAS=1`
//!   rewrites them, as `understudy schema --all --out schemas` does).
//! - Every JSON and YAML file in `examples/`, `profiles/` and `tests/fixtures/` is classified;
//!   each one of a kind that has a schema validates against it, and `check` accepts it.
//! - The corpus `tests/fixtures/schemas/<kind>/`: `ok_*` files are accepted by the schema and
//!   by `check`, `bad_*` files refused by both, and `sem_*` files accepted by the schema but
//!   refused by `check`, each under a rule the schema cannot express that
//!   `docs/src/reference/schemas.md` lists ([`SEMANTIC`]). Any other disagreement fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use understudy::cli::SchemaName;
use understudy::commands::schema::{file_name, render, schema};
use understudy::config::Config;
use understudy::operation::check::check_operation;
use understudy::operation::load::load_file;
use understudy::operation::mcp_files::{extra_operation, ExtraKind};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The file kinds that have a schema, with what `check` needs to load them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Project,
    /// An operation file, loaded as this profile.
    Operation(understudy::contract::ProfileKind),
    Resource,
    Prompt,
    Contract,
}

impl Kind {
    fn schema(self) -> SchemaName {
        match self {
            Kind::Project => SchemaName::Project,
            Kind::Operation(_) => SchemaName::Operation,
            Kind::Resource => SchemaName::Resource,
            Kind::Prompt => SchemaName::Prompt,
            Kind::Contract => SchemaName::Contract,
        }
    }
}

/// The `sem_*` files of the corpus: the rule (as `docs/src/reference/schemas.md` names it)
/// under which the schema accepts them and `check` does not.
const SEMANTIC: &[(&str, &str)] = &[
    (
        "operation/rest/sem_default_variant_unknown",
        "default-variant-exists",
    ),
    ("operation/rest/sem_example_mismatch", "examples-evaluate"),
    (
        "operation/rest/sem_example_unknown_variant",
        "example-variant-exists",
    ),
    (
        "operation/rest/sem_variant_without_example",
        "every-variant-has-an-example",
    ),
    (
        "operation/rest/sem_stale_contract_hash",
        "contract-hash-current",
    ),
    (
        "operation/rest/sem_output_schema",
        "results-satisfy-output-schema",
    ),
    ("operation/rest/sem_envelope", "profile-result-envelope"),
    ("operation/rest/sem_file_name", "file-name-is-the-id"),
    (
        "operation/rest/sem_match_template",
        "match-template-compiles",
    ),
    ("operation/rest/sem_input_schema_invalid", "schemas-compile"),
    (
        "operation/rest/sem_example_input",
        "examples-satisfy-input-schema",
    ),
    ("operation/rest/sem_title_on_http", "profile-members"),
    (
        "operation/rest/sem_mcp_fault_on_http",
        "profile-fault-kinds",
    ),
    ("operation/rest/sem_rest_without_match", "profile-members"),
    (
        "operation/rest/sem_fault_framing_header",
        "fault-framing-headers",
    ),
    (
        "operation/rest/sem_capture_not_in_input",
        "captures-fit-the-input",
    ),
    (
        "operation/rest/sem_unknown_reference",
        "expressions-compile",
    ),
    ("operation/mcp/sem_match_on_mcp", "profile-members"),
    (
        "mcp/resources/sem_template_without_variable",
        "uri-template-level-1",
    ),
    (
        "mcp/resources/sem_completion_unknown_variable",
        "completions-name-a-variable",
    ),
    ("mcp/resources/sem_file_name", "file-name-is-the-id"),
    (
        "mcp/resources/sem_contents_shape",
        "results-satisfy-output-schema",
    ),
    (
        "mcp/prompts/sem_duplicate_argument",
        "prompt-arguments-unique",
    ),
    (
        "mcp/prompts/sem_completion_unknown_argument",
        "completions-name-a-variable",
    ),
    (
        "mcp/prompts/sem_messages_shape",
        "results-satisfy-output-schema",
    ),
    ("contract/sem_file_name", "file-name-is-the-id"),
    ("contract/sem_pattern", "patterns-compile"),
    ("contract/sem_min_greater_than_max", "calls-min-max"),
    ("contract/sem_path", "dot-paths-parse"),
];

#[test]
fn committed_schemas_are_what_the_code_generates() {
    let dir = repo().join("schemas");
    let update = std::env::var_os("UPDATE_SCHEMAS").is_some();
    let mut stale = Vec::new();
    for name in SchemaName::ALL {
        let path = dir.join(file_name(name));
        let text = render(&schema(name));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} differ from what the code generates: run `UPDATE_SCHEMAS=1 cargo test --test it schemas` or `cargo run -- schema --all --out schemas`"
    );
    // Nothing else lives in schemas/.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected: Vec<String> = SchemaName::ALL.iter().map(|n| file_name(*n)).collect();
    expected.sort();
    assert_eq!(names, expected);
}

#[test]
fn the_schemas_are_2020_12_schemas_that_refuse_unknown_members() {
    for name in SchemaName::ALL {
        let s = schema(name);
        assert_eq!(
            s["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name:?}"
        );
        jsonschema::meta::validate(&s).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        assert_eq!(s["additionalProperties"], false, "{name:?}");
        assert_eq!(s["properties"]["$schema"]["type"], "string", "{name:?}");
        // deny_unknown_fields shows everywhere: every object with properties is closed.
        let mut open = Vec::new();
        closed_objects(&s, "", &mut open);
        assert!(open.is_empty(), "{name:?}: objects not closed: {open:?}");
    }
    // The mock definition is in the operation, resource and prompt schemas.
    for name in [
        SchemaName::Operation,
        SchemaName::Resource,
        SchemaName::Prompt,
    ] {
        let s = schema(name);
        assert_eq!(
            s["properties"]["mock"]["$ref"], "#/$defs/MockDefinition",
            "{name:?}"
        );
        assert_eq!(
            s["$defs"]["MockDefinition"]["properties"]["variants"]["maxProperties"], 30,
            "{name:?}"
        );
    }
}

/// Paths of the schema objects that list `properties` without `additionalProperties: false`.
fn closed_objects(v: &Value, at: &str, open: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let is_subschema_props = at.ends_with("/properties");
            if !is_subschema_props
                && m.contains_key("properties")
                && !m.contains_key("if")
                && m.get("additionalProperties") != Some(&Value::Bool(false))
                && !at.contains("/then")
                && !at.contains("/if")
            {
                open.push(at.to_string());
            }
            for (k, x) in m {
                closed_objects(x, &format!("{at}/{k}"), open);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                closed_objects(x, &format!("{at}/{i}"), open);
            }
        }
        _ => {}
    }
}

/// Parse a JSON or YAML file as a JSON value.
fn read_value(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
    if yaml {
        yaml_serde::from_str(&text).map_err(|e| e.to_string())
    } else {
        serde_json::from_str(&text).map_err(|e| e.to_string())
    }
}

/// The schema's errors for one file (empty: accepted).
fn schema_errors(kind: Kind, path: &Path) -> Vec<String> {
    let value = match read_value(path) {
        Ok(v) => v,
        Err(e) => return vec![format!("not parseable: {e}")],
    };
    let s = schema(kind.schema());
    let validator = jsonschema::validator_for(&s).expect("the schema compiles");
    validator
        .iter_errors(&value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// What `understudy check` reports for one file on its own (empty: accepted).
fn check_problems(kind: Kind, path: &Path) -> Vec<String> {
    let problems = |p: Vec<understudy::error::Problem>| -> Vec<String> {
        p.iter().map(|p| p.to_string()).collect()
    };
    match kind {
        Kind::Project => {
            let text = std::fs::read_to_string(path).unwrap();
            match Config::parse(&text, path) {
                Ok(_) => Vec::new(),
                Err(e) => vec![e.to_string()],
            }
        }
        Kind::Operation(profile) => match load_file(path, profile) {
            Ok(l) => problems(check_operation(&l.op, profile, path)),
            Err(p) => vec![p.to_string()],
        },
        Kind::Resource | Kind::Prompt => {
            let value: Value = match serde_json::from_str(&std::fs::read_to_string(path).unwrap()) {
                Ok(v) => v,
                Err(e) => return vec![format!("not valid JSON: {e}")],
            };
            let extra = if kind == Kind::Resource {
                ExtraKind::Resource
            } else {
                ExtraKind::Prompt
            };
            match extra_operation(&value, path, extra) {
                Ok(l) => problems(check_operation(
                    &l.op,
                    understudy::contract::ProfileKind::Mcp,
                    path,
                )),
                Err(p) => problems(p),
            }
        }
        Kind::Contract => {
            let text = std::fs::read_to_string(path).unwrap();
            match understudy::evidence::verify::model::parse(&path.to_string_lossy(), &text) {
                Ok(_) => Vec::new(),
                Err(p) => p.iter().map(|p| p.to_string()).collect(),
            }
        }
    }
}

/// Every JSON/YAML file under `dir` (relative to the repository), sorted.
fn data_files(dir: &str) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(d) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p
                .extension()
                .is_some_and(|x| x == "json" || x == "yaml" || x == "yml")
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo().join(dir), &mut out);
    out.sort();
    out
}

/// The kind of every file of the corpus `tests/fixtures/schemas/`.
fn corpus() -> Vec<(PathBuf, Kind)> {
    let root = repo().join("tests/fixtures/schemas");
    data_files("tests/fixtures/schemas")
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let kind = match rel.split('/').collect::<Vec<_>>().as_slice() {
                ["project", _] => Kind::Project,
                ["operation", "rest", _] => {
                    Kind::Operation(understudy::contract::ProfileKind::Rest)
                }
                ["operation", "salesforce", _] => {
                    Kind::Operation(understudy::contract::ProfileKind::Salesforce)
                }
                ["operation", "mcp", _] => Kind::Operation(understudy::contract::ProfileKind::Mcp),
                ["mcp", "resources", _] => Kind::Resource,
                ["mcp", "prompts", _] => Kind::Prompt,
                ["contract", _] => Kind::Contract,
                _ => panic!("tests/fixtures/schemas/{rel}: a file of no known kind"),
            };
            (p, kind)
        })
        .collect()
}

/// Every file of the examples' projects: the project file, its operations (and MCP resources
/// and prompts) as the integration's profile, its contracts.
fn example_files() -> BTreeMap<PathBuf, Kind> {
    let mut out = BTreeMap::new();
    for file in data_files("examples") {
        if file.file_name().is_some_and(|n| n == "understudy.json") {
            let cfg = Config::load(&file).unwrap_or_else(|e| panic!("{e}"));
            out.insert(file.clone(), Kind::Project);
            for i in cfg.integrations.values() {
                let profile = i.profile;
                for f in data_files(&i.operations.strip_prefix(repo()).unwrap().to_string_lossy()) {
                    let parent = f.parent().unwrap();
                    let kind = if parent.ends_with("resources") {
                        Kind::Resource
                    } else if parent.ends_with("prompts") {
                        Kind::Prompt
                    } else {
                        Kind::Operation(profile)
                    };
                    out.insert(f, kind);
                }
            }
            if let Some(dir) = &cfg.contracts {
                for f in data_files(&dir.strip_prefix(repo()).unwrap().to_string_lossy()) {
                    out.insert(f, Kind::Contract);
                }
            }
        }
    }
    out
}

/// JSON and YAML files of the repository that are no file a user writes for understudy.
const NOT_OURS: &[(&str, &str)] = &[
    (
        "examples/ci/",
        "CI pipeline definitions (GitHub Actions, GitLab CI)",
    ),
    (
        "profiles/",
        "profile data embedded in the binary, not written by users",
    ),
    (
        "tests/fixtures/import/",
        "inputs of `understudy import`: HAR, Postman, WireMock, OpenAPI",
    ),
    (
        "tests/fixtures/openapi-real/",
        "real vendors' OpenAPI documents, inputs of `understudy import`",
    ),
    (
        "tests/fixtures/postman-real/",
        "Postman collections converted from those documents, inputs of `understudy import`",
    ),
];

#[test]
fn every_example_profile_and_fixture_file_is_classified_and_valid() {
    let examples = example_files();
    assert!(
        examples.values().any(|k| *k == Kind::Contract)
            && examples.values().any(|k| matches!(k, Kind::Operation(_))),
        "the examples hold operations and contracts: {examples:?}"
    );
    let corpus: BTreeMap<PathBuf, Kind> = corpus().into_iter().collect();
    let mut unclassified = Vec::new();
    let mut failures = Vec::new();
    for dir in ["examples", "profiles", "tests/fixtures"] {
        for file in data_files(dir) {
            let rel = file
                .strip_prefix(repo())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if corpus.contains_key(&file) {
                continue; // judged by the corpus test
            }
            if let Some(kind) = examples.get(&file) {
                let s = schema_errors(*kind, &file);
                let c = check_problems(*kind, &file);
                if !s.is_empty() || !c.is_empty() {
                    failures.push(format!("{rel} ({kind:?}): schema {s:?}, check {c:?}"));
                }
            } else if !NOT_OURS.iter().any(|(prefix, _)| rel.starts_with(prefix)) {
                unclassified.push(rel);
            }
        }
    }
    assert!(
        unclassified.is_empty(),
        "files of no known kind (add them to a project, the corpus or NOT_OURS): {unclassified:?}"
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_schema_and_check_agree_on_every_corpus_file() {
    let doc = std::fs::read_to_string(repo().join("docs/src/reference/schemas.md"))
        .expect("docs/src/reference/schemas.md lists the rules the schemas cannot express");
    let root = repo().join("tests/fixtures/schemas");
    let semantic: BTreeMap<&str, &str> = SEMANTIC.iter().copied().collect();
    let mut failures = Vec::new();
    let mut seen = Vec::new();
    let files = corpus();
    assert!(files.len() > 100, "the corpus is there: {}", files.len());
    for (file, kind) in files {
        let rel = file.strip_prefix(&root).unwrap().with_extension("");
        let rel = rel.to_string_lossy().into_owned();
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let s = schema_errors(kind, &file);
        let c = check_problems(kind, &file);
        let (schema_ok, check_ok) = (s.is_empty(), c.is_empty());
        let expect = if stem.starts_with("ok_") {
            (true, true)
        } else if stem.starts_with("bad_") {
            (false, false)
        } else if stem.starts_with("sem_") {
            match semantic.get(rel.as_str()) {
                Some(rule) => {
                    seen.push(rel.clone());
                    if !doc.contains(&format!("`{rule}`")) {
                        failures.push(format!(
                            "{rel}: rule `{rule}` is not listed in docs/src/reference/schemas.md"
                        ));
                    }
                }
                None => failures.push(format!("{rel}: a sem_ file with no rule in SEMANTIC")),
            }
            (true, false)
        } else {
            panic!("{rel}: corpus files are named ok_*, bad_* or sem_*");
        };
        if (schema_ok, check_ok) != expect {
            failures.push(format!(
                "{rel} ({kind:?}): expected schema {} and check {}, got schema {s:?} and check {c:?}",
                if expect.0 { "accepts" } else { "refuses" },
                if expect.1 { "accepts" } else { "refuses" },
            ));
        }
    }
    for (rel, _) in SEMANTIC {
        if !seen.iter().any(|s| s == rel) {
            failures.push(format!("SEMANTIC names {rel}, which is not in the corpus"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_schema_command_prints_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("schemas");
    let run = |args: &[&str]| {
        let mut full = vec!["understudy", "schema"];
        full.extend_from_slice(args);
        understudy::commands::run(full).code()
    };
    // Not written yet: --check fails, writing succeeds, then --check passes.
    let o = out.to_str().unwrap();
    assert_eq!(run(&["--all", "--out", o, "--check"]), 1);
    assert_eq!(run(&["--all", "--out", o]), 0);
    assert_eq!(run(&["--all", "--out", o, "--check"]), 0);
    for name in SchemaName::ALL {
        let written = std::fs::read_to_string(out.join(file_name(name))).unwrap();
        assert_eq!(written, render(&schema(name)));
    }
    // A changed file is caught.
    std::fs::write(out.join("contract.schema.json"), "{}\n").unwrap();
    assert_eq!(run(&["--all", "--out", o, "--check"]), 1);
    // Usage errors.
    assert_eq!(run(&[]), 2);
    assert_eq!(run(&["nonsense"]), 2);
    assert_eq!(run(&["project", "--all"]), 2);
    assert_eq!(run(&["project"]), 0);
}
