//! Change windows and freezes as the console shows them: which windows apply to an application
//! (and from which level), and which freezes hold what is in view.

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::Freeze;
use crate::api::change_window::{ANNOTATION_CHANGE_WINDOWS, AppliedWindows, ChangeWindows, WindowSource};
use crate::api::freeze::FreezeScope;

use super::Snapshot;

/// The change windows of `namespace/application`: its annotation, else its Namespace's, else the
/// leading engine's `--change-windows` (`cluster`, as it published them). `None`: any hour.
pub fn applied_windows(
    snapshot: &Snapshot,
    namespace: &str,
    application: &str,
    cluster: Option<&str>,
) -> Option<AppliedWindows> {
    let app = snapshot.apps.iter().find(|row| row.namespace == namespace && row.name == application);
    let own = app.and_then(|row| row.object.annotations().get(ANNOTATION_CHANGE_WINDOWS)).map(String::as_str);
    let of_namespace = snapshot.namespace_windows.get(namespace).map(String::as_str);
    let cluster = cluster.filter(|text| !text.trim().is_empty()).map(ChangeWindows::parse);
    match cluster {
        Some(Err(error)) => AppliedWindows::resolve((namespace, application, own), of_namespace, None)
            .or(Some(AppliedWindows { source: WindowSource::Cluster, windows: Err(error) })),
        Some(Ok(windows)) => AppliedWindows::resolve((namespace, application, own), of_namespace, Some(&windows)),
        None => AppliedWindows::resolve((namespace, application, own), of_namespace, None),
    }
}

/// The freeze that holds `namespace/application` at `now`, if any (`api::freeze::governing`);
/// a cluster freeze counts only in `lease_namespace`, the namespace of the engine's Lease.
pub fn governing_freeze<'a>(
    snapshot: &'a Snapshot,
    lease_namespace: Option<&str>,
    namespace: &str,
    application: &str,
    now: Timestamp,
) -> Option<&'a Freeze> {
    let freezes = snapshot.freezes.iter().map(|freeze| &**freeze);
    crate::api::freeze::governing(freezes, lease_namespace.unwrap_or_default(), namespace, application, now)
}

