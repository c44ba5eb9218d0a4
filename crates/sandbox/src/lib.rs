//! The sandbox cluster: an in-memory Kubernetes API server (an axum `Router`) that kube-rs and
//! real kubectl can use. It backs every cluster-facing test, `capdeck --demo` and
//! `capdeck sandbox`. Deliberate gaps from a real API server are listed in `docs/SANDBOX.md`,
//! each pinned by a test named after it.
//!
//! `Sandbox` is also the test handle: fault injection, dropped watches, compaction, latency,
//! the request log, snapshot and restore.

// No function is longer than 80 lines (clippy.toml) but table-like code, which says why; the
// unit tests may be.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

// The core's modules keep their `crate::` paths inside the sandbox.
use capdeck_core::{api, manifest, output, plan};

pub mod control;
mod http;
pub mod ownership;
pub mod patch;
mod proto;
pub mod registry;
pub mod schema;
pub mod selectors;
pub mod simulate;
pub mod store;
pub mod views;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use control::Control;
pub use control::{DenyRule, FaultRule, RequestInfo, RequestMatcher, RequestRecord};
use registry::ResourceType;
use store::{Store, now_rfc3339};

/// How a sandbox starts.
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// Who SelfSubjectReview says you are.
    pub user: String,
    pub groups: Vec<String>,
    /// Writes (and access reviews) these rules deny answer 403.
    pub deny: Vec<DenyRule>,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// Changes kept for watches that resume from a resourceVersion.
    pub history_limit: usize,
    /// How far a watch may fall behind before it is ended with 410 (it must re-list).
    pub watch_buffer: usize,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            user: "sandbox-admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            deny: Vec::new(),
            bookmark_interval: Duration::from_secs(15),
            history_limit: 20_000,
            watch_buffer: 65_536,
        }
    }
}

struct Inner {
    store: Mutex<Store>,
    /// A simulated network outage (`set_reachable(false)`).
    unreachable: std::sync::atomic::AtomicBool,
    control: Mutex<Control>,
    requests: Mutex<Vec<RequestRecord>>,
    drop_watches: tokio::sync::watch::Sender<u64>,
    bookmark_interval: Duration,
}

/// An in-memory API server and the handle tests control it with. Cheap to clone.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new(SandboxConfig::default())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves consistent data here (every write commits at the
    // end), so a poisoned lock is still usable.
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A sandbox serving HTTP on a local port.
pub struct ServedSandbox {
    pub url: String,
    pub address: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl ServedSandbox {
    /// Stop serving (open watches end) and wait until the server is down.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.task.await;
    }
}

impl Sandbox {
    /// A sandbox with the namespaces a real cluster starts with: default, kube-system, kube-public.
    pub fn new(config: SandboxConfig) -> Self {
        let (drop_watches, _) = tokio::sync::watch::channel(0);
        let sandbox = Self {
            inner: Arc::new(Inner {
                store: Mutex::new(Store::new(config.history_limit, config.watch_buffer)),
                unreachable: std::sync::atomic::AtomicBool::new(false),
                control: Mutex::new(Control {
                    user: config.user,
                    groups: config.groups,
                    deny: config.deny,
                    faults: Vec::new(),
                    latency: Duration::ZERO,
                    refuse_streaming_lists: false,
                }),
                requests: Mutex::new(Vec::new()),
                drop_watches,
                bookmark_interval: config.bookmark_interval.max(Duration::from_millis(10)),
            }),
        };
        for name in ["default", "kube-system", "kube-public"] {
            let _ = sandbox.with_store_mut(|store| {
                store.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
            });
        }
        sandbox
    }

    pub(crate) fn with_store<R>(&self, f: impl FnOnce(&Store) -> R) -> R {
        f(&lock(&self.inner.store))
    }

