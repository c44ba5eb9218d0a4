//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use capdeck::sandbox::{Sandbox, ServedSandbox};

/// How a test reaches the sandbox.
pub enum Transport {
    InProcess,
    Http,
}

/// A sandbox and a kube client for it; keeps the HTTP server alive for the test.
pub struct Cluster {
    pub sandbox: Sandbox,
    pub client: kube::Client,
    pub served: Option<ServedSandbox>,
}

impl Cluster {
    /// A sandbox as tests like it: bookmarks every second instead of every 15.
    pub async fn start(transport: Transport) -> Self {
        let config =
            capdeck::sandbox::SandboxConfig { bookmark_interval: Duration::from_secs(1), ..Default::default() };
        Self::with(Sandbox::new(config), transport).await
    }

    pub async fn with(sandbox: Sandbox, transport: Transport) -> Self {
        match transport {
            Transport::InProcess => Self { client: sandbox.client(), sandbox, served: None },
            Transport::Http => {
                let served = sandbox.serve("127.0.0.1:0".parse().expect("addr")).await.expect("serve");
                let client = http_client(&served.url);
                Self { sandbox, client, served: Some(served) }
            }
        }
    }
}

/// `sandbox` served over HTTP, with a kubeconfig for `user` in a temporary directory: how the
/// CLI, the console and the daemon reach it as they would a cluster. Keep all three alive for
/// the test (the directory is removed when dropped).
pub async fn serve_with_kubeconfig(
    sandbox: &Sandbox,
    user: &str,
) -> (ServedSandbox, tempfile::TempDir, std::path::PathBuf) {
    let served = sandbox.serve("127.0.0.1:0".parse().expect("addr")).await.expect("serve");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    capdeck::sandbox::write_kubeconfig(&kubeconfig, &served.url, user).expect("kubeconfig");
    (served, dir, kubeconfig)
}

pub fn http_client(url: &str) -> kube::Client {
    let mut config = kube::Config::new(url.parse().expect("url"));
    config.default_namespace = "default".into();
    kube::Client::try_from(config).expect("client")
}

/// What a poll saw: `true`/`Ok(())` when the wait is over, else (for `Result`) what it saw instead,
/// which the timeout message shows.
pub trait Observed {
    fn outcome(self) -> Result<(), String>;
}

impl Observed for bool {
    fn outcome(self) -> Result<(), String> {
        if self { Ok(()) } else { Err("not yet".into()) }
    }
}

impl Observed for Result<(), String> {
    fn outcome(self) -> Result<(), String> {
        self
    }
}

/// Poll every 20 ms for the first second, then every 100 ms.
fn poll_interval(waited: Duration) -> Duration {
    if waited < Duration::from_secs(1) { Duration::from_millis(20) } else { Duration::from_millis(100) }
}

/// The one async wait of the tests: poll `check` until it holds or `limit` passes, on tokio's
/// clock — paused tests advance instantly, wall-clock tests really wait. Panics naming `what`
/// and the last observation.
pub async fn eventually<F, Fut, O>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = O>,
    O: Observed,
{
    let start = tokio::time::Instant::now();
    loop {
        let last = match check().await.outcome() {
            Ok(()) => return,
            Err(last) => last,
        };
        let waited = start.elapsed();
        assert!(waited < limit, "timed out after {limit:?} waiting for {what}; last seen: {last}");
        tokio::time::sleep(poll_interval(waited)).await;
    }
}

/// The one blocking wait (threads that drive processes, tmux): like `eventually`, on the wall
/// clock.
pub fn eventually_blocking<O: Observed>(what: &str, limit: Duration, mut check: impl FnMut() -> O) {
    let start = std::time::Instant::now();
    loop {
        let last = match check().outcome() {
            Ok(()) => return,
            Err(last) => last,
        };
        let waited = start.elapsed();
        assert!(waited < limit, "timed out after {limit:?} waiting for {what}; last seen: {last}");
        std::thread::sleep(poll_interval(waited));
    }
}

/// Run a scenario once in-process and once over HTTP.
#[macro_export]
macro_rules! both_transports {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;

            #[tokio::test]
            async fn in_process() {
                let cluster = $crate::common::Cluster::start($crate::common::Transport::InProcess).await;
                ($body)(cluster).await;
            }

            #[tokio::test]
            async fn over_http() {
                let cluster = $crate::common::Cluster::start($crate::common::Transport::Http).await;
                ($body)(cluster).await;
            }
        }
    };
}

/// Kills a child process when the test ends, however it ends (a failed assertion included).
pub struct KillOnDrop(pub std::process::Child);

impl KillOnDrop {
    /// SIGKILL: no lease release, nothing flushed.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.kill();
    }
}

pub mod console;
pub mod fixtures;
pub mod invariants;
pub mod story_world;

/// `GET url` (plain HTTP on loopback, like `curl -s`): status and body, `None` while nothing
/// answers. Written out so the sandbox world needs no curl.
pub async fn http_get(url: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let mut stream = tokio::net::TcpStream::connect(authority).await.ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

/// The items of a `-o json` list (`{"kind": "List", "items": [...]}`); panics on anything else.
pub fn list_items(json: &[u8]) -> Vec<serde_json::Value> {
    let parsed: serde_json::Value = serde_json::from_slice(json).expect("-o json prints JSON");
    assert_eq!(parsed["kind"], "List", "-o json of a list is a List: {parsed}");
    parsed["items"].as_array().cloned().expect("items")
}

/// SIGTERM a child process and wait (wall clock) for its exit status.
pub fn terminate(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let status = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(status.success(), "kill -TERM {}", child.id());
    let mut exit = None;
    eventually_blocking("the process to stop on SIGTERM", limit, || {
        exit = child.try_wait().expect("wait");
        exit.is_some()
    });
    exit.expect("exited")
}
