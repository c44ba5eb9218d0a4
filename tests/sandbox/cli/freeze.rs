//! `capdeck freeze`, `capdeck unfreeze` and `capdeck freezes` as a user runs them against the
//! sandbox: the Freeze written where the engine looks for it, who froze and who lifted it kept on
//! record, and every refusal said with its fix.

use crate::common;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use capdeck::sandbox::{DenyRule, Sandbox, ServedSandbox};
use predicates::prelude::*;
use serde_json::{Value, json};

struct Cluster {
    sandbox: Sandbox,
    served: ServedSandbox,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

async fn cluster() -> Cluster {
    let sandbox = Sandbox::default();
    sandbox.install_crds();
    sandbox
        .load(
            ["shop", "ops", "capdeck-system"]
                .map(|name| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})),
        )
        .expect("namespaces");
    sandbox
        .load([json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
            "metadata": {"name": "bookshop", "namespace": "shop"},
            "spec": {"btpAppName": "bookshop", "providerSubaccountId": "p", "btp": {"services": []}}})])
        .expect("application");
    let (served, dir, kubeconfig) = common::serve_with_kubeconfig(&sandbox, "sandbox-admin").await;
    Cluster { sandbox, served, _dir: dir, kubeconfig }
}

fn capdeck(kubeconfig: &Path) -> Command {
    let mut command = Command::cargo_bin("capdeck").expect("bin");
    command.env("KUBECONFIG", kubeconfig).env_remove("CAPDECK_READONLY").env_remove("XDG_CONFIG_HOME");
    command
}

impl Cluster {
    /// Run capdeck with `args` (off the test's runtime: the sandbox serves on it).
    async fn run(&self, args: &[&str]) -> assert_cmd::assert::Assert {
        let kubeconfig = self.kubeconfig.clone();
        let args: Vec<String> = args.iter().map(ToString::to_string).collect();
        tokio::task::spawn_blocking(move || capdeck(&kubeconfig).args(args).assert()).await.expect("join")
    }

    fn freeze(&self, namespace: &str, name: &str) -> Option<Value> {
        self.sandbox.get("capdeck.dev", "freezes", namespace, name)
    }
}

