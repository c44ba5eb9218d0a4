//! Every write the engine makes, in one place: RotationBatches (create, spec, status: through
//! `cluster::batch_writer`, a conflict handed back for the next pass), VCAP
//! Secrets (create, delete), Deployments (point at a new VCAP Secret) and Events. Each is
//! counted in `capdeck_api_writes_total`.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{EnvFromSource, Secret, SecretEnvSource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::metrics::Metrics;
use crate::api::lenient::Lenient;
use crate::api::rotation_batch::{Approval, RotatedSecret, UserAction};
use crate::api::{
    ANNOTATION_ROLLED_AT, CAPApplication, CAPApplicationVersion, DeploymentView, LABEL_APPLICATION,
    LABEL_SECRET_OWNER_HASH, RotationBatch, RotationBatchSpec, RotationBatchStatus, VCAP_SERVICES_KEY,
};
use crate::cluster::batch_writer::{BatchWriter, Change, Writer};
use crate::vcap::{VcapPayload, secret_owner_hash};

pub const FIELD_MANAGER: &str = Writer::Engine.field_manager();
/// Label on VCAP Secrets capdeck creates: the batch that created it.
pub const LABEL_BATCH: &str = crate::plan::LABEL_BATCH;
/// Annotation on VCAP Secrets capdeck creates: the Secret the Deployment used before.
pub const ANNOTATION_PREVIOUS_SECRET: &str = "capdeck.dev/previous-secret";
/// Annotation on Deployments: the batch that last rolled them.
pub use crate::api::ANNOTATION_ROLLED_BY;

/// Pod template annotation a retry sets: a new ReplicaSet, like `kubectl rollout restart`.
pub const ANNOTATION_RETRIED_AT: &str = "capdeck.dev/retried-at";
/// Annotation on Deployments an undo pointed back: the batch undone.
pub const ANNOTATION_UNDONE_BY: &str = "capdeck.dev/undone-by";

/// What restarting or pointing back a Deployment the batch rolled did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redone {
    /// Written (or found written by an earlier pass); the generation to follow.
    Done { generation: i64 },
    /// The Deployment no longer uses the batch's VCAP Secret (someone else changed it): left alone.
    NotOurs { uses: Option<String> },
    /// The Deployment does not exist.
    Gone,
}

/// What pointing a Deployment at a VCAP Secret did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pointed {
    /// Updated; the generation the update produced.
    Updated { generation: i64, previous: Option<String> },
    /// This batch had already rolled it (e.g. before a restart): nothing written.
    AlreadyRolled { generation: i64, secret: Option<String> },
    /// The Deployment does not exist.
    Gone,
    /// The live Deployment is not the version's (its controller ownerReference): nothing written.
    NotOwned { why: String },
}

pub struct Writes {
    client: kube::Client,
    /// The client-side limit every write waits for (`None`: no limit).
    rate: Option<super::write_rate::WriteRate>,
    /// Cancelled when the engine stops: a write waiting for the rate gives up.
    stopping: tokio_util::sync::CancellationToken,
    /// The VCAP Secrets (labelled with the owner hash): which `envFrom` entries are capdeck's.
    vcap_secrets: crate::cluster::stores::Store<crate::api::StoredSecret>,
    /// Every RotationBatch write (`cluster::batch_writer`), as the engine's field manager.
    batches: BatchWriter,
    metrics: Metrics,
    recorder: Recorder,
    /// Failed writes (Events aside) so far: a pass that adds to it is retried with backoff.
    failures: std::sync::atomic::AtomicU64,
    /// The last write's error, cleared by the next successful write.
    last_failure: tokio::sync::watch::Sender<Option<String>>,
    /// Batches written, by (namespace, name): the resourceVersion the stores must show before
    /// a pass reads them again.
    awaited: std::sync::Mutex<HashMap<crate::api::ObjectKey, String>>,
}

impl Writes {
    /// The client, for the few reads the engine makes outside its stores (a rolling
    /// Deployment's new Pods).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }
}

fn owner_reference<K: Resource<DynamicType = ()>>(object: &K, controller: bool) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: object.meta().name.clone()?,
        uid: object.meta().uid.clone()?,
        controller: Some(controller),
        block_owner_deletion: Some(controller),
    })
}

