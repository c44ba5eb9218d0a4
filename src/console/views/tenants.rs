//! CAPTenants. Enter shows the tenant's operations.

use ratatui::text::{Line, Span};
use serde_json::Value;

use super::detail_lines::{conditions, to_value};
use super::{RowCells, RowKey, ViewSpec, state_style};
use crate::console::app::{App, Focus, Route, ViewKind};
use crate::console::table::Column;
use crate::readmodel::{Snapshot, TenantRow};

pub struct Tenants;

impl ViewSpec for Tenants {
    type Row = TenantRow;
    const TITLE: &'static str = "Tenants";
    const ALIASES: &'static [&'static str] = &["tenants", "cat"];
    const COLUMNS: &'static [Column] = &[
        Column::new("NAMESPACE", 4, 9, 12),
        Column::new("NAME", 0, 4, 40).whole(),
        Column::new("APPLICATION", 3, 8, 14),
        Column::new("SUBDOMAIN", 3, 9, 24),
        Column::new("STATE", 0, 9, 17),
        Column::new("VERSION", 1, 7, 16),
        Column::new("UPGRADE", 4, 7, 7),
        Column::new("OPERATION", 2, 9, 30),
        Column::new("BLOCKED", 2, 7, 60),
    ];

    fn rows(snapshot: &Snapshot) -> &[TenantRow] {
        &snapshot.tenants
    }

    fn key(row: &TenantRow) -> RowKey {
        RowKey::object(&row.namespace, &row.name)
    }

    fn owner(row: &TenantRow) -> (&str, &str) {
        (&row.namespace, &row.application)
    }

    fn narrowed(row: &TenantRow, focus: &Focus) -> Option<bool> {
        match focus {
            Focus::Version { namespace, name } => {
                Some(row.namespace == *namespace && row.current.as_ref().is_some_and(|current| current.name == *name))
            }
            Focus::Tenant { namespace, name } => Some(row.namespace == *namespace && row.name == *name),
            _ => None,
        }
    }

    fn search_text(row: &TenantRow) -> String {
        format!("{} {} {} {} {}", row.namespace, row.name, row.application, row.subdomain, row.state)
    }

    fn cells(app: &App, row: &TenantRow) -> RowCells {
        let theme = &app.theme;
        RowCells::new(vec![
            Line::from(row.namespace.clone()),
            Line::from(row.name.clone()),
            Line::from(row.application.clone()),
            Line::from(row.subdomain.clone()),
            Line::from(Span::styled(row.state.clone(), state_style(theme, &row.state))),
            Line::from(version(row)),
            Line::from(row.strategy.clone()),
            Line::from(
                row.operation.as_ref().map_or_else(|| "-".to_string(), |(op, st, step)| format!("{op} {st} {step}")),
            ),
            Line::from(Span::styled(row.blocked.clone().unwrap_or_default(), theme.warning())),
        ])
    }

    fn drill(row: &TenantRow) -> Option<Route> {
        Some(Route {
            view: ViewKind::Operations,
            focus: Some(Focus::Tenant { namespace: row.namespace.clone(), name: row.name.clone() }),
        })
    }

    fn detail(app: &App, row: &TenantRow) -> (String, Vec<String>) {
        let current = row
            .current
            .as_ref()
            .map_or_else(|| "none".to_string(), |current| format!("{} ({})", current.semver, current.name));
        let mut lines = vec![
            format!("application     {}", row.application),
            format!("subdomain       {}", row.subdomain),
            format!("tenant id       {}", row.object.spec.tenant_id),
            format!("state           {}", row.state),
            format!("version         {current} → {}", if row.target.is_empty() { "-" } else { &row.target }),
            format!("upgrade         {}", row.strategy),
        ];
        if let Some((operation, state, step)) = &row.operation {
            lines.push(format!("last operation  {operation} {state} step {step}"));
        }
        if let Some(blocked) = &row.blocked {
            lines.push(format!("blocked         {blocked}"));
        }
        // The tenant's newest operation, step by step.
        let operation = app
            .snapshot
            .operations
            .iter()
            .filter(|op| op.namespace == row.namespace && op.tenant == row.name)
            .max_by_key(|op| op.created);
        if let Some(op) = operation {
            lines.push(String::new());
            lines.push(format!("operation {} ({} → {}, {})", op.name, op.operation, op.version, op.state));
            for (position, (name, kind, continue_on_failure)) in op.steps.iter().enumerate() {
                let number = u32::try_from(position + 1).unwrap_or(u32::MAX);
                let marker = match op.current_step {
                    Some(current) if number < current => "✓",
                    Some(current) if number == current => "▶",
                    _ => " ",
                };
                let tolerant = if *continue_on_failure { ", continueOnFailure" } else { "" };
                lines.push(format!("  {marker} {number}/{} {name} ({kind}{tolerant})", op.steps.len()));
            }
            lines.push(format!("  active job    {}", op.active_job.as_deref().unwrap_or("-")));
        }
        conditions(&mut lines, row.object.status.as_ref().map(|s| s.generic.conditions.as_slice()));
        (format!("Tenant {}/{}", row.namespace, row.name), lines)
    }

    fn yaml(_snapshot: &Snapshot, row: &TenantRow) -> Option<(String, Result<Value, String>)> {
        Some((format!("{}/{}", row.namespace, row.name), to_value(&*row.object)))
    }
}

/// `1.2.0`, or `1.2.0 → 1.3.0` while an upgrade is due.
fn version(row: &TenantRow) -> String {
    let current = row.current.as_ref().map_or("-", |current| current.semver.as_str());
    if row.target.is_empty() || row.target == current {
        current.to_string()
    } else {
        format!("{current} → {}", row.target)
    }
}
