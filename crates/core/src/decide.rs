//! The phase decision for one open batch. It is pure — it reads nothing but its arguments — so
//! every phase × user action × state of the world is a table test; the reconciler executes what
//! it decides (status, spec, events, rollout writes).
//!
//! ```text
//!             window ends / force          restarts, no approval needed
//! Collecting ───────────────────► evaluate ────────────────────────────► RollingOut ──► Succeeded
//!     │                              │  │ policy Manual or storm guard        ▲    │
//!     │                              │  └──────────► AwaitingApproval ───────┘    └──► Failed
//!     │                              └─► NoChange | Failed (secret missing/invalid)  (stalled,
//!     │ hold (any phase)  ─► Held ─ release ─► back where it was                     write failed)
//!     │ cancel (any phase) ─► Cancelled (after Deployments already rolling finish)
//!     └ newer rotation while not started ─► Superseded (batching, not here)
//!   Failed | Held by the failure guard ─ retry ─► RollingOut;  ─ undo ─► Undone (its effects)
//! ```

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

pub mod gate;
pub mod status;

use crate::api::Freeze;
use crate::api::approval::ApprovalPolicy;
use crate::api::change_window::AppliedWindows;
use crate::api::common::{Condition, ConditionStatus, bounded};
use crate::api::go_duration::humanize;
pub use crate::api::rotation_batch::attribution::{Attributed, attribution_check};
use crate::api::rotation_batch::{
    BatchDeployment, DeploymentAction, DeploymentRolloutState, PlannedRollout, ReadyReason,
};
use crate::api::{BatchPhase, CAPApplication, RotationBatch, RotationBatchStatus};
use crate::credentials::{batch_margin_seconds, human_signed, seconds};
use crate::output::count;
use crate::plan::{AppPlan, ProblemKind};
use gate::Check;
use status::{
    MISSING_DEPLOYMENT, batch_deployments, condition_reason, finish, is_active, is_done, is_queued, progress_summary,
    ready_condition, set_condition, user_action_text,
};

/// What the decision may know besides the batch, its application and its plan.
pub struct DecisionContext<'a> {
    pub now: Timestamp,
    /// `--approval`, unless the application's annotation says otherwise.
    pub approval_default: ApprovalPolicy,
    /// The storm guard: a Deployment rolled more recently than this needs an approval.
    pub min_rollout_interval: Duration,
    /// When capdeck last rolled a Deployment of the batch's namespace (its rolled-at annotation).
    pub last_rolled: &'a dyn Fn(&str) -> Option<Timestamp>,
    /// The earliest moment old credentials of the batch's rotated Secrets may be revoked (their
    /// ServiceBindings); `None` when unknown.
    pub revocation: Option<Timestamp>,
    /// `--expected-rollout`: the margin a batch needs against that revocation.
    pub expected_rollout: Duration,
    /// `--halt-on-failure`: a stalled Deployment halts the batch while others are queued.
    pub halt_on_failure: bool,
    /// The application's change windows, when a level sets them (docs/WINDOWS.md).
    pub windows: Option<&'a AppliedWindows>,
    /// The freeze in force over the application.
    pub freeze: Option<&'a Freeze>,
    /// `--on-deadline roll`: when waiting for a window or a freeze would outlive the old
    /// credentials, roll at once instead of asking a person.
    pub deadline_rolls: bool,
}

impl DecisionContext<'_> {
    /// What the change windows and the freeze say about starting a Deployment now.
    pub fn gate(&self) -> Check {
        let inputs = gate::Inputs {
            windows: self.windows,
            freeze: self.freeze,
            revocation: self.revocation,
            expected_rollout: self.expected_rollout,
        };
        gate::check(inputs, self.now)
    }
}

/// A terminal phase with its condition.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub phase: BatchPhase,
    pub reason: ReadyReason,
    pub message: String,
}

/// The rollout begins: why, for the condition (and the approval wait metric).
#[derive(Clone, Debug, PartialEq)]
pub struct Start {
    pub reason: ReadyReason,
    pub message: String,
    /// Seconds the batch waited for its approval, when it was approved just now.
    pub approval_waited: Option<f64>,
    /// The window simply ended: nobody acted and nothing was overridden. Its status and its log
    /// line say so; no Event does (Events are for what a person acts on or must see).
    pub routine: bool,
}

/// What follows the evaluation at the end of the window.
#[derive(Clone, Debug, PartialEq)]
pub enum Gate {
    Start(Start),
    /// Wait for an approval: the policy asks for one (`AwaitingApproval`) or the storm guard does.
    AwaitApproval {
        reason: ReadyReason,
        message: String,
    },
    /// Nothing to restart: the batch ends (`NoChange`, or `Failed` when a Secret is missing).
    Finish(Outcome),
}

/// The window ended: the batch's Deployments, and what happens next.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    pub deployments: Vec<BatchDeployment>,
    pub tenants: u32,
    /// The approval requirement to record in the spec, when it differs from what is recorded.
    pub approval_required: Option<bool>,
    /// The approval (its `Approval::key`) given for a plan that changed since: it is taken back
    /// (recorded on the status, cleared from the spec; the condition says whose, and what
    /// changed) and asked again.
    pub void_approval: Option<String>,
    pub gate: Gate,
}

/// What a batch that waits before its rollout would restart, planned when its window ended:
/// kept on its status (`planned`) for whoever approves or forces it. The rollout is planned again
/// when it may start, and what changed is said then.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub deployments: Vec<BatchDeployment>,
    pub tenants: u32,
}

