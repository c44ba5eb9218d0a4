//! The console's runtime: owns `App`, feeds it messages from the watch tasks, the engine, the
//! keyboard and a 1 s tick, runs the commands `update` returns, and redraws after each batch of
//! messages (never in a loop of its own).

use std::collections::VecDeque;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::buffer::Buffer;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ConsoleSetup;
use super::app::{App, Session};
use super::update::{Command, Msg, update};
use crate::cluster::stores::Stores;
use crate::cluster::{ClusterTarget, Connection, Scope, can_i, whoami};
use crate::engine::config::{EngineConfig, EngineMode};
use crate::engine::metrics::Metrics;
use crate::engine::settings::EngineSettings;
use crate::engine::{EngineHandle, Role};
use crate::readmodel;

mod feeds;
use feeds::{
    LeaderWatch, forward_connection, forward_go_operator, forward_identity, forward_leader, forward_role,
    forward_write_failure, snapshots,
};

/// How many Events the Events view keeps (newest first).
const EVENTS_KEPT: usize = 1000;
/// Snapshots are rebuilt at most this often while the cluster changes.
const SNAPSHOT_INTERVAL: Duration = Duration::from_millis(100);
/// On big clusters the pause after a rebuild is this many times the rebuild's own duration, so
/// constant churn costs at most a third of a core (50k tenants: ~150 ms per rebuild).
const SNAPSHOT_PAUSE_FACTOR: u32 = 2;

/// What the runtime needs besides the App.
pub struct Options {
    pub cluster: ClusterTarget,
    pub engine: EngineConfig,
    pub readonly: bool,
    pub user_theme_dir: Option<std::path::PathBuf>,
    /// When the process started, for the first-frame times in the log.
    pub started: std::time::Instant,
    /// `--contexts`: read the fleet from the start; `None` waits for `:fleet` (then every context).
    pub contexts: Option<crate::fleet::ContextList>,
    pub fleet: crate::fleet::FleetOptions,
}

/// How often the fleet view's contexts are read again.
const FLEET_INTERVAL: Duration = Duration::from_secs(30);

/// Messages from tasks carry the generation of the connection and scope they belong to, so a
/// message from before a `:ns` or `:ctx` switch is dropped. Generation 0 is always current.
type Envelope = (u64, Msg);

/// What runs for one connection: stores, the attached engine, and the tasks feeding the UI.
struct Live {
    connection: Connection,
    scope: Scope,
    cancel: CancellationToken,
    engine: Option<EngineHandle>,
    engine_stores: Stores,
    /// Stores of the view when `:ns` moved it away from the engine's scope.
    view: Option<(Stores, CancellationToken)>,
    forwarders: Vec<JoinHandle<()>>,
    lease: crate::engine::config::LeaseSettings,
    /// The window and expected rollout of the Credentials view's margins: the leading engine's
    /// published settings, else this console's engine's (set by [`forward_leader`]).
    timing: watch::Sender<crate::credentials::Judging>,
    /// This console's engine's own, for when no leader publishes settings.
    own_timing: crate::credentials::Judging,
}

impl Live {
    /// `first`: the kind on screen, listed before the others.
    fn start(
        connection: Connection,
        scope: Scope,
        first: Option<&'static str>,
        options: &Options,
        tx: &mpsc::UnboundedSender<Envelope>,
        generation: u64,
    ) -> Self {
        let cancel = CancellationToken::new();
        let (stores, _tasks) =
            Stores::start_for_console(&connection.client, scope.clone(), cancel.child_token(), first);
        let mut config = options.engine.clone();
        if options.readonly {
            config.mode = EngineMode::Observe;
        }
        let lease = config.lease.clone();
        let own_timing = config.judging();
        let timing = watch::Sender::new(own_timing.clone());
        let engine = crate::engine::spawn(
            connection.client.clone(),
            stores.clone(),
            config,
            Metrics::new(),
            cancel.child_token(),
        );
        let mut live = Self {
            connection,
            scope,
            cancel,
            engine: None,
            engine_stores: stores,
            view: None,
            forwarders: Vec::new(),
            lease,
            timing,
            own_timing,
        };
        live.engine = Some(engine);
        live.start_forwarders(tx, generation);
        live
    }

