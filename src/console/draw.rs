//! Drawing: a pure function of `&App`: the header, tabs, table and footer here, the overlays by
//! their own `draw` (`overlay/`). Only the rows on screen are turned into table cells.
//! Every size works, down to 1×1: areas come from the layout and text is clipped, never indexed.

use crate::api::common::clipped;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, TableState};

use super::app::{App, Level, ViewKind};
use super::keymap::Action;
use super::overlay::command_line::Input;
use super::overlay::{Overlay, picker};
use super::queries::{self, COMPACT_BELOW, footer_rows, row_count, write_blocked};
use super::strings;
use super::{table, views};

pub fn draw(frame: &mut Frame, app: &App) {
    let theme = &app.theme;
    let area = frame.area();
    frame.render_widget(Block::default().style(theme.base()), area);
    let banner = queries::freeze_banner(app);
    let [header, freeze, tabs, title, table, footer] = screen_areas(app, area, banner.is_some());
    let rows = rows_on_screen(app, table);
    let plan = plan_columns(app, table, &rows);
    draw_header(frame, app, header);
    if let Some(banner) = banner {
        draw_freeze_banner(frame, app, freeze, banner);
    }
    if app.connection.is_connected() {
        draw_tabs(frame, app, tabs);
    } else {
        draw_banner(frame, app, tabs);
    }
    draw_title(frame, app, title, &plan);
    draw_table(frame, app, table, rows, &plan);
    draw_footer(frame, app, footer);
    match &app.overlay {
        Overlay::None => {}
        Overlay::Help(help) => help.draw(frame, area, &queries::help_text(app)),
        Overlay::Detail(pane) | Overlay::Yaml(pane) => pane.draw(frame, area, theme),
        Overlay::Dialog(dialog) => dialog.draw(frame, area, theme),
        Overlay::Pods(pane) => pane.draw(frame, area, theme, app.now),
    }
    if let Input::Command(text) = &app.input {
        picker::draw(frame, theme, &queries::picker(app, text), text, queries::picker_note(app, text), footer);
    }
}

/// The screen's areas: header, freeze banner (while a freeze holds what is in view), tab bar (or
/// the connection banner), title line, table, footer.
fn screen_areas(app: &App, area: Rect, frozen: bool) -> [Rect; 6] {
    // Short terminals drop the tab bar and the title line to keep rows visible (the banners stay).
    let compact = area.height < COMPACT_BELOW;
    Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(u16::from(frozen)),
        Constraint::Length(u16::from(!compact || !app.connection.is_connected())),
        Constraint::Length(u16::from(!compact)),
        Constraint::Min(0),
        Constraint::Length(footer_rows(app, area.width, area.height)),
    ])
    .areas(area)
}

/// Where the table goes on a terminal of `screen`'s size, and its columns as drawn: which show,
/// how wide (their widths never add up to more than the table's).
pub fn table_columns(app: &App, screen: Rect) -> (Rect, table::ColumnPlan) {
    let [_, _, _, _, area, _] = screen_areas(app, screen, queries::freeze_banner(app).is_some());
    (area, plan_columns(app, area, &rows_on_screen(app, area)))
}

