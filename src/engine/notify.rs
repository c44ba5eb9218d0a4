//! Notifications from the engine that leads (`--notify URL`, `--notify-secret NS/NAME:KEY`): a
//! batch awaiting approval, held by the failure guard or failed, and credentials becoming at
//! risk or unsafe and resolved again. `due` decides (pure); each transition is recorded on its
//! batch (`status.notifications`, under the batch's resourceVersion) *before* it is sent, so it
//! is sent at most once, even when the leader changes. Delivery runs in tasks of its own: a
//! receiver that hangs or fails never slows the engine. See docs/NOTIFICATIONS.md.

mod deliver;
mod freezes;
pub mod incident;
mod payload;
mod request;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::Api;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::config::NotifyConfig;
use super::metrics::Metrics;
use crate::api::rotation_batch::NotificationRecord;
use crate::api::rotation_batch::state::{ApprovalNeed, BatchState, HeldBy};
use crate::api::{ObjectKey, RotationBatch};
use crate::cluster::batch_writer::{BatchWriteError, BatchWriter, Change, Edit, OnConflict, Writer};
use crate::cluster::stores::Stores;
use crate::credentials::{CredentialReport, Verdict};
use incident::Concern;
pub use payload::{PAYLOAD_VERSION, Payload};

/// A Failed batch is announced only this long after it failed: enabling notifications must not
/// announce last month's failures.
const RECENT: i64 = 3600;
/// How long a burst of store changes may settle before the notifier looks.
const SETTLE: Duration = Duration::from_millis(500);
/// Credential verdicts change with time alone: look again this often.
const RECHECK: Duration = Duration::from_secs(30);

/// The events that send a notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    AwaitingApproval,
    HeldByFailureGuard,
    /// A batch is held because its change windows cannot be read: it waits for a person to mend
    /// the annotation (or to act), however long the old credentials live.
    HeldByUnreadableWindows,
    Failed,
    CredentialsAtRisk,
    CredentialsUnsafe,
    CredentialsResolved,
    /// The next change window opens too late for the old credentials: a person decides now.
    DeadlineBeforeChangeWindow,
    /// A freeze ends too late for the old credentials: a person decides now.
    DeadlineDuringFreeze,
    /// A freeze the engine honours is in force (`capdeck freeze`).
    FreezeStarted,
    /// That freeze ended: lifted (`capdeck unfreeze`) or at its `until`.
    FreezeEnded,
    /// What a failure or a deadline opened is over: the batch succeeded, was undone, or a person
    /// decided (`Due::resolves` says which).
    BatchResolved,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AwaitingApproval => "AwaitingApproval",
            Self::HeldByFailureGuard => "HeldByFailureGuard",
            Self::HeldByUnreadableWindows => "HeldByUnreadableWindows",
            Self::Failed => "Failed",
            Self::CredentialsAtRisk => "CredentialsAtRisk",
            Self::CredentialsUnsafe => "CredentialsUnsafe",
            Self::CredentialsResolved => "CredentialsResolved",
            Self::DeadlineBeforeChangeWindow => "DeadlineBeforeChangeWindow",
            Self::DeadlineDuringFreeze => "DeadlineDuringFreeze",
            Self::FreezeStarted => "FreezeStarted",
            Self::FreezeEnded => "FreezeEnded",
            Self::BatchResolved => "BatchResolved",
        }
    }

    /// The event a record names (`NotificationRecord::event`).
    fn from_str(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|event| event.as_str() == text)
    }

    const ALL: [Self; 12] = [
        Self::AwaitingApproval,
        Self::HeldByFailureGuard,
        Self::HeldByUnreadableWindows,
        Self::Failed,
        Self::CredentialsAtRisk,
        Self::CredentialsUnsafe,
        Self::CredentialsResolved,
        Self::DeadlineBeforeChangeWindow,
        Self::DeadlineDuringFreeze,
        Self::FreezeStarted,
        Self::FreezeEnded,
        Self::BatchResolved,
    ];

    fn of_verdict(verdict: Verdict) -> Option<Self> {
        match verdict {
            Verdict::AtRisk => Some(Self::CredentialsAtRisk),
            Verdict::Unsafe => Some(Self::CredentialsUnsafe),
            _ => None,
        }
    }
}

