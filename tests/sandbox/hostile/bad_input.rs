//! Bad input through the real paths (docs/RELIABILITY.md, "Bad input"): malformed binding
//! Secrets reach the engine over the sandbox as rotations; broken cluster objects sit next to
//! good ones; bad settings and kubeconfigs reach the binary. Each case gives a clear message,
//! loses nothing (the Deployment keeps its working VCAP Secret) and never shows a value.

use crate::common;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::eventually;
use crate::common::fixtures::{AppOptions, EngineWorld, NS, RunningEngine, current_sandbox, test_config};
use crate::common::story_world::StoryWorld as _;
use assert_cmd::Command;
use capdeck::api::BatchPhase;
use capdeck::api::rotation_batch::DeploymentRolloutState;
use capdeck::engine::Role;
use capdeck::sandbox::Sandbox;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::json;

/// Planted in every bad value: it must never appear in a batch or an Event.
const MARKER: &str = "MARKER-BAD-INPUT-91c2";

enum Outcome {
    /// The batch fails; the Deployment's entry says this (and names the Secret when it is one).
    Refused { needle: &'static str, names_secret: bool },
    /// The batch succeeds and the new VCAP_SERVICES contains this.
    RolledOut { contains: &'static str },
}

type World = EngineWorld;

async fn world() -> World {
    EngineWorld::start(&[AppOptions::default()], test_config("engine-a")).await
}

/// Replace the data of the `bookshop-db` binding Secret through the API (a rotation).
async fn write_db_secret(sandbox: &Sandbox, data: BTreeMap<String, Vec<u8>>) {
    let secrets: Api<Secret> = Api::namespaced(sandbox.client(), NS);
    let mut secret = secrets.get("bookshop-db").await.expect("db secret");
    secret.data = Some(data.into_iter().map(|(key, value)| (key, ByteString(value))).collect());
    secrets.replace("bookshop-db", &PostParams::default(), &secret).await.expect("replaced");
}

async fn terminal_batch(sandbox: &Sandbox, count: usize) -> capdeck::api::RotationBatch {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let list = sandbox.batches("bookshop").await;
        if list.len() >= count && list.last().is_some_and(|b| b.phase().is_terminal()) {
            break;
        }
        let seen: Vec<_> = list.iter().map(|b| (b.phase(), b.status.as_ref().map(|s| s.deployments.clone()))).collect();
        assert!(tokio::time::Instant::now() < deadline, "no terminal batch: {seen:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sandbox.batches("bookshop").await.pop().expect("batch")
}

async fn bad_binding_secret(data: BTreeMap<String, Vec<u8>>, outcome: Outcome) {
    let world = world().await;
    let sandbox = &world.sandbox;
    write_db_secret(sandbox, data).await;
    let batch = terminal_batch(sandbox, 1).await;
    let status = batch.status.clone().unwrap_or_default();
    let srv = status.deployments.iter().find(|d| d.name == "bookshop-v1-srv").expect("srv in the batch");
    let refused = matches!(outcome, Outcome::Refused { .. });
    match outcome {
        Outcome::Refused { needle, names_secret } => {
            assert_eq!(batch.phase(), BatchPhase::Failed, "{status:#?}");
            assert_eq!(srv.state, Some(DeploymentRolloutState::Failed), "{srv:#?}");
            let message = srv.message.clone().unwrap_or_default();
            assert!(message.contains(needle), "{message}");
            assert!(!names_secret || message.contains("bookshop-db"), "{message}");
            // Nothing lost: the Deployment keeps the VCAP Secret it had, and that Secret exists.
            assert_eq!(sandbox.vcap_of("bookshop-v1-srv").await, "bookshop-v1-srv-go001");
            assert!(!sandbox.vcap_payload("bookshop-v1-srv-go001").await.is_empty());
        }
        Outcome::RolledOut { contains } => {
            assert_eq!(batch.phase(), BatchPhase::Succeeded, "{status:#?}");
            let payload = sandbox.vcap_payload(&sandbox.vcap_of("bookshop-v1-srv").await).await;
            assert!(payload.contains(contains), "VCAP_SERVICES lacks {contains:?}");
        }
    }
    let batches_text = serde_json::to_string(&sandbox.list("capdeck.dev", "rotationbatches")).expect("json");
    let events_text = serde_json::to_string(&sandbox.list("events.k8s.io", "events")).expect("json");
    assert!(!batches_text.contains(MARKER) && !events_text.contains(MARKER), "a value leaked");

    if refused {
        // The engine goes on: good credentials again roll out (nothing rolled, so no storm guard).
        let good = [("host", "db.example.com"), ("password", "db-fixed")];
        write_db_secret(sandbox, good.iter().map(|(k, v)| ((*k).to_string(), v.as_bytes().to_vec())).collect()).await;
        let next = terminal_batch(sandbox, 2).await;
        assert_eq!(next.phase(), BatchPhase::Succeeded, "{:#?}", next.status);
        assert!(sandbox.vcap_payload(&sandbox.vcap_of("bookshop-v1-srv").await).await.contains("db-fixed"));
    }
    world.engine.stop().await;
}

fn data(entries: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
    entries.iter().map(|(key, value)| ((*key).to_string(), value.to_vec())).collect()
}

#[tokio::test(start_paused = true)]
async fn credentials_that_are_not_json() {
    let credentials = format!("{{\"password\": \"{MARKER}\", broken");
    let outcome = Outcome::Refused { needle: "could not parse credentials", names_secret: true };
    bad_binding_secret(data(&[("credentials", credentials.as_bytes())]), outcome).await;
}

#[tokio::test(start_paused = true)]
async fn broken_metadata() {
    let outcome = Outcome::Refused { needle: "could not parse metadata", names_secret: true };
    bad_binding_secret(
        data(&[(".metadata", b"{\"credentialProperties\": 5"), ("password", MARKER.as_bytes())]),
        outcome,
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn container_property_that_is_not_an_object() {
    let metadata = br#"{"credentialProperties":[{"name":"all","format":"json","container":true}]}"#;
    let value = format!("[\"{MARKER}\"]");
    let outcome = Outcome::Refused { needle: "is a container but its value is not a JSON object", names_secret: true };
    bad_binding_secret(data(&[(".metadata", metadata), ("all", value.as_bytes())]), outcome).await;
}

#[tokio::test(start_paused = true)]
async fn invalid_utf8_becomes_replacement_characters_like_go() {
    let mut credentials = b"{\"password\": \"ab".to_vec();
    credentials.extend_from_slice(&[0xff, 0xfe]);
    credentials.extend_from_slice(b"cd\"}");
    // Go's encoding/json decodes invalid UTF-8 to U+FFFD, a valid character it writes back as is.
    let outcome = Outcome::RolledOut { contains: "ab\u{fffd}\u{fffd}cd" };
    bad_binding_secret(data(&[("credentials", &credentials)]), outcome).await;
}

#[tokio::test(start_paused = true)]
async fn a_one_mebibyte_value_would_make_the_vcap_secret_too_large() {
    let value = format!("{MARKER}{}", "x".repeat(1_048_500 - MARKER.len()));
    let outcome = Outcome::Refused { needle: "a Kubernetes Secret holds at most 1048576", names_secret: false };
    bad_binding_secret(data(&[("password", value.as_bytes())]), outcome).await;
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_keys() {
    let entries: Vec<(String, Vec<u8>)> =
        (0..10_000).map(|i| (format!("key-{i:05}"), format!("value-{i}").into_bytes())).collect();
    let outcome = Outcome::RolledOut { contains: "\"key-09999\":\"value-9999\"" };
    bad_binding_secret(entries.into_iter().collect(), outcome).await;
}

/// A CAPApplication without spec and one whose service names a missing Secret sit next to a good
/// application: both are reported, the good one rolls out.
#[tokio::test(start_paused = true)]
async fn broken_applications_next_to_a_good_one() {
    let sandbox = current_sandbox(&AppOptions::default());
    sandbox
        .load([
            json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
                   "metadata": {"name": "nospec", "namespace": NS}}),
            json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
                   "metadata": {"name": "orphan", "namespace": NS},
                   "spec": {"btpAppName": "orphan", "providerSubaccountId": "p", "rolloutOnCredentialUpdate": true,
                            "btp": {"services": [{"name": "uaa", "class": "xsuaa", "secret": "bookshop-uaa"},
                                                 {"name": "gone", "class": "hana", "secret": "gone-bind"}]}}}),
            json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion",
                   "metadata": {"name": "orphan-v1", "namespace": NS},
                   "spec": {"capApplicationInstance": "orphan", "version": "1.0.0", "workloads": [
                       {"name": "srv", "consumedBTPServices": ["uaa", "gone"], "deploymentDefinition": {"type": "CAP", "image": "i"}}]},
                   "status": {"state": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}}),
        ])
        .expect("broken objects");
    sandbox.simulate_workloads(Default::default(), tokio_util::sync::CancellationToken::new());
    let engine = RunningEngine::start(sandbox.client(), test_config("engine-a")).await;
    engine.wait_for_role(Role::Leader).await;
    let invalid = engine.stores.invalid();
    assert!(invalid.iter().any(|i| i.name == "nospec" && i.error.contains("spec")), "{invalid:#?}");
    sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    eventually("both applications' batches end", Duration::from_secs(600), || async {
        let good = sandbox.batches("bookshop").await.last().is_some_and(|b| b.phase().is_terminal());
        let orphan = sandbox.batches("orphan").await.last().is_some_and(|b| b.phase().is_terminal());
        good && orphan
    })
    .await;
    assert_eq!(sandbox.batches("bookshop").await.pop().map(|b| b.phase()), Some(BatchPhase::Succeeded));
    let orphan = sandbox.batches("orphan").await.pop().expect("orphan batch");
    assert_eq!(orphan.phase(), BatchPhase::Failed);
    let text = serde_json::to_string(&orphan.status).expect("json");
    assert!(text.contains("gone-bind"), "the missing Secret is named: {text}");
    engine.stop().await;
}

