//! Fixed console data at a fixed moment: the demo seed plus rotation batches and Events in the
//! states worth seeing. The console's snapshot tests and `capdeck bench console` draw it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::api::service_binding::ServiceBinding;
use crate::api::{CAPApplication, CAPApplicationVersion, CAPTenant, CAPTenantOperation, RotationBatch};
use crate::console::app::{App, Session};
use crate::console::keymap::Keymap;
use crate::console::theme::Theme;
use crate::console::user_write::{Access, WriteKind};
use crate::engine::Role;
use crate::lookup::ObjectLookup as _;
use crate::readmodel::{self, Snapshot, Sources};

/// The sample's "now": 2026-11-20 09:00:00 UTC.
pub fn now() -> Timestamp {
    Timestamp::from_second(1_795_165_200).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn at(offset_seconds: i64) -> String {
    Timestamp::from_second(now().as_second() + offset_seconds).unwrap_or(Timestamp::UNIX_EPOCH).to_string()
}

/// The objects a sample snapshot is built from; tests change them before `snapshot()`.
#[derive(Clone, Default)]
pub struct SampleObjects {
    pub apps: Vec<Arc<CAPApplication>>,
    pub versions: Vec<Arc<CAPApplicationVersion>>,
    pub tenants: Vec<Arc<CAPTenant>>,
    pub operations: Vec<Arc<CAPTenantOperation>>,
    pub batches: Vec<Arc<RotationBatch>>,
    pub events: Vec<Arc<Event>>,
    /// The Secrets (no Deployments: the sample draws no rollouts' Pods).
    pub lookup: crate::lookup::Objects,
    pub service_bindings: Vec<ServiceBinding>,
}

fn decode<K: DeserializeOwned>(value: Value) -> Result<Arc<K>, String> {
    serde_json::from_value(value).map(Arc::new).map_err(|error| error.to_string())
}

impl crate::lookup::ObjectLookup for SampleObjects {
    fn secret(&self, namespace: &str, name: &str) -> crate::lookup::SecretLookup {
        self.lookup.secret(namespace, name)
    }
    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<crate::api::DeploymentView>> {
        self.lookup.deployment(namespace, name)
    }
}

impl SampleObjects {
    /// The demo seed, four batches (awaiting approval, rolling with a stalled Deployment,
    /// collecting, succeeded) and their Events.
    pub fn demo() -> Result<Self, crate::sandbox::LoadError> {
        use crate::sandbox::LoadError;
        let mut objects = Self::default();
        for text in crate::sandbox::DEMO_SEED {
            for document in crate::manifest::parse_documents(text, false).map_err(LoadError::Parse)? {
                objects.add(document).map_err(LoadError::Rejected)?;
            }
        }
        for batch in sample_batches() {
            objects.add(batch).map_err(LoadError::Rejected)?;
        }
        for event in sample_events() {
            objects.events.push(decode(event).map_err(LoadError::Rejected)?);
        }
        for binding in sample_service_bindings() {
            objects
                .service_bindings
                .push(serde_json::from_value(binding).map_err(|e| LoadError::Rejected(e.to_string()))?);
        }
        Ok(objects)
    }

    fn add(&mut self, document: Value) -> Result<(), String> {
        match document.get("kind").and_then(Value::as_str).unwrap_or_default() {
            "CAPApplication" => self.apps.push(decode(document)?),
            "CAPApplicationVersion" => self.versions.push(decode(document)?),
            "CAPTenant" => self.tenants.push(decode(document)?),
            "CAPTenantOperation" => self.operations.push(decode(document)?),
            "RotationBatch" => self.batches.push(decode(document)?),
            "Secret" => {
                self.lookup.add_secret(Arc::unwrap_or_clone(decode::<Secret>(document)?));
            }
            _ => {}
        }
        Ok(())
    }

    /// The batch named `name`, to change before `snapshot()`.
    pub fn batch_mut(&mut self, name: &str) -> Option<&mut RotationBatch> {
        let batch = self.batches.iter_mut().find(|batch| batch.metadata.name.as_deref() == Some(name))?;
        Some(Arc::make_mut(batch))
    }

    /// Put the batch named `name` on hold by `by`, at the sample's "now".
    pub fn hold(&mut self, name: &str, by: &str, reason: Option<&str>) -> Option<()> {
        self.batch_mut(name)?.spec.hold = Some(crate::api::rotation_batch::UserAction {
            by: by.into(),
            at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()),
            reason: reason.map(str::to_string),
        });
        Some(())
    }

    /// `count` more tenants of the first application (for frame-time measurements).
    pub fn add_tenants(&mut self, count: usize) {
        let Some(template) = self.tenants.first().cloned() else { return };
        for index in 0..count {
            let mut tenant = (*template).clone();
            tenant.metadata.name = Some(format!("bulk-tenant-{index:05}"));
            tenant.spec.sub_domain = format!("bulk-{index:05}");
            tenant.spec.tenant_id = format!("bulk-id-{index:05}");
            self.tenants.push(Arc::new(tenant));
        }
    }

    /// A cluster that grows with its tenants: `count` tenants, plus one application with a version
    /// per 100 tenants and one tenant operation per 10 (copies of the first of each).
    pub fn add_proportional(&mut self, count: usize) {
        self.add_tenants(count);
        if let (Some(app), Some(version)) = (self.apps.first().cloned(), self.versions.first().cloned()) {
            for index in 0..count / 100 {
                let mut copy = (*app).clone();
                copy.metadata.name = Some(format!("bulk-app-{index:04}"));
                self.apps.push(Arc::new(copy));
                let mut copy = (*version).clone();
                copy.metadata.name = Some(format!("bulk-app-{index:04}-1-0-0"));
                copy.spec.cap_application_instance = format!("bulk-app-{index:04}");
                self.versions.push(Arc::new(copy));
            }
        }
        if let Some(operation) = self.operations.first().cloned() {
            for index in 0..count / 10 {
                let mut copy = (*operation).clone();
                copy.metadata.name = Some(format!("bulk-op-{index:05}"));
                self.operations.push(Arc::new(copy));
            }
        }
    }

    /// The subscription dependencies of application `namespace/name`, as the console's runtime
    /// works them out when its detail pane opens.
    pub fn dependencies(&self, namespace: &str, name: &str) -> Option<crate::deps::DependencyReport> {
        let app = self.apps.iter().find(|app| {
            app.metadata.namespace.as_deref() == Some(namespace) && app.metadata.name.as_deref() == Some(name)
        })?;
        Some(crate::deps::dependencies(app, self))
    }

    pub fn snapshot(&self) -> Snapshot {
        let keys = |namespace: &str, name: &str| match self.lookup.secret(namespace, name) {
            crate::lookup::SecretLookup::Found(secret) => Some(readmodel::secret_keys(&secret)),
            _ => None,
        };
        let index = crate::lookup::CapIndex::new(
            self.apps.clone(),
            self.versions.iter().cloned(),
            self.tenants.iter().cloned(),
        );
        let credentials = crate::credentials::overview(&crate::credentials::Inputs {
            applications: &self.apps,
            secrets: self,
            bindings: Some(&self.service_bindings),
            batches: &self.batches,
            index: Some(&index),
            now: now(),
            timing: crate::credentials::Timing {
                window: crate::engine::config::DEFAULT_ROLLOUT_DELAY,
                expected_rollout: crate::engine::config::DEFAULT_EXPECTED_ROLLOUT,
            },
        })
        .credentials;
        readmodel::build(Sources {
            synced: true,
            apps: &self.apps,
            versions: &self.versions,
            tenants: &self.tenants,
            operations: &self.operations,
            batches: &self.batches,
            events: &self.events,
            invalid: Vec::new(),
            secret_keys: &keys,
            service_bindings: Some(&self.service_bindings),
            credentials,
        })
    }
}

