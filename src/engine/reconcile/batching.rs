//! Opening and closing batches: pending rotations join the application's collecting batch, or
//! open a new one that supersedes (closes) the batches which have not started rolling. The part
//! owns each application's backoff after a failed attempt.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::backoff::Backoff;
use super::detect::{Detection, Opener, Rotations};
use super::managed_fields::ManagedFields;
use super::status::{format_time, set_condition};
use super::{AppKey, Context, batch_key};
use crate::api::rotation_batch::{ReadyReason, RotatedSecret, UserAction};
use crate::api::{BatchPhase, CAPApplication, RotationBatch, RotationBatchStatus};
use crate::engine::config::ApprovalPolicy;

/// Where an application's new rotations go, given its open batches.
#[derive(Debug, PartialEq)]
pub enum Placement<'a> {
    /// A batch still collecting (not cancelled, not evaluated): the rotations join it.
    Join(&'a RotationBatch),
    /// A new batch; these open ones (not cancelled, not rolling yet) are superseded by it and
    /// hand over their rotations and hold.
    Open { superseded: Vec<&'a RotationBatch> },
}

/// Pure: choose where new rotations of one application go (its open batches, oldest first).
pub fn placement(open: &[Arc<RotationBatch>]) -> Placement<'_> {
    match open.iter().find(|b| collecting(b)) {
        Some(batch) => Placement::Join(batch),
        None => Placement::Open { superseded: open.iter().map(|b| &**b).filter(|b| supersedable(b)).collect() },
    }
}

/// Not cancelled, not rolling yet: a new batch supersedes it.
fn supersedable(batch: &RotationBatch) -> bool {
    batch.spec.cancel.is_none() && batch.status.as_ref().is_none_or(|status| status.rollout_started_at.is_none())
}

/// Supersedable and not evaluated yet: new rotations join it.
fn collecting(batch: &RotationBatch) -> bool {
    supersedable(batch) && batch.status.as_ref().is_none_or(|status| status.deployments.is_empty())
}

/// Pure: batches left open beside the collecting batch of their application (open batches,
/// oldest first), each with the batch it joins. A new batch supersedes the others as it opens,
/// but its create can be made and answered with an error (kube-apiserver's 504), the engine can
/// stop between the two writes, or the supersede write can fail: two batches would then roll the
/// same Deployments. Only what the engine's own opening would have done is done: the collecting
/// batch must look like one the engine opened (it collects for at most `longest_window` after its
/// creation: a batch made by hand with a window years long collects nothing of others), and a
/// batch with a hold or a force is superseded only by one that carries the very same hold or
/// force (what an opening copies); any other is left to the person who set it.
pub fn left_open(open: &[Arc<RotationBatch>], longest_window: Duration) -> Vec<(&RotationBatch, &RotationBatch)> {
    let mut by_application: BTreeMap<(Option<String>, &str), Vec<&RotationBatch>> = BTreeMap::new();
    for batch in open {
        by_application.entry((batch.namespace(), batch.spec.application.as_str())).or_default().push(batch);
    }
    let mut found = Vec::new();
    for batches in by_application.values() {
        // The one rotations join (`placement`).
        let Some(survivor) = batches.iter().copied().find(|b| collecting(b)) else { continue };
        let window = survivor.metadata.creation_timestamp.as_ref().map(|created| {
            Duration::try_from(survivor.spec.window_end.0.duration_since(created.0)).unwrap_or(Duration::ZERO)
        });
        if window.is_some_and(|window| window > longest_window) {
            continue;
        }
        let carried = |b: &RotationBatch| {
            (b.spec.hold.is_none() || b.spec.hold == survivor.spec.hold)
                && (b.spec.force.is_none() || b.spec.force == survivor.spec.force)
        };
        for stale in batches.iter().copied() {
            if !std::ptr::eq(stale, survivor) && supersedable(stale) && carried(stale) {
                found.push((stale, survivor));
            }
        }
    }
    found
}

