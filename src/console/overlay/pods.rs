//! The Pods pane: Enter on a rollout row shows that Deployment's ReplicaSets and Pods (state,
//! ready, restarts, how the containers last ended, the VCAP Secret each ReplicaSet reads), read
//! when it opens and every few seconds while it stays open; `l` shows a Pod's last log lines.
//! Its state, keys and drawing live here.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use k8s_openapi::jiff::Timestamp;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::super::keymap::Action;
use super::super::strings;
use super::super::theme::{Theme, state_style};
use super::{Outcome, POPUP_MIN_HEIGHT, POPUP_PERCENT_Y, centered, popup_block, popup_rows};
use crate::readmodel::pods::{LOG_LINES, PodRow, RowKind};

/// While the pane is open its rows are read again this often.
pub const REFRESH_SECONDS: i64 = 5;

pub struct PodsPane {
    pub namespace: String,
    pub deployment: String,
    /// `None` until the first answer.
    pub rows: Option<Result<Vec<PodRow>, String>>,
    pub selected: usize,
    /// When the rows were last asked for; a read is under way while `loading`.
    pub asked_at: Timestamp,
    pub loading: bool,
    pub log: Option<LogPane>,
}

pub struct LogPane {
    pub pod: String,
    pub container: Option<String>,
    /// `None` while reading.
    pub lines: Option<Result<Vec<String>, String>>,
    /// The first line in view; `None` follows the end (the newest lines).
    pub scroll: Option<usize>,
}

impl PodsPane {
    pub fn new(namespace: String, deployment: String, now: Timestamp) -> Self {
        Self { namespace, deployment, rows: None, selected: 0, asked_at: now, loading: true, log: None }
    }

    pub fn title(&self) -> String {
        format!("Pods of Deployment {}/{}", self.namespace, self.deployment)
    }

    pub fn selected_row(&self) -> Option<&PodRow> {
        self.rows.as_ref()?.as_ref().ok()?.get(self.selected)
    }

    pub fn row_count(&self) -> usize {
        self.rows.as_ref().and_then(|rows| rows.as_ref().ok()).map_or(0, Vec::len)
    }

    /// Time to read the rows again.
    pub fn due(&self, now: Timestamp) -> bool {
        !self.loading && now.as_second() - self.asked_at.as_second() >= REFRESH_SECONDS
    }

    /// When it is time to read the rows again: the Deployment to read (one read at a time).
    pub fn read_again(&mut self, now: Timestamp) -> Option<crate::api::ObjectKey> {
        if !self.due(now) {
            return None;
        }
        self.loading = true;
        self.asked_at = now;
        Some(crate::api::ObjectKey::new(&self.namespace, &self.deployment))
    }

    /// The rows arrived: keep the selection on the same object when the rows move.
    pub fn rows_arrived(&mut self, namespace: &str, deployment: &str, rows: Result<Vec<PodRow>, String>) {
        if self.namespace != namespace || self.deployment != deployment {
            return;
        }
        let selected = self.selected_row().map(|row| row.name.clone());
        self.rows = Some(rows);
        self.loading = false;
        let found =
            selected.and_then(|name| self.rows.as_ref()?.as_ref().ok()?.iter().position(|row| row.name == name));
        self.selected = found.unwrap_or(self.selected).min(self.row_count().saturating_sub(1));
    }

    /// A Pod's log lines arrived (for the log open now, if it is that Pod's).
    pub fn log_arrived(&mut self, namespace: &str, pod: &str, lines: Result<Vec<String>, String>) {
        if self.namespace == namespace
            && let Some(log) = self.log.as_mut().filter(|log| log.pod == pod)
        {
            log.lines = Some(lines);
            log.scroll = None; // the newest lines in view
        }
    }

