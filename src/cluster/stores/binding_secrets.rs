//! The binding-Secret store: the Secrets some CAPApplication references, whole, and nothing else.
//!
//! Nothing is listed. A sync takes the Secrets' current resourceVersion (a metadata-only list of
//! one item), reads each referenced Secret by name, then watches every Secret in scope from that
//! version, as metadata only: changes arrive, but no initial list, and no data of a Secret
//! nobody references. A referenced Secret is read again only when its resourceVersion moves.
//! So the reads of a sync grow with the referenced Secrets alone, and at rest an unreferenced
//! Secret costs its change events' metadata and nothing else.
//!
//! Reads by name are lists with a `metadata.name` field selector (kube-apiserver answers them
//! from one key): they need no RBAC verb beyond the `list` and `watch` a full watch needed. When
//! the watch's version expires (410), the sync starts over.

use std::collections::BTreeSet;
use std::time::Duration;

use super::store::{self, Store, Writer};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, PartialObjectMeta, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use tokio::task::JoinHandle;

use super::{Shared, api_status, referenced_secrets};
use crate::api::CAPApplication;
use crate::api::lenient::{Lenient, Undecodable};
use crate::api::{ObjectKey, StoredSecret};

/// The name readiness and errors are tracked under.
const KIND: &str = "BindingSecret";
/// Referenced Secrets read at once during a sync.
const PARALLEL_READS: usize = 16;
/// A read that failed (not a 404) is tried again after this long: a missed baseline would turn
/// the Secret's next rotation into its first sight.
const RETRY: Duration = Duration::from_secs(5);

type Key = ObjectKey;

fn key_of<K: kube::Resource>(object: &K) -> Key {
    // A Secret's metadata that does not decode still names it (`Lenient`).
    ObjectKey::new(object.namespace().unwrap_or_default(), object.name_any())
}

/// The store and its task. The store fills once CAPApplications have listed (it must know what
/// they reference); until then it is empty and not ready.
pub(super) fn start(
    client: kube::Client,
    metadata: Api<Lenient<PartialObjectMeta<Secret>>>,
    applications: Store<CAPApplication>,
    shared: Shared,
) -> (Store<StoredSecret>, JoinHandle<()>) {
    let (reader, writer) = store::store::<StoredSecret>();
    let store = reader.clone();
    let task = tokio::spawn(async move {
        if !shared.wait_turn(KIND).await {
            return;
        }
        let mut ready = shared.ready.subscribe();
        if tokio::select! {
            () = shared.cancel.cancelled() => true,
            result = ready.wait_for(|kinds| kinds.contains("CAPApplication")) => result.is_err(),
        } {
            return;
        }
        let mut follower = Follower {
            client,
            metadata,
            applications,
            reader,
            writer,
            wanted: BTreeSet::new(),
            retry: BTreeSet::new(),
            retry_at: None,
            failures: 0,
            shared,
        };
        follower.run().await;
    });
    (store, task)
}

struct Follower {
    client: kube::Client,
    metadata: Api<Lenient<PartialObjectMeta<Secret>>>,
    applications: Store<CAPApplication>,
    reader: Store<StoredSecret>,
    writer: Writer<StoredSecret>,
    /// What the CAPApplications reference now.
    wanted: BTreeSet<Key>,
    /// Referenced Secrets whose last read failed, and when to try them again.
    retry: BTreeSet<Key>,
    retry_at: Option<tokio::time::Instant>,
    /// Failed list or watch requests in a row (the backoff).
    failures: u32,
    shared: Shared,
}

/// How a watch ended.
enum Ended {
    /// Cancelled: the stores stop.
    Stop,
    /// Its version is too old (410): sync again.
    Expired,
    /// Timed out or failed: watch again from the last version seen.
    Renew,
}

