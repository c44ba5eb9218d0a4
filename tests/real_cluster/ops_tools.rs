//! The operations tools the chart, the alert rules and the dashboard are checked with: helm 3
//! and 4, promtool and the prometheus-operator CRDs, built by `tools/ops/build.sh` (pinned, from
//! the Go module proxy). Found through `CAPDECK_HELM`, `CAPDECK_HELM4`, `CAPDECK_PROMTOOL` and
//! `CAPDECK_PROMETHEUS_OPERATOR_CRDS`, else in the build script's cache. Without them their
//! trials are ignored (the reason printed); with `CAPDECK_REQUIRE_REAL_CLUSTER=1` (CI) the run fails.

use std::path::{Path, PathBuf};

/// One tool: its environment variable, where `tools/ops/build.sh` caches it, how to build it.
pub struct Tool {
    pub env: &'static str,
    /// Path below the cache root (`<cache>/ops/...`).
    pub cached: &'static str,
    pub build: &'static str,
}

pub const HELM: Tool =
    Tool { env: "CAPDECK_HELM", cached: "ops/helm-v3.22.0-linux-amd64/helm", build: "bash tools/ops/build.sh helm" };
/// Helm 4: installs and upgrades with server-side apply (Helm 3 with a three-way merge).
pub const HELM4: Tool =
    Tool { env: "CAPDECK_HELM4", cached: "ops/helm-v4.3.1-linux-amd64/helm", build: "bash tools/ops/build.sh helm4" };
pub const PROMTOOL: Tool = Tool {
    env: "CAPDECK_PROMTOOL",
    cached: "ops/promtool-v0.316.0-linux-amd64/promtool",
    build: "bash tools/ops/build.sh promtool",
};

fn cache_root() -> Option<PathBuf> {
    if let Ok(root) = std::env::var("CAPDECK_ENVTEST_CACHE") {
        return Some(PathBuf::from(root));
    }
    let data = std::env::var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .ok()
        .or_else(|| std::env::var("HOME").ok().map(|home| Path::new(&home).join(".local/share")))?;
    Some(data.join("kubebuilder-envtest"))
}

/// The tool's binary, or why it is not at hand (with the command that builds it).
pub fn find(tool: &Tool) -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var(tool.env) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{}={} is not a file; build it with `{}`", tool.env, path.display(), tool.build))
        };
    }
    let cached = cache_root().map(|root| root.join(tool.cached));
    match cached {
        Some(path) if path.is_file() => Ok(path),
        _ => Err(format!("{} is not set and the tool is not cached; build it with `{}`", tool.env, tool.build)),
    }
}

/// The prometheus-operator CRD directory (ServiceMonitor, PodMonitor, PrometheusRule, ...).
pub fn prometheus_operator_crds() -> Result<PathBuf, String> {
    let build = "bash tools/ops/build.sh prometheus-operator-crds";
    let dir = match std::env::var("CAPDECK_PROMETHEUS_OPERATOR_CRDS") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) => {
            let output = std::process::Command::new("bash")
                .args(["tools/ops/build.sh", "prometheus-operator-crds"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .map_err(|error| format!("cannot run `{build}`: {error}"))?;
            if !output.status.success() {
                return Err(format!(
                    "`{build}` failed: {}",
                    String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or_default()
                ));
            }
            PathBuf::from(String::from_utf8_lossy(&output.stdout).lines().last().unwrap_or_default().trim())
        }
    };
    if dir.join("monitoring.coreos.com_servicemonitors.yaml").is_file() {
        Ok(dir)
    } else {
        Err(format!("{} holds no monitoring.coreos.com_servicemonitors.yaml; run `{build}`", dir.display()))
    }
}

/// The repository's chart directory.
pub fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/capdeck")
}

/// Run a tool; its stdout, or a message with its stderr.
pub fn run(binary: &Path, args: &[&str]) -> Result<String, String> {
    let mut command = std::process::Command::new(binary);
    command.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    stdout_of(command, &format!("{} {}", binary.display(), args.join(" ")))
}

/// Run `command` (named `what` in messages); its stdout, or a message with its stderr.
pub fn stdout_of(mut command: std::process::Command, what: &str) -> Result<String, String> {
    let output = command.output().map_err(|error| format!("cannot run {what}: {error}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{what} failed ({}):\n{stdout}\n{}", output.status, String::from_utf8_lossy(&output.stderr)))
    }
}
