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
