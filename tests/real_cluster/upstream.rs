//! The third world: the real Go CAP Operator (built by `tools/upstream/build.sh` from the published
//! source in shared/peers) against a kube-apiserver 1.34 of its own, with the CRDs its informers
//! wait for. capdeck runs beside it on the same server — as the in-process engine, the `--daemon`
//! binary, `plan` and `doctor` — so every claim about the two side by side is measured here.
//!
//! Each story gets its own control plane: the Go operator's Lease (`capoperator-lease-lock`) is
//! cluster-wide and it watches every namespace, so two stories on one server would share it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::control_plane::{ControlPlane, Profile, Supervised, envtest_cache_root, free_port, last_lines};
use crate::world::{World, eventually};

/// The Go operator's binary and the CRDs it was built with.
#[derive(Clone, Debug)]
pub struct Upstream {
    pub controller: PathBuf,
    pub crds: PathBuf,
}

/// `$CAPDECK_CAP_OPERATOR` (the controller's path; `crds/` beside it), else the newest build in
/// the cache `tools/upstream/build.sh` fills. Never builds: a cold build takes minutes.
pub fn find() -> Result<Upstream, String> {
    let fix = "run tools/upstream/build.sh (needs Go and ../shared/peers/cap-operator-v0.35.0.tar.gz, or \
               CAPDECK_CAP_OPERATOR_SRC) or set CAPDECK_CAP_OPERATOR to a built controller";
    let controller = match std::env::var_os("CAPDECK_CAP_OPERATOR") {
        Some(path) => PathBuf::from(path),
        None => {
            let dir =
                envtest_cache_root().ok_or("no HOME to find the Go CAP Operator's cache in")?.join("cap-operator");
            let mut builds: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map_err(|_| format!("the Go CAP Operator is not built (no {}): {fix}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path().join("controller")))
                .filter(|p| p.is_file())
                .collect();
            builds.sort();
            builds
                .pop()
                .ok_or_else(|| format!("the Go CAP Operator is not built (nothing in {}): {fix}", dir.display()))?
        }
    };
    if !controller.is_file() {
        return Err(format!("no Go CAP Operator at {}: {fix}", controller.display()));
    }
    let crds = controller.parent().map(|p| p.join("crds")).unwrap_or_default();
    if !crds.join("sme.sap.com_capapplications.yaml").is_file() || !crds.join("istio.yaml").is_file() {
        return Err(format!("no CRDs beside the Go CAP Operator in {}: {fix}", crds.display()));
    }
    Ok(Upstream { controller, crds })
}

/// A control plane with the Go operator's own CRDs (not capdeck's copies), Istio's and
/// cert-manager's that its informers need, and capdeck's RotationBatch.
fn start_plane(upstream: &Upstream) -> Result<ControlPlane, String> {
    let mut plane = ControlPlane::start(crate::world::assets()?, Profile::Standard)?;
    plane.workloads_start_time = plane.start_workloads()?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&upstream.crds)
        .map_err(|e| format!("{}: {e}", upstream.crds.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        plane.kubectl_apply(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    }
    let ours: String = capdeck::api::crds::all()
        .iter()
        .filter(|crd| crd.spec.group == "capdeck.dev")
        .map(|crd| format!("---\n{}", capdeck::api::crds::to_yaml(crd).unwrap_or_default()))
        .collect();
    plane.kubectl_apply(&ours)?;
    let output = plane
        .kubectl()
        .args(["wait", "--for=condition=Established", "--timeout=90s", "crd", "--all"])
        .output()
        .map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!("CRDs not established: {}", String::from_utf8_lossy(&output.stderr)));
    }
    Ok(plane)
}

/// One story's server, with the Go operator started and stopped as the story says.
pub struct UpstreamWorld {
    pub world: World,
    pub upstream: Upstream,
    operator: Mutex<Option<GoOperator>>,
    runs: Mutex<u32>,
}

/// A running Go CAP Operator.
struct GoOperator {
    process: Supervised,
}

impl UpstreamWorld {
    pub async fn start(test: &str) -> UpstreamWorld {
        let upstream = find().expect("the Go CAP Operator");
        let for_plane = upstream.clone();
        let plane = tokio::task::spawn_blocking(move || start_plane(&for_plane))
            .await
            .expect("join")
            .expect("a control plane with the Go CAP Operator's CRDs");
        let world = World::on_plane(Arc::new(plane), test).await;
        UpstreamWorld { world, upstream, operator: Mutex::new(None), runs: Mutex::new(0) }
    }

    pub fn ns(&self) -> &str {
        &self.world.ns
    }

    fn log_path(&self, run: u32) -> PathBuf {
        self.world.plane().dir.path().join(format!("cap-operator-{run}.log"))
    }

    /// Start the Go operator out of cluster, as the admin (system:masters), with `ROLLOUT_DELAY`
    /// `delay`, `DNS_MANAGER=kubernetes` and `CERT_MANAGER=cert-manager.io` (so no Gardener CRD is
    /// needed), its metrics on a free loopback port and its Lease in `default`.
    pub fn start_operator(&self, delay: &str) {
        let mut runs = self.runs.lock().expect("lock");
        *runs += 1;
        let log = self.log_path(*runs);
        let env = [
            ("KUBECONFIG", self.world.admin_kubeconfig.display().to_string()),
            ("POD_NAMESPACE", "default".to_string()),
            ("METRICS_PORT", free_port().expect("port").to_string()),
            ("DNS_MANAGER", "kubernetes".to_string()),
            ("CERT_MANAGER", "cert-manager.io".to_string()),
            ("ROLLOUT_DELAY", delay.to_string()),
        ];
        let process =
            Supervised::start_with_env(&self.upstream.controller, &[], &env, &log).expect("the Go CAP Operator starts");
        *self.operator.lock().expect("lock") = Some(GoOperator { process });
    }

    /// SIGTERM: it releases its Lease (`ReleaseOnCancel`), so the next one leads at once.
    pub fn stop_operator(&self) {
        if let Some(mut operator) = self.operator.lock().expect("lock").take() {
            operator.process.stop();
        }
    }

    /// Everything the current (or last) Go operator run logged.
    pub fn operator_log(&self) -> String {
        let run = *self.runs.lock().expect("lock");
        std::fs::read_to_string(self.log_path(run)).unwrap_or_default()
    }

    /// Lines of the current run's log whose `msg` is `message` (the server is this world's alone).
    pub fn logged(&self, message: &str) -> Vec<Value> {
        self.operator_log()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|entry| entry["msg"] == message)
            .collect()
    }

    /// Wait until the Go operator logs that it leads (it starts its controllers then).
    pub async fn wait_operator_leads(&self) {
        eventually("the Go CAP Operator leads", Duration::from_secs(90), || async {
            let log = self.operator_log();
            if log.contains("Started leading") { Ok(()) } else { Err(last_lines(&log, 6)) }
        })
        .await;
    }

    /// Wait until each of `versions` (CAPApplicationVersions) is in state Ready.
    pub async fn wait_versions_ready(&self, versions: &[&str]) {
        for version in versions {
            eventually(&format!("CAPApplicationVersion {version} Ready"), Duration::from_secs(120), || async {
                let cav = self.world.get("sme.sap.com/v1alpha1", "CAPApplicationVersion", version).await;
                let state = cav.as_ref().and_then(|c| c.pointer("/status/state")).and_then(Value::as_str);
                if state == Some("Ready") {
                    Ok(())
                } else {
                    Err(format!(
                        "{:?}; operator: {}",
                        cav.and_then(|c| c.get("status").cloned()),
                        last_lines(&self.operator_log(), 6)
                    ))
                }
            })
            .await;
        }
    }

    /// `kubectl get … -o json` of what `capdeck plan -f` reads, as a file.
    pub fn dump(&self, path: &Path) {
        let output = self
            .world
            .plane()
            .kubectl()
            .args(["get", "capapplications,capapplicationversions,captenants,deployments,secrets", "-n", self.ns()])
            .args(["-o", "json"])
            .output()
            .expect("kubectl");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        std::fs::write(path, &output.stdout).expect("dump");
    }

    /// `capdeck plan -f` on a dump of the namespace: deployment → (action, vcapSha256), and problems.
    pub fn plan(&self) -> (BTreeMap<String, (String, String)>, Vec<Value>) {
        let path = self.world.plane().dir.path().join(format!("{}-dump.json", self.ns()));
        self.dump(&path);
        let output = crate::setup::capdeck(
            &self.world.admin_kubeconfig,
            &["plan", "-f", &path.display().to_string(), "-o", "json"],
        );
        let (stdout, stderr) = crate::setup::text(&output);
        assert!(output.status.success(), "capdeck plan: {stderr}");
        let plan: Value = serde_json::from_str(&stdout).expect("plan json");
        let deployments = plan["deployments"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                let field = |k: &str| d[k].as_str().unwrap_or_default().to_string();
                (field("deployment"), (field("action"), field("vcapSha256")))
            })
            .collect();
        (deployments, plan["problems"].as_array().cloned().unwrap_or_default())
    }

    /// The `VCAP_SERVICES` bytes each Deployment reads now (through its first container's envFrom).
    pub async fn vcap_payloads(&self) -> BTreeMap<String, Vec<u8>> {
        let deployments: Api<Deployment> = Api::namespaced(self.world.client.clone(), self.ns());
        let secrets: Api<Secret> = Api::namespaced(self.world.client.clone(), self.ns());
        let mut out = BTreeMap::new();
        for deployment in deployments.list(&ListParams::default()).await.expect("deployments").items {
            let name = deployment.metadata.name.clone().unwrap_or_default();
            let vcap = deployment
                .spec
                .and_then(|s| s.template.spec)
                .and_then(|s| s.containers.into_iter().next())
                .and_then(|c| c.env_from?.into_iter().next()?.secret_ref)
                .map(|r| r.name)
                .unwrap_or_default();
            let payload = secrets
                .get_opt(&vcap)
                .await
                .expect("secret")
                .and_then(|s| s.data)
                .and_then(|d| d.get("VCAP_SERVICES").map(|b| b.0.clone()))
                .unwrap_or_default();
            out.insert(name, payload);
        }
        out
    }
}

