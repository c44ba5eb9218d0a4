//! Reading one context into fleet rows: a few LISTs (RotationBatches, CAPApplications,
//! ServiceBindings, CAPApplicationVersions, CAPTenants), a GET per consumed binding Secret, per
//! Deployment of a version and per Secret it references (which credentials the Pods run), and
//! one of the engine's Lease, all under one timeout. `rows` is the pure part.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::ListParams;

use super::{ActiveFreeze, CredentialRisk, FleetRow, OpenBatch, RowState};
use crate::api::freeze::CLUSTER_FREEZE_NAME;
use crate::api::lenient::Lenient;
use crate::api::service_binding::ServiceBinding;
use crate::api::{BatchPhase, CAPApplication, Freeze, FreezeScope, ObjectKey, RotationBatch};
use crate::cluster::{ClusterTarget, Scope, describe_error};
use crate::credentials::Verdict;
use crate::manifest::Manifests;
use crate::plan::SecretLookup;

/// How the fleet is read.
#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// Each context's own limit (connect and every request).
    pub timeout: Duration,
    /// The window and expected rollout given as flags; each context's leading engine's published
    /// settings otherwise (`crate::judging::choose`).
    pub window: Option<Duration>,
    pub expected_rollout: Option<Duration>,
    /// The engine's Lease: its namespace (`None`: each context's default namespace) and name.
    pub lease_namespace: Option<String>,
    pub lease_name: String,
    /// `-n`: one namespace in every context; `None`: all namespaces.
    pub namespace: Option<String>,
}

impl Default for FleetOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            window: None,
            expected_rollout: None,
            lease_namespace: None,
            lease_name: crate::leadership::DEFAULT_LEASE_NAME.to_string(),
            namespace: None,
        }
    }
}

/// Why a context could not be read.
struct Unread(RowState, String);

impl Unread {
    /// `server` is named when the request never reached it: `cannot connect to URL: cause`.
    fn from_kube(what: &str, error: &kube::Error, server: &str) -> Self {
        let state = match error {
            kube::Error::Api(status) if matches!(status.code, 401 | 403) => RowState::Forbidden,
            _ => RowState::Unreachable,
        };
        if let Some(no_answer) = crate::cluster::no_answer(error) {
            return Self(
                state,
                format!(
                    "no answer within {} from {} (is the cluster up? a longer --timeout waits more)",
                    crate::cluster::deadline::shown(no_answer.after),
                    no_answer.server
                ),
            );
        }
        match crate::cluster::unreachable_cause(error) {
            Some(cause) => Self(
                state,
                format!(
                    "cannot connect to {}: {cause} (is the cluster up and the kubeconfig right?)",
                    server.trim_end_matches('/')
                ),
            ),
            None => Self(state, format!("{what}: {}", describe_error(error))),
        }
    }
}

/// Read every context concurrently; one row or more per context, in the order given.
pub async fn read_fleet(cluster: &ClusterTarget, contexts: &[String], options: &FleetOptions) -> Vec<FleetRow> {
    let reads = contexts.iter().map(|context| read_one(cluster, context, options));
    futures::future::join_all(reads).await.into_iter().flatten().collect()
}

async fn read_one(cluster: &ClusterTarget, context: &str, options: &FleetOptions) -> Vec<FleetRow> {
    let deadline = tokio::time::Instant::now() + options.timeout;
    match read_context(cluster, context, options, deadline).await {
        Ok(rows) => rows,
        Err(Unread(state, why)) => vec![FleetRow::problem(context, state, why)],
    }
}

fn no_answer(options: &FleetOptions) -> String {
    format!(
        "no answer within {} (is the cluster up? a longer --timeout waits more)",
        crate::output::human_duration(i64::try_from(options.timeout.as_secs()).unwrap_or(i64::MAX))
    )
}

/// What a context must answer for its rows: its batches, applications, ServiceBindings and Lease.
struct Essentials {
    client: kube::Client,
    applications: Vec<Arc<CAPApplication>>,
    batches: Vec<Arc<RotationBatch>>,
    bindings: Option<Vec<ServiceBinding>>,
    leader: String,
    leaders: BTreeMap<String, String>,
    /// What the leading engine published: its verdicts are the ones to show.
    leader_settings: Option<crate::leadership::PublishedSettings>,
    /// The namespace of the leading engine's Lease (else the one it would be in): only there is a
    /// cluster freeze honoured.
    lease_namespace: String,
    /// The Freezes, or why they could not be read.
    freezes: Result<Vec<Arc<Freeze>>, String>,
    /// Each Namespace's change windows annotation, or why they could not be read.
    namespace_windows: Result<BTreeMap<String, String>, String>,
    notes: Vec<String>,
}

