//! Not implemented yet: `--from wiremock` answers a usage error.
use super::Imported;
use crate::config::ProfileKind;
use std::path::Path;
pub fn import(_f: &Path, _p: ProfileKind) -> Result<Imported, String> {
    Err("`--from wiremock` is not implemented yet".to_string())
}
