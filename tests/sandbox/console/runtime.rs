//! The console's runtime over the sandbox, through a real `kube::Client` over HTTP, drawn on a
//! `TestBackend`: the engine attached, approving a batch with a reason, read-only and RBAC-denied
//! sessions that never write, `:ns` switching, and an API outage with the banner and reconnect.

use crate::common;
use crate::common::console::Console;
use capdeck::engine::config::EngineMode;
use capdeck::sandbox::{DenyRule, Sandbox, ServedSandbox};
use crossterm::event::KeyCode;
use serde_json::Value;

struct World {
    sandbox: Sandbox,
    served: Option<ServedSandbox>,
    _dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
    _simulation: tokio_util::sync::DropGuard,
}

async fn world(user: &str) -> World {
    let sandbox = Sandbox::default();
    sandbox.load_demo().expect("demo seed");
    sandbox.set_user(user);
    let (served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, user).await;
    let simulation = tokio_util::sync::CancellationToken::new();
    let fast = capdeck::sandbox::simulate::WorkloadSimulation { replicas_per_second: 20.0, ..Default::default() };
    sandbox.simulate_workloads(fast, simulation.clone());
    World { sandbox, served: Some(served), _dir: dir, kubeconfig, _simulation: simulation.drop_guard() }
}

fn batch_document() -> Value {
    capdeck::demo::sample::sample_batches()
        .into_iter()
        .find(|batch| batch.pointer("/metadata/name").and_then(Value::as_str) == Some("hr-portal-c9dsg"))
        .expect("sample batch")
}

