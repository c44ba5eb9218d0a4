//! The console runtime on a `TestBackend`, driven by keys, for tests that watch its screen.
#![allow(dead_code)]

use std::time::Duration;

use capdeck::cluster::{ClusterTarget, Connection, Requests};
use capdeck::console::app::{App, Session};
use capdeck::console::keymap::Keymap;
use capdeck::console::runtime::{Options, run_console};
use capdeck::console::theme::Theme;
use capdeck::console::update::Msg;
use capdeck::engine::config::{EngineConfig, EngineMode, LeaseSettings};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use k8s_openapi::jiff::Timestamp;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// Generous: CI machines are slow, and a wait ends as soon as the screen shows what it waits for.
pub const WAIT: Duration = Duration::from_secs(60);

pub struct Console {
    keys: mpsc::UnboundedSender<Msg>,
    frames: watch::Receiver<Buffer>,
    task: JoinHandle<anyhow::Result<()>>,
}

pub fn text(buffer: &Buffer) -> String {
    let width = usize::from(buffer.area.width).max(1);
    buffer
        .content
        .chunks(width)
        .map(|row| row.iter().map(|cell| cell.symbol()).collect::<String>().trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

impl Console {
    /// The console over the cluster a kubeconfig points at, all namespaces.
    pub async fn start(kubeconfig: &std::path::Path, readonly: bool, mode: EngineMode) -> Self {
        let cluster = ClusterTarget {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            context: None,
            namespace: None,
            all_namespaces: true,
            ..ClusterTarget::default()
        };
        let connection = cluster.connect_for(Requests::Watching).await.expect("connect");
        Self::start_on(connection, cluster, readonly, mode)
    }

    /// The console over one namespace (worlds that share an API server).
    pub async fn start_in(kubeconfig: &std::path::Path, namespace: &str, readonly: bool, mode: EngineMode) -> Self {
        let cluster = ClusterTarget {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            context: None,
            namespace: Some(namespace.to_string()),
            all_namespaces: false,
            ..ClusterTarget::default()
        };
        let connection = cluster.connect_for(Requests::Watching).await.expect("connect");
        Self::start_on(connection, cluster, readonly, mode)
    }

    /// A read-only console on a sandbox through its in-process client (paused-time tests).
    pub fn in_process(sandbox: &capdeck::sandbox::Sandbox) -> Self {
        let connection = Connection {
            client: sandbox.client(),
            context: "sandbox".into(),
            server: "in-process".into(),
            default_namespace: "default".into(),
        };
        let cluster = ClusterTarget { all_namespaces: true, ..ClusterTarget::default() };
        Self::start_on(connection, cluster, true, EngineMode::Observe)
    }

    /// The console on its fleet view (`--contexts`), `size` columns × rows, over the kubeconfig's
    /// current context in `namespace`; every context's engine Lease is looked up in `namespace`.
    pub async fn start_fleet(
        kubeconfig: &std::path::Path,
        namespace: &str,
        size: (u16, u16),
        contexts: capdeck::fleet::ContextList,
    ) -> Self {
        let cluster = ClusterTarget {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            context: None,
            namespace: Some(namespace.to_string()),
            all_namespaces: false,
            ..ClusterTarget::default()
        };
        let connection = cluster.connect_for(Requests::Watching).await.expect("connect");
        let fleet = capdeck::fleet::FleetOptions {
            timeout: Duration::from_secs(4),
            lease_namespace: Some(namespace.to_string()),
            namespace: Some(namespace.to_string()),
            ..capdeck::fleet::FleetOptions::default()
        };
        let mut app = Self::app(true);
        app.route.view = capdeck::console::app::ViewKind::Fleet;
        Self::spawn(connection, cluster, true, EngineMode::Observe, app, size, Some(contexts), fleet)
    }

    fn app(readonly: bool) -> App {
        let session = Session {
            server: String::new(),
            context: String::new(),
            scope: String::new(),
            user: None,
            readonly,
            demo_kubeconfig: None,
            log_dir: None,
        };
        App::new(session, Theme::default(), vec!["dark".into()], Keymap::default(), Timestamp::now())
    }

    /// The console over an existing connection (e.g. `Sandbox::client()`).
    pub fn start_on(connection: Connection, cluster: ClusterTarget, readonly: bool, mode: EngineMode) -> Self {
        let app = Self::app(readonly);
        let fleet = capdeck::fleet::FleetOptions::default();
        Self::spawn(connection, cluster, readonly, mode, app, (160, 40), None, fleet)
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn(
        connection: Connection,
        cluster: ClusterTarget,
        readonly: bool,
        mode: EngineMode,
        app: App,
        size: (u16, u16),
        contexts: Option<capdeck::fleet::ContextList>,
        fleet: capdeck::fleet::FleetOptions,
    ) -> Self {
        let engine = EngineConfig {
            rollout_delay: Duration::from_secs(1),
            mode,
            lease: LeaseSettings { namespace: "capdeck-system".into(), ..LeaseSettings::default() },
            identity: "console-test".into(),
            ..EngineConfig::default()
        };
        let options = Options {
            cluster,
            engine,
            readonly,
            user_theme_dir: None,
            started: std::time::Instant::now(),
            contexts,
            fleet,
        };
        let (keys, inputs) = mpsc::unbounded_channel();
        let (frames_tx, frames) = watch::channel(Buffer::default());
        let task = tokio::spawn(async move {
            let mut terminal = Terminal::new(TestBackend::new(size.0, size.1)).expect("terminal");
            run_console(&mut terminal, app, options, connection, inputs, Some(frames_tx)).await
        });
        Self { keys, frames, task }
    }

    pub fn key(&self, code: KeyCode) {
        let modifiers = match code {
            KeyCode::Char(ch) if ch.is_ascii_uppercase() => KeyModifiers::SHIFT,
            _ => KeyModifiers::NONE,
        };
        self.keys.send(Msg::Key(KeyEvent::new(code, modifiers))).expect("console running");
    }

    pub fn typed(&self, text: &str) {
        for ch in text.chars() {
            self.key(if ch == '\n' { KeyCode::Enter } else { KeyCode::Char(ch) });
        }
    }

    /// The screen once `check` holds for it.
    pub async fn until(&mut self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let screen = text(&self.frames.borrow_and_update());
            if check(&screen) {
                return screen;
            }
            match tokio::time::timeout_at(deadline, self.frames.changed()).await {
                Ok(Ok(())) => {}
                _ => panic!("timed out waiting for {what}; last screen:\n{screen}"),
            }
        }
    }

    pub async fn shows(&mut self, needle: &str) -> String {
        self.until(needle, |screen| screen.contains(needle)).await
    }

    pub async fn quit(self) {
        // Ctrl-C: a 'q' right after a dialog closed would be swallowed as part of its burst.
        self.keys.send(Msg::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL))).expect("console running");
        let result = tokio::time::timeout(WAIT, self.task).await.expect("console stops").expect("no panic");
        result.expect("console exits cleanly");
    }
}
