//! A store of watched objects, read by namespace and name, and its one writer.
//!
//! kube's reflector store keys each object with an `ObjectRef`: its name, namespace,
//! resourceVersion and uid copied into four more strings, about 300 bytes an object beside the
//! object itself. This one finds an object by the name and namespace it already holds: a hash
//! table of the objects alone, 8 bytes and a control byte each (docs/PERFORMANCE.md, "Engine
//! memory"). Its writer takes objects by value, where kube's clones each one it is given.

use std::hash::{BuildHasher as _, RandomState};
use std::sync::{Arc, PoisonError, RwLock};

use crate::api::Named;
use hashbrown::HashTable;

/// The objects of one kind, cheap to clone; read-only (the [`Writer`] writes).
pub struct Store<K> {
    shared: Arc<RwLock<Index<K>>>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

/// A new, empty store and its writer.
pub fn store<K: Named>() -> (Store<K>, Writer<K>) {
    let hasher = RandomState::new();
    let shared = Arc::new(RwLock::new(Index::new(hasher.clone())));
    (Store { shared: shared.clone() }, Writer { shared, next: None, hasher })
}

impl<K: Named> Store<K> {
    /// The object of this name in this namespace (`None` or empty for a cluster-scoped kind).
    pub fn find(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.shared.read().unwrap_or_else(PoisonError::into_inner).get(namespace, name)
    }

    /// Every object, in no particular order.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.shared.read().unwrap_or_else(PoisonError::into_inner).objects.iter().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.shared.read().unwrap_or_else(PoisonError::into_inner).objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Writes one store: objects one by one, or a whole list that replaces the store at its end.
pub struct Writer<K> {
    shared: Arc<RwLock<Index<K>>>,
    /// During a list: the store's next state (readers still see the previous one).
    next: Option<Index<K>>,
    hasher: RandomState,
}

impl<K: Named> Writer<K> {
    /// A (re-)list starts: what it brings replaces the store when it ends.
    pub fn begin_list(&mut self) {
        self.next = Some(Index::new(self.hasher.clone()));
    }

    /// One object of the list under way (or stored at once, when no list is).
    pub fn listed(&mut self, object: Arc<K>) {
        match self.next.as_mut() {
            Some(next) => next.insert(object),
            None => self.write().insert(object),
        }
    }

    /// The list is complete: it becomes the store.
    pub fn end_list(&mut self) {
        let next = self.next.take().unwrap_or_else(|| Index::new(self.hasher.clone()));
        let previous = std::mem::replace(&mut *self.write(), next);
        // The previous state is freed outside the lock.
        drop(previous);
    }

    /// An object added or changed. (The API server names every object; `stores::Reflected`
    /// keeps one without a name out.)
    pub fn apply(&mut self, object: K) {
        self.write().insert(Arc::new(object));
    }

    /// The object stored under this namespace and name, if any.
    pub fn find(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.shared.read().unwrap_or_else(PoisonError::into_inner).get(namespace, name)
    }

