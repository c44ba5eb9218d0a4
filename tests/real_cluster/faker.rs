//! A workload status faker that works against any API server through a kube client: no kubelet,
//! no kube-controller-manager. It plays the deployment controller — a Deployment whose
//! `metadata.generation` is ahead of `status.observedGeneration` finishes its rollout after
//! `rollout_time` (or stalls with `ProgressDeadlineExceeded` when annotated
//! `sandbox.capdeck.dev/stall`) — and the job controller, completing Jobs with the status a
//! kube-apiserver since 1.31 accepts (`startTime`, `SuccessCriteriaMet`, then `Complete` with
//! `completionTime`). Every write goes through the status subresource.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const STALL: &str = "sandbox.capdeck.dev/stall";
/// Never progresses: the rollout stays under way (its Pods are the story's to fake).
const HANG: &str = "sandbox.capdeck.dev/hang";

pub struct Faker {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// The label the Go CAP Operator puts on a tenant operation's Jobs.
const TENANT_OPERATION_TYPE: &str = "sme.sap.com/tenant-operation-type";

impl Faker {
    pub fn start(client: kube::Client, namespace: &str, rollout_time: Duration) -> Self {
        Self::start_holding(client, namespace, rollout_time, false)
    }

    /// Like `start`, but Jobs of tenant upgrades (as the Go CAP Operator labels them) never
    /// complete: their tenants stay `Upgrading` on their current version.
    pub fn start_holding_upgrades(client: kube::Client, namespace: &str, rollout_time: Duration) -> Self {
        Self::start_holding(client, namespace, rollout_time, true)
    }

    fn start_holding(client: kube::Client, namespace: &str, rollout_time: Duration, hold_upgrades: bool) -> Self {
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let namespace = namespace.to_string();
        let task = tokio::spawn(async move {
            let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
            let jobs: Api<Job> = Api::namespaced(client, &namespace);
            // When each generation was first seen behind; it completes `rollout_time` later.
            let mut seen: HashMap<(String, i64), tokio::time::Instant> = HashMap::new();
            loop {
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(150)) => {}
                }
                if let Ok(list) = deployments.list(&Default::default()).await {
                    for deployment in list.items {
                        tick_deployment(&deployments, &deployment, &mut seen, rollout_time).await;
                    }
                }
                if let Ok(list) = jobs.list(&Default::default()).await {
                    for job in list.items {
                        let upgrade = job.metadata.labels.as_ref().and_then(|l| l.get(TENANT_OPERATION_TYPE));
                        if hold_upgrades && upgrade.is_some_and(|t| t == "upgrade") {
                            continue;
                        }
                        complete_job(&jobs, &job).await;
                    }
                }
            }
        });
        Self { cancel, task }
    }

    pub async fn stop(self) {
        self.cancel.cancel();
        let _ = self.task.await;
    }
}

fn now() -> String {
    Timestamp::now().to_string()
}

async fn tick_deployment(
    api: &Api<Deployment>,
    deployment: &Deployment,
    seen: &mut HashMap<(String, i64), tokio::time::Instant>,
    rollout_time: Duration,
) {
    let name = deployment.metadata.name.clone().unwrap_or_default();
    let generation = deployment.metadata.generation.unwrap_or(1);
    let observed = deployment.status.as_ref().and_then(|s| s.observed_generation).unwrap_or(0);
    if observed >= generation {
        return;
    }
    let replicas = i64::from(deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1));
    let annotated =
        |key: &str| deployment.metadata.annotations.as_ref().is_some_and(|a| a.get(key).is_some_and(|v| v == "true"));
    if annotated(HANG) {
        return;
    }
    let stall = annotated(STALL);
    let first = *seen.entry((name.clone(), generation)).or_insert_with(tokio::time::Instant::now);
    if first.elapsed() < rollout_time {
        return;
    }
    let status = if stall {
        json!({"observedGeneration": generation, "replicas": replicas + 1, "updatedReplicas": 1,
               "readyReplicas": replicas, "availableReplicas": replicas, "unavailableReplicas": 1,
               "conditions": [
                   {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability.", "lastUpdateTime": now(), "lastTransitionTime": now()},
                   {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": format!("ReplicaSet \"{name}-1\" has timed out progressing."), "lastUpdateTime": now(), "lastTransitionTime": now()}]})
    } else {
        json!({"observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
               "readyReplicas": replicas, "availableReplicas": replicas,
               "conditions": [
                   {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability.", "lastUpdateTime": now(), "lastTransitionTime": now()},
                   {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": format!("ReplicaSet \"{name}-1\" has successfully progressed."), "lastUpdateTime": now(), "lastTransitionTime": now()}]})
    };
    let _ = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": status}))).await;
}

/// Complete a Job in the order the API server's validation demands.
async fn complete_job(api: &Api<Job>, job: &Job) {
    let name = job.metadata.name.clone().unwrap_or_default();
    let status = job.status.clone().unwrap_or_default();
    let done = status.conditions.as_ref().is_some_and(|c| c.iter().any(|c| c.type_ == "Complete"));
    if done {
        return;
    }
    let params = PatchParams::default();
    if status.start_time.is_none() {
        let _ =
            api.patch_status(&name, &params, &Patch::Merge(json!({"status": {"startTime": now(), "active": 1}}))).await;
        return;
    }
    let conditions: Vec<Value> = vec![
        json!({"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastProbeTime": now(), "lastTransitionTime": now()}),
        json!({"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastProbeTime": now(), "lastTransitionTime": now()}),
    ];
    let body = json!({"status": {"active": 0, "succeeded": 1, "completionTime": now(), "conditions": conditions,
                                 "uncountedTerminatedPods": {}, "ready": 0, "terminating": 0}});
    if let Err(error) = api.patch_status(&name, &params, &Patch::Merge(body)).await {
        eprintln!("faker: completing job {name}: {error}");
    }
}
