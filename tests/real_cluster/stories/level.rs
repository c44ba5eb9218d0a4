//! Level-triggered truth (issue 60): every Deployment of a version in use runs its binding
//! Secrets' current credentials, or a batch says why and every surface shows it. What a person
//! undid or cancelled stays so (said by `capdeck_deployments_out_of_date`, `capdeck doctor`) until
//! `capdeck retry` rolls it forward or the Secret rotates again; a version that becomes Ready
//! after a rotation gets it. No engine restart in between: each pass compares what should be with
//! what is.

use std::time::Duration;

use capdeck::actions::{BatchAction, act};
use capdeck::api::BatchPhase;
use capdeck::engine::Role;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use serde_json::json;

use crate::common::fixtures::{AppOptions, owned_by_version, version_uid};
use crate::common::story_world::StoryWorld as _;
use crate::setup::{Engine, EngineExt as _, capdeck, engine_config, load_current, text};
use crate::world::{Backend, Fate, Workloads, World, eventually};

const LONG: Duration = Duration::from_secs(60);

async fn running(backend: Backend, test: &str, options: &AppOptions) -> (World, Engine, Workloads) {
    let world = World::new(backend, test).await;
    load_current(&world, options).await;
    let workloads = world.workloads();
    let engine = Engine::on(&world, engine_config(&world, "engine-a")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    (world, engine, workloads)
}

/// `capdeck_deployments_out_of_date` of bookshop reaches `expected`.
async fn out_of_date(world: &World, engine: &Engine, expected: i64) {
    let series = format!("capdeck_deployments_out_of_date{{namespace=\"{}\",application=\"bookshop\"}}", world.ns);
    eventually(&format!("{series} at {expected}"), LONG, || async {
        match engine.metric(&series) {
            Some(value) if value == expected => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// Bookshop's batch other than `not`, once it is in `phase`.
async fn another(world: &World, not: &str, phase: BatchPhase) -> capdeck::api::RotationBatch {
    let found = std::sync::Mutex::new(None);
    eventually(&format!("a bookshop batch besides {not} {phase}"), LONG, || async {
        let batches = world.batches("bookshop").await;
        match batches.iter().find(|batch| batch.name_any() != not && batch.phase() == phase) {
            Some(batch) => {
                *found.lock().expect("lock") = Some(batch.clone());
                Ok(())
            }
            None => Err(crate::common::story_world::describe(&batches)),
        }
    })
    .await;
    found.into_inner().expect("lock").expect("seen above")
}

/// `capdeck doctor -n NS` as the cluster's admin: its exit code and what it printed.
fn doctor(world: &World) -> (Option<i32>, String) {
    let output = capdeck(&world.admin_kubeconfig, &["doctor", "-n", &world.ns]);
    let (stdout, stderr) = text(&output);
    (output.status.code(), format!("{stdout}{stderr}"))
}

/// A crash-looping rollout is halted by the failure guard and undone; the application runs the
/// old credentials and every surface says so, the engine opens nothing by itself; the cause is
/// fixed and `capdeck retry` on the Undone batch rolls the application forward with a new batch:
/// every Deployment current, the gauge back to 0, no daemon restart. Before issue 60 the gauge did
/// not exist, doctor said nothing blocks, and `retry` refused ("is Undone; nothing to retry").
pub async fn an_undone_rollout_is_said_until_retry_rolls_it_forward(backend: Backend) {
    let options = AppOptions { deployments: &[("srv", &["uaa"])], crash_loop: &["srv"], ..AppOptions::default() };
    let (w, engine, workloads) = running(backend, "undo-forward", &options).await;
    let previous = w.vcap_of("bookshop-v1-srv").await;
    w.rotate_secret("bookshop-uaa").await;
    let halted = w.wait_phase("bookshop", BatchPhase::Held, LONG).await;
    let name = halted.name_any();
    act(&w.client, &w.ns, &name, BatchAction::Undo, "bob", Some("new credentials refused"), Timestamp::now())
        .await
        .expect("undo a halted batch");
    w.wait_phase("bookshop", BatchPhase::Undone, LONG).await;
    assert_eq!(w.vcap_of("bookshop-v1-srv").await, previous, "back on the old credentials");
    out_of_date(&w, &engine, 1).await;
    let (code, said) = doctor(&w);
    assert_ne!(code, Some(0), "doctor fails while an application runs old credentials:\n{said}");
    assert!(said.contains("bookshop") && said.contains(&name) && said.contains("undone by bob"), "{said}");
    assert!(said.contains(&format!("capdeck retry {}/{name}", w.ns)), "{said}");
    // The cause is fixed: the next Pods run. Nothing opened by itself meanwhile.
    w.next_pods("bookshop-v1-srv", Fate::Ready).await;
    assert_eq!(w.batches("bookshop").await.len(), 1, "the engine does not roll forward what a person undid");

    let report = act(&w.client, &w.ns, &name, BatchAction::Retry, "alice", Some("crash fixed"), Timestamp::now())
        .await
        .expect("retry an Undone batch: roll forward");
    assert!(report.summary.contains("bookshop-v1-srv") && report.summary.contains("forward"), "{}", report.summary);
    let rolled = another(&w, &name, BatchPhase::Succeeded).await;
    assert_eq!(rolled.spec.rolls_forward.as_deref(), Some(name.as_str()), "a new batch rolled forward");
    assert_ne!(w.vcap_of("bookshop-v1-srv").await, previous, "on the current credentials");
    out_of_date(&w, &engine, 0).await;
    let (code, said) = doctor(&w);
    assert!(!said.contains("runs old credentials"), "doctor no longer names it (exit {code:?}):\n{said}");
    let again = act(&w.client, &w.ns, &name, BatchAction::Retry, "alice", Some("again"), Timestamp::now()).await;
    let refused = again.expect_err("rolled forward once").to_string();
    assert!(refused.contains("was rolled forward already"), "{refused}");
    engine.stop().await;
    workloads.stop().await;
}

/// A batch cancelled while it awaits its approval: the Deployment stays on the old credentials,
/// said by the gauge, and no batch opens by itself; `capdeck retry` on the Cancelled batch opens a
/// new one under the application's approval policy, which rolls once approved. Before issue 60
/// the gauge did not exist and `retry` refused a Cancelled batch.
pub async fn a_cancelled_batch_is_said_until_retry_rolls_it_forward(backend: Backend) {
    let options = AppOptions { deployments: &[("srv", &["uaa"])], manual: true, ..AppOptions::default() };
    let (w, engine, workloads) = running(backend, "cancel-forward", &options).await;
    let previous = w.vcap_of("bookshop-v1-srv").await;
    w.rotate_secret("bookshop-uaa").await;
    let awaiting = w.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    let name = awaiting.name_any();
    act(&w.client, &w.ns, &name, BatchAction::Cancel, "bob", Some("not today"), Timestamp::now())
        .await
        .expect("cancel");
    w.wait_phase("bookshop", BatchPhase::Cancelled, LONG).await;
    out_of_date(&w, &engine, 1).await;
    assert_eq!(w.batches("bookshop").await.len(), 1, "the engine does not roll forward what a person cancelled");
    assert_eq!(w.vcap_of("bookshop-v1-srv").await, previous);

    act(&w.client, &w.ns, &name, BatchAction::Retry, "alice", Some("today after all"), Timestamp::now())
        .await
        .expect("retry a Cancelled batch: roll forward");
    // The new batch's window ends at once, before the cancelled one's: found by name, not order.
    let forward = another(&w, &name, BatchPhase::AwaitingApproval).await;
    assert_eq!(forward.spec.rolls_forward.as_deref(), Some(name.as_str()), "it says what it rolls forward");
    act(&w.client, &w.ns, &forward.name_any(), BatchAction::Approve, "carol", Some("ok"), Timestamp::now())
        .await
        .expect("approve");
    another(&w, &name, BatchPhase::Succeeded).await;
    assert_ne!(w.vcap_of("bookshop-v1-srv").await, previous, "on the current credentials");
    out_of_date(&w, &engine, 0).await;
    engine.stop().await;
    workloads.stop().await;
}

/// A binding Secret rotates while a new version's Deployment exists but the version is not Ready
/// (not in use: the batch leaves it out). When the version becomes Ready it serves on the old
/// credentials no more: the re-check its status change triggers opens a batch that rolls it.
/// Before issue 60 no batch ever opened for it until the engine restarted.
pub async fn a_rotation_during_an_upgrade_reaches_the_new_version(backend: Backend) {
    let options = AppOptions { deployments: &[("srv", &["uaa"])], ..AppOptions::default() };
    let (w, engine, workloads) = running(backend, "upgrade", &options).await;
    let old_vcap = w.vcap_of("bookshop-v1-srv").await;
    // The upgrade: version 2.0.0 and its Deployment, on the credentials of the moment (the same
    // VCAP Secret as the version in use), not Ready yet.
    let v2 = "bookshop-v2";
    w.prepare_pool("bookshop-v2-srv").await;
    let workloads_v2 =
        json!([{"name": "srv", "consumedBTPServices": ["uaa"], "deploymentDefinition": {"type": "CAP", "image": "i"}}]);
    let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "bookshop-v2-srv", "namespace": w.ns, "ownerReferences": owned_by_version(v2)},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "bookshop-v2-srv"}},
                 "template": {"metadata": {"labels": {"app": "bookshop-v2-srv"}}, "spec": {
                     "containers": [{"name": "main", "image": "i", "envFrom": [{"secretRef": {"name": old_vcap, "optional": true}}]}]}}}});
    crate::world::pin_to_pool(&mut deployment, &crate::world::node_pool(&w.ns, "bookshop-v2-srv"));
    w.apply_objects(vec![
        json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion",
               "metadata": {"name": v2, "namespace": w.ns, "uid": version_uid(v2)},
               "spec": {"capApplicationInstance": "bookshop", "version": "2.0.0", "workloads": workloads_v2}}),
        deployment,
    ])
    .await;
    w.rotate_secret("bookshop-uaa").await;
    let first = w.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    let listed: Vec<String> = first.restarts().map(|d| d.name.clone()).collect();
    assert_eq!(listed, ["bookshop-v1-srv"], "the version not in use is left out");
    assert_eq!(w.vcap_of("bookshop-v2-srv").await, old_vcap, "not rolled yet");

    // The upgrade completes: version 2.0.0 is Ready.
    let api = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        w.client.clone(),
        &w.ns,
        &w.resource("sme.sap.com/v1alpha1", "CAPApplicationVersion").await,
    );
    let ready = json!({"status": {"state": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}});
    let params = kube::api::PatchParams::default();
    if api.patch_status(v2, &params, &kube::api::Patch::Merge(&ready)).await.is_err() {
        api.patch(v2, &params, &kube::api::Patch::Merge(&ready)).await.expect("version Ready");
    }
    eventually("a batch rolls the new version", LONG, || async {
        let batches = w.batches("bookshop").await;
        let rolled = batches.iter().any(|batch| {
            batch.phase() == BatchPhase::Succeeded && batch.restarts().any(|d| d.name == "bookshop-v2-srv")
        });
        if rolled { Ok(()) } else { Err(crate::common::story_world::describe(&batches)) }
    })
    .await;
    let v1_vcap = w.vcap_of("bookshop-v1-srv").await;
    assert_eq!(w.vcap_payload(&w.vcap_of("bookshop-v2-srv").await).await, w.vcap_payload(&v1_vcap).await);
    out_of_date(&w, &engine, 0).await;
    engine.stop().await;
    workloads.stop().await;
}
