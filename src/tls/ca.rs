//! The local test CA: creation (`ca init`), loading with a self-test, and leaf signing.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, SerialNumber,
};
use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{CertificateError, RootCertStore};
use sha2::{Digest, Sha256};

use super::{normalize_host, provider, TlsError};

/// File name of the CA certificate inside the CA directory.
pub const CA_CERT_FILE: &str = "understudy-ca.pem";
/// File name of the CA private key inside the CA directory (mode 0600).
pub const CA_KEY_FILE: &str = "understudy-ca-key.pem";
/// Common name of every understudy CA: what a trust store lists.
pub const CA_COMMON_NAME: &str = "understudy local test CA — do not trust outside development";
const CA_ORGANIZATION: &str = "understudy (local test CA, development only)";

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);
const CA_BACKDATE: Duration = DAY;
const CA_LIFETIME: Duration = Duration::from_secs(730 * 24 * 3600);
const LEAF_BACKDATE: Duration = HOUR;
/// How long a leaf is valid after it is made.
pub(crate) const LEAF_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// A CA that expires sooner than this is reported at load.
const EXPIRY_WARNING: Duration = Duration::from_secs(30 * 24 * 3600);
const SELF_TEST_HOST: &str = "understudy-self-test.invalid";

/// Where `ca init` wrote the CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaPaths {
    pub dir: PathBuf,
    /// `DIR/understudy-ca.pem`
    pub cert: PathBuf,
    /// `DIR/understudy-ca-key.pem`
    pub key: PathBuf,
}

impl CaPaths {
    pub fn in_dir(dir: &Path) -> CaPaths {
        CaPaths {
            dir: dir.to_path_buf(),
            cert: dir.join(CA_CERT_FILE),
            key: dir.join(CA_KEY_FILE),
        }
    }
}

/// A loaded (or freshly generated) CA that signs leaves. `Send + Sync`: share it in an `Arc`.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    /// Unix seconds of the certificate's notAfter, when it could be read.
    not_after: Option<i64>,
}

impl fmt::Debug for Ca {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ca")
            .field("key_id", &key_id(self.issuer.key()))
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl Ca {
    /// A new CA in memory (ECDSA P-256, valid from one day ago for two years).
    pub fn generate() -> Result<Ca, TlsError> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(generate_err)?;
        let mut params = ca_identity(&key);
        set_validity(&mut params, CA_BACKDATE, CA_LIFETIME);
        params.serial_number = Some(random_serial()?);
        let cert = params.self_signed(&key).map_err(generate_err)?;
        let cert_der = cert.der().clone();
        let not_after = validity(&cert_der).map(|(_, after)| after);
        Ok(Ca {
            issuer: Issuer::new(params, key),
            cert_pem: cert.pem(),
            cert_der,
            not_after,
        })
    }

    /// `understudy ca init`: write `dir/understudy-ca.pem` (0644) and
    /// `dir/understudy-ca-key.pem` (created 0600). An existing file is never replaced
    /// without `force`; with `force` each file is replaced atomically (written aside, then
    /// renamed), so no reader ever sees half a key.
    pub fn init(dir: &Path, force: bool) -> Result<CaPaths, TlsError> {
        let paths = CaPaths::in_dir(dir);
        if !force {
            for p in [&paths.key, &paths.cert] {
                if fs::symlink_metadata(p).is_ok() {
                    return Err(TlsError::Exists { path: p.clone() });
                }
            }
        }
        fs::create_dir_all(dir).map_err(|source| TlsError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let ca = Ca::generate()?;
        write_file(
            &paths.key,
            ca.issuer.key().serialize_pem().as_bytes(),
            0o600,
            force,
        )?;
        write_file(&paths.cert, ca.cert_pem.as_bytes(), 0o644, force)?;
        Ok(paths)
    }

    /// Load the CA that `ca init` wrote in `dir`, and prove it works: the key must belong to
    /// the certificate, and a leaf it signs must verify against it now.
    pub fn load(dir: &Path) -> Result<Ca, TlsError> {
        let paths = CaPaths::in_dir(dir);
        let read = |path: &Path| {
            fs::read_to_string(path).map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => TlsError::Missing {
                    path: path.to_path_buf(),
                    dir: dir.to_path_buf(),
                },
                _ => TlsError::Io {
                    path: path.to_path_buf(),
                    source,
                },
            })
        };
        let cert_pem = read(&paths.cert)?;
        let key_pem = read(&paths.key)?;
        warn_if_key_is_readable_by_others(&paths.key);
        let recreate = format!(
            "recreate the CA with `understudy ca init --dir {} --force` and trust the new one",
            dir.display()
        );
        let invalid = |path: &Path, message: String| TlsError::Invalid {
            path: path.to_path_buf(),
            message,
        };

