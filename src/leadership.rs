//! Leadership, in one place: the engine's Lease (held in [`hold`], checked and marked in
//! [`lease`]), the one-leader check, and reading which capdeck engine leads a cluster, wherever
//! its Lease lives (here, with the Leases [`WatchedLeases`] keeps for the engine and the console).
//!
//! Every engine marks its Lease: the label [`ENGINE_LABEL`], the namespaces it writes in
//! ([`SCOPE_ANNOTATION`]), the settings it decides with ([`SETTINGS_ANNOTATION`]) and, once it has
//! made sure no other engine leads an overlapping scope, its own identity in
//! [`LEADING_ANNOTATION`]. So one cluster-wide LIST by label finds the leader whatever
//! `--lease-namespace` or `--lease-name` it was given (the installed daemon's `capdeck-system`, a
//! laptop's `default`), and the engine uses the same LIST to refuse to lead beside another.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams};
use serde::{Deserialize, Serialize};

use crate::api::ObjectKey;
use crate::api::lenient::Lenient;
use crate::cluster::Scope;

pub mod hold;
pub mod lease;
mod watched;
pub use hold::{Candidate, lead};
pub use watched::WatchedLeases;

/// Where the engine's Lease lives and how long it lasts.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    pub duration_seconds: u64,
    pub grace_seconds: u64,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        Self { namespace: "default".into(), name: DEFAULT_LEASE_NAME.into(), duration_seconds: 15, grace_seconds: 5 }
    }
}

/// On every capdeck engine's Lease (value `true`): what the cluster-wide LIST selects.
pub const ENGINE_LABEL: &str = "capdeck.dev/engine";
/// The namespaces the engine writes in: `*` for all, else one namespace.
pub const SCOPE_ANNOTATION: &str = "capdeck.dev/scope";
/// The identity that made sure nobody else leads and now leads (only while it also holds the Lease).
pub const LEADING_ANNOTATION: &str = "capdeck.dev/leading";
/// The engine's effective settings, JSON ([`PublishedSettings`]): observers judge with them.
pub const SETTINGS_ANNOTATION: &str = "capdeck.dev/settings";
/// Where `capdeck manifests` installs the daemon: read when Leases cannot be listed cluster-wide.
pub const INSTALL_NAMESPACE: &str = "capdeck-system";
/// The Lease the Go CAP Operator leads with (`cmd/controller/main.go`, `LeaseLockName`), in its
/// `POD_NAMESPACE`.
pub const GO_OPERATOR_LEASE: &str = "capoperator-lease-lock";
/// The Lease name engines use unless told otherwise.
pub const DEFAULT_LEASE_NAME: &str = "capdeck-engine";

/// Who holds a Lease now.
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

/// Who holds `lease` at `now`. A missing Lease is `Nobody`.
/// How far in the future a renewal may lie and still count (the clocks of two machines differ).
pub const MAX_CLOCK_SKEW_SECONDS: i64 = 60;
/// The longest a Lease counts as held after its renewal, whatever its `leaseDurationSeconds`
/// (capdeck's own last 15 s, as controller-runtime's and the Go CAP Operator's do).
pub const MAX_TRUSTED_DURATION_SECONDS: i64 = 60;

pub fn holder_of(lease: Option<&Lease>, now: Timestamp) -> Holder {
    let Some(spec) = lease.and_then(|l| l.spec.as_ref()) else { return Holder::Nobody };
    let Some(identity) = spec.holder_identity.clone().filter(|h| !h.is_empty()) else { return Holder::Nobody };
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else { return Holder::Nobody };
    let renewed_ago = now.as_second() - renewed.0.as_second();
    // Anyone who may write a Lease may write a renewal in year 9999 or a duration of 68 years: a
    // renewal from the future (past clock skew) renews nothing, and no Lease lasts longer than
    // `MAX_TRUSTED_DURATION_SECONDS` after it, so one forged object cannot hold leadership forever.
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15)).clamp(0, MAX_TRUSTED_DURATION_SECONDS);
    if (-MAX_CLOCK_SKEW_SECONDS..=duration).contains(&renewed_ago) {
        Holder::Renewing { identity, renewed_ago: renewed_ago.max(0) }
    } else {
        Holder::Expired { identity, renewed_ago }
    }
}

/// The namespaces an engine writes in, as its Lease says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineScope {
    All,
    Namespace(String),
}

