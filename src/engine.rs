//! The reconcile engine: rotations become RotationBatches, batches are approved and rolled out.
//! It runs headless in the cluster (`capdeck --daemon`) or attached to the console; only the
//! holder of the Lease writes, every other engine observes.

pub mod actions;
pub mod config;
pub mod lease;
pub mod metrics;
pub mod notify;
pub mod progress;
pub mod reconcile;
pub mod writes;

use std::time::Duration;

use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::stores::Stores;
use config::{EngineConfig, EngineMode};
use metrics::Metrics;
use reconcile::Reconciler;
use writes::Writes;

/// What this engine is doing, for the console header and `/readyz`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Stores still syncing or leadership not known yet.
    Starting,
    /// Holds the lease: writes.
    Leader,
    /// Another engine leads (or `--engine observe`): watches only.
    Observer,
}

impl Role {
    pub fn label(self) -> &'static str {
        match self {
            Self::Starting => "Starting",
            Self::Leader => "Leader",
            Self::Observer => "Observer",
        }
    }
}

/// How many reconcile passes an engine has completed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassCount {
    pub completed: u64,
    /// Of those, passes as leader: the first one is the start-up re-check.
    pub as_leader: u64,
}

/// A running engine.
pub struct EngineHandle {
    pub role: watch::Receiver<Role>,
    pub metrics: Metrics,
    /// The last failed write's error while it lasts (cleared by a successful write).
    pub write_failure: watch::Receiver<Option<String>>,
    /// Reconcile passes completed: tests (and anyone) wait for the engine's progress instead of
    /// sleeping.
    pub passes: watch::Receiver<PassCount>,
    task: JoinHandle<()>,
}

impl EngineHandle {
    /// Wait for the engine to stop (after its cancellation token fired). In-flight writes of the
    /// current pass finish and the lease is released first.
    pub async fn join(self) {
        let _ = self.task.await;
    }

    /// Stop at once, like a killed process: nothing finishes, the lease is not released.
    pub fn abort(self) {
        self.task.abort();
    }

