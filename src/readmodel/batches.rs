//! The batches view's rows: each RotationBatch with its phase, progress and credential deadline,
//! and what it is doing as people say it (`Waiting · opens in 3h12m`), for the console and
//! `capdeck batches` alike.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::rotation_batch::DeploymentAction;
use crate::api::service_binding::ServiceBinding;
use crate::api::{BatchPhase, RotationBatch};

use super::{Index, key};

pub use crate::api::rotation_batch::BatchState;
pub use crate::api::rotation_batch::state::Relative;

/// Where a batch's collection window stands at a moment: it counts down only while the batch
/// still collects. A forced batch, or one that went on early (its old credentials expiring),
/// ended its window before `spec.windowEnd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectionWindow {
    /// Still collecting (or held while collecting): ends then.
    Ends(Timestamp),
    /// Ended then.
    Ended(Timestamp),
    /// Forced to end then.
    Forced(Timestamp),
    /// Ended before `spec.windowEnd`, when is not recorded.
    EndedEarly,
}

impl CollectionWindow {
    pub fn of(batch: &RotationBatch, now: Timestamp) -> Self {
        let end = batch.spec.window_end.0;
        // A force ends the window when it comes while the window is open; one that comes after
        // the window ended (a batch waiting for an approval, a window, a freeze) ended nothing.
        if let Some(force) = batch.spec.force.as_ref().filter(|force| force.at.0 < end) {
            return Self::Forced(force.at.0);
        }
        if end <= now {
            return Self::Ended(end);
        }
        let evaluated =
            batch.status.as_ref().is_some_and(|s| !s.deployments.is_empty() || s.rollout_started_at.is_some());
        match batch.phase() {
            BatchPhase::Collecting => Self::Ends(end),
            BatchPhase::Held if !evaluated => Self::Ends(end),
            _ => Self::EndedEarly,
        }
    }