/// A transition to announce: the batch it is recorded on, and what it is about.
#[derive(Clone, Debug, PartialEq)]
pub struct Due {
    pub namespace: String,
    pub batch: String,
    pub application: String,
    pub event: Event,
    pub key: String,
    /// For a credentials event: the Secret's report.
    pub credentials: Option<CredentialReport>,
    /// For `BatchResolved`: what is over.
    pub resolves: Option<Concern>,
    /// The earliest moment the old credentials concerned may be revoked, when known.
    pub deadline: Option<Timestamp>,
}

/// The transitions not recorded yet. A batch event is keyed once per batch (a failure-guard hold
/// once per retry); a credentials event is due when the Secret's verdict differs from the last
/// one recorded on any batch of its application, and is recorded on the application's open
/// batch, else its newest (an application without a batch has nothing to record on: not sent).
pub fn due(batches: &[Arc<RotationBatch>], credentials: &[CredentialReport], now: Timestamp) -> Vec<Due> {
    let mut out = Vec::new();
    for batch in batches {
        if let Some((event, key)) = batch_event(batch, now)
            && !recorded(batch, &key)
        {
            out.push(Due {
                namespace: batch.namespace().unwrap_or_default(),
                batch: batch.name_any(),
                application: batch.spec.application.clone(),
                event,
                key,
                credentials: None,
                resolves: None,
                deadline: deadline_of(batch, credentials),
            });
        }
        out.extend(resolutions(batch));
    }
    let mut by_app: BTreeMap<ObjectKey, Vec<&Arc<RotationBatch>>> = BTreeMap::new();
    for batch in batches {
        let application = ObjectKey::new(batch.namespace().unwrap_or_default(), &batch.spec.application);
        by_app.entry(application).or_default().push(batch);
    }
    for report in credentials {
        for application in &report.applications {
            let Some(app_batches) = by_app.get(&ObjectKey::new(&report.namespace, application)) else { continue };
            if let Some(due) = credentials_due(app_batches, report, application) {
                out.push(due);
            }
        }
    }
    out
}

fn batch_event(batch: &RotationBatch, now: Timestamp) -> Option<(Event, String)> {
    let status = batch.status.as_ref()?;
    let ready = status.conditions.iter().find(|c| c.type_ == crate::api::common::READY);
    match batch.state() {
        // An escalation is an event of its own (keyed apart, so a batch that waited for an
        // approval and then escalated announces both).
        BatchState::AwaitingApproval { why } => {
            let event = match why {
                ApprovalNeed::WindowTooLate => Event::DeadlineBeforeChangeWindow,
                ApprovalNeed::FreezeTooLong => Event::DeadlineDuringFreeze,
                ApprovalNeed::Policy | ApprovalNeed::StormGuard | ApprovalNeed::CredentialsExpiring => {
                    Event::AwaitingApproval
                }
            };
            Some((event, event.as_str().into()))
        }
        BatchState::Held { by: HeldBy::FailureGuard } => {
            let retry = status.retried_at.as_ref().map_or(0, |t| t.0.as_second());
            Some((Event::HeldByFailureGuard, format!("HeldByFailureGuard@{retry}")))
        }
        // It does not move on by itself: someone who may annotate the application or its namespace
        // can hold its batches this way, and nobody would know.
        BatchState::Held { by: HeldBy::UnreadableWindows } => {
            Some((Event::HeldByUnreadableWindows, Event::HeldByUnreadableWindows.as_str().into()))
        }
        BatchState::Failed { .. } => {
            let since = ready
                .and_then(|c| c.last_transition_time.as_ref())
                .or(status.completed_at.as_ref())
                .map(|t| t.0.as_second());
            since
                .is_some_and(|since| now.as_second() - since <= RECENT)
                .then(|| (Event::Failed, Event::Failed.as_str().into()))
        }
        // Nobody is paged for these: they move on by themselves, or a person just acted.
        BatchState::Collecting { .. }
        | BatchState::Waiting { .. }
        | BatchState::RollingOut
        | BatchState::Cancelling
        | BatchState::Undoing
        | BatchState::Held { by: HeldBy::Person | HeldBy::Unsaid }
        | BatchState::Succeeded
        | BatchState::NoChange
        | BatchState::Cancelled
        | BatchState::Superseded
        | BatchState::Undone
        | BatchState::Unknown { .. } => None,
    }
}

