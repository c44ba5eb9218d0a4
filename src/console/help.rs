//! The help pane's text, generated from the key map and the command list (drawn by `draw`,
//! measured by `update` to keep its scroll inside the text), wrapped to the pane's width: a
//! long line goes on under its description, never past the border.

use ratatui::text::{Line, Span};

use super::app::App;
use super::keymap::Action;
use super::queries::write_blocked;
use super::strings;

/// Help, generated from the key map and the command list, wrapped to `width` cells.
pub fn lines(app: &App, width: usize) -> Vec<Line<'static>> {
    let theme = &app.theme;
    let mut lines = vec![Line::from(Span::styled("Keys", theme.accent()))];
    for action in Action::ALL {
        let keys = app.keymap.label(*action);
        if keys.is_empty() {
            continue;
        }
        let mut spans = vec![Span::raw(strings::action_help(*action))];
        if action.writes()
            && let Some(why) = write_blocked(app, *action)
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
    let session = format!("context {} · {} · engine {}", app.session.context, app.session.scope, app.role_label());
    lines.extend(wrap(Span::raw("  "), vec![Span::raw(session)], width));
    let themes = format!("theme {} (themes: {})", app.theme.name, app.theme_names.join(", "));
    lines.extend(wrap(Span::raw("  "), vec![Span::raw(themes)], width));
    if let Some(kubeconfig) = &app.session.demo_kubeconfig {
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
                let ch_width = super::table::unicode_width(ch);
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
    use super::super::app::ViewKind;
    use super::super::keymap::{Action, Keymap};
    use super::super::{queries, strings, views};

    /// The first column of the README's key table ("The console"): every `…` in it, first
    /// word only (`:ns NAME` is `:ns`).
    fn readme_keys() -> Vec<String> {
        let readme = include_str!("../../README.md");
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
        let readme = include_str!("../../README.md");
        let console = readme.split("\n## The console").nth(1).expect("README has \"## The console\"");
        let frame = console.split("```").nth(1).expect("a frame in a code block");
        let tabs = frame.lines().nth(2).expect("a tab bar under the header");
        let app = crate::demo::sample::app(crate::demo::sample::SampleObjects::demo().expect("sample").snapshot());
        let mut terminal = Terminal::new(TestBackend::new(130, 22)).expect("terminal");
        terminal.draw(|frame| super::super::draw::draw(frame, &app)).expect("draw");
        let drawn = terminal
            .backend()
            .buffer()
            .content()
            .chunks(130)
            .nth(1)
            .map(|row| row.iter().map(|cell| cell.symbol()).collect::<String>().trim_end().to_string());
        assert_eq!(drawn.as_deref(), Some(tabs), "README's frame and the console's tab bar at 130 columns");
    }
}
