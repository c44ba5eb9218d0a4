//! One reconcile pass: detect rotations (`detect`), put them into batches (`batching`), and move
//! every open batch along: a pure phase decision (`decide`) whose effects this module executes
//! (status, spec, events) together with the rollout writes (`rollout`). Reads come from the
//! shared stores; every write goes through `Writes`. Only the leader writes; an observer only
//! keeps its rotation baseline.
//!
//! Crash safety without extra writes: a VCAP Secret this engine creates carries the batch name
//! (label) and the Secret it replaces (annotation), and a rolled Deployment carries the batch
//! name (annotation). A restarted engine (or a new leader) finds what a previous pass did from
//! those, so a Deployment is rolled at most once per batch.

mod backoff;
pub mod batching;
pub mod decide;
mod detect;
pub mod pods;
mod rollout;
mod status;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::config::EngineConfig;
use super::metrics::{BatchLabels, Metrics, PhaseLabels};
use super::writes::Writes;
use crate::api::rotation_batch::{RotatedSecret, reason};
use crate::api::service_binding::ServiceBinding;
use crate::api::{ANNOTATION_ROLLED_AT, BatchPhase, CAPApplication, RotationBatch, RotationBatchStatus};
use crate::cluster::stores::Stores;
use crate::credentials::{batch_margin_seconds, batch_revocation, seconds};
use crate::plan::{CapIndex, Rotated, plan_application};
use backoff::Backoff;
use decide::{Attributed, Decision, DecisionContext, apply, decide, record_attribution, rollout_outcome, skip_reasons};
use status::{condition_reason, finish, is_active, is_done, ready_condition, user_action_text};

type AppKey = (String, String);
/// (namespace, batch, Deployment): one Deployment's rollout in one batch.
type RolloutKey = (String, String, String);

#[derive(Clone, Debug, PartialEq, Eq)]
struct SeenSecret {
    uid: String,
    hash: String,
}

pub struct Reconciler {
    pub(crate) config: EngineConfig,
    pub(crate) stores: Stores,
    pub(crate) metrics: Metrics,
    writes: Writes,
    /// Last data hash and uid of every referenced binding Secret (the rotation baseline).
    seen: HashMap<AppKey, SeenSecret>,
    /// Rotations not yet in a batch, per application.
    pending: BTreeMap<AppKey, BTreeMap<String, RotatedSecret>>,
    /// Re-check every opted-in application (start-up and on becoming leader).
    pub(crate) recheck_all: bool,
    recheck: BTreeSet<AppKey>,
    /// Applications whose pending rotations the re-check found (not a watched change).
    found_by_recheck: BTreeSet<AppKey>,
    /// (generation, opted in) of every application, to notice spec changes.
    apps_known: HashMap<AppKey, (i64, bool)>,
    /// Batches we wrote: the store must show at least this resourceVersion before we read them.
    awaited: HashMap<AppKey, String>,
    progress_written: HashMap<AppKey, tokio::time::Instant>,
    attempts: HashMap<RolloutKey, u32>,
    /// When each rolling Deployment's new Pods were last listed (at most every `POD_CHECK_INTERVAL`).
    pods_checked: HashMap<RolloutKey, tokio::time::Instant>,
    /// Namespaces where RBAC forbids listing Pods: said once, not asked again.
    pods_denied: BTreeSet<String>,
    /// Deployments rolling right now, across batches (for --max-parallel-rollouts).
    rolling: usize,
    /// Batches whose last drive had a failed write wait for their own retry time; others go on.
    batch_backoff: Backoff<AppKey>,
    /// Applications whose rotations could not be put into a batch.
    opening_backoff: Backoff<AppKey>,
    /// The managedFields of batches whose approval or hold the engine checks (the stores strip
    /// them), by the resourceVersion they were read at.
    managed_fields: HashMap<AppKey, (String, Vec<ManagedFieldsEntry>)>,
}

fn batch_key(batch: &RotationBatch) -> AppKey {
    (batch.namespace().unwrap_or_default(), batch.name_any())
}

