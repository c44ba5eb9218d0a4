//! The sandbox API server driven by a real `kube::Client`, in-process and over HTTP.

use crate::common;
use std::time::Duration;

use crate::common::{Cluster, eventually};
use capdeck::api::{CAPApplication, RotationBatch};
use capdeck::sandbox::RequestMatcher;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

fn api_error(result: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn secret(name: &str) -> Secret {
    serde_json::from_value(json!({"metadata": {"name": name}, "stringData": {"password": "hunter2"}})).expect("secret")
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "main", "image": "x"}]}}}
    }))
    .expect("deployment")
}

both_transports!(create_get_and_generate_name, |cluster: Cluster| async move {
    let secrets: Api<Secret> = Api::default_namespaced(cluster.client.clone());
    let created = secrets.create(&PostParams::default(), &secret("plain")).await.expect("create");
    assert_eq!(created.metadata.uid.as_ref().map(String::len), Some(36));
    assert!(created.metadata.creation_timestamp.is_some());
    // stringData became base64 data, type defaulted.
    assert_eq!(created.data.as_ref().and_then(|d| d.get("password")).map(|b| b.0.clone()), Some(b"hunter2".to_vec()));
    assert!(created.string_data.is_none());
    assert_eq!(created.type_.as_deref(), Some("Opaque"));

    let mut generated = secret("");
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("vcap-".into());
    let a = secrets.create(&PostParams::default(), &generated).await.expect("generateName");
    let b = secrets.create(&PostParams::default(), &generated).await.expect("generateName again");
    let (a, b) = (a.metadata.name.expect("name"), b.metadata.name.expect("name"));
    assert!(a.starts_with("vcap-") && a.len() == 10 && a != b, "{a} {b}");

    assert_eq!(
        api_error(secrets.create(&PostParams::default(), &secret("plain")).await),
        (409, "AlreadyExists".into())
    );
    assert_eq!(api_error(secrets.get("missing").await), (404, "NotFound".into()));
    let mut nameless = secret("");
    nameless.metadata.name = None;
    assert_eq!(api_error(secrets.create(&PostParams::default(), &nameless).await), (422, "Invalid".into()));
    let elsewhere: Api<Secret> = Api::namespaced(cluster.client.clone(), "no-such-namespace");
    assert_eq!(api_error(elsewhere.create(&PostParams::default(), &secret("x")).await), (404, "NotFound".into()));
});

both_transports!(optimistic_concurrency_and_generation, |cluster: Cluster| async move {
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client.clone());
    let created = deployments.create(&PostParams::default(), &deployment("web", 2)).await.expect("create");
    assert_eq!(created.metadata.generation, Some(1));

    let mut stale = created.clone();
    let mut fresh = created.clone();
    fresh.metadata.labels = Some([("touched".to_string(), "yes".to_string())].into());
    let relabelled = deployments.replace("web", &PostParams::default(), &fresh).await.expect("replace");
    assert_eq!(relabelled.metadata.generation, Some(1), "metadata-only changes keep the generation");
    assert_ne!(relabelled.metadata.resource_version, created.metadata.resource_version);

    stale.spec.as_mut().expect("spec").replicas = Some(5);
    assert_eq!(api_error(deployments.replace("web", &PostParams::default(), &stale).await), (409, "Conflict".into()));

    let mut current = relabelled.clone();
    current.spec.as_mut().expect("spec").replicas = Some(5);
    let scaled = deployments.replace("web", &PostParams::default(), &current).await.expect("replace");
    assert_eq!(scaled.metadata.generation, Some(2), "spec changes bump the generation");

    // A write that changes nothing is no new revision.
    let again = deployments.replace("web", &PostParams::default(), &scaled).await.expect("no-op");
    assert_eq!(again.metadata.resource_version, scaled.metadata.resource_version);
});

both_transports!(status_subresource_is_separate, |cluster: Cluster| async move {
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client.clone());
    let mut with_status = deployment("split", 1);
    with_status.status = Some(serde_json::from_value(json!({"replicas": 9})).expect("status"));
    let created = deployments.create(&PostParams::default(), &with_status).await.expect("create");
    assert!(created.status.is_none(), "status is not written through the main resource");

    let patched = deployments
        .patch_status("split", &PatchParams::default(), &Patch::Merge(json!({"status": {"readyReplicas": 1}})))
        .await
        .expect("status patch");
    assert_eq!(patched.status.as_ref().and_then(|s| s.ready_replicas), Some(1));
    assert_eq!(patched.metadata.generation, Some(1), "status writes keep the generation");

    let ignored = deployments
        .patch(
            "split",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 7}, "metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .expect("main patch");
    assert_eq!(ignored.status.as_ref().and_then(|s| s.ready_replicas), Some(1), "main resource ignores status");
    let status = deployments.get_status("split").await.expect("get status");
    assert_eq!(status.status.and_then(|s| s.ready_replicas), Some(1));
});

