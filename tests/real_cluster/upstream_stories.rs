//! capdeck beside the real Go CAP Operator on one kube-apiserver: the same VCAP bytes, switching
//! from one to the other and back, both at once, and the same choice of Deployments. Each story
//! asserts exact outcomes; docs/COMPATIBILITY.md quotes them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use capdeck::api::BatchPhase;
use capdeck::engine::Role;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::common::story_world::StoryWorld as _;
use crate::control_plane::last_lines;
use crate::setup::{Engine, EngineExt as _, capdeck, engine_config, text};
use crate::stories::process::Daemon;
use crate::upstream::{SpecWrites, UpstreamWorld, application, secret, version, version_with_tenants};
use crate::vcap_corpus::{self, Shape};
use crate::world::{Fate, POOL_KEY, World, b64, eventually, node_pool};

/// The Go operator's shortest window (anything below is clamped to it).
const GO_DELAY: &str = "30s";
/// Its window plus time to list, compare and write on a loaded machine.
const GO_PASS: Duration = Duration::from_secs(120);
const LONG: Duration = Duration::from_secs(90);

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn secrets_of(ns: &str, shapes: &[Shape]) -> Vec<Value> {
    shapes.iter().map(|s| secret(ns, &s.service, &s.data)).collect()
}

/// Rotate binding Secrets the way sap-btp-service-operator does: same name, new data.
async fn rotate(world: &World, shapes: &[Shape]) {
    let api: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(world.client.clone(), &world.ns);
    for shape in shapes {
        let data: serde_json::Map<String, Value> = shape.data.iter().map(|(k, v)| (k.clone(), json!(b64(v)))).collect();
        api.patch(&shape.service, &Default::default(), &kube::api::Patch::Merge(json!({"data": data})))
            .await
            .unwrap_or_else(|e| panic!("rotate {}: {e}", shape.service));
    }
}

fn services(shapes: &[Shape]) -> Vec<(&str, &str, &str)> {
    shapes.iter().map(|s| (s.service.as_str(), s.class, s.service.as_str())).collect()
}

fn names(shapes: &[Shape], skip: &[&str]) -> Vec<String> {
    shapes.iter().map(|s| s.service.clone()).filter(|n| !skip.contains(&n.as_str())).collect()
}

/// The corpus as four applications: path B Secrets, path A Secrets, and one each for the flat
/// Secret the Go operator refuses and the one it panics on. The first two have a `srv` (CAP)
/// reading every Secret but the large one, and `big` (Additional) reading the large one with two
/// others (a VCAP Secret stays far below the API server's 1 MiB). Returns the objects and the
/// consumer Deployments.
fn corpus_objects(ns: &str, generation: u32) -> (Vec<Value>, BTreeSet<String>) {
    let b = vcap_corpus::credentials_json(generation);
    let a = vcap_corpus::with_metadata(generation);
    let flat = vec![vcap_corpus::flat(generation)];
    let panics = vec![vcap_corpus::metadata_container(generation)];
    let mut objects = Vec::new();
    let mut consumers = BTreeSet::new();
    for (app, shapes, large) in [("corpus-b", &b, "b-large"), ("corpus-a", &a, "a-large")] {
        objects.extend(secrets_of(ns, shapes));
        objects.push(application(ns, app, &services(shapes)));
        let srv = names(shapes, &[large]);
        let big = [large, shapes[0].service.as_str(), shapes[1].service.as_str()];
        let srv_refs: Vec<&str> = srv.iter().map(String::as_str).collect();
        objects.push(version(
            ns,
            app,
            &format!("{app}-v1"),
            "1.0.0",
            &[("srv", "CAP", &srv_refs), ("big", "Additional", &big)],
        ));
        consumers.insert(format!("{app}-v1-srv"));
        consumers.insert(format!("{app}-v1-big"));
    }
    objects.extend(secrets_of(ns, &flat));
    objects.push(application(ns, "corpus-flat", &services(&flat)));
    objects.push(version(ns, "corpus-flat", "corpus-flat-v1", "1.0.0", &[("srv", "CAP", &["flat-binding"])]));
    objects.extend(secrets_of(ns, &panics));
    objects.push(application(ns, "corpus-panic", &services(&panics)));
    objects.push(version(ns, "corpus-panic", "corpus-panic-v1", "1.0.0", &[("srv", "CAP", &["a-metadata-container"])]));
    (objects, consumers)
}

