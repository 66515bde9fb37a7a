//! Key encodings of the sled trees (the table in the store's module doc), built so that a
//! prefix scan returns records in their natural order: numbers are big-endian u64, and
//! `<attempt_id> 0x00` is an unambiguous prefix because ids may not contain NUL
//! ([`check_attempt_id`]).

use super::StoreError;

pub(super) const META_REV: &[u8] = b"rev";
pub(super) const META_SEQ: &[u8] = b"seq";

pub(super) fn check_attempt_id(id: &str) -> Result<(), StoreError> {
    if id.is_empty() || id.contains('\0') {
        return Err(StoreError::Invalid(format!(
            "attempt id {id:?} must be non-empty and contain no NUL"
        )));
    }
    Ok(())
}

pub(super) fn check_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() || key.contains('\0') {
        return Err(StoreError::Invalid(format!(
            "revision key {key:?} must be non-empty and contain no NUL"
        )));
    }
    Ok(())
}

pub(super) fn revision_prefix(key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 9);
    k.extend_from_slice(key.as_bytes());
    k.push(b'/');
    k
}

pub(super) fn revision_key(key: &str, n: u64) -> Vec<u8> {
    let mut k = revision_prefix(key);
    k.extend_from_slice(&n.to_be_bytes());
    k
}

pub(super) fn attempt_prefix(attempt_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(attempt_id.len() + 9);
    k.extend_from_slice(attempt_id.as_bytes());
    k.push(0);
    k
}

pub(super) fn event_key(attempt_id: &str, seq: u64) -> Vec<u8> {
    let mut k = attempt_prefix(attempt_id);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

pub(super) fn state_key(attempt_id: &str, integration: &str) -> Vec<u8> {
    let mut k = attempt_prefix(attempt_id);
    k.extend_from_slice(integration.as_bytes());
    k
}

pub(super) fn meta_key(kind: &[u8], name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(kind.len() + 1 + name.len());
    k.extend_from_slice(kind);
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k
}

pub(super) fn decode_u64(bytes: &[u8], what: &str) -> Result<u64, StoreError> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| StoreError::Corrupt {
        key: what.to_string(),
        message: format!("expected an 8-byte number, found {} bytes", bytes.len()),
    })?;
    Ok(u64::from_be_bytes(arr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_keys_sort_by_sequence_within_an_attempt() {
        let mut keys: Vec<Vec<u8>> = (1..=600).rev().map(|n| event_key("a1", n)).collect();
        keys.push(event_key("a10", 1));
        keys.sort();
        let prefix = attempt_prefix("a1");
        let seqs: Vec<u64> = keys
            .iter()
            .filter(|k| k.starts_with(&prefix))
            .map(|k| decode_u64(&k[prefix.len()..], "t").unwrap())
            .collect();
        assert_eq!(seqs, (1..=600).collect::<Vec<_>>());
    }

    #[test]
    fn attempt_prefix_does_not_cover_a_longer_id() {
        assert!(!event_key("a10", 1).starts_with(&attempt_prefix("a1")));
        assert!(!state_key("a10", "crm").starts_with(&attempt_prefix("a1")));
    }

    #[test]
    fn revision_keys_sort_numerically() {
        assert!(revision_key("crm/op", 255) < revision_key("crm/op", 256));
        assert!(revision_key("crm/op", 9) < revision_key("crm/op", 10));
        assert_eq!(revision_key("crm/op", 1).len(), "crm/op/".len() + 8);
    }

    #[test]
    fn decode_u64_rejects_a_wrong_length() {
        assert!(matches!(
            decode_u64(b"abc", "x"),
            Err(StoreError::Corrupt { .. })
        ));
        assert_eq!(decode_u64(&7u64.to_be_bytes(), "x").unwrap(), 7);
    }

    #[test]
    fn ids_with_nul_are_rejected() {
        assert!(check_attempt_id("a\0b").is_err());
        assert!(check_attempt_id("").is_err());
        assert!(check_key("crm\0op").is_err());
        assert!(check_attempt_id("att_1").is_ok());
    }
}
