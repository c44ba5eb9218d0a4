//! The detail pane (conditions and related objects) and the YAML view of the selected row.
//! Built when opened, never while drawing. Secret values never appear: Secrets show keys and
//! sizes, env values in workload definitions are masked.

use serde::Serialize;
use serde_json::Value;

use super::app::{App, ViewKind};
use super::model::{Snapshot, condition_text};
use super::update::selected_index;
use crate::api::common::Condition;
use crate::output::{human_duration, window_text};

/// What replaces a masked value.
pub const MASK: &str = "•••";

/// `(title, lines)` of the detail pane for the selected row.
pub fn detail(app: &App) -> Option<(String, Vec<String>)> {
    let index = selected_index(app)?;
    let snapshot: &Snapshot = &app.snapshot;
    let now = app.now;
    let age = |time: Option<k8s_openapi::jiff::Timestamp>| {
        time.map_or_else(|| "-".to_string(), |t| human_duration(now.as_second() - t.as_second()))
    };
    let mut lines = Vec::new();
    let title = match app.route.view {
        ViewKind::Applications => {
            let row = snapshot.apps.get(index)?;
            lines.push(format!("state           {}", row.state));
            lines.push(format!("latest version  {}", row.latest.as_deref().unwrap_or("none Ready")));
            lines.push(format!("versions        {}", row.versions));
            lines.push(format!("tenants         {}/{} ready", row.tenants_ready, row.tenants));
            lines.push(format!("rollout on credential update  {}", row.opt_in.label()));
            lines.push(format!("approval        {}", row.policy.label()));
            match &row.batch {
                Some(batch) => lines
                    .push(format!("open batch      {} ({}, deployments {})", batch.name, batch.phase, batch.progress)),
                None => lines.push("open batch      none".into()),
            }
            lines.push(String::new());
            lines.push("services (binding Secret: keys and sizes)".into());
            for service in &row.services {
                let keys = match &service.keys {
                    Some(keys) if keys.is_empty() => "no data".to_string(),
                    Some(keys) => {
                        keys.iter().map(|(key, size)| format!("{key} ({size} B)")).collect::<Vec<_>>().join(", ")
                    }
                    None => "Secret not found (or outside capdeck's view)".to_string(),
                };
                lines.push(format!("  {} [{}] → {}: {keys}", service.name, service.class, service.secret));
            }
            if let Some(report) = &row.dependencies {
                lines.push(String::new());
                lines.push(format!(
                    "subscription dependencies ({} in the getDependencies answer)",
                    report.dependencies.len()
                ));
                for service in &report.services {
                    lines.push(format!("  {:<14} {}", service.service, service.reason));
                }
            }
            conditions(&mut lines, row.object.status.as_ref().map(|s| s.generic.conditions.as_slice()));
            format!("Application {}/{}", row.namespace, row.name)
        }
        ViewKind::Versions => {
            let row = snapshot.versions.get(index)?;
            lines.push(format!("application     {}", row.application));
            lines.push(format!("version         {}{}", row.version, if row.latest { " (latest Ready)" } else { "" }));
            lines.push(format!("state           {}", row.state));
            lines.push(format!("tenants on it   {}", row.tenants));
            lines.push(format!("age             {}", age(row.created)));
            lines.push(String::new());
            lines.push("workloads".into());
            for workload in &row.object.spec.workloads {
                let kind = match (&workload.deployment_definition, &workload.job_definition) {
                    (Some(deployment), _) => format!("Deployment {}", deployment.type_),
                    (None, Some(job)) => format!("Job {}", job.type_),
                    (None, None) => "no definition".into(),
                };
                lines.push(format!(
                    "  {} ({kind}) services: {}",
                    workload.name,
                    workload.consumed_btp_services.join(", ")
                ));
            }
            conditions(&mut lines, row.object.status.as_ref().map(|s| s.generic.conditions.as_slice()));
            format!("Version {}/{}", row.namespace, row.name)
        }
        ViewKind::Tenants => {
            let row = snapshot.tenants.get(index)?;
            lines.push(format!("application     {}", row.application));
            lines.push(format!("subdomain       {}", row.subdomain));
            lines.push(format!("tenant id       {}", row.object.spec.tenant_id));
            lines.push(format!("state           {}", row.state));
            let current =
                row.current.as_ref().map_or_else(|| "none".to_string(), |(cav, semver)| format!("{semver} ({cav})"));
            lines
                .push(format!("version         {current} → {}", if row.target.is_empty() { "-" } else { &row.target }));
            lines.push(format!("upgrade         {}", row.strategy));
            if let Some((operation, state, step)) = &row.operation {
                lines.push(format!("last operation  {operation} {state} step {step}"));
            }
            if let Some(blocked) = &row.blocked {
                lines.push(format!("blocked         {blocked}"));
            }
            // The tenant's newest operation, step by step.
            let operation = snapshot
                .operations
                .iter()
                .filter(|op| op.namespace == row.namespace && op.tenant == row.name)
                .max_by_key(|op| op.created);
            if let Some(op) = operation {
                lines.push(String::new());
                lines.push(format!("operation {} ({} → {}, {})", op.name, op.operation, op.version, op.state));
                for (position, (name, kind, continue_on_failure)) in op.steps.iter().enumerate() {
                    let number = u32::try_from(position + 1).unwrap_or(u32::MAX);
                    let marker = match op.current_step {
                        Some(current) if number < current => "✓",
                        Some(current) if number == current => "▶",
                        _ => " ",
                    };
                    let tolerant = if *continue_on_failure { ", continueOnFailure" } else { "" };
                    lines.push(format!("  {marker} {number}/{} {name} ({kind}{tolerant})", op.steps.len()));
                }
                lines.push(format!("  active job    {}", op.active_job.as_deref().unwrap_or("-")));
            }
            conditions(&mut lines, row.object.status.as_ref().map(|s| s.generic.conditions.as_slice()));
            format!("Tenant {}/{}", row.namespace, row.name)
        }
        ViewKind::Operations => {
            let row = snapshot.operations.get(index)?;
            lines.push(format!("tenant          {} ({})", row.tenant, row.application));
            lines.push(format!("operation       {} → {}", row.operation, row.version));
            lines.push(format!("state           {}", row.state));
            lines.push(format!("step            {}", row.step()));
            lines.push(format!("active job      {}", row.active_job.as_deref().unwrap_or("-")));
            lines.push(format!("age             {}", age(row.created)));
            if !row.message.is_empty() {
                lines.push(format!("message         {}", row.message));
            }
            lines.push(String::new());
            lines.push("steps".into());
            for (position, (name, kind, continue_on_failure)) in row.steps.iter().enumerate() {
                let number = u32::try_from(position + 1).unwrap_or(u32::MAX);
                let marker = match row.current_step {
                    Some(current) if current == number => "▶",
                    Some(current) if current > number => "✓",
                    _ => " ",
                };
                let tolerant = if *continue_on_failure { " (continues on failure)" } else { "" };
                lines.push(format!("  {marker} {number}. {name} [{kind}]{tolerant}"));
            }
            conditions(&mut lines, row.object.status.as_ref().map(|s| s.generic.conditions.as_slice()));
            format!("Operation {}/{}", row.namespace, row.name)
        }
        ViewKind::Batches => {
            let row = snapshot.batches.get(index)?;
            batch_lines(&mut lines, row, now);
            let served = tenants_served(snapshot, row);
            if !served.is_empty() {
                const SHOWN: usize = 12;
                let more = served.len().saturating_sub(SHOWN);
                let mut names = served.into_iter().take(SHOWN).collect::<Vec<_>>().join(", ");
                if more > 0 {
                    names.push_str(&format!(" and {more} more"));
                }
                lines.push(format!("tenants served  {names}"));
            }
            format!("Batch {}/{}", row.namespace, row.name)
        }
        ViewKind::Rollouts => {
            let row = snapshot.rollouts.get(index)?;
            lines.push(format!("batch           {}", row.batch));
            lines.push(format!("application     {}", row.application));
            lines.push(format!("version         {}", row.version));
            lines.push(format!("action          {}", row.action));
            lines.push(format!("state           {}", row.state.as_ref().map_or("-".to_string(), ToString::to_string)));
            lines.push(format!(
                "replicas        {} updated / {} available / {} desired",
                row.updated, row.available, row.replicas
            ));
            if !row.message.is_empty() {
                lines.push(format!("message         {}", row.message));
            }
            format!("Deployment {}/{}", row.namespace, row.deployment)
        }
        ViewKind::Events => {
            let row = snapshot.events.get(index)?;
            lines.push(format!("type            {}", if row.warning { "Warning" } else { "Normal" }));
            lines.push(format!("reason          {}", row.reason));
            lines.push(format!("regarding       {}", row.application));
            lines.push(format!("reported by     {}", row.controller));
            lines.push(format!("age             {}", age(row.time)));
            lines.push(String::new());
            lines.push(row.note.clone());
            format!("Event {}/{}", row.namespace, row.reason)
        }
    };
    Some((title, lines))
}

