//! `capdeck batches`, the batch actions and `capdeck manifests` as a user runs them.

use crate::common;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use capdeck::sandbox::{DenyRule, Sandbox, ServedSandbox};
use predicates::prelude::*;
use serde_json::{Value, json};

struct Cluster {
    sandbox: Sandbox,
    served: ServedSandbox,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

fn batch(name: &str, phase: &str, required: bool) -> Value {
    // A collecting batch has not been planned yet: no deployments in its status.
    let deployments = if phase == "Collecting" {
        json!([])
    } else {
        json!([{"name": "bookshop-v1-srv", "version": "bookshop-v1", "workload": "srv", "action": "Restart", "state": "Queued"}])
    };
    json!({
        "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
        "metadata": {"name": name, "namespace": "shop", "labels": {"capdeck.dev/application": "bookshop"}},
        "spec": {"application": "bookshop", "windowEnd": "2026-01-01T00:00:00Z",
                 "secrets": [{"name": "bookshop-uaa", "service": "uaa", "rotatedAt": "2026-01-01T00:00:00Z", "dataHash": "abc"}],
                 "approval": {"required": required}},
        "status": {"phase": phase, "progress": "0/2", "deployments": deployments},
    })
}

async fn cluster() -> Cluster {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    sandbox.load([json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})]).expect("ns");
    sandbox
        .load([
            batch("bookshop-waiting", "AwaitingApproval", true),
            batch("bookshop-done", "Succeeded", false),
            batch("bookshop-open", "Collecting", false),
        ])
        .expect("batches");
    let (served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    Cluster { sandbox, served, _dir: dir, kubeconfig }
}

fn capdeck(kubeconfig: &Path) -> Command {
    let mut command = Command::cargo_bin("capdeck").expect("bin");
    command.env("KUBECONFIG", kubeconfig);
    command
}