/// Which Deployments consume the binding Secrets and what they run (the objects read into
/// `lookup`), within the deadline; `None` with a note saying why not.
async fn consumers_index(
    client: &kube::Client,
    scope: &Scope,
    applications: &[Arc<CAPApplication>],
    lookup: &mut crate::lookup::Objects,
    deadline: tokio::time::Instant,
    options: &FleetOptions,
    notes: &mut Vec<String>,
) -> Option<crate::lookup::CapIndex> {
    match tokio::time::timeout_at(deadline, consumer_objects(client, scope, applications, lookup)).await {
        Ok(Ok(index)) => Some(index),
        Ok(Err(why)) => {
            notes.push(format!("which credentials the Deployments run is not known ({why})"));
            None
        }
        Err(_) => {
            notes.push(format!(
                "which credentials the Deployments run is not known: not read within {}",
                crate::output::human_duration(i64::try_from(options.timeout.as_secs()).unwrap_or(i64::MAX))
            ));
            None
        }
    }
}

async fn read_context(
    cluster: &ClusterTarget,
    context: &str,
    options: &FleetOptions,
    deadline: tokio::time::Instant,
) -> Result<Vec<FleetRow>, Unread> {
    // A second more than --timeout for the whole: connecting and each request have the deadline
    // themselves, and their errors say more (which plugin, which server) than "no answer".
    let essentials =
        tokio::time::timeout_at(deadline + Duration::from_secs(1), read_essentials(cluster, context, options))
            .await
            .map_err(|_| Unread(RowState::Unreachable, no_answer(options)))??;
    let Essentials {
        client,
        applications,
        batches,
        bindings,
        leader,
        leaders,
        leader_settings,
        lease_namespace,
        freezes,
        namespace_windows,
        mut notes,
    } = essentials;
    let flags = crate::judging::Flags {
        window: options.window,
        expected_rollout: options.expected_rollout,
        change_windows: None,
    };
    let crate::judging::Chosen { judging, timing_source, .. } =
        crate::judging::choose(flags, leader_settings.as_ref(), Some(&lease_namespace));
    if leader_settings.is_some() && (options.window.is_some() || options.expected_rollout.is_some()) {
        notes.push(format!("credentials judged with {timing_source}"));
    }
    // The binding Secrets (for the credential verdicts) get what is left of the time: a big
    // context that answers is not "unreachable" because its Secrets take long.
    let mut lookup = crate::lookup::Objects::default();
    let scope = options.namespace.clone().map_or(Scope::All, Scope::Namespace);
    let secrets = tokio::time::timeout_at(deadline, binding_secrets(&client, &applications)).await;
    let credentials_checked = secrets.is_ok();
    if let Ok(secrets) = secrets {
        lookup.secrets = secrets;
    } else {
        notes.push(format!(
            "credentials not checked: the binding Secrets of {} were not read within {} (capdeck credentials \
             --context {context} -A reads them all)",
            crate::output::count(applications.len(), "application"),
            crate::output::human_duration(i64::try_from(options.timeout.as_secs()).unwrap_or(i64::MAX))
        ));
    }
    // Which credentials the Pods run: judged as `capdeck credentials` judges, with the same reads.
    let index = if credentials_checked {
        consumers_index(&client, &scope, &applications, &mut lookup, deadline, options, &mut notes).await
    } else {
        None
    };
    let manifests = Manifests {
        applications,
        batches,
        lookup,
        service_bindings: bindings.clone().unwrap_or_default(),
        ..Manifests::default()
    };
    let change_windows = leader_settings.as_ref().and_then(|settings| settings.change_windows.clone());
    if let Err(why) = &namespace_windows {
        notes.push(format!(
            "namespace windows not readable ({why}): credential verdicts count the applications' and the cluster's"
        ));
    }
    if let Err(why) = &freezes {
        notes.push(format!("no freeze information: {why}"));
    }
    let inputs = Inputs {
        manifests: &manifests,
        bindings_known: bindings.is_some(),
        credentials_checked,
        index: index.as_ref(),
        leader,
        leaders,
        notes,
        now: Timestamp::now(),
        judging: &judging,
        freezes: freezes.as_deref().ok(),
        namespace_windows: namespace_windows.as_ref().ok(),
        change_windows: change_windows.as_deref(),
    };
    Ok(rows(context, &inputs))
}

