//! The capdeck binary as users run it — the daemon, the CLI — and kubectl, on a world.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capdeck::api::{BatchPhase, RotationBatch};
use capdeck::engine::Role;
use kube::ResourceExt as _;
use serde_json::{Value, json};

use crate::common::fixtures::AppOptions;
use crate::common::story_world::StoryWorld as _;
use crate::setup::{Engine, EngineExt as _, capdeck, engine_config, load_current, text};
use crate::world::{Backend, Workloads, World, eventually};

const LONG: Duration = Duration::from_secs(60);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// A child process killed when the story ends, however it ends.
pub struct Daemon {
    child: Option<Child>,
    log: std::path::PathBuf,
    pub health: String,
}

impl Daemon {
    pub fn start(kubeconfig: &std::path::Path, ns: &str, dir: &std::path::Path, extra: &[&str]) -> Daemon {
        Self::start_leasing(kubeconfig, ns, ns, dir, extra)
    }

    /// A daemon writing in `ns` with its Lease in `lease_ns` (as installed: its own namespace).
    pub fn start_leasing(
        kubeconfig: &std::path::Path,
        ns: &str,
        lease_ns: &str,
        dir: &std::path::Path,
        extra: &[&str],
    ) -> Daemon {
        let port = free_port();
        let mut args: Vec<String> = vec![
            "--daemon".into(),
            "--health-addr".into(),
            format!("127.0.0.1:{port}"),
            "-n".into(),
            ns.into(),
            "--lease-namespace".into(),
            lease_ns.into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        Self::spawn(kubeconfig, &args, &[("RUST_LOG", "info")], port, dir)
    }

    /// The binary with exactly `args` (they must name `--health-addr 127.0.0.1:PORT` as `port`)
    /// and `env`: as a chart's Deployment would run it.
    pub fn spawn(
        kubeconfig: &std::path::Path,
        args: &[String],
        env: &[(&str, &str)],
        port: u16,
        dir: &std::path::Path,
    ) -> Daemon {
        let log = dir.join(format!("daemon-{port}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_capdeck"))
            .args(args)
            .envs(env.iter().copied())
            .env("KUBECONFIG", kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::from(std::fs::File::create(&log).expect("log file")))
            .stderr(Stdio::null())
            .spawn()
            .expect("daemon starts");
        Daemon { child: Some(child), log, health: format!("http://127.0.0.1:{port}") }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM and the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        crate::common::terminate(&mut child, Duration::from_secs(20))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub async fn http_get(url: &str) -> Option<(u16, String)> {
    let output = tokio::process::Command::new("curl")
        .args(["-s", "-m", "5", "-o", "-", "-w", "\n%{http_code}", url])
        .output()
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n')?;
    Some((code.trim().parse().ok()?, body.to_string()))
}

fn batches_json(kubeconfig: &std::path::Path, ns: &str) -> Vec<Value> {
    let output = capdeck(kubeconfig, &["batches", "-n", ns, "-o", "json"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    crate::common::list_items(stdout.as_bytes())
}

/// The README's flow with the daemon as a process: ready, a rotation becomes a batch that
/// `capdeck force --approve` rolls, metrics count it, logs are JSON, SIGTERM exits 0.
pub async fn daemon_readme_flow_readyz_metrics_json_logs_sigterm(backend: Backend) {
    let world = World::new(backend, "daemon-readme").await;
    load_current(&world, &AppOptions::default()).await;
    let workloads = world.workloads();
    let dir = tempfile::tempdir().expect("dir");
    let mut daemon = Daemon::start(&world.admin_kubeconfig, &world.ns, dir.path(), &["--rollout-delay", "1h"]);
    eventually("daemon ready", LONG, || async {
        match http_get(&format!("{}/readyz", daemon.health)).await {
            Some((200, body)) if body.contains("leader") => Ok(()),
            other => Err(format!("{other:?}; log: {}", daemon.log())),
        }
    })
    .await;
    assert_eq!(http_get(&format!("{}/healthz", daemon.health)).await.map(|(c, _)| c), Some(200));

    world.rotate_secret("bookshop-uaa").await;
    let batch = world.wait_phase("bookshop", BatchPhase::Collecting, LONG).await;
    let listed = batches_json(&world.admin_kubeconfig, &world.ns);
    assert!(listed.iter().any(|b| b["name"] == json!(batch.name_any())), "{listed:?}");
    let target = format!("{}/{}", world.ns, batch.name_any());
    let output = capdeck(&world.admin_kubeconfig, &["force", &target, "--approve", "--reason", "CHG-1"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    eventually("metrics count the rollout", LONG, || async {
        let metrics = http_get(&format!("{}/metrics", daemon.health)).await.map(|(_, b)| b).unwrap_or_default();
        let want = ["capdeck_leader 1", "capdeck_deployments_restarted_total 2"];
        let missing: Vec<&&str> = want.iter().filter(|w| !metrics.contains(**w)).collect();
        if missing.is_empty() { Ok(()) } else { Err(format!("missing {missing:?}")) }
    })
    .await;
    let status = daemon.terminate();
    assert!(status.success(), "exit {status:?}; log: {}", daemon.log());
    let log = daemon.log();
    assert!(!log.trim().is_empty());
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
    }
    // The lease was released: a new engine leads at once.
    let next = Engine::on(&world, {
        let mut config = engine_config(&world, "after-daemon");
        config.lease.name = "capdeck-engine".into();
        config
    })
    .await;
    next.wait_for_role_within(Role::Leader, Duration::from_secs(15)).await;
    next.stop().await;
    workloads.stop().await;
}

/// A manual application, the status workloads, a leading engine, and a batch awaiting approval.
pub async fn awaiting_batch(world: &World) -> (Engine, Workloads, String) {
    load_current(world, &AppOptions { manual: true, ..AppOptions::default() }).await;
    let workloads = world.workloads();
    let engine = Engine::on(world, engine_config(world, "engine-a")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    world.rotate_secret("bookshop-uaa").await;
    let batch = world.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;
    (engine, workloads, batch.name_any())
}

/// `capdeck approve` records the user the API server's SelfSubjectReview names.
pub async fn cli_approve_records_the_identity_the_server_returns(backend: Backend) {
    let world = World::new(backend, "cli-identity").await;
    let (engine, workloads, name) = awaiting_batch(&world).await;
    world.grant("alice", "capdeck.dev", &["rotationbatches"], &["get", "list", "watch", "patch"], &[]).await;
    let alice = world.kubeconfig_for("alice");
    let output = capdeck(&alice, &["approve", &format!("{}/{name}", world.ns), "--reason", "CHG-7"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("alice"), "{stdout}");
    let batch = world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    let approval = batch.spec.approval.expect("approval");
    assert_eq!(approval.approved_by.as_deref(), Some("alice"));
    assert_eq!(approval.reason.as_deref(), Some("CHG-7"));
    engine.stop().await;
    workloads.stop().await;
}

/// A user whose Role lacks `patch rotationbatches` is refused with a text naming user, verb and
/// resource, and the batch is unchanged.
pub async fn cli_refuses_a_user_without_patch_permission(backend: Backend) {
    let world = World::new(backend, "cli-refusal").await;
    let (engine, workloads, name) = awaiting_batch(&world).await;
    world
        .grant("dave", "capdeck.dev", &["rotationbatches"], &["get", "list", "watch"], &["patch:rotationbatches"])
        .await;
    let dave = world.kubeconfig_for("dave");
    // The dry run says so first: it does not pass where the command is refused.
    let target = format!("{}/{name}", world.ns);
    let dry = capdeck(&dave, &["approve", &target, "--reason", "x", "--dry-run"]);
    let (stdout, stderr) = text(&dry);
    assert_eq!(dry.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains(&format!("you may not patch rotationbatches.capdeck.dev in {}", world.ns)), "{stderr}");
    let output = capdeck(&dave, &["approve", &target, "--reason", "x"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    for word in ["forbidden", "dave", "patch", "rotationbatches"] {
        assert!(stderr.contains(word), "refusal lacks {word:?}: {stderr}");
    }
    let batch = world.batches("bookshop").await.pop().expect("batch");
    assert!(batch.spec.approval.and_then(|a| a.approved_by).is_none());
    engine.stop().await;
    workloads.stop().await;
}

fn kubectl_path() -> std::path::PathBuf {
    crate::world::assets().expect("kubectl").kubectl
}

/// `capdeck crds` passes real CRD validation (the harness installed them), and the built kubectl
/// shows the printer columns and resolves the short names.
pub async fn crds_are_accepted_and_kubectl_shows_their_columns(backend: Backend) {
    let world = World::new(backend, "crds-kubectl").await;
    let (engine, workloads, name) = awaiting_batch(&world).await;
    let Ok(assets) = crate::world::assets() else {
        // The sandbox variant needs the built kubectl too; without it there is nothing to check.
        assert_eq!(backend, Backend::Sandbox);
        eprintln!("no built kubectl: the sandbox variant checks nothing");
        engine.stop().await;
        workloads.stop().await;
        return;
    };
    let _ = kubectl_path();
    let kubectl = |args: &[&str]| {
        let output = Command::new(&assets.kubectl)
            .args(args)
            .env("KUBECONFIG", &world.admin_kubeconfig)
            .output()
            .expect("kubectl runs");
        let (stdout, stderr) = text(&output);
        assert!(output.status.success(), "kubectl {args:?}: {stderr}");
        stdout
    };
    let table = kubectl(&["get", "rb", "-n", &world.ns]);
    let header = table.lines().next().unwrap_or_default().to_string();
    for column in ["NAME", "APPLICATION", "STATE"] {
        assert!(header.contains(column), "kubectl get rb header lacks {column}: {table}");
    }
    // STATE is `status.state`, in the words `capdeck batches` uses; PHASE is under -o wide.
    let row = table.lines().find(|line| line.contains(&name)).unwrap_or_default();
    assert!(row.contains("AwaitingApproval"), "{table}");
    let wide = kubectl(&["get", "rb", "-n", &world.ns, "-o", "wide"]);
    assert!(wide.lines().next().unwrap_or_default().contains("PHASE"), "{wide}");
    assert!(!table.contains("<invalid>"), "a column renders <invalid>: {table}");
    let apps = kubectl(&["get", "ca", "-n", &world.ns]);
    assert!(apps.contains("bookshop"), "{apps}");
    let versions = kubectl(&["get", "cav", "-n", &world.ns, "-o", "name"]);
    assert!(versions.contains("bookshop-v1"), "{versions}");
    engine.stop().await;
    workloads.stop().await;
}

/// `capdeck manifests` applied, and the daemon run with the token of that ServiceAccount
/// completes a rotation — the ClusterRole grants what the engine needs, on a server that
/// enforces RBAC.
pub async fn daemon_as_the_manifests_service_account_completes_a_rotation(backend: Backend) {
    let world = World::new(backend, "daemon-as-sa").await;
    load_current(&world, &AppOptions::default()).await;
    let workloads = world.workloads();
    let system = format!("{}-system", world.ns);
    let kubeconfig = install_as_service_account(&world, &system);
    let dir = tempfile::tempdir().expect("dir");
    // Its own namespace only: the control plane is shared, and with -A this daemon opened
    // batches in the other stories' namespaces.
    let mut daemon = Daemon::start_leasing(&kubeconfig, &world.ns, &system, dir.path(), &["--rollout-delay", "1h"]);
    leads_then_rolls_a_forced_rotation(&world, &daemon, "go").await;
    let log = daemon.log();
    assert!(!log.contains("forbidden"), "the ServiceAccount was refused something: {log}");
    assert!(daemon.terminate().success());
    workloads.stop().await;
}

/// The daemon leads (`/readyz`); bookshop-uaa rotates; the admin forces and approves its batch
/// (`reason`), and it succeeds. The batch, as it ended.
pub async fn leads_then_rolls_a_forced_rotation(world: &World, daemon: &Daemon, reason: &str) -> RotationBatch {
    eventually("the daemon leads", LONG, || async {
        match http_get(&format!("{}/readyz", daemon.health)).await {
            Some((200, body)) if body.contains("leader") => Ok(()),
            other => Err(format!("{other:?}; log: {}", daemon.log())),
        }
    })
    .await;
    world.rotate_secret("bookshop-uaa").await;
    let batch = world.wait_phase("bookshop", BatchPhase::Collecting, LONG).await;
    let output = capdeck(
        &world.admin_kubeconfig,
        &["force", &format!("{}/{}", world.ns, batch.name_any()), "--approve", "--reason", reason],
    );
    assert!(output.status.success(), "{:?}", text(&output));
    world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await
}

/// `capdeck manifests -n SYSTEM` applied with kubectl, and a kubeconfig with the token of its
/// ServiceAccount (kube-apiserver only: the sandbox has no RBAC objects or tokens).
fn install_as_service_account(world: &World, system: &str) -> std::path::PathBuf {
    let output = capdeck(&world.admin_kubeconfig, &["manifests", "-n", system]);
    let (manifests, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    let plane = world.plane();
    plane
        .kubectl_apply(&format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {system}\n---\n{manifests}"))
        .expect("apply manifests");
    let output = plane
        .kubectl()
        .args(["create", "token", "capdeck", "-n", system, "--duration=1h"])
        .output()
        .expect("kubectl create token");
    let (token, stderr) = text(&output);
    assert!(output.status.success(), "create token: {stderr}");
    plane.write_token_kubeconfig(&format!("sa-{}", world.ns), token.trim()).expect("kubeconfig")
}

/// The installed daemon (`capdeck manifests`: its Lease in its own namespace) is found by a
/// laptop's `doctor`, `fleet`, `credentials` and console with default flags (their own Lease
/// place is the context's namespace), and a console told to lead beside it observes and names
/// it: one engine leads, whatever Lease place each was given.
pub async fn an_installed_daemon_is_found_and_a_console_never_leads_beside_it(backend: Backend) {
    use crate::common::console::Console;
    use capdeck::engine::config::EngineMode;
    use capdeck::leadership::{EngineScope, engine_leases};
    // A control plane of its own: `capdeck manifests` binds the cluster-wide ClusterRoleBinding
    // `capdeck` to its namespace's ServiceAccount, which would take it from the other story that
    // applies the manifests on the shared plane.
    let world = World::dedicated(backend, "one-leader", crate::control_plane::Profile::Standard).await;
    load_current(&world, &AppOptions::default()).await;
    let ns = world.ns.clone();
    let system = format!("{ns}-system");
    let kubeconfig = match backend {
        Backend::KubeApiserver => install_as_service_account(&world, &system),
        Backend::Sandbox => {
            world
                .apply_objects(vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": system}})])
                .await;
            world.admin_kubeconfig.clone()
        }
    };
    let dir = tempfile::tempdir().expect("dir");
    let mut daemon = Daemon::start_leasing(&kubeconfig, &ns, &system, dir.path(), &["--rollout-delay", "30s"]);
    eventually("the installed daemon leads", LONG, || async {
        match http_get(&format!("{}/readyz", daemon.health)).await {
            Some((200, body)) if body.contains("leader") => Ok(()),
            other => Err(format!("{other:?}; log: {}", daemon.log())),
        }
    })
    .await;
    let lease = format!("{system}/capdeck-engine");

    let output = capdeck(&world.admin_kubeconfig, &["doctor", "-n", &ns]);
    let (stdout, stderr) = text(&output);
    let leader = stdout.lines().find(|line| line.starts_with("leader")).unwrap_or_default();
    assert!(
        leader.contains(" ok ") && leader.contains(&format!("leads namespace {ns} (lease {lease}")),
        "doctor names the daemon and where its Lease is:\n{stdout}{stderr}"
    );
    assert!(leader.contains("window 30s"), "and the settings it decides with: {leader}");

    let output = capdeck(&world.admin_kubeconfig, &["fleet", "-n", &ns, "-o", "json"]);
    let (stdout, stderr) = text(&output);
    let fleet: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("fleet -o json: {e}: {stdout}{stderr}"));
    let rows = fleet["fleet"].as_array().cloned().unwrap_or_default();
    assert!(
        !rows.is_empty() && rows.iter().all(|row| row["leader"].as_str().is_some_and(|l| l.contains(&lease))),
        "{fleet}"
    );

    let output = capdeck(&world.admin_kubeconfig, &["credentials", "-n", &ns]);
    let (_, stderr) = text(&output);
    assert!(stderr.contains("the leading engine's settings (window 30s"), "{stderr}");

    // A console told to lead beside it observes and says who leads.
    let mut console = Console::start_in(&world.admin_kubeconfig, &ns, false, EngineMode::Lead).await;
    // The role and who leads arrive apart (the leader with the next Lease read): wait for both.
    // On the shared control plane another story's Go CAP Operator may put its warning first and
    // push the leader past the header's end; otherwise the header names the daemon's Lease, or,
    // short of room, `leader <identity>…` (the segment shortens, it is not dropped).
    let in_system = format!("in {system},");
    console
        .until("the console observing and naming the leader", |screen| {
            screen.contains("engine Observer")
                && (screen.contains(&in_system) || screen.contains("│ leader ") || screen.contains("Go CAP Operator"))
        })
        .await;
    // Over several renewals exactly one Lease leads this namespace: the daemon's.
    let here = EngineScope::Namespace(ns.clone());
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let leading: Vec<String> = engine_leases(&world.client)
            .await
            .expect("list leases")
            .into_iter()
            .filter(|found| found.leads() && found.scope.overlaps(&here))
            .map(|found| found.key())
            .collect();
        assert_eq!(leading, vec![lease.clone()]);
    }
    console.quit().await;
    assert!(daemon.terminate().success());
}

/// `capdeck doctor` on a healthy namespace (exit 0, the leader named), with a Go CAP Operator
/// running beside opted-in applications (a warning naming both), and on a broken setup (no lease
/// namespace: exit 1 with the fix; a user without `patch rotationbatches`: one line for it).
pub async fn doctor_on_a_healthy_and_a_broken_setup(backend: Backend) {
    let world = World::new(backend, "doctor").await;
    load_current(&world, &AppOptions::default()).await;
    let engine = Engine::on(&world, engine_config(&world, "daemon-doctor")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    let ns = world.ns.clone();
    let doctor = |kubeconfig: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["doctor", "-n", ns.as_str(), "--lease-namespace", ns.as_str()];
        args.extend_from_slice(extra);
        let output = capdeck(kubeconfig, &args);
        let (stdout, stderr) = text(&output);
        (output.status.code(), format!("{stdout}{stderr}"))
    };
    let (code, report) = doctor(&world.admin_kubeconfig, &[]);
    assert_eq!(code, Some(0), "{report}");
    for needle in
        ["rotationbatches.capdeck.dev installed", "daemon-doctor leads", "binding Secret(s)", "Nothing blocks"]
    {
        assert!(report.contains(needle), "no {needle:?} in:\n{report}");
    }
    // Each count says the scope it was read in (another namespace's notifications are not "none").
    for check in ["notifications", "binding secrets"] {
        let line = report.lines().find(|line| line.starts_with(check)).unwrap_or_default();
        assert!(line.contains(&format!("in namespace {ns}")), "{check} names its scope: {line}");
    }
    // JSON for scripts: one object.
    let (_, json_text) = doctor(&world.admin_kubeconfig, &["-o", "json"]);
    let parsed: Value = serde_json::from_str(&json_text).expect("doctor -o json");
    assert_eq!(parsed["ok"], json!(true), "{parsed}");

    // The Go CAP Operator renewing its lease while the application sets the upstream flag.
    let now = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    ))
    .expect("time");
    world
        .apply_objects(vec![json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "capoperator-lease-lock", "namespace": world.ns},
            "spec": {"holderIdentity": "cap-controller-1", "leaseDurationSeconds": 3600, "renewTime": now}})])
        .await;
    // Both would restart the application's Deployments (measured beside the real Go operator:
    // docs/COMPATIBILITY.md): that blocks.
    let (code, report) = doctor(&world.admin_kubeconfig, &[]);
    assert_eq!(code, Some(1), "{report}");
    let line = report.lines().find(|l| l.starts_with("go operator")).unwrap_or_default();
    assert!(
        line.contains("FAIL") && line.contains("the Go CAP Operator runs") && line.contains("bookshop"),
        "{report}"
    );

    // Broken: the lease namespace does not exist.
    let output = capdeck(&world.admin_kubeconfig, &["doctor", "-n", &ns, "--lease-namespace", "no-such-namespace"]);
    let (stdout, _) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("kubectl create namespace no-such-namespace"), "{stdout}");

    // A user who may read batches but not patch them.
    world
        .grant("mallory", "capdeck.dev", &["rotationbatches"], &["get", "list", "watch"], &["patch:rotationbatches"])
        .await;
    let (_, report) = doctor(&world.kubeconfig_for("mallory"), &[]);
    assert!(report.contains("you may not patch rotationbatches.capdeck.dev"), "{report}");
    engine.stop().await;
}

/// The console runtime over a world: alice approves with a reason (the real SelfSubjectReview
/// names her); a read-only console writes nothing; dave, whose Role lacks `patch
/// rotationbatches`, finds the key disabled with the reason the real SelfSubjectAccessReview gave.
pub async fn console_approves_as_the_user_and_refuses_without_permission(backend: Backend) {
    use crate::common::console::Console;
    use capdeck::engine::config::EngineMode;
    use crossterm::event::KeyCode;

    let world = World::new(backend, "console").await;
    let (engine, workloads, name) = awaiting_batch(&world).await;
    let ns = world.ns.clone();
    let before = world.batches("bookshop").await.pop().expect("batch").metadata.resource_version;

    // dave: may read batches, not patch them.
    world
        .grant("dave", "capdeck.dev", &["rotationbatches"], &["get", "list", "watch"], &["patch:rotationbatches"])
        .await;
    world
        .grant(
            "dave",
            "sme.sap.com",
            &["capapplications", "capapplicationversions", "captenants", "captenantoperations"],
            &["get", "list", "watch"],
            &[],
        )
        .await;
    let mut console = Console::start_in(&world.kubeconfig_for("dave"), &ns, false, EngineMode::Observe).await;
    console.typed(":batches\n");
    console.shows("AwaitingApproval").await;
    console.key(KeyCode::Char('a'));
    console.shows(&format!("dave may not patch rotationbatches in namespace {ns}")).await;
    console.quit().await;

    // A read-only console: the key says why and nothing is written.
    let mut console = Console::start_in(&world.admin_kubeconfig, &ns, true, EngineMode::Observe).await;
    console.typed(":batches\n");
    console.shows("AwaitingApproval").await;
    console.key(KeyCode::Char('a'));
    console.shows("read-only").await;
    console.quit().await;
    let after = world.batches("bookshop").await.pop().expect("batch").metadata.resource_version;
    assert_eq!(before, after, "dave's and the read-only console wrote to the batch");

    // alice approves with a reason.
    world.next_user();
    world.grant("alice", "capdeck.dev", &["rotationbatches"], &["get", "list", "watch", "patch"], &[]).await;
    world
        .grant(
            "alice",
            "sme.sap.com",
            &["capapplications", "capapplicationversions", "captenants", "captenantoperations"],
            &["get", "list", "watch"],
            &[],
        )
        .await;
    let mut console = Console::start_in(&world.kubeconfig_for("alice"), &ns, false, EngineMode::Observe).await;
    console.shows("user alice").await;
    console.typed(":batches\n");
    console.shows("AwaitingApproval").await;
    console.key(KeyCode::Char('a'));
    console.shows("Approve batch").await;
    console.typed("CHG-9 from the console");
    console.key(KeyCode::Enter);
    console.shows("approved by alice").await;
    console.quit().await;
    let batch = world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_eq!(batch.name_any(), name);
    let approval = batch.spec.approval.expect("approval");
    assert_eq!(approval.approved_by.as_deref(), Some("alice"));
    assert_eq!(approval.reason.as_deref(), Some("CHG-9 from the console"));
    engine.stop().await;
    workloads.stop().await;
}

/// `capdeck credentials` on a namespace: first without the ServiceBinding CRD (it says so, the
/// verdict is unknown), then with sap-btp-service-operator's CRD, a binding rotated with a 30m
/// TTL (its old credentials die before a 1h window + 15m rollout: unsafe), one with the default
/// 48h (ok) and a cf-service-operator Secret (no overlap: unsafe).
pub async fn credentials_report_margins_and_verdicts(backend: Backend) {
    let world = World::new(backend, "credentials").await;
    let ns = world.ns.clone();
    let services = json!([
        {"name": "uaa", "class": "xsuaa", "secret": "uaa-bind"},
        {"name": "db", "class": "hana", "secret": "db-bind"},
        {"name": "dest", "class": "destination", "secret": "dest-bind"}]);
    let metadata = crate::world::b64(r#"{"credentialProperties":[{"name":"clientid","format":"text"}]}"#);
    // The binding Secrets are owned by their ServiceBindings. A placeholder uid is the fixtures'
    // (`World::apply_objects` points it at the live binding): kube-controller-manager's garbage
    // collector deletes a Secret whose owner does not exist. cf-service-operator's kind is not
    // served here, so nothing resolves (or collects) that one.
    let owned = |name: &str, group: &str, uid: &str| {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "namespace": ns, "ownerReferences": [
                   {"apiVersion": group, "kind": "ServiceBinding", "name": name, "uid": uid}]},
               "data": {".metadata": metadata, "clientid": crate::world::b64("sb-1")}})
    };
    let binding = |name: &str, extra: Value| {
        let mut binding = json!({"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"secretName": name, "credentialsRotationPolicy": {"enabled": true}},
            "status": {"ready": "True", "conditions": []}});
        if let (Some(target), Some(extra)) = (binding.as_object_mut(), extra.as_object()) {
            for (key, value) in extra {
                target.insert(key.clone(), value.clone());
            }
        }
        // Upstream's schema requires it (the hand-written CRD never did).
        binding["spec"]["serviceInstanceName"] = json!("bookshop-instance");
        binding
    };
    let bindings = vec![
        binding("uaa-bind", json!({})),
        binding(
            "uaa-bind-k3x9q",
            json!({
            "metadata": {"name": "uaa-bind-k3x9q", "namespace": ns, "labels": {
                "services.cloud.sap.com/rotationOf": "uaa-bind", "services.cloud.sap.com/stale": "old-id"}},
            "spec": {"secretName": "uaa-bind-k3x9q",
                     "credentialsRotationPolicy": {"enabled": false, "rotatedBindingTTL": "30m"}}}),
        ),
        binding("db-bind", json!({})),
    ];
    let install_bindings = || async {
        let crd: Value =
            capdeck::manifest::parse_documents(&crate::setup::servicebinding_crd(), false).expect("CRD yaml").remove(0);
        world.apply_objects(vec![crd]).await;
        eventually("ServiceBindings served", LONG, || async { world_has_service_bindings(&world).await }).await;
        world.apply_objects(bindings.clone()).await;
    };
    // On a real server (with a garbage collector) the bindings come first, as the operator makes
    // them; the sandbox shows the verdicts without the CRD first.
    let real = backend == Backend::KubeApiserver;
    if real {
        install_bindings().await;
    }
    world
        .apply_objects(vec![
            json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
                   "metadata": {"name": "bookshop", "namespace": ns},
                   "spec": {"btpAppName": "bookshop", "providerSubaccountId": "p", "btp": {"services": services}}}),
            owned("uaa-bind", "services.cloud.sap.com/v1", "00000000-0000-4000-8000-0000000000b1"),
            owned("db-bind", "services.cloud.sap.com/v1", "00000000-0000-4000-8000-0000000000b2"),
            owned("dest-bind", "cf.cs.sap.com/v1alpha1", "0a4a-uid"),
        ])
        .await;
    let credentials = |args: &[&str]| {
        let mut all = vec!["credentials", "-n", ns.as_str()];
        all.extend(args);
        let output = capdeck(&world.admin_kubeconfig, &all);
        let (stdout, stderr) = text(&output);
        assert!(output.status.success(), "capdeck credentials: {stderr}");
        (stdout, stderr)
    };
    let verdicts = |stdout: &str| -> Vec<(String, String)> {
        let document: Value = serde_json::from_str(stdout).expect("one JSON object");
        document["credentials"]
            .as_array()
            .expect("credentials")
            .iter()
            .map(|c| (c["secret"].as_str().unwrap_or("").to_string(), c["verdict"].as_str().unwrap_or("").to_string()))
            .collect()
    };
    let (stdout, stderr) = credentials(&["-o", "json"]);
    if !world_has_service_bindings(&world).await {
        assert!(stderr.contains("no ServiceBinding information"), "{stderr}");
        let found = verdicts(&stdout);
        assert!(found.contains(&("uaa-bind".into(), "unknown".into())), "{found:?}");
        assert!(found.contains(&("dest-bind".into(), "unsafe".into())), "cf needs no CRD to be judged: {found:?}");
    }
    if !real {
        install_bindings().await;
    }
    let (stdout, _) = credentials(&["-o", "json"]);
    let found = verdicts(&stdout);
    assert_eq!(
        found,
        vec![
            ("db-bind".to_string(), "ok".to_string()),
            ("dest-bind".into(), "unsafe".into()),
            ("uaa-bind".into(), "unsafe".into())
        ],
        "{stdout}"
    );
    let document: Value = serde_json::from_str(&stdout).expect("json");
    let uaa = &document["credentials"][2];
    assert_eq!(uaa["serviceBinding"], "uaa-bind");
    assert_eq!(uaa["format"], "metadata");
    assert_eq!(uaa["rotation"]["frequency"], "72h", "the webhook default: {uaa}");
    assert_eq!(uaa["oldCredentials"][0]["binding"], "uaa-bind-k3x9q");
    let revocable: k8s_openapi::jiff::Timestamp =
        uaa["oldCredentials"][0]["revocableAt"].as_str().expect("RFC 3339").parse().expect("a time");
    let in_seconds = revocable.as_second() - k8s_openapi::jiff::Timestamp::now().as_second();
    assert!((1500..=1800).contains(&in_seconds), "created now + 30m: {in_seconds}s");
    let margin = uaa["marginSeconds"].as_i64().expect("margin");
    assert!((-45 * 60 - 300..=-45 * 60).contains(&margin), "30m − (1h + 15m): {margin}");
    let (table, _) = credentials(&[]);
    assert!(table.lines().next().is_some_and(|h| h.contains("VERDICT") && h.contains("OLD CREDS DIE")), "{table}");
    assert!(!table.contains("sb-1"), "no credential value is printed:\n{table}");

    // capdeck batches: an open batch of the rotated Secret says when its old credentials die.
    world
        .apply_objects(vec![json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
            "metadata": {"name": "bookshop-q7x2m", "namespace": ns},
            "spec": {"application": "bookshop", "windowEnd": k8s_openapi::jiff::Timestamp::now().to_string(),
                     "secrets": [{"name": "uaa-bind", "service": "uaa", "dataHash": "h",
                                  "rotatedAt": k8s_openapi::jiff::Timestamp::now().to_string()}]}})])
        .await;
    let output = capdeck(&world.admin_kubeconfig, &["batches", "-n", &ns]);
    let (stdout, stderr) = text(&output);
    let row = stdout.lines().find(|line| line.contains("bookshop-q7x2m")).unwrap_or_default();
    assert!(row.contains("revocable in 2") || row.contains("revocable in 3"), "~30m: {stdout}{stderr}");
    let output = capdeck(&world.admin_kubeconfig, &["batches", "-n", &ns, "-o", "json"]);
    let listed: Value = serde_json::from_str(&text(&output).0).expect("json");
    assert!(listed["items"][0]["oldCredentialsRevocableAt"].as_str().is_some_and(|t| t.ends_with('Z')), "{listed}");

    // The batch rolled out (Succeeded): the pods hold the new credentials, so uaa-bind is ok —
    // though its ServiceBinding has no status.lastCredentialsRotationTime (its newest old copy and
    // creationTimestamp say when it rotated).
    world
        .apply_objects(vec![json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
            "metadata": {"name": "bookshop-q7x2m", "namespace": ns},
            "spec": {"application": "bookshop", "windowEnd": k8s_openapi::jiff::Timestamp::now().to_string(),
                     "secrets": [{"name": "uaa-bind", "service": "uaa", "dataHash": "h",
                                  "rotatedAt": k8s_openapi::jiff::Timestamp::now().to_string()}]},
            "status": {"phase": "Succeeded", "completedAt": k8s_openapi::jiff::Timestamp::now().to_string()}})])
        .await;
    let (stdout, stderr) = credentials(&["-o", "json"]);
    assert!(verdicts(&stdout).contains(&("uaa-bind".into(), "ok".into())), "{stdout}");
    assert!(stderr.contains("margins judged with the defaults"), "no engine leads here: {stderr}");

    // doctor: a binding whose TTL is shorter than ROLLOUT_DELAY + a progress deadline.
    world
        .apply_objects(vec![binding(
            "short-bind",
            json!({"spec": {"secretName": "short-bind",
                            "credentialsRotationPolicy": {"enabled": true, "rotatedBindingTTL": "20m"}}}),
        )])
        .await;
    let output = capdeck(&world.admin_kubeconfig, &["doctor", "-n", &ns, "--lease-namespace", &ns]);
    let (stdout, stderr) = text(&output);
    assert!(
        stdout.contains("short-bind: rotatedBindingTTL 20m is shorter than ROLLOUT_DELAY 1h + progress deadline 10m"),
        "{stdout}{stderr}"
    );
    assert!(!stdout.contains("uaa-bind:"), "only the short one: {stdout}");
}

