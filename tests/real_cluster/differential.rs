//! The sandbox against kube-apiserver 1.34: the same request sequences sent to both, each answer
//! reduced to an observation (status code and reason, a name pattern, a generation, the field
//! managers, ...) and compared. Every difference must be listed in `KNOWN` — the rows of the table
//! in docs/SANDBOX.md — and every listed difference must still be one, so the table stays true.

use std::collections::BTreeMap;

use http::{Method, Request};
use libtest_mimic::Failed;
use serde_json::{Value, json};

use crate::control_plane::Profile;
use crate::world::{Backend, World};

/// Differences we keep on purpose (docs/SANDBOX.md, "sandbox vs kube-apiserver 1.34").
const KNOWN: &[&str] = &[
    // The sandbox never removes a field a manager stopped applying (lists are atomic, fields stay).
    "apply.field_dropped_by_its_only_manager",
    // kube-apiserver answers a delete that completes at once with a `Status` (Success); the
    // sandbox with the deleted object. kube-rs (`Either`) and kubectl take both.
    "delete.answer",
];

struct Probe<'a> {
    client: &'a kube::Client,
    ns: &'a str,
}

impl Probe<'_> {
    async fn call(&self, method: Method, path: &str, body: Option<Value>, content_type: &str) -> (u16, Value) {
        let body = body.map(|b| serde_json::to_vec(&b).expect("json")).unwrap_or_default();
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .header("accept", "application/json")
            .body(body)
            .expect("request");
        match self.client.send(request.map(Into::into)).await {
            Ok(response) => {
                let code = response.status().as_u16();
                let bytes = http_body_util::BodyExt::collect(response.into_body())
                    .await
                    .map(|c| c.to_bytes().to_vec())
                    .unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes);
                // A watch answers a stream of JSON lines: keep the first.
                let first = text.lines().next().unwrap_or_default();
                (code, serde_json::from_str(first).unwrap_or(Value::Null))
            }
            Err(error) => (0, json!({"error": error.to_string()})),
        }
    }

    async fn json(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call(method, path, body, "application/json").await
    }

    fn cm(&self, name: &str) -> String {
        format!("/api/v1/namespaces/{}/configmaps/{name}", self.ns)
    }

    fn cms(&self) -> String {
        format!("/api/v1/namespaces/{}/configmaps", self.ns)
    }
}

fn code_reason((code, body): &(u16, Value)) -> String {
    format!("{code} {}", body.get("reason").and_then(Value::as_str).unwrap_or("-"))
}

fn managers(object: &Value) -> String {
    let mut list: Vec<String> = object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| format!("{}:{}", e["manager"].as_str().unwrap_or("?"), e["operation"].as_str().unwrap_or("?")))
                .collect()
        })
        .unwrap_or_default();
    list.sort();
    list.join(",")
}

