//! Change windows and freezes (docs/WINDOWS.md, issue 34) on both backends: a batch outside its
//! window waits and rolls at the opening; a deadline before the next window escalates and
//! notifies; a freeze holds across an engine restart and a leader change, unfreeze resumes it and
//! a freeze ends by itself; force overrides a window and says so; an unreadable window holds the
//! batch with the fix. Where a story needs a window to open soon, the engine's clock is injected
//! (`Clock::Tokio` from a chosen wall time, advancing with real time) instead of waiting for the
//! next minute of the real clock.

use std::time::Duration;

use capdeck::actions::{BatchAction, act};
use capdeck::api::change_window::ANNOTATION_CHANGE_WINDOWS;
use capdeck::api::rotation_batch::ReadyReason;
use capdeck::api::{BatchPhase, Freeze, RotationBatch};
use capdeck::engine::Role;
use capdeck::engine::config::{Clock, EngineConfig};
use k8s_openapi::jiff::{SignedDuration, Timestamp, ToSpan as _};
use kube::ResourceExt as _;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::common::fixtures::AppOptions;
use crate::common::story_world::StoryWorld as _;
use crate::setup::{Engine, EngineExt as _, engine_config, install_service_binding_crd, load_current, service_binding};
use crate::stories::engine::events_once_with;
use crate::stories::fleet::{Behaviour, accepted_events, loopback_notify, receiver};
use crate::world::{Backend, World, eventually};

const LONG: Duration = Duration::from_secs(60);

