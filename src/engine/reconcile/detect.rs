//! Detecting rotations: which binding Secrets changed since the last pass, and which opted-in
//! applications have Deployments out of date anyway: every application at start-up and on
//! becoming leader, and on every pass those of the namespaces where something changed (level-
//! triggered: a version that became Ready, a batch undone or cancelled, a Deployment edited).
//! The part owns the rotation baseline, the rotations not yet in a batch and what each re-check
//! found left out of date.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;

use super::{AppKey, Context, batch_key};
use crate::api::rotation_batch::{RotatedSecret, UserAction};
use crate::api::{CAPApplication, RotationBatch, StoredSecret};
use crate::cluster::stores::Touched;
use crate::engine::metrics::AppLabels;
use crate::plan::{CapIndex, DeploymentPlan, Rotated, Standing, plan_application, standings};
use crate::vcap::entries_hash;

/// What a binding Secret was when last seen: a new uid or new data is a rotation. Its
/// resourceVersion spares hashing its data again on every pass while it has not changed (the API
/// server gives every write a new one; only restoring etcd from a backup could repeat one with
/// other data, and an engine started or newly leading after the restore re-plans every
/// application from the Secrets' data itself, which finds what detection would have missed).
#[derive(Clone, Debug, PartialEq, Eq)]
struct SeenSecret {
    uid: String,
    hash: String,
    version: String,
}

impl SeenSecret {
    fn of(secret: &StoredSecret) -> Self {
        Self {
            uid: secret.uid().unwrap_or_default().to_owned(),
            hash: entries_hash(secret.entries()),
            version: secret.resource_version().unwrap_or_default().to_owned(),
        }
    }

    /// `secret` is this very object at this very version: nothing to hash.
    fn is(&self, secret: &StoredSecret) -> bool {
        let version = secret.resource_version().unwrap_or_default();
        !version.is_empty() && self.version == version && Some(self.uid.as_str()) == secret.uid()
    }

    /// Another uid or other data (a metadata-only change is none).
    fn rotated_from(&self, previous: &Self) -> bool {
        self.uid != previous.uid || self.hash != previous.hash
    }
}

/// A binding Secret one application references, and the service using it when the application
/// is opted in (an opted-out one keeps the Secret's baseline current).
struct Reference<'a> {
    namespace: &'a str,
    secret: &'a str,
    user: Option<(usize, &'a str)>,
}

/// Rotations of one application not yet in a batch, by Secret name.
pub(super) type Rotations = BTreeMap<String, RotatedSecret>;

pub(super) struct Detection {
    /// Last data hash and uid of every referenced binding Secret (the rotation baseline), by
    /// namespace and name.
    seen: HashMap<String, HashMap<String, SeenSecret>>,
    /// (generation, opted in) of every application, to notice spec changes.
    apps_known: HashMap<AppKey, (i64, bool)>,
    /// Re-check every opted-in application (start-up and on becoming leader).
    recheck_all: bool,
    recheck: BTreeSet<AppKey>,
    /// Applications whose pending rotations the re-check found (not a watched change), and why.
    opened_by: BTreeMap<AppKey, Opener>,
    /// Applications a change's re-check found due, since when: a batch opens once they stay due
    /// for `SETTLE`.
    settling: BTreeMap<AppKey, tokio::time::Instant>,
    /// Opted-in applications found out of date at least once, with the Deployments an ended
    /// batch left out of date (by batch): their gauge is set, and a change of what is left is
    /// logged once.
    out_of_date: BTreeMap<AppKey, BTreeMap<String, Vec<String>>>,
    /// Rotations not yet in a batch, per application.
    pending: BTreeMap<AppKey, Rotations>,
}

impl Default for Detection {
    fn default() -> Self {
        Self {
            seen: HashMap::new(),
            apps_known: HashMap::new(),
            recheck_all: true,
            recheck: BTreeSet::new(),
            opened_by: BTreeMap::new(),
            settling: BTreeMap::new(),
            out_of_date: BTreeMap::new(),
            pending: BTreeMap::new(),
        }
    }
}

impl Detection {
    /// Re-check every opted-in application on the next leading pass (a new leader).
    pub(super) fn recheck_everything(&mut self) {
        self.recheck_all = true;
    }