both_transports!(every_patch_type, |cluster: Cluster| async move {
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client.clone());
    let mut original = deployment("patched", 1);
    original
        .spec
        .as_mut()
        .expect("spec")
        .template
        .spec
        .as_mut()
        .expect("pod")
        .containers
        .push(serde_json::from_value(json!({"name": "sidecar", "image": "s"})).expect("container"));
    deployments.create(&PostParams::default(), &original).await.expect("create");

    let merged = deployments
        .patch("patched", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"m": "1"}}})))
        .await
        .expect("merge");
    assert_eq!(merged.metadata.labels.as_ref().and_then(|l| l.get("m")).map(String::as_str), Some("1"));

    let operations: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/labels/m", "value": "1"},
        {"op": "add", "path": "/metadata/labels/j", "value": "2"}
    ]))
    .expect("ops");
    let jsoned =
        deployments.patch("patched", &PatchParams::default(), &Patch::<()>::Json(operations)).await.expect("json");
    assert_eq!(jsoned.metadata.labels.as_ref().map(|l| l.len()), Some(2));
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/metadata/labels/m", "value": "other"}])).expect("ops");
    assert_eq!(
        api_error(deployments.patch("patched", &PatchParams::default(), &Patch::<()>::Json(failing)).await).0,
        422
    );

    // Strategic merge: containers merge by name, so the sidecar survives and main gets envFrom.
    let strategic = deployments
        .patch(
            "patched",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "main", "envFrom": [{"secretRef": {"name": "vcap-1", "optional": true}}]}
            ]}}}})),
        )
        .await
        .expect("strategic");
    let containers = &strategic.spec.as_ref().expect("spec").template.spec.as_ref().expect("pod").containers;
    assert_eq!(containers.len(), 2);
    assert_eq!(containers[0].env_from.as_ref().map(Vec::len), Some(1));
    assert_eq!(strategic.metadata.generation, Some(2));

    // Server-side apply: creates when absent, merges when present.
    let applied = deployments
        .patch("applied", &PatchParams::apply("capdeck-test").force(), &Patch::Apply(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "applied"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        })))
        .await
        .expect("apply create");
    assert_eq!(applied.metadata.name.as_deref(), Some("applied"));
    let managers: Vec<String> =
        applied.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(managers.contains(&"capdeck-test".to_string()), "{managers:?}");

    // A patch carrying a stale resourceVersion is a conflict.
    let conflict = deployments
        .patch(
            "patched",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}})),
        )
        .await;
    assert_eq!(api_error(conflict), (409, "Conflict".into()));

    // Strategic merge is not for custom resources.
    cluster.sandbox.install_crds();
    let batches: Api<RotationBatch> = Api::default_namespaced(cluster.client.clone());
    let result = batches.patch("x", &PatchParams::default(), &Patch::Strategic(json!({}))).await;
    assert!(matches!(result, Err(kube::Error::Api(_))));
});

both_transports!(server_side_apply_field_ownership, |cluster: Cluster| async move {
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    let body = |value: &str| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned"}, "data": {"a": value}}),
        )
    };
    maps.patch("owned", &PatchParams::apply("first"), &body("1")).await.expect("first apply");
    // Same value: shared ownership, no conflict.
    maps.patch("owned", &PatchParams::apply("second"), &body("1")).await.expect("same value");
    // Another value without force: 409, as kube-lease-manager relies on.
    let (code, reason) = api_error(maps.patch("owned", &PatchParams::apply("third"), &body("3")).await);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert_eq!(maps.get("owned").await.expect("get").data.and_then(|d| d.get("a").cloned()).as_deref(), Some("1"));
    // With force it takes the field.
    maps.patch("owned", &PatchParams::apply("third").force(), &body("3")).await.expect("forced");
    // An update (merge patch) takes ownership too; the apply manager then conflicts.
    maps.patch(
        "owned",
        &PatchParams { field_manager: Some("editor".into()), ..Default::default() },
        &Patch::Merge(json!({"data": {"a": "4"}})),
    )
    .await
    .expect("merge");
    assert_eq!(api_error(maps.patch("owned", &PatchParams::apply("third"), &body("5")).await).0, 409);
    let managers: Vec<String> = maps
        .get("owned")
        .await
        .expect("get")
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(managers.contains(&"editor".to_string()), "{managers:?}");
});

