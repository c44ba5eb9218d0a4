//! A CAP application in the sandbox whose Deployments start current, and an engine around it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use capdeck::api::{BatchPhase, CAPApplication, CAPApplicationVersion, CAPTenant, DeploymentView, RotationBatch};
use capdeck::cluster::Scope;
use capdeck::cluster::stores::{StoreTasks, Stores};
use capdeck::engine::config::{Clock, EngineConfig, EngineMode, LeaseSettings};
use capdeck::engine::metrics::Metrics;
use capdeck::engine::{EngineHandle, Role};
use capdeck::lookup::Objects;
use capdeck::plan::{CapIndex, plan_all};
use capdeck::sandbox::Sandbox;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::story_world::{StoryWorld, oldest_first};

pub const NS: &str = "shop";

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Options for `application`.
#[derive(Clone)]
pub struct AppOptions {
    pub name: &'static str,
    pub opted_in: bool,
    pub manual: bool,
    pub deployments: &'static [(&'static str, &'static [&'static str])],
    pub replicas: i64,
    /// Deployments whose next rollout stalls at its progress deadline (`ProgressDeadlineExceeded`).
    pub stall: &'static [&'static str],
    /// Deployments whose next rollout never progresses: its new Pods never become ready.
    pub hang: &'static [&'static str],
    /// Deployments whose next rollout's new Pods crash-loop.
    pub crash_loop: &'static [&'static str],
    /// Deployments whose next rollout's new Pods find no node.
    pub unschedulable: &'static [&'static str],
    /// Each new Pod becomes ready this long after it started (a Go duration: kwok's `pod-ready`
    /// delay on a real server, the simulation's pace in the sandbox), so a story can act while
    /// Deployments roll; `None`: at once.
    pub ready_after: Option<&'static str>,
}

impl Default for AppOptions {
    fn default() -> Self {
        Self {
            name: "bookshop",
            opted_in: true,
            manual: false,
            deployments: &[("srv", &["uaa", "db"]), ("router", &["uaa"])],
            replicas: 2,
            stall: &[],
            hang: &[],
            crash_loop: &[],
            unschedulable: &[],
            ready_after: None,
        }
    }
}

/// A version's uid in the fixtures (the sandbox keeps the uid an object is loaded with; worlds
/// that create objects through an API server resolve owner references to the live uid).
pub fn version_uid(version: &str) -> String {
    let hex: String = version.bytes().map(|b| format!("{b:02x}")).collect::<String>().chars().take(12).collect();
    format!("00000000-0000-4000-8000-{hex:0>12}")
}

/// The controller reference the CAP Operator gives a version's Deployments.
pub fn owned_by_version(version: &str) -> Value {
    json!([{"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion", "name": version,
            "uid": version_uid(version), "controller": true, "blockOwnerDeletion": true}])
}

