//! Simulated controllers for the sandbox: a workload controller that moves Deployment status
//! through a rolling update (and Jobs to completion), and a credential rotator that rewrites
//! binding Secrets. They write through the store like a kube-controller-manager would, so their
//! writes are not in the request log and never count as capdeck's.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod pods;

use super::Sandbox;
use super::store::{ChangeKind, ObjectKey, WriteOptions, now_rfc3339};
use pods::{NewPods, PodTarget};

/// Annotation that makes a Deployment's rollouts stall until the progress deadline (its new
/// Pod crash-loops; the deadline is the simulation's, at most).
pub const STALL_ANNOTATION: &str = "sandbox.capdeck.dev/stall";
/// Annotation that makes a Deployment's rollouts never progress: the new Pods run and never
/// become ready, and the spec's progress deadline (600 s unless set) is kept, not compressed.
pub const HANG_ANNOTATION: &str = "sandbox.capdeck.dev/hang";
/// Annotation that makes a Deployment's new Pods crash-loop: the rollout never progresses, and
/// the spec's progress deadline is kept (as with real Pods refusing new credentials).
pub const CRASH_LOOP_ANNOTATION: &str = "sandbox.capdeck.dev/crash-loop";
/// Annotation that leaves a Deployment's new Pods unscheduled (the scheduler's condition says
/// the sandbox's one node is cordoned); the spec's progress deadline is kept.
pub const UNSCHEDULABLE_ANNOTATION: &str = "sandbox.capdeck.dev/unschedulable";

/// How a rollout's new Pods behave (the Deployment's annotations say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Healthy,
    Stall,
    Hang,
    CrashLoop,
    Unschedulable,
}

impl Fate {
    fn of(deployment: &Value) -> Self {
        let annotated = |key: &str| {
            deployment.pointer(&format!("/metadata/annotations/{}", key.replace('/', "~1"))).and_then(Value::as_str)
                == Some("true")
        };
        if annotated(STALL_ANNOTATION) {
            Self::Stall
        } else if annotated(CRASH_LOOP_ANNOTATION) {
            Self::CrashLoop
        } else if annotated(UNSCHEDULABLE_ANNOTATION) {
            Self::Unschedulable
        } else if annotated(HANG_ANNOTATION) {
            Self::Hang
        } else {
            Self::Healthy
        }
    }
}
const MANAGER: &str = "sandbox-controller-manager";

#[derive(Clone, Debug)]
pub struct WorkloadSimulation {
    /// How many replicas of a rollout become ready per second.
    pub replicas_per_second: f64,
    /// A stalled rollout gives up after this, or the Deployment's `spec.progressDeadlineSeconds`
    /// when that is shorter.
    pub progress_deadline: Duration,
    pub tick: Duration,
    /// Also run ReplicaSets and Pods (`simulate/pods.rs`): what `--demo` shows when you drill
    /// into a rollout. Off by default: tests make the Pods they need.
    pub pods: bool,
}

impl Default for WorkloadSimulation {
    fn default() -> Self {
        Self {
            replicas_per_second: 1.0,
            progress_deadline: Duration::from_secs(20),
            tick: Duration::from_millis(200),
            pods: false,
        }
    }
}

/// Restarts of a stalled rollout's crash-looping Pod after `elapsed` (one every 4 s, at most 5).
fn crash_restarts(elapsed: Duration) -> i32 {
    i32::try_from(1 + elapsed.as_secs() / 4).unwrap_or(5).min(5)
}

struct Rollout {
    generation: i64,
    replicas: i64,
    started: Instant,
    fate: Fate,
    deadline: Duration,
    /// How long each new Pod takes to become ready, when the Pod template says
    /// (`READY_DELAY_ANNOTATION`): one replica after the other, like a surge of one.
    ready_delay: Option<Duration>,
}

