//! The reconcile engine: rotations become RotationBatches, batches are approved and rolled out.
//! It runs headless in the cluster (`capdeck --daemon`) or attached to the console; only the
//! holder of the Lease writes, every other engine observes.

pub mod config;
pub mod lease;
pub mod metrics;
pub mod notify;
/// `kubectl rollout status` semantics (in `api`: the console reads it too).
pub use crate::api::rollout_progress as progress;
pub mod reconcile;
pub mod settings;
pub mod writes;

use std::time::Duration;

use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::leader::{EngineScope, WatchedLeases};
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
    // The lease is let go only once this loop has stopped writing and said so: cancelled at the
    // same time, the lease task released the Lease while a pass still wrote, and an engine that
    // watches the Leases took over within that pass.
    let release = CancellationToken::new();
    let mut leadership = AbortOnDrop(match config.mode {
        EngineMode::Observe => {
            leader_tx.send_replace(Some(false));
            None
        }
        EngineMode::Auto | EngineMode::Lead => Some(tokio::spawn(lead(
            client.clone(),
            config.clone(),
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
    let writes = Writes::new(client, stores.vcap_secrets.clone(), metrics.clone(), &config.identity, write_failure);
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
        metrics.set_credentials(&crate::judging::judge(&stores, &config.judging(), config.clock.now()));
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

/// Hold the lease while we can and no other engine leads an overlapping scope (wherever its
/// Lease lives); publish leadership to `leader`. On cancellation the lease is released so another
/// engine can take over at once.
async fn lead(
    client: kube::Client,
    config: EngineConfig,
    scope: EngineScope,
    leader: watch::Sender<Option<bool>>,
    cancel: CancellationToken,
) {
    let recheck = Duration::from_secs(config.lease.duration_seconds.max(1));
    let mut reported: Option<String> = None;
    // Looked at every lease duration while observing and while leading: from a watch, not a LIST each time.
    let mut watched = WatchedLeases::engines(&client);
    loop {
        // Another engine leading an overlapping scope keeps this one an observer.
        let other = match lease::other_leader_seen(&watched, &config.lease, &scope) {
            Some(seen) => Ok(seen),
            None => lease::other_leader(&client, &config.lease, &scope).await,
        };
        let wait = match other {
            Ok(None) => None,
            Ok(Some(other)) => {
                let holder = other.renewing().map(|(identity, _)| identity.to_string()).unwrap_or_default();
                if reported.replace(other.key()).as_deref() != Some(other.key().as_str()) {
                    tracing::warn!(leader = %holder, lease = %other.key(), scope = %other.scope,
                        "another capdeck engine leads an overlapping scope; this engine observes while it does");
                }
                Some(recheck)
            }
            Err(error) => {
                if reported.replace(error.to_string()).as_deref() != Some(error.to_string().as_str()) {
                    tracing::error!(%error, "not leading");
                }
                Some(Duration::from_secs(10))
            }
        };
        if let Some(wait) = wait {
            leader.send_if_modified(|known| known.replace(false) != Some(false));
            // The other leader's Lease expiring changes nothing on the watch: look again after `wait` too.
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(wait) => continue,
                () = watched.changed() => continue,
            }
        }
        reported = None;
        let Some(manager) = lease_manager(&client, &config, &leader, &cancel).await else { return };
        let (state, task) = manager.watch().await;
        let outcome = hold(&client, &config, &scope, &leader, state, &mut watched, &cancel).await;
        leader.send_replace(Some(false));
        match tokio::time::timeout(Duration::from_secs(5), task).await {
            Ok(Ok(Ok(_))) => tracing::info!("lease released"),
            Ok(Ok(Err(error))) => tracing::warn!(%error, "could not release the lease"),
            _ => tracing::warn!("lease release did not finish"),
        }
        match outcome {
            Held::Cancelled => return,
            // Two engines that checked at the same moment both step back; a random pause lets one go first.
            Held::SteppedBack => {
                use rand::RngExt as _;
                let jitter = Duration::from_millis(rand::rng().random_range(0..recheck.as_millis().max(1) as u64));
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(jitter) => {}
                }
            }
            Held::Lost => {}
        }
    }
}

/// How holding the lease ended.
enum Held {
    Cancelled,
    /// Another engine leads an overlapping scope: we released ours.
    SteppedBack,
    /// The lease task ended.
    Lost,
}

/// Build the lease manager, retrying while the Lease cannot be used. `None`: cancelled.
async fn lease_manager(
    client: &kube::Client,
    config: &EngineConfig,
    leader: &watch::Sender<Option<bool>>,
    cancel: &CancellationToken,
) -> Option<kube_lease_manager::LeaseManager> {
    let mut failed = false;
    loop {
        let built = LeaseManagerBuilder::new(client.clone(), &config.lease.name)
            .with_namespace(&config.lease.namespace)
            .with_identity(&config.identity)
            .with_duration(config.lease.duration_seconds)
            .with_grace(config.lease.grace_seconds)
            .with_field_manager(format!("capdeck-lease-{}", config.identity))
            .build()
            .await;
        match built {
            Ok(manager) => {
                if failed {
                    tracing::info!(namespace = %config.lease.namespace, lease = %config.lease.name, "the lease can be used again");
                }
                return Some(manager);
            }
            Err(error) => {
                failed = true;
                tracing::error!(%error, namespace = %config.lease.namespace, lease = %config.lease.name, "cannot use the lease; observing until it works");
                // Known not to lead: observe (and say so) while retrying.
                leader.send_if_modified(|known| known.replace(false) != Some(false));
                tokio::select! {
                    () = cancel.cancelled() => return None,
                    () = tokio::time::sleep(Duration::from_secs(10)) => {}
                }
            }
        }
    }
}

/// While the lease manager runs: lead when we hold the lease and, marked as leading, still see
/// no other leader (two engines that mark at once both see each other and both step back).
/// Dropping `state` on return releases the lease.
async fn hold(
    client: &kube::Client,
    config: &EngineConfig,
    scope: &EngineScope,
    leader: &watch::Sender<Option<bool>>,
    mut state: watch::Receiver<bool>,
    watched: &mut WatchedLeases,
    cancel: &CancellationToken,
) -> Held {
    let recheck = Duration::from_secs(config.lease.duration_seconds.max(1));
    let settings = config.published_settings();
    let own_key = format!("{}/{}", config.lease.namespace, config.lease.name);
    let mut leading = false;
    let mut holding = *state.borrow_and_update();
    // An interval, not a sleep per turn: the watch's changes must not keep postponing it.
    let mut every_recheck = tokio::time::interval_at(tokio::time::Instant::now() + recheck, recheck);
    every_recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // kube-lease-manager only logs a failed renewal and goes on saying "held": the engine itself
    // looks every second whether the API server still has its Lease renewed by it.
    let mut every_second = tokio::time::interval(Duration::from_secs(1));
    every_second.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut renewed = lease::OwnRenewal::default();
    let outcome = loop {
        if holding && !leading {
            if let Err(error) = lease::mark(client, &config.lease, scope, &settings, Some(&config.identity)).await {
                tracing::warn!(error = %crate::cluster::describe_error(&error), "cannot mark the lease as leading; retrying");
            } else {
                match lease::other_leader(client, &config.lease, scope).await {
                    Ok(None) => {
                        leading = true;
                        // The lease manager has just taken or renewed it.
                        renewed = lease::OwnRenewal::starting_now();
                        tracing::info!(identity = %config.identity, lease = %own_key, %scope, "leading");
                        leader.send_replace(Some(true));
                    }
                    Ok(Some(other)) => {
                        tracing::warn!(lease = %other.key(), "another capdeck engine leads an overlapping scope; stepping back");
                        break Held::SteppedBack;
                    }
                    Err(error) => {
                        tracing::error!(%error, "not leading");
                        break Held::SteppedBack;
                    }
                }
            }
        } else if !holding {
            if leading {
                tracing::info!(identity = %config.identity, "lost the lease");
            }
            leading = false;
            leader.send_if_modified(|known| known.replace(false) != Some(false));
        }
        tokio::select! {
            () = cancel.cancelled() => break Held::Cancelled,
            changed = state.changed() => {
                if changed.is_err() {
                    break Held::Lost;
                }
                holding = *state.borrow_and_update();
            }
            // While leading (or retrying the mark), look again whenever a Lease changes and every
            // lease duration: only a lost write could let two engines lead; then the one whose
            // Lease sorts first stays. The watch makes each look free; while it cannot be
            // trusted, the timer LISTs.
            () = watched.changed(), if leading => {
                if let Some(Some(other)) = lease::other_leader_seen(watched, &config.lease, scope)
                    && other.key() < own_key
                {
                    tracing::warn!(lease = %other.key(), "another capdeck engine leads an overlapping scope; stepping back");
                    break Held::SteppedBack;
                }
            }
            _ = every_second.tick(), if leading => {
                if let Some(silent) = renewed.look(client, &config.lease, &config.identity, watched).await {
                    tracing::error!(lease = %own_key, last_renewed_seconds_ago = silent,
                        "this engine's renewals of its lease have failed for longer than the lease lasts (the \
                         errors above say why: a revoked token, a deleted RoleBinding, an unreachable API server); \
                         another engine may lead now, so this one stops writing");
                    break Held::Lost;
                }
            }
            _ = every_recheck.tick(), if holding => {
                let other = match lease::other_leader_seen(watched, &config.lease, scope) {
                    Some(seen) => Some(seen),
                    None if leading => lease::other_leader(client, &config.lease, scope).await.ok(),
                    None => None,
                };
                if leading
                    && let Some(Some(other)) = other
                    && other.key() < own_key
                {
                    tracing::warn!(lease = %other.key(), "another capdeck engine leads an overlapping scope; stepping back");
                    break Held::SteppedBack;
                }
            }
        }
    };
    leader.send_replace(Some(false));
    if leading || matches!(outcome, Held::SteppedBack) {
        // Best effort: the mark means nothing once the lease is released anyway.
        let _ = lease::mark(client, &config.lease, scope, &settings, None).await;
    }
    drop(state);
    outcome
}
