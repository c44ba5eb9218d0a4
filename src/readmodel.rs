//! What the console shows, computed from the stores once per change (never while drawing):
//! one row type per view, each holding its object for the detail and YAML views, in a file named
//! like the view that draws it (`readmodel/tenants.rs` beside `console/views/tenants.rs`). Here:
//! the snapshot, its sources and the index the rows share. `pods` reads a Deployment's
//! ReplicaSets and Pods on demand (the drill-down from a rollout row).

mod applications;
mod batches;
mod events;
mod operations;
pub mod pods;
mod rollouts;
mod tenants;
mod versions;
mod windows;

pub use applications::{AppRow, BatchSummary, OptIn, ServiceRow};
pub use batches::{BatchRow, BatchState, CollectionWindow, Deployments, Relative};
pub use events::EventRow;
pub use operations::OperationRow;
pub use rollouts::RolloutRow;
pub use tenants::TenantRow;
pub use versions::VersionRow;
pub use windows::{applied_windows, freezes_in_view, governing_freeze};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::common::{Condition, ConditionStatus, GenericStatus};
use crate::api::service_binding::ServiceBinding;
use crate::api::{CAPApplication, CAPApplicationVersion, CAPTenant, CAPTenantOperation, Freeze, RotationBatch};
use crate::cluster::stores::{InvalidObject, Stores};
use crate::credentials::{CredentialReport, Timing};
use crate::plan::latest_ready_version;

/// Everything the console shows, at one moment.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub synced: bool,
    pub apps: Vec<AppRow>,
    pub versions: Vec<VersionRow>,
    pub tenants: Vec<TenantRow>,
    pub operations: Vec<OperationRow>,
    pub batches: Vec<BatchRow>,
    pub rollouts: Vec<RolloutRow>,
    pub events: Vec<EventRow>,
    /// Per consumed binding Secret: when its credentials rotate and the old ones die.
    pub credentials: Vec<CredentialReport>,
    pub invalid: Vec<InvalidObject>,
    /// Every kube context the fleet view reads (`:fleet`, `--contexts`): a source of its own,
    /// carried from snapshot to snapshot.
    pub fleet: Vec<crate::fleet::FleetRow>,
    /// The window and expected rollout the credential margins were judged with.
    pub credential_timing: Option<Timing>,
    /// The Freezes in scope, lifted and ended ones too (they stay as records): the console's
    /// banner and a batch's detail pick those in force.
    pub freezes: Vec<Arc<Freeze>>,
    /// The `capdeck.dev/change-windows` annotation of each Namespace in scope that sets one.
    pub namespace_windows: BTreeMap<String, String>,
}

fn state_of(status: Option<&GenericStatus>, state: String) -> (bool, String) {
    (crate::api::common::is_ready(status), if state.is_empty() { "-".into() } else { state })
}

pub fn condition_text(condition: &Condition) -> String {
    let mark = match condition.status {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        _ => "Unknown",
    };
    format!("{} {mark} {} {}", condition.type_, condition.reason, condition.message)
}

/// Keys and sizes of a Secret's data (stringData included), never the values.
pub fn secret_keys(secret: &crate::api::StoredSecret) -> Vec<(String, usize)> {
    secret.entries().map(|(key, value)| (key.to_owned(), value.len())).collect()
}

/// Keys and sizes of a binding Secret by (namespace, name).
pub type SecretKeys<'a> = &'a dyn Fn(&str, &str) -> Option<Vec<(String, usize)>>;

/// The objects a snapshot is built from.
pub struct Sources<'a> {
    pub synced: bool,
    pub apps: &'a [Arc<CAPApplication>],
    pub versions: &'a [Arc<CAPApplicationVersion>],
    pub tenants: &'a [Arc<CAPTenant>],
    pub operations: &'a [Arc<CAPTenantOperation>],
    pub batches: &'a [Arc<RotationBatch>],
    pub events: &'a [Arc<Event>],
    pub invalid: Vec<InvalidObject>,
    /// Keys and sizes of a binding Secret by (namespace, name).
    pub secret_keys: SecretKeys<'a>,
    /// sap-btp-service-operator's ServiceBindings; `None` without the CRD (or read access).
    pub service_bindings: Option<&'a [ServiceBinding]>,
    /// The credential safety report (`credentials::overview`), worked out by the caller, who has
    /// the Secrets' data and the engine's timing.
    pub credentials: Vec<CredentialReport>,
}

