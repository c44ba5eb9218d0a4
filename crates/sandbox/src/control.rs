//! What tests (and `capdeck sandbox --deny`) control: injected faults, latency, who the user
//! is and what they may not do, and the log of every request.

use std::time::Duration;

/// Which requests a fault or a deny rule applies to. `None` matches anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestMatcher {
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: Option<String>,
    /// Resource plural, e.g. `deployments` (or `rotationbatches.capdeck.dev`).
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl RequestMatcher {
    pub fn verb(verb: &str) -> Self {
        Self { verb: Some(verb.into()), ..Self::default() }
    }

    pub fn on(verb: &str, resource: &str) -> Self {
        Self { verb: Some(verb.into()), resource: Some(resource.into()), ..Self::default() }
    }

    pub fn resource(resource: &str) -> Self {
        Self { resource: Some(resource.into()), ..Self::default() }
    }

    #[must_use]
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }

    #[must_use]
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = Some(subresource.into());
        self
    }

    pub fn matches(&self, request: &RequestInfo) -> bool {
        let wild = |pattern: &Option<String>, value: &str| pattern.as_deref().is_none_or(|p| p == "*" || p == value);
        let resource_ok = self.resource.as_deref().is_none_or(|pattern| {
            pattern == "*"
                || pattern == request.resource
                || pattern == format!("{}.{}", request.resource, request.group)
                || request.subresource.as_deref().is_some_and(|sub| pattern == format!("{}/{sub}", request.resource))
        });
        wild(&self.verb, &request.verb)
            && resource_ok
            && self.subresource.as_deref().is_none_or(|sub| request.subresource.as_deref() == Some(sub))
            && wild(&self.namespace, request.namespace.as_deref().unwrap_or_default())
            && wild(&self.name, request.name.as_deref().unwrap_or_default())
    }
}

/// A request as the API server classifies it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// One logged request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    pub query: String,
    /// Empty for discovery and other non-resource requests.
    pub info: RequestInfo,
    pub status: u16,
    /// What the request's own answer was, when an injected fault answered after it was carried
    /// out (`Sandbox::fail_next_after_applying`): the client saw `status`, and the change was made.
    pub made: Option<u16>,
    pub field_manager: Option<String>,
    pub content_type: Option<String>,
}

impl RequestRecord {
    /// A write to the API (create, update, patch, delete, deletecollection) that took effect,
    /// whatever its client was told.
    pub fn is_successful_write(&self) -> bool {
        matches!(self.info.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection")
            && self.made.unwrap_or(self.status) < 300
            && !matches!(self.info.resource.as_str(), "selfsubjectreviews" | "selfsubjectaccessreviews")
    }
}

#[derive(Clone, Debug)]
pub struct FaultRule {
    pub matcher: RequestMatcher,
    pub status: u16,
    pub remaining: usize,
    /// The request is carried out, then answered with `status`: a kube-apiserver whose wait for
    /// etcd timed out (504) while etcd committed the write anyway.
    pub applied: bool,
}

/// An injected answer: its status, and whether the request was carried out first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub status: u16,
    pub applied: bool,
}

/// `VERB:RESOURCE` (e.g. `patch:rotationbatches`, `*:secrets`): SelfSubjectAccessReview says no
/// and matching requests answer 403.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DenyRule(pub RequestMatcher);

impl std::str::FromStr for DenyRule {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (verb, resource) = text
            .split_once(':')
            .filter(|(verb, resource)| !verb.is_empty() && !resource.is_empty())
            .ok_or_else(|| format!("{text:?} is not VERB:RESOURCE (e.g. patch:rotationbatches or *:secrets)"))?;
        Ok(Self(RequestMatcher {
            verb: Some(verb.into()),
            resource: Some(resource.into()),
            ..RequestMatcher::default()
        }))
    }
}

#[derive(Clone, Debug)]
pub struct Control {
    pub user: String,
    pub groups: Vec<String>,
    pub deny: Vec<DenyRule>,
    pub faults: Vec<FaultRule>,
    pub latency: Duration,
    /// Refuse streaming lists (`sendInitialEvents`) with 422, as a server without the WatchList
    /// feature does.
    pub refuse_streaming_lists: bool,
}

impl Control {
    /// The first fault that matches, consuming one of its repetitions.
    pub fn take_fault(&mut self, request: &RequestInfo) -> Option<Fault> {
        let rule = self.faults.iter_mut().find(|rule| rule.remaining > 0 && rule.matcher.matches(request))?;
        rule.remaining -= 1;
        let fault = Fault { status: rule.status, applied: rule.applied };
        self.faults.retain(|rule| rule.remaining > 0);
        Some(fault)
    }

    pub fn denies(&self, request: &RequestInfo) -> bool {
        self.deny.iter().any(|rule| rule.0.matches(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(verb: &str, resource: &str) -> RequestInfo {
        RequestInfo {
            verb: verb.into(),
            group: "capdeck.dev".into(),
            resource: resource.into(),
            namespace: Some("ns".into()),
            name: Some("rb-1".into()),
            ..RequestInfo::default()
        }
    }

    #[test]
    fn deny_rules_parse_and_match() {
        let rule: DenyRule = "patch:rotationbatches".parse().expect("rule");
        assert!(rule.0.matches(&request("patch", "rotationbatches")));
        assert!(!rule.0.matches(&request("get", "rotationbatches")));
        let rule: DenyRule = "*:rotationbatches.capdeck.dev".parse().expect("rule");
        assert!(rule.0.matches(&request("update", "rotationbatches")));
        assert!("patch".parse::<DenyRule>().is_err());
        assert!(":x".parse::<DenyRule>().is_err());
    }

    #[test]
    fn faults_are_consumed() {
        let mut control = Control {
            user: "u".into(),
            groups: vec![],
            deny: vec![],
            faults: vec![],
            latency: Duration::ZERO,
            refuse_streaming_lists: false,
        };
        control.faults.push(FaultRule {
            matcher: RequestMatcher::on("patch", "rotationbatches"),
            status: 409,
            remaining: 2,
            applied: false,
        });
        let conflict = Some(Fault { status: 409, applied: false });
        assert_eq!(control.take_fault(&request("get", "rotationbatches")), None);
        assert_eq!(control.take_fault(&request("patch", "rotationbatches")), conflict);
        assert_eq!(control.take_fault(&request("patch", "rotationbatches")), conflict);
        assert_eq!(control.take_fault(&request("patch", "rotationbatches")), None);
        assert!(control.faults.is_empty());
    }
}