    /// The tasks that feed the UI for this connection and scope (after a `:ns` again): the
    /// engine's role and write failures, who leads, the Go operator, who the user is, the view.
    fn start_forwarders(&mut self, tx: &mpsc::UnboundedSender<Envelope>, generation: u64) {
        if let Some(engine) = &self.engine {
            self.forwarders.push(forward_role(engine.role.clone(), tx.clone(), generation));
            self.forwarders.push(forward_write_failure(engine.write_failure.clone(), tx.clone(), generation));
        }
        self.forwarders.push(forward_leader(
            self.connection.client.clone(),
            LeaderWatch {
                lease: self.lease.clone(),
                scope: self.scope.clone(),
                timing: self.timing.clone(),
                own: self.own_timing.clone(),
            },
            tx.clone(),
            generation,
        ));
        self.forwarders.push(forward_go_operator(self.connection.client.clone(), tx.clone(), generation));
        self.forwarders.push(forward_identity(self.connection.client.clone(), tx.clone(), generation));
        self.start_view(tx, generation);
    }

    fn view_stores(&self) -> &Stores {
        self.view.as_ref().map_or(&self.engine_stores, |(stores, _)| stores)
    }

    /// The tasks that turn the view's stores and Events into snapshots and connection states.
    fn start_view(&mut self, tx: &mpsc::UnboundedSender<Envelope>, generation: u64) {
        let stores = self.view_stores().clone();
        let cancel = self.view.as_ref().map_or_else(|| self.cancel.clone(), |(_, cancel)| cancel.clone());
        self.forwarders.push(forward_connection(stores.connection(), tx.clone(), generation));
        self.forwarders.push(tokio::spawn(snapshots(stores, self.timing.subscribe(), tx.clone(), generation, cancel)));
    }

    /// `:ns`: new view stores in `scope`; the engine keeps its own.
    fn switch_scope(
        &mut self,
        scope: Scope,
        first: Option<&'static str>,
        tx: &mpsc::UnboundedSender<Envelope>,
        generation: u64,
    ) {
        for task in self.forwarders.drain(..) {
            task.abort();
        }
        if let Some((_, cancel)) = self.view.take() {
            cancel.cancel();
        }
        if scope != self.engine_stores.scope {
            let cancel = self.cancel.child_token();
            let (stores, _tasks) =
                Stores::start_for_console(&self.connection.client, scope.clone(), cancel.clone(), first);
            self.view = Some((stores, cancel));
        }
        self.scope = scope;
        self.start_forwarders(tx, generation);
    }

    /// Stop everything; the engine finishes in-flight writes and releases its lease.
    async fn stop(mut self) {
        self.cancel.cancel();
        for task in self.forwarders.drain(..) {
            task.abort();
        }
        if let Some(engine) = self.engine.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), engine.join()).await;
        }
    }
}

/// The loop's state besides the App: the live connection, its generation, and the channel the
/// tasks answer on. Every command `update` returns is carried out here.
struct Runtime<'a> {
    options: &'a Options,
    live: Live,
    generation: u64,
    tx: mpsc::UnboundedSender<Envelope>,
    /// The task reading the fleet, once started.
    fleet: Option<JoinHandle<()>>,
    /// Whether the fleet view is on screen: the fleet is read only then (each read lists every
    /// context's batches and applications and reads their binding Secrets).
    fleet_shown: watch::Sender<bool>,
}