fn no_secret_keys(_: &str, _: &str) -> Option<Vec<(String, usize)>> {
    None
}

impl<'a> Sources<'a> {
    /// Only the CAP objects: no batches, Events or Secrets (`capdeck tenants`).
    pub fn cap_objects(
        apps: &'a [Arc<CAPApplication>],
        versions: &'a [Arc<CAPApplicationVersion>],
        tenants: &'a [Arc<CAPTenant>],
        operations: &'a [Arc<CAPTenantOperation>],
    ) -> Self {
        Self {
            synced: true,
            apps,
            versions,
            tenants,
            operations,
            batches: &[],
            events: &[],
            invalid: Vec::new(),
            secret_keys: &no_secret_keys,
            service_bindings: None,
            credentials: Vec::new(),
        }
    }
}

/// Build the snapshot from the stores (and the console's Events); `judging` is what the leading
/// engine (else the console's own) decides with, for the credentials' margins: its timing, its
/// cluster change windows, where its Lease lives and its `--on-deadline`.
pub fn snapshot(stores: &Stores, events: &[Arc<Event>], judging: &crate::credentials::Judging) -> Snapshot {
    let timing = judging.timing;
    let keys = |namespace: &str, name: &str| stores.secret(namespace, name).map(|secret| secret_keys(&secret));
    let bindings = stores.service_bindings();
    let applications = stores.applications.state();
    let batches = stores.batches.state();
    let credentials = crate::judging::judge(stores, judging, Timestamp::now()).credentials;
    let mut snapshot = build(Sources {
        synced: stores.is_ready(),
        apps: &applications,
        versions: &stores.versions.state(),
        tenants: &stores.tenants.state(),
        operations: &stores.operations.state(),
        batches: &batches,
        events,
        invalid: stores.invalid(),
        secret_keys: &keys,
        service_bindings: bindings.as_deref(),
        credentials,
    });
    rollouts::overlay_live(&mut snapshot.rollouts, |namespace, name| stores.deployment(namespace, name));
    let index = crate::plan::CapIndex::new(applications, stores.versions.state(), stores.tenants.state());
    attach_old_credentials(&mut snapshot.apps, crate::plan::out_of_date(&index, &batches, stores));
    snapshot.credential_timing = Some(timing);
    snapshot.freezes = stores.freezes.state();
    snapshot.namespace_windows = stores
        .namespaces
        .state()
        .iter()
        .filter_map(|namespace| {
            let text = namespace.annotations().get(crate::api::change_window::ANNOTATION_CHANGE_WINDOWS)?;
            Some((namespace.name_any(), text.clone()))
        })
        .collect();
    snapshot
}

type Key = crate::api::ObjectKey;

/// Each application's Deployments on old credentials, on its row (the Applications view's BATCH
/// column and detail say them).
pub fn attach_old_credentials(apps: &mut [AppRow], out_of_date: Vec<crate::plan::OutOfDate>) {
    let mut by_app: HashMap<Key, Vec<crate::plan::OutOfDate>> = HashMap::new();
    for old in out_of_date {
        by_app.entry(Key::new(old.namespace.clone(), &old.application)).or_default().push(old);
    }
    for row in apps {
        row.old_credentials = by_app.remove(&Key::new(row.namespace.clone(), &row.name)).unwrap_or_default();
    }
}

fn key(namespace: Option<String>, name: &str) -> Key {
    Key::new(namespace.unwrap_or_default(), name)
}

/// Lookups the rows of several views share, built once per snapshot.
#[derive(Default)]
struct Index {
    versions_by_app: HashMap<Key, Vec<Arc<CAPApplicationVersion>>>,
    version_semver: HashMap<Key, String>,
    tenants_by_app: HashMap<Key, Vec<Arc<CAPTenant>>>,
    tenants_on_version: HashMap<Key, usize>,
    /// The newest operation of each tenant, matched by tenant id within the namespace.
    operation_of_tenant: HashMap<Key, Arc<CAPTenantOperation>>,
    tenant_by_id: HashMap<Key, Arc<CAPTenant>>,
    open_batch: HashMap<Key, Arc<RotationBatch>>,
}

