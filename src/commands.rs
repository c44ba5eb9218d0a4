//! What each subcommand does. Returns the process exit code; errors become exit code 1.

mod batches;
mod bench;
mod crds;
mod deps;
mod doctor;
pub mod manifests;
mod plan;
mod sandbox;
mod tenants;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    use crate::engine::actions::BatchAction;
    if cli.daemon {
        return runtime()?.block_on(crate::daemon::run(&cli.cluster, &cli.engine, cli.health_addr));
    }
    match cli.command {
        Some(Command::Batches(args)) => runtime()?.block_on(batches::list(&cli.cluster, &args)),
        Some(Command::Approve(args)) => runtime()?.block_on(batches::action(&cli.cluster, &args, BatchAction::Approve)),
        Some(Command::Force(args)) => runtime()?.block_on(batches::action(
            &cli.cluster,
            &args.target,
            BatchAction::Force { approve: args.approve },
        )),
        Some(Command::Hold(args)) => runtime()?.block_on(batches::action(&cli.cluster, &args, BatchAction::Hold)),
        Some(Command::Release(args)) => runtime()?.block_on(batches::action(&cli.cluster, &args, BatchAction::Release)),
        Some(Command::Cancel(args)) => runtime()?.block_on(batches::action(&cli.cluster, &args, BatchAction::Cancel)),
        Some(Command::Manifests(args)) => manifests::run(cli.cluster.namespace.as_deref(), &args),
        Some(Command::Plan(args)) => plan::run(&args),
        Some(Command::Deps(args)) => runtime()?.block_on(deps::run(&cli.cluster, &args)),
        Some(Command::Tenants(args)) => runtime()?.block_on(tenants::run(&cli.cluster, &args)),
        Some(Command::Doctor(args)) => runtime()?.block_on(doctor::run(&cli.cluster, &cli.engine, &args)),
        Some(Command::Crds(args)) => crds::run(&args),
        Some(Command::Sandbox(args)) => runtime()?.block_on(sandbox::run(args)),
        Some(Command::Bench(command)) => {
            let parallel = usize::try_from(cli.engine.max_parallel_rollouts).unwrap_or(usize::MAX);
            runtime()?.block_on(bench::run(command, parallel))
        }
        None => crate::console::run(&cli.cluster, &cli.engine, &cli.console),
    }
}

/// A mistake in how a command was called (exit code 2, like clap's own usage errors).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Whether the error is stdout's reader having gone away (`capdeck crds | head -1`).
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
