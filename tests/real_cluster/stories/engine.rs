//! The engine's stories on a world: the same body on the sandbox and on kube-apiserver. Those the
//! sandbox suite also told (rollout, start-up, approval, force, hold, cancel, storm guard, two
//! engines) are told here once, with the assertions of both tellings; the sandbox suite keeps
//! only the stories that need its fault injection or request log (docs/TESTING.md).

use std::time::Duration;

use capdeck::actions::{BatchAction, act};
use capdeck::api::rotation_batch::{DeploymentAction, DeploymentRolloutState};
use capdeck::api::{BatchPhase, RotationBatch};
use capdeck::engine::Role;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;

use crate::common::fixtures::AppOptions;
use crate::common::story_world::StoryWorld as _;
use crate::control_plane::Profile;
use crate::setup::{Engine, EngineExt as _, engine_config, install_service_binding_crd, load_current, service_binding};
use crate::world::{Backend, Fate, Workloads, World, config_for, eventually};

const LONG: Duration = Duration::from_secs(60);
/// The window of the stories that do not choose their own.
const WINDOW: Duration = Duration::from_secs(2);

struct Running {
    world: World,
    engine: Engine,
    workloads: Workloads,
}

impl Running {
    /// The value of `series` (its name with labels, e.g. `capdeck_batch_failed{…}`) on the
    /// engine's `/metrics`, once a pass has set it (within 45 s: passes come at every change and
    /// at least once a minute).
    async fn metric(&self, series: &str) -> Option<i64> {
        eventually(&format!("{series} on the engine's /metrics"), Duration::from_secs(45), || async {
            if self.engine.metric(series).is_some() {
                return Ok(());
            }
            let family = series.split('{').next().unwrap_or(series);
            let text = self.engine.handle.as_ref().map(|h| h.metrics.encode()).unwrap_or_default();
            let seen: Vec<&str> = text.lines().filter(|line| line.starts_with(family)).collect();
            Err(format!("its series: {seen:?}"))
        })
        .await;
        self.engine.metric(series)
    }

    fn series(&self, metric: &str, extra: &str) -> String {
        format!("{metric}{{namespace=\"{}\",application=\"bookshop\"{extra}}}", self.world.ns)
    }
}

async fn running(backend: Backend, test: &str, options: &AppOptions) -> Running {
    running_with(backend, test, options, WINDOW).await
}

async fn running_with(backend: Backend, test: &str, options: &AppOptions, window: Duration) -> Running {
    running_configured(backend, test, std::slice::from_ref(options), |config| config.rollout_delay = window).await
}

/// A world with the applications loaded, the workload controllers, and a leading engine whose settings
/// (a 2 s window unless changed) `configure` adjusts.
async fn running_configured(
    backend: Backend,
    test: &str,
    apps: &[AppOptions],
    configure: impl FnOnce(&mut capdeck::engine::config::EngineConfig),
) -> Running {
    let world = World::new(backend, test).await;
    for options in apps {
        load_current(&world, options).await;
    }
    let workloads = world.workloads();
    let mut config = engine_config(&world, "engine-a");
    configure(&mut config);
    let engine = Engine::on(&world, config).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    Running { world, engine, workloads }
}

impl Running {
    async fn stop(self) {
        self.engine.stop().await;
        self.workloads.stop().await;
    }
}

/// Let `batch`'s window end and the engine make a few passes after it (every 200 ms): what
/// paused time did in the sandbox suite by sleeping minutes past the window.
async fn past_the_window(batch: &RotationBatch) {
    let left = batch.spec.window_end.0.as_second() - Timestamp::now().as_second();
    let left = Duration::from_secs(u64::try_from(left.max(0)).unwrap_or(0));
    tokio::time::sleep(left + 2 * WINDOW).await;
}

/// Rotation → batch → window → rollout → Succeeded → the previous VCAP Secrets deleted, at
/// exactly three writes per rotated Deployment. A second rotation inside the window joins the
/// batch and nothing rolls while it is open; every container and initContainer ends on a new
/// VCAP Secret that carries the rotated credentials, is owned by the version and labelled like
/// upstream's. The batch tells the story, not Events: no status is written while it merely
/// collects, and nobody acted, so there is no Event (the routine WindowOpen, RollingOut and
/// RolloutComplete are in the batch's status and the engine's log).
pub async fn rotation_rolls_out_then_deletes_previous_secrets(backend: Backend) {
    // A 20 s window: the story checks the batch while it collects and rotates again inside it.
    // On a loaded machine a 2 s window once passed between two polls (Collecting → Succeeded
    // unseen), and a 10 s one before the second rotation.
    let r = running_with(backend, "rotation-rolls-out", &AppOptions::default(), Duration::from_secs(20)).await;
    let w = &r.world;
    let before_srv = w.vcap_of("bookshop-v1-srv").await;
    let before_router = w.vcap_of("bookshop-v1-router").await;
    assert!(before_srv.ends_with("-go001"), "{before_srv}");

    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Collecting, LONG).await;
    assert_eq!(batch.spec.secrets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), vec!["bookshop-uaa"]);
    assert_eq!(batch.labels().get("capdeck.dev/application").map(String::as_str), Some("bookshop"));
    assert_eq!(w.vcap_of("bookshop-v1-srv").await, before_srv, "nothing rolls while the window is open");
    assert!(batch.status.is_none(), "no status is written while the batch merely collects: {:?}", batch.status);
    // A second rotation inside the window joins the same batch.
    w.rotate_secret("bookshop-db").await;
    let rotated_at = Timestamp::now();
    eventually("db joins the batch", LONG, || async {
        let batches = w.batches("bookshop").await;
        if batches.last().is_some_and(|b| b.spec.secrets.len() == 2) {
            return Ok(());
        }
        let seen: Vec<String> = batches
            .iter()
            .map(|b| {
                let secrets: Vec<&str> = b.spec.secrets.iter().map(|s| s.name.as_str()).collect();
                format!("{} {secrets:?} collecting until {}", b.name_any(), b.spec.window_end.0)
            })
            .collect();
        Err(format!("db rotated at {rotated_at}; batches {seen:?}"))
    })
    .await;
    assert_eq!(w.batches("bookshop").await.len(), 1);
    let joined = w.batches("bookshop").await.pop().expect("the batch");
    if joined.spec.window_end.0 > Timestamp::now() {
        assert!(joined.status.is_none(), "a join writes no status either: {:?}", joined.status);
    }

    let batch = w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    let status = batch.status.clone().expect("status");
    assert!(status.rollout_started_at.is_some() && status.completed_at.is_some(), "{status:?}");
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready").expect("Ready");
    assert_eq!(ready.reason, "RolloutComplete", "{ready:?}");
    assert_eq!(status.progress.as_deref(), Some("2/2"));
    assert_eq!(status.tenants, Some(1));
    for deployment in &status.deployments {
        assert_eq!(deployment.action, DeploymentAction::Restart);
        assert_eq!(deployment.state, Some(DeploymentRolloutState::Complete), "{deployment:?}");
    }
    let after_srv = w.vcap_of("bookshop-v1-srv").await;
    assert!(after_srv.starts_with("bookshop-v1-srv-") && after_srv != before_srv, "{after_srv}");
    assert_ne!(w.vcap_of("bookshop-v1-router").await, before_router);
    // Every container and initContainer points at the new Secret, which holds the new credentials.
    let deployment = w.deployment("bookshop-v1-srv").await.expect("deployment");
    assert_eq!(
        deployment.pointer("/spec/template/spec/initContainers/0/envFrom/0/secretRef/name").and_then(|v| v.as_str()),
        Some(after_srv.as_str())
    );
    assert!(w.vcap_payload(&after_srv).await.contains("rotated-"), "the new payload carries the rotated credential");
    // The new Secret is owned by the version and labelled like upstream's.
    let secret = w.secret(&after_srv).await.expect("secret");
    assert_eq!(
        secret.pointer("/metadata/ownerReferences/0/kind").and_then(|v| v.as_str()),
        Some("CAPApplicationVersion")
    );
    assert_eq!(
        secret.pointer("/metadata/labels/sme.sap.com~1secret-owner-hash").and_then(|v| v.as_str()),
        Some(capdeck::vcap::secret_owner_hash(&w.ns, "bookshop-v1", "bookshop-v1-srv").as_str())
    );
    // Previous Secrets are gone only now, after completion (each Deployment's before its batch is
    // Succeeded).
    assert!(w.secret(&before_srv).await.is_none(), "{before_srv} kept");
    assert!(w.secret(&before_router).await.is_none(), "{before_router} kept");
    // Writes per rotated Deployment: create Secret, update Deployment, delete old Secret.
    let writes = r.engine.workload_writes();
    let count = |k: &str| writes.get(k).copied().unwrap_or(0);
    assert_eq!(
        (count("create secrets"), count("update deployments"), count("delete secrets")),
        (2, 2, 2),
        "{writes:#?}"
    );
    // Nobody acted and nothing failed: no Event. The pass that wrote Succeeded announces right
    // after its write, so one more pass means all of its Events were sent.
    r.engine.wait_for_another_pass().await;
    let events = events_of(w).await;
    assert!(events.is_empty(), "the happy path is told by the batch and the log, not Events: {events:?}");
    assert_eq!(r.engine.writes().get("create events").copied().unwrap_or(0), 0, "{:#?}", r.engine.writes());
    r.stop().await;
}

