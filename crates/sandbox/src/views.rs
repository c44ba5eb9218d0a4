//! Documents the sandbox serves besides objects: version, discovery, OpenAPI v3 stubs, Tables.

use serde_json::{Value, json};

use super::registry::{Registry, ResourceType};
use super::store::Object;
use crate::output::human_duration;

pub const SERVER_MINOR: &str = "33";

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": SERVER_MINOR,
        "gitVersion": format!("v1.{SERVER_MINOR}.0-capdeck-sandbox"),
        "gitCommit": "capdeck-sandbox",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "n/a (capdeck sandbox)",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}

pub fn api_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

fn group_document(group: &str, versions: &[String]) -> Value {
    let list: Vec<Value> = versions
        .iter()
        .map(|version| json!({"groupVersion": format!("{group}/{version}"), "version": version}))
        .collect();
    json!({"name": group, "versions": list, "preferredVersion": list.first().cloned().unwrap_or(Value::Null)})
}

pub fn api_group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .filter(|(group, _)| !group.is_empty())
        .map(|(group, versions)| group_document(group, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(registry: &Registry, group: &str) -> Option<Value> {
    let groups = registry.groups();
    let versions = groups.get(group).filter(|_| !group.is_empty())?;
    let mut document = group_document(group, versions);
    document["kind"] = json!("APIGroup");
    document["apiVersion"] = json!("v1");
    Some(document)
}

pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = registry.in_group_version(group, version).flat_map(ResourceType::discovery).collect();
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}))
}

fn openapi_key(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// The OpenAPI v3 index: one entry per group-version. Its hash changes with the content, so
/// kubectl's cache notices newly registered CRDs.
pub fn openapi_index(registry: &Registry, revision: u64) -> Value {
    let mut paths = serde_json::Map::new();
    for (group, versions) in registry.groups() {
        for version in versions {
            let key = openapi_key(&group, &version);
            paths.insert(key.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={revision:016X}")}));
        }
    }
    json!({"paths": paths})
}

/// The path of one object of a resource, as OpenAPI documents name it.
pub fn object_path(resource: &ResourceType) -> String {
    let prefix = format!("/{}", openapi_key(&resource.group, &resource.version));
    if resource.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", resource.plural)
    } else {
        format!("{prefix}/{}/{{name}}", resource.plural)
    }
}

/// A minimal OpenAPI v3 document: enough for kubectl to find the kind of each path and to
/// trust the server with field validation. Schemas are not served (see docs/SANDBOX.md).
pub fn openapi_document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let mut any = false;
    for resource in registry.in_group_version(group, version) {
        any = true;
        let item = object_path(resource);
        let gvk = json!({"group": group, "version": version, "kind": resource.kind});
        let operation = json!({
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}],
            "responses": {"200": {"description": "OK"}},
        });
        paths.insert(item, json!({"patch": operation, "put": operation}));
    }
    any.then(|| {
        json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes (capdeck sandbox)", "version": format!("v1.{SERVER_MINOR}.0")},
            "paths": paths,
            "components": {"schemas": {}},
        })
    })
}

/// Evaluate a printer column's simple JSONPath (`.status.state`, `.spec.items[0].name`).
fn column_value(object: &Value, path: &str) -> Value {
    let mut current = object;
    for part in path.trim_start_matches('.').split('.').filter(|p| !p.is_empty()) {
        let (field, index) = match part.split_once('[') {
            Some((field, rest)) => (field, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let Some(next) = current.get(field) else { return Value::Null };
        current = match index {
            Some(index) => match next.get(index) {
                Some(item) => item,
                None => return Value::Null,
            },
            None => next,
        };
    }
    current.clone()
}

fn age(timestamp: &Value) -> Value {
    let parsed = timestamp.as_str().and_then(|text| text.parse::<k8s_openapi::jiff::Timestamp>().ok());
    match parsed {
        Some(then) => {
            let seconds = k8s_openapi::jiff::Timestamp::now().as_second() - then.as_second();
            Value::String(human_duration(seconds))
        }
        None => Value::Null,
    }
}

/// An object as `meta.k8s.io/v1` PartialObjectMetadata: its metadata alone.
pub fn partial_object_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or(Value::Null),
    })
}

/// A `meta.k8s.io/v1` Table: Name, the printer columns (built-ins get Age appended), and each
/// row's object as PartialObjectMetadata.
pub fn table(
    resource: &ResourceType,
    objects: &[Object],
    resource_version: Option<u64>,
    continue_token: Option<String>,
) -> Value {
    let mut columns = resource.columns.clone();
    let shows_creation = columns.iter().any(|column| column.json_path == ".metadata.creationTimestamp");
    if resource.crd.is_none() && !shows_creation {
        columns.push(super::registry::PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            json_path: ".metadata.creationTimestamp".into(),
            description: String::new(),
            priority: 0,
        });
    }
    let mut definitions = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace.",
    })];
    definitions.extend(columns.iter().map(|column| {
        json!({"name": column.name, "type": column.type_, "format": "", "priority": column.priority, "description": column.description})
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut cells = vec![object.pointer("/metadata/name").cloned().unwrap_or(Value::Null)];
            for column in &columns {
                let value = column_value(object, &column.json_path);
                cells.push(if column.type_ == "date" { age(&value) } else { value });
            }
            json!({
                "cells": cells,
                "object": partial_object_metadata(object),
            })
        })
        .collect();
    let mut metadata = json!({});
    if let Some(rv) = resource_version {
        metadata["resourceVersion"] = Value::String(rv.to_string());
    }
    if let Some(token) = continue_token {
        metadata["continue"] = Value::String(token);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": definitions, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_paths_resolve_fields_and_indexes() {
        let object = json!({"status": {"state": "Ready", "list": [{"n": 1}]}});
        assert_eq!(column_value(&object, ".status.state"), json!("Ready"));
        assert_eq!(column_value(&object, ".status.list[0].n"), json!(1));
        assert_eq!(column_value(&object, ".status.missing"), Value::Null);
        assert_eq!(column_value(&object, ".status.list[3].n"), Value::Null);
    }
}
