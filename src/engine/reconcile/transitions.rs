//! Writing a batch's new status and saying what changed: the status (progress-only changes at
//! most every `--progress-interval`; none while a batch merely collects), then the spec update the
//! decision asked for, then one log line per transition and an Event for those a person acts on
//! or must see. The part owns when each batch's progress was last written.

use std::collections::HashMap;

use kube::ResourceExt;

use super::status::{condition_reason, ready_condition, user_action_text};
use super::{AppKey, Context, batch_key};
use crate::api::rotation_batch::attribution::Attributed;
use crate::api::rotation_batch::reason;
use crate::api::{BatchPhase, RotationBatch, RotationBatchStatus};

/// An Event for the batch's application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Announcement {
    pub warning: bool,
    pub reason: String,
    pub note: String,
    /// Its own log line, when the transition's line does not say it.
    pub log: Option<String>,
}

#[derive(Default)]
pub(super) struct Transitions {
    progress_written: HashMap<AppKey, tokio::time::Instant>,
}

impl Transitions {
    /// Write a changed status, then the spec update, then announce what changed. `routine`: the
    /// decision was one nobody acts on (`Decision::routine`), its plain `RollingOut` gets no Event.
    pub(super) async fn write(
        &mut self,
        context: &Context,
        batch: &RotationBatch,
        old: &RotationBatchStatus,
        status: RotationBatchStatus,
        (spec_update, routine): (Option<RotationBatch>, bool),
    ) {
        let key = batch_key(batch);
        let last = self.progress_written.get(&key).map(tokio::time::Instant::elapsed);
        if status == *old
            || progress_may_wait(old, &status, last, context.config.progress_interval)
            || (batch.status.is_none() && merely_collecting(&status))
        {
            return;
        }
        let written = match context.writes.write_status(batch, &status).await {
            Ok(written) => written,
            Err(error) => {
                tracing::warn!(batch = %key.1, error = %crate::cluster::describe_error(&error), "could not write batch status; retrying");
                return;
            }
        };
        self.progress_written.insert(key.clone(), tokio::time::Instant::now());
        let (namespace, name) = key;
        // An approval or a hold the engine does not honour: said once per refusal, in the log
        // and as a Warning Event (the condition stays on the batch).
        for refusal in refusals(&name, old, &status) {
            tracing::warn!(namespace = %namespace, batch = %name, reason = refusal.reason.as_str(), "{}", refusal.note);
            if let Some(app) = context.application(&namespace, &batch.spec.application) {
                context.writes.event(&app, true, &refusal.reason, refusal.note).await;
            }
        }
        if let Some(mut update) = spec_update {
            update.metadata.resource_version = written.metadata.resource_version.clone();
            if let Err(error) = context.writes.replace_batch(&update).await {
                tracing::warn!(batch = %name, error = %crate::cluster::describe_error(&error), "could not record the approval requirement")
            }
        }
        self.announce(context, batch, old, &status, routine).await;
    }

    /// One log line per transition; an Event for those a person acts on or must see (a release
    /// that ends a hold says so too).
    async fn announce(
        &self,
        context: &Context,
        batch: &RotationBatch,
        old: &RotationBatchStatus,
        status: &RotationBatchStatus,
        routine: bool,
    ) {
        let (namespace, name) = batch_key(batch);
        let Some(app) = context.application(&namespace, &batch.spec.application).filter(|_| phase_changed(old, status))
        else {
            return;
        };
        let reason = condition_reason(status).unwrap_or(reason::ROLLING_OUT);
        let message = ready_condition(status).map(|c| c.message.clone()).unwrap_or_default();
        // One line per transition, so an SRE can follow a batch in the log alone (names and
        // people only: no credential value is ever in a message).
        tracing::info!(
            namespace = %namespace,
            batch = %name,
            application = %batch.spec.application,
            phase = %status.phase,
            reason = %reason,
            "batch {}: {message}",
            status.phase
        );
        for announcement in announcements(batch, old, status, routine) {
            if let Some(log) = &announcement.log {
                tracing::info!(namespace = %namespace, batch = %name, "{log}");
            }
            context.writes.event(&app, announcement.warning, &announcement.reason, announcement.note).await;
        }
    }
}

/// What the engine would write for a batch that merely collects: phase `Collecting`, reason
/// `WindowOpen`, nothing evaluated, no other condition or record. A batch without a status says
/// exactly that (its phase reads `Collecting` and `spec.windowEnd` says until when), so this is not
/// written: the first status write comes with the first phase a person sees change.
fn merely_collecting(status: &RotationBatchStatus) -> bool {
    let only_ready = status.conditions.iter().all(|c| c.type_ == crate::api::common::READY);
    let bookkeeping =
        RotationBatchStatus { observed_generation: None, progress: None, conditions: Vec::new(), ..status.clone() };
    status.phase == BatchPhase::Collecting
        && condition_reason(status) == Some(reason::WINDOW_OPEN)
        && only_ready
        && bookkeeping == RotationBatchStatus::default()
}

