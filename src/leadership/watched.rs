//! Leases kept up to date by one watch (all namespaces, by label or by name), for an engine that
//! looks at them again and again: a leader re-checking that nobody else leads, an observer waiting
//! for the leader to go, the Go CAP Operator's Lease once a minute. Each look is then free; the
//! API server sees one watch, resumed every 30 minutes, instead of a LIST per look.
//!
//! The copy is only trusted while the watch works: until its first list is answered, and from a
//! failed watch until it delivers again, [`WatchedLeases::current`] says `None` and the caller LISTs as
//! before (so an engine whose ClusterRole lacks `watch leases` still works, with the old requests).

use std::collections::BTreeMap;

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt as _;
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::watch;

use super::{ENGINE_LABEL, GO_OPERATOR_LEASE};
use crate::api::ObjectKey;
use crate::api::lenient::Lenient;

/// What the watch has seen: the Leases by `(namespace, name)`, once listed, and whether the watch
/// works now.
#[derive(Clone, Debug, Default)]
struct Seen {
    leases: BTreeMap<ObjectKey, Lease>,
    listed: bool,
    /// Why the watch does not work now (`None` once an event arrives again).
    failing: Option<String>,
}

/// A watch on Leases. Dropping it stops the watch.
#[derive(Debug)]
pub struct WatchedLeases {
    seen: watch::Receiver<Seen>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WatchedLeases {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WatchedLeases {
    /// Every capdeck engine's Lease (by [`ENGINE_LABEL`]).
    pub fn engines(client: &kube::Client) -> Self {
        Self::spawn(
            client,
            "capdeck engines' Leases",
            crate::cluster::stores::watch_config().labels(&format!("{ENGINE_LABEL}=true")),
        )
    }

    /// The Go CAP Operator's Leases (by name, in any namespace).
    pub fn go_operator(client: &kube::Client) -> Self {
        Self::spawn(
            client,
            "the Go CAP Operator's Lease",
            crate::cluster::stores::watch_config().fields(&format!("metadata.name={GO_OPERATOR_LEASE}")),
        )
    }

    fn spawn(client: &kube::Client, what: &'static str, config: watcher::Config) -> Self {
        let (tx, seen) = watch::channel(Seen::default());
        let api: kube::Api<Lenient<Lease>> = kube::Api::all(client.clone());
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, config).default_backoff().boxed();
            // A re-list builds here and replaces what was seen only once complete.
            let mut relisting: Option<BTreeMap<ObjectKey, Lease>> = None;
            let mut told = false;
            while let Some(event) = stream.next().await {
                let key =
                    |lease: &Lenient<Lease>| ObjectKey::new(lease.namespace().unwrap_or_default(), lease.name_any());
                if tx.is_closed() {
                    return;
                }
                // Told only when what a look would see changes: not for each Lease of a re-list.
                tx.send_if_modified(|seen| match event {
                    // A failed watch is trusted again once it delivers: a complete re-list, or a
                    // change after it resumed (an engine's Lease is renewed every few seconds).
                    Ok(watcher::Event::Init) => {
                        relisting = Some(BTreeMap::new());
                        false
                    }
                    Ok(watcher::Event::InitApply(lease)) => {
                        // A Lease that does not decode leads nothing.
                        if let Ok(decoded) = lease.0.clone() {
                            relisting.get_or_insert_default().insert(key(&lease), decoded);
                        }
                        false
                    }
                    Ok(watcher::Event::InitDone) => {
                        seen.leases = relisting.take().unwrap_or_default();
                        seen.listed = true;
                        seen.failing = None;
                        true
                    }
                    Ok(watcher::Event::Apply(lease)) => {
                        match lease.0.clone() {
                            Ok(decoded) => seen.leases.insert(key(&lease), decoded),
                            Err(_) => seen.leases.remove(&key(&lease)),
                        };
                        seen.failing = None;
                        true
                    }
                    Ok(watcher::Event::Delete(lease)) => {
                        seen.leases.remove(&key(&lease));
                        seen.failing = None;
                        true
                    }
                    Err(error) => {
                        let forbidden = matches!(
                            &error,
                            watcher::Error::InitialListFailed(kube::Error::Api(status))
                                | watcher::Error::WatchStartFailed(kube::Error::Api(status)) if status.code == 403
                        );
                        let error = crate::cluster::describe_watch_error(&error);
                        // Once: an engine installed with an older ClusterRole (no `watch leases`) lists instead.
                        if forbidden && !std::mem::replace(&mut told, true) {
                            tracing::warn!(%error, "may not watch {what} (all namespaces); listing them when \
                                needed instead (more requests at rest): grant watch on leases.coordination.k8s.io, \
                                as the ClusterRole of `capdeck manifests` does");
                        } else {
                            tracing::debug!(%error, "the watch on {what} failed; listing them until it recovers");
                        }
                        seen.failing.replace(error).is_none()
                    }
                });
            }
        });
        Self { seen, task }
    }

    /// The Leases as the watch sees them now; `None` while it cannot be trusted (not listed yet,
    /// or failing): then LIST instead.
    pub fn current(&self) -> Option<Vec<Lease>> {
        let seen = self.seen.borrow();
        (seen.listed && seen.failing.is_none()).then(|| seen.leases.values().cloned().collect())
    }

    /// Why the watch does not work now, once it has failed (`None` while it works or has not
    /// answered yet).
    pub fn failing(&self) -> Option<String> {
        self.seen.borrow().failing.clone()
    }

    /// Wait until the watch has seen something new (a Lease renewed, marked, taken or gone; a
    /// failure). Never returns while the watch is gone (it only ends when dropped).
    pub async fn changed(&mut self) {
        if self.seen.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