impl Reconciler {
    pub fn new(config: EngineConfig, stores: Stores, metrics: Metrics, writes: Writes) -> Self {
        Self {
            config,
            stores,
            metrics,
            writes,
            seen: HashMap::new(),
            pending: BTreeMap::new(),
            recheck_all: true,
            recheck: BTreeSet::new(),
            found_by_recheck: BTreeSet::new(),
            apps_known: HashMap::new(),
            awaited: HashMap::new(),
            progress_written: HashMap::new(),
            attempts: HashMap::new(),
            pods_checked: HashMap::new(),
            pods_denied: BTreeSet::new(),
            rolling: 0,
            batch_backoff: Backoff::default(),
            opening_backoff: Backoff::default(),
            managed_fields: HashMap::new(),
        }
    }

    fn index(&self) -> CapIndex {
        CapIndex::new(self.stores.applications.state(), self.stores.versions.state(), self.stores.tenants.state())
    }

    fn application(&self, namespace: &str, name: &str) -> Option<Arc<CAPApplication>> {
        self.stores.applications.get(&ObjectRef::new(name).within(namespace))
    }

    fn open_batches(&self) -> Vec<Arc<RotationBatch>> {
        let mut batches: Vec<Arc<RotationBatch>> =
            self.stores.batches.state().into_iter().filter(|b| b.engine_work()).collect();
        batches.sort_by_key(|b| (b.metadata.creation_timestamp.clone().map(|t| t.0), b.name_any()));
        batches
    }

    /// Wait (bounded) until the stores show the batches we wrote, so a pass never acts on a
    /// version older than its own last write.
    async fn catch_up(&mut self) {
        if self.awaited.is_empty() {
            return;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        let mut changes = self.stores.changes();
        loop {
            self.awaited.retain(|(namespace, name), version| {
                match self.stores.batches.get(&ObjectRef::new(name).within(namespace)) {
                    None => true,
                    Some(batch) => {
                        let seen = batch.resource_version().unwrap_or_default();
                        match (seen.parse::<u64>(), version.parse::<u64>()) {
                            (Ok(seen), Ok(wanted)) => seen < wanted,
                            _ => seen != *version,
                        }
                    }
                }
            });
            if self.awaited.is_empty() || tokio::time::Instant::now() >= deadline {
                self.awaited.clear();
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), changes.changed()).await;
        }
    }

    /// One pass. Returns how long the engine may sleep before the next one (if nothing changes).
    pub async fn pass(&mut self, leader: bool) -> Option<Duration> {
        self.catch_up().await;
        let now = self.config.clock.now();
        self.detect(now);
        if !leader {
            for (namespace, application) in self.pending.keys() {
                // An observer must say why a rotation it saw opened nothing: the leader handles
                // it (or nobody, which /readyz and the console's header say).
                tracing::info!(
                    namespace = %namespace,
                    application = %application,
                    "rotation seen, but this engine does not hold the lease: the leader opens the batch"
                );
            }
            self.pending.clear();
            self.recheck.clear();
            self.batch_backoff = Backoff::default();
            self.opening_backoff = Backoff::default();
            self.update_phase_metrics(self.stores.service_bindings().as_deref());
            return None;
        }
        let index = self.index();
        if std::mem::take(&mut self.recheck_all) {
            self.queue_recheck_all(&index);
        }
        for key in std::mem::take(&mut self.recheck) {
            self.recheck_application(&key, &index, now);
        }
        self.open_or_join(now).await;
        let open = self.open_batches();
        self.rolling = open
            .iter()
            .flat_map(|b| b.status.iter().flat_map(|s| s.deployments.iter()))
            .filter(|d| is_active(d))
            .count();
        let instant = tokio::time::Instant::now();
        // Taken once per pass: every open batch's decision, the wake-up and the margin metric use it.
        let bindings = self.stores.service_bindings();
        self.batch_backoff.forget_except(&open.iter().map(|b| batch_key(b)).collect());
        let open_keys: BTreeSet<AppKey> = open.iter().map(|b| batch_key(b)).collect();
        self.pods_checked.retain(|(namespace, batch, _), _| open_keys.contains(&(namespace.clone(), batch.clone())));
        self.managed_fields.retain(|key, _| open_keys.contains(key));
        for batch in open {
            let key = batch_key(&batch);
            if self.batch_backoff.waiting(&key, instant) {
                continue;
            }
            let failures = self.writes.failures();
            self.drive(&batch, &index, now, bindings.as_deref()).await;
            self.batch_backoff.record(&key, self.writes.failures() > failures, instant);
        }
        self.update_phase_metrics(bindings.as_deref());
        [self.next_wake(bindings.as_deref()), self.batch_backoff.next(instant), self.opening_backoff.next(instant)]
            .into_iter()
            .flatten()
            .min()
    }

