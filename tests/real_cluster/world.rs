//! One scenario, two backends: a `World` is a namespace on either the sandbox (served over HTTP,
//! one sandbox per world) or the shared real kube-apiserver, reached only through kube clients and
//! kubeconfig files — never through sandbox internals — so a scenario passes on both or shows a
//! difference.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use capdeck::api::RotationBatch;
use capdeck::sandbox::{Sandbox, SandboxConfig, ServedSandbox};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::common::story_world::{StoryWorld, oldest_first};
use crate::control_plane::{Assets, ControlPlane, Profile};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sandbox,
    KubeApiserver,
}

impl Backend {
    pub fn label(self) -> &'static str {
        match self {
            Self::Sandbox => "sandbox",
            Self::KubeApiserver => "kube_apiserver",
        }
    }
}

/// The control plane all real-backend worlds share (each in its own namespace), started by the
/// first world that needs it.
static SHARED: OnceLock<Result<Arc<ControlPlane>, String>> = OnceLock::new();
static ASSETS: OnceLock<Result<Assets, String>> = OnceLock::new();

pub fn assets() -> Result<Assets, String> {
    ASSETS.get_or_init(crate::control_plane::find_assets).clone()
}

pub fn shared_plane() -> Result<Arc<ControlPlane>, String> {
    SHARED
        .get_or_init(|| {
            let plane = start_plane(Profile::Standard)?;
            eprintln!(
                "real control plane up in {:.2} s at {} (its workload plane in {:.2} s more)",
                plane.start_time.as_secs_f64(),
                plane.url,
                plane.workloads_start_time.as_secs_f64()
            );
            Ok(Arc::new(plane))
        })
        .clone()
}

/// Stop the shared control plane at the end of the run and remove its directory (etcd's data,
/// about 66 MB): a static is never dropped, so its `TempDir` would stay behind after every run.
pub fn stop_shared_plane() {
    if let Some(Ok(plane)) = SHARED.get() {
        plane.stop();
        if let Err(error) = std::fs::remove_dir_all(plane.dir.path()) {
            eprintln!("could not remove the shared control plane's directory {}: {error}", plane.dir.path().display());
        }
    }
}

/// A control plane with its workload plane, and capdeck's CRDs installed and Established.
pub fn start_plane(profile: Profile) -> Result<ControlPlane, String> {
    let mut plane = ControlPlane::start(assets()?, profile)?;
    plane.workloads_start_time = plane.start_workloads()?;
    let mut crds = String::new();
    for crd in capdeck::api::crds::all() {
        if profile == Profile::WithoutCapdeckCrds && crd.spec.group == "capdeck.dev" {
            continue;
        }
        crds.push_str("---\n");
        crds.push_str(&capdeck::api::crds::to_yaml(&crd).map_err(|e| e.to_string())?);
    }
    plane.kubectl_apply(&crds)?;
    // `kubectl wait` right after the apply can find a CRD whose status is not written yet
    // ("status.conditions accessor error"): ask again until Established, bounded.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let output = plane
            .kubectl()
            .args(["wait", "--for=condition=Established", "--timeout=30s", "crd", "--all"])
            .output()
            .map_err(|e| e.to_string())?;
        if output.status.success() {
            return Ok(plane);
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("CRDs not established: {}", String::from_utf8_lossy(&output.stderr)));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

pub struct SandboxParts {
    pub sandbox: Sandbox,
    pub served: Mutex<Option<ServedSandbox>>,
    pub address: std::net::SocketAddr,
    pub dir: tempfile::TempDir,
}

pub struct World {
    pub backend: Backend,
    pub ns: String,
    pub client: kube::Client,
    pub admin_kubeconfig: PathBuf,
    pub sandbox: Option<SandboxParts>,
    pub plane: Option<Arc<ControlPlane>>,
    kinds: Mutex<HashMap<String, ApiResource>>,
}

pub fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// The client configuration of a kubeconfig file (stories that wrap it, e.g. to count requests).
pub async fn config_for(kubeconfig: &std::path::Path) -> kube::Config {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default()).await.expect("config")
}

