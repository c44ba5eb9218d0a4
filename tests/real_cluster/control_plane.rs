//! A real control plane for tests — etcd and kube-apiserver started the way controller-runtime's
//! envtest starts them: free loopback ports, TLS from a CA made here, RBAC on, service-account
//! signing keys, an admin client certificate in `system:masters`, limited users from a token file.
//!
//! Binaries are found like envtest finds them (`TEST_ASSET_KUBE_APISERVER`, `TEST_ASSET_ETCD`,
//! `TEST_ASSET_KUBECTL`, then `$KUBEBUILDER_ASSETS`), then in the cache `tools/envtest/build.sh`
//! fills. Every process runs under a shell watchdog that holds the read end of a pipe from this
//! process: when the test process ends, however it ends (a panic, SIGKILL), the pipe closes and
//! the watchdog kills its server — no orphans.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, SanType};

/// The users the token file knows, besides the admin certificate. Their permissions come from
/// RBAC objects each test creates.
pub const TOKEN_USERS: &[&str] = &["alice", "dave", "erin", "mallory"];

/// The workload plane's programs, each as a user of its own in `system:masters` (so what they
/// write is told apart from the admin's and capdeck's in audit logs and managedFields).
pub const WORKLOAD_USERS: &[&str] = &["kube-controller-manager", "kube-scheduler", "kwok"];

/// The node annotation kwok manages Nodes by (`--manage-nodes-with-annotation-selector`).
pub const KWOK_NODE_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

#[derive(Clone, Debug)]
pub struct Assets {
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
    pub kubectl: PathBuf,
    /// The workload plane, built beside them by `tools/envtest/build.sh`.
    pub kube_controller_manager: PathBuf,
    pub kube_scheduler: PathBuf,
    pub kwok: PathBuf,
}

/// Where the binaries are, or why there are none (the text says how to get them).
pub fn find_assets() -> Result<Assets, String> {
    let from_env = |var: &str, name: &str| -> Option<PathBuf> {
        if let Some(path) = std::env::var_os(var) {
            return Some(PathBuf::from(path));
        }
        std::env::var_os("KUBEBUILDER_ASSETS").map(|dir| PathBuf::from(dir).join(name))
    };
    let cache_dir = default_cache_assets();
    let pick = |var: &str, name: &str| -> Option<PathBuf> {
        from_env(var, name)
            .or_else(|| cache_dir.as_ref().map(|dir| dir.join(name)))
            .filter(|path| path.is_file())
            .or_else(|| Some(PathBuf::from("/usr/local/kubebuilder/bin").join(name)).filter(|p| p.is_file()))
    };
    let (Some(kube_apiserver), Some(etcd), Some(kubectl)) = (
        pick("TEST_ASSET_KUBE_APISERVER", "kube-apiserver"),
        pick("TEST_ASSET_ETCD", "etcd"),
        pick("TEST_ASSET_KUBECTL", "kubectl"),
    ) else {
        return Err("no kube-apiserver, etcd and kubectl found: run tools/envtest/build.sh (needs Go >= 1.26), \
                    or point KUBEBUILDER_ASSETS at its output"
            .into());
    };
    // The workload plane sits beside kube-apiserver (setup-envtest's downloads have none of it).
    let beside = |var: &str, name: &str| -> Option<PathBuf> {
        std::env::var_os(var)
            .map(PathBuf::from)
            .or_else(|| kube_apiserver.parent().map(|dir| dir.join(name)))
            .filter(|path| path.is_file())
    };
    match (
        beside("TEST_ASSET_KUBE_CONTROLLER_MANAGER", "kube-controller-manager"),
        beside("TEST_ASSET_KUBE_SCHEDULER", "kube-scheduler"),
        beside("TEST_ASSET_KWOK", "kwok"),
    ) {
        (Some(kube_controller_manager), Some(kube_scheduler), Some(kwok)) => {
            Ok(Assets { kube_apiserver, etcd, kubectl, kube_controller_manager, kube_scheduler, kwok })
        }
        _ => Err(format!(
            "no kube-controller-manager, kube-scheduler and kwok beside {}: run tools/envtest/build.sh (needs Go \
             >= 1.26) and point KUBEBUILDER_ASSETS at its output",
            kube_apiserver.display()
        )),
    }
}

