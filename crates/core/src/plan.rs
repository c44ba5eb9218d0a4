//! The rollout planner: a pure function from what the cluster holds to what must be restarted.
//!
//! For each opted-in CAPApplication it finds the versions in use, the Deployments of those
//! versions that consume a rotated service, builds each one's `VCAP_SERVICES` payload and
//! compares it with the VCAP Secret the Deployment **currently references** through `envFrom`.
//! Problems (a missing or broken binding Secret, a workload that is both a job and a deployment,
//! ...) are collected per Deployment; one broken Secret never stops the rest of the plan.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kube::ResourceExt;
use serde::Serialize;

pub use crate::api::container::referenced_vcap_secret;
use crate::api::{
    CAPApplication, CAPApplicationVersion, DeploymentView, ServiceInfo, VCAP_SERVICES_KEY, WorkloadDetails,
};
pub use crate::lookup::{CapIndex, ObjectLookup, SecretLookup};
use crate::vcap::{self, EntryError, VcapPayload, gojson::GoMap};

mod standing;
pub use standing::{
    LABEL_BATCH, LeftBy, OutOfDate, Standing, out_of_date, proven_rolled_by, rolled_forward_asked, standing, standings,
};

/// Which binding Secrets count as rotated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rotated {
    /// Every Secret the application references: the start-up re-check.
    All,
    /// These Secret names (in the application's namespace).
    Secrets(BTreeSet<String>),
}

impl Rotated {
    fn includes(&self, secret: &str) -> bool {
        match self {
            Self::All => true,
            Self::Secrets(names) => names.contains(secret),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanAction {
    /// The payload differs from what the Deployment uses: create a VCAP Secret and roll.
    Restart,
    /// The Deployment already references a Secret with exactly this payload.
    Unchanged,
    /// The Deployment object does not exist (nothing to roll).
    Missing,
    /// A Deployment of that name exists, but the CAPApplicationVersion is not its controller
    /// (matched by uid, as the CAP Operator creates them): someone else's, never written.
    NotOwned,
}

/// One affected Deployment.
#[derive(Clone, Debug)]
pub struct DeploymentPlan {
    pub namespace: String,
    pub application: String,
    /// CAPApplicationVersion object name.
    pub version: String,
    pub workload: String,
    pub deployment: String,
    pub action: PlanAction,
    /// Why the action was chosen, for people.
    pub reason: String,
    /// The VCAP Secret the Deployment's containers reference now, if they agree on one.
    pub current_secret: Option<String>,
    /// Service names in the payload, in CAPApplication order.
    pub services: Vec<String>,
    pub payload: VcapPayload,
}

/// The API server refuses Secrets whose data is larger (`MaxSecretSize`).
pub const MAX_SECRET_BYTES: usize = 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProblemKind {
    MissingSecret,
    InvalidSecret,
    InvalidWorkload,
    InvalidVersion,
    UnknownService,
    NoVersionInUse,
    InvalidObject,
    /// A ServiceBinding keeps old credentials for less than a batch takes.
    CredentialsTtl,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub namespace: String,
    pub application: Option<String>,
    pub deployment: Option<String>,
    pub secret: Option<String>,
    pub message: String,
    #[serde(skip)]
    pub kind: ProblemKind,
}

/// The plan of one application.
#[derive(Clone, Debug, Default)]
pub struct AppPlan {
    pub deployments: Vec<DeploymentPlan>,
    pub problems: Vec<Problem>,
    /// Versions in use (CAV names), latest Ready first.
    pub versions: Vec<String>,
    /// Tenants served by the versions in use: the blast radius of a rollout.
    pub tenants: u32,
}

impl AppPlan {
    pub fn restarts(&self) -> impl Iterator<Item = &DeploymentPlan> {
        self.deployments.iter().filter(|plan| plan.action == PlanAction::Restart)
    }
}

/// The plan of many applications.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub deployments: Vec<DeploymentPlan>,
    pub problems: Vec<Problem>,
}

/// The start-up re-check: every opted-in application, every referenced Secret rotated.
pub fn plan_all(index: &CapIndex, lookup: &dyn ObjectLookup) -> Plan {
    let mut plan = Plan::default();
    for app in index.applications().iter().filter(|app| app.rollout_opted_in()) {
        let app_plan = plan_application(app, &Rotated::All, index, lookup);
        plan.deployments.extend(app_plan.deployments);
        plan.problems.extend(app_plan.problems);
    }
    plan
}

/// A workload that is neither a Deployment nor a Job, or both: (the Deployment it names, why it
/// is skipped). Jobs and Deployments are fine.
fn workload_shape_problem(
    workload: &crate::api::WorkloadDetails,
    version_name: &str,
) -> Option<(Option<String>, String)> {
    let both = match (&workload.deployment_definition, &workload.job_definition) {
        (Some(_), None) | (None, Some(_)) => return None,
        (None, None) => false,
        (Some(_), Some(_)) => true,
    };
    Some(if both {
        (
            Some(workload.deployment_name(version_name)),
            format!(
                "workload {} of {version_name} has both deploymentDefinition and jobDefinition; skipped",
                workload.name
            ),
        )
    } else {
        (
            None,
            format!(
                "workload {} of {version_name} has neither deploymentDefinition nor jobDefinition; skipped",
                workload.name
            ),
        )
    })
}

/// The plan of one application for the given rotated Secrets. The opt-in is not checked here:
/// callers decide (the engine re-checks it when the window ends).
pub fn plan_application(
    app: &CAPApplication,
    rotated: &Rotated,
    index: &CapIndex,
    lookup: &dyn ObjectLookup,
) -> AppPlan {
    let services = &app.spec.btp.services;
    let mut plan = AppPlan::default();
    let mut planner = AppPlanner {
        namespace: app.namespace().unwrap_or_default(),
        app_name: app.name_any(),
        services,
        rotated_services: services
            .iter()
            .filter(|service| rotated.includes(&service.secret))
            .map(|service| service.name.as_str())
            .collect(),
        lookup,
        entries: HashMap::new(),
    };
    if planner.rotated_services.is_empty() {
        return plan;
    }

    for version in index.versions_of(app).iter().filter(|version| parse_semver(&version.spec.version).is_none()) {
        plan.problems.push(planner.problem(
            ProblemKind::InvalidVersion,
            None,
            None,
            format!(
                "CAPApplicationVersion {}: version {:?} is not semantic versioning; it sorts below every valid \
version, so it is never the latest",
                version.name_any(),
                version.spec.version
            ),
        ));
    }
    let versions = versions_in_use(app, index);
    plan.versions = versions.iter().map(|version| version.name_any()).collect();
    plan.tenants = tenants_served(app, index, &plan.versions);
    if versions.is_empty() {
        plan.problems.push(planner.problem(
            ProblemKind::NoVersionInUse,
            None,
            None,
            "no version in use: no Ready CAPApplicationVersion and no Ready tenant on a Ready version".into(),
        ));
        return plan;
    }
    for version in &versions {
        for workload in &version.spec.workloads {
            planner.workload(version, workload, &mut plan);
        }
    }
    plan
}

/// One application's planning: what the workloads of its versions share.
struct AppPlanner<'a> {
    namespace: String,
    app_name: String,
    services: &'a [ServiceInfo],
    rotated_services: BTreeSet<&'a str>,
    lookup: &'a dyn ObjectLookup,
    /// Entries are built once per service and shared by every Deployment that consumes it.
    entries: HashMap<usize, Result<GoMap, EntryProblem>>,
}

impl AppPlanner<'_> {
    fn problem(&self, kind: ProblemKind, deployment: Option<&str>, secret: Option<&str>, message: String) -> Problem {
        Problem {
            namespace: self.namespace.clone(),
            application: Some(self.app_name.clone()),
            deployment: deployment.map(str::to_string),
            secret: secret.map(str::to_string),
            message,
            kind,
        }
    }

