//! `VCAP_SERVICES`: entries built from binding Secrets the way the CAP Operator builds them,
//! and serialised byte-for-byte like Go's `encoding/json`.

pub mod entry;
pub mod gojson;
pub mod payload;

use sha1::{Digest, Sha1};

pub use entry::{EntryError, SecretData, build_entry};
pub use payload::{VcapPayload, sha256_hex};

/// Upstream's `sha1Sum(a, b, c)`: lowercase hex SHA-1 of the plain concatenation, no separator.
pub fn sha1_concat(parts: &[&str]) -> String {
    let mut hasher = Sha1::new();
    for part in parts {
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Label value `sme.sap.com/secret-owner-hash` of a Deployment's VCAP Secrets.
pub fn secret_owner_hash(namespace: &str, cav_name: &str, deployment_name: &str) -> String {
    sha1_concat(&[namespace, cav_name, deployment_name])
}

/// A digest of a Secret's data (sorted keys and values, length-prefixed so that key/value
/// boundaries cannot collide). Detects real rotations; never reveals the data.
pub fn data_hash(data: &SecretData) -> String {
    entries_hash(data.iter().map(|(key, value)| (key.as_str(), value.as_slice())))
}

/// [`data_hash`] of entries sorted by key (a `StoredSecret`'s), without copying them.
pub fn entries_hash<'a>(entries: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut hasher = sha2::Sha256::new();
    for (key, value) in entries {
        sha2::Digest::update(&mut hasher, (key.len() as u64).to_be_bytes());
        sha2::Digest::update(&mut hasher, key.as_bytes());
        sha2::Digest::update(&mut hasher, (value.len() as u64).to_be_bytes());
        sha2::Digest::update(&mut hasher, value);
    }
    hex::encode(sha2::Digest::finalize(hasher))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_concat_matches_upstream_fixtures() {
        // From reference/cap-operator-behaviour.md: sha1("default","test-cap-01") = 1f74ae2f…603581.
        let hash = sha1_concat(&["default", "test-cap-01"]);
        assert!(hash.starts_with("1f74ae2f") && hash.ends_with("603581"), "{hash}");
        let hash = sha1_concat(&["pro-subacc-id", "test-cap-01"]);
        assert!(hash.starts_with("8de67d2d") && hash.ends_with("0357"), "{hash}");
    }

    #[test]
    fn data_hash_changes_with_data_and_not_with_order() {
        let a: SecretData = [("k".to_string(), b"v".to_vec()), ("x".to_string(), b"y".to_vec())].into();
        let mut b = a.clone();
        assert_eq!(data_hash(&a), data_hash(&b));
        b.insert("k".into(), b"w".to_vec());
        assert_ne!(data_hash(&a), data_hash(&b));
        // Boundary shift must not collide: {"ab": "c"} vs {"a": "bc"}.
        let left: SecretData = [("ab".to_string(), b"c".to_vec())].into();
        let right: SecretData = [("a".to_string(), b"bc".to_vec())].into();
        assert_ne!(data_hash(&left), data_hash(&right));
    }
}
