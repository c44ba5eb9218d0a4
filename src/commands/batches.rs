//! `capdeck batches` and the batch actions (`approve`, `force`, `hold`, `release`, `cancel`, `retry`,
//! `undo`).

use std::io::Write as _;
use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::actions::{BatchAction, act};
use crate::api::lenient::Lenient;
use crate::api::{BatchPhase, RotationBatch};
use crate::cli::{BatchActionArgs, BatchesArgs};
use crate::cluster::{ClusterTarget, Connection, Requests, describe_error, who_am_i};
use crate::output::{OutputArgs, OutputFormat, Printable, Table, human_duration};
use crate::readmodel::CollectionWindow;

async fn connect(cluster: &ClusterTarget) -> anyhow::Result<Connection> {
    Ok(cluster.connect().await?)
}

/// When a namespaced list came back empty: whether that is because the namespace does not exist
/// (`-n nope`), as a note for the person. Nothing when it exists, when the namespace may not be
/// read (forbidden says nothing about existence), or on any other error.
pub(crate) async fn missing_namespace(connection: &Connection, scope: &crate::cluster::Scope) -> Option<String> {
    let crate::cluster::Scope::Namespace(namespace) = scope else {
        return None;
    };
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(connection.client.clone());
    match namespaces.get(namespace).await {
        Err(kube::Error::Api(status)) if status.code == 404 => Some(format!(
            "Namespace {namespace:?} does not exist in context {} (kubectl get namespaces lists them).",
            connection.context
        )),
        _ => None,
    }
}

/// The batch as one JSON document; `now` words its state (`Waiting · opens in 3h12m`).
fn batch_json(batch: &RotationBatch, now: Timestamp) -> Value {
    let status = batch.status.clone().unwrap_or_default();
    let (reason, message) = batch.ready_note().unzip();
    json!({
        "namespace": batch.namespace(),
        "name": batch.name_any(),
        "application": batch.spec.application,
        "phase": batch.phase().to_string(),
        "state": batch.state().text(now, &human_duration),
        "stateLabel": batch.state().label(),
        "waitingUntil": status.waiting_until,
        "reason": reason,
        "message": message,
        "windowEnd": batch.spec.window_end,
        "secrets": batch.spec.secrets,
        "approval": batch.spec.approval,
        "force": batch.spec.force,
        "hold": batch.spec.hold,
        "cancel": batch.spec.cancel,
        "progress": status.progress,
        "tenants": status.tenants,
        "deployments": status.deployments,
        "created": batch.metadata.creation_timestamp,
    })
}