/// The freezes in force at `now` over what is in view, the most relevant first: the cluster's
/// (honoured only in `lease_namespace`), then a namespace's, then an application's in view; of
/// one kind, the one that ends last first.
pub fn freezes_in_view<'a>(snapshot: &'a Snapshot, lease_namespace: Option<&str>, now: Timestamp) -> Vec<&'a Freeze> {
    let mut found: Vec<(u8, &Freeze)> = snapshot
        .freezes
        .iter()
        .map(|freeze| &**freeze)
        .filter(|freeze| freeze.active_at(now))
        .filter_map(|freeze| {
            let namespace = freeze.namespace().unwrap_or_default();
            let rank = match &freeze.spec.scope {
                FreezeScope::Cluster => (lease_namespace == Some(namespace.as_str())).then_some(0)?,
                FreezeScope::Namespace => 1,
                FreezeScope::Application => {
                    let application = freeze.spec.application.as_deref()?;
                    snapshot
                        .apps
                        .iter()
                        .any(|row| row.namespace == namespace && row.name == application)
                        .then_some(2)?
                }
                FreezeScope::Other(_) => return None,
            };
            Some((rank, freeze))
        })
        .collect();
    found.sort_by(|(rank_a, a), (rank_b, b)| {
        rank_a
            .cmp(rank_b)
            .then_with(|| b.spec.until.0.cmp(&a.spec.until.0))
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    found.into_iter().map(|(_, freeze)| freeze).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::api::CAPApplication;
    use crate::readmodel::{Sources, build};

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    fn application(namespace: &str, name: &str, windows: Option<&str>) -> Arc<CAPApplication> {
        let annotations = windows.map_or_else(|| json!({}), |text| json!({ANNOTATION_CHANGE_WINDOWS: text}));
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
                "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
                "spec": {"btpAppName": name, "providerSubaccountId": "p", "btp": {"services": []}},
            }))
            .expect("application"),
        )
    }

    fn freeze(namespace: &str, name: &str, spec: serde_json::Value) -> Arc<Freeze> {
        let mut object = json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"scope": "Namespace", "until": "2026-11-21T18:00:00Z",
                     "frozen": {"by": "alice", "at": "2026-11-20T08:00:00Z", "reason": "release weekend"}}});
        if let (Some(target), Some(extra)) = (object["spec"].as_object_mut(), spec.as_object()) {
            target.extend(extra.clone());
        }
        Arc::new(serde_json::from_value(object).expect("a freeze"))
    }

    fn snapshot(apps: &[Arc<CAPApplication>]) -> Snapshot {
        build(Sources::cap_objects(apps, &[], &[], &[]))
    }

    /// The most specific level wins; a blank annotation is none at that level; a cluster level
    /// that cannot be read is said so, not ignored.
    #[test]
    fn the_windows_of_an_application_and_where_they_come_from() {
        let apps = [
            application("shop", "own", Some("Sat 00:00-24:00 UTC")),
            application("shop", "plain", None),
            application("shop", "blank", Some("  ")),
            application("hr", "portal", None),
        ];
        let mut snapshot = snapshot(&apps);
        snapshot.namespace_windows.insert("shop".into(), "Mon-Fri 22:00-05:00 Europe/Berlin".into());
        let cluster = Some("Sun 02:00-04:00 UTC");
        let source = |namespace: &str, name: &str, cluster: Option<&str>| {
            applied_windows(&snapshot, namespace, name, cluster).map(|applied| {
                (applied.source, applied.windows.map(|w| w.text().to_string()).map_err(|e| e.to_string()))
            })
        };
        assert_eq!(
            source("shop", "own", cluster),
            Some((
                WindowSource::Application { namespace: "shop".into(), name: "own".into() },
                Ok("Sat 00:00-24:00 UTC".into())
            ))
        );
        let of_shop =
            Some((WindowSource::Namespace { name: "shop".into() }, Ok("Mon-Fri 22:00-05:00 Europe/Berlin".into())));
        assert_eq!(source("shop", "plain", cluster), of_shop);
        assert_eq!(source("shop", "blank", cluster), of_shop, "a blank annotation is none at that level");
        assert_eq!(source("hr", "portal", cluster), Some((WindowSource::Cluster, Ok("Sun 02:00-04:00 UTC".into()))));
        assert_eq!(source("hr", "portal", None), None, "no level: any hour");
        assert_eq!(source("hr", "gone", None), None, "an application not in view has no annotation to read");
        let broken = source("hr", "portal", Some("Sun 25:00-26:00 UTC")).expect("said");
        assert_eq!(broken.0, WindowSource::Cluster);
        assert!(broken.1.as_ref().is_err_and(|e| e.contains("25:00")), "{broken:?}");
    }

    /// The banner's order: the cluster's freeze (only in the Lease's namespace), then a
    /// namespace's, then an application's in view; lifted, ended and foreign ones are left out.
    #[test]
    fn the_freezes_in_view_most_relevant_first() {
        let apps = [application("shop", "bookshop", None)];
        let mut snapshot = snapshot(&apps);
        snapshot.freezes = vec![
            freeze(
                "shop",
                "app-bookshop",
                json!({"scope": "Application", "application": "bookshop", "until": "2026-11-22T00:00:00Z"}),
            ),
            freeze("shop", "app-gone", json!({"scope": "Application", "application": "gone"})),
            freeze("shop", "namespace", json!({"until": "2026-11-20T12:00:00Z"})),
            freeze("hr", "namespace", json!({"until": "2026-11-20T15:00:00Z"})),
            freeze("capdeck-system", "cluster", json!({"scope": "Cluster"})),
            freeze("shop", "cluster", json!({"scope": "Cluster"})),
            freeze("hr", "lifted", json!({"lifted": {"by": "bob", "at": "2026-11-20T08:30:00Z"}})),
            freeze("hr", "over", json!({"until": "2026-11-20T08:59:59Z"})),
        ];
        let now = at("2026-11-20T09:00:00Z");
        let names = |lease: Option<&str>| -> Vec<String> {
            freezes_in_view(&snapshot, lease, now).iter().map(|f| f.target()).collect()
        };
        assert_eq!(
            names(Some("capdeck-system")),
            ["cluster", "namespace hr", "namespace shop", "CAPApplication shop/bookshop"],
            "of one kind, the one that ends last first"
        );
        assert_eq!(names(None), ["namespace hr", "namespace shop", "CAPApplication shop/bookshop"]);
        let holding = governing_freeze(&snapshot, Some("capdeck-system"), "shop", "bookshop", now).map(|f| f.target());
        assert_eq!(holding.as_deref(), Some("CAPApplication shop/bookshop"), "ends last of those that cover it");
    }
}
