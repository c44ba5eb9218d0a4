//! A synthetic cluster for benchmarks: N CAP applications, each with S binding Secrets, one Ready
//! version with D Deployment workloads (each consuming every service), a Ready tenant, and
//! Deployments whose VCAP Secrets are current — plus U Secrets nobody references.

use std::sync::Arc;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};

use crate::api::{CAPApplication, CAPApplicationVersion, CAPTenant, DeploymentView};
use crate::lookup::Objects;
use crate::plan::{CapIndex, plan_all};
use crate::sandbox::Sandbox;
use crate::vcap::secret_owner_hash;

/// The size of the seed: APPS applications with DEPLOYMENTS Deployments and SERVICES binding
/// Secrets each, and UNREFERENCED Secrets nobody uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedSize {
    pub apps: usize,
    pub deployments_per_app: usize,
    pub services_per_app: usize,
    pub unreferenced_secrets: usize,
}

/// Applications per namespace (namespaces `bench-000`, `bench-001`, ...).
const APPS_PER_NAMESPACE: usize = 100;

pub fn namespace_of(app: usize) -> String {
    format!("bench-{:03}", app / APPS_PER_NAMESPACE)
}

pub fn app_name(app: usize) -> String {
    format!("app-{app:05}")
}

pub fn binding_name(app: usize, service: usize) -> String {
    format!("app-{app:05}-svc-{service}")
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn typed<K: serde::de::DeserializeOwned>(value: &Value) -> Result<Arc<K>, crate::sandbox::LoadError> {
    serde_json::from_value(value.clone())
        .map(Arc::new)
        .map_err(|error| crate::sandbox::LoadError::Rejected(error.to_string()))
}

/// The current VCAP Secrets, as the Go operator would have written them, and the Deployments
/// pointing at them: how many objects it loaded.
fn seed_current_vcap_secrets(
    sandbox: &Sandbox,
    index: &CapIndex,
    lookup: &Objects,
) -> Result<usize, crate::sandbox::LoadError> {
    let mut count = 0;
    let plan = plan_all(index, lookup);
    for planned in plan.deployments {
        let secret = format!("{}-cur01", planned.deployment);
        let hash = secret_owner_hash(&planned.namespace, &planned.version, &planned.deployment);
        sandbox.load([json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": planned.namespace, "labels": {"sme.sap.com/secret-owner-hash": hash}},
            "type": "Opaque", "data": {"VCAP_SERVICES": b64(planned.payload.expose())}})])?;
        let mut deployment = serde_json::to_value(
            &*lookup.deployments[&crate::api::ObjectKey::new(&planned.namespace, &planned.deployment)],
        )
        .map_err(|error| crate::sandbox::LoadError::Rejected(error.to_string()))?;
        // A view keeps its selector as a query, which it does not write back.
        deployment["spec"]["selector"] = json!({"matchLabels": {"app": planned.deployment}});
        deployment["apiVersion"] = json!("apps/v1");
        deployment["kind"] = json!("Deployment");
        deployment["spec"]["template"]["spec"]["containers"][0]["envFrom"] =
            json!([{"secretRef": {"name": secret, "optional": true}}]);
        deployment["status"] = json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2});
        sandbox.load([deployment])?;
        count += 2;
    }
    Ok(count)
}

/// Seed `sandbox` (CRDs included). Returns how many objects were loaded.
pub fn seed(sandbox: &Sandbox, size: SeedSize) -> Result<usize, crate::sandbox::LoadError> {
    sandbox.install_crds();
    let mut count = 0;
    let namespaces = size.apps.div_ceil(APPS_PER_NAMESPACE).max(1);
    for index in 0..namespaces {
        sandbox.load([
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("bench-{index:03}")}}),
        ])?;
        count += 1;
    }
    let mut apps = Vec::new();
    let mut versions = Vec::new();
    let mut tenants = Vec::new();
    let mut lookup = Objects::default();
    for app in 0..size.apps {
        let namespace = namespace_of(app);
        let name = app_name(app);
        let cav = format!("{name}-v1");
        let services: Vec<Value> = (0..size.services_per_app)
            .map(|service| json!({"name": format!("svc-{service}"), "class": format!("class-{}", service % 3), "secret": binding_name(app, service)}))
            .collect();
        let service_names: Vec<String> = (0..size.services_per_app).map(|service| format!("svc-{service}")).collect();
        let app_object = json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication", "metadata": {"name": name, "namespace": namespace},
            "spec": {"btpAppName": name, "providerSubaccountId": "bench", "rolloutOnCredentialUpdate": true, "btp": {"services": services}},
            "status": {"state": "Consistent"}});
        let workloads: Vec<Value> = (0..size.deployments_per_app)
            .map(|d| json!({"name": format!("w{d}"), "consumedBTPServices": service_names, "deploymentDefinition": {"type": "Additional", "image": "i"}}))
            .collect();
        // The version's uid, and the controller reference the CAP Operator gives its Deployments.
        let uid = format!("00000000-0000-4000-8000-{app:012}");
        let owners = json!([{"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion", "name": cav, "uid": uid,
                             "controller": true, "blockOwnerDeletion": true}]);
        let version = json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion", "metadata": {"name": cav, "namespace": namespace, "uid": uid},
            "spec": {"capApplicationInstance": name, "version": "1.0.0", "workloads": workloads},
            "status": {"state": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}});
        let tenant = json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenant", "metadata": {"name": format!("{name}-provider"), "namespace": namespace},
            "spec": {"capApplicationInstance": name, "subDomain": name, "tenantId": name},
            "status": {"state": "Ready", "currentCAPApplicationVersionInstance": cav, "conditions": [{"type": "Ready", "status": "True"}]}});
        for object in [&app_object, &version, &tenant] {
            sandbox.load([object.clone()])?;
            count += 1;
        }
        apps.push(typed::<CAPApplication>(&app_object)?);
        versions.push(typed::<CAPApplicationVersion>(&version)?);
        tenants.push(typed::<CAPTenant>(&tenant)?);
        for service in 0..size.services_per_app {
            let credentials = format!(
                r#"{{"clientid":"sb-{name}-{service}","clientsecret":"initial-{app}-{service}","url":"https://svc-{service}.example.com","tenantmode":"shared"}}"#
            );
            let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": binding_name(app, service), "namespace": namespace},
                "type": "Opaque", "data": {"credentials": b64(&credentials)}});
            sandbox.load([secret.clone()])?;
            count += 1;
            lookup.add_secret(Arc::unwrap_or_clone(typed::<Secret>(&secret)?));
        }
        for d in 0..size.deployments_per_app {
            let deployment = format!("{cav}-w{d}");
            let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": deployment, "namespace": namespace, "ownerReferences": owners},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": deployment}},
                         "template": {"metadata": {"labels": {"app": deployment}}, "spec": {"containers": [{"name": "main", "image": "i"}]}}}});
            lookup.add_deployment(typed::<DeploymentView>(&object)?);
        }
    }
    let index = CapIndex::new(apps, versions, tenants);
    count += seed_current_vcap_secrets(sandbox, &index, &lookup)?;
    let filler = "x".repeat(256);
    for index in 0..size.unreferenced_secrets {
        let namespace = format!("bench-{:03}", index % namespaces);
        sandbox.load([json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("unreferenced-{index:06}"), "namespace": namespace},
            "type": "Opaque", "data": {"value": b64(&filler)}})])?;
        count += 1;
    }
    // The seed is history nobody needs: watches start from here.
    sandbox.compact();
    Ok(count)
}
