//! Freezes people write — `capdeck freeze` and `capdeck unfreeze`: a `Freeze` object per target,
//! created or replaced under its resourceVersion, lifted by setting `spec.lifted`; each write
//! names the user from SelfSubjectReview and a reason, under capdeck's field manager for
//! people's actions (`capdeck-console`), so the record shows capdeck wrote it. A conflict (409)
//! reads the freeze again and works the write out again, at most three times.
//!
//! Beside `actions` (what people do to a batch): a freeze is the same kind of decision, made on
//! a namespace, an application or the cluster instead of one batch.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{Api, PostParams};

use crate::api::freeze::{CLUSTER_FREEZE_NAME, NAMESPACE_FREEZE_NAME, application_freeze_name};
use crate::api::lenient::{Lenient, time_text};
use crate::api::rotation_batch::UserAction;
use crate::api::{Freeze, FreezeScope, FreezeSpec};
use crate::cluster::batch_writer::Writer;
use crate::output::human_duration;

/// The field manager of people's writes: the same as their batch actions.
pub const FIELD_MANAGER: &str = Writer::Actions.field_manager();

/// How many times a write is worked out from a fresh read when it meets a conflict.
const ATTEMPTS: u32 = 3;

/// What a freeze covers, and so where its object lives and what it is called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Every application of the namespace: `NS/namespace`.
    Namespace(String),
    /// One CAPApplication: `NS/app-NAME`.
    Application { namespace: String, name: String },
    /// Every namespace the engine serves: `cluster`, in the namespace of the engine's Lease (only
    /// there is it honoured, so RBAC on that namespace decides who may freeze everything).
    Cluster { lease_namespace: String },
}

impl Target {
    /// The namespace the Freeze object lives in.
    pub fn namespace(&self) -> &str {
        match self {
            Self::Namespace(namespace) | Self::Application { namespace, .. } => namespace,
            Self::Cluster { lease_namespace } => lease_namespace,
        }
    }

    /// The Freeze object's name (one per target).
    pub fn object_name(&self) -> String {
        match self {
            Self::Namespace(_) => NAMESPACE_FREEZE_NAME.into(),
            Self::Application { name, .. } => application_freeze_name(name),
            Self::Cluster { .. } => CLUSTER_FREEZE_NAME.into(),
        }
    }

    pub fn scope(&self) -> FreezeScope {
        match self {
            Self::Namespace(_) => FreezeScope::Namespace,
            Self::Application { .. } => FreezeScope::Application,
            Self::Cluster { .. } => FreezeScope::Cluster,
        }
    }

    /// `namespace shop`, `CAPApplication shop/bookshop`, `the cluster` (as `Freeze::target` words it).
    pub fn describe(&self) -> String {
        match self {
            Self::Namespace(namespace) => format!("namespace {namespace}"),
            Self::Application { namespace, name } => format!("CAPApplication {namespace}/{name}"),
            Self::Cluster { .. } => "the cluster".into(),
        }
    }

    /// Whose batches it stops: `batches of namespace shop`.
    pub fn batches(&self) -> String {
        match self {
            Self::Cluster { .. } => "batches of every namespace the engine serves".into(),
            other => format!("batches of {}", other.describe()),
        }
    }

    /// `-n shop`, `--app shop/bookshop`, `-A`: how to name the target on the command line.
    pub fn flags(&self) -> String {
        match self {
            Self::Namespace(namespace) => format!("-n {namespace}"),
            Self::Application { namespace, name } => format!("--app {namespace}/{name}"),
            Self::Cluster { .. } => "-A".into(),
        }
    }
}

/// `--until`: an instant, or a length of time from now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    At(Timestamp),
    In(Duration),
}

const UNTIL_FORMS: &str = "an RFC 3339 time such as 2026-11-28T18:00:00Z (or with an offset, 2026-11-28T19:00:00+01:00) \
                           or a Go duration from now such as 4h, 90m or 2h30m";