pub async fn client_for(kubeconfig: &std::path::Path) -> kube::Client {
    kube::Client::try_from(config_for(kubeconfig).await).expect("client")
}

impl World {
    /// A fresh namespace on `backend` (a whole new sandbox for the sandbox backend).
    pub async fn new(backend: Backend, test: &str) -> World {
        match backend {
            Backend::Sandbox => Self::on_sandbox(test).await,
            Backend::KubeApiserver => {
                let plane = shared_plane().expect("the real control plane");
                Self::on_plane(plane, test).await
            }
        }
    }

    /// A world on a control plane of its own (for tests that restart or compact it).
    pub async fn dedicated(backend: Backend, test: &str, profile: Profile) -> World {
        match backend {
            Backend::Sandbox => Self::on_sandbox(test).await,
            Backend::KubeApiserver => {
                let plane = tokio::task::spawn_blocking(move || start_plane(profile))
                    .await
                    .expect("join")
                    .expect("a dedicated control plane");
                Self::on_plane(Arc::new(plane), test).await
            }
        }
    }

    async fn on_sandbox(test: &str) -> World {
        let config = SandboxConfig { bookmark_interval: Duration::from_secs(1), ..Default::default() };
        let sandbox = Sandbox::new(config);
        sandbox.install_crds();
        let served = sandbox.serve("127.0.0.1:0".parse().expect("addr")).await.expect("serve");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("admin.kubeconfig");
        capdeck::sandbox::write_kubeconfig(&kubeconfig, &served.url, "admin").expect("kubeconfig");
        let client = client_for(&kubeconfig).await;
        let world = World {
            backend: Backend::Sandbox,
            ns: namespace_name(test),
            client,
            admin_kubeconfig: kubeconfig,
            sandbox: Some(SandboxParts { address: served.address, sandbox, served: Mutex::new(Some(served)), dir }),
            plane: None,
            kinds: Mutex::new(HashMap::new()),
        };
        world.create_namespace().await;
        world
    }

    /// A world on `plane` (shared or a story's own).
    pub async fn on_plane(plane: Arc<ControlPlane>, test: &str) -> World {
        let kubeconfig = plane.kubeconfig_path("admin");
        let client = client_for(&kubeconfig).await;
        let world = World {
            backend: Backend::KubeApiserver,
            ns: namespace_name(test),
            client,
            admin_kubeconfig: kubeconfig,
            sandbox: None,
            plane: Some(plane),
            kinds: Mutex::new(HashMap::new()),
        };
        world.create_namespace().await;
        world
    }