fn stdout(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

/// A namespace frozen by alice, listed, lifted by bob with his reason: the record keeps both, and
/// capdeck's field manager; freezing again after the lift replaces the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freeze_list_unfreeze_and_freeze_again() {
    let cluster = cluster().await;
    cluster.sandbox.set_user("alice@example.com");
    let frozen = cluster.run(&["freeze", "-n", "shop", "--until", "4h", "--reason", "Black Friday"]).await.success();
    let said = stdout(&frozen);
    assert!(said.starts_with("froze namespace shop as alice@example.com until "), "{said}");
    assert!(
        said.contains(" (in 4h): batches of namespace shop collect but do not roll until then\nreason: Black Friday\n"),
        "{said}"
    );
    assert!(said.contains("capdeck unfreeze -n shop --reason"), "{said}");
    let freeze = cluster.freeze("shop", "namespace").expect("the Freeze shop/namespace");
    assert_eq!(freeze["spec"]["scope"], "Namespace");
    assert_eq!(freeze["spec"]["frozen"]["by"], "alice@example.com");
    assert_eq!(freeze["spec"]["frozen"]["reason"], "Black Friday");
    assert!(freeze["spec"].get("lifted").is_none(), "{freeze}");
    let managers: Vec<&str> = freeze["metadata"]["managedFields"]
        .as_array()
        .map(|fields| fields.iter().filter_map(|field| field["manager"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(managers, ["capdeck-console"], "the record shows capdeck wrote it");

    let listed = stdout(&cluster.run(&["freezes", "-n", "shop"]).await.success());
    let header: Vec<&str> = listed.lines().next().expect("header").split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "TARGET", "STATE", "FROM", "UNTIL", "BY", "REASON", "LIFTED", "BY"]);
    let row = listed.lines().nth(1).expect("a row");
    assert!(
        row.contains("namespace shop")
            && row.contains("active")
            && (row.contains("(in 3h59m)") || row.contains("(in 4h)")),
        "{listed}"
    );
    assert!(row.contains("alice@example.com") && row.contains("Black Friday"), "{listed}");

    cluster.sandbox.set_user("bob@example.com");
    let lifted = stdout(&cluster.run(&["unfreeze", "-n", "shop", "--reason", "sale moved"]).await.success());
    assert!(
        lifted.starts_with("lifted the freeze of namespace shop (frozen by alice@example.com until 20")
            && lifted
                .contains(") as bob@example.com: batches of namespace shop roll again, inside their change windows"),
        "{lifted}"
    );
    let freeze = cluster.freeze("shop", "namespace").expect("the record stays");
    assert_eq!(freeze["spec"]["frozen"]["by"], "alice@example.com", "who froze stays on record");
    assert_eq!(freeze["spec"]["frozen"]["reason"], "Black Friday");
    assert_eq!(freeze["spec"]["lifted"]["by"], "bob@example.com");
    assert_eq!(freeze["spec"]["lifted"]["reason"], "sale moved");
    assert!(freeze["spec"]["lifted"]["at"].is_string());

    let documents =
        common::list_items(&cluster.run(&["freezes", "-A", "-o", "json"]).await.success().get_output().stdout);
    assert_eq!(documents.len(), 1);
    assert_eq!(documents[0]["state"], "lifted");
    assert_eq!(documents[0]["target"], "namespace shop");
    assert_eq!(documents[0]["frozen"]["by"], "alice@example.com");
    assert_eq!(documents[0]["lifted"]["by"], "bob@example.com");

    // Lifted already: nothing to lift, said with who did.
    cluster
        .run(&["unfreeze", "-n", "shop", "--reason", "again"])
        .await
        .code(1)
        .stderr(predicate::str::contains("the freeze of namespace shop was already lifted by bob@example.com at "));

    // Frozen again after the lift: the same object, the new freeze in place of the old record.
    let uid = freeze["metadata"]["uid"].clone();
    // A month (and an hour, so that a slow run still reads "30d": kubectl's format rounds down)
    // from now, written with an offset; stored in UTC.
    let later = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() + 30 * 86_400 + 3_600).expect("time");
    let with_offset = later.to_zoned(jiff::tz::TimeZone::fixed(jiff::tz::offset(1))).strftime("%Y-%m-%dT%H:%M:%S%:z");
    let again = stdout(
        &cluster
            .run(&["freeze", "-n", "shop", "--until", &with_offset.to_string(), "--reason", "year end"])
            .await
            .success(),
    );
    assert!(
        again.contains(&format!("until {later} (in 30d)"))
            && again.contains("; it replaces the freeze by alice@example.com lifted by bob@example.com"),
        "{again}"
    );
    let freeze = cluster.freeze("shop", "namespace").expect("replaced");
    assert_eq!(freeze["metadata"]["uid"], uid, "replaced, not deleted and created");
    assert_eq!(freeze["spec"]["frozen"]["by"], "bob@example.com");
    assert_eq!(freeze["spec"]["until"], later.to_string());
    assert!(freeze["spec"].get("lifted").is_none_or(Value::is_null), "the new freeze is not lifted: {freeze}");
    cluster.served.stop().await;
}