    /// The plan of `workload`'s Deployment into `plan`, or the problems that keep it from one
    /// (a Job, or a workload consuming no rotated service, has neither).
    fn workload(&mut self, version: &CAPApplicationVersion, workload: &WorkloadDetails, plan: &mut AppPlan) {
        let version_name = version.name_any();
        let deployment_name = workload.deployment_name(&version_name);
        if let Some((deployment, message)) = workload_shape_problem(workload, &version_name) {
            plan.problems.push(self.problem(ProblemKind::InvalidWorkload, deployment.as_deref(), None, message));
            return;
        }
        if workload.deployment_definition.is_none() {
            return; // Jobs are never touched.
        }
        if !workload.consumed_btp_services.iter().any(|name| self.rotated_services.contains(name.as_str())) {
            return;
        }
        for unknown in unknown_services(workload, self.services) {
            plan.problems.push(self.problem(
                ProblemKind::UnknownService,
                Some(&deployment_name),
                None,
                format!(
                    "workload {} consumes service {unknown:?}, which CAPApplication {} does not define",
                    workload.name, self.app_name
                ),
            ));
        }
        let consumed: Vec<(usize, &ServiceInfo)> = self
            .services
            .iter()
            .enumerate()
            .filter(|(_, service)| workload.consumed_btp_services.contains(&service.name))
            .collect();
        let Some(payload) = self.payload(&consumed, &deployment_name, plan) else { return };
        let found = self.lookup.deployment(&self.namespace, &deployment_name);
        if let (None, Some(why)) = (&found, self.lookup.undecodable_deployment(&self.namespace, &deployment_name)) {
            plan.problems.push(self.problem(
                ProblemKind::InvalidObject,
                Some(&deployment_name),
                None,
                format!("Deployment {deployment_name} does not decode ({why}): not rolled until it is fixed"),
            ));
            return;
        }
        let (action, reason, current_secret) = match found {
            None => (PlanAction::Missing, "deployment does not exist".to_string(), None),
            Some(deployment) => match not_owned_by(&deployment, &version_name, version.metadata.uid.as_deref()) {
                Some(why) => (PlanAction::NotOwned, why, None),
                None => compare_with_current(&self.namespace, &deployment, &payload, self.lookup),
            },
        };
        plan.deployments.push(DeploymentPlan {
            namespace: self.namespace.clone(),
            application: self.app_name.clone(),
            version: version_name.clone(),
            workload: workload.name.clone(),
            deployment: deployment_name,
            action,
            reason,
            current_secret,
            services: consumed.iter().map(|(_, service)| service.name.clone()).collect(),
            payload,
        });
    }

