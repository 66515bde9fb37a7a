//! Contract and definition hashes (docs/src/concepts/operations.md).
//!
//! The contract hash is `sha256:` + lowercase hex SHA-256 of the RFC 8785 canonical JSON of
//! `{"description","input_schema","operation","output_schema"}`, where `operation` is
//! `"<profile>:<operation_id>"` and an absent description is `""`. Hashes are always taken over
//! canonical JSON, never over `to_string()` of a map (whose order a feature flag can change).

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::ProfileKind;

/// RFC 8785 (JCS) canonical JSON of a value: sorted keys, no whitespace, ECMAScript numbers.
pub fn canonical_json(v: &Value) -> String {
    // serde_jcs only fails on values serde_json::Value cannot hold (non-string keys, NaN).
    serde_jcs::to_string(v).expect("a serde_json::Value always canonicalizes")
}

/// Lowercase hex SHA-256 of `bytes` (sha2 0.11 digests have no `LowerHex`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push(char::from(HEX[(b >> 4) as usize]));
        out.push(char::from(HEX[(b & 0x0f) as usize]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

// `profile` enters the hash as its name (`rest:`, `salesforce:`, `mcp:`): Display is `as_str`.
/// The contract hash of docs/src/concepts/operations.md (`"sha256:<64 hex>"`).
pub fn contract_hash(
    profile: ProfileKind,
    operation_id: &str,
    description: Option<&str>,
    input_schema: &Value,
    output_schema: &Value,
) -> String {
    // Borrowed, not a `json!` copy of both schemas: canonicalization sorts the members.
    #[derive(Serialize)]
    struct Contract<'a> {
        description: &'a str,
        input_schema: &'a Value,
        operation: String,
        output_schema: &'a Value,
    }
    hash_of(&Contract {
        description: description.unwrap_or(""),
        input_schema,
        operation: format!("{profile}:{operation_id}"),
        output_schema,
    })
}

/// `"sha256:<hex>"` of the canonical JSON of a mock definition (revision identity).
pub fn definition_hash(definition: &Value) -> String {
    hash_of(definition)
}

/// [`definition_hash`] of a file's `mock` without its `contract_hash` member (what
/// [`crate::contract::OperationFile::definition_value`] builds), without copying it.
pub fn mock_definition_hash(mock: &Value) -> String {
    struct Without<'a>(&'a Map<String, Value>);
    impl Serialize for Without<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map(self.0.iter().filter(|(k, _)| k.as_str() != "contract_hash"))
        }
    }
    match mock {
        Value::Object(m) => hash_of(&Without(m)),
        v => hash_of(v),
    }
}

/// `"sha256:<hex>"` of the RFC 8785 canonical JSON of `v`.
fn hash_of<T: Serialize + ?Sized>(v: &T) -> String {
    // serde_jcs only fails on values serde_json::Value cannot hold (non-string keys, NaN).
    let text = serde_jcs::to_string(v).expect("a serde_json::Value always canonicalizes");
    format!("sha256:{}", sha256_hex(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sha256_of_empty_and_abc() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn canonical_json_sorts_keys_and_normalizes_numbers() {
        let v = json!({"b": 1.0, "a": [true, null, "é"], "c": {"z": 1e2, "y": -0.5}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":[true,null,"é"],"b":1,"c":{"y":-0.5,"z":100}}"#
        );
    }

    /// Cross-checked with python3:
    /// `hashlib.sha256(b'{"description":"Find a contact by phone number","input_schema":{"properties":{"phone":{"type":"string"}},"required":["phone"],"type":"object"},"operation":"salesforce:lookup_contact_by_phone","output_schema":{"type":"object"}}').hexdigest()`
    #[test]
    fn contract_hash_vector() {
        let input =
            json!({"type":"object","required":["phone"],"properties":{"phone":{"type":"string"}}});
        let output = json!({"type": "object"});
        let canonical = canonical_json(&json!({
            "description": "Find a contact by phone number",
            "input_schema": input,
            "operation": "salesforce:lookup_contact_by_phone",
            "output_schema": output,
        }));
        assert_eq!(
            canonical,
            r#"{"description":"Find a contact by phone number","input_schema":{"properties":{"phone":{"type":"string"}},"required":["phone"],"type":"object"},"operation":"salesforce:lookup_contact_by_phone","output_schema":{"type":"object"}}"#
        );
        assert_eq!(
            contract_hash(
                crate::contract::ProfileKind::Salesforce,
                "lookup_contact_by_phone",
                Some("Find a contact by phone number"),
                &input,
                &output
            ),
            "sha256:8be703c3ac1c1543d035550b3729377a37d607d0aa6e755eaf0a7e0166b84b14"
        );
    }

    #[test]
    fn absent_description_is_empty_string() {
        let s = json!({});
        assert_eq!(
            contract_hash(crate::contract::ProfileKind::Rest, "x", None, &s, &s),
            contract_hash(crate::contract::ProfileKind::Rest, "x", Some(""), &s, &s)
        );
        assert_ne!(
            contract_hash(crate::contract::ProfileKind::Rest, "x", None, &s, &s),
            contract_hash(crate::contract::ProfileKind::Mcp, "x", None, &s, &s)
        );
    }

    #[test]
    fn mock_definition_hash_leaves_out_contract_hash() {
        let mock = json!({"contract_hash": "sha256:x", "variants": {"a": {"result": [1.5, "é", {"z": 1, "b": null}]}}, "b": 1e21});
        let mut def = mock.clone();
        def.as_object_mut().unwrap().remove("contract_hash");
        assert_eq!(mock_definition_hash(&mock), definition_hash(&def));
        assert_eq!(
            mock_definition_hash(&json!([1])),
            definition_hash(&json!([1]))
        );
        let s = json!({"type": "object", "properties": {"é": {}, "a": {"enum": [1, 2.0]}}});
        let contract = json!({
            "description": "d",
            "input_schema": s,
            "operation": "rest:x",
            "output_schema": s,
        });
        assert_eq!(
            contract_hash(crate::contract::ProfileKind::Rest, "x", Some("d"), &s, &s),
            definition_hash(&contract)
        );
    }

    #[test]
    fn definition_hash_ignores_key_order() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":{"c":2,"d":3}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b":{"d":3,"c":2},"a":1.0}"#).unwrap();
        assert_eq!(definition_hash(&a), definition_hash(&b));
        assert!(definition_hash(&a).starts_with("sha256:"));
        assert_eq!(definition_hash(&a).len(), 7 + 64);
    }
}
