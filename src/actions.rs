//! What people do to a batch — approve, force, hold, release, cancel, retry, undo — written to its spec
//! with the user from SelfSubjectReview and a resourceVersion precondition, so two approvers
//! never clobber each other. Used by the subcommands and the console.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::api::rotation_batch::attribution::{Attributed, attribution_check};
use crate::api::rotation_batch::state::HeldBy;
use crate::api::rotation_batch::{Approval, BatchDeployment, BatchState, UserAction};
use crate::api::{BatchPhase, RotationBatch};
use crate::cluster::batch_writer::{BatchWriteError, BatchWriter, Change, Edit, OnConflict, Writer};

pub const FIELD_MANAGER: &str = Writer::Actions.field_manager();

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchAction {
    Approve,
    /// End the window now; with `approve`, also approve in the same write.
    Force {
        approve: bool,
    },
    Hold,
    Release,
    Cancel,
    /// Roll the stalled, failing or failed Deployments of a Failed or halted batch once more; on
    /// an Undone or Cancelled batch, roll its application forward to the current credentials (a
    /// new batch opens for what that batch left on old credentials).
    Retry,
    /// Point the Deployments a Failed or halted batch rolled back at their previous VCAP Secrets.
    Undo,
}

impl BatchAction {
    pub fn verb(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Force { .. } => "force",
            Self::Hold => "hold",
            Self::Release => "release",
            Self::Cancel => "cancel",
            Self::Retry => "retry",
            Self::Undo => "undo",
        }
    }

    /// Why this action makes no sense for the batch right now, if it does not.
    pub fn refusal(self, batch: &RotationBatch) -> Option<String> {
        let phase = batch.phase();
        let name = batch.name_any();
        if matches!(self, Self::Retry | Self::Undo) {
            return after_failure_refusal(self, batch);
        }
        if phase.is_terminal() {
            return Some(format!("batch {name} is {phase}; nothing to {}", self.verb()));
        }
        if batch.spec.cancel.is_some() {
            return Some(format!("batch {name} is being cancelled"));
        }
        match self {
            Self::Approve | Self::Force { approve: true } => {
                // One the engine took back (the plan changed since) may be given again.
                if let Some(by) = batch.spec.approval.as_ref().and_then(|a| a.approved_by.as_ref())
                    && self == Self::Approve
                    && !not_honoured(batch, Attributed::Approval)
                    && !batch.approval_taken_back()
                {
                    return Some(format!("batch {name} is already approved by {by}"));
                }
                if phase == BatchPhase::RollingOut {
                    return Some(format!("batch {name} is already rolling out; nothing to {}", self.verb()));
                }
                None
            }
            // A batch waiting for a change window or a freeze's end may be forced at any time:
            // force overrides windows and freezes (the batch's record says so).
            Self::Force { approve: false } if phase == BatchPhase::Waiting => {
                batch.spec.force.as_ref().map(|force| format!("batch {name} is already forced by {}", force.by))
            }
            Self::Force { approve: false } => {
                let evaluated =
                    batch.status.as_ref().is_some_and(|s| !s.deployments.is_empty() || s.rollout_started_at.is_some());
                (batch.spec.force.is_some() || evaluated).then(|| format!("batch {name}'s window has already ended"))
            }
            Self::Hold => batch
                .spec
                .hold
                .as_ref()
                .filter(|_| !not_honoured(batch, Attributed::Hold))
                .map(|hold| format!("batch {name} is already held by {}", hold.by)),
            Self::Release if batch.spec.hold.is_none() && held_for(batch, HeldBy::UnreadableWindows) => Some(format!(
                "batch {name} is held because its change windows cannot be read, not by a person: fix the \
                 capdeck.dev/change-windows annotation its condition names (capdeck batches -o yaml shows it), or \
                 capdeck force {name} --reason … to roll it now"
            )),
            Self::Release => (batch.spec.hold.is_none() && !halted_by_failure_guard(batch))
                .then(|| format!("batch {name} is not held")),
            Self::Cancel => None,
            Self::Retry | Self::Undo => None,
        }
    }
}

