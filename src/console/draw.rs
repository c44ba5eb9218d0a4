//! Drawing: a pure function of `&App`. Only the rows on screen are turned into table cells.
//! Every size works, down to 1×1: areas come from the layout and text is clipped, never indexed.

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Padding, Paragraph, Row, Table, TableState, Wrap};

use super::app::{App, Input, Level, Overlay, ViewKind};
use super::keymap::Action;
use super::model::{Snapshot, TenantRow};
use super::strings;
use super::theme::Theme;
use super::update::{complete, write_blocked};
use crate::api::rotation_batch::{DeploymentAction, DeploymentRolloutState};
use crate::output::{human_duration, window_text};

/// Terminals shorter than this get the compact layout.
pub const COMPACT_BELOW: u16 = 10;

/// Lines around the table rows: header, tab bar, title, column header, footer (compact: 3).
pub fn chrome_rows(height: u16) -> u16 {
    if height < COMPACT_BELOW { 3 } else { 5 }
}

pub fn draw(frame: &mut Frame, app: &App) {
    let theme = &app.theme;
    let area = frame.area();
    frame.render_widget(Block::default().style(theme.base()), area);
    // Short terminals drop the tab bar and the title line to keep rows visible (the banner stays).
    let compact = area.height < COMPACT_BELOW;
    let [header, tabs, title, table, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(u16::from(!compact || !app.connection.is_connected())),
        Constraint::Length(u16::from(!compact)),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(frame, app, header);
    if app.connection.is_connected() {
        draw_tabs(frame, app, tabs);
    } else {
        draw_banner(frame, app, tabs);
    }
    draw_title(frame, app, title);
    draw_table(frame, app, table);
    draw_footer(frame, app, footer);
    match &app.overlay {
        Overlay::None => {}
        Overlay::Help { scroll } => draw_text_popup(frame, theme, "Help", &help_lines(app), *scroll, area),
        Overlay::Detail { title, lines, scroll } | Overlay::Yaml { title, lines, scroll } => {
            let lines: Vec<Line> = lines.iter().map(|line| Line::raw(line.as_str())).collect();
            draw_text_popup(frame, theme, title, &lines, *scroll, area);
        }
        Overlay::Dialog(_) => draw_dialog(frame, app, area),
    }
}

fn draw_header(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    let (dot, dot_style, state) = if app.connection.is_connected() {
        ("●", theme.ok(), if app.snapshot.synced { "connected" } else { "syncing" })
    } else {
        ("●", theme.error(), "disconnected")
    };
    let role_style = match app.role_label() {
        "Leader" => theme.ok(),
        "Read-only" => theme.warning(),
        _ => theme.info(),
    };
    let separator = Span::styled(" │ ", theme.header().patch(theme.muted()));
    let mut spans = vec![
        Span::styled(" capdeck", theme.header().add_modifier(Modifier::BOLD)),
        separator.clone(),
        Span::styled(format!("ctx {}", app.session.context), theme.header()),
        separator.clone(),
        Span::styled(app.session.scope.clone(), theme.header()),
        separator.clone(),
        Span::styled("engine ", theme.header()),
        Span::styled(app.role_label(), theme.header().patch(role_style).add_modifier(Modifier::BOLD)),
    ];
    if let Some((note, severity)) = app.leader_note() {
        let style = match severity {
            super::app::Severity::Info => theme.muted(),
            super::app::Severity::Warning => theme.warning(),
            super::app::Severity::Error => theme.error(),
        };
        spans.push(Span::styled(format!(" {note}"), theme.header().patch(style)));
    }
    spans.extend([
        separator.clone(),
        Span::styled(format!("user {}", app.session.user.as_deref().unwrap_or("?")), theme.header()),
        separator,
        Span::styled(format!("{dot} "), theme.header().patch(dot_style)),
        Span::styled(state, theme.header()),
    ]);
    let line = Line::from(spans);
    frame.render_widget(Paragraph::new(line).style(theme.header()), area);
}

fn draw_tabs(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    let mut spans = vec![Span::raw(" ")];
    for view in ViewKind::ALL {
        let label = format!(" {} ", view.title());
        if view == app.route.view {
            spans.push(Span::styled(label, theme.selection()));
        } else {
            spans.push(Span::styled(label, theme.muted()));
        }
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_banner(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    let error = app.connection.error.as_deref().unwrap_or_default();
    let attempts =
        if app.connection.attempts > 0 { format!(" (attempt {})", app.connection.attempts) } else { String::new() };
    let line = Line::from(vec![
        Span::styled(format!(" {} ", strings::CONNECTION_LOST), theme.error().add_modifier(Modifier::REVERSED)),
        Span::styled(format!(" {}", app.session.server), theme.error()),
        Span::styled(format!(" {error} — {}{attempts}", strings::RECONNECTING), theme.error()),
    ]);
    frame.render_widget(Paragraph::new(line), area);
}

fn draw_title(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    let total = super::update::row_count(&app.snapshot, app.route.view);
    let mut spans = vec![
        Span::styled(format!(" {}", app.route.view.title()), theme.accent()),
        Span::styled(format!(" [{}/{}]", app.visible.len(), total), theme.muted()),
    ];
    if let Some(focus) = &app.route.focus {
        spans.push(Span::styled(format!(" · {}", focus.label()), theme.info()));
    }
    if !app.filter.is_empty() {
        spans.push(Span::styled(format!(" · /{}", app.filter), theme.warning()));
    }
    if !app.snapshot.invalid.is_empty() {
        spans.push(Span::styled(
            format!(" · {} {}", app.snapshot.invalid.len(), strings::INVALID_OBJECTS),
            theme.error(),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// Column headers and widths of a view. Fixed widths, the last column takes the rest.
fn columns(view: ViewKind) -> (&'static [&'static str], Vec<Constraint>) {
    use Constraint::{Fill, Length};
    match view {
        ViewKind::Applications => (
            &["NAMESPACE", "NAME", "STATE", "LATEST", "VERSIONS", "TENANTS", "ROLLOUT", "APPROVAL", "BATCH"],
            vec![Length(12), Length(18), Length(12), Length(8), Length(8), Length(8), Length(16), Length(8), Fill(1)],
        ),
        ViewKind::Versions => (
            &["NAMESPACE", "NAME", "APPLICATION", "VERSION", "STATE", "DEPLOY", "JOBS", "TENANTS", "AGE"],
            vec![Length(12), Length(26), Length(14), Length(10), Length(12), Length(6), Length(4), Length(7), Fill(1)],
        ),
        ViewKind::Tenants => (
            &["NAMESPACE", "NAME", "APPLICATION", "SUBDOMAIN", "STATE", "VERSION", "UPGRADE", "OPERATION", "BLOCKED"],
            vec![
                Length(12),
                Length(22),
                Length(14),
                Length(16),
                Length(17),
                Length(15),
                Length(7),
                Length(30),
                Fill(1),
            ],
        ),
        ViewKind::Operations => (
            &["NAMESPACE", "NAME", "TENANT", "OPERATION", "STATE", "STEP", "ACTIVE JOB", "AGE", "MESSAGE"],
            vec![Length(12), Length(26), Length(18), Length(10), Length(10), Length(5), Length(24), Length(6), Fill(1)],
        ),
        ViewKind::Batches => (
            &[
                "NAMESPACE",
                "NAME",
                "APPLICATION",
                "PHASE",
                "WINDOW",
                "SECRETS",
                "APPROVAL",
                "DEPLOYMENTS",
                "AGE",
                "BLAST RADIUS",
            ],
            vec![
                Length(12),
                Length(20),
                Length(12),
                Length(16),
                Length(15),
                Length(7),
                Length(22),
                Length(16),
                Length(6),
                Fill(1),
            ],
        ),
        ViewKind::Rollouts => (
            &["NAMESPACE", "BATCH", "DEPLOYMENT", "VERSION", "ACTION", "STATE", "PROGRESS", "MESSAGE"],
            vec![Length(12), Length(20), Length(28), Length(16), Length(9), Length(8), Length(16), Fill(1)],
        ),
        ViewKind::Events => {
            (&["AGE", "TYPE", "REASON", "OBJECT", "NOTE"], vec![Length(6), Length(7), Length(24), Length(22), Fill(1)])
        }
    }
}

/// The style of a state word: green when fine, yellow when waiting on someone, red when broken.
pub fn state_style(theme: &Theme, state: &str) -> Style {
    match state {
        "Ready" | "Succeeded" | "Complete" | "Provisioned" | "Completed" | "Normal" | "NoChange" => theme.ok(),
        "Error" | "Failed" | "ProvisioningError" | "UpgradeError" | "DeletionError" | "Warning" => theme.error(),
        "Stalled" => theme.error().add_modifier(Modifier::REVERSED),
        "AwaitingApproval" | "Held" | "Processing" | "Provisioning" | "Upgrading" | "Rolling" | "RollingOut"
        | "Collecting" | "Queued" | "Deleting" => theme.warning(),
        "Cancelled" | "Superseded" | "-" => theme.muted(),
        _ => theme.base(),
    }
}

fn age(app: &App, time: Option<k8s_openapi::jiff::Timestamp>) -> String {
    time.map_or_else(|| "-".into(), |t| human_duration(app.now.as_second() - t.as_second()))
}

fn draw_table(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    let view = app.route.view;
    let (headers, widths) = columns(view);
    let body_rows = usize::from(area.height.saturating_sub(1));
    if app.visible.is_empty() {
        let text = if !app.snapshot.synced && app.connection.is_connected() {
            strings::SYNCING
        } else if app.filter.is_empty() {
            strings::NOTHING_HERE
        } else {
            strings::NOTHING_MATCHES
        };
        let header = Row::new(headers.iter().map(|h| Cell::from(*h))).style(theme.muted().add_modifier(Modifier::BOLD));
        frame.render_widget(Table::new(Vec::<Row>::new(), widths).header(header), area);
        let [_, message] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
        frame.render_widget(Paragraph::new(format!(" {text}")).style(theme.muted()), message);
        return;
    }
    let cursor = app.cursor();
    let offset = cursor.offset.min(app.visible.len().saturating_sub(1));
    let end = (offset + body_rows).min(app.visible.len());
    let rows: Vec<Row> =
        app.visible[offset..end].iter().map(|&index| table_row(app, &app.snapshot, view, index)).collect();
    let header = Row::new(headers.iter().map(|h| Cell::from(*h))).style(theme.muted().add_modifier(Modifier::BOLD));
    let table = Table::new(rows, widths).header(header).column_spacing(1).row_highlight_style(theme.selection());
    let mut state = TableState::default();
    if body_rows > 0 {
        state.select(Some(cursor.selected.saturating_sub(offset)));
    }
    frame.render_stateful_widget(table, area, &mut state);
}

fn table_row<'a>(app: &App, snapshot: &'a Snapshot, view: ViewKind, index: usize) -> Row<'a> {
    let theme = &app.theme;
    let styled = |text: String, style: Style| Cell::from(Span::styled(text, style));
    let state = |text: &str| Cell::from(Span::styled(text.to_string(), state_style(theme, text)));
    match view {
        ViewKind::Applications => snapshot.apps.get(index).map(|r| {
            let batch = r.batch.as_ref().map_or_else(
                || Cell::from(Span::styled("-", theme.muted())),
                |b| {
                    let window = if b.phase.is_terminal() {
                        String::new()
                    } else {
                        format!(" · {}", window_text(b.window_end, app.now))
                    };
                    styled(format!("{}{window}", b.phase), state_style(theme, b.phase.as_str()))
                },
            );
            Row::new(vec![
                Cell::from(r.namespace.as_str()),
                Cell::from(r.name.as_str()),
                state(&r.state),
                Cell::from(r.latest.clone().unwrap_or_else(|| "-".into())),
                Cell::from(r.versions.to_string()),
                styled(
                    format!("{}/{}", r.tenants_ready, r.tenants),
                    if r.tenants_ready < r.tenants { theme.warning() } else { theme.base() },
                ),
                Cell::from(r.opt_in.label()),
                Cell::from(r.policy.label()),
                batch,
            ])
        }),
        ViewKind::Versions => snapshot.versions.get(index).map(|r| {
            Row::new(vec![
                Cell::from(r.namespace.as_str()),
                Cell::from(r.name.as_str()),
                Cell::from(r.application.as_str()),
                styled(
                    format!("{}{}", r.version, if r.latest { " ★" } else { "" }),
                    if r.latest { theme.accent() } else { theme.base() },
                ),
                state(&r.state),
                Cell::from(r.deployments.to_string()),
                Cell::from(r.jobs.to_string()),
                Cell::from(r.tenants.to_string()),
                Cell::from(age(app, r.created)),
            ])
        }),
        ViewKind::Tenants => snapshot.tenants.get(index).map(|r| {
            Row::new(vec![
                Cell::from(r.namespace.as_str()),
                Cell::from(r.name.as_str()),
                Cell::from(r.application.as_str()),
                Cell::from(r.subdomain.as_str()),
                state(&r.state),
                Cell::from(tenant_version(r)),
                Cell::from(r.strategy.as_str()),
                Cell::from(
                    r.operation.as_ref().map_or_else(|| "-".to_string(), |(op, st, step)| format!("{op} {st} {step}")),
                ),
                styled(r.blocked.clone().unwrap_or_default(), theme.warning()),
            ])
        }),
        ViewKind::Operations => snapshot.operations.get(index).map(|r| {
            Row::new(vec![
                Cell::from(r.namespace.as_str()),
                Cell::from(r.name.as_str()),
                Cell::from(r.tenant.as_str()),
                Cell::from(r.operation.as_str()),
                state(&r.state),
                Cell::from(r.step()),
                Cell::from(r.active_job.clone().unwrap_or_else(|| "-".into())),
                Cell::from(age(app, r.created)),
                styled(r.message.clone(), theme.muted()),
            ])
        }),
        ViewKind::Batches => snapshot.batches.get(index).map(|r| {
            let window = if r.phase.is_terminal() { "-".to_string() } else { window_text(r.window_end, app.now) };
            Row::new(vec![
                Cell::from(r.namespace.as_str()),
                Cell::from(r.name.as_str()),
                Cell::from(r.application.as_str()),
                state(r.phase.as_str()),
                Cell::from(window),
                Cell::from(r.secrets.len().to_string()),
                styled(r.approval.clone(), if r.approval == "required" { theme.warning() } else { theme.base() }),
                styled(
                    r.progress.clone(),
                    if r.progress.contains("stalled") || r.progress.contains("failed") {
                        theme.error()
                    } else {
                        theme.base()
                    },
                ),
                Cell::from(age(app, r.created)),
                Cell::from(r.blast_radius()),
            ])
        }),
        ViewKind::Rollouts => snapshot.rollouts.get(index).map(|r| {
            let state_text = r.state.as_ref().map_or_else(|| "-".to_string(), ToString::to_string);
            let stalled = matches!(r.state, Some(DeploymentRolloutState::Stalled | DeploymentRolloutState::Failed));
            let row = Row::new(vec![
                Cell::from(r.namespace.as_str()),
                Cell::from(r.batch.as_str()),
                Cell::from(r.deployment.as_str()),
                Cell::from(r.version.as_str()),
                Cell::from(r.action.to_string()),
                state(&state_text),
                Cell::from(progress_bar(
                    theme,
                    r.action == DeploymentAction::Restart,
                    r.updated,
                    r.available,
                    r.replicas,
                    r.state.as_ref(),
                )),
                styled(r.message.clone(), if stalled { theme.error() } else { theme.muted() }),
            ]);
            if stalled { row.style(theme.error()) } else { row }
        }),
        ViewKind::Events => snapshot.events.get(index).map(|r| {
            let kind = if r.warning { "Warning" } else { "Normal" };
            Row::new(vec![
                Cell::from(age(app, r.time)),
                state(kind),
                Cell::from(r.reason.as_str()),
                Cell::from(format!("{}/{}", r.namespace, r.application)),
                Cell::from(r.note.as_str()),
            ])
        }),
    }
    .unwrap_or_default()
}

fn tenant_version(row: &TenantRow) -> String {
    let current = row.current.as_ref().map_or("-", |(_, semver)| semver.as_str());
    if row.target.is_empty() || row.target == current {
        current.to_string()
    } else {
        format!("{current} → {}", row.target)
    }
}

/// `██████░░░░ 3/5`: available replicas of the new ReplicaSet out of the desired.
fn progress_bar(
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

fn draw_footer(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    let line = match &app.input {
        Input::Filter(text) => Line::from(vec![
            Span::styled(strings::FILTER_PROMPT, theme.accent()),
            Span::raw(text.clone()),
            Span::styled("█", theme.accent()),
            Span::styled("  Enter keep · Esc clear", theme.muted()),
        ]),
        Input::Command(text) => {
            let hint = complete(text).filter(|c| c != text).map(|c| format!("  Tab → {c}")).unwrap_or_default();
            Line::from(vec![
                Span::styled(strings::COMMAND_PROMPT, theme.accent()),
                Span::raw(text.clone()),
                Span::styled("█", theme.accent()),
                Span::styled(hint, theme.muted()),
            ])
        }
        Input::None => match &app.flash {
            Some(flash) => {
                let style = match flash.level {
                    Level::Info => theme.info(),
                    Level::Warning => theme.warning(),
                    Level::Error => theme.error(),
                };
                Line::from(Span::styled(format!(" {}", flash.text), style))
            }
            None => key_hints(app),
        },
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// The footer's key hints, from the key map; write keys are dimmed (struck) when disabled.
fn key_hints(app: &App) -> Line<'static> {
    let theme = &app.theme;
    let mut spans = vec![Span::raw(" ")];
    let mut hint = |action: Action, enabled: bool| {
        let keys = app.keymap.keys(action);
        let Some(key) = keys.first() else { return };
        let style = if enabled { theme.accent() } else { theme.muted().add_modifier(Modifier::CROSSED_OUT) };
        spans.push(Span::styled(key.label(), style));
        spans.push(Span::styled(format!(" {}  ", strings::action_label(action)), theme.muted()));
    };
    hint(Action::Help, true);
    hint(Action::Enter, true);
    hint(Action::Filter, true);
    hint(Action::Command, true);
    hint(Action::Detail, true);
    hint(Action::Yaml, true);
    if matches!(app.route.view, ViewKind::Batches | ViewKind::Rollouts | ViewKind::Applications) {
        for action in [Action::Approve, Action::Force, Action::Hold, Action::Cancel] {
            hint(action, write_blocked(app, action).is_none());
        }
    }
    hint(Action::Quit, true);
    Line::from(spans)
}

/// A popup `percent_x`% × `percent_y`% of `area`, centred, at least 1×1 when `area` is.
fn centered(area: Rect, percent_x: u16, percent_y: u16, min_width: u16, min_height: u16) -> Rect {
    let part =
        |length: u16, percent: u16| u16::try_from(u32::from(length) * u32::from(percent) / 100).unwrap_or(length);
    let width = part(area.width, percent_x).max(min_width).min(area.width);
    let height = part(area.height, percent_y).max(min_height).min(area.height);
    Rect { x: area.x + (area.width - width) / 2, y: area.y + (area.height - height) / 2, width, height }
}

fn popup_block<'a>(theme: &Theme, title: &'a str, hint: String) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.accent())
        .title(Span::styled(format!(" {title} "), theme.accent()))
        .title_bottom(Line::from(Span::styled(format!(" {hint} "), theme.muted())).alignment(Alignment::Right))
        .padding(Padding::horizontal(1))
        .style(theme.base())
}

fn draw_text_popup(frame: &mut Frame, theme: &Theme, title: &str, lines: &[Line], scroll: usize, area: Rect) {
    let popup = centered(area, 90, 85, 40, 8);
    frame.render_widget(Clear, popup);
    let inner_height = usize::from(popup.height.saturating_sub(2));
    let scroll = scroll.min(lines.len().saturating_sub(inner_height));
    let end = (scroll + inner_height).min(lines.len());
    let visible: Vec<Line> = lines[scroll.min(end)..end].to_vec();
    frame.render_widget(
        Paragraph::new(visible).block(popup_block(theme, title, strings::POPUP_HINT.to_string())),
        popup,
    );
}

/// Help, generated from the key map and the command list.
fn help_lines(app: &App) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let mut lines = vec![Line::from(Span::styled("Keys", theme.accent()))];
    for action in Action::ALL {
        let keys = app.keymap.label(*action);
        if keys.is_empty() {
            continue;
        }
        let mut spans =
            vec![Span::styled(format!("  {keys:<14}"), theme.accent()), Span::raw(strings::action_help(*action))];
        if action.writes()
            && let Some(why) = write_blocked(app, *action)
        {
            spans.push(Span::styled(format!("  (disabled: {why})"), theme.muted()));
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::raw(""));
    lines.push(Line::from(Span::styled("Commands", theme.accent())));
    for (command, what) in strings::COMMANDS_HELP {
        lines.push(Line::from(vec![Span::styled(format!("  {command:<32}"), theme.accent()), Span::raw(*what)]));
    }
    lines.push(Line::raw(""));
    lines.push(Line::from(Span::styled("Session", theme.accent())));
    lines.push(Line::raw(format!(
        "  context {} · {} · engine {}",
        app.session.context,
        app.session.scope,
        app.role_label()
    )));
    lines.push(Line::raw(format!("  theme {} (themes: {})", app.theme.name, app.theme_names.join(", "))));
    if let Some(kubeconfig) = &app.session.demo_kubeconfig {
        lines.push(Line::raw(""));
        lines.push(Line::from(Span::styled("Demo", theme.accent())));
        lines.push(Line::raw("  the sandbox cluster is also reachable with kubectl:"));
        lines.push(Line::raw(format!("  KUBECONFIG={kubeconfig} kubectl get ca,cav,cat,rb -A")));
    }
    lines
}

fn draw_dialog(frame: &mut Frame, app: &App, area: Rect) {
    let Overlay::Dialog(dialog) = &app.overlay else { return };
    let theme = &app.theme;
    let (title, explanation) = strings::dialog_text(dialog.action, &dialog.phase);
    let popup = centered(area, 70, 0, 50, 17);
    frame.render_widget(Clear, popup);
    let hint = match dialog.approve_too {
        Some(_) => format!("{} · {}", strings::DIALOG_HINT, strings::DIALOG_TOGGLE_HINT),
        None => strings::DIALOG_HINT.to_string(),
    };
    let block = popup_block(theme, title, hint);
    let inner = block.inner(popup);
    frame.render_widget(block, popup);
    let [heading, summary, preview, explain, toggle, label, reason, error] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(2),
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(inner);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(format!("{} ", dialog.action.verb()), theme.accent()),
            Span::raw(format!("{}/{}", dialog.namespace, dialog.batch)),
        ])),
        heading,
    );
    frame.render_widget(Paragraph::new(dialog.summary.clone()).style(theme.muted()), summary);
    let preview_lines: Vec<Line> = dialog.preview.iter().map(|line| Line::from(line.as_str())).collect();
    frame.render_widget(Paragraph::new(preview_lines), preview);
    frame.render_widget(Paragraph::new(explanation).wrap(Wrap { trim: true }), explain);
    if let Some(why) = &dialog.error {
        frame.render_widget(Paragraph::new(why.as_str()).style(theme.error()), error);
    }
    if let Some(approve) = dialog.approve_too {
        let mark = if approve { "[x]" } else { "[ ]" };
        frame.render_widget(
            Paragraph::new(format!("{mark} also approve (the batch needs an approval)")).style(theme.warning()),
            toggle,
        );
    }
    frame.render_widget(Paragraph::new("Reason:").style(theme.accent()), label);
    let field = Block::default().borders(Borders::ALL).border_style(theme.border());
    let field_inner = field.inner(reason);
    frame.render_widget(field, reason);
    frame.render_widget(&dialog.reason, field_inner);
}
