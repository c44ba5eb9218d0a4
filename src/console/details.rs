//! The detail pane and the YAML view of the selected row (what each view shows is its own, in
//! `views`). Built when opened, never while drawing. Secret values never appear: Secrets show
//! keys and sizes; env values, HTTP header values and what may be a credential in `command` and
//! `args` are masked in workload definitions.

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
/// the latter may hold a Secret's values), mask Secret data, every `env[].value` and
/// `httpHeaders[].value`, and what in `command` and `args` may be a credential (see
/// `mask_arguments`) — anywhere in the object, so in Deployments, ReplicaSets, Pods, Jobs and
/// CronJobs alike (containers, init and ephemeral containers, probes, lifecycle hooks).
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
            // Environment variables and HTTP headers (probes, lifecycle hooks): every value.
            for field in ["env", "httpHeaders"] {
                if let Some(Value::Array(entries)) = map.get_mut(field) {
                    for entry in entries.iter_mut() {
                        if let Some(value) = entry.get_mut("value").filter(|v| v.is_string()) {
                            *value = Value::String(MASK.into());
                        }
                    }
                }
            }
            for (field, is_command) in [("command", true), ("args", false)] {
                if let Some(Value::Array(entries)) = map.get_mut(field) {
                    mask_arguments(entries, is_command);
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

/// Mask what in a `command` or `args` list may be a credential, keeping what shows its shape.
/// Shown: flags (`-c`, `--verbose`, `--password`), `--flag=VALUE` and `NAME=VALUE` when the name
/// names no credential and the value looks public, and entries that look public: paths
/// (`/bin/sh`, `./run`), file and dotted names (`server.js`, `com.example.Main`), host:port,
/// and what a binding value is shown for in logs (URLs without user info, domains, numbers,
/// lower-case words: `readmodel::pods::public_shaped`), and the program (`command[0]`).
/// Masked: the value after a flag that names a credential (`--token XYZ`), the value of
/// `--password=…`, and everything else — a shell script (`sh -c "psql postgres://u:PW@db"`)
/// whole, a URI with user info, a word with digits or capitals.
fn mask_arguments(entries: &mut [Value], is_command: bool) {
    let mut after_secret_flag = false;
    for (index, entry) in entries.iter_mut().enumerate() {
        let Some(text) = entry.as_str() else {
            after_secret_flag = false;
            continue;
        };
        let masked = if std::mem::take(&mut after_secret_flag) {
            Some(MASK.to_string())
        } else if let Some(password) =
            text.strip_prefix("-p").filter(|rest| !rest.is_empty() && !text.starts_with("--"))
            && !crate::readmodel::pods::public_shaped(password)
        {
            // `mysql -pPASSWORD`
            Some(format!("-p{MASK}"))
        } else if flag(text) {
            after_secret_flag = crate::readmodel::pods::secret_key(text);
            None
        } else if let Some((name, value)) = text.split_once('=').filter(|(name, value)| {
            // Not base64 padding (`czNj…LTE=`): a name, then a value.
            !value.is_empty() && (flag(name) || identifier(name))
        }) {
            (crate::readmodel::pods::secret_key(name) || !public_argument(value)).then(|| format!("{name}={MASK}"))
        } else if public_argument(text) || (is_command && index == 0 && program(text)) {
            None
        } else {
            Some(MASK.to_string())
        };
        if let Some(masked) = masked {
            *entry = Value::String(masked);
        }
    }
}

/// `-c`, `--dry-run`, `-Xmx512m`: a flag without a value.
fn flag(text: &str) -> bool {
    let name = text.strip_prefix("--").or_else(|| text.strip_prefix('-')).unwrap_or_default();
    name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `DB_PASSWORD`, `spring.profiles.active`: the name in `NAME=VALUE`.
fn identifier(text: &str) -> bool {
    text.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
}

/// A program: `node`, `/usr/bin/env`, `cds-serve`.
fn program(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '+'))
}

/// A path, a file or dotted name, host:port, or what looks public in a binding Secret.
fn public_argument(text: &str) -> bool {
    let path_chars =
        |text: &str| text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '+'));
    let dotted = |text: &str| {
        text.contains('.')
            && text.split('.').all(|part| {
                part.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                    && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            })
    };
    let host_port = |text: &str| {
        text.split_once(':').is_some_and(|(host, port)| {
            (dotted(host) || host.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
                && !host.is_empty()
                && !port.is_empty()
                && port.len() <= 5
                && port.chars().all(|c| c.is_ascii_digit())
        })
    };
    (["/", "./", "../", "~/"].iter().any(|start| text.starts_with(start)) && path_chars(text))
        || dotted(text)
        || host_port(text)
        || (!text.is_empty() && crate::readmodel::pods::public_shaped(text))
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

    /// Credentials in container `command`, `args` and probe `httpHeaders` never reach the YAML
    /// view, in any workload kind, in containers and init containers, in the Pod template and
    /// in probes and hooks; what shows the command's shape stays.
    #[test]
    fn redact_masks_credentials_in_commands_args_and_http_headers() {
        let container = |name: &str| {
            json!({
                "name": name,
                "command": ["sh", "-c", "psql postgres://app:Cmd-PW-1@db:5432/app"],
                "args": ["--port", "8080", "--password", "Arg-PW-2", "--token=Arg-PW-3", "DB_PASSWORD=Arg-PW-4",
                         "--db=postgres://app:Arg-PW-5@db/app", "--config=/etc/app/config.yaml", "Arg-PW-6",
                         "czNjcjN0LXZhbHVlLTE=", "-Dspring.profiles.active=cloud", "server.js", "-v", "-pArg-PW-10", "-print"],
                "livenessProbe": {"httpGet": {"path": "/health", "port": 8080, "httpHeaders": [
                    {"name": "Authorization", "value": "Bearer Hdr-PW-7"}]}},
                "readinessProbe": {"exec": {"command": ["check", "--secret", "Probe-PW-8"]}},
                "lifecycle": {"preStop": {"httpGet": {"path": "/stop", "port": 8080,
                    "httpHeaders": [{"name": "X-Api-Key", "value": "Hook-PW-9"}]}}},
            })
        };
        let pod_spec = json!({"initContainers": [container("init")], "containers": [container("main")]});
        let template = json!({"metadata": {"labels": {"app": "srv"}}, "spec": pod_spec});
        let objects = [
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": template}}),
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": {"template": template}}),
            json!({"apiVersion": "v1", "kind": "Pod", "spec": pod_spec}),
            json!({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": template}}),
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": template}}}}),
        ];
        let leaks = ["Cmd-PW-1", "Arg-PW-", "Hdr-PW-7", "Probe-PW-8", "Hook-PW-9", "czNjcjN0LXZhbHVlLTE"];
        for mut object in objects {
            let kind = object["kind"].clone();
            redact(&mut object);
            let text = object.to_string();
            for leak in leaks {
                assert!(!text.contains(leak), "{kind}: {leak} in {text}");
            }
            let spec = object
                .pointer("/spec/template/spec")
                .or_else(|| object.pointer("/spec/jobTemplate/spec/template/spec"));
            let spec = spec.or_else(|| object.get("spec")).expect("a Pod spec");
            for containers in ["initContainers", "containers"] {
                let container = &spec[containers][0];
                assert_eq!(container["command"], json!(["sh", "-c", MASK]), "{kind}");
                assert_eq!(
                    container["args"],
                    json!([
                        "--port",
                        "8080",
                        "--password",
                        MASK,
                        "--token=•••",
                        "DB_PASSWORD=•••",
                        "--db=•••",
                        "--config=/etc/app/config.yaml",
                        MASK,
                        MASK,
                        "-Dspring.profiles.active=cloud",
                        "server.js",
                        "-v",
                        "-p•••",
                        "-print"
                    ]),
                    "{kind}"
                );
                assert_eq!(
                    container["livenessProbe"]["httpGet"]["httpHeaders"],
                    json!([{"name": "Authorization", "value": MASK}]),
                    "{kind}"
                );
                assert_eq!(
                    container["readinessProbe"]["exec"]["command"],
                    json!(["check", "--secret", MASK]),
                    "{kind}"
                );
            }
        }
    }
}
