//! One reconcile pass: detect rotations (`detect`), put them into batches (`batching`), and move
//! every open batch along: a pure phase decision (`decide`) whose effects the parts execute —
//! the rollout writes (`rollout`), the status, spec and Events (`transitions`). Each part owns
//! its own state; they share the `Context` (settings, stores, metrics, writes). Reads come from
//! the shared stores; every write goes through `Writes`. Only the leader writes; an observer
//! only keeps its rotation baseline.
//!
//! Crash safety without extra writes: a VCAP Secret this engine creates carries the batch name
//! (label) and the Secret it replaces (annotation), and a rolled Deployment carries the batch
//! name (annotation). A restarted engine (or a new leader) finds what a previous pass did from
//! those, so a Deployment is rolled at most once per batch.

mod backoff;
pub mod batching;
mod detect;
mod managed_fields;
mod orphans;
pub mod pods;
mod rollout;
mod transitions;

// The decision is the core's (pure, table-tested there); `status` keeps its path here.
pub use capdeck_core::decide;
use capdeck_core::decide::status;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::config::EngineConfig;
use super::metrics::{AppLabels, BatchLabels, ErrorLabels, HeldLabels, Metrics, PhaseLabels, StateLabels};
use super::writes::Writes;
use crate::api::change_window::{ANNOTATION_CHANGE_WINDOWS, AppliedWindows};
use crate::api::rotation_batch::ReadyReason;
use crate::api::rotation_batch::state::{ApprovalNeed, BatchState, HeldBy, WaitCause};
use crate::api::service_binding::ServiceBinding;
use crate::api::{ANNOTATION_ROLLED_AT, BatchPhase, CAPApplication, RotationBatch, RotationBatchStatus};
use crate::cluster::stores::Stores;
use crate::credentials::{batch_margin_seconds, batch_revocation, seconds};
use crate::leadership::WatchedLeases;
use crate::plan::{CapIndex, Rotated, plan_application};
use backoff::Backoff;
use batching::Batching;
use decide::{Attributed, Decision, DecisionContext, apply, decide, record_attribution, rollout_outcome, skip_reasons};
use detect::Detection;
use managed_fields::ManagedFields;
use rollout::Rollouts;
use status::{condition_reason, finish, is_done};
use transitions::Transitions;

/// An application's or a batch's namespace and name.
type AppKey = crate::api::ObjectKey;
/// (namespace, batch, Deployment): one Deployment's rollout in one batch.
type RolloutKey = (String, String, String);

fn batch_key(batch: &RotationBatch) -> AppKey {
    AppKey::of(&batch.metadata)
}

/// What every part of a pass reads and writes through.
struct Context {
    config: EngineConfig,
    stores: Stores,
    metrics: Metrics,
    writes: Writes,
}

impl Context {
    fn index(&self) -> CapIndex {
        CapIndex::new(self.stores.applications.state(), self.stores.versions.state(), self.stores.tenants.state())
    }

    fn application(&self, namespace: &str, name: &str) -> Option<Arc<CAPApplication>> {
        self.stores.applications.find(Some(namespace), name)
    }

    /// The batches as the cluster shows them started: one whose stored status has not said its
    /// rollout started yet (a status write that failed, an engine that stopped between its
    /// Deployment write and its status write, a new leader) but whose name a live Deployment of
    /// its namespace carries (`capdeck.dev/rotation-batch`, written with the Deployment) is
    /// rolling, and is never superseded. Read from the cluster on every pass, so a new leader
    /// judges it as the one that started it did.
    fn as_observed(&self, batches: Vec<Arc<RotationBatch>>) -> Vec<Arc<RotationBatch>> {
        let unstarted = |batch: &RotationBatch| batch.status.as_ref().is_none_or(|s| s.rollout_started_at.is_none());
        if !batches.iter().any(|batch| unstarted(batch)) {
            return batches;
        }
        let waiting: BTreeSet<(String, String)> = batches
            .iter()
            .filter(|batch| unstarted(batch))
            .map(|batch| (batch.namespace().unwrap_or_default(), batch.name_any()))
            .collect();
        let rolled: BTreeSet<(String, String)> = self
            .stores
            .deployments
            .state()
            .iter()
            .filter_map(|deployment| {
                let namespace = deployment.metadata.namespace.clone()?;
                let by = deployment.annotations().get(crate::api::ANNOTATION_ROLLED_BY)?;
                if !waiting.contains(&(namespace.clone(), by.clone())) {
                    return None;
                }
                // Beside a VCAP Secret that batch made: the annotation alone is a copy anyone
                // who may patch the Deployment can make (it would keep a batch from being
                // superseded, and its hold from being carried).
                let vcap = self.stores.vcap_secret_of(deployment)?;
                let made = self.stores.vcap_secrets.find(Some(namespace.as_str()), &vcap)?;
                crate::plan::proven_rolled_by(Some(by.as_str()), made.label(crate::plan::LABEL_BATCH))?;
                Some((namespace, by.clone()))
            })
            .collect();
        batches
            .into_iter()
            .map(|batch| {
                let key = (batch.namespace().unwrap_or_default(), batch.name_any());
                if !unstarted(&batch) || !rolled.contains(&key) {
                    return batch;
                }
                let mut status = batch.status.clone().unwrap_or_default();
                status.rollout_started_at = batch.metadata.creation_timestamp.clone();
                Arc::new(RotationBatch { status: Some(status), ..(*batch).clone() })
            })
            .collect()
    }

