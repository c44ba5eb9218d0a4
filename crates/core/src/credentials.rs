//! Credential safety: for each binding Secret a CAPApplication consumes, when its credentials
//! rotate, when the old ones die, and whether capdeck's batch (window + approval + rollout) ends
//! before they do. Pure: the caller brings the objects and the clock; `capdeck credentials`, the
//! engine and the console ask the same question here. The formulas are in docs/CREDENTIALS.md.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::api::StoredSecret;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::api::go_duration::{humanize, parse_go_duration};
use crate::api::service_binding::{self, RESYNC_SECONDS, ServiceBinding};
use crate::api::{CAPApplication, DeploymentView, ObjectKey, RotationBatch};
use crate::plan::{CapIndex, ObjectLookup, PlanAction, Rotated, SecretLookup};
use crate::vcap::entry::{SecretLayout, layout};

mod certificates;
mod schedule;

pub use certificates::CertificateExpiry;
pub use schedule::{Judging, Schedule, namespace_windows};

mod waits;
use waits::{next_rotation_wait, scheduled_start, waited};

/// Who writes a binding Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Source {
    #[serde(rename = "sap-btp-service-operator")]
    SapBtp,
    #[serde(rename = "cf-service-operator")]
    CfServiceOperator,
    #[serde(rename = "unknown")]
    Unknown,
}

impl Source {
    /// Short, for tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::SapBtp => "sap-btp",
            Self::CfServiceOperator => "cf",
            Self::Unknown => "unknown",
        }
    }
}

/// How the Secret's data is laid out, i.e. whether a VCAP_SERVICES entry can be built from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `.metadata` describes the keys (sap-btp-service-operator's default).
    Metadata,
    /// One `credentials` key holding a JSON object.
    Credentials,
    /// Every key a credential (servicebinding.io); capdeck reads it, the Go CAP Operator does not.
    Flat,
    /// Nothing a VCAP entry can be built from (`secretRootKey`, templates, malformed data).
    Unreadable,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Metadata => "metadata",
            Self::Credentials => "credentials",
            Self::Flat => "flat",
            Self::Unreadable => "unreadable",
        }
    }
}

/// Ordered by how much it needs attention: several findings keep the worst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Ok,
    Unknown,
    AtRisk,
    Unsafe,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::AtRisk => "at-risk",
            Self::Unsafe => "unsafe",
            Self::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rotation {
    pub enabled: bool,
    /// Go durations as the webhook leaves them (defaults filled in).
    pub frequency: Option<String>,
    #[serde(rename = "rotatedBindingTTL")]
    pub rotated_binding_ttl: Option<String>,
    pub last_rotation: Option<Timestamp>,
    /// Due from this moment; the operator acts on its next event or resync, so by `next_due_latest`.
    pub next_due: Option<Timestamp>,
    pub next_due_latest: Option<Timestamp>,
    pub in_progress: bool,
}

