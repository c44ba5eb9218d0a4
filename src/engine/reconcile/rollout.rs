//! The rollout effects: point queued Deployments at new VCAP Secrets (paced by
//! `--max-parallel-rollouts`), follow rolling ones, and delete the VCAP Secret a completed
//! Deployment used before. Every write goes through `Writes`.

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::status::{MISSING_DEPLOYMENT, is_active, is_queued};
use super::{Reconciler, RolloutKey};
use crate::api::rotation_batch::{BatchDeployment, DeploymentAction, DeploymentRolloutState, reason};
use crate::api::{CAPApplication, LABEL_SECRET_OWNER_HASH, RotationBatch, RotationBatchStatus};
use crate::cluster::{describe_error, is_transient};
use crate::engine::progress::{Progress, rollout_progress};
use crate::engine::writes::{
    ANNOTATION_PREVIOUS_SECRET, ANNOTATION_RETRIED_AT, ANNOTATION_ROLLED_BY, LABEL_BATCH, Pointed, Redone,
};
use crate::plan::{AppPlan, CapIndex, PlanAction, Rotated, plan_application, referenced_vcap_secret};
use crate::vcap::secret_owner_hash;
use k8s_openapi::jiff::Timestamp;

/// How often a rolling Deployment's new Pods are listed.
const POD_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Rollout writes failing with errors retrying cannot fix (403, 422, ...) give up after this many
/// attempts; transient failures are retried for as long as they last.
pub(super) const MAX_ATTEMPTS: u32 = 5;

/// A rollout write that failed: what to tell people, and whether retrying may help.
struct WriteFailure {
    message: String,
    transient: bool,
}

impl WriteFailure {
    fn new(what: &str, error: &kube::Error) -> Self {
        Self { message: format!("{what}: {}", describe_error(error)), transient: is_transient(error) }
    }
}

impl Reconciler {
    /// Start queued Deployments while the parallel-rollout budget allows.
    pub(super) async fn roll(
        &mut self,
        batch: &RotationBatch,
        app: &CAPApplication,
        index: &CapIndex,
        status: &mut RotationBatchStatus,
        now: Timestamp,
    ) {
        if !status.deployments.iter().any(is_queued) {
            return;
        }
        let rotated = Rotated::Secrets(batch.spec.secrets.iter().map(|s| s.name.clone()).collect());
        let fresh = plan_application(app, &rotated, index, &self.stores);
        for position in 0..status.deployments.len() {
            if !is_queued(&status.deployments[position]) {
                continue;
            }
            if self.rolling >= self.config.max_parallel_rollouts {
                status.deployments[position].message =
                    Some(format!("queued: {} Deployments roll at once", self.config.max_parallel_rollouts));
                continue;
            }
            let mut deployment = status.deployments[position].clone();
            self.start_deployment(batch, index, &fresh, &mut deployment, now).await;
            status.deployments[position] = deployment;
        }
    }