    /// The VCAP_SERVICES of a Deployment consuming `consumed`, or `None` with the problems said
    /// (a service entry that cannot be built, a payload over a Secret's size).
    fn payload(
        &mut self,
        consumed: &[(usize, &ServiceInfo)],
        deployment_name: &str,
        plan: &mut AppPlan,
    ) -> Option<VcapPayload> {
        let mut parts = Vec::with_capacity(consumed.len());
        let mut broken = false;
        for (position, service) in consumed {
            let (namespace, lookup) = (&self.namespace, self.lookup);
            let entry = self.entries.entry(*position).or_insert_with(|| service_entry(namespace, service, lookup));
            match entry.clone() {
                Ok(entry) => parts.push((service.class.as_str(), entry)),
                Err(entry_problem) => {
                    broken = true;
                    plan.problems.push(self.problem(
                        entry_problem.kind,
                        Some(deployment_name),
                        Some(&service.secret),
                        entry_problem.message,
                    ));
                }
            }
        }
        if broken {
            return None;
        }
        let payload = VcapPayload::assemble(parts);
        if payload.as_bytes().len() > MAX_SECRET_BYTES {
            plan.problems.push(self.problem(
                ProblemKind::InvalidSecret,
                Some(deployment_name),
                None,
                format!(
                    "VCAP_SERVICES would be {} bytes; a Kubernetes Secret holds at most {MAX_SECRET_BYTES} \
(1 MiB): shrink the bound credentials",
                    payload.as_bytes().len()
                ),
            ));
            return None;
        }
        Some(payload)
    }
}

fn unknown_services<'a>(workload: &'a WorkloadDetails, services: &[ServiceInfo]) -> Vec<&'a str> {
    workload
        .consumed_btp_services
        .iter()
        .filter(|name| !services.iter().any(|service| &service.name == *name))
        .map(String::as_str)
        .collect()
}

/// Why a service's VCAP entry could not be built: the problem's kind and a message that names
/// the Secret and the service.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EntryProblem {
    pub kind: ProblemKind,
    pub message: String,
}

pub fn service_entry(namespace: &str, service: &ServiceInfo, lookup: &dyn ObjectLookup) -> Result<GoMap, EntryProblem> {
    match lookup.secret(namespace, &service.secret) {
        SecretLookup::Missing => Err(EntryProblem {
            kind: ProblemKind::MissingSecret,
            message: format!("binding secret {} of service {} does not exist", service.secret, service.name),
        }),
        SecretLookup::Malformed(message) => Err(EntryProblem {
            kind: ProblemKind::InvalidSecret,
            message: format!("binding secret {} of service {} is malformed: {message}", service.secret, service.name),
        }),
        SecretLookup::Found(secret) => {
            vcap::build_entry(service, &secret.data()).map_err(|error: EntryError| EntryProblem {
                kind: if error.is_invalid() { ProblemKind::InvalidSecret } else { ProblemKind::MissingSecret },
                message: error.to_string(),
            })
        }
    }
}

/// Why `deployment` is not `version`'s to write: it needs a controller ownerReference to that
/// CAPApplicationVersion, by uid (by name where the version has no uid, as in files read by
/// `plan -f`). `None` when it is owned. A Deployment that merely has the right name (a workload
/// added to a version by someone who may edit versions, not Deployments) is left alone.
pub fn not_owned_by(deployment: &DeploymentView, version_name: &str, version_uid: Option<&str>) -> Option<String> {
    let controller = deployment.metadata.owner_references.iter().flatten().find(|owner| owner.controller == Some(true));
    let owned = controller.is_some_and(|owner| {
        owner.kind == "CAPApplicationVersion"
            && owner.api_version.starts_with("sme.sap.com/")
            && owner.name == version_name
            && version_uid.is_none_or(|uid| uid == owner.uid)
    });
    if owned {
        return None;
    }
    let controlled_by = match controller {
        Some(owner) => format!("its controller is {} {}", owner.kind, owner.name),
        None => "it has no controller ownerReference".into(),
    };
    Some(format!("not owned by CAPApplicationVersion {version_name} ({controlled_by}); left alone"))
}

