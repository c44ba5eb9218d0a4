//! `capdeck credentials [-n NS | -A] [-f PATH ...] [-o table|wide|json|yaml]`: when each consumed
//! binding Secret's credentials rotate, when the old ones die, and whether a batch ends first.

use std::process::ExitCode;
use std::sync::Arc;

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;

use crate::api::freeze::CLUSTER_FREEZE_NAME;
use crate::api::lenient::Lenient;
use crate::api::service_binding::GROUP;
use crate::api::{Freeze, RotationBatch};
use crate::cli::CredentialsArgs;
use crate::cluster::{ClusterTarget, Scope, describe_error};
use crate::credentials::{CredentialsOverview, Inputs, overview_scheduled};
use crate::judging::{Chosen, choose};
use crate::leadership::{LeaderView, PublishedSettings};
use crate::manifest::Manifests;
use crate::output::Table;
use crate::plan::CapIndex;

pub async fn run(cluster: &ClusterTarget, args: &CredentialsArgs) -> anyhow::Result<ExitCode> {
    args.output.refuse_name("credentials").map_err(|error| super::UsageError(error.to_string()))?;
    let world = if args.files.is_empty() {
        live(cluster).await?
    } else {
        match crate::manifest::load(&args.files) {
            Ok(manifests) => {
                for problem in &manifests.problems {
                    crate::safe_eprintln!("warning: {}", problem.message);
                }
                // In manifests, ServiceBinding information exists when some binding is there.
                let bindings_known = !manifests.service_bindings.is_empty();
                let index = CapIndex::new(
                    manifests.applications.clone(),
                    manifests.versions.iter().cloned(),
                    manifests.tenants.iter().cloned(),
                );
                World { manifests, bindings_known, index: Some(index), ..World::default() }
            }
            Err(error) => {
                crate::safe_eprintln!("error: {error}");
                return Ok(ExitCode::from(1));
            }
        }
    };
    let flags = crate::judging::Flags {
        window: args.rollout_delay,
        expected_rollout: args.expected_rollout,
        change_windows: args.change_windows.as_ref().and_then(|windows| windows.0.as_ref()),
    };
    let Chosen { judging, timing_source, windows_source } =
        choose(flags, world.leader_settings.as_ref(), world.lease_namespace.as_deref());
    let now = Timestamp::now();
    let result = judge(&world, &judging, now);
    let out_of_date = out_of_date(&world);
    let mut document = serde_json::to_value(&result)?;
    if let (Some(object), Some(out_of_date)) = (document.as_object_mut(), &out_of_date) {
        object.insert("outOfDate".into(), serde_json::to_value(out_of_date)?);
    }
    let text = crate::output::render_object(&args.output, "credentials", &document, |wide, headers| {
        let mut text = table(&result, now, wide, headers);
        for old in out_of_date.iter().flatten() {
            text.push_str(&format!("\nold credentials: {}", old.describe()));
        }
        if out_of_date.as_ref().is_some_and(|old| !old.is_empty()) {
            text.push('\n');
        }
        text
    })
    .map_err(|error| super::UsageError(error.to_string()))?;
    if result.credentials.is_empty() && !matches!(args.output.format, crate::output::OutputFormat::Json) {
        let elsewhere = if args.files.is_empty() && !cluster.all_namespaces {
            " (capdeck credentials -A looks in every namespace)"
        } else {
            ""
        };
        crate::safe_eprintln!("No CAPApplication consumes a binding Secret here.{elsewhere}");
    }
    // An empty table is a header alone: the line above says it all.
    let empty_table = result.credentials.is_empty()
        && matches!(args.output.format, crate::output::OutputFormat::Table | crate::output::OutputFormat::Wide);
    if !empty_table {
        crate::output::print(&text)?;
    }
    say_notes(&world, &result, &timing_source, &windows_source);
    Ok(ExitCode::SUCCESS)
}

