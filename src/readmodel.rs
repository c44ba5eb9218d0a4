//! What the console shows, computed from the stores once per change (never while drawing):
//! one row type per view, each holding its object for the detail and YAML views. `pods` reads a
//! Deployment's ReplicaSets and Pods on demand (the drill-down from a rollout row).

pub mod pods;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::common::{Condition, ConditionStatus, GenericStatus};
use crate::api::rotation_batch::{DeploymentAction, DeploymentRolloutState};
use crate::api::service_binding::ServiceBinding;
use crate::api::{
    ANNOTATION_ROLLOUT, BatchPhase, CAPApplication, CAPApplicationVersion, CAPTenant, CAPTenantOperation, RotationBatch,
};
use crate::cluster::stores::{InvalidObject, Stores};
use crate::credentials::{CredentialReport, Timing};
use crate::engine::config::ApprovalPolicy;
use crate::plan::{compare_versions, latest_ready_version};

/// How an application opted in to rollout on credential update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptIn {
    Spec,
    Annotation,
    No,
}

impl OptIn {
    pub fn label(self) -> &'static str {
        match self {
            Self::Spec => "yes",
            Self::Annotation => "yes (annotation)",
            Self::No => "no",
        }
    }
}

#[derive(Clone, Debug)]
pub struct BatchSummary {
    pub name: String,
    pub phase: BatchPhase,
    pub window_end: Timestamp,
    pub progress: String,
}

/// A service of an application and its binding Secret: keys and sizes only, never values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRow {
    pub name: String,
    pub class: String,
    pub secret: String,
    /// (key, bytes) of the Secret's data; `None` when capdeck does not see the Secret.
    pub keys: Option<Vec<(String, usize)>>,
}

#[derive(Clone, Debug)]
pub struct AppRow {
    pub namespace: String,
    pub name: String,
    pub state: String,
    pub latest: Option<String>,
    pub versions: usize,
    pub tenants_ready: usize,
    pub tenants: usize,
    pub opt_in: OptIn,
    pub policy: ApprovalPolicy,
    pub batch: Option<BatchSummary>,
    pub services: Vec<ServiceRow>,
    pub object: Arc<CAPApplication>,
}

#[derive(Clone, Debug)]
pub struct VersionRow {
    pub namespace: String,
    pub name: String,
    pub application: String,
    pub version: String,
    pub ready: bool,
    pub state: String,
    pub latest: bool,
    pub deployments: usize,
    pub jobs: usize,
    pub tenants: usize,
    pub created: Option<Timestamp>,
    pub object: Arc<CAPApplicationVersion>,
}

#[derive(Clone, Debug)]
pub struct TenantRow {
    pub namespace: String,
    pub name: String,
    pub application: String,
    pub subdomain: String,
    pub state: String,
    pub ready: bool,
    /// Current version: CAPApplicationVersion name and its semver.
    pub current: Option<(String, String)>,
    /// `spec.version`: the version the tenant should be on.
    pub target: String,
    pub strategy: String,
    /// The running or last operation: (type, state, step "i/n").
    pub operation: Option<(String, String, String)>,
    /// Why this tenant will not upgrade, if it will not.
    pub blocked: Option<String>,
    pub object: Arc<CAPTenant>,
}

#[derive(Clone, Debug)]
pub struct OperationRow {
    pub namespace: String,
    pub name: String,
    pub application: String,
    pub tenant: String,
    pub operation: String,
    pub state: String,
    pub version: String,
    pub current_step: Option<u32>,
    pub steps: Vec<(String, String, bool)>,
    pub active_job: Option<String>,
    pub message: String,
    pub created: Option<Timestamp>,
    pub object: Arc<CAPTenantOperation>,
}

