//! What each subcommand does. Returns the process exit code; errors become exit code 1.

mod batches;
mod bench;
pub mod console;
mod crds;
mod credentials;
mod deps;
mod doctor;
mod fleet;
pub mod manifests;
mod plan;
mod sandbox;
mod tenants;

use std::process::ExitCode;

use crate::cli::{Cli, Command, ReadonlyFrom};
use crate::engine::config::EngineMode;
use crate::process::runtime;

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    use crate::actions::BatchAction;
    if let Some(refused) = refuse_if_readonly(&cli)? {
        return Ok(refused);
    }
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
        Some(Command::Retry(args)) => runtime()?.block_on(batches::action(&cli.cluster, &args, BatchAction::Retry)),
        Some(Command::Undo(args)) => runtime()?.block_on(batches::action(&cli.cluster, &args, BatchAction::Undo)),
        Some(Command::Manifests(args)) => manifests::run(cli.cluster.namespace.as_deref(), &args),
        Some(Command::Plan(args)) => plan::run(&args),
        Some(Command::Deps(args)) => runtime()?.block_on(deps::run(&cli.cluster, &args)),
        Some(Command::Tenants(args)) => runtime()?.block_on(tenants::run(&cli.cluster, &args)),
        Some(Command::Credentials(args)) => runtime()?.block_on(credentials::run(&cli.cluster, &args)),
        Some(Command::Fleet(args)) => runtime()?.block_on(fleet::run(&cli.cluster, &args)),
        Some(Command::Doctor(args)) => runtime()?.block_on(doctor::run(&cli.cluster, &args.engine, &args)),
        Some(Command::Crds(args)) => crds::run(&args),
        Some(Command::Sandbox(args)) => runtime()?.block_on(sandbox::run(args)),
        Some(Command::Bench(command)) => runtime()?.block_on(bench::run(command)),
        Some(Command::Completion(args)) => {
            use clap::CommandFactory as _;
            use std::io::Write as _;
            // Into a buffer first: the generator panics on a closed pipe (`| head`).
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut Cli::command(), "capdeck", &mut script);
            std::io::stdout().lock().write_all(&script)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Version(args)) => version(&args),
        None => console::run(&cli.cluster, &cli.engine, &cli.console),
    }
}

/// Where read-only comes from, if it is on: the flag or `$CAPDECK_READONLY` (clap said which),
/// else `readonly = true` in the console's config file, which says "never write from this
/// machine" for every command.
fn readonly(cli: &Cli) -> anyhow::Result<Option<ReadonlyFrom>> {
    if let Some(from) = &cli.readonly_from {
        return Ok(Some(from.clone()));
    }
    crate::console::readonly_in_config(&cli.console)
        .map(|file| file.map(ReadonlyFrom::File))
        .map_err(|error| anyhow::anyhow!("cannot read the config file, which may make capdeck read-only: {error}"))
}

/// What this invocation would write, if anything: every write path is named here, so a new one
/// cannot forget read-only (`commands::tests` walks them all).
pub fn writes(cli: &Cli) -> Option<String> {
    if cli.daemon {
        return Some("`capdeck --daemon` (it leads: RotationBatches, VCAP Secrets, Deployments)".into());
    }
    let action = |verb: &str, args: &crate::cli::BatchActionArgs| {
        (!args.dry_run).then(|| format!("`capdeck {verb} {}` (it writes the batch's spec)", args.batch))
    };
    match &cli.command {
        Some(Command::Approve(args)) => action("approve", args),
        Some(Command::Force(args)) => action("force", &args.target),
        Some(Command::Hold(args)) => action("hold", args),
        Some(Command::Release(args)) => action("release", args),
        Some(Command::Cancel(args)) => action("cancel", args),
        Some(Command::Retry(args)) => action("retry", args),
        Some(Command::Undo(args)) => action("undo", args),
        _ => None,
    }
}

/// Refuse a write while read-only is on (exit 1, naming where read-only came from and how to
/// lift it); the console told to lead while read-only is a usage error (exit 2).
fn refuse_if_readonly(cli: &Cli) -> anyhow::Result<Option<ExitCode>> {
    let console_leads = cli.command.is_none() && !cli.daemon && cli.engine.mode == EngineMode::Lead;
    let Some(what) = writes(cli) else {
        if console_leads && let Some(ReadonlyFrom::File(path)) = readonly(cli)? {
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

/// `capdeck version`: like `kubectl version --client`.
fn version(args: &crate::cli::VersionArgs) -> anyhow::Result<ExitCode> {
    use std::io::Write as _;
    let document = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "gitCommit": env!("CAPDECK_GIT_COMMIT"),
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    });
    let text = crate::output::render_object(&args.output, "version", &document, |_wide, _headers| {
        format!(
            "capdeck {}\ngit commit: {}\nplatform: {}/{}\n",
            env!("CARGO_PKG_VERSION"),
            env!("CAPDECK_GIT_COMMIT"),
            std::env::consts::OS,
            std::env::consts::ARCH
        )
    })
    .map_err(|error| UsageError(error.to_string()))?;
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
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