    fn open_batches(&self) -> Vec<Arc<RotationBatch>> {
        let mut batches: Vec<Arc<RotationBatch>> =
            self.stores.batches.state().into_iter().filter(|b| b.engine_work()).collect();
        batches.sort_by_key(|b| (b.metadata.creation_timestamp.clone().map(|t| t.0), b.name_any()));
        batches
    }

    /// Wait (bounded) until the stores show the batches we wrote, so a pass never acts on a
    /// version older than its own last write.
    async fn catch_up(&self) {
        let mut awaited = self.writes.take_awaited();
        if awaited.is_empty() {
            return;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        let mut changes = self.stores.changes();
        loop {
            awaited.retain(|key, version| {
                let seen = self.stores.batches.find(Some(key.namespace.as_str()), &key.name);
                seen.is_none_or(|batch| behind(&batch.resource_version().unwrap_or_default(), version))
            });
            if awaited.is_empty() || tokio::time::Instant::now() >= deadline {
                return;
            }
            if !stores_may_change(&mut changes, Duration::from_millis(100)).await {
                return;
            }
        }
    }
}

/// Wait up to `limit` for the stores to change. False once they never will: they stopped (a
/// shutdown), and waiting on would spin — under paused time (the tests) without ever reaching a
/// deadline, which hung the sandbox suite now and then.
async fn stores_may_change(changes: &mut tokio::sync::watch::Receiver<u64>, limit: Duration) -> bool {
    !matches!(tokio::time::timeout(limit, changes.changed()).await, Ok(Err(_)))
}

/// Whether a store that shows resourceVersion `seen` is still behind our write of `wanted`
/// (numbers compared as numbers; anything else only by equality).
fn behind(seen: &str, wanted: &str) -> bool {
    match (seen.parse::<u64>(), wanted.parse::<u64>()) {
        (Ok(seen), Ok(wanted)) => seen < wanted,
        _ => seen != wanted,
    }
}

pub struct Reconciler {
    context: Context,
    detection: Detection,
    batching: Batching,
    managed_fields: ManagedFields,
    rollouts: Rollouts,
    transitions: Transitions,
    /// Batches whose last drive had a failed write wait for their own retry time; others go on.
    batch_backoff: Backoff<AppKey>,
    /// When the leader last looked for the Go CAP Operator's Lease.
    go_operator_checked_at: Option<tokio::time::Instant>,
    /// The Go CAP Operator's Leases, watched while leading (each look is then no request).
    go_operator_leases: Option<WatchedLeases>,
    /// The open batches of the last leading pass, with their application: one gone from the
    /// stores before it ended was deleted, and its application is re-checked.
    open_seen: BTreeMap<AppKey, AppKey>,
    /// VCAP Secrets of deleted batches may wait for their cleanup (`orphans`).
    sweep_orphans: bool,
    /// Objects that did not decode on the last leading pass (kind, namespace, name): one that
    /// decodes again may hide a rotation (a Deployment the planner could not read).
    undecodable_seen: BTreeSet<(&'static str, String, String)>,
    /// Ended batches whose `status.state` could not be put right, at the resourceVersion that was
    /// refused: tried again only once the object changes (a 403 or an admission webhook would
    /// refuse every pass), and warned about once each.
    state_fix_refused: BTreeMap<AppKey, String>,
}

impl Reconciler {
    pub fn new(config: EngineConfig, stores: Stores, metrics: Metrics, writes: Writes) -> Self {
        Self {
            context: Context { config, stores, metrics, writes },
            detection: Detection::default(),
            batching: Batching::default(),
            managed_fields: ManagedFields::default(),
            rollouts: Rollouts::default(),
            transitions: Transitions::default(),
            batch_backoff: Backoff::default(),
            go_operator_checked_at: None,
            go_operator_leases: None,
            open_seen: BTreeMap::new(),
            sweep_orphans: true,
            undecodable_seen: BTreeSet::new(),
            state_fix_refused: BTreeMap::new(),
        }
    }

    /// Re-check every opted-in application on the next pass as leader (a new leader).
    pub fn recheck_everything(&mut self) {
        self.detection.recheck_everything();
        self.sweep_orphans = true;
    }