/// The collecting batch with the rotations joined: a Secret rotated again replaces its entry.
fn joined(batch: &RotationBatch, rotations: &Rotations) -> RotationBatch {
    let mut joined = batch.clone();
    for secret in rotations.values() {
        match joined.spec.secrets.iter_mut().find(|s| s.name == secret.name) {
            Some(existing) => *existing = secret.clone(),
            None => joined.spec.secrets.push(secret.clone()),
        }
    }
    joined
}

/// A new batch's Secrets: those of the batches it supersedes, the new rotations over them.
fn carried_secrets(superseded: &[&RotationBatch], rotations: &Rotations) -> Vec<RotatedSecret> {
    let mut secrets: BTreeMap<String, RotatedSecret> = BTreeMap::new();
    for old in superseded {
        for secret in &old.spec.secrets {
            secrets.insert(secret.name.clone(), secret.clone());
        }
    }
    secrets.extend(rotations.clone());
    secrets.into_values().collect()
}

/// When a batch opened at `now` stops collecting: after `--rollout-delay`.
fn window_end(now: Timestamp, delay: Duration) -> Timestamp {
    let window = k8s_openapi::jiff::SignedDuration::try_from(delay).unwrap_or_default();
    now.checked_add(window).unwrap_or(now)
}

/// The Event of a new batch: what opened it and until when it collects.
fn opening_note(opener: Option<&Opener>, rotations: &Rotations, batch: &str, window_end: Timestamp) -> String {
    let names: Vec<&str> = rotations.keys().map(String::as_str).collect();
    let cause = match opener {
        Some(Opener::Recheck) => format!("the re-check found Deployments out of date (inputs: {})", names.join(", ")),
        Some(Opener::RollForward { batch: from, retry }) => format!(
            "rolls forward what batch {from} left on old credentials ({}; inputs: {})",
            retry
                .as_ref()
                .map_or_else(|| "retried".to_string(), |retry| super::status::user_action_text(retry, "retried")),
            names.join(", ")
        ),
        None => format!("credentials rotated ({})", names.join(", ")),
    };
    format!("{cause}; batch {batch} collects until {}", format_time(window_end))
}

/// The status that closes a batch superseded by `by`, and its message.
fn superseded_status(old: &RotationBatch, by: &str, now: Timestamp) -> (RotationBatchStatus, String) {
    let mut status = old.status.clone().unwrap_or_default();
    status.phase = BatchPhase::Superseded;
    status.superseded_by = Some(by.to_string());
    status.completed_at = Some(Time(now));
    // The newer batch plans for these rotations.
    status.planned = None;
    let message = format!("superseded by {by}, which carries these rotations and newer ones");
    set_condition(&mut status, false, &ReadyReason::Superseded, message.clone(), now);
    (status, message)
}

/// While a batch rolls out, at most this many applications' rotations are put into batches
/// (opened or joined) in one pass, which then drives the open batches, oldest first; the others
/// wait for the next pass, which comes at once. A pass writes one thing after another at the
/// write rate (`--write-qps`): a storm of a thousand new batches must not stand between a rolling
/// batch and its next Deployment.
pub(super) const OPENINGS_PER_PASS_WHILE_ROLLING: usize = 10;

#[derive(Default)]
pub(super) struct Batching {
    /// Applications whose rotations could not be put into a batch.
    backoff: Backoff<AppKey>,
    /// Rotations left for the next pass (the opening budget was spent): it comes at once.
    deferred: bool,
    /// The last application whose rotations a pass put into a batch: the next begins after it.
    reached: Option<AppKey>,
}

impl Batching {
    /// An observer opens nothing: no application waits.
    pub(super) fn forget_backoff(&mut self) {
        self.backoff = Backoff::default();
    }

    /// How long until an application that failed may be tried again.
    pub(super) fn next_retry(&self, now: tokio::time::Instant) -> Option<Duration> {
        if self.deferred {
            return Some(Duration::ZERO);
        }
        self.backoff.next(now)
    }