impl Planned {
    fn of(plan: &AppPlan) -> Self {
        Self { deployments: batch_deployments(plan), tenants: plan.tenants }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// The batch ends now.
    Finish(Outcome),
    /// Cancelled while Deployments roll: queued ones never start, the batch ends once the
    /// rolling ones are done.
    Cancel {
        message: String,
        still_rolling: usize,
    },
    /// The application was deleted while Deployments roll: follow them, start nothing.
    Drain,
    Hold {
        message: String,
    },
    /// A Deployment stalled while others wait: start nothing (`Held`, `RolloutFailureGuard`)
    /// until an SRE releases or cancels the batch.
    Halt {
        message: String,
    },
    /// An SRE released a batch the failure guard had halted: roll on (condition `Released`).
    Resume {
        message: String,
    },
    Collect {
        until: Timestamp,
    },
    Evaluate(Evaluation),
    AwaitApproval,
    /// Still waiting for an approval, but the old credentials may be revoked before the batch
    /// would have rolled (condition `CredentialsExpiring`), or before the next change window
    /// or the end of a freeze (`DeadlineBeforeChangeWindow`, `DeadlineDuringFreeze`): say so,
    /// with a Warning Event.
    Escalate {
        reason: ReadyReason,
        message: String,
    },
    /// Outside the change windows or frozen: start nothing until `until` (phase `Waiting`);
    /// Deployments already rolling finish. `forget`: the evaluation is made again when it may
    /// start (a batch nobody approved yet).
    Wait {
        reason: ReadyReason,
        message: String,
        until: Timestamp,
        forget: bool,
        /// The plan of the moment the window ended, to keep while it waits (first wait only).
        planned: Option<Planned>,
    },
    /// The application's change windows cannot be read: start nothing until they are fixed
    /// (phase `Held`, `ChangeWindowUnreadable`).
    WindowUnreadable {
        message: String,
        forget: bool,
        planned: Option<Planned>,
    },
    /// A rollout that waited goes on: the window opened, the freeze ended, the deadline came, or
    /// it was forced (the condition says which, and what a force overrode).
    RollOn {
        reason: ReadyReason,
        message: String,
        /// The window opened again: no Event (the status and the log say so).
        routine: bool,
    },
    Start(Start),
    /// Rolling out: start queued Deployments (paced), follow the rolling ones.
    Roll,
    /// An SRE retried a Failed or halted batch: its stalled, failing and failed Deployments are
    /// queued again and restarted when their turn comes (condition `Retried`).
    Retry {
        message: String,
        at: Time,
    },
    /// A retry with nothing to roll again: recorded as handled, the batch stays as it is.
    NothingToRetry {
        at: Time,
    },
    /// An SRE undid the batch: point the Deployments it rolled and did not complete back at
    /// their previous VCAP Secrets, then end `Undone` (the effects say how many).
    Undo {
        message: String,
    },
}

impl Decision {
    /// A transition nobody acts on and nothing overrides: the window is open, it simply ended or
    /// opened again. It gets no Event (the batch's status and the log line still say it).
    pub fn routine(&self) -> bool {
        match self {
            Self::Collect { .. } => true,
            Self::Start(start) | Self::Evaluate(Evaluation { gate: Gate::Start(start), .. }) => start.routine,
            Self::RollOn { routine, .. } => *routine,
            _ => false,
        }
    }

