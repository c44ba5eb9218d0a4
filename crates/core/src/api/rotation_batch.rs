//! `RotationBatch` (`capdeck.dev/v1alpha1`, short name `rb`): a pending credential rotation of
//! one CAPApplication, its approval and its rollout, stored in the cluster so that consoles and
//! daemons share it, approvals survive restarts and RBAC decides who may approve.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::Condition;
use super::string_enum::string_enum;

pub const GROUP: &str = "capdeck.dev";
pub const VERSION: &str = "v1alpha1";

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "capdeck.dev",
    version = "v1alpha1",
    kind = "RotationBatch",
    namespaced,
    status = "RotationBatchStatus",
    shortname = "rb",
    derive = "PartialEq",
    doc = "RotationBatch: rotated credentials of one CAPApplication, collected in a window, approved and rolled out",
    printcolumn = r#"{"name":"Application","type":"string","jsonPath":".spec.application"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Window End","type":"string","jsonPath":".spec.windowEnd"}"#,
    printcolumn = r#"{"name":"Deployments","type":"string","jsonPath":".status.progress"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RotationBatchSpec {
    /// The CAPApplication (same namespace).
    pub application: String,
    /// The rotated binding Secrets collected in this window.
    #[serde(default)]
    pub secrets: Vec<RotatedSecret>,
    /// The window is fixed at creation: later rotations join, they do not extend it.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self < timestamp('2200-01-01T00:00:00Z')", "message": "must be before the year 2200"}]))]
    pub window_end: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// Skip the rest of the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<UserAction>,
    /// Frozen until released (release clears this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<UserAction>,
    /// The last release of a hold: who, when and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<UserAction>,
    /// Abandoned: nothing more is rolled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<UserAction>,
    /// Roll the Deployments that stalled, fail or failed once more (a Failed or halted batch).
    /// Handled once per `at` (`status.retriedAt`); a later retry is a new request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<UserAction>,
    /// Point every Deployment the batch rolled but did not complete back at the VCAP Secret it
    /// used before (a Failed or halted batch); the batch ends `Undone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo: Option<UserAction>,
    /// The Undone or Cancelled batch of the same application a person asked to roll forward
    /// (`capdeck retry` on it), when that request opened this batch; set by the engine at
    /// creation. That batch's `spec.retry` (the person's, as the admission policy keeps it) is
    /// taken as an approval of the storm guard for what was rolled before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub rolls_forward: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotatedSecret {
    pub name: String,
    /// The CAPApplication service name(s) that use this Secret, comma separated.
    pub service: String,
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self < timestamp('2200-01-01T00:00:00Z')", "message": "must be before the year 2200"}]))]
    pub rotated_at: Time,
    /// sha256 of the Secret's data (keys and values); never the data itself.
    pub data_hash: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// Set by the engine from the approval policy when the batch is created.
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = super::common::MAX_USER), regex(pattern = super::common::NO_NUL_PATTERN))]
    pub approved_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self < timestamp('2200-01-01T00:00:00Z')", "message": "must be before the year 2200"}]))]
    pub approved_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = super::common::MAX_REASON), regex(pattern = super::common::NO_NUL_PATTERN))]
    pub reason: Option<String>,
}

impl UserAction {
    /// `undone by bob: new credentials refused` (bounded: whoever may write the spec chose them).
    pub fn text(&self, verb: &str) -> String {
        use super::common::{MAX_REASON, MAX_USER, bounded};
        match &self.reason {
            Some(reason) if !reason.is_empty() => {
                format!("{verb} by {}: {}", bounded(&self.by, MAX_USER), bounded(reason, MAX_REASON))
            }
            _ => format!("{verb} by {}", bounded(&self.by, MAX_USER)),
        }
    }
}

impl Approval {
    /// Which approval this is (`alice@2026-11-27T10:00:05Z`), to tell it from one given again.
    pub fn key(&self) -> Option<String> {
        let by = self.approved_by.as_ref()?;
        Some(format!("{by}@{}", self.approved_at.as_ref().map_or_else(|| "-".to_string(), |at| at.0.to_string())))
    }
}

