//! The subscription dependencies of a CAPApplication: what the CAP Operator's subscription server
//! answers to `GET /dependencies/{providerSubaccountId}/{appName}/` (upstream
//! `getDependencies` in `cmd/server/internal/handler.go`), computed from the same binding Secrets —
//! plus, for people, why every service is in or out.

use serde::Serialize;

use crate::api::cap::SubscriptionDependency;
use crate::api::{CAPApplication, ServiceInfo};
use crate::plan::{ObjectLookup, service_entry};
use crate::vcap::gojson::{GoMap, GoValue};

/// One element of the answer. Upstream's keys are sorted, so `appId` precedes `appName`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Dependency {
    /// destination, connectivity, auditlog with plan `oauth2`.
    Special {
        #[serde(rename = "appId")]
        app_id: String,
        #[serde(rename = "appName")]
        app_name: String,
    },
    Plain {
        xsappname: String,
    },
}

/// Why a service is (not) in the answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServiceDecision {
    pub service: String,
    pub class: String,
    pub secret: String,
    #[serde(rename = "subscriptionDependency")]
    pub setting: String,
    pub dependency: Option<Dependency>,
    pub reason: String,
}

/// The answer (`dependencies`, in service order) and a decision per service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DependencyReport {
    pub dependencies: Vec<Dependency>,
    pub services: Vec<ServiceDecision>,
}

/// What upstream decodes of an entry: `{plan, credentials: {xsappname, saasregistryenabled,
/// uaa: {xsappname}}}`. Go's `json.Unmarshal` fails on a wrong type, and upstream then skips the
/// service; so does this.
struct MetaInfo {
    plan: String,
    xsappname: String,
    uaa_xsappname: String,
    saas_registry_enabled: bool,
}

fn text_field(map: &GoMap, key: &str, path: &str) -> Result<String, String> {
    match map.get(key) {
        None | Some(GoValue::Null) => Ok(String::new()),
        Some(GoValue::String(bytes)) => Ok(String::from_utf8_lossy(bytes).into_owned()),
        Some(_) => Err(format!("{path} is not a string")),
    }
}

fn object_field<'a>(map: &'a GoMap, key: &str, path: &str) -> Result<Option<&'a GoMap>, String> {
    match map.get(key) {
        None | Some(GoValue::Null) => Ok(None),
        Some(GoValue::Object(object)) => Ok(Some(object)),
        Some(_) => Err(format!("{path} is not an object")),
    }
}

fn meta_info(entry: &GoMap) -> Result<MetaInfo, String> {
    let plan = text_field(entry, "plan", "plan")?;
    let Some(credentials) = object_field(entry, "credentials", "credentials")? else {
        return Ok(MetaInfo {
            plan,
            xsappname: String::new(),
            uaa_xsappname: String::new(),
            saas_registry_enabled: false,
        });
    };
    let saas_registry_enabled = match credentials.get("saasregistryenabled") {
        None | Some(GoValue::Null) => false,
        Some(GoValue::Bool(flag)) => *flag,
        Some(_) => return Err("credentials.saasregistryenabled is not a boolean".into()),
    };
    let uaa_xsappname = match object_field(credentials, "uaa", "credentials.uaa")? {
        Some(uaa) => text_field(uaa, "xsappname", "credentials.uaa.xsappname")?,
        None => String::new(),
    };
    Ok(MetaInfo {
        plan,
        xsappname: text_field(credentials, "xsappname", "credentials.xsappname")?,
        uaa_xsappname,
        saas_registry_enabled,
    })
}

fn is_special(service: &ServiceInfo, plan: &str) -> bool {
    matches!(service.class.as_str(), "destination" | "connectivity")
        || (service.class == "auditlog" && plan == "oauth2")
}