/// An engine starting on a cluster where everything is current (two applications) writes
/// nothing, in its first pass and for windows after it.
pub async fn start_up_with_everything_current_writes_nothing(backend: Backend) {
    let apps = [AppOptions::default(), AppOptions { name: "other", ..AppOptions::default() }];
    let r = running_configured(backend, "start-up-current", &apps, |_| {}).await;
    // The start-up re-check runs in the first pass as leader, which writes whatever it opens.
    r.engine.wait_for_first_pass_as_leader().await;
    // Later passes (every 200 ms) past a few windows open nothing either.
    tokio::time::sleep(3 * WINDOW).await;
    let writes = r.engine.workload_writes();
    assert!(writes.is_empty(), "start-up wrote: {writes:#?}");
    assert!(r.world.batches("bookshop").await.is_empty());
    assert!(r.world.batches("other").await.is_empty());
    r.stop().await;
}

/// A manual-policy batch waits for an approval, past its window, with nothing rolled and every
/// Deployment queued; `act` approves it and it rolls; a second approval is refused.
pub async fn manual_approval_then_rolls(backend: Backend) {
    let r = running(backend, "manual-approval", &AppOptions { manual: true, ..AppOptions::default() }).await;
    let w = &r.world;
    let before = w.vcap_of("bookshop-v1-srv").await;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    past_the_window(&batch).await;
    assert_eq!(w.phase_of("bookshop").await, Some(BatchPhase::AwaitingApproval));
    assert_eq!(w.vcap_of("bookshop-v1-srv").await, before, "nothing rolls without approval");
    let batch = w.batches("bookshop").await.pop().expect("batch");
    assert!(batch.spec.approval.as_ref().is_some_and(|a| a.required));
    let status = batch.status.clone().expect("status");
    assert_eq!(status.conditions.first().map(|c| c.reason.as_str()), Some("AwaitingApproval"), "{status:?}");
    assert_eq!(status.deployments.iter().filter(|d| d.state == Some(DeploymentRolloutState::Queued)).count(), 2);
    // The alert's metric: how long it has waited, per application.
    let waited = r.metric(&r.series("capdeck_batch_awaiting_approval_seconds", "")).await;
    assert!(waited.is_some_and(|seconds| (0..600).contains(&seconds)), "{waited:?}");

    let report =
        act(&w.client, &w.ns, &batch.name_any(), BatchAction::Approve, "alice", Some("CHG-1"), Timestamp::now())
            .await
            .expect("approve");
    assert_eq!(report.by, "alice");
    assert_eq!(report.phase_before, BatchPhase::AwaitingApproval);
    let batch = w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    let series = r.series("capdeck_batch_awaiting_approval_seconds", "");
    eventually("the wait metric gone once approved", Duration::from_secs(45), || async {
        r.engine.metric(&series).is_none()
    })
    .await;
    let approval = batch.spec.approval.clone().expect("approval");
    assert_eq!(approval.approved_by.as_deref(), Some("alice"));
    assert_eq!(approval.reason.as_deref(), Some("CHG-1"));
    assert_ne!(w.vcap_of("bookshop-v1-srv").await, before);
    // A second approval is refused, not applied twice.
    let again = act(&w.client, &w.ns, &batch.name_any(), BatchAction::Approve, "bob", None, Timestamp::now()).await;
    assert!(again.is_err(), "a second approval was applied");
    r.stop().await;
}

/// Force ends the window at once, under a 1 h window: an automatic batch rolls long before it
/// would have ended (its rollout starts before the window's end), and a manual batch forced with
/// an approval rolls immediately too.
pub async fn force_ends_the_window_now_and_with_approval_rolls_a_manual_batch(backend: Backend) {
    let apps = [AppOptions::default(), AppOptions { name: "orders", manual: true, ..AppOptions::default() }];
    let r =
        running_configured(backend, "force", &apps, |config| config.rollout_delay = Duration::from_secs(3600)).await;
    let w = &r.world;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Collecting, LONG).await;
    let force = BatchAction::Force { approve: false };
    act(&w.client, &w.ns, &batch.name_any(), force, "alice", Some("incident 42"), Timestamp::now())
        .await
        .expect("force");
    let batch = w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_eq!(batch.spec.force.as_ref().map(|f| f.by.as_str()), Some("alice"));
    let started = batch.status.as_ref().and_then(|s| s.rollout_started_at.clone()).expect("rollout started");
    assert!(started.0 < batch.spec.window_end.0, "rolled before the 1 h window would have ended");

    w.rotate_secret("orders-uaa").await;
    let batch = w.wait_phase("orders", BatchPhase::Collecting, LONG).await;
    let force = BatchAction::Force { approve: true };
    act(&w.client, &w.ns, &batch.name_any(), force, "alice", Some("hotfix"), Timestamp::now()).await.expect("force");
    let batch = w.wait_phase("orders", BatchPhase::Succeeded, LONG).await;
    assert_eq!(batch.spec.force.as_ref().map(|f| f.by.as_str()), Some("alice"));
    r.stop().await;
}