/// Namespace, CAPApplication (uaa: credentials layout, db: flat key/value), one Ready version
/// with the given deployment workloads plus a TenantOperation job, a Ready tenant, binding
/// Secrets, and Deployments without VCAP Secrets yet (see `make_current`).
pub fn application(options: &AppOptions) -> Vec<Value> {
    let app = options.name;
    let mut annotations = serde_json::Map::new();
    if options.manual {
        annotations.insert("capdeck.dev/approval".into(), json!("manual"));
    }
    let cav = format!("{app}-v1");
    let mut workloads: Vec<Value> = options
        .deployments
        .iter()
        .map(|(name, services)| json!({"name": name, "consumedBTPServices": services, "deploymentDefinition": {"type": "CAP", "image": "i"}}))
        .collect();
    workloads.push(json!({"name": "mtx", "consumedBTPServices": ["uaa", "db"], "jobDefinition": {"type": "TenantOperation", "image": "i"}}));
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
               "metadata": {"name": app, "namespace": NS, "annotations": annotations},
               "spec": {"btpAppName": app, "providerSubaccountId": "p", "rolloutOnCredentialUpdate": options.opted_in,
                        "btp": {"services": [{"name": "uaa", "class": "xsuaa", "secret": format!("{app}-uaa")},
                                             {"name": "db", "class": "hana", "secret": format!("{app}-db")}]}},
               "status": {"state": "Consistent"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("{app}-uaa"), "namespace": NS},
               "data": {"credentials": b64(r#"{"clientid":"sb-app","clientsecret":"first-secret","url":"https://uaa"}"#)}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("{app}-db"), "namespace": NS},
               "data": {"host": b64("db.example.com"), "password": b64("db-first")}}),
        json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion",
               "metadata": {"name": cav, "namespace": NS, "uid": version_uid(&cav)},
               "spec": {"capApplicationInstance": app, "version": "1.0.0", "workloads": workloads},
               "status": {"state": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}}),
        json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenant", "metadata": {"name": format!("{app}-provider"), "namespace": NS},
               "spec": {"capApplicationInstance": app, "subDomain": "p", "tenantId": "t"},
               "status": {"state": "Ready", "currentCAPApplicationVersionInstance": cav, "conditions": [{"type": "Ready", "status": "True"}]}}),
    ];
    for (name, _) in options.deployments {
        let deployment = format!("{cav}-{name}");
        let mut metadata =
            json!({"name": deployment, "namespace": NS, "generation": 1, "ownerReferences": owned_by_version(&cav)});
        if options.stall.contains(name) {
            metadata["annotations"] = json!({"sandbox.capdeck.dev/stall": "true"});
        }
        if options.hang.contains(name) {
            metadata["annotations"] = json!({"sandbox.capdeck.dev/hang": "true"});
        }
        if options.crash_loop.contains(name) {
            metadata["annotations"] = json!({"sandbox.capdeck.dev/crash-loop": "true"});
        }
        if options.unschedulable.contains(name) {
            metadata["annotations"] = json!({"sandbox.capdeck.dev/unschedulable": "true"});
        }
        let mut template_metadata = json!({"labels": {"app": deployment}});
        if let Some(delay) = options.ready_after {
            template_metadata["annotations"] = json!({capdeck::sandbox::simulate::READY_DELAY_ANNOTATION: delay});
        }
        objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
            "spec": {"replicas": options.replicas, "selector": {"matchLabels": {"app": deployment}},
                     "template": {"metadata": template_metadata, "spec": {
                         "containers": [{"name": "main", "image": "i"}], "initContainers": [{"name": "init", "image": "i"}]}}},
            "status": {"observedGeneration": 1, "replicas": options.replicas, "updatedReplicas": options.replicas,
                       "readyReplicas": options.replicas, "availableReplicas": options.replicas}}));
    }
    objects
}

fn decode<K: serde::de::DeserializeOwned>(values: Vec<Value>) -> Vec<Arc<K>> {
    values.into_iter().filter_map(|v| serde_json::from_value(v).ok()).map(Arc::new).collect()
}

fn key_of(value: &Value) -> (String, String) {
    (
        value.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_string(),
        value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string(),
    )
}

/// A sandbox holding the application of `options`, its Deployments current.
pub fn current_sandbox(options: &AppOptions) -> Sandbox {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    sandbox.load(application(options)).expect("fixture");
    make_current(&sandbox);
    sandbox
}

/// The world most sandbox stories start from: the fixture applications with current VCAP
/// Secrets, simulated workload controllers, and an engine that leads and has finished its first
/// pass (the start-up re-check). The one world builder of the sandbox suites.
pub struct EngineWorld {
    pub sandbox: Sandbox,
    pub engine: RunningEngine,
    /// Cancels the simulated workload controllers.
    pub simulation: CancellationToken,
}

impl EngineWorld {
    pub async fn start(apps: &[AppOptions], config: EngineConfig) -> Self {
        let sandbox = Sandbox::default();
        sandbox.install_crds();
        for options in apps {
            sandbox.load(application(options)).expect("fixture");
        }
        make_current(&sandbox);
        let simulation = CancellationToken::new();
        sandbox.simulate_workloads(Default::default(), simulation.clone());
        let engine = RunningEngine::start(sandbox.client(), config).await;
        engine.wait_for_first_pass_as_leader().await;
        Self { sandbox, engine, simulation }
    }
}