fn batch(name: &str, namespace: &str, application: &str, window_end: i64, spec: Value, status: Value) -> Value {
    let mut object = json!({
        "apiVersion": "capdeck.dev/v1alpha1",
        "kind": "RotationBatch",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                     "resourceVersion": "1", "creationTimestamp": at(window_end - 30)},
        "spec": {"application": application, "windowEnd": at(window_end)},
        "status": status,
    });
    if let (Some(target), Some(extra)) = (object["spec"].as_object_mut(), spec.as_object()) {
        target.extend(extra.clone());
    }
    // As the engine writes every status: with its state for `kubectl get rb`.
    let batch = serde_json::from_value::<RotationBatch>(object.clone()).ok();
    let state = batch.and_then(|batch| {
        let window_end = batch.spec.window_end.0;
        batch.status.map(|status| crate::api::rotation_batch::state::written_state(window_end, &status))
    });
    if let (Some(status), Some(state)) = (object["status"].as_object_mut(), state) {
        status.insert("state".into(), Value::String(state));
    }
    object
}

fn secret(name: &str, service: &str, rotated: i64) -> Value {
    json!({"name": name, "service": service, "rotatedAt": at(rotated), "dataHash": "sha256:0123"})
}

fn ready(status: &str, reason: &str, message: &str) -> Value {
    json!([{"type": "Ready", "status": status, "reason": reason, "message": message, "lastTransitionTime": at(-10)}])
}