/// Every observation of one backend.
async fn observe(world: &World) -> BTreeMap<String, String> {
    let p = Probe { client: &world.client, ns: &world.ns };
    let mut seen = BTreeMap::new();
    let mut note = |key: &str, value: String| {
        seen.insert(key.to_string(), value);
    };
    let cm = |name: &str, data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data});

    // Status codes and reasons.
    note("get.missing", code_reason(&p.json(Method::GET, &p.cm("nope"), None).await));
    let created = p.json(Method::POST, &p.cms(), Some(cm("a", json!({"k": "v"})))).await;
    note("create.new", code_reason(&created));
    note("create.existing", code_reason(&p.json(Method::POST, &p.cms(), Some(cm("a", json!({})))).await));
    note("create.invalid_name", code_reason(&p.json(Method::POST, &p.cms(), Some(cm("Bad_Name", json!({})))).await));
    let generated = p
        .json(
            Method::POST,
            &p.cms(),
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}})),
        )
        .await;
    let name = generated.1.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let suffix = name.strip_prefix("gen-").unwrap_or_default();
    note(
        "create.generate_name",
        format!(
            "{} suffix of {} [a-z0-9]: {}",
            generated.0,
            suffix.len(),
            suffix.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        ),
    );

    // resourceVersion: a no-op update keeps it, a change moves it; a stale one is a 409.
    let rv = created.1.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null);
    let same = p
        .json(
            Method::PUT,
            &p.cm("a"),
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "resourceVersion": rv}, "data": {"k": "v"}})),
        )
        .await;
    note(
        "update.noop_keeps_resource_version",
        format!("{} {}", same.0, same.1.pointer("/metadata/resourceVersion") == Some(&rv)),
    );
    let changed = p
        .json(
            Method::PUT,
            &p.cm("a"),
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "resourceVersion": rv}, "data": {"k": "w"}})),
        )
        .await;
    note(
        "update.change_moves_resource_version",
        format!("{} {}", changed.0, changed.1.pointer("/metadata/resourceVersion") != Some(&rv)),
    );
    let stale = p
        .json(
            Method::PUT,
            &p.cm("a"),
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "resourceVersion": rv}, "data": {"k": "x"}})),
        )
        .await;
    note("update.stale_resource_version", code_reason(&stale));
    let patched = p
        .call(
            Method::PATCH,
            &p.cm("a"),
            Some(json!({"metadata": {"resourceVersion": rv}, "data": {"k": "y"}})),
            "application/merge-patch+json",
        )
        .await;
    note("patch.stale_resource_version", code_reason(&patched));

    // Server-side apply: ownership, conflicts, force, and fields a manager stops applying.
    let apply = |manager: &str, force: bool| {
        format!("{}?fieldManager={manager}{}", p.cm("ssa"), if force { "&force=true" } else { "" })
    };
    let yaml = "application/apply-patch+yaml";
    let first =
        p.call(Method::PATCH, &apply("m1", false), Some(cm("ssa", json!({"owned": "1", "drop": "x"}))), yaml).await;
    note("apply.create", format!("{} managers={}", first.0, managers(&first.1)));
    let updated = p
        .call(
            Method::PATCH,
            &format!("{}?fieldManager=m2", p.cm("ssa")),
            Some(json!({"data": {"other": "2"}})),
            "application/merge-patch+json",
        )
        .await;
    note("apply.then_update_by_another", format!("{} managers={}", updated.0, managers(&updated.1)));
    let conflict = p.call(Method::PATCH, &apply("m3", false), Some(cm("ssa", json!({"owned": "3"}))), yaml).await;
    note("apply.conflict", code_reason(&conflict));
    let forced = p.call(Method::PATCH, &apply("m3", true), Some(cm("ssa", json!({"owned": "3"}))), yaml).await;
    note("apply.force", format!("{} managers={}", forced.0, managers(&forced.1)));
    let dropped = p.call(Method::PATCH, &apply("m1", false), Some(cm("ssa", json!({}))), yaml).await.1;
    note(
        "apply.field_dropped_by_its_only_manager",
        format!("drop present: {}", dropped.pointer("/data/drop").is_some()),
    );
    // The lease hand-over bug: a field the object no longer has is nobody's, so another apply
    // setting it is no conflict.
    let _ = p
        .call(
            Method::PATCH,
            &format!("{}?fieldManager=m4", p.cm("ssa")),
            Some(json!({"data": {"other": null}})),
            "application/merge-patch+json",
        )
        .await;
    let after_removal = p.call(Method::PATCH, &apply("m5", false), Some(cm("ssa", json!({"other": "5"}))), yaml).await;
    note("apply.field_removed_then_applied_by_another", code_reason(&after_removal));

    // Generation: spec changes move it, metadata and status do not (CRD with a status subresource).
    let apps = format!("/apis/sme.sap.com/v1alpha1/namespaces/{}/capapplications", p.ns);
    let app = json!({"apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication", "metadata": {"name": "g"},
                     "spec": {"btpAppName": "g", "providerSubaccountId": "p", "globalAccountId": "ga", "domainRefs": [], "provider": {"subDomain": "s", "tenantId": "t"}, "btp": {"services": []}}});
    let made = p.json(Method::POST, &apps, Some(app)).await;
    let generation = |v: &Value| v.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(-1);
    let label = p
        .call(
            Method::PATCH,
            &format!("{apps}/g"),
            Some(json!({"metadata": {"labels": {"x": "y"}}})),
            "application/merge-patch+json",
        )
        .await;
    let status = p
        .call(
            Method::PATCH,
            &format!("{apps}/g/status"),
            Some(json!({"status": {"state": "Consistent"}})),
            "application/merge-patch+json",
        )
        .await;
    let spec = p
        .call(
            Method::PATCH,
            &format!("{apps}/g"),
            Some(json!({"spec": {"btpAppName": "h"}})),
            "application/merge-patch+json",
        )
        .await;
    let status_via_main = p
        .call(
            Method::PATCH,
            &format!("{apps}/g"),
            Some(json!({"status": {"state": "Error"}})),
            "application/merge-patch+json",
        )
        .await;
    note(
        "generation.crd",
        format!(
            "create {} label {} status {} spec {}; status through the main resource kept: {}",
            generation(&made.1),
            generation(&label.1),
            generation(&status.1),
            generation(&spec.1),
            status_via_main.1.pointer("/status/state").and_then(Value::as_str).unwrap_or("-")
        ),
    );

    // Defaults capdeck reads from Deployments.
    let deployments = format!("/apis/apps/v1/namespaces/{}/deployments", p.ns);
    let deployment = p
        .json(Method::POST, &deployments, Some(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})))
        .await
        .1;
    note(
        "defaults.deployment_progress_deadline",
        format!("{}", deployment.pointer("/spec/progressDeadlineSeconds").unwrap_or(&Value::Null)),
    );
    note(
        "defaults.deployment_strategy",
        format!("{}", deployment.pointer("/spec/strategy/type").unwrap_or(&Value::Null)),
    );
    note("defaults.deployment_replicas", format!("{}", deployment.pointer("/spec/replicas").unwrap_or(&Value::Null)));
    note("defaults.deployment_generation", format!("{}", generation(&deployment)));

    // Secrets: stringData becomes data.
    let secret = p
        .json(
            Method::POST,
            &format!("/api/v1/namespaces/{}/secrets", p.ns),
            Some(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "stringData": {"k": "v"}})),
        )
        .await
        .1;
    note(
        "secret.string_data",
        format!(
            "data.k={} stringData kept: {}",
            secret.pointer("/data/k").unwrap_or(&Value::Null),
            secret.get("stringData").is_some()
        ),
    );

    // List paging.
    for n in 0..5 {
        let _ = p
            .json(
                Method::POST,
                &p.cms(),
                Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("page-{n}"), "labels": {"page": "yes"}}})),
            )
            .await;
    }
    let first_page = p.json(Method::GET, &format!("{}?labelSelector=page%3Dyes&limit=2", p.cms()), None).await.1;
    let token = first_page.pointer("/metadata/continue").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut total = first_page["items"].as_array().map_or(0, Vec::len);
    let mut pages = 1;
    let mut next = token;
    while !next.is_empty() && pages < 10 {
        let page =
            p.json(Method::GET, &format!("{}?labelSelector=page%3Dyes&limit=2&continue={next}", p.cms()), None).await.1;
        total += page["items"].as_array().map_or(0, Vec::len);
        next = page.pointer("/metadata/continue").and_then(Value::as_str).unwrap_or_default().to_string();
        pages += 1;
    }
    note("list.paging", format!("{total} items in {pages} pages"));

    // CRD schema validation (issue 32 §6): maxLength counts characters, pattern refuses a NUL.
    let batches = format!("/apis/capdeck.dev/v1alpha1/namespaces/{}/rotationbatches", world.ns);
    for (key, reason) in [
        ("crd.max_length", "x".repeat(1025)),
        ("crd.pattern", "a\u{0}b".to_string()),
        ("crd.at_limit", "é".repeat(1024)),
    ] {
        let batch = json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
            "metadata": {"name": key.replace(['.', '_'], "-")},
            "spec": {"application": "a", "windowEnd": "2026-01-01T00:00:00Z",
                     "hold": {"by": "alice", "at": "2026-01-01T00:00:00Z", "reason": reason}}});
        let answer = p.json(Method::POST, &batches, Some(batch)).await;
        let message = answer.1.get("message").and_then(Value::as_str).unwrap_or("-").to_string();
        note(key, format!("{} {message}", answer.0));
    }

    // Delete: the answer and a second delete.
    let deleted = p.json(Method::DELETE, &p.cm("page-0"), None).await;
    note(
        "delete.answer",
        format!("{} kind={}", deleted.0, deleted.1.get("kind").and_then(Value::as_str).unwrap_or("-")),
    );
    note("delete.again", code_reason(&p.json(Method::DELETE, &p.cm("page-0"), None).await));
    seen
}

