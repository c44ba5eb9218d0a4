//! `update(&mut App, Msg) -> Vec<Command>`: the only place the console's state changes. Pure:
//! side effects are returned as commands for the runtime, whose results come back as messages.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use k8s_openapi::jiff::Timestamp;
use ratatui_textarea::TextArea;

use super::app::{Access, ActionDialog, App, Cursor, Flash, Input, Level, Overlay, Route, Sort, ViewKind};
use super::details;
use super::keymap::Action;
use super::pods::{LogPane, PodsPane};
use super::queries::{batch_action, complete, picker, selected_batch, selected_index, write_blocked};
use super::strings;
use super::theme::Theme;
use super::views::view;
use crate::actions::{ActionReport, BatchAction};
use crate::cluster::stores::ConnectionState;
use crate::engine::Role;
use crate::readmodel::Snapshot;
use crate::readmodel::pods::RowKind;

pub enum Msg {
    Key(KeyEvent),
    Resize {
        width: u16,
        height: u16,
    },
    Tick(Timestamp),
    Snapshot(Arc<Snapshot>),
    Connection(ConnectionState),
    Role(Role),
    /// Who holds the engine's Lease now.
    Leader(crate::cluster::leader::LeaderView),
    /// The attached engine's last failed write (None once a write succeeded again).
    WriteFailure(Option<String>),
    /// The Lease of a running Go CAP Operator, or None.
    GoOperator(Option<String>),
    Identity(String),
    Access {
        namespace: String,
        allowed: bool,
    },
    ActionDone(Result<ActionReport, String>),
    Theme(Result<Theme, String>),
    /// The runtime moved to another context or namespace scope: forget what belonged to the old one.
    Switched {
        context: String,
        scope: String,
    },
    /// The namespaces that exist, or why they cannot be listed.
    Namespaces(Result<Vec<String>, String>),
    /// The kubeconfig's contexts.
    Contexts(Vec<String>),
    /// An application's subscription dependencies, worked out for its detail pane.
    Dependencies {
        namespace: String,
        name: String,
        report: Result<crate::deps::DependencyReport, String>,
    },
    /// A Deployment's ReplicaSets and Pods, for the Pods pane.
    Pods {
        namespace: String,
        deployment: String,
        rows: Result<Vec<crate::readmodel::pods::PodRow>, String>,
    },
    /// A Pod's last log lines, or why they cannot be read.
    PodLog {
        namespace: String,
        pod: String,
        lines: Result<Vec<String>, String>,
    },
    /// The fleet's rows: every context read (`Command::WatchFleet` started the reading).
    Fleet(Vec<crate::fleet::FleetRow>),
    /// Go to a view once a context switch asked for by Enter in the fleet view has happened.
    Open(Route),
    Error(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Read every context of the fleet now and every 30s from then on (`Msg::Fleet` answers).
    WatchFleet,
    /// Enter on a fleet row: switch to the context (and namespace), then open `route` there.
    OpenContext {
        context: String,
        namespace: Option<String>,
        route: Route,
    },
    Act {
        namespace: String,
        batch: String,
        action: BatchAction,
        reason: Option<String>,
    },
    CheckAccess {
        namespace: String,
    },
    LoadTheme(String),
    SwitchNamespace(Option<String>),
    SwitchContext(String),
    /// List the namespaces for the `:ns` picker (`Msg::Namespaces` answers).
    ListNamespaces,
    /// Work a detail pane needs (`Msg::Dependencies` answers).
    Detail(super::views::DetailNeed),
    /// Read a Deployment's ReplicaSets and Pods (`Msg::Pods` answers).
    Pods {
        namespace: String,
        deployment: String,
    },
    /// Read a Pod's last log lines, `get pods/log` checked first (`Msg::PodLog` answers).
    PodLog {
        namespace: String,
        pod: String,
        container: Option<String>,
    },
    Quit,
}

/// How long a message stays in the footer; errors stay longer, to be read.
const FLASH_SECONDS: i64 = 8;
const FLASH_ERROR_SECONDS: i64 = 20;

pub fn update(app: &mut App, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Key(key) => handle_key(app, &key, std::time::Instant::now()),
        Msg::Resize { width, height } => {
            app.viewport_rows = usize::from(height.saturating_sub(super::queries::chrome_rows(height))).max(1);
            app.viewport_height = height;
            app.viewport_width = width;
            clamp(app);
            Vec::new()
        }
        Msg::Tick(now) => tick(app, now),
        Msg::Pods { namespace, deployment, rows } => {
            pods_arrived(app, &namespace, &deployment, rows);
            Vec::new()
        }
        Msg::PodLog { namespace, pod, lines } => {
            if let Overlay::Pods(pane) = &mut app.overlay
                && pane.namespace == namespace
                && let Some(log) = pane.log.as_mut().filter(|log| log.pod == pod)
            {
                log.lines = Some(lines);
                log.scroll = None; // the newest lines in view
            }
            Vec::new()
        }
        Msg::Snapshot(mut snapshot) => {
            // The fleet is a source of its own: a cluster snapshot carries no fleet rows.
            if snapshot.fleet.is_empty() && !app.snapshot.fleet.is_empty() {
                Arc::make_mut(&mut snapshot).fleet = app.snapshot.fleet.clone();
            }
            app.snapshot = snapshot;
            refresh(app);
            Vec::new()
        }
        Msg::Fleet(rows) => {
            Arc::make_mut(&mut app.snapshot).fleet = rows;
            refresh(app);
            Vec::new()
        }
        Msg::Open(route) => {
            navigate(app, route, false);
            check_access_for_selection(app)
        }
        Msg::Connection(state) => {
            if state.is_connected() && !app.connection.is_connected() {
                flash(app, Level::Info, strings::RECONNECTED.to_string());
            }
            app.connection = state;
            Vec::new()
        }
        Msg::Role(role) => {
            app.role = role;
            Vec::new()
        }
        Msg::Leader(holder) => {
            app.leader = Some(holder);
            Vec::new()
        }
        Msg::GoOperator(lease) => {
            app.go_operator = lease;
            Vec::new()
        }
        Msg::WriteFailure(failure) => {
            if let Some(error) = &failure
                && app.write_failure.as_ref() != Some(error)
            {
                flash(app, Level::Error, format!("{}: {error}", strings::ENGINE_WRITE_FAILED));
            }
            app.write_failure = failure;
            Vec::new()
        }
        Msg::Identity(user) => {
            app.session.user = Some(user);
            Vec::new()
        }
        Msg::Access { namespace, allowed } => access_known(app, namespace, allowed),
        Msg::ActionDone(Ok(report)) => {
            flash(app, Level::Info, format!("{}/{}: {}", report.namespace, report.batch, report.summary));
            Vec::new()
        }
        Msg::ActionDone(Err(error)) => {
            flash(app, Level::Error, error);
            Vec::new()
        }
        Msg::Theme(Ok(theme)) => {
            flash(app, Level::Info, format!("theme {}", theme.name));
            app.theme = theme;
            Vec::new()
        }
        Msg::Switched { context, scope } => {
            switched(app, context, scope);
            Vec::new()
        }
        Msg::Namespaces(names) => {
            app.namespaces = Some(names);
            Vec::new()
        }
        Msg::Contexts(contexts) => {
            app.contexts = contexts;
            Vec::new()
        }
        Msg::Dependencies { namespace, name, report } => {
            app.dependencies.insert((namespace, name), report);
            // An open detail pane shows the answer at once (the scroll stays where it was).
            if let Overlay::Detail { scroll, .. } = &app.overlay {
                let scroll = *scroll;
                if let Some((title, lines)) = details::detail(app) {
                    app.overlay = Overlay::Detail { title, lines, scroll };
                }
            }
            Vec::new()
        }
        Msg::Theme(Err(error)) | Msg::Error(error) => {
            flash(app, Level::Error, error);
            Vec::new()
        }
    }
}

fn tick(app: &mut App, now: Timestamp) -> Vec<Command> {
    app.now = now;
    let expired = |flash: &Flash| {
        let lasts = if flash.level == Level::Error { FLASH_ERROR_SECONDS } else { FLASH_SECONDS };
        now.as_second() - flash.at.as_second() >= lasts
    };
    if app.flash.as_ref().is_some_and(expired) {
        app.flash = None;
    }
    // An open Pods pane is read again every few seconds.
    match &mut app.overlay {
        Overlay::Pods(pane) if pane.due(now) => {
            pane.loading = true;
            pane.asked_at = now;
            vec![Command::Pods { namespace: pane.namespace.clone(), deployment: pane.deployment.clone() }]
        }
        _ => Vec::new(),
    }
}

/// The Pods pane's rows arrived: keep the selection on the same object when the rows move.
fn pods_arrived(
    app: &mut App,
    namespace: &str,
    deployment: &str,
    rows: Result<Vec<crate::readmodel::pods::PodRow>, String>,
) {
    if let Overlay::Pods(pane) = &mut app.overlay
        && pane.namespace == namespace
        && pane.deployment == deployment
    {
        let selected = pane.selected_row().map(|row| row.name.clone());
        pane.rows = Some(rows);
        pane.loading = false;
        let found =
            selected.and_then(|name| pane.rows.as_ref()?.as_ref().ok()?.iter().position(|row| row.name == name));
        pane.selected = found.unwrap_or(pane.selected).min(pane.row_count().saturating_sub(1));
    }
}

/// The answer to `Command::CheckAccess`; a write key pressed while it was asked goes on.
fn access_known(app: &mut App, namespace: String, allowed: bool) -> Vec<Command> {
    let access = if allowed {
        Access::Allowed
    } else {
        let user = app.session.user.clone().unwrap_or_else(|| "you".into());
        Access::Denied(format!("{user} may not patch rotationbatches in namespace {namespace}"))
    };
    app.access.insert(namespace.clone(), access);
    let Some((action, _, batch)) = app.pending_write.take_if(|(_, pending, _)| *pending == namespace) else {
        return Vec::new();
    };
    if selected_batch(app) == Some((namespace, batch)) { open_dialog(app, action) } else { Vec::new() }
}

/// Forget what belonged to the old context or scope (the fleet's rows stay: they are every
/// context's).
fn switched(app: &mut App, context: String, scope: String) {
    flash(app, Level::Info, format!("now {scope} in context {context}"));
    app.session.context = context;
    app.session.scope = scope;
    let fleet = app.snapshot.fleet.clone();
    app.snapshot = Arc::new(Snapshot { fleet, ..Snapshot::default() });
    app.access.clear();
    app.back.clear();
    app.cursors.clear();
    app.route.focus = None;
    app.filter.clear();
    refresh(app);
}