/// Whether a Secret a container reads is a VCAP Secret (labelled with the owner hash).
type IsVcap<'a> = &'a dyn Fn(&str) -> bool;

/// The VCAP Secret the Deployment's containers read now.
fn referenced_secret(deployment: &Deployment, is_vcap: IsVcap<'_>) -> Option<String> {
    crate::plan::referenced_vcap_secret(&DeploymentView::from(deployment), is_vcap).ok().flatten()
}

/// A Deployment capdeck left on `secret` and nobody changed since; else why it is left alone.
fn still_ours(deployment: &Deployment, secret: &str, is_vcap: IsVcap<'_>) -> Result<(), Redone> {
    let uses = referenced_secret(deployment, is_vcap);
    if uses.as_deref() == Some(secret) { Ok(()) } else { Err(Redone::NotOurs { uses }) }
}

/// Every container and initContainer reads its VCAP_SERVICES from `secret` (optional): its
/// VCAP `envFrom` entries (`is_vcap`) become this one entry, in the place of the first; a
/// container without one gets it added last. Every other entry (a team's ConfigMap or Secret,
/// whatever its name) is kept as it is, where it is. (The Go CAP Operator replaces them all.)
pub fn point_containers(deployment: &mut Deployment, secret: &str, is_vcap: IsVcap<'_>) {
    let Some(pod) = deployment.spec.as_mut().and_then(|spec| spec.template.spec.as_mut()) else { return };
    let entry = EnvFromSource {
        secret_ref: Some(SecretEnvSource { name: secret.to_string(), optional: Some(true) }),
        ..EnvFromSource::default()
    };
    let is_vcap = |source: &EnvFromSource| source.secret_ref.as_ref().is_some_and(|secret| is_vcap(&secret.name));
    for container in pod.containers.iter_mut().chain(pod.init_containers.iter_mut().flatten()) {
        let sources = container.env_from.get_or_insert_with(Vec::new);
        match sources.iter().position(is_vcap) {
            Some(first) => {
                sources[first] = entry.clone();
                let mut index = 0;
                sources.retain(|source| {
                    index += 1;
                    index - 1 == first || !is_vcap(source)
                });
            }
            None => sources.push(entry.clone()),
        }
    }
}

impl Writes {
    pub fn new(
        client: kube::Client,
        vcap_secrets: crate::cluster::stores::Store<crate::api::StoredSecret>,
        metrics: Metrics,
        identity: &str,
        last_failure: tokio::sync::watch::Sender<Option<String>>,
        (qps, burst): (f64, u32),
        stopping: tokio_util::sync::CancellationToken,
    ) -> Self {
        let recorder =
            Recorder::new(client.clone(), Reporter { controller: "capdeck".into(), instance: Some(identity.into()) });
        let batches = BatchWriter::new(client.clone(), Writer::Engine);
        let failures = std::sync::atomic::AtomicU64::new(0);
        let rate = super::write_rate::WriteRate::new(qps, burst);
        Self {
            client,
            rate,
            stopping,
            vcap_secrets,
            batches,
            metrics,
            recorder,
            failures,
            last_failure,
            awaited: Default::default(),
        }
    }

    /// Wait for the write rate to allow one more write; the wait is counted
    /// (`capdeck_write_throttled_seconds_total`). An engine that is stopping writes nothing more:
    /// the wait ends, and so does the pass (each of its writes fails at once).
    async fn paced(&self) -> Result<(), kube::Error> {
        let stopped = || kube::Error::Service("the engine is stopping; this write was not made".into());
        if self.stopping.is_cancelled() {
            return Err(stopped());
        }
        let Some(rate) = &self.rate else { return Ok(()) };
        tokio::select! {
            biased;
            () = self.stopping.cancelled() => Err(stopped()),
            waited = rate.acquire() => {
                if !waited.is_zero() {
                    self.metrics.write_throttled_seconds.inc_by(waited.as_secs_f64());
                }
                Ok(())
            }
        }
    }