both_transports!(secret_string_data_on_update_and_patch, |cluster: Cluster| async move {
    let secrets: Api<Secret> = Api::default_namespaced(cluster.client.clone());
    let mut created = secrets.create(&PostParams::default(), &secret("sd")).await.expect("create");
    created.string_data = Some([("extra".to_string(), "e".to_string())].into());
    let replaced = secrets.replace("sd", &PostParams::default(), &created).await.expect("replace");
    let data = replaced.data.expect("data");
    assert_eq!(data.get("extra").map(|b| b.0.clone()), Some(b"e".to_vec()));
    assert_eq!(data.get("password").map(|b| b.0.clone()), Some(b"hunter2".to_vec()));
    let patched = secrets
        .patch("sd", &PatchParams::default(), &Patch::Merge(json!({"stringData": {"password": "new"}})))
        .await
        .expect("patch");
    assert_eq!(patched.data.expect("data").get("password").map(|b| b.0.clone()), Some(b"new".to_vec()));
    let broken = secrets
        .patch("sd", &PatchParams::default(), &Patch::Merge(json!({"data": {"password": "!!!not base64"}})))
        .await;
    assert_eq!(api_error(broken).0, 400);
});

both_transports!(finalizers_hold_deletion, |cluster: Cluster| async move {
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    let map: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "held", "finalizers": ["capdeck.dev/test"]}})).expect("cm");
    maps.create(&PostParams::default(), &map).await.expect("create");
    let deleted = maps.delete("held", &DeleteParams::default()).await.expect("delete");
    let pending = deleted.left().expect("object returned while finalizers pend");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert!(maps.get("held").await.expect("still there").metadata.deletion_timestamp.is_some());
    maps.patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .expect("unfinalize");
    assert_eq!(api_error(maps.get("held").await).0, 404);
});

both_transports!(owner_references_are_garbage_collected, |cluster: Cluster| async move {
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    let secrets: Api<Secret> = Api::default_namespaced(cluster.client.clone());
    let owner = maps
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("cm"))
        .await
        .expect("owner");
    let other = maps
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "other"}})).expect("cm"))
        .await
        .expect("other");
    let reference = |object: &ConfigMap| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": object.metadata.name, "uid": object.metadata.uid, "controller": true});
    for (name, refs) in
        [("only-owner", vec![reference(&owner)]), ("two-owners", vec![reference(&owner), reference(&other)])]
    {
        let dependent: Secret =
            serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": refs}})).expect("secret");
        secrets.create(&PostParams::default(), &dependent).await.expect("dependent");
    }
    maps.delete("owner", &DeleteParams::background()).await.expect("delete owner");
    eventually("garbage collection", Duration::from_secs(5), || async { secrets.get("only-owner").await.is_err() })
        .await;
    let survivor = secrets.get("two-owners").await.expect("still owned by another");
    assert_eq!(survivor.metadata.owner_references.map(|r| r.len()), Some(1));

    let orphaned: Secret =
        serde_json::from_value(json!({"metadata": {"name": "orphan", "ownerReferences": [reference(&other)]}}))
            .expect("secret");
    secrets.create(&PostParams::default(), &orphaned).await.expect("create");
    maps.delete("other", &DeleteParams::orphan()).await.expect("orphan delete");
    let kept = secrets.get("orphan").await.expect("orphans stay");
    assert!(kept.metadata.owner_references.is_none_or(|r| r.is_empty()));
});

both_transports!(lists_page_and_select, |cluster: Cluster| async move {
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    for index in 0..7 {
        let tier = if index % 2 == 0 { "web" } else { "db" };
        let map: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("m{index}"), "labels": {"tier": tier, "app": "cap"}}, "data": {"i": index.to_string()}})).expect("cm");
        maps.create(&PostParams::default(), &map).await.expect("create");
    }
    let mut names = Vec::new();
    let mut params = ListParams::default().limit(3);
    let mut pages = 0;
    let mut first_rv = None;
    loop {
        let page = maps.list(&params).await.expect("page");
        pages += 1;
        first_rv.get_or_insert(page.metadata.resource_version.clone());
        assert_eq!(Some(page.metadata.resource_version.clone()), first_rv, "pages share the list's resourceVersion");
        names.extend(page.items.into_iter().filter_map(|m| m.metadata.name));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names, (0..7).map(|i| format!("m{i}")).collect::<Vec<_>>());

    let web = maps.list(&ListParams::default().labels("tier=web,app in (cap)")).await.expect("labels");
    assert_eq!(web.items.len(), 4);
    let not_db = maps.list(&ListParams::default().labels("tier!=db")).await.expect("labels");
    assert_eq!(not_db.items.len(), 4);
    let one = maps.list(&ListParams::default().fields("metadata.name=m3")).await.expect("fields");
    assert_eq!(one.items.len(), 1);
    let all: Api<ConfigMap> = Api::all(cluster.client.clone());
    assert_eq!(
        all.list(&ListParams::default().fields("metadata.namespace=default")).await.expect("all").items.len(),
        7
    );

    let first = maps.list(&ListParams::default().limit(2)).await.expect("page");
    let token = first.metadata.continue_.expect("token");
    // History compacted past the list's revision: its continue token is too old.
    maps.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "newer"}})).expect("cm"))
        .await
        .expect("create");
    cluster.sandbox.compact();
    assert_eq!(
        api_error(maps.list(&ListParams::default().limit(2).continue_token(&token)).await),
        (410, "Expired".into())
    );

    maps.delete_collection(&DeleteParams::default(), &ListParams::default().labels("tier=db"))
        .await
        .expect("deletecollection");
    assert_eq!(maps.list(&ListParams::default()).await.expect("list").items.len(), 5);
});