/// The incidents this batch opened that are over now, each announced once: a concern is open
/// while its last record (in the order recorded) opened it, so one opened again after it was
/// resolved is resolved again (`Resolved:CONCERN:N`, N counting its resolutions).
fn resolutions(batch: &RotationBatch) -> Vec<Due> {
    let state = batch.state();
    let over = |concern: Concern| match concern {
        Concern::Failure => matches!(
            state,
            BatchState::Succeeded
                | BatchState::Undone
                | BatchState::Cancelled
                | BatchState::Superseded
                | BatchState::NoChange
        ),
        // Approved, cancelled, or moving on. A hold is no answer: the credentials still die
        // before the window, and a release brings the same question back.
        Concern::Deadline => !matches!(
            state,
            BatchState::AwaitingApproval { .. }
                | BatchState::Held { by: HeldBy::Person | HeldBy::Unsaid | HeldBy::UnreadableWindows }
                | BatchState::Unknown { .. }
        ),
        Concern::Credentials => false,
    };
    [Concern::Failure, Concern::Deadline]
        .into_iter()
        .filter_map(|concern| {
            let history: Vec<bool> = records(batch)
                .iter()
                .filter_map(|record| concern_of(record).filter(|(of, _)| *of == concern).map(|(_, opens)| opens))
                .collect();
            let resolved = history.iter().filter(|opens| !**opens).count();
            (history.last() == Some(&true) && over(concern)).then(|| Due {
                namespace: batch.namespace().unwrap_or_default(),
                batch: batch.name_any(),
                application: batch.spec.application.clone(),
                event: Event::BatchResolved,
                key: format!("Resolved:{}:{}", concern.as_str(), resolved + 1),
                credentials: None,
                resolves: Some(concern),
                deadline: None,
            })
        })
        .collect()
}

/// A batch record's part in an incident: its concern, and whether it opens (else resolves) it.
fn concern_of(record: &NotificationRecord) -> Option<(Concern, bool)> {
    let event = Event::from_str(&record.event)?;
    if let Some(concern) = Concern::opened_by(event) {
        return Some((concern, true));
    }
    let concern = match record.key.split(':').nth(1) {
        Some(word) if event == Event::BatchResolved => {
            [Concern::Failure, Concern::Deadline].into_iter().find(|concern| concern.as_str() == word)?
        }
        _ => return None,
    };
    Some((concern, false))
}

/// The earliest revocation among the old credentials of the batch's Secrets, when known.
fn deadline_of(batch: &RotationBatch, credentials: &[CredentialReport]) -> Option<Timestamp> {
    let namespace = batch.namespace().unwrap_or_default();
    credentials
        .iter()
        .filter(|report| {
            report.namespace == namespace && batch.spec.secrets.iter().any(|secret| secret.name == report.secret)
        })
        .filter_map(CredentialReport::earliest_revocation)
        .min()
}

/// A receiver's metric labels: its name, never its URL.
fn receiver(target: &super::config::NotifyTarget) -> super::metrics::ReceiverLabels {
    super::metrics::ReceiverLabels { receiver: target.name.clone() }
}

fn records(batch: &RotationBatch) -> &[NotificationRecord] {
    batch.status.as_ref().map_or(&[][..], |status| status.notifications.as_slice())
}

fn recorded(batch: &RotationBatch, key: &str) -> bool {
    records(batch).iter().any(|record| record.key == key)
}

/// The last credentials event recorded for `secret` on any of these batches.
fn last_credentials_event<'a>(batches: &[&'a Arc<RotationBatch>], secret: &str) -> Option<&'a NotificationRecord> {
    batches
        .iter()
        .flat_map(|batch| records(batch))
        .filter(|record| record.secret.as_deref() == Some(secret) && record.event.starts_with("Credentials"))
        .max_by_key(|record| record.at.0)
}