impl Drop for UpstreamWorld {
    fn drop(&mut self) {
        self.stop_operator();
        if let Some(plane) = &self.world.plane {
            plane.stop();
        }
    }
}

/// Every change to a Deployment's spec in one namespace (a new `metadata.generation`), with the
/// field manager that made it — counted by the API server's own bookkeeping, not by either
/// program, so the Go operator's writes and capdeck's are counted the same way.
pub struct SpecWrites {
    seen: Arc<Mutex<Vec<SpecWrite>>>,
    cancel: CancellationToken,
}

#[derive(Clone, Debug)]
pub struct SpecWrite {
    pub deployment: String,
    /// The manager of the newest managedFields entry: `controller` (the Go operator's binary
    /// name) or `capdeck-engine`.
    pub manager: String,
}

impl SpecWrites {
    pub async fn watch(client: kube::Client, ns: &str) -> SpecWrites {
        let api: Api<Deployment> = Api::namespaced(client, ns);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let cancel = CancellationToken::new();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (into, token) = (seen.clone(), cancel.clone());
        tokio::spawn(async move {
            use futures::StreamExt as _;
            let mut generations: BTreeMap<String, i64> = BTreeMap::new();
            let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
            let mut ready = Some(ready_tx);
            loop {
                let event = tokio::select! {
                    () = token.cancelled() => return,
                    event = stream.next() => event,
                };
                match event {
                    Some(Ok(watcher::Event::InitApply(d))) => {
                        generations
                            .insert(d.metadata.name.clone().unwrap_or_default(), d.metadata.generation.unwrap_or(0));
                    }
                    Some(Ok(watcher::Event::InitDone)) => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    Some(Ok(watcher::Event::Apply(d))) => {
                        let name = d.metadata.name.clone().unwrap_or_default();
                        let generation = d.metadata.generation.unwrap_or(0);
                        let before = generations.insert(name.clone(), generation);
                        if before.is_some_and(|b| b < generation) {
                            let manager = d
                                .metadata
                                .managed_fields
                                .iter()
                                .flatten()
                                .filter(|m| m.subresource.is_none())
                                .max_by_key(|m| m.time.as_ref().map(|t| t.0))
                                .and_then(|m| m.manager.clone())
                                .unwrap_or_default();
                            into.lock().expect("lock").push(SpecWrite { deployment: name, manager });
                        }
                    }
                    _ => {}
                }
            }
        });
        // Counting starts from a synced list; a watch that never syncs would count nothing.
        tokio::time::timeout(Duration::from_secs(30), ready_rx)
            .await
            .expect("the Deployment watch synced within 30 s")
            .expect("the Deployment watch task");
        SpecWrites { seen, cancel }
    }

