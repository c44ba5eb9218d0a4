//! Read-only: where it comes from (the flag, `$CAPDECK_READONLY`, the console's config file) and
//! the refusal of every write while it is on.

use std::path::PathBuf;
use std::process::ExitCode;

use super::UsageError;
use crate::cli::{BatchActionArgs, Cli, Command, ReadonlyFrom};
use crate::engine::config::EngineMode;

/// Where read-only came from: every write says which, and how to lift it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadonlySource {
    /// The flag or `$CAPDECK_READONLY` (clap said which).
    CommandLine(ReadonlyFrom),
    /// `readonly = true` in the console's config file.
    ConfigFile(PathBuf),
}

impl ReadonlySource {
    /// `--readonly was given`, and how to lift it.
    pub fn describe(&self) -> (String, String) {
        match self {
            Self::CommandLine(from) => from.describe(),
            Self::ConfigFile(path) => (
                format!("readonly = true in {}", path.display()),
                "remove that line, or point --config at another file".into(),
            ),
        }
    }
}

/// Where read-only comes from, if it is on: the flag or `$CAPDECK_READONLY` (clap said which),
/// else `readonly = true` in the console's config file, which says "never write from this
/// machine" for every command.
fn readonly(cli: &Cli) -> anyhow::Result<Option<ReadonlySource>> {
    if let Some(from) = cli.readonly_from {
        return Ok(Some(ReadonlySource::CommandLine(from)));
    }
    super::console::readonly_in_config(&cli.console)
        .map(|file| file.map(ReadonlySource::ConfigFile))
        .map_err(|error| anyhow::anyhow!("cannot read the config file, which may make capdeck read-only: {error}"))
}

/// What this invocation would write, if anything: every write path is named here, so a new one
/// cannot forget read-only (tests/sandbox/promises.rs walks them all).
pub fn writes(cli: &Cli) -> Option<String> {
    let action = |verb: &str, args: &BatchActionArgs| {
        (!args.dry_run).then(|| format!("`capdeck {verb} {}` (it writes the batch's spec)", args.batch))
    };
    match &cli.command {
        Some(Command::Daemon(_)) => {
            Some("`capdeck daemon` (it leads: RotationBatches, VCAP Secrets, Deployments)".into())
        }
        Some(Command::Approve(args)) => action("approve", args),
        Some(Command::Force(args)) => action("force", &args.target),
        Some(Command::Hold(args)) => action("hold", args),
        Some(Command::Release(args)) => action("release", args),
        Some(Command::Cancel(args)) => action("cancel", args),
        Some(Command::Retry(args)) => action("retry", args),
        Some(Command::Undo(args)) => action("undo", args),
        Some(Command::Freeze(args)) => (!args.dry_run).then(|| {
            format!(
                "`capdeck freeze {}` (it writes a Freeze)",
                super::freeze::target_words(&cli.cluster.target(), &args.target)
            )
        }),
        Some(Command::Unfreeze(args)) => (!args.dry_run).then(|| {
            format!(
                "`capdeck unfreeze {}` (it writes the Freeze's spec.lifted)",
                super::freeze::target_words(&cli.cluster.target(), &args.target)
            )
        }),
        _ => None,
    }
}

/// Refuse a write while read-only is on (exit 1, naming where read-only came from and how to
/// lift it); the console told to lead while read-only is a usage error (exit 2).
pub fn refuse_if_readonly(cli: &Cli) -> anyhow::Result<Option<ExitCode>> {
    let console_leads = cli.command.is_none() && cli.engine.mode == EngineMode::Lead;
    let Some(what) = writes(cli) else {
        if console_leads && let Some(ReadonlySource::ConfigFile(path)) = readonly(cli)? {
            return Err(UsageError(format!(
                "readonly = true in {} never writes, and --engine lead would write: choose one",
                path.display()
            ))
            .into());
        }
        return Ok(None);
    };
    let Some(from) = readonly(cli)? else { return Ok(None) };
    let (source, lift) = from.describe();
    crate::safe_eprintln!("error: read-only ({source}): {what} would write to the cluster; to write, {lift}");
    Ok(Some(ExitCode::from(1)))
}