impl Runtime<'_> {
    /// Carry out one command; messages for the App go to `pending`.
    async fn execute(&mut self, command: Command, app: &mut App, pending: &mut VecDeque<Msg>) {
        match command {
            Command::Quit => app.quit = true,
            Command::LoadTheme(name) => {
                pending.push_back(Msg::Theme(super::theme::Theme::load(&name, self.options.user_theme_dir.as_deref())));
            }
            Command::Write(write) => self.write(app.session.user.clone(), write),
            Command::Detail(crate::console::views::DetailNeed::Dependencies { namespace, name }) => {
                self.dependencies(namespace, name);
            }
            Command::Pods { namespace, deployment } => {
                let client = self.live.connection.client.clone();
                let (tx, generation) = (self.tx.clone(), self.generation);
                tokio::spawn(async move {
                    let rows = crate::readmodel::pods::fetch(&client, &namespace, &deployment).await;
                    let _ = tx.send((generation, Msg::Pods { namespace, deployment, rows }));
                });
            }
            Command::PodLog { namespace, pod, container } => self.pod_log(namespace, pod, container),
            Command::CheckAccess { kind, namespace } => {
                let client = self.live.connection.client.clone();
                let (tx, generation) = (self.tx.clone(), self.generation);
                tokio::spawn(async move {
                    let (resource, verbs) = kind.permission();
                    let group = crate::api::rotation_batch::GROUP;
                    let answers = futures::future::join_all(
                        verbs.iter().map(|verb| can_i(&client, verb, group, resource, Some(&namespace))),
                    )
                    .await;
                    let allowed = answers.into_iter().all(|allowed| allowed);
                    let _ = tx.send((generation, Msg::Access { kind, namespace, allowed }));
                });
            }
            Command::ListNamespaces => {
                let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
                    kube::Api::all(self.live.connection.client.clone());
                let (tx, generation) = (self.tx.clone(), self.generation);
                tokio::spawn(async move {
                    let names = namespaces
                        .list_metadata(&kube::api::ListParams::default())
                        .await
                        .map(|list| list.items.into_iter().filter_map(|meta| meta.metadata.name).collect())
                        .map_err(|error| crate::cluster::describe_error(&error));
                    let _ = tx.send((generation, Msg::Namespaces(names)));
                });
            }
            Command::SwitchNamespace(namespace) => {
                self.switch_namespace(namespace, app.route.view.store_kind(), pending).await;
            }
            Command::SwitchContext(context) => {
                if let Err(error) = self.switch_context(&context, None, app.route.view.store_kind(), pending).await {
                    pending.push_back(Msg::Error(format!(":ctx {context}: {error}")));
                }
            }
            Command::WatchFleet => self.watch_fleet(),
            Command::OpenContext { context, namespace, route } => {
                let same = context == self.live.connection.context
                    && namespace.as_ref().is_none_or(|namespace| self.live.scope.includes(namespace));
                let first = app.route.view.store_kind();
                let switched =
                    if same { Ok(()) } else { self.switch_context(&context, namespace, first, pending).await };
                match switched {
                    Ok(()) => pending.push_back(Msg::Open(route)),
                    Err(error) => pending.push_back(Msg::Error(format!("context {context}: {error}"))),
                }
            }
        }
    }

    /// Read the fleet now and every `FLEET_INTERVAL` while the fleet view is shown (once started,
    /// for the console's life; the messages carry generation 0, so a context switch does not drop
    /// them).
    fn watch_fleet(&mut self) {
        if self.fleet.is_some() {
            return;
        }
        let cluster = self.options.cluster.clone();
        let contexts = self.options.contexts.clone().unwrap_or(crate::fleet::ContextList::All);
        let fleet = self.options.fleet.clone();
        let tx = self.tx.clone();
        let mut shown = self.fleet_shown.subscribe();
        self.fleet = Some(tokio::spawn(async move {
            loop {
                if shown.wait_for(|shown| *shown).await.is_err() {
                    return;
                }
                let names = contexts.resolve(cluster.context_names().unwrap_or_default());
                let rows = if names.is_empty() {
                    vec![crate::fleet::FleetRow::problem(
                        "-",
                        crate::fleet::RowState::Unreachable,
                        "the kubeconfig has no contexts (set KUBECONFIG or pass --kubeconfig)".into(),
                    )]
                } else {
                    crate::fleet::read_fleet(&cluster, &names, &fleet).await
                };
                if tx.send((0, Msg::Fleet(rows))).is_err() {
                    return;
                }
                tokio::time::sleep(FLEET_INTERVAL).await;
            }
        }));
    }

    /// Carry out a user's write as the user the API server named; `user_write::carry_out`
    /// refuses it in a read-only session, whatever let it through.
    fn write(&self, user: Option<String>, write: crate::console::user_write::UserWrite) {
        let client = self.live.connection.client.clone();
        let tx = self.tx.clone();
        let readonly = self.options.readonly;
        tokio::spawn(async move {
            let result = crate::console::user_write::carry_out(&client, readonly, user.as_deref(), &write).await;
            let _ = tx.send((0, Msg::WriteDone(result)));
        });
    }

    /// Reading the binding Secrets of a big application is not UI work: the blocking pool does it.
    fn dependencies(&self, namespace: String, name: String) {
        let stores = self.live.view_stores().clone();
        let (tx, generation) = (self.tx.clone(), self.generation);
        tokio::task::spawn_blocking(move || {
            let app = stores.applications.state().into_iter().find(|app| {
                app.metadata.namespace.as_deref() == Some(namespace.as_str())
                    && app.metadata.name.as_deref() == Some(name.as_str())
            });
            let report = app
                .map(|app| crate::deps::dependencies(&app, &stores))
                .ok_or_else(|| format!("application {namespace}/{name} is no longer in the cluster"));
            let _ = tx.send((generation, Msg::Dependencies { namespace, name, report }));
        });
    }

    /// A Pod's log, with the namespace's credentials masked if the Pod logged them.
    fn pod_log(&self, namespace: String, pod: String, container: Option<String>) {
        let client = self.live.connection.client.clone();
        let (tx, generation) = (self.tx.clone(), self.generation);
        let stores = self.live.view_stores();
        let bindings: Vec<_> = stores
            .binding_secrets
            .state()
            .into_iter()
            .filter(|secret| secret.namespace() == Some(namespace.as_str()))
            .collect();
        tokio::spawn(async move {
            let lines = match crate::readmodel::pods::log(&client, &namespace, &pod, container.as_deref()).await {
                // The stores keep VCAP Secrets as digests: their payloads (old credentials too,
                // until a batch deletes them) are read for the masking, then dropped.
                Ok(lines) => match crate::readmodel::pods::vcap_secrets(&client, &namespace).await {
                    Err(error) => Err(error),
                    Ok(vcap) => {
                        let secrets = bindings.iter().map(AsRef::as_ref).chain(vcap.iter());
                        let values = crate::readmodel::pods::credential_values(secrets);
                        // Masking builds a matcher over every value's forms: off the async workers.
                        tokio::task::spawn_blocking(move || crate::readmodel::pods::mask(lines, &values))
                            .await
                            .map_err(|error| format!("cannot mask the log of Pod {namespace}/{pod}: {error}"))
                    }
                },
                Err(error) => Err(error),
            };
            let _ = tx.send((generation, Msg::PodLog { namespace, pod, lines }));
        });
    }

    /// `:ns`: `:ns nope` must not quietly show an empty cluster, so the API server is asked first.
    async fn switch_namespace(
        &mut self,
        namespace: Option<String>,
        first: Option<&'static str>,
        pending: &mut VecDeque<Msg>,
    ) {
        if let Some(name) = &namespace {
            let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
                kube::Api::all(self.live.connection.client.clone());
            match namespaces.get_opt(name).await {
                Ok(Some(_)) => {}
                Ok(None) => {
                    pending.push_back(Msg::Error(format!(
                        ":ns {name}: namespace {name} does not exist in context {} (`:ns all` for every namespace)",
                        self.live.connection.context
                    )));
                    return;
                }
                // Not allowed to read namespaces (common): switch and let the watches say what
                // they can see.
                Err(error) => tracing::debug!(%error, namespace = %name, "cannot check the namespace"),
            }
        }
        let scope = namespace.map_or(Scope::All, Scope::Namespace);
        self.generation += 1;
        pending.push_back(Msg::Switched { context: self.live.connection.context.clone(), scope: scope.label() });
        self.live.switch_scope(scope, first, &self.tx, self.generation);
    }

    /// `:ctx` (and Enter in the fleet view, with a namespace): a new connection, stores and
    /// engine; the old ones stop in the background.
    async fn switch_context(
        &mut self,
        context: &str,
        namespace: Option<String>,
        first: Option<&'static str>,
        pending: &mut VecDeque<Msg>,
    ) -> Result<(), crate::cluster::ConnectError> {
        let mut cluster = self.options.cluster.clone();
        cluster.context = Some(context.to_string());
        if let Some(namespace) = namespace {
            cluster.all_namespaces = false;
            cluster.namespace = Some(namespace);
        }
        let connection = cluster.connect_for(crate::cluster::Requests::Watching).await?;
        let scope = cluster.scope(&connection);
        self.generation += 1;
        pending.push_back(Msg::Switched { context: connection.context.clone(), scope: scope.label() });
        let live = Live::start(connection, scope, first, self.options, &self.tx, self.generation);
        let old = std::mem::replace(&mut self.live, live);
        tokio::spawn(old.stop());
        Ok(())
    }
}

