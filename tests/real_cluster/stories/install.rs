//! Installing capdeck the way its help says, on a cluster that has none of its CRDs: the command is
//! taken from `capdeck crds --help` (its `Example:` line) and run as a shell would run it — capdeck
//! piped into the real built kubectl — against the world's server. The client-side form
//! (`kubectl apply -f -`) is refused on both backends: it copies each CRD into the
//! `last-applied-configuration` annotation, and the CAPApplicationVersion CRD is larger than
//! kube-apiserver's 256 KiB limit on annotations, so it leaves half an install.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use capdeck::sandbox::{Sandbox, SandboxConfig, ServedSandbox};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;

use crate::control_plane::{ControlPlane, Profile};
use crate::world::{Backend, client_for, eventually};

/// A cluster with no CRDs installed, and the admin kubeconfig for it. Kept alive while the story runs.
enum Bare {
    Sandbox { _sandbox: Sandbox, served: Option<ServedSandbox>, _dir: tempfile::TempDir, kubeconfig: PathBuf },
    KubeApiserver { plane: Arc<ControlPlane>, kubeconfig: PathBuf },
}

impl Bare {
    async fn start(backend: Backend) -> Self {
        match backend {
            Backend::Sandbox => {
                let sandbox = Sandbox::new(SandboxConfig::default());
                let served = sandbox.serve("127.0.0.1:0".parse().expect("addr")).await.expect("serve");
                let dir = tempfile::tempdir().expect("tempdir");
                let kubeconfig = dir.path().join("admin.kubeconfig");
                capdeck::sandbox::write_kubeconfig(&kubeconfig, &served.url, "admin").expect("kubeconfig");
                Self::Sandbox { _sandbox: sandbox, served: Some(served), _dir: dir, kubeconfig }
            }
            Backend::KubeApiserver => {
                // A control plane of its own: CRDs are cluster-wide, and the shared one has them.
                let assets = crate::world::assets().expect("the real control plane");
                let plane = tokio::task::spawn_blocking(move || ControlPlane::start(assets, Profile::Standard))
                    .await
                    .expect("join")
                    .expect("a control plane without CRDs");
                let kubeconfig = plane.kubeconfig_path("admin");
                Self::KubeApiserver { plane: Arc::new(plane), kubeconfig }
            }
        }
    }

    fn kubeconfig(&self) -> &Path {
        match self {
            Self::Sandbox { kubeconfig, .. } | Self::KubeApiserver { kubeconfig, .. } => kubeconfig,
        }
    }

    async fn stop(mut self) {
        match &mut self {
            Self::Sandbox { served, .. } => {
                if let Some(served) = served.take() {
                    served.stop().await;
                }
            }
            Self::KubeApiserver { plane, .. } => plane.stop(),
        }
    }
}

/// The command `capdeck crds --help` gives to install every CRD on a cluster without the CAP
/// Operator, split at its pipe: (capdeck's arguments, kubectl's arguments).
fn install_command_from_help() -> (Vec<String>, Vec<String>) {
    let help = Command::new(env!("CARGO_BIN_EXE_capdeck")).args(["crds", "--help"]).output().expect("capdeck runs");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let example = help
        .lines()
        .find_map(|line| line.trim().strip_suffix("(to try capdeck without it)"))
        .unwrap_or_else(|| panic!("no example for a cluster without the CAP Operator in capdeck crds --help:\n{help}"));
    let (left, right) = example.split_once('|').unwrap_or_else(|| panic!("no pipe in {example:?}"));
    let words = |text: &str| text.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let (left, right) = (words(left), words(right));
    assert_eq!(left.first().map(String::as_str), Some("capdeck"), "{example}");
    assert_eq!(right.first().map(String::as_str), Some("kubectl"), "{example}");
    (left[1..].to_vec(), right[1..].to_vec())
}

