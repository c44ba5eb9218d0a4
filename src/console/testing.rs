//! For the console's unit tests: the demo's `App`, and keys typed into it the way a user types
//! them (through `update::handle_key`, a second apart unless a test says otherwise).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::App;
use super::queries::selected_batch;
use super::update::{Command, handle_key};
use crate::demo::sample::{self, SampleObjects};

pub fn app() -> App {
    sample::app(SampleObjects::demo().expect("sample").snapshot())
}

thread_local! {
    /// A key clock for tests: each key comes a second after the last, so no two keys are in
    /// one burst unless a test says so (`press_at`).
    static KEY_CLOCK: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
}

pub fn next_key_time() -> std::time::Instant {
    KEY_CLOCK.with(|clock| {
        let next = clock.get().map_or_else(std::time::Instant::now, |t| t + std::time::Duration::from_secs(1));
        clock.set(Some(next));
        next
    })
}

pub fn press(app: &mut App, code: KeyCode) -> Vec<Command> {
    handle_key(app, &KeyEvent::new(code, KeyModifiers::NONE), next_key_time())
}

pub fn press_at(app: &mut App, code: KeyCode, at: std::time::Instant) -> Vec<Command> {
    handle_key(app, &KeyEvent::new(code, KeyModifiers::NONE), at)
}

pub fn ctrl(app: &mut App, ch: char) -> Vec<Command> {
    handle_key(app, &KeyEvent::new(KeyCode::Char(ch), KeyModifiers::CONTROL), next_key_time())
}

pub fn typed(app: &mut App, text: &str) -> Vec<Command> {
    let mut commands = Vec::new();
    for ch in text.chars() {
        commands.extend(press(app, if ch == '\n' { KeyCode::Enter } else { KeyCode::Char(ch) }));
    }
    commands
}

pub fn goto_batch(app: &mut App, name: &str) {
    typed(app, ":batches\n");
    press(app, KeyCode::Char('g'));
    while selected_batch(app).is_none_or(|(_, batch)| batch != name) {
        let before = app.cursor().selected;
        press(app, KeyCode::Char('j'));
        assert_ne!(before, app.cursor().selected, "no batch {name}");
    }
}
