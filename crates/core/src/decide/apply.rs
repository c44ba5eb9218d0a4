//! Writing a decision into the batch's status: the part of its effects that is data.

use super::*;

/// Write a decision into the status (the part of its effects that is data).
// A table, one arm per `Decision`: read side by side, the arms show which variant writes which
// phase and reason; the longer ones are functions of their own below.
pub fn apply(decision: &Decision, status: &mut RotationBatchStatus, now: Timestamp) {
    if !matches!(decision, Decision::Wait { .. }) {
        status.waiting_until = None;
    }
    match decision {
        Decision::Finish(outcome) => {
            finish(status, outcome.phase.clone(), &outcome.reason, outcome.message.clone(), now)
        }
        Decision::Cancel { message, still_rolling } => cancel(status, message, *still_rolling, now),
        Decision::Drain => {}
        Decision::Hold { message } => {
            status.phase = BatchPhase::Held;
            set_condition(status, false, &ReadyReason::Held, message.clone(), now);
        }
        Decision::Halt { message } => {
            status.halted_at.get_or_insert(Time(now));
            status.phase = BatchPhase::Held;
            set_condition(status, false, &ReadyReason::RolloutFailureGuard, message.clone(), now);
        }
        Decision::Resume { message } => {
            status.phase = BatchPhase::RollingOut;
            set_condition(status, false, &ReadyReason::Released, message.clone(), now);
        }
        Decision::Collect { until } => {
            status.phase = BatchPhase::Collecting;
            let message = format!("collecting rotations until {}", status::format_time(*until));
            set_condition(status, false, &ReadyReason::WindowOpen, message, now);
            progress_summary(status);
        }
        Decision::Evaluate(evaluation) => apply_evaluation(evaluation, status, now),
        Decision::AwaitApproval => {
            status.phase = BatchPhase::AwaitingApproval;
            // Released while it waited: the condition no longer says held.
            if condition_reason(status) == Some(ReadyReason::Held) {
                let message = "the hold was lifted; waiting for an approval".to_string();
                set_condition(status, false, &ReadyReason::AwaitingApproval, message, now);
            }
        }
        Decision::Escalate { reason, message } => {
            status.phase = BatchPhase::AwaitingApproval;
            set_condition(status, false, reason, message.clone(), now);
        }
        Decision::Wait { reason, message, until, forget, planned } => {
            if *forget {
                forget_evaluation(status);
            }
            keep_plan(status, planned.as_ref(), now);
            status.phase = BatchPhase::Waiting;
            status.waiting_until = Some(Time(*until));
            set_condition(status, false, reason, message.clone(), now);
        }
        Decision::WindowUnreadable { message, forget, planned } => {
            if *forget {
                forget_evaluation(status);
            }
            keep_plan(status, planned.as_ref(), now);
            status.phase = BatchPhase::Held;
            set_condition(status, false, &ReadyReason::ChangeWindowUnreadable, message.clone(), now);
        }
        Decision::Start(start) => begin(status, start, now),
        Decision::Roll => roll(status, now),
        Decision::RollOn { reason, message, .. } => {
            status.phase = BatchPhase::RollingOut;
            set_condition(status, false, reason, message.clone(), now);
        }
        Decision::Retry { message, at } => retry(status, message, at, now),
        Decision::NothingToRetry { at } => status.retried_at = Some(at.clone()),
        // The writes come first (`Reconciler::undo`); it ends the batch.
        Decision::Undo { message } => set_condition(status, false, &ReadyReason::Undone, message.clone(), now),
    }
}

/// Cancelled: nothing queued starts; the batch ends once nothing rolls any more.
fn cancel(status: &mut RotationBatchStatus, message: &str, still_rolling: usize, now: Timestamp) {
    for deployment in status.deployments.iter_mut().filter(|d| is_queued(d)) {
        deployment.message = Some("not started: the batch was cancelled".into());
    }
    if still_rolling > 0 {
        set_condition(status, false, &ReadyReason::Cancelled, message.to_string(), now);
    } else {
        finish(status, BatchPhase::Cancelled, &ReadyReason::Cancelled, message.to_string(), now);
    }
}

/// Retried: the Deployments that may be retried are queued again and the batch rolls on.
fn retry(status: &mut RotationBatchStatus, message: &str, at: &Time, now: Timestamp) {
    for deployment in status.deployments.iter_mut().filter(|d| d.retriable()) {
        deployment.state = Some(DeploymentRolloutState::Queued);
        // One the batch pointed already is restarted again; one it never reached starts.
        deployment.retried_at = deployment.vcap_secret.as_ref().map(|_| at.clone());
        deployment.message = Some("queued: retried".into());
    }
    status.phase = BatchPhase::RollingOut;
    status.completed_at = None;
    status.halted_at = None;
    status.retried_at = Some(at.clone());
    status.rollout_started_at.get_or_insert(Time(now));
    progress_summary(status);
    set_condition(status, false, &ReadyReason::Retried, message.to_string(), now);
}