pub fn flash(app: &mut App, level: Level, text: String) {
    app.flash = Some(Flash { text, level, at: app.now });
}

// ----- rows -----------------------------------------------------------------------------------

fn row_key(snapshot: &Snapshot, kind: ViewKind, index: usize) -> Option<(String, String)> {
    view(kind).key(snapshot, index)
}

/// Recompute the visible rows of the current route and keep the selection on the same object.
/// The `/` filter, as k9s reads it: a case-insensitive regular expression, `!` in front for the
/// rows that do not match. Text that is not a valid expression matches as plain text, and the
/// title line says why.
pub struct RowFilter {
    inverse: bool,
    pattern: Result<regex::Regex, String>,
    text: String,
}

impl RowFilter {
    pub fn parse(filter: &str) -> Self {
        let (inverse, text) = match filter.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, filter),
        };
        let pattern =
            regex::RegexBuilder::new(text).case_insensitive(true).size_limit(1 << 20).build().map_err(|error| {
                match error {
                    regex::Error::Syntax(text) => text.lines().last().unwrap_or_default().trim().to_string(),
                    other => other.to_string(),
                }
            });
        Self { inverse, pattern, text: text.to_lowercase() }
    }

    pub fn matches(&self, row_text: &str) -> bool {
        let found = match &self.pattern {
            Ok(pattern) => pattern.is_match(row_text),
            Err(_) => row_text.contains(&self.text),
        };
        found != self.inverse
    }

    /// Why the filter is matched as plain text, if it is.
    pub fn error(&self) -> Option<&str> {
        self.pattern.as_ref().err().map(String::as_str)
    }
}

pub fn refresh(app: &mut App) {
    let view = app.route.view;
    let filter = (!app.filter.is_empty()).then(|| RowFilter::parse(&app.filter));
    app.filter_error =
        filter.as_ref().and_then(|f| f.error().map(|why| format!("invalid regex ({why}): matching the text")));
    let snapshot = Arc::clone(&app.snapshot);
    let spec = super::views::view(view);
    app.visible = (0..spec.len(&snapshot))
        .filter(|&index| app.route.focus.as_ref().is_none_or(|focus| spec.in_focus(&snapshot, index, focus)))
        .filter(|&index| {
            filter.as_ref().is_none_or(|filter| filter.matches(&spec.search_text(&snapshot, index).unwrap_or_default()))
        })
        .collect();
    sort_visible(app);
    let mut cursor = app.cursor();
    if let Some(key) = &cursor.key
        && let Some(position) =
            app.visible.iter().position(|&index| row_key(&snapshot, view, index).as_ref() == Some(key))
    {
        cursor.selected = position;
    }
    app.cursors.insert(app.route.clone(), cursor);
    clamp(app);
}

/// Order the visible rows by the view's sort, if it has one (stable: equal keys keep the
/// model's order).
fn sort_visible(app: &mut App) {
    let Some(sort) = app.sorts.get(&app.route.view).copied() else { return };
    let spec = view(app.route.view);
    let mut keyed: Vec<(Option<super::views::SortKey>, usize)> =
        app.visible.iter().map(|&index| (spec.sort_key(app, index, sort.column), index)).collect();
    keyed.sort_by(|a, b| if sort.descending { b.0.cmp(&a.0) } else { a.0.cmp(&b.0) });
    app.visible = keyed.into_iter().map(|(_, index)| index).collect();
}

fn set_sort(app: &mut App, sort: Option<Sort>) {
    match sort {
        Some(sort) => {
            app.sorts.insert(app.route.view, sort);
        }
        None => {
            app.sorts.remove(&app.route.view);
        }
    }
    refresh(app);
}

/// Keep the selection inside the rows and the offset around the selection.
fn clamp(app: &mut App) {
    let rows = app.viewport_rows.max(1);
    let count = app.visible.len();
    let mut cursor = app.cursor();
    cursor.selected = cursor.selected.min(count.saturating_sub(1));
    if cursor.selected < cursor.offset {
        cursor.offset = cursor.selected;
    } else if cursor.selected >= cursor.offset + rows {
        cursor.offset = cursor.selected + 1 - rows;
    }
    cursor.offset = cursor.offset.min(count.saturating_sub(rows));
    cursor.key = app.visible.get(cursor.selected).and_then(|&index| row_key(&app.snapshot, app.route.view, index));
    app.cursors.insert(app.route.clone(), cursor);
}

fn set_selected(app: &mut App, selected: usize) {
    let mut cursor = app.cursor();
    cursor.selected = selected;
    app.cursors.insert(app.route.clone(), cursor);
    clamp(app);
}

fn navigate(app: &mut App, route: Route, remember: bool) {
    if route == app.route {
        return;
    }
    if remember {
        app.back.push(app.route.clone());
    }
    app.route = route;
    app.filter.clear();
    refresh(app);
}

// ----- keys -----------------------------------------------------------------------------------

/// `at` is when the key arrived: keys in the burst that closed a dialog are swallowed.
pub fn handle_key(app: &mut App, key: &KeyEvent, at: std::time::Instant) -> Vec<Command> {
    if key.kind == crossterm::event::KeyEventKind::Release {
        return Vec::new();
    }
    // Control keys (Ctrl-C quits) are never typed as part of a reason: never swallowed.
    let control = key.modifiers.contains(KeyModifiers::CONTROL);
    if let Some(last) = app.burst_guard.filter(|_| !control) {
        if at.saturating_duration_since(last) < super::app::BURST_PAUSE {
            app.burst_guard = Some(at);
            return Vec::new();
        }
        app.burst_guard = None;
    }
    if matches!(app.overlay, Overlay::Dialog(_)) {
        return dialog_key(app, key, at);
    }
    if app.input != Input::None {
        return input_key(app, key);
    }
    let action = app.keymap.action(key);
    if matches!(app.overlay, Overlay::Pods(_)) {
        // Ctrl-C quits from anywhere in the pane; q and Esc go back a level.
        if control && key.code == KeyCode::Char('c') {
            app.quit = true;
            return vec![Command::Quit];
        }
        return pods_key(app, action);
    }
    let help_open = matches!(app.overlay, Overlay::Help { .. });
    match &mut app.overlay {
        Overlay::Help { scroll } | Overlay::Detail { scroll, .. } | Overlay::Yaml { scroll, .. } => {
            match action {
                Some(Action::Back | Action::Quit) => app.overlay = Overlay::None,
                Some(Action::Help) if help_open => app.overlay = Overlay::None,
                Some(Action::Down) => *scroll += 1,
                Some(Action::Up) => *scroll = scroll.saturating_sub(1),
                Some(Action::PageDown) => *scroll += app.viewport_rows,
                Some(Action::PageUp) => *scroll = scroll.saturating_sub(app.viewport_rows),
                Some(Action::Top) => *scroll = 0,
                Some(Action::Bottom) => *scroll = usize::MAX,
                _ => {}
            }
            // Keep the scroll inside the text, so ↑ after G moves at once.
            let lines = match &app.overlay {
                Overlay::Help { .. } => {
                    super::help::lines(app, super::draw::popup_text_width(app.viewport_width)).len()
                }
                Overlay::Detail { lines, .. } | Overlay::Yaml { lines, .. } => lines.len(),
                Overlay::None | Overlay::Dialog(_) | Overlay::Pods(_) => 0,
            };
            let last = lines.saturating_sub(super::queries::popup_rows(app.viewport_height));
            if let Overlay::Help { scroll } | Overlay::Detail { scroll, .. } | Overlay::Yaml { scroll, .. } =
                &mut app.overlay
            {
                *scroll = (*scroll).min(last);
            }
            return Vec::new();
        }
        Overlay::None | Overlay::Dialog(_) | Overlay::Pods(_) => {}
    }
    let Some(action) = action else {
        return Vec::new();
    };
    if action.writes() {
        return open_dialog(app, action);
    }
    match action {
        Action::Up => set_selected(app, app.cursor().selected.saturating_sub(1)),
        Action::Down => set_selected(app, (app.cursor().selected + 1).min(app.visible.len().saturating_sub(1))),
        Action::Top => set_selected(app, 0),
        Action::Bottom => set_selected(app, app.visible.len().saturating_sub(1)),
        Action::PageUp => set_selected(app, app.cursor().selected.saturating_sub(app.viewport_rows)),
        Action::PageDown => {
            set_selected(app, (app.cursor().selected + app.viewport_rows).min(app.visible.len().saturating_sub(1)))
        }
        Action::Enter => return drill_down(app),
        Action::Back => {
            if !app.filter.is_empty() {
                app.filter.clear();
                refresh(app);
            } else if let Some(previous) = app.back.pop() {
                app.route = previous;
                refresh(app);
            }
        }
        Action::NextView | Action::PreviousView => {
            let views = ViewKind::ALL;
            let current = views.iter().position(|v| *v == app.route.view).unwrap_or(0);
            let next = if action == Action::NextView {
                (current + 1) % views.len()
            } else {
                (current + views.len() - 1) % views.len()
            };
            let route = Route { view: views[next], focus: app.route.focus.clone() };
            navigate(app, route, false);
            return watch_fleet_if_shown(app).into_iter().collect();
        }
        Action::Filter => app.input = Input::Filter(app.filter.clone()),
        Action::Command => app.input = Input::Command(String::new()),
        Action::Help => app.overlay = Overlay::Help { scroll: 0 },
        Action::Detail => return open_detail(app),
        Action::Yaml => match details::yaml(app) {
            Some(Ok((title, lines))) => app.overlay = Overlay::Yaml { title, lines, scroll: 0 },
            Some(Err(error)) => flash(app, Level::Error, error),
            None => flash(app, Level::Info, strings::NO_YAML.to_string()),
        },
        Action::Quit => {
            app.quit = true;
            return vec![Command::Quit];
        }
        Action::Wide => {
            app.wide = !app.wide;
            app.column_offset = 0;
        }
        Action::ScrollLeft => app.column_offset = app.column_offset.saturating_sub(1),
        Action::ScrollRight => {
            if !app.wide {
                app.wide = true;
            }
            let columns = super::views::columns(app.route.view).len();
            app.column_offset = (app.column_offset + 1).min(columns.saturating_sub(1));
        }
        Action::Sort => {
            let columns = view(app.route.view).columns().len();
            let next = match app.sorts.get(&app.route.view) {
                None => Some(0),
                Some(sort) if sort.column + 1 < columns => Some(sort.column + 1),
                Some(_) => None,
            };
            set_sort(app, next.map(|column| Sort { column, descending: false }));
        }
        Action::SortReverse => {
            let sort = match app.sorts.get(&app.route.view) {
                Some(sort) => Sort { descending: !sort.descending, ..*sort },
                None => Sort { column: 0, descending: true },
            };
            set_sort(app, Some(sort));
        }
        Action::Logs => flash(app, Level::Info, strings::LOGS_WHERE.to_string()),
        Action::Approve | Action::Force | Action::Hold | Action::Cancel | Action::Retry | Action::Undo => {}
    }
    check_access_for_selection(app)
}

