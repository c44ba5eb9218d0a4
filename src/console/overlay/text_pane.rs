//! A scrolling text popup: a row's detail pane (`d`) or its object as YAML (`y`). The text is
//! built when it opens (by `details`), never while drawing.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph};

use super::super::keymap::Action;
use super::super::strings;
use super::super::theme::Theme;
use super::{Outcome, POPUP_MIN_HEIGHT, POPUP_PERCENT, POPUP_PERCENT_Y, centered, popup_block, popup_rows};

pub struct TextPane {
    pub title: String,
    pub lines: Vec<String>,
    /// The first line in view.
    pub scroll: usize,
}

impl TextPane {
    pub fn new(title: String, lines: Vec<String>) -> Self {
        Self { title, lines, scroll: 0 }
    }

    /// `page` lines to a page; `rows` of the text show at a time.
    pub fn handle_key(&mut self, action: Option<Action>, page: usize, rows: usize) -> Outcome {
        super::scroll_key(&mut self.scroll, action, page, self.lines.len(), rows)
    }

    pub fn key_hints(&self) -> String {
        strings::POPUP_HINT.to_string()
    }

    /// Over `area` (the whole screen).
    pub fn draw(&self, frame: &mut Frame, area: Rect, theme: &Theme) {
        let lines: Vec<Line> = self.lines.iter().map(|line| Line::raw(line.as_str())).collect();
        draw_text_popup(frame, theme, &self.title, &lines, self.scroll, self.key_hints(), area);
    }
}

/// A text popup over `area`: `title`, the lines from `scroll` on, `hint` at the bottom.
pub fn draw_text_popup(
    frame: &mut Frame,
    theme: &Theme,
    title: &str,
    lines: &[Line],
    scroll: usize,
    hint: String,
    area: Rect,
) {
    let popup = centered(area, POPUP_PERCENT, POPUP_PERCENT_Y, 40, POPUP_MIN_HEIGHT);
    frame.render_widget(Clear, popup);
    let inner_height = popup_rows(area.height);
    let scroll = scroll.min(lines.len().saturating_sub(inner_height));
    let end = (scroll + inner_height).min(lines.len());
    let visible: Vec<Line> = lines[scroll.min(end)..end].to_vec();
    frame.render_widget(Paragraph::new(visible).block(popup_block(theme, title, hint)), popup);
}