fn compare_with_current(
    namespace: &str,
    deployment: &DeploymentView,
    payload: &VcapPayload,
    lookup: &dyn ObjectLookup,
) -> (PlanAction, String, Option<String>) {
    let is_vcap = |name: &str| {
        matches!(lookup.secret(namespace, name), SecretLookup::Found(secret)
            if secret.label(crate::api::LABEL_SECRET_OWNER_HASH).is_some())
    };
    let current = match referenced_vcap_secret(deployment, is_vcap) {
        Ok(Some(name)) => name,
        Ok(None) => return (PlanAction::Restart, "deployment references no VCAP secret".into(), None),
        Err(names) => {
            let list = names.into_iter().collect::<Vec<_>>().join(", ");
            return (PlanAction::Restart, format!("containers do not all reference one VCAP secret ({list})"), None);
        }
    };
    let reason = match lookup.secret(namespace, &current) {
        SecretLookup::Missing => format!("referenced secret {current} does not exist"),
        SecretLookup::Malformed(_) => format!("referenced secret {current} is malformed"),
        // Named like one, but not labelled as a VCAP Secret: not capdeck's to compare or replace.
        SecretLookup::Found(secret) if secret.label(crate::api::LABEL_SECRET_OWNER_HASH).is_none() => {
            return (
                PlanAction::Restart,
                format!(
                    "referenced secret {current} is not a VCAP Secret (no {} label)",
                    crate::api::LABEL_SECRET_OWNER_HASH
                ),
                None,
            );
        }
        SecretLookup::Found(secret) => match secret.value(VCAP_SERVICES_KEY) {
            None => format!("referenced secret {current} has no {VCAP_SERVICES_KEY}"),
            Some(bytes) if payload.matches_stored(bytes) => {
                return (PlanAction::Unchanged, format!("{VCAP_SERVICES_KEY} in {current} is current"), Some(current));
            }
            Some(_) => format!("{VCAP_SERVICES_KEY} in {current} differs"),
        },
    };
    (PlanAction::Restart, reason, Some(current))
}

/// Versions in use: the latest Ready version (highest semver) plus the current version of every
/// tenant whose Ready condition is True (which includes `Upgrading` and `UpgradeError` tenants,
/// still served by their current version), if that version is Ready. Latest first.
pub fn versions_in_use(app: &CAPApplication, index: &CapIndex) -> Vec<Arc<CAPApplicationVersion>> {
    let namespace = app.namespace().unwrap_or_default();
    let mut in_use: Vec<Arc<CAPApplicationVersion>> = Vec::new();
    if let Some(latest) = latest_ready_version(index.versions_of(app)) {
        in_use.push(latest.clone());
    }
    let mut tenant_versions: BTreeMap<String, Arc<CAPApplicationVersion>> = BTreeMap::new();
    for tenant in index.tenants_of(app).iter().filter(|tenant| tenant.is_ready()) {
        let Some(name) = tenant.current_version_instance() else { continue };
        if let Some(version) = index.version(&namespace, name).filter(|version| version.is_ready()) {
            tenant_versions.insert(name.to_string(), version.clone());
        }
    }
    for (name, version) in tenant_versions {
        if !in_use.iter().any(|existing| existing.name_any() == name) {
            in_use.push(version);
        }
    }
    in_use
}

fn tenants_served(app: &CAPApplication, index: &CapIndex, versions: &[String]) -> u32 {
    let count = index
        .tenants_of(app)
        .iter()
        .filter(|tenant| tenant.current_version_instance().is_some_and(|name| versions.iter().any(|v| v == name)))
        .count();
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// The Ready version with the highest semver; invalid versions sort lowest, ties by name.
pub fn latest_ready_version(versions: &[Arc<CAPApplicationVersion>]) -> Option<&Arc<CAPApplicationVersion>> {
    versions
        .iter()
        .filter(|version| version.is_ready())
        .max_by(|a, b| compare_versions(&a.spec.version, &b.spec.version).then_with(|| b.name_any().cmp(&a.name_any())))
}

/// Go's `semver.Compare("v"+a, "v"+b)` (golang.org/x/mod/semver): `1` and `1.2` are shorthand
/// for `1.0.0` and `1.2.0`, build metadata is ignored, and an invalid version is lower than every
/// valid one.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (parse_semver(a), parse_semver(b)) {
        (Some(a), Some(b)) => a.cmp_precedence(&b),
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (None, None) => Ordering::Equal,
    }
}

