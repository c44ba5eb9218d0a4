//! A Secret as capdeck keeps it: what the planner, the credential checks and the engine read of
//! it, and nothing else.
//!
//! k8s-openapi's `Secret` is 456 bytes before any content (most of it `ObjectMeta`'s 360), and
//! each of its maps (data, labels, annotations) costs a B-tree node of about 540 bytes even with
//! one entry. The engine keeps 10,000 of them at `.ci/run`'s memory bench (the binding Secrets
//! the applications reference and their VCAP Secrets), so this type holds boxed strings and
//! sorted slices: about 1.3 KB less a Secret (docs/PERFORMANCE.md, "Engine memory").
//!
//! `Debug` names the Secret and its keys, never a value: a value is a credential.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;

/// Text pairs sorted by key (labels, annotations).
type Pairs = Box<[(Box<str>, Box<str>)]>;
/// A Secret's keys and values, sorted by key.
type Entries = Box<[(Box<str>, Box<[u8]>)]>;

/// A Secret's name and the few fields capdeck reads of it, with its data (`stringData` merged
/// over `data`, as the API server stores it).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredSecret {
    name: Box<str>,
    namespace: Option<Box<str>>,
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
    created: Option<Timestamp>,
    /// The latest `managedFields[].time`: when a manager last wrote the Secret.
    last_written: Option<Timestamp>,
    /// Sorted by key.
    labels: Pairs,
    /// Sorted by key; kubectl's last-applied copy is left out.
    annotations: Pairs,
    /// The `apiVersion` of each ownerReference (where the Secret comes from: `credentials`).
    owner_api_versions: Box<[Box<str>]>,
    /// Sorted by key.
    data: Entries,
}

/// kubectl's copy of the last applied object: often larger than the rest, never read.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

fn boxed_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Pairs {
    // The maps they come from are sorted by key already.
    pairs.into_iter().map(|(key, value)| (key.into_boxed_str(), value.into_boxed_str())).collect()
}

impl StoredSecret {
    /// What is kept of `secret`: its values as they are (a binding Secret's credentials, which
    /// the planner builds VCAP_SERVICES from).
    pub fn new(secret: Secret) -> Self {
        Self::with_values(secret, Vec::into_boxed_slice)
    }

    /// What is kept of `secret`, each value replaced by `value(bytes)` (the engine keeps a VCAP
    /// Secret's values as digests: `stored_digest`).
    pub fn with_values(secret: Secret, value: impl Fn(Vec<u8>) -> Box<[u8]>) -> Self {
        let Secret { metadata, data, string_data, .. } = secret;
        let mut merged: BTreeMap<String, Vec<u8>> =
            data.into_iter().flatten().map(|(key, bytes)| (key, bytes.0)).collect();
        for (key, text) in string_data.into_iter().flatten() {
            merged.insert(key, text.into_bytes());
        }
        let last_written =
            metadata.managed_fields.iter().flatten().filter_map(|entry| entry.time.as_ref()).map(|time| time.0).max();
        Self {
            name: metadata.name.unwrap_or_default().into_boxed_str(),
            namespace: metadata.namespace.map(String::into_boxed_str),
            uid: metadata.uid.map(String::into_boxed_str),
            resource_version: metadata.resource_version.map(String::into_boxed_str),
            created: metadata.creation_timestamp.map(|time| time.0),
            last_written,
            labels: boxed_pairs(metadata.labels.into_iter().flatten()),
            annotations: boxed_pairs(metadata.annotations.into_iter().flatten().filter(|(key, _)| key != LAST_APPLIED)),
            owner_api_versions: metadata
                .owner_references
                .into_iter()
                .flatten()
                .map(|owner| owner.api_version.into_boxed_str())
                .collect(),
            data: merged.into_iter().map(|(key, bytes)| (key.into_boxed_str(), value(bytes))).collect(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }

    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    pub fn created(&self) -> Option<Timestamp> {
        self.created
    }

    /// When a manager last wrote it (`managedFields`); `None` where they were stripped or never
    /// there (files).
    pub fn last_written(&self) -> Option<Timestamp> {
        self.last_written
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        by_key(&self.labels, key).map(|value| &**value)
    }

    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        self.labels.iter().map(|(key, value)| (&**key, &**value))
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        by_key(&self.annotations, key).map(|value| &**value)
    }

    pub fn owner_api_versions(&self) -> impl Iterator<Item = &str> {
        self.owner_api_versions.iter().map(|version| &**version)
    }

    /// The value of one key.
    pub fn value(&self, key: &str) -> Option<&[u8]> {
        by_key(&self.data, key).map(|value| &**value)
    }

    /// Every key and its value, sorted by key.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.data.iter().map(|(key, value)| (&**key, &**value))
    }

