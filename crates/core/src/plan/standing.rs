//! The invariant the engine holds on every pass and every surface shows: each Deployment of a
//! version in use runs a VCAP Secret with its binding Secrets' current credentials, or a batch
//! says why. For a Deployment the plan would restart (it is out of date), [`standing`] says
//! which: an open batch brings it there (`Covered`), an ended batch left it so and nothing
//! rotated since (`LeftBy`: a person's undo or cancel, a failure a person must look at, or the
//! engine's own finding that nothing was to restart), or nothing says why and the engine opens a
//! batch (`Due`, perhaps because a person asked to roll forward).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::api::rotation_batch::{DeploymentAction, DeploymentRolloutState};
use crate::api::{BatchPhase, CAPApplication, RotationBatch};
use crate::plan::DeploymentPlan;

/// What keeps an out-of-date Deployment off its current credentials.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Standing<'a> {
    /// An open batch will bring it to the credentials its Secrets hold now (its state, held or
    /// waiting, is that batch's to tell).
    Covered(&'a RotationBatch),
    /// An ended batch left it so, and none of the Secrets that batch rotated has changed since:
    /// out of date by a person's choice (Undone, Cancelled) or waiting for one (Failed), or the
    /// engine judged there was nothing to restart (NoChange). The engine does not open a batch
    /// until a Secret rotates again or a person rolls forward (`capdeck retry`).
    LeftBy(&'a RotationBatch),
    /// Nothing says why: the engine opens a batch. `rolls_forward`: the Undone or Cancelled batch
    /// a person asked to roll forward (`capdeck retry` on it).
    Due { rolls_forward: Option<&'a RotationBatch> },
}

/// How an out-of-date Deployment stands, among its application's batches (any order, open and
/// ended). `rolled_by`: the batch the live Deployment's annotation names; `current_hash`: the
/// data hash a binding Secret holds now (`None`: missing or unreadable, which is no rotation).
pub fn standing<'a>(
    batches: &'a [Arc<RotationBatch>],
    app: &CAPApplication,
    deployment: &DeploymentPlan,
    rolled_by: Option<&str>,
    current_hash: &dyn Fn(&str) -> Option<String>,
) -> Standing<'a> {
    let consumed = consumed_secrets(app, deployment);
    let open = batches.iter().filter(|batch| batch.engine_work());
    if let Some(batch) = open.clone().find(|batch| covers(batch, &consumed, deployment, rolled_by)) {
        return Standing::Covered(batch);
    }
    let relevant = batches.iter().filter(|batch| lists(batch, &consumed, deployment));
    let Some(newest) = relevant.max_by_key(|batch| order(batch)) else { return Standing::Due { rolls_forward: None } };
    if newest.engine_work() {
        // Being cancelled or undone by a person: theirs, as once it ends.
        if newest.spec.cancel.is_some() || newest.spec.undo.is_some() {
            return Standing::LeftBy(newest);
        }
        // Open and listing it, yet not covering it: pointed at data its Secrets no longer hold.
        return Standing::Due { rolls_forward: None };
    }
    let rotated_since = newest
        .spec
        .secrets
        .iter()
        .filter(|secret| consumed.contains(secret.name.as_str()))
        .any(|secret| current_hash(&secret.name).is_some_and(|now| now != secret.data_hash));
    if rotated_since {
        return Standing::Due { rolls_forward: None };
    }
    // What the batch decided for it: `None` when it was not evaluated (cancelled while it
    // collected); a Problem (it could not be planned: it did not decode) that is fixed since is
    // no one's choice.
    let entry = newest.status.iter().flat_map(|status| &status.deployments).find(|d| d.name == deployment.deployment);
    let restarted = entry.is_none_or(|d| d.action == DeploymentAction::Restart);
    match newest.phase() {
        BatchPhase::Undone | BatchPhase::Cancelled if rolled_forward_asked(newest) => {
            Standing::Due { rolls_forward: Some(newest) }
        }
        BatchPhase::Undone | BatchPhase::Cancelled | BatchPhase::Failed if restarted => Standing::LeftBy(newest),
        // It judged this Deployment current with the same data: the engine does not open batch
        // after batch on a disagreement of its own (the gauge and doctor say it).
        BatchPhase::NoChange if entry.is_some_and(|d| d.action != DeploymentAction::Problem) => {
            Standing::LeftBy(newest)
        }
        _ => Standing::Due { rolls_forward: None },
    }
}

/// The label a batch puts on the VCAP Secrets it makes (and the annotation it puts on the
/// Deployments it points at them).
pub const LABEL_BATCH: &str = "capdeck.dev/rotation-batch";

/// The batch that pointed a Deployment at its VCAP Secret: the Deployment's annotation, trusted
/// only beside a VCAP Secret that batch made (its label says the same). Either alone is a copy
/// anyone who may patch the Deployment (or the Secret) can make.
pub fn proven_rolled_by<'a>(annotation: Option<&'a str>, vcap_secret_label: Option<&str>) -> Option<&'a str> {
    annotation.filter(|batch| vcap_secret_label == Some(*batch))
}

