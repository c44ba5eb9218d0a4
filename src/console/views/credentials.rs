//! Per consumed binding Secret: who writes it, its format, the rotation policy, when it rotates
//! next, when its old credentials die, the margin and the verdict (docs/CREDENTIALS.md).

use ratatui::text::{Line, Span};

use super::{RowCells, RowKey, SortKey, ViewSpec, relative, state_style, window};
use crate::console::app::App;
use crate::console::table::Column;
use crate::credentials::{CredentialReport, human_signed};
use crate::readmodel::Snapshot;

pub struct Credentials;

const NEXT_ROTATION: usize = 5;
const OLD_CREDENTIALS: usize = 6;
const MARGIN: usize = 7;

/// A margin in the console's relative format: `3h44m`, `-45m`.
fn signed_relative(seconds: i64) -> String {
    if seconds < 0 { format!("-{}", relative(-seconds)) } else { relative(seconds) }
}

/// `in 3h12m` / `5m ago` from the console's clock.
fn from_now(app: &App, time: Option<k8s_openapi::jiff::Timestamp>) -> String {
    time.map_or_else(|| "-".into(), |time| window(time, app.now))
}

impl ViewSpec for Credentials {
    type Row = CredentialReport;
    const TITLE: &'static str = "Credentials";
    const ALIASES: &'static [&'static str] = &["credentials", "creds", "cred"];
    const COLUMNS: &'static [Column] = &[
        Column::new("NAMESPACE", 2, 9, 20),
        Column::new("SECRET", 0, 10, 40).whole(),
        Column::new("APPLICATIONS", 3, 12, 30),
        Column::new("SOURCE", 5, 7, 7),
        Column::new("FORMAT", 4, 11, 11),
        Column::new("NEXT ROTATION", 4, 13, 13),
        Column::new("REVOCABLE", 1, 9, 12),
        Column::new("MARGIN", 1, 6, 8),
        Column::new("VERDICT", 0, 7, 7),
    ];

    fn rows(snapshot: &Snapshot) -> &[CredentialReport] {
        &snapshot.credentials
    }

    fn key(row: &CredentialReport) -> RowKey {
        RowKey::object(&row.namespace, &row.secret)
    }

    fn owner(row: &CredentialReport) -> (&str, &str) {
        (&row.namespace, row.applications.first().map_or("", String::as_str))
    }

    fn search_text(row: &CredentialReport) -> String {
        format!(
            "{} {} {} {} {} {}",
            row.namespace,
            row.secret,
            row.applications.join(" "),
            row.source.label(),
            row.verdict.as_str(),
            row.reasons.join(" ")
        )
    }

    fn cells(app: &App, row: &CredentialReport) -> RowCells {
        let verdict = row.verdict.as_str();
        RowCells::new(vec![
            Line::from(row.namespace.clone()),
            Line::from(row.secret.clone()),
            Line::from(row.applications.join(",")),
            Line::from(row.source.label()),
            Line::from(Span::styled(
                row.format.as_str(),
                state_style(&app.theme, if row.format.as_str() == "unreadable" { "unsafe" } else { "-" }),
            )),
            Line::from(from_now(app, row.rotation.as_ref().and_then(|rotation| rotation.next_due))),
            Line::from(from_now(app, row.earliest_revocation())),
            Line::from(row.margin_seconds.map_or_else(|| "-".into(), signed_relative)),
            Line::from(Span::styled(verdict, state_style(&app.theme, verdict))),
        ])
    }

    fn sort_key(_app: &App, row: &CredentialReport, column: usize) -> Option<SortKey> {
        match column {
            NEXT_ROTATION => Some(SortKey::time(row.rotation.as_ref().and_then(|rotation| rotation.next_due))),
            OLD_CREDENTIALS => Some(SortKey::time(row.earliest_revocation())),
            MARGIN => Some(SortKey::Number(row.margin_seconds.unwrap_or(i64::MAX))),
            _ => None,
        }
    }

    fn detail(app: &App, row: &CredentialReport) -> (String, Vec<String>) {
        let mut lines = vec![
            format!("applications    {}", row.applications.join(", ")),
            format!("source          {}", row.source.label()),
            format!("ServiceBinding  {}", row.service_binding.as_deref().unwrap_or("-")),
            format!("format          {}", row.format.as_str()),
        ];
        if let Some(rotation) = &row.rotation {
            lines.push(format!("policy          {}", rotation.policy_text()));
            lines.push(format!("last rotation   {}", from_now(app, rotation.last_rotation)));
            lines.push(format!(
                "next rotation   {} (at the latest {}: the operator's resync){}",
                from_now(app, rotation.next_due),
                from_now(app, rotation.next_due_latest),
                if rotation.in_progress { "; rotating now" } else { "" }
            ));
        }
        for old in &row.old_credentials {
            let hold = if old.pending_termination { " — on hold while the new binding is not Ready" } else { "" };
            lines.push(format!(
                "old credentials {} (Secret {}) {}{hold}",
                old.binding,
                old.secret,
                old.revocable_at
                    .map_or_else(|| "revocable at an unknown time".into(), |at| super::revocable(at, app.now))
            ));
        }
        // Which Deployments run an older copy of this Secret's credentials, and why.
        let old_consumers = app
            .snapshot
            .apps
            .iter()
            .filter(|app_row| app_row.namespace == row.namespace && row.applications.contains(&app_row.name))
            .flat_map(|app_row| &app_row.old_credentials)
            .filter(|old| old.secrets.contains(&row.secret));
        for old in old_consumers {
            lines.push(format!("runs old creds  {}", old.describe()));
        }
        lines.push(format!("margin          {}", row.margin_seconds.map_or_else(|| "-".into(), human_signed)));
        lines.push(format!("verdict         {}", row.verdict.as_str()));
        lines.push(String::new());
        lines.extend(row.reasons.iter().map(|reason| format!("· {reason}")));
        (format!("Credentials {}/{}", row.namespace, row.secret), lines)
    }
}
