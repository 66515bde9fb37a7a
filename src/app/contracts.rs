//! The tool-call contracts of a running server (docs/src/reference/contracts.md): the set loaded from the project's
//! contracts directory, checked against the operations, swapped on a hot reload, and what an
//! attempt pins from it.
//!
//! - **Start** ([`load_checked`], from `App::build`): every `*.yaml`/`*.yml`/`*.json` file of
//!   `contracts` (`understudy.json`; default `contracts/` beside it when it exists) is parsed
//!   and validated ([`crate::evidence::verify::load_dir`]) and checked against the loaded operations
//!   ([`crate::evidence::verify::check_contract`] over a [`SchemaCatalog`]); any problem refuses the
//!   start, as for operation files.
//! - **Hot reload** ([`poll`], called by `crate::server::reload` at every tick): when the
//!   directory's file set or any file's content changed, the whole set is loaded and checked
//!   again. A clean set replaces the current one for attempts created from then on; a set with
//!   problems is logged (`warn`), kept in [`Contracts::problems`], and the previous set keeps
//!   serving. Running attempts are never affected: they pinned their contracts.
//! - **Pinning** ([`Contracts::pin`]): `POST /attempts` `"contracts": [ids]` copies each
//!   contract (as JSON) and its hash into the attempt record, so a verdict read later — after
//!   a restart or an edit — evaluates exactly that version.
//!
//! Problems are [`crate::error::Problem`]s whose `path` is the contract's own key path
//! (`arguments.sources.Contact__c.result_of`, `order.tools[1]`), as `verify` spells it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;

use super::generations::IntegrationMap;
use crate::contract::hash::sha256_hex;
use crate::error::Problem;
use crate::evidence::verify::{self, ToolCallContract, ToolCatalog};
use crate::records::PinnedContract;

/// One loaded, checked contract.
#[derive(Debug, Clone)]
pub struct LoadedContract {
    pub contract: ToolCallContract,
    /// `sha256:` of its RFC 8785 canonical JSON.
    pub hash: String,
    pub file: PathBuf,
}

/// Contract id → contract.
pub type ContractSet = BTreeMap<String, LoadedContract>;

/// The input schemas of the project's operations (`integration/operation_id` → schema), the
/// [`ToolCatalog`] contracts are checked against.
#[derive(Debug, Default, Clone)]
pub struct SchemaCatalog {
    pub tools: BTreeMap<String, Value>,
}

impl SchemaCatalog {
    /// Every operation of a running server's integrations.
    pub fn from_integrations(map: &IntegrationMap) -> SchemaCatalog {
        let mut tools = BTreeMap::new();
        for integ in map.values() {
            for op in &integ.operations {
                tools.insert(op.key(), op.op.input_schema.as_ref().clone());
            }
        }
        let mut c = SchemaCatalog { tools };
        for integ in map.values() {
            c.add_builtin_defaults(integ.name(), integ.config.profile);
        }
        c
    }

    /// The built-in operations of `integration` that answer without a file (the Salesforce
    /// login and reads), unless a file already named them: a contract may name them (a
    /// login contract requires `client_credentials` on `crm/oauth_token`). Their arguments
    /// follow no schema (`{}`: every path is allowed).
    pub fn add_builtin_defaults(
        &mut self,
        integration: &str,
        profile: crate::contract::ProfileKind,
    ) {
        if profile != crate::contract::ProfileKind::Salesforce {
            return;
        }
        let defaults = crate::profile::salesforce::defaults::WITH_DEFAULTS.iter();
        for id in defaults.chain(crate::profile::salesforce::org::WITH_STATE) {
            self.tools
                .entry(format!("{integration}/{id}"))
                .or_insert_with(|| serde_json::json!({}));
        }
    }
}

impl ToolCatalog for SchemaCatalog {
    fn exists(&self, tool: &str) -> bool {
        self.tools.contains_key(tool)
    }
    fn has_integration(&self, integration: &str) -> bool {
        self.tools
            .keys()
            .any(|k| k.split_once('/').is_some_and(|(i, _)| i == integration))
    }
    fn input_schema(&self, tool: &str) -> Option<&Value> {
        self.tools.get(tool)
    }
}

