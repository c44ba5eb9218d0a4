//! What capdeck says about a container's status.

use k8s_openapi::api::core::v1::ContainerStatus;

/// `Error (exit code 1)`: how the container last terminated, if it did.
pub fn termination_text(container: &ContainerStatus) -> Option<String> {
    let terminated = container.last_state.as_ref().and_then(|state| state.terminated.as_ref())?;
    Some(format!("{} (exit code {})", terminated.reason.as_deref().unwrap_or("unknown"), terminated.exit_code))
}
