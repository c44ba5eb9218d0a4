//! Reading one context into fleet rows: a few LISTs (RotationBatches, CAPApplications,
//! ServiceBindings), a GET per consumed binding Secret and one of the engine's Lease, all under
//! one timeout. `rows` is the pure part.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::ListParams;

use super::{CredentialRisk, FleetRow, OpenBatch, RowState};
use crate::api::rotation_batch::DeploymentRolloutState;
use crate::api::service_binding::ServiceBinding;
use crate::api::{BatchPhase, CAPApplication, RotationBatch};
use crate::cluster::{ClusterArgs, Scope, describe_error};
use crate::credentials::{Timing, Verdict};
use crate::manifest::Manifests;
use crate::plan::SecretLookup;

/// How the fleet is read.
#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// Each context's own limit (connect and every request).
    pub timeout: Duration,
    /// The engine's window and expected rollout, for the credential verdicts.
    pub timing: Timing,
    /// The engine's Lease: its namespace (`None`: each context's default namespace) and name.
    pub lease_namespace: Option<String>,
    pub lease_name: String,
    /// `-n`: one namespace in every context; `None`: all namespaces.
    pub namespace: Option<String>,
}

impl Default for FleetOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            timing: Timing {
                window: crate::engine::config::DEFAULT_ROLLOUT_DELAY,
                expected_rollout: crate::engine::config::DEFAULT_EXPECTED_ROLLOUT,
            },
            lease_namespace: None,
            lease_name: crate::engine::config::LeaseSettings::default().name,
            namespace: None,
        }
    }
}

/// Why a context could not be read.
struct Unread(RowState, String);

impl Unread {
    fn from_kube(what: &str, error: &kube::Error) -> Self {
        let state = match error {
            kube::Error::Api(status) if matches!(status.code, 401 | 403) => RowState::Forbidden,
            _ => RowState::Unreachable,
        };
        Self(state, format!("{what}: {}", describe_error(error)))
    }
}

/// Read every context concurrently; one row or more per context, in the order given.
pub async fn read_fleet(cluster: &ClusterArgs, contexts: &[String], options: &FleetOptions) -> Vec<FleetRow> {
    let reads = contexts.iter().map(|context| read_one(cluster, context, options));
    futures::future::join_all(reads).await.into_iter().flatten().collect()
}

async fn read_one(cluster: &ClusterArgs, context: &str, options: &FleetOptions) -> Vec<FleetRow> {
    match tokio::time::timeout(options.timeout, read_context(cluster, context, options)).await {
        Ok(Ok(rows)) => rows,
        Ok(Err(Unread(state, why))) => vec![FleetRow::problem(context, state, why)],
        Err(_) => vec![FleetRow::problem(
            context,
            RowState::Unreachable,
            format!(
                "no answer within {} (is the cluster up? a longer --timeout waits more)",
                crate::output::human_duration(i64::try_from(options.timeout.as_secs()).unwrap_or(i64::MAX))
            ),
        )],
    }
}

async fn read_context(cluster: &ClusterArgs, context: &str, options: &FleetOptions) -> Result<Vec<FleetRow>, Unread> {
    let mut cluster = cluster.clone();
    cluster.context = Some(context.to_string());
    let connection = cluster.connect().await.map_err(|error| Unread(RowState::Unreachable, error.to_string()))?;
    let client = &connection.client;
    let scope = options.namespace.clone().map_or(Scope::All, Scope::Namespace);
    let batches_api: kube::Api<RotationBatch> = scope.api(client);
    let apps_api: kube::Api<CAPApplication> = scope.api(client);
    let params = ListParams::default();
    let (batches, apps, bindings) = tokio::join!(
        batches_api.list(&params),
        apps_api.list(&params),
        crate::cluster::list_service_bindings(client, &scope),
    );
    let batches: Vec<Arc<RotationBatch>> = match batches {
        Ok(list) => list.items.into_iter().map(Arc::new).collect(),
        // No RotationBatch kind: capdeck never ran here, so nothing of it is open.
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(error) => return Err(Unread::from_kube("cannot list RotationBatches", &error)),
    };
    let applications: Vec<Arc<CAPApplication>> = match apps {
        Ok(list) => list.items.into_iter().map(Arc::new).collect(),
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(error) => return Err(Unread::from_kube("cannot list CAPApplications", &error)),
    };
    // Without ServiceBindings the verdicts say "unknown"; that is not a reason to drop the row.
    let bindings = bindings.unwrap_or_default();
    let secrets = binding_secrets(client, &applications).await;
    let lease = crate::engine::config::LeaseSettings {
        namespace: options.lease_namespace.clone().unwrap_or_else(|| connection.default_namespace.clone()),
        name: options.lease_name.clone(),
        ..crate::engine::config::LeaseSettings::default()
    };
    let leader = match crate::engine::lease::holder(client, &lease).await {
        Ok(holder) => leader_text(&holder),
        Err(error) => format!("unknown ({error})"),
    };
    let manifests = Manifests {
        applications,
        batches,
        secrets,
        service_bindings: bindings.clone().unwrap_or_default(),
        ..Manifests::default()
    };
    let inputs = Inputs {
        manifests: &manifests,
        bindings_known: bindings.is_some(),
        leader,
        now: Timestamp::now(),
        timing: options.timing,
    };
    Ok(rows(context, &inputs))
}

