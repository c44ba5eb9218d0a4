//! How credentials are judged here: the one [`Judging`] every judge takes, assembled from what a
//! leading engine published on its Lease, the flags given, or the defaults; and the judgement over
//! the watched stores that the console, the engine's notifier and its metrics share. The judgement
//! itself is the core's, and pure (`capdeck_core::credentials`); this module brings it the
//! cluster's objects and settings.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;

use crate::api::change_window::ChangeWindows;
use crate::cluster::stores::Stores;
use crate::credentials::{
    CredentialReport, CredentialsOverview, Inputs, Judging, Timing, namespace_windows, overview_scheduled,
};
use crate::leadership::PublishedSettings;
use crate::plan::CapIndex;

/// What a reader may give to judge otherwise than the leading engine (`capdeck credentials`'
/// and `capdeck fleet`'s flags).
#[derive(Clone, Copy, Debug, Default)]
pub struct Flags<'a> {
    pub window: Option<Duration>,
    pub expected_rollout: Option<Duration>,
    pub change_windows: Option<&'a ChangeWindows>,
}

/// The settings chosen, and the words saying where the timing and the windows came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Chosen {
    pub judging: Judging,
    pub timing_source: String,
    pub windows_source: String,
}

/// The one place a reader's [`Judging`] is assembled: a flag given wins, then what the leading
/// engine published on its Lease (in `lease_namespace`), then the defaults. An observer's verdict
/// is then the leader's. (An engine judges with its own settings: `EngineConfig::judging`.)
pub fn choose(flags: Flags<'_>, leader: Option<&PublishedSettings>, lease_namespace: Option<&str>) -> Chosen {
    let (timing, timing_source) = choose_timing(flags.window, flags.expected_rollout, leader);
    let (cluster_windows, windows_source) = choose_windows(flags.change_windows, leader);
    let judging = Judging {
        timing,
        cluster_windows,
        lease_namespace: lease_namespace.map(str::to_string),
        deadline_rolls: leader.is_some_and(PublishedSettings::deadline_rolls),
    };
    Chosen { judging, timing_source, windows_source }
}

/// What a leader published on its Lease in `lease_namespace`, without flags. Windows it published
/// that cannot be read here count as none (`capdeck credentials` says so).
pub fn of_leader(settings: &PublishedSettings, lease_namespace: &str) -> Judging {
    choose(Flags::default(), Some(settings), Some(lease_namespace)).judging
}

/// Every consumed binding Secret judged from the watched stores with `judging`. The console's
/// view, the engine's notifier and its metrics all judge through here.
pub fn judge(stores: &Stores, judging: &Judging, now: Timestamp) -> CredentialsOverview {
    let mut overview = None;
    with_inputs(stores, judging, now, |inputs, schedule| overview = Some(overview_scheduled(inputs, schedule)));
    overview.unwrap_or_default()
}

/// [`judge`]'s reports one at a time (`credentials::each_report`): the engine's metrics keep a
/// number or two of each, and need not hold thousands of reports at once.
pub fn judge_each(stores: &Stores, judging: &Judging, now: Timestamp, each: impl FnMut(CredentialReport)) {
    with_inputs(stores, judging, now, |inputs, schedule| crate::credentials::each_report(inputs, schedule, each));
}

/// What judging reads from the stores, handed to `judge`.
fn with_inputs(
    stores: &Stores,
    judging: &Judging,
    now: Timestamp,
    judge: impl FnOnce(&Inputs<'_>, &crate::credentials::Schedule<'_>),
) {
    let applications = stores.applications.state();
    let index = CapIndex::new(applications.clone(), stores.versions.state(), stores.tenants.state());
    let batches = stores.batches.state();
    let bindings = stores.service_bindings();
    let namespace_windows = namespace_windows(stores.namespaces.state().iter().map(|ns| &**ns));
    let freezes = stores.freezes.state();
    let inputs = Inputs {
        applications: &applications,
        secrets: stores,
        bindings: bindings.as_deref(),
        batches: &batches,
        index: Some(&index),
        now,
        timing: judging.timing,
    };
    judge(&inputs, &judging.schedule(Some(&namespace_windows), &freezes));
}

