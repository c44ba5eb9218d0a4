//! What each subcommand does. Returns the process exit code; errors become exit code 1.

mod bench;
mod crds;
mod plan;
mod sandbox;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Plan(args)) => plan::run(&args),
        Some(Command::Crds(args)) => crds::run(&args),
        Some(Command::Sandbox(args)) => runtime()?.block_on(sandbox::run(args)),
        Some(Command::Bench(command)) => runtime()?.block_on(bench::run(command)),
        None => Ok(ExitCode::from(2)),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
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
