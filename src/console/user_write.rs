//! The console's writes, batch actions and freezes alike: one access model (asked once per kind
//! and namespace, [`AccessMap`]), one command (`Command::Write`), one answer (`Msg::WriteDone`)
//! and one place that carries a write out ([`carry_out`]), where a read-only session and an
//! unnamed user are refused at the last step whatever the keys let through.

use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;

use super::keymap::Action;
use super::strings;
use crate::actions::BatchAction;

/// What a write touches, which decides the permission it needs and what it is aimed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriteKind {
    /// An action on the selected RotationBatch (`patch rotationbatches`).
    Batch,
    /// A freeze of the selected row's application (`create` and `update freezes`: a freeze
    /// creates its object or replaces the one of the same target).
    Freeze,
}

impl WriteKind {
    pub const ALL: [Self; 2] = [Self::Batch, Self::Freeze];

    /// The kind of write a key asks for, if it writes.
    pub fn of(action: Action) -> Option<Self> {
        if action.batch_write() {
            Some(Self::Batch)
        } else if action.freeze_write() {
            Some(Self::Freeze)
        } else {
            None
        }
    }

    /// The resource (in capdeck.dev) and every verb the user must be allowed on it.
    pub fn permission(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Self::Batch => ("rotationbatches", &["patch"]),
            Self::Freeze => ("freezes", &["create", "update"]),
        }
    }

    /// Why the key is off while the API server is asked.
    pub fn checking(self) -> &'static str {
        match self {
            Self::Batch => strings::CHECKING_ACCESS,
            Self::Freeze => strings::CHECKING_FREEZE_ACCESS,
        }
    }

    /// Why the key is off when nothing it could aim at is selected.
    pub fn select_first(self) -> &'static str {
        match self {
            Self::Batch => strings::SELECT_A_BATCH,
            Self::Freeze => strings::SELECT_AN_APPLICATION,
        }
    }

    /// Why the key is off when the API server said no.
    pub fn denied(self, user: &str, namespace: &str) -> String {
        match self {
            Self::Batch => format!("{user} may not patch rotationbatches in namespace {namespace}"),
            Self::Freeze => strings::freeze_denied(user, namespace),
        }
    }
}

/// What the API server said about one kind of write in one namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    Checking,
    Allowed,
    Denied(String),
}

/// Per kind of write and namespace: may this user write there? Asked once, forgotten on a switch
/// of context or scope.
#[derive(Clone, Debug, Default)]
pub struct AccessMap(HashMap<(WriteKind, String), Access>);

impl AccessMap {
    pub fn get(&self, kind: WriteKind, namespace: &str) -> Option<&Access> {
        self.0.get(&(kind, namespace.to_string()))
    }

    /// Whether to ask the API server now: true the first time, when it is marked as being asked.
    pub fn ask(&mut self, kind: WriteKind, namespace: &str) -> bool {
        let key = (kind, namespace.to_string());
        if self.0.contains_key(&key) {
            return false;
        }
        self.0.insert(key, Access::Checking);
        true
    }

    pub fn set(&mut self, kind: WriteKind, namespace: &str, access: Access) {
        self.0.insert((kind, namespace.to_string()), access);
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A write key pressed while its access was still being asked: its dialog opens when the answer
/// arrives, if the same batch (application) is still selected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingWrite {
    pub action: Action,
    pub namespace: String,
    /// The batch, or for a freeze the application.
    pub target: String,
}

/// A write the user confirmed in the dialog, with the reason typed there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserWrite {
    /// An action on the batch `namespace/batch`.
    Batch { namespace: String, batch: String, action: BatchAction, reason: Option<String> },
    /// Freeze the CAPApplication `namespace/application` until `until`.
    Freeze { namespace: String, application: String, until: Timestamp, reason: String },
    /// Lift the freeze of the CAPApplication `namespace/application`.
    Unfreeze { namespace: String, application: String, reason: String },
}

impl UserWrite {
    pub fn kind(&self) -> WriteKind {
        match self {
            Self::Batch { .. } => WriteKind::Batch,
            Self::Freeze { .. } | Self::Unfreeze { .. } => WriteKind::Freeze,
        }
    }

    /// `approve cap-hr/hr-portal-c9dsg`, `freeze cap-hr/hr-portal`: what an answer names.
    pub fn what(&self) -> String {
        match self {
            Self::Batch { namespace, batch, action, .. } => format!("{} {namespace}/{batch}", action.verb()),
            Self::Freeze { namespace, application, .. } => format!("freeze {namespace}/{application}"),
            Self::Unfreeze { namespace, application, .. } => format!("unfreeze {namespace}/{application}"),
        }
    }

    /// The footer while the write is under way: `approving cap-hr/hr-portal-c9dsg…`.
    pub fn progress(&self) -> String {
        match self {
            Self::Batch { namespace, batch, action, .. } => {
                format!("{} {namespace}/{batch}…", strings::verb_progress(*action))
            }
            Self::Freeze { namespace, application, .. } => strings::freeze_progress(false, namespace, application),
            Self::Unfreeze { namespace, application, .. } => strings::freeze_progress(true, namespace, application),
        }
    }
}

/// What the dialog confirmed: a write, or a freeze whose length is turned into its end with the
/// console's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confirmed {
    Write(UserWrite),
    FreezeFor { namespace: String, application: String, lasts: std::time::Duration, reason: String },
}