    /// `ends in 4m`, `ended 2m ago`, `forced 2m ago`, `ended early`.
    pub fn text(self, now: Timestamp, relative: Relative<'_>) -> String {
        let ago = |at: Timestamp| relative(now.as_second() - at.as_second());
        match self {
            Self::Ends(at) => format!("ends in {}", relative(at.as_second() - now.as_second())),
            Self::Ended(at) => format!("ended {} ago", ago(at)),
            Self::Forced(at) => format!("forced {} ago", ago(at)),
            Self::EndedEarly => "ended early".into(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct BatchRow {
    pub namespace: String,
    pub name: String,
    pub application: String,
    pub phase: BatchPhase,
    /// The phase as people say it, with what the batch waits for.
    pub state: BatchState,
    pub reason: String,
    pub message: String,
    pub window_end: Timestamp,
    pub secrets: Vec<String>,
    pub approval: String,
    pub progress: String,
    pub tenants: Option<u32>,
    /// Deployments to restart: counted from the status once evaluated, else the application's
    /// Deployments of versions in use (an upper bound while the window is open).
    pub deployments: Deployments,
    pub created: Option<Timestamp>,
    /// An open batch's deadline: the earliest revocation of its Secrets' old credentials
    /// (ServiceBindings; `None` when unknown).
    pub old_credentials_revocable: Option<Timestamp>,
    pub object: Arc<RotationBatch>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deployments {
    Evaluated(usize),
    AtMost(usize),
}

impl BatchRow {
    /// `4 deployments, 12 tenants`, or `≤4 deployments` before the batch is evaluated.
    pub fn blast_radius(&self) -> String {
        let deployments = match self.deployments {
            Deployments::Evaluated(n) => crate::output::count(n, "deployment"),
            Deployments::AtMost(n) => format!("≤{}", crate::output::count(n, "deployment")),
        };
        match self.tenants {
            Some(tenants) => format!("{deployments}, {}", crate::output::count(tenants as usize, "tenant")),
            None => deployments,
        }
    }
}

pub(super) fn batch_rows(
    batches: &[Arc<RotationBatch>],
    index: &Index,
    service_bindings: Option<&[ServiceBinding]>,
) -> Vec<BatchRow> {
    let mut batch_rows: Vec<BatchRow> = batches
        .iter()
        .map(|batch| {
            let status = batch.status.clone().unwrap_or_default();
            let (reason, message) = batch.ready_note().unwrap_or_default();
            BatchRow {
                namespace: batch.namespace().unwrap_or_default(),
                name: batch.name_any(),
                application: batch.spec.application.clone(),
                phase: batch.phase(),
                state: BatchState::of(batch),
                reason,
                message,
                window_end: batch.spec.window_end.0,
                secrets: batch.spec.secrets.iter().map(|s| s.name.clone()).collect(),
                approval: batch.approval_text(),
                progress: batch.progress_text(),
                tenants: status.tenants,
                deployments: if status.deployments.is_empty() {
                    Deployments::AtMost(index.deployments_in_use(&key(batch.namespace(), &batch.spec.application)))
                } else {
                    Deployments::Evaluated(
                        status.deployments.iter().filter(|d| d.action == DeploymentAction::Restart).count(),
                    )
                },
                created: batch.metadata.creation_timestamp.as_ref().map(|t| t.0),
                old_credentials_revocable: service_bindings
                    .filter(|_| !batch.is_terminal())
                    .and_then(|bindings| crate::credentials::batch_revocation(bindings, batch)),
                object: batch.clone(),
            }
        })
        .collect();
    // Open batches first, newest first.
    batch_rows.sort_by(|a, b| {
        a.phase
            .is_terminal()
            .cmp(&b.phase.is_terminal())
            .then_with(|| b.window_end.cmp(&a.window_end))
            .then_with(|| a.name.cmp(&b.name))
    });
    batch_rows
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    /// A batch of bookshop in `phase` with `reason`; `spec` and `status` add fields.
    fn batch(phase: &str, reason: &str, spec: serde_json::Value, status: serde_json::Value) -> RotationBatch {
        use crate::api::rotation_batch::testing;
        let mut overrides = json!({
            "metadata": {"name": "bookshop-x7k2p", "namespace": "cap-shop"},
            "spec": {"application": "bookshop", "windowEnd": "2026-11-20T09:05:00Z"},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "False", "reason": reason,
                        "message": "", "lastTransitionTime": "2026-11-20T08:00:00Z"}]},
        });
        testing::merge(&mut overrides, json!({"spec": spec, "status": status}));
        testing::batch(overrides)
    }

    /// Every state a window or a freeze gives a batch, as `capdeck batches` words it (kubectl's
    /// ages); the phase alone where nothing is waited for.
    #[test]
    fn the_state_says_what_a_batch_waits_for() {
        let now = at("2026-11-20T09:00:00Z");
        let until = |time: &str| json!({"waitingUntil": time});
        let none = json!({});
        let table: [(&str, RotationBatch, &str); 11] = [
            (
                "outside the windows: the next opening",
                batch("Waiting", "OutsideChangeWindow", none.clone(), until("2026-11-20T12:12:00Z")),
                "Waiting · outside window, opens in 3h12m",
            ),
            (
                "frozen: until the batch may start",
                batch("Waiting", "Frozen", none.clone(), until("2026-11-22T13:00:00Z")),
                "Frozen · until in 2d4h",
            ),
            (
                "the window closed mid-rollout: the rest resumes",
                batch("Waiting", "ChangeWindowClosed", none.clone(), until("2026-11-20T21:00:00Z")),
                "Waiting · window closed, resumes in 12h",
            ),
            (
                "an opening already past: the engine moves it on next",
                batch("Waiting", "OutsideChangeWindow", none.clone(), until("2026-11-20T08:59:00Z")),
                "Waiting · outside window, opening now",
            ),
            (
                "a freeze already over",
                batch("Waiting", "Frozen", none.clone(), until("2026-11-20T09:00:00Z")),
                "Frozen · ending now",
            ),
            (
                "waiting, no time recorded",
                batch("Waiting", "OutsideChangeWindow", none.clone(), none.clone()),
                "Waiting · outside window",
            ),
            (
                "a reason this capdeck does not know: the time alone",
                batch("Waiting", "SomethingNew", none.clone(), until("2026-11-20T09:30:00Z")),
                "Waiting · until in 30m",
            ),
            (
                "escalated: the next window opens too late",
                batch("AwaitingApproval", "DeadlineBeforeChangeWindow", none.clone(), none.clone()),
                "AwaitingApproval · escalated: window too late",
            ),
            (
                "escalated: the freeze ends too late",
                batch("AwaitingApproval", "DeadlineDuringFreeze", none.clone(), none.clone()),
                "AwaitingApproval · escalated: freeze too long",
            ),
            (
                "unreadable windows hold the batch",
                batch("Held", "ChangeWindowUnreadable", none.clone(), none.clone()),
                "Held · change windows unreadable",
            ),
            (
                "a plain approval: the phase alone",
                batch("AwaitingApproval", "AwaitingApproval", none.clone(), none),
                "AwaitingApproval",
            ),
        ];
        for (what, batch, expected) in table {
            assert_eq!(BatchState::of(&batch).text(now, &crate::output::human_duration), expected, "{what}");
        }
    }

    /// The collection window counts down only while the batch collects: never after a force,
    /// once the batch went on early, or once it is over.
    #[test]
    fn the_window_counts_down_only_while_collecting() {
        let now = at("2026-11-20T09:00:00Z");
        let forced = json!({"force": {"by": "bob", "at": "2026-11-20T08:58:00Z"}});
        let rolling =
            json!({"deployments": [{"name": "srv", "version": "v1", "workload": "srv", "action": "Restart"}]});
        let none = json!({});
        let table: [(&str, RotationBatch, &str); 6] = [
            ("collecting", batch("Collecting", "WindowOpen", none.clone(), none.clone()), "ends in 5m"),
            ("held while collecting", batch("Held", "Held", none.clone(), none.clone()), "ends in 5m"),
            (
                "forced, then rolled out",
                batch("Succeeded", "RolloutComplete", forced.clone(), none.clone()),
                "forced 2m ago",
            ),
            ("forced and rolling", batch("RollingOut", "Forced", forced, rolling.clone()), "forced 2m ago"),
            (
                "went on before its end (credentials expiring)",
                batch("RollingOut", "CredentialsExpiring", none.clone(), rolling),
                "ended early",
            ),
            ("cancelled while collecting", batch("Cancelled", "Cancelled", none.clone(), none), "ended early"),
        ];
        for (what, batch, expected) in table {
            assert_eq!(CollectionWindow::of(&batch, now).text(now, &crate::output::human_duration), expected, "{what}");
        }
        let ended = batch("Waiting", "OutsideChangeWindow", json!({}), json!({}));
        let later = at("2026-11-20T09:07:00Z");
        assert_eq!(CollectionWindow::of(&ended, later).text(later, &crate::output::human_duration), "ended 2m ago");
        // Forced 7 s ago, after the window had ended (it waited for an approval): the force ended
        // nothing, and its clock does not run from the window's end.
        let late = json!({"force": {"by": "bob", "at": "2026-11-20T09:06:53Z"}});
        let forced_late = batch("RollingOut", "Forced", late, json!({}));
        assert_eq!(
            CollectionWindow::of(&forced_late, later).text(later, &crate::output::human_duration),
            "ended 2m ago"
        );
    }

    #[test]
    fn an_escalation_says_what_the_approval_is_for() {
        let escalated = |reason: &str| batch("AwaitingApproval", reason, json!({}), json!({})).approval_text();
        assert_eq!(escalated("DeadlineBeforeChangeWindow"), "required: window too late");
        assert_eq!(escalated("DeadlineDuringFreeze"), "required: freeze too long");
        assert_eq!(escalated("AwaitingApproval"), "required");
        let approved = batch(
            "AwaitingApproval",
            "DeadlineBeforeChangeWindow",
            json!({"approval": {"required": true, "approvedBy": "carol"}}),
            json!({}),
        );
        assert_eq!(approved.approval_text(), "approved by carol", "once approved, who approved");
    }
}
