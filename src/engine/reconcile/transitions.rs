//! Writing a batch's new status and saying what changed: the status (none while a batch merely
//! collects; a rollout's own progress at most every `STATUS_INTERVAL`, other progress-only changes
//! at most every `--progress-interval`), then the spec update the decision asked for, then one log
//! line per transition and an Event for those a person acts on or must see. The part owns when
//! each batch's status was last written, and the status it decided and has not written yet: the
//! next pass starts from that, so nothing done is lost or done again.

use std::collections::HashMap;
use std::sync::Arc;

use kube::ResourceExt;

use super::status::{condition_reason, ready_condition, user_action_text};
use super::{AppKey, Context, batch_key};
use crate::api::rotation_batch::ReadyReason;
use crate::api::rotation_batch::attribution::Attributed;
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

/// How long a rolling batch's own progress (a Deployment started after waiting its turn, replica
/// counts, messages, a Deployment completed while others still roll) may stay unwritten. Every
/// phase a person sees, every acknowledgement, refusal and failure is written at once.
pub(super) const STATUS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// Statuses the engine decided and has not written: valid while the stored batch (same uid) still
/// has the status they were decided from (`from`, notifications aside: only the notifier writes
/// them).
struct Unwritten {
    uid: Option<String>,
    from: RotationBatchStatus,
    /// Oldest first; the last is the status the next pass starts from.
    steps: Vec<Step>,
    /// Since when the stored status has lagged behind this engine's: the first change held.
    since: tokio::time::Instant,
}

/// The most statuses held for one batch.
const MAX_STEPS: usize = 16;

/// One status held, and what its transition has to say once a status after it is written (a
/// start that was approved, then completed before its status could be written, is still announced
/// as approved).
struct Step {
    status: RotationBatchStatus,
    said: Option<Said>,
    /// Its write was sent and answered with an error: the API server may have stored it anyway.
    sent: bool,
}

impl Unwritten {
    /// Still the statuses decided from what `batch` stores (`stored`), notifications aside.
    fn valid_for(&self, batch: &RotationBatch, stored: &RotationBatchStatus) -> bool {
        self.uid == batch.metadata.uid && self.from == without_notifications(stored)
    }

    /// The status the next pass starts from (`None` never happens: a step is held, or nothing).
    fn status(&self) -> Option<&RotationBatchStatus> {
        self.steps.last().map(|step| &step.status)
    }

    /// Add a step; progress with nothing to say replaces a last step like it (one pass after
    /// another holds a rolling batch's progress: no step per pass). At most `MAX_STEPS` are kept
    /// (writes that keep failing, one a backoff apart): the oldest with nothing to say goes first.
    fn push(&mut self, step: Step) {
        if let Some(last) = self.steps.last_mut()
            && step.said.is_none()
            && last.said.is_none()
            && !last.sent
        {
            *last = step;
        } else {
            self.steps.push(step);
        }
        while self.steps.len() > MAX_STEPS {
            // Never the last: it is the status the next pass starts from.
            let earlier = &self.steps[..self.steps.len() - 1];
            let at = earlier.iter().position(|step| step.said.is_none()).unwrap_or(0);
            self.steps.remove(at);
        }
    }

    fn said(self) -> impl Iterator<Item = Said> {
        self.steps.into_iter().filter_map(|step| step.said)
    }
}

/// What one transition has to say once its status is written: the attributions it newly refuses,
/// and, when its phase or reason changed, its log line and Events. Worked out against the status
/// the transition was decided from.
struct Said {
    /// The batch as that pass read it, its name, version and application alone (its Events name
    /// this version).
    batch: RotationBatch,
    refusals: Vec<Announcement>,
    transition: Option<Transition>,
}

struct Transition {
    phase: BatchPhase,
    reason: ReadyReason,
    message: String,
    announcements: Vec<Announcement>,
}

impl Said {
    /// `None`: nothing to say (progress only).
    fn of(
        batch: &RotationBatch,
        from: &RotationBatchStatus,
        status: &RotationBatchStatus,
        routine: bool,
    ) -> Option<Self> {
        let refusals = refusals(&batch.name_any(), from, status);
        let transition = phase_changed(from, status).then(|| Transition {
            phase: status.phase.clone(),
            reason: condition_reason(status).unwrap_or(ReadyReason::RollingOut),
            message: ready_condition(status).map(|c| c.message.clone()).unwrap_or_default(),
            announcements: announcements(batch, from, status, routine),
        });
        (!refusals.is_empty() || transition.is_some()).then(|| Self { batch: trimmed(batch), refusals, transition })
    }

