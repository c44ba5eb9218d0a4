//! The decision's table and the batches it leaves behind: the fixtures of the table tests
//! (`tests`) and, under the `testing` feature, of the application's state invariant, which walks
//! `decided_batches`.

use serde_json::{Value, json};

use k8s_openapi::jiff::SignedDuration;

use super::*;

use crate::api::rotation_batch::ReadyReason;

use crate::plan::{DeploymentPlan, PlanAction, Problem};

use crate::vcap::VcapPayload;

pub const NOW: &str = "2026-11-23T12:00:00Z";

pub const MINUTE: i64 = 60;

pub fn at(offset_seconds: i64) -> Value {
    let now: Timestamp = NOW.parse().expect("time");
    json!(now.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(offset_seconds)).expect("time").to_string())
}

pub fn action(by: &str) -> Value {
    json!({"by": by, "at": at(-MINUTE), "reason": "change 42"})
}

/// The world a case starts from: a batch in one phase.
#[derive(Clone, Copy, Debug)]
pub enum Phase {
    /// Window open, nothing evaluated.
    Collecting,
    /// Window ended a second ago, nothing evaluated yet.
    WindowEnded,
    /// Evaluated ten minutes ago; one Deployment queued, waiting for an approval.
    AwaitingApproval,
    /// Rolling: `srv` rolling, `worker` queued.
    RollingOut,
    /// Rolling started, nothing rolling right now (`worker` queued).
    RollingOutIdle,
    /// Held while waiting for an approval.
    Held,
    /// Rolling: `srv` stalled (progress deadline), `worker` queued.
    RollingOutStalled,
    /// Rolling: `srv` stalled, nothing queued (`worker` complete).
    RollingOutStalledLast,
    /// Rolling: `srv`'s new Pods crash-loop (still rolling, no deadline yet), nothing queued
    /// (`worker` complete).
    RollingOutFailingLast,
    /// Halted because `srv`'s new Pods failed, nothing queued; `srv` has completed since.
    HaltedThenRecovered,
    /// Halted by the failure guard ten minutes ago: `srv` stalled, `worker` queued.
    HaltedByGuard,
    /// Released after such a halt: rolling on with `srv` stalled and `worker` queued.
    ReleasedFromGuard,
    /// Ended Failed: `srv` stalled, `worker` complete.
    Failed,
    /// Evaluated, asking for an approval because a freeze outlived the old credentials
    /// (`DeadlineDuringFreeze`); `srv` queued.
    EscalatedForFreeze,
    /// Rolling, paused because the window closed: `srv` complete, `worker` queued.
    PausedByWindow,
}

/// A user action or a change of the world applied to the starting phase.
#[derive(Clone, Copy, Debug)]
pub enum Factor {
    Nothing,
    Cancel,
    Hold,
    Force,
    Approval,
    /// The released hold of a batch that was rolling.
    Released,
    /// `srv` was rolled a minute ago (min interval 10 min).
    StormGuard,
    StormGuardApproved,
    ManualPolicy,
    OptedOut,
    ApplicationGone,
    SecretGone,
    NothingToRestart,
    /// Old credentials revocable 20 min after the window ends: with a 15 min expected
    /// rollout, 5 min to spare (less than one rollout).
    CredentialsExpiring,
    CredentialsExpiringManual,
    CredentialsExpiringStormGuard,
    CredentialsExpiringForced,
    /// Old credentials revocable in 48 h: plenty of time.
    CredentialsSafe,
    /// `--halt-on-failure=false`.
    HaltOff,
    /// `capdeck retry` by erin.
    Retry,
    /// `capdeck undo` by erin.
    Undo,
    /// `kubectl patch` wrote `spec.approval.approvedBy: ceo@example.com` (manual policy).
    ForgedApproval,
    /// `kubectl patch` wrote `spec.hold.by: ceo@example.com`.
    ForgedHold,
}

pub fn deployment(name: &str, state: &str) -> Value {
    json!({"name": name, "version": "v1", "workload": name, "action": "Restart", "state": state})
}

pub fn batch(phase: Phase, factor: Factor) -> RotationBatch {
    let window_end = match phase {
        Phase::Collecting => at(60 * MINUTE),
        _ => at(-1),
    };
    let spec = spec(phase, factor, window_end);
    let managed = managed_fields(&spec, factor);
    serde_json::from_value(json!({
        "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
        "metadata": {"name": "app-x7k2q", "namespace": "ns", "managedFields": managed},
        "spec": spec, "status": status(phase),
    }))
    .expect("batch")
}

