//! What each subcommand does. Returns the process exit code; errors become exit code 1.

mod batches;
#[cfg(feature = "sandbox")]
mod bench;
pub mod console;
mod crds;
mod credentials;
mod deps;
mod doctor;
mod engine_config;
mod fleet;
mod freeze;
pub mod kubectl_plugin;
pub mod manifests;
mod plan;
mod readonly;
#[cfg(feature = "sandbox")]
mod sandbox;
mod tenants;
mod windows;

use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::process::runtime;
use readonly::refuse_if_readonly;
pub use readonly::writes;

/// What a build without the embedded API server (the container image's) says when asked for
/// what needs it: usage error, with where a build that has it comes from.
#[cfg(not(feature = "sandbox"))]
pub(crate) fn without_sandbox(what: &str) -> ExitCode {
    crate::safe_eprintln!(
        "error: {what} needs the embedded sandbox, which this build leaves out (built with \
         --no-default-features, like the container image, which runs the daemon only); use a build with \
         the default features: from a checkout, `cargo install --path .` (then `capdeck {}`)",
        what.strip_prefix("capdeck ").unwrap_or(what)
    );
    ExitCode::from(2)
}

/// Name on stderr each object a list skipped because it does not decode (the list goes on).
fn warn_undecodable(kind: &str, undecodable: &[crate::api::lenient::Undecodable]) {
    for object in undecodable {
        crate::safe_eprintln!("warning: {}", crate::cluster::describe_undecodable(kind, object));
    }
}

/// The environment variable that turns a run of capdeck into a completion request (the script
/// `capdeck completion SHELL` prints sets it).
pub const COMPLETE_VAR: &str = "CAPDECK_COMPLETE";

