//! `capdeck --demo`: the sandbox cluster (seed `demo`) served on a local port, the simulated
//! workload controller, a credential rotator, the engine attached as leader with a 30 s window,
//! and the console on top, reaching the sandbox over HTTP through a real `kube::Client` like any
//! cluster. Nothing is printed to the terminal but the console.

pub mod sample;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::cluster::ClusterTarget;
use crate::console::ConsoleSetup;
use crate::engine::settings::EngineSettings;
use crate::sandbox::simulate::WorkloadSimulation;
use crate::sandbox::{Sandbox, write_kubeconfig};

/// The demo's batch window.
pub const DEMO_WINDOW: &str = "30s";
/// Rotated as soon as the demo starts, so batches show up in its first minute: one app that
/// needs an approval, one that rolls by itself, one whose Deployment stalls.
pub const ROTATED_AT_START: &[(&str, &str)] =
    &[("cap-hr", "hr-portal-uaa-bind"), ("cap-shop", "bookshop-uaa-bind"), ("cap-shop", "travel-uaa-bind")];

/// The demo application with a change window (docs/WINDOWS.md): its first batch waits for it.
pub const WINDOWED_APPLICATION: (&str, &str) = ("cap-shop", "bookshop");

/// A daily 30-minute window (UTC) opening at the second whole minute after `now`, so a newcomer
/// sees a batch wait (`Waiting · opens in 1m40s`) and then roll at the opening by itself.
pub fn demo_change_window(now: k8s_openapi::jiff::Timestamp) -> String {
    let second = now.as_second();
    let opens = second - second.rem_euclid(60) + 120;
    let minute = |at: i64| {
        let of_day = at.rem_euclid(86_400) / 60;
        format!("{:02}:{:02}", of_day / 60, of_day % 60)
    };
    format!("Mon-Sun {}-{} UTC", minute(opens), minute(opens + 30 * 60))
}

async fn give_a_change_window(sandbox: &Sandbox, now: k8s_openapi::jiff::Timestamp) -> Result<(), kube::Error> {
    let (namespace, name) = WINDOWED_APPLICATION;
    let api: kube::Api<crate::api::CAPApplication> = kube::Api::namespaced(sandbox.client(), namespace);
    let windows = demo_change_window(now);
    let patch = serde_json::json!({"metadata": {"annotations": {crate::api::change_window::ANNOTATION_CHANGE_WINDOWS: windows}}});
    api.patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.map(|_| ())
}

/// Where the demo writes its kubeconfig.
pub fn kubeconfig_path() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("capdeck-demo-{}", std::process::id())).join("kubeconfig")
}

/// What the demo runs with, built by `commands`: the engine with the demo's window, its Lease in
/// the install namespace, leading unless told to observe.
pub struct DemoConfig {
    pub engine: EngineSettings,
    /// How often the credential rotator rotates a random binding Secret (`None`: it does not).
    pub rotation: Option<(Duration, Duration)>,
}

pub async fn run(cluster: &ClusterTarget, config: DemoConfig, setup: ConsoleSetup) -> anyhow::Result<ExitCode> {
    let sandbox = Sandbox::default();
    sandbox.load_demo().map_err(|error| anyhow::anyhow!("the demo seed does not load: {error}"))?;
    let served = sandbox.serve(([127, 0, 0, 1], 0).into()).await.context("cannot listen on 127.0.0.1")?;
    let kubeconfig = kubeconfig_path();
    write_kubeconfig(&kubeconfig, &served.url, "demo-sre")
        .with_context(|| format!("cannot write the demo kubeconfig to {}", kubeconfig.display()))?;
    sandbox.set_user("demo-sre");
    let cancel = CancellationToken::new();
    let simulation =
        sandbox.simulate_workloads(WorkloadSimulation { pods: true, ..WorkloadSimulation::default() }, cancel.clone());
    if let Err(error) = give_a_change_window(&sandbox, k8s_openapi::jiff::Timestamp::now()).await {
        tracing::warn!(%error, "demo: cannot give {WINDOWED_APPLICATION:?} its change window");
    }
    for (namespace, secret) in ROTATED_AT_START {
        if sandbox.rotate_secret(namespace, secret).is_none() {
            tracing::warn!(namespace, secret, "demo: secret to rotate at start is missing");
        }
    }
    let rotator = config.rotation.map(|(min, max)| sandbox.rotate_credentials(min, max, cancel.clone()));

    let cluster = ClusterTarget {
        kubeconfig: Some(kubeconfig.clone()),
        context: None,
        namespace: cluster.namespace.clone(),
        all_namespaces: cluster.namespace.is_none(),
        request_timeout: cluster.request_timeout,
    };
    let result =
        crate::console::runtime::run_terminal(cluster, config.engine, setup, Some(kubeconfig.display().to_string()))
            .await;
    cancel.cancel();
    let _ = simulation.await;
    if let Some(rotator) = rotator {
        let _ = rotator.await;
    }
    served.stop().await;
    if let Some(dir) = kubeconfig.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_window_opens_at_the_second_whole_minute_and_parses() {
        let table = [
            ("2026-11-26T05:50:10Z", "Mon-Sun 05:52-06:22 UTC"),
            ("2026-11-26T23:59:59Z", "Mon-Sun 00:01-00:31 UTC"),
            ("2026-11-26T23:40:00Z", "Mon-Sun 23:42-00:12 UTC"),
        ];
        for (now, expected) in table {
            let now: k8s_openapi::jiff::Timestamp = now.parse().expect("time");
            let text = demo_change_window(now);
            assert_eq!(text, expected);
            let windows = crate::api::change_window::ChangeWindows::parse(&text).expect("parses");
            let crate::api::change_window::WindowState::Closed { opens } = windows.state_at(now) else {
                panic!("closed at start: {text}")
            };
            let wait = opens.as_second() - now.as_second();
            assert!((61..=120).contains(&wait), "{text}: opens in {wait}s");
        }
    }
}
