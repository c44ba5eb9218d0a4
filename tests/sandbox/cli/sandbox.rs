//! `capdeck sandbox` as a process: it listens, writes a kubeconfig a kube client can use,
//! and exits 0 on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use capdeck::api::CAPTenant;
use kube::api::{Api, ListParams};

#[tokio::test]
async fn serves_demo_seed_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("nested").join("kubeconfig");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        .args([
            "sandbox",
            "--seed",
            "demo",
            "--simulate-workloads",
            "--simulate-pods",
            "--user",
            "alice",
            "--deny",
            "patch:rotationbatches",
            "--kubeconfig-out",
        ])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().expect("a line").expect("utf8");
    assert!(first.starts_with("capdeck sandbox serving at http://127.0.0.1:"), "{first}");
    assert!(first.contains("(seed: demo, user: alice)"), "{first}");
    let hint: Vec<String> = lines.by_ref().take(3).map(|line| line.expect("line")).collect();
    assert!(hint.iter().any(|line| line.contains(&format!("export KUBECONFIG={}", kubeconfig.display()))), "{hint:?}");

    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig parses"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let tenants: Api<CAPTenant> = Api::all(client.clone());
    assert_eq!(tenants.list(&ListParams::default()).await.expect("list").items.len(), 25);
    // --simulate-pods: every seeded Deployment's Pods come up.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "cap-hr");
    crate::common::eventually("Pods of the demo's Deployments", Duration::from_secs(20), || async {
        pods.list(&ListParams::default()).await.is_ok_and(|list| !list.items.is_empty())
    })
    .await;
    let who: Api<k8s_openapi::api::authentication::v1::SelfSubjectReview> = Api::all(client);
    let me = who.create(&Default::default(), &Default::default()).await.expect("whoami");
    assert_eq!(me.status.and_then(|s| s.user_info).and_then(|u| u.username).as_deref(), Some("alice"));

    let exit = crate::common::terminate(&mut child, Duration::from_secs(10));
    assert_eq!(exit.code(), Some(0));
}

#[test]
fn bad_flags_are_usage_errors() {
    assert_cmd::Command::cargo_bin("capdeck")
        .expect("bin")
        .args(["sandbox", "--deny", "nonsense"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("is not VERB:RESOURCE"));
    assert_cmd::Command::cargo_bin("capdeck").expect("bin").args(["sandbox", "--seed", "huge"]).assert().code(2);
    // Pods are simulated only with the workloads.
    assert_cmd::Command::cargo_bin("capdeck").expect("bin").args(["sandbox", "--simulate-pods"]).assert().code(2);
    assert_cmd::Command::cargo_bin("capdeck")
        .expect("bin")
        .args(["sandbox", "--listen", "256.0.0.1:1"])
        .assert()
        .code(2);
}
