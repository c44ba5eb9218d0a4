//! Read-only questions about the console's state, asked by `update` (to act), `draw` (to show)
//! and `details`: which row is selected, which write a key would make and why it is blocked,
//! how many rows a view has, how the command line completes, what the help and a dialog's
//! preview say. Nothing here changes state.

use super::app::{App, ViewKind};
use super::keymap::Action;
use super::overlay::help::{self, HelpText};
use super::overlay::picker::{self, Choices};
use super::strings;
use super::user_write::{Access, WriteKind};
use super::views::view;
use crate::actions::BatchAction;
use crate::api::{BatchPhase, ObjectKey};
use crate::readmodel::{BatchRow, Snapshot};

pub fn row_count(snapshot: &Snapshot, kind: ViewKind) -> usize {
    view(kind).len(snapshot)
}

/// Index (into its snapshot list) of the selected row.
pub fn selected_index(app: &App) -> Option<usize> {
    app.visible.get(app.cursor().selected).copied()
}

/// The batch the selection points at (a batch row, or the batch of a rollout row).
pub fn selected_batch(app: &App) -> Option<ObjectKey> {
    view(app.route.view).batch(&app.snapshot, selected_index(app)?)
}

/// The application the selection points at, for the freeze keys (an application row, or the
/// application of a batch row).
pub fn selected_application(app: &App) -> Option<ObjectKey> {
    view(app.route.view).application(&app.snapshot, selected_index(app)?)
}

/// What a write of `kind` would be aimed at: the selected batch, or the selected row's
/// application.
pub fn write_target(app: &App, kind: WriteKind) -> Option<ObjectKey> {
    match kind {
        WriteKind::Batch => selected_batch(app),
        WriteKind::Freeze => selected_application(app),
    }
}

/// The application's own freeze (`app-NAME`) in force now, the one `U` lifts.
pub fn own_freeze<'a>(app: &'a App, namespace: &str, application: &str) -> Option<&'a crate::api::Freeze> {
    use kube::ResourceExt as _;
    let name = crate::api::freeze::application_freeze_name(application);
    app.snapshot.freezes.iter().map(|freeze| &**freeze).find(|freeze| {
        freeze.namespace().as_deref() == Some(namespace)
            && freeze.name_any() == name
            && freeze.spec.scope == crate::api::FreezeScope::Application
            && freeze.active_at(app.now)
    })
}

/// The batch action a key means for the selected batch (`h` releases a held batch).
pub fn batch_action(app: &App, action: Action) -> Option<BatchAction> {
    let ObjectKey { namespace, name } = selected_batch(app)?;
    let batch = app.snapshot.batches.iter().find(|row| row.namespace == namespace && row.name == name)?;
    Some(match action {
        Action::Approve => BatchAction::Approve,
        Action::Force => BatchAction::Force { approve: false },
        Action::Hold if batch.object.spec.hold.is_some() => BatchAction::Release,
        Action::Hold => BatchAction::Hold,
        Action::Cancel => BatchAction::Cancel,
        Action::Retry => BatchAction::Retry,
        Action::Undo => BatchAction::Undo,
        _ => return None,
    })
}

/// Why a write key is disabled right now, if it is.
pub fn write_blocked(app: &App, action: Action) -> Option<String> {
    if app.session.readonly {
        return Some(strings::READONLY.to_string());
    }
    let kind = WriteKind::of(action)?;
    let Some(ObjectKey { namespace, name: target }) = write_target(app, kind) else {
        return Some(kind.select_first().to_string());
    };
    match app.access.get(kind, &namespace) {
        Some(Access::Denied(why)) => return Some(why.clone()),
        Some(Access::Checking) | None => return Some(kind.checking().to_string()),
        Some(Access::Allowed) => {}
    }
    match kind {
        WriteKind::Batch => batch_blocked(app, action, &namespace, &target),
        WriteKind::Freeze => freeze_blocked(app, action, &namespace, &target),
    }
}

/// Why a batch key is disabled for the batch `namespace/name` (its phase refuses the action).
fn batch_blocked(app: &App, action: Action, namespace: &str, name: &str) -> Option<String> {
    let batch = app.snapshot.batches.iter().find(|row| row.namespace == namespace && row.name == name)?;
    let verb = batch_action(app, action)?;
    verb.refusal(&batch.object)
}

