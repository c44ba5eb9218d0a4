//! The bodies a receiver gets: the generic JSON (`version` below; fields are only ever added
//! within a version) and Slack's `{"text": …}`. Never a credential: Secret names and verdicts
//! only. docs/NOTIFICATIONS.md shows both.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::incident::{Incident, Severity};
use super::{Due, Event};
use crate::api::RotationBatch;

/// The generic body's `version`.
pub const PAYLOAD_VERSION: &str = "capdeck.dev/notification/v1";

/// One notification, as the generic JSON body.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    pub version: &'static str,
    pub event: &'static str,
    /// The transition's key, as recorded on the batch: a receiver can deduplicate on
    /// (cluster, namespace, batch, key).
    pub key: String,
    pub cluster: String,
    pub namespace: String,
    pub application: String,
    pub batch: String,
    pub phase: String,
    /// What the batch is doing, in the words of every other surface (`Held · failure guard`).
    pub state: String,
    /// The batch's Ready condition: reason and message.
    pub reason: String,
    pub message: String,
    pub window_end: Timestamp,
    /// For a credentials event: the binding Secret, its verdict and why.
    pub secret: Option<String>,
    pub verdict: Option<String>,
    pub reasons: Vec<String>,
    pub at: Timestamp,
    /// The engine (Lease identity) that sent it.
    pub engine: String,
    /// One line for people (the Slack body's text).
    pub text: String,
    /// The earliest moment the old credentials concerned may be revoked, when known.
    pub deadline: Option<Timestamp>,
    /// `critical`, `error`, `warning` or `info` (docs/NOTIFICATIONS.md).
    pub severity: Severity,
    /// The incident this event opens or closes, and its key (PagerDuty's `dedup_key`,
    /// Opsgenie's `alias`); `null` for an event that is no incident's.
    pub incident: Option<Incident>,
}

impl Payload {
    /// The message's id for signed webhooks (`webhook-id`): the same for one transition whoever
    /// sends it and however often, and fit for a header (a hash of cluster, namespace, batch and
    /// the transition's key).
    pub fn message_id(&self) -> String {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(
            [self.cluster.as_str(), &self.namespace, &self.batch, &self.key].join("\u{0}").as_bytes(),
        );
        format!("msg_{}", hex::encode(&digest[..16]))
    }

    /// A freeze's start or end: `batch` and `phase` are empty, `reason` is the event, `message`
    /// says who froze (or lifted) it and why, `windowEnd` is the freeze's `until`.
    pub fn for_freeze(
        cluster: &str,
        engine: &str,
        due: &super::freezes::FreezeDue,
        freeze: &crate::api::Freeze,
        at: Timestamp,
    ) -> Self {
        let message = match (&due.event, &freeze.spec.lifted) {
            (Event::FreezeEnded, Some(lifted)) => {
                let why = lifted.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
                format!("the freeze of {} was lifted by {}{why}", freeze.target(), lifted.by)
            }
            (Event::FreezeEnded, None) => format!("the freeze of {} ended at {}", freeze.target(), freeze.spec.until.0),
            _ => freeze.summary(),
        };
        let mut payload = Self {
            version: PAYLOAD_VERSION,
            event: due.event.as_str(),
            key: due.key.clone(),
            cluster: cluster.to_string(),
            namespace: due.namespace.clone(),
            application: freeze.spec.application.clone().unwrap_or_default(),
            batch: String::new(),
            phase: String::new(),
            state: String::new(),
            reason: due.event.as_str().to_string(),
            message,
            window_end: freeze.spec.until.0,
            secret: None,
            verdict: None,
            reasons: Vec::new(),
            at,
            engine: engine.to_string(),
            text: String::new(),
            deadline: None,
            severity: Severity::of(due.event),
            incident: None,
        };
        payload.keep_to_one_line();
        payload.text = match due.event {
            Event::FreezeEnded => format!("[{cluster}] {}: batches roll again", payload.message),
            _ => format!(
                "[{cluster}] {}: batches collect but do not roll — capdeck unfreeze … --reason … lifts it",
                payload.message
            ),
        };
        payload
    }

    pub fn new(cluster: &str, engine: &str, due: &Due, batch: &RotationBatch, at: Timestamp) -> Self {
        let status = batch.status.clone().unwrap_or_default();
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
        let mut payload = Self {
            version: PAYLOAD_VERSION,
            event: due.event.as_str(),
            key: due.key.clone(),
            cluster: cluster.to_string(),
            namespace: due.namespace.clone(),
            application: due.application.clone(),
            batch: due.batch.clone(),
            phase: status.phase.to_string(),
            state: batch.state().label(),
            reason: ready.map(|c| c.reason.clone()).unwrap_or_default(),
            message: ready.map(|c| c.message.clone()).unwrap_or_default(),
            window_end: batch.spec.window_end.0,
            secret: due.credentials.as_ref().map(|report| report.secret.clone()),
            verdict: due.credentials.as_ref().map(|report| report.verdict.as_str().to_string()),
            reasons: due.credentials.as_ref().map(|report| report.reasons.clone()).unwrap_or_default(),
            at,
            engine: engine.to_string(),
            text: String::new(),
            deadline: due.deadline,
            severity: Severity::of(due.event),
            incident: Incident::of(
                due.event,
                due.resolves,
                cluster,
                &due.namespace,
                &due.batch,
                due.credentials.as_ref().map(|report| report.secret.as_str()),
            ),
        };
        payload.keep_to_one_line();
        payload.text = payload.line();
        payload
    }