/// Who did something to the batch, when and why (the user comes from SelfSubjectReview).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UserAction {
    #[schemars(length(max = super::common::MAX_USER), regex(pattern = super::common::NO_NUL_PATTERN))]
    pub by: String,
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self < timestamp('2200-01-01T00:00:00Z')", "message": "must be before the year 2200"}]))]
    pub at: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = super::common::MAX_REASON), regex(pattern = super::common::NO_NUL_PATTERN))]
    pub reason: Option<String>,
}

string_enum! {
    pub BatchPhase {
        Collecting = "Collecting",
        AwaitingApproval = "AwaitingApproval",
        Waiting = "Waiting",
        RollingOut = "RollingOut",
        Succeeded = "Succeeded",
        NoChange = "NoChange",
        Held = "Held",
        Failed = "Failed",
        Cancelled = "Cancelled",
        Superseded = "Superseded",
        Undone = "Undone",
    }
}

impl BatchPhase {
    /// A terminal batch never changes again; a new rotation opens a new batch.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::Succeeded | Self::NoChange | Self::Failed | Self::Cancelled | Self::Superseded | Self::Undone
        )
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotationBatchStatus {
    #[serde(default)]
    pub phase: BatchPhase,
    /// What the batch is doing, as every capdeck surface says it (`Held · failure guard`): the
    /// phase and the `Ready` reason in a few words, written with every status for `kubectl get rb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), regex(pattern = state::STATE_PATTERN))]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<BatchDeployment>,
    /// How many tenants the affected versions serve (the blast radius).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<u32>,
    /// `<complete>/<to restart>` for the printer column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// The newer batch of the same application that replaced this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// While `Waiting`: when it may start (the next change window opening, or the end of the
    /// freeze that holds it and the first opening after).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_until: Option<Time>,
    /// When the failure guard halted the rollout (kept while the batch waits for a window, so a
    /// release after it is still honoured); cleared by a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted_at: Option<Time>,
    /// `spec.retry.at` of the last retry the engine carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Notifications the leading engine sent about this batch and its application's credentials
    /// (`--notify`): recorded before sending, so none is sent twice, even by a new leader.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<NotificationRecord>,
    /// What the batch would restart, planned when its window ended and kept while it waits before
    /// its rollout (a change window, a freeze, windows that cannot be read): whoever approves or
    /// forces it sees it. The rollout is planned again when it may start, and a difference is said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned: Option<PlannedRollout>,
}

/// A batch's plan from the end of its window, before its rollout was decided.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedRollout {
    pub at: Time,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<BatchDeployment>,
    /// How many tenants the affected versions serve.
    #[serde(default)]
    pub tenants: u32,
    /// The approval (`Approval::key`) the engine took back because the plan changed since it was
    /// given: it rolls nothing, and `capdeck approve` may approve again; any other approval counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_back: Option<String>,
}

/// One notification: what it was about, when, by which engine, and the hosts it could not reach.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationRecord {
    /// AwaitingApproval, DeadlineBeforeChangeWindow, DeadlineDuringFreeze, HeldByFailureGuard,
    /// HeldByUnreadableWindows, Failed, BatchResolved, CredentialsAtRisk, CredentialsUnsafe or
    /// CredentialsResolved (on a Freeze: FreezeStarted or FreezeEnded).
    pub event: String,
    /// Identifies the transition: one record per key, ever.
    pub key: String,
    /// The binding Secret a credentials event is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    pub at: Time,
    /// The engine (Lease identity) that sent it.
    pub by: String,
    /// Receivers (their names, never their URLs) that did not accept it after every retry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// Of those, the ones that refused capdeck itself (401, 403, 404 or 410, PagerDuty's 400: their URL or key
    /// is wrong, revoked or gone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

// NotOwned: a Deployment of the workload's name that the version does not own, never written.
string_enum! {
    pub DeploymentAction { Restart = "Restart", Unchanged = "Unchanged", Problem = "Problem", NotOwned = "NotOwned" }
}

