//! Property-based fuzzing of what reads outside input (docs/RELIABILITY.md): the VCAP builder
//! (binding Secret data → entry → payload), the manifest loader (`capdeck plan -f`) followed by
//! the planner, and the RotationBatch decoder followed by what the CLI and console print of a
//! batch. None may panic; what they produce must be valid. (The Go JSON encoder has its own
//! properties in gojson_props.rs.)

use std::collections::BTreeMap;

use capdeck::api::{RotationBatch, ServiceInfo};
use capdeck::plan::{CapIndex, plan_all};
use capdeck::vcap::{VcapPayload, build_entry};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Arbitrary JSON, biased to the shapes the decoders expect.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        "\\PC{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("Collecting"),
            Just("RollingOut"),
            Just("Restart"),
            Just("2026-11-22T09:00:00Z"),
            Just("not-a-time"),
            Just("")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![
                    "\\PC{0,6}",
                    Just("name".to_string()),
                    Just("state".to_string()),
                    Just("phase".to_string()),
                    Just("approved".to_string()),
                    Just("required".to_string()),
                    Just("by".to_string()),
                    Just("at".to_string()),
                    Just("deployments".to_string()),
                    Just("secrets".to_string()),
                ],
                inner,
                0..6
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Secret data: `.metadata` (well-formed or not), `credentials`, or flat keys; values as bytes.
fn secret_data() -> impl Strategy<Value = BTreeMap<String, Vec<u8>>> {
    let property = (
        prop_oneof![Just("a".to_string()), Just("b".to_string()), Just("credentials".to_string()), "\\PC{0,5}"],
        prop_oneof![Just("text"), Just("json"), Just("xml"), Just("")],
        any::<bool>(),
    )
        .prop_map(|(name, format, container)| json!({"name": name, "format": format, "container": container}));
    let metadata = prop_oneof![
        (proptest::collection::vec(property.clone(), 0..4), proptest::collection::vec(property, 0..4)).prop_map(
            |(credentials, meta)| {
                json!({"credentialProperties": credentials, "metaDataProperties": meta}).to_string().into_bytes()
            }
        ),
        json_value().prop_map(|value| value.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..24),
    ];
    let value = prop_oneof![
        json_value().prop_map(|value| value.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..24),
        "\\PC{0,16}".prop_map(String::into_bytes),
    ];
    (
        proptest::option::of(metadata),
        proptest::collection::btree_map(
            prop_oneof![Just("a".to_string()), Just("b".to_string()), Just("credentials".to_string()), "\\PC{0,5}"],
            value,
            0..5,
        ),
    )
        .prop_map(|(metadata, mut data)| {
            if let Some(metadata) = metadata {
                data.insert(".metadata".into(), metadata);
            }
            data
        })
}

