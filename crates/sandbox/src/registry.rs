//! The resource types the sandbox serves: a fixed set of built-ins plus whatever CRDs are
//! registered through `apiextensions.k8s.io/v1`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// One printer column of a resource (CRD `additionalPrinterColumns` or a built-in's).
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub json_path: String,
    pub description: String,
    pub priority: i64,
}

/// A resource the sandbox serves. Storage is keyed by (group, plural): one version per group.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    /// Review APIs (SelfSubjectReview, ...) only accept `create` and store nothing.
    pub create_only: bool,
    pub columns: Vec<PrinterColumn>,
    /// Registered through a CustomResourceDefinition (the CRD's name).
    pub crd: Option<String>,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    pub fn group_version(&self) -> String {
        self.api_version()
    }

    /// `secrets` or `deployments.apps`: the "resource" in error messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.clone() } else { format!("{}.{}", self.plural, self.group) }
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        if self.create_only {
            vec!["create"]
        } else {
            vec!["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        }
    }

    /// The `APIResource` entries of discovery: the resource and, if any, its status subresource.
    pub fn discovery(&self) -> Vec<Value> {
        let mut main = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": self.verbs(),
        });
        if !self.short_names.is_empty() {
            main["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            main["categories"] = json!(self.categories);
        }
        let mut entries = vec![main];
        if self.status_subresource {
            entries.push(json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        entries
    }
}

fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
) -> ResourceType {
    ResourceType {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        namespaced,
        short_names: short.iter().map(|s| (*s).to_string()).collect(),
        categories: Vec::new(),
        status_subresource: status,
        create_only: false,
        columns: Vec::new(),
        crd: None,
    }
}

fn column(name: &str, type_: &str, json_path: &str) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        json_path: json_path.into(),
        description: String::new(),
        priority: 0,
    }
}

/// The built-in resources capdeck, kube-rs and the usual kubectl commands touch.
pub fn builtins() -> Vec<ResourceType> {
    let mut deployments = builtin("apps", "v1", "deployments", "Deployment", true, &["deploy"], true);
    deployments.columns = vec![
        column("Ready", "string", ".status.readyReplicas"),
        column("Up-to-date", "integer", ".status.updatedReplicas"),
        column("Available", "integer", ".status.availableReplicas"),
    ];
    let mut secrets = builtin("", "v1", "secrets", "Secret", true, &[], false);
    secrets.columns = vec![column("Type", "string", ".type")];
    let mut namespaces = builtin("", "v1", "namespaces", "Namespace", false, &["ns"], true);
    namespaces.columns = vec![column("Status", "string", ".status.phase")];
    let mut jobs = builtin("batch", "v1", "jobs", "Job", true, &[], true);
    jobs.columns = vec![column("Succeeded", "integer", ".status.succeeded")];
    let mut leases = builtin("coordination.k8s.io", "v1", "leases", "Lease", true, &[], false);
    leases.columns = vec![column("Holder", "string", ".spec.holderIdentity")];
    let mut crds = builtin(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        true,
    );
    crds.columns = vec![column("Created At", "string", ".metadata.creationTimestamp")];
    let mut self_review =
        builtin("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", false, &[], false);
    self_review.create_only = true;
    let mut access_review =
        builtin("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", false, &[], false);
    access_review.create_only = true;
    let mut events = builtin("", "v1", "events", "Event", true, &["ev"], false);
    events.columns = vec![
        column("Type", "string", ".type"),
        column("Reason", "string", ".reason"),
        column("Message", "string", ".message"),
    ];
    let mut new_events = builtin("events.k8s.io", "v1", "events", "Event", true, &["ev"], false);
    new_events.columns = vec![
        column("Type", "string", ".type"),
        column("Reason", "string", ".reason"),
        column("Note", "string", ".note"),
    ];
    vec![
        namespaces,
        secrets,
        builtin("", "v1", "configmaps", "ConfigMap", true, &["cm"], false),
        builtin("", "v1", "services", "Service", true, &["svc"], true),
        builtin("", "v1", "serviceaccounts", "ServiceAccount", true, &["sa"], false),
        builtin("", "v1", "pods", "Pod", true, &["po"], true),
        events,
        deployments,
        builtin("apps", "v1", "replicasets", "ReplicaSet", true, &["rs"], true),
        jobs,
        leases,
        new_events,
        crds,
        builtin("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, &[], false),
        builtin("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false, &[], false),
        builtin("rbac.authorization.k8s.io", "v1", "roles", "Role", true, &[], false),
        builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, &[], false),
        self_review,
        access_review,
    ]
}

/// The served resources, looked up by group/version/plural, by kind, or by short name.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    /// (group, version, plural) -> type
    types: BTreeMap<(String, String, String), ResourceType>,
}