/// The tenants whose current version is one the batch restarts Deployments of.
pub(super) fn tenants_served(snapshot: &Snapshot, row: &super::model::BatchRow) -> Vec<String> {
    let versions: std::collections::BTreeSet<&str> = row.object.restarts().map(|d| d.version.as_str()).collect();
    snapshot
        .tenants
        .iter()
        .filter(|t| t.namespace == row.namespace && t.application == row.application)
        .filter(|t| t.current.as_ref().is_some_and(|(cav, _)| versions.contains(cav.as_str())))
        .map(|t| t.name.clone())
        .collect()
}

fn batch_lines(lines: &mut Vec<String>, row: &super::model::BatchRow, now: k8s_openapi::jiff::Timestamp) {
    let batch = &row.object;
    lines.push(format!("application     {}", row.application));
    lines.push(format!("phase           {} ({})", row.phase, row.reason));
    if !row.message.is_empty() {
        lines.push(format!("                {}", row.message));
    }
    lines.push(format!("window          {}", window_text(row.window_end, now)));
    lines.push(format!("approval        {}", row.approval));
    lines.push(format!("blast radius    {}", row.blast_radius()));
    let who = |label: &str, action: &Option<crate::api::rotation_batch::UserAction>, lines: &mut Vec<String>| {
        if let Some(action) = action {
            let reason = action.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
            lines.push(format!("{label:<16}{} at {}{reason}", action.by, action.at.0));
        }
    };
    if let Some(approval) = &batch.spec.approval
        && let Some(by) = &approval.approved_by
    {
        let reason = approval.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
        let at = approval.approved_at.as_ref().map(|t| format!(" at {}", t.0)).unwrap_or_default();
        lines.push(format!("approved by     {by}{at}{reason}"));
    }
    who("forced by", &batch.spec.force, lines);
    who("held by", &batch.spec.hold, lines);
    who("cancelled by", &batch.spec.cancel, lines);
    lines.push(String::new());
    lines.push("rotated secrets".into());
    for secret in &batch.spec.secrets {
        lines.push(format!("  {} (service {}) rotated {}", secret.name, secret.service, secret.rotated_at.0));
    }
    if let Some(status) = &batch.status {
        if !status.deployments.is_empty() {
            lines.push(String::new());
            lines.push("deployments".into());
            for deployment in &status.deployments {
                let state = deployment.state.as_ref().map_or("-".to_string(), ToString::to_string);
                let message = deployment.message.as_deref().map(|m| format!(" — {m}")).unwrap_or_default();
                lines.push(format!(
                    "  {} [{}] {} {state}{message}",
                    deployment.name, deployment.version, deployment.action
                ));
            }
        }
        if let Some(by) = &status.superseded_by {
            lines.push(format!("superseded by   {by}"));
        }
        conditions(lines, Some(status.conditions.as_slice()));
    }
}