async fn read_essentials(cluster: &ClusterTarget, context: &str, options: &FleetOptions) -> Result<Essentials, Unread> {
    let mut cluster = cluster.clone();
    cluster.context = Some(context.to_string());
    // An exec credential plugin and each request get the fleet's --timeout.
    cluster.request_timeout =
        crate::cluster::deadline::RequestTimeout { after: Some(options.timeout), flag: "--timeout" };
    let connection = cluster.connect().await.map_err(|error| Unread(RowState::Unreachable, error.to_string()))?;
    let client = connection.client.clone();
    let scope = options.namespace.clone().map_or(Scope::All, Scope::Namespace);
    let server = connection.server.as_str();
    // The Freezes and the Namespaces (their windows annotation) are the reads the windows add
    // (the leader publishes the cluster's windows).
    let freezes: kube::Api<Lenient<Freeze>> = scope.api(&client);
    let params = ListParams::default();
    let (batches, applications, bindings, freezes, namespace_windows) = tokio::join!(
        list_lenient::<RotationBatch>(&client, &scope, "RotationBatches", server),
        list_lenient::<CAPApplication>(&client, &scope, "CAPApplications", server),
        crate::cluster::list_service_bindings(&client, &scope),
        crate::cluster::list_each(&freezes, &params),
        crate::judging::read_namespace_windows(&client, &scope),
    );
    let (batches, mut notes) = batches?;
    let (applications, more) = applications?;
    notes.extend(more);
    // Without ServiceBindings the verdicts say "unknown"; that is not a reason to drop the row.
    let bindings = bindings
        .unwrap_or_else(|why| {
            notes.push(format!("ServiceBindings not read ({why}): credential verdicts are unknown"));
            None
        })
        .map(|listed| {
            notes.extend(undecodable_note("ServiceBindings", &listed.undecodable));
            listed.items
        });
    let fallback = [ObjectKey::new(
        options.lease_namespace.clone().unwrap_or_else(|| connection.default_namespace.clone()),
        options.lease_name.clone(),
    )];
    let found = crate::leadership::find(&client, &scope, &fallback).await;
    let leader = found.short();
    let leader_settings = found.settings().cloned();
    let lease_namespace = match &found {
        crate::leadership::LeaderView::Leads { lease, .. } => lease.split_once('/').map(|(ns, _)| ns.to_string()),
        _ => None,
    }
    .unwrap_or_else(|| fallback[0].namespace.clone());
    let freezes = with_cluster_freeze(&client, &scope, &lease_namespace, freezes, &mut notes).await;
    // Each namespace's row names the engine that leads it (engines of single namespaces may lead
    // side by side in one context).
    let mut leaders = BTreeMap::new();
    if let Ok(leases) = crate::leadership::engine_leases(&client).await {
        let namespaces =
            applications.iter().filter_map(|app| app.namespace()).chain(batches.iter().filter_map(|b| b.namespace()));
        for namespace in namespaces {
            let here = crate::leadership::leader_among(&leases, &Scope::Namespace(namespace.clone()));
            leaders.insert(namespace, here.short());
        }
    }
    Ok(Essentials {
        client,
        applications,
        batches,
        bindings,
        leader,
        leaders,
        leader_settings,
        lease_namespace,
        freezes,
        namespace_windows,
        notes,
    })
}

/// The Freezes listed in the scope, with the cluster freeze of the Lease's namespace when that
/// lies outside it (a GET); or why they cannot be read (then the FROZEN column says `?`).
async fn with_cluster_freeze(
    client: &kube::Client,
    scope: &Scope,
    lease_namespace: &str,
    listed: Result<crate::cluster::Listed<Freeze>, kube::Error>,
    notes: &mut Vec<String>,
) -> Result<Vec<Arc<Freeze>>, String> {
    let unreadable = |error: &kube::Error| match error {
        kube::Error::Api(status) if status.code == 404 => "the Freeze CRD is not installed".to_string(),
        kube::Error::Api(status) if status.code == 403 => "you may not list freezes.capdeck.dev".to_string(),
        other => format!("cannot list freezes.capdeck.dev: {}", describe_error(other)),
    };
    let listed = listed.map_err(|error| unreadable(&error))?;
    notes.extend(undecodable_note("Freezes", &listed.undecodable));
    let mut freezes = listed.items;
    if let Scope::Namespace(viewed) = scope
        && viewed != lease_namespace
    {
        let api: kube::Api<Lenient<Freeze>> = kube::Api::namespaced(client.clone(), lease_namespace);
        match api.get_opt(CLUSTER_FREEZE_NAME).await.map_err(|error| unreadable(&error))?.map(Lenient::into_result) {
            Some(Ok(freeze)) => freezes.push(freeze),
            Some(Err(undecodable)) => notes.extend(undecodable_note("Freezes", &[undecodable])),
            None => {}
        }
    }
    Ok(freezes.into_iter().map(Arc::new).collect())
}

/// Every object of a kind that decodes, and a note for those that do not (one malformed object
/// must not hide a context). A kind the server does not serve is empty: nothing of it is open.
async fn list_lenient<K>(
    client: &kube::Client,
    scope: &Scope,
    what: &str,
    server: &str,
) -> Result<(Vec<Arc<K>>, Vec<String>), Unread>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: kube::Api<Lenient<K>> = scope.api(client);
    let listed = match crate::cluster::list_each(&api, &ListParams::default()).await {
        Ok(listed) => listed,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok((Vec::new(), Vec::new())),
        Err(error) => return Err(Unread::from_kube(&format!("cannot list {what}"), &error, server)),
    };
    let notes = undecodable_note(what, &listed.undecodable).into_iter().collect();
    Ok((listed.items.into_iter().map(Arc::new).collect(), notes))
}

