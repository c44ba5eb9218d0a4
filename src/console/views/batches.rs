//! RotationBatches. Enter shows the batch's rollouts; the batch keys act on the selected row.

use ratatui::text::{Line, Span};
use serde_json::Value;

use super::detail_lines::{batch_lines, tenants_served, to_value};
use super::{RowCells, RowKey, SortKey, ViewSpec, age, age_key, batch_state_style, batch_when};
use crate::api::ObjectKey;
use crate::console::app::{App, Focus, Route, ViewKind};
use crate::console::table::Column;
use crate::readmodel::{BatchRow, Snapshot};

pub struct Batches;

const WINDOW: usize = 4;
const AGE: usize = 8;

impl ViewSpec for Batches {
    type Row = BatchRow;
    const TITLE: &'static str = "Batches";
    const ALIASES: &'static [&'static str] = &["batches", "rb"];
    const COLUMNS: &'static [Column] = &[
        Column::new("NAMESPACE", 3, 9, 12),
        Column::new("NAME", 0, 4, 40).whole(),
        Column::new("APPLICATION", 2, 8, 14),
        Column::new("STATE", 0, 10, 44),
        Column::new("WINDOW", 1, 10, 16),
        Column::new("SECRETS", 4, 7, 7),
        Column::new("APPROVAL", 0, 8, 22),
        Column::new("DEPLOYMENTS", 1, 11, 16),
        Column::new("AGE", 2, 3, 6),
        Column::new("BLAST RADIUS", 4, 12, 60),
    ];
    const BATCH_KEYS: bool = true;
    const FREEZE_KEYS: bool = true;

    fn rows(snapshot: &Snapshot) -> &[BatchRow] {
        &snapshot.batches
    }

    fn key(row: &BatchRow) -> RowKey {
        RowKey::object(&row.namespace, &row.name)
    }

    fn owner(row: &BatchRow) -> (&str, &str) {
        (&row.namespace, &row.application)
    }

    fn narrowed(row: &BatchRow, focus: &Focus) -> Option<bool> {
        match focus {
            Focus::Batch { namespace, name } => Some(row.namespace == *namespace && row.name == *name),
            _ => None,
        }
    }

    fn search_text(row: &BatchRow) -> String {
        format!("{} {} {} {} {}", row.namespace, row.name, row.application, row.phase, row.state.label())
    }

    fn cells(app: &App, row: &BatchRow) -> RowCells {
        let theme = &app.theme;
        // A waiting batch says when it goes on; the others, where their window stands.
        let window_cell = batch_when(&row.object, &row.state, app.now);
        let broken = row.progress.contains("stalled") || row.progress.contains("failed");
        RowCells::new(vec![
            Line::from(row.namespace.clone()),
            Line::from(row.name.clone()),
            Line::from(row.application.clone()),
            Line::from(Span::styled(row.state.label(), batch_state_style(theme, &row.state))),
            Line::from(window_cell),
            Line::from(row.secrets.len().to_string()),
            Line::from(Span::styled(
                row.approval.clone(),
                if row.approval.starts_with("required") { theme.warning() } else { theme.base() },
            )),
            Line::from(Span::styled(row.progress.clone(), if broken { theme.error() } else { theme.base() })),
            Line::from(age(app, row.created)),
            Line::from(row.blast_radius()),
        ])
    }

    fn sort_key(_app: &App, row: &BatchRow, column: usize) -> Option<SortKey> {
        match column {
            WINDOW => Some(SortKey::Number(row.state.starts().unwrap_or(row.window_end).as_second())),
            AGE => Some(age_key(row.created)),
            _ => None,
        }
    }

    fn drill(row: &BatchRow) -> Option<Route> {
        Some(Route {
            view: ViewKind::Rollouts,
            focus: Some(Focus::Batch { namespace: row.namespace.clone(), name: row.name.clone() }),
        })
    }

    fn detail(app: &App, row: &BatchRow) -> (String, Vec<String>) {
        let mut lines = Vec::new();
        batch_lines(&mut lines, app, row);
        let served = tenants_served(&app.snapshot, row);
        if !served.is_empty() {
            const SHOWN: usize = 12;
            let more = served.len().saturating_sub(SHOWN);
            let mut names = served.into_iter().take(SHOWN).collect::<Vec<_>>().join(", ");
            if more > 0 {
                names.push_str(&format!(" and {more} more"));
            }
            lines.push(format!("tenants served  {names}"));
        }
        (format!("Batch {}/{}", row.namespace, row.name), lines)
    }

    fn yaml(_snapshot: &Snapshot, row: &BatchRow) -> Option<(String, Result<Value, String>)> {
        Some((format!("{}/{}", row.namespace, row.name), to_value(&*row.object)))
    }

    fn batch(row: &BatchRow) -> Option<ObjectKey> {
        Some(ObjectKey::new(&row.namespace, &row.name))
    }
}