both_transports!(raw_watch_bookmarks_timeouts_and_gone, |cluster: Cluster| async move {
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    let list = maps.list(&ListParams::default()).await.expect("list");
    let rv = list.metadata.resource_version.clone().expect("rv");
    maps.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "w1"}})).expect("cm"))
        .await
        .expect("create");

    // Resuming from the list's resourceVersion replays what happened since, then times out.
    let params = WatchParams::default().timeout(1);
    let events: Vec<WatchEvent<ConfigMap>> =
        maps.watch(&params, &rv).await.expect("watch").try_collect().await.expect("events");
    assert!(
        matches!(events.first(), Some(WatchEvent::Added(map)) if map.metadata.name.as_deref() == Some("w1")),
        "{events:?}"
    );

    // Bookmarks arrive while nothing happens (interval in this sandbox: 15 s; timeout 40 s).
    let mut params = WatchParams::default().timeout(40);
    params.bookmarks = true;
    let mut stream = maps.watch(&params, "0").await.expect("watch").boxed();
    let mut saw_bookmark = false;
    while let Ok(Ok(Some(event))) = tokio::time::timeout(Duration::from_secs(20), stream.try_next()).await {
        if let WatchEvent::Bookmark(bookmark) = event {
            assert!(!bookmark.metadata.resource_version.is_empty());
            saw_bookmark = true;
            break;
        }
    }
    assert!(saw_bookmark, "no bookmark");

    // A resourceVersion older than the history is an in-stream 410, as kube's watcher expects.
    cluster.sandbox.compact();
    let params = WatchParams::default().timeout(1);
    let mut stream = maps.watch(&params, &rv).await.expect("watch starts with 200").boxed();
    match stream.try_next().await.expect("event") {
        Some(WatchEvent::Error(status)) => assert_eq!(status.code, 410),
        other => panic!("expected 410 in the stream, got {other:?}"),
    }
});

both_transports!(reflector_survives_dropped_watches_and_compaction, |cluster: Cluster| async move {
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    maps.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "before"}})).expect("cm"))
        .await
        .expect("create");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream =
        reflector(writer, watcher(maps.clone(), watcher::Config::default())).default_backoff().touched_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.expect("ready");
    assert_eq!(reader.state().len(), 1);

    maps.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "live"}})).expect("cm"))
        .await
        .expect("create");
    eventually("live event", Duration::from_secs(10), || async { reader.state().len() == 2 }).await;

    // Dropped watches reconnect from the last resourceVersion.
    cluster.sandbox.drop_watches();
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "after-drop"}})).expect("cm"),
    )
    .await
    .expect("create");
    eventually("event after reconnect", Duration::from_secs(10), || async { reader.state().len() == 3 }).await;

    // A watcher that was away while history got compacted gets a 410 and re-lists; the store
    // catches up, deletions included. Its reconnects fail for a while so it is surely behind.
    let lists_before =
        cluster.sandbox.requests().iter().filter(|r| r.info.verb == "list" && r.info.resource == "configmaps").count();
    cluster.sandbox.fail_next(2, RequestMatcher::on("watch", "configmaps"), 500);
    cluster.sandbox.drop_watches();
    maps.delete("before", &DeleteParams::default()).await.expect("delete");
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "after-compaction"}})).expect("cm"),
    )
    .await
    .expect("create");
    cluster.sandbox.compact();
    eventually("re-list after 410", Duration::from_secs(30), || async {
        let mut names: Vec<String> = reader.state().iter().filter_map(|m| m.metadata.name.clone()).collect();
        names.sort();
        names == ["after-compaction", "after-drop", "live"]
    })
    .await;
    let lists_after =
        cluster.sandbox.requests().iter().filter(|r| r.info.verb == "list" && r.info.resource == "configmaps").count();
    assert!(lists_after > lists_before, "the watcher re-listed");
    task.abort();
});