    async fn create_namespace(&self) {
        self.apply_objects(vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}})]).await;
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox.as_ref().expect("a sandbox world").sandbox
    }

    pub fn plane(&self) -> &ControlPlane {
        self.plane.as_ref().expect("a real world")
    }

    /// The API resource of `apiVersion` + `kind` (discovered once).
    pub async fn resource(&self, api_version: &str, kind: &str) -> ApiResource {
        let key = format!("{api_version}/{kind}");
        if let Some(found) = self.kinds.lock().expect("lock").get(&key) {
            return found.clone();
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, _) = kube::discovery::pinned_kind(&self.client, &gvk).await.expect("discovery");
        self.kinds.lock().expect("lock").insert(key, resource.clone());
        resource
    }

    async fn dynamic(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = self.resource(api_version, kind).await;
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// Create (or replace) each object as a client would — `status` through the status
    /// subresource where the kind has one, since a real server drops it on create.
    pub async fn apply_objects(&self, objects: Vec<Value>) {
        for mut object in objects {
            let api_version = object["apiVersion"].as_str().expect("apiVersion").to_string();
            let kind = object["kind"].as_str().expect("kind").to_string();
            let name = object.pointer("/metadata/name").and_then(Value::as_str).expect("name").to_string();
            let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_string);
            let status = object.as_object_mut().and_then(|o| o.remove("status"));
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                // generation and uid are the server's.
                metadata.remove("generation");
                metadata.remove("uid");
            }
            self.resolve_owners(&mut object, namespace.as_deref()).await;
            let api = self.dynamic(&api_version, &kind, namespace.as_deref()).await;
            let params = PatchParams::apply("capdeck-tests").force();
            api.patch(&name, &params, &Patch::Apply(&object))
                .await
                .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
            if let Some(status) = status {
                let body = json!({"apiVersion": api_version, "kind": kind, "status": status});
                match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&body)).await {
                    Ok(_) => {}
                    // Kinds without a status subresource take status on the main resource.
                    Err(kube::Error::Api(e)) if e.code == 404 => {
                        api.patch(&name, &PatchParams::default(), &Patch::Merge(&body)).await.expect("status");
                    }
                    Err(e) => panic!("status of {kind} {name}: {e}"),
                }
            }
        }
    }

    /// Owner references point at their owners' live uids (a fixture names the owner and carries
    /// a placeholder uid; the server gave the owner its own).
    async fn resolve_owners(&self, object: &mut Value, namespace: Option<&str>) {
        let Some(Value::Array(owners)) = object.pointer_mut("/metadata/ownerReferences") else { return };
        // Only the fixtures' placeholders (`fixtures::version_uid`); any other uid is the story's.
        let placeholder = |owner: &Value| {
            owner.get("uid").and_then(Value::as_str).is_some_and(|uid| uid.starts_with("00000000-0000-4000-8000-"))
        };
        for owner in owners.iter_mut().filter(|owner| placeholder(owner)) {
            let text = |field: &str| owner.get(field).and_then(Value::as_str).unwrap_or_default().to_string();
            let (api_version, kind, name) = (text("apiVersion"), text("kind"), text("name"));
            // An owner of a kind the server does not serve (yet) keeps its placeholder.
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
            let gvk = GroupVersionKind::gvk(group, version, &kind);
            if kube::discovery::pinned_kind(&self.client, &gvk).await.is_err() {
                continue;
            }
            let api = self.dynamic(&api_version, &kind, namespace).await;
            if let Some(live) = api.get_opt(&name).await.expect("owner") {
                owner["uid"] = json!(live.metadata.uid);
            }
        }
    }

    pub async fn get(&self, api_version: &str, kind: &str, name: &str) -> Option<Value> {
        let api = self.dynamic(api_version, kind, Some(&self.ns)).await;
        api.get_opt(name).await.expect("get").map(|o| serde_json::to_value(o).expect("json"))
    }

    /// Rotate a binding Secret the way sap-btp-service-operator does: new data, same name.
    pub async fn rotate_secret(&self, name: &str) {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(self.client.clone(), &self.ns);
        let secret = api.get(name).await.expect("secret");
        let mut data = serde_json::Map::new();
        for key in secret.data.unwrap_or_default().keys() {
            let value = if key == "credentials" {
                format!(r#"{{"clientid":"sb-app","clientsecret":"rotated-{n}","url":"https://uaa"}}"#)
            } else {
                format!("rotated-{n}")
            };
            data.insert(key.clone(), json!(b64(&value)));
        }
        api.patch(name, &PatchParams::default(), &Patch::Merge(json!({"data": data}))).await.expect("rotate");
    }

    /// A kubeconfig for `user`: on the real server a token-file user (whose permissions are the
    /// RBAC objects a test creates); on the sandbox, the sandbox's single user becomes `user`.
    pub fn kubeconfig_for(&self, user: &str) -> PathBuf {
        match self.backend {
            Backend::KubeApiserver => self.plane().kubeconfig_path(user),
            Backend::Sandbox => {
                let parts = self.sandbox.as_ref().expect("sandbox");
                parts.sandbox.set_user(user);
                let path = parts.dir.path().join(format!("{user}.kubeconfig"));
                capdeck::sandbox::write_kubeconfig(&path, &format!("http://{}", parts.address), user)
                    .expect("kubeconfig");
                path
            }
        }
    }

    /// Let `user` do `verbs` on `resources` of `group` in this namespace — and nothing else there
    /// (the sandbox has no RBAC: it denies the verbs given in `sandbox_denied` instead).
    pub async fn grant(&self, user: &str, group: &str, resources: &[&str], verbs: &[&str], sandbox_denied: &[&str]) {
        match self.backend {
            Backend::KubeApiserver => {
                let role = format!("{user}-{}", resources.join("-"));
                self.apply_objects(vec![
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                           "metadata": {"name": role, "namespace": self.ns},
                           "rules": [{"apiGroups": [group], "resources": resources, "verbs": verbs}]}),
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                           "metadata": {"name": role, "namespace": self.ns},
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                           "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
                ])
                .await;
                // The authorizer learns of new RBAC objects from its informers, a moment later:
                // wait until it allows what was granted (as a SubjectAccessReview says).
                self.wait_allowed(user, group, resources, verbs).await;
            }
            Backend::Sandbox => {
                for rule in sandbox_denied {
                    self.sandbox().deny(rule.parse().expect("deny rule"));
                }
            }
        }
    }

    /// Wait until the API server's authorizer allows `user` every verb on every resource.
    async fn wait_allowed(&self, user: &str, group: &str, resources: &[&str], verbs: &[&str]) {
        use k8s_openapi::api::authorization::v1::SubjectAccessReview;
        let reviews: Api<SubjectAccessReview> = Api::all(self.client.clone());
        for resource in resources {
            for verb in verbs {
                let review: SubjectAccessReview = serde_json::from_value(json!({
                    "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                    "spec": {"user": user, "resourceAttributes": {"namespace": self.ns, "verb": verb,
                             "group": group, "resource": resource}}}))
                .expect("review");
                eventually(&format!("{user} may {verb} {resource}"), Duration::from_secs(30), || async {
                    let answer = reviews.create(&Default::default(), &review).await.map_err(|e| e.to_string())?;
                    if answer.status.is_some_and(|status| status.allowed) { Ok(()) } else { Err("denied".into()) }
                })
                .await;
            }
        }
    }

    /// Forget the sandbox's deny rules (its RBAC stand-in is global, not per user); on a real
    /// server every user keeps the Roles bound to it.
    pub fn next_user(&self) {
        if let Some(parts) = &self.sandbox {
            parts.sandbox.allow_all();
        }
    }

    /// Make the API server unreachable for `down_for`, then bring it back on the same address.
    pub async fn restart_server(&self, down_for: Duration) {
        match self.backend {
            Backend::KubeApiserver => {
                let plane = self.plane.clone().expect("plane");
                tokio::task::spawn_blocking(move || plane.restart_apiserver(down_for))
                    .await
                    .expect("join")
                    .expect("restart kube-apiserver");
            }
            Backend::Sandbox => {
                let parts = self.sandbox.as_ref().expect("sandbox");
                let served = parts.served.lock().expect("lock").take();
                if let Some(served) = served {
                    served.stop().await;
                }
                tokio::time::sleep(down_for).await;
                let served = parts.sandbox.serve(parts.address).await.expect("serve again");
                *parts.served.lock().expect("lock") = Some(served);
            }
        }
    }
}

