//! Which namespaces changed since the engine last asked: what keeps the engine's level-triggered
//! re-check incremental (each pass re-plans only the applications of namespaces where something
//! changed; docs/RELIABILITY.md, "The invariant"). A re-list (a watch that lost its place, a
//! start) touches everything: what changed meanwhile is not known object by object.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

/// More namespaces than this touched between two passes: everything is re-checked (the set
/// stays small whatever a storm of changes does).
const MAX_NAMESPACES: usize = 10_000;

/// What changed since the last [`TouchedLog::take`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    pub everything: bool,
    pub namespaces: BTreeSet<String>,
}

impl Touched {
    pub fn contains(&self, namespace: &str) -> bool {
        self.everything || self.namespaces.contains(namespace)
    }

    pub fn is_empty(&self) -> bool {
        !self.everything && self.namespaces.is_empty()
    }
}

/// Shared by the watch tasks (writers) and the engine (the one reader).
#[derive(Clone, Debug, Default)]
pub(super) struct TouchedLog(Arc<Mutex<Touched>>);

impl TouchedLog {
    pub(super) fn namespace(&self, namespace: &str) {
        let mut touched = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if touched.everything || touched.namespaces.contains(namespace) {
            return;
        }
        if touched.namespaces.len() >= MAX_NAMESPACES {
            touched.everything = true;
            touched.namespaces.clear();
            return;
        }
        touched.namespaces.insert(namespace.to_owned());
    }

    pub(super) fn everything(&self) {
        let mut touched = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        touched.everything = true;
        touched.namespaces.clear();
    }

    pub(super) fn take(&self) -> Touched {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_kept_until_taken_and_a_relist_touches_everything() {
        let log = TouchedLog::default();
        log.namespace("a");
        log.namespace("b");
        log.namespace("a");
        let touched = log.take();
        assert_eq!(touched.namespaces.iter().map(String::as_str).collect::<Vec<_>>(), ["a", "b"]);
        assert!(touched.contains("a") && !touched.contains("c"));
        assert!(log.take().is_empty(), "taken");
        log.namespace("a");
        log.everything();
        let touched = log.take();
        assert!(touched.everything && touched.namespaces.is_empty() && touched.contains("c"));
    }

    #[test]
    fn too_many_namespaces_become_everything() {
        let log = TouchedLog::default();
        for i in 0..=MAX_NAMESPACES {
            log.namespace(&format!("ns-{i}"));
        }
        let touched = log.take();
        assert!(touched.everything && touched.namespaces.is_empty());
    }
}