both_transports!(streaming_list_initial_events, |cluster: Cluster| async move {
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    maps.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "s1"}})).expect("cm"))
        .await
        .expect("create");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let config = watcher::Config::default().streaming_lists();
    let task = tokio::spawn(reflector(writer, watcher(maps.clone(), config)).default_backoff().for_each(|_| async {}));
    tokio::time::timeout(Duration::from_secs(10), reader.wait_until_ready())
        .await
        .expect("initial-events-end bookmark")
        .expect("ready");
    assert_eq!(reader.state().len(), 1);
    task.abort();
});

both_transports!(custom_resources_after_crd_registration, |cluster: Cluster| async move {
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(cluster.client.clone());
    for crd in capdeck::api::crds::all() {
        crds.create(&PostParams::default(), &crd).await.expect("register CRD");
    }
    let discovery = kube::Discovery::new(cluster.client.clone()).run().await.expect("discovery");
    let (resource, capabilities) = discovery
        .groups()
        .flat_map(|group| group.recommended_resources())
        .find(|(resource, _)| resource.kind == "CAPApplication")
        .expect("CAPApplication discovered");
    assert_eq!(resource.plural, "capapplications");
    assert!(
        capabilities
            .subresources
            .iter()
            .any(|(sub, _)| sub.plural == "capapplications/status" || sub.plural == "status")
    );

    let apps: Api<CAPApplication> = Api::default_namespaced(cluster.client.clone());
    let app: CAPApplication = serde_json::from_value(json!({
        "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication", "metadata": {"name": "app"},
        "spec": {"btpAppName": "app", "providerSubaccountId": "p", "btp": {"services": []}}
    }))
    .expect("app");
    apps.create(&PostParams::default(), &app).await.expect("create");
    let patched = apps
        .patch_status("app", &PatchParams::default(), &Patch::Merge(json!({"status": {"state": "Consistent"}})))
        .await
        .expect("status");
    assert_eq!(patched.status.map(|s| s.state.to_string()), Some("Consistent".into()));

    crds.delete("capapplications.sme.sap.com", &DeleteParams::default()).await.expect("unregister");
    assert!(apps.list(&ListParams::default()).await.is_err(), "kind is gone with its CRD");
});

both_transports!(errors_faults_latency_and_the_request_log, |cluster: Cluster| async move {
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    cluster.sandbox.fail_next(2, RequestMatcher::verb("create"), 500);
    for _ in 0..2 {
        assert_eq!(
            api_error(
                maps.create(
                    &PostParams::default(),
                    &serde_json::from_value(json!({"metadata": {"name": "f"}})).expect("cm")
                )
                .await
            ),
            (500, "InternalError".into())
        );
    }
    maps.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "f"}})).expect("cm"))
        .await
        .expect("third try works");
    cluster.sandbox.fail_next(1, RequestMatcher::on("patch", "configmaps").named("f"), 409);
    assert_eq!(api_error(maps.patch("f", &PatchParams::default(), &Patch::Merge(json!({}))).await).0, 409);

    cluster.sandbox.set_latency(Duration::from_millis(150));
    let started = tokio::time::Instant::now();
    maps.get("f").await.expect("get");
    assert!(started.elapsed() >= Duration::from_millis(150));
    cluster.sandbox.set_latency(Duration::ZERO);

    let log = cluster.sandbox.requests();
    let creates: Vec<u16> =
        log.iter().filter(|r| r.info.verb == "create" && r.info.resource == "configmaps").map(|r| r.status).collect();
    assert_eq!(creates, vec![500, 500, 201]);
    assert!(log.iter().any(|r| r.info.verb == "get"
        && r.info.name.as_deref() == Some("f")
        && r.path == "/api/v1/namespaces/default/configmaps/f"));
    assert_eq!(cluster.sandbox.writes().iter().filter(|w| w.info.resource == "configmaps").count(), 1);
});