/// Hold keeps a batch from rolling: held, it stays so past its window and after an approval
/// (Held wins), with nothing rolled; a second hold is refused; release lets it go on.
pub async fn hold_then_release(backend: Backend) {
    let r = running(backend, "hold-release", &AppOptions { manual: true, ..AppOptions::default() }).await;
    let w = &r.world;
    let before = w.vcap_of("bookshop-v1-srv").await;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    let name = batch.name_any();
    act(&w.client, &w.ns, &name, BatchAction::Hold, "bob", Some("release freeze"), Timestamp::now())
        .await
        .expect("hold");
    let held = w.wait_phase("bookshop", BatchPhase::Held, LONG).await;
    let message = held.status.as_ref().and_then(|s| s.conditions.first()).map(|c| c.message.clone());
    assert!(message.as_deref().is_some_and(|m| m.contains("held by bob: release freeze")), "{message:?}");
    let refused = act(&w.client, &w.ns, &name, BatchAction::Hold, "carol", None, Timestamp::now()).await;
    assert!(refused.is_err(), "holding twice is refused");
    act(&w.client, &w.ns, &name, BatchAction::Approve, "alice", Some("ok"), Timestamp::now()).await.expect("approve");
    // Held wins over the approval: once the engine has observed the spec with the approval
    // (status.observedGeneration caught up), the batch is still held.
    eventually("the engine observes the approval", LONG, || async {
        let batch = w.batches("bookshop").await.into_iter().find(|b| b.name_any() == name);
        let observed = batch.as_ref().and_then(|b| b.status.as_ref()).and_then(|s| s.observed_generation);
        let generation = batch.as_ref().and_then(|b| b.metadata.generation);
        let approved = batch.as_ref().and_then(|b| b.spec.approval.as_ref()).is_some_and(|a| a.approved_by.is_some());
        if approved && observed.is_some() && observed == generation {
            Ok(())
        } else {
            Err(format!("approved {approved}, observedGeneration {observed:?} of {generation:?}"))
        }
    })
    .await;
    // Approved and past its window, the batch is still frozen.
    past_the_window(&held).await;
    assert_eq!(w.phase_of("bookshop").await, Some(BatchPhase::Held));
    assert_eq!(w.vcap_of("bookshop-v1-srv").await, before, "nothing rolls while held");
    act(&w.client, &w.ns, &name, BatchAction::Release, "bob", Some("go"), Timestamp::now()).await.expect("release");
    w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_ne!(w.vcap_of("bookshop-v1-srv").await, before);
    r.stop().await;
}

/// Cancel ends a batch: nothing rolls, past its window too, no Deployment is updated, and the
/// cancelled batch refuses further actions.
pub async fn cancel_rolls_nothing(backend: Backend) {
    let r = running(backend, "cancel", &AppOptions { manual: true, ..AppOptions::default() }).await;
    let w = &r.world;
    let before = w.vcap_of("bookshop-v1-srv").await;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    let name = batch.name_any();
    act(&w.client, &w.ns, &name, BatchAction::Cancel, "alice", Some("wrong secret"), Timestamp::now())
        .await
        .expect("cancel");
    let cancelled = w.wait_phase("bookshop", BatchPhase::Cancelled, LONG).await;
    past_the_window(&cancelled).await;
    assert_eq!(w.vcap_of("bookshop-v1-srv").await, before);
    let writes = r.engine.workload_writes();
    assert!(!writes.contains_key("update deployments"), "{writes:#?}");
    assert!(
        act(&w.client, &w.ns, &name, BatchAction::Approve, "bob", None, Timestamp::now()).await.is_err(),
        "terminal batches refuse actions"
    );
    r.stop().await;
}

/// A second rotation shortly after a rollout needs an approval (storm guard), naming the
/// Deployment that rolled recently; approved, it rolls.
pub async fn storm_guard_asks_for_approval(backend: Backend) {
    let r = running(backend, "storm-guard", &AppOptions::default()).await;
    let w = &r.world;
    w.rotate_secret("bookshop-uaa").await;
    w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    w.rotate_secret("bookshop-uaa").await;
    eventually("a second batch", LONG, || async { w.batches("bookshop").await.len() == 2 }).await;
    let batch = w.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    let condition = batch.status.as_ref().and_then(|s| s.conditions.first()).cloned().expect("condition");
    assert_eq!(condition.reason, "StormGuard", "{condition:?}");
    assert!(condition.message.contains("storm guard"), "{}", condition.message);
    assert!(condition.message.contains("bookshop-v1-srv"), "{}", condition.message);
    act(&w.client, &w.ns, &batch.name_any(), BatchAction::Approve, "alice", Some("intended"), Timestamp::now())
        .await
        .expect("approve");
    w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    r.stop().await;
}

/// While no engine ran, a consumed Secret rotated: the start-up re-check opens one batch for the
/// Deployments now out of date and rolls them. It cannot know which input changed, only that the
/// payload differs: the batch lists every Secret those Deployments consume.
pub async fn start_up_recheck_opens_a_batch_only_for_real_differences(backend: Backend) {
    let world = World::new(backend, "start-up-recheck").await;
    load_current(&world, &AppOptions::default()).await;
    world.rotate_secret("bookshop-uaa").await;
    let workloads = world.workloads();
    let engine = Engine::on(&world, engine_config(&world, "engine-a")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    let batch = world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_eq!(
        batch.spec.secrets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        vec!["bookshop-db", "bookshop-uaa"]
    );
    assert_eq!(world.batches("bookshop").await.len(), 1);
    assert_eq!(batch.status.and_then(|s| s.progress).as_deref(), Some("2/2"));
    engine.stop().await;
    workloads.stop().await;
}

/// Force on a manual batch ends its window but still needs an approval; a new rotation then
/// supersedes the waiting batch (the newer one carries both rotations), and force given with an
/// approval rolls that one.
pub async fn force_on_a_manual_batch_still_needs_an_approval_unless_given_with_it(backend: Backend) {
    let options = AppOptions { manual: true, ..AppOptions::default() };
    let r = running_with(backend, "force-manual", &options, Duration::from_secs(3600)).await;
    let w = &r.world;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Collecting, LONG).await;
    let force = BatchAction::Force { approve: false };
    act(&w.client, &w.ns, &batch.name_any(), force, "alice", None, Timestamp::now()).await.expect("force");
    w.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    w.rotate_secret("bookshop-db").await;
    // The new rotation supersedes the batch that waits for approval.
    eventually("superseded", LONG, || async {
        w.batches("bookshop").await.first().is_some_and(|b| b.phase() == BatchPhase::Superseded)
    })
    .await;
    let batches = w.batches("bookshop").await;
    let newer = batches.last().expect("newer");
    assert_eq!(newer.spec.secrets.len(), 2, "carries the old rotation and the new one");
    assert_eq!(batches[0].status.as_ref().and_then(|s| s.superseded_by.clone()), Some(newer.name_any()));
    let force = BatchAction::Force { approve: true };
    act(&w.client, &w.ns, &newer.name_any(), force, "alice", None, Timestamp::now()).await.expect("force+approve");
    w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    r.stop().await;
}