#[test]
fn versions_with_invalid_semver_or_both_or_neither_definitions_are_reported() {
    let output = Command::cargo_bin("capdeck")
        .expect("binary")
        .args(["plan", "-f", "tests/fixtures/plan/problems/versions.yaml", "-o", "json"])
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    let messages: Vec<&str> =
        plan["problems"].as_array().expect("problems").iter().filter_map(|p| p["message"].as_str()).collect();
    for needle in [
        "version \"banana\" is not semantic versioning",
        "workload both of shaky-v1 has both deploymentDefinition and jobDefinition",
        "workload neither of shaky-v1 has neither deploymentDefinition nor jobDefinition",
    ] {
        assert!(messages.iter().any(|m| m.contains(needle)), "{needle}: {messages:#?}");
    }
    // The valid version is planned; the one that is not semver never wins.
    let planned: Vec<&str> =
        plan["deployments"].as_array().expect("deployments").iter().filter_map(|d| d["deployment"].as_str()).collect();
    assert_eq!(planned, vec!["shaky-v1-good"]);
}

#[test]
fn garbage_manifests_fail_with_the_file_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, content) in
        [("empty.yaml", &b""[..]), ("tabs.yaml", &b"kind: Secret\n\t- : ::\n"[..]), ("list.json", &b"[1, 2, 3]"[..])]
    {
        let path = dir.path().join(name);
        std::fs::write(&path, content).expect("write");
        let output =
            Command::cargo_bin("capdeck").expect("binary").args(["plan", "-f"]).arg(&path).output().expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        // Either refused naming the file, or planned with the documents reported as problems.
        assert!(
            (output.status.code() == Some(1) && stderr.contains(name))
                || (output.status.success() && (stdout.contains("0 to restart") || stdout.contains("problem"))),
            "{name}: exit {:?}\nstdout {stdout}\nstderr {stderr}",
            output.status.code()
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn missing_or_unreachable_kubeconfigs_are_explained_for_the_console_and_the_daemon() {
    for args in [&[][..], &["--daemon", "--health-addr", "127.0.0.1:0"][..]] {
        let output = Command::cargo_bin("capdeck")
            .expect("binary")
            .args(args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .timeout(Duration::from_secs(60))
            .output()
            .expect("runs");
        // The console says it on stderr; the daemon in its JSON log on stdout.
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert_eq!(output.status.code(), Some(1), "{said}");
        assert!(said.contains("cannot read kubeconfig /nonexistent/kubeconfig"), "{args:?}: {said}");
    }
}

/// `ROLLOUT_DELAY=banana`: upstream's rule (1 h) with an error that names the value; the daemon
/// runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_delay_of_banana_is_reported_and_an_hour_is_used() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    let (_served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let log = dir.path().join("daemon.log");
    let daemon = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        .args(["--daemon", "--health-addr", "127.0.0.1:0"])
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAMESPACE", "default")
        .env("ROLLOUT_DELAY", "banana")
        .env("RUST_LOG", "info")
        .stdout(std::fs::File::create(&log).expect("log"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("daemon");
    let mut daemon = common::KillOnDrop(daemon);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("ROLLOUT_DELAY=") && text.contains("is not a duration") && text.contains("engine") {
            break text;
        }
        if std::time::Instant::now() > deadline {
            panic!("no ROLLOUT_DELAY error in the log:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let running = daemon.0.try_wait().expect("wait").is_none();
    daemon.kill();
    assert!(running, "the daemon runs on");
    assert!(text.contains("banana") && text.contains("1h"), "the value and the default are named: {text}");
}

/// `--rollout-delay 30` (no unit) once silently meant the 1 h fallback: now a usage error.
#[test]
fn a_rollout_delay_flag_without_a_unit_is_a_usage_error() {
    for bad in ["30", "30sec", "soon", ""] {
        let output = Command::cargo_bin("capdeck")
            .expect("binary")
            .args(["--daemon", "--rollout-delay", bad])
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(stderr.contains("Go duration with its unit"), "{bad:?}: {stderr}");
    }
}

/// `capdeck --daemon --lease-namespace NS` on `sandbox` until it exits (at start-up, in these tests).
async fn daemon_start_up(sandbox: &Sandbox, lease_namespace: &str) -> std::process::Output {
    let (_served, _dir, kubeconfig) = common::serve_with_kubeconfig(sandbox, "sandbox-admin").await;
    let lease_namespace = lease_namespace.to_string();
    tokio::task::spawn_blocking(move || {
        Command::cargo_bin("capdeck")
            .expect("binary")
            .args(["--daemon", "--health-addr", "127.0.0.1:0", "--lease-namespace", &lease_namespace])
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("POD_NAMESPACE")
            .timeout(Duration::from_secs(60))
            .output()
            .expect("runs")
    })
    .await
    .expect("join")
}

/// A daemon whose lease namespace does not exist (any cluster before `capdeck manifests`) once
/// observed forever with `/readyz` 200: now it exits 1 at start-up and names the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_without_its_lease_namespace_exits_with_the_fix() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    let output = daemon_start_up(&sandbox, "capdeck-system").await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    for fix in ["kubectl create namespace capdeck-system", "--lease-namespace"] {
        assert!(stderr.contains(fix), "no {fix:?} in: {stderr}");
    }
    assert!(!stderr.contains("Status {"), "a Debug dump: {stderr}");
}

/// A daemon that is denied the Lease exits 1 and names the permission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_denied_its_lease_names_the_permission() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    sandbox.deny("patch:leases".parse().expect("rule"));
    let output = daemon_start_up(&sandbox, "default").await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("leases.coordination.k8s.io") && stderr.contains("--lease-namespace"), "{stderr}");
}

/// `capdeck crds | head -1`: the reader going away is no error.
#[test]
fn a_closed_pipe_exits_quietly() {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        .args(["crds"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    // Read one line, then close our end: capdeck's next writes hit a broken pipe.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut first).expect("some output");
    drop(stdout);
    let output = child.wait_with_output().expect("exits");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

/// `plan -f` on a directory without manifests says so on stderr.
#[test]
fn plan_on_an_empty_directory_warns() {
    let dir = tempfile::tempdir().expect("dir");
    let output =
        Command::cargo_bin("capdeck").expect("binary").args(["plan", "-f"]).arg(dir.path()).output().expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success());
    assert!(stderr.contains("warning: no Kubernetes objects read"), "{stderr}");
}

/// The install one-liner works on an empty cluster: the Namespace comes first.
#[test]
fn manifests_start_with_their_namespace() {
    let output =
        Command::cargo_bin("capdeck").expect("binary").args(["manifests", "-n", "ops"]).output().expect("runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let first_kind = text.lines().find_map(|l| l.strip_prefix("kind: ")).unwrap_or_default();
    assert_eq!(first_kind, "Namespace", "{text}");
    assert!(text.contains("name: ops"));
}

/// A bad `--notify` URL or a `--notify-secret` that cannot be read stops the daemon at start, with
/// the flag and the fix, and never the URL (a webhook URL is its own credential); the console,
/// which observes, refuses them rather than ignore them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_notification_settings_stop_the_daemon_and_never_print_the_url() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    let (_served, _dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let cases: [(&[&str], &str); 11] = [
        (&["--notify", "ftp://hooks.example.com/T0/B0/MARKER-URL"], "--notify (number 1) is not an http or https URL"),
        (&["--notify", "https://ok.example.com/x", "--notify", "MARKER-URL"], "--notify (number 2) is not an http"),
        (&["--notify-secret", "default/notify:url"], "Secret default/notify does not exist"),
        (&["--notify-secret", "oncall@pagerduty=default/pd:routing-key"], "--from-literal=routing-key=ROUTING_KEY"),
        (&["--notify-secret", "default-notify-url"], "expected [NAME@][FORMAT=]NAMESPACE/SECRET:KEY"),
        (&["--notify", "pagerduty=two MARKER-URL"], "has a key that is not one word of printable ASCII"),
        (&["--notify", "pagerduty=MARKER-URL"], "PagerDuty's Events API v2 takes an integration key of 32"),
        (&["--engine", "observe", "--notify", "https://ok.example.com/MARKER-URL"], "this daemon observes"),
        (&["--notify-signing-secret", "whsec_MARKER-URL"], "not repeated here: it may hold a credential"),
        (&["--notify", "opsgenie=https://api.opsgenie.com/?key=MARKER-URL"], "has no api_key in its URL's query"),
        (
            &["--notify", "a@https://x.example.com/MARKER-URL", "--notify", "a@teams=https://y.example.com/MARKER-URL"],
            "two receivers are called a",
        ),
    ];
    for (flags, said) in cases {
        let output = Command::cargo_bin("capdeck")
            .expect("binary")
            .args(["--daemon", "--health-addr", "127.0.0.1:0", "--lease-namespace", "default"])
            .args(flags)
            .env("KUBECONFIG", &kubeconfig)
            .timeout(Duration::from_secs(60))
            .output()
            .expect("runs");
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(matches!(output.status.code(), Some(1 | 2)), "{flags:?}: {text}");
        assert!(text.contains(said), "{flags:?}: no {said:?} in {text}");
        assert!(!text.contains("MARKER-URL"), "{flags:?}: the URL was printed: {text}");
    }
    let output = Command::cargo_bin("capdeck")
        .expect("binary")
        .args(["--notify", "https://hooks.example.com/MARKER-URL"])
        .env("KUBECONFIG", &kubeconfig)
        .timeout(Duration::from_secs(60))
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("need an engine that may lead") && !text.contains("MARKER-URL"), "{text}");
    // `doctor` says every broken receiver, each on a line of its own, not the first alone.
    let output = Command::cargo_bin("capdeck")
        .expect("binary")
        .args(["doctor", "-n", "default", "--notify", "ftp://hooks.example.com/MARKER-URL"])
        .args(["--notify-secret", "default/notify:url", "--notify-secret", "oncall@pagerduty=default/pd:routing-key"])
        .env("KUBECONFIG", &kubeconfig)
        .timeout(Duration::from_secs(60))
        .output()
        .expect("runs");
    let report = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{report}");
    let failing: Vec<&str> =
        report.lines().filter(|line| line.contains("notifications") && line.contains("FAIL")).collect();
    assert_eq!(failing.len(), 3, "one line per broken receiver:\n{report}");
    for said in
        ["--notify (number 1)", "Secret default/notify does not exist", "oncall@pagerduty=default/pd:routing-key"]
    {
        assert!(failing.iter().any(|line| line.contains(said)), "no {said:?} in:\n{report}");
    }
    assert!(!report.contains("MARKER-URL"), "{report}");
}

/// Objects that do not decode as their kind, of several kinds, beside good ones (planted past the
/// API's validation, as a CRD without a schema or an older capdeck could have stored them):
/// every list command exits 0, lists the good rows and names each skipped one with its field on
/// stderr, never its value; `doctor` fails its `objects` check naming each; the engine counts them
/// in `capdeck_undecodable_objects` and still rolls the good application's rotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_that_do_not_decode_are_skipped_named_counted_and_fail_doctor() {
    let sandbox = current_sandbox(&AppOptions::default());
    sandbox
        .load([
            json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenant", "metadata": {"name": "bad-tenant", "namespace": NS},
                   "spec": {"capApplicationInstance": "bookshop", "subDomain": ["not", MARKER], "tenantId": "t"}}),
            json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch", "metadata": {"name": "bad-batch", "namespace": NS},
                   "spec": {"application": "bookshop", "windowEnd": "2026-11-27T10:00:00Z", "secrets": MARKER}}),
            json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze", "metadata": {"name": "namespace", "namespace": NS},
                   "spec": {"scope": "Namespace", "frozen": {"by": "x", "at": "2026-11-27T10:00:00Z"}, "until": MARKER}}),
        ])
        .expect("planted");
    sandbox.simulate_workloads(Default::default(), tokio_util::sync::CancellationToken::new());
    let (_served, _dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "admin").await;
    // The wall clock (the CLI is a process of its own): a 1 s window.
    let engine = RunningEngine::start(sandbox.client(), common::fixtures::real_time_config("engine-a", 15, 5)).await;
    engine.wait_for_role(Role::Leader).await;
    sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    eventually("the good application rolls", Duration::from_secs(120), || async {
        sandbox.batches("bookshop").await.iter().any(|b| b.phase() == BatchPhase::Succeeded)
    })
    .await;
    for (kind, series) in [("CAPTenant", 1), ("RotationBatch", 1), ("Freeze", 1)] {
        let line = format!("capdeck_undecodable_objects{{kind=\"{kind}\"}}");
        eventually(&line, Duration::from_secs(60), || async { engine.metric(&line) == Some(series) }).await;
    }
    let run = |args: &[&str]| {
        Command::cargo_bin("capdeck")
            .expect("binary")
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env("NO_COLOR", "1")
            .output()
            .expect("runs")
    };
    for (args, kind, name, field) in [
        (vec!["tenants", "-A"], "CAPTenant", "bad-tenant", "spec.subDomain"),
        (vec!["batches", "-A"], "RotationBatch", "bad-batch", "spec.secrets"),
        (vec!["freezes", "-A"], "Freeze", "namespace", "spec.until"),
    ] {
        let output = run(&args);
        let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{args:?}: {stdout}{stderr}");
        let named = format!("warning: {kind} {NS}/{name} does not decode (field {field}: ");
        assert!(stderr.contains(&named), "{args:?} names the skipped object: {stderr}");
        assert!(!stdout.contains(MARKER) && !stderr.contains(MARKER), "{args:?} quotes a value: {stdout}{stderr}");
    }
    let listed = run(&["batches", "-A"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("Succeeded"), "the good batch is listed");
    let doctor = run(&["doctor", "-A"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(1), "{text}");
    for name in ["CAPTenant shop/bad-tenant", "RotationBatch shop/bad-batch", "Freeze shop/namespace"] {
        assert!(
            text.lines().any(|l| l.starts_with("objects") && l.contains("FAIL") && l.contains(name)),
            "{name}: {text}"
        );
    }
    assert!(!text.contains(MARKER));
    engine.stop().await;
}

/// A Deployment that does not decode is no missing Deployment: the batch fails naming it (it
/// never says "already current"), and once someone fixes it the engine finds it out of date and
/// rolls it.
#[tokio::test(start_paused = true)]
async fn a_deployment_that_does_not_decode_fails_its_batch_and_rolls_once_fixed() {
    let world = world().await;
    let good = world.sandbox.get("apps", "deployments", NS, "bookshop-v1-srv").expect("srv");
    let mut broken = good.clone();
    broken["spec"]["replicas"] = json!("two");
    world.sandbox.load([broken]).expect("planted");
    world.sandbox.rotate_secret(NS, "bookshop-uaa").expect("rotated");
    let failed = terminal_batch(&world.sandbox, 1).await;
    assert_eq!(failed.phase(), BatchPhase::Failed, "{:?}", failed.status);
    let srv = failed.status.as_ref().and_then(|s| s.deployments.iter().find(|d| d.name == "bookshop-v1-srv").cloned());
    let message = srv.and_then(|d| d.message).unwrap_or_default();
    assert!(message.contains("Deployment bookshop-v1-srv does not decode (field spec.replicas"), "{message}");
    // Fixed: a new batch rolls it.
    world.sandbox.load([good]).expect("fixed");
    let rolled = terminal_batch(&world.sandbox, 2).await;
    assert_eq!(rolled.phase(), BatchPhase::Succeeded, "{:?}", rolled.status);
    assert!(rolled.restarts().any(|d| d.name == "bookshop-v1-srv"), "{:?}", rolled.status);
    world.engine.stop().await;
}
