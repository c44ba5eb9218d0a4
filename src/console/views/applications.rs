//! CAPApplications: one row per application, with its open batch. Enter shows its versions.

use ratatui::text::{Line, Span};
use serde_json::Value;

use super::detail_lines::{conditions, to_value, window_lines};
use super::{DetailNeed, RowCells, RowKey, ViewSpec, batch_state_style, relative, state_style};
use crate::api::ObjectKey;
use crate::console::app::{App, Focus, Route, ViewKind};
use crate::console::table::Column;
use crate::readmodel::{AppRow, Snapshot};

pub struct Applications;

impl ViewSpec for Applications {
    type Row = AppRow;
    const TITLE: &'static str = "Applications";
    const ALIASES: &'static [&'static str] = &["apps", "applications", "ca"];
    const COLUMNS: &'static [Column] = &[
        Column::new("NAMESPACE", 3, 9, 12),
        Column::new("NAME", 0, 4, 30).whole(),
        Column::new("STATE", 0, 8, 12),
        Column::new("LATEST", 1, 6, 10),
        Column::new("VERSIONS", 4, 8, 8),
        Column::new("TENANTS", 2, 7, 8),
        Column::new("ROLLOUT", 4, 7, 16),
        Column::new("APPROVAL", 2, 8, 10),
        Column::new("BATCH", 0, 12, 60),
    ];
    const BATCH_KEYS: bool = true;
    const FREEZE_KEYS: bool = true;

    fn rows(snapshot: &Snapshot) -> &[AppRow] {
        &snapshot.apps
    }

    fn key(row: &AppRow) -> RowKey {
        RowKey::object(&row.namespace, &row.name)
    }

    fn owner(row: &AppRow) -> (&str, &str) {
        (&row.namespace, &row.name)
    }

    fn search_text(row: &AppRow) -> String {
        format!("{} {} {} {}", row.namespace, row.name, row.state, row.opt_in.label())
    }

    fn cells(app: &App, row: &AppRow) -> RowCells {
        let theme = &app.theme;
        let batch = row.batch.as_ref().map_or_else(
            || match row.old_credentials.len() {
                0 => Line::from(Span::styled("-", theme.muted())),
                n => Line::from(Span::styled(format!("{n} on old credentials"), theme.warning())),
            },
            |b| {
                // Its state, then when it goes on (`opens in 3h12m`), else where its window stands.
                let when = super::batch_when(&b.object, &b.state, app.now);
                let label = b.state.label();
                let text = if when == "-" { label } else { format!("{label} · {when}") };
                Line::from(Span::styled(text, batch_state_style(theme, &b.state)))
            },
        );
        RowCells::new(vec![
            Line::from(row.namespace.clone()),
            Line::from(row.name.clone()),
            Line::from(Span::styled(row.state.clone(), state_style(theme, &row.state))),
            Line::from(row.latest.clone().unwrap_or_else(|| "-".into())),
            Line::from(row.versions.to_string()),
            Line::from(Span::styled(
                format!("{}/{}", row.tenants_ready, row.tenants),
                if row.tenants_ready < row.tenants { theme.warning() } else { theme.base() },
            )),
            Line::from(row.opt_in.label()),
            Line::from(row.policy.label()),
            batch,
        ])
    }

    fn drill(row: &AppRow) -> Option<Route> {
        Some(Route {
            view: ViewKind::Versions,
            focus: Some(Focus::Application { namespace: row.namespace.clone(), name: row.name.clone() }),
        })
    }

    fn detail(app: &App, row: &AppRow) -> (String, Vec<String>) {
        let mut lines = vec![
            format!("state           {}", row.state),
            format!("latest version  {}", row.latest.as_deref().unwrap_or("none Ready")),
            format!("versions        {}", row.versions),
            format!("tenants         {}/{} ready", row.tenants_ready, row.tenants),
            format!("rollout on credential update  {}", row.opt_in.label()),
            format!("approval        {}", row.policy.label()),
        ];
        match &row.batch {
            Some(batch) => {
                let state = batch.state.text(app.now, &relative);
                lines.push(format!("open batch      {} ({state}, deployments {})", batch.name, batch.progress))
            }
            None => lines.push("open batch      none".into()),
        }
        for old in &row.old_credentials {
            lines.push(format!("old credentials {}", old.describe()));
        }
        window_lines(&mut lines, app, &row.namespace, &row.name);
        lines.push(String::new());
        lines.push("services (binding Secret: keys and sizes)".into());
        for service in &row.services {
            let keys = match &service.keys {
                Some(keys) if keys.is_empty() => "no data".to_string(),
                Some(keys) => keys.iter().map(|(key, size)| format!("{key} ({size} B)")).collect::<Vec<_>>().join(", "),
                None => "Secret not found (or outside capdeck's view)".to_string(),
            };
            lines.push(format!("  {} [{}] → {}: {keys}", service.name, service.class, service.secret));
        }
        match app.dependencies.get(&ObjectKey::new(&row.namespace, &row.name)) {
            Some(Ok(report)) => {
                lines.push(String::new());
                lines.push(format!(
                    "subscription dependencies ({} in the getDependencies answer)",
                    report.dependencies.len()
                ));
                for service in &report.services {
                    lines.push(format!("  {:<14} {}", service.service, service.reason));
                }
            }
            Some(Err(error)) => {
                lines.push(String::new());
                lines.push(format!("subscription dependencies  unknown: {error}"));
            }
            None => {
                lines.push(String::new());
                lines.push("subscription dependencies  working them out…".into());
            }
        }
        conditions(&mut lines, row.object.status.as_ref().map(|s| s.generic.conditions.as_slice()));
        (format!("Application {}/{}", row.namespace, row.name), lines)
    }

    fn detail_needs(row: &AppRow) -> Option<DetailNeed> {
        Some(DetailNeed::Dependencies { namespace: row.namespace.clone(), name: row.name.clone() })
    }

    fn yaml(_snapshot: &Snapshot, row: &AppRow) -> Option<(String, Result<Value, String>)> {
        Some((format!("{}/{}", row.namespace, row.name), to_value(&*row.object)))
    }

    fn batch(row: &AppRow) -> Option<ObjectKey> {
        row.batch.as_ref().map(|batch| ObjectKey::new(&row.namespace, &batch.name))
    }
}
