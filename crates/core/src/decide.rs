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

mod apply;
pub mod gate;
pub mod status;

pub use apply::{apply, rollout_outcome, skip_reasons};

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

/// A cancelled batch ends, once what already rolls has finished.
fn cancelled(batch: &RotationBatch, still_rolling: usize) -> Option<Decision> {
    let cancel = batch.spec.cancel.as_ref()?;
    let mut message = user_action_text(cancel, "cancelled");
    if still_rolling > 0 {
        message = format!("{message}; waiting for {} already rolling", count(still_rolling, "Deployment"));
    }
    Some(Decision::Cancel { message, still_rolling })
}

/// A batch whose rollout has started: halted by the failure guard, resumed by a release, paused
/// by a window or a freeze, or rolling on.
fn mid_rollout(batch: &RotationBatch, status: &RotationBatchStatus, context: &DecisionContext<'_>) -> Decision {
    match failure_guard(batch, status, context) {
        Guard::Halt(message) => Decision::Halt { message },
        // A release goes on despite failures, not outside the windows: it waits for the opening.
        Guard::Resume(message) => match paused_mid_rollout(batch, status, context) {
            Some(Decision::RollOn { .. }) | None => Decision::Resume { message },
            Some(wait) => wait,
        },
        Guard::Clear => paused_mid_rollout(batch, status, context).unwrap_or(Decision::Roll),
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
    if let Some(cancel) = cancelled(batch, still_rolling) {
        return cancel;
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
        return mid_rollout(batch, status, context);
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

// The decision tables' cases are the application's too (`decided_batches`: the state invariant
// walks every batch they leave behind), hence the `testing` feature; outside `cargo test` of this
// crate only that helper is used.
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