both_transports!(identity_and_access_reviews, |cluster: Cluster| async move {
    cluster.sandbox.set_user("alice@example.com");
    cluster.sandbox.deny("patch:rotationbatches".parse().expect("rule"));
    let reviews: Api<k8s_openapi::api::authentication::v1::SelfSubjectReview> = Api::all(cluster.client.clone());
    let me = reviews.create(&PostParams::default(), &Default::default()).await.expect("whoami");
    assert_eq!(me.status.and_then(|s| s.user_info).and_then(|u| u.username).as_deref(), Some("alice@example.com"));

    let access: Api<k8s_openapi::api::authorization::v1::SelfSubjectAccessReview> = Api::all(cluster.client.clone());
    let ask = |verb: &str| -> k8s_openapi::api::authorization::v1::SelfSubjectAccessReview {
        serde_json::from_value(json!({"spec": {"resourceAttributes": {"verb": verb, "group": "capdeck.dev", "resource": "rotationbatches", "namespace": "default"}}})).expect("review")
    };
    assert!(
        !access.create(&PostParams::default(), &ask("patch")).await.expect("review").status.expect("status").allowed
    );
    assert!(access.create(&PostParams::default(), &ask("get")).await.expect("review").status.expect("status").allowed);

    cluster.sandbox.install_crds();
    let batches: Api<RotationBatch> = Api::default_namespaced(cluster.client.clone());
    let (code, reason) = api_error(batches.patch("any", &PatchParams::default(), &Patch::Merge(json!({}))).await);
    assert_eq!((code, reason.as_str()), (403, "Forbidden"));
});

both_transports!(snapshot_and_restore, |cluster: Cluster| async move {
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    maps.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "kept"}})).expect("cm"))
        .await
        .expect("create");
    cluster.sandbox.install_crds();
    let snapshot = cluster.sandbox.snapshot();
    maps.delete("kept", &DeleteParams::default()).await.expect("delete");
    maps.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "later"}})).expect("cm"))
        .await
        .expect("create");
    cluster.sandbox.restore(&snapshot).expect("restore");
    let names: Vec<String> = maps
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect();
    assert_eq!(names, vec!["kept"]);
    let batches: Api<RotationBatch> = Api::default_namespaced(cluster.client.clone());
    assert!(batches.list(&ListParams::default()).await.is_ok(), "CRDs restored");
});

both_transports!(events_and_leases, |cluster: Cluster| async move {
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let maps: Api<ConfigMap> = Api::default_namespaced(cluster.client.clone());
    let map = maps
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "subject"}})).expect("cm"))
        .await
        .expect("create");
    let recorder =
        Recorder::new(cluster.client.clone(), Reporter { controller: "capdeck-test".into(), instance: None });
    let reference = kube::Resource::object_ref(&map, &());
    recorder
        .publish(
            &Event {
                type_: EventType::Normal,
                reason: "Tested".into(),
                note: Some("hello".into()),
                action: "Test".into(),
                secondary: None,
            },
            &reference,
        )
        .await
        .expect("publish");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::default_namespaced(cluster.client.clone());
    let listed = events.list(&ListParams::default()).await.expect("events");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].reason.as_deref(), Some("Tested"));

    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::default_namespaced(cluster.client.clone());
    leases
        .patch(
            "lock",
            &PatchParams::apply("capdeck-test").force(),
            &Patch::Apply(json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "lock"},
                "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}
            })),
        )
        .await
        .expect("lease");
    assert_eq!(leases.get("lock").await.expect("get").spec.and_then(|s| s.holder_identity).as_deref(), Some("me"));
});

#[tokio::test]
async fn table_output_uses_printer_columns() {
    let cluster = Cluster::start(common::Transport::InProcess).await;
    cluster.sandbox.load_demo().expect("demo");
    let request = http::Request::get("/apis/sme.sap.com/v1alpha1/namespaces/cap-shop/captenants?limit=500")
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
        .body(Vec::new())
        .expect("request");
    let table: serde_json::Value = cluster.client.request(request).await.expect("table");
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> =
        table["columnDefinitions"].as_array().expect("columns").iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(columns, vec!["Name", "Age", "State", "Subdomain", "Current Version"]);
    let row =
        table["rows"].as_array().and_then(|rows| rows.iter().find(|r| r["cells"][0] == "bookshop-t8")).expect("row");
    assert_eq!(row["cells"][2], "Upgrading");
    assert_eq!(row["cells"][4], "bookshop-1-9-0");
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
}

