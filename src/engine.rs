//! The reconcile engine: rotations become RotationBatches, batches are approved and rolled out.
//! It runs headless in the cluster (`capdeck --daemon`) or attached to the console; only the
//! holder of the Lease writes, every other engine observes.

pub mod config;
pub mod metrics;
pub mod notify;
/// `kubectl rollout status` semantics (in `api`: the console reads it too).
pub use crate::api::rollout_progress as progress;
pub mod reconcile;
pub mod settings;
pub mod write_rate;
pub mod writes;

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::stores::Stores;
use crate::leadership::EngineScope;
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
    /// Wait for the engine to stop (after its cancellation token fired). A write already sent
    /// finishes, the pass makes no new one, and the lease is released first.
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

    /// Wait until the engine task ends, which it only should when cancelled: how it ended (a
    /// panic's message). Call [`Self::join`] afterwards only if this was not awaited to the end.
    pub async fn ended(&mut self) -> String {
        match (&mut self.task).await {
            Ok(()) => "it returned".into(),
            Err(error) => error.to_string(),
        }
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
    // The lease is let go only once this loop has stopped writing and said so: cancelled at the
    // same time, the lease task released the Lease while a pass still wrote, and an engine that
    // watches the Leases took over within that pass.
    let release = CancellationToken::new();
    let mut leadership = AbortOnDrop(match config.mode {
        EngineMode::Observe => {
            leader_tx.send_replace(Some(false));
            None
        }
        EngineMode::Auto | EngineMode::Lead => Some(tokio::spawn(crate::leadership::lead(
            client.clone(),
            config.candidate(),
            EngineScope::of(&stores.scope),
            leader_tx.clone(),
            release.clone(),
        ))),
    });
    let _notifier = spawn_notifier(&client, &stores, &config, &metrics, &leader, &cancel);
    let _credentials = AbortOnDrop(Some(tokio::spawn(judge_credentials_every_half_minute(
        stores.clone(),
        config.clone(),
        metrics.clone(),
        cancel.clone(),
    ))));
    let mut changes = stores.changes();
    let writes = Writes::new(
        client,
        stores.vcap_secrets.clone(),
        metrics.clone(),
        &config.identity,
        write_failure,
        config.write_rate,
        cancel.clone(),
    );
    let mut reconciler = Reconciler::new(config, stores, metrics.clone(), writes);
    let mut was_leader = false;
    loop {
        let known = *leader.borrow_and_update();
        let is_leader = known == Some(true);
        if is_leader && !was_leader {
            // A new leader re-checks everything, like a start-up.
            reconciler.recheck_everything();
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
            // Stopping wins over a change that is ready too: no pass starts after SIGTERM.
            biased;
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
    metrics.leader.set(0);
    role.send_replace(Role::Observer);
    release.cancel();
    if let Some(mut task) = leadership.0.take()
        && tokio::time::timeout(Duration::from_secs(10), &mut task).await.is_err()
    {
        task.abort();
    }
}

/// `capdeck_secret_credentials_*`: verdicts move with time alone (a revocation comes closer), not
/// only with the objects, so they are judged on a clock of their own, as the notifier judges them.
async fn judge_credentials_every_half_minute(
    stores: Stores,
    config: EngineConfig,
    metrics: Metrics,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        if !stores.is_ready() {
            continue;
        }
        // Secret by Secret, keeping a few words of each: 5,000 whole reports at once were
        // megabytes for a few numbers each.
        let mut series = Vec::new();
        crate::judging::judge_each(&stores, &config.judging(), config.clock.now(), |report| {
            series.push(metrics::CredentialSeries::of(report));
        });
        metrics.set_credentials(series);
    }
}

/// Notifications have a task of their own (when there are receivers): a slow receiver never
/// slows a pass.
fn spawn_notifier(
    client: &kube::Client,
    stores: &Stores,
    config: &EngineConfig,
    metrics: &Metrics,
    leader: &watch::Receiver<Option<bool>>,
    cancel: &CancellationToken,
) -> AbortOnDrop {
    AbortOnDrop((!config.notify.targets.is_empty()).then(|| {
        let notifier = notify::Notifier {
            client: client.clone(),
            stores: stores.clone(),
            config: config.notify.clone(),
            metrics: metrics.clone(),
            identity: config.identity.clone(),
            judging: config.judging(),
            clock: config.clock.clone(),
            lease_namespace: config.lease.namespace.clone(),
        };
        tokio::spawn(notifier.run(leader.clone(), cancel.clone()))
    }))
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
