//! Stores of everything capdeck reads, shared by the engine and the console:
//! `watcher → strip managedFields (and prune) → store` (our own store, `store`: kube's reflector
//! store copied four strings of every object into its key).
//!
//! - CAP kinds and RotationBatches are decoded through `DeserializeGuard`: a malformed object is
//!   recorded (`Stores::invalid`) and never stops a watch.
//! - Binding Secrets: only those a CAPApplication references are read (by name) and kept; a
//!   metadata-only watch from the version they were read at brings changes (`binding_secrets`).
//!   Nothing lists all Secrets, so neither memory nor reads grow with Secrets nobody references.
//! - The console's stores list the kind on screen first (a streaming list where the server offers
//!   it); every other watch waits until it has listed.
//! - VCAP Secrets are selected server-side by their `sme.sap.com/secret-owner-hash` label.
//! - Deployments are held as `DeploymentView` (what capdeck reads of them), decoded straight
//!   from the watch: k8s-openapi's `Deployment` costs 4.5 KB per object before any content.
//! - Connection health: watch errors mark the API unreachable; a `/version` probe marks it back.
//! - Namespaces (the namespace level of change windows) and Freezes are optional: a user who may
//!   not read them, or a cluster without the Freeze CRD, leaves their store empty and ready.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

mod binding_secrets;
mod store;
mod touched;

pub use store::Store;
use store::Writer;
pub use touched::Touched;
use touched::TouchedLog;

use super::Scope;
use crate::api::lenient::Lenient;
use crate::api::service_binding::ServiceBinding;
use crate::api::{
    CAPApplication, CAPApplicationVersion, CAPTenant, CAPTenantOperation, DeploymentView, Freeze,
    LABEL_SECRET_OWNER_HASH, ObjectKey, RotationBatch, StoredSecret,
};

/// An object the API returned that does not decode as its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidObject {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub error: String,
}

/// Whether the API server is reachable, as the watches see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionState {
    /// The last error, while the API is unreachable or refusing.
    pub error: Option<String>,
    /// Failed reconnect probes since the error started.
    pub attempts: u32,
    /// Kinds the API server answers but refuses to list or watch for these credentials (403),
    /// with its words: reachable, yet what they hold is missing from every view.
    pub forbidden: BTreeMap<&'static str, String>,
}

impl ConnectionState {
    pub fn is_connected(&self) -> bool {
        self.error.is_none()
    }
}