/// Parse `--until` (without the clock: a time in the past is refused by [`Until::resolve`]).
pub fn parse_until(text: &str) -> Result<Until, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(format!("--until needs {UNTIL_FORMS}"));
    }
    if let Ok(at) = trimmed.parse::<Timestamp>() {
        return Ok(Until::At(at));
    }
    // A time without its offset: say what is missing rather than "not a duration".
    if trimmed.contains('T') && trimmed.contains(':') {
        return Err(format!(
            "{trimmed:?} is not an RFC 3339 time: it needs its offset, Z for UTC (2026-11-28T18:00:00Z) or +01:00"
        ));
    }
    match crate::api::go_duration::parse_go_duration(trimmed) {
        Ok(length) if length.as_secs() == 0 => {
            Err(format!("{trimmed:?} would end the freeze as it starts: give a length such as 4h, or a time"))
        }
        Ok(length) => Ok(Until::In(length)),
        Err(_) => Err(format!("{trimmed:?} is neither a time nor a duration: write {UNTIL_FORMS}")),
    }
}

impl Until {
    /// When the freeze ends, for a freeze that starts `now` (whole seconds, as stored). A time
    /// that is not after `now` is refused, with an example.
    pub fn resolve(self, now: Timestamp) -> Result<Timestamp, String> {
        let now = whole_second(now);
        let at = match self {
            Self::At(at) => whole_second(at),
            Self::In(length) => {
                let seconds = i64::try_from(length.as_secs()).unwrap_or(i64::MAX);
                now.as_second().checked_add(seconds).and_then(|second| Timestamp::from_second(second).ok()).ok_or_else(
                    || format!("{} from now is beyond the calendar; give a shorter length", length.as_secs()),
                )?
            }
        };
        if at <= now {
            let example = Timestamp::from_second(now.as_second() + 4 * 3600).unwrap_or(now);
            return Err(format!(
                "--until {at} is not in the future (it is {now} now): give a later time, such as {example}, or a \
                 duration from now, such as 4h"
            ));
        }
        Ok(at)
    }
}

fn whole_second(at: Timestamp) -> Timestamp {
    Timestamp::from_second(at.as_second()).unwrap_or(at)
}

/// Where a freeze stands at `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreezeState {
    Active,
    /// Ended by itself at `until`.
    Ended,
    /// Lifted before its end (`capdeck unfreeze`).
    Lifted,
}

impl FreezeState {
    pub fn of(freeze: &Freeze, now: Timestamp) -> Self {
        if freeze.spec.lifted.is_some() {
            Self::Lifted
        } else if freeze.spec.until.0 <= now {
            Self::Ended
        } else {
            Self::Active
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Ended => "ended",
            Self::Lifted => "lifted",
        }
    }
}

/// `in 4h`, `in 2d4h` (kubectl's age format, to the future).
pub fn in_text(at: Timestamp, now: Timestamp) -> String {
    if crate::api::lenient::is_forever(at) {
        return "forever".into();
    }
    format!("in {}", human_duration(at.as_second() - now.as_second()))
}

/// The Freeze capdeck writes for `target`: started `now` by `by`, ending at `until`.
pub fn new_freeze(target: &Target, by: &str, reason: &str, now: Timestamp, until: Timestamp) -> Freeze {
    let mut freeze = Freeze::new(
        &target.object_name(),
        FreezeSpec {
            scope: target.scope(),
            application: match target {
                Target::Application { name, .. } => Some(name.clone()),
                _ => None,
            },
            frozen: user_action(by, now, reason),
            until: Time(until),
            lifted: None,
        },
    );
    freeze.metadata.namespace = Some(target.namespace().into());
    freeze
}

fn user_action(by: &str, now: Timestamp, reason: &str) -> UserAction {
    UserAction { by: by.into(), at: Time(whole_second(now)), reason: Some(reason.trim().to_string()) }
}