/// hr-portal's uaa binding rotated 43 s ago; its old copy keeps the old credentials for 4 h.
fn sample_service_bindings() -> Vec<Value> {
    let binding = |name: &str, created: i64, labels: Value| {
        json!({"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
               "metadata": {"name": name, "namespace": "cap-hr", "creationTimestamp": at(created), "labels": labels},
               "spec": {"secretName": name, "serviceInstanceName": "hr-portal-uaa",
                        "credentialsRotationPolicy": {"enabled": true, "rotationFrequency": "168h", "rotatedBindingTTL": "4h"}},
               "status": {"lastCredentialsRotationTime": at(-43)}})
    };
    vec![
        binding("hr-portal-uaa-bind", -90 * 86_400, json!({})),
        binding(
            "hr-portal-uaa-bind-k3x9q",
            -43,
            json!({"services.cloud.sap.com/rotationOf": "hr-portal-uaa-bind", "services.cloud.sap.com/stale": "old-id"}),
        ),
    ]
}

/// The sample's RotationBatches as API documents.
pub fn sample_batches() -> Vec<Value> {
    vec![
        batch(
            "hr-portal-c9dsg",
            "cap-hr",
            "hr-portal",
            -13,
            json!({"secrets": [secret("hr-portal-uaa-bind", "uaa", -43)], "approval": {"required": true}}),
            json!({"phase": "AwaitingApproval", "tenants": 4, "progress": "0/2",
                   "deployments": [
                       {"name": "hr-portal-2-3-0-router", "version": "hr-portal-2-3-0", "workload": "router", "action": "Restart", "state": "Queued"},
                       {"name": "hr-portal-2-3-0-srv", "version": "hr-portal-2-3-0", "workload": "srv", "action": "Restart", "state": "Queued"}],
                   "conditions": ready("False", "AwaitingApproval", "2 Deployments to restart, 4 tenants served; waiting for an approval")}),
        ),
        batch(
            "travel-tdv6j",
            "cap-shop",
            "travel",
            -120,
            json!({"secrets": [secret("travel-uaa-bind", "uaa", -150), secret("travel-db-bind", "db", -140)]}),
            json!({"phase": "RollingOut", "tenants": 4, "progress": "0/1", "rolloutStartedAt": at(-119),
                   "deployments": [
                       {"name": "travel-1-2-0-srv", "version": "travel-1-2-0", "workload": "srv", "action": "Restart", "state": "Stalled",
                        "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1,
                        "message": "ProgressDeadlineExceeded: ReplicaSet travel-1-2-0-srv-7d9 has timed out progressing"},
                       {"name": "travel-1-2-0-worker", "version": "travel-1-2-0", "workload": "worker", "action": "Unchanged", "state": "Complete",
                        "message": "VCAP_SERVICES unchanged"}],
                   "conditions": ready("False", "ProgressDeadlineExceeded", "1 Deployment stalled")}),
        ),
        batch(
            "bookshop-4hx2p",
            "cap-shop",
            "bookshop",
            25,
            json!({"secrets": [secret("bookshop-uaa-bind", "uaa", -5)]}),
            json!({"phase": "Collecting", "conditions": ready("False", "WindowOpen", "collecting rotations until the window ends")}),
        ),
        batch(
            "bookshop-9v9ps",
            "cap-shop",
            "bookshop",
            -3600,
            json!({"secrets": [secret("bookshop-dest-bind", "destination", -3630)]}),
            json!({"phase": "Succeeded", "tenants": 12, "progress": "2/2", "completedAt": at(-3500),
                   "deployments": [
                       {"name": "bookshop-1-10-0-srv", "version": "bookshop-1-10-0", "workload": "srv", "action": "Restart", "state": "Complete",
                        "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3, "message": "rolled out"},
                       {"name": "bookshop-1-10-0-app-router", "version": "bookshop-1-10-0", "workload": "app-router", "action": "Restart", "state": "Complete",
                        "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2, "message": "rolled out"}],
                   "conditions": ready("True", "RolloutComplete", "2 Deployments rolled out with the new credentials")}),
        ),
    ]
}

fn event(
    name: &str,
    namespace: &str,
    application: &str,
    offset: i64,
    warning: bool,
    reason: &str,
    note: &str,
) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")},
        "eventTime": at(offset).replace('Z', ".000000Z"),
        "type": if warning { "Warning" } else { "Normal" },
        "reason": reason, "note": note, "action": reason,
        "reportingController": "capdeck.dev/engine", "reportingInstance": "capdeck-0",
        "regarding": {"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication", "namespace": namespace, "name": application},
    })
}

