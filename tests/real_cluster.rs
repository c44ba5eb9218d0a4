//! capdeck's cluster-facing stories on two backends: the sandbox and a real kube-apiserver +
//! etcd (built by `tools/envtest/build.sh`, or found through `KUBEBUILDER_ASSETS` /
//! `TEST_ASSET_*` like controller-runtime's envtest). Each story body runs once per backend.
//!
//! Also the other real programs: the built kubectl (and any other kubectl here) against the
//! sandbox, and the real capdeck binary driven in tmux.
//!
//! Without the real binaries the kube-apiserver variants are reported as *ignored* (the reason is
//! printed first); with `CAPDECK_REQUIRE_REAL_CLUSTER=1` (CI) a missing binary, a missing tmux or
//! a control plane that does not start fails the run instead. Extra kubectl minors stay optional.

#[path = "common/mod.rs"]
#[allow(unused_imports, unused_macros)]
mod common;

#[path = "real_cluster/alert_rules.rs"]
mod alert_rules;
#[path = "real_cluster/attribution_stories.rs"]
mod attribution_stories;
#[path = "real_cluster/bounded_stories.rs"]
mod bounded_stories;
#[path = "real_cluster/chart.rs"]
mod chart;
#[path = "real_cluster/control_plane.rs"]
mod control_plane;
#[path = "real_cluster/dashboard.rs"]
mod dashboard;
#[path = "real_cluster/deadline_stories.rs"]
mod deadline_stories;
#[path = "real_cluster/differential.rs"]
mod differential;
#[path = "real_cluster/engine_stories.rs"]
mod engine_stories;
#[path = "real_cluster/fault_stories.rs"]
mod fault_stories;
#[path = "real_cluster/fleet_stories.rs"]
mod fleet_stories;
#[path = "real_cluster/freeze_stories.rs"]
mod freeze_stories;
#[path = "real_cluster/hostile_stories.rs"]
mod hostile_stories;
#[path = "real_cluster/install_stories.rs"]
mod install_stories;
#[path = "real_cluster/kubectl_compat.rs"]
mod kubectl_compat;
#[path = "real_cluster/kubectl_plugin.rs"]
mod kubectl_plugin;
#[path = "real_cluster/ops_tools.rs"]
mod ops_tools;
#[path = "real_cluster/process_stories.rs"]
mod process_stories;
#[path = "real_cluster/setup.rs"]
mod setup;
#[path = "real_cluster/tmux_console.rs"]
mod tmux_console;
#[path = "real_cluster/upstream.rs"]
mod upstream;
#[path = "real_cluster/upstream_stories.rs"]
mod upstream_stories;
#[path = "real_cluster/vcap_corpus.rs"]
mod vcap_corpus;
#[path = "real_cluster/window_stories.rs"]
mod window_stories;
#[path = "real_cluster/workload_stories.rs"]
mod workload_stories;
#[path = "real_cluster/world.rs"]
mod world;

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;

use libtest_mimic::{Arguments, Failed, Trial};
use world::Backend;

type Story = fn(Backend) -> Pin<Box<dyn Future<Output = ()> + Send>>;

macro_rules! stories {
    ($($module:ident :: $name:ident $(only $only:ident)?),* $(,)?) => {
        vec![$((
            concat!(stringify!($module), "::", stringify!($name)),
            (|backend| Box::pin($module::$name(backend))) as Story,
            stories!(@backends $($only)?),
        )),*]
    };
    (@backends) => { &[Backend::Sandbox, Backend::KubeApiserver][..] };
    (@backends real) => { &[Backend::KubeApiserver][..] };
}