    /// Point one Deployment at a new VCAP Secret (or find that a previous pass already did).
    async fn start_deployment(
        &mut self,
        batch: &RotationBatch,
        index: &CapIndex,
        fresh: &AppPlan,
        deployment: &mut BatchDeployment,
        now: Timestamp,
    ) {
        let namespace = batch.namespace().unwrap_or_default();
        let batch_name = batch.name_any();
        if let (Some(at), Some(secret)) = (deployment.retried_at.clone(), deployment.vcap_secret.clone()) {
            return self.restart_again(&namespace, &batch_name, deployment, &secret, &at, now).await;
        }
        let Some(planned) = fresh.deployments.iter().find(|d| d.deployment == deployment.name) else {
            if let Some(problem) =
                fresh.problems.iter().find(|p| p.deployment.as_deref() == Some(deployment.name.as_str()))
            {
                deployment.state = Some(DeploymentRolloutState::Failed);
                deployment.message = Some(problem.message.clone());
            } else {
                complete_unchanged(deployment, "no longer affected; nothing written");
            }
            return;
        };
        // Rolled by this batch in a pass whose status write was lost: the plan sees it current,
        // but it must be followed (and its previous Secret cleaned up) like any other.
        let rolled_by_this_batch = self
            .stores
            .deployment(&namespace, &deployment.name)
            .filter(|live| live.annotations().get(ANNOTATION_ROLLED_BY) == Some(&batch_name))
            .map(|live| referenced_vcap_secret(&live).ok().flatten());
        match planned.action {
            PlanAction::Unchanged if rolled_by_this_batch.is_some() => {}
            PlanAction::Unchanged => {
                complete_unchanged(deployment, "already uses current credentials; nothing written");
                self.metrics.skipped("unchanged");
                return;
            }
            PlanAction::Missing => {
                complete_unchanged(deployment, MISSING_DEPLOYMENT);
                self.metrics.skipped("missing");
                return;
            }
            PlanAction::Restart => {}
        }
        let Some(version) = index.version(&namespace, &planned.version).cloned() else {
            deployment.state = Some(DeploymentRolloutState::Failed);
            deployment.message = Some(format!("CAPApplicationVersion {} is gone", planned.version));
            return;
        };
        let attempt_key = (namespace.clone(), batch_name.clone(), deployment.name.clone());
        let (secret_name, previous) = match self
            .vcap_secret_for(&namespace, &batch_name, &version, deployment, planned, rolled_by_this_batch)
            .await
        {
            Ok(found) => found,
            Err(failure) => {
                self.failed_attempt(&attempt_key, deployment, failure);
                return;
            }
        };
        match self.writes.point_deployment(&namespace, &deployment.name, &secret_name, &batch_name, now).await {
            Ok(Pointed::Updated { generation, previous: live_previous }) => {
                deployment.vcap_secret = Some(secret_name);
                deployment.previous_vcap_secret = previous.or(live_previous);
                deployment.vcap_sha256 = Some(planned.payload.sha256());
                self.restarted(&attempt_key, deployment, generation, "rolling");
                tracing::info!(namespace, deployment = %deployment.name, batch = %batch_name, "deployment pointed at new VCAP secret");
            }
            Ok(Pointed::AlreadyRolled { generation, secret }) => {
                let actual = secret.unwrap_or(secret_name);
                let previous = self
                    .stores
                    .secret(&namespace, &actual)
                    .and_then(|s| s.annotations().get(ANNOTATION_PREVIOUS_SECRET).cloned())
                    .or(previous);
                deployment.vcap_secret = Some(actual);
                deployment.previous_vcap_secret = previous;
                deployment.rolled_generation = Some(generation);
                deployment.state = Some(DeploymentRolloutState::Rolling);
                deployment.message = Some("rolling (resumed)".into());
                self.rolling += 1;
            }
            Ok(Pointed::Gone) => {
                complete_unchanged(deployment, "deployment was deleted before its rollout");
                let uid = self.stores.secret(&namespace, &secret_name).and_then(|s| s.metadata.uid.clone());
                let _ = self.writes.delete_secret(&namespace, &secret_name, uid).await;
            }
            Err(error) => {
                let failure = WriteFailure::new("could not update the Deployment", &error);
                self.failed_attempt(&attempt_key, deployment, failure);
            }
        }
    }

    /// Our write restarted the Deployment (first time or retried): follow it from `generation`,
    /// count it against the parallel-rollout budget, and forget its failed attempts.
    fn restarted(&mut self, key: &RolloutKey, deployment: &mut BatchDeployment, generation: i64, message: &str) {
        deployment.rolled_generation = Some(generation);
        deployment.state = Some(DeploymentRolloutState::Rolling);
        deployment.message = Some(message.into());
        self.metrics.deployments_restarted.inc();
        self.rolling += 1;
        self.attempts.remove(key);
    }

    /// A retried Deployment the batch had pointed at `secret`: restart it once more.
    async fn restart_again(
        &mut self,
        namespace: &str,
        batch_name: &str,
        deployment: &mut BatchDeployment,
        secret: &str,
        at: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
        now: Timestamp,
    ) {
        let attempt_key = (namespace.to_string(), batch_name.to_string(), deployment.name.clone());
        match self.writes.restart_deployment(namespace, &deployment.name, secret, &retry_stamp(at), now).await {
            Ok(Redone::Done { generation }) => {
                self.restarted(&attempt_key, deployment, generation, "rolling again (retried)");
                tracing::info!(namespace, deployment = %deployment.name, batch = %batch_name, "deployment restarted again (retry)");
            }
            Ok(Redone::NotOurs { uses }) => {
                deployment.state = Some(DeploymentRolloutState::Failed);
                deployment.message = Some(format!("not retried: {}", changed_by_someone_else(uses)));
            }
            Ok(Redone::Gone) => {
                deployment.state = Some(DeploymentRolloutState::Failed);
                deployment.message = Some("not retried: the Deployment was deleted".into());
            }
            Err(error) => self.failed_attempt(
                &attempt_key,
                deployment,
                WriteFailure::new("could not restart the Deployment", &error),
            ),
        }
    }