/// Why a freeze cannot be lifted at `now`, if it cannot.
pub fn lift_refusal(target: &Target, freeze: &Freeze, now: Timestamp) -> Option<String> {
    let what = target.describe();
    match FreezeState::of(freeze, now) {
        FreezeState::Active => None,
        FreezeState::Lifted => freeze
            .spec
            .lifted
            .as_ref()
            .map(|lifted| format!("the freeze of {what} was already lifted by {} at {}", lifted.by, lifted.at.0)),
        FreezeState::Ended => {
            Some(format!("the freeze of {what} already ended at {} (nothing to lift)", freeze.spec.until.0))
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FreezeError {
    #[error("there is no freeze of {what} (capdeck freezes {list} lists them)")]
    NotFound { what: String, list: String },
    #[error("{0}")]
    Refused(String),
    #[error(
        "the cluster has no Freeze kind yet: install it with the Helm chart, or `capdeck crds --only capdeck | kubectl apply --server-side -f -`"
    )]
    NoKind,
    #[error(
        "you may not {verb} freezes.capdeck.dev in namespace {namespace} (the API server said: {message}); ask \
         for a Role that grants it (docs/WINDOWS.md, Freezes, has one)"
    )]
    Forbidden { verb: &'static str, namespace: String, message: String },
    #[error("namespace {0} does not exist (kubectl get namespaces lists them)")]
    NoNamespace(String),
    #[error("{0}")]
    Api(String),
    #[error("the freeze kept changing under us ({ATTEMPTS} conflicts in a row); try again")]
    Conflicts,
    /// The freeze there does not decode: named, with the field.
    #[error("Freeze {0}: freeze it again (capdeck freeze replaces it) or delete it")]
    Undecodable(crate::api::lenient::Undecodable),
}

/// What a freeze write did.
#[derive(Clone, Debug, PartialEq)]
pub struct FreezeReport {
    pub target: Target,
    pub by: String,
    /// The freeze as written.
    pub freeze: Freeze,
    /// The freeze it replaced or lifted, as it was.
    pub previous: Option<Freeze>,
}

impl FreezeReport {
    /// `froze namespace shop as alice until … (in 4h): batches of namespace shop collect but do
    /// not roll until then`, and what it replaced.
    pub fn frozen_summary(&self, now: Timestamp) -> String {
        let until = self.freeze.spec.until.0;
        let mut text = format!(
            "froze {} as {} until {} ({}): {} collect but do not roll until then",
            self.target.describe(),
            self.by,
            time_text(until),
            in_text(until, now),
            self.target.batches()
        );
        if let Some(previous) = &self.previous {
            text.push_str(&format!("; it replaces {}", previous_text(previous, now)));
        }
        text
    }

    /// `lifted the freeze of namespace shop (by bob, until …) as alice: its batches roll again,
    /// inside their change windows`.
    pub fn lifted_summary(&self) -> String {
        let frozen = &self.freeze.spec;
        format!(
            "lifted the freeze of {} (frozen by {} until {}) as {}: {} roll again, inside their change windows",
            self.target.describe(),
            frozen.frozen.by,
            time_text(frozen.until.0),
            self.by,
            self.target.batches()
        )
    }
}

/// `the active freeze by bob until …` / `the lifted freeze by bob (lifted by carol)`.
fn previous_text(previous: &Freeze, now: Timestamp) -> String {
    let spec = &previous.spec;
    match FreezeState::of(previous, now) {
        FreezeState::Active => format!("the active freeze by {} until {}", spec.frozen.by, time_text(spec.until.0)),
        FreezeState::Ended => format!("the freeze by {} that ended at {}", spec.frozen.by, spec.until.0),
        FreezeState::Lifted => format!(
            "the freeze by {} lifted by {}",
            spec.frozen.by,
            spec.lifted.as_ref().map_or("?", |lifted| lifted.by.as_str())
        ),
    }
}

