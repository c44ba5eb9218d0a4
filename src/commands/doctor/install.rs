//! The installation's checks: CRDs, permissions, the Lease, the Go CAP Operator beside capdeck, objects that do not decode.

use super::*;

/// What an installed CRD means for capdeck. capdeck's own (capdeck.dev) should be this binary's
/// schema. The CAP Operator's carry its own schema (descriptions, newer fields): capdeck reads
/// the version it knows, and never advises replacing them with its copies.
pub(super) fn installed_crd_finding(
    ours: &CustomResourceDefinition,
    theirs: &CustomResourceDefinition,
    same: bool,
) -> Finding {
    let name = ours.name_any();
    let served: Vec<&str> = theirs.spec.versions.iter().filter(|v| v.served).map(|v| v.name.as_str()).collect();
    if same {
        return finding("crd", Status::Ok, format!("{name} installed, as this binary defines it"));
    }
    if ours.spec.group == crate::api::crds::CAPDECK_GROUP {
        // Helm's own are upgraded with the chart: a kubectl apply would take their fields from it.
        let by_helm = theirs.labels().get("app.kubernetes.io/managed-by").is_some_and(|by| by == "Helm");
        let fix = if by_helm {
            "the Helm chart manages it: helm upgrade to the chart of this capdeck"
        } else {
            "capdeck crds --only capdeck | kubectl apply --server-side -f - (or let the Helm chart manage it)"
        };
        return finding(
            "crd",
            Status::Warn,
            format!("{name} is installed (serves {}) but differs from this binary's: {fix}", served.join(", ")),
        );
    }
    let reads: Vec<&str> = ours.spec.versions.iter().map(|v| v.name.as_str()).collect();
    match reads.iter().find(|version| served.contains(version)) {
        Some(version) => finding(
            "crd",
            Status::Ok,
            format!("{name} installed, serving {version}, which capdeck reads (its schema is the CAP Operator's)"),
        ),
        None => finding(
            "crd",
            Status::Fail,
            format!(
                "{name} does not serve {} (it serves {}), which capdeck reads: run a CAP Operator release that \
                 serves it, or a capdeck that reads {}",
                reads.join(", "),
                if served.is_empty() { "nothing".to_string() } else { served.join(", ") },
                served.first().copied().unwrap_or("its versions")
            ),
        ),
    }
}

/// Every CRD capdeck knows installed, each with the versions and schema of this binary.
pub(super) async fn crds(connection: &Connection) -> Vec<Finding> {
    let api: Api<CustomResourceDefinition> = Api::all(connection.client.clone());
    let mut found = Vec::new();
    for ours in crate::api::crds::all() {
        match api.get_opt(&ours.name_any()).await {
            Ok(theirs) => found.push((ours, theirs)),
            // One line, not one per CRD: the same answer would come for each (a ServiceAccount
            // without `get customresourcedefinitions`, as the chart's).
            Err(error) => {
                return vec![finding(
                    "crd",
                    Status::Warn,
                    format!(
                        "cannot read CustomResourceDefinitions, so their versions go unchecked ({}); the checks \
                         below still find a kind that is not served",
                        describe_error(&error)
                    ),
                )];
            }
        }
    }
    // Some of the CAP Operator's CRDs there: it is installed, and owns them all.
    let cap_operator_there =
        found.iter().any(|(ours, theirs)| ours.spec.group != crate::api::crds::CAPDECK_GROUP && theirs.is_some());
    let schema = |crd: &CustomResourceDefinition| {
        crd.spec
            .versions
            .iter()
            .map(|v| (v.name.clone(), serde_json::to_value(&v.schema).unwrap_or(Value::Null)))
            .collect::<Vec<_>>()
    };
    found
        .into_iter()
        .map(|(ours, theirs)| match theirs {
            Some(theirs) => installed_crd_finding(&ours, &theirs, schema(&theirs) == schema(&ours)),
            None => {
                let name = ours.name_any();
                let fix = if ours.spec.group == crate::api::crds::CAPDECK_GROUP {
                    "the Helm chart installs it; otherwise capdeck crds --only capdeck | kubectl apply --server-side -f -"
                } else if cap_operator_there {
                    // Never `capdeck crds | kubectl apply` here: it would replace the schemas of the
                    // CAP Operator's other CRDs with capdeck's copies (fields they have would be pruned).
                    "the CAP Operator's other CRDs are installed, so its release is older or partial: install \
                     the CAP Operator release that brings it (not capdeck crds, whose copies would replace the \
                     schemas of the CRDs it has)"
                } else {
                    "the CAP Operator brings it; to try capdeck without it, capdeck crds | kubectl apply --server-side -f -"
                };
                finding("crd", Status::Fail, format!("{name} is not installed: {fix}"))
            }
        })
        .collect()
}