pub fn status(phase: Phase) -> Value {
    let condition = |reason: ReadyReason| json!([{"type": "Ready", "status": "False", "reason": reason.as_str(), "message": "", "lastTransitionTime": at(-10 * MINUTE)}]);
    match phase {
        Phase::Collecting | Phase::WindowEnded => Value::Null,
        Phase::AwaitingApproval | Phase::Held => json!({
            "phase": if matches!(phase, Phase::Held) { "Held" } else { "AwaitingApproval" },
            "deployments": [deployment("srv", "Queued")],
            "conditions": condition(ReadyReason::AwaitingApproval),
        }),
        Phase::PausedByWindow => json!({
            "phase": "Waiting", "rolloutStartedAt": at(-5 * MINUTE),
            "deployments": [deployment("srv", "Complete"), deployment("worker", "Queued")],
            "conditions": condition(ReadyReason::ChangeWindowClosed),
        }),
        Phase::EscalatedForFreeze => json!({
            "phase": "AwaitingApproval",
            "deployments": [deployment("srv", "Queued")],
            "conditions": condition(ReadyReason::DeadlineDuringFreeze),
        }),
        Phase::RollingOut => json!({
            "phase": "RollingOut", "rolloutStartedAt": at(-5 * MINUTE),
            "deployments": [deployment("srv", "Rolling"), deployment("worker", "Queued")],
            "conditions": condition(ReadyReason::RollingOut),
        }),
        Phase::RollingOutIdle => json!({
            "phase": "RollingOut", "rolloutStartedAt": at(-5 * MINUTE),
            "deployments": [deployment("srv", "Complete"), deployment("worker", "Queued")],
            "conditions": condition(ReadyReason::RollingOut),
        }),
        Phase::RollingOutFailingLast | Phase::HaltedThenRecovered => {
            let recovered = matches!(phase, Phase::HaltedThenRecovered);
            let mut srv = deployment("srv", if recovered { "Complete" } else { "Failing" });
            srv["message"] =
                json!("Pod srv-7d9-x2k4p: container main CrashLoopBackOff; last terminated: Error (exit code 1)");
            srv["vcapSecret"] = json!("srv-vcap-new");
            srv["previousVcapSecret"] = json!("srv-vcap-old");
            let (phase_name, reason) = if recovered {
                ("Held", ReadyReason::RolloutFailureGuard)
            } else {
                ("RollingOut", ReadyReason::RollingOut)
            };
            json!({
                "phase": phase_name, "rolloutStartedAt": at(-20 * MINUTE),
                "deployments": [srv, deployment("worker", "Complete")],
                "conditions": condition(reason),
            })
        }
        Phase::RollingOutStalled
        | Phase::RollingOutStalledLast
        | Phase::HaltedByGuard
        | Phase::ReleasedFromGuard
        | Phase::Failed => {
            let mut srv = deployment("srv", "Stalled");
            srv["message"] = json!("ProgressDeadlineExceeded: ReplicaSet srv-7d9 has timed out progressing");
            srv["vcapSecret"] = json!("srv-vcap-new");
            srv["previousVcapSecret"] = json!("srv-vcap-old");
            let worker =
                if matches!(phase, Phase::RollingOutStalledLast | Phase::Failed) { "Complete" } else { "Queued" };
            let (phase_name, reason) = match phase {
                Phase::HaltedByGuard => ("Held", ReadyReason::RolloutFailureGuard),
                Phase::ReleasedFromGuard => ("RollingOut", ReadyReason::Released),
                Phase::Failed => ("Failed", ReadyReason::ProgressDeadlineExceeded),
                _ => ("RollingOut", ReadyReason::RollingOut),
            };
            json!({
                "phase": phase_name, "rolloutStartedAt": at(-20 * MINUTE),
                "deployments": [srv, deployment("worker", worker)],
                "conditions": condition(reason),
            })
        }
    }
}

pub fn spec(phase: Phase, factor: Factor, window_end: Value) -> Value {
    let mut spec = json!({"application": "app", "secrets": [], "windowEnd": window_end});
    if matches!(phase, Phase::Held) {
        spec["hold"] = action("bob");
    }
    match factor {
        Factor::Cancel => spec["cancel"] = action("carol"),
        Factor::Hold => spec["hold"] = action("bob"),
        Factor::Force | Factor::CredentialsExpiringForced => spec["force"] = action("dave"),
        Factor::Approval | Factor::StormGuardApproved => {
            spec["approval"] = json!({"required": true, "approvedBy": "alice", "reason": "change 42"})
        }
        Factor::Released => spec["released"] = action("bob"),
        Factor::Retry => spec["retry"] = action("erin"),
        Factor::Undo => spec["undo"] = action("erin"),
        Factor::ForgedApproval => {
            spec["approval"] = json!({"required": true, "approvedBy": "ceo@example.com", "reason": "forged"})
        }
        Factor::ForgedHold => spec["hold"] = action("ceo@example.com"),
        _ => {}
    }
    spec
}

