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

use crate::cli::EngineArgs;
use crate::cluster::stores::Stores;
use crate::cluster::{ClusterArgs, Scope};
use crate::engine::Role;
use crate::engine::metrics::Metrics;

/// What the health endpoints look at.
#[derive(Clone)]
pub struct Health {
    pub stores: Stores,
    pub role: watch::Receiver<Role>,
    pub metrics: Metrics,
    /// To name the leader when this engine observes (and to see that nobody leads).
    pub client: kube::Client,
    pub lease: crate::engine::config::LeaseSettings,
}

pub fn router(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .with_state(health)
}

async fn ready(State(health): State<Health>) -> Response {
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
            let fallback = [(health.lease.namespace.clone(), health.lease.name.clone())];
            match crate::cluster::leader::find(&health.client, &health.stores.scope, &fallback).await {
                crate::cluster::leader::LeaderView::Leads { identity, lease, renewed_ago, .. } => (
                    StatusCode::OK,
                    format!("ok (observer; leader: {identity} in {lease}, renewed {renewed_ago}s ago)\n"),
                )
                    .into_response(),
                other => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: this engine observes and {other}; rotations are not being handled\n"),
                )
                    .into_response(),
            }
        }
    }
}

async fn metrics(State(health): State<Health>) -> Response {
    let mut response = health.metrics.encode().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}

/// What to say about kinds the cluster does not serve.
pub fn missing_kinds_text(kinds: &[&str]) -> String {
    format!(
        "the cluster does not serve {} (their CRDs are not installed): capdeck crds | kubectl apply --server-side -f -",
        kinds.join(", ")
    )
}

/// The notification receivers by host (their URLs are secrets), for the start-up line.
fn notify_hosts(notify: &crate::engine::config::NotifyConfig) -> String {
    if notify.targets.is_empty() {
        return "none".into();
    }
    let hosts: Vec<String> =
        notify.targets.iter().map(|target| format!("{} ({:?})", target.host, target.format)).collect();
    format!("{} as cluster {:?}", hosts.join(", "), notify.cluster)
}

/// JSON logs on stdout; `RUST_LOG` filters (default `info`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_current_span(false)
        .with_env_filter(filter)
        .with_writer(std::io::stdout)
        .try_init();
}

pub async fn run(cluster: &ClusterArgs, engine: &EngineArgs, health_addr: SocketAddr) -> anyhow::Result<ExitCode> {
    init_logging();
    let connection = match cluster.connect().await {
        Ok(connection) => connection,
        Err(error) => {
            tracing::error!(%error, "cannot reach the cluster");
            return Ok(ExitCode::from(1));
        }
    };
    let scope = match &cluster.namespace {
        Some(namespace) if !cluster.all_namespaces => Scope::Namespace(namespace.clone()),
        _ => Scope::All,
    };
    let (mut config, delay_error) = engine.config(&connection.default_namespace);
    if let Some(error) = delay_error {
        tracing::warn!("{error}");
    }
    config.notify = match engine.notify_config(&connection.client, &connection.context).await {
        Ok(notify) => notify,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("error: {error}");
            return Ok(ExitCode::from(1));
        }
    };
    // Fail at start-up, with the fix, rather than observe forever while /readyz says ok.
    if config.mode != crate::engine::config::EngineMode::Observe
        && let Err(problem) = crate::engine::lease::preflight(&connection.client, &config.lease, &config.identity).await
    {
        tracing::error!(server = %connection.server, "{problem}");
        eprintln!("error: {problem}");
        return Ok(ExitCode::from(1));
    }
    tracing::info!(
        context = %connection.context,
        server = %connection.server,
        scope = %scope.label(),
        rollout_delay = %crate::engine::config::humanize(config.rollout_delay),
        approval = ?config.approval,
        max_parallel_rollouts = config.max_parallel_rollouts,
        min_rollout_interval = %crate::engine::config::humanize(config.min_rollout_interval),
        lease = %format!("{}/{}", config.lease.namespace, config.lease.name),
        identity = %config.identity,
        notify = %notify_hosts(&config.notify),
        "starting capdeck daemon"
    );
    let cancel = CancellationToken::new();
    let (stores, tasks) = Stores::start(&connection.client, scope, cancel.clone());
    let metrics = Metrics::new();
    let lease_settings = config.lease.clone();
    let handle =
        crate::engine::spawn(connection.client.clone(), stores.clone(), config, metrics.clone(), cancel.clone());
    let health = Health {
        stores: stores.clone(),
        role: handle.role.clone(),
        metrics,
        client: connection.client.clone(),
        lease: lease_settings,
    };
    let listener = match tokio::net::TcpListener::bind(health_addr).await {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, address = %health_addr, "cannot listen for health and metrics");
            cancel.cancel();
            handle.join().await;
            return Ok(ExitCode::from(1));
        }
    };
    tracing::info!(address = %listener.local_addr().unwrap_or(health_addr), "serving /healthz /readyz /metrics");
    let server_cancel = cancel.clone();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router(health)).with_graceful_shutdown(server_cancel.cancelled_owned()).await;
    });
    let mut connection_state = stores.connection();
    let server_url = connection.server.clone();
    let watch_connection = tokio::spawn(async move {
        // One line when the connection is lost, one when a request succeeded again — not one per
        // retry, and not one per error text either: while a server restarts, refused connections
        // and reset requests alternate, and each would otherwise read as a new outage.
        let mut down = false;
        while connection_state.changed().await.is_ok() {
            let state = connection_state.borrow_and_update().clone();
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
    });
    let mut missing = stores.missing();
    let watch_missing = tokio::spawn(async move {
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
    });
    crate::process::shutdown_signal().await;
    watch_missing.abort();
    tracing::info!("shutting down: finishing in-flight writes and releasing the lease");
    cancel.cancel();
    handle.join().await;
    for task in tasks.handles {
        let _ = task.await;
    }
    watch_connection.abort();
    let _ = server.await;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}
