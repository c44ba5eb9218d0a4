//! Faults on a world: the API server restarted mid-rollout, a compaction forcing `410 Gone`, two
//! approvers at once (409), the lease taken away.

use std::time::Duration;

use capdeck::actions::{ActionError, BatchAction, act};
use capdeck::api::BatchPhase;
use capdeck::engine::Role;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::common::fixtures::AppOptions;
use crate::common::story_world::StoryWorld as _;
use crate::control_plane::Profile;
use crate::setup::{Engine, EngineExt as _, engine_config, load_current};
use crate::world::{Backend, World, config_for};

const LONG: Duration = Duration::from_secs(90);

/// kube-apiserver stopped for 3 s while Deployments roll, then started again (etcd keeps the
/// data): the batch still succeeds, and no Deployment is rolled twice.
pub async fn api_server_restarted_mid_rollout(backend: Backend) {
    let world = World::dedicated(backend, "apiserver-restart", Profile::Standard).await;
    // Slow rollouts (each new Pod ready 2 s after it started), so the restart lands while they roll.
    load_current(&world, &AppOptions { ready_after: Some("2s"), ..AppOptions::default() }).await;
    let workloads = world.workloads();
    let engine = Engine::on(&world, engine_config(&world, "engine-a")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    world.rotate_secret("bookshop-uaa").await;
    world.wait_phase("bookshop", BatchPhase::RollingOut, LONG).await;
    world.restart_server(Duration::from_secs(3)).await;
    let batch = world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_eq!(batch.status.and_then(|s| s.progress).as_deref(), Some("2/2"));
    let writes = engine.workload_writes();
    assert_eq!(writes.get("update deployments").copied(), Some(2), "{writes:#?}");
    engine.stop().await;
    workloads.stop().await;
}

/// History compacted while the engine's watches are cut: they resume from a resourceVersion the
/// server no longer has, get `410 Gone`, re-list — and the next rotation is still handled.
pub async fn watch_resumes_after_compaction_410(backend: Backend) {
    let world = World::dedicated(backend, "compaction-410", Profile::NoWatchCache).await;
    load_current(&world, &AppOptions::default()).await;
    let workloads = world.workloads();
    let engine = Engine::on(&world, engine_config(&world, "engine-a")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    // Changes the engine has seen, then history gone.
    for n in 0..5 {
        world
            .apply_objects(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("noise-{n}"), "namespace": world.ns}, "data": {"n": n.to_string()}})])
            .await;
    }
    match backend {
        Backend::KubeApiserver => {
            let plane = world.plane.clone().expect("plane");
            tokio::task::spawn_blocking(move || plane.compact_etcd()).await.expect("join").expect("compact");
            // Cut every watch: they come back with their last resourceVersion, now compacted.
            world.restart_server(Duration::from_millis(500)).await;
        }
        Backend::Sandbox => {
            world.sandbox().compact();
            world.sandbox().drop_watches();
        }
    }
    world.rotate_secret("bookshop-uaa").await;
    world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    engine.stop().await;
    workloads.stop().await;
}