pub fn managed_fields(spec: &Value, factor: Factor) -> Vec<Value> {
    // The server's record: capdeck wrote every user action, but what kubectl patch forged.
    let forged = matches!(factor, Factor::ForgedApproval | Factor::ForgedHold);
    let mut by_capdeck = serde_json::Map::new();
    let mut by_kubectl = serde_json::Map::new();
    for (field, value) in spec.as_object().into_iter().flatten() {
        let Some(object) = value.as_object().filter(|_| field != "secrets") else { continue };
        let leaves: serde_json::Map<String, Value> = object.keys().map(|k| (format!("f:{k}"), json!({}))).collect();
        let forged_here = forged && (field == "approval" || (field == "hold" && matches!(factor, Factor::ForgedHold)));
        let target = if forged_here { &mut by_kubectl } else { &mut by_capdeck };
        target.insert(format!("f:{field}"), Value::Object(leaves));
    }
    let entry = |manager: &str, fields: serde_json::Map<String, Value>| {
        json!({"manager": manager, "operation": "Update", "apiVersion": "capdeck.dev/v1alpha1", "time": NOW,
               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": fields}})
    };
    vec![
        entry("capdeck-engine", serde_json::Map::from_iter([("f:application".to_string(), json!({}))])),
        entry("capdeck-console", by_capdeck),
        entry("kubectl-patch", by_kubectl),
    ]
}

pub fn application(factor: Factor) -> Option<CAPApplication> {
    let opted_in = !matches!(factor, Factor::OptedOut);
    let app = json!({
        "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
        "metadata": {"name": "app", "namespace": "ns"},
        "spec": {"btpAppName": "app", "providerSubaccountId": "p", "rolloutOnCredentialUpdate": opted_in,
                 "btp": {"services": []}}
    });
    (!matches!(factor, Factor::ApplicationGone)).then(|| serde_json::from_value(app).expect("app"))
}

pub fn planned(name: &str, action: PlanAction) -> DeploymentPlan {
    DeploymentPlan {
        namespace: "ns".into(),
        application: "app".into(),
        version: "v1".into(),
        workload: name.into(),
        deployment: name.into(),
        action,
        reason: "planned".into(),
        current_secret: Some(format!("{name}-vcap-old")),
        services: vec!["uaa".into()],
        payload: VcapPayload::assemble([]),
    }
}

pub fn plan(factor: Factor) -> AppPlan {
    let mut plan = AppPlan { tenants: 3, ..AppPlan::default() };
    match factor {
        Factor::SecretGone => plan.problems.push(Problem {
            namespace: "ns".into(),
            application: Some("app".into()),
            deployment: Some("srv".into()),
            secret: Some("uaa-bind".into()),
            message: "Secret uaa-bind not found".into(),
            kind: ProblemKind::MissingSecret,
        }),
        Factor::NothingToRestart => plan.deployments.push(planned("srv", PlanAction::Unchanged)),
        _ => plan.deployments.push(planned("srv", PlanAction::Restart)),
    }
    plan
}

pub struct Decided {
    pub decision: Decision,
    pub status: RotationBatchStatus,
    pub planned: bool,
}

pub fn run(phase: Phase, factor: Factor) -> Decided {
    let now: Timestamp = NOW.parse().expect("time");
    let batch = batch(phase, factor);
    let app = application(factor);
    let rolled_a_minute_ago = now.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(MINUTE)).ok();
    let last_rolled = |name: &str| {
        (matches!(factor, F::StormGuard | F::StormGuardApproved | F::CredentialsExpiringStormGuard) && name == "srv")
            .then_some(rolled_a_minute_ago)
            .flatten()
    };
    let window_end: Timestamp = batch.spec.window_end.0;
    let revocation = match factor {
        F::CredentialsExpiring
        | F::CredentialsExpiringManual
        | F::CredentialsExpiringStormGuard
        | F::CredentialsExpiringForced => window_end.checked_add(SignedDuration::from_mins(20)).ok(),
        F::CredentialsSafe => now.checked_add(SignedDuration::from_hours(48)).ok(),
        _ => None,
    };
    let context = DecisionContext {
        now,
        approval_default: if matches!(
            factor,
            F::ManualPolicy | F::Approval | F::CredentialsExpiringManual | F::ForgedApproval
        ) {
            ApprovalPolicy::Manual
        } else {
            ApprovalPolicy::Auto
        },
        min_rollout_interval: Duration::from_secs(10 * 60),
        last_rolled: &last_rolled,
        revocation,
        expected_rollout: Duration::from_secs(15 * 60),
        halt_on_failure: !matches!(factor, F::HaltOff),
        windows: None,
        freeze: None,
        deadline_rolls: false,
    };
    decided(&batch, app.as_ref(), factor, &context)
}

/// Decide for `batch` under `context`, apply the decision, and say whether the plan was asked for.
pub fn decided(
    batch: &RotationBatch,
    app: Option<&CAPApplication>,
    factor: Factor,
    context: &DecisionContext<'_>,
) -> Decided {
    let mut status = batch.status.clone().unwrap_or_default();
    let planned = std::cell::Cell::new(false);
    let decision = decide(
        batch,
        &status,
        app,
        || {
            planned.set(true);
            plan(factor)
        },
        context,
    );
    apply(&decision, &mut status, context.now);
    Decided { decision, status, planned: planned.get() }
}

/// At NOW, auto policy, no storm guard, 15 min expected rollout, the failure guard on.
pub fn plain_context(revocation: Option<Timestamp>) -> DecisionContext<'static> {
    DecisionContext {
        now: NOW.parse().expect("time"),
        approval_default: ApprovalPolicy::Auto,
        min_rollout_interval: Duration::ZERO,
        last_rolled: &|_| None,
        revocation,
        expected_rollout: Duration::from_secs(15 * 60),
        halt_on_failure: true,
        windows: None,
        freeze: None,
        deadline_rolls: false,
    }
}

