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
];

pub fn render(namespace: &str, image: &str) -> String {
    let mut out = String::new();
    for (_, text) in FILES {
        out.push_str("---\n");
        out.push_str(&text.replace("{{NAMESPACE}}", namespace).replace("{{IMAGE}}", image));
    }
    out
}

pub use crate::engine::config::INSTALL_NAMESPACE as DEFAULT_NAMESPACE;

pub fn run(namespace: Option<&str>, args: &ManifestsArgs) -> anyhow::Result<ExitCode> {
    let namespace = namespace.unwrap_or(DEFAULT_NAMESPACE);
    let valid = |name: &str| {
        !name.is_empty()
            && name.len() <= 63
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if !valid(namespace) {
        anyhow::bail!("{namespace:?} is not a valid namespace name (lowercase letters, digits and '-')");
    }
    std::io::stdout().lock().write_all(render(namespace, &args.image).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