/// The binding Secrets the applications consume, read concurrently (a few at a time).
async fn binding_secrets(
    client: &kube::Client,
    applications: &[Arc<CAPApplication>],
) -> std::collections::HashMap<(String, String), SecretLookup> {
    let wanted: std::collections::BTreeSet<(String, String)> = applications
        .iter()
        .flat_map(|app| {
            let namespace = app.namespace().unwrap_or_default();
            app.spec.btp.services.iter().map(move |service| (namespace.clone(), service.secret.clone()))
        })
        .collect();
    futures::stream::iter(wanted)
        .map(|(namespace, name)| async move {
            let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), &namespace);
            let lookup = match api.get_opt(&name).await {
                Ok(Some(secret)) => SecretLookup::Found(Arc::new(secret)),
                Ok(None) => SecretLookup::Missing,
                Err(error) => SecretLookup::Malformed(format!("cannot be read: {}", describe_error(&error))),
            };
            ((namespace, name), lookup)
        })
        .buffer_unordered(8)
        .collect()
        .await
}

fn leader_text(holder: &crate::engine::lease::Holder) -> String {
    use crate::engine::lease::Holder;
    match holder {
        Holder::Renewing { identity, .. } => identity.clone(),
        Holder::Expired { identity, renewed_ago } => format!("no leader ({identity} expired {renewed_ago}s ago)"),
        Holder::Nobody => "no leader".into(),
    }
}

/// What one context's rows are made of.
pub(super) struct Inputs<'a> {
    pub manifests: &'a Manifests,
    pub bindings_known: bool,
    pub leader: String,
    pub now: Timestamp,
    pub timing: Timing,
}

/// The row of `namespace`, made when first needed.
fn row_in<'m>(
    rows: &'m mut BTreeMap<String, FleetRow>,
    context: &str,
    namespace: &str,
    leader: &str,
) -> &'m mut FleetRow {
    rows.entry(namespace.to_string()).or_insert_with(|| FleetRow {
        context: context.to_string(),
        namespace: Some(namespace.to_string()),
        state: RowState::Open,
        why: None,
        batches: Vec::new(),
        credentials: Vec::new(),
        stalled: Vec::new(),
        leader: leader.to_string(),
    })
}

