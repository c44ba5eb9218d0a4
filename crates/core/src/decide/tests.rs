//! The decision's table tests (the fixtures and the table are `testing`'s).

use super::testing::Factor as F;
use super::testing::*;
use super::*;
use crate::api::BatchPhase as P;
use crate::api::rotation_batch::ReadyReason;
use crate::api::rotation_batch::testing::recorded;
use k8s_openapi::jiff::SignedDuration;
use serde_json::json;

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