fn draw_header(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    let forbidden = app.connection.forbidden.len();
    let (dot, dot_style, state) = if !app.connection.is_connected() {
        ("●", theme.error(), "disconnected".to_string())
    } else if forbidden > 0 {
        // Reachable, but some kinds may not be read: not an outage, not all there either.
        ("●", theme.warning(), format!("connected, {forbidden} forbidden"))
    } else {
        ("●", theme.ok(), if app.snapshot.synced { "connected" } else { "syncing" }.to_string())
    };
    let role_style = match app.role_label() {
        "Leader" => theme.ok(),
        "Read-only" => theme.warning(),
        _ => theme.info(),
    };
    // Segments with a priority (0 always stays): a narrow terminal drops the others, so the
    // context, the engine's role and the connection state are always there.
    let mut engine = vec![
        Span::styled("engine ", theme.header()),
        Span::styled(app.role_label(), theme.header().patch(role_style).add_modifier(Modifier::BOLD)),
    ];
    // Each segment has a short form: at 80 or 120 columns the header shortens what it says, it
    // does not drop the scope, the user or the leader; narrower still it drops by priority (0
    // always stays).
    let text = |words: String| vec![Span::styled(words, theme.header())];
    let mut segments: Vec<Segment> = vec![
        Segment::new(vec![Span::styled("capdeck", theme.header().add_modifier(Modifier::BOLD))], Vec::new(), 3)
            .shortened(7),
        Segment::new(text(format!("ctx {}", app.session.context)), text(clipped(&app.session.context, 16)), 0)
            .shortened(2),
        Segment::new(text(app.session.scope.clone()), text(short_scope(&app.session.scope)), 2).shortened(5),
    ];
    let note = app.leader_note().map(|(note, severity)| {
        let style = match severity {
            super::app::Severity::Info => theme.muted(),
            super::app::Severity::Warning => theme.warning(),
            super::app::Severity::Error => theme.error(),
        };
        (note, theme.header().patch(style), severity)
    });
    // A warning about the engine (no leader, writes failing) is as important as the role.
    let mut engine_short =
        vec![Span::styled(app.role_label(), theme.header().patch(role_style).add_modifier(Modifier::BOLD))];
    if let Some((note, style, super::app::Severity::Warning | super::app::Severity::Error)) = &note {
        engine.push(Span::styled(format!(" {note}"), *style));
        // Short, "no leader" is what must not be cut (after the Go CAP Operator's warning).
        let short = if note.contains("no leader") {
            let go = if note.starts_with('⚠') { "⚠ Go CAP Operator rolls too; " } else { "" };
            format!("{go}no leader: rotations not handled")
        } else if note.starts_with('⚠') {
            // The Go CAP Operator's warning whole; who leads goes in its own segment.
            note.split(" (leader").next().unwrap_or(note).to_string()
        } else {
            clipped(note, 40)
        };
        engine_short.push(Span::styled(format!(" {short}"), *style));
    }
    // The engine's role and its warning are shortened last.
    segments.push(Segment::new(engine, engine_short, 0).shortened(0));
    if let Some((note, style, super::app::Severity::Info)) = note {
        let short = app.leader.as_ref().map_or_else(|| clipped(&note, 24), short_leader);
        segments.push(Segment::new(vec![Span::styled(note, style)], vec![Span::styled(short, style)], 2).shortened(4));
    }
    let user = app.session.user.as_deref().unwrap_or("?");
    segments.push(Segment::new(text(format!("user {user}")), text(clipped(user, 12)), 3).shortened(6));
    // Short, a healthy connection is its green dot; anything else keeps its words.
    let state_short = if state == "connected" { String::new() } else { format!(" {state}") };
    segments.push(Segment::new(
        vec![Span::styled(format!("{dot} "), theme.header().patch(dot_style)), Span::styled(state, theme.header())],
        vec![Span::styled(dot, theme.header().patch(dot_style)), Span::styled(state_short, theme.header())],
        0,
    ));
    let separator = Span::styled(" │ ", theme.header().patch(theme.muted()));
    let line = fit_segments(segments, &separator, area.width);
    frame.render_widget(Paragraph::new(line).style(theme.header()), area);
}

/// `❄ namespace cap-shop frozen until … by alice: release weekend (+1 more)`: the summary is cut
/// with `…` where it does not fit, the count of more freezes never.
fn draw_freeze_banner(frame: &mut Frame, app: &App, area: Rect, (summary, more): (String, String)) {
    let style = app.theme.warning().add_modifier(Modifier::BOLD);
    let room = area.width.saturating_sub(table::text_width(&more));
    let mut line = table::fit(Line::raw(summary), room);
    line.spans.push(Span::raw(more));
    frame.render_widget(Paragraph::new(line.style(style)), area);
}