/// The notes under the verdicts (stderr): what they were judged with, and what could not be read.
fn say_notes(world: &World, result: &CredentialsOverview, timing_source: &str, windows_source: &str) {
    // Said once: both halves would otherwise end in it.
    const NO_LEADER: &str = "no leading engine publishes its settings";
    let windows_source = match windows_source.strip_suffix(&format!(" ({NO_LEADER})")) {
        Some(short) if timing_source.contains(NO_LEADER) => short,
        _ => windows_source,
    };
    crate::safe_eprintln!("note: margins judged with {timing_source}; {windows_source}");
    match &world.namespace_windows {
        Err(why) => crate::safe_eprintln!(
            "note: namespace windows not readable ({why}): judged with the applications' and the cluster's windows"
        ),
        // Which namespaces' own windows counted (where an application sets none of its own).
        Ok(found) if !found.is_empty() => {
            const SHOWN: usize = 5;
            let names: Vec<&str> = found.keys().map(String::as_str).take(SHOWN).collect();
            let more = found.len().saturating_sub(SHOWN);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            crate::safe_eprintln!(
                "note: namespace change windows (capdeck.dev/change-windows) of {}{more}",
                names.join(", ")
            );
        }
        Ok(_) => {}
    }
    if let Some(why) = &world.freezes.missing {
        crate::safe_eprintln!("note: no freeze information ({why}): judged as if nothing were frozen");
    }
    if !result.service_bindings_known {
        crate::safe_eprintln!(
            "note: no ServiceBinding information (the {GROUP} CRD is not installed, or not readable with these \
             credentials): rotation times and old credentials are unknown"
        );
    }
    if result.due_within_24h > 1 {
        crate::safe_eprintln!("note: {} bindings rotate within 24h: expect as many batches", result.due_within_24h);
    }
}

fn table(result: &CredentialsOverview, now: Timestamp, wide: bool, headers: bool) -> String {
    let mut table = Table::with_wide(
        &[
            "NAMESPACE",
            "SECRET",
            "APPLICATIONS",
            "SOURCE",
            "FORMAT",
            "NEXT ROTATION",
            "OLD CREDS DIE",
            "MARGIN",
            "VERDICT",
        ],
        &["BINDING", "POLICY", "REASONS"],
    );
    // Times left as every table and the console say them (`in 6d23h`), not as Go durations.
    let until = |time: Timestamp| crate::output::signed_duration(time.as_second() - now.as_second());
    for report in &result.credentials {
        table.row(vec![
            report.namespace.clone(),
            report.secret.clone(),
            report.applications.join(","),
            report.source.label().into(),
            report.format.as_str().into(),
            report
                .rotation
                .as_ref()
                .and_then(|rotation| rotation.next_due)
                .map_or_else(|| "-".into(), |due| format!("in {}", until(due))),
            report.earliest_revocation().map_or_else(|| "-".into(), |time| format!("in {}", until(time))),
            report.margin_seconds.map_or_else(|| "-".into(), crate::output::signed_duration),
            report.verdict.as_str().into(),
            report.service_binding.clone().unwrap_or_else(|| "-".into()),
            report.rotation.as_ref().map_or_else(|| "-".into(), crate::credentials::Rotation::policy_text),
            report.reasons.join("; "),
        ]);
    }
    table.render_with(wide, headers)
}

/// The verdicts over `world`, as the leader decides (`--on-deadline`; an engine that does not
/// publish it asks).
fn judge(world: &World, judging: &crate::credentials::Judging, now: Timestamp) -> CredentialsOverview {
    let manifests = &world.manifests;
    let inputs = Inputs {
        applications: &manifests.applications,
        secrets: manifests,
        bindings: world.bindings_known.then_some(manifests.service_bindings.as_slice()),
        batches: &manifests.batches,
        index: world.index.as_ref(),
        now,
        timing: judging.timing,
    };
    overview_scheduled(&inputs, &judging.schedule(world.namespace_windows.as_ref().ok(), &world.freezes.found))
}

/// The verdicts `capdeck credentials` gives in the cluster, with the leading engine's settings
/// (`capdeck doctor` says the same), and the Deployments that run old credentials with no open batch rolling them
/// (`None`: the versions or Deployments could not be read), from one read of the cluster.
pub(super) async fn live_judged(
    cluster: &ClusterTarget,
) -> anyhow::Result<(CredentialsOverview, Option<Vec<crate::plan::OutOfDate>>)> {
    let world = live(cluster).await?;
    let chosen =
        choose(crate::judging::Flags::default(), world.leader_settings.as_ref(), world.lease_namespace.as_deref());
    Ok((judge(&world, &chosen.judging, Timestamp::now()), out_of_date(&world)))
}

