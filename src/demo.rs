//! `capdeck --demo`: the sandbox cluster (seed `demo`) served on a local port, the simulated
//! workload controller, a credential rotator, the engine attached as leader with a 30 s window,
//! and the console on top, reaching the sandbox over HTTP through a real `kube::Client` like any
//! cluster. Nothing is printed to the terminal but the console.

pub mod sample;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::cluster::ClusterArgs;
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

pub async fn run(cluster: &ClusterArgs, config: DemoConfig, setup: ConsoleSetup) -> anyhow::Result<ExitCode> {
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
    for (namespace, secret) in ROTATED_AT_START {
        if sandbox.rotate_secret(namespace, secret).is_none() {
            tracing::warn!(namespace, secret, "demo: secret to rotate at start is missing");
        }
    }
    let rotator = config.rotation.map(|(min, max)| sandbox.rotate_credentials(min, max, cancel.clone()));

    let cluster = ClusterArgs {
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