    /// One log line per transition and an Event for those a person acts on or must see; a
    /// refused attribution is a warning in the log and a Warning Event (the condition stays on the
    /// batch). An application that is gone gets the log lines alone.
    async fn say(self, context: &Context) {
        let Self { batch, refusals, transition } = self;
        let AppKey { namespace, name } = batch_key(&batch);
        let app = context.application(&namespace, &batch.spec.application);
        for refusal in refusals {
            tracing::warn!(namespace = %namespace, batch = %name, reason = refusal.reason.as_str(), "{}", refusal.note);
            if let Some(app) = &app {
                context.writes.event(app, &batch, true, &refusal.reason, refusal.note).await;
            }
        }
        let Some(Transition { phase, reason, message, announcements }) = transition else { return };
        // One line per transition, so an SRE can follow a batch in the log alone (names and
        // people only: no credential value is ever in a message).
        tracing::info!(
            namespace = %namespace,
            batch = %name,
            application = %batch.spec.application,
            phase = %phase,
            reason = %reason,
            "batch {phase}: {message}"
        );
        for announcement in announcements {
            if let Some(log) = &announcement.log {
                tracing::info!(namespace = %namespace, batch = %name, "{log}");
            }
            if let Some(app) = &app {
                context.writes.event(app, &batch, announcement.warning, &announcement.reason, announcement.note).await;
            }
        }
    }
}

/// What an Event about the batch needs of it: kept while a status is held, without its Secrets
/// list, status or managedFields.
fn trimmed(batch: &RotationBatch) -> RotationBatch {
    let metadata = kube::api::ObjectMeta {
        name: batch.metadata.name.clone(),
        namespace: batch.metadata.namespace.clone(),
        uid: batch.metadata.uid.clone(),
        resource_version: batch.metadata.resource_version.clone(),
        ..Default::default()
    };
    let spec = crate::api::rotation_batch::RotationBatchSpec { secrets: Vec::new(), ..batch.spec.clone() };
    RotationBatch { metadata, spec, status: None }
}

#[derive(Default)]
pub(super) struct Transitions {
    written: HashMap<AppKey, tokio::time::Instant>,
    unwritten: HashMap<AppKey, Unwritten>,
}

impl Transitions {
    /// The status a pass starts from: the one this engine decided and has not written yet, while
    /// the stored batch is still the one it was decided from; else the stored one (as after a
    /// restart or a leader change, which the rollout rebuilds from the live Deployments).
    pub(super) fn base(&self, batch: &RotationBatch) -> RotationBatchStatus {
        let stored = batch.status.clone().unwrap_or_default();
        match self.held(batch, &stored).and_then(Unwritten::status) {
            Some(held) => RotationBatchStatus { notifications: stored.notifications, ..held.clone() },
            None => stored,
        }
    }

    /// The batches with the statuses this engine decided: a held one in place of the stored one.
    pub(super) fn as_decided(&self, batches: Vec<Arc<RotationBatch>>) -> Vec<Arc<RotationBatch>> {
        batches
            .into_iter()
            .map(|batch| {
                let stored = batch.status.clone().unwrap_or_default();
                match self.held(&batch, &stored) {
                    Some(_) => Arc::new(RotationBatch { status: Some(self.base(&batch)), ..(*batch).clone() }),
                    None => batch,
                }
            })
            .collect()
    }

    /// This batch's status held in memory, while it is still valid against `stored`.
    fn held(&self, batch: &RotationBatch, stored: &RotationBatchStatus) -> Option<&Unwritten> {
        self.unwritten.get(&batch_key(batch)).filter(|unwritten| unwritten.valid_for(batch, stored))
    }

    /// Forget the batches that are no longer open; a held status that closed one when the API
    /// server stored it after all (a write answered with an error) is said first.
    pub(super) async fn retain(&mut self, context: &Context, open: &std::collections::BTreeSet<AppKey>) {
        let closed: Vec<AppKey> = self.unwritten.keys().filter(|key| !open.contains(key)).cloned().collect();
        for key in closed {
            let Some(batch) = context.stores.batches.find(Some(&key.namespace), &key.name) else { continue };
            let stored = batch.status.clone().unwrap_or_default();
            for said in self.landed(&batch, &stored) {
                said.say(context).await;
            }
        }
        self.forget_closed(open);
    }

    fn forget_closed(&mut self, open: &std::collections::BTreeSet<AppKey>) {
        self.written.retain(|key, _| open.contains(key));
        self.unwritten.retain(|key, _| open.contains(key));
    }

