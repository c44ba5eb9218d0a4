//! The sandbox's ReplicaSet and Pod controller, opt-in (`WorkloadSimulation::pods`, on for
//! `--demo`): each Deployment gets a ReplicaSet per Pod template (`<deployment>-<hash>`, its
//! revision annotated like the real deployment controller's) and Pods on the sandbox's one node
//! that follow the rollout — the new ReplicaSet's `updated` Pods ready, the rest on the previous
//! one; a stalled rollout's new Pod crash-loops with a log that says why. The Pods' logs are in
//! their `sandbox.capdeck.dev/log` annotation, which `pods/log` serves (the kubelet stand-in).

use serde_json::{Value, json};
use sha2::Digest as _;

use super::super::Sandbox;
use super::super::store::{DeleteOptions, WriteOptions, now_rfc3339};
use super::MANAGER;

const REVISION: &str = "deployment.kubernetes.io/revision";
const NODE: &str = "sandbox-node";
pub const LOG_ANNOTATION: &str = "sandbox.capdeck.dev/log";

/// Where a Deployment's rollout stands, for its Pods.
pub struct PodTarget {
    pub replicas: i64,
    /// Pods of the current template (ready ones, for a healthy rollout).
    pub updated: i64,
    pub new_pods: NewPods,
}

/// How the current template's Pods are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewPods {
    Ready,
    /// Running, never ready (a readiness probe that never passes): one Pod, the surge.
    NotReady,
    /// Crash-looping, restarted this often so far: one Pod, the surge.
    CrashLoop(i32),
    /// Pending: the scheduler found no node (the sandbox's one node is cordoned). One Pod.
    Unschedulable,
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn owned_by(object: &Value, uid: &str) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|owners| owners.iter().any(|owner| owner.get("uid").and_then(Value::as_str) == Some(uid)))
}

fn owner(kind: &str, object: &Value) -> Value {
    let api_version = if kind == "Deployment" || kind == "ReplicaSet" { "apps/v1" } else { "v1" };
    json!([{"apiVersion": api_version, "kind": kind, "name": text(object, "/metadata/name"),
            "uid": text(object, "/metadata/uid"), "controller": true, "blockOwnerDeletion": true}])
}

fn healthy_log(pod: &str) -> String {
    [
        format!("[cds] - loaded model from 3 file(s) ({pod})"),
        "[cds] - connect to db > hana".to_string(),
        "[cds] - using auth strategy { kind: 'xsuaa' }".to_string(),
        "[cds] - serving CatalogService { path: '/odata/v4/catalog' }".to_string(),
        "[cds] - server listening on { url: 'http://localhost:8080' }".to_string(),
    ]
    .join("\n")
}

fn crash_log(restarts: i32) -> String {
    let mut lines = Vec::new();
    for attempt in 0..=restarts {
        lines.push(format!("[cds] - loaded model from 3 file(s) (attempt {})", attempt + 1));
        lines.push("[cds] - using auth strategy { kind: 'xsuaa' }".to_string());
        lines.push(
            "[error] - Error: xsuaa token request failed: 401 Unauthorized (invalid_client: Bad credentials)"
                .to_string(),
        );
        lines.push("npm error code 1".to_string());
    }
    lines.join("\n")
}

