//! The Helm chart (`charts/capdeck`) checked with the real helm (built by `tools/ops/build.sh`):
//! - `tools::helm::lint_and_template`: `helm lint --strict` and `helm template` with the defaults
//!   and with every option on; the defaults yield what `capdeck manifests` prints (RBAC rule for
//!   rule, the policies, the Deployment's security and probes); every option renders what it
//!   promises, and the daemon accepts every argument the chart gives it.
//! - `chart::install_upgrade_rollback_uninstall_and_the_daemon_as_its_service_account` (on its
//!   own kube-apiserver 1.34 with the prometheus-operator CRDs): bad values refused by the schema,
//!   install, upgrade, rollback, a daemon run with the chart's ServiceAccount token and the
//!   Deployment's own arguments rolling a batch, its `/metrics` naming every metric the alerts and
//!   the dashboard use, and an uninstall that leaves only the CRDs (kept on purpose) behind.
//! - `tools::helm4::lint_and_template` and `chart::helm4_installs_upgrades_rolls_back_and_uninstalls`:
//!   the same with Helm 4, which writes with server-side apply (the daemon's part not again).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kube::ResourceExt as _;
use serde_json::Value;

use crate::common::fixtures::AppOptions;
use crate::ops_tools::{self, HELM, HELM4, Tool};
use crate::setup::{load_current, text};
use crate::stories::process::{Daemon, http_get};
use crate::world::{Backend, World};

const RELEASE: &str = "capdeck";

/// helm with its caches in a directory of the test's own (never the user's ~/.cache/helm).
struct Helm {
    binary: PathBuf,
    home: tempfile::TempDir,
}

impl Helm {
    fn new(tool: &Tool) -> Result<Self, String> {
        Ok(Self { binary: ops_tools::find(tool)?, home: tempfile::tempdir().map_err(|e| e.to_string())? })
    }

    fn run(&self, kubeconfig: Option<&Path>, args: &[&str]) -> Result<String, String> {
        let mut command = std::process::Command::new(&self.binary);
        command.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
        for (variable, dir) in
            [("HELM_CACHE_HOME", "cache"), ("HELM_CONFIG_HOME", "config"), ("HELM_DATA_HOME", "data")]
        {
            command.env(variable, self.home.path().join(dir));
        }
        match kubeconfig {
            Some(path) => command.env("KUBECONFIG", path),
            None => command.env("KUBECONFIG", self.home.path().join("no-cluster")),
        };
        command.env_remove("KUBERNETES_SERVICE_HOST");
        ops_tools::stdout_of(command, &format!("helm {}", args.join(" ")))
    }
}

fn chart() -> String {
    ops_tools::chart_dir().display().to_string()
}

fn documents(yaml: &str) -> Vec<Value> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap_or_else(|e| panic!("YAML: {e}\n{yaml}"));
    documents.into_iter().filter(|document| !document.is_null()).collect()
}

fn by_kind_and_name(objects: &[Value]) -> BTreeMap<(String, String), Value> {
    objects
        .iter()
        .map(|object| {
            let kind = object["kind"].as_str().unwrap_or_default().to_string();
            let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
            ((kind, name), object.clone())
        })
        .collect()
}

/// Helm reads YAML numbers as floats (`0.0` comes out as `0`): compare numbers by value.
fn numbers_as_floats(value: &Value) -> Value {
    match value {
        Value::Number(number) => number.as_f64().map_or(Value::Null, |f| serde_json::json!(f)),
        Value::Array(items) => Value::Array(items.iter().map(numbers_as_floats).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), numbers_as_floats(v))).collect()),
        other => other.clone(),
    }
}

/// `capdeck manifests -n NS`, as objects.
fn manifests(namespace: &str) -> Vec<Value> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_capdeck"))
        .args(["manifests", "-n", namespace])
        .output()
        .expect("capdeck manifests");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    documents(&String::from_utf8_lossy(&output.stdout))
}