/// One note naming the objects of a kind that do not decode and are left out.
fn undecodable_note(what: &str, undecodable: &[crate::api::lenient::Undecodable]) -> Option<String> {
    if undecodable.is_empty() {
        return None;
    }
    let named: Vec<String> = undecodable.iter().map(|object| object.to_string()).collect();
    Some(format!("{} {what} do not decode and are left out: {} (capdeck doctor)", undecodable.len(), named.join(", ")))
}

/// The binding Secrets the applications consume, read concurrently (a few at a time); also
/// `capdeck credentials`' reading.
pub async fn binding_secrets(
    client: &kube::Client,
    applications: &[Arc<CAPApplication>],
) -> std::collections::HashMap<ObjectKey, SecretLookup> {
    let wanted: std::collections::BTreeSet<ObjectKey> = applications
        .iter()
        .flat_map(|app| {
            let namespace = app.namespace().unwrap_or_default();
            app.spec.btp.services.iter().map(move |service| ObjectKey::new(namespace.clone(), service.secret.clone()))
        })
        .collect();
    futures::stream::iter(wanted)
        .map(|key| async move {
            let lookup = crate::cluster::read_secret(client, &key.namespace, &key.name).await;
            (key, lookup)
        })
        .buffer_unordered(8)
        .collect()
        .await
}