/// A cancel while Deployments roll (one at a time): the one rolling finishes, the queued one is
/// never started.
pub async fn cancel_mid_rollout_lets_rolling_deployments_finish_and_starts_nothing_new(backend: Backend) {
    let world = World::new(backend, "cancel-mid-rollout").await;
    // Slow rollouts, so the cancel lands while the first Deployment rolls.
    load_current(&world, &AppOptions { ready_after: Some("3s"), ..AppOptions::default() }).await;
    let workloads = world.workloads();
    let mut config = engine_config(&world, "engine-a");
    config.max_parallel_rollouts = 1;
    let engine = Engine::on(&world, config).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    world.rotate_secret("bookshop-uaa").await;
    let batch = world.wait_phase("bookshop", BatchPhase::RollingOut, LONG).await;
    act(&world.client, &world.ns, &batch.name_any(), BatchAction::Cancel, "alice", None, Timestamp::now())
        .await
        .expect("cancel");
    let batch = world.wait_phase("bookshop", BatchPhase::Cancelled, LONG).await;
    let status = batch.status.expect("status");
    let states: Vec<Option<DeploymentRolloutState>> = status.deployments.iter().map(|d| d.state.clone()).collect();
    assert_eq!(states.iter().filter(|s| **s == Some(DeploymentRolloutState::Complete)).count(), 1, "{states:?}");
    assert_eq!(states.iter().filter(|s| **s == Some(DeploymentRolloutState::Queued)).count(), 1, "{states:?}");
    engine.stop().await;
    workloads.stop().await;
}

/// A stalled Deployment, with nothing queued behind it for the failure guard to hold back (both
/// roll at once), ends the batch Failed: its previous VCAP Secret is kept for the old Pods, the
/// healthy Deployment's is deleted.
pub async fn a_stalled_deployment_fails_the_batch_and_keeps_its_previous_secret(backend: Backend) {
    let r = running(backend, "stalled-fails", &AppOptions { stall: &["srv"], ..AppOptions::default() }).await;
    let w = &r.world;
    let srv_before = w.vcap_of("bookshop-v1-srv").await;
    let router_before = w.vcap_of("bookshop-v1-router").await;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Failed, LONG).await;
    let status = batch.status.expect("status");
    assert_eq!(status.conditions.first().map(|c| c.reason.as_str()), Some("ProgressDeadlineExceeded"));
    let srv = status.deployments.iter().find(|d| d.name == "bookshop-v1-srv").expect("srv");
    assert_eq!(srv.state, Some(DeploymentRolloutState::Stalled));
    assert!(w.secret(&srv_before).await.is_some(), "old pods still use it");
    assert!(w.secret(&router_before).await.is_none(), "the healthy rollout cleaned up");
    assert_eq!(r.metric(&r.series("capdeck_batch_failed", "")).await, Some(1), "the alert's metric");
    r.stop().await;
}

/// sap-btp-service-operator's old-credential copies (`<secret>-<5 chars>`, labelled stale) are
/// never rotations: neither a new copy nor a change to a Secret carrying the stale label opens a
/// batch. A rotation of another consumed Secret afterwards still does.
pub async fn stale_secrets_are_never_rotations(backend: Backend) {
    use k8s_openapi::api::core::v1::Secret;
    let r = running(backend, "stale-secrets", &AppOptions::default()).await;
    let w = &r.world;
    let secrets: kube::Api<Secret> = kube::Api::namespaced(w.client.clone(), &w.ns);
    let stale_label = serde_json::json!({"metadata": {"labels": {"services.cloud.sap.com/stale": "old-binding-id"}}});
    let copy: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bookshop-uaa-ab12c", "labels": {"services.cloud.sap.com/stale": "old-binding-id"}},
        "data": {"credentials": "e30="}}))
    .expect("secret");
    secrets.create(&Default::default(), &copy).await.expect("old copy created");
    // The consumed Secret itself marked stale, then its data changed.
    secrets
        .patch("bookshop-uaa", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&stale_label))
        .await
        .expect("labelled");
    w.rotate_secret("bookshop-uaa").await;
    // A Secret without the label still rotates; the batch it opens holds only that Secret (the
    // engine compares every consumed Secret on every pass, so a stale change counted as a
    // rotation would be in it too, or in a batch of its own).
    w.rotate_secret("bookshop-db").await;
    eventually("a batch", LONG, || async { !w.batches("bookshop").await.is_empty() }).await;
    let opened = w.batches("bookshop").await;
    assert_eq!(opened.len(), 1, "{opened:?}");
    assert_eq!(opened[0].spec.secrets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["bookshop-db"]);
    r.stop().await;
}

