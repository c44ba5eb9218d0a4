//! Status pieces shared by every CAP kind (upstream `GenericStatus`) and by RotationBatch.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::string_enum::string_enum;

string_enum! {
    /// `metav1.ConditionStatus`.
    pub ConditionStatus { Unknown = "Unknown", True = "True", False = "False" }
}

/// A `metav1.Condition`, decoded leniently: a condition missing a field is still shown.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: ConditionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

/// Fields every CAP status carries (inlined in Go as `GenericStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenericStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

pub const READY: &str = "Ready";

impl GenericStatus {
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|condition| condition.type_ == type_)
    }

    /// Upstream's `isCROConditionReady`: the `Ready` condition has status `True`.
    /// `status.state` is deliberately not consulted.
    pub fn is_ready(&self) -> bool {
        self.condition(READY).is_some_and(|condition| condition.status == ConditionStatus::True)
    }
}

/// `Ready` of an optional status: no status means not ready.
pub fn is_ready(status: Option<&GenericStatus>) -> bool {
    status.is_some_and(GenericStatus::is_ready)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(conditions: serde_json::Value) -> GenericStatus {
        serde_json::from_value(serde_json::json!({ "conditions": conditions })).expect("status")
    }

    #[test]
    fn ready_means_ready_condition_true() {
        assert!(status(serde_json::json!([{"type": "Ready", "status": "True"}])).is_ready());
        assert!(!status(serde_json::json!([{"type": "Ready", "status": "False"}])).is_ready());
        assert!(!status(serde_json::json!([{"type": "Other", "status": "True"}])).is_ready());
        assert!(!status(serde_json::json!([])).is_ready());
        assert!(!is_ready(None));
    }

    #[test]
    fn incomplete_conditions_still_decode() {
        let decoded = status(serde_json::json!([{"type": "Ready"}, {"status": "Maybe"}]));
        assert_eq!(decoded.conditions.len(), 2);
        assert_eq!(decoded.conditions[1].status, ConditionStatus::Other("Maybe".into()));
    }
}