string_enum! {
    pub DeploymentRolloutState {
        Queued = "Queued", Rolling = "Rolling", Complete = "Complete", Stalled = "Stalled", Failed = "Failed",
        Failing = "Failing",
        Undone = "Undone",
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchDeployment {
    pub name: String,
    /// The CAPApplicationVersion object name.
    pub version: String,
    pub workload: String,
    pub action: DeploymentAction,
    /// The VCAP Secret this batch created for the Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcap_secret: Option<String>,
    /// The VCAP Secret the Deployment used before; deleted once the rollout completed (kept
    /// until then, for an undo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_vcap_secret: Option<String>,
    /// Set by a retry: when its turn comes the Deployment is restarted again (its Pod template's
    /// `capdeck.dev/retried-at` annotation), not only followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried_at: Option<Time>,
    /// sha256 of the planned VCAP_SERVICES payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcap_sha256: Option<String>,
    /// The Deployment generation capdeck's update produced; progress counts from there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<DeploymentRolloutState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl BatchDeployment {
    /// A Deployment a retry rolls again: it stalled, its new Pods fail, or its writes failed.
    pub fn retriable(&self) -> bool {
        self.action == DeploymentAction::Restart && self.went_wrong()
    }

    /// It stalled, its new Pods fail, or its writes failed.
    pub fn went_wrong(&self) -> bool {
        matches!(
            self.state,
            Some(DeploymentRolloutState::Stalled | DeploymentRolloutState::Failing | DeploymentRolloutState::Failed)
        )
    }

    /// A Deployment an undo points back: the batch pointed it at a new VCAP Secret, its rollout
    /// did not complete, and the Secret it used before is known (capdeck keeps it until then).
    /// Left on its old credentials by the batch's end: undone, or never completed (a cancel).
    pub fn left_behind(&self) -> bool {
        self.action == DeploymentAction::Restart && self.state != Some(DeploymentRolloutState::Complete)
    }

    pub fn undoable(&self) -> bool {
        self.action == DeploymentAction::Restart
            && self.vcap_secret.is_some()
            && self.previous_vcap_secret.is_some()
            && !matches!(self.state, Some(DeploymentRolloutState::Complete | DeploymentRolloutState::Undone))
    }
}

string_enum! {
    /// Reasons of the batch's `Ready` condition (the engine writes only these; an object written
    /// by a newer capdeck keeps its own as `Other`). docs/BATCHES.md says what each one means.
    pub ReadyReason {
        WindowOpen = "WindowOpen",
        AwaitingApproval = "AwaitingApproval",
        StormGuard = "StormGuard",
        Held = "Held",
        Released = "Released",
        Approved = "Approved",
        Forced = "Forced",
        RollingOut = "RollingOut",
        RolloutComplete = "RolloutComplete",
        ProgressDeadlineExceeded = "ProgressDeadlineExceeded",
        MissingSecret = "MissingSecret",
        InvalidSecret = "InvalidSecret",
        NoChange = "NoChange",
        Cancelled = "Cancelled",
        Superseded = "Superseded",
        WriteFailed = "WriteFailed",
        OptedOut = "OptedOut",
        CredentialsExpiring = "CredentialsExpiring",
        RolloutFailureGuard = "RolloutFailureGuard",
        Retried = "Retried",
        Undone = "Undone",
        OutsideChangeWindow = "OutsideChangeWindow",
        ChangeWindowClosed = "ChangeWindowClosed",
        Frozen = "Frozen",
        DeadlineBeforeChangeWindow = "DeadlineBeforeChangeWindow",
        DeadlineDuringFreeze = "DeadlineDuringFreeze",
        ChangeWindowUnreadable = "ChangeWindowUnreadable",
    }
}

/// Conditions beside `Ready` that say an attribution in the spec is not honoured: the server's
/// `managedFields` name a writer other than capdeck's own (`kubectl patch`, `kubectl edit`, ...).
/// Present (status `False`) while refused; removed once honoured or gone.
pub mod attribution;

/// The one state every surface renders ([`state::BatchState`]).
pub mod state;

/// The one RotationBatch builder of the unit tests (the application's too: feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use serde_json::{Value, json};

    use super::RotationBatch;

    /// Batch `b` in `ns` of application `app`, its window ending 2026-11-23T12:00:00Z, with
    /// `overrides` merged in: objects key by key, any other value replaced.
    pub fn batch(overrides: Value) -> RotationBatch {
        let mut object = json!({
            "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
            "metadata": {"name": "b", "namespace": "ns"},
            "spec": {"application": "app", "windowEnd": "2026-11-23T12:00:00Z"},
        });
        merge(&mut object, overrides);
        serde_json::from_value(object).expect("a RotationBatch")
    }

    /// A `Ready` condition (status False) with `reason`, as the engine writes it.
    pub fn ready(reason: &str) -> Value {
        json!([{"type": "Ready", "status": "False", "reason": reason, "message": "",
                "lastTransitionTime": "2026-11-23T10:00:00Z"}])
    }

    /// Merge `overrides` into `target`: objects key by key, any other value replaced.
    pub fn merge(target: &mut Value, overrides: Value) {
        match (target, overrides) {
            (Value::Object(target), Value::Object(overrides)) => {
                for (key, value) in overrides {
                    merge(target.entry(key).or_insert(Value::Null), value);
                }
            }
            (target, value) => *target = value,
        }
    }

    /// Batch `b` whose spec is `spec` merged in and whose managedFields are `managed` (manager,
    /// FieldsV1 below `f:spec`); `None`: no managedFields at all.
    pub fn recorded(spec: Value, managed: Option<&[(&str, Value)]>) -> RotationBatch {
        let mut object = json!({"spec": spec});
        if let Some(managed) = managed {
            object["metadata"] = json!({"managedFields": managed
                .iter()
                .map(|(manager, fields)| {
                    json!({"manager": manager, "operation": "Update", "apiVersion": "capdeck.dev/v1alpha1",
                           "time": "2026-11-23T12:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": fields}})
                })
                .collect::<Vec<_>>()});
        }
        batch(object)
    }
}
pub use state::BatchState;

