use std::process::ExitCode;

fn main() -> ExitCode {
    // clap exits with 2 on usage errors and 0 for --help/--version.
    let cli = capdeck::cli::Cli::parse_checked(std::env::args_os()).unwrap_or_else(|error| error.exit());
    match capdeck::commands::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(1)
        }
    }
}
