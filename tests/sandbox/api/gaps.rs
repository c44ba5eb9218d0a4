//! Every deliberate difference between the sandbox and a real API server, pinned by a test
//! named after it (see docs/SANDBOX.md). If one of these fails, the sandbox changed: update the
//! document, or the behaviour.

use crate::common;
use crate::common::{Cluster, Transport};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

async fn cluster() -> Cluster {
    Cluster::start(Transport::InProcess).await
}

async fn raw(
    client: &kube::Client,
    method: &str,
    uri: &str,
    content_type: &str,
    accept: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("Content-Type", content_type)
        .header("Accept", accept)
        .body(body)
        .expect("request");
    match client.request_text(request).await {
        Ok(text) => (200, serde_json::from_str(&text).unwrap_or(Value::String(text))),
        Err(kube::Error::Api(status)) => (status.code, json!({"reason": status.reason})),
        Err(other) => panic!("{other}"),
    }
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
}

#[tokio::test]
async fn gap_no_schema_validation() {
    let cluster = cluster().await;
    cluster.sandbox.install_crds();
    // A CAPApplicationVersion without the required `workloads` and with an unknown field.
    let body = json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion", "metadata": {"name": "bad"},
                      "spec": {"capApplicationInstance": "a", "version": "1", "unknownField": true}});
    let (code, _) = raw(
        &cluster.client,
        "POST",
        "/apis/sme.sap.com/v1alpha1/namespaces/default/capapplicationversions?fieldValidation=Strict",
        "application/json",
        "application/json",
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 200, "accepted: no OpenAPI schema validation, no field validation");
}

#[tokio::test]
async fn gap_cel_rules_are_not_evaluated() {
    let cluster = cluster().await;
    cluster.sandbox.install_crds();
    // kube-apiserver refuses it: `spec.windowEnd` must be before the year 2200 (CEL).
    let body = json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch", "metadata": {"name": "far"},
                      "spec": {"application": "a", "windowEnd": "9999-12-31T23:59:59Z"}});
    let (code, _) = raw(
        &cluster.client,
        "POST",
        "/apis/capdeck.dev/v1alpha1/namespaces/default/rotationbatches",
        "application/json",
        "application/json",
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 200, "accepted: the sandbox evaluates no x-kubernetes-validations");
}

#[tokio::test]
async fn gap_apply_never_removes_fields_a_manager_stopped_applying() {
    let cluster = cluster().await;
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    let params = PatchParams::apply("owner").force();
    maps.patch(
        "m",
        &params,
        &Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"a": "1", "b": "2"}}),
        ),
    )
    .await
    .expect("apply");
    let second = maps
        .patch(
            "m",
            &params,
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"a": "1"}}),
            ),
        )
        .await
        .expect("apply");
    assert_eq!(second.data.and_then(|d| d.get("b").cloned()).as_deref(), Some("2"), "a real server would remove b");
}

#[tokio::test]
async fn gap_strategic_merge_knows_only_some_merge_keys() {
    let cluster = cluster().await;
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client.clone());
    let mut object = deployment("d");
    object["spec"]["template"]["spec"]["hostAliases"] = json!([{"ip": "10.0.0.1", "hostnames": ["a"]}]);
    deployments
        .create(&PostParams::default(), &serde_json::from_value(object).expect("deployment"))
        .await
        .expect("create");
    let patch = Patch::Strategic(
        json!({"spec": {"template": {"spec": {"hostAliases": [{"ip": "10.0.0.2", "hostnames": ["b"]}]}}}}),
    );
    let patched = deployments.patch("d", &PatchParams::default(), &patch).await.expect("patch");
    let aliases = patched.spec.and_then(|s| s.template.spec).and_then(|p| p.host_aliases).unwrap_or_default();
    assert_eq!(aliases.len(), 1, "a real server merges hostAliases by ip (2 entries)");
}

#[tokio::test]
async fn gap_protobuf_only_for_namespaces_secrets_configmaps_and_reviews() {
    let cluster = cluster().await;
    let (code, _) = raw(
        &cluster.client,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        "application/vnd.kubernetes.protobuf",
        "application/json",
        b"k8s\0\x0a\x00".to_vec(),
    )
    .await;
    assert_eq!(code, 415);
}

#[tokio::test]
async fn gap_no_aggregated_discovery() {
    let cluster = cluster().await;
    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let (_, document) = raw(&cluster.client, "GET", "/apis", "application/json", accept, Vec::new()).await;
    assert_eq!(document["kind"], "APIGroupList", "legacy discovery only; clients fall back");
}

