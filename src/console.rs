//! The console: a keyboard-driven TUI over the cluster.
//!
//! One owner of the UI state (`App`, in the UI task); watch tasks, the engine and command tasks
//! talk to it through one typed channel of `Msg`. `update` is the only place state changes and
//! returns `Command`s for the runtime; `draw` is a pure function of `&App`.

pub mod app;
pub mod config;
pub mod demo;
pub mod details;
pub mod draw;
pub mod keymap;
pub mod model;
pub mod runtime;
pub mod sample;
pub mod strings;
pub mod theme;
pub mod update;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::{ConsoleArgs, EngineArgs};
use crate::cluster::ClusterArgs;

/// Everything the console needs to start, resolved from flags and the config file.
pub struct ConsoleSetup {
    pub theme: theme::Theme,
    pub theme_names: Vec<String>,
    pub keymap: keymap::Keymap,
    pub readonly: bool,
    pub log_file: Option<PathBuf>,
    pub user_theme_dir: Option<PathBuf>,
    pub started: std::time::Instant,
}

impl ConsoleSetup {
    /// Read the config file and apply the flags. Errors name the file or flag at fault.
    pub fn resolve(args: &ConsoleArgs) -> Result<Self, String> {
        let dir = config::config_dir();
        let file = match (&args.config, &dir) {
            (Some(path), _) => Some(path.clone()),
            (None, Some(dir)) => Some(dir.join("config.toml")),
            (None, None) => None,
        };
        let settings = match &file {
            Some(path) => config::ConsoleConfig::load(path)?,
            None => config::ConsoleConfig::default(),
        };
        let user_theme_dir = dir.map(|dir| dir.join("themes"));
        let theme_name = args.theme.clone().or(settings.theme.clone()).unwrap_or_else(|| "dark".into());
        let theme = theme::Theme::load(&theme_name, user_theme_dir.as_deref())?;
        let keymap = keymap::Keymap::with_overrides(&settings.keys).map_err(|error| match &file {
            Some(path) => format!("{}: {error}", path.display()),
            None => error,
        })?;
        Ok(Self {
            theme,
            theme_names: theme::Theme::names(user_theme_dir.as_deref()),
            keymap,
            readonly: args.readonly || settings.readonly,
            log_file: None,
            user_theme_dir,
            started: std::time::Instant::now(),
        })
    }
}

/// Log to a daily rolling file (stdout is the terminal). Returns the file's directory and a
/// guard that flushes on drop; `None` when the directory cannot be created.
pub fn init_file_logging() -> Option<(PathBuf, tracing_appender::non_blocking::WorkerGuard)> {
    let dir = config::log_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let appender = tracing_appender::rolling::Builder::new()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("capdeck")
        .filename_suffix("log")
        .max_log_files(7)
        .build(&dir)
        .ok()?;
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn,tower=warn,hyper=warn"));
    tracing_subscriber::fmt().with_ansi(false).with_env_filter(filter).with_writer(writer).try_init().ok()?;
    Some((dir, guard))
}

/// `capdeck` (no subcommand): the console over the kubeconfig.
pub fn run(cluster: &ClusterArgs, engine: &EngineArgs, args: &ConsoleArgs) -> anyhow::Result<ExitCode> {
    let mut setup = match ConsoleSetup::resolve(args) {
        Ok(setup) => setup,
        Err(error) => {
            eprintln!("capdeck: {error}");
            return Ok(ExitCode::from(2));
        }
    };
    let logging = init_file_logging();
    setup.log_file = logging.as_ref().map(|(dir, _)| dir.clone());
    let runtime = crate::commands::runtime()?;
    let result = if args.demo {
        runtime.block_on(demo::run(cluster, engine, setup, args.demo_rotation.0))
    } else {
        runtime.block_on(runtime::run_terminal(cluster.clone(), engine.clone(), setup, None))
    };
    // Let background tasks (the engine releasing its lease) finish within a bound.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    drop(logging);
    match result {
        Ok(code) => Ok(code),
        Err(error) => {
            eprintln!("capdeck: {error:#}");
            Ok(ExitCode::from(1))
        }
    }
}
