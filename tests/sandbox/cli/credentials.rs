//! `capdeck credentials` from manifests: the JSON document, the table, and usage errors; live over
//! the sandbox, the verdicts with change windows and freezes. (Live, on both backends:
//! `stories::process::credentials_report_margins_and_verdicts`.)

use assert_cmd::Command;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

fn capdeck() -> Command {
    Command::cargo_bin("capdeck").expect("binary")
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// An application whose binding rotated 20 minutes ago with a 30m TTL on the old binding.
fn manifests() -> tempfile::TempDir {
    let ago = |seconds: i64| Timestamp::from_second(Timestamp::now().as_second() - seconds).expect("time").to_string();
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication", "metadata": {"name": "bookshop", "namespace": "shop"},
         "spec": {"btpAppName": "bookshop", "providerSubaccountId": "p",
                  "btp": {"services": [{"name": "uaa", "class": "xsuaa", "secret": "uaa-bind"},
                                       {"name": "db", "class": "hana", "secret": "db-bind"}]}}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "uaa-bind", "namespace": "shop"},
         "data": {".metadata": b64(r#"{"credentialProperties":[{"name":"clientsecret","format":"text"}]}"#),
                  "clientsecret": b64("very-secret-value")}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-bind", "namespace": "shop"},
         "data": {"root": b64(r#"{"password":"x"}"#)}},
        {"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
         "metadata": {"name": "uaa-bind", "namespace": "shop", "creationTimestamp": ago(30 * 86400)},
         "spec": {"secretName": "uaa-bind", "credentialsRotationPolicy": {"enabled": true, "rotationFrequency": "720h"}},
         "status": {"lastCredentialsRotationTime": ago(1200), "ready": "True"}},
        {"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
         "metadata": {"name": "uaa-bind-a1b2c", "namespace": "shop", "creationTimestamp": ago(1210),
                      "labels": {"services.cloud.sap.com/rotationOf": "uaa-bind"}},
         "spec": {"secretName": "uaa-bind-a1b2c", "credentialsRotationPolicy": {"enabled": false, "rotatedBindingTTL": "30m"}}},
        {"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
         "metadata": {"name": "db-bind", "namespace": "shop"},
         "spec": {"secretName": "db-bind", "secretRootKey": "root"}}
    ]});
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("world.json"), objects.to_string()).expect("write");
    dir
}

#[test]
fn json_is_one_object_with_the_verdicts_and_no_values() {
    let dir = manifests();
    let output = capdeck().args(["credentials", "-f"]).arg(dir.path()).args(["-o", "json"]).output().expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(!text.contains("very-secret-value") && !text.contains(&b64("very-secret-value")), "{text}");
    let document: Value = serde_json::from_str(&text).expect("one JSON object");
    let credentials = document["credentials"].as_array().expect("credentials");
    assert_eq!(credentials.len(), 2);
    let db = &credentials[0];
    assert_eq!((db["secret"].as_str(), db["format"].as_str()), (Some("db-bind"), Some("unreadable")));
    assert_eq!(db["rotation"]["enabled"], false);
    assert_eq!(db["verdict"], "unsafe", "no VCAP entry can be built: {db}");
    let uaa = &credentials[1];
    assert_eq!(uaa["source"], "sap-btp-service-operator");
    assert_eq!(uaa["rotation"]["frequency"], "720h");
    assert_eq!(uaa["rotation"]["rotatedBindingTTL"], "48h", "the webhook default");
    assert_eq!(uaa["rotation"]["inProgress"], false);
    assert!(uaa["rotation"]["nextDue"].as_str().is_some_and(|t| t.ends_with('Z')), "RFC 3339: {uaa}");
    assert_eq!(uaa["oldCredentials"][0]["pendingTermination"], false);
    // Revocable in ~10m; the batch would end after 1h + 15m from now.
    let margin = uaa["marginSeconds"].as_i64().expect("margin");
    assert!((-65 * 60 - 60..=-65 * 60 + 60).contains(&margin), "{margin}");
    assert_eq!(uaa["verdict"], "unsafe");
    assert!(
        uaa["reasons"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r.as_str().is_some_and(|r| r.contains("revocable in"))))
    );
}

