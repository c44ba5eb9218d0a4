use std::process::ExitCode;

fn main() -> ExitCode {
    // clap exits with 2 on usage errors and 0 for --help/--version.
    let cli = capdeck::cli::Cli::parse_checked(std::env::args_os())
        .unwrap_or_else(|error| capdeck::commands::exit_with(&error));
    match capdeck::commands::run(cli) {
        Ok(code) => code,
        // `capdeck crds | head -1`: the reader left, which is no failure of ours.
        Err(error) if capdeck::commands::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => match error.downcast_ref::<capdeck::commands::UsageError>() {
            Some(usage) => {
                capdeck::safe_eprintln!("error: {usage}\n\nFor more information, try '--help'.");
                ExitCode::from(2)
            }
            None => {
                capdeck::safe_eprintln!("error: {error:#}");
                ExitCode::from(1)
            }
        },
    }
}