/// Decide one service, as upstream's `getServiceDependencies` does.
fn decide(namespace: &str, service: &ServiceInfo, lookup: &dyn ObjectLookup) -> ServiceDecision {
    let setting = service.dependency();
    let decision = |dependency: Option<Dependency>, reason: String| ServiceDecision {
        service: service.name.clone(),
        class: service.class.clone(),
        secret: service.secret.clone(),
        setting: setting.to_string(),
        dependency,
        reason,
    };
    let entry = match service_entry(namespace, service, lookup) {
        Ok(entry) => entry,
        Err(problem) => return decision(None, format!("skipped: {problem}")),
    };
    let info = match meta_info(&entry) {
        Ok(info) => info,
        Err(message) => return decision(None, format!("skipped: the entry cannot be read: {message}")),
    };
    let special = is_special(service, &info.plan);
    let why_in = match setting {
        SubscriptionDependency::Never => return decision(None, "out: subscriptionDependency is Never".into()),
        SubscriptionDependency::Always => "subscriptionDependency is Always",
        _ if special => match service.class.as_str() {
            "auditlog" => "auditlog with plan oauth2 (a special dependency)",
            _ => "a special dependency (destination or connectivity)",
        },
        _ if info.saas_registry_enabled => "saasregistryenabled is true",
        _ => {
            return decision(None, "out: Auto, not a special dependency and saasregistryenabled is not true".into());
        }
    };
    let (xsappname, source) = if info.xsappname.is_empty() {
        (info.uaa_xsappname, "credentials.uaa.xsappname")
    } else {
        (info.xsappname, "credentials.xsappname")
    };
    if xsappname.is_empty() {
        return decision(
            None,
            format!("skipped: {why_in}, but neither credentials.xsappname nor uaa.xsappname is set"),
        );
    }
    let dependency = if special {
        Dependency::Special { app_id: xsappname, app_name: service.class.clone() }
    } else {
        Dependency::Plain { xsappname }
    };
    decision(Some(dependency), format!("in: {why_in} (xsappname from {source})"))
}

