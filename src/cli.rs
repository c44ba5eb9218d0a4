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
