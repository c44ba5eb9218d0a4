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

/// The longest reason (characters) a user may give a batch action; the CRD schema's `maxLength`
/// on every reason field says the same, so the API server refuses longer ones too.
pub const MAX_REASON: usize = 1024;
/// The longest user name (`by`, `approvedBy`) the CRD accepts, in characters.
pub const MAX_USER: usize = 512;
/// The CRD schema's pattern for reasons and user names: no NUL character (`\x00` is understood by
/// Go's RE2, which kube-apiserver uses, and by the regex crate).
pub const NO_NUL_PATTERN: &str = r"^[^\x00]*$";

/// A reason as recorded: trimmed, not blank, at most [`MAX_REASON`] characters, and no control
/// character other than tab and newline. The error says the limit and what was wrong.
pub fn check_reason(text: &str) -> Result<String, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("a reason must say why (it is recorded with your name)".into());
    }
    if let Some(bad) = trimmed.chars().find(|c| c.is_control() && *c != '\t' && *c != '\n') {
        return Err(format!(
            "a reason may not contain control characters (found U+{:04X}); write plain text",
            u32::from(bad)
        ));
    }
    let length = trimmed.chars().count();
    if length > MAX_REASON {
        return Err(format!("a reason may be at most {MAX_REASON} characters (this one has {length}); shorten it"));
    }
    Ok(trimmed.into())
}

/// Text copied from a spec (or any outside source) into status, logs or a table: at most `max`
/// characters (then `…`), control characters other than tab and newline replaced by `�`.
pub fn bounded(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    let clean = |c: char| !c.is_control() || c == '\t' || c == '\n';
    let mut chars = text.char_indices();
    let cut = chars.nth(max).map(|(index, _)| index);
    if cut.is_none() && text.chars().all(clean) {
        return std::borrow::Cow::Borrowed(text);
    }
    let kept = &text[..cut.unwrap_or(text.len())];
    let mut out: String = kept.chars().map(|c| if clean(c) { c } else { '\u{FFFD}' }).collect();
    if cut.is_some() {
        out.push('…');
    }
    std::borrow::Cow::Owned(out)
}

/// A valid DNS subdomain name (RFC 1123; what most Kubernetes object names must be).
pub fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A namespace's name: an RFC 1123 label (at most 63 lower-case letters, digits and '-',
/// starting and ending with a letter or digit).
pub fn is_dns_label(name: &str) -> bool {
    name.len() <= 63 && !name.contains('.') && is_dns_subdomain(name)
}

/// `text` in at most `max` characters, the `…` that ends a cut one counted (a field with a hard
/// limit: a status bar's slot, Opsgenie's 130), control characters replaced as [`bounded`] does.
pub fn clipped(text: &str, max: usize) -> String {
    let keep = if text.chars().count() <= max { max } else { max.saturating_sub(1) };
    bounded(text, keep).into_owned()
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
    #[test]
    fn reasons_are_checked_and_bounded() {
        assert_eq!(check_reason("  rollout window  ").as_deref(), Ok("rollout window"));
        assert!(check_reason("   ").is_err());
        let long = "x".repeat(MAX_REASON + 1);
        let error = check_reason(&long).expect_err("too long");
        assert!(error.contains("1024") && error.contains("1025"), "{error}");
        assert!(check_reason(&"é".repeat(MAX_REASON)).is_ok(), "characters, not bytes");
        assert!(check_reason("a\0b").expect_err("NUL").contains("U+0000"));
        assert_eq!(bounded("short", 10), "short");
        assert_eq!(bounded("a\0b", 10), "a\u{FFFD}b");
        assert_eq!(bounded(&"y".repeat(20), 5), "yyyyy…");
        assert_eq!(bounded(&"é".repeat(1_000_000), MAX_REASON).chars().count(), MAX_REASON + 1);
    }
}
