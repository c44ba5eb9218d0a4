//! Rolling: point queued Deployments at new VCAP Secrets (paced by `--max-parallel-rollouts`),
//! follow rolling ones, delete the VCAP Secret a completed Deployment used before, retry and
//! undo. Every write goes through `Writes`. The part owns the rollout's own state: how many
//! Deployments roll, each one's failed attempts, and when its new Pods were last listed.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::pods::NewPods;
use super::status::{MISSING_DEPLOYMENT, is_active, is_queued};
use super::{AppKey, Context, RolloutKey};
use crate::api::rotation_batch::{BatchDeployment, DeploymentAction, DeploymentRolloutState, ReadyReason};
use crate::api::{CAPApplication, DeploymentView, LABEL_SECRET_OWNER_HASH, RotationBatch, RotationBatchStatus};
use crate::cluster::{describe_error, is_transient};
use crate::engine::progress::{Progress, RolloutProgress, rollout_progress};
use crate::engine::writes::{
    ANNOTATION_PREVIOUS_SECRET, ANNOTATION_RETRIED_AT, ANNOTATION_ROLLED_BY, LABEL_BATCH, Pointed, Redone,
};
use crate::plan::{AppPlan, CapIndex, DeploymentPlan, PlanAction, Rotated, plan_application, referenced_vcap_secret};
use crate::vcap::secret_owner_hash;

/// How often a rolling Deployment's new Pods are listed.
const POD_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// The end of the message of a Deployment waiting its turn for `--max-parallel-rollouts`.
pub(super) const WAITS_ITS_TURN: &str = "Deployments roll at once";

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

#[derive(Default)]
pub(super) struct Rollouts {
    /// Deployments rolling right now, across batches (for --max-parallel-rollouts).
    rolling: usize,
    /// Failed attempts of each rollout write that retrying cannot fix.
    attempts: HashMap<RolloutKey, u32>,
    /// When each rolling Deployment's new Pods were last listed (at most every `POD_CHECK_INTERVAL`),
    /// for which attempt, and what they said then.
    pods_checked: HashMap<RolloutKey, PodsChecked>,
    /// Namespaces where RBAC forbids listing Pods: said once, not asked again.
    pods_denied: BTreeSet<String>,
}

/// The last listing of a rolling Deployment's new Pods.
#[derive(Clone, Debug)]
struct PodsChecked {
    at: tokio::time::Instant,
    /// Which attempt it judged (the new VCAP Secret and the retry): a restart is judged afresh.
    attempt: String,
    /// `None`: the listing failed (tried again after the interval all the same).
    verdict: Option<NewPods>,
}

fn pods_attempt(secret: &str, deployment: &BatchDeployment) -> String {
    format!("{secret}|{:?}", deployment.retried_at.as_ref().map(|at| at.0))
}

impl Rollouts {
    /// At the start of a pass: count what rolls in the open batches (`statuses`: each as the pass
    /// starts from it, the unwritten one where there is one), forget batches that ended.
    pub(super) fn begin_pass(&mut self, statuses: &[RotationBatchStatus], open_keys: &BTreeSet<AppKey>) {
        self.rolling = statuses.iter().flat_map(|s| s.deployments.iter()).filter(|d| is_active(d)).count();
        self.pods_checked
            .retain(|(namespace, batch, _), _| open_keys.contains(&AppKey::new(namespace.clone(), batch.clone())));
    }

    /// A retried batch: writes that gave up get their attempts back.
    pub(super) fn forget_attempts(&mut self, AppKey { namespace, name }: &AppKey) {
        self.attempts.retain(|(ns, b, _), _| !(ns == namespace && b == name));
    }

    /// Start queued Deployments while the parallel-rollout budget allows.
    pub(super) async fn roll(
        &mut self,
        context: &Context,
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
        let fresh = plan_application(app, &rotated, index, &context.stores);
        let (namespace, batch_name) = (batch.namespace().unwrap_or_default(), batch.name_any());
        for position in 0..status.deployments.len() {
            if !is_queued(&status.deployments[position]) {
                continue;
            }
            // A Deployment this batch already pointed at its new Secret (a status not written
            // before a restart or a leader change) rolls whatever the budget says: it is adopted,
            // nothing is written.
            let adopt = status.deployments[position].retried_at.is_none()
                && rolled_by(context, &namespace, &status.deployments[position].name, &batch_name).is_some();
            if self.rolling >= context.config.max_parallel_rollouts && !adopt {
                status.deployments[position].message =
                    Some(format!("queued: {} {WAITS_ITS_TURN}", context.config.max_parallel_rollouts));
                continue;
            }
            let mut deployment = status.deployments[position].clone();
            self.start_deployment(context, batch, index, &fresh, &mut deployment, now).await;
            status.deployments[position] = deployment;
        }
    }

