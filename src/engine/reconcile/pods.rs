//! Failure-aware pacing: the Pods of a Deployment's new ReplicaSet (those whose containers read
//! the batch's new VCAP Secret) tell that a rollout fails long before its progress deadline.
//! Pure: the reconciler lists the Pods (only while the Deployment rolls) and asks here.

use crate::api::container::termination_text;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;

use crate::api::go_duration::humanize;

/// Waiting reasons that do not heal by waiting.
const BROKEN: &[&str] = &[
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];
/// Restarts of one container after which its Pod counts as failing.
pub const MAX_RESTARTS: i32 = 3;

/// Whether `pod` belongs to the rollout: a container or initContainer reads `secret` through
/// `envFrom` (the new ReplicaSet's template does; the old one's does not).
pub fn reads_secret(pod: &Pod, secret: &str) -> bool {
    let Some(spec) = &pod.spec else { return false };
    spec.containers.iter().chain(spec.init_containers.iter().flatten()).any(|container| {
        container
            .env_from
            .iter()
            .flatten()
            .any(|source| source.secret_ref.as_ref().is_some_and(|secret_ref| secret_ref.name == secret))
    })
}

/// Whether `pod` is one the deployment controller made for `deployment`: its controller is the
/// ReplicaSet `<deployment>-<pod-template-hash>` its own label names. A Pod someone else created
/// with the Deployment's labels (a user who may create Pods, not edit the Deployment) does not
/// speak for the rollout; a forged ownerReference is the garbage collector's (an owner that does
/// not exist) or the ReplicaSet controller's (one Pod too many, an unready one deleted first).
pub fn made_for(pod: &Pod, deployment: &str) -> bool {
    let Some(hash) = pod.metadata.labels.as_ref().and_then(|labels| labels.get("pod-template-hash")) else {
        return false;
    };
    let expected = format!("{deployment}-{hash}");
    pod.metadata.owner_references.iter().flatten().any(|owner| {
        owner.controller == Some(true)
            && owner.kind == "ReplicaSet"
            && owner.api_version == "apps/v1"
            && owner.name == expected
    })
}

/// Why the new Pods fail, naming the Pod, the container and its last termination reason; `None`
/// while they look healthy or merely slow.
pub fn pod_failure(pods: &[&Pod], now: Timestamp, readiness_timeout: Duration) -> Option<String> {
    pods.iter().find_map(|pod| {
        let name = pod.metadata.name.as_deref().unwrap_or("?");
        let status = pod.status.as_ref()?;
        let containers =
            status.container_statuses.iter().flatten().chain(status.init_container_statuses.iter().flatten());
        for container in containers {
            let waiting = container.state.as_ref().and_then(|state| state.waiting.as_ref());
            if let Some(reason) = waiting.and_then(|w| w.reason.as_deref()).filter(|r| BROKEN.contains(r)) {
                return Some(format!(
                    "Pod {name}: container {} {reason}{}",
                    container.name,
                    last_termination(container)
                ));
            }
            if container.restart_count >= MAX_RESTARTS {
                return Some(format!(
                    "Pod {name}: container {} restarted {} times{}",
                    container.name,
                    container.restart_count,
                    last_termination(container)
                ));
            }
        }
        let not_ready_since = status
            .conditions
            .iter()
            .flatten()
            .find(|condition| condition.type_ == "Ready" && condition.status == "False")
            .and_then(|condition| condition.last_transition_time.as_ref())
            .map(|time| time.0)?;
        let started = status.start_time.as_ref().map_or(not_ready_since, |time| time.0.max(not_ready_since));
        let waited = now.duration_since(started);
        let waited = Duration::try_from(waited).unwrap_or_default();
        (waited > readiness_timeout).then(|| {
            format!(
                "Pod {name}: not ready for {} (readiness timeout {})",
                humanize(waited),
                humanize(readiness_timeout)
            )
        })
    })
}

/// What the new Pods of a rolling Deployment say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NewPods {
    /// Healthy, or merely slow.
    Fine,
    /// Waiting on something outside them: why (kube-scheduler found no node).
    Waiting(String),
    /// Failing: why (`pod_failure`).
    Failing(String),
}