/// `-A` writes the Freeze `cluster` into the namespace of the leading engine's Lease; without a
/// leader into `--lease-namespace`, else capdeck-system; each time it says where and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_freeze_goes_to_the_lease_namespace() {
    let cluster = cluster().await;
    let said = stdout(&cluster.run(&["freeze", "-A", "--until", "1h", "--reason", "incident"]).await.success());
    assert!(said.starts_with("froze the cluster as sandbox-admin until "), "{said}");
    assert!(said.contains("batches of every namespace the engine serves collect but do not roll"), "{said}");
    assert!(
        said.contains("nobody leads: ") && said.contains("the cluster's freeze is kept in namespace capdeck-system"),
        "{said}"
    );
    assert_eq!(
        cluster.freeze("capdeck-system", "cluster").expect("capdeck-system/cluster")["spec"]["scope"],
        "Cluster"
    );

    let said = stdout(
        &cluster
            .run(&["freeze", "-A", "--lease-namespace", "ops", "--until", "1h", "--reason", "incident"])
            .await
            .success(),
    );
    assert!(said.contains("the cluster's freeze is kept in namespace ops (--lease-namespace)"), "{said}");
    assert!(cluster.freeze("ops", "cluster").is_some());

    // An engine leads from its Lease in `shop`: that is where the cluster's freeze goes.
    let now = jiff::Timestamp::now();
    cluster
        .sandbox
        .load([json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "capdeck-engine", "namespace": "shop",
                         "labels": {"capdeck.dev/engine": "true"},
                         "annotations": {"capdeck.dev/scope": "*", "capdeck.dev/leading": "engine-1"}},
            "spec": {"holderIdentity": "engine-1", "leaseDurationSeconds": 3600,
                     "renewTime": now.to_string()}})])
        .expect("lease");
    let said = stdout(
        &cluster
            .run(&["freeze", "-A", "--lease-namespace", "ops", "--until", "1h", "--reason", "incident"])
            .await
            .success(),
    );
    assert!(
        said.contains(
            "the cluster's freeze is kept in namespace shop, where the leading engine engine-1 has its Lease \
             shop/capdeck-engine; --lease-namespace ops counts only when no leader is found"
        ),
        "{said}"
    );
    assert_eq!(cluster.freeze("shop", "cluster").expect("shop/cluster")["spec"]["scope"], "Cluster");
    let lifted = stdout(&cluster.run(&["unfreeze", "-A", "--reason", "resolved"]).await.success());
    assert!(lifted.starts_with("lifted the freeze of the cluster (frozen by sandbox-admin"), "{lifted}");
    assert!(cluster.freeze("shop", "cluster").expect("kept")["spec"]["lifted"]["by"] == "sandbox-admin");
    cluster.served.stop().await;
}

/// One CAPApplication: frozen as `app-NAME` beside it; one that does not exist is refused with
/// where to look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_freeze_needs_the_application() {
    let cluster = cluster().await;
    let said = stdout(
        &cluster.run(&["freeze", "--app", "shop/bookshop", "--until", "30m", "--reason", "migration"]).await.success(),
    );
    assert!(said.contains("froze CAPApplication shop/bookshop as sandbox-admin until "), "{said}");
    let freeze = cluster.freeze("shop", "app-bookshop").expect("shop/app-bookshop");
    assert_eq!(freeze["spec"]["scope"], "Application");
    assert_eq!(freeze["spec"]["application"], "bookshop");
    let before = cluster.sandbox.revision();
    cluster.run(&["freeze", "--app", "shop/nope", "--until", "30m", "--reason", "x"]).await.code(1).stderr(
        predicate::str::contains(
            "error: cannot freeze CAPApplication shop/nope: CAPApplication shop/nope does not exist (kubectl get \
             capapplications -n shop lists the applications, capdeck freezes -n shop the freezes)",
        ),
    );
    assert_eq!(cluster.sandbox.revision(), before, "nothing written");
    cluster.run(&["unfreeze", "--app", "shop/nope", "--reason", "x"]).await.code(1).stderr(predicate::str::contains(
        "there is no freeze of CAPApplication shop/nope (capdeck freezes -n shop lists them)",
    ));
    cluster.served.stop().await;
}

/// A dry run says what it would write and writes nothing, for freeze and unfreeze.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_writes_nothing() {
    let cluster = cluster().await;
    let before = cluster.sandbox.revision();
    let said = stdout(
        &cluster
            .run(&["freeze", "-n", "shop", "--until", "4h", "--reason", "Black Friday", "--dry-run"])
            .await
            .success(),
    );
    assert!(
        said.starts_with("dry run, nothing written: it would freeze namespace shop as sandbox-admin until "),
        "{said}"
    );
    assert!(said.contains("batches of namespace shop would collect but not roll until then"), "{said}");
    assert!(
        said.contains("the Freeze it would create (shop/namespace):") && said.contains("by: sandbox-admin"),
        "{said}"
    );
    assert_eq!(cluster.sandbox.revision(), before, "a dry run wrote something");
    cluster
        .run(&["unfreeze", "-n", "shop", "--reason", "x", "--dry-run"])
        .await
        .code(1)
        .stderr(predicate::str::contains("there is no freeze of namespace shop"));
    cluster.run(&["freeze", "-n", "shop", "--until", "4h", "--reason", "Black Friday"]).await.success();
    let before = cluster.sandbox.revision();
    let said = stdout(&cluster.run(&["unfreeze", "-n", "shop", "--reason", "over", "--dry-run"]).await.success());
    assert!(said.starts_with("dry run, nothing written: it would lift the freeze of namespace shop"), "{said}");
    assert!(said.contains("batches of namespace shop would roll again"), "{said}");
    let said = stdout(
        &cluster.run(&["freeze", "-n", "shop", "--until", "8h", "--reason", "longer", "--dry-run"]).await.success(),
    );
    assert!(said.contains("it would replace the active freeze by sandbox-admin until "), "{said}");
    assert!(said.contains("the Freeze it would replace (shop/namespace):"), "{said}");
    assert_eq!(cluster.sandbox.revision(), before, "a dry run wrote something");
    cluster.served.stop().await;
}