fn all_stories() -> Vec<(&'static str, Story, &'static [Backend])> {
    stories![
        engine_stories::rotation_rolls_out_then_deletes_previous_secrets,
        engine_stories::start_up_with_everything_current_writes_nothing,
        engine_stories::start_up_recheck_opens_a_batch_only_for_real_differences,
        engine_stories::manual_approval_then_rolls,
        engine_stories::force_ends_the_window_now_and_with_approval_rolls_a_manual_batch,
        engine_stories::force_on_a_manual_batch_still_needs_an_approval_unless_given_with_it,
        engine_stories::hold_then_release,
        engine_stories::cancel_rolls_nothing,
        engine_stories::cancel_mid_rollout_lets_rolling_deployments_finish_and_starts_nothing_new,
        engine_stories::storm_guard_asks_for_approval,
        engine_stories::a_stalled_deployment_fails_the_batch_and_keeps_its_previous_secret,
        engine_stories::stale_secrets_are_never_rotations,
        engine_stories::expiring_credentials_end_an_auto_window_early,
        engine_stories::expiring_credentials_escalate_a_manual_batch,
        engine_stories::credentials_the_pods_already_run_are_ok_on_every_surface,
        engine_stories::a_stalled_deployment_halts_the_batch_until_released,
        engine_stories::a_crash_looping_new_pod_halts_the_batch_early,
        engine_stories::a_halted_batch_is_retried_and_rolls_on,
        engine_stories::an_undone_batch_goes_back_to_the_previous_secrets,
        engine_stories::engine_killed_mid_rollout_is_finished_by_the_next,
        engine_stories::two_engines_share_one_lease_and_roll_each_deployment_once,
        engine_stories::next_engine_leads_after_a_graceful_stop,
        engine_stories::engines_of_different_namespaces_both_lead,
        engine_stories::engines_with_different_lease_places_never_lead_the_same_namespaces_at_once,
        engine_stories::the_go_operator_lease_is_watched_in_any_namespace,
        process_stories::daemon_readme_flow_readyz_metrics_json_logs_sigterm,
        process_stories::cli_approve_records_the_identity_the_server_returns,
        process_stories::cli_refuses_a_user_without_patch_permission,
        process_stories::crds_are_accepted_and_kubectl_shows_their_columns,
        process_stories::daemon_as_the_manifests_service_account_completes_a_rotation only real,
        process_stories::doctor_on_a_healthy_and_a_broken_setup,
        process_stories::an_installed_daemon_is_found_and_a_console_never_leads_beside_it,
        process_stories::console_approves_as_the_user_and_refuses_without_permission,
        process_stories::credentials_report_margins_and_verdicts,
        process_stories::pods_pane_shows_replicasets_pods_and_checks_log_permission,
        fault_stories::api_server_restarted_mid_rollout,
        fault_stories::watch_resumes_after_compaction_410,
        fault_stories::concurrent_approvers_one_wins,
        fault_stories::lease_taken_by_another_holder_stops_writes,
        fault_stories::a_leader_whose_renewals_fail_steps_down,
        fault_stories::the_console_lists_the_kind_on_screen_first_and_streams_it,
        fault_stories::where_streaming_lists_are_refused_the_console_lists_in_pages_first,
        fleet_stories::fleet_shows_every_context_and_says_why_one_is_unreachable,
        fleet_stories::notifications_reach_a_loopback_receiver_once_across_a_leader_change,
        install_stories::crds_install_as_the_help_says_and_client_side_apply_is_refused,
        bounded_stories::overlong_and_nul_reasons_are_refused_by_the_api,
        deadline_stories::an_exec_plugin_that_hangs_is_given_up_on_and_a_slow_one_connects,
        attribution_stories::a_kubectl_forged_approval_or_hold_drives_nothing,
        attribution_stories::a_forged_hold_is_not_carried_into_the_batch_that_supersedes_it,
        attribution_stories::the_admission_policy_refuses_an_attribution_in_another_name only real,
        attribution_stories::each_action_on_a_batch_is_an_event_of_its_own,
        window_stories::outside_its_window_a_batch_waits_then_rolls_at_the_opening,
        window_stories::a_deadline_before_the_next_window_escalates_and_notifies,
        window_stories::a_freeze_holds_across_restart_and_leader_change_and_ends_by_unfreeze_or_by_itself,
        window_stories::force_overrides_a_window_and_the_record_says_so,
        window_stories::an_unreadable_window_holds_the_batch_until_it_is_fixed,
        window_stories::a_force_is_carried_into_the_batch_that_supersedes_it,
        freeze_stories::the_admission_policy_refuses_a_freeze_in_another_name only real,
        hostile_stories::hostile_values_in_every_kind_stop_nothing_and_leak_nothing only real,
        hostile_stories::a_rotation_seen_by_a_standby_is_batched_when_it_takes_over,
        hostile_stories::a_workload_added_to_a_version_never_rewrites_another_teams_deployment,
        workload_stories::the_workload_plane_rolls_deployments_and_completes_jobs only real,
        workload_stories::a_multi_replica_rollout_is_followed_as_it_goes,
        workload_stories::new_pods_that_crash_loop_halt_the_batch_at_once_and_undo_goes_back,
        workload_stories::unschedulable_new_pods_say_the_schedulers_reason,
        workload_stories::paused_scaled_to_zero_and_scaled_during_the_rollout,
    ]
}

