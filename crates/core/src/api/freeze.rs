//! `Freeze` (`capdeck.dev/v1alpha1`): nothing rolls in what it covers until it ends.
//!
//! Why a small CRD, not an annotation or a ConfigMap: RBAC can grant `create freezes` in one
//! namespace without granting `patch namespaces` or every ConfigMap; a freeze is an object with
//! its own history (who froze, who lifted it, kept after it ends); the admission policy of
//! `capdeck manifests` checks that `frozen.by` and `lifted.by` name the requesting user, as it does
//! for a batch's approvals; and the engine watches one small kind instead of every ConfigMap.
//!
//! One object per target, so a second freeze of the same target replaces the first (checked with
//! its resourceVersion): `namespace` freezes its namespace, `app-NAME` one CAPApplication, and
//! `cluster` — honoured only in the namespace of the engine's Lease, so RBAC on that namespace
//! decides who may freeze everything — every namespace the engine serves.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rotation_batch::UserAction;
use super::string_enum::string_enum;

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "capdeck.dev",
    version = "v1alpha1",
    kind = "Freeze",
    namespaced,
    status = "FreezeStatus",
    derive = "PartialEq",
    doc = "Freeze: no rollout starts in a namespace, one CAPApplication or the whole cluster until it ends",
    printcolumn = r#"{"name":"Scope","type":"string","jsonPath":".spec.scope"}"#,
    printcolumn = r#"{"name":"Application","type":"string","jsonPath":".spec.application"}"#,
    printcolumn = r#"{"name":"Until","type":"string","jsonPath":".spec.until"}"#,
    printcolumn = r#"{"name":"By","type":"string","jsonPath":".spec.frozen.by"}"#,
    printcolumn = r#"{"name":"Lifted By","type":"string","jsonPath":".spec.lifted.by"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FreezeSpec {
    /// What is frozen: `Namespace` (every application of this namespace), `Application` (the one
    /// named in `application`) or `Cluster` (every namespace; honoured only in the namespace of the
    /// engine's Lease).
    pub scope: FreezeScope,
    /// The CAPApplication (same namespace), for scope `Application`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<String>,
    /// Who froze, when (the freeze's start) and why.
    pub frozen: UserAction,
    /// The freeze ends by itself at this time.
    pub until: Time,
    /// Lifted before `until` (`capdeck unfreeze`): who, when and why. The object stays, as a record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifted: Option<UserAction>,
}

/// What the leading engine recorded about the freeze.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FreezeStatus {
    /// `FreezeStarted` and `FreezeEnded`, recorded before they are sent, so each is sent once,
    /// even by a new leader.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<super::rotation_batch::NotificationRecord>,
}

string_enum! {
    pub FreezeScope { Namespace = "Namespace", Application = "Application", Cluster = "Cluster" }
}

/// The object name of the freeze of a target.
pub const CLUSTER_FREEZE_NAME: &str = "cluster";
pub const NAMESPACE_FREEZE_NAME: &str = "namespace";

/// `app-NAME`: the freeze of one CAPApplication.
pub fn application_freeze_name(application: &str) -> String {
    format!("app-{application}")
}

impl Freeze {
    /// When it ends (or ended): when it was lifted, else `until`.
    pub fn ends(&self) -> Timestamp {
        match &self.spec.lifted {
            Some(lifted) if lifted.at.0 < self.spec.until.0 => lifted.at.0,
            _ => self.spec.until.0,
        }
    }

    /// In force at `now`: started, not lifted and not yet at its end.
    pub fn active_at(&self, now: Timestamp) -> bool {
        self.spec.lifted.is_none() && self.spec.frozen.at.0 <= now && now < self.spec.until.0
    }

    /// Whether it covers the application `namespace/application`, for an engine whose Lease
    /// lives in `lease_namespace` (only there is a `Cluster` freeze honoured).
    pub fn covers(&self, lease_namespace: &str, namespace: &str, application: &str) -> bool {
        let own = self.namespace().unwrap_or_default();
        match &self.spec.scope {
            FreezeScope::Cluster => own == lease_namespace,
            FreezeScope::Namespace => own == namespace,
            FreezeScope::Application => own == namespace && self.spec.application.as_deref() == Some(application),
            FreezeScope::Other(_) => false,
        }
    }

    /// `cluster`, `namespace shop` or `CAPApplication shop/bookshop`.
    pub fn target(&self) -> String {
        let namespace = self.namespace().unwrap_or_default();
        match &self.spec.scope {
            FreezeScope::Cluster => "cluster".into(),
            FreezeScope::Namespace => format!("namespace {namespace}"),
            FreezeScope::Application => {
                format!("CAPApplication {namespace}/{}", self.spec.application.as_deref().unwrap_or("?"))
            }
            FreezeScope::Other(other) => format!("{other} {namespace}/{}", self.name_any()),
        }
    }