/// Two people approve the same batch at the same moment: one write wins (resourceVersion
/// precondition), the other is refused as already approved — never applied twice.
pub async fn concurrent_approvers_one_wins(backend: Backend) {
    let world = World::new(backend, "concurrent-approvers").await;
    load_current(&world, &AppOptions { manual: true, ..AppOptions::default() }).await;
    let workloads = world.workloads();
    let engine = Engine::on(&world, engine_config(&world, "engine-a")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    world.rotate_secret("bookshop-uaa").await;
    let batch = world.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    let name = batch.name_any();
    let (a, b) = tokio::join!(
        act(&world.client, &world.ns, &name, BatchAction::Approve, "alice", Some("a"), Timestamp::now()),
        act(&world.client, &world.ns, &name, BatchAction::Approve, "erin", Some("b"), Timestamp::now()),
    );
    let outcomes = [a.is_ok(), b.is_ok()];
    assert_eq!(outcomes.iter().filter(|ok| **ok).count(), 1, "exactly one approval wins: {a:?} {b:?}");
    let refused = if a.is_err() { a.err() } else { b.err() };
    assert!(
        matches!(refused, Some(ActionError::Refused(ref text)) if text.contains("already approved")),
        "{refused:?}"
    );
    let batch = world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    let by = batch.spec.approval.and_then(|a| a.approved_by).unwrap_or_default();
    assert!(by == "alice" || by == "erin", "{by}");
    engine.stop().await;
    workloads.stop().await;
}

/// Someone else takes the Lease (a forced apply with a long duration): the engine notices at its
/// next renewal, steps down to Observer, and opens no batch for a rotation.
pub async fn lease_taken_by_another_holder_stops_writes(backend: Backend) {
    let world = World::new(backend, "lease-loss").await;
    load_current(&world, &AppOptions::default()).await;
    let engine = Engine::on(&world, engine_config(&world, "engine-a")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    let leases: Api<Lease> = Api::namespaced(world.client.clone(), &world.ns);
    // MicroTime: kube-apiserver takes microseconds, not nanoseconds (the sandbox took both).
    let now = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(Timestamp::now()))
        .expect("time");
    let intruder = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "capdeck-engine"},
        "spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 3600, "acquireTime": now, "renewTime": now}});
    leases
        .patch("capdeck-engine", &PatchParams::apply("intruder").force(), &Patch::Apply(&intruder))
        .await
        .expect("take the lease");
    engine.wait_for_role_within(Role::Observer, Duration::from_secs(30)).await;
    world.rotate_secret("bookshop-uaa").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(world.batches("bookshop").await.is_empty(), "an observer opened a batch");
    let writes = engine.workload_writes();
    assert!(writes.is_empty(), "{writes:#?}");
    engine.stop().await;
}