/// Give every affected Deployment a VCAP Secret with exactly its current payload (as the Go
/// operator would have), so the engine starts with nothing to do.
pub fn make_current(sandbox: &Sandbox) {
    let mut lookup = Objects::default();
    for secret in decode::<Secret>(sandbox.list("", "secrets")) {
        lookup.add_secret(Arc::unwrap_or_clone(secret));
    }
    for deployment in decode::<DeploymentView>(sandbox.list("apps", "deployments")) {
        lookup.add_deployment(deployment);
    }
    // Plan as if every application opted in, so opted-out ones start current too.
    let apps: Vec<Arc<CAPApplication>> = decode::<CAPApplication>(sandbox.list("sme.sap.com", "capapplications"))
        .into_iter()
        .map(|app| {
            let mut app = (*app).clone();
            app.spec.rollout_on_credential_update = Some(true);
            Arc::new(app)
        })
        .collect();
    let index = CapIndex::new(
        apps,
        decode::<CAPApplicationVersion>(sandbox.list("sme.sap.com", "capapplicationversions")),
        decode::<CAPTenant>(sandbox.list("sme.sap.com", "captenants")),
    );
    let plan = plan_all(&index, &lookup);
    for planned in plan.deployments {
        let secret = format!("{}-go001", planned.deployment);
        let hash = capdeck::vcap::secret_owner_hash(&planned.namespace, &planned.version, &planned.deployment);
        sandbox
            .load([json!({"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": secret, "namespace": planned.namespace, "labels": {"sme.sap.com/secret-owner-hash": hash}},
                          "data": {"VCAP_SERVICES": b64(planned.payload.expose())}})])
            .expect("vcap secret");
        let mut deployment =
            sandbox.get("apps", "deployments", &planned.namespace, &planned.deployment).expect("deployment");
        let env_from = json!([{"secretRef": {"name": secret, "optional": true}}]);
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(containers)) = deployment.pointer_mut(&format!("/spec/template/spec/{list}")) {
                for container in containers {
                    container["envFrom"] = env_from.clone();
                }
            }
        }
        sandbox.load([deployment]).expect("deployment");
    }
}

/// Stores and an engine running against a client, stopped with `stop`.
pub struct RunningEngine {
    pub stores: Stores,
    pub handle: Option<EngineHandle>,
    pub cancel: CancellationToken,
    tasks: StoreTasks,
}

pub fn test_config(identity: &str) -> EngineConfig {
    EngineConfig {
        rollout_delay: Duration::from_secs(30),
        clock: Clock::tokio(),
        mode: EngineMode::Lead,
        lease: LeaseSettings {
            namespace: "default".into(),
            name: "capdeck-engine".into(),
            duration_seconds: 15,
            grace_seconds: 5,
        },
        identity: identity.into(),
        ..EngineConfig::default()
    }
}

/// For tests on the wall clock (lease expiry cannot follow paused time): a 1 s window, progress
/// every 200 ms, and a lease of `lease_seconds` renewed `grace_seconds` before it ends.
pub fn real_time_config(identity: &str, lease_seconds: u64, grace_seconds: u64) -> EngineConfig {
    let mut config = test_config(identity);
    config.clock = Clock::System;
    config.rollout_delay = Duration::from_secs(1);
    config.progress_interval = Duration::from_millis(200);
    config.lease.duration_seconds = lease_seconds;
    config.lease.grace_seconds = grace_seconds;
    config
}

impl RunningEngine {
    /// The value of `series` (a metric's name, with its labels if it has any) on the engine's
    /// `/metrics` now, if it has that sample.
    pub fn metric(&self, series: &str) -> Option<i64> {
        let text = self.handle.as_ref().map(|h| h.metrics.encode()).unwrap_or_default();
        text.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
    }

    pub async fn start(client: kube::Client, config: EngineConfig) -> Self {
        Self::start_in(client, Scope::All, config).await
    }

    /// An engine watching only `scope` (worlds that share one API server use a namespace each).
    pub async fn start_in(client: kube::Client, scope: Scope, config: EngineConfig) -> Self {
        let cancel = CancellationToken::new();
        let (stores, tasks) = Stores::start(&client, scope, cancel.clone());
        let handle = capdeck::engine::spawn(client, stores.clone(), config, Metrics::new(), cancel.clone());
        Self { stores, handle: Some(handle), cancel, tasks }
    }

    /// The engine's `/metrics` text.
    pub fn metrics_text(&self) -> String {
        self.handle.as_ref().map(|h| h.metrics.encode()).unwrap_or_default()
    }

    /// The engine's successful writes by verb and resource (`"update deployments"` → 2), from
    /// its metrics.
    pub fn writes(&self) -> HashMap<String, u64> {
        parse_writes(&self.metrics_text())
    }

    /// Its writes to workloads, Secrets and batches only (no Events).
    pub fn workload_writes(&self) -> HashMap<String, u64> {
        self.writes().into_iter().filter(|(k, _)| !k.ends_with(" events")).collect()
    }

    pub fn role(&self) -> Role {
        self.handle.as_ref().map_or(Role::Observer, |h| *h.role.borrow())
    }

    /// The engine's role as it changes (for monitors that sample two engines at once).
    pub fn roles(&self) -> tokio::sync::watch::Receiver<Role> {
        self.handle.as_ref().map_or_else(|| tokio::sync::watch::channel(Role::Observer).1, |h| h.role.clone())
    }

    pub async fn wait_for_role(&self, role: Role) {
        self.wait_for_role_within(role, Duration::from_secs(120)).await;
    }

