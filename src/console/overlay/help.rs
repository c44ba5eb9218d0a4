//! The help pane: the keys and commands, generated from the key map and the command list (what
//! it needs of the console is handed to it as a [`HelpText`]), wrapped to the pane's width: a
//! long line goes on under its description, never past the border. It scrolls like the other
//! text popups; `?` closes it again.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::super::keymap::{Action, Keymap};
use super::super::strings;
use super::super::theme::Theme;
use super::Outcome;

/// The help pane's state: how far it is scrolled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HelpPane {
    pub scroll: usize,
}

/// What the help says about this session, gathered from the console's state.
pub struct HelpText<'a> {
    pub theme: &'a Theme,
    pub keymap: &'a Keymap,
    /// Why each write key is disabled now, for those that are.
    pub disabled: Vec<(Action, String)>,
    /// Context, scope and the engine's role.
    pub session: String,
    /// The theme and the themes there are.
    pub themes: String,
    /// `--demo`: where the sandbox kubeconfig was written.
    pub demo_kubeconfig: Option<&'a str>,
}

impl HelpPane {
    /// `page` lines to a page; the help is `lines` lines long and `rows` show at a time.
    pub fn handle_key(&mut self, action: Option<Action>, page: usize, lines: usize, rows: usize) -> Outcome {
        if action == Some(Action::Help) {
            return Outcome::Close;
        }
        super::scroll_key(&mut self.scroll, action, page, lines, rows)
    }

    pub fn key_hints(&self) -> String {
        strings::POPUP_HINT.to_string()
    }

    /// Over `area` (the whole screen).
    pub fn draw(&self, frame: &mut Frame, area: Rect, text: &HelpText) {
        let lines = lines(text, super::popup_text_width(area.width));
        super::text_pane::draw_text_popup(frame, text.theme, "Help", &lines, self.scroll, self.key_hints(), area);
    }
}

/// Help, generated from the key map and the command list, wrapped to `width` cells.
pub fn lines(text: &HelpText, width: usize) -> Vec<Line<'static>> {
    let theme = text.theme;
    let mut lines = vec![Line::from(Span::styled("Keys", theme.accent()))];
    for action in Action::ALL {
        let keys = text.keymap.label(*action);
        if keys.is_empty() {
            continue;
        }
        let mut spans = vec![Span::raw(strings::action_help(*action))];
        if action.writes()
            && let Some((_, why)) = text.disabled.iter().find(|(disabled, _)| disabled == action)
        {
            spans.push(Span::styled(format!("  (disabled: {why})"), theme.muted()));
        }
        lines.extend(wrap(Span::styled(format!("  {keys:<14}"), theme.accent()), spans, width));
    }
    lines.push(Line::raw(""));
    lines.push(Line::from(Span::styled("Commands", theme.accent())));
    for (command, what) in strings::COMMANDS_HELP {
        lines.extend(wrap(Span::styled(format!("  {command:<32}"), theme.accent()), vec![Span::raw(*what)], width));
    }
    lines.push(Line::raw(""));
    lines.push(Line::from(Span::styled("Session", theme.accent())));
    lines.extend(wrap(Span::raw("  "), vec![Span::raw(text.session.clone())], width));
    lines.extend(wrap(Span::raw("  "), vec![Span::raw(text.themes.clone())], width));
    if let Some(kubeconfig) = text.demo_kubeconfig {
        lines.push(Line::raw(""));
        lines.push(Line::from(Span::styled("Demo", theme.accent())));
        lines.extend(wrap(
            Span::raw("  "),
            vec![Span::raw("the sandbox cluster is also reachable with kubectl:")],
            width,
        ));
        let command = format!("KUBECONFIG={kubeconfig} kubectl get ca,cav,cat,rb -A");
        lines.extend(wrap(Span::raw("  "), vec![Span::raw(command)], width));
    }
    lines
}