/// A world as a story reads it, on either backend: through the API server only.
impl StoryWorld for World {
    async fn batches(&self, app: &str) -> Vec<RotationBatch> {
        let api: Api<RotationBatch> = Api::namespaced(self.client.clone(), &self.ns);
        let listed = api.list(&Default::default()).await.expect("batches").items;
        oldest_first(listed.into_iter().filter(|b| b.spec.application == app).collect())
    }

    async fn deployment(&self, name: &str) -> Option<Value> {
        self.get("apps/v1", "Deployment", name).await
    }

    async fn secret(&self, name: &str) -> Option<Value> {
        self.get("v1", "Secret", name).await
    }
}

fn namespace_name(test: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let base: String =
        test.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).take(40).collect();
    format!("{}-{n}", base.trim_matches('-'))
}

pub use crate::common::eventually;

/// Kubernetes' own controllers for a world's workloads. On a real server they run already (the
/// workload plane, `ControlPlane::start_workloads`); the sandbox runs its simulation of them
/// (`Sandbox::simulate_workloads`) until `stop`.
pub struct Workloads {
    simulation: Option<(tokio_util::sync::CancellationToken, tokio::task::JoinHandle<()>)>,
}

impl Workloads {
    pub async fn stop(self) {
        if let Some((cancel, task)) = self.simulation {
            cancel.cancel();
            let _ = task.await;
        }
    }
}