    /// Whether `name` in `namespace` is a VCAP Secret (the stores show it labelled), or one of
    /// `also` (Secrets this engine made that the stores may not show yet).
    fn vcap_in<'a>(&'a self, namespace: &'a str, also: &'a [&'a str]) -> impl Fn(&str) -> bool + 'a {
        move |name: &str| also.contains(&name) || self.vcap_secrets.find(Some(namespace), name).is_some()
    }

    /// How many writes have failed so far (Events aside).
    pub fn failures(&self) -> u64 {
        self.failures.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The batches written since the last call, with the versions written.
    pub fn take_awaited(&self) -> HashMap<crate::api::ObjectKey, String> {
        std::mem::take(&mut *self.awaited.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// A batch written: the next pass waits until the stores show it.
    fn await_version(&self, written: &RotationBatch) {
        let key = crate::api::ObjectKey::of(&written.metadata);
        let version = written.resource_version().unwrap_or_default();
        self.awaited.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key, version);
    }

    /// Every request's outcome: a failure is counted (`capdeck_api_errors_total`) and shown.
    fn counted<T>(&self, (verb, resource): (&str, &str), result: Result<T, kube::Error>) -> Result<T, kube::Error> {
        match &result {
            Err(error) => {
                self.metrics.api_error(verb, resource, error);
                self.failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // Whoever shows the engine (the console's header) learns of it, not only the log.
                let text = crate::cluster::describe_error(error);
                self.last_failure.send_if_modified(|last| {
                    let changed = last.as_deref() != Some(text.as_str());
                    *last = Some(text.clone());
                    changed
                });
            }
            Ok(_) => {
                self.last_failure.send_if_modified(|last| last.take().is_some());
            }
        }
        result
    }

    pub async fn create_batch(
        &self,
        app: &CAPApplication,
        secrets: Vec<RotatedSecret>,
        window_end: Timestamp,
        approval_required: bool,
        (hold, force, rolls_forward): (Option<UserAction>, Option<UserAction>, Option<String>),
    ) -> Result<RotationBatch, kube::Error> {
        let namespace = app.namespace().unwrap_or_default();
        let mut batch = RotationBatch::new(
            "",
            RotationBatchSpec {
                application: app.name_any(),
                secrets,
                window_end: Time(window_end),
                approval: Some(Approval { required: approval_required, ..Approval::default() }),
                force,
                hold,
                cancel: None,
                retry: None,
                undo: None,
                released: None,
                rolls_forward,
            },
        );
        batch.metadata.name = None;
        batch.metadata.generate_name = Some(format!("{}-", app.name_any()));
        batch.metadata.namespace = Some(namespace.clone());
        batch.metadata.labels = Some([(LABEL_APPLICATION.to_string(), app.name_any())].into());
        batch.metadata.owner_references = owner_reference(app, false).map(|reference| vec![reference]);
        self.paced().await?;
        let created = self.counted(("create", "rotationbatches"), self.batches.create(&batch).await)?;
        self.metrics.write("create", "rotationbatches");
        self.await_version(&created);
        Ok(created)
    }

    /// Replace the spec (joining secrets, approval requirement) with a resourceVersion precondition.
    pub async fn replace_batch(&self, batch: &RotationBatch) -> Result<RotationBatch, kube::Error> {
        let change = Change::Replace(Box::new(batch.clone()));
        self.paced().await?;
        let replaced = self.counted(("update", "rotationbatches"), self.batches.write_as_read(batch, change).await)?;
        self.metrics.write("update", "rotationbatches");
        self.await_version(&replaced);
        Ok(replaced)
    }

    /// Write the status, conditioned on the resourceVersion we read (two engines cannot clobber
    /// each other's status).
    pub async fn write_status(
        &self,
        batch: &RotationBatch,
        status: &RotationBatchStatus,
    ) -> Result<RotationBatch, kube::Error> {
        self.paced().await?;
        let written = self.counted(
            ("patch", "rotationbatches/status"),
            self.batches.write_as_read(batch, Change::MergeStatus(status_patch(batch, status))).await,
        )?;
        self.metrics.write("patch", "rotationbatches/status");
        self.await_version(&written);
        Ok(written)
    }

    /// Create the Deployment's new VCAP Secret: `generateName: <deployment>-`, the upstream
    /// owner-hash label, a controller reference to the version, one key `VCAP_SERVICES`.
    pub async fn create_vcap_secret(
        &self,
        version: &CAPApplicationVersion,
        deployment: &str,
        batch: &str,
        previous: Option<&str>,
        payload: &VcapPayload,
    ) -> Result<Secret, kube::Error> {
        let namespace = version.namespace().unwrap_or_default();
        let mut labels = BTreeMap::new();
        labels.insert(
            LABEL_SECRET_OWNER_HASH.to_string(),
            secret_owner_hash(&namespace, &version.name_any(), deployment),
        );
        labels.insert(LABEL_BATCH.to_string(), batch.to_string());
        let annotations =
            previous.map(|previous| [(ANNOTATION_PREVIOUS_SECRET.to_string(), previous.to_string())].into());
        let secret = Secret {
            metadata: kube::core::ObjectMeta {
                generate_name: Some(format!("{deployment}-")),
                namespace: Some(namespace.clone()),
                labels: Some(labels),
                annotations,
                owner_references: owner_reference(version, true).map(|reference| vec![reference]),
                ..Default::default()
            },
            type_: Some("Opaque".into()),
            data: Some([(VCAP_SERVICES_KEY.to_string(), k8s_openapi::ByteString(payload.as_bytes().to_vec()))].into()),
            ..Secret::default()
        };
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        self.paced().await?;
        let created = self.counted(
            ("create", "secrets"),
            api.create(&PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() }, &secret)
                .await,
        )?;
        self.metrics.write("create", "secrets");
        Ok(created)
    }

    /// Point every container of the Deployment at `secret`, read live and written with its
    /// resourceVersion; a 409 re-reads and retries. A Deployment this batch already rolled is
    /// left alone, so each Deployment is rolled at most once per batch even across restarts or
    /// two engines.
    pub async fn point_deployment(
        &self,
        (namespace, name): (&str, &str),
        (version, version_uid): (&str, Option<&str>),
        secret: &str,
        batch: &str,
        now: Timestamp,
    ) -> Result<Pointed, kube::Error> {
        let is_vcap = self.vcap_in(namespace, &[]);
        self.edit_deployment(
            namespace,
            name,
            |deployment| {
                // Checked again on what is written, not only on what the plan saw.
                if let Some(why) = crate::plan::not_owned_by(&DeploymentView::from(&*deployment), version, version_uid)
                {
                    return Err(Pointed::NotOwned { why });
                }
                let current = referenced_secret(deployment, &is_vcap);
                // This batch's annotation and the Secret this batch made: rolled before (a restart).
                // The annotation alone (copied by someone) is no proof.
                if deployment.annotations().get(ANNOTATION_ROLLED_BY).map(String::as_str) == Some(batch)
                    && current.as_deref() == Some(secret)
                {
                    let generation = deployment.metadata.generation.unwrap_or(0);
                    return Err(Pointed::AlreadyRolled { generation, secret: current });
                }
                point_containers(deployment, secret, &is_vcap);
                let annotations = deployment.annotations_mut();
                annotations.insert(ANNOTATION_ROLLED_AT.into(), now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
                annotations.insert(ANNOTATION_ROLLED_BY.into(), batch.into());
                Ok(current)
            },
            |generation, previous| Pointed::Updated { generation, previous },
            || Pointed::Gone,
        )
        .await
    }

    /// Restart a Deployment this batch pointed at `secret` once more (a retry): its Pod template
    /// gets `capdeck.dev/retried-at: <at>`. Idempotent per `at`, so a lost status write never
    /// restarts it twice.
    pub async fn restart_deployment(
        &self,
        namespace: &str,
        name: &str,
        secret: &str,
        at: &str,
        now: Timestamp,
    ) -> Result<Redone, kube::Error> {
        let also = [secret];
        let is_vcap = self.vcap_in(namespace, &also);
        self.edit_deployment(
            namespace,
            name,
            |deployment| {
                still_ours(deployment, secret, &is_vcap)?;
                let generation = deployment.metadata.generation.unwrap_or(0);
                let template = deployment.spec.as_mut().map(|spec| &mut spec.template.metadata);
                let annotations = template.map(|meta| {
                    meta.get_or_insert_with(Default::default).annotations.get_or_insert_with(Default::default)
                });
                let Some(annotations) = annotations else { return Err(Redone::Done { generation }) };
                if annotations.get(ANNOTATION_RETRIED_AT).map(String::as_str) == Some(at) {
                    return Err(Redone::Done { generation });
                }
                annotations.insert(ANNOTATION_RETRIED_AT.into(), at.into());
                deployment
                    .annotations_mut()
                    .insert(ANNOTATION_ROLLED_AT.into(), now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
                Ok(())
            },
            |generation, ()| Redone::Done { generation },
            || Redone::Gone,
        )
        .await
    }

    /// Point a Deployment this batch pointed at `secret` back at `previous` (an undo). A
    /// Deployment already back is left as it is.
    pub async fn point_back(
        &self,
        namespace: &str,
        name: &str,
        secret: &str,
        previous: &str,
        batch: &str,
        now: Timestamp,
    ) -> Result<Redone, kube::Error> {
        let also = [secret, previous];
        let is_vcap = self.vcap_in(namespace, &also);
        self.edit_deployment(
            namespace,
            name,
            |deployment| {
                if referenced_secret(deployment, &is_vcap).as_deref() == Some(previous) {
                    return Err(Redone::Done { generation: deployment.metadata.generation.unwrap_or(0) });
                }
                still_ours(deployment, secret, &is_vcap)?;
                point_containers(deployment, previous, &is_vcap);
                let annotations = deployment.annotations_mut();
                annotations.insert(ANNOTATION_ROLLED_AT.into(), now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
                annotations.insert(ANNOTATION_UNDONE_BY.into(), batch.into());
                Ok(())
            },
            |generation, ()| Redone::Done { generation },
            || Redone::Gone,
        )
        .await
    }

    /// The one way the engine changes a Deployment: read it live, let `edit` change it (`Err`:
    /// the answer without a write, `Ok`: what `written` needs besides the new generation) and
    /// replace it with its resourceVersion; a 409 re-reads and edits again (5 times).
    async fn edit_deployment<W, T>(
        &self,
        namespace: &str,
        name: &str,
        mut edit: impl FnMut(&mut Deployment) -> Result<W, T>,
        written: impl FnOnce(i64, W) -> T,
        gone: impl FnOnce() -> T,
    ) -> Result<T, kube::Error> {
        let api: Api<Lenient<Deployment>> = Api::namespaced(self.client.clone(), namespace);
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
        let mut attempts = 0;
        loop {
            // Paced before the read, so a wait for the rate never makes the version written stale.
            self.paced().await?;
            let Some(live) = self.counted(("get", "deployments"), api.get_opt(name).await)? else {
                return Ok(gone());
            };
            let mut deployment = live.into_result().map_err(|undecodable| {
                let why = format!("Deployment {namespace}/{name} does not decode ({})", undecodable.describe());
                kube::Error::SerdeError(<serde_json::Error as serde::de::Error>::custom(why))
            })?;
            // Written back without them: the server keeps its own record of who owns which field
            // (and a time it held past capdeck's range is not rewritten).
            deployment.metadata.managed_fields = None;
            let generation = deployment.metadata.generation.unwrap_or(0);
            let carried = match edit(&mut deployment) {
                Ok(carried) => carried,
                Err(answer) => return Ok(answer),
            };
            match api.replace(name, &params, &Lenient(Ok(deployment))).await {
                Ok(updated) => {
                    self.metrics.write("update", "deployments");
                    let generation = updated.meta().generation.unwrap_or(generation + 1);
                    return Ok(written(generation, carried));
                }
                Err(kube::Error::Api(status)) if status.code == 409 && attempts < 5 => {
                    attempts += 1;
                    tracing::debug!(namespace, deployment = name, attempts, "conflict updating deployment; re-reading");
                }
                Err(error) => return self.counted(("update", "deployments"), Err(error)),
            }
        }
    }

    /// Whether a Secret exists, read live: its metadata only, by `list` (the verb capdeck has on
    /// Secrets). A failed read counts like a failed write, so the batch backs off and is driven
    /// again.
    pub async fn secret_exists(&self, namespace: &str, name: &str) -> Result<bool, kube::Error> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let params = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
        Ok(!self.counted(("list", "secrets"), api.list_metadata(&params).await)?.items.is_empty())
    }

    /// Delete a VCAP Secret we replaced, only if it is still the object we knew (uid
    /// precondition). `Ok(false)` when it was already gone.
    pub async fn delete_secret(&self, namespace: &str, name: &str, uid: Option<String>) -> Result<bool, kube::Error> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let params = DeleteParams {
            preconditions: uid.map(|uid| Preconditions { uid: Some(uid), resource_version: None }),
            ..DeleteParams::default()
        };
        self.paced().await?;
        match api.delete(name, &params).await {
            Ok(_) => {
                self.metrics.write("delete", "secrets");
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(error) => self.counted(("delete", "secrets"), Err(error)),
        }
    }

    /// An Event on the CAPApplication (`events.k8s.io/v1`) about `batch` (its `related` object,
    /// at the version it was read at: kube's recorder merges Events of one key within minutes,
    /// keeping the first note, so each action on each batch is an Event of its own — bob's hold
    /// never reads "held by alice"). Failures are logged, never fatal.
    pub async fn event(&self, app: &CAPApplication, batch: &RotationBatch, warning: bool, reason: &str, note: String) {
        // kube's `object_ref` leaves the resourceVersion out; it is what tells two actions apart.
        let mut about = batch.object_ref(&());
        about.resource_version = batch.resource_version();
        let event = Event {
            type_: if warning { EventType::Warning } else { EventType::Normal },
            reason: reason.into(),
            note: Some(event_note(&note)),
            action: "CredentialRollout".into(),
            secondary: Some(about),
        };
        if self.paced().await.is_err() {
            return;
        }
        match self.recorder.publish(&event, &app.object_ref(&())).await {
            Ok(()) => self.metrics.write("create", "events"),
            Err(error) => {
                tracing::warn!(application = %app.name_any(), %error, "could not record an event");
                self.metrics.api_error("create", "events", &error);
            }
        }
    }
}

/// events.k8s.io/v1 `note`: at most 1 kB.
const EVENT_NOTE_LIMIT: usize = 1024;

/// An Event's note. It quotes spec text: control characters replaced, and at most 1 kB (bytes,
/// as events.k8s.io validates it), cut at a character boundary.
fn event_note(note: &str) -> String {
    let note = crate::api::common::bounded(note, EVENT_NOTE_LIMIT);
    let mut end = note.len().min(EVENT_NOTE_LIMIT);
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    note[..end].to_string()
}

/// The merge patch that makes the batch's status `status`: a field the status had and no longer
/// has is written `null` (a merge patch keeps what it does not name: a cleared `waitingUntil` or
/// a plan that was decided would stay otherwise).
pub(crate) fn status_patch(batch: &RotationBatch, status: &RotationBatchStatus) -> serde_json::Value {
    // `status.state` is derived, never decided: whatever the status says, its words for kubectl.
    let state = crate::api::rotation_batch::state::written_state(batch.spec.window_end.0, status);
    let status = RotationBatchStatus { state: Some(state), ..status.clone() };
    let mut patch = json!(status);
    let before = batch.status.as_ref().map(|before| json!(before));
    if let (Some(serde_json::Value::Object(before)), Some(patch)) = (before, patch.as_object_mut()) {
        for key in before.keys() {
            patch.entry(key.clone()).or_insert(serde_json::Value::Null);
        }
    }
    patch
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What the status no longer has is written `null`: the merge patch would keep it otherwise.
    #[test]
    fn a_status_patch_clears_what_the_status_no_longer_has() {
        let batch: RotationBatch = serde_json::from_value(json!({
            "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
            "metadata": {"name": "b", "namespace": "ns"},
            "spec": {"application": "app", "windowEnd": "2026-11-23T12:00:00Z"},
            "status": {"phase": "Waiting", "waitingUntil": "2026-11-23T22:00:00Z",
                       "planned": {"at": "2026-11-23T12:00:00Z", "tenants": 3}}}))
        .expect("batch");
        let mut status = batch.status.clone().expect("status");
        status.phase = crate::api::BatchPhase::RollingOut;
        status.waiting_until = None;
        status.planned = None;
        let patch = status_patch(&batch, &status);
        assert_eq!(patch["phase"], "RollingOut");
        assert_eq!(patch["state"], "RollingOut", "kubectl's STATE column is written with the status");
        assert_eq!((patch.get("waitingUntil"), patch.get("planned")), (Some(&json!(null)), Some(&json!(null))));
        assert_eq!(patch.get("haltedAt"), None, "what it never had is not named");
    }

    fn deployment(annotations: serde_json::Value, env_from: &str) -> Deployment {
        let container = |name: &str| {
            json!({"name": name, "image": "i", "envFrom": [{"configMapRef": {"name": "extra"}},
                                                          {"secretRef": {"name": env_from, "optional": true}},
                                                          {"secretRef": {"name": "team-db"}}]})
        };
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "srv", "namespace": "ns", "generation": 3, "annotations": annotations},
            "spec": {"selector": {"matchLabels": {"app": "srv"}}, "template": {"spec": {
                "containers": [container("srv"), container("sidecar")], "initContainers": [container("init")]}}}
        }))
        .expect("deployment")
    }

