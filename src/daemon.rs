//! `capdeck --daemon`: the engine headless in the cluster, with `/healthz` (process alive),
//! `/readyz` (stores synced and lease state known), `/metrics` (OpenMetrics), JSON logs on
//! stdout, and a graceful SIGTERM: finish in-flight writes, release the lease, exit 0.

use std::net::SocketAddr;
use std::process::ExitCode;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cluster::deadline::RequestTimeout;
use crate::cluster::stores::Stores;
use crate::cluster::{ClusterTarget, Connection, Requests, Scope};
use crate::engine::Role;
use crate::engine::metrics::Metrics;
use crate::engine::settings::EngineSettings;

/// What the health endpoints look at once the engine runs.
#[derive(Clone)]
pub struct Health {
    pub stores: Stores,
    pub role: watch::Receiver<Role>,
    /// To name the leader when this engine observes (and to see that nobody leads).
    pub client: kube::Client,
    pub lease: crate::engine::config::LeaseSettings,
    /// The engines' Leases, watched from the first time this engine observes: an observer's
    /// `/readyz` (probed every few seconds, and at each scrape of `/metrics`) names the leader
    /// without a LIST each time. A leader never needs it.
    pub leases: std::sync::Arc<std::sync::OnceLock<crate::leadership::WatchedLeases>>,
}

/// Where the daemon is: `/healthz` answers from the first moment, `/readyz` says why not yet.
#[derive(Clone)]
pub enum Phase {
    /// Not running the engine yet: what it waits for, in words.
    Starting(String),
    Running(Box<Health>),
}

/// What the endpoints answer from.
#[derive(Clone)]
struct Served {
    phase: watch::Receiver<Phase>,
    metrics: Metrics,
}

fn router(phase: watch::Receiver<Phase>, metrics: Metrics) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(serve_metrics))
        .with_state(Served { phase, metrics })
}

/// `/readyz`: names (a leader's identity, a server) come from the cluster, and people read the
/// answer in a terminal (`curl`): no control character gets through.
async fn ready(State(served): State<Served>) -> Response {
    let response = readiness(served).await;
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024).await.map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let text = text.unwrap_or_default();
    (parts.status, crate::output::terminal_safe(&text, true).into_owned()).into_response()
}

