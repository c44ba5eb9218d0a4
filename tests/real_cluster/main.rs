//! capdeck's cluster-facing stories on two backends: the sandbox and a real kube-apiserver +
//! etcd (built by `tools/envtest/build.sh`, or found through `KUBEBUILDER_ASSETS` /
//! `TEST_ASSET_*` like controller-runtime's envtest). Each story body (`stories/`, one file per
//! group) runs once per backend, on purpose: the `::sandbox` variant here is the same body as
//! the `::kube_apiserver` one, so where they differ the sandbox is wrong. The sandbox-only tests
//! are the `sandbox` binary's; `cargo test --test real_cluster ::sandbox` runs the sandbox
//! variants of these stories alone.
//!
//! Also the other real programs: the built kubectl (and any other kubectl here) against the
//! sandbox, and the real capdeck binary driven in tmux.
//!
//! Without the real binaries the kube-apiserver variants are reported as *ignored* (the reason is
//! printed first); with `CAPDECK_REQUIRE_REAL_CLUSTER=1` (CI) a missing binary, a missing tmux or
//! a control plane that does not start fails the run instead. Extra kubectl minors stay optional.

// Shared with the sandbox binary, hence the one path attribute.
#[path = "../common/mod.rs"]
#[allow(unused_imports, unused_macros)]
mod common;

mod alert_rules;
mod chart;
mod control_plane;
mod dashboard;
mod differential;
mod kubectl_compat;
mod kubectl_plugin;
mod ops_tools;
mod setup;
/// The stories told on both backends, one file per group (`all_stories` lists them).
mod stories;
mod tmux_console;
mod upstream;
mod upstream_stories;
mod vcap_corpus;
mod world;

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;

use libtest_mimic::{Arguments, Failed, Trial};
use world::Backend;

type Story = fn(Backend) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// A story: its name, its body, the backends it is told on, and whether its sandbox variant runs
/// the control plane's own kubectl (`with kubectl`: it belongs to a pass on a control plane too).
type StoryEntry = (&'static str, Story, &'static [Backend], bool);

macro_rules! stories {
    ($($group:ident :: $name:ident $(only $only:ident)? $(with $with:ident)?),* $(,)?) => {
        vec![$((
            concat!("stories::", stringify!($group), "::", stringify!($name)),
            (|backend| Box::pin(stories::$group::$name(backend))) as Story,
            stories!(@backends $($only)?),
            stories!(@with $($with)?),
        )),*]
    };
    (@backends) => { &[Backend::Sandbox, Backend::KubeApiserver][..] };
    (@backends real) => { &[Backend::KubeApiserver][..] };
    (@with) => { false };
    (@with kubectl) => { true };
}