impl Sandbox {
    /// Bring the Deployment's ReplicaSets and Pods in line with `target`. Writes only what
    /// differs, so calling it on every change of the Deployment is cheap and loops never form.
    pub(super) fn sync_pods(&self, deployment: &Value, target: &PodTarget) {
        let namespace = text(deployment, "/metadata/namespace").to_string();
        let name = text(deployment, "/metadata/name").to_string();
        let uid = text(deployment, "/metadata/uid").to_string();
        let Some(template) = deployment.pointer("/spec/template").cloned() else { return };
        let selector = deployment.pointer("/spec/selector/matchLabels").cloned().unwrap_or_else(|| json!({}));
        if uid.is_empty() || selector.as_object().is_none_or(serde_json::Map::is_empty) {
            return;
        }
        let hash = template_hash(&template);
        let current_name = format!("{name}-{hash}");
        let mut replicasets: Vec<Value> = self
            .list("apps", "replicasets")
            .into_iter()
            .filter(|rs| text(rs, "/metadata/namespace") == namespace && owned_by(rs, &uid))
            .collect();
        let revision = |rs: &Value| {
            rs.pointer(&format!("/metadata/annotations/{}", REVISION.replace('/', "~1")))
                .and_then(Value::as_str)
                .and_then(|r| r.parse::<i64>().ok())
                .unwrap_or(0)
        };
        if !replicasets.iter().any(|rs| text(rs, "/metadata/name") == current_name) {
            let next = replicasets.iter().map(revision).max().unwrap_or(0) + 1;
            let mut labels = selector.clone();
            labels["pod-template-hash"] = json!(hash);
            let mut pod_template = template.clone();
            pod_template["metadata"]["labels"] = labels.clone();
            let rs = json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": current_name, "namespace": namespace, "labels": labels,
                             "annotations": {REVISION: next.to_string()}, "ownerReferences": owner("Deployment", deployment)},
                "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": pod_template},
            });
            if let Some(created) = self.create_object("apps", "replicasets", &namespace, rs) {
                replicasets.push(created);
            }
        }
        // Back to an earlier template (a rollback, an undo): its ReplicaSet becomes the newest
        // revision again, as the deployment controller does.
        let newest = replicasets.iter().map(revision).max().unwrap_or(0);
        if let Some(current) = replicasets.iter_mut().find(|rs| text(rs, "/metadata/name") == current_name)
            && revision(current) < newest
        {
            current["metadata"]["annotations"][REVISION] = json!((newest + 1).to_string());
            self.update_object("apps", "replicasets", &namespace, &current_name, current.clone(), false);
        }
        replicasets.sort_by_key(|rs| std::cmp::Reverse(revision(rs)));
        if let Some(current) = replicasets.iter().find(|rs| text(rs, "/metadata/name") == current_name) {
            self.annotate_revision(&namespace, &name, &hash, revision(current));
        }
        let current_desired = if target.new_pods == NewPods::Ready { target.updated } else { 1 };
        for (position, rs) in replicasets.iter().enumerate() {
            let desired = match position {
                0 => current_desired,
                // The previous template keeps serving until the new one took over.
                1 => target.replicas - target.updated,
                _ => 0,
            }
            .max(0);
            let pods = if position == 0 { target.new_pods } else { NewPods::Ready };
            self.sync_replicaset_pods(rs, desired, pods);
        }
    }

    fn sync_replicaset_pods(&self, rs: &Value, desired: i64, new_pods: NewPods) {
        let namespace = text(rs, "/metadata/namespace").to_string();
        let rs_name = text(rs, "/metadata/name").to_string();
        let rs_uid = text(rs, "/metadata/uid").to_string();
        let ready = if new_pods == NewPods::Ready { desired } else { 0 };
        if rs.pointer("/spec/replicas").and_then(Value::as_i64) != Some(desired)
            || rs.pointer("/status/readyReplicas").and_then(Value::as_i64) != Some(ready)
        {
            let mut updated = rs.clone();
            updated["spec"]["replicas"] = json!(desired);
            if self.update_object("apps", "replicasets", &namespace, &rs_name, updated, false) {
                let status = json!({"replicas": desired, "readyReplicas": ready, "availableReplicas": ready,
                                    "observedGeneration": 1});
                self.write_status("apps", "replicasets", &namespace, &rs_name, status);
            }
        }
        let pods: Vec<Value> = self
            .list("", "pods")
            .into_iter()
            .filter(|pod| text(pod, "/metadata/namespace") == namespace && owned_by(pod, &rs_uid))
            .collect();
        for index in 0..desired {
            let pod_name = format!("{rs_name}-{index}");
            let existing = pods.iter().find(|pod| text(pod, "/metadata/name") == pod_name);
            let status = pod_status(rs, new_pods);
            let log = match new_pods {
                NewPods::CrashLoop(restarts) => crash_log(restarts),
                NewPods::Unschedulable => String::new(),
                NewPods::Ready | NewPods::NotReady => healthy_log(&pod_name),
            };
            match existing {
                Some(pod) if pod.pointer("/status/containerStatuses") == status.pointer("/containerStatuses") => {}
                Some(pod) => {
                    let mut annotated = pod.clone();
                    annotated["metadata"]["annotations"][LOG_ANNOTATION] = json!(log);
                    self.update_object("", "pods", &namespace, &pod_name, annotated, false);
                    self.write_status("", "pods", &namespace, &pod_name, status);
                }
                None => {
                    let mut spec = rs.pointer("/spec/template/spec").cloned().unwrap_or_else(|| json!({}));
                    if new_pods != NewPods::Unschedulable {
                        spec["nodeName"] = json!(NODE);
                    }
                    let pod = json!({
                        "apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": pod_name, "namespace": namespace,
                                     "labels": rs.pointer("/spec/template/metadata/labels").cloned().unwrap_or_else(|| json!({})),
                                     "annotations": {LOG_ANNOTATION: log}, "ownerReferences": owner("ReplicaSet", rs)},
                        "spec": spec,
                    });
                    if self.create_object("", "pods", &namespace, pod).is_some() {
                        self.write_status("", "pods", &namespace, &pod_name, status);
                    }
                }
            }
        }
        for pod in &pods {
            let pod_name = text(pod, "/metadata/name");
            let index = pod_name.rsplit('-').next().and_then(|i| i.parse::<i64>().ok());
            if index.is_none_or(|index| index >= desired) {
                self.with_store_mut(|store| {
                    let Some(resource) = store.registry.by_group_plural("", "pods").cloned() else { return };
                    let _ = store.delete(&resource, &namespace, pod_name, &DeleteOptions::default());
                });
            }
        }
    }

    /// The Deployment's `deployment.kubernetes.io/revision` is its current ReplicaSet's, as the
    /// deployment controller writes it. Only while the Deployment still has that template, and
    /// at the version read (a write in between wins).
    fn annotate_revision(&self, namespace: &str, name: &str, hash: &str, revision: i64) {
        let Some(mut live) = self.get("apps", "deployments", namespace, name) else { return };
        let pointer = format!("/metadata/annotations/{}", REVISION.replace('/', "~1"));
        let wanted = revision.to_string();
        let same_template = live.pointer("/spec/template").is_some_and(|template| template_hash(template) == hash);
        if !same_template || live.pointer(&pointer).and_then(Value::as_str) == Some(wanted.as_str()) {
            return;
        }
        if live.pointer("/metadata/annotations").is_none_or(|a| !a.is_object()) {
            live["metadata"]["annotations"] = json!({});
        }
        live["metadata"]["annotations"][REVISION] = json!(wanted);
        self.update_object("apps", "deployments", namespace, name, live, false);
    }

    /// Whether the Deployment's current Pod template already has its ReplicaSet (a rollback to
    /// Pods that exist, which a stall annotation does not stop).
    pub(super) fn has_replicaset_for(&self, deployment: &Value) -> bool {
        let Some(template) = deployment.pointer("/spec/template") else { return false };
        let name = format!("{}-{}", text(deployment, "/metadata/name"), template_hash(template));
        self.get("apps", "replicasets", text(deployment, "/metadata/namespace"), &name).is_some()
    }

    fn create_object(&self, group: &str, plural: &str, namespace: &str, body: Value) -> Option<Value> {
        self.with_store_mut(|store| {
            let resource = store.registry.by_group_plural(group, plural)?.clone();
            let options = WriteOptions { dry_run: false, field_manager: Some(MANAGER.into()), force: false };
            store.create(&resource, namespace, body, &options).ok().map(|object| (*object).clone())
        })
    }
}