    /// Point one Deployment at a new VCAP Secret (or find that a previous pass already did).
    async fn start_deployment(
        &mut self,
        context: &Context,
        batch: &RotationBatch,
        index: &CapIndex,
        fresh: &AppPlan,
        deployment: &mut BatchDeployment,
        now: Timestamp,
    ) {
        let namespace = batch.namespace().unwrap_or_default();
        let batch_name = batch.name_any();
        let key = (namespace.clone(), batch_name.clone(), deployment.name.clone());
        if let (Some(at), Some(secret)) = (deployment.retried_at.clone(), deployment.vcap_secret.clone()) {
            return self.restart_again(context, &key, deployment, &secret, &at, now).await;
        }
        let Some(planned) = fresh.deployments.iter().find(|d| d.deployment == deployment.name) else {
            return not_in_plan(fresh, deployment);
        };
        // Rolled by this batch in a pass whose status write was lost: the plan sees it current,
        // but it must be followed (and its previous Secret cleaned up) like any other.
        let rolled_by_this_batch = rolled_by(context, &namespace, &deployment.name, &batch_name);
        if let Some(skipped) = skip(&planned.action, rolled_by_this_batch.is_some(), deployment) {
            context.metrics.skipped(skipped);
            return;
        }
        let Some(version) = index.version(&namespace, &planned.version).cloned() else {
            deployment.state = Some(DeploymentRolloutState::Failed);
            deployment.message = Some(format!("CAPApplicationVersion {} is gone", planned.version));
            return;
        };
        let target = Target { key: &key, version: &version, planned, rolled_by_this_batch };
        match self.vcap_secret_for(context, deployment, target).await {
            Ok(found) => self.point(context, &key, deployment, planned, found, now).await,
            Err(failure) => self.failed_attempt(&key, deployment, failure),
        }
    }

    /// Point the Deployment at `secret` (the one it used before: `previous`), and follow it.
    async fn point(
        &mut self,
        context: &Context,
        key: &RolloutKey,
        deployment: &mut BatchDeployment,
        planned: &DeploymentPlan,
        (secret, previous): (String, Option<String>),
        now: Timestamp,
    ) {
        let (namespace, batch_name, _) = key;
        let version_uid = context
            .stores
            .versions
            .find(Some(namespace), &planned.version)
            .and_then(|version| version.metadata.uid.clone());
        let target = (namespace.as_str(), deployment.name.as_str());
        let owner = (planned.version.as_str(), version_uid.as_deref());
        match context.writes.point_deployment(target, owner, &secret, batch_name, now).await {
            Ok(Pointed::Updated { generation, previous: live_previous }) => {
                deployment.vcap_secret = Some(secret);
                deployment.previous_vcap_secret = previous.or(live_previous);
                deployment.vcap_sha256 = Some(planned.payload.sha256());
                self.restarted(context, key, deployment, generation, "rolling");
                tracing::info!(namespace, deployment = %deployment.name, batch = %batch_name, "deployment pointed at new VCAP secret");
            }
            Ok(Pointed::AlreadyRolled { generation, secret: live }) => {
                let actual = live.unwrap_or(secret);
                let previous = context
                    .stores
                    .secret(namespace, &actual)
                    .and_then(|s| s.annotation(ANNOTATION_PREVIOUS_SECRET).map(str::to_owned))
                    .or(previous);
                resumed(deployment, actual, previous, generation);
                self.rolling += 1;
            }
            Ok(Pointed::Gone) => {
                complete_unchanged(deployment, "deployment was deleted before its rollout");
                let uid = context.stores.secret(namespace, &secret).and_then(|s| s.uid().map(str::to_owned));
                let _ = context.writes.delete_secret(namespace, &secret, uid).await;
            }
            Ok(Pointed::NotOwned { why }) => {
                tracing::warn!(namespace, deployment = %deployment.name, batch = %batch_name, "{why}");
                complete_unchanged(deployment, &why);
                deployment.action = DeploymentAction::NotOwned;
                context.metrics.skipped("not owned");
                let uid = context.stores.secret(namespace, &secret).and_then(|s| s.uid().map(str::to_owned));
                let _ = context.writes.delete_secret(namespace, &secret, uid).await;
            }
            Err(error) => {
                let failure = WriteFailure::new("could not update the Deployment", &error);
                self.failed_attempt(key, deployment, failure);
            }
        }
    }

    /// Our write restarted the Deployment (first time or retried): follow it from `generation`,
    /// count it against the parallel-rollout budget, and forget its failed attempts.
    fn restarted(
        &mut self,
        context: &Context,
        key: &RolloutKey,
        deployment: &mut BatchDeployment,
        generation: i64,
        message: &str,
    ) {
        self.follow_from(key, deployment, generation, message);
        // Counts from the moment of the restart (none of the new template is updated), so the
        // record never reads "0 replicas" before its first progress read.
        if let Some(live) = crate::lookup::ObjectLookup::deployment(&context.stores, &key.0, &deployment.name) {
            deployment.replicas = Some(live.spec.as_ref().and_then(|spec| spec.replicas).unwrap_or(1));
            deployment.updated_replicas = Some(0);
            deployment.available_replicas = live.status.as_ref().and_then(|status| status.available_replicas);
        }
        context.metrics.deployments_restarted.inc();
    }

