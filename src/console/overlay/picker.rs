//! The picker above the `:` line: what `:ns`, `:ctx`, `:sort`, `:theme` (or a command word) can
//! become, the one Tab lands on next highlighted. What there is to pick is worked out from the
//! console's state (`queries::choices`); completing, walking the list and drawing it are here.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::super::theme::Theme;

/// What a command line can become.
pub struct Choices {
    /// Every command line it could become (what Tab completes among).
    pub candidates: Vec<String>,
    /// What the picker lists and Tab walks: the candidates, or every value of a complete
    /// argument's command.
    pub list: Vec<String>,
}

/// The one candidate, else the candidates' longest common prefix when it is longer than `text`.
pub fn complete(candidates: &[String], text: &str) -> Option<String> {
    match candidates {
        [] => None,
        [one] => Some(one.clone()),
        many => {
            let first = &many[0];
            let common = (0..first.len())
                .take_while(|&i| many.iter().all(|c| c.as_bytes().get(i) == first.as_bytes().get(i)))
                .count();
            let common = (0..=common).rev().find(|&i| first.is_char_boundary(i)).unwrap_or(0);
            (common > text.len()).then(|| first[..common].to_string())
        }
    }
}

/// Tab (Shift-Tab with `backwards`): complete what is typed; with nothing more in common, the
/// next (previous) entry of the list. `None` when there is nothing to go to.
pub fn tab(text: &str, choices: &Choices, backwards: bool) -> Option<String> {
    if let Some(completed) = complete(&choices.candidates, text).filter(|completed| completed != text) {
        return Some(completed);
    }
    let list = &choices.list;
    let count = list.len();
    let position = list.iter().position(|candidate| candidate == text);
    (count > 0).then(|| {
        let index = match (position, backwards) {
            (Some(i), true) => (i + count - 1) % count,
            (Some(i), false) => (i + 1) % count,
            (None, true) => count - 1,
            (None, false) => 0,
        };
        list[index].clone()
    })
}

/// The picker for `text` above `footer`: up to eight entries of `list` around the selected one,
/// how many more, and `note` (where the list comes from, when that is worth saying).
pub fn draw(frame: &mut Frame, theme: &Theme, list: &[String], text: &str, note: Option<String>, footer: Rect) {
    const SHOWN: usize = 8;
    if list.is_empty() || (list.len() == 1 && list[0] == text) {
        return;
    }
    let selected = list.iter().position(|candidate| candidate == text).unwrap_or(0);
    let start = selected.saturating_sub(SHOWN - 1);
    let value = |candidate: &str| candidate.split_once(' ').map_or(candidate, |(_, value)| value).to_string();
    let mut lines: Vec<Line> = list
        .iter()
        .enumerate()
        .skip(start)
        .take(SHOWN)
        .map(|(index, candidate)| {
            let style = if index == selected && list[index] == text { theme.selection() } else { theme.base() };
            Line::from(Span::styled(format!(" {} ", value(candidate)), style))
        })
        .collect();
    let more = list.len().saturating_sub(start + SHOWN);
    if more > 0 {
        lines.push(Line::from(Span::styled(format!(" … {more} more (type to narrow)"), theme.muted())));
    }
    if let Some(note) = note {
        lines.push(Line::from(Span::styled(format!(" {note}"), theme.muted())));
    }
    let width = lines.iter().map(Line::width).max().unwrap_or(0).saturating_add(2);
    let width = u16::try_from(width).unwrap_or(u16::MAX).min(footer.width);
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX).min(footer.y);
    if width < 4 || height < 3 {
        return;
    }
    let area = Rect { x: footer.x, y: footer.y - height, width, height };
    frame.render_widget(Clear, area);
    let block = Block::default().borders(Borders::ALL).border_style(theme.border()).style(theme.base());
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

#[cfg(test)]
mod tests {
    use crossterm::event::KeyCode;

    use crate::console::app::ViewKind;
    use crate::console::overlay::command_line::Input;
    use crate::console::queries::{complete, picker};
    use crate::console::update::testing::{app, press, typed};
    use crate::console::update::{Msg, update};

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
        typed(&mut app, ":batches\n:sort st");
        press(&mut app, KeyCode::Tab);
        assert_eq!(app.input, Input::Command("sort state".into()), "columns complete too");
    }
}
