//! What each subcommand does. Returns the process exit code; errors become exit code 1.

mod crds;
mod plan;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Plan(args)) => plan::run(&args),
        Some(Command::Crds(args)) => crds::run(&args),
        None => Ok(ExitCode::from(2)),
    }
}
