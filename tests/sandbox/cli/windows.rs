//! Change windows and freezes as `capdeck doctor` and `capdeck fleet` show them, over a served
//! sandbox: an annotation that cannot be parsed named with its fix, freezes in force, batches
//! waiting or escalated, the leading engine's published windows and rollout delay.

use capdeck::sandbox::{DenyRule, Sandbox};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

fn in_seconds(seconds: i64) -> String {
    Timestamp::from_second(Timestamp::now().as_second() + seconds).expect("time").to_string()
}

/// A capdeck engine's Lease, renewed now, leading everything, with its published settings.
fn leading_lease() -> Value {
    let now = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(Timestamp::now()))
        .expect("time");
    let settings = json!({"rolloutDelaySeconds": 30, "expectedRolloutSeconds": 900, "approval": "auto",
        "maxParallelRollouts": 5, "minRolloutIntervalSeconds": 600,
        "changeWindows": "Mon-Sun 00:00-24:00 UTC"});
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "capdeck-engine", "namespace": "capdeck-system",
                     "labels": {"capdeck.dev/engine": "true"},
                     "annotations": {"capdeck.dev/scope": "*", "capdeck.dev/leading": "engine-x",
                                     "capdeck.dev/settings": settings.to_string()}},
        "spec": {"holderIdentity": "engine-x", "leaseDurationSeconds": 3600, "renewTime": now}})
}

fn batch(name: &str, phase: &str, reason: &str) -> Value {
    json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"application": "bookshop", "windowEnd": in_seconds(-600),
                 "secrets": [{"name": "uaa-bind", "service": "uaa", "rotatedAt": in_seconds(-4000), "dataHash": "h"}]},
        "status": {"phase": phase,
                   "conditions": [{"type": "Ready", "status": "False", "reason": reason, "message": "m",
                                   "lastTransitionTime": in_seconds(-60)}]}})
}

/// The world: shop's application with a broken windows annotation, hr's Namespace with one, a
/// freeze of shop (created through the API), a Waiting and an escalated batch, and a leading
/// engine that publishes a 30s window and windows open all week.
async fn world() -> Sandbox {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    let mut objects: Vec<Value> = ["default", "shop", "hr", "empty", "capdeck-system"]
        .into_iter()
        .map(|name| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
        .collect();
    objects[2]["metadata"]["annotations"] = json!({"capdeck.dev/change-windows": "Mon-Fir 22:00-05:00 UTC"});
    for (namespace, name) in [("shop", "bookshop"), ("hr", "portal")] {
        let mut app = json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"btpAppName": name, "providerSubaccountId": "p", "btp": {"services": []}}});
        if name == "bookshop" {
            app["metadata"]["annotations"] = json!({"capdeck.dev/change-windows": "Mon 25:00-26:00 UTC"});
        }
        objects.push(app);
    }
    objects.push(leading_lease());
    objects.push(batch("bookshop-wait1", "Waiting", "OutsideChangeWindow"));
    objects.push(batch("bookshop-esc01", "AwaitingApproval", "DeadlineBeforeChangeWindow"));
    sandbox.load(objects).expect("world");
    // The freezes, as `capdeck freeze` would write them: through the API, served by the CRD. A
    // cluster freeze outside the Lease's namespace holds nothing.
    for (name, scope) in [("namespace", "Namespace"), ("cluster", "Cluster")] {
        let freeze: capdeck::api::Freeze = serde_json::from_value(json!({
            "apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"scope": scope, "until": in_seconds(3 * 3600),
                     "frozen": {"by": "alice", "at": in_seconds(-60), "reason": "release weekend"}}}))
        .expect("freeze");
        kube::Api::<capdeck::api::Freeze>::namespaced(sandbox.client(), "shop")
            .create(&kube::api::PostParams::default(), &freeze)
            .await
            .expect("created through the API");
    }
    sandbox
}

/// capdeck with `args` against the served sandbox: exit code, stdout, stderr.
async fn capdeck(kubeconfig: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("capdeck"));
    command.env("KUBECONFIG", kubeconfig).env_remove("ROLLOUT_DELAY").args(args);
    let output = tokio::task::spawn_blocking(move || command.output().expect("runs")).await.expect("joined");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).to_string();
    (output.status.code(), text(&output.stdout), text(&output.stderr))
}