impl Rollout {
    /// Replicas of the new template ready after `elapsed`.
    #[allow(clippy::cast_possible_truncation)]
    fn updated(&self, elapsed: Duration, simulation: &WorkloadSimulation) -> i64 {
        let ready = match self.ready_delay.filter(|delay| !delay.is_zero()) {
            Some(delay) => (elapsed.as_secs_f64() / delay.as_secs_f64()).floor() as i64,
            None => (elapsed.as_secs_f64() * simulation.replicas_per_second).floor() as i64,
        };
        ready.min(self.replicas)
    }
}

/// The Pod template annotation kwok's `pod-ready` stage takes its delay from (the real workload
/// plane's, `tools/envtest/kwok/stages.yaml`): the simulation honours it too, so one object rolls
/// at the same pace in both worlds. A Go duration (`3s`, `500ms`).
pub const READY_DELAY_ANNOTATION: &str = "pod-ready.stage.kwok.x-k8s.io/delay";

fn ready_delay(deployment: &Value) -> Option<Duration> {
    let text = deployment
        .pointer(&format!("/spec/template/metadata/annotations/{}", READY_DELAY_ANNOTATION.replace('/', "~1")))
        .and_then(Value::as_str)?;
    crate::api::go_duration::parse_go_duration(text).ok()
}

fn int(object: &Value, pointer: &str) -> Option<i64> {
    object.pointer(pointer).and_then(Value::as_i64)
}

fn complete_status(generation: i64, replicas: i64) -> Value {
    available_status(
        generation,
        replicas,
        replicas,
        ("True", "NewReplicaSetAvailable", "ReplicaSet has successfully progressed."),
    )
}

/// A paused Deployment's status: observed, its Pods as they were, `Progressing` Unknown.
fn paused_status(generation: i64, replicas: i64, updated: i64) -> Value {
    available_status(generation, replicas, updated, ("Unknown", "DeploymentPaused", "Deployment is paused"))
}

/// An observed status with every replica available and `Progressing` as given (status, reason,
/// message).
fn available_status(
    generation: i64,
    replicas: i64,
    updated: i64,
    (status, reason, message): (&str, &str, &str),
) -> Value {
    json!({
        "observedGeneration": generation,
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability.", "lastUpdateTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()},
            {"type": "Progressing", "status": status, "reason": reason, "message": message, "lastUpdateTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()},
        ],
    })
}

fn rolling_status(rollout: &Rollout, updated: i64, stalled: bool) -> Value {
    let (status, reason, message) = if stalled {
        ("False", "ProgressDeadlineExceeded", "ReplicaSet has timed out progressing.")
    } else {
        ("True", "ReplicaSetUpdated", "ReplicaSet is progressing.")
    };
    json!({
        "observedGeneration": rollout.generation,
        // One surge pod while old pods remain.
        "replicas": rollout.replicas + i64::from(updated < rollout.replicas),
        "updatedReplicas": updated,
        "readyReplicas": rollout.replicas,
        "availableReplicas": rollout.replicas,
        "unavailableReplicas": i64::from(updated < rollout.replicas),
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability.", "lastUpdateTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()},
            {"type": "Progressing", "status": status, "reason": reason, "message": message, "lastUpdateTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()},
        ],
    })
}

impl Sandbox {
    fn write_status(&self, group: &str, plural: &str, namespace: &str, name: &str, status: Value) {
        self.update_object(group, plural, namespace, name, json!({"status": status}), true);
    }

    /// Write through the store as the controller manager does (not in the request log, never
    /// capdeck's); `status_only` writes the status subresource. Whether it was written.
    fn update_object(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
        body: Value,
        status_only: bool,
    ) -> bool {
        self.with_store_mut(|store| {
            let Some(resource) = store.registry.by_group_plural(group, plural).cloned() else { return false };
            let options = WriteOptions { dry_run: false, field_manager: Some(MANAGER.into()), force: false };
            store.update(&resource, namespace, name, body, status_only, &options).is_ok()
        })
    }