/// Loads every contract of `dir` and checks it against `catalog`: the set, or every problem.
pub fn load_checked(dir: &Path, catalog: &dyn ToolCatalog) -> Result<ContractSet, Vec<Problem>> {
    let (loaded, mut problems) = verify::load_dir(dir);
    let mut set = ContractSet::new();
    for (contract, hash, file) in loaded {
        problems.extend(verify::check_contract(
            &contract,
            &file.display().to_string(),
            catalog,
        ));
        set.insert(
            contract.id.clone(),
            LoadedContract {
                contract,
                hash,
                file,
            },
        );
    }
    if problems.is_empty() {
        Ok(set)
    } else {
        Err(problems)
    }
}

/// The contracts of a running server: the current set, the problems of the last refused
/// reload, and what the directory looked like at the last poll.
pub struct Contracts {
    dir: Option<PathBuf>,
    current: RwLock<Arc<ContractSet>>,
    problems: RwLock<Vec<Problem>>,
    seen: Mutex<String>,
}

/// Why `POST /attempts` cannot pin a contract: the ids that are not loaded, and the known ids.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownContracts {
    pub unknown: Vec<String>,
    pub known: Vec<String>,
}

impl Contracts {
    /// The set loaded at start from `dir` (none when the project has no contracts directory).
    pub fn new(dir: Option<PathBuf>, set: ContractSet) -> Contracts {
        let seen = dir.as_deref().map(signature).unwrap_or_default();
        Contracts {
            dir,
            current: RwLock::new(Arc::new(set)),
            problems: RwLock::new(Vec::new()),
            seen: Mutex::new(seen),
        }
    }

    /// The contracts directory, if the project has one.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The current set (what new attempts pin from).
    pub fn current(&self) -> Arc<ContractSet> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The problems of the last refused reload (empty once a reload succeeds).
    pub fn problems(&self) -> Vec<Problem> {
        self.problems
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The pinned form of each id, or the ids that are not loaded.
    pub fn pin(
        &self,
        ids: &[String],
    ) -> Result<BTreeMap<String, PinnedContract>, UnknownContracts> {
        let set = self.current();
        let unknown: Vec<String> = ids
            .iter()
            .filter(|id| !set.contains_key(*id))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(UnknownContracts {
                unknown,
                known: set.keys().cloned().collect(),
            });
        }
        Ok(ids
            .iter()
            .filter_map(|id| set.get(id).map(|c| (id.clone(), pinned(c))))
            .collect())
    }

    /// Reloads the set when the directory changed since the last call; `Some(problems)` when
    /// it was reloaded (empty: the new set serves), `None` when nothing changed.
    pub fn reload_if_changed(&self, catalog: &dyn ToolCatalog) -> Option<Vec<Problem>> {
        let dir = self.dir.as_deref()?;
        let sig = signature(dir);
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if *seen == sig {
                return None;
            }
            *seen = sig;
        }
        match load_checked(dir, catalog) {
            Ok(set) => {
                tracing::info!(dir = %dir.display(), contracts = set.len(), "tool-call contracts reloaded");
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(set);
                self.problems
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .clear();
                Some(Vec::new())
            }
            Err(problems) => {
                for p in &problems {
                    tracing::warn!(problem = %p, "tool-call contracts not reloaded: the previous set keeps serving");
                }
                *self.problems.write().unwrap_or_else(|p| p.into_inner()) = problems.clone();
                Some(problems)
            }
        }
    }
}

/// The pinned form of a loaded contract.
pub fn pinned(c: &LoadedContract) -> PinnedContract {
    PinnedContract {
        contract_hash: c.hash.clone(),
        contract: serde_json::to_value(&c.contract).unwrap_or(Value::Null),
    }
}

/// A digest of the directory's contract files (names and contents): changes when a file is
/// added, removed or edited. Contract directories are small and polled at human pace.
fn signature(dir: &Path) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                        matches!(e.to_ascii_lowercase().as_str(), "yaml" | "yml" | "json")
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut all = Vec::new();
    for f in files {
        all.extend_from_slice(f.display().to_string().as_bytes());
        all.push(0);
        all.extend_from_slice(sha256_hex(&std::fs::read(&f).unwrap_or_default()).as_bytes());
        all.push(0);
    }
    sha256_hex(&all)
}

/// One poll of a running server: reload the contracts when their files changed, checked
/// against the current operations.
pub fn poll(app: &super::App) -> Option<Vec<Problem>> {
    let catalog = SchemaCatalog::from_integrations(&app.integrations);
    app.contracts.reload_if_changed(&catalog)
}
