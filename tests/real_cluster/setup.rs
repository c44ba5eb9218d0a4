//! The scenario building blocks on a `World`: the test application made current (as if the Go
//! CAP Operator had rolled it), an engine scoped to the world's namespace, and the capdeck
//! binary run with a world's kubeconfig. What a story reads of a world is `StoryWorld`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capdeck::api::{CAPApplication, CAPApplicationVersion, CAPTenant, DeploymentView};
use capdeck::cluster::Scope;
use capdeck::engine::config::{Clock, EngineConfig, EngineMode, LeaseSettings};
use capdeck::lookup::Objects;
use capdeck::plan::{CapIndex, plan_all};
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};

use crate::common::fixtures::{AppOptions, NS, RunningEngine, application};
use crate::world::{Backend, Fate, World, b64, node_pool, pin_to_pool};

/// The Deployments of `options` with a fate (full names): their Pods run on Nodes of their own,
/// and what their next Pods do is the fate's.
pub fn fated(options: &AppOptions) -> Vec<(String, Fate)> {
    let full = |name: &str| format!("{}-v1-{name}", options.name);
    let lists: [(&[&str], Fate); 4] = [
        (options.stall, Fate::NeverReady),
        (options.hang, Fate::NeverReady),
        (options.crash_loop, Fate::CrashLoop),
        (options.unschedulable, Fate::Unschedulable),
    ];
    lists.iter().flat_map(|(names, fate)| names.iter().map(move |name| (full(name), *fate))).collect()
}

/// How long a stalling Deployment's rollout may go without progress (`progressDeadlineSeconds`).
pub const STALL_DEADLINE_SECONDS: i64 = 5;
/// The same for an unschedulable one: long enough for capdeck to have read the scheduler's reason
/// (it lists a rolling Deployment's Pods every 5 s).
pub const UNSCHEDULABLE_DEADLINE_SECONDS: i64 = 12;

/// The fixture application of `options` in `ns`, its Deployments already pointing at VCAP
/// Secrets with exactly their current payload, so an engine starting on it has nothing to do.
/// Deployments with a fate are pinned to their own Node pool; a stalling one gives up after
/// `STALL_DEADLINE_SECONDS`.
pub fn current_application(options: &AppOptions, ns: &str) -> Vec<Value> {
    let mut objects: Vec<Value> = application(options)
        .into_iter()
        .filter(|o| o["kind"] != "Namespace")
        .map(|mut o| {
            if o.pointer("/metadata/namespace").and_then(Value::as_str) == Some(NS) {
                o["metadata"]["namespace"] = json!(ns);
            }
            o
        })
        .collect();
    make_current(&mut objects);
    let full =
        |names: &[&str]| -> Vec<String> { names.iter().map(|name| format!("{}-v1-{name}", options.name)).collect() };
    let (stalling, unschedulable) = (full(options.stall), full(options.unschedulable));
    for (deployment, _) in fated(options) {
        for object in objects.iter_mut().filter(|o| o["kind"] == "Deployment" && key_of(o).1 == deployment) {
            pin_to_pool(object, &node_pool(ns, &deployment));
            if stalling.contains(&deployment) {
                // As on the real plane: new Pods that never become ready, then the deadline (the
                // sandbox's `stall` annotation makes them crash-loop, which fails them earlier).
                object["spec"]["progressDeadlineSeconds"] = json!(STALL_DEADLINE_SECONDS);
                object["metadata"]["annotations"] = json!({capdeck::sandbox::simulate::HANG_ANNOTATION: "true"});
            }
            if unschedulable.contains(&deployment) {
                object["spec"]["progressDeadlineSeconds"] = json!(UNSCHEDULABLE_DEADLINE_SECONDS);
            }
        }
    }
    objects
}

fn key_of(value: &Value) -> (String, String) {
    let text = |p: &str| value.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
    (text("/metadata/namespace"), text("/metadata/name"))
}

