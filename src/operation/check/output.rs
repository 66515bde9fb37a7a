//! The output schema rule ([`schema_errors`]), shared by `check` and the call core
//! ([`crate::operation::call`]); the other output rule, the profile's native envelope, is
//! [`crate::profile::envelope`].

use serde_json::Value;

/// Every error of `instance` against a compiled schema, as `at /instance/path: message`
/// (`at (root)` for the whole value).
pub fn schema_errors(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    // The common case first: `is_valid` stops at nothing and builds no error.
    if validator.is_valid(instance) {
        return Vec::new();
    }
    validator
        .iter_errors(instance)
        .map(|e| {
            let p = e.instance_path().to_string();
            let at = if p.is_empty() {
                "(root)".to_string()
            } else {
                p
            };
            format!("at {at}: {e}")
        })
        .collect()
}