/// `first` (a key or command, padded to its column) and `body` wrapped at spaces to `width`
/// cells; the lines after the first start under the body. A word longer than a line is cut
/// across lines.
fn wrap(first: Span<'static>, body: Vec<Span<'static>>, width: usize) -> Vec<Line<'static>> {
    let indent = first.width();
    // Below this the pane clips rather than wraps into a column of single letters.
    let width = width.max(indent + 12);
    let mut lines = Vec::new();
    let mut line = vec![first];
    let mut used = indent;
    for span in body {
        // Words and the spaces between them, each with the span's style.
        let mut rest = span.content.as_ref();
        while !rest.is_empty() {
            let end = if rest.starts_with(' ') {
                rest.find(|c| c != ' ').unwrap_or(rest.len())
            } else {
                rest.find(' ').unwrap_or(rest.len())
            };
            let (token, tail) = rest.split_at(end);
            rest = tail;
            let token_width = Span::raw(token).width();
            if token.starts_with(' ') {
                if used + token_width >= width {
                    lines.push(Line::from(std::mem::take(&mut line)));
                    line.push(Span::raw(" ".repeat(indent)));
                    used = indent;
                } else if used > indent {
                    line.push(Span::styled(token.to_string(), span.style));
                    used += token_width;
                }
                continue;
            }
            if used + token_width > width && used > indent {
                lines.push(Line::from(std::mem::take(&mut line)));
                line.push(Span::raw(" ".repeat(indent)));
                used = indent;
            }
            let mut piece = String::new();
            for ch in token.chars() {
                let ch_width = super::super::table::unicode_width(ch);
                if used + ch_width > width {
                    line.push(Span::styled(std::mem::take(&mut piece), span.style));
                    lines.push(Line::from(std::mem::take(&mut line)));
                    line.push(Span::raw(" ".repeat(indent)));
                    used = indent;
                }
                piece.push(ch);
                used += ch_width;
            }
            line.push(Span::styled(piece, span.style));
        }
    }
    lines.push(Line::from(line));
    lines
}

#[cfg(test)]
mod tests {
    use crossterm::event::KeyCode;

    use crate::console::app::ViewKind;
    use crate::console::overlay::Overlay;
    use crate::console::overlay::help::HelpPane;
    use crate::console::overlay::text_pane::TextPane;
    use crate::console::strings;
    use crate::console::update::testing::{app, press, typed};
    use crate::console::update::{Msg, update};

    use crate::console::keymap::{Action, Keymap};
    use crate::console::{queries, views};

    /// The first column of the README's key table ("The console"): every `…` in it, first
    /// word only (`:ns NAME` is `:ns`).
    fn readme_keys() -> Vec<String> {
        let readme = include_str!("../../../README.md");
        let console = readme.split("\n## The console").nth(1).expect("README has \"## The console\"");
        let console = console.split("\n## ").next().unwrap_or_default();
        let mut keys = Vec::new();
        for row in console.lines().filter(|line| line.starts_with("| `")) {
            let first = row.trim_start_matches('|').split(" | ").next().unwrap_or_default();
            for (index, quoted) in first.split('`').enumerate() {
                if index % 2 == 1 {
                    keys.push(quoted.split_whitespace().next().unwrap_or(quoted).to_string());
                }
            }
        }
        keys
    }

    /// Issue 31: the README's key table lacked `w`, `s`/`S`, `←`/`→`, `:sort`, `:creds` and
    /// `:fleet`. Every key of the default key map and every `:` command is in it, so it cannot
    /// drift again.
    #[test]
    fn the_readme_key_table_lists_every_key_and_command() {
        let listed = readme_keys();
        let map = Keymap::default();
        let mut missing: Vec<String> = Action::ALL
            .iter()
            .flat_map(|&action| map.keys(action))
            .map(|key| key.label())
            .filter(|label| !listed.contains(label))
            .collect();
        let mut commands: Vec<String> = queries::command_names().iter().map(|name| format!(":{name}")).collect();
        commands.extend(ViewKind::ALL.iter().flat_map(|&kind| views::view(kind).aliases()).map(|a| format!(":{a}")));
        commands.extend(
            strings::COMMANDS_HELP
                .iter()
                .flat_map(|(names, _)| names.split_whitespace())
                .filter(|word| word.starts_with(':'))
                .map(str::to_string),
        );
        missing.extend(commands.into_iter().filter(|command| !listed.contains(command)));
        missing.dedup();
        assert!(missing.is_empty(), "README.md's key table (\"The console\") lacks {missing:?}");
    }

