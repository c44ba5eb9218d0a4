//! One row per Deployment a batch restarts or leaves alone, with its progress. Enter shows the
//! Deployment's ReplicaSets and Pods (`console::overlay::pods`), `d` the detail; the batch keys act on
//! the row's batch.

use ratatui::text::{Line, Span};
use serde_json::Value;

use super::detail_lines::to_value;
use super::{RowCells, RowKey, ViewSpec, rollout_state_style};
use crate::api::ObjectKey;
use crate::api::rotation_batch::{DeploymentAction, DeploymentRolloutState};
use crate::console::app::{App, Focus};
use crate::console::table::Column;
use crate::console::theme::Theme;
use crate::readmodel::{RolloutRow, Snapshot};

pub struct Rollouts;

impl ViewSpec for Rollouts {
    type Row = RolloutRow;
    const TITLE: &'static str = "Rollouts";
    const ALIASES: &'static [&'static str] = &["rollouts"];
    const COLUMNS: &'static [Column] = &[
        Column::new("NAMESPACE", 4, 9, 12),
        Column::new("BATCH", 0, 5, 40).whole(),
        Column::new("DEPLOYMENT", 0, 10, 40).whole(),
        Column::new("VERSION", 3, 7, 16),
        Column::new("ACTION", 3, 7, 9),
        Column::new("STATE", 0, 8, 8),
        Column::new("PROGRESS", 1, 14, 16),
        Column::new("MESSAGE", 2, 10, 120),
    ];
    const BATCH_KEYS: bool = true;

    fn rows(snapshot: &Snapshot) -> &[RolloutRow] {
        &snapshot.rollouts
    }

    fn workload(row: &RolloutRow) -> Option<ObjectKey> {
        Some(ObjectKey::new(&row.namespace, &row.deployment))
    }

    fn key(row: &RolloutRow) -> RowKey {
        RowKey::of(&[&row.namespace, &row.batch, &row.deployment])
    }

    fn owner(row: &RolloutRow) -> (&str, &str) {
        (&row.namespace, &row.application)
    }

    fn narrowed(row: &RolloutRow, focus: &Focus) -> Option<bool> {
        match focus {
            Focus::Version { namespace, name } => Some(row.namespace == *namespace && row.version == *name),
            Focus::Batch { namespace, name } => Some(row.namespace == *namespace && row.batch == *name),
            _ => None,
        }
    }

    fn search_text(row: &RolloutRow) -> String {
        format!("{} {} {} {:?}", row.namespace, row.batch, row.deployment, row.state)
    }

    fn cells(app: &App, row: &RolloutRow) -> RowCells {
        let theme = &app.theme;
        let state_text = row.state.as_ref().map_or_else(|| "-".to_string(), ToString::to_string);
        let (state_cell, stalled) = rollout_state_style(theme, row.state.as_ref());
        let cells = RowCells::new(vec![
            Line::from(row.namespace.clone()),
            Line::from(row.batch.clone()),
            Line::from(row.deployment.clone()),
            Line::from(row.version.clone()),
            Line::from(row.action.to_string()),
            Line::from(Span::styled(state_text.clone(), state_cell)),
            progress_bar(
                theme,
                row.action == DeploymentAction::Restart,
                row.updated,
                row.available,
                row.replicas,
                row.state.as_ref(),
            ),
            Line::from(Span::styled(row.message.clone(), if stalled { theme.error() } else { theme.muted() })),
        ]);
        if stalled { cells.styled(theme.error()) } else { cells }
    }

    fn detail(_app: &App, row: &RolloutRow) -> (String, Vec<String>) {
        let mut lines = vec![
            format!("batch           {}", row.batch),
            format!("application     {}", row.application),
            format!("version         {}", row.version),
            format!("action          {}", row.action),
            format!("state           {}", row.state.as_ref().map_or("-".to_string(), ToString::to_string)),
            format!("replicas        {} updated / {} available / {} desired", row.updated, row.available, row.replicas),
        ];
        if !row.message.is_empty() {
            lines.push(format!("message         {}", row.message));
        }
        (format!("Deployment {}/{}", row.namespace, row.deployment), lines)
    }

    /// The batch's YAML: a rollout is a part of its batch's status.
    fn yaml(snapshot: &Snapshot, row: &RolloutRow) -> Option<(String, Result<Value, String>)> {
        let batch = snapshot.batches.iter().find(|b| b.namespace == row.namespace && b.name == row.batch)?;
        Some((format!("{}/{}", batch.namespace, batch.name), to_value(&*batch.object)))
    }

    fn batch(row: &RolloutRow) -> Option<ObjectKey> {
        Some(ObjectKey::new(&row.namespace, &row.batch))
    }
}

/// `██████░░░░ 3/5`: available replicas of the new ReplicaSet out of the desired.
pub fn progress_bar(
    theme: &Theme,
    restarts: bool,
    updated: i32,
    available: i32,
    replicas: i32,
    state: Option<&DeploymentRolloutState>,
) -> Line<'static> {
    if !restarts {
        return Line::from(Span::styled("-", theme.muted()));
    }
    if replicas <= 0 && state != Some(&DeploymentRolloutState::Complete) {
        return Line::from(Span::styled("waiting", theme.muted()));
    }
    const WIDTH: i32 = 10;
    let done =
        if state == Some(&DeploymentRolloutState::Complete) { replicas.max(1) } else { updated.min(available).max(0) };
    let total = replicas.max(1);
    let filled = usize::try_from((done.min(total) * WIDTH) / total).unwrap_or(0);
    let empty = usize::try_from(WIDTH).unwrap_or(10).saturating_sub(filled);
    let style = match state {
        Some(DeploymentRolloutState::Stalled | DeploymentRolloutState::Failed) => theme.error(),
        Some(DeploymentRolloutState::Complete) => theme.ok(),
        _ => theme.info(),
    };
    Line::from(vec![
        Span::styled("█".repeat(filled), style),
        Span::styled("░".repeat(empty), theme.muted()),
        Span::raw(format!(" {}/{}", done.min(total), replicas)),
    ])
}