/// Why a freeze key is disabled for the application `namespace/application` (`U` lifts only its
/// own freeze).
fn freeze_blocked(app: &App, action: Action, namespace: &str, application: &str) -> Option<String> {
    if action == Action::Unfreeze && own_freeze(app, namespace, application).is_none() {
        let other =
            crate::readmodel::governing_freeze(&app.snapshot, app.freeze_namespace(), namespace, application, app.now);
        return Some(strings::not_frozen(namespace, application, other.map(|f| f.summary()).as_deref()));
    }
    None
}

/// The header's banner while a freeze holds what is in view: the most relevant one, and how many
/// more there are (`strings::freeze_banner`).
pub fn freeze_banner(app: &App) -> Option<(String, String)> {
    let freezes = crate::readmodel::freezes_in_view(&app.snapshot, app.freeze_namespace(), app.now);
    let first = freezes.first()?;
    Some(strings::freeze_banner(&first.summary(), freezes.len() - 1))
}

/// Table rows that fit on screen: the viewport less the freeze banner while it shows.
pub fn table_rows(app: &App) -> usize {
    app.viewport_rows.saturating_sub(usize::from(freeze_banner(app).is_some())).max(1)
}

/// What freezing (or unfreezing) the application touches: its open batch (and when its old
/// credentials die: a freeze past then escalates), and the freeze that holds it now.
pub fn freeze_preview(app: &App, namespace: &str, application: &str) -> Vec<String> {
    let batch = app
        .snapshot
        .batches
        .iter()
        .find(|row| row.namespace == namespace && row.application == application && !row.phase.is_terminal());
    let mut lines = vec![match batch {
        Some(row) => format!("open batch: {} ({})", row.name, row.state.text(app.now, &strings::relative)),
        None => "open batch: none (rotations from now on are collected, not rolled)".to_string(),
    }];
    let holding =
        crate::readmodel::governing_freeze(&app.snapshot, app.freeze_namespace(), namespace, application, app.now);
    if let Some(freeze) = holding {
        lines.push(format!("now: {}", freeze.summary()));
    }
    if let Some(revocable) = batch.and_then(|row| row.old_credentials_revocable) {
        lines.push(format!("{} {}", strings::OLD_CREDENTIALS, super::views::revocable(revocable, app.now)));
    }
    lines
}

/// Every `:` command, for completion and help.
pub fn command_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> =
        ViewKind::ALL.iter().flat_map(|&kind| view(kind).aliases().iter().copied()).collect();
    names.extend(["ctx", "ns", "theme", "help", "q", "quit"]);
    names
}

/// Every command line that `text` could become: command words, or for `:ns`, `:ctx`, `:sort`
/// and `:theme` the namespaces, contexts, columns and themes that exist (what the picker lists).
pub fn candidates(app: &App, text: &str) -> Vec<String> {
    let Some((command, argument)) = text.split_once(' ') else {
        return command_names().into_iter().filter(|name| name.starts_with(text)).map(str::to_string).collect();
    };
    let argument = argument.trim_start();
    let values: Vec<String> = match command {
        "ns" => std::iter::once("all".to_string()).chain(namespaces(app)).collect(),
        "ctx" => app.contexts.clone(),
        "sort" => {
            let names = view(app.route.view).columns().iter().map(|column| column.header.to_lowercase());
            if argument.starts_with('-') { names.map(|name| format!("-{name}")).collect() } else { names.collect() }
        }
        "theme" => app.theme_names.clone(),
        _ => Vec::new(),
    };
    values.into_iter().filter(|value| value.starts_with(argument)).map(|value| format!("{command} {value}")).collect()
}

/// What the picker under the command line lists (and Tab walks): the candidates of what is
/// typed, or — once an argument is complete — every value of its command.
pub fn picker(app: &App, text: &str) -> Vec<String> {
    let list = candidates(app, text);
    match text.split_once(' ') {
        Some((command, _)) if list.len() == 1 && list[0] == text => candidates(app, &format!("{command} ")),
        _ => list,
    }
}

/// The namespaces `:ns` offers: those the API server listed, else those of the objects in view.
pub fn namespaces(app: &App) -> Vec<String> {
    match &app.namespaces {
        Some(Ok(names)) => names.clone(),
        Some(Err(_)) | None => {
            let mut names: Vec<String> = app.snapshot.apps.iter().map(|row| row.namespace.clone()).collect();
            names.extend(app.snapshot.batches.iter().map(|row| row.namespace.clone()));
            names.sort();
            names.dedup();
            names
        }
    }
}

/// Complete the command line: the one candidate, else the candidates' longest common prefix
/// when it is longer than what is typed.
pub fn complete(app: &App, text: &str) -> Option<String> {
    picker::complete(&candidates(app, text), text)
}