fn conditions(lines: &mut Vec<String>, conditions: Option<&[Condition]>) {
    let conditions = conditions.unwrap_or_default();
    lines.push(String::new());
    if conditions.is_empty() {
        lines.push("conditions      none".into());
        return;
    }
    lines.push("conditions".into());
    for condition in conditions {
        lines.push(format!("  {}", condition_text(condition)));
    }
}

/// `(title, lines)` of the selected row's object as YAML; `None` when the row has no object.
pub fn yaml(app: &App) -> Option<Result<(String, Vec<String>), String>> {
    let index = selected_index(app)?;
    let snapshot: &Snapshot = &app.snapshot;
    let (title, value) = match app.route.view {
        ViewKind::Applications => {
            snapshot.apps.get(index).map(|r| (format!("{}/{}", r.namespace, r.name), to_value(&*r.object)))?
        }
        ViewKind::Versions => {
            snapshot.versions.get(index).map(|r| (format!("{}/{}", r.namespace, r.name), to_value(&*r.object)))?
        }
        ViewKind::Tenants => {
            snapshot.tenants.get(index).map(|r| (format!("{}/{}", r.namespace, r.name), to_value(&*r.object)))?
        }
        ViewKind::Operations => {
            snapshot.operations.get(index).map(|r| (format!("{}/{}", r.namespace, r.name), to_value(&*r.object)))?
        }
        ViewKind::Batches => {
            snapshot.batches.get(index).map(|r| (format!("{}/{}", r.namespace, r.name), to_value(&*r.object)))?
        }
        ViewKind::Rollouts => {
            let row = snapshot.rollouts.get(index)?;
            let batch = snapshot.batches.iter().find(|b| b.namespace == row.namespace && b.name == row.batch)?;
            (format!("{}/{}", batch.namespace, batch.name), to_value(&*batch.object))
        }
        ViewKind::Events => return None,
    };
    Some(value.and_then(|mut value| {
        redact(&mut value);
        let text = serde_saphyr::to_string(&value).map_err(|error| format!("cannot render YAML: {error}"))?;
        Ok((format!("YAML {title}"), text.lines().map(str::to_string).collect()))
    }))
}

fn to_value<T: Serialize>(object: &T) -> Result<Value, String> {
    serde_json::to_value(object).map_err(|error| format!("cannot render the object: {error}"))
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