impl EngineScope {
    pub fn of(scope: &Scope) -> Self {
        match scope {
            Scope::All => Self::All,
            Scope::Namespace(namespace) => Self::Namespace(namespace.clone()),
        }
    }

    /// The annotation's value.
    pub fn text(&self) -> &str {
        match self {
            Self::All => "*",
            Self::Namespace(namespace) => namespace,
        }
    }

    /// A Lease without the annotation was written by an engine that did not say: assume it writes
    /// everywhere (the safe side for exclusion).
    fn parse(text: Option<&str>) -> Self {
        match text.map(str::trim) {
            None | Some("" | "*") => Self::All,
            Some(namespace) => Self::Namespace(namespace.to_string()),
        }
    }

    /// Whether two engines would write in a common namespace.
    pub fn overlaps(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::All, _) | (_, Self::All) => true,
            (Self::Namespace(a), Self::Namespace(b)) => a == b,
        }
    }

    /// Whether an engine with this scope handles rotations in what a viewer of `scope` sees.
    pub fn covers_view(&self, scope: &Scope) -> bool {
        match (self, scope) {
            (Self::All, _) => true,
            (Self::Namespace(mine), Scope::Namespace(viewed)) => mine == viewed,
            // A namespaced engine covers part of an all-namespaces view: still the one to name.
            (Self::Namespace(_), Scope::All) => true,
        }
    }
}

impl std::fmt::Display for EngineScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => write!(f, "all namespaces"),
            Self::Namespace(namespace) => write!(f, "namespace {namespace}"),
        }
    }
}

/// What the leading engine decides with, published on its Lease so observers (the console, `capdeck
/// credentials`, `capdeck fleet`) judge credentials with the same numbers. Durations in seconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedSettings {
    pub rollout_delay_seconds: u64,
    pub expected_rollout_seconds: u64,
    pub approval: String,
    pub max_parallel_rollouts: usize,
    pub min_rollout_interval_seconds: u64,
    /// `--change-windows` (the cluster level of docs/WINDOWS.md), as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_windows: Option<String>,
    /// `--on-deadline` (`ask` or `roll`); absent from engines older than it: `ask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_deadline: Option<String>,
}

impl PublishedSettings {
    pub fn rollout_delay(&self) -> Duration {
        Duration::from_secs(self.rollout_delay_seconds)
    }

    /// Whether the engine rolls at once when waiting would outlive the old credentials
    /// (`--on-deadline roll`) instead of asking.
    pub fn deadline_rolls(&self) -> bool {
        self.on_deadline.as_deref() == Some("roll")
    }

    pub fn expected_rollout(&self) -> Duration {
        Duration::from_secs(self.expected_rollout_seconds)
    }

    /// One line for people: `window 30s, expected rollout 15m, approval auto, 5 at once, min interval 10m`.
    pub fn summary(&self) -> String {
        format!(
            "window {}, expected rollout {}, approval {}, {} at once, min interval {}",
            crate::api::go_duration::humanize(self.rollout_delay()),
            crate::api::go_duration::humanize(self.expected_rollout()),
            self.approval,
            self.max_parallel_rollouts,
            crate::api::go_duration::humanize(Duration::from_secs(self.min_rollout_interval_seconds)),
        )
    }
}

/// One capdeck engine's Lease, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineLease {
    pub namespace: String,
    pub name: String,
    pub scope: EngineScope,
    pub holder: Holder,
    /// The identity in [`LEADING_ANNOTATION`].
    pub leading_mark: Option<String>,
    pub settings: Option<PublishedSettings>,
}

