//! The engine end to end against the sandbox: each test is a story (docs/BATCHES.md). Time is
//! paused tokio time, so a 30 s window costs nothing.

use std::time::Duration;

use crate::common::eventually;
use crate::common::fixtures::{
    AppOptions, EngineWorld, NS, RunningEngine, application, assert_two_rolled_once, batches, current_sandbox,
    make_current, phase_of, real_time_config, test_config, vcap_of, vcap_payload, wait_phase, workload_writes,
};
use capdeck::actions::{BatchAction, act};
use capdeck::api::BatchPhase;
use capdeck::api::rotation_batch::{DeploymentAction, DeploymentRolloutState};
use capdeck::engine::Role;
use capdeck::sandbox::Sandbox;
use kube::ResourceExt;

type World = EngineWorld;

async fn world(apps: &[AppOptions]) -> World {
    EngineWorld::start(apps, test_config("engine-a")).await
}

#[tokio::test(start_paused = true)]
async fn rotation_batches_then_rolls_out_and_removes_old_secrets_after_completion() {
    let world = world(&[AppOptions::default()]).await;
    let sandbox = &world.sandbox;
    let before_srv = vcap_of(sandbox, "bookshop-v1-srv");
    let before_router = vcap_of(sandbox, "bookshop-v1-router");
    sandbox.clear_requests();

    sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    wait_phase(sandbox, "bookshop", BatchPhase::Collecting, Duration::from_secs(10)).await;
    let batch = batches(sandbox, "bookshop").pop().expect("batch");
    assert_eq!(batch.spec.secrets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), vec!["bookshop-uaa"]);
    assert_eq!(batch.labels().get("capdeck.dev/application").map(String::as_str), Some("bookshop"));
    // Nothing rolls while the window is open.
    assert_eq!(vcap_of(sandbox, "bookshop-v1-srv"), before_srv);

    // A second rotation inside the window joins the same batch.
    sandbox.rotate_secret(NS, "bookshop-db").expect("rotated");
    eventually("db joins the batch", Duration::from_secs(10), || async {
        batches(sandbox, "bookshop").last().is_some_and(|b| b.spec.secrets.len() == 2)
    })
    .await;
    assert_eq!(batches(sandbox, "bookshop").len(), 1);

    wait_phase(sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    let batch = batches(sandbox, "bookshop").pop().expect("batch");
    let status = batch.status.clone().expect("status");
    assert_eq!(status.progress.as_deref(), Some("2/2"));
    assert_eq!(status.tenants, Some(1));
    for deployment in &status.deployments {
        assert_eq!(deployment.action, DeploymentAction::Restart);
        assert_eq!(deployment.state, Some(DeploymentRolloutState::Complete), "{deployment:?}");
    }
    let after_srv = vcap_of(sandbox, "bookshop-v1-srv");
    let after_router = vcap_of(sandbox, "bookshop-v1-router");
    assert!(after_srv.starts_with("bookshop-v1-srv-") && after_srv != before_srv);
    assert!(after_router != before_router);
    // Every container and initContainer points at the new secret, which holds the new credentials.
    let deployment = sandbox.get("apps", "deployments", NS, "bookshop-v1-srv").expect("deployment");
    assert_eq!(
        deployment.pointer("/spec/template/spec/initContainers/0/envFrom/0/secretRef/name").and_then(|v| v.as_str()),
        Some(after_srv.as_str())
    );
    assert!(vcap_payload(sandbox, &after_srv).contains("rotated-"), "new payload carries the rotated credential");
    // The new secret is owned by the version and labelled like upstream's.
    let secret = sandbox.get("", "secrets", NS, &after_srv).expect("secret");
    assert_eq!(
        secret.pointer("/metadata/ownerReferences/0/kind").and_then(|v| v.as_str()),
        Some("CAPApplicationVersion")
    );
    assert_eq!(
        secret.pointer("/metadata/labels/sme.sap.com~1secret-owner-hash").and_then(|v| v.as_str()),
        Some(capdeck::vcap::secret_owner_hash(NS, "bookshop-v1", "bookshop-v1-srv").as_str())
    );
    // Old secrets are gone only now, after completion.
    assert!(sandbox.get("", "secrets", NS, &before_srv).is_none());
    assert!(sandbox.get("", "secrets", NS, &before_router).is_none());
    // Writes per rotated Deployment: create Secret, update Deployment, delete old Secret.
    assert_two_rolled_once(sandbox);
    // Events on the application tell the story.
    let events: Vec<String> = sandbox
        .list("events.k8s.io", "events")
        .iter()
        .filter_map(|e| e["reason"].as_str().map(str::to_string))
        .collect();
    for reason in ["WindowOpen", "RollingOut", "RolloutComplete"] {
        assert!(events.iter().any(|e| e == reason), "missing event {reason}: {events:?}");
    }
    world.engine.stop().await;
    world.simulation.cancel();
}

