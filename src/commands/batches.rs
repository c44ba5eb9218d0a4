//! `capdeck batches` and the batch actions (`approve`, `force`, `hold`, `release`, `cancel`).

use std::io::Write as _;
use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::api::RotationBatch;
use crate::cli::{BatchActionArgs, BatchesArgs, BatchesFormat};
use crate::cluster::{ClusterArgs, Connection, describe_error, whoami};
use crate::engine::actions::{BatchAction, act};
use crate::output::{Table, human_duration, window_text};

async fn connect(cluster: &ClusterArgs) -> anyhow::Result<Connection> {
    Ok(cluster.connect().await?)
}

fn batch_json(batch: &RotationBatch) -> Value {
    let status = batch.status.clone().unwrap_or_default();
    let condition = status.conditions.iter().find(|c| c.type_ == crate::api::common::READY);
    json!({
        "namespace": batch.namespace(),
        "name": batch.name_any(),
        "application": batch.spec.application,
        "phase": batch.phase().to_string(),
        "reason": condition.map(|c| c.reason.clone()),
        "message": condition.map(|c| c.message.clone()),
        "windowEnd": batch.spec.window_end,
        "secrets": batch.spec.secrets,
        "approval": batch.spec.approval,
        "force": batch.spec.force,
        "hold": batch.spec.hold,
        "cancel": batch.spec.cancel,
        "progress": status.progress,
        "tenants": status.tenants,
        "deployments": status.deployments,
        "created": batch.metadata.creation_timestamp,
    })
}

pub async fn list(cluster: &ClusterArgs, args: &BatchesArgs) -> anyhow::Result<ExitCode> {
    let connection = connect(cluster).await?;
    let scope = cluster.scope(&connection);
    let api: Api<RotationBatch> = scope.api(&connection.client);
    let mut batches = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(status)) if status.code == 404 => {
            anyhow::bail!(
                "the cluster has no RotationBatch kind yet: install the CRDs with `capdeck crds | kubectl apply -f -`"
            )
        }
        Err(error) => anyhow::bail!("cannot list rotation batches: {}", describe_error(&error)),
    };
    batches.sort_by_key(|b| (b.namespace(), b.metadata.creation_timestamp.clone().map(|t| t.0), b.name_any()));
    let text = match args.output {
        BatchesFormat::Json => crate::output::json(&Value::Array(batches.iter().map(batch_json).collect())),
        BatchesFormat::Name => {
            batches.iter().map(|b| format!("{}/{}\n", b.namespace().unwrap_or_default(), b.name_any())).collect()
        }
        BatchesFormat::Table => {
            let now = Timestamp::now();
            let mut table = Table::new(&[
                "NAMESPACE",
                "NAME",
                "APPLICATION",
                "PHASE",
                "WINDOW",
                "DEPLOYMENTS",
                "SECRETS",
                "APPROVAL",
                "AGE",
            ]);
            for batch in &batches {
                let age = batch
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or("-".to_string(), |t| human_duration(now.as_second() - t.0.as_second()));
                table.row(vec![
                    batch.namespace().unwrap_or_default(),
                    batch.name_any(),
                    batch.spec.application.clone(),
                    batch.phase().to_string(),
                    window_text(batch.spec.window_end.0, now),
                    batch.progress_text(),
                    batch.spec.secrets.len().to_string(),
                    batch.approval_text(),
                    age,
                ]);
            }
            if table.is_empty() {
                // Like kubectl: "nothing found" is a note for the person, not output for a pipe.
                eprintln!("No rotation batches in {}.", scope.label());
                String::new()
            } else {
                table.render()
            }
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// `NAMESPACE/NAME`, or `NAME` in the -n namespace (or the context's). Anything else — and a
/// `NAMESPACE/` that -n contradicts — is a usage error.
pub fn target(
    explicit_namespace: Option<&str>,
    all_namespaces: bool,
    default_namespace: &str,
    what: &str,
    given: &str,
) -> Result<(String, String), crate::commands::UsageError> {
    use crate::commands::UsageError;
    let parts: Vec<&str> = given.split('/').collect();
    match parts.as_slice() {
        [namespace, name] if !namespace.is_empty() && !name.is_empty() => {
            if let Some(flag) = explicit_namespace.filter(|flag| flag != namespace) {
                return Err(UsageError(format!(
                    "{what} {given:?} names namespace {namespace:?} but -n says {flag:?}; give one of them"
                )));
            }
            Ok(((*namespace).into(), (*name).into()))
        }
        [name] if !name.is_empty() => {
            if all_namespaces && explicit_namespace.is_none() {
                return Err(UsageError(format!("with -A give the {what} as NAMESPACE/NAME")));
            }
            Ok((explicit_namespace.unwrap_or(default_namespace).into(), (*name).into()))
        }
        _ => Err(UsageError(format!("{what} {given:?} is not NAMESPACE/NAME or NAME (with -n NAMESPACE)"))),
    }
}

pub async fn action(cluster: &ClusterArgs, args: &BatchActionArgs, action: BatchAction) -> anyhow::Result<ExitCode> {
    let connection = connect(cluster).await?;
    let (namespace, name) = target(
        cluster.namespace.as_deref(),
        cluster.all_namespaces,
        &connection.default_namespace,
        "batch",
        &args.batch,
    )?;
    if args.dry_run {
        return dry_run(&connection, &namespace, &name, action).await;
    }
    // Every write records who made it; one nobody can be named for is refused (as in the console).
    let Some(user) = whoami(&connection.client).await else {
        eprintln!(
            "error: cannot {} {namespace}/{name}: the API server at {} did not say who you are (SelfSubjectReview \
             failed), and capdeck records every approver; check `kubectl auth whoami`",
            action.verb(),
            connection.server
        );
        return Ok(ExitCode::from(1));
    };
    match act(&connection.client, &namespace, &name, action, &user, Some(&args.reason), Timestamp::now()).await {
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}/{}: {}", report.namespace, report.batch, report.summary)?;
            writeln!(out, "reason: {}", args.reason)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("error: cannot {} {namespace}/{name}: {error}", action.verb());
            Ok(ExitCode::from(1))
        }
    }
}