impl EngineLease {
    pub fn from_lease(lease: &Lease, now: Timestamp) -> Self {
        let annotations = lease.metadata.annotations.as_ref();
        let annotation = |key: &str| annotations.and_then(|map| map.get(key)).map(String::as_str);
        Self {
            namespace: lease.namespace().unwrap_or_default(),
            name: lease.name_any(),
            scope: EngineScope::parse(annotation(SCOPE_ANNOTATION)),
            holder: holder_of(Some(lease), now),
            leading_mark: annotation(LEADING_ANNOTATION).filter(|mark| !mark.is_empty()).map(str::to_string),
            settings: annotation(SETTINGS_ANNOTATION).and_then(|json| serde_json::from_str(json).ok()),
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The identity renewing it, if anyone does.
    pub fn renewing(&self) -> Option<(&str, i64)> {
        match &self.holder {
            Holder::Renewing { identity, renewed_ago } => Some((identity, *renewed_ago)),
            _ => None,
        }
    }

    /// Held, renewed, and marked leading by its holder: this engine writes.
    pub fn leads(&self) -> bool {
        self.renewing().is_some_and(|(identity, _)| self.leading_mark.as_deref() == Some(identity))
    }
}

/// Who leads, as a console header, `doctor` or `fleet` says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderView {
    Leads {
        lease: String,
        identity: String,
        renewed_ago: i64,
        scope: EngineScope,
        settings: Option<PublishedSettings>,
    },
    /// Nobody leads what the viewer sees; `detail` says what was found (an expired Lease, none).
    Nobody {
        detail: String,
    },
    /// The viewer may not read where the leader would be: nothing is known.
    CannotLook {
        reason: String,
    },
}

/// What `LeaderView::short` says when no engine leads.
pub const NO_LEADER: &str = "no leader";

impl LeaderView {
    pub fn is_led(&self) -> bool {
        matches!(self, Self::Leads { .. })
    }

    /// The leader's published settings, if one leads and said them.
    pub fn settings(&self) -> Option<&PublishedSettings> {
        match self {
            Self::Leads { settings, .. } => settings.as_ref(),
            _ => None,
        }
    }

    /// Short, for table cells: `capdeck-7d9… (capdeck-system/capdeck-engine)`, `no leader`, `cannot look`.
    pub fn short(&self) -> String {
        match self {
            Self::Leads { lease, identity, .. } => format!("{identity} ({lease})"),
            Self::Nobody { .. } => NO_LEADER.into(),
            Self::CannotLook { .. } => "unknown (cannot read Leases)".into(),
        }
    }
}

impl std::fmt::Display for LeaderView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Leads { lease, identity, renewed_ago, scope, .. } => {
                write!(f, "{identity} leads {scope} (lease {lease}, renewed {renewed_ago}s ago)")
            }
            Self::Nobody { detail } => write!(f, "nobody leads: {detail}"),
            Self::CannotLook { reason } => write!(f, "cannot tell who leads: {reason}"),
        }
    }
}

/// The pure part of [`find`]: among the engine Leases seen, the one leading what `scope` shows.
pub fn leader_among(leases: &[EngineLease], scope: &Scope) -> LeaderView {
    let relevant: Vec<&EngineLease> = leases.iter().filter(|lease| lease.scope.covers_view(scope)).collect();
    // Only a holder that marked its Lease leading writes; one without the mark is still checking.
    let leader = relevant
        .iter()
        .filter(|lease| lease.leads())
        .min_by_key(|lease| (lease.scope != EngineScope::All, lease.key()));
    if let Some(lease) = leader
        && let Some((identity, renewed_ago)) = lease.renewing()
    {
        return LeaderView::Leads {
            lease: lease.key(),
            identity: identity.to_string(),
            renewed_ago,
            scope: lease.scope.clone(),
            settings: lease.settings.clone(),
        };
    }
    let detail = relevant
        .iter()
        .find_map(|lease| match &lease.holder {
            Holder::Expired { identity, renewed_ago } if *renewed_ago < 0 => Some(format!(
                "the lease {} of {identity} says it was renewed {}s in the future, which capdeck does not trust; \
                 rotations are not being handled (check the clocks, or who writes that Lease)",
                lease.key(),
                -renewed_ago
            )),
            Holder::Expired { identity, renewed_ago } => Some(format!(
                "the lease {} of {identity} expired (last renewed {renewed_ago}s ago); rotations are not being handled (is the daemon running? kubectl -n {} get pods)",
                lease.key(),
                lease.namespace
            )),
            Holder::Renewing { identity, .. } => Some(format!(
                "{identity} holds the lease {} but has not started leading (another engine leads a wider scope, or it \
                 is checking)",
                lease.key()
            )),
            Holder::Nobody => None,
        })
        .unwrap_or_else(|| {
            if relevant.is_empty() {
                "no capdeck engine runs for this scope (installed with Helm or capdeck manifests? check its Pods: kubectl get pods -A -l app.kubernetes.io/name=capdeck; none: helm install capdeck charts/capdeck -n capdeck-system --create-namespace, or capdeck manifests | kubectl apply -f -)".into()
            } else {
                "every capdeck engine lease is free; rotations are not being handled (is the daemon running? kubectl get pods -A -l app.kubernetes.io/name=capdeck; none: helm install capdeck charts/capdeck -n capdeck-system --create-namespace, or capdeck manifests | kubectl apply -f -)".into()
            }
        });
    LeaderView::Nobody { detail }
}