/// Ask once per namespace whether we may write batches there (so keys can say why not).
fn check_access_for_selection(app: &mut App) -> Vec<Command> {
    if app.session.readonly {
        return Vec::new();
    }
    let Some((namespace, _)) = selected_batch(app) else { return Vec::new() };
    if app.access.contains_key(&namespace) {
        return Vec::new();
    }
    app.access.insert(namespace.clone(), Access::Checking);
    vec![Command::CheckAccess { namespace }]
}

fn drill_down(app: &mut App) -> Vec<Command> {
    let Some(index) = selected_index(app) else { return Vec::new() };
    if app.route.view == ViewKind::Fleet {
        return open_fleet_row(app, index);
    }
    if let Some((namespace, deployment)) = view(app.route.view).workload(&app.snapshot, index) {
        app.overlay = Overlay::Pods(Box::new(PodsPane::new(namespace.clone(), deployment.clone(), app.now)));
        return vec![Command::Pods { namespace, deployment }];
    }
    match view(app.route.view).drill(&app.snapshot, index) {
        Some(route) => {
            navigate(app, route, true);
            check_access_for_selection(app)
        }
        None => open_detail(app),
    }
}

/// The fleet view is read once it is first shown (and from then on, every 30s).
fn watch_fleet_if_shown(app: &mut App) -> Option<Command> {
    (app.route.view == ViewKind::Fleet && !app.fleet_watched).then(|| {
        app.fleet_watched = true;
        Command::WatchFleet
    })
}

/// Enter on a fleet row: that context and namespace, on the row's batch (else its credentials).
fn open_fleet_row(app: &mut App, index: usize) -> Vec<Command> {
    let Some(row) = app.snapshot.fleet.get(index) else { return Vec::new() };
    if !row.state.is_read() {
        let why = row.why.clone().unwrap_or_default();
        flash(app, Level::Error, format!("context {} cannot be opened: {why}", row.context));
        return Vec::new();
    }
    let route = match (row.first_batch(), &row.namespace) {
        (Some(batch), Some(namespace)) => Route {
            view: ViewKind::Batches,
            focus: Some(super::app::Focus::Batch { namespace: namespace.clone(), name: batch.name.clone() }),
        },
        (None, Some(_)) if !row.credentials.is_empty() => Route { view: ViewKind::Credentials, focus: None },
        _ => Route { view: ViewKind::Batches, focus: None },
    };
    vec![Command::OpenContext { context: row.context.clone(), namespace: row.namespace.clone(), route }]
}

/// Keys in the Pods pane: move, `l` for the selected Pod's log, Esc back (from the log to the
/// Pods, from the Pods to the view).
fn pods_key(app: &mut App, action: Option<Action>) -> Vec<Command> {
    let height = app.viewport_height;
    let page = app.viewport_rows;
    let Overlay::Pods(pane) = &mut app.overlay else { return Vec::new() };
    if let Some(log) = pane.log.as_mut() {
        let rows = super::queries::popup_rows(height);
        let len = match &log.lines {
            Some(Ok(lines)) => lines.len(),
            _ => 0,
        };
        let end = len.saturating_sub(rows);
        let at = log.scroll.unwrap_or(end);
        let to = match action {
            Some(Action::Back | Action::Quit | Action::Logs) => {
                pane.log = None;
                return Vec::new();
            }
            Some(Action::Down) => at.saturating_add(1),
            Some(Action::Up) => at.saturating_sub(1),
            Some(Action::PageDown) => at.saturating_add(page),
            Some(Action::PageUp) => at.saturating_sub(page),
            Some(Action::Top) => 0,
            Some(Action::Bottom) => end,
            _ => return Vec::new(),
        };
        // At the end it follows the end (a resize keeps the newest lines in view).
        log.scroll = (to < end).then_some(to);
        return Vec::new();
    }
    let last = pane.row_count().saturating_sub(1);
    match action {
        Some(Action::Back | Action::Quit) => app.overlay = Overlay::None,
        Some(Action::Down) => pane.selected = (pane.selected + 1).min(last),
        Some(Action::Up) => pane.selected = pane.selected.saturating_sub(1),
        Some(Action::PageDown) => pane.selected = (pane.selected + page).min(last),
        Some(Action::PageUp) => pane.selected = pane.selected.saturating_sub(page),
        Some(Action::Top) => pane.selected = 0,
        Some(Action::Bottom) => pane.selected = last,
        Some(Action::Logs) => {
            let pod = pane.selected_row().filter(|row| row.kind == RowKind::Pod).cloned();
            let Some(pod) = pod else {
                flash(app, Level::Info, strings::SELECT_A_POD.to_string());
                return Vec::new();
            };
            pane.log = Some(LogPane {
                pod: pod.name.clone(),
                container: pod.log_container.clone(),
                lines: None,
                scroll: None,
            });
            return vec![Command::PodLog {
                namespace: pane.namespace.clone(),
                pod: pod.name,
                container: pod.log_container,
            }];
        }
        _ => {}
    }
    Vec::new()
}

/// Open the selected row's detail pane, and ask for what it needs worked out.
fn open_detail(app: &mut App) -> Vec<Command> {
    let mut commands = check_access_for_selection(app);
    let Some(index) = selected_index(app) else {
        tracing::debug!(view = ?app.route.view, rows = app.visible.len(), "no row to show in detail");
        return commands;
    };
    if let Some((title, lines)) = details::detail(app) {
        app.overlay = Overlay::Detail { title, lines, scroll: 0 };
        commands.extend(view(app.route.view).detail_needs(&app.snapshot, index).map(Command::Detail));
    }
    commands
}

/// What a key does to the `/` or `:` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineEdit {
    Type(char),
    /// Backspace, Ctrl-H.
    DeleteChar,
    /// Ctrl-W: the word before the cursor (and the spaces after it).
    DeleteWord,
    /// Ctrl-U: everything before the cursor (the cursor is always at the end).
    Clear,
}

/// The edit a key makes on an input line, as in a shell; `None` for keys that are no edit. A
/// Ctrl chord never types its letter (Ctrl+Alt with a symbol does: that is AltGr on Windows).
fn line_edit(key: &KeyEvent) -> Option<LineEdit> {
    let control = key.modifiers.contains(KeyModifiers::CONTROL);
    let altgr = |ch: char| key.modifiers.contains(KeyModifiers::ALT) && !ch.is_ascii_alphanumeric();
    match key.code {
        KeyCode::Backspace => Some(LineEdit::DeleteChar),
        KeyCode::Char(ch) if control && !altgr(ch) => match ch.to_ascii_lowercase() {
            'h' => Some(LineEdit::DeleteChar),
            'w' => Some(LineEdit::DeleteWord),
            'u' => Some(LineEdit::Clear),
            _ => None,
        },
        KeyCode::Char(ch) => Some(LineEdit::Type(ch)),
        _ => None,
    }
}

fn apply_edit(text: &mut String, edit: LineEdit) {
    match edit {
        LineEdit::Type(ch) => text.push(ch),
        LineEdit::DeleteChar => {
            text.pop();
        }
        LineEdit::DeleteWord => {
            let word_end = text.trim_end().len();
            let word_start = text[..word_end].rfind(char::is_whitespace).map_or(0, |space| space + 1);
            text.truncate(word_start);
        }
        LineEdit::Clear => text.clear(),
    }
}

fn input_key(app: &mut App, key: &KeyEvent) -> Vec<Command> {
    let ctrl_c = key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
    match (&mut app.input, key.code) {
        (_, _) if ctrl_c => {
            app.input = Input::None;
        }
        (Input::Filter(_), KeyCode::Esc) => {
            app.input = Input::None;
            app.filter.clear();
            refresh(app);
        }
        (Input::Filter(_), KeyCode::Enter) => app.input = Input::None,
        (Input::Filter(text), _) => {
            if let Some(edit) = line_edit(key) {
                apply_edit(text, edit);
                app.filter = text.clone();
                refresh(app);
            }
        }
        (Input::Command(_), KeyCode::Esc) => app.input = Input::None,
        (Input::Command(text), KeyCode::Tab | KeyCode::BackTab) => {
            let text = text.clone();
            let next = match complete(app, &text) {
                Some(completed) if completed != text => Some(completed),
                // Nothing more in common: Tab walks the picker's list (Shift-Tab backwards).
                _ => {
                    let pool = picker(app, &text);
                    let count = pool.len();
                    let position = pool.iter().position(|candidate| *candidate == text);
                    (count > 0).then(|| {
                        let index = match (position, key.code) {
                            (Some(i), KeyCode::BackTab) => (i + count - 1) % count,
                            (Some(i), _) => (i + 1) % count,
                            (None, KeyCode::BackTab) => count - 1,
                            (None, _) => 0,
                        };
                        pool[index].clone()
                    })
                }
            };
            if let Some(next) = next {
                app.input = Input::Command(next);
            }
        }
        (Input::Command(text), KeyCode::Enter) => {
            let line = text.trim().to_string();
            app.input = Input::None;
            return run_command(app, &line);
        }
        (Input::Command(text), _) => {
            if let Some(edit) = line_edit(key) {
                apply_edit(text, edit);
                // `:ns ` opens the namespace picker: ask the API server what exists.
                if matches!(edit, LineEdit::Type(_)) && text == "ns " {
                    return vec![Command::ListNamespaces];
                }
            }
        }
        (Input::None, _) => {}
    }
    Vec::new()
}

