//! The one way capdeck writes a RotationBatch, for its three writers: the engine (new batches,
//! their spec and status), the user's actions (`capdeck approve`, …, the console) and the
//! notifier (its records in the status). Every change is conditioned on the resourceVersion it
//! was worked out from, and one loop decides what a conflict (409) does (`OnConflict`).
//!
//! Here, not in `engine` or `actions`: all three use it, and `cluster` is below both layers.
//! Each writer keeps its own field manager — the engine's attribution check
//! (`api::rotation_batch::attribution`) tells capdeck's actions from other clients by it — and
//! its own way of reading a batch, the verb its RBAC grants.

use std::convert::Infallible;

use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::{Value, json};

use crate::api::RotationBatch;
use crate::api::lenient::Lenient;
use crate::api::rotation_batch::attribution::{ACTIONS_FIELD_MANAGER, ENGINE_FIELD_MANAGER, NOTIFIER_FIELD_MANAGER};

/// Who writes: it names the field manager and the verb a batch is read with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    Engine,
    Actions,
    Notifier,
}

impl Writer {
    pub const fn field_manager(self) -> &'static str {
        match self {
            Self::Engine => ENGINE_FIELD_MANAGER,
            Self::Actions => ACTIONS_FIELD_MANAGER,
            Self::Notifier => NOTIFIER_FIELD_MANAGER,
        }
    }

    /// The engine's ClusterRole lists RotationBatches and does not GET them (`capdeck
    /// manifests` grants exactly what it uses); a user's actions GET the batch they name.
    const fn reads_by_list(self) -> bool {
        matches!(self, Self::Engine | Self::Notifier)
    }
}

/// One change of a batch, worked out from the batch as it was read.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// A JSON merge patch of the spec (`patch rotationbatches`): the user's actions.
    MergeSpec(Value),
    /// A JSON merge patch of the status (`patch rotationbatches/status`).
    MergeStatus(Value),
    /// The whole object (`update rotationbatches`): the engine's spec changes.
    Replace(Box<RotationBatch>),
}

/// What a conflict does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnConflict {
    /// Give up with the conflict: the caller decides again from fresher state (the engine, on its
    /// next pass with backoff).
    GiveUp,
    /// Read the batch again and work the change out again (the caller re-checks), at most this
    /// many attempts in all.
    Retry { attempts: u32 },
}

impl OnConflict {
    fn attempts(self) -> u32 {
        match self {
            Self::GiveUp => 1,
            Self::Retry { attempts } => attempts.max(1),
        }
    }
}

/// What an attempt writes, and what the caller learns from it when it is written.
#[derive(Debug)]
pub struct Edit<T> {
    /// Written in order, each conditioned on the resourceVersion the previous one produced.
    pub changes: Vec<Change>,
    pub answer: T,
}

/// A written edit: its answer and the batch as the last change left it.
#[derive(Debug)]
pub struct Written<T> {
    pub answer: T,
    pub batch: RotationBatch,
}

#[derive(Debug, thiserror::Error)]
pub enum BatchWriteError<E> {
    #[error("the rotation batch does not exist")]
    Gone,
    /// The caller's edit found nothing to write (a refusal, no longer due).
    #[error("declined")]
    Declined(E),
    #[error("{}", super::describe_error(.0))]
    Read(kube::Error),
    #[error("{}", super::describe_error(.0))]
    Write(kube::Error),
    /// Every attempt met a conflict: the last one.
    #[error("{}", super::describe_error(.0))]
    Conflicts(kube::Error),
}

/// A write of a batch the caller holds cannot be declined and reads nothing: what the server said.
impl From<BatchWriteError<Infallible>> for kube::Error {
    fn from(error: BatchWriteError<Infallible>) -> Self {
        match error {
            BatchWriteError::Read(error) | BatchWriteError::Write(error) | BatchWriteError::Conflicts(error) => error,
            BatchWriteError::Gone => kube::Error::Api(
                Status::failure("the rotation batch does not exist", "NotFound").with_code(404).boxed(),
            ),
            BatchWriteError::Declined(never) => match never {},
        }
    }
}