    /// The rollout bookkeeping of a restart: rolling from `generation`, attempts forgotten.
    fn follow_from(&mut self, key: &RolloutKey, deployment: &mut BatchDeployment, generation: i64, message: &str) {
        deployment.rolled_generation = Some(generation);
        deployment.state = Some(DeploymentRolloutState::Rolling);
        deployment.message = Some(message.into());
        self.rolling += 1;
        self.attempts.remove(key);
    }

    /// A retried Deployment the batch had pointed at `secret`: restart it once more.
    async fn restart_again(
        &mut self,
        context: &Context,
        key: &RolloutKey,
        deployment: &mut BatchDeployment,
        secret: &str,
        at: &Time,
        now: Timestamp,
    ) {
        let (namespace, batch_name, _) = key;
        match context.writes.restart_deployment(namespace, &deployment.name, secret, &retry_stamp(at), now).await {
            Ok(Redone::Done { generation }) => {
                self.restarted(context, key, deployment, generation, "rolling again (retried)");
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
            Err(error) => {
                self.failed_attempt(key, deployment, WriteFailure::new("could not restart the Deployment", &error))
            }
        }
    }

    /// Undo: point every Deployment the batch rolled and did not complete back at the VCAP
    /// Secret it used before, delete the batch's new one, and end the batch `Undone` — unless a
    /// write failed and may work next time (the batch then stays open and is retried).
    pub(super) async fn undo(
        &mut self,
        context: &Context,
        batch: &RotationBatch,
        status: &mut RotationBatchStatus,
        now: Timestamp,
    ) {
        let (namespace, batch_name) = (batch.namespace().unwrap_or_default(), batch.name_any());
        let (mut back, mut left, mut pending) = (0usize, Vec::new(), false);
        for deployment in status.deployments.iter_mut().filter(|d| d.action == DeploymentAction::Restart) {
            let key = (namespace.clone(), batch_name.clone(), deployment.name.clone());
            match self.undo_one(context, &key, deployment, now).await {
                Undid::Back => back += 1,
                Undid::Left => left.push(deployment.name.clone()),
                Undid::Pending => pending = true,
                Undid::Nothing => {}
            }
        }
        if pending {
            return;
        }
        let said = super::status::ready_condition(status).map(|c| c.message.clone()).unwrap_or_default();
        super::status::finish(
            status,
            crate::api::BatchPhase::Undone,
            &ReadyReason::Undone,
            undone_message(&said, back, &left),
            now,
        );
    }

    /// Undo one Deployment of the batch.
    async fn undo_one(
        &mut self,
        context: &Context,
        key: &RolloutKey,
        deployment: &mut BatchDeployment,
        now: Timestamp,
    ) -> Undid {
        if is_queued(deployment) {
            deployment.message = Some("not started: the batch was undone".into());
            return Undid::Nothing;
        }
        if !deployment.undoable() {
            return Undid::Nothing;
        }
        let (Some(secret), Some(previous)) = (deployment.vcap_secret.clone(), deployment.previous_vcap_secret.clone())
        else {
            return Undid::Nothing;
        };
        let (namespace, batch_name, _) = key;
        let was_active = is_active(deployment);
        // Read live (metadata only): pointing a Deployment at a missing Secret would start its
        // Pods without VCAP_SERVICES.
        match context.writes.secret_exists(namespace, &previous).await {
            Ok(true) => {}
            Ok(false) => {
                deployment.message = Some(format!("previous VCAP Secret {previous} is gone; left on {secret}"));
                return Undid::Left;
            }
            Err(error) => {
                deployment.message = Some(format!(
                    "could not read previous VCAP Secret {previous}: {}; retrying",
                    describe_error(&error)
                ));
                return Undid::Pending;
            }
        }
        match context.writes.point_back(namespace, &deployment.name, &secret, &previous, batch_name, now).await {
            Ok(Redone::Done { generation }) => {
                deployment.state = Some(DeploymentRolloutState::Undone);
                deployment.rolled_generation = Some(generation);
                deployment.message = Some(format!("pointed back at {previous}"));
                if was_active {
                    self.rolling = self.rolling.saturating_sub(1);
                }
                self.attempts.remove(key);
                let uid = context.stores.secret(namespace, &secret).and_then(|s| s.uid().map(str::to_owned));
                if let Err(error) = context.writes.delete_secret(namespace, &secret, uid).await {
                    deployment.message = Some(format!(
                        "pointed back at {previous}; could not delete {secret}: {}",
                        describe_error(&error)
                    ));
                }
                Undid::Back
            }
            Ok(Redone::NotOurs { uses }) => {
                deployment.message = Some(format!("not undone: {}", changed_by_someone_else(uses)));
                Undid::Left
            }
            Ok(Redone::Gone) => {
                deployment.message = Some("not undone: the Deployment was deleted".into());
                Undid::Left
            }
            Err(error) => {
                self.failed_attempt(key, deployment, WriteFailure::new("could not point it back", &error));
                // Gave up: left alone; else tried again on the next pass.
                if deployment.state == Some(DeploymentRolloutState::Failed) { Undid::Left } else { Undid::Pending }
            }
        }
    }

    /// The VCAP Secret this batch points the Deployment at, and the one it used before: one this
    /// batch already created (found by label before a restart), the one a lost pass already
    /// pointed it at, or a new one. Never a second Secret for one Deployment in one batch.
    async fn vcap_secret_for(
        &mut self,
        context: &Context,
        deployment: &BatchDeployment,
        target: Target<'_>,
    ) -> Result<(String, Option<String>), WriteFailure> {
        let Target { key: (namespace, batch_name, _), version, planned, rolled_by_this_batch } = target;
        let owner_hash = secret_owner_hash(namespace, &planned.version, &deployment.name);
        let existing = context.stores.vcap_secrets.state().into_iter().find(|secret| {
            secret.namespace() == Some(namespace.as_str())
                && secret.label(LABEL_BATCH) == Some(batch_name.as_str())
                && secret.label(LABEL_SECRET_OWNER_HASH) == Some(owner_hash.as_str())
        });
        if let Some(secret) = existing {
            let pointed = rolled_by_this_batch.as_ref().and_then(Option::as_deref) == Some(secret.name());
            let current = secret
                .entries()
                .any(|(key, value)| key == crate::api::VCAP_SERVICES_KEY && planned.payload.matches_stored(value));
            let read = context.stores.vcap_secret_read(namespace, secret.name());
            if current || pointed || read {
                return Ok((
                    secret.name().to_owned(),
                    secret.annotation(ANNOTATION_PREVIOUS_SECRET).map(str::to_owned),
                ));
            }
            // Made before a later rotation (its create was answered with an error, or the engine
            // stopped) and read by no Deployment: the Deployment's turn takes the credentials its
            // Secrets hold now (`detect::covered` counts on it), so this one goes. One some
            // Deployment reads is used as it is, as before: the batch after this one rolls it on.
            context
                .writes
                .delete_secret(namespace, secret.name(), secret.uid().map(str::to_owned))
                .await
                .map_err(|error| WriteFailure::new("could not delete an out-of-date VCAP Secret it made", &error))?;
        }
        // Our Secret is not in the store yet: never create a second one.
        if let Some(live) = rolled_by_this_batch.flatten() {
            return Ok((live, None));
        }
        let previous = planned.current_secret.as_deref();
        let created = context
            .writes
            .create_vcap_secret(version, &deployment.name, batch_name, previous, &planned.payload)
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

    /// How the new Pods of a rolling Deployment stand, as last listed (at most every
    /// `POD_CHECK_INTERVAL`, and only while the Deployment rolls); `None` when they could not be
    /// listed.
    async fn new_pods(
        &mut self,
        context: &Context,
        key: &RolloutKey,
        live: &DeploymentView,
        deployment: &BatchDeployment,
        secret: &str,
    ) -> Option<NewPods> {
        let now = tokio::time::Instant::now();
        if self.pods_denied.contains(&key.0) {
            return None;
        }
        let attempt = pods_attempt(secret, deployment);
        let earlier = self.pods_checked.get(key).filter(|checked| checked.attempt == attempt);
        if let Some(checked) = earlier.filter(|checked| now.duration_since(checked.at) < POD_CHECK_INTERVAL) {
            return checked.verdict.clone();
        }
        let said_before = earlier.and_then(|checked| checked.verdict.clone());
        // A failed listing is not tried again before the interval either; what they said before stands.
        let verdict = self.list_new_pods(context, key, live, deployment, secret).await.or(said_before);
        self.pods_checked.insert(key.clone(), PodsChecked { at: now, attempt, verdict: verdict.clone() });
        verdict
    }

    /// List the Deployment's Pods that read `secret` and judge them.
    async fn list_new_pods(
        &mut self,
        context: &Context,
        key: &RolloutKey,
        live: &DeploymentView,
        deployment: &BatchDeployment,
        secret: &str,
    ) -> Option<NewPods> {
        let selector = live.spec.as_ref()?.selector.as_ref()?.query()?.to_string();
        let pods: kube::Api<crate::api::lenient::Lenient<k8s_openapi::api::core::v1::Pod>> =
            kube::Api::namespaced(context.writes.client().clone(), &key.0);
        match crate::cluster::list_each(&pods, &kube::api::ListParams::default().labels(&selector)).await {
            Ok(list) => {
                // After a retry, only the Pods of the retried template count (the failed ones go away).
                let retried = deployment.retried_at.as_ref().map(retry_stamp);
                let new: Vec<&k8s_openapi::api::core::v1::Pod> = list
                    .items
                    .iter()
                    .filter(|pod| super::pods::made_for(pod, &key.2))
                    .filter(|pod| super::pods::reads_secret(pod, secret))
                    .filter(|pod| retried.is_none() || pod.annotations().get(ANNOTATION_RETRIED_AT) == retried.as_ref())
                    .collect();
                Some(super::pods::judge_new_pods(&new, context.config.clock.now(), context.config.readiness_timeout))
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

    /// Follow the batch's rolling Deployments; once one completed, delete the VCAP Secret it
    /// used before.
    pub(super) async fn track_progress(
        &mut self,
        context: &Context,
        batch: &RotationBatch,
        status: &mut RotationBatchStatus,
    ) {
        let (namespace, batch_name) = (batch.namespace().unwrap_or_default(), batch.name_any());
        for deployment in status.deployments.iter_mut().filter(|d| is_active(d)) {
            let key = (namespace.clone(), batch_name.clone(), deployment.name.clone());
            self.follow(context, &key, deployment).await;
        }
    }

    /// Follow one rolling Deployment, as the store shows it.
    async fn follow(&mut self, context: &Context, key: &RolloutKey, deployment: &mut BatchDeployment) {
        let Some(secret) = deployment.vcap_secret.clone() else { return };
        let Some(live) = context.stores.deployment(&key.0, &deployment.name) else {
            deployment.state = Some(DeploymentRolloutState::Failed);
            deployment.message = Some("deployment was deleted during its rollout".into());
            self.rolling = self.rolling.saturating_sub(1);
            return;
        };
        let generation = live.metadata.generation.unwrap_or(0);
        if generation < deployment.rolled_generation.unwrap_or(0) {
            return; // the store has not seen our update yet
        }
        let is_vcap =
            |name: &str| name == secret || context.stores.vcap_secrets.find(Some(key.0.as_str()), name).is_some();
        match referenced_vcap_secret(&live, is_vcap) {
            Ok(Some(current)) if current == secret => {}
            Ok(other) => {
                if generation > deployment.rolled_generation.unwrap_or(0) {
                    deployment.state = Some(DeploymentRolloutState::Failed);
                    deployment.message = Some(changed_by_someone_else(other));
                    self.rolling = self.rolling.saturating_sub(1);
                }
                return;
            }
            Err(_) => return,
        }
        let said = deployment.message.clone();
        let progress = rollout_progress(&live);
        show_progress(deployment, &progress);
        match progress.progress {
            Progress::Rolling => match self.new_pods(context, key, &live, deployment, &secret).await {
                Some(NewPods::Failing(failure)) => {
                    deployment.state = Some(DeploymentRolloutState::Failing);
                    deployment.message = Some(failure);
                }
                // Failing stays failing until it completes, stalls, or is retried or undone: a
                // crash-looping container runs between its restarts, and a halt must not flap.
                _ if deployment.state == Some(DeploymentRolloutState::Failing) => deployment.message = said,
                Some(NewPods::Waiting(why)) => {
                    deployment.state = Some(DeploymentRolloutState::Rolling);
                    deployment.message = Some(format!("{}; {why}", progress.message));
                }
                Some(NewPods::Fine) => deployment.state = Some(DeploymentRolloutState::Rolling),
                None => {}
            },
            Progress::Stalled => {
                // What the new Pods said last (kube-scheduler's reason), not only the deadline.
                let said = self.pods_checked.get(key).and_then(|checked| checked.verdict.as_ref());
                let why = match said {
                    Some(NewPods::Waiting(why) | NewPods::Failing(why)) => format!(" ({why})"),
                    _ => String::new(),
                };
                deployment.state = Some(DeploymentRolloutState::Stalled);
                deployment.message = Some(format!("{}{why}; its previous VCAP Secret is kept", progress.message));
                self.rolling = self.rolling.saturating_sub(1);
            }
            Progress::Complete => self.complete(context, key, deployment).await,
        }
    }

    /// A Deployment rolled out: delete the VCAP Secret it used before. A cleanup that gave up
    /// leaves it Complete all the same: the rollout itself completed.
    async fn complete(&mut self, context: &Context, key: &RolloutKey, deployment: &mut BatchDeployment) {
        match remove_previous(context, &key.0, deployment).await {
            Ok(note) => {
                deployment.state = Some(DeploymentRolloutState::Complete);
                deployment.message = Some(note);
                self.rolling = self.rolling.saturating_sub(1);
            }
            Err(failure) => {
                self.failed_attempt(key, deployment, failure);
                if deployment.state == Some(DeploymentRolloutState::Failed) {
                    deployment.state = Some(DeploymentRolloutState::Complete);
                    self.rolling = self.rolling.saturating_sub(1);
                }
            }
        }
    }
}

/// The VCAP Secret a Deployment uses (`Some(None)`: none it agrees on) when this batch rolled it:
/// it carries the batch's annotation, and what it reads is a Secret of this batch (by label) or
/// one the stores do not show yet (the batch's own, just written). An annotation someone else
/// copied onto a Deployment that reads another Secret proves nothing.
fn rolled_by(context: &Context, namespace: &str, deployment: &str, batch: &str) -> Option<Option<String>> {
    let live = context.stores.deployment(namespace, deployment)?;
    if live.annotations().get(ANNOTATION_ROLLED_BY).map(String::as_str) != Some(batch) {
        return None;
    }
    let uses = context.stores.vcap_secret_of(&live);
    let ours = uses.as_ref().is_none_or(|name| {
        context
            .stores
            .vcap_secrets
            .find(Some(namespace), name)
            .is_none_or(|secret| secret.label(LABEL_BATCH) == Some(batch))
    });
    ours.then_some(uses)
}

/// Where a Deployment's VCAP Secret comes from.
struct Target<'a> {
    key: &'a RolloutKey,
    version: &'a crate::api::CAPApplicationVersion,
    planned: &'a DeploymentPlan,
    /// The Deployment carries this batch's annotation: the VCAP Secret it uses, if any.
    rolled_by_this_batch: Option<Option<String>>,
}

/// What undoing one Deployment did.
#[derive(Debug, PartialEq, Eq)]
enum Undid {
    /// Nothing to undo (never started, completed, or nothing to go back to).
    Nothing,
    Back,
    /// Left as it is, and why is in its message.
    Left,
    /// A read or write that may work next time: the batch stays open.
    Pending,
}

/// Delete the VCAP Secret a completed Deployment used before, unless anything still uses it
/// or it is not a VCAP Secret (no owner-hash label).
async fn remove_previous(
    context: &Context,
    namespace: &str,
    deployment: &BatchDeployment,
) -> Result<String, WriteFailure> {
    let Some(previous) = deployment.previous_vcap_secret.clone().filter(|p| Some(p) != deployment.vcap_secret.as_ref())
    else {
        return Ok("rolled out".into());
    };
    if context.stores.vcap_secret_read(namespace, &previous) {
        return Ok(format!("rolled out; previous secret {previous} kept: another Deployment uses it"));
    }
    let Some(secret) = context.stores.vcap_secrets.find(Some(namespace), &previous) else {
        return Ok(format!("rolled out; previous secret {previous} is gone or not a VCAP secret, left alone"));
    };
    // The previous Secret came from a batch deleted before it finished: the Secret that one
    // replaced was its to delete (`orphans` would, from this Secret, which goes now). First.
    let orphaned = secret
        .label(LABEL_BATCH)
        .filter(|batch| context.stores.batches.find(Some(namespace), batch).is_none())
        .and_then(|_| secret.annotation(ANNOTATION_PREVIOUS_SECRET))
        .filter(|before| Some(*before) != deployment.vcap_secret.as_deref())
        .and_then(|before| context.stores.vcap_secrets.find(Some(namespace), before))
        .filter(|before| !context.stores.vcap_secret_read(namespace, before.name()));
    if let Some(before) = orphaned
        && let Err(error) =
            context.writes.delete_secret(namespace, before.name(), before.uid().map(str::to_owned)).await
    {
        let what = format!("rolled out but could not delete {}, which a deleted batch left", before.name());
        return Err(WriteFailure::new(&what, &error));
    }
    match context.writes.delete_secret(namespace, &previous, secret.uid().map(str::to_owned)).await {
        Ok(_) => Ok(format!("rolled out; previous VCAP secret {previous} deleted")),
        Err(error) => {
            Err(WriteFailure::new(&format!("rolled out but could not delete previous secret {previous}"), &error))
        }
    }
}

/// A Deployment the plan no longer lists: failed if the plan says why, else nothing to do.
fn not_in_plan(fresh: &AppPlan, deployment: &mut BatchDeployment) {
    match fresh.problems.iter().find(|p| p.deployment.as_deref() == Some(deployment.name.as_str())) {
        Some(problem) => {
            deployment.state = Some(DeploymentRolloutState::Failed);
            deployment.message = Some(problem.message.clone());
        }
        None => complete_unchanged(deployment, "no longer affected; nothing written"),
    }
}

/// A queued Deployment the fresh plan does not restart: completed unchanged, with the skip
/// metric's label. One this batch rolled already (a lost status write) is followed instead.
fn skip(action: &PlanAction, rolled_by_this_batch: bool, deployment: &mut BatchDeployment) -> Option<&'static str> {
    match action {
        PlanAction::Unchanged if rolled_by_this_batch => None,
        PlanAction::Unchanged => {
            complete_unchanged(deployment, "already uses current credentials; nothing written");
            Some("unchanged")
        }
        PlanAction::Missing => {
            complete_unchanged(deployment, MISSING_DEPLOYMENT);
            Some("missing")
        }
        PlanAction::NotOwned => {
            complete_unchanged(deployment, "not owned by its CAPApplicationVersion (any more); left alone");
            deployment.action = DeploymentAction::NotOwned;
            Some("not owned")
        }
        PlanAction::Restart => None,
    }
}

/// A Deployment this batch had rolled before a restart: followed again, nothing written.
fn resumed(deployment: &mut BatchDeployment, secret: String, previous: Option<String>, generation: i64) {
    deployment.vcap_secret = Some(secret);
    deployment.previous_vcap_secret = previous;
    deployment.rolled_generation = Some(generation);
    deployment.state = Some(DeploymentRolloutState::Rolling);
    deployment.message = Some("rolling (resumed)".into());
}

/// The replica counts and the message of a Deployment's rollout.
fn show_progress(deployment: &mut BatchDeployment, progress: &RolloutProgress) {
    deployment.replicas = Some(progress.replicas);
    deployment.updated_replicas = Some(progress.updated);
    deployment.ready_replicas = Some(progress.ready);
    deployment.available_replicas = Some(progress.available);
    deployment.message = Some(progress.message.clone());
}

/// How an undo ends the batch: what the condition said, and what went back and what not.
fn undone_message(said: &str, back: usize, left: &[String]) -> String {
    let mut message =
        format!("{said}; {} pointed back at their previous VCAP Secrets", crate::output::count(back, "Deployment"));
    if !left.is_empty() {
        message.push_str(&format!(", left alone: {}", left.join(", ")));
    }
    message
}

/// Why capdeck leaves a Deployment alone that it had pointed at its VCAP Secret.
fn changed_by_someone_else(uses: Option<String>) -> String {
    format!(
        "the Deployment was changed by someone else and now uses {}",
        uses.unwrap_or_else(|| "no VCAP secret".into())
    )
}

/// The value of a retry's Pod template annotation: its time, to the second.
fn retry_stamp(at: &Time) -> String {
    super::status::format_time(at.0)
}

fn complete_unchanged(deployment: &mut BatchDeployment, message: &str) {
    deployment.action = DeploymentAction::Unchanged;
    deployment.state = Some(DeploymentRolloutState::Complete);
    deployment.message = Some(message.into());
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(name: &str, state: &str) -> BatchDeployment {
        serde_json::from_value(json!({"name": name, "version": "v", "workload": name, "action": "Restart",
            "state": state, "vcapSecret": format!("{name}-new"), "previousVcapSecret": format!("{name}-old")}))
        .expect("deployment")
    }

    fn key(name: &str) -> RolloutKey {
        ("ns".into(), "b".into(), name.into())
    }

    fn failure(transient: bool) -> WriteFailure {
        WriteFailure { message: "could not update the Deployment: no".into(), transient }
    }

    #[test]
    fn a_write_that_retrying_cannot_fix_gives_up_after_max_attempts() {
        let mut rollouts = Rollouts::default();
        let mut srv = deployment("srv", "Queued");
        for attempt in 1..MAX_ATTEMPTS {
            rollouts.failed_attempt(&key("srv"), &mut srv, failure(false));
            assert_eq!(srv.state, Some(DeploymentRolloutState::Queued), "attempt {attempt}");
            assert_eq!(srv.message.as_deref(), Some("could not update the Deployment: no; retrying"));
        }
        rollouts.failed_attempt(&key("srv"), &mut srv, failure(false));
        assert_eq!(srv.state, Some(DeploymentRolloutState::Failed));
        assert_eq!(srv.message.as_deref(), Some("could not update the Deployment: no (gave up after 5 attempts)"));
    }

    #[test]
    fn transient_failures_are_retried_for_as_long_as_they_last() {
        let mut rollouts = Rollouts::default();
        let mut srv = deployment("srv", "Queued");
        for _ in 0..MAX_ATTEMPTS * 3 {
            rollouts.failed_attempt(&key("srv"), &mut srv, failure(true));
        }
        assert_eq!(srv.state, Some(DeploymentRolloutState::Queued));
        assert_eq!(rollouts.attempts.get(&key("srv")), Some(&0));
    }

    #[test]
    fn a_restart_rolls_from_its_generation_and_gets_its_attempts_back() {
        let mut rollouts = Rollouts::default();
        let mut srv = deployment("srv", "Queued");
        rollouts.failed_attempt(&key("srv"), &mut srv, failure(false));
        rollouts.follow_from(&key("srv"), &mut srv, 4, "rolling");
        assert_eq!((srv.state, srv.rolled_generation), (Some(DeploymentRolloutState::Rolling), Some(4)));
        assert_eq!(rollouts.rolling, 1, "it counts against --max-parallel-rollouts");
        assert!(rollouts.attempts.is_empty());
    }

    #[test]
    fn a_retried_batch_forgets_the_attempts_of_its_own_deployments_only() {
        let mut rollouts = Rollouts::default();
        rollouts.attempts.insert(key("srv"), 3);
        rollouts.attempts.insert(("ns".into(), "other".into(), "srv".into()), 2);
        rollouts.forget_attempts(&AppKey::new("ns", "b"));
        assert_eq!(rollouts.attempts.keys().map(|k| k.1.as_str()).collect::<Vec<_>>(), ["other"]);
    }

    #[test]
    fn a_pass_counts_rolling_and_failing_restarts_across_open_batches() {
        let batch = |deployments: Vec<BatchDeployment>| RotationBatchStatus { deployments, ..Default::default() };
        let mut unchanged = deployment("cron", "Rolling");
        unchanged.action = DeploymentAction::Unchanged;
        let open = [
            batch(vec![deployment("srv", "Rolling"), deployment("mq", "Failing"), deployment("ui", "Queued")]),
            batch(vec![deployment("srv", "Stalled"), deployment("db", "Rolling"), unchanged]),
        ];
        let mut rollouts = Rollouts::default();
        let checked =
            PodsChecked { at: tokio::time::Instant::now(), attempt: String::new(), verdict: Some(NewPods::Fine) };
        rollouts.pods_checked.insert(key("srv"), checked.clone());
        rollouts.pods_checked.insert(("ns".into(), "ended".into(), "srv".into()), checked);
        let open_keys = BTreeSet::from([AppKey::new("ns", "a"), AppKey::new("ns", "b")]);
        rollouts.begin_pass(&open, &open_keys);
        assert_eq!(rollouts.rolling, 3);
        assert_eq!(rollouts.pods_checked.keys().map(|k| k.1.as_str()).collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn what_the_fresh_plan_says_of_a_queued_deployment() {
        let cases = [
            (PlanAction::Restart, false, None, "Queued"),
            (PlanAction::Unchanged, true, None, "Queued"),
            (PlanAction::Unchanged, false, Some("unchanged"), "Complete"),
            (PlanAction::Missing, false, Some("missing"), "Complete"),
            (PlanAction::Missing, true, Some("missing"), "Complete"),
        ];
        for (action, rolled, skipped, state) in cases {
            let mut srv = deployment("srv", "Queued");
            assert_eq!(skip(&action, rolled, &mut srv), skipped, "{action:?} rolled {rolled}");
            assert_eq!(srv.state, Some(serde_json::from_value(json!(state)).expect("state")), "{action:?}");
            if skipped.is_some() {
                assert_eq!(srv.action, DeploymentAction::Unchanged, "not restarted: it does not count as one");
            }
        }
    }

    #[test]
    fn a_deployment_gone_from_the_plan_fails_only_when_the_plan_says_why() {
        let mut plan = AppPlan::default();
        let mut gone = deployment("srv", "Queued");
        not_in_plan(&plan, &mut gone);
        assert_eq!(gone.state, Some(DeploymentRolloutState::Complete));
        assert_eq!(gone.message.as_deref(), Some("no longer affected; nothing written"));
        plan.problems.push(crate::plan::Problem {
            namespace: "ns".into(),
            application: Some("app".into()),
            deployment: Some("srv".into()),
            secret: Some("srv-uaa".into()),
            message: "secret srv-uaa is missing".into(),
            kind: crate::plan::ProblemKind::MissingSecret,
        });
        let mut broken = deployment("srv", "Queued");
        not_in_plan(&plan, &mut broken);
        assert_eq!(broken.state, Some(DeploymentRolloutState::Failed));
        assert_eq!(broken.message.as_deref(), Some("secret srv-uaa is missing"));
    }

    #[test]
    fn a_resumed_deployment_and_its_progress_are_shown_as_they_are() {
        let mut srv = deployment("srv", "Queued");
        resumed(&mut srv, "srv-live".into(), None, 9);
        assert_eq!(srv.vcap_secret.as_deref(), Some("srv-live"));
        assert_eq!((srv.previous_vcap_secret.as_deref(), srv.rolled_generation), (None, Some(9)));
        assert_eq!(srv.message.as_deref(), Some("rolling (resumed)"));
        let progress = RolloutProgress {
            progress: Progress::Rolling,
            message: "2 of 3 updated".into(),
            replicas: 3,
            updated: 2,
            ready: 1,
            available: 1,
        };
        show_progress(&mut srv, &progress);
        let counts = (srv.replicas, srv.updated_replicas, srv.ready_replicas, srv.available_replicas);
        assert_eq!(counts, (Some(3), Some(2), Some(1), Some(1)));
        assert_eq!(srv.message.as_deref(), Some("2 of 3 updated"));
    }

    #[test]
    fn an_undo_says_what_went_back_and_what_was_left_alone() {
        assert_eq!(
            undone_message("undone by erin", 2, &[]),
            "undone by erin; 2 Deployments pointed back at their previous VCAP Secrets"
        );
        assert_eq!(
            undone_message("undone by erin", 1, &["ui".into(), "mq".into()]),
            "undone by erin; 1 Deployment pointed back at their previous VCAP Secrets, left alone: ui, mq"
        );
        assert_eq!(
            changed_by_someone_else(Some("hand-made".into())),
            "the Deployment was changed by someone else and now uses hand-made"
        );
        assert_eq!(
            changed_by_someone_else(None),
            "the Deployment was changed by someone else and now uses no VCAP secret"
        );
        assert_eq!(retry_stamp(&Time("2026-11-23T12:00:00.75Z".parse().expect("time"))), "2026-11-23T12:00:00Z");
    }
}