    /// Compare every binding Secret the applications reference (`secret(namespace, name)`) with
    /// its last known data hash and uid. A change of data, or a Secret deleted and re-created, is
    /// a rotation for every opted-in application that references it; metadata-only changes and
    /// re-lists are not. Returns how many Secrets rotated.
    pub(super) fn detect(
        &mut self,
        applications: &[Arc<CAPApplication>],
        secret: impl Fn(&str, &str) -> Option<Arc<StoredSecret>>,
        now: Timestamp,
    ) -> u64 {
        let mut rotations = 0;
        let references = self.referencing(applications);
        for users in references.chunk_by(|a, b| (a.namespace, a.secret) == (b.namespace, b.secret)) {
            let (namespace, name) = (users[0].namespace, users[0].secret);
            let Some(secret) = secret(namespace, name) else { continue };
            // sap-btp-service-operator's copy of old credentials: its changes are never a
            // rotation of what the application should run on (`capdeck credentials` says so).
            if secret.label(crate::api::service_binding::LABEL_STALE).is_some() {
                continue;
            }
            let previous = self.seen.get(namespace).and_then(|seen| seen.get(name));
            if previous.is_some_and(|seen| seen.is(&secret)) {
                continue;
            }
            let current = SeenSecret::of(&secret);
            let rotated = previous.is_some_and(|previous| current.rotated_from(previous));
            let hash = current.hash.clone();
            self.seen.entry(namespace.to_string()).or_default().insert(name.to_string(), current);
            if !rotated {
                continue;
            }
            rotations += 1;
            tracing::info!(namespace = %namespace, secret = %name, "binding secret rotated");
            let apps = users
                .iter()
                .filter_map(|user| user.user)
                .map(|(app, service)| (AppKey::of(&applications[app].metadata), service.to_string()))
                .collect();
            self.rotated(name, &hash, apps, now);
        }
        rotations
    }

