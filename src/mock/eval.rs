//! Evaluation of a version-1 definition (SPEC 3.1–3.3). See [`Engine::evaluate`].

use crate::error::CallError;
use crate::mock::model::Definition;
use serde_json::{Map, Value};

/// What one call decided. The caller commits `state_patch` (key by key at the top level),
/// sleeps `delay_ms`, and answers `result`.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub result: Value,
    pub state_patch: Map<String, Value>,
    pub delay_ms: u64,
    pub variant: String,
    /// Index of the rule that matched inside the variant, or `None`.
    pub rule: Option<usize>,
}

/// A definition compiled once per pinned revision: references, paths and literals parsed,
/// ready to evaluate many calls. `Send + Sync`.
#[derive(Debug)]
pub struct Engine {
    def: Definition,
}

impl Engine {
    /// Compile a parsed definition. Fails with a harness error (`invalid_fixture_literal`,
    /// malformed reference…) when the definition itself is broken.
    pub fn new(def: Definition) -> Result<Engine, CallError> {
        Ok(Engine { def })
    }

    pub fn definition(&self) -> &Definition {
        &self.def
    }

    /// The union of this definition's `initial_state` (empty object when absent).
    pub fn initial_state(&self) -> Map<String, Value> {
        self.def.initial_state.clone().unwrap_or_default()
    }

    /// Evaluate one call. `variant` None → `default_variant`. `state` is the pre-call state of
    /// the attempt's integration. Pure: reads no clock, does no I/O.
    pub fn evaluate(
        &self,
        _variant: Option<&str>,
        _input: &Value,
        _state: &Map<String, Value>,
    ) -> Result<Outcome, CallError> {
        unimplemented!("engine evaluation: being written")
    }
}