impl Index {
    fn new(sources: &Sources<'_>) -> Self {
        let mut index = Self::default();
        for version in sources.versions {
            index
                .versions_by_app
                .entry(key(version.namespace(), &version.spec.cap_application_instance))
                .or_default()
                .push(version.clone());
            index.version_semver.insert(key(version.namespace(), &version.name_any()), version.spec.version.clone());
        }
        for tenant in sources.tenants {
            index
                .tenants_by_app
                .entry(key(tenant.namespace(), &tenant.spec.cap_application_instance))
                .or_default()
                .push(tenant.clone());
            if let Some(current) = tenant.current_version_instance() {
                *index.tenants_on_version.entry(key(tenant.namespace(), current)).or_default() += 1;
            }
            index.tenant_by_id.insert(key(tenant.namespace(), &tenant.spec.tenant_id), tenant.clone());
        }
        for operation in sources.operations {
            let tenant_key = key(operation.namespace(), &operation.spec.tenant_id);
            let newer = index.operation_of_tenant.get(&tenant_key).is_none_or(|existing| {
                existing.metadata.creation_timestamp.as_ref().map(|t| t.0)
                    <= operation.metadata.creation_timestamp.as_ref().map(|t| t.0)
            });
            if newer {
                index.operation_of_tenant.insert(tenant_key, operation.clone());
            }
        }
        for batch in sources.batches.iter().filter(|batch| !batch.is_terminal()) {
            index.open_batch.insert(key(batch.namespace(), &batch.spec.application), batch.clone());
        }
        index
    }

    fn versions_of(&self, app_key: &Key) -> &[Arc<CAPApplicationVersion>] {
        self.versions_by_app.get(app_key).map_or(&[][..], Vec::as_slice)
    }

    fn tenants_of(&self, app_key: &Key) -> &[Arc<CAPTenant>] {
        self.tenants_by_app.get(app_key).map_or(&[][..], Vec::as_slice)
    }

    /// Deployments of the versions in use (latest Ready + every tenant's current) of an application.
    fn deployments_in_use(&self, app_key: &Key) -> usize {
        let app_versions = self.versions_of(app_key);
        let mut in_use: std::collections::HashSet<String> =
            latest_ready_version(app_versions).map(|v| v.name_any()).into_iter().collect();
        for tenant in self.tenants_of(app_key) {
            if let Some(current) = tenant.current_version_instance() {
                in_use.insert(current.to_string());
            }
        }
        app_versions
            .iter()
            .filter(|v| in_use.contains(&v.name_any()))
            .map(|v| v.spec.workloads.iter().filter(|w| w.deployment_definition.is_some()).count())
            .sum()
    }
}

pub fn build(sources: Sources<'_>) -> Snapshot {
    let index = Index::new(&sources);
    let batches = batches::batch_rows(sources.batches, &index, sources.service_bindings);
    Snapshot {
        synced: sources.synced,
        apps: applications::app_rows(sources.apps, &index, sources.secret_keys),
        versions: versions::version_rows(sources.versions, &index),
        tenants: tenants::tenant_rows(sources.tenants, &index),
        operations: operations::operation_rows(sources.operations, &index),
        rollouts: rollouts::rollout_rows(&batches),
        batches,
        events: events::event_rows(sources.events),
        credentials: sources.credentials,
        invalid: sources.invalid,
        fleet: Vec::new(),
        credential_timing: None,
        freezes: Vec::new(),
        namespace_windows: BTreeMap::new(),
    }
}