    /// Run the workload controller until `cancel`: Deployments without status get one, a pod
    /// template change rolls replica by replica, `sandbox.capdeck.dev/stall: "true"` ends in
    /// `ProgressDeadlineExceeded`, and Jobs complete.
    pub fn simulate_workloads(&self, simulation: WorkloadSimulation, cancel: CancellationToken) -> JoinHandle<()> {
        let sandbox = self.clone();
        let mut changes = self.with_store(super::store::Store::subscribe);
        // Objects that existed before the controller started.
        let existing: Vec<(ObjectKey, Value)> = ["deployments", "jobs"]
            .iter()
            .flat_map(|plural| {
                let group = if *plural == "deployments" { "apps" } else { "batch" };
                self.list(group, plural).into_iter().map(move |object| {
                    let key = ObjectKey {
                        group: group.into(),
                        plural: (*plural).into(),
                        namespace: object
                            .pointer("/metadata/namespace")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .into(),
                        name: object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().into(),
                    };
                    (key, object)
                })
            })
            .collect();
        tokio::spawn(async move {
            let mut rollouts: HashMap<ObjectKey, Rollout> = HashMap::new();
            for (key, object) in existing {
                sandbox.observe(&simulation, &mut rollouts, &key, &object);
            }
            let mut ticker = tokio::time::interval(simulation.tick);
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    _ = ticker.tick() => sandbox.advance(&simulation, &mut rollouts),
                    change = changes.recv() => match change {
                        Ok(change) if change.kind != ChangeKind::Deleted => {
                            let key = change.key.clone();
                            sandbox.observe(&simulation, &mut rollouts, &key, &change.object);
                        }
                        Ok(change) => {
                            rollouts.remove(&change.key);
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            // Missed changes: look at everything again.
                            for plural in ["deployments", "jobs"] {
                                let group = if plural == "deployments" { "apps" } else { "batch" };
                                for object in sandbox.list(group, plural) {
                                    let key = ObjectKey {
                                        group: group.into(),
                                        plural: plural.into(),
                                        namespace: object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().into(),
                                        name: object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().into(),
                                    };
                                    sandbox.observe(&simulation, &mut rollouts, &key, &object);
                                }
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    },
                }
            }
        })
    }

    /// A Job without an outcome completes at once.
    fn complete_job(&self, key: &ObjectKey, object: &Value) {
        if object.pointer("/status/succeeded").is_none() && object.pointer("/status/failed").is_none() {
            let now = now_rfc3339();
            self.write_status("batch", "jobs", &key.namespace, &key.name, json!({
                "startTime": now, "completionTime": now, "succeeded": 1, "active": 0,
                "conditions": [{"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now}],
            }));
        }
    }

    /// A Deployment at rest: complete, or stalled with its new Pods as its fate leaves them; a
    /// paused one keeps its Pods as they are until it is resumed.
    fn at_rest(&self, simulation: &WorkloadSimulation, object: &Value, replicas: i64) {
        let paused = object.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);
        if !simulation.pods || paused {
            return;
        }
        let stalled = object.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|conditions| {
            conditions.iter().any(|c| c.get("reason").and_then(Value::as_str) == Some("ProgressDeadlineExceeded"))
        });
        let target = if stalled {
            let new_pods = match Fate::of(object) {
                Fate::Hang => NewPods::NotReady,
                Fate::Unschedulable => NewPods::Unschedulable,
                Fate::Healthy | Fate::Stall | Fate::CrashLoop => NewPods::CrashLoop(5),
            };
            PodTarget { replicas, updated: 0, new_pods }
        } else {
            PodTarget { replicas, updated: replicas, new_pods: NewPods::Ready }
        };
        self.sync_pods(object, &target);
    }