/// An approval or a hold the engine does not honour (not written by capdeck: `kubectl patch`)
/// is no reason to refuse approving or holding: capdeck's write replaces it. Judged from the
/// batch's managedFields when it was read with them, else from the engine's condition.
fn not_honoured(batch: &RotationBatch, field: Attributed) -> bool {
    if batch.metadata.managed_fields.is_some() {
        attribution_check(batch, field).is_err()
    } else {
        batch.attribution_refused(field.condition_type())
    }
}

/// Retry and undo are for a batch that failed: `Failed`, or halted by the failure guard. A retry
/// of an Undone or Cancelled batch rolls its application forward, once.
fn after_failure_refusal(action: BatchAction, batch: &RotationBatch) -> Option<String> {
    let name = batch.name_any();
    let phase = batch.phase();
    if action == BatchAction::Retry && matches!(phase, BatchPhase::Undone | BatchPhase::Cancelled) {
        // A retry from before the undo or the cancel (of the Failed batch it was) is no roll
        // forward: only one made after it is.
        let retry = batch.spec.retry.as_ref().filter(|_| crate::plan::rolled_forward_asked(batch));
        return retry.map(|retry| {
            format!(
                "batch {name} was rolled forward already ({}); the newer batch of {} carries it (capdeck batches -n {})",
                retry.text("retried"),
                batch.spec.application,
                batch.namespace().unwrap_or_default()
            )
        });
    }
    if phase == BatchPhase::Undone {
        return Some(format!("batch {name} is Undone; nothing to {}", action.verb()));
    }
    if batch.spec.undo.is_some() {
        return Some(format!("batch {name} is being undone; nothing to {}", action.verb()));
    }
    if batch.spec.cancel.is_some() {
        return Some(format!("batch {name} is being cancelled"));
    }
    if phase != BatchPhase::Failed && !halted_by_failure_guard(batch) {
        return Some(format!(
            "batch {name} is {phase}; only a Failed batch or one the failure guard halted can be {}",
            if action == BatchAction::Retry { "retried" } else { "undone" }
        ));
    }
    let restarts: Vec<&BatchDeployment> = batch.restarts().collect();
    match action {
        BatchAction::Retry => {
            if let Some(hold) = &batch.spec.hold {
                return Some(format!("batch {name} is held by {}; release it first", hold.by));
            }
            if batch.retry_pending() {
                return Some(format!("batch {name} is already being retried"));
            }
            (!restarts.iter().any(|d| d.retriable())).then(|| {
                format!("batch {name} has no stalled, failing or failed Deployment to retry (capdeck batches -o yaml)")
            })
        }
        _ => (!restarts.iter().any(|d| d.undoable())).then(|| {
            format!(
                "batch {name} has no unfinished Deployment with a previous VCAP Secret to go back to (completed \
                 ones had theirs deleted)"
            )
        }),
    }
}

/// Held by the engine's failure guard (a stalled Deployment), not by a user's hold.
fn halted_by_failure_guard(batch: &RotationBatch) -> bool {
    held_for(batch, HeldBy::FailureGuard)
}

/// Held (the phase) with this Ready reason.
fn held_for(batch: &RotationBatch, why: HeldBy) -> bool {
    batch.state() == BatchState::Held { by: why }
}

#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error("rotation batch {0} not found (capdeck batches -A lists them)")]
    NotFound(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Api(String),
    #[error("the batch kept changing under us (3 conflicts in a row); try again")]
    Conflicts,
}

/// What an action did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionReport {
    pub namespace: String,
    pub batch: String,
    pub action: BatchAction,
    pub phase_before: BatchPhase,
    pub by: String,
    pub summary: String,
}

fn user_action(by: &str, now: Timestamp, reason: Option<&str>) -> UserAction {
    UserAction {
        by: by.into(),
        at: Time(now),
        reason: reason.filter(|r| !r.trim().is_empty()).map(|r| r.trim().to_string()),
    }
}

