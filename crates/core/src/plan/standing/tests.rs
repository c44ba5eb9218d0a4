//! Every batch phase × whether it lists the Deployment × whether its Secret rotated since.

use serde_json::{Value, json};

use super::*;
use crate::api::rotation_batch::testing;
use crate::plan::PlanAction;
use crate::vcap::VcapPayload;

fn app() -> CAPApplication {
    serde_json::from_value(json!({
        "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
        "metadata": {"name": "app", "namespace": "ns"},
        "spec": {"btpAppName": "app", "providerSubaccountId": "p",
                 "btp": {"services": [{"name": "uaa", "class": "xsuaa", "secret": "app-uaa"},
                                      {"name": "db", "class": "hana", "secret": "app-db"}]}}
    }))
    .expect("app")
}

fn plan(services: &[&str]) -> DeploymentPlan {
    DeploymentPlan {
        namespace: "ns".into(),
        application: "app".into(),
        version: "v1".into(),
        workload: "srv".into(),
        deployment: "app-srv".into(),
        action: PlanAction::Restart,
        reason: "differs".into(),
        current_secret: Some("app-srv-old".into()),
        services: services.iter().map(|s| (*s).to_string()).collect(),
        payload: VcapPayload::assemble(Vec::new()),
    }
}

/// Batch `name` created at minute `minute`, rotating `app-uaa` to data `hash`, in `phase` (`None`:
/// no status), listing `app-srv` in `state` when given.
fn batch(
    name: &str,
    minute: u32,
    hash: &str,
    phase: Option<&str>,
    listed: Option<Value>,
    spec: Value,
) -> Arc<RotationBatch> {
    let mut object = json!({
        "metadata": {"name": name, "creationTimestamp": format!("2026-11-23T10:{minute:02}:00Z")},
        "spec": {"secrets": [{"name": "app-uaa", "service": "uaa", "rotatedAt": "2026-11-23T10:00:00Z", "dataHash": hash}]},
    });
    if let Some(phase) = phase {
        let mut status = json!({"phase": phase, "conditions": testing::ready("X")});
        if let Some(listed) = listed {
            status["deployments"] = json!([listed]);
        }
        object["status"] = status;
    }
    testing::merge(&mut object, json!({"spec": spec}));
    Arc::new(testing::batch(object))
}

fn listed(state: &str, sha: Option<String>) -> Option<Value> {
    let mut d = json!({"name": "app-srv", "version": "v1", "workload": "srv", "action": "Restart", "state": state});
    if let Some(sha) = sha {
        d["vcapSha256"] = json!(sha);
    }
    Some(d)
}

fn user() -> Value {
    json!({"by": "alice", "at": "2026-11-23T11:00:00Z", "reason": "fixed"})
}

#[derive(Debug, PartialEq)]
enum Said {
    Covered(String),
    LeftBy(String),
    Due,
    RollsForward(String),
}

fn said(batches: &[Arc<RotationBatch>], services: &[&str], rolled_by: Option<&str>, hash_now: &str) -> Said {
    let app = app();
    let current = |secret: &str| (secret == "app-uaa").then(|| hash_now.to_string());
    let name = |b: &RotationBatch| b.metadata.name.clone().unwrap_or_default();
    match standing(batches, &app, &plan(services), rolled_by, &current) {
        Standing::Covered(b) => Said::Covered(name(b)),
        Standing::LeftBy(b) => Said::LeftBy(name(b)),
        Standing::Due { rolls_forward: None } => Said::Due,
        Standing::Due { rolls_forward: Some(b) } => Said::RollsForward(name(b)),
    }
}

