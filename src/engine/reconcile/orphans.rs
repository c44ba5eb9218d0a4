//! VCAP Secrets a batch left behind when it was deleted before it finished. A batch deletes the
//! VCAP Secret each Deployment used before once that Deployment rolled out; deleted by hand, it
//! never does, and that Secret keeps the old credentials. The engine finishes that cleanup:
//!
//! - the Secret a deleted batch created (label `capdeck.dev/rotation-batch`) and pointed a
//!   Deployment at: once that Deployment has rolled out, the Secret it replaced (annotation
//!   `capdeck.dev/previous-secret`) is deleted, unless any Deployment still reads it;
//! - the Secret a deleted batch created and pointed nothing at: deleted;
//! - the Secret an ended batch created and listed for none of its Deployments (made again after
//!   a create answered with an error it had made), when nothing reads it: deleted.
//!
//! Only VCAP Secrets capdeck created are read for this, and only their owner-hash-labelled
//! predecessors deleted, each under its uid: nothing another program owns.

use std::sync::Arc;

use crate::api::StoredSecret;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;

use super::Context;
use crate::api::rollout_progress::{Progress, rollout_progress};
use crate::engine::writes::{ANNOTATION_PREVIOUS_SECRET, LABEL_BATCH};

/// How old a VCAP Secret must be before a missing batch means a deleted one (a batch is in the
/// stores before it creates any Secret; this covers a store that lags).
const GRACE_SECONDS: i64 = 60;

/// What to do about one VCAP Secret of a batch that no longer exists.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Sweep {
    /// Its batch exists, it is too new to tell, or a Deployment it serves still rolls.
    Wait,
    /// Delete this Secret (namespace, name, uid): the predecessor of a rolled-out Deployment, or
    /// a Secret nothing reads.
    Delete(String, String, Option<String>),
    /// Nothing left to do.
    Done,
}

/// Pure: what the sweep does about `secret`, given the stores.
pub(super) fn sweep(context: &Context, secret: &StoredSecret, now: Timestamp) -> Sweep {
    let namespace = secret.namespace().unwrap_or_default();
    let Some(batch) = secret.label(LABEL_BATCH) else { return Sweep::Done };
    // An ended batch's own Secret that none of its Deployments was pointed at (made again after
    // a create answered with an error it had made, or after a rotation since): nothing will read
    // it. An open batch's Secrets are its own to use or clean up.
    let extra = match context.stores.batches.find(Some(namespace), batch) {
        Some(owner) => {
            let listed = owner.status.iter().flat_map(|status| &status.deployments).any(|deployment| {
                deployment.vcap_secret.as_deref() == Some(secret.name())
                    || deployment.previous_vcap_secret.as_deref() == Some(secret.name())
            });
            if owner.engine_work() || listed {
                return Sweep::Done;
            }
            true
        }
        None => false,
    };
    let age = secret.created().map_or(0, |at| now.as_second() - at.as_second());
    if age < GRACE_SECONDS {
        return Sweep::Wait;
    }
    let name = secret.name();
    let deployments = context.stores.deployments.state();
    let readers = |wanted: &str| {
        deployments
            .iter()
            .filter(|d| d.namespace().as_deref() == Some(namespace))
            .filter(|d| context.stores.vcap_secret_of(d).as_deref() == Some(wanted))
            .cloned()
            .collect::<Vec<Arc<_>>>()
    };
    let serves = readers(name);
    if serves.is_empty() {
        return Sweep::Delete(namespace.to_owned(), name.to_owned(), secret.uid().map(str::to_owned));
    }
    if extra {
        return Sweep::Done;
    }
    if serves.iter().any(|d| rollout_progress(d).progress != Progress::Complete) {
        return Sweep::Wait;
    }
    let Some(previous) = secret.annotation(ANNOTATION_PREVIOUS_SECRET) else { return Sweep::Done };
    let Some(old) = context.stores.vcap_secrets.find(Some(namespace), previous) else {
        return Sweep::Done;
    };
    if !readers(previous).is_empty() {
        return Sweep::Done;
    }
    Sweep::Delete(namespace.to_owned(), previous.to_owned(), old.uid().map(str::to_owned))
}

/// Sweep every VCAP Secret whose batch is gone. True while one waits (too new, or its
/// Deployment still rolls) or a delete failed: the caller sweeps again on a later pass.
pub(super) async fn sweep_all(context: &Context, now: Timestamp) -> bool {
    let mut again = false;
    for secret in context.stores.vcap_secrets.state() {
        match sweep(context, &secret, now) {
            Sweep::Done => {}
            Sweep::Wait => again = true,
            Sweep::Delete(namespace, name, uid) => match context.writes.delete_secret(&namespace, &name, uid).await {
                Ok(_) => tracing::info!(namespace = %namespace, secret = %name,
                    "deleted a VCAP Secret left behind by a batch that was deleted before it finished"),
                Err(error) => {
                    again = true;
                    tracing::warn!(namespace = %namespace, secret = %name,
                        error = %crate::cluster::describe_error(&error),
                        "could not delete a VCAP Secret a deleted batch left behind; trying again");
                }
            },
        }
    }
    again
}
