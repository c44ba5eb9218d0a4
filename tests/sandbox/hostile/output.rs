//! Cluster data never drives the operator's terminal through the CLI: every field a table, wide
//! or name output prints is fed a hostile value (escape sequences that retitle the window, clear
//! the screen, write the clipboard with OSC 52, a carriage return and a C1 CSI), and no control
//! character but the newline reaches stdout or stderr. JSON stays exact.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common;
use capdeck::sandbox::Sandbox;

/// What an attacker with patch rights on one object writes into it.
const HOSTILE: &str = "x\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}]52;c;SGVsbG8=\u{7}\rOVER\u{9b}31m";

fn run(kubeconfig: &std::path::Path, args: &[&str]) -> (String, String, Option<i32>) {
    let output = assert_cmd::Command::cargo_bin("capdeck")
        .expect("bin")
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("runs");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.code(),
    )
}

fn assert_terminal_safe(what: &str, (stdout, stderr, code): &(String, String, Option<i32>)) {
    for (stream, text) in [("stdout", stdout), ("stderr", stderr)] {
        let bad: Vec<char> = text.chars().filter(|c| c.is_control() && *c != '\n').collect();
        assert!(bad.is_empty(), "{what} ({stream}, exit {code:?}) sent control characters {bad:?}:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_control_character_from_cluster_data_reaches_the_terminal() {
    let sandbox = Sandbox::default();
    sandbox.load_demo().expect("demo seed");
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let mut secret = sandbox.get("", "secrets", "cap-shop", "bookshop-uaa-bind").expect("binding Secret");
    secret["data"]["xsappname"] = json!(b64(HOSTILE));
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    sandbox
        .load([
            secret,
            json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
                   "metadata": {"name": "bookshop-h0st1", "namespace": "cap-shop"},
                   "spec": {"application": "bookshop", "windowEnd": now,
                            "secrets": [{"name": "bookshop-uaa-bind", "service": "uaa", "dataHash": "h", "rotatedAt": now}],
                            "hold": {"by": HOSTILE, "at": now, "reason": HOSTILE}},
                   "status": {"phase": "Held"}}),
            json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenant",
                   "metadata": {"name": "bookshop-hostile", "namespace": "cap-shop"},
                   "spec": {"capApplicationInstance": "bookshop", "subDomain": HOSTILE, "tenantId": HOSTILE,
                            "version": "1.10.0", "versionUpgradeStrategy": "always"},
                   "status": {"state": HOSTILE}}),
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "capdeck-engine", "namespace": "default",
                                "labels": {"capdeck.dev/engine": "true"},
                                "annotations": {"capdeck.dev/scope": "*", "capdeck.dev/leading": HOSTILE}},
                   "spec": {"holderIdentity": HOSTILE, "leaseDurationSeconds": 3600, "renewTime": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}}),
        ])
        .expect("hostile objects");
    let (_served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    // A kubeconfig whose context name is hostile too (JSON is YAML: the escapes are exact).
    let mut config: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&kubeconfig).expect("kubeconfig")).expect("yaml");
    config["contexts"][0]["name"] = json!(HOSTILE);
    config["current-context"] = json!(HOSTILE);
    let hostile_kubeconfig = dir.path().join("hostile-kubeconfig");
    // serde_json leaves C1 characters raw, which YAML refuses: escape them as JSON may.
    let text = serde_json::to_string(&config).expect("json").replace('\u{9b}', "\\u009b");
    std::fs::write(&hostile_kubeconfig, text).expect("write");

    let batches = run(&kubeconfig, &["batches", "-A", "-o", "wide"]);
    assert!(batches.0.contains("pwned"), "the hold's author is printed, escaped: {}", batches.0);
    assert_terminal_safe("batches -A -o wide", &batches);
    assert_terminal_safe("batches -A -o name", &run(&kubeconfig, &["batches", "-A", "-o", "name"]));
    let tenants = run(&kubeconfig, &["tenants", "-A", "-o", "wide"]);
    assert!(tenants.0.contains("pwned"), "{}", tenants.0);
    assert_terminal_safe("tenants -A", &tenants);
    assert_terminal_safe("deps", &run(&kubeconfig, &["deps", "--app", "cap-shop/bookshop"]));
    let doctor = run(&kubeconfig, &["doctor", "-A"]);
    assert!(doctor.0.contains("pwned"), "the Lease holder is printed, escaped: {}", doctor.0);
    assert_terminal_safe("doctor", &doctor);
    let fleet = run(&hostile_kubeconfig, &["fleet", "-o", "wide"]);
    assert!(fleet.0.contains("pwned"), "{}{}", fleet.0, fleet.1);
    assert_terminal_safe("fleet -o wide", &fleet);
    assert_terminal_safe("credentials", &run(&kubeconfig, &["credentials", "-A", "-o", "wide"]));
    // JSON stays exact: the value comes back byte for byte.
    let (json_text, _, _) = run(&kubeconfig, &["batches", "-n", "cap-shop", "-o", "json"]);
    assert!(!json_text.contains('\u{1b}'), "JSON escapes it");
    let parsed: Value = serde_json::from_str(&json_text).expect("json");
    let held_by: Vec<&str> = parsed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item.pointer("/hold/by").and_then(Value::as_str))
        .collect();
    assert!(held_by.contains(&HOSTILE), "{json_text}");
    assert_terminal_safe(
        "release (the action's summary)",
        &run(&kubeconfig, &["release", "cap-shop/bookshop-h0st1", "--reason", "go on"]),
    );
}