#[tokio::test(start_paused = true)]
async fn simulated_workloads_roll_stall_and_complete_jobs() {
    let cluster = Cluster::start(common::Transport::InProcess).await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let controller = cluster.sandbox.simulate_workloads(Default::default(), cancel.clone());
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client.clone());
    deployments.create(&PostParams::default(), &deployment("roll", 3)).await.expect("create");
    eventually("initial status", Duration::from_secs(5), || async {
        deployments.get("roll").await.ok().and_then(|d| d.status).and_then(|s| s.available_replicas) == Some(3)
    })
    .await;

    deployments
        .patch(
            "roll",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}})),
        )
        .await
        .expect("template change");
    let mut seen_updated = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = deployments.get("roll").await.ok().and_then(|d| d.status).unwrap_or_default();
        seen_updated.insert(status.updated_replicas.unwrap_or(-1));
        if status.observed_generation == Some(2) && status.updated_replicas == Some(3) && status.replicas == Some(3) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "rollout did not complete: {status:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen_updated.contains(&1) && seen_updated.contains(&2), "progress was gradual: {seen_updated:?}");

    let mut stalling = deployment("stuck", 2);
    stalling.metadata.annotations = Some([("sandbox.capdeck.dev/stall".to_string(), "true".to_string())].into());
    deployments.create(&PostParams::default(), &stalling).await.expect("create");
    eventually("status", Duration::from_secs(5), || async {
        deployments.get("stuck").await.ok().and_then(|d| d.status).is_some()
    })
    .await;
    deployments
        .patch(
            "stuck",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}})),
        )
        .await
        .expect("template change");
    eventually("progress deadline exceeded", Duration::from_secs(60), || async {
        let conditions =
            deployments.get("stuck").await.ok().and_then(|d| d.status).and_then(|s| s.conditions).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
    })
    .await;

    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::default_namespaced(cluster.client.clone());
    let job: k8s_openapi::api::batch::v1::Job = serde_json::from_value(json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}}})).expect("job");
    jobs.create(&PostParams::default(), &job).await.expect("create");
    eventually("job completes", Duration::from_secs(5), || async {
        jobs.get("j").await.ok().and_then(|j| j.status).and_then(|s| s.succeeded) == Some(1)
    })
    .await;
    cancel.cancel();
    controller.await.expect("controller stops");
}

#[tokio::test]
async fn starts_with_the_namespaces_of_a_real_cluster() {
    let cluster = Cluster::start(common::Transport::InProcess).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(cluster.client.clone());
    let mut names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    names.sort();
    assert_eq!(names, vec!["default", "kube-public", "kube-system"]);
    let version = cluster.client.apiserver_version().await.expect("version");
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "33"));
}

/// Wait until the Pods pane's rows of Deployment `srv` are `expected` (kind, status, ready).
async fn pods_become(client: &kube::Client, what: &str, expected: &[(capdeck::readmodel::pods::RowKind, &str, &str)]) {
    eventually(what, Duration::from_secs(10), || async {
        let now = capdeck::readmodel::pods::fetch(client, "default", "srv").await.unwrap_or_default();
        let same = now.len() == expected.len()
            && now
                .iter()
                .zip(expected)
                .all(|(row, (kind, status, ready))| row.kind == *kind && row.status == *status && row.ready == *ready);
        let seen: Vec<_> = now.iter().map(|row| (row.kind, row.status.as_str(), row.ready.as_str())).collect();
        same.then_some(()).ok_or(format!("{seen:?}"))
    })
    .await;
}