#[tokio::test(start_paused = true)]
async fn start_up_with_everything_current_writes_nothing() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    sandbox.load(application(&AppOptions::default())).expect("fixture");
    sandbox.load(application(&AppOptions { name: "other", ..AppOptions::default() })).expect("fixture");
    make_current(&sandbox);
    sandbox.clear_requests();
    let engine = RunningEngine::start(sandbox.client(), test_config("engine-a")).await;
    engine.wait_for_role(Role::Leader).await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(workload_writes(&sandbox), Vec::<String>::new());
    assert!(batches(&sandbox, "bookshop").is_empty());
    engine.stop().await;
}

#[tokio::test(start_paused = true)]
async fn start_up_recheck_opens_a_batch_only_for_real_differences() {
    let sandbox = current_sandbox(&AppOptions::default());
    // While no engine ran, the uaa secret rotated: srv and router are out of date.
    sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    let cancel = tokio_util::sync::CancellationToken::new();
    sandbox.simulate_workloads(Default::default(), cancel.clone());
    let engine = RunningEngine::start(sandbox.client(), test_config("engine-a")).await;
    engine.wait_for_role(Role::Leader).await;
    wait_phase(&sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(180)).await;
    let batch = batches(&sandbox, "bookshop").pop().expect("batch");
    // The re-check cannot know which input changed, only that the payload differs: the batch
    // lists every Secret the out-of-date Deployments consume.
    assert_eq!(
        batch.spec.secrets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        vec!["bookshop-db", "bookshop-uaa"]
    );
    assert_eq!(batches(&sandbox, "bookshop").len(), 1);
    assert_eq!(batch.status.map(|s| s.progress), Some(Some("2/2".to_string())));
    engine.stop().await;
    cancel.cancel();
}

