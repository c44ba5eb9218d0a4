//! `capdeck doctor`: what stands between this context and a working capdeck — CRDs, permissions,
//! the Lease and its holder, a Go CAP Operator rolling the same Deployments, binding Secrets
//! capdeck cannot read, the effective ROLLOUT_DELAY. One line per finding; exit 1 when one blocks.

use std::process::ExitCode;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams};
use serde::Serialize;
use serde_json::{Value, json};

use crate::api::DeploymentView;
use crate::api::change_window::{ANNOTATION_CHANGE_WINDOWS, AppliedWindows};
use crate::api::lenient::Lenient;
use crate::api::rotation_batch::ReadyReason;
use crate::api::rotation_batch::state::{ApprovalNeed, BatchState};
use crate::api::{CAPApplication, CAPApplicationVersion, CAPTenant, FreezeScope};
use crate::cli::DoctorArgs;
use crate::cluster::{ClusterTarget, Connection, Scope, can_i, describe_error};
use crate::engine::config::humanize;
use crate::engine::settings::EngineSettings;
use crate::leadership::LeaderView;
use crate::output::Table;

mod install;
use install::{crds, decoded, go_operator, lease, permissions, undecodable};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Fail => "FAIL",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub check: String,
    pub status: Status,
    pub detail: String,
}

fn finding(check: &str, status: Status, detail: impl Into<String>) -> Finding {
    Finding { check: check.into(), status, detail: detail.into() }
}

/// The engine's and the console's permissions: (verb, group, resource).
const ENGINE_NEEDS: &[(&str, &str, &str)] = &[
    ("list", "sme.sap.com", "capapplications"),
    ("watch", "sme.sap.com", "capapplications"),
    ("list", "sme.sap.com", "capapplicationversions"),
    ("list", "sme.sap.com", "captenants"),
    ("list", "sme.sap.com", "captenantoperations"),
    ("list", "capdeck.dev", "rotationbatches"),
    ("create", "capdeck.dev", "rotationbatches"),
    ("update", "capdeck.dev", "rotationbatches"),
    ("patch", "capdeck.dev", "rotationbatches/status"),
    ("list", "", "secrets"),
    ("create", "", "secrets"),
    ("delete", "", "secrets"),
    ("list", "apps", "deployments"),
    ("update", "apps", "deployments"),
    ("create", "events.k8s.io", "events"),
];

/// The checks that ask the API server, once it answers. `explicit_delay`: the window was given
/// (`--rollout-delay` or `$ROLLOUT_DELAY`), so it is checked instead of the leading engine's.
async fn checks(connection: &Connection, scope: &Scope, engine: &EngineSettings, explicit_delay: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    match crate::cluster::who_am_i(&connection.client).await {
        Ok(user) => out.push(finding("identity", Status::Ok, format!("the API server says you are {user}"))),
        Err(why) => out.push(finding(
            "identity",
            Status::Fail,
            format!(
                "the API server at {} does not say who you are ({why}): check that it is up and that the \
                 credentials of context {} are valid (kubectl auth whoami)",
                connection.server, connection.context
            ),
        )),
    }
    let crd_findings = crds(connection).await;
    let crds_missing = crd_findings.iter().any(|f| f.status == Status::Fail);
    out.extend(crd_findings);
    out.extend(permissions(connection, scope).await);
    out.extend(undecodable(connection, scope).await);
    let (config, delay_warning) = engine.config(&connection.default_namespace);
    let fallback = [crate::api::ObjectKey::new(&config.lease.namespace, &config.lease.name)];
    let leader = crate::leadership::find(&connection.client, scope, &fallback).await;
    out.extend(lease(connection, &config.lease, scope, &leader).await);
    out.extend(go_operator(connection, scope).await);
    if crds_missing {
        out.push(finding("binding secrets", Status::Warn, "not checked until the CRDs are installed"));
    } else {
        out.extend(binding_secrets(connection, scope).await);
    }
    let (window, delay) = rollout_delay(config.rollout_delay, explicit_delay, delay_warning, leader.settings());
    out.extend(service_binding_ttls(connection, scope, window).await);
    let lease_namespace = super::credentials::lease_namespace(&leader);
    let applications: Result<Vec<CAPApplication>, kube::Error> = decoded(&connection.client, scope).await;
    out.extend(nothing_here(scope, &applications));
    out.extend(change_windows(connection, scope, &applications, leader.settings()).await);
    out.extend(freezes(connection, scope, lease_namespace.as_deref(), &config.lease.namespace).await);
    out.push(waiting_batches(connection, scope).await);
    out.extend(notifications(connection, scope, engine).await);
    out.push(delay);
    out
}

