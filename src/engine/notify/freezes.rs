//! `FreezeStarted` and `FreezeEnded`: a freeze this engine honours began or ended (lifted, or at
//! its `until`). Recorded on the Freeze's status before sending (under its resourceVersion, like a
//! batch's records), so each is sent once, even by a new leader. Keyed by the freeze's start, so a
//! freeze written again (a new `capdeck freeze` of the same target) is announced again.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{Event, RECENT};
use crate::api::rotation_batch::NotificationRecord;
use crate::api::{Freeze, FreezeScope};
use crate::cluster::batch_writer::Writer;

/// A freeze event not recorded yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreezeDue {
    pub namespace: String,
    pub name: String,
    pub event: Event,
    pub key: String,
}

fn recorded(freeze: &Freeze, key: &str) -> bool {
    freeze.status.as_ref().is_some_and(|status| status.notifications.iter().any(|record| record.key == key))
}

/// The keys of a freeze's two events, from its start.
fn keys(freeze: &Freeze) -> (String, String) {
    let started = freeze.spec.frozen.at.0.as_second();
    (format!("FreezeStarted@{started}"), format!("FreezeEnded@{started}"))
}

/// What is due among the freezes an engine whose Lease lives in `lease_namespace` honours: a
/// start while it is in force, an end (announced only after its start was, and only within an
/// hour of it: enabling notifications must not announce last month's freezes).
pub fn due(freezes: &[Arc<Freeze>], lease_namespace: &str, now: Timestamp) -> Vec<FreezeDue> {
    let honoured = |freeze: &Freeze| {
        freeze.spec.scope != FreezeScope::Cluster || freeze.namespace().as_deref() == Some(lease_namespace)
    };
    freezes
        .iter()
        .filter(|freeze| honoured(freeze))
        .filter_map(|freeze| {
            let (started, ended) = keys(freeze);
            let (event, key) = if freeze.active_at(now) {
                (Event::FreezeStarted, started)
            } else if recorded(freeze, &started) && now.as_second() - freeze.ends().as_second() <= RECENT {
                (Event::FreezeEnded, ended)
            } else {
                return None;
            };
            (!recorded(freeze, &key)).then(|| FreezeDue {
                namespace: freeze.namespace().unwrap_or_default(),
                name: freeze.name_any(),
                event,
                key,
            })
        })
        .collect()
}

/// Record `due` on the freeze (its records so far plus this one, under the resourceVersion the
/// store showed). `None` when it was recorded meanwhile, changed under us (a 409: looked at again
/// on the next round) or cannot be written.
pub async fn record(client: &kube::Client, freeze: &Freeze, due: &FreezeDue, by: &str, now: Timestamp) -> Option<()> {
    let api: Api<Freeze> = Api::namespaced(client.clone(), &due.namespace);
    let mut notifications = freeze.status.clone().unwrap_or_default().notifications;
    notifications.push(NotificationRecord {
        event: due.event.as_str().into(),
        key: due.key.clone(),
        secret: None,
        at: Time(now),
        by: by.to_string(),
        failed: Vec::new(),
        refused: Vec::new(),
    });
    let patch = json!({
        "metadata": {"resourceVersion": freeze.resource_version()},
        "status": {"notifications": notifications},
    });
    let params = PatchParams { field_manager: Some(Writer::Notifier.field_manager().into()), ..Default::default() };
    match api.patch_status(&due.name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => Some(()),
        Err(kube::Error::Api(status)) if status.code == 409 => None,
        Err(error) => {
            tracing::warn!(freeze = %due.name, namespace = %due.namespace, error = %crate::cluster::describe_error(&error), "cannot record a freeze notification; trying again later");
            None
        }
    }
}