impl Rotation {
    /// `every 72h, old kept 48h`, or `off`.
    pub fn policy_text(&self) -> String {
        match (self.enabled, &self.frequency, &self.rotated_binding_ttl) {
            (true, Some(frequency), Some(ttl)) => format!("every {frequency}, old kept {ttl}"),
            _ => "off".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OldCredential {
    pub binding: String,
    pub secret: String,
    /// The old binding's creationTimestamp + its TTL: the earliest the operator deletes it and
    /// the broker revokes the credentials (`None` when its TTL does not parse).
    pub revocable_at: Option<Timestamp>,
    /// Kept while the new binding is not Ready: revocation is on hold.
    pub pending_termination: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialReport {
    pub namespace: String,
    pub secret: String,
    pub applications: Vec<String>,
    pub source: Source,
    pub service_binding: Option<String>,
    pub format: Format,
    pub rotation: Option<Rotation>,
    pub old_credentials: Vec<OldCredential>,
    /// X.509 certificates in the Secret's values, by key: when they stop being valid.
    pub certificates: Vec<CertificateExpiry>,
    /// Earliest revocation − when the batch would be rolled out; `None` when either is unknown.
    pub margin_seconds: Option<i64>,
    pub verdict: Verdict,
    pub reasons: Vec<String>,
}

impl CredentialReport {
    /// The earliest moment old credentials of this Secret may be revoked.
    pub fn earliest_revocation(&self) -> Option<Timestamp> {
        earliest_revocation(&self.old_credentials)
    }
}

/// The whole answer: a report per consumed Secret, and how many bindings come due soon.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsOverview {
    pub credentials: Vec<CredentialReport>,
    /// Bindings whose next rotation is due within 24 h (many at once means many batches).
    pub due_within_24h: usize,
    /// Whether ServiceBindings could be read at all (`false`: the CRD is absent or unreadable).
    pub service_bindings_known: bool,
}

/// The times a batch takes, as the engine is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// ROLLOUT_DELAY: how long a batch collects rotations before it rolls.
    pub window: Duration,
    /// How long rolling the Deployments is expected to take.
    pub expected_rollout: Duration,
}

impl Timing {
    /// Without flags and without a leader's word: the engine's defaults (ROLLOUT_DELAY's 1h, as
    /// upstream; 15m to roll), which `engine::config` takes from here.
    pub const DEFAULT: Self =
        Self { window: Duration::from_secs(3600), expected_rollout: Duration::from_secs(15 * 60) };

    /// `window 30s, expected rollout 15m`.
    pub fn text(self) -> String {
        format!(
            "window {}, expected rollout {}",
            crate::api::go_duration::humanize(self.window),
            crate::api::go_duration::humanize(self.expected_rollout)
        )
    }
}

impl Default for Timing {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The objects the answer is made of.
pub struct Inputs<'a> {
    pub applications: &'a [Arc<CAPApplication>],
    pub secrets: &'a dyn ObjectLookup,
    /// `None`: the ServiceBinding CRD is absent (or may not be read).
    pub bindings: Option<&'a [ServiceBinding]>,
    pub batches: &'a [Arc<RotationBatch>],
    /// The versions and tenants, which say the Deployments that consume a Secret (read through
    /// `secrets` with the VCAP Secrets they reference). `None`: not read, so what the Pods run is
    /// not known and the batches alone are judged.
    pub index: Option<&'a CapIndex>,
    pub now: Timestamp,
    pub timing: Timing,
}

/// Whole seconds, saturating (durations from flags and Go syntax, never near the limit).
pub fn seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

fn plus(time: Timestamp, seconds: i64) -> Option<Timestamp> {
    Timestamp::from_second(time.as_second().checked_add(seconds)?).ok()
}

fn go_seconds(text: &str) -> Option<i64> {
    parse_go_duration(text).ok().map(seconds)
}

/// Every binding Secret the applications reference, with the facts and the verdict, as if no
/// change window or freeze kept a batch from rolling ([`overview_scheduled`] counts them).
pub fn overview(inputs: &Inputs<'_>) -> CredentialsOverview {
    overview_scheduled(inputs, &Schedule::NONE)
}

/// [`overview`], with the wait for the next change window and the end of any freeze counted in
/// each margin (docs/CREDENTIALS.md).
pub fn overview_scheduled(inputs: &Inputs<'_>, schedule: &Schedule<'_>) -> CredentialsOverview {
    let mut credentials = Vec::new();
    each_report(inputs, schedule, |report| credentials.push(report));
    let horizon = plus(inputs.now, 24 * 3600);
    let due_within_24h = inputs
        .bindings
        .unwrap_or_default()
        .iter()
        .filter(|binding| !binding.is_stale())
        .filter_map(|binding| rotation(binding).next_due)
        .filter(|due| horizon.is_some_and(|horizon| *due <= horizon))
        .count();
    CredentialsOverview { credentials, due_within_24h, service_bindings_known: inputs.bindings.is_some() }
}

/// Each consumed Secret's report, one at a time and in the overview's order: for a caller that
/// keeps a few numbers of each (the engine's metrics), not thousands of reports at once.
pub fn each_report(inputs: &Inputs<'_>, schedule: &Schedule<'_>, mut each: impl FnMut(CredentialReport)) {
    let mut consumers: BTreeMap<ObjectKey, Vec<String>> = BTreeMap::new();
    for app in inputs.applications {
        let namespace = app.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let name = app.metadata.name.clone().unwrap_or_default();
        for service in &app.spec.btp.services {
            let apps = consumers.entry(ObjectKey::new(namespace.clone(), service.secret.clone())).or_default();
            if !apps.contains(&name) {
                apps.push(name.clone());
            }
        }
    }
    for (secret, applications) in consumers {
        each(report(inputs, schedule, &secret.namespace, &secret.name, applications));
    }
}

fn rotation(binding: &ServiceBinding) -> Rotation {
    let Some(policy) = &binding.spec.credentials_rotation_policy else {
        return Rotation {
            enabled: false,
            frequency: None,
            rotated_binding_ttl: None,
            last_rotation: None,
            next_due: None,
            next_due_latest: None,
            in_progress: binding.rotating().is_some(),
        };
    };
    let last = binding
        .status
        .as_ref()
        .and_then(|status| status.last_credentials_rotation_time.as_ref())
        .or(binding.metadata.creation_timestamp.as_ref())
        .map(|time| time.0);
    let next_due = policy.enabled.then_some(()).and(last).zip(go_seconds(policy.frequency()));
    let next_due = next_due.and_then(|(last, frequency)| plus(last, frequency));
    Rotation {
        enabled: policy.enabled,
        frequency: Some(policy.frequency().to_string()),
        rotated_binding_ttl: Some(policy.ttl().to_string()),
        last_rotation: last,
        next_due,
        next_due_latest: next_due.and_then(|due| plus(due, RESYNC_SECONDS)),
        in_progress: binding.rotating().is_some(),
    }
}

fn source_of(secret: Option<&StoredSecret>, binding: Option<&ServiceBinding>) -> Source {
    let owned_by = |group: &str| {
        secret.is_some_and(|secret| {
            secret
                .owner_api_versions()
                .any(|version| version.strip_prefix(group).is_some_and(|rest| rest.starts_with('/')))
        })
    };
    let labelled = |prefix: &str| secret.is_some_and(|secret| secret.labels().any(|(key, _)| key.starts_with(prefix)));
    if binding.is_some() || owned_by(service_binding::GROUP) || labelled("services.cloud.sap.com/") {
        Source::SapBtp
    } else if owned_by(service_binding::CF_GROUP) || labelled("service-operator.cf.cs.sap.com/") {
        Source::CfServiceOperator
    } else {
        Source::Unknown
    }
}

fn format_of(secret: &StoredSecret, binding: Option<&ServiceBinding>, reasons: &mut Vec<String>) -> Format {
    let data = secret.data();
    let spec = binding.map(|binding| &binding.spec);
    let layout = layout(&data);
    if layout == SecretLayout::Metadata {
        // The planner's own reading: a `.metadata` that does not parse, or properties it cannot
        // move, give no VCAP_SERVICES entry at all.
        let service = crate::api::ServiceInfo {
            name: secret.name().into(),
            secret: secret.name().into(),
            class: String::new(),
            subscription_dependency: None,
        };
        if let Err(error) = crate::vcap::entry::build_entry(&service, &data) {
            reasons.push(format!("{error}: no VCAP_SERVICES entry can be built from it"));
            return Format::Unreadable;
        }
        return Format::Metadata;
    }
    if spec.and_then(|spec| spec.secret_root_key.as_deref()).is_some() {
        reasons.push(
            "the binding sets secretRootKey: one key of stringified values, no .metadata — no VCAP_SERVICES entry can \
             be built from it (remove secretRootKey)"
                .into(),
        );
        return Format::Unreadable;
    }
    match layout {
        SecretLayout::Credentials
            if crate::vcap::gojson::decode(&data["credentials"])
                .is_ok_and(|v| matches!(v, crate::vcap::gojson::GoValue::Object(_))) =>
        {
            Format::Credentials
        }
        SecretLayout::Credentials => {
            reasons.push("its credentials key is not a JSON object: no VCAP_SERVICES entry can be built".into());
            Format::Unreadable
        }
        _ if data.is_empty() => {
            reasons.push("the Secret has no data".into());
            Format::Unreadable
        }
        _ => {
            let template = spec.and_then(|spec| spec.secret_template.as_deref()).is_some();
            reasons.push(if template {
                "a secretTemplate without .metadata or credentials: capdeck reads the keys as flat credentials, the Go \
                 CAP Operator cannot"
                    .into()
            } else {
                "flat keys without .metadata: capdeck reads them, the Go CAP Operator cannot".into()
            });
            Format::Flat
        }
    }
}

/// The open batch (if any) rolling `secret` out for one of its applications.
fn open_batch<'a>(inputs: &'a Inputs<'_>, namespace: &str, secret: &str) -> Option<&'a RotationBatch> {
    inputs
        .batches
        .iter()
        .filter(|batch| batch.metadata.namespace.as_deref() == Some(namespace) && !batch.is_terminal())
        .filter(|batch| batch.spec.secrets.iter().any(|rotated| rotated.name == secret))
        .map(AsRef::as_ref)
        .min_by_key(|batch| batch.spec.window_end.0)
}

/// When `binding` last rotated, whatever fields it has: `status.lastCredentialsRotationTime`,
/// else the newest of its old copies (sap-btp-service-operator makes one at each rotation), else
/// its `creationTimestamp` (docs/CREDENTIALS.md).
fn latest_rotation(bindings: &[ServiceBinding], binding: &ServiceBinding) -> Timestamp {
    let recorded = binding.status.as_ref().and_then(|status| status.last_credentials_rotation_time.as_ref());
    let newest_copy = bindings
        .iter()
        .filter(|old| old.namespace() == binding.namespace() && old.rotation_of() == Some(binding.name()))
        .filter_map(|old| old.metadata.creation_timestamp.as_ref())
        .max_by_key(|time| time.0);
    let created = binding.metadata.creation_timestamp.as_ref();
    [recorded, newest_copy, created].into_iter().flatten().map(|time| time.0).max().unwrap_or(Timestamp::UNIX_EPOCH)
}

/// When a finished batch rolled `secret` out after `since`, the pods hold the new credentials.
fn rolled_out_since(inputs: &Inputs<'_>, namespace: &str, secret: &str, since: Timestamp) -> bool {
    inputs.batches.iter().any(|batch| {
        batch.metadata.namespace.as_deref() == Some(namespace)
            && batch.phase() == crate::api::BatchPhase::Succeeded
            && batch.spec.secrets.iter().any(|rotated| rotated.name == secret && rotated.rotated_at.0 >= since)
    })
}

/// How many Deployments consume Secret `namespace/secret` (those of `applications`' versions in
/// use) when every one of them has rolled out a VCAP Secret that holds the Secret's current
/// credentials (the planner's `Unchanged`, and the rollout complete). `None` when that is not
/// so or not known: one to restart or still rolling, one capdeck may not write (what it runs is
/// not compared), a broken Secret or version, none at all, or the versions not read.
fn consumers_running_current(
    inputs: &Inputs<'_>,
    namespace: &str,
    secret: &str,
    applications: &[String],
) -> Option<usize> {
    let index = inputs.index?;
    let rotated = Rotated::Secrets(std::iter::once(secret.to_string()).collect());
    let mut current = 0;
    for name in applications {
        let app = inputs.applications.iter().find(|app| {
            app.metadata.namespace.as_deref().unwrap_or("default") == namespace
                && app.metadata.name.as_deref() == Some(name)
        })?;
        let plan = crate::plan::plan_application(app, &rotated, index, inputs.secrets);
        if !plan.problems.is_empty() {
            return None;
        }
        for deployment in &plan.deployments {
            match deployment.action {
                PlanAction::Missing => {}
                PlanAction::Restart | PlanAction::NotOwned => return None,
                PlanAction::Unchanged => {
                    let view = inputs.secrets.deployment(namespace, &deployment.deployment)?;
                    if crate::api::rollout_progress::rollout_progress(&view).progress
                        != crate::api::rollout_progress::Progress::Complete
                    {
                        return None;
                    }
                    let vcap = deployment.current_secret.as_deref()?;
                    if !written_once(inputs.secrets, namespace, vcap)
                        || !takes_vcap_from(inputs.secrets, namespace, &view, vcap)
                    {
                        return None;
                    }
                    current += 1;
                }
            }
        }
    }
    (current > 0).then_some(current)
}

/// Whether VCAP Secret `namespace/name` holds what it held when it was created: no manager
/// wrote it since (`metadata.managedFields`, which the API server keeps). Pods read `envFrom` when
/// they start, so a VCAP Secret edited in place (`kubectl edit`) is not what they run. Without
/// managedFields (files, or stripped by whoever may write the Secret) it is taken as written once.
fn written_once(lookup: &dyn ObjectLookup, namespace: &str, name: &str) -> bool {
    let SecretLookup::Found(secret) = lookup.secret(namespace, name) else { return false };
    let Some(created) = secret.created() else { return true };
    secret.last_written().is_none_or(|written| written.as_second() <= created.as_second() + 1)
}

/// Whether every container of `deployment` takes `VCAP_SERVICES` from Secret `vcap` and nothing
/// else: no `env` entry of that name, no prefix on it, and no later `envFrom` source that could
/// hold the key (a later source wins): a Secret read here without it passes, anything else
/// (a ConfigMap, a Secret that cannot be read) does not.
fn takes_vcap_from(lookup: &dyn ObjectLookup, namespace: &str, deployment: &DeploymentView, vcap: &str) -> bool {
    const KEY: &str = crate::api::VCAP_SERVICES_KEY;
    let Some(pod) = deployment.spec.as_ref().and_then(|spec| spec.template.spec.as_ref()) else { return false };
    pod.containers.iter().chain(pod.init_containers.iter().flatten()).all(|container| {
        let sources = container.env_from.as_deref().unwrap_or_default();
        let Some(at) = sources.iter().position(|source| source.secret_ref.as_ref().is_some_and(|r| r.name == vcap))
        else {
            return false;
        };
        let later_lacks_key = sources[at + 1..].iter().all(|source| {
            let prefix = source.prefix.as_deref().unwrap_or_default();
            match (&source.secret_ref, &source.config_map_ref) {
                (Some(secret), None) => matches!(lookup.secret(namespace, &secret.name), SecretLookup::Found(found)
                    if !found.entries().any(|(key, _)| format!("{prefix}{key}") == KEY)),
                _ => false,
            }
        });
        sources[at].prefix.as_deref().unwrap_or_default().is_empty()
            && later_lacks_key
            && !container.env.iter().flatten().any(|var| var.name == KEY)
    })
}

fn report(
    inputs: &Inputs<'_>,
    schedule: &Schedule<'_>,
    namespace: &str,
    secret_name: &str,
    applications: Vec<String>,
) -> CredentialReport {
    let mut reasons = Vec::new();
    let lookup = inputs.secrets.secret(namespace, secret_name);
    let secret = match &lookup {
        SecretLookup::Found(secret) => Some(secret.as_ref()),
        SecretLookup::Missing => {
            reasons.push(format!("Secret {namespace}/{secret_name} does not exist (or capdeck may not read it)"));
            None
        }
        SecretLookup::Malformed(why) => {
            // Malformed data, or (live) a Secret that could not be read.
            reasons.push(format!("Secret {namespace}/{secret_name} cannot be used: {why}"));
            None
        }
    };
    let bindings = inputs.bindings.unwrap_or_default();
    let binding = bindings.iter().find(|binding| {
        binding.namespace() == namespace && binding.secret_name() == secret_name && !binding.is_stale()
    });
    let source = source_of(secret, binding);
    let format = match secret {
        Some(secret) => format_of(secret, binding, &mut reasons),
        None => Format::Unreadable,
    };
    if secret.is_some_and(|s| s.label(service_binding::LABEL_STALE).is_some()) {
        reasons.push(
            "this Secret is labelled stale: it holds old credentials, revoked when its binding is deleted; point the \
             application at the current binding's Secret"
                .into(),
        );
    }
    let rotation = binding.map(rotation);
    let old_credentials = binding.map(|binding| old_credentials(bindings, binding)).unwrap_or_default();
    let certificates = secret.map(|secret| certificates::expiries(&secret.data())).unwrap_or_default();
    let mut report = CredentialReport {
        namespace: namespace.to_string(),
        secret: secret_name.to_string(),
        applications,
        source,
        service_binding: binding.map(|binding| binding.name().to_string()),
        format,
        rotation,
        old_credentials,
        certificates,
        margin_seconds: None,
        verdict: Verdict::Unknown,
        reasons,
    };
    judge(inputs, schedule, binding, &mut report);
    judge_certificates(inputs.now, &mut report);
    report
}

/// The old copies of `binding` (labelled `rotationOf`) that still exist.
fn old_credentials(bindings: &[ServiceBinding], binding: &ServiceBinding) -> Vec<OldCredential> {
    bindings
        .iter()
        .filter(|old| old.namespace() == binding.namespace() && old.rotation_of() == Some(binding.name()))
        .filter(|old| !old.being_deleted())
        .map(|old| OldCredential {
            binding: old.name().to_string(),
            secret: old.secret_name().to_string(),
            revocable_at: old.metadata.creation_timestamp.as_ref().and_then(|created| {
                let ttl = old
                    .spec
                    .credentials_rotation_policy
                    .as_ref()
                    .map_or(service_binding::DEFAULT_ROTATED_BINDING_TTL, service_binding::RotationPolicy::ttl);
                plus(created.0, go_seconds(ttl)?)
            }),
            pending_termination: old.pending_termination(),
        })
        .collect()
}

/// The earliest moment old credentials of Secret `namespace/secret` may be revoked (what
/// `capdeck batches` and the approve dialog show); `None` when none are known.
pub fn revocation_deadline(bindings: &[ServiceBinding], namespace: &str, secret: &str) -> Option<Timestamp> {
    let binding = bindings
        .iter()
        .find(|binding| binding.namespace() == namespace && binding.secret_name() == secret && !binding.is_stale())?;
    earliest_revocation(&old_credentials(bindings, binding))
}

/// A batch's deadline: the earliest revocation of the old credentials of the Secrets it rolls out
/// (the engine's margin, `capdeck batches`, the console's batch detail and approve dialog).
pub fn batch_revocation(bindings: &[ServiceBinding], batch: &RotationBatch) -> Option<Timestamp> {
    let namespace = batch.metadata.namespace.as_deref().unwrap_or("default");
    batch.spec.secrets.iter().filter_map(|secret| revocation_deadline(bindings, namespace, &secret.name)).min()
}

/// The earliest `revocableAt` of old credentials whose revocation is not on hold.
fn earliest_revocation(old_credentials: &[OldCredential]) -> Option<Timestamp> {
    old_credentials.iter().filter(|old| !old.pending_termination).filter_map(|old| old.revocable_at).min()
}

/// The margin and the verdict (the rules are listed in docs/CREDENTIALS.md).
fn judge(
    inputs: &Inputs<'_>,
    schedule: &Schedule<'_>,
    binding: Option<&ServiceBinding>,
    report: &mut CredentialReport,
) {
    let about_the_secret = report.reasons.len();
    judge_rotation(inputs, schedule, binding, report);
    // A Secret that cannot be read or used decides the verdict (unsafe) whatever its rotation
    // says: why it cannot is said last, where `doctor`, `fleet` and the notifications read the
    // reason that decided the verdict.
    if report.format == Format::Unreadable {
        report.reasons.rotate_left(about_the_secret);
    }
}

fn judge_rotation(
    inputs: &Inputs<'_>,
    schedule: &Schedule<'_>,
    binding: Option<&ServiceBinding>,
    report: &mut CredentialReport,
) {
    let timing = inputs.timing;
    let mut verdict = source_verdict(report, timing);
    let worst = |candidate: Verdict, verdict: &mut Verdict| *verdict = (*verdict).max(candidate);
    let Some(binding) = binding else {
        if report.source != Source::CfServiceOperator {
            report.reasons.push(if inputs.bindings.is_none() {
                "no ServiceBinding information (the services.cloud.sap.com CRD is not installed or not readable)".into()
            } else {
                "no ServiceBinding writes this Secret: when its old credentials die is unknown".into()
            });
            worst(Verdict::Unknown, &mut verdict);
        }
        report.verdict = verdict;
        return;
    };
    let policy = binding.spec.credentials_rotation_policy.as_ref().filter(|policy| policy.enabled);
    if let Some(reason) = binding.rotating() {
        report.reasons.push(format!("a rotation is in progress ({reason})"));
    }
    let on_hold = report.old_credentials.iter().filter(|old| old.pending_termination).count();
    if on_hold > 0 {
        report
            .reasons
            .push(format!("{on_hold} old binding(s) kept while the new binding is not Ready (revocation on hold)"));
    }
    let open = open_batch(inputs, &report.namespace, &report.secret);
    // What the change windows and freezes add: said last (the fleet shows a report's last reason).
    let mut scheduled: Option<(String, Verdict)> = None;
    let margin = match report.earliest_revocation() {
        Some(revocation) => match under_way(inputs, schedule, binding, policy, open, revocation, report) {
            UnderWay::Done(next) => {
                if let Some((reason, candidate)) = next {
                    report.reasons.push(reason);
                    worst(candidate, &mut verdict);
                }
                report.verdict = verdict;
                report.margin_seconds = None;
                return;
            }
            UnderWay::Waits { margin, said } => {
                scheduled = said;
                margin
            }
        },
        None if on_hold == 0 && policy.is_some() => {
            let (margin, said) = policy.map_or((None, None), |policy| next_rotation(inputs, schedule, policy, report));
            scheduled = said;
            margin
        }
        None if on_hold > 0 => None,
        None => {
            report.reasons.push(
                "automatic rotation is off: the operator never revokes these credentials by itself (the service may \
                 still expire them)"
                    .into(),
            );
            None
        }
    };
    report.margin_seconds = margin;
    worst(margin_verdict(margin, timing, report), &mut verdict);
    if let Some((reason, candidate)) = scheduled {
        report.reasons.push(reason);
        worst(candidate, &mut verdict);
    }
    report.verdict = verdict;
}

/// What the Secret's writer and format say whatever the rotation: cf-service-operator leaves no
/// overlap, and a Secret that cannot be read is unsafe.
fn source_verdict(report: &mut CredentialReport, timing: Timing) -> Verdict {
    let mut verdict = Verdict::Ok;
    if report.source == Source::CfServiceOperator {
        report.reasons.push(format!(
            "cf-service-operator deletes the old binding before the new one exists: no overlap — restart at once \
             (a {} batching window is an outage)",
            humanize(timing.window)
        ));
        verdict = if seconds(timing.window) > 0 { Verdict::Unsafe } else { Verdict::AtRisk };
    }
    if report.format == Format::Unreadable {
        verdict = Verdict::Unsafe;
    }
    verdict
}

/// No rotation under way: the next one leaves its TTL of overlap for the window and the rollout
/// (the margin), and the change windows and freezes may add a wait (said last).
fn next_rotation(
    inputs: &Inputs<'_>,
    schedule: &Schedule<'_>,
    policy: &service_binding::RotationPolicy,
    report: &mut CredentialReport,
) -> (Option<i64>, Option<(String, Verdict)>) {
    let (window, rollout) = (seconds(inputs.timing.window), seconds(inputs.timing.expected_rollout));
    let ttl = go_seconds(policy.ttl());
    match ttl {
        Some(ttl) => report.reasons.push(format!(
            "no rotation under way: the next keeps old credentials {} — {} beyond the window and the rollout",
            policy.ttl(),
            human_signed(ttl - window - rollout)
        )),
        None => report.reasons.push("rotatedBindingTTL is not a Go duration".into()),
    }
    let margin = ttl.map(|ttl| ttl - window - rollout);
    let said = margin.and_then(|margin| next_rotation_wait(inputs, schedule, report, margin));
    (margin, said)
}

/// What the margin alone says: unsafe below zero, at risk below the expected rollout.
fn margin_verdict(margin: Option<i64>, timing: Timing, report: &mut CredentialReport) -> Verdict {
    match margin {
        Some(margin) if margin < 0 => {
            report.reasons.push(format!(
                "the batch would finish {} after the old credentials may be revoked",
                human_signed(-margin)
            ));
            Verdict::Unsafe
        }
        Some(margin) if margin < seconds(timing.expected_rollout) => {
            report.reasons.push(format!(
                "only {} to spare, less than the expected rollout time ({})",
                human_signed(margin),
                humanize(timing.expected_rollout)
            ));
            Verdict::AtRisk
        }
        _ => Verdict::Ok,
    }
}

/// A rotation under way: done when the consumers already run the current credentials, else the
/// margin its batch leaves before the old credentials may be revoked.
enum UnderWay {
    /// Nothing to lose now; what the next rotation's wait says, if anything.
    Done(Option<(String, Verdict)>),
    /// The margin, and what the change windows and freezes add (said last).
    Waits { margin: Option<i64>, said: Option<(String, Verdict)> },
}

fn under_way(
    inputs: &Inputs<'_>,
    schedule: &Schedule<'_>,
    binding: &ServiceBinding,
    policy: Option<&service_binding::RotationPolicy>,
    open: Option<&RotationBatch>,
    revocation: Timestamp,
    report: &mut CredentialReport,
) -> UnderWay {
    let (window, rollout) = (seconds(inputs.timing.window), seconds(inputs.timing.expected_rollout));
    // Pods that already run the current credentials lose nothing when the old ones die,
    // whoever rolled them (a batch, the Go operator, a new version, a person).
    let rolled = || {
        open.is_none()
            && rolled_out_since(
                inputs,
                &report.namespace,
                &report.secret,
                latest_rotation(inputs.bindings.unwrap_or_default(), binding),
            )
    };
    let done = match consumers_running_current(inputs, &report.namespace, &report.secret, &report.applications) {
        Some(count) => Some(format!(
            "{} already run{} its current credentials: the old ones dying harms nothing",
            crate::output::count(count, "consuming Deployment"),
            if count == 1 { "s" } else { "" }
        )),
        None if rolled() => Some("rolled out since the rotation: pods hold the new credentials".into()),
        None => None,
    };
    if let Some(done) = done {
        report.reasons.push(done);
        // Done with this rotation; the next one may still wait too long.
        let ttl = policy.and_then(|policy| go_seconds(policy.ttl()));
        return UnderWay::Done(
            ttl.and_then(|ttl| next_rotation_wait(inputs, schedule, report, ttl - window - rollout)),
        );
    }
    // The batch ends its window, waits for its approval (so far: until now), for a change
    // window and the end of any freeze, and rolls.
    let earliest = match open {
        Some(batch) => batch.spec.window_end.0.max(inputs.now),
        None => {
            let observed = binding
                .status
                .as_ref()
                .and_then(|status| status.last_credentials_rotation_time.as_ref())
                .map(|time| time.0);
            let observed = observed.unwrap_or(inputs.now).max(inputs.now);
            plus(observed, window).unwrap_or(Timestamp::MAX)
        }
    };
    report.reasons.push(format!(
        "old credentials revocable in {} ({})",
        human_signed(revocation.as_second() - inputs.now.as_second()),
        revocation
    ));
    let start = scheduled_start(inputs, schedule, report, open, earliest);
    let (margin, said) = waited(schedule.deadline_rolls, &start, earliest, revocation, rollout);
    UnderWay::Waits { margin, said }
}

/// The margin of a batch (open or about to open) against its old credentials' revocation, in
/// seconds: the revocation minus when the batch would have rolled — its window end, or now when
/// the window has passed (an approval wait so far), plus the expected rollout.
pub fn batch_margin_seconds(revocation: Timestamp, window_end: Timestamp, now: Timestamp, rollout: Duration) -> i64 {
    let finish = window_end.max(now).as_second().saturating_add(seconds(rollout));
    revocation.as_second().saturating_sub(finish)
}

/// A certificate that has expired makes the Secret unsafe (the service refuses it, whatever the
/// rotation); one expiring within `CERTIFICATE_WARNING` makes it at-risk.
fn judge_certificates(now: Timestamp, report: &mut CredentialReport) {
    for certificate in &report.certificates {
        let left = certificate.not_after.as_second() - now.as_second();
        let (verdict, text) = if left <= 0 {
            (Verdict::Unsafe, format!("expired {} ago", human_signed(-left)))
        } else if left < seconds(CERTIFICATE_WARNING) {
            (Verdict::AtRisk, format!("expires in {}", human_signed(left)))
        } else {
            (Verdict::Ok, format!("valid for {}", human_signed(left)))
        };
        report
            .reasons
            .push(format!("X.509 certificate in key {}: {text} (notAfter {})", certificate.key, certificate.not_after));
        report.verdict = report.verdict.max(verdict);
    }
}

/// How early an expiring certificate is called at-risk.
const CERTIFICATE_WARNING: Duration = Duration::from_secs(7 * 24 * 3600);

/// `3h12m`, `-5m` for a number of seconds.
pub fn human_signed(seconds: i64) -> String {
    let text = humanize(Duration::from_secs(seconds.unsigned_abs()));
    if seconds < 0 { format!("-{text}") } else { text }
}

/// A Deployment's default progress deadline (`spec.progressDeadlineSeconds`), for the static check.
const DEFAULT_PROGRESS_DEADLINE: Duration = Duration::from_secs(600);

/// Every current (not stale) binding whose TTL is too short for `window` + a Deployment's default
/// progress deadline, with why: `plan` and `doctor` report these.
pub fn short_ttls(bindings: &[ServiceBinding], window: Duration) -> impl Iterator<Item = (&ServiceBinding, String)> {
    bindings.iter().filter(|binding| !binding.is_stale()).filter_map(move |binding| {
        ttl_too_short(binding, window, DEFAULT_PROGRESS_DEADLINE).map(|problem| (binding, problem))
    })
}

/// The static check for `plan`/`doctor`: a TTL shorter than the batch window plus the rollout's
/// progress deadline lets old credentials die before a batch can finish.
pub fn ttl_too_short(binding: &ServiceBinding, window: Duration, progress_deadline: Duration) -> Option<String> {
    let policy = binding.spec.credentials_rotation_policy.as_ref().filter(|policy| policy.enabled)?;
    let ttl = parse_go_duration(policy.ttl()).ok()?;
    (ttl < window + progress_deadline).then(|| {
        format!(
            "ServiceBinding {}/{}: rotatedBindingTTL {} is shorter than ROLLOUT_DELAY {} + progress deadline {}: the old \
             credentials can be revoked before a batch has rolled (raise rotatedBindingTTL to at least {})",
            binding.namespace(),
            binding.name(),
            policy.ttl(),
            humanize(window),
            humanize(progress_deadline),
            humanize(window + progress_deadline)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Manifests;
    use base64::Engine as _;
    use serde_json::{Value, json};

    const NOW: i64 = 1_800_000_000;
    const HOUR: i64 = 3600;

    fn at(offset: i64) -> String {
        Timestamp::from_second(NOW + offset).expect("time").to_string()
    }

    fn b64(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    fn app() -> Value {
        json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
               "metadata": {"name": "bookshop", "namespace": "shop"},
               "spec": {"btpAppName": "bookshop", "providerSubaccountId": "x",
                        "btp": {"services": [{"name": "xsuaa", "class": "xsuaa", "secret": "xsuaa-bind"}]}}})
    }

    /// The binding Secret in sap-btp's default layout (or `data` as given).
    fn secret(data: Value, owner: Option<&str>) -> Value {
        let mut secret = json!({"apiVersion": "v1", "kind": "Secret",
                                "metadata": {"name": "xsuaa-bind", "namespace": "shop"}, "data": data});
        if let Some(api_version) = owner {
            secret["metadata"]["ownerReferences"] =
                json!([{"apiVersion": api_version, "kind": "ServiceBinding", "name": "xsuaa-bind", "uid": "u"}]);
        }
        secret
    }

    fn metadata_secret() -> Value {
        secret(
            json!({".metadata": b64(r#"{"credentialProperties":[{"name":"clientid","format":"text"}]}"#),
                   "clientid": b64("sb-1")}),
            Some("services.cloud.sap.com/v1"),
        )
    }

    fn binding(policy: Value, last_rotation: Option<i64>) -> Value {
        let mut binding = json!({"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
                   "metadata": {"name": "xsuaa-bind", "namespace": "shop", "creationTimestamp": at(-100 * HOUR)},
                   "spec": {"secretName": "xsuaa-bind", "credentialsRotationPolicy": policy},
                   "status": {"ready": "True", "conditions": []}});
        if let Some(offset) = last_rotation {
            binding["status"]["lastCredentialsRotationTime"] = json!(at(offset));
        }
        binding
    }

    fn old_binding(created: i64, ttl: &str, pending: bool) -> Value {
        json!({"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
               "metadata": {"name": "xsuaa-bind-ab12c", "namespace": "shop", "creationTimestamp": at(created),
                            "labels": {"services.cloud.sap.com/rotationOf": "xsuaa-bind",
                                       "services.cloud.sap.com/stale": "old-id"}},
               "spec": {"secretName": "xsuaa-bind-ab12c",
                        "credentialsRotationPolicy": {"enabled": false, "rotatedBindingTTL": ttl}},
               "status": {"conditions": if pending {
                   json!([{"type": "PendingTermination", "status": "True", "reason": "PendingTermination"}])
               } else { json!([]) }}})
    }

    fn batch(phase: &str, rotated: i64, window_end: i64) -> Value {
        json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
               "metadata": {"name": "bookshop-x7k2p", "namespace": "shop"},
               "spec": {"application": "bookshop", "windowEnd": at(window_end),
                        "secrets": [{"name": "xsuaa-bind", "service": "xsuaa", "rotatedAt": at(rotated), "dataHash": "h"}]},
               "status": {"phase": phase}})
    }

    /// The report for the one Secret, with ServiceBindings known unless `crd` is false.
    fn judge_world(objects: Vec<Value>, crd: bool) -> CredentialsOverview {
        judge_scheduled(objects, crd, &Schedule::NONE)
    }

    fn judge_scheduled(objects: Vec<Value>, crd: bool, schedule: &Schedule<'_>) -> CredentialsOverview {
        let manifests = Manifests::from_objects("test", objects);
        assert!(manifests.problems.is_empty(), "{:?}", manifests.problems);
        let timing = Timing { window: Duration::from_secs(3600), expected_rollout: Duration::from_secs(900) };
        let index = CapIndex::new(
            manifests.applications.clone(),
            manifests.versions.iter().cloned(),
            manifests.tenants.iter().cloned(),
        );
        overview_scheduled(
            &Inputs {
                applications: &manifests.applications,
                secrets: &manifests,
                bindings: crd.then_some(manifests.service_bindings.as_slice()),
                batches: &manifests.batches,
                index: Some(&index),
                now: Timestamp::from_second(NOW).expect("now"),
                timing,
            },
            schedule,
        )
    }

    fn single(objects: Vec<Value>, crd: bool) -> CredentialReport {
        let mut overview = judge_world(objects, crd);
        assert_eq!(overview.credentials.len(), 1);
        overview.credentials.remove(0)
    }

    /// A self-signed certificate valid from `from` to `until` (seconds from NOW).
    fn certificate(from: i64, until: i64) -> String {
        let day = |offset: i64| {
            let date =
                Timestamp::from_second(NOW + offset).expect("time").to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
            rcgen::date_time_ymd(i32::from(date.year()), date.month().unsigned_abs(), date.day().unsigned_abs())
        };
        let mut params = rcgen::CertificateParams::new(vec!["uaa.example.com".into()]).expect("params");
        params.not_before = day(from);
        params.not_after = day(until);
        params.self_signed(&rcgen::KeyPair::generate().expect("key")).expect("certificate").pem()
    }

    /// Certificates in a credential value: expired is unsafe whatever the rotation says, close
    /// to expiry at-risk; the key and the date are named, never the certificate.
    #[test]
    fn certificates_in_credentials_are_judged_by_their_not_after() {
        let with_certificate = |until: i64| {
            let credentials = json!({"clientid": "sb-1", "certificate": certificate(-30 * 24 * HOUR, until)});
            secret(json!({"credentials": b64(&credentials.to_string())}), Some("services.cloud.sap.com/v1"))
        };
        let steady = || binding(json!({"enabled": true}), Some(-10 * HOUR));
        let expired = single(vec![app(), with_certificate(-2 * 24 * HOUR), steady()], true);
        assert_eq!(expired.verdict, Verdict::Unsafe, "{:?}", expired.reasons);
        assert_eq!(expired.certificates.len(), 1);
        assert_eq!(expired.certificates[0].key, "credentials");
        let reason = expired.reasons.iter().find(|r| r.contains("X.509")).expect("a certificate reason");
        assert!(
            reason.starts_with("X.509 certificate in key credentials: expired ")
                && reason.contains(" ago (notAfter 20"),
            "{reason}"
        );
        assert!(!reason.contains("BEGIN"), "never the certificate itself: {reason}");
        let soon = single(vec![app(), with_certificate(3 * 24 * HOUR), steady()], true);
        assert_eq!(soon.verdict, Verdict::AtRisk, "{:?}", soon.reasons);
        let later = single(vec![app(), with_certificate(300 * 24 * HOUR), steady()], true);
        assert_eq!(later.verdict, Verdict::Ok, "{:?}", later.reasons);
        let json = serde_json::to_value(&expired).expect("json");
        assert!(json["certificates"][0]["notAfter"].as_str().is_some_and(|t| t.ends_with('Z')), "{json}");
    }

    /// (name, objects, CRD installed, verdict, margin, a reason containing).
    type Case = (&'static str, Vec<Value>, bool, Verdict, Option<i64>, &'static str);

    /// Every verdict, with the facts that lead to it. A row changed on purpose fails by name.
    #[test]
    fn every_verdict() {
        let enabled = json!({"enabled": true});
        let cases: Vec<Case> = vec![
            (
                "steady state: 48h TTL leaves 46h45m beyond window + rollout",
                vec![app(), metadata_secret(), binding(enabled.clone(), Some(-10 * HOUR))],
                true,
                Verdict::Ok,
                Some(48 * HOUR - HOUR - 900),
                "the next keeps old credentials 48h — 46h45m beyond",
            ),
            (
                "a TTL shorter than window + rollout",
                vec![app(), metadata_secret(), binding(json!({"enabled": true, "rotatedBindingTTL": "1h"}), None)],
                true,
                Verdict::Unsafe,
                Some(-900),
                "after the old credentials may be revoked",
            ),
            (
                "a TTL that leaves less than a rollout to spare",
                vec![app(), metadata_secret(), binding(json!({"enabled": true, "rotatedBindingTTL": "1h20m"}), None)],
                true,
                Verdict::AtRisk,
                Some(300),
                "less than the expected rollout time",
            ),
            (
                "a batch awaiting approval past the old credentials' death",
                vec![
                    app(),
                    metadata_secret(),
                    binding(enabled.clone(), Some(-3 * HOUR)),
                    old_binding(-3 * HOUR, "3h10m", false),
                    batch("AwaitingApproval", -3 * HOUR, -2 * HOUR),
                ],
                true,
                Verdict::Unsafe,
                Some(600 - 900),
                "old credentials revocable in 10m",
            ),
            (
                "a batch awaiting approval with less than a rollout to spare",
                vec![
                    app(),
                    metadata_secret(),
                    binding(enabled.clone(), Some(-3 * HOUR)),
                    old_binding(-3 * HOUR, "3h20m", false),
                    batch("AwaitingApproval", -3 * HOUR, -2 * HOUR),
                ],
                true,
                Verdict::AtRisk,
                Some(1200 - 900),
                "only 5m to spare",
            ),
            (
                "a batch collecting with a day of overlap left",
                vec![
                    app(),
                    metadata_secret(),
                    binding(enabled.clone(), Some(-600)),
                    old_binding(-600, "24h", false),
                    batch("Collecting", -600, 3000),
                ],
                true,
                Verdict::Ok,
                Some(24 * HOUR - 600 - 3000 - 900),
                "old credentials revocable in 23h50m",
            ),
            (
                "revocation on hold while the new binding is not Ready",
                vec![
                    app(),
                    metadata_secret(),
                    binding(enabled.clone(), Some(-50 * HOUR)),
                    old_binding(-50 * HOUR, "48h", true),
                ],
                true,
                Verdict::Ok,
                None,
                "revocation on hold",
            ),
            (
                "rolled out since the rotation",
                vec![
                    app(),
                    metadata_secret(),
                    binding(enabled.clone(), Some(-2 * HOUR)),
                    old_binding(-2 * HOUR - 60, "2h30m", false),
                    batch("Succeeded", -2 * HOUR + 30, -HOUR),
                ],
                true,
                Verdict::Ok,
                None,
                "pods hold the new credentials",
            ),
            (
                "automatic rotation off",
                vec![app(), metadata_secret(), binding(json!({"enabled": false}), None)],
                true,
                Verdict::Ok,
                None,
                "automatic rotation is off",
            ),
            (
                "no ServiceBinding CRD",
                vec![app(), metadata_secret()],
                false,
                Verdict::Unknown,
                None,
                "no ServiceBinding information",
            ),
            (
                "no ServiceBinding for this Secret",
                vec![app(), secret(json!({"credentials": b64(r#"{"a":1}"#)}), None)],
                true,
                Verdict::Unknown,
                None,
                "no ServiceBinding writes this Secret",
            ),
            (
                "cf-service-operator: no overlap",
                vec![app(), secret(json!({"credentials": b64(r#"{"a":1}"#)}), Some("cf.cs.sap.com/v1alpha1"))],
                true,
                Verdict::Unsafe,
                None,
                "no overlap — restart at once",
            ),
            (
                "secretRootKey: unreadable",
                vec![app(), secret(json!({"root": b64(r#"{"clientid":"x"}"#)}), Some("services.cloud.sap.com/v1")), {
                    let mut binding = binding(json!({"enabled": false}), None);
                    binding["spec"]["secretRootKey"] = json!("root");
                    binding
                }],
                true,
                Verdict::Unsafe,
                None,
                "secretRootKey",
            ),
            ("the Secret is missing", vec![app()], true, Verdict::Unsafe, None, "does not exist"),
        ];
        check_verdicts(cases);
    }

    /// A Secret that cannot be read or used is unsafe whatever its rotation says, and why it
    /// cannot is the last reason: the one `doctor`, `fleet` and the notifications show (a missing
    /// Secret with a healthy binding once said "the next keeps old credentials 48h").
    #[test]
    fn an_unreadable_secret_says_why_last() {
        let enabled = json!({"enabled": true});
        let root_key = {
            let mut binding = binding(enabled.clone(), Some(-10 * HOUR));
            binding["spec"]["secretRootKey"] = json!("root");
            binding
        };
        let cases = [
            ("missing, its binding healthy", vec![app(), binding(enabled.clone(), Some(-10 * HOUR))], "does not exist"),
            ("missing, no binding", vec![app()], "does not exist"),
            (
                "secretRootKey, its rotation healthy",
                vec![
                    app(),
                    secret(json!({"root": b64(r#"{"clientid":"x"}"#)}), Some("services.cloud.sap.com/v1")),
                    root_key,
                ],
                "secretRootKey",
            ),
            (
                ".metadata that does not parse, in stringData (as a file gives it)",
                vec![app(), {
                    let mut secret = secret(json!({}), Some("services.cloud.sap.com/v1"));
                    secret["stringData"] = json!({".metadata": "{not json", "clientid": "x"});
                    secret
                }],
                "no VCAP_SERVICES entry can be built",
            ),
            (
                ".metadata whose container property is not an object",
                vec![
                    app(),
                    secret(
                        json!({".metadata": b64(r#"{"credentialProperties":[{"name":"all","format":"json","container":true}]}"#),
                               "all": b64("[1]")}),
                        Some("services.cloud.sap.com/v1"),
                    ),
                ],
                "no VCAP_SERVICES entry can be built",
            ),
        ];
        for (what, objects, last) in cases {
            let report = single(objects, true);
            assert_eq!(report.verdict, Verdict::Unsafe, "{what}: {report:#?}");
            let said = report.reasons.last().cloned().unwrap_or_default();
            assert!(said.contains(last), "{what}: the last reason is {said:?}, not about the Secret");
        }
    }

    /// A Secret rolled out after its latest rotation is ok whatever fields its binding has: the
    /// rotation's time comes from `lastCredentialsRotationTime`, else the newest old copy, else
    /// the binding's creation (a batch forced to Succeeded once stayed "unsafe" here).
    #[test]
    fn a_rollout_after_the_latest_rotation_is_ok_without_last_rotation_time() {
        let enabled = json!({"enabled": true});
        let cases: Vec<Case> = vec![
            (
                "rolled out since the rotation, the binding lacking lastCredentialsRotationTime",
                vec![
                    app(),
                    metadata_secret(),
                    binding(enabled.clone(), None),
                    old_binding(-2 * HOUR - 60, "2h30m", false),
                    batch("Succeeded", -2 * HOUR + 30, -HOUR),
                ],
                true,
                Verdict::Ok,
                None,
                "pods hold the new credentials",
            ),
            (
                "a batch that rolled out before the latest rotation does not count",
                vec![
                    app(),
                    metadata_secret(),
                    binding(enabled.clone(), None),
                    old_binding(-2 * HOUR - 60, "2h30m", false),
                    batch("Succeeded", -3 * HOUR, -3 * HOUR + 60),
                ],
                true,
                Verdict::Unsafe,
                Some(30 * 60 - 60 - HOUR - 900),
                "after the old credentials may be revoked",
            ),
        ];
        check_verdicts(cases);
    }

    /// The change windows of a row (on the application, on its namespace, the cluster's), the
    /// Lease's namespace and `--on-deadline roll`; its freezes are among its objects.
    #[derive(Default)]
    struct Plan {
        app: Option<&'static str>,
        namespace: Option<&'static str>,
        cluster: Option<&'static str>,
        lease: Option<&'static str>,
        rolls: bool,
    }

    /// A freeze of `scope` in `namespace`, until `until` seconds from NOW.
    fn freeze(namespace: &str, scope: &str, until: i64) -> Value {
        json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
               "metadata": {"name": "namespace", "namespace": namespace},
               "spec": {"scope": scope, "until": at(until),
                        "frozen": {"by": "alice", "at": at(-HOUR), "reason": "release weekend"}}})
    }

    /// (name, objects, windows and freezes, verdict, margin, a reason containing).
    type ScheduledCase = (&'static str, Vec<Value>, Plan, Verdict, Option<i64>, &'static str);

    const NIGHTS: &str = "Mon-Fri 22:00-05:00 UTC";

    /// Awaiting approval since its window ended an hour ago; old credentials revocable in 10h.
    fn awaiting() -> Vec<Value> {
        vec![
            app(),
            metadata_secret(),
            binding(json!({"enabled": true}), Some(-3 * HOUR)),
            old_binding(-3 * HOUR, "13h", false),
            batch("AwaitingApproval", -3 * HOUR, -HOUR),
        ]
    }

    /// `objects` with their last one (the batch) edited.
    fn with_last(mut objects: Vec<Value>, edit: impl Fn(&mut Value)) -> Vec<Value> {
        if let Some(last) = objects.last_mut() {
            edit(last);
        }
        objects
    }

    /// No rotation under way, the default 48h TTL.
    fn steady() -> Vec<Value> {
        vec![app(), metadata_secret(), binding(json!({"enabled": true}), Some(-10 * HOUR))]
    }

    const UNSAFE_WAIT: &str = "waits for the change window opening 2027-01-15T22:00:00Z (Mon-Fri 22:00-05:00 UTC from \
                               annotation capdeck.dev/change-windows of CAPApplication shop/bookshop), after the old \
                               credentials may be revoked: the engine asks a person (DeadlineBeforeChangeWindow";

    /// The verdict counts the wait for the next change window (NOW is Friday 2027-01-15 08:00
    /// UTC): a wait past the revocation is unsafe, as the engine would escalate; with
    /// `--on-deadline roll` the engine does not wait, so neither does the margin.
    #[test]
    fn verdicts_count_the_wait_for_a_change_window() {
        let cases: Vec<ScheduledCase> = vec![
            (
                "no windows: as before",
                awaiting(),
                Plan::default(),
                Verdict::Ok,
                Some(10 * HOUR - 900),
                "old credentials revocable in 10h",
            ),
            (
                "outside the window, the opening (in 14h) after the revocation (in 10h): unsafe",
                awaiting(),
                Plan { app: Some(NIGHTS), ..Plan::default() },
                Verdict::Unsafe,
                Some(10 * HOUR - 14 * HOUR - 900),
                UNSAFE_WAIT,
            ),
            (
                "inside the window: unchanged",
                awaiting(),
                Plan { app: Some("Mon-Fri 06:00-18:00 UTC"), ..Plan::default() },
                Verdict::Ok,
                Some(10 * HOUR - 900),
                "old credentials revocable in 10h",
            ),
            (
                "outside the window, the opening early enough: ok, the wait said",
                awaiting()
                    .into_iter()
                    .map(|o| {
                        if o["metadata"]["name"] == "xsuaa-bind-ab12c" {
                            old_binding(-3 * HOUR, "27h", false)
                        } else {
                            o
                        }
                    })
                    .collect(),
                Plan { app: Some(NIGHTS), ..Plan::default() },
                Verdict::Ok,
                Some(24 * HOUR - 14 * HOUR - 900),
                "waits for the change window opening 2027-01-15T22:00:00Z",
            ),
            (
                "the namespace's windows when the application sets none",
                awaiting(),
                Plan { namespace: Some(NIGHTS), ..Plan::default() },
                Verdict::Unsafe,
                Some(-4 * HOUR - 900),
                "from annotation capdeck.dev/change-windows of Namespace shop), after the old credentials",
            ),
            (
                "the cluster's windows when no annotation sets any",
                awaiting(),
                Plan { cluster: Some(NIGHTS), ..Plan::default() },
                Verdict::Unsafe,
                Some(-4 * HOUR - 900),
                "from the cluster's change windows), after the old credentials",
            ),
            (
                "the application's windows win over the cluster's",
                awaiting(),
                Plan { app: Some("Mon-Fri 06:00-18:00 UTC"), cluster: Some(NIGHTS), ..Plan::default() },
                Verdict::Ok,
                Some(10 * HOUR - 900),
                "old credentials revocable in 10h",
            ),
            (
                "--on-deadline roll: the engine would not wait, the margin is as without windows",
                awaiting(),
                Plan { app: Some(NIGHTS), rolls: true, ..Plan::default() },
                Verdict::Ok,
                Some(10 * HOUR - 900),
                "would outlive the old credentials: the engine rolls at once (--on-deadline roll)",
            ),
            (
                "unreadable windows: held until fixed, so unsafe",
                awaiting(),
                Plan { app: Some("Mon 25:00-26:00 UTC"), ..Plan::default() },
                Verdict::Unsafe,
                None,
                "the annotation capdeck.dev/change-windows of CAPApplication shop/bookshop cannot be read: range 1",
            ),
            (
                "a collecting batch whose window ends inside an opening: no wait",
                vec![
                    app(),
                    metadata_secret(),
                    binding(json!({"enabled": true}), Some(-600)),
                    old_binding(-600, "5h", false),
                    batch("Collecting", -600, 3 * HOUR),
                ],
                Plan { app: Some("Mon-Fri 10:00-12:00 UTC"), ..Plan::default() },
                Verdict::Ok,
                Some(5 * HOUR - 600 - 3 * HOUR - 900),
                "old credentials revocable in 4h50m",
            ),
            (
                "no batch yet: the rotation's batch would wait for the opening",
                vec![
                    app(),
                    metadata_secret(),
                    binding(json!({"enabled": true}), Some(-600)),
                    old_binding(-600, "5h", false),
                ],
                Plan { app: Some(NIGHTS), ..Plan::default() },
                Verdict::Unsafe,
                Some(5 * HOUR - 600 - 14 * HOUR - 900),
                UNSAFE_WAIT,
            ),
        ];
        check_scheduled(cases);
    }

    /// A freeze that ends after the revocation is unsafe too; a cluster freeze counts only in the
    /// Lease's namespace; force overrides windows and freezes.
    #[test]
    fn verdicts_count_the_end_of_a_freeze() {
        let cases: Vec<ScheduledCase> = vec![
            (
                "frozen past the revocation: unsafe",
                [awaiting(), vec![freeze("shop", "Namespace", 12 * HOUR)]].concat(),
                Plan::default(),
                Verdict::Unsafe,
                Some(10 * HOUR - 12 * HOUR - 900),
                "namespace shop frozen until 2027-01-15T20:00:00Z by alice: release weekend; it may roll from \
                 2027-01-15T20:00:00Z, after the old credentials may be revoked: the engine asks a person \
                 (DeadlineDuringFreeze",
            ),
            (
                "frozen, then outside the window: rolls at the first opening after the freeze",
                [awaiting(), vec![freeze("shop", "Namespace", 2 * HOUR)]].concat(),
                Plan { app: Some("Mon-Fri 11:00-12:00 UTC"), ..Plan::default() },
                Verdict::Ok,
                Some(10 * HOUR - 3 * HOUR - 900),
                "frozen until 2027-01-15T10:00:00Z by alice: release weekend; it may roll from 2027-01-15T11:00:00Z",
            ),
            (
                "a cluster freeze in the Lease's namespace holds everything",
                [awaiting(), vec![freeze("capdeck-system", "Cluster", 12 * HOUR)]].concat(),
                Plan { lease: Some("capdeck-system"), ..Plan::default() },
                Verdict::Unsafe,
                Some(-2 * HOUR - 900),
                "cluster frozen until",
            ),
            (
                "a cluster freeze elsewhere holds nothing",
                [awaiting(), vec![freeze("shop", "Cluster", 12 * HOUR)]].concat(),
                Plan { lease: Some("capdeck-system"), ..Plan::default() },
                Verdict::Ok,
                Some(10 * HOUR - 900),
                "old credentials revocable in 10h",
            ),
            (
                "a freeze that ends before the window does: no wait",
                [awaiting(), vec![freeze("shop", "Namespace", -30 * 60)]].concat(),
                Plan::default(),
                Verdict::Ok,
                Some(10 * HOUR - 900),
                "old credentials revocable in 10h",
            ),
            (
                "a forced batch overrides windows and freezes",
                with_last([vec![freeze("shop", "Namespace", 12 * HOUR)], awaiting()].concat(), |batch| {
                    batch["spec"]["force"] = json!({"by": "bob", "at": at(-60), "reason": "CHG-7"});
                }),
                Plan { app: Some(NIGHTS), ..Plan::default() },
                Verdict::Ok,
                Some(10 * HOUR - 900),
                "old credentials revocable in 10h",
            ),
        ];
        check_scheduled(cases);
    }

    /// No rotation under way: the next one may come when a window has just closed, or during a
    /// freeze; when that wait leaves less than a rollout of its TTL, at-risk (the engine would ask).
    #[test]
    fn verdicts_count_the_longest_wait_of_the_next_rotation() {
        let cases: Vec<ScheduledCase> = vec![
            (
                "no rotation under way, weekday nights: the next may wait a weekend (65h) for its window",
                steady(),
                Plan { app: Some(NIGHTS), ..Plan::default() },
                Verdict::AtRisk,
                Some(48 * HOUR - HOUR - 900),
                "the next rotation's batch may wait up to 65h for a change window (Mon-Fri 22:00-05:00 UTC from \
                 annotation capdeck.dev/change-windows of CAPApplication shop/bookshop): that leaves -18h15m",
            ),
            (
                "no rotation under way, every night: 17h at most, 48h is enough",
                steady(),
                Plan { app: Some("Mon-Sun 22:00-05:00 UTC"), ..Plan::default() },
                Verdict::Ok,
                Some(48 * HOUR - HOUR - 900),
                "46h45m beyond the window and the rollout",
            ),
            (
                "no rotation under way, frozen for three days",
                [steady(), vec![freeze("shop", "Namespace", 72 * HOUR)]].concat(),
                Plan::default(),
                Verdict::AtRisk,
                Some(48 * HOUR - HOUR - 900),
                "may wait up to 71h for the end of the freeze (namespace shop frozen until",
            ),
            (
                "rolled out since the rotation, weekday nights: done, but the next may wait a weekend",
                vec![
                    app(),
                    metadata_secret(),
                    binding(json!({"enabled": true}), Some(-2 * HOUR)),
                    old_binding(-2 * HOUR - 60, "2h30m", false),
                    batch("Succeeded", -2 * HOUR + 30, -HOUR),
                ],
                Plan { app: Some(NIGHTS), ..Plan::default() },
                Verdict::AtRisk,
                None,
                "the next rotation's batch may wait up to 65h for a change window",
            ),
            (
                "no rotation under way, --on-deadline roll: the engine never waits past the credentials",
                steady(),
                Plan { app: Some(NIGHTS), rolls: true, ..Plan::default() },
                Verdict::Ok,
                Some(48 * HOUR - HOUR - 900),
                "46h45m beyond the window and the rollout",
            ),
        ];
        check_scheduled(cases);
    }

    fn check_scheduled(cases: Vec<ScheduledCase>) {
        for (name, mut objects, plan, verdict, margin, reason) in cases {
            if let Some(windows) = plan.app {
                objects[0]["metadata"]["annotations"] = json!({"capdeck.dev/change-windows": windows});
            }
            let freezes: Vec<Arc<crate::api::Freeze>> = objects
                .iter()
                .filter(|object| object["kind"] == "Freeze")
                .map(|object| Arc::new(serde_json::from_value(object.clone()).expect("a freeze")))
                .collect();
            objects.retain(|object| object["kind"] != "Freeze");
            let namespaces: BTreeMap<String, String> =
                plan.namespace.map(|text| ("shop".to_string(), text.to_string())).into_iter().collect();
            let cluster = plan.cluster.map(|text| crate::api::change_window::ChangeWindows::parse(text).expect("ok"));
            let schedule = Schedule {
                namespace_windows: Some(&namespaces),
                cluster_windows: cluster.as_ref(),
                freezes: &freezes,
                lease_namespace: plan.lease,
                deadline_rolls: plan.rolls,
            };
            let mut overview = judge_scheduled(objects, true, &schedule);
            let report = overview.credentials.remove(0);
            assert_eq!(report.verdict, verdict, "{name}: {report:#?}");
            assert_eq!(report.margin_seconds, margin, "{name}: {report:#?}");
            assert!(
                report.reasons.iter().any(|r| r.contains(reason)),
                "{name}: no reason with {reason:?}: {report:#?}"
            );
        }
    }

    #[test]
    fn namespace_windows_are_read_from_the_annotation() {
        let namespaces: Vec<k8s_openapi::api::core::v1::Namespace> = vec![
            serde_json::from_value(json!({"metadata": {"name": "shop",
                "annotations": {"capdeck.dev/change-windows": "Sat 00:00-24:00 UTC"}}}))
            .expect("namespace"),
            serde_json::from_value(json!({"metadata": {"name": "hr"}})).expect("namespace"),
        ];
        let found = namespace_windows(&namespaces);
        assert_eq!(found.into_iter().collect::<Vec<_>>(), [("shop".to_string(), "Sat 00:00-24:00 UTC".to_string())]);
    }

    fn check_verdicts(cases: Vec<Case>) {
        for (name, objects, crd, verdict, margin, reason) in cases {
            let report = single(objects, crd);
            assert_eq!(report.verdict, verdict, "{name}: {report:#?}");
            assert_eq!(report.margin_seconds, margin, "{name}: {report:#?}");
            assert!(
                report.reasons.iter().any(|r| r.contains(reason)),
                "{name}: no reason with {reason:?}: {report:#?}"
            );
        }
    }

    /// What the consuming Deployments run, in the walk below.
    #[derive(Clone, Copy, Debug)]
    enum Running {
        /// Rolled out, referencing a VCAP Secret with the binding Secret's current credentials.
        Current,
        /// Referencing such a Secret, but the controller has not rolled it out yet.
        CurrentStillRolling,
        /// Referencing a VCAP Secret with the credentials before the rotation.
        Previous,
        /// A Deployment of that name that the version does not control.
        NotOwned,
        /// No Deployment and no version in use.
        Nothing,
        /// Its VCAP Secret holds the current credentials, but was edited after its Pods started
        /// (a manager wrote it after its creation).
        EditedInPlace,
        /// An `env` entry `VCAP_SERVICES` overrides the VCAP Secret.
        EnvOverride,
        /// A later `envFrom` ConfigMap may hold `VCAP_SERVICES` (a later source wins).
        LaterSource,
    }

    /// The version, its Deployment and the VCAP Secret it references, as `running` says.
    fn consumers(running: Running) -> Vec<Value> {
        let version = json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion",
            "metadata": {"name": "bookshop-1", "namespace": "shop", "uid": "v-uid"},
            "spec": {"capApplicationInstance": "bookshop", "version": "1.0.0",
                     "workloads": [{"name": "srv", "consumedBTPServices": ["xsuaa"],
                                    "deploymentDefinition": {"type": "CAP", "image": "i"}}]},
            "status": {"state": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}});
        if matches!(running, Running::Nothing) {
            return Vec::new();
        }
        // The payload capdeck (and the Go operator) builds from the binding Secret as it is now.
        let world = Manifests::from_objects("payload", vec![app(), metadata_secret(), version.clone()]);
        let index = CapIndex::new(world.applications.clone(), world.versions.iter().cloned(), Vec::new());
        let rotated = Rotated::Secrets(std::iter::once("xsuaa-bind".to_string()).collect());
        let plan = crate::plan::plan_application(&world.applications[0], &rotated, &index, &world);
        let current = String::from_utf8(plan.deployments[0].payload.as_bytes().to_vec()).expect("utf-8");
        let payload = match running {
            Running::Previous => current.replace("sb-1", "sb-0"),
            _ => current,
        };
        assert!(matches!(running, Running::Nothing | Running::Previous) || payload.contains("sb-1"), "{payload}");
        let controller = match running {
            Running::NotOwned => json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "other", "uid": "o",
                                         "controller": true}]),
            _ => json!([{"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion", "name": "bookshop-1",
                         "uid": "v-uid", "controller": true}]),
        };
        let observed = if matches!(running, Running::CurrentStillRolling) { 1 } else { 2 };
        let edited = if matches!(running, Running::EditedInPlace) { 600 } else { 0 };
        let mut container = json!({"name": "srv", "image": "i",
                                   "envFrom": [{"configMapRef": {"name": "before-is-overridden"}},
                                               {"secretRef": {"name": "bookshop-1-srv-vcap"}}]});
        match running {
            Running::EnvOverride => container["env"] = json!([{"name": "VCAP_SERVICES", "value": "{}"}]),
            Running::LaterSource => {
                if let Some(sources) = container["envFrom"].as_array_mut() {
                    sources.push(json!({"configMapRef": {"name": "team"}}));
                }
            }
            _ => {}
        }
        vec![
            version,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "bookshop-1-srv-vcap", "namespace": "shop",
                                "labels": {"sme.sap.com/secret-owner-hash": "h"},
                                "creationTimestamp": at(-HOUR),
                                "managedFields": [{"manager": "cap-operator", "operation": "Update", "time": at(-HOUR)},
                                                  {"manager": "kubectl-edit", "operation": "Update",
                                                   "time": at(-HOUR + edited)}]},
                   "data": {"VCAP_SERVICES": b64(&payload)}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "bookshop-1-srv", "namespace": "shop", "generation": 2,
                                "ownerReferences": controller},
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "srv"}},
                            "template": {"metadata": {"labels": {"app": "srv"}},
                                         "spec": {"containers": [container]}}},
                   "status": {"observedGeneration": observed, "replicas": 2, "updatedReplicas": 2,
                              "readyReplicas": 2, "availableReplicas": 2}}),
        ]
    }

    /// The verdict comes from what the consuming Deployments run: with a rotation under way whose
    /// old credentials die in 10 minutes (well before any batch could roll), Deployments that
    /// already run the current credentials make it `ok` (whoever rolled them), whatever batch
    /// exists, whichever binding status fields are set, whatever window or freeze would hold a
    /// batch; anything less leaves the margin to decide (unsafe here). Walks every combination.
    #[test]
    fn verdicts_follow_what_the_deployments_run() {
        let runnings = [
            Running::Current,
            Running::CurrentStillRolling,
            Running::Previous,
            Running::NotOwned,
            Running::Nothing,
            Running::EditedInPlace,
            Running::EnvOverride,
            Running::LaterSource,
        ];
        // (name, the batch, if any)
        let batches: [(&str, Option<Value>); 4] = [
            ("no batch", None),
            ("collecting", Some(batch("Collecting", -600, 3000))),
            ("awaiting approval", Some(batch("AwaitingApproval", -2 * HOUR, -HOUR))),
            ("held", Some(batch("Held", -2 * HOUR, -HOUR))),
        ];
        // Which status fields the sap-btp-service-operator version writes.
        let statuses: [(&str, Option<i64>); 2] =
            [("lastCredentialsRotationTime", Some(-600)), ("no rotation time", None)];
        // (name, app windows, a freeze until)
        let schedules: [(&str, Option<&str>, Option<i64>); 3] = [
            ("no window", None, None),
            ("a closed window", Some("Mon-Sun 01:00-02:00 UTC"), None),
            ("a freeze", None, Some(2 * HOUR)),
        ];
        let mut walked = 0;
        for running in runnings {
            for (batch_name, open) in &batches {
                for (status_name, rotated) in statuses {
                    for (schedule_name, windows, frozen) in schedules {
                        let mut objects = vec![
                            app(),
                            metadata_secret(),
                            binding(json!({"enabled": true}), rotated),
                            old_binding(-600, "20m", false),
                        ];
                        if let Some(windows) = windows {
                            objects[0]["metadata"]["annotations"] = json!({"capdeck.dev/change-windows": windows});
                        }
                        objects.extend(consumers(running));
                        objects.extend(open.clone());
                        let freezes: Vec<Arc<crate::api::Freeze>> = frozen
                            .map(|until| {
                                Arc::new(serde_json::from_value(freeze("shop", "Namespace", until)).expect("a freeze"))
                            })
                            .into_iter()
                            .collect();
                        let schedule = Schedule { freezes: &freezes, ..Schedule::NONE };
                        let mut overview = judge_scheduled(objects, true, &schedule);
                        let report = overview.credentials.remove(0);
                        let case = format!("{running:?}, {batch_name}, {status_name}, {schedule_name}");
                        let expected = if matches!(running, Running::Current) { Verdict::Ok } else { Verdict::Unsafe };
                        assert_eq!(report.verdict, expected, "{case}: {report:#?}");
                        if expected == Verdict::Ok {
                            assert!(
                                report.reasons.iter().any(|r| r.contains(
                                    "1 consuming Deployment already runs its current credentials: the old ones dying \
                                     harms nothing"
                                )),
                                "{case}: {report:#?}"
                            );
                            assert_eq!(report.margin_seconds, None, "{case}");
                        }
                        walked += 1;
                    }
                }
            }
        }
        assert_eq!(walked, 8 * 4 * 2 * 3);
    }

    #[test]
    fn formats_and_sources_are_named() {
        let flat = single(vec![app(), secret(json!({"clientid": b64("x")}), None)], true);
        assert_eq!((flat.format, flat.source), (Format::Flat, Source::Unknown));
        assert!(flat.reasons.iter().any(|r| r.contains("Go CAP Operator cannot")), "{flat:#?}");
        let credentials = single(vec![app(), secret(json!({"credentials": b64("[1]")}), None)], true);
        assert_eq!(credentials.format, Format::Unreadable, "credentials that are not an object");
        let sap = single(vec![app(), metadata_secret(), binding(json!({"enabled": true}), None)], true);
        assert_eq!((sap.format, sap.source), (Format::Metadata, Source::SapBtp));
        assert_eq!(sap.service_binding.as_deref(), Some("xsuaa-bind"));
        let rotation = sap.rotation.expect("rotation");
        assert_eq!(rotation.frequency.as_deref(), Some("72h"), "the webhook's default");
        assert_eq!(rotation.rotated_binding_ttl.as_deref(), Some("48h"));
        assert_eq!(rotation.last_rotation.map(|t| t.as_second()), Some(NOW - 100 * HOUR), "creation, no rotation yet");
        assert_eq!(rotation.next_due.map(|t| t.as_second()), Some(NOW - 28 * HOUR), "overdue");
        assert_eq!(rotation.next_due_latest.map(|t| t.as_second()), Some(NOW - 18 * HOUR));
    }

    #[test]
    fn old_bindings_are_never_the_current_one_and_stale_secrets_say_so() {
        let mut stale = metadata_secret();
        stale["metadata"]["labels"] = json!({"services.cloud.sap.com/stale": "old-id"});
        let report = single(
            vec![app(), stale, old_binding(-HOUR, "48h", false), binding(json!({"enabled": true}), Some(-HOUR))],
            true,
        );
        assert_eq!(report.service_binding.as_deref(), Some("xsuaa-bind"), "the old binding is not the Secret's");
        assert_eq!(report.old_credentials.len(), 1);
        assert!(report.reasons.iter().any(|r| r.contains("labelled stale")), "{report:#?}");
    }

    #[test]
    fn bindings_due_within_a_day_are_counted() {
        let overview = judge_world(
            vec![
                app(),
                metadata_secret(),
                binding(json!({"enabled": true, "rotationFrequency": "24h"}), Some(-2 * HOUR)),
                old_binding(-HOUR, "48h", false),
            ],
            true,
        );
        assert_eq!(overview.due_within_24h, 1, "the current binding (due in 22h), not the old one");
        let overview = judge_world(vec![app(), metadata_secret(), binding(json!({"enabled": true}), Some(0))], true);
        assert_eq!(overview.due_within_24h, 0, "72h away");
    }

    #[test]
    fn a_ttl_shorter_than_window_and_deadline_is_a_static_problem() {
        let manifests =
            Manifests::from_objects("test", vec![binding(json!({"enabled": true, "rotatedBindingTTL": "30m"}), None)]);
        let problem =
            ttl_too_short(&manifests.service_bindings[0], Duration::from_secs(3600), Duration::from_secs(600));
        assert!(problem.is_some_and(|p| p.contains("rotatedBindingTTL 30m") && p.contains("at least 1h10m")));
        let fine = Manifests::from_objects("test", vec![binding(json!({"enabled": true}), None)]);
        assert_eq!(ttl_too_short(&fine.service_bindings[0], Duration::from_secs(3600), Duration::from_secs(600)), None);
    }
}