    /// Write a changed status (or keep it for later: `write_or_hold`), then the spec update, then
    /// say what changed: what the transitions held before it had to say, then its own. `routine`:
    /// the decision was one nobody acts on (`Decision::routine`), its plain `RollingOut` gets no
    /// Event.
    pub(super) async fn write(
        &mut self,
        context: &Context,
        batch: &RotationBatch,
        status: RotationBatchStatus,
        (spec_update, routine): (Option<RotationBatch>, bool),
    ) {
        let key = batch_key(batch);
        let old = &batch.status.clone().unwrap_or_default();
        // A held status the API server took after all (its write failed on the way back, or it
        // came back as an error once it was made): what the transitions up to it had to say is
        // said now.
        for said in self.landed(batch, old) {
            said.say(context).await;
        }
        // What this pass decided from, and the statuses held since the stored one.
        let unwritten = self.unwritten.remove(&key).filter(|unwritten| unwritten.valid_for(batch, old));
        let from = match unwritten.as_ref().and_then(Unwritten::status) {
            Some(held) => RotationBatchStatus { notifications: old.notifications.clone(), ..held.clone() },
            None => old.clone(),
        };
        let said = Said::of(batch, &from, &status, routine);
        // kubectl's STATE that says something else (an older object, a hand-written one) is put
        // right like any other change (a status equal to the stored one has the stored one's state).
        if (status == *old && !batch.state_text_stale()) || (batch.status.is_none() && merely_collecting(&status)) {
            // Nothing to write. Back where the stored status is after held ones, what was done on
            // the way, and the way back, is said (a batch that merely collects says nothing).
            if let Some(unwritten) = unwritten {
                for said in unwritten.said().chain(said) {
                    said.say(context).await;
                }
            }
            return;
        }
        let last = self.written.get(&key).map(tokio::time::Instant::elapsed);
        let lagging_since = unwritten.as_ref().map(|unwritten| unwritten.since);
        let lagging = lagging_since.map(|since| since.elapsed());
        let intervals = (context.config.progress_interval, STATUS_INTERVAL);
        if write_or_hold(old, &status, (last, lagging), intervals) == Write::Hold {
            // Never written by this engine (a new leader): the interval starts now.
            self.written.entry(key.clone()).or_insert_with(tokio::time::Instant::now);
            self.hold(batch, old, unwritten, Step { status, said, sent: false });
            return;
        }
        let written = match context.writes.write_status(batch, &status).await {
            Ok(written) => written,
            Err(error) => {
                tracing::warn!(batch = %key.name, error = %crate::cluster::describe_error(&error), "could not write batch status; retrying");
                // What this pass did (a Deployment pointed at its new Secret) is not lost: the
                // next pass starts from it while the stored status is unchanged, and what it has
                // to say is said once a status is written.
                self.hold(batch, old, unwritten, Step { status, said, sent: true });
                return;
            }
        };
        self.written.insert(key.clone(), tokio::time::Instant::now());
        if let Some(mut update) = spec_update {
            update.metadata.resource_version = written.metadata.resource_version.clone();
            if let Err(error) = context.writes.replace_batch(&update).await {
                tracing::warn!(batch = %key.name, error = %crate::cluster::describe_error(&error), "could not record the approval requirement")
            }
        }
        for said in unwritten.into_iter().flat_map(Unwritten::said).chain(said) {
            said.say(context).await;
        }
    }

    /// Keep `step` for a later pass, after the steps held before it (`unwritten`, valid against
    /// `stored`), if any.
    fn hold(&mut self, batch: &RotationBatch, stored: &RotationBatchStatus, unwritten: Option<Unwritten>, step: Step) {
        let mut unwritten = unwritten.unwrap_or_else(|| Unwritten {
            uid: batch.metadata.uid.clone(),
            from: without_notifications(stored),
            steps: Vec::new(),
            since: tokio::time::Instant::now(),
        });
        unwritten.push(step);
        self.unwritten.insert(batch_key(batch), unwritten);
    }

    /// What the held transitions up to the stored status have to say, when the stored status is
    /// one whose write was sent and answered with an error (the API server stored it anyway).
    /// The steps after it stay held, decided from it.
    fn landed(&mut self, batch: &RotationBatch, stored: &RotationBatchStatus) -> Vec<Said> {
        let key = batch_key(batch);
        let Some(unwritten) = self.unwritten.get_mut(&key) else { return Vec::new() };
        if unwritten.uid != batch.metadata.uid || unwritten.from == without_notifications(stored) {
            return Vec::new();
        }
        // As written: times to the second, as the API server keeps them.
        let comparable = |status: &RotationBatchStatus| {
            serde_json::to_value(RotationBatchStatus { notifications: Vec::new(), state: None, ..status.clone() }).ok()
        };
        let stored_as_written = comparable(stored);
        let Some(at) =
            unwritten.steps.iter().rposition(|step| step.sent && comparable(&step.status) == stored_as_written)
        else {
            return Vec::new();
        };
        let rest = unwritten.steps.split_off(at + 1);
        let said = std::mem::replace(&mut unwritten.steps, rest).into_iter().filter_map(|step| step.said).collect();
        if unwritten.steps.is_empty() {
            self.unwritten.remove(&key);
        } else {
            unwritten.from = without_notifications(stored);
        }
        self.written.insert(key, tokio::time::Instant::now());
        said
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
        && condition_reason(status) == Some(ReadyReason::WindowOpen)
        && only_ready
        && bookkeeping == RotationBatchStatus::default()
}

/// The phase or the reason of the Ready condition changed.
fn phase_changed(old: &RotationBatchStatus, status: &RotationBatchStatus) -> bool {
    status.phase != old.phase || condition_reason(status) != condition_reason(old)
}

fn without_notifications(status: &RotationBatchStatus) -> RotationBatchStatus {
    RotationBatchStatus { notifications: Vec::new(), ..status.clone() }
}

/// Whether a changed status is written now or kept in memory for a later pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Write {
    Now,
    Hold,
}