#[tokio::test(start_paused = true)]
async fn manual_approval_waits_until_approved() {
    let world = world(&[AppOptions { manual: true, ..AppOptions::default() }]).await;
    let sandbox = &world.sandbox;
    let before = vcap_of(sandbox, "bookshop-v1-srv");
    sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    wait_phase(sandbox, "bookshop", BatchPhase::AwaitingApproval, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(phase_of(sandbox, "bookshop"), Some(BatchPhase::AwaitingApproval));
    assert_eq!(vcap_of(sandbox, "bookshop-v1-srv"), before, "nothing rolls without approval");
    let batch = batches(sandbox, "bookshop").pop().expect("batch");
    assert!(batch.spec.approval.as_ref().is_some_and(|a| a.required));
    let status = batch.status.clone().expect("status");
    assert_eq!(status.conditions[0].reason, "AwaitingApproval");
    assert_eq!(status.deployments.iter().filter(|d| d.state == Some(DeploymentRolloutState::Queued)).count(), 2);

    sandbox.set_user("alice@example.com");
    let report = act(
        &sandbox.client(),
        NS,
        &batch.name_any(),
        BatchAction::Approve,
        "alice@example.com",
        Some("change 4711"),
        k8s_openapi::jiff::Timestamp::now(),
    )
    .await
    .expect("approve");
    assert_eq!(report.phase_before, BatchPhase::AwaitingApproval);
    wait_phase(sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    let batch = batches(sandbox, "bookshop").pop().expect("batch");
    let approval = batch.spec.approval.clone().expect("approval");
    assert_eq!(approval.approved_by.as_deref(), Some("alice@example.com"));
    assert_eq!(approval.reason.as_deref(), Some("change 4711"));
    assert_ne!(vcap_of(sandbox, "bookshop-v1-srv"), before);
    // A second approval is refused, not applied twice.
    let again = act(
        &sandbox.client(),
        NS,
        &batch.name_any(),
        BatchAction::Approve,
        "bob",
        None,
        k8s_openapi::jiff::Timestamp::now(),
    )
    .await;
    assert!(again.is_err());
    world.engine.stop().await;
    world.simulation.cancel();
}

async fn rotated_batch(world: &World, secret: &str) -> String {
    world.sandbox.rotate_secret(NS, secret).expect("rotated");
    eventually("a batch", Duration::from_secs(10), || async { !batches(&world.sandbox, "bookshop").is_empty() }).await;
    batches(&world.sandbox, "bookshop").pop().expect("batch").name_any()
}

fn now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

#[tokio::test(start_paused = true)]
async fn force_ends_the_window_now() {
    let world = world(&[AppOptions::default()]).await;
    let name = rotated_batch(&world, "bookshop-uaa").await;
    let started = tokio::time::Instant::now();
    act(&world.sandbox.client(), NS, &name, BatchAction::Force { approve: false }, "alice", Some("incident 42"), now())
        .await
        .expect("force");
    wait_phase(&world.sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(60)).await;
    let batch = batches(&world.sandbox, "bookshop").pop().expect("batch");
    assert!(started.elapsed() < Duration::from_secs(25), "rolled before the 30 s window would have ended");
    assert_eq!(batch.spec.force.as_ref().map(|f| f.by.as_str()), Some("alice"));
    let status = batch.status.expect("status");
    assert!(status.rollout_started_at.expect("started").0 < batch.spec.window_end.0);
    world.engine.stop().await;
}

#[tokio::test(start_paused = true)]
async fn force_on_a_manual_batch_still_needs_an_approval_unless_given_with_it() {
    let world = world(&[AppOptions { manual: true, ..AppOptions::default() }]).await;
    let name = rotated_batch(&world, "bookshop-uaa").await;
    act(&world.sandbox.client(), NS, &name, BatchAction::Force { approve: false }, "alice", None, now())
        .await
        .expect("force");
    wait_phase(&world.sandbox, "bookshop", BatchPhase::AwaitingApproval, Duration::from_secs(10)).await;
    world.sandbox.rotate_secret(NS, "bookshop-db").expect("rotated");
    // The new rotation supersedes the batch that waits for approval.
    eventually("superseded", Duration::from_secs(10), || async {
        batches(&world.sandbox, "bookshop").first().is_some_and(|b| b.phase() == BatchPhase::Superseded)
    })
    .await;
    let newer = batches(&world.sandbox, "bookshop").pop().expect("newer");
    assert_eq!(newer.spec.secrets.len(), 2, "carries the old rotation and the new one");
    assert_eq!(
        batches(&world.sandbox, "bookshop")[0].status.as_ref().and_then(|s| s.superseded_by.clone()),
        Some(newer.name_any())
    );
    act(&world.sandbox.client(), NS, &newer.name_any(), BatchAction::Force { approve: true }, "alice", None, now())
        .await
        .expect("force+approve");
    wait_phase(&world.sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(60)).await;
    world.engine.stop().await;
}

#[tokio::test(start_paused = true)]
async fn hold_freezes_past_the_window_and_release_resumes() {
    let world = world(&[AppOptions::default()]).await;
    let before = vcap_of(&world.sandbox, "bookshop-v1-srv");
    let name = rotated_batch(&world, "bookshop-uaa").await;
    act(&world.sandbox.client(), NS, &name, BatchAction::Hold, "bob", Some("release freeze"), now())
        .await
        .expect("hold");
    wait_phase(&world.sandbox, "bookshop", BatchPhase::Held, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(phase_of(&world.sandbox, "bookshop"), Some(BatchPhase::Held));
    assert_eq!(vcap_of(&world.sandbox, "bookshop-v1-srv"), before);
    let held = batches(&world.sandbox, "bookshop").pop().expect("batch");
    assert!(held.status.expect("status").conditions[0].message.contains("held by bob: release freeze"));
    let refused = act(&world.sandbox.client(), NS, &name, BatchAction::Hold, "carol", None, now()).await;
    assert!(refused.is_err(), "holding twice is refused");
    act(&world.sandbox.client(), NS, &name, BatchAction::Release, "bob", None, now()).await.expect("release");
    wait_phase(&world.sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(60)).await;
    assert_ne!(vcap_of(&world.sandbox, "bookshop-v1-srv"), before);
    world.engine.stop().await;
}

#[tokio::test(start_paused = true)]
async fn cancel_abandons_the_batch() {
    let world = world(&[AppOptions::default()]).await;
    let before = vcap_of(&world.sandbox, "bookshop-v1-srv");
    let name = rotated_batch(&world, "bookshop-uaa").await;
    act(&world.sandbox.client(), NS, &name, BatchAction::Cancel, "alice", Some("false alarm"), now())
        .await
        .expect("cancel");
    wait_phase(&world.sandbox, "bookshop", BatchPhase::Cancelled, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(vcap_of(&world.sandbox, "bookshop-v1-srv"), before);
    assert!(
        act(&world.sandbox.client(), NS, &name, BatchAction::Approve, "bob", None, now()).await.is_err(),
        "terminal batches refuse actions"
    );
    world.engine.stop().await;
}

#[tokio::test(start_paused = true)]
async fn cancel_mid_rollout_lets_rolling_deployments_finish_and_starts_nothing_new() {
    let sandbox = current_sandbox(&AppOptions { replicas: 20, ..AppOptions::default() });
    let cancel = tokio_util::sync::CancellationToken::new();
    sandbox.simulate_workloads(Default::default(), cancel.clone());
    let mut config = test_config("engine-a");
    config.max_parallel_rollouts = 1;
    let engine = RunningEngine::start(sandbox.client(), config).await;
    engine.wait_for_role(Role::Leader).await;
    sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    wait_phase(&sandbox, "bookshop", BatchPhase::RollingOut, Duration::from_secs(60)).await;
    let name = batches(&sandbox, "bookshop").pop().expect("batch").name_any();
    act(&sandbox.client(), NS, &name, BatchAction::Cancel, "alice", None, now()).await.expect("cancel");
    wait_phase(&sandbox, "bookshop", BatchPhase::Cancelled, Duration::from_secs(120)).await;
    let status = batches(&sandbox, "bookshop").pop().expect("batch").status.expect("status");
    let states: Vec<Option<DeploymentRolloutState>> = status.deployments.iter().map(|d| d.state.clone()).collect();
    assert_eq!(states.iter().filter(|s| **s == Some(DeploymentRolloutState::Complete)).count(), 1, "{states:?}");
    assert_eq!(states.iter().filter(|s| **s == Some(DeploymentRolloutState::Queued)).count(), 1, "{states:?}");
    engine.stop().await;
    cancel.cancel();
}

#[tokio::test(start_paused = true)]
async fn storm_guard_asks_for_approval_when_a_deployment_rolled_recently() {
    let world = world(&[AppOptions::default()]).await;
    rotated_batch(&world, "bookshop-uaa").await;
    wait_phase(&world.sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    world.sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated again");
    eventually("second batch", Duration::from_secs(10), || async { batches(&world.sandbox, "bookshop").len() == 2 })
        .await;
    wait_phase(&world.sandbox, "bookshop", BatchPhase::AwaitingApproval, Duration::from_secs(60)).await;
    let second = batches(&world.sandbox, "bookshop").pop().expect("batch");
    let condition = &second.status.as_ref().expect("status").conditions[0];
    assert_eq!(condition.reason, "StormGuard");
    assert!(condition.message.contains("bookshop-v1-srv"), "{}", condition.message);
    act(&world.sandbox.client(), NS, &second.name_any(), BatchAction::Approve, "alice", Some("intended"), now())
        .await
        .expect("approve");
    wait_phase(&world.sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    world.engine.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stalled_deployment_fails_the_batch_and_keeps_its_previous_secret() {
    let world = world(&[AppOptions { stall: &["srv"], ..AppOptions::default() }]).await;
    let srv_before = vcap_of(&world.sandbox, "bookshop-v1-srv");
    let router_before = vcap_of(&world.sandbox, "bookshop-v1-router");
    rotated_batch(&world, "bookshop-uaa").await;
    wait_phase(&world.sandbox, "bookshop", BatchPhase::Failed, Duration::from_secs(180)).await;
    let status = batches(&world.sandbox, "bookshop").pop().expect("batch").status.expect("status");
    assert_eq!(status.conditions[0].reason, "ProgressDeadlineExceeded");
    let srv = status.deployments.iter().find(|d| d.name == "bookshop-v1-srv").expect("srv");
    assert_eq!(srv.state, Some(DeploymentRolloutState::Stalled));
    assert!(world.sandbox.get("", "secrets", NS, &srv_before).is_some(), "old pods still use it");
    assert!(world.sandbox.get("", "secrets", NS, &router_before).is_none(), "the healthy rollout cleaned up");
    world.engine.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_application_that_opts_out_is_untouched_and_jobs_are_never_rolled() {
    let world =
        world(&[AppOptions::default(), AppOptions { name: "legacy", opted_in: false, ..AppOptions::default() }]).await;
    world.sandbox.clear_requests();
    world.sandbox.rotate_secret(NS, "legacy-uaa").expect("rotated");
    world.sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    wait_phase(&world.sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    assert!(batches(&world.sandbox, "legacy").is_empty());
    let writes = world.sandbox.writes();
    assert!(
        writes.iter().all(|w| w.info.name.as_deref().is_none_or(|n| !n.starts_with("legacy"))),
        "nothing of legacy written"
    );
    assert!(writes.iter().all(|w| w.info.resource != "jobs"), "no job touched");
    let batch = batches(&world.sandbox, "bookshop").pop().expect("batch");
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
    wait_phase(&world.sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
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
    wait_phase(&world.sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(120)).await;
    assert_eq!(batches(&world.sandbox, "bookshop").len(), 1, "a re-list is not a rotation");
    let writes = workload_writes(&world.sandbox);
    assert_eq!(writes.iter().filter(|w| *w == "update deployments").count(), 2, "{writes:#?}");
    world.engine.stop().await;
}

/// Real time: lease expiry is judged by the wall clock, which paused tokio time cannot move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_share_one_lease_and_roll_each_deployment_once() {
    let sandbox = current_sandbox(&AppOptions::default());
    let cancel = tokio_util::sync::CancellationToken::new();
    let fast = capdeck::sandbox::simulate::WorkloadSimulation {
        replicas_per_second: 20.0,
        tick: Duration::from_millis(50),
        ..Default::default()
    };
    sandbox.simulate_workloads(fast, cancel.clone());
    let config = |identity: &str| {
        let mut config = real_time_config(identity, 4, 2);
        // Both batches roll the same Deployments seconds apart; the storm guard has its own story.
        config.min_rollout_interval = Duration::ZERO;
        config
    };
    let first = RunningEngine::start(sandbox.client(), config("engine-a")).await;
    first.wait_for_role(Role::Leader).await;
    let second = RunningEngine::start(sandbox.client(), config("engine-b")).await;
    second.wait_for_role(Role::Observer).await;
    sandbox.clear_requests();
    sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    wait_phase(&sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(30)).await;
    assert_eq!(batches(&sandbox, "bookshop").len(), 1);
    let writes = workload_writes(&sandbox);
    assert_eq!(writes.iter().filter(|w| *w == "update deployments").count(), 2, "{writes:#?}");
    assert_eq!(writes.iter().filter(|w| *w == "create rotationbatches").count(), 1);
    assert_eq!(second.role(), Role::Observer);
    // The leader stops gracefully and releases the lease: the other one takes over.
    first.stop().await;
    second.wait_for_role(Role::Leader).await;
    sandbox.rotate_secret(NS, "bookshop-db").expect("rotated");
    eventually("second batch", Duration::from_secs(10), || async { batches(&sandbox, "bookshop").len() == 2 }).await;
    wait_phase(&sandbox, "bookshop", BatchPhase::Succeeded, Duration::from_secs(30)).await;
    second.stop().await;
    cancel.cancel();
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

/// Engines of two different namespaces do not overlap: both lead, each on its own Lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engines_of_different_namespaces_both_lead() {
    let sandbox = current_sandbox(&AppOptions::default());
    let config = |identity: &str, lease: &str| {
        let mut config = real_time_config(identity, 4, 2);
        config.lease.name = lease.into();
        config
    };
    let shop = RunningEngine::start_in(
        sandbox.client(),
        capdeck::cluster::Scope::Namespace("cap-shop".into()),
        config("shop", "capdeck-shop"),
    )
    .await;
    let hr = RunningEngine::start_in(
        sandbox.client(),
        capdeck::cluster::Scope::Namespace("cap-hr".into()),
        config("hr", "capdeck-hr"),
    )
    .await;
    shop.wait_for_role(Role::Leader).await;
    hr.wait_for_role(Role::Leader).await;
    shop.stop().await;
    hr.stop().await;
}

/// sap-btp-service-operator's old-credential copies (`<secret>-<6 chars>`, labelled stale) are
/// never rotations: neither a new copy nor a change to a Secret carrying the stale label opens a
/// batch. A rotation of another consumed Secret afterwards still does.
#[tokio::test(start_paused = true)]
async fn stale_secrets_are_never_rotations() {
    use k8s_openapi::api::core::v1::Secret;
    let world = world(&[AppOptions::default()]).await;
    let secrets: kube::Api<Secret> = kube::Api::namespaced(world.sandbox.client(), NS);
    let stale_label = serde_json::json!({"metadata": {"labels": {"services.cloud.sap.com/stale": "old-binding-id"}}});
    let copy: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bookshop-uaa-ab12c", "namespace": NS,
                     "labels": {"services.cloud.sap.com/stale": "old-binding-id"}},
        "data": {"credentials": "e30="}}))
    .expect("secret");
    secrets.create(&Default::default(), &copy).await.expect("old copy created");
    // The consumed Secret itself marked stale, then its data changed.
    secrets
        .patch("bookshop-uaa", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&stale_label))
        .await
        .expect("labelled");
    world.sandbox.rotate_secret(NS, "bookshop-uaa").expect("changed");
    // A Secret without the label still rotates; the batch it opens holds only that Secret (the
    // engine compares every consumed Secret on every pass, so a stale change counted as a
    // rotation would be in it too, or in a batch of its own).
    world.sandbox.rotate_secret(NS, "bookshop-db").expect("rotated");
    eventually("a batch", Duration::from_secs(10), || async { !batches(&world.sandbox, "bookshop").is_empty() }).await;
    let opened = batches(&world.sandbox, "bookshop");
    assert_eq!(opened.len(), 1, "{opened:?}");
    assert_eq!(opened[0].spec.secrets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["bookshop-db"]);
    world.engine.stop().await;
    world.simulation.cancel();
}