fn seconds(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

/// The Ready condition's (reason, message).
fn ready(batch: &RotationBatch) -> (String, String) {
    batch
        .status
        .as_ref()
        .and_then(|status| status.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_default()
}

/// `Thu 06:01-06:11 UTC`: a ten-minute window opening at `opens` (a whole minute, UTC).
fn window_at(opens: Timestamp) -> String {
    let start = opens.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
    let end = start.checked_add(10.minutes()).expect("time");
    format!("{} {}-{} UTC", start.strftime("%a"), start.strftime("%H:%M"), end.strftime("%H:%M"))
}

/// A window on the day after tomorrow (UTC): at least a day away, whenever the story runs.
pub(crate) fn window_in_two_days() -> String {
    let day = Timestamp::now().to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC).checked_add(2.days()).expect("time");
    format!("{} 00:00-01:00 UTC", day.strftime("%a"))
}

/// The next whole minute at least `margin` ahead of now.
fn a_minute_at_least(margin: i64) -> Timestamp {
    let later = Timestamp::now().checked_add(seconds(margin)).expect("time");
    let second = later.as_second();
    Timestamp::from_second(second - second.rem_euclid(60) + 60).expect("time")
}

pub(crate) async fn start(world: &World, identity: &str, configure: impl FnOnce(&mut EngineConfig)) -> Engine {
    let mut config = engine_config(world, identity);
    configure(&mut config);
    let engine = Engine::on(world, config).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    engine
}

pub(crate) async fn annotate_application(world: &World, app: &str, windows: &str) {
    let api = world.resource("sme.sap.com/v1alpha1", "CAPApplication").await;
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(world.client.clone(), &world.ns, &api);
    let patch = json!({"metadata": {"annotations": {ANNOTATION_CHANGE_WINDOWS: windows}}});
    api.patch(app, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("annotate the application");
}

async fn annotate_namespace(world: &World, windows: &str) {
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(world.client.clone());
    let patch = json!({"metadata": {"annotations": {ANNOTATION_CHANGE_WINDOWS: windows}}});
    api.patch(&world.ns, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("annotate the namespace");
}

/// `capdeck freeze` as alice: the namespace (`None`) or one application, until `until` (a freeze
/// of the same target is replaced).
async fn freeze(world: &World, application: Option<&str>, until: Timestamp) -> Freeze {
    use capdeck::freezes::Target;
    let target = match application {
        Some(app) => Target::Application { namespace: world.ns.clone(), name: app.to_string() },
        None => Target::Namespace(world.ns.clone()),
    };
    capdeck::freezes::freeze(&world.client, &target, "alice", "quarter-end close", until, Timestamp::now())
        .await
        .expect("freeze")
        .freeze
}

/// `capdeck unfreeze`'s write: the freeze is lifted, and stays as a record.
async fn lift(world: &World, name: &str) {
    let api: kube::Api<Freeze> = kube::Api::namespaced(world.client.clone(), &world.ns);
    let patch = json!({"spec": {"lifted": {"by": "bob", "at": Timestamp::now().to_string(), "reason": "close done"}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("lift the freeze");
}

/// The freeze `name` ends `seconds` from now (its `until` moved); that end.
async fn end_freeze_in(world: &World, name: &str, seconds_from_now: i64) -> Timestamp {
    let until = Timestamp::now().checked_add(seconds(seconds_from_now)).expect("time");
    let api: kube::Api<Freeze> = kube::Api::namespaced(world.client.clone(), &world.ns);
    let patch = json!({"spec": {"until": until.to_string()}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("move the freeze's end");
    until
}

/// The escalations among the notifications received (credentials events come besides them).
fn deadline_events(received: &std::sync::Mutex<crate::stories::fleet::Received>) -> Vec<(String, String)> {
    accepted_events(received).into_iter().filter(|(_, event)| event.starts_with("Deadline")).collect()
}

/// The namespace's change window (its annotation) opens 25 s after the engine's clock starts: a
/// rotation's batch waits (`Waiting`, `OutsideChangeWindow`, `waitingUntil` the opening, the
/// waiting metric 1) with nothing rolled, and rolls by itself at the opening.
pub async fn outside_its_window_a_batch_waits_then_rolls_at_the_opening(backend: Backend) {
    let world = World::new(backend, "window-wait").await;
    load_current(&world, &AppOptions::default()).await;
    let opens = a_minute_at_least(0);
    annotate_namespace(&world, &window_at(opens)).await;
    let workloads = world.workloads();
    let wall = opens.checked_sub(seconds(25)).expect("time");
    let engine = start(&world, "engine-a", |config| {
        config.clock = Clock::Tokio { wall, instant: tokio::time::Instant::now() };
    })
    .await;
    let w = &world;
    let before = w.vcap_of("bookshop-v1-srv").await;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Waiting, LONG).await;
    let (why, message) = ready(&batch);
    assert_eq!(why, ReadyReason::OutsideChangeWindow.as_str(), "{message}");
    assert!(message.contains(&format!("annotation capdeck.dev/change-windows of Namespace {}", w.ns)), "{message}");
    let waiting_until = batch.status.as_ref().and_then(|s| s.waiting_until.clone()).expect("waitingUntil");
    assert_eq!(waiting_until.0, opens);
    assert_eq!(w.vcap_of("bookshop-v1-srv").await, before, "nothing rolls outside the window");
    // Nobody approves blind: the plan made when the window ended is kept, and shown.
    let planned = batch.status.as_ref().and_then(|s| s.planned.clone()).expect("the plan is kept while it waits");
    let names: Vec<&str> = planned.deployments.iter().map(|d| d.name.as_str()).collect();
    assert!(names.contains(&"bookshop-v1-srv"), "{names:?}");
    let target = format!("{}/{}", w.ns, batch.name_any());
    let dry = crate::setup::capdeck(&w.admin_kubeconfig, &["approve", &target, "--reason", "CHG-1", "--dry-run"]);
    let (stdout, stderr) = crate::setup::text(&dry);
    assert!(dry.status.success(), "{stderr}");
    assert!(
        stdout.contains(&format!("Deployments to restart ({}, planned when the window ended at", names.len()))
            && stdout.contains("  bookshop-v1-srv (version bookshop-v1)")
            && !stdout.contains("none decided yet"),
        "{stdout}"
    );
    let wide = crate::setup::capdeck(&w.admin_kubeconfig, &["batches", "-n", &w.ns, "-o", "wide"]);
    let (stdout, _) = crate::setup::text(&wide);
    assert!(stdout.contains(&format!("{} planned", names.len())), "{stdout}");
    eventually("the waiting metric", LONG, || async { engine.metric("capdeck_batches_waiting_for_window") == Some(1) })
        .await;
    let batch = w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_eq!(batch.status.as_ref().and_then(|s| s.planned.clone()), None, "decided: the record is the plan");
    assert_eq!(batch.status.as_ref().and_then(|s| s.waiting_until.clone()), None, "no longer waiting");
    let started = batch.status.as_ref().and_then(|s| s.rollout_started_at.clone()).expect("started");
    assert!(started.0 >= opens, "rolled at {} before the opening {opens}", started.0);
    assert_ne!(w.vcap_of("bookshop-v1-srv").await, before);
    eventually("the waiting metric back to 0", LONG, || async {
        engine.metric("capdeck_batches_waiting_for_window") == Some(0)
    })
    .await;
    engine.stop().await;
    workloads.stop().await;
}

/// bookshop, its next change window two days away, and its uaa Secret's ServiceBindings (the
/// current one and the one it replaced) keeping old credentials 30 min: a rotation's batch
/// cannot wait for the window.
pub(crate) async fn deadline_before_the_window(backend: Backend, name: &str) -> World {
    let world = World::new(backend, name).await;
    load_current(&world, &AppOptions::default()).await;
    annotate_application(&world, "bookshop", &window_in_two_days()).await;
    install_service_binding_crd(&world).await;
    uaa_bindings(&world, "30m").await;
    world
}

/// bookshop's uaa ServiceBindings, the current one and the one it replaced, with `ttl` of overlap.
pub(crate) async fn uaa_bindings(world: &World, ttl: &str) {
    let ns = &world.ns;
    world
        .apply_objects(vec![
            service_binding(ns, "bookshop-uaa", "bookshop-uaa", ttl, None),
            service_binding(ns, "bookshop-uaa-k3x9q", "bookshop-uaa-k3x9q", ttl, Some("bookshop-uaa")),
        ])
        .await;
}

/// The application's next window is a day away and its old credentials die in 30 min: the
/// batch does not wait. It asks a person at once (`DeadlineBeforeChangeWindow`, both times in
/// the message, a Warning Event, one notification); an approval rolls it outside the window, and
/// the record says what it overrode.
pub async fn a_deadline_before_the_next_window_escalates_and_notifies(backend: Backend) {
    let world = deadline_before_the_window(backend, "window-deadline").await;
    let ns = world.ns.clone();
    let (port, received) = receiver(Behaviour::Accepts).await;
    let workloads = world.workloads();
    let engine = start(&world, "engine-a", |config| config.notify = loopback_notify(port, "window-story")).await;
    let stores = engine.stores.clone();
    eventually("the engine sees the ServiceBindings", LONG, || async {
        stores.service_bindings().is_some_and(|bindings| bindings.len() == 2)
    })
    .await;
    let w = &world;
    let before = w.vcap_of("bookshop-v1-srv").await;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    let (why, message) = ready(&batch);
    assert_eq!(why, ReadyReason::DeadlineBeforeChangeWindow.as_str(), "{message}");
    assert!(
        message.contains("the next change window opens") && message.contains("they may be revoked from"),
        "both times: {message}"
    );
    assert_eq!(w.vcap_of("bookshop-v1-srv").await, before, "a person decides first");
    let name = batch.name_any();
    eventually("one DeadlineBeforeChangeWindow notification", LONG, || async {
        let events = deadline_events(&received);
        if events == vec![(name.clone(), "DeadlineBeforeChangeWindow".to_string())] {
            Ok(())
        } else {
            let recorded = w.batches("bookshop").await.pop().and_then(|b| b.status).map(|s| s.notifications);
            Err(format!("received {events:?}, recorded {recorded:?}"))
        }
    })
    .await;
    let warnings = events_once_with(w, ReadyReason::DeadlineBeforeChangeWindow.as_str()).await;
    assert!(warnings.iter().any(|(kind, _)| kind == "Warning"), "{warnings:?}");

    act(&w.client, &ns, &name, BatchAction::Approve, "alice", Some("CHG-7: roll before they die"), Timestamp::now())
        .await
        .expect("approve");
    let batch = w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_ne!(w.vcap_of("bookshop-v1-srv").await, before);
    let approved = events_once_with(w, ReadyReason::Approved.as_str()).await;
    assert!(
        approved
            .iter()
            .any(|(_, note)| note.contains("approved by alice") && note.contains("overrides: the next change window")),
        "the record says the approval overrode the window: {approved:?}"
    );
    assert_eq!(deadline_events(&received).len(), 1, "sent once: {:?}", accepted_events(&received));
    let recorded = batch.status.map(|s| s.notifications).unwrap_or_default();
    assert_eq!(recorded.iter().filter(|r| r.event == "DeadlineBeforeChangeWindow").count(), 1, "{recorded:?}");
    engine.stop().await;
    workloads.stop().await;
}

/// A freeze of the namespace holds a batch (`Waiting`, `Frozen`, who and why) across an engine's
/// stop and another engine taking the lead; lifting it resumes the batch. A freeze of one
/// application ends by itself at its `until`, with nobody acting.
pub async fn a_freeze_holds_across_restart_and_leader_change_and_ends_by_unfreeze_or_by_itself(backend: Backend) {
    let world = World::new(backend, "freeze").await;
    let apps = [AppOptions::default(), AppOptions { name: "orders", ..AppOptions::default() }];
    for options in &apps {
        load_current(&world, options).await;
    }
    let in_an_hour = Timestamp::now().checked_add(1.hour()).expect("time");
    freeze(&world, None, in_an_hour).await;
    let workloads = world.workloads();
    let (port, received) = receiver(Behaviour::Accepts).await;
    let notify = loopback_notify(port, "freeze-story");
    let freeze_events = || {
        let received = received.lock().expect("lock");
        received
            .accepted
            .iter()
            .filter(|body| body["event"].as_str().is_some_and(|e| e.starts_with("Freeze")))
            .map(|body| {
                format!(
                    "{} {}",
                    body["event"].as_str().unwrap_or_default(),
                    body["application"].as_str().unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
    };
    let first = start(&world, "engine-a", |config| config.notify = notify.clone()).await;
    let w = &world;
    let before = w.vcap_of("bookshop-v1-srv").await;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Waiting, LONG).await;
    let (why, message) = ready(&batch);
    assert_eq!(why, ReadyReason::Frozen.as_str(), "{message}");
    assert!(message.contains("frozen until") && message.contains("by alice: quarter-end close"), "{message}");
    eventually("the freeze metric", LONG, || async { first.metric("capdeck_freeze_active") == Some(1) }).await;

    // The engine stops; another takes the lead: the freeze lives in the cluster, not in an engine.
    first.stop().await;
    let second = start(&world, "engine-b", |config| config.notify = notify.clone()).await;
    second.wait_for_first_pass_as_leader().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let batch = w.batches("bookshop").await.pop().expect("batch");
    assert_eq!((batch.phase(), ready(&batch).0), (BatchPhase::Waiting, ReadyReason::Frozen.as_str().to_string()));
    assert_eq!(w.vcap_of("bookshop-v1-srv").await, before, "nothing rolled across the hand-over");

    lift(&world, capdeck::api::freeze::NAMESPACE_FREEZE_NAME).await;
    w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    // Announced once each, across the hand-over (recorded on the freeze before sending).
    eventually("FreezeStarted and FreezeEnded", LONG, || async {
        let events = freeze_events();
        if events == ["FreezeStarted ", "FreezeEnded "] { Ok(()) } else { Err(format!("{events:?}")) }
    })
    .await;
    assert_ne!(w.vcap_of("bookshop-v1-srv").await, before);

    // A freeze of `orders` alone: its batch waits; the freeze is cut to end 5 s later, and the
    // batch rolls at that end with nobody acting. (Frozen for an hour first, so that a slow
    // machine cannot let the freeze end before the batch waited.)
    let frozen = freeze(&world, Some("orders"), Timestamp::now().checked_add(seconds(3600)).expect("time")).await;
    w.rotate_secret("orders-uaa").await;
    let batch = w.wait_phase("orders", BatchPhase::Waiting, LONG).await;
    assert_eq!(ready(&batch).0, ReadyReason::Frozen.as_str());
    let until = end_freeze_in(&world, &frozen.name_any(), 5).await;
    let batch = w.wait_phase("orders", BatchPhase::Succeeded, LONG).await;
    let started = batch.status.as_ref().and_then(|s| s.rollout_started_at.clone()).expect("started");
    // The API keeps whole seconds.
    assert!(started.0.as_second() >= until.as_second(), "rolled at {} before the freeze ended at {until}", started.0);
    eventually("the application freeze's end announced", LONG, || async {
        let events = freeze_events();
        if events == ["FreezeStarted ", "FreezeEnded ", "FreezeStarted orders", "FreezeEnded orders"] {
            Ok(())
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await;
    second.stop().await;
    workloads.stop().await;
}

/// The cluster's windows (`--change-windows`) are a day away: the batch waits, and `capdeck
/// force` rolls it now; the Forced Event says what it overrode.
pub async fn force_overrides_a_window_and_the_record_says_so(backend: Backend) {
    let world = World::new(backend, "window-force").await;
    load_current(&world, &AppOptions::default()).await;
    let workloads = world.workloads();
    let windows = capdeck::api::change_window::ChangeWindows::parse(&window_in_two_days()).expect("windows");
    let engine = start(&world, "engine-a", |config| config.change_windows = Some(windows)).await;
    let w = &world;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Waiting, LONG).await;
    let (why, message) = ready(&batch);
    assert_eq!(why, ReadyReason::OutsideChangeWindow.as_str());
    assert!(message.contains("from the engine's --change-windows"), "{message}");
    let report = act(
        &w.client,
        &w.ns,
        &batch.name_any(),
        BatchAction::Force { approve: false },
        "alice",
        Some("INC-9 hotfix"),
        Timestamp::now(),
    )
    .await
    .expect("force a waiting batch");
    assert_eq!(report.phase_before, BatchPhase::Waiting);
    let batch = w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_eq!(batch.spec.force.as_ref().map(|f| f.by.as_str()), Some("alice"));
    let forced = events_once_with(w, ReadyReason::Forced.as_str()).await;
    assert!(
        forced.iter().any(|(_, note)| note.contains("forced by alice: INC-9 hotfix")
            && note.contains("overrides: outside the change windows")),
        "{forced:?}"
    );
    // A freeze that ends by itself while nothing waits (and no notifier writes): the engine comes
    // back at its end, and the metric an alert would watch drops, though no object changes then.
    // (An hour first, cut to 5 s once the metric is up: a slow engine cannot miss the freeze.)
    let frozen = freeze(&world, None, Timestamp::now().checked_add(seconds(3600)).expect("time")).await;
    eventually("the freeze metric up", LONG, || async { engine.metric("capdeck_freeze_active") == Some(1) }).await;
    end_freeze_in(&world, &frozen.name_any(), 5).await;
    eventually("the freeze metric down at its end", Duration::from_secs(20), || async {
        engine.metric("capdeck_freeze_active") == Some(0)
    })
    .await;
    engine.stop().await;
    workloads.stop().await;
}

/// An application annotation that cannot be parsed is never ignored: its batch is held
/// (`ChangeWindowUnreadable`) with the annotation, the object and the fix, as a Warning; fixed,
/// the batch rolls.
pub async fn an_unreadable_window_holds_the_batch_until_it_is_fixed(backend: Backend) {
    let world = World::new(backend, "window-unreadable").await;
    load_current(&world, &AppOptions::default()).await;
    annotate_application(&world, "bookshop", "Mon 25:00-26:00 UTC").await;
    let workloads = world.workloads();
    let (port, received) = receiver(Behaviour::Accepts).await;
    let engine = start(&world, "engine-a", |config| config.notify = loopback_notify(port, "window-story")).await;
    let w = &world;
    let before = w.vcap_of("bookshop-v1-srv").await;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Held, LONG).await;
    let (why, message) = ready(&batch);
    assert_eq!(why, ReadyReason::ChangeWindowUnreadable.as_str());
    assert!(
        message.contains(&format!("annotation capdeck.dev/change-windows of CAPApplication {}/bookshop", w.ns))
            && message.contains("\"25:00\" is not a time of day")
            && message.contains(&format!("kubectl annotate capapplication -n {} bookshop --overwrite", w.ns)),
        "{message}"
    );
    // The Event is written after the status the phase was read from: waited for, as in the
    // engine stories, then asserted as before.
    let reason = ReadyReason::ChangeWindowUnreadable.as_str();
    let warnings = events_once_with(w, reason).await;
    assert!(warnings.iter().any(|(kind, _)| kind == "Warning"), "{warnings:?}");
    // Nobody would know otherwise: anyone who may annotate the application can hold its batch.
    let held = |received: &std::sync::Mutex<crate::stories::fleet::Received>| {
        accepted_events(received).into_iter().filter(|(_, event)| event == "HeldByUnreadableWindows").count()
    };
    eventually("the HeldByUnreadableWindows notification", LONG, || async { held(&received) == 1 }).await;
    assert_eq!(w.vcap_of("bookshop-v1-srv").await, before);
    // `capdeck doctor` names it, with the fix, and fails.
    let kubeconfig = w.admin_kubeconfig.clone();
    let args = ["doctor", "-n", w.ns.as_str(), "--lease-namespace", w.ns.as_str()].map(str::to_string);
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_capdeck")).env("KUBECONFIG", &kubeconfig).args(&args).output()
    })
    .await
    .expect("join")
    .expect("doctor runs");
    let report = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(
        report.lines().any(|line| line.contains(&format!("CAPApplication {}/bookshop cannot be read", w.ns))
            && line.contains("kubectl annotate capapplication")),
        "doctor names the annotation and the fix:\n{report}"
    );
    annotate_application(&world, "bookshop", "Mon-Sun 00:00-24:00 UTC").await;
    w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_ne!(w.vcap_of("bookshop-v1-srv").await, before);
    assert_eq!(held(&received), 1, "sent once: {:?}", accepted_events(&received));
    engine.stop().await;
    workloads.stop().await;
}

/// A force is carried into the batch that supersedes the forced one: under a 1 h window, a manual
/// batch forced (not approved) waits for its approval; a new rotation supersedes it, and the new
/// batch carries the force, so it asks for its approval at once instead of collecting for an hour.
pub async fn a_force_is_carried_into_the_batch_that_supersedes_it(backend: Backend) {
    let world = World::new(backend, "force-carried").await;
    load_current(&world, &AppOptions { manual: true, ..AppOptions::default() }).await;
    let workloads = world.workloads();
    let engine = start(&world, "engine-a", |config| config.rollout_delay = Duration::from_secs(3600)).await;
    let w = &world;
    w.rotate_secret("bookshop-uaa").await;
    let batch = w.wait_phase("bookshop", BatchPhase::Collecting, LONG).await;
    act(
        &w.client,
        &w.ns,
        &batch.name_any(),
        BatchAction::Force { approve: false },
        "alice",
        Some("INC-3"),
        Timestamp::now(),
    )
    .await
    .expect("force");
    let forced = w.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    assert_eq!(forced.name_any(), batch.name_any());
    w.rotate_secret("bookshop-db").await;
    eventually("a new batch supersedes the forced one", LONG, || async {
        let batches = w.batches("bookshop").await;
        batches.iter().any(|b| b.name_any() == batch.name_any() && b.phase() == BatchPhase::Superseded)
            && batches.iter().any(|b| b.name_any() != batch.name_any())
    })
    .await;
    let successor = w.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    assert_ne!(successor.name_any(), batch.name_any());
    assert_eq!(successor.spec.force.as_ref().map(|f| f.by.as_str()), Some("alice"), "the force is carried");
    assert!(
        successor.spec.window_end.0.as_second() - Timestamp::now().as_second() > 3000,
        "its own 1 h window was not waited for"
    );
    engine.stop().await;
    workloads.stop().await;
}