    /// Close the batches left open beside their application's collecting batch (`left_open`):
    /// the collecting batch first takes the Secrets it does not list yet. A failed write is tried
    /// again after the application's backoff (the batches are still found then).
    pub(super) async fn supersede_left_open(&mut self, context: &Context, open: &[Arc<RotationBatch>], now: Timestamp) {
        let instant = tokio::time::Instant::now();
        // The window an opening gives, with a minute for a clock or a store that lags.
        let longest_window = context.config.rollout_delay.saturating_add(Duration::from_secs(60));
        for (stale, survivor) in left_open(open, longest_window) {
            let namespace = stale.namespace().unwrap_or_default();
            let key = AppKey::new(namespace.clone(), &stale.spec.application);
            if self.backoff.waiting(&key, instant) {
                continue;
            }
            let Some(app) = context.application(&namespace, &stale.spec.application) else { continue };
            let missing: Rotations = stale
                .spec
                .secrets
                .iter()
                .filter(|secret| survivor.spec.secrets.iter().all(|listed| listed.name != secret.name))
                .map(|secret| (secret.name.clone(), secret.clone()))
                .collect();
            tracing::warn!(namespace = %namespace, batch = %stale.name_any(), application = %stale.spec.application,
                "batch {} was left open beside {}, which collects its rotations (a create answered with an error it made, \
                 or an engine stopped before it closed it): superseding it", stale.name_any(), survivor.name_any());
            let done = (missing.is_empty() || join(context, &app, survivor, &missing).await)
                && supersede(context, &app, stale, &survivor.name_any(), now).await;
            self.backoff.record(&key, !done, instant);
        }
    }

    /// Put pending rotations into batches. Applications whose last attempt failed wait for
    /// their own backoff; the others go on, [`OPENINGS_PER_PASS_WHILE_ROLLING`] of them while a
    /// batch rolls out, taken in turn: the next pass begins after the last application this one
    /// reached, so no application keeps the others waiting by rotating again and again.
    pub(super) async fn open_or_join(
        &mut self,
        context: &Context,
        open: &[Arc<RotationBatch>],
        (detection, fields): (&mut Detection, &mut ManagedFields),
        now: Timestamp,
    ) {
        let instant = tokio::time::Instant::now();
        let pending = detection.take_pending();
        self.backoff.forget_except(&pending.keys().cloned().collect());
        let rolling = open.iter().any(|batch| batch.phase() == BatchPhase::RollingOut);
        let mut budget = if rolling { OPENINGS_PER_PASS_WHILE_ROLLING } else { usize::MAX };
        self.deferred = false;
        // In turn: those after the last one reached, then the others.
        let (later, earlier): (Vec<_>, Vec<_>) =
            pending.into_iter().partition(|(key, _)| self.reached.as_ref().is_some_and(|reached| key > reached));
        for (key, rotations) in later.into_iter().chain(earlier) {
            if self.backoff.waiting(&key, instant) {
                detection.keep_pending(key, rotations);
                continue;
            }
            if budget == 0 {
                detection.keep_pending(key, rotations);
                self.deferred = true;
                continue;
            }
            let Some(app) = context.application(&key.namespace, &key.name) else { continue };
            if !app.rollout_opted_in() {
                continue;
            }
            // Spent on a write (a batch opened or joined), not on what is dropped above.
            budget -= 1;
            self.reached = Some(key.clone());
            let open: Vec<Arc<RotationBatch>> = open
                .iter()
                .filter(|b| batch_key(b).namespace == key.namespace && b.spec.application == key.name)
                .cloned()
                .collect();
            let placed = match placement(&open) {
                Placement::Join(batch) => join(context, &app, batch, &rotations).await,
                Placement::Open { superseded } => {
                    let opening = Opening { app: &app, key: &key, superseded: &superseded, rotations: &rotations };
                    open_batch(context, detection, fields, opening, now).await
                }
            };
            self.backoff.record(&key, !placed, instant);
            if !placed {
                detection.keep_pending(key, rotations);
            }
        }
    }
}