pub fn reason_of(status: &RotationBatchStatus) -> Option<ReadyReason> {
    ready_condition(status).map(|c| ReadyReason::from(c.reason.as_str()))
}

use BatchPhase as P;

use Factor as F;

/// Every phase × every user action and change of the world: the phase after the decision,
/// the Ready reason, and whether the rollout effects run.
/// Phase × factor: the phase and reason the decision leaves, and whether the rollout effects run.
pub const TABLE: &[(Phase, Factor, BatchPhase, ReadyReason, bool)] = &[
    // Collecting: the window holds everything but force, cancel, hold and a lost app.
    (Phase::Collecting, F::Nothing, P::Collecting, ReadyReason::WindowOpen, false),
    (Phase::Collecting, F::Approval, P::Collecting, ReadyReason::WindowOpen, false),
    (Phase::Collecting, F::Force, P::RollingOut, ReadyReason::Forced, true),
    (Phase::Collecting, F::Cancel, P::Cancelled, ReadyReason::Cancelled, false),
    (Phase::Collecting, F::Hold, P::Held, ReadyReason::Held, false),
    (Phase::Collecting, F::ApplicationGone, P::Cancelled, ReadyReason::Cancelled, false),
    (Phase::Collecting, F::OptedOut, P::Collecting, ReadyReason::WindowOpen, false),
    // The window ended: evaluate.
    (Phase::WindowEnded, F::Nothing, P::RollingOut, ReadyReason::RollingOut, true),
    (Phase::WindowEnded, F::ManualPolicy, P::AwaitingApproval, ReadyReason::AwaitingApproval, false),
    (Phase::WindowEnded, F::Approval, P::RollingOut, ReadyReason::Approved, true),
    (Phase::WindowEnded, F::StormGuard, P::AwaitingApproval, ReadyReason::StormGuard, false),
    (Phase::WindowEnded, F::StormGuardApproved, P::RollingOut, ReadyReason::Approved, true),
    (Phase::WindowEnded, F::OptedOut, P::Cancelled, ReadyReason::OptedOut, false),
    (Phase::WindowEnded, F::SecretGone, P::Failed, ReadyReason::MissingSecret, false),
    (Phase::WindowEnded, F::NothingToRestart, P::NoChange, ReadyReason::NoChange, false),
    (Phase::WindowEnded, F::ApplicationGone, P::Cancelled, ReadyReason::Cancelled, false),
    (Phase::WindowEnded, F::Cancel, P::Cancelled, ReadyReason::Cancelled, false),
    (Phase::WindowEnded, F::Hold, P::Held, ReadyReason::Held, false),
    (Phase::WindowEnded, F::Force, P::RollingOut, ReadyReason::Forced, true),
    // Waiting for an approval.
    (Phase::AwaitingApproval, F::Nothing, P::AwaitingApproval, ReadyReason::AwaitingApproval, false),
    (Phase::AwaitingApproval, F::Approval, P::RollingOut, ReadyReason::Approved, true),
    (Phase::AwaitingApproval, F::Force, P::AwaitingApproval, ReadyReason::AwaitingApproval, false),
    (Phase::AwaitingApproval, F::Cancel, P::Cancelled, ReadyReason::Cancelled, false),
    (Phase::AwaitingApproval, F::Hold, P::Held, ReadyReason::Held, false),
    (Phase::AwaitingApproval, F::ApplicationGone, P::Cancelled, ReadyReason::Cancelled, false),
    // The opt-in is checked when the window ends; later opt-outs need a cancel.
    (Phase::AwaitingApproval, F::OptedOut, P::AwaitingApproval, ReadyReason::AwaitingApproval, false),
    // Rolling out.
    (Phase::RollingOut, F::Nothing, P::RollingOut, ReadyReason::RollingOut, true),
    (Phase::RollingOut, F::Approval, P::RollingOut, ReadyReason::RollingOut, true),
    (Phase::RollingOut, F::Cancel, P::RollingOut, ReadyReason::Cancelled, false),
    (Phase::RollingOutIdle, F::Cancel, P::Cancelled, ReadyReason::Cancelled, false),
    (Phase::RollingOut, F::Hold, P::Held, ReadyReason::Held, false),
    (Phase::RollingOut, F::ApplicationGone, P::RollingOut, ReadyReason::RollingOut, false),
    (Phase::RollingOutIdle, F::ApplicationGone, P::Cancelled, ReadyReason::Cancelled, false),
    (Phase::RollingOut, F::OptedOut, P::RollingOut, ReadyReason::RollingOut, true),
    // Held: a hold wins over an approval; a release goes back where it was.
    (Phase::Held, F::Nothing, P::Held, ReadyReason::Held, false),
    (Phase::Held, F::Approval, P::Held, ReadyReason::Held, false),
    (Phase::Held, F::Cancel, P::Cancelled, ReadyReason::Cancelled, false),
    // Old credentials die before the batch would have rolled: an auto batch stops waiting
    // for its window, one that needs an approval escalates; force, hold and a rollout
    // under way are not changed by it.
    (Phase::Collecting, F::CredentialsSafe, P::Collecting, ReadyReason::WindowOpen, false),
    (Phase::Collecting, F::CredentialsExpiring, P::RollingOut, ReadyReason::CredentialsExpiring, true),
    (Phase::Collecting, F::CredentialsExpiringManual, P::AwaitingApproval, ReadyReason::CredentialsExpiring, false),
    (Phase::Collecting, F::CredentialsExpiringStormGuard, P::AwaitingApproval, ReadyReason::CredentialsExpiring, false),
    (Phase::Collecting, F::CredentialsExpiringForced, P::RollingOut, ReadyReason::Forced, true),
    (Phase::WindowEnded, F::CredentialsExpiring, P::RollingOut, ReadyReason::RollingOut, true),
    (Phase::WindowEnded, F::CredentialsExpiringManual, P::AwaitingApproval, ReadyReason::CredentialsExpiring, false),
    (Phase::WindowEnded, F::CredentialsSafe, P::RollingOut, ReadyReason::RollingOut, true),
    (Phase::AwaitingApproval, F::CredentialsExpiring, P::AwaitingApproval, ReadyReason::CredentialsExpiring, false),
    (Phase::AwaitingApproval, F::CredentialsSafe, P::AwaitingApproval, ReadyReason::AwaitingApproval, false),
    (Phase::RollingOut, F::CredentialsExpiring, P::RollingOut, ReadyReason::RollingOut, true),
    (Phase::Held, F::CredentialsExpiring, P::Held, ReadyReason::Held, false),
    // A stalled Deployment halts what is still queued, until a release (or a cancel).
    (Phase::RollingOutStalled, F::Nothing, P::Held, ReadyReason::RolloutFailureGuard, false),
    (Phase::RollingOutStalled, F::HaltOff, P::RollingOut, ReadyReason::RollingOut, true),
    (Phase::RollingOutStalledLast, F::Nothing, P::RollingOut, ReadyReason::RollingOut, true),
    // New Pods that fail halt at once, even with nothing queued (undo is offered then);
    // when the Deployment completes after all, the batch rolls on and ends.
    (Phase::RollingOutFailingLast, F::Nothing, P::Held, ReadyReason::RolloutFailureGuard, false),
    (Phase::RollingOutFailingLast, F::HaltOff, P::RollingOut, ReadyReason::RollingOut, true),
    (Phase::RollingOutFailingLast, F::Undo, P::RollingOut, ReadyReason::Undone, false),
    (Phase::HaltedThenRecovered, F::Nothing, P::RollingOut, ReadyReason::RollingOut, true),
    (Phase::HaltedByGuard, F::Nothing, P::Held, ReadyReason::RolloutFailureGuard, false),
    (Phase::HaltedByGuard, F::Released, P::RollingOut, ReadyReason::Released, true),
    (Phase::ReleasedFromGuard, F::Nothing, P::RollingOut, ReadyReason::Released, true),
    (Phase::HaltedByGuard, F::Cancel, P::Cancelled, ReadyReason::Cancelled, false),
    (Phase::HaltedByGuard, F::Hold, P::Held, ReadyReason::Held, false),
    // Retry rolls the failed Deployments again; undo goes back (its effects end the
    // batch Undone), whatever holds the batch.
    (Phase::HaltedByGuard, F::Retry, P::RollingOut, ReadyReason::Retried, true),
    (Phase::Failed, F::Retry, P::RollingOut, ReadyReason::Retried, true),
    (Phase::HaltedByGuard, F::Undo, P::Held, ReadyReason::Undone, false),
    (Phase::Failed, F::Undo, P::Failed, ReadyReason::Undone, false),
    (Phase::Held, F::Undo, P::Held, ReadyReason::Undone, false),
    (Phase::Failed, F::Cancel, P::Cancelled, ReadyReason::Cancelled, false),
    // An approval or a hold kubectl wrote (not capdeck) drives nothing: the batch waits
    // for an approval, a hold does not hold.
    (Phase::Collecting, F::ForgedApproval, P::Collecting, ReadyReason::WindowOpen, false),
    (Phase::WindowEnded, F::ForgedApproval, P::AwaitingApproval, ReadyReason::AwaitingApproval, false),
    (Phase::AwaitingApproval, F::ForgedApproval, P::AwaitingApproval, ReadyReason::AwaitingApproval, false),
    (Phase::Collecting, F::ForgedHold, P::Collecting, ReadyReason::WindowOpen, false),
    (Phase::AwaitingApproval, F::ForgedHold, P::AwaitingApproval, ReadyReason::AwaitingApproval, false),
    (Phase::RollingOut, F::ForgedHold, P::RollingOut, ReadyReason::RollingOut, true),
    (Phase::WindowEnded, F::ForgedHold, P::RollingOut, ReadyReason::RollingOut, true),
];

