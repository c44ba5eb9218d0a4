//! The fleet: one row per kube context and namespace with something open (or a context that
//! could not be read, saying why). Enter switches the console to that context and namespace, on
//! the row's batch; `d` shows everything the row knows.

use ratatui::text::{Line, Span};

use super::{RowCells, RowKey, SortKey, ViewSpec, state_style};
use crate::console::app::{App, Focus, Route, ViewKind};
use crate::console::table::Column;
use crate::fleet::{FleetRow, RowState, countdown};
use crate::readmodel::Snapshot;

pub struct Fleet;

/// Where Enter on a (read) fleet row opens, once in its context and namespace: the row's batch,
/// else its credentials, else the batches.
pub fn fleet_row_route(row: &FleetRow) -> Route {
    match (row.first_batch(), &row.namespace) {
        (Some(batch), Some(namespace)) => Route {
            view: ViewKind::Batches,
            focus: Some(Focus::Batch { namespace: namespace.clone(), name: batch.name.clone() }),
        },
        (None, Some(_)) if !row.credentials.is_empty() => Route { view: ViewKind::Credentials, focus: None },
        _ => Route { view: ViewKind::Batches, focus: None },
    }
}

const DEADLINE: usize = 4;

impl ViewSpec for Fleet {
    type Row = FleetRow;
    const TITLE: &'static str = "Fleet";
    const ALIASES: &'static [&'static str] = &["fleet"];
    // At 80 columns LEADER, STALLED, NEXT WINDOW and FROZEN give way (the detail pane has them); at 60 WHY and
    // CREDENTIALS too. Context names and the state word stay whole.
    const COLUMNS: &'static [Column] = &[
        Column::new("CONTEXT", 0, 9, 24).whole(),
        Column::new("NAMESPACE", 0, 9, 20),
        Column::new("STATE", 0, 11, 11),
        Column::new("BATCHES", 0, 10, 30),
        Column::new("DEADLINE", 1, 8, 18),
        Column::new("CREDENTIALS", 1, 11, 22),
        Column::new("FROZEN", 3, 6, 32),
        Column::new("NEXT WINDOW", 3, 11, 11),
        Column::new("STALLED", 3, 7, 7),
        Column::new("LEADER", 3, 10, 30),
        Column::new("WHY", 2, 12, 200),
    ];

    fn rows(snapshot: &Snapshot) -> &[FleetRow] {
        &snapshot.fleet
    }

    fn key(row: &FleetRow) -> RowKey {
        RowKey::of(&[&row.context, row.namespace_text()])
    }

    fn owner(row: &FleetRow) -> (&str, &str) {
        (row.namespace_text(), "")
    }

    fn search_text(row: &FleetRow) -> String {
        let batches: Vec<&str> = row.batches.iter().map(|b| b.name.as_str()).collect();
        format!("{} {} {} {}", row.context, row.namespace_text(), row.state.as_str(), batches.join(" "))
    }

    fn cells(app: &App, row: &FleetRow) -> RowCells {
        let theme = &app.theme;
        let state_colour = match row.state {
            RowState::Clear => theme.ok(),
            RowState::Open => theme.warning(),
            RowState::Unreachable | RowState::Forbidden => theme.error(),
        };
        let why = row.why_text();
        let cells = RowCells::new(vec![
            Line::from(row.context.clone()),
            Line::from(row.namespace_text().to_string()),
            Line::from(Span::styled(row.state.as_str(), state_colour)),
            Line::from(if row.state.is_read() { row.summary() } else { "-".into() }),
            // Labelled: a window end in the past is no missed deadline (`window ended 6m55s ago`).
            Line::from(row.deadline_short(app.now)),
            Line::from(Span::styled(
                row.credentials_text(),
                if row.credentials.iter().any(|c| c.verdict == "unsafe") {
                    state_style(theme, "unsafe")
                } else {
                    theme.base()
                },
            )),
            Line::from(if row.state.is_read() { row.frozen_text(app.now) } else { "-".into() }),
            Line::from(if row.state.is_read() { row.next_window_text(app.now) } else { "-".into() }),
            Line::from(if row.stalled.is_empty() { "-".into() } else { row.stalled.len().to_string() }),
            Line::from(row.leader.clone()),
            Line::from(why),
        ]);
        if row.state.is_read() { cells } else { cells.styled(theme.error()) }
    }

    fn sort_key(_app: &App, row: &FleetRow, column: usize) -> Option<SortKey> {
        (column == DEADLINE).then(|| SortKey::time(row.deadline()))
    }

    fn detail(app: &App, row: &FleetRow) -> (String, Vec<String>) {
        let mut lines = vec![
            format!("context         {}", row.context),
            format!("namespace       {}", row.namespace_text()),
            format!("state           {}", row.state.as_str()),
            format!("engine leader   {}", row.leader),
        ];
        if let Some(why) = &row.why {
            lines.push(format!("why             {why}"));
        }
        for batch in &row.batches {
            let deadline = batch.old_credentials_revocable.map_or_else(
                || format!("window ends {}", countdown(batch.window_end, app.now)),
                |at| format!("old credentials revocable {}", countdown(at, app.now)),
            );
            lines.push(format!(
                "batch           {} ({}) {} {} — {deadline}",
                batch.name, batch.application, batch.phase, batch.reason
            ));
        }
        for credential in &row.credentials {
            lines.push(format!("credentials     {} {}: {}", credential.secret, credential.verdict, credential.reason));
        }
        for freeze in row.freezes.iter().flatten() {
            let reason = freeze.reason.as_deref().map(|reason| format!(": {reason}")).unwrap_or_default();
            lines.push(format!("frozen          {} until {} by {}{reason}", freeze.target, freeze.until, freeze.by));
        }
        if row.state.is_read() {
            lines.push(format!("next window     {}", row.next_window_text(app.now)));
        }
        for stalled in &row.stalled {
            lines.push(format!("stalled         {stalled}"));
        }
        for old in &row.out_of_date {
            lines.push(format!("old credentials {}", old.describe()));
        }
        for note in &row.notes {
            lines.push(format!("note            {note}"));
        }
        if row.state.is_read() {
            lines.push(String::new());
            lines.push("Enter switches the console to this context and namespace.".into());
        }
        (format!("Fleet {}/{}", row.context, row.namespace_text()), lines)
    }
}