    /// Whether the rollout effects run after this decision.
    pub fn rolls(&self) -> bool {
        matches!(
            self,
            Self::Roll
                | Self::RollOn { .. }
                | Self::Resume { .. }
                | Self::Retry { .. }
                | Self::Start(_)
                | Self::Evaluate(Evaluation { gate: Gate::Start(_), .. })
        )
    }
}

/// Record on the status which attributions are not honoured (a condition each, `False`, reason
/// `ApprovalNotHonoured` or `HoldNotHonoured`), and drop the condition of one honoured again or gone. Only for a batch
/// whose managedFields were read.
pub fn record_attribution(batch: &RotationBatch, status: &mut RotationBatchStatus, now: Timestamp) {
    for field in Attributed::ALL {
        let type_ = field.condition_type();
        match attribution_check(batch, field) {
            Ok(()) => status.conditions.retain(|c| c.type_ != type_),
            Err(message) => {
                let message = bounded(&message, status::MAX_CONDITION_MESSAGE).into_owned();
                match status.conditions.iter_mut().find(|c| c.type_ == type_) {
                    Some(condition)
                        if condition.message == message
                            && condition.status == ConditionStatus::False
                            && condition.reason == field.refusal_reason() => {}
                    Some(condition) => {
                        condition.status = ConditionStatus::False;
                        condition.reason = field.refusal_reason().into();
                        condition.message = message;
                        condition.last_transition_time = Some(Time(now));
                    }
                    None => status.conditions.push(Condition {
                        type_: type_.into(),
                        status: ConditionStatus::False,
                        observed_generation: batch.metadata.generation,
                        last_transition_time: Some(Time(now)),
                        reason: field.refusal_reason().into(),
                        message,
                    }),
                }
            }
        }
    }
}

/// Decide the next step of an open batch whose rolling Deployments `status` already follows.
/// `plan` is called only when the window has ended and the batch is evaluated.
pub fn decide(
    batch: &RotationBatch,
    status: &RotationBatchStatus,
    application: Option<&CAPApplication>,
    plan: impl FnOnce() -> AppPlan,
    context: &DecisionContext<'_>,
) -> Decision {
    let still_rolling = status.deployments.iter().filter(|d| is_active(d)).count();
    if let Some(cancel) = &batch.spec.cancel {
        let mut message = user_action_text(cancel, "cancelled");
        if still_rolling > 0 {
            message = format!("{message}; waiting for {} already rolling", count(still_rolling, "Deployment"));
        }
        return Decision::Cancel { message, still_rolling };
    }
    let Some(app) = application else {
        if still_rolling > 0 {
            return Decision::Drain;
        }
        return Decision::Finish(Outcome {
            phase: BatchPhase::Cancelled,
            reason: ReadyReason::Cancelled,
            message: format!("CAPApplication {} no longer exists", batch.spec.application),
        });
    };
    if let Some(decision) = user_decision(batch, status, still_rolling, context) {
        return decision;
    }
    if status.rollout_started_at.is_some() {
        return match failure_guard(batch, status, context) {
            Guard::Halt(message) => Decision::Halt { message },
            // A release goes on despite failures, not outside the windows: it waits for the opening.
            Guard::Resume(message) => match paused_mid_rollout(batch, status, context) {
                Some(Decision::RollOn { .. }) | None => Decision::Resume { message },
                Some(wait) => wait,
            },
            Guard::Clear => paused_mid_rollout(batch, status, context).unwrap_or(Decision::Roll),
        };
    }
    let approved = batch.spec.approval.as_ref().is_some_and(|a| a.approved_by.is_some())
        && attribution_check(batch, Attributed::Approval).is_ok()
        // Taken back (the plan changed since) and not given again: it rolls nothing, even while
        // the spec still holds it; any other approval counts, whatever its clock.
        && !batch.approval_taken_back_in(status);
    let expiring = credentials_expiring(batch, context);
    // A batch that asked for an approval only because of a window or a freeze is judged afresh
    // once that is no longer so (the freeze lifted, the window opened or changed): evaluated
    // again, so the storm guard and the policy ask again where they must, or waiting again.
    let escalated_for_the_gate = matches!(
        condition_reason(status),
        Some(ReadyReason::DeadlineBeforeChangeWindow | ReadyReason::DeadlineDuringFreeze)
    );
    let judge_afresh = escalated_for_the_gate
        && !approved
        && batch.spec.force.is_none()
        && !matches!(context.gate(), Check::Deadline { .. });
    if !status.deployments.is_empty() && !judge_afresh {
        return evaluated_earlier(batch, status, approved, expiring, context);
    }
    // A batch judged afresh was evaluated once already: its collection window is over.
    let window_open = !judge_afresh && batch.spec.force.is_none() && context.now < batch.spec.window_end.0;
    if window_open && expiring.is_none() {
        return Decision::Collect { until: batch.spec.window_end.0 };
    }
    if !app.rollout_opted_in() {
        return Decision::Finish(Outcome {
            phase: BatchPhase::Cancelled,
            reason: ReadyReason::OptedOut,
            message: format!("CAPApplication {} no longer opts in to rollout on credential update", app.name_any()),
        });
    }
    // Change windows and freezes: a forced batch overrides them (and its record says so);
    // otherwise it waits, is held, or — when waiting would outlive the old credentials — asks.
    let check = context.gate();
    let mut deadline = None;
    let mut overridden = None;
    match check {
        Check::Open => {}
        _ if batch.spec.force.is_some() => overridden = overridden_text(&check),
        // Waiting before its rollout: the plan of this moment is kept for whoever approves or
        // forces it (made once, when the window ended).
        Check::Unreadable { message } => {
            let planned = status.planned.is_none().then(|| Planned::of(&plan()));
            return Decision::WindowUnreadable { message, forget: true, planned };
        }
        Check::Wait { reason, message, until } => {
            let planned = status.planned.is_none().then(|| Planned::of(&plan()));
            return Decision::Wait { reason, message, until, forget: true, planned };
        }
        Check::Deadline { reason, message } => {
            deadline = Some(Deadline { reason, message, rolls: context.deadline_rolls })
        }
    }
    // An expiring batch whose window is still open is evaluated now: the window's end is ignored.
    let expiring = expiring.map(|message| Expiring { message, window_open });
    let urgency =
        Urgency { expiring: expiring.as_ref(), deadline: deadline.as_ref(), overridden: overridden.as_deref() };
    let plan = plan();
    // Against the plan kept while the batch waited: what changed, and under the manual policy an
    // approval given before it is asked again (whenever it was given: the clocks of the people
    // who approve are not the engine's).
    let change = status.planned.as_ref().and_then(|kept| plan_change(&kept.deployments, &batch_deployments(&plan)));
    let manual = ApprovalPolicy::for_application(app, context.approval_default) == ApprovalPolicy::Manual;
    let restarts = plan.restarts().next().is_some();
    let void = (approved && manual && restarts && change.is_some())
        .then(|| batch.spec.approval.as_ref().and_then(crate::api::rotation_batch::Approval::key))
        .flatten();
    let evaluation = evaluate(batch, app, &plan, approved && void.is_none(), urgency, context);
    let by = batch.spec.approval.as_ref().and_then(|a| a.approved_by.as_deref()).unwrap_or("someone");
    Decision::Evaluate(said_against_the_kept_plan(evaluation, change, void, by))
}

/// What a forced start overrides, for its record: `outside the change windows (…); next opening …`.
fn overridden_text(check: &Check) -> Option<String> {
    match check {
        Check::Open => None,
        Check::Wait { message, .. } | Check::Unreadable { message } | Check::Deadline { message, .. } => {
            Some(format!("overrides: {message}"))
        }
    }
}

/// A rolling batch whose change window closed (or that a freeze now covers) finishes what is in
/// flight and starts nothing new until the next opening; a forced batch, or one whose next opening
/// comes too late for the old credentials, rolls on, and a batch that waited says why it goes on.
fn paused_mid_rollout(
    batch: &RotationBatch,
    status: &RotationBatchStatus,
    context: &DecisionContext<'_>,
) -> Option<Decision> {
    let queued = status.deployments.iter().filter(|d| is_queued(d)).count();
    let in_flight = status.deployments.iter().filter(|d| is_active(d)).count();
    let waited = matches!(
        condition_reason(status),
        Some(ReadyReason::ChangeWindowClosed | ReadyReason::Frozen | ReadyReason::ChangeWindowUnreadable)
    );
    let check = context.gate();
    if let Some(force) = batch.spec.force.as_ref().filter(|_| waited && queued > 0) {
        // Forced while paused: the record says so, and what it overrode.
        let overrides = overridden_text(&check).map(|text| format!("; {text}")).unwrap_or_default();
        let message = format!("{}{overrides}", user_action_text(force, "forced"));
        return Some(Decision::RollOn { reason: ReadyReason::Forced, message, routine: false });
    }
    if batch.spec.force.is_some() || queued == 0 {
        return None;
    }
    match check {
        Check::Open if waited => Some(Decision::RollOn {
            reason: ReadyReason::RollingOut,
            message: "the change window is open and no freeze holds it: rolling on".into(),
            routine: true,
        }),
        // Rolling outside the windows without a person: an override, announced.
        Check::Deadline { message, .. } if waited => Some(Decision::RollOn {
            reason: ReadyReason::RollingOut,
            message: format!("rolling on: waiting longer would outlive the old credentials ({message})"),
            routine: false,
        }),
        Check::Open | Check::Deadline { .. } => None,
        Check::Unreadable { message } => Some(Decision::WindowUnreadable { message, forget: false, planned: None }),
        Check::Wait { reason, message, until } => Some(window_wait(reason, &message, until, queued, in_flight)),
    }
}

/// The wait of a batch whose queued Deployments may not start yet (`to_start`), while
/// `in_flight` finish: the window closed during the rollout, or a freeze holds it.
fn window_wait(reason: ReadyReason, message: &str, until: Timestamp, to_start: usize, in_flight: usize) -> Decision {
    let verb = |n: usize, one: &str, many: &str| if n == 1 { one.to_string() } else { many.to_string() };
    let later = format!("{} {} then", count(to_start, "queued Deployment"), verb(to_start, "starts", "start"));
    let rest = if in_flight > 0 {
        format!("{} in flight {}; {later}", count(in_flight, "Deployment"), verb(in_flight, "finishes", "finish"))
    } else {
        later
    };
    let reason = if reason == ReadyReason::OutsideChangeWindow { ReadyReason::ChangeWindowClosed } else { reason };
    let closed =
        if reason == ReadyReason::ChangeWindowClosed { "the change window closed during the rollout: " } else { "" };
    Decision::Wait { reason, message: format!("{closed}{message}; {rest}"), until, forget: false, planned: None }
}

/// What a user's undo, hold or retry decides, in that order. Undo ends the batch whatever else
/// holds it; a retry waits for a user's hold like a release.
fn user_decision(
    batch: &RotationBatch,
    status: &RotationBatchStatus,
    still_rolling: usize,
    context: &DecisionContext<'_>,
) -> Option<Decision> {
    if let Some(undo) = &batch.spec.undo {
        let mut message = user_action_text(undo, "undone");
        if let Some(revocation) = context.revocation.filter(|revocation| *revocation <= context.now) {
            message.push_str(&format!(
                "; warning: the old credentials were revocable from {} and may no longer work",
                status::format_time(revocation)
            ));
        }
        return Some(Decision::Undo { message });
    }
    // An approval or a hold counts only when capdeck wrote it (`attribution_check`); a refused one
    // is said in its own condition (`record_attribution`) and the batch goes on as without it.
    if let Some(hold) = batch.spec.hold.as_ref().filter(|_| attribution_check(batch, Attributed::Hold).is_ok()) {
        let mut message = user_action_text(hold, "held");
        if still_rolling > 0 {
            message.push_str("; Deployments already rolling finish, nothing new starts");
        }
        return Some(Decision::Hold { message });
    }
    if let Some(retry) = batch.spec.retry.as_ref().filter(|retry| status.retried_at.as_ref() != Some(&retry.at)) {
        let again: Vec<&str> = status.deployments.iter().filter(|d| d.retriable()).map(|d| d.name.as_str()).collect();
        if again.is_empty() {
            // Written past `capdeck retry` (which refuses it): noted, nothing changes.
            return Some(Decision::NothingToRetry { at: retry.at.clone() });
        }
        // A retry restarts Deployments: it waits for a window and for a freeze's end like any
        // start (it is carried out at the opening), unless the batch was forced.
        if batch.spec.force.is_none() {
            match context.gate() {
                Check::Wait { reason, message, until } => {
                    return Some(window_wait(reason, &message, until, again.len(), still_rolling));
                }
                Check::Unreadable { message } => {
                    return Some(Decision::WindowUnreadable { message, forget: false, planned: None });
                }
                Check::Open | Check::Deadline { .. } => {}
            }
        }
        return Some(Decision::Retry {
            message: format!("{}; rolling {} once more", user_action_text(retry, "retried"), again.join(", ")),
            at: retry.at.clone(),
        });
    }
    None
}

/// A batch evaluated earlier and waiting for an approval: it starts once approved; while it
/// waits, credentials about to expire escalate (once).
fn evaluated_earlier(
    batch: &RotationBatch,
    status: &RotationBatchStatus,
    approved: bool,
    expiring: Option<String>,
    context: &DecisionContext<'_>,
) -> Decision {
    let escalated = matches!(
        condition_reason(status),
        Some(
            ReadyReason::CredentialsExpiring
                | ReadyReason::DeadlineBeforeChangeWindow
                | ReadyReason::DeadlineDuringFreeze
        )
    );
    let check = context.gate();
    if !approved {
        if let Some(message) = expiring.filter(|_| !escalated) {
            return Decision::Escalate {
                reason: ReadyReason::CredentialsExpiring,
                message: format!("{message}: approve now"),
            };
        }
        return match check {
            // Newly past the deadline, or for another cause (a window, then a freeze).
            Check::Deadline { reason, message } if !escalated || condition_reason(status).as_ref() != Some(&reason) => {
                Decision::Escalate { reason, message: format!("{message}: approve to roll now") }
            }
            _ => Decision::AwaitApproval,
        };
    }
    // An approval rolls inside the windows; outside them it waits for the next opening, unless
    // waiting would outlive the old credentials (then the approval is the person's decision).
    let note = match check {
        Check::Open => None,
        // Approved: the plan it approved is kept (a new rotation opens a new batch, not joins it).
        Check::Unreadable { message } if batch.spec.force.is_none() => {
            return Decision::WindowUnreadable { message, forget: false, planned: None };
        }
        Check::Wait { reason, message, until } if batch.spec.force.is_none() => {
            return Decision::Wait {
                reason,
                message: format!("approved; {message}"),
                until,
                forget: false,
                planned: None,
            };
        }
        other => overridden_text(&other),
    };
    let approval_waited = ready_condition(status)
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|entered| context.now.duration_since(entered.0).as_secs_f64().max(0.0));
    let mut started = start(batch, approved);
    if let Some(note) = note {
        started.message = format!("{}; {note}", started.message);
        started.routine = false;
    }
    Decision::Start(Start { approval_waited, ..started })
}

