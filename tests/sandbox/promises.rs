//! Promises kept: read-only means no write from any path, whichever of the flag, the environment
//! or the config file made it so; every misplaced flag is refused.

use std::path::Path;

use assert_cmd::Command;
use capdeck::sandbox::Sandbox;
use serde_json::{Value, json};

use crate::common;

/// One batch per action, each in the phase that action accepts.
fn batch(name: &str, phase: &str, status: Value) -> Value {
    let mut status = status;
    status["phase"] = json!(phase);
    json!({
        "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
        "metadata": {"name": name, "namespace": "shop", "labels": {"capdeck.dev/application": "bookshop"}},
        "spec": {"application": "bookshop", "windowEnd": "2026-01-01T00:00:00Z",
                 "secrets": [{"name": "bookshop-uaa", "service": "uaa", "rotatedAt": "2026-01-01T00:00:00Z", "dataHash": "abc"}],
                 "approval": {"required": true}},
        "status": status,
    })
}

fn capdeck(kubeconfig: &Path, config_home: &Path) -> Command {
    let mut command = Command::cargo_bin("capdeck").expect("bin");
    command
        .env("KUBECONFIG", kubeconfig)
        .env("XDG_CONFIG_HOME", config_home)
        .env_remove("CAPDECK_READONLY")
        .timeout(std::time::Duration::from_secs(60));
    command
}

/// Every subcommand that writes (and `--daemon`), with read-only from the flag, the environment
/// and the config file: exit 1, a message that names the source and how to lift it, and the
/// cluster unchanged (the batch's spec, no RotationBatch or Lease created). A dry run writes
/// nothing and may run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_refuses_every_write_whatever_made_it_so() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    sandbox.load([json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})]).expect("ns");
    let failed = json!({"deployments": [{"name": "srv", "version": "v1", "workload": "srv", "action": "Restart", "state": "Failed"}]});
    sandbox
        .load([
            batch("waiting", "AwaitingApproval", json!({})),
            batch("open", "Collecting", json!({})),
            batch("held", "Held", json!({})),
            batch("failed", "Failed", failed),
        ])
        .expect("batches");
    // A freeze in force, so that `unfreeze` would have something to lift.
    let frozen = json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
        "metadata": {"name": "namespace", "namespace": "shop"},
        "spec": {"scope": "Namespace", "until": "2099-01-01T00:00:00Z",
                 "frozen": {"by": "bob", "at": "2026-01-01T00:00:00Z", "reason": "sale"}}});
    sandbox.load([frozen]).expect("freeze");
    let freezes = || sandbox.list("capdeck.dev", "freezes");
    let freezes_before = freezes();
    let (_served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let config_home = dir.path().join("config");
    std::fs::create_dir_all(config_home.join("capdeck")).expect("config dir");
    let spec = |name: &str| sandbox.get("capdeck.dev", "rotationbatches", "shop", name).expect("batch")["spec"].clone();
    let before: Vec<Value> = ["waiting", "open", "held", "failed"].iter().map(|name| spec(name)).collect();
    let writes: Vec<Vec<&str>> = vec![
        vec!["approve", "shop/waiting", "--reason", "x"],
        vec!["force", "shop/open", "--approve", "--reason", "x"],
        vec!["hold", "shop/open", "--reason", "x"],
        vec!["release", "shop/held", "--reason", "x"],
        vec!["cancel", "shop/open", "--reason", "x"],
        vec!["retry", "shop/failed", "--reason", "x"],
        vec!["undo", "shop/failed", "--reason", "x"],
        vec!["freeze", "-n", "shop", "--until", "4h", "--reason", "x"],
        vec!["freeze", "-A", "--until", "4h", "--reason", "x"],
        vec!["freeze", "--app", "shop/bookshop", "--until", "4h", "--reason", "x"],
        vec!["unfreeze", "-n", "shop", "--reason", "x"],
        vec!["--daemon", "--health-addr", "127.0.0.1:0", "-A"],
        vec!["daemon", "--health-addr", "127.0.0.1:0", "-A"],
    ];
    let config_file = config_home.join("capdeck/config.toml");
    for (source, names, lift) in [
        ("flag", "--readonly was given", "run it without --readonly"),
        ("env", "CAPDECK_READONLY=true", "unset CAPDECK_READONLY"),
        ("file", "readonly = true in", "remove that line"),
    ] {
        if source == "file" {
            std::fs::write(&config_file, "readonly = true  # never write from this machine\n").expect("config");
        }
        for args in &writes {
            let mut command = capdeck(&kubeconfig, &config_home);
            match source {
                "flag" => {
                    command.arg("--readonly");
                }
                "env" => {
                    command.env("CAPDECK_READONLY", "true");
                }
                _ => {}
            }
            let output = command.args(args).output().expect("runs");
            let stderr = String::from_utf8_lossy(&output.stderr);
            let what = format!("{source}: {}", args.join(" "));
            assert_eq!(output.status.code(), Some(1), "{what}: {stderr}");
            assert!(
                stderr.contains("read-only") && stderr.contains(names) && stderr.contains(lift),
                "{what}: {stderr}"
            );
        }
        let after: Vec<Value> = ["waiting", "open", "held", "failed"].iter().map(|name| spec(name)).collect();
        assert_eq!(after, before, "{source}: a batch was written");
        assert_eq!(freezes(), freezes_before, "{source}: a freeze was written");
        assert_eq!(sandbox.list("capdeck.dev", "rotationbatches").len(), 4, "{source}: the daemon opened a batch");
        assert!(sandbox.list("coordination.k8s.io", "leases").is_empty(), "{source}: the daemon took a Lease");
    }
    // The file still says read-only: a dry run writes nothing and runs; --engine lead is a usage error.
    let output = capdeck(&kubeconfig, &config_home)
        .args(["hold", "shop/open", "--reason", "x", "--dry-run"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    for dry_run in [
        &["freeze", "-n", "shop", "--until", "4h", "--reason", "x", "--dry-run"][..],
        &["unfreeze", "-n", "shop", "--reason", "x", "--dry-run"],
    ] {
        let output = capdeck(&kubeconfig, &config_home).args(dry_run).output().expect("runs");
        assert_eq!(output.status.code(), Some(0), "{dry_run:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
    assert_eq!(freezes(), freezes_before, "a dry run wrote a freeze");
    let output = capdeck(&kubeconfig, &config_home).args(["--engine", "lead"]).output().expect("runs");
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stderr).contains("readonly = true in"));
    // A config file that cannot be parsed never lets a write through unnoticed.
    std::fs::write(&config_file, "readonly = tru\n").expect("config");
    let output =
        capdeck(&kubeconfig, &config_home).args(["hold", "shop/open", "--reason", "x"]).output().expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("config.toml"), "names the file: {stderr}");
    assert_eq!(spec("open"), before[1]);
    // Without read-only the same write goes through (the refusals above were read-only's).
    std::fs::remove_file(&config_file).expect("remove");
    let output =
        capdeck(&kubeconfig, &config_home).args(["hold", "shop/open", "--reason", "x"]).output().expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert_ne!(spec("open"), before[1]);
}

/// The worst case of a dropped flag: the same flag before the subcommand gave another verdict.
#[test]
fn a_flag_before_the_subcommand_is_refused_with_where_it_goes() {
    let output = Command::cargo_bin("capdeck")
        .expect("bin")
        .args(["--expected-rollout", "5m", "credentials", "-A"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("capdeck credentials --expected-rollout"), "{stderr}");
}
