//! The rollouts view's rows: one per Deployment of a batch.

use std::sync::Arc;

use kube::ResourceExt;

use crate::api::ANNOTATION_ROLLED_BY;
use crate::api::DeploymentView;
use crate::api::rollout_progress::rollout_progress;
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
    /// Queued again by a retry: the live Deployment shows the previous restart until it starts.
    pub retried: bool,
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
                retried: d.retried_at.is_some(),
            })
        })
        .collect()
}

/// The live Deployment's rollout in the rows of Deployments still queued or rolling: the engine
/// writes a rolling batch's progress (a start after waiting its turn, replica counts) at most
/// every minute, the Deployment shows it now. Only a Deployment the row's batch pointed at its new
/// Secret (its `capdeck.dev/rotation-batch` annotation) is read; a retried one waits for its restart.
pub(super) fn overlay_live(rows: &mut [RolloutRow], live: impl Fn(&str, &str) -> Option<Arc<DeploymentView>>) {
    use DeploymentRolloutState::{Queued, Rolling};
    let open = |row: &RolloutRow| {
        row.action == DeploymentAction::Restart
            && match row.state {
                Some(Rolling) => true,
                Some(Queued) => !row.retried,
                _ => false,
            }
    };
    for row in rows.iter_mut().filter(|row| open(row)) {
        let Some(deployment) = live(&row.namespace, &row.deployment) else { continue };
        if deployment.annotations().get(ANNOTATION_ROLLED_BY) != Some(&row.batch) {
            continue;
        }
        let progress = rollout_progress(&deployment);
        row.state = Some(Rolling);
        (row.replicas, row.updated, row.available) = (progress.replicas, progress.updated, progress.available);
        row.message = progress.message;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn row(deployment: &str, state: DeploymentRolloutState, retried: bool) -> RolloutRow {
        RolloutRow {
            namespace: "ns".into(),
            application: "app".into(),
            batch: "b".into(),
            deployment: deployment.into(),
            version: "v".into(),
            action: DeploymentAction::Restart,
            state: Some(state),
            replicas: 0,
            updated: 0,
            available: 0,
            message: "as the batch says".into(),
            retried,
        }
    }

    fn live(batch: &str) -> Arc<DeploymentView> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "srv", "namespace": "ns", "generation": 2,
                    "annotations": {ANNOTATION_ROLLED_BY: batch}},
                "spec": {"replicas": 2},
                "status": {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 2}
            }))
            .expect("deployment"),
        )
    }

    #[test]
    fn queued_and_rolling_rows_show_the_live_rollout_of_their_own_batch() {
        use DeploymentRolloutState::{Complete, Queued, Rolling};
        let cases = [
            (row("srv", Queued, false), "b", Some(Rolling), 1, "started after waiting its turn"),
            (row("srv", Rolling, false), "b", Some(Rolling), 1, "replica counts"),
            (row("srv", Queued, true), "b", Some(Queued), 0, "a retry not restarted yet"),
            (row("srv", Queued, false), "other", Some(Queued), 0, "pointed by another batch"),
            (row("srv", Complete, false), "b", Some(Complete), 0, "done: as the batch says"),
            (row("gone", Rolling, false), "b", Some(Rolling), 0, "no live Deployment"),
        ];
        for (row, rolled_by, state, updated, what) in cases {
            let mut rows = [row];
            overlay_live(&mut rows, |_, name| (name == "srv").then(|| live(rolled_by)));
            assert_eq!((rows[0].state.clone(), rows[0].updated), (state, updated), "{what}");
            if updated == 1 {
                assert_eq!((rows[0].replicas, rows[0].available), (2, 2), "{what}");
                assert_ne!(rows[0].message, "as the batch says", "{what}");
            }
        }
    }
}