#[test]
fn a_window_short_enough_makes_it_at_risk_and_the_table_says_so() {
    let dir = manifests();
    let output = capdeck()
        .args(["credentials", "-f"])
        .arg(dir.path())
        .args(["--rollout-delay", "1m", "--expected-rollout", "5m", "-o", "wide"])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let uaa = text.lines().find(|line| line.contains("uaa-bind")).unwrap_or_default();
    // ~10m left − (1m + 5m) = ~4m: less than one rollout to spare.
    assert!(uaa.contains("at-risk") && uaa.contains("less than the expected rollout time"), "{text}");
    assert!(text.lines().next().is_some_and(|h| h.contains("REASONS")), "{text}");
}

#[test]
fn name_output_and_bad_durations_are_usage_errors() {
    capdeck().args(["credentials", "-f", "nowhere", "-o", "name"]).assert().code(2);
    capdeck().args(["credentials", "--rollout-delay", "soon"]).assert().code(2);
    let bad = capdeck().args(["credentials", "--change-windows", "Mon 25:00-26:00 UTC"]).output().expect("runs");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("\"25:00\" is not a time of day"), "names the range");
}

#[test]
fn without_service_bindings_the_verdict_is_unknown_and_said() {
    let dir = tempfile::tempdir().expect("dir");
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication", "metadata": {"name": "a", "namespace": "n"},
         "spec": {"btpAppName": "a", "providerSubaccountId": "p", "btp": {"services": [{"name": "s", "class": "c", "secret": "s-bind"}]}}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s-bind", "namespace": "n"},
         "data": {"credentials": b64(r#"{"a":1}"#)}}]});
    std::fs::write(dir.path().join("w.json"), objects.to_string()).expect("write");
    let output = capdeck().args(["credentials", "-f"]).arg(dir.path()).output().expect("runs");
    let (stdout, stderr) =
        (String::from_utf8_lossy(&output.stdout).to_string(), String::from_utf8_lossy(&output.stderr).to_string());
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("no ServiceBinding information"), "{stderr}");
    assert!(stdout.contains("unknown") && stdout.contains("credentials"), "{stdout}");
}

/// `capdeck plan` reports a ServiceBinding whose TTL is shorter than the window + a progress
/// deadline, as a problem naming the binding and the fix.
#[test]
fn plan_names_a_rotated_binding_ttl_too_short_for_a_batch() {
    let dir = tempfile::tempdir().expect("dir");
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding", "metadata": {"name": "uaa-bind", "namespace": "shop"},
         "spec": {"secretName": "uaa-bind", "credentialsRotationPolicy": {"enabled": true, "rotatedBindingTTL": "45m"}}},
        {"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding", "metadata": {"name": "db-bind", "namespace": "shop"},
         "spec": {"secretName": "db-bind", "credentialsRotationPolicy": {"enabled": true}}}]});
    std::fs::write(dir.path().join("bindings.json"), objects.to_string()).expect("write");
    // `plan -o json` with $ROLLOUT_DELAY as given (unset: the 1h default).
    let plan = |rollout_delay: Option<&str>| -> Value {
        let mut command = capdeck();
        match rollout_delay {
            Some(delay) => command.env("ROLLOUT_DELAY", delay),
            None => command.env_remove("ROLLOUT_DELAY"),
        };
        let output = command.args(["plan", "-f"]).arg(dir.path()).args(["-o", "json"]).output().expect("runs");
        serde_json::from_slice(&output.stdout).expect("plan json")
    };
    let document = plan(None);
    let problems: Vec<&str> =
        document["problems"].as_array().expect("problems").iter().filter_map(|p| p["message"].as_str()).collect();
    assert_eq!(problems.len(), 1, "only the 45m one: {problems:?}");
    assert!(
        problems[0].contains("shop/uaa-bind: rotatedBindingTTL 45m") && problems[0].contains("at least 1h10m"),
        "{problems:?}"
    );
    // A shorter window (the engine's $ROLLOUT_DELAY) makes it fit.
    let document = plan(Some("30m"));
    assert_eq!(document["problems"], json!([]), "{document}");
}