/// Running and ready (or not), crash-looping with its last termination, or unscheduled.
fn pod_status(rs: &Value, new_pods: NewPods) -> Value {
    if new_pods == NewPods::Unschedulable {
        // kube-scheduler's words for a cluster whose only node is cordoned.
        return json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "lastTransitionTime": now_rfc3339(), "lastProbeTime": null,
            "message": "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."}]});
    }
    let containers: Vec<String> = rs
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string)).collect())
        .unwrap_or_default();
    let statuses: Vec<Value> = containers
        .iter()
        .map(|name| match new_pods {
            NewPods::Ready | NewPods::NotReady | NewPods::Unschedulable => {
                json!({"name": name, "image": "sandbox", "imageID": "",
                "ready": new_pods == NewPods::Ready, "restartCount": 0,
                "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}})
            }
            NewPods::CrashLoop(restarts) => json!({"name": name, "image": "sandbox", "imageID": "", "ready": false,
                "restartCount": restarts, "started": false,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off restarting failed container"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                              "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z"}}}),
        })
        .collect();
    let ready = if new_pods == NewPods::Ready { "True" } else { "False" };
    json!({"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.244.0.10", "startTime": now_rfc3339(),
           "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": now_rfc3339()}],
           "containerStatuses": statuses})
}

/// The ReplicaSet name suffix of a Pod template (the real controller's `pod-template-hash`).
fn template_hash(template: &Value) -> String {
    hex(&sha2::Sha256::digest(template.to_string().as_bytes()))[..5].to_string()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
