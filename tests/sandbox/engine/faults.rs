//! The fault matrix of docs/RELIABILITY.md: each test injects one fault into the sandbox while a
//! rotation batch is under way and checks the invariants of `common::invariants` (rolled at most
//! once per batch, no reference to a missing VCAP Secret, no container without `envFrom`, every
//! batch terminal or resumable). Paused tokio time unless a test says why it needs the wall clock.

use crate::common;
use std::time::Duration;

use crate::common::console::Console;
use crate::common::eventually;
use crate::common::fixtures::{
    AppOptions, EngineWorld, NS, RunningEngine, assert_two_rolled_once, current_sandbox, logged_workload_writes,
    real_time_config, test_config,
};
use crate::common::invariants::Monitor;
use crate::common::story_world::StoryWorld as _;
use capdeck::api::BatchPhase;
use capdeck::engine::Role;
use capdeck::sandbox::{RequestMatcher, Sandbox};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WRITES: [&str; 4] = ["create", "update", "patch", "delete"];

type World = EngineWorld;

async fn world(options: AppOptions, config: capdeck::engine::config::EngineConfig) -> World {
    let world = EngineWorld::start(&[options], config).await;
    // Count only what the fault test causes.
    world.sandbox.clear_requests();
    world
}

/// The fixture application with `replicas` per Deployment, rolling `per_second` replicas a second.
fn slow_cluster(replicas: i64, per_second: f64) -> (Sandbox, CancellationToken) {
    let sandbox = current_sandbox(&AppOptions { replicas, ..AppOptions::default() });
    let simulation = CancellationToken::new();
    let slow = capdeck::sandbox::simulate::WorkloadSimulation {
        replicas_per_second: per_second,
        tick: Duration::from_millis(50),
        ..Default::default()
    };
    sandbox.simulate_workloads(slow, simulation.clone());
    (sandbox, simulation)
}

async fn default_world() -> World {
    world(AppOptions::default(), test_config("engine-a")).await
}

impl World {
    async fn rotate(&self, secret: &str) {
        self.sandbox.rotate_secret(NS, secret).expect("rotated");
        // Generous: retries after failed writes back off up to 30 s (paused time costs nothing).
        eventually("a batch", Duration::from_secs(300), || async {
            !self.sandbox.batches("bookshop").await.is_empty()
        })
        .await;
    }

    fn count(&self, what: &str) -> usize {
        logged_workload_writes(&self.sandbox).iter().filter(|w| w.as_str() == what).count()
    }

    /// Both Deployments rolled once, both old VCAP Secrets gone, one batch.
    async fn assert_one_clean_rollout(&self) {
        assert_two_rolled_once(&self.sandbox);
        assert_eq!(self.sandbox.batches("bookshop").await.len(), 1, "a fault is not a rotation");
    }

    async fn stop(self) {
        self.engine.stop().await;
        self.simulation.cancel();
    }
}