/// A rotated Secret whose old credentials may be revoked 30 min from now, under a 1 h window and a
/// 15 min expected rollout: waiting would outlive them. `manual: false` — the batch stops waiting
/// for its window and rolls (`CredentialsExpiring`); `manual: true` — it asks for the approval at
/// once, as a Warning Event and condition, and the margin metric says how far below zero it is.
async fn expiring_credentials(backend: Backend, manual: bool) {
    let test = if manual { "creds-expiring-manual" } else { "creds-expiring-auto" };
    let world = World::new(backend, test).await;
    let options = AppOptions { manual, ..AppOptions::default() };
    load_current(&world, &options).await;
    let ns = world.ns.clone();
    let bindings = vec![
        service_binding(&ns, "bookshop-uaa", "bookshop-uaa", "30m", None),
        service_binding(&ns, "bookshop-uaa-k3x9q", "bookshop-uaa-k3x9q", "30m", Some("bookshop-uaa")),
    ];
    // The auto story installs sap-btp-service-operator before the engine starts; the manual one
    // after (on the sandbox the CRD is then new to the running engine, which watches for it).
    if !manual {
        install_service_binding_crd(&world).await;
        world.apply_objects(bindings.clone()).await;
    }
    let workloads = world.workloads();
    let mut config = engine_config(&world, "engine-a");
    config.rollout_delay = Duration::from_secs(3600);
    let engine = Engine::on(&world, config).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    if manual {
        install_service_binding_crd(&world).await;
        world.apply_objects(bindings).await;
        let stores = engine.stores.clone();
        eventually("the engine sees the ServiceBindings", LONG, || async {
            stores.service_bindings().is_some_and(|bindings| bindings.len() == 2)
        })
        .await;
    }
    let r = Running { world, engine, workloads };
    let w = &r.world;
    w.rotate_secret("bookshop-uaa").await;

    let expected = if manual { BatchPhase::AwaitingApproval } else { BatchPhase::Succeeded };
    let batch = w.wait_phase("bookshop", expected, LONG).await;
    let window_end = batch.spec.window_end.0;
    assert!(
        window_end.as_second() - Timestamp::now().as_second() > 3000,
        "the 1 h window was not shortened, it was not waited for: {window_end}"
    );
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(w.client.clone(), &ns);
    let find = || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|event| event.reason.as_deref() == Some("CredentialsExpiring"))
    };
    eventually("a CredentialsExpiring Event", LONG, || async { find().await.is_some() }).await;
    let expiring = find().await.expect("seen above");
    let note = expiring.note.clone().unwrap_or_default();
    // The minutes left when the engine judged (kubectl's format rounds down): 30 at once, fewer
    // on a slow machine; never more, never long after.
    let revocable_in = note
        .split_once("old credentials revocable in ")
        .and_then(|(_, rest)| rest.split_once("m, ").or_else(|| rest.split_once('m')))
        .and_then(|(minutes, _)| minutes.parse::<i64>().ok());
    assert!(
        revocable_in.is_some_and(|minutes| (25..=30).contains(&minutes))
            && note.contains("before the batch would have rolled"),
        "30m TTL against a 1h window + 15m rollout: {note}"
    );
    if manual {
        assert_eq!(expiring.type_.as_deref(), Some("Warning"), "{expiring:?}");
        let condition = batch.status.as_ref().and_then(|s| s.conditions.first()).cloned().expect("condition");
        assert_eq!(condition.reason, "CredentialsExpiring", "{condition:?}");
        assert!(condition.message.ends_with("approve now"), "{}", condition.message);
        // The gauges are refreshed at the end of the pass that wrote the phase: the batch can be
        // read back before that pass ends.
        let margin_line = || {
            let metrics = r.engine.handle.as_ref().map(|h| h.metrics.encode()).unwrap_or_default();
            let line = metrics
                .lines()
                .find(|line| {
                    line.starts_with("capdeck_credentials_margin_seconds{") && line.contains(&batch.name_any())
                })
                .map(str::to_string);
            (line, metrics)
        };
        eventually("the batch's capdeck_credentials_margin_seconds", LONG, || async { margin_line().0.is_some() })
            .await;
        let (line, metrics) = margin_line();
        let line = line.unwrap_or_default();
        let margin: i64 = line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(i64::MAX);
        // 30m − (1h + 15m) = −45m, give or take the seconds the story took.
        assert!((-45 * 60 - 120..=-45 * 60).contains(&margin), "{line}\n{metrics}");
        // Per consumed Secret (judged at most every 30 s), what the credentials alerts read: the
        // verdict `capdeck credentials` gives.
        let output = crate::setup::capdeck(&w.admin_kubeconfig, &["credentials", "-n", &ns, "-o", "json"]);
        let (stdout, stderr) = crate::setup::text(&output);
        assert!(output.status.success(), "{stderr}");
        let document: serde_json::Value = serde_json::from_str(&stdout).expect("json");
        let verdict = document["credentials"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["secret"] == "bookshop-uaa"))
            .and_then(|c| c["verdict"].as_str())
            .expect("bookshop-uaa's verdict")
            .to_string();
        let state = format!(
            "capdeck_secret_credentials_state{{namespace=\"{ns}\",secret=\"bookshop-uaa\",state=\"{verdict}\"}}"
        );
        assert_eq!(r.metric(&state).await, Some(1));
    } else {
        assert_eq!(batch.status.as_ref().and_then(|s| s.progress.as_deref()), Some("2/2"));
    }
    r.stop().await;
}

pub async fn expiring_credentials_end_an_auto_window_early(backend: Backend) {
    expiring_credentials(backend, false).await;
}

pub async fn expiring_credentials_escalate_a_manual_batch(backend: Backend) {
    expiring_credentials(backend, true).await;
}

/// The binding Secret's old credentials may be revoked in 30 minutes, sooner than a batch with a
/// 1 h window could roll — but every Deployment already runs its current credentials (they were
/// rolled before: the Go operator, a new version, a person), and there is no batch. Nothing is
/// harmed: `ok` on every surface, the same words — `capdeck credentials`, `capdeck fleet`,
/// `capdeck doctor` and the engine's `capdeck_secret_credentials_state` (what the alerts read).
pub async fn credentials_the_pods_already_run_are_ok_on_every_surface(backend: Backend) {
    let world = World::new(backend, "creds-already-run").await;
    load_current(&world, &AppOptions::default()).await;
    let ns = world.ns.clone();
    install_service_binding_crd(&world).await;
    world
        .apply_objects(vec![
            service_binding(&ns, "bookshop-uaa", "bookshop-uaa", "30m", None),
            service_binding(&ns, "bookshop-uaa-k3x9q", "bookshop-uaa-k3x9q", "30m", Some("bookshop-uaa")),
        ])
        .await;
    let workloads = world.workloads();
    let mut config = engine_config(&world, "engine-a");
    config.rollout_delay = Duration::from_secs(3600);
    let engine = Engine::on(&world, config).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    let r = Running { world, engine, workloads };
    let w = &r.world;
    let already = "2 consuming Deployments already run its current credentials: the old ones dying harms nothing";

    let output = crate::setup::capdeck(&w.admin_kubeconfig, &["credentials", "-n", &ns, "-o", "json"]);
    let (stdout, stderr) = crate::setup::text(&output);
    assert!(output.status.success(), "{stderr}");
    let document: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let report = document["credentials"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["secret"] == "bookshop-uaa"))
        .cloned()
        .expect("bookshop-uaa's report");
    assert_eq!(report["verdict"], "ok", "{report}");
    assert!(report["reasons"].as_array().into_iter().flatten().any(|r| r == already), "{report}");
    assert!(report["oldCredentials"][0]["revocableAt"].is_string(), "a rotation is under way: {report}");
    // The engine judges the same (what CapdeckCredentialsUnsafe reads).
    let ok = format!("capdeck_secret_credentials_state{{namespace=\"{ns}\",secret=\"bookshop-uaa\",state=\"ok\"}}");
    assert_eq!(r.metric(&ok).await, Some(1));
    let unsafe_ =
        format!("capdeck_secret_credentials_state{{namespace=\"{ns}\",secret=\"bookshop-uaa\",state=\"unsafe\"}}");
    assert_eq!(r.engine.metric(&unsafe_).unwrap_or(0), 0);
    // The fleet: no credentials at risk in this namespace.
    let output = crate::setup::capdeck(
        &w.admin_kubeconfig,
        &["fleet", "-n", &ns, "--lease-namespace", &ns, "--timeout", "20s", "-o", "json"],
    );
    let (stdout, stderr) = crate::setup::text(&output);
    let fleet: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{stdout}{stderr}"));
    let rows = fleet["fleet"].as_array().cloned().unwrap_or_default();
    assert!(rows.iter().all(|row| row["credentials"].as_array().is_none_or(Vec::is_empty)), "{stdout}{stderr}");
    // doctor: the same verdicts.
    let output =
        crate::setup::capdeck(&w.admin_kubeconfig, &["doctor", "-n", &ns, "--lease-namespace", &ns, "-o", "json"]);
    let (stdout, stderr) = crate::setup::text(&output);
    let doctor: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{stdout}{stderr}"));
    let verdicts: Vec<&serde_json::Value> = doctor["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|finding| finding["check"] == "credential verdicts")
        .collect();
    assert_eq!(verdicts.len(), 1, "{stdout}");
    assert_eq!(verdicts[0]["status"], "ok", "{stdout}");
    assert!(verdicts[0]["detail"].as_str().is_some_and(|d| d.contains("none at risk or unsafe")), "{stdout}");
    r.stop().await;
}