async fn join(context: &Context, app: &CAPApplication, batch: &RotationBatch, rotations: &Rotations) -> bool {
    let joined = joined(batch, rotations);
    match context.writes.replace_batch(&joined).await {
        Ok(_) => {
            // Routine: a log line, no Event (the batch's spec lists the Secret and when it rotated).
            let names: Vec<&str> = rotations.keys().map(String::as_str).collect();
            let (namespace, application) = (app.namespace().unwrap_or_default(), app.name_any());
            tracing::info!(namespace = %namespace, batch = %joined.name_any(), application = %application,
                "batch Collecting: rotation of {} joined batch {}", names.join(", "), joined.name_any());
            true
        }
        Err(error) => {
            tracing::warn!(batch = %joined.name_any(), error = %crate::cluster::describe_error(&error), "could not add rotated secrets to the batch; retrying");
            false
        }
    }
}

/// A new batch for an application: what it is for.
struct Opening<'a> {
    app: &'a CAPApplication,
    key: &'a AppKey,
    superseded: &'a [&'a RotationBatch],
    rotations: &'a Rotations,
}

/// Open the batch (carrying the superseded ones' Secrets, honoured hold and force), then close those
/// it supersedes. `false`: nothing opened, tried again after the application's backoff.
async fn open_batch(
    context: &Context,
    detection: &mut Detection,
    fields: &mut ManagedFields,
    opening: Opening<'_>,
    now: Timestamp,
) -> bool {
    let Opening { app, key, superseded, rotations } = opening;
    let Some(hold) = hold_to_carry(context, fields, superseded).await else { return false };
    let opener = detection.take_opener(key);
    // A person asked to roll forward: the batch collects nothing more (its approval policy,
    // windows and freezes still apply).
    let delay = match opener {
        Some(Opener::RollForward { .. }) => Duration::ZERO,
        _ => context.config.rollout_delay,
    };
    let window_end = window_end(now, delay);
    let required = ApprovalPolicy::for_application(app, context.config.approval) == ApprovalPolicy::Manual;
    let secrets = carried_secrets(superseded, rotations);
    // A force is carried too: the person who forced it wanted it rolled, windows or not.
    let force = superseded.iter().find_map(|batch| batch.spec.force.clone());
    let rolls_forward = match &opener {
        Some(Opener::RollForward { batch, .. }) => Some(batch.clone()),
        _ => None,
    };
    let created = match context
        .writes
        .create_batch(app, secrets, window_end, required, (hold, force, rolls_forward))
        .await
    {
        Ok(created) => created,
        Err(error) => {
            tracing::warn!(application = %key.name, error = %crate::cluster::describe_error(&error), "could not open a rotation batch; retrying");
            if let Some(opener) = opener {
                detection.keep_opener(key.clone(), opener);
            }
            return false;
        }
    };
    // Routine: the transition's log line, no Event. The batch has no status while it collects
    // (its phase reads Collecting until spec.windowEnd); its spec says what rotated and when.
    let note = opening_note(opener.as_ref(), rotations, &created.name_any(), window_end);
    tracing::info!(namespace = %key.namespace, batch = %created.name_any(), application = %key.name, "batch Collecting: {note}");
    for old in superseded {
        supersede(context, app, old, &created.name_any(), now).await;
    }
    true
}

/// Close a batch the new one supersedes (`old` as this engine decided it: the patch is worked out
/// against the stored object, so what it no longer has is cleared). `false`: not written.
async fn supersede(context: &Context, app: &CAPApplication, old: &RotationBatch, by: &str, now: Timestamp) -> bool {
    let (status, message) = superseded_status(old, by, now);
    let stored = context.stores.batches.find(old.namespace().as_deref(), &old.name_any());
    match context.writes.write_status(stored.as_deref().unwrap_or(old), &status).await {
        Ok(_) => {
            let text = format!("batch {}: {message}", old.name_any());
            context.writes.event(app, old, false, ReadyReason::Superseded.as_str(), text).await;
            true
        }
        Err(error) => {
            tracing::warn!(batch = %old.name_any(), error = %crate::cluster::describe_error(&error), "could not mark the batch superseded");
            false
        }
    }
}

