//! The binding-Secret store: the Secrets some CAPApplication references, whole, and nothing else.
//!
//! Every Secret in scope goes by as metadata only (a `PartialObjectMetadata` list and watch: no
//! data, a few hundred bytes each), so the reads do not grow with the data of Secrets nobody
//! references. A referenced Secret is read whole, by name, when it is first seen and again only
//! when its resourceVersion moves. Reads by name are lists with a `metadata.name` field
//! selector: the API server answers them from one key, and they need no RBAC verb beyond the
//! `list` and `watch` the store had before.
//!
//! Nothing of an unreferenced Secret is kept, not even its metadata, so memory stays flat in them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, ResourceExt};
use tokio::task::JoinHandle;

use super::{Shared, prune_metadata, referenced_secrets};
use crate::api::CAPApplication;

/// The name readiness and errors are tracked under.
const KIND: &str = "BindingSecret";
/// Whole Secrets read at once after a list (a start, or a re-list after the watch expired).
const PARALLEL_READS: usize = 8;
/// A read that failed (not a 404) is tried again after this long: a missed baseline would turn
/// the Secret's next rotation into its first sight.
const RETRY: Duration = Duration::from_secs(5);

type Key = (String, String);

fn key_of<K: kube::Resource>(object: &K) -> Key {
    (object.namespace().unwrap_or_default(), object.name_any())
}

/// The store and its task. The store fills once CAPApplications have listed (it must know what
/// they reference); until then it is empty and not ready.
pub(super) fn start(
    client: kube::Client,
    metadata: Api<PartialObjectMeta<Secret>>,
    applications: Store<CAPApplication>,
    shared: Shared,
) -> (Store<Secret>, JoinHandle<()>) {
    let (reader, writer) = reflector::store::<Secret>();
    let store = reader.clone();
    let task = tokio::spawn(async move {
        let mut ready = shared.ready.subscribe();
        if tokio::select! {
            () = shared.cancel.cancelled() => true,
            result = ready.wait_for(|kinds| kinds.contains("CAPApplication")) => result.is_err(),
        } {
            return;
        }
        let wanted = referenced_secrets(&applications);
        let mut follower = Follower {
            client,
            reader,
            writer,
            wanted,
            listing: None,
            read_while_listing: BTreeSet::new(),
            retry: BTreeSet::new(),
            retry_at: None,
            shared,
        };
        follower.run(metadata, applications).await;
    });
    (store, task)
}

struct Follower {
    client: kube::Client,
    reader: Store<Secret>,
    writer: Writer<Secret>,
    /// What the CAPApplications reference now.
    wanted: BTreeSet<Key>,
    /// During a list: the referenced Secrets it showed, with their resourceVersion.
    listing: Option<BTreeMap<Key, String>>,
    /// Secrets read during a list because they became referenced then (the list may have shown
    /// them before): its end keeps them.
    read_while_listing: BTreeSet<Key>,
    /// Referenced Secrets whose last read failed, and when to try them again.
    retry: BTreeSet<Key>,
    retry_at: Option<tokio::time::Instant>,
    shared: Shared,
}