/// The phase or the reason of the Ready condition changed.
fn phase_changed(old: &RotationBatchStatus, status: &RotationBatchStatus) -> bool {
    status.phase != old.phase || condition_reason(status) != condition_reason(old)
}

/// Only replica counts changed and the last write is more recent than `interval`: this change
/// may wait. A new spec (an SRE's approval, hold, …) is acknowledged at once through
/// observedGeneration, as is a Deployment's new state or VCAP Secret.
fn progress_may_wait(
    old: &RotationBatchStatus,
    status: &RotationBatchStatus,
    since_last_write: Option<std::time::Duration>,
    interval: std::time::Duration,
) -> bool {
    let progress_only = !phase_changed(old, status)
        && status.observed_generation == old.observed_generation
        && status.deployments.len() == old.deployments.len();
    progress_only
        && since_last_write.is_some_and(|since| since < interval)
        && status
            .deployments
            .iter()
            .zip(&old.deployments)
            .all(|(a, b)| a.state == b.state && a.vcap_secret == b.vcap_secret)
}

/// Attributions the engine newly refuses (or refuses with a new message): a Warning each.
fn refusals(name: &str, old: &RotationBatchStatus, status: &RotationBatchStatus) -> Vec<Announcement> {
    let refusal = |status: &RotationBatchStatus, field: Attributed| {
        status.conditions.iter().find(|c| c.type_ == field.condition_type()).map(|c| c.message.clone())
    };
    Attributed::ALL
        .into_iter()
        .filter_map(|field| {
            let message = refusal(status, field).filter(|message| refusal(old, field).as_ref() != Some(message))?;
            let note = format!("batch {name}: {message}");
            Some(Announcement { warning: true, reason: field.refusal_reason().into(), note, log: None })
        })
        .collect()
}

/// Reasons of a transition nobody acts on: the window opened (or is open), the rollout completed,
/// there was nothing to restart. The batch's status, its log line and the metrics say them; an
/// Event would only repeat them (and cost a write per batch).
const ROUTINE: [&str; 3] = [reason::WINDOW_OPEN, reason::ROLLOUT_COMPLETE, reason::NO_CHANGE];

