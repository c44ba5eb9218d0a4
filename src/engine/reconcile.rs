//! One reconcile pass: detect rotations, open or join batches, and drive every open batch
//! through its phases (DESIGN.md §3–§4). Reads come from the shared stores; every write goes
//! through `Writes`. Only the leader writes; an observer only keeps its rotation baseline.
//!
//! Crash safety without extra writes: a VCAP Secret this engine creates carries the batch name
//! (label) and the Secret it replaces (annotation), and a rolled Deployment carries the batch
//! name (annotation). A restarted engine (or a new leader) finds what a previous pass did from
//! those, so a Deployment is rolled at most once per batch.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::config::{ApprovalPolicy, EngineConfig};
use super::metrics::{Metrics, PhaseLabels};
use super::plan::{
    AppPlan, CapIndex, ObjectLookup, PlanAction, ProblemKind, Rotated, SecretLookup, plan_application,
    referenced_vcap_secret, secret_data,
};
use super::progress::{Progress, rollout_progress};
use super::writes::{ANNOTATION_PREVIOUS_SECRET, ANNOTATION_ROLLED_BY, LABEL_BATCH, Pointed, Writes};
use crate::api::common::{Condition, ConditionStatus, READY};
use crate::api::rotation_batch::{BatchDeployment, DeploymentAction, DeploymentRolloutState, RotatedSecret, reason};
use crate::api::{
    ANNOTATION_ROLLED_AT, BatchPhase, CAPApplication, LABEL_SECRET_OWNER_HASH, RotationBatch, RotationBatchStatus,
};
use crate::cluster::stores::Stores;
use crate::output::count;
use crate::vcap::{data_hash, secret_owner_hash};

type AppKey = (String, String);

#[derive(Clone, Debug, PartialEq, Eq)]
struct SeenSecret {
    uid: String,
    hash: String,
}

/// Rollout writes failing with errors retrying cannot fix (403, 422, ...) give up after this many
/// attempts; transient failures are retried for as long as they last.
const MAX_ATTEMPTS: u32 = 5;
/// A pass with failed writes runs again after this, doubling while failures go on.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

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
    attempts: HashMap<(String, String, String), u32>,
    /// Deployments rolling right now, across batches (for --max-parallel-rollouts).
    rolling: usize,
    /// Set while passes end with failed writes: when to try again (nothing else may wake us).
    retry: Option<Duration>,
}

impl ObjectLookup for Stores {
    fn secret(&self, namespace: &str, name: &str) -> SecretLookup {
        match Stores::secret(self, namespace, name) {
            Some(secret) => SecretLookup::Found(secret),
            None => SecretLookup::Missing,
        }
    }

    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<crate::api::DeploymentView>> {
        Stores::deployment(self, namespace, name)
    }
}

fn batch_key(batch: &RotationBatch) -> AppKey {
    (batch.namespace().unwrap_or_default(), batch.name_any())
}