/// The dependencies of `app`, reading its binding Secrets through `lookup`.
pub fn dependencies(app: &CAPApplication, lookup: &dyn ObjectLookup) -> DependencyReport {
    let namespace = kube::ResourceExt::namespace(app).unwrap_or_default();
    let services: Vec<ServiceDecision> =
        app.spec.btp.services.iter().map(|service| decide(&namespace, service, lookup)).collect();
    DependencyReport { dependencies: services.iter().filter_map(|s| s.dependency.clone()).collect(), services }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Secret;
    use serde_json::{Value, json};

    use super::*;
    use crate::plan::SecretLookup;

    #[derive(Default)]
    struct Secrets(HashMap<String, Arc<crate::api::StoredSecret>>);

    impl ObjectLookup for Secrets {
        fn secret(&self, _: &str, name: &str) -> SecretLookup {
            self.0.get(name).cloned().map_or(SecretLookup::Missing, SecretLookup::Found)
        }
        fn deployment(&self, _: &str, _: &str) -> Option<Arc<crate::api::DeploymentView>> {
            None
        }
    }

    impl Secrets {
        fn credentials(mut self, name: &str, credentials: Value) -> Self {
            let secret: Secret = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "stringData": {"credentials": credentials.to_string()},
            }))
            .expect("secret");
            self.0.insert(name.into(), Arc::new(secret.into()));
            self
        }

        fn metadata(mut self, name: &str, plan: &str, credentials: Value) -> Self {
            let metadata = json!({"metaDataProperties": [{"name": "plan", "format": "text"}],
                                  "credentialProperties": [{"name": "all", "format": "json", "container": true}]});
            let secret: Secret = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "stringData": {".metadata": metadata.to_string(), "plan": plan, "all": credentials.to_string()},
            }))
            .expect("secret");
            self.0.insert(name.into(), Arc::new(secret.into()));
            self
        }
    }

    /// Upstream's `TestGetDependencies` fixture.
    fn upstream() -> (CAPApplication, Secrets) {
        let app: CAPApplication = serde_json::from_value(json!({
            "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
            "metadata": {"name": "test-cap-01", "namespace": "ns"},
            "spec": {"btpAppName": "test-app", "providerSubaccountId": "p", "btp": {"services": [
                {"name": "test-xsuaa", "class": "xsuaa", "secret": "test-xsuaa-bind"},
                {"name": "test-xsuaa2", "class": "xsuaa", "secret": "test-xsuaa2-bind"},
                {"name": "test-saas", "class": "saas-registry", "secret": "test-saas-bind"},
                {"name": "test-sm", "class": "service-manager", "secret": "test-sm-bind"},
                {"name": "test-dest", "class": "destination", "secret": "test-dest-bind"},
                {"name": "test-html-host", "class": "html5-apps-repo", "secret": "test-html-host-bind"},
                {"name": "test-html-rt", "class": "html5-apps-repo", "secret": "test-html-rt-bind"},
                {"name": "test-subscription", "class": "subscription-manager", "secret": "test-subscription-bind"},
            ]}},
        }))
        .expect("app");
        let secrets = Secrets::default()
            .credentials("test-xsuaa-bind", json!({"xsappname": "appname!b14"}))
            .credentials("test-xsuaa2-bind", json!({"xsappname": "appname2!b14"}))
            .credentials(
                "test-saas-bind",
                json!({"saasregistryenabled": true, "uaa": {"xsappname": "saasappname!b15"}}),
            )
            .credentials("test-sm-bind", json!({"saasregistryenabled": true, "xsappname": "smappname!b15"}))
            .credentials("test-dest-bind", json!({"uaa": {"xsappname": "destappname!b15"}}))
            .credentials(
                "test-html-rt-bind",
                json!({"saasregistryenabled": true, "uaa": {"xsappname": "rtappname!b15"}}),
            );
        (app, secrets)
    }

    fn answer(app: &CAPApplication, secrets: &Secrets) -> String {
        serde_json::to_string(&dependencies(app, secrets).dependencies).expect("json")
    }

    const DEFAULT: &str = r#"[{"xsappname":"saasappname!b15"},{"xsappname":"smappname!b15"},{"appId":"destappname!b15","appName":"destination"},{"xsappname":"rtappname!b15"}]"#;

    #[test]
    fn upstream_default_answer() {
        let (app, secrets) = upstream();
        assert_eq!(answer(&app, &secrets), DEFAULT);
        let report = dependencies(&app, &secrets);
        let reason = |name: &str| report.services.iter().find(|s| s.service == name).expect("service").reason.clone();
        assert!(reason("test-html-host").contains("does not exist"), "{}", reason("test-html-host"));
        assert!(reason("test-xsuaa").starts_with("out: Auto"));
        assert!(reason("test-saas").contains("xsappname from credentials.uaa.xsappname"));
        assert!(reason("test-dest").contains("special"));
    }

    #[test]
    fn always_prepends_and_explicit_auto_changes_nothing() {
        let (mut app, secrets) = upstream();
        app.spec.btp.services[0].subscription_dependency = Some(SubscriptionDependency::Always);
        assert_eq!(answer(&app, &secrets), format!(r#"[{{"xsappname":"appname!b14"}},{}"#, &DEFAULT[1..]));
        app.spec.btp.services[0].subscription_dependency = Some(SubscriptionDependency::Auto);
        assert_eq!(answer(&app, &secrets), DEFAULT);
    }

    #[test]
    fn never_removes_a_special_dependency() {
        let (mut app, secrets) = upstream();
        app.spec.btp.services[4].subscription_dependency = Some(SubscriptionDependency::Never);
        assert!(!answer(&app, &secrets).contains("destination"));
        assert_eq!(dependencies(&app, &secrets).services[4].reason, "out: subscriptionDependency is Never");
    }

    #[test]
    fn auditlog_is_special_only_with_plan_oauth2_which_only_metadata_secrets_carry() {
        let app: CAPApplication = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"btpAppName": "a", "providerSubaccountId": "p", "btp": {"services": [
                {"name": "audit-oauth", "class": "auditlog", "secret": "audit-oauth"},
                {"name": "audit-standard", "class": "auditlog", "secret": "audit-standard"},
                {"name": "audit-no-plan", "class": "auditlog", "secret": "audit-no-plan"},
                {"name": "conn", "class": "connectivity", "secret": "conn"},
            ]}},
        }))
        .expect("app");
        let secrets = Secrets::default()
            .metadata("audit-oauth", "oauth2", json!({"uaa": {"xsappname": "audit!b1"}}))
            .metadata("audit-standard", "standard", json!({"uaa": {"xsappname": "audit2!b1"}}))
            .credentials("audit-no-plan", json!({"uaa": {"xsappname": "audit3!b1"}}))
            .credentials("conn", json!({"xsappname": "conn!b1"}));
        assert_eq!(
            answer(&app, &secrets),
            r#"[{"appId":"audit!b1","appName":"auditlog"},{"appId":"conn!b1","appName":"connectivity"}]"#
        );
    }

    #[test]
    fn always_without_any_xsappname_is_skipped_and_wrong_types_skip_the_service() {
        let app: CAPApplication = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"btpAppName": "a", "providerSubaccountId": "p", "btp": {"services": [
                {"name": "empty", "class": "xsuaa", "secret": "empty", "subscriptionDependency": "Always"},
                {"name": "typed", "class": "xsuaa", "secret": "typed"},
            ]}},
        }))
        .expect("app");
        let secrets = Secrets::default()
            .credentials("empty", json!({"clientid": "x"}))
            .credentials("typed", json!({"saasregistryenabled": "true", "xsappname": "t!b1"}));
        let report = dependencies(&app, &secrets);
        assert!(report.dependencies.is_empty());
        assert!(report.services[0].reason.contains("neither credentials.xsappname nor uaa.xsappname"));
        assert!(report.services[1].reason.contains("saasregistryenabled is not a boolean"));
        assert_eq!(serde_json::to_string(&report.dependencies).expect("json"), "[]");
    }
}