/// Freeze `target` as `by` until `until`: create its Freeze, or replace the one there (active,
/// ended or lifted) under its resourceVersion.
pub async fn freeze(
    client: &kube::Client,
    target: &Target,
    by: &str,
    reason: &str,
    until: Timestamp,
    now: Timestamp,
) -> Result<FreezeReport, FreezeError> {
    let api: Api<Lenient<Freeze>> = Api::namespaced(client.clone(), target.namespace());
    let name = target.object_name();
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    for _ in 0..ATTEMPTS {
        let existing = read_lenient(&api, target).await?;
        let mut object = new_freeze(target, by, reason, now, until);
        let (verb, written) = match &existing {
            None => ("create", api.create(&params, &Lenient(Ok(object))).await),
            // A freeze that does not decode is replaced whole: that is how a person mends it.
            Some(Err(undecodable)) => {
                object.metadata = ObjectMeta { managed_fields: None, ..(*undecodable.metadata).clone() };
                ("update", api.replace(&name, &params, &Lenient(Ok(object))).await)
            }
            Some(Ok(current)) => {
                object.metadata = writable_metadata(current);
                object.status.clone_from(&current.status);
                ("update", api.replace(&name, &params, &Lenient(Ok(object))).await)
            }
        };
        match written.map(Lenient::into_result) {
            Ok(Ok(freeze)) => {
                let previous = existing.and_then(Result::ok);
                return Ok(FreezeReport { target: target.clone(), by: by.into(), freeze, previous });
            }
            Ok(Err(undecodable)) => return Err(FreezeError::Undecodable(undecodable)),
            // Created by someone else meanwhile (AlreadyExists), or changed since read.
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(write_error(error, verb, target.namespace())),
        }
    }
    Err(FreezeError::Conflicts)
}

/// Lift the freeze of `target` as `by`: set `spec.lifted` under its resourceVersion. A freeze
/// that is absent, already lifted or already ended is refused.
pub async fn unfreeze(
    client: &kube::Client,
    target: &Target,
    by: &str,
    reason: &str,
    now: Timestamp,
) -> Result<FreezeReport, FreezeError> {
    let api: Api<Lenient<Freeze>> = Api::namespaced(client.clone(), target.namespace());
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    for _ in 0..ATTEMPTS {
        let current = read(&api, target).await?.ok_or_else(|| not_found(target))?;
        if let Some(refusal) = lift_refusal(target, &current, now) {
            return Err(FreezeError::Refused(refusal));
        }
        let mut object = current.clone();
        object.metadata = writable_metadata(&current);
        object.spec.lifted = Some(user_action(by, now, reason));
        match api.replace(&target.object_name(), &params, &Lenient(Ok(object))).await.map(Lenient::into_result) {
            Ok(Ok(freeze)) => {
                return Ok(FreezeReport { target: target.clone(), by: by.into(), freeze, previous: Some(current) });
            }
            Ok(Err(undecodable)) => return Err(FreezeError::Undecodable(undecodable)),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(write_error(error, "update", target.namespace())),
        }
    }
    Err(FreezeError::Conflicts)
}

/// The freeze of `target` as it is now (`None`: there is none), for a dry run and the writes.
pub async fn current(client: &kube::Client, target: &Target) -> Result<Option<Freeze>, FreezeError> {
    read(&Api::namespaced(client.clone(), target.namespace()), target).await
}

/// The `freezes -n`/`-A` hint of a missing freeze.
pub fn not_found(target: &Target) -> FreezeError {
    let list = match target {
        Target::Cluster { lease_namespace } => format!("-n {lease_namespace}"),
        other => format!("-n {}", other.namespace()),
    };
    FreezeError::NotFound { what: target.describe(), list }
}

async fn read(api: &Api<Lenient<Freeze>>, target: &Target) -> Result<Option<Freeze>, FreezeError> {
    match read_lenient(api, target).await? {
        Some(Err(undecodable)) => Err(FreezeError::Undecodable(undecodable)),
        found => Ok(found.and_then(Result::ok)),
    }
}

