//! The rollouts view's rows: one per Deployment of a batch.

use crate::api::rotation_batch::{DeploymentAction, DeploymentRolloutState};

use super::BatchRow;

#[derive(Clone, Debug)]
pub struct RolloutRow {
    pub namespace: String,
    pub application: String,
    pub batch: String,
    pub deployment: String,
    pub version: String,
    pub action: DeploymentAction,
    pub state: Option<DeploymentRolloutState>,
    pub replicas: i32,
    pub updated: i32,
    pub available: i32,
    pub message: String,
}

pub(super) fn rollout_rows(batch_rows: &[BatchRow]) -> Vec<RolloutRow> {
    batch_rows
        .iter()
        .flat_map(|row| {
            let status = row.object.status.clone().unwrap_or_default();
            status.deployments.into_iter().map(move |d| RolloutRow {
                namespace: row.namespace.clone(),
                application: row.application.clone(),
                batch: row.name.clone(),
                deployment: d.name,
                version: d.version,
                action: d.action,
                state: d.state,
                replicas: d.replicas.unwrap_or(0),
                updated: d.updated_replicas.unwrap_or(0),
                available: d.available_replicas.unwrap_or(0),
                message: d.message.unwrap_or_default(),
            })
        })
        .collect()
}
