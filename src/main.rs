use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Run as `kubectl_complete-capdeck` (kubectl completing `kubectl capdeck ...`) or as
    // `capdeck __complete ...`: print the completions, nothing else. As `kubectl-capdeck`, clap
    // names the program `kubectl capdeck` (see `cli::invoked_as`).
    if let Some(words) = capdeck::commands::kubectl_plugin::completion_request(&args) {
        return capdeck::commands::kubectl_plugin::print_completions(&words);
    }
    // A shell asking for completions (`capdeck completion SHELL` registered it): answered, exits.
    capdeck::commands::complete_if_asked();
    // clap exits with 2 on usage errors and 0 for --help/--version.
    let cli = capdeck::cli::Cli::parse_checked(args).unwrap_or_else(|error| capdeck::commands::exit_with(&error));
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
