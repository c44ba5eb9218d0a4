//! Batching: pending rotations join the application's collecting batch, or open a new one that
//! supersedes batches which have not started rolling.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::status::{format_time, set_condition};
use super::{AppKey, Reconciler, batch_key};
use crate::api::rotation_batch::{RotatedSecret, reason};
use crate::api::{BatchPhase, CAPApplication, RotationBatch};
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

/// Pure: choose where new rotations of one application go.
pub fn placement(open: &[Arc<RotationBatch>]) -> Placement<'_> {
    let not_started = |b: &RotationBatch| b.status.as_ref().is_none_or(|status| status.rollout_started_at.is_none());
    let collecting = open.iter().find(|b| {
        b.spec.cancel.is_none()
            && not_started(b)
            && b.status.as_ref().is_none_or(|status| status.deployments.is_empty())
    });
    match collecting {
        Some(batch) => Placement::Join(batch),
        None => Placement::Open {
            superseded: open.iter().map(|b| &**b).filter(|b| b.spec.cancel.is_none() && not_started(b)).collect(),
        },
    }
}

impl Reconciler {
    /// The hold the new batch carries from those it supersedes: one the engine honours
    /// (`decide::attribution_check`), never a forged one, which the new batch would otherwise make
    /// the engine's own. `Some(None)`: nothing to carry; `None`: who wrote it cannot be read now
    /// (the batch opens on a later pass).
    async fn hold_to_carry(
        &mut self,
        superseded: &[&RotationBatch],
    ) -> Option<Option<crate::api::rotation_batch::UserAction>> {
        let Some(held) = superseded.iter().find(|batch| batch.spec.hold.is_some()) else { return Some(None) };
        let attributed = self.with_managed_fields(&Arc::new((*held).clone())).await?;
        match super::decide::attribution_check(&attributed, super::decide::Attributed::Hold) {
            Ok(()) => Some(held.spec.hold.clone()),
            Err(why) => {
                tracing::warn!(batch = %held.name_any(), "the batch that supersedes it does not carry its hold: {why}");
                Some(None)
            }
        }
    }

    /// Put pending rotations into batches. Applications whose last attempt failed wait for
    /// their own backoff; the others go on.
    pub(super) async fn open_or_join(&mut self, now: Timestamp) {
        let instant = tokio::time::Instant::now();
        self.opening_backoff.forget_except(&self.pending.keys().cloned().collect());
        for (key, rotated) in std::mem::take(&mut self.pending) {
            if self.opening_backoff.waiting(&key, instant) {
                self.pending.insert(key, rotated);
                continue;
            }
            let Some(app) = self.application(&key.0, &key.1) else { continue };
            if !app.rollout_opted_in() {
                continue;
            }
            let open: Vec<Arc<RotationBatch>> = self
                .open_batches()
                .into_iter()
                .filter(|b| batch_key(b).0 == key.0 && b.spec.application == key.1)
                .collect();
            let placed = match placement(&open) {
                Placement::Join(batch) => self.join(&app, batch, &rotated).await,
                Placement::Open { superseded } => self.open(&app, &key, &superseded, &rotated, now).await,
            };
            self.opening_backoff.record(&key, !placed, instant);
            if !placed {
                self.pending.insert(key, rotated);
            }
        }
    }

    async fn join(
        &mut self,
        app: &CAPApplication,
        batch: &RotationBatch,
        rotated: &BTreeMap<String, RotatedSecret>,
    ) -> bool {
        let mut joined = batch.clone();
        for secret in rotated.values() {
            match joined.spec.secrets.iter_mut().find(|s| s.name == secret.name) {
                Some(existing) => *existing = secret.clone(),
                None => joined.spec.secrets.push(secret.clone()),
            }
        }
        match self.writes.replace_batch(&joined).await {
            Ok(written) => {
                self.awaited.insert(batch_key(&written), written.resource_version().unwrap_or_default());
                let names: Vec<&str> = rotated.keys().map(String::as_str).collect();
                let message = format!("rotation of {} joined batch {}", names.join(", "), joined.name_any());
                self.writes.event(app, false, reason::WINDOW_OPEN, message).await;
                true
            }
            Err(error) => {
                tracing::warn!(batch = %joined.name_any(), error = %crate::cluster::describe_error(&error), "could not add rotated secrets to the batch; retrying");
                false
            }
        }
    }

    async fn open(
        &mut self,
        app: &CAPApplication,
        key: &AppKey,
        superseded: &[&RotationBatch],
        rotated: &BTreeMap<String, RotatedSecret>,
        now: Timestamp,
    ) -> bool {
        let mut secrets: BTreeMap<String, RotatedSecret> = BTreeMap::new();
        for old in superseded {
            for secret in &old.spec.secrets {
                secrets.insert(secret.name.clone(), secret.clone());
            }
        }
        secrets.extend(rotated.clone());
        let Some(hold) = self.hold_to_carry(superseded).await else { return false };
        let window = k8s_openapi::jiff::SignedDuration::try_from(self.config.rollout_delay).unwrap_or_default();
        let window_end = now.checked_add(window).unwrap_or(now);
        let required = ApprovalPolicy::for_application(app, self.config.approval) == ApprovalPolicy::Manual;
        let created = match self
            .writes
            .create_batch(app, secrets.into_values().collect(), window_end, required, hold)
            .await
        {
            Ok(created) => created,
            Err(error) => {
                tracing::warn!(application = %key.1, error = %crate::cluster::describe_error(&error), "could not open a rotation batch; retrying");
                return false;
            }
        };
        self.awaited.insert(batch_key(&created), created.resource_version().unwrap_or_default());
        let names: Vec<&str> = rotated.keys().map(String::as_str).collect();
        let cause = if self.found_by_recheck.remove(key) {
            format!("the start-up re-check found Deployments out of date (inputs: {})", names.join(", "))
        } else {
            format!("credentials rotated ({})", names.join(", "))
        };
        let message = format!("{cause}; batch {} collects until {}", created.name_any(), format_time(window_end));
        self.writes.event(app, false, reason::WINDOW_OPEN, message).await;
        for old in superseded {
            let mut status = old.status.clone().unwrap_or_default();
            status.phase = BatchPhase::Superseded;
            status.superseded_by = Some(created.name_any());
            status.completed_at = Some(Time(now));
            let message = format!("superseded by {}, which carries these rotations and newer ones", created.name_any());
            set_condition(&mut status, false, reason::SUPERSEDED, message.clone(), now);
            match self.writes.write_status(old, &status).await {
                Ok(written) => {
                    self.awaited.insert(batch_key(&written), written.resource_version().unwrap_or_default());
                    let text = format!("batch {}: {message}", old.name_any());
                    self.writes.event(app, false, reason::SUPERSEDED, text).await;
                }
                Err(error) => {
                    tracing::warn!(batch = %old.name_any(), error = %crate::cluster::describe_error(&error), "could not mark the batch superseded")
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn batch(name: &str, status: Value, cancelled: bool) -> Arc<RotationBatch> {
        let mut spec = json!({"application": "app", "windowEnd": "2026-11-23T12:00:00Z"});
        if cancelled {
            spec["cancel"] = json!({"by": "carol", "at": "2026-11-23T11:00:00Z"});
        }
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
                "metadata": {"name": name, "namespace": "ns"}, "spec": spec, "status": status,
            }))
            .expect("batch"),
        )
    }

    fn names(batches: &[&RotationBatch]) -> Vec<String> {
        batches.iter().map(|b| b.name_any()).collect()
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
}
