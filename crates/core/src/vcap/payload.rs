//! The `VCAP_SERVICES` payload of one workload: its consumed services' entries, grouped by
//! class, keys sorted, serialised like Go's `encoding/json`.

use std::fmt;

use sha2::{Digest, Sha256};

#[cfg(test)]
use crate::api::stored_digest::{STORED_DIGEST_PREFIX, stored_digest};
use crate::api::stored_digest::{is_digest_of, is_stored_digest};

use super::gojson::{GoMap, GoValue};

/// The exact bytes capdeck writes as `VCAP_SERVICES`. Holds credentials: its `Debug` prints only
/// the digest, so it can never leak through a log line or an error.
#[derive(Clone, PartialEq, Eq)]
pub struct VcapPayload {
    json: String,
}

impl VcapPayload {
    /// Group `entries` (class, entry) by class, keeping their order within a class.
    pub fn assemble<'a>(entries: impl IntoIterator<Item = (&'a str, GoMap)>) -> Self {
        let mut by_class = GoMap::new();
        for (class, entry) in entries {
            let slot = by_class.entry(class.to_string()).or_insert_with(|| GoValue::Array(Vec::new()));
            if let GoValue::Array(list) = slot {
                list.push(GoValue::Object(entry));
            }
        }
        Self { json: GoValue::Object(by_class).to_go_json() }
    }

    /// The credential-bearing JSON. Only for writing the Secret or `--show-secrets`.
    pub fn expose(&self) -> &str {
        &self.json
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.json.as_bytes()
    }

    pub fn len(&self) -> usize {
        self.json.len()
    }

    pub fn is_empty(&self) -> bool {
        self.json.is_empty()
    }

    /// Lowercase hex sha256 of the payload: safe to print and to store in status.
    pub fn sha256(&self) -> String {
        sha256_hex(self.json.as_bytes())
    }

    /// True when `bytes` (a Secret's `VCAP_SERVICES`) are exactly this payload.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        self.json.as_bytes() == bytes
    }

    /// [`Self::matches`] for a `VCAP_SERVICES` as a store keeps it: the payload itself, or its
    /// digest (`api::stored_digest`).
    pub fn matches_stored(&self, bytes: &[u8]) -> bool {
        if is_stored_digest(bytes) { is_digest_of(bytes, self.json.as_bytes()) } else { self.matches(bytes) }
    }
}

impl fmt::Debug for VcapPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VcapPayload(sha256:{}, {} bytes)", self.sha256(), self.json.len())
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_digest_matches_its_payload_only() {
        let payload = VcapPayload::assemble([("xsuaa", entry("uaa"))]);
        let other = VcapPayload::assemble([("xsuaa", entry("uaa2"))]);
        let stored = stored_digest(payload.as_bytes());
        assert!(is_stored_digest(&stored) && stored.len() == STORED_DIGEST_PREFIX.len() + 32);
        assert!(payload.matches_stored(&stored) && payload.matches_stored(payload.as_bytes()));
        assert!(!other.matches_stored(&stored) && !payload.matches(&stored));
        // A live value shaped like a digest is hashed again, so it matches nothing.
        let planted = stored_digest(&stored);
        assert!(!payload.matches_stored(&planted));
        assert!(!is_stored_digest(payload.as_bytes()));
    }

    fn entry(name: &str) -> GoMap {
        let mut map = GoMap::new();
        map.insert("name".into(), GoValue::from(name));
        map
    }

    #[test]
    fn entries_group_by_class_in_given_order_and_classes_sort() {
        let payload = VcapPayload::assemble([
            ("xsuaa", entry("second-class-first")),
            ("html5-apps-repo", entry("host")),
            ("xsuaa", entry("uaa2")),
            ("html5-apps-repo", entry("runtime")),
        ]);
        assert_eq!(
            payload.expose(),
            r#"{"html5-apps-repo":[{"name":"host"},{"name":"runtime"}],"xsuaa":[{"name":"second-class-first"},{"name":"uaa2"}]}"#
        );
    }

    #[test]
    fn no_entries_is_an_empty_object() {
        assert_eq!(VcapPayload::assemble([]).expose(), "{}");
    }

    #[test]
    fn debug_never_shows_the_payload() {
        let payload = VcapPayload::assemble([("c", entry("secret-value"))]);
        let debug = format!("{payload:?}");
        assert!(!debug.contains("secret-value"), "{debug}");
        assert!(debug.contains(&payload.sha256()));
    }
}