/// The rule for a changed status (`stored` → `status`), `since_last_write` by this engine (`None`:
/// never) and how long the stored status has `lagged` behind one held in memory (`None`: it has
/// not). A rolling batch's own progress (`rollout_progress_only`) waits until it has lagged
/// `status_interval` (the stored progress lags by at most that much; counted from the first change
/// held, not the last write, so a Deployment that starts after waiting its turn for minutes and
/// completes within the minute costs one write, not two); other progress-only changes wait up to
/// `progress_interval` after the last write (`progress_may_wait`); everything else is written now.
fn write_or_hold(
    stored: &RotationBatchStatus,
    status: &RotationBatchStatus,
    (since_last_write, lagged): (Option<std::time::Duration>, Option<std::time::Duration>),
    (progress_interval, status_interval): (std::time::Duration, std::time::Duration),
) -> Write {
    let rolling = stored.phase == BatchPhase::RollingOut && status.phase == BatchPhase::RollingOut;
    let hold = if rolling && rollout_progress_only(stored, status) {
        lagged.is_none_or(|lagged| lagged < status_interval)
    } else {
        progress_may_wait(stored, status, since_last_write, progress_interval)
    };
    if hold { Write::Hold } else { Write::Now }
}

/// Nothing changed but the rollout's own progress: no phase, reason, condition, acknowledgement or
/// record; the same Deployments, each only moving Queued → Rolling → Complete (a start, a
/// completion, replica counts, a healthy message) or waiting its turn. A Deployment that stalls,
/// fails, is undone or retried, points at another Secret, or a new failure message is not.
fn rollout_progress_only(stored: &RotationBatchStatus, status: &RotationBatchStatus) -> bool {
    let rest = |s: &RotationBatchStatus| RotationBatchStatus {
        deployments: Vec::new(),
        progress: None,
        notifications: Vec::new(),
        ..s.clone()
    };
    rest(stored) == rest(status)
        && stored.deployments.len() == status.deployments.len()
        && stored.deployments.iter().zip(&status.deployments).all(|(a, b)| deployment_progress_only(a, b))
}

