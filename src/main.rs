use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    // clap exits with 2 on usage errors and 0 for --help/--version.
    let cli = capdeck::cli::Cli::parse();
    match capdeck::commands::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(1)
        }
    }
}
