//! The object store: every object as JSON, one global resourceVersion (like the etcd revision),
//! a bounded history for watches, and the write semantics of the API server (generateName,
//! optimistic concurrency, generation, status subresource, finalizers, garbage collection,
//! Secret `stringData`, CRD registration).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use super::ownership;
use super::patch::{PatchType, apply_patch};
use super::registry::{Registry, ResourceType, from_crd};
use super::selectors::Selectors;
use crate::api::common::is_dns_subdomain as valid_name;

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

/// An API error, answered as a `Status` object.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into(), details: None }
    }

    fn with_details(mut self, resource: &ResourceType, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": resource.group, "kind": resource.plural}));
        self
    }

    pub fn not_found(resource: &ResourceType, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", resource.qualified()))
            .with_details(resource, name)
    }

    pub fn already_exists(resource: &ResourceType, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", resource.qualified()))
            .with_details(resource, name)
    }

    pub fn conflict(resource: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                resource.qualified()
            ),
        )
        .with_details(resource, name)
    }

    pub fn invalid(resource: &ResourceType, name: &str, message: impl std::fmt::Display) -> Self {
        Self::new(422, "Invalid", format!("{} \"{name}\" is invalid: {message}", resource.qualified()))
            .with_details(resource, name)
    }

    /// kube-apiserver's `field.ErrorList` answer for one field: the message names the Kind (not
    /// the resource), and the details carry the cause, from which kubectl prints its
    /// `The Kind "name" is invalid: field: message` line.
    pub fn invalid_field(resource: &ResourceType, name: &str, field: &str, reason: &str, message: &str) -> Self {
        let qualified_kind = if resource.group.is_empty() {
            resource.kind.clone()
        } else {
            format!("{}.{}", resource.kind, resource.group)
        };
        let mut error =
            Self::new(422, "Invalid", format!("{qualified_kind} \"{name}\" is invalid: {field}: {message}"));
        error.details = Some(json!({"name": name, "group": resource.group, "kind": resource.kind,
            "causes": [{"reason": reason, "message": message, "field": field}]}));
        error
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
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
        let metadata = metadata_mut(&mut body);
        if resource.namespaced {
            match metadata.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != namespace => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    metadata.insert("namespace".into(), Value::String(namespace.to_string()));
                }
            }
        } else {
            metadata.remove("namespace");
        }
        let name = match metadata.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            Some(name) => name.to_string(),
            None => {
                let Some(prefix) = metadata.get("generateName").and_then(Value::as_str).filter(|p| !p.is_empty())
                else {
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
                candidate
            }
        };
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

fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| refs.iter().filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string)).collect())
        .unwrap_or_default()
}

fn check_type(resource: &ResourceType, body: &mut Value) -> Result<(), ApiError> {
    let api_version = resource.api_version();
    match body.get("kind").and_then(Value::as_str) {
        Some(kind) if kind != resource.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind of the provided object ({kind}) does not match the resource {} ({})",
                resource.plural, resource.kind
            )));
        }
        Some(_) => {}
        None => body["kind"] = Value::String(resource.kind.clone()),
    }
    match body.get("apiVersion").and_then(Value::as_str) {
        Some(version) if version != api_version => Err(ApiError::bad_request(format!(
            "the API version in the data ({version}) does not match the expected API version ({api_version})"
        ))),
        Some(_) => Ok(()),
        None => {
            body["apiVersion"] = Value::String(api_version);
            Ok(())
        }
    }
}