/// A 1 s tick for the countdowns and "renewed Ns ago".
fn start_ticker(tx: mpsc::UnboundedSender<Envelope>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_secs(1));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            interval.tick().await;
            if tx.send((0, Msg::Tick(Timestamp::now()))).is_err() {
                return;
            }
        }
    })
}

/// Log when the first frame, and the first with the synced cluster, were drawn.
struct FirstFrames {
    started: std::time::Instant,
    first: bool,
    first_with_data: bool,
}

impl FirstFrames {
    fn drawn(&mut self, synced: bool) {
        if self.first || (self.first_with_data && synced) {
            let what = if synced { "first frame with the synced cluster" } else { "first frame" };
            tracing::info!(elapsed_ms = self.started.elapsed().as_millis(), "{what}");
            self.first_with_data &= !synced;
            self.first = false;
        }
    }
}

/// Run the console on `terminal` until the user quits or SIGINT/SIGTERM arrives. Keys and resizes
/// come in on `inputs`; every frame drawn is also published on `frames` (for tests).
pub async fn run_console<B: Backend>(
    terminal: &mut Terminal<B>,
    mut app: App,
    options: Options,
    connection: Connection,
    mut inputs: mpsc::UnboundedReceiver<Msg>,
    frames: Option<watch::Sender<Buffer>>,
) -> anyhow::Result<()>
where
    B::Error: Send + Sync + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<Envelope>();
    let scope = options.cluster.scope(&connection);
    app.session.context = connection.context.clone();
    app.session.scope = scope.label();
    app.lease_namespace = Some(options.engine.lease.namespace.clone());
    let live = Live::start(connection, scope, app.route.view.store_kind(), &options, &tx, 1);
    let ticker = start_ticker(tx.clone());
    let (fleet_shown, _) = watch::channel(app.route.view == super::app::ViewKind::Fleet);
    let mut runtime = Runtime { options: &options, live, generation: 1, tx, fleet: None, fleet_shown };
    if options.contexts.is_some() {
        app.fleet_watched = true;
        runtime.watch_fleet();
    }
    let size = terminal.size().map_err(|error| anyhow::anyhow!("cannot read the terminal size: {error}"))?;
    let mut pending: VecDeque<Msg> = VecDeque::from([
        Msg::Tick(Timestamp::now()),
        Msg::Resize { width: size.width, height: size.height },
        Msg::Contexts(options.cluster.context_names().unwrap_or_default()),
    ]);
    let shutdown = hangup_or_shutdown();
    tokio::pin!(shutdown);
    let mut first_frames = FirstFrames { started: options.started, first: true, first_with_data: true };
    loop {
        // Apply everything queued, then draw once.
        while let Some(msg) = pending.pop_front() {
            for command in update(&mut app, msg) {
                runtime.execute(command, &mut app, &mut pending).await;
            }
        }
        if app.quit {
            break;
        }
        runtime.fleet_shown.send_if_modified(|shown| {
            let now = app.route.view == super::app::ViewKind::Fleet;
            std::mem::replace(shown, now) != now
        });
        let frame = terminal.draw(|frame| super::draw::draw(frame, &app))?;
        first_frames.drawn(app.snapshot.synced);
        if let Some(frames) = &frames {
            frames.send_replace(frame.buffer.clone());
        }
        let current = |from: u64| from == 0 || from == runtime.generation;
        tokio::select! {
            input = inputs.recv() => match input {
                Some(msg) => pending.push_back(msg),
                None => break,
            },
            Some((from, msg)) = rx.recv() => {
                if current(from) {
                    pending.push_back(msg);
                }
            }
            () = &mut shutdown => break,
        }
        // Take whatever else is already queued, in arrival order, before drawing again.
        while let Ok((from, msg)) = rx.try_recv() {
            if current(from) {
                pending.push_back(msg);
            }
        }
        while let Ok(msg) = inputs.try_recv() {
            pending.push_back(msg);
        }
    }
    ticker.abort();
    if let Some(fleet) = runtime.fleet.take() {
        fleet.abort();
    }
    runtime.live.stop().await;
    Ok(())
}