/// The freeze of `target`, decoded on its own.
async fn read_lenient(
    api: &Api<Lenient<Freeze>>,
    target: &Target,
) -> Result<Option<Result<Freeze, crate::api::lenient::Undecodable>>, FreezeError> {
    match api.get(&target.object_name()).await {
        Ok(freeze) => Ok(Some(freeze.into_result())),
        Err(kube::Error::Api(status)) if status.code == 404 && kind_missing(&status.message) => {
            Err(FreezeError::NoKind)
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(write_error(error, "get", target.namespace())),
    }
}

/// The metadata a replace sends: the object's own (labels, annotations, resourceVersion — the
/// precondition) without `managedFields`, which the server keeps.
fn writable_metadata(current: &Freeze) -> ObjectMeta {
    ObjectMeta { managed_fields: None, ..current.metadata.clone() }
}

/// A 404 for the kind itself, not for one object: the API server (and the sandbox) say so in
/// these words when no CRD serves the resource.
pub fn kind_missing(message: &str) -> bool {
    message.starts_with("the server could not find the requested resource")
}

/// A write (or read) the server refused, for people: a 403 from RBAC names the verb and the
/// namespace; one from an admission policy is said as the policy said it.
fn write_error(error: kube::Error, verb: &'static str, namespace: &str) -> FreezeError {
    match &error {
        kube::Error::Api(status) if status.code == 403 && !status.message.contains("denied request") => {
            FreezeError::Forbidden {
                verb,
                namespace: namespace.into(),
                message: crate::cluster::status_message(status),
            }
        }
        kube::Error::Api(status) if status.code == 404 && kind_missing(&status.message) => FreezeError::NoKind,
        kube::Error::Api(status) if status.code == 404 && status.message.starts_with("namespaces ") => {
            FreezeError::NoNamespace(namespace.into())
        }
        _ => FreezeError::Api(crate::cluster::describe_error(&error)),
    }
}

/// A Freeze for the tables and tests: who froze and lifted it, from the object.
pub fn lifted_by(freeze: &Freeze) -> Option<&str> {
    freeze.spec.lifted.as_ref().map(|lifted| lifted.by.as_str())
}

/// `namespace/name` of a freeze.
pub fn key(freeze: &Freeze) -> String {
    format!("{}/{}", freeze.namespace().unwrap_or_default(), freeze.name_any())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    #[test]
    fn until_takes_an_rfc3339_time_or_a_go_duration() {
        let now = at("2026-11-28T14:00:00.250Z");
        let table: [(&str, Result<&str, &str>); 13] = [
            ("2026-11-28T18:00:00Z", Ok("2026-11-28T18:00:00Z")),
            ("2026-11-28T19:00:00+01:00", Ok("2026-11-28T18:00:00Z")),
            (" 4h ", Ok("2026-11-28T18:00:00Z")),
            ("90m", Ok("2026-11-28T15:30:00Z")),
            ("2h30m", Ok("2026-11-28T16:30:00Z")),
            ("1s", Ok("2026-11-28T14:00:01Z")),
            ("0s", Err("\"0s\" would end the freeze as it starts: give a length such as 4h, or a time")),
            ("0", Err("would end the freeze as it starts")),
            ("-1h", Err("\"-1h\" is neither a time nor a duration: write an RFC 3339 time such as")),
            ("4", Err("\"4\" is neither a time nor a duration")),
            ("tomorrow", Err("or a Go duration from now such as 4h, 90m or 2h30m")),
            ("2026-11-28T18:00:00", Err("is not an RFC 3339 time: it needs its offset, Z for UTC")),
            ("", Err("--until needs an RFC 3339 time")),
        ];
        for (given, expected) in table {
            let resolved = parse_until(given).and_then(|until| until.resolve(now));
            match expected {
                Ok(time) => assert_eq!(resolved, Ok(at(time)), "{given:?}"),
                Err(says) => {
                    let error = resolved.expect_err(given);
                    assert!(error.contains(says), "{given:?}: {error}");
                }
            }
        }
    }

    #[test]
    fn until_in_the_past_or_now_is_refused_with_an_example() {
        let now = at("2026-11-28T14:00:00Z");
        for past in ["2026-11-28T14:00:00Z", "2026-11-28T13:59:59Z", "2020-01-01T00:00:00+02:00"] {
            let error = parse_until(past).and_then(|until| until.resolve(now)).expect_err(past);
            assert!(error.contains("is not in the future (it is 2026-11-28T14:00:00Z now)"), "{error}");
            assert!(error.contains("such as 2026-11-28T18:00:00Z, or a duration from now, such as 4h"), "{error}");
        }
    }

    #[test]
    fn each_target_has_its_object_and_words() {
        let table = [
            (Target::Namespace("shop".into()), "shop", "namespace", "namespace shop", "batches of namespace shop"),
            (
                Target::Application { namespace: "shop".into(), name: "bookshop".into() },
                "shop",
                "app-bookshop",
                "CAPApplication shop/bookshop",
                "batches of CAPApplication shop/bookshop",
            ),
            (
                Target::Cluster { lease_namespace: "capdeck-system".into() },
                "capdeck-system",
                "cluster",
                "the cluster",
                "batches of every namespace the engine serves",
            ),
        ];
        let now = at("2026-11-28T14:00:00Z");
        let until = at("2026-11-28T18:00:00Z");
        for (target, namespace, name, words, batches) in table {
            assert_eq!(target.namespace(), namespace);
            assert_eq!(target.object_name(), name);
            assert_eq!(target.describe(), words);
            assert_eq!(target.batches(), batches);
            let freeze = new_freeze(&target, "alice", " release weekend ", now, until);
            assert_eq!(key(&freeze), format!("{namespace}/{name}"));
            assert_eq!(freeze.spec.scope, target.scope());
            assert_eq!(freeze.spec.frozen.reason.as_deref(), Some("release weekend"));
            assert!(freeze.active_at(now) && !freeze.active_at(until));
            // The engine finds the object where it looks: an application's freeze covers it.
            assert!(freeze.covers("capdeck-system", "shop", "bookshop"));
        }
    }

    #[test]
    fn only_an_active_freeze_can_be_lifted() {
        let target = Target::Namespace("shop".into());
        let now = at("2026-11-28T15:00:00Z");
        let active = new_freeze(&target, "bob", "sale", at("2026-11-28T14:00:00Z"), at("2026-11-28T18:00:00Z"));
        assert_eq!(lift_refusal(&target, &active, now), None);
        assert_eq!(FreezeState::of(&active, now), FreezeState::Active);
        let ended = new_freeze(&target, "bob", "sale", at("2026-11-28T10:00:00Z"), at("2026-11-28T12:00:00Z"));
        assert_eq!(
            lift_refusal(&target, &ended, now).as_deref(),
            Some("the freeze of namespace shop already ended at 2026-11-28T12:00:00Z (nothing to lift)")
        );
        let mut lifted = active.clone();
        lifted.spec.lifted = Some(user_action("carol", at("2026-11-28T14:30:00Z"), "done"));
        assert_eq!(FreezeState::of(&lifted, now).as_str(), "lifted");
        assert_eq!(
            lift_refusal(&target, &lifted, now).as_deref(),
            Some("the freeze of namespace shop was already lifted by carol at 2026-11-28T14:30:00Z")
        );
    }

    #[test]
    fn what_a_write_says_it_did() {
        let now = at("2026-11-28T14:00:00Z");
        let target = Target::Namespace("shop".into());
        let old = new_freeze(&target, "bob", "sale", at("2026-11-28T10:00:00Z"), at("2026-11-28T16:00:00Z"));
        let report = FreezeReport {
            target: target.clone(),
            by: "alice".into(),
            freeze: new_freeze(&target, "alice", "release", now, at("2026-11-28T18:00:00Z")),
            previous: Some(old.clone()),
        };
        assert_eq!(
            report.frozen_summary(now),
            "froze namespace shop as alice until 2026-11-28T18:00:00Z (in 4h): batches of namespace shop collect \
             but do not roll until then; it replaces the active freeze by bob until 2026-11-28T16:00:00Z"
        );
        let lifted = FreezeReport { freeze: old, previous: None, ..report };
        assert_eq!(
            lifted.lifted_summary(),
            "lifted the freeze of namespace shop (frozen by bob until 2026-11-28T16:00:00Z) as alice: batches of \
             namespace shop roll again, inside their change windows"
        );
    }

    /// Every freeze write against the in-process API server: (verb, field manager).
    fn writes(sandbox: &crate::sandbox::Sandbox) -> Vec<(String, Option<String>)> {
        let freezes = sandbox.requests().into_iter().filter(|r| r.info.resource == "freezes");
        freezes.map(|r| (r.info.verb, r.field_manager)).collect()
    }

    #[tokio::test]
    async fn a_conflict_reads_again_and_writes_again_at_most_three_times() {
        use crate::sandbox::{RequestMatcher, Sandbox, SandboxConfig};
        let sandbox = Sandbox::new(SandboxConfig::default());
        sandbox.install_crds();
        let client = sandbox.client();
        let target = Target::Namespace("default".into());
        let (now, until) = (at("2026-11-28T14:00:00Z"), at("2026-11-28T18:00:00Z"));
        let created = freeze(&client, &target, "alice", "sale", until, now).await.expect("created");
        assert_eq!(created.previous, None);
        let manager = || Some(FIELD_MANAGER.to_string());
        assert_eq!(writes(&sandbox), [("get".into(), None), ("create".into(), manager())]);

        // Someone else writes between our read and our write, twice: the third attempt lands.
        sandbox.clear_requests();
        sandbox.fail_next(2, RequestMatcher::on("update", "freezes"), 409);
        let replaced = freeze(&client, &target, "bob", "longer", at("2026-11-28T20:00:00Z"), now).await;
        let replaced = replaced.expect("replaced on the third attempt");
        assert_eq!(replaced.previous.map(|p| p.spec.frozen.by).as_deref(), Some("alice"));
        assert_eq!(replaced.freeze.spec.frozen.by, "bob");
        let read_and_update = [("get".to_string(), None), ("update".to_string(), manager())];
        let expected: Vec<(String, Option<String>)> = (0..3).flat_map(|_| read_and_update.clone()).collect();
        assert_eq!(writes(&sandbox), expected, "each attempt reads again");

        sandbox.fail_next(3, RequestMatcher::on("update", "freezes"), 409);
        let gave_up = freeze(&client, &target, "bob", "again", until, now).await;
        assert!(matches!(gave_up, Err(FreezeError::Conflicts)), "{gave_up:?}");

        // Lifting: a conflict, then the re-read freeze is still active and is lifted.
        sandbox.fail_next(1, RequestMatcher::on("update", "freezes"), 409);
        let lifted = unfreeze(&client, &target, "carol", "over", at("2026-11-28T15:00:00Z")).await.expect("lifted");
        assert_eq!(lifted.freeze.spec.frozen.by, "bob", "who froze stays");
        assert_eq!(lifted_by(&lifted.freeze), Some("carol"));
        let twice = unfreeze(&client, &target, "carol", "over", at("2026-11-28T15:01:00Z")).await;
        assert!(matches!(twice, Err(FreezeError::Refused(ref why)) if why.contains("already lifted by carol")));
        let absent = unfreeze(&client, &Target::Namespace("kube-system".into()), "carol", "x", now).await;
        assert_eq!(
            absent.map(|_| ()).map_err(|error| error.to_string()),
            Err("there is no freeze of namespace kube-system (capdeck freezes -n kube-system lists them)".into())
        );
    }

    #[test]
    fn a_refused_write_names_the_permission_or_the_missing_kind() {
        let status = |code: u16, message: &str| {
            kube::Error::Api(kube::core::Status::failure(message, "Reason").with_code(code).boxed())
        };
        let rbac = write_error(
            status(403, r#"freezes.capdeck.dev is forbidden: User "bob" cannot create resource "freezes""#),
            "create",
            "shop",
        );
        assert!(
            rbac.to_string().starts_with("you may not create freezes.capdeck.dev in namespace shop (the API server"),
            "{rbac}"
        );
        let policy = write_error(
            status(403, "ValidatingAdmissionPolicy 'capdeck-freeze-attribution' denied request: spec.frozen.by"),
            "create",
            "shop",
        );
        assert!(matches!(policy, FreezeError::Api(ref text) if text.contains("spec.frozen.by")), "{policy}");
        let kind = write_error(status(404, "the server could not find the requested resource"), "create", "shop");
        assert!(kind.to_string().contains("capdeck crds --only capdeck | kubectl apply --server-side -f -"), "{kind}");
        let namespace = write_error(status(404, r#"namespaces "nope" not found"#), "create", "nope");
        assert_eq!(namespace.to_string(), "namespace nope does not exist (kubectl get namespaces lists them)");
    }
}