    fn observe(
        &self,
        simulation: &WorkloadSimulation,
        rollouts: &mut HashMap<ObjectKey, Rollout>,
        key: &ObjectKey,
        object: &Value,
    ) {
        match (key.group.as_str(), key.plural.as_str()) {
            ("apps", "deployments") => {}
            ("batch", "jobs") => return self.complete_job(key, object),
            _ => return,
        }
        let generation = int(object, "/metadata/generation").unwrap_or(1);
        let replicas = int(object, "/spec/replicas").unwrap_or(1).max(0);
        let observed = int(object, "/status/observedGeneration");
        if rollouts.get(&key.clone()).is_some_and(|rollout| rollout.generation == generation) {
            return;
        }
        match observed {
            None if object.get("status").is_none_or(|s| s.as_object().is_none_or(serde_json::Map::is_empty)) => {
                // Created without status: it comes up directly.
                self.write_status(
                    "apps",
                    "deployments",
                    &key.namespace,
                    &key.name,
                    complete_status(generation, replicas),
                );
                if simulation.pods {
                    self.sync_pods(object, &PodTarget { replicas, updated: replicas, new_pods: NewPods::Ready });
                }
            }
            Some(observed) if observed >= generation => self.at_rest(simulation, object, replicas),
            _ if object.pointer("/spec/paused").and_then(Value::as_bool) == Some(true) => {
                // Paused by a person: the deployment controller observes the spec, starts no new
                // ReplicaSet and keeps no deadline until it is resumed (a new generation).
                // Paused mid-rollout: the Pods it had brought up so far, no more.
                let updated = match rollouts.remove(key) {
                    Some(rollout) if rollout.fate == Fate::Healthy => {
                        rollout.updated(rollout.started.elapsed(), simulation)
                    }
                    Some(_) => 0,
                    None if simulation.pods && self.has_replicaset_for(object) => replicas,
                    None => 0,
                };
                self.write_status(
                    "apps",
                    "deployments",
                    &key.namespace,
                    &key.name,
                    paused_status(generation, replicas, updated),
                );
            }
            _ => {
                // A rollback to a template whose Pods exist does not stall (there is nothing new
                // to start); known only when Pods are simulated.
                let fate =
                    if simulation.pods && self.has_replicaset_for(object) { Fate::Healthy } else { Fate::of(object) };
                let spec_deadline = int(object, "/spec/progressDeadlineSeconds")
                    .map_or(Duration::from_secs(600), |seconds| Duration::from_secs(seconds.unsigned_abs()));
                // Sandbox time is compressed for a stall: it gives up after the simulation's
                // deadline at most (the spec's, 600 s by default, would stall a demo for minutes).
                let deadline =
                    if fate == Fate::Stall { spec_deadline.min(simulation.progress_deadline) } else { spec_deadline };
                let ready_delay = ready_delay(object);
                let rollout = Rollout { generation, replicas, started: Instant::now(), fate, deadline, ready_delay };
                self.write_status("apps", "deployments", &key.namespace, &key.name, rolling_status(&rollout, 0, false));
                if simulation.pods {
                    self.sync_pods(object, &PodTarget { replicas, updated: 0, new_pods: NewPods::Ready });
                }
                rollouts.insert(key.clone(), rollout);
            }
        }
    }

    fn advance(&self, simulation: &WorkloadSimulation, rollouts: &mut HashMap<ObjectKey, Rollout>) {
        let mut finished = Vec::new();
        for (key, rollout) in rollouts.iter() {
            let elapsed = rollout.started.elapsed();
            if simulation.pods
                && let Some(deployment) = self.get("apps", "deployments", &key.namespace, &key.name)
            {
                let updated = rollout.updated(elapsed, simulation);
                let new_pods = match rollout.fate {
                    Fate::Healthy => NewPods::Ready,
                    Fate::Stall | Fate::CrashLoop => NewPods::CrashLoop(crash_restarts(elapsed)),
                    Fate::Hang => NewPods::NotReady,
                    Fate::Unschedulable => NewPods::Unschedulable,
                };
                let updated = if rollout.fate == Fate::Healthy { updated } else { 0 };
                self.sync_pods(&deployment, &PodTarget { replicas: rollout.replicas, updated, new_pods });
            }
            if rollout.fate != Fate::Healthy {
                if elapsed >= rollout.deadline {
                    self.write_status(
                        "apps",
                        "deployments",
                        &key.namespace,
                        &key.name,
                        rolling_status(rollout, rollout.replicas.min(1), true),
                    );
                    finished.push(key.clone());
                }
                continue;
            }
            let updated = rollout.updated(elapsed, simulation);
            if updated >= rollout.replicas {
                self.write_status(
                    "apps",
                    "deployments",
                    &key.namespace,
                    &key.name,
                    complete_status(rollout.generation, rollout.replicas),
                );
                finished.push(key.clone());
            } else {
                self.write_status(
                    "apps",
                    "deployments",
                    &key.namespace,
                    &key.name,
                    rolling_status(rollout, updated, false),
                );
            }
        }
        for key in finished {
            rollouts.remove(&key);
        }
    }