impl Registry {
    pub fn with_builtins() -> Self {
        let mut registry = Self::default();
        for resource in builtins() {
            registry.insert(resource);
        }
        registry
    }

    pub fn insert(&mut self, resource: ResourceType) {
        self.types.insert((resource.group.clone(), resource.version.clone(), resource.plural.clone()), resource);
    }

    pub fn remove_crd(&mut self, crd_name: &str) -> Vec<ResourceType> {
        let removed: Vec<ResourceType> =
            self.types.values().filter(|resource| resource.crd.as_deref() == Some(crd_name)).cloned().collect();
        self.types.retain(|_, resource| resource.crd.as_deref() != Some(crd_name));
        removed
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types.get(&(group.to_string(), version.to_string(), plural.to_string()))
    }

    /// Any version of (group, plural): storage does not depend on the version.
    pub fn by_group_plural(&self, group: &str, plural: &str) -> Option<&ResourceType> {
        self.types.values().find(|resource| resource.group == group && resource.plural == plural)
    }

    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&ResourceType> {
        self.types.values().find(|resource| resource.api_version() == api_version && resource.kind == kind)
    }

    pub fn all(&self) -> impl Iterator<Item = &ResourceType> {
        self.types.values()
    }

    /// Group → versions served, groups in a stable order (core first).
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for resource in self.types.values() {
            let versions = groups.entry(resource.group.clone()).or_default();
            if !versions.contains(&resource.version) {
                versions.push(resource.version.clone());
            }
        }
        groups
    }

    pub fn in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a ResourceType> + 'a {
        self.types.values().filter(move |resource| resource.group == group && resource.version == version)
    }
}

/// The resource type a CustomResourceDefinition object declares (first served version).
pub fn from_crd(crd: &Value) -> Result<ResourceType, String> {
    let spec = crd.get("spec").ok_or("spec is required")?;
    let text = |pointer: &str| spec.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    let group = text("/group").ok_or("spec.group is required")?;
    let plural = text("/names/plural").ok_or("spec.names.plural is required")?;
    let kind = text("/names/kind").ok_or("spec.names.kind is required")?;
    let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    if name != format!("{plural}.{group}") {
        return Err(format!("metadata.name must be spec.names.plural+\".\"+spec.group ({plural}.{group})"));
    }
    let versions = spec.get("versions").and_then(Value::as_array).ok_or("spec.versions is required")?;
    let version = versions
        .iter()
        .find(|version| version.get("storage").and_then(Value::as_bool) == Some(true))
        .or_else(|| versions.first())
        .ok_or("spec.versions must not be empty")?;
    let strings = |value: Option<&Value>| -> Vec<String> {
        value
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    };
    let columns = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|columns| {
            columns
                .iter()
                .map(|column| PrinterColumn {
                    name: column.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                    type_: column.get("type").and_then(Value::as_str).unwrap_or("string").to_string(),
                    json_path: column.get("jsonPath").and_then(Value::as_str).unwrap_or_default().to_string(),
                    description: column.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
                    priority: column.get("priority").and_then(Value::as_i64).unwrap_or(0),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(ResourceType {
        group,
        version: version.get("name").and_then(Value::as_str).ok_or("spec.versions[].name is required")?.to_string(),
        singular: text("/names/singular").unwrap_or_else(|| kind.to_lowercase()),
        plural,
        kind,
        namespaced: text("/scope").as_deref() != Some("Cluster"),
        short_names: strings(spec.pointer("/names/shortNames")),
        categories: strings(spec.pointer("/names/categories")),
        status_subresource: version.pointer("/subresources/status").is_some(),
        create_only: false,
        columns,
        crd: Some(name.to_string()),
    })
}
