//! `capdeck fleet [--contexts all|a,b] [--timeout 5s] [-o table|wide|json|yaml]`: what is open
//! in every kube context.

use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;

use crate::cli::FleetArgs;
use crate::cluster::ClusterTarget;
use crate::fleet::{FleetOptions, read_fleet};

pub async fn run(cluster: &ClusterTarget, args: &FleetArgs) -> anyhow::Result<ExitCode> {
    // `-o name` is no value of fleet's `-o` (DocumentFormat): clap refuses it with the list.
    let output = crate::output::OutputArgs::from(args.output);
    let contexts = args.contexts.resolve(cluster.context_names()?);
    if contexts.is_empty() {
        anyhow::bail!(
            "the kubeconfig has no contexts to read (set KUBECONFIG or pass --kubeconfig; kubectl config get-contexts \
             lists them)"
        );
    }
    let options = FleetOptions {
        timeout: args.timeout,
        window: args.rollout_delay,
        expected_rollout: args.expected_rollout,
        lease_namespace: args.lease_namespace.clone(),
        lease_name: args.lease_name.clone(),
        namespace: if cluster.all_namespaces { None } else { cluster.namespace.clone() },
    };
    let rows = read_fleet(cluster, &contexts, &options).await;
    let now = Timestamp::now();
    let document = serde_json::json!({ "fleet": rows });
    let text = crate::output::render_object(&output, "fleet", &document, |wide, headers| {
        crate::fleet::table(&rows, now, wide, headers)
    })
    .map_err(|error| super::UsageError(error.to_string()))?;
    crate::output::print(&text)?;
    let unread: Vec<&str> = rows.iter().filter(|row| !row.state.is_read()).map(|row| row.context.as_str()).collect();
    if unread.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    crate::safe_eprintln!(
        "error: {} of {} context(s) could not be read: {}",
        unread.len(),
        contexts.len(),
        unread.join(", ")
    );
    Ok(ExitCode::from(1))
}
