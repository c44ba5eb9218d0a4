//! What capdeck reads of sap-btp-service-operator's ServiceBinding (`services.cloud.sap.com/v1`)
//! and of cf-service-operator's (`cf.cs.sap.com/v1alpha1`): which Secret a binding writes, its
//! rotation policy and status, and the labels that mark an old binding kept after a rotation.
//! Decoded leniently (every field optional): a binding capdeck cannot read is reported, never
//! fatal.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::Deserialize;

/// sap-btp-service-operator's API group.
pub const GROUP: &str = "services.cloud.sap.com";
/// cf-service-operator's API group.
pub const CF_GROUP: &str = "cf.cs.sap.com";
/// On an old binding: the name of the binding it is the rotation of.
pub const LABEL_ROTATION_OF: &str = "services.cloud.sap.com/rotationOf";
/// On an old binding and (since v0.9.1) its Secret: the old binding ID.
pub const LABEL_STALE: &str = "services.cloud.sap.com/stale";
/// Condition on a binding while it rotates (reason `Preparing` or `Rotating`).
pub const CONDITION_ROTATING: &str = "CredRotationInProgress";
/// Condition on an old binding kept because the new one is not Ready.
pub const CONDITION_PENDING_TERMINATION: &str = "PendingTermination";
/// The webhook's defaults when the policy object exists with empty fields.
pub const DEFAULT_ROTATION_FREQUENCY: &str = "72h";
pub const DEFAULT_ROTATED_BINDING_TTL: &str = "48h";
/// sap-btp-service-operator reconciles a binding at least this often (its resync period);
/// rotations and deletions due in between wait for it or for an event.
pub const RESYNC_SECONDS: i64 = 10 * 3600;

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ServiceBinding {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ServiceBindingSpec,
    #[serde(default)]
    pub status: Option<ServiceBindingStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceBindingSpec {
    #[serde(default)]
    pub secret_name: Option<String>,
    #[serde(default)]
    pub credentials_rotation_policy: Option<RotationPolicy>,
    #[serde(default)]
    pub secret_key: Option<String>,
    #[serde(default)]
    pub secret_root_key: Option<String>,
    #[serde(default)]
    pub secret_template: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RotationPolicy {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub rotation_frequency: Option<String>,
    #[serde(default, rename = "rotatedBindingTTL")]
    pub rotated_binding_ttl: Option<String>,
}

impl RotationPolicy {
    /// The frequency as the mutating webhook leaves it (`72h` when empty).
    pub fn frequency(&self) -> &str {
        self.rotation_frequency.as_deref().filter(|text| !text.is_empty()).unwrap_or(DEFAULT_ROTATION_FREQUENCY)
    }

    /// The TTL of old bindings as the mutating webhook leaves it (`48h` when empty).
    pub fn ttl(&self) -> &str {
        self.rotated_binding_ttl.as_deref().filter(|text| !text.is_empty()).unwrap_or(DEFAULT_ROTATED_BINDING_TTL)
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceBindingStatus {
    #[serde(default)]
    pub last_credentials_rotation_time: Option<Time>,
    #[serde(default)]
    pub ready: Option<String>,
    #[serde(default)]
    pub conditions: Vec<BindingCondition>,
}

/// A condition as sap-btp-service-operator writes it (metav1.Condition).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct BindingCondition {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

/// Written by hand rather than derived: capdeck reads a tolerant subset of upstream's type, and the
/// engine watches it like its other kinds (when the CRD exists; see `cluster::Stores`).
impl kube::Resource for ServiceBinding {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "ServiceBinding".into()
    }

    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        GROUP.into()
    }

    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "servicebindings".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl ServiceBinding {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// The Secret it writes: `spec.secretName`, else (as the operator does) its own name.
    pub fn secret_name(&self) -> &str {
        self.spec.secret_name.as_deref().filter(|name| !name.is_empty()).unwrap_or(self.name())
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.as_ref().and_then(|labels| labels.get(key)).map(String::as_str)
    }

    /// The binding this one is an old copy of, after a rotation.
    pub fn rotation_of(&self) -> Option<&str> {
        self.label(LABEL_ROTATION_OF)
    }

    pub fn is_stale(&self) -> bool {
        self.label(LABEL_STALE).is_some() || self.rotation_of().is_some()
    }

    fn condition(&self, type_: &str) -> Option<&BindingCondition> {
        self.status.as_ref()?.conditions.iter().find(|condition| condition.type_ == type_)
    }

    /// `Preparing` or `Rotating` while a rotation runs.
    pub fn rotating(&self) -> Option<&str> {
        self.condition(CONDITION_ROTATING).filter(|c| c.status == "True").map(|c| c.reason.as_deref().unwrap_or("True"))
    }

    pub fn pending_termination(&self) -> bool {
        self.condition(CONDITION_PENDING_TERMINATION).is_some_and(|c| c.status == "True")
    }

    pub fn being_deleted(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}