pub fn rolled(states: &[(&str, &str)]) -> Vec<BatchDeployment> {
    states
        .iter()
        .map(|(action, state)| BatchDeployment {
            name: "d".into(),
            action: DeploymentAction::from(*action),
            state: Some(DeploymentRolloutState::from(*state)),
            ..BatchDeployment::default()
        })
        .collect()
}

/// The world of a change-window case: the windows (on the application), a freeze, when the
/// old credentials may be revoked (hours from NOW), `--on-deadline roll`, a manual policy.
pub struct Gated<'a> {
    pub windows: Option<&'a str>,
    pub freeze_until: Option<&'a str>,
    pub revocation_hours: Option<i64>,
    pub deadline_rolls: bool,
    pub manual: bool,
}

pub const OPEN_WORLD: Gated<'static> =
    Gated { windows: None, freeze_until: None, revocation_hours: None, deadline_rolls: false, manual: false };
/// NOW is Monday 12:00 UTC: closed, opening at 22:00 UTC.
pub const NIGHTS: &str = "Mon-Fri 22:00-05:00 UTC";

/// Open at NOW, closing at 13:00.
pub const MIDDAY: &str = "Mon 11:00-13:00 UTC";

pub fn run_gated(phase: Phase, factor: Factor, world: &Gated<'_>) -> Decided {
    let now: Timestamp = NOW.parse().expect("time");
    let batch = batch(phase, factor);
    let windows = world.windows.map(|text| AppliedWindows::resolve(("ns", "app", Some(text)), None, None));
    let freeze: Option<Freeze> = world.freeze_until.map(|until| {
        serde_json::from_value(json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
            "metadata": {"name": "namespace", "namespace": "ns"},
            "spec": {"scope": "Namespace", "until": until,
                     "frozen": {"by": "frank", "at": at(-60 * MINUTE), "reason": "quarter end"}}}))
        .expect("freeze")
    });
    let mut context =
        plain_context(world.revocation_hours.and_then(|hours| now.checked_add(SignedDuration::from_hours(hours)).ok()));
    context.windows = windows.as_ref().and_then(Option::as_ref);
    context.freeze = freeze.as_ref();
    context.deadline_rolls = world.deadline_rolls;
    if world.manual || matches!(factor, F::ManualPolicy) {
        context.approval_default = ApprovalPolicy::Manual;
    }
    // `srv` rolled a minute ago, under a 10 min storm guard.
    let a_minute_ago = now.checked_sub(SignedDuration::from_secs(MINUTE)).ok();
    let last_rolled = |name: &str| (matches!(factor, F::StormGuard) && name == "srv").then_some(a_minute_ago).flatten();
    context.last_rolled = &last_rolled;
    context.min_rollout_interval = Duration::from_secs(10 * MINUTE.unsigned_abs());
    decided(&batch, application(factor).as_ref(), factor, &context)
}

