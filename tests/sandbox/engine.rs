//! The engine stories only the sandbox can tell (docs/BATCHES.md): those that inject faults
//! (409s on update, dropped watches and compacted history), that read the sandbox's request log
//! (an absence of writes by name), or that run engines over every namespace of one server (on the
//! shared kube-apiserver they would reach the other stories' namespaces). Every other engine
//! story is told once, on both backends, in `tests/real_cluster/engine_stories.rs`. Paused tokio
//! time unless a test says why it needs the wall clock.

use std::time::Duration;

use crate::common::eventually;
use crate::common::fixtures::{
    AppOptions, EngineWorld, NS, RunningEngine, current_sandbox, logged_workload_writes, real_time_config, test_config,
};
use crate::common::story_world::StoryWorld as _;
use capdeck::api::BatchPhase;
use capdeck::engine::Role;
use kube::ResourceExt;

type World = EngineWorld;

async fn world(apps: &[AppOptions]) -> World {
    EngineWorld::start(apps, test_config("engine-a")).await
}

async fn rotated_batch(world: &World, secret: &str) -> String {
    world.sandbox.rotate_secret(NS, secret).expect("rotated");
    eventually("a batch", Duration::from_secs(10), || async { !world.sandbox.batches("bookshop").await.is_empty() })
        .await;
    world.sandbox.batches("bookshop").await.pop().expect("batch").name_any()
}

#[tokio::test(start_paused = true)]
async fn an_application_that_opts_out_is_untouched_and_jobs_are_never_rolled() {
    let world =
        world(&[AppOptions::default(), AppOptions { name: "legacy", opted_in: false, ..AppOptions::default() }]).await;
    world.sandbox.clear_requests();
    world.sandbox.rotate_secret(NS, "legacy-uaa").expect("rotated");
    world.sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    assert!(world.sandbox.batches("legacy").await.is_empty());
    let writes = world.sandbox.writes();
    assert!(
        writes.iter().all(|w| w.info.name.as_deref().is_none_or(|n| !n.starts_with("legacy"))),
        "nothing of legacy written"
    );
    assert!(writes.iter().all(|w| w.info.resource != "jobs"), "no job touched");
    let batch = world.sandbox.batches("bookshop").await.pop().expect("batch");
    let names: Vec<String> = batch.status.expect("status").deployments.iter().map(|d| d.name.clone()).collect();
    assert_eq!(
        names,
        vec!["bookshop-v1-srv", "bookshop-v1-router"],
        "the mtx job workload is not a Deployment to roll"
    );
    world.engine.stop().await;
}

#[tokio::test(start_paused = true)]
async fn conflicts_on_the_deployment_update_are_retried() {
    let world = world(&[AppOptions::default()]).await;
    world.sandbox.clear_requests();
    world.sandbox.fail_next(3, capdeck::sandbox::RequestMatcher::on("update", "deployments"), 409);
    rotated_batch(&world, "bookshop-uaa").await;
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    let updates: Vec<u16> = world
        .sandbox
        .requests()
        .iter()
        .filter(|r| r.info.verb == "update" && r.info.resource == "deployments")
        .map(|r| r.status)
        .collect();
    assert_eq!(updates.iter().filter(|s| **s == 409).count(), 3);
    assert_eq!(updates.iter().filter(|s| **s == 200).count(), 2, "each Deployment updated exactly once: {updates:?}");
    world.engine.stop().await;
}

#[tokio::test(start_paused = true)]
async fn dropped_watches_and_compacted_history_change_nothing() {
    let world = world(&[AppOptions::default()]).await;
    world.sandbox.clear_requests();
    rotated_batch(&world, "bookshop-uaa").await;
    world.sandbox.compact();
    world.sandbox.drop_watches();
    tokio::time::sleep(Duration::from_secs(5)).await;
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    assert_eq!(world.sandbox.batches("bookshop").await.len(), 1, "a re-list is not a rotation");
    let writes = logged_workload_writes(&world.sandbox);
    assert_eq!(writes.iter().filter(|w| *w == "update deployments").count(), 2, "{writes:#?}");
    world.engine.stop().await;
}

/// Two engines told different Lease places (the installed daemon's `capdeck-system`, a laptop
/// console's `default`) never lead at once where their scopes overlap: the second observes while
/// the first leads, takes over when it stops, and an engine of another namespace leads beside
/// them. A monitor samples both roles throughout (an invariant, not a timing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engines_with_different_lease_places_never_lead_the_same_namespaces_at_once() {
    let sandbox = current_sandbox(&AppOptions::default());
    sandbox
        .load([serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "capdeck-system"}})])
        .expect("namespace");
    let config = |identity: &str, namespace: &str| {
        let mut config = real_time_config(identity, 4, 2);
        config.lease.namespace = namespace.into();
        config
    };
    let daemon = RunningEngine::start(sandbox.client(), config("daemon", "capdeck-system")).await;
    daemon.wait_for_role(Role::Leader).await;
    let laptop = RunningEngine::start(sandbox.client(), config("laptop", "default")).await;
    let both = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let monitor = {
        let (daemon_role, laptop_role, both) = (daemon.roles(), laptop.roles(), both.clone());
        tokio::spawn(async move {
            loop {
                if *daemon_role.borrow() == Role::Leader && *laptop_role.borrow() == Role::Leader {
                    both.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    laptop.wait_for_role(Role::Observer).await;
    // Over several lease renewals and re-checks it stays so; its own Lease is never taken.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!((daemon.role(), laptop.role()), (Role::Leader, Role::Observer));
    }
    let held = |namespace: &str| {
        sandbox.get("coordination.k8s.io", "leases", namespace, "capdeck-engine").and_then(|lease| {
            lease.pointer("/spec/holderIdentity").and_then(serde_json::Value::as_str).map(str::to_string)
        })
    };
    assert_eq!(held("default"), None, "the laptop's engine never took its Lease");
    assert_eq!(held("capdeck-system").as_deref(), Some("daemon"));
    // An engine of one namespace overlaps the daemon's all namespaces: it observes too.
    let other = RunningEngine::start_in(
        sandbox.client(),
        capdeck::cluster::Scope::Namespace("elsewhere".into()),
        config("team", "default"),
    )
    .await;
    other.wait_for_role(Role::Observer).await;
    // The daemon stops (its Lease released): exactly one of the others takes over.
    daemon.stop().await;
    eventually("one engine leads after the daemon stopped", Duration::from_secs(20), || async {
        laptop.role() == Role::Leader || other.role() == Role::Leader
    })
    .await;
    // Once the all-namespaces laptop leads, the namespaced one keeps observing (overlap).
    if laptop.role() == Role::Leader {
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(other.role(), Role::Observer);
    }
    monitor.abort();
    assert!(!both.load(std::sync::atomic::Ordering::SeqCst), "the daemon and the laptop led at the same time");
    laptop.stop().await;
    other.stop().await;
}