/// Every capdeck engine Lease in the cluster (one LIST by label, all namespaces).
pub async fn engine_leases(client: &kube::Client) -> Result<Vec<EngineLease>, kube::Error> {
    let api: Api<Lenient<Lease>> = Api::all(client.clone());
    let listed =
        crate::cluster::list_each(&api, &ListParams::default().labels(&format!("{ENGINE_LABEL}=true"))).await?;
    Ok(engine_leases_among(&listed.items, Timestamp::now()))
}

/// Engine Leases as read at `now` (from a LIST or a [`WatchedLeases`]).
pub fn engine_leases_among(leases: &[Lease], now: Timestamp) -> Vec<EngineLease> {
    leases.iter().map(|lease| EngineLease::from_lease(lease, now)).collect()
}

/// The Go CAP Operator's Leases renewed at `now` (`NAMESPACE/NAME`, any namespace): one LIST by
/// name. `capdeck doctor` and the leading engine's `capdeck_go_operator_running` read it.
pub async fn renewed_go_operator_leases(client: &kube::Client, now: Timestamp) -> Result<Vec<String>, kube::Error> {
    let leases: Api<Lenient<Lease>> = Api::all(client.clone());
    let listed = crate::cluster::list_each(
        &leases,
        &ListParams::default().fields(&format!("metadata.name={GO_OPERATOR_LEASE}")),
    )
    .await?;
    Ok(renewed_among(&listed.items, now))
}

/// Those of `leases` renewed at `now` (`NAMESPACE/NAME`).
pub fn renewed_among(leases: &[Lease], now: Timestamp) -> Vec<String> {
    leases
        .iter()
        .filter(|lease| matches!(holder_of(Some(lease), now), Holder::Renewing { .. }))
        .map(|lease| format!("{}/{}", lease.namespace().unwrap_or_default(), lease.name_any()))
        .collect()
}

