//! Hostile or odd data from someone with narrow rights (docs/RELIABILITY.md): one object never
//! stops the engine or a list, no response body reaches a log, no rotation is lost across a
//! failover, and only the Deployments a version owns are ever written.

use std::time::Duration;

use capdeck::api::BatchPhase;
use capdeck::api::rotation_batch::DeploymentAction;
use capdeck::engine::Role;
use kube::ResourceExt as _;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::common::fixtures::AppOptions;
use crate::common::http_get;
use crate::common::story_world::StoryWorld as _;
use crate::control_plane::Profile;
use crate::setup::{Engine, EngineExt as _, capdeck, engine_config, install_service_binding_crd, load_current, text};
use crate::stories::process::Daemon;
use crate::world::{Backend, World, b64, eventually};

const LONG: Duration = Duration::from_secs(90);
/// A credential in the hostile namespace: no log line, output or status may ever hold it.
const CANARY: &str = "hunter2-canary-7f3a";
/// kube-apiserver accepts it; k8s-openapi's time type cannot hold it.
const YEAR_9999: &str = "9999-12-31T23:59:59Z";
const YEAR_1: &str = "0001-01-01T00:00:00Z";

/// `kubectl ARGS` as the admin (in `namespace`), with `input` on stdin; its stdout.
fn kubectl(world: &World, namespace: Option<&str>, args: &[&str], input: Option<&str>) -> String {
    try_kubectl(world, namespace, args, input).unwrap_or_else(|stderr| panic!("kubectl {args:?}: {stderr}"))
}

/// [`kubectl`], its stderr when it fails.
fn try_kubectl(world: &World, namespace: Option<&str>, args: &[&str], input: Option<&str>) -> Result<String, String> {
    let mut command = world.plane().kubectl();
    command.env("KUBECONFIG", &world.admin_kubeconfig).args(args);
    if let Some(namespace) = namespace {
        command.args(["-n", namespace]);
    }
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl");
    if let Some(input) = input {
        use std::io::Write as _;
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write");
    }
    drop(child.stdin.take());
    let output = child.wait_with_output().expect("kubectl");
    let (stdout, stderr) = text(&output);
    if output.status.success() { Ok(stdout) } else { Err(stderr) }
}

/// Re-write an object (as read, with its managedFields) with a record of an edit dated year
/// 9999, as `kubectl replace` of an edited object does (kubectl is the client here that holds
/// such a time: k8s-openapi's cannot).
fn far_managed_fields(world: &World, resource: &str, namespace: &str, name: &str) {
    // The deployment controller writes a Deployment's status between the read and the replace
    // now and then (409): read again and retry, as a person would.
    let mut attempts = 0;
    loop {
        let read =
            kubectl(world, Some(namespace), &["get", resource, name, "-o", "json", "--show-managed-fields"], None);
        let mut object: Value = serde_json::from_str(&read).expect("json");
        let api_version = object["apiVersion"].clone();
        object["metadata"]["labels"]["hostile-edit"] = json!("yes");
        let Some(Value::Array(fields)) = object.pointer_mut("/metadata/managedFields") else {
            panic!("{resource} {name} has no managedFields: {read}")
        };
        for field in fields.iter_mut() {
            field["time"] = json!(YEAR_9999);
        }
        fields.push(json!({"manager": "mallory", "operation": "Update", "apiVersion": api_version, "time": YEAR_9999,
                           "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:hostile-edit": {}}}}}));
        match try_kubectl(world, Some(namespace), &["replace", "-f", "-"], Some(&object.to_string())) {
            Ok(_) => break,
            Err(stderr) if stderr.contains("Conflict") && attempts < 5 => attempts += 1,
            Err(stderr) => panic!("kubectl replace {resource} {name}: {stderr}"),
        }
    }
    let times = ["get", resource, name, "-o", "jsonpath={.metadata.managedFields[*].time}", "--show-managed-fields"];
    let again = kubectl(world, Some(namespace), &times, None);
    assert!(again.contains("9999-12-31"), "kube-apiserver kept the time: {again}");
}

/// The Namespace `name` with a status condition dated year 9999 (its own status subresource).
fn far_namespace_condition(world: &World, name: &str) {
    let read = kubectl(world, None, &["get", "namespace", name, "-o", "json"], None);
    let mut object: Value = serde_json::from_str(&read).expect("json");
    object["status"]["conditions"] = json!([{"type": "NamespaceDeletionDiscoveryFailure", "status": "False",
                                              "reason": "Far", "message": "", "lastTransitionTime": YEAR_9999}]);
    kubectl(world, None, &["replace", "--subresource=status", "-f", "-"], Some(&object.to_string()));
}

