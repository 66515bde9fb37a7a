//! `understudy ca init`: create the local test CA ([`crate::tls::Ca::init`]) and say where
//! it is and how to trust it.

use std::path::Path;

use super::Exit;
use crate::tls::{Ca, TlsError};

/// `understudy ca init [--dir D] [--force]`: writes the CA and prints where and what next.
/// Exit code 0, 2 when a file exists without `--force`, 1 on any other failure.
pub fn init(dir: &Path, force: bool) -> Exit {
    match Ca::init(dir, force) {
        Ok(paths) => {
            println!("created a local test CA (ECDSA P-256, valid for two years):");
            println!("  certificate  {}", paths.cert.display());
            println!(
                "  private key  {}  (mode 0600; never commit it)",
                paths.key.display()
            );
            println!();
            println!("Trust it only in the processes under test, e.g.:");
            println!("  export SSL_CERT_FILE={}", paths.cert.display());
            println!("  export REQUESTS_CA_BUNDLE={}", paths.cert.display());
            println!("  export NODE_EXTRA_CA_CERTS={}", paths.cert.display());
            println!("  curl --cacert {} …", paths.cert.display());
            println!("certs/README.md covers other runtimes and how to remove the CA again.");
            Exit::Ok
        }
        Err(e @ TlsError::Exists { .. }) => {
            eprintln!("understudy ca init: {e}");
            Exit::Usage
        }
        Err(e) => {
            eprintln!("understudy ca init: {e}");
            Exit::Problems
        }
    }
}
