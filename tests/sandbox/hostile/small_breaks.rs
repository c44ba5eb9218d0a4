//! Small breaks found on one walk through capdeck (issue 31 §5), each with its test: an X.509 v1
//! client certificate, the sandbox's annotation size limit, the empty list in a namespace that
//! does not exist, a daemon manifest without a cluster name.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use base64::Engine as _;
use capdeck::sandbox::Sandbox;
use serde_json::json;

use crate::common;

fn capdeck(kubeconfig: &Path) -> Command {
    let mut command = Command::cargo_bin("capdeck").expect("bin");
    command.env("KUBECONFIG", kubeconfig).env_remove("KUBERNETES_SERVICE_HOST").env_remove("ROLLOUT_DELAY");
    command
}

fn stdout_and_stderr(output: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

// ---------------------------------------------------------------------------------------------
// An X.509 v1 client certificate (what `openssl x509 -req` without `-extfile` makes).

/// One DER element at `at`: (tag, where its content starts, where it ends).
fn der_element(der: &[u8], at: usize) -> (u8, usize, usize) {
    let tag = der[at];
    let first = der[at + 1];
    let (length, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let count = usize::from(first & 0x7f);
        let length = der[at + 2..at + 2 + count].iter().fold(0usize, |sum, byte| (sum << 8) | usize::from(*byte));
        (length, 2 + count)
    };
    (tag, at + header, at + header + length)
}

fn der_wrap(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let length = content.len();
    if length < 0x80 {
        out.push(u8::try_from(length).expect("short length"));
    } else {
        let bytes: Vec<u8> = length.to_be_bytes().into_iter().skip_while(|byte| *byte == 0).collect();
        out.push(0x80 | u8::try_from(bytes.len()).expect("length of length"));
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

/// A self-signed client certificate as X.509 **v1**: rcgen writes v3 only, so its TBSCertificate
/// loses the `[0] version` and `[3] extensions` fields and is signed again with the same key.
/// Returns (certificate PEM, key PEM).
fn v1_client_certificate() -> (String, String) {
    use rcgen::SigningKey as _;
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(rcgen::DnType::CommonName, "v1-user");
    let v3 = params.self_signed(&key).expect("certificate");
    let der = v3.der().to_vec();
    let (_, certificate, _) = der_element(&der, 0);
    let (_, tbs_content, tbs_end) = der_element(&der, certificate);
    let (_, _, algorithm_end) = der_element(&der, tbs_end);
    let algorithm = &der[tbs_end..algorithm_end];
    let mut fields = Vec::new();
    let mut at = tbs_content;
    while at < tbs_end {
        let (tag, _, end) = der_element(&der, at);
        // [0] EXPLICIT version and [3] EXPLICIT extensions: absent in v1.
        if tag != 0xa0 && tag != 0xa3 {
            fields.extend_from_slice(&der[at..end]);
        }
        at = end;
    }
    let tbs = der_wrap(0x30, &fields);
    let signature = key.sign(&tbs).expect("sign");
    let mut bits = vec![0u8];
    bits.extend(signature);
    let mut body = tbs;
    body.extend_from_slice(algorithm);
    body.extend(der_wrap(0x03, &bits));
    let v1 = der_wrap(0x30, &body);
    let pem = |label: &str, der: &[u8]| {
        let text = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> =
            text.as_bytes().chunks(64).map(|chunk| std::str::from_utf8(chunk).expect("base64 is ascii")).collect();
        format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
    };
    (pem("CERTIFICATE", &v1), key.serialize_pem())
}

/// A kubeconfig whose user authenticates with an X.509 v1 client certificate, for a server
/// nobody listens on (the certificate is refused before any connection is made).
fn v1_kubeconfig(dir: &Path) -> PathBuf {
    let (certificate, key) = v1_client_certificate();
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
    let path = dir.join("v1.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    \
             insecure-skip-tls-verify: true\ncontexts:\n- name: v1-ctx\n  context:\n    cluster: c\n    user: u\n    \
             namespace: default\ncurrent-context: v1-ctx\nusers:\n- name: u\n  user:\n    client-certificate-data: \
             {}\n    client-key-data: {}\n",
            b64(&certificate),
            b64(&key)
        ),
    )
    .expect("kubeconfig");
    path
}

/// The certificate really is v1: version field absent, which openssl prints as `Version: 1`.
#[test]
fn the_hand_made_certificate_is_x509_v1() {
    let (certificate, _) = v1_client_certificate();
    let der = base64::engine::general_purpose::STANDARD
        .decode(certificate.lines().filter(|line| !line.starts_with("-----")).collect::<String>())
        .expect("pem");
    let (_, certificate_content, _) = der_element(&der, 0);
    let (_, tbs_content, _) = der_element(&der, certificate_content);
    assert_eq!(der[tbs_content], 0x02, "the TBSCertificate starts with the serial number, not [0] version");
    let (_, parsed) = x509_parser::parse_x509_certificate(&der).expect("parses");
    assert_eq!(parsed.version(), x509_parser::x509::X509Version::V1);
}

/// `capdeck batches`, `capdeck doctor` and `capdeck fleet` name the cause and the fix, and exit 1.
#[test]
fn an_x509_v1_client_certificate_is_explained_with_the_fix() {
    let dir = tempfile::tempdir().expect("dir");
    let kubeconfig = v1_kubeconfig(dir.path());
    for args in [&["batches"][..], &["doctor"], &["tenants"], &["fleet"]] {
        let output = capdeck(&kubeconfig).args(args).output().expect("runs");
        let (stdout, stderr) = stdout_and_stderr(&output);
        let all = format!("{stdout}{stderr}");
        assert_eq!(output.status.code(), Some(1), "capdeck {args:?}: {all}");
        for needle in ["X.509 v1", "v3", "extendedKeyUsage=clientAuth", "token", "\"v1-ctx\""] {
            assert!(all.contains(needle), "capdeck {args:?} does not say {needle:?}: {all}");
        }
        assert!(!all.contains("OtherError") && !all.contains("invalid private key"), "a Debug dump: {all}");
    }
}

// ---------------------------------------------------------------------------------------------
// The sandbox refuses annotations over 256 KiB, as kube-apiserver does (what breaks client-side
// `kubectl apply` of large CRDs).

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_refuses_annotations_over_256_kib_with_kube_apiservers_words() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    let sandbox = Sandbox::default();
    let (_served, _dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let key = "kubectl.kubernetes.io/last-applied-configuration";
    // The limit counts keys and values: exactly 262144 bytes is allowed, one more is not.
    let config_map = |name: &str, value_len: usize| -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {key: "x".repeat(value_len)}},
        }))
        .expect("config map")
    };
    let at_limit = 256 * 1024 - key.len();
    api.create(&PostParams::default(), &config_map("at-limit", at_limit)).await.expect("262144 bytes are allowed");
    let refused = api.create(&PostParams::default(), &config_map("over", at_limit + 1)).await;
    match refused {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"), "{status:?}");
            assert_eq!(
                status.message,
                "ConfigMap \"over\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"
            );
        }
        Err(other) => panic!("an annotation over 256 KiB was refused otherwise: {other}"),
        Ok(created) => panic!("an annotation over 256 KiB was accepted: {:?}", created.metadata.name),
    }
    // An update that grows the annotations past the limit is refused the same way.
    let mut grown = api.get("at-limit").await.expect("get");
    grown.metadata.annotations.get_or_insert_default().insert("more".into(), "y".into());
    let refused = api.replace("at-limit", &PostParams::default(), &grown).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(status)) if status.code == 422),
        "{:?}",
        refused.map(|accepted| accepted.metadata.name)
    );
}

