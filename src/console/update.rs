//! `update(&mut App, Msg) -> Vec<Command>`: dispatch, the only way the console's state changes.
//! A key goes to the open overlay (which changes its own state and answers with an `Outcome`
//! carried out here) or to the view. Pure: side effects are returned as commands for the
//! runtime, whose results come back as messages.

use std::sync::Arc;

use crossterm::event::{KeyEvent, KeyModifiers};
use k8s_openapi::jiff::Timestamp;

pub use super::message::{Command, Msg};

use super::app::{App, Flash, Level, Route, Sort, ViewKind};
use super::details;
use super::keymap::Action;
use super::overlay::action_dialog::ActionDialog;
use super::overlay::command_line::Input;
use super::overlay::help::HelpPane;
use super::overlay::pods::PodsPane;
use super::overlay::text_pane::TextPane;
use super::overlay::{Outcome, Overlay, popup_rows, popup_text_width};
use super::queries::{self, batch_action, selected_index, write_blocked};
use super::row_filter::RowFilter;
use super::strings;
use super::user_write::{Access, PendingWrite, WriteKind};
use super::views::view;
use crate::api::ObjectKey;
use crate::readmodel::Snapshot;

/// How long a message stays in the footer; errors stay longer, to be read.
const FLASH_SECONDS: i64 = 8;
const FLASH_ERROR_SECONDS: i64 = 20;

mod arrived;
mod table_key;

use table_key::table_key;