fn credentials_due(batches: &[&Arc<RotationBatch>], report: &CredentialReport, application: &str) -> Option<Due> {
    let last = last_credentials_event(batches, &report.secret).map(|record| record.event.as_str());
    let event = match Event::of_verdict(report.verdict) {
        Some(event) if last != Some(event.as_str()) => event,
        Some(_) => return None,
        // Resolved only when known to be fine: `unknown` (ServiceBindings unreadable) is not.
        None if report.verdict == Verdict::Ok && matches!(last, Some("CredentialsAtRisk" | "CredentialsUnsafe")) => {
            Event::CredentialsResolved
        }
        None => return None,
    };
    let target = batches
        .iter()
        .find(|batch| !batch.is_terminal())
        .or_else(|| batches.iter().max_by_key(|batch| batch.metadata.creation_timestamp.as_ref().map(|t| t.0)))?;
    let count = records(target).iter().filter(|record| record.secret.as_deref() == Some(&report.secret)).count();
    Some(Due {
        namespace: report.namespace.clone(),
        batch: target.name_any(),
        application: application.to_string(),
        event,
        key: format!("{}:{}:{}", event.as_str(), report.secret, count + 1),
        credentials: Some(report.clone()),
        resolves: None,
        deadline: report.earliest_revocation(),
    })
}

/// Whether `due` is still due on the batch as it is now (re-read before recording).
fn still_due(batch: &RotationBatch, due: &Due) -> bool {
    if recorded(batch, &due.key) {
        return false;
    }
    match &due.credentials {
        None => true,
        Some(report) => {
            let last = records(batch)
                .iter()
                .filter(|record| record.secret.as_deref() == Some(report.secret.as_str()))
                .max_by_key(|record| record.at.0);
            last.is_none_or(|record| record.event != due.event.as_str())
        }
    }
}

/// Where a notification's record is, to note a receiver that did not accept it.
#[derive(Clone, Debug)]
enum RecordedOn {
    Batch(Box<Due>),
    Freeze { namespace: String, name: String, key: String },
}

/// What the notifier task needs.
pub struct Notifier {
    pub client: kube::Client,
    pub stores: Stores,
    pub config: NotifyConfig,
    pub metrics: Metrics,
    pub identity: String,
    /// How the engine judges credentials (`EngineConfig::judging`): the verdicts it announces.
    pub judging: crate::credentials::Judging,
    pub clock: super::config::Clock,
    /// Where the engine's Lease lives: only there is a cluster-wide freeze honoured (and announced).
    pub lease_namespace: String,
}