fn all_shapes(generation: u32) -> Vec<Shape> {
    let mut shapes = vcap_corpus::credentials_json(generation);
    shapes.extend(vcap_corpus::with_metadata(generation));
    shapes
}

/// Wait until the Go operator's startup re-check (one window after it leads) has compared every
/// Deployment in `deployments` and logged "unchanged" for each.
async fn wait_go_found_unchanged(u: &UpstreamWorld, deployments: &BTreeSet<String>) {
    eventually("the Go operator's startup re-check", GO_PASS, || async {
        let unchanged: BTreeSet<String> = u
            .logged("VCAP_SERVICES content unchanged, skipping rollout")
            .iter()
            .filter_map(|e| e["deployment"].as_str().map(str::to_string))
            .collect();
        if deployments.is_subset(&unchanged) {
            Ok(())
        } else {
            Err(format!("unchanged so far: {unchanged:?}; log tail: {}", last_lines(&u.operator_log(), 6)))
        }
    })
    .await;
}

/// An in-process capdeck engine on the upstream world's namespace, leading.
async fn capdeck_engine(world: &World, identity: &str) -> Engine {
    let engine = Engine::on(world, engine_config(world, identity)).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    engine
}

/// The corpus: the Go operator writes every VCAP Secret, `capdeck plan` finds each one current;
/// a rotation the Go operator rolls gives exactly the bytes `capdeck plan` predicted; a rotation
/// capdeck's engine rolls gives bytes the Go operator then finds unchanged.
pub async fn vcap_corpus_is_byte_identical() {
    let u = UpstreamWorld::start("vcap-corpus").await;
    let w = &u.world;
    let (objects, consumer_names) = corpus_objects(&u.world.ns, 1);
    // The shared shapes, the flat one and the one the Go operator panics on.
    let shape_count = all_shapes(1).len() + 2;
    assert!(shape_count >= 30, "the corpus has {shape_count} shapes");
    w.apply_objects(objects).await;
    let workloads = w.workloads();
    u.start_operator(GO_DELAY);
    u.wait_operator_leads().await;
    u.wait_versions_ready(&["corpus-a-v1", "corpus-b-v1"]).await;

    // The flat Secret: the Go operator refuses it (no `credentials` key) and never creates the
    // Deployment; capdeck reads it. Listed in docs/COMPATIBILITY.md.
    // A JSON container among the metadata properties: the Go operator's VCAP builder panics
    // (recovered; the version stays in Error) and never creates the Deployment.
    for (cav, says) in
        [("corpus-flat-v1", "could not find credentials"), ("corpus-panic-v1", "panic: interface conversion")]
    {
        eventually(&format!("{cav} refused by the Go operator"), LONG, || async {
            let found = w.get("sme.sap.com/v1alpha1", "CAPApplicationVersion", cav).await.unwrap_or_default();
            let message = found.pointer("/status/conditions/0/message").and_then(Value::as_str).unwrap_or_default();
            if message.contains(says) { Ok(()) } else { Err(format!("{:?}", found.get("status"))) }
        })
        .await;
    }

    // 1. What the Go operator wrote, capdeck finds current, byte for byte.
    let go_written = u.vcap_payloads().await;
    let (plan, problems) = u.plan();
    // Only the two refused applications, whose versions never became Ready.
    let refused: BTreeSet<&str> = problems.iter().filter_map(|p| p["application"].as_str()).collect();
    assert_eq!(refused, BTreeSet::from(["corpus-flat", "corpus-panic"]), "{problems:#?}");
    assert!(
        problems.iter().all(|p| p["message"].as_str().is_some_and(|m| m.starts_with("no version in use"))),
        "{problems:#?}"
    );
    for deployment in &consumer_names {
        let (action, sha) = plan.get(deployment).unwrap_or_else(|| panic!("{deployment} not planned: {plan:?}"));
        assert_eq!(action, "Unchanged", "{deployment}: capdeck would restart what the Go operator just wrote");
        assert_eq!(sha, &sha256_hex(&go_written[deployment]), "{deployment}");
        assert!(!go_written[deployment].is_empty(), "{deployment} has no VCAP_SERVICES");
    }
    for refused in ["corpus-flat-v1-srv", "corpus-panic-v1-srv"] {
        assert!(!plan.contains_key(refused), "{plan:?}");
    }
    eprintln!(
        "vcap corpus: {} shapes, {} Deployments written by the Go operator, all unchanged for capdeck",
        shape_count,
        consumer_names.len()
    );

    // 2. A rotation the Go operator rolls: capdeck predicts its bytes before it writes them.
    let writes = SpecWrites::watch(w.client.clone(), &w.ns).await;
    rotate(w, &all_shapes(2)).await;
    let (predicted, _) = u.plan();
    let restarts: BTreeSet<String> = consumer_names.iter().filter(|d| predicted[*d].0 == "Restart").cloned().collect();
    assert_eq!(restarts, consumer_names, "every consumer reads a rotated credential");
    eventually("the Go operator rolled every consumer", GO_PASS, || async {
        let rolled: BTreeSet<String> = writes.per_deployment().into_keys().collect();
        if rolled.is_superset(&restarts) {
            Ok(())
        } else {
            Err(format!("{rolled:?}; {}", last_lines(&u.operator_log(), 6)))
        }
    })
    .await;
    let after = u.vcap_payloads().await;
    for deployment in &restarts {
        assert_eq!(
            predicted[deployment].1,
            sha256_hex(&after[deployment]),
            "{deployment}: the Go operator wrote other bytes than capdeck computed"
        );
    }
    for write in writes.all() {
        assert_eq!(write.manager, "controller", "{write:?}");
    }
    assert_eq!(writes.per_deployment().values().copied().collect::<Vec<_>>(), vec![1; restarts.len()]);

    // 3. The same rotation rolled by capdeck's engine: the Go operator, started again, finds
    // every VCAP Secret capdeck wrote unchanged and writes nothing.
    u.stop_operator();
    writes.reset();
    let engine = capdeck_engine(w, "capdeck-corpus").await;
    rotate(w, &all_shapes(3)).await;
    for app in ["corpus-a", "corpus-b"] {
        w.wait_phase(app, BatchPhase::Succeeded, LONG).await;
    }
    engine.stop().await;
    let by_capdeck = writes.all();
    assert_eq!(by_capdeck.len(), consumer_names.len(), "{by_capdeck:?}");
    assert!(by_capdeck.iter().all(|w| w.manager == "capdeck-engine"), "{by_capdeck:?}");
    writes.reset();
    u.start_operator(GO_DELAY);
    u.wait_operator_leads().await;
    wait_go_found_unchanged(&u, &consumer_names).await;
    assert!(writes.all().is_empty(), "the Go operator restarted what capdeck rolled: {:?}", writes.all());
    assert!(u.logged("Deployment updated for credential rollout").is_empty());
    let (plan, _) = u.plan();
    assert!(consumer_names.iter().all(|d| plan[d].0 == "Unchanged"), "{plan:?}");
    workloads.stop().await;
}