/// How the new Pods of a rolling Deployment stand: failing (`pod_failure`), waiting for a node
/// (kube-scheduler's own words), or fine.
pub fn judge_new_pods(pods: &[&Pod], now: Timestamp, readiness_timeout: Duration) -> NewPods {
    // What a kubelet (or whoever may write a Pod's status) says is kept bounded and without
    // control characters wherever it is copied (the batch's record, its condition, logs).
    let clean = |text: String| crate::api::common::bounded(&text, MAX_POD_TEXT).into_owned();
    if let Some(failure) = pod_failure(pods, now, readiness_timeout) {
        return NewPods::Failing(clean(failure));
    }
    pods.iter().find_map(|pod| unscheduled(pod)).map(clean).map_or(NewPods::Fine, NewPods::Waiting)
}

/// The longest text about a Pod kept (a failure, or the scheduler's reason with its Pod's name).
const MAX_POD_TEXT: usize = 512;

/// The longest scheduler message kept (it lists every node group's reason).
const MAX_SCHEDULER_MESSAGE: usize = 300;

/// `Pod web-7d9-x2k4p unschedulable: 0/3 nodes are available: …` while kube-scheduler finds no
/// node for it (condition `PodScheduled` False).
fn unscheduled(pod: &Pod) -> Option<String> {
    let condition = pod
        .status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|condition| condition.type_ == "PodScheduled" && condition.status == "False")?;
    let reason = condition.reason.as_deref().unwrap_or("not scheduled");
    let mut message = condition.message.clone().unwrap_or_default();
    if message.len() > MAX_SCHEDULER_MESSAGE {
        let mut end = MAX_SCHEDULER_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    let what = if reason == "Unschedulable" { "unschedulable".to_string() } else { reason.to_string() };
    Some(if message.is_empty() { format!("Pod {name} {what}") } else { format!("Pod {name} {what}: {message}") })
}