/// Which Deployments run old credentials with no open batch rolling them (`None`: the versions
/// were not read).
fn out_of_date(world: &World) -> Option<Vec<crate::plan::OutOfDate>> {
    world.index.as_ref().map(|index| crate::plan::out_of_date(index, &world.manifests.batches, &world.manifests))
}

/// What the verdicts are judged from: the objects (gathered into the shape manifests have),
/// whether ServiceBindings are known, and what a batch may wait for.
struct World {
    manifests: Manifests,
    bindings_known: bool,
    /// The versions and tenants: which Deployments consume a Secret (`None`: not readable).
    index: Option<CapIndex>,
    /// The leading engine's published settings (what the engine decides with).
    leader_settings: Option<PublishedSettings>,
    /// The namespace of the leading engine's Lease (where a cluster freeze is honoured).
    lease_namespace: Option<String>,
    /// Each Namespace's change windows annotation, or why they could not be read.
    namespace_windows: Result<BTreeMap<String, String>, String>,
    freezes: Freezes,
}

impl Default for World {
    /// Manifests: no Namespaces and no Freezes are read from files.
    fn default() -> Self {
        Self {
            manifests: Manifests::default(),
            bindings_known: false,
            index: None,
            leader_settings: None,
            lease_namespace: None,
            namespace_windows: Ok(BTreeMap::new()),
            freezes: Freezes::default(),
        }
    }
}

/// The Freezes read, and why some or all could not be.
#[derive(Default)]
pub(super) struct Freezes {
    pub found: Vec<Arc<Freeze>>,
    /// Why there is no (or only partial) freeze information: the CRD is missing, or not readable.
    pub missing: Option<String>,
}

/// The Freezes in `scope`, and the cluster freeze in the Lease's namespace when that lies outside
/// the scope (only there is one honoured). A missing CRD or a refusal is said, never an error.
pub(super) async fn read_freezes(client: &kube::Client, scope: &Scope, lease_namespace: Option<&str>) -> Freezes {
    let api: kube::Api<Lenient<Freeze>> = scope.api(client);
    let mut found = match crate::cluster::list_each(&api, &ListParams::default()).await {
        Ok(listed) => {
            super::warn_undecodable("Freeze", &listed.undecodable);
            listed.items
        }
        Err(error) => return Freezes { found: Vec::new(), missing: Some(freezes_unreadable(&error, &scope.label())) },
    };
    let mut missing = None;
    if let (Scope::Namespace(viewed), Some(lease)) = (scope, lease_namespace)
        && viewed != lease
    {
        let api: kube::Api<Lenient<Freeze>> = kube::Api::namespaced(client.clone(), lease);
        match api.get_opt(CLUSTER_FREEZE_NAME).await {
            Ok(freeze) => match freeze.map(Lenient::into_result) {
                Some(Ok(freeze)) => found.push(freeze),
                Some(Err(undecodable)) => super::warn_undecodable("Freeze", std::slice::from_ref(&undecodable)),
                None => {}
            },
            Err(error) => {
                missing = Some(freezes_unreadable(&error, &format!("namespace {lease} (the cluster freeze)")))
            }
        }
    }
    Freezes { found: found.into_iter().map(Arc::new).collect(), missing }
}

fn freezes_unreadable(error: &kube::Error, place: &str) -> String {
    match error {
        kube::Error::Api(status) if status.code == 404 => {
            "the Freeze CRD is not installed: the Helm chart installs it, or capdeck crds --only capdeck | kubectl apply --server-side -f -".into()
        }
        kube::Error::Api(status) if status.code == 403 => format!("you may not read freezes.capdeck.dev in {place}"),
        other => format!("cannot read freezes.capdeck.dev in {place}: {}", describe_error(other)),
    }
}