fn spec_patch(batch: &RotationBatch, action: BatchAction, by: &str, now: Timestamp, reason: Option<&str>) -> Value {
    let approval = |batch: &RotationBatch| Approval {
        required: batch.spec.approval.as_ref().is_some_and(|a| a.required),
        approved_by: Some(by.into()),
        approved_at: Some(Time(now)),
        reason: reason.filter(|r| !r.trim().is_empty()).map(|r| r.trim().to_string()),
    };
    match action {
        BatchAction::Approve => json!({"approval": approval(batch)}),
        BatchAction::Force { approve } => {
            let mut spec = json!({"force": user_action(by, now, reason)});
            if approve {
                spec["approval"] = json!(approval(batch));
            }
            spec
        }
        BatchAction::Hold => json!({"hold": user_action(by, now, reason)}),
        BatchAction::Release => json!({"hold": null, "released": user_action(by, now, reason)}),
        BatchAction::Cancel => json!({"cancel": user_action(by, now, reason)}),
        BatchAction::Retry => json!({"retry": user_action(by, now, reason)}),
        BatchAction::Undo => json!({"undo": user_action(by, now, reason)}),
    }
}

/// The write that removes an attribution this action replaces and the engine does not honour.
fn clear_unhonoured(batch: &RotationBatch, action: BatchAction) -> Option<Value> {
    match action {
        BatchAction::Approve | BatchAction::Force { approve: true } if not_honoured(batch, Attributed::Approval) => {
            Some(json!({"approval": {"approvedBy": null}}))
        }
        BatchAction::Hold if not_honoured(batch, Attributed::Hold) => Some(json!({"hold": null})),
        _ => None,
    }
}

fn summary(action: BatchAction, batch: &RotationBatch, by: &str) -> String {
    let said = what_it_did(action, batch, by);
    // An approval or a force does not lift a hold: say so, or the SRE waits for a rollout that
    // never starts.
    match (&batch.spec.hold, action) {
        (Some(hold), BatchAction::Approve | BatchAction::Force { .. }) => format!(
            "{said}; but it is held by {}: nothing rolls until `capdeck release {}/{} --reason ...`",
            hold.by,
            batch.namespace().unwrap_or_default(),
            batch.name_any()
        ),
        _ => said,
    }
}

fn what_it_did(action: BatchAction, batch: &RotationBatch, by: &str) -> String {
    let name = batch.name_any();
    let phase = batch.phase();
    match action {
        BatchAction::Approve if phase == BatchPhase::AwaitingApproval => {
            format!("approved {name} as {by}; the engine rolls it out now")
        }
        BatchAction::Approve if phase == BatchPhase::Waiting => {
            format!(
                "approved {name} as {by} (was Waiting); it rolls at its next change window opening or when its freeze \
                 ends — capdeck force {name} --reason … rolls it now"
            )
        }
        BatchAction::Approve => {
            format!("approved {name} as {by} (was {phase}); the engine rolls it out once its window ends")
        }
        BatchAction::Force { .. } if phase == BatchPhase::Waiting => format!(
            "forced {name} as {by}: its change windows and freezes no longer hold it back (an approval it needs, \
             or the storm guard, still does)"
        ),
        BatchAction::Force { .. } if held_for(batch, HeldBy::UnreadableWindows) => format!(
            "forced {name} as {by}: it goes on despite its unreadable change windows (an approval it needs, or the \
             storm guard, still does)"
        ),
        BatchAction::Force { approve: true } => {
            format!("forced and approved {name} as {by}: its window ends now and it rolls out")
        }
        BatchAction::Force { approve: false } => {
            let approval = if batch.spec.approval.as_ref().is_some_and(|a| a.required && a.approved_by.is_none()) {
                " (it still needs an approval)"
            } else {
                ""
            };
            format!("forced {name} as {by}: its window ends now{approval}")
        }
        BatchAction::Hold => format!("held {name} as {by} (was {phase}): nothing new starts until released"),
        BatchAction::Release => format!("released {name} as {by}"),
        BatchAction::Cancel => format!("cancelled {name} as {by} (was {phase}): nothing more is rolled"),
        BatchAction::Retry if matches!(phase, BatchPhase::Undone | BatchPhase::Cancelled) => {
            let names: Vec<&str> = batch.restarts().filter(|d| d.left_behind()).map(|d| d.name.as_str()).collect();
            let which = if names.is_empty() {
                format!("the Deployments of {} still on old credentials", batch.spec.application)
            } else {
                names.join(", ")
            };
            format!(
                "retried {name} as {by} (was {phase}): a new batch rolls {which} forward to the current credentials \
                 (the application's approval policy, change windows and freezes apply)"
            )
        }
        BatchAction::Retry => {
            let names: Vec<&str> = batch.restarts().filter(|d| d.retriable()).map(|d| d.name.as_str()).collect();
            format!("retried {name} as {by} (was {phase}): {} roll once more", names.join(", "))
        }
        BatchAction::Undo => {
            let names: Vec<&str> = batch.restarts().filter(|d| d.undoable()).map(|d| d.name.as_str()).collect();
            format!(
                "undid {name} as {by} (was {phase}): {} go back to their previous VCAP Secrets; the batch ends Undone",
                names.join(", ")
            )
        }
    }
}