    /// Binding Secrets referenced by any CAPApplication.
    pub fn binding_secrets(&self) -> Vec<crate::api::ObjectKey> {
        let mut secrets: Vec<crate::api::ObjectKey> = self
            .list("sme.sap.com", "capapplications")
            .iter()
            .flat_map(|app| {
                let namespace =
                    app.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_string();
                app.pointer("/spec/btp/services")
                    .and_then(Value::as_array)
                    .map(|services| {
                        services
                            .iter()
                            .filter_map(|service| service.get("secret").and_then(Value::as_str))
                            .map(|secret| crate::api::ObjectKey::new(namespace.clone(), secret))
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            })
            .collect();
        secrets.sort();
        secrets.dedup();
        secrets
    }

    /// Rotate one binding Secret: a new client secret in whichever layout it uses. Returns the
    /// Secret rotated, if it exists.
    pub fn rotate_secret(&self, namespace: &str, name: &str) -> Option<String> {
        let mut secret = self.get("", "secrets", namespace, name)?;
        let fresh = format!("rotated-{}", new_token());
        let engine = base64::engine::general_purpose::STANDARD;
        let data = secret.get_mut("data").and_then(Value::as_object_mut)?;
        let decode = |value: &Value| {
            value.as_str().and_then(|text| engine.decode(text).ok()).and_then(|bytes| String::from_utf8(bytes).ok())
        };
        if data.contains_key(".metadata") && data.contains_key("clientsecret") {
            data.insert("clientsecret".into(), Value::String(engine.encode(&fresh)));
        } else if let Some(mut credentials) =
            data.get("credentials").and_then(decode).and_then(|text| serde_json::from_str::<Value>(&text).ok())
        {
            credentials["clientsecret"] = Value::String(fresh);
            data.insert("credentials".into(), Value::String(engine.encode(credentials.to_string())));
        } else {
            data.insert("password".into(), Value::String(engine.encode(&fresh)));
        }
        self.with_store_mut(|store| {
            let resource = store.registry.by_group_plural("", "secrets")?.clone();
            let options =
                WriteOptions { dry_run: false, field_manager: Some("sandbox-credential-rotator".into()), force: false };
            store.update(&resource, namespace, name, secret, false, &options).ok()
        })?;
        Some(name.to_string())
    }

    /// Rotate a random binding Secret every `min..=max` until `cancel`.
    pub fn rotate_credentials(&self, min: Duration, max: Duration, cancel: CancellationToken) -> JoinHandle<()> {
        let sandbox = self.clone();
        tokio::spawn(async move {
            loop {
                let wait = {
                    use rand::RngExt as _;
                    let span = max.saturating_sub(min).as_millis().max(1);
                    min + Duration::from_millis(u64::try_from(rand::rng().random_range(0..span)).unwrap_or(0))
                };
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
                let secrets = sandbox.binding_secrets();
                if secrets.is_empty() {
                    continue;
                }
                let index = {
                    use rand::RngExt as _;
                    rand::rng().random_range(0..secrets.len())
                };
                let crate::api::ObjectKey { namespace, name } = &secrets[index];
                if sandbox.rotate_secret(namespace, name).is_some() {
                    // The target keeps the name it had inside the application (`RUST_LOG=capdeck=…`).
                    tracing::info!(target: "capdeck::sandbox::simulate", namespace, secret = name, "sandbox rotated a binding secret");
                }
            }
        })
    }
}

fn new_token() -> String {
    use rand::RngExt as _;
    let bits: u64 = rand::rng().random();
    format!("{bits:016x}")
}