fn sample_events() -> Vec<Value> {
    vec![
        event(
            "e1",
            "cap-hr",
            "hr-portal",
            -13,
            false,
            "AwaitingApproval",
            "batch hr-portal-c9dsg: 2 Deployments to restart, 4 tenants served; waiting for an approval",
        ),
        event(
            "e2",
            "cap-shop",
            "travel",
            -20,
            true,
            "ProgressDeadlineExceeded",
            "batch travel-tdv6j: travel-1-2-0-srv stalled",
        ),
        event("e3", "cap-shop", "travel", -119, false, "RollingOut", "batch travel-tdv6j: window ended; rolling out"),
        event(
            "e4",
            "cap-shop",
            "bookshop",
            -5,
            false,
            "WindowOpen",
            "batch bookshop-4hx2p: bookshop-uaa-bind rotated; window ends in 30s",
        ),
        event(
            "e5",
            "cap-shop",
            "bookshop",
            -3500,
            false,
            "RolloutComplete",
            "batch bookshop-9v9ps: 2 Deployments rolled out with the new credentials",
        ),
    ]
}

/// An App over `snapshot` at the sample's moment: alice, allowed to write (batches and freezes) in
/// both namespaces, the engine leading, connected, on a 160×40 terminal.
pub fn app(snapshot: Snapshot) -> App {
    let session = Session {
        server: "https://api.prod-eu10.example.com".into(),
        context: "prod-eu10".into(),
        scope: "all namespaces".into(),
        user: Some("alice".into()),
        readonly: false,
        demo_kubeconfig: None,
        log_dir: None,
    };
    let names = crate::console::theme::BUILTIN.iter().map(|(name, _)| (*name).to_string()).collect();
    let mut app = App::new(session, Theme::default(), names, Keymap::default(), now());
    app.role = Role::Leader;
    for namespace in ["cap-hr", "cap-shop"] {
        for kind in WriteKind::ALL {
            app.access.set(kind, namespace, Access::Allowed);
        }
    }
    let _ = crate::console::update::update(&mut app, crate::console::update::Msg::Resize { width: 160, height: 40 });
    let _ = crate::console::update::update(&mut app, crate::console::update::Msg::Snapshot(Arc::new(snapshot)));
    app
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The awaiting hr-portal batch rolls a Secret whose old binding keeps the old credentials 4 h
    /// from its creation 43 s ago: the row (the detail pane, the approve dialog) says until when.
    #[test]
    fn an_open_batch_knows_when_its_old_credentials_die() {
        let snapshot = SampleObjects::demo().expect("sample").snapshot();
        let row = |name: &str| snapshot.batches.iter().find(|row| row.name == name).expect("batch");
        let expected = Timestamp::from_second(now().as_second() - 43 + 4 * 3600).expect("time");
        assert_eq!(row("hr-portal-c9dsg").old_credentials_revocable, Some(expected));
        assert_eq!(row("bookshop-9v9ps").old_credentials_revocable, None, "no binding for bookshop's Secrets");
    }
}
