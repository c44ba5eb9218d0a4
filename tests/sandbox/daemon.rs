//! `capdeck --daemon` as a process against the demo sandbox over HTTP, driven by the README's
//! commands: the start-up re-check opens hr-portal's batch, `capdeck batches -A` shows it,
//! `capdeck force --approve` rolls it, and SIGTERM stops the daemon cleanly (lease released).

use crate::common;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capdeck::sandbox::Sandbox;
use serde_json::Value;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

fn capdeck(kubeconfig: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("runs")
}

fn batches_json(kubeconfig: &std::path::Path) -> Vec<Value> {
    let output = capdeck(kubeconfig, &["batches", "-A", "-o", "json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    common::list_items(&output.stdout)
}

/// Kills the child if the test fails before stopping it (so nothing outlives the test).
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn stop(mut child: Child) -> std::process::ExitStatus {
    common::terminate(&mut child, Duration::from_secs(20))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_flow_against_the_demo_sandbox() {
    let sandbox = Sandbox::default();
    sandbox.load_demo().expect("demo");
    let cancel = tokio_util::sync::CancellationToken::new();
    let fast = capdeck::sandbox::simulate::WorkloadSimulation { replicas_per_second: 10.0, ..Default::default() };
    sandbox.simulate_workloads(fast, cancel.clone());
    let (served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;

    let port = free_port();
    let health = format!("http://127.0.0.1:{port}");
    let log_path = dir.path().join("daemon.log");
    let daemon = Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        // `capdeck daemon` (the other daemon tests run the `--daemon` form the chart uses).
        .args(["daemon", "--health-addr", &format!("127.0.0.1:{port}"), "--rollout-delay", "30s", "-A"])
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAMESPACE", "default")
        .env("RUST_LOG", "info")
        .stdout(Stdio::from(std::fs::File::create(&log_path).expect("log file")))
        .stderr(Stdio::null())
        .spawn()
        .expect("daemon starts");
    let mut daemon = Guard(Some(daemon));

    // Ready once stores synced and the lease state is known.
    let ready_url = format!("{health}/readyz");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some((200, body)) = common::http_get(&ready_url).await {
            assert!(body.contains("leader"), "{body}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "daemon never became ready: {}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(common::http_get(&format!("{health}/healthz")).await.map(|(code, _)| code), Some(200));

    // The start-up re-check found hr-portal's router out of date: a batch is collecting.
    common::eventually("hr-portal batch", Duration::from_secs(30), || async {
        batches_json(&kubeconfig).iter().any(|b| b["application"] == "hr-portal" && b["phase"] == "Collecting")
    })
    .await;
    let table = capdeck(&kubeconfig, &["batches", "-A"]);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(table.starts_with("NAMESPACE   NAME"), "{table}");
    assert!(
        table.lines().any(|l| l.contains("hr-portal")
            && l.contains("Collecting")
            && l.contains("ends in")
            && l.contains("required")),
        "{table}"
    );
    let batch = batches_json(&kubeconfig).into_iter().find(|b| b["application"] == "hr-portal").expect("batch");
    let target =
        format!("{}/{}", batch["namespace"].as_str().unwrap_or_default(), batch["name"].as_str().unwrap_or_default());

    // Manual policy: forcing alone would wait for approval, force --approve rolls now.
    let forced = capdeck(&kubeconfig, &["force", &target, "--approve", "--reason", "demo"]);
    assert!(forced.status.success(), "{}", String::from_utf8_lossy(&forced.stderr));
    assert!(String::from_utf8_lossy(&forced.stdout).contains("forced and approved"));
    common::eventually("hr-portal batch Succeeded", Duration::from_secs(60), || async {
        batches_json(&kubeconfig).iter().any(|b| b["application"] == "hr-portal" && b["phase"] == "Succeeded")
    })
    .await;
    let batch = batches_json(&kubeconfig).into_iter().find(|b| b["application"] == "hr-portal").expect("batch");
    assert_eq!(batch["progress"], "1/1");
    assert_eq!(batch["approval"]["approvedBy"], "sandbox-admin");
    assert_eq!(batch["force"]["reason"], "demo");

    // The phase gauge is counted from the engine's watch cache, which learns of the Succeeded
    // status one watch event after the API does: poll until it follows, bounded.
    let needles = [
        "capdeck_leader 1",
        "capdeck_deployments_restarted_total 1",
        "capdeck_batches{phase=\"Succeeded\"} 1",
        "# EOF",
    ];
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (code, metrics) = common::http_get(&format!("{health}/metrics")).await.expect("metrics");
        assert_eq!(code, 200);
        let missing: Vec<&str> = needles.iter().copied().filter(|needle| !metrics.contains(needle)).collect();
        if missing.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "missing {missing:?}:\n{metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let exit = stop(daemon.0.take().expect("daemon"));
    assert_eq!(exit.code(), Some(0));
    let lease = sandbox.get("coordination.k8s.io", "leases", "default", "capdeck-engine").expect("lease");
    assert!(lease.pointer("/spec/holderIdentity").is_none_or(Value::is_null), "lease released: {lease}");
    let log = std::fs::read_to_string(&log_path).expect("log");
    assert!(!log.is_empty());
    for line in log.lines() {
        let record: Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("log line is not JSON: {line}"));
        assert!(record.get("level").is_some());
    }
    assert!(log.contains("releasing the lease"), "{log}");
    // One INFO line per batch transition, the approval with who and why.
    for transition in ["batch Collecting", "batch RollingOut", "batch Succeeded"] {
        assert!(log.contains(transition), "no {transition:?} line in the log:\n{log}");
    }
    served.stop().await;
    cancel.cancel();
}

#[test]
fn daemon_without_a_cluster_fails_with_a_hint() {
    let output = Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        .args(["--daemon", "--health-addr", "127.0.0.1:0"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("cannot read kubeconfig /nonexistent/kubeconfig"), "{text}");
}

fn spawn_daemon(kubeconfig: &std::path::Path, port: u16, log: &std::path::Path, extra: &[&str]) -> Guard {
    let child = Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        .args(["--daemon", "--health-addr", &format!("127.0.0.1:{port}"), "-A", "--lease-namespace", "default"])
        .args(extra)
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "info")
        .stdout(Stdio::from(std::fs::File::create(log).expect("log file")))
        .stderr(Stdio::null())
        .spawn()
        .expect("daemon starts");
    Guard(Some(child))
}

/// A daemon over every namespace, once `/readyz` says it leads; its log file.
async fn leading_daemon(kubeconfig: &std::path::Path, dir: &std::path::Path) -> (Guard, std::path::PathBuf) {
    let port = free_port();
    let log = dir.join("daemon.log");
    let daemon = spawn_daemon(kubeconfig, port, &log, &[]);
    let ready = format!("http://127.0.0.1:{port}/readyz");
    common::eventually("leader", Duration::from_secs(30), || async {
        matches!(common::http_get(&ready).await, Some((200, body)) if body.contains("ok (leader)"))
    })
    .await;
    (daemon, log)
}

/// `/readyz` is 200 for an observer only while another engine renews the lease, and names it;
/// with nobody leading it is 503 and says rotations are not handled. Asking costs no request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_ready_only_while_someone_leads() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    let (served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let port = free_port();
    let log = dir.path().join("observer.log");
    let _daemon = spawn_daemon(&kubeconfig, port, &log, &["--engine", "observe"]);
    let ready = format!("http://127.0.0.1:{port}/readyz");
    common::eventually("503: nobody leads", Duration::from_secs(30), || async {
        matches!(common::http_get(&ready).await, Some((503, body)) if body.contains("nobody leads") && body.matches("not being handled").count() == 1)
    })
    .await;
    let leader =
        common::fixtures::RunningEngine::start(sandbox.client(), common::fixtures::test_config("engine-a")).await;
    leader.wait_for_role(capdeck::engine::Role::Leader).await;
    common::eventually("200 naming the leader", Duration::from_secs(30), || async {
        matches!(common::http_get(&ready).await, Some((200, body)) if body.contains("observer; leader: engine-a"))
    })
    .await;
    // Probes read the observer's watch of the Leases, not a LIST each (kubelet probes every few
    // seconds; each scrape of /metrics asks too). The leader's own Lease LISTs come first: its
    // first pass looks for the Go CAP Operator's Lease by a LIST while the watch of it has not
    // listed yet, then that watch lists; both are over once the watch watches.
    leader.wait_for_first_pass_as_leader().await;
    let go_operator_lease = format!("metadata.name%3D{}", capdeck::leadership::GO_OPERATOR_LEASE);
    common::eventually("the leader watches the Go CAP Operator's Lease", Duration::from_secs(30), || async {
        sandbox
            .requests()
            .iter()
            .any(|r| r.info.verb == "watch" && r.info.resource == "leases" && r.query.contains(&go_operator_lease))
    })
    .await;
    let lease_lists =
        || sandbox.requests().iter().filter(|r| r.info.verb == "list" && r.info.resource == "leases").count();
    let before = lease_lists();
    for _ in 0..10 {
        assert!(matches!(common::http_get(&ready).await, Some((200, _))), "the observer stays ready");
    }
    assert_eq!(lease_lists(), before, "/readyz listed Leases");
    leader.stop().await;
    served.stop().await;
}

/// With the API server gone, the daemon says so once and says "reachable again" only after a
/// request succeeded — never while it cannot connect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_logging_tells_the_truth() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    let (served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let address = served.address;
    let (_daemon, log) = leading_daemon(&kubeconfig, dir.path()).await;
    served.stop().await;
    let count = |needle: &str| std::fs::read_to_string(&log).unwrap_or_default().matches(needle).count();
    common::eventually("the outage is logged", Duration::from_secs(30), || async {
        count("API server unreachable") > 0
    })
    .await;
    // Watches keep retrying for a while: none of those retries is a reconnection.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(count("reachable again"), 0, "claimed a reconnection while down:\n{text}");
    assert_eq!(count("API server unreachable"), 1, "one line per outage, not per retry or error text:\n{text}");
    assert!(text.contains(&format!("http://{address}")), "the server URL is named:\n{text}");
    let served = sandbox.serve(address).await.expect("serve again");
    common::eventually("reachable again", Duration::from_secs(60), || async { count("reachable again") == 1 }).await;
    served.stop().await;
}

#[test]
fn daemon_refuses_a_subcommand() {
    assert_cmd::Command::cargo_bin("capdeck").expect("bin").args(["--daemon", "batches"]).assert().code(2);
}

/// `capdeck daemon` owns the engine's flags: given before it they would be the console's, so they
/// are refused with where they go; console flags are refused after it; its help lists its own.
#[test]
fn the_daemon_subcommand_owns_the_engine_flags() {
    let run = |args: &[&str]| {
        let output = assert_cmd::Command::cargo_bin("capdeck").expect("bin").args(args).output().expect("runs");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr),
        )
    };
    let (code, text) = run(&["--rollout-delay", "30s", "daemon"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--rollout-delay goes after the subcommand: `capdeck daemon --rollout-delay"), "{text}");
    let (code, text) = run(&["daemon", "--demo"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--demo is a console flag; `daemon` opens no console"), "{text}");
    // Scope given twice, in two places: refused, never silently widened to every namespace.
    for args in [&["-n", "x", "daemon", "-A"][..], &["-A", "daemon", "-n", "x"][..]] {
        let (code, text) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {text}");
        assert!(text.contains("exclude each other"), "{args:?}: {text}");
    }
    // The daemon never runs read-only: said after the subcommand, refused (exit 1) before it.
    let (code, text) = run(&["daemon", "--readonly"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("never runs read-only"), "{text}");
    let (code, text) = run(&["--readonly", "daemon", "--engine", "lead", "--kubeconfig", "/nonexistent"]);
    assert_eq!(code, Some(1), "read-only refuses the daemon as a write, whatever its engine flag: {text}");
    let (code, text) = run(&["daemon", "--config", "/tmp/x.toml"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("`capdeck --config PATH daemon ...`"), "{text}");
    let (code, text) = run(&["daemon", "--help"]);
    assert_eq!(code, Some(0), "{text}");
    for flag in ["--rollout-delay", "--approval", "--health-addr", "--lease-namespace", "--namespace"] {
        assert!(text.contains(flag), "`capdeck daemon --help` lists {flag}:\n{text}");
    }
    // Its example runs (as far as parsing goes: the flags exist).
    assert!(text.contains("capdeck daemon --rollout-delay 30s --approval manual"), "{text}");
}

/// On a cluster without capdeck's CRDs the daemon says which kinds are missing and how to install
/// them — in `/readyz` and once in the log — instead of flapping between "unreachable" and
/// "reachable again" (what kube-apiserver's 404s for the missing kinds once caused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_crds_readyz_and_the_log_name_the_missing_kinds() {
    let sandbox = Sandbox::default();
    let (served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let port = free_port();
    let log = dir.path().join("daemon.log");
    let _daemon = spawn_daemon(&kubeconfig, port, &log, &[]);
    let ready = format!("http://127.0.0.1:{port}/readyz");
    common::eventually("503 naming the kinds", Duration::from_secs(30), || async {
        matches!(common::http_get(&ready).await, Some((503, body)) if body.contains("RotationBatch") && body.contains("capdeck crds"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(text.matches("reachable again").count(), 0, "{text}");
    assert_eq!(text.matches("unreachable").count(), 0, "a missing kind is no outage:\n{text}");
    let said = text.lines().filter(|line| line.contains("does not serve")).count();
    assert!(said <= 2, "said once (or once more as kinds are found):\n{text}");
    // Whose CRDs they are says what to do: the CAP Operator brings its own, the chart capdeck's.
    let body = common::http_get(&ready).await.map(|(_, body)| body).unwrap_or_default();
    assert!(body.contains("install the CAP Operator") && body.contains("Helm chart installs them"), "{body}");
    served.stop().await;
}

/// An engine installed with a ClusterRole that predates `watch leases` still leads (it lists the
/// Leases at each look instead), says in its log what to grant, and `capdeck doctor` says it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_watch_on_leases_the_daemon_leads_by_listing_and_says_what_to_grant() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    sandbox.deny("watch:leases".parse().expect("rule"));
    let (served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let (_daemon, log) = leading_daemon(&kubeconfig, dir.path()).await;
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    common::eventually("the log says what to grant", Duration::from_secs(30), || async {
        text().contains("may not watch capdeck engines' Leases") && text().contains("grant watch on leases")
    })
    .await;
    let report = doctor_report(&kubeconfig);
    assert!(
        report.contains("you may not watch leases.coordination.k8s.io in all namespaces"),
        "doctor names the missing verb:\n{report}"
    );
    served.stop().await;
}

/// `capdeck doctor -A`'s report (stdout) over `kubeconfig`.
fn doctor_report(kubeconfig: &std::path::Path) -> String {
    let output = Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        .args(["doctor", "-A", "--lease-namespace", "default"])
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("doctor runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A ServiceAccount that may not read CRDs (the chart's) gets one line saying so from
/// `capdeck doctor`, not one per CRD; a missing CRD says whose it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_says_once_that_crds_cannot_be_read_and_whose_a_missing_one_is() {
    let sandbox = Sandbox::default();
    let (served, _dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let doctor = || doctor_report(&kubeconfig);
    // No CRDs at all: each missing one says who installs it.
    let report = doctor();
    let missing = |line: &&str| line.contains("is not installed");
    assert!(report.lines().filter(missing).any(|line| line.contains("the CAP Operator brings it")), "{report}");
    assert!(report.lines().filter(missing).any(|line| line.contains("the Helm chart installs it")), "{report}");
    sandbox.install_crds();
    sandbox.deny("get:customresourcedefinitions".parse().expect("rule"));
    let report = doctor();
    let unreadable: Vec<&str> =
        report.lines().filter(|line| line.contains("cannot read CustomResourceDefinitions")).collect();
    assert_eq!(unreadable.len(), 1, "one line, not one per CRD:\n{report}");
    served.stop().await;
}

/// The CAP Operator's own CRDs carry its schema, not capdeck's copy: `capdeck doctor` says OK while
/// the version capdeck reads is served (never advising to replace them), FAIL when it is not;
/// capdeck's own CRD that differs is a warning: `capdeck crds --only capdeck`, or Helm where Helm manages it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_leaves_the_cap_operators_crds_to_it() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    let changed: Vec<Value> = capdeck::api::crds::all()
        .iter()
        .filter_map(|crd| {
            let mut crd = serde_json::to_value(crd).ok()?;
            let name = crd["metadata"]["name"].as_str()?.to_string();
            match name.as_str() {
                // As the CAP Operator's chart installs them: its own descriptions.
                "capapplications.sme.sap.com" | "rotationbatches.capdeck.dev" => {
                    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "upstream's words".into();
                }
                // Installed by the Helm chart, from an older capdeck.
                "freezes.capdeck.dev" => {
                    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "older words".into();
                    crd["metadata"]["labels"] = serde_json::json!({"app.kubernetes.io/managed-by": "Helm"});
                }
                // A release that serves another version only.
                "captenants.sme.sap.com" => crd["spec"]["versions"][0]["name"] = "v1beta1".into(),
                _ => return None,
            }
            Some(crd)
        })
        .collect();
    assert_eq!(changed.len(), 4);
    sandbox.load(changed).expect("changed CRDs");
    let (served, _dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let doctor = || doctor_report(&kubeconfig);
    let report = doctor();
    let line = |name: &str| {
        let found = report.lines().find(|line| line.starts_with("crd ") && line.contains(name));
        found.unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ")
    };
    // (CRD, status, what its line says.)
    let expected = [
        (
            "capapplications.sme.sap.com",
            "ok",
            "serving v1alpha1, which capdeck reads (its schema is the CAP Operator's)",
        ),
        ("captenants.sme.sap.com", "FAIL", "does not serve v1alpha1 (it serves v1beta1), which capdeck reads"),
        (
            "rotationbatches.capdeck.dev",
            "warn",
            "differs from this binary's: capdeck crds --only capdeck | kubectl apply --server-side",
        ),
        // Never kubectl apply over Helm's.
        ("freezes.capdeck.dev", "warn", "the Helm chart manages it: helm upgrade to the chart of this capdeck"),
    ];
    for (crd, status, says) in expected {
        let line = line(crd);
        assert!(line.starts_with(&format!("crd {status} ")) && line.contains(says), "{crd}: {report}");
    }
    assert!(line("capapplicationversions.sme.sap.com").contains("installed, as this binary defines it"), "{report}");
    assert_eq!(report.matches("capdeck crds |").count(), 0, "never: apply all of capdeck's copies\n{report}");

    // An older CAP Operator without one of its CRDs: install the release that brings it, never
    // all of capdeck's copies over the CRDs it has.
    let crds: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        kube::Api::all(sandbox.client());
    crds.delete("domains.sme.sap.com", &Default::default()).await.expect("deleted");
    let report = doctor();
    let missing = report.lines().find(|line| line.contains("domains.sme.sap.com is not installed")).unwrap_or_default();
    assert!(
        missing.contains("install the CAP Operator release that brings it") && !missing.contains("capdeck crds |"),
        "{report}"
    );
    served.stop().await;
}

/// Every watch the daemon sends lasts half an hour and allows bookmarks (so the API server keeps
/// a quiet one alive with a bookmark a minute): with kube's 290 s default, resuming watches was
/// most of the engine's requests at rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_watches_last_half_an_hour_and_allow_bookmarks() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    let (served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let (_daemon, _log) = leading_daemon(&kubeconfig, dir.path()).await;
    let watches = || -> Vec<String> {
        let requests = sandbox.requests();
        requests.iter().filter(|r| r.info.verb == "watch").map(|r| format!("{}?{}", r.path, r.query)).collect()
    };
    // The stores' watches, the binding Secrets' metadata watch, the engines' Leases and, after
    // the first pass, the Go CAP Operator's Lease.
    common::eventually("the daemon watches", Duration::from_secs(30), || async {
        watches().iter().any(|watch| watch.contains("capoperator-lease-lock"))
    })
    .await;
    let watches = watches();
    assert!(watches.len() >= 12, "{watches:#?}");
    for watch in &watches {
        assert!(watch.contains("timeoutSeconds=1800") && watch.contains("allowWatchBookmarks=true"), "{watch}");
    }
    served.stop().await;
}
