//! `capdeck batches` and the batch actions (`approve`, `force`, `hold`, `release`, `cancel`).

use std::io::Write as _;
use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::api::RotationBatch;
use crate::cli::{BatchActionArgs, BatchesArgs};
use crate::cluster::{ClusterArgs, Connection, Scope, describe_error, whoami};
use crate::engine::actions::{BatchAction, act};
use crate::output::{OutputFormat, Table, human_duration, window_text};

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
        OutputFormat::Json => crate::output::json(&Value::Array(batches.iter().map(batch_json).collect())),
        OutputFormat::Table => {
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
            if table.is_empty() { format!("No rotation batches in {}.\n", scope.label()) } else { table.render() }
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// `NAMESPACE/NAME`, or `NAME` in the -n namespace (or the context's).
fn target(cluster: &ClusterArgs, connection: &Connection, batch: &str) -> anyhow::Result<(String, String)> {
    match batch.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => Ok((namespace.into(), name.into())),
        Some(_) => anyhow::bail!("{batch:?} is not NAMESPACE/NAME"),
        None => {
            let namespace = match cluster.scope(connection) {
                Scope::Namespace(namespace) => namespace,
                Scope::All => anyhow::bail!("with -A give the batch as NAMESPACE/NAME"),
            };
            Ok((namespace, batch.into()))
        }
    }
}

pub async fn action(cluster: &ClusterArgs, args: &BatchActionArgs, action: BatchAction) -> anyhow::Result<ExitCode> {
    let connection = connect(cluster).await?;
    let (namespace, name) = target(cluster, &connection, &args.batch)?;
    let user =
        whoami(&connection.client).await.unwrap_or_else(|| format!("unknown user of context {}", connection.context));
    match act(&connection.client, &namespace, &name, action, &user, args.reason.as_deref(), Timestamp::now()).await {
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}/{}: {}", report.namespace, report.batch, report.summary)?;
            if let Some(reason) = args.reason.as_deref().filter(|r| !r.trim().is_empty()) {
                writeln!(out, "reason: {}", reason.trim())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("error: cannot {} {namespace}/{name}: {error}", action.verb());
            Ok(ExitCode::from(1))
        }
    }
}
