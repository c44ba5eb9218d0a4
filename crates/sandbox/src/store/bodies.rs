//! What the server does to an object's body on a write: type checks, the update merge (status
//! subresource, managed fields), defaults (a Deployment's), a Secret's `stringData`, the owners
//! the garbage collector follows.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::{ApiError, meta_str, metadata_mut};
use crate::registry::ResourceType;

pub(super) fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| refs.iter().filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string)).collect())
        .unwrap_or_default()
}

pub(super) fn check_type(resource: &ResourceType, body: &mut Value) -> Result<(), ApiError> {
    let api_version = resource.api_version();
    match body.get("kind").and_then(Value::as_str) {
        Some(kind) if kind != resource.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind of the provided object ({kind}) does not match the resource {} ({})",
                resource.plural, resource.kind
            )));
        }
        Some(_) => {}
        None => body["kind"] = Value::String(resource.kind.clone()),
    }
    match body.get("apiVersion").and_then(Value::as_str) {
        Some(version) if version != api_version => Err(ApiError::bad_request(format!(
            "the API version in the data ({version}) does not match the expected API version ({api_version})"
        ))),
        Some(_) => Ok(()),
        None => {
            body["apiVersion"] = Value::String(api_version);
            Ok(())
        }
    }
}

/// What an update writes: the incoming object with server-owned metadata kept, and the status
/// taken from the right place (status subresource or main resource).
pub(super) fn merge_for_update(resource: &ResourceType, existing: &Value, incoming: Value, status_only: bool) -> Value {
    let mut result = if status_only {
        let mut result = existing.clone();
        match incoming.get("status") {
            Some(status) => result["status"] = status.clone(),
            None => {
                if let Some(object) = result.as_object_mut() {
                    object.remove("status");
                }
            }
        }
        result
    } else {
        let mut result = incoming;
        if resource.status_subresource {
            match existing.get("status") {
                Some(status) => result["status"] = status.clone(),
                None => {
                    if let Some(object) = result.as_object_mut() {
                        object.remove("status");
                    }
                }
            }
        }
        result
    };
    let metadata = metadata_mut(&mut result);
    for field in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "namespace", "name"] {
        match existing.get("metadata").and_then(|m| m.get(field)) {
            Some(value) => {
                metadata.insert(field.into(), value.clone());
            }
            None => {
                metadata.remove(field);
            }
        }
    }
    result
}

/// Anything but metadata and status changed: the generation moves.
pub(super) fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |object: &Value| -> Map<String, Value> {
        object
            .as_object()
            .map(|map| {
                map.iter()
                    .filter(|(k, _)| *k != "metadata" && *k != "status")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(old) != strip(new)
}

pub(super) fn without_managed_fields(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(metadata) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    copy
}

/// The apps/v1 Deployment defaults kube-apiserver applies that capdeck and kubectl read
/// (`replicas` and `progressDeadlineSeconds` decide when a rollout is complete or stalled).
/// Pod-template defaults (restartPolicy, dnsPolicy, ...) are not applied (docs/SANDBOX.md).
pub(super) fn default_deployment(resource: &ResourceType, object: &mut Value) {
    if !(resource.group == "apps" && resource.plural == "deployments") {
        return;
    }
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else { return };
    spec.entry("replicas").or_insert(json!(1));
    spec.entry("progressDeadlineSeconds").or_insert(json!(600));
    spec.entry("revisionHistoryLimit").or_insert(json!(10));
    let strategy = spec.entry("strategy").or_insert(json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        strategy.entry("type").or_insert(json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate")) {
            let rolling = strategy.entry("rollingUpdate").or_insert(json!({}));
            if let Some(rolling) = rolling.as_object_mut() {
                rolling.entry("maxSurge").or_insert(json!("25%"));
                rolling.entry("maxUnavailable").or_insert(json!("25%"));
            }
        }
    }
}

/// Secrets: `stringData` merged into base64 `data`, `type` defaulted, `data` validated.
pub(super) fn normalise_secret(resource: &ResourceType, object: &mut Value) -> Result<(), ApiError> {
    if !(resource.group.is_empty() && resource.plural == "secrets") {
        return Ok(());
    }
    let name = meta_str(object, "name").unwrap_or_default().to_string();
    if let Some(Value::Object(data)) = object.get("data") {
        for (key, value) in data {
            let valid =
                value.as_str().is_some_and(|text| base64::engine::general_purpose::STANDARD.decode(text).is_ok());
            if !valid {
                return Err(ApiError::bad_request(format!(
                    "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data in data key {key:?}"
                )));
            }
        }
    }
    let string_data = object.as_object_mut().and_then(|map| map.remove("stringData"));
    if let Some(Value::Object(entries)) = string_data {
        if !object.get("data").is_some_and(Value::is_object) {
            object["data"] = json!({});
        }
        for (key, value) in entries {
            let Some(text) = value.as_str() else {
                return Err(ApiError::invalid(resource, &name, format!("stringData[{key}]: must be a string")));
            };
            object["data"][key] = Value::String(base64::engine::general_purpose::STANDARD.encode(text));
        }
    }
    // The API server's MaxSecretSize: the decoded values together, at most 1 MiB.
    let size: usize = object
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|data| data.values())
        .filter_map(|value| value.as_str().and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok()))
        .map(|bytes| bytes.len())
        .sum();
    if size > crate::plan::MAX_SECRET_BYTES {
        return Err(ApiError::invalid(
            resource,
            &name,
            format!("data: Too long: must have at most {} bytes", crate::plan::MAX_SECRET_BYTES),
        ));
    }
    if object.get("type").is_none_or(Value::is_null) {
        object["type"] = Value::String("Opaque".into());
    }
    Ok(())
}
