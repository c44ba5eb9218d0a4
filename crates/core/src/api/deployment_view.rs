//! What capdeck reads of an `apps/v1` Deployment, decoded straight from the API's JSON.
//!
//! The stores hold one of these per Deployment instead of k8s-openapi's `Deployment`: that type
//! carries every field of a PodSpec and a Container inline (2.4 KB + 2.1 KB per container before
//! any content), which at 5,000 Deployments was a quarter of the engine's memory. The shape and
//! field names follow the real object, so a Deployment's JSON or YAML decodes into it as is and
//! code reads `spec.template.spec.containers[].envFrom` as it would on the full type. Writes never
//! use this type: they read the live Deployment and write it whole.

use std::borrow::Cow;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::core::v1::{Container, EnvFromSource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeploymentView {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<DeploymentViewSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DeploymentStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeploymentViewSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Paused by a person (`kubectl rollout pause`): the deployment controller starts no new
    /// ReplicaSet, and keeps no progress deadline, until it is resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Which Pods are this Deployment's (the failure-aware rollout reads the new ones), kept as
    /// the label query a LIST of them takes: one string, where the selector's maps cost half a
    /// kilobyte per Deployment. Not written back: a view is never sent to the API server.
    #[serde(default, skip_serializing)]
    pub selector: Option<PodSelector>,
    #[serde(default)]
    pub template: PodTemplateView,
}

/// A Deployment's Pod selector as a label query (`app=srv,tier in (a,b),!canary`); `None` when
/// it cannot be one: empty (it would select every Pod) or an operator Kubernetes does not know.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSelector(pub Option<String>);

impl PodSelector {
    pub fn of(selector: &LabelSelector) -> Self {
        let mut terms: Vec<String> =
            selector.match_labels.iter().flatten().map(|(key, value)| format!("{key}={value}")).collect();
        for expression in selector.match_expressions.iter().flatten() {
            let values = expression.values.clone().unwrap_or_default().join(",");
            terms.push(match expression.operator.as_str() {
                "In" => format!("{} in ({values})", expression.key),
                "NotIn" => format!("{} notin ({values})", expression.key),
                "Exists" => expression.key.clone(),
                "DoesNotExist" => format!("!{}", expression.key),
                _ => return Self(None),
            });
        }
        Self((!terms.is_empty()).then(|| terms.join(",")))
    }

    /// The label query, if the selector can be one.
    pub fn query(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de> Deserialize<'de> for PodSelector {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        LabelSelector::deserialize(deserializer).map(|selector| Self::of(&selector))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PodTemplateView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpecView>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecView {
    #[serde(default)]
    pub containers: Vec<ContainerView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<ContainerView>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerView {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    /// The names of its `env` entries (their values are not kept): one named `VCAP_SERVICES`
    /// overrides what `envFrom` gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvName>>,
}

/// An `env` entry's name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvName {
    #[serde(default)]
    pub name: String,
}

/// The view of a full Deployment (a live one read before a write).
impl From<&Deployment> for DeploymentView {
    fn from(deployment: &Deployment) -> Self {
        let container = |c: &Container| ContainerView {
            name: c.name.clone(),
            image: c.image.clone(),
            env_from: c.env_from.clone(),
            env: c.env.as_ref().map(|env| env.iter().map(|var| EnvName { name: var.name.clone() }).collect()),
        };
        Self {
            metadata: deployment.metadata.clone(),
            spec: deployment.spec.as_ref().map(|spec| DeploymentViewSpec {
                replicas: spec.replicas,
                paused: spec.paused,
                selector: Some(PodSelector::of(&spec.selector)),
                template: PodTemplateView {
                    spec: spec.template.spec.as_ref().map(|pod| PodSpecView {
                        containers: pod.containers.iter().map(container).collect(),
                        init_containers: pod.init_containers.as_ref().map(|c| c.iter().map(container).collect()),
                    }),
                },
            }),
            status: deployment.status.clone(),
        }
    }
}

impl kube::Resource for DeploymentView {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        Cow::Borrowed("Deployment")
    }

    fn group((): &()) -> Cow<'_, str> {
        Cow::Borrowed("apps")
    }

    fn version((): &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }

    fn plural((): &()) -> Cow<'_, str> {
        Cow::Borrowed("deployments")
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use kube::Resource as _;
    use serde_json::json;

    use super::*;

    #[test]
    fn selectors_with_expressions_list_the_same_pods() {
        let selector = |value: serde_json::Value| serde_json::from_value::<LabelSelector>(value).expect("selector");
        assert_eq!(PodSelector::of(&selector(json!({"matchLabels": {"app": "srv"}}))).query(), Some("app=srv"));
        let expressions = selector(json!({"matchLabels": {"app": "srv"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]}, {"key": "canary", "operator": "DoesNotExist"},
            {"key": "team", "operator": "Exists"}, {"key": "env", "operator": "NotIn", "values": ["dev"]}]}));
        assert_eq!(PodSelector::of(&expressions).query(), Some("app=srv,tier in (a,b),!canary,team,env notin (dev)"));
        assert_eq!(PodSelector::of(&selector(json!({}))).query(), None, "an empty selector would list every Pod");
    }

    #[test]
    fn a_view_reads_its_selector_as_the_query_its_pods_are_listed_by() {
        let view: DeploymentView = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {
            "selector": {"matchLabels": {"app": "srv"}, "matchExpressions": [{"key": "x", "operator": "Odd"}]},
            "template": {}}}))
        .expect("view");
        assert_eq!(view.spec.and_then(|spec| spec.selector), Some(PodSelector(None)), "an unknown operator");
    }

    fn full() -> serde_json::Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "shop-srv", "namespace": "cap", "generation": 3,
                         "annotations": {"capdeck.dev/rotation-batch": "b-1"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "shop"}},
                     "template": {"metadata": {"labels": {"app": "shop"}},
                                  "spec": {"containers": [{"name": "srv", "image": "srv:1",
                                                           "env": [{"name": "A", "value": "1"}],
                                                           "envFrom": [{"secretRef": {"name": "vcap-1"}}],
                                                           "livenessProbe": {"httpGet": {"port": 8080}}}],
                                           "initContainers": [{"name": "init", "envFrom": [{"secretRef": {"name": "vcap-1"}}]}],
                                           "volumes": [{"name": "v", "emptyDir": {}}]}}},
            "status": {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2,
                       "conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}
        })
    }

    #[test]
    fn decodes_what_capdeck_reads_of_a_full_deployment() {
        let view: DeploymentView = serde_json::from_value(full()).expect("view");
        let typed: Deployment = serde_json::from_value(full()).expect("deployment");
        assert_eq!(view.metadata, typed.metadata);
        assert_eq!(view.status, typed.status);
        let spec = view.spec.as_ref().expect("spec");
        assert_eq!(spec.replicas, Some(2));
        let pod = spec.template.spec.as_ref().expect("pod");
        assert_eq!(pod.containers[0].name, "srv");
        assert_eq!(pod.containers[0].image.as_deref(), Some("srv:1"));
        let typed_pod = typed.spec.and_then(|s| s.template.spec).expect("typed pod");
        assert_eq!(pod.containers[0].env_from, typed_pod.containers[0].env_from);
        assert_eq!(pod.init_containers.as_ref().map(Vec::len), Some(1));
        assert_eq!(DeploymentView::url_path(&(), Some("cap")), "/apis/apps/v1/namespaces/cap/deployments");
        assert_eq!(DeploymentView::api_version(&()), "apps/v1");
    }

    #[test]
    fn the_view_of_a_full_deployment_is_the_decoded_view() {
        let typed: Deployment = serde_json::from_value(full()).expect("deployment");
        let view: DeploymentView = serde_json::from_value(full()).expect("view");
        assert_eq!(DeploymentView::from(&typed), view);
    }

    #[test]
    fn is_a_fraction_of_the_full_type() {
        let view = std::mem::size_of::<DeploymentView>() + std::mem::size_of::<ContainerView>();
        let full = std::mem::size_of::<Deployment>() + std::mem::size_of::<Container>();
        assert!(view * 4 < full, "view {view} B, full {full} B");
    }
}