#[tokio::test]
async fn gap_core_and_events_k8s_io_events_are_stored_apart() {
    let cluster = cluster().await;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::default_namespaced(cluster.client.clone());
    let event: k8s_openapi::api::events::v1::Event = serde_json::from_value(json!({"metadata": {"name": "e1"}, "eventTime": "2026-01-01T00:00:00.000000Z", "reason": "R", "action": "A", "reportingController": "c", "reportingInstance": "i", "type": "Normal"})).expect("event");
    events.create(&PostParams::default(), &event).await.expect("create");
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(cluster.client.clone());
    assert!(
        core.list(&ListParams::default()).await.expect("list").items.is_empty(),
        "a real server shows it in both APIs"
    );
}

#[tokio::test]
async fn gap_garbage_collection_is_synchronous() {
    let cluster = cluster().await;
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    let owner = maps
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("cm"))
        .await
        .expect("owner");
    let dependent = json!({"metadata": {"name": "dep", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}]}});
    maps.create(&PostParams::default(), &serde_json::from_value(dependent).expect("cm")).await.expect("dependent");
    maps.delete("owner", &DeleteParams::background()).await.expect("delete");
    assert!(maps.get("dep").await.is_err(), "gone before the delete call returned; a real GC is asynchronous");
}

#[tokio::test]
async fn gap_foreground_deletion_acts_like_background() {
    let cluster = cluster().await;
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    maps.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "fg"}})).expect("cm"))
        .await
        .expect("create");
    maps.delete("fg", &DeleteParams::foreground()).await.expect("delete");
    assert!(
        maps.get("fg").await.is_err(),
        "a real server keeps it with the foregroundDeletion finalizer until dependents are gone"
    );
}

#[tokio::test]
async fn gap_paged_lists_show_current_objects() {
    let cluster = cluster().await;
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    for name in ["a", "b"] {
        maps.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": "1"}})).expect("cm"),
        )
        .await
        .expect("create");
    }
    let first = maps.list(&ListParams::default().limit(1)).await.expect("page");
    maps.patch("b", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "2"}}))).await.expect("patch");
    let token = first.metadata.continue_.expect("token");
    let second = maps.list(&ListParams::default().limit(1).continue_token(&token)).await.expect("page");
    assert_eq!(
        second.items[0].data.as_ref().and_then(|d| d.get("v")).map(String::as_str),
        Some("2"),
        "a real server serves the page as of the first page's resourceVersion"
    );
}

#[tokio::test]
async fn gap_namespace_deletion_is_immediate() {
    let cluster = cluster().await;
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "short-lived"}})).expect("ns"),
        )
        .await
        .expect("create");
    namespaces.delete("short-lived", &DeleteParams::default()).await.expect("delete");
    assert!(
        namespaces.get("short-lived").await.is_err(),
        "a real namespace stays Terminating while its content is removed"
    );
}

#[tokio::test]
async fn gap_no_authentication_or_rbac_only_deny_rules() {
    let cluster = Cluster::start(Transport::Http).await;
    let url = cluster.served.as_ref().expect("served").url.clone();
    let mut config = kube::Config::new(url.parse().expect("url"));
    config.auth_info.token = Some("anything-at-all".to_string().into());
    let stranger = kube::Client::try_from(config).expect("client");
    let maps: Api<ConfigMap> = Api::default_namespaced(stranger);
    maps.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "x"}})).expect("cm"))
        .await
        .expect("any token may write");
}

#[tokio::test]
async fn gap_no_scale_subresource() {
    let cluster = cluster().await;
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client.clone());
    deployments
        .create(&PostParams::default(), &serde_json::from_value(deployment("s")).expect("deployment"))
        .await
        .expect("create");
    assert!(matches!(deployments.get_scale("s").await, Err(kube::Error::Api(status)) if status.code == 404));
}

#[tokio::test]
async fn gap_field_selectors_accept_any_field() {
    let cluster = cluster().await;
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "f"}, "data": {"k": "v"}})).expect("cm"),
    )
    .await
    .expect("create");
    let found = maps
        .list(&ListParams::default().fields("data.k=v"))
        .await
        .expect("a real server answers 400: field label not supported");
    assert_eq!(found.items.len(), 1);
}