fn of_kind<K: serde::de::DeserializeOwned>(objects: &[Value], kind: &str) -> Vec<(Value, K)> {
    objects
        .iter()
        .filter(|o| o["kind"] == kind)
        .filter_map(|o| Some((o.clone(), serde_json::from_value(o.clone()).ok()?)))
        .collect()
}

fn make_current(objects: &mut Vec<Value>) {
    let mut lookup = Objects::default();
    for (_, secret) in of_kind::<Secret>(objects, "Secret") {
        lookup.add_secret(secret);
    }
    for (_, deployment) in of_kind::<DeploymentView>(objects, "Deployment") {
        lookup.add_deployment(Arc::new(deployment));
    }
    let apps = of_kind::<CAPApplication>(objects, "CAPApplication")
        .into_iter()
        .map(|(_, mut app)| {
            app.spec.rollout_on_credential_update = Some(true);
            Arc::new(app)
        })
        .collect();
    let versions: Vec<Arc<CAPApplicationVersion>> = of_kind::<CAPApplicationVersion>(objects, "CAPApplicationVersion")
        .into_iter()
        .map(|(_, v)| Arc::new(v))
        .collect();
    let tenants: Vec<Arc<CAPTenant>> =
        of_kind::<CAPTenant>(objects, "CAPTenant").into_iter().map(|(_, t)| Arc::new(t)).collect();
    let index = CapIndex::new(apps, versions, tenants);
    let plan = plan_all(&index, &lookup);
    for planned in plan.deployments {
        let secret = format!("{}-go001", planned.deployment);
        let hash = capdeck::vcap::secret_owner_hash(&planned.namespace, &planned.version, &planned.deployment);
        objects.push(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": planned.namespace, "labels": {"sme.sap.com/secret-owner-hash": hash}},
            "data": {"VCAP_SERVICES": b64(planned.payload.expose())}}));
        let env_from = json!([{"secretRef": {"name": secret, "optional": true}}]);
        for object in objects.iter_mut().filter(|o| o["kind"] == "Deployment" && key_of(o).1 == planned.deployment) {
            for list in ["containers", "initContainers"] {
                if let Some(Value::Array(containers)) = object.pointer_mut(&format!("/spec/template/spec/{list}")) {
                    for container in containers {
                        container["envFrom"] = env_from.clone();
                    }
                }
            }
        }
    }
}

/// A CAPApplicationVersion's Ready status must follow its creation; the fixture's objects in
/// an order a real server accepts (Secrets before what names them).
/// On a real server the Deployments' status is the deployment controller's (the fixture's is
/// left out), and this returns once they rolled out, with each fate armed.
pub async fn load_current(world: &World, options: &AppOptions) {
    let fated = fated(options);
    for (deployment, _) in &fated {
        world.prepare_pool(deployment).await;
    }
    let mut objects = current_application(options, &world.ns);
    if world.backend == Backend::KubeApiserver {
        for object in objects.iter_mut().filter(|o| o["kind"] == "Deployment") {
            if let Some(object) = object.as_object_mut() {
                object.remove("status");
            }
        }
    }
    world.apply_objects(objects).await;
    if world.backend == Backend::KubeApiserver {
        world.settled().await;
        for (deployment, fate) in &fated {
            world.next_pods(deployment, *fate).await;
        }
    }
}

/// Engine settings for wall-clock scenarios: a 2 s window, progress every 200 ms, a 10 s lease
/// in the world's namespace.
pub fn engine_config(world: &World, identity: &str) -> EngineConfig {
    EngineConfig {
        rollout_delay: Duration::from_secs(2),
        clock: Clock::System,
        mode: EngineMode::Lead,
        progress_interval: Duration::from_millis(200),
        lease: LeaseSettings {
            namespace: world.ns.clone(),
            name: "capdeck-engine".into(),
            // Short enough for hand-over stories, long enough that a loaded CI machine renews in time.
            duration_seconds: 10,
            grace_seconds: 3,
        },
        identity: identity.into(),
        ..EngineConfig::default()
    }
}