/// Manifest text: lines drawn from Kubernetes-manifest fragments, so the loader gets past YAML
/// parsing into object decoding and planning, mixed with arbitrary text.
fn manifest_text() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just("---"),
        Just("apiVersion: sme.sap.com/v1alpha1"),
        Just("apiVersion: v1"),
        Just("apiVersion: apps/v1"),
        Just("kind: CAPApplication"),
        Just("kind: CAPApplicationVersion"),
        Just("kind: CAPTenant"),
        Just("kind: RotationBatch"),
        Just("kind: Secret"),
        Just("kind: Deployment"),
        Just("metadata:"),
        Just("  name: a"),
        Just("  namespace: n"),
        Just("spec:"),
        Just("  capApplicationInstance: a"),
        Just("  version: 1.0.0"),
        Just("  rolloutOnCredentialUpdate: true"),
        Just("  btp: {services: [{name: s, class: c, secret: b}]}"),
        Just("  workloads: [{name: w, consumedBTPServices: [s], deploymentDefinition: {type: CAP, image: i}}]"),
        Just("status: {state: Ready, conditions: [{type: Ready, status: 'True'}]}"),
        Just("data: {credentials: e30=}"),
        Just("data: {credentials: '!!notbase64'}"),
        Just("  - x"),
        Just("\t: :"),
        Just("[1, 2"),
    ]
    .prop_map(str::to_string);
    prop_oneof![
        4 => proptest::collection::vec(prop_oneof![4 => line, 1 => "\\PC{0,20}"], 0..30).prop_map(|lines| lines.join("\n")),
        1 => "\\PC{0,200}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn vcap_builder_never_panics_and_writes_valid_json(data in secret_data(), class in "[a-z]{1,8}") {
        let service = ServiceInfo { name: "svc".into(), secret: "svc-bind".into(), class: class.clone(), subscription_dependency: None };
        match build_entry(&service, &data) {
            Ok(entry) => {
                let payload = VcapPayload::assemble([(class.as_str(), entry)]);
                let parsed: Value = serde_json::from_slice(payload.as_bytes()).expect("valid JSON");
                prop_assert!(parsed.get(&class).and_then(Value::as_array).is_some_and(|list| list.len() == 1));
                prop_assert_eq!(payload.sha256().len(), 64);
            }
            Err(error) => {
                // The message names the Secret and never quotes a value longer than a key.
                let message = error.to_string();
                prop_assert!(message.contains("svc-bind"), "{}", message);
            }
        }
    }

    /// A number past float64 (a PIN, a key, any credential of digits) fails the Secret like Go,
    /// and the error names the key and the problem, never the value.
    #[test]
    fn an_error_about_a_binding_secret_never_quotes_its_value(
        digits in 310usize..420,
        key in "[a-z]{1,8}",
        layout in 0u8..3,
        first in 1u8..10,
    ) {
        let number = format!("{first}{}", "7".repeat(digits));
        let object = format!(r#"{{"{key}":{number},"url":"https://x"}}"#);
        let data: BTreeMap<String, Vec<u8>> = match layout {
            0 => [("credentials".to_string(), object.into_bytes())].into(),
            1 => [
                (".metadata".to_string(), br#"{"credentialProperties":[{"name":"uaa","format":"json","container":true}]}"#.to_vec()),
                ("uaa".to_string(), object.into_bytes()),
            ]
            .into(),
            _ => [(key.clone(), number.clone().into_bytes())].into(),
        };
        let service = ServiceInfo { name: "svc".into(), secret: "svc-bind".into(), class: "xsuaa".into(), subscription_dependency: None };
        if let Err(error) = build_entry(&service, &data) {
            let message = error.to_string();
            prop_assert!(!message.contains(&"7".repeat(20)), "{}", message);
            prop_assert!(message.contains("svc-bind"), "{}", message);
        }
    }

    #[test]
    fn manifest_loader_and_planner_never_panic(text in manifest_text(), json_file in any::<bool>()) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(if json_file { "input.json" } else { "input.yaml" });
        std::fs::write(&path, &text).expect("write");
        match capdeck::manifest::load(std::slice::from_ref(&path)) {
            Ok(manifests) => {
                let index = CapIndex::new(
                    manifests.applications.clone(),
                    manifests.versions.clone(),
                    manifests.tenants.clone(),
                );
                let plan = plan_all(&index, &manifests);
                for planned in &plan.deployments {
                    prop_assert!(serde_json::from_str::<Value>(planned.payload.expose()).is_ok());
                }
            }
            Err(error) => {
                let message = error.to_string();
                prop_assert!(message.contains("input."), "the error names the file: {}", message);
            }
        }
    }

    #[test]
    fn rotation_batch_decoder_never_panics_and_round_trips(
        fields in proptest::collection::btree_map(
            prop_oneof![Just("secrets"), Just("approval"), Just("force"), Just("hold"), Just("cancel"), Just("extra")],
            json_value(),
            0..4,
        ),
        window_end in prop_oneof![Just(json!("2026-11-22T09:00:00Z")), json_value()],
        status in proptest::collection::btree_map(
            prop_oneof![Just("phase"), Just("deployments"), Just("conditions"), Just("rolloutStartedAt"), Just("x")],
            json_value(),
            0..4,
        ),
        phase in prop_oneof![Just(json!("Succeeded")), Just(json!("Weird")), json_value()],
    ) {
        let mut spec = json!({"application": "a", "windowEnd": window_end});
        for (key, value) in fields {
            spec[key] = value;
        }
        let mut status: serde_json::Map<String, Value> = status.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        status.insert("phase".into(), phase);
        let document = json!({
            "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
            "metadata": {"name": "b", "namespace": "n"},
            "spec": spec, "status": status,
        });
        if let Ok(batch) = serde_json::from_value::<RotationBatch>(document) {
            // What `capdeck batches` and the console print of it.
            let _ = (batch.phase(), batch.approval_text(), batch.progress_text());
            let again: RotationBatch =
                serde_json::from_value(serde_json::to_value(&batch).expect("serialises")).expect("decodes again");
            prop_assert_eq!(again, batch);
        }
    }

    /// The plain, valid batch decodes (so the property above is not vacuous).
    #[test]
    fn a_minimal_batch_decodes(application in "[a-z]{1,8}") {
        let document = json!({
            "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
            "metadata": {"name": "b", "namespace": "n"},
            "spec": {"application": application, "secrets": [], "windowEnd": "2026-11-22T09:00:00Z"},
        });
        prop_assert!(serde_json::from_value::<RotationBatch>(document).is_ok());
    }
}