    pub(crate) fn with_store_mut<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        f(&mut lock(&self.inner.store))
    }

    fn control<R>(&self, f: impl FnOnce(&mut Control) -> R) -> R {
        f(&mut lock(&self.inner.control))
    }

    fn record(&self, record: RequestRecord) {
        let mut requests = lock(&self.inner.requests);
        if requests.len() >= 200_000 {
            requests.drain(..100_000);
        }
        requests.push(record);
    }

    fn drop_watch_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.drop_watches.subscribe()
    }

    fn bookmark_interval(&self) -> Duration {
        self.inner.bookmark_interval
    }

    /// The axum Router: serve it, or hand it to `kube::Client::new` (see `client`).
    pub fn router(&self) -> axum::Router {
        http::router(self.clone())
    }

    /// A kube client talking to this sandbox in-process, without a socket. While the sandbox is
    /// unreachable (`set_reachable(false)`) its requests fail like a refused connection.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(http::Connection::new(self.clone()), "default")
    }

    /// Simulate a network outage (`false`) and its end (`true`). Open watches end at once; new
    /// requests from `client()` fail with "connection refused" and never reach the server, and
    /// HTTP clients get 503 ServiceUnavailable (to cut the socket itself, stop the `ServedSandbox`).
    pub fn set_reachable(&self, reachable: bool) {
        self.inner.unreachable.store(!reachable, std::sync::atomic::Ordering::SeqCst);
        if !reachable {
            self.drop_watches();
        }
    }

    fn is_reachable(&self) -> bool {
        !self.inner.unreachable.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Serve over HTTP on `address` (port 0 picks a free one).
    pub async fn serve(&self, address: SocketAddr) -> std::io::Result<ServedSandbox> {
        let listener = tokio::net::TcpListener::bind(address).await?;
        let address = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        // Open watch streams would keep graceful shutdown waiting: they end with the token.
        let router = self.router().layer(axum::Extension(http::ServerStopping(shutdown.clone())));
        let signal = shutdown.clone().cancelled_owned();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).with_graceful_shutdown(signal).await;
        });
        Ok(ServedSandbox { url: format!("http://{address}"), address, shutdown, task })
    }

    /// Register capdeck's CRDs (every CAP kind and RotationBatch).
    pub fn install_crds(&self) {
        for crd in crate::api::crds::all() {
            if let Ok(value) = serde_json::to_value(&crd) {
                let _ = self.with_store_mut(|store| store.seed(value));
            }
        }
    }

    /// Insert objects as given, status included (seeds and fixtures; bypasses the API path).
    pub fn load(&self, objects: impl IntoIterator<Item = Value>) -> Result<usize, LoadError> {
        let mut count = 0;
        for object in objects {
            self.with_store_mut(|store| store.seed(object)).map_err(LoadError::Rejected)?;
            count += 1;
        }
        Ok(count)
    }

    /// Load multi-document YAML (or JSON) manifests.
    pub fn load_yaml(&self, text: &str) -> Result<usize, LoadError> {
        let documents = crate::manifest::parse_documents(text, false).map_err(LoadError::Parse)?;
        self.load(documents.into_iter().filter(|d| !d.is_null()))
    }

    /// The demo seed (`assets/demo/`): CRDs, four CAP applications in two namespaces.
    pub fn load_demo(&self) -> Result<usize, LoadError> {
        self.install_crds();
        let mut count = 0;
        for text in DEMO_SEED {
            count += self.load_yaml(text)?;
        }
        Ok(count)
    }

    /// Answer a SelfSubjectReview or SelfSubjectAccessReview.
    fn review(&self, resource: &ResourceType, mut review: Value) -> Value {
        let (user, groups) = self.control(|control| (control.user.clone(), control.groups.clone()));
        review["apiVersion"] = json!(resource.api_version());
        review["kind"] = json!(resource.kind);
        review["metadata"] = json!({"creationTimestamp": now_rfc3339()});
        if resource.plural == "selfsubjectreviews" {
            review["status"] = json!({"userInfo": {"username": user, "groups": groups}});
            return review;
        }
        let attributes = review.pointer("/spec/resourceAttributes").cloned().unwrap_or(Value::Null);
        let text = |field: &str| attributes.get(field).and_then(Value::as_str).map(str::to_string);
        let info = RequestInfo {
            verb: text("verb").unwrap_or_default(),
            group: text("group").unwrap_or_default(),
            resource: text("resource").unwrap_or_default(),
            subresource: text("subresource").filter(|s| !s.is_empty()),
            namespace: text("namespace").filter(|s| !s.is_empty()),
            name: text("name").filter(|s| !s.is_empty()),
        };
        let allowed = !self.control(|control| control.denies(&info));
        review["status"] = if allowed {
            json!({"allowed": true, "reason": "sandbox: allowed"})
        } else {
            json!({"allowed": false, "denied": true, "reason": format!("sandbox: {} {} is denied by --deny", info.verb, info.resource)})
        };
        review
    }

    // ----- test handle ------------------------------------------------------------------------

    /// Answer the next `count` requests matching `matcher` with `status` (409, 429, 500, ...).
    pub fn fail_next(&self, count: usize, matcher: RequestMatcher, status: u16) {
        self.control(|control| control.faults.push(FaultRule { matcher, status, remaining: count, applied: false }));
    }

    /// Carry out the next `count` requests matching `matcher`, then answer each with `status`
    /// instead of its result: the client cannot tell the write was made (a kube-apiserver that
    /// answers 504 when its wait for etcd times out, though etcd commits the write).
    pub fn fail_next_after_applying(&self, count: usize, matcher: RequestMatcher, status: u16) {
        self.control(|control| control.faults.push(FaultRule { matcher, status, remaining: count, applied: true }));
    }

    /// Forget all pending injected faults.
    pub fn clear_faults(&self) {
        self.control(|control| control.faults.clear());
    }

    /// Delay every request by `latency`.
    pub fn set_latency(&self, latency: Duration) {
        self.control(|control| control.latency = latency);
    }

    /// Refuse streaming lists as kube-apiserver does with `--feature-gates=WatchList=false`.
    pub fn refuse_streaming_lists(&self, refuse: bool) {
        self.control(|control| control.refuse_streaming_lists = refuse);
    }

    /// End every open watch stream (clients reconnect from their last resourceVersion).
    pub fn drop_watches(&self) {
        self.inner.drop_watches.send_modify(|generation| *generation += 1);
    }

    /// Forget the change history: watches resuming from an older resourceVersion get an in-stream
    /// 410 and must re-list.
    pub fn compact(&self) {
        self.with_store_mut(Store::compact);
    }

    pub fn set_user(&self, user: &str) {
        self.control(|control| control.user = user.to_string());
    }

    pub fn deny(&self, rule: DenyRule) {
        self.control(|control| control.deny.push(rule));
    }

    pub fn allow_all(&self) {
        self.control(|control| control.deny.clear());
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.inner.requests).clone()
    }

    pub fn clear_requests(&self) {
        lock(&self.inner.requests).clear();
    }

    /// Successful API writes so far (creates, updates, patches, deletes).
    pub fn writes(&self) -> Vec<RequestRecord> {
        self.requests().into_iter().filter(RequestRecord::is_successful_write).collect()
    }

    /// One object as stored, by apiVersion-independent (group, plural).
    pub fn get(&self, group: &str, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        self.with_store(|store| {
            let resource = store.registry.by_group_plural(group, plural)?.clone();
            store.get(&resource, namespace, name).ok().map(|object| (*object).clone())
        })
    }

    /// Every object of (group, plural), in every namespace.
    pub fn list(&self, group: &str, plural: &str) -> Vec<Value> {
        self.with_store(|store| {
            let Some(resource) = store.registry.by_group_plural(group, plural).cloned() else { return Vec::new() };
            let (items, _) = store.list(&resource, None, &selectors::Selectors::default(), None, None);
            items.into_iter().map(|object| (*object).clone()).collect()
        })
    }

    /// The current global resourceVersion.
    pub fn revision(&self) -> u64 {
        self.with_store(Store::revision)
    }

    /// Every object, as JSON.
    pub fn snapshot(&self) -> Value {
        Value::Array(self.with_store(Store::snapshot))
    }

    /// Replace everything with a snapshot. Open watches end and history is compacted, so clients
    /// re-list.
    pub fn restore(&self, snapshot: &Value) -> Result<(), LoadError> {
        let objects = snapshot.as_array().ok_or(LoadError::NotASnapshot)?;
        self.with_store_mut(|store| store.restore(objects)).map_err(LoadError::Rejected)?;
        self.drop_watches();
        Ok(())
    }
}