/// The label and taint that give a Deployment with a fate Nodes of its own (`node_pool`).
pub const POOL_KEY: &str = "capdeck.dev/test-pool";

/// What the next Pods of a Deployment do (`World::next_pods`). On a real server the Deployment's
/// Pods run on Nodes of their own and the fate is the Node they are scheduled to next (kwok's
/// stages, `tools/envtest/kwok/stages.yaml`); the sandbox's simulation reads an annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Ready after kwok's short delay.
    Ready,
    /// Running, never ready (a readiness probe that never passes).
    NeverReady,
    /// CrashLoopBackOff, restarted every 10 s, last terminated `Error (exit code 1)`.
    CrashLoop,
    /// Nowhere to run: kube-scheduler says why.
    Unschedulable,
}

impl Fate {
    /// The suffix of the Node that plays it (kwok's stages select by it).
    fn node_suffix(self) -> Option<&'static str> {
        match self {
            Self::Ready => Some("ready"),
            Self::NeverReady => Some("never-ready"),
            Self::CrashLoop => Some("crash-loop"),
            Self::Unschedulable => None,
        }
    }

    /// The sandbox simulation's annotation for it.
    fn sandbox_annotation(self) -> Option<&'static str> {
        match self {
            Self::Ready => None,
            Self::NeverReady => Some(capdeck::sandbox::simulate::HANG_ANNOTATION),
            Self::CrashLoop => Some(capdeck::sandbox::simulate::CRASH_LOOP_ANNOTATION),
            Self::Unschedulable => Some(capdeck::sandbox::simulate::UNSCHEDULABLE_ANNOTATION),
        }
    }
}

/// The Node pool of one Deployment of one world: `p` and 12 hex digits (a label value).
pub fn node_pool(ns: &str, deployment: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("{ns}/{deployment}").as_bytes());
    format!("p{}", digest.iter().take(6).map(|b| format!("{b:02x}")).collect::<String>())
}

/// What puts a Deployment's Pods on its own Nodes: a node selector and a toleration of their taint.
pub fn pin_to_pool(deployment: &mut Value, pool: &str) {
    let spec = &mut deployment["spec"]["template"]["spec"];
    spec["nodeSelector"] = json!({POOL_KEY: pool});
    spec["tolerations"] = json!([{"key": POOL_KEY, "operator": "Equal", "value": pool, "effect": "NoSchedule"}]);
}

impl World {
    /// Start the world's workload controllers (see `Workloads`): in the sandbox, its simulation
    /// of Deployments, ReplicaSets, Pods and Jobs.
    pub fn workloads(&self) -> Workloads {
        let Some(parts) = &self.sandbox else { return Workloads { simulation: None } };
        let simulation = capdeck::sandbox::simulate::WorkloadSimulation {
            // Two replicas in about 200 ms, like the real plane's kwok nodes.
            replicas_per_second: 10.0,
            pods: true,
            ..Default::default()
        };
        let cancel = tokio_util::sync::CancellationToken::new();
        let task = parts.sandbox.simulate_workloads(simulation, cancel.clone());
        Workloads { simulation: Some((cancel, task)) }
    }

