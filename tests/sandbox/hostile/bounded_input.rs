//! Bounded input (issue 32 §6): reasons are capped and NULs refused by the CLI and by the API
//! (the CRD schema, which the sandbox enforces like kube-apiserver), and what the engine copies
//! from a spec into status, logs and tables is bounded even for objects older than the limit.

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use capdeck::api::BatchPhase;
use capdeck::api::common::MAX_REASON;
use capdeck::engine::Role;
use serde_json::{Value, json};

use crate::common;
use crate::common::fixtures::{AppOptions, NS, RunningEngine, current_sandbox, test_config};
use crate::common::story_world::StoryWorld as _;

fn batch(name: &str, reason: &str) -> Value {
    json!({
        "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
        // Written by `capdeck hold` (its field manager owns spec.hold), as the engine requires.
        "metadata": {"name": name, "namespace": NS, "labels": {"capdeck.dev/application": "bookshop"},
                     "managedFields": [{"manager": capdeck::actions::FIELD_MANAGER, "operation": "Update",
                                        "apiVersion": "capdeck.dev/v1alpha1", "time": "2026-01-01T00:00:00Z",
                                        "fieldsType": "FieldsV1",
                                        "fieldsV1": {"f:spec": {"f:hold": {".": {}, "f:by": {}, "f:at": {}, "f:reason": {}}}}}]},
        "spec": {"application": "bookshop", "windowEnd": "2026-01-01T00:00:00Z",
                 "hold": {"by": "alice", "at": "2026-01-01T00:00:00Z", "reason": reason}},
    })
}

fn capdeck(kubeconfig: &Path, args: Vec<String>) -> std::process::Output {
    let mut command = Command::cargo_bin("capdeck").expect("bin");
    command.env("KUBECONFIG", kubeconfig).args(args).output().expect("runs")
}

/// `hold --reason` over the limit or with a NUL: exit 2, the limit named, nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_refuses_an_overlong_or_nul_reason() {
    let sandbox = capdeck::sandbox::Sandbox::default();
    sandbox.install_crds();
    sandbox.load([json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})]).expect("ns");
    let (_served, _dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    for (reason, expected) in [
        ("x".repeat(MAX_REASON + 1), "at most 1024 characters (this one has 1025)".to_string()),
        ("freeze\u{0}now".to_string(), "U+0000".to_string()),
    ] {
        let kubeconfig = kubeconfig.clone();
        let args: Vec<String> =
            ["hold", "-n", NS, "bookshop-x", "--reason", &reason].iter().map(|s| s.to_string()).collect();
        // A NUL cannot be an argv element: it is passed the way a shell cannot, so check the parser.
        if reason.contains('\0') {
            let error = capdeck::api::common::check_reason(&reason).expect_err("NUL refused");
            assert!(error.contains(&expected), "{error}");
            continue;
        }
        let output = tokio::task::spawn_blocking(move || capdeck(&kubeconfig, args)).await.expect("join");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&expected), "{stderr}");
    }
    assert!(sandbox.list("capdeck.dev", "rotationbatches").is_empty());
}

/// A kubectl-style merge patch with a 1 MB reason, or a NUL, is refused with kube-apiserver's 422.
#[tokio::test]
async fn the_sandbox_api_refuses_what_the_crd_schema_refuses() {
    let sandbox = current_sandbox(&AppOptions::default());
    sandbox.load([batch("bookshop-ok", "freeze")]).expect("batch");
    let api: kube::Api<capdeck::api::RotationBatch> = kube::Api::namespaced(sandbox.client(), NS);
    let patch =
        |reason: String| json!({"spec": {"hold": {"by": "alice", "at": "2026-01-01T00:00:00Z", "reason": reason}}});
    let params = kube::api::PatchParams::default();
    for (reason, expected) in [
        (
            "x".repeat(1 << 20),
            // As kube-apiserver says it: the CRD's CEL rules were not evaluated on a value too long.
            "RotationBatch.capdeck.dev \"bookshop-ok\" is invalid: [spec.hold.reason: Too long: may not be more than 1024 \
             bytes, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; \
             correct the existing errors to complete validation]"
                .to_string(),
        ),
        (
            "a\u{0}b".into(),
            "RotationBatch.capdeck.dev \"bookshop-ok\" is invalid: spec.hold.reason: Invalid value: \"a\\x00b\": \
             spec.hold.reason in body should match '^[^\\x00]*$'"
                .to_string(),
        ),
    ] {
        match api.patch("bookshop-ok", &params, &kube::api::Patch::Merge(&patch(reason))).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422);
                assert_eq!(status.message, expected);
            }
            other => panic!("not refused: {other:?}"),
        }
    }
    // Creating one is refused the same way; one at the limit (in characters) is accepted.
    let created = api
        .create(&Default::default(), &serde_json::from_value(batch("bookshop-long", &"y".repeat(1 << 20))).expect("rb"))
        .await;
    assert!(matches!(created, Err(kube::Error::Api(ref s)) if s.code == 422), "{created:?}");
    api.patch("bookshop-ok", &params, &kube::api::Patch::Merge(&patch("é".repeat(MAX_REASON))))
        .await
        .expect("a reason of exactly the limit");
}

/// A batch stored before the limit existed (loaded past the API) still holds 1 MB with a NUL:
/// the engine's condition message and `batches -o wide` are bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_batch_with_a_huge_reason_is_bounded_in_status_and_tables() {
    let sandbox = current_sandbox(&AppOptions::default());
    let huge = format!("freeze\u{0}{}", "z".repeat(1 << 20));
    sandbox.load([batch("bookshop-old", &huge)]).expect("loaded past the API");
    let engine = RunningEngine::start(sandbox.client(), test_config("engine-a")).await;
    engine.wait_for_role(Role::Leader).await;
    sandbox.wait_phase("bookshop", BatchPhase::Held, Duration::from_secs(30)).await;
    let status = sandbox.batches("bookshop").await.pop().and_then(|b| b.status).expect("status");
    let message = status.conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.message.clone()).expect("Ready");
    assert!(message.chars().count() <= MAX_REASON + 257, "{} characters", message.chars().count());
    assert!(message.starts_with("held by alice: freeze\u{FFFD}zzz") && message.ends_with('…'), "{message:.80}");
    engine.stop().await;

    let (_served, _dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let args = ["batches", "-n", NS, "-o", "wide"].iter().map(|s| s.to_string()).collect();
    let output = tokio::task::spawn_blocking(move || capdeck(&kubeconfig, args)).await.expect("join");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.stdout.len() < 8 * 1024, "{} bytes of table", output.stdout.len());
    assert!(!output.stdout.contains(&0), "no NUL in the table");
}