/// The Go operator leads with `rolloutOnCredentialUpdate`; it is stopped and `capdeck --daemon`
/// takes over (no write at start, one restart per consumer of a rotated Secret); then capdeck is
/// stopped and the Go operator starts again (no restart at all).
pub async fn switch_over_both_ways() {
    let u = UpstreamWorld::start("switch-over").await;
    let w = &u.world;
    let shapes = vcap_corpus::credentials_json(1);
    let uaa = renamed(&shapes[0], "uaa");
    let db = renamed(&shapes[5], "db");
    w.apply_objects(secrets_of(&w.ns, &[uaa.clone(), db.clone()])).await;
    w.apply_objects(vec![
        application(&w.ns, "bookshop", &[("uaa", uaa.class, "uaa"), ("db", db.class, "db")]),
        version(
            &w.ns,
            "bookshop",
            "bookshop-v1",
            "1.0.0",
            &[("srv", "CAP", &["uaa", "db"]), ("router", "Additional", &["uaa"]), ("reports", "Additional", &["db"])],
        ),
    ])
    .await;
    let workloads = w.workloads();
    u.start_operator(GO_DELAY);
    u.wait_operator_leads().await;
    u.wait_versions_ready(&["bookshop-v1"]).await;
    let all: BTreeSet<String> =
        ["bookshop-v1-srv", "bookshop-v1-router", "bookshop-v1-reports"].map(String::from).into();

    // Go → capdeck: the daemon starts on what the Go operator wrote and writes nothing.
    u.stop_operator();
    let writes = SpecWrites::watch(w.client.clone(), &w.ns).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut daemon = Daemon::start(&w.admin_kubeconfig, &w.ns, dir.path(), &["--rollout-delay", "2s"]);
    eventually("the daemon leads and has made its start-up pass", LONG, || async {
        match crate::stories::process::http_get(&format!("{}/readyz", daemon.health)).await {
            Some((200, _)) => Ok(()),
            other => Err(format!("{other:?}; {}", last_lines(&daemon.log(), 6))),
        }
    })
    .await;
    let (plan, _) = u.plan();
    assert!(all.iter().all(|d| plan[d].0 == "Unchanged"), "{plan:?}");
    // The daemon's start-up re-check has run (ready); give it 5 s without a write to act wrongly, then count.
    writes.settle(Duration::from_secs(5), LONG).await;
    assert!(writes.all().is_empty(), "the daemon wrote at start: {:?}", writes.all());

    // A rotation of the uaa Secret: srv and router restart once each, reports (db only) not.
    let uaa_rotated = vcap_corpus::credentials_json(2).remove(0);
    rotate(w, &[renamed(&uaa_rotated, "uaa")]).await;
    w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    let per = writes.per_deployment();
    assert_eq!(per, BTreeMap::from([("bookshop-v1-router".to_string(), 1), ("bookshop-v1-srv".to_string(), 1)]));
    assert!(writes.all().iter().all(|w| w.manager == "capdeck-engine"), "{:?}", writes.all());
    let status = daemon.terminate();
    assert!(status.success(), "daemon exit {status:?}: {}", last_lines(&daemon.log(), 6));

    // capdeck → Go: its startup re-check finds all three unchanged and restarts nothing.
    writes.reset();
    u.start_operator(GO_DELAY);
    u.wait_operator_leads().await;
    wait_go_found_unchanged(&u, &all).await;
    assert!(writes.all().is_empty(), "the Go operator restarted after capdeck: {:?}", writes.all());
    workloads.stop().await;
}

