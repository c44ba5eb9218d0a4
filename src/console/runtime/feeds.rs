//! The tasks that feed the console's loop: the leader and the judging settings it publishes, the Go CAP Operator's Lease, this engine's role, the connection, who the user is, write failures, and the snapshots.

use super::*;

pub(super) fn forward_write_failure(
    mut failure: watch::Receiver<Option<String>>,
    tx: mpsc::UnboundedSender<Envelope>,
    generation: u64,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        while failure.changed().await.is_ok() {
            let current = failure.borrow_and_update().clone();
            if tx.send((generation, Msg::WriteFailure(current))).is_err() {
                return;
            }
        }
    })
}

/// What [`forward_leader`] watches for, and the margins' settings it keeps up to date.
pub(super) struct LeaderWatch {
    pub(super) lease: crate::engine::config::LeaseSettings,
    pub(super) scope: Scope,
    pub(super) timing: watch::Sender<crate::credentials::Judging>,
    pub(super) own: crate::credentials::Judging,
}

/// Which engine leads what the console shows: a watch on every capdeck engine Lease (by label,
/// all namespaces; no polling, so the console at rest still only watches), re-evaluated every
/// second so "renewed Ns ago" stays true. A user who may not list Leases cluster-wide gets the
/// well-known places read with GETs every 10 s instead ([`crate::leadership::find`]).
pub(super) fn forward_leader(
    client: kube::Client,
    watching: LeaderWatch,
    tx: mpsc::UnboundedSender<Envelope>,
    generation: u64,
) -> JoinHandle<()> {
    use crate::leadership::{LeaderView, WatchedLeases, engine_leases_among, find, leader_among};
    let LeaderWatch { lease, scope, timing, own } = watching;
    // The margins follow the leader's settings; this console's own when nobody publishes any.
    let send = move |view: LeaderView| {
        let chosen = match &view {
            LeaderView::Leads { lease, settings: Some(settings), .. } => {
                let lease_namespace = lease.split_once('/').map_or(lease.as_str(), |(namespace, _)| namespace);
                crate::judging::of_leader(settings, lease_namespace)
            }
            _ => own.clone(),
        };
        timing.send_if_modified(|current| {
            let changed = *current != chosen;
            *current = chosen.clone();
            changed
        });
        tx.send((generation, Msg::Leader(view))).is_ok()
    };
    tokio::spawn(async move {
        let mut watched = WatchedLeases::engines(&client);
        let fallback = [crate::api::ObjectKey::new(&lease.namespace, &lease.name)];
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut looked: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                () = watched.changed() => {}
                _ = tick.tick() => {}
            }
            let view = match watched.current() {
                Some(leases) => leader_among(&engine_leases_among(&leases, Timestamp::now()), &scope),
                // Not answered yet: nothing to say.
                None if watched.failing().is_none() => continue,
                // The watch fails (e.g. no `watch leases` in all namespaces): read the well-known
                // places, every 10 s.
                None => {
                    if looked.is_some_and(|at| at.elapsed() < Duration::from_secs(10)) {
                        continue;
                    }
                    looked = Some(tokio::time::Instant::now());
                    find(&client, &scope, &fallback).await
                }
            };
            if !send(view) {
                return;
            }
        }
    })
}

/// Whether a Go CAP Operator runs: a watch on its Lease (`capoperator-lease-lock`, in whatever
/// namespace it runs), re-evaluated every 5 s and sent when it changes. A user who may not watch
/// Leases cluster-wide sees no warning; the log says why once.
pub(super) fn forward_go_operator(
    client: kube::Client,
    tx: mpsc::UnboundedSender<Envelope>,
    generation: u64,
) -> JoinHandle<()> {
    use crate::leadership::WatchedLeases;
    tokio::spawn(async move {
        let mut watched = WatchedLeases::go_operator(&client);
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        let mut told = false;
        // What the app was last told (it starts knowing of none).
        let mut sent: Option<String> = None;
        loop {
            tokio::select! {
                () = watched.changed() => {}
                _ = tick.tick() => {}
            }
            let Some(leases) = watched.current() else {
                if let Some(error) = watched.failing()
                    && !std::mem::replace(&mut told, true)
                {
                    tracing::info!(%error, "cannot watch the Go CAP Operator's Lease; the header will not warn about it");
                }
                continue;
            };
            let running = crate::leadership::renewed_among(&leases, Timestamp::now()).into_iter().next();
            if running == sent {
                continue;
            }
            sent.clone_from(&running);
            if tx.send((generation, Msg::GoOperator(running))).is_err() {
                return;
            }
        }
    })
}

pub(super) fn forward_role(
    mut role: watch::Receiver<Role>,
    tx: mpsc::UnboundedSender<Envelope>,
    generation: u64,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let current = *role.borrow_and_update();
            if tx.send((generation, Msg::Role(current))).is_err() || role.changed().await.is_err() {
                return;
            }
        }
    })
}

pub(super) fn forward_connection(
    mut connection: watch::Receiver<crate::cluster::stores::ConnectionState>,
    tx: mpsc::UnboundedSender<Envelope>,
    generation: u64,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let state = connection.borrow_and_update().clone();
            if tx.send((generation, Msg::Connection(state))).is_err() || connection.changed().await.is_err() {
                return;
            }
        }
    })
}

pub(super) fn forward_identity(
    client: kube::Client,
    tx: mpsc::UnboundedSender<Envelope>,
    generation: u64,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // The API may be down at start: keep asking (slowly) until it answers.
        let mut delay = Duration::from_secs(1);
        loop {
            if let Some(user) = whoami(&client).await {
                let _ = tx.send((generation, Msg::Identity(user)));
                return;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    })
}

pub(super) fn event_time(event: &Event) -> Option<Timestamp> {
    event.event_time.as_ref().map(|t| t.0).or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Rebuild the snapshot when a store changes, at most every `SNAPSHOT_INTERVAL` (longer when a
/// rebuild itself is slow). The build runs on the blocking pool: on a big cluster it takes a
/// while, and the async workers are the attached engine's too.
pub(super) async fn snapshots(
    stores: Stores,
    mut timing: watch::Receiver<crate::credentials::Judging>,
    tx: mpsc::UnboundedSender<Envelope>,
    generation: u64,
    cancel: CancellationToken,
) {
    let mut changes = stores.changes();
    let mut synced = stores.is_ready();
    loop {
        let started = std::time::Instant::now();
        let building = stores.clone();
        let timing_now = timing.borrow_and_update().clone();
        let built = tokio::task::spawn_blocking(move || {
            let mut events: Vec<Arc<Event>> = building.events.as_ref().map(|store| store.state()).unwrap_or_default();
            events.sort_by_key(|event| std::cmp::Reverse(event_time(event)));
            events.truncate(EVENTS_KEPT);
            readmodel::snapshot(&building, &events, &timing_now)
        })
        .await;
        match built {
            Ok(snapshot) => {
                if tx.send((generation, Msg::Snapshot(Arc::new(snapshot)))).is_err() {
                    return;
                }
            }
            Err(error) => tracing::error!(%error, "building the console's view of the cluster failed"),
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(SNAPSHOT_INTERVAL.max(started.elapsed() * SNAPSHOT_PAUSE_FACTOR)) => {}
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            changed = timing.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = stores.wait_ready(), if !synced => synced = true,
        }
    }
}