#[tokio::test(start_paused = true)]
async fn watches_dropped_mid_batch() {
    let world = default_world().await;
    let monitor = Monitor::start(&world.sandbox);
    world.rotate("bookshop-uaa").await;
    world.sandbox.drop_watches();
    world.sandbox.wait_phase("bookshop", BatchPhase::RollingOut, Duration::from_secs(60)).await;
    for _ in 0..5 {
        world.sandbox.drop_watches();
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    monitor.finish(true).await;
    world.assert_one_clean_rollout().await;
    world.stop().await;
}

#[tokio::test(start_paused = true)]
async fn history_compacted_forces_a_relist() {
    let world = default_world().await;
    let monitor = Monitor::start(&world.sandbox);
    world.rotate("bookshop-uaa").await;
    for phase in [BatchPhase::Collecting, BatchPhase::RollingOut] {
        world.sandbox.wait_phase("bookshop", phase, Duration::from_secs(60)).await;
        world.sandbox.compact();
        world.sandbox.drop_watches();
    }
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    // The watches really resumed with a 410 and re-listed.
    let relists = world.sandbox.requests().iter().filter(|r| r.info.verb == "list").count();
    assert!(relists > 0, "every watch re-listed after the compaction");
    monitor.finish(true).await;
    world.assert_one_clean_rollout().await;
    world.stop().await;
}

#[tokio::test(start_paused = true)]
async fn conflict_storm_on_the_deployment_update() {
    let world = default_world().await;
    let monitor = Monitor::start(&world.sandbox);
    world.sandbox.fail_next(40, RequestMatcher::on("update", "deployments"), 409);
    world.rotate("bookshop-uaa").await;
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(600)).await;
    let conflicts = world
        .sandbox
        .requests()
        .iter()
        .filter(|r| r.info.verb == "update" && r.info.resource == "deployments" && r.status == 409)
        .count();
    assert_eq!(conflicts, 40, "all 40 conflicts were met and retried");
    monitor.finish(true).await;
    world.assert_one_clean_rollout().await;
    world.stop().await;
}

async fn bursts_on_every_write(status: u16) {
    let world = default_world().await;
    let monitor = Monitor::start(&world.sandbox);
    let burst = |count: usize| {
        for verb in WRITES {
            world.sandbox.fail_next(count, RequestMatcher::verb(verb), status);
        }
    };
    // While the batch opens, and again while it rolls out.
    burst(6);
    world.rotate("bookshop-uaa").await;
    world.sandbox.wait_phase("bookshop", BatchPhase::RollingOut, Duration::from_secs(300)).await;
    burst(6);
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(600)).await;
    let failed = world.sandbox.requests().iter().filter(|r| r.status == status).count();
    assert!(failed >= 24, "the bursts were met: {failed} answers with {status}");
    monitor.finish(true).await;
    world.assert_one_clean_rollout().await;
    world.stop().await;
}

/// A new rotation while a batch waits for an approval opens a batch that supersedes it. When
/// that opening goes wrong halfway (the create is made and answered 504, or the write that closes
/// the waiting batch fails), the next pass finds the waiting batch left open beside the new one
/// and closes it: one batch rolls the Deployments, once, and no VCAP Secret is left unread.
#[tokio::test(start_paused = true)]
async fn a_batch_left_open_by_a_half_done_opening_is_superseded() {
    use capdeck::actions::{BatchAction, act};
    use kube::ResourceExt as _;
    let supersede_write = || RequestMatcher::on("patch", "rotationbatches").subresource("status");
    let cases = ["the create made and answered 504", "the supersede write answered 500 three times"];
    for case in cases {
        let world = world(AppOptions { manual: true, ..AppOptions::default() }, test_config("engine-a")).await;
        let monitor = Monitor::start(&world.sandbox);
        world.rotate("bookshop-uaa").await;
        let waiting =
            world.sandbox.wait_phase("bookshop", BatchPhase::AwaitingApproval, Duration::from_secs(300)).await;
        if case.contains("504") {
            world.sandbox.fail_next_after_applying(1, RequestMatcher::on("create", "rotationbatches"), 504);
        } else {
            world.sandbox.fail_next(3, supersede_write().named(&waiting.name_any()), 500);
        }
        world.sandbox.rotate_secret(NS, "bookshop-db").expect("rotated");
        eventually("the waiting batch superseded", Duration::from_secs(300), || async {
            let batches = world.sandbox.batches("bookshop").await;
            let phases: Vec<String> = batches.iter().map(|b| format!("{} {}", b.name_any(), b.phase())).collect();
            let superseded =
                batches.iter().any(|b| b.name_any() == waiting.name_any() && b.phase() == BatchPhase::Superseded);
            if superseded { Ok(()) } else { Err(format!("{case}: {phases:?}")) }
        })
        .await;
        let open = world.sandbox.batches("bookshop").await.into_iter().filter(|b| !b.is_terminal()).collect::<Vec<_>>();
        assert_eq!(open.len(), 1, "{case}: one batch open");
        let carried: Vec<&str> = open[0].spec.secrets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(carried, ["bookshop-db", "bookshop-uaa"], "{case}: the new batch carries both rotations");
        let open = world.sandbox.wait_phase("bookshop", BatchPhase::AwaitingApproval, Duration::from_secs(300)).await;
        let now = k8s_openapi::jiff::Timestamp::now();
        act(&world.sandbox.client(), NS, &open.name_any(), BatchAction::Approve, "sre", Some("CHG-10"), now)
            .await
            .expect("approve");
        world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(600)).await;
        monitor.finish(true).await;
        assert_two_rolled_once(&world.sandbox);
        let unread = super::invariants::left_behind(&world.sandbox);
        assert!(unread.is_empty(), "{case}: unread {unread:?}");
        world.stop().await;
    }
}

