//! The tenant operations view's rows: each CAPTenantOperation with its step.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::CAPTenantOperation;

use super::{Index, key};

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

pub(super) fn operation_rows(operations: &[Arc<CAPTenantOperation>], index: &Index) -> Vec<OperationRow> {
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
            let tenant = index.tenant_by_id.get(&key(Some(namespace.clone()), &op.spec.tenant_id));
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
