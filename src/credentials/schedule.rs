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

/// What a reader that keeps them (the console) judges margins with besides the timing: the
/// leading engine's published cluster windows, where its Lease lives and its `--on-deadline`
/// (else the reader's own engine's). Owned, so it can travel in a watch channel. `timing: None`
/// is the defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Judging {
    pub timing: Option<super::Timing>,
    pub cluster_windows: Option<String>,
    pub lease_namespace: Option<String>,
    pub deadline_rolls: bool,
}

impl Judging {
    /// From what a leader published on its Lease in `lease_namespace`.
    pub fn of_leader(settings: &crate::cluster::leader::PublishedSettings, lease_namespace: &str) -> Self {
        Self {
            timing: Some(super::Timing {
                window: settings.rollout_delay(),
                expected_rollout: settings.expected_rollout(),
            }),
            cluster_windows: settings.change_windows.clone(),
            lease_namespace: Some(lease_namespace.to_string()),
            deadline_rolls: settings.deadline_rolls(),
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

/// The `capdeck.dev/change-windows` annotation of each Namespace in `scope` (one GET for one
/// namespace, a LIST of its name where only listing is allowed; a LIST for all), or why they
/// cannot be read.
pub async fn read_namespace_windows(
    client: &kube::Client,
    scope: &crate::cluster::Scope,
) -> Result<BTreeMap<String, String>, String> {
    let api: kube::Api<crate::api::lenient::Lenient<Namespace>> = kube::Api::all(client.clone());
    // A Namespace that does not decode has no windows capdeck can read (doctor names it).
    let namespaces = match scope {
        crate::cluster::Scope::All => {
            crate::cluster::list_each(&api, &kube::api::ListParams::default()).await.map(|listed| listed.items)
        }
        crate::cluster::Scope::Namespace(namespace) => crate::cluster::get_or_list_by_name(&api, namespace)
            .await
            .map(|found| found.and_then(Result::ok).into_iter().collect()),
    };
    match namespaces {
        Ok(namespaces) => Ok(namespace_windows(&namespaces)),
        Err(error) if crate::cluster::is_forbidden(&error) => Err(format!(
            "you may not {} namespaces",
            if matches!(scope, crate::cluster::Scope::All) { "list" } else { "get or list" }
        )),
        Err(error) => Err(format!("cannot read Namespaces: {}", crate::cluster::describe_error(&error))),
    }
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