/// One object of every kind capdeck lists, in namespace `other`, each holding a value past
/// capdeck's range: times in years 9999 and 0001, integers past i32 where the schema lets them.
fn hostile_objects(other: &str) -> Vec<Value> {
    let far = json!([{"type": "Ready", "status": "True", "reason": "Far", "message": "", "lastTransitionTime": YEAR_9999},
                     {"type": "Old", "status": "True", "reason": "Old", "message": "", "lastTransitionTime": YEAR_1}]);
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hostile", "namespace": other,
               "labels": {"sme.sap.com/secret-owner-hash": "x"}},
               "data": {"VCAP_SERVICES": b64(&format!(r#"{{"xsuaa":[{{"credentials":{{"password":"{CANARY}"}}}}]}}"#)),
                        "password": b64(CANARY)}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hostile", "namespace": other},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "hostile"}},
                        "template": {"metadata": {"labels": {"app": "hostile"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
               "status": {"observedGeneration": 1, "conditions": [{"type": "Progressing", "status": "True",
                          "lastUpdateTime": YEAR_9999, "lastTransitionTime": YEAR_1}]}}),
        json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication", "metadata": {"name": "hostile", "namespace": other},
               "spec": {"btpAppName": "hostile", "providerSubaccountId": "p", "rolloutOnCredentialUpdate": true,
                        "btp": {"services": [{"name": "uaa", "class": "xsuaa", "secret": "hostile"}]}},
               "status": {"state": "Consistent", "lastFullReconciliationTime": YEAR_9999, "conditions": far}}),
        json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion", "metadata": {"name": "hostile-v1", "namespace": other},
               "spec": {"capApplicationInstance": "hostile", "version": "1.0.0", "workloads": [
                   {"name": "srv", "consumedBTPServices": ["uaa"], "deploymentDefinition": {"type": "CAP", "image": "i", "replicas": 1}}]},
               "status": {"state": "Ready", "conditions": far}}),
        json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenant", "metadata": {"name": "hostile-t", "namespace": other},
               "spec": {"capApplicationInstance": "hostile", "subDomain": "h", "tenantId": "h"},
               "status": {"state": "Ready", "currentCAPApplicationVersionInstance": "hostile-v1", "conditions": far}}),
        json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenantOperation", "metadata": {"name": "hostile-op", "namespace": other},
               "spec": {"operation": "upgrade", "subDomain": "h", "tenantId": "h", "capApplicationVersionInstance": "hostile-v1",
                        "steps": [{"name": "mtx", "type": "TenantOperation"}]},
               "status": {"state": "Processing", "currentStep": 1, "conditions": far}}),
        json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch", "metadata": {"name": "hostile", "namespace": other},
               "spec": {"application": "hostile", "windowEnd": "2199-12-31T23:59:59Z"},
               "status": {"phase": "Collecting", "completedAt": YEAR_9999, "waitingUntil": YEAR_1, "conditions": far}}),
        json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze", "metadata": {"name": "namespace", "namespace": other},
               "spec": {"scope": "Namespace", "frozen": {"by": "mallory", "at": YEAR_1, "reason": "mine"}, "until": YEAR_9999}}),
        // A Lease that says a capdeck engine leads everything, renewed in year 9999, for 68 years.
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "hostile", "namespace": other,
               "labels": {"capdeck.dev/engine": "true"},
               "annotations": {"capdeck.dev/scope": "*", "capdeck.dev/leading": "mallory"}},
               "spec": {"holderIdentity": "mallory", "leaseDurationSeconds": i32::MAX,
                        "acquireTime": "9999-12-31T23:59:59.000000Z", "renewTime": "9999-12-31T23:59:59.000000Z"}}),
        json!({"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding", "metadata": {"name": "hostile", "namespace": other},
               "spec": {"secretName": "hostile", "serviceInstanceName": "h",
                        "credentialsRotationPolicy": {"enabled": true, "rotatedBindingTTL": "1h", "rotationFrequency": "1h"}},
               "status": {"lastCredentialsRotationTime": YEAR_9999, "conditions": [{"type": "Ready", "status": "True",
                          "reason": "Provisioned", "message": "", "lastTransitionTime": YEAR_9999}]}}),
    ]
}

