//! The object store: every object as JSON, one global resourceVersion (like the etcd revision),
//! a bounded history for watches, and the write semantics of the API server (generateName,
//! optimistic concurrency, generation, status subresource, finalizers, garbage collection,
//! Secret `stringData`, CRD registration).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use super::ownership;
use super::patch::{PatchType, apply_patch};
use super::registry::{Registry, ResourceType, from_crd};
use super::selectors::Selectors;
use crate::api::common::is_dns_subdomain as valid_name;

mod api_error;
mod bodies;

pub use api_error::ApiError;
use bodies::{
    check_type, default_deployment, merge_for_update, normalise_secret, owner_uids, spec_changed,
    without_managed_fields,
};

pub type Object = Arc<Value>;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub group: String,
    pub plural: String,
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(resource: &ResourceType, namespace: &str, name: &str) -> Self {
        Self {
            group: resource.group.clone(),
            plural: resource.plural.clone(),
            namespace: if resource.namespaced { namespace.to_string() } else { String::new() },
            name: name.to_string(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed write, as watches see it.
#[derive(Debug)]
pub struct Change {
    pub revision: u64,
    pub kind: ChangeKind,
    pub key: ObjectKey,
    pub object: Object,
    pub previous: Option<Object>,
}

#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    /// Server-side apply `force`: take fields other managers own instead of a 409.
    pub force: bool,
}

impl WriteOptions {
    fn manager(&self) -> &str {
        self.field_manager.as_deref().filter(|m| !m.is_empty()).unwrap_or("unknown")
    }
}

#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub dry_run: bool,
    pub orphan: bool,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
}

/// What a new watch gets: the events to send first, the live feed, and the revision it starts at.
pub type Subscription = (Vec<(ChangeKind, Object)>, broadcast::Receiver<Arc<Change>>, u64);

/// Which fields a write claims for its manager.
enum OwnedWrite {
    /// A server-side apply: the applied fields.
    Apply(std::collections::BTreeSet<ownership::Path>),
    /// Any other write: the fields it changed.
    Update,
}

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchStart {
    /// Synthetic ADDED events for the current state (resourceVersion unset or "0").
    CurrentState,
    /// Every change after this revision.
    After(u64),
}

pub struct Store {
    pub registry: Registry,
    objects: BTreeMap<ObjectKey, Object>,
    revision: u64,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Watches and continue tokens from before this revision get 410 Gone.
    floor: u64,
    events: broadcast::Sender<Arc<Change>>,
}

pub fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn random_suffix(length: usize) -> String {
    use rand::RngExt as _;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..length).map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())])).collect()
}

/// kube-apiserver's second cause when a schema error kept its CEL rules from being evaluated.
const RULES_NOT_CHECKED: &str = "<nil>: Invalid value: null: some validation rules were not checked because the \
object was invalid; correct the existing errors to complete validation";

fn new_uid() -> String {
    use rand::RngExt as _;
    let bits: u128 = rand::rng().random();
    let hex = format!("{bits:032x}");
    format!("{}-{}-4{}-a{}-{}", &hex[0..8], &hex[8..12], &hex[13..16], &hex[17..20], &hex[20..32])
}

/// The object's metadata map, created if missing. Callers pass JSON objects only (request
/// bodies are checked with `is_object` first).
fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    match object.get_mut("metadata") {
        Some(Value::Object(map)) => map,
        _ => unreachable!("metadata was just made an object"),
    }
}

fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str)
}

pub fn resource_version(object: &Value) -> Option<u64> {
    meta_str(object, "resourceVersion").and_then(|rv| rv.parse().ok())
}

/// kube-apiserver's `TotalAnnotationSizeLimitB`: 256 KiB over all keys and values.
pub const ANNOTATIONS_SIZE_LIMIT: usize = 256 * 1024;