    /// Issue 31: the README's frame lacked the Credentials and Fleet tabs. Its tab bar is the
    /// one the console draws at the frame's width.
    #[test]
    fn the_readme_frame_has_the_real_tab_bar() {
        use ratatui::{Terminal, backend::TestBackend};
        let readme = include_str!("../../../README.md");
        let console = readme.split("\n## The console").nth(1).expect("README has \"## The console\"");
        let frame = console.split("```").nth(1).expect("a frame in a code block");
        let tabs = frame.lines().nth(2).expect("a tab bar under the header");
        let app = crate::demo::sample::app(crate::demo::sample::SampleObjects::demo().expect("sample").snapshot());
        let mut terminal = Terminal::new(TestBackend::new(130, 22)).expect("terminal");
        terminal.draw(|frame| crate::console::draw::draw(frame, &app)).expect("draw");
        let drawn = terminal
            .backend()
            .buffer()
            .content()
            .chunks(130)
            .nth(1)
            .map(|row| row.iter().map(|cell| cell.symbol()).collect::<String>().trim_end().to_string());
        assert_eq!(drawn.as_deref(), Some(tabs), "README's frame and the console's tab bar at 130 columns");
    }

    #[test]
    fn question_mark_d_and_y_open_overlays_that_scroll_and_close() {
        let mut app = app();
        // 15 rows: the help pane shows 10 lines of its text at a time.
        update(&mut app, Msg::Resize { width: 80, height: 15 });
        let help_lines = crate::console::queries::help_lines(&app, crate::console::overlay::popup_text_width(80)).len();
        let last = help_lines - crate::console::overlay::popup_rows(15);
        assert!(last > app.viewport_rows + 1, "the help is longer than two pages at 80×15 ({help_lines} lines)");
        press(&mut app, KeyCode::Char('?'));
        assert!(matches!(app.overlay, Overlay::Help(HelpPane { scroll: 0 })));
        press(&mut app, KeyCode::Char('j'));
        press(&mut app, KeyCode::PageDown);
        assert!(matches!(app.overlay, Overlay::Help(HelpPane { scroll }) if scroll == 1 + app.viewport_rows));
        press(&mut app, KeyCode::Char('G'));
        assert!(matches!(app.overlay, Overlay::Help(HelpPane { scroll }) if scroll == last), "G: the help's last page");
        press(&mut app, KeyCode::Char('k'));
        assert!(
            matches!(app.overlay, Overlay::Help(HelpPane { scroll }) if scroll == last - 1),
            "k moves at once after G"
        );
        press(&mut app, KeyCode::PageDown);
        press(&mut app, KeyCode::PageDown);
        assert!(matches!(app.overlay, Overlay::Help(HelpPane { scroll }) if scroll == last), "PgDn stops at the end");
        press(&mut app, KeyCode::PageUp);
        assert!(matches!(app.overlay, Overlay::Help(HelpPane { scroll }) if scroll == last - app.viewport_rows));
        press(&mut app, KeyCode::Char('g'));
        assert!(matches!(app.overlay, Overlay::Help(HelpPane { scroll: 0 })));
        press(&mut app, KeyCode::Char('?'));
        assert!(matches!(app.overlay, Overlay::None), "? toggles help");
        press(&mut app, KeyCode::Char('d'));
        assert!(
            matches!(&app.overlay, Overlay::Detail(TextPane { title, .. }) if title == "Application cap-hr/analytics")
        );
        press(&mut app, KeyCode::Char('q'));
        assert!(matches!(app.overlay, Overlay::None), "q closes an overlay first");
        assert!(!app.quit);
        press(&mut app, KeyCode::Char('y'));
        assert!(
            matches!(&app.overlay, Overlay::Yaml(TextPane { lines, .. }) if lines.iter().any(|l| l.contains("kind: CAPApplication")))
        );
        press(&mut app, KeyCode::Esc);
        typed(&mut app, ":events\n");
        press(&mut app, KeyCode::Char('y'));
        assert!(matches!(app.overlay, Overlay::None));
        assert_eq!(app.flash.as_ref().map(|f| f.text.as_str()), Some(strings::NO_YAML));
    }
}