/// What the failure guard says about a rolling batch.
enum Guard {
    Clear,
    /// A Deployment stalled or fails while others are still queued: why.
    Halt(String),
    /// An SRE released the halted batch: who, and what it goes on despite.
    Resume(String),
}

/// The failure guard: halt when a Deployment stalled while others are still queued, or as soon
/// as a rolling Deployment's new Pods fail (even the batch's last: waiting for its progress
/// deadline helps nobody, and the halt offers undo at once). A release after the halt resumes the
/// batch, and goes on despite the failures so far and later ones (its condition says `Released`;
/// a cancel stops it).
fn failure_guard(batch: &RotationBatch, status: &RotationBatchStatus, context: &DecisionContext<'_>) -> Guard {
    let reason_now = condition_reason(status);
    if !context.halt_on_failure || reason_now == Some(ReadyReason::Released) {
        return Guard::Clear;
    }
    let failed = |d: &&BatchDeployment| {
        matches!(d.state, Some(DeploymentRolloutState::Stalled | DeploymentRolloutState::Failing))
    };
    let stalled: Vec<String> = status
        .deployments
        .iter()
        .filter(failed)
        .map(|d| {
            let what = if d.state == Some(DeploymentRolloutState::Failing) { "is failing" } else { "stalled" };
            format!("{} {what}", d.name)
        })
        .collect();
    let queued = status.deployments.iter().filter(|d| is_queued(d)).count();
    let failing = status.deployments.iter().any(|d| d.state == Some(DeploymentRolloutState::Failing));
    // A stall with nothing queued ends the batch once the others are done (Failed): no halt needed.
    if stalled.is_empty() || (queued == 0 && !failing) {
        return Guard::Clear;
    }
    // Recorded on the status, so a release is still honoured after a window paused the batch
    // (its Ready reason is then no longer the guard's); older batches: the condition's time.
    let halted_at = status.halted_at.as_ref().map(|time| time.0).or_else(|| {
        ready_condition(status)
            .filter(|condition| condition.reason == ReadyReason::RolloutFailureGuard.as_str())
            .and_then(|condition| condition.last_transition_time.as_ref())
            .map(|time| time.0)
    });
    if let (Some(halted_at), Some(released)) = (halted_at, &batch.spec.released)
        && released.at.0 >= halted_at
    {
        return Guard::Resume(format!(
            "{}; going on despite {}",
            user_action_text(released, "released"),
            stalled.join(", ")
        ));
    }
    let why = status
        .deployments
        .iter()
        .find(failed)
        .and_then(|d| d.message.as_deref())
        .map(|message| format!(" ({message})"))
        .unwrap_or_default();
    let what_next = if queued == 0 {
        "capdeck undo to go back to the previous credentials, capdeck release to wait for it, capdeck cancel to \
         stop"
            .to_string()
    } else {
        format!(
            "{} not started — capdeck undo to go back to the previous credentials, capdeck release to go on, \
             capdeck cancel to stop",
            count(queued, "queued Deployment")
        )
    };
    Guard::Halt(format!("halted: {}{why}; {what_next}", stalled.join(", ")))
}

