//! The console: a keyboard-driven TUI over the cluster.
//!
//! One owner of the UI state (`App`, in the UI task); watch tasks, the engine and command tasks
//! talk to it through one typed channel of `Msg`. `update` dispatches each one (a key to the open
//! overlay, a component in `overlay/`, or to the view) and returns `Command`s for the runtime;
//! `draw` is a pure function of `&App`.

pub mod app;
pub mod config;
pub mod details;
pub mod draw;
pub mod keymap;
pub mod message;
pub mod overlay;
pub mod queries;
pub mod row_filter;
pub mod runtime;
pub mod strings;
pub mod table;
pub mod theme;
pub mod update;
pub mod user_write;
pub mod views;

use std::path::PathBuf;

/// Why the console cannot start with this configuration (each message names the file or flag).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The config file does not read or parse.
    #[error("{0}")]
    Config(String),
    /// `--theme` or the config's theme names no theme, or the theme file is invalid.
    #[error("{0}")]
    Theme(String),
    /// A key binding in the config file is invalid.
    #[error("{}{message}", file.as_ref().map(|file| format!("{file}: ")).unwrap_or_default())]
    Keys { file: Option<String>, message: String },
}

/// Everything the console needs to start: its flags and its config file, resolved by `commands`.
pub struct ConsoleSetup {
    pub theme: theme::Theme,
    pub theme_names: Vec<String>,
    pub keymap: keymap::Keymap,
    pub readonly: bool,
    pub log_file: Option<PathBuf>,
    pub user_theme_dir: Option<PathBuf>,
    pub started: std::time::Instant,
    /// The view to open on (`--view`); `None` is the applications view.
    pub view: Option<app::ViewKind>,
    /// `--contexts`: the fleet view's contexts, read from the start.
    pub contexts: Option<crate::fleet::ContextList>,
}

/// Log to a daily file (stdout is the terminal), the user's alone (0600 in a 0700 directory),
/// with no response body and credential-looking values masked (`crate::logging`). Returns the
/// file's directory and a guard that flushes on drop; `None` when the directory cannot be made.
pub fn init_file_logging() -> Option<(PathBuf, tracing_appender::non_blocking::WorkerGuard)> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let dir = config::log_dir();
    let file = crate::logging::PrivateDailyFile::new(&dir, 7).ok()?;
    let (writer, guard) = tracing_appender::non_blocking(crate::logging::Masking(file));
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn,tower=warn,hyper=warn"));
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(writer)
        .with_filter(crate::logging::without_response_bodies())
        .with_filter(filter);
    tracing_subscriber::registry().with(layer).try_init().ok()?;
    Some((dir, guard))
}
