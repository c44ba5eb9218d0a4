//! Change windows and freezes in front of a rollout (docs/WINDOWS.md), for the decision: pure.
//!
//! `check` turns `api::change_window::window_gate` (freeze first, then the next opening, then the
//! deadline of the old credentials) into what the batch does and says: roll, wait (phase
//! `Waiting`, with the time it may start), be held (the windows cannot be read), or — when waiting
//! would outlive the old credentials — ask a person now, with both times in the message.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::status::format_time;
use crate::api::Freeze;
use crate::api::change_window::{AppliedWindows, WindowGate, window_gate};
use crate::api::go_duration::humanize;
use crate::api::rotation_batch::ReadyReason;

/// What the windows and freezes that apply to a batch say at `now`.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// No freeze, inside a window or none set: roll.
    Open,
    /// Wait until `until` (the next opening, or the freeze's end and the first opening after it).
    Wait { reason: ReadyReason, message: String, until: Timestamp },
    /// The windows cannot be read: hold the batch until they are fixed.
    Unreadable { message: String },
    /// Waiting would outlive the old credentials: a person decides now (or, with
    /// `--on-deadline roll`, the batch rolls at once).
    Deadline { reason: ReadyReason, message: String },
}

/// What the gate needs besides the time.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    pub windows: Option<&'a AppliedWindows>,
    pub freeze: Option<&'a Freeze>,
    pub revocation: Option<Timestamp>,
    pub expected_rollout: Duration,
}

#[cfg(test)]
impl Inputs<'_> {
    /// No windows, no freeze: always open.
    pub const NONE: Inputs<'static> =
        Inputs { windows: None, freeze: None, revocation: None, expected_rollout: Duration::ZERO };
}

/// The gate for a rollout (or the next Deployment of one) starting at `now`.
pub fn check(inputs: Inputs<'_>, now: Timestamp) -> Check {
    if let Some(message) = inputs.windows.and_then(AppliedWindows::unreadable) {
        return Check::Unreadable { message };
    }
    let windows = inputs.windows.and_then(|applied| applied.windows.as_ref().ok());
    let frozen_until = inputs.freeze.map(Freeze::ends);
    match window_gate(now, windows, frozen_until, inputs.revocation, inputs.expected_rollout) {
        WindowGate::Open => Check::Open,
        WindowGate::OutsideWindow { opens } => Check::Wait {
            reason: ReadyReason::OutsideChangeWindow,
            message: format!(
                "outside the change windows ({}); next opening {}",
                describe(inputs.windows),
                format_time(opens)
            ),
            until: opens,
        },
        WindowGate::Frozen { until, starts } => {
            let summary = inputs.freeze.map_or_else(|| "frozen".to_string(), Freeze::summary);
            let message = if starts > until {
                format!("{summary}; then the next change window opens {}", format_time(starts))
            } else {
                summary
            };
            Check::Wait { reason: ReadyReason::Frozen, message, until: starts }
        }
        WindowGate::DeadlineFirst { starts, revocation, frozen } => {
            let what = if frozen {
                let summary = inputs.freeze.map_or_else(|| "frozen".to_string(), Freeze::summary);
                format!("{summary}; it may roll from {}", format_time(starts))
            } else {
                format!("the next change window opens {} ({})", format_time(starts), describe(inputs.windows))
            };
            let message = format!(
                "{what}, later than the old credentials allow: they may be revoked from {}, and rolling is expected to take {}",
                format_time(revocation),
                humanize(inputs.expected_rollout)
            );
            let reason =
                if frozen { ReadyReason::DeadlineDuringFreeze } else { ReadyReason::DeadlineBeforeChangeWindow };
            Check::Deadline { reason, message }
        }
    }
}

