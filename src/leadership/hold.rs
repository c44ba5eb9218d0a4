//! Holding the engine's Lease: take it when no other engine leads an overlapping scope, mark it
//! as leading once the one-leader check passes, step back when another leader appears, stop
//! writing when renewals fail, and release it on the way out.

use std::time::Duration;

use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{EngineScope, LeaseSettings, PublishedSettings, WatchedLeases, lease};

/// Who asks to lead: its Lease, its identity and the settings it publishes on the Lease.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub lease: LeaseSettings,
    /// Lease holder identity (pod name or host plus a random suffix).
    pub identity: String,
    pub settings: PublishedSettings,
}

/// Hold the lease while we can and no other engine leads an overlapping scope (wherever its
/// Lease lives); publish leadership to `leader`. On cancellation the lease is released so another
/// engine can take over at once.
pub async fn lead(
    client: kube::Client,
    config: Candidate,
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
    config: &Candidate,
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

/// Mark our Lease as leading, then make sure no other engine leads an overlapping scope:
/// `Ok(true)` leads, `Ok(false)` the mark failed (tried again on the next turn), `Err` steps back.
async fn mark_and_check(client: &kube::Client, config: &Candidate, scope: &EngineScope) -> Result<bool, Held> {
    if let Err(error) = lease::mark(client, &config.lease, scope, &config.settings, Some(&config.identity)).await {
        tracing::warn!(error = %crate::cluster::describe_error(&error), "cannot mark the lease as leading; retrying");
        return Ok(false);
    }
    match lease::other_leader(client, &config.lease, scope).await {
        Ok(None) => Ok(true),
        Ok(Some(other)) => {
            tracing::warn!(lease = %other.key(), "another capdeck engine leads an overlapping scope; stepping back");
            Err(Held::SteppedBack)
        }
        Err(error) => {
            tracing::error!(%error, "not leading");
            Err(Held::SteppedBack)
        }
    }
}

/// While the lease manager runs: lead when we hold the lease and, marked as leading, still see
/// no other leader (two engines that mark at once both see each other and both step back).
/// Dropping `state` on return releases the lease.
async fn hold(
    client: &kube::Client,
    config: &Candidate,
    scope: &EngineScope,
    leader: &watch::Sender<Option<bool>>,
    mut state: watch::Receiver<bool>,
    watched: &mut WatchedLeases,
    cancel: &CancellationToken,
) -> Held {
    let recheck = Duration::from_secs(config.lease.duration_seconds.max(1));
    let settings = &config.settings;
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
            match mark_and_check(client, config, scope).await {
                Ok(true) => {
                    leading = true;
                    // The lease manager has just taken or renewed it.
                    renewed = lease::OwnRenewal::starting_now();
                    tracing::info!(identity = %config.identity, lease = %own_key, %scope, "leading");
                    leader.send_replace(Some(true));
                }
                Ok(false) => {}
                Err(outcome) => break outcome,
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
        let _ = lease::mark(client, &config.lease, scope, settings, None).await;
    }
    drop(state);
    outcome
}