    pub async fn wait_for_role_within(&self, role: Role, limit: Duration) {
        super::eventually(&format!("engine role {role:?}"), limit, || async { self.role() == role }).await;
    }

    /// Leading and past its first pass as leader (the start-up re-check): waits for the engine's
    /// pass count, not for a duration.
    pub async fn wait_for_first_pass_as_leader(&self) {
        let Some(handle) = self.handle.as_ref() else { return };
        let mut passes = handle.passes.clone();
        let waited =
            tokio::time::timeout(Duration::from_secs(120), passes.wait_for(|count| count.as_leader >= 1)).await;
        assert!(matches!(waited, Ok(Ok(_))), "the engine completed no pass as leader within 120 s");
        assert_eq!(self.role(), Role::Leader, "the engine passed as leader but does not lead now");
    }

    /// Waits until the engine completes one more pass than it has now: whatever the pass under
    /// way wrote and announced (its status, then its Events) is done by then.
    pub async fn wait_for_another_pass(&self) {
        let Some(handle) = self.handle.as_ref() else { return };
        let mut passes = handle.passes.clone();
        let now = passes.borrow_and_update().completed;
        let waited =
            tokio::time::timeout(Duration::from_secs(120), passes.wait_for(|count| count.completed > now)).await;
        assert!(matches!(waited, Ok(Ok(_))), "the engine completed no pass within 120 s");
    }

    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(handle) = self.handle.take() {
            handle.join().await;
        }
        for task in self.tasks.handles.drain(..) {
            let _ = task.await;
        }
    }

    /// Stop abruptly, like a killed process: tasks aborted, the engine's with its lease task.
    pub fn kill(mut self) {
        for task in self.tasks.handles.drain(..) {
            task.abort();
        }
        if let Some(handle) = self.handle.take() {
            handle.abort();
        }
    }
}

/// `capdeck_api_writes_total{verb="update",resource="deployments"} 2` lines, as a map.
pub fn parse_writes(metrics: &str) -> HashMap<String, u64> {
    let mut writes = HashMap::new();
    for line in metrics.lines().filter(|l| l.starts_with("capdeck_api_writes_total{")) {
        let label = |name: &str| {
            line.split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_default()
                .to_string()
        };
        let count: u64 = line.rsplit(' ').next().and_then(|n| n.parse::<f64>().ok()).unwrap_or(0.0) as u64;
        if count > 0 {
            writes.insert(format!("{} {}", label("verb"), label("resource")), count);
        }
    }
    writes
}

/// Every batch in the sandbox.
pub fn batches_all(sandbox: &Sandbox) -> Vec<RotationBatch> {
    sandbox
        .list("capdeck.dev", "rotationbatches")
        .into_iter()
        .filter_map(|v| serde_json::from_value::<RotationBatch>(v).ok())
        .collect()
}

/// The sandbox in process as a story's world: its applications in `NS`.
impl StoryWorld for Sandbox {
    async fn batches(&self, app: &str) -> Vec<RotationBatch> {
        oldest_first(batches_all(self).into_iter().filter(|b| b.spec.application == app).collect())
    }

    async fn deployment(&self, name: &str) -> Option<Value> {
        self.get("apps", "deployments", NS, name)
    }

    async fn secret(&self, name: &str) -> Option<Value> {
        self.get("", "secrets", NS, name)
    }
}

/// Both Deployments of the default fixture rolled once per rotated batch: a new VCAP Secret
/// created, the Deployment updated, the old VCAP Secret deleted — two of each.
pub fn assert_two_rolled_once(sandbox: &Sandbox) {
    let writes = logged_workload_writes(sandbox);
    let count = |what: &str| writes.iter().filter(|w| w.as_str() == what).count();
    assert_eq!(
        (count("create secrets"), count("update deployments"), count("delete secrets")),
        (2, 2, 2),
        "{writes:#?}"
    );
}

/// Successful writes to Secrets, Deployments and batches (no Leases, no Events) in the sandbox's
/// request log since it was cleared: every client's, subresources named — what the engine's own
/// count (`RunningEngine::workload_writes`) cannot show.
pub fn logged_workload_writes(sandbox: &Sandbox) -> Vec<String> {
    sandbox
        .writes()
        .into_iter()
        .filter(|w| matches!(w.info.resource.as_str(), "secrets" | "deployments" | "rotationbatches"))
        .map(|w| {
            format!(
                "{} {}{}",
                w.info.verb,
                w.info.resource,
                w.info.subresource.map(|s| format!("/{s}")).unwrap_or_default()
            )
        })
        .collect()
}