/// `capdeck ARGS | kubectl ARGS` against `kubeconfig`: kubectl's success, stdout and stderr.
fn pipe(kubectl: &Path, kubeconfig: &Path, capdeck_args: &[String], kubectl_args: &[String]) -> (bool, String, String) {
    let produced = Command::new(env!("CARGO_BIN_EXE_capdeck"))
        .args(capdeck_args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("capdeck runs");
    assert!(produced.status.success(), "capdeck {capdeck_args:?}: {}", String::from_utf8_lossy(&produced.stderr));
    let cache = tempfile::tempdir().expect("kubectl cache");
    let mut child = Command::new(kubectl)
        .args(kubectl_args)
        .arg("--cache-dir")
        .arg(cache.path())
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl starts");
    child.stdin.take().expect("stdin").write_all(&produced.stdout).expect("pipe");
    let output = child.wait_with_output().expect("kubectl ends");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The CRDs the server has, each with whether it is Established.
async fn crds_on(client: &kube::Client) -> Vec<(String, bool)> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let list = api.list(&Default::default()).await.expect("list CRDs");
    list.items
        .into_iter()
        .map(|crd| {
            let established = crd
                .status
                .iter()
                .flat_map(|status| status.conditions.iter().flatten())
                .any(|condition| condition.type_ == "Established" && condition.status == "True");
            (crd.metadata.name.unwrap_or_default(), established)
        })
        .collect()
}

pub async fn crds_install_as_the_help_says_and_client_side_apply_is_refused(backend: Backend) {
    let Ok(assets) = crate::world::assets() else {
        // Both variants need the built kubectl; without it there is nothing to run.
        assert_eq!(backend, Backend::Sandbox);
        eprintln!("no built kubectl (tools/envtest/build.sh): the sandbox variant checks nothing");
        return;
    };
    let bare = Bare::start(backend).await;
    let client = client_for(bare.kubeconfig()).await;
    let wanted: Vec<String> =
        capdeck::api::crds::all().into_iter().map(|crd| crd.metadata.name.unwrap_or_default()).collect();
    assert!(crds_on(&client).await.iter().all(|(name, _)| !wanted.contains(name)), "the cluster starts bare");

    // What the old hint said: refused, and half the CRDs are installed.
    let client_side: Vec<String> = ["apply", "-f", "-"].map(String::from).to_vec();
    let (ok, stdout, stderr) = pipe(&assets.kubectl, bare.kubeconfig(), &["crds".into()], &client_side);
    assert!(!ok, "client-side apply of the CRDs was accepted:\n{stdout}");
    assert!(
        stderr.contains("capapplicationversions.sme.sap.com")
            && stderr.contains("metadata.annotations: Too long: may not be more than 262144 bytes"),
        "{stderr}"
    );
    let half: Vec<String> = crds_on(&client).await.into_iter().map(|(name, _)| name).collect();
    assert!(!half.contains(&"capapplicationversions.sme.sap.com".to_string()), "{half:?}");
    assert!(half.contains(&"capapplications.sme.sap.com".to_string()), "half an install: {half:?}");

    // What the help says now, taken from the help itself: it installs everything, also over
    // the half install the old hint left.
    let (capdeck_args, kubectl_args) = install_command_from_help();
    assert!(kubectl_args.iter().any(|arg| arg == "--server-side"), "{kubectl_args:?}");
    let (ok, stdout, stderr) = pipe(&assets.kubectl, bare.kubeconfig(), &capdeck_args, &kubectl_args);
    assert!(ok, "capdeck {capdeck_args:?} | kubectl {kubectl_args:?} failed: {stderr}");
    for name in &wanted {
        assert!(stdout.contains(name.as_str()), "kubectl does not report {name}: {stdout}");
    }
    eventually("every CRD Established", Duration::from_secs(60), || async {
        let have = crds_on(&client).await;
        let missing: Vec<&String> = wanted
            .iter()
            .filter(|name| !have.iter().any(|(have, established)| have == *name && *established))
            .collect();
        if missing.is_empty() { Ok(()) } else { Err(format!("not (yet) established: {missing:?}")) }
    })
    .await;
    // And capdeck sees them: `doctor`'s CRD lines are all ok.
    let doctor = crate::setup::capdeck(bare.kubeconfig(), &["doctor", "-o", "json"]);
    let (report, _) = crate::setup::text(&doctor);
    let report: serde_json::Value = serde_json::from_str(&report).expect("doctor -o json");
    let crd_lines: Vec<&serde_json::Value> =
        report["findings"].as_array().into_iter().flatten().filter(|finding| finding["check"] == "crd").collect();
    assert!(!crd_lines.is_empty(), "{report}");
    assert!(crd_lines.iter().all(|finding| finding["status"] == "ok"), "{crd_lines:?}");
    bare.stop().await;
}
