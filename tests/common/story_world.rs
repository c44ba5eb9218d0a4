//! One vocabulary for what a story reads of its cluster, whichever backend holds it: the
//! sandbox in process (the sandbox suite; its applications in `NS`) and a `World` of the
//! real-cluster suite (a namespace on the sandbox over HTTP or on kube-apiserver). Both implement
//! `StoryWorld`; what it provides (`wait_phase`, `vcap_of`, …) is written once.
#![allow(dead_code)]

use std::time::Duration;

use base64::Engine as _;
use capdeck::api::{BatchPhase, RotationBatch};
use kube::ResourceExt as _;
use serde_json::Value;

use super::eventually;

pub trait StoryWorld: Sync {
    /// Every batch of `app`, oldest first (see `oldest_first`).
    async fn batches(&self, app: &str) -> Vec<RotationBatch>;
    /// A Deployment of the story's namespace, as JSON.
    async fn deployment(&self, name: &str) -> Option<Value>;
    /// A Secret of the story's namespace, as JSON.
    async fn secret(&self, name: &str) -> Option<Value>;

    /// The phase of `app`'s newest batch.
    async fn phase_of(&self, app: &str) -> Option<BatchPhase> {
        self.batches(app).await.last().map(|b| b.phase())
    }

    /// Wait until `app`'s newest batch is in `phase` and return it; on timeout show every batch.
    async fn wait_phase(&self, app: &str, phase: BatchPhase, limit: Duration) -> RotationBatch {
        let found = std::sync::Mutex::new(None);
        eventually(&format!("{app} batch {phase}"), limit, || async {
            let batches = self.batches(app).await;
            match batches.last() {
                Some(batch) if batch.phase() == phase => {
                    *found.lock().expect("lock") = Some(batch.clone());
                    Ok(())
                }
                _ => Err(describe(&batches)),
            }
        })
        .await;
        found.into_inner().expect("lock").expect("seen above")
    }

    /// The VCAP Secret a Deployment's first container reads ("" when it reads none).
    async fn vcap_of(&self, deployment: &str) -> String {
        self.deployment(deployment)
            .await
            .and_then(|d| {
                d.pointer("/spec/template/spec/containers/0/envFrom/0/secretRef/name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default()
    }

    /// The decoded VCAP_SERVICES of a Secret ("" when there is none).
    async fn vcap_payload(&self, secret: &str) -> String {
        self.secret(secret)
            .await
            .and_then(|s| s.pointer("/data/VCAP_SERVICES").and_then(Value::as_str).map(str::to_string))
            .and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }
}

/// Batches oldest first. Ordered by window end (the engine's clock, which follows paused tokio
/// time), not creationTimestamp (wall-clock seconds: every paused test runs within one of them).
/// Both have whole-second resolution, so on a tie a superseded batch counts as older than the
/// rest (it always predates its successor).
pub fn oldest_first(mut batches: Vec<RotationBatch>) -> Vec<RotationBatch> {
    batches.sort_by_key(|b| (b.spec.window_end.0, b.phase() != BatchPhase::Superseded, b.metadata.name.clone()));
    batches
}

/// Each batch on a line: name, phase, first condition, the Deployments' states.
pub fn describe(batches: &[RotationBatch]) -> String {
    let lines: Vec<String> = batches
        .iter()
        .map(|b| {
            let status = b.status.clone().unwrap_or_default();
            let condition =
                status.conditions.first().map(|c| format!("{}: {}", c.reason, c.message)).unwrap_or_default();
            let deployments: Vec<String> =
                status.deployments.iter().map(|d| format!("{} {:?} {:?}", d.name, d.state, d.message)).collect();
            format!("{} {} [{condition}] {deployments:?}", b.name_any(), b.phase())
        })
        .collect();
    format!("{lines:#?}")
}