/// The batch cannot wait for its old credentials' sake: why, and whether its window was still open
/// (then it ends early).
struct Expiring {
    message: String,
    window_open: bool,
}

/// Waiting for the next change window or a freeze's end would outlive the old credentials.
struct Deadline {
    reason: ReadyReason,
    message: String,
    /// `--on-deadline roll`: roll at once instead of asking.
    rolls: bool,
}

/// What besides the policy bears on an evaluation: expiring credentials, a deadline before the
/// next window, and what a forced start overrides (for its record).
#[derive(Clone, Copy)]
struct Urgency<'a> {
    expiring: Option<&'a Expiring>,
    deadline: Option<&'a Deadline>,
    overridden: Option<&'a str>,
}

/// Why the batch cannot wait: its old credentials may be revoked less than one expected rollout
/// after it would have rolled (docs/CREDENTIALS.md, "The margin"). `None` when there is time or
/// nothing is known.
fn credentials_expiring(batch: &RotationBatch, context: &DecisionContext<'_>) -> Option<String> {
    let revocation = context.revocation?;
    let margin = batch_margin_seconds(revocation, batch.spec.window_end.0, context.now, context.expected_rollout);
    let rollout = seconds(context.expected_rollout);
    (margin < rollout).then(|| {
        let when = if margin < 0 {
            format!("{} before", human_signed(-margin))
        } else {
            format!("only {} after", human_signed(margin))
        };
        format!(
            "old credentials revocable in {}, {when} the batch would have rolled (expected rollout {})",
            human_signed(revocation.as_second() - context.now.as_second()),
            humanize(context.expected_rollout)
        )
    })
}

/// The evaluation when the rollout may start, said against the plan kept while the batch waited:
/// what changed goes into its condition; an approval taken back (`void`, its key) is recorded
/// and its condition asks again (the evaluation, made without it, says what it waits for).
fn said_against_the_kept_plan(
    mut evaluation: Evaluation,
    change: Option<String>,
    void: Option<String>,
    by: &str,
) -> Evaluation {
    let Some(change) = change else { return evaluation };
    let said = format!("the plan changed since the window ended ({change})");
    let asked_again = void.is_some();
    evaluation.void_approval = void;
    match &mut evaluation.gate {
        Gate::AwaitApproval { message, .. } if asked_again => {
            *message = format!("{said} after {by} approved it; approve again: {message}");
        }
        Gate::Start(start) => {
            start.message = format!("{}; {said}", start.message);
            start.routine = false;
        }
        Gate::AwaitApproval { message, .. } => *message = format!("{message}; {said}"),
        Gate::Finish(outcome) => outcome.message = format!("{}; {said}", outcome.message),
    }
    evaluation
}

/// What differs between the Deployments a kept plan restarts and those restarted now:
/// `added a, b; dropped c`; `None` when the same.
fn plan_change(kept: &[BatchDeployment], now: &[BatchDeployment]) -> Option<String> {
    let restarts = |list: &[BatchDeployment]| -> std::collections::BTreeSet<String> {
        list.iter().filter(|d| d.action == DeploymentAction::Restart).map(|d| d.name.clone()).collect()
    };
    let (kept, now) = (restarts(kept), restarts(now));
    let list = |names: Vec<&String>| names.into_iter().map(String::as_str).collect::<Vec<_>>().join(", ");
    let added = list(now.difference(&kept).collect());
    let dropped = list(kept.difference(&now).collect());
    match (added.is_empty(), dropped.is_empty()) {
        (true, true) => None,
        (false, true) => Some(format!("added {added}")),
        (true, false) => Some(format!("dropped {dropped}")),
        (false, false) => Some(format!("added {added}; dropped {dropped}")),
    }
}

