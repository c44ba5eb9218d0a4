//! CAPApplicationVersions. Enter shows the tenants on a version.

use ratatui::text::{Line, Span};
use serde_json::Value;

use super::detail_lines::{conditions, to_value};
use super::{RowCells, RowKey, SortKey, ViewSpec, age, age_key, state_style};
use crate::console::app::{App, Focus, Route, ViewKind};
use crate::console::table::Column;
use crate::readmodel::{Snapshot, VersionRow};

pub struct Versions;

const AGE: usize = 8;

impl ViewSpec for Versions {
    type Row = VersionRow;
    const TITLE: &'static str = "Versions";
    const ALIASES: &'static [&'static str] = &["versions", "cav"];
    const COLUMNS: &'static [Column] = &[
        Column::new("NAMESPACE", 3, 9, 12),
        Column::new("NAME", 0, 4, 40).whole(),
        Column::new("APPLICATION", 2, 8, 14),
        Column::new("VERSION", 0, 7, 12),
        Column::new("STATE", 0, 8, 12),
        Column::new("DEPLOY", 4, 6, 6),
        Column::new("JOBS", 4, 4, 4),
        Column::new("TENANTS", 1, 7, 7),
        Column::new("AGE", 1, 3, 6),
    ];

    fn rows(snapshot: &Snapshot) -> &[VersionRow] {
        &snapshot.versions
    }

    fn key(row: &VersionRow) -> RowKey {
        RowKey::object(&row.namespace, &row.name)
    }

    fn owner(row: &VersionRow) -> (&str, &str) {
        (&row.namespace, &row.application)
    }

    fn narrowed(row: &VersionRow, focus: &Focus) -> Option<bool> {
        match focus {
            Focus::Version { namespace, name } => Some(row.namespace == *namespace && row.name == *name),
            _ => None,
        }
    }

    fn search_text(row: &VersionRow) -> String {
        format!("{} {} {} {} {}", row.namespace, row.name, row.application, row.version, row.state)
    }

    fn cells(app: &App, row: &VersionRow) -> RowCells {
        let theme = &app.theme;
        RowCells::new(vec![
            Line::from(row.namespace.clone()),
            Line::from(row.name.clone()),
            Line::from(row.application.clone()),
            Line::from(Span::styled(
                format!("{}{}", row.version, if row.latest { " ★" } else { "" }),
                if row.latest { theme.accent() } else { theme.base() },
            )),
            Line::from(Span::styled(row.state.clone(), state_style(theme, &row.state))),
            Line::from(row.deployments.to_string()),
            Line::from(row.jobs.to_string()),
            Line::from(row.tenants.to_string()),
            Line::from(age(app, row.created)),
        ])
    }

    fn sort_key(_app: &App, row: &VersionRow, column: usize) -> Option<SortKey> {
        (column == AGE).then(|| age_key(row.created))
    }

    fn drill(row: &VersionRow) -> Option<Route> {
        Some(Route {
            view: ViewKind::Tenants,
            focus: Some(Focus::Version { namespace: row.namespace.clone(), name: row.name.clone() }),
        })
    }

    fn detail(app: &App, row: &VersionRow) -> (String, Vec<String>) {
        let mut lines = vec![
            format!("application     {}", row.application),
            format!("version         {}{}", row.version, if row.latest { " (latest Ready)" } else { "" }),
            format!("state           {}", row.state),
            format!("tenants on it   {}", row.tenants),
            format!("age             {}", age(app, row.created)),
            String::new(),
            "workloads".into(),
        ];
        for workload in &row.object.spec.workloads {
            let kind = match (&workload.deployment_definition, &workload.job_definition) {
                (Some(deployment), _) => format!("Deployment {}", deployment.type_),
                (None, Some(job)) => format!("Job {}", job.type_),
                (None, None) => "no definition".into(),
            };
            lines.push(format!("  {} ({kind}) services: {}", workload.name, workload.consumed_btp_services.join(", ")));
        }
        conditions(&mut lines, row.object.status.as_ref().map(|s| s.generic.conditions.as_slice()));
        (format!("Version {}/{}", row.namespace, row.name), lines)
    }

    fn yaml(_snapshot: &Snapshot, row: &VersionRow) -> Option<(String, Result<Value, String>)> {
        Some((format!("{}/{}", row.namespace, row.name), to_value(&*row.object)))
    }
}