/// `<cache>/k8s/<version>-linux-amd64` as `tools/envtest/build.sh` names it, from its pinned go.mod.
fn default_cache_assets() -> Option<PathBuf> {
    let root = envtest_cache_root()?;
    let go_mod =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/envtest/k8s/go.mod")).ok()?;
    let version = go_mod.lines().find_map(|line| line.trim().strip_prefix("k8s.io/kubernetes v"))?;
    let version = version.split_whitespace().next()?;
    Some(root.join("k8s").join(format!("{version}-linux-amd64")))
}

/// The cache root the tools/ build scripts fill: `$CAPDECK_ENVTEST_CACHE`, else setup-envtest's
/// own default `${XDG_DATA_HOME:-~/.local/share}/kubebuilder-envtest`.
pub fn envtest_cache_root() -> Option<PathBuf> {
    std::env::var_os("CAPDECK_ENVTEST_CACHE").map(PathBuf::from).or_else(|| {
        std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share")))
            .map(|data| data.join("kubebuilder-envtest"))
    })
}

/// How a control plane is started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profile {
    #[default]
    Standard,
    /// `--watch-cache=false`: watches read etcd directly, so a compaction makes a resumed
    /// watch answer `410 Gone` at once.
    NoWatchCache,
    /// Only the CAP Operator's CRDs: capdeck's own come with what the story installs (the chart).
    WithoutCapdeckCrds,
    /// `--feature-gates=WatchList=false`: streaming lists refused, as by a server before 1.32.
    WithoutWatchList,
}

/// One server process under its watchdog (etcd, kube-apiserver, the Go CAP Operator).
pub struct Supervised {
    watchdog: Child,
    /// Closing it tells the watchdog to stop the server.
    pipe: Option<ChildStdin>,
}

impl Supervised {
    fn start(binary: &Path, args: &[String], log: &Path) -> Result<Self, String> {
        Self::start_with_env(binary, args, &[], log)
    }

    /// Like `start`, with `env` set and no in-cluster service variables (a server started here
    /// must never find the host's cluster).
    pub fn start_with_env(binary: &Path, args: &[String], env: &[(&str, String)], log: &Path) -> Result<Self, String> {
        let log_file = std::fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
        // The watchdog runs the server and, beside it, reads its own stdin until EOF (this
        // process closed the pipe or died), then stops the server: SIGTERM, SIGKILL after 5 s.
        // It exits when the server does, so a server that dies is seen at once.
        let script = r#"exec 3<&0
"$@" </dev/null & pid=$!
( while read -r _; do :; done
  kill -TERM $pid 2>/dev/null
  for _ in $(seq 50); do kill -0 $pid 2>/dev/null || exit 0; sleep 0.1; done
  kill -KILL $pid 2>/dev/null ) <&3 &
wait $pid"#;
        let mut watchdog = Command::new("bash")
            .arg("-c")
            .arg(script)
            .arg("watchdog")
            .arg(binary)
            .args(args)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let pipe = watchdog.stdin.take();
        Ok(Self { watchdog, pipe })
    }

    /// SIGTERM (SIGKILL after 5 s), and wait until it exited.
    pub fn stop(&mut self) {
        self.pipe.take();
        let _ = self.watchdog.wait();
    }

    /// The server's exit status, if it already exited.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.watchdog.try_wait().ok().flatten()
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Credentials and files of one control plane, kept for the whole run.
pub struct ControlPlane {
    pub assets: Assets,
    pub dir: tempfile::TempDir,
    pub url: String,
    pub etcd_url: String,
    /// PEM of the CA that signed the serving certificate.
    pub ca_pem: String,
    admin_cert_pem: String,
    admin_key_pem: String,
    apiserver_args: Vec<String>,
    etcd: Mutex<Option<Supervised>>,
    apiserver: Mutex<Option<Supervised>>,
    /// kube-controller-manager, kube-scheduler and kwok, once started (`start_workloads`).
    workloads: Mutex<Vec<Supervised>>,
    /// How long etcd + kube-apiserver took from spawn to `/readyz` 200.
    pub start_time: Duration,
    /// How long the workload plane took to its pool's Nodes being schedulable (when started).
    pub workloads_start_time: Duration,
}

/// kwok's Stages: what the fake nodes' kubelets do (the file says which node does what).
pub const KWOK_STAGES: &str = include_str!("../../tools/envtest/kwok/stages.yaml");

/// The node pool every story's Pods may run on: Nodes without taints whose Pods become ready.
pub const POOL_NODES: &[&str] = &["kwok-pool-0", "kwok-pool-1"];

/// A fake Node kwok plays (`name` says what its Pods do: `-crash-loop`, `-never-ready`, else
/// healthy), with `labels` and `taints` (JSON) of the story's choosing.
pub fn kwok_node(name: &str, labels: &serde_json::Value, taints: &serde_json::Value) -> serde_json::Value {
    let (key, value) = KWOK_NODE_ANNOTATION;
    let mut all_labels =
        serde_json::json!({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"});
    if let (Some(all), Some(extra)) = (all_labels.as_object_mut(), labels.as_object()) {
        all.extend(extra.clone());
    }
    serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {key: value}, "labels": all_labels},
        "spec": {"taints": taints},
    })
}

