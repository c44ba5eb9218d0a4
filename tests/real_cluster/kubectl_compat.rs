//! Real kubectl against the sandbox over HTTP: the kubectl built with the control plane, the one
//! on PATH, and every kubectl minor this machine has (the gcloud image ships kubectl.1.27 …
//! kubectl.1.33 next to its dispatcher). A kubectl this machine lacks is an *ignored* trial,
//! with the reason printed first.

use crate::common;
use std::path::{Path, PathBuf};
use std::time::Duration;

use capdeck::sandbox::Sandbox;
use serde_json::Value;

const VERSIONED_DIR: &str = "/usr/lib/google-cloud-sdk/bin";

/// Every kubectl to try: its trial name, the binary (or why there is none) and the client minor
/// it must report.
pub fn kubectls(built: Option<&Path>) -> Vec<(String, Result<PathBuf, String>, Option<u32>)> {
    let mut all = vec![(
        "built".to_string(),
        built.map(Path::to_path_buf).ok_or_else(|| "no control plane binaries (tools/envtest/build.sh)".to_string()),
        None,
    )];
    let on_path = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join("kubectl")).find(|path| path.is_file()));
    all.push(("on_path".into(), on_path.ok_or_else(|| "no kubectl on PATH".to_string()), None));
    for minor in 27..=33 {
        let path = Path::new(VERSIONED_DIR).join(format!("kubectl.1.{minor}"));
        let found = if path.exists() { Ok(path) } else { Err(format!("{} is not installed", path.display())) };
        all.push((format!("1_{minor}"), found, Some(minor)));
    }
    all
}

struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    async fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use tokio::io::AsyncWriteExt as _;
        let mut command = tokio::process::Command::new(&self.binary);
        command
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("kubectl starts");
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).await.expect("stdin");
        }
        let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("kubectl finishes")
            .expect("output");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args, None).await;
        assert!(ok, "kubectl {} failed ({}): {err}", args.join(" "), self.binary.display());
        out
    }

    async fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        let (ok, out, err) = self.run(args, Some(stdin)).await;
        assert!(ok, "kubectl {} failed: {err}", args.join(" "));
        out
    }

    async fn json(&self, args: &[&str]) -> Value {
        let mut full = args.to_vec();
        full.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&full).await).expect("kubectl -o json")
    }
}