/// What says which credentials the consuming Deployments run: the CAPApplicationVersions and
/// CAPTenants (which versions are in use), the Deployments of the versions' workloads and the
/// Secrets their containers reference (`envFrom`, a VCAP Secret among them), added to `objects`;
/// also `capdeck credentials`' reading. `Err` says why not (then the verdicts judge from the
/// batches alone): an object that cannot be read is not one that runs the new credentials.
pub async fn consumer_objects(
    client: &kube::Client,
    scope: &Scope,
    applications: &[Arc<CAPApplication>],
    objects: &mut crate::lookup::Objects,
) -> Result<crate::lookup::CapIndex, String> {
    use crate::api::{CAPApplicationVersion, CAPTenant, DeploymentView};
    let versions: kube::Api<Lenient<CAPApplicationVersion>> = scope.api(client);
    let tenants: kube::Api<Lenient<CAPTenant>> = scope.api(client);
    let params = ListParams::default();
    let (versions, tenants) =
        tokio::join!(crate::cluster::list_each(&versions, &params), crate::cluster::list_each(&tenants, &params));
    let unread = |what: &str, error: &kube::Error| format!("cannot list {what}: {}", describe_error(error));
    let versions = versions.map_err(|error| unread("CAPApplicationVersions", &error))?;
    let tenants = tenants.map_err(|error| unread("CAPTenants", &error))?;
    if let Some(object) =
        versions.undecodable.first().map(ToString::to_string).or(tenants.undecodable.first().map(ToString::to_string))
    {
        return Err(format!("{object} does not decode"));
    }
    let index = crate::lookup::CapIndex::new(
        applications.to_vec(),
        versions.items.into_iter().map(Arc::new),
        tenants.items.into_iter().map(Arc::new),
    );
    // Only the versions in use: the planner looks at no other.
    let mut wanted = std::collections::BTreeSet::new();
    for app in applications {
        let namespace = app.namespace().unwrap_or_default();
        for version in crate::plan::versions_in_use(app, &index) {
            for workload in version.spec.workloads.iter().filter(|workload| workload.deployment_definition.is_some()) {
                wanted.insert((namespace.clone(), workload.deployment_name(&version.name_any())));
            }
        }
    }
    let deployments: Vec<_> = futures::stream::iter(wanted)
        .map(|(namespace, name)| async move {
            let api: kube::Api<Lenient<DeploymentView>> = kube::Api::namespaced(client.clone(), &namespace);
            let read = crate::cluster::get_or_list_by_name(&api, &name).await;
            (namespace, name, read)
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let mut referenced = std::collections::BTreeSet::new();
    for (namespace, name, read) in deployments {
        match read {
            Ok(Some(Ok(deployment))) => {
                let pod = deployment.spec.as_ref().and_then(|spec| spec.template.spec.as_ref());
                for container in
                    pod.iter().flat_map(|pod| pod.containers.iter().chain(pod.init_containers.iter().flatten()))
                {
                    for source in container.env_from.iter().flatten() {
                        if let Some(secret) = &source.secret_ref {
                            referenced.insert(ObjectKey::new(namespace.clone(), secret.name.clone()));
                        }
                    }
                }
                objects.add_deployment(Arc::new(deployment));
            }
            Ok(None) => {}
            // Not known, for this Deployment's applications only (the planner says so).
            Ok(Some(Err(undecodable))) => {
                objects.unreadable_deployments.insert(ObjectKey::new(namespace, name), undecodable.describe());
            }
            Err(error) => {
                objects.unreadable_deployments.insert(ObjectKey::new(namespace, name), describe_error(&error));
            }
        }
    }
    let unknown: Vec<_> = referenced.into_iter().filter(|key| !objects.secrets.contains_key(key)).collect();
    let secrets: Vec<_> = futures::stream::iter(unknown)
        .map(|key| async move {
            let lookup = crate::cluster::read_secret(client, &key.namespace, &key.name).await;
            (key, lookup)
        })
        .buffer_unordered(8)
        .collect()
        .await;
    objects.secrets.extend(secrets);
    Ok(index)
}

/// What one context's rows are made of.
pub(super) struct Inputs<'a> {
    pub manifests: &'a Manifests,
    pub bindings_known: bool,
    /// Whether the binding Secrets were read (else no credential verdicts).
    pub credentials_checked: bool,
    /// The versions and tenants, with the Deployments in `manifests`: which credentials the Pods
    /// run (`None`: not read, the verdicts judge from the batches alone).
    pub index: Option<&'a crate::lookup::CapIndex>,
    pub leader: String,
    /// Per namespace, when engines of single namespaces lead there: the row names its own leader.
    pub leaders: BTreeMap<String, String>,
    /// What the rows of this context should say besides (left-out objects, unchecked credentials).
    pub notes: Vec<String>,
    pub now: Timestamp,
    /// How the credentials are judged (`judging::choose`: the flags, else the leading engine's).
    pub judging: &'a crate::credentials::Judging,
    /// The Freezes (`None`: not readable).
    pub freezes: Option<&'a [Arc<Freeze>]>,
    /// Each Namespace's change windows annotation (`None`: not readable).
    pub namespace_windows: Option<&'a BTreeMap<String, String>>,
    /// The leading engine's cluster change windows, as published (the row shows them).
    pub change_windows: Option<&'a str>,
}

/// Whether a Failed batch still needs someone: its Pods may still crash-loop however many batches
/// the application opened since. It stops needing one when a later batch of the same application
/// succeeded (that rollout replaced what failed), when it is undone (or being undone), or while a
/// retry is pending (the engine has it); a retry that failed again needs someone again.
fn failure_unresolved(batch: &RotationBatch, batches: &[Arc<RotationBatch>]) -> bool {
    if batch.spec.undo.is_some() || batch.retry_pending() {
        return false;
    }
    !batches.iter().any(|other| {
        other.namespace() == batch.namespace()
            && other.spec.application == batch.spec.application
            && other.metadata.creation_timestamp > batch.metadata.creation_timestamp
            && other.phase() == BatchPhase::Succeeded
    })
}

/// The row of `namespace`, made when first needed.
fn row_in<'m>(
    rows: &'m mut BTreeMap<String, FleetRow>,
    context: &str,
    namespace: &str,
    leader: &str,
) -> &'m mut FleetRow {
    rows.entry(namespace.to_string()).or_insert_with(|| FleetRow {
        context: context.to_string(),
        namespace: Some(namespace.to_string()),
        state: RowState::Open,
        why: None,
        batches: Vec::new(),
        credentials: Vec::new(),
        stalled: Vec::new(),
        out_of_date: Vec::new(),
        leader: leader.to_string(),
        notes: Vec::new(),
        freezes: None,
        change_windows: None,
    })
}

/// The Deployments of an open batch that stall or fail, as `batch/deployment`.
fn stalled_deployments(batch: &RotationBatch) -> Vec<String> {
    if batch.is_terminal() {
        return Vec::new();
    }
    let deployments = batch.status.iter().flat_map(|status| &status.deployments);
    deployments.filter(|d| d.went_wrong()).map(|d| format!("{}/{}", batch.name_any(), d.name)).collect()
}