/// Do `action` to `namespace/name` as `by`. Re-reads and re-checks on a conflict, so an action
/// that someone else's write made pointless is refused instead of applied twice.
pub async fn act(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    action: BatchAction,
    by: &str,
    reason: Option<&str>,
    now: Timestamp,
) -> Result<ActionReport, ActionError> {
    let writer = BatchWriter::new(client.clone(), Writer::Actions);
    let edit = |batch: &RotationBatch| {
        if let Some(refusal) = action.refusal(batch) {
            return Err(ActionError::Refused(refusal));
        }
        Ok(Edit {
            changes: action_changes(batch, action, by, now, reason),
            answer: report((namespace, name), batch, action, by),
        })
    };
    match writer.write(namespace, name, None, OnConflict::Retry { attempts: 3 }, edit).await {
        Ok(written) => Ok(written.answer),
        Err(BatchWriteError::Gone) => Err(ActionError::NotFound(format!("{namespace}/{name}"))),
        Err(BatchWriteError::Declined(error)) => Err(error),
        Err(BatchWriteError::Read(error) | BatchWriteError::Write(error)) => {
            Err(ActionError::Api(crate::cluster::describe_error(&error)))
        }
        Err(BatchWriteError::Conflicts(_)) => Err(ActionError::Conflicts),
    }
}

/// The writes of an action: an approval or a hold the engine does not honour is cleared first
/// (the server moves a field's ownership only when its value changes, and the same name written
/// again by capdeck must become capdeck's), then the action itself.
fn action_changes(
    batch: &RotationBatch,
    action: BatchAction,
    by: &str,
    now: Timestamp,
    reason: Option<&str>,
) -> Vec<Change> {
    let clear = clear_unhonoured(batch, action).map(Change::MergeSpec);
    clear.into_iter().chain([Change::MergeSpec(spec_patch(batch, action, by, now, reason))]).collect()
}