/// Three Deployments of one version rolled one at a time; the middle one (`b`) stalls.
async fn middle_of_three_stalls(backend: Backend, test: &str) -> Running {
    let options = AppOptions {
        deployments: &[("a", &["uaa"]), ("b", &["uaa"]), ("c", &["uaa"])],
        stall: &["b"],
        ..AppOptions::default()
    };
    running_configured(backend, test, std::slice::from_ref(&options), |config| config.max_parallel_rollouts = 1).await
}

/// One rollout at a time, three Deployments, the middle one stalls: the batch halts (`Held`,
/// `RolloutFailureGuard`, a Warning Event) with the last one still queued and untouched; a
/// release goes on, and the batch ends Failed with the stalled Deployment's old Secret kept.
pub async fn a_stalled_deployment_halts_the_batch_until_released(backend: Backend) {
    let r = middle_of_three_stalls(backend, "failure-guard").await;
    let w = &r.world;
    let stalled_before = w.vcap_of("bookshop-v1-b").await;
    w.rotate_secret("bookshop-uaa").await;

    let batch = w.wait_phase("bookshop", BatchPhase::Held, LONG).await;
    let status = batch.status.clone().expect("status");
    let condition = status.conditions.first().cloned().expect("condition");
    assert_eq!(condition.reason, "RolloutFailureGuard", "{condition:?}");
    let held = r.series("capdeck_batch_held", ",reason=\"RolloutFailureGuard\"");
    assert_eq!(r.metric(&held).await, Some(1), "the alert's metric");
    assert!(condition.message.starts_with("halted: bookshop-v1-b stalled"), "{}", condition.message);
    let states: Vec<_> = status.deployments.iter().map(|d| (d.name.as_str(), d.state.clone())).collect();
    let queued: Vec<&str> = status
        .deployments
        .iter()
        .filter(|d| d.state == Some(DeploymentRolloutState::Queued))
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(queued.len(), 1, "{states:?}");
    let untouched = w.vcap_of(queued[0]).await;
    assert!(untouched.ends_with("-go001"), "the queued Deployment was not rolled: {untouched}");

    let report =
        act(&w.client, &w.ns, &batch.name_any(), BatchAction::Release, "alice", Some("b is known"), Timestamp::now())
            .await
            .expect("release a halted batch");
    assert_eq!(report.by, "alice");
    let batch = w.wait_phase("bookshop", BatchPhase::Failed, LONG).await;
    let status = batch.status.clone().expect("status");
    assert_eq!(status.conditions.first().map(|c| c.reason.as_str()), Some("ProgressDeadlineExceeded"));
    assert_ne!(w.vcap_of(queued[0]).await, untouched, "released: the queued Deployment rolled");
    assert!(w.get("v1", "Secret", &stalled_before).await.is_some(), "the stalled Deployment's old Secret is kept");
    // The release is one Normal Event that says what it goes on despite (not a second "halted").
    let released = events_once_with(w, "Released").await;
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(released[0].0, "Normal");
    assert!(
        released[0].1.contains("released by alice: b is known; going on despite bookshop-v1-b stalled"),
        "{released:?}"
    );
    let halted = events_once_with(w, "RolloutFailureGuard").await;
    assert!(halted.iter().all(|(kind, note)| kind == "Warning" && note.contains("halted:")), "{halted:?}");
    r.stop().await;
}

/// capdeck's Events in the namespace: (type, reason, note). Kubernetes' own controllers report
/// there too (scheduling, ReplicaSets, kwok's kubelets): those are not capdeck's.
pub(crate) async fn events_of(w: &World) -> Vec<(String, String, String)> {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(w.client.clone(), &w.ns);
    let listed = events.list(&Default::default()).await.expect("events").items;
    listed
        .into_iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("capdeck"))
        .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// The batch's Events with `reason`: (type, note).
pub(crate) async fn events_with(w: &World, reason: &str) -> Vec<(String, String)> {
    events_of(w).await.into_iter().filter(|(_, r, _)| r == reason).map(|(kind, _, note)| (kind, note)).collect()
}

/// The batch's Events with `reason`, once there is one. An Event follows the status write that
/// records its transition, and may follow a later one (a transition whose write failed is said
/// with the next status written): a phase seen is no promise its Event is there yet.
pub(crate) async fn events_once_with(w: &World, reason: &str) -> Vec<(String, String)> {
    let what = format!("a {reason} Event");
    eventually(&what, LONG, || async { !events_with(w, reason).await.is_empty() }).await;
    events_with(w, reason).await
}

/// The failure guard halted the batch at a stalled Deployment; the cause is fixed and an SRE
/// retries: the stalled Deployment restarts once more (a new Pod template, same new VCAP Secret),
/// the queued one follows, the batch succeeds and the old Secrets go. A second retry is refused.
pub async fn a_halted_batch_is_retried_and_rolls_on(backend: Backend) {
    let r = middle_of_three_stalls(backend, "retry").await;
    let w = &r.world;
    let b_before = w.vcap_of("bookshop-v1-b").await;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Held, LONG).await;
    let name = batch.name_any();
    let b_new = batch
        .status
        .iter()
        .flat_map(|s| s.deployments.iter())
        .find(|d| d.name == "bookshop-v1-b")
        .and_then(|d| d.vcap_secret.clone())
        .expect("b was pointed at a new VCAP Secret");
    w.next_pods("bookshop-v1-b", Fate::Ready).await;
    let report = act(&w.client, &w.ns, &name, BatchAction::Retry, "alice", Some("quota raised"), Timestamp::now())
        .await
        .expect("retry a halted batch");
    assert!(report.summary.contains("bookshop-v1-b roll once more"), "{}", report.summary);

    let batch = w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    let status = batch.status.clone().expect("status");
    assert_eq!(status.retried_at, batch.spec.retry.as_ref().map(|retry| retry.at.clone()), "the retry is handled");
    assert!(status.deployments.iter().all(|d| d.state == Some(DeploymentRolloutState::Complete)), "{status:?}");
    assert_eq!(w.vcap_of("bookshop-v1-b").await, b_new, "restarted on the batch's own new Secret");
    let b = w.get("apps/v1", "Deployment", "bookshop-v1-b").await.expect("b");
    assert!(
        b["spec"]["template"]["metadata"]["annotations"]["capdeck.dev/retried-at"].is_string(),
        "a new Pod template: {}",
        b["spec"]["template"]["metadata"]
    );
    assert!(w.get("v1", "Secret", &b_before).await.is_none(), "b completed: its previous VCAP Secret is deleted");
    let retried = events_once_with(w, "Retried").await;
    assert_eq!(retried.len(), 1, "{retried:?}");
    assert_eq!(retried[0].0, "Normal");
    assert!(retried[0].1.contains("retried by alice: quota raised; rolling bookshop-v1-b once more"), "{retried:?}");
    let again = act(&w.client, &w.ns, &name, BatchAction::Retry, "alice", Some("again"), Timestamp::now()).await;
    let refused = again.expect_err("a succeeded batch is not retried").to_string();
    assert!(refused.contains("is Succeeded; only a Failed batch or one the failure guard halted"), "{refused}");
    r.stop().await;
}