/// The namespace of the leading engine's Lease (`namespace/name`), when one leads.
pub(super) fn lease_namespace(leader: &LeaderView) -> Option<String> {
    match leader {
        LeaderView::Leads { lease, .. } => lease.split_once('/').map(|(namespace, _)| namespace.to_string()),
        _ => None,
    }
}

/// Everything from the cluster: the objects, the leader's settings, Namespace windows, Freezes.
async fn live(cluster: &ClusterTarget) -> anyhow::Result<World> {
    let connection = cluster.connect().await?;
    let scope = cluster.scope(&connection);
    let client = &connection.client;
    // At once: a server that does not answer costs one --request-timeout, not one per request.
    let (leader, applications, namespace_windows) = tokio::join!(
        crate::leadership::find(client, &scope, &[]),
        super::tenants::list(client, &scope, "CAPApplication"),
        crate::judging::read_namespace_windows(client, &scope),
    );
    let mut manifests = Manifests { applications: applications?, ..Manifests::default() };
    let lease_namespace = lease_namespace(&leader);
    let batches: kube::Api<Lenient<RotationBatch>> = scope.api(client);
    let params = ListParams::default();
    let (batches, freezes, bindings) = tokio::join!(
        crate::cluster::list_each(&batches, &params),
        read_freezes(client, &scope, lease_namespace.as_deref()),
        crate::cluster::list_service_bindings(client, &scope),
    );
    manifests.batches = match batches {
        Ok(listed) => {
            super::warn_undecodable("RotationBatch", &listed.undecodable);
            listed.items.into_iter().map(Arc::new).collect()
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(error) => anyhow::bail!("cannot list RotationBatches: {}", describe_error(&error)),
    };
    manifests.lookup.secrets = crate::fleet::binding_secrets(client, &manifests.applications).await;
    let index =
        match crate::fleet::consumer_objects(client, &scope, &manifests.applications, &mut manifests.lookup).await {
            Ok(index) => Some(index),
            Err(why) => {
                crate::safe_eprintln!(
                    "warning: which credentials the Deployments run is not known ({why}): verdicts judge from the \
                 batches alone"
                );
                None
            }
        };
    let bindings_known = match bindings {
        Ok(Some(bindings)) => {
            super::warn_undecodable("ServiceBinding", &bindings.undecodable);
            manifests.service_bindings = bindings.items;
            true
        }
        Ok(None) => false,
        Err(why) => {
            crate::safe_eprintln!("warning: cannot list ServiceBindings: {why}");
            false
        }
    };
    Ok(World {
        manifests,
        bindings_known,
        index,
        leader_settings: leader.settings().cloned(),
        lease_namespace,
        namespace_windows,
        freezes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::{CredentialReport, Format, Rotation, Source, Verdict};

    /// Times left read as in every table and the console (`in 6d23h`), not as Go durations
    /// (`167h57m49s`); a margin below zero keeps its sign.
    #[test]
    fn times_left_read_as_the_console_says_them() {
        let now = Timestamp::from_second(1_800_000_000).expect("now");
        let due = Timestamp::from_second(now.as_second() + 167 * 3600 + 57 * 60 + 49).expect("due");
        let report = CredentialReport {
            namespace: "shop".into(),
            secret: "uaa-bind".into(),
            applications: vec!["bookshop".into()],
            source: Source::SapBtp,
            service_binding: Some("uaa-bind".into()),
            format: Format::Metadata,
            rotation: Some(Rotation {
                enabled: true,
                frequency: Some("168h".into()),
                rotated_binding_ttl: Some("1h".into()),
                last_rotation: None,
                next_due: Some(due),
                next_due_latest: None,
                in_progress: false,
            }),
            old_credentials: Vec::new(),
            certificates: Vec::new(),
            margin_seconds: Some(-3003),
            verdict: Verdict::Unsafe,
            reasons: Vec::new(),
        };
        let overview = CredentialsOverview { credentials: vec![report], ..CredentialsOverview::default() };
        let text = table(&overview, now, false, true);
        assert!(text.contains("in 6d23h") && text.contains("-50m") && !text.contains("167h"), "{text}");
    }
}