/// What an update writes: the incoming object with server-owned metadata kept, and the status
/// taken from the right place (status subresource or main resource).
fn merge_for_update(resource: &ResourceType, existing: &Value, incoming: Value, status_only: bool) -> Value {
    let mut result = if status_only {
        let mut result = existing.clone();
        match incoming.get("status") {
            Some(status) => result["status"] = status.clone(),
            None => {
                if let Some(object) = result.as_object_mut() {
                    object.remove("status");
                }
            }
        }
        result
    } else {
        let mut result = incoming;
        if resource.status_subresource {
            match existing.get("status") {
                Some(status) => result["status"] = status.clone(),
                None => {
                    if let Some(object) = result.as_object_mut() {
                        object.remove("status");
                    }
                }
            }
        }
        result
    };
    let metadata = metadata_mut(&mut result);
    for field in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "namespace", "name"] {
        match existing.get("metadata").and_then(|m| m.get(field)) {
            Some(value) => {
                metadata.insert(field.into(), value.clone());
            }
            None => {
                metadata.remove(field);
            }
        }
    }
    result
}

/// Anything but metadata and status changed: the generation moves.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |object: &Value| -> Map<String, Value> {
        object
            .as_object()
            .map(|map| {
                map.iter()
                    .filter(|(k, _)| *k != "metadata" && *k != "status")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(old) != strip(new)
}

fn without_managed_fields(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(metadata) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    copy
}

/// The apps/v1 Deployment defaults kube-apiserver applies that capdeck and kubectl read
/// (`replicas` and `progressDeadlineSeconds` decide when a rollout is complete or stalled).
/// Pod-template defaults (restartPolicy, dnsPolicy, ...) are not applied (docs/SANDBOX.md).
fn default_deployment(resource: &ResourceType, object: &mut Value) {
    if !(resource.group == "apps" && resource.plural == "deployments") {
        return;
    }
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else { return };
    spec.entry("replicas").or_insert(json!(1));
    spec.entry("progressDeadlineSeconds").or_insert(json!(600));
    spec.entry("revisionHistoryLimit").or_insert(json!(10));
    let strategy = spec.entry("strategy").or_insert(json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        strategy.entry("type").or_insert(json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate")) {
            let rolling = strategy.entry("rollingUpdate").or_insert(json!({}));
            if let Some(rolling) = rolling.as_object_mut() {
                rolling.entry("maxSurge").or_insert(json!("25%"));
                rolling.entry("maxUnavailable").or_insert(json!("25%"));
            }
        }
    }
}

/// Secrets: `stringData` merged into base64 `data`, `type` defaulted, `data` validated.
fn normalise_secret(resource: &ResourceType, object: &mut Value) -> Result<(), ApiError> {
    if !(resource.group.is_empty() && resource.plural == "secrets") {
        return Ok(());
    }
    let name = meta_str(object, "name").unwrap_or_default().to_string();
    if let Some(Value::Object(data)) = object.get("data") {
        for (key, value) in data {
            let valid =
                value.as_str().is_some_and(|text| base64::engine::general_purpose::STANDARD.decode(text).is_ok());
            if !valid {
                return Err(ApiError::bad_request(format!(
                    "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data in data key {key:?}"
                )));
            }
        }
    }
    let string_data = object.as_object_mut().and_then(|map| map.remove("stringData"));
    if let Some(Value::Object(entries)) = string_data {
        if !object.get("data").is_some_and(Value::is_object) {
            object["data"] = json!({});
        }
        for (key, value) in entries {
            let Some(text) = value.as_str() else {
                return Err(ApiError::invalid(resource, &name, format!("stringData[{key}]: must be a string")));
            };
            object["data"][key] = Value::String(base64::engine::general_purpose::STANDARD.encode(text));
        }
    }
    // The API server's MaxSecretSize: the decoded values together, at most 1 MiB.
    let size: usize = object
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|data| data.values())
        .filter_map(|value| value.as_str().and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok()))
        .map(|bytes| bytes.len())
        .sum();
    if size > crate::plan::MAX_SECRET_BYTES {
        return Err(ApiError::invalid(
            resource,
            &name,
            format!("data: Too long: must have at most {} bytes", crate::plan::MAX_SECRET_BYTES),
        ));
    }
    if object.get("type").is_none_or(Value::is_null) {
        object["type"] = Value::String("Opaque".into());
    }
    Ok(())
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
