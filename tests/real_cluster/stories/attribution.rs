//! Who approved is who approved (issue 32 §3): an approval or a hold that names someone other
//! than its writer never drives the engine. Two layers, each shown here:
//!
//! - the engine honours an approval or a hold only when the server's `managedFields` say capdeck
//!   wrote it (`decide::attribution_check`), on both backends;
//! - the ValidatingAdmissionPolicy of `capdeck manifests` refuses a spec write whose `by` is not
//!   the requesting user (kube-apiserver only: the sandbox does not evaluate admission policies).

use std::time::Duration;

use capdeck::api::rotation_batch::attribution;
use capdeck::api::{BatchPhase, RotationBatch};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::common::story_world::StoryWorld as _;
use crate::control_plane::Profile;
use crate::setup::{capdeck, text};
use crate::world::{Backend, World, eventually};

const LONG: Duration = Duration::from_secs(60);

use crate::stories::process::awaiting_batch as awaiting;

/// `kubectl patch rb NAME --type merge -p PATCH` as `kubeconfig`'s user: the built kubectl on
/// kube-apiserver; on the sandbox the same request kubectl sends (a merge patch, field manager
/// `kubectl-patch`). `Err`: kubectl's error output.
async fn kubectl_patch(world: &World, kubeconfig: &std::path::Path, name: &str, patch: &Value) -> Result<(), String> {
    match world.backend {
        Backend::KubeApiserver => {
            let output = world
                .plane()
                .kubectl()
                .env("KUBECONFIG", kubeconfig)
                .args(["patch", "rotationbatch", name, "-n", &world.ns, "--type", "merge", "-p", &patch.to_string()])
                .output()
                .expect("kubectl runs");
            let (stdout, stderr) = text(&output);
            if output.status.success() { Ok(()) } else { Err(format!("{stdout}{stderr}")) }
        }
        Backend::Sandbox => {
            let client = crate::world::client_for(kubeconfig).await;
            let api: Api<RotationBatch> = Api::namespaced(client, &world.ns);
            let params = PatchParams { field_manager: Some("kubectl-patch".into()), ..PatchParams::default() };
            api.patch(name, &params, &Patch::Merge(patch)).await.map(|_| ()).map_err(|e| e.to_string())
        }
    }
}

async fn batch(world: &World, name: &str) -> RotationBatch {
    let api: Api<RotationBatch> = Api::namespaced(world.client.clone(), &world.ns);
    api.get(name).await.expect("batch")
}

/// The message of the batch's `condition_type` condition (status False, `reason`), once it is
/// there.
async fn refusal(world: &World, name: &str, condition_type: &str, reason: &str) -> String {
    let found = std::sync::Mutex::new(String::new());
    eventually(&format!("batch {name}: condition {condition_type}"), LONG, || async {
        let batch = batch(world, name).await;
        let conditions = batch.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
        match conditions.iter().find(|c| c.type_ == condition_type) {
            Some(condition) if condition.reason == reason => {
                *found.lock().expect("lock") = condition.message.clone();
                Ok(())
            }
            _ => Err(format!("phase {}, conditions {conditions:?}", batch.phase())),
        }
    })
    .await;
    found.into_inner().expect("lock")
}

/// Wait for a Warning Event with `reason` whose note contains `needle`.
async fn refusal_event(world: &World, reason: &str, needle: &str) {
    eventually(&format!("a Warning Event {reason}: {needle}"), LONG, || async {
        let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(world.client.clone(), &world.ns);
        let notes: Vec<String> = events
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning"))
            .map(|e| e.note.clone().unwrap_or_default())
            .collect();
        if notes.iter().any(|note| note.contains(needle)) { Ok(()) } else { Err(format!("{notes:?}")) }
    })
    .await;
}