/// One line per permission the engine (daemon) or the console lacks in the scope.
pub(super) async fn permissions(connection: &Connection, scope: &Scope) -> Vec<Finding> {
    let namespace = match scope {
        Scope::All => None,
        Scope::Namespace(namespace) => Some(namespace.as_str()),
    };
    let where_ = namespace.map_or("in all namespaces".to_string(), |ns| format!("in namespace {ns}"));
    let mut missing = Vec::new();
    for (who, needs) in [("engine", ENGINE_NEEDS), ("console", CONSOLE_NEEDS)] {
        for (verb, group, resource) in needs {
            if !can_i(&connection.client, verb, group, resource, namespace).await {
                let qualified = if group.is_empty() { (*resource).to_string() } else { format!("{resource}.{group}") };
                // Without reading, neither the engine nor the console works: that blocks. A missing
                // write only disables what needs it.
                let (status, who) = if matches!(*verb, "list" | "watch") {
                    (Status::Fail, "the engine and the console read it")
                } else {
                    (
                        Status::Warn,
                        if who == "engine" { "the engine writes it" } else { "the console's batch keys need it" },
                    )
                };
                missing.push(finding("permission", status, format!("you may not {verb} {qualified} {where_} ({who})")));
            }
        }
    }
    if missing.is_empty() {
        vec![finding("permission", Status::Ok, format!("everything the engine and the console need, {where_}"))]
    } else {
        missing
    }
}

pub(super) async fn lease(
    connection: &Connection,
    lease: &crate::engine::config::LeaseSettings,
    scope: &Scope,
    leader: &LeaderView,
) -> Vec<Finding> {
    let namespaces: Api<Lenient<Namespace>> = Api::all(connection.client.clone());
    let mut out = Vec::new();
    if let Ok(None) = namespaces.get_opt(&lease.namespace).await {
        out.push(finding(
            "lease",
            Status::Fail,
            format!(
                "the lease namespace {0} does not exist: kubectl create namespace {0}, or pass --lease-namespace",
                lease.namespace
            ),
        ));
        return out;
    }
    for verb in LEASE_NEEDS {
        if !can_i(&connection.client, verb, "coordination.k8s.io", "leases", Some(&lease.namespace)).await {
            out.push(finding(
                "lease",
                Status::Warn,
                format!(
                    "you may not {verb} leases.coordination.k8s.io in {} (an engine run as you needs it)",
                    lease.namespace
                ),
            ));
        }
    }
    if !can_i(&connection.client, "list", "coordination.k8s.io", "leases", None).await {
        out.push(finding(
            "lease",
            Status::Warn,
            "you may not list leases.coordination.k8s.io in all namespaces: capdeck finds the engine that leads \
             by its Lease wherever it lives, and an engine run as you will not lead without making sure no other \
             does",
        ));
    } else if !can_i(&connection.client, "watch", "coordination.k8s.io", "leases", None).await {
        out.push(finding(
            "lease",
            Status::Warn,
            "you may not watch leases.coordination.k8s.io in all namespaces: an engine run as you lists them \
             every lease duration instead (more requests at rest; the ClusterRole `capdeck manifests` prints grants \
             list and watch)",
        ));
    }
    match leader {
        LeaderView::Leads { lease, identity, renewed_ago, scope: led, settings } => out.push(finding(
            "leader",
            Status::Ok,
            format!(
                "{identity} leads {led} (lease {lease}, renewed {renewed_ago}s ago){}",
                settings.as_ref().map(|settings| format!("; its settings: {}", settings.summary())).unwrap_or_default()
            ),
        )),
        LeaderView::Nobody { detail } => {
            out.push(finding("leader", Status::Fail, format!("nobody leads {}: {detail}", scope.label())))
        }
        LeaderView::CannotLook { reason } => {
            out.push(finding("leader", Status::Warn, format!("cannot tell who leads {}: {reason}", scope.label())))
        }
    }
    out
}