    /// Move, `l` for the selected Pod's log, Esc back (from the log to the Pods, from the Pods
    /// to the view); Ctrl-C quits from anywhere in the pane. `page` rows to a page, `rows` of
    /// the log show at a time.
    pub fn handle_key(&mut self, key: &KeyEvent, action: Option<Action>, page: usize, rows: usize) -> Outcome {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Outcome::Quit;
        }
        if let Some(log) = self.log.as_mut() {
            if matches!(action, Some(Action::Back | Action::Quit | Action::Logs)) {
                self.log = None;
            } else {
                log.handle_key(action, page, rows);
            }
            return Outcome::Stay;
        }
        let last = self.row_count().saturating_sub(1);
        match action {
            Some(Action::Back | Action::Quit) => return Outcome::Close,
            Some(Action::Down) => self.selected = (self.selected + 1).min(last),
            Some(Action::Up) => self.selected = self.selected.saturating_sub(1),
            Some(Action::PageDown) => self.selected = (self.selected + page).min(last),
            Some(Action::PageUp) => self.selected = self.selected.saturating_sub(page),
            Some(Action::Top) => self.selected = 0,
            Some(Action::Bottom) => self.selected = last,
            Some(Action::Logs) => return self.open_log(),
            _ => {}
        }
        Outcome::Stay
    }

    /// `l`: the selected Pod's log (a ReplicaSet has none).
    fn open_log(&mut self) -> Outcome {
        let Some(pod) = self.selected_row().filter(|row| row.kind == RowKind::Pod).cloned() else {
            return Outcome::Note(strings::SELECT_A_POD.to_string());
        };
        self.log =
            Some(LogPane { pod: pod.name.clone(), container: pod.log_container.clone(), lines: None, scroll: None });
        Outcome::ReadLog { namespace: self.namespace.clone(), pod: pod.name, container: pod.log_container }
    }

    pub fn key_hints(&self) -> String {
        strings::POPUP_HINT.to_string()
    }

    /// Over `area` (the whole screen); ages are counted to `now`.
    pub fn draw(&self, frame: &mut Frame, area: Rect, theme: &Theme, now: Timestamp) {
        let popup = centered(area, PANE_PERCENT, POPUP_PERCENT_Y, 40, POPUP_MIN_HEIGHT);
        // Inside the borders and the padding.
        let width = usize::from(popup.width.saturating_sub(4)).max(10);
        let rows = popup_rows(area.height);
        let (title, lines, scroll) = match &self.log {
            Some(log) => {
                let (lines, scroll) = log_lines(log, theme, width, rows);
                (log.title(), lines, scroll)
            }
            None => {
                let (lines, selected) = pods_lines(self, theme, now, width);
                // Keep the selected line in view (the header scrolls away only when it must).
                (self.title(), lines, selected.saturating_sub(rows.saturating_sub(1)))
            }
        };
        frame.render_widget(Clear, popup);
        let end = (scroll + rows).min(lines.len());
        let visible: Vec<Line> = lines[scroll.min(end)..end].to_vec();
        frame.render_widget(Paragraph::new(visible).block(popup_block(theme, &title, self.key_hints())), popup);
    }
}

impl LogPane {
    /// Scroll the log: `page` lines to a page, `rows` in view.
    fn handle_key(&mut self, action: Option<Action>, page: usize, rows: usize) {
        let len = match &self.lines {
            Some(Ok(lines)) => lines.len(),
            _ => 0,
        };
        let end = len.saturating_sub(rows);
        let at = self.scroll.unwrap_or(end);
        let to = match action {
            Some(Action::Down) => at.saturating_add(1),
            Some(Action::Up) => at.saturating_sub(1),
            Some(Action::PageDown) => at.saturating_add(page),
            Some(Action::PageUp) => at.saturating_sub(page),
            Some(Action::Top) => 0,
            Some(Action::Bottom) => end,
            _ => return,
        };
        // At the end it follows the end (a resize keeps the newest lines in view).
        self.scroll = (to < end).then_some(to);
    }

    pub fn title(&self) -> String {
        match &self.container {
            Some(container) => format!("Log of Pod {} ({container}), last {LOG_LINES} lines", self.pod),
            None => format!("Log of Pod {}, last {LOG_LINES} lines", self.pod),
        }
    }
}

/// The Pods pane's popup is wider than the others: Pod names are long and the last
/// termination is the point.
const PANE_PERCENT: u16 = 98;

