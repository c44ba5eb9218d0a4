//! Security (docs/RELIABILITY.md): a planted credential never shows anywhere but in the Secrets
//! themselves and `plan --show-secrets`; the deploy RBAC lists exactly what the engine uses.

use crate::common;
use std::collections::BTreeSet;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::console::Console;
use crate::common::fixtures::{AppOptions, RunningEngine, current_sandbox, test_config};
use crate::common::story_world::StoryWorld as _;
use base64::Engine as _;
use capdeck::api::BatchPhase;
use capdeck::engine::Role;
use capdeck::engine::config::EngineMode;
use capdeck::sandbox::Sandbox;
use serde_json::Value;

const MARKER: &str = "MARKER-SECURITY-5d1e9b";

/// Everything the tracing subscriber writes, kept for the check.
#[derive(Clone, Default)]
struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLog {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log")).into_owned()
    }
}

fn capdeck(kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String) {
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "trace")
        .output()
        .expect("runs");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

fn assert_clean(place: &str, text: &str) {
    assert!(!text.contains(MARKER), "the credential leaked into {place}");
    let encoded = base64::engine::general_purpose::STANDARD.encode(MARKER);
    assert!(!text.contains(&encoded[..16]), "the credential leaked (base64) into {place}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_credential_never_appears_in_output_logs_console_events_or_batches() {
    let log = CapturedLog::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("trace")
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber in this test binary");

    // The demo cluster with a credential of bookshop's xsuaa binding replaced by the marker.
    let sandbox = Sandbox::default();
    sandbox.load_demo().expect("demo");
    let mut binding = sandbox.get("", "secrets", "cap-shop", "bookshop-uaa-bind").expect("binding");
    binding["data"]["clientsecret"] = Value::String(base64::engine::general_purpose::STANDARD.encode(MARKER));
    sandbox.load([binding]).expect("planted");
    let simulation = tokio_util::sync::CancellationToken::new();
    let fast = capdeck::sandbox::simulate::WorkloadSimulation { replicas_per_second: 20.0, ..Default::default() };
    sandbox.simulate_workloads(fast, simulation.clone());
    let (_served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sre").await;

    // The daemon, logging everything it can.
    let daemon_out = dir.path().join("daemon.out");
    let daemon_err = dir.path().join("daemon.err");
    let daemon = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        .args(["--daemon", "--health-addr", "127.0.0.1:0", "-A"])
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAMESPACE", "capdeck-system")
        .env("RUST_LOG", "trace")
        .stdout(std::fs::File::create(&daemon_out).expect("out"))
        .stderr(std::fs::File::create(&daemon_err).expect("err"))
        .spawn()
        .expect("daemon");
    let mut daemon = common::KillOnDrop(daemon);

    // The start-up re-check finds bookshop's Deployments out of date: a batch; force it now.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let batch = loop {
        if let Some(batch) = sandbox.batches("bookshop").await.pop() {
            break batch;
        }
        assert!(std::time::Instant::now() < deadline, "no bookshop batch");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let target = format!("cap-shop/{}", batch.metadata.name.clone().unwrap_or_default());
    let mut outputs = Vec::new();
    // (bookshop's uaa binding keeps its old credentials only 25m in the demo seed, so the engine
    // may have ended the window itself already: CredentialsExpiring.)
    let (forced, text) = capdeck(&kubeconfig, &["force", &target, "--approve", "--reason", "security test"]);
    assert!(forced || text.contains("is already rolling out"), "{text}");
    outputs.push(("capdeck force", text));
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while sandbox.batches("bookshop").await.pop().map(|b| b.phase()) != Some(BatchPhase::Succeeded) {
        if std::time::Instant::now() > deadline {
            let log = std::fs::read_to_string(&daemon_out).unwrap_or_default();
            let tail: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("\"target\":\"capdeck") || l.contains("rotationbatches") && !l.contains("hyper"))
                .collect();
            let phases: Vec<_> =
                sandbox.batches("bookshop").await.iter().map(|b| (b.phase(), b.metadata.generation)).collect();
            panic!("bookshop never rolled out: {phases:?}\n{}", tail[tail.len().saturating_sub(40)..].join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The marker did flow: it is in the new VCAP Secret (a Secret is where it belongs).
    let vcap = sandbox
        .list("", "secrets")
        .into_iter()
        .filter(|s| s.pointer("/metadata/labels/capdeck.dev~1rotation-batch").is_some())
        .filter_map(|s| s.pointer("/data/VCAP_SERVICES").and_then(Value::as_str).map(str::to_string))
        .filter_map(|text| base64::engine::general_purpose::STANDARD.decode(text).ok())
        .any(|bytes| String::from_utf8_lossy(&bytes).contains(MARKER));
    assert!(vcap, "the marker reached the new VCAP Secret");

    for args in [&["batches", "-A"][..], &["batches", "-A", "-o", "json"][..]] {
        let (_, text) = capdeck(&kubeconfig, args);
        outputs.push(("capdeck", text));
    }

    // The console: every view, the detail pane and the YAML of the selected row in each.
    let mut console = Console::start(&kubeconfig, true, EngineMode::Observe).await;
    let mut screens = vec![console.shows("bookshop").await];
    for (command, title) in [
        (":apps\n", "Applications ["),
        (":versions\n", "Versions ["),
        (":tenants\n", "Tenants ["),
        (":ops\n", "Tenant operations ["),
        (":batches\n", "Batches ["),
        (":rollouts\n", "Rollouts ["),
        (":events\n", "Events ["),
    ] {
        console.typed(command);
        // Rows arrive by watch; a detail needs a row.
        let empty = format!("{title}0/");
        screens.push(console.until(title, |s| s.contains(title) && !s.contains(&empty)).await);
        if command == ":apps\n" {
            console.typed("/bookshop\n");
            screens.push(console.shows("Applications [1/").await);
        }
        console.typed("d");
        let mut screen = console.shows("┌").await;
        // The binding Secrets' keys arrive by their own watch: reopen until they are in.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while command == ":apps\n" && !screen.contains("clientsecret") && std::time::Instant::now() < deadline {
            console.key(crossterm::event::KeyCode::Esc);
            console.until("closed", |s| !s.contains("┌")).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            console.typed("d");
            screen = console.shows("┌").await;
        }
        screens.push(screen);
        console.key(crossterm::event::KeyCode::Esc);
        screens.push(console.until("closed", |s| !s.contains("┌")).await);
        console.typed("y");
        screens.push(console.until("yaml or why not", |s| s.contains("┌ YAML") || s.contains("no object")).await);
        console.key(crossterm::event::KeyCode::Esc);
        console.key(crossterm::event::KeyCode::Esc);
        screens.push(console.until("closed", |s| !s.contains("┌")).await);
    }
    console.quit().await;

    // The daemon's own output, after a clean stop.
    let _ = std::process::Command::new("kill").args(["-TERM", &daemon.0.id().to_string()]).status();
    let _ = daemon.0.wait();
    outputs.push(("the daemon's stdout (JSON log)", std::fs::read_to_string(&daemon_out).expect("out")));
    outputs.push(("the daemon's stderr", std::fs::read_to_string(&daemon_err).expect("err")));
    assert!(outputs.iter().any(|(_, text)| text.contains("deployment pointed at new VCAP secret")), "trace logs ran");

    for (place, text) in &outputs {
        assert_clean(place, text);
    }
    for screen in &screens {
        assert_clean("the console", screen);
    }
    assert!(screens.iter().any(|s| s.contains("clientsecret")), "the console shows Secret keys");
    assert_clean("the in-process log", &log.text());
    assert!(log.text().len() > 10_000, "the in-process log captured the console's trace");
    assert_clean("Events", &serde_json::to_string(&sandbox.list("events.k8s.io", "events")).expect("json"));
    assert_clean("Events (core)", &serde_json::to_string(&sandbox.list("", "events")).expect("json"));
    assert_clean(
        "RotationBatches",
        &serde_json::to_string(&sandbox.list("capdeck.dev", "rotationbatches")).expect("json"),
    );

    // The one place it may appear: `plan --show-secrets`, asked for explicitly.
    let manifest = dir.path().join("cluster.yaml");
    let mut file = std::fs::File::create(&manifest).expect("manifest");
    for kind in [
        ("sme.sap.com", "capapplications"),
        ("sme.sap.com", "capapplicationversions"),
        ("sme.sap.com", "captenants"),
        ("", "secrets"),
        ("apps", "deployments"),
    ] {
        for object in sandbox.list(kind.0, kind.1) {
            writeln!(file, "---\n{}", object).expect("write");
        }
    }
    let binding = sandbox.get("", "secrets", "cap-shop", "bookshop-uaa-bind").expect("binding");
    let mut binding = binding;
    binding["data"]["clientsecret"] =
        Value::String(base64::engine::general_purpose::STANDARD.encode(format!("{MARKER}-next")));
    writeln!(file, "---\n{binding}").expect("write");
    drop(file);
    let (_, hidden) = capdeck(&kubeconfig, &["plan", "-f", manifest.to_str().expect("utf-8")]);
    assert_clean("plan without --show-secrets", &hidden);
    let (_, shown) = capdeck(&kubeconfig, &["plan", "-f", manifest.to_str().expect("utf-8"), "--show-secrets"]);
    assert!(shown.contains(MARKER), "--show-secrets shows the payload");
    simulation.cancel();
}

/// (group, resource[/subresource], verb) from a ClusterRole or Role document.
fn rules(document: &Value) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for rule in document["rules"].as_array().into_iter().flatten() {
        let list = |key: &str| -> Vec<String> {
            rule[key].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
        };
        for group in list("apiGroups") {
            for resource in list("resources") {
                for verb in list("verbs") {
                    out.insert((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    out
}

/// The engine's story in the sandbox with every request logged: rotation, a supersede (spec
/// update), rollout, cleanup, the same Event twice. What it asked for must be exactly the RBAC of
/// `capdeck manifests`.
#[tokio::test(start_paused = true)]
async fn the_deploy_rbac_lists_exactly_the_requests_the_engine_makes() {
    let output =
        std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck")).args(["manifests"]).output().expect("runs");
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&output.stdout)).expect("manifests are YAML");
    let allowed: BTreeSet<(String, String, String)> =
        documents.iter().filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role").flat_map(rules).collect();

    let sandbox = current_sandbox(&AppOptions::default());
    // With sap-btp-service-operator installed, as the manifests expect it may be (its CRD is
    // watched by name, its ServiceBindings listed and watched).
    let crd = capdeck::manifest::parse_documents(include_str!("../../../assets/demo/servicebinding-crd.yaml"), false)
        .expect("CRD yaml");
    sandbox.load(crd).expect("ServiceBinding CRD");
    sandbox.simulate_workloads(Default::default(), tokio_util::sync::CancellationToken::new());
    sandbox.clear_requests();
    // With a notification receiver (that cannot be reached): recording and noting the failure
    // are requests of their own.
    let mut config = test_config("engine-a");
    config.notify = capdeck::engine::config::NotifyConfig {
        targets: vec![
            capdeck::engine::config::NotifyTarget::parse("unreachable@http://127.0.0.1:9/hook").expect("url"),
        ],
        cluster: "rbac".into(),
        ..Default::default()
    };
    // A freeze of the namespace for the first 20 s: the engine watches freezes and records its
    // start and end on the freeze's status before announcing them.
    let until = (k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(20)).to_string();
    sandbox
        .load([serde_json::json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
            "metadata": {"name": "namespace", "namespace": common::fixtures::NS},
            "spec": {"scope": "Namespace", "until": until,
                     "frozen": {"by": "alice", "at": k8s_openapi::jiff::Timestamp::now().to_string(), "reason": "rbac story"}}})])
        .expect("a freeze");
    let engine = RunningEngine::start(sandbox.client(), config).await;
    engine.wait_for_role(Role::Leader).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Two rotations in one window: the batch's spec is updated to carry both.
    sandbox.rotate_secret(common::fixtures::NS, "bookshop-uaa").expect("rotated");
    tokio::time::sleep(Duration::from_secs(5)).await;
    sandbox.rotate_secret(common::fixtures::NS, "bookshop-db").expect("rotated");
    sandbox.wait_phase("bookshop", BatchPhase::Succeeded, Duration::from_secs(300)).await;
    // Another rotation within the storm guard: the same "needs approval" Event twice in a row,
    // each an Event of its own (about its own batch: created, never patched).
    for _ in 0..2 {
        sandbox.rotate_secret(common::fixtures::NS, "bookshop-uaa").expect("rotated");
        tokio::time::sleep(Duration::from_secs(40)).await;
    }
    engine.stop().await;
    // Deliveries run on their own: let the last one finish its tries.
    tokio::time::sleep(Duration::from_secs(120)).await;
    // Both batches' approval waits (storm guard) were announced, the receiver's failure noted.
    let records: Vec<(String, Vec<String>)> = sandbox
        .batches("bookshop")
        .await
        .into_iter()
        .flat_map(|batch| batch.status.map(|status| status.notifications).unwrap_or_default())
        .map(|record| (record.event, record.failed))
        .collect();
    let failed = ("AwaitingApproval".to_string(), vec!["unreachable".to_string()]);
    assert_eq!(records, vec![failed.clone(), failed]);

    let used: BTreeSet<(String, String, String)> = sandbox
        .requests()
        .into_iter()
        .filter(|r| !r.info.resource.is_empty())
        .map(|r| {
            let resource = match &r.info.subresource {
                Some(sub) => format!("{}/{sub}", r.info.resource),
                None => r.info.resource.clone(),
            };
            (r.info.group.clone(), resource, r.info.verb.clone())
        })
        .collect();
    let unused: Vec<_> = allowed.difference(&used).collect();
    let missing: Vec<_> = used.difference(&allowed).collect();
    assert!(missing.is_empty(), "the engine needs permissions the manifests do not grant: {missing:#?}");
    assert!(unused.is_empty(), "the manifests grant permissions the engine never used: {unused:#?}");
}