impl Confirmed {
    /// The write, as of `now`; a length that runs past the calendar is refused.
    pub fn at(self, now: Timestamp) -> Result<UserWrite, String> {
        match self {
            Self::Write(write) => Ok(write),
            Self::FreezeFor { namespace, application, lasts, reason } => match now.checked_add(lasts) {
                Ok(until) => Ok(UserWrite::Freeze { namespace, application, until, reason }),
                Err(_) => Err(strings::freeze_duration_error(&crate::api::go_duration::humanize(lasts))),
            },
        }
    }
}

/// Carry out `write` as `user` (the API server's name for them): what was done, for the footer,
/// or why not. The last line of defence: a read-only session and an unnamed user write nothing,
/// whatever let the write through. The same writes as the CLI's (`crate::actions`,
/// `crate::freezes`): who and why recorded, checked with the resourceVersion.
pub async fn carry_out(
    client: &kube::Client,
    readonly: bool,
    user: Option<&str>,
    write: &UserWrite,
) -> Result<String, String> {
    use crate::freezes::{Target, freeze, unfreeze};
    let what = write.what();
    let by = match user {
        _ if readonly => return Err(format!("{what}: {}", strings::READONLY)),
        Some(user) => user,
        None => return Err(format!("{what}: {}", strings::NO_IDENTITY)),
    };
    let now = Timestamp::now();
    let done = match write {
        UserWrite::Batch { namespace, batch, action, reason } => {
            crate::actions::act(client, namespace, batch, *action, by, reason.as_deref(), now)
                .await
                .map(|report| format!("{}/{}: {}", report.namespace, report.batch, report.summary))
                .map_err(|error| error.to_string())
        }
        UserWrite::Freeze { namespace, application, until, reason } => {
            let target = Target::Application { namespace: namespace.clone(), name: application.clone() };
            freeze(client, &target, by, reason, *until, now)
                .await
                .map(|report| report.frozen_summary(now))
                .map_err(|error| error.to_string())
        }
        UserWrite::Unfreeze { namespace, application, reason } => {
            let target = Target::Application { namespace: namespace.clone(), name: application.clone() };
            unfreeze(client, &target, by, reason, now)
                .await
                .map(|report| report.lifted_summary())
                .map_err(|error| error.to_string())
        }
    };
    done.map_err(|error| format!("{what}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_write() -> Vec<UserWrite> {
        let (namespace, reason) = ("cap-hr".to_string(), "CHG-1".to_string());
        use crate::actions::BatchAction as A;
        let actions = [A::Approve, A::Force { approve: false }, A::Force { approve: true }, A::Hold, A::Release];
        let mut writes: Vec<UserWrite> = actions
            .into_iter()
            .chain([A::Cancel, A::Retry, A::Undo])
            .map(|action| UserWrite::Batch {
                namespace: namespace.clone(),
                batch: "hr-portal-c9dsg".into(),
                action,
                reason: Some(reason.clone()),
            })
            .collect();
        writes.push(UserWrite::Freeze {
            namespace: namespace.clone(),
            application: "hr-portal".into(),
            until: Timestamp::UNIX_EPOCH,
            reason: reason.clone(),
        });
        writes.push(UserWrite::Unfreeze { namespace, application: "hr-portal".into(), reason });
        writes
    }

    /// The last step refuses every write in a read-only session and every write of an unnamed
    /// user, before any request: the client here points at a port nothing listens on, so a
    /// request would answer with a connection error instead.
    #[tokio::test]
    async fn a_read_only_session_or_an_unnamed_user_writes_nothing_whatever_the_write() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = kube::Client::try_from(config).expect("client");
        let writes = every_write();
        assert!(writes.len() >= 9, "every batch action, a freeze and an unfreeze");
        for write in &writes {
            let refused = carry_out(&client, true, Some("alice"), write).await;
            assert_eq!(refused, Err(format!("{}: {}", write.what(), strings::READONLY)), "{write:?}");
            let unnamed = carry_out(&client, false, None, write).await;
            assert_eq!(unnamed, Err(format!("{}: {}", write.what(), strings::NO_IDENTITY)), "{write:?}");
            let tried = carry_out(&client, false, Some("alice"), write).await;
            assert!(tried.as_ref().is_err_and(|error| error.starts_with(&write.what())), "{tried:?}");
            assert!(
                tried.is_err_and(|error| !error.contains(strings::READONLY) && !error.contains(strings::NO_IDENTITY)),
                "a named user in a writable session gets as far as the API server"
            );
        }
    }

    /// Every write key has one kind, and each kind names its own permission and messages.
    #[test]
    fn every_write_key_has_one_kind_with_its_own_permission() {
        for &action in Action::ALL {
            assert_eq!(WriteKind::of(action).is_some(), action.writes(), "{action:?}");
        }
        assert_ne!(WriteKind::Batch.permission(), WriteKind::Freeze.permission());
        assert_ne!(WriteKind::Batch.checking(), WriteKind::Freeze.checking());
        for kind in WriteKind::ALL {
            assert!(kind.denied("bob", "cap-hr").contains("bob") && kind.denied("bob", "cap-hr").contains("cap-hr"));
        }
    }
}
