//! The detail pane and the YAML view of the selected row (what each view shows is its own, in
//! `views`). Built when opened, never while drawing. Secret values never appear: Secrets show
//! keys and sizes, env values in workload definitions are masked.

use serde_json::Value;

use super::app::App;
use super::queries::selected_index;
use super::views::view;

pub use crate::output::MASK;

/// `(title, lines)` of the detail pane for the selected row.
pub fn detail(app: &App) -> Option<(String, Vec<String>)> {
    view(app.route.view).detail(app, selected_index(app)?)
}

/// `(title, lines)` of the selected row's object as YAML; `None` when the row has no object.
pub fn yaml(app: &App) -> Option<Result<(String, Vec<String>), String>> {
    let (title, value) = view(app.route.view).yaml(&app.snapshot, selected_index(app)?)?;
    Some(value.and_then(|mut value| {
        redact(&mut value);
        let text = serde_saphyr::to_string(&value).map_err(|error| format!("cannot render YAML: {error}"))?;
        Ok((format!("YAML {title}"), text.lines().map(str::to_string).collect()))
    }))
}

/// Make an object fit to show: drop `managedFields` and the last-applied annotation (noise, and
/// the latter may hold a Secret's values), mask Secret data and every `env[].value`.
pub fn redact(value: &mut Value) {
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
        if let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
            if annotations.is_empty() {
                metadata.remove("annotations");
            }
        }
    }
    if value.get("kind").and_then(Value::as_str) == Some("Secret") {
        for field in ["data", "stringData"] {
            if let Some(data) = value.get_mut(field).and_then(Value::as_object_mut) {
                for entry in data.values_mut() {
                    let size = entry.as_str().map_or(0, str::len);
                    *entry = Value::String(format!("{MASK} ({size} chars)"));
                }
            }
        }
    }
    mask_env(value);
}

fn mask_env(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(env)) = map.get_mut("env") {
                for variable in env.iter_mut() {
                    if let Some(entry) = variable.get_mut("value").filter(|v| v.is_string()) {
                        *entry = Value::String(MASK.into());
                    }
                }
            }
            for child in map.values_mut() {
                mask_env(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask_env),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redact_masks_secret_data_env_values_and_drops_noise() {
        let mut secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "managedFields": [{"manager": "kubectl"}],
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"password\":\"c2VjcmV0\"}}"}},
            "data": {"password": "c2VjcmV0"},
            "stringData": {"token": "plain-secret"}
        });
        redact(&mut secret);
        let text = secret.to_string();
        assert!(!text.contains("c2VjcmV0") && !text.contains("plain-secret"), "{text}");
        assert!(!text.contains("managedFields") && !text.contains("last-applied"), "{text}");
        assert_eq!(secret["data"]["password"], json!("••• (8 chars)"));

        let mut version = json!({
            "kind": "CAPApplicationVersion",
            "spec": {"workloads": [{"deploymentDefinition": {"env": [
                {"name": "DB_PASSWORD", "value": "hunter2"},
                {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
            ]}}]}
        });
        redact(&mut version);
        let env = &version["spec"]["workloads"][0]["deploymentDefinition"]["env"];
        assert_eq!(env[0], json!({"name": "DB_PASSWORD", "value": MASK}));
        assert_eq!(env[1]["valueFrom"]["secretKeyRef"]["name"], json!("s"));
    }
}
