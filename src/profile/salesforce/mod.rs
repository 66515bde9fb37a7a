//! The `salesforce` profile (docs/src/reference/profiles.md#salesforce): the wire facts are data in
//! `profiles/salesforce.json` — reads are GET/HEAD, `POST ?_HttpMethod=PATCH` is a PATCH,
//! `composite` and `composite/batch` are writes when any subrequest is not a GET, errors are
//! `[{"message","errorCode","fields"}]`, the built-in operation templates (sobject
//! get/create/update/upsert/delete/describe, query, query more, queryAll, composite). This
//! file embeds it and makes well-formed fake record ids — the only code that does ([`record_id`]).
//!
//! The built-in operations that answer without any file — the login ([`login`], [`soap`]),
//! the versions list, describeGlobal, `/limits`, SOSL and the Tooling query — are
//! [`defaults`]. The records, queries, Collections, Composite, Composite Graph and Bulk API
//! 2.0 answer from one coherent org kept in the attempt's state: [`org`] routes each call to
//! [`rows`], [`composite`] or [`bulk`], which share the org's data ([`model`]) and use
//! [`soql`] and [`csv`].

pub mod bulk;
pub mod composite;
pub mod csv;
pub mod defaults;
pub mod login;
pub mod model;
pub mod org;
pub mod rows;
pub mod soap;
pub mod soql;

/// `profiles/salesforce.json`, embedded in the binary.
pub const PROFILE_JSON: &str = include_str!("../../../profiles/salesforce.json");

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A fake 18-character Salesforce id with a random body (see [`record_id`]), key prefix `a00`.
pub fn fake_id() -> String {
    let mut body = [0u8; 12];
    crate::util::ids::fill_random(&mut body);
    record_id("a00", &body)
}

/// The one maker of Salesforce record ids, random ([`fake_id`]) or deterministic (a
/// simulated write's id, derived from the attempt): the 3-character key `prefix`, 12
/// base-62 characters taken from `body`, and the 3-character case-safe checksum real ids
/// carry, so client libraries that validate ids accept it.
pub fn record_id(prefix: &str, body: &[u8; 12]) -> String {
    let mut id15 = String::with_capacity(18);
    id15.push_str(prefix);
    for b in body {
        id15.push(BASE62[(*b as usize) % BASE62.len()] as char);
    }
    to_18(&id15)
}

/// Salesforce key prefixes of common sObjects (the first 3 characters of their ids).
const KEY_PREFIXES: &[(&str, &str)] = &[
    ("account", "001"),
    ("note", "002"),
    ("contact", "003"),
    ("user", "005"),
    ("opportunity", "006"),
    ("lead", "00Q"),
    ("task", "00T"),
    ("event", "00U"),
    ("attachment", "00P"),
    ("product2", "01t"),
    ("pricebook2", "01s"),
    ("case", "500"),
    ("campaign", "701"),
    ("contract", "800"),
    ("order", "801"),
];

/// The key prefix of the sObject a request path names (`…/sobjects/Contact/…` → `003`);
/// `a00` (a custom object) when it names none or one not in the table.
pub fn key_prefix_of_path(segments: &[String]) -> &'static str {
    let sobject = segments
        .iter()
        .position(|s| s.eq_ignore_ascii_case("sobjects"))
        .and_then(|i| segments.get(i + 1))
        .map(|s| s.to_ascii_lowercase())
        .unwrap_or_default();
    KEY_PREFIXES
        .iter()
        .find(|(name, _)| *name == sobject)
        .map(|(_, p)| *p)
        .unwrap_or("a00")
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
