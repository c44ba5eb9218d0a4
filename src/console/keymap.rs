//! Keys and what they do. The help screen is generated from this map, and the config file can
//! rebind any action by name (`[keys] approve = "A"`).

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Everything a key can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    Up,
    Down,
    Top,
    Bottom,
    PageUp,
    PageDown,
    Enter,
    Back,
    NextView,
    PreviousView,
    Filter,
    Command,
    Help,
    Detail,
    Yaml,
    Wide,
    ScrollLeft,
    ScrollRight,
    Sort,
    SortReverse,
    Approve,
    Force,
    Hold,
    Cancel,
    Retry,
    Undo,
    Freeze,
    Unfreeze,
    Logs,
    Quit,
}

impl Action {
    pub const ALL: &'static [Self] = &[
        Self::Up,
        Self::Down,
        Self::Top,
        Self::Bottom,
        Self::PageUp,
        Self::PageDown,
        Self::Enter,
        Self::Back,
        Self::NextView,
        Self::PreviousView,
        Self::Filter,
        Self::Command,
        Self::Help,
        Self::Detail,
        Self::Yaml,
        Self::Wide,
        Self::ScrollLeft,
        Self::ScrollRight,
        Self::Sort,
        Self::SortReverse,
        Self::Approve,
        Self::Force,
        Self::Hold,
        Self::Cancel,
        Self::Retry,
        Self::Undo,
        Self::Freeze,
        Self::Unfreeze,
        Self::Logs,
        Self::Quit,
    ];

    /// The name used in the config file.
    pub fn name(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::Top => "top",
            Self::Bottom => "bottom",
            Self::PageUp => "page-up",
            Self::PageDown => "page-down",
            Self::Enter => "enter",
            Self::Back => "back",
            Self::NextView => "next-view",
            Self::PreviousView => "previous-view",
            Self::Filter => "filter",
            Self::Command => "command",
            Self::Help => "help",
            Self::Detail => "detail",
            Self::Yaml => "yaml",
            Self::Wide => "wide",
            Self::ScrollLeft => "scroll-left",
            Self::ScrollRight => "scroll-right",
            Self::Sort => "sort",
            Self::SortReverse => "sort-reverse",
            Self::Approve => "approve",
            Self::Force => "force",
            Self::Hold => "hold",
            Self::Cancel => "cancel",
            Self::Retry => "retry",
            Self::Undo => "undo",
            Self::Freeze => "freeze",
            Self::Unfreeze => "unfreeze",
            Self::Logs => "logs",
            Self::Quit => "quit",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|action| action.name() == name)
    }

    /// Is this an action that writes to the cluster?
    pub fn writes(self) -> bool {
        self.batch_write() || self.freeze_write()
    }

    /// A write to the selected batch.
    pub fn batch_write(self) -> bool {
        matches!(self, Self::Approve | Self::Force | Self::Hold | Self::Cancel | Self::Retry | Self::Undo)
    }

    /// A write to the freeze of the selected row's application.
    pub fn freeze_write(self) -> bool {
        matches!(self, Self::Freeze | Self::Unfreeze)
    }
}

/// A key as written in the config and shown in help: `a`, `F`, `ctrl-c`, `enter`, `shift-tab`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
}