    /// The data as the VCAP entry builder reads it (`vcap::SecretData`, a copy).
    pub fn data(&self) -> BTreeMap<String, Vec<u8>> {
        self.entries().map(|(key, value)| (key.to_owned(), value.to_vec())).collect()
    }
}

/// The value of `key` in pairs sorted by key.
fn by_key<'a, V>(pairs: &'a [(Box<str>, V)], key: &str) -> Option<&'a V> {
    pairs.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|at| &pairs[at].1)
}

impl From<Secret> for StoredSecret {
    fn from(secret: Secret) -> Self {
        Self::new(secret)
    }
}

impl fmt::Debug for StoredSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredSecret")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("resource_version", &self.resource_version)
            .field("keys", &self.data.iter().map(|(key, _)| key).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(value: serde_json::Value) -> Secret {
        serde_json::from_value(value).expect("a Secret")
    }

    #[test]
    fn keeps_what_is_read_and_merges_string_data_over_data() {
        let stored = StoredSecret::new(secret(json!({
            "metadata": {"name": "db", "namespace": "shop", "uid": "u-1", "resourceVersion": "7",
                         "creationTimestamp": "2026-11-20T08:00:00Z",
                         "labels": {"b": "2", "a": "1"},
                         "annotations": {"note": "x", LAST_APPLIED: "{\"huge\": true}"},
                         "ownerReferences": [{"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
                                              "name": "db", "uid": "b-1"}],
                         "managedFields": [
                             {"manager": "a", "operation": "Update", "time": "2026-11-21T09:30:00Z"},
                             {"manager": "b", "operation": "Update", "time": "2026-11-20T08:00:00Z"}]},
            "data": {"password": "b2xk", "user": "dQ=="},
            "stringData": {"password": "new"}
        })));
        assert_eq!(
            (stored.name(), stored.namespace(), stored.uid(), stored.resource_version()),
            ("db", Some("shop"), Some("u-1"), Some("7"))
        );
        assert_eq!(stored.created().map(|t| t.to_string()).as_deref(), Some("2026-11-20T08:00:00Z"));
        assert_eq!(stored.last_written().map(|t| t.to_string()).as_deref(), Some("2026-11-21T09:30:00Z"));
        assert_eq!(stored.labels().collect::<Vec<_>>(), [("a", "1"), ("b", "2")]);
        assert_eq!((stored.label("b"), stored.label("c")), (Some("2"), None));
        assert_eq!((stored.annotation("note"), stored.annotation(LAST_APPLIED)), (Some("x"), None));
        assert_eq!(stored.owner_api_versions().collect::<Vec<_>>(), ["services.cloud.sap.com/v1"]);
        assert_eq!(stored.value("password"), Some(&b"new"[..]), "stringData wins over data");
        assert_eq!(stored.value("user"), Some(&b"u"[..]));
        assert_eq!(stored.value("missing"), None);
        assert_eq!(stored.data().keys().collect::<Vec<_>>(), ["password", "user"]);
    }

    #[test]
    fn debug_names_keys_never_values() {
        let stored = StoredSecret::new(secret(json!({
            "metadata": {"name": "db"}, "stringData": {"password": "hunter2-credential"}})));
        let shown = format!("{stored:?}");
        assert!(shown.contains("password") && shown.contains("db"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn values_can_be_kept_as_something_else() {
        let stored = StoredSecret::with_values(
            secret(json!({"metadata": {"name": "v"}, "stringData": {"k": "abc"}})),
            |bytes| bytes.iter().rev().copied().collect(),
        );
        assert_eq!(stored.value("k"), Some(&b"cba"[..]));
    }
}
