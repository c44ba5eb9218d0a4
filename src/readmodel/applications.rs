//! The applications view's rows: each CAPApplication with its opt-in, services and open batch.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::approval::ApprovalPolicy;
use crate::api::{ANNOTATION_ROLLOUT, BatchPhase, CAPApplication};
use crate::plan::latest_ready_version;

use super::{Index, SecretKeys, key};

/// How an application opted in to rollout on credential update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptIn {
    Spec,
    Annotation,
    No,
}

impl OptIn {
    pub fn label(self) -> &'static str {
        match self {
            Self::Spec => "yes",
            Self::Annotation => "yes (annotation)",
            Self::No => "no",
        }
    }
}

#[derive(Clone, Debug)]
pub struct BatchSummary {
    pub name: String,
    pub phase: BatchPhase,
    /// The phase as people say it, with what the batch waits for.
    pub state: super::BatchState,
    pub window_end: Timestamp,
    pub progress: String,
    pub object: Arc<crate::api::RotationBatch>,
}

/// A service of an application and its binding Secret: keys and sizes only, never values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRow {
    pub name: String,
    pub class: String,
    pub secret: String,
    /// (key, bytes) of the Secret's data; `None` when capdeck does not see the Secret.
    pub keys: Option<Vec<(String, usize)>>,
}

#[derive(Clone, Debug)]
pub struct AppRow {
    pub namespace: String,
    pub name: String,
    pub state: String,
    pub latest: Option<String>,
    pub versions: usize,
    pub tenants_ready: usize,
    pub tenants: usize,
    pub opt_in: OptIn,
    pub policy: ApprovalPolicy,
    pub batch: Option<BatchSummary>,
    /// Its Deployments on old credentials that no open batch rolls (an undo, a cancel or a
    /// failure left them so), with what says why (`crate::plan::out_of_date`).
    pub old_credentials: Vec<crate::plan::OutOfDate>,
    pub services: Vec<ServiceRow>,
    pub object: Arc<CAPApplication>,
}

pub(super) fn app_rows(apps: &[Arc<CAPApplication>], index: &Index, secret_keys: SecretKeys<'_>) -> Vec<AppRow> {
    let mut app_rows: Vec<AppRow> = apps
        .iter()
        .map(|app| {
            let app_key = key(app.namespace(), &app.name_any());
            let app_versions = index.versions_of(&app_key);
            let app_tenants = index.tenants_of(&app_key);
            let opt_in = if app.spec.rollout_on_credential_update == Some(true) {
                OptIn::Spec
            } else if app.annotations().get(ANNOTATION_ROLLOUT).is_some_and(|v| v == "true") {
                OptIn::Annotation
            } else {
                OptIn::No
            };
            AppRow {
                namespace: app_key.namespace.clone(),
                name: app_key.name.clone(),
                state: app
                    .status
                    .as_ref()
                    .map(|s| s.state.to_string())
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "-".into()),
                latest: latest_ready_version(app_versions).map(|v| v.spec.version.clone()),
                versions: app_versions.len(),
                tenants_ready: app_tenants.iter().filter(|t| t.is_ready()).count(),
                tenants: app_tenants.len(),
                opt_in,
                policy: ApprovalPolicy::for_application(app, ApprovalPolicy::Auto),
                batch: index.open_batch.get(&app_key).map(|batch| BatchSummary {
                    name: batch.name_any(),
                    phase: batch.phase(),
                    state: super::BatchState::of(batch),
                    window_end: batch.spec.window_end.0,
                    progress: batch.status.as_ref().and_then(|s| s.progress.clone()).unwrap_or_else(|| "-".into()),
                    object: batch.clone(),
                }),
                old_credentials: Vec::new(),
                services: app
                    .spec
                    .btp
                    .services
                    .iter()
                    .map(|service| ServiceRow {
                        name: service.name.clone(),
                        class: service.class.clone(),
                        secret: service.secret.clone(),
                        keys: secret_keys(&app_key.namespace, &service.secret),
                    })
                    .collect(),
                object: app.clone(),
            }
        })
        .collect();
    app_rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    app_rows
}
