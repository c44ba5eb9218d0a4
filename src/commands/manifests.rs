//! `capdeck manifests`: what runs `capdeck --daemon` in a cluster.

use std::io::Write as _;
use std::process::ExitCode;

use crate::cli::ManifestsArgs;

/// The deploy manifests, in an order `kubectl apply -f -` accepts on an empty cluster (the
/// Namespace before what lives in it), embedded at build time.
pub const FILES: &[(&str, &str)] = &[
    ("namespace.yaml", include_str!("../../assets/deploy/namespace.yaml")),
    ("serviceaccount.yaml", include_str!("../../assets/deploy/serviceaccount.yaml")),
    ("clusterrole.yaml", include_str!("../../assets/deploy/clusterrole.yaml")),
    ("clusterrolebinding.yaml", include_str!("../../assets/deploy/clusterrolebinding.yaml")),
    ("role.yaml", include_str!("../../assets/deploy/role.yaml")),
    ("rolebinding.yaml", include_str!("../../assets/deploy/rolebinding.yaml")),
    ("deployment.yaml", include_str!("../../assets/deploy/deployment.yaml")),
    ("service.yaml", include_str!("../../assets/deploy/service.yaml")),
    ("admissionpolicy.yaml", include_str!("../../assets/deploy/admissionpolicy.yaml")),
];

/// The daemon's arguments in the Deployment; `extra` follows the defaults.
const DAEMON_ARGS: &str = r#"args: ["--daemon", "--health-addr", "0.0.0.0:8080", "-A"]"#;

pub fn render(namespace: &str, image: &str, extra: &[String]) -> String {
    let mut args: Vec<String> = ["--daemon", "--health-addr", "0.0.0.0:8080", "-A"].map(String::from).to_vec();
    args.extend(extra.iter().cloned());
    let args = format!("args: {}", serde_json::to_string(&args).unwrap_or_default());
    let mut out = String::new();
    for (_, text) in FILES {
        out.push_str("---\n");
        let text = text.replace("{{NAMESPACE}}", namespace).replace("{{IMAGE}}", image);
        out.push_str(&if extra.is_empty() { text } else { text.replace(DAEMON_ARGS, &args) });
    }
    out
}

pub use crate::engine::config::INSTALL_NAMESPACE as DEFAULT_NAMESPACE;

/// `--notify-secret` without `--cluster-name`: whoever reads the messages of several clusters
/// cannot tell them apart.
fn missing_cluster_name_warning() -> String {
    "warning: --notify-secret without --cluster-name: the daemon's notifications will name this cluster \
     `in-cluster` (a Pod has no kubeconfig context); add --cluster-name NAME (e.g. --cluster-name prod-eu10)"
        .into()
}

pub fn run(namespace: Option<&str>, args: &ManifestsArgs) -> anyhow::Result<ExitCode> {
    let namespace = namespace.unwrap_or(DEFAULT_NAMESPACE);
    if !crate::api::common::is_dns_label(namespace) {
        anyhow::bail!("{namespace:?} is not a valid namespace name (lowercase letters, digits and '-')");
    }
    // The daemon refuses to start without a plain cluster name when an incident service is among
    // its receivers: refuse here, before the Pod crash-loops.
    let incidents =
        args.notify_secret.iter().find(|secret| secret.prefix.format.is_some_and(|f| f.takes_incidents_only()));
    if let Some(secret) = incidents
        && args.cluster_name.as_deref().is_none_or(|name| name == crate::cluster::IN_CLUSTER_CONTEXT)
    {
        anyhow::bail!(
            "--notify-secret {}: an incident service's keys carry the cluster's name, and every cluster without \
             one is called `{}`: add --cluster-name NAME (e.g. --cluster-name prod-eu10), another name than that",
            secret,
            crate::cluster::IN_CLUSTER_CONTEXT
        );
    }
    // The daemon refuses two receivers of one name (the same Secret key twice is two of one URL).
    let mut called = std::collections::BTreeSet::new();
    for secret in &args.notify_secret {
        let name = secret.prefix.name.clone().unwrap_or_else(|| secret.secret.to_string());
        if !called.insert(name.clone()) {
            anyhow::bail!(
                "--notify-secret {secret}: two receivers would be called {name}, which the daemon refuses at \
                 start: give each its own NAME@, and list each Secret key once"
            );
        }
    }
    let mut extra = Vec::new();
    for secret in &args.notify_secret {
        extra.extend(["--notify-secret".to_string(), secret.to_string()]);
    }
    if let Some(signing) = &args.notify_signing_secret {
        extra.extend(["--notify-signing-secret".to_string(), signing.to_string()]);
    }
    if let Some(name) = &args.cluster_name {
        extra.extend(["--cluster-name".to_string(), name.clone()]);
    } else if !args.notify_secret.is_empty() {
        // In a Pod there is no kubeconfig context: the daemon calls its cluster what
        // `ClusterTarget::connect` calls an in-cluster connection, and every message says so.
        crate::safe_eprintln!("{}", missing_cluster_name_warning());
    }
    std::io::stdout().lock().write_all(render(namespace, &args.image, &extra).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_daemon_args_are_found_and_extended() {
        let plain = super::render("capdeck-system", "img", &[]);
        assert!(plain.contains(super::DAEMON_ARGS), "the template has the daemon's args as DAEMON_ARGS says");
        let extra = ["--notify-secret".to_string(), "capdeck-system/notify:url".to_string()];
        let with = super::render("capdeck-system", "img", &extra);
        assert!(
            with.contains(r#"args: ["--daemon","--health-addr","0.0.0.0:8080","-A","--notify-secret","capdeck-system/notify:url"]"#),
            "{with}"
        );
    }
}