impl OperationRow {
    /// `2/3`, or `-` when the operation is not running a step.
    pub fn step(&self) -> String {
        match self.current_step {
            Some(step) => format!("{step}/{}", self.steps.len()),
            None => "-".into(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct BatchRow {
    pub namespace: String,
    pub name: String,
    pub application: String,
    pub phase: BatchPhase,
    pub reason: String,
    pub message: String,
    pub window_end: Timestamp,
    pub secrets: Vec<String>,
    pub approval: String,
    pub progress: String,
    pub tenants: Option<u32>,
    /// Deployments to restart: counted from the status once evaluated, else the application's
    /// Deployments of versions in use (an upper bound while the window is open).
    pub deployments: Deployments,
    pub created: Option<Timestamp>,
    /// An open batch's deadline: the earliest revocation of its Secrets' old credentials
    /// (ServiceBindings; `None` when unknown).
    pub old_credentials_revocable: Option<Timestamp>,
    pub object: Arc<RotationBatch>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deployments {
    Evaluated(usize),
    AtMost(usize),
}

impl BatchRow {
    /// `4 deployments, 12 tenants`, or `≤4 deployments` before the batch is evaluated.
    pub fn blast_radius(&self) -> String {
        let deployments = match self.deployments {
            Deployments::Evaluated(n) => crate::output::count(n, "deployment"),
            Deployments::AtMost(n) => format!("≤{}", crate::output::count(n, "deployment")),
        };
        match self.tenants {
            Some(tenants) => format!("{deployments}, {}", crate::output::count(tenants as usize, "tenant")),
            None => deployments,
        }
    }
}

#[derive(Clone, Debug)]
pub struct RolloutRow {
    pub namespace: String,
    pub application: String,
    pub batch: String,
    pub deployment: String,
    pub version: String,
    pub action: DeploymentAction,
    pub state: Option<DeploymentRolloutState>,
    pub replicas: i32,
    pub updated: i32,
    pub available: i32,
    pub message: String,
}

#[derive(Clone, Debug)]
pub struct EventRow {
    pub namespace: String,
    pub application: String,
    pub warning: bool,
    pub reason: String,
    pub note: String,
    pub time: Option<Timestamp>,
    pub controller: String,
}

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
pub fn secret_keys(secret: &k8s_openapi::api::core::v1::Secret) -> Vec<(String, usize)> {
    crate::plan::secret_data(secret).into_iter().map(|(key, value)| (key, value.len())).collect()
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

/// Build the snapshot from the stores (and the console's Events); `timing` is the engine's, for
/// the credentials' margins.
pub fn snapshot(stores: &Stores, events: &[Arc<Event>], timing: Timing) -> Snapshot {
    let keys = |namespace: &str, name: &str| stores.secret(namespace, name).map(|secret| secret_keys(&secret));
    let bindings = stores.service_bindings();
    let applications = stores.applications.state();
    let batches = stores.batches.state();
    let credentials = crate::credentials::overview(&crate::credentials::Inputs {
        applications: &applications,
        secrets: stores,
        bindings: bindings.as_deref(),
        batches: &batches,
        now: Timestamp::now(),
        timing,
    })
    .credentials;
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
    snapshot.credential_timing = Some(timing);
    snapshot
}

type Key = (String, String);

fn key(namespace: Option<String>, name: &str) -> Key {
    (namespace.unwrap_or_default(), name.to_string())
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
    let batches = batch_rows(sources.batches, &index, sources.service_bindings);
    Snapshot {
        synced: sources.synced,
        apps: app_rows(sources.apps, &index, sources.secret_keys),
        versions: version_rows(sources.versions, &index),
        tenants: tenant_rows(sources.tenants, &index),
        operations: operation_rows(sources.operations, &index),
        rollouts: rollout_rows(&batches),
        batches,
        events: event_rows(sources.events),
        credentials: sources.credentials,
        invalid: sources.invalid,
        fleet: Vec::new(),
        credential_timing: None,
    }
}

fn app_rows(apps: &[Arc<CAPApplication>], index: &Index, secret_keys: SecretKeys<'_>) -> Vec<AppRow> {
    let mut app_rows: Vec<AppRow> = apps
        .iter()
        .map(|app| {
            let app_key = key(app.namespace(), &app.name_any());
            let app_versions = index.versions_of(&app_key);
            let app_tenants = index.tenants_of(&app_key);
            let opt_in = if app.spec.rollout_on_credential_update == Some(true) {
                OptIn::Spec
            } else if app.annotations().get(ANNOTATION_ROLLOUT).is_some_and(|v| v == "true") {
                OptIn::Annotation
            } else {
                OptIn::No
            };
            AppRow {
                namespace: app_key.0.clone(),
                name: app_key.1.clone(),
                state: app
                    .status
                    .as_ref()
                    .map(|s| s.state.to_string())
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "-".into()),
                latest: latest_ready_version(app_versions).map(|v| v.spec.version.clone()),
                versions: app_versions.len(),
                tenants_ready: app_tenants.iter().filter(|t| t.is_ready()).count(),
                tenants: app_tenants.len(),
                opt_in,
                policy: ApprovalPolicy::for_application(app, ApprovalPolicy::Auto),
                batch: index.open_batch.get(&app_key).map(|batch| BatchSummary {
                    name: batch.name_any(),
                    phase: batch.phase(),
                    window_end: batch.spec.window_end.0,
                    progress: batch.status.as_ref().and_then(|s| s.progress.clone()).unwrap_or_else(|| "-".into()),
                }),
                services: app
                    .spec
                    .btp
                    .services
                    .iter()
                    .map(|service| ServiceRow {
                        name: service.name.clone(),
                        class: service.class.clone(),
                        secret: service.secret.clone(),
                        keys: secret_keys(&app_key.0, &service.secret),
                    })
                    .collect(),
                object: app.clone(),
            }
        })
        .collect();
    app_rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    app_rows
}

fn version_rows(versions: &[Arc<CAPApplicationVersion>], index: &Index) -> Vec<VersionRow> {
    let mut version_rows: Vec<VersionRow> = versions
        .iter()
        .map(|version| {
            let namespace = version.namespace().unwrap_or_default();
            let app_key = (namespace.clone(), version.spec.cap_application_instance.clone());
            let latest = index
                .versions_by_app
                .get(&app_key)
                .and_then(|all| latest_ready_version(all))
                .is_some_and(|latest| latest.name_any() == version.name_any());
            let (ready, state) = state_of(
                version.status.as_ref().map(|s| &s.generic),
                version.status.as_ref().map(|s| s.state.to_string()).unwrap_or_default(),
            );
            VersionRow {
                namespace: namespace.clone(),
                name: version.name_any(),
                application: version.spec.cap_application_instance.clone(),
                version: version.spec.version.clone(),
                ready,
                state,
                latest,
                deployments: version.spec.workloads.iter().filter(|w| w.deployment_definition.is_some()).count(),
                jobs: version.spec.workloads.iter().filter(|w| w.job_definition.is_some()).count(),
                tenants: index.tenants_on_version.get(&(namespace, version.name_any())).copied().unwrap_or(0),
                created: version.metadata.creation_timestamp.as_ref().map(|t| t.0),
                object: version.clone(),
            }
        })
        .collect();
    version_rows.sort_by(|a, b| {
        (&a.namespace, &a.application)
            .cmp(&(&b.namespace, &b.application))
            .then_with(|| compare_versions(&b.version, &a.version))
    });
    version_rows
}

fn tenant_rows(tenants: &[Arc<CAPTenant>], index: &Index) -> Vec<TenantRow> {
    let mut tenant_rows: Vec<TenantRow> = tenants
        .iter()
        .map(|tenant| {
            let namespace = tenant.namespace().unwrap_or_default();
            let (ready, state) = state_of(tenant.status.as_ref().map(|s| &s.generic), tenant.state().to_string());
            let current = tenant.current_version_instance().map(|name| {
                (
                    name.to_string(),
                    index.version_semver.get(&(namespace.clone(), name.to_string())).cloned().unwrap_or_default(),
                )
            });
            let strategy =
                tenant.spec.version_upgrade_strategy.as_ref().map_or_else(|| "always".to_string(), ToString::to_string);
            let operation =
                index.operation_of_tenant.get(&(namespace.clone(), tenant.spec.tenant_id.clone())).map(|op| {
                    let steps = op.spec.steps.len();
                    let step = op
                        .status
                        .as_ref()
                        .and_then(|s| s.current_step)
                        .map_or("-".to_string(), |s| format!("{s}/{steps}"));
                    (
                        op.spec.operation.to_string(),
                        op.status.as_ref().map(|s| s.state.to_string()).unwrap_or_default(),
                        step,
                    )
                });
            let current_semver = current.as_ref().map(|c| c.1.as_str()).unwrap_or_default();
            let behind = !tenant.spec.version.is_empty() && tenant.spec.version != current_semver;
            let blocked = if strategy == "never" && behind {
                Some("versionUpgradeStrategy is never: stays on its version".to_string())
            } else if strategy == "never" {
                Some("versionUpgradeStrategy is never".to_string())
            } else if state == "UpgradeError" {
                Some("the last upgrade failed; it retries only when a new version is targeted".to_string())
            } else if state == "ProvisioningError" {
                Some("provisioning failed".to_string())
            } else {
                None
            };
            TenantRow {
                namespace,
                name: tenant.name_any(),
                application: tenant.spec.cap_application_instance.clone(),
                subdomain: tenant.spec.sub_domain.clone(),
                state,
                ready,
                current,
                target: tenant.spec.version.clone(),
                strategy,
                operation,
                blocked,
                object: tenant.clone(),
            }
        })
        .collect();
    tenant_rows.sort_by(|a, b| (&a.namespace, &a.application, &a.name).cmp(&(&b.namespace, &b.application, &b.name)));
    tenant_rows
}

fn operation_rows(operations: &[Arc<CAPTenantOperation>], index: &Index) -> Vec<OperationRow> {
    let mut operation_rows: Vec<OperationRow> = operations
        .iter()
        .map(|op| {
            let namespace = op.namespace().unwrap_or_default();
            let status = op.status.clone().unwrap_or_default();
            let message = status
                .generic
                .conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.message.clone())
                .unwrap_or_default();
            let tenant = index.tenant_by_id.get(&(namespace.clone(), op.spec.tenant_id.clone()));
            OperationRow {
                tenant: tenant.map_or_else(|| op.spec.sub_domain.clone(), |t| t.name_any()),
                application: tenant.map(|t| t.spec.cap_application_instance.clone()).unwrap_or_default(),
                namespace,
                name: op.name_any(),
                operation: op.spec.operation.to_string(),
                state: if status.state.as_str().is_empty() { "-".into() } else { status.state.to_string() },
                version: op.spec.cap_application_version_instance.clone(),
                current_step: status.current_step,
                steps: op
                    .spec
                    .steps
                    .iter()
                    .map(|s| (s.name.clone(), s.type_.to_string(), s.continue_on_failure))
                    .collect(),
                active_job: status.active_job.clone(),
                message,
                created: op.metadata.creation_timestamp.as_ref().map(|t| t.0),
                object: op.clone(),
            }
        })
        .collect();
    operation_rows
        .sort_by(|a, b| b.created.cmp(&a.created).then_with(|| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name))));
    operation_rows
}

fn batch_rows(
    batches: &[Arc<RotationBatch>],
    index: &Index,
    service_bindings: Option<&[ServiceBinding]>,
) -> Vec<BatchRow> {
    let mut batch_rows: Vec<BatchRow> = batches
        .iter()
        .map(|batch| {
            let status = batch.status.clone().unwrap_or_default();
            let condition = status.conditions.iter().find(|c| c.type_ == "Ready");
            BatchRow {
                namespace: batch.namespace().unwrap_or_default(),
                name: batch.name_any(),
                application: batch.spec.application.clone(),
                phase: batch.phase(),
                reason: condition.map(|c| c.reason.clone()).unwrap_or_default(),
                message: condition.map(|c| c.message.clone()).unwrap_or_default(),
                window_end: batch.spec.window_end.0,
                secrets: batch.spec.secrets.iter().map(|s| s.name.clone()).collect(),
                approval: batch.approval_text(),
                progress: batch.progress_text(),
                tenants: status.tenants,
                deployments: if status.deployments.is_empty() {
                    Deployments::AtMost(index.deployments_in_use(&key(batch.namespace(), &batch.spec.application)))
                } else {
                    Deployments::Evaluated(
                        status.deployments.iter().filter(|d| d.action == DeploymentAction::Restart).count(),
                    )
                },
                created: batch.metadata.creation_timestamp.as_ref().map(|t| t.0),
                old_credentials_revocable: service_bindings
                    .filter(|_| !batch.is_terminal())
                    .and_then(|bindings| crate::credentials::batch_revocation(bindings, batch)),
                object: batch.clone(),
            }
        })
        .collect();
    // Open batches first, newest first.
    batch_rows.sort_by(|a, b| {
        a.phase
            .is_terminal()
            .cmp(&b.phase.is_terminal())
            .then_with(|| b.window_end.cmp(&a.window_end))
            .then_with(|| a.name.cmp(&b.name))
    });
    batch_rows
}

fn rollout_rows(batch_rows: &[BatchRow]) -> Vec<RolloutRow> {
    batch_rows
        .iter()
        .flat_map(|row| {
            let status = row.object.status.clone().unwrap_or_default();
            status.deployments.into_iter().map(move |d| RolloutRow {
                namespace: row.namespace.clone(),
                application: row.application.clone(),
                batch: row.name.clone(),
                deployment: d.name,
                version: d.version,
                action: d.action,
                state: d.state,
                replicas: d.replicas.unwrap_or(0),
                updated: d.updated_replicas.unwrap_or(0),
                available: d.available_replicas.unwrap_or(0),
                message: d.message.unwrap_or_default(),
            })
        })
        .collect()
}

fn event_rows(events: &[Arc<Event>]) -> Vec<EventRow> {
    let mut event_rows: Vec<EventRow> = events
        .iter()
        .map(|event| EventRow {
            namespace: event.namespace().unwrap_or_default(),
            application: event.regarding.as_ref().and_then(|r| r.name.clone()).unwrap_or_default(),
            warning: event.type_.as_deref() == Some("Warning"),
            reason: event.reason.clone().unwrap_or_default(),
            note: event.note.clone().unwrap_or_default(),
            time: event
                .event_time
                .as_ref()
                .map(|t| t.0)
                .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0)),
            controller: event.reporting_controller.clone().unwrap_or_default(),
        })
        .collect();
    event_rows.sort_by_key(|row| std::cmp::Reverse(row.time));

    event_rows
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
        assert_eq!(row("ready").current, Some(("app-v2".into(), "2.0.0".into())));
        assert_eq!(op("ready").as_deref(), Some("upgrade Completed -"));
        assert_eq!(op("provisioning").as_deref(), Some("provisioning Processing 1/2"));
        assert_eq!(row("provisioning").current, None);
        assert_eq!(op("upgrading").as_deref(), Some("upgrade Processing 2/2"));
        assert_eq!(row("upgrading").current, Some(("app-v1".into(), "1.0.0".into())));
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