/// SIGINT, SIGTERM, or SIGHUP (the terminal went away): quit like `q` does.
async fn hangup_or_shutdown() {
    #[cfg(unix)]
    if let Ok(mut hangup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        tokio::select! {
            () = crate::process::shutdown_signal() => {}
            _ = hangup.recv() => {}
        }
        return;
    }
    crate::process::shutdown_signal().await;
}

/// Restores the terminal when dropped: on every exit path, errors and panics included (ratatui's
/// panic hook covers panics).
struct RestoreTerminal;

impl Drop for RestoreTerminal {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// The console on the real terminal.
pub async fn run_terminal(
    cluster: ClusterTarget,
    engine: EngineSettings,
    setup: ConsoleSetup,
    demo_kubeconfig: Option<String>,
) -> anyhow::Result<ExitCode> {
    let connection = connect_saying_why(&cluster).await?;
    let (mut config, delay_error) = engine.config(&connection.default_namespace);
    config.mode = console_mode(config.mode);
    if config.mode == crate::engine::config::EngineMode::Lead {
        config.notify =
            engine.notify_config(&connection.client, &connection.context).await.map_err(anyhow::Error::msg)?;
    } else if !engine.notify.is_empty() {
        anyhow::bail!(
            "--notify and --notify-secret need an engine that may lead: this console observes (add --engine lead, or \
             give them to `capdeck --daemon`)"
        );
    }
    let scope = cluster.scope(&connection);
    let mut app = App::new(
        Session {
            server: connection.server.clone(),
            context: connection.context.clone(),
            scope: scope.label(),
            user: None,
            readonly: setup.readonly,
            demo_kubeconfig,
            log_dir: setup.log_file.as_ref().map(|dir| dir.display().to_string()),
        },
        setup.theme,
        setup.theme_names,
        setup.keymap,
        Timestamp::now(),
    );
    if let Some(view) = setup.view {
        app.route.view = view;
    } else if setup.contexts.is_some() {
        app.route.view = super::app::ViewKind::Fleet;
    }
    if let Some(error) = delay_error {
        tracing::error!("{error}");
        super::update::flash(&mut app, super::app::Level::Error, error);
    }
    let options = Options {
        cluster,
        engine: config,
        readonly: setup.readonly,
        user_theme_dir: setup.user_theme_dir,
        started: setup.started,
        contexts: setup.contexts,
        fleet: crate::fleet::FleetOptions {
            lease_namespace: engine.lease_namespace.clone(),
            lease_name: engine.base.lease.name.clone(),
            namespace: None,
            ..crate::fleet::FleetOptions::default()
        },
    };
    let mut terminal = ratatui::try_init().map_err(|error| anyhow::anyhow!("cannot set up the terminal: {error}"))?;
    let _restore = RestoreTerminal;
    let (input_tx, inputs) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_terminal(input_tx));
    let result = run_console(&mut terminal, app, options, connection, inputs, None).await;
    reader.abort();
    result.map(|()| ExitCode::SUCCESS)
}