    /// Undo: point every Deployment the batch rolled and did not complete back at the VCAP
    /// Secret it used before, delete the batch's new one, and end the batch `Undone` — unless a
    /// write failed and may work next time (the batch then stays open and is retried).
    pub(super) async fn undo(&mut self, batch: &RotationBatch, status: &mut RotationBatchStatus, now: Timestamp) {
        let namespace = batch.namespace().unwrap_or_default();
        let batch_name = batch.name_any();
        let (mut back, mut left, mut pending) = (0usize, Vec::new(), false);
        for deployment in status.deployments.iter_mut().filter(|d| d.action == DeploymentAction::Restart) {
            if is_queued(deployment) {
                deployment.message = Some("not started: the batch was undone".into());
                continue;
            }
            if !deployment.undoable() {
                continue;
            }
            let (Some(secret), Some(previous)) =
                (deployment.vcap_secret.clone(), deployment.previous_vcap_secret.clone())
            else {
                continue;
            };
            let was_active = is_active(deployment);
            // Read live (metadata only): pointing a Deployment at a missing Secret would start its
            // Pods without VCAP_SERVICES.
            match self.writes.secret_exists(&namespace, &previous).await {
                Ok(true) => {}
                Ok(false) => {
                    deployment.message = Some(format!("previous VCAP Secret {previous} is gone; left on {secret}"));
                    left.push(deployment.name.clone());
                    continue;
                }
                Err(error) => {
                    deployment.message = Some(format!(
                        "could not read previous VCAP Secret {previous}: {}; retrying",
                        describe_error(&error)
                    ));
                    pending = true;
                    continue;
                }
            }
            let attempt_key = (namespace.clone(), batch_name.clone(), deployment.name.clone());
            match self.writes.point_back(&namespace, &deployment.name, &secret, &previous, &batch_name, now).await {
                Ok(Redone::Done { generation }) => {
                    deployment.state = Some(DeploymentRolloutState::Undone);
                    deployment.rolled_generation = Some(generation);
                    deployment.message = Some(format!("pointed back at {previous}"));
                    back += 1;
                    if was_active {
                        self.rolling = self.rolling.saturating_sub(1);
                    }
                    self.attempts.remove(&attempt_key);
                    let uid = self.stores.secret(&namespace, &secret).and_then(|s| s.metadata.uid.clone());
                    if let Err(error) = self.writes.delete_secret(&namespace, &secret, uid).await {
                        deployment.message = Some(format!(
                            "pointed back at {previous}; could not delete {secret}: {}",
                            describe_error(&error)
                        ));
                    }
                }
                Ok(Redone::NotOurs { uses }) => {
                    deployment.message = Some(format!("not undone: {}", changed_by_someone_else(uses)));
                    left.push(deployment.name.clone());
                }
                Ok(Redone::Gone) => {
                    deployment.message = Some("not undone: the Deployment was deleted".into());
                    left.push(deployment.name.clone());
                }
                Err(error) => {
                    self.failed_attempt(&attempt_key, deployment, WriteFailure::new("could not point it back", &error));
                    if deployment.state == Some(DeploymentRolloutState::Failed) {
                        left.push(deployment.name.clone()); // gave up
                    } else {
                        pending = true;
                    }
                }
            }
        }
        if pending {
            return;
        }
        let said = super::status::ready_condition(status).map(|c| c.message.clone()).unwrap_or_default();
        let mut message =
            format!("{said}; {} pointed back at their previous VCAP Secrets", crate::output::count(back, "Deployment"));
        if !left.is_empty() {
            message.push_str(&format!(", left alone: {}", left.join(", ")));
        }
        super::status::finish(status, crate::api::BatchPhase::Undone, reason::UNDONE, message, now);
    }

    /// The VCAP Secret this batch points the Deployment at, and the one it used before: one this
    /// batch already created (found by label before a restart), the one a lost pass already
    /// pointed it at, or a new one. Never a second Secret for one Deployment in one batch.
    async fn vcap_secret_for(
        &mut self,
        namespace: &str,
        batch_name: &str,
        version: &crate::api::CAPApplicationVersion,
        deployment: &BatchDeployment,
        planned: &crate::plan::DeploymentPlan,
        rolled_by_this_batch: Option<Option<String>>,
    ) -> Result<(String, Option<String>), WriteFailure> {
        let owner_hash = secret_owner_hash(namespace, &planned.version, &deployment.name);
        let existing = self.stores.vcap_secrets.state().into_iter().find(|secret| {
            secret.namespace().as_deref() == Some(namespace)
                && secret.labels().get(LABEL_BATCH).map(String::as_str) == Some(batch_name)
                && secret.labels().get(LABEL_SECRET_OWNER_HASH) == Some(&owner_hash)
        });
        if let Some(secret) = existing {
            return Ok((secret.name_any(), secret.annotations().get(ANNOTATION_PREVIOUS_SECRET).cloned()));
        }
        // Our Secret is not in the store yet: never create a second one.
        if let Some(live) = rolled_by_this_batch.flatten() {
            return Ok((live, None));
        }
        let created = self
            .writes
            .create_vcap_secret(
                version,
                &deployment.name,
                batch_name,
                planned.current_secret.as_deref(),
                &planned.payload,
            )
            .await
            .map_err(|error| WriteFailure::new("could not create the VCAP Secret", &error))?;
        Ok((created.name_any(), planned.current_secret.clone()))
    }

