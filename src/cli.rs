//! The command line: clap derive types only. `commands` runs them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::output::OutputFormat;

#[derive(Debug, Parser)]
#[command(
    name = "capdeck",
    version,
    about = "Operations console and credential-rollout engine for SAP CAP Operator workloads",
    long_about = "capdeck shows CAPApplications, versions, tenants, tenant operations, pending credential \
rotation batches and rollout progress, and restarts Deployments when their BTP service credential \
Secrets rotate (batched, approvable, paced).",
    after_help = "Exit codes: 0 ok, 1 failure, 2 usage error.",
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compute the credential rollout plan from manifest files, offline
    #[command(long_about = "Compute the credential rollout plan from manifest files, offline.\n\n\
Every binding Secret referenced by an opted-in CAPApplication counts as rotated (the engine's \
start-up re-check). For each affected Deployment the plan says restart, unchanged or missing, \
comparing the VCAP_SERVICES payload with the Secret the Deployment references now.\n\n\
Exit codes: 0 when a plan was computed (problems included), 1 when input cannot be read or \
parsed, 2 for usage errors.")]
    Plan(PlanArgs),
    /// Print the CustomResourceDefinitions capdeck knows (CAP Operator kinds and RotationBatch)
    #[command(long_about = "Print the CustomResourceDefinitions of every kind capdeck knows: the CAP \
Operator's sme.sap.com/v1alpha1 kinds and capdeck.dev/v1alpha1 RotationBatch.\n\n\
Example: capdeck crds | kubectl apply -f -")]
    Crds(CrdsArgs),
    /// Run the sandbox cluster: an in-memory Kubernetes API server for kubectl and capdeck
    #[command(long_about = "Run the sandbox cluster: an in-memory Kubernetes API server that kubectl, kube-rs \
and capdeck can use. It writes a kubeconfig once it listens, prints the URL and a KUBECONFIG hint, and \
runs until SIGINT or SIGTERM (exit 0).\n\nExample:\n  capdeck sandbox --seed demo --simulate-workloads \
--kubeconfig-out /tmp/sandbox.kubeconfig\n  KUBECONFIG=/tmp/sandbox.kubeconfig kubectl get cat -A")]
    Sandbox(SandboxArgs),
    /// Measure capdeck: the sandbox API server, the engine, the console
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Request latency and memory of the sandbox API server holding N objects (kube client over HTTP)
    Sandbox(BenchSandboxArgs),
}

#[derive(Debug, Args)]
pub struct BenchSandboxArgs {
    /// How many Secrets to create
    #[arg(long, default_value_t = 10_000)]
    pub objects: usize,
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// Address to listen on (port 0 picks a free port)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: std::net::SocketAddr,
    /// Where to write the kubeconfig [default: <temp dir>/capdeck-sandbox/kubeconfig]
    #[arg(long, value_name = "PATH")]
    pub kubeconfig_out: Option<PathBuf>,
    /// What the cluster starts with: `empty` (namespaces only) or `demo` (CRDs and four CAP applications)
    #[arg(long, value_enum, default_value_t = Seed::Empty)]
    pub seed: Seed,
    /// Move Deployment status through rolling updates and complete Jobs, like a real cluster
    #[arg(long)]
    pub simulate_workloads: bool,
    /// Replicas per second a simulated rollout progresses
    #[arg(long, value_name = "N", default_value_t = 1.0, requires = "simulate_workloads")]
    pub pace: f64,
    /// Rotate a random binding Secret every 20-40 s
    #[arg(long)]
    pub rotate_credentials: bool,
    /// Who SelfSubjectReview says you are
    #[arg(long, value_name = "NAME", default_value = "sandbox-admin")]
    pub user: String,
    /// Deny VERB:RESOURCE (e.g. patch:rotationbatches, *:secrets): access reviews say no, writes get 403; repeatable
    #[arg(long, value_name = "VERB:RESOURCE")]
    pub deny: Vec<crate::sandbox::DenyRule>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Seed {
    Empty,
    Demo,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Manifest file or directory (every *.yaml, *.yml, *.json below it); repeatable
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    pub files: Vec<PathBuf>,
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Include the VCAP_SERVICES payloads (credential values!) in the output
    #[arg(long)]
    pub show_secrets: bool,
}

#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Output format of the definitions
    #[arg(short = 'o', long = "output", value_enum, default_value_t = CrdFormat::Yaml)]
    pub output: CrdFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CrdFormat {
    Yaml,
    Json,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
