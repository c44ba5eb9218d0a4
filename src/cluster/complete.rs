//! Dynamic shell completion of what only the kubeconfig or the cluster knows: contexts,
//! namespaces and open batches. The shell asks capdeck itself: `capdeck completion SHELL`
//! registers that, and `capdeck __complete` and kubectl's plugin completion use the same
//! completers. A completer sees only the word being completed, so it uses the default kubeconfig
//! and context (`--context` on the same line is not known to it). A cluster that does not answer
//! within two seconds, or refuses, offers nothing: completion never hangs a shell, and never
//! prints an error into it.

use std::ffi::OsStr;
use std::future::Future;
use std::time::Duration;

use clap_complete::engine::CompletionCandidate;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};

use super::{ClusterArgs, Connection};
use crate::api::RotationBatch;
use crate::api::lenient::Lenient;

/// How long a completer waits for the cluster, connecting included.
const WAIT: Duration = Duration::from_secs(2);

/// The kubeconfig's contexts (`--context`).
pub fn contexts(current: &OsStr) -> Vec<CompletionCandidate> {
    matching(ClusterArgs::default().context_names().unwrap_or_default(), current)
}

/// The namespaces the current context may list (`-n`).
pub fn namespaces(current: &OsStr) -> Vec<CompletionCandidate> {
    let names = ask(|connection| async move {
        let api: Api<Namespace> = Api::all(connection.client);
        let listed = api.list_metadata(&ListParams::default()).await?;
        Ok(listed.items.into_iter().filter_map(|namespace| namespace.metadata.name).collect())
    });
    matching(names, current)
}

/// The open batches (the ones an action may still change): `NAME` in the context's namespace,
/// `NAMESPACE/NAME` in the others. Only the context's namespace when every namespace may not be
/// listed.
pub fn batches(current: &OsStr) -> Vec<CompletionCandidate> {
    let names = ask(|connection| async move {
        let everywhere: Api<Lenient<RotationBatch>> = Api::all(connection.client.clone());
        let listed = match super::list_each(&everywhere, &ListParams::default()).await {
            Err(kube::Error::Api(status)) if status.code == 403 => {
                let here: Api<Lenient<RotationBatch>> =
                    Api::namespaced(connection.client.clone(), &connection.default_namespace);
                super::list_each(&here, &ListParams::default()).await?
            }
            other => other?,
        };
        Ok(open_batch_names(&listed.items, &connection.default_namespace))
    });
    matching(names, current)
}

/// `NAME` for a batch in `here`, `NAMESPACE/NAME` for the others; ended batches left out.
pub fn open_batch_names(batches: &[RotationBatch], here: &str) -> Vec<String> {
    use kube::ResourceExt as _;
    batches
        .iter()
        .filter(|batch| !batch.is_terminal() || batch.phase() == crate::api::BatchPhase::Failed)
        .map(|batch| {
            let namespace = batch.namespace().unwrap_or_default();
            if namespace == here { batch.name_any() } else { format!("{namespace}/{}", batch.name_any()) }
        })
        .collect()
}

/// The names that begin with the word being completed, sorted, once each.
fn matching(mut names: Vec<String>, current: &OsStr) -> Vec<CompletionCandidate> {
    let current = current.to_string_lossy();
    names.retain(|name| name.starts_with(current.as_ref()));
    names.sort();
    names.dedup();
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// Ask the cluster of the default context, within [`WAIT`]; nothing on any failure.
fn ask<F, Fut>(query: F) -> Vec<String>
where
    F: FnOnce(Connection) -> Fut,
    Fut: Future<Output = Result<Vec<String>, kube::Error>>,
{
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return Vec::new();
    };
    runtime.block_on(async {
        let asked = async {
            let connection = ClusterArgs::default().connect().await.ok()?;
            query(connection).await.ok()
        };
        tokio::time::timeout(WAIT, asked).await.ok().flatten().unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(namespace: &str, name: &str, phase: &str) -> RotationBatch {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"application": "app", "windowEnd": "2026-11-23T12:00:00Z"},
            "status": {"phase": phase}}))
        .expect("batch")
    }

    #[test]
    fn open_batches_are_named_as_the_actions_take_them() {
        let batches = [
            batch("shop", "a", "AwaitingApproval"),
            batch("hr", "b", "Held"),
            batch("shop", "c", "Succeeded"),
            batch("shop", "d", "Failed"),
        ];
        // Failed stays: retry and undo act on it.
        assert_eq!(open_batch_names(&batches, "shop"), ["a", "hr/b", "d"]);
        let found: Vec<String> = matching(vec!["hr/b".into(), "a".into(), "a".into()], OsStr::new("a"))
            .iter()
            .map(|candidate| candidate.get_value().to_string_lossy().into_owned())
            .collect();
        assert_eq!(found, ["a"]);
    }
}
