//! The errors the sandbox answers, as a real API server's `Status` objects.

use serde_json::{Value, json};

use crate::registry::ResourceType;

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