    /// Whether the engine task has ended (it only should when cancelled).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

/// Start the engine on `stores` (which the caller started with the same client).
pub fn spawn(
    client: kube::Client,
    stores: Stores,
    config: EngineConfig,
    metrics: Metrics,
    cancel: CancellationToken,
) -> EngineHandle {
    let (role_tx, role) = watch::channel(Role::Starting);
    let (failure_tx, write_failure) = watch::channel(None);
    let (passes_tx, passes) = watch::channel(PassCount::default());
    let task_metrics = metrics.clone();
    let signals = Signals { role: role_tx, write_failure: failure_tx, passes: passes_tx };
    let task = tokio::spawn(async move {
        run(client, stores, config, task_metrics, signals, cancel).await;
    });
    EngineHandle { role, metrics, write_failure, passes, task }
}

/// What the engine task publishes.
struct Signals {
    role: watch::Sender<Role>,
    write_failure: watch::Sender<Option<String>>,
    passes: watch::Sender<PassCount>,
}

async fn run(
    client: kube::Client,
    stores: Stores,
    config: EngineConfig,
    metrics: Metrics,
    signals: Signals,
    cancel: CancellationToken,
) {
    let Signals { role, write_failure, passes } = signals;
    tokio::select! {
        () = cancel.cancelled() => return,
        () = stores.wait_ready() => {}
    }
    // None until the lease state is known (observers know at once).
    let (leader_tx, mut leader) = watch::channel(None::<bool>);
    let mut leadership = AbortOnDrop(match config.mode {
        EngineMode::Observe => {
            leader_tx.send_replace(Some(false));
            None
        }
        EngineMode::Auto | EngineMode::Lead => {
            Some(tokio::spawn(lead(client.clone(), config.clone(), leader_tx.clone(), cancel.clone())))
        }
    });
    // Notifications have a task of their own: a slow receiver never slows a pass.
    let _notifier = AbortOnDrop((!config.notify.targets.is_empty()).then(|| {
        let notifier = notify::Notifier {
            client: client.clone(),
            stores: stores.clone(),
            config: config.notify.clone(),
            metrics: metrics.clone(),
            identity: config.identity.clone(),
            timing: config.credential_timing(),
            clock: config.clock.clone(),
        };
        tokio::spawn(notifier.run(leader.clone(), cancel.clone()))
    }));
    let mut changes = stores.changes();
    let writes = Writes::new(client, metrics.clone(), &config.identity, write_failure);
    let mut reconciler = Reconciler::new(config, stores, metrics.clone(), writes);
    let mut was_leader = false;
    loop {
        let known = *leader.borrow_and_update();
        let is_leader = known == Some(true);
        if is_leader && !was_leader {
            // A new leader re-checks everything, like a start-up.
            reconciler.recheck_all = true;
        }
        was_leader = is_leader;
        metrics.leader.set(i64::from(is_leader));
        role.send_replace(match known {
            None => Role::Starting,
            Some(true) => Role::Leader,
            Some(false) => Role::Observer,
        });
        // Mark changes seen *before* the pass: one that lands during the pass (a user's force
        // while we write status) must wake the next pass, not be swallowed by it. Our own
        // writes cost one extra pass, which writes nothing.
        changes.borrow_and_update();
        let wake = reconciler.pass(is_leader).await;
        passes.send_modify(|count| {
            count.completed += 1;
            count.as_leader += u64::from(is_leader);
        });
        let sleep = wake.unwrap_or(Duration::from_secs(60));
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = leader.changed() => {}
            _ = changes.changed() => {
                // Let a burst of watch events settle into one pass.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            () = tokio::time::sleep(sleep) => {}
        }
    }
    drop(leader_tx);
    if let Some(mut task) = leadership.0.take()
        && tokio::time::timeout(Duration::from_secs(10), &mut task).await.is_err()
    {
        task.abort();
    }
    metrics.leader.set(0);
    role.send_replace(Role::Observer);
}

/// The lease task dies with the engine's task: an engine aborted (a killed process, in tests)
/// must not keep renewing its lease from a detached task.
struct AbortOnDrop(Option<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// Hold the lease while we can; publish leadership to `leader`. On cancellation the lease is
/// released so another engine can take over at once.
async fn lead(
    client: kube::Client,
    config: EngineConfig,
    leader: watch::Sender<Option<bool>>,
    cancel: CancellationToken,
) {
    let manager = loop {
        let built = LeaseManagerBuilder::new(client.clone(), &config.lease.name)
            .with_namespace(&config.lease.namespace)
            .with_identity(&config.identity)
            .with_duration(config.lease.duration_seconds)
            .with_grace(config.lease.grace_seconds)
            .with_field_manager(format!("capdeck-lease-{}", config.identity))
            .build()
            .await;
        match built {
            Ok(manager) => break manager,
            Err(error) => {
                tracing::error!(%error, namespace = %config.lease.namespace, lease = %config.lease.name, "cannot use the lease; observing until it works");
                // Known not to lead: observe (and say so) while retrying.
                leader.send_if_modified(|known| known.replace(false).is_none());
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(10)) => {}
                }
            }
        }
    };
    let (mut state, task) = manager.watch().await;
    leader.send_replace(Some(*state.borrow_and_update()));
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            changed = state.changed() => {
                if changed.is_err() {
                    break;
                }
                let holding = *state.borrow_and_update();
                tracing::info!(leader = holding, identity = %config.identity, "lease state changed");
                leader.send_replace(Some(holding));
            }
        }
    }
    leader.send_replace(Some(false));
    // Dropping the receiver makes the lease task release the lease.
    drop(state);
    match tokio::time::timeout(Duration::from_secs(5), task).await {
        Ok(Ok(Ok(_))) => tracing::info!("lease released"),
        Ok(Ok(Err(error))) => tracing::warn!(%error, "could not release the lease"),
        _ => tracing::warn!("lease release did not finish"),
    }
}