fn spec(cluster: &Cluster, name: &str) -> Value {
    cluster.sandbox.get("capdeck.dev", "rotationbatches", "shop", name).expect("batch")["spec"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_lists_in_table_and_json() {
    let cluster = cluster().await;
    let kubeconfig = cluster.kubeconfig.clone();
    let output =
        tokio::task::spawn_blocking(move || capdeck(&kubeconfig).args(["batches", "-A"]).output().expect("runs"))
            .await
            .expect("join");
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let header: Vec<&str> = text.lines().next().expect("header").split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAMESPACE",
            "NAME",
            "APPLICATION",
            "STATE",
            "WINDOW",
            "DEPLOYMENTS",
            "SECRETS",
            "APPROVAL",
            "AGE",
            "OLD",
            "CREDS"
        ]
    );
    assert!(
        text.lines().any(|l| l.contains("bookshop-waiting")
            && l.contains("AwaitingApproval")
            && l.contains("required")
            && l.contains("ended")),
        "{text}"
    );
    let kubeconfig = cluster.kubeconfig.clone();
    let output = tokio::task::spawn_blocking(move || {
        capdeck(&kubeconfig).args(["batches", "-n", "shop", "-o", "json"]).output().expect("runs")
    })
    .await
    .expect("join");
    let list = crate::common::list_items(&output.stdout);
    assert_eq!(list.len(), 3);
    assert!(list.iter().all(|b| b["namespace"] == "shop" && b["application"] == "bookshop"));
    let kubeconfig = cluster.kubeconfig.clone();
    let empty = tokio::task::spawn_blocking(move || capdeck(&kubeconfig).args(["batches"]).output().expect("runs"))
        .await
        .expect("join");
    // Like kubectl: nothing on stdout (a pipe sees nothing), the note on stderr.
    assert!(empty.stdout.is_empty(), "{}", String::from_utf8_lossy(&empty.stdout));
    assert!(
        String::from_utf8_lossy(&empty.stderr)
            .contains("No rotation batches in namespace default. (capdeck batches -A looks in every namespace)")
    );
    cluster.served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_record_who_and_why_and_refuse_what_makes_no_sense() {
    let cluster = cluster().await;
    cluster.sandbox.set_user("alice@example.com");
    let run = |args: Vec<&'static str>| {
        let kubeconfig = cluster.kubeconfig.clone();
        tokio::task::spawn_blocking(move || capdeck(&kubeconfig).args(args).assert())
    };
    run(vec!["approve", "shop/bookshop-waiting", "--reason", "CHG-1"])
        .await
        .expect("join")
        .success()
        .stdout(predicate::str::contains("shop/bookshop-waiting: approved bookshop-waiting as alice@example.com"));
    let approval = spec(&cluster, "bookshop-waiting")["approval"].clone();
    assert_eq!(approval["approvedBy"], "alice@example.com");
    assert_eq!(approval["reason"], "CHG-1");
    assert_eq!(approval["required"], true, "the requirement stays on record");
    assert!(approval["approvedAt"].is_string());

    run(vec!["approve", "shop/bookshop-waiting", "--reason", "again"])
        .await
        .expect("join")
        .code(1)
        .stderr(predicate::str::contains("already approved by alice@example.com"));
    run(vec!["approve", "shop/bookshop-done", "--reason", "x"])
        .await
        .expect("join")
        .code(1)
        .stderr(predicate::str::contains("is Succeeded; nothing to approve"));
    run(vec!["approve", "shop/nope", "--reason", "x"])
        .await
        .expect("join")
        .code(1)
        .stderr(predicate::str::contains("not found (capdeck batches -A lists them)"));
    run(vec!["release", "-n", "shop", "bookshop-open", "--reason", "x"])
        .await
        .expect("join")
        .code(1)
        .stderr(predicate::str::contains("is not held"));

    run(vec!["hold", "-n", "shop", "bookshop-open", "--reason", "freeze"]).await.expect("join").success();
    assert_eq!(spec(&cluster, "bookshop-open")["hold"]["by"], "alice@example.com");
    assert_eq!(spec(&cluster, "bookshop-open")["hold"]["reason"], "freeze");
    run(vec!["release", "-n", "shop", "bookshop-open", "--reason", "thaw"]).await.expect("join").success();
    assert!(spec(&cluster, "bookshop-open").get("hold").is_none_or(Value::is_null));
    assert_eq!(spec(&cluster, "bookshop-open")["released"]["by"], "alice@example.com");
    assert_eq!(spec(&cluster, "bookshop-open")["released"]["reason"], "thaw");
    run(vec!["force", "-n", "shop", "bookshop-open", "--reason", "now"])
        .await
        .expect("join")
        .success()
        .stdout(predicate::str::contains("its window ends now"));
    assert_eq!(spec(&cluster, "bookshop-open")["force"]["by"], "alice@example.com");
    run(vec!["cancel", "shop/bookshop-open", "--reason", "oops"]).await.expect("join").success();
    assert_eq!(spec(&cluster, "bookshop-open")["cancel"]["reason"], "oops");

    // Usage errors exit 2, like clap's own: a missing or blank reason, a target that is not
    // NAMESPACE/NAME or NAME, -A without a namespace, -n contradicting the target.
    for (args, says) in [
        (vec!["approve", "bookshop-waiting", "-A", "--reason", "x"], "NAMESPACE/NAME"),
        (vec!["approve", "shop/bookshop-waiting"], "--reason"),
        (vec!["approve", "shop/bookshop-waiting", "--reason", "  "], "a reason must say why"),
        (vec!["approve", "a/b/c", "--reason", "x"], "is not NAMESPACE/NAME"),
        (vec!["approve", "/x", "--reason", "x"], "is not NAMESPACE/NAME"),
        (vec!["approve", "shop/", "--reason", "x"], "is not NAMESPACE/NAME"),
        (vec!["approve", "shop/bookshop-waiting", "-n", "other", "--reason", "x"], "but -n says"),
    ] {
        run(args.clone()).await.expect("join").code(2).stderr(predicate::str::contains(says));
    }
    // NAMESPACE/NAME with the same -n is fine.
    run(vec!["cancel", "shop/bookshop-waiting", "-n", "shop", "--reason", "dup"]).await.expect("join").success();
    cluster.served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_previews_and_writes_nothing() {
    let cluster = cluster().await;
    let before = cluster.sandbox.revision();
    let kubeconfig = cluster.kubeconfig.clone();
    let output = tokio::task::spawn_blocking(move || {
        capdeck(&kubeconfig)
            .args(["approve", "shop/bookshop-waiting", "--reason", "x", "--dry-run"])
            .output()
            .expect("runs")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("dry run, nothing written") && stdout.contains("Deployments to restart"), "{stdout}");
    assert!(stdout.contains("Tenants served"), "{stdout}");
    assert_eq!(cluster.sandbox.revision(), before, "a dry run wrote something");
    cluster.served.stop().await;
}

/// `retry` and `undo` from the CLI: a dry run names what each touches (undo: back to which
/// Secret), the write records who and why, and a batch that has not failed is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_and_undo_a_failed_batch() {
    let cluster = cluster().await;
    let mut failed = batch("bookshop-failed", "Failed", false);
    failed["status"]["deployments"] = json!([
        {"name": "bookshop-v1-srv", "version": "bookshop-v1", "workload": "srv", "action": "Restart", "state": "Stalled",
         "vcapSecret": "bookshop-v1-srv-new", "previousVcapSecret": "bookshop-v1-srv-old"}]);
    cluster.sandbox.load([failed]).expect("failed batch");
    cluster.sandbox.set_user("alice@example.com");
    let run = |args: Vec<&'static str>| {
        let kubeconfig = cluster.kubeconfig.clone();
        tokio::task::spawn_blocking(move || capdeck(&kubeconfig).args(args).assert())
    };
    run(vec!["undo", "shop/bookshop-failed", "--reason", "x", "--dry-run"])
        .await
        .expect("join")
        .success()
        .stdout(predicate::str::contains("Deployments to point back at their previous VCAP Secrets (1):"))
        .stdout(predicate::str::contains("bookshop-v1-srv (version bookshop-v1): back to bookshop-v1-srv-old"));
    run(vec!["retry", "shop/bookshop-waiting", "--reason", "x"])
        .await
        .expect("join")
        .code(1)
        .stderr(predicate::str::contains(
            "batch bookshop-waiting is AwaitingApproval; only a Failed batch or one the failure guard halted can be retried",
        ));
    run(vec!["retry", "shop/bookshop-failed"])
        .await
        .expect("join")
        .code(2)
        .stderr(predicate::str::contains("--reason"));
    run(vec!["retry", "shop/bookshop-failed", "--reason", "quota raised"]).await.expect("join").success().stdout(
        predicate::str::contains(
            "retried bookshop-failed as alice@example.com (was Failed): bookshop-v1-srv roll once more",
        ),
    );
    assert_eq!(spec(&cluster, "bookshop-failed")["retry"]["by"], "alice@example.com");
    assert_eq!(spec(&cluster, "bookshop-failed")["retry"]["reason"], "quota raised");
    run(vec!["retry", "shop/bookshop-failed", "--reason", "again"])
        .await
        .expect("join")
        .code(1)
        .stderr(predicate::str::contains("is already being retried"));
    run(vec!["undo", "shop/bookshop-failed", "--reason", "new credentials break srv"]).await.expect("join").success();
    assert_eq!(spec(&cluster, "bookshop-failed")["undo"]["reason"], "new credentials break srv");
    cluster.served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_write_names_the_missing_permission() {
    let cluster = cluster().await;
    cluster.sandbox.deny("patch:rotationbatches".parse::<DenyRule>().expect("rule"));
    let kubeconfig = cluster.kubeconfig.clone();
    tokio::task::spawn_blocking(move || {
        capdeck(&kubeconfig).args(["approve", "shop/bookshop-waiting", "--reason", "x"]).assert()
    })
    .await
    .expect("join")
    .code(1)
    .stderr(predicate::str::contains("forbidden"))
    .stderr(predicate::str::contains("cannot patch resource \"rotationbatches\""));
    assert!(spec(&cluster, "bookshop-waiting")["approval"].get("approvedBy").is_none());
    cluster.served.stop().await;
}

#[test]
fn unreachable_clusters_and_missing_kubeconfigs_are_explained() {
    Command::cargo_bin("capdeck")
        .expect("bin")
        .args(["batches", "-A"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("error:"));
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    capdeck::sandbox::write_kubeconfig(&kubeconfig, "http://127.0.0.1:9", "nobody").expect("write");
    Command::cargo_bin("capdeck")
        .expect("bin")
        .args(["batches", "-A"])
        .env("KUBECONFIG", &kubeconfig)
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot"));
    Command::cargo_bin("capdeck")
        .expect("bin")
        .args(["batches", "--context", "elsewhere"])
        .env("KUBECONFIG", &kubeconfig)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no context \"elsewhere\""));
}