impl RotationBatch {
    /// Whether the engine recorded that it does not honour this attribution (one of the
    /// `attribution` condition types).
    pub fn attribution_refused(&self, condition_type: &str) -> bool {
        self.status.as_ref().is_some_and(|status| {
            status
                .conditions
                .iter()
                .any(|c| c.type_ == condition_type && c.status == super::common::ConditionStatus::False)
        })
    }

    /// The Deployments this batch restarts (known once its window ended).
    pub fn restarts(&self) -> impl Iterator<Item = &BatchDeployment> {
        self.status.iter().flat_map(|s| s.deployments.iter()).filter(|d| d.action == DeploymentAction::Restart)
    }

    /// Whether the batch's approval is one the engine took back (the plan changed since).
    pub fn approval_taken_back(&self) -> bool {
        self.status.as_ref().is_some_and(|status| self.approval_taken_back_in(status))
    }

    /// [`Self::approval_taken_back`], as `status` (the engine's working copy) records it.
    pub fn approval_taken_back_in(&self, status: &RotationBatchStatus) -> bool {
        let taken = status.planned.as_ref().and_then(|planned| planned.taken_back.as_deref());
        taken.is_some() && taken.map(str::to_string) == self.spec.approval.as_ref().and_then(Approval::key)
    }

    /// The plan kept while the batch waits before its rollout was decided (`None` once it is, or
    /// once the batch ended).
    pub fn planned(&self) -> Option<&PlannedRollout> {
        self.status
            .as_ref()
            .filter(|status| status.deployments.is_empty() && !status.phase.is_terminal())
            .and_then(|status| status.planned.as_ref())
    }

    /// What a person approving, forcing or reading the batch is shown it restarts: the
    /// Deployments it decided on, or while it waits before its rollout, those planned when its
    /// window ended ([`Self::planned`] says which).
    pub fn restarts_or_planned(&self) -> impl Iterator<Item = &BatchDeployment> {
        self.restarts().chain(
            self.planned()
                .into_iter()
                .flat_map(|planned| planned.deployments.iter())
                .filter(|d| d.action == DeploymentAction::Restart),
        )
    }

