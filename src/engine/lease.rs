//! What the engine needs to know about its Lease apart from holding it: whether it can use it at
//! all (checked once at start-up, so a daemon never observes forever without saying why), and
//! who holds it now (for `/readyz`, the console's header and `capdeck doctor`).

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::config::LeaseSettings;

/// Why the engine cannot use its Lease, with the fix.
#[derive(Debug, thiserror::Error)]
pub enum LeaseProblem {
    #[error(
        "the lease namespace {namespace:?} does not exist: create it (kubectl create namespace {namespace}), \
         install capdeck there (capdeck manifests -n {namespace} | kubectl apply -f -), or pass --lease-namespace NS"
    )]
    MissingNamespace { namespace: String },
    #[error(
        "not allowed to use the Lease {namespace}/{name}: {message}. The engine needs get, create and patch on \
         leases.coordination.k8s.io in namespace {namespace} (the Role `capdeck manifests` prints grants \
         them), or pass --lease-namespace NS where it has them"
    )]
    Forbidden { namespace: String, name: String, message: String },
    #[error("cannot check the Lease {namespace}/{name}: {message}")]
    Other { namespace: String, name: String, message: String },
}

/// Try the Lease without changing it (a server-side dry-run apply of its name alone): a missing
/// namespace or an RBAC refusal shows now, not as an endless retry.
pub async fn preflight(client: &kube::Client, lease: &LeaseSettings, identity: &str) -> Result<(), LeaseProblem> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
    let body = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": lease.name}});
    let mut params = PatchParams::apply(&format!("capdeck-preflight-{identity}"));
    params.dry_run = true;
    match api.patch(&lease.name, &params, &Patch::Apply(&body)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            Err(LeaseProblem::MissingNamespace { namespace: lease.namespace.clone() })
        }
        Err(kube::Error::Api(status)) if status.code == 403 => Err(LeaseProblem::Forbidden {
            namespace: lease.namespace.clone(),
            name: lease.name.clone(),
            message: status.message.clone(),
        }),
        Err(error) => Err(LeaseProblem::Other {
            namespace: lease.namespace.clone(),
            name: lease.name.clone(),
            message: crate::cluster::describe_error(&error),
        }),
    }
}

/// Who holds the Lease now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// Held and renewed within its duration.
    Renewing { identity: String, renewed_ago: i64 },
    /// Held, but not renewed for longer than its duration: its holder is gone.
    Expired { identity: String, renewed_ago: i64 },
    /// Released or never taken.
    Nobody,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Renewing { identity, renewed_ago } => write!(f, "{identity} leads (renewed {renewed_ago}s ago)"),
            Self::Expired { identity, renewed_ago } => {
                write!(f, "nobody leads (the lease of {identity} expired; last renewed {renewed_ago}s ago)")
            }
            Self::Nobody => write!(f, "nobody leads (the lease is free)"),
        }
    }
}

/// Read the Lease and say who holds it. A missing Lease is `Nobody`.
pub async fn holder(client: &kube::Client, lease: &LeaseSettings) -> Result<Holder, crate::cluster::ApiError> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
    let found = api.get_opt(&lease.name).await.map_err(crate::cluster::ApiError)?;
    Ok(holder_of(found.as_ref(), Timestamp::now()))
}

/// The Lease the Go CAP Operator leads with (`cmd/controller/main.go`, `LeaseLockName`), in its
/// `POD_NAMESPACE`.
pub const GO_OPERATOR_LEASE: &str = "capoperator-lease-lock";

/// The pure part of `holder`.
pub fn holder_of(lease: Option<&Lease>, now: Timestamp) -> Holder {
    let Some(spec) = lease.and_then(|l| l.spec.as_ref()) else { return Holder::Nobody };
    let Some(identity) = spec.holder_identity.clone().filter(|h| !h.is_empty()) else { return Holder::Nobody };
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else { return Holder::Nobody };
    let renewed_ago = now.as_second() - renewed.0.as_second();
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    if renewed_ago <= duration {
        Holder::Renewing { identity, renewed_ago: renewed_ago.max(0) }
    } else {
        Holder::Expired { identity, renewed_ago }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    use super::*;

    fn lease(holder: Option<&str>, renewed_ago: Option<i64>, duration: i32, now: Timestamp) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                renew_time: renewed_ago.map(|ago| {
                    MicroTime(now.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(ago)).expect("time"))
                }),
                lease_duration_seconds: Some(duration),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn a_lease_is_held_only_while_renewed_within_its_duration() {
        let now = Timestamp::now();
        let cases = [
            (None, Holder::Nobody),
            (Some(lease(None, None, 15, now)), Holder::Nobody),
            (Some(lease(Some(""), Some(1), 15, now)), Holder::Nobody),
            (Some(lease(Some("a"), None, 15, now)), Holder::Nobody),
            (Some(lease(Some("a"), Some(3), 15, now)), Holder::Renewing { identity: "a".into(), renewed_ago: 3 }),
            (Some(lease(Some("a"), Some(15), 15, now)), Holder::Renewing { identity: "a".into(), renewed_ago: 15 }),
            (Some(lease(Some("a"), Some(16), 15, now)), Holder::Expired { identity: "a".into(), renewed_ago: 16 }),
        ];
        for (lease, expected) in cases {
            assert_eq!(holder_of(lease.as_ref(), now), expected, "{lease:?}");
        }
    }

    #[test]
    fn problems_name_the_fix() {
        let missing = LeaseProblem::MissingNamespace { namespace: "capdeck-system".into() }.to_string();
        assert!(missing.contains("kubectl create namespace capdeck-system") && missing.contains("--lease-namespace"));
        let forbidden =
            LeaseProblem::Forbidden { namespace: "ops".into(), name: "capdeck-engine".into(), message: "no".into() }
                .to_string();
        assert!(forbidden.contains("leases.coordination.k8s.io") && forbidden.contains("--lease-namespace"));
    }
}