pub fn free_port() -> Result<u16, String> {
    free_ports().map(|[port]| port)
}

/// `N` distinct free loopback ports (every listener is held until all are picked).
fn free_ports<const N: usize>() -> Result<[u16; N], String> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr().map(|a| a.port()).map_err(|e| e.to_string())?;
    }
    Ok(ports)
}

/// Free disk where a plane keeps its data, and free memory (`df`, `free`): a server that stops on
/// its own may have run out of either.
fn machine_state(dir: &Path) -> String {
    let run = |program: &str, args: &[&std::ffi::OsStr]| {
        Command::new(program).args(args).output().map_or_else(
            |e| format!("{program}: {e}"),
            |out| String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
        )
    };
    format!("{}\n{}", run("df", &["-h".as_ref(), dir.as_os_str()]), run("free", &["-m".as_ref()]))
}

/// A start whose first ports are taken (etcd's client port, held here) starts on new ones.
pub fn a_start_whose_port_is_taken_starts_on_new_ports(assets: Assets) -> Result<(), String> {
    let held = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    let taken = held.local_addr().map_err(|e| e.to_string())?.port();
    let mut picks = 0;
    let plane = ControlPlane::start_on(assets, Profile::Standard, || {
        picks += 1;
        let [etcd, peer, apiserver] = free_ports()?;
        Ok([if picks == 1 { taken } else { etcd }, peer, apiserver])
    })?;
    let ready = plane.kubectl().args(["get", "--raw", "/readyz"]).output().map_err(|e| e.to_string())?;
    plane.stop();
    if picks != 2 {
        return Err(format!("expected one failed start and one on new ports, the ports were picked {picks} times"));
    }
    if plane.etcd_url.ends_with(&format!(":{taken}")) || !ready.status.success() {
        return Err(format!("the plane runs on the taken port or is not ready: {}", plane.etcd_url));
    }
    Ok(())
}

/// The exit status of the server in `slot`, if it runs no more (`None` also when stopped here).
fn exited(slot: &Mutex<Option<Supervised>>) -> Option<std::process::ExitStatus> {
    slot.lock().ok().and_then(|mut server| server.as_mut().and_then(Supervised::exited))
}

/// What etcd and kube-apiserver log when a port they were given is taken.
const PORT_TAKEN: &str = "address already in use";

/// Why a control plane did not start, and whether another start may do (a port taken, etcd
/// stopped on its own).
struct StartFailed {
    message: String,
    retry: bool,
}

