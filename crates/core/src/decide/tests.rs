//! The decision's table tests, and the batches they leave behind (`decided_batches`, which the
//! application's state invariant walks).

use serde_json::{Value, json};

use k8s_openapi::jiff::SignedDuration;

use super::*;
use crate::api::rotation_batch::ReadyReason;
use crate::api::rotation_batch::testing::recorded;
use crate::plan::{DeploymentPlan, PlanAction, Problem};
use crate::vcap::VcapPayload;

const NOW: &str = "2026-11-23T12:00:00Z";
const MINUTE: i64 = 60;

fn at(offset_seconds: i64) -> Value {
    let now: Timestamp = NOW.parse().expect("time");
    json!(now.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(offset_seconds)).expect("time").to_string())
}

fn action(by: &str) -> Value {
    json!({"by": by, "at": at(-MINUTE), "reason": "change 42"})
}

/// The world a case starts from: a batch in one phase.
#[derive(Clone, Copy, Debug)]
enum Phase {
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
enum Factor {
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

fn deployment(name: &str, state: &str) -> Value {
    json!({"name": name, "version": "v1", "workload": name, "action": "Restart", "state": state})
}

fn batch(phase: Phase, factor: Factor) -> RotationBatch {
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

fn status(phase: Phase) -> Value {
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

fn spec(phase: Phase, factor: Factor, window_end: Value) -> Value {
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

fn managed_fields(spec: &Value, factor: Factor) -> Vec<Value> {
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

fn application(factor: Factor) -> Option<CAPApplication> {
    let opted_in = !matches!(factor, Factor::OptedOut);
    let app = json!({
        "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
        "metadata": {"name": "app", "namespace": "ns"},
        "spec": {"btpAppName": "app", "providerSubaccountId": "p", "rolloutOnCredentialUpdate": opted_in,
                 "btp": {"services": []}}
    });
    (!matches!(factor, Factor::ApplicationGone)).then(|| serde_json::from_value(app).expect("app"))
}

fn planned(name: &str, action: PlanAction) -> DeploymentPlan {
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

fn plan(factor: Factor) -> AppPlan {
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

struct Decided {
    decision: Decision,
    status: RotationBatchStatus,
    planned: bool,
}

fn run(phase: Phase, factor: Factor) -> Decided {
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
fn decided(
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
fn plain_context(revocation: Option<Timestamp>) -> DecisionContext<'static> {
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

fn reason_of(status: &RotationBatchStatus) -> Option<ReadyReason> {
    ready_condition(status).map(|c| ReadyReason::from(c.reason.as_str()))
}

use BatchPhase as P;
use Factor as F;

/// Every phase × every user action and change of the world: the phase after the decision,
/// the Ready reason, and whether the rollout effects run.
/// Phase × factor: the phase and reason the decision leaves, and whether the rollout effects run.
const TABLE: &[(Phase, Factor, BatchPhase, ReadyReason, bool)] = &[
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

#[test]
fn a_released_batch_no_longer_says_held() {
    let now: Timestamp = "2026-11-27T12:00:00Z".parse().expect("time");
    for (decision, phase, reason) in [
        (Decision::AwaitApproval, BatchPhase::AwaitingApproval, ReadyReason::AwaitingApproval),
        (Decision::Roll, BatchPhase::RollingOut, ReadyReason::Released),
    ] {
        let mut status = RotationBatchStatus { phase: BatchPhase::Held, ..RotationBatchStatus::default() };
        super::status::set_condition(&mut status, false, &ReadyReason::Held, "held by bob: audit".into(), now);
        apply(&decision, &mut status, now);
        assert_eq!((status.phase.clone(), reason_of(&status)), (phase, Some(reason)), "{decision:?}");
        let message = status.conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.message.clone());
        assert!(message.is_some_and(|m| m.contains("hold was lifted")), "{status:?}");
    }
}

#[test]
fn every_phase_under_every_action_and_change() {
    let table = TABLE;
    let mut failures = Vec::new();
    for (phase, factor, expected_phase, expected_reason, expected_rolls) in table {
        let decided = run(*phase, *factor);
        let got = (&decided.status.phase, reason_of(&decided.status), decided.decision.rolls());
        if got != (expected_phase, Some(expected_reason.clone()), *expected_rolls) {
            failures.push(format!(
                "{phase:?} × {factor:?}: expected ({expected_phase}, {expected_reason}, rolls {expected_rolls}), got ({}, {:?}, rolls {}) from {:?}",
                got.0, got.1, got.2, decided.decision
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), table.len(), failures.join("\n"));
}

/// A refused attribution is a condition of its own (the Ready condition is the phase's),
/// recorded once and removed once capdeck writes the field.
#[test]
fn a_refused_attribution_is_recorded_once_and_cleared_when_capdeck_writes_it() {
    let now: Timestamp = NOW.parse().expect("time");
    let spec = json!({"approval": {"required": true, "approvedBy": "ceo@example.com"},
                      "hold": {"by": "alice", "at": NOW}});
    let approved_by = json!({"f:approval": {"f:approvedBy": {}}});
    let forged = recorded(
        spec.clone(),
        Some(&[("kubectl-patch", approved_by.clone()), ("capdeck-console", json!({"f:hold": {"f:by": {}}}))]),
    );
    let mut status = RotationBatchStatus::default();
    record_attribution(&forged, &mut status, now);
    let types: Vec<(&str, &ConditionStatus, &str)> =
        status.conditions.iter().map(|c| (c.type_.as_str(), &c.status, c.reason.as_str())).collect();
    assert_eq!(types, [("ApprovalHonoured", &ConditionStatus::False, "ApprovalNotHonoured")]);
    assert!(status.conditions[0].message.starts_with("approval by ceo@example.com was written by kubectl-patch"));
    let later = now.checked_add(SignedDuration::from_mins(1)).expect("time");
    let before = status.clone();
    record_attribution(&forged, &mut status, later);
    assert_eq!(status, before, "the same refusal changes nothing (no new transition, no new Event)");
    let honoured = recorded(
        spec,
        Some(&[("capdeck-console", json!({"f:approval": {"f:approvedBy": {}}, "f:hold": {"f:by": {}}}))]),
    );
    record_attribution(&honoured, &mut status, later);
    assert!(status.conditions.is_empty(), "{:?}", status.conditions);
}

/// A forged approval is never named as the reason a rollout starts.
#[test]
fn a_rollout_never_starts_in_the_name_of_a_forged_approval() {
    let mut batch = batch(Phase::WindowEnded, F::ForgedApproval);
    let status = batch.status.clone().unwrap_or_default();
    let app = application(F::Nothing);
    let decision = decide(&batch, &status, app.as_ref(), || plan(F::Nothing), &plain_context(None));
    let Decision::Evaluate(Evaluation { gate: Gate::Start(start), .. }) = &decision else { panic!("{decision:?}") };
    assert_eq!((start.reason.clone(), start.message.as_str()), (ReadyReason::RollingOut, "window ended; rolling out"));
    // The same approval written by capdeck is named.
    batch.metadata.managed_fields = Some(vec![
        serde_json::from_value(json!({"manager": "capdeck-console",
        "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:approval": {"f:approvedBy": {}}}}}))
        .expect("entry"),
    ]);
    let decision = decide(&batch, &status, app.as_ref(), || plan(F::Nothing), &plain_context(None));
    let Decision::Evaluate(Evaluation { gate: Gate::Start(start), .. }) = &decision else { panic!("{decision:?}") };
    assert_eq!(start.message, "approved by ceo@example.com: forged");
}

/// A retry queues the stalled Deployment to be restarted (it had its new Secret), reopens the
/// batch, and is carried out once: the next pass just rolls.
#[test]
fn a_retry_queues_the_failed_deployments_once() {
    let decided = run(Phase::Failed, F::Retry);
    let Decision::Retry { message, at } = &decided.decision else { panic!("{:?}", decided.decision) };
    assert_eq!(message, "retried by erin: change 42; rolling srv once more");
    let status = &decided.status;
    let srv = status.deployments.iter().find(|d| d.name == "srv").expect("srv");
    assert_eq!(srv.state, Some(DeploymentRolloutState::Queued));
    assert_eq!(srv.retried_at.as_ref(), Some(at), "restarted again, not only followed");
    let worker = status.deployments.iter().find(|d| d.name == "worker").expect("worker");
    assert_eq!(worker.state, Some(DeploymentRolloutState::Complete), "a completed one is left alone");
    assert_eq!((status.retried_at.as_ref(), status.completed_at.as_ref()), (Some(at), None));

    let mut again = batch(Phase::Failed, F::Retry);
    again.status = Some(status.clone());
    let app = application(F::Nothing);
    let decision = decide(&again, status, app.as_ref(), AppPlan::default, &plain_context(None));
    assert_eq!(decision, Decision::Roll, "handled once");
}

/// A retry written past `capdeck retry` on a batch with nothing to roll again is noted and
/// changes nothing else.
#[test]
fn a_retry_with_nothing_to_retry_changes_nothing() {
    let mut batch = batch(Phase::Failed, F::Retry);
    let mut status = batch.status.clone().expect("status");
    status.deployments.retain(|d| d.name == "worker");
    batch.status = Some(status.clone());
    let app = application(F::Nothing);
    let decision = decide(&batch, &status, app.as_ref(), AppPlan::default, &plain_context(None));
    assert!(matches!(decision, Decision::NothingToRetry { .. }), "{decision:?}");
    assert!(!decision.rolls());
    let before = status.clone();
    apply(&decision, &mut status, NOW.parse().expect("time"));
    assert_eq!(status.phase, P::Failed);
    assert_eq!(status.conditions, before.conditions);
    assert_eq!(status.retried_at, batch.spec.retry.map(|retry| retry.at));
}

/// An undo after the old credentials' revocation time says they may no longer work.
#[test]
fn an_undo_past_the_revocation_warns() {
    let batch = batch(Phase::Failed, F::Undo);
    let status = batch.status.clone().expect("status");
    let app = application(F::Nothing);
    let now: Timestamp = NOW.parse().expect("time");
    let past = now.checked_sub(SignedDuration::from_mins(5)).ok();
    let decision = decide(&batch, &status, app.as_ref(), AppPlan::default, &plain_context(past));
    let Decision::Undo { message } = decision else { panic!("{decision:?}") };
    assert_eq!(
        message,
        "undone by erin: change 42; warning: the old credentials were revocable from 2026-11-23T11:55:00Z and \
         may no longer work"
    );
    let future = now.checked_add(SignedDuration::from_mins(5)).ok();
    let decision = decide(&batch, &status, app.as_ref(), AppPlan::default, &plain_context(future));
    assert_eq!(decision, Decision::Undo { message: "undone by erin: change 42".into() });
}

#[test]
fn a_released_batch_goes_back_to_rolling() {
    let mut batch = batch(Phase::RollingOut, F::Released);
    batch.status.as_mut().expect("status").phase = P::Held;
    let app = application(F::Nothing);
    let context = plain_context(None);
    let status = batch.status.clone().unwrap_or_default();
    let decision = decide(&batch, &status, app.as_ref(), AppPlan::default, &context);
    assert_eq!(decision, Decision::Roll);
}

#[test]
fn the_plan_is_computed_only_when_the_window_ends() {
    assert!(!run(Phase::Collecting, F::Nothing).planned);
    assert!(!run(Phase::AwaitingApproval, F::Approval).planned);
    assert!(!run(Phase::RollingOut, F::Nothing).planned);
    assert!(!run(Phase::WindowEnded, F::OptedOut).planned, "an opted-out application is not planned");
    assert!(run(Phase::WindowEnded, F::Nothing).planned);
    assert!(run(Phase::Collecting, F::Force).planned);
}

/// "window ended early" only about a window a force ended: a force given after the window
/// ended (the batch waited for an approval, a window or a freeze) says "forced".
#[test]
fn a_force_ends_the_window_early_only_while_it_is_open() {
    let open = batch(Phase::Collecting, F::Force);
    assert!(start(&open, false).message.starts_with("window ended early: forced by dave"), "{:?}", start(&open, false));
    let mut late = batch(Phase::AwaitingApproval, F::Force);
    late.spec.window_end = Time(late.spec.force.as_ref().expect("force").at.0 - SignedDuration::from_mins(5));
    let said = start(&late, false).message;
    assert!(said.starts_with("forced by dave"), "{said}");
}

#[test]
fn messages_name_who_and_why() {
    let held = run(Phase::AwaitingApproval, F::Hold);
    assert_eq!(ready_condition(&held.status).expect("condition").message, "held by bob: change 42");
    let approved = run(Phase::WindowEnded, F::Approval);
    assert_eq!(ready_condition(&approved.status).expect("condition").message, "approved by alice: change 42");
    let storm = run(Phase::WindowEnded, F::StormGuard);
    assert_eq!(
        ready_condition(&storm.status).expect("condition").message,
        "storm guard: srv rolled less than 10m ago; approve to roll again"
    );
    let waiting = run(Phase::WindowEnded, F::ManualPolicy);
    assert_eq!(
        ready_condition(&waiting.status).expect("condition").message,
        "1 Deployment to restart, 3 tenants served; waiting for an approval"
    );
    let cancelled = run(Phase::RollingOut, F::Cancel);
    assert_eq!(
        ready_condition(&cancelled.status).expect("condition").message,
        "cancelled by carol: change 42; waiting for 1 Deployment already rolling"
    );
    assert_eq!(
        cancelled.status.deployments[1].message.as_deref(),
        Some("not started: the batch was cancelled"),
        "queued Deployments say why they never start"
    );
}

#[test]
fn an_evaluation_records_the_approval_requirement_only_when_it_changes() {
    let Decision::Evaluate(manual) = run(Phase::WindowEnded, F::ManualPolicy).decision else {
        panic!("expected an evaluation")
    };
    assert_eq!(manual.approval_required, Some(true));
    let Decision::Evaluate(approved) = run(Phase::WindowEnded, F::Approval).decision else {
        panic!("expected an evaluation")
    };
    assert_eq!(approved.approval_required, None, "already recorded as required");
    let Decision::Evaluate(nothing) = run(Phase::WindowEnded, F::NothingToRestart).decision else {
        panic!("expected an evaluation")
    };
    assert_eq!(nothing.approval_required, None, "a batch that ends records nothing");
}

#[test]
fn expiring_credentials_say_when_and_escalate_once() {
    let early = run(Phase::Collecting, F::CredentialsExpiring);
    assert_eq!(
        ready_condition(&early.status).expect("condition").message,
        "window ended early: old credentials revocable in 1h20m, only 5m after the batch would have rolled \
         (expected rollout 15m)"
    );
    let escalated = run(Phase::AwaitingApproval, F::CredentialsExpiring);
    assert_eq!(
        ready_condition(&escalated.status).expect("condition").message,
        "old credentials revocable in 19m59s, only 4m59s after the batch would have rolled (expected rollout \
         15m): approve now"
    );
    // Escalated once: the next pass keeps waiting without a new condition (or a new Event).
    let mut batch = batch(Phase::AwaitingApproval, F::CredentialsExpiring);
    let mut status = batch.status.clone().unwrap_or_default();
    apply(&escalated.decision, &mut status, NOW.parse().expect("time"));
    batch.status = Some(status.clone());
    let now: Timestamp = NOW.parse().expect("time");
    let context = plain_context(now.checked_add(SignedDuration::from_mins(5)).ok());
    let app = application(F::Nothing);
    assert_eq!(decide(&batch, &status, app.as_ref(), AppPlan::default, &context), Decision::AwaitApproval);
}

#[test]
fn the_failure_guard_says_what_stalled_and_what_to_do() {
    let halted = run(Phase::RollingOutStalled, F::Nothing);
    assert_eq!(
        ready_condition(&halted.status).expect("condition").message,
        "halted: srv stalled (ProgressDeadlineExceeded: ReplicaSet srv-7d9 has timed out progressing); 1 queued \
         Deployment not started — capdeck undo to go back to the previous credentials, capdeck release to go on, \
         capdeck cancel to stop"
    );
    // A halt whose Deployment stalled since, with nothing queued: no longer held (the batch
    // ends once the others are done), and not said to have recovered.
    let mut stalled_since = batch(Phase::HaltedThenRecovered, F::Nothing);
    let mut status = stalled_since.status.clone().unwrap_or_default();
    status.halted_at = Some(Time(NOW.parse::<Timestamp>().expect("time")));
    status.deployments[0].state = Some(DeploymentRolloutState::Stalled);
    status.deployments[1].state = Some(DeploymentRolloutState::Rolling);
    stalled_since.status = Some(status.clone());
    let context = plain_context(None);
    let app = application(F::Nothing);
    let decision = decide(&stalled_since, &status, app.as_ref(), AppPlan::default, &context);
    assert_eq!(decision, Decision::Roll);
    apply(&decision, &mut status, NOW.parse().expect("time"));
    assert_eq!(
        ready_condition(&status).map(|c| c.message.as_str()),
        Some("srv did not roll out; the batch ends once the others are done")
    );
    assert_eq!(status.halted_at, None, "a later failure halts anew");
    // New Pods that fail halt the batch's last Deployment too: nothing is queued, but undo is
    // offered at once instead of at its progress deadline.
    let failing = run(Phase::RollingOutFailingLast, F::Nothing);
    assert_eq!(
        ready_condition(&failing.status).expect("condition").message,
        "halted: srv is failing (Pod srv-7d9-x2k4p: container main CrashLoopBackOff; last terminated: Error (exit \
         code 1)); capdeck undo to go back to the previous credentials, capdeck release to wait for it, capdeck \
         cancel to stop"
    );
    // A release from before the halt (of an earlier hold) does not count.
    let mut batch = batch(Phase::HaltedByGuard, F::Nothing);
    batch.spec.released = Some(crate::api::rotation_batch::UserAction {
        by: "bob".into(),
        at: Time(NOW.parse::<Timestamp>().expect("time").checked_sub(SignedDuration::from_mins(30)).expect("t")),
        reason: None,
    });
    let status = batch.status.clone().unwrap_or_default();
    let context = plain_context(None);
    let app = application(F::Nothing);
    assert!(matches!(decide(&batch, &status, app.as_ref(), AppPlan::default, &context), Decision::Halt { .. }));
    // A release after the halt resumes it, saying who and despite what.
    let resumed = run(Phase::HaltedByGuard, F::Released);
    assert_eq!(
        ready_condition(&resumed.status).expect("condition").message,
        "released by bob: change 42; going on despite srv stalled"
    );
}

#[test]
fn an_approval_reports_how_long_it_waited() {
    let Decision::Start(start) = run(Phase::AwaitingApproval, F::Approval).decision else { panic!("expected a start") };
    assert_eq!(start.approval_waited, Some(600.0));
}

fn rolled(states: &[(&str, &str)]) -> Vec<BatchDeployment> {
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

#[test]
fn how_a_rollout_ends() {
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<(BatchPhase, &'a str)>);
    let cases: &[Case] = &[
        (
            &[("Restart", "Complete"), ("Unchanged", "Complete")],
            Some((P::Succeeded, ReadyReason::RolloutComplete.as_str())),
        ),
        (&[("Restart", "Complete"), ("Restart", "Rolling")], None),
        (&[("Restart", "Complete"), ("Restart", "Queued")], None),
        (
            &[("Restart", "Stalled"), ("Restart", "Failed")],
            Some((P::Failed, ReadyReason::ProgressDeadlineExceeded.as_str())),
        ),
        (&[("Restart", "Complete"), ("Restart", "Failed")], Some((P::Failed, ReadyReason::WriteFailed.as_str()))),
        (&[("Restart", "Complete"), ("Problem", "Failed")], Some((P::Failed, ReadyReason::InvalidSecret.as_str()))),
    ];
    for (states, expected) in cases {
        let outcome = rollout_outcome(&rolled(states)).map(|o| (o.phase, o.reason));
        assert_eq!(outcome, expected.clone().map(|(p, r)| (p, ReadyReason::from(r))), "{states:?}");
    }
    let stalled = rollout_outcome(&rolled(&[("Restart", "Complete"), ("Restart", "Stalled")])).expect("ended");
    assert_eq!(
        stalled.message,
        "1 rolled out, 1 stalled, 0 failed, 0 could not be planned; previous VCAP Secrets of unfinished Deployments were kept"
    );
}

/// The world of a change-window case: the windows (on the application), a freeze, when the
/// old credentials may be revoked (hours from NOW), `--on-deadline roll`, a manual policy.
struct Gated<'a> {
    windows: Option<&'a str>,
    freeze_until: Option<&'a str>,
    revocation_hours: Option<i64>,
    deadline_rolls: bool,
    manual: bool,
}

const OPEN_WORLD: Gated<'static> =
    Gated { windows: None, freeze_until: None, revocation_hours: None, deadline_rolls: false, manual: false };
/// NOW is Monday 12:00 UTC: closed, opening at 22:00 UTC.
const NIGHTS: &str = "Mon-Fri 22:00-05:00 UTC";
/// Open at NOW, closing at 13:00.
const MIDDAY: &str = "Mon 11:00-13:00 UTC";

fn run_gated(phase: Phase, factor: Factor, world: &Gated<'_>) -> Decided {
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

const OUTSIDE: Gated<'static> = Gated { windows: Some(NIGHTS), ..OPEN_WORLD };
const INSIDE: Gated<'static> = Gated { windows: Some(MIDDAY), ..OPEN_WORLD };
const DYING: Gated<'static> = Gated { windows: Some(NIGHTS), revocation_hours: Some(3), ..OPEN_WORLD };
const DYING_ROLLS: Gated<'static> = Gated { deadline_rolls: true, ..DYING };
const DYING_MANUAL: Gated<'static> = Gated { manual: true, ..DYING };
const FROZEN: Gated<'static> = Gated { freeze_until: Some("2026-11-24T08:00:00Z"), ..OPEN_WORLD };
const FROZEN_DYING: Gated<'static> = Gated { revocation_hours: Some(4), ..FROZEN };
const BROKEN: Gated<'static> = Gated { windows: Some("Mon 25:00-26:00 UTC"), ..OPEN_WORLD };

/// (what, phase, factor, world, phase after, reason, rolls, waiting until)
type GatedCase =
    (&'static str, Phase, Factor, &'static Gated<'static>, BatchPhase, ReadyReason, bool, Option<&'static str>);

const GATED: &[GatedCase] = &[
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

/// Change windows and freezes gate every start; a deadline before the next opening asks a
/// person (or rolls with `--on-deadline roll`); force overrides; a closed window pauses a rollout.
#[test]
fn change_windows_and_freezes_gate_every_start_and_deadlines_win() {
    let mut failures = Vec::new();
    for (what, phase, factor, world, expected_phase, expected_reason, rolls, until) in GATED {
        let decided = run_gated(*phase, *factor, world);
        let got = (
            decided.status.phase.clone(),
            reason_of(&decided.status).unwrap_or_default().to_string(),
            decided.decision.rolls(),
            decided.status.waiting_until.as_ref().map(|t| t.0.to_string()),
        );
        let want = (expected_phase.clone(), expected_reason.to_string(), *rolls, until.map(String::from));
        if got != want {
            failures.push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_window_wait_says_when_and_why_and_decides_nothing_yet() {
    let outside = OUTSIDE;
    let decided = run_gated(Phase::WindowEnded, F::Nothing, &outside);
    assert!(decided.status.deployments.is_empty(), "the rollout is decided when the window opens, not before");
    let message = &ready_condition(&decided.status).expect("condition").message;
    assert_eq!(
        message,
        "outside the change windows (Mon-Fri 22:00-05:00 UTC from annotation capdeck.dev/change-windows of \
         CAPApplication ns/app); next opening 2026-11-23T22:00:00Z"
    );
    let approved = run_gated(Phase::AwaitingApproval, F::Approval, &outside);
    assert!(!approved.status.deployments.is_empty(), "an approved batch keeps the plan it approved");
    let forced = run_gated(Phase::WindowEnded, F::Force, &outside);
    let message = &ready_condition(&forced.status).expect("condition").message;
    assert!(
        message.starts_with("window ended early: forced by dave: change 42; overrides: outside the change windows"),
        "{message}"
    );
    let closed = run_gated(Phase::RollingOut, F::Nothing, &outside);
    let message = &ready_condition(&closed.status).expect("condition").message;
    assert!(
        message.starts_with("the change window closed during the rollout: outside the change windows")
            && message.ends_with("; 1 Deployment in flight finishes; 1 queued Deployment starts then"),
        "{message}"
    );
    let asked = run_gated(Phase::WindowEnded, F::Nothing, &DYING);
    let message = &ready_condition(&asked.status).expect("condition").message;
    assert!(
        message.contains("opens 2026-11-23T22:00:00Z") && message.contains("revoked from 2026-11-23T15:00:00Z"),
        "both times: {message}"
    );
}

/// Nobody approves blind: the plan is made when the window ends, kept while the batch waits
/// (made once), shown; when the window opens the rollout is planned again, what changed is
/// said, and an approval given for the kept plan is asked again under the manual policy.
#[test]
fn a_waiting_batch_keeps_its_plan_and_says_what_changed_when_it_rolls() {
    let waiting = run_gated(Phase::WindowEnded, F::Nothing, &OUTSIDE);
    assert!(waiting.planned, "planned when the window ended");
    assert_eq!(waiting.status.phase, BatchPhase::Waiting);
    let kept = waiting.status.planned.clone().expect("kept on the status");
    let names: Vec<&str> = kept.deployments.iter().map(|d| d.name.as_str()).collect();
    assert_eq!((names, kept.tenants), (vec!["srv"], 3));
    let mut waited = batch(Phase::WindowEnded, F::Nothing);
    waited.status = Some(waiting.status.clone());
    assert_eq!(waited.restarts_or_planned().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["srv"]);
    assert_eq!(waited.progress_text(), "1 planned");
    let mut ended = waited.clone();
    if let Some(status) = ended.status.as_mut() {
        status.phase = BatchPhase::Superseded;
    }
    assert_eq!(ended.planned(), None, "an ended batch plans nothing");
    // Still waiting: the kept plan stands, nothing is planned again.
    let mut context = plain_context(None);
    let windows = AppliedWindows::resolve(("ns", "app", Some(NIGHTS)), None, None);
    context.windows = windows.as_ref();
    let again =
        decide(&waited, &waiting.status, application(F::Nothing).as_ref(), || panic!("planned again"), &context);
    assert!(matches!(again, Decision::Wait { planned: None, .. }), "{again:?}");

    // The window opens; the plan of that moment is `srv` alone.
    let earlier: Timestamp = at(-2 * 60 * MINUTE).as_str().expect("time").parse().expect("time");
    let kept_with = |names: &[&str]| PlannedRollout {
        at: Time(earlier),
        deployments: names
            .iter()
            .map(|name| BatchDeployment {
                name: (*name).into(),
                version: "v1".into(),
                workload: (*name).into(),
                action: DeploymentAction::Restart,
                ..BatchDeployment::default()
            })
            .collect(),
        tenants: 3,
        taken_back: None,
    };
    // (what, kept plan, manual, approved after it was kept, what the condition says, taken back)
    type Case<'a> = (&'a str, &'a [&'a str], bool, bool, &'a str, bool);
    let cases: [Case<'_>; 5] = [
        ("auto, same plan", &["srv"], false, false, "window ended", false),
        (
            "auto, changed",
            &["srv", "worker"],
            false,
            false,
            "the plan changed since the window ended (dropped worker)",
            false,
        ),
        ("manual, approved, same plan", &["srv"], true, true, "approved by alice", false),
        (
            "manual, approved, changed",
            &["worker"],
            true,
            true,
            "the plan changed since the window ended (added srv; dropped worker) after alice approved it; approve \
             again: 1 Deployment to restart, 3 tenants served; waiting for an approval",
            true,
        ),
        ("manual, not approved, changed", &["worker"], true, false, "waiting for an approval; the plan changed", false),
    ];
    for (what, kept, manual, approved, said, voided) in cases {
        let factor = if approved { F::Approval } else { F::Nothing };
        let mut batch = batch(Phase::WindowEnded, factor);
        let mut status = batch.status.clone().unwrap_or_default();
        status.planned = Some(kept_with(kept));
        batch.status = Some(status.clone());
        if let Some(approval) = batch.spec.approval.as_mut() {
            approval.approved_at = Some(Time(NOW.parse().expect("now")));
        }
        let mut context = plain_context(None);
        if manual {
            context.approval_default = ApprovalPolicy::Manual;
        }
        let decision = decide(&batch, &status, application(factor).as_ref(), || plan(factor), &context);
        let Decision::Evaluate(evaluation) = &decision else { panic!("{what}: {decision:?}") };
        assert_eq!(evaluation.void_approval.is_some(), voided, "{what}");
        let message = match &evaluation.gate {
            Gate::Start(start) => start.message.clone(),
            Gate::AwaitApproval { message, .. } => message.clone(),
            Gate::Finish(outcome) => outcome.message.clone(),
        };
        assert!(message.contains(said), "{what}: {message}");
        assert_eq!(matches!(evaluation.gate, Gate::Start(_)), !voided && (approved || !manual), "{what}");
        apply(&decision, &mut status, context.now);
        if !voided {
            assert_eq!(status.planned, None, "{what}: decided, the record is the plan now");
            continue;
        }
        // Taken back: until someone approves again, the old approval rolls nothing, even
        // while the spec still holds it (its write may fail or come later).
        let asked = status.planned.clone().expect("what it asks about is kept");
        assert_eq!(asked.taken_back.as_deref(), Some(format!("alice@{}", context.now).as_str()), "{what}");
        batch.status = Some(status.clone());
        let again = decide(&batch, &status, application(factor).as_ref(), || plan(factor), &context);
        assert_eq!(again, Decision::AwaitApproval, "{what}: the old approval counts no more");
        assert!(batch.approval_taken_back(), "{what}");
        // Approved again from a laptop whose clock is a minute behind the engine's: it counts.
        let later = context.now.checked_add(SignedDuration::from_secs(30)).expect("time");
        if let Some(approval) = batch.spec.approval.as_mut() {
            approval.approved_by = Some("bob".into());
            approval.approved_at = Some(Time(context.now.checked_sub(SignedDuration::from_secs(60)).expect("time")));
        }
        context.now = later;
        let approved_again = decide(&batch, &status, application(factor).as_ref(), || plan(factor), &context);
        assert!(matches!(approved_again, Decision::Start(_)), "{what}: {approved_again:?}");
        apply(&approved_again, &mut status, later);
        assert_eq!(status.planned, None, "{what}: started");
    }
}

/// A release of the failure guard given while the window is closed is kept: the batch
/// waits, and at the opening it goes on despite the failure instead of halting again.
#[test]
fn a_release_outlives_a_closed_window() {
    let batch = batch(Phase::HaltedByGuard, F::Released);
    let mut status = batch.status.clone().unwrap_or_default();
    let now: Timestamp = NOW.parse().expect("time");
    status.halted_at = Some(Time(now.checked_sub(SignedDuration::from_secs(10 * MINUTE)).expect("time")));
    let windows = AppliedWindows::resolve(("ns", "app", Some(NIGHTS)), None, None).expect("set");
    let mut context = plain_context(None);
    context.windows = Some(&windows);
    let app = application(F::Nothing);
    let waiting = decide(&batch, &status, app.as_ref(), || plan(F::Nothing), &context);
    apply(&waiting, &mut status, context.now);
    assert_eq!((status.phase.clone(), reason_of(&status)), (P::Waiting, Some(ReadyReason::ChangeWindowClosed)));
    let again = decide(&batch, &status, app.as_ref(), || plan(F::Nothing), &context);
    assert!(matches!(again, Decision::Wait { .. }), "still waiting, not halted again: {again:?}");
    context.now = "2026-11-23T22:00:00Z".parse().expect("time");
    let opened = decide(&batch, &status, app.as_ref(), || plan(F::Nothing), &context);
    assert!(matches!(opened, Decision::Resume { .. }), "goes on as released: {opened:?}");
}

/// Only a start nobody acted on and nothing overrode is routine (no Event): the window ended,
/// or it opened again. A force, an approval, `--on-deadline roll` and an early start are not.
#[test]
fn only_a_plain_start_is_routine() {
    assert!(run(Phase::Collecting, F::Nothing).decision.routine(), "collecting");
    assert!(run(Phase::WindowEnded, F::Nothing).decision.routine(), "the window ended");
    assert!(!run(Phase::Collecting, F::Force).decision.routine(), "forced");
    assert!(!run(Phase::WindowEnded, F::Approval).decision.routine(), "approved");
    assert!(!run(Phase::AwaitingApproval, F::Approval).decision.routine(), "approved while awaiting");
    assert!(!run(Phase::Collecting, F::CredentialsExpiring).decision.routine(), "expiring: early");
    assert!(!run(Phase::RollingOut, F::Hold).decision.routine(), "held");
    assert!(!run_gated(Phase::WindowEnded, F::Nothing, &DYING_ROLLS).decision.routine(), "--on-deadline roll");
    let outside = run_gated(Phase::WindowEnded, F::Nothing, &OUTSIDE);
    assert!(!outside.decision.routine(), "waits for a window: {:?}", outside.decision);
}

#[test]
fn a_paused_rollout_rolls_on_when_the_window_opens_again() {
    let batch = batch(Phase::RollingOut, F::Nothing);
    let mut status = batch.status.clone().unwrap_or_default();
    let windows = AppliedWindows::resolve(("ns", "app", Some(NIGHTS)), None, None).expect("set");
    let mut context = plain_context(None);
    context.windows = Some(&windows);
    let paused = decide(&batch, &status, application(F::Nothing).as_ref(), || plan(F::Nothing), &context);
    apply(&paused, &mut status, context.now);
    assert_eq!(status.phase, P::Waiting);
    context.now = "2026-11-23T22:00:00Z".parse().expect("time");
    let resumed = decide(&batch, &status, application(F::Nothing).as_ref(), || plan(F::Nothing), &context);
    assert!(matches!(resumed, Decision::RollOn { reason: ReadyReason::RollingOut, .. }), "{resumed:?}");
    assert!(resumed.routine(), "the window opened again: no Event");
    apply(&resumed, &mut status, context.now);
    assert_eq!((status.phase.clone(), reason_of(&status)), (P::RollingOut, Some(ReadyReason::RollingOut)));
    assert_eq!(status.waiting_until, None, "no longer waiting");
}
