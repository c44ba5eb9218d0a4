//! `capdeck` without a subcommand: the console over the kubeconfig, or over the embedded
//! sandbox with `--demo`. This is the composition root that picks one, and builds the console's
//! setup from its flags and its config file.

use std::path::PathBuf;
use std::process::ExitCode;

#[cfg(feature = "sandbox")]
use super::engine_config::demo_engine_settings;
use super::engine_config::engine_settings;
use crate::cli::{ConsoleArgs, EngineArgs, StartView};
use crate::cluster::ClusterTarget;
use crate::console::app::ViewKind;
use crate::console::config::{ConsoleConfig, config_dir};
use crate::console::keymap::Keymap;
use crate::console::theme::Theme;
use crate::console::{ConsoleSetup, SetupError};

/// `capdeck` (no subcommand): the console over the kubeconfig.
pub fn run(cluster: &ClusterTarget, engine: &EngineArgs, args: &ConsoleArgs) -> anyhow::Result<ExitCode> {
    let mut setup = match console_setup(args) {
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
        #[cfg(feature = "sandbox")]
        {
            let demo = crate::demo::DemoConfig { engine: demo_engine_settings(engine), rotation: args.demo_rotation.0 };
            runtime.block_on(crate::demo::run(cluster, demo, setup))
        }
        #[cfg(not(feature = "sandbox"))]
        return Ok(super::without_sandbox("--demo"));
    } else {
        runtime.block_on(crate::console::runtime::run_terminal(cluster.clone(), engine_settings(engine), setup, None))
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

/// The console's config file: `--config PATH`, else `$XDG_CONFIG_HOME/capdeck/config.toml`.
fn config_file(args: &ConsoleArgs) -> Option<PathBuf> {
    args.config.clone().or_else(|| config_dir().map(|dir| dir.join("config.toml")))
}

/// Whether the config file says `readonly = true` (the CLI and the daemon honour it too). A
/// file that cannot be read or parsed is an error naming it: a write must not go ahead because
/// the file that forbids it has a typo.
pub(super) fn readonly_in_config(args: &ConsoleArgs) -> Result<Option<PathBuf>, String> {
    let Some(path) = config_file(args) else { return Ok(None) };
    // A file named with --config must be there: a typo in its path must not let writes through.
    if args.config.is_some() && !path.exists() {
        return Err(format!("{}: no such file (given with --config)", path.display()));
    }
    Ok(ConsoleConfig::load(&path)?.readonly.then_some(path))
}

/// Read the config file and apply the flags. Errors name the file or flag at fault.
fn console_setup(args: &ConsoleArgs) -> Result<ConsoleSetup, SetupError> {
    let dir = config_dir();
    let file = config_file(args);
    let settings = match &file {
        Some(path) => ConsoleConfig::load(path).map_err(SetupError::Config)?,
        None => ConsoleConfig::default(),
    };
    let user_theme_dir = dir.map(|dir| dir.join("themes"));
    let theme_name = args.theme.clone().or(settings.theme.clone()).unwrap_or_else(|| "dark".into());
    let theme = Theme::load(&theme_name, user_theme_dir.as_deref()).map_err(SetupError::Theme)?;
    let keymap = Keymap::with_overrides(&settings.keys)
        .map_err(|message| SetupError::Keys { file: file.as_ref().map(|path| path.display().to_string()), message })?;
    Ok(ConsoleSetup {
        theme,
        theme_names: Theme::names(user_theme_dir.as_deref()),
        keymap,
        readonly: args.readonly || settings.readonly,
        log_file: None,
        user_theme_dir,
        started: std::time::Instant::now(),
        view: args.view.map(start_view),
        contexts: args.contexts.clone(),
    })
}

/// The view `--view` names.
fn start_view(view: StartView) -> ViewKind {
    match view {
        StartView::Apps => ViewKind::Applications,
        StartView::Versions => ViewKind::Versions,
        StartView::Tenants => ViewKind::Tenants,
        StartView::Ops => ViewKind::Operations,
        StartView::Batches => ViewKind::Batches,
        StartView::Rollouts => ViewKind::Rollouts,
        StartView::Events => ViewKind::Events,
        StartView::Credentials => ViewKind::Credentials,
        StartView::Fleet => ViewKind::Fleet,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::views::view;

    #[test]
    fn every_start_view_opens_the_view_its_command_name_opens() {
        use clap::ValueEnum as _;
        let mut opened = Vec::new();
        for &arg in StartView::value_variants() {
            let name = arg.to_possible_value().expect("every variant has a name").get_name().to_string();
            let kind = start_view(arg);
            assert!(
                view(kind).aliases().contains(&name.as_str()),
                "--view {name} opens {kind:?}, whose commands differ"
            );
            opened.push(kind);
        }
        assert_eq!(opened, ViewKind::ALL, "--view names every view once, in order");
    }
}
