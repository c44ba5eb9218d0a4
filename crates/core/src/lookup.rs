//! The world the planner and the credential checks read, as point lookups: the `ObjectLookup`
//! trait (a Secret, a Deployment by namespace and name), what a Secret lookup finds
//! (`SecretLookup`), the CAP objects indexed by application (`CapIndex`), and `Objects`, the one
//! in-memory implementation (manifests, the demo's sample, `deps`, the benchmarks' seed, tests).
//! The engine answers from its reflector stores (`cluster::stores`).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use crate::api::{CAPApplication, CAPApplicationVersion, CAPTenant, DeploymentView, ObjectKey, StoredSecret};

/// What the planner can find out about a Secret.
#[derive(Clone, Debug)]
pub enum SecretLookup {
    Found(Arc<StoredSecret>),
    /// The object exists but could not be decoded (e.g. invalid base64 in a manifest).
    Malformed(String),
    Missing,
}

/// Point reads the planner needs besides the CAP objects. The engine answers from its reflector
/// stores, `capdeck plan` from the manifests it loaded.
pub trait ObjectLookup {
    fn secret(&self, namespace: &str, name: &str) -> SecretLookup;
    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<DeploymentView>>;
    /// Why a Deployment that exists is not readable (it does not decode), if so: a Deployment
    /// capdeck cannot read is not a missing one.
    fn undecodable_deployment(&self, _namespace: &str, _name: &str) -> Option<String> {
        None
    }
}

/// The CAP objects, indexed by the application they belong to (`spec.capApplicationInstance`
/// in the same namespace).
#[derive(Default)]
pub struct CapIndex {
    applications: Vec<Arc<CAPApplication>>,
    versions: HashMap<ObjectKey, Vec<Arc<CAPApplicationVersion>>>,
    versions_by_name: HashMap<ObjectKey, Arc<CAPApplicationVersion>>,
    tenants: HashMap<ObjectKey, Vec<Arc<CAPTenant>>>,
}

impl CapIndex {
    pub fn new(
        applications: Vec<Arc<CAPApplication>>,
        versions: impl IntoIterator<Item = Arc<CAPApplicationVersion>>,
        tenants: impl IntoIterator<Item = Arc<CAPTenant>>,
    ) -> Self {
        let mut index = Self { applications, ..Self::default() };
        for version in versions {
            let namespace = version.namespace().unwrap_or_default();
            index.versions_by_name.insert(ObjectKey::new(namespace.clone(), version.name_any()), version.clone());
            index
                .versions
                .entry(ObjectKey::new(namespace, version.spec.cap_application_instance.clone()))
                .or_default()
                .push(version);
        }
        for tenant in tenants {
            let key =
                ObjectKey::new(tenant.namespace().unwrap_or_default(), tenant.spec.cap_application_instance.clone());
            index.tenants.entry(key).or_default().push(tenant);
        }
        index.applications.sort_by_key(|app| (app.namespace(), app.name_any()));
        index
    }

    pub fn applications(&self) -> &[Arc<CAPApplication>] {
        &self.applications
    }

    pub fn versions_of(&self, app: &CAPApplication) -> &[Arc<CAPApplicationVersion>] {
        self.versions.get(&ObjectKey::of(&app.metadata)).map_or(&[], Vec::as_slice)
    }

    pub fn tenants_of(&self, app: &CAPApplication) -> &[Arc<CAPTenant>] {
        self.tenants.get(&ObjectKey::of(&app.metadata)).map_or(&[], Vec::as_slice)
    }

    pub fn version(&self, namespace: &str, name: &str) -> Option<&Arc<CAPApplicationVersion>> {
        self.versions_by_name.get(&ObjectKey::new(namespace, name))
    }
}

/// Secrets and Deployments held in memory, by (namespace, name).
#[derive(Clone, Debug, Default)]
pub struct Objects {
    pub secrets: HashMap<ObjectKey, SecretLookup>,
    pub deployments: HashMap<ObjectKey, Arc<DeploymentView>>,
    /// Deployments that exist but could not be read or decoded, and why.
    pub unreadable_deployments: HashMap<ObjectKey, String>,
}

impl Objects {
    /// Add a Secret under its own namespace and name, as the planner reads it.
    pub fn add_secret(&mut self, secret: Secret) {
        let secret = StoredSecret::new(secret);
        let key = ObjectKey::new(secret.namespace().unwrap_or_default(), secret.name());
        self.secrets.insert(key, SecretLookup::Found(Arc::new(secret)));
    }

    /// Add a Deployment under its own namespace and name.
    pub fn add_deployment(&mut self, deployment: Arc<DeploymentView>) {
        self.deployments.insert(ObjectKey::of(&deployment.metadata), deployment);
    }
}

impl ObjectLookup for Objects {
    fn secret(&self, namespace: &str, name: &str) -> SecretLookup {
        self.secrets.get(&ObjectKey::new(namespace, name)).cloned().unwrap_or(SecretLookup::Missing)
    }

    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<DeploymentView>> {
        self.deployments.get(&ObjectKey::new(namespace, name)).cloned()
    }

    fn undecodable_deployment(&self, namespace: &str, name: &str) -> Option<String> {
        self.unreadable_deployments.get(&ObjectKey::new(namespace, name)).cloned()
    }
}