#[test]
fn manifests_render_for_a_namespace() {
    let output = Command::cargo_bin("capdeck").expect("bin").args(["manifests", "-n", "ops"]).output().expect("runs");
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).expect("utf8");
    assert!(!text.contains("{{"), "every placeholder replaced");
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text).expect("yaml");
    let kinds: Vec<&str> = documents.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Deployment",
            "Service",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]
    );
    assert_eq!(documents[0]["metadata"]["name"], "ops");
    for document in &documents {
        // Cluster-scoped kinds have no namespace (the admission policy names the engine's
        // ServiceAccount in `ops` inside its expression).
        if !matches!(
            document["kind"].as_str(),
            Some(
                "ClusterRole"
                    | "ClusterRoleBinding"
                    | "Namespace"
                    | "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
            )
        ) {
            assert_eq!(document["metadata"]["namespace"], "ops", "{document}");
        }
    }
    let deployment = documents.iter().find(|d| d["kind"] == "Deployment").expect("deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["args"][0], "--daemon");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    // Not a namespace name: a usage error, before anything is rendered.
    Command::cargo_bin("capdeck")
        .expect("bin")
        .args(["manifests", "-n", "Bad_NS"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not a namespace name"));
    Command::cargo_bin("capdeck")
        .expect("bin")
        .args(["manifests", "--image", "registry.example.com/capdeck:1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("namespace: capdeck-system"))
        .stdout(predicate::str::contains("image: registry.example.com/capdeck:1"));
}

/// Every way `batches` prints: the same three batches as table, wide, name, JSON List and YAML.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_print_in_every_kubectl_format() {
    let cluster = cluster().await;
    let run = |args: &'static [&'static str]| {
        let kubeconfig = cluster.kubeconfig.clone();
        tokio::task::spawn_blocking(move || {
            let output = capdeck(&kubeconfig).args(args).output().expect("runs");
            assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
            String::from_utf8(output.stdout).expect("utf-8")
        })
    };
    let table = run(&["batches", "-n", "shop"]).await.expect("join");
    let wide = run(&["batches", "-n", "shop", "-o", "wide"]).await.expect("join");
    let bare = run(&["batches", "-n", "shop", "--no-headers"]).await.expect("join");
    let names = run(&["batches", "-n", "shop", "-o", "name"]).await.expect("join");
    let json = run(&["batches", "-n", "shop", "-o", "json"]).await.expect("join");
    let yaml = run(&["batches", "-n", "shop", "-o", "yaml"]).await.expect("join");

    assert!(table.starts_with("NAMESPACE") && !table.contains("REASON"), "{table}");
    assert!(wide.lines().next().is_some_and(|h| h.contains("TENANTS") && h.contains("REASON")), "{wide}");
    assert_eq!(bare.lines().count(), 3, "three rows, no header: {bare}");
    assert!(!bare.contains("NAMESPACE"), "{bare}");
    let mut listed: Vec<&str> = names.lines().collect();
    listed.sort_unstable();
    assert_eq!(listed, ["shop/bookshop-done", "shop/bookshop-open", "shop/bookshop-waiting"]);
    let from_json: Value = serde_json::from_str(&json).expect("json");
    let from_yaml: Value = serde_saphyr::from_str(&yaml).expect("yaml");
    assert_eq!(from_json["kind"], "List");
    assert_eq!(from_json["items"].as_array().map(Vec::len), Some(3));
    assert_eq!(from_yaml, from_json, "-o yaml prints the same document as -o json");
    cluster.served.stop().await;
}

/// `batches -w` prints the list, then one line per change as it happens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_watch_prints_each_change() {
    use std::io::{BufRead as _, BufReader};
    let cluster = cluster().await;
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        .args(["batches", "-n", "shop", "-w", "--no-headers"])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    let stdout = child.stdout.take().expect("stdout");
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut receive_until = |what: &str, check: &dyn Fn(&str) -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if let Ok(line) = lines.recv_timeout(std::time::Duration::from_millis(200)) {
                let matched = check(&line);
                seen.push(line);
                if matched {
                    return;
                }
            }
        }
        panic!("no line with {what}; seen: {seen:#?}");
    };
    receive_until("the initial list", &|line| line.contains("bookshop-waiting"));
    // A change: someone holds the waiting batch.
    let held = json!({"spec": {"hold": {"by": "alice", "at": "2026-01-01T00:00:00Z", "reason": "freeze"}}});
    let api: kube::Api<capdeck::api::RotationBatch> = kube::Api::namespaced(cluster.sandbox.client(), "shop");
    api.patch("bookshop-waiting", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&held))
        .await
        .expect("hold");
    receive_until("the held batch", &|line| line.contains("bookshop-waiting") && line.contains("held by alice"));
    let status = common::terminate(&mut child, std::time::Duration::from_secs(10));
    assert!(status.success(), "SIGTERM ends the watch with exit 0: {status:?}");
    cluster.served.stop().await;
}