impl Notifier {
    /// Until cancelled: while `leader` says this engine leads, record and send what is due.
    pub async fn run(self, mut leader: watch::Receiver<Option<bool>>, cancel: CancellationToken) {
        let sender = match deliver::Sender::new() {
            Ok(sender) => Arc::new(sender),
            Err(error) => {
                tracing::error!(%error, "cannot set up HTTPS for notifications; none will be sent");
                return;
            }
        };
        let mut changes = self.stores.changes();
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = changes.changed() => {
                    // A rollout changes the stores many times a second: look once it settles.
                    tokio::time::sleep(SETTLE).await;
                }
                _ = leader.changed() => {}
                () = tokio::time::sleep(RECHECK) => {}
            }
            changes.borrow_and_update();
            if *leader.borrow_and_update() != Some(true) || !self.stores.is_ready() {
                continue;
            }
            for due in self.due_now() {
                if let Some(payload) = self.record(&due).await {
                    self.send(&sender, due, payload);
                }
            }
            self.announce_freezes(&sender).await;
        }
    }

    fn due_now(&self) -> Vec<Due> {
        let batches = self.stores.batches.state();
        let now = self.clock.now();
        let overview = crate::judging::judge(&self.stores, &self.judging, now);
        due(&batches, &overview.credentials, now)
    }

    /// Record and send what is due about freezes (each on the Freeze's own status).
    async fn announce_freezes(&self, sender: &Arc<deliver::Sender>) {
        let all = self.stores.freezes.state();
        let now = self.clock.now();
        for due in freezes::due(&all, &self.lease_namespace, now) {
            let Some(freeze) =
                all.iter().find(|f| f.name_any() == due.name && f.namespace().as_deref() == Some(&due.namespace))
            else {
                continue;
            };
            if freezes::record(&self.client, freeze, &due, &self.identity, now).await.is_none() {
                continue;
            }
            let payload = Payload::for_freeze(&self.config.cluster, &self.identity, &due, freeze, now);
            let about = format!("freeze {}/{}", due.namespace, due.name);
            let on = RecordedOn::Freeze { namespace: due.namespace, name: due.name, key: due.key };
            self.deliver_everywhere(sender, &payload, about, on);
        }
    }

    /// Send `payload` to every receiver, each in a task of its own (a receiver that hangs holds up
    /// none of the others); one that does not accept it after every retry is counted, warned
    /// about (by name) and noted on the record (`on`: the batch's or the Freeze's).
    fn deliver_everywhere(&self, sender: &Arc<deliver::Sender>, payload: &Payload, about: String, on: RecordedOn) {
        let id = payload.message_id();
        for target in &self.config.targets {
            // An incident service takes only what opens or closes an incident.
            let Some(request) = request::request(payload, target) else { continue };
            let (sender, target, on, about) = (sender.clone(), target.clone(), on.clone(), about.clone());
            let (retry, metrics, client) = (self.config.retry, self.metrics.clone(), self.client.clone());
            let event = payload.event;
            let (signing, id) = (self.config.signing.clone(), id.clone());
            tokio::spawn(async move {
                let signed = signing.as_ref().map(|key| deliver::Signed { key, id: &id });
                let labels = receiver(&target);
                match deliver::deliver(&sender, &request, retry, signed).await {
                    Ok(()) => {
                        metrics.notifications_sent.get_or_create(&labels).inc();
                        metrics.notification_receiver_refusing.get_or_create(&labels).set(0);
                    }
                    Err(failure) => {
                        metrics.notifications_failed.get_or_create(&labels).inc();
                        if failure.refused.is_some() {
                            metrics.notification_receiver_refusing.get_or_create(&labels).set(1);
                        }
                        tracing::warn!(receiver = %target.name, kind = target.format.as_str(), event, about = %about, error = %failure, "a notification could not be delivered");
                        let refused = failure.refused.is_some();
                        match on {
                            RecordedOn::Batch(due) => note_failed(&client, &due, &target.name, refused).await,
                            RecordedOn::Freeze { namespace, name, key } => {
                                freezes::note_failed(&client, &namespace, &name, &key, &target.name, refused).await;
                            }
                        }
                    }
                }
            });
        }
    }

    /// Record the transition on its batch (re-read, still due, resourceVersion precondition);
    /// `None` when it is not to be sent (recorded meanwhile, or the write failed).
    async fn record(&self, due: &Due) -> Option<Payload> {
        let writer = BatchWriter::new(self.client.clone(), Writer::Notifier);
        let edit = |batch: &RotationBatch| {
            if !still_due(batch, due) {
                return Err(());
            }
            let now = self.clock.now();
            let mut notifications = records(batch).to_vec();
            notifications.push(NotificationRecord {
                event: due.event.as_str().into(),
                key: due.key.clone(),
                secret: due.credentials.as_ref().map(|report| report.secret.clone()),
                at: Time(now),
                by: self.identity.clone(),
                failed: Vec::new(),
                refused: Vec::new(),
            });
            let payload = Payload::new(&self.config.cluster, &self.identity, due, batch, now);
            Ok(Edit { changes: vec![Change::MergeStatus(json!({"notifications": notifications}))], answer: payload })
        };
        match writer.write(&due.namespace, &due.batch, None, OnConflict::Retry { attempts: 3 }, edit).await {
            Ok(written) => {
                self.metrics.write("patch", "rotationbatches/status");
                Some(written.answer)
            }
            Err(BatchWriteError::Read(error)) => {
                tracing::warn!(batch = %due.batch, namespace = %due.namespace, error = %crate::cluster::describe_error(&error), "cannot read the batch to record a notification; trying again later");
                None
            }
            Err(BatchWriteError::Write(error)) => {
                tracing::warn!(batch = %due.batch, namespace = %due.namespace, error = %crate::cluster::describe_error(&error), "cannot record a notification; trying again later");
                None
            }
            Err(BatchWriteError::Gone | BatchWriteError::Declined(()) | BatchWriteError::Conflicts(_)) => None,
        }
    }

    /// Send a batch's notification to every receiver (a failure is noted on its record).
    fn send(&self, sender: &Arc<deliver::Sender>, due: Due, payload: Payload) {
        let about = format!("batch {}/{}", due.namespace, due.batch);
        self.deliver_everywhere(sender, &payload, about, RecordedOn::Batch(Box::new(due)));
    }
}

