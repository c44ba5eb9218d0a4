//! The engine stories only the sandbox can tell (docs/BATCHES.md): those that inject faults
//! (409s on update, dropped watches and compacted history) or read the sandbox's request log (an
//! absence of writes by name). Every other engine story is told once, on both backends, in
//! `tests/real_cluster/stories/engine.rs`. Paused tokio time.

/// The fault matrix: one fault injected while a batch is under way.
mod faults;
/// Seeded walks of rotations against the rollout invariants.
mod invariants;

use std::time::Duration;

use crate::common::eventually;
use crate::common::fixtures::{AppOptions, EngineWorld, NS, logged_workload_writes, test_config};
use crate::common::story_world::StoryWorld as _;
use capdeck::api::BatchPhase;
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

/// kubectl's STATE (`status.state`) forged on an ended batch is put right by the engine; a fix
/// the API server refuses is tried again only when the batch changes, not on every pass (a 403
/// or an admission webhook would otherwise cost a refused write per pass and per batch).
#[tokio::test(start_paused = true)]
async fn a_forged_state_on_an_ended_batch_is_put_right_and_a_refused_fix_is_not_repeated() {
    use capdeck::api::RotationBatch;
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{Api, Patch, PatchParams};
    let world = world(&[AppOptions::default()]).await;
    let name = rotated_batch(&world, "bookshop-uaa").await;
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    let batches: Api<RotationBatch> = Api::namespaced(world.sandbox.client(), NS);
    let forge = || async {
        let forged = serde_json::json!({"status": {"state": "AwaitingApproval"}});
        batches.patch_status(&name, &PatchParams::default(), &Patch::Merge(&forged)).await.expect("forged");
    };
    let state =
        || async { batches.get(&name).await.ok().and_then(|batch| batch.status).and_then(|status| status.state) };
    forge().await;
    eventually("the state put right", Duration::from_secs(30), || async {
        state().await.as_deref() == Some("Succeeded")
    })
    .await;
    // Forged again, and the fix refused from now on: five changes elsewhere, five passes.
    forge().await;
    world.sandbox.deny("patch:rotationbatches".parse().expect("rule"));
    world.sandbox.clear_requests();
    let deployments: Api<Deployment> = Api::namespaced(world.sandbox.client(), NS);
    for touch in 0..5 {
        let annotation = serde_json::json!({"metadata": {"annotations": {"example.com/touch": touch.to_string()}}});
        deployments
            .patch("bookshop-v1-srv", &PatchParams::default(), &Patch::Merge(&annotation))
            .await
            .expect("touched");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let refused = || {
        world
            .sandbox
            .requests()
            .iter()
            .filter(|r| r.info.verb == "patch" && r.info.resource == "rotationbatches")
            .count()
    };
    assert_eq!(refused(), 1, "tried once, not once per pass");
    assert_eq!(state().await.as_deref(), Some("AwaitingApproval"), "the refusal left it forged");
    // Once allowed and the batch changes, it is put right.
    world.sandbox.allow_all();
    let touched = serde_json::json!({"metadata": {"annotations": {"example.com/touch": "batch"}}});
    batches.patch(&name, &PatchParams::default(), &Patch::Merge(&touched)).await.expect("batch touched");
    eventually("put right once allowed", Duration::from_secs(30), || async {
        state().await.as_deref() == Some("Succeeded")
    })
    .await;
    world.engine.stop().await;
}

/// The applications of the storm below (fixture names are `'static`).
const STORM: [&str; 30] = [
    "storm-01", "storm-02", "storm-03", "storm-04", "storm-05", "storm-06", "storm-07", "storm-08", "storm-09",
    "storm-10", "storm-11", "storm-12", "storm-13", "storm-14", "storm-15", "storm-16", "storm-17", "storm-18",
    "storm-19", "storm-20", "storm-21", "storm-22", "storm-23", "storm-24", "storm-25", "storm-26", "storm-27",
    "storm-28", "storm-29", "storm-30",
];

/// A storm does not starve a half-done batch: 30 new batches, at a write rate of 2 a second, do
/// not stand between a rolling batch and its next Deployment. While a batch
/// rolls, a pass opens at most 10 batches (`OPENINGS_PER_PASS_WHILE_ROLLING`) and drives the
/// rolling one before the next pass opens more; every rotation of the storm still gets its batch.
#[tokio::test(start_paused = true)]
async fn a_storm_of_new_batches_never_starves_a_half_done_one() {
    const OPENINGS_PER_PASS: usize = 10;
    let mut apps = vec![AppOptions { replicas: 1, ready_after: Some("3s"), ..AppOptions::default() }];
    apps.extend(STORM.iter().map(|name| AppOptions {
        name,
        deployments: &[("srv", &["uaa"])],
        ..AppOptions::default()
    }));
    let mut config = test_config("engine-a");
    config.rollout_delay = Duration::from_secs(1);
    config.max_parallel_rollouts = 1;
    config.write_rate = (2.0, 1);
    let world = EngineWorld::start(&apps, config).await;
    let updates_of_bookshop = |requests: &[capdeck::sandbox::RequestRecord]| {
        requests
            .iter()
            .enumerate()
            .filter(|(_, r)| r.info.verb == "update" && r.info.resource == "deployments" && r.status < 300)
            .filter(|(_, r)| r.info.name.as_deref().is_some_and(|name| name.starts_with("bookshop-v1-")))
            .map(|(at, _)| at)
            .collect::<Vec<_>>()
    };
    world.sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    eventually("bookshop's first Deployment written", Duration::from_secs(120), || async {
        !updates_of_bookshop(&world.sandbox.requests()).is_empty()
    })
    .await;
    let storm_from = world.sandbox.requests().len();
    for name in STORM {
        world.sandbox.rotate_secret(NS, &format!("{name}-uaa")).expect("rotated");
    }
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(600)).await;
    let requests = world.sandbox.requests();
    let second = *updates_of_bookshop(&requests).get(1).expect("bookshop's second Deployment written");
    assert!(second > storm_from, "the second Deployment waited for the first's Pods (3 s)");
    let opened_first = requests[storm_from..second]
        .iter()
        .filter(|r| r.info.verb == "create" && r.info.resource == "rotationbatches" && r.status < 300)
        .count();
    assert!(
        opened_first <= 2 * OPENINGS_PER_PASS && opened_first < STORM.len(),
        "{opened_first} of the storm's {} batches were opened before the half-done batch's next Deployment",
        STORM.len()
    );
    // Nothing of the storm is lost: each application gets its batch.
    for name in STORM {
        eventually(&format!("{name}'s batch"), Duration::from_secs(600), || async {
            !world.sandbox.batches(name).await.is_empty()
        })
        .await;
    }
    world.engine.stop().await;
}