/// The Pods pane's text for `width` columns: a header, one line per ReplicaSet and Pod (the
/// selected one highlighted; its last termination or VCAP Secret on a line of its own when the
/// row is too wide), and the keys; and the index of the selected line, to keep it in view.
fn pods_lines(pane: &PodsPane, theme: &Theme, now: Timestamp, width: usize) -> (Vec<Line<'static>>, usize) {
    let keys = || Line::styled(strings::PODS_KEYS, theme.muted());
    let rows = match &pane.rows {
        None => return (vec![Line::raw(strings::PODS_LOADING)], 0),
        Some(Err(error)) => return (vec![Line::styled(error.clone(), theme.error()), Line::raw(""), keys()], 0),
        Some(Ok(rows)) if rows.is_empty() => return (vec![Line::raw(strings::NO_PODS), Line::raw(""), keys()], 0),
        Some(Ok(rows)) => rows,
    };
    let name = |row: &PodRow| match row.kind {
        RowKind::ReplicaSet => row.name.clone(),
        RowKind::Pod => format!("  {}", row.name),
    };
    let name_width = rows.iter().map(|row| name(row).chars().count()).max().unwrap_or(4).max(4);
    let status_width = rows.iter().map(|row| row.status.chars().count()).max().unwrap_or(6).max(6);
    let columns = |name: &str, status: &str, ready: &str, restarts: &str, age: &str| {
        format!("{name:name_width$}  {status:status_width$}  {ready:>5}  {restarts:>8}  {age:>5}")
    };
    let header = format!("{}  LAST TERMINATION / VCAP SECRET", columns("NAME", "STATUS", "READY", "RESTARTS", "AGE"));
    let mut lines = vec![Line::styled(header, theme.header())];
    let mut selected_line = 1;
    for (index, row) in rows.iter().enumerate() {
        let age = row.created.map_or_else(|| "-".into(), |t| strings::relative(now.as_second() - t.as_second()));
        let last = match row.kind {
            RowKind::ReplicaSet => row.secret.as_ref().map(|s| format!("reads {s}")).unwrap_or_default(),
            RowKind::Pod => row.last_termination.clone().unwrap_or_default(),
        };
        let text = columns(&name(row), &row.status, &row.ready, &row.restarts.to_string(), &age);
        let style = if index == pane.selected { theme.selection() } else { state_style(theme, pod_state_word(row)) };
        if index == pane.selected {
            selected_line = lines.len();
        }
        if last.is_empty() || text.chars().count() + 2 + last.chars().count() <= width {
            lines.push(Line::from(Span::styled(format!("{text}  {last}").trim_end().to_string(), style)));
        } else {
            lines.push(Line::from(Span::styled(text, style)));
            lines.push(Line::from(Span::styled(format!("    ↳ {last}"), theme.muted())));
        }
    }
    lines.push(Line::raw(""));
    lines.push(keys());
    (lines, selected_line)
}

/// The state word that picks a Pods pane row's colour.
fn pod_state_word(row: &PodRow) -> &'static str {
    match (row.kind, row.status.as_str()) {
        (RowKind::ReplicaSet, "current") => "Rolling",
        (RowKind::ReplicaSet, _) => "-",
        (RowKind::Pod, "Running") if row.ready.split_once('/').is_some_and(|(a, b)| a == b) => "Ready",
        (RowKind::Pod, "Running" | "Pending" | "ContainerCreating" | "Terminating") => "Processing",
        (RowKind::Pod, "Succeeded") => "Completed",
        (RowKind::Pod, _) => "Failed",
    }
}

/// A log's lines cut to `width` (a long line continues on the next), and where to start
/// showing them: its scroll (counted in the log's own lines), or the end while it follows it.
fn log_lines(log: &LogPane, theme: &Theme, width: usize, rows: usize) -> (Vec<Line<'static>>, usize) {
    let text = match &log.lines {
        None => return (vec![Line::raw(strings::LOG_LOADING)], 0),
        Some(Err(error)) => return (vec![Line::styled(error.clone(), theme.error())], 0),
        Some(Ok(lines)) if lines.is_empty() => return (vec![Line::raw(strings::LOG_EMPTY)], 0),
        Some(Ok(lines)) => lines,
    };
    let mut lines = Vec::new();
    let mut scroll = 0;
    for (index, line) in text.iter().enumerate() {
        if Some(index) == log.scroll {
            scroll = lines.len();
        }
        let chars: Vec<char> = line.chars().collect();
        if chars.is_empty() {
            lines.push(Line::raw(""));
        }
        for chunk in chars.chunks(width.max(1)) {
            lines.push(Line::raw(chunk.iter().collect::<String>()));
        }
    }
    let last = lines.len().saturating_sub(rows);
    (lines, if log.scroll.is_some() { scroll.min(last) } else { last })
}

#[cfg(test)]
mod tests {
    use crossterm::event::KeyCode;

    use crate::console::overlay::Overlay;
    use crate::console::overlay::pods::PodsPane;
    use crate::console::strings;
    use crate::console::update::testing::{app, press};
    use crate::console::update::{Command, Msg, update};
    use crate::readmodel::pods::RowKind;

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
}