/// The window doctor judges with, and its finding: the one given (`--rollout-delay`, else
/// `$ROLLOUT_DELAY`), else the leading engine's — what the batches here actually wait — else 1h.
fn rollout_delay(
    own: std::time::Duration,
    explicit: bool,
    warning: Option<String>,
    leader: Option<&crate::leadership::PublishedSettings>,
) -> (std::time::Duration, Finding) {
    const CHECK: &str = "rollout delay";
    if let Some(warning) = warning {
        return (own, finding(CHECK, Status::Warn, warning));
    }
    match (explicit, leader.map(crate::leadership::PublishedSettings::rollout_delay)) {
        (true, Some(theirs)) if theirs != own => (
            own,
            finding(
                CHECK,
                Status::Ok,
                format!(
                    "{} from --rollout-delay or $ROLLOUT_DELAY, checked instead of the leading engine's {}",
                    humanize(own),
                    humanize(theirs)
                ),
            ),
        ),
        (true, theirs) => (
            own,
            finding(
                CHECK,
                Status::Ok,
                format!(
                    "{} from --rollout-delay or $ROLLOUT_DELAY{}",
                    humanize(own),
                    if theirs.is_some() { ", as the leading engine runs" } else { "" }
                ),
            ),
        ),
        (false, Some(theirs)) => (
            theirs,
            finding(CHECK, Status::Ok, format!("{}, the leading engine's (published on its Lease)", humanize(theirs))),
        ),
        (false, None) => (
            own,
            finding(
                CHECK,
                Status::Ok,
                format!(
                    "{}: the default (no leading engine publishes its settings; --rollout-delay checks another)",
                    humanize(own)
                ),
            ),
        ),
    }
}

/// In a namespace without any CAPApplication the checks below see nothing: point at -A, as
/// `capdeck batches` does.
fn nothing_here(scope: &Scope, applications: &Result<Vec<CAPApplication>, kube::Error>) -> Option<Finding> {
    match (scope, applications) {
        (Scope::Namespace(_), Ok(found)) if found.is_empty() => Some(finding(
            "applications",
            Status::Warn,
            format!(
                "no CAPApplication in {}: the checks below see nothing of them (capdeck doctor -A looks in every \
                 namespace)",
                scope.label()
            ),
        )),
        _ => None,
    }
}

/// Every CAPApplication and Namespace whose `capdeck.dev/change-windows` annotation cannot be
/// parsed (the engine holds their batches: FAIL, with the fix), else what windows apply.
async fn change_windows(
    connection: &Connection,
    scope: &Scope,
    applications: &Result<Vec<CAPApplication>, kube::Error>,
    leader: Option<&crate::leadership::PublishedSettings>,
) -> Vec<Finding> {
    const CHECK: &str = "change windows";
    let mut out = Vec::new();
    let mut annotated = 0;
    match applications {
        Ok(applications) => {
            for app in applications {
                let Some(text) = app.annotations().get(ANNOTATION_CHANGE_WINDOWS) else { continue };
                annotated += 1;
                let namespace = app.namespace().unwrap_or_default();
                let applied = AppliedWindows::resolve((&namespace, &app.name_any(), Some(text)), None, None);
                if let Some(problem) = applied.as_ref().and_then(AppliedWindows::unreadable) {
                    out.push(finding(CHECK, Status::Fail, problem));
                }
            }
        }
        Err(error) => out.push(finding(
            CHECK,
            Status::Warn,
            format!("cannot list CAPApplications, their change windows are not checked: {}", describe_error(error)),
        )),
    }
    match crate::judging::read_namespace_windows(&connection.client, scope).await {
        Ok(namespaces) => {
            for (namespace, text) in &namespaces {
                annotated += 1;
                let applied = AppliedWindows::resolve((namespace, "", None), Some(text), None);
                if let Some(problem) = applied.as_ref().and_then(AppliedWindows::unreadable) {
                    out.push(finding(CHECK, Status::Fail, problem));
                }
            }
        }
        Err(why) => {
            out.push(finding(CHECK, Status::Warn, format!("the Namespaces' change windows are not checked: {why}")))
        }
    }
    if out.is_empty() {
        let cluster = match leader {
            Some(settings) => settings.change_windows.clone().unwrap_or_else(|| "none".into()),
            None => "unknown (no leading engine publishes its settings)".into(),
        };
        out.push(finding(
            CHECK,
            Status::Ok,
            format!(
                "{annotated} {ANNOTATION_CHANGE_WINDOWS} annotation(s) in {}, every one readable; the leading engine's \
                 --change-windows: {cluster} (capdeck windows shows the next openings)",
                scope.label()
            ),
        ));
    }
    out
}