fn evaluate(
    batch: &RotationBatch,
    app: &CAPApplication,
    plan: &AppPlan,
    approved: bool,
    urgency: Urgency<'_>,
    context: &DecisionContext<'_>,
) -> Evaluation {
    let Urgency { expiring, deadline, overridden } = urgency;
    let deployments = batch_deployments(plan);
    let restarts: Vec<&BatchDeployment> =
        deployments.iter().filter(|d| d.action == DeploymentAction::Restart).collect();
    if restarts.is_empty() {
        let gate = Gate::Finish(nothing_to_restart(plan, &deployments));
        return Evaluation { deployments, tenants: plan.tenants, approval_required: None, void_approval: None, gate };
    }
    let required = ApprovalPolicy::for_application(app, context.approval_default) == ApprovalPolicy::Manual;
    let approval_required = (batch.spec.approval.as_ref().map(|a| a.required) != Some(required)).then_some(required);
    let recently = rolled_recently(&restarts, context);
    // Waiting for an approval while the credentials expire escalates: the same wait, louder.
    let wait = |reason: ReadyReason, message: String| match (deadline, expiring) {
        (Some(deadline), _) => Gate::AwaitApproval {
            reason: deadline.reason.clone(),
            message: format!("{message}; {}: approve to roll now", deadline.message),
        },
        (None, Some(expiring)) => Gate::AwaitApproval {
            reason: ReadyReason::CredentialsExpiring,
            message: format!("{message}; {}: approve now", expiring.message),
        },
        (None, None) => Gate::AwaitApproval { reason, message },
    };
    let gate = if !recently.is_empty() && !approved {
        wait(
            ReadyReason::StormGuard,
            format!(
                "storm guard: {} rolled less than {} ago; approve to roll again",
                recently.join(", "),
                humanize(context.min_rollout_interval)
            ),
        )
    } else if required && !approved {
        let tenants = usize::try_from(plan.tenants).unwrap_or(usize::MAX);
        let not_owned: Vec<&str> =
            deployments.iter().filter(|d| d.action == DeploymentAction::NotOwned).map(|d| d.name.as_str()).collect();
        let left_alone = if not_owned.is_empty() {
            String::new()
        } else {
            format!("; left alone, not owned by their version: {}", not_owned.join(", "))
        };
        wait(
            ReadyReason::AwaitingApproval,
            format!(
                "{} to restart, {} served{left_alone}; waiting for an approval",
                count(restarts.len(), "Deployment"),
                count(tenants, "tenant")
            ),
        )
    } else if let (Some(deadline), None, false) = (deadline, &batch.spec.force, approved) {
        if deadline.rolls {
            Gate::Start(Start {
                reason: ReadyReason::RollingOut,
                message: format!("rolling now (--on-deadline roll): {}", deadline.message),
                approval_waited: None,
                routine: false,
            })
        } else {
            Gate::AwaitApproval {
                reason: deadline.reason.clone(),
                message: format!("{}: approve to roll now", deadline.message),
            }
        }
    } else if let (Some(expiring), None, false) = (expiring.filter(|e| e.window_open), &batch.spec.force, approved) {
        Gate::Start(Start {
            reason: ReadyReason::CredentialsExpiring,
            message: format!("window ended early: {}", expiring.message),
            approval_waited: None,
            routine: false,
        })
    } else {
        let mut started = start(batch, approved);
        if let Some(note) = overridden.or(deadline.map(|d| d.message.as_str())) {
            started.message = format!("{}; {note}", started.message);
            started.routine = false;
        }
        Gate::Start(started)
    };
    Evaluation { deployments, tenants: plan.tenants, approval_required, void_approval: None, gate }
}

/// How a batch with nothing to restart ends: `Failed` when a Secret of a Deployment is missing or
/// invalid, else `NoChange`.
fn nothing_to_restart(plan: &AppPlan, deployments: &[BatchDeployment]) -> Outcome {
    if let Some(problem) = plan.problems.iter().find(|p| p.deployment.is_some()) {
        let why = if problem.kind == ProblemKind::MissingSecret {
            ReadyReason::MissingSecret
        } else {
            ReadyReason::InvalidSecret
        };
        return Outcome { phase: BatchPhase::Failed, reason: why, message: problem.message.clone() };
    }
    let message = if deployments.is_empty() {
        "no Deployment of a version in use consumes the rotated services".to_string()
    } else {
        format!("all {} already use current credentials", count(deployments.len(), "affected Deployment"))
    };
    Outcome { phase: BatchPhase::NoChange, reason: ReadyReason::NoChange, message }
}

/// The storm guard: restarts capdeck rolled less than `--min-rollout-interval` ago.
fn rolled_recently<'a>(restarts: &[&'a BatchDeployment], context: &DecisionContext<'_>) -> Vec<&'a str> {
    let recent = |at: Timestamp| {
        Duration::try_from(context.now.duration_since(at)).is_ok_and(|age| age < context.min_rollout_interval)
    };
    restarts.iter().filter(|d| (context.last_rolled)(&d.name).is_some_and(recent)).map(|d| d.name.as_str()).collect()
}

/// Why the rollout starts: forced, approved (by whom, why; an approval that is not honoured is
/// not named) or the window simply ended.
fn start(batch: &RotationBatch, approved: bool) -> Start {
    let approval = batch
        .spec
        .approval
        .as_ref()
        .filter(|_| approved)
        .and_then(|a| a.approved_by.as_ref().map(|by| (by, a.reason.as_deref())));
    let (reason, message) = match (&batch.spec.force, approval) {
        // Only a force given while the window was open ended it early.
        (Some(force), _) if force.at.0 < batch.spec.window_end.0 => {
            (ReadyReason::Forced, user_action_text(force, "window ended early: forced"))
        }
        (Some(force), _) => (ReadyReason::Forced, user_action_text(force, "forced")),
        (None, Some((by, Some(text)))) if !text.is_empty() => {
            (ReadyReason::Approved, format!("approved by {by}: {text}"))
        }
        (None, Some((by, _))) => (ReadyReason::Approved, format!("approved by {by}")),
        (None, None) => (ReadyReason::RollingOut, "window ended; rolling out".to_string()),
    };
    let routine = reason == ReadyReason::RollingOut;
    Start { reason, message, approval_waited: None, routine }
}