fn format_time(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn set_condition(status: &mut RotationBatchStatus, ready: bool, reason: &str, message: String, now: Timestamp) {
    let condition_status = if ready { ConditionStatus::True } else { ConditionStatus::False };
    let existing = status.conditions.iter_mut().find(|condition| condition.type_ == READY);
    match existing {
        Some(condition) => {
            if condition.status != condition_status || condition.reason != reason {
                condition.last_transition_time = Some(Time(now));
            }
            condition.status = condition_status;
            condition.reason = reason.into();
            condition.message = message;
        }
        None => status.conditions.push(Condition {
            type_: READY.into(),
            status: condition_status,
            observed_generation: None,
            last_transition_time: Some(Time(now)),
            reason: reason.into(),
            message,
        }),
    }
}

fn condition_reason(status: &RotationBatchStatus) -> Option<&str> {
    status.conditions.iter().find(|condition| condition.type_ == READY).map(|condition| condition.reason.as_str())
}

fn progress_summary(status: &mut RotationBatchStatus) {
    let restarts: Vec<&BatchDeployment> =
        status.deployments.iter().filter(|d| d.action == DeploymentAction::Restart).collect();
    let done = restarts.iter().filter(|d| d.state == Some(DeploymentRolloutState::Complete)).count();
    status.progress = Some(format!("{done}/{}", restarts.len()));
}

fn user_action_text(action: &crate::api::rotation_batch::UserAction, verb: &str) -> String {
    match &action.reason {
        Some(reason) if !reason.is_empty() => format!("{verb} by {}: {reason}", action.by),
        _ => format!("{verb} by {}", action.by),
    }
}

fn is_active(deployment: &BatchDeployment) -> bool {
    deployment.action == DeploymentAction::Restart && deployment.state == Some(DeploymentRolloutState::Rolling)
}

fn is_done(deployment: &BatchDeployment) -> bool {
    deployment.action != DeploymentAction::Restart
        || matches!(
            deployment.state,
            Some(DeploymentRolloutState::Complete | DeploymentRolloutState::Stalled | DeploymentRolloutState::Failed)
        )
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
            rolling: 0,
            retry: None,
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
            self.stores.batches.state().into_iter().filter(|b| !b.is_terminal()).collect();
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
            self.retry = None;
            self.update_phase_metrics();
            return None;
        }
        let failures = self.writes.failures();
        let index = self.index();
        if self.recheck_all {
            self.recheck_all = false;
            let apps: Vec<AppKey> = index
                .applications()
                .iter()
                .filter(|app| app.rollout_opted_in())
                .map(|app| (app.namespace().unwrap_or_default(), app.name_any()))
                .collect();
            self.recheck.extend(apps);
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
        for batch in open {
            self.drive(&batch, &index, now).await;
        }
        self.update_phase_metrics();
        self.retry = (self.writes.failures() > failures)
            .then(|| self.retry.map_or(RETRY_FIRST, |previous| (previous * 2).min(RETRY_MAX)));
        match (self.next_wake(), self.retry) {
            (Some(wake), Some(retry)) => Some(wake.min(retry)),
            (wake, retry) => wake.or(retry),
        }
    }

    fn next_wake(&self) -> Option<Duration> {
        let mut wake: Option<Duration> = None;
        for batch in self.open_batches() {
            let status = batch.status.clone().unwrap_or_default();
            let candidate = if status.deployments.iter().any(|d| !is_done(d)) && status.rollout_started_at.is_some() {
                Some(self.config.progress_interval)
            } else if status.deployments.is_empty() && batch.spec.hold.is_none() {
                Some(self.config.clock.until(batch.spec.window_end.0).max(Duration::from_millis(10)))
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

    fn update_phase_metrics(&self) {
        let mut counts: BTreeMap<String, i64> =
            BatchPhase::KNOWN.iter().map(|phase| ((*phase).to_string(), 0)).collect();
        for batch in self.stores.batches.state() {
            *counts.entry(batch.phase().to_string()).or_default() += 1;
        }
        for (phase, count) in counts {
            self.metrics.batches.get_or_create(&PhaseLabels { phase }).set(count);
        }
    }

    /// Compare every referenced binding Secret with its last known data hash and uid. A change
    /// of data, or a Secret deleted and re-created, is a rotation for every opted-in
    /// application that references it. Metadata-only changes and re-lists are not.
    fn detect(&mut self, now: Timestamp) {
        let mut referencing: BTreeMap<AppKey, Vec<(AppKey, String)>> = BTreeMap::new();
        for app in self.stores.applications.state() {
            let namespace = app.namespace().unwrap_or_default();
            let key = (namespace.clone(), app.name_any());
            let generation = app.metadata.generation.unwrap_or(0);
            let opted = app.rollout_opted_in();
            match self.apps_known.insert(key.clone(), (generation, opted)) {
                // A changed spec or a new opt-in: re-check this application like at start-up.
                Some(previous) if previous != (generation, opted) && opted => {
                    self.recheck.insert(key.clone());
                }
                _ => {}
            }
            for service in &app.spec.btp.services {
                if opted {
                    referencing
                        .entry((namespace.clone(), service.secret.clone()))
                        .or_default()
                        .push((key.clone(), service.name.clone()));
                } else {
                    referencing.entry((namespace.clone(), service.secret.clone())).or_default();
                }
            }
        }
        for (secret_key, apps) in referencing {
            let Some(secret) = self.stores.binding_secrets.get(&ObjectRef::new(&secret_key.1).within(&secret_key.0))
            else {
                continue;
            };
            let current = SeenSecret {
                uid: secret.metadata.uid.clone().unwrap_or_default(),
                hash: data_hash(&secret_data(&secret)),
            };
            let previous = self.seen.insert(secret_key.clone(), current.clone());
            let rotated = previous.is_some_and(|previous| previous != current);
            if !rotated {
                continue;
            }
            self.metrics.rotations.inc();
            tracing::info!(namespace = %secret_key.0, secret = %secret_key.1, "binding secret rotated");
            let mut services_by_app: BTreeMap<AppKey, Vec<String>> = BTreeMap::new();
            for (app, service) in apps {
                services_by_app.entry(app).or_default().push(service);
            }
            for (app, services) in services_by_app {
                self.pending.entry(app).or_default().insert(
                    secret_key.1.clone(),
                    RotatedSecret {
                        name: secret_key.1.clone(),
                        service: services.join(","),
                        rotated_at: Time(now),
                        data_hash: current.hash.clone(),
                    },
                );
            }
        }
    }

    /// The start-up re-check of one application: open a batch only if some Deployment really
    /// differs (and no batch is open for it already).
    fn recheck_application(&mut self, key: &AppKey, index: &CapIndex, now: Timestamp) {
        let Some(app) = self.application(&key.0, &key.1) else { return };
        if !app.rollout_opted_in()
            || self.open_batches().iter().any(|b| batch_key(b).0 == key.0 && b.spec.application == key.1)
        {
            return;
        }
        let plan = plan_application(&app, &Rotated::All, index, &self.stores);
        let services: BTreeSet<&str> = plan.restarts().flat_map(|d| d.services.iter().map(String::as_str)).collect();
        if services.is_empty() {
            return;
        }
        tracing::info!(namespace = %key.0, application = %key.1, deployments = plan.restarts().count(), "re-check found Deployments out of date");
        self.found_by_recheck.insert(key.clone());
        for service in app.spec.btp.services.iter().filter(|s| services.contains(s.name.as_str())) {
            let hash = self
                .stores
                .binding_secrets
                .get(&ObjectRef::new(&service.secret).within(&key.0))
                .map(|secret| data_hash(&secret_data(&secret)))
                .unwrap_or_default();
            self.pending.entry(key.clone()).or_default().entry(service.secret.clone()).or_insert(RotatedSecret {
                name: service.secret.clone(),
                service: service.name.clone(),
                rotated_at: Time(now),
                data_hash: hash,
            });
        }
    }

    /// Put pending rotations into batches: join the application's collecting batch, or open a
    /// new one (superseding batches that wait for approval and have not started).
    async fn open_or_join(&mut self, now: Timestamp) {
        for (key, rotated) in std::mem::take(&mut self.pending) {
            let Some(app) = self.application(&key.0, &key.1) else { continue };
            if !app.rollout_opted_in() {
                continue;
            }
            let open: Vec<Arc<RotationBatch>> = self
                .open_batches()
                .into_iter()
                .filter(|b| batch_key(b).0 == key.0 && b.spec.application == key.1)
                .collect();
            let collecting = open.iter().find(|b| {
                b.spec.cancel.is_none()
                    && b.status
                        .as_ref()
                        .is_none_or(|status| status.deployments.is_empty() && status.rollout_started_at.is_none())
            });
            if let Some(batch) = collecting {
                let mut joined = (**batch).clone();
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
                        self.writes
                            .event(
                                &app,
                                false,
                                reason::WINDOW_OPEN,
                                format!("rotation of {} joined batch {}", names.join(", "), joined.name_any()),
                            )
                            .await;
                    }
                    Err(error) => {
                        tracing::warn!(batch = %joined.name_any(), %error, "could not add rotated secrets to the batch; retrying");
                        self.pending.insert(key.clone(), rotated);
                    }
                }
                continue;
            }
            let superseded: Vec<Arc<RotationBatch>> = open
                .iter()
                .filter(|b| {
                    b.spec.cancel.is_none()
                        && b.status.as_ref().is_none_or(|status| status.rollout_started_at.is_none())
                })
                .cloned()
                .collect();
            let mut secrets: BTreeMap<String, RotatedSecret> = BTreeMap::new();
            for old in &superseded {
                for secret in &old.spec.secrets {
                    secrets.insert(secret.name.clone(), secret.clone());
                }
            }
            secrets.extend(rotated.clone());
            let hold = superseded.iter().find_map(|b| b.spec.hold.clone());
            let window = k8s_openapi::jiff::SignedDuration::try_from(self.config.rollout_delay).unwrap_or_default();
            let window_end = now.checked_add(window).unwrap_or(now);
            let required = ApprovalPolicy::for_application(&app, self.config.approval) == ApprovalPolicy::Manual;
            match self.writes.create_batch(&app, secrets.into_values().collect(), window_end, required, hold).await {
                Ok(created) => {
                    self.awaited.insert(batch_key(&created), created.resource_version().unwrap_or_default());
                    let names: Vec<&str> = rotated.keys().map(String::as_str).collect();
                    let cause = if self.found_by_recheck.remove(&key) {
                        format!("the start-up re-check found Deployments out of date (inputs: {})", names.join(", "))
                    } else {
                        format!("credentials rotated ({})", names.join(", "))
                    };
                    self.writes
                        .event(
                            &app,
                            false,
                            reason::WINDOW_OPEN,
                            format!("{cause}; batch {} collects until {}", created.name_any(), format_time(window_end)),
                        )
                        .await;
                    for old in superseded {
                        let mut status = old.status.clone().unwrap_or_default();
                        status.phase = BatchPhase::Superseded;
                        status.superseded_by = Some(created.name_any());
                        status.completed_at = Some(Time(now));
                        let message = format!(
                            "superseded by {}, which carries these rotations and newer ones",
                            created.name_any()
                        );
                        set_condition(&mut status, false, reason::SUPERSEDED, message.clone(), now);
                        match self.writes.write_status(&old, &status).await {
                            Ok(written) => {
                                self.awaited
                                    .insert(batch_key(&written), written.resource_version().unwrap_or_default());
                                self.writes
                                    .event(
                                        &app,
                                        false,
                                        reason::SUPERSEDED,
                                        format!("batch {}: {message}", old.name_any()),
                                    )
                                    .await;
                            }
                            Err(error) => {
                                tracing::warn!(batch = %old.name_any(), %error, "could not mark the batch superseded")
                            }
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(application = %key.1, %error, "could not open a rotation batch; retrying");
                    self.pending.insert(key.clone(), rotated);
                }
            }
        }
    }

    /// Move one open batch along.
    async fn drive(&mut self, batch: &Arc<RotationBatch>, index: &CapIndex, now: Timestamp) {
        let key = batch_key(batch);
        let (namespace, name) = key.clone();
        let old = batch.status.clone().unwrap_or_default();
        let mut status = old.clone();
        status.observed_generation = batch.metadata.generation;
        let app = self.application(&namespace, &batch.spec.application);
        let mut spec_update: Option<RotationBatch> = None;

        self.track_progress(batch, &mut status, now).await;
        let in_flight = status.deployments.iter().any(is_active);

        if let Some(cancel) = &batch.spec.cancel {
            for deployment in status
                .deployments
                .iter_mut()
                .filter(|d| d.action == DeploymentAction::Restart && d.state == Some(DeploymentRolloutState::Queued))
            {
                deployment.message = Some("not started: the batch was cancelled".into());
            }
            if in_flight {
                let rolling = status.deployments.iter().filter(|d| is_active(d)).count();
                let message = format!(
                    "{}; waiting for {} already rolling",
                    user_action_text(cancel, "cancelled"),
                    count(rolling, "Deployment")
                );
                set_condition(&mut status, false, reason::CANCELLED, message, now);
            } else {
                self.finish(
                    &mut status,
                    BatchPhase::Cancelled,
                    reason::CANCELLED,
                    user_action_text(cancel, "cancelled"),
                    now,
                );
            }
        } else if app.is_none() {
            if !in_flight {
                self.finish(
                    &mut status,
                    BatchPhase::Cancelled,
                    reason::CANCELLED,
                    format!("CAPApplication {} no longer exists", batch.spec.application),
                    now,
                );
            }
        } else if let Some(hold) = &batch.spec.hold {
            status.phase = BatchPhase::Held;
            let mut message = user_action_text(hold, "held");
            if in_flight {
                message.push_str("; Deployments already rolling finish, nothing new starts");
            }
            set_condition(&mut status, false, reason::HELD, message, now);
        } else if let Some(app) = app {
            let evaluated = !status.deployments.is_empty() || status.rollout_started_at.is_some();
            if status.rollout_started_at.is_some() {
                status.phase = BatchPhase::RollingOut;
                self.roll(batch, &app, index, &mut status, now).await;
            } else if !evaluated {
                let window_open = batch.spec.force.is_none() && now < batch.spec.window_end.0;
                if window_open {
                    status.phase = BatchPhase::Collecting;
                    let message = format!("collecting rotations until {}", format_time(batch.spec.window_end.0));
                    set_condition(&mut status, false, reason::WINDOW_OPEN, message, now);
                    progress_summary(&mut status);
                } else {
                    spec_update = self.evaluate(batch, &app, index, &mut status, now);
                    if status.phase == BatchPhase::RollingOut {
                        self.roll(batch, &app, index, &mut status, now).await;
                    }
                }
            } else if batch.spec.approval.as_ref().is_some_and(|a| a.approved_by.is_some()) {
                if let Some(entered) =
                    status.conditions.iter().find(|c| c.type_ == READY).and_then(|c| c.last_transition_time.clone())
                {
                    let waited = now.duration_since(entered.0).as_secs_f64().max(0.0);
                    self.metrics.approval_wait_seconds.observe(waited);
                }
                self.start_rollout(batch, &mut status, now);
                self.roll(batch, &app, index, &mut status, now).await;
            } else {
                status.phase = BatchPhase::AwaitingApproval;
            }
        }

        if status == old {
            return;
        }
        let phase_changed = status.phase != old.phase || condition_reason(&status) != condition_reason(&old);
        let progress_only = !phase_changed && status.deployments.len() == old.deployments.len();
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
        match self.writes.write_status(batch, &status).await {
            Ok(written) => {
                self.progress_written.insert(key.clone(), tokio::time::Instant::now());
                self.awaited.insert(key.clone(), written.resource_version().unwrap_or_default());
                if let Some(mut update) = spec_update {
                    update.metadata.resource_version = written.metadata.resource_version.clone();
                    match self.writes.replace_batch(&update).await {
                        Ok(replaced) => {
                            self.awaited.insert(key.clone(), replaced.resource_version().unwrap_or_default());
                        }
                        Err(error) => {
                            tracing::warn!(batch = %name, %error, "could not record the approval requirement")
                        }
                    }
                }
                if phase_changed && let Some(app) = self.application(&namespace, &batch.spec.application) {
                    let reason = condition_reason(&status).unwrap_or(reason::ROLLING_OUT).to_string();
                    let message = status
                        .conditions
                        .iter()
                        .find(|c| c.type_ == READY)
                        .map(|c| c.message.clone())
                        .unwrap_or_default();
                    // One line per transition, so an SRE can follow a batch in the log alone
                    // (names and people only: no credential value is ever in a message).
                    tracing::info!(
                        namespace = %namespace,
                        batch = %name,
                        application = %batch.spec.application,
                        phase = %status.phase,
                        reason = %reason,
                        "batch {}: {message}",
                        status.phase
                    );
                    if old.phase == BatchPhase::Held
                        && status.phase != BatchPhase::Held
                        && let Some(released) = &batch.spec.released
                    {
                        let text = user_action_text(released, "released");
                        tracing::info!(namespace = %namespace, batch = %name, "batch released: {text}");
                        self.writes.event(&app, false, reason::RELEASED, format!("batch {name}: {text}")).await;
                    }
                    let warning = matches!(status.phase, BatchPhase::Failed) || reason == reason::STORM_GUARD;
                    self.writes.event(&app, warning, &reason, format!("batch {name}: {message}")).await;
                }
            }
            Err(error) => {
                tracing::warn!(batch = %name, error = %crate::cluster::describe_error(&error), "could not write batch status; retrying")
            }
        }
    }

    fn finish(&self, status: &mut RotationBatchStatus, phase: BatchPhase, why: &str, message: String, now: Timestamp) {
        let success = matches!(phase, BatchPhase::Succeeded | BatchPhase::NoChange);
        status.phase = phase;
        status.completed_at = Some(Time(now));
        progress_summary(status);
        set_condition(status, success, why, message, now);
    }

    fn start_rollout(&self, batch: &RotationBatch, status: &mut RotationBatchStatus, now: Timestamp) {
        status.phase = BatchPhase::RollingOut;
        status.rollout_started_at = Some(Time(now));
        let approval =
            batch.spec.approval.as_ref().and_then(|a| a.approved_by.as_ref().map(|by| (by, a.reason.clone())));
        let (why, message) = match (&batch.spec.force, approval) {
            (Some(force), _) => (reason::FORCED, user_action_text(force, "window ended early: forced")),
            (None, Some((by, Some(text)))) if !text.is_empty() => {
                (reason::APPROVED, format!("approved by {by}: {text}"))
            }
            (None, Some((by, _))) => (reason::APPROVED, format!("approved by {by}")),
            (None, None) => (reason::ROLLING_OUT, "window ended; rolling out".to_string()),
        };
        set_condition(status, false, why, message, now);
    }

    /// The window ended (or was forced): plan, then decide between nothing to do, waiting for an
    /// approval (policy or storm guard) and rolling out. Returns a spec update if the approval
    /// requirement changed.
    fn evaluate(
        &self,
        batch: &RotationBatch,
        app: &CAPApplication,
        index: &CapIndex,
        status: &mut RotationBatchStatus,
        now: Timestamp,
    ) -> Option<RotationBatch> {
        if !app.rollout_opted_in() {
            self.finish(
                status,
                BatchPhase::Cancelled,
                reason::OPTED_OUT,
                format!("CAPApplication {} no longer opts in to rollout on credential update", app.name_any()),
                now,
            );
            return None;
        }
        let rotated = Rotated::Secrets(batch.spec.secrets.iter().map(|s| s.name.clone()).collect());
        let plan = plan_application(app, &rotated, index, &self.stores);
        status.deployments = batch_deployments(&plan);
        for deployment in &status.deployments {
            match deployment.action {
                DeploymentAction::Unchanged => {
                    self.metrics.skipped(if deployment.message.as_deref() == Some("deployment does not exist") {
                        "missing"
                    } else {
                        "unchanged"
                    })
                }
                DeploymentAction::Problem => self.metrics.skipped("problem"),
                _ => {}
            }
        }
        status.tenants = Some(plan.tenants);
        progress_summary(status);
        let restarts: Vec<&BatchDeployment> =
            status.deployments.iter().filter(|d| d.action == DeploymentAction::Restart).collect();
        if restarts.is_empty() {
            if let Some(problem) = plan.problems.iter().find(|p| p.deployment.is_some()) {
                let why = if problem.kind == ProblemKind::MissingSecret {
                    reason::MISSING_SECRET
                } else {
                    reason::INVALID_SECRET
                };
                self.finish(status, BatchPhase::Failed, why, problem.message.clone(), now);
            } else {
                let message = if status.deployments.is_empty() {
                    "no Deployment of a version in use consumes the rotated services".to_string()
                } else {
                    format!(
                        "all {} already use current credentials",
                        count(status.deployments.len(), "affected Deployment")
                    )
                };
                self.finish(status, BatchPhase::NoChange, reason::NO_CHANGE, message, now);
            }
            return None;
        }
        let required = ApprovalPolicy::for_application(app, self.config.approval) == ApprovalPolicy::Manual;
        let spec_update = (batch.spec.approval.as_ref().map(|a| a.required) != Some(required)).then(|| {
            let mut update = batch.clone();
            update.spec.approval.get_or_insert_with(Default::default).required = required;
            update
        });
        let recently: Vec<String> = restarts
            .iter()
            .filter(|d| {
                self.stores
                    .deployment(&batch.namespace().unwrap_or_default(), &d.name)
                    .and_then(|dep| {
                        dep.annotations().get(ANNOTATION_ROLLED_AT).and_then(|at| at.parse::<Timestamp>().ok())
                    })
                    .is_some_and(|at| {
                        Duration::try_from(now.duration_since(at))
                            .is_ok_and(|age| age < self.config.min_rollout_interval)
                    })
            })
            .map(|d| d.name.clone())
            .collect();
        let approved = batch.spec.approval.as_ref().is_some_and(|a| a.approved_by.is_some());
        if !recently.is_empty() && !approved {
            status.phase = BatchPhase::AwaitingApproval;
            let message = format!(
                "storm guard: {} rolled less than {} ago; approve to roll again",
                recently.join(", "),
                super::config::humanize(self.config.min_rollout_interval)
            );
            set_condition(status, false, reason::STORM_GUARD, message, now);
        } else if required && !approved {
            status.phase = BatchPhase::AwaitingApproval;
            let tenants = usize::try_from(plan.tenants).unwrap_or(usize::MAX);
            let message = format!(
                "{} to restart, {} served; waiting for an approval",
                count(restarts.len(), "Deployment"),
                count(tenants, "tenant")
            );
            set_condition(status, false, reason::AWAITING_APPROVAL, message, now);
        } else {
            self.start_rollout(batch, status, now);
        }
        spec_update
    }

    /// Start queued Deployments (paced) and finish the batch when every Deployment is done.
    async fn roll(
        &mut self,
        batch: &RotationBatch,
        app: &CAPApplication,
        index: &CapIndex,
        status: &mut RotationBatchStatus,
        now: Timestamp,
    ) {
        let queued = status
            .deployments
            .iter()
            .any(|d| d.action == DeploymentAction::Restart && d.state == Some(DeploymentRolloutState::Queued));
        if queued && batch.spec.cancel.is_none() {
            let rotated = Rotated::Secrets(batch.spec.secrets.iter().map(|s| s.name.clone()).collect());
            let fresh = plan_application(app, &rotated, index, &self.stores);
            for position in 0..status.deployments.len() {
                let deployment = &status.deployments[position];
                if deployment.action != DeploymentAction::Restart
                    || deployment.state != Some(DeploymentRolloutState::Queued)
                {
                    continue;
                }
                if self.rolling >= self.config.max_parallel_rollouts {
                    status.deployments[position].message =
                        Some(format!("queued: {} Deployments roll at once", self.config.max_parallel_rollouts));
                    continue;
                }
                let mut deployment = deployment.clone();
                self.start_deployment(batch, index, &fresh, &mut deployment, now).await;
                status.deployments[position] = deployment;
            }
        }
        progress_summary(status);
        if status.deployments.iter().all(is_done) && batch.spec.cancel.is_none() {
            let stalled =
                status.deployments.iter().filter(|d| d.state == Some(DeploymentRolloutState::Stalled)).count();
            let failed = status
                .deployments
                .iter()
                .filter(|d| d.action == DeploymentAction::Restart && d.state == Some(DeploymentRolloutState::Failed))
                .count();
            let restarted = status
                .deployments
                .iter()
                .filter(|d| d.action == DeploymentAction::Restart && d.state == Some(DeploymentRolloutState::Complete))
                .count();
            if let Some(started) = &status.rollout_started_at {
                self.metrics.rollout_duration_seconds.observe(now.duration_since(started.0).as_secs_f64().max(0.0));
            }
            let problems = status.deployments.iter().filter(|d| d.action == DeploymentAction::Problem).count();
            if stalled + failed + problems == 0 {
                self.finish(
                    status,
                    BatchPhase::Succeeded,
                    reason::ROLLOUT_COMPLETE,
                    format!("{} rolled out with the new credentials", count(restarted, "Deployment")),
                    now,
                );
            } else {
                let why = if stalled > 0 {
                    reason::PROGRESS_DEADLINE_EXCEEDED
                } else if failed > 0 {
                    reason::WRITE_FAILED
                } else {
                    reason::INVALID_SECRET
                };
                let message = format!(
                    "{restarted} rolled out, {stalled} stalled, {failed} failed, {problems} could not be planned; previous VCAP Secrets of unfinished Deployments were kept"
                );
                self.finish(status, BatchPhase::Failed, why, message, now);
            }
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
        let Some(planned) = fresh.deployments.iter().find(|d| d.deployment == deployment.name) else {
            if let Some(problem) =
                fresh.problems.iter().find(|p| p.deployment.as_deref() == Some(deployment.name.as_str()))
            {
                deployment.state = Some(DeploymentRolloutState::Failed);
                deployment.message = Some(problem.message.clone());
            } else {
                deployment.action = DeploymentAction::Unchanged;
                deployment.state = Some(DeploymentRolloutState::Complete);
                deployment.message = Some("no longer affected; nothing written".into());
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
                deployment.action = DeploymentAction::Unchanged;
                deployment.state = Some(DeploymentRolloutState::Complete);
                deployment.message = Some("already uses current credentials; nothing written".into());
                self.metrics.skipped("unchanged");
                return;
            }
            PlanAction::Missing => {
                deployment.action = DeploymentAction::Unchanged;
                deployment.state = Some(DeploymentRolloutState::Complete);
                deployment.message = Some("deployment does not exist".into());
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
        // A VCAP Secret this batch already created for this Deployment (before a restart).
        let owner_hash = secret_owner_hash(&namespace, &planned.version, &deployment.name);
        let existing = self.stores.vcap_secrets.state().into_iter().find(|secret| {
            secret.namespace().as_deref() == Some(namespace.as_str())
                && secret.labels().get(LABEL_BATCH) == Some(&batch_name)
                && secret.labels().get(LABEL_SECRET_OWNER_HASH) == Some(&owner_hash)
        });
        let (secret_name, previous) = match (existing, rolled_by_this_batch.flatten()) {
            (Some(secret), _) => (secret.name_any(), secret.annotations().get(ANNOTATION_PREVIOUS_SECRET).cloned()),
            // Our Secret is not in the store yet: never create a second one.
            (None, Some(live)) => (live, None),
            (None, None) => match self
                .writes
                .create_vcap_secret(
                    &version,
                    &deployment.name,
                    &batch_name,
                    planned.current_secret.as_deref(),
                    &planned.payload,
                )
                .await
            {
                Ok(created) => (created.name_any(), planned.current_secret.clone()),
                Err(error) => {
                    self.failed_attempt(
                        &attempt_key,
                        deployment,
                        format!("could not create the VCAP Secret: {}", crate::cluster::describe_error(&error)),
                        crate::cluster::is_transient(&error),
                    );
                    return;
                }
            },
        };
        match self.writes.point_deployment(&namespace, &deployment.name, &secret_name, &batch_name, now).await {
            Ok(Pointed::Updated { generation, previous: live_previous }) => {
                deployment.vcap_secret = Some(secret_name);
                deployment.previous_vcap_secret = previous.or(live_previous);
                deployment.rolled_generation = Some(generation);
                deployment.vcap_sha256 = Some(planned.payload.sha256());
                deployment.state = Some(DeploymentRolloutState::Rolling);
                deployment.message = Some("rolling".into());
                self.metrics.deployments_restarted.inc();
                self.rolling += 1;
                self.attempts.remove(&attempt_key);
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
                deployment.action = DeploymentAction::Unchanged;
                deployment.state = Some(DeploymentRolloutState::Complete);
                deployment.message = Some("deployment was deleted before its rollout".into());
                let uid = self.stores.secret(&namespace, &secret_name).and_then(|s| s.metadata.uid.clone());
                let _ = self.writes.delete_secret(&namespace, &secret_name, uid).await;
            }
            Err(error) => {
                self.failed_attempt(
                    &attempt_key,
                    deployment,
                    format!("could not update the Deployment: {}", crate::cluster::describe_error(&error)),
                    crate::cluster::is_transient(&error),
                );
            }
        }
    }

    /// A failed rollout write. Transient failures (unreachable API, 409, 429, 5xx) are retried
    /// for as long as they last; others give up after `MAX_ATTEMPTS`.
    fn failed_attempt(
        &mut self,
        key: &(String, String, String),
        deployment: &mut BatchDeployment,
        message: String,
        transient: bool,
    ) {
        let attempts = self.attempts.entry(key.clone()).or_default();
        if !transient {
            *attempts += 1;
        }
        tracing::warn!(deployment = %deployment.name, attempts = *attempts, message, "rollout write failed");
        if *attempts >= MAX_ATTEMPTS {
            deployment.state = Some(DeploymentRolloutState::Failed);
            deployment.message = Some(format!("{message} (gave up after {MAX_ATTEMPTS} attempts)"));
        } else {
            deployment.message = Some(format!("{message}; retrying"));
        }
    }

    /// Follow rolling Deployments; once one completed, delete the VCAP Secret it used before.
    async fn track_progress(&mut self, batch: &RotationBatch, status: &mut RotationBatchStatus, now: Timestamp) {
        let namespace = batch.namespace().unwrap_or_default();
        let _ = now;
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
                        deployment.message = Some(format!(
                            "the Deployment was changed by someone else and now uses {}",
                            other.unwrap_or_else(|| "no VCAP secret".into())
                        ));
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
                Progress::Rolling => {}
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
                    Err((message, transient)) => {
                        let key = (namespace.clone(), batch.name_any(), deployment.name.clone());
                        self.failed_attempt(&key, &mut deployment, message, transient);
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
    async fn remove_previous(&self, namespace: &str, deployment: &BatchDeployment) -> Result<String, (String, bool)> {
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
            Err(error) => Err((
                format!(
                    "rolled out but could not delete previous secret {previous}: {}",
                    crate::cluster::describe_error(&error)
                ),
                crate::cluster::is_transient(&error),
            )),
        }
    }
}

/// The batch's Deployments from a plan: restarts queued, unchanged and missing ones complete,
/// broken ones as problems.
fn batch_deployments(plan: &AppPlan) -> Vec<BatchDeployment> {
    let mut out: Vec<BatchDeployment> = plan
        .deployments
        .iter()
        .map(|planned| {
            let (action, state, message) = match planned.action {
                PlanAction::Restart => {
                    (DeploymentAction::Restart, DeploymentRolloutState::Queued, planned.reason.clone())
                }
                PlanAction::Unchanged => {
                    (DeploymentAction::Unchanged, DeploymentRolloutState::Complete, planned.reason.clone())
                }
                PlanAction::Missing => {
                    (DeploymentAction::Unchanged, DeploymentRolloutState::Complete, "deployment does not exist".into())
                }
            };
            BatchDeployment {
                name: planned.deployment.clone(),
                version: planned.version.clone(),
                workload: planned.workload.clone(),
                action,
                vcap_sha256: Some(planned.payload.sha256()),
                previous_vcap_secret: planned.current_secret.clone().filter(|_| planned.action == PlanAction::Restart),
                state: Some(state),
                message: Some(message),
                ..BatchDeployment::default()
            }
        })
        .collect();
    let mut seen: BTreeSet<String> = out.iter().map(|d| d.name.clone()).collect();
    for problem in &plan.problems {
        let Some(name) = &problem.deployment else { continue };
        if !seen.insert(name.clone()) || problem.kind == ProblemKind::UnknownService {
            continue;
        }
        out.push(BatchDeployment {
            name: name.clone(),
            action: DeploymentAction::Problem,
            state: Some(DeploymentRolloutState::Failed),
            message: Some(problem.message.clone()),
            ..BatchDeployment::default()
        });
    }
    out
}