pub struct BatchWriter {
    client: kube::Client,
    writer: Writer,
}

/// A batch that does not decode is an error that names its field (never its value).
fn decoded(batch: Lenient<RotationBatch>) -> Result<RotationBatch, kube::Error> {
    batch.into_result().map_err(|undecodable| crate::cluster::undecodable_error("RotationBatch", &undecodable))
}

impl BatchWriter {
    pub fn new(client: kube::Client, writer: Writer) -> Self {
        Self { client, writer }
    }

    /// Batches read and written one object at a time ([`Lenient`]): a value past capdeck's range
    /// (a `windowEnd` in year 9999) is no error.
    fn api(&self, namespace: &str) -> Api<Lenient<RotationBatch>> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Create a batch (`generateName` allowed).
    pub async fn create(&self, batch: &RotationBatch) -> Result<RotationBatch, kube::Error> {
        let params = PostParams { field_manager: Some(self.writer.field_manager().into()), ..PostParams::default() };
        let api = self.api(&batch.namespace().unwrap_or_default());
        decoded(api.create(&params, &Lenient(Ok(batch.clone()))).await?)
    }

    /// One batch, fresh from the API server, read with the writer's verb.
    pub async fn read(&self, namespace: &str, name: &str) -> Result<Option<RotationBatch>, kube::Error> {
        let api = self.api(namespace);
        let found = if self.writer.reads_by_list() {
            let params = ListParams::default().fields(&format!("metadata.name={name}"));
            api.list(&params).await?.items.into_iter().next()
        } else {
            api.get_opt(name).await?
        };
        found.map(decoded).transpose()
    }

    /// One change of the batch as the caller read it; a conflict is the caller's to handle.
    pub async fn write_as_read(&self, batch: &RotationBatch, change: Change) -> Result<RotationBatch, kube::Error> {
        let edit = |_: &RotationBatch| Ok::<_, Infallible>(Edit { changes: vec![change.clone()], answer: () });
        let namespace = batch.namespace().unwrap_or_default();
        Ok(self.write(&namespace, &batch.name_any(), Some(batch), OnConflict::GiveUp, edit).await?.batch)
    }

    /// The loop every batch write goes through: take the batch (`held`, else read it), let `edit`
    /// work out the changes (`Err`: nothing to write), write them in order under the
    /// resourceVersion; on a conflict, as `policy` says.
    pub async fn write<T, E>(
        &self,
        namespace: &str,
        name: &str,
        held: Option<&RotationBatch>,
        policy: OnConflict,
        mut edit: impl FnMut(&RotationBatch) -> Result<Edit<T>, E>,
    ) -> Result<Written<T>, BatchWriteError<E>> {
        let api = self.api(namespace);
        let mut conflict = None;
        for attempt in 0..policy.attempts() {
            let batch = match held.filter(|_| attempt == 0) {
                Some(batch) => batch.clone(),
                None => {
                    self.read(namespace, name).await.map_err(BatchWriteError::Read)?.ok_or(BatchWriteError::Gone)?
                }
            };
            let Edit { changes, answer } = edit(&batch).map_err(BatchWriteError::Declined)?;
            match self.send(&api, name, batch, changes).await {
                Ok(batch) => return Ok(Written { answer, batch }),
                Err(kube::Error::Api(status)) if status.code == 409 => conflict = Some(kube::Error::Api(status)),
                Err(error) => return Err(BatchWriteError::Write(error)),
            }
        }
        Err(conflict.map_or(BatchWriteError::Gone, BatchWriteError::Conflicts))
    }

