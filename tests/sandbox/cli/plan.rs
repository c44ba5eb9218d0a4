//! `capdeck plan` end to end: the real binary on fixture manifests.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

const MARKER: &str = "MARKER-CREDENTIAL-7f3a";

fn capdeck() -> Command {
    Command::cargo_bin("capdeck").expect("binary builds")
}

fn plan_json(args: &[&str]) -> Value {
    let output = capdeck().arg("plan").args(args).args(["-o", "json"]).output().expect("runs");
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("stdout is one JSON object")
}

fn go_expected() -> Value {
    let text = std::fs::read_to_string("tests/fixtures/plan/go-written.expected.json").expect("fixture");
    serde_json::from_str(&text).expect("json")
}

fn deployment<'a>(plan: &'a Value, name: &str) -> &'a Value {
    plan["deployments"]
        .as_array()
        .and_then(|list| list.iter().find(|d| d["deployment"] == name))
        .unwrap_or_else(|| panic!("{name} not planned: {plan:#}"))
}

#[test]
fn secrets_written_by_the_go_operator_plan_as_unchanged() {
    let plan = plan_json(&["-f", "tests/fixtures/plan/go-written", "--show-secrets"]);
    let expected = go_expected();
    for name in ["bookshop-v1-10-0-app-router", "bookshop-v1-10-0-srv"] {
        let planned = deployment(&plan, name);
        assert_eq!(planned["action"], "Unchanged", "{planned:#}");
        // Byte-identical to Go's encoding/json output.
        assert_eq!(planned["vcapServices"], expected["current"][name]);
    }
    let stale = deployment(&plan, "bookshop-v1-9-0-app-router");
    assert_eq!(stale["action"], "Restart");
    assert_eq!(stale["currentSecret"], "bookshop-v1-9-0-app-router-go001");
    assert_ne!(stale["vcapServices"], expected["stale"]["bookshop-v1-9-0-app-router"]);
    assert_eq!(deployment(&plan, "bookshop-v1-9-0-srv")["action"], "Missing");
    assert_eq!(plan["problems"], serde_json::json!([]));
}

#[test]
fn plan_json_has_the_documented_shape() {
    let plan = plan_json(&["-f", "tests/fixtures/plan/go-written"]);
    let object = plan.as_object().expect("object");
    assert_eq!(object.keys().collect::<Vec<_>>(), vec!["deployments", "problems"]);
    let router = deployment(&plan, "bookshop-v1-10-0-app-router");
    for key in [
        "namespace",
        "application",
        "version",
        "workload",
        "deployment",
        "action",
        "currentSecret",
        "services",
        "vcapSha256",
    ] {
        assert!(router.get(key).is_some(), "missing {key}");
    }
    assert!(router.get("vcapServices").is_none(), "payload printed without --show-secrets");
    // The two xsuaa services come in CAPApplication order; srv's own list order does not matter.
    assert_eq!(router["services"], serde_json::json!(["uaa", "uaa-admin", "dest"]));
    assert_eq!(deployment(&plan, "bookshop-v1-10-0-srv")["services"], serde_json::json!(["uaa", "saas", "dest"]));
    let expected =
        go_expected()["current"]["bookshop-v1-10-0-app-router"].as_str().map(str::to_string).expect("payload");
    assert_eq!(router["vcapSha256"], capdeck::vcap::sha256_hex(expected.as_bytes()));
}

#[test]
fn no_credential_value_is_printed_without_show_secrets() {
    for format in ["json", "table"] {
        let output = capdeck()
            .args(["plan", "-f", "tests/fixtures/plan/problems", "-f", "tests/fixtures/plan/go-written", "-o", format])
            .output()
            .expect("runs");
        assert!(output.status.success());
        for stream in [&output.stdout, &output.stderr] {
            let text = String::from_utf8_lossy(stream);
            for secret in [MARKER, "s3cr", "dest-secret", "old-secret", "sb-bookshop"] {
                assert!(!text.contains(secret), "{format} output leaks {secret}:\n{text}");
            }
        }
    }
    let shown = capdeck()
        .args(["plan", "-f", "tests/fixtures/plan/problems", "--show-secrets", "-o", "json"])
        .output()
        .expect("runs");
    assert!(String::from_utf8_lossy(&shown.stdout).contains(MARKER), "--show-secrets must show the payload");
}