fn batch_writes(sandbox: &Sandbox) -> Vec<String> {
    sandbox
        .writes()
        .into_iter()
        .filter(|w| w.info.resource == "rotationbatches")
        .map(|w| format!("{} {} by {:?}", w.method, w.path, w.field_manager))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_a_batch_from_the_console_records_who_and_why() {
    let world = world("alice").await;
    let mut console = Console::start(&world.kubeconfig, false, EngineMode::Lead).await;
    console
        .until("the engine leading and alice known", |s| s.contains("engine Leader") && s.contains("user alice"))
        .await;
    console.shows("hr-portal").await;

    // The start-up re-check finds hr-portal's router out of date and opens a batch; hr-portal's
    // policy is manual. (No extra rotation here: it could supersede the batch while the key is
    // pressed, and the dialog would act on the superseded one.)
    console.typed(":batches\n/hr-portal\n");
    console.shows("AwaitingApproval").await;
    console.key(KeyCode::Char('a'));
    console.shows("Approve batch").await;
    console.typed("CHG-42 approved by the CAB");
    console.key(KeyCode::Enter);
    let screen = console.shows("approved by alice").await;
    assert!(
        screen.contains("the engine rolls it out now") || screen.contains("RollingOut") || screen.contains("Succeeded"),
        "{screen}"
    );

    let batch = world
        .sandbox
        .list("capdeck.dev", "rotationbatches")
        .into_iter()
        .find(|b| b.pointer("/spec/application").and_then(Value::as_str) == Some("hr-portal"))
        .expect("batch");
    assert_eq!(batch.pointer("/spec/approval/approvedBy").and_then(Value::as_str), Some("alice"));
    assert_eq!(batch.pointer("/spec/approval/reason").and_then(Value::as_str), Some("CHG-42 approved by the CAB"));
    // The key was enabled because SelfSubjectAccessReview said yes.
    assert!(
        world.sandbox.requests().iter().any(|r| r.info.resource == "selfsubjectaccessreviews"),
        "asked the API server before enabling writes"
    );
    console
        .until("the rollout to finish", |s| s.lines().any(|l| l.contains("hr-portal") && l.contains("Succeeded")))
        .await;
    console.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readonly_console_never_writes_and_says_why() {
    let world = world("alice").await;
    world.sandbox.load([batch_document()]).expect("batch");
    let mut console = Console::start(&world.kubeconfig, true, EngineMode::Auto).await;
    console.shows("engine Read-only").await;
    world.sandbox.rotate_secret("cap-shop", "bookshop-uaa-bind").expect("rotated");
    console.typed(":batches\n/hr-portal\n");
    console.shows("AwaitingApproval").await;
    console.key(KeyCode::Char('a'));
    console.shows("approve: read-only session").await;
    console.key(KeyCode::Char('F'));
    console.shows("force: read-only session").await;
    console.quit().await;
    let writes: Vec<String> = world.sandbox.writes().iter().map(|w| format!("{} {}", w.method, w.path)).collect();
    let cluster_writes: Vec<&String> = writes
        .iter()
        .filter(|w| !w.contains("selfsubjectreviews") && !w.contains("selfsubjectaccessreviews"))
        .collect();
    assert!(cluster_writes.is_empty(), "read-only wrote: {cluster_writes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_rbac_the_console_names_the_missing_permission() {
    let world = world("dave").await;
    world.sandbox.deny("patch:rotationbatches".parse::<DenyRule>().expect("rule"));
    world.sandbox.load([batch_document()]).expect("batch");
    let mut console = Console::start(&world.kubeconfig, false, EngineMode::Observe).await;
    console.shows("user dave").await;
    console.typed(":batches\n/hr-portal\n");
    console.shows("AwaitingApproval").await;
    // The key asks the API server (SelfSubjectAccessReview); its answer names what is missing.
    console.key(KeyCode::Char('a'));
    console.shows("dave may not patch rotationbatches in namespace cap-hr").await;
    console.key(KeyCode::Char('a'));
    let screen = console.shows("approve: dave may not patch rotationbatches in namespace cap-hr").await;
    assert!(!screen.contains("Approve batch"), "{screen}");
    console.quit().await;
    assert!(batch_writes(&world.sandbox).is_empty(), "{:?}", batch_writes(&world.sandbox));
}

/// A kind the user may not list (403) is no outage: the header stays connected and counts it,
/// and the footer says what is forbidden and what that hides — no "unreachable" banner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_kind_is_said_not_shown_as_an_outage() {
    let world = world("dave").await;
    world.sandbox.deny("list:secrets".parse().expect("deny rule"));
    let mut console = Console::start(&world.kubeconfig, false, EngineMode::Observe).await;
    let screen =
        console.until("apps listed", |s| s.contains("hr-portal") && s.contains("connected, 2 forbidden")).await;
    assert!(screen.contains("you may not list binding Secrets, VCAP Secrets here"), "{screen}");
    assert!(!screen.contains("unreachable") && !screen.contains("disconnected"), "{screen}");
    console.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_loss_shows_a_banner_and_the_console_reconnects_by_itself() {
    let mut world = world("alice").await;
    let mut console = Console::start(&world.kubeconfig, false, EngineMode::Observe).await;
    console.until("apps listed", |s| s.contains("hr-portal") && s.contains("● connected")).await;

    let served = world.served.take().expect("served");
    let address = served.address;
    served.stop().await;
    let screen = console.shows("API server unreachable").await;
    assert!(screen.contains("disconnected"), "{screen}");
    assert!(screen.contains("hr-portal"), "the last known state stays on screen:\n{screen}");
    // The cause in the CLI's words (a refused or a closed connection, as the server went), first,
    // whatever the width; never kube's own text.
    let banner = screen.lines().find(|line| line.contains("API server unreachable")).unwrap_or_default();
    let cause = banner.contains("connection refused") || banner.contains("connection closed");
    assert!(cause && !screen.contains("ServiceError") && !screen.contains("client error"), "{screen}");

    world.served = Some(world.sandbox.serve(address).await.expect("serve again on the same port"));
    let screen =
        console.until("the connection back", |s| s.contains("● connected") && !s.contains("unreachable")).await;
    assert!(screen.contains("hr-portal"), "{screen}");
    console.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colon_ns_narrows_the_scope_and_colon_theme_switches_colours() {
    let world = world("alice").await;
    let mut console = Console::start(&world.kubeconfig, false, EngineMode::Observe).await;
    console.until("all apps", |s| s.contains("Applications [4/4]")).await;
    console.typed(":ns cap-hr\n");
    let screen =
        console.until("the cap-hr scope", |s| s.contains("namespace cap-hr") && s.contains("Applications [2/2]")).await;
    assert!(!screen.contains("bookshop"), "{screen}");
    console.typed(":ns all\n");
    console.until("all namespaces again", |s| s.contains("all namespaces") && s.contains("Applications [4/4]")).await;
    // A namespace that does not exist is refused, not shown as an empty cluster.
    console.typed(":ns nope\n");
    let screen = console.shows("namespace nope does not exist").await;
    assert!(screen.contains("all namespaces"), "the scope stays:\n{screen}");
    // `:ns ` lists what the API server has (the picker), and Tab walks it.
    console.typed(":ns ");
    console.until("the namespace picker", |s| s.contains(" cap-hr ") && s.contains(" default ")).await;
    console.key(crossterm::event::KeyCode::Esc);
    console.typed(":theme light\n");
    console.shows("theme light").await;
    console.typed(":theme neon\n");
    console.shows("no theme \"neon\"").await;
    console.quit().await;
}

/// At rest the console's API load is watches only, no periodic LIST. Ten minutes of
/// (paused) time with the console open on the demo cluster; every request is counted.
#[tokio::test(start_paused = true)]
async fn at_rest_the_console_only_watches() {
    let sandbox = Sandbox::default();
    sandbox.load_demo().expect("demo seed");
    let mut console = Console::in_process(&sandbox);
    console.shows("bookshop").await;
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    sandbox.clear_requests();
    tokio::time::sleep(std::time::Duration::from_secs(600)).await;
    let requests = sandbox.requests();
    let lists: Vec<_> = requests.iter().filter(|r| r.info.verb == "list").map(|r| r.path.clone()).collect();
    assert!(lists.is_empty(), "no LIST at rest: {lists:#?}");
    let others: Vec<_> =
        requests.iter().filter(|r| r.info.verb != "watch").map(|r| format!("{} {}", r.method, r.path)).collect();
    assert!(others.is_empty(), "only watches at rest: {others:#?}");
    // Watches end after their timeoutSeconds and resume from their resourceVersion.
    println!("requests in 10 minutes at rest: {} (all watches)", requests.len());
    console.quit().await;
}

/// A console over a cluster where no engine leads says so in its header — rotations are not
/// handled — and names the leader once one takes the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_says_who_leads_or_that_nobody_does() {
    let world = world("alice").await;
    let mut console = Console::start(&world.kubeconfig, false, EngineMode::Observe).await;
    console.shows("no leader: rotations are not being handled").await;
    let mut config = common::fixtures::test_config("daemon-7d9f");
    config.lease.namespace = "capdeck-system".into();
    let daemon = common::fixtures::RunningEngine::start(world.sandbox.client(), config).await;
    daemon.wait_for_role(capdeck::engine::Role::Leader).await;
    console.shows("leader: daemon-7d9f").await;
    // The console's own engine may still be starting (its stores syncing) when the leader shows
    // up: it observes once started, and never leads beside the daemon.
    let screen = console.shows("engine Observer").await;
    assert!(screen.contains("leader: daemon-7d9f") && !screen.contains("engine Leader"), "{screen}");
    console.quit().await;
    daemon.stop().await;
}

/// When the attached engine leads and its writes fail (here: RBAC), the header and a message say
/// so — not only the log file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_engine_writes_show_in_the_header_and_a_message() {
    let world = world("alice").await;
    world.sandbox.deny("create:rotationbatches".parse::<DenyRule>().expect("rule"));
    let mut console = Console::start(&world.kubeconfig, false, EngineMode::Lead).await;
    // The start-up re-check finds hr-portal out of date and tries to open a batch: refused.
    let screen = console.shows("writes failing").await;
    assert!(screen.contains("engine Leader"), "{screen}");
    console.shows("the engine's write failed").await;
    console.quit().await;
}

/// From a rollout row to its Pods and a Pod's log through the runtime: the log is read after
/// the `get pods/log` check, and a credential the Pod logged (a value of its namespace's
/// binding Secrets) shows as `•••`, never as itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_log_is_read_with_its_credentials_masked() {
    let sandbox = Sandbox::default();
    sandbox.load_demo().expect("demo seed");
    sandbox.set_user("alice");
    let (served, _dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "alice").await;
    let simulation = tokio_util::sync::CancellationToken::new();
    let pods = capdeck::sandbox::simulate::WorkloadSimulation { pods: true, ..Default::default() };
    sandbox.simulate_workloads(pods, simulation.clone());
    let mut console = Console::start(&kubeconfig, false, EngineMode::Lead).await;
    // The start-up re-check opens hr-portal's batch (manual policy): its rollout rows wait.
    console.typed(":rollouts\n/hr-portal-2-3-0-router\n");
    console.shows("Queued").await;

    // A credential of the namespace, logged by the router's Pod.
    let secrets: Vec<capdeck::api::StoredSecret> = sandbox
        .binding_secrets()
        .into_iter()
        .filter(|secret| secret.namespace == "cap-hr")
        .filter_map(|secret| sandbox.get("", "secrets", &secret.namespace, &secret.name))
        .map(|secret| capdeck::api::StoredSecret::new(serde_json::from_value(secret).expect("secret")))
        .collect();
    let values = capdeck::readmodel::pods::credential_values(&secrets);
    let leaked = values.first().expect("a credential in cap-hr").clone();
    let router_pod = || {
        sandbox.list("", "pods").into_iter().find(|pod| {
            pod.pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.starts_with("hr-portal-2-3-0-router-"))
        })
    };
    common::eventually("the router's Pod", std::time::Duration::from_secs(10), || async { router_pod().is_some() })
        .await;
    let pod = router_pod().expect("seen above");
    let name = pod.pointer("/metadata/name").and_then(Value::as_str).expect("name").to_string();
    let client = sandbox.client();
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "cap-hr");
    // And an old credential, only in a VCAP Secret (whose payload the stores keep as a digest).
    let old = "old-clientsecret-4f9a2c7e1b";
    let vcap = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "hr-portal-old-vcap", "namespace": "cap-hr", "labels": {"sme.sap.com/secret-owner-hash": "x"}},
        "stringData": {"VCAP_SERVICES": format!(r#"{{"xsuaa":[{{"credentials":{{"clientsecret":"{old}"}}}}]}}"#)}});
    let secrets_api: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(sandbox.client(), "cap-hr");
    secrets_api.create(&Default::default(), &serde_json::from_value(vcap).expect("secret")).await.expect("vcap");
    let log = format!("starting\nVCAP_SERVICES xsuaa clientsecret={leaked}\nold one {old}\nlistening");
    let patch = serde_json::json!({"metadata": {"annotations": {"sandbox.capdeck.dev/log": log}}});
    api.patch(&name, &Default::default(), &kube::api::Patch::Merge(&patch)).await.expect("log");

    console.key(KeyCode::Enter);
    console.shows("Pods of Deployment cap-hr/hr-portal-2-3-0-router").await;
    console.shows(&format!("  {name}")).await;
    // The Pods under the ReplicaSet: select the one that logged.
    let position = if name.ends_with("-0") { 1 } else { 2 };
    for _ in 0..position {
        console.key(KeyCode::Char('j'));
    }
    console.key(KeyCode::Char('l'));
    let screen = console.shows("clientsecret=•••").await;
    assert!(!screen.contains(&leaked), "{screen}");
    let screen = console.shows("old one •••").await;
    assert!(!screen.contains(old), "the old credential of the VCAP Secret is masked: {screen}");
    assert!(screen.contains("listening"), "{screen}");
    assert!(
        sandbox.requests().iter().any(|r| r.info.resource == "selfsubjectaccessreviews"),
        "asked whether alice may get pods/log first"
    );
    console.quit().await;
    simulation.cancel();
    served.stop().await;
}

/// The masking's read of a namespace's VCAP Secrets: a user who may not list Secrets gets none
/// (their stores hold none either); any other failure refuses, so a log is never shown with old
/// credentials unmasked because a read failed.
#[tokio::test]
async fn a_log_is_not_shown_when_the_vcap_secrets_to_mask_it_with_cannot_be_read() {
    let sandbox = Sandbox::default();
    sandbox.load_demo().expect("demo seed");
    let client = sandbox.client();
    let found = capdeck::readmodel::pods::vcap_secrets(&client, "cap-hr").await.expect("read");
    assert!(!found.is_empty(), "the demo's VCAP Secrets in cap-hr");
    sandbox.fail_next(1, capdeck::sandbox::RequestMatcher::on("list", "secrets"), 500);
    let error = capdeck::readmodel::pods::vcap_secrets(&client, "cap-hr").await.expect_err("a 500");
    assert!(error.contains("the log is not shown") && error.contains("cap-hr"), "{error}");
    sandbox.deny("list:secrets".parse().expect("rule"));
    assert_eq!(capdeck::readmodel::pods::vcap_secrets(&client, "cap-hr").await, Ok(Vec::new()));
}

/// A user who may not read capdeck's Leases is told so — in the console's header and by
/// `capdeck doctor` — never "nobody leads"; and an engine that cannot make sure that no other
/// engine leads does not lead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_lease_reads_nobody_claims_that_nobody_leads() {
    let world = world("alice").await;
    world.sandbox.deny("list:leases".parse::<DenyRule>().expect("rule"));
    world.sandbox.deny("get:leases".parse::<DenyRule>().expect("rule"));
    let engine =
        common::fixtures::RunningEngine::start(world.sandbox.client(), common::fixtures::test_config("would-lead"))
            .await;
    engine.wait_for_role(capdeck::engine::Role::Observer).await;
    let mut console = Console::start(&world.kubeconfig, false, EngineMode::Observe).await;
    let screen = console.shows("leader unknown").await;
    assert!(!screen.contains("no leader"), "{screen}");
    console.quit().await;
    let output = assert_cmd::Command::cargo_bin("capdeck")
        .expect("bin")
        .env("KUBECONFIG", &world.kubeconfig)
        .args(["doctor"])
        .output()
        .expect("doctor runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let leader = stdout.lines().find(|line| line.starts_with("leader")).unwrap_or_default();
    assert!(
        leader.contains("warn") && leader.contains("cannot tell who leads") && leader.contains("may not list leases"),
        "{stdout}"
    );
    assert_eq!(engine.role(), capdeck::engine::Role::Observer, "it never led");
    engine.stop().await;
}

/// A Freeze in the cluster shows in the header while it holds what is in view; `Z` on an
/// application freezes it through the reason dialog as the console's user (the same write as
/// `capdeck freeze --app`), and `U` lifts that freeze again, each recorded with who and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freeze_shows_in_the_header_and_z_and_u_freeze_and_lift_an_application() {
    let world = world("alice").await;
    let now = k8s_openapi::jiff::Timestamp::now();
    let until = k8s_openapi::jiff::Timestamp::from_second(now.as_second() + 86_400).expect("time");
    world
        .sandbox
        .load([serde_json::json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
            "metadata": {"name": "namespace", "namespace": "cap-shop"},
            "spec": {"scope": "Namespace", "until": until.to_string(),
                     "frozen": {"by": "bob", "at": now.to_string(), "reason": "release weekend"}}})])
        .expect("freeze");
    let mut console = Console::start(&world.kubeconfig, false, EngineMode::Observe).await;
    console.shows("user alice").await;
    let screen = console.shows("namespace cap-shop frozen until").await;
    assert!(screen.contains(&format!("frozen until {until} by bob: release weekend")), "{screen}");

    console.typed(":apps\n/travel\n");
    console.key(KeyCode::Char('Z'));
    console.shows("Freeze application").await;
    console.typed("CAB freeze");
    console.key(KeyCode::Enter);
    console.shows("froze CAPApplication cap-shop/travel as alice").await;
    let frozen = world.sandbox.get("capdeck.dev", "freezes", "cap-shop", "app-travel").expect("the app's freeze");
    assert_eq!(frozen["spec"]["frozen"]["by"], "alice");
    assert_eq!(frozen["spec"]["frozen"]["reason"], "CAB freeze");
    assert_eq!(frozen["spec"]["scope"], "Application");

    // Lifted again with `U`, through the same dialog (a pause first: keys typed in the burst
    // that closed the dialog are swallowed, as a person's would be).
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    // `U` is for an application with a freeze of its own: once the console's stores show it.
    console.shows("(+1 more)").await;
    console.key(KeyCode::Char('U'));
    console.shows("Unfreeze application").await;
    console.typed("CAB done");
    console.key(KeyCode::Enter);
    console.shows("lifted the freeze of CAPApplication cap-shop/travel").await;
    console.quit().await;
    let lifted = world.sandbox.get("capdeck.dev", "freezes", "cap-shop", "app-travel").expect("kept as a record");
    assert_eq!(lifted["spec"]["lifted"]["by"], "alice");
    assert_eq!(lifted["spec"]["lifted"]["reason"], "CAB done");
}