impl Key {
    pub fn from_event(event: &KeyEvent) -> Self {
        // Shift is carried by the character itself ('F') and by BackTab, so only Ctrl matters.
        Self { code: event.code, ctrl: event.modifiers.contains(KeyModifiers::CONTROL) }
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let lower = text.to_ascii_lowercase();
        let (ctrl, rest) = match lower.strip_prefix("ctrl-") {
            Some(rest) => (true, &text[5..][..rest.len()]),
            None => (false, text),
        };
        let code = match rest.to_ascii_lowercase().as_str() {
            "enter" => KeyCode::Enter,
            "esc" | "escape" => KeyCode::Esc,
            "tab" => KeyCode::Tab,
            "shift-tab" | "backtab" => KeyCode::BackTab,
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "pageup" | "page-up" => KeyCode::PageUp,
            "pagedown" | "page-down" => KeyCode::PageDown,
            "space" => KeyCode::Char(' '),
            _ => {
                let mut chars = rest.chars();
                match (chars.next(), chars.next()) {
                    (Some(ch), None) => KeyCode::Char(if ctrl { ch.to_ascii_lowercase() } else { ch }),
                    _ => {
                        return Err(format!(
                            "{text:?} is not a key (examples: a, F, ctrl-c, enter, shift-tab, pagedown)"
                        ));
                    }
                }
            }
        };
        Ok(Self { code, ctrl })
    }

    pub fn label(self) -> String {
        let base = match self.code {
            KeyCode::Enter => "Enter".to_string(),
            KeyCode::Esc => "Esc".to_string(),
            KeyCode::Tab => "Tab".to_string(),
            KeyCode::BackTab => "Shift-Tab".to_string(),
            KeyCode::Up => "↑".to_string(),
            KeyCode::Down => "↓".to_string(),
            KeyCode::Left => "←".to_string(),
            KeyCode::Right => "→".to_string(),
            KeyCode::Home => "Home".to_string(),
            KeyCode::End => "End".to_string(),
            KeyCode::PageUp => "PgUp".to_string(),
            KeyCode::PageDown => "PgDn".to_string(),
            KeyCode::Char(' ') => "Space".to_string(),
            KeyCode::Char(ch) => ch.to_string(),
            other => format!("{other:?}"),
        };
        if self.ctrl { format!("Ctrl-{base}") } else { base }
    }
}

/// Bindings in the order they are listed in help; few enough that a scan is the fastest lookup.
#[derive(Clone, Debug)]
pub struct Keymap {
    bindings: Vec<(Key, Action)>,
}

fn char_key(ch: char) -> Key {
    Key { code: KeyCode::Char(ch), ctrl: false }
}

impl Default for Keymap {
    /// k9s habits: j/k and arrows, g/G, Enter, Esc, Tab, `/`, `:`, `?`; a/F/h/x on batches;
    /// Z/U (shifted: a freeze stops a whole application) to freeze and unfreeze.
    fn default() -> Self {
        let mut bindings = Vec::new();
        let mut bind = |key: Key, action| bindings.push((key, action));
        bind(char_key('k'), Action::Up);
        bind(Key { code: KeyCode::Up, ctrl: false }, Action::Up);
        bind(char_key('j'), Action::Down);
        bind(Key { code: KeyCode::Down, ctrl: false }, Action::Down);
        bind(char_key('g'), Action::Top);
        bind(Key { code: KeyCode::Home, ctrl: false }, Action::Top);
        bind(char_key('G'), Action::Bottom);
        bind(Key { code: KeyCode::End, ctrl: false }, Action::Bottom);
        bind(Key { code: KeyCode::PageUp, ctrl: false }, Action::PageUp);
        bind(Key { code: KeyCode::Char('b'), ctrl: true }, Action::PageUp);
        bind(Key { code: KeyCode::PageDown, ctrl: false }, Action::PageDown);
        bind(Key { code: KeyCode::Char('f'), ctrl: true }, Action::PageDown);
        bind(Key { code: KeyCode::Enter, ctrl: false }, Action::Enter);
        bind(Key { code: KeyCode::Esc, ctrl: false }, Action::Back);
        bind(Key { code: KeyCode::Tab, ctrl: false }, Action::NextView);
        bind(Key { code: KeyCode::BackTab, ctrl: false }, Action::PreviousView);
        bind(char_key('/'), Action::Filter);
        bind(char_key(':'), Action::Command);
        bind(char_key('?'), Action::Help);
        bind(char_key('d'), Action::Detail);
        bind(char_key('y'), Action::Yaml);
        bind(char_key('w'), Action::Wide);
        bind(Key { code: KeyCode::Left, ctrl: false }, Action::ScrollLeft);
        bind(Key { code: KeyCode::Right, ctrl: false }, Action::ScrollRight);
        bind(char_key('s'), Action::Sort);
        bind(char_key('S'), Action::SortReverse);
        bind(char_key('a'), Action::Approve);
        bind(char_key('F'), Action::Force);
        bind(char_key('h'), Action::Hold);
        bind(char_key('x'), Action::Cancel);
        bind(char_key('r'), Action::Retry);
        bind(char_key('u'), Action::Undo);
        bind(char_key('Z'), Action::Freeze);
        bind(char_key('U'), Action::Unfreeze);
        bind(char_key('l'), Action::Logs);
        bind(char_key('q'), Action::Quit);
        bind(Key { code: KeyCode::Char('c'), ctrl: true }, Action::Quit);
        Self { bindings }
    }
}