/// Which window and expected rollout judge the credentials, and a line saying which: a flag
/// given (`Some`) wins, then the settings the leading engine published on its Lease, then the
/// defaults. An observer's verdict is then the leader's.
fn choose_timing(
    window_flag: Option<Duration>,
    expected_flag: Option<Duration>,
    leader: Option<&PublishedSettings>,
) -> (Timing, String) {
    let base = leader.map_or(Timing::DEFAULT, |settings| Timing {
        window: settings.rollout_delay(),
        expected_rollout: settings.expected_rollout(),
    });
    let chosen = Timing {
        window: window_flag.unwrap_or(base.window),
        expected_rollout: expected_flag.unwrap_or(base.expected_rollout),
    };
    let source = match (leader, window_flag.is_some() || expected_flag.is_some()) {
        (Some(_), false) => format!("the leading engine's settings ({})", chosen.text()),
        (Some(_), true) => format!("{} from your flags, not the leading engine's ({})", chosen.text(), base.text()),
        (None, false) => format!("the defaults ({}): no leading engine publishes its settings", chosen.text()),
        (None, true) => format!("{} (flags and defaults; no leading engine publishes its settings)", chosen.text()),
    };
    (chosen, source)
}

/// The cluster level of the change windows to judge with, and words saying which: the flag given
/// (`Some`) wins, then the windows the leading engine published on its Lease, then none. An
/// application's or a namespace's annotation wins over either (docs/WINDOWS.md).
fn choose_windows(flag: Option<&ChangeWindows>, leader: Option<&PublishedSettings>) -> (Option<ChangeWindows>, String) {
    let published = leader.and_then(|settings| settings.change_windows.as_deref());
    match (flag, leader, published) {
        (Some(flag), Some(_), theirs) => (
            Some(flag.clone()),
            format!(
                "cluster change windows {} from your --change-windows, not the leading engine's ({})",
                flag.text(),
                theirs.unwrap_or("none")
            ),
        ),
        (Some(flag), None, _) => {
            (Some(flag.clone()), format!("cluster change windows {} from your --change-windows", flag.text()))
        }
        (None, Some(_), Some(text)) => match ChangeWindows::parse(text) {
            Ok(windows) => (Some(windows), format!("the leading engine's cluster change windows ({text})")),
            Err(error) => (
                None,
                format!(
                    "no cluster change windows: the leading engine's cannot be read here ({error}); pass --change-windows"
                ),
            ),
        },
        (None, Some(_), None) => (None, "no cluster change windows (the leading engine sets none)".into()),
        (None, None, _) => (None, "no cluster change windows (no leading engine publishes its settings)".into()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_use_the_leaders_settings_unless_a_flag_says_otherwise() {
        let leader = PublishedSettings {
            rollout_delay_seconds: 30,
            expected_rollout_seconds: 600,
            approval: "auto".into(),
            max_parallel_rollouts: 5,
            min_rollout_interval_seconds: 600,
            change_windows: None,
            on_deadline: None,
        };
        let five = Some(Duration::from_secs(300));
        let cases = [
            (None, None, Some(&leader), (30, 600), "the leading engine's settings"),
            (None, five, Some(&leader), (30, 300), "from your flags, not the leading engine's (window 30s"),
            (None, None, None, (3600, 900), "the defaults"),
            (five, None, None, (300, 900), "flags and defaults"),
        ];
        for (window, expected, settings, (w, e), says) in cases {
            let (timing, source) = choose_timing(window, expected, settings);
            assert_eq!((timing.window.as_secs(), timing.expected_rollout.as_secs()), (w, e), "{source}");
            assert!(source.contains(says), "{source}");
        }
    }

    #[test]
    fn cluster_windows_come_from_a_flag_else_the_leader() {
        let settings = |windows: Option<&str>| PublishedSettings {
            rollout_delay_seconds: 30,
            expected_rollout_seconds: 600,
            approval: "auto".into(),
            max_parallel_rollouts: 5,
            min_rollout_interval_seconds: 600,
            change_windows: windows.map(str::to_string),
            on_deadline: None,
        };
        let nights = ChangeWindows::parse("Mon-Fri 22:00-05:00 UTC").expect("windows");
        let theirs = settings(Some("Sat 00:00-24:00 UTC"));
        let none = settings(None);
        let broken = settings(Some("Sat 25:00-26:00 UTC"));
        let cases = [
            (
                Some(&nights),
                Some(&theirs),
                Some("Mon-Fri 22:00-05:00 UTC"),
                "from your --change-windows, not the leading engine's (Sat 00:00-24:00 UTC)",
            ),
            (Some(&nights), None, Some("Mon-Fri 22:00-05:00 UTC"), "from your --change-windows"),
            (None, Some(&theirs), Some("Sat 00:00-24:00 UTC"), "the leading engine's cluster change windows (Sat"),
            (None, Some(&none), None, "the leading engine sets none"),
            (None, Some(&broken), None, "cannot be read here (range 1"),
            (None, None, None, "no leading engine publishes its settings"),
        ];
        for (flag, leader, text, says) in cases {
            let (windows, source) = choose_windows(flag, leader);
            assert_eq!(windows.as_ref().map(ChangeWindows::text), text, "{source}");
            assert!(source.contains(says), "{source}");
        }
    }
}
