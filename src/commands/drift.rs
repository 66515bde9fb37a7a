use super::Exit;
use crate::cli::DriftArgs;
pub fn drift(_a: &DriftArgs) -> Exit {
    Exit::Usage
}
