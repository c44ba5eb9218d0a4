//! The CAP Operator's resources, group `sme.sap.com/v1alpha1`, field by field as upstream defines
//! them (upstream `api/v1alpha1/types.go` of SAP/cap-operator). capdeck reads these; it never writes them.
//!
//! Decoding policy: fields the upstream CRD requires are required here too (a real API server
//! guarantees them, and the generated CRD stays faithful); every status field is optional, and
//! every enum keeps values it does not know (see `string_enum`).

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscalerBehavior, MetricSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, EnvVar, Lifecycle, PodSecurityContext, Probe, ResourceRequirements, SecurityContext,
    Toleration, TopologySpreadConstraint, Volume, VolumeMount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::GenericStatus;
use super::string_enum::string_enum;

pub const GROUP: &str = "sme.sap.com";
pub const VERSION: &str = "v1alpha1";

// ---------------------------------------------------------------------------------------------
// CAPApplication

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sme.sap.com",
    version = "v1alpha1",
    kind = "CAPApplication",
    namespaced,
    status = "CAPApplicationStatus",
    shortname = "ca",
    derive = "PartialEq",
    doc = "CAPApplication: a multi-tenant SAP CAP application and the BTP services it uses",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CAPApplicationSpec {
    /// The BTP service instances (credential Secrets) the application uses.
    pub btp: Btp,
    /// BTP XSAPPNAME.
    pub btp_app_name: String,
    pub provider_subaccount_id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domain_refs: Vec<DomainRef>,
    /// Deprecated: use `domainRefs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domains: Option<ApplicationDomains>,
    /// Deprecated: use `providerSubaccountId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_account_id: Option<String>,
    /// Deprecated: provider tenant details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<BtpTenantIdentification>,
    /// Restart Deployments when their BTP credential Secrets change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_on_credential_update: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Btp {
    pub services: Vec<ServiceInfo>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceInfo {
    /// Name used by a workload's `consumedBTPServices`.
    pub name: String,
    /// Secret in the application's namespace holding the credentials.
    pub secret: String,
    /// Service type, the key under `VCAP_SERVICES`.
    pub class: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_dependency: Option<SubscriptionDependency>,
}

string_enum! {
    /// Whether a service is part of the SaaS `getDependencies` answer.
    pub SubscriptionDependency { Auto = "Auto", Always = "Always", Never = "Never" }
}

impl ServiceInfo {
    /// Upstream `GetSubscriptionDependency`: absent means `Auto`.
    pub fn dependency(&self) -> SubscriptionDependency {
        self.subscription_dependency.clone().unwrap_or_default()
    }
}

string_enum! {
    pub DomainKind { Domain = "Domain", ClusterDomain = "ClusterDomain" }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DomainRef {
    pub kind: DomainKind,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationDomains {
    /// Optional upstream (`omitempty`): the Go operator writes `domains: {}` back into every
    /// CAPApplication it reconciles, so a required field would reject them all.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 62), regex(pattern = r"^[a-z0-9-.]+$"))]
    pub primary: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secondary: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_target: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub istio_ingress_gateway_labels: Vec<NameValue>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NameValue {
    pub name: String,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BtpTenantIdentification {
    pub sub_domain: String,
    pub tenant_id: String,
}

string_enum! {
    pub CAPApplicationState {
        Empty = "", Consistent = "Consistent", Processing = "Processing", Error = "Error", Deleting = "Deleting",
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CAPApplicationStatus {
    #[serde(flatten)]
    pub generic: GenericStatus,
    #[serde(default)]
    pub state: CAPApplicationState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services_only: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_spec_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_full_reconciliation_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed_subdomains: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// CAPApplicationVersion

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sme.sap.com",
    version = "v1alpha1",
    kind = "CAPApplicationVersion",
    namespaced,
    status = "CAPApplicationVersionStatus",
    shortname = "cav",
    derive = "PartialEq",
    doc = "CAPApplicationVersion: one version of a CAP application and its workloads",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CAPApplicationVersionSpec {
    /// Name of the owning CAPApplication (same namespace).
    pub cap_application_instance: String,
    /// Semantic version of this application version.
    pub version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registry_secrets: Vec<String>,
    #[schemars(length(max = 100))]
    pub workloads: Vec<WorkloadDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_operations: Option<TenantOperations>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content_jobs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_exposures: Vec<ServiceExposure>,
}

// Large optional parts are boxed: inline, k8s-openapi's types made every workload 5.4 KB
// whether or not it used them, 27 KB per stored version (measured with heaptrack).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadDetails {
    pub name: String,
    /// Names of CAPApplication `btp.services` this workload gets in `VCAP_SERVICES`.
    #[serde(rename = "consumedBTPServices")]
    pub consumed_btp_services: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_definition: Option<Box<DeploymentDetails>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_definition: Option<Box<JobDetails>>,
}

/// Fields shared by deployment and job definitions (Go: inlined `CommonDetails`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonDetails {
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Box<ResourceRequirements>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<Box<SecurityContext>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<Box<PodSecurityContext>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<Affinity>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Box<Lifecycle>>,
}

string_enum! {
    pub DeploymentType { Cap = "CAP", Router = "Router", Additional = "Additional", Service = "Service" }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentDetails {
    #[serde(flatten)]
    pub common: CommonDetails,
    #[serde(rename = "type")]
    pub type_: DeploymentType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Ports>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<Box<Probe>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Box<Probe>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<Box<Probe>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<Box<WorkloadMonitoring>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_disruption_budget: Option<Box<PodDisruptionBudgetSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizontal_pod_autoscaler: Option<Box<HorizontalPodAutoscaler>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stickiness: Option<Box<Stickiness>>,
}

string_enum! {
    pub PortNetworkPolicyType { Application = "Application", Cluster = "Cluster" }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ports {
    pub name: String,
    pub port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<PortNetworkPolicyType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_destination_name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadMonitoring {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_rules: Option<DeletionRules>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_config: Option<ScrapeConfig>,
}

/// Exactly one of `metrics` and `expression` (enforced upstream by the CRD).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletionRules {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
}

string_enum! {
    pub MetricType { Gauge = "Gauge", Counter = "Counter" }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricRule {
    pub name: String,
    #[serde(rename = "type")]
    pub type_: MetricType,
    /// Prometheus duration.
    pub calculation_period: String,
    /// A float written as a string.
    pub threshold_value: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScrapeConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    pub port: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_timeout: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscaler {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    pub max_replicas: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Stickiness {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<StickinessHash>,
}

/// At most one of the fields (Istio consistent-hash load balancing).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StickinessHash {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_header_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_cookie: Option<HttpCookie>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_source_ip: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_query_parameter_name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HttpCookie {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<NameValue>,
}

string_enum! {
    pub JobType { Content = "Content", TenantOperation = "TenantOperation", CustomTenantOperation = "CustomTenantOperation" }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobDetails {
    #[serde(flatten)]
    pub common: CommonDetails,
    #[serde(rename = "type")]
    pub type_: JobType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TenantOperations {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provisioning: Vec<TenantOperationWorkloadReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upgrade: Vec<TenantOperationWorkloadReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deprovisioning: Vec<TenantOperationWorkloadReference>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantOperationWorkloadReference {
    pub workload_name: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continue_on_failure: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExposure {
    pub sub_domain: String,
    pub routes: Vec<Route>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    pub workload_name: String,
    pub port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

string_enum! {
    pub CAPApplicationVersionState {
        Empty = "", Ready = "Ready", Error = "Error", Processing = "Processing", Deleting = "Deleting",
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CAPApplicationVersionStatus {
    #[serde(flatten)]
    pub generic: GenericStatus,
    #[serde(default)]
    pub state: CAPApplicationVersionState,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finished_jobs: Vec<String>,
}

impl WorkloadDetails {
    /// Upstream's Deployment name for this workload of `cav`: `<cav>-<lowercase workload>`.
    pub fn deployment_name(&self, cav_name: &str) -> String {
        format!("{cav_name}-{}", self.name.to_lowercase())
    }
}

// ---------------------------------------------------------------------------------------------
// CAPTenant

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sme.sap.com",
    version = "v1alpha1",
    kind = "CAPTenant",
    namespaced,
    status = "CAPTenantStatus",
    shortname = "cat",
    derive = "PartialEq",
    doc = "CAPTenant: one tenant (subscriber) of a CAP application",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Subdomain","type":"string","jsonPath":".spec.subDomain"}"#,
    printcolumn = r#"{"name":"Current Version","type":"string","jsonPath":".status.currentCAPApplicationVersionInstance"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CAPTenantSpec {
    pub cap_application_instance: String,
    pub sub_domain: String,
    pub tenant_id: String,
    /// Semantic version the tenant should be on; empty until the CAPApplication sets it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Empty means `always`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_upgrade_strategy: Option<VersionUpgradeStrategy>,
}

string_enum! {
    pub VersionUpgradeStrategy { Always = "always", Never = "never" }
}

string_enum! {
    pub CAPTenantState {
        Empty = "", Ready = "Ready", Provisioning = "Provisioning", Upgrading = "Upgrading", Deleting = "Deleting",
        ProvisioningError = "ProvisioningError", UpgradeError = "UpgradeError",
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CAPTenantStatus {
    #[serde(flatten)]
    pub generic: GenericStatus,
    #[serde(default)]
    pub state: CAPTenantState,
    /// The CAPApplicationVersion **object name** the tenant runs on.
    #[serde(rename = "currentCAPApplicationVersionInstance", default, skip_serializing_if = "Option::is_none")]
    pub current_cap_application_version_instance: Option<String>,
    /// Oldest first.
    #[serde(rename = "previousCAPApplicationVersions", default, skip_serializing_if = "Vec::is_empty")]
    pub previous_cap_application_versions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_full_reconciliation_time: Option<Time>,
}

// ---------------------------------------------------------------------------------------------
// CAPTenantOperation

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sme.sap.com",
    version = "v1alpha1",
    kind = "CAPTenantOperation",
    namespaced,
    status = "CAPTenantOperationStatus",
    shortname = "ctop",
    derive = "PartialEq",
    doc = "CAPTenantOperation: a provisioning, upgrade or deprovisioning run for a tenant, in steps",
    printcolumn = r#"{"name":"Operation","type":"string","jsonPath":".spec.operation"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CAPTenantOperationSpec {
    pub operation: TenantOperationType,
    pub sub_domain: String,
    pub tenant_id: String,
    /// The CAPApplicationVersion used: the target for provisioning/upgrade, the current one
    /// for deprovisioning.
    pub cap_application_version_instance: String,
    pub steps: Vec<TenantOperationStep>,
}

string_enum! {
    pub TenantOperationType { Provisioning = "provisioning", Deprovisioning = "deprovisioning", Upgrade = "upgrade" }
}

string_enum! {
    pub StepType { TenantOperation = "TenantOperation", CustomTenantOperation = "CustomTenantOperation" }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantOperationStep {
    pub name: String,
    #[serde(rename = "type")]
    pub type_: StepType,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continue_on_failure: bool,
}

string_enum! {
    pub CAPTenantOperationState {
        Empty = "", Processing = "Processing", Completed = "Completed", Failed = "Failed", Deleting = "Deleting",
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CAPTenantOperationStatus {
    #[serde(flatten)]
    pub generic: GenericStatus,
    #[serde(default)]
    pub state: CAPTenantOperationState,
    /// 1-based; cleared when the operation ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_job: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// CAPTenantOutput

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sme.sap.com",
    version = "v1alpha1",
    kind = "CAPTenantOutput",
    namespaced,
    shortname = "ctout",
    derive = "PartialEq",
    doc = "CAPTenantOutput: extra data for the SaaS provisioning callback of a tenant",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CAPTenantOutputSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("nullable" = true))]
    pub subscription_callback_data: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Domain and ClusterDomain

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sme.sap.com",
    version = "v1alpha1",
    kind = "Domain",
    namespaced,
    status = "DomainStatus",
    shortname = "dom",
    derive = "PartialEq",
    doc = "Domain: an ingress domain usable by the CAP applications of one namespace",
    printcolumn = r#"{"name":"Domain","type":"string","jsonPath":".spec.domain"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DomainSpec {
    #[schemars(regex(pattern = r"^[a-z0-9-.]+$"))]
    pub domain: String,
    pub ingress_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_mode: Option<TlsMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_mode: Option<DnsMode>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub dns_templates: Vec<DnsTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_config: Option<CertConfig>,
}

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sme.sap.com",
    version = "v1alpha1",
    kind = "ClusterDomain",
    status = "DomainStatus",
    shortname = "cdom",
    derive = "PartialEq",
    doc = "ClusterDomain: an ingress domain usable by CAP applications in every namespace",
    printcolumn = r#"{"name":"Domain","type":"string","jsonPath":".spec.domain"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#
)]
pub struct ClusterDomainSpec {
    #[serde(flatten)]
    pub domain: DomainSpec,
}

string_enum! {
    pub TlsMode { Simple = "Simple", Mutual = "Mutual", OptionalMutual = "OptionalMutual" }
}

string_enum! {
    pub DnsMode { None = "None", Wildcard = "Wildcard", Subdomain = "Subdomain", Custom = "Custom" }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DnsTemplate {
    pub name: String,
    pub target: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_ca_certificate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_manager: Option<CertManager>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertManager {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_ref: Option<IssuerRef>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IssuerRef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

string_enum! {
    pub DomainState { Empty = "", Ready = "Ready", Error = "Error", Processing = "Processing", Deleting = "Deleting" }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DomainStatus {
    #[serde(flatten)]
    pub generic: GenericStatus,
    #[serde(default)]
    pub state: DomainState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_domain: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Conveniences used across capdeck

impl CAPApplication {
    /// Opted in to rollout on credential update: the spec flag, or capdeck's own annotation
    /// (lets a team use capdeck's approval gate while the Go operator's rollout stays off).
    pub fn rollout_opted_in(&self) -> bool {
        self.spec.rollout_on_credential_update == Some(true)
            || self
                .metadata
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.get(super::ANNOTATION_ROLLOUT))
                .is_some_and(|value| value == "true")
    }
}

impl CAPApplicationVersion {
    pub fn is_ready(&self) -> bool {
        super::common::is_ready(self.status.as_ref().map(|status| &status.generic))
    }
}

impl CAPTenant {
    pub fn is_ready(&self) -> bool {
        super::common::is_ready(self.status.as_ref().map(|status| &status.generic))
    }

    pub fn state(&self) -> CAPTenantState {
        self.status.as_ref().map(|status| status.state.clone()).unwrap_or_default()
    }

    pub fn current_version_instance(&self) -> Option<&str> {
        self.status
            .as_ref()
            .and_then(|status| status.current_cap_application_version_instance.as_deref())
            .filter(|name| !name.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the Go CAP Operator v0.35.0 writes back into a CAPApplication it reconciled, measured
    /// on kube-apiserver 1.34 (upstream::vcap_corpus_is_byte_identical): `domains: {}`, the
    /// deprecated `globalAccountId`, its finalizer and labels. capdeck must read it.
    #[test]
    fn a_capapplication_the_go_operator_reconciled_is_read() {
        let written = serde_json::json!({
            "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
            "metadata": {"name": "bookshop", "namespace": "shop", "finalizers": ["sme.sap.com/capapplication"],
                         "labels": {"sme.sap.com/app-identifier-hash": "ca654b46b69e43297ac6f49e7fa37f932b065621"}},
            "spec": {"btp": {"services": [{"class": "xsuaa", "name": "uaa", "secret": "uaa"}]}, "btpAppName": "bookshop",
                     "domains": {}, "globalAccountId": "ga", "providerSubaccountId": "p", "rolloutOnCredentialUpdate": true},
            "status": {"state": "Consistent", "servicesOnly": true, "domainSpecHash": "{}"}});
        let app: CAPApplication = serde_json::from_value(written).expect("reads what the Go operator wrote");
        assert_eq!(app.spec.domains.as_ref().map(|d| d.primary.as_str()), Some(""));
        assert_eq!(app.spec.rollout_on_credential_update, Some(true));
        // And writes it back without inventing a primary domain.
        let again = serde_json::to_value(&app).expect("serialises");
        assert_eq!(again["spec"]["domains"], serde_json::json!({}));
    }
}
