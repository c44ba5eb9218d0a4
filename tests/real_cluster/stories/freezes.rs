//! Who froze is who froze (issue 34 §3): the ValidatingAdmissionPolicy of `capdeck manifests`
//! refuses a Freeze written, moved or lifted in someone else's name, and `capdeck freeze` and
//! `capdeck unfreeze` as real users (token-file users with a Role) record those users.

use std::time::Duration;

use capdeck::api::Freeze;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use serde_json::{Value, json};

use crate::control_plane::Profile;
use crate::setup::{capdeck, text};
use crate::world::{Backend, World, eventually};

const LONG: Duration = Duration::from_secs(60);

/// `kubectl ARGS` as `kubeconfig`'s user, with `stdin`; `Err`: what kubectl printed.
fn kubectl(world: &World, kubeconfig: &std::path::Path, args: &[&str], stdin: Option<&Value>) -> Result<(), String> {
    use std::io::Write as _;
    let mut child = world
        .plane()
        .kubectl()
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(object) = stdin {
        input.write_all(object.to_string().as_bytes()).expect("kubectl's stdin");
    }
    drop(input);
    let output = child.wait_with_output().expect("kubectl ends");
    let (stdout, stderr) = text(&output);
    if output.status.success() { Ok(()) } else { Err(format!("{stdout}{stderr}")) }
}

fn in_hours(hours: i64) -> String {
    Timestamp::from_second(Timestamp::now().as_second() + hours * 3600).expect("time").to_string()
}

async fn namespace_freeze(world: &World) -> Freeze {
    let api: Api<Freeze> = Api::namespaced(world.client.clone(), &world.ns);
    api.get("namespace").await.expect("the Freeze of the namespace")
}