    /// Deployments of the workloads' names that their version does not own: never written.
    pub fn not_owned(&self) -> impl Iterator<Item = &BatchDeployment> {
        self.status.iter().flat_map(|s| s.deployments.iter()).filter(|d| d.action == DeploymentAction::NotOwned)
    }

    /// `held by bob`, `approved by alice`, `required`, `required: storm guard`, `auto`. A batch
    /// that waits for an approval never says `auto`, whatever made it wait.
    pub fn approval_text(&self) -> String {
        if let Some(hold) = &self.spec.hold
            && !self.attribution_refused(attribution::HOLD_HONOURED)
        {
            return format!("held by {}", hold.by);
        }
        let waiting = match self.state() {
            BatchState::AwaitingApproval { why } => Some(why),
            _ => None,
        };
        let approval_refused = self.attribution_refused(attribution::APPROVAL_HONOURED);
        match (&self.spec.approval, waiting) {
            (Some(Approval { approved_by: Some(by), .. }), _) if approval_refused => {
                format!("approval by {by} not honoured")
            }
            (Some(Approval { approved_by: Some(by), .. }), _) => format!("approved by {by}"),
            // The state says why in the same words (`AwaitingApproval · storm guard`).
            (_, Some(why)) => match why {
                state::ApprovalNeed::Policy => "required".into(),
                state::ApprovalNeed::StormGuard => "required: storm guard".into(),
                state::ApprovalNeed::CredentialsExpiring => "required: credentials expiring".into(),
                state::ApprovalNeed::WindowTooLate => "required: window too late".into(),
                state::ApprovalNeed::FreezeTooLong => "required: freeze too long".into(),
            },
            (Some(approval), None) if approval.required => "required".into(),
            _ => "auto".into(),
        }
    }

    /// Whether `status.state` (kubectl's STATE) says something else than the batch's state: an
    /// object from before that field, or one somebody wrote by hand. The engine rewrites it.
    pub fn state_text_stale(&self) -> bool {
        self.status.as_ref().is_some_and(|status| {
            status.state.as_deref() != Some(state::written_state(self.spec.window_end.0, status).as_str())
        })
    }

    /// What the batch is doing ([`BatchState`]): derived here, rendered by every surface.
    pub fn state(&self) -> BatchState {
        BatchState::of(self)
    }

    /// `3/5`, with stalled and failed Deployments called out: `3/5 (1 stalled)`.
    pub fn progress_text(&self) -> String {
        let Some(status) = &self.status else { return "-".into() };
        if let Some(planned) = self.planned() {
            return format!("{} planned", self.restarts_or_planned().count().min(planned.deployments.len()));
        }
        let mut text = status.progress.clone().unwrap_or_else(|| "-".into());
        let count = |state: DeploymentRolloutState| {
            status
                .deployments
                .iter()
                .filter(|d| d.action == DeploymentAction::Restart && d.state == Some(state.clone()))
                .count()
        };
        let (stalled, failed) = (count(DeploymentRolloutState::Stalled), count(DeploymentRolloutState::Failed));
        if stalled > 0 {
            text.push_str(&format!(" ({stalled} stalled)"));
        }
        if failed > 0 {
            text.push_str(&format!(" ({failed} failed)"));
        }
        text
    }

    /// The phase; a batch without a status collects (the engine writes none while a batch merely
    /// collects: its first status comes with the first phase a person sees change).
    pub fn phase(&self) -> BatchPhase {
        self.status.as_ref().map(|status| status.phase.clone()).unwrap_or_default()
    }

    /// The `Ready` condition's reason and message. A batch without a status says what the engine
    /// would: `WindowOpen`, collecting rotations until `spec.windowEnd`.
    pub fn ready_note(&self) -> Option<(String, String)> {
        let Some(status) = &self.status else {
            let until = self.spec.window_end.0.strftime("%Y-%m-%dT%H:%M:%SZ");
            return Some((ReadyReason::WindowOpen.to_string(), format!("collecting rotations until {until}")));
        };
        let ready = status.conditions.iter().find(|c| c.type_ == super::common::READY)?;
        Some((ready.reason.clone(), ready.message.clone()))
    }