type InvalidMap = Arc<Mutex<BTreeMap<(&'static str, ObjectKey), String>>>;

/// Failed lists and watches so far, by kind and HTTP status (`transport` without an answer).
type WatchErrors = Arc<Mutex<BTreeMap<(&'static str, String), u64>>>;

/// The stores, cheap to clone. Readers only; the watch tasks write.
#[derive(Clone)]
pub struct Stores {
    pub applications: Store<CAPApplication>,
    pub versions: Store<CAPApplicationVersion>,
    pub tenants: Store<CAPTenant>,
    pub operations: Store<CAPTenantOperation>,
    pub batches: Store<RotationBatch>,
    pub deployments: Store<DeploymentView>,
    pub vcap_secrets: Store<StoredSecret>,
    pub binding_secrets: Store<StoredSecret>,
    /// The Namespaces in scope (their change-window annotation); empty where they may not be read.
    pub namespaces: Store<Namespace>,
    /// Freezes in scope; empty where they may not be read or their CRD is not installed.
    pub freezes: Store<Freeze>,
    /// Events about CAP objects and batches (the console's Events view); `None` where nobody
    /// shows them (the daemon).
    pub events: Option<Store<Event>>,
    /// sap-btp-service-operator's ServiceBindings (credential safety). Its CRD is optional: see
    /// `service_bindings()`.
    service_bindings: Store<ServiceBinding>,
    service_bindings_available: watch::Receiver<Option<bool>>,
    /// How many stores must list before the stores are ready.
    kinds: usize,
    invalid: InvalidMap,
    watch_errors: WatchErrors,
    changes: watch::Receiver<u64>,
    connection: watch::Receiver<ConnectionState>,
    ready: watch::Receiver<BTreeSet<&'static str>>,
    missing: watch::Receiver<BTreeSet<&'static str>>,
    touched: TouchedLog,
    pub scope: Scope,
}

/// Keeps the watch tasks running; stop them with the cancellation token.
pub struct StoreTasks {
    pub handles: Vec<JoinHandle<()>>,
}

#[derive(Clone)]
struct Shared {
    invalid: InvalidMap,
    watch_errors: WatchErrors,
    changes: watch::Sender<u64>,
    connection: watch::Sender<ConnectionState>,
    /// Kinds whose store finished its first list. (kube's `Store::wait_until_ready` wakes only
    /// one of several concurrent waiters, so readiness is tracked here.)
    ready: watch::Sender<BTreeSet<&'static str>>,
    /// Kinds the API server does not serve (404 on their list: their CRD is not installed).
    /// Not a connection problem, so kept apart from `connection`.
    missing: watch::Sender<BTreeSet<&'static str>>,
    /// CAPApplication changes only: what the binding-Secret watch follows (recomputing the
    /// referenced set on every change of every kind was quadratic at start-up).
    application_changes: watch::Sender<u64>,
    /// The namespaces whose objects changed since the engine last asked.
    touched: TouchedLog,
    /// The kind on the console's screen, listed before any other (`None`: all at once).
    first: Option<&'static str>,
    /// Open once the first kind has listed (or cannot be listed): the other watches start then.
    turn: watch::Sender<bool>,
    cancel: CancellationToken,
}

/// Every store but Events, by the name readiness is tracked under.
/// How long one watch request lasts before it is resumed: each resumption is one request, and
/// kube's default (290 s) made them most of the engine's requests at rest. A quiet watch still
/// gets a bookmark every minute (kube-apiserver's watch cache sends one to every watch that allows
/// them, as kube's watcher asks; the sandbox every 15 s), so the client's 295 s read timeout never
/// trips on it and still finds a dead connection.
pub const WATCH_TIMEOUT_SECONDS: u32 = 1800;

/// A watcher configuration with [`WATCH_TIMEOUT_SECONDS`].
pub fn watch_config() -> watcher::Config {
    watcher::Config::default().timeout(WATCH_TIMEOUT_SECONDS)
}

/// Objects a list page of the engine's stores holds. hyper grows a connection's read buffer to
/// what one read of a large answer brings (to about 400 KB) and keeps it as long as the
/// connection lives, and every store keeps one: pages of 100 objects (client-go's 500 are
/// 0.4–1 MB of Deployments or CAP objects) keep those buffers and each page's decoding smaller,
/// for a few more list requests at start-up (docs/PERFORMANCE.md, "Engine memory"). The console
/// keeps client-go's 500: fewer round trips before a full screen on a server that cannot stream
/// a list.
const ENGINE_LIST_PAGE_SIZE: u32 = 100;
const CONSOLE_LIST_PAGE_SIZE: u32 = 500;

const KINDS: usize = 10;

/// The kinds a console view shows, by the name their store is tracked under: what
/// [`Stores::start_for_console`] may list first.
pub const VIEW_KINDS: [&str; 6] =
    ["CAPApplication", "CAPApplicationVersion", "CAPTenant", "CAPTenantOperation", "RotationBatch", "Event"];

impl Shared {
    fn mark_ready(&self, kind: &'static str) {
        self.ready.send_if_modified(|ready| ready.insert(kind));
        self.first_done(kind);
    }

    /// The first kind listed, is missing, or failed: every other watch may start.
    fn first_done(&self, kind: &'static str) {
        if self.first == Some(kind) {
            self.turn.send_if_modified(|open| !std::mem::replace(open, true));
        }
    }

    /// Wait until `kind` may list: at once, unless another kind goes first and has not listed
    /// yet. False when cancelled meanwhile.
    async fn wait_turn(&self, kind: &'static str) -> bool {
        if self.first.is_none_or(|first| first == kind) {
            return true;
        }
        let mut turn = self.turn.subscribe();
        tokio::select! {
            () = self.cancel.cancelled() => false,
            open = turn.wait_for(|open| *open) => open.is_ok(),
        }
    }

    /// Record that `kind`'s object `key` does not decode (`Some`), or does again (`None`).
    fn record_invalid(&self, kind: &'static str, key: &ObjectKey, error: Option<String>) {
        let mut map = self.invalid.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (kind, key.clone());
        let changed = match error {
            Some(error) => map.insert(key, error.clone()).as_ref() != Some(&error),
            None => map.remove(&key).is_some(),
        };
        drop(map);
        if changed {
            self.changed();
        }
    }

    fn changed(&self) {
        self.changes.send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    fn failed(&self, kind: &'static str, error: &watcher::Error) {
        self.first_done(kind);
        if is_missing_kind(error) {
            self.missing.send_if_modified(|missing| missing.insert(kind));
            return;
        }
        let code = api_status(error).map_or_else(|| "transport".to_string(), |code| code.to_string());
        *self
            .watch_errors
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry((kind, code))
            .or_default() += 1;
        let text = crate::cluster::describe_watch_error(error);
        // A refusal is an answer: the server is reachable, one kind is not ours to read.
        if api_status(error) == Some(403) {
            self.connection.send_if_modified(|state| state.forbidden.insert(kind, text.clone()) != Some(text));
            return;
        }
        self.connection.send_if_modified(|state| {
            if state.error.as_deref() == Some(text.as_str()) {
                return false;
            }
            state.error = Some(text.clone());
            true
        });
    }

    /// A request for `kind` succeeded: it is served, and the API is reachable.
    fn served(&self, kind: &'static str) {
        self.missing.send_if_modified(|missing| missing.remove(kind));
        self.connection.send_if_modified(|state| state.forbidden.remove(kind).is_some());
        self.succeeded();
    }

    fn succeeded(&self) {
        self.connection.send_if_modified(|state| {
            let changed = state.error.is_some() || state.attempts > 0;
            state.error = None;
            state.attempts = 0;
            changed
        });
    }
}

impl Stores {
    /// Start every watch in `scope`. The stores fill in the background; see `wait_ready`.
    pub fn start(client: &kube::Client, scope: Scope, cancel: CancellationToken) -> (Self, StoreTasks) {
        Self::start_with(client, scope, cancel, false, None, ENGINE_LIST_PAGE_SIZE)
    }

    /// The console's stores: `start`, a store of the Events about CAP objects and batches, and
    /// `first` (the kind on screen, one of [`VIEW_KINDS`]) listed before anything else, with a
    /// streaming list where the API server offers one.
    pub fn start_for_console(
        client: &kube::Client,
        scope: Scope,
        cancel: CancellationToken,
        first: Option<&'static str>,
    ) -> (Self, StoreTasks) {
        Self::start_with(client, scope, cancel, true, first, CONSOLE_LIST_PAGE_SIZE)
    }

    fn start_with(
        client: &kube::Client,
        scope: Scope,
        cancel: CancellationToken,
        with_events: bool,
        first: Option<&'static str>,
        page_size: u32,
    ) -> (Self, StoreTasks) {
        let store_config = || watch_config().page_size(page_size);
        // A kind no store lists would never open the turn, and every other store would wait.
        let first = first.filter(|kind| VIEW_KINDS.contains(kind));
        let (changes_tx, changes) = watch::channel(0u64);
        let (connection_tx, connection) = watch::channel(ConnectionState::default());
        let (ready_tx, ready) = watch::channel(BTreeSet::new());
        let (missing_tx, missing) = watch::channel(BTreeSet::new());
        let shared = Shared {
            invalid: Arc::default(),
            watch_errors: Arc::default(),
            changes: changes_tx,
            connection: connection_tx,
            ready: ready_tx,
            missing: missing_tx,
            application_changes: watch::channel(0u64).0,
            touched: TouchedLog::default(),
            first,
            turn: watch::channel(first.is_none()).0,
            cancel,
        };
        let mut tasks = Starter { handles: Vec::new(), shared: &shared };
        let applications = tasks.watch(scope.api(client), store_config(), Watched::cap("CAPApplication"));
        let versions = tasks.watch(scope.api(client), store_config(), Watched::cap("CAPApplicationVersion"));
        let tenants = tasks.watch(scope.api(client), store_config(), Watched::cap("CAPTenant"));
        let operations = tasks.watch(scope.api(client), store_config(), Watched::cap("CAPTenantOperation"));
        let batches = tasks.watch(scope.api(client), store_config(), Watched::cap("RotationBatch"));
        let deployments = tasks.watch(
            scope.api(client),
            store_config(),
            Watched { plan_change: deployment_plan_change, ..Watched::all("Deployment", prune_metadata) },
        );
        let vcap_config = store_config().labels(LABEL_SECRET_OWNER_HASH);
        let vcap_secrets = tasks.watch(scope.api(client), vcap_config, Watched::vcap_secrets());
        let (binding_secrets, task) =
            binding_secrets::start(client.clone(), scope.api(client), applications.clone(), shared.clone());
        tasks.handles.push(task);
        // One Namespace when the scope is one namespace: the engine reads only its annotation.
        let namespace_config = match &scope {
            Scope::All => store_config(),
            Scope::Namespace(namespace) => store_config().fields(&format!("metadata.name={namespace}")),
        };
        let namespaces = tasks.watch(Api::all(client.clone()), namespace_config, Watched::optional("Namespace"));
        let freezes = tasks.watch(scope.api(client), store_config(), Watched::optional("Freeze"));
        // Only Events about CAP objects and batches are kept; a user who may not list Events still
        // gets every other view.
        let events = with_events.then(|| {
            let relevant = Watched { keep: is_relevant_event, ..Watched::optional("Event") };
            tasks.watch::<Event, Event>(scope.api(client), store_config(), relevant)
        });
        let (service_bindings, service_bindings_available, task) =
            service_bindings(client.clone(), scope.api(client), shared.clone());
        let mut handles = tasks.handles;
        handles.push(task);
        handles.push(tokio::spawn(probe(client.clone(), shared.clone())));

        let stores = Self {
            applications,
            versions,
            tenants,
            operations,
            batches,
            deployments,
            vcap_secrets,
            binding_secrets,
            namespaces,
            freezes,
            events,
            service_bindings,
            service_bindings_available,
            kinds: KINDS + usize::from(with_events),
            invalid: shared.invalid,
            watch_errors: shared.watch_errors,
            changes,
            connection,
            ready,
            missing,
            touched: shared.touched,
            scope,
        };
        (stores, StoreTasks { handles })
    }

    /// Failed lists and watches since the start, by kind and HTTP status (`transport` when no
    /// answer came); a missing optional kind is not an error.
    pub fn watch_errors(&self) -> Vec<(&'static str, String, u64)> {
        let errors = self.watch_errors.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        errors.iter().map(|((kind, code), count)| (*kind, code.clone(), *count)).collect()
    }

    /// Resolves once every store has listed its objects.
    pub async fn wait_ready(&self) {
        let mut ready = self.ready.clone();
        let _ = ready.wait_for(|kinds| kinds.len() >= self.kinds).await;
    }

    /// Kinds the API server does not serve (their CRD is not installed), e.g. `RotationBatch`.
    pub fn missing_kinds(&self) -> Vec<&'static str> {
        self.missing.borrow().iter().copied().collect()
    }

    /// A receiver of the missing kinds, to say so when it changes.
    pub fn missing(&self) -> watch::Receiver<BTreeSet<&'static str>> {
        self.missing.clone()
    }

    /// Whether every store has listed its objects.
    pub fn is_ready(&self) -> bool {
        self.ready.borrow().len() >= self.kinds
    }

    /// The namespaces whose objects changed since the last call (a re-list: everything). Only
    /// the engine asks: it re-checks the applications there (`Detection`).
    pub fn take_touched(&self) -> Touched {
        self.touched.take()
    }

    /// A receiver whose value moves on every change to any store.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    pub fn connection(&self) -> watch::Receiver<ConnectionState> {
        self.connection.clone()
    }

    /// Objects that did not decode, by kind, namespace and name.
    pub fn invalid(&self) -> Vec<InvalidObject> {
        self.invalid
            .lock()
            .map(|map| {
                map.iter()
                    .map(|((kind, key), error)| InvalidObject {
                        kind,
                        namespace: key.namespace.clone(),
                        name: key.name.clone(),
                        error: error.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every ServiceBinding, once they could be listed; `None` while the CRD is absent, RBAC
    /// forbids reading them, or the first list has not answered yet (no information).
    pub fn service_bindings(&self) -> Option<Vec<ServiceBinding>> {
        (*self.service_bindings_available.borrow() == Some(true))
            .then(|| self.service_bindings.state().iter().map(|binding| (**binding).clone()).collect())
    }

    /// A Secret capdeck watches (binding or VCAP), by namespace and name.
    pub fn secret(&self, namespace: &str, name: &str) -> Option<Arc<StoredSecret>> {
        let namespace = Some(namespace);
        self.binding_secrets.find(namespace, name).or_else(|| self.vcap_secrets.find(namespace, name))
    }

    /// The VCAP Secret `deployment` reads (one labelled with the owner hash, which every container
    /// agrees on), if any.
    pub fn vcap_secret_of(&self, deployment: &DeploymentView) -> Option<String> {
        let namespace = deployment.metadata.namespace.clone().unwrap_or_default();
        let is_vcap = |name: &str| self.vcap_secrets.find(Some(&namespace), name).is_some();
        crate::api::container::referenced_vcap_secret(deployment, is_vcap).ok().flatten()
    }

    /// Whether any Deployment in `namespace` reads the VCAP Secret `name`.
    pub fn vcap_secret_read(&self, namespace: &str, name: &str) -> bool {
        self.deployments.state().iter().any(|deployment| {
            deployment.metadata.namespace.as_deref() == Some(namespace)
                && self.vcap_secret_of(deployment).as_deref() == Some(name)
        })
    }

    pub fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<DeploymentView>> {
        self.deployments.find(Some(namespace), name)
    }
}

fn strip_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Drop what nobody reads from the metadata of the objects kept: managedFields and kubectl's
/// copy of the last applied object (often larger than the rest). A `DeploymentView` holds
/// nothing else of a Deployment's pod template already.
fn prune_metadata<K: Resource>(object: &mut K) {
    strip_managed_fields(object);
    if let Some(annotations) = object.meta_mut().annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// A VCAP Secret as the store keeps it ([`StoredSecret`]: of its managedFields only when it was
/// last written, for a VCAP Secret edited in place is not what its Pods read when they started,
/// `credentials`), its values as their digests (`api::stored_digest`): the planner only asks
/// whether `VCAP_SERVICES` is the payload it would write, and the payloads were the largest part
/// of the engine's memory (docs/PERFORMANCE.md, "Engine memory"). A Pod log's masking reads them
/// live.
fn vcap_secret(secret: Secret) -> StoredSecret {
    StoredSecret::with_values(secret, |value| crate::api::stored_digest::stored_digest(&value).into_boxed_slice())
}

/// How a watch treats what it sees: a pruning step before the store, which objects it keeps,
/// whether the kind is optional (a 403 leaves its store empty and ready, instead of marking the
/// API unreachable), and whether it may stream its first list (the kind on the console's screen).
/// The store holds `S`, what `store_as` keeps of each `K` (most kinds: the object itself).
struct Watched<K, S = K> {
    kind: &'static str,
    prune: fn(&mut K),
    keep: fn(&K) -> bool,
    store_as: fn(K) -> S,
    optional: bool,
    /// Whether a change from the stored object to the new one may change an application's plan
    /// (`Stores::take_touched`): most kinds, any change.
    plan_change: fn(&S, &S) -> bool,
}

fn any_change<S>(_: &S, _: &S) -> bool {
    true
}

/// What the engine's plan reads of a Deployment changed: its spec (the generation), its owner, or
/// the batch annotation. Its status and other metadata do not: a Deployment whose replicas move,
/// or that someone annotates again and again, re-plans nothing.
fn deployment_plan_change(old: &DeploymentView, new: &DeploymentView) -> bool {
    let rolled_by = |d: &DeploymentView| d.annotations().get(crate::api::ANNOTATION_ROLLED_BY).cloned();
    old.metadata.generation != new.metadata.generation
        || old.metadata.owner_references != new.metadata.owner_references
        || old.metadata.uid != new.metadata.uid
        || rolled_by(old) != rolled_by(new)
}

impl<K: Resource> Watched<K> {
    /// Every object, pruned; a required kind.
    fn all(kind: &'static str, prune: fn(&mut K)) -> Self {
        Self { kind, prune, keep: |_| true, store_as: std::convert::identity, optional: false, plan_change: any_change }
    }

    /// A CAP kind or a batch: every object, without its managedFields.
    fn cap(kind: &'static str) -> Self {
        Self::all(kind, strip_managed_fields)
    }

    /// A kind the user may not be allowed to read, or that may not be installed.
    fn optional(kind: &'static str) -> Self {
        Self { optional: true, ..Self::all(kind, prune_metadata) }
    }
}

impl Watched<Secret, StoredSecret> {
    /// The VCAP Secrets, as [`vcap_secret`] keeps them.
    fn vcap_secrets() -> Self {
        Self {
            kind: "VcapSecret",
            prune: |_| {},
            keep: |_| true,
            store_as: vcap_secret,
            optional: false,
            plan_change: any_change,
        }
    }
}

/// Starts the watch tasks of the stores, keeping their handles.
struct Starter<'a> {
    handles: Vec<JoinHandle<()>>,
    shared: &'a Shared,
}

impl Starter<'_> {
    fn watch<K, S>(&mut self, api: Api<Lenient<K>>, config: watcher::Config, what: Watched<K, S>) -> Store<S>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
        S: crate::api::Named + Send + Sync + 'static,
    {
        let (store, task) = watched(api, config, what, self.shared.clone());
        self.handles.push(task);
        store
    }
}

/// A watch reflected into a store of the objects that decode, each decoded on its own
/// ([`Lenient`]): one that does not is skipped and recorded (`Stores::invalid`), and never stops
/// the watch or the other objects. The kind on the console's screen streams its first list (one
/// request, served from the watch cache) where the API server offers it, and pages otherwise.
fn watched<K, S>(
    api: Api<Lenient<K>>,
    config: watcher::Config,
    watched: Watched<K, S>,
    shared: Shared,
) -> (Store<S>, JoinHandle<()>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    S: crate::api::Named + Send + Sync + 'static,
{
    let (store, writer) = store::store::<S>();
    let Watched { kind, prune, keep, store_as, optional, plan_change } = watched;
    let task = tokio::spawn(async move {
        if !shared.wait_turn(kind).await {
            return;
        }
        let mut streaming = shared.first == Some(kind);
        let start = |streaming: bool| {
            let config = if streaming { config.clone().streaming_lists() } else { config.clone() };
            watcher(api.clone(), config).default_backoff().boxed()
        };
        let mut stream = start(streaming);
        let mut reflected = Reflected {
            kind,
            prune,
            keep,
            store_as,
            writer,
            invalid: shared.invalid.clone(),
            touched: shared.touched.clone(),
            plan_change,
            pending: None,
        };
        let mut denied = false;
        loop {
            let next = tokio::select! {
                () = shared.cancel.cancelled() => return,
                next = stream.next() => next,
            };
            match next {
                Some(Ok(event)) => {
                    // `Init` comes before the list request is even sent: no proof of a connection.
                    if !matches!(event, watcher::Event::Init) {
                        shared.served(kind);
                    }
                    let init_done = matches!(event, watcher::Event::InitDone);
                    if reflected.apply(event) {
                        shared.changed();
                        if kind == "CAPApplication" {
                            shared
                                .application_changes
                                .send_modify(|generation| *generation = generation.wrapping_add(1));
                        }
                    }
                    if init_done {
                        shared.mark_ready(kind);
                    }
                }
                Some(Err(error)) if streaming && refuses_streaming(&error) => {
                    tracing::info!(error = %crate::cluster::describe_watch_error(&error), kind, "the API server refuses streaming lists; listing in pages");
                    streaming = false;
                    stream = start(false);
                }
                // An optional kind the user may not list, or whose CRD is not installed: every
                // other store still works (the watch keeps retrying with its backoff).
                Some(Err(error)) if optional && matches!(api_status(&error), Some(403 | 404)) => {
                    if !denied {
                        tracing::info!(error = %crate::cluster::describe_watch_error(&error), kind, "not readable with these credentials, or not installed; its view stays empty");
                        denied = true;
                    }
                    shared.mark_ready(kind);
                }
                Some(Err(error)) => shared.failed(kind, &error),
                None => return,
            }
        }
    });
    (store, task)
}

/// A store's writer, fed with objects decoded one by one: those that decode (pruned, and if
/// kept) go to the store, the others to the invalid map, under the kind's name.
struct Reflected<K: Resource<DynamicType = ()> + Clone + 'static, S = K> {
    kind: &'static str,
    prune: fn(&mut K),
    keep: fn(&K) -> bool,
    store_as: fn(K) -> S,
    writer: Writer<S>,
    invalid: InvalidMap,
    touched: TouchedLog,
    plan_change: fn(&S, &S) -> bool,
    /// During a (re-)list: the objects that did not decode, recorded at its end.
    pending: Option<BTreeMap<ObjectKey, String>>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static, S: crate::api::Named> Reflected<K, S> {
    /// Apply one event; true when the store or the invalid map may have changed.
    fn apply(&mut self, event: watcher::Event<Lenient<K>>) -> bool {
        match event {
            watcher::Event::Init => {
                self.pending = Some(BTreeMap::new());
                self.writer.begin_list();
                false
            }
            watcher::Event::InitApply(Lenient(decoded)) => {
                match decoded {
                    Ok(object) => {
                        if let Some(object) = self.kept(object) {
                            self.writer.listed(Arc::new(object));
                        }
                    }
                    Err(undecodable) => {
                        let key = ObjectKey::new(undecodable.namespace(), undecodable.name());
                        self.pending.get_or_insert_with(BTreeMap::new).insert(key, undecodable.describe());
                    }
                }
                false
            }
            watcher::Event::InitDone => {
                self.writer.end_list();
                self.touch_everything();
                let found = self.pending.take().unwrap_or_default();
                let mut map = self.invalid.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                map.retain(|(kind, _), _| *kind != self.kind);
                for (key, error) in found {
                    map.insert((self.kind, key), error);
                }
                true
            }
            watcher::Event::Apply(Lenient(decoded)) => {
                match decoded {
                    Ok(object) => {
                        let key = ObjectKey::of(object.meta());
                        self.record(key.clone(), None);
                        match self.kept(object) {
                            Some(object) => {
                                let stored = self.writer.find(Some(&key.namespace), &key.name);
                                if stored.is_none_or(|stored| (self.plan_change)(&stored, &object)) {
                                    self.touch(&key);
                                }
                                self.writer.apply(object);
                            }
                            None => {
                                self.touch(&key);
                                return false;
                            }
                        }
                    }
                    Err(undecodable) => {
                        let key = ObjectKey::new(undecodable.namespace(), undecodable.name());
                        self.touch(&key);
                        // What the store held of it is no longer what the server holds.
                        self.forget(&key);
                        self.record(key, Some(undecodable.describe()));
                    }
                }
                true
            }
            watcher::Event::Delete(Lenient(decoded)) => {
                let key = match &decoded {
                    Ok(object) => ObjectKey::of(object.meta()),
                    Err(undecodable) => ObjectKey::new(undecodable.namespace(), undecodable.name()),
                };
                self.touch(&key);
                self.forget(&key);
                self.record(key, None);
                true
            }
        }
    }

    /// The object pruned, if the store keeps it (never one without a name: the store finds
    /// objects by theirs).
    fn kept(&self, mut object: K) -> Option<S> {
        (self.prune)(&mut object);
        (object.meta().name.is_some() && (self.keep)(&object)).then(|| (self.store_as)(object))
    }

    /// Note the object's namespace as changed (a Namespace's own name). Events, Freezes and
    /// ServiceBindings change no plan: what they change the pass's decisions read anyway.
    fn touch(&self, key: &ObjectKey) {
        match self.kind {
            "Event" | "Freeze" | "ServiceBinding" => {}
            "Namespace" => self.touched.namespace(&key.name),
            _ => self.touched.namespace(&key.namespace),
        }
    }

    fn touch_everything(&self) {
        if !matches!(self.kind, "Event" | "Freeze" | "ServiceBinding") {
            self.touched.everything();
        }
    }

    fn record(&self, key: ObjectKey, error: Option<String>) {
        let mut map = self.invalid.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match error {
            Some(error) => map.insert((self.kind, key), error),
            None => map.remove(&(self.kind, key)),
        };
    }

    fn forget(&mut self, key: &ObjectKey) {
        // A cluster-scoped kind's key has an empty namespace, which the store reads as none.
        self.writer.remove(Some(&key.namespace), &key.name);
    }
}

/// sap-btp-service-operator's CRD, watched by name: whether ServiceBindings can be watched at all.
const SERVICE_BINDING_CRD: &str = "servicebindings.services.cloud.sap.com";

type BindingEvents =
    futures::stream::BoxStream<'static, Result<watcher::Event<Lenient<ServiceBinding>>, watcher::Error>>;

fn service_bindings(
    client: kube::Client,
    api: Api<Lenient<ServiceBinding>>,
    shared: Shared,
) -> (Store<ServiceBinding>, watch::Receiver<Option<bool>>, JoinHandle<()>) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    let (store, writer) = store::store::<ServiceBinding>();
    let (available, available_rx) = watch::channel(None);
    let task = tokio::spawn(async move {
        if !shared.wait_turn("ServiceBinding").await {
            return;
        }
        let crds: Api<Lenient<CustomResourceDefinition>> = Api::all(client);
        let by_name = watch_config().fields(&format!("metadata.name={SERVICE_BINDING_CRD}"));
        let mut crd_events = watcher(crds, by_name).default_backoff().boxed();
        let reflected = Reflected {
            kind: "ServiceBinding",
            prune: strip_managed_fields,
            keep: |_| true,
            store_as: std::convert::identity,
            writer,
            invalid: shared.invalid.clone(),
            touched: shared.touched.clone(),
            plan_change: any_change,
            pending: None,
        };
        let mut watch =
            BindingsWatch { api, shared, available, reflected, bindings: None, direct: false, crd_seen: false };
        loop {
            let next_binding = async {
                match watch.bindings.as_mut() {
                    Some(stream) => stream.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = watch.shared.cancel.cancelled() => return,
                event = crd_events.next(), if !watch.direct => match event {
                    Some(event) => watch.on_crd(event),
                    None => return,
                },
                event = next_binding => match event {
                    Some(event) => watch.on_binding(event),
                    None => watch.bindings = None,
                },
            }
        }
    });
    (store, available_rx, task)
}

/// The ServiceBinding watch, started once its CRD is seen and stopped when it goes.
struct BindingsWatch {
    api: Api<Lenient<ServiceBinding>>,
    shared: Shared,
    /// Whether ServiceBindings can be read (`None` until known).
    available: watch::Sender<Option<bool>>,
    reflected: Reflected<ServiceBinding>,
    bindings: Option<BindingEvents>,
    /// No CRD watch (403): one attempt at the ServiceBindings themselves, no retries.
    direct: bool,
    crd_seen: bool,
}

type CrdEvent = Result<
    watcher::Event<
        Lenient<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
    >,
    watcher::Error,
>;

impl BindingsWatch {
    fn start(&mut self) {
        if self.bindings.is_none() {
            self.bindings = Some(watcher(self.api.clone(), watch_config()).default_backoff().boxed());
        }
    }

    /// No ServiceBinding information, and why: what the store held would mislead.
    fn unavailable(&mut self, why: &str) {
        self.bindings = None;
        self.reflected.apply(watcher::Event::Init);
        self.reflected.apply(watcher::Event::InitDone);
        if self.available.send_if_modified(|state| state.replace(false) != Some(false)) {
            tracing::info!("no ServiceBinding information: {why}");
            self.shared.changed();
        }
    }

    fn on_crd(&mut self, event: CrdEvent) {
        match event {
            Ok(watcher::Event::Init) => self.crd_seen = false,
            Ok(watcher::Event::InitApply(_) | watcher::Event::Apply(_)) => {
                self.crd_seen = true;
                self.start();
            }
            Ok(watcher::Event::InitDone) => {
                if !self.crd_seen {
                    self.unavailable(&format!("the CRD {SERVICE_BINDING_CRD} is not installed"));
                }
            }
            Ok(watcher::Event::Delete(_)) => {
                self.crd_seen = false;
                self.unavailable(&format!("the CRD {SERVICE_BINDING_CRD} was deleted"));
            }
            Err(error) if api_status(&error) == Some(403) => {
                let error = crate::cluster::describe_watch_error(&error);
                tracing::info!(%error, "cannot watch the CRD {SERVICE_BINDING_CRD}; trying ServiceBindings once");
                self.direct = true;
                self.start();
            }
            Err(error) => self.shared.failed("CustomResourceDefinition", &error),
        }
    }

    fn on_binding(&mut self, event: Result<watcher::Event<Lenient<ServiceBinding>>, watcher::Error>) {
        match event {
            Ok(event) => {
                let done = matches!(event, watcher::Event::InitDone);
                self.reflected.apply(event);
                if done {
                    self.available.send_if_modified(|state| state.replace(true) != Some(true));
                }
                self.shared.changed();
            }
            Err(error) => match api_status(&error) {
                Some(403) => self.unavailable(
                    "not readable with these credentials (list, watch servicebindings.services.cloud.sap.com)",
                ),
                // The CRD exists but is not served yet (just created): the backoff retries.
                Some(404) if !self.direct => {}
                Some(404) => self.unavailable(&format!("the CRD {SERVICE_BINDING_CRD} is not installed")),
                _ => self.shared.failed("ServiceBinding", &error),
            },
        }
    }
}

/// Whether an Event is about a CAP object or a batch. Filtered here rather than with a field
/// selector, which not every API server supports on `events.k8s.io/v1`.
pub fn is_relevant_event(event: &Event) -> bool {
    event.regarding.as_ref().and_then(|r| r.api_version.as_deref()).is_some_and(|version| {
        version.starts_with("sme.sap.com/") || version.starts_with(crate::api::rotation_batch::GROUP)
    })
}

/// Binding Secrets referenced by any CAPApplication in scope: (namespace, secret name).
pub fn referenced_secrets(applications: &Store<CAPApplication>) -> BTreeSet<ObjectKey> {
    applications
        .state()
        .iter()
        .flat_map(|app| {
            let namespace = app.namespace().unwrap_or_default();
            app.spec.btp.services.iter().map(move |service| ObjectKey::new(namespace.clone(), service.secret.clone()))
        })
        .collect()
}

/// While a watch reports errors, ask `/version` every two seconds; the first answer marks the
/// API reachable again (watches reconnect by themselves and may stay silent until a change).
async fn probe(client: kube::Client, shared: Shared) {
    let mut connection = shared.connection.subscribe();
    loop {
        let failing = connection.borrow_and_update().error.is_some();
        if failing {
            tokio::select! {
                () = shared.cancel.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(2)) => {}
            }
            if client.apiserver_version().await.is_ok() {
                shared.succeeded();
            } else {
                shared.connection.send_modify(|state| state.attempts += 1);
            }
        } else {
            tokio::select! {
                () = shared.cancel.cancelled() => return,
                changed = connection.changed() => if changed.is_err() { return },
            }
        }
    }
}

/// A streaming list (`sendInitialEvents`) refused as a bad or invalid request: an API server
/// without the WatchList feature (before 1.32, or with it turned off) says 400 or 422.
fn refuses_streaming(error: &watcher::Error) -> bool {
    matches!(api_status(error), Some(400 | 422))
}

/// A 404 on a list or watch: the API server does not serve the kind (its CRD is missing).
fn is_missing_kind(error: &watcher::Error) -> bool {
    api_status(error) == Some(404)
}

/// The HTTP status of an error the API server answered with.
fn api_status(error: &watcher::Error) -> Option<u16> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status.code),
        watcher::Error::WatchError(status) => Some(status.code),
        _ => None,
    }
}
/// The engine's planner reads the cluster through the stores.
impl crate::lookup::ObjectLookup for Stores {
    fn secret(&self, namespace: &str, name: &str) -> crate::lookup::SecretLookup {
        match Stores::secret(self, namespace, name) {
            Some(secret) => crate::lookup::SecretLookup::Found(secret),
            None => crate::lookup::SecretLookup::Missing,
        }
    }

    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<crate::api::DeploymentView>> {
        Stores::deployment(self, namespace, name)
    }

    fn undecodable_deployment(&self, namespace: &str, name: &str) -> Option<String> {
        let invalid = self.invalid.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        invalid.get(&("Deployment", ObjectKey::new(namespace, name))).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VCAP Secret in the store keeps when it was last written (whether it was edited after
    /// its creation) and nothing else of its managedFields.
    #[test]
    fn a_vcap_secret_keeps_only_its_last_write() {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "srv-vcap", "namespace": "shop", "creationTimestamp": "2026-11-20T08:00:00Z",
                         "managedFields": [
                             {"manager": "cap-operator", "operation": "Update", "time": "2026-11-20T08:00:00Z",
                              "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:VCAP_SERVICES": {}}}},
                             {"manager": "kubectl-edit", "operation": "Update", "time": "2026-11-21T09:30:00Z",
                              "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:VCAP_SERVICES": {}}}}]},
            "data": {"VCAP_SERVICES": "e30="}}))
        .expect("secret");
        let kept = vcap_secret(secret);
        assert_eq!(kept.last_written().map(|time| time.to_string()).as_deref(), Some("2026-11-21T09:30:00Z"));
        assert_eq!(kept.created().map(|time| time.to_string()).as_deref(), Some("2026-11-20T08:00:00Z"));
    }

    /// The store keeps a VCAP Secret's values as digests: the planner still tells a current
    /// payload from another, a value shaped like a digest is hashed again, and no credential stays.
    #[test]
    fn a_vcap_secret_keeps_digests_of_its_values() {
        use crate::vcap::gojson::{GoMap, GoValue};
        let mut entry = GoMap::new();
        entry.insert("password".into(), GoValue::from("s3cret-value"));
        let payload = crate::vcap::VcapPayload::assemble([("xsuaa", entry)]);
        let planted = crate::api::stored_digest::stored_digest(payload.as_bytes());
        let secret = Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("srv-vcap".into()),
                ..Default::default()
            },
            data: Some(
                [
                    ("VCAP_SERVICES".to_string(), k8s_openapi::ByteString(payload.as_bytes().to_vec())),
                    ("OTHER".to_string(), k8s_openapi::ByteString(planted.clone())),
                ]
                .into(),
            ),
            string_data: Some([("EXTRA".to_string(), "s3cret-value".to_string())].into()),
            ..Default::default()
        };
        let kept = vcap_secret(secret);
        let value = |key: &str| kept.value(key).expect("the key is kept");
        assert!(payload.matches_stored(value("VCAP_SERVICES")));
        assert!(!payload.matches_stored(value("OTHER")), "a planted digest is hashed again");
        assert!(kept.value("EXTRA").is_some(), "stringData is kept with data");
        for (_, value) in kept.entries() {
            assert!(crate::api::stored_digest::is_stored_digest(value));
            assert!(!String::from_utf8_lossy(value).contains("s3cret"));
        }
    }
}
