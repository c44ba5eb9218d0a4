//! Nothing waits forever (issue 32 §4), on both backends: an exec credential plugin that hangs
//! is given up on within --request-timeout (and within the fleet's --timeout), naming the plugin
//! and the flag; a slow one within the deadline still connects and reads.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::setup::{capdeck, text};
use crate::world::{Backend, World};

/// A copy of `user`'s kubeconfig whose credentials come from an exec plugin (`slow-login`, a
/// script) that waits `seconds`, then prints the user's token as an ExecCredential.
fn exec_kubeconfig(world: &World, user: &str, seconds: u32, dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let original = std::fs::read_to_string(world.kubeconfig_for(user)).expect("the user's kubeconfig");
    let mut config: Value = serde_saphyr::from_str(&original).expect("a kubeconfig");
    let users = config.pointer_mut("/users").and_then(Value::as_array_mut).expect("users");
    let token = users[0].pointer("/user/token").and_then(Value::as_str).expect("a token user").to_string();
    let plugin = dir.join(format!("slow-login-{seconds}"));
    let credential = json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token},
    });
    std::fs::write(&plugin, format!("#!/bin/sh\nsleep {seconds}\necho '{credential}'\n")).expect("plugin");
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    users[0]["user"] = json!({"exec": {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": plugin.display().to_string(),
        "interactiveMode": "Never",
    }});
    let path = dir.join(format!("exec-{seconds}.kubeconfig"));
    std::fs::write(&path, serde_json::to_string(&config).expect("json")).expect("write");
    path
}

pub async fn an_exec_plugin_that_hangs_is_given_up_on_and_a_slow_one_connects(backend: Backend) {
    let w = World::new(backend, "exec-deadline").await;
    w.grant("alice", "capdeck.dev", &["rotationbatches"], &["list"], &[]).await;
    let dir = tempfile::tempdir().expect("dir");
    let slow = exec_kubeconfig(&w, "alice", 1, dir.path());
    let hung = exec_kubeconfig(&w, "alice", 300, dir.path());
    let ns = w.ns.clone();

    // Slow, within the deadline: it connects and reads as alice.
    let output = tokio::task::spawn_blocking({
        let ns = ns.clone();
        move || capdeck(&slow, &["batches", "-n", &ns, "--request-timeout", "20s"])
    })
    .await
    .expect("runs");
    let (stdout, stderr) = text(&output);
    eprintln!("[{}] slow plugin: {stdout}{stderr}", backend.label());
    assert!(output.status.success(), "a plugin within the deadline connects: {stdout}{stderr}");
    assert!(stderr.contains("No rotation batches"), "{stderr}");

    // Hung: every command gives up at the deadline, naming the plugin and the flag.
    for args in [
        vec!["batches", "-n", ns.as_str(), "--request-timeout", "2s"],
        vec!["tenants", "-n", ns.as_str(), "--request-timeout", "2s"],
        vec!["approve", "x/y", "--reason", "r", "--request-timeout", "2s"],
    ] {
        let hung = hung.clone();
        let owned: Vec<String> = args.iter().map(ToString::to_string).collect();
        let output = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = owned.iter().map(String::as_str).collect();
            capdeck(&hung, &args)
        })
        .await
        .expect("runs");
        let (stdout, stderr) = text(&output);
        eprintln!("[{}] {}: {stderr}", backend.label(), args.join(" "));
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stdout}{stderr}");
        assert_eq!(stderr.matches("exec credential plugin").count(), 1, "said once: {stderr}");
        assert!(
            stderr.contains("exec credential plugin \"slow-login-300\"")
                && stderr.contains("within 2s")
                && stderr.contains("--request-timeout"),
            "{args:?}: {stderr}"
        );
    }

    // The fleet bounds the plugin by its --timeout: the context is a row that says why.
    let output = tokio::task::spawn_blocking(move || capdeck(&hung, &["fleet", "--timeout", "2s", "-o", "json"]))
        .await
        .expect("runs");
    let (stdout, stderr) = text(&output);
    eprintln!("[{}] fleet: {stdout}{stderr}", backend.label());
    assert_eq!(output.status.code(), Some(1), "the context could not be read: {stdout}{stderr}");
    let fleet: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    let row = &fleet["fleet"][0];
    assert_eq!(row["state"], "unreachable", "{stdout}");
    let why = row["why"].as_str().unwrap_or_default();
    assert!(why.contains("slow-login-300") && why.contains("within 2s"), "the plugin is named: {why}");
}