/// Per-namespace counts, used in the header of a scope with several namespaces.
pub fn namespaces(snapshot: &Snapshot) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for app in &snapshot.apps {
        *out.entry(app.namespace.clone()).or_default() += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tenant(name: &str, state: &str, current: Option<&str>, target: &str, strategy: Option<&str>) -> Arc<CAPTenant> {
        let mut spec = json!({"capApplicationInstance": "app", "subDomain": name, "tenantId": name, "version": target});
        if let Some(strategy) = strategy {
            spec["versionUpgradeStrategy"] = json!(strategy);
        }
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": spec,
                "status": {"state": state, "currentCAPApplicationVersionInstance": current},
            }))
            .expect("tenant"),
        )
    }

    fn operation(tenant: &str, kind: &str, state: &str, step: Option<u32>) -> Arc<CAPTenantOperation> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("{tenant}-op"), "namespace": "ns",
                             "labels": {"sme.sap.com/btp-app-identifier": "x"}},
                "spec": {"operation": kind, "subDomain": tenant, "tenantId": tenant,
                         "capApplicationVersionInstance": "app-v2",
                         "steps": [{"name": "mtx", "type": "TenantOperation"},
                                   {"name": "content", "type": "CustomTenantOperation", "continueOnFailure": true}]},
                "status": {"state": state, "currentStep": step},
            }))
            .expect("operation"),
        )
    }

    /// Every tenant state and operation state upstream defines, as the tenant view shows them.
    #[test]
    fn tenant_rows_for_every_state() {
        let version = |name: &str, semver: &str| -> Arc<CAPApplicationVersion> {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": name, "namespace": "ns"},
                    "spec": {"capApplicationInstance": "app", "version": semver, "workloads": []},
                    "status": {"state": "Ready", "conditions": [{"type": "Ready", "status": "True"}]},
                }))
                .expect("version"),
            )
        };
        let versions = vec![version("app-v1", "1.0.0"), version("app-v2", "2.0.0")];
        let tenants = vec![
            tenant("ready", "Ready", Some("app-v2"), "2.0.0", None),
            tenant("provisioning", "Provisioning", None, "2.0.0", None),
            tenant("upgrading", "Upgrading", Some("app-v1"), "2.0.0", None),
            tenant("deleting", "Deleting", Some("app-v2"), "2.0.0", None),
            tenant("provisioning-error", "ProvisioningError", None, "2.0.0", None),
            tenant("upgrade-error", "UpgradeError", Some("app-v1"), "2.0.0", None),
            tenant("pinned", "Ready", Some("app-v1"), "2.0.0", Some("never")),
            tenant("pinned-current", "Ready", Some("app-v2"), "2.0.0", Some("never")),
        ];
        let operations = vec![
            operation("provisioning", "provisioning", "Processing", Some(1)),
            operation("upgrading", "upgrade", "Processing", Some(2)),
            operation("deleting", "deprovisioning", "Deleting", None),
            operation("provisioning-error", "provisioning", "Failed", Some(1)),
            operation("ready", "upgrade", "Completed", None),
        ];
        let snapshot = build(Sources::cap_objects(&[], &versions, &tenants, &operations));
        let row = |name: &str| snapshot.tenants.iter().find(|row| row.name == name).expect("row").clone();
        let op = |name: &str| row(name).operation.map(|(kind, state, step)| format!("{kind} {state} {step}"));

        assert_eq!((row("ready").state.as_str(), row("ready").blocked), ("Ready", None));
        assert_eq!(
            row("ready").current,
            Some(tenants::CurrentVersion { name: "app-v2".into(), semver: "2.0.0".into() })
        );
        assert_eq!(op("ready").as_deref(), Some("upgrade Completed -"));
        assert_eq!(op("provisioning").as_deref(), Some("provisioning Processing 1/2"));
        assert_eq!(row("provisioning").current, None);
        assert_eq!(op("upgrading").as_deref(), Some("upgrade Processing 2/2"));
        assert_eq!(
            row("upgrading").current,
            Some(tenants::CurrentVersion { name: "app-v1".into(), semver: "1.0.0".into() })
        );
        assert_eq!(row("upgrading").target, "2.0.0");
        assert_eq!(op("deleting").as_deref(), Some("deprovisioning Deleting -"));
        assert_eq!(op("provisioning-error").as_deref(), Some("provisioning Failed 1/2"));
        assert_eq!(row("provisioning-error").blocked.as_deref(), Some("provisioning failed"));
        assert!(row("upgrade-error").blocked.as_deref().is_some_and(|b| b.contains("last upgrade failed")));
        assert!(row("pinned").blocked.as_deref().is_some_and(|b| b.contains("stays on its version")));
        assert_eq!(row("pinned-current").blocked.as_deref(), Some("versionUpgradeStrategy is never"));
        let operation_row = snapshot.operations.iter().find(|o| o.tenant == "upgrading").expect("operation row");
        assert_eq!(
            operation_row.steps,
            vec![
                ("mtx".to_string(), "TenantOperation".to_string(), false),
                ("content".to_string(), "CustomTenantOperation".to_string(), true)
            ]
        );
    }
}
