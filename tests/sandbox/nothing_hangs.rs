//! Nothing waits forever (issue 32 §4): against an API server that accepts connections and never
//! answers, every one-shot command gives up at --request-timeout naming the server and the flag;
//! the daemon serves /healthz at once and says in /readyz and its log that it is still
//! connecting, and why; the console says what it waits for while an exec plugin hangs.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A TCP server that accepts every connection and never sends a byte; its port.
fn silent_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    port
}

fn kubeconfig(dir: &Path, name: &str, server: &str, user: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    \
             insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    \
             namespace: default\ncurrent-context: c\nusers:\n- name: u\n  user:\n{user}"
        ),
    )
    .expect("kubeconfig");
    path
}

fn capdeck(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    assert_cmd::Command::cargo_bin("capdeck")
        .expect("binary")
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args(args)
        // A bound for the test itself: a hang fails here instead of stalling the suite.
        .timeout(Duration::from_secs(120))
        .output()
        .expect("runs")
}

#[test]
fn one_shot_commands_give_up_at_the_request_timeout_naming_the_server() {
    let port = silent_server();
    let dir = tempfile::tempdir().expect("dir");
    for scheme in ["http", "https"] {
        let server = format!("{scheme}://127.0.0.1:{port}");
        let config = kubeconfig(dir.path(), &format!("{scheme}.kubeconfig"), &server, "    token: t\n");
        for args in [
            &["batches", "-A"][..],
            &["batches", "-n", "default", "-o", "wide"],
            &["tenants", "-A"],
            &["credentials", "-A"],
            &["deps", "--app", "default/bookshop"],
            &["approve", "default/bookshop-x", "--reason", "r"],
            &["hold", "default/bookshop-x", "--reason", "r"],
            &["doctor"],
        ] {
            let mut argv = args.to_vec();
            argv.extend(["--request-timeout", "2s"]);
            let output = capdeck(&config, &argv);
            let stdout = String::from_utf8_lossy(&output.stdout);
            let stderr = String::from_utf8_lossy(&output.stderr);
            let said = format!("{stdout}{stderr}");
            assert_ne!(output.status.code(), Some(0), "{scheme} {args:?}: {said}");
            assert!(
                said.contains(&format!("no answer from the API server at {server} within 2s (--request-timeout)")),
                "{scheme} {args:?} names the server and the flag: {said}"
            );
            assert!(!said.contains("panicked"), "{said}");
        }
    }
}

#[test]
fn an_exec_plugin_that_hangs_is_given_up_on_and_the_console_says_what_it_waits_for() {
    let dir = tempfile::tempdir().expect("dir");
    let plugin = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: sleep\n      args: [\"300\"]\n      \
                  interactiveMode: Never\n";
    let config = kubeconfig(dir.path(), "exec.kubeconfig", "http://127.0.0.1:9", plugin);
    let output = capdeck(&config, &["batches", "-A", "--request-timeout", "2s"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the exec credential plugin \"sleep\" of the kubeconfig's user gave no credentials within 2s")
            && stderr.contains("--request-timeout"),
        "{stderr}"
    );
    // The console, before it takes the screen: what it waits for, then the same error.
    let output = capdeck(&config, &["--request-timeout", "3s"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("capdeck: connecting to the current context: waiting for its credentials")
            && stderr.contains("giving up after 3s (--request-timeout)"),
        "{stderr}"
    );
    assert!(stderr.contains("exec credential plugin \"sleep\""), "{stderr}");
}

/// Poll `seen` until it gives something, or fail after `limit` (the bound of the test, not what
/// it measures).
fn wait_for<T>(limit: Duration, mut seen: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(value) = seen() {
            return value;
        }
        assert!(std::time::Instant::now() < deadline, "not seen within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// GET `path` on the daemon's health address: (status, body).
fn get(address: &str, path: &str) -> Option<(u16, String)> {
    use std::io::Write as _;
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    Some((status, body))
}

#[test]
fn the_daemon_is_alive_at_once_and_says_it_is_still_connecting_and_why() {
    let port = silent_server();
    let dir = tempfile::tempdir().expect("dir");
    let server = format!("http://127.0.0.1:{port}");
    let config = kubeconfig(dir.path(), "kubeconfig", &server, "    token: t\n");
    let health = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = health.local_addr().expect("address").to_string();
    drop(health);
    let log = dir.path().join("daemon.log");
    let daemon = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"))
        .args(["--daemon", "--health-addr", &address, "--request-timeout", "1s"])
        .env("KUBECONFIG", &config)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("POD_NAMESPACE", "default")
        .stdout(std::fs::File::create(&log).expect("log"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("daemon");
    let mut daemon = crate::common::KillOnDrop(daemon);
    let healthz = wait_for(Duration::from_secs(60), || get(&address, "/healthz"));
    assert_eq!(healthz, (200, "ok\n".to_string()), "alive while the API server says nothing");
    let (status, readyz) = wait_for(Duration::from_secs(60), || {
        get(&address, "/readyz").filter(|(_, body)| body.contains("still connecting"))
    });
    assert_eq!(status, 503, "{readyz}");
    assert!(
        readyz.starts_with(&format!("not ready: still connecting to {server} ("))
            && readyz.contains("no answer from the API server at"),
        "{readyz}"
    );
    let text = wait_for(Duration::from_secs(60), || {
        std::fs::read_to_string(&log).ok().filter(|text| text.contains("still connecting to the API server"))
    });
    assert!(text.contains("connecting to the API server") && text.contains(&server), "{text}");
    // SIGTERM while connecting: a clean stop.
    let pid = daemon.0.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
    let status = wait_for(Duration::from_secs(30), || daemon.0.try_wait().ok().flatten());
    assert_eq!(status.code(), Some(0), "{}", std::fs::read_to_string(&log).unwrap_or_default());
}