impl Keymap {
    /// The default map with `overrides` (action name → key) applied: an override replaces every
    /// default key of that action.
    pub fn with_overrides(overrides: &BTreeMap<String, String>) -> Result<Self, String> {
        let mut map = Self::default();
        for (name, key) in overrides {
            let action = Action::from_name(name).ok_or_else(|| {
                let names: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
                format!("unknown action {name:?} in [keys] (actions: {})", names.join(", "))
            })?;
            let key = Key::parse(key)?;
            map.bindings.retain(|(bound_key, bound)| *bound != action && *bound_key != key);
            map.bindings.push((key, action));
        }
        Ok(map)
    }

    pub fn action(&self, event: &KeyEvent) -> Option<Action> {
        let key = Key::from_event(event);
        self.bindings.iter().find(|(bound, _)| *bound == key).map(|(_, action)| *action)
    }

    /// Keys bound to `action`, for help and hints.
    pub fn keys(&self, action: Action) -> Vec<Key> {
        self.bindings.iter().filter(|(_, bound)| *bound == action).map(|(key, _)| *key).collect()
    }

    pub fn label(&self, action: Action) -> String {
        self.keys(action).iter().map(|key| key.label()).collect::<Vec<_>>().join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn default_bindings_follow_k9s() {
        let map = Keymap::default();
        assert_eq!(map.action(&event(KeyCode::Char('j'), KeyModifiers::NONE)), Some(Action::Down));
        assert_eq!(map.action(&event(KeyCode::Char('F'), KeyModifiers::SHIFT)), Some(Action::Force));
        assert_eq!(map.action(&event(KeyCode::Char('c'), KeyModifiers::CONTROL)), Some(Action::Quit));
        assert_eq!(map.action(&event(KeyCode::Char('z'), KeyModifiers::NONE)), None);
        assert_eq!(map.label(Action::Down), "j/↓");
    }

    #[test]
    fn overrides_replace_an_actions_keys_and_bad_ones_are_explained() {
        let overrides: BTreeMap<String, String> =
            [("approve".to_string(), "A".to_string()), ("quit".to_string(), "ctrl-q".to_string())].into();
        let map = Keymap::with_overrides(&overrides).expect("valid");
        assert_eq!(map.action(&event(KeyCode::Char('A'), KeyModifiers::SHIFT)), Some(Action::Approve));
        assert_eq!(map.action(&event(KeyCode::Char('a'), KeyModifiers::NONE)), None);
        assert_eq!(map.action(&event(KeyCode::Char('q'), KeyModifiers::CONTROL)), Some(Action::Quit));
        let bad: BTreeMap<String, String> = [("approve-all".to_string(), "A".to_string())].into();
        assert!(Keymap::with_overrides(&bad).expect_err("unknown").contains("unknown action"));
        let bad: BTreeMap<String, String> = [("approve".to_string(), "hyper-x".to_string())].into();
        assert!(Keymap::with_overrides(&bad).expect_err("bad key").contains("is not a key"));
    }
}
