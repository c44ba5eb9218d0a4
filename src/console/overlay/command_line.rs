//! The `/` filter line and the `:` command line in the footer: typed and edited as in a shell
//! (Backspace, Ctrl-H, Ctrl-W, Ctrl-U), Enter keeps the filter or runs the command, Esc leaves;
//! Tab on the `:` line completes and walks the picker (`picker`).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::super::strings;
use super::super::theme::Theme;
use super::Outcome;
use super::picker::{self, Choices};

/// The `/` filter or `:` command being typed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Input {
    #[default]
    None,
    Filter(String),
    Command(String),
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

impl Input {
    /// A key typed on the line; the line closes itself (Enter, Esc, Ctrl-C). `choices` says
    /// what a `:` line can become, for Tab.
    pub fn handle_key(&mut self, key: &KeyEvent, choices: impl FnOnce(&str) -> Choices) -> Outcome {
        let ctrl_c = key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
        match (&mut *self, key.code) {
            // Ctrl-C leaves the line, not the console.
            (_, _) if ctrl_c => *self = Input::None,
            (Input::Filter(_), KeyCode::Esc) => {
                *self = Input::None;
                return Outcome::Filter(String::new());
            }
            (Input::Filter(_), KeyCode::Enter) => *self = Input::None,
            (Input::Filter(text), _) => {
                if let Some(edit) = line_edit(key) {
                    apply_edit(text, edit);
                    return Outcome::Filter(text.clone());
                }
            }
            (Input::Command(_), KeyCode::Esc) => *self = Input::None,
            (Input::Command(text), KeyCode::Tab | KeyCode::BackTab) => {
                if let Some(next) = picker::tab(text, &choices(text), key.code == KeyCode::BackTab) {
                    *text = next;
                }
            }
            (Input::Command(text), KeyCode::Enter) => {
                let line = text.trim().to_string();
                *self = Input::None;
                return Outcome::Run(line);
            }
            (Input::Command(text), _) => {
                if let Some(edit) = line_edit(key) {
                    apply_edit(text, edit);
                    // `:ns ` opens the namespace picker: ask the API server what exists.
                    if matches!(edit, LineEdit::Type(_)) && text == "ns " {
                        return Outcome::ListNamespaces;
                    }
                }
            }
            (Input::None, _) => {}
        }
        Outcome::Stay
    }

    /// The keys worth naming after the line; `completion` is what Tab would complete it to.
    pub fn key_hints(&self, completion: Option<&str>) -> String {
        match self {
            Input::Filter(_) => strings::FILTER_HINT.to_string(),
            Input::Command(text) => {
                completion.filter(|completed| completed != text).map(strings::tab_hint).unwrap_or_default()
            }
            Input::None => String::new(),
        }
    }

    /// The line in `area` (the footer): prompt, text, cursor and the key hints.
    pub fn draw(&self, frame: &mut Frame, area: Rect, theme: &Theme, completion: Option<&str>) {
        let (prompt, text) = match self {
            Input::Filter(text) => (strings::FILTER_PROMPT, text),
            Input::Command(text) => (strings::COMMAND_PROMPT, text),
            Input::None => return,
        };
        let hints = self.key_hints(completion);
        let line = Line::from(vec![
            Span::styled(prompt, theme.accent()),
            Span::raw(text.clone()),
            Span::styled("█", theme.accent()),
            Span::styled(if hints.is_empty() { hints } else { format!("  {hints}") }, theme.muted()),
        ]);
        frame.render_widget(Paragraph::new(line), area);
    }
}

#[cfg(test)]
mod tests {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    use crate::console::overlay::command_line::Input;
    use crate::console::update::handle_key;
    use crate::console::update::testing::{app, ctrl, next_key_time, press, typed};

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
}