impl From<String> for StartFailed {
    fn from(message: String) -> Self {
        StartFailed { message, retry: false }
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// What a failure message shows of a server's log: the first lines that say why it stopped (a
/// panic's stack fills the tail), then the last lines.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let why: Vec<&str> = text
        .lines()
        .filter(|line| {
            line.starts_with("panic:")
                || line.contains(r#""level":"fatal""#)
                || line.contains(r#""level":"panic""#)
                || line.contains(PORT_TAKEN)
        })
        .take(3)
        .collect();
    let last = last_lines(&text, 8);
    if why.is_empty() { last } else { format!("{}\n…\n{last}", why.join("\n")) }
}

/// The last `n` lines of a log, for failure messages.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

struct Pki {
    ca_pem: String,
    serving_cert: String,
    serving_key: String,
    admin_cert: String,
    admin_key: String,
    sa_key: String,
    sa_public: String,
}

fn pki() -> Result<Pki, rcgen::Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name.push(DnType::CommonName, "capdeck-envtest-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::from_params(&ca, &ca_key);

    let serving_key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(vec!["localhost".to_string()])?;
    serving.subject_alt_names.push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    serving.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let admin_key = KeyPair::generate()?;
    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin.distinguished_name.push(DnType::CommonName, "admin");
    admin.distinguished_name.push(DnType::OrganizationName, "system:masters");
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;

    let sa_key = KeyPair::generate()?;
    Ok(Pki {
        ca_pem: ca_cert.pem(),
        serving_cert: serving_cert.pem(),
        serving_key: serving_key.serialize_pem(),
        admin_cert: admin_cert.pem(),
        admin_key: admin_key.serialize_pem(),
        sa_public: sa_key.public_key_pem(),
        sa_key: sa_key.serialize_pem(),
    })
}

/// The bearer token of a token-file user.
pub fn token_of(user: &str) -> String {
    format!("capdeck-envtest-token-{user}")
}

impl ControlPlane {
    /// Start etcd and kube-apiserver and wait until `/readyz` says ok.
    ///
    /// Their ports are picked free and released before the servers bind them, so another
    /// process, or an outgoing connection's ephemeral port, can take one in between. Such a start,
    /// and one whose etcd stopped on its own (CI saw it panic once), is tried again on new ports
    /// in a new directory, up to three starts; each failed one is printed, and the error of the
    /// last says which start it was.
    pub fn start(assets: Assets, profile: Profile) -> Result<Self, String> {
        Self::start_on(assets, profile, free_ports)
    }

    /// `start` on the ports `pick` gives (etcd's client and peer ports, kube-apiserver's), once per
    /// attempt.
    fn start_on(
        assets: Assets,
        profile: Profile,
        mut pick: impl FnMut() -> Result<[u16; 3], String>,
    ) -> Result<Self, String> {
        const ATTEMPTS: u32 = 3;
        let mut attempt = 1;
        loop {
            match Self::start_once(assets.clone(), profile, pick()?) {
                Err(failed) if failed.retry && attempt < ATTEMPTS => {
                    eprintln!(
                        "control plane: start {attempt} of {ATTEMPTS} failed, trying again on new ports: {}",
                        failed.message
                    );
                    attempt += 1;
                }
                result => {
                    return result.map_err(|failed| format!("start {attempt} of {ATTEMPTS}: {}", failed.message));
                }
            }
        }
    }

    fn start_once(assets: Assets, profile: Profile, ports: [u16; 3]) -> Result<Self, StartFailed> {
        let started = Instant::now();
        let dir = tempfile::Builder::new().prefix("capdeck-envtest-").tempdir().map_err(|e| e.to_string())?;
        let pki = pki().map_err(|e| format!("cannot make certificates: {e}"))?;
        let certs = dir.path().join("certs");
        std::fs::create_dir_all(&certs).map_err(|e| e.to_string())?;
        write(&certs.join("ca.crt"), &pki.ca_pem)?;
        write(&certs.join("apiserver.crt"), &pki.serving_cert)?;
        write(&certs.join("apiserver.key"), &pki.serving_key)?;
        write(&certs.join("sa.key"), &pki.sa_key)?;
        write(&certs.join("sa.pub"), &pki.sa_public)?;
        let mut tokens: String =
            TOKEN_USERS.iter().map(|user| format!("{},{user},uid-{user}\n", token_of(user))).collect();
        for user in WORKLOAD_USERS {
            tokens.push_str(&format!("{},{user},uid-{user},system:masters\n", token_of(user)));
        }
        write(&certs.join("tokens.csv"), &tokens)?;

        let [etcd_port, peer_port, port] = ports;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd_args: Vec<String> = vec![
            format!("--data-dir={}", dir.path().join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
        ];
        let etcd = Supervised::start(&assets.etcd, &etcd_args, &dir.path().join("etcd.log"))?;

        let c = |name: &str| certs.join(name).display().to_string();
        let mut apiserver_args: Vec<String> = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--cert-dir={}", certs.display()),
            format!("--tls-cert-file={}", c("apiserver.crt")),
            format!("--tls-private-key-file={}", c("apiserver.key")),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // No `kubernetes` Service endpoints to keep: 1.37 refuses a loopback advertise address
            // with the default (lease) endpoint reconciler.
            "--endpoint-reconciler-type=none".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
            "--disable-admission-plugins=ServiceAccount".into(),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-issuer=https://127.0.0.1:{port}/"),
            format!("--service-account-key-file={}", c("sa.pub")),
            format!("--service-account-signing-key-file={}", c("sa.key")),
            format!("--client-ca-file={}", c("ca.crt")),
            format!("--token-auth-file={}", c("tokens.csv")),
            "--v=0".into(),
        ];
        if profile == Profile::NoWatchCache {
            apiserver_args.push("--watch-cache=false".into());
        }
        if profile == Profile::WithoutWatchList {
            apiserver_args.push("--feature-gates=WatchList=false".into());
        }
        let mut plane = Self {
            url: format!("https://127.0.0.1:{port}"),
            etcd_url,
            ca_pem: pki.ca_pem,
            admin_cert_pem: pki.admin_cert,
            admin_key_pem: pki.admin_key,
            apiserver_args,
            etcd: Mutex::new(Some(etcd)),
            apiserver: Mutex::new(None),
            workloads: Mutex::new(Vec::new()),
            start_time: Duration::ZERO,
            workloads_start_time: Duration::ZERO,
            assets,
            dir,
        };
        plane.write_kubeconfigs()?;
        plane.start_apiserver().map_err(|message| plane.start_failed(message))?;
        plane.start_time = started.elapsed();
        Ok(plane)
    }

    /// Why kube-apiserver did not become ready, with the machine's free disk and memory, and
    /// whether another start may do: a port was taken, or etcd stopped on its own (it panicked
    /// in CI once).
    fn start_failed(&self, message: String) -> StartFailed {
        let port_taken = ["etcd.log", "kube-apiserver.log"]
            .iter()
            .any(|log| std::fs::read_to_string(self.dir.path().join(log)).is_ok_and(|text| text.contains(PORT_TAKEN)));
        let message = format!("{message}\n--- the machine ---\n{}", machine_state(self.dir.path()));
        StartFailed { message, retry: port_taken || exited(&self.etcd).is_some() }
    }

    fn start_apiserver(&self) -> Result<(), String> {
        let log = self.dir.path().join("kube-apiserver.log");
        let server = Supervised::start(&self.assets.kube_apiserver, &self.apiserver_args, &log)?;
        *self.apiserver.lock().map_err(|_| "poisoned")? = Some(server);
        self.wait_ready(Duration::from_secs(90)).map_err(|e| {
            format!(
                "{e}\n--- kube-apiserver.log ---\n{}\n--- etcd.log ---\n{}",
                tail(&log),
                tail(&self.dir.path().join("etcd.log"))
            )
        })
    }

    /// Poll `/readyz` with the admin certificate (through kubectl, which the harness has anyway).
    fn wait_ready(&self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            let output = self.kubectl().args(["get", "--raw", "/readyz"]).output().map_err(|e| e.to_string())?;
            if output.status.success() && String::from_utf8_lossy(&output.stdout).trim() == "ok" {
                return Ok(());
            }
            if let Some(status) = exited(&self.apiserver) {
                return Err(format!("kube-apiserver exited ({status}) before it was ready"));
            }
            // kube-apiserver would wait for it another 15 s.
            if let Some(status) = exited(&self.etcd) {
                return Err(format!("etcd exited ({status}) before kube-apiserver was ready"));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "kube-apiserver at {} not ready after {limit:?}: {}",
                    self.url,
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Start the workload plane beside the server: kube-controller-manager (the deployment,
    /// replicaset, garbage-collector, job, namespace and node-lifecycle controllers),
    /// kube-scheduler, and kwok playing the kubelets of the Nodes annotated
    /// `kwok.x-k8s.io/node: fake` with `KWOK_STAGES`; then the pool's Nodes, once they are Ready
    /// and schedulable. Returns how long that took.
    pub fn start_workloads(&self) -> Result<Duration, String> {
        let started = Instant::now();
        let dir = self.dir.path();
        let kubeconfig = |user: &str| format!("--kubeconfig={}", self.kubeconfig_path(user).display());
        let stages = dir.join("kwok-stages.yaml");
        write(&stages, KWOK_STAGES)?;
        let controllers = [
            "deployment-controller",
            "replicaset-controller",
            "garbage-collector-controller",
            "job-controller",
            "namespace-controller",
            "node-lifecycle-controller",
        ];
        let kcm_args: Vec<String> = vec![
            kubeconfig("kube-controller-manager"),
            "--leader-elect=false".into(),
            format!("--controllers={}", controllers.join(",")),
            // No HTTPS endpoint: nothing here scrapes it, and it would need a port per plane.
            "--secure-port=0".into(),
            format!("--cert-dir={}", dir.join("kcm-certs").display()),
            // The defaults (20 qps) throttle a storm of a thousand Deployments.
            "--kube-api-qps=200".into(),
            "--kube-api-burst=400".into(),
            "--concurrent-deployment-syncs=10".into(),
            "--concurrent-replicaset-syncs=10".into(),
            "--v=1".into(),
        ];
        let scheduler_args: Vec<String> = vec![
            kubeconfig("kube-scheduler"),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--kube-api-qps=200".into(),
            "--kube-api-burst=400".into(),
            "--v=1".into(),
        ];
        let (key, value) = KWOK_NODE_ANNOTATION;
        let kwok_args: Vec<String> = vec![
            kubeconfig("kwok"),
            format!("--config={}", stages.display()),
            format!("--manage-nodes-with-annotation-selector={key}={value}"),
            "--node-lease-duration-seconds=40".into(),
            // Room for the storm's Pods (kwok's default is a /24).
            "--cidr=10.128.0.0/9".into(),
        ];
        let mut started_here = Vec::new();
        for (binary, args, log) in [
            (&self.assets.kube_controller_manager, &kcm_args, "kube-controller-manager.log"),
            (&self.assets.kube_scheduler, &scheduler_args, "kube-scheduler.log"),
            (&self.assets.kwok, &kwok_args, "kwok.log"),
        ] {
            started_here.push(Supervised::start(binary, args, &dir.join(log))?);
        }
        *self.workloads.lock().map_err(|_| "poisoned")? = started_here;
        let nodes: Vec<String> = POOL_NODES
            .iter()
            .map(|name| {
                serde_json::to_string(&kwok_node(name, &serde_json::json!({}), &serde_json::json!([])))
                    .unwrap_or_default()
            })
            .collect();
        self.kubectl_apply(&nodes.join("\n---\n"))?;
        for name in POOL_NODES {
            self.wait_node_schedulable(name, Duration::from_secs(90))?;
        }
        Ok(started.elapsed())
    }

    /// Wait until `node` is Ready and carries no taint of Kubernetes' own (the node-lifecycle
    /// controller took off the not-ready one admission put on it; a story's own taint stays).
    pub fn wait_node_schedulable(&self, node: &str, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        let query = r#"{.status.conditions[?(@.type=="Ready")].status}/{.spec.taints[*].key}"#;
        loop {
            let output = self
                .kubectl()
                .args(["get", "node", node, "-o", &format!("jsonpath={query}")])
                .output()
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
            let (ready, taints) = text.split_once('/').unwrap_or((&text, ""));
            if ready == "True" && !taints.split_whitespace().any(|key| key.starts_with("node.kubernetes.io/")) {
                return Ok(());
            }
            if let Some(exited) = self.workload_exited() {
                return Err(format!("{exited} exited before node {node} was schedulable"));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "node {node} not Ready and untainted after {limit:?} (Ready/taints: {text})\n--- kwok.log ---\n{}\n--- \
                     kube-controller-manager.log ---\n{}",
                    tail(&self.dir.path().join("kwok.log")),
                    tail(&self.dir.path().join("kube-controller-manager.log"))
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The workload plane's program that exited, if one did (with the end of its log).
    pub fn workload_exited(&self) -> Option<String> {
        let mut workloads = self.workloads.lock().ok()?;
        let names = ["kube-controller-manager", "kube-scheduler", "kwok"];
        workloads.iter_mut().zip(names).find_map(|(server, name)| {
            server
                .exited()
                .map(|status| format!("{name} ({status}):\n{}", tail(&self.dir.path().join(format!("{name}.log")))))
        })
    }

    /// Stop kube-apiserver (etcd keeps the data) and start it again on the same port.
    pub fn restart_apiserver(&self, down_for: Duration) -> Result<(), String> {
        if let Some(mut server) = self.apiserver.lock().map_err(|_| "poisoned")?.take() {
            server.stop();
        }
        std::thread::sleep(down_for);
        self.start_apiserver()
    }

    /// Compact etcd's history up to its current revision (through etcd's HTTP gateway), so any
    /// watch resuming from an older resourceVersion gets `410 Gone`.
    pub fn compact_etcd(&self) -> Result<i64, String> {
        let status = curl_json(&format!("{}/v3/kv/range", self.etcd_url), r#"{"key":"AA=="}"#)?;
        let revision: i64 = status
            .pointer("/header/revision")
            .and_then(|v| v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_i64()))
            .ok_or_else(|| format!("etcd answered no revision: {status}"))?;
        curl_json(
            &format!("{}/v3/kv/compaction", self.etcd_url),
            &format!(r#"{{"revision":"{revision}","physical":true}}"#),
        )?;
        Ok(revision)
    }

    pub fn kubeconfig_path(&self, user: &str) -> PathBuf {
        self.dir.path().join(format!("{user}.kubeconfig"))
    }

    fn write_kubeconfigs(&self) -> Result<(), String> {
        use base64::Engine as _;
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        let cluster = format!(
            "clusters:\n- name: envtest\n  cluster:\n    server: {}\n    certificate-authority-data: {}\n",
            self.url,
            b64(&self.ca_pem)
        );
        let file = |user: &str, credentials: String| {
            format!(
                "apiVersion: v1\nkind: Config\n{cluster}contexts:\n- name: envtest-{user}\n  context:\n    cluster: envtest\n    user: {user}\n    namespace: default\ncurrent-context: envtest-{user}\nusers:\n- name: {user}\n  user:\n{credentials}"
            )
        };
        write(
            &self.kubeconfig_path("admin"),
            &file(
                "admin",
                format!(
                    "    client-certificate-data: {}\n    client-key-data: {}\n",
                    b64(&self.admin_cert_pem),
                    b64(&self.admin_key_pem)
                ),
            ),
        )?;
        for user in TOKEN_USERS.iter().chain(WORKLOAD_USERS) {
            write(&self.kubeconfig_path(user), &file(user, format!("    token: {}\n", token_of(user))))?;
        }
        Ok(())
    }

    /// A kubeconfig for a ServiceAccount's bearer token.
    pub fn write_token_kubeconfig(&self, name: &str, token: &str) -> Result<PathBuf, String> {
        use base64::Engine as _;
        let path = self.dir.path().join(format!("{name}.kubeconfig"));
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        write(
            &path,
            &format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\ncontexts:\n- name: {name}\n  context:\n    cluster: envtest\n    user: {name}\ncurrent-context: {name}\nusers:\n- name: {name}\n  user:\n    token: {token}\n",
                self.url
            ),
        )?;
        Ok(path)
    }

    /// The built kubectl, as the admin.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new(&self.assets.kubectl);
        command.env("KUBECONFIG", self.kubeconfig_path("admin")).env_remove("KUBERNETES_SERVICE_HOST");
        command
    }

    /// `kubectl apply -f -` of `text` as the admin.
    pub fn kubectl_apply(&self, text: &str) -> Result<String, String> {
        let mut child = self
            .kubectl()
            .args(["apply", "--server-side", "--force-conflicts", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        child.stdin.take().ok_or("no stdin")?.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
        let output = child.wait_with_output().map_err(|e| e.to_string())?;
        if !output.status.success() {
            return Err(format!("kubectl apply failed: {}", String::from_utf8_lossy(&output.stderr)));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    pub fn stop(&self) {
        if let Ok(mut workloads) = self.workloads.lock() {
            for server in workloads.iter_mut() {
                server.stop();
            }
            workloads.clear();
        }
        for slot in [&self.apiserver, &self.etcd] {
            if let Ok(mut guard) = slot.lock()
                && let Some(mut server) = guard.take()
            {
                server.stop();
            }
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

fn curl_json(url: &str, body: &str) -> Result<serde_json::Value, String> {
    // etcd's gRPC gateway speaks plain HTTP on the client port; a tiny blocking client is enough.
    let rest = url.strip_prefix("http://").ok_or("not an http URL")?;
    let (host, path) = rest.split_once('/').ok_or("no path")?;
    let mut stream = std::net::TcpStream::connect(host).map_err(|e| format!("etcd at {host}: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut response = String::new();
    std::io::Read::read_to_string(&mut stream, &mut response).map_err(|e| e.to_string())?;
    let (head, payload) = response.split_once("\r\n\r\n").ok_or("malformed HTTP response")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("etcd {path}: {head}"));
    }
    // Chunked or not, the JSON object is the outermost {...}.
    let start = payload.find('{').ok_or("no JSON")?;
    let end = payload.rfind('}').ok_or("no JSON")?;
    serde_json::from_str(&payload[start..=end]).map_err(|e| format!("etcd {path}: {e}"))
}