    /// A failed rollout write. Transient failures (unreachable API, 409, 429, 5xx) are retried
    /// for as long as they last; others give up after `MAX_ATTEMPTS`.
    fn failed_attempt(&mut self, key: &RolloutKey, deployment: &mut BatchDeployment, failure: WriteFailure) {
        let attempts = self.attempts.entry(key.clone()).or_default();
        if !failure.transient {
            *attempts += 1;
        }
        let message = failure.message;
        tracing::warn!(deployment = %deployment.name, attempts = *attempts, message, "rollout write failed");
        if *attempts >= MAX_ATTEMPTS {
            deployment.state = Some(DeploymentRolloutState::Failed);
            deployment.message = Some(format!("{message} (gave up after {MAX_ATTEMPTS} attempts)"));
        } else {
            deployment.message = Some(format!("{message}; retrying"));
        }
    }

    /// Follow rolling Deployments; once one completed, delete the VCAP Secret it used before.
    /// Why the new Pods of a rolling Deployment fail (`Some(None)`: they look fine); `None` when
    /// they were not listed this pass (listed at most every `POD_CHECK_INTERVAL`, and only while
    /// the Deployment rolls) or could not be.
    async fn new_pods_failure(
        &mut self,
        key: &RolloutKey,
        live: &crate::api::DeploymentView,
        deployment: &BatchDeployment,
        secret: &str,
    ) -> Option<Option<String>> {
        let now = tokio::time::Instant::now();
        if self.pods_denied.contains(&key.0)
            || self.pods_checked.get(key).is_some_and(|at| now.duration_since(*at) < POD_CHECK_INTERVAL)
        {
            return None;
        }
        self.pods_checked.insert(key.clone(), now);
        let labels = live.spec.as_ref()?.selector.as_ref()?.match_labels.as_ref()?;
        let selector = labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(self.writes.client().clone(), &key.0);
        match pods.list(&kube::api::ListParams::default().labels(&selector)).await {
            Ok(list) => {
                // After a retry, only the Pods of the retried template count (the failed ones go away).
                let retried = deployment.retried_at.as_ref().map(retry_stamp);
                let new: Vec<&k8s_openapi::api::core::v1::Pod> = list
                    .items
                    .iter()
                    .filter(|pod| super::pods::reads_secret(pod, secret))
                    .filter(|pod| retried.is_none() || pod.annotations().get(ANNOTATION_RETRIED_AT) == retried.as_ref())
                    .collect();
                Some(super::pods::pod_failure(&new, self.config.clock.now(), self.config.readiness_timeout))
            }
            Err(error) if matches!(&error, kube::Error::Api(status) if status.code == 403) => {
                tracing::warn!(
                    namespace = %key.0,
                    error = %describe_error(&error),
                    "may not list Pods here (grant list pods, as capdeck manifests does): failing rollouts in this \
                     namespace show only at their progress deadline"
                );
                self.pods_denied.insert(key.0.clone());
                None
            }
            Err(error) => {
                tracing::debug!(namespace = %key.0, deployment = %key.2, error = %describe_error(&error), "listing new Pods failed; next try in 5 s");
                None
            }
        }
    }

