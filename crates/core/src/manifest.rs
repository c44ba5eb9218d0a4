//! Reading Kubernetes manifests from files and directories (multi-document YAML or JSON,
//! `kind: List` included) into the objects capdeck understands.
//!
//! A file that cannot be read or parsed is an error naming the file. An object that parses but
//! does not decode (a CAPApplication without spec, a Secret with broken base64, ...) is recorded
//! as a problem and the rest goes on. Messages never quote Secret values: YAML error snippets are
//! cut to their first line and Secret decoding errors name only the key.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{
    CAPApplication, CAPApplicationVersion, CAPTenant, CAPTenantOperation, DeploymentView, ObjectKey, RotationBatch,
};
use crate::lookup::{ObjectLookup, Objects, SecretLookup};
use crate::plan::{Problem, ProblemKind};

/// Why a manifest path could not be read. Always names the file.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct LoadError {
    pub path: PathBuf,
    pub message: String,
}

impl LoadError {
    fn new(path: &Path, message: impl Into<String>) -> Self {
        Self { path: path.to_path_buf(), message: message.into() }
    }
}

/// Everything read from the manifests.
#[derive(Default)]
pub struct Manifests {
    pub applications: Vec<Arc<CAPApplication>>,
    pub versions: Vec<Arc<CAPApplicationVersion>>,
    pub tenants: Vec<Arc<CAPTenant>>,
    pub operations: Vec<Arc<CAPTenantOperation>>,
    pub batches: Vec<Arc<RotationBatch>>,
    /// The Secrets (a malformed one as `SecretLookup::Malformed`) and the Deployments.
    pub lookup: Objects,
    /// sap-btp-service-operator ServiceBindings (`services.cloud.sap.com`).
    pub service_bindings: Vec<crate::api::service_binding::ServiceBinding>,
    /// Objects that could not be decoded.
    pub problems: Vec<Problem>,
    pub files: usize,
    pub objects: usize,
    /// Objects of kinds capdeck does not use (Services, ConfigMaps, ...).
    pub ignored: usize,
}

impl ObjectLookup for Manifests {
    fn secret(&self, namespace: &str, name: &str) -> SecretLookup {
        self.lookup.secret(namespace, name)
    }

    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<DeploymentView>> {
        self.lookup.deployment(namespace, name)
    }

    fn undecodable_deployment(&self, namespace: &str, name: &str) -> Option<String> {
        self.lookup.undecodable_deployment(namespace, name)
    }
}

const EXTENSIONS: &[&str] = &["yaml", "yml", "json"];

/// Load every path: a file, or a directory meaning every `*.yaml|*.yml|*.json` below it.
pub fn load(paths: &[PathBuf]) -> Result<Manifests, LoadError> {
    let mut manifests = Manifests::default();
    for path in paths {
        let metadata = std::fs::metadata(path).map_err(|error| LoadError::new(path, describe_io(&error)))?;
        if metadata.is_dir() {
            for file in files_below(path)? {
                manifests.load_file(&file)?;
            }
        } else {
            manifests.load_file(path)?;
        }
    }
    Ok(manifests)
}

fn describe_io(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => error.to_string(),
    }
}