/// An approved batch whose start could not be written (every status write answered 500) is
/// rolling, whatever its stored phase says: a new rotation meanwhile opens a batch beside it and
/// never supersedes it. Both end; every old VCAP Secret is deleted.
#[tokio::test(start_paused = true)]
async fn a_start_held_in_memory_is_never_superseded() {
    use capdeck::actions::{BatchAction, act};
    use kube::ResourceExt as _;
    let world = world(AppOptions { manual: true, ..AppOptions::default() }, test_config("engine-a")).await;
    let monitor = Monitor::start(&world.sandbox);
    world.rotate("bookshop-uaa").await;
    let first = world.sandbox.wait_phase("bookshop", BatchPhase::AwaitingApproval, Duration::from_secs(300)).await;
    world.sandbox.fail_next(UNTIL_CLEARED, RequestMatcher::on("patch", "rotationbatches").subresource("status"), 500);
    let client = world.sandbox.client();
    let approve = |name: String| {
        let client = client.clone();
        async move {
            let now = k8s_openapi::jiff::Timestamp::now();
            act(&client, NS, &name, BatchAction::Approve, "sre", Some("CHG-11"), now).await.expect("approve");
        }
    };
    approve(first.name_any()).await;
    eventually("both Deployments rolled, no status written", Duration::from_secs(300), || async {
        ["bookshop-v1-srv", "bookshop-v1-router"].iter().all(|name| rolled_and_available(&world.sandbox, name))
    })
    .await;
    world.sandbox.rotate_secret(NS, "bookshop-db").expect("rotated");
    eventually("a second batch", Duration::from_secs(300), || async {
        world.sandbox.batches("bookshop").await.len() == 2
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    world.sandbox.clear_faults();
    let phase_of = |name: String| {
        let world = &world;
        async move { world.sandbox.batches("bookshop").await.into_iter().find(|b| b.name_any() == name).map(|b| b.phase()) }
    };
    eventually("the first batch succeeded, not superseded", Duration::from_secs(600), || async {
        match phase_of(first.name_any()).await {
            Some(BatchPhase::Succeeded) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let second =
        world.sandbox.batches("bookshop").await.into_iter().find(|b| b.name_any() != first.name_any()).expect("second");
    let listed: Vec<&str> = second.spec.secrets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(listed, ["bookshop-db"], "opened beside the rolling batch: it carries nothing of it");
    eventually("the second batch ended", Duration::from_secs(600), || async {
        if let Some(BatchPhase::AwaitingApproval) = phase_of(second.name_any()).await {
            approve(second.name_any()).await;
        }
        phase_of(second.name_any()).await.is_some_and(|phase| phase.is_terminal())
    })
    .await;
    monitor.finish(true).await;
    let unread = super::invariants::left_behind(&world.sandbox);
    assert!(unread.is_empty(), "unread {unread:?}");
    world.stop().await;
}

/// Each kind of write the engine makes is made and answered 504 (twice), as kube-apiserver answers
/// when its wait for etcd times out and etcd commits anyway: the engine cannot tell, and must
/// neither roll twice, nor leave a VCAP Secret behind, nor open a second batch, nor lose the one.
#[tokio::test(start_paused = true)]
async fn writes_made_but_answered_504_roll_once_and_leave_nothing_behind() {
    let kinds = [
        RequestMatcher::on("create", "rotationbatches"),
        RequestMatcher::on("patch", "rotationbatches").subresource("status"),
        RequestMatcher::on("create", "secrets"),
        RequestMatcher::on("update", "deployments"),
        RequestMatcher::on("delete", "secrets"),
    ];
    for kind in kinds {
        let world = default_world().await;
        let monitor = Monitor::start(&world.sandbox);
        world.sandbox.fail_next_after_applying(2, kind.clone(), 504);
        world.rotate("bookshop-uaa").await;
        world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(600)).await;
        let met = world.sandbox.requests().iter().filter(|r| r.status == 504 && kind.matches(&r.info)).count();
        assert!(met >= 1, "{kind:?}: the fault was met");
        monitor.finish(true).await;
        assert_eq!(world.sandbox.batches("bookshop").await.len(), 1, "{kind:?}: a fault is not a rotation");
        eventually("no VCAP Secret left that no Deployment reads", Duration::from_secs(300), || async {
            let unread = super::invariants::left_behind(&world.sandbox);
            if unread.is_empty() { Ok(()) } else { Err(format!("{kind:?}: unread {unread:?}")) }
        })
        .await;
        world.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn too_many_requests_bursts_on_every_write() {
    bursts_on_every_write(429).await;
}

#[tokio::test(start_paused = true)]
async fn server_error_bursts_on_every_write() {
    bursts_on_every_write(500).await;
}

/// Every status patch fails while the fault lasts (more than any pass makes before it is cleared).
const UNTIL_CLEARED: usize = 1_000;

/// An approved start whose status write fails (a conflict with the notifier's write of the same
/// batch, a 429, a 500), once or until its Deployments have completed, or is made and answered
/// 504 (kube-apiserver's timeout while etcd commits): however many passes go by
/// before a status is written, and whatever phase that status has, the approval is announced,
/// once (`Approved`, who and why). Before the held transitions were kept, the first status written
/// was `Succeeded`, and the approval was never said.
#[tokio::test(start_paused = true)]
async fn an_approved_start_whose_status_write_fails_is_still_announced_once() {
    use capdeck::actions::{BatchAction, act};
    use kube::ResourceExt as _;
    let status_patch = || RequestMatcher::on("patch", "rotationbatches").subresource("status");
    // (answer, how many status writes get it, whether each was made before it was answered)
    // (answer, how many status writes get it, whether each was made first, whether the write
    // after the fault is cleared, the one that ends the batch, is made and answered 504)
    let cases = [
        (409, 1, false, false),
        (429, 1, false, false),
        (500, 1, false, false),
        (409, UNTIL_CLEARED, false, false),
        (500, UNTIL_CLEARED, false, false),
        (409, UNTIL_CLEARED, false, true),
        (504, 1, true, false),
    ];
    for (code, failures, applied, end_made) in cases {
        let made = if applied { ", each made first" } else { "" };
        let end = if end_made { ", then the ending write made and answered 504" } else { "" };
        let case = format!("{failures} status write(s) answered {code}{made}{end}");
        let world = world(AppOptions { manual: true, ..AppOptions::default() }, test_config("engine-a")).await;
        world.rotate("bookshop-uaa").await;
        let batch = world.sandbox.wait_phase("bookshop", BatchPhase::AwaitingApproval, Duration::from_secs(300)).await;
        if applied {
            world.sandbox.fail_next_after_applying(failures, status_patch(), code);
        } else {
            world.sandbox.fail_next(failures, status_patch(), code);
        }
        let now = k8s_openapi::jiff::Timestamp::now();
        act(&world.sandbox.client(), NS, &batch.name_any(), BatchAction::Approve, "sre", Some("CHG-9"), now)
            .await
            .expect("approve");
        if failures == UNTIL_CLEARED {
            eventually(
                "both Deployments rolled and available, no status written",
                Duration::from_secs(300),
                || async {
                    ["bookshop-v1-srv", "bookshop-v1-router"]
                        .iter()
                        .all(|name| rolled_and_available(&world.sandbox, name))
                },
            )
            .await;
            let stored = world.sandbox.batches("bookshop").await.pop().map(|b| b.phase());
            assert_eq!(stored, Some(BatchPhase::AwaitingApproval), "{case}: no status was written yet");
            world.sandbox.clear_faults();
            if end_made {
                // The batch is closed by a write the engine was told failed: it is no longer
                // open on the next pass, and what was held is said as it is forgotten.
                world.sandbox.fail_next_after_applying(1, status_patch(), 504);
            }
        }
        world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(600)).await;
        let failed =
            world.sandbox.requests().iter().filter(|r| status_patch().matches(&r.info) && r.status == code).count();
        assert!(failed >= 1, "{case}: the fault was met");
        // Said with the first status written, after it.
        eventually("the Approved Event", Duration::from_secs(30), || async {
            !capdeck_events(&world.sandbox, "Approved").await.is_empty()
        })
        .await;
        let approved = capdeck_events(&world.sandbox, "Approved").await;
        // Once: one Event, not one repeated (kube's recorder counts a repeat in `series`).
        assert_eq!(approved.len(), 1, "{case}: {approved:?}");
        assert!(approved[0].0.contains("approved by sre: CHG-9") && approved[0].1 == 1, "{case}: {approved:?}");
        if end_made {
            let made =
                world.sandbox.requests().iter().filter(|r| status_patch().matches(&r.info) && r.status == 504).count();
            assert_eq!(made, 1, "{case}: the ending write was answered 504");
        }
        world.assert_one_clean_rollout().await;
        world.stop().await;
    }
}

/// Whether the Deployment was rolled (its template changed) and its new Pods are all available.
fn rolled_and_available(sandbox: &Sandbox, name: &str) -> bool {
    let Some(deployment) = sandbox.get("apps", "deployments", NS, name) else { return false };
    let number = |value: &serde_json::Value| value.as_i64().unwrap_or_default();
    let generation = number(&deployment["metadata"]["generation"]);
    let replicas = number(&deployment["spec"]["replicas"]);
    let status = &deployment["status"];
    generation > 1
        && number(&status["observedGeneration"]) >= generation
        && number(&status["updatedReplicas"]) == replicas
        && number(&status["availableReplicas"]) == replicas
}

/// capdeck's Events with `reason` in the namespace: (note, how many times it was recorded).
async fn capdeck_events(sandbox: &Sandbox, reason: &str) -> Vec<(String, i32)> {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(sandbox.client(), NS);
    let listed = events.list(&Default::default()).await.expect("events").items;
    listed
        .into_iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("capdeck") && e.reason.as_deref() == Some(reason))
        .map(|e| (e.note.unwrap_or_default(), e.series.map_or(1, |series| series.count)))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn api_unreachable_for_30_seconds_then_back() {
    let world = world(AppOptions { replicas: 20, ..AppOptions::default() }, test_config("engine-a")).await;
    let monitor = Monitor::start(&world.sandbox);
    let mut console = Console::in_process(&world.sandbox);
    console.shows("bookshop").await;
    world.rotate("bookshop-uaa").await;
    world.sandbox.wait_phase("bookshop", BatchPhase::RollingOut, Duration::from_secs(60)).await;
    eventually("a Deployment updated", Duration::from_secs(30), || async { world.count("update deployments") > 0 })
        .await;

    world.sandbox.set_reachable(false);
    let screen = console.shows("API server unreachable").await;
    assert!(screen.contains("reconnecting by itself"), "{screen}");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(world.engine.handle.as_ref().is_some_and(|h| !h.is_finished()), "the engine is still running");
    assert!(monitor.violations().is_empty(), "{:#?}", monitor.violations());
    // Still down after 30 s, and the banner says why (not only that).
    let screen = console.shows("API server unreachable").await;
    assert!(screen.contains("connection refused"), "the banner names the cause, in the CLI's words: {screen}");

    world.sandbox.set_reachable(true);
    console.until("the banner gone", |screen| !screen.contains("API server unreachable")).await;
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(300)).await;
    console.typed(":batches\n");
    console.shows("Succeeded").await;
    monitor.finish(true).await;
    world.assert_one_clean_rollout().await;
    console.quit().await;
    world.stop().await;
}

#[tokio::test(start_paused = true)]
async fn engine_task_aborted_mid_rollout_resumes_and_rolls_nothing_twice() {
    let mut config = test_config("engine-pod-0");
    config.max_parallel_rollouts = 1;
    let world = world(AppOptions { replicas: 10, ..AppOptions::default() }, config.clone()).await;
    let monitor = Monitor::start(&world.sandbox);
    world.rotate("bookshop-uaa").await;
    world.sandbox.wait_phase("bookshop", BatchPhase::RollingOut, Duration::from_secs(60)).await;
    eventually("first deployment updated", Duration::from_secs(30), || async {
        world.count("update deployments") == 1
    })
    .await;
    let World { sandbox, engine, simulation } = world;
    engine.kill();
    // Between the kill and the restart the batch is RollingOut: resumable, not terminal.
    assert_eq!(sandbox.batches("bookshop").await.pop().map(|b| b.phase()), Some(BatchPhase::RollingOut));
    // The same pod restarts (same identity, so it still holds the lease).
    let engine = RunningEngine::start(sandbox.client(), config).await;
    engine.wait_for_role(Role::Leader).await;
    let world = World { sandbox, engine, simulation };
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(240)).await;
    monitor.finish(true).await;
    world.assert_one_clean_rollout().await;
    world.stop().await;
}

/// A start after waiting for the parallel-rollout budget is kept in memory (not written at once):
/// an engine killed right after it leaves a stored status that says `Queued` for a Deployment
/// already pointed at its new Secret. The next engine adopts it: nothing is created, updated or
/// deleted twice.
#[tokio::test(start_paused = true)]
async fn engine_killed_after_an_unwritten_start_adopts_it_and_rolls_nothing_twice() {
    use capdeck::api::rotation_batch::DeploymentRolloutState;
    let mut config = test_config("engine-pod-0");
    config.max_parallel_rollouts = 1;
    let world = world(AppOptions::default(), config.clone()).await;
    let monitor = Monitor::start(&world.sandbox);
    world.rotate("bookshop-uaa").await;
    world.sandbox.wait_phase("bookshop", BatchPhase::RollingOut, Duration::from_secs(60)).await;
    eventually("second deployment updated", Duration::from_secs(60), || async {
        world.count("update deployments") == 2
    })
    .await;
    let World { sandbox, engine, simulation } = world;
    engine.kill();
    let stored = sandbox.batches("bookshop").await.pop().and_then(|b| b.status).expect("a rolling batch's status");
    assert_eq!(stored.phase, BatchPhase::RollingOut);
    let queued = stored.deployments.iter().filter(|d| d.state == Some(DeploymentRolloutState::Queued)).count();
    assert_eq!(queued, 1, "the second start is not written yet: {:?}", stored.deployments);
    let engine = RunningEngine::start(sandbox.client(), config).await;
    engine.wait_for_role(Role::Leader).await;
    let world = World { sandbox, engine, simulation };
    world.sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(240)).await;
    monitor.finish(true).await;
    world.assert_one_clean_rollout().await;
    world.stop().await;
}

/// Real time: lease expiry is judged by the wall clock, which paused tokio time cannot move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_losing_its_lease_mid_rollout_stops_writing_and_the_next_leader_finishes() {
    let config = |identity: &str| {
        let mut config = real_time_config(identity, 3, 1);
        config.max_parallel_rollouts = 1;
        config
    };
    let (sandbox, simulation) = slow_cluster(20, 4.0);
    let first = RunningEngine::start(sandbox.client(), config("engine-a")).await;
    first.wait_for_role(Role::Leader).await;
    sandbox.clear_requests();
    let monitor = Monitor::start(&sandbox);
    sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    sandbox.wait_phase("bookshop", BatchPhase::RollingOut, Duration::from_secs(30)).await;
    let updates = || logged_workload_writes(&sandbox).iter().filter(|w| *w == "update deployments").count();
    eventually("first Deployment updated", Duration::from_secs(30), || async { updates() == 1 }).await;

    // Someone else takes the lease (a partitioned leader whose lease expired looks the same).
    let mut lease = sandbox.get("coordination.k8s.io", "leases", "default", "capdeck-engine").expect("lease");
    let now = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    lease["spec"]["holderIdentity"] = json!("intruder");
    lease["spec"]["acquireTime"] = json!(now);
    lease["spec"]["renewTime"] = json!(now);
    // Held for an hour: however slow the machine, it cannot lapse inside the no-write check below.
    lease["spec"]["leaseDurationSeconds"] = json!(3600);
    sandbox.load([lease]).expect("stolen lease");
    first.wait_for_role(Role::Observer).await;
    // Writes in flight when the role flipped may land; after that, nothing until a leader returns.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let writes_when_lost = logged_workload_writes(&sandbox).len();
    let phase_when_lost = sandbox.batches("bookshop").await.pop().map(|b| b.phase());
    assert_eq!(phase_when_lost, Some(BatchPhase::RollingOut), "the batch stays resumable");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(logged_workload_writes(&sandbox).len(), writes_when_lost, "an observer writes nothing");

    // The intruder stops renewing: its Lease lapses (renewed an hour ago, 6 s long), and a
    // leader (the same engine or a new one) finishes.
    let mut lease = sandbox.get("coordination.k8s.io", "leases", "default", "capdeck-engine").expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "intruder", "nobody takes a Lease held for an hour");
    let long_ago = k8s_openapi::jiff::Timestamp::from_second(k8s_openapi::jiff::Timestamp::now().as_second() - 3600)
        .expect("time")
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    lease["spec"]["renewTime"] = json!(long_ago);
    lease["spec"]["leaseDurationSeconds"] = json!(6);
    sandbox.load([lease]).expect("lapsed lease");
    let second = RunningEngine::start(sandbox.client(), config("engine-b")).await;
    sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(60)).await;
    monitor.finish(true).await;
    assert_two_rolled_once(&sandbox);
    first.stop().await;
    second.stop().await;
    simulation.cancel();
}