/// What `action` would do to the batch: the refusal if it makes no sense, else the Deployments
/// that restart and the tenants their versions serve.
async fn dry_run(
    connection: &Connection,
    namespace: &str,
    name: &str,
    action: BatchAction,
) -> anyhow::Result<ExitCode> {
    let api: Api<RotationBatch> = Api::namespaced(connection.client.clone(), namespace);
    let batch = match api.get_opt(name).await {
        Ok(Some(batch)) => batch,
        Ok(None) => {
            eprintln!("error: rotation batch {namespace}/{name} not found (capdeck batches -A lists them)");
            return Ok(ExitCode::from(1));
        }
        Err(error) => anyhow::bail!("cannot read rotation batch {namespace}/{name}: {}", describe_error(&error)),
    };
    if let Some(refusal) = action.refusal(&batch) {
        eprintln!("error: cannot {} {namespace}/{name}: {refusal}", action.verb());
        return Ok(ExitCode::from(1));
    }
    let restarts: Vec<&crate::api::rotation_batch::BatchDeployment> = batch.restarts().collect();
    let versions: std::collections::BTreeSet<&str> = restarts.iter().map(|d| d.version.as_str()).collect();
    let tenants: Api<crate::api::CAPTenant> = Api::namespaced(connection.client.clone(), namespace);
    let served: Vec<String> = match tenants.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .iter()
            .filter(|t| t.spec.cap_application_instance == batch.spec.application)
            .filter(|t| {
                t.status
                    .as_ref()
                    .and_then(|s| s.current_cap_application_version_instance.as_deref())
                    .is_some_and(|v| versions.contains(v))
            })
            .map(|t| t.name_any())
            .collect(),
        Err(error) => anyhow::bail!("cannot list tenants in {namespace}: {}", describe_error(&error)),
    };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} {namespace}/{name} ({}, application {}) — dry run, nothing written",
        action.verb(),
        batch.phase(),
        batch.spec.application
    )?;
    if restarts.is_empty() {
        writeln!(out, "Deployments to restart: none decided yet (the engine plans them when the window ends)")?;
    } else {
        writeln!(out, "Deployments to restart ({}):", restarts.len())?;
        for deployment in &restarts {
            writeln!(out, "  {} (version {})", deployment.name, deployment.version)?;
        }
    }
    writeln!(
        out,
        "Tenants served ({}): {}",
        served.len(),
        if served.is_empty() { "-".into() } else { served.join(", ") }
    )?;
    Ok(ExitCode::SUCCESS)
}
