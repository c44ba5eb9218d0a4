//! Rust types of the custom resources capdeck reads and writes.

pub mod approval;
pub mod cap;
pub mod change_window;
pub mod common;
pub mod container;
pub mod crds;
pub mod deployment_view;
pub mod freeze;
pub mod go_duration;
pub mod lenient;
pub mod object_key;
pub mod rollout_progress;
pub mod rotation_batch;
pub mod service_binding;
pub mod stored_digest;
pub mod stored_secret;
pub(crate) mod string_enum;

pub use cap::{
    CAPApplication, CAPApplicationSpec, CAPApplicationVersion, CAPApplicationVersionSpec, CAPTenant,
    CAPTenantOperation, CAPTenantOutput, ClusterDomain, Domain, ServiceInfo, WorkloadDetails,
};
pub use common::{Condition, ConditionStatus, GenericStatus};
pub use deployment_view::DeploymentView;
pub use freeze::{Freeze, FreezeScope, FreezeSpec};
pub use object_key::{Named, ObjectKey};
pub use rotation_batch::{BatchPhase, RotationBatch, RotationBatchSpec, RotationBatchStatus};
pub use stored_secret::StoredSecret;

/// Opt-in to capdeck's rollout without setting the upstream spec flag.
pub const ANNOTATION_ROLLOUT: &str = "capdeck.dev/rollout-on-credential-update";
/// Per-application approval policy: `manual` or `auto`.
pub const ANNOTATION_APPROVAL: &str = "capdeck.dev/approval";
/// When capdeck last rolled a Deployment (RFC 3339); read by the storm guard.
pub const ANNOTATION_ROLLED_AT: &str = "capdeck.dev/rolled-at";
/// On a Deployment: the RotationBatch whose rollout pointed it at its VCAP Secret
/// (the engine adopts it after a restart; the console shows its live progress).
pub const ANNOTATION_ROLLED_BY: &str = "capdeck.dev/rotation-batch";
/// Label on RotationBatches naming their CAPApplication.
pub const LABEL_APPLICATION: &str = "capdeck.dev/application";
/// Upstream label on VCAP Secrets: sha1(namespace + cav name + deployment name).
pub const LABEL_SECRET_OWNER_HASH: &str = "sme.sap.com/secret-owner-hash";
/// The single key of a VCAP Secret.
pub const VCAP_SERVICES_KEY: &str = "VCAP_SERVICES";
