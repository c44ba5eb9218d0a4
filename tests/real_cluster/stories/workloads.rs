//! Stories on Kubernetes' own controllers: kube-controller-manager's deployment, replicaset and
//! job controllers, kube-scheduler, and kwok playing the kubelets (`control_plane::start_workloads`,
//! `tools/envtest/kwok/stages.yaml`). What capdeck does when a rollout meets real ReplicaSets,
//! surge and unavailability, a scheduler that says no, Pods that really crash-loop, and people
//! who pause or scale a Deployment. The same bodies run on the sandbox, whose simulation must
//! agree (`tests/sandbox/api/gaps.rs` lists where it does not).

use std::time::Duration;

use capdeck::actions::{BatchAction, act};
use capdeck::api::rotation_batch::DeploymentRolloutState;
use capdeck::api::{BatchPhase, RotationBatch};
use capdeck::engine::Role;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::common::fixtures::AppOptions;
use crate::common::story_world::StoryWorld as _;
use crate::setup::{Engine, EngineExt as _, engine_config, load_current};
use crate::stories::fleet::{Behaviour, accepted_events, loopback_notify, receiver};
use crate::world::{Backend, World, capdeck_rolled_out, eventually};

const LONG: Duration = Duration::from_secs(60);

/// The harness itself: a Deployment of 3 replicas comes up on the pool's Nodes, a new template
/// rolls through exactly one new ReplicaSet (the old one scaled to 0), and a Job completes.
pub async fn the_workload_plane_rolls_deployments_and_completes_jobs(backend: Backend) {
    let world = World::new(backend, "workload-plane").await;
    world
        .apply_objects(vec![
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": world.ns},
                   "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "main", "image": "i"}],
                                                  "initContainers": [{"name": "init", "image": "i"}]}}}}),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": world.ns},
                   "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "i"}]}}}}),
        ])
        .await;
    let deployments: Api<Deployment> = Api::namespaced(world.client.clone(), &world.ns);
    let available = || async { capdeck_rolled_out(&deployments.get("web").await.expect("web")) };
    eventually("web available", LONG, available).await;
    let jobs: Api<Job> = Api::namespaced(world.client.clone(), &world.ns);
    eventually("the Job complete", LONG, || async {
        let job = jobs.get("once").await.expect("job");
        job.status
            .and_then(|s| s.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Complete" && c.status == "True"))
    })
    .await;
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "i", "env": [{"name": "X", "value": "1"}]}]}}}});
    deployments.patch("web", &PatchParams::default(), &Patch::Strategic(&patch)).await.expect("new template");
    eventually("web rolled", LONG, || async {
        let web = deployments.get("web").await.expect("web");
        web.metadata.generation == Some(2) && capdeck_rolled_out(&web)
    })
    .await;
    let sets = replicasets(&world, "app=web").await;
    let replicas: Vec<i32> = sets.iter().map(|rs| rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)).collect();
    assert_eq!(sets.len(), 2, "one new ReplicaSet: {replicas:?}");
    assert!(replicas.contains(&0) && replicas.contains(&3), "{replicas:?}");
}

async fn replicasets(world: &World, selector: &str) -> Vec<ReplicaSet> {
    let sets: Api<ReplicaSet> = Api::namespaced(world.client.clone(), &world.ns);
    sets.list(&ListParams::default().labels(selector)).await.expect("replicasets").items
}

/// The ReplicaSet whose Pod template is the Deployment's now (the deployment controller names
/// it by the template's hash; the sandbox by its own), and the others.
fn current_and_old(deployment: &Deployment, sets: Vec<ReplicaSet>) -> (Option<ReplicaSet>, Vec<ReplicaSet>) {
    let revision = deployment.annotations().get("deployment.kubernetes.io/revision").cloned();
    let (current, old): (Vec<ReplicaSet>, Vec<ReplicaSet>) =
        sets.into_iter().partition(|rs| rs.annotations().get("deployment.kubernetes.io/revision").cloned() == revision);
    (current.into_iter().next(), old)
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

/// A world with `options` loaded, the workload controllers and a leading engine (`configure`
/// adjusts its settings).
async fn running(
    backend: Backend,
    test: &str,
    options: &AppOptions,
    configure: impl FnOnce(&mut capdeck::engine::config::EngineConfig),
) -> (World, Engine, crate::world::Workloads) {
    let world = World::new(backend, test).await;
    load_current(&world, options).await;
    let workloads = world.workloads();
    let mut config = engine_config(&world, "engine-a");
    configure(&mut config);
    let engine = Engine::on(&world, config).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    (world, engine, workloads)
}

fn rollout_of<'a>(
    batch: &'a RotationBatch,
    deployment: &str,
) -> Option<&'a capdeck::api::rotation_batch::BatchDeployment> {
    batch.status.as_ref()?.deployments.iter().find(|d| d.name == deployment)
}