/// The rows of one context that was read: one per namespace with something open, or one
/// `clear` row.
pub(super) fn rows(context: &str, inputs: &Inputs<'_>) -> Vec<FleetRow> {
    let manifests = inputs.manifests;
    let mut by_namespace: BTreeMap<String, FleetRow> = BTreeMap::new();
    let leader = inputs.leader.as_str();
    let bindings: Option<&[ServiceBinding]> = inputs.bindings_known.then_some(manifests.service_bindings.as_slice());
    for batch in &manifests.batches {
        let namespace = batch.namespace().unwrap_or_default();
        let phase = batch.phase();
        let newest_of_app = !manifests.batches.iter().any(|other| {
            other.namespace() == batch.namespace()
                && other.spec.application == batch.spec.application
                && other.metadata.creation_timestamp > batch.metadata.creation_timestamp
        });
        let waits = matches!(phase, BatchPhase::AwaitingApproval | BatchPhase::Held)
            || (phase == BatchPhase::Failed && newest_of_app);
        if waits {
            let reason = batch
                .status
                .as_ref()
                .and_then(|status| status.conditions.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.reason.clone())
                .unwrap_or_default();
            row_in(&mut by_namespace, context, &namespace, leader).batches.push(OpenBatch {
                name: batch.name_any(),
                application: batch.spec.application.clone(),
                phase: phase.to_string(),
                reason,
                window_end: batch.spec.window_end.0,
                old_credentials_revocable: bindings
                    .filter(|_| !batch.is_terminal())
                    .and_then(|bindings| crate::credentials::batch_revocation(bindings, batch)),
            });
        }
        if !batch.is_terminal() {
            let stalled = batch.status.iter().flat_map(|status| &status.deployments).filter(|d| {
                matches!(
                    d.state,
                    Some(
                        DeploymentRolloutState::Stalled
                            | DeploymentRolloutState::Failing
                            | DeploymentRolloutState::Failed
                    )
                )
            });
            let names: Vec<String> = stalled.map(|d| format!("{}/{}", batch.name_any(), d.name)).collect();
            if !names.is_empty() {
                row_in(&mut by_namespace, context, &namespace, leader).stalled.extend(names);
            }
        }
    }
    let overview = crate::credentials::overview(&crate::credentials::Inputs {
        applications: &manifests.applications,
        secrets: manifests,
        bindings,
        batches: &manifests.batches,
        now: inputs.now,
        timing: inputs.timing,
    });
    for report in overview.credentials {
        if matches!(report.verdict, Verdict::AtRisk | Verdict::Unsafe) {
            row_in(&mut by_namespace, context, &report.namespace, leader).credentials.push(CredentialRisk {
                secret: report.secret.clone(),
                verdict: report.verdict.as_str().to_string(),
                reason: report.reasons.last().cloned().unwrap_or_default(),
            });
        }
    }
    if by_namespace.is_empty() {
        let mut clear = FleetRow::problem(context, RowState::Clear, String::new());
        clear.why = None;
        clear.leader = inputs.leader.clone();
        return vec![clear];
    }
    by_namespace.into_values().collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("time")
    }

    fn batch(namespace: &str, name: &str, app: &str, created: i64, status: serde_json::Value) -> Arc<RotationBatch> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
                "metadata": {"name": name, "namespace": namespace, "creationTimestamp": at(created).to_string()},
                "spec": {"application": app, "windowEnd": at(created + 60).to_string()},
                "status": status,
            }))
            .expect("batch"),
        )
    }

    fn inputs(manifests: &Manifests) -> Inputs<'_> {
        Inputs {
            manifests,
            bindings_known: false,
            leader: "engine-a".into(),
            now: at(NOW),
            timing: Timing { window: Duration::from_secs(3600), expected_rollout: Duration::from_secs(900) },
        }
    }

    /// One row per namespace with something open; what is closed or superseded is not open.
    #[test]
    fn rows_per_namespace_with_something_open() {
        let phase = |phase: &str, reason: &str| json!({"phase": phase, "conditions": [{"type": "Ready", "status": "False", "reason": reason}]});
        let rolling = json!({"phase": "RollingOut", "deployments": [
            {"name": "srv", "version": "v1", "workload": "srv", "action": "Restart", "state": "Stalled"},
            {"name": "router", "version": "v1", "workload": "router", "action": "Restart", "state": "Rolling"}]});
        let manifests = Manifests {
            batches: vec![
                batch("shop", "shop-a", "shop", NOW - 100, phase("AwaitingApproval", "ApprovalRequired")),
                batch("shop", "shop-old", "shop", NOW - 9000, phase("Failed", "RolloutFailed")),
                batch("hr", "hr-a", "hr", NOW - 50, phase("Held", "RolloutFailureGuard")),
                batch("hr", "hr-b", "other", NOW - 50, rolling),
                batch("travel", "travel-a", "travel", NOW - 50, phase("Failed", "RolloutFailed")),
                batch("done", "done-a", "done", NOW - 50, phase("Succeeded", "Succeeded")),
            ],
            ..Manifests::default()
        };
        let rows = rows("prod", &inputs(&manifests));
        let summary: Vec<(String, String, usize)> =
            rows.iter().map(|row| (row.namespace_text().to_string(), row.summary(), row.stalled.len())).collect();
        assert_eq!(
            summary,
            vec![
                ("hr".to_string(), "1 held".to_string(), 1),
                ("shop".to_string(), "1 awaiting".to_string(), 0),
                ("travel".to_string(), "1 failed".to_string(), 0),
            ],
            "shop-old failed before shop-a opened: not open; done-a succeeded"
        );
        assert_eq!(rows[0].stalled, vec!["hr-b/srv".to_string()]);
        assert!(rows.iter().all(|row| row.leader == "engine-a" && row.context == "prod"));
    }

    #[test]
    fn a_context_with_nothing_open_is_one_clear_row() {
        let manifests = Manifests::default();
        let rows = rows("staging", &inputs(&manifests));
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].state, rows[0].namespace.as_deref(), rows[0].leader.as_str()),
            (RowState::Clear, None, "engine-a")
        );
    }
}
