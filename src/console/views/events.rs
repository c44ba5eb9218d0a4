//! Events about CAP objects and batches, newest first.

use ratatui::text::Line;

use super::{RowCells, RowKey, SortKey, ViewSpec, age, age_key};
use crate::console::app::App;
use crate::console::table::Column;
use crate::readmodel::{EventRow, Snapshot};

pub struct Events;

const AGE: usize = 0;

impl ViewSpec for Events {
    type Row = EventRow;
    const TITLE: &'static str = "Events";
    const ALIASES: &'static [&'static str] = &["events", "ev"];
    const COLUMNS: &'static [Column] = &[
        Column::new("AGE", 0, 3, 6),
        Column::new("TYPE", 2, 7, 7),
        Column::new("REASON", 0, 10, 24),
        Column::new("OBJECT", 1, 10, 30),
        Column::new("NOTE", 0, 10, 300),
    ];

    fn rows(snapshot: &Snapshot) -> &[EventRow] {
        &snapshot.events
    }

    fn key(row: &EventRow) -> RowKey {
        RowKey::of(&[&row.namespace, &row.application, &row.reason, &format!("{:?}", row.time)])
    }

    fn owner(row: &EventRow) -> (&str, &str) {
        (&row.namespace, &row.application)
    }

    fn search_text(row: &EventRow) -> String {
        format!("{} {} {} {}", row.namespace, row.application, row.reason, row.note)
    }

    fn cells(app: &App, row: &EventRow) -> RowCells {
        let kind = if row.warning { "Warning" } else { "Normal" };
        RowCells::new(vec![
            Line::from(age(app, row.time)),
            Line::from(ratatui::text::Span::styled(kind, super::state_style(&app.theme, kind))),
            Line::from(row.reason.clone()),
            Line::from(format!("{}/{}", row.namespace, row.application)),
            Line::from(row.note.clone()),
        ])
    }

    fn sort_key(_app: &App, row: &EventRow, column: usize) -> Option<SortKey> {
        (column == AGE).then(|| age_key(row.time))
    }

    fn detail(app: &App, row: &EventRow) -> (String, Vec<String>) {
        let lines = vec![
            format!("type            {}", if row.warning { "Warning" } else { "Normal" }),
            format!("reason          {}", row.reason),
            format!("regarding       {}", row.application),
            format!("reported by     {}", row.controller),
            format!("age             {}", age(app, row.time)),
            String::new(),
            row.note.clone(),
        ];
        (format!("Event {}/{}", row.namespace, row.reason), lines)
    }
}