/// The Go CAP Operator (its Lease `capoperator-lease-lock` renewed) and applications with
/// `spec.rolloutOnCredentialUpdate: true`: both programs would restart the same Deployments.
pub(super) async fn go_operator(connection: &Connection, scope: &Scope) -> Vec<Finding> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let running = match crate::leadership::renewed_go_operator_leases(&connection.client, now).await {
        Ok(running) => running,
        Err(error) => {
            return vec![finding(
                "go operator",
                Status::Warn,
                format!("cannot tell whether the Go CAP Operator runs (listing leases: {})", describe_error(&error)),
            )];
        }
    };
    let flagged: Vec<String> = match decoded::<CAPApplication>(&connection.client, scope).await {
        Ok(apps) => apps
            .iter()
            .filter(|a| a.spec.rollout_on_credential_update == Some(true))
            .map(|a| format!("{}/{}", a.namespace().unwrap_or_default(), a.name_any()))
            .collect(),
        Err(error) if !running.is_empty() => {
            return vec![finding(
                "go operator",
                Status::Warn,
                format!(
                    "the Go CAP Operator runs (lease {}), but which applications it rolls is unknown (listing \
                     CAPApplications: {})",
                    running.join(", "),
                    describe_error(&error)
                ),
            )];
        }
        Err(_) => Vec::new(),
    };
    match (running.is_empty(), flagged.is_empty()) {
        // Both act on the same rotation (measured beside the Go operator v0.35.0,
        // docs/COMPATIBILITY.md); a Go pass inside an unfinished capdeck batch deletes the
        // previous VCAP Secret capdeck keeps for undo (read from its code). Not a setup to run in.
        (false, false) => vec![finding(
            "go operator",
            Status::Fail,
            format!(
                "the Go CAP Operator runs (lease {}) and {} application(s) set spec.rolloutOnCredentialUpdate \
                 ({}): both it and capdeck restart their Deployments on a rotation — set the field false and opt in \
                 to capdeck with the annotation capdeck.dev/rollout-on-credential-update: \"true\"",
                running.join(", "),
                flagged.len(),
                flagged.join(", ")
            ),
        )],
        (false, true) => vec![finding(
            "go operator",
            Status::Ok,
            format!("the Go CAP Operator runs (lease {}) but rolls nothing capdeck does", running.join(", ")),
        )],
        _ => vec![finding("go operator", Status::Ok, "no Go CAP Operator lease is being renewed")],
    }
}

/// Every object of a kind in `scope` that decodes (those that do not: [`undecodable`]).
pub(super) async fn decoded<K>(client: &kube::Client, scope: &Scope) -> Result<Vec<K>, kube::Error>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    crate::cluster::list_each(&scope.api::<Lenient<K>>(client), &ListParams::default()).await.map(|listed| listed.items)
}

/// Objects capdeck reads that do not decode: each one is skipped by the engine, the console and
/// every list, so each is a failure here, named with its field.
pub(super) async fn undecodable(connection: &Connection, scope: &Scope) -> Vec<Finding> {
    const CHECK: &str = "objects";
    let client = &connection.client;
    let all = ListParams::default();
    let vcap = ListParams::default().labels(crate::api::LABEL_SECRET_OWNER_HASH);
    let engines = ListParams::default().labels(&format!("{}=true", crate::leadership::ENGINE_LABEL));
    // (kind, what did not decode); a kind that cannot be listed is another check's finding.
    let listed: Vec<(&str, Result<Vec<crate::api::lenient::Undecodable>, kube::Error>)> = vec![
        ("CAPApplication", undecodable_of::<CAPApplication>(&scope.api(client), &all).await),
        ("CAPApplicationVersion", undecodable_of::<CAPApplicationVersion>(&scope.api(client), &all).await),
        ("CAPTenant", undecodable_of::<CAPTenant>(&scope.api(client), &all).await),
        ("CAPTenantOperation", undecodable_of::<crate::api::CAPTenantOperation>(&scope.api(client), &all).await),
        ("RotationBatch", undecodable_of::<crate::api::RotationBatch>(&scope.api(client), &all).await),
        ("Freeze", undecodable_of::<crate::api::Freeze>(&scope.api(client), &all).await),
        ("Deployment", undecodable_of::<DeploymentView>(&scope.api(client), &all).await),
        ("Secret", undecodable_of::<Secret>(&scope.api(client), &vcap).await),
        (
            "ServiceBinding",
            undecodable_of::<crate::api::service_binding::ServiceBinding>(&scope.api(client), &all).await,
        ),
        ("Namespace", undecodable_of::<Namespace>(&Api::all(client.clone()), &namespaces_in(scope)).await),
        (
            "Lease",
            undecodable_of::<k8s_openapi::api::coordination::v1::Lease>(&Api::all(client.clone()), &engines).await,
        ),
    ];
    let mut out = Vec::new();
    let mut checked = 0;
    for (kind, found) in listed {
        let Ok(found) = found else { continue };
        checked += 1;
        out.extend(
            found.iter().map(|object| finding(CHECK, Status::Fail, crate::cluster::describe_undecodable(kind, object))),
        );
    }
    if out.is_empty() {
        out.push(finding(
            CHECK,
            Status::Ok,
            format!("every object of the {checked} kinds capdeck reads decodes in {}", scope.label()),
        ));
    }
    out
}

/// The Namespaces of `scope`.
pub(super) fn namespaces_in(scope: &Scope) -> ListParams {
    match scope {
        Scope::All => ListParams::default(),
        Scope::Namespace(namespace) => ListParams::default().fields(&format!("metadata.name={namespace}")),
    }
}

pub(super) async fn undecodable_of<K>(
    api: &Api<Lenient<K>>,
    params: &ListParams,
) -> Result<Vec<crate::api::lenient::Undecodable>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    crate::cluster::list_each(api, params).await.map(|listed| listed.undecodable)
}