/// The freezes in force (information: who froze what until when, and why); a cluster freeze
/// outside the leading engine's Lease namespace is said to hold nothing. Without a known leader,
/// the cluster freeze is looked for where this doctor's Lease would be (`fallback`).
async fn freezes(connection: &Connection, scope: &Scope, leader_lease: Option<&str>, fallback: &str) -> Vec<Finding> {
    const CHECK: &str = "freeze";
    let lease_namespace = leader_lease.unwrap_or(fallback);
    let read = super::credentials::read_freezes(&connection.client, scope, Some(lease_namespace)).await;
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut out: Vec<Finding> = read
        .found
        .iter()
        .filter(|freeze| freeze.active_at(now))
        .map(|freeze| {
            let honoured = freeze.spec.scope != FreezeScope::Cluster
                || leader_lease.is_none_or(|lease| freeze.namespace().as_deref() == Some(lease));
            if honoured {
                finding(CHECK, Status::Ok, freeze.summary())
            } else {
                finding(
                    CHECK,
                    Status::Warn,
                    format!(
                        "{}/{}: a cluster freeze outside the namespace of the engine's Lease ({lease_namespace}) \
                         holds nothing; create it there",
                        freeze.namespace().unwrap_or_default(),
                        freeze.name_any()
                    ),
                )
            }
        })
        .collect();
    if let Some(why) = read.missing {
        out.push(finding(CHECK, Status::Warn, format!("no freeze information: {why}")));
    } else if out.is_empty() {
        out.push(finding(CHECK, Status::Ok, format!("none in force in {} or for the cluster", scope.label())));
    }
    out
}

/// Batches waiting for a change window or a freeze (phase Waiting), and those escalated because
/// waiting would outlive their old credentials: a person decides those.
async fn waiting_batches(connection: &Connection, scope: &Scope) -> Finding {
    const CHECK: &str = "waiting";
    let batches = match decoded::<crate::api::RotationBatch>(&connection.client, scope).await {
        Ok(batches) => batches,
        // The CRD check above says what to install.
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(error) => {
            return finding(CHECK, Status::Warn, format!("cannot list RotationBatches: {}", describe_error(&error)));
        }
    };
    let waiting = batches.iter().filter(|batch| matches!(batch.state(), BatchState::Waiting { .. })).count();
    let escalated: Vec<String> = batches
        .iter()
        .filter(|batch| {
            matches!(
                batch.state(),
                BatchState::AwaitingApproval { why: ApprovalNeed::WindowTooLate | ApprovalNeed::FreezeTooLong }
            )
        })
        .map(|batch| format!("{}/{}", batch.namespace().unwrap_or_default(), batch.name_any()))
        .collect();
    let waits = format!(
        "{} in {} waiting for a change window or a freeze",
        crate::output::count(waiting, "batch").replace("batchs", "batches"),
        scope.label()
    );
    if escalated.is_empty() {
        return finding(CHECK, Status::Ok, waits);
    }
    finding(
        CHECK,
        Status::Warn,
        format!(
            "{waits}; {} escalated ({}): waiting would outlive the old credentials ({} or {}) — approve to roll now \
             (capdeck approve), or let them wait",
            escalated.len(),
            escalated.join(", "),
            ReadyReason::DeadlineBeforeChangeWindow,
            ReadyReason::DeadlineDuringFreeze
        ),
    )
}