#[test]
fn malformed_objects_become_problems_and_the_plan_goes_on() {
    let plan = plan_json(&["-f", "tests/fixtures/plan/problems/messy.yaml"]);
    let planned: Vec<&str> =
        plan["deployments"].as_array().expect("list").iter().filter_map(|d| d["deployment"].as_str()).collect();
    assert_eq!(planned, vec!["messy-v1-good", "messy-v1-binary"]);
    let problems = plan["problems"].as_array().expect("problems");
    let find = |needle: &str| problems.iter().find(|p| p["message"].as_str().is_some_and(|m| m.contains(needle)));
    assert!(find("CAPApplication bad/nospec is malformed: missing field `spec`").is_some(), "{problems:#?}");
    assert_eq!(find("not valid base64").expect("base64")["secret"], "broken-b64-bind");
    assert_eq!(find("could not parse metadata").expect("metadata")["deployment"], "messy-v1-broken-meta");
    assert!(find("is a container but its value is not a JSON object").is_some());
    assert_eq!(find("does not exist").expect("missing")["secret"], "gone-bind");
    assert!(find("document 10 is not a Kubernetes object").is_some());
    for problem in problems {
        for key in ["namespace", "application", "deployment", "secret", "message"] {
            assert!(problem.get(key).is_some(), "problem lacks {key}: {problem}");
        }
    }
}

#[test]
fn broken_yaml_fails_naming_the_file_and_not_its_content() {
    capdeck()
        .args(["plan", "-f", "tests/fixtures/plan/broken.yaml"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("tests/fixtures/plan/broken.yaml: invalid YAML: line 5"))
        .stderr(predicate::str::contains(MARKER).not())
        .stdout("");
}

#[test]
fn binary_and_unreadable_inputs_fail_with_exit_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = dir.path().join("blob.yaml");
    std::fs::write(&binary, [0x7f, b'E', b'L', b'F', 0xff, 0x00, 0xfe]).expect("write");
    capdeck()
        .args(["plan", "-f"])
        .arg(&binary)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("blob.yaml: not UTF-8 text"));
    capdeck()
        .args(["plan", "-f", "does/not/exist.yaml"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("does/not/exist.yaml: no such file or directory"));
    let json = dir.path().join("bad.json");
    std::fs::write(&json, "{\"apiVersion\": \"v1\",").expect("write");
    capdeck()
        .args(["plan", "-f"])
        .arg(&json)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("bad.json: invalid JSON at line 1"));
}

#[test]
fn directories_are_walked_for_yaml_and_json_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("nested")).expect("mkdir");
    std::fs::copy("tests/fixtures/plan/go-written/bookshop.yaml", dir.path().join("nested/app.YML")).expect("copy");
    std::fs::write(dir.path().join("notes.txt"), "not a manifest: [").expect("write");
    std::fs::write(
        dir.path().join("list.json"),
        r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}]}"#,
    )
    .expect("write");
    let plan = plan_json(&["-f", dir.path().to_str().expect("utf8 path")]);
    assert_eq!(plan["deployments"].as_array().map(Vec::len), Some(4));
}

#[test]
fn usage_errors_exit_2() {
    capdeck().arg("plan").assert().code(2).stderr(predicate::str::contains("--filename"));
    capdeck().args(["plan", "-f", "x", "-o", "xml"]).assert().code(2);
    capdeck().arg("no-such-command").assert().code(2);
}

#[test]
fn every_subcommand_has_help() {
    capdeck()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("plan"))
        .stdout(predicate::str::contains("crds"));
    for command in ["plan", "crds"] {
        capdeck().args([command, "--help"]).assert().success().stdout(predicate::str::contains("Usage: capdeck"));
    }
}

#[test]
fn table_output_summarises() {
    capdeck()
        .args(["plan", "-f", "tests/fixtures/plan/go-written"])
        .assert()
        .success()
        .stdout(predicate::str::contains("NAMESPACE   APPLICATION   DEPLOYMENT"))
        .stdout(predicate::str::contains(
            "1 to restart, 2 unchanged, 1 missing, 0 not owned (left alone), 0 problem(s)",
        ));
}
