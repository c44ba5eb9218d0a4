//! What a batch is doing, derived once from its phase, its `Ready` reason and its window: every
//! surface renders this value, never the phase or the reason on its own. They include the CLI's
//! table, wide and JSON; the console's rows, detail and colours; `kubectl get rb`'s STATE column
//! (`status.state`, written with every status); the metrics; and the notifications. A new state
//! is a new variant, and the compiler then lists every place that must say it.

use k8s_openapi::jiff::Timestamp;

use super::{BatchPhase, ReadyReason, RotationBatch, RotationBatchStatus};

/// A batch's state, as people say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchState {
    /// Collecting rotations until its window ends.
    Collecting {
        until: Timestamp,
    },
    /// A person must approve (or force) before anything restarts.
    AwaitingApproval {
        why: ApprovalNeed,
    },
    /// Waiting for a time: a change window to open, a freeze to end. `until`: when it may start.
    Waiting {
        why: WaitCause,
        until: Option<Timestamp>,
    },
    RollingOut,
    /// Cancelled while Deployments were rolling: they finish, nothing new starts.
    Cancelling,
    /// Pointing the Deployments back at their previous VCAP Secrets (ends `Undone`).
    Undoing,
    /// Nothing starts until a release.
    Held {
        by: HeldBy,
    },
    Succeeded,
    NoChange,
    Failed {
        why: FailureCause,
    },
    Cancelled,
    Superseded,
    Undone,
    /// A phase written by another version of capdeck (bounded: it is shown and labelled).
    Unknown {
        phase: String,
    },
}