impl Follower {
    async fn run(&mut self) {
        // Subscribed before the referenced set is taken: a change in between is not missed.
        let mut app_changes = self.shared.application_changes.subscribe();
        self.wanted = referenced_secrets(&self.applications);
        'sync: loop {
            let Some(mut version) = self.current_version().await else { return };
            self.read_all().await;
            loop {
                match self.follow(&mut version, &mut app_changes).await {
                    Ended::Stop => return,
                    Ended::Expired => continue 'sync,
                    Ended::Renew => {}
                }
            }
        }
    }

    /// The Secrets' resourceVersion now, from a metadata-only list of one item; retried with a
    /// backoff until it answers. `None` when cancelled.
    async fn current_version(&mut self) -> Option<String> {
        loop {
            match self.metadata.list(&ListParams::default().limit(1)).await {
                Ok(list) => {
                    self.failures = 0;
                    self.shared.served(KIND);
                    return Some(list.metadata.resource_version.unwrap_or_default());
                }
                Err(error) => {
                    self.shared.failed(KIND, &watcher::Error::InitialListFailed(error));
                    if !self.back_off().await {
                        return None;
                    }
                }
            }
        }
    }

    /// Every referenced Secret, read whole: the store becomes exactly those that exist.
    async fn read_all(&mut self) {
        let keys: Vec<Key> = self.wanted.iter().cloned().collect();
        let client = self.client.clone();
        let mut reads = futures::stream::iter(keys)
            .map(|key| {
                let client = client.clone();
                async move {
                    let read = read(&client, &key).await;
                    (key, read)
                }
            })
            .buffer_unordered(PARALLEL_READS);
        // Each Secret goes to the store's next state as it is read, not into a list first (that
        // list doubled the Secrets' memory at every sync). Until the list ends the store shows its
        // previous state, which a failed read keeps its Secret from.
        self.writer.begin_list();
        while let Some((key, read)) = reads.next().await {
            match read {
                Ok(Some(secret)) => self.writer.listed(std::sync::Arc::new(secret)),
                Ok(None) => {}
                Err(error) => {
                    self.read_failed(&key, error);
                    if let Some(old) = self.stored(&key) {
                        self.writer.listed(old);
                    }
                }
            }
        }
        self.writer.end_list();
        self.shared.mark_ready(KIND);
        self.shared.touched.everything();
        self.shared.changed();
    }

    /// One watch request, from `version` on, until it ends; `version` follows what it shows.
    async fn follow(&mut self, version: &mut String, app_changes: &mut tokio::sync::watch::Receiver<u64>) -> Ended {
        let params = WatchParams::default().timeout(super::WATCH_TIMEOUT_SECONDS);
        let mut stream = match self.metadata.watch(&params, version).await {
            Ok(stream) => stream.boxed(),
            Err(error) => {
                let error = watcher::Error::WatchStartFailed(error);
                return self.watch_failed(&error).await;
            }
        };
        loop {
            tokio::select! {
                () = self.shared.cancel.cancelled() => return Ended::Stop,
                changed = app_changes.changed() => {
                    if changed.is_err() {
                        return Ended::Stop;
                    }
                    self.references_changed(referenced_secrets(&self.applications)).await;
                }
                () = sleep_until(self.retry_at) => {
                    self.retry_at = None;
                    for key in std::mem::take(&mut self.retry) {
                        self.refresh(&key).await;
                    }
                }
                next = stream.next() => match next {
                    None => return Ended::Renew,
                    Some(Ok(WatchEvent::Added(meta) | WatchEvent::Modified(meta))) => {
                        self.seen(version, &meta);
                        let key = key_of(&meta);
                        if self.wanted.contains(&key) && self.stored_version(&key) != meta.resource_version() {
                            self.refresh(&key).await;
                        }
                    }
                    Some(Ok(WatchEvent::Deleted(meta))) => {
                        self.seen(version, &meta);
                        let key = key_of(&meta);
                        self.retry.remove(&key);
                        self.forget(&key);
                    }
                    Some(Ok(WatchEvent::Bookmark(bookmark))) => {
                        *version = bookmark.metadata.resource_version;
                    }
                    Some(Ok(WatchEvent::Error(status))) => {
                        return self.watch_failed(&watcher::Error::WatchError(status)).await;
                    }
                    Some(Err(error)) => {
                        return self.watch_failed(&watcher::Error::WatchFailed(error)).await;
                    }
                },
            }
        }
    }

    fn seen(&mut self, version: &mut String, meta: &Lenient<PartialObjectMeta<Secret>>) {
        self.failures = 0;
        self.shared.served(KIND);
        if let Some(seen) = meta.resource_version() {
            *version = seen;
        }
    }

    /// A watch failed: 410 starts a sync over; anything else is retried after the backoff.
    async fn watch_failed(&mut self, error: &watcher::Error) -> Ended {
        if api_status(error) == Some(410) {
            return Ended::Expired;
        }
        self.shared.failed(KIND, error);
        if self.back_off().await { Ended::Renew } else { Ended::Stop }
    }

    /// Wait before the next attempt: 1 s, doubling to 30 s. False when cancelled meanwhile.
    async fn back_off(&mut self) -> bool {
        let delay = Duration::from_secs(1 << self.failures.min(5)).min(Duration::from_secs(30));
        self.failures = self.failures.saturating_add(1);
        tokio::select! {
            () = self.shared.cancel.cancelled() => false,
            () = tokio::time::sleep(delay) => true,
        }
    }

    /// CAPApplications reference other Secrets now: read the new ones, drop the ones no longer
    /// referenced.
    async fn references_changed(&mut self, now: BTreeSet<Key>) {
        let added: Vec<Key> = now.difference(&self.wanted).cloned().collect();
        let removed: Vec<Key> = self.wanted.difference(&now).cloned().collect();
        self.wanted = now;
        for key in removed {
            self.retry.remove(&key);
            self.forget(&key);
        }
        for key in added {
            self.refresh(&key).await;
        }
    }

    /// Read one referenced Secret whole and store it (or drop it, when it is gone).
    async fn refresh(&mut self, key: &Key) {
        match read(&self.client, key).await {
            Ok(Some(secret)) => {
                self.retry.remove(key);
                self.shared.record_invalid(KIND, key, None);
                if self.stored_version(key).as_deref() != secret.resource_version() {
                    self.writer.apply(secret);
                    self.shared.touched.namespace(&key.namespace);
                    self.shared.changed();
                }
            }
            Ok(None) => {
                self.retry.remove(key);
                self.forget(key);
            }
            Err(error) => self.read_failed(key, error),
        }
    }

    fn read_failed(&mut self, key: &Key, error: ReadError) {
        match error {
            ReadError::Api(error) => {
                let why = crate::cluster::describe_error(&error);
                tracing::warn!(namespace = %key.namespace, secret = %key.name, error = %why, "could not read a referenced binding Secret; trying again");
                self.shared.failed(KIND, &watcher::Error::InitialListFailed(error));
            }
            // Not retried: it is read again when it changes.
            ReadError::Undecodable(undecodable) => {
                self.shared.record_invalid(KIND, key, Some(undecodable.describe()));
                return;
            }
        }
        self.retry.insert(key.clone());
        self.retry_at.get_or_insert_with(|| tokio::time::Instant::now() + RETRY);
    }

    fn forget(&mut self, key: &Key) {
        if self.writer.remove(Some(&key.namespace), &key.name).is_some() {
            self.shared.touched.namespace(&key.namespace);
            self.shared.changed();
        }
    }

    fn stored(&self, key: &Key) -> Option<std::sync::Arc<StoredSecret>> {
        self.reader.find(Some(&key.namespace), &key.name)
    }

    fn stored_version(&self, key: &Key) -> Option<String> {
        self.stored(key).and_then(|secret| secret.resource_version().map(str::to_owned))
    }
}

/// Until `at`, or forever without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Why a referenced Secret could not be read.
enum ReadError {
    Api(kube::Error),
    Undecodable(Undecodable),
}

/// One Secret, whole, by name: `None` when it does not exist.
async fn read(client: &kube::Client, ObjectKey { namespace, name }: &Key) -> Result<Option<StoredSecret>, ReadError> {
    let api: Api<Lenient<Secret>> = Api::namespaced(client.clone(), namespace);
    let list =
        api.list(&ListParams::default().fields(&format!("metadata.name={name}"))).await.map_err(ReadError::Api)?;
    let Some(found) = list.items.into_iter().find(|secret| secret.name_any() == *name) else { return Ok(None) };
    let secret = found.into_result().map_err(ReadError::Undecodable)?;
    Ok(Some(StoredSecret::new(secret)))
}