/// Errors never echo credentials: a kubeconfig with a YAML error next to its `token:` and
/// `client-key-data:`, and an exec plugin whose ExecCredential has a trailing word. Every command
/// that connects (and the daemon's JSON log) names the file or plugin, the line and the problem,
/// and never prints the input around it.
#[test]
fn errors_never_echo_credentials() {
    const KUBECONFIG_TOKEN: &str = "KC-TOKEN-SECRET-5678";
    const KEY_DATA: &str = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t";
    const EXEC_TOKEN: &str = "EXEC-TOKEN-SECRET-1234";
    let dir = tempfile::tempdir().expect("dir");
    let head = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\n\
                contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n";
    let broken = dir.path().join("broken-kubeconfig");
    std::fs::write(&broken, format!("{head}    token: {KUBECONFIG_TOKEN}\n    client-key-data: \"{KEY_DATA}\n"))
        .expect("write");
    let exec = dir.path().join("exec-kubeconfig");
    let credential = format!(
        r#"{{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{{"token":"{EXEC_TOKEN}"}}}} trailing"#
    );
    std::fs::write(
        &exec,
        format!(
            "{head}    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: sh\n      args: [\"-c\", {}]\n",
            serde_json::to_string(&format!("echo '{credential}'")).expect("json")
        ),
    )
    .expect("write");
    for (kubeconfig, markers, says) in [
        (&broken, &[KUBECONFIG_TOKEN, KEY_DATA][..], "line 18 column 1: invalid indentation"),
        (&exec, &[EXEC_TOKEN][..], "failed to parse auth exec output"),
    ] {
        for args in [
            &["batches"][..],
            &["doctor"],
            &["fleet"],
            &["tenants", "-A"],
            &["--daemon", "--health-addr", "127.0.0.1:0"],
        ] {
            let (stdout, stderr, code) = run(kubeconfig, args);
            let all = format!("{stdout}{stderr}");
            for marker in markers {
                assert!(!all.contains(marker), "{args:?} with {} printed a credential:\n{all}", kubeconfig.display());
            }
            assert!(all.contains(says), "{args:?} names the line and the problem:\n{all}");
            assert_ne!(code, Some(0), "{args:?}: {all}");
        }
    }
}

/// clap quotes a refused value in its error: a hostile `--reason` reaches the terminal escaped,
/// and a long one shortened (it was echoed whole, 2,000 characters on one line).
#[test]
fn a_usage_error_never_echoes_control_characters_or_a_flood() {
    let nowhere = std::path::Path::new("/nonexistent/kubeconfig");
    let refused = run(nowhere, &["hold", "ns/b", "--reason", &format!("{HOSTILE}\u{85}")]);
    assert_eq!(refused.2, Some(2), "{refused:?}");
    assert_terminal_safe("a refused hostile --reason", &refused);
    assert!(refused.1.contains("\\x0dOVER\\x9b31m\\x85"), "the value is shown, escaped: {}", refused.1);
    let long = "x".repeat(2000);
    let refused = run(nowhere, &["hold", "ns/b", "--reason", &long]);
    assert_eq!(refused.2, Some(2), "{refused:?}");
    assert!(refused.1.lines().all(|line| line.chars().count() < 400), "{}", refused.1);
    assert!(refused.1.contains("(2000 characters)") && refused.1.contains("at most 1024"), "{}", refused.1);
}

/// A kubeconfig's URLs may carry a password (`server: http://admin:PW@host`, `proxy-url`) and a
/// token may hold a line break: neither reaches output, and nothing panics.
#[test]
fn user_info_in_kubeconfig_urls_and_broken_tokens_never_reach_output() {
    const MARKER: &str = "URL-SECRET-4321";
    let dir = tempfile::tempdir().expect("dir");
    let kubeconfig = |name: &str, cluster: &str, user: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n{cluster}contexts:\n- name: c\n  \
                 context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n{user}"
            ),
        )
        .expect("write");
        path
    };
    let with_password =
        kubeconfig("password", &format!("    server: http://admin:{MARKER}@127.0.0.1:1\n"), "    token: t\n");
    let with_proxy = kubeconfig(
        "proxy",
        &format!("    server: http://127.0.0.1:1\n    proxy-url: http://u:{MARKER}@127.0.0.1:2\n"),
        "    token: t\n",
    );
    let broken_token =
        kubeconfig("token", "    server: http://127.0.0.1:1\n", &format!("    token: \"{MARKER}\\nx\"\n"));
    for config in [&with_password, &with_proxy, &broken_token] {
        for args in [&["batches", "-A"][..], &["doctor"], &["fleet"], &["doctor", "-o", "json"]] {
            let (stdout, stderr, code) = run(config, args);
            let said = format!("{stdout}{stderr}");
            assert_ne!(code, Some(0), "{args:?}: {said}");
            assert!(!said.contains(MARKER), "{} {args:?} printed the secret: {said}", config.display());
            assert!(!said.contains("panicked"), "{said}");
        }
    }
    let (_, stderr, _) = run(&broken_token, &["batches", "-A"]);
    assert!(stderr.contains("token cannot be sent as an HTTP header"), "{stderr}");
    let (stdout, _, _) = run(&with_password, &["doctor"]);
    assert!(stdout.contains("http://…@127.0.0.1:1"), "the server is still named: {stdout}");
}