/// `Mon-Fri 22:00-05:00 Europe/Berlin, from the annotation … of CAPApplication shop/bookshop`.
fn describe(windows: Option<&AppliedWindows>) -> String {
    windows.and_then(|applied| applied.describe("the engine's --change-windows")).unwrap_or_else(|| "none".into())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::SignedDuration;
    use serde_json::json;

    use super::*;
    use crate::api::change_window::ChangeWindows;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    fn app_windows(text: &str) -> AppliedWindows {
        AppliedWindows::resolve(("shop", "bookshop", Some(text)), None, None).expect("set")
    }

    fn freeze(until: &str) -> Freeze {
        serde_json::from_value(json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
            "metadata": {"name": "namespace", "namespace": "shop"},
            "spec": {"scope": "Namespace", "until": until,
                     "frozen": {"by": "alice", "at": "2026-11-25T00:00:00Z", "reason": "release weekend"}}}))
        .expect("freeze")
    }

    /// Wednesday 2026-11-25 12:00 UTC; the window opens at 21:00 UTC (22:00 Berlin).
    const NOW: &str = "2026-11-25T12:00:00Z";
    const NIGHTS: &str = "Mon-Fri 22:00-05:00 Europe/Berlin";

    #[test]
    fn what_the_gate_says_and_why() {
        let nights = app_windows(NIGHTS);
        let broken = app_windows("Mon 25:00-26:00 UTC");
        let frozen = freeze("2026-11-25T23:00:00Z");
        let fifteen = Duration::from_secs(15 * 60);
        let revocable = |hours: i64| at(NOW).checked_add(SignedDuration::from_hours(hours)).ok();
        let inputs = |windows, freeze, revocation| Inputs { windows, freeze, revocation, expected_rollout: fifteen };
        let table: [(&str, Inputs<'_>, &str, Option<&str>); 8] = [
            ("nothing set", Inputs::NONE, "Open", None),
            ("inside the window", inputs(Some(&nights), None, None), "Open", None),
            (
                "outside: wait for the opening",
                inputs(Some(&nights), None, revocable(48)),
                "OutsideChangeWindow",
                Some("2026-11-25T21:00:00Z"),
            ),
            (
                "outside, the credentials die first",
                inputs(Some(&nights), None, revocable(9)),
                "DeadlineBeforeChangeWindow",
                None,
            ),
            (
                "frozen, then a window",
                inputs(Some(&nights), Some(&frozen), revocable(48)),
                "Frozen",
                Some("2026-11-25T23:00:00Z"),
            ),
            ("frozen past the credentials", inputs(None, Some(&frozen), revocable(5)), "DeadlineDuringFreeze", None),
            ("unreadable windows hold, whatever else", inputs(Some(&broken), Some(&frozen), None), "Unreadable", None),
            (
                "no revocation known: wait",
                inputs(Some(&nights), None, None),
                "OutsideChangeWindow",
                Some("2026-11-25T21:00:00Z"),
            ),
        ];
        for (what, inputs, expected, until) in table {
            let now = if what == "inside the window" { at("2026-11-25T22:00:00Z") } else { at(NOW) };
            let got = check(inputs, now);
            let (label, got_until) = match &got {
                Check::Open => ("Open", None),
                Check::Wait { reason, until, .. } => (reason.as_str(), Some(until.to_string())),
                Check::Unreadable { .. } => ("Unreadable", None),
                Check::Deadline { reason, .. } => (reason.as_str(), None),
            };
            assert_eq!(label, expected, "{what}: {got:?}");
            assert_eq!(got_until.as_deref(), until, "{what}");
        }
    }

    #[test]
    fn messages_say_the_windows_the_freeze_and_both_times() {
        let nights = app_windows(NIGHTS);
        let now = at(NOW);
        let revocation = at("2026-11-25T20:00:00Z");
        let inputs = Inputs {
            windows: Some(&nights),
            freeze: None,
            revocation: Some(revocation),
            expected_rollout: Duration::from_secs(900),
        };
        let Check::Deadline { message, .. } = check(inputs, now) else { panic!("a deadline") };
        assert_eq!(
            message,
            "the next change window opens 2026-11-25T21:00:00Z (Mon-Fri 22:00-05:00 Europe/Berlin from annotation \
             capdeck.dev/change-windows of CAPApplication shop/bookshop), later than the old credentials allow: \
             they may be revoked from 2026-11-25T20:00:00Z, and rolling is expected to take 15m"
        );
        let frozen = freeze("2026-11-25T23:00:00Z");
        let cluster = ChangeWindows::parse(NIGHTS).expect("parses");
        let from_flag = AppliedWindows::resolve(("shop", "bookshop", None), None, Some(&cluster)).expect("set");
        let inputs = Inputs {
            windows: Some(&from_flag),
            freeze: Some(&frozen),
            revocation: None,
            expected_rollout: Duration::ZERO,
        };
        let Check::Wait { message, .. } = check(inputs, now) else { panic!("frozen") };
        assert_eq!(message, "namespace shop frozen until 2026-11-25T23:00:00Z by alice: release weekend");
        let broken = app_windows("Mon 25:00-26:00 UTC");
        let Check::Unreadable { message } = check(Inputs { windows: Some(&broken), ..Inputs::NONE }, now) else {
            panic!("unreadable")
        };
        assert!(message.contains("CAPApplication shop/bookshop") && message.contains("kubectl annotate"), "{message}");
    }
}
