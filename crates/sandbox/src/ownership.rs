//! Server-side-apply field ownership, enough for what clients rely on: every write records which
//! leaf fields its manager owns (`metadata.managedFields`, FieldsV1 format), and a non-forced
//! apply that would change a field another manager owns is a 409 Conflict. kube-lease-manager
//! depends on exactly that to keep two candidates from holding one Lease.
//!
//! Simplifications (docs/SANDBOX.md): lists are atomic leaves, and fields a manager stops
//! applying are not removed from the object (only from its set once the object lacks them).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

pub type Path = Vec<String>;

/// Metadata fields the server owns; never part of field ownership.
const SERVER_FIELDS: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Leaf paths of an object (objects are descended, everything else is a leaf).
pub fn leaf_paths(value: &Value) -> BTreeSet<Path> {
    let mut paths = BTreeSet::new();
    let mut prefix = Vec::new();
    collect(value, &mut prefix, &mut paths);
    paths
}

fn collect(value: &Value, prefix: &mut Path, paths: &mut BTreeSet<Path>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let top = prefix.is_empty();
                if top && (key == "apiVersion" || key == "kind") {
                    continue;
                }
                if prefix.len() == 1 && prefix[0] == "metadata" && SERVER_FIELDS.contains(&key.as_str()) {
                    continue;
                }
                prefix.push(key.clone());
                collect(child, prefix, paths);
                prefix.pop();
            }
        }
        _ if !prefix.is_empty() => {
            paths.insert(prefix.clone());
        }
        _ => {}
    }
}

pub fn value_at<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |current, key| current.get(key))
}

/// Leaf paths whose value differs between two versions of an object (added, changed, removed).
pub fn changed_paths(old: &Value, new: &Value) -> BTreeSet<Path> {
    leaf_paths(old).union(&leaf_paths(new)).filter(|path| value_at(old, path) != value_at(new, path)).cloned().collect()
}

/// FieldsV1 (`{"f:spec": {"f:replicas": {}}}`) of a path set.
pub fn to_fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in paths {
        let mut node = &mut root;
        for key in path {
            let entry = node.entry(format!("f:{key}")).or_insert_with(|| json!({}));
            let Value::Object(next) = entry else { break };
            node = next;
        }
    }
    Value::Object(root)
}

pub fn from_fields_v1(fields: &Value) -> BTreeSet<Path> {
    fn walk(node: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
        let Some(map) = node.as_object() else { return };
        if map.is_empty() && !prefix.is_empty() {
            out.insert(prefix.clone());
            return;
        }
        for (key, child) in map {
            let Some(name) = key.strip_prefix("f:") else { continue };
            prefix.push(name.to_string());
            walk(child, prefix, out);
            prefix.pop();
        }
    }
    let mut out = BTreeSet::new();
    walk(fields, &mut Vec::new(), &mut out);
    out
}

fn entries(object: &Value) -> Vec<Value> {
    object.pointer("/metadata/managedFields").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn manager_of(entry: &Value) -> &str {
    entry.get("manager").and_then(Value::as_str).unwrap_or_default()
}

/// The conflicts a non-forced apply of `applied` by `manager` onto `existing` would cause:
/// (other manager, path) for each field another manager owns whose value would change.
pub fn apply_conflicts(existing: &Value, applied: &Value, manager: &str) -> Vec<(String, Path)> {
    let mut conflicts = Vec::new();
    let paths = leaf_paths(applied);
    for entry in entries(existing) {
        let other = manager_of(&entry);
        if other == manager {
            continue;
        }
        let owned = from_fields_v1(entry.get("fieldsV1").unwrap_or(&Value::Null));
        for path in paths.intersection(&owned) {
            if value_at(existing, path) != value_at(applied, path) {
                conflicts.push((other.to_string(), path.clone()));
            }
        }
    }
    conflicts
}

/// Record a write: `manager` (with `operation` Apply or Update) now owns `paths`; other managers
/// lose the paths in `taken`.
pub fn record(
    object: &mut Value,
    manager: &str,
    operation: &str,
    api_version: &str,
    now: &str,
    paths: &BTreeSet<Path>,
    taken: &BTreeSet<Path>,
) {
    let mut list = Vec::new();
    let mut mine: BTreeSet<Path> = BTreeSet::new();
    // kube-apiserver removes fields the object no longer has from every manager's set; without
    // that, a manager that released a field (kube-lease-manager clears `spec.renewTime` when it
    // lets a Lease go) would still own it and every later apply of it would be a 409 Conflict.
    let exists = |path: &Path| value_at(object, path).is_some();
    for entry in entries(object) {
        let same = manager_of(&entry) == manager && entry.get("operation").and_then(Value::as_str) == Some(operation);
        let owned: BTreeSet<Path> =
            from_fields_v1(entry.get("fieldsV1").unwrap_or(&Value::Null)).into_iter().filter(exists).collect();
        if same {
            // An apply states its whole intent; an update adds to what the manager owned.
            if operation != "Apply" {
                mine.extend(owned);
            }
            continue;
        }
        let remaining: BTreeSet<Path> = owned.difference(taken).cloned().collect();
        if remaining.is_empty() {
            continue;
        }
        let mut entry = entry;
        entry["fieldsV1"] = to_fields_v1(&remaining);
        list.push(entry);
    }
    mine.extend(paths.iter().cloned());
    list.push(json!({
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(&mine),
    }));
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("managedFields".into(), Value::Array(list));
    }
}