        let cert_der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| invalid(&paths.cert, format!("not a PEM certificate ({e})")))?;
        let key = KeyPair::from_pem(&key_pem)
            .map_err(|e| invalid(&paths.key, format!("not a PEM private key ({e})")))?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        CertifiedKey::from_der(vec![cert_der.clone()], key_der, &provider()).map_err(|e| {
            let what = match e {
                rustls::Error::InconsistentKeys(_) => format!(
                    "this key does not belong to {}; {recreate}",
                    paths.cert.display()
                ),
                e => format!("unusable with {} ({e})", paths.cert.display()),
            };
            invalid(&paths.key, what)
        })?;

        let not_after = validity(&cert_der).map(|(_, after)| after);
        let ca = Ca {
            issuer: Issuer::new(ca_identity(&key), key),
            cert_pem,
            cert_der,
            not_after,
        };
        if let Some(after) = ca.not_after {
            let now = unix_now() as i64;
            if after <= now {
                return Err(invalid(
                    &paths.cert,
                    format!("the CA certificate has expired; {recreate}"),
                ));
            }
            if after - now < EXPIRY_WARNING.as_secs() as i64 {
                tracing::warn!(
                    file = %paths.cert.display(),
                    "the local CA expires in less than 30 days; {recreate}"
                );
            }
        }
        let leaf = ca.leaf(SELF_TEST_HOST)?;
        ca.verify_leaf(&leaf.cert[0], SELF_TEST_HOST)
            .map_err(|e| {
                let message = match e {
                    rustls::Error::InvalidCertificate(
                        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. },
                    ) => "the CA certificate is not valid yet (is the clock right?)".to_string(),
                    rustls::Error::InvalidCertificate(
                        CertificateError::UnknownIssuer
                        | CertificateError::BadSignature,
                    ) => format!(
                        "this CA was not made by `understudy ca init` (leaves signed with its key do not chain to it); {recreate}"
                    ),
                    e => format!("leaves signed by this CA do not verify ({e}); {recreate}"),
                };
                invalid(&paths.cert, message)
            })?;
        Ok(ca)
    }

    /// The CA certificate (DER), e.g. for a client's root store.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// The CA certificate (PEM), the content of `understudy-ca.pem`.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's public key (SubjectPublicKeyInfo, DER).
    pub fn public_key_der(&self) -> Vec<u8> {
        self.issuer.key().subject_public_key_info()
    }

    /// Unix time (seconds) at which the CA certificate expires, when it could be read.
    pub fn not_after_unix(&self) -> Option<i64> {
        self.not_after
    }

    /// A leaf for one host (DNS name or IP literal, `[::1]` accepted) with a fresh key.
    pub fn leaf(&self, host: &str) -> Result<Arc<CertifiedKey>, TlsError> {
        self.leaf_for_hosts(&[host.to_string()])
    }

    /// A leaf naming every host of `hosts` (one SAN each, IP SANs for IP literals), with a
    /// fresh ECDSA P-256 key, EKU serverAuth, valid from one hour ago for seven days.
    pub fn leaf_for_hosts(&self, hosts: &[String]) -> Result<Arc<CertifiedKey>, TlsError> {
        let mut names: Vec<String> = Vec::with_capacity(hosts.len());
        for h in hosts {
            let n = normalize_host(h)?;
            if !names.contains(&n) {
                names.push(n);
            }
        }
        let Some(first) = names.first().cloned() else {
            return Err(TlsError::Host {
                host: String::new(),
                message: "a leaf needs at least one host".into(),
            });
        };
        let mut params = CertificateParams::new(names).map_err(|e| TlsError::Host {
            host: hosts.join(", "),
            message: e.to_string(),
        })?;
        params.distinguished_name = DistinguishedName::new();
        // webpki reads only the SANs; the CN is for people reading the certificate.
        if first.len() <= 64 {
            params.distinguished_name.push(DnType::CommonName, first);
        }
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial()?);
        set_validity(&mut params, LEAF_BACKDATE, LEAF_LIFETIME);

        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(generate_err)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(generate_err)?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signing_key = provider().key_provider.load_private_key(key_der)?;
        Ok(Arc::new(CertifiedKey::new(
            vec![cert.der().clone()],
            signing_key,
        )))
    }

    /// Verify `cert` as a server certificate for `host` against this CA alone, now (what a
    /// client trusting only this CA does). `Ok` means: chains to this CA, valid now, names
    /// `host`, usable for serverAuth.
    pub fn verify_leaf(&self, cert: &CertificateDer<'_>, host: &str) -> Result<(), rustls::Error> {
        let mut roots = RootCertStore::empty();
        roots.add(self.cert_der.clone())?;
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        let name = normalize_host(host).map_err(|e| rustls::Error::General(e.to_string()))?;
        let name = ServerName::try_from(name)
            .map_err(|e| rustls::Error::General(format!("server name: {e}")))?;
        verifier
            .verify_server_cert(cert, &[], &name, &[], UnixTime::now())
            .map(|_| ())
    }
}

