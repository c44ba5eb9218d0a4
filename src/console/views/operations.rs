//! CAPTenantOperations. Enter opens the detail with the steps.

use ratatui::text::{Line, Span};
use serde_json::Value;

use super::detail_lines::{conditions, to_value};
use super::{RowCells, RowKey, SortKey, ViewSpec, age, age_key, state_style};
use crate::console::app::{App, Focus};
use crate::console::table::Column;
use crate::readmodel::{OperationRow, Snapshot};

pub struct Operations;

const AGE: usize = 7;

impl ViewSpec for Operations {
    type Row = OperationRow;
    const TITLE: &'static str = "Tenant operations";
    const ALIASES: &'static [&'static str] = &["ops", "operations", "ctop"];
    const COLUMNS: &'static [Column] = &[
        Column::new("NAMESPACE", 4, 9, 12),
        Column::new("NAME", 0, 4, 40).whole(),
        Column::new("TENANT", 2, 8, 18),
        Column::new("OPERATION", 0, 9, 12),
        Column::new("STATE", 0, 8, 10),
        Column::new("STEP", 2, 4, 5),
        Column::new("ACTIVE JOB", 4, 10, 24),
        Column::new("AGE", 1, 3, 6),
        Column::new("MESSAGE", 3, 10, 80),
    ];

    fn rows(snapshot: &Snapshot) -> &[OperationRow] {
        &snapshot.operations
    }

    fn key(row: &OperationRow) -> RowKey {
        RowKey::object(&row.namespace, &row.name)
    }

    fn owner(row: &OperationRow) -> (&str, &str) {
        (&row.namespace, &row.application)
    }

    fn narrowed(row: &OperationRow, focus: &Focus) -> Option<bool> {
        match focus {
            Focus::Tenant { namespace, name } => Some(row.namespace == *namespace && row.tenant == *name),
            _ => None,
        }
    }

    fn search_text(row: &OperationRow) -> String {
        format!("{} {} {} {} {}", row.namespace, row.name, row.tenant, row.operation, row.state)
    }

    fn cells(app: &App, row: &OperationRow) -> RowCells {
        let theme = &app.theme;
        RowCells::new(vec![
            Line::from(row.namespace.clone()),
            Line::from(row.name.clone()),
            Line::from(row.tenant.clone()),
            Line::from(row.operation.clone()),
            Line::from(Span::styled(row.state.clone(), state_style(theme, &row.state))),
            Line::from(row.step()),
            Line::from(row.active_job.clone().unwrap_or_else(|| "-".into())),
            Line::from(age(app, row.created)),
            Line::from(Span::styled(row.message.clone(), theme.muted())),
        ])
    }

    fn sort_key(_app: &App, row: &OperationRow, column: usize) -> Option<SortKey> {
        (column == AGE).then(|| age_key(row.created))
    }

    fn detail(app: &App, row: &OperationRow) -> (String, Vec<String>) {
        let mut lines = vec![
            format!("tenant          {} ({})", row.tenant, row.application),
            format!("operation       {} → {}", row.operation, row.version),
            format!("state           {}", row.state),
            format!("step            {}", row.step()),
            format!("active job      {}", row.active_job.as_deref().unwrap_or("-")),
            format!("age             {}", age(app, row.created)),
        ];
        if !row.message.is_empty() {
            lines.push(format!("message         {}", row.message));
        }
        lines.push(String::new());
        lines.push("steps".into());
        for (position, (name, kind, continue_on_failure)) in row.steps.iter().enumerate() {
            let number = u32::try_from(position + 1).unwrap_or(u32::MAX);
            let marker = match row.current_step {
                Some(current) if current == number => "▶",
                Some(current) if current > number => "✓",
                _ => " ",
            };
            let tolerant = if *continue_on_failure { " (continues on failure)" } else { "" };
            lines.push(format!("  {marker} {number}. {name} [{kind}]{tolerant}"));
        }
        conditions(&mut lines, row.object.status.as_ref().map(|s| s.generic.conditions.as_slice()));
        (format!("Operation {}/{}", row.namespace, row.name), lines)
    }

    fn yaml(_snapshot: &Snapshot, row: &OperationRow) -> Option<(String, Result<Value, String>)> {
        Some((format!("{}/{}", row.namespace, row.name), to_value(&*row.object)))
    }
}
