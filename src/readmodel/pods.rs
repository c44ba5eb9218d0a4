//! A Deployment's ReplicaSets and their Pods, for the console's drill-down from a rollout row:
//! what state each Pod is in, how often its containers restarted and how they last ended, and
//! which VCAP Secret each ReplicaSet's Pods read. Read on demand (only while the pane is open),
//! never watched: the console has no Pod store.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, LogParams};

use crate::cluster::describe_error;
use crate::engine::reconcile::pods::termination_text;

/// How many log lines `l` shows.
pub const LOG_LINES: i64 = 100;
const REVISION: &str = "deployment.kubernetes.io/revision";

/// One line of the pane: a ReplicaSet, or one of its Pods under it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRow {
    pub kind: RowKind,
    pub name: String,
    /// ReplicaSet: `current` or `old`; Pod: a container's waiting reason, else its phase.
    pub status: String,
    /// `ready/total` replicas or containers.
    pub ready: String,
    pub restarts: i32,
    /// How the container that restarted most last ended: `Error (exit code 1)`.
    pub last_termination: Option<String>,
    /// ReplicaSet: the VCAP Secret its Pods read (`envFrom`).
    pub secret: Option<String>,
    pub created: Option<Timestamp>,
    /// Pod: the container whose log `l` shows (the one that restarted most, else the first).
    pub log_container: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    ReplicaSet,
    Pod,
}

/// The rows for `deployment`: its ReplicaSets, newest revision first, each followed by its Pods.
/// Pods owned by none of them (being adopted, or orphaned) come last.
pub fn rows(deployment: &Deployment, replicasets: &[ReplicaSet], pods: &[Pod]) -> Vec<PodRow> {
    let uid = deployment.metadata.uid.as_deref();
    let owned_by = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, owner: Option<&str>| {
        meta.owner_references.iter().flatten().any(|reference| Some(reference.uid.as_str()) == owner)
    };
    let revision = |rs: &ReplicaSet| rs.annotations().get(REVISION).and_then(|r| r.parse::<i64>().ok()).unwrap_or(0);
    let mut owned: Vec<&ReplicaSet> = replicasets.iter().filter(|rs| owned_by(&rs.metadata, uid)).collect();
    owned.sort_by_key(|rs| std::cmp::Reverse(revision(rs)));
    let newest = owned.first().map(|rs| revision(rs));
    let mut out = Vec::new();
    let mut shown = std::collections::BTreeSet::new();
    for rs in owned {
        let status = rs.status.as_ref();
        let its_pods: Vec<&Pod> =
            pods.iter().filter(|pod| owned_by(&pod.metadata, rs.metadata.uid.as_deref())).collect();
        out.push(PodRow {
            kind: RowKind::ReplicaSet,
            name: rs.name_any(),
            status: if Some(revision(rs)) == newest { "current".into() } else { "old".into() },
            ready: format!(
                "{}/{}",
                status.and_then(|s| s.ready_replicas).unwrap_or(0),
                rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
            ),
            restarts: its_pods.iter().map(|pod| pod_row(pod).restarts).sum(),
            last_termination: None,
            secret: rs
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .and_then(|t| t.spec.as_ref())
                .and_then(vcap_secret),
            created: rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
            log_container: None,
        });
        for pod in its_pods {
            shown.insert(pod.name_any());
            out.push(pod_row(pod));
        }
    }
    let selector: Option<&std::collections::BTreeMap<String, String>> =
        deployment.spec.as_ref().and_then(|spec| spec.selector.match_labels.as_ref());
    for pod in pods.iter().filter(|pod| !shown.contains(&pod.name_any())) {
        let labels = pod.labels();
        if selector.is_some_and(|selector| selector.iter().all(|(k, v)| labels.get(k) == Some(v))) {
            out.push(pod_row(pod));
        }
    }
    out
}

/// The VCAP Secret a Pod template reads: the first `envFrom` Secret of its containers.
fn vcap_secret(spec: &PodSpec) -> Option<String> {
    spec.containers.iter().chain(spec.init_containers.iter().flatten()).find_map(|container| {
        container.env_from.iter().flatten().find_map(|source| source.secret_ref.as_ref().map(|s| s.name.clone()))
    })
}

