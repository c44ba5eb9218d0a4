//! What capdeck reads from containers: their status, and the VCAP Secret they agree on.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ContainerStatus;

use super::DeploymentView;

/// `Error (exit code 1)`: how the container last terminated, if it did.
pub fn termination_text(container: &ContainerStatus) -> Option<String> {
    let terminated = container.last_state.as_ref().and_then(|state| state.terminated.as_ref())?;
    Some(format!("{} (exit code {})", terminated.reason.as_deref().unwrap_or("unknown"), terminated.exit_code))
}

/// The single VCAP Secret every container and initContainer gets through `envFrom`, if they
/// agree. Only `secretRef`s for which `is_vcap` holds count: a VCAP Secret is one labelled
/// `sme.sap.com/secret-owner-hash` (as both operators make them); every other entry (a team's
/// ConfigMap or Secret, whatever its name) is not capdeck's, never read as VCAP_SERVICES nor
/// rewritten.
pub fn referenced_vcap_secret(
    deployment: &DeploymentView,
    is_vcap: impl Fn(&str) -> bool,
) -> Result<Option<String>, BTreeSet<String>> {
    let Some(pod) = deployment.spec.as_ref().and_then(|spec| spec.template.spec.as_ref()) else {
        return Ok(None);
    };
    let mut names = BTreeSet::new();
    let mut without = 0usize;
    for container in pod.containers.iter().chain(pod.init_containers.iter().flatten()) {
        let refs: Vec<&str> = container
            .env_from
            .iter()
            .flatten()
            .filter_map(|source| source.secret_ref.as_ref().map(|secret| secret.name.as_str()))
            .filter(|name| is_vcap(name))
            .collect();
        if refs.is_empty() {
            without += 1;
        }
        names.extend(refs.into_iter().map(str::to_string));
    }
    match names.len() {
        0 => Ok(None),
        1 if without == 0 => Ok(names.into_iter().next()),
        _ => Err(names),
    }
}
