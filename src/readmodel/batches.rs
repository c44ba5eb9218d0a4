//! The batches view's rows: each RotationBatch with its phase, progress and credential deadline.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::rotation_batch::DeploymentAction;
use crate::api::service_binding::ServiceBinding;
use crate::api::{BatchPhase, RotationBatch};

use super::{Index, key};

#[derive(Clone, Debug)]
pub struct BatchRow {
    pub namespace: String,
    pub name: String,
    pub application: String,
    pub phase: BatchPhase,
    pub reason: String,
    pub message: String,
    pub window_end: Timestamp,
    pub secrets: Vec<String>,
    pub approval: String,
    pub progress: String,
    pub tenants: Option<u32>,
    /// Deployments to restart: counted from the status once evaluated, else the application's
    /// Deployments of versions in use (an upper bound while the window is open).
    pub deployments: Deployments,
    pub created: Option<Timestamp>,
    /// An open batch's deadline: the earliest revocation of its Secrets' old credentials
    /// (ServiceBindings; `None` when unknown).
    pub old_credentials_revocable: Option<Timestamp>,
    pub object: Arc<RotationBatch>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deployments {
    Evaluated(usize),
    AtMost(usize),
}

impl BatchRow {
    /// `4 deployments, 12 tenants`, or `≤4 deployments` before the batch is evaluated.
    pub fn blast_radius(&self) -> String {
        let deployments = match self.deployments {
            Deployments::Evaluated(n) => crate::output::count(n, "deployment"),
            Deployments::AtMost(n) => format!("≤{}", crate::output::count(n, "deployment")),
        };
        match self.tenants {
            Some(tenants) => format!("{deployments}, {}", crate::output::count(tenants as usize, "tenant")),
            None => deployments,
        }
    }
}

pub(super) fn batch_rows(
    batches: &[Arc<RotationBatch>],
    index: &Index,
    service_bindings: Option<&[ServiceBinding]>,
) -> Vec<BatchRow> {
    let mut batch_rows: Vec<BatchRow> = batches
        .iter()
        .map(|batch| {
            let status = batch.status.clone().unwrap_or_default();
            let condition = status.conditions.iter().find(|c| c.type_ == "Ready");
            BatchRow {
                namespace: batch.namespace().unwrap_or_default(),
                name: batch.name_any(),
                application: batch.spec.application.clone(),
                phase: batch.phase(),
                reason: condition.map(|c| c.reason.clone()).unwrap_or_default(),
                message: condition.map(|c| c.message.clone()).unwrap_or_default(),
                window_end: batch.spec.window_end.0,
                secrets: batch.spec.secrets.iter().map(|s| s.name.clone()).collect(),
                approval: batch.approval_text(),
                progress: batch.progress_text(),
                tenants: status.tenants,
                deployments: if status.deployments.is_empty() {
                    Deployments::AtMost(index.deployments_in_use(&key(batch.namespace(), &batch.spec.application)))
                } else {
                    Deployments::Evaluated(
                        status.deployments.iter().filter(|d| d.action == DeploymentAction::Restart).count(),
                    )
                },
                created: batch.metadata.creation_timestamp.as_ref().map(|t| t.0),
                old_credentials_revocable: service_bindings
                    .filter(|_| !batch.is_terminal())
                    .and_then(|bindings| crate::credentials::batch_revocation(bindings, batch)),
                object: batch.clone(),
            }
        })
        .collect();
    // Open batches first, newest first.
    batch_rows.sort_by(|a, b| {
        a.phase
            .is_terminal()
            .cmp(&b.phase.is_terminal())
            .then_with(|| b.window_end.cmp(&a.window_end))
            .then_with(|| a.name.cmp(&b.name))
    });
    batch_rows
}