fn pod_row(pod: &Pod) -> PodRow {
    let status = pod.status.as_ref();
    let containers: Vec<&k8s_openapi::api::core::v1::ContainerStatus> =
        status.and_then(|s| s.container_statuses.as_ref()).map(|c| c.iter().collect()).unwrap_or_default();
    let total = pod.spec.as_ref().map_or(containers.len(), |spec| spec.containers.len());
    let waiting = containers
        .iter()
        .find_map(|c| c.state.as_ref().and_then(|s| s.waiting.as_ref()).and_then(|w| w.reason.clone()));
    let worst = containers.iter().max_by_key(|c| c.restart_count);
    let first_container = pod.spec.as_ref().and_then(|spec| spec.containers.first()).map(|c| c.name.clone());
    PodRow {
        kind: RowKind::Pod,
        name: pod.name_any(),
        status: waiting.or_else(|| status.and_then(|s| s.phase.clone())).unwrap_or_else(|| {
            if pod.metadata.deletion_timestamp.is_some() { "Terminating" } else { "Pending" }.into()
        }),
        ready: format!("{}/{total}", containers.iter().filter(|c| c.ready).count()),
        restarts: containers.iter().map(|c| c.restart_count).sum(),
        last_termination: worst.and_then(|c| termination_text(c)),
        secret: None,
        created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
        log_container: worst.filter(|c| c.restart_count > 0).map(|c| c.name.clone()).or(first_container),
    }
}

/// Read the Deployment, its ReplicaSets and Pods (by its selector) and build the rows. Errors
/// say what could not be read and why (RBAC names the verb).
pub async fn fetch(client: &kube::Client, namespace: &str, deployment: &str) -> Result<Vec<PodRow>, String> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let live = deployments
        .get_opt(deployment)
        .await
        .map_err(|error| format!("cannot read Deployment {namespace}/{deployment}: {}", describe_error(&error)))?
        .ok_or_else(|| format!("Deployment {namespace}/{deployment} no longer exists"))?;
    let labels = live
        .spec
        .as_ref()
        .and_then(|spec| spec.selector.match_labels.as_ref())
        .map(|labels| labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","))
        .unwrap_or_default();
    if labels.is_empty() {
        return Err(format!(
            "Deployment {namespace}/{deployment} has no matchLabels selector; capdeck cannot find its Pods"
        ));
    }
    let params = ListParams::default().labels(&labels);
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    let replicasets = replicasets
        .list(&params)
        .await
        .map_err(|error| format!("cannot list ReplicaSets in {namespace}: {}", describe_error(&error)))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pods = pods
        .list(&params)
        .await
        .map_err(|error| format!("cannot list Pods in {namespace}: {}", describe_error(&error)))?;
    Ok(rows(&live, &replicasets.items, &pods.items))
}

/// Key names whose values are credentials (case-insensitive, anywhere in the name).
const SECRET_KEY_PARTS: &[&str] = &["secret", "password", "passwd", "token", "key", "certificate", "credential"];
/// Shorter values are not masked (they would mask ordinary words).
const MIN_MASKED: usize = 6;

