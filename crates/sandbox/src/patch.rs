//! The patch types of the Kubernetes API: JSON merge patch, JSON patch, strategic merge patch
//! (with the merge keys of the built-ins capdeck and kubectl touch) and server-side apply
//! (approximated as a merge; fields a manager stops applying are not removed).

use serde_json::{Map, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/json-patch+json" => Some(Self::Json),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Apply `patch` of `kind` to `target`. `strategic` says whether the resource is a built-in with
/// strategic-merge semantics (CRDs get a plain merge, as on a real server).
pub fn apply_patch(kind: PatchType, target: &mut Value, patch: &Value, strategic: bool) -> Result<(), String> {
    match kind {
        PatchType::Merge => {
            json_patch::merge(target, patch);
            Ok(())
        }
        PatchType::Json => {
            let operations: json_patch::Patch =
                serde_json::from_value(patch.clone()).map_err(|error| format!("invalid JSON patch: {error}"))?;
            json_patch::patch(target, &operations).map_err(|error| error.to_string())
        }
        PatchType::Strategic if !strategic => {
            Err("strategic merge patch format is not supported for custom resources".into())
        }
        PatchType::Strategic => {
            strategic_merge(target, patch, None);
            Ok(())
        }
        PatchType::Apply => {
            if strategic {
                strategic_merge(target, patch, None);
            } else {
                json_patch::merge(target, patch);
            }
            Ok(())
        }
    }
}

/// The merge key of a list field, by field name, for the built-in types we serve.
fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    match field {
        "containers" | "initContainers" | "ephemeralContainers" | "env" | "volumes" | "imagePullSecrets" => {
            Some("name")
        }
        "volumeMounts" => Some("mountPath"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "ports" => {
            if items.iter().any(|item| item.get("containerPort").is_some()) {
                Some("containerPort")
            } else {
                Some("port")
            }
        }
        _ => None,
    }
}

/// Lists of scalars merged as sets rather than replaced.
fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

fn strategic_merge(target: &mut Value, patch: &Value, _field: Option<&str>) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if patch_map.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replacement = patch_map.clone();
        replacement.remove("$patch");
        *target = Value::Object(replacement);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else { return };
    for (key, value) in patch_map {
        if key.starts_with('$') {
            continue; // $setElementOrder/..., $retainKeys, $patch: directives we do not need
        }
        if value.is_null() {
            target_map.remove(key);
            continue;
        }
        match (target_map.get_mut(key), value) {
            (Some(existing @ Value::Object(_)), Value::Object(_)) => strategic_merge(existing, value, Some(key)),
            (Some(Value::Array(existing)), Value::Array(items)) => merge_list(key, existing, items),
            (_, Value::Array(items)) => {
                let cleaned: Vec<Value> = items
                    .iter()
                    .filter(|item| item.get("$patch").and_then(Value::as_str) != Some("delete"))
                    .map(strip_directives)
                    .collect();
                target_map.insert(key.clone(), Value::Array(cleaned));
            }
            _ => {
                target_map.insert(key.clone(), strip_directives(value));
            }
        }
    }
}

fn strip_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| !key.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

fn merge_list(field: &str, existing: &mut Vec<Value>, items: &[Value]) {
    if is_set_list(field) {
        for item in items {
            if !existing.contains(item) {
                existing.push(item.clone());
            }
        }
        return;
    }
    let Some(key) = merge_key(field, items) else {
        *existing = items.iter().map(strip_directives).collect();
        return;
    };
    for item in items {
        let id = item.get(key);
        let position = id.and_then(|id| existing.iter().position(|candidate| candidate.get(key) == Some(id)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(index), true) => {
                existing.remove(index);
            }
            (Some(index), false) => strategic_merge(&mut existing[index], item, Some(field)),
            (None, true) => {}
            (None, false) => existing.push(strip_directives(item)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_replaces_lists_and_removes_nulls() {
        let mut target = json!({"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2]});
        apply_patch(PatchType::Merge, &mut target, &json!({"b": {"c": null, "e": 4}, "l": [3]}), false).expect("patch");
        assert_eq!(target, json!({"a": 1, "b": {"d": 3, "e": 4}, "l": [3]}));
    }

    #[test]
    fn json_patch_with_failing_test_is_an_error() {
        let mut target = json!({"metadata": {"finalizers": ["a"]}});
        let ops = json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "b"}]);
        assert!(apply_patch(PatchType::Json, &mut target, &ops, false).is_err());
        let ops = json!([{"op": "add", "path": "/metadata/finalizers/-", "value": "b"}]);
        apply_patch(PatchType::Json, &mut target, &ops, false).expect("add");
        assert_eq!(target, json!({"metadata": {"finalizers": ["a", "b"]}}));
    }

    #[test]
    fn strategic_merge_merges_containers_by_name_and_env_by_name() {
        let mut target = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "v1", "env": [{"name": "A", "value": "1"}], "envFrom": [{"secretRef": {"name": "old"}}]},
            {"name": "side", "image": "s1"}
        ]}}}});
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "side"}],
            "containers": [{"name": "app", "env": [{"name": "B", "value": "2"}], "envFrom": [{"secretRef": {"name": "new"}}]},
                           {"name": "side", "$patch": "delete"}]
        }}}});
        apply_patch(PatchType::Strategic, &mut target, &patch, true).expect("smp");
        assert_eq!(
            target,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "v1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "envFrom": [{"secretRef": {"name": "new"}}]}
            ]}}}})
        );
    }

    #[test]
    fn strategic_merge_on_custom_resources_is_refused() {
        let mut target = json!({});
        assert!(apply_patch(PatchType::Strategic, &mut target, &json!({"a": 1}), false).is_err());
    }

    #[test]
    fn finalizers_merge_as_a_set_and_replace_directive_works() {
        let mut target = json!({"metadata": {"finalizers": ["a"]}, "data": {"x": "1", "y": "2"}});
        let patch = json!({"metadata": {"finalizers": ["a", "b"]}, "data": {"$patch": "replace", "z": "3"}});
        apply_patch(PatchType::Strategic, &mut target, &patch, true).expect("smp");
        assert_eq!(target, json!({"metadata": {"finalizers": ["a", "b"]}, "data": {"z": "3"}}));
    }

    #[test]
    fn content_types_map_to_patch_types() {
        assert_eq!(PatchType::from_content_type("application/apply-patch+yaml; charset=utf-8"), Some(PatchType::Apply));
        assert_eq!(PatchType::from_content_type("application/json"), None);
    }
}