/// A watch from a resourceVersion older than the compacted history.
async fn watch_after_compaction(world: &World) -> String {
    let p = Probe { client: &world.client, ns: &world.ns };
    let made = p
        .json(
            Method::POST,
            &p.cms(),
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old"}})),
        )
        .await
        .1;
    let rv = made.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("1").to_string();
    for n in 0..3 {
        let _ = p
            .json(
                Method::POST,
                &p.cms(),
                Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("new-{n}")}})),
            )
            .await;
    }
    match world.backend {
        Backend::KubeApiserver => {
            let plane = world.plane.clone().expect("plane");
            tokio::task::spawn_blocking(move || plane.compact_etcd()).await.expect("join").expect("compact");
        }
        Backend::Sandbox => world.sandbox().compact(),
    }
    let (code, event) =
        p.json(Method::GET, &format!("{}?watch=true&resourceVersion={rv}&timeoutSeconds=2", p.cms()), None).await;
    let (kind, reason, inner) = (
        event.get("type").and_then(Value::as_str).unwrap_or("-").to_string(),
        event
            .pointer("/object/reason")
            .or_else(|| event.get("reason"))
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_string(),
        event.pointer("/object/code").or_else(|| event.get("code")).and_then(Value::as_i64).unwrap_or(0),
    );
    format!("{code} {kind} {inner} {reason}")
}