/// The demo's ReplicaSet and Pod controller (`WorkloadSimulation::pods`): a ReplicaSet per Pod
/// template with its Pods on the sandbox node, handed over on a rollout; a stalled rollout's
/// new Pod crash-loops and its log (the kubelet stand-in) says why — what the console's Pods
/// pane and the engine's failure-aware pacing read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_pods_follow_a_rollout_and_a_stalled_one_crash_loops() {
    use capdeck::readmodel::pods::{RowKind, fetch, log};
    let sandbox = capdeck::sandbox::Sandbox::default();
    let client = sandbox.client();
    let simulation = capdeck::sandbox::simulate::WorkloadSimulation {
        replicas_per_second: 20.0,
        progress_deadline: Duration::from_secs(1),
        tick: Duration::from_millis(20),
        pods: true,
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    sandbox.simulate_workloads(simulation, cancel.clone());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "srv"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "srv"}},
                 "template": {"metadata": {"labels": {"app": "srv"}},
                              "spec": {"containers": [{"name": "main", "image": "i"}]}}}
    }))
    .expect("deployment");
    deployments.create(&PostParams::default(), &deployment).await.expect("create");
    use RowKind::{Pod as P, ReplicaSet as R};
    pods_become(&client, "two ready Pods", &[(R, "current", "2/2"), (P, "Running", "1/1"), (P, "Running", "1/1")])
        .await;

    let template = |env: &str| {
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "i",
                                       "env": [{"name": "V", "value": env}]}]}}}})
    };
    deployments.patch("srv", &PatchParams::default(), &Patch::Strategic(template("2"))).await.expect("roll");
    let took_over = [(R, "current", "2/2"), (P, "Running", "1/1"), (P, "Running", "1/1"), (R, "old", "0/0")];
    pods_become(&client, "the new ReplicaSet took over", &took_over).await;

    let stall = json!({"metadata": {"annotations": {"sandbox.capdeck.dev/stall": "true"}}});
    deployments.patch("srv", &PatchParams::default(), &Patch::Merge(stall)).await.expect("stall");
    deployments.patch("srv", &PatchParams::default(), &Patch::Strategic(template("3"))).await.expect("roll");
    let crashing = [
        (R, "current", "0/1"),
        (P, "CrashLoopBackOff", "0/1"),
        (R, "old", "2/2"),
        (P, "Running", "1/1"),
        (P, "Running", "1/1"),
        (R, "old", "0/0"),
    ];
    pods_become(&client, "the new Pod crash-loops, the old ones serve", &crashing).await;
    let rows = fetch(&client, "default", "srv").await.expect("rows");
    assert_eq!(rows[1].last_termination.as_deref(), Some("Error (exit code 1)"));
    let lines_pod = rows[1].name.clone();
    let lines = log(&client, "default", &lines_pod, rows[1].log_container.as_deref()).await.expect("log");
    assert!(lines.iter().any(|line| line.contains("401 Unauthorized")), "{lines:?}");

    // Back to the previous template (what an undo does): its ReplicaSet is current again and
    // serves at once; the stall annotation does not stop a rollback to Pods that exist.
    deployments.patch("srv", &PatchParams::default(), &Patch::Strategic(template("2"))).await.expect("roll back");
    let back =
        [(R, "current", "2/2"), (P, "Running", "1/1"), (P, "Running", "1/1"), (R, "old", "0/0"), (R, "old", "0/0")];
    pods_become(&client, "the previous ReplicaSet is current again", &back).await;
    let rows = fetch(&client, "default", "srv").await.expect("rows");
    assert!(rows.iter().all(|row| row.name != lines_pod), "the crash-looping Pod is gone: {rows:?}");
    cancel.cancel();
}

// kube's `Api<PartialObjectMeta<K>>` (the engine's binding-Secret watch) asks for metadata only:
// lists, gets and watch events carry no data, as kube-apiserver answers them.
both_transports!(metadata_only_lists_gets_and_watches, |cluster: Cluster| async move {
    use kube::api::PartialObjectMeta;
    let secrets: Api<Secret> = Api::default_namespaced(cluster.client.clone());
    for name in ["meta-a", "meta-b"] {
        secrets.create(&PostParams::default(), &secret(name)).await.expect("create");
    }
    let request = http::Request::get("/api/v1/namespaces/default/secrets?limit=1")
        .header("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
        .body(Vec::new())
        .expect("request");
    let text = cluster.client.request_text(request).await.expect("metadata list");
    assert!(!text.contains("aHVudGVyMg"), "no data in a metadata-only list: {text}");
    let page: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert!(page["items"][0].get("data").is_none(), "{page}");
    assert_eq!(page["kind"], "PartialObjectMetadataList", "{page}");
    assert_eq!(page["apiVersion"], "meta.k8s.io/v1", "{page}");
    assert_eq!(page["items"][0]["kind"], "PartialObjectMetadata", "{page}");
    assert_eq!(page["items"][0]["metadata"]["name"], "meta-a", "{page}");
    assert!(page["metadata"]["continue"].is_string(), "pages as any list: {page}");

    let metadata: Api<PartialObjectMeta<Secret>> = Api::default_namespaced(cluster.client.clone());
    let listed = metadata.list(&ListParams::default()).await.expect("typed metadata list");
    let names: Vec<String> = listed.items.iter().filter_map(|item| item.metadata.name.clone()).collect();
    assert_eq!(names, ["meta-a", "meta-b"]);
    let one = metadata.get("meta-b").await.expect("metadata get");
    assert_eq!(one.metadata.name.as_deref(), Some("meta-b"));

    let (reader, writer) = reflector::store::<PartialObjectMeta<Secret>>();
    let task = tokio::spawn(
        reflector(writer, watcher(metadata, watcher::Config::default())).default_backoff().for_each(|_| async {}),
    );
    tokio::time::timeout(Duration::from_secs(10), reader.wait_until_ready()).await.expect("listed").expect("ready");
    let patch = json!({"metadata": {"labels": {"seen": "yes"}}, "stringData": {"password": "changed"}});
    secrets.patch("meta-a", &PatchParams::default(), &Patch::Merge(patch)).await.expect("patch");
    eventually("the change in the metadata watch", Duration::from_secs(10), || async {
        reader
            .state()
            .iter()
            .any(|item| item.metadata.labels.as_ref().is_some_and(|labels| labels.contains_key("seen")))
    })
    .await;
    task.abort();
});