    pub fn is_terminal(&self) -> bool {
        self.phase().is_terminal()
    }

    /// A retry nobody carried out yet (its `at` is not `status.retriedAt`).
    pub fn retry_pending(&self) -> bool {
        self.spec
            .retry
            .as_ref()
            .is_some_and(|retry| self.status.as_ref().and_then(|status| status.retried_at.as_ref()) != Some(&retry.at))
    }

    /// Whether the engine still has work on it: open, or `Failed` with a retry or an undo to
    /// carry out.
    pub fn engine_work(&self) -> bool {
        match self.phase() {
            BatchPhase::Failed => self.spec.undo.is_some() || self.retry_pending(),
            phase => !phase.is_terminal(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn batch(spec: serde_json::Value, phase: &str, reason: &str) -> RotationBatch {
        let mut overrides = json!({
            "metadata": {"name": "bookshop-x7k2p", "namespace": "cap-shop"},
            "spec": {"application": "bookshop", "windowEnd": "2026-11-23T10:00:00Z"},
            "status": {"phase": phase, "conditions": testing::ready(reason)},
        });
        testing::merge(&mut overrides, json!({"spec": spec}));
        testing::batch(overrides)
    }

    /// No status yet: the batch collects until its window's end, as the engine would have said.
    #[test]
    fn a_batch_without_a_status_collects_until_its_window_ends() {
        let mut fresh = batch(json!({}), "Collecting", ReadyReason::WindowOpen.as_str());
        fresh.status = None;
        assert_eq!(fresh.phase(), BatchPhase::Collecting);
        assert_eq!(
            fresh.ready_note(),
            Some((ReadyReason::WindowOpen.to_string(), "collecting rotations until 2026-11-23T10:00:00Z".into()))
        );
        let held = batch(json!({}), "Held", ReadyReason::Held.as_str());
        assert_eq!(held.ready_note(), Some((ReadyReason::Held.to_string(), String::new())));
    }

    /// The list's APPROVAL column: a batch that waits for an approval says why, never `auto`.
    #[test]
    fn approval_text_names_what_the_batch_waits_for() {
        let storm = batch(json!({}), "AwaitingApproval", ReadyReason::StormGuard.as_str());
        assert_eq!(storm.approval_text(), "required: storm guard");
        let manual = batch(json!({"approval": {"required": true}}), "AwaitingApproval", "ApprovalRequired");
        assert_eq!(manual.approval_text(), "required");
        let approved =
            batch(json!({"approval": {"required": true, "approvedBy": "alice"}}), "RollingOut", "RollingOut");
        assert_eq!(approved.approval_text(), "approved by alice");
        let auto = batch(json!({}), "Collecting", "WindowOpen");
        assert_eq!(auto.approval_text(), "auto");
        let held = batch(json!({"hold": {"by": "bob", "at": "2026-11-23T10:00:00Z"}}), "Held", "Held");
        assert_eq!(held.approval_text(), "held by bob");
        // What the engine does not honour (kubectl wrote it) is not shown as if it were.
        let refused = |mut batch: RotationBatch, type_: &str| {
            if let Some(status) = batch.status.as_mut() {
                status.conditions.push(super::super::common::Condition {
                    type_: type_.into(),
                    status: super::super::common::ConditionStatus::False,
                    reason: "NotHonoured".into(),
                    ..Default::default()
                });
            }
            batch
        };
        let forged = batch(
            json!({"approval": {"required": true, "approvedBy": "ceo@example.com"}}),
            "AwaitingApproval",
            "AwaitingApproval",
        );
        assert_eq!(
            refused(forged, attribution::APPROVAL_HONOURED).approval_text(),
            "approval by ceo@example.com not honoured"
        );
        let forged_hold = batch(
            json!({"approval": {"required": true}, "hold": {"by": "ceo@example.com", "at": "2026-11-23T10:00:00Z"}}),
            "AwaitingApproval",
            "AwaitingApproval",
        );
        assert_eq!(refused(forged_hold, attribution::HOLD_HONOURED).approval_text(), "required");
    }
}