/// The tab bar: the views' titles; on a narrower terminal their short names (`:` aliases);
/// narrower still, the views around the current one, with `‹ ›` where more are.
fn draw_tabs(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    let width = usize::from(area.width);
    let total = |labels: &[String]| 1 + labels.iter().map(|label| Span::raw(label.as_str()).width()).sum::<usize>();
    let mut labels = self::labels(false);
    if total(&labels) > width {
        labels = self::labels(true);
    }
    let current = ViewKind::ALL.iter().position(|&kind| kind == app.route.view).unwrap_or(0);
    // The window of tabs that fits, moved to keep the current one in it.
    let (mut first, mut last) =
        if total(&labels) <= width { (0, labels.len().saturating_sub(1)) } else { (current, current) };
    let width_of = |first: usize, last: usize| {
        3 + labels[first..=last].iter().map(|label| Span::raw(label.as_str()).width()).sum::<usize>()
    };
    loop {
        let grown_right = last + 1 < labels.len() && width_of(first, last + 1) <= width;
        if grown_right {
            last += 1;
        }
        let grown_left = first > 0 && width_of(first - 1, last) <= width;
        if grown_left {
            first -= 1;
        }
        if !grown_left && !grown_right {
            break;
        }
    }
    let mut spans = vec![Span::styled(if first > 0 { "‹" } else { " " }, theme.muted())];
    for (index, label) in labels.iter().enumerate().take(last + 1).skip(first) {
        let style = if index == current { theme.selection() } else { theme.muted() };
        spans.push(Span::styled(label.clone(), style));
    }
    if last + 1 < labels.len() {
        spans.push(Span::styled("›", theme.muted()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// Tab labels: the views' titles, or their short names (first `:` alias).
fn labels(short: bool) -> Vec<String> {
    ViewKind::ALL
        .iter()
        .map(|&kind| {
            let view = views::view(kind);
            format!(" {} ", if short { view.aliases().first().copied().unwrap_or(view.title()) } else { view.title() })
        })
        .collect()
}

fn draw_banner(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    let error = app.connection.error.as_deref().unwrap_or_default();
    // The cause first: at 80 columns it is what must show (the label already says what cannot
    // be reached); then the server and the reconnecting.
    let cause = error.strip_prefix(strings::CANNOT_REACH_PREFIX).unwrap_or(error);
    let attempts =
        if app.connection.attempts > 0 { format!(" (attempt {})", app.connection.attempts) } else { String::new() };
    let line = Line::from(vec![
        Span::styled(format!(" {} ", strings::CONNECTION_LOST), theme.error().add_modifier(Modifier::REVERSED)),
        Span::styled(format!(" {cause}"), theme.error()),
        Span::styled(
            match app.session.server.as_str() {
                "" => format!(" — {}{attempts}", strings::RECONNECTING),
                server => format!(" · {server} — {}{attempts}", strings::RECONNECTING),
            },
            theme.error(),
        ),
    ]);
    frame.render_widget(Paragraph::new(line), area);
}

fn draw_title(frame: &mut Frame, app: &App, area: Rect, plan: &table::ColumnPlan) {
    let theme = &app.theme;
    let total = row_count(&app.snapshot, app.route.view);
    let mut spans = vec![
        Span::styled(format!(" {}", views::view(app.route.view).title()), theme.accent()),
        Span::styled(format!(" [{}/{}]", app.visible.len(), total), theme.muted()),
    ];
    if let Some(focus) = &app.route.focus {
        spans.push(Span::styled(format!(" · {}", focus.label()), theme.info()));
    }
    if !app.filter.is_empty() {
        spans.push(Span::styled(format!(" · /{}", app.filter), theme.warning()));
    }
    if app.wide {
        spans.push(Span::styled(format!(" · {}", strings::wide_note(plan.left, plan.right)), theme.info()));
    }
    if app.route.view == ViewKind::Credentials
        && let Some(timing) = app.snapshot.credential_timing
    {
        let the_leaders = app.leader.as_ref().and_then(|leader| leader.settings()).is_some_and(|settings| {
            settings.rollout_delay() == timing.window && settings.expected_rollout() == timing.expected_rollout
        });
        spans.push(Span::styled(format!(" · {}", strings::margins_note(timing, the_leaders)), theme.muted()));
    }
    if let Some(error) = &app.filter_error {
        spans.push(Span::styled(format!(" · {error}"), theme.error()));
    }
    if !app.snapshot.invalid.is_empty() {
        spans.push(Span::styled(
            format!(" · {} {}", app.snapshot.invalid.len(), strings::INVALID_OBJECTS),
            theme.error(),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The cells of the rows on screen (only those are built).
fn rows_on_screen(app: &App, area: Rect) -> Vec<views::RowCells> {
    let body_rows = usize::from(area.height.saturating_sub(1));
    let offset = app.cursor().offset.min(app.visible.len().saturating_sub(1));
    let end = (offset + body_rows).min(app.visible.len());
    app.visible[offset.min(end)..end].iter().filter_map(|&index| views::cells(app, app.route.view, index)).collect()
}

/// The columns for the rows on screen: their widths follow what is on screen (header included).
fn plan_columns(app: &App, area: Rect, rows: &[views::RowCells]) -> table::ColumnPlan {
    let columns = views::columns(app.route.view);
    let sort = app.sorts.get(&app.route.view);
    let natural: Vec<u16> = (0..columns.len())
        .map(|column| {
            // The sorted column's header carries its ▲/▼.
            let marker = u16::from(sort.is_some_and(|sort| sort.column == column));
            let header = u16::try_from(Span::raw(columns[column].header).width()).unwrap_or(u16::MAX) + marker;
            rows.iter()
                .filter_map(|row| row.cells.get(column))
                .map(|cell| u16::try_from(cell.width()).unwrap_or(u16::MAX))
                .max()
                .unwrap_or(0)
                .max(header)
        })
        .collect();
    table::plan(columns, &natural, area.width, app.wide, app.column_offset)
}

fn draw_table(frame: &mut Frame, app: &App, area: Rect, rows: Vec<views::RowCells>, plan: &table::ColumnPlan) {
    let theme = &app.theme;
    let view = app.route.view;
    let columns = views::columns(view);
    let body_rows = usize::from(area.height.saturating_sub(1));
    let header_style = theme.muted().add_modifier(Modifier::BOLD);
    let cursor = app.cursor();
    let offset = cursor.offset.min(app.visible.len().saturating_sub(1));
    let sort = app.sorts.get(&view);
    let widths: Vec<Constraint> = plan.shown.iter().map(|(_, width)| Constraint::Length(*width)).collect();
    let header = Row::new(plan.shown.iter().map(|(column, width)| {
        match sort {
            // The marker survives a cut header (`AG…` would hide what is sorted).
            Some(sort) if sort.column == *column => {
                let mut header = table::fit(Line::raw(columns[*column].header), width.saturating_sub(1));
                header.spans.push(Span::raw(if sort.descending { "▼" } else { "▲" }));
                Cell::from(header)
            }
            _ => Cell::from(table::fit(Line::raw(columns[*column].header), *width)),
        }
    }))
    .style(header_style);
    if app.visible.is_empty() {
        let forbidden: Vec<&str> = app.connection.forbidden.keys().copied().collect();
        let text = if app.route.view == super::app::ViewKind::Fleet && app.snapshot.fleet.is_empty() {
            strings::FLEET_READING.to_string()
        } else if !app.snapshot.synced && app.connection.is_connected() && !forbidden.is_empty() {
            // Never synced because a kind is refused: say so, not "syncing" for ever.
            strings::forbidden_kinds(&forbidden)
        } else if !app.snapshot.synced && app.connection.is_connected() {
            strings::SYNCING.to_string()
        } else if app.filter.is_empty() {
            strings::NOTHING_HERE.to_string()
        } else {
            strings::NOTHING_MATCHES.to_string()
        };
        frame.render_widget(Table::new(Vec::<Row>::new(), widths).header(header).column_spacing(table::SPACING), area);
        let [_, message] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
        frame.render_widget(Paragraph::new(format!(" {text}")).style(theme.muted()), message);
        return;
    }
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|row| {
            let mut cells = row.cells;
            let shown = plan.shown.iter().map(|(column, width)| {
                let cell = cells.get_mut(*column).map(std::mem::take).unwrap_or_default();
                Cell::from(table::fit(cell, *width))
            });
            let styled = Row::new(shown.collect::<Vec<_>>());
            match row.style {
                Some(style) => styled.style(style),
                None => styled,
            }
        })
        .collect();
    let table =
        Table::new(rows, widths).header(header).column_spacing(table::SPACING).row_highlight_style(theme.selection());
    let mut state = TableState::default();
    if body_rows > 0 {
        state.select(Some(cursor.selected.saturating_sub(offset)));
    }
    frame.render_stateful_widget(table, area, &mut state);
}

fn draw_footer(frame: &mut Frame, app: &App, area: Rect) {
    let theme = &app.theme;
    if app.input != Input::None {
        let completion = match &app.input {
            Input::Command(text) => queries::complete(app, text),
            Input::Filter(_) | Input::None => None,
        };
        app.input.draw(frame, area, theme, completion.as_deref());
        return;
    }
    let line = match &app.flash {
        Some(flash) => {
            let style = match flash.level {
                Level::Info => theme.info(),
                Level::Warning => theme.warning(),
                Level::Error => theme.error(),
            };
            // The message, wrapped over the footer's rows (cut with … past them), and
            // `q quit` kept at the end of the last row.
            let quit = app.keymap.keys(Action::Quit).first().map(|key| key.label()).unwrap_or_default();
            let tail = vec![Span::styled(quit, theme.accent()), Span::styled(" quit", theme.muted())];
            let tail_width: u16 = tail.iter().map(|span| span.width() as u16).sum::<u16>() + 3;
            let rows = usize::from(area.height.max(1));
            let width = usize::from(area.width.max(1));
            // Cut into rows at character boundaries (a word wrap could push `q quit` out).
            let room = u16::try_from((width * rows).saturating_sub(usize::from(tail_width))).unwrap_or(u16::MAX);
            let message = table::fit(Line::raw(format!(" {}", flash.text)), room).to_string();
            let mut lines: Vec<Line> = Vec::new();
            let (mut row, mut row_width) = (String::new(), 0);
            for ch in message.chars() {
                let ch_width = table::unicode_width(ch);
                if row_width + ch_width > width {
                    lines.push(Line::from(Span::styled(std::mem::take(&mut row), style)));
                    row_width = 0;
                }
                row.push(ch);
                row_width += ch_width;
            }
            let last_room = width.saturating_sub(usize::from(tail_width));
            if row_width > last_room {
                lines.push(Line::from(Span::styled(std::mem::take(&mut row), style)));
                row_width = 0;
            }
            let pad = last_room.saturating_sub(row_width);
            let mut last = vec![Span::styled(row, style), Span::raw(" ".repeat(pad + 2))];
            last.extend(tail);
            lines.push(Line::from(last));
            let skip = lines.len().saturating_sub(rows);
            frame.render_widget(Paragraph::new(lines.into_iter().skip(skip).collect::<Vec<_>>()), area);
            return;
        }
        None => key_hints(app, area.width),
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// Keep the segments that fit in `width`, dropping the highest priority numbers first (0 always
/// stays), in their original order, joined by `separator`.
/// One part of the header: what it says with room, what it says without, and how soon it goes
/// when even the short forms do not fit (the highest first; 0 never).
struct Segment {
    long: Vec<Span<'static>>,
    short: Vec<Span<'static>>,
    priority: u8,
    /// When it is shortened: the highest first, one at a time.
    rank: u8,
}

impl Segment {
    fn new(long: Vec<Span<'static>>, short: Vec<Span<'static>>, priority: u8) -> Self {
        Self { long, short, priority, rank: 1 }
    }

    fn shortened(self, rank: u8) -> Self {
        Self { rank, ..self }
    }
}

/// `all namespaces` → `-A`, `namespace cap-shop` → `-n cap-shop`: what the flag said.
fn short_scope(scope: &str) -> String {
    match scope.strip_prefix("namespace ") {
        Some(namespace) => format!("-n {}", clipped(namespace, 20)),
        None if scope == "all namespaces" => "-A".into(),
        None => clipped(scope, 20),
    }
}

/// `leader capdeck-7d9…`: who leads, in a few columns.
fn short_leader(leader: &crate::leadership::LeaderView) -> String {
    match leader {
        crate::leadership::LeaderView::Leads { identity, .. } => format!("leader {}", clipped(identity, 10)),
        other => clipped(&other.short(), 20),
    }
}

/// The segments in their long forms if they fit, else in their short forms, else without the
/// segments of the highest priority, then the next (priority 0 always stays).
fn fit_segments(segments: Vec<Segment>, separator: &Span<'static>, width: u16) -> Line<'static> {
    let width_of = |kept: &[&Vec<Span<'static>>]| -> usize {
        let shown: Vec<&&Vec<Span<'static>>> = kept.iter().filter(|spans| !spans.is_empty()).collect();
        1 + shown.iter().map(|spans| spans.iter().map(Span::width).sum::<usize>()).sum::<usize>()
            + separator.width() * shown.len().saturating_sub(1)
    };
    let width = usize::from(width);
    // Shorten the least needed first (the highest priority number), one priority at a time.
    let mut order: Vec<usize> = (0..segments.len()).collect();
    order.sort_by_key(|&index| std::cmp::Reverse(segments[index].rank));
    let mut short = vec![false; segments.len()];
    let forms = |short: &[bool]| -> Vec<(&Vec<Span<'static>>, u8)> {
        segments
            .iter()
            .zip(short)
            .map(|(segment, &short)| (if short { &segment.short } else { &segment.long }, segment.priority))
            .collect()
    };
    let fits = |kept: &[(&Vec<Span<'static>>, u8)]| {
        width_of(&kept.iter().map(|(spans, _)| *spans).collect::<Vec<_>>()) <= width
    };
    for index in order {
        if fits(&forms(&short)) {
            break;
        }
        short[index] = true;
    }
    let mut kept = forms(&short);
    loop {
        let spans: Vec<&Vec<Span<'static>>> = kept.iter().map(|(spans, _)| *spans).collect();
        let highest = kept.iter().map(|(_, priority)| *priority).max().unwrap_or(0);
        if width_of(&spans) <= width || highest == 0 {
            break;
        }
        kept.retain(|(_, priority)| *priority < highest);
    }
    let mut spans = vec![Span::raw(" ")];
    for (index, (segment, _)) in kept.into_iter().filter(|(spans, _)| !spans.is_empty()).enumerate() {
        if index > 0 {
            spans.push(separator.clone());
        }
        spans.extend(segment.iter().cloned());
    }
    Line::from(spans)
}

/// The footer's key hints, from the key map. Write keys are struck through while blocked and
/// left out in a read-only session; `? help` and `q quit` always stay, the others as they fit.
fn key_hints(app: &App, width: u16) -> Line<'static> {
    let theme = &app.theme;
    let hint = |action: Action, enabled: bool| -> Option<Vec<Span<'static>>> {
        let keys = app.keymap.keys(action);
        let key = keys.first()?;
        let style = if enabled { theme.accent() } else { theme.muted().add_modifier(Modifier::CROSSED_OUT) };
        Some(vec![
            Span::styled(key.label(), style),
            Span::styled(format!(" {}", strings::action_label(action)), theme.muted()),
        ])
    };
    let mut hints: Vec<Vec<Span<'static>>> = Vec::new();
    let mut optional = vec![Action::Enter, Action::Filter, Action::Command];
    if views::view(app.route.view).batch_keys() && !app.session.readonly {
        // Retry and undo only where they apply: a Failed or halted batch is selected.
        let after_failure = [Action::Retry, Action::Undo].into_iter().filter(|a| write_blocked(app, *a).is_none());
        optional.extend(after_failure);
        optional.extend([Action::Approve, Action::Force, Action::Hold, Action::Cancel]);
    }
    optional.extend([Action::Detail, Action::Yaml, Action::Wide]);
    // Last, as room allows: freezing is rarer than the keys above.
    if views::view(app.route.view).freeze_keys() && !app.session.readonly {
        // Unfreeze only where there is a freeze of the selected application's own to lift.
        let unfreeze = Some(Action::Unfreeze).filter(|a| write_blocked(app, *a).is_none());
        optional.extend(std::iter::once(Action::Freeze).chain(unfreeze));
    }
    let fixed: Vec<Vec<Span<'static>>> =
        [Action::Help, Action::Quit].into_iter().filter_map(|a| hint(a, true)).collect();
    let gap = 2;
    let width_of = |spans: &[Span<'static>]| spans.iter().map(Span::width).sum::<usize>() + gap;
    // The line is ` ` + the hints + a gap between two: the last hint needs no gap after it.
    let mut room = (usize::from(width) + gap).saturating_sub(1 + fixed.iter().map(|h| width_of(h)).sum::<usize>());
    if let Some(help) = fixed.first() {
        hints.push(help.clone());
    }
    for action in optional {
        let enabled = !action.writes() || write_blocked(app, action).is_none();
        let Some(spans) = hint(action, enabled) else { continue };
        if width_of(&spans) > room {
            break;
        }
        room -= width_of(&spans);
        hints.push(spans);
    }
    hints.extend(fixed.into_iter().skip(1));
    let mut spans = vec![Span::raw(" ")];
    for (index, hint) in hints.into_iter().enumerate() {
        if index > 0 {
            spans.push(Span::raw("  "));
        }
        spans.extend(hint);
    }
    Line::from(spans)
}
