//! `capdeck bench ...`: run a measurement and print it.

use std::io::Write as _;
use std::process::ExitCode;

use serde_json::Value;

use crate::bench;
use crate::cli::BenchCommand;
use crate::output::{OutputFormat, Table};

pub async fn run(command: BenchCommand, max_parallel_rollouts: usize) -> anyhow::Result<ExitCode> {
    let (report, format) = match command {
        BenchCommand::Sandbox(args) => {
            (bench::sandbox::run(&bench::sandbox::SandboxBench { objects: args.objects }).await?, args.output)
        }
        BenchCommand::Engine(args) => (bench::engine::run(&args, max_parallel_rollouts).await?, args.output),
        BenchCommand::Console(args) => (bench::console::run(&args).await?, args.output),
    };
    let text = match format {
        OutputFormat::Json => crate::output::json(&report),
        OutputFormat::Table => report_table(&report),
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// A report object as two columns, in the report's key order.
fn report_table(report: &Value) -> String {
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
    table.render()
}