/// Usage errors exit 2 and say which forms exist: no reason, no target, two targets, a time in
/// the past or a zero duration. Nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_say_what_is_missing() {
    let cluster = cluster().await;
    let before = cluster.sandbox.revision();
    for (args, says) in [
        (&["freeze", "-n", "shop", "--until", "4h"][..], "--reason"),
        (&["unfreeze", "-n", "shop"], "--reason"),
        (&["freeze", "-n", "shop", "--until", "4h", "--reason", "  "], "a reason must say why"),
        (
            &["freeze", "--until", "4h", "--reason", "x"],
            "say what to freeze: -n NAMESPACE (every application of a namespace), --app NAMESPACE/NAME (one \
             CAPApplication) or -A (every namespace the engine serves)",
        ),
        (&["unfreeze", "--reason", "x"], "say what to unfreeze: -n NAMESPACE"),
        (&["freeze", "-n", "shop", "--app", "shop/bookshop", "--until", "4h", "--reason", "x"], "give exactly one"),
        (&["freeze", "--app", "bookshop", "--until", "4h", "--reason", "x"], "is not NAMESPACE/NAME"),
        (&["freeze", "-n", "shop", "--until", "2020-01-01T00:00:00Z", "--reason", "x"], "is not in the future"),
        (&["freeze", "-n", "shop", "--until", "0s", "--reason", "x"], "would end the freeze as it starts"),
        (&["freeze", "-n", "shop", "--until", "2026-11-28 18:00", "--reason", "x"], "such as 2026-11-28T18:00:00Z"),
        (&["freeze", "-n", "shop", "--lease-namespace", "ops", "--until", "4h", "--reason", "x"], "is for -A"),
    ] {
        cluster.run(args).await.code(2).stderr(predicate::str::contains(says));
    }
    assert_eq!(cluster.sandbox.revision(), before, "a refused command wrote something");
    cluster.served.stop().await;
}

/// What the server refuses, said with the fix: a missing permission names the verb, the kind and
/// the namespace; a cluster without the Freeze CRD says how to install it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_and_a_missing_crd_are_explained() {
    let cluster = cluster().await;
    cluster.sandbox.deny("create:freezes".parse::<DenyRule>().expect("rule"));
    cluster.run(&["freeze", "-n", "shop", "--until", "4h", "--reason", "x"]).await.code(1).stderr(
        predicate::str::contains(
            "error: cannot freeze namespace shop: you may not create freezes.capdeck.dev in namespace shop",
        ),
    );
    assert!(cluster.freeze("shop", "namespace").is_none());
    cluster.served.stop().await;

    let bare = Sandbox::default();
    let (served, _dir, kubeconfig) = common::serve_with_kubeconfig(&bare, "sandbox-admin").await;
    for args in [
        &["freeze", "-n", "default", "--until", "4h", "--reason", "x"][..],
        &["unfreeze", "-n", "default", "--reason", "x"],
        &["freezes", "-A"],
    ] {
        let kubeconfig = kubeconfig.clone();
        tokio::task::spawn_blocking(move || capdeck(&kubeconfig).args(args).assert())
            .await
            .expect("join")
            .code(1)
            .stderr(predicate::str::contains("capdeck crds --only capdeck | kubectl apply --server-side -f -"));
    }
    served.stop().await;
}