    #[test]
    fn every_container_reads_its_vcap_secret_and_keeps_every_other_entry_in_place() {
        let mut srv = deployment(json!({}), "srv-old");
        let vcap = |name: &str| name.starts_with("srv-");
        point_containers(&mut srv, "srv-new", &vcap);
        let pod = srv.spec.and_then(|spec| spec.template.spec).expect("pod");
        let entry = |source: &EnvFromSource| match (&source.secret_ref, &source.config_map_ref) {
            (Some(secret), _) => format!("secret {} {:?}", secret.name, secret.optional),
            (None, Some(map)) => format!("configMap {}", map.name),
            _ => "?".into(),
        };
        for container in pod.containers.iter().chain(pod.init_containers.iter().flatten()) {
            let env_from: Vec<String> = container.env_from.iter().flatten().map(entry).collect();
            assert_eq!(
                env_from,
                ["configMap extra", "secret srv-new Some(true)", "secret team-db None"],
                "{}",
                container.name
            );
        }
        // A container without a VCAP entry gets one, last; two VCAP entries become one.
        let mut bare = deployment(json!({}), "team-other");
        point_containers(&mut bare, "srv-new", &vcap);
        let pod = bare.spec.and_then(|spec| spec.template.spec).expect("pod");
        let env_from: Vec<String> = pod.containers[0].env_from.iter().flatten().map(entry).collect();
        assert_eq!(
            env_from,
            ["configMap extra", "secret team-other Some(true)", "secret team-db None", "secret srv-new Some(true)"]
        );
        let mut twice = deployment(json!({}), "srv-a");
        if let Some(pod) = twice.spec.as_mut().and_then(|spec| spec.template.spec.as_mut()) {
            pod.containers[0].env_from.get_or_insert_with(Vec::new).push(EnvFromSource {
                secret_ref: Some(SecretEnvSource { name: "srv-b".into(), optional: Some(true) }),
                ..EnvFromSource::default()
            });
        }
        point_containers(&mut twice, "srv-new", &vcap);
        let pod = twice.spec.and_then(|spec| spec.template.spec).expect("pod");
        let env_from: Vec<String> = pod.containers[0].env_from.iter().flatten().map(entry).collect();
        assert_eq!(env_from, ["configMap extra", "secret srv-new Some(true)", "secret team-db None"]);
    }