/// Without the failure guard a stalled Deployment ends its batch Failed, with its previous VCAP
/// Secret kept. An undo points it back there, deletes the batch's new Secret and ends the batch
/// Undone; the Deployment that completed stays on the new credentials.
pub async fn an_undone_batch_goes_back_to_the_previous_secrets(backend: Backend) {
    let options =
        AppOptions { deployments: &[("a", &["uaa"]), ("b", &["uaa"])], stall: &["b"], ..AppOptions::default() };
    let r =
        running_configured(backend, "undo", std::slice::from_ref(&options), |config| config.halt_on_failure = false)
            .await;
    let w = &r.world;
    let b_before = w.vcap_of("bookshop-v1-b").await;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Failed, LONG).await;
    let name = batch.name_any();
    let a_new = w.vcap_of("bookshop-v1-a").await;
    let b_new = w.vcap_of("bookshop-v1-b").await;
    assert_ne!(b_new, b_before, "b was pointed at a new Secret before it stalled");
    assert!(w.get("v1", "Secret", &b_before).await.is_some(), "the stalled Deployment's old Secret is kept");

    act(&w.client, &w.ns, &name, BatchAction::Undo, "bob", Some("new credentials break b"), Timestamp::now())
        .await
        .expect("undo a failed batch");
    let batch = w.wait_phase("bookshop", BatchPhase::Undone, LONG).await;
    let status = batch.status.clone().expect("status");
    let condition = status.conditions.first().cloned().expect("condition");
    assert_eq!(condition.reason, "Undone");
    assert!(
        condition.message.starts_with(
            "undone by bob: new credentials break b; 1 Deployment pointed back at their previous VCAP Secrets"
        ),
        "{}",
        condition.message
    );
    let b = status.deployments.iter().find(|d| d.name == "bookshop-v1-b").expect("b");
    assert_eq!(b.state, Some(DeploymentRolloutState::Undone));
    assert_eq!(w.vcap_of("bookshop-v1-b").await, b_before, "b is back on its previous VCAP Secret");
    assert!(w.get("v1", "Secret", &b_new).await.is_none(), "the batch's new Secret for b is deleted");
    assert_eq!(w.vcap_of("bookshop-v1-a").await, a_new, "a completed before the undo: it stays");
    // The Event follows the status write: wait for it, then there is exactly one.
    let undone = events_once_with(w, "Undone").await;
    assert_eq!(undone.len(), 1, "{undone:?}");
    let again = act(&w.client, &w.ns, &name, BatchAction::Undo, "bob", Some("again"), Timestamp::now()).await;
    let refused = again.expect_err("undone once").to_string();
    assert!(refused.contains("is Undone; nothing to undo"), "{refused}");
    r.stop().await;
}

/// Failure-aware pacing: one rollout at a time, the middle Deployment's new Pods crash-loop (on a
/// real server: the deployment controller's new ReplicaSet, kube-scheduler, and kwok's
/// CrashLoopBackOff; its rollout would not end before its 10 min progress deadline). The engine
/// reads the Pods of the new ReplicaSet, marks it Failing with the container's last termination
/// and halts the batch with the last Deployment still queued.
pub async fn a_crash_looping_new_pod_halts_the_batch_early(backend: Backend) {
    let options = AppOptions {
        deployments: &[("a", &["uaa"]), ("b", &["uaa"]), ("c", &["uaa"])],
        crash_loop: &["b"],
        ..AppOptions::default()
    };
    let r = running_configured(backend, "pod-failure", std::slice::from_ref(&options), |config| {
        config.max_parallel_rollouts = 1
    })
    .await;
    let w = &r.world;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Held, LONG).await;
    let status = batch.status.clone().expect("status");
    let condition = status.conditions.first().cloned().expect("condition");
    assert_eq!(condition.reason, "RolloutFailureGuard", "{condition:?}");
    let b = status.deployments.iter().find(|d| d.name == "bookshop-v1-b").expect("b");
    assert_eq!(b.state, Some(DeploymentRolloutState::Failing));
    let message = b.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("Pod bookshop-v1-b-")
            && message.ends_with(": container main CrashLoopBackOff; last terminated: Error (exit code 1)"),
        "{message}"
    );
    assert!(
        condition.message.starts_with(&format!("halted: bookshop-v1-b is failing ({message}); 1 queued Deployment")),
        "{}",
        condition.message
    );
    let queued = status.deployments.iter().filter(|d| d.state == Some(DeploymentRolloutState::Queued)).count();
    assert_eq!(queued, 1, "the last Deployment waits: {:?}", status.deployments);
    r.stop().await;
}

/// An engine killed mid-rollout: its successor takes the lease after it expires and finishes.
pub async fn engine_killed_mid_rollout_is_finished_by_the_next(backend: Backend) {
    // Slow rollouts, so the kill lands while Deployments roll.
    let options = AppOptions { ready_after: Some("3s"), ..AppOptions::default() };
    let world = World::new(backend, "killed-mid-rollout").await;
    load_current(&world, &options).await;
    let workloads = world.workloads();
    let first = Engine::on(&world, engine_config(&world, "engine-a")).await;
    first.wait_for_role_within(Role::Leader, LONG).await;
    world.rotate_secret("bookshop-uaa").await;
    world.wait_phase("bookshop", BatchPhase::RollingOut, LONG).await;
    first.kill();
    let second = Engine::on(&world, engine_config(&world, "engine-b")).await;
    second.wait_for_role_within(Role::Leader, LONG).await;
    let batch = world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_eq!(batch.status.and_then(|s| s.progress).as_deref(), Some("2/2"));
    second.stop().await;
    workloads.stop().await;
}

/// Two engines on one Lease: exactly one leads, over several renewals. The leader opens one batch
/// and rolls each Deployment once while the other writes nothing; when the leader stops (its
/// Lease released) the other takes over and rolls the next rotation.
pub async fn two_engines_share_one_lease_and_roll_each_deployment_once(backend: Backend) {
    let world = World::new(backend, "two-engines").await;
    load_current(&world, &AppOptions::default()).await;
    let workloads = world.workloads();
    let config = |identity: &str| {
        let mut config = engine_config(&world, identity);
        // Both batches roll the same Deployments seconds apart; the storm guard has its own story.
        config.min_rollout_interval = Duration::ZERO;
        config
    };
    let a = Engine::on(&world, config("engine-a")).await;
    a.wait_for_role_within(Role::Leader, LONG).await;
    let b = Engine::on(&world, config("engine-b")).await;
    b.wait_for_role_within(Role::Observer, LONG).await;
    // Over several renewals it stays that way.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!((a.role(), b.role()), (Role::Leader, Role::Observer));
    }
    world.rotate_secret("bookshop-uaa").await;
    world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_eq!(world.batches("bookshop").await.len(), 1);
    let writes = a.workload_writes();
    assert_eq!(writes.get("update deployments").copied(), Some(2), "{writes:#?}");
    assert_eq!(writes.get("create rotationbatches").copied(), Some(1), "{writes:#?}");
    assert_eq!(b.workload_writes(), Default::default(), "the observer wrote");
    assert_eq!(b.role(), Role::Observer);
    // The leader stops gracefully and releases the lease: the other one takes over.
    a.stop().await;
    b.wait_for_role_within(Role::Leader, LONG).await;
    world.rotate_secret("bookshop-db").await;
    eventually("a second batch", LONG, || async { world.batches("bookshop").await.len() == 2 }).await;
    world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    b.stop().await;
    workloads.stop().await;
}