/// A namespaced object takes the request's namespace (a different one in its body is refused,
/// as kube-apiserver does); a cluster-scoped one has none.
fn place_in_namespace(resource: &ResourceType, namespace: &str, body: &mut Value) -> Result<(), ApiError> {
    let metadata = metadata_mut(body);
    if !resource.namespaced {
        metadata.remove("namespace");
        return Ok(());
    }
    match metadata.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() && ns != namespace => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            metadata.insert("namespace".into(), Value::String(namespace.to_string()));
            Ok(())
        }
    }
}

/// kube-apiserver's `ValidateAnnotationsSize`: the sum of `len(key) + len(value)` in bytes must not
/// exceed 256 KiB. Client-side `kubectl apply` copies the whole object into an annotation, so a
/// large CRD fails here and needs `--server-side`.
fn check_annotations_size(resource: &ResourceType, name: &str, object: &Value) -> Result<(), ApiError> {
    let total: usize = object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|annotations| annotations.iter().map(|(key, value)| key.len() + value.as_str().map_or(0, str::len)).sum())
        .unwrap_or(0);
    if total > ANNOTATIONS_SIZE_LIMIT {
        return Err(ApiError::invalid_field(
            resource,
            name,
            "metadata.annotations",
            "FieldValueTooLong",
            &format!("Too long: may not be more than {ANNOTATIONS_SIZE_LIMIT} bytes"),
        ));
    }
    Ok(())
}

impl Store {
    /// A custom resource against its CRD's `openAPIV3Schema` (`maxLength`, `pattern`): 422 with
    /// kube-apiserver's wording, the first violation only.
    fn check_schema(
        &self,
        resource: &ResourceType,
        name: &str,
        object: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let Some(crd_name) = &resource.crd else { return Ok(()) };
        let key = ObjectKey {
            group: "apiextensions.k8s.io".into(),
            plural: "customresourcedefinitions".into(),
            namespace: String::new(),
            name: crd_name.clone(),
        };
        let Some(crd) = self.objects.get(&key) else { return Ok(()) };
        let Some(violation) = super::schema::validate(crd, &resource.version, object, old).into_iter().next() else {
            return Ok(());
        };
        let mut error = ApiError::invalid_field(resource, name, &violation.field, violation.reason, &violation.message);
        // kube-apiserver does not evaluate a schema's CEL rules on a value over its maxLength (their
        // cost is bounded by it), and says so in a second cause (the sandbox evaluates none).
        if violation.reason == "FieldValueTooLong" && super::schema::has_rules(crd, &resource.version) {
            let message = error.message.clone();
            let (head, cause) = message.split_once(" is invalid: ").unwrap_or((message.as_str(), ""));
            error.message = format!("{head} is invalid: [{cause}, {RULES_NOT_CHECKED}]");
        }
        Err(error)
    }

