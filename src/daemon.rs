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
        return (StatusCode::SERVICE_UNAVAILABLE, "not ready: stores are still syncing\n").into_response();
    }
    if role == Role::Starting {
        return (StatusCode::SERVICE_UNAVAILABLE, "not ready: lease state not known yet\n").into_response();
    }
    (StatusCode::OK, format!("ok ({})\n", role.label().to_lowercase())).into_response()
}

async fn metrics(State(health): State<Health>) -> Response {
    let mut response = health.metrics.encode().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
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
    let (config, delay_error) = engine.config();
    if let Some(error) = delay_error {
        tracing::error!("{error}");
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
        "starting capdeck daemon"
    );
    let cancel = CancellationToken::new();
    let (stores, tasks) = Stores::start(&connection.client, scope, cancel.clone());
    let metrics = Metrics::new();
    let handle =
        crate::engine::spawn(connection.client.clone(), stores.clone(), config, metrics.clone(), cancel.clone());
    let health = Health { stores: stores.clone(), role: handle.role.clone(), metrics };
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
    let watch_connection = tokio::spawn(async move {
        while connection_state.changed().await.is_ok() {
            let state = connection_state.borrow_and_update().clone();
            match state.error {
                Some(error) => tracing::warn!(%error, "API server unreachable; watches retry"),
                None => tracing::info!("API server reachable again"),
            }
        }
    });
    crate::commands::shutdown_signal().await;
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