pub async fn the_sandbox_answers_as_kube_apiserver_does() -> Result<(), Failed> {
    let sandbox = World::new(Backend::Sandbox, "differential").await;
    let real = World::dedicated(Backend::KubeApiserver, "differential", Profile::NoWatchCache).await;
    let mut on_sandbox = observe(&sandbox).await;
    let mut on_real = observe(&real).await;
    on_sandbox.insert("watch.after_compaction".into(), watch_after_compaction(&sandbox).await);
    on_real.insert("watch.after_compaction".into(), watch_after_compaction(&real).await);

    let mut report = String::from("| observation | sandbox | kube-apiserver 1.34 |\n|---|---|---|\n");
    let mut unexpected = Vec::new();
    let mut stale = Vec::new();
    for (key, real_value) in &on_real {
        let sandbox_value = on_sandbox.get(key).cloned().unwrap_or_else(|| "(not observed)".into());
        let differs = &sandbox_value != real_value;
        if differs {
            report.push_str(&format!("| {key} | {sandbox_value} | {real_value} |\n"));
        }
        match (differs, KNOWN.contains(&key.as_str())) {
            (true, false) => unexpected.push(key.clone()),
            (false, true) => stale.push(key.clone()),
            _ => {}
        }
    }
    eprintln!("sandbox vs kube-apiserver, {} observations:\n{report}", on_real.len());
    let all: Vec<String> = on_real.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    eprintln!("kube-apiserver observations:\n{}", all.join("\n"));
    if unexpected.is_empty() && stale.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "new differences (fix the sandbox or list them in KNOWN and docs/SANDBOX.md): {unexpected:?}; \
             listed differences that are gone (remove them): {stale:?}\n{report}"
        )
        .into())
    }
}