    pub fn all(&self) -> Vec<SpecWrite> {
        self.seen.lock().expect("lock").clone()
    }

    /// Writes per Deployment.
    pub fn per_deployment(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for write in self.all() {
            *out.entry(write.deployment).or_insert(0) += 1;
        }
        out
    }

    /// Wait until no Deployment was written for `quiet` (a pass of either program is over), at
    /// most `limit`.
    pub async fn settle(&self, quiet: Duration, limit: Duration) {
        let mut last = (self.all().len(), tokio::time::Instant::now());
        eventually("Deployment writes to settle", limit, || {
            let count = self.all().len();
            if count != last.0 {
                last = (count, tokio::time::Instant::now());
            }
            let quiet_for = last.1.elapsed();
            async move { if quiet_for >= quiet { Ok(()) } else { Err(format!("{count} writes, quiet for {quiet_for:?}")) } }
        })
        .await;
    }

    /// Forget what was counted so far (the next phase of a story counts from zero).
    pub fn reset(&self) {
        self.seen.lock().expect("lock").clear();
    }
}

impl Drop for SpecWrites {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A CAPApplication as a user writes it for the Go operator (no status: the operator writes it).
pub fn application(ns: &str, name: &str, services: &[(&str, &str, &str)]) -> Value {
    let services: Vec<Value> =
        services.iter().map(|(n, class, secret)| json!({"name": n, "class": class, "secret": secret})).collect();
    json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"btpAppName": name, "globalAccountId": "ga", "providerSubaccountId": format!("{name}-sub"),
                    "rolloutOnCredentialUpdate": true, "btp": {"services": services}}})
}

