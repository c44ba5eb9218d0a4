//! `capdeck deps` and `capdeck tenants`: from manifests (upstream's own fixture) and live from the
//! demo sandbox over HTTP.

use crate::common;
use assert_cmd::Command;
use capdeck::sandbox::Sandbox;
use predicates::prelude::*;
use serde_json::Value;

const FIXTURE: &str = "tests/fixtures/deps/upstream.yaml";
const UPSTREAM_DEFAULT: &str = r#"[{"xsappname":"saasappname!b15"},{"xsappname":"smappname!b15"},{"appId":"destappname!b15","appName":"destination"},{"xsappname":"rtappname!b15"}]"#;

fn capdeck() -> Command {
    Command::cargo_bin("capdeck").expect("binary")
}

#[test]
fn json_is_exactly_upstreams_answer() {
    capdeck()
        .args(["deps", "-f", FIXTURE, "--app", "default/test-cap-01", "-o", "json"])
        .assert()
        .success()
        .stdout(format!("{UPSTREAM_DEFAULT}\n"));
}

#[test]
fn the_table_says_why_each_service_is_in_or_out_and_never_shows_values() {
    capdeck()
        .args(["deps", "-f", FIXTURE, "--app", "default/test-cap-01"])
        .assert()
        .success()
        .stdout(predicate::str::contains("test-html-host-bind of service test-html-host does not exist"))
        .stdout(predicate::str::contains("destappname!b15 (destination)"))
        .stdout(predicate::str::contains("out: Auto, not a special dependency"))
        .stdout(predicate::str::contains("4 dependencies in the getDependencies answer"))
        .stdout(predicate::str::contains("never-shown").not());
}

#[test]
fn bad_app_arguments_are_explained() {
    // A usage error (exit 2) when the form is wrong or -n contradicts it ...
    capdeck()
        .args(["deps", "-f", FIXTURE, "--app", "a/b/c"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not NAMESPACE/NAME"));
    capdeck()
        .args(["deps", "-f", FIXTURE, "--app", "default/test-cap-01", "-n", "other"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("but -n says"));
    // ... and NAME with -n works like NAMESPACE/NAME.
    let by_flag = capdeck()
        .args(["deps", "-f", FIXTURE, "--app", "test-cap-01", "-n", "default", "-o", "json"])
        .output()
        .expect("runs");
    let by_path =
        capdeck().args(["deps", "-f", FIXTURE, "--app", "default/test-cap-01", "-o", "json"]).output().expect("runs");
    assert!(by_flag.status.success(), "{}", String::from_utf8_lossy(&by_flag.stderr));
    assert_eq!(by_flag.stdout, by_path.stdout);
    capdeck()
        .args(["deps", "-f", FIXTURE, "--app", "default/nope"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no CAPApplication default/nope in the manifests"));
    capdeck().args(["deps", "-f", FIXTURE]).assert().code(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_deps_and_tenants_on_the_demo_cluster() {
    let sandbox = Sandbox::default();
    sandbox.load_demo().expect("demo");
    let (served, _dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sre").await;
    let run = |args: &[&str]| {
        let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .expect("runs");
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let deps: Vec<Value> =
        serde_json::from_str(&run(&["deps", "--app", "cap-shop/bookshop", "-o", "json"])).expect("json");
    assert!(deps.iter().any(|d| d["appName"] == "destination"), "{deps:?}");
    assert!(deps.iter().all(|d| d.get("xsappname").is_some() || d.get("appId").is_some()), "{deps:?}");

    let tenants = crate::common::list_items(run(&["tenants", "-A", "-o", "json"]).as_bytes());
    assert!(tenants.len() >= 20, "the demo has 20+ tenants: {}", tenants.len());
    let provisioning = tenants.iter().find(|t| t["state"] == "Provisioning").expect("a provisioning tenant");
    assert_eq!(provisioning["operation"]["type"], "provisioning");
    assert!(provisioning["currentVersion"].is_null());
    let failed = tenants.iter().find(|t| t["state"] == "ProvisioningError").expect("a failed tenant");
    assert!(failed["blocked"].is_string(), "{failed}");
    let only_hr = run(&["tenants", "-A", "--app", "hr-portal"]);
    assert!(only_hr.lines().skip(1).all(|line| line.contains("hr-portal")), "{only_hr}");
    assert!(only_hr.starts_with("NAMESPACE"), "{only_hr}");
    // NAMESPACE/NAME names the namespace; an application that is not there is an error, not "no tenants".
    let bookshop = run(&["tenants", "--app", "cap-shop/bookshop"]);
    assert!(
        bookshop.lines().skip(1).all(|line| line.contains("bookshop")) && bookshop.lines().count() > 1,
        "{bookshop}"
    );
    for (args, said) in [
        (&["tenants", "-A", "--app", "nosuch"][..], "there is no CAPApplication nosuch in all namespaces"),
        (&["tenants", "--app", "cap-shop/nosuch"], "there is no CAPApplication nosuch in namespace cap-shop"),
    ] {
        let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
    served.stop().await;
}
