//! `capdeck bench ...`: run a measurement and print it.

use std::io::Write as _;
use std::process::ExitCode;

use serde_json::Value;

use crate::bench;
use crate::cli::BenchCommand;
use crate::output::Table;

pub async fn run(command: BenchCommand) -> anyhow::Result<ExitCode> {
    let output = match &command {
        BenchCommand::Sandbox(args) => args.output,
        BenchCommand::Engine(args) => args.output,
        BenchCommand::Console(args) => args.output,
    };
    output.refuse_name("bench").map_err(|error| crate::commands::UsageError(error.to_string()))?;
    let (report, output) = match command {
        BenchCommand::Sandbox(args) => {
            (bench::sandbox::run(&bench::sandbox::SandboxBench { objects: args.objects }).await?, args.output)
        }
        BenchCommand::Engine(args) => {
            let parallel = usize::try_from(args.max_parallel_rollouts).unwrap_or(usize::MAX);
            let engine = bench::engine::EngineBench {
                apps: args.apps,
                deployments_per_app: args.deployments_per_app,
                services_per_app: args.services_per_app,
                unreferenced_secrets: args.unreferenced_secrets,
                rotate: args.rotate,
                pace: args.pace,
                windows: if args.natural_windows {
                    bench::engine::WindowEnd::Natural
                } else {
                    bench::engine::WindowEnd::Forced
                },
            };
            (bench::engine::run(&engine, parallel).await?, args.output)
        }
        BenchCommand::Console(args) => {
            let console = bench::console::ConsoleBench { tenants: args.tenants, idle_seconds: args.idle_seconds };
            (bench::console::run(&console).await?, args.output)
        }
    };
    let text = crate::output::render_object(&output, "bench", &report, |_wide, headers| report_table(&report, headers))
        .map_err(|error| crate::commands::UsageError(error.to_string()))?;
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// A report object as two columns, in the report's key order.
fn report_table(report: &Value, headers: bool) -> String {
    let mut table = Table::new(&["METRIC", "VALUE"]);
    if let Some(object) = report.as_object() {
        for (key, value) in object {
            let text = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            table.row(vec![key.clone(), text]);
        }
    }
    table.render_with(false, headers)
}