/// The same data under the Secret name `name`.
fn renamed(shape: &Shape, name: &str) -> Shape {
    Shape { service: name.to_string(), class: shape.class, data: shape.data.clone() }
}

/// Both programs manage the same application: measured, and said by `capdeck doctor` (FAIL).
pub async fn both_running_on_one_application() {
    let u = UpstreamWorld::start("both-running").await;
    let w = &u.world;
    let uaa = renamed(&vcap_corpus::credentials_json(1).remove(0), "uaa");
    w.apply_objects(secrets_of(&w.ns, std::slice::from_ref(&uaa))).await;
    w.apply_objects(vec![
        application(&w.ns, "bookshop", &[("uaa", uaa.class, "uaa")]),
        version(
            &w.ns,
            "bookshop",
            "bookshop-v1",
            "1.0.0",
            &[("srv", "CAP", &["uaa"]), ("router", "Additional", &["uaa"])],
        ),
    ])
    .await;
    let workloads = w.workloads();
    // Below its minimum: the Go operator says so and uses 30 s (capdeck takes any window).
    u.start_operator("5s");
    u.wait_operator_leads().await;
    // Read when its rollout manager starts, after it leads.
    eventually("the Go operator's ROLLOUT_DELAY clamp", LONG, || async {
        let clamped = u.logged("ROLLOUT_DELAY below minimum; using minimum");
        if clamped.len() == 1 { Ok(()) } else { Err(last_lines(&u.operator_log(), 6)) }
    })
    .await;
    let clamped = u.logged("ROLLOUT_DELAY below minimum; using minimum");
    // zap writes durations in seconds.
    assert_eq!((clamped[0]["value"].as_f64(), clamped[0]["minimum"].as_f64()), (Some(5.0), Some(30.0)), "{clamped:?}");
    u.wait_versions_ready(&["bookshop-v1"]).await;
    let engine = capdeck_engine(w, "capdeck-beside-go").await;

    // doctor sees both: FAIL, exit 1, naming the application and the fix.
    let output = capdeck(
        &w.admin_kubeconfig,
        &["doctor", "-n", &w.ns, "--lease-namespace", &w.ns, "--lease-name", "capdeck-engine"],
    );
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    let line = stdout.lines().find(|l| l.contains("go operator")).unwrap_or_default();
    assert!(line.contains("FAIL") && line.contains(&format!("{}/bookshop", w.ns)), "{stdout}");
    assert!(line.contains("rolloutOnCredentialUpdate"), "{line}");
    // The Go operator's own CRDs (its schemas, not capdeck's copies) are fine as they are: never
    // "differs", never advice to apply capdeck's copies over them.
    let crd = |name: &str| stdout.lines().find(|l| l.starts_with("crd") && l.contains(name)).unwrap_or_default();
    assert!(crd("capapplications.sme.sap.com").contains("serving v1alpha1, which capdeck reads"), "{stdout}");
    assert!(!stdout.contains("differs from this binary's"), "{stdout}");

    // The console (the real runtime, read-only, observing) warns in its header.
    let mut console = crate::common::console::Console::start_in(
        &w.admin_kubeconfig,
        &w.ns,
        true,
        capdeck::engine::config::EngineMode::Observe,
    )
    .await;
    let screen = console.shows("⚠ Go CAP Operator also rolls 1 app(s): capdeck doctor").await;
    assert!(screen.lines().next().is_some_and(|header| header.contains("Go CAP Operator")), "{screen}");
    console.quit().await;

    // One rotation, both acting: capdeck (2 s window) rolls first; the Go operator (30 s)
    // then finds capdeck's VCAP Secrets, which carry its owner label, unchanged.
    let writes = SpecWrites::watch(w.client.clone(), &w.ns).await;
    rotate(w, &[renamed(&vcap_corpus::credentials_json(2).remove(0), "uaa")]).await;
    w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    let both: BTreeSet<String> = ["bookshop-v1-srv", "bookshop-v1-router"].map(String::from).into();
    wait_go_found_unchanged(&u, &both).await;
    let managers: Vec<(String, String)> = writes.all().into_iter().map(|w| (w.deployment, w.manager)).collect();
    eprintln!("both running, one rotation: spec writes {managers:?}");
    assert_eq!(writes.all().len(), 2, "{managers:?}");
    assert!(managers.iter().all(|(_, m)| m == "capdeck-engine"), "{managers:?}");
    engine.stop().await;
    workloads.stop().await;
}