/// A person asked to roll an Undone or Cancelled batch forward (`capdeck retry` writes
/// `spec.retry`); a newer batch for the same Deployments then stands in its place.
pub fn rolled_forward_asked(batch: &RotationBatch) -> bool {
    let ended = match batch.phase() {
        BatchPhase::Undone => batch.spec.undo.as_ref(),
        BatchPhase::Cancelled => batch.spec.cancel.as_ref(),
        _ => return false,
    };
    // A retry from before the undo or the cancel (a Failed batch retried, then undone) asked for
    // no roll forward: only one the person made after ending the batch did (times have whole
    // seconds: one in the same second counts).
    batch.spec.retry.as_ref().is_some_and(|retry| ended.is_none_or(|ended| retry.at.0 >= ended.at.0))
}

/// The binding Secrets the Deployment's services consume.
fn consumed_secrets<'a>(app: &'a CAPApplication, deployment: &DeploymentPlan) -> BTreeSet<&'a str> {
    app.spec
        .btp
        .services
        .iter()
        .filter(|service| deployment.services.contains(&service.name))
        .map(|service| service.secret.as_str())
        .collect()
}

/// Creation order. creationTimestamp has whole seconds: within one, an open batch is newer than
/// an ended one and one that ended later newer than one that ended earlier; the name breaks
/// what is left.
type Order = (Option<k8s_openapi::jiff::Timestamp>, bool, Option<k8s_openapi::jiff::Timestamp>, String);

fn order(batch: &RotationBatch) -> Order {
    let completed = batch.status.as_ref().and_then(|status| status.completed_at.as_ref()).map(|t| t.0);
    let created = batch.metadata.creation_timestamp.as_ref().map(|t| t.0);
    (created, batch.engine_work(), completed, batch.metadata.name.clone().unwrap_or_default())
}

/// The batch is about this Deployment: it lists it (whatever it decided for it), or it was not
/// evaluated and rotates a Secret it consumes (its plan would include it).
fn lists(batch: &RotationBatch, consumed: &BTreeSet<&str>, deployment: &DeploymentPlan) -> bool {
    match batch.status.as_ref().filter(|status| !status.deployments.is_empty()) {
        Some(status) => status.deployments.iter().any(|d| d.name == deployment.deployment),
        None => {
            let planned =
                batch.planned().is_some_and(|p| p.deployments.iter().any(|d| d.name == deployment.deployment));
            planned || batch.spec.secrets.iter().any(|secret| consumed.contains(secret.name.as_str()))
        }
    }
}

/// Whether an open batch will bring `deployment` to the credentials its Secrets hold now: one not
/// evaluated yet (and not cancelled) that rotates a Secret it consumes (its plan will include
/// it, with every Secret's current data), one that has it queued and has not pointed it yet
/// (`rolled_by` names another batch or none: a status that says queued may lag, a rolling
/// batch's progress is written at most once a minute), or one that pointed it at exactly this
/// payload.
fn covers(
    batch: &RotationBatch,
    consumed: &BTreeSet<&str>,
    deployment: &DeploymentPlan,
    rolled_by: Option<&str>,
) -> bool {
    match batch.restarts_or_planned().find(|d| d.name == deployment.deployment) {
        // Queued: rolled with every Secret's data of the moment its turn comes.
        Some(listed) if matches!(listed.state, None | Some(DeploymentRolloutState::Queued)) => {
            rolled_by != batch.metadata.name.as_deref() && batch.spec.cancel.is_none()
        }
        // Pointed already: only with the payload its Secrets hold now (a rotation since, or while
        // the engine was down, is not this batch's).
        Some(listed) => listed.vcap_sha256.as_deref() == Some(deployment.payload.sha256().as_str()),
        None => {
            let evaluated = batch.status.as_ref().is_some_and(|status| !status.deployments.is_empty());
            !evaluated
                && batch.spec.cancel.is_none()
                && batch.spec.secrets.iter().any(|secret| consumed.contains(secret.name.as_str()))
        }
    }
}

/// A Deployment of a version in use that does not run its binding Secrets' current credentials
/// and that no open batch is rolling, as every read surface (doctor, fleet, the console,
/// `capdeck credentials`) says it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutOfDate {
    pub namespace: String,
    pub application: String,
    pub deployment: String,
    /// The version (CAPApplicationVersion name) it belongs to.
    pub version: String,
    /// The binding Secrets it consumes (whose credentials it runs an older copy of).
    pub secrets: Vec<String>,
    /// The ended batch that left it so; `None`: nothing says why (the engine opens a batch, or
    /// none runs: `capdeck doctor` says who leads).
    pub left_by: Option<LeftBy>,
}

/// The ended batch that left a Deployment on old credentials, and the person who ended it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeftBy {
    pub batch: String,
    pub phase: String,
    /// `undone by bob: new credentials refused` (an undo or a cancel), else the batch's reason.
    pub why: String,
    /// When it ended, if the status says.
    pub at: Option<k8s_openapi::jiff::Timestamp>,
}