/// Add a receiver that did not accept a notification to its record (for `capdeck doctor`), and
/// to its `refused` list when it refused capdeck itself (401, 403, 404, 410; PagerDuty's 400).
async fn note_failed(client: &kube::Client, due: &Due, name: &str, refused: bool) {
    let writer = BatchWriter::new(client.clone(), Writer::Notifier);
    let edit = |batch: &RotationBatch| {
        let mut notifications = records(batch).to_vec();
        let record = notifications.iter_mut().find(|record| record.key == due.key).ok_or(())?;
        if !add_failure(record, name, refused) {
            return Err(());
        }
        Ok(Edit { changes: vec![Change::MergeStatus(json!({"notifications": notifications}))], answer: () })
    };
    if let Err(BatchWriteError::Write(error)) =
        writer.write(&due.namespace, &due.batch, None, OnConflict::Retry { attempts: 3 }, edit).await
    {
        tracing::warn!(batch = %due.batch, error = %crate::cluster::describe_error(&error), "cannot note a failed notification on its batch");
    }
}

/// Note on `record` that receiver `name` did not accept it (and refused it, when `refused`);
/// false when that was noted already.
fn add_failure(record: &mut NotificationRecord, name: &str, refused: bool) -> bool {
    let noted = record.failed.iter().any(|failed| failed == name);
    let refusal_noted = !refused || record.refused.iter().any(|r| r == name);
    if !noted {
        record.failed.push(name.to_string());
    }
    if !refusal_noted {
        record.refused.push(name.to_string());
    }
    !(noted && refusal_noted)
}

/// The receivers of `--notify` and `--notify-secret`. Errors name the flag or the Secret and the
/// fix, never a URL.
pub async fn targets(
    client: &kube::Client,
    urls: &[String],
    secrets: &[super::config::NotifySecretRef],
) -> Result<Vec<super::config::NotifyTarget>, String> {
    use super::config::NotifyTarget;
    let mut out = Vec::new();
    for (position, url) in urls.iter().enumerate() {
        out.push(NotifyTarget::parse(url).map_err(|why| format!("--notify (number {}) {why}", position + 1))?);
    }
    for reference in secrets {
        let example = match reference.prefix.format {
            Some(super::config::PayloadFormat::PagerDuty) => "ROUTING_KEY",
            Some(super::config::PayloadFormat::Opsgenie) => "API_KEY",
            _ => "https://…",
        };
        let value = secret_value(client, &reference.secret, &format!("--notify-secret {reference}"), example).await?;
        let text =
            std::str::from_utf8(&value).map_err(|_| format!("--notify-secret {reference}: the value is not text"))?;
        out.push(reference.target(text).map_err(|why| format!("--notify-secret {reference}: the value {why}"))?);
    }
    match twice_named(&out) {
        Some(error) => Err(error),
        None => Ok(out),
    }
}

/// Two receivers of one name would share their metrics and records: what to say, if so.
pub fn twice_named(targets: &[super::config::NotifyTarget]) -> Option<String> {
    let mut names = std::collections::BTreeSet::new();
    let twice = targets.iter().find(|target| !names.insert(target.name.as_str()))?;
    Some(format!(
        "two receivers are called {}: give each its own name (--notify NAME@…, --notify-secret NAME@…)",
        twice.name
    ))
}

/// The key of `--notify-signing-secret`, read from its Secret.
pub async fn signing_key(
    client: &kube::Client,
    reference: &super::config::SecretKeyRef,
) -> Result<super::config::SigningKey, String> {
    let value = secret_value(
        client,
        reference,
        &format!("--notify-signing-secret {reference}"),
        "whsec_$(head -c 32 /dev/urandom | base64)",
    )
    .await?;
    super::config::SigningKey::parse(&value)
        .map_err(|why| format!("--notify-signing-secret {reference}: the value {why}"))
}