/// The rows of one context that was read: one per namespace with something open, or one
/// `clear` row.
pub(super) fn rows(context: &str, inputs: &Inputs<'_>) -> Vec<FleetRow> {
    let manifests = inputs.manifests;
    let mut by_namespace: BTreeMap<String, FleetRow> = BTreeMap::new();
    let leader = inputs.leader.as_str();
    let bindings: Option<&[ServiceBinding]> = inputs.bindings_known.then_some(manifests.service_bindings.as_slice());
    for batch in &manifests.batches {
        let namespace = batch.namespace().unwrap_or_default();
        let phase = batch.phase();
        let waits = matches!(phase, BatchPhase::AwaitingApproval | BatchPhase::Held)
            || (phase == BatchPhase::Failed && failure_unresolved(batch, &manifests.batches));
        if waits {
            let reason = batch
                .status
                .as_ref()
                .and_then(|status| status.conditions.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.reason.clone())
                .unwrap_or_default();
            row_in(&mut by_namespace, context, &namespace, leader).batches.push(OpenBatch {
                name: batch.name_any(),
                application: batch.spec.application.clone(),
                phase: phase.to_string(),
                reason,
                state: batch.state().label(),
                window_end: batch.spec.window_end.0,
                old_credentials_revocable: bindings
                    .filter(|_| !batch.is_terminal())
                    .and_then(|bindings| crate::credentials::batch_revocation(bindings, batch)),
            });
        }
        let names = stalled_deployments(batch);
        if !names.is_empty() {
            row_in(&mut by_namespace, context, &namespace, leader).stalled.extend(names);
        }
    }
    // What runs old credentials with no open batch rolling it: never a clear context.
    let out_of_date = inputs
        .index
        .filter(|_| inputs.credentials_checked)
        .map(|index| crate::plan::out_of_date(index, &manifests.batches, manifests));
    for old in out_of_date.into_iter().flatten() {
        let namespace = old.namespace.clone();
        row_in(&mut by_namespace, context, &namespace, leader).out_of_date.push(old);
    }
    let schedule = inputs.judging.schedule(inputs.namespace_windows, inputs.freezes.unwrap_or_default());
    let overview = inputs.credentials_checked.then(|| {
        let credentials = crate::credentials::Inputs {
            applications: &manifests.applications,
            secrets: manifests,
            bindings,
            batches: &manifests.batches,
            index: inputs.index,
            now: inputs.now,
            timing: inputs.judging.timing,
        };
        crate::credentials::overview_scheduled(&credentials, &schedule)
    });
    for report in overview.into_iter().flat_map(|overview| overview.credentials) {
        if matches!(report.verdict, Verdict::AtRisk | Verdict::Unsafe) {
            row_in(&mut by_namespace, context, &report.namespace, leader).credentials.push(CredentialRisk {
                secret: report.secret.clone(),
                verdict: report.verdict.as_str().to_string(),
                reason: report.reasons.last().cloned().unwrap_or_default(),
            });
        }
    }
    let mut rows: Vec<FleetRow> = by_namespace.into_values().collect();
    if rows.is_empty() {
        let mut clear = FleetRow::problem(context, RowState::Clear, String::new());
        clear.why = None;
        clear.leader = inputs.leader.clone();
        rows.push(clear);
    }
    for row in &mut rows {
        if let Some(leader) = row.namespace.as_ref().and_then(|namespace| inputs.leaders.get(namespace)) {
            row.leader.clone_from(leader);
        }
        row.notes.clone_from(&inputs.notes);
        row.freezes = inputs.freezes.map(|freezes| frozen_over(freezes, row.namespace.as_deref(), inputs));
        row.change_windows = inputs.change_windows.map(str::to_string);
    }
    rows
}