/// Without the admission policy (the admin, whom it exempts, writes with kubectl): a forged hold
/// holds nothing and a forged approval rolls nothing; each is said on the batch, in an Event and
/// the list's APPROVAL column. `capdeck hold` and `capdeck approve` by alice, a real user, are
/// honoured.
pub async fn a_kubectl_forged_approval_or_hold_drives_nothing(backend: Backend) {
    let world = World::new(backend, "forged-attribution").await;
    let (engine, workloads, name) = awaiting(&world).await;
    let target = format!("{}/{name}", world.ns);

    // A hold in someone else's name: the batch keeps waiting for its approval, not Held.
    let forged_hold =
        json!({"spec": {"hold": {"by": "ceo@example.com", "at": "2026-11-25T08:00:00Z", "reason": "forged"}}});
    kubectl_patch(&world, &world.admin_kubeconfig, &name, &forged_hold).await.expect("kubectl patch (no policy)");
    let message = refusal(&world, &name, attribution::HOLD_HONOURED, attribution::HOLD_NOT_HONOURED).await;
    eprintln!("HoldHonoured: {message}");
    assert_eq!(
        message,
        format!(
            "hold by ceo@example.com was written by kubectl-patch, not by capdeck hold: not honoured; hold with capdeck \
             hold {target}"
        )
    );
    assert_eq!(batch(&world, &name).await.phase(), BatchPhase::AwaitingApproval, "a forged hold holds nothing");

    // alice holds as herself with capdeck: honoured (her write replaces the forged one).
    world.grant("alice", "capdeck.dev", &["rotationbatches"], &["get", "list", "watch", "patch"], &[]).await;
    let alice = world.kubeconfig_for("alice");
    let output = capdeck(&alice, &["hold", &target, "--reason", "freeze"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    let held = world.wait_phase("bookshop", BatchPhase::Held, LONG).await;
    assert_eq!(held.spec.hold.as_ref().map(|h| h.by.as_str()), Some("alice"));
    assert!(!held.attribution_refused(attribution::HOLD_HONOURED), "{:?}", held.status);
    let output = capdeck(&alice, &["release", &target, "--reason", "thaw"]);
    assert!(output.status.success(), "{:?}", text(&output));
    world.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;

    // An approval in someone else's name: not honoured, the batch keeps waiting and says why.
    let forged = json!({"spec": {"approval": {"approvedBy": "ceo@example.com", "reason": "forged"}}});
    kubectl_patch(&world, &world.admin_kubeconfig, &name, &forged).await.expect("kubectl patch (no policy)");
    let message = refusal(&world, &name, attribution::APPROVAL_HONOURED, attribution::APPROVAL_NOT_HONOURED).await;
    eprintln!("ApprovalHonoured: {message}");
    assert_eq!(
        message,
        format!(
            "approval by ceo@example.com was written by kubectl-patch, not by capdeck approve: not honoured; approve \
             with capdeck approve {target}"
        )
    );
    let waiting = batch(&world, &name).await;
    assert_eq!(waiting.phase(), BatchPhase::AwaitingApproval, "a forged approval rolls nothing");
    assert_eq!(waiting.approval_text(), "approval by ceo@example.com not honoured");
    refusal_event(&world, attribution::HOLD_NOT_HONOURED, "hold by ceo@example.com was written by kubectl-patch").await;
    refusal_event(
        &world,
        attribution::APPROVAL_NOT_HONOURED,
        "approval by ceo@example.com was written by kubectl-patch",
    )
    .await;

    // alice approves as herself: the forged approval does not stand in her way, hers is honoured.
    let output = capdeck(&alice, &["approve", &target, "--reason", "CHG-7"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    let done = world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_eq!(done.spec.approval.as_ref().and_then(|a| a.approved_by.as_deref()), Some("alice"));
    assert!(!done.attribution_refused(attribution::APPROVAL_HONOURED), "{:?}", done.status);
    engine.stop().await;
    workloads.stop().await;
}

/// A forged hold is not carried into the batch that supersedes the held one (the engine writes
/// the carried hold under its own field manager, so carrying it would make it honoured); a hold
/// written with `capdeck hold` is.
pub async fn a_forged_hold_is_not_carried_into_the_batch_that_supersedes_it(backend: Backend) {
    let world = World::new(backend, "forged-carry").await;
    let (engine, workloads, name) = awaiting(&world).await;
    let forged_hold =
        json!({"spec": {"hold": {"by": "ceo@example.com", "at": "2026-11-25T08:00:00Z", "reason": "forged"}}});
    kubectl_patch(&world, &world.admin_kubeconfig, &name, &forged_hold).await.expect("kubectl patch (no policy)");
    refusal(&world, &name, attribution::HOLD_HONOURED, attribution::HOLD_NOT_HONOURED).await;
    world.rotate_secret("bookshop-uaa").await;
    let found = std::sync::Mutex::new(None);
    eventually("a new batch supersedes the one with the forged hold", LONG, || async {
        let batches = world.batches("bookshop").await;
        match batches.last() {
            Some(newest)
                if newest.metadata.name.as_deref() != Some(name.as_str())
                    && newest.phase() == BatchPhase::AwaitingApproval =>
            {
                *found.lock().expect("lock") = Some(newest.clone());
                Ok(())
            }
            _ => Err(crate::common::story_world::describe(&batches)),
        }
    })
    .await;
    let newer = found.into_inner().expect("lock").expect("the newer batch");
    assert_eq!(batch(&world, &name).await.phase(), BatchPhase::Superseded);
    assert!(newer.spec.hold.is_none(), "the forged hold is not carried: {:?}", newer.spec.hold);

    // alice's own hold, with capdeck: carried, and still honoured.
    world.grant("alice", "capdeck.dev", &["rotationbatches"], &["get", "list", "watch", "patch"], &[]).await;
    let alice = world.kubeconfig_for("alice");
    let newer_name = newer.metadata.name.clone().expect("name");
    let output = capdeck(&alice, &["hold", &format!("{}/{newer_name}", world.ns), "--reason", "freeze"]);
    assert!(output.status.success(), "{:?}", text(&output));
    world.wait_phase("bookshop", BatchPhase::Held, LONG).await;
    world.rotate_secret("bookshop-uaa").await;
    eventually("the newest batch carries alice's hold and is held", LONG, || async {
        let batches = world.batches("bookshop").await;
        match batches.last() {
            Some(newest)
                if newest.metadata.name.as_deref() != Some(newer_name.as_str())
                    && newest.phase() == BatchPhase::Held
                    && newest.spec.hold.as_ref().map(|hold| hold.by.as_str()) == Some("alice")
                    && !newest.attribution_refused(attribution::HOLD_HONOURED) =>
            {
                Ok(())
            }
            _ => Err(crate::common::story_world::describe(&batches)),
        }
    })
    .await;
    engine.stop().await;
    workloads.stop().await;
}

/// The admission policy of `capdeck manifests`, installed as shipped on a control plane of its
/// own (it binds cluster-wide): on kube-apiserver 1.34 mallory, who may patch
/// batches, cannot write an approval or a hold in someone else's name with kubectl; in her own
/// name kubectl passes the policy, and the engine still does not honour it; alice's `capdeck
/// approve` passes both.
pub async fn the_admission_policy_refuses_an_attribution_in_another_name(backend: Backend) {
    let world = World::dedicated(backend, "attribution-policy", Profile::Standard).await;
    let system = format!("{}-system", world.ns);
    let output = capdeck(&world.admin_kubeconfig, &["manifests", "-n", &system]);
    let (manifests, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    world.plane().kubectl_apply(&manifests).expect("kubectl apply of capdeck manifests");
    // kube-apiserver compiles the expressions when it loads the policy (its type check lands in
    // the status only with kube-controller-manager, which this control plane has not): every
    // validation runs on every write below, so one that does not compile refuses them all.
    let (engine, workloads, name) = awaiting(&world).await;
    let target = format!("{}/{name}", world.ns);
    for user in ["alice", "mallory"] {
        world.grant(user, "capdeck.dev", &["rotationbatches"], &["get", "list", "watch", "patch"], &[]).await;
    }
    let mallory = world.kubeconfig_for("mallory");
    let forged = json!({"spec": {"approval": {"approvedBy": "ceo@example.com", "reason": "forged"}}});
    // The policy is in force once kube-apiserver's policy informer has it.
    let refused = std::sync::Mutex::new(String::new());
    eventually("mallory's forged approval refused", LONG, || async {
        match kubectl_patch(&world, &mallory, &name, &forged).await {
            Err(error) => {
                *refused.lock().expect("lock") = error;
                Ok(())
            }
            Ok(()) => Err("accepted".to_string()),
        }
    })
    .await;
    let refused = refused.into_inner().expect("lock");
    eprintln!("kubectl patch as mallory: {refused}");
    assert!(
        refused.contains(
            "spec.approval.approvedBy must be the user making the request (mallory), not ceo@example.com; use \
             capdeck approve"
        ),
        "{refused}"
    );
    assert!(refused.contains("ValidatingAdmissionPolicy 'capdeck-attribution'"), "{refused}");
    let forged_hold = json!({"spec": {"hold": {"by": "ceo@example.com", "at": "2026-11-25T08:00:00Z"}}});
    let refused = kubectl_patch(&world, &mallory, &name, &forged_hold).await.expect_err("forged hold refused");
    eprintln!("kubectl patch as mallory: {refused}");
    assert!(
        refused.contains(
            "spec.hold.by must be the user making the request (mallory), not ceo@example.com; use capdeck hold"
        ),
        "{refused}"
    );
    // Every other attribution, each with its own message (and so every expression evaluates).
    for (field, command) in
        [("force", "force"), ("released", "release"), ("cancel", "cancel"), ("retry", "retry"), ("undo", "undo")]
    {
        let patch = json!({"spec": {field: {"by": "ceo@example.com", "at": "2026-11-25T08:00:00Z"}}});
        let refused = kubectl_patch(&world, &mallory, &name, &patch).await.expect_err(field);
        let expected = format!(
            "spec.{field}.by must be the user making the request (mallory), not ceo@example.com; use capdeck {command}"
        );
        assert!(refused.contains(&expected), "{refused}");
    }
    // Which batch a roll forward continues is the engine's alone (it waives the storm guard).
    let forward = json!({"spec": {"rollsForward": "some-undone-batch"}});
    let refused = kubectl_patch(&world, &mallory, &name, &forward).await.expect_err("rollsForward refused");
    assert!(refused.contains("spec.rollsForward is set by the capdeck engine"), "{refused}");
    let untouched = batch(&world, &name).await;
    assert!(untouched.spec.rolls_forward.is_none());
    assert!(untouched.spec.approval.and_then(|a| a.approved_by).is_none() && untouched.spec.hold.is_none());
    assert!(untouched.spec.cancel.is_none() && untouched.spec.force.is_none() && untouched.spec.undo.is_none());

    // In her own name kubectl passes the policy; the engine still takes only capdeck's writes.
    let own = json!({"spec": {"approval": {"approvedBy": "mallory", "reason": "by hand"}}});
    kubectl_patch(&world, &mallory, &name, &own).await.expect("her own name passes the policy");
    let message = refusal(&world, &name, attribution::APPROVAL_HONOURED, attribution::APPROVAL_NOT_HONOURED).await;
    assert!(
        message.starts_with("approval by mallory was written by kubectl-patch, not by capdeck approve"),
        "{message}"
    );
    assert_eq!(batch(&world, &name).await.phase(), BatchPhase::AwaitingApproval);

    // alice holds as herself: mallory may not rewrite the reason under her name; alice releases.
    let output = capdeck(&world.kubeconfig_for("alice"), &["hold", &target, "--reason", "CHG-8"]);
    assert!(output.status.success(), "{:?}", text(&output));
    let reason = json!({"spec": {"hold": {"reason": "held by the CEO's order"}}});
    let refused = kubectl_patch(&world, &mallory, &name, &reason).await.expect_err("rewriting a hold's reason");
    assert!(refused.contains("spec.hold.by must be the user making the request (mallory), not alice"), "{refused}");
    assert_eq!(batch(&world, &name).await.spec.hold.and_then(|f| f.reason).as_deref(), Some("CHG-8"));
    let output = capdeck(&world.kubeconfig_for("alice"), &["release", &target, "--reason", "CHG-8 done"]);
    assert!(output.status.success(), "{:?}", text(&output));

    // alice approves as herself with capdeck: both layers agree, the batch rolls.
    let output = capdeck(&world.kubeconfig_for("alice"), &["approve", &target, "--reason", "CHG-7"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    let done = world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_eq!(done.spec.approval.as_ref().and_then(|a| a.approved_by.as_deref()), Some("alice"));
    // Her approval's why and when are hers: mallory rewriting them under alice's name is refused,
    // as is rewriting the reason of a record in another's name (a force here).
    let rewritten =
        json!({"spec": {"approval": {"reason": "approved by the board", "approvedAt": "2026-11-20T08:00:00Z"}}});
    let refused = kubectl_patch(&world, &mallory, &name, &rewritten).await.expect_err("rewriting alice's approval");
    assert!(
        refused
            .contains("spec.approval of alice may only be changed by a new approval of mallory; use capdeck approve"),
        "{refused}"
    );
    let kept = batch(&world, &name).await;
    assert_eq!(kept.spec.approval.and_then(|a| a.reason).as_deref(), Some("CHG-7"));
    // The window is the engine's: moving it 173 years on holds the batch in nobody's name.
    let moved = json!({"spec": {"windowEnd": "2199-12-31T23:59:59Z"}});
    let refused = kubectl_patch(&world, &mallory, &name, &moved).await.expect_err("moving the window");
    assert!(
        refused.contains("spec.windowEnd is fixed when the batch opens; to end the window early use capdeck force"),
        "{refused}"
    );
    // Marking a Lease as a leading capdeck engine (which makes every engine of its scope step
    // back) takes what leading takes: erin, who may write Leases here, may not.
    world.grant("erin", "coordination.k8s.io", &["leases"], &["get", "list", "create", "update", "patch"], &[]).await;
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "forged", "namespace": world.ns, "labels": {"capdeck.dev/engine": "true"},
                     "annotations": {"capdeck.dev/scope": "*", "capdeck.dev/leading": "erin"}},
        "spec": {"holderIdentity": "erin", "leaseDurationSeconds": 15}});
    let output = world
        .plane()
        .kubectl()
        .env("KUBECONFIG", world.kubeconfig_for("erin"))
        .args(["create", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().expect("stdin").write_all(lease.to_string().as_bytes())?;
            child.wait_with_output()
        })
        .expect("kubectl");
    let (_, refused) = text(&output);
    assert!(!output.status.success(), "a forged engine Lease was accepted");
    assert!(
        refused.contains("a Lease labelled capdeck.dev/engine claims to lead capdeck in every namespace; erin may not patch rotationbatches/status there"),
        "{refused}"
    );
    engine.stop().await;
    workloads.stop().await;
}

/// Each person's action is an Event of its own: alice holds, releases, and dave holds again
/// within a minute; the two holds are two Events, each naming its holder (kube's recorder merges
/// Events of one key for minutes and keeps the first note).
pub async fn each_action_on_a_batch_is_an_event_of_its_own(backend: Backend) {
    use k8s_openapi::api::events::v1::Event;
    let world = World::new(backend, "event-per-action").await;
    let (engine, workloads, name) = awaiting(&world).await;
    let target = format!("{}/{name}", world.ns);
    for user in ["alice", "dave"] {
        world.grant(user, "capdeck.dev", &["rotationbatches"], &["get", "list", "watch", "patch"], &[]).await;
    }
    let act = |user: &str, args: &[&str]| {
        let output = capdeck(&world.kubeconfig_for(user), args);
        assert!(output.status.success(), "{user} {args:?}: {:?}", text(&output));
    };
    act("alice", &["hold", &target, "--reason", "audit"]);
    world.wait_phase("bookshop", BatchPhase::Held, LONG).await;
    act("alice", &["release", &target, "--reason", "audit done"]);
    world.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    act("dave", &["hold", &target, "--reason", "second look"]);
    world.wait_phase("bookshop", BatchPhase::Held, LONG).await;
    let events: Api<Event> = Api::namespaced(world.client.clone(), &world.ns);
    eventually("two Held Events, one per holder", LONG, || async {
        let all = events.list(&Default::default()).await.map(|list| list.items).unwrap_or_default();
        let notes: Vec<String> = all
            .into_iter()
            .filter(|event| event.reason.as_deref() == Some("Held"))
            .filter_map(|event| event.note)
            .collect();
        let by = |who: &str| notes.iter().any(|note| note.contains(&format!("held by {who}")));
        if notes.len() == 2 && by("alice") && by("dave") { Ok(()) } else { Err(format!("{notes:?}")) }
    })
    .await;
    engine.stop().await;
    workloads.stop().await;
}