/// Write a decision into the status (the part of its effects that is data).
pub fn apply(decision: &Decision, status: &mut RotationBatchStatus, now: Timestamp) {
    if !matches!(decision, Decision::Wait { .. }) {
        status.waiting_until = None;
    }
    match decision {
        Decision::Finish(outcome) => {
            finish(status, outcome.phase.clone(), &outcome.reason, outcome.message.clone(), now)
        }
        Decision::Cancel { message, still_rolling } => {
            for deployment in status.deployments.iter_mut().filter(|d| is_queued(d)) {
                deployment.message = Some("not started: the batch was cancelled".into());
            }
            if *still_rolling > 0 {
                set_condition(status, false, &ReadyReason::Cancelled, message.clone(), now);
            } else {
                finish(status, BatchPhase::Cancelled, &ReadyReason::Cancelled, message.clone(), now);
            }
        }
        Decision::Drain => {}
        Decision::Hold { message } => {
            status.phase = BatchPhase::Held;
            set_condition(status, false, &ReadyReason::Held, message.clone(), now);
        }
        Decision::Halt { message } => {
            status.halted_at.get_or_insert(Time(now));
            status.phase = BatchPhase::Held;
            set_condition(status, false, &ReadyReason::RolloutFailureGuard, message.clone(), now);
        }
        Decision::Resume { message } => {
            status.phase = BatchPhase::RollingOut;
            set_condition(status, false, &ReadyReason::Released, message.clone(), now);
        }
        Decision::Collect { until } => {
            status.phase = BatchPhase::Collecting;
            let message = format!("collecting rotations until {}", status::format_time(*until));
            set_condition(status, false, &ReadyReason::WindowOpen, message, now);
            progress_summary(status);
        }
        Decision::Evaluate(evaluation) => {
            status.deployments = evaluation.deployments.clone();
            status.tenants = Some(evaluation.tenants);
            // Decided: the record is the plan now (a batch that waits again plans afresh); an
            // approval taken back keeps what it asks about, stamped now, until the batch starts.
            status.planned = match &evaluation.void_approval {
                Some(key) => Some(PlannedRollout {
                    at: Time(now),
                    deployments: evaluation.deployments.clone(),
                    tenants: evaluation.tenants,
                    taken_back: Some(key.clone()),
                }),
                // What was taken back stays so until the batch starts or ends.
                None => status.planned.take().filter(|planned| planned.taken_back.is_some()),
            };
            progress_summary(status);
            match &evaluation.gate {
                Gate::Finish(outcome) => {
                    finish(status, outcome.phase.clone(), &outcome.reason, outcome.message.clone(), now)
                }
                Gate::AwaitApproval { reason, message } => {
                    status.phase = BatchPhase::AwaitingApproval;
                    set_condition(status, false, reason, message.clone(), now);
                }
                Gate::Start(start) => begin(status, start, now),
            }
        }
        Decision::AwaitApproval => {
            status.phase = BatchPhase::AwaitingApproval;
            // Released while it waited: the condition no longer says held.
            if condition_reason(status) == Some(ReadyReason::Held) {
                let message = "the hold was lifted; waiting for an approval".to_string();
                set_condition(status, false, &ReadyReason::AwaitingApproval, message, now);
            }
        }
        Decision::Escalate { reason, message } => {
            status.phase = BatchPhase::AwaitingApproval;
            set_condition(status, false, reason, message.clone(), now);
        }
        Decision::Wait { reason, message, until, forget, planned } => {
            if *forget {
                forget_evaluation(status);
            }
            keep_plan(status, planned.as_ref(), now);
            status.phase = BatchPhase::Waiting;
            status.waiting_until = Some(Time(*until));
            set_condition(status, false, reason, message.clone(), now);
        }
        Decision::WindowUnreadable { message, forget, planned } => {
            if *forget {
                forget_evaluation(status);
            }
            keep_plan(status, planned.as_ref(), now);
            status.phase = BatchPhase::Held;
            set_condition(status, false, &ReadyReason::ChangeWindowUnreadable, message.clone(), now);
        }
        Decision::Start(start) => begin(status, start, now),
        Decision::Roll => {
            status.phase = BatchPhase::RollingOut;
            match condition_reason(status) {
                Some(ReadyReason::Held) => {
                    set_condition(status, false, &ReadyReason::Released, "the hold was lifted; rolling out".into(), now)
                }
                // Halted, and the guard no longer holds it: what failed completed after all, or
                // stalled with nothing queued (the batch ends once the others are done).
                Some(ReadyReason::RolloutFailureGuard) => {
                    status.halted_at = None;
                    let failed: Vec<&str> = status
                        .deployments
                        .iter()
                        .filter(|d| {
                            matches!(
                                d.state,
                                Some(
                                    DeploymentRolloutState::Stalled
                                        | DeploymentRolloutState::Failed
                                        | DeploymentRolloutState::Failing
                                )
                            )
                        })
                        .map(|d| d.name.as_str())
                        .collect();
                    let message = if failed.is_empty() {
                        "what halted the batch completed after all; rolling out".to_string()
                    } else {
                        format!("{} did not roll out; the batch ends once the others are done", failed.join(", "))
                    };
                    set_condition(status, false, &ReadyReason::RollingOut, message, now);
                }
                _ => {}
            }
        }
        Decision::RollOn { reason, message, .. } => {
            status.phase = BatchPhase::RollingOut;
            set_condition(status, false, reason, message.clone(), now);
        }
        Decision::Retry { message, at } => {
            for deployment in status.deployments.iter_mut().filter(|d| d.retriable()) {
                deployment.state = Some(DeploymentRolloutState::Queued);
                // One the batch pointed already is restarted again; one it never reached starts.
                deployment.retried_at = deployment.vcap_secret.as_ref().map(|_| at.clone());
                deployment.message = Some("queued: retried".into());
            }
            status.phase = BatchPhase::RollingOut;
            status.completed_at = None;
            status.halted_at = None;
            status.retried_at = Some(at.clone());
            status.rollout_started_at.get_or_insert(Time(now));
            progress_summary(status);
            set_condition(status, false, &ReadyReason::Retried, message.clone(), now);
        }
        Decision::NothingToRetry { at } => status.retried_at = Some(at.clone()),
        // The writes come first (`Reconciler::undo`); it ends the batch.
        Decision::Undo { message } => set_condition(status, false, &ReadyReason::Undone, message.clone(), now),
    }
}

/// Keep the plan made when the window ended (a batch waiting before its rollout).
fn keep_plan(status: &mut RotationBatchStatus, planned: Option<&Planned>, now: Timestamp) {
    if let Some(planned) = planned {
        status.planned = Some(PlannedRollout {
            at: Time(now),
            deployments: planned.deployments.clone(),
            tenants: planned.tenants,
            taken_back: None,
        });
    }
}