/// A character `status.state` may hold (the CRD's pattern says the same): no control character
/// (C0, DEL, C1) and no bidirectional override, which would make kubectl's column say something
/// else than it holds.
pub fn shown_as_is(c: char) -> bool {
    !(c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'))
}

/// The CRD's pattern for `status.state`: what [`shown_as_is`] allows (RE2 and Rust regex syntax).
pub const STATE_PATTERN: &str = r"^[^\x00-\x1f\x7f-\x9f\x{202A}-\x{202E}\x{2066}-\x{2069}]*$";

/// How long `status.state` may be (the CRD's schema says the same).
pub const MAX_STATE: usize = 64;

/// What `status.state` should say for `status` (bounded), to write or to compare with what it
/// says: anyone who may write the status may write it wrong, and the engine puts it right.
pub fn written_state(window_end: Timestamp, status: &RotationBatchStatus) -> String {
    // One character is kept for the `…` of a cut.
    crate::api::common::bounded(&BatchState::of_status(window_end, status).label(), MAX_STATE - 1).into_owned()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalNeed {
    /// The approval policy (`--approval manual` or the application's annotation).
    Policy,
    /// A Deployment was rolled too recently.
    StormGuard,
    /// The old credentials may be revoked before the batch would roll.
    CredentialsExpiring,
    /// The next change window opens too late for the old credentials.
    WindowTooLate,
    /// The freeze ends too late for the old credentials.
    FreezeTooLong,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitCause {
    /// Outside the application's change windows.
    OutsideWindow,
    /// The change window closed during the rollout: the rest waits for the next opening.
    WindowClosed,
    /// A freeze covers the application.
    Frozen,
    /// A reason from another version of capdeck: the time alone is known.
    Unsaid,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeldBy {
    /// `capdeck hold` (the APPROVAL column names who).
    Person,
    /// New Pods failed or a Deployment stalled (`--halt-on-failure`).
    FailureGuard,
    /// The application's change windows cannot be read.
    UnreadableWindows,
    /// A reason from another version of capdeck.
    Unsaid,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureCause {
    /// A Deployment's progress deadline passed.
    Stalled,
    SecretMissing,
    SecretInvalid,
    WriteFailed,
    /// A reason this capdeck does not know.
    Unsaid,
}

/// A number of seconds as a time span, in the caller's format (the console never writes a minute
/// in seconds; the CLI writes kubectl's ages).
pub type Relative<'a> = &'a dyn Fn(i64) -> String;

impl BatchState {
    pub fn of(batch: &RotationBatch) -> Self {
        match &batch.status {
            // The engine writes no status while a batch merely collects.
            None => Self::Collecting { until: batch.spec.window_end.0 },
            Some(status) => Self::of_status(batch.spec.window_end.0, status),
        }
    }

    /// From the status alone (and the window's end, for a batch that collects): what the engine
    /// writes to `status.state` with every status.
    pub fn of_status(window_end: Timestamp, status: &RotationBatchStatus) -> Self {
        let reason = status
            .conditions
            .iter()
            .find(|c| c.type_ == crate::api::common::READY)
            .map(|c| ReadyReason::from(c.reason.as_str()));
        let until = status.waiting_until.as_ref().map(|t| t.0);
        match (&status.phase, reason) {
            // An undo the engine still carries out, whatever held the batch.
            (BatchPhase::Held | BatchPhase::RollingOut | BatchPhase::Failed, Some(ReadyReason::Undone)) => {
                Self::Undoing
            }
            (BatchPhase::Collecting, _) => Self::Collecting { until: window_end },
            (BatchPhase::AwaitingApproval, reason) => Self::AwaitingApproval {
                why: match reason {
                    Some(ReadyReason::StormGuard) => ApprovalNeed::StormGuard,
                    Some(ReadyReason::CredentialsExpiring) => ApprovalNeed::CredentialsExpiring,
                    Some(ReadyReason::DeadlineBeforeChangeWindow) => ApprovalNeed::WindowTooLate,
                    Some(ReadyReason::DeadlineDuringFreeze) => ApprovalNeed::FreezeTooLong,
                    _ => ApprovalNeed::Policy,
                },
            },
            (BatchPhase::Waiting, reason) => Self::Waiting {
                why: match reason {
                    Some(ReadyReason::Frozen) => WaitCause::Frozen,
                    Some(ReadyReason::ChangeWindowClosed) => WaitCause::WindowClosed,
                    Some(ReadyReason::OutsideChangeWindow) => WaitCause::OutsideWindow,
                    _ => WaitCause::Unsaid,
                },
                until,
            },
            (BatchPhase::RollingOut, Some(ReadyReason::Cancelled)) => Self::Cancelling,
            (BatchPhase::RollingOut, _) => Self::RollingOut,
            (BatchPhase::Held, reason) => Self::Held {
                by: match reason {
                    Some(ReadyReason::RolloutFailureGuard) => HeldBy::FailureGuard,
                    Some(ReadyReason::ChangeWindowUnreadable) => HeldBy::UnreadableWindows,
                    Some(ReadyReason::Held) => HeldBy::Person,
                    _ => HeldBy::Unsaid,
                },
            },
            (BatchPhase::Succeeded, _) => Self::Succeeded,
            (BatchPhase::NoChange, _) => Self::NoChange,
            (BatchPhase::Failed, reason) => Self::Failed {
                why: match reason {
                    Some(ReadyReason::ProgressDeadlineExceeded) => FailureCause::Stalled,
                    Some(ReadyReason::MissingSecret) => FailureCause::SecretMissing,
                    Some(ReadyReason::InvalidSecret) => FailureCause::SecretInvalid,
                    Some(ReadyReason::WriteFailed) => FailureCause::WriteFailed,
                    _ => FailureCause::Unsaid,
                },
            },
            (BatchPhase::Cancelled, _) => Self::Cancelled,
            (BatchPhase::Superseded, _) => Self::Superseded,
            (BatchPhase::Undone, _) => Self::Undone,
            (BatchPhase::Other(phase), _) => {
                // Shown, labelled and written to `status.state`: short, and no control character.
                let printable: String = phase.chars().map(|c| if shown_as_is(c) { c } else { '\u{FFFD}' }).collect();
                Self::Unknown { phase: crate::api::common::bounded(&printable, 40).into_owned() }
            }
        }
    }

    /// The one word every surface shows first (and colours).
    pub fn word(&self) -> &str {
        match self {
            Self::Collecting { .. } => "Collecting",
            Self::AwaitingApproval { .. } => "AwaitingApproval",
            Self::Waiting { why: WaitCause::Frozen, .. } => "Frozen",
            Self::Waiting { .. } => "Waiting",
            Self::RollingOut => "RollingOut",
            Self::Cancelling => "Cancelling",
            Self::Undoing => "Undoing",
            Self::Held { .. } => "Held",
            Self::Succeeded => "Succeeded",
            Self::NoChange => "NoChange",
            Self::Failed { .. } => "Failed",
            Self::Cancelled => "Cancelled",
            Self::Superseded => "Superseded",
            Self::Undone => "Undone",
            Self::Unknown { phase } => phase,
        }
    }

    /// Why, when the word does not say it all: the same few words on every surface.
    pub fn cause(&self) -> Option<&'static str> {
        match self {
            Self::AwaitingApproval { why } => match why {
                ApprovalNeed::Policy => None,
                ApprovalNeed::StormGuard => Some("storm guard"),
                ApprovalNeed::CredentialsExpiring => Some("credentials expiring"),
                ApprovalNeed::WindowTooLate => Some("escalated: window too late"),
                ApprovalNeed::FreezeTooLong => Some("escalated: freeze too long"),
            },
            Self::Waiting { why, .. } => match why {
                WaitCause::OutsideWindow => Some("outside window"),
                WaitCause::WindowClosed => Some("window closed"),
                WaitCause::Frozen | WaitCause::Unsaid => None,
            },
            Self::Held { by } => Some(match by {
                HeldBy::Person => "by a person",
                HeldBy::FailureGuard => "failure guard",
                HeldBy::UnreadableWindows => "change windows unreadable",
                HeldBy::Unsaid => return None,
            }),
            Self::Failed { why } => match why {
                FailureCause::Stalled => Some("stalled"),
                FailureCause::SecretMissing => Some("secret missing"),
                FailureCause::SecretInvalid => Some("secret invalid"),
                FailureCause::WriteFailed => Some("write failed"),
                FailureCause::Unsaid => None,
            },
            Self::Collecting { .. }
            | Self::RollingOut
            | Self::Cancelling
            | Self::Undoing
            | Self::Succeeded
            | Self::NoChange
            | Self::Cancelled
            | Self::Superseded
            | Self::Undone
            | Self::Unknown { .. } => None,
        }
    }

    /// `Held · failure guard`: the word and its cause, without a clock (`kubectl get rb`, the
    /// metrics, the notifications).
    pub fn label(&self) -> String {
        match self.cause() {
            Some(cause) => format!("{} · {cause}", self.word()),
            None => self.word().to_string(),
        }
    }

    /// The label with when the batch may start, at `now`: `Waiting · outside window, opens in
    /// 3h12m`, `Frozen · until in 2d4h` (the CLI's table and JSON, the console).
    pub fn text(&self, now: Timestamp, relative: Relative<'_>) -> String {
        match (self.cause(), self.when(now, relative)) {
            (Some(cause), Some(when)) => format!("{} · {cause}, {when}", self.word()),
            (None, Some(when)) => format!("{} · {when}", self.word()),
            _ => self.label(),
        }
    }

    /// `opens in 3h12m`, `resumes in 3h`, `until in 2d4h`; a time already past says the engine
    /// has not moved the batch on yet (its next pass will).
    pub fn when(&self, now: Timestamp, relative: Relative<'_>) -> Option<String> {
        let Self::Waiting { why, until: Some(at) } = self else { return None };
        let (ahead, due) = match why {
            WaitCause::OutsideWindow => ("opens in", "opening now"),
            WaitCause::WindowClosed => ("resumes in", "resuming now"),
            WaitCause::Frozen | WaitCause::Unsaid => ("until in", "ending now"),
        };
        if crate::api::lenient::is_forever(*at) {
            return Some("forever".into());
        }
        let seconds = at.as_second() - now.as_second();
        Some(if seconds > 0 { format!("{ahead} {}", relative(seconds)) } else { due.to_string() })
    }

    /// When the batch may start, for a state that waits for a time.
    pub fn starts(&self) -> Option<Timestamp> {
        match self {
            Self::Waiting { until, .. } => *until,
            _ => None,
        }
    }

    /// Every state the engine can write, one example each (the invariant tests walk them; the
    /// docs' state table is made from them). An exhaustive match keeps it complete: a new variant
    /// does not compile until it is listed here.
    pub fn every() -> Vec<Self> {
        let at = Timestamp::UNIX_EPOCH;
        let all = vec![
            Self::Collecting { until: at },
            Self::AwaitingApproval { why: ApprovalNeed::Policy },
            Self::AwaitingApproval { why: ApprovalNeed::StormGuard },
            Self::AwaitingApproval { why: ApprovalNeed::CredentialsExpiring },
            Self::AwaitingApproval { why: ApprovalNeed::WindowTooLate },
            Self::AwaitingApproval { why: ApprovalNeed::FreezeTooLong },
            Self::Waiting { why: WaitCause::OutsideWindow, until: Some(at) },
            Self::Waiting { why: WaitCause::WindowClosed, until: Some(at) },
            Self::Waiting { why: WaitCause::Frozen, until: Some(at) },
            Self::Waiting { why: WaitCause::Unsaid, until: Some(at) },
            Self::RollingOut,
            Self::Cancelling,
            Self::Undoing,
            Self::Held { by: HeldBy::Person },
            Self::Held { by: HeldBy::FailureGuard },
            Self::Held { by: HeldBy::UnreadableWindows },
            Self::Held { by: HeldBy::Unsaid },
            Self::Succeeded,
            Self::NoChange,
            Self::Failed { why: FailureCause::Stalled },
            Self::Failed { why: FailureCause::SecretMissing },
            Self::Failed { why: FailureCause::SecretInvalid },
            Self::Failed { why: FailureCause::WriteFailed },
            Self::Failed { why: FailureCause::Unsaid },
            Self::Cancelled,
            Self::Superseded,
            Self::Undone,
        ];
        // Not called: it only makes the compiler check that `all` names every variant.
        fn listed(state: &BatchState) {
            match state {
                BatchState::Collecting { .. }
                | BatchState::AwaitingApproval {
                    why:
                        ApprovalNeed::Policy
                        | ApprovalNeed::StormGuard
                        | ApprovalNeed::CredentialsExpiring
                        | ApprovalNeed::WindowTooLate
                        | ApprovalNeed::FreezeTooLong,
                }
                | BatchState::Waiting {
                    why: WaitCause::OutsideWindow | WaitCause::WindowClosed | WaitCause::Frozen | WaitCause::Unsaid,
                    ..
                }
                | BatchState::RollingOut
                | BatchState::Cancelling
                | BatchState::Undoing
                | BatchState::Held {
                    by: HeldBy::Person | HeldBy::FailureGuard | HeldBy::UnreadableWindows | HeldBy::Unsaid,
                }
                | BatchState::Succeeded
                | BatchState::NoChange
                | BatchState::Failed {
                    why:
                        FailureCause::Stalled
                        | FailureCause::SecretMissing
                        | FailureCause::SecretInvalid
                        | FailureCause::WriteFailed
                        | FailureCause::Unsaid,
                }
                | BatchState::Cancelled
                | BatchState::Superseded
                | BatchState::Undone
                | BatchState::Unknown { .. } => {}
            }
        }
        let _ = listed;
        all
    }

    /// The phase and the reason the engine writes for this state (the docs' state table).
    pub fn written_as(&self) -> (BatchPhase, &'static [ReadyReason]) {
        use ReadyReason as R;
        match self {
            Self::Collecting { .. } => (BatchPhase::Collecting, &[R::WindowOpen]),
            Self::AwaitingApproval { why } => (
                BatchPhase::AwaitingApproval,
                match why {
                    ApprovalNeed::Policy => &[R::AwaitingApproval],
                    ApprovalNeed::StormGuard => &[R::StormGuard],
                    ApprovalNeed::CredentialsExpiring => &[R::CredentialsExpiring],
                    ApprovalNeed::WindowTooLate => &[R::DeadlineBeforeChangeWindow],
                    ApprovalNeed::FreezeTooLong => &[R::DeadlineDuringFreeze],
                },
            ),
            Self::Waiting { why, .. } => (
                BatchPhase::Waiting,
                match why {
                    WaitCause::OutsideWindow => &[R::OutsideChangeWindow],
                    WaitCause::WindowClosed => &[R::ChangeWindowClosed],
                    WaitCause::Frozen => &[R::Frozen],
                    WaitCause::Unsaid => &[],
                },
            ),
            Self::RollingOut => (
                BatchPhase::RollingOut,
                &[R::RollingOut, R::Approved, R::Forced, R::Released, R::Retried, R::CredentialsExpiring],
            ),
            Self::Cancelling => (BatchPhase::RollingOut, &[R::Cancelled]),
            Self::Undoing => (BatchPhase::Held, &[R::Undone]),
            Self::Held { by } => (
                BatchPhase::Held,
                match by {
                    HeldBy::Person => &[R::Held],
                    HeldBy::FailureGuard => &[R::RolloutFailureGuard],
                    HeldBy::UnreadableWindows => &[R::ChangeWindowUnreadable],
                    HeldBy::Unsaid => &[],
                },
            ),
            Self::Succeeded => (BatchPhase::Succeeded, &[R::RolloutComplete]),
            Self::NoChange => (BatchPhase::NoChange, &[R::NoChange]),
            Self::Failed { why } => (
                BatchPhase::Failed,
                match why {
                    FailureCause::Stalled => &[R::ProgressDeadlineExceeded],
                    FailureCause::SecretMissing => &[R::MissingSecret],
                    FailureCause::SecretInvalid => &[R::InvalidSecret],
                    FailureCause::WriteFailed => &[R::WriteFailed],
                    FailureCause::Unsaid => &[],
                },
            ),
            Self::Cancelled => (BatchPhase::Cancelled, &[R::Cancelled, R::OptedOut]),
            Self::Superseded => (BatchPhase::Superseded, &[R::Superseded]),
            Self::Undone => (BatchPhase::Undone, &[R::Undone]),
            Self::Unknown { phase } => (BatchPhase::Other(phase.clone()), &[]),
        }
    }

    /// What a person does about it, for docs/BATCHES.md.
    pub fn what_to_do(&self) -> &'static str {
        match self {
            Self::Collecting { .. } => "nothing; `capdeck force` ends the window now",
            Self::AwaitingApproval { .. } => "`capdeck approve` (its `--dry-run` lists what restarts), or cancel",
            Self::Waiting { why: WaitCause::Frozen, .. } => "wait for the freeze's end, or `capdeck force`",
            Self::Waiting { .. } => "wait for the window, or `capdeck force`",
            Self::RollingOut | Self::Cancelling | Self::Undoing => "follow it (`capdeck batches -w`)",
            Self::Held { by: HeldBy::Person } => "`capdeck release` when ready, or cancel",
            Self::Held { by: HeldBy::FailureGuard } => "`capdeck retry`, `capdeck undo`, `capdeck release` or cancel",
            Self::Held { by: HeldBy::UnreadableWindows } => {
                "fix the change-window annotation (`capdeck doctor` names it)"
            }
            Self::Held { by: HeldBy::Unsaid } => "read the message; `capdeck release` goes on",
            Self::Failed { why: FailureCause::SecretMissing | FailureCause::SecretInvalid } => {
                "fix the binding Secret the message names; its next rotation opens a new batch"
            }
            Self::Failed { .. } => "`capdeck retry` or `capdeck undo` (the message names the Deployment)",
            Self::Succeeded | Self::NoChange | Self::Cancelled | Self::Superseded | Self::Undone => "nothing",
            Self::Unknown { .. } => "upgrade capdeck",
        }
    }
}

/// docs/BATCHES.md's state table, made from the type (a test keeps the file equal to it).
pub fn docs_table() -> String {
    let mut out = String::from("| state | phase | `Ready` reason | what a person does |\n|---|---|---|---|\n");
    for state in BatchState::every() {
        let (phase, reasons) = state.written_as();
        let reasons: Vec<String> = reasons.iter().map(|reason| format!("`{reason}`")).collect();
        let reasons =
            if reasons.is_empty() { "one this capdeck does not know".to_string() } else { reasons.join(", ") };
        let phase = match state {
            BatchState::Undoing => "Held, RollingOut or Failed".to_string(),
            _ => phase.to_string(),
        };
        out.push_str(&format!("| `{}` | {phase} | {reasons} | {} |\n", state.label(), state.what_to_do()));
    }
    out
}

impl std::fmt::Display for BatchState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::common::{Condition, ConditionStatus, READY};

    fn status(phase: &BatchPhase, reason: Option<&ReadyReason>) -> RotationBatchStatus {
        RotationBatchStatus {
            phase: phase.clone(),
            waiting_until: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH)),
            conditions: reason
                .map(|reason| Condition {
                    type_: READY.into(),
                    status: ConditionStatus::False,
                    reason: reason.to_string(),
                    ..Condition::default()
                })
                .into_iter()
                .collect(),
            ..RotationBatchStatus::default()
        }
    }

    /// What each state says it is written as reads back as that state, and every phase × reason
    /// pair (even ones the engine never writes) reads as some state, with a label and no panic.
    #[test]
    fn every_state_reads_back_from_what_it_is_written_as() {
        for state in BatchState::every() {
            let (phase, reasons) = state.written_as();
            let reasons: Vec<Option<&ReadyReason>> =
                if reasons.is_empty() { vec![None] } else { reasons.iter().map(Some).collect() };
            for reason in reasons {
                let read = BatchState::of_status(Timestamp::UNIX_EPOCH, &status(&phase, reason));
                assert_eq!(read.label(), state.label(), "{phase} + {reason:?}: read {read:?}, written for {state:?}");
            }
        }
        let mut phases: Vec<BatchPhase> = BatchPhase::KNOWN.iter().map(|p| BatchPhase::from(*p)).collect();
        phases.push(BatchPhase::Other("Paused".into()));
        let mut reasons: Vec<Option<ReadyReason>> =
            ReadyReason::KNOWN.iter().map(|r| Some(ReadyReason::from(*r))).collect();
        reasons.extend([None, Some(ReadyReason::Other("Later".into()))]);
        for phase in &phases {
            for reason in &reasons {
                let state = BatchState::of_status(Timestamp::UNIX_EPOCH, &status(phase, reason.as_ref()));
                assert!(!state.word().is_empty(), "{phase} + {reason:?}");
                assert!(
                    BatchState::every().iter().any(|known| known.label() == state.label())
                        || matches!(state, BatchState::Unknown { .. }),
                    "{phase} + {reason:?} reads as {state:?}, which `every` does not list"
                );
            }
        }
    }

    /// docs/BATCHES.md's state table is the type's: a new state, a renamed cause or a new reason
    /// changes the docs too.
    #[test]
    fn the_docs_state_table_is_made_from_the_type() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/BATCHES.md");
        let text = std::fs::read_to_string(&path).expect("docs/BATCHES.md");
        let (begin, end) =
            ("<!-- states:begin (generated from BatchState; do not edit by hand) -->\n", "<!-- states:end -->");
        let start = text.find(begin).expect("the begin marker") + begin.len();
        let stop = text.find(end).expect("the end marker");
        let table = docs_table();
        if std::env::var_os("CAPDECK_UPDATE_ASSETS").is_some() {
            std::fs::write(&path, format!("{}{table}{}", &text[..start], &text[stop..])).expect("write");
            return;
        }
        assert_eq!(&text[start..stop], table, "docs/BATCHES.md's state table differs from BatchState");
    }

    /// `status.state` as someone else wrote it (an older object, a forged one) is stale; what the
    /// engine writes is bounded and printable whatever the phase says.
    #[test]
    fn a_state_text_that_says_otherwise_is_stale_and_what_is_written_is_printable() {
        let object = |state: Option<&str>, phase: &str| -> RotationBatch {
            super::super::testing::batch(serde_json::json!({"status": {"phase": phase, "state": state,
                "conditions": super::super::testing::ready("ProgressDeadlineExceeded")}}))
        };
        assert!(object(Some("Succeeded"), "Failed").state_text_stale(), "a forged state");
        assert!(object(None, "Failed").state_text_stale(), "written before the field existed");
        assert!(!object(Some("Failed · stalled"), "Failed").state_text_stale());
        let evil = format!("\x1b[31m\u{9b}\u{202e}{}\n", "P".repeat(300));
        let batch = object(None, &evil);
        let written = written_state(Timestamp::UNIX_EPOCH, batch.status.as_ref().expect("status"));
        assert!(written.chars().count() <= MAX_STATE && written.chars().all(shown_as_is), "{written:?}");
        let pattern = regex::Regex::new(STATE_PATTERN).expect("the pattern");
        assert!(
            pattern.is_match(&written) && !pattern.is_match("Succeeded\u{9b}31m") && !pattern.is_match("\u{202e}X")
        );
        assert_eq!(batch.state().word().chars().count(), 41, "the unknown phase, cut with its ellipsis");
    }

    #[test]
    fn the_text_adds_when_to_the_label() {
        let now: Timestamp = "2026-11-23T12:00:00Z".parse().expect("time");
        let at = |s: i64| Some(Timestamp::from_second(now.as_second() + s).expect("time"));
        let relative: Relative<'_> = &|s| format!("{}m", s / 60);
        let outside = BatchState::Waiting { why: WaitCause::OutsideWindow, until: at(600) };
        assert_eq!(outside.text(now, relative), "Waiting · outside window, opens in 10m");
        assert_eq!(outside.label(), "Waiting · outside window");
        let frozen = BatchState::Waiting { why: WaitCause::Frozen, until: at(-5) };
        assert_eq!(frozen.text(now, relative), "Frozen · ending now");
        assert_eq!(frozen.label(), "Frozen");
        let guard = BatchState::Held { by: HeldBy::FailureGuard };
        assert_eq!(guard.text(now, relative), "Held · failure guard");
    }
}
