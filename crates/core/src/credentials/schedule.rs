//! Change windows and freezes in the margin: when a batch whose collection window has ended would
//! start rolling (docs/CREDENTIALS.md, docs/WINDOWS.md). Pure: the caller brings the windows, the
//! freezes and the clock; the engine's gate (`api::change_window::window_gate`) decides the same.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;

use crate::api::change_window::{ANNOTATION_CHANGE_WINDOWS, AppliedWindows, ChangeWindows, WindowGate, window_gate};
use crate::api::freeze::governing;
use crate::api::{CAPApplication, Freeze};

/// What may keep a batch from rolling once its window ended: the change windows of its
/// application (its annotation, else its Namespace's, else the cluster's) and the freezes over
/// it. [`Schedule::NONE`]: nothing does, as before windows existed.
#[derive(Clone, Copy, Debug)]
pub struct Schedule<'a> {
    /// Each Namespace's `capdeck.dev/change-windows` annotation ([`namespace_windows`]); `None`
    /// when Namespaces could not be read (that level is skipped, the caller says so).
    pub namespace_windows: Option<&'a BTreeMap<String, String>>,
    /// The cluster level: the leading engine's `--change-windows` (or a flag given to the reader).
    pub cluster_windows: Option<&'a ChangeWindows>,
    /// The freezes read (lifted and ended ones are ignored).
    pub freezes: &'a [Arc<Freeze>],
    /// The namespace of the leading engine's Lease: only there is a `Cluster` freeze honoured.
    pub lease_namespace: Option<&'a str>,
    /// `--on-deadline roll`: when waiting would outlive the old credentials the engine rolls at
    /// once instead of asking a person, so the wait does not count.
    pub deadline_rolls: bool,
}

impl Schedule<'_> {
    pub const NONE: Schedule<'static> = Schedule {
        namespace_windows: None,
        cluster_windows: None,
        freezes: &[],
        lease_namespace: None,
        deadline_rolls: false,
    };
}

/// How credentials are judged besides the objects: the timing, the cluster level of the change
/// windows, where the judging engine's Lease lives (only there is a `Cluster` freeze honoured)
/// and its `--on-deadline roll`. The one type every judge takes: the engine's own settings
/// (`EngineConfig::judging`), a leading engine's published ones (`judging::of_leader` in the
/// application), or the defaults. Owned, so it can travel in a watch channel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Judging {
    pub timing: super::Timing,
    pub cluster_windows: Option<ChangeWindows>,
    pub lease_namespace: Option<String>,
    pub deadline_rolls: bool,
}

impl Judging {
    /// The [`Schedule`] these settings make with the namespaces' windows and the freezes read.
    pub fn schedule<'a>(
        &'a self,
        namespace_windows: Option<&'a BTreeMap<String, String>>,
        freezes: &'a [Arc<Freeze>],
    ) -> Schedule<'a> {
        Schedule {
            namespace_windows,
            cluster_windows: self.cluster_windows.as_ref(),
            freezes,
            lease_namespace: self.lease_namespace.as_deref(),
            deadline_rolls: self.deadline_rolls,
        }
    }
}

/// Each Namespace's `capdeck.dev/change-windows` annotation, by name: the namespace level of a
/// [`Schedule`].
pub fn namespace_windows<'n>(namespaces: impl IntoIterator<Item = &'n Namespace>) -> BTreeMap<String, String> {
    namespaces
        .into_iter()
        .filter_map(|namespace| {
            let text = namespace.annotations().get(ANNOTATION_CHANGE_WINDOWS)?;
            Some((namespace.name_any(), text.clone()))
        })
        .collect()
}

/// When a batch starts rolling, and what it waits for until then.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Start {
    pub at: Timestamp,
    pub wait: Option<Wait>,
}

impl Start {
    pub fn at_once(at: Timestamp) -> Self {
        Self { at, wait: None }
    }
}

/// What keeps a batch from rolling as soon as it may.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Wait {
    /// Outside its change windows, described as `Mon-Fri 22:00-05:00 Europe/Berlin from …`.
    Window { windows: String },
    /// A freeze covers it: `namespace shop frozen until … by alice: reason`.
    Frozen { summary: String },
    /// Its windows cannot be read: the engine holds the batch (`AppliedWindows::unreadable`).
    Unreadable { message: String },
}

impl Wait {
    /// What the batch waits for when it starts at `at`, for a reason.
    pub fn text(&self, at: Timestamp) -> String {
        match self {
            Self::Window { windows } => format!("waits for the change window opening {at} ({windows})"),
            Self::Frozen { summary } => format!("{summary}; it may roll from {at}"),
            Self::Unreadable { message } => message.clone(),
        }
    }

    /// The escalation reason the engine gives when this wait would outlive the old credentials.
    pub fn deadline_reason(&self) -> crate::api::rotation_batch::ReadyReason {
        use crate::api::rotation_batch::ReadyReason;
        match self {
            Self::Frozen { .. } => ReadyReason::DeadlineDuringFreeze,
            Self::Window { .. } | Self::Unreadable { .. } => ReadyReason::DeadlineBeforeChangeWindow,
        }
    }
}