/// Subject, key usages and key-id method of the CA for `key`. Deterministic in the key, so
/// `load` rebuilds the issuer without parsing the certificate (the self-test proves it).
fn ca_identity(key: &KeyPair) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_COMMON_NAME);
    dn.push(DnType::OrganizationName, CA_ORGANIZATION);
    dn.push(
        DnType::OrganizationalUnitName,
        format!("key {}", key_id(key)),
    );
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

/// 16 hex digits of SHA-256 over the key's SubjectPublicKeyInfo.
fn key_id(key: &KeyPair) -> String {
    let digest = Sha256::digest(key.subject_public_key_info());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn generate_err(e: rcgen::Error) -> TlsError {
    TlsError::Generate(e.to_string())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// notBefore = now − `backdate` (clock skew), notAfter = now + `lifetime`.
fn set_validity(params: &mut CertificateParams, backdate: Duration, lifetime: Duration) {
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let now = Duration::from_secs(unix_now());
    params.not_before = epoch + now.saturating_sub(backdate);
    params.not_after = epoch + now + lifetime;
}

/// A random positive 126-bit serial (first byte in 0x40..=0x7f: positive, minimal DER).
fn random_serial() -> Result<SerialNumber, TlsError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| TlsError::Generate(format!("random serial: {e}")))?;
    bytes[0] = (bytes[0] & 0x3f) | 0x40;
    Ok(SerialNumber::from_slice(&bytes))
}

/// Create `path` with `mode` from the start (never a window with wider permissions). Without
/// `replace`, an existing file is an error; with it, the file is written aside and renamed.
fn write_file(path: &Path, contents: &[u8], mode: u32, replace: bool) -> Result<(), TlsError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TlsError::Io { path, source }
    };
    let create = |target: &Path| -> Result<(), TlsError> {
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(mode);
        }
        #[cfg(not(unix))]
        let _ = mode;
        let mut file = opts.open(target).map_err(|source| {
            if source.kind() == std::io::ErrorKind::AlreadyExists {
                TlsError::Exists {
                    path: target.to_path_buf(),
                }
            } else {
                TlsError::Io {
                    path: target.to_path_buf(),
                    source,
                }
            }
        })?;
        file.write_all(contents).map_err(io(target))?;
        file.sync_all().map_err(io(target))
    };
    if !replace {
        return create(path);
    }
    crate::util::fs::write_atomic_mode(path, contents, mode).map_err(io(path))
}

fn warn_if_key_is_readable_by_others(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    file = %path.display(),
                    "the CA private key is readable by other users (mode {mode:o}); run `chmod 600` on it"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

// ---- a minimal DER walk to read the validity of a certificate -------------------------

/// One DER TLV at the start of `input`: (tag, content, rest).
fn der_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        first as usize
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | b as usize);
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// (notBefore, notAfter) of a DER certificate, in unix seconds.
fn validity(cert: &[u8]) -> Option<(i64, i64)> {
    const SEQUENCE: u8 = 0x30;
    let (SEQUENCE, certificate, _) = der_tlv(cert)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = der_tlv(certificate)? else {
        return None;
    };
    let mut rest = tbs;
    // version [0] EXPLICIT (optional), serialNumber, signature, issuer, then validity.
    let (tag, _, r) = der_tlv(rest)?;
    rest = if tag == 0xa0 { der_tlv(r)?.2 } else { r };
    for _ in 0..2 {
        rest = der_tlv(rest)?.2;
    }
    let (SEQUENCE, validity, _) = der_tlv(rest)? else {
        return None;
    };
    let (t1, before, r) = der_tlv(validity)?;
    let (t2, after, _) = der_tlv(r)?;
    Some((der_time(t1, before)?, der_time(t2, after)?))
}

/// UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) → unix seconds.
fn der_time(tag: u8, bytes: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(bytes).ok()?.strip_suffix('Z')?;
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (year, rest) = match (tag, s.len()) {
        (0x17, 12) => {
            let yy: i32 = s[..2].parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &s[2..])
        }
        (0x18, 14) => (s[..4].parse().ok()?, &s[4..]),
        _ => return None,
    };
    let n = |i: usize| rest[i..i + 2].parse::<u32>().ok();
    let date = chrono::NaiveDate::from_ymd_opt(year, n(0)?, n(2)?)?;
    let time = date.and_hms_opt(n(4)?, n(6)?, n(8)?)?;
    Some(time.and_utc().timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn ca_certificate_is_a_constrained_test_ca() {
        let ca = Ca::generate().unwrap();
        let der = ca.cert_der().as_ref();
        assert!(
            contains(der, CA_COMMON_NAME.as_bytes()),
            "CN names a test CA"
        );
        // basicConstraints: cA TRUE, pathLenConstraint 0.
        assert!(contains(
            der,
            &[0x30, 0x06, 0x01, 0x01, 0xff, 0x02, 0x01, 0x00]
        ));
        let (before, after) = validity(der).unwrap();
        let now = unix_now() as i64;
        assert!(
            (now - before - DAY.as_secs() as i64).abs() < 120,
            "backdated one day"
        );
        assert!(
            (after - now - CA_LIFETIME.as_secs() as i64).abs() < 120,
            "valid two years"
        );
        assert_eq!(ca.not_after_unix(), Some(after));
    }

    #[test]
    fn leaves_have_fresh_keys_short_lives_and_the_right_sans() {
        let ca = Ca::generate().unwrap();
        let leaf = ca.leaf("Acme.My.Salesforce.com").unwrap();
        leaf.keys_match().unwrap();
        let leaf_spki = leaf.key.public_key().unwrap();
        assert_ne!(leaf_spki.as_ref(), ca.public_key_der().as_slice());
        let again = ca.leaf("acme.my.salesforce.com").unwrap();
        assert_ne!(
            again.key.public_key().unwrap(),
            leaf_spki,
            "a new key per leaf"
        );

        let der = leaf.cert[0].as_ref();
        let (before, after) = validity(der).unwrap();
        let now = unix_now() as i64;
        assert!((now - before - HOUR.as_secs() as i64).abs() < 120);
        assert!((after - now - LEAF_LIFETIME.as_secs() as i64).abs() < 120);
        ca.verify_leaf(&leaf.cert[0], "acme.my.salesforce.com")
            .unwrap();
        assert!(ca.verify_leaf(&leaf.cert[0], "other.example").is_err());
        let other = Ca::generate().unwrap();
        assert!(other
            .verify_leaf(&leaf.cert[0], "acme.my.salesforce.com")
            .is_err());
    }

    #[test]
    fn ip_literals_get_ip_sans() {
        let ca = Ca::generate().unwrap();
        let v4 = ca.leaf("127.0.0.1").unwrap();
        // GeneralName iPAddress [7] with the four octets, never a dNSName holding the text.
        assert!(contains(v4.cert[0].as_ref(), &[0x87, 0x04, 127, 0, 0, 1]));
        assert!(!contains(v4.cert[0].as_ref(), b"\x82\x09127.0.0.1"));
        ca.verify_leaf(&v4.cert[0], "127.0.0.1").unwrap();
        let v6 = ca.leaf("[::1]").unwrap();
        let mut san = vec![0x87, 0x10];
        san.extend(std::net::Ipv6Addr::LOCALHOST.octets());
        assert!(contains(v6.cert[0].as_ref(), &san));
        ca.verify_leaf(&v6.cert[0], "[::1]").unwrap();
        assert!(ca.verify_leaf(&v6.cert[0], "127.0.0.1").is_err());
    }

    #[test]
    fn several_hosts_in_one_leaf() {
        let ca = Ca::generate().unwrap();
        let hosts = ["localhost", "127.0.0.1", "::1", "LOCALHOST"].map(String::from);
        let leaf = ca.leaf_for_hosts(&hosts).unwrap();
        for h in ["localhost", "127.0.0.1", "::1"] {
            ca.verify_leaf(&leaf.cert[0], h).unwrap();
        }
        assert!(ca.leaf_for_hosts(&[]).is_err());
        assert!(ca.leaf("bad host").is_err());
    }

    #[test]
    fn serials_are_positive_and_minimal() {
        for _ in 0..64 {
            let s = random_serial().unwrap();
            let b = s.as_ref();
            assert_eq!(b.len(), 16);
            assert!((0x40..=0x7f).contains(&b[0]));
        }
    }

    #[test]
    fn der_times() {
        assert_eq!(der_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(der_time(0x17, b"491231235959Z"), Some(2524607999));
        assert_eq!(der_time(0x18, b"20500101000000Z"), Some(2524608000));
        assert_eq!(der_time(0x17, b"7001010000Z"), None);
        assert_eq!(der_time(0x18, b"2050010100000+Z"), None);
        assert!(validity(b"\x30\x03\x02\x01\x00").is_none());
        assert!(validity(b"").is_none());
    }
}
