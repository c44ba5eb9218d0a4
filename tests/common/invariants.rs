//! The invariants every fault test checks (docs/RELIABILITY.md):
//! 1. every Deployment is rolled at most once per batch;
//! 2. no Deployment ever references a VCAP Secret that does not exist;
//! 3. no container is left without its `envFrom`;
//! 4. every batch ends in a terminal phase (or, where a test says so, stays resumable).
//!
//! 2 and 3 are checked by a monitor that samples the sandbox every 5 ms of tokio time (in paused
//! tests that is between any two steps of the engine that let time pass), and once more at the end.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capdeck::api::rotation_batch::DeploymentAction;
use capdeck::sandbox::Sandbox;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::fixtures::batches_all;

/// Containers (`deployment/container`) that have an `envFrom` now.
fn containers_with_env_from(sandbox: &Sandbox) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for deployment in sandbox.list("apps", "deployments") {
        let name = deployment.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        for list in ["containers", "initContainers"] {
            let containers = deployment.pointer(&format!("/spec/template/spec/{list}")).and_then(Value::as_array);
            for container in containers.into_iter().flatten() {
                let has = container.get("envFrom").and_then(Value::as_array).is_some_and(|l| !l.is_empty());
                if has {
                    let container = container.get("name").and_then(Value::as_str).unwrap_or_default();
                    found.insert(format!("{name}/{container}"));
                }
            }
        }
    }
    found
}

/// What is wrong with the cluster right now (invariants 2 and 3).
fn violations_now(sandbox: &Sandbox, expected_env_from: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let secrets: BTreeSet<(String, String)> = sandbox
        .list("", "secrets")
        .iter()
        .map(|s| {
            let text = |pointer: &str| s.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_string();
            (text("/metadata/namespace"), text("/metadata/name"))
        })
        .collect();
    for deployment in sandbox.list("apps", "deployments") {
        let text = |pointer: &str| deployment.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_string();
        let (namespace, name) = (text("/metadata/namespace"), text("/metadata/name"));
        for list in ["containers", "initContainers"] {
            let containers = deployment.pointer(&format!("/spec/template/spec/{list}")).and_then(Value::as_array);
            for container in containers.into_iter().flatten() {
                for source in container.get("envFrom").and_then(Value::as_array).into_iter().flatten() {
                    let Some(secret) = source.pointer("/secretRef/name").and_then(Value::as_str) else { continue };
                    if !secrets.contains(&(namespace.clone(), secret.to_string())) {
                        problems.push(format!("{namespace}/{name} references Secret {secret}, which does not exist"));
                    }
                }
            }
        }
    }
    let now = containers_with_env_from(sandbox);
    for lost in expected_env_from.difference(&now) {
        problems.push(format!("container {lost} lost its envFrom"));
    }
    problems
}

/// Samples invariants 2 and 3 until `finish`.
pub struct Monitor {
    sandbox: Sandbox,
    expected_env_from: BTreeSet<String>,
    violations: Arc<Mutex<Vec<String>>>,
    samples: Arc<Mutex<usize>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Monitor {
    /// Start watching; the containers that have an `envFrom` now must keep one.
    pub fn start(sandbox: &Sandbox) -> Self {
        let expected_env_from = containers_with_env_from(sandbox);
        assert!(!expected_env_from.is_empty(), "the fixture has containers with envFrom");
        let violations = Arc::new(Mutex::new(Vec::new()));
        let samples = Arc::new(Mutex::new(0));
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (sandbox, expected, violations, samples, cancel) =
                (sandbox.clone(), expected_env_from.clone(), violations.clone(), samples.clone(), cancel.clone());
            async move {
                loop {
                    let found = violations_now(&sandbox, &expected);
                    violations.lock().expect("lock").extend(found);
                    *samples.lock().expect("lock") += 1;
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_millis(5)) => {}
                    }
                }
            }
        });
        Self { sandbox: sandbox.clone(), expected_env_from, violations, samples, cancel, task }
    }

    /// Invariants so far (2 and 3), without stopping.
    pub fn violations(&self) -> Vec<String> {
        let mut all = self.violations.lock().expect("lock").clone();
        all.extend(violations_now(&self.sandbox, &self.expected_env_from));
        all.dedup();
        all
    }

    /// Stop sampling and assert all four invariants; `terminal` says whether every batch must
    /// have ended. Returns how many samples were taken.
    pub async fn finish(self, terminal: bool) -> usize {
        self.cancel.cancel();
        let mut all = self.violations.lock().expect("lock").clone();
        all.extend(violations_now(&self.sandbox, &self.expected_env_from));
        let _ = self.task.await;
        let violations = all;
        assert!(violations.is_empty(), "invariants broken: {violations:#?}");
        assert_rolled_at_most_once_per_batch(&self.sandbox);
        if terminal {
            assert_batches_terminal(&self.sandbox);
        }
        *self.samples.lock().expect("lock")
    }
}

/// Invariant 1, from the request log: successful Deployment updates per Deployment never exceed
/// the batches that restart it. Returns what broke it.
pub fn rolled_more_than_once_per_batch(sandbox: &Sandbox) -> Vec<String> {
    let mut updates: BTreeMap<String, usize> = BTreeMap::new();
    for write in sandbox.writes() {
        if write.info.resource == "deployments" && matches!(write.info.verb.as_str(), "update" | "patch") {
            *updates.entry(write.info.name.unwrap_or_default()).or_default() += 1;
        }
    }
    let mut restarts: BTreeMap<String, usize> = BTreeMap::new();
    // A superseded batch never rolled anything: its restarts went to its successor.
    for batch in batches_all(sandbox).into_iter().filter(|b| b.phase() != capdeck::api::BatchPhase::Superseded) {
        for deployment in batch.status.unwrap_or_default().deployments {
            if deployment.action == DeploymentAction::Restart {
                *restarts.entry(deployment.name).or_default() += 1;
            }
        }
    }
    updates
        .iter()
        .filter_map(|(deployment, count)| {
            let allowed = restarts.get(deployment).copied().unwrap_or_default();
            (*count > allowed).then(|| format!("{deployment} was updated {count} times for {allowed} batch restarts"))
        })
        .collect()
}

pub fn assert_rolled_at_most_once_per_batch(sandbox: &Sandbox) {
    let broken = rolled_more_than_once_per_batch(sandbox);
    assert!(
        broken.is_empty(),
        "{broken:#?}; batches {:#?}",
        batches_all(sandbox)
            .iter()
            .map(|b| (b.metadata.name.clone(), b.phase(), b.status.as_ref().map(|s| s.deployments.clone())))
            .collect::<Vec<_>>()
    );
}

/// Invariant 4: the batches not in a terminal phase.
pub fn open_batches(sandbox: &Sandbox) -> Vec<String> {
    batches_all(sandbox)
        .iter()
        .filter(|batch| !batch.phase().is_terminal())
        .map(|batch| format!("batch {:?} ended in {}", batch.metadata.name, batch.phase()))
        .collect()
}

pub fn assert_batches_terminal(sandbox: &Sandbox) {
    let open = open_batches(sandbox);
    assert!(open.is_empty(), "{open:#?}");
}
