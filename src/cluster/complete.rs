//! Dynamic shell completion of what only the kubeconfig or the cluster knows: contexts and
//! namespaces here, the batches an action accepts in `cli::complete`. The shell asks capdeck
//! itself (`capdeck completion SHELL` registers that); `capdeck __complete` and kubectl's plugin
//! completion use the same completers. A completer is handed only the word being completed; the
//! line's `--kubeconfig`, `--context`, `-n` and `-A` are read from this process's arguments
//! (`line`). A cluster that does not answer within two seconds, or refuses, offers nothing:
//! completion never hangs a shell, and never prints an error into it.

use std::ffi::OsStr;
use std::future::Future;
use std::time::Duration;

use clap_complete::engine::CompletionCandidate;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};

use super::{ClusterTarget, Connection};

/// How long a completer waits for the cluster, connecting included.
const WAIT: Duration = Duration::from_secs(2);

/// The kubeconfig's contexts (`--context`), from the kubeconfig the line names.
pub fn contexts(current: &OsStr) -> Vec<CompletionCandidate> {
    matching(line().context_names().unwrap_or_default(), current)
}

/// The namespaces the line's context may list (`-n`).
pub fn namespaces(current: &OsStr) -> Vec<CompletionCandidate> {
    let names = ask(&line(), |connection| async move {
        let api: Api<Namespace> = Api::all(connection.client);
        let listed = api.list_metadata(&ListParams::default()).await?;
        Ok(listed.items.into_iter().filter_map(|namespace| namespace.metadata.name).collect())
    });
    matching(names, current)
}

/// The cluster flags of the command line being completed. A completer is handed only its own
/// word, but the shell's words are this process's arguments (`capdeck -- capdeck WORDS` from the
/// shell's script, `capdeck __complete WORDS` from kubectl).
pub fn line() -> ClusterTarget {
    cluster_args_of(&std::env::args().collect::<Vec<_>>())
}

/// `--kubeconfig`, `--context`, `-n`/`--namespace` and `-A` among `words` (the last one given
/// wins, as for clap; an empty value, the word being completed, is none).
pub fn cluster_args_of(words: &[String]) -> ClusterTarget {
    let mut args = ClusterTarget::default();
    let mut words = words.iter();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_string())),
            _ => (word.as_str(), None),
        };
        let mut value = || inline.clone().or_else(|| words.next().cloned()).filter(|value| !value.is_empty());
        match flag {
            "-n" | "--namespace" => args.namespace = value(),
            "--context" => args.context = value(),
            "--kubeconfig" => args.kubeconfig = value().map(std::path::PathBuf::from),
            "-A" | "--all-namespaces" => args.all_namespaces = true,
            _ => {}
        }
    }
    args
}

/// The names that begin with the word being completed, sorted, once each.
pub fn matching(mut names: Vec<String>, current: &OsStr) -> Vec<CompletionCandidate> {
    let current = current.to_string_lossy();
    names.retain(|name| name.starts_with(current.as_ref()));
    names.sort();
    names.dedup();
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// Ask the cluster `args` name, within [`WAIT`]; nothing on any failure. The wait bounds what
/// capdeck waits for; an exec credential plugin it started may run on after it (its own time).
pub fn ask<F, Fut>(args: &ClusterTarget, query: F) -> Vec<String>
where
    F: FnOnce(Connection) -> Fut,
    Fut: Future<Output = Result<Vec<String>, kube::Error>>,
{
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return Vec::new();
    };
    runtime.block_on(async {
        let asked = async {
            let connection = args.connect().await.ok()?;
            query(connection).await.ok()
        };
        tokio::time::timeout(WAIT, asked).await.ok().flatten().unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_cluster_flags_are_read_as_clap_reads_them() {
        let words = |line: &str| line.split(' ').map(str::to_string).collect::<Vec<_>>();
        let args = cluster_args_of(&words("capdeck -- capdeck --context prod -n shop approve "));
        assert_eq!(
            (args.context.as_deref(), args.namespace.as_deref(), args.all_namespaces),
            (Some("prod"), Some("shop"), false)
        );
        let args = cluster_args_of(&words("capdeck __complete --namespace=hr --kubeconfig=/k -A hold"));
        assert_eq!(args.namespace.as_deref(), Some("hr"));
        assert_eq!(args.kubeconfig, Some(std::path::PathBuf::from("/k")));
        assert!(args.all_namespaces);
        // The word being completed after -n is no namespace yet.
        assert_eq!(cluster_args_of(&words("capdeck -- capdeck -n ")).namespace, None);
        let found: Vec<String> = matching(vec!["hr/b".into(), "a".into(), "a".into()], OsStr::new("a"))
            .iter()
            .map(|candidate| candidate.get_value().to_string_lossy().into_owned())
            .collect();
        assert_eq!(found, ["a"]);
    }
}
