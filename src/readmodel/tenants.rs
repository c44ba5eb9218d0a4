//! The tenants view's rows: each CAPTenant with its versions, upgrade strategy and operation.

use std::sync::Arc;

use kube::ResourceExt;

use crate::api::CAPTenant;

use super::{Index, key, state_of};

/// The CAPApplicationVersion a tenant runs: its name and its semver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentVersion {
    pub name: String,
    pub semver: String,
}

#[derive(Clone, Debug)]
pub struct TenantRow {
    pub namespace: String,
    pub name: String,
    pub application: String,
    pub subdomain: String,
    pub state: String,
    pub ready: bool,
    /// The version the tenant runs now, if it runs one.
    pub current: Option<CurrentVersion>,
    /// `spec.version`: the version the tenant should be on.
    pub target: String,
    pub strategy: String,
    /// The running or last operation: (type, state, step "i/n").
    pub operation: Option<(String, String, String)>,
    /// Why this tenant will not upgrade, if it will not.
    pub blocked: Option<String>,
    pub object: Arc<CAPTenant>,
}

pub(super) fn tenant_rows(tenants: &[Arc<CAPTenant>], index: &Index) -> Vec<TenantRow> {
    let mut tenant_rows: Vec<TenantRow> = tenants
        .iter()
        .map(|tenant| {
            let namespace = tenant.namespace().unwrap_or_default();
            let (ready, state) = state_of(tenant.status.as_ref().map(|s| &s.generic), tenant.state().to_string());
            let current = tenant.current_version_instance().map(|name| CurrentVersion {
                name: name.to_string(),
                semver: index.version_semver.get(&key(Some(namespace.clone()), name)).cloned().unwrap_or_default(),
            });
            let strategy =
                tenant.spec.version_upgrade_strategy.as_ref().map_or_else(|| "always".to_string(), ToString::to_string);
            let operation =
                index.operation_of_tenant.get(&key(Some(namespace.clone()), &tenant.spec.tenant_id)).map(|op| {
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
            let current_semver = current.as_ref().map(|c| c.semver.as_str()).unwrap_or_default();
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