/// An engine in-process, scoped to one namespace (the sandbox suites' runner).
pub type Engine = RunningEngine;

/// How the real-cluster stories start the shared runner: on a world's namespace.
pub trait EngineExt {
    async fn on(world: &World, config: EngineConfig) -> RunningEngine;
}

impl EngineExt for RunningEngine {
    async fn on(world: &World, config: EngineConfig) -> RunningEngine {
        RunningEngine::start_in(world.client.clone(), Scope::Namespace(world.ns.clone()), config).await
    }
}

/// The capdeck binary with `kubeconfig`, outside any cluster.
pub fn capdeck(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_capdeck"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("NO_COLOR", "1")
        .output()
        .expect("capdeck runs")
}

pub fn text(output: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// sap-btp-service-operator's own ServiceBinding CRD: `$CAPDECK_SERVICEBINDING_CRD`, else taken from
/// its Go module by `tools/servicebinding-crd/crd.sh`. Without Go (a user's machine) the story
/// says so and falls back to the reduced, hand-written CRD; in CI (`CAPDECK_REQUIRE_REAL_CLUSTER=1`)
/// that is a failure.
pub fn servicebinding_crd() -> String {
    let from_module = std::env::var_os("CAPDECK_SERVICEBINDING_CRD").map(std::path::PathBuf::from).or_else(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/servicebinding-crd/crd.sh");
        let output = std::process::Command::new("bash").arg(script).output().ok()?;
        let path = String::from_utf8_lossy(&output.stdout).trim().to_string();
        (output.status.success() && !path.is_empty()).then(|| std::path::PathBuf::from(path))
    });
    if let Some(path) = from_module {
        return std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read the ServiceBinding CRD {}: {e}", path.display()));
    }
    let fix = "run tools/servicebinding-crd/crd.sh (needs Go) or set CAPDECK_SERVICEBINDING_CRD";
    assert!(
        std::env::var("CAPDECK_REQUIRE_REAL_CLUSTER").as_deref() != Ok("1"),
        "CAPDECK_REQUIRE_REAL_CLUSTER=1 but sap-btp-service-operator's ServiceBinding CRD is not at hand: {fix}"
    );
    eprintln!("NOTE: upstream ServiceBinding CRD not at hand ({fix}); using the reduced, hand-written one");
    include_str!("../../assets/demo/servicebinding-crd.yaml").to_string()
}

/// Install sap-btp-service-operator's CRD (idempotent: stories share a control plane) and wait
/// until the API server serves ServiceBindings.
pub async fn install_service_binding_crd(world: &World) {
    let crd: Value = capdeck::manifest::parse_documents(&servicebinding_crd(), false).expect("CRD yaml").remove(0);
    world.apply_objects(vec![crd]).await;
    let gvk = kube::api::GroupVersionKind::gvk("services.cloud.sap.com", "v1", "ServiceBinding");
    crate::world::eventually("ServiceBindings served", Duration::from_secs(60), || async {
        kube::discovery::pinned_kind(&world.client, &gvk).await.map(|_| ()).map_err(|e| e.to_string())
    })
    .await;
}

/// A ServiceBinding writing Secret `secret`, with rotation on; `old_of` makes it the old copy
/// of that binding (labelled `rotationOf`) whose credentials may be revoked `ttl` after now.
pub fn service_binding(ns: &str, name: &str, secret: &str, ttl: &str, old_of: Option<&str>) -> Value {
    let mut binding = serde_json::json!({"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"secretName": secret, "serviceInstanceName": format!("{secret}-instance"),
                 "credentialsRotationPolicy": {"enabled": true, "rotatedBindingTTL": ttl}}});
    if let Some(current) = old_of {
        binding["metadata"]["labels"] = serde_json::json!({
            "services.cloud.sap.com/rotationOf": current, "services.cloud.sap.com/stale": "old-binding-id"});
    }
    binding
}
