//! The versions view's rows: each CAPApplicationVersion with its state and tenants on it.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::CAPApplicationVersion;
use crate::plan::{compare_versions, latest_ready_version};

use super::{Index, key, state_of};

#[derive(Clone, Debug)]
pub struct VersionRow {
    pub namespace: String,
    pub name: String,
    pub application: String,
    pub version: String,
    pub ready: bool,
    pub state: String,
    pub latest: bool,
    pub deployments: usize,
    pub jobs: usize,
    pub tenants: usize,
    pub created: Option<Timestamp>,
    pub object: Arc<CAPApplicationVersion>,
}

pub(super) fn version_rows(versions: &[Arc<CAPApplicationVersion>], index: &Index) -> Vec<VersionRow> {
    let mut version_rows: Vec<VersionRow> = versions
        .iter()
        .map(|version| {
            let namespace = version.namespace().unwrap_or_default();
            let app_key = key(Some(namespace.clone()), &version.spec.cap_application_instance);
            let latest = index
                .versions_by_app
                .get(&app_key)
                .and_then(|all| latest_ready_version(all))
                .is_some_and(|latest| latest.name_any() == version.name_any());
            let (ready, state) = state_of(
                version.status.as_ref().map(|s| &s.generic),
                version.status.as_ref().map(|s| s.state.to_string()).unwrap_or_default(),
            );
            VersionRow {
                namespace: namespace.clone(),
                name: version.name_any(),
                application: version.spec.cap_application_instance.clone(),
                version: version.spec.version.clone(),
                ready,
                state,
                latest,
                deployments: version.spec.workloads.iter().filter(|w| w.deployment_definition.is_some()).count(),
                jobs: version.spec.workloads.iter().filter(|w| w.job_definition.is_some()).count(),
                tenants: index.tenants_on_version.get(&key(Some(namespace), &version.name_any())).copied().unwrap_or(0),
                created: version.metadata.creation_timestamp.as_ref().map(|t| t.0),
                object: version.clone(),
            }
        })
        .collect();
    version_rows.sort_by(|a, b| {
        (&a.namespace, &a.application)
            .cmp(&(&b.namespace, &b.application))
            .then_with(|| compare_versions(&b.version, &a.version))
    });
    version_rows
}