    /// The object of this name in this namespace is gone; what it was, if stored.
    pub fn remove(&mut self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.write().remove(namespace, name)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Index<K>> {
        self.shared.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The objects, found by the namespace and name in their own metadata.
struct Index<K> {
    objects: HashTable<Arc<K>>,
    hasher: RandomState,
}

impl<K: Named> Index<K> {
    fn new(hasher: RandomState) -> Self {
        Self { objects: HashTable::new(), hasher }
    }

    fn hash(hasher: &RandomState, namespace: Option<&str>, name: &str) -> u64 {
        hasher.hash_one((namespace.unwrap_or_default(), name))
    }

    /// An empty namespace is none (a cluster-scoped object, or an `ObjectKey` of one).
    fn namespace(namespace: Option<&str>) -> Option<&str> {
        namespace.filter(|namespace| !namespace.is_empty())
    }

    fn key(object: &K) -> (Option<&str>, &str) {
        (Self::namespace(object.namespace_of()), object.name_of().unwrap_or_default())
    }

    fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let namespace = Self::namespace(namespace);
        let hash = Self::hash(&self.hasher, namespace, name);
        self.objects.find(hash, |object| Self::key(object) == (namespace, name)).cloned()
    }

    fn insert(&mut self, object: Arc<K>) {
        let (namespace, name) = Self::key(&object);
        let hash = Self::hash(&self.hasher, namespace, name);
        let hasher = &self.hasher;
        match self.objects.entry(
            hash,
            |stored| Self::key(stored) == (namespace, name),
            |stored| {
                let (namespace, name) = Self::key(stored);
                Self::hash(hasher, namespace, name)
            },
        ) {
            hashbrown::hash_table::Entry::Occupied(mut entry) => *entry.get_mut() = object,
            hashbrown::hash_table::Entry::Vacant(entry) => {
                entry.insert(object);
            }
        }
    }

    fn remove(&mut self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let namespace = Self::namespace(namespace);
        let hash = Self::hash(&self.hasher, namespace, name);
        match self.objects.find_entry(hash, |object| Self::key(object) == (namespace, name)) {
            Ok(entry) => Some(entry.remove().0),
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    use super::*;

    fn config_map(namespace: &str, name: &str, value: &str) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.namespace = Some(namespace.into());
        object.metadata.name = Some(name.into());
        object.data = Some([("v".to_string(), value.to_string())].into());
        object
    }

    fn value(store: &Store<ConfigMap>, namespace: &str, name: &str) -> Option<String> {
        store.find(Some(namespace), name).and_then(|object| object.data.as_ref()?.get("v").cloned())
    }

    /// Objects are found by namespace and name, replaced in place and removed; the same name in
    /// two namespaces is two objects.
    #[test]
    fn objects_are_found_by_namespace_and_name() {
        let (store, mut writer) = store::<ConfigMap>();
        writer.apply(config_map("a", "x", "1"));
        writer.apply(config_map("b", "x", "2"));
        writer.apply(config_map("a", "x", "3"));
        assert_eq!(store.len(), 2);
        assert_eq!(value(&store, "a", "x").as_deref(), Some("3"));
        assert_eq!(value(&store, "b", "x").as_deref(), Some("2"));
        assert_eq!(store.find(Some("b"), "x").map(|o| o.metadata.name.clone()), Some(Some("x".into())));
        assert!(store.find(None, "x").is_none(), "a namespaced object is not found without its namespace");
        assert!(writer.remove(Some("a"), "x").is_some());
        assert!(writer.remove(Some("a"), "x").is_none());
        assert_eq!(store.len(), 1);
        assert!(value(&store, "a", "x").is_none());
    }

    /// A list replaces the store when it ends, and not before: readers see the previous state
    /// meanwhile; an object not listed again is gone after it.
    #[test]
    fn a_list_replaces_the_store_at_its_end() {
        let (store, mut writer) = store::<ConfigMap>();
        writer.apply(config_map("a", "old", "1"));
        writer.begin_list();
        writer.listed(Arc::new(config_map("a", "new", "2")));
        assert_eq!(value(&store, "a", "old").as_deref(), Some("1"));
        assert!(value(&store, "a", "new").is_none());
        writer.end_list();
        assert!(value(&store, "a", "old").is_none());
        assert_eq!(value(&store, "a", "new").as_deref(), Some("2"));
        assert_eq!(store.len(), 1);
    }

    /// Cluster-scoped objects have no namespace, and thousands of objects all stay findable.
    #[test]
    fn many_objects_and_cluster_scoped_ones() {
        let (namespaces, mut writer) = store::<Namespace>();
        let mut object = Namespace::default();
        object.metadata.name = Some("shop".into());
        writer.apply(object);
        assert!(namespaces.find(None, "shop").is_some());
        assert!(namespaces.find(Some(""), "shop").is_some(), "an empty namespace is none");
        assert!(writer.remove(Some(""), "shop").is_some());
        assert!(namespaces.is_empty());
        let (store, mut writer) = store::<ConfigMap>();
        for i in 0..5_000 {
            writer.apply(config_map(&format!("ns-{}", i % 7), &format!("cm-{i}"), &i.to_string()));
        }
        assert_eq!(store.len(), 5_000);
        for i in (0..5_000).step_by(7) {
            assert_eq!(value(&store, &format!("ns-{}", i % 7), &format!("cm-{i}")), Some(i.to_string()));
        }
        assert!(value(&store, "ns-1", "cm-0").is_none());
    }
}