    /// Text from the cluster (a condition's message quoting an annotation, a freeze's reason and
    /// who lifted it, a freeze's application) on one line, with no control or bidirectional
    /// character: a newline in a freeze's reason would forge a line of its own in a shared
    /// channel, an override (U+202E) would make it read otherwise. Every receiver gets the same.
    fn keep_to_one_line(&mut self) {
        for field in
            [&mut self.message, &mut self.reason, &mut self.application].into_iter().chain(self.reasons.iter_mut())
        {
            if let std::borrow::Cow::Owned(clean) = crate::output::one_line(field) {
                *field = clean;
            }
        }
    }

    /// `[prod-eu] cap-shop/bookshop: batch bookshop-x7k2p awaits approval … — capdeck approve …`:
    /// what happened and where, the old credentials' deadline when known, the command to run.
    fn line(&self) -> String {
        let (what, command) = self.what_and_command();
        let deadline = self
            .deadline
            .filter(|_| self.incident.as_ref().is_some_and(|i| i.action == super::incident::Action::Trigger))
            .map(|at| format!("; the old credentials may be revoked from {at}"))
            .unwrap_or_default();
        match command {
            Some(command) => format!("{what}{deadline} — {command}"),
            None => format!("{what}{deadline}"),
        }
    }

    /// What happened, where (the line up to its `—`), and the command that acts on it.
    pub fn what_and_command(&self) -> (String, Option<String>) {
        let place = format!("[{}] {}/{}", self.cluster, self.namespace, self.application);
        let batch = format!("{}/{}", self.namespace, self.batch);
        let secret = self.secret.as_deref().unwrap_or("-");
        let last_reason = self.reasons.last().map_or(String::new(), |reason| format!(": {reason}"));
        let (batch_name, state, message) = (&self.batch, &self.state, &self.message);
        match self.event {
            e if e == Event::AwaitingApproval.as_str() => (
                format!("{place}: batch {batch_name} awaits approval [{state}] ({message})"),
                Some(format!("capdeck approve {batch} --reason …")),
            ),
            e if e == Event::DeadlineBeforeChangeWindow.as_str() || e == Event::DeadlineDuringFreeze.as_str() => (
                format!("{place}: batch {batch_name} cannot wait for its window [{state}]: {message}"),
                Some(format!("capdeck approve {batch} --reason …")),
            ),
            e if e == Event::HeldByFailureGuard.as_str() => (
                format!("{place}: the failure guard halted batch {batch_name} [{state}] ({message})"),
                Some(format!("capdeck retry|release|undo {batch} --reason …")),
            ),
            e if e == Event::HeldByUnreadableWindows.as_str() => (
                format!("{place}: batch {batch_name} is held: its change windows cannot be read [{state}] ({message})"),
                Some(format!("capdeck doctor -n {} (names the annotation to mend)", self.namespace)),
            ),
            e if e == Event::Failed.as_str() => (
                format!("{place}: batch {batch_name} failed [{state}] ({message})"),
                Some(format!("capdeck retry|undo {batch} --reason …")),
            ),
            e if e == Event::BatchResolved.as_str() => {
                let over = if self.key.split(':').nth(1) == Some(super::incident::Concern::Deadline.as_str()) {
                    "no decision is waiting any more"
                } else {
                    "the failure is over"
                };
                // Undone or cancelled: resolved, with the truth — the application runs the old
                // credentials until a person rolls it forward (CapdeckDeploymentsOutOfDate pages
                // if nobody does).
                if matches!(self.phase.as_str(), "Undone" | "Cancelled") {
                    return (
                        format!(
                            "{place}: batch {batch_name} is {state}: {over}, but {} stays on its old credentials \
                             until it is rolled forward (they stop working when revoked)",
                            self.application
                        ),
                        Some(format!("capdeck retry {batch} --reason … (rolls forward)")),
                    );
                }
                (format!("{place}: batch {batch_name} is {state}: {over}"), None)
            }
            e if e == Event::CredentialsResolved.as_str() => {
                (format!("{place}: credentials of Secret {secret} are safe again"), None)
            }
            e if e == Event::FreezeStarted.as_str() || e == Event::FreezeEnded.as_str() => (self.text.clone(), None),
            _ => (
                format!(
                    "{place}: credentials of Secret {secret} are {}{last_reason}",
                    self.verdict.as_deref().unwrap_or("-")
                ),
                Some(format!("capdeck credentials -n {}", self.namespace)),
            ),
        }
    }
}