/// A batch that waits before its rollout is evaluated again when it may start (the plan, the
/// storm guard and the policy of that moment), not with what was planned before it waited.
fn forget_evaluation(status: &mut RotationBatchStatus) {
    if status.rollout_started_at.is_none() {
        status.deployments.clear();
        status.tenants = None;
        status.progress = None;
    }
}

fn begin(status: &mut RotationBatchStatus, start: &Start, now: Timestamp) {
    status.phase = BatchPhase::RollingOut;
    status.planned = None;
    status.rollout_started_at = Some(Time(now));
    set_condition(status, false, &start.reason, start.message.clone(), now);
}

/// How a rollout ends once every Deployment is done (`None` while some are not).
pub fn rollout_outcome(deployments: &[BatchDeployment]) -> Option<Outcome> {
    if !deployments.iter().all(is_done) {
        return None;
    }
    let restarted_in = |state: DeploymentRolloutState| {
        deployments.iter().filter(|d| d.action == DeploymentAction::Restart && d.state.as_ref() == Some(&state)).count()
    };
    let stalled = restarted_in(DeploymentRolloutState::Stalled);
    let failed = restarted_in(DeploymentRolloutState::Failed);
    let restarted = restarted_in(DeploymentRolloutState::Complete);
    let problems = deployments.iter().filter(|d| d.action == DeploymentAction::Problem).count();
    if stalled + failed + problems == 0 {
        return Some(Outcome {
            phase: BatchPhase::Succeeded,
            reason: ReadyReason::RolloutComplete,
            message: format!("{} rolled out with the new credentials", count(restarted, "Deployment")),
        });
    }
    let reason = if stalled > 0 {
        ReadyReason::ProgressDeadlineExceeded
    } else if failed > 0 {
        ReadyReason::WriteFailed
    } else {
        ReadyReason::InvalidSecret
    };
    Some(Outcome {
        phase: BatchPhase::Failed,
        reason,
        message: format!(
            "{restarted} rolled out, {stalled} stalled, {failed} failed, {problems} could not be planned; previous VCAP Secrets of unfinished Deployments were kept"
        ),
    })
}

/// Skip metrics of an evaluation: why a Deployment of the batch is not restarted.
pub fn skip_reasons(deployments: &[BatchDeployment]) -> impl Iterator<Item = &'static str> + '_ {
    deployments.iter().filter_map(|deployment| match deployment.action {
        DeploymentAction::Unchanged if deployment.message.as_deref() == Some(MISSING_DEPLOYMENT) => Some("missing"),
        DeploymentAction::Unchanged => Some("unchanged"),
        DeploymentAction::Problem => Some("problem"),
        DeploymentAction::NotOwned => Some("not owned"),
        DeploymentAction::Restart | DeploymentAction::Other(_) => None,
    })
}

// The decision tables' cases are the application's too (`decided_batches`: the state invariant
// walks every batch they leave behind), hence the `testing` feature; outside `cargo test` of this
// crate only that helper is used.
#[cfg(any(test, feature = "testing"))]
#[cfg_attr(not(test), allow(dead_code, unused_imports))]
pub mod tests {
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
            let forged_here =
                forged && (field == "approval" || (field == "hold" && matches!(factor, Factor::ForgedHold)));
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
            (matches!(factor, F::StormGuard | F::StormGuardApproved | F::CredentialsExpiringStormGuard)
                && name == "srv")
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
        (
            Phase::Collecting,
            F::CredentialsExpiringStormGuard,
            P::AwaitingApproval,
            ReadyReason::CredentialsExpiring,
            false,
        ),
        (Phase::Collecting, F::CredentialsExpiringForced, P::RollingOut, ReadyReason::Forced, true),
        (Phase::WindowEnded, F::CredentialsExpiring, P::RollingOut, ReadyReason::RollingOut, true),
        (
            Phase::WindowEnded,
            F::CredentialsExpiringManual,
            P::AwaitingApproval,
            ReadyReason::CredentialsExpiring,
            false,
        ),
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
        assert_eq!(
            (start.reason.clone(), start.message.as_str()),
            (ReadyReason::RollingOut, "window ended; rolling out")
        );
        // The same approval written by capdeck is named.
        batch.metadata.managed_fields = Some(vec![serde_json::from_value(json!({"manager": "capdeck-console",
            "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:approval": {"f:approvedBy": {}}}}}))
        .expect("entry")]);
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
        assert!(
            start(&open, false).message.starts_with("window ended early: forced by dave"),
            "{:?}",
            start(&open, false)
        );
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
        let Decision::Start(start) = run(Phase::AwaitingApproval, F::Approval).decision else {
            panic!("expected a start")
        };
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
        let mut context = plain_context(
            world.revocation_hours.and_then(|hours| now.checked_add(SignedDuration::from_hours(hours)).ok()),
        );
        context.windows = windows.as_ref().and_then(Option::as_ref);
        context.freeze = freeze.as_ref();
        context.deadline_rolls = world.deadline_rolls;
        if world.manual || matches!(factor, F::ManualPolicy) {
            context.approval_default = ApprovalPolicy::Manual;
        }
        // `srv` rolled a minute ago, under a 10 min storm guard.
        let a_minute_ago = now.checked_sub(SignedDuration::from_secs(MINUTE)).ok();
        let last_rolled =
            |name: &str| (matches!(factor, F::StormGuard) && name == "srv").then_some(a_minute_ago).flatten();
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
        (
            "inside a window",
            Phase::WindowEnded,
            F::Nothing,
            &INSIDE,
            P::RollingOut,
            ReadyReason::RollingOut,
            true,
            None,
        ),
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
        (
            "still collecting",
            Phase::Collecting,
            F::Nothing,
            &OUTSIDE,
            P::Collecting,
            ReadyReason::WindowOpen,
            false,
            None,
        ),
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
        let plain = TABLE.iter().map(|(phase, factor, ..)| {
            (format!("{phase:?} × {factor:?}"), after(*phase, *factor, run(*phase, *factor)))
        });
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
            (
                "manual, not approved, changed",
                &["worker"],
                true,
                false,
                "waiting for an approval; the plan changed",
                false,
            ),
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
                approval.approved_at =
                    Some(Time(context.now.checked_sub(SignedDuration::from_secs(60)).expect("time")));
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
}