/// The admission policy of `capdeck manifests`, installed as shipped on a control plane of its own
/// (it binds cluster-wide), on kube-apiserver: mallory, who may create and update freezes, cannot
/// create one in someone else's name with kubectl, nor move or lift alice's; `capdeck freeze` as
/// alice records alice, and `capdeck unfreeze` as mallory records mallory beside her.
pub async fn the_admission_policy_refuses_a_freeze_in_another_name(backend: Backend) {
    let world = World::dedicated(backend, "freeze-policy", Profile::Standard).await;
    let system = format!("{}-system", world.ns);
    let output = capdeck(&world.admin_kubeconfig, &["manifests", "-n", &system]);
    let (manifests, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    world.plane().kubectl_apply(&manifests).expect("kubectl apply of capdeck manifests");
    // What docs/WINDOWS.md's example Role grants (capdeck needs no more), and `patch` for kubectl.
    for user in ["alice", "mallory"] {
        world
            .grant(user, "capdeck.dev", &["freezes"], &["get", "list", "watch", "create", "update", "patch"], &[])
            .await;
    }
    let (alice, mallory) = (world.kubeconfig_for("alice"), world.kubeconfig_for("mallory"));
    let ns = world.ns.clone();

    // A freeze created in the CEO's name: refused, once kube-apiserver's policy informer has it.
    let forged = json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
        "metadata": {"name": "namespace", "namespace": ns},
        "spec": {"scope": "Namespace", "until": in_hours(4),
                 "frozen": {"by": "ceo@example.com", "at": in_hours(0), "reason": "forged"}}});
    let refused = std::sync::Mutex::new(String::new());
    let api: Api<Freeze> = Api::namespaced(world.client.clone(), &ns);
    eventually("mallory's forged freeze refused", LONG, || async {
        match kubectl(&world, &mallory, &["create", "-f", "-"], Some(&forged)) {
            Err(error) => {
                *refused.lock().expect("lock") = error;
                Ok(())
            }
            // Accepted before the policy was in force: removed, so the next try is a create again.
            Ok(()) => {
                let _ = api.delete("namespace", &Default::default()).await;
                eventually("the early freeze gone", LONG, || async {
                    api.get_opt("namespace").await.is_ok_and(|found| found.is_none())
                })
                .await;
                Err("accepted".to_string())
            }
        }
    })
    .await;
    let refused = refused.into_inner().expect("lock");
    eprintln!("kubectl create as mallory: {refused}");
    assert!(
        refused.contains(
            "spec.frozen.by must be the user making the request (mallory), not ceo@example.com; use capdeck freeze"
        ),
        "{refused}"
    );
    assert!(refused.contains("ValidatingAdmissionPolicy 'capdeck-freeze-attribution'"), "{refused}");
    assert!(api.get_opt("namespace").await.expect("get").is_none(), "nothing was stored");

    // alice freezes with capdeck: the record names her, written by capdeck's field manager.
    let output = capdeck(&alice, &["freeze", "-n", &ns, "--until", "4h", "--reason", "CHG-9"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.starts_with(&format!("froze namespace {ns} as alice until ")), "{stdout}");
    let frozen = namespace_freeze(&world).await;
    assert_eq!(frozen.spec.frozen.by, "alice");
    let managers: Vec<String> =
        frozen.metadata.managed_fields.iter().flatten().filter_map(|field| field.manager.clone()).collect();
    assert_eq!(managers, ["capdeck-console"]);

    // mallory moves alice's freeze (her name kept, the end changed), or lifts it in alice's name:
    // both refused.
    let moved = json!({"spec": {"until": in_hours(48)}});
    let refused = kubectl(
        &world,
        &mallory,
        &["patch", "freeze", "namespace", "-n", &ns, "--type", "merge", "-p", &moved.to_string()],
        None,
    )
    .expect_err("moving alice's freeze");
    assert!(
        refused.contains("spec.frozen.by must be the user making the request (mallory), not alice; use capdeck freeze"),
        "{refused}"
    );
    let lifted = json!({"spec": {"lifted": {"by": "alice", "at": in_hours(0), "reason": "forged"}}});
    let refused = kubectl(
        &world,
        &mallory,
        &["patch", "freeze", "namespace", "-n", &ns, "--type", "merge", "-p", &lifted.to_string()],
        None,
    )
    .expect_err("lifting in alice's name");
    assert!(
        refused
            .contains("spec.lifted.by must be the user making the request (mallory), not alice; use capdeck unfreeze"),
        "{refused}"
    );
    assert_eq!(namespace_freeze(&world).await.spec, frozen.spec, "untouched");
    // A label leaves both records as they were: it passes.
    kubectl(&world, &mallory, &["label", "freeze", "namespace", "-n", &ns, "ticket=CHG-9"], None)
        .expect("a label changes no attribution");

    // mallory lifts it as herself, with capdeck: both names on the record.
    let output = capdeck(&mallory, &["unfreeze", "-n", &ns, "--reason", "sale moved"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    let record = namespace_freeze(&world).await;
    assert_eq!(record.spec.frozen.by, "alice");
    assert_eq!(record.spec.lifted.as_ref().map(|lifted| lifted.by.as_str()), Some("mallory"));
    assert_eq!(record.spec.lifted.clone().and_then(|lifted| lifted.reason).as_deref(), Some("sale moved"));
    // A lifted freeze stays lifted: alice removing mallory's record with kubectl (which would
    // bring her freeze back, still reading "frozen by alice") is refused.
    let remove = r#"[{"op": "remove", "path": "/spec/lifted"}]"#;
    let refused =
        kubectl(&world, &alice, &["patch", "freeze", "namespace", "-n", &ns, "--type", "json", "-p", remove], None)
            .expect_err("re-activating a lifted freeze");
    assert!(
        refused.contains("spec.lifted of mallory may only be dropped by a new freeze of alice; use capdeck freeze"),
        "{refused}"
    );
    assert_eq!(namespace_freeze(&world).await.spec.lifted, record.spec.lifted, "still lifted");
    // And freezes again as herself: the record is hers now.
    let output = capdeck(&mallory, &["freeze", "-n", &ns, "--until", "1h", "--reason", "again"]);
    assert!(output.status.success(), "{:?}", text(&output));
    let again = namespace_freeze(&world).await;
    assert_eq!((again.spec.frozen.by.as_str(), again.spec.lifted.is_none()), ("mallory", true));

    // Without `create` in another namespace, capdeck says which permission is missing.
    let output = capdeck(&alice, &["freeze", "-n", &system, "--until", "1h", "--reason", "x"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains(&format!("you may not get freezes.capdeck.dev in namespace {system}")), "{stderr}");
}
