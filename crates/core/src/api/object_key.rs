//! The key of a namespaced object: its namespace and name, typed, so that a map keyed by objects
//! says so and a `(namespace, name)` pair cannot be passed the wrong way round.

use std::fmt;

/// A namespaced object's namespace and name. Sorts by namespace, then name; shows as `ns/name`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), name: name.into() }
    }

    /// The key of an object's metadata (empty where a field is missing: a list's item always has
    /// both).
    pub fn of(meta: &kube::core::ObjectMeta) -> Self {
        Self::new(meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
    }

    /// Whether this is `namespace/name`, without building a key.
    pub fn is(&self, namespace: &str, name: &str) -> bool {
        self.namespace == namespace && self.name == name
    }
}

/// An object a store finds by the namespace and name it holds: every kube `Resource`, and the
/// Secrets capdeck keeps in its own shape (`StoredSecret`, which has no `ObjectMeta`).
pub trait Named {
    /// `None` or empty for a cluster-scoped object.
    fn namespace_of(&self) -> Option<&str>;
    /// `None` for an object without a name (the API server names every object it stores).
    fn name_of(&self) -> Option<&str>;
}

impl<K: kube::Resource> Named for K {
    fn namespace_of(&self) -> Option<&str> {
        self.meta().namespace.as_deref()
    }

    fn name_of(&self) -> Option<&str> {
        self.meta().name.as_deref()
    }
}

impl Named for super::StoredSecret {
    fn namespace_of(&self) -> Option<&str> {
        self.namespace()
    }

    fn name_of(&self) -> Option<&str> {
        Some(self.name()).filter(|name| !name.is_empty())
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_namespace_then_name_and_show_as_a_path() {
        let mut keys = [ObjectKey::new("b", "a"), ObjectKey::new("a", "z"), ObjectKey::new("a", "b")];
        keys.sort();
        let shown: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["a/b", "a/z", "b/a"]);
        assert!(keys[0].is("a", "b") && !keys[0].is("b", "a"));
    }
}