pub async fn list(cluster: &ClusterTarget, args: &BatchesArgs) -> anyhow::Result<ExitCode> {
    // `-w`'s watch may rightly stay quiet for minutes: only the start of each answer is bounded.
    let requests = if args.watch { Requests::Watching } else { Requests::OneShot };
    let connection = cluster.connect_for(requests).await?;
    let scope = cluster.scope(&connection);
    let api: Api<Lenient<RotationBatch>> = scope.api(&connection.client);
    let mut batches = match crate::cluster::list_each(&api, &ListParams::default()).await {
        Ok(listed) => {
            super::warn_undecodable("RotationBatch", &listed.undecodable);
            listed.items
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {
            anyhow::bail!(
                "the cluster has no RotationBatch kind yet: install it with the Helm chart, or `capdeck crds --only capdeck | kubectl apply --server-side -f -`"
            )
        }
        Err(error) => anyhow::bail!("cannot list rotation batches: {}", describe_error(&error)),
    };
    batches.sort_by_key(|b| (b.namespace(), b.metadata.creation_timestamp.clone().map(|t| t.0), b.name_any()));
    // When the old credentials of an open batch's Secrets may be revoked (sap-btp-service-operator).
    let bindings = if batches.iter().any(|batch| !batch.is_terminal()) {
        let listed = crate::cluster::list_service_bindings(&connection.client, &scope).await.ok().flatten();
        listed.map(|listed| listed.items).unwrap_or_default()
    } else {
        Vec::new()
    };
    let deadlines: Vec<Option<Timestamp>> = batches
        .iter()
        .map(|batch| if batch.is_terminal() { None } else { crate::credentials::batch_revocation(&bindings, batch) })
        .collect();
    let printable = printable(&batches, &deadlines, Timestamp::now());
    let text =
        printable.render(&args.output, "batches").map_err(|error| crate::commands::UsageError(error.to_string()))?;
    let missing = if batches.is_empty() { missing_namespace(&connection, &scope).await } else { None };
    if printable.table.is_empty() && matches!(args.output.format, OutputFormat::Table | OutputFormat::Wide) {
        // Like kubectl: "nothing found" is a note for the person, not output for a pipe.
        // An empty namespace that exists: the batches may be in another one.
        let elsewhere = match (&scope, &missing) {
            (crate::cluster::Scope::Namespace(_), None) => " (capdeck batches -A looks in every namespace)".to_string(),
            _ => String::new(),
        };
        crate::safe_eprintln!(
            "No rotation batches in {}.{}{elsewhere}",
            scope.label(),
            missing.map(|note| format!(" {note}")).unwrap_or_default()
        );
    } else {
        if let Some(note) = missing {
            crate::safe_eprintln!("note: {note}");
        }
        crate::output::print(&text)?;
    }
    if args.watch {
        let printed = batches.iter().map(|b| (b.namespace(), b.name_any(), b.resource_version())).collect();
        watch(api, &args.output, printed, printable.table.widths()).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `batches -w`: one line (or document) per change, until interrupted or the watch ends.
/// `printed` holds (namespace, name, resourceVersion) of what the list showed already.
async fn watch(
    api: Api<Lenient<RotationBatch>>,
    output: &OutputArgs,
    printed: std::collections::BTreeSet<(Option<String>, String, Option<String>)>,
    mut widths: Vec<usize>,
) -> anyhow::Result<()> {
    use futures::StreamExt as _;
    use kube::runtime::watcher;
    let changes = watcher::watcher(api, crate::cluster::stores::watch_config());
    futures::pin_mut!(changes);
    // Listening once, before the loop: a signal handler made anew each turn misses a SIGTERM that
    // arrives between two turns (while a line is printed), and the watch never ends.
    let shutdown = crate::process::shutdown_signal();
    futures::pin_mut!(shutdown);
    loop {
        let event = tokio::select! {
            () = &mut shutdown => return Ok(()),
            event = changes.next() => event,
        };
        let batch = match event {
            None => return Ok(()),
            // The watcher lists again when it starts: print only what changed since our list.
            Some(Ok(watcher::Event::InitApply(batch)))
                if !printed.contains(&(batch.namespace(), batch.name_any(), batch.resource_version())) =>
            {
                batch
            }
            Some(Ok(watcher::Event::Apply(batch) | watcher::Event::Delete(batch))) => batch,
            Some(Ok(_)) => continue,
            Some(Err(error)) => {
                crate::safe_eprintln!("watch interrupted, resuming: {}", crate::cluster::describe_watch_error(&error));
                continue;
            }
        };
        let batch = match batch.into_result() {
            Ok(batch) => batch,
            Err(undecodable) => {
                super::warn_undecodable("RotationBatch", std::slice::from_ref(&undecodable));
                continue;
            }
        };
        let line = printable(std::slice::from_ref(&batch), &[], Timestamp::now());
        let text = match output.format {
            // One compact document per change, like `kubectl get -w -o json` streams objects.
            OutputFormat::Json => crate::output::json_line(&batch_json(&batch, Timestamp::now()))?,
            OutputFormat::Yaml => format!("---\n{}", crate::output::yaml(&batch_json(&batch, Timestamp::now()))),
            OutputFormat::Name => format!("{}/{}\n", batch.namespace().unwrap_or_default(), batch.name_any()),
            // Under the columns printed so far (a wider cell widens its column from then on).
            format => {
                let text = watched_line(&line.table, format == OutputFormat::Wide, &widths);
                widths = widths.iter().zip(line.table.widths()).map(|(was, now)| (*was).max(now)).collect();
                text
            }
        };
        let mut stdout = crate::output::SafeOut(std::io::stdout().lock());
        stdout.write_all(text.as_bytes())?;
        stdout.flush()?;
    }
}

/// One `-w` row under the columns already printed.
fn watched_line(table: &Table, wide: bool, widths: &[usize]) -> String {
    table.render_aligned(wide, false, widths)
}

/// The batches in every output form.
/// `deadlines[i]`: when old credentials of batch `i`'s Secrets may be revoked, if known.
fn printable(batches: &[RotationBatch], deadlines: &[Option<Timestamp>], now: Timestamp) -> Printable {
    use crate::api::common::{MAX_REASON, MAX_USER, bounded};
    let mut table = Table::with_wide(
        &[
            "NAMESPACE",
            "NAME",
            "APPLICATION",
            "STATE",
            "WINDOW",
            "DEPLOYMENTS",
            "SECRETS",
            "APPROVAL",
            "AGE",
            "OLD CREDS",
        ],
        &["TENANTS", "REASON", "MESSAGE"],
    );
    let deadline = |index: usize| deadlines.get(index).copied().flatten();
    for (index, batch) in batches.iter().enumerate() {
        let age = batch
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or("-".to_string(), |t| human_duration(now.as_second() - t.0.as_second()));
        let status = batch.status.clone().unwrap_or_default();
        let (reason, message) = batch.ready_note().unzip();
        table.row(vec![
            batch.namespace().unwrap_or_default(),
            batch.name_any(),
            batch.spec.application.clone(),
            batch.state().text(now, &human_duration),
            // Counts down only while the batch collects: not after a force, nor once it went on.
            CollectionWindow::of(batch, now).text(now, &human_duration),
            batch.progress_text(),
            batch.spec.secrets.len().to_string(),
            bounded(&batch.approval_text(), MAX_USER + 16).into_owned(),
            age,
            deadline(index).map_or_else(
                || "-".into(),
                |at| format!("revocable in {}", crate::credentials::human_signed(at.as_second() - now.as_second())),
            ),
            status
                .tenants
                .or(batch.planned().map(|planned| planned.tenants))
                .map_or_else(|| "-".into(), |n| n.to_string()),
            reason.unwrap_or_else(|| "-".into()),
            // Spec text quoted in status (an object older than the CRD's limits may hold 1 MB).
            message.map_or_else(|| "-".into(), |m| bounded(&m, MAX_REASON + 256).into_owned()),
        ]);
    }
    Printable::list(
        table,
        batches
            .iter()
            .enumerate()
            .map(|(index, batch)| {
                let mut document = batch_json(batch, now);
                document["oldCredentialsRevocableAt"] = json!(deadline(index));
                document
            })
            .collect(),
        batches.iter().map(|b| format!("{}/{}", b.namespace().unwrap_or_default(), b.name_any())).collect(),
    )
}

/// `NAMESPACE/NAME`, or `NAME` in the -n namespace (or the context's). Anything else — and a
/// `NAMESPACE/` that -n contradicts — is a usage error.
pub fn target(
    explicit_namespace: Option<&str>,
    all_namespaces: bool,
    default_namespace: &str,
    what: &str,
    given: &str,
) -> Result<crate::api::ObjectKey, crate::commands::UsageError> {
    use crate::commands::UsageError;
    let parts: Vec<&str> = given.split('/').collect();
    match parts.as_slice() {
        [namespace, name] if !namespace.is_empty() && !name.is_empty() => {
            if let Some(flag) = explicit_namespace.filter(|flag| flag != namespace) {
                return Err(UsageError(format!(
                    "{what} {given:?} names namespace {namespace:?} but -n says {flag:?}; give one of them"
                )));
            }
            Ok(crate::api::ObjectKey::new(*namespace, *name))
        }
        [name] if !name.is_empty() => {
            if all_namespaces && explicit_namespace.is_none() {
                return Err(UsageError(format!("with -A give the {what} as NAMESPACE/NAME")));
            }
            Ok(crate::api::ObjectKey::new(explicit_namespace.unwrap_or(default_namespace), *name))
        }
        _ => Err(UsageError(format!("{what} {given:?} is not NAMESPACE/NAME or NAME (with -n NAMESPACE)"))),
    }
}

pub async fn action(cluster: &ClusterTarget, args: &BatchActionArgs, action: BatchAction) -> anyhow::Result<ExitCode> {
    let connection = connect(cluster).await?;
    let crate::api::ObjectKey { namespace, name } = target(
        cluster.namespace.as_deref(),
        cluster.all_namespaces,
        &connection.default_namespace,
        "batch",
        &args.batch,
    )?;
    if args.dry_run {
        return dry_run(&connection, &namespace, &name, action).await;
    }
    // Every write records who made it; one nobody can be named for is refused (as in the console).
    let user = match who_am_i(&connection.client).await {
        Ok(user) => user,
        Err(why) => {
            crate::safe_eprintln!(
                "error: cannot {} {namespace}/{name}: the API server at {} did not say who you are ({why}), and \
                 capdeck records every approver; check `kubectl auth whoami`",
                action.verb(),
                connection.server
            );
            return Ok(ExitCode::from(1));
        }
    };
    match act(&connection.client, &namespace, &name, action, &user, Some(&args.reason), Timestamp::now()).await {
        Ok(report) => {
            let mut out = crate::output::SafeOut(std::io::stdout().lock());
            writeln!(out, "{}/{}: {}", report.namespace, report.batch, report.summary)?;
            // One line, whatever the reason holds: a newline in it must not forge a line of output.
            writeln!(out, "reason: {}", crate::output::terminal_safe(&args.reason, false))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            crate::safe_eprintln!("error: cannot {} {namespace}/{name}: {error}", action.verb());
            Ok(ExitCode::from(1))
        }
    }
}

/// Whether the user may patch the batch, as the real command would: only the authorizer's "no"
/// refuses (said, with how to check); a review that could not be made is a warning.
async fn may_patch(connection: &Connection, namespace: &str, name: &str, action: BatchAction) -> bool {
    // The real command patches the batch: a dry run that passes where it would be forbidden
    // misleads. Only the authorizer's "no" refuses; a review that could not be made is a warning.
    let allowed = crate::cluster::may(
        &connection.client,
        "patch",
        crate::api::rotation_batch::GROUP,
        "rotationbatches",
        Some(namespace),
    )
    .await;
    if let Err(why) = &allowed {
        crate::safe_eprintln!(
            "warning: cannot tell whether you may patch rotationbatches.capdeck.dev in {namespace} ({why}); \
             the command itself will say"
        );
    }
    if allowed == Ok(false) {
        crate::safe_eprintln!(
            "error: cannot {} {namespace}/{name}: you may not patch rotationbatches.capdeck.dev in {namespace}, so \
             the command itself would be refused (ask for that right there; `kubectl auth can-i patch \
             rotationbatches.capdeck.dev -n {namespace}` checks)",
            action.verb()
        );
        return false;
    }
    true
}

/// The tenants the batch's `versions` serve (what restarting them touches).
async fn tenants_served(
    connection: &Connection,
    namespace: &str,
    batch: &RotationBatch,
    versions: &std::collections::BTreeSet<&str>,
) -> anyhow::Result<Vec<String>> {
    let tenants: Api<Lenient<crate::api::CAPTenant>> = Api::namespaced(connection.client.clone(), namespace);
    match crate::cluster::list_each(&tenants, &ListParams::default()).await {
        Ok(listed) => Ok(listed
            .items
            .iter()
            .filter(|t| t.spec.cap_application_instance == batch.spec.application)
            .filter(|t| {
                t.status
                    .as_ref()
                    .and_then(|s| s.current_cap_application_version_instance.as_deref())
                    .is_some_and(|v| versions.contains(v))
            })
            .map(|t| t.name_any())
            .collect::<Vec<String>>()),
        Err(error) => anyhow::bail!("cannot list tenants in {namespace}: {}", describe_error(&error)),
    }
}

/// What a dry run lists: its heading, and the Deployments the action touches.
fn touched_by(
    batch: &RotationBatch,
    action: BatchAction,
) -> (&'static str, Vec<&crate::api::rotation_batch::BatchDeployment>) {
    match action {
        BatchAction::Retry if matches!(batch.phase(), BatchPhase::Undone | BatchPhase::Cancelled) => (
            "Deployments a new batch rolls forward to the current credentials (its approval policy, windows and \
             freezes apply)",
            batch.restarts().filter(|d| d.left_behind()).collect(),
        ),
        BatchAction::Retry => ("Deployments to restart again", batch.restarts().filter(|d| d.retriable()).collect()),
        BatchAction::Undo => (
            "Deployments to point back at their previous VCAP Secrets",
            batch.restarts().filter(|d| d.undoable()).collect(),
        ),
        _ => ("Deployments to restart", batch.restarts_or_planned().collect()),
    }
}

/// What `action` would do to the batch: the refusal if it makes no sense, else the Deployments
/// that restart and the tenants their versions serve.
async fn dry_run(
    connection: &Connection,
    namespace: &str,
    name: &str,
    action: BatchAction,
) -> anyhow::Result<ExitCode> {
    let api: Api<Lenient<RotationBatch>> = Api::namespaced(connection.client.clone(), namespace);
    let batch = match api.get_opt(name).await.map(|found| found.map(Lenient::into_result)) {
        Ok(Some(Ok(batch))) => batch,
        Ok(Some(Err(undecodable))) => {
            crate::safe_eprintln!("error: {}", crate::cluster::describe_undecodable("RotationBatch", &undecodable));
            return Ok(ExitCode::from(1));
        }
        Ok(None) => {
            crate::safe_eprintln!("error: rotation batch {namespace}/{name} not found (capdeck batches -A lists them)");
            return Ok(ExitCode::from(1));
        }
        Err(error) => anyhow::bail!("cannot read rotation batch {namespace}/{name}: {}", describe_error(&error)),
    };
    if let Some(refusal) = action.refusal(&batch) {
        crate::safe_eprintln!("error: cannot {} {namespace}/{name}: {refusal}", action.verb());
        return Ok(ExitCode::from(1));
    }
    if !may_patch(connection, namespace, name, action).await {
        return Ok(ExitCode::from(1));
    }
    let (heading, restarts) = touched_by(&batch, action);
    let planned = match (batch.planned(), action) {
        (Some(planned), BatchAction::Approve | BatchAction::Force { .. } | BatchAction::Hold | BatchAction::Cancel) => {
            format!(
                ", planned when the window ended at {} (planned again when it may start; a change is said, and under \
                 the manual policy asked again)",
                planned.at.0
            )
        }
        _ => String::new(),
    };
    let versions: std::collections::BTreeSet<&str> = restarts.iter().map(|d| d.version.as_str()).collect();
    let served = tenants_served(connection, namespace, &batch, &versions).await?;
    let mut out = crate::output::SafeOut(std::io::stdout().lock());
    writeln!(
        out,
        "{} {namespace}/{name} ({}, application {}) — dry run, nothing written",
        action.verb(),
        batch.phase(),
        batch.spec.application
    )?;
    if restarts.is_empty() && action == BatchAction::Retry {
        writeln!(
            out,
            "{heading}: every Deployment of {} still on old credentials (it was never evaluated)",
            batch.spec.application
        )?;
    } else if restarts.is_empty() {
        writeln!(out, "{heading}: none decided yet (the engine plans them when the window ends)")?;
    } else {
        writeln!(out, "{heading} ({}{planned}):", restarts.len())?;
        for deployment in &restarts {
            match (&deployment.previous_vcap_secret, action) {
                (Some(previous), BatchAction::Undo) => {
                    writeln!(out, "  {} (version {}): back to {previous}", deployment.name, deployment.version)?
                }
                _ => writeln!(out, "  {} (version {})", deployment.name, deployment.version)?,
            }
        }
    }
    let not_owned = batch.not_owned().map(|d| d.name.as_str()).collect::<Vec<_>>();
    if !not_owned.is_empty() {
        writeln!(out, "Left alone, not owned by their CAPApplicationVersion ({}):", not_owned.len())?;
        for name in not_owned {
            writeln!(out, "  {name}")?;
        }
    }
    writeln!(
        out,
        "Tenants served ({}): {}",
        served.len(),
        if served.is_empty() { "-".into() } else { served.join(", ") }
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `-w` rows line up under the list printed first, whatever their own cells' widths.
    #[test]
    fn watched_rows_line_up_under_the_list() {
        let now = "2026-11-20T09:00:00Z".parse().expect("time");
        let listed = [batch("bookshop-a-very-long-name", "Collecting", "WindowOpen", json!({}), json!({}))];
        let list = printable(&listed, &[], now);
        let widths = list.table.widths();
        let header = list.table.render();
        let changed = batch("b", "AwaitingApproval", "AwaitingApproval", json!({}), json!({}));
        let line = watched_line(&printable(std::slice::from_ref(&changed), &[], now).table, false, &widths);
        let column = |text: &str, word: &str| text.lines().next().and_then(|line| line.find(word));
        assert_eq!(column(&header, "APPLICATION"), column(&line, "bookshop"), "{header}{line}");
        assert_eq!(column(&header, "STATE"), column(&line, "AwaitingApproval"), "{header}{line}");
    }

    fn batch(name: &str, phase: &str, reason: &str, spec: Value, status: Value) -> RotationBatch {
        use crate::api::rotation_batch::testing;
        let mut overrides = json!({
            "metadata": {"name": name, "namespace": "shop", "creationTimestamp": "2026-11-20T08:00:00Z"},
            "spec": {"application": "bookshop", "windowEnd": "2026-11-20T09:00:09Z"},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "False", "reason": reason,
                        "message": "", "lastTransitionTime": "2026-11-20T08:00:00Z"}]},
        });
        testing::merge(&mut overrides, json!({"spec": spec, "status": status}));
        testing::batch(overrides)
    }

    /// One batch's state on every surface: the CLI's table, wide and JSON, the console's row (its
    /// words and colour) and detail, `kubectl get rb`'s STATE column (the printer column over what
    /// the engine writes), the metrics, and a notification when the state sends one. Returns what
    /// differs, and whether it notified.
    fn surfaces_disagree(case: &str, batch: &RotationBatch, now: Timestamp) -> (Vec<String>, bool) {
        use std::sync::Arc;

        use kube::CustomResourceExt as _;

        use crate::console::app::{App, Session, ViewKind};
        use crate::console::theme::{Theme, batch_state_style};
        use crate::engine::metrics::{Metrics, StateLabels};

        let state = batch.state();
        let label = state.label();
        let mut wrong = Vec::new();
        let mut check = |surface: &str, ok: bool, shown: String| {
            if !ok {
                wrong.push(format!("{case}: {surface} shows {shown:?}, not {label:?}"));
            }
        };
        // The CLI.
        let listed = printable(std::slice::from_ref(batch), &[None], now);
        for format in [OutputFormat::Table, OutputFormat::Wide] {
            let text = listed.render(&OutputArgs { format, no_headers: true }, "batches").unwrap_or_default();
            check(&format!("capdeck batches -o {}", format.label()), text.contains(&label), text);
        }
        let document = batch_json(batch, now);
        let text = document["state"].as_str().unwrap_or_default().to_string();
        check("-o json's state", text.starts_with(&label) && document["stateLabel"] == label, text);
        // The console: the Batches row (words and colour) and its detail.
        let batches = [Arc::new(batch.clone())];
        let snapshot = crate::readmodel::build(crate::readmodel::Sources {
            batches: &batches,
            ..crate::readmodel::Sources::cap_objects(&[], &[], &[], &[])
        });
        let session = Session {
            server: "https://api".into(),
            context: "c".into(),
            scope: "all namespaces".into(),
            user: None,
            readonly: true,
            demo_kubeconfig: None,
            log_dir: None,
        };
        let theme = Theme::default();
        let mut app = App::new(session, theme.clone(), Vec::new(), Default::default(), now);
        app.snapshot = Arc::new(snapshot);
        app.route.view = ViewKind::Batches;
        app.visible = vec![0];
        let row = crate::console::views::cells(&app, ViewKind::Batches, 0);
        let cell = row.as_ref().and_then(|row| row.cells.get(3));
        let text: String =
            cell.map(|line| line.spans.iter().map(|span| span.content.as_ref()).collect()).unwrap_or_default();
        check("the console's Batches row", text == label, text);
        let style = cell.and_then(|line| line.spans.first()).map(|span| span.style);
        let coloured = style == Some(batch_state_style(&theme, &state)) && style != Some(theme.base());
        check("the console's colour", coloured, format!("{style:?}"));
        let detail = crate::console::details::detail(&app).map(|(_, lines)| lines).unwrap_or_default();
        let line = detail.iter().find(|line| line.starts_with("state ")).cloned().unwrap_or_default();
        check("the console's detail", line.contains(&label), line);
        // kubectl: the CRD's printer column over the status the engine writes.
        let mut object = serde_json::to_value(batch).unwrap_or_default();
        let status = batch.status.clone().unwrap_or_default();
        object["status"]["state"] = crate::engine::writes::status_patch(batch, &status)["state"].clone();
        let crd = serde_json::to_value(RotationBatch::crd()).unwrap_or_default();
        let table = crate::sandbox::registry::from_crd(&crd)
            .map(|resource| crate::sandbox::views::table(&resource, &[Arc::new(object)], None, None))
            .unwrap_or_default();
        let column =
            table["columnDefinitions"].as_array().and_then(|columns| columns.iter().position(|c| c["name"] == "State"));
        let cell = column.map(|index| table["rows"][0]["cells"][index].clone()).unwrap_or_default();
        check("kubectl get rb's STATE", cell == label, cell.to_string());
        // The metrics.
        let metrics = Metrics::new();
        metrics.batch_states.get_or_create(&StateLabels::of(&state)).set(1);
        let labels = StateLabels::of(&state);
        let series = format!("capdeck_batch_states{{state=\"{}\",cause=\"{}\"}} 1", labels.state, labels.cause);
        let encoded = metrics.encode();
        check("the metrics", encoded.contains(&series) && labels.state == state.word(), series);
        // The notification, when this state sends one.
        let shared = Arc::new(batch.clone());
        let due = crate::engine::notify::due(std::slice::from_ref(&shared), &[], now).into_iter().next();
        if let Some(due) = &due {
            let payload = crate::engine::notify::Payload::new("prod", "engine", due, batch, now);
            check(
                "the notification",
                payload.text.contains(&format!("[{label}]")) && payload.state == label,
                payload.text,
            );
        }
        (wrong, due.is_some())
    }

    /// The invariant of one state everywhere: every batch the decision tables leave behind, and
    /// every state the engine can write, reads the same on every surface, with a colour.
    #[test]
    fn every_state_reads_the_same_on_every_surface() {
        use std::collections::BTreeSet;

        use crate::api::rotation_batch::BatchState;

        let now: Timestamp = "2026-11-23T12:00:00Z".parse().expect("time");
        let decided = crate::engine::reconcile::decide::testing::decided_batches();
        let produced: BTreeSet<String> = decided.iter().map(|(_, batch)| batch.state().label()).collect();
        let mut walked = decided;
        // What the decision does not write itself (a rollout's end, an undo's, a newer batch), as
        // the engine writes it.
        for state in BatchState::every() {
            let (phase, reasons) = state.written_as();
            for reason in reasons.iter().map(|r| r.as_str()).chain(reasons.is_empty().then_some("ANewerReason")) {
                let extra = json!({"waitingUntil": "2026-11-23T15:00:00Z"});
                walked.push((format!("{phase} + {reason}"), batch("b", phase.as_str(), reason, json!({}), extra)));
            }
        }
        let mut wrong = Vec::new();
        let mut notified = BTreeSet::new();
        for (case, batch) in &walked {
            let (differs, notifies) = surfaces_disagree(case, batch, now);
            wrong.extend(differs);
            if notifies {
                notified.insert(batch.state().label());
            }
        }
        assert!(wrong.is_empty(), "{} disagreements:\n{}", wrong.len(), wrong.join("\n"));
        // The walk reached every state, and the decision tables alone most of them.
        let walked_labels: BTreeSet<String> = walked.iter().map(|(_, batch)| batch.state().label()).collect();
        let every: BTreeSet<String> = BatchState::every().iter().map(BatchState::label).collect();
        assert_eq!(every.len(), BatchState::every().len(), "two states share a label");
        assert_eq!(walked_labels, every, "the walk and the states differ");
        for label in [
            "AwaitingApproval",
            "AwaitingApproval · storm guard",
            "Held · failure guard",
            "Waiting · outside window",
            "Frozen",
            "Cancelling",
            "Undoing",
        ] {
            assert!(produced.contains(label), "the decision tables never produce {label:?}: {produced:?}");
        }
        // Every state that pages someone was walked with its notification.
        for label in ["AwaitingApproval", "Held · failure guard", "AwaitingApproval · escalated: window too late"] {
            assert!(notified.contains(label), "{label} sent no notification: {notified:?}");
        }
        assert!(every.iter().all(|label| label.len() <= 64), "status.state holds at most 64 characters");
    }

    /// PHASE says what a batch waits for and when it goes on; WINDOW counts down only while the
    /// batch collects (not after a force, not once it is over); `-o json` has both.
    #[test]
    fn the_listing_says_what_each_batch_waits_for() {
        let now: Timestamp = "2026-11-20T09:00:00Z".parse().expect("time");
        let forced = json!({"force": {"by": "bob", "at": "2026-11-20T08:59:00Z"}});
        let batches = [
            batch(
                "waiting",
                "Waiting",
                "OutsideChangeWindow",
                json!({}),
                json!({"waitingUntil": "2026-11-20T12:12:00Z"}),
            ),
            batch("frozen", "Waiting", "Frozen", json!({}), json!({"waitingUntil": "2026-11-22T13:00:00Z"})),
            batch("late", "AwaitingApproval", "DeadlineBeforeChangeWindow", json!({}), json!({})),
            batch("unreadable", "Held", "ChangeWindowUnreadable", json!({}), json!({})),
            batch("forced-done", "Succeeded", "RolloutComplete", forced, json!({})),
            batch("collecting", "Collecting", "WindowOpen", json!({}), json!({})),
        ];
        let printable = printable(&batches, &[], now);
        let text = printable.table.render();
        let row = |name: &str| text.lines().find(|line| line.contains(&format!(" {name} "))).unwrap_or_default();
        assert!(row("waiting").contains("Waiting · outside window, opens in 3h12m"), "{text}");
        assert!(row("frozen").contains("Frozen · until in 2d4h"), "{text}");
        assert!(row("late").contains("AwaitingApproval · escalated: window too late"), "{text}");
        assert!(row("late").contains("required: window too late"), "{text}");
        assert!(row("unreadable").contains("Held · change windows unreadable"), "{text}");
        // The known bug: a forced, Succeeded batch still said `ends in 9s`.
        assert!(row("forced-done").contains("forced 60s ago") && !row("forced-done").contains("ends in"), "{text}");
        assert!(row("collecting").contains("ends in 9s"), "only a collecting batch counts down: {text}");

        let items = printable.document["items"].as_array().cloned().unwrap_or_default();
        let item = |name: &str| items.iter().find(|item| item["name"] == name).cloned().unwrap_or_default();
        assert_eq!(item("waiting")["state"], "Waiting · outside window, opens in 3h12m");
        assert_eq!(item("waiting")["waitingUntil"], "2026-11-20T12:12:00Z");
        assert_eq!(item("waiting")["phase"], "Waiting", "the phase stays the API's word");
        assert_eq!(item("frozen")["state"], "Frozen · until in 2d4h");
        assert_eq!(item("collecting")["waitingUntil"], Value::Null);
    }
}