#[test]
fn an_ended_batch_a_person_or_a_failure_left_keeps_the_deployment_out_of_date_until_a_rotation() {
    let sha = || Some(VcapPayload::assemble(Vec::new()).sha256());
    let cases: Vec<(&str, Arc<RotationBatch>, &str, Said)> = vec![
        (
            "undone, nothing rotated since",
            batch("b1", 1, "h1", Some("Undone"), listed("Undone", sha()), json!({})),
            "h1",
            Said::LeftBy("b1".into()),
        ),
        (
            "undone, rotated again",
            batch("b1", 1, "h1", Some("Undone"), listed("Undone", sha()), json!({})),
            "h2",
            Said::Due,
        ),
        (
            "undone, rolled forward",
            batch("b1", 1, "h1", Some("Undone"), listed("Undone", sha()), json!({"retry": user()})),
            "h1",
            Said::RollsForward("b1".into()),
        ),
        (
            "cancelled before it was evaluated",
            batch("b1", 1, "h1", Some("Cancelled"), None, json!({"cancel": user()})),
            "h1",
            Said::LeftBy("b1".into()),
        ),
        (
            "cancelled, rolled forward",
            batch("b1", 1, "h1", Some("Cancelled"), listed("Queued", None), json!({"retry": user()})),
            "h1",
            Said::RollsForward("b1".into()),
        ),
        (
            "failed",
            batch("b1", 1, "h1", Some("Failed"), listed("Stalled", None), json!({})),
            "h1",
            Said::LeftBy("b1".into()),
        ),
        ("nothing to restart, not listed", batch("b1", 1, "h1", Some("NoChange"), None, json!({})), "h1", Said::Due),
        (
            "judged current with the same data",
            batch(
                "b1",
                1,
                "h1",
                Some("NoChange"),
                Some(json!({"name": "app-srv", "version": "v1", "workload": "srv", "action": "Unchanged"})),
                json!({}),
            ),
            "h1",
            Said::LeftBy("b1".into()),
        ),
        (
            "failed: it did not decode, fixed since",
            batch(
                "b1",
                1,
                "h1",
                Some("Failed"),
                Some(json!({"name": "app-srv", "version": "", "workload": "", "action": "Problem", "state": "Failed"})),
                json!({}),
            ),
            "h1",
            Said::Due,
        ),
        (
            "succeeded, yet out of date",
            batch("b1", 1, "h1", Some("Succeeded"), listed("Complete", sha()), json!({})),
            "h1",
            Said::Due,
        ),
        ("collecting", batch("b1", 1, "h1", None, None, json!({})), "h1", Said::Covered("b1".into())),
        (
            "cancelling: its queued ones never start",
            batch("b1", 1, "h1", Some("RollingOut"), listed("Queued", None), json!({"cancel": user()})),
            "h1",
            Said::LeftBy("b1".into()),
        ),
        (
            "being undone",
            batch("b1", 1, "h1", Some("Held"), listed("Failing", Some("other".into())), json!({"undo": user()})),
            "h1",
            Said::LeftBy("b1".into()),
        ),
        (
            "queued",
            batch("b1", 1, "h1", Some("RollingOut"), listed("Queued", None), json!({})),
            "h1",
            Said::Covered("b1".into()),
        ),
        (
            "held, pointed at this payload",
            batch("b1", 1, "h1", Some("Held"), listed("Failing", sha()), json!({})),
            "h1",
            Said::Covered("b1".into()),
        ),
        (
            "pointed at other data",
            batch("b1", 1, "h1", Some("RollingOut"), listed("Rolling", Some("other".into())), json!({})),
            "h1",
            Said::Due,
        ),
    ];
    for (what, b, hash_now, expected) in cases {
        assert_eq!(said(&[b], &["uaa"], None, hash_now), expected, "{what}");
    }
}

#[test]
fn the_newest_batch_about_the_deployment_speaks_for_it() {
    let undone = batch("b1", 1, "h1", Some("Undone"), listed("Undone", None), json!({}));
    let succeeded = batch("b2", 2, "h1", Some("Succeeded"), listed("Complete", None), json!({}));
    assert_eq!(said(&[succeeded.clone(), undone.clone()], &["uaa"], None, "h1"), Said::Due, "the newer one succeeded");
    let older = batch("b0", 0, "h1", Some("Succeeded"), listed("Complete", None), json!({}));
    assert_eq!(said(&[undone.clone(), older], &["uaa"], None, "h1"), Said::LeftBy("b1".into()));
    // A Deployment the batch did not list (a version that became Ready since) is due.
    let other = json!({"name": "app-other", "version": "v1", "workload": "w", "action": "Restart", "state": "Undone"});
    let about_another = batch("b1", 1, "h1", Some("Undone"), Some(other), json!({}));
    assert_eq!(said(&[about_another], &["uaa"], None, "h1"), Said::Due, "not listed: the upgrade's Deployment");
    // A batch about a Secret the Deployment does not consume says nothing of it.
    assert_eq!(said(&[batch("b1", 1, "h1", Some("Cancelled"), None, json!({}))], &["db"], None, "h1"), Said::Due);
    assert_eq!(said(&[], &["uaa"], None, "h1"), Said::Due, "no batch at all");
}

#[test]
fn a_queued_deployment_the_batch_already_pointed_is_not_covered() {
    let queued = batch("b1", 1, "h1", Some("RollingOut"), listed("Queued", None), json!({}));
    assert_eq!(said(std::slice::from_ref(&queued), &["uaa"], Some("b0"), "h1"), Said::Covered("b1".into()));
    assert_eq!(said(&[queued], &["uaa"], Some("b1"), "h1"), Said::Due, "the status lags: pointed already");
}

#[test]
fn a_missing_secret_is_no_rotation() {
    let failed = batch("b1", 1, "h1", Some("Failed"), listed("Queued", None), json!({}));
    let app = app();
    let missing = |_: &str| None;
    assert!(matches!(standing(&[failed], &app, &plan(&["uaa"]), None, &missing), Standing::LeftBy(_)));
}