/// `capdeck completion SHELL` registers capdeck itself as the completer of every shell.
#[test]
fn completion_scripts_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = Command::cargo_bin("capdeck").expect("bin").args(["completion", shell]).output().expect("runs");
        assert!(output.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&output.stdout);
        assert!(script.contains("CAPDECK_COMPLETE") && script.contains("capdeck"), "{shell}: {script}");
    }
    Command::cargo_bin("capdeck").expect("bin").args(["completion", "nosh"]).assert().code(2);
}

/// What the shell gets back (fish's protocol: one candidate a line, its help after a tab):
/// subcommands from the binary, and open batches, namespaces and contexts from the kubeconfig and
/// its cluster; a cluster that does not answer offers nothing, quickly, and no error text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_asks_the_cluster_for_batches_namespaces_and_contexts() {
    let cluster = cluster().await;
    let kubeconfig = cluster.kubeconfig.clone();
    let answers = tokio::task::spawn_blocking(move || {
        let complete = |kubeconfig: &std::path::Path, words: &[&str]| {
            let output = Command::cargo_bin("capdeck")
                .expect("bin")
                .env("KUBECONFIG", kubeconfig)
                .env("CAPDECK_COMPLETE", "fish")
                .args(["--", "capdeck"])
                .args(words)
                .output()
                .expect("runs");
            assert!(output.status.success(), "{words:?}: {}", String::from_utf8_lossy(&output.stderr));
            assert!(output.stderr.is_empty(), "{words:?}: {}", String::from_utf8_lossy(&output.stderr));
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            // The values; clap offers the flags too after an empty word.
            text.lines()
                .map(|line| line.split('\t').next().unwrap_or_default().to_string())
                .filter(|value| !value.starts_with('-'))
                .collect::<Vec<_>>()
        };
        let unreachable = tempfile::tempdir().expect("dir");
        let nowhere = unreachable.path().join("kubeconfig");
        capdeck::sandbox::write_kubeconfig(&nowhere, "https://127.0.0.1:9", "nobody").expect("kubeconfig");
        let started = std::time::Instant::now();
        let offline = complete(&nowhere, &["approve", ""]);
        let waited = started.elapsed();
        let named = (complete(&kubeconfig, &["-n", "shop", "approve", ""]), complete(&kubeconfig, &["retry", ""]));
        (
            complete(&kubeconfig, &["approve", ""]),
            complete(&kubeconfig, &["batches", "-n", "sh"]),
            complete(&kubeconfig, &["--context", ""]),
            complete(&kubeconfig, &["appr"]),
            (offline, waited),
            named,
        )
    })
    .await
    .expect("join");
    let (batches, namespaces, contexts, subcommands, (offline, waited), (in_shop, retriable)) = answers;
    // The batches the action accepts, named as it takes them (the context's namespace is
    // `default`; with -n, the name alone); retry accepts none of these.
    assert_eq!(batches, ["shop/bookshop-open", "shop/bookshop-waiting"]);
    assert_eq!(in_shop, ["bookshop-open", "bookshop-waiting"]);
    assert!(retriable.is_empty(), "{retriable:?}");
    assert_eq!(namespaces, ["shop"]);
    assert_eq!(contexts, ["capdeck-sandbox"]);
    assert_eq!(subcommands, ["approve"]);
    assert!(offline.is_empty(), "{offline:?}");
    // A bound against a hang (the completer gives up after 2 s), not a measurement.
    assert!(waited < std::time::Duration::from_secs(20), "an unreachable cluster held the shell for {waited:?}");
    cluster.served.stop().await;
}

