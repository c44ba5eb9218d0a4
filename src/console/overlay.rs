//! What opens over the table: the help, a row's detail or YAML, the reason dialog of a batch
//! action or a freeze, the Pods pane, and the `/` and `:` lines with the picker. Each is a component in one
//! file under `overlay/`: its state, its keys (`handle_key` returns an [`Outcome`]), its key
//! hints and its drawing (`draw(&self, …)`). A component sees only itself and what it is handed
//! (the theme, the page size, the key's action): it cannot reach the `App` that owns it, so what
//! a key means for the rest of the console comes back as an `Outcome` that `update` carries out.

pub mod action_dialog;
pub mod command_line;
pub mod help;
pub mod picker;
pub mod pods;
pub mod text_pane;

use ratatui::layout::{Alignment, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Padding};

use super::keymap::Action;
use super::theme::Theme;

/// The overlay open over the table (one at a time).
#[derive(Default)]
pub enum Overlay {
    #[default]
    None,
    Help(help::HelpPane),
    /// A row's detail pane (`d`).
    Detail(text_pane::TextPane),
    /// A row's object as YAML (`y`).
    Yaml(text_pane::TextPane),
    Dialog(Box<action_dialog::ActionDialog>),
    /// A Deployment's ReplicaSets and Pods (Enter on a rollout row), and a Pod's log.
    Pods(Box<pods::PodsPane>),
}

/// What a key in an overlay (or on the `/` and `:` lines) asks of the rest of the console.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The key was the overlay's (or meant nothing there): nothing else changes.
    Stay,
    /// Close the overlay.
    Close,
    /// Close the overlay, and take keys typed on in the same burst as text, not hotkeys.
    CloseInBurst,
    /// A note for the footer.
    Note(String),
    /// The dialog confirmed: carry out the write with its reason (and close, as `CloseInBurst`).
    Confirmed(super::user_write::Confirmed),
    /// Read a Pod's last log lines.
    ReadLog {
        namespace: String,
        pod: String,
        container: Option<String>,
    },
    Quit,
    /// The `/` line changed: filter the rows by this text.
    Filter(String),
    /// Run this `:` line.
    Run(String),
    /// `:ns ` was typed: ask the API server which namespaces exist, for the picker.
    ListNamespaces,
}

/// The text popups (help, detail, YAML): this share of the terminal, at least this high.
pub const POPUP_PERCENT: u16 = 90;
pub const POPUP_PERCENT_Y: u16 = 85;
pub const POPUP_MIN_HEIGHT: u16 = 8;

/// Text rows inside a popup on a terminal `height` rows high (its border takes two).
pub fn popup_rows(height: u16) -> usize {
    let part = u16::try_from(u32::from(height) * u32::from(POPUP_PERCENT_Y) / 100).unwrap_or(height);
    usize::from(part.max(POPUP_MIN_HEIGHT).min(height).saturating_sub(2))
}

/// A popup `percent_x`% × `percent_y`% of `area`, centred, at least 1×1 when `area` is.
pub fn centered(area: Rect, percent_x: u16, percent_y: u16, min_width: u16, min_height: u16) -> Rect {
    let part =
        |length: u16, percent: u16| u16::try_from(u32::from(length) * u32::from(percent) / 100).unwrap_or(length);
    let width = part(area.width, percent_x).max(min_width).min(area.width);
    let height = part(area.height, percent_y).max(min_height).min(area.height);
    Rect { x: area.x + (area.width - width) / 2, y: area.y + (area.height - height) / 2, width, height }
}

/// The width of the text inside a text popup (help, detail, YAML) on a terminal this wide:
/// the popup less its borders and padding.
pub fn popup_text_width(screen_width: u16) -> usize {
    let popup = centered(Rect::new(0, 0, screen_width, 1), POPUP_PERCENT, POPUP_PERCENT_Y, 40, 1);
    usize::from(popup.width.saturating_sub(4))
}

/// A popup's frame: its title at the top, its key hints at the bottom right.
pub fn popup_block<'a>(theme: &Theme, title: &'a str, hint: String) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.accent())
        .title(Span::styled(format!(" {title} "), theme.accent()))
        .title_bottom(Line::from(Span::styled(format!(" {hint} "), theme.muted())).alignment(Alignment::Right))
        .padding(Padding::horizontal(1))
        .style(theme.base())
}

/// The keys of a scrolling text popup (help, detail, YAML): move `scroll` and keep it inside
/// text of `lines` lines shown `rows` at a time (so ↑ after G moves at once). `Close` for Esc
/// and q; a page is `page` lines.
fn scroll_key(scroll: &mut usize, action: Option<Action>, page: usize, lines: usize, rows: usize) -> Outcome {
    match action {
        Some(Action::Back | Action::Quit) => return Outcome::Close,
        Some(Action::Down) => *scroll += 1,
        Some(Action::Up) => *scroll = scroll.saturating_sub(1),
        Some(Action::PageDown) => *scroll += page,
        Some(Action::PageUp) => *scroll = scroll.saturating_sub(page),
        Some(Action::Top) => *scroll = 0,
        Some(Action::Bottom) => *scroll = usize::MAX,
        _ => {}
    }
    *scroll = (*scroll).min(lines.saturating_sub(rows));
    Outcome::Stay
}