    /// Write `changes` in order, each under the resourceVersion the one before left.
    async fn send(
        &self,
        api: &Api<Lenient<RotationBatch>>,
        name: &str,
        mut batch: RotationBatch,
        changes: Vec<Change>,
    ) -> Result<RotationBatch, kube::Error> {
        let manager = Some(self.writer.field_manager().to_string());
        for change in changes {
            let version = json!({"resourceVersion": batch.resource_version()});
            batch = match change {
                Change::MergeSpec(spec) => {
                    let params = PatchParams { field_manager: manager.clone(), ..PatchParams::default() };
                    decoded(api.patch(name, &params, &Patch::Merge(json!({"metadata": version, "spec": spec}))).await?)?
                }
                Change::MergeStatus(status) => {
                    let params = PatchParams { field_manager: manager.clone(), ..PatchParams::default() };
                    let patch = json!({"metadata": version, "status": status});
                    decoded(api.patch_status(name, &params, &Patch::Merge(patch)).await?)?
                }
                Change::Replace(mut object) => {
                    object.metadata.resource_version = batch.metadata.resource_version.clone();
                    let params = PostParams { field_manager: manager.clone(), ..PostParams::default() };
                    decoded(api.replace(name, &params, &Lenient(Ok(*object))).await?)?
                }
            };
        }
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::sandbox::{RequestMatcher, Sandbox, SandboxConfig};

    fn sandbox_with_batch() -> Sandbox {
        let sandbox = Sandbox::new(SandboxConfig::default());
        sandbox.install_crds();
        let batch = json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"application": "app", "windowEnd": "2026-11-20T09:00:00Z"}});
        sandbox.load([batch]).expect("batch");
        sandbox
    }

    /// (verb, resource[/subresource], field manager) of every RotationBatch request.
    fn requests(sandbox: &Sandbox) -> Vec<(String, String, Option<String>)> {
        let batches = sandbox.requests().into_iter().filter(|r| r.info.resource == "rotationbatches");
        batches
            .map(|r| {
                let resource =
                    r.info.subresource.map_or(r.info.resource.clone(), |sub| format!("{}/{sub}", r.info.resource));
                (r.info.verb, resource, r.field_manager)
            })
            .collect()
    }

    fn request(verb: &str, resource: &str, manager: Option<&str>) -> (String, String, Option<String>) {
        (verb.into(), resource.into(), manager.map(str::to_string))
    }

    fn note(text: &str) -> impl FnMut(&RotationBatch) -> Result<Edit<()>, ()> + '_ {
        move |_| Ok(Edit { changes: vec![Change::MergeStatus(json!({"progress": text}))], answer: () })
    }

    #[test]
    fn each_writer_has_its_own_field_manager() {
        assert_eq!(Writer::Engine.field_manager(), "capdeck-engine");
        assert_eq!(Writer::Actions.field_manager(), "capdeck-console");
        assert_eq!(Writer::Notifier.field_manager(), "capdeck-notify");
        assert!(Writer::Engine.reads_by_list() && Writer::Notifier.reads_by_list() && !Writer::Actions.reads_by_list());
    }

    #[tokio::test]
    async fn each_writer_reads_with_the_verb_its_rbac_grants() {
        let sandbox = sandbox_with_batch();
        for writer in [Writer::Actions, Writer::Notifier] {
            let written = BatchWriter::new(sandbox.client(), writer)
                .write("default", "b", None, OnConflict::Retry { attempts: 3 }, note("1/1"))
                .await
                .expect("written");
            assert_eq!(written.batch.status.and_then(|s| s.progress).as_deref(), Some("1/1"));
        }
        assert_eq!(
            requests(&sandbox),
            [
                request("get", "rotationbatches", None),
                request("patch", "rotationbatches/status", Some("capdeck-console")),
                request("list", "rotationbatches", None),
                request("patch", "rotationbatches/status", Some("capdeck-notify")),
            ]
        );
    }

    #[tokio::test]
    async fn a_held_batch_is_written_without_reading_and_a_conflict_is_handed_back() {
        let sandbox = sandbox_with_batch();
        let writer = BatchWriter::new(sandbox.client(), Writer::Engine);
        let batch = writer.read("default", "b").await.expect("read").expect("exists");
        sandbox.clear_requests();
        let written = writer.write_as_read(&batch, Change::MergeStatus(json!({"progress": "0/1"}))).await;
        let written = written.expect("written");
        // The version it was read at is stale now: the engine gets the 409, nothing is read again.
        let stale = writer.write_as_read(&batch, Change::MergeStatus(json!({"progress": "1/1"}))).await;
        assert!(matches!(stale, Err(kube::Error::Api(status)) if status.code == 409));
        let replaced = writer.write_as_read(&written, Change::Replace(Box::new(written.clone()))).await;
        assert!(replaced.is_ok(), "{replaced:?}");
        let patch = request("patch", "rotationbatches/status", Some("capdeck-engine"));
        assert_eq!(
            requests(&sandbox),
            [patch.clone(), patch, request("update", "rotationbatches", Some("capdeck-engine"))]
        );
    }

    #[tokio::test]
    async fn a_conflict_reads_again_and_edits_again_until_the_attempts_run_out() {
        let sandbox = sandbox_with_batch();
        let writer = BatchWriter::new(sandbox.client(), Writer::Actions);
        let conflict = || RequestMatcher::on("patch", "rotationbatches").subresource("status");
        sandbox.fail_next(2, conflict(), 409);
        let edits = Cell::new(0);
        let edit = |_: &RotationBatch| {
            edits.set(edits.get() + 1);
            Ok::<_, ()>(Edit { changes: vec![Change::MergeStatus(json!({"progress": "2/2"}))], answer: edits.get() })
        };
        let written = writer.write("default", "b", None, OnConflict::Retry { attempts: 3 }, edit).await;
        assert_eq!(written.expect("third attempt").answer, 3, "each attempt works the change out again");
        sandbox.fail_next(3, conflict(), 409);
        let gave_up = writer.write("default", "b", None, OnConflict::Retry { attempts: 3 }, note("x")).await;
        assert!(matches!(gave_up, Err(BatchWriteError::Conflicts(kube::Error::Api(status))) if status.code == 409));
        sandbox.fail_next(1, conflict(), 500);
        let failed = writer.write("default", "b", None, OnConflict::Retry { attempts: 3 }, note("x")).await;
        assert!(matches!(failed, Err(BatchWriteError::Write(kube::Error::Api(status))) if status.code == 500));
    }

    #[tokio::test]
    async fn changes_are_chained_a_declined_edit_writes_nothing_and_a_missing_batch_is_gone() {
        let sandbox = sandbox_with_batch();
        let writer = BatchWriter::new(sandbox.client(), Writer::Actions);
        let two = |_: &RotationBatch| {
            let changes = vec![
                Change::MergeSpec(json!({"hold": {"by": "a", "at": "2026-11-20T09:00:00Z"}})),
                Change::MergeSpec(json!({"hold": null, "released": {"by": "a", "at": "2026-11-20T09:01:00Z"}})),
            ];
            Ok::<_, ()>(Edit { changes, answer: () })
        };
        let written = writer.write("default", "b", None, OnConflict::Retry { attempts: 1 }, two).await.expect("both");
        assert!(written.batch.spec.hold.is_none() && written.batch.spec.released.is_some());
        sandbox.clear_requests();
        let declined =
            writer.write("default", "b", None, OnConflict::Retry { attempts: 3 }, |_| Err::<Edit<()>, _>("no"));
        assert!(matches!(declined.await, Err(BatchWriteError::Declined("no"))));
        assert_eq!(requests(&sandbox), [request("get", "rotationbatches", None)]);
        let gone = writer.write("default", "nope", None, OnConflict::Retry { attempts: 3 }, note("x")).await;
        assert!(matches!(gone, Err(BatchWriteError::Gone)));
    }
}