fn run_command(app: &mut App, line: &str) -> Vec<Command> {
    let mut words = line.split_whitespace();
    let Some(command) = words.next() else { return Vec::new() };
    let argument = words.next();
    if let Some(view) = ViewKind::ALL.iter().copied().find(|&kind| view(kind).aliases().contains(&command)) {
        app.back.clear();
        navigate(app, Route { view, focus: None }, false);
        let mut commands = check_access_for_selection(app);
        commands.extend(watch_fleet_if_shown(app));
        return commands;
    }
    match (command, argument) {
        ("q" | "quit" | "q!", _) => {
            app.quit = true;
            vec![Command::Quit]
        }
        ("help", _) => {
            app.overlay = Overlay::Help { scroll: 0 };
            Vec::new()
        }
        ("sort", None) => {
            set_sort(app, None);
            Vec::new()
        }
        ("sort", Some(column)) => {
            let (descending, name) = match column.strip_prefix('-') {
                Some(name) => (true, name),
                None => (false, column),
            };
            let columns = view(app.route.view).columns();
            match columns.iter().position(|c| c.header.eq_ignore_ascii_case(name)) {
                Some(column) => set_sort(app, Some(Sort { column, descending })),
                None => {
                    let names: Vec<String> = columns.iter().map(|c| c.header.to_lowercase()).collect();
                    flash(app, Level::Error, format!("no column {name:?} here (columns: {})", names.join(", ")));
                }
            }
            Vec::new()
        }
        ("theme", Some(name)) => vec![Command::LoadTheme(name.to_string())],
        ("theme", None) => {
            flash(app, Level::Info, format!("themes: {} (now {})", app.theme_names.join(", "), app.theme.name));
            Vec::new()
        }
        ("ns", Some("all" | "-A" | "*")) => vec![Command::SwitchNamespace(None)],
        ("ns", Some(namespace)) => vec![Command::SwitchNamespace(Some(namespace.to_string()))],
        ("ns", None) => {
            flash(app, Level::Info, format!("scope: {} (:ns NAME or :ns all)", app.session.scope));
            Vec::new()
        }
        ("ctx", Some(context)) => vec![Command::SwitchContext(context.to_string())],
        ("ctx", None) => {
            flash(app, Level::Info, format!("context: {} (:ctx NAME to switch)", app.session.context));
            Vec::new()
        }
        _ => {
            flash(app, Level::Error, format!("unknown command :{line} (try :help)"));
            Vec::new()
        }
    }
}

// ----- batch actions --------------------------------------------------------------------------

fn open_dialog(app: &mut App, action: Action) -> Vec<Command> {
    let commands = check_access_for_selection(app);
    if let Some(why) = write_blocked(app, action) {
        if why == strings::CHECKING_ACCESS
            && let Some((namespace, batch)) = selected_batch(app)
        {
            app.pending_write = Some((action, namespace, batch));
        }
        flash(app, Level::Warning, format!("{}: {why}", strings::action_label(action)));
        return commands;
    }
    let (Some((namespace, name)), Some(verb)) = (selected_batch(app), batch_action(app, action)) else {
        return commands;
    };
    let Some(row) = app.snapshot.batches.iter().find(|row| row.namespace == namespace && row.name == name) else {
        return commands;
    };
    let needs_approval = row.object.spec.approval.as_ref().is_some_and(|a| a.required && a.approved_by.is_none());
    let approve_too = matches!(verb, BatchAction::Force { .. }).then_some(needs_approval);
    let mut reason = TextArea::default();
    reason.set_placeholder_text(strings::REASON_PLACEHOLDER);
    let preview = dialog_preview(&app.snapshot, row, verb, app.now);
    app.overlay = Overlay::Dialog(Box::new(ActionDialog {
        action: verb,
        phase: row.phase.clone(),
        summary: format!("{} · {} · {} · deployments {}", row.application, row.phase, row.approval, row.progress),
        namespace,
        batch: name,
        reason,
        approve_too,
        error: None,
        preview,
    }));
    commands
}

/// What the action touches: the Deployments the batch restarts and the tenants they serve.
/// And, when known, when the old credentials of its Secrets die (the deadline the decision meets).
fn dialog_preview(
    snapshot: &crate::readmodel::Snapshot,
    row: &crate::readmodel::BatchRow,
    verb: BatchAction,
    now: k8s_openapi::jiff::Timestamp,
) -> Vec<String> {
    let names = |keep: fn(&crate::api::rotation_batch::BatchDeployment) -> bool| -> Vec<String> {
        row.object.restarts().filter(|d| keep(d)).map(|d| d.name.clone()).collect()
    };
    let (what, deployments) = match verb {
        BatchAction::Retry => ("restarts again", names(|d| d.retriable())),
        BatchAction::Undo => ("goes back", names(|d| d.undoable())),
        _ => ("restarts", names(|_| true)),
    };
    let tenants = super::views::tenants_served(snapshot, row);
    let mut lines = vec![strings::preview_line(what, &deployments), strings::preview_line("tenants served", &tenants)];
    if let Some(revocable) = row.old_credentials_revocable {
        lines.push(format!("{} {}", strings::OLD_CREDENTIALS, super::views::revocable(revocable, now)));
    }
    lines
}

fn dialog_key(app: &mut App, key: &KeyEvent, at: std::time::Instant) -> Vec<Command> {
    let Overlay::Dialog(dialog) = &mut app.overlay else { return Vec::new() };
    match key.code {
        KeyCode::Esc => {
            app.overlay = Overlay::None;
            app.burst_guard = Some(at);
            Vec::new()
        }
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            app.overlay = Overlay::None;
            Vec::new()
        }
        KeyCode::Tab => {
            if let Some(approve) = dialog.approve_too.as_mut() {
                *approve = !*approve;
            }
            Vec::new()
        }
        KeyCode::Enter => {
            let reason = dialog.reason.lines().join(" ").trim().to_string();
            if reason.is_empty() {
                dialog.error = Some(strings::REASON_REQUIRED.to_string());
                return Vec::new();
            }
            // The CLI's check (and the CRD's limit): too long or a control character stays here.
            let reason = match crate::api::common::check_reason(&reason) {
                Ok(reason) => reason,
                Err(error) => {
                    dialog.error = Some(error);
                    return Vec::new();
                }
            };
            let action = match dialog.action {
                BatchAction::Force { .. } => BatchAction::Force { approve: dialog.approve_too.unwrap_or(false) },
                other => other,
            };
            let command = Command::Act {
                namespace: dialog.namespace.clone(),
                batch: dialog.batch.clone(),
                action,
                reason: Some(reason),
            };
            let text = format!("{} {}/{}…", strings::verb_progress(action), dialog.namespace, dialog.batch);
            app.overlay = Overlay::None;
            app.burst_guard = Some(at);
            flash(app, Level::Info, text);
            vec![command]
        }
        KeyCode::Char(_)
            if dialog.reason.lines().iter().map(|line| line.chars().count() + 1).sum::<usize>()
                > crate::api::common::MAX_REASON =>
        {
            dialog.error = Some(format!(
                "a reason may be at most {} characters: this one is full",
                crate::api::common::MAX_REASON
            ));
            Vec::new()
        }
        _ => {
            dialog.error = None;
            dialog.reason.input(*key);
            Vec::new()
        }
    }
}