/// The hold the new batch carries from those it supersedes: one the engine honours
/// (`decide::attribution_check`), never a forged one, which the new batch would otherwise make
/// the engine's own. `Some(None)`: nothing to carry; `None`: who wrote it cannot be read now
/// (the batch opens on a later pass).
async fn hold_to_carry(
    context: &Context,
    fields: &mut ManagedFields,
    superseded: &[&RotationBatch],
) -> Option<Option<UserAction>> {
    let Some(held) = superseded.iter().find(|batch| batch.spec.hold.is_some()) else { return Some(None) };
    let attributed = fields.attach(context.writes.client(), &Arc::new((*held).clone())).await?;
    match super::decide::attribution_check(&attributed, super::decide::Attributed::Hold) {
        Ok(()) => Some(held.spec.hold.clone()),
        Err(why) => {
            tracing::warn!(batch = %held.name_any(), "the batch that supersedes it does not carry its hold: {why}");
            Some(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn batch(name: &str, status: Value, cancelled: bool) -> Arc<RotationBatch> {
        let spec = if cancelled { json!({"cancel": {"by": "carol", "at": "2026-11-23T11:00:00Z"}}) } else { json!({}) };
        Arc::new(crate::api::rotation_batch::testing::batch(
            json!({"metadata": {"name": name}, "spec": spec, "status": status}),
        ))
    }

    fn names(batches: &[&RotationBatch]) -> Vec<String> {
        batches.iter().map(|b| b.name_any()).collect()
    }

    fn now() -> Timestamp {
        "2026-11-23T12:00:00Z".parse().expect("time")
    }

    fn rotated(name: &str, hash: &str) -> RotatedSecret {
        RotatedSecret {
            name: name.into(),
            service: format!("{name}-service"),
            rotated_at: Time(now()),
            data_hash: hash.into(),
        }
    }

    fn rotations(secrets: &[RotatedSecret]) -> Rotations {
        secrets.iter().map(|s| (s.name.clone(), s.clone())).collect()
    }

    fn with_secrets(name: &str, secrets: &[RotatedSecret]) -> RotationBatch {
        let mut batch = (*batch(name, Value::Null, false)).clone();
        batch.spec.secrets = secrets.to_vec();
        batch
    }

    /// The batches a pass finds left open beside their application's collecting batch, over the
    /// kinds of batch there are: evaluated and waiting, rolling, cancelled, held or forced (by the
    /// hold the collecting one carries, or another), a second collecting one, another
    /// application's; and collecting batches an opening gives or none would (a year-long window).
    #[test]
    fn batches_left_open_beside_the_collecting_one_are_found_and_no_others() {
        let evaluated = json!({"phase": "AwaitingApproval", "deployments": [{"name": "srv", "version": "v", "workload": "srv", "action": "Restart"}]});
        let with = |name: &str, spec: Value, status: Value| {
            Arc::new(crate::api::rotation_batch::testing::batch(
                json!({"metadata": {"name": name}, "spec": spec, "status": status}),
            ))
        };
        let app = |extra: Value| {
            let mut spec = json!({"application": "bookshop"});
            crate::api::rotation_batch::testing::merge(&mut spec, extra);
            spec
        };
        let hold = json!({"hold": {"by": "bob", "at": "2026-11-23T11:00:00Z"}});
        let other_hold = json!({"hold": {"by": "mallory", "at": "2026-11-23T11:00:00Z"}});
        let force = json!({"force": {"by": "bob", "at": "2026-11-23T11:00:00Z"}});
        let started = json!({"phase": "RollingOut", "rolloutStartedAt": "2026-11-23T11:00:00Z", "deployments": []});
        let awaiting = with("awaiting", app(json!({})), evaluated.clone());
        let rolling = with("rolling", app(json!({})), started);
        let cancelled =
            with("cancelled", app(json!({"cancel": {"by": "carol", "at": "2026-11-23T11:00:00Z"}})), evaluated.clone());
        let held = with("held", app(hold.clone()), evaluated.clone());
        let forced = with("forced", app(force), evaluated.clone());
        let other = with("other", json!({"application": "travel"}), evaluated);
        let collecting = with("collecting", app(json!({})), Value::Null);
        let collecting_held = with("collecting-held", app(hold), Value::Null);
        let collecting_other_hold = with("collecting-other-hold", app(other_hold), Value::Null);
        let later = with("later", app(json!({})), Value::Null);
        // Made by hand: created at 12:00, collecting for a year.
        let year_long = Arc::new(crate::api::rotation_batch::testing::batch(json!({
            "metadata": {"name": "year-long", "creationTimestamp": "2026-11-23T12:00:00Z"},
            "spec": {"application": "bookshop", "windowEnd": "2027-11-23T12:00:00Z"}
        })));
        let opened = Arc::new(crate::api::rotation_batch::testing::batch(json!({
            "metadata": {"name": "opened", "creationTimestamp": "2026-11-23T12:00:00Z"},
            "spec": {"application": "bookshop", "windowEnd": "2026-11-23T12:00:30Z"}
        })));
        let found = |open: &[Arc<RotationBatch>]| -> Vec<(String, String)> {
            let longest = Duration::from_secs(90);
            left_open(open, longest)
                .into_iter()
                .map(|(stale, survivor)| (stale.name_any(), survivor.name_any()))
                .collect()
        };
        let pair = |stale: &str, survivor: &str| (stale.to_string(), survivor.to_string());
        assert_eq!(found(&[awaiting.clone(), collecting.clone()]), [pair("awaiting", "collecting")]);
        assert_eq!(found(&[awaiting.clone(), opened]), [pair("awaiting", "opened")], "a window an opening gives");
        assert_eq!(found(&[awaiting.clone(), year_long]), [], "a window no opening gives: made by hand");
        assert_eq!(found(std::slice::from_ref(&awaiting)), [], "nothing collects: nothing was left open");
        assert_eq!(found(&[rolling, cancelled, other, collecting.clone()]), [], "rolling, cancelled, another's");
        assert_eq!(found(&[held.clone(), forced, collecting.clone()]), [], "a hold or force it does not carry");
        assert_eq!(found(&[held.clone(), collecting_other_hold]), [], "another person's hold is not this one");
        assert_eq!(found(&[held, collecting_held]), [pair("held", "collecting-held")], "the very hold it carries");
        assert_eq!(
            found(&[awaiting, collecting, later]),
            [pair("awaiting", "collecting"), pair("later", "collecting")],
            "two collecting: rotations join the first, which closes the other"
        );
    }
    #[test]
    fn rotations_join_a_collecting_batch_and_supersede_the_unstarted_ones() {
        let collecting = batch("collecting", Value::Null, false);
        let awaiting = batch(
            "awaiting",
            json!({"phase": "AwaitingApproval", "deployments": [{"name": "srv", "version": "v", "workload": "srv", "action": "Restart"}]}),
            false,
        );
        let rolling = batch(
            "rolling",
            json!({"phase": "RollingOut", "rolloutStartedAt": "2026-11-23T11:00:00Z", "deployments": [{"name": "srv", "version": "v", "workload": "srv", "action": "Restart"}]}),
            false,
        );
        let cancelled = batch("cancelled", Value::Null, true);

        assert_eq!(placement(&[awaiting.clone(), collecting.clone()]), Placement::Join(&collecting));
        match placement(&[awaiting.clone(), rolling.clone(), cancelled.clone()]) {
            Placement::Open { superseded } => {
                assert_eq!(names(&superseded), ["awaiting"], "a rolling or cancelled batch is never superseded")
            }
            other => panic!("expected a new batch, got {other:?}"),
        }
        match placement(&[cancelled]) {
            Placement::Open { superseded } => assert!(superseded.is_empty(), "a cancelled batch collects nothing"),
            other => panic!("expected a new batch, got {other:?}"),
        }
        assert_eq!(placement(&[]), Placement::Open { superseded: vec![] });
    }

    #[test]
    fn a_secret_rotated_again_replaces_its_entry_in_the_collecting_batch() {
        let collecting = with_secrets("b", &[rotated("uaa", "h1"), rotated("db", "h1")]);
        let joined = joined(&collecting, &rotations(&[rotated("db", "h2"), rotated("mq", "h1")]));
        let secrets: Vec<(&str, &str)> =
            joined.spec.secrets.iter().map(|s| (s.name.as_str(), s.data_hash.as_str())).collect();
        assert_eq!(secrets, [("uaa", "h1"), ("db", "h2"), ("mq", "h1")], "kept in order, new ones appended");
        assert_eq!(joined.metadata, collecting.metadata, "the same object, written under its version");
    }

    #[test]
    fn a_new_batch_carries_the_superseded_secrets_with_the_new_rotations_over_them() {
        let older = with_secrets("older", &[rotated("uaa", "h1"), rotated("db", "h1")]);
        let newer = with_secrets("newer", &[rotated("db", "h2")]);
        let carried = carried_secrets(&[&older, &newer], &rotations(&[rotated("uaa", "h3")]));
        let secrets: Vec<(&str, &str)> = carried.iter().map(|s| (s.name.as_str(), s.data_hash.as_str())).collect();
        assert_eq!(secrets, [("db", "h2"), ("uaa", "h3")]);
        assert_eq!(carried_secrets(&[], &rotations(&[rotated("uaa", "h1")])).len(), 1);
    }

    #[test]
    fn a_new_batch_collects_for_the_rollout_delay() {
        let end = window_end(now(), Duration::from_secs(300));
        assert_eq!(end, "2026-11-23T12:05:00Z".parse::<Timestamp>().expect("time"));
        assert_eq!(window_end(now(), Duration::ZERO), now());
        assert_eq!(window_end(now(), Duration::MAX), now(), "a delay beyond any time collects nothing");
    }

    #[test]
    fn the_opening_event_says_what_opened_the_batch() {
        let end: Timestamp = "2026-11-23T12:05:00Z".parse().expect("time");
        let both = rotations(&[rotated("uaa", "h"), rotated("db", "h")]);
        assert_eq!(
            opening_note(None, &both, "app-x1", end),
            "credentials rotated (db, uaa); batch app-x1 collects until 2026-11-23T12:05:00Z"
        );
        assert_eq!(
            opening_note(Some(&Opener::Recheck), &both, "app-x1", end),
            "the re-check found Deployments out of date (inputs: db, uaa); batch app-x1 collects until \
             2026-11-23T12:05:00Z"
        );
        let retry: crate::api::rotation_batch::UserAction =
            serde_json::from_value(json!({"by": "alice", "at": "2026-11-23T12:00:00Z", "reason": "fixed"}))
                .expect("retry");
        let forward = Opener::RollForward { batch: "app-x0".into(), retry: Some(retry) };
        assert_eq!(
            opening_note(Some(&forward), &both, "app-x1", end),
            "rolls forward what batch app-x0 left on old credentials (retried by alice: fixed; inputs: db, uaa); \
             batch app-x1 collects until 2026-11-23T12:05:00Z"
        );
    }

    #[test]
    fn a_superseded_batch_ends_with_who_replaced_it() {
        let awaiting = batch(
            "old",
            json!({"phase": "AwaitingApproval", "deployments": [{"name": "srv", "version": "v", "workload": "srv", "action": "Restart"}]}),
            false,
        );
        let (status, message) = superseded_status(&awaiting, "new", now());
        assert_eq!(status.phase, BatchPhase::Superseded);
        assert_eq!(status.superseded_by.as_deref(), Some("new"));
        assert_eq!(status.completed_at, Some(Time(now())));
        assert_eq!(status.deployments.len(), 1, "what it had planned stays to be read");
        assert_eq!(message, "superseded by new, which carries these rotations and newer ones");
        let ready = super::super::status::ready_condition(&status).expect("Ready");
        assert_eq!(
            (ready.reason.as_str(), ready.message.as_str()),
            (ReadyReason::Superseded.as_str(), message.as_str())
        );
    }
}
