//! `capdeck` without a subcommand: the console over the kubeconfig, or over the embedded
//! sandbox with `--demo`. This is the composition root that picks one.

use std::process::ExitCode;

use crate::cli::{ConsoleArgs, EngineArgs};
use crate::cluster::ClusterArgs;

/// `capdeck` (no subcommand): the console over the kubeconfig.
pub fn run(cluster: &ClusterArgs, engine: &EngineArgs, args: &ConsoleArgs) -> anyhow::Result<ExitCode> {
    let mut setup = match crate::console::ConsoleSetup::resolve(args) {
        Ok(setup) => setup,
        Err(error) => {
            crate::safe_eprintln!("capdeck: {error}");
            return Ok(ExitCode::from(2));
        }
    };
    let logging = crate::console::init_file_logging();
    setup.log_file = logging.as_ref().map(|(dir, _)| dir.clone());
    let runtime = crate::process::runtime()?;
    let result = if args.demo {
        runtime.block_on(crate::demo::run(cluster, engine, setup, args.demo_rotation.0))
    } else {
        runtime.block_on(crate::console::runtime::run_terminal(cluster.clone(), engine.clone(), setup, None))
    };
    // Let background tasks (the engine releasing its lease) finish within a bound.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    drop(logging);
    match result {
        Ok(code) => Ok(code),
        Err(error) => {
            crate::safe_eprintln!("capdeck: {error:#}");
            Ok(ExitCode::from(1))
        }
    }
}