    pub fn new(history_limit: usize, watch_buffer: usize) -> Self {
        let (events, _) = broadcast::channel(watch_buffer.max(16));
        Self {
            registry: Registry::with_builtins(),
            objects: BTreeMap::new(),
            revision: 0,
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            floor: 0,
            events,
        }
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Forget history: watches and continue tokens from before now get 410 Gone.
    pub fn compact(&mut self) {
        self.history.clear();
        self.floor = self.revision;
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.events.subscribe()
    }

    fn commit(&mut self, kind: ChangeKind, key: ObjectKey, mut object: Value, previous: Option<Object>) -> Object {
        self.revision += 1;
        metadata_mut(&mut object).insert("resourceVersion".into(), Value::String(self.revision.to_string()));
        let object = Arc::new(object);
        match kind {
            ChangeKind::Deleted => {
                self.objects.remove(&key);
            }
            _ => {
                self.objects.insert(key.clone(), object.clone());
            }
        }
        let change = Arc::new(Change { revision: self.revision, kind, key, object: object.clone(), previous });
        self.history.push_back(change.clone());
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.floor = self.floor.max(dropped.revision);
            }
        }
        // Nobody listening is fine.
        let _ = self.events.send(change);
        object
    }

    pub fn get(&self, resource: &ResourceType, namespace: &str, name: &str) -> Result<Object, ApiError> {
        self.objects
            .get(&ObjectKey::new(resource, namespace, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(resource, name))
    }

    pub fn namespace_exists(&self, namespace: &str) -> bool {
        self.objects.contains_key(&ObjectKey {
            group: String::new(),
            plural: "namespaces".into(),
            namespace: String::new(),
            name: namespace.into(),
        })
    }

    /// Objects of a resource, optionally in one namespace, matching the selectors, in key order,
    /// starting after `after` (a continue position).
    pub fn list(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        selectors: &Selectors,
        after: Option<&(String, String)>,
        limit: Option<usize>,
    ) -> (Vec<Object>, Option<(String, String)>) {
        let start = ObjectKey {
            group: resource.group.clone(),
            plural: resource.plural.clone(),
            namespace: after.map(|a| a.0.clone()).or_else(|| namespace.map(str::to_string)).unwrap_or_default(),
            name: after.map(|a| a.1.clone()).unwrap_or_default(),
        };
        if let (Some(namespace), Some(name), None) = (namespace, selectors.fields.exact_name(), after) {
            let key = ObjectKey { namespace: namespace.to_string(), name: name.to_string(), ..start };
            let one = self.objects.get(&key).filter(|object| selectors.matches(object)).cloned();
            return (one.into_iter().collect(), None);
        }
        let mut items = Vec::new();
        let mut next = None;
        for (key, object) in self.objects.range(start..) {
            if key.group != resource.group || key.plural != resource.plural {
                break;
            }
            if let Some(ns) = namespace
                && key.namespace != ns
            {
                if key.namespace.as_str() > ns {
                    break;
                }
                continue;
            }
            if after.is_some_and(|a| a.0 == key.namespace && a.1 == key.name) {
                continue;
            }
            if !selectors.matches(object) {
                continue;
            }
            if limit.is_some_and(|limit| items.len() >= limit) {
                next = items.last().map(|last: &Object| {
                    (
                        meta_str(last, "namespace").unwrap_or_default().to_string(),
                        meta_str(last, "name").unwrap_or_default().to_string(),
                    )
                });
                break;
            }
            items.push(object.clone());
        }
        (items, next)
    }

    /// The floor for continue tokens and watches.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// What a new watch must send first, plus a receiver for what follows. Taken under the same
    /// lock as writes, so nothing falls between the two.
    pub fn watch(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        selectors: &Selectors,
        start: WatchStart,
    ) -> Result<Subscription, ApiError> {
        let receiver = self.events.subscribe();
        let initial = match start {
            WatchStart::CurrentState => {
                let (items, _) = self.list(resource, namespace, selectors, None, None);
                items.into_iter().map(|object| (ChangeKind::Added, object)).collect()
            }
            WatchStart::After(revision) => {
                if revision < self.floor {
                    return Err(ApiError::gone(format!("too old resource version: {revision} ({})", self.floor + 1)));
                }
                self.history
                    .iter()
                    .filter(|change| change.revision > revision)
                    .filter(|change| change.key.group == resource.group && change.key.plural == resource.plural)
                    .filter(|change| namespace.is_none_or(|ns| change.key.namespace == ns))
                    .filter_map(|change| classify(change, selectors))
                    .collect()
            }
        };
        Ok((initial, receiver, self.revision))
    }

    /// Insert an object as given (status included): seeds and restores, not the API path.
    pub fn seed(&mut self, mut object: Value) -> Result<Object, String> {
        let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
        let resource = self
            .registry
            .by_kind(&api_version, &kind)
            .cloned()
            .ok_or_else(|| format!("unknown kind {api_version} {kind}"))?;
        let namespace = meta_str(&object, "namespace").unwrap_or("default").to_string();
        let name = meta_str(&object, "name").ok_or_else(|| format!("{kind} without metadata.name"))?.to_string();
        let key = ObjectKey::new(&resource, &namespace, &name);
        let previous = self.objects.get(&key).cloned();
        {
            let metadata = metadata_mut(&mut object);
            if resource.namespaced {
                metadata.insert("namespace".into(), Value::String(namespace.clone()));
            } else {
                metadata.remove("namespace");
            }
            metadata.entry("uid").or_insert_with(|| Value::String(new_uid()));
            metadata.entry("creationTimestamp").or_insert_with(|| Value::String(now_rfc3339()));
            metadata.entry("generation").or_insert(json!(1));
        }
        normalise_secret(&resource, &mut object).map_err(|error| error.message)?;
        if resource.plural == "namespaces" && object.pointer("/status/phase").is_none() {
            object["status"] = json!({"phase": "Active"});
        }
        if resource.crd.is_none() && resource.group == "apiextensions.k8s.io" {
            self.register_crd(&mut object).map_err(|error| error.message)?;
        }
        let kind = if previous.is_some() { ChangeKind::Modified } else { ChangeKind::Added };
        Ok(self.commit(kind, key, object, previous))
    }

    pub fn create(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        body: Value,
        options: &WriteOptions,
    ) -> Result<Object, ApiError> {
        self.create_as(resource, namespace, body, options, "Update")
    }

    /// The name of an object to create: its own, or one made from its `generateName` (written
    /// into it) that no object has.
    fn name_of_new(&self, resource: &ResourceType, namespace: &str, body: &mut Value) -> Result<String, ApiError> {
        let metadata = metadata_mut(body);
        if let Some(name) = metadata.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            return Ok(name.to_string());
        }
        let Some(prefix) = metadata.get("generateName").and_then(Value::as_str).filter(|p| !p.is_empty()) else {
            return Err(ApiError::invalid(
                resource,
                "",
                "metadata.name: Required value: name or generateName is required",
            ));
        };
        let prefix = prefix.to_string();
        let mut candidate = format!("{prefix}{}", random_suffix(5));
        while self.objects.contains_key(&ObjectKey::new(resource, namespace, &candidate)) {
            candidate = format!("{prefix}{}", random_suffix(5));
        }
        metadata.insert("name".into(), Value::String(candidate.clone()));
        Ok(candidate)
    }

    fn create_as(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        mut body: Value,
        options: &WriteOptions,
        operation: &str,
    ) -> Result<Object, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request("the request body must be a JSON object"));
        }
        check_type(resource, &mut body)?;
        place_in_namespace(resource, namespace, &mut body)?;
        let name = self.name_of_new(resource, namespace, &mut body)?;
        if !valid_name(&name) {
            return Err(ApiError::invalid(
                resource,
                &name,
                "metadata.name: Invalid value: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'",
            ));
        }
        if resource.namespaced && !self.namespace_exists(namespace) {
            let namespaces = self.registry.get("", "v1", "namespaces").cloned();
            return Err(namespaces.map_or_else(
                || ApiError::new(404, "NotFound", format!("namespaces \"{namespace}\" not found")),
                |ns| ApiError::not_found(&ns, namespace),
            ));
        }
        let key = ObjectKey::new(resource, namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(resource, &name));
        }
        check_annotations_size(resource, &name, &body)?;
        self.check_schema(resource, &name, &body, None)?;
        let now = now_rfc3339();
        let metadata = metadata_mut(&mut body);
        metadata.insert("uid".into(), Value::String(new_uid()));
        metadata.insert("creationTimestamp".into(), Value::String(now.clone()));
        metadata.insert("generation".into(), json!(1));
        metadata.remove("deletionTimestamp");
        metadata.remove("resourceVersion");
        metadata.remove("managedFields");
        if resource.status_subresource && resource.plural != "namespaces" {
            // As on a real server, status is not written through the main resource.
            if let Some(object) = body.as_object_mut() {
                object.remove("status");
            }
        }
        normalise_secret(resource, &mut body)?;
        if resource.plural == "namespaces" {
            body["status"] = json!({"phase": "Active"});
        }
        let owned = ownership::leaf_paths(&body);
        // Defaults are the server's: applied after ownership, as kube-apiserver does.
        default_deployment(resource, &mut body);
        ownership::record(
            &mut body,
            options.manager(),
            operation,
            &resource.api_version(),
            &now,
            &owned,
            &Default::default(),
        );
        if resource.group == "apiextensions.k8s.io" && !options.dry_run {
            self.register_crd(&mut body)?;
        }
        if options.dry_run {
            return Ok(Arc::new(body));
        }
        Ok(self.commit(ChangeKind::Added, key, body, None))
    }

    pub fn update(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        mut body: Value,
        status_only: bool,
        options: &WriteOptions,
    ) -> Result<Object, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request("the request body must be a JSON object"));
        }
        check_type(resource, &mut body)?;
        let existing = self.get(resource, namespace, name)?;
        if let Some(body_name) = meta_str(&body, "name").filter(|n| !n.is_empty())
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if let Some(wanted) = meta_str(&body, "resourceVersion").filter(|rv| !rv.is_empty())
            && Some(wanted) != meta_str(&existing, "resourceVersion")
        {
            return Err(ApiError::conflict(resource, name));
        }
        let merged = merge_for_update(resource, &existing, body, status_only);
        self.finish_update(resource, namespace, name, existing, merged, options, OwnedWrite::Update)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        kind: PatchType,
        patch: &Value,
        status_only: bool,
        options: &WriteOptions,
    ) -> Result<Object, ApiError> {
        if kind == PatchType::Apply && options.field_manager.as_deref().is_none_or(str::is_empty) {
            return Err(ApiError::invalid(resource, name, "fieldManager: Required value: is required for apply patch"));
        }
        let existing = match self.get(resource, namespace, name) {
            Ok(existing) => existing,
            Err(error) if kind == PatchType::Apply && !status_only => {
                let _ = error;
                let mut body = patch.clone();
                if !body.is_object() {
                    return Err(ApiError::bad_request("the apply body must be an object"));
                }
                metadata_mut(&mut body).insert("name".into(), Value::String(name.to_string()));
                return self.create_as(resource, namespace, body, options, "Apply");
            }
            Err(error) => return Err(error),
        };
        if kind == PatchType::Apply && !options.force {
            let conflicts = ownership::apply_conflicts(&existing, patch, options.manager());
            if !conflicts.is_empty() {
                let list: Vec<String> = conflicts
                    .iter()
                    .map(|(manager, path)| format!("conflict with \"{manager}\": {}", ownership::dotted(path)))
                    .collect();
                let mut error = ApiError::conflict(resource, name);
                error.message = format!("Apply failed with {} conflict(s): {}", conflicts.len(), list.join(", "));
                return Err(error);
            }
        }
        let mut working = (*existing).clone();
        apply_patch(kind, &mut working, patch, resource.crd.is_none()).map_err(|message| {
            if kind == PatchType::Strategic {
                ApiError::new(415, "UnsupportedMediaType", message)
            } else {
                ApiError::invalid(resource, name, message)
            }
        })?;
        if meta_str(&working, "resourceVersion") != meta_str(&existing, "resourceVersion") {
            return Err(ApiError::conflict(resource, name));
        }
        if meta_str(&working, "name") != Some(name) {
            return Err(ApiError::bad_request("metadata.name cannot be changed by a patch"));
        }
        let merged = merge_for_update(resource, &existing, working, status_only);
        let write =
            if kind == PatchType::Apply { OwnedWrite::Apply(ownership::leaf_paths(patch)) } else { OwnedWrite::Update };
        self.finish_update(resource, namespace, name, existing, merged, options, write)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_update(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        existing: Object,
        mut updated: Value,
        options: &WriteOptions,
        write: OwnedWrite,
    ) -> Result<Object, ApiError> {
        check_annotations_size(resource, name, &updated)?;
        self.check_schema(resource, name, &updated, Some(&existing))?;
        normalise_secret(resource, &mut updated)?;
        default_deployment(resource, &mut updated);
        let generation = existing.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
        let generation = if spec_changed(&existing, &updated) { generation + 1 } else { generation };
        {
            let metadata = metadata_mut(&mut updated);
            metadata.insert("generation".into(), json!(generation));
            metadata.insert("resourceVersion".into(), existing["metadata"]["resourceVersion"].clone());
        }
        let changed = ownership::changed_paths(&without_managed_fields(&existing), &without_managed_fields(&updated));
        let (operation, owned) = match write {
            OwnedWrite::Apply(paths) => ("Apply", paths),
            OwnedWrite::Update => {
                let present = ownership::leaf_paths(&updated);
                ("Update", changed.intersection(&present).cloned().collect())
            }
        };
        let now = now_rfc3339();
        ownership::record(&mut updated, options.manager(), operation, &resource.api_version(), &now, &owned, &changed);
        // A write that changes nothing is not a new revision and no watch event.
        if without_managed_fields(&updated) == without_managed_fields(&existing) {
            return Ok(existing);
        }
        if resource.group == "apiextensions.k8s.io" && !options.dry_run {
            self.register_crd(&mut updated)?;
        }
        if options.dry_run {
            return Ok(Arc::new(updated));
        }
        let key = ObjectKey::new(resource, namespace, name);
        let finalizers_empty =
            updated.pointer("/metadata/finalizers").and_then(Value::as_array).is_none_or(Vec::is_empty);
        if meta_str(&updated, "deletionTimestamp").is_some() && finalizers_empty {
            return Ok(self.remove(resource, key, updated, Some(existing), false));
        }
        Ok(self.commit(ChangeKind::Modified, key, updated, Some(existing)))
    }

    pub fn delete(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Object, ApiError> {
        let existing = self.get(resource, namespace, name)?;
        if let Some(uid) = &options.precondition_uid
            && Some(uid.as_str()) != meta_str(&existing, "uid")
        {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(&existing, "uid").unwrap_or_default()
                ),
            ));
        }
        if let Some(rv) = &options.precondition_resource_version
            && Some(rv.as_str()) != meta_str(&existing, "resourceVersion")
        {
            return Err(ApiError::conflict(resource, name));
        }
        if options.dry_run {
            return Ok(existing);
        }
        let key = ObjectKey::new(resource, namespace, name);
        let has_finalizers =
            existing.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|list| !list.is_empty());
        if has_finalizers {
            if meta_str(&existing, "deletionTimestamp").is_some() {
                return Ok(existing);
            }
            let mut marked = (*existing).clone();
            let metadata = metadata_mut(&mut marked);
            metadata.insert("deletionTimestamp".into(), Value::String(now_rfc3339()));
            metadata.insert("deletionGracePeriodSeconds".into(), json!(0));
            return Ok(self.commit(ChangeKind::Modified, key, marked, Some(existing)));
        }
        if resource.plural == "namespaces" && resource.group.is_empty() {
            self.empty_namespace(name);
        }
        Ok(self.remove(resource, key, (*existing).clone(), Some(existing), options.orphan))
    }

    /// Really remove an object, then collect its garbage.
    fn remove(
        &mut self,
        resource: &ResourceType,
        key: ObjectKey,
        object: Value,
        previous: Option<Object>,
        orphan: bool,
    ) -> Object {
        let uid = meta_str(&object, "uid").unwrap_or_default().to_string();
        if resource.group == "apiextensions.k8s.io" && resource.plural == "customresourcedefinitions" {
            let name = key.name.clone();
            for removed in self.registry.remove_crd(&name) {
                let keys: Vec<ObjectKey> = self
                    .objects
                    .keys()
                    .filter(|k| k.group == removed.group && k.plural == removed.plural)
                    .cloned()
                    .collect();
                for k in keys {
                    if let Some(old) = self.objects.get(&k).cloned() {
                        self.commit(ChangeKind::Deleted, k, (*old).clone(), Some(old));
                    }
                }
            }
        }
        let removed = self.commit(ChangeKind::Deleted, key, object, previous);
        if !uid.is_empty() {
            self.collect_garbage(&uid, orphan);
        }
        removed
    }

    /// Background garbage collection: dependents lose the reference to a deleted owner and are
    /// deleted once no owner of theirs is left (or only orphaned, with `orphan`).
    fn collect_garbage(&mut self, owner_uid: &str, orphan: bool) {
        let dependents: Vec<ObjectKey> = self
            .objects
            .iter()
            .filter(|(_, object)| owner_uids(object).iter().any(|uid| uid == owner_uid))
            .map(|(key, _)| key.clone())
            .collect();
        if dependents.is_empty() {
            return;
        }
        let live: BTreeSet<String> =
            self.objects.values().filter_map(|object| meta_str(object, "uid").map(str::to_string)).collect();
        for key in dependents {
            let Some(object) = self.objects.get(&key).cloned() else { continue };
            let Some(resource) = self.registry.by_group_plural(&key.group, &key.plural).cloned() else { continue };
            let mut updated = (*object).clone();
            if let Some(Value::Array(references)) = updated.pointer_mut("/metadata/ownerReferences") {
                references.retain(|reference| reference.get("uid").and_then(Value::as_str) != Some(owner_uid));
            }
            let remaining = owner_uids(&updated);
            if orphan || remaining.iter().any(|uid| live.contains(uid)) {
                self.commit(ChangeKind::Modified, key, updated, Some(object));
            } else {
                let options = DeleteOptions::default();
                let _ = self.delete(&resource, &key.namespace, &key.name, &options);
            }
        }
    }

    fn empty_namespace(&mut self, namespace: &str) {
        let keys: Vec<ObjectKey> = self.objects.keys().filter(|key| key.namespace == namespace).cloned().collect();
        for key in keys {
            if let Some(resource) = self.registry.by_group_plural(&key.group, &key.plural).cloned() {
                let _ = self.delete(&resource, &key.namespace, &key.name, &DeleteOptions::default());
            }
        }
    }

    fn register_crd(&mut self, crd: &mut Value) -> Result<(), ApiError> {
        let name = meta_str(crd, "name").unwrap_or_default().to_string();
        let crd_type = self.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions").cloned();
        let resource = from_crd(crd).map_err(|message| match &crd_type {
            Some(crd_type) => ApiError::invalid(crd_type, &name, message),
            None => ApiError::bad_request(message),
        })?;
        let names = crd.pointer("/spec/names").cloned().unwrap_or(Value::Null);
        crd["status"] = json!({
            "acceptedNames": names,
            "storedVersions": [resource.version],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now_rfc3339()},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now_rfc3339()},
            ],
        });
        self.registry.insert(resource);
        Ok(())
    }

    /// Every object, for snapshots.
    pub fn snapshot(&self) -> Vec<Value> {
        self.objects.values().map(|object| (**object).clone()).collect()
    }

    /// Replace the content with `objects` (CRDs first so their kinds exist).
    pub fn restore(&mut self, objects: &[Value]) -> Result<(), String> {
        self.registry = Registry::with_builtins();
        let keys: Vec<ObjectKey> = self.objects.keys().cloned().collect();
        for key in keys {
            if let Some(old) = self.objects.get(&key).cloned() {
                self.commit(ChangeKind::Deleted, key, (*old).clone(), Some(old));
            }
        }
        let (crds, rest): (Vec<&Value>, Vec<&Value>) = objects
            .iter()
            .partition(|object| object.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition"));
        for object in crds.into_iter().chain(rest) {
            self.seed(object.clone())?;
        }
        self.compact();
        Ok(())
    }
}

/// How a watch with `selectors` sees a change: objects moving into the selection are ADDED,
/// moving out are DELETED, as on a real server.
pub fn classify(change: &Change, selectors: &Selectors) -> Option<(ChangeKind, Object)> {
    let now = selectors.matches(&change.object);
    let before = change.previous.as_ref().is_some_and(|previous| selectors.matches(previous));
    match change.kind {
        ChangeKind::Added if now => Some((ChangeKind::Added, change.object.clone())),
        ChangeKind::Deleted if now || before => Some((ChangeKind::Deleted, change.object.clone())),
        ChangeKind::Modified if now && before => Some((ChangeKind::Modified, change.object.clone())),
        ChangeKind::Modified if now => Some((ChangeKind::Added, change.object.clone())),
        ChangeKind::Modified if before => Some((ChangeKind::Deleted, change.object.clone())),
        _ => None,
    }
}
