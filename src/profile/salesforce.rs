//! The `salesforce` profile (PROTOCOLS.md section 2): the wire facts are data in
//! `profiles/salesforce.json` — reads are GET/HEAD, `POST ?_HttpMethod=PATCH` is a PATCH,
//! `composite` and `composite/batch` are writes when any subrequest is not a GET, errors are
//! `[{"message","errorCode","fields"}]`, the built-in operation templates (sobject
//! get/create/update/upsert/delete/describe, query, query more, queryAll, composite). This
//! file embeds it and makes well-formed fake record ids.

/// `profiles/salesforce.json`, embedded in the binary.
pub const PROFILE_JSON: &str = include_str!("../../profiles/salesforce.json");

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A fake 18-character Salesforce id: the key prefix `a00`, 12 random base-62 characters
/// and the 3-character case-safe checksum real ids carry, so client libraries that validate
/// ids accept it.
pub fn fake_id() -> String {
    let mut bytes = [0u8; 12];
    crate::attempt::fill_random(&mut bytes);
    let mut id15 = String::from("a00");
    for b in bytes {
        id15.push(BASE62[(b as usize) % BASE62.len()] as char);
    }
    to_18(&id15)
}

/// The 18-character form of a 15-character id (case-safe checksum suffix).
pub fn to_18(id15: &str) -> String {
    const MAP: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ012345";
    let b = id15.as_bytes();
    let mut out = id15.to_string();
    for chunk in 0..3 {
        let mut n = 0usize;
        for i in 0..5 {
            if b.get(chunk * 5 + i).is_some_and(|c| c.is_ascii_uppercase()) {
                n |= 1 << i;
            }
        }
        out.push(MAP[n] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_matches_a_known_id() {
        // A documented example: 001A000000xyzAb → …
        assert_eq!(to_18("001000000000000"), "001000000000000AAA");
        assert_eq!(to_18("0015000000Gv7qJ"), "0015000000Gv7qJAAR");
    }

    #[test]
    fn fake_ids_are_18_chars() {
        let id = fake_id();
        assert_eq!(id.len(), 18);
        assert!(id.starts_with("a00"));
        assert_eq!(to_18(&id[..15]), id);
    }
}