impl Schedule<'_> {
    /// The windows in force for `namespace/application` (`app`: its object, for its annotation).
    fn windows(&self, namespace: &str, application: &str, app: Option<&CAPApplication>) -> Option<AppliedWindows> {
        let own = app.and_then(|app| app.annotations().get(ANNOTATION_CHANGE_WINDOWS)).map(String::as_str);
        let level = self.namespace_windows.and_then(|windows| windows.get(namespace)).map(String::as_str);
        AppliedWindows::resolve((namespace, application, own), level, self.cluster_windows)
    }

    /// When a batch of `namespace/application` that may roll from `earliest` starts: after every
    /// freeze in force then that covers it, at the first moment inside its change windows.
    pub(super) fn start(
        &self,
        applications: &[Arc<CAPApplication>],
        namespace: &str,
        application: &str,
        earliest: Timestamp,
    ) -> Start {
        let app = find(applications, namespace, application);
        let windows = self.windows(namespace, application, app);
        if let Some(message) = windows.as_ref().and_then(AppliedWindows::unreadable) {
            return Start { at: earliest, wait: Some(Wait::Unreadable { message }) };
        }
        let lease_namespace = self.lease_namespace.unwrap_or_default();
        let freezes = self.freezes.iter().map(AsRef::as_ref);
        let freeze = governing(freezes, lease_namespace, namespace, application, earliest);
        let parsed = windows.as_ref().and_then(|applied| applied.windows.as_ref().ok());
        // Without a revocation the gate never says DeadlineFirst: only when it would start.
        match window_gate(earliest, parsed, freeze.map(Freeze::ends), None, Duration::ZERO) {
            WindowGate::OutsideWindow { opens } => {
                Start { at: opens, wait: Some(Wait::Window { windows: describe(windows.as_ref()) }) }
            }
            WindowGate::Frozen { starts, .. } => Start {
                at: starts,
                wait: Some(Wait::Frozen { summary: freeze.map_or_else(|| "frozen".into(), Freeze::summary) }),
            },
            WindowGate::Open | WindowGate::DeadlineFirst { .. } => Start::at_once(earliest),
        }
    }

    /// The longest a batch of `namespace/application` may wait once its window (`window` after a
    /// rotation) ended, whenever from `now` the rotation comes: a rotation now waits for the
    /// freezes in force and the next opening; a later one, at worst, for the longest gap between
    /// two openings. `None`: it never waits. Seconds, with what it waits for.
    pub(super) fn longest_wait(
        &self,
        applications: &[Arc<CAPApplication>],
        namespace: &str,
        application: &str,
        now: Timestamp,
        window: Duration,
    ) -> Option<(i64, Wait)> {
        let ends = super::plus(now, super::seconds(window)).unwrap_or(now);
        let soonest = self.start(applications, namespace, application, ends);
        if let Some(wait @ Wait::Unreadable { .. }) = soonest.wait {
            return Some((0, wait));
        }
        let now_waits = soonest.wait.map(|wait| (soonest.at.as_second() - ends.as_second(), wait));
        let windows = self.windows(namespace, application, find(applications, namespace, application));
        let gap = windows.as_ref().and_then(|applied| {
            let parsed = applied.windows.as_ref().ok()?;
            longest_gap(parsed, ends).map(|gap| (gap, Wait::Window { windows: describe(Some(applied)) }))
        });
        [now_waits, gap].into_iter().flatten().filter(|(seconds, _)| *seconds > 0).max_by_key(|(seconds, _)| *seconds)
    }
}

fn find<'a>(applications: &'a [Arc<CAPApplication>], namespace: &str, name: &str) -> Option<&'a CAPApplication> {
    applications
        .iter()
        .find(|app| app.metadata.namespace.as_deref() == Some(namespace) && app.metadata.name.as_deref() == Some(name))
        .map(AsRef::as_ref)
}

/// The longest time between two openings from `from` on (two weeks and more of them, so every
/// weekly gap is seen whole), in seconds; `None` when the windows never close.
fn longest_gap(windows: &ChangeWindows, from: Timestamp) -> Option<i64> {
    let openings = windows.next_openings(from, 64);
    let gaps = openings.windows(2).map(|pair| pair[1].opens.as_second() - pair[0].closes.as_second());
    gaps.max()
}

/// `Mon-Fri 22:00-05:00 Europe/Berlin from the annotation … of CAPApplication shop/bookshop`.
fn describe(windows: Option<&AppliedWindows>) -> String {
    windows
        .and_then(|applied| applied.describe("the cluster's change windows"))
        .unwrap_or_else(|| "no change windows".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    #[test]
    fn the_longest_gap_is_the_weekend() {
        let nights = ChangeWindows::parse("Mon-Fri 22:00-05:00 UTC").expect("windows");
        // Saturday 05:00 to Monday 22:00.
        assert_eq!(longest_gap(&nights, at("2026-11-25T12:00:00Z")), Some(65 * 3600));
        let always = ChangeWindows::parse("Mon-Sun 00:00-24:00 UTC").expect("windows");
        assert_eq!(longest_gap(&always, at("2026-11-25T12:00:00Z")), None, "never closes");
    }
}