pub fn parse_semver(text: &str) -> Option<semver::Version> {
    if let Ok(version) = semver::Version::parse(text) {
        return Some(version);
    }
    let all_digits = |part: &str| {
        !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) && (part == "0" || !part.starts_with('0'))
    };
    let parts: Vec<&str> = text.split('.').collect();
    match parts.as_slice() {
        [major] if all_digits(major) => semver::Version::parse(&format!("{major}.0.0")).ok(),
        [major, minor] if all_digits(major) && all_digits(minor) => {
            semver::Version::parse(&format!("{major}.{minor}.0")).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semver_compares_numerically_not_lexically() {
        assert_eq!(compare_versions("1.10.0", "1.9.0"), Ordering::Greater);
        assert_eq!(compare_versions("2.0.0-rc.1", "2.0.0"), Ordering::Less);
        assert_eq!(compare_versions("1.2", "1.2.0"), Ordering::Equal);
        assert_eq!(compare_versions("1", "0.9.9"), Ordering::Greater);
        assert_eq!(compare_versions("1.0.0+build.5", "1.0.0+build.1"), Ordering::Equal);
    }

    #[test]
    fn invalid_semver_sorts_lowest() {
        for invalid in ["latest", "v1.2.3", "01.2.3", "1.2.3.4", "", "1.x"] {
            assert_eq!(compare_versions(invalid, "0.0.1"), Ordering::Less, "{invalid}");
            assert_eq!(compare_versions("0.0.1", invalid), Ordering::Greater, "{invalid}");
        }
        assert_eq!(compare_versions("banana", "apple"), Ordering::Equal);
    }
}

#[cfg(test)]
mod plan_tests {
    use std::collections::HashMap;

    use serde_json::{Value, json};

    use super::*;
    use crate::api::CAPTenant;
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const NS: &str = "ns";

    fn ready_status(state: &str, ready: bool) -> Value {
        json!({"state": state, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]})
    }

    fn app(name: &str, opted_in: bool, services: &[(&str, &str, &str)]) -> Arc<CAPApplication> {
        let services: Vec<Value> = services
            .iter()
            .map(|(name, class, secret)| json!({"name": name, "class": class, "secret": secret}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"btpAppName": name, "providerSubaccountId": "p", "rolloutOnCredentialUpdate": opted_in,
                         "btp": {"services": services}}
            }))
            .expect("app"),
        )
    }

    fn version(name: &str, app: &str, semver: &str, ready: bool, workloads: Value) -> Arc<CAPApplicationVersion> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"capApplicationInstance": app, "version": semver, "workloads": workloads},
                "status": ready_status(if ready { "Ready" } else { "Processing" }, ready)
            }))
            .expect("version"),
        )
    }

    fn deployment_workload(name: &str, services: &[&str]) -> Value {
        json!({"name": name, "consumedBTPServices": services, "deploymentDefinition": {"type": "CAP", "image": "i"}})
    }

    fn tenant(name: &str, app: &str, state: &str, ready: bool, current: Option<&str>) -> Arc<CAPTenant> {
        let mut status = ready_status(state, ready);
        if let Some(current) = current {
            status["currentCAPApplicationVersionInstance"] = json!(current);
        }
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenant",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"capApplicationInstance": app, "subDomain": name, "tenantId": name},
                "status": status
            }))
            .expect("tenant"),
        )
    }

    #[derive(Default)]
    struct Cluster {
        secrets: HashMap<String, SecretLookup>,
        deployments: HashMap<String, Arc<DeploymentView>>,
    }

    impl Cluster {
        fn secret(mut self, name: &str, data: &[(&str, &str)]) -> Self {
            // Binding Secrets end in -bind; the others are VCAP Secrets, labelled as the operators do.
            let labels =
                if name.ends_with("-bind") { json!({}) } else { json!({crate::api::LABEL_SECRET_OWNER_HASH: "h"}) };
            let secret: Secret = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": NS, "labels": labels},
                "stringData": data.iter().map(|(k, v)| ((*k).to_string(), json!(v))).collect::<serde_json::Map<_, _>>()
            }))
            .expect("secret");
            self.secrets.insert(name.into(), SecretLookup::Found(Arc::new(secret.into())));
            self
        }

        /// The Secret `name` without the owner-hash label.
        fn unlabelled(mut self, name: &str) -> Self {
            if let Some(SecretLookup::Found(secret)) = self.secrets.get(name) {
                let data =
                    secret.entries().map(|(key, value)| (key.to_owned(), k8s_openapi::ByteString(value.to_vec())));
                let secret = Secret {
                    metadata: ObjectMeta { name: Some(name.into()), namespace: Some(NS.into()), ..Default::default() },
                    data: Some(data.collect()),
                    ..Default::default()
                };
                self.secrets.insert(name.into(), SecretLookup::Found(Arc::new(secret.into())));
            }
            self
        }

        /// The Deployment `name` with `owners` instead of its version's controller reference.
        fn owned(mut self, name: &str, owners: Value) -> Self {
            if let Some(deployment) = self.deployments.get(name) {
                let mut deployment = (**deployment).clone();
                deployment.metadata.owner_references = serde_json::from_value(owners).expect("owners");
                self.deployments.insert(name.into(), Arc::new(deployment));
            }
            self
        }

        fn deployment(mut self, name: &str, refs: &[&[&str]]) -> Self {
            let containers: Vec<Value> = refs
                .iter()
                .enumerate()
                .map(|(index, names)| {
                    let env_from: Vec<Value> =
                        names.iter().map(|n| json!({"secretRef": {"name": n, "optional": true}})).collect();
                    json!({"name": format!("c{index}"), "image": "i", "envFrom": env_from})
                })
                .collect();
            // Owned by the version its name starts with (`v1-srv` by `v1`), as the CAP Operator does.
            let version = name.rsplit_once('-').map_or(name, |(version, _)| version);
            let owners = json!([{"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion", "name": version,
                                 "uid": "", "controller": true}]);
            let deployment: DeploymentView = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": NS, "ownerReferences": owners},
                "spec": {"selector": {}, "template": {"spec": {"containers": containers}}}
            }))
            .expect("deployment");
            self.deployments.insert(name.into(), Arc::new(deployment));
            self
        }
    }

    impl ObjectLookup for Cluster {
        fn secret(&self, _: &str, name: &str) -> SecretLookup {
            self.secrets.get(name).cloned().unwrap_or(SecretLookup::Missing)
        }
        fn deployment(&self, _: &str, name: &str) -> Option<Arc<DeploymentView>> {
            self.deployments.get(name).cloned()
        }
    }

    fn credentials(value: &str) -> [(&'static str, String); 1] {
        [("credentials", value.to_string())]
    }

    fn with_creds(cluster: Cluster, name: &str, value: &str) -> Cluster {
        let pairs = credentials(value);
        cluster.secret(name, &[(pairs[0].0, pairs[0].1.as_str())])
    }

    fn one_app_index(versions: Vec<Arc<CAPApplicationVersion>>, tenants: Vec<Arc<CAPTenant>>) -> CapIndex {
        CapIndex::new(
            vec![app("app", true, &[("uaa", "xsuaa", "uaa-bind"), ("db", "hana", "db-bind")])],
            versions,
            tenants,
        )
    }

    fn names(plan: &AppPlan) -> Vec<(String, PlanAction)> {
        plan.deployments.iter().map(|d| (d.deployment.clone(), d.action)).collect()
    }

    fn plan_for(index: &CapIndex, cluster: &Cluster, rotated: &Rotated) -> AppPlan {
        plan_application(&index.applications()[0], rotated, index, cluster)
    }

    fn base_cluster() -> Cluster {
        with_creds(with_creds(Cluster::default(), "uaa-bind", r#"{"id":"u"}"#), "db-bind", r#"{"id":"d"}"#)
    }

    #[test]
    fn latest_ready_version_is_chosen_by_semver_not_by_text() {
        let index = one_app_index(
            vec![
                version("v1-9", "app", "1.9.0", true, json!([deployment_workload("srv", &["uaa"])])),
                version("v1-10", "app", "1.10.0", true, json!([deployment_workload("srv", &["uaa"])])),
                version("v2", "app", "2.0.0", false, json!([deployment_workload("srv", &["uaa"])])),
            ],
            vec![],
        );
        let plan = plan_for(&index, &base_cluster(), &Rotated::All);
        assert_eq!(plan.versions, vec!["v1-10"]);
        assert_eq!(names(&plan), vec![("v1-10-srv".to_string(), PlanAction::Missing)]);
    }

    #[test]
    fn tenant_versions_join_when_tenant_ready_including_upgrading_and_upgrade_error() {
        let workloads = json!([deployment_workload("srv", &["uaa"])]);
        let index = one_app_index(
            vec![
                version("v3", "app", "3.0.0", true, workloads.clone()),
                version("v2", "app", "2.0.0", true, workloads.clone()),
                version("v1", "app", "1.0.0", true, workloads.clone()),
                version("v0", "app", "0.9.0", true, workloads.clone()),
                version("vbroken", "app", "0.5.0", false, workloads.clone()),
            ],
            vec![
                tenant("upgrading", "app", "Upgrading", true, Some("v2")),
                tenant("upgrade-error", "app", "UpgradeError", true, Some("v1")),
                tenant("provisioning-error", "app", "ProvisioningError", false, Some("v0")),
                tenant("on-broken", "app", "Ready", true, Some("vbroken")),
                tenant("other-app", "other", "Ready", true, Some("v0")),
            ],
        );
        let plan = plan_for(&index, &base_cluster(), &Rotated::All);
        assert_eq!(plan.versions, vec!["v3", "v1", "v2"]);
        // Tenants on the versions in use: upgrading (v2) and upgrade-error (v1).
        assert_eq!(plan.tenants, 2);
    }

    #[test]
    fn only_workloads_consuming_a_rotated_service_and_never_jobs() {
        let index = one_app_index(
            vec![version(
                "v1",
                "app",
                "1.0.0",
                true,
                json!([
                    deployment_workload("Router", &["uaa"]),
                    deployment_workload("srv", &["db"]),
                    {"name": "job", "consumedBTPServices": ["uaa"], "jobDefinition": {"type": "Content", "image": "i"}},
                ]),
            )],
            vec![],
        );
        let plan = plan_for(&index, &base_cluster(), &Rotated::Secrets(["uaa-bind".to_string()].into()));
        assert_eq!(names(&plan), vec![("v1-router".to_string(), PlanAction::Missing)]);
        let plan = plan_for(&index, &base_cluster(), &Rotated::Secrets(["unrelated".to_string()].into()));
        assert!(plan.deployments.is_empty() && plan.problems.is_empty());
    }

    #[test]
    fn payload_uses_all_consumed_services_in_application_order() {
        let index = one_app_index(
            vec![version("v1", "app", "1.0.0", true, json!([deployment_workload("srv", &["db", "uaa"])]))],
            vec![],
        );
        let plan = plan_for(&index, &base_cluster(), &Rotated::Secrets(["db-bind".to_string()].into()));
        assert_eq!(plan.deployments[0].services, vec!["uaa", "db"]);
        assert_eq!(
            plan.deployments[0].payload.expose(),
            r#"{"hana":[{"credentials":{"id":"d"},"instance_name":"db","label":"hana","name":"db","tags":["hana"]}],"xsuaa":[{"credentials":{"id":"u"},"instance_name":"uaa","label":"xsuaa","name":"uaa","tags":["xsuaa"]}]}"#
        );
    }

    #[test]
    fn unchanged_only_when_the_referenced_secret_holds_exactly_the_payload() {
        let index = one_app_index(
            vec![version("v1", "app", "1.0.0", true, json!([deployment_workload("srv", &["uaa"])]))],
            vec![],
        );
        let payload = plan_for(&index, &base_cluster(), &Rotated::All).deployments[0].payload.expose().to_string();
        let cases: Vec<(Cluster, PlanAction, &str)> = vec![
            (
                base_cluster()
                    .secret("v1-srv-vcap-a", &[("VCAP_SERVICES", &payload)])
                    .deployment("v1-srv", &[&["v1-srv-vcap-a"], &["v1-srv-vcap-a"]]),
                PlanAction::Unchanged,
                "is current",
            ),
            (
                base_cluster()
                    .secret("v1-srv-vcap-a", &[("VCAP_SERVICES", "{}")])
                    .deployment("v1-srv", &[&["v1-srv-vcap-a"]]),
                PlanAction::Restart,
                "differs",
            ),
            (
                base_cluster().secret("v1-srv-vcap-a", &[("other", "x")]).deployment("v1-srv", &[&["v1-srv-vcap-a"]]),
                PlanAction::Restart,
                "has no VCAP_SERVICES",
            ),
            // A Secret that is gone is no VCAP Secret one can tell: like none.
            (base_cluster().deployment("v1-srv", &[&["v1-srv-vcap-gone"]]), PlanAction::Restart, "references no VCAP"),
            (base_cluster().deployment("v1-srv", &[&[]]), PlanAction::Restart, "references no VCAP secret"),
            // A labelled Secret with the right payload that the Deployment does not use is not enough.
            (
                base_cluster()
                    .secret("v1-srv-vcap-new", &[("VCAP_SERVICES", &payload)])
                    .secret("v1-srv-vcap-old", &[("VCAP_SERVICES", "{}")])
                    .deployment("v1-srv", &[&["v1-srv-vcap-old"]]),
                PlanAction::Restart,
                "differs",
            ),
            (
                base_cluster()
                    .secret("v1-srv-vcap-a", &[("VCAP_SERVICES", &payload)])
                    .deployment("v1-srv", &[&["v1-srv-vcap-a"], &["v1-srv-vcap-b"]]),
                PlanAction::Restart,
                "do not all reference one",
            ),
            (
                base_cluster()
                    .secret("v1-srv-vcap-a", &[("VCAP_SERVICES", &payload)])
                    .deployment("v1-srv", &[&["v1-srv-vcap-a"], &[]]),
                PlanAction::Restart,
                "do not all reference one",
            ),
            // Another team's envFrom Secret beside the VCAP one is not a VCAP Secret: not counted.
            (
                base_cluster()
                    .secret("v1-srv-vcap-a", &[("VCAP_SERVICES", &payload)])
                    .deployment("v1-srv", &[&["payments-db", "v1-srv-vcap-a"], &["v1-srv-vcap-a"]]),
                PlanAction::Unchanged,
                "is current",
            ),
            // Named like a VCAP Secret but without the owner-hash label: not one to compare with.
            (
                base_cluster()
                    .secret("v1-srv-vcap-a", &[("VCAP_SERVICES", &payload)])
                    .unlabelled("v1-srv-vcap-a")
                    .deployment("v1-srv", &[&["v1-srv-vcap-a"]]),
                PlanAction::Restart,
                "references no VCAP secret",
            ),
            // A team's Secret named like one (`<deployment>-…`), unlabelled: not counted either.
            (
                base_cluster()
                    .secret("v1-srv-vcap-a", &[("VCAP_SERVICES", &payload)])
                    .secret("v1-srv-dbconfig", &[("DB_PASSWORD", "x")])
                    .unlabelled("v1-srv-dbconfig")
                    .deployment("v1-srv", &[&["v1-srv-vcap-a", "v1-srv-dbconfig"]]),
                PlanAction::Unchanged,
                "is current",
            ),
        ];
        for (cluster, action, reason) in cases {
            let plan = plan_for(&index, &cluster, &Rotated::All);
            assert_eq!(plan.deployments[0].action, action, "{}", plan.deployments[0].reason);
            assert!(plan.deployments[0].reason.contains(reason), "{} !~ {reason}", plan.deployments[0].reason);
        }
    }

    #[test]
    fn only_a_deployment_its_version_controls_is_planned_and_the_others_are_named() {
        let index = one_app_index(
            vec![version("v1", "app", "1.0.0", true, json!([deployment_workload("srv", &["uaa"])]))],
            vec![],
        );
        let reference = |kind: &str, name: &str, uid: &str, controller: bool| json!([{"apiVersion": "sme.sap.com/v1alpha1", "kind": kind, "name": name, "uid": uid, "controller": controller}]);
        let with_uid = |uid: &str| {
            let mut versions = index.versions_of(&index.applications()[0]).to_vec();
            let mut version = (*versions[0]).clone();
            version.metadata.uid = Some(uid.into());
            versions[0] = Arc::new(version);
            CapIndex::new(index.applications().to_vec(), versions, Vec::new())
        };
        let cases: Vec<(CapIndex, Value, PlanAction, &str)> = vec![
            (
                with_uid("u-1"),
                reference("CAPApplicationVersion", "v1", "u-1", true),
                PlanAction::Restart,
                "references no",
            ),
            (with_uid("u-1"), json!([]), PlanAction::NotOwned, "it has no controller ownerReference"),
            (
                with_uid("u-1"),
                reference("CAPApplicationVersion", "v1", "u-1", false),
                PlanAction::NotOwned,
                "no controller ownerReference",
            ),
            (
                with_uid("u-1"),
                reference("CAPApplicationVersion", "v1", "u-2", true),
                PlanAction::NotOwned,
                "not owned by",
            ),
            (with_uid("u-1"), reference("CAPApplicationVersion", "v0", "u-1", true), PlanAction::NotOwned, "v0"),
            (with_uid("u-1"), reference("ReplicaSet", "v1", "u-1", true), PlanAction::NotOwned, "ReplicaSet v1"),
        ];
        for (index, owners, action, reason) in cases {
            let cluster = base_cluster().deployment("v1-srv", &[&[]]).owned("v1-srv", owners.clone());
            let plan = plan_for(&index, &cluster, &Rotated::All);
            assert_eq!(plan.deployments[0].action, action, "{owners}: {}", plan.deployments[0].reason);
            assert!(plan.deployments[0].reason.contains(reason), "{} !~ {reason}", plan.deployments[0].reason);
        }
    }

    #[test]
    fn one_broken_secret_never_stops_the_rest() {
        let index = one_app_index(
            vec![version(
                "v1",
                "app",
                "1.0.0",
                true,
                json!([
                    deployment_workload("a", &["uaa"]),
                    deployment_workload("b", &["db"]),
                    deployment_workload("c", &["uaa", "db"])
                ]),
            )],
            vec![],
        );
        let mut cluster = with_creds(Cluster::default(), "uaa-bind", r#"{"id":"u"}"#);
        cluster.secrets.insert("db-bind".into(), SecretLookup::Malformed("data key \"x\" is not valid base64".into()));
        let plan = plan_for(&index, &cluster, &Rotated::All);
        assert_eq!(names(&plan), vec![("v1-a".to_string(), PlanAction::Missing)]);
        assert_eq!(plan.problems.len(), 2);
        assert!(
            plan.problems
                .iter()
                .all(|p| p.kind == ProblemKind::InvalidSecret && p.secret.as_deref() == Some("db-bind"))
        );
        assert_eq!(plan.problems[0].deployment.as_deref(), Some("v1-b"));

        let cluster = with_creds(Cluster::default(), "uaa-bind", "[1]");
        let plan = plan_for(&index, &cluster, &Rotated::All);
        assert!(plan.deployments.is_empty());
        assert!(
            plan.problems
                .iter()
                .any(|p| p.kind == ProblemKind::MissingSecret && p.secret.as_deref() == Some("db-bind"))
        );
        assert!(
            plan.problems
                .iter()
                .any(|p| p.kind == ProblemKind::InvalidSecret && p.message.contains("could not parse credentials"))
        );
    }

    #[test]
    fn invalid_workloads_and_unknown_services_are_reported() {
        let index = one_app_index(
            vec![version(
                "v1",
                "app",
                "1.0.0",
                true,
                json!([
                    {"name": "both", "consumedBTPServices": ["uaa"], "deploymentDefinition": {"type": "CAP", "image": "i"}, "jobDefinition": {"type": "Content", "image": "i"}},
                    deployment_workload("srv", &["uaa", "ghost"]),
                ]),
            )],
            vec![],
        );
        let plan = plan_for(&index, &base_cluster(), &Rotated::All);
        let kinds: Vec<ProblemKind> = plan.problems.iter().map(|p| p.kind).collect();
        assert_eq!(kinds, vec![ProblemKind::InvalidWorkload, ProblemKind::UnknownService]);
        assert_eq!(names(&plan), vec![("v1-srv".to_string(), PlanAction::Missing)]);
    }

    #[test]
    fn no_version_in_use_is_a_problem_not_silence() {
        let index = one_app_index(vec![version("v1", "app", "1.0.0", false, json!([]))], vec![]);
        let plan = plan_for(&index, &base_cluster(), &Rotated::All);
        assert_eq!(plan.problems[0].kind, ProblemKind::NoVersionInUse);
    }

    #[test]
    fn plan_all_covers_opted_in_applications_only_with_annotation_opt_in() {
        let mut annotated = (*app("annotated", false, &[("uaa", "xsuaa", "uaa-bind")])).clone();
        annotated.metadata.annotations =
            Some([(crate::api::ANNOTATION_ROLLOUT.to_string(), "true".to_string())].into());
        let index = CapIndex::new(
            vec![
                Arc::new(annotated),
                app("off", false, &[("uaa", "xsuaa", "uaa-bind")]),
                app("on", true, &[("uaa", "xsuaa", "uaa-bind")]),
            ],
            ["annotated", "off", "on"]
                .map(|a| version(&format!("{a}-v1"), a, "1.0.0", true, json!([deployment_workload("srv", &["uaa"])]))),
            vec![],
        );
        let plan = plan_all(&index, &base_cluster());
        let deployments: Vec<&str> = plan.deployments.iter().map(|d| d.deployment.as_str()).collect();
        assert_eq!(deployments, vec!["annotated-v1-srv", "on-v1-srv"]);
    }
}