#[test]
fn version_names_the_commit() {
    let short = Command::cargo_bin("capdeck").expect("bin").arg("-V").output().expect("runs");
    let short = String::from_utf8_lossy(&short.stdout).trim().to_string();
    let json = Command::cargo_bin("capdeck").expect("bin").args(["version", "-o", "json"]).output().expect("runs");
    let json: Value = serde_json::from_slice(&json.stdout).expect("json");
    let commit = json["gitCommit"].as_str().expect("gitCommit").to_string();
    assert_eq!(short, format!("capdeck {} (commit {commit})", env!("CARGO_PKG_VERSION")));
    // Built from this checkout: the commit is HEAD's (CI builds a fresh clone).
    if let Ok(head) = std::process::Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output()
        && head.status.success()
    {
        assert_eq!(commit, String::from_utf8_lossy(&head.stdout).trim(), "the commit HEAD was built from");
    }
}

#[test]
fn usage_errors_exit_2_and_engine_flags_stay_with_engines() {
    let capdeck = || Command::cargo_bin("capdeck").expect("bin");
    capdeck()
        .args(["doctor", "-o", "name"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("does not print -o name"));
    capdeck().args(["plan", "-f", ".", "-o", "name"]).assert().code(2);
    capdeck()
        .args(["--approval", "manual", "batches"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--approval configures the engine"));
    capdeck().args(["batches", "--rollout-delay", "5m"]).assert().code(2);
    for command in ["plan", "crds", "batches", "approve", "tenants"] {
        let help = capdeck().args([command, "--help"]).output().expect("runs");
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(
            !help.contains("--rollout-delay") && !help.contains("--max-parallel-rollouts"),
            "{command} --help lists engine flags"
        );
    }
    let doctor = capdeck().args(["doctor", "--help"]).output().expect("runs");
    assert!(String::from_utf8_lossy(&doctor.stdout).contains("--rollout-delay"), "doctor checks engine settings");
}