/// `capdeck credentials -o json` against a served sandbox as `KUBECONFIG`: stdout, stderr, exit.
async fn live_credentials(kubeconfig: &std::path::Path, args: &[&str]) -> (Value, String) {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"));
    command.env("KUBECONFIG", kubeconfig).env_remove("ROLLOUT_DELAY").arg("credentials").args(args);
    command.args(["-o", "json"]);
    let output = tokio::task::spawn_blocking(move || command.output().expect("runs")).await.expect("joined");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{stderr}");
    (serde_json::from_slice(&output.stdout).expect("one JSON object"), stderr)
}

/// Each Secret's verdict and its reasons, by namespace.
fn verdicts(document: &Value) -> Vec<(String, String, String)> {
    document["credentials"]
        .as_array()
        .expect("credentials")
        .iter()
        .map(|c| {
            let reasons: Vec<&str> = c["reasons"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            (
                c["namespace"].as_str().unwrap_or("").to_string(),
                c["verdict"].as_str().unwrap_or("").to_string(),
                reasons.join(" | "),
            )
        })
        .collect()
}

/// A window whose one weekly opening starts `hours` from now (UTC) and lasts an hour.
fn window_in(hours: i64) -> String {
    let opens = Timestamp::from_second(Timestamp::now().as_second() + hours * 3600)
        .expect("time")
        .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
    let day = format!("{:?}", opens.weekday());
    let start = opens.strftime("%H:%M").to_string();
    let end = opens.checked_add(k8s_openapi::jiff::Span::new().hours(1)).expect("time").strftime("%H:%M").to_string();
    // A start at 23:xx ends on the next day: still one range.
    format!("{} {start}-{end} UTC", &day[..3])
}

/// Live: one application per namespace, each Secret's old credentials revocable in ~10h. Its
/// batch (1h window + 15m rollout) is ok without windows; it turns unsafe when it would wait for
/// an opening 20h away — set on the application (shop), on its Namespace (hr), or given as
/// --change-windows (plain) — or for a freeze that ends after the revocation (travel, created
/// through the API). Without read access to Namespaces or Freezes it says so and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_verdicts_count_change_windows_and_freezes() {
    use capdeck::sandbox::{DenyRule, Sandbox};
    let late = window_in(20);
    let ago = |seconds: i64| Timestamp::from_second(Timestamp::now().as_second() - seconds).expect("time").to_string();
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    sandbox
        .load(
            capdeck::manifest::parse_documents(include_str!("../../../assets/demo/servicebinding-crd.yaml"), false)
                .expect("CRD"),
        )
        .expect("ServiceBinding CRD");
    let mut objects = Vec::new();
    for namespace in ["default", "shop", "hr", "travel", "plain"] {
        let mut object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        if namespace == "hr" {
            object["metadata"]["annotations"] = json!({"capdeck.dev/change-windows": late});
        }
        objects.push(object);
        if namespace == "default" {
            continue;
        }
        let mut app = json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
            "metadata": {"name": "app", "namespace": namespace},
            "spec": {"btpAppName": "app", "providerSubaccountId": "p",
                     "btp": {"services": [{"name": "uaa", "class": "xsuaa", "secret": "uaa-bind"}]}}});
        if namespace == "shop" {
            app["metadata"]["annotations"] = json!({"capdeck.dev/change-windows": late});
        }
        objects.extend([
            app,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "uaa-bind", "namespace": namespace,
                       "ownerReferences": [{"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
                                            "name": "uaa-bind", "uid": "u"}]},
                   "data": {".metadata": b64(r#"{"credentialProperties":[{"name":"clientid","format":"text"}]}"#),
                            "clientid": b64("sb-1")}}),
            json!({"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
                   "metadata": {"name": "uaa-bind", "namespace": namespace, "creationTimestamp": ago(30 * 86400)},
                   "spec": {"secretName": "uaa-bind", "credentialsRotationPolicy": {"enabled": true}},
                   "status": {"lastCredentialsRotationTime": ago(600), "ready": "True"}}),
            json!({"apiVersion": "services.cloud.sap.com/v1", "kind": "ServiceBinding",
                   "metadata": {"name": "uaa-bind-a1b2c", "namespace": namespace, "creationTimestamp": ago(610),
                                "labels": {"services.cloud.sap.com/rotationOf": "uaa-bind",
                                           "services.cloud.sap.com/stale": "old-id"}},
                   "spec": {"secretName": "uaa-bind-a1b2c",
                            "credentialsRotationPolicy": {"enabled": false, "rotatedBindingTTL": "10h10m"}}}),
        ]);
    }
    sandbox.load(objects).expect("world");
    // The freeze, as `capdeck freeze` would write it: through the API, served by the CRD.
    let freeze: capdeck::api::Freeze = serde_json::from_value(json!({
        "apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
        "metadata": {"name": "namespace", "namespace": "travel"},
        "spec": {"scope": "Namespace", "until": Timestamp::from_second(Timestamp::now().as_second() + 12 * 3600).expect("time").to_string(),
                 "frozen": {"by": "alice", "at": ago(60), "reason": "release weekend"}}}))
    .expect("freeze");
    kube::Api::<capdeck::api::Freeze>::namespaced(sandbox.client(), "travel")
        .create(&kube::api::PostParams::default(), &freeze)
        .await
        .expect("created through the API");
    let (_served, _dir, kubeconfig) = crate::common::serve_with_kubeconfig(&sandbox, "alice").await;

    let (document, stderr) = live_credentials(&kubeconfig, &["-A"]).await;
    let found = verdicts(&document);
    let verdict = |namespace: &str| found.iter().find(|(ns, _, _)| ns == namespace).cloned().expect(namespace);
    let (_, shop, why) = verdict("shop");
    assert_eq!(shop, "unsafe", "{why}");
    assert!(
        why.contains("waits for the change window opening")
            && why.contains("of CAPApplication shop/app), after the old credentials may be revoked"),
        "{why}"
    );
    let (_, hr, why) = verdict("hr");
    assert_eq!(hr, "unsafe", "the Namespace's windows: {why}");
    assert!(why.contains("of Namespace hr), after the old credentials may be revoked"), "{why}");
    let (_, travel, why) = verdict("travel");
    assert_eq!(travel, "unsafe", "{why}");
    assert!(why.contains("namespace travel frozen until") && why.contains("by alice: release weekend"), "{why}");
    assert!(why.contains("DeadlineDuringFreeze"), "{why}");
    let (_, plain, why) = verdict("plain");
    assert_eq!(plain, "ok", "nothing keeps it waiting: {why}");
    assert!(stderr.contains("; no cluster change windows"), "{stderr}");
    assert_eq!(stderr.matches("no leading engine publishes its settings").count(), 1, "said once: {stderr}");
    // `capdeck fleet` judges the same: the Namespace's and the application's windows, the freeze.
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"));
    command.env("KUBECONFIG", &kubeconfig).env_remove("ROLLOUT_DELAY").args(["fleet", "-o", "json"]);
    let output = tokio::task::spawn_blocking(move || command.output().expect("runs")).await.expect("joined");
    let fleet: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let fleet_verdict = |namespace: &str| -> Vec<String> {
        let rows = fleet["fleet"].as_array().into_iter().flatten();
        let row = rows.filter(|row| row["namespace"] == namespace);
        row.flat_map(|row| row["credentials"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c["verdict"].as_str().map(str::to_string))
            .collect()
    };
    for namespace in ["shop", "hr", "travel"] {
        assert_eq!(fleet_verdict(namespace), ["unsafe"], "{namespace} in fleet as in credentials: {fleet}");
    }
    assert!(!stderr.contains("freeze information") && !stderr.contains("not readable"), "{stderr}");

    // The cluster's windows given as a flag, as the leading engine would publish them.
    let (document, stderr) = live_credentials(&kubeconfig, &["-n", "plain", "--change-windows", &late]).await;
    let (_, plain, why) = verdicts(&document).remove(0);
    assert_eq!(plain, "unsafe", "{why}");
    assert!(why.contains("from the cluster's change windows)"), "{why}");
    assert!(stderr.contains(&format!("cluster change windows {late} from your --change-windows")), "{stderr}");

    // Allowed to list Namespaces and Secrets but not to get one (the engine's ClusterRole, so the
    // chart's ServiceAccount): one namespace's windows and the binding Secrets are still read, by
    // a LIST of the name.
    sandbox.deny("get:namespaces".parse::<DenyRule>().expect("rule"));
    sandbox.deny("get:secrets".parse::<DenyRule>().expect("rule"));
    let (document, stderr) = live_credentials(&kubeconfig, &["-n", "hr"]).await;
    let (_, hr, why) = verdicts(&document).remove(0);
    assert_eq!(hr, "unsafe", "the Namespace's windows, listed: {why}\n{stderr}");
    assert!(stderr.contains("note: namespace change windows (capdeck.dev/change-windows) of hr\n"), "{stderr}");
    assert!(!stderr.contains("not readable") && !why.contains("cannot"), "{why}\n{stderr}");
    let (document, _) = live_credentials(&kubeconfig, &["-n", "plain"]).await;
    let (_, plain, why) = verdicts(&document).remove(0);
    assert_eq!(plain, "ok", "the binding Secret, listed: {why}");

    // Namespaces and Freezes that may not be read: said once each, judged without them.
    sandbox.deny("list:namespaces".parse::<DenyRule>().expect("rule"));
    sandbox.deny("list:freezes".parse::<DenyRule>().expect("rule"));
    let (document, stderr) = live_credentials(&kubeconfig, &["-A"]).await;
    let found = verdicts(&document);
    assert!(found.iter().any(|(ns, verdict, _)| ns == "hr" && verdict == "ok"), "{found:?}");
    assert!(found.iter().any(|(ns, verdict, _)| ns == "travel" && verdict == "ok"), "{found:?}");
    assert!(found.iter().any(|(ns, verdict, _)| ns == "shop" && verdict == "unsafe"), "its own annotation: {found:?}");
    assert_eq!(stderr.matches("namespace windows not readable (you may not list namespaces)").count(), 1, "{stderr}");
    assert_eq!(
        stderr.matches("no freeze information (you may not read freezes.capdeck.dev in all namespaces)").count(),
        1,
        "{stderr}"
    );
    let (_, stderr) = live_credentials(&kubeconfig, &["-n", "hr"]).await;
    assert_eq!(
        stderr.matches("namespace windows not readable (you may not get or list namespaces)").count(),
        1,
        "{stderr}"
    );
    // A binding Secret that may be neither got nor listed says so (not "malformed").
    sandbox.deny("list:secrets".parse::<DenyRule>().expect("rule"));
    let (document, _) = live_credentials(&kubeconfig, &["-n", "plain"]).await;
    let (_, _, why) = verdicts(&document).remove(0);
    assert!(why.contains("cannot be used: cannot be read: you may neither get nor list Secrets in plain"), "{why}");
}

/// Nothing consumes a binding Secret: one line says so (and where else to look), with no table
/// header alone under it; JSON still answers with an empty list.
#[test]
fn nothing_to_judge_says_so_without_an_empty_table() {
    let dir = tempfile::tempdir().expect("dir");
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lonely", "namespace": "shop"}});
    std::fs::write(dir.path().join("secret.json"), secret.to_string()).expect("write");
    let output = capdeck().args(["credentials", "-f"]).arg(dir.path()).output().expect("runs");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "", "no header alone");
    assert!(String::from_utf8_lossy(&output.stderr).contains("No CAPApplication consumes a binding Secret here."));
    let output = capdeck().args(["credentials", "-f"]).arg(dir.path()).args(["-o", "json"]).output().expect("runs");
    let document: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(document["credentials"], json!([]));
}