    /// An object that did not decode and does now (someone fixed it): every application is
    /// re-checked, as what it hid (a Deployment the planner could not read) may be out of date.
    fn notice_repaired_objects(&mut self) {
        let now: BTreeSet<(&'static str, String, String)> =
            self.context.stores.invalid().into_iter().map(|o| (o.kind, o.namespace, o.name)).collect();
        if let Some((kind, namespace, name)) = self.undecodable_seen.difference(&now).next() {
            tracing::info!(kind, namespace = %namespace, name = %name, "an object decodes again; re-checking every application");
            self.detection.recheck_everything();
        }
        self.undecodable_seen = now;
    }

    /// Batches open on the last leading pass and gone from the stores now were deleted before
    /// they ended: their applications are re-checked, their VCAP Secrets swept.
    fn notice_deleted_batches(&mut self) {
        for (batch, app) in std::mem::take(&mut self.open_seen) {
            let found = self.context.stores.batches.find(Some(batch.namespace.as_str()), &batch.name);
            // Ended since: a Secret it made and did not use is swept.
            if found.as_ref().is_some_and(|found| !found.engine_work()) {
                self.sweep_orphans = true;
            }
            if found.is_none() {
                tracing::warn!(namespace = %batch.namespace, batch = %batch.name, application = %app.name,
                    "an open batch was deleted before it ended; re-checking its application");
                self.detection.recheck_later(app);
                self.sweep_orphans = true;
            }
        }
    }

    /// One pass. Returns how long the engine may sleep before the next one (if nothing changes).
    pub async fn pass(&mut self, leader: bool) -> Option<Duration> {
        self.context.catch_up().await;
        let now = self.context.config.clock.now();
        let stores = &self.context.stores;
        let secret = |namespace: &str, name: &str| stores.binding_secrets.find(Some(namespace), name);
        let rotations = self.detection.detect(&stores.applications.state(), secret, now);
        self.context.metrics.rotations.inc_by(rotations);
        // Taken on every pass, leading or not: a new leader re-checks everything anyway.
        let touched = stores.take_touched();
        if !leader {
            self.observe();
            return None;
        }
        self.notice_deleted_batches();
        self.notice_repaired_objects();
        let index = self.context.index();
        self.detection.recheck(&self.context, &index, &touched, now);
        if std::mem::take(&mut self.sweep_orphans) {
            self.sweep_orphans = orphans::sweep_all(&self.context, now).await;
        }
        // As this engine decided them: a batch whose start is held in memory (its status write
        // failed) is rolling, and is never superseded.
        let open = self.context.as_observed(self.transitions.as_decided(self.context.open_batches()));
        let parts = (&mut self.detection, &mut self.managed_fields);
        self.batching.open_or_join(&self.context, &open, parts, now).await;
        // The batches this pass opened and superseded, as the stores show them once they do.
        self.context.catch_up().await;
        let open = self.context.as_observed(self.transitions.as_decided(self.context.open_batches()));
        self.batching.supersede_left_open(&self.context, &open, now).await;
        // Taken once per pass: every open batch's decision, the wake-up and the margin metric use it.
        let bindings = self.context.stores.service_bindings();
        let instant = tokio::time::Instant::now();
        self.drive_open(&index, now, bindings.as_deref(), instant).await;
        self.correct_ended_states().await;
        // After the pass's own work: a start-up re-check must not wait on this read.
        self.look_for_go_operator().await;
        self.update_phase_metrics(bindings.as_deref());
        [
            self.next_wake(bindings.as_deref()),
            self.batch_backoff.next(instant),
            self.batching.next_retry(instant),
            self.next_freeze_end(now),
            self.detection.next_settle(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Ended batches whose `status.state` (kubectl's STATE) says something else than their
    /// state: written before that field existed, or by hand. Open batches are put right by their
    /// own status writes; nothing else writes an ended one.
    async fn correct_ended_states(&mut self) {
        let ended: Vec<Arc<RotationBatch>> = self
            .context
            .stores
            .batches
            .state()
            .into_iter()
            .filter(|b| !b.engine_work() && b.state_text_stale())
            .collect();
        let stale: BTreeSet<AppKey> = ended.iter().map(|batch| batch_key(batch)).collect();
        self.state_fix_refused.retain(|key, _| stale.contains(key));
        for batch in ended {
            let (key, version) = (batch_key(&batch), batch.resource_version().unwrap_or_default());
            if self.state_fix_refused.get(&key) == Some(&version) {
                continue;
            }
            let status = batch.status.clone().unwrap_or_default();
            match self.context.writes.write_status(&batch, &status).await {
                Ok(_) => {
                    self.state_fix_refused.remove(&key);
                }
                Err(error) => {
                    tracing::warn!(namespace = %key.namespace, batch = %key.name, error = %crate::cluster::describe_error(&error), "cannot put the ended batch's status.state (kubectl's STATE) right; trying again when the batch changes");
                    self.state_fix_refused.insert(key, version);
                }
            }
        }
    }

    /// An observer keeps its baseline only, and says why a rotation it saw opened nothing.
    fn observe(&mut self) {
        for AppKey { namespace, name: application } in self.detection.pending_applications() {
            // The leader handles it (or nobody, which /readyz and the console's header say).
            tracing::info!(
                namespace = %namespace,
                application = %application,
                "rotation seen, but this engine does not hold the lease: the leader opens the batch"
            );
        }
        self.detection.forget_pending();
        self.open_seen.clear();
        self.undecodable_seen.clear();
        self.context.metrics.go_operator_running.set(0);
        self.go_operator_checked_at = None;
        self.go_operator_leases = None;
        self.batch_backoff = Backoff::default();
        self.batching.forget_backoff();
        self.update_phase_metrics(self.context.stores.service_bindings().as_deref());
    }

    /// Whether the Go CAP Operator runs (its Lease renewed, in any namespace), once a minute
    /// while leading: `capdeck_go_operator_running`. From a watch on its Lease; one LIST of at
    /// most a few Leases while the watch cannot be trusted (the first look, a failing watch).
    async fn look_for_go_operator(&mut self) {
        let due = self.go_operator_checked_at.is_none_or(|at| at.elapsed() >= Duration::from_secs(60));
        if !due {
            return;
        }
        self.go_operator_checked_at = Some(tokio::time::Instant::now());
        let now = self.context.config.clock.now();
        let client = self.context.writes.client();
        let watched = self.go_operator_leases.get_or_insert_with(|| WatchedLeases::go_operator(client));
        let renewed = match watched.current() {
            Some(leases) => Ok(crate::leadership::renewed_among(&leases, now)),
            None => crate::leadership::renewed_go_operator_leases(client, now).await,
        };
        let running = match renewed {
            Ok(renewed) => !renewed.is_empty(),
            Err(error) => {
                tracing::debug!(error = %crate::cluster::describe_error(&error), "cannot look for the Go CAP Operator's Lease");
                self.context.metrics.api_error("list", "leases", &error);
                false
            }
        };
        self.context.metrics.go_operator_running.set(i64::from(running));
    }

    /// Drive every open batch that is not waiting for its own backoff.
    async fn drive_open(
        &mut self,
        index: &CapIndex,
        now: Timestamp,
        bindings: Option<&[ServiceBinding]>,
        instant: tokio::time::Instant,
    ) {
        let open = self.context.open_batches();
        let open_keys: BTreeSet<AppKey> = open.iter().map(|b| batch_key(b)).collect();
        self.open_seen =
            open.iter().map(|b| (batch_key(b), AppKey::new(batch_key(b).namespace, &b.spec.application))).collect();
        let statuses: Vec<RotationBatchStatus> = open.iter().map(|batch| self.transitions.base(batch)).collect();
        self.rollouts.begin_pass(&statuses, &open_keys);
        self.transitions.retain(&self.context, &open_keys).await;
        self.batch_backoff.forget_except(&open_keys);
        self.managed_fields.retain(&open_keys);
        for batch in open {
            let key = batch_key(&batch);
            if self.batch_backoff.waiting(&key, instant) {
                continue;
            }
            let failures = self.context.writes.failures();
            self.drive(&batch, index, now, bindings).await;
            self.batch_backoff.record(&key, self.context.writes.failures() > failures, instant);
        }
    }

    fn next_wake(&self, bindings: Option<&[ServiceBinding]>) -> Option<Duration> {
        let config = &self.context.config;
        let until = |at: Timestamp| config.clock.until(at);
        self.context
            .open_batches()
            .iter()
            .filter_map(|batch| {
                let revocation = || bindings.and_then(|bindings| batch_revocation(bindings, batch));
                wake_for(batch, revocation, (config.progress_interval, config.expected_rollout), until)
            })
            .min()
    }

    /// A freeze that ends by itself changes no object: the engine comes back at its end (its
    /// batches may roll, and `capdeck_freeze_active` must drop).
    fn next_freeze_end(&self, now: Timestamp) -> Option<Duration> {
        let clock = &self.context.config.clock;
        self.context
            .stores
            .freezes
            .state()
            .iter()
            .filter(|freeze| freeze.active_at(now) && self.context.honours(freeze))
            .map(|freeze| clock.until(freeze.ends()).max(Duration::from_millis(10)))
            .min()
    }

    fn update_phase_metrics(&self, bindings: Option<&[ServiceBinding]>) {
        let Context { config, stores, metrics, .. } = &self.context;
        metrics.set_undecodable(&stores.invalid());
        // Read once: every gauge below is counted from the same view of the batches.
        let all = stores.batches.state();
        let open = self.context.open_batches();
        let mut counts: BTreeMap<String, i64> =
            BatchPhase::KNOWN.iter().map(|phase| ((*phase).to_string(), 0)).collect();
        for batch in &all {
            *counts.entry(batch.phase().to_string()).or_default() += 1;
        }
        // Only open batches with a known revocation have a margin; ended ones drop out.
        let now = config.clock.now();
        metrics.credentials_margin_seconds.clear();
        for batch in &open {
            if let Some(revocation) = bindings.and_then(|bindings| batch_revocation(bindings, batch)) {
                let labels = BatchLabels { namespace: batch.namespace().unwrap_or_default(), batch: batch.name_any() };
                let margin = batch_margin_seconds(revocation, batch.spec.window_end.0, now, config.expected_rollout);
                metrics.credentials_margin_seconds.get_or_create(&labels).set(margin);
            }
        }
        for (phase, count) in counts {
            metrics.batches.get_or_create(&PhaseLabels { phase }).set(count);
        }
        // Every state a batch may be in has its series (0 when none is), like the phases.
        metrics.batch_states.clear();
        for state in BatchState::every() {
            metrics.batch_states.get_or_create(&StateLabels::of(&state)).set(0);
        }
        for batch in &all {
            metrics.batch_states.get_or_create(&StateLabels::of(&batch.state())).inc();
        }
        let for_window = open
            .iter()
            .filter(|batch| {
                matches!(
                    batch.state(),
                    BatchState::Waiting { why: WaitCause::OutsideWindow | WaitCause::WindowClosed, .. }
                )
            })
            .count();
        metrics.batches_waiting_for_window.set(i64::try_from(for_window).unwrap_or(i64::MAX));
        let in_force = stores
            .freezes
            .state()
            .iter()
            .filter(|freeze| freeze.active_at(now) && self.context.honours(freeze))
            .count();
        metrics.freeze_active.set(i64::try_from(in_force).unwrap_or(i64::MAX));
        self.update_batch_alert_metrics(&all, &open, now);
        self.update_error_metrics();
    }

    /// The per-application gauges alerts fire on: how long an approval has been awaited, what
    /// is held and why, whose newest batch failed; and the applications the Go CAP Operator
    /// restarts too while it runs.
    fn update_batch_alert_metrics(&self, all: &[Arc<RotationBatch>], open: &[Arc<RotationBatch>], now: Timestamp) {
        let Context { stores, metrics, .. } = &self.context;
        metrics.batch_awaiting_approval_seconds.clear();
        metrics.batch_held.clear();
        for batch in open {
            let namespace = batch.namespace().unwrap_or_default();
            let application = batch.spec.application.clone();
            let condition = batch.status.as_ref().and_then(status::ready_condition);
            match batch.state() {
                BatchState::AwaitingApproval { .. } => {
                    let since = condition.and_then(|c| c.last_transition_time.as_ref()).map(|t| t.0);
                    let waited = since.map_or(0, |since| now.duration_since(since).as_secs().max(0));
                    let labels = AppLabels { namespace, application };
                    let gauge = metrics.batch_awaiting_approval_seconds.get_or_create(&labels);
                    // Two batches of one application: the longer wait.
                    gauge.set(gauge.get().max(waited));
                }
                BatchState::Held { .. } | BatchState::Undoing => {
                    let reason = condition.map_or_else(|| ReadyReason::Held.to_string(), |c| c.reason.clone());
                    metrics.batch_held.get_or_create(&HeldLabels { namespace, application, reason }).set(1);
                }
                BatchState::Collecting { .. }
                | BatchState::Waiting { .. }
                | BatchState::RollingOut
                | BatchState::Cancelling
                | BatchState::Succeeded
                | BatchState::NoChange
                | BatchState::Failed { .. }
                | BatchState::Cancelled
                | BatchState::Superseded
                | BatchState::Undone
                | BatchState::Unknown { .. } => {}
            }
        }
        metrics.batch_failed.clear();
        let mut newest: BTreeMap<AppKey, &Arc<RotationBatch>> = BTreeMap::new();
        for batch in all {
            let key = AppKey::new(batch.namespace().unwrap_or_default(), &batch.spec.application);
            let created = |b: &RotationBatch| (b.metadata.creation_timestamp.clone().map(|t| t.0), b.name_any());
            if newest.get(&key).is_none_or(|known| created(known) < created(batch)) {
                newest.insert(key, batch);
            }
        }
        for (AppKey { namespace, name: application }, batch) in newest {
            if batch.phase() == BatchPhase::Failed {
                metrics.batch_failed.get_or_create(&AppLabels { namespace, application }).set(1);
            }
        }
        let both = if metrics.go_operator_running.get() > 0 {
            stores.applications.state().iter().filter(|app| app.spec.rollout_on_credential_update == Some(true)).count()
        } else {
            0
        };
        metrics.applications_also_rolled_by_go_operator.set(i64::try_from(both).unwrap_or(i64::MAX));
    }

    /// The watches' failures, counted by the stores, into `capdeck_api_errors_total{verb="watch"}`.
    fn update_error_metrics(&self) {
        let Context { stores, metrics, .. } = &self.context;
        for (kind, code, total) in stores.watch_errors() {
            let counter = metrics.api_errors.get_or_create(&ErrorLabels {
                verb: "watch".into(),
                resource: kind.to_string(),
                code,
            });
            counter.inc_by(total.saturating_sub(counter.get()));
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
        let client = self.context.writes.client();
        let Some(attributed) = self.managed_fields.attach(client, batch).await else { return };
        let batch = &attributed;
        // Where the last pass left it, written or not.
        let mut status = self.transitions.base(batch);
        status.observed_generation = batch.metadata.generation;
        if batch.metadata.managed_fields.is_some() {
            record_attribution(batch, &mut status, now);
        }
        self.rollouts.track_progress(&self.context, batch, &mut status).await;
        let app = self.context.application(&batch.namespace().unwrap_or_default(), &batch.spec.application);
        let decision = self.context.decide(batch, &status, app.as_deref(), index, now, bindings);
        apply(&decision, &mut status, now);
        let spec_update = self.before_rollout(batch, &decision, &mut status, now).await;
        if decision.rolls()
            && let Some(app) = &app
        {
            self.roll(batch, app, index, &mut status, now).await;
        }
        self.transitions.write(&self.context, batch, status, (spec_update, decision.routine())).await;
    }

    /// What a decision does besides its status: the approval requirement to record in the spec
    /// (returned), its metrics, a retry's attempts given back, an undo's writes.
    async fn before_rollout(
        &mut self,
        batch: &RotationBatch,
        decision: &Decision,
        status: &mut RotationBatchStatus,
        now: Timestamp,
    ) -> Option<RotationBatch> {
        match decision {
            Decision::Evaluate(evaluation) => {
                for skipped in skip_reasons(&evaluation.deployments) {
                    self.context.metrics.skipped(skipped);
                }
                if evaluation.approval_required.is_none() && evaluation.void_approval.is_none() {
                    return None;
                }
                let mut update = batch.clone();
                // The server keeps its own record of who wrote what.
                update.metadata.managed_fields = None;
                let approval = update.spec.approval.get_or_insert_with(Default::default);
                if let Some(required) = evaluation.approval_required {
                    approval.required = required;
                }
                // Given for a plan that changed since: asked again (the condition says whose).
                if evaluation.void_approval.is_some() {
                    approval.approved_by = None;
                    approval.approved_at = None;
                    approval.reason = None;
                }
                return Some(update);
            }
            Decision::Start(start) => {
                if let Some(waited) = start.approval_waited {
                    self.context.metrics.approval_wait_seconds.observe(waited);
                }
            }
            // Writes that gave up get their attempts back.
            Decision::Retry { .. } => self.rollouts.forget_attempts(&batch_key(batch)),
            Decision::Undo { .. } => self.rollouts.undo(&self.context, batch, status, now).await,
            _ => {}
        }
        None
    }

    /// Start what the budget allows, then end the batch once every Deployment is done.
    async fn roll(
        &mut self,
        batch: &RotationBatch,
        app: &CAPApplication,
        index: &CapIndex,
        status: &mut RotationBatchStatus,
        now: Timestamp,
    ) {
        self.rollouts.roll(&self.context, batch, app, index, status, now).await;
        status::progress_summary(status);
        if let Some(outcome) = rollout_outcome(&status.deployments) {
            if let Some(started) = &status.rollout_started_at {
                let took = now.duration_since(started.0).as_secs_f64().max(0.0);
                self.context.metrics.rollout_duration_seconds.observe(took);
            }
            finish(status, outcome.phase, &outcome.reason, outcome.message, now);
        }
    }
}

impl Context {
    /// When a person asked to roll forward the batch `batch` rolls forward (`spec.rollsForward`):
    /// the `spec.retry` of that Undone or Cancelled batch of the same application, as stored.
    fn roll_forward_asked_at(&self, batch: &RotationBatch) -> Option<Timestamp> {
        let from = batch.spec.rolls_forward.as_deref()?;
        let old = self.stores.batches.find(batch.namespace().as_deref(), from)?;
        let same_application = old.spec.application == batch.spec.application;
        let asked = crate::plan::rolled_forward_asked(&old);
        // Asked before this batch opened: a retry written later (a time in the future) asked
        // for nothing this batch does.
        let created = batch.metadata.creation_timestamp.as_ref().map(|t| t.0)?;
        let retry = old.spec.retry.as_ref().filter(|_| same_application && asked)?;
        let opened = created.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(1)).ok()?;
        (retry.at.0 <= opened).then_some(retry.at.0)
    }

    /// Whether this engine honours the freeze: a cluster freeze only in its Lease's namespace.
    fn honours(&self, freeze: &crate::api::Freeze) -> bool {
        freeze.spec.scope != crate::api::FreezeScope::Cluster
            || freeze.namespace().as_deref() == Some(self.config.lease.namespace.as_str())
    }

    /// The change windows of an application: its annotation, else its namespace's, else
    /// `--change-windows` (docs/WINDOWS.md).
    fn windows(&self, app: &CAPApplication) -> Option<AppliedWindows> {
        let namespace = app.namespace().unwrap_or_default();
        let name = app.name_any();
        let namespace_object = self.stores.namespaces.find(None, &namespace);
        let namespace_annotation = namespace_object
            .as_ref()
            .and_then(|ns| ns.annotations().get(ANNOTATION_CHANGE_WINDOWS).map(String::as_str));
        let own = app.annotations().get(ANNOTATION_CHANGE_WINDOWS).map(String::as_str);
        AppliedWindows::resolve((&namespace, &name, own), namespace_annotation, self.config.change_windows.as_ref())
    }

    /// The decision for a batch, with what the world adds to it: the storm guard's last roll
    /// times, the revocation of its old credentials, the settings.
    fn decide(
        &self,
        batch: &RotationBatch,
        status: &RotationBatchStatus,
        app: Option<&CAPApplication>,
        index: &CapIndex,
        now: Timestamp,
        bindings: Option<&[ServiceBinding]>,
    ) -> Decision {
        let namespace = batch.namespace().unwrap_or_default();
        // A roll forward a person asked for: what was rolled before that request is no storm.
        let asked_at = self.roll_forward_asked_at(batch);
        let last_rolled = |deployment: &str| {
            self.stores
                .deployment(&namespace, deployment)
                .and_then(|live| {
                    live.annotations().get(ANNOTATION_ROLLED_AT).and_then(|at| at.parse::<Timestamp>().ok())
                })
                .filter(|at| asked_at.is_none_or(|asked| *at > asked))
        };
        let windows = app.and_then(|app| self.windows(app));
        let freezes = self.stores.freezes.state();
        let freeze = crate::api::freeze::governing(
            freezes.iter().map(|freeze| &**freeze),
            &self.config.lease.namespace,
            &namespace,
            &batch.spec.application,
            now,
        );
        let context = DecisionContext {
            now,
            approval_default: self.config.approval,
            min_rollout_interval: self.config.min_rollout_interval,
            last_rolled: &last_rolled,
            revocation: bindings.and_then(|bindings| batch_revocation(bindings, batch)),
            expected_rollout: self.config.expected_rollout,
            halt_on_failure: self.config.halt_on_failure,
            windows: windows.as_ref(),
            freeze,
            deadline_rolls: self.config.on_deadline == crate::engine::config::OnDeadline::Roll,
        };
        let plan = || {
            let rotated = Rotated::Secrets(batch.spec.secrets.iter().map(|s| s.name.clone()).collect());
            app.map(|app| plan_application(app, &rotated, index, &self.stores)).unwrap_or_default()
        };
        decide(batch, status, app, plan, &context)
    }
}

/// How often a batch escalated for a window or a freeze is looked at again.
const ESCALATION_RECHECK: Duration = Duration::from_secs(60);

/// When an open batch wants the engine back if nothing else changes: a rollout to follow
/// (every `progress_interval`), a window to end, or — waiting for an approval — the moment its
/// margin drops below one expected rollout (revocation − 2 × expected rollout), to escalate.
/// `until`: the time left until a moment.
fn wake_for(
    batch: &RotationBatch,
    revocation: impl FnOnce() -> Option<Timestamp>,
    (progress_interval, expected_rollout): (Duration, Duration),
    until: impl Fn(Timestamp) -> Duration,
) -> Option<Duration> {
    let status = batch.status.clone().unwrap_or_default();
    // A hold the engine does not honour (its condition says so) holds nothing.
    let held = batch.spec.hold.is_some() && !batch.attribution_refused(Attributed::Hold.condition_type());
    let in_flight = status.deployments.iter().any(status::is_active);
    // Waiting for a window or a freeze's end: back at that moment (or to follow what is in
    // flight); unreadable windows wait for the annotation to change (a store change).
    if status.phase == BatchPhase::Waiting && !held && !in_flight {
        return status.waiting_until.map(|at| until(at.0).max(Duration::from_millis(10)));
    }
    let state = BatchState::of_status(batch.spec.window_end.0, &status);
    if state == (BatchState::Held { by: HeldBy::UnreadableWindows }) && !in_flight {
        return None;
    }
    // Asked for an approval because of a window or a freeze: looked at again every minute, so
    // it is judged afresh soon after the window opens (a freeze's end wakes the engine itself).
    let escalated = matches!(
        state,
        BatchState::AwaitingApproval { why: ApprovalNeed::WindowTooLate | ApprovalNeed::FreezeTooLong }
    );
    if escalated && status.rollout_started_at.is_none() && !held {
        return Some(ESCALATION_RECHECK);
    }
    if status.deployments.iter().any(|d| !is_done(d)) && status.rollout_started_at.is_some() {
        Some(progress_interval)
    } else if status.deployments.is_empty() && !held {
        Some(until(batch.spec.window_end.0).max(Duration::from_millis(10)))
    } else if status.rollout_started_at.is_none() && !held {
        revocation()
            .and_then(|revocation| {
                let rollout = seconds(expected_rollout);
                Timestamp::from_second(revocation.as_second().checked_sub(rollout.checked_mul(2)?)?).ok()
            })
            .map(|at| until(at).max(Duration::from_millis(10)))
            .filter(|_| condition_reason(&status) != Some(ReadyReason::CredentialsExpiring) && !escalated)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);
    const SETTINGS: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(15 * 60));

    fn now() -> Timestamp {
        "2026-11-23T12:00:00Z".parse().expect("time")
    }

    fn batch(spec: Value, status: Value) -> RotationBatch {
        use crate::api::rotation_batch::testing;
        let mut overrides = json!({"spec": {"windowEnd": "2026-11-23T12:05:00Z"}, "status": status});
        testing::merge(&mut overrides, json!({"spec": spec}));
        testing::batch(overrides)
    }

    fn until(at: Timestamp) -> Duration {
        Duration::try_from(at.duration_since(now())).unwrap_or(Duration::ZERO)
    }

    fn queued() -> Value {
        json!([{"name": "srv", "version": "v", "workload": "srv", "action": "Restart", "state": "Queued"}])
    }

    #[tokio::test(start_paused = true)]
    async fn catching_up_stops_waiting_once_the_stores_stopped() {
        let (sender, mut changes) = tokio::sync::watch::channel(0u64);
        assert!(stores_may_change(&mut changes, SECOND).await, "nothing changed within the limit");
        sender.send_replace(1);
        assert!(stores_may_change(&mut changes, SECOND).await, "a change");
        drop(sender);
        assert!(!stores_may_change(&mut changes, SECOND).await, "the stores stopped");
    }

    #[test]
    fn a_pass_waits_for_the_store_to_show_at_least_its_own_write() {
        assert!(behind("41", "42"));
        assert!(!behind("42", "42"));
        assert!(!behind("43", "42"), "a newer version is as good");
        assert!(behind("abc", "abd"), "opaque versions: only the same one will do");
        assert!(!behind("abc", "abc"));
    }

    #[test]
    fn a_collecting_batch_wakes_the_engine_when_its_window_ends() {
        let collecting = batch(json!({}), Value::Null);
        assert_eq!(wake_for(&collecting, || None, SETTINGS, until), Some(300 * SECOND));
        let ended = batch(json!({"windowEnd": "2026-11-23T11:00:00Z"}), Value::Null);
        assert_eq!(wake_for(&ended, || None, SETTINGS, until), Some(Duration::from_millis(10)), "never zero");
        let held = batch(json!({"hold": {"by": "bob", "at": "2026-11-23T11:00:00Z"}}), Value::Null);
        assert_eq!(wake_for(&held, || None, SETTINGS, until), None, "a held batch waits for its release");
    }

    #[test]
    fn a_rolling_batch_is_followed_every_progress_interval() {
        let rolling = batch(
            json!({}),
            json!({"phase": "RollingOut", "rolloutStartedAt": "2026-11-23T11:59:00Z",
            "deployments": queued()}),
        );
        assert_eq!(wake_for(&rolling, || None, SETTINGS, until), Some(SETTINGS.0));
    }

    #[test]
    fn an_approval_wait_wakes_the_engine_when_its_margin_drops_below_one_rollout() {
        let awaiting = |reason: &str| {
            batch(
                json!({}),
                json!({"phase": "AwaitingApproval", "deployments": queued(),
                "conditions": [{"type": "Ready", "status": "False", "reason": reason, "message": "",
                                "lastTransitionTime": "2026-11-23T11:00:00Z"}]}),
            )
        };
        let waiting = awaiting(ReadyReason::AwaitingApproval.as_str());
        assert_eq!(wake_for(&waiting, || None, SETTINGS, until), None, "no revocation known: nothing to wake for");
        // Revocable in 2 h: escalate at revocation − 2 × 15 min, 90 min from now.
        let revocation = || Some(now().checked_add(k8s_openapi::jiff::SignedDuration::from_hours(2)).expect("time"));
        assert_eq!(wake_for(&waiting, revocation, SETTINGS, until), Some(90 * 60 * SECOND));
        let escalated = awaiting(ReadyReason::CredentialsExpiring.as_str());
        assert_eq!(wake_for(&escalated, revocation, SETTINGS, until), None, "escalated once already");
    }
}
