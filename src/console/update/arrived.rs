//! What arrives from the runtime and how the state takes it: snapshots, the fleet, the Pods pane's
//! rows and logs, the connection, the leader and the user, the answers of writes.

use super::*;

/// An answer said in the footer.
pub(super) fn said(app: &mut App, level: Level, text: String) -> Vec<Command> {
    flash(app, level, text);
    Vec::new()
}

pub(super) fn resize(app: &mut App, width: u16, height: u16) -> Vec<Command> {
    app.viewport_rows = usize::from(height.saturating_sub(crate::console::queries::chrome_rows(height))).max(1);
    app.viewport_height = height;
    app.viewport_width = width;
    clamp(app);
    Vec::new()
}

pub(super) fn pods(
    app: &mut App,
    namespace: &str,
    deployment: &str,
    rows: Result<Vec<crate::readmodel::pods::PodRow>, String>,
) -> Vec<Command> {
    if let Overlay::Pods(pane) = &mut app.overlay {
        pane.rows_arrived(namespace, deployment, rows);
    }
    Vec::new()
}

pub(super) fn pod_log(app: &mut App, namespace: &str, pod: &str, lines: Result<Vec<String>, String>) -> Vec<Command> {
    if let Overlay::Pods(pane) = &mut app.overlay {
        pane.log_arrived(namespace, pod, lines);
    }
    Vec::new()
}

pub(super) fn snapshot(app: &mut App, mut snapshot: Arc<Snapshot>) -> Vec<Command> {
    // The fleet is a source of its own: a cluster snapshot carries no fleet rows.
    if snapshot.fleet.is_empty() && !app.snapshot.fleet.is_empty() {
        Arc::make_mut(&mut snapshot).fleet = app.snapshot.fleet.clone();
    }
    app.snapshot = snapshot;
    refresh(app);
    Vec::new()
}

pub(super) fn fleet(app: &mut App, rows: Vec<crate::fleet::FleetRow>) -> Vec<Command> {
    Arc::make_mut(&mut app.snapshot).fleet = rows;
    refresh(app);
    Vec::new()
}

pub(super) fn connection(app: &mut App, state: crate::cluster::stores::ConnectionState) -> Vec<Command> {
    if state.is_connected() && !app.connection.is_connected() {
        flash(app, Level::Info, strings::RECONNECTED.to_string());
    }
    // Newly refused kinds: what is forbidden and what that hides (the header keeps the count).
    let refused: Vec<&str> =
        state.forbidden.keys().filter(|kind| !app.connection.forbidden.contains_key(*kind)).copied().collect();
    if !refused.is_empty() {
        let all: Vec<&str> = state.forbidden.keys().copied().collect();
        flash(app, Level::Warning, strings::forbidden_kinds(&all));
    }
    app.connection = state;
    Vec::new()
}

pub(super) fn write_failure(app: &mut App, failure: Option<String>) -> Vec<Command> {
    if let Some(error) = &failure
        && app.write_failure.as_ref() != Some(error)
    {
        flash(app, Level::Error, format!("{}: {error}", strings::ENGINE_WRITE_FAILED));
    }
    app.write_failure = failure;
    Vec::new()
}

pub(super) fn theme(app: &mut App, theme: crate::console::theme::Theme) -> Vec<Command> {
    flash(app, Level::Info, format!("theme {}", theme.name));
    app.theme = theme;
    Vec::new()
}

pub(super) fn dependencies(
    app: &mut App,
    namespace: String,
    name: String,
    report: Result<crate::deps::DependencyReport, String>,
) -> Vec<Command> {
    app.dependencies.insert(crate::api::ObjectKey::new(namespace, name), report);
    // An open detail pane shows the answer at once (the scroll stays where it was).
    if let Overlay::Detail(pane) = &app.overlay {
        let scroll = pane.scroll;
        if let Some((title, lines)) = details::detail(app) {
            app.overlay = Overlay::Detail(TextPane { title, lines, scroll });
        }
    }
    Vec::new()
}