    #[test]
    fn a_deployment_someone_else_pointed_elsewhere_is_not_ours() {
        let srv = deployment(json!({}), "srv-new");
        let vcap = |name: &str| name.starts_with("srv-");
        assert_eq!(still_ours(&srv, "srv-new", &vcap), Ok(()));
        assert_eq!(still_ours(&srv, "srv-older", &vcap), Err(Redone::NotOurs { uses: Some("srv-new".into()) }));
    }

    #[test]
    fn an_event_note_is_cleaned_and_cut_at_one_kilobyte_on_a_character_boundary() {
        assert_eq!(event_note("batch b: held by bob"), "batch b: held by bob");
        assert_eq!(event_note("a\u{7}b\tc"), "a\u{FFFD}b\tc", "control characters but tab and newline replaced");
        let long = event_note(&"é".repeat(2000));
        assert!(long.len() <= EVENT_NOTE_LIMIT, "{} bytes", long.len());
        assert_eq!(long.len(), EVENT_NOTE_LIMIT, "two-byte characters fill it exactly");
        assert!(long.chars().all(|c| c == 'é'));
        let ascii = event_note(&"x".repeat(1030));
        assert_eq!(ascii.len(), EVENT_NOTE_LIMIT, "1024 characters then the ellipsis, cut to 1 kB");
    }
}