async fn world_has_service_bindings(world: &World) -> bool {
    let gvk = kube::api::GroupVersionKind::gvk("services.cloud.sap.com", "v1", "ServiceBinding");
    kube::discovery::pinned_kind(&world.client, &gvk).await.is_ok()
}

/// The console's drill-down from a rollout row, on real ReplicaSets and Pods (kube-controller-
/// manager's, kwok's kubelets; the sandbox's simulation): a rotation rolls `srv`, whose new Pod
/// crash-loops. The rows are its ReplicaSets (newest first, with the VCAP Secret each reads) and
/// their Pods (state, restarts, last termination), read the way the Pods pane reads them; `l`
/// checks `get pods/log` before reading a log, and says which permission is missing.
pub async fn pods_pane_shows_replicasets_pods_and_checks_log_permission(backend: Backend) {
    use capdeck::readmodel::pods::{RowKind, fetch, log};
    let world = World::new(backend, "pods-pane").await;
    let options = AppOptions { deployments: &[("srv", &["uaa"])], crash_loop: &["srv"], ..AppOptions::default() };
    load_current(&world, &options).await;
    let old_secret = world.vcap_of("bookshop-v1-srv").await;
    let workloads = world.workloads();
    let engine = Engine::on(&world, engine_config(&world, "engine-a")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    world.rotate_secret("bookshop-uaa").await;
    let seen = std::sync::Mutex::new(Vec::new());
    eventually("the new ReplicaSet's Pod crash-looping beside the old ones", LONG, || async {
        let rows = fetch(&world.client, &world.ns, "bookshop-v1-srv").await?;
        let shape: Vec<(RowKind, &str)> = rows.iter().map(|r| (r.kind, r.status.as_str())).collect();
        let want = [
            (RowKind::ReplicaSet, "current"),
            (RowKind::Pod, "CrashLoopBackOff"),
            (RowKind::ReplicaSet, "old"),
            (RowKind::Pod, "Running"),
            (RowKind::Pod, "Running"),
        ];
        let matched = shape == want;
        let said = format!("{shape:?}");
        *seen.lock().expect("lock") = rows;
        if matched { Ok(()) } else { Err(said) }
    })
    .await;
    let rows = seen.into_inner().expect("lock");
    let new_secret = world.vcap_of("bookshop-v1-srv").await;
    assert_ne!(new_secret, old_secret, "capdeck pointed srv at its new VCAP Secret");
    let (current, crashing, old) = (&rows[0], &rows[1], &rows[2]);
    assert_eq!(current.secret.as_deref(), Some(new_secret.as_str()), "{current:?}");
    assert_eq!(old.secret.as_deref(), Some(old_secret.as_str()), "{old:?}");
    assert!(crashing.name.starts_with(&format!("{}-", current.name)), "{crashing:?} of {current:?}");
    assert!(crashing.restarts >= 1 && current.restarts == crashing.restarts, "{current:?} {crashing:?}");
    assert_eq!(crashing.last_termination.as_deref(), Some("Error (exit code 1)"));
    assert_eq!(crashing.log_container.as_deref(), Some("main"));
    assert!(rows[3..].iter().all(|pod| pod.ready == "1/1" && pod.restarts == 0), "{rows:?}");
    engine.stop().await;
    workloads.stop().await;
    let crashing_pod = crashing.name.clone();

    let missing = fetch(&world.client, &world.ns, "nope").await.expect_err("no such Deployment");
    assert_eq!(missing, format!("Deployment {}/nope no longer exists", world.ns));

    // A Pod never scheduled to a node has no log: kube-apiserver answers empty (no kubelet to
    // ask), and so does the sandbox.
    world
        .apply_objects(vec![json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "nowhere", "namespace": world.ns},
            "spec": {"nodeSelector": {"capdeck.dev/test-pool": "none"}, "containers": [{"name": "main", "image": "i"}]}})])
        .await;
    let unscheduled = log(&world.client, &world.ns, "nowhere", Some("main")).await;
    assert_eq!(unscheduled, Ok(Vec::new()));
    let gone = log(&world.client, &world.ns, "nope", None).await.expect_err("no such Pod");
    assert!(gone.starts_with(&format!("cannot read the log of Pod {}/nope: ", world.ns)), "{gone}");
    if backend == Backend::Sandbox {
        // The sandbox's kubelet stand-in (the demo's failing Pod): a scheduled Pod's annotation.
        let lines: Vec<String> = (1..=120).map(|n| format!("line {n}")).collect();
        world
            .apply_objects(vec![json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "logged", "namespace": world.ns,
                             "annotations": {"sandbox.capdeck.dev/log": lines.join("\n")}},
                "spec": {"nodeName": "node-1", "containers": [{"name": "main", "image": "i"}]}})])
            .await;
        let tail = log(&world.client, &world.ns, "logged", None).await.expect("log");
        assert_eq!(tail.len(), 100, "the last 100 lines");
        assert_eq!((tail[0].as_str(), tail[99].as_str()), ("line 21", "line 120"));
    }

    // A user who may list Pods but not read their logs is told which permission is missing.
    world.grant("erin", "", &["pods"], &["get", "list"], &["get:pods/log"]).await;
    let erin = crate::world::client_for(&world.kubeconfig_for("erin")).await;
    let denied = log(&erin, &world.ns, &crashing_pod, Some("main")).await.expect_err("no pods/log");
    assert_eq!(
        denied,
        format!(
            "you may not read Pod logs in {} (RBAC: get pods/log); ask for it, or use kubectl logs where you can",
            world.ns
        )
    );
    world.next_user();
}