/// The Events of a transition: a release that ended a hold (unless the new condition says
/// `Released` itself), then the new phase — a Warning when it failed or waits for a guard — unless
/// it is routine (`ROUTINE`, or a plain `RollingOut` of a `routine` decision: the window ended or
/// opened again). Every person's action, refusal, failure, wait and override is announced.
fn announcements(
    batch: &RotationBatch,
    old: &RotationBatchStatus,
    status: &RotationBatchStatus,
    routine: bool,
) -> Vec<Announcement> {
    if !phase_changed(old, status) {
        return Vec::new();
    }
    let name = batch.name_any();
    let reason = condition_reason(status).unwrap_or(reason::ROLLING_OUT).to_string();
    let message = ready_condition(status).map(|c| c.message.clone()).unwrap_or_default();
    let mut out = Vec::new();
    if old.phase == BatchPhase::Held
        && status.phase != BatchPhase::Held
        && reason != reason::RELEASED
        && let Some(released) = &batch.spec.released
    {
        let text = user_action_text(released, "released");
        let (note, log) = (format!("batch {name}: {text}"), Some(format!("batch released: {text}")));
        out.push(Announcement { warning: false, reason: reason::RELEASED.into(), note, log });
    }
    let warning = matches!(status.phase, BatchPhase::Failed)
        || [
            reason::STORM_GUARD,
            reason::CREDENTIALS_EXPIRING,
            reason::ROLLOUT_FAILURE_GUARD,
            reason::DEADLINE_BEFORE_CHANGE_WINDOW,
            reason::DEADLINE_DURING_FREEZE,
            reason::CHANGE_WINDOW_UNREADABLE,
        ]
        .contains(&reason.as_str());
    let plain_start = routine && reason == reason::ROLLING_OUT;
    if warning || !(plain_start || ROUTINE.contains(&reason.as_str())) {
        out.push(Announcement { warning, reason, note: format!("batch {name}: {message}"), log: None });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::*;

    fn status(value: Value) -> RotationBatchStatus {
        serde_json::from_value(value).expect("status")
    }

    fn ready(phase: &str, reason: &str, message: &str) -> RotationBatchStatus {
        status(json!({"phase": phase, "conditions": [{"type": "Ready", "status": "False", "reason": reason,
            "message": message, "lastTransitionTime": "2026-11-23T12:00:00Z"}]}))
    }

    fn rolling(replicas: i32, state: &str) -> RotationBatchStatus {
        let mut status = ready("RollingOut", reason::ROLLING_OUT, "rolling");
        status.deployments = serde_json::from_value(json!([{"name": "srv", "version": "v", "workload": "srv",
            "action": "Restart", "state": state, "readyReplicas": replicas, "vcapSecret": "srv-new"}]))
        .expect("deployments");
        status
    }

    fn batch(spec: Value) -> RotationBatch {
        let mut object = json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
            "metadata": {"name": "b", "namespace": "ns"},
            "spec": {"application": "app", "windowEnd": "2026-11-23T12:00:00Z"}});
        if let (Some(target), Some(extra)) = (object["spec"].as_object_mut(), spec.as_object()) {
            target.extend(extra.clone());
        }
        serde_json::from_value(object).expect("batch")
    }

    const INTERVAL: Duration = Duration::from_secs(10);

    #[test]
    fn replica_counts_alone_wait_for_the_progress_interval() {
        let (old, new) = (rolling(1, "Rolling"), rolling(2, "Rolling"));
        assert!(progress_may_wait(&old, &new, Some(Duration::from_secs(3)), INTERVAL));
        assert!(!progress_may_wait(&old, &new, Some(Duration::from_secs(11)), INTERVAL), "the interval passed");
        assert!(!progress_may_wait(&old, &new, None, INTERVAL), "never written by this engine");
    }

    #[test]
    fn a_new_state_phase_or_spec_is_written_at_once() {
        let old = rolling(1, "Rolling");
        let recent = Some(Duration::from_secs(1));
        assert!(!progress_may_wait(&old, &rolling(1, "Failing"), recent, INTERVAL), "a Deployment's new state");
        let mut acknowledged = rolling(1, "Rolling");
        acknowledged.observed_generation = Some(7);
        assert!(!progress_may_wait(&old, &acknowledged, recent, INTERVAL), "a new spec is acknowledged");
        let held = RotationBatchStatus { phase: BatchPhase::Held, ..rolling(1, "Rolling") };
        assert!(!progress_may_wait(&old, &held, recent, INTERVAL), "a new phase");
        let mut moved = rolling(1, "Rolling");
        moved.deployments[0].vcap_secret = Some("srv-newer".into());
        assert!(!progress_may_wait(&old, &moved, recent, INTERVAL), "another VCAP Secret");
    }

    #[test]
    fn a_refused_attribution_is_announced_once_per_message() {
        let refused = |message: &str| {
            let mut status = ready("AwaitingApproval", reason::AWAITING_APPROVAL, "waiting");
            status.conditions.push(
                serde_json::from_value(json!({"type": Attributed::Approval.condition_type(),
                "status": "False", "reason": Attributed::Approval.refusal_reason(), "message": message}))
                .expect("c"),
            );
            status
        };
        let plain = ready("AwaitingApproval", reason::AWAITING_APPROVAL, "waiting");
        let said = refusals("b", &plain, &refused("kubectl wrote it"));
        assert_eq!(
            said,
            [Announcement {
                warning: true,
                reason: Attributed::Approval.refusal_reason().into(),
                note: "batch b: kubectl wrote it".into(),
                log: None
            }]
        );
        assert!(refusals("b", &refused("kubectl wrote it"), &refused("kubectl wrote it")).is_empty(), "said once");
        assert_eq!(refusals("b", &refused("kubectl wrote it"), &refused("mallory wrote it")).len(), 1);
        assert!(refusals("b", &refused("x"), &plain).is_empty(), "honoured again: nothing to say");
    }

    #[test]
    fn a_transition_is_one_event_a_warning_when_it_failed_or_waits_for_a_guard() {
        let spec = batch(json!({}));
        let old = ready("Collecting", reason::WINDOW_OPEN, "collecting");
        assert!(announcements(&spec, &old, &old, false).is_empty(), "no transition, no Event");
        let cases = [
            (ready("RollingOut", reason::ROLLING_OUT, "rolling now (--on-deadline roll): …"), false),
            (ready("RollingOut", reason::FORCED, "forced by alice"), false),
            (ready("RollingOut", reason::APPROVED, "approved by alice"), false),
            (ready("Failed", reason::WRITE_FAILED, "failed"), true),
            (ready("AwaitingApproval", reason::STORM_GUARD, "guard"), true),
            (ready("AwaitingApproval", reason::CREDENTIALS_EXPIRING, "expiring"), true),
            (ready("Held", reason::ROLLOUT_FAILURE_GUARD, "halted"), true),
            (ready("AwaitingApproval", reason::AWAITING_APPROVAL, "waiting"), false),
            (ready("Waiting", reason::OUTSIDE_CHANGE_WINDOW, "waits"), false),
            (ready("Held", reason::HELD, "held by bob"), false),
            (ready("Superseded", reason::SUPERSEDED, "superseded"), false),
        ];
        for (new, warning) in cases {
            let said = announcements(&spec, &old, &new, false);
            let reason = condition_reason(&new).unwrap_or_default().to_string();
            let message = &new.conditions[0].message;
            let expected = Announcement { warning, reason, note: format!("batch b: {message}"), log: None };
            assert_eq!(said, [expected], "{:?}", new.phase);
        }
        // Same phase, a new reason: a transition too.
        let escalated = ready("Collecting", reason::CREDENTIALS_EXPIRING, "expiring");
        assert_eq!(announcements(&spec, &old, &escalated, false).len(), 1);
    }

    /// The happy path is told by the batch and the log, not by Events: the window opened, it ended
    /// (a routine start), the rollout completed, nothing to restart.
    #[test]
    fn routine_transitions_are_no_event() {
        let spec = batch(json!({}));
        let none = RotationBatchStatus::default();
        let collecting = ready("Collecting", reason::WINDOW_OPEN, "collecting");
        let rolling = ready("RollingOut", reason::ROLLING_OUT, "window ended; rolling out");
        assert!(announcements(&spec, &none, &collecting, true).is_empty(), "the window opened");
        assert!(announcements(&spec, &collecting, &rolling, true).is_empty(), "the window ended");
        let done = ready("Succeeded", reason::ROLLOUT_COMPLETE, "1 Deployment rolled out");
        assert!(announcements(&spec, &rolling, &done, false).is_empty(), "the rollout completed");
        let nothing = ready("NoChange", reason::NO_CHANGE, "all up to date");
        assert!(announcements(&spec, &collecting, &nothing, false).is_empty(), "nothing to restart");
        // The same start from a decision that is not routine (it overrode something): announced.
        assert_eq!(announcements(&spec, &collecting, &rolling, false).len(), 1);
        // A routine decision whose rollout failed at once is a failure: a Warning.
        let failed = ready("Failed", reason::WRITE_FAILED, "could not write");
        assert!(announcements(&spec, &collecting, &failed, true)[0].warning);
    }

    /// A batch without a status collects: that is not written; anything more is.
    #[test]
    fn a_merely_collecting_status_is_not_written() {
        let mut collecting = ready("Collecting", reason::WINDOW_OPEN, "collecting rotations until …");
        collecting.observed_generation = Some(2);
        collecting.progress = Some("0/0".into());
        assert!(merely_collecting(&collecting));
        let mut refused = collecting.clone();
        refused.conditions.push(
            serde_json::from_value(json!({"type": Attributed::Hold.condition_type(), "status": "False",
                "reason": Attributed::Hold.refusal_reason(), "message": "kubectl wrote it"}))
            .expect("c"),
        );
        assert!(!merely_collecting(&refused), "a refusal is written");
        let escalated = ready("Collecting", reason::CREDENTIALS_EXPIRING, "expiring");
        assert!(!merely_collecting(&escalated), "a new reason is written");
        assert!(!merely_collecting(&ready("Held", reason::HELD, "held")), "a hold is written");
        assert!(!merely_collecting(&RotationBatchStatus { tenants: Some(3), ..collecting }), "an evaluation");
    }

    #[test]
    fn a_release_that_ends_a_hold_is_announced_before_the_new_phase() {
        let released = batch(json!({"released": {"by": "carol", "at": "2026-11-23T12:00:00Z", "reason": "ok"}}));
        let held = ready("Held", reason::HELD, "held by bob");
        let said = announcements(&released, &held, &ready("RollingOut", reason::ROLLING_OUT, "rolling"), false);
        assert_eq!(said.len(), 2);
        assert_eq!(said[0].reason, reason::RELEASED);
        assert_eq!(said[0].note, "batch b: released by carol: ok");
        assert_eq!(said[0].log.as_deref(), Some("batch released: released by carol: ok"));
        // A failure-guard release says so in its own condition: not twice.
        let resumed =
            announcements(&released, &held, &ready("RollingOut", reason::RELEASED, "released by carol"), false);
        assert_eq!(resumed.len(), 1);
        // A release that lets the window's routine start go on: the release alone.
        let routine = announcements(&released, &held, &ready("RollingOut", reason::ROLLING_OUT, "rolling"), true);
        assert_eq!(routine.iter().map(|a| a.reason.as_str()).collect::<Vec<_>>(), [reason::RELEASED]);
        // Without a recorded release (a hold removed by hand) only the phase is announced.
        let plain =
            announcements(&batch(json!({})), &held, &ready("RollingOut", reason::ROLLING_OUT, "rolling"), false);
        assert_eq!(plain.len(), 1);
    }
}
