//! `capdeck tenants [-n NS | -A] [--app NAME]`: CAPTenants with their versions, upgrade strategy
//! and running operation — the console's tenant view, for scripts.

use std::process::ExitCode;
use std::sync::Arc;

use kube::api::ListParams;
use serde_json::{Value, json};

use crate::api::{CAPApplication, CAPApplicationVersion, CAPTenant, CAPTenantOperation};
use crate::cli::TenantsArgs;
use crate::cluster::{ClusterTarget, Scope, describe_error};
use crate::output::{OutputFormat, Printable, Table};
use crate::readmodel::{self, Sources, TenantRow};

pub(super) async fn list<K>(client: &kube::Client, scope: &Scope, what: &str) -> anyhow::Result<Vec<Arc<K>>>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: kube::Api<crate::api::lenient::Lenient<K>> = scope.api(client);
    match crate::cluster::list_each(&api, &ListParams::default()).await {
        Ok(listed) => {
            super::warn_undecodable(what, &listed.undecodable);
            Ok(listed.items.into_iter().map(Arc::new).collect())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => anyhow::bail!(
            "the cluster has no {what} kind: install the CAP Operator's CRDs (or `capdeck crds | kubectl apply --server-side -f -`)"
        ),
        Err(error) => anyhow::bail!("cannot list {what}s: {}", describe_error(&error)),
    }
}

fn tenant_json(row: &TenantRow) -> Value {
    json!({
        "namespace": row.namespace,
        "name": row.name,
        "application": row.application,
        "subdomain": row.subdomain,
        "tenantId": row.object.spec.tenant_id,
        "state": row.state,
        "ready": row.ready,
        "currentVersion": row.current.as_ref().map(|current| json!({"name": current.name, "version": current.semver})),
        "targetVersion": row.target,
        "upgradeStrategy": row.strategy,
        "operation": row.operation.as_ref().map(|(kind, state, step)| json!({"type": kind, "state": state, "step": step})),
        "blocked": row.blocked,
    })
}

/// The table of `rows`: the columns `capdeck tenants` prints (wide adds the tenant ID and READY).
fn table(rows: &[&TenantRow]) -> Table {
    let mut table = Table::with_wide(
        &[
            "NAMESPACE",
            "NAME",
            "APPLICATION",
            "SUBDOMAIN",
            "STATE",
            "CURRENT",
            "TARGET",
            "UPGRADES",
            "OPERATION",
            "NOTE",
        ],
        &["TENANT ID", "READY"],
    );
    for row in rows {
        table.row(vec![
            row.namespace.clone(),
            row.name.clone(),
            row.application.clone(),
            row.subdomain.clone(),
            row.state.clone(),
            row.current.as_ref().map_or("-".into(), |current| format!("{} ({})", current.semver, current.name)),
            if row.target.is_empty() { "latest".into() } else { row.target.clone() },
            row.strategy.clone(),
            row.operation.as_ref().map_or("-".into(), |(kind, state, step)| format!("{kind} {state} {step}")),
            row.blocked.clone().unwrap_or_default(),
            row.object.spec.tenant_id.clone(),
            row.ready.to_string(),
        ]);
    }
    table
}

pub async fn run(cluster: &ClusterTarget, args: &TenantsArgs) -> anyhow::Result<ExitCode> {
    let connection = cluster.connect().await?;
    // `--app NS/NAME` names its namespace; `--app NAME` is looked up in the scope of -n/-A.
    let (scope, app) =
        match args.app.as_deref().map(|app| app.split_once('/').map_or((None, app), |(ns, name)| (Some(ns), name))) {
            Some((Some(namespace), name)) => {
                if let Some(other) = cluster.namespace.as_deref().filter(|other| *other != namespace) {
                    return Err(crate::commands::UsageError(format!(
                        "--app {namespace}/{name} and -n {other} name different namespaces: give one"
                    ))
                    .into());
                }
                (Scope::Namespace(namespace.to_string()), Some(name.to_string()))
            }
            Some((None, name)) => (cluster.scope(&connection), Some(name.to_string())),
            None => (cluster.scope(&connection), None),
        };
    let client = &connection.client;
    let tenants: Vec<Arc<CAPTenant>> = list(client, &scope, "CAPTenant").await?;
    let apps: Vec<Arc<CAPApplication>> = list(client, &scope, "CAPApplication").await?;
    let versions: Vec<Arc<CAPApplicationVersion>> = list(client, &scope, "CAPApplicationVersion").await?;
    let operations: Vec<Arc<CAPTenantOperation>> = list(client, &scope, "CAPTenantOperation").await?;
    if let Some(name) = &app
        && !apps.iter().any(|application| application.metadata.name.as_deref() == Some(name.as_str()))
    {
        anyhow::bail!(
            "there is no CAPApplication {name} in {} (capdeck tenants -A lists the tenants of every application)",
            scope.label()
        );
    }
    let snapshot = readmodel::build(Sources::cap_objects(&apps, &versions, &tenants, &operations));
    let rows: Vec<&TenantRow> =
        snapshot.tenants.iter().filter(|row| app.as_ref().is_none_or(|app| &row.application == app)).collect();
    let table = table(&rows);
    let printable = Printable::list(
        table,
        rows.iter().map(|row| tenant_json(row)).collect(),
        rows.iter().map(|row| format!("{}/{}", row.namespace, row.name)).collect(),
    );
    let text =
        printable.render(&args.output, "tenants").map_err(|error| crate::commands::UsageError(error.to_string()))?;
    let missing =
        if snapshot.tenants.is_empty() { super::batches::missing_namespace(&connection, &scope).await } else { None };
    if rows.is_empty() && matches!(args.output.format, OutputFormat::Table | OutputFormat::Wide) {
        crate::safe_eprintln!(
            "No tenants in {}.{}",
            scope.label(),
            missing.map(|note| format!(" {note}")).unwrap_or_default()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(note) = missing {
        crate::safe_eprintln!("note: {note}");
    }
    crate::output::print(&text)?;
    Ok(ExitCode::SUCCESS)
}
