//! The CRDs: checked-in YAML equals what the Rust types generate, and they carry upstream's
//! names, printer columns and subresources.
//! Regenerate after changing a type: `CAPDECK_UPDATE_ASSETS=1 cargo test --test crds`.

use assert_cmd::Command;
use capdeck::api::crds;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

fn by_plural(plural: &str) -> CustomResourceDefinition {
    crds::all().into_iter().find(|crd| crd.spec.names.plural == plural).expect("crd exists")
}

fn columns(crd: &CustomResourceDefinition) -> Vec<(String, String)> {
    crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|column| (column.name.clone(), column.json_path.clone()))
        .collect()
}

#[test]
fn checked_in_crds_match_the_rust_types() {
    let update = std::env::var_os("CAPDECK_UPDATE_ASSETS").is_some();
    let mut drift = Vec::new();
    for crd in crds::all() {
        let path = format!("assets/crds/{}", crds::file_name(&crd));
        let generated = crds::to_yaml(&crd).expect("serialises");
        if update {
            std::fs::write(&path, &generated).expect("write asset");
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(generated.as_str()) {
            drift.push(path);
        }
    }
    assert!(
        drift.is_empty(),
        "CRDs drifted from crates/core/src/api (run CAPDECK_UPDATE_ASSETS=1 cargo test --test sandbox checked_in_crds): {drift:?}"
    );
    let files = std::fs::read_dir("assets/crds").expect("dir").count();
    assert_eq!(files, crds::all().len(), "stale files in assets/crds");
}

#[test]
fn names_and_short_names_follow_upstream() {
    let expected = [
        ("capapplications", "CAPApplication", "ca", "Namespaced"),
        ("capapplicationversions", "CAPApplicationVersion", "cav", "Namespaced"),
        ("captenants", "CAPTenant", "cat", "Namespaced"),
        ("captenantoperations", "CAPTenantOperation", "ctop", "Namespaced"),
        ("captenantoutputs", "CAPTenantOutput", "ctout", "Namespaced"),
        ("domains", "Domain", "dom", "Namespaced"),
        ("clusterdomains", "ClusterDomain", "cdom", "Cluster"),
        ("rotationbatches", "RotationBatch", "rb", "Namespaced"),
    ];
    for (plural, kind, short, scope) in expected {
        let crd = by_plural(plural);
        assert_eq!(crd.spec.names.kind, kind);
        assert_eq!(crd.spec.names.short_names, Some(vec![short.to_string()]), "{plural}");
        assert_eq!(crd.spec.scope, scope, "{plural}");
        assert_eq!(crd.spec.versions.len(), 1);
        assert!(crd.spec.versions[0].served && crd.spec.versions[0].storage);
    }
}

#[test]
fn printer_columns_follow_upstream() {
    let col = |name: &str, path: &str| (name.to_string(), path.to_string());
    let age = col("Age", ".metadata.creationTimestamp");
    assert_eq!(columns(&by_plural("capapplications")), vec![age.clone(), col("State", ".status.state")]);
    assert_eq!(
        columns(&by_plural("capapplicationversions")),
        vec![age.clone(), col("State", ".status.state"), col("Version", ".spec.version")]
    );
    assert_eq!(
        columns(&by_plural("captenants")),
        vec![
            age.clone(),
            col("State", ".status.state"),
            col("Subdomain", ".spec.subDomain"),
            col("Current Version", ".status.currentCAPApplicationVersionInstance")
        ]
    );
    assert_eq!(
        columns(&by_plural("captenantoperations")),
        vec![col("Operation", ".spec.operation"), age.clone(), col("State", ".status.state")]
    );
    assert_eq!(columns(&by_plural("captenantoutputs")), vec![age.clone()]);
    // capdeck's own: STATE is what every capdeck surface says (`status.state`); PHASE under -o wide.
    let batch = columns(&by_plural("rotationbatches"));
    let names: Vec<&str> = batch.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, vec!["Application", "State", "Window End", "Deployments", "Age", "Phase"]);
    assert_eq!(batch[1], col("State", ".status.state"));
}

#[test]
fn status_subresource_everywhere_but_captenantoutput() {
    for crd in crds::all() {
        let has_status = crd.spec.versions[0].subresources.as_ref().and_then(|s| s.status.as_ref()).is_some();
        assert_eq!(has_status, crd.spec.names.plural != "captenantoutputs", "{}", crd.spec.names.plural);
    }
}

#[test]
fn schemas_keep_upstream_enums_and_required_fields() {
    let crd = serde_json::to_value(by_plural("captenants")).expect("json");
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    assert_eq!(
        schema["status"]["properties"]["state"]["enum"],
        serde_json::json!(["", "Ready", "Provisioning", "Upgrading", "Deleting", "ProvisioningError", "UpgradeError"])
    );
    let required = schema["spec"]["required"].as_array().expect("required");
    for field in ["capApplicationInstance", "subDomain", "tenantId"] {
        assert!(required.contains(&serde_json::json!(field)), "{field}");
    }
    let cav = serde_json::to_value(by_plural("capapplicationversions")).expect("json");
    let workload = &cav["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["workloads"]
        ["items"];
    assert!(workload["properties"]["consumedBTPServices"].is_object());
    assert_eq!(workload["properties"]["deploymentDefinition"]["properties"]["type"]["enum"][0], "CAP");
}

#[test]
fn capdeck_crds_prints_every_definition() {
    let output = Command::cargo_bin("capdeck").expect("bin").arg("crds").output().expect("runs");
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).expect("utf8");
    let documents: Vec<CustomResourceDefinition> = serde_saphyr::from_multiple(&text).expect("valid YAML");
    assert_eq!(documents, crds::all());
    let output = Command::cargo_bin("capdeck").expect("bin").args(["crds", "-o", "json"]).output().expect("runs");
    let list: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(crds::all().len()));
    // Beside the CAP Operator only capdeck's own are applied; the two sets make the whole.
    let only = |set: &str| -> Vec<CustomResourceDefinition> {
        let output = Command::cargo_bin("capdeck").expect("bin").args(["crds", "--only", set]).output().expect("runs");
        assert!(output.status.success(), "{output:?}");
        serde_saphyr::from_multiple(&String::from_utf8(output.stdout).expect("utf8")).expect("valid YAML")
    };
    let (ours, theirs) = (only("capdeck"), only("cap-operator"));
    let names = |crds: &[CustomResourceDefinition]| -> Vec<String> {
        crds.iter().filter_map(|crd| crd.metadata.name.clone()).collect()
    };
    assert_eq!(names(&ours), ["rotationbatches.capdeck.dev", "freezes.capdeck.dev"]);
    assert!(theirs.iter().all(|crd| crd.spec.group == "sme.sap.com") && theirs.len() == 7, "{:?}", names(&theirs));
    assert_eq!([theirs, ours].concat(), crds::all());
    let refused = Command::cargo_bin("capdeck").expect("bin").args(["crds", "--only", "istio"]).output().expect("runs");
    assert_eq!(refused.status.code(), Some(2), "an unknown set is a usage error");
}