/// `; last terminated: Error (exit code 1)`, when the container has terminated before.
fn last_termination(container: &ContainerStatus) -> String {
    termination_text(container).map(|text| format!("; last terminated: {text}")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const NOW: &str = "2026-11-23T12:00:00Z";

    fn pod(secret: &str, status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "srv-7d9-x2k4p"},
            "spec": {"containers": [{"name": "main", "image": "i", "envFrom": [{"secretRef": {"name": secret}}]}]},
            "status": status,
        }))
        .expect("pod")
    }

    fn container(state: Value, restarts: i32, last: Value) -> Value {
        json!({"name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": restarts,
               "state": state, "lastState": last})
    }

    fn failure(status: Value) -> Option<String> {
        let pod = pod("srv-vcap-new", status);
        pod_failure(&[&pod], NOW.parse().expect("now"), Duration::from_secs(300))
    }

    /// Whatever wrote the Pod's status, its words reach the record bounded and without control
    /// characters (a terminal escape in a termination reason).
    #[test]
    fn what_a_pod_says_is_bounded_and_clean() {
        let reason = format!("\u{1b}]0;PWNED\u{7}\u{1b}[2J{}", "x".repeat(2000));
        let status = json!({"containerStatuses": [container(
            json!({"waiting": {"reason": "CrashLoopBackOff"}}), 4,
            json!({"terminated": {"reason": reason, "exitCode": 1}}))]});
        let pod = pod("srv-vcap-new", status);
        let NewPods::Failing(text) = judge_new_pods(&[&pod], NOW.parse().expect("now"), Duration::from_secs(300))
        else {
            panic!("a crash loop fails");
        };
        assert!(text.starts_with("Pod srv-7d9-x2k4p: container main CrashLoopBackOff; last terminated: "), "{text}");
        assert!(!text.chars().any(|c| c.is_control()), "{text:?}");
        assert!(text.chars().count() <= MAX_POD_TEXT + 1, "{}", text.len());
    }

    /// Only the Pods the deployment controller made for the Deployment speak for its rollout: a
    /// Pod with its labels and its new Secret that someone else created (no owner, another owner,
    /// an owner of another name, no template hash) does not.
    #[test]
    fn only_the_deployments_own_pods_speak_for_its_rollout() {
        let rs = |name: &str, controller: bool| json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "uid": "u", "controller": controller}]);
        let cases = [
            ("made by its ReplicaSet", Some("7d9"), rs("srv-7d9", true), true),
            ("no owner", Some("7d9"), json!([]), false),
            ("not the controller", Some("7d9"), rs("srv-7d9", false), false),
            ("a ReplicaSet of another name", Some("7d9"), rs("other-7d9", true), false),
            ("a hash that is not its owner's", Some("abc"), rs("srv-7d9", true), false),
            ("no template hash", None, rs("srv-7d9", true), false),
            (
                "a Job of that name",
                Some("7d9"),
                json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "srv-7d9", "uid": "u", "controller": true}]),
                false,
            ),
        ];
        for (name, hash, owners, expected) in cases {
            let mut pod = pod("srv-vcap-new", json!({}));
            pod.metadata.labels = hash.map(|hash| [("pod-template-hash".to_string(), hash.to_string())].into());
            pod.metadata.owner_references = serde_json::from_value(owners).expect("owners");
            assert_eq!(made_for(&pod, "srv"), expected, "{name}");
        }
    }

    /// kube-scheduler's reason is the Deployment's message while it waits (truncated, and on a
    /// character boundary); a failure wins over it.
    #[test]
    fn an_unschedulable_new_pod_says_the_schedulers_reason() {
        let now: Timestamp = NOW.parse().expect("now");
        let pending = pod(
            "srv-vcap-new",
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
            "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match Pod's node affinity/selector."}]}),
        );
        assert_eq!(
            judge_new_pods(&[&pending], now, Duration::from_secs(300)),
            NewPods::Waiting(
                "Pod srv-7d9-x2k4p unschedulable: 0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) \
                 didn't match Pod's node affinity/selector."
                    .into()
            )
        );
        let long = pod(
            "srv-vcap-new",
            json!({"conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "é".repeat(400)}]}),
        );
        let NewPods::Waiting(said) = judge_new_pods(&[&long], now, Duration::from_secs(300)) else { panic!("waiting") };
        assert!(said.ends_with('…') && said.len() < 400, "{said}");
        let crashing = pod(
            "srv-vcap-new",
            json!({"containerStatuses": [container(json!({"waiting": {"reason": "CrashLoopBackOff"}}), 1, json!({}))]}),
        );
        assert!(matches!(judge_new_pods(&[&pending, &crashing], now, Duration::from_secs(300)), NewPods::Failing(_)));
        assert_eq!(judge_new_pods(&[], now, Duration::from_secs(300)), NewPods::Fine);
    }

    #[test]
    fn which_pods_belong_to_the_rollout() {
        assert!(reads_secret(&pod("srv-vcap-new", json!({})), "srv-vcap-new"));
        assert!(!reads_secret(&pod("srv-vcap-old", json!({})), "srv-vcap-new"));
    }

    #[test]
    fn failing_signals() {
        let crashed = json!({"terminated": {"exitCode": 1, "reason": "Error"}});
        let cases: &[(&str, Value, Option<&str>)] = &[
            (
                "crash loop, with why it last died",
                json!({"containerStatuses": [container(json!({"waiting": {"reason": "CrashLoopBackOff"}}), 2, crashed.clone())]}),
                Some("Pod srv-7d9-x2k4p: container main CrashLoopBackOff; last terminated: Error (exit code 1)"),
            ),
            (
                "an image that cannot be pulled",
                json!({"containerStatuses": [container(json!({"waiting": {"reason": "ImagePullBackOff"}}), 0, json!({}))]}),
                Some("Pod srv-7d9-x2k4p: container main ImagePullBackOff"),
            ),
            (
                "restarted three times, running now",
                json!({"containerStatuses": [container(json!({"running": {}}), 3, crashed.clone())]}),
                Some("Pod srv-7d9-x2k4p: container main restarted 3 times; last terminated: Error (exit code 1)"),
            ),
            (
                "not ready for 6 minutes",
                json!({"startTime": "2026-11-23T11:54:00Z", "conditions": [
                    {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-23T11:54:00Z"}]}),
                Some("Pod srv-7d9-x2k4p: not ready for 6m (readiness timeout 5m)"),
            ),
            (
                "not ready for 2 minutes: just slow",
                json!({"startTime": "2026-11-23T11:58:00Z", "conditions": [
                    {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-23T11:58:00Z"}]}),
                None,
            ),
            (
                "creating its container: healthy so far",
                json!({"containerStatuses": [container(json!({"waiting": {"reason": "ContainerCreating"}}), 0, json!({}))]}),
                None,
            ),
            ("no status yet", json!({}), None),
        ];
        for (name, status, expected) in cases {
            assert_eq!(failure(status.clone()).as_deref(), *expected, "{name}");
        }
    }
}
