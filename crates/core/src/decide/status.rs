//! Small pure edits of a batch's status, shared by the decision and the rollout effects.

use std::borrow::Cow;
use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::api::common::{Condition, ConditionStatus, MAX_REASON, READY, bounded};
use crate::api::rotation_batch::{BatchDeployment, DeploymentAction, DeploymentRolloutState, ReadyReason, UserAction};
use crate::api::{BatchPhase, RotationBatchStatus};
use crate::plan::{AppPlan, PlanAction, ProblemKind};

pub fn format_time(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The longest condition message (characters): a reason quoted whole, with room for its context.
pub const MAX_CONDITION_MESSAGE: usize = MAX_REASON + 256;

/// Set the Ready condition (its message bounded, control characters replaced); its transition time moves only when status or reason change.
pub fn set_condition(
    status: &mut RotationBatchStatus,
    ready: bool,
    reason: &ReadyReason,
    message: String,
    now: Timestamp,
) {
    // Messages quote spec text (reasons, names): bounded, whatever an old object holds.
    let message = match bounded(&message, MAX_CONDITION_MESSAGE) {
        Cow::Borrowed(_) => message,
        Cow::Owned(text) => text,
    };
    let condition_status = if ready { ConditionStatus::True } else { ConditionStatus::False };
    let existing = status.conditions.iter_mut().find(|condition| condition.type_ == READY);
    match existing {
        Some(condition) => {
            if condition.status != condition_status || condition.reason != reason.as_str() {
                condition.last_transition_time = Some(Time(now));
            }
            condition.status = condition_status;
            condition.reason = reason.to_string();
            condition.message = message;
        }
        None => status.conditions.push(Condition {
            type_: READY.into(),
            status: condition_status,
            observed_generation: None,
            last_transition_time: Some(Time(now)),
            reason: reason.to_string(),
            message,
        }),
    }
}

pub fn condition_reason(status: &RotationBatchStatus) -> Option<ReadyReason> {
    ready_condition(status).map(|condition| ReadyReason::from(condition.reason.as_str()))
}

pub fn ready_condition(status: &RotationBatchStatus) -> Option<&Condition> {
    status.conditions.iter().find(|condition| condition.type_ == READY)
}

pub fn progress_summary(status: &mut RotationBatchStatus) {
    let restarts: Vec<&BatchDeployment> =
        status.deployments.iter().filter(|d| d.action == DeploymentAction::Restart).collect();
    let done = restarts.iter().filter(|d| d.state == Some(DeploymentRolloutState::Complete)).count();
    status.progress = Some(format!("{done}/{}", restarts.len()));
}

/// End the batch in a terminal phase.
pub fn finish(status: &mut RotationBatchStatus, phase: BatchPhase, why: &ReadyReason, message: String, now: Timestamp) {
    let success = matches!(phase, BatchPhase::Succeeded | BatchPhase::NoChange);
    status.phase = phase;
    status.completed_at = Some(Time(now));
    // Ended: nothing is planned any more.
    status.planned = None;
    progress_summary(status);
    set_condition(status, success, why, message, now);
}

pub fn user_action_text(action: &UserAction, verb: &str) -> String {
    action.text(verb)
}

/// Rolling right now (counts against --max-parallel-rollouts).
/// Rolling in Kubernetes: `Rolling`, or `Failing` (its new Pods fail, but it has not stalled).
pub fn is_active(deployment: &BatchDeployment) -> bool {
    deployment.action == DeploymentAction::Restart
        && matches!(deployment.state, Some(DeploymentRolloutState::Rolling | DeploymentRolloutState::Failing))
}

pub fn is_queued(deployment: &BatchDeployment) -> bool {
    deployment.action == DeploymentAction::Restart && deployment.state == Some(DeploymentRolloutState::Queued)
}

/// Nothing more will happen to it in this batch.
pub fn is_done(deployment: &BatchDeployment) -> bool {
    deployment.action != DeploymentAction::Restart
        || matches!(
            deployment.state,
            Some(DeploymentRolloutState::Complete | DeploymentRolloutState::Stalled | DeploymentRolloutState::Failed)
        )
}

/// The batch's Deployments from a plan: restarts queued, unchanged and missing ones complete,
/// broken ones as problems.
pub fn batch_deployments(plan: &AppPlan) -> Vec<BatchDeployment> {
    let mut out: Vec<BatchDeployment> = plan
        .deployments
        .iter()
        .map(|planned| {
            let (action, state, message) = match planned.action {
                PlanAction::Restart => {
                    (DeploymentAction::Restart, DeploymentRolloutState::Queued, planned.reason.clone())
                }
                PlanAction::Unchanged => {
                    (DeploymentAction::Unchanged, DeploymentRolloutState::Complete, planned.reason.clone())
                }
                PlanAction::Missing => {
                    (DeploymentAction::Unchanged, DeploymentRolloutState::Complete, MISSING_DEPLOYMENT.into())
                }
                PlanAction::NotOwned => {
                    (DeploymentAction::NotOwned, DeploymentRolloutState::Complete, planned.reason.clone())
                }
            };
            BatchDeployment {
                name: planned.deployment.clone(),
                version: planned.version.clone(),
                workload: planned.workload.clone(),
                action,
                vcap_sha256: Some(planned.payload.sha256()),
                previous_vcap_secret: planned.current_secret.clone().filter(|_| planned.action == PlanAction::Restart),
                state: Some(state),
                message: Some(message),
                ..BatchDeployment::default()
            }
        })
        .collect();
    let mut seen: BTreeSet<String> = out.iter().map(|d| d.name.clone()).collect();
    for problem in &plan.problems {
        let Some(name) = &problem.deployment else { continue };
        if !seen.insert(name.clone()) || problem.kind == ProblemKind::UnknownService {
            continue;
        }
        out.push(BatchDeployment {
            name: name.clone(),
            action: DeploymentAction::Problem,
            state: Some(DeploymentRolloutState::Failed),
            message: Some(problem.message.clone()),
            ..BatchDeployment::default()
        });
    }
    out
}

/// The message of a Deployment the plan found missing (also the metric's "missing" label).
pub const MISSING_DEPLOYMENT: &str = "deployment does not exist";