type UpstreamStory = fn() -> Pin<Box<dyn Future<Output = ()> + Send>>;

fn upstream_stories() -> Vec<(&'static str, UpstreamStory)> {
    vec![
        ("vcap_corpus_is_byte_identical", || Box::pin(upstream_stories::vcap_corpus_is_byte_identical())),
        ("switch_over_both_ways", || Box::pin(upstream_stories::switch_over_both_ways())),
        ("both_running_on_one_application", || Box::pin(upstream_stories::both_running_on_one_application())),
        ("same_choices_for_one_rotation", || Box::pin(upstream_stories::same_choices_for_one_rotation())),
    ]
}

fn run(story: Story, backend: Backend) -> Result<(), Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failed::from(format!("tokio runtime: {e}")))?;
    runtime.block_on(story(backend));
    Ok(())
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // Most stories wait on wall-clock windows and leases, not CPU: run several at once.
    if args.test_threads.is_none() {
        args.test_threads = Some(6);
    }
    let required = std::env::var("CAPDECK_REQUIRE_REAL_CLUSTER").is_ok_and(|v| v == "1");
    let real = world::assets();
    match &real {
        Ok(assets) => {
            let version = std::process::Command::new(&assets.kube_apiserver)
                .arg("--version")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default();
            eprintln!("real control plane: {} ({version})", assets.kube_apiserver.display());
        }
        Err(why) if required => {
            eprintln!("CAPDECK_REQUIRE_REAL_CLUSTER=1 but {why}");
            return ExitCode::FAILURE;
        }
        Err(why) => eprintln!("the kube-apiserver variants are ignored: {why}"),
    }
    let mut trials = Vec::new();
    for (name, story, backends) in all_stories() {
        for &backend in backends {
            let trial = Trial::test(format!("{name}::{}", backend.label()), move || run(story, backend));
            trials.push(trial.with_ignored_flag(backend == Backend::KubeApiserver && real.is_err()));
        }
    }
    trials.push(
        Trial::test("differential::sandbox_vs_kube_apiserver", || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .map_err(|e| Failed::from(e.to_string()))?;
            runtime.block_on(differential::sandbox_vs_kube_apiserver())
        })
        .with_ignored_flag(real.is_err()),
    );
    // The third world: the real Go CAP Operator beside capdeck on its own kube-apiserver.
    let upstream = real.as_ref().map_err(Clone::clone).and_then(|_| upstream::find());
    match &upstream {
        Err(why) if required => {
            eprintln!("CAPDECK_REQUIRE_REAL_CLUSTER=1 but {why}");
            return ExitCode::FAILURE;
        }
        Err(why) => eprintln!("the upstream:: stories (the Go CAP Operator beside capdeck) are ignored: {why}"),
        Ok(found) => eprintln!("Go CAP Operator: {}", found.controller.display()),
    }
    for (name, story) in upstream_stories() {
        let trial = Trial::test(format!("upstream::{name}"), move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| Failed::from(format!("tokio runtime: {e}")))?;
            runtime.block_on(story());
            Ok(())
        });
        trials.push(trial.with_ignored_flag(upstream.is_err()));
    }
    let tmux = tmux_console::available();
    match &tmux {
        Err(why) if required => {
            eprintln!("CAPDECK_REQUIRE_REAL_CLUSTER=1 but {why}");
            return ExitCode::FAILURE;
        }
        Err(why) => eprintln!("tools::tmux_console is ignored: {why}"),
        Ok(()) => {}
    }
    trials.push(
        Trial::test("tools::tmux_console::demo_approve_a_batch_and_quit", || {
            tmux_console::demo_in_tmux_approve_a_batch_and_quit();
            Ok(())
        })
        .with_ignored_flag(tmux.is_err()),
    );
    trials.push(
        Trial::test("tools::tmux_console::demo_at_80x24_every_view", || {
            tmux_console::demo_at_80x24_every_view();
            Ok(())
        })
        .with_ignored_flag(tmux.is_err()),
    );
    // The chart's alert rules and dashboard: promtool checks the rules, runs their unit tests and
    // parses every dashboard expression; the pure checks need no tool.
    let promtool = ops_tools::find(&ops_tools::PROMTOOL);
    match &promtool {
        Err(why) if required => {
            eprintln!("CAPDECK_REQUIRE_REAL_CLUSTER=1 but promtool: {why}");
            return ExitCode::FAILURE;
        }
        Err(why) => eprintln!("tools::promtool is ignored: {why}"),
        Ok(path) => eprintln!("promtool: {}", path.display()),
    }
    type PromtoolCheck = fn(&std::path::Path) -> Result<(), String>;
    let promtool_checks: [(&str, PromtoolCheck); 2] = [
        ("tools::promtool::check_rules", alert_rules::promtool_check_rules),
        ("tools::promtool::test_rules", alert_rules::promtool_test_rules),
    ];
    for (name, check) in promtool_checks {
        let binary = promtool.clone();
        let trial = Trial::test(name, move || check(&binary.map_err(Failed::from)?).map_err(Failed::from));
        trials.push(trial.with_ignored_flag(promtool.is_err()));
    }
    trials.push(Trial::test("tools::alerts::every_alert_has_a_runbook_section_and_a_unit_test", || {
        alert_rules::every_alert_has_a_runbook_section_and_a_unit_test().map_err(Failed::from)
    }));
    trials.push(Trial::test("tools::alerts::every_metric_and_label_in_the_rules_is_in_metrics_md", || {
        alert_rules::every_metric_and_label_in_the_rules_is_in_metrics_md().map_err(Failed::from)
    }));
    trials.push(Trial::test("tools::alerts::every_capdeck_command_in_the_runbook_parses", || {
        alert_rules::every_capdeck_command_in_the_runbook_parses().map_err(Failed::from)
    }));
    let ignored = promtool.is_err();
    let dashboard_promtool = promtool.clone();
    trials.push(
        Trial::test("tools::promtool::dashboard_expressions_parse", move || {
            dashboard::dashboard_expressions_parse(&dashboard_promtool.map_err(Failed::from)?)
        })
        .with_ignored_flag(ignored),
    );
    trials.push(Trial::test("tools::dashboard::every_metric_is_documented", dashboard::every_metric_is_documented));
    let built_kubectl = real.as_ref().ok().map(|assets| assets.kubectl.as_path());
    for (label, binary, minor) in kubectl_compat::kubectls(built_kubectl) {
        let name = format!("tools::kubectl_against_the_sandbox::{label}");
        if let Err(why) = &binary {
            eprintln!("{name} is ignored: {why}");
        }
        let ignored = binary.is_err();
        let trial = Trial::test(name, move || {
            let binary = binary.map_err(Failed::from)?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| Failed::from(e.to_string()))?;
            runtime.block_on(kubectl_compat::scenario(binary, minor));
            Ok(())
        });
        trials.push(trial.with_ignored_flag(ignored));
    }
    // The Helm chart, checked with the real helm 3 and 4 (tools/ops/build.sh).
    let helm = ops_tools::find(&ops_tools::HELM);
    let helm4 = ops_tools::find(&ops_tools::HELM4);
    let prometheus_crds = helm.as_ref().map_err(Clone::clone).and_then(|_| ops_tools::prometheus_operator_crds());
    match (&helm, &prometheus_crds) {
        (Err(why), _) | (_, Err(why)) if required => {
            eprintln!("CAPDECK_REQUIRE_REAL_CLUSTER=1 but {why}");
            return ExitCode::FAILURE;
        }
        (Err(why), _) | (_, Err(why)) => eprintln!("tools::helm and chart:: are ignored: {why}"),
        _ => {}
    }
    match &helm4 {
        Err(why) if required => {
            eprintln!("CAPDECK_REQUIRE_REAL_CLUSTER=1 but {why}");
            return ExitCode::FAILURE;
        }
        Err(why) => eprintln!("tools::helm4 and chart::helm4_… are ignored: {why}"),
        Ok(_) => {}
    }
    trials.push(
        Trial::test("tools::helm::lint_and_template", || chart::lint_and_template().map_err(Failed::from))
            .with_ignored_flag(helm.is_err()),
    );
    trials.push(
        Trial::test("tools::helm4::lint_and_template", || chart::lint_and_template_with_helm4().map_err(Failed::from))
            .with_ignored_flag(helm4.is_err()),
    );
    trials.push(
        Trial::test("chart::helm4_installs_upgrades_rolls_back_and_uninstalls::kube-apiserver", || {
            run(
                |backend| Box::pin(chart::helm4_installs_upgrades_rolls_back_and_uninstalls(backend)),
                Backend::KubeApiserver,
            )
        })
        .with_ignored_flag(real.is_err() || prometheus_crds.is_err() || helm4.is_err()),
    );
    trials.push(
        Trial::test(
            "chart::install_upgrade_rollback_uninstall_and_the_daemon_as_its_service_account::kube-apiserver",
            || {
                run(
                    |backend| {
                        Box::pin(chart::install_upgrade_rollback_uninstall_and_the_daemon_as_its_service_account(
                            backend,
                        ))
                    },
                    Backend::KubeApiserver,
                )
            },
        )
        .with_ignored_flag(real.is_err() || prometheus_crds.is_err()),
    );
    // capdeck as `kubectl capdeck`, with the built kubectl (it needs no control plane).
    type PluginTrial = fn(&std::path::Path) -> Result<(), Failed>;
    let plugin_trials: [(&str, PluginTrial); 2] = [
        ("runs_as_kubectl_capdeck", kubectl_plugin::runs_as_kubectl_capdeck),
        ("kubectl_completes_its_arguments", kubectl_plugin::kubectl_completes_its_arguments),
    ];
    if let Err(why) = &real {
        eprintln!("tools::kubectl_plugin is ignored: {why}");
    }
    for (name, trial) in plugin_trials {
        let kubectl = real.as_ref().ok().map(|assets| assets.kubectl.clone());
        let ignored = kubectl.is_none();
        trials.push(
            Trial::test(format!("tools::kubectl_plugin::{name}"), move || {
                trial(&kubectl.ok_or_else(|| Failed::from("no built kubectl"))?)
            })
            .with_ignored_flag(ignored),
        );
    }
    let conclusion = libtest_mimic::run(&args, trials);
    world::stop_shared_plane();
    conclusion.exit_code()
}
