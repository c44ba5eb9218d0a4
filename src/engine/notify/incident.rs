//! Which events open an incident, which close one, and under which key: what PagerDuty and
//! Opsgenie are sent (and what the generic JSON carries as `incident`). One key per batch and
//! concern, or per Secret, so a retry or another leader never opens a second incident.
//! docs/NOTIFICATIONS.md has the table.

use serde::Serialize;

use super::Event;

/// How urgent an event is (PagerDuty's four severities; Opsgenie's priorities follow them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn of(event: Event) -> Self {
        match event {
            Event::CredentialsUnsafe | Event::DeadlineBeforeChangeWindow | Event::DeadlineDuringFreeze => {
                Self::Critical
            }
            Event::Failed | Event::HeldByFailureGuard => Self::Error,
            Event::CredentialsAtRisk | Event::HeldByUnreadableWindows => Self::Warning,
            Event::AwaitingApproval
            | Event::CredentialsResolved
            | Event::BatchResolved
            | Event::FreezeStarted
            | Event::FreezeEnded => Self::Info,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Critical => "critical",
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Info => "info",
        }
    }

    /// Opsgenie's priority: P1 (critical) to P4 (info).
    pub fn opsgenie_priority(self) -> &'static str {
        match self {
            Self::Critical => "P1",
            Self::Error => "P2",
            Self::Warning => "P3",
            Self::Info => "P4",
        }
    }
}

/// What an incident is about: one per batch and concern, or one per Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Concern {
    /// The batch failed or the failure guard halted it; over when it ends otherwise (succeeded,
    /// undone, cancelled, superseded).
    Failure,
    /// The old credentials die before the batch's window or freeze ends; over once a person has
    /// decided (approved, held, cancelled) or the batch went on.
    Deadline,
    /// A consumed Secret's credentials are at risk or unsafe; over when they are ok again.
    Credentials,
}

impl Concern {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Failure => "failure",
            Self::Deadline => "deadline",
            Self::Credentials => "credentials",
        }
    }

    /// The concern an event opens an incident for, if any.
    pub fn opened_by(event: Event) -> Option<Self> {
        match event {
            Event::Failed | Event::HeldByFailureGuard => Some(Self::Failure),
            Event::DeadlineBeforeChangeWindow | Event::DeadlineDuringFreeze => Some(Self::Deadline),
            Event::CredentialsAtRisk | Event::CredentialsUnsafe => Some(Self::Credentials),
            // A hold until someone mends an annotation is said in chat, not paged: the credentials'
            // own events page when waiting puts them at risk.
            Event::AwaitingApproval
            | Event::HeldByUnreadableWindows
            | Event::CredentialsResolved
            | Event::BatchResolved
            | Event::FreezeStarted
            | Event::FreezeEnded => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Trigger,
    Resolve,
}

/// An event's part in an incident's life: open (or add to) the incident of `key`, or close it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Incident {
    pub action: Action,
    pub key: String,
}

/// The longest key PagerDuty takes (`dedup_key`); Opsgenie's alias takes 512.
const MAX_KEY: usize = 255;

impl Incident {
    /// The incident `event` opens or closes (`resolves`: what a `BatchResolved` closes), keyed
    /// by cluster, namespace and the batch or the Secret.
    pub fn of(
        event: Event,
        resolves: Option<Concern>,
        cluster: &str,
        namespace: &str,
        batch: &str,
        secret: Option<&str>,
    ) -> Option<Self> {
        let (action, concern) = match (event, Concern::opened_by(event)) {
            (_, Some(concern)) => (Action::Trigger, concern),
            (Event::CredentialsResolved, None) => (Action::Resolve, Concern::Credentials),
            (Event::BatchResolved, None) => (Action::Resolve, resolves?),
            _ => return None,
        };
        let key = match concern {
            Concern::Credentials => format!("capdeck:{cluster}:{namespace}:secret:{}", secret?),
            Concern::Failure | Concern::Deadline => {
                format!("capdeck:{cluster}:{namespace}:batch:{batch}:{}", concern.as_str())
            }
        };
        Some(Self { action, key: bounded(key) })
    }
}

/// `key`, or when longer than a service takes, `capdeck:sha256:` and its hash (the same for
/// the same key, so trigger and resolve still meet).
fn bounded(key: String) -> String {
    if key.len() <= MAX_KEY {
        return key;
    }
    use sha2::Digest as _;
    format!("capdeck:sha256:{}", hex::encode(sha2::Sha256::digest(key.as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event: its severity, and whether it opens, closes or leaves alone an incident, and
    /// the key trigger and resolve share.
    #[test]
    fn every_event_has_its_place_in_an_incident() {
        let of = |event, resolves| Incident::of(event, resolves, "prod", "shop", "b1", Some("uaa"));
        let failure = "capdeck:prod:shop:batch:b1:failure";
        let deadline = "capdeck:prod:shop:batch:b1:deadline";
        let secret = "capdeck:prod:shop:secret:uaa";
        let table = [
            (Event::Failed, None, Severity::Error, Some((Action::Trigger, failure))),
            (Event::HeldByFailureGuard, None, Severity::Error, Some((Action::Trigger, failure))),
            (Event::BatchResolved, Some(Concern::Failure), Severity::Info, Some((Action::Resolve, failure))),
            (Event::DeadlineBeforeChangeWindow, None, Severity::Critical, Some((Action::Trigger, deadline))),
            (Event::DeadlineDuringFreeze, None, Severity::Critical, Some((Action::Trigger, deadline))),
            (Event::BatchResolved, Some(Concern::Deadline), Severity::Info, Some((Action::Resolve, deadline))),
            (Event::CredentialsAtRisk, None, Severity::Warning, Some((Action::Trigger, secret))),
            (Event::CredentialsUnsafe, None, Severity::Critical, Some((Action::Trigger, secret))),
            (Event::CredentialsResolved, None, Severity::Info, Some((Action::Resolve, secret))),
            (Event::AwaitingApproval, None, Severity::Info, None),
            (Event::FreezeStarted, None, Severity::Info, None),
            (Event::FreezeEnded, None, Severity::Info, None),
            (Event::BatchResolved, None, Severity::Info, None),
        ];
        for (event, resolves, severity, incident) in table {
            assert_eq!(Severity::of(event), severity, "{event:?}");
            let got = of(event, resolves);
            assert_eq!(got.as_ref().map(|i| (i.action, i.key.as_str())), incident, "{event:?} resolving {resolves:?}");
        }
        assert_eq!(Incident::of(Event::CredentialsUnsafe, None, "prod", "shop", "b1", None), None, "no Secret");
    }

    /// A key past PagerDuty's 255 bytes is hashed, the same way for trigger and resolve.
    #[test]
    fn a_long_key_is_hashed_alike_for_trigger_and_resolve() {
        let batch = "b".repeat(253);
        let open = Incident::of(Event::Failed, None, "prod", "shop", &batch, None).expect("opens");
        let close =
            Incident::of(Event::BatchResolved, Some(Concern::Failure), "prod", "shop", &batch, None).expect("closes");
        assert!(open.key.len() <= MAX_KEY && open.key.starts_with("capdeck:sha256:"), "{}", open.key);
        assert_eq!(open.key, close.key);
        let other = Incident::of(Event::Failed, None, "prod", "shop", &"c".repeat(253), None).expect("opens");
        assert_ne!(open.key, other.key);
    }
}