/// Find the engine that leads what `scope` shows. When Leases cannot be listed cluster-wide,
/// read the well-known places instead: `fallback` (the Lease this process was told about) and
/// the install namespace's; if those cannot be read either, say so (never "nobody leads").
pub async fn find(client: &kube::Client, scope: &Scope, fallback: &[ObjectKey]) -> LeaderView {
    match engine_leases(client).await {
        Ok(leases) => leader_among(&leases, scope),
        Err(kube::Error::Api(status)) if status.code == 403 => {
            let mut seen = Vec::new();
            let mut refused = Vec::new();
            let mut places: Vec<ObjectKey> = fallback.to_vec();
            places.push(ObjectKey::new(INSTALL_NAMESPACE, DEFAULT_LEASE_NAME));
            let mut unique = BTreeMap::new();
            for place in places {
                unique.entry(place).or_insert(());
            }
            for ObjectKey { namespace, name } in unique.into_keys() {
                let api: Api<Lenient<Lease>> = Api::namespaced(client.clone(), &namespace);
                match api.get_opt(&name).await.map(|found| found.map(Lenient::into_result)) {
                    Ok(Some(Ok(lease))) => seen.push(EngineLease::from_lease(&lease, Timestamp::now())),
                    Ok(Some(Err(_)) | None) => {}
                    Err(_) => refused.push(format!("{namespace}/{name}")),
                }
            }
            let found = leader_among(&seen, scope);
            if found.is_led() || refused.is_empty() && !seen.is_empty() {
                return found;
            }
            LeaderView::CannotLook {
                reason: format!(
                    "you may not list leases.coordination.k8s.io in all namespaces ({}){}",
                    crate::cluster::status_message(&status),
                    if refused.is_empty() {
                        String::new()
                    } else {
                        format!(", nor read the lease {}", refused.join(", "))
                    }
                ),
            }
        }
        Err(error) => {
            LeaderView::CannotLook { reason: format!("cannot list Leases: {}", crate::cluster::describe_error(&error)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

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
            // Forged: a renewal from the future, a duration of decades.
            (Some(lease(Some("a"), Some(-30), 15, now)), Holder::Renewing { identity: "a".into(), renewed_ago: 0 }),
            (Some(lease(Some("a"), Some(-61), 15, now)), Holder::Expired { identity: "a".into(), renewed_ago: -61 }),
            (
                Some(lease(Some("a"), Some(61), i32::MAX, now)),
                Holder::Expired { identity: "a".into(), renewed_ago: 61 },
            ),
        ];
        for (lease, expected) in cases {
            assert_eq!(holder_of(lease.as_ref(), now), expected, "{lease:?}");
        }
    }

    fn engine(namespace: &str, scope: &str, holder: Option<(&str, i64)>, mark: Option<&str>) -> EngineLease {
        let now = Timestamp::now();
        let mut lease = lease(holder.map(|(who, _)| who), holder.map(|(_, ago)| ago), 15, now);
        let mut annotations = BTreeMap::from([(SCOPE_ANNOTATION.to_string(), scope.to_string())]);
        if let Some(mark) = mark {
            annotations.insert(LEADING_ANNOTATION.into(), mark.into());
        }
        lease.metadata = ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(DEFAULT_LEASE_NAME.into()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        };
        EngineLease::from_lease(&lease, now)
    }

    #[test]
    fn the_leader_is_found_wherever_its_lease_lives() {
        let all = Scope::All;
        let shop = Scope::Namespace("cap-shop".into());
        let hr = Scope::Namespace("cap-hr".into());
        let daemon = engine("capdeck-system", "*", Some(("daemon-1", 2)), Some("daemon-1"));
        let laptop_waiting = engine("default", "*", Some(("laptop", 1)), None);
        let expired = engine("capdeck-system", "*", Some(("daemon-0", 60)), Some("daemon-0"));
        let other_ns = engine("team-a", "cap-hr", Some(("team-a-engine", 1)), Some("team-a-engine"));
        let stale_mark = engine("capdeck-system", "*", Some(("daemon-2", 1)), Some("daemon-1"));
        let cases: Vec<(&str, Vec<EngineLease>, &Scope, &str)> = vec![
            (
                "the daemon in capdeck-system leads a laptop's default view",
                vec![daemon.clone()],
                &shop,
                "daemon-1 leads",
            ),
            (
                "a marked leader wins over one still checking",
                vec![laptop_waiting.clone(), daemon.clone()],
                &all,
                "daemon-1",
            ),
            (
                "an expired lease is nobody, and says whose",
                vec![expired],
                &all,
                "nobody leads: the lease capdeck-system",
            ),
            (
                "an engine of another namespace does not lead this one",
                vec![other_ns.clone()],
                &shop,
                "no capdeck engine",
            ),
            ("it does lead its own namespace", vec![other_ns], &hr, "team-a-engine leads"),
            ("a mark left by a former holder is not leading", vec![stale_mark], &all, "has not started leading"),
            ("no lease at all", vec![], &all, "no capdeck engine runs"),
        ];
        for (what, leases, scope, expected) in cases {
            let found = leader_among(&leases, scope).to_string();
            assert!(found.contains(expected), "{what}: {found}");
        }
    }

    #[test]
    fn scopes_overlap_when_they_share_a_namespace() {
        let all = EngineScope::All;
        let hr = EngineScope::Namespace("cap-hr".into());
        let shop = EngineScope::Namespace("cap-shop".into());
        assert!(all.overlaps(&hr) && hr.overlaps(&all) && all.overlaps(&all) && hr.overlaps(&hr));
        assert!(!hr.overlaps(&shop));
        assert_eq!(EngineScope::parse(None), EngineScope::All, "an unsaid scope is everything");
    }

    #[test]
    fn published_settings_read_back() {
        let settings = PublishedSettings {
            rollout_delay_seconds: 30,
            expected_rollout_seconds: 900,
            approval: "manual".into(),
            max_parallel_rollouts: 5,
            min_rollout_interval_seconds: 600,
            change_windows: None,
            on_deadline: None,
        };
        let json = serde_json::to_string(&settings).expect("json");
        assert_eq!(serde_json::from_str::<PublishedSettings>(&json).expect("back"), settings);
        assert_eq!(
            settings.summary(),
            "window 30s, expected rollout 15m, approval manual, 5 at once, min interval 10m"
        );
    }
}