/// The repro of a daemon stopped cluster-wide by one object, on every kind at once: the engine
/// leads and rolls a rotation elsewhere, every list command exits 0 and shows the objects (a
/// freeze until year 9999 as `forever`), doctor finds every object decodable, and no line of the
/// daemon's log at TRACE, nor any command's output, holds the hostile namespace's credential.
pub async fn hostile_values_in_every_kind_stop_nothing_and_leak_nothing(backend: Backend) {
    let world = World::dedicated(backend, "hostile-values", Profile::Standard).await;
    install_service_binding_crd(&world).await;
    load_current(&world, &AppOptions::default()).await;
    let workloads = world.workloads();
    let other = format!("{}-other", world.ns);
    world.apply_objects(hostile_objects(&other)).await;
    for (resource, name) in [
        ("secret", "hostile"),
        ("deployment", "hostile"),
        ("capapplication", "hostile"),
        ("capapplicationversion", "hostile-v1"),
        ("captenant", "hostile-t"),
        ("captenantoperation", "hostile-op"),
        ("rotationbatch", "hostile"),
        ("freeze", "namespace"),
        ("lease", "hostile"),
        ("servicebinding", "hostile"),
    ] {
        far_managed_fields(&world, resource, &other, name);
    }
    far_namespace_condition(&world, &other);
    // The CRD refuses what no batch can mean: a window that ends in year 9999.
    let refused = world
        .plane()
        .kubectl()
        .env("KUBECONFIG", &world.admin_kubeconfig)
        .args(["patch", "rotationbatch", "hostile", "-n", &other, "--type", "merge", "-p"])
        .arg(json!({"spec": {"windowEnd": YEAR_9999}}).to_string())
        .output()
        .expect("kubectl runs");
    let (_, why) = text(&refused);
    assert!(!refused.status.success() && why.contains("must be before the year 2200"), "{why}");

    let dir = tempfile::tempdir().expect("dir");
    let port = crate::control_plane::free_port().expect("port");
    let args: Vec<String> = ["--daemon", "--health-addr", &format!("127.0.0.1:{port}"), "-A"]
        .iter()
        .map(|s| s.to_string())
        .chain(["--lease-namespace".into(), world.ns.clone(), "--rollout-delay".into(), "30s".into()])
        .collect();
    let mut daemon = Daemon::spawn(&world.admin_kubeconfig, &args, &[("RUST_LOG", "trace")], port, dir.path());
    eventually("the daemon leads all namespaces", LONG, || async {
        match http_get(&format!("{}/readyz", daemon.health)).await {
            Some((200, body)) if body.contains("leader") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    world.rotate_secret("bookshop-uaa").await;
    let batch = world.wait_phase("bookshop", BatchPhase::Collecting, LONG).await;
    let target = format!("{}/{}", world.ns, batch.name_any());
    let output = capdeck(&world.admin_kubeconfig, &["force", &target, "--approve", "--reason", "CHG-9"]);
    assert!(output.status.success(), "{:?}", text(&output));
    world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;

    let mut printed = String::new();
    let mut run = |args: &[&str]| {
        let output = capdeck(&world.admin_kubeconfig, args);
        let (stdout, stderr) = text(&output);
        printed.push_str(&format!("$ capdeck {}\n{stdout}{stderr}\n", args.join(" ")));
        (output.status.success(), stdout)
    };
    for args in [["tenants", "-A"], ["credentials", "-A"], ["fleet", "-o"], ["batches", "-A"]] {
        let args: Vec<&str> = if args[1] == "-o" { vec![args[0]] } else { args.to_vec() };
        let (ok, _) = run(&args);
        assert!(ok, "capdeck {args:?} exits 0");
    }
    let (ok, batches) = run(&["batches", "-A", "-o", "json"]);
    assert!(ok);
    let listed = crate::common::list_items(batches.as_bytes());
    assert!(listed.iter().any(|b| b["namespace"] == json!(other) && b["name"] == json!("hostile")), "{listed:?}");
    let (ok, freezes) = run(&["freezes", "-A"]);
    assert!(ok && freezes.contains("forever"), "the freeze until year 9999 is shown as forever: {freezes}");
    // doctor exits 1 for what it finds about this test cluster, never for a hostile object.
    let (_, doctor) = run(&["doctor", "-A", "-o", "json"]);
    let doctor: Value = serde_json::from_str(&doctor).expect("json");
    let objects: Vec<&Value> =
        doctor["findings"].as_array().into_iter().flatten().filter(|f| f["check"] == json!("objects")).collect();
    assert!(!objects.is_empty() && objects.iter().all(|f| f["status"] == json!("ok")), "{doctor}");
    eprintln!("{printed}");
    let status = daemon.terminate();
    assert!(status.success(), "exit {status:?}");
    let log = daemon.log();
    assert!(log.lines().count() > 20, "the daemon logged at TRACE: {log}");
    for (what, text) in [("the daemon's log at TRACE", &log), ("the commands' output", &printed)] {
        assert!(!text.contains(CANARY) && !text.contains(&b64(CANARY)), "{what} holds the credential");
        assert!(!text.contains("SecretList"), "{what} holds a response body");
    }
    workloads.stop().await;
}

/// No rotation is lost across a failover: a manual batch for uaa waits; the leader is killed;
/// db rotates while only the standby watches (it sees it, and does not lead); the standby takes
/// the Lease and finds what the Deployments run behind the binding Secrets; once what waits is
/// approved, every Deployment runs the newest credentials of both Secrets.
pub async fn a_rotation_seen_by_a_standby_is_batched_when_it_takes_over(backend: Backend) {
    let world = World::new(backend, "standby-rotation").await;
    let options =
        AppOptions { manual: true, deployments: &[("srv", &["uaa"]), ("worker", &["db"])], ..AppOptions::default() };
    load_current(&world, &options).await;
    let workloads = world.workloads();
    let leader = Engine::on(&world, engine_config(&world, "engine-a")).await;
    leader.wait_for_role_within(Role::Leader, LONG).await;
    let standby = Engine::on(&world, engine_config(&world, "engine-b")).await;
    standby.wait_for_role_within(Role::Observer, LONG).await;
    world.rotate_secret("bookshop-uaa").await;
    world.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    leader.kill();
    world.rotate_secret("bookshop-db").await;
    standby.wait_for_role_within(Role::Leader, LONG).await;
    let before = [world.vcap_of("bookshop-v1-srv").await, world.vcap_of("bookshop-v1-worker").await];
    eventually("both Deployments on the newest credentials", Duration::from_secs(120), || async {
        for batch in world.batches("bookshop").await.iter().filter(|b| b.phase() == BatchPhase::AwaitingApproval) {
            let target = format!("{}/{}", world.ns, batch.name_any());
            let _ = capdeck(&world.admin_kubeconfig, &["approve", &target, "--reason", "after failover"]);
        }
        let now = [world.vcap_of("bookshop-v1-srv").await, world.vcap_of("bookshop-v1-worker").await];
        let open = world.batches("bookshop").await.iter().any(|b| !b.is_terminal());
        if now[0] != before[0] && now[1] != before[1] && !open {
            Ok(())
        } else {
            Err(format!("srv {}, worker {}, open batches: {open}", now[0], now[1]))
        }
    })
    .await;
    let worker = world.vcap_payload(&world.vcap_of("bookshop-v1-worker").await).await;
    assert!(worker.contains("rotated-"), "worker runs the rotated db password: {worker}");
    standby.stop().await;
    workloads.stop().await;
}

/// Someone who may edit CAPApplicationVersions, and not Deployments, adds a workload named like
/// another team's Deployment: the rotation restarts only what the version owns. The other
/// Deployment keeps its generation and every envFrom entry; the dry run, the batch and doctor
/// name it as not owned; and an owned Deployment's other envFrom entries survive its restart.
pub async fn a_workload_added_to_a_version_never_rewrites_another_teams_deployment(backend: Backend) {
    let world = World::new(backend, "not-owned").await;
    let options = AppOptions { manual: true, ..AppOptions::default() };
    load_current(&world, &options).await;
    let workloads = world.workloads();
    let team_env = json!([{"configMapRef": {"name": "payments-config"}}, {"secretRef": {"name": "payments-db"}}]);
    world
        .apply_objects(vec![json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "bookshop-v1-payments", "namespace": world.ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "payments"}},
                     "template": {"metadata": {"labels": {"app": "payments"}},
                                  "spec": {"containers": [{"name": "pay", "image": "i", "envFrom": team_env}]}}}})])
        .await;
    // The owned srv gets entries of a person's beside the VCAP one: a ConfigMap before it, and a
    // Secret after it whose name starts like a VCAP Secret's (`<deployment>-…`) but is no VCAP
    // Secret (not labelled as one).
    world
        .apply_objects(vec![json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "bookshop-v1-srv-dbconfig", "namespace": world.ns}, "stringData": {"DB_USER": "srv"}})])
        .await;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(world.client.clone(), &world.ns);
    // Read, edit, replace; again on a conflict (the Deployment controller writes its status
    // meanwhile, on both backends), as kubectl edit would.
    for attempt in 1.. {
        let mut srv = deployments.get("bookshop-v1-srv").await.expect("srv");
        if let Some(pod) = srv.spec.as_mut().and_then(|spec| spec.template.spec.as_mut()) {
            let env_from = pod.containers[0].env_from.get_or_insert_with(Vec::new);
            env_from.insert(0, serde_json::from_value(json!({"configMapRef": {"name": "srv-extra"}})).expect("entry"));
            env_from.push(
                serde_json::from_value(json!({"secretRef": {"name": "bookshop-v1-srv-dbconfig"}})).expect("entry"),
            );
        }
        match deployments.replace("bookshop-v1-srv", &PostParams::default(), &srv).await {
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < 5 => continue,
            edited => {
                edited.expect("srv edited");
                break;
            }
        }
    }
    world
        .grant("erin", "sme.sap.com", &["capapplicationversions"], &["get", "list", "update"], &["*:deployments"])
        .await;
    let erin = crate::world::client_for(&world.kubeconfig_for("erin")).await;
    let versions: Api<DynamicObject> =
        Api::namespaced_with(erin, &world.ns, &world.resource("sme.sap.com/v1alpha1", "CAPApplicationVersion").await);
    let mut version = serde_json::to_value(versions.get("bookshop-v1").await.expect("version")).expect("json");
    if let Some(Value::Array(workloads)) = version.pointer_mut("/spec/workloads") {
        workloads.push(json!({"name": "payments", "consumedBTPServices": ["uaa"],
                              "deploymentDefinition": {"type": "Additional", "image": "i"}}));
    }
    let version: DynamicObject = serde_json::from_value(version).expect("version");
    versions.replace("bookshop-v1", &PostParams::default(), &version).await.expect("erin adds a workload");
    world.next_user();

    let payments_before = deployments.get("bookshop-v1-payments").await.expect("payments");
    let engine = Engine::on(&world, engine_config(&world, "engine-a")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    world.rotate_secret("bookshop-uaa").await;
    let batch = world.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    let target = format!("{}/{}", world.ns, batch.name_any());
    let dry = capdeck(&world.admin_kubeconfig, &["approve", &target, "--reason", "CHG-3", "--dry-run"]);
    let (stdout, stderr) = text(&dry);
    assert!(dry.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("bookshop-v1-srv") && stdout.contains("bookshop-v1-router"), "{stdout}");
    assert!(
        stdout.contains("Left alone, not owned by their CAPApplicationVersion (1):\n  bookshop-v1-payments"),
        "{stdout}"
    );
    let doctor = capdeck(&world.admin_kubeconfig, &["doctor", "-n", &world.ns]);
    let (stdout, _) = text(&doctor);
    assert!(
        stdout.contains("bookshop-v1-payments: not owned by CAPApplicationVersion bookshop-v1 (it has no controller ownerReference); left alone"),
        "{stdout}"
    );
    let approved = capdeck(&world.admin_kubeconfig, &["approve", &target, "--reason", "CHG-3"]);
    assert!(approved.status.success(), "{:?}", text(&approved));
    let done = world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    let status = done.status.expect("status");
    let payments = status.deployments.iter().find(|d| d.name == "bookshop-v1-payments").expect("named in the batch");
    assert_eq!(payments.action, DeploymentAction::NotOwned, "{payments:?}");
    assert!(status.deployments.iter().filter(|d| d.action == DeploymentAction::Restart).count() == 2, "{status:?}");
    let payments_after = deployments.get("bookshop-v1-payments").await.expect("payments");
    assert_eq!(payments_after.metadata.generation, payments_before.metadata.generation, "never written");
    assert_eq!(payments_after.spec, payments_before.spec);
    let srv = deployments.get("bookshop-v1-srv").await.expect("srv");
    let env_from = serde_json::to_value(&srv.spec.and_then(|s| s.template.spec).expect("pod").containers[0].env_from)
        .expect("json");
    assert_eq!(
        env_from[0],
        json!({"configMapRef": {"name": "srv-extra"}}),
        "the person's entry kept in place: {env_from}"
    );
    assert!(env_from[1]["secretRef"]["name"].as_str().is_some_and(|n| n != "bookshop-v1-srv-go001"), "{env_from}");
    assert_eq!(env_from[2], json!({"secretRef": {"name": "bookshop-v1-srv-dbconfig"}}), "{env_from}");
    assert_eq!(env_from.as_array().map(Vec::len), Some(3), "{env_from}");
    // Its old VCAP Secret was still recognised as one, and deleted once it rolled out.
    assert!(world.secret("bookshop-v1-srv-go001").await.is_none(), "the previous VCAP Secret is gone");
    engine.stop().await;
    workloads.stop().await;
}
