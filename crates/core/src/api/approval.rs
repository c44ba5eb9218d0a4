//! An application's approval policy: whether its batches roll when the window ends or wait for
//! a person (`capdeck.dev/approval`, else the engine's `--approval`).

use super::{ANNOTATION_APPROVAL, CAPApplication};

/// Whether a batch rolls when its window ends (`auto`) or waits for `capdeck approve` (`manual`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ApprovalPolicy {
    /// Roll out when the window ends (upstream behaviour).
    #[default]
    Auto,
    /// Wait for `capdeck approve` (or `a` in the console).
    Manual,
}

impl ApprovalPolicy {
    pub fn label(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Manual => "manual",
        }
    }

    /// The application's policy: its `capdeck.dev/approval` annotation, else the default.
    pub fn for_application(app: &CAPApplication, default: Self) -> Self {
        match app
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_APPROVAL))
            .map(|v| v.trim().to_ascii_lowercase())
        {
            Some(value) if value == "manual" => Self::Manual,
            Some(value) if value == "auto" => Self::Auto,
            _ => default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_policy_from_annotation_or_default() {
        let mut app: CAPApplication = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a"}, "spec": {"btpAppName": "a", "providerSubaccountId": "p", "btp": {"services": []}}
        }))
        .expect("app");
        assert_eq!(ApprovalPolicy::for_application(&app, ApprovalPolicy::Auto), ApprovalPolicy::Auto);
        app.metadata.annotations = Some([(ANNOTATION_APPROVAL.to_string(), "Manual".to_string())].into());
        assert_eq!(ApprovalPolicy::for_application(&app, ApprovalPolicy::Auto), ApprovalPolicy::Manual);
        app.metadata.annotations = Some([(ANNOTATION_APPROVAL.to_string(), "auto".to_string())].into());
        assert_eq!(ApprovalPolicy::for_application(&app, ApprovalPolicy::Manual), ApprovalPolicy::Auto);
    }
}