/// Add a receiver that did not accept a freeze's notification to its record on the Freeze (and
/// to `refused` when it refused capdeck itself), as a batch's records get it: `capdeck doctor`
/// reads both. Read afresh and written under its resourceVersion; a 409 is tried again.
pub async fn note_failed(client: &kube::Client, namespace: &str, name: &str, key: &str, receiver: &str, refused: bool) {
    let api: Api<Freeze> = Api::namespaced(client.clone(), namespace);
    let params = PatchParams { field_manager: Some(Writer::Notifier.field_manager().into()), ..Default::default() };
    for _ in 0..3 {
        // A LIST by name: the engine's ClusterRole lists and watches Freezes, it does not GET them.
        let by_name = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
        let freeze = match api.list(&by_name).await.map(|listed| listed.items.into_iter().next()) {
            Ok(Some(freeze)) => freeze,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(freeze = %name, %namespace, error = %crate::cluster::describe_error(&error), "cannot note a failed notification on its freeze");
                return;
            }
        };
        let mut notifications = freeze.status.clone().unwrap_or_default().notifications;
        let Some(record) = notifications.iter_mut().find(|record| record.key == key) else { return };
        if !super::add_failure(record, receiver, refused) {
            return;
        }
        let patch = json!({
            "metadata": {"resourceVersion": freeze.resource_version()},
            "status": {"notifications": notifications},
        });
        match api.patch_status(name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => return,
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => {
                tracing::warn!(freeze = %name, %namespace, error = %crate::cluster::describe_error(&error), "cannot note a failed notification on its freeze");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn freeze(namespace: &str, spec: serde_json::Value, records: &[&str]) -> Arc<Freeze> {
        let mut object = json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
            "metadata": {"name": "namespace", "namespace": namespace},
            "spec": {"scope": "Namespace", "until": "2026-11-26T18:00:00Z",
                     "frozen": {"by": "alice", "at": "2026-11-26T10:00:00Z", "reason": "close"}},
            "status": {"notifications": records.iter().map(|key| json!({"event": key.split('@').next(), "key": key,
                "at": "2026-11-26T10:00:05Z", "by": "engine-a"})).collect::<Vec<_>>()}});
        if let (Some(target), Some(extra)) = (object["spec"].as_object_mut(), spec.as_object()) {
            target.extend(extra.clone());
        }
        Arc::new(serde_json::from_value(object).expect("freeze"))
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    const STARTED: &str = "FreezeStarted@1795687200";
    const ENDED: &str = "FreezeEnded@1795687200";

    #[test]
    fn a_freeze_is_announced_when_in_force_and_when_it_ended_once_each() {
        let lifted = json!({"lifted": {"by": "bob", "at": "2026-11-26T12:00:00Z"}});
        let cluster = json!({"scope": "Cluster"});
        // (what, the freeze, now, what is due)
        type Case<'a> = (&'a str, Arc<Freeze>, &'a str, Option<(Event, &'a str)>);
        let table: [Case<'_>; 8] = [
            (
                "in force, not announced",
                freeze("shop", json!({}), &[]),
                "2026-11-26T11:00:00Z",
                Some((Event::FreezeStarted, STARTED)),
            ),
            ("in force, announced", freeze("shop", json!({}), &[STARTED]), "2026-11-26T11:00:00Z", None),
            (
                "lifted after its start was announced",
                freeze("shop", lifted.clone(), &[STARTED]),
                "2026-11-26T12:10:00Z",
                Some((Event::FreezeEnded, ENDED)),
            ),
            (
                "ended at until",
                freeze("shop", json!({}), &[STARTED]),
                "2026-11-26T18:00:01Z",
                Some((Event::FreezeEnded, ENDED)),
            ),
            ("its end announced", freeze("shop", lifted.clone(), &[STARTED, ENDED]), "2026-11-26T12:10:00Z", None),
            ("ended long ago: not announced", freeze("shop", json!({}), &[STARTED]), "2026-11-28T00:00:00Z", None),
            ("never seen in force: no end either", freeze("shop", lifted, &[]), "2026-11-26T12:10:00Z", None),
            (
                "a cluster freeze outside the Lease namespace is not honoured",
                freeze("shop", cluster, &[]),
                "2026-11-26T11:00:00Z",
                None,
            ),
        ];
        for (what, freeze, now, expected) in table {
            let got: Vec<(Event, String)> =
                due(&[freeze], "capdeck-system", at(now)).into_iter().map(|d| (d.event, d.key)).collect();
            let want: Vec<(Event, String)> = expected.into_iter().map(|(e, k)| (e, k.to_string())).collect();
            assert_eq!(got, want, "{what}");
        }
    }
}