    /// `frozen until 2026-11-27T18:00:00Z by alice: release weekend` (the console's banner, a
    /// batch's message).
    pub fn summary(&self) -> String {
        let until = self.spec.until.0;
        let until = if super::lenient::is_forever(until) { "forever".into() } else { format!("until {until}") };
        let mut text = format!("{} frozen {until} by {}", self.target(), self.spec.frozen.by);
        if let Some(reason) = self.spec.frozen.reason.as_deref().filter(|r| !r.is_empty()) {
            text.push_str(": ");
            text.push_str(reason);
        }
        text
    }
}

/// The freeze that holds `namespace/application` at `now`: of those in force that cover it, the
/// one that ends last (nothing starts before every covering freeze ended).
pub fn governing<'a>(
    freezes: impl IntoIterator<Item = &'a Freeze>,
    lease_namespace: &str,
    namespace: &str,
    application: &str,
    now: Timestamp,
) -> Option<&'a Freeze> {
    freezes
        .into_iter()
        .filter(|freeze| freeze.active_at(now) && freeze.covers(lease_namespace, namespace, application))
        .max_by_key(|freeze| freeze.spec.until.0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn freeze(namespace: &str, spec: serde_json::Value) -> Freeze {
        let mut object = json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
            "metadata": {"name": "f", "namespace": namespace},
            "spec": {"scope": "Namespace", "until": "2026-11-27T18:00:00Z",
                     "frozen": {"by": "alice", "at": "2026-11-26T10:00:00Z", "reason": "release weekend"}}});
        if let (Some(target), Some(extra)) = (object["spec"].as_object_mut(), spec.as_object()) {
            target.extend(extra.clone());
        }
        serde_json::from_value(object).expect("a freeze")
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    #[test]
    fn a_freeze_is_in_force_from_its_start_until_its_end_or_its_lifting() {
        let plain = freeze("shop", json!({}));
        assert!(!plain.active_at(at("2026-11-26T09:59:59Z")), "not before it started");
        assert!(plain.active_at(at("2026-11-26T10:00:00Z")));
        assert!(plain.active_at(at("2026-11-27T17:59:59Z")));
        assert!(!plain.active_at(at("2026-11-27T18:00:00Z")), "ends by itself at until");
        let lifted = freeze("shop", json!({"lifted": {"by": "bob", "at": "2026-11-26T12:00:00Z"}}));
        assert!(!lifted.active_at(at("2026-11-26T11:00:00Z")), "a lifted freeze holds nothing");
        assert_eq!(lifted.ends(), at("2026-11-26T12:00:00Z"));
        assert_eq!(plain.ends(), at("2026-11-27T18:00:00Z"));
    }

    #[test]
    fn what_a_freeze_covers() {
        // (what, the freeze's namespace, its spec, the application asked about, covered)
        type Case<'a> = (&'a str, &'a str, serde_json::Value, (&'a str, &'a str), bool);
        let table: [Case<'_>; 7] = [
            ("namespace: its own", "shop", json!({}), ("shop", "bookshop"), true),
            ("namespace: not another", "shop", json!({}), ("hr", "portal"), false),
            (
                "application: that one",
                "shop",
                json!({"scope": "Application", "application": "bookshop"}),
                ("shop", "bookshop"),
                true,
            ),
            (
                "application: not its sibling",
                "shop",
                json!({"scope": "Application", "application": "bookshop"}),
                ("shop", "travel"),
                false,
            ),
            (
                "cluster: in the Lease namespace, everything",
                "capdeck-system",
                json!({"scope": "Cluster"}),
                ("hr", "portal"),
                true,
            ),
            (
                "cluster: elsewhere, nothing (RBAC on the Lease namespace decides)",
                "shop",
                json!({"scope": "Cluster"}),
                ("shop", "bookshop"),
                false,
            ),
            ("unknown scope: nothing", "shop", json!({"scope": "Galaxy"}), ("shop", "bookshop"), false),
        ];
        for (what, namespace, spec, (ns, app), expected) in table {
            assert_eq!(freeze(namespace, spec).covers("capdeck-system", ns, app), expected, "{what}");
        }
    }

    #[test]
    fn the_governing_freeze_is_the_one_in_force_that_ends_last() {
        let now = at("2026-11-26T11:00:00Z");
        let short = freeze("shop", json!({"until": "2026-11-26T12:00:00Z"}));
        let long = freeze("capdeck-system", json!({"scope": "Cluster", "until": "2026-11-28T00:00:00Z"}));
        let lifted = freeze(
            "shop",
            json!({"until": "2026-11-30T00:00:00Z",
            "lifted": {"by": "bob", "at": "2026-11-26T10:30:00Z"}}),
        );
        let all = [short.clone(), long.clone(), lifted];
        let found = governing(&all, "capdeck-system", "shop", "bookshop", now).expect("frozen");
        assert_eq!(found.spec.until.0, at("2026-11-28T00:00:00Z"));
        assert_eq!(
            governing(&all, "elsewhere", "shop", "bookshop", now).map(|f| f.spec.until.0),
            Some(short.spec.until.0)
        );
        assert!(governing(&all, "elsewhere", "hr", "portal", now).is_none());
        assert_eq!(long.summary(), "cluster frozen until 2026-11-28T00:00:00Z by alice: release weekend");
    }
}