#[tokio::test]
async fn gap_no_pod_template_defaulting() {
    let cluster = cluster().await;
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client.clone());
    let created = deployments
        .create(&PostParams::default(), &serde_json::from_value(deployment("plain")).expect("deployment"))
        .await
        .expect("create");
    let spec = created.spec.expect("spec");
    // What capdeck reads is defaulted as kube-apiserver does (tests/real_cluster/differential.rs
    // compares them) ...
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.progress_deadline_seconds, Some(600));
    assert_eq!(spec.strategy.and_then(|s| s.type_).as_deref(), Some("RollingUpdate"));
    // ... the pod template is not: a real server sets restartPolicy: Always, dnsPolicy, ...
    let pod = spec.template.spec.expect("pod spec");
    assert!(pod.restart_policy.is_none() && pod.dns_policy.is_none(), "a real server defaults the pod template");
}

#[tokio::test]
async fn gap_deployments_create_no_replicasets_or_pods() {
    let cluster = cluster().await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let controller = cluster.sandbox.simulate_workloads(Default::default(), cancel.clone());
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client.clone());
    deployments
        .create(&PostParams::default(), &serde_json::from_value(deployment("nopods")).expect("deployment"))
        .await
        .expect("create");
    common::eventually("status", std::time::Duration::from_secs(5), || async {
        deployments.get("nopods").await.ok().and_then(|d| d.status).is_some()
    })
    .await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::default_namespaced(cluster.client.clone());
    assert!(pods.list(&ListParams::default()).await.expect("pods").items.is_empty(), "only status is simulated");
    cancel.cancel();
    let _ = controller.await;
}

/// kube-controller-manager's garbage collector deletes a dependent whose owner (by uid) does not
/// exist; the sandbox collects only when an owner is deleted (the real-cluster stories create
/// owners first: `stories::process::credentials_report_margins_and_verdicts`).
#[tokio::test]
async fn gap_dangling_dependents_are_kept() {
    let cluster = cluster().await;
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    let orphan = json!({"metadata": {"name": "orphan", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "nobody", "uid": "00000000-0000-4000-8000-00000000dead"}]}});
    maps.create(&PostParams::default(), &serde_json::from_value(orphan).expect("cm")).await.expect("create");
    assert!(maps.get("orphan").await.is_ok(), "kept: a real garbage collector deletes it");
}

/// The simulation rolls without a surge Pod and writes no Events: the deployment controller
/// brings up `maxSurge` new Pods before it scales the old ReplicaSet down, and it, the
/// replicaset controller, kube-scheduler and the kubelets report Events in the namespace
/// (`stories::workloads::a_multi_replica_rollout_is_followed_as_it_goes` checks capdeck
/// against both).
#[tokio::test]
async fn gap_simulated_rollouts_do_not_surge_or_report_events() {
    let cluster = cluster().await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let simulation =
        capdeck::sandbox::simulate::WorkloadSimulation { pods: true, replicas_per_second: 2.0, ..Default::default() };
    let controller = cluster.sandbox.simulate_workloads(simulation, cancel.clone());
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client.clone());
    let mut four = deployment("surge");
    four["spec"]["replicas"] = json!(4);
    deployments
        .create(&PostParams::default(), &serde_json::from_value(four).expect("deployment"))
        .await
        .expect("create");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::default_namespaced(cluster.client.clone());
    common::eventually("4 Pods", std::time::Duration::from_secs(5), || async {
        pods.list(&ListParams::default()).await.map(|l| l.items.len() == 4).unwrap_or(false)
    })
    .await;
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}});
    deployments.patch("surge", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("new template");
    let mut most = 0;
    for _ in 0..30 {
        most = most.max(pods.list(&ListParams::default()).await.expect("pods").items.len());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(most, 4, "never a fifth (surge) Pod; a real rollout of 4 has up to 5");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::default_namespaced(cluster.client.clone());
    assert!(events.list(&ListParams::default()).await.expect("events").items.is_empty(), "no controller Events");
    cancel.cancel();
    let _ = controller.await;
}

#[tokio::test]
async fn gap_generation_is_tracked_for_every_kind() {
    let cluster = cluster().await;
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    let created = maps
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "g"}})).expect("cm"))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1), "a real server sets generation only for kinds with a spec");
}

#[tokio::test]
async fn gap_openapi_documents_have_no_schemas() {
    let cluster = cluster().await;
    let (_, document) =
        raw(&cluster.client, "GET", "/openapi/v3/api/v1", "application/json", "application/json", Vec::new()).await;
    assert_eq!(document["components"]["schemas"], json!({}));
}