// ---------------------------------------------------------------------------------------------
// `-n nope`: an empty list says that the namespace does not exist.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_list_in_a_namespace_that_does_not_exist_says_so() {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    let (_served, _dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    let kubeconfig_for_thread = kubeconfig.clone();
    let run = move |args: Vec<&'static str>| {
        let kubeconfig = kubeconfig_for_thread.clone();
        tokio::task::spawn_blocking(move || capdeck(&kubeconfig).args(args).output().expect("runs"))
    };
    for (command, nothing) in
        [("batches", "No rotation batches in namespace nope."), ("tenants", "No tenants in namespace nope.")]
    {
        let output = run(vec![command, "-n", "nope"]).await.expect("join");
        let (stdout, stderr) = stdout_and_stderr(&output);
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        assert_eq!(stdout, "", "nothing for a pipe");
        assert!(stderr.contains(nothing), "{stderr}");
        assert!(stderr.contains("Namespace \"nope\" does not exist in context"), "capdeck {command} -n nope: {stderr}");
        // JSON stays the empty list, with the note on stderr.
        let output = run(vec![command, "-n", "nope", "-o", "json"]).await.expect("join");
        let (stdout, stderr) = stdout_and_stderr(&output);
        assert_eq!(common::list_items(stdout.as_bytes()), Vec::<serde_json::Value>::new(), "{stdout}");
        assert!(stderr.contains("does not exist"), "{stderr}");
        // A namespace that exists and is empty: no such note.
        let output = run(vec![command, "-n", "default"]).await.expect("join");
        let (_, stderr) = stdout_and_stderr(&output);
        assert!(!stderr.contains("does not exist"), "{stderr}");
    }
    // When the namespace may not be read, nothing is said about it.
    sandbox.deny("get:namespaces".parse().expect("rule"));
    let output = run(vec!["batches", "-n", "nope"]).await.expect("join");
    let (_, stderr) = stdout_and_stderr(&output);
    assert_eq!(
        stderr.trim(),
        "No rotation batches in namespace nope. (capdeck batches -A looks in every namespace)",
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// `capdeck manifests --notify-secret` without `--cluster-name`.

#[test]
fn manifests_with_a_notify_secret_but_no_cluster_name_warn_that_messages_say_in_cluster() {
    let mut command = Command::cargo_bin("capdeck").expect("bin");
    let output = command.args(["manifests", "--notify-secret", "capdeck-system/notify:url"]).output().expect("runs");
    let (stdout, stderr) = stdout_and_stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("--notify-secret"), "the manifests are printed all the same");
    assert!(stderr.starts_with("warning: "), "{stderr}");
    assert!(stderr.contains("`in-cluster`") && stderr.contains("--cluster-name NAME"), "{stderr}");
    let named = Command::cargo_bin("capdeck")
        .expect("bin")
        .args(["manifests", "--notify-secret", "capdeck-system/notify:url", "--cluster-name", "prod-eu10"])
        .output()
        .expect("runs");
    assert_eq!(String::from_utf8_lossy(&named.stderr), "", "named: nothing to warn about");
    let plain = Command::cargo_bin("capdeck").expect("bin").arg("manifests").output().expect("runs");
    assert_eq!(String::from_utf8_lossy(&plain.stderr), "", "no notifications: nothing to warn about");
    // An incident service's receiver: the daemon would refuse to start, so manifests refuses.
    for name in [None, Some("in-cluster")] {
        let mut command = Command::cargo_bin("capdeck").expect("bin");
        command.args(["manifests", "--notify-secret", "oncall@pagerduty=capdeck-system/pd:routing-key"]);
        if let Some(name) = name {
            command.args(["--cluster-name", name]);
        }
        let output = command.output().expect("runs");
        let (stdout, stderr) = stdout_and_stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{name:?}: {stderr}");
        assert!(stdout.is_empty() && stderr.contains("--cluster-name NAME"), "{name:?}: {stderr}");
    }
    // Two receivers of one name: the daemon would refuse them at start.
    for pair in [["a@ns/s:k", "a@ns/t:k"], ["ns/s:k", "ns/s:k"]] {
        let output = Command::cargo_bin("capdeck")
            .expect("bin")
            .args(["manifests", "--cluster-name", "prod", "--notify-secret", pair[0], "--notify-secret", pair[1]])
            .output()
            .expect("runs");
        let (stdout, stderr) = stdout_and_stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{pair:?}: {stderr}");
        assert!(stdout.is_empty() && stderr.contains("two receivers would be called"), "{pair:?}: {stderr}");
    }
}