const CONSOLE_NEEDS: &[(&str, &str, &str)] = &[("patch", "capdeck.dev", "rotationbatches")];
const LEASE_NEEDS: &[&str] = &["get", "create", "patch"];

pub async fn run(cluster: &ClusterTarget, engine: &EngineSettings, args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    args.output.refuse_name("doctor").map_err(|error| crate::commands::UsageError(error.to_string()))?;
    let connection = cluster.connect().await?;
    let scope = cluster.scope(&connection);
    let mut findings = vec![finding(
        "context",
        Status::Ok,
        format!("{} at {} ({})", connection.context, connection.server, scope.label()),
    )];
    // Every other check asks the API server: one that does not answer would make each of them a
    // false verdict ("you may not …"), after a deadline each.
    if let Err(error) = connection.client.apiserver_version().await
        && !matches!(error, kube::Error::Api(_))
    {
        findings.push(finding("api server", Status::Fail, describe_error(&error)));
        findings.push(finding("other checks", Status::Warn, "not run: each of them asks the API server"));
    } else {
        // A window given here is checked as given; else the leading engine's is.
        let explicit_delay = args.engine.rollout_delay.is_some() || std::env::var_os("ROLLOUT_DELAY").is_some();
        findings.extend(checks(&connection, &scope, engine, explicit_delay).await);
        findings.extend(match super::credentials::live_judged(cluster).await {
            Ok((overview, out_of_date)) => {
                let mut found = credential_verdicts(&overview);
                found.extend(old_credentials(out_of_date.as_deref(), &scope));
                found
            }
            Err(error) => vec![finding("credential verdicts", Status::Warn, format!("not judged: {error:#}"))],
        });
    }
    let blocking = findings.iter().any(|f| f.status == Status::Fail);
    let document = json!({"findings": findings, "ok": !blocking});
    let text = crate::output::render_object(&args.output, "doctor", &document, |_wide, headers| {
        let mut table = Table::new(&["CHECK", "STATUS", "DETAIL"]);
        for f in &findings {
            table.row(vec![f.check.clone(), f.status.label().into(), f.detail.clone()]);
        }
        let mut out = table.render_with(false, headers);
        out.push_str(if blocking {
            "\nSomething above blocks capdeck (FAIL); each line says what to do.\n"
        } else {
            "\nNothing blocks capdeck here.\n"
        });
        out
    })
    .map_err(|error| crate::commands::UsageError(error.to_string()))?;
    crate::output::print(&text)?;
    Ok(if blocking { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Notifications: the receivers given here (each read and parsed on its own: every mistake on a line of its own),
/// then what the records of the last 24h on batches and freezes say: each receiver that refuses,
/// that refused and recovered, that failed.
async fn notifications(connection: &Connection, scope: &Scope, engine: &EngineSettings) -> Vec<Finding> {
    const CHECK: &str = "notifications";
    let (configured, mut out) = notify_configuration(connection, engine).await;
    let read = |error: &kube::Error, what: &str| {
        finding(
            CHECK,
            Status::Warn,
            format!("cannot read the {what}' notification records: {}", crate::cluster::describe_error(error)),
        )
    };
    // A 404: the CRD check above already says what to install.
    let batches = match decoded::<crate::api::RotationBatch>(&connection.client, scope).await {
        Ok(batches) => batches,
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(error) => return [out, vec![read(&error, "batches")]].concat(),
    };
    let freezes = match decoded::<crate::api::Freeze>(&connection.client, scope).await {
        Ok(freezes) => freezes,
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(error) => return [out, vec![read(&error, "freezes")]].concat(),
    };
    let records = batches
        .iter()
        .filter_map(|batch| batch.status.as_ref())
        .flat_map(|status| &status.notifications)
        .chain(freezes.iter().filter_map(|freeze| freeze.status.as_ref()).flat_map(|status| &status.notifications));
    let health = crate::engine::notify::recent(records, k8s_openapi::jiff::Timestamp::now(), 24 * 3600);
    let receivers =
        if configured > 0 { format!("{configured} receiver(s) given here readable; ") } else { String::new() };
    out.extend(delivery_findings(&health, &receivers));
    if out.is_empty() {
        let sent = if health.recorded == 0 {
            format!(
                "none sent in the last 24h in {} (the daemon sends them with --notify or --notify-secret{})",
                scope.label(),
                if matches!(scope, Scope::All) { "" } else { "; -A reads every namespace" }
            )
        } else {
            format!("{} sent in the last 24h in {}, every one delivered", health.recorded, scope.label())
        };
        out.push(finding(CHECK, Status::Ok, format!("{receivers}{sent}")));
    }
    out
}

/// Each receiver given to doctor read and parsed on its own (a FAIL each), then the whole (two of
/// one name, a cluster name an incident service needs); how many were readable.
async fn notify_configuration(connection: &Connection, engine: &EngineSettings) -> (usize, Vec<Finding>) {
    const CHECK: &str = "notifications";
    let notify = &engine.notify;
    let client = &connection.client;
    let mut failures = Vec::new();
    let mut readable = Vec::new();
    for (position, url) in notify.urls.iter().enumerate() {
        match crate::engine::config::NotifyTarget::parse(url) {
            Ok(target) => readable.push(target),
            Err(why) => failures.push(format!("--notify (number {}) {why}", position + 1)),
        }
    }
    for reference in &notify.secrets {
        match crate::engine::notify::targets(client, &[], std::slice::from_ref(reference)).await {
            Ok(targets) => readable.extend(targets),
            Err(error) => failures.push(error),
        }
    }
    // Said whatever else is wrong: the daemon refuses two of one name as well.
    if let Some(error) = crate::engine::notify::twice_named(&readable) {
        failures.push(error);
    }
    if let Some(signing) = &notify.signing
        && let Err(error) = crate::engine::notify::signing_key(client, signing).await
    {
        failures.push(error);
    }
    // What reading them all at once adds (the receivers are read above, once).
    if failures.is_empty()
        && let Err(error) = engine.cluster_for(&readable, &connection.context)
    {
        failures.push(error);
    }
    (readable.len(), failures.into_iter().map(|error| finding(CHECK, Status::Fail, error)).collect())
}

/// A line for each kind of trouble the records show: receivers that refuse (FAIL), that refused
/// and recovered, that failed after every retry (warn).
fn delivery_findings(health: &crate::engine::notify::RecentNotifications, receivers: &str) -> Vec<Finding> {
    const CHECK: &str = "notifications";
    let mut out = Vec::new();
    if !health.refused_by.is_empty() {
        out.push(finding(
            CHECK,
            Status::Fail,
            format!(
                "{receivers}{} refused the last notification sent there in the last 24h (401, 403, 404 or 410, \
                 PagerDuty's 400: the URL or key is wrong, revoked or gone; nobody is told through it): write the \
                 right URL or key where it is configured (its Secret, or --notify) and restart the daemon \
                 (kubectl -n capdeck-system rollout restart deploy/capdeck)",
                health.refused_by.join(", ")
            ),
        ));
    }
    if !health.recovered.is_empty() {
        out.push(finding(
            CHECK,
            Status::Warn,
            format!(
                "{receivers}{} refused a notification in the last 24h and accepted a later one: what it refused \
                 was not re-sent (capdeck batches -A and capdeck credentials -A show the state now)",
                health.recovered.join(", ")
            ),
        ));
    }
    if health.failed > 0 {
        out.push(finding(
            CHECK,
            Status::Warn,
            format!(
                "{receivers}{} of {} notification(s) of the last 24h did not reach {} after every retry (the daemon's \
                 log says why; capdeck_notifications_failed_total counts them)",
                health.failed,
                health.recorded,
                health.hosts.join(", ")
            ),
        ));
    }
    out
}

/// The verdicts `capdeck credentials` gives (the same judging, the leader's settings): each
/// at-risk or unsafe Secret with the reason that decided it.
fn credential_verdicts(overview: &crate::credentials::CredentialsOverview) -> Vec<Finding> {
    use crate::credentials::Verdict;
    const CHECK: &str = "credential verdicts";
    let mut out: Vec<Finding> = overview
        .credentials
        .iter()
        .filter(|report| matches!(report.verdict, Verdict::AtRisk | Verdict::Unsafe))
        .map(|report| {
            finding(
                CHECK,
                Status::Warn,
                format!(
                    "{} {}/{}: {} (capdeck credentials -n {} says why)",
                    report.verdict.as_str(),
                    report.namespace,
                    report.secret,
                    report.reasons.last().map_or("", String::as_str),
                    report.namespace
                ),
            )
        })
        .collect();
    if out.is_empty() {
        let unknown = overview.credentials.iter().filter(|report| report.verdict == Verdict::Unknown).count();
        out.push(finding(
            CHECK,
            Status::Ok,
            format!(
                "{}: none at risk or unsafe{}",
                crate::output::count(overview.credentials.len(), "consumed binding Secret"),
                if unknown > 0 { format!(" ({unknown} unknown: capdeck credentials says why)") } else { String::new() }
            ),
        ));
    }
    out
}

/// Deployments that run old credentials with no open batch rolling them: each one an ended batch
/// left so (an undo, a cancel, a failure) fails doctor with who ended it and the command that
/// rolls forward; one nothing speaks for yet is a warning (the leading engine opens a batch).
fn old_credentials(out_of_date: Option<&[crate::plan::OutOfDate]>, scope: &Scope) -> Vec<Finding> {
    const CHECK: &str = "credentials in use";
    let Some(out_of_date) = out_of_date else {
        return vec![finding(CHECK, Status::Warn, "not checked: the versions or Deployments could not be read")];
    };
    if out_of_date.is_empty() {
        return vec![finding(
            CHECK,
            Status::Ok,
            format!(
                "in {}: every Deployment of a version in use runs its binding Secrets' current credentials, or an \
                 open batch rolls it",
                scope.label()
            ),
        )];
    }
    out_of_date
        .iter()
        .map(|deployment| {
            let status = if deployment.left_by.is_some() { Status::Fail } else { Status::Warn };
            finding(CHECK, status, deployment.describe())
        })
        .collect()
}

/// ServiceBindings whose old credentials may be revoked before a batch can have rolled.
async fn service_binding_ttls(connection: &Connection, scope: &Scope, window: std::time::Duration) -> Vec<Finding> {
    match crate::cluster::list_service_bindings(&connection.client, scope).await {
        Ok(None) => vec![finding(
            "credentials",
            Status::Ok,
            "no ServiceBinding CRD (services.cloud.sap.com): when old credentials die is unknown here",
        )],
        Err(why) => vec![finding("credentials", Status::Warn, format!("cannot list ServiceBindings: {why}"))],
        Ok(Some(bindings)) => {
            let bindings = bindings.items;
            let short: Vec<Finding> = crate::credentials::short_ttls(&bindings, window)
                .map(|(_, problem)| finding("credentials", Status::Warn, problem))
                .collect();
            if short.is_empty() {
                vec![finding(
                    "credentials",
                    Status::Ok,
                    format!(
                        "{} ServiceBinding(s) in {}: every rotatedBindingTTL outlasts the window and a rollout \
                         (capdeck credentials shows the margins)",
                        bindings.iter().filter(|binding| !binding.is_stale()).count(),
                        scope.label()
                    ),
                )]
            } else {
                short
            }
        }
    }
}

/// Binding Secrets of opted-in applications whose format capdeck cannot turn into VCAP entries.
async fn binding_secrets(connection: &Connection, scope: &Scope) -> Vec<Finding> {
    let client = &connection.client;
    let listed = async {
        let apps: Vec<CAPApplication> = decoded(client, scope).await?;
        let versions: Vec<CAPApplicationVersion> = decoded(client, scope).await?;
        let tenants: Vec<CAPTenant> = decoded(client, scope).await?;
        let deployments: Vec<k8s_openapi::api::apps::v1::Deployment> = decoded(client, scope).await?;
        let mut secrets = Vec::new();
        for app in apps.iter().filter(|a| a.rollout_opted_in()) {
            let namespace = app.namespace().unwrap_or_default();
            let api: Api<Lenient<Secret>> = Api::namespaced(client.clone(), &namespace);
            for service in &app.spec.btp.services {
                // One that does not decode is named by the undecodable check.
                if let Some(Ok(secret)) = api.get_opt(&service.secret).await?.map(Lenient::into_result) {
                    secrets.push(secret);
                }
            }
        }
        Ok::<_, kube::Error>((apps, versions, tenants, deployments, secrets))
    };
    let (apps, versions, tenants, deployments, secrets) = match listed.await {
        Ok(found) => found,
        Err(error) => {
            return vec![finding(
                "binding secrets",
                Status::Warn,
                format!("cannot read the CAP objects and their Secrets: {}", describe_error(&error)),
            )];
        }
    };
    let mut objects: Vec<Value> = Vec::new();
    objects.extend(apps.iter().filter_map(|o| serde_json::to_value(o).ok()));
    objects.extend(versions.iter().filter_map(|o| serde_json::to_value(o).ok()));
    objects.extend(tenants.iter().filter_map(|o| serde_json::to_value(o).ok()));
    objects.extend(deployments.iter().filter_map(|o| serde_json::to_value(o).ok()));
    objects.extend(secrets.iter().filter_map(|o| serde_json::to_value(o).ok()));
    let manifests = crate::manifest::Manifests::from_objects("cluster", objects);
    let index = crate::plan::CapIndex::new(
        manifests.applications.clone(),
        manifests.versions.iter().cloned(),
        manifests.tenants.iter().cloned(),
    );
    let plan = crate::plan::plan_all(&index, &manifests);
    let mut problems: Vec<Finding> = plan
        .problems
        .iter()
        .chain(manifests.problems.iter())
        .filter(|p| p.secret.is_some())
        .map(|p| {
            finding(
                "binding secrets",
                Status::Warn,
                format!("{}/{}: {}", p.namespace, p.secret.clone().unwrap_or_default(), p.message),
            )
        })
        .collect();
    // A Deployment named like a workload that its version does not own: never written.
    problems.extend(plan.deployments.iter().filter(|d| d.action == crate::plan::PlanAction::NotOwned).map(|d| {
        finding("ownership", Status::Warn, format!("Deployment {}/{}: {}", d.namespace, d.deployment, d.reason))
    }));
    if problems.is_empty() {
        let opted = apps.iter().filter(|a| a.rollout_opted_in()).count();
        vec![finding(
            "binding secrets",
            Status::Ok,
            format!(
                "{} binding Secret(s) of {opted} opted-in application(s) in {} are readable",
                secrets.len(),
                scope.label()
            ),
        )]
    } else {
        problems
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The window doctor checks: given beats the leader's, the leader's beats the default (a
    /// leader running with 30s was judged with 1h before).
    #[test]
    fn the_rollout_delay_is_the_leaders_unless_one_is_given() {
        let leader = crate::leadership::PublishedSettings {
            rollout_delay_seconds: 30,
            expected_rollout_seconds: 900,
            approval: "auto".into(),
            max_parallel_rollouts: 5,
            min_rollout_interval_seconds: 600,
            change_windows: None,
            on_deadline: None,
        };
        let hour = Duration::from_secs(3600);
        let five = Duration::from_secs(300);
        let cases = [
            (hour, false, None, Some(&leader), 30, Status::Ok, "30s, the leading engine's"),
            (hour, false, None, None, 3600, Status::Ok, "1h: the default"),
            (five, true, None, Some(&leader), 300, Status::Ok, "checked instead of the leading engine's 30s"),
            (Duration::from_secs(30), true, None, Some(&leader), 30, Status::Ok, "as the leading engine runs"),
            (five, true, None, None, 300, Status::Ok, "5m from --rollout-delay"),
            (hour, true, Some("ROLLOUT_DELAY=\"x\" is not a duration".into()), Some(&leader), 3600, Status::Warn, "x"),
        ];
        for (own, explicit, warning, settings, seconds, status, says) in cases {
            let (window, found) = rollout_delay(own, explicit, warning, settings);
            assert_eq!((window.as_secs(), found.status), (seconds, status), "{}", found.detail);
            assert!(found.detail.contains(says), "{}", found.detail);
        }
    }
}