/// The daemon's arguments in a rendered or live Deployment.
fn daemon_args(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|arg| arg.as_str().expect("string arg").to_string())
        .collect()
}

/// Every `capdeck_…` metric name the alert rules and the dashboard use.
fn metrics_used() -> BTreeSet<String> {
    let pattern = regex::Regex::new(r"capdeck_[a-z_]+[a-z]").expect("regex");
    let mut names = BTreeSet::new();
    for file in ["files/alerts/capdeck.rules.yaml", "files/dashboards/capdeck.json"] {
        let text = std::fs::read_to_string(ops_tools::chart_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        names.extend(pattern.find_iter(&text).map(|m| m.as_str().to_string()));
    }
    names
}

/// Names a `/metrics` answer exports: its samples' names and its families' (`# TYPE` lines).
fn exported(metrics: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in metrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut words = rest.split_whitespace();
            let (Some(name), Some(kind)) = (words.next(), words.next()) else { continue };
            names.insert(name.to_string());
            // An OpenMetrics family names its samples with a suffix, even when it has none yet.
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[],
            };
            names.extend(suffixes.iter().map(|suffix| format!("{name}{suffix}")));
        } else if !line.starts_with('#') {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

/// helm lint and template, the defaults against `capdeck manifests`, every option on.
pub fn lint_and_template() -> Result<(), String> {
    lint_and_template_with(&HELM)
}

/// The same with Helm 4.
pub fn lint_and_template_with_helm4() -> Result<(), String> {
    lint_and_template_with(&HELM4)
}

fn lint_and_template_with(tool: &Tool) -> Result<(), String> {
    let helm = Helm::new(tool)?;
    let all_on = format!("{}/ci/all-on-values.yaml", chart());
    helm.run(None, &["lint", "--strict", &chart()])?;
    helm.run(None, &["lint", "--strict", &chart(), "-f", &all_on])?;

    let namespace = "capdeck-system";
    let rendered = documents(&helm.run(None, &["template", RELEASE, &chart(), "-n", namespace])?);
    let chart_objects = by_kind_and_name(&rendered);
    let manifest_objects = by_kind_and_name(&manifests(namespace));
    for ((kind, name), manifest) in &manifest_objects {
        if kind == "Namespace" {
            // `helm install --create-namespace` makes it; a chart never owns its own namespace.
            continue;
        }
        let ours = chart_objects
            .get(&(kind.clone(), name.clone()))
            .unwrap_or_else(|| panic!("the chart with defaults has no {kind} {name}, which capdeck manifests has"));
        match kind.as_str() {
            "ClusterRole" | "Role" => assert_eq!(ours["rules"], manifest["rules"], "{kind} {name}: rule for rule"),
            "ClusterRoleBinding" | "RoleBinding" => {
                assert_eq!(ours["roleRef"], manifest["roleRef"], "{kind} {name}");
                assert_eq!(ours["subjects"], manifest["subjects"], "{kind} {name}");
            }
            "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding" | "Service" => {
                let (mut a, mut b) = (ours["spec"].clone(), manifest["spec"].clone());
                // Selectors carry the release's instance label too.
                for spec in [&mut a, &mut b] {
                    if let Some(selector) = spec.get_mut("selector").and_then(Value::as_object_mut) {
                        selector.remove("app.kubernetes.io/instance");
                    }
                }
                assert_eq!(a, b, "{kind} {name}");
            }
            "ServiceAccount" => {}
            "Deployment" => {
                let pod = |o: &Value| o["spec"]["template"]["spec"].clone();
                let (ours_pod, their_pod) = (pod(ours), pod(manifest));
                assert_eq!(ours["spec"]["replicas"], manifest["spec"]["replicas"]);
                assert_eq!(ours_pod["securityContext"], their_pod["securityContext"], "pod security context");
                assert_eq!(ours_pod["serviceAccountName"], their_pod["serviceAccountName"]);
                let (c, m) = (&ours_pod["containers"][0], &their_pod["containers"][0]);
                for field in ["securityContext", "livenessProbe", "readinessProbe", "ports"] {
                    assert_eq!(c[field], m[field], "container {field}");
                }
                let args = daemon_args(ours);
                assert!(args.contains(&"--daemon".to_string()) && args.contains(&"--all-namespaces".to_string()));
            }
            other => panic!("capdeck manifests has a {other} the comparison does not know"),
        }
    }
    // capdeck's CRDs come with the chart (kept on uninstall), as `capdeck crds` prints them.
    for crd in capdeck::api::crds::all().into_iter().filter(|crd| crd.spec.group == "capdeck.dev") {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let ours = chart_objects
            .get(&("CustomResourceDefinition".to_string(), name.clone()))
            .unwrap_or_else(|| panic!("the chart has no CRD {name}"));
        let printed = capdeck::api::crds::to_yaml(&crd).expect("yaml");
        let printed = documents(&printed).into_iter().next().expect("one CRD");
        assert!(
            numbers_as_floats(&ours["spec"]) == numbers_as_floats(&printed["spec"]),
            "the chart's CRD {name} differs from `capdeck crds`"
        );
        assert_eq!(ours["metadata"]["annotations"]["helm.sh/resource-policy"], "keep", "CRD {name} is kept");
    }
    let kinds = |objects: &[Value]| -> BTreeSet<String> {
        objects.iter().filter_map(|o| o["kind"].as_str().map(String::from)).collect()
    };
    assert!(kinds(&rendered).contains("PodDisruptionBudget"), "a PDB by default");
    for optional in ["ServiceMonitor", "PodMonitor", "PrometheusRule", "NetworkPolicy", "ConfigMap"] {
        assert!(!kinds(&rendered).contains(optional), "{optional} only when asked for");
    }

    // Every option on.
    // In another namespace, with another release name: what the alerts' texts name follows.
    let rendered = documents(&helm.run(None, &["template", "prod", &chart(), "-n", "ops", "-f", &all_on])?);
    for kind in ["ServiceMonitor", "PrometheusRule", "NetworkPolicy", "ConfigMap", "PodDisruptionBudget"] {
        assert!(kinds(&rendered).contains(kind), "every option on renders a {kind}");
    }
    let objects = by_kind_and_name(&rendered);
    let pdb = rendered.iter().find(|o| o["kind"] == "PodDisruptionBudget").expect("pdb");
    assert_eq!(pdb["spec"]["maxUnavailable"], 0, "maxUnavailable 0 is a value, not unset: {pdb}");
    let rules = rendered.iter().find(|o| o["kind"] == "PrometheusRule").expect("rule");
    for alert in rules["spec"]["groups"][0]["rules"].as_array().into_iter().flatten() {
        let text = alert["annotations"]["description"].as_str().unwrap_or_default();
        assert!(!text.contains("capdeck-system"), "the alert names this release's namespace: {text}");
        assert!(!text.contains("deploy/capdeck`"), "the alert names this release's Deployment: {text}");
    }
    // The PodMonitor instead of the ServiceMonitor; both at once is refused.
    let pod_monitor = ["template", RELEASE, &chart(), "-n", namespace, "--set", "metrics.podMonitor.enabled=true"];
    let rendered_pod_monitor = documents(&helm.run(None, &pod_monitor)?);
    assert!(kinds(&rendered_pod_monitor).contains("PodMonitor"));
    let both = [&pod_monitor[..], &["--set", "metrics.serviceMonitor.enabled=true"]].concat();
    let refused = helm.run(None, &both).expect_err("both monitors");
    assert!(refused.contains("choose one"), "{refused}");
    // One replica: no PDB (it would block every drain).
    let single = documents(&helm.run(None, &["template", RELEASE, &chart(), "--set", "replicaCount=1"])?);
    assert!(!kinds(&single).contains("PodDisruptionBudget"), "no PDB for one replica");
    // Change windows: a malformed value fails the render (not the Pod, which would crash-loop),
    // saying how to check it; whatever the binary accepts renders (the chart is never stricter).
    let cases = [
        ("Mon-Fri 22:00-05:00 Europe/Berlin; Sat-Sun 00:00-24:00 Europe/Berlin", true),
        ("monday,Wed 01:00-02:00 UTC", true),
        ("MONDAY-FRIDAY 22:00-05:00 UTC; SATURDAY 00:00-24:00 UTC", true),
        (" ; Fri-Mon 22:00-05:00 America/Argentina/Buenos_Aires;", true),
        ("Sun 01:00-04:00 Etc/GMT+2", true),
        ("Mo-Fr 22:00-05:00 Europe/Berlin", false),
        ("Mon 22:00 Europe/Berlin", false),
        ("Mon 22:00-24:00 UTC", true),
        ("Mon-Fri 25:00-05:00 UTC", false),
        ("Mon 24:00-05:00 UTC", false),
        ("Mon 9:00-10:00 UTC", false),
        ("Mon 10:60-11:00 UTC", false),
        ("Monkey 10:00-11:00 UTC", false),
        ("Thurs 10:00-11:00 UTC", false),
        // Whitespace Rust splits on and Go's \s does not know: a no-break space, a vertical tab,
        // a line separator.
        ("Mon\u{a0}10:00-11:00 UTC\u{a0}", true),
        ("Mon\u{b}10:00-11:00\u{3000}UTC\u{2028}", true),
    ];
    for (windows, valid) in cases {
        let binary = std::process::Command::new(env!("CARGO_BIN_EXE_capdeck"))
            .args(["windows", windows])
            .output()
            .map_err(|e| e.to_string())?;
        assert_eq!(binary.status.success(), valid, "capdeck windows {windows:?}");
        let values = dir_with_values(&serde_json::json!({"engine": {"changeWindows": windows}}))?;
        let values_path = values.path().join("values.yaml").display().to_string();
        let rendered = helm.run(None, &["template", RELEASE, &chart(), "-f", &values_path]);
        if valid {
            rendered.map_err(|e| format!("{windows:?} does not render: {e}"))?;
        } else {
            let error = rendered.expect_err(windows);
            assert!(error.contains("engine.changeWindows") && error.contains("capdeck windows"), "{error}");
        }
    }
    let rule = rendered.iter().find(|o| o["kind"] == "PrometheusRule").expect("rule");
    let alerts: Vec<Value> = rule["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_array().cloned().unwrap_or_default())
        .collect();
    assert!(alerts.len() >= 9, "the PrometheusRule has the alerts: {rule}");
    for alert in &alerts {
        let url = alert["annotations"]["runbook_url"].as_str().unwrap_or_default();
        assert!(url.starts_with("https://wiki.example.com/capdeck/RUNBOOK.md#"), "runbookUrl is used: {url}");
    }
    let dashboard = rendered.iter().find(|o| o["kind"] == "ConfigMap").expect("dashboard");
    let json: Value = serde_json::from_str(dashboard["data"]["capdeck.json"].as_str().expect("json text"))
        .map_err(|e| format!("the dashboard ConfigMap holds no JSON: {e}"))?;
    assert_eq!(json["uid"], "capdeck");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let policy = rendered.iter().find(|o| o["kind"] == "NetworkPolicy").expect("policy");
    assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["port"], "http", "ingress to the metrics port only");
    let monitor = rendered.iter().find(|o| o["kind"] == "ServiceMonitor").expect("monitor");
    assert_eq!(monitor["spec"]["endpoints"][0]["honorLabels"], true, "the application's namespace label is kept");
    let deployment = objects.values().find(|o| o["kind"] == "Deployment").expect("deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/capdeck@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    );
    // The daemon accepts every argument the chart gives it: with no cluster at hand it gets as
    // far as connecting (exit 1), never a usage error (exit 2).
    let args = daemon_args(deployment);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_capdeck"))
        .args(args.iter().map(|arg| if arg.starts_with("--health-addr=") { "--health-addr=127.0.0.1:0" } else { arg }))
        .env("KUBECONFIG", dir.path().join("none"))
        .env("POD_NAMESPACE", "ops")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "the daemon refused the chart's arguments {args:?}: {stderr}");
    Ok(())
}

/// Values the chart must refuse (its schema, or a template's check), and what its message must say.
const BAD_VALUES: &[(&str, &str)] = &[
    ("engine.rolloutDelay=10", "/engine/rolloutDelay"),
    ("engine.approval=sometimes", "value must be one of 'auto', 'manual'"),
    ("replicaCount=0", "/replicaCount"),
    ("notify[0]=https://hooks.slack.com/services/T/B/x", "/notify/0"),
    ("notify[0].name=pd,notify[0].key=k,notify[0].type=pager", "/notify/0/type"),
    ("notify[0].name=pd,notify[0].key=k,notify[0].receiver=on call", "/notify/0/receiver"),
    ("notify[0].name=pd,notify[0].key=k,notify[0].type=pagerduty", "set clusterName"),
    ("clusterName=prod eu", "/clusterName"),
    (
        "clusterName=in-cluster,notify[0].name=pd,notify[0].key=k,notify[0].type=opsgenie",
        "another name than in-cluster",
    ),
    // The daemon refuses two receivers of one name: so does the chart, before a Pod crash-loops.
    (
        "notify[0].name=a,notify[0].key=k,notify[0].receiver=r,notify[1].name=b,notify[1].key=k,notify[1].receiver=r",
        "two receivers called r",
    ),
    ("notify[0].name=a,notify[0].key=k,notify[1].name=a,notify[1].key=k", "two receivers called"),
];

pub async fn install_upgrade_rollback_uninstall_and_the_daemon_as_its_service_account(backend: Backend) {
    install_story(backend, &HELM, "chart", true).await;
}

/// The same life cycle with Helm 4, which installs and upgrades with server-side apply (the
/// daemon's part is Helm's objects, the same as above, and is not run again), adopting CRDs
/// installed before with `capdeck crds --only capdeck` as the chart's README says.
pub async fn helm4_installs_upgrades_rolls_back_and_uninstalls(backend: Backend) {
    install_story(backend, &HELM4, "chart-helm4", false).await;
}

/// Bad values refused, install, upgrade, rollback, (`with_daemon`: the daemon as the chart's
/// ServiceAccount rolling a batch), uninstall, with `tool` on a kube-apiserver of its own.
/// Without the daemon, capdeck's CRDs are there before the install, to be adopted.
async fn install_story(backend: Backend, tool: &Tool, test: &str, with_daemon: bool) {
    assert_eq!(backend, Backend::KubeApiserver, "helm installs into a real API server");
    let helm = Helm::new(tool).expect("helm");
    let crds = ops_tools::prometheus_operator_crds().expect("the prometheus-operator CRDs");
    let world = World::dedicated(backend, test, crate::control_plane::Profile::WithoutCapdeckCrds).await;
    let plane = world.plane();
    let output = plane.kubectl().args(["apply", "--server-side", "-f"]).arg(&crds).output().expect("kubectl");
    assert!(output.status.success(), "prometheus-operator CRDs: {}", String::from_utf8_lossy(&output.stderr));
    let output = plane
        .kubectl()
        .args(["wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"])
        .output()
        .expect("kubectl");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    load_current(&world, &AppOptions::default()).await;
    let kubeconfig = world.admin_kubeconfig.clone();
    let system = format!("{}-system", world.ns);
    let chart_path = chart();
    if !with_daemon {
        // Installed by hand first (chart README, "CRDs and upgrades"), then adopted by Helm.
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_capdeck"))
            .args(["crds", "--only", "capdeck"])
            .output()
            .expect("capdeck crds");
        plane.kubectl_apply(&String::from_utf8_lossy(&output.stdout)).expect("capdeck's CRDs applied");
        let names = ["rotationbatches.capdeck.dev", "freezes.capdeck.dev"];
        let release = format!("meta.helm.sh/release-namespace={system}");
        let adopt = [
            &["annotate", "crd", names[0], names[1], "meta.helm.sh/release-name=capdeck", &release][..],
            &["label", "crd", names[0], names[1], "app.kubernetes.io/managed-by=Helm"],
        ];
        for args in adopt {
            let output = plane.kubectl().args(args).output().expect("kubectl");
            assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        }
    }
    let install = |extra: &[&str]| -> Result<String, String> {
        let mut args = vec!["install", RELEASE, &chart_path, "-n", &system, "--create-namespace"];
        args.extend_from_slice(extra);
        helm.run(Some(&kubeconfig), &args)
    };

    // The schema refuses each bad value before anything is installed.
    for (value, message) in BAD_VALUES {
        let error = install(&["--set", value]).expect_err(value);
        // The schema, or the template's own check where a schema cannot say why (clusterName
        // with an incident receiver).
        let refused =
            error.contains("values don't meet the specifications of the schema") || error.contains("execution error");
        assert!(refused, "{value}: {error}");
        assert!(error.contains(message), "{value}: the message names {message}: {error}");
    }
    let listed = helm.run(Some(&kubeconfig), &["list", "-A", "-q"]).expect("helm list");
    assert!(listed.trim().is_empty(), "a refused install left a release: {listed}");

    // Install: every optional object on that this cluster can hold (the NetworkPolicy names the
    // API server: envtest has no `kubernetes` Endpoints to look up).
    let port = plane.url.rsplit(':').next().expect("the API server's port").to_string();
    let engine_ns = format!("engine.namespace={}", world.ns);
    let api_port = format!("networkPolicy.apiServer[0].port={port}");
    let options = [
        "--set",
        &engine_ns,
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.prometheusRule.enabled=true",
        "--set",
        "metrics.dashboard.enabled=true",
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "networkPolicy.apiServer[0].cidr=127.0.0.1/32",
        "--set",
        &api_port,
    ];
    let said = install(&options).expect("helm install");
    // NOTES: how to check the install, in the namespace the engine serves.
    assert!(said.contains(&format!("capdeck doctor -n {}\n", world.ns)), "{said}");
    let deployment = |plane: &crate::control_plane::ControlPlane| -> Value {
        let output = plane
            .kubectl()
            .args(["get", "deployment", RELEASE, "-n", &system, "-o", "json", "--show-managed-fields"])
            .output()
            .expect("kubectl");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).expect("json")
    };
    let installed = deployment(plane);
    // Helm 4 applies server-side, Helm 3 updates: what each wrote is the API server's record.
    let operations: BTreeSet<&str> = installed["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|field| field["operation"].as_str())
        .collect();
    let applied = if tool.env == HELM4.env { "Apply" } else { "Update" };
    assert!(operations.contains(applied), "{} wrote with {operations:?}", tool.env);
    assert!(daemon_args(&installed).contains(&"--approval=auto".to_string()));
    for (kind, name) in [
        ("servicemonitor", RELEASE.to_string()),
        ("prometheusrule", RELEASE.to_string()),
        ("configmap", format!("{RELEASE}-dashboard")),
        ("networkpolicy", RELEASE.to_string()),
        ("poddisruptionbudget", RELEASE.to_string()),
        ("service", format!("{RELEASE}-metrics")),
    ] {
        let output = plane.kubectl().args(["get", kind, &name, "-n", &system]).output().expect("kubectl");
        assert!(output.status.success(), "{kind} {name} installed: {}", String::from_utf8_lossy(&output.stderr));
    }

    // Upgrade changing a value, then roll back to the install.
    let upgrade = ["upgrade", RELEASE, &chart_path, "-n", &system, "--reuse-values"];
    let changes = [
        "--set",
        "engine.approval=manual",
        "--set",
        "replicaCount=3",
        "--set",
        "metrics.serviceMonitor.enabled=false",
        "--set",
        "metrics.podMonitor.enabled=true",
    ];
    helm.run(Some(&kubeconfig), &[&upgrade[..], &changes[..]].concat()).expect("helm upgrade");
    let exists = |kind: &str| {
        plane.kubectl().args(["get", kind, RELEASE, "-n", &system]).output().expect("kubectl").status.success()
    };
    assert!(exists("podmonitor") && !exists("servicemonitor"), "the upgrade swapped the monitors");
    let upgraded = deployment(plane);
    assert!(daemon_args(&upgraded).contains(&"--approval=manual".to_string()), "the upgrade changed the args");
    assert_eq!(upgraded["spec"]["replicas"], 3);
    helm.run(Some(&kubeconfig), &["rollback", RELEASE, "1", "-n", &system]).expect("helm rollback");
    let rolled_back = deployment(plane);
    assert_eq!(daemon_args(&rolled_back), daemon_args(&installed), "the rollback restored the install's args");
    assert_eq!(rolled_back["spec"]["replicas"], 2);
    assert!(exists("servicemonitor") && !exists("podmonitor"), "the rollback swapped them back");
    let history = helm.run(Some(&kubeconfig), &["history", RELEASE, "-n", &system, "-o", "json"]).expect("history");
    assert_eq!(serde_json::from_str::<Value>(&history).expect("json").as_array().map(Vec::len), Some(3));
    if !with_daemon {
        // The CRDs adopted after `kubectl apply --server-side`: the first upgrade that changes one
        // conflicts with kubectl's field manager under Helm 4, and goes through with
        // `--force-conflicts`, as the chart's README says.
        let newer = tempfile::tempdir().expect("dir");
        let copied = std::process::Command::new("cp")
            .args(["-r", &chart_path])
            .arg(newer.path().join("capdeck"))
            .status()
            .expect("cp");
        assert!(copied.success());
        let crd = newer.path().join("capdeck/files/crds/capdeck.dev_freezes.yaml");
        let original = std::fs::read_to_string(&crd).expect("crd");
        let changed = original.replacen("description: \"Freeze: ", "description: \"Freeze (a newer chart): ", 1);
        assert_ne!(changed, original, "the copy's CRD changed");
        std::fs::write(&crd, changed).expect("write");
        let newer_chart = newer.path().join("capdeck").display().to_string();
        let upgrade = ["upgrade", RELEASE, &newer_chart, "-n", &system, "--reuse-values"];
        let conflict = helm.run(Some(&kubeconfig), &upgrade).expect_err("kubectl's fields conflict");
        assert!(conflict.contains("conflict") && conflict.contains("kubectl"), "{conflict}");
        helm.run(Some(&kubeconfig), &[&upgrade[..], &["--force-conflicts"]].concat()).expect("forced upgrade");
        let output = plane
            .kubectl()
            .args([
                "get",
                "crd",
                "freezes.capdeck.dev",
                "-o",
                "jsonpath={.spec.versions[0].schema.openAPIV3Schema.description}",
            ])
            .output()
            .expect("kubectl");
        assert!(text(&output).0.starts_with("Freeze (a newer chart): "), "{}", text(&output).0);
    }

    let batch =
        if with_daemon { Some(daemon_as_the_service_account(&world, &rolled_back, &system).await) } else { None };

    // Uninstall: nothing of the release is left but the CRDs it keeps (and the batch they hold).
    helm.run(Some(&kubeconfig), &["uninstall", RELEASE, "-n", &system, "--wait"]).expect("helm uninstall");
    let selector = format!("app.kubernetes.io/instance={RELEASE}");
    let kinds = "deployments,services,serviceaccounts,roles,rolebindings,configmaps,poddisruptionbudgets,\
                 networkpolicies,servicemonitors,podmonitors,prometheusrules,clusterroles,clusterrolebindings,\
                 validatingadmissionpolicies,validatingadmissionpolicybindings";
    let output = plane.kubectl().args(["get", kinds, "-A", "-l", &selector, "-o", "name"]).output().expect("kubectl");
    let (left, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    assert!(left.trim().is_empty(), "helm uninstall left: {left}");
    for policy in ["capdeck-attribution", "capdeck-freeze-attribution", "capdeck-engine-lease"] {
        let output = plane.kubectl().args(["get", "validatingadmissionpolicy", policy]).output().expect("kubectl");
        assert!(!output.status.success(), "the admission policy {policy} was left behind");
    }
    let output = plane
        .kubectl()
        .args(["get", "crd", "rotationbatches.capdeck.dev", "freezes.capdeck.dev", "-o", "name"])
        .output()
        .expect("kubectl");
    assert!(output.status.success(), "the CRDs are kept: {}", String::from_utf8_lossy(&output.stderr));
    if let Some(batch) = batch {
        let output =
            plane.kubectl().args(["get", "rotationbatches", "-n", &world.ns, "-o", "name"]).output().expect("kubectl");
        assert!(text(&output).0.contains(&batch), "and with them the batches");
    }
}

/// The daemon as the chart's ServiceAccount (its token), with the live Deployment's arguments:
/// it leads, rolls a forced rotation, and exports every metric the alerts and the dashboard use;
/// the batch's name.
async fn daemon_as_the_service_account(world: &World, rolled_back: &Value, system: &str) -> String {
    let plane = world.plane();
    let service_account =
        rolled_back["spec"]["template"]["spec"]["serviceAccountName"].as_str().expect("sa").to_string();
    let output = plane
        .kubectl()
        .args(["create", "token", &service_account, "-n", system, "--duration=1h"])
        .output()
        .expect("kubectl create token");
    let (token, stderr) = text(&output);
    assert!(output.status.success(), "create token: {stderr}");
    let sa_kubeconfig = plane.write_token_kubeconfig("chart-sa", token.trim()).expect("kubeconfig");
    let health_port = crate::control_plane::free_port().expect("port");
    let args: Vec<String> = daemon_args(rolled_back)
        .into_iter()
        .map(
            |arg| {
                if arg.starts_with("--health-addr=") { format!("--health-addr=127.0.0.1:{health_port}") } else { arg }
            },
        )
        .collect();
    let workloads = world.workloads();
    let dir = tempfile::tempdir().expect("dir");
    let mut daemon = Daemon::spawn(
        &sa_kubeconfig,
        &args,
        &[("POD_NAMESPACE", system), ("POD_NAME", "capdeck-0"), ("RUST_LOG", "info")],
        health_port,
        dir.path(),
    );
    let batch = crate::stories::process::leads_then_rolls_a_forced_rotation(world, &daemon, "chart").await;
    let (code, metrics) = http_get(&format!("{}/metrics", daemon.health)).await.expect("metrics");
    assert_eq!(code, 200);
    let exported = exported(&metrics);
    let missing: Vec<String> = metrics_used().into_iter().filter(|name| !exported.contains(name)).collect();
    assert!(
        missing.is_empty(),
        "metrics the alerts or the dashboard use but the daemon does not export: {missing:?}\n{metrics}"
    );
    assert!(metrics.contains("capdeck_leader 1") && metrics.contains("capdeck_ready 1"), "{metrics}");
    let log = daemon.log();
    assert!(!log.contains("forbidden"), "the chart's ServiceAccount was refused something: {log}");
    assert!(daemon.terminate().success());
    workloads.stop().await;
    batch.name_any()
}

/// A directory with `values.yaml` holding `values` (JSON is YAML).
fn dir_with_values(values: &Value) -> Result<tempfile::TempDir, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("values.yaml"), values.to_string()).map_err(|e| e.to_string())?;
    Ok(dir)
}