/// A CAPApplicationVersion whose workloads are Deployments (`CAP` or `Additional`) reading `services`.
pub fn version(ns: &str, app: &str, name: &str, semver: &str, workloads: &[(&str, &str, &[&str])]) -> Value {
    let workloads: Vec<Value> = workloads
        .iter()
        .map(|(workload, kind, services)| {
            json!({"name": workload, "consumedBTPServices": services,
                   "deploymentDefinition": {"type": kind, "image": "registry.invalid/app:1"}})
        })
        .collect();
    json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplicationVersion",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"capApplicationInstance": app, "version": semver, "workloads": workloads}})
}

/// `version`, plus the `TenantOperation` Job that provisions and upgrades tenants (reading
/// `services`): an application with tenants, not a services-only one.
pub fn version_with_tenants(
    ns: &str,
    app: &str,
    name: &str,
    semver: &str,
    workloads: &[(&str, &str, &[&str])],
    services: &[&str],
) -> Value {
    let mut cav = version(ns, app, name, semver, workloads);
    if let Some(list) = cav.pointer_mut("/spec/workloads").and_then(Value::as_array_mut) {
        list.push(json!({"name": "mtx", "consumedBTPServices": services,
                         "jobDefinition": {"type": "TenantOperation", "image": "registry.invalid/mtx:1"}}));
    }
    cav
}

/// A binding Secret with `data` (plain text values, encoded here).
pub fn secret(ns: &str, name: &str, data: &BTreeMap<String, String>) -> Value {
    let data: serde_json::Map<String, Value> =
        data.iter().map(|(k, v)| (k.clone(), json!(crate::world::b64(v)))).collect();
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}, "data": data})
}