// ---------------------------------------------------------------------------------------------
// `capdeck fleet`: its flags refuse what cannot work, an unreachable row names server and cause.

#[test]
fn fleet_refuses_a_zero_timeout_and_offers_only_the_formats_it_prints() {
    let dir = tempfile::tempdir().expect("dir");
    let kubeconfig = dir.path().join("none");
    let output = capdeck(&kubeconfig).args(["fleet", "--timeout", "0s"]).output().expect("runs");
    let (_, stderr) = stdout_and_stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no time to answer"), "{stderr}");
    let output = capdeck(&kubeconfig).args(["fleet", "-o", "name"]).output().expect("runs");
    let (_, stderr) = stdout_and_stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("[possible values: table, wide, json, yaml]"), "{stderr}");
    let help = capdeck(&kubeconfig).args(["fleet", "--help"]).output().expect("runs");
    let (help, _) = stdout_and_stderr(&help);
    let output_flag = help.split("--output <FORMAT>").nth(1).and_then(|rest| rest.split("--no-headers").next());
    let output_flag = output_flag.expect("-o in fleet --help");
    assert!(output_flag.contains("yaml") && !output_flag.contains("name"), "{output_flag}");
}

#[test]
fn an_unreachable_fleet_row_names_the_server_and_the_cause() {
    let dir = tempfile::tempdir().expect("dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
    let kubeconfig = dir.path().join("kubeconfig");
    capdeck::sandbox::write_kubeconfig(&kubeconfig, &format!("http://127.0.0.1:{port}"), "someone")
        .expect("kubeconfig");
    let output = capdeck(&kubeconfig).args(["fleet", "-o", "json"]).output().expect("runs");
    let (stdout, stderr) = stdout_and_stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let document: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(
        document["fleet"][0]["why"].as_str(),
        Some(
            format!("cannot connect to http://127.0.0.1:{port}: connection refused (is the cluster up and the kubeconfig right?)")
                .as_str()
        ),
        "{stdout}"
    );
    let batches = capdeck(&kubeconfig).arg("batches").output().expect("runs");
    let (_, stderr) = stdout_and_stderr(&batches);
    assert_eq!(batches.status.code(), Some(1));
    assert!(stderr.contains("cannot reach the API server: connection refused"), "{stderr}");
    assert!(!stderr.contains("ServiceError") && !stderr.contains("client error (Connect)"), "{stderr}");
}