impl Follower {
    async fn run(&mut self, metadata: Api<PartialObjectMeta<Secret>>, applications: Store<CAPApplication>) {
        let mut app_changes = self.shared.application_changes.subscribe();
        let mut stream = watcher(metadata, watcher::Config::default()).default_backoff().boxed();
        loop {
            tokio::select! {
                () = self.shared.cancel.cancelled() => return,
                changed = app_changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.references_changed(referenced_secrets(&applications)).await;
                }
                next = stream.next() => match next {
                    Some(Ok(event)) => self.event(event).await,
                    Some(Err(error)) => self.shared.failed(KIND, &error),
                    None => return,
                },
                () = sleep_until(self.retry_at) => {
                    self.retry_at = None;
                    let keys = std::mem::take(&mut self.retry);
                    for key in keys {
                        self.refresh(&key).await;
                    }
                }
            }
        }
    }

    async fn event(&mut self, event: watcher::Event<PartialObjectMeta<Secret>>) {
        // `Init` comes before the list request is even sent: no proof of a connection.
        if !matches!(event, watcher::Event::Init) {
            self.shared.served(KIND);
        }
        match event {
            watcher::Event::Init => {
                self.listing = Some(BTreeMap::new());
                self.read_while_listing.clear();
            }
            watcher::Event::InitApply(meta) => {
                let key = key_of(&meta);
                if let Some(listing) = self.listing.as_mut()
                    && self.wanted.contains(&key)
                {
                    listing.insert(key, meta.resource_version().unwrap_or_default());
                }
            }
            watcher::Event::InitDone => self.list_done().await,
            watcher::Event::Apply(meta) => {
                let key = key_of(&meta);
                if self.wanted.contains(&key) && self.stored_version(&key) != meta.resource_version() {
                    self.refresh(&key).await;
                }
            }
            watcher::Event::Delete(meta) => {
                let key = key_of(&meta);
                self.retry.remove(&key);
                self.forget(&key);
            }
        }
    }

    /// A list ended: the store becomes exactly the referenced Secrets it showed, each read whole
    /// unless the store already holds that version.
    async fn list_done(&mut self) {
        let listed = self.listing.take().unwrap_or_default();
        let mut secrets = Vec::with_capacity(listed.len());
        for key in std::mem::take(&mut self.read_while_listing) {
            if !listed.contains_key(&key)
                && let Some(secret) = self.stored(&key)
            {
                secrets.push((*secret).clone());
            }
        }
        let mut to_read = Vec::new();
        for (key, version) in listed {
            match self.stored(&key) {
                Some(secret) if secret.resource_version().as_deref() == Some(version.as_str()) => {
                    secrets.push((*secret).clone());
                }
                _ => to_read.push(key),
            }
        }
        let client = self.client.clone();
        let mut reads = futures::stream::iter(to_read)
            .map(|key| {
                let client = client.clone();
                async move {
                    let read = read(&client, &key).await;
                    (key, read)
                }
            })
            .buffer_unordered(PARALLEL_READS);
        while let Some((key, read)) = reads.next().await {
            match read {
                Ok(Some(secret)) => secrets.push(secret),
                // Deleted since the list: its Delete event follows.
                Ok(None) => {}
                Err(error) => {
                    self.read_failed(&key, &error);
                    if let Some(old) = self.stored(&key) {
                        secrets.push((*old).clone());
                    }
                }
            }
        }
        self.writer.apply_watcher_event(&watcher::Event::Init);
        for secret in &secrets {
            self.writer.apply_watcher_event(&watcher::Event::InitApply(secret.clone()));
        }
        self.writer.apply_watcher_event(&watcher::Event::InitDone);
        self.shared.mark_ready(KIND);
        self.shared.changed();
    }

    /// CAPApplications reference other Secrets now: read the new ones, drop the ones no longer
    /// referenced. (During a list, the list's end reads what it showed; a Secret it showed
    /// before it became referenced is read here.)
    async fn references_changed(&mut self, now: BTreeSet<Key>) {
        let added: Vec<Key> = now.difference(&self.wanted).cloned().collect();
        let removed: Vec<Key> = self.wanted.difference(&now).cloned().collect();
        self.wanted = now;
        for key in removed {
            self.retry.remove(&key);
            self.forget(&key);
        }
        for key in added {
            if self.listing.is_some() {
                self.read_while_listing.insert(key.clone());
            }
            self.refresh(&key).await;
        }
    }

    /// Read one referenced Secret whole and store it (or drop it, when it is gone).
    async fn refresh(&mut self, key: &Key) {
        match read(&self.client, key).await {
            Ok(Some(mut secret)) => {
                self.retry.remove(key);
                let newer =
                    self.stored(key).is_none_or(|stored| stored.resource_version() != secret.resource_version());
                if newer {
                    prune_metadata(&mut secret);
                    self.writer.apply_watcher_event(&watcher::Event::Apply(secret));
                    self.shared.changed();
                }
            }
            Ok(None) => {
                self.retry.remove(key);
                self.forget(key);
            }
            Err(error) => self.read_failed(key, &error),
        }
    }

    fn read_failed(&mut self, key: &Key, error: &kube::Error) {
        tracing::warn!(namespace = %key.0, secret = %key.1, %error, "could not read a referenced binding Secret; trying again");
        self.shared.failed(KIND, &watcher::Error::InitialListFailed(clone_error(error)));
        self.retry.insert(key.clone());
        self.retry_at.get_or_insert_with(|| tokio::time::Instant::now() + RETRY);
    }

    fn forget(&mut self, key: &Key) {
        if let Some(secret) = self.stored(key) {
            self.writer.apply_watcher_event(&watcher::Event::Delete((*secret).clone()));
            self.shared.changed();
        }
    }

    fn stored(&self, key: &Key) -> Option<std::sync::Arc<Secret>> {
        self.reader.get(&ObjectRef::new(&key.1).within(&key.0))
    }

    fn stored_version(&self, key: &Key) -> Option<String> {
        self.stored(key).and_then(|secret| secret.resource_version())
    }
}

/// Until `at`, or forever without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One Secret, whole, by name: `None` when it does not exist.
async fn read(client: &kube::Client, (namespace, name): &Key) -> Result<Option<Secret>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let list = api.list(&ListParams::default().fields(&format!("metadata.name={name}"))).await?;
    Ok(list.items.into_iter().find(|secret| secret.name_any() == *name).map(|mut secret| {
        prune_metadata(&mut secret);
        secret
    }))
}

/// `kube::Error` is not `Clone`; the store's error bookkeeping wants a watcher error. The API's
/// answer keeps its status (so it is counted under its code); anything else is a transport error.
fn clone_error(error: &kube::Error) -> kube::Error {
    match error {
        kube::Error::Api(status) => kube::Error::Api(status.clone()),
        other => kube::Error::Service(other.to_string().into()),
    }
}