/// The API server starts refusing the leader's Lease writes (on a real cluster: a revoked
/// RoleBinding, an expired token; here a policy, on the sandbox a deny rule). kube-lease-manager
/// only logs each failed renewal; the engine sees its Lease go a whole duration without one (from
/// then on another engine may take it), stops leading, and opens no batch for a rotation. Once
/// the writes are allowed again it leads again and opens that batch.
pub async fn a_leader_whose_renewals_fail_steps_down(backend: Backend) {
    let world = World::new(backend, "renewals-fail").await;
    load_current(&world, &AppOptions::default()).await;
    let engine = Engine::on(&world, engine_config(&world, "engine-a")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    let policy = format!("capdeck-story-refuse-leases-{}", world.ns);
    match backend {
        Backend::Sandbox => world.sandbox().deny("patch:leases".parse().expect("rule")),
        Backend::KubeApiserver => {
            world
                .apply_objects(vec![
                    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                        "metadata": {"name": policy},
                        "spec": {"failurePolicy": "Fail",
                            "matchConstraints": {"resourceRules": [{"apiGroups": ["coordination.k8s.io"],
                                "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["leases"]}]},
                            "validations": [{"expression": "false", "message": "Lease writes refused by the story"}]}}),
                    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                        "metadata": {"name": policy},
                        "spec": {"policyName": policy, "validationActions": ["Deny"],
                            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": world.ns}}}}}),
                ])
                .await;
        }
    }
    // Leases of 10 s renewed every 7 s: a leader whose renewals fail would have gone within ~20 s.
    engine.wait_for_role_within(Role::Observer, Duration::from_secs(40)).await;
    let leases: Api<Lease> = Api::namespaced(world.client.clone(), &world.ns);
    let lease = leases.get("capdeck-engine").await.expect("lease");
    let holder = lease.spec.as_ref().and_then(|spec| spec.holder_identity.as_deref());
    assert_eq!(holder, Some("engine-a"), "the Lease was neither released nor taken: only its renewals failed");
    world.rotate_secret("bookshop-uaa").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(world.batches("bookshop").await.is_empty(), "an engine that could not renew opened a batch");
    assert!(engine.workload_writes().is_empty(), "{:#?}", engine.workload_writes());
    // The refusal ends: the engine takes its Lease again and, leading, its start-up re-check
    // opens the batch the rotation called for.
    match backend {
        Backend::Sandbox => world.sandbox().allow_all(),
        Backend::KubeApiserver => {
            for kind in ["validatingadmissionpolicybindings", "validatingadmissionpolicies"] {
                let resource = kube::discovery::ApiResource {
                    group: "admissionregistration.k8s.io".into(),
                    version: "v1".into(),
                    api_version: "admissionregistration.k8s.io/v1".into(),
                    kind: String::new(),
                    plural: kind.into(),
                };
                let api: Api<kube::api::DynamicObject> = Api::all_with(world.client.clone(), &resource);
                api.delete(&policy, &Default::default()).await.expect("delete the refusal");
            }
        }
    }
    engine.wait_for_role_within(Role::Leader, LONG).await;
    crate::world::eventually("the rotation's batch once leading again", LONG, || async {
        !world.batches("bookshop").await.is_empty()
    })
    .await;
    engine.stop().await;
}

/// The console lists the kind on screen first, as one streaming list where the API server
/// offers it (kube-apiserver 1.34 and 1.37 both do; the sandbox too), and reads no Secret
/// before that kind has listed: every other store waits its turn.
pub async fn the_console_lists_the_kind_on_screen_first_and_streams_it(backend: Backend) {
    let world = World::new(backend, "list-first").await;
    lists_the_tenants_first(&world, "streaming list captenants").await;
}

/// Where the API server refuses streaming lists (kube-apiserver with the WatchList feature
/// off, as before 1.32), the kind on screen is listed in pages, still first.
pub async fn where_streaming_lists_are_refused_the_console_lists_in_pages_first(backend: Backend) {
    let world = World::dedicated(backend, "list-first-paged", Profile::WithoutWatchList).await;
    if let Some(sandbox) = &world.sandbox {
        sandbox.sandbox.refuse_streaming_lists(true);
    }
    lists_the_tenants_first(&world, "list captenants").await;
}

/// The console's stores with the tenants on screen: `listing` (the tenants' list request) is
/// answered before anything else is sent, and the binding Secrets are read by name.
async fn lists_the_tenants_first(world: &World, listing: &str) {
    use capdeck::bench::reads::ReadCounter;
    use capdeck::cluster::stores::Stores;
    load_current(world, &AppOptions::default()).await;
    let reads = ReadCounter::logging();
    let client = reads.client(config_for(&world.admin_kubeconfig).await).expect("client");
    let cancel = tokio_util::sync::CancellationToken::new();
    let scope = capdeck::cluster::Scope::Namespace(world.ns.clone());
    let (stores, tasks) = Stores::start_for_console(&client, scope, cancel.clone(), Some("CAPTenant"));
    tokio::time::timeout(LONG, stores.wait_ready()).await.expect("every store ready");
    // In the order sent and answered: the tenants' list, its end, then the rest.
    let log = reads.log();
    let end = log.iter().rposition(|entry| *entry == format!("answered {listing}"));
    let end = end.unwrap_or_else(|| panic!("the tenants are listed by {listing}: {log:#?}"));
    let tenants = |entry: &&String| entry.ends_with("captenants");
    let before: Vec<&String> = log[..end].iter().filter(|entry| !tenants(entry)).collect();
    assert!(before.is_empty(), "nothing but the tenants is read before they have listed: {before:?}");
    let other =
        if listing.starts_with("streaming") { "sent list captenants" } else { "sent streaming list captenants" };
    let refused = log.iter().filter(|entry| *entry == "sent streaming list captenants").count();
    if listing.starts_with("streaming") {
        assert!(!log.iter().any(|entry| entry == other), "no paged list when streaming works: {log:#?}");
    } else {
        assert_eq!(refused, 1, "one streaming list tried, refused, then pages: {log:#?}");
    }
    // Then everything else, and the referenced binding Secrets are read by name (no list of all).
    let all = reads.since(&Default::default());
    assert!(!stores.binding_secrets.state().is_empty(), "the referenced binding Secrets are read: {all}");
    assert_eq!(all["by_request"]["list secrets (metadata)"]["requests"], 1, "one version read, no list: {all}");
    cancel.cancel();
    for task in tasks.handles {
        let _ = task.await;
    }
}
