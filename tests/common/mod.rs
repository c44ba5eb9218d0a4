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

/// Poll `check` until it is true or `limit` passes (tokio time, so paused tests run instantly).
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
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