    /// A Node of `pool` playing `fate` (tainted and labelled for the pool), once schedulable.
    pub async fn add_pool_node(&self, pool: &str, fate: Fate) {
        let Some(suffix) = fate.node_suffix() else { return };
        let name = format!("{pool}-{suffix}");
        let taints = json!([{"key": POOL_KEY, "value": pool, "effect": "NoSchedule"}]);
        self.apply_objects(vec![crate::control_plane::kwok_node(&name, &json!({POOL_KEY: pool}), &taints)]).await;
        let plane = self.plane.clone().expect("a real world");
        tokio::task::spawn_blocking(move || plane.wait_node_schedulable(&name, Duration::from_secs(60)))
            .await
            .expect("join")
            .expect("the pool's node");
    }

    async fn cordon(&self, node: &str, cordoned: bool) {
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
        let patch = json!({"spec": {"unschedulable": cordoned}});
        nodes.patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("cordon");
    }

    /// Give a Deployment pinned to `node_pool(ns, deployment)` its first, healthy Node (real
    /// backend; before the Deployment is created).
    pub async fn prepare_pool(&self, deployment: &str) {
        if self.backend == Backend::KubeApiserver {
            self.add_pool_node(&node_pool(&self.ns, deployment), Fate::Ready).await;
        }
    }

    /// From now on, `deployment`'s new Pods meet `fate` (its current Pods keep running where they
    /// are). Real: the pool's Nodes are cordoned but the one that plays `fate`; sandbox: the
    /// simulation's annotation.
    pub async fn next_pods(&self, deployment: &str, fate: Fate) {
        match self.backend {
            Backend::KubeApiserver => {
                let pool = node_pool(&self.ns, deployment);
                if fate != Fate::Ready && fate != Fate::Unschedulable {
                    self.add_pool_node(&pool, fate).await;
                }
                for other in [Fate::Ready, Fate::NeverReady, Fate::CrashLoop] {
                    let Some(suffix) = other.node_suffix() else { continue };
                    let name = format!("{pool}-{suffix}");
                    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
                    if nodes.get_opt(&name).await.expect("node").is_some() {
                        self.cordon(&name, other != fate).await;
                    }
                }
            }
            Backend::Sandbox => {
                let mut annotations = serde_json::Map::new();
                for other in [Fate::NeverReady, Fate::CrashLoop, Fate::Unschedulable] {
                    let key = other.sandbox_annotation().expect("annotated");
                    annotations.insert(key.into(), if other == fate { json!("true") } else { Value::Null });
                }
                annotations.insert(capdeck::sandbox::simulate::STALL_ANNOTATION.into(), Value::Null);
                let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(self.client.clone(), &self.ns);
                let patch = json!({"metadata": {"annotations": annotations}});
                api.patch(deployment, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("fate");
            }
        }
    }

    /// Wait until every Deployment of the world has rolled out (real: the deployment controller
    /// and kwok brought their Pods up; sandbox: the status the fixture or simulation wrote).
    pub async fn settled(&self) {
        let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(self.client.clone(), &self.ns);
        eventually("every Deployment rolled out", Duration::from_secs(90), || async {
            let listed = api.list(&Default::default()).await.map_err(|e| e.to_string())?;
            let pending: Vec<String> = listed
                .items
                .iter()
                .filter(|d| !capdeck_rolled_out(d))
                .map(|d| format!("{} {:?}", d.metadata.name.clone().unwrap_or_default(), d.status))
                .collect();
            if pending.is_empty() { Ok(()) } else { Err(pending.join("; ")) }
        })
        .await;
    }
}

/// `kubectl rollout status` says done: observed, every replica updated and available, no old one.
pub fn capdeck_rolled_out(deployment: &k8s_openapi::api::apps::v1::Deployment) -> bool {
    let want = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(status) = &deployment.status else { return false };
    status.observed_generation >= deployment.metadata.generation
        && status.updated_replicas.unwrap_or(0) == want
        && status.available_replicas.unwrap_or(0) == want
        && status.replicas.unwrap_or(0) == want
}