fn all_stories() -> Vec<StoryEntry> {
    stories![
        engine::rotation_rolls_out_then_deletes_previous_secrets,
        engine::start_up_with_everything_current_writes_nothing,
        engine::start_up_recheck_opens_a_batch_only_for_real_differences,
        engine::manual_approval_then_rolls,
        engine::force_ends_the_window_now_and_with_approval_rolls_a_manual_batch,
        engine::force_on_a_manual_batch_still_needs_an_approval_unless_given_with_it,
        engine::hold_then_release,
        engine::cancel_rolls_nothing,
        engine::cancel_mid_rollout_lets_rolling_deployments_finish_and_starts_nothing_new,
        engine::storm_guard_asks_for_approval,
        engine::a_stalled_deployment_fails_the_batch_and_keeps_its_previous_secret,
        engine::stale_secrets_are_never_rotations,
        engine::expiring_credentials_end_an_auto_window_early,
        level::an_undone_rollout_is_said_until_retry_rolls_it_forward,
        level::a_cancelled_batch_is_said_until_retry_rolls_it_forward,
        level::a_rotation_during_an_upgrade_reaches_the_new_version,
        engine::expiring_credentials_escalate_a_manual_batch,
        engine::credentials_the_pods_already_run_are_ok_on_every_surface,
        engine::a_stalled_deployment_halts_the_batch_until_released,
        engine::a_crash_looping_new_pod_halts_the_batch_early,
        engine::a_halted_batch_is_retried_and_rolls_on,
        engine::an_undone_batch_goes_back_to_the_previous_secrets,
        engine::engine_killed_mid_rollout_is_finished_by_the_next,
        engine::two_engines_share_one_lease_and_roll_each_deployment_once,
        engine::next_engine_leads_after_a_graceful_stop,
        engine::engines_of_different_namespaces_both_lead,
        engine::engines_with_different_lease_places_never_lead_the_same_namespaces_at_once,
        engine::the_go_operator_lease_is_watched_in_any_namespace,
        process::daemon_readme_flow_readyz_metrics_json_logs_sigterm,
        process::cli_approve_records_the_identity_the_server_returns,
        process::cli_refuses_a_user_without_patch_permission,
        process::crds_are_accepted_and_kubectl_shows_their_columns with kubectl,
        process::daemon_as_the_manifests_service_account_completes_a_rotation only real,
        process::doctor_on_a_healthy_and_a_broken_setup,
        process::an_installed_daemon_is_found_and_a_console_never_leads_beside_it,
        process::console_approves_as_the_user_and_refuses_without_permission,
        process::credentials_report_margins_and_verdicts,
        process::pods_pane_shows_replicasets_pods_and_checks_log_permission,
        faults::api_server_restarted_mid_rollout,
        faults::watch_resumes_after_compaction_410,
        faults::concurrent_approvers_one_wins,
        faults::lease_taken_by_another_holder_stops_writes,
        faults::a_leader_whose_renewals_fail_steps_down,
        faults::the_console_lists_the_kind_on_screen_first_and_streams_it,
        faults::where_streaming_lists_are_refused_the_console_lists_in_pages_first,
        fleet::fleet_shows_every_context_and_says_why_one_is_unreachable,
        fleet::notifications_reach_a_loopback_receiver_once_across_a_leader_change,
        incidents::incidents_open_and_resolve_once_across_a_leader_change,
        install::crds_install_as_the_help_says_and_client_side_apply_is_refused with kubectl,
        bounded::overlong_and_nul_reasons_are_refused_by_the_api,
        deadline::an_exec_plugin_that_hangs_is_given_up_on_and_a_slow_one_connects,
        attribution::a_kubectl_forged_approval_or_hold_drives_nothing,
        attribution::a_forged_hold_is_not_carried_into_the_batch_that_supersedes_it,
        attribution::the_admission_policy_refuses_an_attribution_in_another_name only real,
        attribution::each_action_on_a_batch_is_an_event_of_its_own,
        windows::outside_its_window_a_batch_waits_then_rolls_at_the_opening,
        windows::a_deadline_before_the_next_window_escalates_and_notifies,
        windows::a_freeze_holds_across_restart_and_leader_change_and_ends_by_unfreeze_or_by_itself,
        windows::force_overrides_a_window_and_the_record_says_so,
        windows::an_unreadable_window_holds_the_batch_until_it_is_fixed,
        windows::a_force_is_carried_into_the_batch_that_supersedes_it,
        freezes::the_admission_policy_refuses_a_freeze_in_another_name only real,
        hostile::hostile_values_in_every_kind_stop_nothing_and_leak_nothing only real,
        hostile::a_rotation_seen_by_a_standby_is_batched_when_it_takes_over,
        hostile::a_workload_added_to_a_version_never_rewrites_another_teams_deployment,
        workloads::the_workload_plane_rolls_deployments_and_completes_jobs only real,
        workloads::a_multi_replica_rollout_is_followed_as_it_goes,
        workloads::new_pods_that_crash_loop_halt_the_batch_at_once_and_undo_goes_back,
        workloads::unschedulable_new_pods_say_the_schedulers_reason,
        workloads::paused_scaled_to_zero_and_scaled_during_the_rollout,
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

/// `trial`, noted as touching neither the control plane nor its binaries (`CAPDECK_PLANE_ONLY`).
fn off(off_plane: &mut std::collections::BTreeSet<String>, trial: Trial) -> Trial {
    off_plane.insert(trial.name().to_string());
    trial
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
    // The in-process engines' log, for a story that failed: `CAPDECK_TEST_LOG=capdeck=debug`
    // (an EnvFilter) writes it to stderr. Stories run at once share it: run the one alone.
    if let Ok(filter) = std::env::var("CAPDECK_TEST_LOG") {
        let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|error| {
            eprintln!("CAPDECK_TEST_LOG={filter:?} is not a log filter ({error}); logging capdeck=debug");
            tracing_subscriber::EnvFilter::new("capdeck=debug")
        });
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    }
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
    // What touches neither the control plane nor its binaries (kube-apiserver, etcd, kubectl):
    // left out of a pass on another control plane (CAPDECK_PLANE_ONLY=1). Anything not listed here
    // runs in such a pass, so a new trial is never left out by mistake.
    let mut off_plane = std::collections::BTreeSet::new();
    for (name, story, backends, with_kubectl) in all_stories() {
        for &backend in backends {
            let trial = Trial::test(format!("{name}::{}", backend.label()), move || run(story, backend));
            if backend == Backend::Sandbox && !with_kubectl {
                off_plane.insert(trial.name().to_string());
            }
            trials.push(trial.with_ignored_flag(backend == Backend::KubeApiserver && real.is_err()));
        }
    }
    trials.push(
        Trial::test("differential::the_sandbox_answers_as_kube_apiserver_does", || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .map_err(|e| Failed::from(e.to_string()))?;
            runtime.block_on(differential::the_sandbox_answers_as_kube_apiserver_does())
        })
        .with_ignored_flag(real.is_err()),
    );
    let assets = real.clone();
    trials.push(
        Trial::test("control_plane::a_start_whose_port_is_taken_starts_on_new_ports", move || {
            control_plane::a_start_whose_port_is_taken_starts_on_new_ports(assets.map_err(Failed::from)?)
                .map_err(Failed::from)
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
    let approve = Trial::test("tools::tmux_console::demo_approve_a_batch_and_quit", || {
        tmux_console::demo_in_tmux_approve_a_batch_and_quit();
        Ok(())
    });
    trials.push(off(&mut off_plane, approve.with_ignored_flag(tmux.is_err())));
    let small = Trial::test("tools::tmux_console::demo_at_80x24_every_view", || {
        tmux_console::demo_at_80x24_every_view();
        Ok(())
    });
    trials.push(off(&mut off_plane, small.with_ignored_flag(tmux.is_err())));
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
        trials.push(off(&mut off_plane, trial.with_ignored_flag(promtool.is_err())));
    }
    type PureCheck = fn() -> Result<(), String>;
    let pure_checks: [(&str, PureCheck); 3] = [
        (
            "tools::alerts::every_alert_has_a_runbook_section_and_a_unit_test",
            alert_rules::every_alert_has_a_runbook_section_and_a_unit_test,
        ),
        (
            "tools::alerts::every_metric_and_label_in_the_rules_is_in_metrics_md",
            alert_rules::every_metric_and_label_in_the_rules_is_in_metrics_md,
        ),
        (
            "tools::alerts::every_capdeck_command_in_the_runbook_parses",
            alert_rules::every_capdeck_command_in_the_runbook_parses,
        ),
    ];
    for (name, check) in pure_checks {
        trials.push(off(&mut off_plane, Trial::test(name, move || check().map_err(Failed::from))));
    }
    let ignored = promtool.is_err();
    let dashboard_promtool = promtool.clone();
    let expressions = Trial::test("tools::promtool::dashboard_expressions_parse", move || {
        dashboard::dashboard_expressions_parse(&dashboard_promtool.map_err(Failed::from)?)
    });
    trials.push(off(&mut off_plane, expressions.with_ignored_flag(ignored)));
    let documented = Trial::test("tools::dashboard::every_metric_is_documented", dashboard::every_metric_is_documented);
    trials.push(off(&mut off_plane, documented));
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
        // Only the control plane's own kubectl is its binary: the others are checked in any pass.
        let trial = trial.with_ignored_flag(ignored);
        trials.push(if label == "built" { trial } else { off(&mut off_plane, trial) });
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
    let lint = Trial::test("tools::helm::lint_and_template", || chart::lint_and_template().map_err(Failed::from));
    trials.push(off(&mut off_plane, lint.with_ignored_flag(helm.is_err())));
    let lint4 =
        Trial::test("tools::helm4::lint_and_template", || chart::lint_and_template_with_helm4().map_err(Failed::from));
    trials.push(off(&mut off_plane, lint4.with_ignored_flag(helm4.is_err())));
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
    if std::env::var("CAPDECK_PLANE_ONLY").is_ok_and(|value| value == "1") {
        let before = trials.len();
        trials.retain(|trial| !off_plane.contains(trial.name()));
        eprintln!(
            "CAPDECK_PLANE_ONLY=1: {} of {before} trials touch neither the control plane nor its binaries, left out",
            before - trials.len()
        );
    }
    let conclusion = libtest_mimic::run(&args, trials);
    world::stop_shared_plane();
    conclusion.exit_code()
}