    /// Every binding Secret the applications reference, with the (application, service) of each
    /// opted-in application using it, sorted by Secret: borrowed from the applications, where a
    /// map of owned keys cost every pass 2.3 MB at 5,000 Secrets (docs/PERFORMANCE.md). Notes
    /// applications whose spec changed or who opted in (re-checked like at start-up).
    fn referencing<'a>(&mut self, applications: &'a [Arc<CAPApplication>]) -> Vec<Reference<'a>> {
        let mut references = Vec::new();
        for (index, app) in applications.iter().enumerate() {
            let namespace = app.metadata.namespace.as_deref().unwrap_or_default();
            let known = (app.metadata.generation.unwrap_or(0), app.rollout_opted_in());
            let key = AppKey::of(&app.metadata);
            match self.apps_known.insert(key.clone(), known) {
                Some(previous) if previous != known && known.1 => {
                    self.recheck.insert(key);
                }
                _ => {}
            }
            for service in &app.spec.btp.services {
                let user = known.1.then_some((index, service.name.as_str()));
                references.push(Reference { namespace, secret: service.secret.as_str(), user });
            }
        }
        // Stable: an application's services stay in its spec's order (they are joined into the batch).
        references.sort_by(|a, b| (a.namespace, a.secret).cmp(&(b.namespace, b.secret)));
        references
    }

    /// A rotation of `secret` for each application using it (its services joined by commas).
    fn rotated(&mut self, secret: &str, hash: &str, apps: Vec<(AppKey, String)>, now: Timestamp) {
        let mut services_by_app: BTreeMap<AppKey, Vec<String>> = BTreeMap::new();
        for (app, service) in apps {
            services_by_app.entry(app).or_default().push(service);
        }
        for (app, services) in services_by_app {
            self.pending.entry(app).or_default().insert(
                secret.to_string(),
                RotatedSecret {
                    name: secret.to_string(),
                    service: services.join(","),
                    rotated_at: Time(now),
                    data_hash: hash.to_string(),
                },
            );
        }
    }

    /// The re-checks due: every opted-in application at start-up and on becoming leader, those
    /// whose spec changed, and every application of a namespace where anything its plan reads
    /// changed (`touched`: a binding Secret, a version and its status, a tenant, a Deployment, a
    /// batch). Each opens a batch only for Deployments that really differ and that no batch
    /// speaks for ([`standing`]); it sets the application's `capdeck_deployments_out_of_date`.
    pub(super) fn recheck(&mut self, context: &Context, index: &CapIndex, touched: &Touched, now: Timestamp) {
        if std::mem::take(&mut self.recheck_all) {
            let apps = index.applications().iter().filter(|app| app.rollout_opted_in());
            self.recheck.extend(apps.map(|app| AppKey::of(&app.metadata)));
        }
        // A change re-checks its namespace; what it finds due is acted on once it stays due for
        // `SETTLE` (`settling`), since the stores of other kinds may not show the same moment yet.
        let mut settle: BTreeSet<AppKey> = BTreeSet::new();
        if !touched.is_empty() {
            let apps = index
                .applications()
                .iter()
                .filter(|app| touched.contains(app.metadata.namespace.as_deref().unwrap_or_default()));
            settle.extend(apps.map(|app| AppKey::of(&app.metadata)));
            // Applications gone (or opted out) since: their gauge goes.
            settle.extend(self.out_of_date.keys().filter(|key| touched.contains(&key.namespace)).cloned());
        }
        let instant = tokio::time::Instant::now();
        settle
            .extend(self.settling.iter().filter(|(_, since)| instant >= **since + SETTLE).map(|(key, _)| key.clone()));
        settle.retain(|key| !self.recheck.contains(key));
        if self.recheck.is_empty() && settle.is_empty() {
            return;
        }
        let mut batches: HashMap<AppKey, Vec<Arc<RotationBatch>>> = HashMap::new();
        for batch in context.stores.batches.state() {
            let key = AppKey::new(batch_key(&batch).namespace, &batch.spec.application);
            if self.recheck.contains(&key) || settle.contains(&key) {
                batches.entry(key).or_default().push(batch);
            }
        }
        let explicit = std::mem::take(&mut self.recheck).into_iter().map(|key| (key, false));
        for (key, settles) in explicit.chain(settle.into_iter().map(|key| (key, true))) {
            let batches = batches.remove(&key).unwrap_or_default();
            self.recheck_application(context, &key, index, &batches, (now, settles));
        }
    }

    /// How long until an application found due after a change has stayed so for `SETTLE`.
    pub(super) fn next_settle(&self) -> Option<std::time::Duration> {
        let instant = tokio::time::Instant::now();
        self.settling.values().map(|since| (*since + SETTLE).saturating_duration_since(instant)).min()
    }

    /// Re-check one application (as at start-up) on the next leading pass: its batch was deleted
    /// before it finished, so what it would have rolled may be left behind.
    pub(super) fn recheck_later(&mut self, key: AppKey) {
        self.recheck.insert(key);
    }

    /// Compare what the application's Deployments run with what its binding Secrets hold: a
    /// Deployment out of date that no batch speaks for is a rotation, whatever the engine
    /// remembers (it was down, an observer, a batch was deleted, a version became Ready).
    fn recheck_application(
        &mut self,
        context: &Context,
        key: &AppKey,
        index: &CapIndex,
        batches: &[Arc<RotationBatch>],
        (now, settles): (Timestamp, bool),
    ) {
        let labels = AppLabels { namespace: key.namespace.clone(), application: key.name.clone() };
        let Some(app) = context.application(&key.namespace, &key.name).filter(|app| app.rollout_opted_in()) else {
            self.settling.remove(key);
            if self.out_of_date.remove(key).is_some() {
                context.metrics.deployments_out_of_date.remove(&labels);
            }
            return;
        };
        let plan = plan_application(&app, &Rotated::All, index, &context.stores);
        let mut due: Vec<&DeploymentPlan> = Vec::new();
        let mut left: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut opener = Opener::Recheck;
        for (deployment, standing) in standings(&app, &plan, batches, &context.stores) {
            match standing {
                Standing::Covered(_) => {}
                Standing::LeftBy(batch) => {
                    left.entry(batch.name_any()).or_default().push(deployment.deployment.clone())
                }
                Standing::Due { rolls_forward } => {
                    due.push(deployment);
                    if let (Some(batch), Opener::Recheck) = (rolls_forward, &opener) {
                        opener = Opener::RollForward { batch: batch.name_any(), retry: batch.spec.retry.clone() };
                    }
                }
            }
        }
        let count = due.len() + left.values().map(Vec::len).sum::<usize>();
        // A series from the first time the application is out of date on (then 0 when current
        // again): thousands of current applications cost the engine no series and no entry.
        let known = count > 0 || self.out_of_date.contains_key(key);
        if known {
            let gauge = context.metrics.deployments_out_of_date.get_or_create(&labels);
            gauge.set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        if known && self.out_of_date.insert(key.clone(), left.clone()).as_ref() != Some(&left) {
            for (batch, deployments) in &left {
                tracing::warn!(namespace = %key.namespace, application = %key.name, batch = %batch,
                    "{} stay on old credentials: batch {batch} left them so and nothing rotated since; `capdeck retry {}/{batch} --reason ...` rolls forward",
                    deployments.join(", "), key.namespace);
            }
        }
        if due.is_empty() {
            self.settling.remove(key);
            return;
        }
        if settles {
            let instant = tokio::time::Instant::now();
            let since = *self.settling.entry(key.clone()).or_insert(instant);
            if instant < since + SETTLE {
                return;
            }
        }
        self.settling.remove(key);
        let hash = |secret: &str| {
            let secret = context.stores.binding_secrets.find(Some(key.namespace.as_str()), secret);
            secret.map(|secret| entries_hash(secret.entries())).unwrap_or_default()
        };
        self.found(key, &app, &due, hash, (now, opener));
    }

    /// What a re-check found: the Secrets of the services whose Deployments are out of date,
    /// pending like rotations (a rotation seen already is kept).
    fn found(
        &mut self,
        key: &AppKey,
        app: &CAPApplication,
        restarts: &[&DeploymentPlan],
        hash: impl Fn(&str) -> String,
        (now, opener): (Timestamp, Opener),
    ) {
        let services: BTreeSet<&str> = restarts.iter().flat_map(|d| d.services.iter().map(String::as_str)).collect();
        // A rotation seen this pass opens (or joins) a batch already: the next pass's re-check
        // finds what that batch does not cover, and adds it then.
        if services.is_empty() || self.pending.get(key).is_some_and(|pending| !pending.is_empty()) {
            return;
        }
        tracing::info!(namespace = %key.namespace, application = %key.name, deployments = restarts.len(), "re-check found Deployments out of date");
        self.opened_by.insert(key.clone(), opener);
        for service in app.spec.btp.services.iter().filter(|s| services.contains(s.name.as_str())) {
            self.pending.entry(key.clone()).or_default().entry(service.secret.clone()).or_insert(RotatedSecret {
                name: service.secret.clone(),
                service: service.name.clone(),
                rotated_at: Time(now),
                data_hash: hash(&service.secret),
            });
        }
    }

    /// The applications with rotations not yet in a batch.
    pub(super) fn pending_applications(&self) -> impl Iterator<Item = &AppKey> {
        self.pending.keys()
    }

    /// An observer opens nothing: what it saw is the leader's to handle.
    pub(super) fn forget_pending(&mut self) {
        self.pending.clear();
        self.recheck.clear();
        self.settling.clear();
    }

    pub(super) fn take_pending(&mut self) -> BTreeMap<AppKey, Rotations> {
        std::mem::take(&mut self.pending)
    }

    /// Rotations that could not be put into a batch this pass: tried again on the next.
    pub(super) fn keep_pending(&mut self, key: AppKey, rotations: Rotations) {
        self.pending.insert(key, rotations);
    }

    /// What the re-check (not a watched change) found of the application's rotations, if it
    /// did; asked once, when its batch opens.
    pub(super) fn take_opener(&mut self, key: &AppKey) -> Option<Opener> {
        self.opened_by.remove(key)
    }

    /// The batch could not be opened: the next attempt says the same.
    pub(super) fn keep_opener(&mut self, key: AppKey, opener: Opener) {
        self.opened_by.entry(key).or_insert(opener);
    }
}

