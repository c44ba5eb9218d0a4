//! Completion of a batch action's BATCH (`approve`, `force`, `hold`, `release`, `cancel`,
//! `retry`, `undo`): the batches that action accepts now (`BatchAction::refusal`), named as the
//! action takes them with the line's `-n` and `-A` (`commands::batches::target`).

use std::ffi::OsStr;

use clap_complete::engine::CompletionCandidate;
use kube::api::{Api, ListParams};

use crate::actions::BatchAction;
use crate::api::RotationBatch;
use crate::api::lenient::Lenient;
use crate::cluster::complete::{ask, cluster_args_of, matching};

/// How the action takes a batch's name: with `-n`, the name alone; with `-A`, `NAMESPACE/NAME`;
/// else the name alone in the context's namespace and `NAMESPACE/NAME` in the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Naming {
    In(String),
    Everywhere,
    From(String),
}

pub fn batches(current: &OsStr) -> Vec<CompletionCandidate> {
    let words: Vec<String> = std::env::args().collect();
    let args = cluster_args_of(&words);
    let action = action_of(&words);
    let (namespace, all_namespaces) = (args.namespace.clone(), args.all_namespaces);
    let names = ask(&args, |connection| async move {
        let client = connection.client.clone();
        let list = |api: Api<Lenient<RotationBatch>>| async move {
            crate::cluster::list_each(&api, &ListParams::default()).await.map(|listed| listed.items)
        };
        let (batches, naming) = match (namespace, all_namespaces) {
            (Some(namespace), _) => (list(Api::namespaced(client, &namespace)).await?, Naming::In(namespace)),
            (None, true) => (list(Api::all(client)).await?, Naming::Everywhere),
            (None, false) => {
                let here = connection.default_namespace.clone();
                match list(Api::all(client.clone())).await {
                    // Only the context's namespace may be listed: its batches by name.
                    Err(kube::Error::Api(status)) if status.code == 403 => {
                        (list(Api::namespaced(client, &here)).await?, Naming::In(here))
                    }
                    listed => (listed?, Naming::From(here)),
                }
            }
        };
        Ok(batch_names(&batches, action, &naming))
    });
    matching(names, current)
}

/// The action of the line (`force --approve` approves too); `None` when none is named.
pub fn action_of(words: &[String]) -> Option<BatchAction> {
    let approve = words.iter().any(|word| word == "--approve");
    let actions = [
        BatchAction::Approve,
        BatchAction::Force { approve },
        BatchAction::Hold,
        BatchAction::Release,
        BatchAction::Cancel,
        BatchAction::Retry,
        BatchAction::Undo,
    ];
    words.iter().find_map(|word| actions.into_iter().find(|action| action.verb() == word))
}

/// The batches `action` accepts (every open or Failed one without an action), named by `naming`.
pub fn batch_names(batches: &[RotationBatch], action: Option<BatchAction>, naming: &Naming) -> Vec<String> {
    use kube::ResourceExt as _;
    batches
        .iter()
        .filter(|batch| match naming {
            Naming::In(namespace) => batch.namespace().as_deref() == Some(namespace.as_str()),
            Naming::Everywhere | Naming::From(_) => true,
        })
        .filter(|batch| match action {
            Some(action) => action.refusal(batch).is_none(),
            None => !batch.is_terminal() || batch.phase() == crate::api::BatchPhase::Failed,
        })
        .map(|batch| {
            let (namespace, name) = (batch.namespace().unwrap_or_default(), batch.name_any());
            match naming {
                Naming::In(_) => name,
                Naming::From(here) if *here == namespace => name,
                Naming::From(_) | Naming::Everywhere => format!("{namespace}/{name}"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(namespace: &str, name: &str, phase: &str) -> RotationBatch {
        crate::api::rotation_batch::testing::batch(
            serde_json::json!({"metadata": {"name": name, "namespace": namespace}, "status": {"phase": phase}}),
        )
    }

    /// Each action offers the batches it accepts, named as it takes them.
    #[test]
    fn each_action_offers_the_batches_it_accepts_named_as_it_takes_them() {
        let batches = [
            batch("shop", "waiting", "AwaitingApproval"),
            batch("hr", "rolling", "RollingOut"),
            batch("shop", "done", "Succeeded"),
            batch("shop", "failed", "Failed"),
        ];
        // A Failed batch with a stalled Deployment: what retry and undo act on.
        let mut batches = batches;
        if let Some(status) = batches[3].status.as_mut() {
            status.deployments = vec![
                serde_json::from_value(serde_json::json!({"name": "srv", "version": "v1", "workload": "srv",
                    "action": "Restart", "state": "Stalled"}))
                .expect("deployment"),
            ];
        }
        let here = Naming::From("shop".into());
        let words = |line: &str| line.split(' ').map(str::to_string).collect::<Vec<_>>();
        let offered = |line: &str, naming: &Naming| batch_names(&batches, action_of(&words(line)), naming);
        assert_eq!(offered("capdeck approve ", &here), ["waiting"]);
        assert_eq!(offered("capdeck hold ", &here), ["waiting", "hr/rolling"]);
        assert_eq!(offered("capdeck retry ", &here), ["failed"]);
        assert_eq!(offered("capdeck -A cancel ", &Naming::Everywhere), ["shop/waiting", "hr/rolling"]);
        assert_eq!(offered("capdeck -n hr cancel ", &Naming::In("hr".into())), ["rolling"]);
        assert_eq!(action_of(&words("capdeck force --approve ")), Some(BatchAction::Force { approve: true }));
    }
}