pub async fn scenario(binary: PathBuf, minor: Option<u32>) {
    let sandbox = Sandbox::default();
    sandbox.load_demo().expect("demo seed");
    let cancel = tokio_util::sync::CancellationToken::new();
    let simulation = capdeck::sandbox::simulate::WorkloadSimulation { replicas_per_second: 4.0, ..Default::default() };
    let controller = sandbox.simulate_workloads(simulation, cancel.clone());
    let (served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let k = Kubectl { binary, kubeconfig, cache: dir.path().join("cache") };

    let version = k.ok(&["version", "-o", "json"]).await;
    let version: Value = serde_json::from_str(&version).expect("version json");
    assert_eq!(version["serverVersion"]["minor"], "33");
    if let Some(minor) = minor {
        assert_eq!(
            version["clientVersion"]["minor"].as_str().map(|m| m.trim_end_matches('+')),
            Some(minor.to_string().as_str())
        );
    }

    // get with CRD printer columns, by short name.
    let tenants = k.ok(&["get", "cat", "-n", "cap-shop"]).await;
    let header: Vec<&str> = tenants.lines().next().expect("header").split_whitespace().collect();
    assert_eq!(header, ["NAME", "AGE", "STATE", "SUBDOMAIN", "CURRENT", "VERSION"]);
    assert!(
        tenants
            .lines()
            .any(|l| l.starts_with("bookshop-t8 ") && l.contains("Upgrading") && l.contains("bookshop-1-9-0")),
        "{tenants}"
    );
    let versions = k.ok(&["get", "cav", "-A"]).await;
    assert!(versions.contains("1.10.0"), "{versions}");

    // apply, client side: create, then change.
    let manifest =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: default\ndata:\n  a: \"1\"\n";
    assert!(k.ok_stdin(&["apply", "-f", "-"], manifest).await.contains("created"));
    assert!(k.ok_stdin(&["apply", "-f", "-"], manifest).await.contains("unchanged"));
    assert!(k.ok_stdin(&["apply", "-f", "-"], &manifest.replace("\"1\"", "\"2\"")).await.contains("configured"));
    assert_eq!(k.json(&["get", "cm", "applied"]).await["data"]["a"], "2");
    // and server side.
    let server_side = manifest.replace("applied", "ssa").replace("\"1\"", "\"s\"");
    assert!(k.ok_stdin(&["apply", "--server-side", "-f", "-"], &server_side).await.contains("serverside-applied"));
    assert_eq!(k.json(&["get", "cm", "ssa"]).await["data"]["a"], "s");
    // A built-in through client-side apply uses strategic merge.
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: main\n        image: nginx:1\n";
    k.ok_stdin(&["apply", "-f", "-"], deployment).await;
    k.ok_stdin(&["apply", "-f", "-"], &deployment.replace("nginx:1", "nginx:2")).await;
    assert_eq!(
        k.json(&["get", "deploy", "web"]).await["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );

    // patch of each type, status subresource included.
    k.ok(&["patch", "cm", "applied", "--type", "merge", "-p", r#"{"data":{"m":"1"}}"#]).await;
    k.ok(&["patch", "cm", "applied", "--type", "json", "-p", r#"[{"op":"add","path":"/data/j","value":"2"}]"#]).await;
    k.ok(&["patch", "deploy", "web", "-p", r#"{"spec":{"template":{"metadata":{"annotations":{"rev":"3"}}}}}"#]).await;
    let data = &k.json(&["get", "cm", "applied"]).await["data"];
    assert_eq!((data["m"].as_str(), data["j"].as_str()), (Some("1"), Some("2")));
    k.ok(&[
        "patch",
        "cav",
        "bookshop-1-10-0",
        "-n",
        "cap-shop",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"state":"Processing"}}"#,
    ])
    .await;
    assert_eq!(k.json(&["get", "cav", "bookshop-1-10-0", "-n", "cap-shop"]).await["status"]["state"], "Processing");

    // label and selectors.
    k.ok(&["label", "cm", "applied", "team=sre"]).await;
    assert!(k.ok(&["get", "cm", "-l", "team=sre", "-o", "name"]).await.contains("configmap/applied"));

    // wait, and rollout status through the simulated controller.
    k.ok(&["wait", "--for=jsonpath={.status.state}=Upgrading", "cat/bookshop-t8", "-n", "cap-shop", "--timeout=20s"])
        .await;
    k.ok(&["rollout", "status", "deploy/web", "--timeout=60s"]).await;

    // replace with a stale resourceVersion is refused.
    let mut stale = k.json(&["get", "cm", "applied"]).await;
    k.ok(&["patch", "cm", "applied", "--type", "merge", "-p", r#"{"data":{"z":"0"}}"#]).await;
    stale["data"]["stale"] = Value::String("yes".into());
    let (ok, _, err) = k.run(&["replace", "-f", "-"], Some(&stale.to_string())).await;
    assert!(!ok && err.contains("the object has been modified"), "{err}");

    // get -w shows later changes.
    let watcher = {
        let mut command = tokio::process::Command::new(&k.binary);
        command
            .args(["get", "cm", "applied", "-w", "--request-timeout=20s", "--kubeconfig"])
            .arg(&k.kubeconfig)
            .arg("--cache-dir")
            .arg(&k.cache)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        command.spawn().expect("get -w")
    };
    tokio::time::sleep(Duration::from_millis(800)).await;
    k.ok(&["label", "cm", "applied", "watched=yes"]).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut watcher = watcher;
    let _ = watcher.start_kill();
    let output = watcher.wait_with_output().await.expect("watch output");
    let lines = String::from_utf8_lossy(&output.stdout).lines().filter(|l| l.starts_with("applied")).count();
    assert!(lines >= 2, "get -w printed the initial row and the change: {}", String::from_utf8_lossy(&output.stdout));

    // imperative creates (protobuf bodies), identity and access checks.
    k.ok(&["create", "namespace", "scratch"]).await;
    k.ok(&["create", "secret", "generic", "creds", "-n", "scratch", "--from-literal=password=hunter2"]).await;
    assert_eq!(k.json(&["get", "secret", "creds", "-n", "scratch"]).await["data"]["password"], "aHVudGVyMg==");
    if minor.is_none_or(|m| m >= 28) {
        assert!(k.ok(&["auth", "whoami"]).await.contains("sandbox-admin"));
    }
    assert_eq!(k.ok(&["auth", "can-i", "patch", "rotationbatches", "-n", "cap-shop"]).await.trim(), "yes");

    // describe and delete.
    assert!(k.ok(&["describe", "ctop", "-n", "cap-shop"]).await.contains("Current Step"));
    k.ok(&["delete", "cm", "applied"]).await;
    let (ok, _, err) = k.run(&["get", "cm", "applied"], None).await;
    assert!(!ok && err.contains("NotFound"), "{err}");
    k.ok(&["delete", "namespace", "scratch"]).await;

    cancel.cancel();
    let _ = controller.await;
    served.stop().await;
}