/// Answer a shell's completion request and exit, when this run is one (`COMPLETE_VAR` is set);
/// otherwise return at once. Before anything is printed.
pub fn complete_if_asked() {
    use clap::CommandFactory as _;
    clap_complete::CompleteEnv::with_factory(Cli::command).var(COMPLETE_VAR).complete();
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    use crate::actions::BatchAction;
    if let Some(refused) = refuse_if_readonly(&cli)? {
        return Ok(refused);
    }
    // The front ends and the commands take the cluster flags' plain form, never clap's.
    let cluster = cli.cluster.target();
    match cli.command {
        Some(Command::Daemon(args)) => {
            let config = crate::daemon::DaemonConfig {
                engine: engine_config::engine_settings(&args.engine),
                health_addr: args.health_addr,
            };
            runtime()?.block_on(crate::daemon::run(&cluster, config))
        }
        Some(Command::Batches(args)) => runtime()?.block_on(batches::list(&cluster, &args)),
        Some(Command::Approve(args)) => runtime()?.block_on(batches::action(&cluster, &args, BatchAction::Approve)),
        Some(Command::Force(args)) => {
            runtime()?.block_on(batches::action(&cluster, &args.target, BatchAction::Force { approve: args.approve }))
        }
        Some(Command::Hold(args)) => runtime()?.block_on(batches::action(&cluster, &args, BatchAction::Hold)),
        Some(Command::Release(args)) => runtime()?.block_on(batches::action(&cluster, &args, BatchAction::Release)),
        Some(Command::Cancel(args)) => runtime()?.block_on(batches::action(&cluster, &args, BatchAction::Cancel)),
        Some(Command::Retry(args)) => runtime()?.block_on(batches::action(&cluster, &args, BatchAction::Retry)),
        Some(Command::Undo(args)) => runtime()?.block_on(batches::action(&cluster, &args, BatchAction::Undo)),
        Some(Command::Freeze(args)) => runtime()?.block_on(freeze::freeze(&cluster, &args)),
        Some(Command::Unfreeze(args)) => runtime()?.block_on(freeze::unfreeze(&cluster, &args)),
        Some(Command::Freezes(args)) => runtime()?.block_on(freeze::list(&cluster, &args)),
        Some(Command::Manifests(args)) => manifests::run(cluster.namespace.as_deref(), &args),
        Some(Command::Plan(args)) => plan::run(&args),
        Some(Command::Deps(args)) => runtime()?.block_on(deps::run(&cluster, &args)),
        Some(Command::Tenants(args)) => runtime()?.block_on(tenants::run(&cluster, &args)),
        Some(Command::Credentials(args)) => runtime()?.block_on(credentials::run(&cluster, &args)),
        Some(Command::Fleet(args)) => runtime()?.block_on(fleet::run(&cluster, &args)),
        Some(Command::Doctor(args)) => {
            runtime()?.block_on(doctor::run(&cluster, &engine_config::engine_settings(&args.engine), &args))
        }
        Some(Command::Crds(args)) => crds::run(&args),
        Some(Command::Windows(args)) => windows::run(&args),
        #[cfg(feature = "sandbox")]
        Some(Command::Sandbox(args)) => runtime()?.block_on(sandbox::run(args)),
        #[cfg(feature = "sandbox")]
        Some(Command::Bench(command)) => runtime()?.block_on(bench::run(command)),
        #[cfg(not(feature = "sandbox"))]
        Some(Command::Sandbox(_)) => Ok(without_sandbox("capdeck sandbox")),
        #[cfg(not(feature = "sandbox"))]
        Some(Command::Bench(_)) => Ok(without_sandbox("capdeck bench")),
        Some(Command::Completion(args)) => {
            use std::io::Write as _;
            // The registration of clap_complete's dynamic completion: the shell calls back into
            // capdeck (`CAPDECK_COMPLETE=<shell> capdeck -- WORDS`, main.rs) for the candidates.
            let shells = clap_complete::env::Shells::builtins();
            let name = args.shell.to_string();
            let shell = shells.completer(&name).ok_or_else(|| anyhow::anyhow!("no completion for the shell {name}"))?;
            let mut script = Vec::new();
            shell.write_registration(COMPLETE_VAR, "capdeck", "capdeck", "capdeck", &mut script)?;
            std::io::stdout().lock().write_all(&script)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::KubectlPlugin(crate::cli::KubectlPluginCommand::Install(args))) => kubectl_plugin::install(&args),
        Some(Command::Version(args)) => version(&args),
        None => console::run(&cluster, &cli.engine, &cli.console),
    }
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

/// Print clap's verdict and exit with its code. `--help` and `--version` as clap prints them;
/// errors quote what was typed (a `--reason` pasted from a ticket): made terminal-safe, and a
/// quoted value that long shortened, so a usage error can neither drive the terminal nor flood it.
pub fn exit_with(error: &clap::Error) -> ! {
    if !error.use_stderr() {
        error.exit();
    }
    const LONGEST_VALUE: usize = 120;
    let text = error.render().to_string();
    let safe = crate::output::terminal_safe(&text, true);
    let long_value = regex::Regex::new(r"'([^'\n]{200,})'").ok();
    let shown = match long_value {
        Some(long_value) => long_value
            .replace_all(&safe, |quoted: &regex::Captures<'_>| {
                let value = &quoted[1];
                let head: String = value.chars().take(LONGEST_VALUE).collect();
                format!("'{head}…' ({} characters)", value.chars().count())
            })
            .into_owned(),
        None => safe.into_owned(),
    };
    eprint!("{shown}");
    std::process::exit(error.exit_code());
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

#[cfg(test)]
mod tests {
    /// Every file and directory docs/ARCHITECTURE.md's "Where do I change X" table names exists:
    /// a path under `src/` (`engine/writes.rs`), from the repository's root (`docs/METRICS.md`,
    /// `charts/capdeck/values.yaml`), or the end of a path in the repository (`capdeck.rules.test.yaml`, `templates/_helpers.tpl`).
    #[test]
    fn the_where_do_i_change_x_table_names_paths_that_exist() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md");
        let table = text.split("## Where do I change X").nth(1).expect("the section");
        let table = table.split("\n## ").next().unwrap_or_default();
        let path = regex::Regex::new(r"[A-Za-z0-9_.\-/]+(\.(rs|md|yaml|json|py|tpl|toml)|/)").expect("regex");
        let mut names = Vec::new();
        for row in table.lines().filter(|line| line.starts_with("| ")) {
            let change = row.rsplit(" | ").next().unwrap_or_default();
            names.extend(
                path.find_iter(change).map(|found| found.as_str().to_string()).filter(|name| name.contains(['/', '.'])),
            );
        }
        let mut files = Vec::new();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if entry.path().is_dir() && !name.starts_with('.') && name != "target" {
                    dirs.push(entry.path());
                }
                files.push(entry.path().to_string_lossy().into_owned());
            }
        }
        let missing: Vec<&String> = names
            .iter()
            .filter(|name| {
                let tail = format!("/{}", name.trim_end_matches('/'));
                !(root.join(name).exists()
                    || root.join("src").join(name).exists()
                    || files.iter().any(|f| f.ends_with(&tail)))
            })
            .collect();
        assert!(names.len() > 30, "the table names only {} paths: {names:?}", names.len());
        assert!(missing.is_empty(), "docs/ARCHITECTURE.md names paths that do not exist: {missing:?}");
    }

    /// Every repository path the docs and the README name in backticks from its root (`src/…`,
    /// `crates/…`, `tests/…`, `tools/…`, `charts/…`, `docs/…`) exists: a file moved or renamed
    /// takes its mentions with it.
    #[test]
    fn the_docs_name_repository_paths_that_exist() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let path = regex::Regex::new(r"`((?:src|crates|tests|tools|charts|docs)/[A-Za-z0-9_.\-/]+)`").expect("regex");
        let mut documents: Vec<std::path::PathBuf> = vec![root.join("README.md")];
        documents.extend(
            std::fs::read_dir(root.join("docs"))
                .expect("docs/")
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "md")),
        );
        let mut checked = 0;
        let mut missing = Vec::new();
        for document in &documents {
            let text = std::fs::read_to_string(document).expect("a document");
            for found in path.captures_iter(&text) {
                // A glob or a placeholder (`readmodel/<view>.rs`) names no one path.
                let named = found[1].trim_end_matches(['.', '/']);
                if named.contains(['*', '<', '{']) {
                    continue;
                }
                checked += 1;
                if !root.join(named).exists() {
                    missing.push(format!("{}: {named}", document.display()));
                }
            }
        }
        assert!(checked > 50, "only {checked} paths checked");
        assert!(missing.is_empty(), "the docs name paths that do not exist: {missing:#?}");
    }
}
