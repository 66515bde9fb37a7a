//! Pinned revisions compiled once ([`Engines`]), shared by every attempt that pins them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{CallError, HarnessCode, HarnessError};
use crate::mock::Engine;
use crate::operation::lazy::compile_definition;
use crate::operation::Operation;
use crate::records::Pin;
use crate::store::Store;

/// Pinned revisions compiled once, keyed by (`"<integration>/<operation_id>"`, revision) and
/// shared by every attempt.
#[derive(Default)]
pub struct Engines {
    map: Mutex<HashMap<(String, u64), Arc<Engine>>>,
}

impl Engines {
    /// The engine of revision `pin` of `op`: the file's own engine when the revision is the
    /// file's definition, else the stored definition compiled (once).
    pub fn get(&self, store: &Store, op: &Operation, pin: &Pin) -> Result<Arc<Engine>, CallError> {
        let key = (op.key(), pin.revision);
        if let Some(e) = self.lock().get(&key) {
            return Ok(e.clone());
        }
        let rev = store
            .revision(&key.0, pin.revision)
            .map_err(|e| {
                HarnessError::new(
                    HarnessCode::NoMock,
                    format!("cannot read revision {} of `{}`: {e}", pin.revision, key.0),
                )
            })?
            .ok_or_else(|| {
                HarnessError::new(
                    HarnessCode::NoMock,
                    format!(
                        "revision {} of `{}` is not in the store",
                        pin.revision, key.0
                    ),
                )
            })?;
        let engine = match (&op.op.mock, &op.definition_hash) {
            (Some(_), Some(h)) if *h == rev.definition_hash => op
                .engine()?
                .expect("an operation with a mock has an engine"),
            _ => Arc::new(compile_definition(
                &rev.definition,
                &format!("revision {} of `{}`", pin.revision, key.0),
            )?),
        };
        Ok(self.lock().entry(key).or_insert(engine).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u64), Arc<Engine>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}