/// Real time and a real process: `capdeck --daemon` is killed with SIGKILL mid-rollout (no
/// lease release, no cleanup), and a new daemon process finishes the batch once the dead one's
/// lease (15 s) expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_process_killed_mid_rollout_and_restarted() {
    let (sandbox, simulation) = slow_cluster(30, 5.0);
    let (_served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let daemon = |name: &str| {
        let log = std::fs::File::create(dir.path().join(format!("{name}.log"))).expect("log file");
        let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
            .args(["--daemon", "--health-addr", "127.0.0.1:0", "--max-parallel-rollouts", "1", "-A"])
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_NAMESPACE", "default")
            .env("POD_NAME", name)
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::from(log))
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("daemon starts");
        common::KillOnDrop(child)
    };
    let leader = || {
        sandbox
            .get("coordination.k8s.io", "leases", "default", "capdeck-engine")
            .and_then(|lease| lease.pointer("/spec/holderIdentity").and_then(|h| h.as_str()).map(str::to_string))
            .unwrap_or_default()
    };
    let mut first = daemon("capdeck-0");
    eventually("the first daemon leads", Duration::from_secs(60), || async { leader().starts_with("capdeck-0") }).await;
    sandbox.clear_requests();
    let monitor = Monitor::start(&sandbox);
    sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    eventually("a batch", Duration::from_secs(30), || async { !sandbox.batches("bookshop").await.is_empty() }).await;
    let batch = sandbox.batches("bookshop").await.pop().expect("batch");
    let name = kube::ResourceExt::name_any(&batch);
    let client = sandbox.client();
    let force = capdeck::actions::BatchAction::Force { approve: true };
    let now = k8s_openapi::jiff::Timestamp::now();
    capdeck::actions::act(&client, NS, &name, force, "sre", Some("fault test"), now).await.expect("forced");
    let updates = || logged_workload_writes(&sandbox).iter().filter(|w| *w == "update deployments").count();
    eventually("first Deployment updated", Duration::from_secs(60), || async { updates() == 1 }).await;
    // The pass writes the Deployment first and the batch's status after it: wait for both.
    eventually("the batch says RollingOut", Duration::from_secs(30), || async {
        sandbox.batches("bookshop").await.pop().map(|b| b.phase()) == Some(BatchPhase::RollingOut)
    })
    .await;

    first.kill();
    let _second = daemon("capdeck-1");
    eventually("the second daemon leads", Duration::from_secs(60), || async { leader().starts_with("capdeck-1") })
        .await;
    eventually("the batch succeeds", Duration::from_secs(120), || async {
        sandbox.batches("bookshop").await.pop().map(|b| b.phase()) == Some(BatchPhase::Succeeded)
    })
    .await;
    monitor.finish(true).await;
    assert_two_rolled_once(&sandbox);
    simulation.cancel();
}

