//! `capdeck credentials [-n NS | -A] [-f PATH ...] [-o table|wide|json|yaml]`: when each consumed
//! binding Secret's credentials rotate, when the old ones die, and whether a batch ends first.

use std::process::ExitCode;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;

use crate::api::RotationBatch;
use crate::api::service_binding::GROUP;
use crate::cli::CredentialsArgs;
use crate::cluster::leader::PublishedSettings;
use crate::cluster::{ClusterArgs, describe_error};
use crate::credentials::{CredentialsOverview, Inputs, choose_timing, human_signed, overview};
use crate::manifest::Manifests;
use crate::output::Table;

pub async fn run(cluster: &ClusterArgs, args: &CredentialsArgs) -> anyhow::Result<ExitCode> {
    args.output.refuse_name("credentials").map_err(|error| super::UsageError(error.to_string()))?;
    let (manifests, bindings_known, leader_settings) = if args.files.is_empty() {
        live(cluster).await?
    } else {
        match crate::manifest::load(&args.files) {
            Ok(manifests) => {
                for problem in &manifests.problems {
                    crate::safe_eprintln!("warning: {}", problem.message);
                }
                // In manifests, ServiceBinding information exists when some binding is there.
                let known = !manifests.service_bindings.is_empty();
                (manifests, known, None)
            }
            Err(error) => {
                crate::safe_eprintln!("error: {error}");
                return Ok(ExitCode::from(1));
            }
        }
    };
    let (timing, timing_source) = choose_timing(args.rollout_delay, args.expected_rollout, leader_settings.as_ref());
    let now = Timestamp::now();
    let result = overview(&Inputs {
        applications: &manifests.applications,
        secrets: &manifests,
        bindings: bindings_known.then_some(manifests.service_bindings.as_slice()),
        batches: &manifests.batches,
        now,
        timing,
    });
    let document = serde_json::to_value(&result)?;
    let text = crate::output::render_object(&args.output, "credentials", &document, |wide, headers| {
        table(&result, now, wide, headers)
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
    crate::output::print(&text)?;
    crate::safe_eprintln!("note: margins judged with {timing_source}");
    if !result.service_bindings_known {
        crate::safe_eprintln!(
            "note: no ServiceBinding information (the {GROUP} CRD is not installed, or not readable with these \
             credentials): rotation times and old credentials are unknown"
        );
    }
    if result.due_within_24h > 1 {
        crate::safe_eprintln!("note: {} bindings rotate within 24h: expect as many batches", result.due_within_24h);
    }
    Ok(ExitCode::SUCCESS)
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
    let until = |time: Timestamp| human_signed(time.as_second() - now.as_second());
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
            report.margin_seconds.map_or_else(|| "-".into(), human_signed),
            report.verdict.as_str().into(),
            report.service_binding.clone().unwrap_or_else(|| "-".into()),
            report.rotation.as_ref().map_or_else(|| "-".into(), crate::credentials::Rotation::policy_text),
            report.reasons.join("; "),
        ]);
    }
    table.render_with(wide, headers)
}

/// The objects from the cluster, gathered into the shape manifests have.
/// The objects in the cluster, whether ServiceBindings are known, and the leading engine's
/// published settings (what the engine decides with).
async fn live(cluster: &ClusterArgs) -> anyhow::Result<(Manifests, bool, Option<PublishedSettings>)> {
    let connection = cluster.connect().await?;
    let scope = cluster.scope(&connection);
    let client = &connection.client;
    // At once: a server that does not answer costs one --request-timeout, not one per request.
    let (leader, applications) = tokio::join!(
        crate::cluster::leader::find(client, &scope, &[]),
        super::tenants::list(client, &scope, "CAPApplication")
    );
    let mut manifests = Manifests { applications: applications?, ..Manifests::default() };
    let batches: kube::Api<RotationBatch> = scope.api(client);
    manifests.batches = match batches.list(&ListParams::default()).await {
        Ok(list) => list.items.into_iter().map(Arc::new).collect(),
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(error) => anyhow::bail!("cannot list RotationBatches: {}", describe_error(&error)),
    };
    manifests.lookup.secrets = crate::fleet::binding_secrets(client, &manifests.applications).await;
    let known = match crate::cluster::list_service_bindings(client, &scope).await {
        Ok(Some(bindings)) => {
            manifests.service_bindings = bindings;
            true
        }
        Ok(None) => false,
        Err(why) => {
            crate::safe_eprintln!("warning: cannot list ServiceBindings: {why}");
            false
        }
    };
    Ok((manifests, known, leader.settings().cloned()))
}