impl OutOfDate {
    /// One line for people: what runs old credentials, who left it so, and what rolls forward
    /// (control characters of the batch's fields, which whoever may write it chose, made visible).
    pub fn describe(&self) -> String {
        crate::output::one_line(&self.describe_raw()).into_owned()
    }

    fn describe_raw(&self) -> String {
        let (namespace, application, deployment) = (&self.namespace, &self.application, &self.deployment);
        match &self.left_by {
            Some(left) => format!(
                "{namespace}/{application}: {deployment} runs old credentials: batch {} ended {} ({}{}); \
                 `capdeck retry {namespace}/{} --reason ...` rolls it forward",
                left.batch,
                left.phase,
                left.why,
                left.at.map(|at| format!(", {}", at.strftime("%Y-%m-%dT%H:%M:%SZ"))).unwrap_or_default(),
                left.batch
            ),
            None => format!(
                "{namespace}/{application}: {deployment} runs old credentials and no batch covers it yet (the \
                 leading engine opens one; none leading? capdeck doctor says)"
            ),
        }
    }
}

impl LeftBy {
    fn of(batch: &RotationBatch) -> Self {
        let phase = batch.phase();
        let person = (batch.spec.undo.as_ref().map(|undo| (undo, "undone")))
            .or_else(|| batch.spec.cancel.as_ref().map(|cancel| (cancel, "cancelled")));
        let why = match person {
            Some((action, verb)) => action.text(verb),
            None => batch.ready_note().map(|(reason, _)| reason).unwrap_or_else(|| phase.to_string()),
        };
        let at = batch.status.as_ref().and_then(|status| status.completed_at.as_ref()).map(|t| t.0);
        Self { batch: batch.metadata.name.clone().unwrap_or_default(), phase: phase.to_string(), why, at }
    }
}

/// How each Deployment the application's plan restarts stands among its batches, read through
/// `lookup` (the engine's stores, or what a command read): the batch annotation proven beside a
/// VCAP Secret that batch made, and each binding Secret's current data hash. The one judgement
/// the engine's re-check and every surface (`out_of_date`) make.
pub fn standings<'a, 'p>(
    app: &CAPApplication,
    plan: &'p crate::plan::AppPlan,
    batches: &'a [Arc<RotationBatch>],
    lookup: &dyn crate::lookup::ObjectLookup,
) -> Vec<(&'p DeploymentPlan, Standing<'a>)> {
    let namespace = app.metadata.namespace.clone().unwrap_or_default();
    let found = |name: &str| match lookup.secret(&namespace, name) {
        crate::lookup::SecretLookup::Found(found) => Some(found),
        _ => None,
    };
    let current = |secret: &str| found(secret).map(|found| crate::vcap::entries_hash(found.entries()));
    plan.restarts()
        .map(|deployment| {
            let annotation = lookup
                .deployment(&namespace, &deployment.deployment)
                .and_then(|live| live.metadata.annotations.as_ref()?.get(crate::api::ANNOTATION_ROLLED_BY).cloned());
            let made_by = deployment.current_secret.as_deref().and_then(found);
            let rolled_by =
                proven_rolled_by(annotation.as_deref(), made_by.as_deref().and_then(|s| s.label(LABEL_BATCH)));
            (deployment, standing(batches, app, deployment, rolled_by, &current))
        })
        .collect()
}

/// Every out-of-date Deployment of the opted-in applications (those an open batch covers left
/// out), the same judgement the engine makes on each pass.
pub fn out_of_date(
    index: &crate::lookup::CapIndex,
    batches: &[Arc<RotationBatch>],
    lookup: &dyn crate::lookup::ObjectLookup,
) -> Vec<OutOfDate> {
    use std::collections::HashMap;
    let mut by_app: HashMap<(String, &str), Vec<Arc<RotationBatch>>> = HashMap::new();
    for batch in batches {
        let namespace = batch.metadata.namespace.clone().unwrap_or_default();
        by_app.entry((namespace, batch.spec.application.as_str())).or_default().push(batch.clone());
    }
    let mut out = Vec::new();
    for app in index.applications().iter().filter(|app| app.rollout_opted_in()) {
        let namespace = app.metadata.namespace.clone().unwrap_or_default();
        let name = app.metadata.name.clone().unwrap_or_default();
        let batches = by_app.get(&(namespace.clone(), name.as_str())).map_or(&[][..], Vec::as_slice);
        let plan = crate::plan::plan_application(app, &crate::plan::Rotated::All, index, lookup);
        for (deployment, standing) in standings(app, &plan, batches, lookup) {
            let left_by = match standing {
                Standing::Covered(_) => continue,
                Standing::LeftBy(batch) => Some(LeftBy::of(batch)),
                Standing::Due { .. } => None,
            };
            out.push(OutOfDate {
                namespace: namespace.clone(),
                application: name.clone(),
                deployment: deployment.deployment.clone(),
                version: deployment.version.clone(),
                secrets: consumed_secrets(app, deployment).into_iter().map(str::to_string).collect(),
                left_by,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests;