/// How long a Deployment a change's re-check finds due must stay due before a batch opens for it:
/// the stores of different kinds follow their watches on their own (after a watch's error or
/// re-list one may show a Deployment rolled to a VCAP Secret the other does not show yet), and
/// a batch opened on such a moment would find nothing to do. The start-up re-check waits for
/// every store to list instead; a rotation a watch saw opens its batch at once.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(10);

/// Why a re-check opens a batch.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Opener {
    /// Deployments out of date that no batch speaks for.
    Recheck,
    /// A person asked to roll an Undone or Cancelled batch forward (`capdeck retry`).
    RollForward { batch: String, retry: Option<UserAction> },
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const NOW: &str = "2026-11-23T12:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().expect("time")
    }

    fn app(name: &str, generation: i64, opted_in: bool, services: &[(&str, &str)]) -> Arc<CAPApplication> {
        let services: Vec<Value> =
            services.iter().map(|(name, secret)| json!({"name": name, "class": "xsuaa", "secret": secret})).collect();
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
                "metadata": {"name": name, "namespace": "ns", "generation": generation},
                "spec": {"btpAppName": name, "providerSubaccountId": "p", "rolloutOnCredentialUpdate": opted_in,
                         "btp": {"services": services}}
            }))
            .expect("app"),
        )
    }

    fn secret(name: &str, uid: &str, password: &str, labels: Value) -> Arc<StoredSecret> {
        Arc::new(StoredSecret::new(
            serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": "ns", "uid": uid, "labels": labels},
                "data": {"password": k8s_openapi::ByteString(password.as_bytes().to_vec())},
            }))
            .expect("secret"),
        ))
    }

    /// One detection over `apps` and Secrets by name.
    fn detect(detection: &mut Detection, apps: &[Arc<CAPApplication>], secrets: &[Arc<StoredSecret>]) -> u64 {
        let lookup = |namespace: &str, name: &str| {
            secrets.iter().find(|s| s.namespace() == Some(namespace) && s.name() == name).cloned()
        };
        detection.detect(apps, lookup, now())
    }

    fn pending(detection: &Detection) -> Vec<(String, String, String)> {
        let rotations = detection.pending.iter().flat_map(|(AppKey { name: app, .. }, rotations)| {
            rotations.values().map(move |r| (app.clone(), r.name.clone(), r.service.clone()))
        });
        rotations.collect()
    }

    /// The API server gives every change a new resourceVersion: a Secret seen at the version
    /// whose data was hashed is not hashed again; at another version it is, and only new data
    /// (or a new uid) is a rotation.
    #[test]
    fn a_secret_at_the_version_already_hashed_is_not_hashed_again() {
        let at = |password: &str, version: &str| {
            Arc::new(StoredSecret::new(
                serde_json::from_value(json!({
                    "metadata": {"name": "shop-uaa", "namespace": "ns", "uid": "u1", "resourceVersion": version},
                    "data": {"password": k8s_openapi::ByteString(password.as_bytes().to_vec())},
                }))
                .expect("secret"),
            ))
        };
        let mut detection = Detection::default();
        let apps = [app("shop", 1, true, &[("uaa", "shop-uaa")])];
        assert_eq!(detect(&mut detection, &apps, &[at("a", "7")]), 0);
        assert_eq!(detect(&mut detection, &apps, &[at("b", "7")]), 0, "version 7 was hashed: not read again");
        assert_eq!(detect(&mut detection, &apps, &[at("a", "8")]), 0, "a new version with the same data");
        assert_eq!(detect(&mut detection, &apps, &[at("b", "9")]), 1, "new data at a new version");
    }

    #[test]
    fn the_first_sight_of_a_secret_is_its_baseline_not_a_rotation() {
        let mut detection = Detection::default();
        let apps = [app("shop", 1, true, &[("uaa", "shop-uaa")])];
        assert_eq!(detect(&mut detection, &apps, &[secret("shop-uaa", "u1", "a", json!({}))]), 0);
        assert!(pending(&detection).is_empty());
        // Seen again unchanged (a re-list): still nothing.
        assert_eq!(detect(&mut detection, &apps, &[secret("shop-uaa", "u1", "a", json!({"x": "y"}))]), 0);
        assert!(pending(&detection).is_empty(), "a metadata-only change is no rotation");
    }

    #[test]
    fn new_data_or_a_recreated_secret_is_a_rotation_for_every_opted_in_application_using_it() {
        let mut detection = Detection::default();
        let apps = [
            app("shop", 1, true, &[("uaa", "shared"), ("uaa-2", "shared")]),
            app("blog", 1, true, &[("auth", "shared")]),
            app("wiki", 1, false, &[("auth", "shared")]),
        ];
        detect(&mut detection, &apps, &[secret("shared", "u1", "a", json!({}))]);
        assert_eq!(detect(&mut detection, &apps, &[secret("shared", "u1", "b", json!({}))]), 1);
        assert_eq!(
            pending(&detection),
            [("blog".into(), "shared".into(), "auth".into()), ("shop".into(), "shared".into(), "uaa,uaa-2".into())],
            "one rotation per opted-in application, its services joined; wiki does not opt in"
        );
        detection.take_pending();
        assert_eq!(detect(&mut detection, &apps, &[secret("shared", "u2", "b", json!({}))]), 1, "same data, new uid");
    }

    /// Many applications on one Secret, each with several services on it: every application's
    /// services stay in its spec's order, whatever the number of references sorted (an unstable
    /// sort kept them only under std's small-slice threshold).
    #[test]
    fn services_keep_their_order_among_many_references() {
        let mut detection = Detection::default();
        // Interleaved with another Secret, so that sorting moves references around.
        let services =
            [("svc-z", "shared"), ("svc-y", "other"), ("svc-a", "shared"), ("svc-x", "other"), ("svc-m", "shared")];
        let apps: Vec<Arc<CAPApplication>> = (0..40).map(|i| app(&format!("app-{i:02}"), 1, true, &services)).collect();
        let other = secret("other", "u2", "a", json!({}));
        detect(&mut detection, &apps, &[secret("shared", "u1", "a", json!({})), other.clone()]);
        assert_eq!(detect(&mut detection, &apps, &[secret("shared", "u1", "b", json!({})), other]), 1);
        let pending = pending(&detection);
        assert_eq!(pending.len(), 40);
        for (app, secret, joined) in pending {
            assert_eq!((secret.as_str(), joined.as_str()), ("shared", "svc-z,svc-a,svc-m"), "{app}");
        }
    }

    #[test]
    fn the_operators_stale_copy_of_old_credentials_never_rotates_anything() {
        let mut detection = Detection::default();
        let apps = [app("shop", 1, true, &[("uaa", "shop-uaa")])];
        let stale = json!({crate::api::service_binding::LABEL_STALE: "true"});
        detect(&mut detection, &apps, &[secret("shop-uaa", "u1", "a", stale.clone())]);
        assert_eq!(detect(&mut detection, &apps, &[secret("shop-uaa", "u1", "b", stale)]), 0);
        assert!(pending(&detection).is_empty());
    }

    #[test]
    fn a_changed_spec_or_a_new_opt_in_is_rechecked_like_a_start_up() {
        let mut detection = Detection { recheck_all: false, ..Detection::default() };
        detect(&mut detection, &[app("shop", 1, false, &[]), app("blog", 1, true, &[])], &[]);
        assert!(detection.recheck.is_empty(), "the first sight is no change");
        detect(&mut detection, &[app("shop", 1, true, &[]), app("blog", 2, true, &[])], &[]);
        let queued: Vec<&str> = detection.recheck.iter().map(|key| key.name.as_str()).collect();
        assert_eq!(queued, ["blog", "shop"]);
        detection.recheck.clear();
        detect(&mut detection, &[app("shop", 2, false, &[])], &[]);
        assert!(detection.recheck.is_empty(), "an application that opted out is not re-checked");
    }

    #[test]
    fn an_observer_forgets_what_it_saw_and_a_pending_rotation_can_be_kept_for_the_next_pass() {
        let mut detection = Detection::default();
        let apps = [app("shop", 1, true, &[("uaa", "shop-uaa")])];
        detect(&mut detection, &apps, &[secret("shop-uaa", "u1", "a", json!({}))]);
        detect(&mut detection, &apps, &[secret("shop-uaa", "u1", "b", json!({}))]);
        let taken = detection.take_pending();
        assert!(detection.pending_applications().next().is_none());
        for (key, rotations) in taken {
            detection.keep_pending(key, rotations);
        }
        assert_eq!(detection.pending_applications().count(), 1);
        detection.forget_pending();
        assert_eq!(detection.pending_applications().count(), 0);
        // The baseline stays: the same data seen again is no rotation.
        assert_eq!(detect(&mut detection, &apps, &[secret("shop-uaa", "u1", "b", json!({}))]), 0);
    }

    #[test]
    fn a_recheck_is_asked_once_whether_it_found_the_rotations() {
        let mut detection = Detection::default();
        let key = AppKey::new("ns", "shop");
        detection.opened_by.insert(key.clone(), Opener::Recheck);
        assert_eq!(detection.take_opener(&key), Some(Opener::Recheck));
        assert_eq!(detection.take_opener(&key), None);
        assert!(detection.recheck_all, "a new engine re-checks everything");
    }
}
