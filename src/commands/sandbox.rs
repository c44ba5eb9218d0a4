//! `capdeck sandbox`: serve the sandbox cluster until SIGINT/SIGTERM.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::cli::{SandboxArgs, Seed};
use crate::sandbox::simulate::WorkloadSimulation;
use crate::sandbox::{Sandbox, SandboxConfig, write_kubeconfig};

pub async fn run(args: SandboxArgs) -> anyhow::Result<ExitCode> {
    if !(args.pace.is_finite() && args.pace > 0.0) {
        anyhow::bail!("--pace must be a positive number of replicas per second (got {})", args.pace);
    }
    let sandbox =
        Sandbox::new(SandboxConfig { user: args.user.clone(), deny: args.deny.clone(), ..SandboxConfig::default() });
    match (args.synthetic, args.seed) {
        (Some(size), _) => {
            let size = crate::bench::synthetic::SeedSize {
                apps: size.apps,
                deployments_per_app: size.deployments_per_app,
                services_per_app: size.services_per_app,
                unreferenced_secrets: size.unreferenced_secrets,
            };
            crate::bench::synthetic::seed(&sandbox, size)
                .map_err(|error| anyhow::anyhow!("the synthetic seed does not load: {error}"))?;
        }
        (None, Seed::Empty) => {}
        (None, Seed::Demo) => {
            sandbox.load_demo().map_err(|error| anyhow::anyhow!("the demo seed does not load: {error}"))?;
        }
    }
    let served = sandbox
        .serve(args.listen)
        .await
        .with_context(|| format!("cannot listen on {} (is the port in use?)", args.listen))?;
    let kubeconfig =
        args.kubeconfig_out.clone().unwrap_or_else(|| std::env::temp_dir().join("capdeck-sandbox").join("kubeconfig"));
    write_kubeconfig(&kubeconfig, &served.url, &args.user)
        .with_context(|| format!("cannot write the kubeconfig to {}", kubeconfig.display()))?;
    let cancel = CancellationToken::new();
    let mut tasks = Vec::new();
    if args.simulate_workloads {
        let simulation = WorkloadSimulation {
            replicas_per_second: args.pace,
            pods: args.simulate_pods,
            ..WorkloadSimulation::default()
        };
        tasks.push(sandbox.simulate_workloads(simulation, cancel.clone()));
    }
    if args.rotate_credentials {
        tasks.push(sandbox.rotate_credentials(Duration::from_secs(20), Duration::from_secs(40), cancel.clone()));
    }
    {
        let mut out = std::io::stdout().lock();
        let seed = match (args.synthetic, args.seed) {
            (Some(size), _) => format!(
                "synthetic {}:{}:{}:{} = applications:Deployments each:services each:unreferenced Secrets",
                size.apps, size.deployments_per_app, size.services_per_app, size.unreferenced_secrets
            ),
            (None, seed) => {
                clap::ValueEnum::to_possible_value(&seed).map(|value| value.get_name().to_string()).unwrap_or_default()
            }
        };
        writeln!(out, "capdeck sandbox serving at {} (seed: {seed}, user: {})", served.url, args.user)?;
        writeln!(out, "kubeconfig written to {}", kubeconfig.display())?;
        writeln!(out, "  export KUBECONFIG={}", kubeconfig.display())?;
        writeln!(out, "Stop with Ctrl-C or SIGTERM.")?;
        out.flush()?;
    }
    crate::process::shutdown_signal().await;
    cancel.cancel();
    for task in tasks {
        let _ = task.await;
    }
    served.stop().await;
    Ok(ExitCode::SUCCESS)
}