/// Connect before the console takes the screen; when that takes more than a second (an exec
/// credential plugin waiting for a login, most likely), say on the terminal what it waits for
/// and for how long, rather than leave it blank.
async fn connect_saying_why(
    cluster: &ClusterTarget,
) -> Result<crate::cluster::Connection, crate::cluster::ConnectError> {
    let connecting = cluster.connect_for(crate::cluster::Requests::Watching);
    tokio::pin!(connecting);
    tokio::select! {
        connected = &mut connecting => return connected,
        () = tokio::time::sleep(Duration::from_secs(1)) => {}
    }
    let context =
        cluster.context.as_deref().map_or_else(|| "the current context".to_string(), |name| format!("context {name}"));
    let limit = match cluster.request_timeout.after {
        Some(after) => format!("giving up after {} (--request-timeout)", crate::cluster::deadline::shown(after)),
        None => "without a deadline (--request-timeout 0)".to_string(),
    };
    crate::safe_eprintln!(
        "capdeck: connecting to {context}: waiting for its credentials (an exec credential plugin may be asking you \
         to log in), {limit}…"
    );
    connecting.await
}

/// A console observes unless told to lead (`--engine lead`; `--demo` does): an SRE's terminal
/// must not become the operator that restarts Deployments with personal credentials.
pub fn console_mode(requested: crate::engine::config::EngineMode) -> crate::engine::config::EngineMode {
    use crate::engine::config::EngineMode;
    match requested {
        EngineMode::Auto | EngineMode::Observe => EngineMode::Observe,
        EngineMode::Lead => EngineMode::Lead,
    }
}

/// Keys and resizes from the terminal.
async fn read_terminal(tx: mpsc::UnboundedSender<Msg>) {
    use crossterm::event::{Event as TerminalEvent, EventStream};
    let mut stream = EventStream::new();
    while let Some(event) = stream.next().await {
        let msg = match event {
            Ok(TerminalEvent::Key(key)) => Msg::Key(key),
            Ok(TerminalEvent::Resize(width, height)) => Msg::Resize { width, height },
            Ok(_) => continue,
            Err(error) => {
                let _ = tx.send(Msg::Error(format!("cannot read the terminal: {error}")));
                return;
            }
        };
        if tx.send(msg).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::console_mode;
    use crate::engine::config::EngineMode;

    #[test]
    fn a_console_leads_only_when_told_to() {
        assert_eq!(console_mode(EngineMode::Auto), EngineMode::Observe, "the default observes");
        assert_eq!(console_mode(EngineMode::Observe), EngineMode::Observe);
        assert_eq!(console_mode(EngineMode::Lead), EngineMode::Lead);
    }
}