/// Credential values in `secrets` (binding and VCAP Secrets): the values of keys that name a
/// secret, in the Secret's data and in JSON inside it (`VCAP_SERVICES`, `credentials`). A Pod
/// that logs its credentials is not a reason for capdeck to show them.
pub fn credential_values<'a>(secrets: impl IntoIterator<Item = &'a k8s_openapi::api::core::v1::Secret>) -> Vec<String> {
    fn secretish(key: &str) -> bool {
        let key = key.to_ascii_lowercase();
        SECRET_KEY_PARTS.iter().any(|part| key.contains(part))
    }
    // In JSON a string is a credential by its own key (`clientsecret`), not its container's
    // (`credentials` also holds `clientid` and `url`).
    fn walk(value: &serde_json::Value, secret_key: bool, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(text) if secret_key => out.push(text.clone()),
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    walk(value, secretish(key), out);
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|item| walk(item, secret_key, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for secret in secrets {
        for (key, value) in secret.data.iter().flatten() {
            let Ok(text) = String::from_utf8(value.0.clone()) else { continue };
            match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(json @ (serde_json::Value::Object(_) | serde_json::Value::Array(_))) => {
                    walk(&json, false, &mut out);
                }
                _ if secretish(key) => out.push(text),
                _ => {}
            }
        }
    }
    out.retain(|value| value.chars().count() >= MIN_MASKED);
    // Longest first, so a value that contains another is masked whole.
    out.sort_by_key(|value| std::cmp::Reverse(value.len()));
    out.dedup();
    out
}

/// `lines` with every one of `values` replaced by `•••`.
pub fn mask(lines: Vec<String>, values: &[String]) -> Vec<String> {
    lines
        .into_iter()
        .map(|line| {
            values.iter().fold(line, |line, value| {
                if line.contains(value.as_str()) { line.replace(value.as_str(), crate::output::MASK) } else { line }
            })
        })
        .collect()
}

/// The last `LOG_LINES` lines of a Pod's container, after checking `get pods/log` first (so a
/// user without it is told which permission is missing, not shown an API error).
pub async fn log(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    container: Option<&str>,
) -> Result<Vec<String>, String> {
    if !crate::cluster::can_i_subresource(client, "get", "", "pods", "log", Some(namespace)).await {
        return Err(format!(
            "you may not read Pod logs in {namespace} (RBAC: get pods/log); ask for it, or use kubectl logs where you can"
        ));
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params =
        LogParams { container: container.map(str::to_string), tail_lines: Some(LOG_LINES), ..LogParams::default() };
    let text = pods
        .logs(pod, &params)
        .await
        .map_err(|error| format!("cannot read the log of Pod {namespace}/{pod}: {}", describe_error(&error)))?;
    Ok(text.lines().map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn owner(uid: &str) -> Value {
        json!([{"apiVersion": "apps/v1", "kind": "X", "name": "x", "uid": uid, "controller": true}])
    }

    fn rs(name: &str, uid: &str, revision: &str, secret: &str, ready: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": uid, "ownerReferences": owner("d-uid"),
                         "annotations": {REVISION: revision}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "srv"}},
                     "template": {"spec": {"containers": [{"name": "main", "envFrom": [{"secretRef": {"name": secret}}]}]}}},
            "status": {"replicas": 2, "readyReplicas": ready},
        }))
        .expect("rs")
    }

    fn pod(name: &str, rs_uid: &str, status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "srv"}, "ownerReferences": owner(rs_uid)},
            "spec": {"containers": [{"name": "main"}, {"name": "sidecar"}]},
            "status": status,
        }))
        .expect("pod")
    }

    /// A Pod that logs its credentials: the values of secret-named keys (flat, in JSON, in
    /// VCAP_SERVICES) are masked; URLs, names and short values stay readable.
    #[test]
    fn credential_values_in_log_lines_are_masked() {
        let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
            "metadata": {"name": "uaa"},
            "data": {
                "clientsecret": base64("s3cr3t-value-1"),
                "url": base64("https://uaa.example.com"),
                "credentials": base64(r#"{"uaa": {"clientsecret": "nested-secret-2", "clientid": "sb-app"}, "password": "pw-123456"}"#),
                "key": base64("abc"),
            },
        }))
        .expect("secret");
        let values = credential_values([&secret]);
        assert_eq!(values, ["nested-secret-2", "s3cr3t-value-1", "pw-123456"]);
        let lines = vec![
            "VCAP: clientsecret=s3cr3t-value-1 url=https://uaa.example.com".to_string(),
            r#"{"clientsecret":"nested-secret-2","password":"pw-123456","clientid":"sb-app"}"#.to_string(),
        ];
        assert_eq!(
            mask(lines, &values),
            [
                "VCAP: clientsecret=••• url=https://uaa.example.com",
                r#"{"clientsecret":"•••","password":"•••","clientid":"sb-app"}"#,
            ]
        );
    }

    fn base64(text: &str) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    /// Newest ReplicaSet first with the VCAP Secret it reads; a crash-looping Pod says why and
    /// how its container last ended, and `l` would read that container.
    #[test]
    fn replicasets_newest_first_with_their_pods_and_why_they_fail() {
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "srv", "uid": "d-uid"},
            "spec": {"selector": {"matchLabels": {"app": "srv"}}, "template": {}},
        }))
        .expect("deployment");
        let old = rs("srv-6c4", "rs-old", "3", "srv-vcap-old", 2);
        let new = rs("srv-7d9", "rs-new", "4", "srv-vcap-new", 0);
        let crash = json!({"phase": "Running", "containerStatuses": [
            {"name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 4,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}},
            {"name": "sidecar", "image": "i", "imageID": "", "ready": true, "restartCount": 0}]});
        let fine = json!({"phase": "Running", "containerStatuses": [
            {"name": "main", "image": "i", "imageID": "", "ready": true, "restartCount": 0},
            {"name": "sidecar", "image": "i", "imageID": "", "ready": true, "restartCount": 0}]});
        let pods = [pod("srv-6c4-a", "rs-old", fine), pod("srv-7d9-b", "rs-new", crash)];
        let rows = rows(&deployment, &[old, new], &pods);
        let summary: Vec<(RowKind, &str, &str, &str, i32)> =
            rows.iter().map(|r| (r.kind, r.name.as_str(), r.status.as_str(), r.ready.as_str(), r.restarts)).collect();
        assert_eq!(
            summary,
            [
                (RowKind::ReplicaSet, "srv-7d9", "current", "0/2", 4),
                (RowKind::Pod, "srv-7d9-b", "CrashLoopBackOff", "1/2", 4),
                (RowKind::ReplicaSet, "srv-6c4", "old", "2/2", 0),
                (RowKind::Pod, "srv-6c4-a", "Running", "2/2", 0),
            ]
        );
        assert_eq!(rows[0].secret.as_deref(), Some("srv-vcap-new"));
        assert_eq!(rows[1].last_termination.as_deref(), Some("Error (exit code 1)"));
        assert_eq!(rows[1].log_container.as_deref(), Some("main"));
        assert_eq!(rows[3].log_container.as_deref(), Some("main"), "no restarts: the first container");
    }
}
