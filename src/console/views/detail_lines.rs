//! Lines the detail panes of several views share: conditions, a batch's story, the tenants a
//! batch serves.

use serde::Serialize;
use serde_json::Value;

use super::{collection_window, relative, window};
use crate::api::change_window::AppliedWindows;
use crate::api::common::Condition;
use crate::console::app::App;
use crate::readmodel::{Snapshot, condition_text};

/// The tenants whose current version is one the batch restarts Deployments of.
pub fn tenants_served(snapshot: &Snapshot, row: &crate::readmodel::BatchRow) -> Vec<String> {
    let versions: std::collections::BTreeSet<&str> =
        row.object.restarts_or_planned().map(|d| d.version.as_str()).collect();
    snapshot
        .tenants
        .iter()
        .filter(|t| t.namespace == row.namespace && t.application == row.application)
        .filter(|t| t.current.as_ref().is_some_and(|current| versions.contains(current.name.as_str())))
        .map(|t| t.name.clone())
        .collect()
}

/// A batch's story: its state, window, deadline, approval, who did what, its change windows and
/// freeze, its Secrets and Deployments, its conditions.
pub fn batch_lines(lines: &mut Vec<String>, app: &App, row: &crate::readmodel::BatchRow) {
    let now = app.now;
    let batch = &row.object;
    lines.push(format!("application     {}", row.application));
    lines.push(format!("state           {}", row.state.text(now, &relative)));
    lines.push(format!("phase           {} ({})", row.phase, row.reason));
    if !row.message.is_empty() {
        lines.push(format!("                {}", row.message));
    }
    lines.push(format!("window          {}", collection_window(batch, now)));
    if let Some(revocable) = row.old_credentials_revocable {
        lines.push(format!("{} {}", crate::console::strings::OLD_CREDENTIALS, super::revocable(revocable, now)));
    }
    lines.push(format!("approval        {}", row.approval));
    lines.push(format!("blast radius    {}", row.blast_radius()));
    let who = |label: &str, action: &Option<crate::api::rotation_batch::UserAction>, lines: &mut Vec<String>| {
        if let Some(action) = action {
            let reason = action.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
            lines.push(format!("{label:<16}{} at {}{reason}", action.by, action.at.0));
        }
    };
    if let Some(approval) = &batch.spec.approval
        && let Some(by) = &approval.approved_by
    {
        let reason = approval.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
        let at = approval.approved_at.as_ref().map(|t| format!(" at {}", t.0)).unwrap_or_default();
        lines.push(format!("approved by     {by}{at}{reason}"));
    }
    who("forced by", &batch.spec.force, lines);
    who("held by", &batch.spec.hold, lines);
    who("cancelled by", &batch.spec.cancel, lines);
    window_lines(lines, app, &row.namespace, &row.application);
    lines.push(String::new());
    lines.push("rotated secrets".into());
    for secret in &batch.spec.secrets {
        lines.push(format!("  {} (service {}) rotated {}", secret.name, secret.service, secret.rotated_at.0));
    }
    if let Some(status) = &batch.status {
        if !status.deployments.is_empty() {
            lines.push(String::new());
            lines.push("deployments".into());
            for deployment in &status.deployments {
                let state = deployment.state.as_ref().map_or("-".to_string(), ToString::to_string);
                let message = deployment.message.as_deref().map(|m| format!(" — {m}")).unwrap_or_default();
                lines.push(format!(
                    "  {} [{}] {} {state}{message}",
                    deployment.name, deployment.version, deployment.action
                ));
            }
        }
        if let Some(planned) = row.object.planned() {
            lines.push(String::new());
            lines.push(format!(
                "deployments (planned when the window ended, {} ago; planned again when it may start)",
                relative(now.as_second() - planned.at.0.as_second())
            ));
            for deployment in &planned.deployments {
                lines.push(format!("  {} [{}] {}", deployment.name, deployment.version, deployment.action));
            }
        }
        if let Some(by) = &status.superseded_by {
            lines.push(format!("superseded by   {by}"));
        }
        conditions(lines, Some(status.conditions.as_slice()));
    }
}

/// How many openings of its change windows a detail pane lists.
const OPENINGS_SHOWN: usize = 3;

/// The change windows of `namespace/application`, where they come from, their next openings, and
/// the freeze that holds it, if one does.
pub fn window_lines(lines: &mut Vec<String>, app: &App, namespace: &str, application: &str) {
    use crate::console::strings;
    let now = app.now;
    let cluster = app.cluster_windows();
    lines.push(String::new());
    match crate::readmodel::applied_windows(&app.snapshot, namespace, application, cluster.flatten()) {
        None if cluster.is_none() => lines.push(format!("change windows  {}", strings::WINDOWS_CLUSTER_UNKNOWN)),
        None => lines.push(format!("change windows  {}", strings::NO_WINDOWS)),
        Some(applied @ AppliedWindows { windows: Err(_), .. }) => {
            let why = applied.unreadable().unwrap_or_default();
            lines.push(format!("change windows  unreadable: {why}"));
        }
        Some(AppliedWindows { source, windows: Ok(windows) }) => {
            lines.push(format!("change windows  {}", windows.text()));
            lines.push(format!("  from          {source}"));
            let openings = windows.next_openings(now, OPENINGS_SHOWN);
            if openings.is_empty() {
                lines.push(format!("next openings   {}", strings::ALWAYS_OPEN));
            }
            for (index, opening) in openings.iter().enumerate() {
                let label = if index == 0 { "next openings   " } else { "                " };
                let when = if opening.opens <= now {
                    format!("open now, closes {}", window(opening.closes, now))
                } else {
                    format!("opens {}", window(opening.opens, now))
                };
                lines.push(format!("{label}{} → {} ({when})", opening.opens, opening.closes));
            }
        }
    }
    match crate::readmodel::governing_freeze(&app.snapshot, app.freeze_namespace(), namespace, application, now) {
        Some(freeze) => {
            lines.push(format!("freeze          {} (ends {})", freeze.summary(), window(freeze.ends(), now)))
        }
        None => lines.push("freeze          none".into()),
    }
}

pub fn conditions(lines: &mut Vec<String>, conditions: Option<&[Condition]>) {
    let conditions = conditions.unwrap_or_default();
    lines.push(String::new());
    if conditions.is_empty() {
        lines.push("conditions      none".into());
        return;
    }
    lines.push("conditions".into());
    for condition in conditions {
        lines.push(format!("  {}", condition_text(condition)));
    }
}

pub fn to_value<T: Serialize>(object: &T) -> Result<Value, String> {
    serde_json::to_value(object).map_err(|error| format!("cannot render the object: {error}"))
}