/// What the command line `text` can become, for Tab.
pub fn choices(app: &App, text: &str) -> Choices {
    Choices { candidates: candidates(app, text), list: picker(app, text) }
}

/// Where the `:ns` picker's list comes from, when it is not the API server's answer.
pub fn picker_note(app: &App, text: &str) -> Option<String> {
    match (&app.namespaces, text.starts_with("ns ")) {
        (Some(Err(why)), true) => Some(format!("{} ({why})", strings::NAMESPACES_FROM_VIEW)),
        (None, true) => Some(strings::NAMESPACES_LOADING.to_string()),
        _ => None,
    }
}

/// What the help says about this session.
pub fn help_text(app: &App) -> HelpText<'_> {
    HelpText {
        theme: &app.theme,
        keymap: &app.keymap,
        disabled: Action::ALL
            .iter()
            .filter(|action| action.writes())
            .filter_map(|&action| Some((action, write_blocked(app, action)?)))
            .collect(),
        session: format!("context {} · {} · engine {}", app.session.context, app.session.scope, app.role_label()),
        themes: format!("theme {} (themes: {})", app.theme.name, app.theme_names.join(", ")),
        demo_kubeconfig: app.session.demo_kubeconfig.as_deref(),
    }
}

/// The help's lines, wrapped to `width` cells.
pub fn help_lines(app: &App, width: usize) -> Vec<ratatui::text::Line<'static>> {
    help::lines(&help_text(app), width)
}

/// What a batch action touches: the Deployments the batch restarts and the tenants they serve.
/// And, when known, when the old credentials of its Secrets die (the deadline the decision meets).
pub fn dialog_preview(app: &App, row: &BatchRow, verb: BatchAction) -> Vec<String> {
    let names = |keep: fn(&crate::api::rotation_batch::BatchDeployment) -> bool| -> Vec<String> {
        row.object.restarts().filter(|d| keep(d)).map(|d| d.name.clone()).collect()
    };
    let (what, deployments) = match verb {
        BatchAction::Retry if matches!(row.object.phase(), BatchPhase::Undone | BatchPhase::Cancelled) => {
            ("rolls forward", names(|d| d.left_behind()))
        }
        BatchAction::Retry => ("restarts again", names(|d| d.retriable())),
        BatchAction::Undo => ("goes back", names(|d| d.undoable())),
        _ if row.object.planned().is_some() => {
            ("restarts (planned)", row.object.restarts_or_planned().map(|d| d.name.clone()).collect())
        }
        _ => ("restarts", names(|_| true)),
    };
    let tenants = super::views::tenants_served(&app.snapshot, row);
    let mut lines = vec![strings::preview_line(what, &deployments), strings::preview_line("tenants served", &tenants)];
    let not_owned: Vec<String> = row.object.not_owned().map(|d| d.name.clone()).collect();
    if !not_owned.is_empty() {
        lines.push(strings::preview_line(strings::NOT_OWNED, &not_owned));
    }
    if let Some(revocable) = row.old_credentials_revocable {
        lines.push(format!("{} {}", strings::OLD_CREDENTIALS, super::views::revocable(revocable, app.now)));
    }
    lines
}

/// Terminals shorter than this get the compact layout.
pub const COMPACT_BELOW: u16 = 10;

/// Lines around the table rows: header, tab bar, title, column header, footer (compact: 3).
pub fn chrome_rows(height: u16) -> u16 {
    if height < COMPACT_BELOW { 3 } else { 5 }
}

/// Most lines a footer message wraps to.
pub const FOOTER_MAX_ROWS: u16 = 3;

/// Footer rows for a terminal `width` columns wide and `height` rows high: a long message wraps
/// (up to `FOOTER_MAX_ROWS`, never on a short terminal), anything else takes one line.
pub fn footer_rows(app: &App, width: u16, height: u16) -> u16 {
    let Some(flash) = app.flash.as_ref().filter(|_| app.input == super::overlay::command_line::Input::None) else {
        return 1;
    };
    if height < COMPACT_BELOW || width == 0 {
        return 1;
    }
    // " message" and "  q quit " at the end of the last row.
    let needed = 1 + usize::from(super::table::text_width(&flash.text)) + FOOTER_QUIT_WIDTH;
    u16::try_from(needed.div_ceil(usize::from(width))).unwrap_or(FOOTER_MAX_ROWS).clamp(1, FOOTER_MAX_ROWS)
}

/// The width of `  q quit ` at the end of a message (a rebound key's label may be longer).
const FOOTER_QUIT_WIDTH: usize = 9;