/// Four replicas, each new Pod ready a second after it started: the deployment controller
/// surges one Pod at a time and keeps three available. Sampled all along, the progress the
/// console's Rollouts view shows (`readmodel::snapshot` over the engine's stores) moves through the
/// rollout and never runs ahead of the Deployment's; the progress the batch records never either;
/// the batch succeeds only once the rollout completed (the old ReplicaSet at 0), and the previous
/// VCAP Secret stays until then.
pub async fn a_multi_replica_rollout_is_followed_as_it_goes(backend: Backend) {
    let options =
        AppOptions { deployments: &[("srv", &["uaa"])], replicas: 4, ready_after: Some("1s"), ..AppOptions::default() };
    let (w, engine, workloads) = running(backend, "multi-replica", &options, |_| {}).await;
    let previous = w.vcap_of("bookshop-v1-srv").await;
    let deployments: Api<Deployment> = Api::namespaced(w.client.clone(), &w.ns);
    w.rotate_secret("bookshop-uaa").await;
    let started = tokio::time::Instant::now();
    let mut in_between = Vec::new();
    let batch = loop {
        assert!(started.elapsed() < LONG, "the batch did not succeed within {LONG:?}: {in_between:?}");
        // What capdeck shows first, then the world: the world can only have moved on since.
        let shown = capdeck::readmodel::snapshot(&engine.stores, &[], &capdeck::credentials::Judging::default());
        let row = shown.rollouts.iter().find(|row| row.deployment == "bookshop-v1-srv").cloned();
        let batch = w.batches("bookshop").await.pop();
        let live = deployments.get("bookshop-v1-srv").await.expect("srv");
        let (current, old) = current_and_old(&live, replicasets(&w, "app=bookshop-v1-srv").await);
        let previous_exists = w.secret(&previous).await.is_some();
        let status = live.status.clone().unwrap_or_default();
        let old_replicas: i32 = old.iter().map(spec_replicas).sum();
        let rolled_out = capdeck_rolled_out(&live) && old_replicas == 0;
        if !previous_exists {
            assert!(rolled_out, "the previous VCAP Secret went before the rollout completed: {status:?}");
        }
        // Real surge and unavailability: never more than one Pod above 4, never fewer than 3 ready.
        // The surge is the deployment controller's promise over its ReplicaSets' specs; the
        // Deployment's status.replicas sums their statuses, which lag a scale-down and can read 6.
        let surged = current.as_ref().map(spec_replicas).unwrap_or(0) + old_replicas;
        assert!(surged <= 5, "maxSurge 25%: ReplicaSets at {surged} in all: {status:?}");
        assert!(status.available_replicas.unwrap_or(0) >= 3, "maxUnavailable 25%: {status:?}");
        if let Some(row) = row.filter(|row| row.state == Some(DeploymentRolloutState::Rolling)) {
            let live_updated = status.updated_replicas.unwrap_or(0);
            assert!(row.updated <= live_updated, "the console ahead of the Deployment: {row:?} {status:?}");
            assert!(row.available <= 4 && row.replicas == 4, "{row:?}");
            if (1..4).contains(&row.updated) && in_between.last() != Some(&row.updated) {
                in_between.push(row.updated);
            }
        }
        let Some(batch) = batch else { continue };
        if let Some(recorded) = rollout_of(&batch, "bookshop-v1-srv") {
            let updated = recorded.updated_replicas.unwrap_or(0);
            assert!(
                updated <= status.updated_replicas.unwrap_or(0),
                "ahead of the Deployment: {recorded:?} {status:?}"
            );
        }
        if batch.status.as_ref().is_some_and(|s| s.phase == BatchPhase::Succeeded) {
            assert!(
                rolled_out,
                "Succeeded before the rollout completed: {status:?}, old ReplicaSets at {old_replicas}"
            );
            break batch;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!("multi-replica story ({}): the console showed {in_between:?} of 4 updated", backend.label());
    // The deployment controller moves 2 at a time here (one surge Pod, one unavailable), the
    // simulation 1: either way the console showed the rollout under way, not only before and after.
    assert!(!in_between.is_empty(), "the console showed the rollout between 0 and 4 updated: {in_between:?}");
    let recorded = rollout_of(&batch, "bookshop-v1-srv").expect("srv");
    assert_eq!((recorded.updated_replicas, recorded.available_replicas), (Some(4), Some(4)), "{recorded:?}");
    eventually("the previous VCAP Secret deleted", LONG, || async { w.secret(&previous).await.is_none() }).await;
    let sets = replicasets(&w, "app=bookshop-v1-srv").await;
    assert_eq!(sets.len(), 2, "one new ReplicaSet");
    engine.stop().await;
    workloads.stop().await;
}

/// The rollout of a batch's only Deployment meets new Pods that crash-loop, as when the new
/// credentials are refused. On a real server: the deployment controller's surge Pod, scheduled by
/// kube-scheduler to a Node whose kubelet (kwok) crash-loops it beside the healthy old Pods.
/// - The batch is halted at once (the failure guard, within seconds of the new ReplicaSet), never
///   at the readiness timeout or the progress deadline, even with nothing queued behind it.
/// - The reason names the Pod, the container and its last termination.
/// - A notification goes out, once.
/// - `undo` is offered and works: the Deployment goes back to its previous ReplicaSet, the
///   crash-looping one to 0, and the batch's new VCAP Secret is deleted.
///
/// Before the guard halted a batch with nothing queued, it stayed RollingOut and undo was refused.
pub async fn new_pods_that_crash_loop_halt_the_batch_at_once_and_undo_goes_back(backend: Backend) {
    let options = AppOptions { deployments: &[("srv", &["uaa"])], crash_loop: &["srv"], ..AppOptions::default() };
    let (port, received) = receiver(Behaviour::Accepts).await;
    let (w, engine, workloads) =
        running(backend, "crash-loop", &options, |config| config.notify = loopback_notify(port, "crash-loop-story"))
            .await;
    let deployments: Api<Deployment> = Api::namespaced(w.client.clone(), &w.ns);
    let before = deployments.get("bookshop-v1-srv").await.expect("srv");
    let (previous_rs, _) = current_and_old(&before, replicasets(&w, "app=bookshop-v1-srv").await);
    let previous_rs = previous_rs.expect("the ReplicaSet it runs").name_any();
    let previous = w.vcap_of("bookshop-v1-srv").await;
    w.rotate_secret("bookshop-uaa").await;

    let batch = w.wait_phase("bookshop", BatchPhase::Held, LONG).await;
    let status = batch.status.clone().expect("status");
    let condition = status.conditions.first().cloned().expect("condition");
    assert_eq!(condition.reason, "RolloutFailureGuard", "{condition:?}");
    let srv = rollout_of(&batch, "bookshop-v1-srv").expect("srv");
    assert_eq!(srv.state, Some(DeploymentRolloutState::Failing), "{srv:?}");
    let message = srv.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("Pod bookshop-v1-srv-")
            && message.ends_with(": container main CrashLoopBackOff; last terminated: Error (exit code 1)"),
        "{message}"
    );
    assert!(condition.message.starts_with(&format!("halted: bookshop-v1-srv is failing ({message}); capdeck undo")));
    // At once: seconds after the new ReplicaSet appeared, not the 5 min readiness timeout.
    let live = deployments.get("bookshop-v1-srv").await.expect("srv");
    let (crashing_rs, _) = current_and_old(&live, replicasets(&w, "app=bookshop-v1-srv").await);
    let crashing_rs = crashing_rs.expect("the new ReplicaSet");
    let created = crashing_rs.metadata.creation_timestamp.clone().expect("created").0;
    let halted = status.halted_at.clone().expect("halted at").0;
    let after = halted.duration_since(created).as_secs_f64();
    eprintln!("crash-loop story ({}): halted {after:.0} s after the new ReplicaSet", backend.label());
    assert!(after < 20.0, "halted {after} s after the new ReplicaSet {}", crashing_rs.name_any());
    let new_secret = srv.vcap_secret.clone().expect("the batch's new VCAP Secret");
    assert!(w.secret(&previous).await.is_some(), "the old Pods still read the previous VCAP Secret");
    let name = batch.name_any();
    eventually("one HeldByFailureGuard notification", LONG, || async {
        let sent: Vec<(String, String)> = accepted_events(&received);
        if sent == vec![(name.clone(), "HeldByFailureGuard".to_string())] { Ok(()) } else { Err(format!("{sent:?}")) }
    })
    .await;

    act(&w.client, &w.ns, &name, BatchAction::Undo, "bob", Some("new credentials refused"), Timestamp::now())
        .await
        .expect("undo a batch the failure guard halted");
    let batch = w.wait_phase("bookshop", BatchPhase::Undone, LONG).await;
    assert_eq!(
        rollout_of(&batch, "bookshop-v1-srv").and_then(|d| d.state.clone()),
        Some(DeploymentRolloutState::Undone)
    );
    assert_eq!(w.vcap_of("bookshop-v1-srv").await, previous, "back on the previous VCAP Secret");
    eventually("the Deployment back on its previous ReplicaSet", LONG, || async {
        let live = deployments.get("bookshop-v1-srv").await.map_err(|e| e.to_string())?;
        let (current, old) = current_and_old(&live, replicasets(&w, "app=bookshop-v1-srv").await);
        let current = current.map(|rs| rs.name_any());
        let crashing_left: i32 = old.iter().map(spec_replicas).sum();
        if current.as_deref() == Some(previous_rs.as_str()) && crashing_left == 0 && capdeck_rolled_out(&live) {
            Ok(())
        } else {
            Err(format!("current {current:?}, others at {crashing_left}, {:?}", live.status))
        }
    })
    .await;
    assert_eq!(replicasets(&w, "app=bookshop-v1-srv").await.len(), 2, "no third ReplicaSet");
    assert!(w.secret(&new_secret).await.is_none(), "the batch's new VCAP Secret is deleted");
    assert_eq!(accepted_events(&received).len(), 1, "one notification: {:?}", accepted_events(&received));
    engine.stop().await;
    workloads.stop().await;
}

/// New Pods with no node to run on: while the rollout waits, capdeck says what kube-scheduler
/// says (`Unschedulable`, which nodes and why); when the Deployment's progress deadline passes,
/// the batch fails with that reason, not only "progress deadline exceeded", and keeps the
/// previous VCAP Secret for the old Pods.
pub async fn unschedulable_new_pods_say_the_schedulers_reason(backend: Backend) {
    let options = AppOptions { deployments: &[("srv", &["uaa"])], unschedulable: &["srv"], ..AppOptions::default() };
    let (w, engine, workloads) = running(backend, "unschedulable", &options, |_| {}).await;
    let previous = w.vcap_of("bookshop-v1-srv").await;
    w.rotate_secret("bookshop-uaa").await;
    let waiting = std::sync::Mutex::new(String::new());
    eventually("the scheduler's reason on the rolling Deployment", LONG, || async {
        let batch = w.batches("bookshop").await.pop();
        let said = batch.as_ref().and_then(|b| rollout_of(b, "bookshop-v1-srv")).and_then(|d| d.message.clone());
        let said = said.unwrap_or_default();
        *waiting.lock().expect("lock") = said.clone();
        if said.contains("unschedulable: 0/") { Ok(()) } else { Err(said) }
    })
    .await;
    let waiting = waiting.into_inner().expect("lock");
    assert!(waiting.contains("node(s) were unschedulable"), "{waiting}");
    let batch = w.wait_phase("bookshop", BatchPhase::Failed, LONG).await;
    let srv = rollout_of(&batch, "bookshop-v1-srv").expect("srv");
    assert_eq!(srv.state, Some(DeploymentRolloutState::Stalled), "{srv:?}");
    let message = srv.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("deployment bookshop-v1-srv exceeded its progress deadline (Pod bookshop-v1-srv-")
            && message.contains(" unschedulable: 0/")
            && message.ends_with("; its previous VCAP Secret is kept"),
        "{message}"
    );
    assert!(w.secret(&previous).await.is_some(), "the old Pods keep the previous VCAP Secret");
    engine.stop().await;
    workloads.stop().await;
}