pub const OUTSIDE: Gated<'static> = Gated { windows: Some(NIGHTS), ..OPEN_WORLD };

pub const INSIDE: Gated<'static> = Gated { windows: Some(MIDDAY), ..OPEN_WORLD };

pub const DYING: Gated<'static> = Gated { windows: Some(NIGHTS), revocation_hours: Some(3), ..OPEN_WORLD };

pub const DYING_ROLLS: Gated<'static> = Gated { deadline_rolls: true, ..DYING };

pub const DYING_MANUAL: Gated<'static> = Gated { manual: true, ..DYING };

pub const FROZEN: Gated<'static> = Gated { freeze_until: Some("2026-11-24T08:00:00Z"), ..OPEN_WORLD };

pub const FROZEN_DYING: Gated<'static> = Gated { revocation_hours: Some(4), ..FROZEN };

pub const BROKEN: Gated<'static> = Gated { windows: Some("Mon 25:00-26:00 UTC"), ..OPEN_WORLD };

/// (what, phase, factor, world, phase after, reason, rolls, waiting until)
pub type GatedCase =
    (&'static str, Phase, Factor, &'static Gated<'static>, BatchPhase, ReadyReason, bool, Option<&'static str>);

pub const GATED: &[GatedCase] = &[
    (
        "no windows: rolls",
        Phase::WindowEnded,
        F::Nothing,
        &OPEN_WORLD,
        P::RollingOut,
        ReadyReason::RollingOut,
        true,
        None,
    ),
    ("inside a window", Phase::WindowEnded, F::Nothing, &INSIDE, P::RollingOut, ReadyReason::RollingOut, true, None),
    (
        "outside: waits",
        Phase::WindowEnded,
        F::Nothing,
        &OUTSIDE,
        P::Waiting,
        ReadyReason::OutsideChangeWindow,
        false,
        Some("2026-11-23T22:00:00Z"),
    ),
    ("still collecting", Phase::Collecting, F::Nothing, &OUTSIDE, P::Collecting, ReadyReason::WindowOpen, false, None),
    ("outside, forced", Phase::WindowEnded, F::Force, &OUTSIDE, P::RollingOut, ReadyReason::Forced, true, None),
    (
        "outside, dying: asks",
        Phase::WindowEnded,
        F::Nothing,
        &DYING,
        P::AwaitingApproval,
        ReadyReason::DeadlineBeforeChangeWindow,
        false,
        None,
    ),
    (
        "dying, --on-deadline roll",
        Phase::WindowEnded,
        F::Nothing,
        &DYING_ROLLS,
        P::RollingOut,
        ReadyReason::RollingOut,
        true,
        None,
    ),
    (
        "dying, manual: asks",
        Phase::WindowEnded,
        F::Nothing,
        &DYING_MANUAL,
        P::AwaitingApproval,
        ReadyReason::DeadlineBeforeChangeWindow,
        false,
        None,
    ),
    (
        "dying, approved: rolls",
        Phase::AwaitingApproval,
        F::Approval,
        &DYING,
        P::RollingOut,
        ReadyReason::Approved,
        true,
        None,
    ),
    (
        "approved outside: waits",
        Phase::AwaitingApproval,
        F::Approval,
        &OUTSIDE,
        P::Waiting,
        ReadyReason::OutsideChangeWindow,
        false,
        Some("2026-11-23T22:00:00Z"),
    ),
    (
        "awaiting, dying: escalates",
        Phase::AwaitingApproval,
        F::Nothing,
        &DYING,
        P::AwaitingApproval,
        ReadyReason::DeadlineBeforeChangeWindow,
        false,
        None,
    ),
    (
        "frozen: waits",
        Phase::WindowEnded,
        F::Nothing,
        &FROZEN,
        P::Waiting,
        ReadyReason::Frozen,
        false,
        Some("2026-11-24T08:00:00Z"),
    ),
    (
        "frozen, dying: asks",
        Phase::WindowEnded,
        F::Nothing,
        &FROZEN_DYING,
        P::AwaitingApproval,
        ReadyReason::DeadlineDuringFreeze,
        false,
        None,
    ),
    (
        "unreadable: held",
        Phase::WindowEnded,
        F::Nothing,
        &BROKEN,
        P::Held,
        ReadyReason::ChangeWindowUnreadable,
        false,
        None,
    ),
    (
        "rolling, closed: pauses",
        Phase::RollingOut,
        F::Nothing,
        &OUTSIDE,
        P::Waiting,
        ReadyReason::ChangeWindowClosed,
        false,
        Some("2026-11-23T22:00:00Z"),
    ),
    (
        "rolling, forced: rolls on",
        Phase::RollingOut,
        F::Force,
        &OUTSIDE,
        P::RollingOut,
        ReadyReason::RollingOut,
        true,
        None,
    ),
    ("a hold wins", Phase::WindowEnded, F::Hold, &OUTSIDE, P::Held, ReadyReason::Held, false, None),
    // Escalated because of a freeze, which is now lifted: judged afresh, so the storm guard
    // and a manual policy still ask; an auto batch rolls; outside a window it waits again.
    (
        "lifted, storm guard asks",
        Phase::EscalatedForFreeze,
        F::StormGuard,
        &OPEN_WORLD,
        P::AwaitingApproval,
        ReadyReason::StormGuard,
        false,
        None,
    ),
    (
        "lifted, manual asks",
        Phase::EscalatedForFreeze,
        F::ManualPolicy,
        &OPEN_WORLD,
        P::AwaitingApproval,
        ReadyReason::AwaitingApproval,
        false,
        None,
    ),
    (
        "lifted, auto rolls",
        Phase::EscalatedForFreeze,
        F::Nothing,
        &OPEN_WORLD,
        P::RollingOut,
        ReadyReason::RollingOut,
        true,
        None,
    ),
    (
        "lifted, approved rolls",
        Phase::EscalatedForFreeze,
        F::Approval,
        &OPEN_WORLD,
        P::RollingOut,
        ReadyReason::Approved,
        true,
        None,
    ),
    (
        "lifted, outside: waits",
        Phase::EscalatedForFreeze,
        F::Nothing,
        &OUTSIDE,
        P::Waiting,
        ReadyReason::OutsideChangeWindow,
        false,
        Some("2026-11-23T22:00:00Z"),
    ),
    (
        "still frozen past them: asks on",
        Phase::EscalatedForFreeze,
        F::Nothing,
        &FROZEN_DYING,
        P::AwaitingApproval,
        ReadyReason::DeadlineDuringFreeze,
        false,
        None,
    ),
    (
        "then a window is too late: escalates anew",
        Phase::EscalatedForFreeze,
        F::Nothing,
        &DYING,
        P::AwaitingApproval,
        ReadyReason::DeadlineBeforeChangeWindow,
        false,
        None,
    ),
    // A paused rollout: forced, it goes on and says so; the window open again, it goes on.
    (
        "paused, forced: rolls on",
        Phase::PausedByWindow,
        F::Force,
        &OUTSIDE,
        P::RollingOut,
        ReadyReason::Forced,
        true,
        None,
    ),
    (
        "paused, open: rolls on",
        Phase::PausedByWindow,
        F::Nothing,
        &OPEN_WORLD,
        P::RollingOut,
        ReadyReason::RollingOut,
        true,
        None,
    ),
    (
        "paused, still closed",
        Phase::PausedByWindow,
        F::Nothing,
        &OUTSIDE,
        P::Waiting,
        ReadyReason::ChangeWindowClosed,
        false,
        Some("2026-11-23T22:00:00Z"),
    ),
    // A release of the failure guard and a retry wait for the window like any start.
    (
        "released outside: waits",
        Phase::HaltedByGuard,
        F::Released,
        &OUTSIDE,
        P::Waiting,
        ReadyReason::ChangeWindowClosed,
        false,
        Some("2026-11-23T22:00:00Z"),
    ),
    (
        "retried outside: waits",
        Phase::Failed,
        F::Retry,
        &OUTSIDE,
        P::Waiting,
        ReadyReason::ChangeWindowClosed,
        false,
        Some("2026-11-23T22:00:00Z"),
    ),
];

/// Every batch the decision tables leave behind (each case of `TABLE` and `GATED`, its spec
/// and the status the decision applied), named by its case: what the state invariant walks.
pub fn decided_batches() -> Vec<(String, RotationBatch)> {
    let after = |phase: Phase, factor: Factor, decided: Decided| {
        let mut decided_batch = batch(phase, factor);
        decided_batch.status = Some(decided.status);
        decided_batch
    };
    let plain = TABLE
        .iter()
        .map(|(phase, factor, ..)| (format!("{phase:?} × {factor:?}"), after(*phase, *factor, run(*phase, *factor))));
    let gated = GATED.iter().map(|(what, phase, factor, world, ..)| {
        ((*what).to_string(), after(*phase, *factor, run_gated(*phase, *factor, world)))
    });
    plain.chain(gated).collect()
}