    pub(super) async fn track_progress(&mut self, batch: &RotationBatch, status: &mut RotationBatchStatus) {
        let namespace = batch.namespace().unwrap_or_default();
        for position in 0..status.deployments.len() {
            if !is_active(&status.deployments[position]) {
                continue;
            }
            let mut deployment = status.deployments[position].clone();
            let Some(secret) = deployment.vcap_secret.clone() else { continue };
            let Some(live) = self.stores.deployment(&namespace, &deployment.name) else {
                deployment.state = Some(DeploymentRolloutState::Failed);
                deployment.message = Some("deployment was deleted during its rollout".into());
                status.deployments[position] = deployment;
                self.rolling = self.rolling.saturating_sub(1);
                continue;
            };
            let generation = live.metadata.generation.unwrap_or(0);
            if generation < deployment.rolled_generation.unwrap_or(0) {
                continue; // the store has not seen our update yet
            }
            match referenced_vcap_secret(&live) {
                Ok(Some(current)) if current == secret => {}
                Ok(other) => {
                    if generation > deployment.rolled_generation.unwrap_or(0) {
                        deployment.state = Some(DeploymentRolloutState::Failed);
                        deployment.message = Some(changed_by_someone_else(other));
                        status.deployments[position] = deployment;
                        self.rolling = self.rolling.saturating_sub(1);
                    }
                    continue;
                }
                Err(_) => continue,
            }
            let progress = rollout_progress(&live);
            deployment.replicas = Some(progress.replicas);
            deployment.updated_replicas = Some(progress.updated);
            deployment.ready_replicas = Some(progress.ready);
            deployment.available_replicas = Some(progress.available);
            deployment.message = Some(progress.message.clone());
            match progress.progress {
                Progress::Rolling => {
                    let key = (namespace.clone(), batch.name_any(), deployment.name.clone());
                    match self.new_pods_failure(&key, &live, &deployment, &secret).await {
                        Some(Some(failure)) => {
                            deployment.state = Some(DeploymentRolloutState::Failing);
                            deployment.message = Some(failure);
                        }
                        Some(None) => deployment.state = Some(DeploymentRolloutState::Rolling),
                        // Not listed this pass: a failing Deployment keeps saying why.
                        None => {
                            if deployment.state == Some(DeploymentRolloutState::Failing) {
                                deployment.message = status.deployments[position].message.clone();
                            }
                        }
                    }
                }
                Progress::Stalled => {
                    deployment.state = Some(DeploymentRolloutState::Stalled);
                    deployment.message = Some(format!("{}; its previous VCAP Secret is kept", progress.message));
                    self.rolling = self.rolling.saturating_sub(1);
                }
                Progress::Complete => match self.remove_previous(&namespace, &deployment).await {
                    Ok(note) => {
                        deployment.state = Some(DeploymentRolloutState::Complete);
                        deployment.message = Some(note);
                        self.rolling = self.rolling.saturating_sub(1);
                    }
                    Err(failure) => {
                        let key = (namespace.clone(), batch.name_any(), deployment.name.clone());
                        self.failed_attempt(&key, &mut deployment, failure);
                        if deployment.state == Some(DeploymentRolloutState::Failed) {
                            // The rollout itself completed; only the cleanup failed.
                            deployment.state = Some(DeploymentRolloutState::Complete);
                            self.rolling = self.rolling.saturating_sub(1);
                        }
                    }
                },
            }
            status.deployments[position] = deployment;
        }
    }

    /// Delete the VCAP Secret a completed Deployment used before, unless anything still uses it
    /// or it is not a VCAP Secret (no owner-hash label).
    async fn remove_previous(&self, namespace: &str, deployment: &BatchDeployment) -> Result<String, WriteFailure> {
        let Some(previous) =
            deployment.previous_vcap_secret.clone().filter(|p| Some(p) != deployment.vcap_secret.as_ref())
        else {
            return Ok("rolled out".into());
        };
        let still_used = self.stores.deployments.state().iter().any(|other| {
            other.namespace().as_deref() == Some(namespace)
                && referenced_vcap_secret(other).ok().flatten().as_deref() == Some(previous.as_str())
        });
        if still_used {
            return Ok(format!("rolled out; previous secret {previous} kept: another Deployment uses it"));
        }
        let Some(secret) = self.stores.vcap_secrets.get(&ObjectRef::new(&previous).within(namespace)) else {
            return Ok(format!("rolled out; previous secret {previous} is gone or not a VCAP secret, left alone"));
        };
        match self.writes.delete_secret(namespace, &previous, secret.metadata.uid.clone()).await {
            Ok(_) => Ok(format!("rolled out; previous VCAP secret {previous} deleted")),
            Err(error) => {
                Err(WriteFailure::new(&format!("rolled out but could not delete previous secret {previous}"), &error))
            }
        }
    }
}

/// Why capdeck leaves a Deployment alone that it had pointed at its VCAP Secret.
fn changed_by_someone_else(uses: Option<String>) -> String {
    format!(
        "the Deployment was changed by someone else and now uses {}",
        uses.unwrap_or_else(|| "no VCAP secret".into())
    )
}

/// The value of a retry's Pod template annotation: its time, to the second.
fn retry_stamp(at: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> String {
    super::status::format_time(at.0)
}

fn complete_unchanged(deployment: &mut BatchDeployment, message: &str) {
    deployment.action = DeploymentAction::Unchanged;
    deployment.state = Some(DeploymentRolloutState::Complete);
    deployment.message = Some(message.into());
}