async fn readiness(served: Served) -> Response {
    let phase = served.phase.borrow().clone();
    let health = match phase {
        Phase::Starting(why) => {
            return (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}\n")).into_response();
        }
        Phase::Running(health) => health,
    };
    let role = *health.role.borrow();
    if !health.stores.is_ready() {
        let missing = health.stores.missing_kinds();
        if !missing.is_empty() {
            return (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {}\n", missing_kinds_text(&missing)))
                .into_response();
        }
        return (StatusCode::SERVICE_UNAVAILABLE, "not ready: stores are still syncing\n").into_response();
    }
    match role {
        Role::Starting => (StatusCode::SERVICE_UNAVAILABLE, "not ready: lease state not known yet\n").into_response(),
        Role::Leader => (StatusCode::OK, "ok (leader)\n").into_response(),
        // Observing is ready only while somebody else leads: otherwise rotations go unhandled.
        Role::Observer => {
            use crate::leadership::{engine_leases_among, find, leader_among};
            let watched = health.leases.get_or_init(|| crate::leadership::WatchedLeases::engines(&health.client));
            let view = match watched.current() {
                Some(leases) => leader_among(
                    &engine_leases_among(&leases, k8s_openapi::jiff::Timestamp::now()),
                    &health.stores.scope,
                ),
                None => {
                    let fallback = [crate::api::ObjectKey::new(&health.lease.namespace, &health.lease.name)];
                    find(&health.client, &health.stores.scope, &fallback).await
                }
            };
            match view {
                crate::leadership::LeaderView::Leads { identity, lease, renewed_ago, .. } => (
                    StatusCode::OK,
                    format!("ok (observer; leader: {identity} in {lease}, renewed {renewed_ago}s ago)\n"),
                )
                    .into_response(),
                other => {
                    let other = other.to_string();
                    // Some views already say it.
                    let tail = if other.contains("rotations are not being handled") {
                        ""
                    } else {
                        "; rotations are not being handled"
                    };
                    (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: this engine observes and {other}{tail}\n"))
                        .into_response()
                }
            }
        }
    }
}

async fn serve_metrics(State(served): State<Served>) -> Response {
    // `capdeck_ready` says what `/readyz` would answer now.
    let ready = readiness(served.clone()).await.status() == StatusCode::OK;
    served.metrics.ready.set(i64::from(ready));
    let mut response = served.metrics.encode().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}

/// What to say about kinds the cluster does not serve, with the fix for whose CRDs they are.
pub fn missing_kinds_text(kinds: &[&str]) -> String {
    let (ours, cap): (Vec<&str>, Vec<&str>) =
        kinds.iter().partition(|kind| matches!(**kind, "RotationBatch" | "Freeze"));
    let mut parts = Vec::new();
    if !cap.is_empty() {
        parts.push(format!(
            "the cluster does not serve {} (the CAP Operator's CRDs are not installed): install the CAP Operator, \
             which brings them; to try capdeck without it: capdeck crds | kubectl apply --server-side -f -",
            cap.join(", ")
        ));
    }
    if !ours.is_empty() {
        parts.push(format!(
            "the cluster does not serve {} (capdeck's CRDs are not installed): the Helm chart installs them \
             (crds.install=true, the default); otherwise capdeck crds --only capdeck | kubectl apply --server-side -f -",
            ours.join(", ")
        ));
    }
    parts.join("; ")
}

/// The notification receivers by host (their URLs are secrets), for the start-up line.
fn notify_hosts(notify: &crate::engine::config::NotifyConfig) -> String {
    if notify.targets.is_empty() {
        return "none".into();
    }
    let hosts: Vec<String> =
        notify.targets.iter().map(|target| format!("{} ({})", target.name, target.format.as_str())).collect();
    let json = notify.targets.iter().any(|target| target.format == crate::engine::config::PayloadFormat::Json);
    let signed = if notify.signing.is_some() && json { ", json receivers signed" } else { "" };
    format!("{} as cluster {:?}{signed}", hosts.join(", "), notify.cluster)
}

/// The receivers, read (from their Secrets) once at start: a mistake stops the daemon with the fix.
async fn notify_settings(
    connection: &Connection,
    engine: &EngineSettings,
    mode: crate::engine::config::EngineMode,
    phase: &watch::Sender<Phase>,
) -> Result<crate::engine::config::NotifyConfig, ExitCode> {
    if mode == crate::engine::config::EngineMode::Observe && !engine.notify.is_empty() {
        let error = "--notify and --notify-secret need an engine that may lead: this daemon observes (--engine \
                     observe) and would never send (drop them, or run it with --engine auto or lead)";
        tracing::error!("{error}");
        eprintln!("error: {error}");
        return Err(ExitCode::from(2));
    }
    phase.send_replace(Phase::Starting(format!("reading the notification settings from {}", connection.server)));
    let notify = match engine.notify_config(&connection.client, &connection.context).await {
        Ok(notify) => notify,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("error: {error}");
            return Err(ExitCode::from(1));
        }
    };
    if notify.signing.is_some()
        && !notify.targets.iter().any(|target| target.format == crate::engine::config::PayloadFormat::Json)
    {
        let warning = "--notify-signing-secret signs only the generic JSON receivers (json=…), and none is given: \
                       nothing is signed (add one, or drop the flag)";
        tracing::warn!("{warning}");
        eprintln!("warning: {warning}");
    }
    Ok(notify)
}

/// Connect, wait for the API server's first answer, read the notification settings and check
/// the Lease: what the engine needs, or the exit code when something is wrong that waiting cannot
/// fix (said in the log, and on stderr, with the fix).
async fn start(
    cluster: &ClusterTarget,
    engine: &EngineSettings,
    phase: &watch::Sender<Phase>,
) -> Result<(Connection, Scope, crate::engine::config::EngineConfig), ExitCode> {
    // An exec credential plugin that gives nothing in time may give it later (a token service
    // that is down): try again, saying so; any other kubeconfig problem needs a person.
    let mut tries: u32 = 0;
    let connection = loop {
        match cluster.connect_for(Requests::Watching).await {
            Ok(connection) => break connection,
            Err(error @ crate::cluster::ConnectError::Plugin { .. }) => {
                tries += 1;
                let why = error.to_string();
                phase.send_replace(Phase::Starting(format!("still connecting ({tries} tries): {why}")));
                tracing::warn!(tries, error = %why, "no credentials yet; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(2u64.saturating_pow(tries.min(5)).min(30))).await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot reach the cluster");
                return Err(ExitCode::from(1));
            }
        }
    };
    first_answer(&connection, cluster.request_timeout, phase).await;
    let scope = match &cluster.namespace {
        Some(namespace) if !cluster.all_namespaces => Scope::Namespace(namespace.clone()),
        _ => Scope::All,
    };
    let (mut config, delay_error) = engine.config(&connection.default_namespace);
    if let Some(error) = delay_error {
        tracing::warn!("{error}");
    }
    config.notify = notify_settings(&connection, engine, config.mode, phase).await?;
    // Fail at start-up, with the fix, rather than observe forever while /readyz says ok.
    if config.mode != crate::engine::config::EngineMode::Observe {
        phase.send_replace(Phase::Starting(format!(
            "checking that it may write Lease {}/{}",
            config.lease.namespace, config.lease.name
        )));
        if let Err(problem) =
            crate::leadership::lease::preflight(&connection.client, &config.lease, &config.identity).await
        {
            tracing::error!(server = %connection.server, "{problem}");
            eprintln!("error: {problem}");
            return Err(ExitCode::from(1));
        }
    }
    tracing::info!(
        context = %connection.context,
        server = %connection.server,
        scope = %scope.label(),
        rollout_delay = %crate::engine::config::humanize(config.rollout_delay),
        approval = ?config.approval,
        max_parallel_rollouts = config.max_parallel_rollouts,
        min_rollout_interval = %crate::engine::config::humanize(config.min_rollout_interval),
        write_qps = config.write_rate.0,
        write_burst = config.write_rate.1,
        change_windows = %config.change_windows.as_ref().map_or("none (any hour)", |w| w.text()),
        on_deadline = ?config.on_deadline,
        lease = %format!("{}/{}", config.lease.namespace, config.lease.name),
        identity = %config.identity,
        notify = %notify_hosts(&config.notify),
        "starting capdeck daemon"
    );
    Ok((connection, scope, config))
}

/// Ask `/version` until the API server answers (any answer, a refusal too: it is there), saying
/// in `/readyz` and the log what is wrong meanwhile. Retries back off to 30 s; the log says so on
/// the first failure and every tenth, and once when it answers.
async fn first_answer(connection: &Connection, timeout: RequestTimeout, phase: &watch::Sender<Phase>) {
    let server = connection.server.trim_end_matches('/').to_string();
    let waits = match timeout.after {
        Some(after) => format!("each try waits up to {}", crate::cluster::deadline::shown(after)),
        None => "--request-timeout 0: it waits forever".into(),
    };
    phase.send_replace(Phase::Starting(format!("connecting to {server}: waiting for its first answer ({waits})")));
    tracing::info!(server = %server, context = %connection.context, "connecting to the API server");
    let started = std::time::Instant::now();
    let mut attempts: u32 = 0;
    loop {
        match connection.client.apiserver_version().await {
            Ok(_) | Err(kube::Error::Api(_)) => {
                if attempts > 0 {
                    tracing::info!(
                        server = %server,
                        after = %crate::engine::config::humanize(std::time::Duration::from_secs(started.elapsed().as_secs())),
                        "the API server answers"
                    );
                }
                return;
            }
            Err(error) => {
                attempts += 1;
                let why = crate::cluster::describe_error(&error);
                let retry = std::time::Duration::from_secs(2u64.saturating_pow(attempts.min(5)).min(30));
                let elapsed =
                    crate::engine::config::humanize(std::time::Duration::from_secs(started.elapsed().as_secs()));
                phase.send_replace(Phase::Starting(format!(
                    "still connecting to {server} ({elapsed}, {attempts} tries): {why}"
                )));
                if attempts == 1 || attempts.is_multiple_of(10) {
                    tracing::warn!(server = %server, attempts, error = %why, "still connecting to the API server; retrying");
                } else {
                    tracing::debug!(server = %server, attempts, error = %why, "still connecting to the API server");
                }
                tokio::time::sleep(retry).await;
            }
        }
    }
}

/// JSON logs on stdout; `RUST_LOG` filters (default `info`), and no response body ever reaches
/// them (`crate::logging`).
pub fn init_logging() {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let layer = tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(false)
        .with_writer(|| EscapingWriter(crate::logging::Masking(std::io::stdout())))
        .with_filter(crate::logging::without_response_bodies())
        .with_filter(filter);
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

/// The JSON log's writer: tracing's JSON escapes C0 controls but passes DEL, C1 (an 8-bit CSI)
/// and the bidirectional format characters raw, and people read the log with `kubectl logs` in a
/// terminal. Each event arrives as one line in one write: escaped as `\uXXXX`, it stays the same
/// JSON.
struct EscapingWriter<W>(W);

impl<W: std::io::Write> std::io::Write for EscapingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::str::from_utf8(buf) {
            Ok(text) => self.0.write_all(crate::output::escape_c1(text).as_bytes()).map(|()| buf.len()),
            Err(_) => self.0.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// What the daemon runs with, built by `commands`.
pub struct DaemonConfig {
    pub engine: EngineSettings,
    /// Where it serves /healthz, /readyz and /metrics.
    pub health_addr: SocketAddr,
}

pub async fn run(cluster: &ClusterTarget, config: DaemonConfig) -> anyhow::Result<ExitCode> {
    let DaemonConfig { engine, health_addr } = config;
    init_logging();
    let metrics = Metrics::new();
    let (phase, phases) = watch::channel(Phase::Starting("reading the kubeconfig".into()));
    // Serve first: a daemon still connecting is alive (/healthz), and /readyz says what it waits for.
    let listener = match tokio::net::TcpListener::bind(health_addr).await {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, address = %health_addr, "cannot listen for health and metrics");
            // The log is JSON for a collector; a person starting the daemon by hand reads stderr.
            crate::safe_eprintln!(
                "error: cannot listen on {health_addr} for /healthz, /readyz and /metrics: {error}; choose another \
                 address with --health-addr (such as 127.0.0.1:18080)"
            );
            return Ok(ExitCode::from(1));
        }
    };
    tracing::info!(address = %listener.local_addr().unwrap_or(health_addr), "serving /healthz /readyz /metrics");
    let cancel = CancellationToken::new();
    let server_cancel = cancel.clone();
    let app = router(phases, metrics.clone());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).with_graceful_shutdown(server_cancel.cancelled_owned()).await;
    });
    let started = tokio::select! {
        started = start(cluster, &engine, &phase) => started,
        () = crate::process::shutdown_signal() => {
            tracing::info!("stopped before the engine started");
            Err(ExitCode::SUCCESS)
        }
    };
    let (connection, scope, config) = match started {
        Ok(started) => started,
        Err(code) => {
            cancel.cancel();
            let _ = server.await;
            return Ok(code);
        }
    };
    let (stores, tasks) = Stores::start(&connection.client, scope, cancel.clone());
    let lease_settings = config.lease.clone();
    let mut handle =
        crate::engine::spawn(connection.client.clone(), stores.clone(), config, metrics.clone(), cancel.clone());
    phase.send_replace(Phase::Running(Box::new(Health {
        stores: stores.clone(),
        role: handle.role.clone(),
        client: connection.client.clone(),
        lease: lease_settings,
        leases: std::sync::Arc::default(),
    })));
    let watch_connection = tokio::spawn(say_connection_changes(stores.connection(), connection.server.clone()));
    let watch_missing = tokio::spawn(say_missing_kinds(stores.missing()));
    // An engine that ended by itself (a panic) must not leave a daemon whose /readyz still says
    // it leads: it exits, and the Pod is restarted.
    let ended = tokio::select! {
        () = crate::process::shutdown_signal() => None,
        how = handle.ended() => Some(how),
    };
    watch_missing.abort();
    match &ended {
        None => {
            tracing::info!("shutting down: finishing the write in flight and releasing the lease");
            cancel.cancel();
            handle.join().await;
        }
        Some(how) => {
            tracing::error!(error = %how, "the engine stopped by itself; exiting so that it is started again");
            cancel.cancel();
        }
    }
    for task in tasks.handles {
        let _ = task.await;
    }
    watch_connection.abort();
    let _ = server.await;
    tracing::info!("stopped");
    Ok(if ended.is_some() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Log the connection's changes: one line when it is lost, one when a request succeeded again —
/// not one per retry, and not one per error text either: while a server restarts, refused
/// connections and reset requests alternate, and each would otherwise read as a new outage.
async fn say_connection_changes(
    mut connection_state: watch::Receiver<crate::cluster::stores::ConnectionState>,
    server_url: String,
) {
    let mut down = false;
    let mut refused: std::collections::BTreeSet<&'static str> = std::collections::BTreeSet::new();
    while connection_state.changed().await.is_ok() {
        let state = connection_state.borrow_and_update().clone();
        // A kind the server refuses (403) is said once, not as an outage.
        for (kind, why) in state.forbidden.iter().filter(|(kind, _)| !refused.contains(*kind)) {
            tracing::warn!(
                server = %server_url,
                kind,
                error = %why,
                "may not list or watch this kind: what it holds is unknown to the engine until the RBAC grants it \
                 (capdeck manifests has the ClusterRole)"
            );
        }
        refused = state.forbidden.keys().copied().collect();
        match (state.error, down) {
            (Some(error), false) => {
                tracing::warn!(
                    server = %server_url,
                    %error,
                    "API server unreachable or refusing; watches retry by themselves (check that the server is up, \
                     reachable from here, and that the credentials are valid)"
                );
                down = true;
            }
            (Some(error), true) => tracing::debug!(server = %server_url, %error, "API server still unreachable"),
            (None, true) => {
                tracing::info!(server = %server_url, "API server reachable again");
                down = false;
            }
            (None, false) => {}
        }
    }
}

/// Log the kinds the server does not serve (a CRD not installed), once they settle.
async fn say_missing_kinds(mut missing: watch::Receiver<std::collections::BTreeSet<&'static str>>) {
    let mut said: Vec<&str> = Vec::new();
    while missing.changed().await.is_ok() {
        // The stores find missing kinds one by one at start-up: say the settled set once.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let kinds: Vec<&str> = missing.borrow_and_update().iter().copied().collect();
        if kinds == said {
            continue;
        }
        said.clone_from(&kinds);
        if kinds.is_empty() {
            tracing::info!("every kind capdeck reads is served now");
        } else {
            tracing::error!("{}", missing_kinds_text(&kinds));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "x\u{1b}]0;pwned\u{7}\rOVER\u{9b}31m\u{7f}a\u{202e}b";

    #[test]
    fn the_json_log_escapes_what_tracing_leaves_raw() {
        use std::io::Write as _;
        let line = format!("{}\n", serde_json::json!({"leader": HOSTILE}));
        let mut out = Vec::new();
        EscapingWriter(&mut out).write_all(line.as_bytes()).expect("write");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(!text.trim_end().chars().any(|c| c.is_control() || c == '\u{202e}'), "{text:?}");
        let read: serde_json::Value = serde_json::from_str(&text).expect("still JSON");
        assert_eq!(read["leader"], HOSTILE, "the same value");
    }

    #[tokio::test]
    async fn readyz_never_passes_control_characters() {
        let (_phase, phases) = watch::channel(Phase::Starting(format!("still connecting to {HOSTILE}")));
        let response = ready(State(Served { phase: phases, metrics: Metrics::new() })).await;
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.expect("body");
        let text = String::from_utf8(body.to_vec()).expect("utf-8");
        assert!(!text.trim_end().chars().any(|c| c.is_control() || c == '\u{202e}'), "{text:?}");
        assert!(text.starts_with("not ready: still connecting to x\\x1b]0;pwned"), "{text}");
    }
}
