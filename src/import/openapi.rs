//! Not implemented yet: `--from openapi` answers a usage error.
use super::Imported;
use crate::config::ProfileKind;
use std::path::Path;
pub fn import(_f: &Path, _t: &str, _p: ProfileKind) -> Result<Imported, String> {
    Err("`--from openapi` is not implemented yet".to_string())
}