/// The value of a Secret's key that `given` (the flag and its value, as errors quote it) names; `example` shows
/// what to create it with.
async fn secret_value(
    client: &kube::Client,
    reference: &super::config::SecretKeyRef,
    given: &str,
    example: &str,
) -> Result<Vec<u8>, String> {
    let api: Api<crate::api::lenient::Lenient<k8s_openapi::api::core::v1::Secret>> =
        Api::namespaced(client.clone(), &reference.namespace);
    // A LIST by name: the engine's ClusterRole lists Secrets, it does not GET them.
    let params = kube::api::ListParams::default().fields(&format!("metadata.name={}", reference.name));
    let secret = api
        .list(&params)
        .await
        .map_err(|error| {
            format!(
                "{given}: cannot read the Secret: {} (the engine needs list on secrets in namespace {})",
                crate::cluster::describe_error(&error),
                reference.namespace
            )
        })?
        .items
        .into_iter()
        .next()
        .ok_or_else(|| {
            format!(
                "{given}: Secret {}/{} does not exist (kubectl create secret generic {} -n {} \
                 --from-literal={}={example})",
                reference.namespace, reference.name, reference.name, reference.namespace, reference.key
            )
        })?
        .into_result()
        .map_err(|undecodable| format!("{given}: the Secret {undecodable}"))?;
    let secret = crate::api::StoredSecret::new(secret);
    secret.value(&reference.key).map(<[u8]>::to_vec).ok_or_else(|| {
        let keys: Vec<&str> = secret.entries().map(|(key, _)| key).collect();
        format!("{given}: the Secret has no key {} (its keys: {})", reference.key, keys.join(", "))
    })
}

/// What the notification records of the last while say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecentNotifications {
    pub recorded: usize,
    /// Of those, the ones some receiver did not accept.
    pub failed: usize,
    pub hosts: Vec<String>,
    /// Receivers whose last answer was a refusal (401, 403, 404, 410; PagerDuty's 400): their URL
    /// or key is wrong, revoked or gone.
    pub refused_by: Vec<String>,
    /// Receivers that refused one and accepted a later one.
    pub recovered: Vec<String>,
}

/// The notification records of the last `within` seconds (`capdeck doctor`: batches' and freezes'). A
/// receiver that refused one has recovered when it accepted a later notification every receiver
/// gets (an incident's: PagerDuty and Opsgenie get no other).
pub fn recent<'a>(
    records: impl IntoIterator<Item = &'a NotificationRecord>,
    now: Timestamp,
    within: i64,
) -> RecentNotifications {
    let mut out = RecentNotifications::default();
    let mut hosts = std::collections::BTreeSet::new();
    let mut last_refusal: BTreeMap<&str, i128> = BTreeMap::new();
    let window: Vec<&NotificationRecord> =
        records.into_iter().filter(|record| now.as_second() - record.at.0.as_second() <= within).collect();
    for record in &window {
        out.recorded += 1;
        out.failed += usize::from(!record.failed.is_empty());
        hosts.extend(record.failed.iter().cloned());
        for name in &record.refused {
            let at = last_refusal.entry(name).or_insert(i128::MIN);
            *at = (*at).max(record.at.0.as_nanosecond());
        }
    }
    for (name, refused_at) in last_refusal {
        let accepted_later = window.iter().any(|record| {
            record.at.0.as_nanosecond() > refused_at
                && goes_to_every_receiver(record)
                && !record.failed.iter().any(|failed| failed == name)
        });
        if accepted_later { &mut out.recovered } else { &mut out.refused_by }.push(name.to_string());
    }
    out.hosts = hosts.into_iter().collect();
    out
}

/// Whether every kind of receiver is sent this record's notification (an incident's event).
fn goes_to_every_receiver(record: &NotificationRecord) -> bool {
    Event::from_str(&record.event).is_some_and(|event| {
        Concern::opened_by(event).is_some() || matches!(event, Event::CredentialsResolved | Event::BatchResolved)
    })
}

#[cfg(test)]
mod tests;