/// What people do to Deployments while a batch rolls them:
/// - `srv` was paused (`kubectl rollout pause`): capdeck points it like any other, says it is
///   paused and how to resume it, and keeps its previous VCAP Secret; resumed, it rolls and the
///   batch succeeds.
/// - `router` was scaled to 0: its rollout completes at once, with no Pod.
/// - `worker` is scaled from 2 to 4 while it rolls: the batch waits for all 4.
pub async fn paused_scaled_to_zero_and_scaled_during_the_rollout(backend: Backend) {
    let options = AppOptions {
        deployments: &[("srv", &["uaa"]), ("router", &["uaa"]), ("worker", &["uaa"])],
        ready_after: Some("1s"),
        ..AppOptions::default()
    };
    let (w, engine, workloads) = running(backend, "paused-scaled", &options, |_| {}).await;
    let deployments: Api<Deployment> = Api::namespaced(w.client.clone(), &w.ns);
    let patch = |name: &'static str, body: serde_json::Value| {
        let deployments = deployments.clone();
        async move {
            deployments.patch(name, &PatchParams::default(), &Patch::Merge(&body)).await.expect("patch");
        }
    };
    patch("bookshop-v1-srv", json!({"spec": {"paused": true}})).await;
    patch("bookshop-v1-router", json!({"spec": {"replicas": 0}})).await;
    w.settled().await;
    let srv_before = w.vcap_of("bookshop-v1-srv").await;
    let router_before = w.vcap_of("bookshop-v1-router").await;
    w.rotate_secret("bookshop-uaa").await;
    eventually("worker rolling", LONG, || async {
        let batch = w.batches("bookshop").await.pop();
        batch.as_ref().and_then(|b| rollout_of(b, "bookshop-v1-worker")).and_then(|d| d.state.clone())
            == Some(DeploymentRolloutState::Rolling)
    })
    .await;
    patch("bookshop-v1-worker", json!({"spec": {"replicas": 4}})).await;
    // What the console shows (the batch's stored progress lags by up to the status interval).
    let said = std::sync::Mutex::new(String::new());
    eventually("srv shown paused, router done", LONG, || async {
        let shown = capdeck::readmodel::snapshot(&engine.stores, &[], &capdeck::credentials::Judging::default());
        let srv = shown.rollouts.iter().find(|row| row.deployment == "bookshop-v1-srv").cloned();
        let message = srv.map(|row| row.message).unwrap_or_default();
        *said.lock().expect("lock") = message.clone();
        let router_done = w.secret(&router_before).await.is_none();
        if message.starts_with("paused (spec.paused)") && router_done {
            Ok(())
        } else {
            Err(format!("srv shows {message:?}; router's previous VCAP Secret deleted: {router_done}"))
        }
    })
    .await;
    let said = said.into_inner().expect("lock");
    let resume = format!("`kubectl rollout resume deployment/bookshop-v1-srv -n {}` lets it roll", w.ns);
    assert!(said.ends_with(&resume), "{said}");
    assert_ne!(w.vcap_of("bookshop-v1-srv").await, srv_before, "pointed at its new VCAP Secret all the same");
    assert!(w.secret(&srv_before).await.is_some(), "its Pods still read the previous one");
    assert_eq!(
        w.batches("bookshop").await.pop().map(|b| b.status.unwrap_or_default().phase),
        Some(BatchPhase::RollingOut)
    );

    patch("bookshop-v1-srv", json!({"spec": {"paused": false}})).await;
    let batch = w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    let worker = rollout_of(&batch, "bookshop-v1-worker").expect("worker");
    assert_eq!((worker.replicas, worker.updated_replicas, worker.available_replicas), (Some(4), Some(4), Some(4)));
    let router = rollout_of(&batch, "bookshop-v1-router").expect("router");
    assert_eq!(router.replicas, Some(0), "{router:?}");
    assert!(capdeck_rolled_out(&deployments.get("bookshop-v1-worker").await.expect("worker")));
    eventually("srv's previous VCAP Secret deleted", LONG, || async { w.secret(&srv_before).await.is_none() }).await;
    engine.stop().await;
    workloads.stop().await;
}