/// For one rotation, which Deployments each program restarts: the latest Ready version, a
/// version a Ready tenant still uses, a version only an upgrading tenant uses, and a Deployment
/// that does not read the rotated Secret. The tenants are the Go operator's own: provisioned
/// through its tenant operations (the real job controller completes their Jobs) and one upgrade left
/// running (its Job's Pod never becomes ready).
pub async fn same_choices_for_one_rotation() {
    let u = UpstreamWorld::start("same-choices").await;
    let w = &u.world;
    let uaa = renamed(&vcap_corpus::credentials_json(1).remove(0), "uaa");
    let db = renamed(&vcap_corpus::credentials_json(1).remove(5), "db");
    w.apply_objects(secrets_of(&w.ns, &[uaa.clone(), db.clone()])).await;
    // A Router: tenant networking needs one (without it the Go operator's tenant reconcile
    // dereferences a nil port and panics).
    let workloads: &[(&str, &str, &[&str])] =
        &[("srv", "CAP", &["uaa", "db"]), ("router", "Router", &["uaa"]), ("reports", "Additional", &["db"])];
    let mut objects = vec![application(&w.ns, "shop", &[("uaa", uaa.class, "uaa"), ("db", db.class, "db")])];
    for (n, semver) in [(1, "1.0.0"), (2, "2.0.0"), (3, "3.0.0")] {
        objects.push(version_with_tenants(&w.ns, "shop", &format!("shop-v{n}"), semver, workloads, &["uaa", "db"]));
    }
    // The upgrade to 3.0.0 is to hang: v3's tenant operation Jobs run on a Node whose Pods never
    // become ready (the real job controller never completes them).
    let upgrade_pool = node_pool(&w.ns, "shop-v3-mtx");
    let v3_jobs = objects[3].pointer_mut("/spec/workloads").and_then(Value::as_array_mut).expect("v3 workloads");
    for job in v3_jobs.iter_mut().filter(|w| w["name"] == "mtx") {
        job["jobDefinition"]["nodeSelector"] = json!({POOL_KEY: upgrade_pool});
        job["jobDefinition"]["tolerations"] =
            json!([{"key": POOL_KEY, "operator": "Equal", "value": upgrade_pool, "effect": "NoSchedule"}]);
    }
    w.add_pool_node(&upgrade_pool, Fate::NeverReady).await;
    w.apply_objects(objects).await;
    let workloads = w.workloads();
    u.start_operator(GO_DELAY);
    u.wait_operator_leads().await;
    u.wait_versions_ready(&["shop-v1", "shop-v2", "shop-v3"]).await;
    let hash = app_identifier_hash("shop-sub", "shop");
    // As the subscription server creates a tenant: its subscription context in a Secret, named
    // in an annotation the provisioning Job reads.
    let context: BTreeMap<String, String> =
        BTreeMap::from([("subscriptionContext".into(), r#"{"subscribedSubdomain":"t"}"#.into())]);
    w.apply_objects(vec![secret(&w.ns, "subscription-context", &context)]).await;
    let tenant = |name: &str, semver: &str, strategy: &str| {
        json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenant",
               "metadata": {"name": name, "namespace": w.ns, "labels": {"sme.sap.com/app-identifier-hash": hash},
                            "annotations": {"sme.sap.com/subscription-context-secret": "subscription-context"}},
               "spec": {"capApplicationInstance": "shop", "subDomain": name, "tenantId": format!("{name}-id"),
                        "version": semver, "versionUpgradeStrategy": strategy}})
    };
    w.apply_objects(vec![tenant("stays-on-v2", "2.0.0", "never"), tenant("upgrades-from-v1", "1.0.0", "never")]).await;
    wait_tenant(&u, "stays-on-v2", "Ready", "shop-v2").await;
    wait_tenant(&u, "upgrades-from-v1", "Ready", "shop-v1").await;
    // The upgrade to 3.0.0 starts; its Job never completes, so the tenant stays Upgrading on v1.
    w.apply_objects(vec![tenant("upgrades-from-v1", "3.0.0", "always")]).await;
    wait_tenant(&u, "upgrades-from-v1", "Upgrading", "shop-v1").await;

    let writes = SpecWrites::watch(w.client.clone(), &w.ns).await;
    rotate(w, &[renamed(&vcap_corpus::credentials_json(2).remove(0), "uaa")]).await;
    let (plan, problems) = u.plan();
    assert!(problems.is_empty(), "{problems:#?}");
    let capdeck_restarts: BTreeSet<String> =
        plan.iter().filter(|(_, (action, _))| action == "Restart").map(|(d, _)| d.clone()).collect();
    eventually("the Go operator's rollout pass", GO_PASS, || async {
        let passes = u.logged("processing credential rotation").len();
        let rolled = u.logged("Deployment updated for credential rollout").len();
        if passes > 0 && rolled > 0 { Ok(()) } else { Err(last_lines(&u.operator_log(), 6)) }
    })
    .await;
    writes.settle(Duration::from_secs(10), GO_PASS).await;
    let go_restarts: BTreeSet<String> = writes.per_deployment().into_keys().collect();
    let go_said: Vec<String> = u
        .logged("VCAP_SERVICES content unchanged, skipping rollout")
        .iter()
        .chain(u.logged("Deployment updated for credential rollout").iter())
        .map(|e| format!("{} {}", e["msg"], e["deployment"]))
        .collect();
    eprintln!(
        "same choices: the Go operator restarted {go_restarts:?} ({go_said:?}); capdeck plans {capdeck_restarts:?}"
    );
    // Measured: both restart srv and router of the latest Ready version and of the version the
    // Ready tenant uses; neither restarts `reports` (it does not read uaa).
    let both: BTreeSet<String> =
        ["shop-v3-srv", "shop-v3-router", "shop-v2-srv", "shop-v2-router"].map(String::from).into();
    assert_eq!(go_restarts, both, "the Go operator");
    // The one difference: capdeck also restarts the version the upgrading tenant still runs on
    // (its Pods serve that tenant until the upgrade ends); the Go operator leaves it on the old
    // credentials.
    let mut capdeck_expected = both.clone();
    capdeck_expected.extend(["shop-v1-srv".to_string(), "shop-v1-router".to_string()]);
    assert_eq!(capdeck_restarts, capdeck_expected, "capdeck");
    workloads.stop().await;
}

async fn wait_tenant(u: &UpstreamWorld, name: &str, state: &str, current: &str) {
    eventually(&format!("tenant {name} {state} on {current}"), GO_PASS, || async {
        let tenant = u.world.get("sme.sap.com/v1alpha1", "CAPTenant", name).await.unwrap_or_default();
        let field = |p: &str| tenant.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
        if field("/status/state") == state && field("/status/currentCAPApplicationVersionInstance") == current {
            Ok(())
        } else {
            Err(format!("{:?}; {}", tenant.get("status"), last_lines(&u.operator_log(), 6)))
        }
    })
    .await;
}

/// `sha1(providerSubaccountId + btpAppName)`, the label the Go operator selects tenants by.
fn app_identifier_hash(subaccount: &str, app: &str) -> String {
    capdeck::vcap::sha1_concat(&[subaccount, app])
}