    fn next_wake(&self, bindings: Option<&[ServiceBinding]>) -> Option<Duration> {
        let mut wake: Option<Duration> = None;
        for batch in self.open_batches() {
            let status = batch.status.clone().unwrap_or_default();
            // A hold the engine does not honour (its condition says so) holds nothing.
            let held = batch.spec.hold.is_some() && !batch.attribution_refused(Attributed::Hold.condition_type());
            let candidate = if status.deployments.iter().any(|d| !is_done(d)) && status.rollout_started_at.is_some() {
                Some(self.config.progress_interval)
            } else if status.deployments.is_empty() && !held {
                Some(self.config.clock.until(batch.spec.window_end.0).max(Duration::from_millis(10)))
            } else if status.rollout_started_at.is_none() && !held {
                // Waiting for an approval: its margin shrinks with every second; escalate when it
                // drops below one expected rollout (revocation − 2 × expected rollout).
                bindings
                    .and_then(|bindings| batch_revocation(bindings, &batch))
                    .and_then(|revocation| {
                        let rollout = seconds(self.config.expected_rollout);
                        Timestamp::from_second(revocation.as_second().checked_sub(rollout.checked_mul(2)?)?).ok()
                    })
                    .map(|at| self.config.clock.until(at).max(Duration::from_millis(10)))
                    .filter(|_| condition_reason(&status) != Some(reason::CREDENTIALS_EXPIRING))
            } else {
                None
            };
            wake = match (wake, candidate) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        wake
    }

    fn update_phase_metrics(&self, bindings: Option<&[ServiceBinding]>) {
        let mut counts: BTreeMap<String, i64> =
            BatchPhase::KNOWN.iter().map(|phase| ((*phase).to_string(), 0)).collect();
        for batch in self.stores.batches.state() {
            *counts.entry(batch.phase().to_string()).or_default() += 1;
        }
        // Only open batches with a known revocation have a margin; ended ones drop out.
        let now = self.config.clock.now();
        self.metrics.credentials_margin_seconds.clear();
        for batch in self.open_batches() {
            if let Some(revocation) = bindings.and_then(|bindings| batch_revocation(bindings, &batch)) {
                let labels = BatchLabels { namespace: batch.namespace().unwrap_or_default(), batch: batch.name_any() };
                let margin =
                    batch_margin_seconds(revocation, batch.spec.window_end.0, now, self.config.expected_rollout);
                self.metrics.credentials_margin_seconds.get_or_create(&labels).set(margin);
            }
        }
        for (phase, count) in counts {
            self.metrics.batches.get_or_create(&PhaseLabels { phase }).set(count);
        }
    }

    /// Move one open batch along: follow its rolling Deployments, decide, execute.
    async fn drive(
        &mut self,
        batch: &Arc<RotationBatch>,
        index: &CapIndex,
        now: Timestamp,
        bindings: Option<&[ServiceBinding]>,
    ) {
        let Some(attributed) = self.with_managed_fields(batch).await else { return };
        let batch = &attributed;
        let old = batch.status.clone().unwrap_or_default();
        let mut status = old.clone();
        status.observed_generation = batch.metadata.generation;
        if batch.metadata.managed_fields.is_some() {
            record_attribution(batch, &mut status, now);
        }
        self.track_progress(batch, &mut status).await;
        let namespace = batch.namespace().unwrap_or_default();
        let app = self.application(&namespace, &batch.spec.application);
        // The decision's closures borrow the stores; they end before the first await.
        let decision = {
            let last_rolled = |deployment: &str| {
                self.stores.deployment(&namespace, deployment).and_then(|live| {
                    live.annotations().get(ANNOTATION_ROLLED_AT).and_then(|at| at.parse::<Timestamp>().ok())
                })
            };
            let context = DecisionContext {
                now,
                approval_default: self.config.approval,
                min_rollout_interval: self.config.min_rollout_interval,
                last_rolled: &last_rolled,
                revocation: bindings.and_then(|bindings| batch_revocation(bindings, batch)),
                expected_rollout: self.config.expected_rollout,
                halt_on_failure: self.config.halt_on_failure,
            };
            let plan = || {
                let rotated = Rotated::Secrets(batch.spec.secrets.iter().map(|s| s.name.clone()).collect());
                app.as_deref().map(|app| plan_application(app, &rotated, index, &self.stores)).unwrap_or_default()
            };
            decide(batch, &status, app.as_deref(), plan, &context)
        };
        apply(&decision, &mut status, now);
        let mut spec_update = None;
        match &decision {
            Decision::Evaluate(evaluation) => {
                for skipped in skip_reasons(&evaluation.deployments) {
                    self.metrics.skipped(skipped);
                }
                spec_update = evaluation.approval_required.map(|required| {
                    let mut update = (**batch).clone();
                    // The server keeps its own record of who wrote what.
                    update.metadata.managed_fields = None;
                    update.spec.approval.get_or_insert_with(Default::default).required = required;
                    update
                });
            }
            Decision::Start(start) => {
                if let Some(waited) = start.approval_waited {
                    self.metrics.approval_wait_seconds.observe(waited);
                }
            }
            Decision::Retry { .. } => {
                // Writes that gave up get their attempts back.
                let (namespace, name) = batch_key(batch);
                self.attempts.retain(|(ns, b, _), _| !(ns == &namespace && b == &name));
            }
            Decision::Undo { .. } => self.undo(batch, &mut status, now).await,
            _ => {}
        }
        if decision.rolls()
            && let Some(app) = &app
        {
            self.roll(batch, app, index, &mut status, now).await;
            status::progress_summary(&mut status);
            if let Some(outcome) = rollout_outcome(&status.deployments) {
                if let Some(started) = &status.rollout_started_at {
                    self.metrics.rollout_duration_seconds.observe(now.duration_since(started.0).as_secs_f64().max(0.0));
                }
                finish(&mut status, outcome.phase, outcome.reason, outcome.message, now);
            }
        }
        self.write_status(batch, &old, status, spec_update).await;
    }

    /// The batch with its managedFields when the decision takes an approval or a hold from it
    /// (`decide::attribution_check`): the stores strip them, so they are read live — by `list`
    /// with a name selector, the verb the engine has — once per resourceVersion. `None` when they
    /// cannot be known this pass (the read failed, or the store is behind the server: the watch
    /// brings the newer batch and another pass); the batch is driven next time.
    async fn with_managed_fields(&mut self, batch: &Arc<RotationBatch>) -> Option<Arc<RotationBatch>> {
        let approval_pending = batch.spec.approval.as_ref().is_some_and(|a| a.approved_by.is_some())
            && batch.status.as_ref().is_none_or(|s| s.rollout_started_at.is_none());
        if batch.spec.hold.is_none() && !approval_pending {
            return Some(batch.clone());
        }
        let key = batch_key(batch);
        let version = batch.resource_version().unwrap_or_default();
        let fields = match self.managed_fields.get(&key) {
            Some((read_at, fields)) if *read_at == version => fields.clone(),
            _ => {
                let (namespace, name) = &key;
                let api: kube::Api<RotationBatch> = kube::Api::namespaced(self.writes.client().clone(), namespace);
                let params = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
                let live = match api.list_metadata(&params).await {
                    Ok(list) => list.items.into_iter().next(),
                    Err(error) => {
                        tracing::warn!(namespace = %namespace, batch = %name, error = %crate::cluster::describe_error(&error),
                            "could not read who wrote the batch's approval or hold (its managedFields); retrying");
                        return None;
                    }
                };
                let live = live?;
                if live.resource_version().unwrap_or_default() != version {
                    return None;
                }
                let fields = live.metadata.managed_fields.unwrap_or_default();
                self.managed_fields.insert(key, (version, fields.clone()));
                fields
            }
        };
        let mut attributed = (**batch).clone();
        attributed.metadata.managed_fields = Some(fields);
        Some(Arc::new(attributed))
    }

    /// Write a changed status (progress-only changes at most every `--progress-interval`), then
    /// the spec update, then one log line and one Event per transition.
    async fn write_status(
        &mut self,
        batch: &RotationBatch,
        old: &RotationBatchStatus,
        status: RotationBatchStatus,
        spec_update: Option<RotationBatch>,
    ) {
        if status == *old {
            return;
        }
        let key = batch_key(batch);
        let (namespace, name) = key.clone();
        let phase_changed = status.phase != old.phase || condition_reason(&status) != condition_reason(old);
        // A new spec (an SRE's approval, hold, …) is acknowledged at once through
        // observedGeneration; only replica counts wait for the progress interval.
        let progress_only = !phase_changed
            && status.observed_generation == old.observed_generation
            && status.deployments.len() == old.deployments.len();
        if progress_only
            && self.progress_written.get(&key).is_some_and(|last| last.elapsed() < self.config.progress_interval)
            && status
                .deployments
                .iter()
                .zip(&old.deployments)
                .all(|(a, b)| a.state == b.state && a.vcap_secret == b.vcap_secret)
        {
            return;
        }
        let written = match self.writes.write_status(batch, &status).await {
            Ok(written) => written,
            Err(error) => {
                tracing::warn!(batch = %name, error = %crate::cluster::describe_error(&error), "could not write batch status; retrying");
                return;
            }
        };
        self.progress_written.insert(key.clone(), tokio::time::Instant::now());
        self.awaited.insert(key.clone(), written.resource_version().unwrap_or_default());
        // An approval or a hold the engine does not honour: said once per refusal, in the log
        // and as a Warning Event (the condition stays on the batch).
        for field in Attributed::ALL {
            let refusal = |status: &RotationBatchStatus| {
                status.conditions.iter().find(|c| c.type_ == field.condition_type()).map(|c| c.message.clone())
            };
            if let Some(message) = refusal(&status).filter(|message| refusal(old).as_ref() != Some(message)) {
                tracing::warn!(namespace = %namespace, batch = %name, reason = field.refusal_reason(), "batch {name}: {message}");
                if let Some(app) = self.application(&namespace, &batch.spec.application) {
                    self.writes.event(&app, true, field.refusal_reason(), format!("batch {name}: {message}")).await;
                }
            }
        }
        if let Some(mut update) = spec_update {
            update.metadata.resource_version = written.metadata.resource_version.clone();
            match self.writes.replace_batch(&update).await {
                Ok(replaced) => {
                    self.awaited.insert(key.clone(), replaced.resource_version().unwrap_or_default());
                }
                Err(error) => {
                    tracing::warn!(batch = %name, error = %crate::cluster::describe_error(&error), "could not record the approval requirement")
                }
            }
        }
        let Some(app) = self.application(&namespace, &batch.spec.application).filter(|_| phase_changed) else {
            return;
        };
        let reason = condition_reason(&status).unwrap_or(reason::ROLLING_OUT).to_string();
        let message = ready_condition(&status).map(|c| c.message.clone()).unwrap_or_default();
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
        // (A failure-guard release says so in its own condition, below; not twice.)
        if old.phase == BatchPhase::Held
            && status.phase != BatchPhase::Held
            && reason != reason::RELEASED
            && let Some(released) = &batch.spec.released
        {
            let text = user_action_text(released, "released");
            tracing::info!(namespace = %namespace, batch = %name, "batch released: {text}");
            self.writes.event(&app, false, reason::RELEASED, format!("batch {name}: {text}")).await;
        }
        let warning = matches!(status.phase, BatchPhase::Failed)
            || reason == reason::STORM_GUARD
            || reason == reason::CREDENTIALS_EXPIRING
            || reason == reason::ROLLOUT_FAILURE_GUARD;
        self.writes.event(&app, warning, &reason, format!("batch {name}: {message}")).await;
    }
}
