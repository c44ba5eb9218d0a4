//! The engine's settings from its flags and the environment, for the daemon, the console, the
//! demo and `doctor`: `$ROLLOUT_DELAY` is read here, as the CAP Operator reads it.

use crate::cli::EngineArgs;
use crate::engine::config::{EngineConfig, LeaseSettings, parse_rollout_delay};
use crate::engine::settings::{EngineSettings, NotifySources};

/// The engine's settings: the window from `--rollout-delay`, else `$ROLLOUT_DELAY`.
pub fn engine_settings(args: &EngineArgs) -> EngineSettings {
    // The flag was checked by clap; the environment keeps the CAP Operator's lenient rules.
    let from_env = std::env::var("ROLLOUT_DELAY").ok();
    with_window(args, args.rollout_delay.as_deref().or(from_env.as_deref()))
}

/// The demo's: its own window (the environment is not read), its Lease in the install namespace,
/// and its engine leading unless told to observe.
#[cfg(feature = "sandbox")]
pub fn demo_engine_settings(args: &EngineArgs) -> EngineSettings {
    use crate::engine::config::{EngineMode, INSTALL_NAMESPACE};
    let mut settings = with_window(args, Some(crate::demo::DEMO_WINDOW));
    settings.lease_namespace = Some(INSTALL_NAMESPACE.into());
    if settings.base.mode == EngineMode::Auto {
        settings.base.mode = EngineMode::Lead;
    }
    settings
}

/// The settings with the window `raw` (a bad value means 1h, with a warning to say).
fn with_window(args: &EngineArgs, raw: Option<&str>) -> EngineSettings {
    let (rollout_delay, delay_warning) = parse_rollout_delay(raw);
    let base = EngineConfig {
        rollout_delay,
        approval: args.approval,
        max_parallel_rollouts: usize::try_from(args.max_parallel_rollouts).unwrap_or(usize::MAX),
        min_rollout_interval: args.min_rollout_interval,
        write_rate: (args.write_qps, args.write_burst),
        expected_rollout: args.expected_rollout,
        halt_on_failure: args.halt_on_failure,
        readiness_timeout: args.readiness_timeout,
        change_windows: args.change_windows.clone().and_then(|windows| windows.0),
        on_deadline: args.on_deadline,
        mode: args.mode,
        lease: LeaseSettings { name: args.lease_name.clone(), ..LeaseSettings::default() },
        ..EngineConfig::default()
    };
    EngineSettings {
        base,
        lease_namespace: args.lease_namespace.clone(),
        delay_warning,
        notify: NotifySources {
            urls: args.notify.clone(),
            secrets: args.notify_secret.clone(),
            signing: args.notify_signing_secret.clone(),
            cluster_name: args.cluster_name.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser as _;

    use super::*;
    use crate::cli::Cli;

    fn engine_args(argv: &[&str]) -> EngineArgs {
        Cli::try_parse_from(argv).expect("parses").engine
    }

    #[test]
    fn the_flags_become_the_engine_config_and_the_connection_names_the_lease_namespace() {
        let argv = ["capdeck", "--rollout-delay", "5m", "--lease-name", "mine", "--max-parallel-rollouts", "2"];
        let settings = engine_settings(&engine_args(&argv));
        let (config, warning) = settings.config("team-a");
        assert_eq!((config.rollout_delay, warning), (Duration::from_secs(300), None));
        assert_eq!(config.lease.name, "mine");
        assert_eq!(config.max_parallel_rollouts, 2);
        // $POD_NAMESPACE is --lease-namespace's environment variable.
        if std::env::var_os("POD_NAMESPACE").is_none() {
            assert_eq!(config.lease.namespace, "team-a", "the connection's namespace, as kubectl's -n");
        }
        let settings = engine_settings(&engine_args(&["capdeck", "--lease-namespace", "ops"]));
        assert_eq!(settings.config("team-a").0.lease.namespace, "ops");
        assert!(settings.notify.is_empty());
        let settings = engine_settings(&engine_args(&["capdeck", "--notify-secret", "ops/hook:url"]));
        assert!(!settings.notify.is_empty());
    }

    #[test]
    fn the_demo_has_its_window_and_lease_namespace_and_leads_unless_told_to_observe() {
        use crate::engine::config::{EngineMode, INSTALL_NAMESPACE};
        let argv = ["capdeck", "--engine", "auto", "--rollout-delay", "5m", "--lease-namespace", "ops"];
        let settings = demo_engine_settings(&engine_args(&argv));
        let (config, warning) = settings.config("default");
        assert_eq!((config.rollout_delay, warning), (Duration::from_secs(30), None));
        assert_eq!(config.lease.namespace, INSTALL_NAMESPACE);
        assert_eq!(config.mode, EngineMode::Lead);
        let observing = demo_engine_settings(&engine_args(&["capdeck", "--engine", "observe"]));
        assert_eq!(observing.base.mode, EngineMode::Observe);
    }
}