fn deployment_progress_only(
    stored: &crate::api::rotation_batch::BatchDeployment,
    now: &crate::api::rotation_batch::BatchDeployment,
) -> bool {
    use crate::api::rotation_batch::DeploymentRolloutState::{Complete, Queued, Rolling};
    if stored == now {
        return true;
    }
    let same = stored.name == now.name
        && stored.action == now.action
        && stored.version == now.version
        && stored.retried_at == now.retried_at;
    // What pointing the Deployment at its new Secret records.
    let pointed = |d: &crate::api::rotation_batch::BatchDeployment| {
        (d.vcap_secret.clone(), d.previous_vcap_secret.clone(), d.vcap_sha256.clone(), d.rolled_generation)
    };
    let moved = match (&stored.state, &now.state) {
        // Waiting its turn for the parallel-rollout budget (not a failed write: that says so).
        (Some(Queued), Some(Queued)) => {
            pointed(stored) == pointed(now)
                && now.message.as_deref().is_some_and(|m| m.ends_with(super::rollout::WAITS_ITS_TURN))
        }
        (Some(Queued), Some(Rolling | Complete)) => true,
        (Some(Rolling), Some(Rolling | Complete)) | (Some(Complete), Some(Complete)) => pointed(stored) == pointed(now),
        _ => false,
    };
    same && moved
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
const ROUTINE: [ReadyReason; 3] = [ReadyReason::WindowOpen, ReadyReason::RolloutComplete, ReadyReason::NoChange];

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
    let reason = condition_reason(status).unwrap_or(ReadyReason::RollingOut);
    let message = ready_condition(status).map(|c| c.message.clone()).unwrap_or_default();
    let mut out = Vec::new();
    // A person's hold only: the failure guard's halt and an unreadable window end on their own.
    let held_by_someone = condition_reason(old) == Some(ReadyReason::Held);
    if old.phase == BatchPhase::Held
        && held_by_someone
        && status.phase != BatchPhase::Held
        && reason != ReadyReason::Released
    {
        // Only a release recorded since the batch was held says who released it; a hold removed
        // another way (kubectl) is no release by whoever released last time.
        let held_since = ready_condition(old).and_then(|c| c.last_transition_time.as_ref()).map(|t| t.0);
        let fresh =
            batch.spec.released.as_ref().filter(|released| held_since.is_none_or(|since| released.at.0 >= since));
        let text = match fresh {
            Some(released) => user_action_text(released, "released"),
            None => "the hold was removed with no release record (not with capdeck release: the API server's \
                     audit log says who)"
                .to_string(),
        };
        let (note, log) = (format!("batch {name}: {text}"), Some(format!("batch released: {text}")));
        out.push(Announcement { warning: fresh.is_none(), reason: ReadyReason::Released.to_string(), note, log });
    }
    let warning = matches!(status.phase, BatchPhase::Failed)
        || [
            ReadyReason::StormGuard,
            ReadyReason::CredentialsExpiring,
            ReadyReason::RolloutFailureGuard,
            ReadyReason::DeadlineBeforeChangeWindow,
            ReadyReason::DeadlineDuringFreeze,
            ReadyReason::ChangeWindowUnreadable,
        ]
        .contains(&reason);
    let plain_start = routine && reason == ReadyReason::RollingOut;
    if warning || !(plain_start || ROUTINE.contains(&reason)) {
        out.push(Announcement {
            warning,
            reason: reason.to_string(),
            note: format!("batch {name}: {message}"),
            log: None,
        });
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
        let mut status = ready("RollingOut", ReadyReason::RollingOut.as_str(), "rolling");
        status.deployments = serde_json::from_value(json!([{"name": "srv", "version": "v", "workload": "srv",
            "action": "Restart", "state": state, "readyReplicas": replicas, "vcapSecret": "srv-new"}]))
        .expect("deployments");
        status
    }

    fn batch(spec: Value) -> RotationBatch {
        crate::api::rotation_batch::testing::batch(json!({"spec": spec}))
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

    const INTERVALS: (Duration, Duration) = (INTERVAL, STATUS_INTERVAL);

    fn queued(message: &str) -> RotationBatchStatus {
        let mut status = rolling(0, "Queued");
        let deployment = &mut status.deployments[0];
        (deployment.vcap_secret, deployment.message) = (None, Some(message.into()));
        status
    }

    /// While a batch rolls out, its own progress waits up to `STATUS_INTERVAL`; what a person
    /// must see is written at once.
    #[test]
    fn a_rollouts_progress_waits_what_a_person_must_see_does_not() {
        let wait = format!("queued: 5 {}", super::super::rollout::WAITS_ITS_TURN);
        let started = {
            let mut status = rolling(0, "Rolling");
            status.deployments[0].rolled_generation = Some(2);
            status
        };
        let mut acknowledged = rolling(1, "Rolling");
        acknowledged.observed_generation = Some(7);
        let mut moved = rolling(1, "Rolling");
        moved.deployments[0].vcap_secret = Some("srv-newer".into());
        let mut retried = rolling(1, "Queued");
        retried.deployments[0].retried_at = Some(serde_json::from_value(json!("2026-11-23T12:00:00Z")).expect("t"));
        let mut counted = rolling(2, "Complete");
        counted.progress = Some("1/2".into());
        let mut refused = rolling(1, "Rolling");
        refused.conditions.push(
            serde_json::from_value(json!({"type": Attributed::Hold.condition_type(), "status": "False",
                "reason": Attributed::Hold.refusal_reason(), "message": "kubectl wrote it"}))
            .expect("c"),
        );
        let done = RotationBatchStatus { phase: BatchPhase::Succeeded, ..rolling(2, "Complete") };
        let held = RotationBatchStatus { phase: BatchPhase::Held, ..rolling(1, "Rolling") };
        let mut evaluated = ready("RollingOut", ReadyReason::RollingOut.as_str(), "rolling");
        evaluated.tenants = Some(1);
        let cases: [(&str, RotationBatchStatus, RotationBatchStatus, Write); 14] = [
            ("replica counts", rolling(1, "Rolling"), rolling(2, "Rolling"), Write::Hold),
            ("a start after waiting its turn", queued(&wait), started.clone(), Write::Hold),
            ("waiting its turn", queued("queued"), queued(&wait), Write::Hold),
            ("a completion while others roll", rolling(1, "Rolling"), counted, Write::Hold),
            (
                "a failed write, retrying",
                queued(&wait),
                queued("could not update the Deployment: 500; retrying"),
                Write::Now,
            ),
            ("a Deployment failing", rolling(1, "Rolling"), rolling(1, "Failing"), Write::Now),
            ("a Deployment stalled", rolling(1, "Rolling"), rolling(1, "Stalled"), Write::Now),
            ("a Deployment failed", queued(&wait), rolling(0, "Failed"), Write::Now),
            ("another VCAP Secret", rolling(1, "Rolling"), moved, Write::Now),
            ("a retry", rolling(1, "Complete"), retried, Write::Now),
            ("a spec acknowledged", rolling(1, "Rolling"), acknowledged, Write::Now),
            ("a refusal", rolling(1, "Rolling"), refused, Write::Now),
            ("a new phase", rolling(1, "Rolling"), held, Write::Now),
            ("the evaluation", ready("RollingOut", ReadyReason::RollingOut.as_str(), "rolling"), evaluated, Write::Now),
        ];
        let recent = (Some(Duration::from_secs(30)), Some(Duration::from_secs(30)));
        for (what, stored, status, expected) in cases {
            assert_eq!(write_or_hold(&stored, &status, recent, INTERVALS), expected, "{what}");
        }
        assert_eq!(write_or_hold(&rolling(1, "Rolling"), &done, recent, INTERVALS), Write::Now, "the batch completed");
        let (stored, status) = (rolling(1, "Rolling"), rolling(2, "Rolling"));
        let long_ago = Some(Duration::from_secs(600));
        assert_eq!(
            write_or_hold(&stored, &status, (long_ago, Some(Duration::from_secs(61))), INTERVALS),
            Write::Now,
            "the stored progress lagged a minute"
        );
        assert_eq!(
            write_or_hold(&stored, &status, (long_ago, None), INTERVALS),
            Write::Hold,
            "the first change since the last write, however long ago: the minute starts now"
        );
        assert_eq!(
            write_or_hold(&stored, &status, (None, None), INTERVALS),
            Write::Hold,
            "a new leader: the minute starts now"
        );
        // Outside RollingOut (a batch waiting for its window with Deployments in flight): the
        // progress interval, as before.
        let waiting = |replicas| RotationBatchStatus { phase: BatchPhase::Waiting, ..rolling(replicas, "Rolling") };
        let after = |seconds| (Some(Duration::from_secs(seconds)), None);
        assert_eq!(write_or_hold(&waiting(1), &waiting(2), after(11), INTERVALS), Write::Now);
        assert_eq!(write_or_hold(&waiting(1), &waiting(2), after(3), INTERVALS), Write::Hold);
    }

    /// The next pass starts from the unwritten status while the stored batch is the one it was
    /// decided from (a notification recorded meanwhile aside); else from the stored status.
    #[test]
    fn a_pass_starts_from_the_unwritten_status_while_the_stored_one_is_unchanged() {
        let with = |status: &RotationBatchStatus, uid: &str| {
            let mut b = batch(json!({}));
            b.metadata.uid = Some(uid.into());
            b.status = Some(status.clone());
            b
        };
        let stored = queued("queued: 5 Deployments roll at once");
        let mut transitions = Transitions::default();
        let stored_batch = with(&stored, "u1");
        assert_eq!(transitions.base(&stored_batch), stored, "nothing held");
        let step = |status: RotationBatchStatus| Step { status, said: None, sent: false };
        transitions.hold(&stored_batch, &stored, None, step(rolling(1, "Rolling")));
        assert_eq!(transitions.base(&stored_batch), rolling(1, "Rolling"));
        let mut notified = stored.clone();
        notified.notifications =
            serde_json::from_value(json!([{"event": "held", "key": "k", "at": "2026-11-23T12:00:00Z", "by": "e"}]))
                .expect("n");
        let base = transitions.base(&with(&notified, "u1"));
        assert_eq!(base.deployments, rolling(1, "Rolling").deployments, "the notifier's write changes nothing else");
        assert_eq!(base.notifications, notified.notifications, "and its record is kept");
        let elsewhere = rolling(2, "Complete");
        assert_eq!(transitions.base(&with(&elsewhere, "u1")), elsewhere, "another engine wrote the status");
        assert_eq!(transitions.base(&with(&stored, "u2")), stored, "a new batch of the same name");
        transitions.forget_closed(&std::collections::BTreeSet::new());
        assert_eq!(transitions.base(&stored_batch), stored, "a batch no longer open is forgotten");
    }

    /// A held start keeps what it has to say, and so does the completion held after it. A status
    /// whose write was sent and answered with an error, found stored after all (`state`, the
    /// notifier's record and sub-second times aside), hands back what the steps up to it had to
    /// say, once; the steps after it stay held, decided from it. While the stored status is the
    /// one they were decided from, or another engine wrote something else, nothing is handed back.
    #[test]
    fn a_held_status_that_landed_hands_back_what_it_had_to_say() {
        let with = |status: &RotationBatchStatus| {
            let mut b = batch(json!({"approval": {"approvedBy": "sre", "reason": "CHG-9"}}));
            b.metadata.uid = Some("u1".into());
            b.status = Some(status.clone());
            b
        };
        let at = |phase: &str, reason: ReadyReason, time: &str| {
            let mut status = ready(phase, reason.as_str(), "said");
            status.conditions[0].last_transition_time =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(time.parse().expect("time")));
            status
        };
        let waiting = at("AwaitingApproval", ReadyReason::AwaitingApproval, "2026-11-29T21:00:00Z");
        // Decided at times with nanoseconds; the API server keeps seconds.
        let approved = at("RollingOut", ReadyReason::Approved, "2026-11-29T22:00:00.123456789Z");
        let failed = at("Failed", ReadyReason::ProgressDeadlineExceeded, "2026-11-29T22:05:00.5Z");
        fn reasons(said: &[Said]) -> Vec<String> {
            said.iter()
                .flat_map(|s| s.transition.iter().flat_map(|t| &t.announcements))
                .map(|a| a.reason.clone())
                .collect()
        }
        let start = Said::of(&with(&waiting), &waiting, &approved, false);
        assert_eq!(reasons(start.as_slice()), ["Approved"]);
        let end = Said::of(&with(&waiting), &approved, &failed, false);
        assert_eq!(reasons(end.as_slice()), ["ProgressDeadlineExceeded"]);
        assert!(Said::of(&with(&approved), &approved, &approved, false).is_none(), "no change, nothing to say");
        let mut transitions = Transitions::default();
        transitions.hold(&with(&waiting), &waiting, None, Step { status: approved.clone(), said: start, sent: true });
        let unwritten = transitions.unwritten.remove(&batch_key(&with(&waiting)));
        transitions.hold(&with(&waiting), &waiting, unwritten, Step { status: failed.clone(), said: end, sent: true });
        assert!(transitions.landed(&with(&waiting), &waiting).is_empty(), "still held: said when written");
        let elsewhere = ready("Held", ReadyReason::Held.as_str(), "held by bob");
        assert!(transitions.landed(&with(&elsewhere), &elsewhere).is_empty(), "another status: not this one's");
        // What the API server gives back: the status through its JSON.
        let stored = |status: &RotationBatchStatus| {
            let mut stored: RotationBatchStatus =
                serde_json::from_value(serde_json::to_value(status).expect("json")).expect("status");
            assert_ne!(&stored, status, "the times lost their fractions");
            stored.state = Some(status.phase.to_string());
            stored.notifications =
                serde_json::from_value(json!([{"event": "e", "key": "k", "at": "2026-11-23T12:00:00Z", "by": "x"}]))
                    .expect("n");
            stored
        };
        // The start landed; the end is still held, now decided from it.
        let started = stored(&approved);
        assert_eq!(reasons(&transitions.landed(&with(&started), &started)), ["Approved"]);
        assert!(transitions.landed(&with(&started), &started).is_empty(), "handed back once");
        assert_eq!(transitions.base(&with(&started)).phase, failed.phase, "the end is still the base");
        // Then the end landed too.
        let ended = stored(&failed);
        assert_eq!(reasons(&transitions.landed(&with(&ended), &ended)), ["ProgressDeadlineExceeded"]);
        assert_eq!(transitions.base(&with(&ended)), ended, "nothing held: the stored status is the base");
    }

    /// Writes that keep failing (a batch someone keeps touching, each write a 409) hold at most
    /// `MAX_STEPS` statuses: the oldest with nothing to say go; what a transition has to say and
    /// the status the next pass starts from stay.
    #[test]
    fn held_statuses_are_bounded_and_keep_what_they_have_to_say() {
        let waiting = ready("AwaitingApproval", ReadyReason::AwaitingApproval.as_str(), "approve to roll");
        let approved = ready("RollingOut", ReadyReason::Approved.as_str(), "approved by sre");
        let mut b = batch(json!({}));
        b.metadata.uid = Some("u1".into());
        b.status = Some(waiting.clone());
        let said = Said::of(&b, &waiting, &approved, false);
        assert!(said.is_some());
        let mut transitions = Transitions::default();
        transitions.hold(&b, &waiting, None, Step { status: approved, said, sent: true });
        for replicas in 0..40 {
            let unwritten = transitions.unwritten.remove(&batch_key(&b));
            transitions.hold(
                &b,
                &waiting,
                unwritten,
                Step { status: rolling(replicas, "Rolling"), said: None, sent: true },
            );
        }
        let held = transitions.unwritten.get(&batch_key(&b)).expect("held");
        assert_eq!(held.steps.len(), MAX_STEPS);
        assert!(held.steps[0].said.is_some(), "the approval is still to be said");
        assert_eq!(transitions.base(&b), rolling(39, "Rolling"), "the next pass starts from the last");
    }

    #[test]
    fn a_refused_attribution_is_announced_once_per_message() {
        let refused = |message: &str| {
            let mut status = ready("AwaitingApproval", ReadyReason::AwaitingApproval.as_str(), "waiting");
            status.conditions.push(
                serde_json::from_value(json!({"type": Attributed::Approval.condition_type(),
                "status": "False", "reason": Attributed::Approval.refusal_reason(), "message": message}))
                .expect("c"),
            );
            status
        };
        let plain = ready("AwaitingApproval", ReadyReason::AwaitingApproval.as_str(), "waiting");
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
        let old = ready("Collecting", ReadyReason::WindowOpen.as_str(), "collecting");
        assert!(announcements(&spec, &old, &old, false).is_empty(), "no transition, no Event");
        let cases = [
            (ready("RollingOut", ReadyReason::RollingOut.as_str(), "rolling now (--on-deadline roll): …"), false),
            (ready("RollingOut", ReadyReason::Forced.as_str(), "forced by alice"), false),
            (ready("RollingOut", ReadyReason::Approved.as_str(), "approved by alice"), false),
            (ready("Failed", ReadyReason::WriteFailed.as_str(), "failed"), true),
            (ready("AwaitingApproval", ReadyReason::StormGuard.as_str(), "guard"), true),
            (ready("AwaitingApproval", ReadyReason::CredentialsExpiring.as_str(), "expiring"), true),
            (ready("Held", ReadyReason::RolloutFailureGuard.as_str(), "halted"), true),
            (ready("AwaitingApproval", ReadyReason::AwaitingApproval.as_str(), "waiting"), false),
            (ready("Waiting", ReadyReason::OutsideChangeWindow.as_str(), "waits"), false),
            (ready("Held", ReadyReason::Held.as_str(), "held by bob"), false),
            (ready("Superseded", ReadyReason::Superseded.as_str(), "superseded"), false),
        ];
        for (new, warning) in cases {
            let said = announcements(&spec, &old, &new, false);
            let reason = condition_reason(&new).unwrap_or_default().to_string();
            let message = &new.conditions[0].message;
            let expected = Announcement { warning, reason, note: format!("batch b: {message}"), log: None };
            assert_eq!(said, [expected], "{:?}", new.phase);
        }
        // Same phase, a new reason: a transition too.
        let escalated = ready("Collecting", ReadyReason::CredentialsExpiring.as_str(), "expiring");
        assert_eq!(announcements(&spec, &old, &escalated, false).len(), 1);
    }

    /// The happy path is told by the batch and the log, not by Events: the window opened, it ended
    /// (a routine start), the rollout completed, nothing to restart.
    #[test]
    fn routine_transitions_are_no_event() {
        let spec = batch(json!({}));
        let none = RotationBatchStatus::default();
        let collecting = ready("Collecting", ReadyReason::WindowOpen.as_str(), "collecting");
        let rolling = ready("RollingOut", ReadyReason::RollingOut.as_str(), "window ended; rolling out");
        assert!(announcements(&spec, &none, &collecting, true).is_empty(), "the window opened");
        assert!(announcements(&spec, &collecting, &rolling, true).is_empty(), "the window ended");
        let done = ready("Succeeded", ReadyReason::RolloutComplete.as_str(), "1 Deployment rolled out");
        assert!(announcements(&spec, &rolling, &done, false).is_empty(), "the rollout completed");
        let nothing = ready("NoChange", ReadyReason::NoChange.as_str(), "all up to date");
        assert!(announcements(&spec, &collecting, &nothing, false).is_empty(), "nothing to restart");
        // The same start from a decision that is not routine (it overrode something): announced.
        assert_eq!(announcements(&spec, &collecting, &rolling, false).len(), 1);
        // A routine decision whose rollout failed at once is a failure: a Warning.
        let failed = ready("Failed", ReadyReason::WriteFailed.as_str(), "could not write");
        assert!(announcements(&spec, &collecting, &failed, true)[0].warning);
    }

    /// A batch without a status collects: that is not written; anything more is.
    #[test]
    fn a_merely_collecting_status_is_not_written() {
        let mut collecting = ready("Collecting", ReadyReason::WindowOpen.as_str(), "collecting rotations until …");
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
        let escalated = ready("Collecting", ReadyReason::CredentialsExpiring.as_str(), "expiring");
        assert!(!merely_collecting(&escalated), "a new reason is written");
        assert!(!merely_collecting(&ready("Held", ReadyReason::Held.as_str(), "held")), "a hold is written");
        assert!(!merely_collecting(&RotationBatchStatus { tenants: Some(3), ..collecting }), "an evaluation");
    }

    #[test]
    fn a_release_that_ends_a_hold_is_announced_before_the_new_phase() {
        let released = batch(json!({"released": {"by": "carol", "at": "2026-11-23T12:00:00Z", "reason": "ok"}}));
        let held = ready("Held", ReadyReason::Held.as_str(), "held by bob");
        let said =
            announcements(&released, &held, &ready("RollingOut", ReadyReason::RollingOut.as_str(), "rolling"), false);
        assert_eq!(said.len(), 2);
        assert_eq!(said[0].reason, ReadyReason::Released.as_str());
        assert_eq!(said[0].note, "batch b: released by carol: ok");
        assert_eq!(said[0].log.as_deref(), Some("batch released: released by carol: ok"));
        // A failure-guard release says so in its own condition: not twice.
        let resumed = announcements(
            &released,
            &held,
            &ready("RollingOut", ReadyReason::Released.as_str(), "released by carol"),
            false,
        );
        assert_eq!(resumed.len(), 1);
        // A release that lets the window's routine start go on: the release alone.
        let routine =
            announcements(&released, &held, &ready("RollingOut", ReadyReason::RollingOut.as_str(), "rolling"), true);
        assert_eq!(routine.iter().map(|a| a.reason.as_str()).collect::<Vec<_>>(), [ReadyReason::Released.as_str()]);
        // Without a recorded release, or with only one older than the hold (a hold removed by
        // hand): a warning that names nobody, never the last person who released it.
        let stale = batch(json!({"released": {"by": "carol", "at": "2026-11-23T11:00:00Z", "reason": "ok"}}));
        for unrecorded in [batch(json!({})), stale] {
            let said = announcements(
                &unrecorded,
                &held,
                &ready("RollingOut", ReadyReason::RollingOut.as_str(), "rolling"),
                false,
            );
            assert_eq!(said.len(), 2);
            assert!(said[0].warning, "{:?}", said[0]);
            assert!(said[0].note.contains("the hold was removed with no release record"), "{}", said[0].note);
            assert!(!said[0].note.contains("carol"), "{}", said[0].note);
        }
        // The failure guard's halt and an unreadable window end on their own: no release, no
        // warning about a hold someone removed.
        for (why, text) in [
            (ReadyReason::RolloutFailureGuard, "halted: srv is failing"),
            (ReadyReason::ChangeWindowUnreadable, "the change windows do not parse"),
        ] {
            let halted = ready("Held", why.as_str(), text);
            let said = announcements(
                &batch(json!({})),
                &halted,
                &ready(
                    "RollingOut",
                    ReadyReason::RollingOut.as_str(),
                    "what halted the batch completed after all; rolling out",
                ),
                false,
            );
            assert!(said.iter().all(|a| a.reason != ReadyReason::Released.as_str() && !a.warning), "{why}: {said:?}");
        }
    }
}