fn files_below(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = std::fs::read_dir(&current).map_err(|error| LoadError::new(&current, describe_io(&error)))?;
        for entry in entries {
            let entry = entry.map_err(|error| LoadError::new(&current, describe_io(&error)))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|error| LoadError::new(&path, describe_io(&error)))?;
            if kind.is_dir() {
                pending.push(path);
            } else if path
                .extension()
                .and_then(|ext| ext.to_str())
                .is_some_and(|ext| EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
            {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Parse one manifest text into documents. Errors carry only the first line of the parser's
/// message (position and cause): its later lines quote the surrounding source.
pub fn parse_documents(text: &str, json: bool) -> Result<Vec<Value>, String> {
    if json {
        let mut documents = Vec::new();
        for document in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
            documents.push(document.map_err(|error| {
                format!("invalid JSON at line {} column {}: {}", error.line(), error.column(), json_error_kind(&error))
            })?);
        }
        Ok(documents)
    } else {
        serde_saphyr::from_multiple::<Value>(text).map_err(|error| {
            let text = error.to_string();
            let first = text.lines().next().unwrap_or("invalid YAML");
            format!("invalid YAML: {}", first.trim_start_matches("error: "))
        })
    }
}

fn json_error_kind(error: &serde_json::Error) -> &'static str {
    match error.classify() {
        serde_json::error::Category::Eof => "unexpected end of input",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "unexpected data",
        serde_json::error::Category::Io => "read error",
    }
}

impl Manifests {
    /// Objects read from a cluster (named `source` in problems), as if they came from files.
    pub fn from_objects(source: &str, objects: impl IntoIterator<Item = Value>) -> Self {
        let mut manifests = Self::default();
        let path = Path::new(source);
        for (index, object) in objects.into_iter().enumerate() {
            manifests.add_document(path, index + 1, object);
        }
        manifests
    }

    fn load_file(&mut self, path: &Path) -> Result<(), LoadError> {
        let bytes = std::fs::read(path).map_err(|error| LoadError::new(path, describe_io(&error)))?;
        let text = String::from_utf8(bytes).map_err(|error| {
            LoadError::new(
                path,
                format!(
                    "not UTF-8 text (byte {} is invalid); is this a binary file?",
                    error.utf8_error().valid_up_to()
                ),
            )
        })?;
        let json = path.extension().and_then(|ext| ext.to_str()).is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
        let documents = parse_documents(&text, json).map_err(|message| LoadError::new(path, message))?;
        self.files += 1;
        for (index, document) in documents.into_iter().enumerate() {
            self.add_document(path, index + 1, document);
        }
        Ok(())
    }

    fn add_document(&mut self, path: &Path, index: usize, document: Value) {
        if document.is_null() {
            return;
        }
        let kind = document.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
        let api_version = document.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        if kind.ends_with("List")
            && let Some(Value::Array(items)) = document.get("items")
        {
            for item in items.clone() {
                self.add_document(path, index, item);
            }
            return;
        }
        if kind.is_empty() || api_version.is_empty() {
            self.problems.push(object_problem(
                "",
                None,
                format!(
                    "{}: document {index} is not a Kubernetes object (it has no apiVersion and kind)",
                    path.display()
                ),
            ));
            return;
        }
        self.objects += 1;
        let namespace =
            document.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string();
        let name = document.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let label = format!("{}: {kind} {namespace}/{name}", path.display());
        match (api_version.as_str(), kind.as_str()) {
            ("sme.sap.com/v1alpha1", "CAPApplication") => {
                if let Some(app) = self.decode::<CAPApplication>(&label, &namespace, Some(&name), document) {
                    self.applications.push(app);
                }
            }
            ("sme.sap.com/v1alpha1", "CAPApplicationVersion") => {
                if let Some(version) = self.decode(&label, &namespace, None, document) {
                    self.versions.push(version);
                }
            }
            ("sme.sap.com/v1alpha1", "CAPTenant") => {
                if let Some(tenant) = self.decode(&label, &namespace, None, document) {
                    self.tenants.push(tenant);
                }
            }
            ("sme.sap.com/v1alpha1", "CAPTenantOperation") => {
                if let Some(operation) = self.decode(&label, &namespace, None, document) {
                    self.operations.push(operation);
                }
            }
            ("capdeck.dev/v1alpha1", "RotationBatch") => {
                if let Some(batch) = self.decode(&label, &namespace, None, document) {
                    self.batches.push(batch);
                }
            }
            ("v1", "Secret") => {
                let lookup = match decode_secret(document) {
                    Ok(secret) => SecretLookup::Found(Arc::new(secret.into())),
                    Err(message) => SecretLookup::Malformed(message),
                };
                self.lookup.secrets.insert(ObjectKey::new(namespace, name), lookup);
            }
            (version, "ServiceBinding") if version.starts_with("services.cloud.sap.com/") => {
                if let Some(binding) = self.decode_plain(&label, &namespace, document) {
                    self.service_bindings.push(binding);
                }
            }
            ("apps/v1", "Deployment") => {
                if let Some(deployment) = self.decode::<DeploymentView>(&label, &namespace, None, document) {
                    self.lookup.deployments.insert(ObjectKey::new(namespace, name), deployment);
                }
            }
            _ => self.ignored += 1,
        }
    }

    /// `decode` for types that are not `kube::Resource`s (read leniently, e.g. ServiceBindings).
    fn decode_plain<T: DeserializeOwned>(&mut self, label: &str, namespace: &str, mut document: Value) -> Option<T> {
        if let Some(metadata) = document.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.entry("namespace").or_insert_with(|| Value::String(namespace.to_string()));
        }
        match serde_json::from_value::<T>(document) {
            Ok(object) => Some(object),
            Err(error) => {
                self.problems.push(object_problem(namespace, None, format!("{label} is malformed: {error}")));
                None
            }
        }
    }

    fn decode<K: DeserializeOwned + kube::Resource>(
        &mut self,
        label: &str,
        namespace: &str,
        application: Option<&str>,
        mut document: Value,
    ) -> Option<Arc<K>> {
        // Objects without a namespace land in `default`, as `kubectl apply` would put them.
        if let Some(metadata) = document.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.entry("namespace").or_insert_with(|| Value::String(namespace.to_string()));
        }
        match serde_json::from_value::<K>(document) {
            Ok(object) => Some(Arc::new(object)),
            Err(error) => {
                self.problems.push(object_problem(namespace, application, format!("{label} is malformed: {error}")));
                None
            }
        }
    }
}

