//! Rollout progress of a Deployment with `kubectl rollout status` semantics.

use crate::api::DeploymentView;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    Rolling,
    Complete,
    /// `Progressing` condition with reason `ProgressDeadlineExceeded`.
    Stalled,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolloutProgress {
    pub progress: Progress,
    pub message: String,
    pub replicas: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
}

/// What `kubectl rollout status` would say, in its order of checks.
pub fn rollout_progress(deployment: &DeploymentView) -> RolloutProgress {
    let name = deployment.metadata.name.as_deref().unwrap_or("deployment");
    let wanted = deployment.spec.as_ref().and_then(|spec| spec.replicas).unwrap_or(1);
    let status = deployment.status.clone().unwrap_or_default();
    let generation = deployment.metadata.generation.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    let replicas = status.replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    let result = |progress, message: String| RolloutProgress {
        progress,
        message,
        replicas: wanted,
        updated,
        ready: status.ready_replicas.unwrap_or(0),
        available,
    };
    if status.observed_generation.unwrap_or(0) < generation {
        // The counts are the previous template's: none of the new one is updated yet.
        let mut waiting = result(Progress::Rolling, "waiting for the deployment spec update to be observed".into());
        waiting.updated = 0;
        return waiting;
    }
    let stalled = status.conditions.iter().flatten().any(|condition| {
        condition.type_ == "Progressing" && condition.reason.as_deref() == Some("ProgressDeadlineExceeded")
    });
    if stalled {
        return result(Progress::Stalled, format!("deployment {name} exceeded its progress deadline"));
    }
    // Paused, the controller rolls nothing and keeps no deadline: say who can move it on.
    let paused = deployment.spec.as_ref().and_then(|spec| spec.paused).unwrap_or(false);
    // With its namespace: the line is read from every namespace's rows (`-A`, the console).
    let namespace = deployment.metadata.namespace.as_deref().map(|ns| format!(" -n {ns}")).unwrap_or_default();
    if paused && (updated < wanted || replicas > updated || available < updated) {
        return result(
            Progress::Rolling,
            format!(
                "paused (spec.paused): {updated} of {wanted} replicas run the new template; `kubectl rollout resume \
                 deployment/{name}{namespace}` lets it roll"
            ),
        );
    }
    if updated < wanted {
        return result(Progress::Rolling, format!("{updated} of {wanted} new replicas have been updated"));
    }
    if replicas > updated {
        return result(Progress::Rolling, format!("{} old replicas are pending termination", replicas - updated));
    }
    if available < updated {
        return result(Progress::Rolling, format!("{available} of {updated} updated replicas are available"));
    }
    result(Progress::Complete, "successfully rolled out".into())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(generation: i64, replicas: i32, status: serde_json::Value) -> DeploymentView {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop", "generation": generation},
            "spec": {"replicas": replicas, "selector": {}, "template": {}},
            "status": status,
        }))
        .expect("deployment")
    }

    #[test]
    fn follows_kubectl_order() {
        let cases = [
            (json!({"observedGeneration": 1}), Progress::Rolling, "spec update to be observed"),
            (
                json!({"observedGeneration": 2, "updatedReplicas": 1, "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
                Progress::Stalled,
                "exceeded its progress deadline",
            ),
            (
                json!({"observedGeneration": 2, "updatedReplicas": 1, "replicas": 4}),
                Progress::Rolling,
                "1 of 3 new replicas",
            ),
            (
                json!({"observedGeneration": 2, "updatedReplicas": 3, "replicas": 4}),
                Progress::Rolling,
                "1 old replicas are pending",
            ),
            (
                json!({"observedGeneration": 2, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 2}),
                Progress::Rolling,
                "2 of 3 updated replicas",
            ),
            (
                json!({"observedGeneration": 2, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 3}),
                Progress::Complete,
                "successfully rolled out",
            ),
        ];
        for (status, progress, message) in cases {
            let result = rollout_progress(&deployment(2, 3, status));
            assert_eq!(result.progress, progress, "{}", result.message);
            assert!(result.message.contains(message), "{}", result.message);
        }
    }

    /// Before the controller observed the new spec, its counts are the previous template's: the
    /// real controller showed `updated 4 of 4` at that moment (a console once drew it as done).
    #[test]
    fn counts_from_before_the_spec_was_observed_are_not_the_new_templates() {
        let stale = json!({"observedGeneration": 1, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 3});
        let result = rollout_progress(&deployment(2, 3, stale));
        assert_eq!((result.progress, result.updated, result.available), (Progress::Rolling, 0, 3));
    }

    /// A paused Deployment rolls nothing until resumed (and keeps no deadline): capdeck says so
    /// and how to resume it, instead of counting replicas that will not come.
    #[test]
    fn a_paused_deployment_says_how_to_resume_it() {
        let mut paused = deployment(
            2,
            3,
            json!({"observedGeneration": 2, "updatedReplicas": 0, "replicas": 3,
                                                 "availableReplicas": 3}),
        );
        paused.spec.as_mut().expect("spec").paused = Some(true);
        let result = rollout_progress(&paused);
        assert_eq!(result.progress, Progress::Rolling);
        assert_eq!(
            result.message,
            "paused (spec.paused): 0 of 3 replicas run the new template; `kubectl rollout resume deployment/web -n \
             shop` lets it roll"
        );
        // Paused after it rolled out: nothing to wait for.
        let mut done = deployment(
            2,
            3,
            json!({"observedGeneration": 2, "updatedReplicas": 3, "replicas": 3,
                                               "availableReplicas": 3}),
        );
        done.spec.as_mut().expect("spec").paused = Some(true);
        assert_eq!(rollout_progress(&done).progress, Progress::Complete);
    }

    #[test]
    fn missing_replicas_means_one_and_missing_status_is_rolling() {
        let deployment: DeploymentView = serde_json::from_value(
            json!({"metadata": {"name": "x", "generation": 1}, "spec": {"selector": {}, "template": {}}}),
        )
        .expect("d");
        let result = rollout_progress(&deployment);
        assert_eq!(result.progress, Progress::Rolling);
        assert_eq!(result.replicas, 1);
    }
}