/// An evaluation's effect: the record is the plan now, then its gate.
fn apply_evaluation(evaluation: &Evaluation, status: &mut RotationBatchStatus, now: Timestamp) {
    status.deployments = evaluation.deployments.clone();
    status.tenants = Some(evaluation.tenants);
    // Decided: the record is the plan now (a batch that waits again plans afresh); an
    // approval taken back keeps what it asks about, stamped now, until the batch starts.
    status.planned = match &evaluation.void_approval {
        Some(key) => Some(PlannedRollout {
            at: Time(now),
            deployments: evaluation.deployments.clone(),
            tenants: evaluation.tenants,
            taken_back: Some(key.clone()),
        }),
        // What was taken back stays so until the batch starts or ends.
        None => status.planned.take().filter(|planned| planned.taken_back.is_some()),
    };
    progress_summary(status);
    match &evaluation.gate {
        Gate::Finish(outcome) => finish(status, outcome.phase.clone(), &outcome.reason, outcome.message.clone(), now),
        Gate::AwaitApproval { reason, message } => {
            status.phase = BatchPhase::AwaitingApproval;
            set_condition(status, false, reason, message.clone(), now);
        }
        Gate::Start(start) => begin(status, start, now),
    }
}

/// Rolling on: a hold lifted, or the failure guard no longer holding.
fn roll(status: &mut RotationBatchStatus, now: Timestamp) {
    status.phase = BatchPhase::RollingOut;
    match condition_reason(status) {
        Some(ReadyReason::Held) => {
            set_condition(status, false, &ReadyReason::Released, "the hold was lifted; rolling out".into(), now)
        }
        // Halted, and the guard no longer holds it: what failed completed after all, or
        // stalled with nothing queued (the batch ends once the others are done).
        Some(ReadyReason::RolloutFailureGuard) => {
            status.halted_at = None;
            let failed: Vec<&str> = status
                .deployments
                .iter()
                .filter(|d| {
                    matches!(
                        d.state,
                        Some(
                            DeploymentRolloutState::Stalled
                                | DeploymentRolloutState::Failed
                                | DeploymentRolloutState::Failing
                        )
                    )
                })
                .map(|d| d.name.as_str())
                .collect();
            let message = if failed.is_empty() {
                "what halted the batch completed after all; rolling out".to_string()
            } else {
                format!("{} did not roll out; the batch ends once the others are done", failed.join(", "))
            };
            set_condition(status, false, &ReadyReason::RollingOut, message, now);
        }
        _ => {}
    }
}

/// Keep the plan made when the window ended (a batch waiting before its rollout).
fn keep_plan(status: &mut RotationBatchStatus, planned: Option<&Planned>, now: Timestamp) {
    if let Some(planned) = planned {
        status.planned = Some(PlannedRollout {
            at: Time(now),
            deployments: planned.deployments.clone(),
            tenants: planned.tenants,
            taken_back: None,
        });
    }
}

/// A batch that waits before its rollout is evaluated again when it may start (the plan, the
/// storm guard and the policy of that moment), not with what was planned before it waited.
fn forget_evaluation(status: &mut RotationBatchStatus) {
    if status.rollout_started_at.is_none() {
        status.deployments.clear();
        status.tenants = None;
        status.progress = None;
    }
}

fn begin(status: &mut RotationBatchStatus, start: &Start, now: Timestamp) {
    status.phase = BatchPhase::RollingOut;
    status.planned = None;
    status.rollout_started_at = Some(Time(now));
    set_condition(status, false, &start.reason, start.message.clone(), now);
}

/// How a rollout ends once every Deployment is done (`None` while some are not).
pub fn rollout_outcome(deployments: &[BatchDeployment]) -> Option<Outcome> {
    if !deployments.iter().all(is_done) {
        return None;
    }
    let restarted_in = |state: DeploymentRolloutState| {
        deployments.iter().filter(|d| d.action == DeploymentAction::Restart && d.state.as_ref() == Some(&state)).count()
    };
    let stalled = restarted_in(DeploymentRolloutState::Stalled);
    let failed = restarted_in(DeploymentRolloutState::Failed);
    let restarted = restarted_in(DeploymentRolloutState::Complete);
    let problems = deployments.iter().filter(|d| d.action == DeploymentAction::Problem).count();
    if stalled + failed + problems == 0 {
        return Some(Outcome {
            phase: BatchPhase::Succeeded,
            reason: ReadyReason::RolloutComplete,
            message: format!("{} rolled out with the new credentials", count(restarted, "Deployment")),
        });
    }
    let reason = if stalled > 0 {
        ReadyReason::ProgressDeadlineExceeded
    } else if failed > 0 {
        ReadyReason::WriteFailed
    } else {
        ReadyReason::InvalidSecret
    };
    Some(Outcome {
        phase: BatchPhase::Failed,
        reason,
        message: format!(
            "{restarted} rolled out, {stalled} stalled, {failed} failed, {problems} could not be planned; previous VCAP Secrets of unfinished Deployments were kept"
        ),
    })
}

/// Skip metrics of an evaluation: why a Deployment of the batch is not restarted.
pub fn skip_reasons(deployments: &[BatchDeployment]) -> impl Iterator<Item = &'static str> + '_ {
    deployments.iter().filter_map(|deployment| match deployment.action {
        DeploymentAction::Unchanged if deployment.message.as_deref() == Some(MISSING_DEPLOYMENT) => Some("missing"),
        DeploymentAction::Unchanged => Some("unchanged"),
        DeploymentAction::Problem => Some("problem"),
        DeploymentAction::NotOwned => Some("not owned"),
        DeploymentAction::Restart | DeploymentAction::Other(_) => None,
    })
}
