//! The engine's own Lease apart from holding it: whether it can use it at all (checked once at
//! start-up, so a daemon never observes forever without saying why), who holds it now (for
//! `/readyz`), its marks, and the one-leader check over every engine's Lease.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

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
            message: crate::cluster::status_message(&status),
        }),
        Err(error) => Err(LeaseProblem::Other {
            namespace: lease.namespace.clone(),
            name: lease.name.clone(),
            message: crate::cluster::describe_error(&error),
        }),
    }
}

use super::{
    ENGINE_LABEL, EngineLease, EngineScope, Holder, LEADING_ANNOTATION, LeaseSettings, PublishedSettings,
    SCOPE_ANNOTATION, SETTINGS_ANNOTATION, WatchedLeases, engine_leases, engine_leases_among, holder_of,
};
use crate::api::lenient::Lenient;

/// Read the Lease and say who holds it. A missing Lease is `Nobody`.
pub async fn holder(client: &kube::Client, lease: &LeaseSettings) -> Result<Holder, crate::cluster::ApiError> {
    let api: Api<Lenient<Lease>> = Api::namespaced(client.clone(), &lease.namespace);
    let found = api.get_opt(&lease.name).await.map_err(crate::cluster::ApiError)?;
    // A Lease that does not decode is held by nobody capdeck can name.
    Ok(holder_of(found.and_then(|found| found.0.ok()).as_ref(), Timestamp::now()))
}

/// The field manager of the marks: one for every engine, so a later holder overwrites them.
const MARKS_MANAGER: &str = "capdeck-engine-marks";

/// Put capdeck's marks on our Lease (the label, our scope and settings) and say whether we lead.
/// Only the holder calls it.
pub async fn mark(
    client: &kube::Client,
    lease: &LeaseSettings,
    scope: &EngineScope,
    settings: &PublishedSettings,
    leading: Option<&str>,
) -> Result<(), kube::Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
    let body = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lease.name,
            "labels": {ENGINE_LABEL: "true"},
            "annotations": {
                SCOPE_ANNOTATION: scope.text(),
                SETTINGS_ANNOTATION: serde_json::to_string(settings).unwrap_or_default(),
                LEADING_ANNOTATION: leading.unwrap_or(""),
            },
        },
    });
    api.patch(&lease.name, &PatchParams::apply(MARKS_MANAGER).force(), &Patch::Apply(&body)).await.map(|_| ())
}

/// Another engine that leads a scope overlapping ours, from a Lease other than ours. Reading
/// Leases in all namespaces is what makes "one leader per cluster" checkable: without it this
/// engine must not lead.
pub async fn other_leader(
    client: &kube::Client,
    lease: &LeaseSettings,
    scope: &EngineScope,
) -> Result<Option<EngineLease>, OtherLeaderCheck> {
    let leases = engine_leases(client).await.map_err(|error| OtherLeaderCheck {
        namespace: lease.namespace.clone(),
        message: crate::cluster::describe_error(&error),
    })?;
    Ok(other_among(leases, lease, scope))
}

/// [`other_leader`] from a watch instead of a LIST: `None` while the watch cannot be trusted
/// (then LIST). Not for the check right after marking our Lease leading, which must read after
/// our write (a LIST is linearizable; a watch may lag).
pub fn other_leader_seen(
    watched: &WatchedLeases,
    lease: &LeaseSettings,
    scope: &EngineScope,
) -> Option<Option<EngineLease>> {
    let leases = watched.current()?;
    let now = Timestamp::now();
    Some(other_among(engine_leases_among(&leases, now), lease, scope))
}

/// When this engine's own Lease was last seen renewed by it, as the API server has it.
#[derive(Clone, Copy, Debug, Default)]
pub struct OwnRenewal {
    last: Option<Timestamp>,
}

impl OwnRenewal {
    /// Just taken or renewed by the lease manager.
    pub fn starting_now() -> Self {
        Self { last: Some(Timestamp::now()) }
    }