/// The checks above can fail: each invariant, broken on purpose, is reported.
#[tokio::test(start_paused = true)]
async fn the_invariant_checks_catch_what_they_guard() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Api, DeleteParams, PostParams};

    let sandbox = current_sandbox(&AppOptions::default());
    let monitor = Monitor::start(&sandbox);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(monitor.violations().is_empty(), "{:#?}", monitor.violations());

    let client = sandbox.client();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let mut router = deployments.get("bookshop-v1-router").await.expect("router");
    if let Some(pod) = router.spec.as_mut().and_then(|spec| spec.template.spec.as_mut()) {
        pod.containers[0].env_from = None;
    }
    deployments.replace("bookshop-v1-router", &PostParams::default(), &router).await.expect("updated");
    let secrets: Api<Secret> = Api::namespaced(client, NS);
    secrets.delete("bookshop-v1-srv-go001", &DeleteParams::default()).await.expect("deleted");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let violations = monitor.violations();
    assert!(violations.iter().any(|v| v.contains("router/") && v.contains("lost its envFrom")), "{violations:#?}");
    assert!(violations.iter().any(|v| v.contains("bookshop-go001") || v.contains("srv-go001")), "{violations:#?}");
    // One update of the router and no batch that restarts it: rolled once too often.
    let broken = common::invariants::rolled_more_than_once_per_batch(&sandbox);
    assert_eq!(broken, vec!["bookshop-v1-router was updated 1 times for 0 batch restarts".to_string()]);
    // A batch left open.
    sandbox
        .load([json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
        "metadata": {"name": "open", "namespace": NS},
        "spec": {"application": "bookshop", "secrets": [], "windowEnd": "2026-11-22T00:00:00Z"},
        "status": {"phase": "RollingOut"}})])
        .expect("batch");
    let open = common::invariants::open_batches(&sandbox);
    assert_eq!(open, vec!["batch Some(\"open\") ended in RollingOut".to_string()]);
}
