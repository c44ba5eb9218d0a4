//! Who wrote a batch's approval or hold: its managedFields, which the stores strip, read live
//! when the decision takes an approval or a hold from the batch — by `list` with a name
//! selector, the verb the engine has — once per resourceVersion. The part owns what it read.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::ResourceExt;

use super::{AppKey, batch_key};
use crate::api::RotationBatch;
use crate::api::lenient::Lenient;

#[derive(Default)]
pub(super) struct ManagedFields {
    /// By batch: the resourceVersion they were read at, and the fields.
    read: HashMap<AppKey, (String, Vec<ManagedFieldsEntry>)>,
}

/// Whether the decision takes an approval or a hold from the batch: a hold, or an approval
/// before the rollout started.
fn needed(batch: &RotationBatch) -> bool {
    let approval_pending = batch.spec.approval.as_ref().is_some_and(|a| a.approved_by.is_some())
        && batch.status.as_ref().is_none_or(|s| s.rollout_started_at.is_none());
    batch.spec.hold.is_some() || approval_pending
}

impl ManagedFields {
    /// The batch with its managedFields when they are needed. `None` when they cannot be known
    /// this pass (the read failed, or the store is behind the server: the watch brings the newer
    /// batch and another pass); the batch is driven next time.
    pub(super) async fn attach(
        &mut self,
        client: &kube::Client,
        batch: &Arc<RotationBatch>,
    ) -> Option<Arc<RotationBatch>> {
        if !needed(batch) {
            return Some(batch.clone());
        }
        let key = batch_key(batch);
        let version = batch.resource_version().unwrap_or_default();
        let fields = match self.cached(&key, &version) {
            Some(fields) => fields,
            None => {
                let fields = read(client, &key, &version).await?;
                self.read.insert(key, (version, fields.clone()));
                fields
            }
        };
        let mut attributed = (**batch).clone();
        attributed.metadata.managed_fields = Some(fields);
        Some(Arc::new(attributed))
    }

    fn cached(&self, key: &AppKey, version: &str) -> Option<Vec<ManagedFieldsEntry>> {
        self.read.get(key).filter(|(read_at, _)| read_at == version).map(|(_, fields)| fields.clone())
    }

    /// Forget batches that are no longer open.
    pub(super) fn retain(&mut self, open: &BTreeSet<AppKey>) {
        self.read.retain(|key, _| open.contains(key));
    }
}

/// The batch's managedFields as the server has them at `version`; `None` if it cannot say.
async fn read(
    client: &kube::Client,
    AppKey { namespace, name }: &AppKey,
    version: &str,
) -> Option<Vec<ManagedFieldsEntry>> {
    // Decoded on its own: a managedFields time in year 9999 reads as the latest time.
    let api: kube::Api<Lenient<kube::core::PartialObjectMeta<RotationBatch>>> =
        kube::Api::namespaced(client.clone(), namespace);
    let params = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
    let live = match api.list(&params).await {
        Ok(list) => list.items.into_iter().next().and_then(|found| found.0.ok()),
        Err(error) => {
            tracing::warn!(namespace = %namespace, batch = %name, error = %crate::cluster::describe_error(&error),
                "could not read who wrote the batch's approval or hold (its managedFields); retrying");
            return None;
        }
    };
    let live = live?;
    if live.resource_version().unwrap_or_default() != version {
        return None;
    }
    Some(live.metadata.managed_fields.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn batch(version: &str, spec: Value, status: Value) -> Arc<RotationBatch> {
        Arc::new(crate::api::rotation_batch::testing::batch(
            json!({"metadata": {"resourceVersion": version}, "spec": spec, "status": status}),
        ))
    }

    #[test]
    fn only_a_hold_or_an_approval_not_acted_on_yet_needs_who_wrote_it() {
        let by = json!({"by": "carol", "at": "2026-11-23T12:00:00Z"});
        let approved = json!({"approval": {"required": true, "approvedBy": "carol"}});
        assert!(!needed(&batch("1", json!({}), Value::Null)));
        assert!(!needed(&batch("1", json!({"approval": {"required": true}}), Value::Null)), "no approver yet");
        assert!(needed(&batch("1", approved.clone(), Value::Null)));
        assert!(needed(&batch("1", approved.clone(), json!({"phase": "AwaitingApproval"}))));
        let started = json!({"phase": "RollingOut", "rolloutStartedAt": "2026-11-23T12:00:00Z"});
        assert!(!needed(&batch("1", approved, started.clone())), "the approval was acted on");
        assert!(needed(&batch("1", json!({"hold": by}), started)), "a hold counts in any phase");
    }

    #[test]
    fn fields_read_once_are_used_for_that_resource_version_only() {
        let mut fields = ManagedFields::default();
        let key = AppKey::new("ns", "b");
        let entry: ManagedFieldsEntry = serde_json::from_value(json!({"manager": "capdeck-console"})).expect("entry");
        fields.read.insert(key.clone(), ("5".into(), vec![entry.clone()]));
        assert_eq!(fields.cached(&key, "5"), Some(vec![entry]));
        assert_eq!(fields.cached(&key, "6"), None, "a newer version is read again");
        fields.retain(&BTreeSet::new());
        assert_eq!(fields.cached(&key, "5"), None, "forgotten once the batch is no longer open");
    }
}
