//! An operation file's mock engine compiled on first use (issue 20: a start-up with 10 000
//! operations compiled every engine, ~21 KB each, although a run calls few of them).
//!
//! [`LazyEngine`] holds nothing until [`LazyEngine::get`] compiles the definition once (a
//! `OnceLock`: concurrent first callers wait for one compilation) and every later call shares
//! that `Arc<Engine>`. Only definitions known to compile are left pending — ones `check`
//! compiled while evaluating the examples, or the check cache says passed — so a failure there
//! would be a broken invariant; it is still answered as the harness error a stored revision
//! that does not compile gets ([`compile_definition`]), never a panic.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::contract::MockText;
use crate::error::{CallError, HarnessCode, HarnessError};
use crate::mock::{Definition, Engine};

/// Compile a stored definition (a pinned revision's, or a file's mock) into an engine; `what`
/// names it in the error (e.g. "revision 3 of `crm/get_account`").
pub fn compile_definition(definition: &Value, what: &str) -> Result<Engine, CallError> {
    let def = Definition::from_value(definition).map_err(|m| {
        HarnessError::new(
            HarnessCode::InvalidFixtureLiteral,
            format!("{what} is not a valid definition: {m}"),
        )
    })?;
    Engine::new(def)
}

/// A mock engine compiled on first use (module doc).
#[derive(Default)]
pub struct LazyEngine {
    cell: OnceLock<Result<Arc<Engine>, CallError>>,
}

impl LazyEngine {
    /// An engine compiled already (kept as it is).
    pub fn ready(engine: Engine) -> LazyEngine {
        LazyEngine {
            cell: OnceLock::from(Ok(Arc::new(engine))),
        }
    }

    /// The engine of `definition`, compiled by the first call; `what` names it in an error.
    pub fn get(
        &self,
        definition: &MockText,
        what: impl FnOnce() -> String,
    ) -> Result<Arc<Engine>, CallError> {
        self.cell
            .get_or_init(|| compile_definition(&definition.parse(), &what()).map(Arc::new))
            .clone()
    }

    /// Whether the engine was compiled (by [`LazyEngine::ready`] or a first call).
    pub fn is_compiled(&self) -> bool {
        self.cell.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn definition() -> MockText {
        MockText::new(&json!({"schema_version": 1, "default_variant": "a",
               "variants": {"a": {"result": {"id": {"$input": "id"}}}}, "examples": []}))
    }

    #[test]
    fn nothing_is_compiled_before_the_first_call_and_once_after() {
        let lazy = LazyEngine::default();
        assert!(!lazy.is_compiled());
        let mut named = 0;
        let first = lazy
            .get(&definition(), || {
                named += 1;
                "x".into()
            })
            .unwrap();
        assert!(lazy.is_compiled());
        // A second call compiles nothing: it is given another definition and gets the first.
        let second = lazy
            .get(&json!({"not": "a definition"}).into(), || "y".into())
            .unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(named, 1);
        let out = first
            .decide(None, &json!({"id": "7"}), &Default::default())
            .unwrap();
        assert_eq!(*out.result.value(), json!({"id": "7"}));
    }

    #[test]
    fn a_definition_that_does_not_compile_is_the_same_harness_error_every_time() {
        let lazy = LazyEngine::default();
        let bad = MockText::new(&json!({"schema_version": 1, "default_variant": "a",
                         "variants": {"a": {"result": {"amount": {"$number": "abc"}}}}}));
        let e = lazy.get(&bad, || "the mock of `crm/x`".into()).unwrap_err();
        assert_eq!(e.kind(), "harness_error");
        assert_eq!(e, lazy.get(&bad, || unreachable!()).unwrap_err());
        let e = lazy
            .get(&json!({"schema_version": "one"}).into(), || unreachable!())
            .unwrap_err();
        assert_eq!(e.kind(), "harness_error");
        let e = LazyEngine::default()
            .get(&json!({"schema_version": "one"}).into(), || {
                "the mock of `crm/x`".into()
            })
            .unwrap_err();
        match e {
            CallError::Harness(h) => {
                assert_eq!(h.code, HarnessCode::InvalidFixtureLiteral);
                assert!(
                    h.message
                        .starts_with("the mock of `crm/x` is not a valid definition"),
                    "{}",
                    h.message
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