    /// Look (from `watched`; a GET only while the watch cannot be trusted and a renewal is
    /// due) and say, in seconds since the last renewal seen, whether the Lease has gone longer
    /// than its duration without one: from then on any engine may take it.
    pub async fn look(
        &mut self,
        client: &kube::Client,
        lease: &LeaseSettings,
        identity: &str,
        watched: &WatchedLeases,
    ) -> Option<i64> {
        let now = Timestamp::now();
        let duration = i64::try_from(lease.duration_seconds).unwrap_or(i64::MAX);
        let since = |last: Option<Timestamp>| last.map_or(i64::MAX, |at| now.as_second() - at.as_second());
        let ours = |found: &Lease| {
            found.metadata.namespace.as_deref() == Some(lease.namespace.as_str())
                && found.metadata.name.as_deref() == Some(lease.name.as_str())
        };
        let seen = match watched.current() {
            Some(leases) => leases.into_iter().find(ours),
            None => None,
        };
        let seen = match seen {
            Some(found) => Some(found),
            // Not on the watch (it cannot be trusted now, or has not shown our mark yet): read it
            // when a renewal is due.
            None if since(self.last) > duration.saturating_sub(i64::try_from(lease.grace_seconds).unwrap_or(0)) => {
                let api = Api::<Lenient<Lease>>::namespaced(client.clone(), &lease.namespace);
                api.get_opt(&lease.name).await.ok().flatten().and_then(|found| found.0.ok())
            }
            None => None,
        };
        if let Some(renewed) = seen.as_ref().and_then(|found| renewed_by(found, identity)) {
            self.last = self.last.max(Some(renewed));
        }
        let silent = since(self.last);
        (silent > duration).then_some(silent)
    }
}

/// When `lease` was last renewed (or taken) by `identity`, if it is held by it.
fn renewed_by(lease: &Lease, identity: &str) -> Option<Timestamp> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    spec.renew_time.as_ref().or(spec.acquire_time.as_ref()).map(|time| time.0)
}

/// The pure part of [`other_leader`].
pub fn other_among(leases: Vec<EngineLease>, lease: &LeaseSettings, scope: &EngineScope) -> Option<EngineLease> {
    leases
        .into_iter()
        .filter(|other| !(other.namespace == lease.namespace && other.name == lease.name))
        .filter(|other| other.scope.overlaps(scope) && other.leads())
        .min_by_key(EngineLease::key)
}

/// Why an engine could not make sure that no other engine leads.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot make sure no other capdeck engine leads ({message}): an engine must list \
     leases.coordination.k8s.io in all namespaces before it leads (the ClusterRole `capdeck manifests` prints \
     grants it); observing until it can"
)]
pub struct OtherLeaderCheck {
    pub namespace: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_name_the_fix() {
        let missing = LeaseProblem::MissingNamespace { namespace: "capdeck-system".into() }.to_string();
        assert!(missing.contains("kubectl create namespace capdeck-system") && missing.contains("--lease-namespace"));
        let forbidden =
            LeaseProblem::Forbidden { namespace: "ops".into(), name: "capdeck-engine".into(), message: "no".into() }
                .to_string();
        assert!(forbidden.contains("leases.coordination.k8s.io") && forbidden.contains("--lease-namespace"));
    }

    fn engine_lease(namespace: &str, scope: EngineScope, leads: bool) -> EngineLease {
        EngineLease {
            namespace: namespace.into(),
            name: "capdeck-engine".into(),
            scope,
            holder: Holder::Renewing { identity: format!("{namespace}-engine"), renewed_ago: 1 },
            leading_mark: leads.then(|| format!("{namespace}-engine")),
            settings: None,
        }
    }

    #[test]
    fn only_another_lease_leading_an_overlapping_scope_stops_an_engine() {
        let mine = LeaseSettings { namespace: "default".into(), ..LeaseSettings::default() };
        let all = EngineScope::All;
        let hr = EngineScope::Namespace("cap-hr".into());
        let shop = EngineScope::Namespace("cap-shop".into());
        let cases = [
            (
                "the installed daemon leads everything",
                vec![engine_lease("capdeck-system", all.clone(), true)],
                &hr,
                true,
            ),
            ("our own lease is not another engine", vec![engine_lease("default", all.clone(), true)], &all, false),
            (
                "a holder still checking does not lead yet",
                vec![engine_lease("capdeck-system", all.clone(), false)],
                &all,
                false,
            ),
            ("another namespace's engine", vec![engine_lease("team", shop.clone(), true)], &hr, false),
            ("the same namespace's engine", vec![engine_lease("team", hr.clone(), true)], &hr, true),
            ("a namespaced leader blocks an all-namespaces engine", vec![engine_lease("team", shop, true)], &all, true),
        ];
        for (what, leases, scope, stopped) in cases {
            assert_eq!(other_among(leases, &mine, scope).is_some(), stopped, "{what}");
        }
    }
}