/// Why objects could not be loaded into the sandbox.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The text is not YAML or JSON manifests.
    #[error("the manifests do not parse: {0}")]
    Parse(String),
    /// The store refused an object (no kind or name, a type it does not serve, ...).
    #[error("{0}")]
    Rejected(String),
    #[error("a snapshot is a JSON array of objects")]
    NotASnapshot,
}

/// The demo seed, embedded at build time.
pub const DEMO_SEED: &[&str] = &[
    include_str!("../../../assets/demo/00-cluster.yaml"),
    include_str!("../../../assets/demo/servicebinding-crd.yaml"),
    include_str!("../../../assets/demo/bookshop.yaml"),
    include_str!("../../../assets/demo/hr-portal.yaml"),
    include_str!("../../../assets/demo/travel.yaml"),
    include_str!("../../../assets/demo/analytics.yaml"),
    include_str!("../../../assets/demo/service-bindings.yaml"),
];

/// Write a kubeconfig for a sandbox served at `url`, with context `capdeck-sandbox`.
pub fn write_kubeconfig(path: &Path, url: &str, user: &str) -> std::io::Result<()> {
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "capdeck-sandbox", "cluster": {"server": url}}],
        "users": [{"name": user, "user": {"token": "capdeck-sandbox"}}],
        "contexts": [{"name": "capdeck-sandbox", "context": {"cluster": "capdeck-sandbox", "user": user, "namespace": "default"}}],
        "current-context": "capdeck-sandbox",
        "preferences": {},
    });
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_saphyr::to_string(&config).map_err(|error| std::io::Error::other(error.to_string()))?;
    std::fs::write(path, text)
}
