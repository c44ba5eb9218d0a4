//! Bounded input (issue 32 §6): the API server refuses an overlong or NUL-bearing reason (the
//! CRD schema's `maxLength` and `pattern`), the sandbox the same way, and a reason at the limit
//! is accepted whole.

use capdeck::api::RotationBatch;
use capdeck::api::common::MAX_REASON;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::world::{Backend, World};

async fn refusal(api: &Api<RotationBatch>, reason: &str) -> kube::core::Status {
    let patch = json!({"spec": {"hold": {"by": "alice", "at": "2026-11-23T10:00:00Z", "reason": reason}}});
    match api.patch("bookshop-bounded", &PatchParams::default(), &Patch::Merge(&patch)).await {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("a {}-character reason was not refused: {other:?}", reason.chars().count()),
    }
}

/// A raw merge patch (what `kubectl patch` sends) with a reason over the limit or with a NUL is
/// refused with 422 on both backends; one of exactly the limit (in characters) is accepted.
pub async fn overlong_and_nul_reasons_are_refused_by_the_api(backend: Backend) {
    let w = World::new(backend, "bounded-input").await;
    let api: Api<RotationBatch> = Api::namespaced(w.client.clone(), &w.ns);
    let batch: RotationBatch = serde_json::from_value(json!({
        "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
        "metadata": {"name": "bookshop-bounded"},
        "spec": {"application": "bookshop", "windowEnd": "2026-11-23T10:00:00Z"},
    }))
    .expect("a batch");
    api.create(&PostParams::default(), &batch).await.expect("create the batch");

    let long = refusal(&api, &"x".repeat(MAX_REASON + 1)).await;
    eprintln!("[{}] too long: {} {}", backend.label(), long.code, long.message);
    assert_eq!(long.code, 422, "{long:?}");
    assert_eq!(
        long.message,
        "RotationBatch.capdeck.dev \"bookshop-bounded\" is invalid: [spec.hold.reason: Too long: may not be more than 1024 \
         bytes, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; \
         correct the existing errors to complete validation]"
    );

    let nul = refusal(&api, "freeze\u{0}now").await;
    eprintln!("[{}] NUL: {} {}", backend.label(), nul.code, nul.message);
    assert_eq!(nul.code, 422, "{nul:?}");
    assert_eq!(
        nul.message,
        "RotationBatch.capdeck.dev \"bookshop-bounded\" is invalid: spec.hold.reason: Invalid value: \"freeze\\x00now\": \
         spec.hold.reason in body should match '^[^\\x00]*$'"
    );

    // The limit counts characters, not bytes: 1024 two-byte characters are accepted.
    let at_limit = "é".repeat(MAX_REASON);
    let patch = json!({"spec": {"hold": {"by": "alice", "at": "2026-11-23T10:00:00Z", "reason": at_limit}}});
    let held = api
        .patch("bookshop-bounded", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("a reason of exactly the limit is accepted");
    assert_eq!(held.spec.hold.and_then(|hold| hold.reason), Some(at_limit));
}