fn lines_of<'a>(report: &'a str, check: &str) -> Vec<&'a str> {
    report.lines().filter(|line| line.starts_with(check)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_unreadable_windows_with_the_fix_and_lists_freezes_and_waiting_batches() {
    let sandbox = world().await;
    let (_served, _dir, kubeconfig) = crate::common::serve_with_kubeconfig(&sandbox, "alice").await;
    let (code, report, stderr) = capdeck(&kubeconfig, &["doctor", "-A"]).await;
    assert_eq!(code, Some(1), "an unreadable annotation holds batches: it blocks\n{report}{stderr}");
    let windows = lines_of(&report, "change windows");
    assert_eq!(windows.len(), 2, "{report}");
    assert!(
        windows.iter().any(|line| line.contains("FAIL")
            && line.contains("CAPApplication shop/bookshop cannot be read")
            && line.contains("\"25:00\" is not a time of day")
            && line.contains("kubectl annotate capapplication -n shop bookshop --overwrite")),
        "{report}"
    );
    assert!(
        windows.iter().any(|line| line.contains("Namespace hr cannot be read")
            && line.contains("\"Fir\" is not a day")
            && line.contains("kubectl annotate namespace hr --overwrite")),
        "{report}"
    );
    let freezes = lines_of(&report, "freeze");
    assert!(
        freezes
            .iter()
            .any(|line| line.contains("namespace shop frozen until") && line.contains("by alice: release weekend")),
        "{report}"
    );
    assert!(
        freezes.iter().any(|line| line.contains("warn")
            && line.contains(
                "shop/cluster: a cluster freeze outside the namespace of the engine's Lease (capdeck-system)"
            )),
        "{report}"
    );
    let waiting = lines_of(&report, "waiting").join("\n");
    assert!(
        waiting.contains("warn")
            && waiting.contains("1 batch in all namespaces waiting for a change window or a freeze")
            && waiting.contains("1 escalated (shop/bookshop-esc01)"),
        "{report}"
    );
    assert!(report.contains("freezes.capdeck.dev installed, as this binary defines it"), "the Freeze CRD: {report}");
    let delay = lines_of(&report, "rollout delay").join("\n");
    assert!(delay.contains("30s, the leading engine's"), "not its own 1h default: {report}");
    assert!(lines_of(&report, "applications").is_empty(), "-A sees applications: {report}");

    // An empty namespace: nothing to see there, and where to look instead.
    let (_, report, _) = capdeck(&kubeconfig, &["doctor", "-n", "empty"]).await;
    let here = lines_of(&report, "applications").join("\n");
    assert!(
        here.contains("no CAPApplication in namespace empty")
            && here.contains("capdeck doctor -A looks in every namespace"),
        "{report}"
    );

    // Freezes that may not be read: said, not an error of its own.
    sandbox.deny("list:freezes".parse::<DenyRule>().expect("rule"));
    let (_, report, _) = capdeck(&kubeconfig, &["doctor", "-A"]).await;
    let freezes = lines_of(&report, "freeze").join("\n");
    assert!(freezes.contains("no freeze information: you may not read freezes.capdeck.dev"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_shows_freezes_and_the_next_window() {
    let sandbox = world().await;
    let (_served, _dir, kubeconfig) = crate::common::serve_with_kubeconfig(&sandbox, "alice").await;
    let (code, stdout, stderr) = capdeck(&kubeconfig, &["fleet", "-o", "json"]).await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let document: Value = serde_json::from_str(&stdout).expect("one JSON object");
    let rows = document["fleet"].as_array().expect("rows");
    let shop = rows.iter().find(|row| row["namespace"] == "shop").expect("shop has an escalated batch");
    assert_eq!(shop["freezes"][0]["target"], "namespace shop", "{shop}");
    assert_eq!(shop["freezes"][0]["by"], "alice", "{shop}");
    assert_eq!(shop["changeWindows"], "Mon-Sun 00:00-24:00 UTC", "the leader's published windows: {shop}");

    let (_, table, _) = capdeck(&kubeconfig, &["fleet"]).await;
    let header = table.lines().next().unwrap_or_default();
    assert!(header.contains("FROZEN") && header.contains("NEXT WINDOW"), "{table}");
    let line = table.lines().find(|line| line.contains(" shop ")).unwrap_or_default();
    assert!(line.contains("namespace until ") && line.contains(" open "), "frozen, inside the windows: {table}");

    // Freezes that may not be read: `?`, and the row's detail says why.
    sandbox.deny("list:freezes".parse::<DenyRule>().expect("rule"));
    let (_, stdout, _) = capdeck(&kubeconfig, &["fleet", "-o", "json"]).await;
    let document: Value = serde_json::from_str(&stdout).expect("one JSON object");
    let shop =
        document["fleet"].as_array().and_then(|rows| rows.iter().find(|row| row["namespace"] == "shop").cloned());
    let shop = shop.expect("shop");
    assert_eq!(shop["freezes"], Value::Null, "{shop}");
    assert!(
        shop["notes"].as_array().into_iter().flatten().any(|note| note
            .as_str()
            .is_some_and(|n| n.contains("no freeze information: you may not list freezes.capdeck.dev"))),
        "{shop}"
    );
    let (_, table, _) = capdeck(&kubeconfig, &["fleet"]).await;
    let line = table.lines().find(|line| line.contains(" shop ")).unwrap_or_default();
    assert!(line.contains(" ? "), "{table}");
}