fn report((namespace, name): (&str, &str), batch: &RotationBatch, action: BatchAction, by: &str) -> ActionReport {
    ActionReport {
        namespace: namespace.into(),
        batch: name.into(),
        action,
        phase_before: batch.phase(),
        by: by.into(),
        summary: summary(action, batch, by),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(phase: &str, spec: Value, status: Value) -> RotationBatch {
        use crate::api::rotation_batch::testing;
        let mut status = status;
        status["phase"] = json!(phase);
        let mut overrides = json!({"spec": {"windowEnd": "2026-11-20T09:00:00Z"}, "status": status});
        testing::merge(&mut overrides, json!({"spec": spec}));
        testing::batch(overrides)
    }

    fn user(by: &str) -> Value {
        json!({"by": by, "at": "2026-11-20T09:00:00Z"})
    }

    #[test]
    fn approving_or_forcing_a_held_batch_says_the_hold_still_stops_it() {
        let held = batch("Held", json!({"hold": user("bob")}), json!({}));
        assert_eq!(
            summary(BatchAction::Approve, &held, "alice"),
            "approved b as alice (was Held); the engine rolls it out once its window ends; but it is held by bob: \
             nothing rolls until `capdeck release ns/b --reason ...`"
        );
        assert!(
            summary(BatchAction::Force { approve: true }, &held, "alice")
                .ends_with("held by bob: nothing rolls until `capdeck release ns/b --reason ...`")
        );
        let collecting = batch("Collecting", json!({}), json!({}));
        assert!(!summary(BatchAction::Approve, &collecting, "alice").contains("held"));
    }

    #[test]
    fn force_overrides_windows_and_a_window_hold_is_not_released() {
        let waiting = batch(
            "Waiting",
            json!({"approval": {"required": false}}),
            json!({"rolloutStartedAt": "2026-11-20T09:00:00Z", "deployments": [
                {"name": "d", "version": "v", "workload": "w", "action": "Restart", "state": "Queued"}]}),
        );
        assert_eq!(BatchAction::Force { approve: false }.refusal(&waiting), None, "even mid-rollout");
        assert_eq!(
            summary(BatchAction::Force { approve: false }, &waiting, "alice"),
            "forced b as alice: its change windows and freezes no longer hold it back (an approval it needs, or the \
             storm guard, still does)"
        );
        let forced = batch("Waiting", json!({"force": user("carol")}), json!({}));
        assert_eq!(
            BatchAction::Force { approve: false }.refusal(&forced).as_deref(),
            Some("batch b is already forced by carol")
        );
        assert!(
            summary(BatchAction::Approve, &batch("Waiting", json!({}), json!({})), "alice")
                .contains("it rolls at its next change window opening or when its freeze ends")
        );
        let unreadable = batch(
            "Held",
            json!({}),
            json!({"conditions": [{"type": "Ready", "status": "False", "reason": "ChangeWindowUnreadable",
                   "message": "…", "lastTransitionTime": "2026-11-20T09:05:00Z"}]}),
        );
        let refusal = BatchAction::Release.refusal(&unreadable).expect("refused");
        assert!(refusal.contains("its change windows cannot be read, not by a person"), "{refusal}");
    }

    #[test]
    fn what_each_action_refuses() {
        let collecting = batch("Collecting", json!({}), json!({}));
        let awaiting = batch(
            "AwaitingApproval",
            json!({"approval": {"required": true}}),
            json!({"deployments": [
            {"name": "d", "version": "v", "workload": "w", "action": "Restart"}]}),
        );
        let approved = batch("RollingOut", json!({"approval": {"required": true, "approvedBy": "carol"}}), json!({}));
        let rolling = batch("RollingOut", json!({}), json!({"rolloutStartedAt": "2026-11-20T09:00:00Z"}));
        let held = batch("Held", json!({"hold": user("bob")}), json!({}));
        let cancelling = batch("Collecting", json!({"cancel": user("dan")}), json!({}));
        let done = batch("Succeeded", json!({}), json!({}));
        let refused = |action: BatchAction, batch: &RotationBatch| action.refusal(batch);

        // Pre-approval while collecting and approval while waiting are fine; twice is not.
        assert_eq!(refused(BatchAction::Approve, &collecting), None);
        assert_eq!(refused(BatchAction::Approve, &awaiting), None);
        assert_eq!(refused(BatchAction::Approve, &approved).as_deref(), Some("batch b is already approved by carol"));
        // An approval the engine took back (the plan changed since it was given) may be given again.
        let taken_back = batch(
            "AwaitingApproval",
            json!({"approval": {"required": true, "approvedBy": "carol", "approvedAt": "2026-11-20T08:00:00Z"}}),
            json!({"planned": {"at": "2026-11-20T08:30:00Z", "takenBack": "carol@2026-11-20T08:00:00Z"}}),
        );
        assert!(taken_back.approval_taken_back());
        assert_eq!(refused(BatchAction::Approve, &taken_back), None, "approving again is allowed");
        assert_eq!(
            refused(BatchAction::Approve, &rolling).as_deref(),
            Some("batch b is already rolling out; nothing to approve")
        );
        // Force ends an open window only.
        assert_eq!(refused(BatchAction::Force { approve: false }, &collecting), None);
        assert_eq!(
            refused(BatchAction::Force { approve: false }, &awaiting).as_deref(),
            Some("batch b's window has already ended")
        );
        assert_eq!(refused(BatchAction::Force { approve: true }, &awaiting), None, "force --approve approves");
        // Hold and release.
        assert_eq!(refused(BatchAction::Hold, &rolling), None);
        assert_eq!(refused(BatchAction::Hold, &held).as_deref(), Some("batch b is already held by bob"));
        assert_eq!(refused(BatchAction::Release, &held), None);
        assert_eq!(refused(BatchAction::Release, &rolling).as_deref(), Some("batch b is not held"));
        // The engine's failure guard holds without `spec.hold`; release is how an SRE goes on.
        let halted = batch(
            "Held",
            json!({}),
            json!({"rolloutStartedAt": "2026-11-20T09:00:00Z", "conditions": [{"type": "Ready", "status": "False",
                   "reason": "RolloutFailureGuard", "message": "halted", "lastTransitionTime": "2026-11-20T09:05:00Z"}]}),
        );
        assert_eq!(refused(BatchAction::Release, &halted), None);
        // Cancel anything open; nothing on a finished or cancelling batch.
        assert_eq!(refused(BatchAction::Cancel, &rolling), None);
        assert_eq!(refused(BatchAction::Cancel, &cancelling).as_deref(), Some("batch b is being cancelled"));
        // Retry and undo are for a batch that failed: Failed, or halted by the failure guard.
        let stalled = json!([{"name": "srv", "version": "v", "workload": "w", "action": "Restart", "state": "Stalled",
                              "vcapSecret": "srv-new", "previousVcapSecret": "srv-old"},
                             {"name": "worker", "version": "v", "workload": "w", "action": "Restart",
                              "state": "Complete", "vcapSecret": "worker-new", "previousVcapSecret": "worker-old"}]);
        let failed = batch("Failed", json!({}), json!({"deployments": stalled}));
        assert_eq!(refused(BatchAction::Retry, &failed), None);
        assert_eq!(refused(BatchAction::Undo, &failed), None);
        assert_eq!(
            refused(BatchAction::Retry, &halted).as_deref(),
            Some("batch b has no stalled, failing or failed Deployment to retry (capdeck batches -o yaml)")
        );
        assert_eq!(
            refused(BatchAction::Retry, &rolling).as_deref(),
            Some("batch b is RollingOut; only a Failed batch or one the failure guard halted can be retried")
        );
        assert_eq!(
            refused(BatchAction::Undo, &done).as_deref(),
            Some("batch b is Succeeded; only a Failed batch or one the failure guard halted can be undone")
        );
        let retried = batch("Failed", json!({"retry": user("erin")}), json!({"deployments": stalled}));
        assert_eq!(refused(BatchAction::Retry, &retried).as_deref(), Some("batch b is already being retried"));
        assert_eq!(refused(BatchAction::Undo, &retried), None, "an undo after a retry that failed again");
        let undone = batch("Undone", json!({"undo": user("erin")}), json!({"deployments": stalled}));
        assert_eq!(refused(BatchAction::Undo, &undone).as_deref(), Some("batch b is Undone; nothing to undo"));
        let completed = batch("Failed", json!({}), json!({"deployments": [stalled[1].clone()]}));
        assert_eq!(
            refused(BatchAction::Undo, &completed).as_deref(),
            Some(
                "batch b has no unfinished Deployment with a previous VCAP Secret to go back to (completed ones had \
                 theirs deleted)"
            )
        );
        for action in [BatchAction::Approve, BatchAction::Hold, BatchAction::Release, BatchAction::Cancel] {
            assert_eq!(
                refused(action, &done),
                Some(format!("batch b is Succeeded; nothing to {}", action.verb())),
                "{action:?}"
            );
        }
    }
}