pub fn update(app: &mut App, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Key(key) => handle_key(app, &key, std::time::Instant::now()),
        Msg::Resize { width, height } => arrived::resize(app, width, height),
        Msg::Tick(now) => tick(app, now),
        Msg::Pods { namespace, deployment, rows } => arrived::pods(app, &namespace, &deployment, rows),
        Msg::PodLog { namespace, pod, lines } => arrived::pod_log(app, &namespace, &pod, lines),
        Msg::Snapshot(snapshot) => arrived::snapshot(app, snapshot),
        Msg::Fleet(rows) => arrived::fleet(app, rows),
        Msg::Open(route) => {
            navigate(app, route, false);
            check_access_for_selection(app)
        }
        Msg::Connection(state) => arrived::connection(app, state),
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
        Msg::WriteFailure(failure) => arrived::write_failure(app, failure),
        Msg::Identity(user) => {
            app.session.user = Some(user);
            Vec::new()
        }
        Msg::Access { kind, namespace, allowed } => access_known(app, kind, namespace, allowed),
        Msg::WriteDone(Ok(done)) => arrived::said(app, Level::Info, done),
        Msg::Theme(Ok(theme)) => arrived::theme(app, theme),
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
        Msg::Dependencies { namespace, name, report } => arrived::dependencies(app, namespace, name, report),
        Msg::WriteDone(Err(error)) | Msg::Theme(Err(error)) | Msg::Error(error) => {
            arrived::said(app, Level::Error, error)
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
        Overlay::Pods(pane) => pane
            .read_again(now)
            .map(|ObjectKey { namespace, name }| Command::Pods { namespace, deployment: name })
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

/// The answer to `Command::CheckAccess`; a write key pressed while it was asked goes on, if
/// what it was aimed at is still selected.
fn access_known(app: &mut App, kind: WriteKind, namespace: String, allowed: bool) -> Vec<Command> {
    let access = if allowed {
        Access::Allowed
    } else {
        Access::Denied(kind.denied(app.session.user.as_deref().unwrap_or("you"), &namespace))
    };
    app.access.set(kind, &namespace, access);
    let Some(pending) = app
        .pending_write
        .take_if(|pending| WriteKind::of(pending.action) == Some(kind) && pending.namespace == namespace)
    else {
        return Vec::new();
    };
    if queries::write_target(app, kind) == Some(ObjectKey::new(namespace, pending.target)) {
        open_dialog(app, pending.action)
    } else {
        Vec::new()
    }
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

fn row_key(snapshot: &Snapshot, kind: ViewKind, index: usize) -> Option<super::app::RowKey> {
    view(kind).key(snapshot, index)
}

/// Recompute the visible rows of the current route and keep the selection on the same object.
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
    let rows = queries::table_rows(app);
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
    if let Overlay::Dialog(dialog) = &mut app.overlay {
        let outcome = dialog.handle_key(key);
        return carry_out(app, outcome, at);
    }
    if app.input != Input::None {
        // The line is taken out while it handles the key, so Tab can ask what the rest offers.
        let mut line = std::mem::take(&mut app.input);
        let outcome = line.handle_key(key, |text| queries::choices(app, text));
        app.input = line;
        return carry_out(app, outcome, at);
    }
    let action = app.keymap.action(key);
    if let Some(outcome) = overlay_key(app, key, action) {
        return carry_out(app, outcome, at);
    }
    let Some(action) = action else {
        return Vec::new();
    };
    if action.writes() {
        return open_dialog(app, action);
    }
    table_key(app, action)
}

/// Ask once per kind of write and namespace whether we may write there, for what the selection
/// offers (so keys can say why not).
fn check_access_for_selection(app: &mut App) -> Vec<Command> {
    if app.session.readonly {
        return Vec::new();
    }
    let mut commands = Vec::new();
    for kind in WriteKind::ALL {
        if let Some(ObjectKey { namespace, .. }) = queries::write_target(app, kind)
            && app.access.ask(kind, &namespace)
        {
            commands.push(Command::CheckAccess { kind, namespace });
        }
    }
    commands
}

fn drill_down(app: &mut App) -> Vec<Command> {
    let Some(index) = selected_index(app) else { return Vec::new() };
    if app.route.view == ViewKind::Fleet {
        return open_fleet_row(app, index);
    }
    if let Some(ObjectKey { namespace, name: deployment }) = view(app.route.view).workload(&app.snapshot, index) {
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
    let route = super::views::fleet_row_route(row);
    vec![Command::OpenContext { context: row.context.clone(), namespace: row.namespace.clone(), route }]
}

/// Open the selected row's detail pane, and ask for what it needs worked out.
fn open_detail(app: &mut App) -> Vec<Command> {
    let mut commands = check_access_for_selection(app);
    let Some(index) = selected_index(app) else {
        tracing::debug!(view = ?app.route.view, rows = app.visible.len(), "no row to show in detail");
        return commands;
    };
    if let Some((title, lines)) = details::detail(app) {
        app.overlay = Overlay::Detail(TextPane::new(title, lines));
        commands.extend(view(app.route.view).detail_needs(&app.snapshot, index).map(Command::Detail));
    }
    commands
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
            app.overlay = Overlay::Help(HelpPane::default());
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

// ----- writes ---------------------------------------------------------------------------------

/// A write key: its dialog for the selected batch (application), or why not.
fn open_dialog(app: &mut App, action: Action) -> Vec<Command> {
    let commands = check_access_for_selection(app);
    let Some(kind) = WriteKind::of(action) else { return commands };
    if let Some(why) = write_blocked(app, action) {
        if why == kind.checking()
            && let Some(ObjectKey { namespace, name: target }) = queries::write_target(app, kind)
        {
            app.pending_write = Some(PendingWrite { action, namespace, target });
        }
        flash(app, Level::Warning, format!("{}: {why}", strings::action_label(action)));
        return commands;
    }
    let Some(ObjectKey { namespace, name: target }) = queries::write_target(app, kind) else { return commands };
    let dialog = match kind {
        WriteKind::Batch => {
            let verb = batch_action(app, action);
            let row = app.snapshot.batches.iter().find(|row| row.namespace == namespace && row.name == target);
            let (Some(verb), Some(row)) = (verb, row) else { return commands };
            ActionDialog::new(verb, row, queries::dialog_preview(app, row, verb))
        }
        WriteKind::Freeze => {
            let preview = queries::freeze_preview(app, &namespace, &target);
            ActionDialog::freeze(action == Action::Unfreeze, &namespace, &target, preview)
        }
    };
    app.overlay = Overlay::Dialog(Box::new(dialog));
    commands
}

/// The open overlay's answer to a key, or `None` when no overlay is open (the key is the
/// view's). The Pods pane, help, detail and YAML read the key's action; the dialog has had it.
fn overlay_key(app: &mut App, key: &KeyEvent, action: Option<Action>) -> Option<Outcome> {
    let page = queries::table_rows(app);
    let rows = popup_rows(app.viewport_height);
    // The help's length (to keep its scroll inside it) is asked before the pane is borrowed.
    let help_lines = matches!(app.overlay, Overlay::Help(_))
        .then(|| queries::help_lines(app, popup_text_width(app.viewport_width)).len());
    match &mut app.overlay {
        Overlay::None | Overlay::Dialog(_) => None,
        Overlay::Pods(pane) => Some(pane.handle_key(key, action, page, rows)),
        Overlay::Help(help) => Some(help.handle_key(action, page, help_lines.unwrap_or(0), rows)),
        Overlay::Detail(pane) | Overlay::Yaml(pane) => Some(pane.handle_key(action, page, rows)),
    }
}

/// Carry out what a key in an overlay or on the input line asked for; `at` is when the key came.
fn carry_out(app: &mut App, outcome: Outcome, at: std::time::Instant) -> Vec<Command> {
    match outcome {
        Outcome::Stay => {}
        Outcome::Close => app.overlay = Overlay::None,
        Outcome::CloseInBurst => {
            app.overlay = Overlay::None;
            app.burst_guard = Some(at);
        }
        Outcome::Note(text) => flash(app, Level::Info, text),
        Outcome::Confirmed(confirmed) => {
            app.overlay = Overlay::None;
            app.burst_guard = Some(at);
            let write = match confirmed.at(app.now) {
                Ok(write) => write,
                Err(why) => {
                    flash(app, Level::Error, why);
                    return Vec::new();
                }
            };
            flash(app, Level::Info, write.progress());
            return vec![Command::Write(write)];
        }
        Outcome::ReadLog { namespace, pod, container } => return vec![Command::PodLog { namespace, pod, container }],
        Outcome::Quit => {
            app.quit = true;
            return vec![Command::Quit];
        }
        Outcome::Filter(text) => {
            app.filter = text;
            refresh(app);
        }
        Outcome::Run(line) => return run_command(app, &line),
        Outcome::ListNamespaces => return vec![Command::ListNamespaces],
    }
    Vec::new()
}

/// For the console's unit tests: the demo's `App`, and keys typed into it the way a user types
/// them (through `handle_key`, a second apart unless a test says otherwise).
#[cfg(test)]
pub mod testing {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    use super::{Command, handle_key};
    use crate::console::app::App;
    use crate::console::queries::selected_batch;
    use crate::demo::sample::{self, SampleObjects};

    pub fn app() -> App {
        sample::app(SampleObjects::demo().expect("sample").snapshot())
    }

    thread_local! {
        /// A key clock for tests: each key comes a second after the last, so no two keys are in
        /// one burst unless a test says so (`press_at`).
        static KEY_CLOCK: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
    }

    pub fn next_key_time() -> std::time::Instant {
        KEY_CLOCK.with(|clock| {
            let next = clock.get().map_or_else(std::time::Instant::now, |t| t + std::time::Duration::from_secs(1));
            clock.set(Some(next));
            next
        })
    }

    pub fn press(app: &mut App, code: KeyCode) -> Vec<Command> {
        handle_key(app, &KeyEvent::new(code, KeyModifiers::NONE), next_key_time())
    }

    pub fn press_at(app: &mut App, code: KeyCode, at: std::time::Instant) -> Vec<Command> {
        handle_key(app, &KeyEvent::new(code, KeyModifiers::NONE), at)
    }

    pub fn ctrl(app: &mut App, ch: char) -> Vec<Command> {
        handle_key(app, &KeyEvent::new(KeyCode::Char(ch), KeyModifiers::CONTROL), next_key_time())
    }

    pub fn typed(app: &mut App, text: &str) -> Vec<Command> {
        let mut commands = Vec::new();
        for ch in text.chars() {
            commands.extend(press(app, if ch == '\n' { KeyCode::Enter } else { KeyCode::Char(ch) }));
        }
        commands
    }

    pub fn goto_batch(app: &mut App, name: &str) {
        typed(app, ":batches\n");
        press(app, KeyCode::Char('g'));
        while selected_batch(app).is_none_or(|batch| batch.name != name) {
            let before = app.cursor().selected;
            press(app, KeyCode::Char('j'));
            assert_ne!(before, app.cursor().selected, "no batch {name}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{app, ctrl, goto_batch, press, typed};
    use super::*;
    use crate::actions::BatchAction;
    use crate::cluster::stores::ConnectionState;
    use crate::console::app::Focus;
    use crate::console::theme::Theme;
    use crate::demo::sample::{self, SampleObjects};
    use crate::engine::Role;
    use crossterm::event::{KeyCode, KeyEventKind};

    fn selected_name(app: &App) -> Option<crate::console::app::RowKey> {
        app.cursor().key
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
            matches!(&app.overlay, Overlay::Detail(TextPane { title, .. }) if title.starts_with("Deployment cap-shop/travel-1-2-0"))
        );
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
            state: "AwaitingApproval".into(),
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
        assert!(matches!(app.overlay, Overlay::Help(_)));
        press(&mut app, KeyCode::Esc);
        assert_eq!(typed(&mut app, ":q\n"), vec![Command::Quit]);
        assert!(app.quit);
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
        update(&mut app, Msg::Access { kind: WriteKind::Batch, namespace: "cap-shop".into(), allowed: false });
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
        assert!(
            commands.contains(&Command::CheckAccess { kind: WriteKind::Batch, namespace: "cap-hr".into() }),
            "{commands:?}"
        );
        // While the answer is pending, the key says so.
        press(&mut app, KeyCode::Char('a'));
        assert!(app.flash.as_ref().is_some_and(|f| f.text.ends_with(strings::CHECKING_ACCESS)));
        assert!(
            press(&mut app, KeyCode::Char('k'))
                .iter()
                .all(|c| *c != Command::CheckAccess { kind: WriteKind::Batch, namespace: "cap-hr".into() })
        );
        // The answer opens the dialog the key asked for, as the batch is still selected.
        update(&mut app, Msg::Access { kind: WriteKind::Batch, namespace: "cap-hr".into(), allowed: true });
        assert!(matches!(app.overlay, Overlay::None), "k moved away from the batch");
        press(&mut app, KeyCode::Char('j'));
        app.access.set(WriteKind::Batch, "cap-hr", Access::Checking);
        press(&mut app, KeyCode::Char('a'));
        update(&mut app, Msg::Access { kind: WriteKind::Batch, namespace: "cap-hr".into(), allowed: true });
        assert!(
            matches!(&app.overlay, Overlay::Dialog(d) if d.action == crate::console::overlay::action_dialog::DialogAction::Batch(BatchAction::Approve))
        );
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
        assert_eq!(selected_name(&app), Some(crate::console::app::RowKey::object("cap-shop", "bookshop-t5")));
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
        assert_eq!(selected_name(&app), Some(crate::console::app::RowKey::object("cap-shop", "bookshop-t5")));
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
        update(
            &mut app,
            Msg::Connection(ConnectionState { error: Some("refused".into()), attempts: 1, ..Default::default() }),
        );
        assert!(!app.connection.is_connected());
        update(&mut app, Msg::Connection(ConnectionState::default()));
        assert_eq!(app.flash.as_ref().map(|f| f.text.as_str()), Some(strings::RECONNECTED));
        // A refusal is no outage: still connected, and it says what is forbidden and what that hides.
        let mut refused = ConnectionState::default();
        refused.forbidden.insert("BindingSecret", "forbidden: secrets is forbidden".into());
        refused.forbidden.insert("VcapSecret", "forbidden: secrets is forbidden".into());
        update(&mut app, Msg::Connection(refused));
        assert!(app.connection.is_connected());
        assert_eq!(
            app.flash.as_ref().map(|f| f.text.as_str()),
            Some(
                "you may not list binding Secrets, VCAP Secrets here, so the views miss credential verdicts and \
                 keys, what each Deployment runs — kubectl auth can-i list secrets"
            )
        );
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