fn object_problem(namespace: &str, application: Option<&str>, message: String) -> Problem {
    Problem {
        namespace: namespace.to_string(),
        application: application.map(str::to_string),
        deployment: None,
        secret: None,
        message,
        kind: ProblemKind::InvalidObject,
    }
}

/// Decode a Secret, saying which key is wrong but never what it holds.
fn decode_secret(mut document: Value) -> Result<Secret, String> {
    if let Some(data) = document.get("data") {
        match data {
            Value::Null => {}
            Value::Object(entries) => {
                for (key, value) in entries {
                    let Some(text) = value.as_str() else {
                        return Err(format!("data key {key:?} is not a string"));
                    };
                    if base64::engine::general_purpose::STANDARD.decode(text).is_err() {
                        return Err(format!("data key {key:?} is not valid base64"));
                    }
                }
            }
            _ => return Err("data is not a map of keys to base64 strings".into()),
        }
    }
    if let Some(Value::Object(entries)) = document.get("stringData")
        && let Some((key, _)) = entries.iter().find(|(_, value)| !value.is_string())
    {
        return Err(format!("stringData key {key:?} is not a string"));
    }
    if let Some(metadata) = document.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.entry("namespace").or_insert_with(|| Value::String("default".into()));
    }
    // Values were checked above; what remains are structural errors that quote no data.
    serde_json::from_value::<Secret>(document).map_err(|error| format!("not a valid Secret ({})", redact_serde(&error)))
}

/// serde messages can quote the offending value; keep only the position-independent category.
fn redact_serde(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.split_once(':') {
        Some((head, _)) => head.to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_errors_keep_position_and_drop_quoted_source() {
        let text = "apiVersion: v1\nkind: Secret\nstringData:\n  password: hunter2\n  bad: [unclosed\n";
        let error = parse_documents(text, false).expect_err("broken yaml");
        assert!(error.contains("line 5"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn json_errors_name_the_position() {
        let error = parse_documents("{\"a\": [1, }", true).expect_err("broken json");
        assert!(error.starts_with("invalid JSON at line 1 column"), "{error}");
    }

    #[test]
    fn multi_document_yaml_and_concatenated_json() {
        assert_eq!(parse_documents("a: 1\n---\nb: 2\n---\n", false).expect("yaml").len(), 2);
        assert_eq!(parse_documents("{\"a\":1}\n{\"b\":2}", true).expect("json").len(), 2);
    }

    #[test]
    fn secret_errors_name_the_key_not_the_value() {
        let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"password": "not*base64!hunter2"}});
        let error = decode_secret(secret).expect_err("bad base64");
        assert_eq!(error, "data key \"password\" is not valid base64");
        let secret =
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"n": 5}});
        assert_eq!(decode_secret(secret).expect_err("number"), "data key \"n\" is not a string");
    }
}