/// A cursor at the top, for tests.
pub fn top_cursor() -> Cursor {
    Cursor::default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::app::Focus;

    #[test]
    fn the_filter_is_a_regex_with_an_inverse_and_says_when_it_is_not() {
        let rows = ["cap-hr hr-portal-emea-1 ready", "cap-shop bookshop-t10 upgradeerror", "cap-shop travel ready"];
        let matching = |filter: &str| -> Vec<usize> {
            let filter = RowFilter::parse(filter);
            (0..rows.len()).filter(|&i| filter.matches(rows[i])).collect()
        };
        assert_eq!(matching("ready"), [0, 2]);
        assert_eq!(matching("READY"), [0, 2], "case-insensitive");
        assert_eq!(matching("emea-[0-9]|t10"), [0, 1], "a regular expression");
        assert_eq!(matching("!ready"), [1], "! keeps the rows that do not match");
        assert_eq!(matching("!^cap-shop"), [0]);
        let broken = RowFilter::parse("hr-(");
        assert!(broken.error().is_some_and(|why| !why.is_empty()), "an invalid regex says so");
        assert_eq!(matching("hr-("), Vec::<usize>::new(), "and matches as plain text");
    }
    use crate::demo::sample::{self, SampleObjects};
    use crossterm::event::KeyEventKind;

    fn app() -> App {
        sample::app(SampleObjects::demo().expect("sample").snapshot())
    }

    thread_local! {
        /// A key clock for tests: each key comes a second after the last, so no two keys are in
        /// one burst unless a test says so (`press_at`).
        static KEY_CLOCK: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
    }

    fn next_key_time() -> std::time::Instant {
        KEY_CLOCK.with(|clock| {
            let next = clock.get().map_or_else(std::time::Instant::now, |t| t + std::time::Duration::from_secs(1));
            clock.set(Some(next));
            next
        })
    }

    fn press(app: &mut App, code: KeyCode) -> Vec<Command> {
        handle_key(app, &KeyEvent::new(code, KeyModifiers::NONE), next_key_time())
    }

    fn press_at(app: &mut App, code: KeyCode, at: std::time::Instant) -> Vec<Command> {
        handle_key(app, &KeyEvent::new(code, KeyModifiers::NONE), at)
    }

    fn ctrl(app: &mut App, ch: char) -> Vec<Command> {
        handle_key(app, &KeyEvent::new(KeyCode::Char(ch), KeyModifiers::CONTROL), next_key_time())
    }

    fn typed(app: &mut App, text: &str) -> Vec<Command> {
        let mut commands = Vec::new();
        for ch in text.chars() {
            commands.extend(press(app, if ch == '\n' { KeyCode::Enter } else { KeyCode::Char(ch) }));
        }
        commands
    }

    fn selected_name(app: &App) -> Option<(String, String)> {
        app.cursor().key
    }

    fn goto_batch(app: &mut App, name: &str) {
        typed(app, ":batches\n");
        press(app, KeyCode::Char('g'));
        while selected_batch(app).is_none_or(|(_, batch)| batch != name) {
            let before = app.cursor().selected;
            press(app, KeyCode::Char('j'));
            assert_ne!(before, app.cursor().selected, "no batch {name}");
        }
    }

    #[test]
    fn a_running_go_operator_warns_in_the_header_while_apps_opt_in_by_spec() {
        let mut app = app();
        update(&mut app, Msg::Role(Role::Leader));
        assert_eq!(app.leader_note(), None, "a leading engine with nothing wrong says nothing more");
        let by_spec = app.snapshot.apps.iter().filter(|a| a.opt_in == crate::readmodel::OptIn::Spec).count();
        assert!(by_spec > 0, "the demo has applications that set spec.rolloutOnCredentialUpdate");

        update(&mut app, Msg::GoOperator(Some("cap-operator/capoperator-lease-lock".into())));
        let (note, severity) = app.leader_note().expect("a warning");
        assert_eq!(severity, crate::console::app::Severity::Warning);
        assert_eq!(note, format!("⚠ Go CAP Operator also rolls {by_spec} app(s): capdeck doctor"));

        update(&mut app, Msg::Role(Role::Observer));
        assert_eq!(
            app.leader_note().map(|n| n.1),
            Some(crate::console::app::Severity::Warning),
            "observers see it too"
        );
        update(&mut app, Msg::GoOperator(None));
        assert!(!app.leader_note().is_some_and(|(note, _)| note.contains("Go CAP Operator")), "gone once it stops");
    }

    #[test]
    fn j_k_arrows_g_and_shift_g_move_the_selection_within_the_rows() {
        let mut app = app();
        typed(&mut app, ":tenants\n");
        let rows = app.visible.len();
        assert_eq!(app.cursor().selected, 0);
        press(&mut app, KeyCode::Char('j'));
        press(&mut app, KeyCode::Down);
        assert_eq!(app.cursor().selected, 2);
        press(&mut app, KeyCode::Char('k'));
        assert_eq!(app.cursor().selected, 1);
        press(&mut app, KeyCode::Up);
        press(&mut app, KeyCode::Up);
        assert_eq!(app.cursor().selected, 0, "stops at the top");
        press(&mut app, KeyCode::Char('G'));
        assert_eq!(app.cursor().selected, rows - 1);
        press(&mut app, KeyCode::Char('j'));
        assert_eq!(app.cursor().selected, rows - 1, "stops at the bottom");
        press(&mut app, KeyCode::Char('g'));
        assert_eq!(app.cursor().selected, 0);
        press(&mut app, KeyCode::End);
        assert_eq!(app.cursor().selected, rows - 1);
        press(&mut app, KeyCode::Home);
        assert_eq!(app.cursor().selected, 0);
    }

    #[test]
    fn paging_keys_move_a_screen_and_keep_the_selection_visible() {
        let mut app = app();
        update(&mut app, Msg::Resize { width: 100, height: 15 });
        assert_eq!(app.viewport_rows, 10);
        typed(&mut app, ":tenants\n");
        press(&mut app, KeyCode::PageDown);
        assert_eq!(app.cursor().selected, 10);
        assert!(app.cursor().offset <= 10 && 10 < app.cursor().offset + 10);
        ctrl(&mut app, 'f');
        assert_eq!(app.cursor().selected, 20);
        press(&mut app, KeyCode::PageUp);
        assert_eq!(app.cursor().selected, 10);
        ctrl(&mut app, 'b');
        assert_eq!(app.cursor().selected, 0);
        assert_eq!(app.cursor().offset, 0);
    }

    #[test]
    fn enter_drills_down_and_esc_goes_back() {
        let mut app = app();
        typed(&mut app, "/bookshop\n");
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.route.view, ViewKind::Versions);
        assert_eq!(app.route.focus, Some(Focus::Application { namespace: "cap-shop".into(), name: "bookshop".into() }));
        assert_eq!(app.visible.len(), 3, "bookshop's three versions");
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.route.view, ViewKind::Tenants);
        assert!(matches!(&app.route.focus, Some(Focus::Version { name, .. }) if name == "bookshop-1-10-0"));
        assert_eq!(app.visible.len(), 8, "tenants on 1.10.0");
        typed(&mut app, "/t8\n");
        // t8 is on 1.9.0, not in this focus: nothing matches.
        assert!(app.visible.is_empty());
        press(&mut app, KeyCode::Esc);
        assert!(app.filter.is_empty(), "Esc clears the filter first");
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.route.view, ViewKind::Versions);
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.route.view, ViewKind::Applications);
        assert_eq!(app.route.focus, None);
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.route.view, ViewKind::Applications, "Esc at the top does nothing");
    }

    #[test]
    fn enter_on_a_tenant_shows_its_operations_and_on_a_batch_its_rollouts() {
        let mut app = app();
        typed(&mut app, ":tenants\n/t9\n");
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.route.view, ViewKind::Operations);
        assert_eq!(app.visible.len(), 1);
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.route.view, ViewKind::Rollouts);
        assert_eq!(app.visible.len(), 2, "travel's two Deployments");
        // Enter on a rollout shows its Deployment's ReplicaSets and Pods; d its detail.
        let commands = press(&mut app, KeyCode::Enter);
        assert!(
            matches!(&commands[..], [Command::Pods { namespace, deployment }]
                if namespace == "cap-shop" && deployment.starts_with("travel-1-2-0")),
            "{commands:?}"
        );
        assert!(matches!(&app.overlay, Overlay::Pods(_)));
        press(&mut app, KeyCode::Esc);
        press(&mut app, KeyCode::Char('d'));
        assert!(
            matches!(&app.overlay, Overlay::Detail { title, .. } if title.starts_with("Deployment cap-shop/travel-1-2-0"))
        );
    }

    /// The Pods pane: rows arrive, the selection stays on its object, `l` on a ReplicaSet says
    /// to pick a Pod and on a Pod asks for its container's log; Esc goes back a level at a time;
    /// while open the rows are read again every few seconds, never twice at once.
    #[test]
    fn the_pods_pane_selects_reads_logs_and_refreshes() {
        use crate::readmodel::pods::PodRow;
        let mut app = app();
        let start = app.now;
        app.overlay = Overlay::Pods(Box::new(PodsPane::new("cap-shop".into(), "srv".into(), start)));
        let row = |kind, name: &str| PodRow {
            kind,
            name: name.into(),
            status: "Running".into(),
            ready: "1/1".into(),
            restarts: 0,
            last_termination: None,
            secret: None,
            created: None,
            log_container: (kind == RowKind::Pod).then(|| "main".into()),
        };
        let rows =
            vec![row(RowKind::ReplicaSet, "srv-7d9"), row(RowKind::Pod, "srv-7d9-a"), row(RowKind::Pod, "srv-7d9-b")];
        let answer =
            |rows: Vec<PodRow>| Msg::Pods { namespace: "cap-shop".into(), deployment: "srv".into(), rows: Ok(rows) };
        update(&mut app, answer(rows.clone()));
        assert!(press(&mut app, KeyCode::Char('l')).is_empty());
        assert_eq!(app.flash.as_ref().map(|f| f.text.as_str()), Some(strings::SELECT_A_POD));
        press(&mut app, KeyCode::Char('j'));
        press(&mut app, KeyCode::Char('j'));
        // A new ReplicaSet above: the selection follows srv-7d9-b.
        let mut moved = vec![row(RowKind::ReplicaSet, "srv-8f1")];
        moved.extend(rows);
        update(&mut app, answer(moved));
        let commands = press(&mut app, KeyCode::Char('l'));
        assert_eq!(
            commands,
            [Command::PodLog { namespace: "cap-shop".into(), pod: "srv-7d9-b".into(), container: Some("main".into()) }]
        );
        update(
            &mut app,
            Msg::PodLog { namespace: "cap-shop".into(), pod: "srv-7d9-b".into(), lines: Ok(vec!["started".into()]) },
        );
        let Overlay::Pods(pane) = &app.overlay else { panic!("the pane closed") };
        let log = pane.log.as_ref().expect("log");
        assert_eq!(log.lines, Some(Ok(vec!["started".to_string()])));
        assert!(log.title().starts_with("Log of Pod srv-7d9-b (main)"));
        // Refresh: not before 5 s, then once until the answer comes.
        let later =
            |seconds: i64| start.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(seconds)).expect("time");
        assert!(update(&mut app, Msg::Tick(later(4))).is_empty());
        assert_eq!(
            update(&mut app, Msg::Tick(later(5))),
            [Command::Pods { namespace: "cap-shop".into(), deployment: "srv".into() }]
        );
        assert!(update(&mut app, Msg::Tick(later(11))).is_empty(), "one read at a time");
        press(&mut app, KeyCode::Esc);
        assert!(matches!(&app.overlay, Overlay::Pods(pane) if pane.log.is_none()), "Esc: back to the Pods");
        press(&mut app, KeyCode::Esc);
        assert!(matches!(app.overlay, Overlay::None));
    }

    fn fleet_rows() -> Vec<crate::fleet::FleetRow> {
        use crate::fleet::{FleetRow, OpenBatch, RowState};
        let mut open = FleetRow::problem("prod-eu", RowState::Open, String::new());
        open.why = None;
        open.namespace = Some("cap-shop".into());
        open.batches = vec![OpenBatch {
            name: "bookshop-x7k2p".into(),
            application: "bookshop".into(),
            phase: "AwaitingApproval".into(),
            reason: "ApprovalRequired".into(),
            window_end: Timestamp::from_second(1_800_000_000).expect("time"),
            old_credentials_revocable: None,
        }];
        let down = FleetRow::problem("prod-us", RowState::Unreachable, "no answer within 5s".into());
        vec![open, down]
    }

    /// `:fleet` starts reading the fleet; its rows survive cluster snapshots and context
    /// switches; Enter opens a row's context and namespace on its batch; an unreachable row says
    /// why instead.
    #[test]
    fn the_fleet_view_opens_a_context_on_its_batch() {
        let mut app = app();
        assert_eq!(typed(&mut app, ":fleet\n"), vec![Command::WatchFleet]);
        assert!(typed(&mut app, ":fleet\n").is_empty(), "read once, then every 30s by the runtime");
        update(&mut app, Msg::Fleet(fleet_rows()));
        assert_eq!(app.visible.len(), 2);
        update(&mut app, Msg::Snapshot(Arc::new(Snapshot::default())));
        assert_eq!(app.snapshot.fleet.len(), 2, "a cluster snapshot keeps the fleet's rows");
        update(&mut app, Msg::Switched { context: "prod-eu".into(), scope: "cap-shop".into() });
        assert_eq!(app.snapshot.fleet.len(), 2, "so does a context switch");
        app.route.view = ViewKind::Fleet;
        refresh(&mut app);
        let commands = press(&mut app, KeyCode::Enter);
        let batch = crate::console::app::Focus::Batch { namespace: "cap-shop".into(), name: "bookshop-x7k2p".into() };
        assert_eq!(
            commands,
            vec![Command::OpenContext {
                context: "prod-eu".into(),
                namespace: Some("cap-shop".into()),
                route: Route { view: ViewKind::Batches, focus: Some(batch.clone()) },
            }]
        );
        update(&mut app, Msg::Open(Route { view: ViewKind::Batches, focus: Some(batch) }));
        assert_eq!(app.route.view, ViewKind::Batches);
        app.route = Route { view: ViewKind::Fleet, focus: None };
        refresh(&mut app);
        press(&mut app, KeyCode::Down);
        assert!(press(&mut app, KeyCode::Enter).is_empty());
        let flash = app.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
        assert!(flash.contains("prod-us") && flash.contains("no answer within 5s"), "{flash}");
    }

    #[test]
    fn tab_and_shift_tab_cycle_views() {
        let mut app = app();
        press(&mut app, KeyCode::Tab);
        assert_eq!(app.route.view, ViewKind::Versions);
        press(&mut app, KeyCode::BackTab);
        let commands = press(&mut app, KeyCode::BackTab);
        assert_eq!(app.route.view, ViewKind::Fleet, "wraps around to the last view");
        assert_eq!(commands, vec![Command::WatchFleet], "the fleet is read once shown");
        press(&mut app, KeyCode::Tab);
        assert_eq!(app.route.view, ViewKind::Applications);
        press(&mut app, KeyCode::BackTab);
        assert!(press(&mut app, KeyCode::Tab).is_empty(), "and only once");
    }

    #[test]
    fn slash_filters_as_you_type_and_keeps_or_clears() {
        let mut app = app();
        press(&mut app, KeyCode::Char('/'));
        assert_eq!(app.input, Input::Filter(String::new()));
        typed(&mut app, "TRAV");
        assert_eq!(app.visible.len(), 1, "case-insensitive");
        press(&mut app, KeyCode::Backspace);
        assert_eq!(app.filter, "TRA");
        // Keys while typing are text, not actions.
        typed(&mut app, "q");
        assert!(!app.quit);
        press(&mut app, KeyCode::Backspace);
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.input, Input::None);
        assert_eq!(app.filter, "TRA");
        press(&mut app, KeyCode::Char('/'));
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.input, Input::None);
        assert!(app.filter.is_empty());
        assert_eq!(app.visible.len(), 4);
        press(&mut app, KeyCode::Char('/'));
        ctrl(&mut app, 'c');
        assert_eq!(app.input, Input::None, "Ctrl-C leaves the input line, not the console");
        assert!(!app.quit);
    }

    #[test]
    fn colon_commands_open_views_and_complete_with_tab() {
        let mut app = app();
        for (command, view) in [
            ("apps", ViewKind::Applications),
            ("cav", ViewKind::Versions),
            ("cat", ViewKind::Tenants),
            ("ops", ViewKind::Operations),
            ("rb", ViewKind::Batches),
            ("rollouts", ViewKind::Rollouts),
            ("ev", ViewKind::Events),
        ] {
            typed(&mut app, &format!(":{command}\n"));
            assert_eq!(app.route.view, view, ":{command}");
        }
        press(&mut app, KeyCode::Char(':'));
        typed(&mut app, "ba");
        press(&mut app, KeyCode::Tab);
        assert_eq!(app.input, Input::Command("batches".into()));
        press(&mut app, KeyCode::Backspace);
        assert_eq!(app.input, Input::Command("batche".into()));
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.input, Input::None);
        assert_eq!(complete(&app, "te"), Some("tenants".into()));
        assert_eq!(complete(&app, "the"), Some("theme".into()));
        assert_eq!(complete(&app, "zz"), None);
        assert_eq!(complete(&app, "ns x"), None, "no namespace starts with x");
    }

    /// Issue 31: Ctrl-U, Ctrl-W and Ctrl-H typed their letter into the `/` and `:` lines. They
    /// edit as in a shell; no Ctrl chord types a letter (AltGr symbols, Ctrl+Alt on Windows, do).
    #[test]
    fn ctrl_keys_edit_the_filter_and_command_lines() {
        let with = |code: KeyCode, modifiers: KeyModifiers| KeyEvent::new(code, modifiers);
        let ctrl_key = |ch: char| with(KeyCode::Char(ch), KeyModifiers::CONTROL);
        let altgr = KeyModifiers::CONTROL | KeyModifiers::ALT;
        // (line before, key, line after)
        let cases: &[(&str, KeyEvent, &str)] = &[
            ("ns cap-hr", ctrl_key('u'), ""),
            ("ns cap-hr", ctrl_key('w'), "ns "),
            ("sort -age  ", ctrl_key('w'), "sort "),
            ("batches", ctrl_key('w'), ""),
            ("", ctrl_key('w'), ""),
            ("ns cap-hr", ctrl_key('h'), "ns cap-h"),
            ("ns cap-hr", with(KeyCode::Backspace, KeyModifiers::NONE), "ns cap-h"),
            ("", ctrl_key('h'), ""),
            ("ns", ctrl_key('a'), "ns"),
            ("ns", ctrl_key('e'), "ns"),
            ("ns", ctrl_key('k'), "ns"),
            ("ns", with(KeyCode::Char('U'), KeyModifiers::CONTROL | KeyModifiers::SHIFT), ""),
            ("ns", with(KeyCode::Char('x'), altgr), "ns"),
            ("hr", with(KeyCode::Char('|'), altgr), "hr|"),
            ("hr", with(KeyCode::Char('-'), KeyModifiers::NONE), "hr-"),
        ];
        for (before, key, after) in cases {
            let mut app = app();
            app.input = Input::Command((*before).to_string());
            handle_key(&mut app, key, next_key_time());
            assert_eq!(app.input, Input::Command((*after).to_string()), ":{before} then {key:?}");
            let mut app = self::app();
            app.input = Input::Filter((*before).to_string());
            app.filter = (*before).to_string();
            handle_key(&mut app, key, next_key_time());
            assert_eq!(app.input, Input::Filter((*after).to_string()), "/{before} then {key:?}");
            assert_eq!(app.filter, *after, "the filter follows the line: /{before} then {key:?}");
        }
        // Ctrl-C still leaves the line; Ctrl-W to `:ns ` leaves the picker's text for Tab.
        let mut app = app();
        typed(&mut app, ":ctx prod");
        ctrl(&mut app, 'w');
        assert_eq!(app.input, Input::Command("ctx ".into()));
        ctrl(&mut app, 'c');
        assert_eq!(app.input, Input::None);
        assert!(!app.quit);
    }

    #[test]
    fn colon_commands_for_session_theme_help_and_quit() {
        let mut app = app();
        assert_eq!(
            typed(&mut app, ":ns cap-hr\n"),
            vec![Command::ListNamespaces, Command::SwitchNamespace(Some("cap-hr".into()))],
            "`:ns ` asks for the namespaces (for the picker)"
        );
        assert_eq!(typed(&mut app, ":ns all\n"), vec![Command::ListNamespaces, Command::SwitchNamespace(None)]);
        assert_eq!(typed(&mut app, ":ctx staging\n"), vec![Command::SwitchContext("staging".into())]);
        assert_eq!(typed(&mut app, ":theme light\n"), vec![Command::LoadTheme("light".into())]);
        assert!(typed(&mut app, ":theme\n").is_empty());
        assert!(app.flash.as_ref().is_some_and(|f| f.text.contains("dark, light, high-contrast")));
        assert!(typed(&mut app, ":ctx\n").is_empty());
        assert!(app.flash.as_ref().is_some_and(|f| f.text.contains("prod-eu10")));
        typed(&mut app, ":bogus\n");
        assert!(app.flash.as_ref().is_some_and(|f| f.level == Level::Error && f.text.contains(":bogus")));
        typed(&mut app, ":help\n");
        assert!(matches!(app.overlay, Overlay::Help { .. }));
        press(&mut app, KeyCode::Esc);
        assert_eq!(typed(&mut app, ":q\n"), vec![Command::Quit]);
        assert!(app.quit);
    }

    #[test]
    fn question_mark_d_and_y_open_overlays_that_scroll_and_close() {
        let mut app = app();
        // 15 rows: the help pane shows 10 lines of its text at a time.
        update(&mut app, Msg::Resize { width: 80, height: 15 });
        let help_lines = crate::console::help::lines(&app, crate::console::draw::popup_text_width(80)).len();
        let last = help_lines - crate::console::queries::popup_rows(15);
        assert!(last > app.viewport_rows + 1, "the help is longer than two pages at 80×15 ({help_lines} lines)");
        press(&mut app, KeyCode::Char('?'));
        assert!(matches!(app.overlay, Overlay::Help { scroll: 0 }));
        press(&mut app, KeyCode::Char('j'));
        press(&mut app, KeyCode::PageDown);
        assert!(matches!(app.overlay, Overlay::Help { scroll } if scroll == 1 + app.viewport_rows));
        press(&mut app, KeyCode::Char('G'));
        assert!(matches!(app.overlay, Overlay::Help { scroll } if scroll == last), "G: the help's last page");
        press(&mut app, KeyCode::Char('k'));
        assert!(matches!(app.overlay, Overlay::Help { scroll } if scroll == last - 1), "k moves at once after G");
        press(&mut app, KeyCode::PageDown);
        press(&mut app, KeyCode::PageDown);
        assert!(matches!(app.overlay, Overlay::Help { scroll } if scroll == last), "PgDn stops at the end");
        press(&mut app, KeyCode::PageUp);
        assert!(matches!(app.overlay, Overlay::Help { scroll } if scroll == last - app.viewport_rows));
        press(&mut app, KeyCode::Char('g'));
        assert!(matches!(app.overlay, Overlay::Help { scroll: 0 }));
        press(&mut app, KeyCode::Char('?'));
        assert!(matches!(app.overlay, Overlay::None), "? toggles help");
        press(&mut app, KeyCode::Char('d'));
        assert!(matches!(&app.overlay, Overlay::Detail { title, .. } if title == "Application cap-hr/analytics"));
        press(&mut app, KeyCode::Char('q'));
        assert!(matches!(app.overlay, Overlay::None), "q closes an overlay first");
        assert!(!app.quit);
        press(&mut app, KeyCode::Char('y'));
        assert!(
            matches!(&app.overlay, Overlay::Yaml { lines, .. } if lines.iter().any(|l| l.contains("kind: CAPApplication")))
        );
        press(&mut app, KeyCode::Esc);
        typed(&mut app, ":events\n");
        press(&mut app, KeyCode::Char('y'));
        assert!(matches!(app.overlay, Overlay::None));
        assert_eq!(app.flash.as_ref().map(|f| f.text.as_str()), Some(strings::NO_YAML));
    }

    #[test]
    fn s_sorts_by_the_next_column_s_reverses_and_sort_names_a_column() {
        let mut app = app();
        typed(&mut app, ":tenants\n");
        let names = |app: &App| -> Vec<String> {
            app.visible.iter().map(|&i| app.snapshot.tenants[i].name.clone()).collect::<Vec<_>>()
        };
        let model_order = names(&app);
        typed(&mut app, ":sort name\n");
        let mut ascending = model_order.clone();
        ascending.sort_by_key(|name| crate::console::views::SortKey::text(name));
        assert_eq!(names(&app), ascending);
        press(&mut app, KeyCode::Char('S'));
        let descending: Vec<String> = ascending.iter().rev().cloned().collect();
        assert_eq!(names(&app), descending, "S reverses");
        typed(&mut app, ":sort\n");
        assert_eq!(names(&app), model_order, ":sort alone: the model's order again");
        press(&mut app, KeyCode::Char('s'));
        assert_eq!(app.sorts.get(&ViewKind::Tenants), Some(&Sort { column: 0, descending: false }), "s: first column");
        press(&mut app, KeyCode::Char('s'));
        assert_eq!(app.sorts.get(&ViewKind::Tenants).map(|sort| sort.column), Some(1), "s: the next one");
        typed(&mut app, ":sort -nope\n");
        assert!(app.flash.as_ref().is_some_and(|f| f.level == Level::Error && f.text.contains("columns: namespace")));
    }

    #[test]
    fn numbers_sort_as_numbers_and_ages_by_time() {
        use crate::console::views::SortKey;
        let mut names = vec!["t10", "t2", "T1", "t2a"];
        names.sort_by_key(|name| SortKey::text(name));
        assert_eq!(names, ["T1", "t2", "t2a", "t10"]);
        let mut app = app();
        typed(&mut app, ":ops\n:sort -age\n");
        let created: Vec<_> = app.visible.iter().map(|&i| app.snapshot.operations[i].created).collect();
        assert!(created.windows(2).all(|pair| pair[0] <= pair[1]), "-age: the oldest first {created:?}");
    }

    #[test]
    fn tab_completes_and_walks_namespaces_contexts_and_columns() {
        let mut app = app();
        update(&mut app, Msg::Contexts(vec!["prod-eu10".into(), "prod-us10".into(), "staging".into()]));
        typed(&mut app, ":ctx pro");
        press(&mut app, KeyCode::Tab);
        assert_eq!(app.input, Input::Command("ctx prod-".into()), "Tab completes the common prefix");
        press(&mut app, KeyCode::Tab);
        assert_eq!(app.input, Input::Command("ctx prod-eu10".into()), "then walks the candidates");
        press(&mut app, KeyCode::Tab);
        assert_eq!(app.input, Input::Command("ctx prod-us10".into()));
        press(&mut app, KeyCode::BackTab);
        assert_eq!(app.input, Input::Command("ctx prod-eu10".into()), "Shift-Tab walks back");
        press(&mut app, KeyCode::Esc);
        // Before the API server answers (or when it refuses), `:ns` offers the namespaces in view.
        typed(&mut app, ":ns ");
        assert_eq!(picker(&app, "ns "), ["ns all", "ns cap-hr", "ns cap-shop"]);
        update(&mut app, Msg::Namespaces(Ok(vec!["cap-hr".into(), "cap-shop".into(), "kube-system".into()])));
        assert_eq!(picker(&app, "ns k"), ["ns kube-system"]);
        typed(&mut app, "k");
        press(&mut app, KeyCode::Tab);
        assert_eq!(app.input, Input::Command("ns kube-system".into()));
        press(&mut app, KeyCode::Esc);
        typed(&mut app, ":batches\n:sort ph");
        press(&mut app, KeyCode::Tab);
        assert_eq!(app.input, Input::Command("sort phase".into()), "columns complete too");
    }

    #[test]
    fn errors_stay_longer_than_notes_and_both_expire() {
        let mut app = app();
        let start = app.now;
        let at = |seconds: i64| Timestamp::from_second(start.as_second() + seconds).expect("time");
        flash(&mut app, Level::Info, "noted".into());
        update(&mut app, Msg::Tick(at(FLASH_SECONDS - 1)));
        assert!(app.flash.is_some());
        update(&mut app, Msg::Tick(at(FLASH_SECONDS)));
        assert!(app.flash.is_none(), "a note goes after {FLASH_SECONDS}s");
        app.now = start;
        flash(&mut app, Level::Error, "broken".into());
        update(&mut app, Msg::Tick(at(FLASH_SECONDS)));
        assert!(app.flash.is_some(), "an error stays to be read");
        update(&mut app, Msg::Tick(at(FLASH_ERROR_SECONDS)));
        assert!(app.flash.is_none());
    }

    #[test]
    fn a_opens_the_approve_dialog_and_enter_sends_the_reason() {
        let mut app = app();
        goto_batch(&mut app, "hr-portal-c9dsg");
        assert!(press(&mut app, KeyCode::Char('a')).is_empty());
        assert!(
            matches!(&app.overlay, Overlay::Dialog(d) if d.action == BatchAction::Approve && d.approve_too.is_none())
        );
        // In the dialog, letters are text: 'q' does not quit, 'a' does not re-open.
        typed(&mut app, "  CHG-1 qa ");
        assert!(!app.quit);
        let commands = press(&mut app, KeyCode::Enter);
        assert_eq!(
            commands,
            vec![Command::Act {
                namespace: "cap-hr".into(),
                batch: "hr-portal-c9dsg".into(),
                action: BatchAction::Approve,
                reason: Some("CHG-1 qa".into()),
            }]
        );
        assert!(matches!(app.overlay, Overlay::None));
        assert!(app.flash.as_ref().is_some_and(|f| f.text.starts_with("approving cap-hr/hr-portal-c9dsg")));
        update(&mut app, Msg::ActionDone(Err("approve cap-hr/hr-portal-c9dsg: conflict".into())));
        assert!(app.flash.as_ref().is_some_and(|f| f.level == Level::Error));
    }

    #[test]
    fn esc_and_ctrl_c_cancel_a_dialog_without_a_write() {
        let mut app = app();
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('x'));
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.action == BatchAction::Cancel));
        assert!(press(&mut app, KeyCode::Esc).is_empty());
        assert!(matches!(app.overlay, Overlay::None));
        press(&mut app, KeyCode::Char('h'));
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.action == BatchAction::Hold));
        assert!(ctrl(&mut app, 'c').is_empty());
        assert!(matches!(app.overlay, Overlay::None));
        assert!(!app.quit);
    }

    #[test]
    fn enter_on_an_empty_reason_keeps_the_dialog_open_and_says_why() {
        let mut app = app();
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('h'));
        for blank in ["", "   "] {
            let _ = typed(&mut app, blank);
            assert!(press(&mut app, KeyCode::Enter).is_empty(), "{blank:?} sent a write");
            assert!(
                matches!(&app.overlay, Overlay::Dialog(d) if d.error.as_deref() == Some(strings::REASON_REQUIRED)),
                "the dialog stays open and says a reason is required"
            );
        }
        let commands = typed(&mut app, "freeze\n");
        assert!(
            matches!(&commands[..], [Command::Act { action: BatchAction::Hold, reason: Some(r), .. }] if r == "freeze")
        );
    }

    #[test]
    fn the_reason_dialog_stops_at_the_limit_and_says_so() {
        let mut app = app();
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('h'));
        let _ = typed(&mut app, &"x".repeat(crate::api::common::MAX_REASON + 5));
        assert!(
            matches!(&app.overlay, Overlay::Dialog(d) if d.error.as_deref().is_some_and(|e| e.contains("1024"))),
            "the dialog says the reason is full"
        );
        let commands = press(&mut app, KeyCode::Enter);
        assert!(
            matches!(&commands[..], [Command::Act { reason: Some(r), .. }] if r.chars().count() == crate::api::common::MAX_REASON),
            "the reason sent is cut at the limit"
        );
    }

    #[test]
    fn keys_typed_in_the_burst_that_closed_a_dialog_are_not_hotkeys() {
        let mut app = app();
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('h'));
        let _ = typed(&mut app, "CHG-42");
        let closed = std::time::Instant::now() + std::time::Duration::from_secs(3600);
        assert_eq!(press_at(&mut app, KeyCode::Enter, closed).len(), 1);
        let selected = app.cursor().selected;
        // The user types on at typing speed: G (bottom), d (detail), x (cancel dialog), a (approve).
        let mut at = closed;
        for key in ['G', 'd', 'x', 'a'] {
            at += std::time::Duration::from_millis(120);
            assert!(press_at(&mut app, KeyCode::Char(key), at).is_empty(), "{key} acted");
        }
        assert!(matches!(app.overlay, Overlay::None), "nothing opened");
        assert_eq!(app.cursor().selected, selected, "nothing moved");
        // After a pause keys are hotkeys again.
        at += std::time::Duration::from_secs(1);
        press_at(&mut app, KeyCode::Char('d'), at);
        assert!(matches!(app.overlay, Overlay::Detail { .. }));
    }

    #[test]
    fn the_dialog_previews_the_deployments_and_tenants() {
        let mut app = app();
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('h'));
        let Overlay::Dialog(dialog) = &app.overlay else { panic!("no dialog") };
        assert_eq!(dialog.preview.len(), 2, "{:?}", dialog.preview);
        assert!(dialog.preview[0].starts_with("restarts"), "{:?}", dialog.preview);
        assert!(dialog.preview[1].starts_with("tenants served"), "{:?}", dialog.preview);
    }

    #[test]
    fn shift_f_forces_and_tab_toggles_approving_too() {
        let mut objects = SampleObjects::demo().expect("sample");
        objects.batch_mut("bookshop-4hx2p").expect("bookshop").spec.approval =
            Some(crate::api::rotation_batch::Approval { required: true, ..Default::default() });
        let mut app = sample::app(objects.snapshot());
        goto_batch(&mut app, "bookshop-4hx2p");
        update(&mut app, Msg::Key(KeyEvent::new(KeyCode::Char('F'), KeyModifiers::SHIFT)));
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.approve_too == Some(true)));
        press(&mut app, KeyCode::Tab);
        let commands = typed(&mut app, "hotfix\n");
        assert!(
            matches!(&commands[..], [Command::Act { action: BatchAction::Force { approve: false }, .. }]),
            "{commands:?}"
        );
    }

    #[test]
    fn h_releases_a_held_batch() {
        let mut objects = SampleObjects::demo().expect("sample");
        objects.hold("travel-tdv6j", "bob", None).expect("travel");
        let mut app = sample::app(objects.snapshot());
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('h'));
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.action == BatchAction::Release));
    }

    /// `r` and `u` on a Failed batch open their dialogs, naming what each touches; elsewhere
    /// they say why not.
    #[test]
    fn r_retries_and_u_undoes_a_failed_batch() {
        use crate::api::rotation_batch::{BatchDeployment, DeploymentAction, DeploymentRolloutState};
        let mut objects = SampleObjects::demo().expect("sample");
        let batch = objects.batch_mut("travel-tdv6j").expect("travel");
        let status = batch.status.get_or_insert_with(Default::default);
        status.phase = crate::api::BatchPhase::Failed;
        status.deployments = vec![
            BatchDeployment {
                name: "travel-v3-srv".into(),
                action: DeploymentAction::Restart,
                state: Some(DeploymentRolloutState::Stalled),
                vcap_secret: Some("travel-v3-srv-new".into()),
                previous_vcap_secret: Some("travel-v3-srv-old".into()),
                ..BatchDeployment::default()
            },
            BatchDeployment {
                name: "travel-v3-router".into(),
                action: DeploymentAction::Restart,
                state: Some(DeploymentRolloutState::Complete),
                ..BatchDeployment::default()
            },
        ];
        let mut app = sample::app(objects.snapshot());
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('r'));
        let Overlay::Dialog(dialog) = &app.overlay else { panic!("no dialog: {:?}", app.flash) };
        assert_eq!(dialog.action, BatchAction::Retry);
        assert_eq!(dialog.preview[0], "restarts again (1): travel-v3-srv");
        press(&mut app, KeyCode::Esc);
        press(&mut app, KeyCode::Char('u'));
        let Overlay::Dialog(dialog) = &app.overlay else { panic!("no dialog: {:?}", app.flash) };
        assert_eq!(dialog.action, BatchAction::Undo);
        assert_eq!(dialog.preview[0], "goes back (1): travel-v3-srv");
        let commands = typed(&mut app, "new credentials break srv\n");
        assert!(matches!(&commands[..], [Command::Act { action: BatchAction::Undo, .. }]), "{commands:?}");

        goto_batch(&mut app, "bookshop-9v9ps");
        assert!(press(&mut app, KeyCode::Char('u')).is_empty());
        let flash = app.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
        assert!(flash.contains("only a Failed batch or one the failure guard halted can be undone"), "{flash}");
    }

    #[test]
    fn write_keys_say_why_they_are_disabled() {
        let mut app = app();
        // Not on a batch.
        typed(&mut app, ":tenants\n");
        assert!(press(&mut app, KeyCode::Char('a')).is_empty());
        assert!(app.flash.as_ref().is_some_and(|f| f.text == format!("approve: {}", strings::SELECT_A_BATCH)));
        // A terminal batch.
        goto_batch(&mut app, "bookshop-9v9ps");
        press(&mut app, KeyCode::Char('x'));
        assert!(app.flash.as_ref().is_some_and(|f| f.text.contains("is Succeeded; nothing to cancel")));
        // Approving what is already approved.
        let mut objects = SampleObjects::demo().expect("sample");
        objects.batch_mut("travel-tdv6j").expect("travel").spec.approval = Some(crate::api::rotation_batch::Approval {
            required: true,
            approved_by: Some("carol".into()),
            ..Default::default()
        });
        update(&mut app, Msg::Snapshot(Arc::new(objects.snapshot())));
        goto_batch(&mut app, "travel-tdv6j");
        press(&mut app, KeyCode::Char('a'));
        assert!(matches!(app.overlay, Overlay::None));
        assert!(app.flash.as_ref().is_some_and(|f| f.text.contains("already approved by carol")));
        // RBAC said no.
        update(&mut app, Msg::Access { namespace: "cap-shop".into(), allowed: false });
        press(&mut app, KeyCode::Char('h'));
        assert!(matches!(app.overlay, Overlay::None));
        assert!(
            app.flash
                .as_ref()
                .is_some_and(|f| f.text.contains("alice may not patch rotationbatches in namespace cap-shop"))
        );
        // Read-only wins over everything.
        app.session.readonly = true;
        goto_batch(&mut app, "hr-portal-c9dsg");
        press(&mut app, KeyCode::Char('a'));
        assert!(app.flash.as_ref().is_some_and(|f| f.text.contains("read-only session")));
    }

    #[test]
    fn access_is_checked_once_per_namespace_before_a_write() {
        let mut app = app();
        app.access.clear();
        typed(&mut app, ":batches\n");
        let commands = press(&mut app, KeyCode::Char('j'));
        assert!(commands.contains(&Command::CheckAccess { namespace: "cap-hr".into() }), "{commands:?}");
        // While the answer is pending, the key says so.
        press(&mut app, KeyCode::Char('a'));
        assert!(app.flash.as_ref().is_some_and(|f| f.text.ends_with(strings::CHECKING_ACCESS)));
        assert!(
            press(&mut app, KeyCode::Char('k'))
                .iter()
                .all(|c| *c != Command::CheckAccess { namespace: "cap-hr".into() })
        );
        // The answer opens the dialog the key asked for, as the batch is still selected.
        update(&mut app, Msg::Access { namespace: "cap-hr".into(), allowed: true });
        assert!(matches!(app.overlay, Overlay::None), "k moved away from the batch");
        press(&mut app, KeyCode::Char('j'));
        app.access.remove("cap-hr");
        app.access.insert("cap-hr".into(), Access::Checking);
        press(&mut app, KeyCode::Char('a'));
        update(&mut app, Msg::Access { namespace: "cap-hr".into(), allowed: true });
        assert!(matches!(&app.overlay, Overlay::Dialog(d) if d.action == BatchAction::Approve));
        // Read-only sessions never ask.
        let mut readonly = self::app();
        readonly.access.clear();
        readonly.session.readonly = true;
        assert!(typed(&mut readonly, ":batches\nj").is_empty());
    }

    #[test]
    fn q_and_ctrl_c_quit() {
        let mut app = app();
        assert_eq!(press(&mut app, KeyCode::Char('q')), vec![Command::Quit]);
        assert!(app.quit);
        let mut app = self::app();
        assert_eq!(ctrl(&mut app, 'c'), vec![Command::Quit]);
    }

    #[test]
    fn key_releases_and_unbound_keys_do_nothing() {
        let mut app = app();
        let mut release = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert!(update(&mut app, Msg::Key(release)).is_empty());
        assert!(!app.quit);
        assert!(press(&mut app, KeyCode::Char('z')).is_empty());
        assert!(press(&mut app, KeyCode::F(5)).is_empty());
    }

    #[test]
    fn new_data_keeps_the_selected_object_selected() {
        let mut objects = SampleObjects::demo().expect("sample");
        let mut app = sample::app(objects.snapshot());
        typed(&mut app, ":tenants\n/bookshop-t5\n");
        press(&mut app, KeyCode::Esc);
        // The filter is gone, t5 stays selected.
        assert_eq!(selected_name(&app), Some(("cap-shop".into(), "bookshop-t5".into())));
        // Rows appear above it: the selection follows the object, not the index.
        objects.add_tenants(3);
        for tenant in
            objects.tenants.iter_mut().filter(|t| t.metadata.name.as_deref().is_some_and(|n| n.starts_with("bulk")))
        {
            let tenant = Arc::make_mut(tenant);
            tenant.metadata.namespace = Some("cap-a".into());
        }
        let before = app.cursor().selected;
        update(&mut app, Msg::Snapshot(Arc::new(objects.snapshot())));
        assert_eq!(app.cursor().selected, before + 3);
        assert_eq!(selected_name(&app), Some(("cap-shop".into(), "bookshop-t5".into())));
        // It disappears: the selection stays in range.
        objects.tenants.retain(|t| t.metadata.name.as_deref() != Some("bookshop-t5"));
        objects.tenants.truncate(2);
        update(&mut app, Msg::Snapshot(Arc::new(objects.snapshot())));
        assert_eq!(app.cursor().selected, 1);
    }

    #[test]
    fn messages_from_the_runtime_change_the_header_and_footer() {
        let mut app = app();
        update(&mut app, Msg::Role(Role::Observer));
        assert_eq!(app.role_label(), "Observer");
        update(&mut app, Msg::Identity("bob@example.com".into()));
        assert_eq!(app.session.user.as_deref(), Some("bob@example.com"));
        update(&mut app, Msg::Connection(ConnectionState { error: Some("refused".into()), attempts: 1 }));
        assert!(!app.connection.is_connected());
        update(&mut app, Msg::Connection(ConnectionState::default()));
        assert_eq!(app.flash.as_ref().map(|f| f.text.as_str()), Some(strings::RECONNECTED));
        // Flash messages expire after a while.
        let later = Timestamp::from_second(app.now.as_second() + FLASH_SECONDS).expect("time");
        update(&mut app, Msg::Tick(later));
        assert!(app.flash.is_none());
        update(&mut app, Msg::Theme(Ok(Theme::load("light", None).expect("light"))));
        assert_eq!(app.theme.name, "light");
        update(&mut app, Msg::Theme(Err("no theme \"neon\"".into())));
        assert!(app.flash.as_ref().is_some_and(|f| f.level == Level::Error));
        typed(&mut app, ":tenants\n/emea\n");
        update(&mut app, Msg::Switched { context: "staging".into(), scope: "namespace cap-hr".into() });
        assert_eq!(app.session.scope, "namespace cap-hr");
        assert!(app.snapshot.tenants.is_empty() && app.filter.is_empty() && app.access.is_empty());
    }
}