/// Engines of two different namespaces do not overlap: both lead, each on its own Lease.
pub async fn engines_of_different_namespaces_both_lead(backend: Backend) {
    let world = World::new(backend, "namespaces-both-lead").await;
    let config = |identity: &str, lease: &str| {
        let mut config = engine_config(&world, identity);
        config.lease.name = lease.into();
        config
    };
    let scope = |team: &str| capdeck::cluster::Scope::Namespace(format!("{}-{team}", world.ns));
    let shop = Engine::start_in(world.client.clone(), scope("shop"), config("shop", "capdeck-shop")).await;
    let hr = Engine::start_in(world.client.clone(), scope("hr"), config("hr", "capdeck-hr")).await;
    shop.wait_for_role_within(Role::Leader, LONG).await;
    hr.wait_for_role_within(Role::Leader, LONG).await;
    shop.stop().await;
    hr.stop().await;
}

/// Two engines told different Lease places (the installed daemon's `capdeck-system`, a laptop
/// console's `default`) never lead at once where their scopes overlap: the second observes while
/// the first leads, takes over when it stops, and an engine of one namespace observes beside them
/// (its scope overlaps theirs). A monitor samples both roles throughout (an invariant, not a
/// timing). Engines over every namespace: on a control plane of their own, away from the other
/// stories' namespaces. At rest, the leader's and the observer's re-checks read a watch: no LIST
/// of Leases over a whole lease duration (each used to LIST once per duration).
pub async fn engines_with_different_lease_places_never_lead_the_same_namespaces_at_once(backend: Backend) {
    use capdeck::bench::reads::ReadCounter;
    let world = World::dedicated(backend, "lease-places", Profile::Standard).await;
    load_current(&world, &AppOptions::default()).await;
    world
        .apply_objects(vec![
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "capdeck-system"}}),
        ])
        .await;
    let config = |identity: &str, namespace: &str| {
        let mut config = engine_config(&world, identity);
        config.lease.namespace = namespace.into();
        config
    };
    let reads = ReadCounter::default();
    let counted = reads.client(config_for(&world.admin_kubeconfig).await).expect("client");
    let daemon = Engine::start(counted.clone(), config("daemon", "capdeck-system")).await;
    daemon.wait_for_role_within(Role::Leader, LONG).await;
    let laptop = Engine::start(counted.clone(), config("laptop", "default")).await;
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
    laptop.wait_for_role_within(Role::Observer, LONG).await;
    // Three watches of Leases have listed once they watch: each engine's engines' Leases, the
    // leader's Go CAP Operator's Lease.
    let lease_requests = |verb: &str| reads.snapshot().get(&format!("{verb} leases")).map_or(0, |tally| tally.requests);
    eventually("the engines watch the Leases", LONG, || async { lease_requests("watch") >= 3 }).await;
    let lists_before = lease_requests("list");
    // Over several lease renewals (10 s leases) and re-checks it stays so; its own Lease is never
    // taken.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!((daemon.role(), laptop.role()), (Role::Leader, Role::Observer));
    }
    assert_eq!(
        lease_requests("list"),
        lists_before,
        "re-checks over a lease duration listed Leases: {:#?}",
        reads.snapshot()
    );
    assert_eq!(lease_holder(&world, "default").await, None, "the laptop's engine never took its Lease");
    assert_eq!(lease_holder(&world, "capdeck-system").await.as_deref(), Some("daemon"));
    // An engine of one namespace overlaps the daemon's all namespaces: it observes too.
    let scope = capdeck::cluster::Scope::Namespace("elsewhere".into());
    let other = Engine::start_in(world.client.clone(), scope, config("team", "default")).await;
    other.wait_for_role_within(Role::Observer, LONG).await;
    // The daemon stops (its Lease released): exactly one of the others takes over.
    daemon.stop().await;
    eventually("one engine leads after the daemon stopped", LONG, || async {
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

/// The Go CAP Operator's Lease, watched (what the leader's `capdeck_go_operator_running` reads
/// once a minute without a request): a Lease of that name renewed in any namespace shows as
/// renewed as soon as it is, and no longer once released.
pub async fn the_go_operator_lease_is_watched_in_any_namespace(backend: Backend) {
    use capdeck::leadership::{GO_OPERATOR_LEASE, WatchedLeases, renewed_among};
    let world = World::new(backend, "go-lease").await;
    let watched = WatchedLeases::go_operator(&world.client);
    eventually("the watch has listed", LONG, || async { watched.current().is_some() }).await;
    let ours = format!("{}/{GO_OPERATOR_LEASE}", world.ns);
    // Other stories' Go CAP Operators may renew theirs on the same kube-apiserver: ours only.
    // None while the watch cannot be trusted: "not renewed" must come from a working watch.
    let renewed_here = || watched.current().map(|leases| renewed_among(&leases, Timestamp::now()).contains(&ours));
    assert_eq!(renewed_here(), Some(false));
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(world.client.clone(), &world.ns);
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": GO_OPERATOR_LEASE, "namespace": world.ns},
        "spec": {"holderIdentity": "go-pod", "leaseDurationSeconds": 60,
                 "renewTime": Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()},
    });
    let params = kube::api::PatchParams::apply("go-operator-stand-in");
    leases.patch(GO_OPERATOR_LEASE, &params, &kube::api::Patch::Apply(lease)).await.expect("take");
    eventually("the renewed Lease is seen", LONG, || async { renewed_here() == Some(true) }).await;
    // Released as client-go's leader election does it: an update without a holder.
    let release = serde_json::json!({"spec": {"holderIdentity": null}});
    leases
        .patch(GO_OPERATOR_LEASE, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(release))
        .await
        .expect("release");
    eventually("the released Lease is seen", LONG, || async { renewed_here() == Some(false) }).await;
}

/// Who holds the engines' Lease in `namespace`, if anyone.
async fn lease_holder(world: &World, namespace: &str) -> Option<String> {
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(world.client.clone(), namespace);
    leases.get_opt("capdeck-engine").await.expect("lease").and_then(|lease| lease.spec?.holder_identity)
}

/// After a graceful stop (lease released) the next engine leads — the sandbox once kept the old
/// holder's `renewTime` in its managedFields and every later apply was a 409.
pub async fn next_engine_leads_after_a_graceful_stop(backend: Backend) {
    let world = World::new(backend, "graceful-handover").await;
    load_current(&world, &AppOptions::default()).await;
    let a = Engine::on(&world, engine_config(&world, "engine-a")).await;
    a.wait_for_role_within(Role::Leader, LONG).await;
    // Let it renew at least once, so renewTime is its own.
    tokio::time::sleep(Duration::from_secs(5)).await;
    a.stop().await;
    let b = Engine::on(&world, engine_config(&world, "engine-b")).await;
    // Well under the lease duration (10 s) + grace: a released lease is taken at once.
    b.wait_for_role_within(Role::Leader, Duration::from_secs(20)).await;
    b.stop().await;
}