/// The freezes in force over `namespace` (the cluster's, the namespace's, its applications'), or
/// anywhere in the context when `None`; a cluster freeze counts only in the Lease's namespace.
fn frozen_over(freezes: &[Arc<Freeze>], namespace: Option<&str>, inputs: &Inputs<'_>) -> Vec<ActiveFreeze> {
    let mut found: Vec<ActiveFreeze> = freezes
        .iter()
        .filter(|freeze| freeze.active_at(inputs.now))
        .filter(|freeze| {
            let own = freeze.namespace().unwrap_or_default();
            match &freeze.spec.scope {
                // Honoured where the Lease lives (the judging's, chosen with it).
                FreezeScope::Cluster => inputs.judging.lease_namespace.as_deref() == Some(own.as_str()),
                FreezeScope::Namespace | FreezeScope::Application => namespace.is_none_or(|viewed| own == viewed),
                FreezeScope::Other(_) => false,
            }
        })
        .map(|freeze| ActiveFreeze::of(freeze))
        .collect();
    found.sort_by_key(|freeze| freeze.until);
    found
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("time")
    }

    fn batch(namespace: &str, name: &str, app: &str, created: i64, status: serde_json::Value) -> Arc<RotationBatch> {
        Arc::new(crate::api::rotation_batch::testing::batch(json!({
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": at(created).to_string()},
            "spec": {"application": app, "windowEnd": at(created + 60).to_string()},
            "status": status,
        })))
    }

    fn inputs(manifests: &Manifests) -> Inputs<'_> {
        Inputs {
            manifests,
            bindings_known: false,
            credentials_checked: true,
            index: None,
            leader: "engine-a".into(),
            leaders: BTreeMap::new(),
            notes: Vec::new(),
            now: at(NOW),
            judging: &JUDGING,
            freezes: Some(&[]),
            namespace_windows: None,
            change_windows: None,
        }
    }

    /// The defaults, with the Lease in capdeck-system.
    static JUDGING: std::sync::LazyLock<crate::credentials::Judging> =
        std::sync::LazyLock::new(|| crate::credentials::Judging {
            lease_namespace: Some("capdeck-system".into()),
            ..crate::credentials::Judging::default()
        });

    /// One row per namespace with something open; what is closed or superseded is not open.
    #[test]
    fn rows_per_namespace_with_something_open() {
        let phase = |phase: &str, reason: &str| json!({"phase": phase, "conditions": [{"type": "Ready", "status": "False", "reason": reason}]});
        let rolling = json!({"phase": "RollingOut", "deployments": [
            {"name": "srv", "version": "v1", "workload": "srv", "action": "Restart", "state": "Stalled"},
            {"name": "router", "version": "v1", "workload": "router", "action": "Restart", "state": "Rolling"}]});
        let manifests = Manifests {
            batches: vec![
                batch("shop", "shop-a", "shop", NOW - 100, phase("AwaitingApproval", "ApprovalRequired")),
                batch("shop", "shop-old", "shop", NOW - 9000, phase("Failed", "RolloutFailed")),
                batch("hr", "hr-a", "hr", NOW - 50, phase("Held", "RolloutFailureGuard")),
                batch("hr", "hr-b", "other", NOW - 50, rolling),
                batch("travel", "travel-a", "travel", NOW - 50, phase("Failed", "RolloutFailed")),
                batch("done", "done-a", "done", NOW - 50, phase("Succeeded", "Succeeded")),
                batch("done", "done-old", "done", NOW - 900, phase("Failed", "RolloutFailed")),
            ],
            ..Manifests::default()
        };
        let rows = rows("prod", &inputs(&manifests));
        let summary: Vec<(String, String, usize)> =
            rows.iter().map(|row| (row.namespace_text().to_string(), row.summary(), row.stalled.len())).collect();
        assert_eq!(
            summary,
            vec![
                ("hr".to_string(), "1 held".to_string(), 1),
                ("shop".to_string(), "1 awaiting, 1 failed".to_string(), 0),
                ("travel".to_string(), "1 failed".to_string(), 0),
            ],
            "shop-old failed and nothing of shop succeeded since: still open (its Pods may crash-loop); \
             done-old was followed by done-a, which succeeded; done-a is closed"
        );
        assert_eq!(rows[0].stalled, vec!["hr-b/srv".to_string()]);
        assert!(rows.iter().all(|row| row.leader == "engine-a" && row.context == "prod"));
    }

    /// Secrets not read in time: no verdicts (not "missing", hence unsafe), and every row says so.
    #[test]
    fn unchecked_credentials_are_a_note_not_a_verdict() {
        let app: Arc<CAPApplication> = Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "shop", "namespace": "shop"},
                "spec": {"btpAppName": "shop", "providerSubaccountId": "p",
                         "btp": {"services": [{"name": "uaa", "class": "xsuaa", "secret": "shop-uaa"}]}},
            }))
            .expect("app"),
        );
        let manifests = Manifests { applications: vec![app], ..Manifests::default() };
        let checked = rows("prod", &inputs(&manifests));
        assert_eq!(checked[0].credentials_text(), "1 unsafe", "a missing Secret is unsafe when read: {checked:?}");
        let mut unchecked = inputs(&manifests);
        unchecked.credentials_checked = false;
        unchecked.notes = vec!["credentials not checked: …".into()];
        let rows = rows("prod", &unchecked);
        assert_eq!((rows.len(), rows[0].state, rows[0].credentials_text()), (1, RowState::Clear, "-".to_string()));
        assert_eq!(rows[0].why_text(), "credentials not checked: …");
    }

    /// travel-kvntt in the demo: Failed, then a newer batch of travel opened. It stays until a
    /// later batch of travel succeeds, or it is retried or undone.
    #[test]
    fn a_failed_batch_stays_until_resolved() {
        let failed =
            json!({"phase": "Failed", "conditions": [{"type": "Ready", "status": "False", "reason": "RolloutFailed"}]});
        let collecting = json!({"phase": "Collecting"});
        let succeeded = json!({"phase": "Succeeded"});
        let open = |batches: Vec<Arc<RotationBatch>>| {
            let manifests = Manifests { batches, ..Manifests::default() };
            rows("prod", &inputs(&manifests))
                .iter()
                .flat_map(|row| row.batches.iter().map(|b| b.name.clone()))
                .collect::<Vec<_>>()
        };
        let kvntt = || batch("travel", "travel-kvntt", "travel", NOW - 600, failed.clone());
        assert_eq!(
            open(vec![kvntt(), batch("travel", "travel-next", "travel", NOW - 60, collecting.clone())]),
            ["travel-kvntt"]
        );
        assert!(open(vec![kvntt(), batch("travel", "travel-next", "travel", NOW - 60, succeeded.clone())]).is_empty());
        assert_eq!(
            open(vec![kvntt(), batch("travel", "travel-older", "travel", NOW - 6000, succeeded)]),
            ["travel-kvntt"],
            "only a later success resolves it"
        );
        let with_spec = |extra: serde_json::Value, status: serde_json::Value| {
            let mut value = serde_json::to_value(&*kvntt()).expect("json");
            for (key, field) in extra.as_object().into_iter().flatten() {
                value["spec"][key] = field.clone();
            }
            value["status"] = status;
            Arc::new(serde_json::from_value::<RotationBatch>(value).expect("batch"))
        };
        let action = json!({"by": "dave", "at": at(NOW - 30).to_string(), "reason": "CHG-1"});
        assert!(open(vec![with_spec(json!({"undo": action}), failed.clone())]).is_empty(), "undone");
        assert!(open(vec![with_spec(json!({"retry": action}), failed.clone())]).is_empty(), "a retry pending");
        let mut retried_again = failed.clone();
        retried_again["retriedAt"] = json!(at(NOW - 30).to_string());
        assert_eq!(
            open(vec![with_spec(json!({"retry": action}), retried_again)]),
            ["travel-kvntt"],
            "the retry was carried out and failed again"
        );
    }

    /// Each row names the freezes over its namespace: its own, its applications', and a cluster
    /// freeze only from the Lease's namespace; a whole-context row names those anywhere.
    #[test]
    fn rows_name_the_freezes_over_them() {
        let freeze = |namespace: &str, scope: &str, until: i64, lifted: bool| -> Arc<Freeze> {
            let mut object = json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
                "metadata": {"name": "f", "namespace": namespace},
                "spec": {"scope": scope, "application": "shop", "until": at(NOW + until).to_string(),
                         "frozen": {"by": "alice", "at": at(NOW - 60).to_string(), "reason": "release"}}});
            if lifted {
                object["spec"]["lifted"] = json!({"by": "bob", "at": at(NOW - 30).to_string()});
            }
            Arc::new(serde_json::from_value(object).expect("freeze"))
        };
        let freezes = vec![
            freeze("shop", "Namespace", 3600, false),
            freeze("shop", "Application", 7200, false),
            freeze("hr", "Namespace", 3600, true),
            freeze("capdeck-system", "Cluster", 1800, false),
            freeze("hr", "Cluster", 1800, false),
        ];
        let phase = json!({"phase": "Held", "conditions": [{"type": "Ready", "status": "False", "reason": "Held"}]});
        let manifests = Manifests {
            batches: vec![
                batch("shop", "shop-a", "shop", NOW - 100, phase.clone()),
                batch("hr", "hr-a", "hr", NOW - 100, phase),
            ],
            ..Manifests::default()
        };
        let mut frozen = inputs(&manifests);
        frozen.freezes = Some(&freezes);
        frozen.change_windows = Some("Mon-Fri 22:00-05:00 UTC");
        let now = at(NOW);
        let found = rows("prod", &frozen);
        let texts: Vec<(String, String, String)> = found
            .iter()
            .map(|row| (row.namespace_text().to_string(), row.frozen_text(now), row.next_window_text(now)))
            .collect();
        // NOW is Friday 08:00 UTC: the windows open at 22:00.
        assert_eq!(
            texts,
            [
                ("hr".to_string(), "cluster until 08:30Z".to_string(), "in 14h".to_string()),
                ("shop".to_string(), "3 freezes".to_string(), "in 14h".to_string()),
            ],
            "hr's own freeze is lifted; the cluster freeze in hr is no cluster freeze"
        );
        let shop = found[1].freezes.as_ref().expect("read");
        assert_eq!(shop[0].target, "cluster", "soonest end first");
        let nothing = Manifests::default();
        let mut clear = inputs(&nothing);
        clear.freezes = Some(&freezes);
        assert_eq!(rows("prod", &clear)[0].frozen_text(now), "3 freezes", "the context's, anywhere");
        clear.freezes = None;
        assert_eq!(rows("prod", &clear)[0].frozen_text(now), "?", "not readable");
        clear.freezes = Some(&[]);
        assert_eq!(rows("prod", &clear)[0].frozen_text(now), "no");
        assert_eq!(rows("prod", &clear)[0].next_window_text(now), "-", "no cluster windows");
    }

    #[test]
    fn a_context_with_nothing_open_is_one_clear_row() {
        let manifests = Manifests::default();
        let rows = rows("staging", &inputs(&manifests));
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].state, rows[0].namespace.as_deref(), rows[0].leader.as_str()),
            (RowState::Clear, None, "engine-a")
        );
    }
}