/// `.spec.holderIdentity` for messages.
pub fn dotted(path: &[String]) -> String {
    path.iter().map(|part| format!(".{part}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> Path {
        text.split('.').map(str::to_string).collect()
    }

    #[test]
    fn leaf_paths_skip_server_fields_and_treat_lists_as_leaves() {
        let object = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "n", "labels": {"a": "b"}, "uid": "u"},
                            "spec": {"list": [1, 2], "nested": {"x": 1}, "empty": {}}});
        let paths = leaf_paths(&object);
        let expected: BTreeSet<Path> =
            ["metadata.labels.a", "spec.list", "spec.nested.x", "spec.empty"].into_iter().map(path).collect();
        assert_eq!(paths, expected);
    }

    #[test]
    fn fields_the_object_no_longer_has_leave_every_managers_set() {
        // A lease renewed by "a", then released by "a" with an update that drops renewTime.
        let mut object = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a", "renewTime": "t"}});
        let all = leaf_paths(&object);
        record(&mut object, "a", "Apply", "v1", "now", &all, &all);
        object["spec"] = json!({"holderIdentity": null});
        let released: BTreeSet<Path> = [path("spec.holderIdentity")].into_iter().collect();
        record(&mut object, "a-release", "Update", "v1", "now", &released, &released);
        let owned_by_a = entries(&object)
            .iter()
            .filter(|e| manager_of(e) == "a")
            .flat_map(|e| from_fields_v1(&e["fieldsV1"]))
            .collect::<Vec<_>>();
        assert!(owned_by_a.is_empty(), "a still owns {owned_by_a:?}");
        // So another manager's apply of renewTime is no conflict.
        let by_b = json!({"spec": {"renewTime": "t2"}});
        assert!(apply_conflicts(&object, &by_b, "b").is_empty());
    }

    #[test]
    fn fields_v1_round_trips() {
        let paths: BTreeSet<Path> =
            ["spec.holderIdentity", "spec.renewTime", "metadata.labels.x"].into_iter().map(path).collect();
        let fields = to_fields_v1(&paths);
        assert_eq!(fields["f:spec"]["f:holderIdentity"], json!({}));
        assert_eq!(from_fields_v1(&fields), paths);
    }

    #[test]
    fn conflicting_apply_is_detected_and_equal_values_are_not_conflicts() {
        let mut object =
            json!({"metadata": {"name": "lease"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}});
        let applied_by_a = json!({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}});
        record(&mut object, "lease-a", "Apply", "v1", "t", &leaf_paths(&applied_by_a), &BTreeSet::new());
        let by_b = json!({"spec": {"holderIdentity": "b", "leaseDurationSeconds": 15}});
        assert_eq!(
            apply_conflicts(&object, &by_b, "lease-b"),
            vec![("lease-a".to_string(), path("spec.holderIdentity"))]
        );
        assert!(apply_conflicts(&object, &applied_by_a, "lease-c").is_empty());
        assert!(apply_conflicts(&object, &by_b, "lease-a").is_empty(), "own fields never conflict");
    }

    #[test]
    fn updates_take_ownership_from_others() {
        let mut object = json!({"metadata": {}, "spec": {"holderIdentity": "a"}});
        record(&mut object, "lease-a", "Apply", "v1", "t", &[path("spec.holderIdentity")].into(), &BTreeSet::new());
        let changed: BTreeSet<Path> = [path("spec.holderIdentity")].into();
        record(&mut object, "lease-b", "Update", "v1", "t", &changed, &changed);
        let entries = entries(&object);
        assert_eq!(entries.len(), 1, "lease-a owned nothing more: {entries:?}");
        assert_eq!(manager_of(&entries[0]), "lease-b");
    }

    #[test]
    fn changed_paths_include_removals() {
        let old = json!({"spec": {"a": 1, "b": 2}});
        let new = json!({"spec": {"a": 1, "c": 3}});
        let changed: BTreeSet<Path> = ["spec.b", "spec.c"].into_iter().map(path).collect();
        assert_eq!(changed_paths(&old, &new), changed);
    }
}
