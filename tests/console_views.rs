//! The console drawn on ratatui's `TestBackend`: every view, the help, the detail and YAML panes,
//! each batch dialog, the connection-lost banner, input lines and tiny terminals. The data is
//! the fixed sample (demo seed + batches at a fixed moment), so the snapshots are stable.

use capdeck::cluster::stores::ConnectionState;
use capdeck::console::app::App;
use capdeck::console::draw::draw;
use capdeck::console::sample::{self, SampleObjects};
use capdeck::console::update::{Command, Msg, update};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn sample_app() -> App {
    sample::app(SampleObjects::demo().expect("sample").snapshot())
}

fn draw_on(app: &mut App, width: u16, height: u16) -> Terminal<TestBackend> {
    update(app, Msg::Resize { width, height });
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
    terminal.draw(|frame| draw(frame, app)).expect("draw");
    terminal
}

fn render(app: &mut App, width: u16, height: u16) -> String {
    draw_on(app, width, height).backend().to_string()
}

fn key(app: &mut App, code: KeyCode) -> Vec<Command> {
    let modifiers = match code {
        KeyCode::Char(ch) if ch.is_ascii_uppercase() => KeyModifiers::SHIFT,
        _ => KeyModifiers::NONE,
    };
    update(app, Msg::Key(KeyEvent::new(code, modifiers)))
}

fn keys(app: &mut App, text: &str) {
    for ch in text.chars() {
        key(app, if ch == '\n' { KeyCode::Enter } else { KeyCode::Char(ch) });
    }
}

/// Select the batch row named `name` in the batches view.
fn select_batch(app: &mut App, name: &str) {
    keys(app, ":batches\n");
    key(app, KeyCode::Char('g'));
    for _ in 0..app.visible.len() {
        if capdeck::console::update::selected_batch(app).is_some_and(|(_, batch)| batch == name) {
            return;
        }
        key(app, KeyCode::Char('j'));
    }
    panic!("no batch {name}");
}

#[test]
fn every_view() {
    let mut app = sample_app();
    for (command, name) in [
        ("apps", "view_applications"),
        ("versions", "view_versions"),
        ("tenants", "view_tenants"),
        ("ops", "view_operations"),
        ("batches", "view_batches"),
        ("rollouts", "view_rollouts"),
        ("events", "view_events"),
    ] {
        keys(&mut app, &format!(":{command}\n"));
        insta::assert_snapshot!(name, render(&mut app, 160, 32));
    }
}

#[test]
fn drill_down_from_an_application_to_its_versions() {
    let mut app = sample_app();
    keys(&mut app, "/bookshop\n");
    key(&mut app, KeyCode::Enter);
    insta::assert_snapshot!("drill_app_versions", render(&mut app, 160, 16));
}

#[test]
fn help_is_generated_from_the_key_map() {
    let mut app = sample_app();
    key(&mut app, KeyCode::Char('?'));
    insta::assert_snapshot!("help", render(&mut app, 120, 48));
}

#[test]
fn detail_pane_shows_secret_keys_and_sizes_only() {
    let mut app = sample_app();
    keys(&mut app, "/bookshop\n");
    key(&mut app, KeyCode::Char('d'));
    let screen = render(&mut app, 140, 40);
    insta::assert_snapshot!("detail_application", screen);
    // The demo Secrets hold client secrets like "sk-…"; only key names and sizes are shown.
    assert!(!screen.contains("sk-"), "{screen}");
}

#[test]
fn detail_pane_of_a_batch_names_who_did_what() {
    let mut objects = SampleObjects::demo().expect("sample");
    objects.hold("travel-tdv6j", "bob", Some("release freeze until 14:00")).expect("travel");
    let mut app = sample::app(objects.snapshot());
    select_batch(&mut app, "travel-tdv6j");
    key(&mut app, KeyCode::Char('d'));
    insta::assert_snapshot!("detail_batch", render(&mut app, 140, 40));
}

#[test]
fn yaml_view() {
    let mut app = sample_app();
    keys(&mut app, ":versions\n");
    key(&mut app, KeyCode::Char('y'));
    insta::assert_snapshot!("yaml_version", render(&mut app, 120, 30));
}

#[test]
fn approve_dialog() {
    let mut app = sample_app();
    select_batch(&mut app, "hr-portal-c9dsg");
    key(&mut app, KeyCode::Char('a'));
    keys(&mut app, "CHG-1234 approved by CAB");
    insta::assert_snapshot!("dialog_approve", render(&mut app, 120, 24));
}

#[test]
fn force_dialog_offers_to_approve_too() {
    let mut objects = SampleObjects::demo().expect("sample");
    objects.batch_mut("bookshop-4hx2p").expect("bookshop").spec.approval =
        Some(capdeck::api::rotation_batch::Approval { required: true, ..Default::default() });
    let mut app = sample::app(objects.snapshot());
    select_batch(&mut app, "bookshop-4hx2p");
    key(&mut app, KeyCode::Char('F'));
    insta::assert_snapshot!("dialog_force", render(&mut app, 120, 24));
    // Tab toggles "also approve".
    key(&mut app, KeyCode::Tab);
    assert!(render(&mut app, 120, 24).contains("[ ] also approve"));
}

#[test]
fn force_on_a_batch_whose_window_ended_says_so() {
    let mut app = sample_app();
    select_batch(&mut app, "hr-portal-c9dsg");
    assert!(key(&mut app, KeyCode::Char('F')).is_empty());
    assert!(render(&mut app, 120, 12).contains("force: batch hr-portal-c9dsg's window has already ended"));
}

#[test]
fn hold_and_cancel_dialogs() {
    let mut app = sample_app();
    select_batch(&mut app, "travel-tdv6j");
    key(&mut app, KeyCode::Char('h'));
    insta::assert_snapshot!("dialog_hold", render(&mut app, 120, 24));
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('x'));
    insta::assert_snapshot!("dialog_cancel", render(&mut app, 120, 24));
}

#[test]
fn release_dialog_for_a_held_batch() {
    let mut objects = SampleObjects::demo().expect("sample");
    objects.hold("travel-tdv6j", "bob", None).expect("travel");
    let mut app = sample::app(objects.snapshot());
    select_batch(&mut app, "travel-tdv6j");
    key(&mut app, KeyCode::Char('h'));
    insta::assert_snapshot!("dialog_release", render(&mut app, 120, 24));
}

#[test]
fn connection_lost_banner() {
    let mut app = sample_app();
    update(
        &mut app,
        Msg::Connection(ConnectionState {
            error: Some("error trying to connect: tcp connect error: Connection refused (os error 111)".into()),
            attempts: 3,
        }),
    );
    insta::assert_snapshot!("connection_lost", render(&mut app, 160, 12));
}

#[test]
fn filter_and_command_lines() {
    let mut app = sample_app();
    keys(&mut app, ":tenants\n/emea");
    insta::assert_snapshot!("filter_typing", render(&mut app, 160, 14));
    keys(&mut app, "\n:ba");
    insta::assert_snapshot!("command_typing", render(&mut app, 160, 14));
}

#[test]
fn readonly_session_says_why_writes_are_off() {
    let mut app = sample_app();
    app.session.readonly = true;
    select_batch(&mut app, "hr-portal-c9dsg");
    let commands = key(&mut app, KeyCode::Char('a'));
    assert!(commands.is_empty(), "{commands:?}");
    insta::assert_snapshot!("readonly_refusal", render(&mut app, 160, 10));
}

#[test]
fn a_terminal_of_20_by_5() {
    let mut app = sample_app();
    insta::assert_snapshot!("tiny_20x5", render(&mut app, 20, 5));
    select_batch(&mut app, "hr-portal-c9dsg");
    key(&mut app, KeyCode::Char('a'));
    insta::assert_snapshot!("tiny_20x5_dialog", render(&mut app, 20, 5));
}

/// Every view and overlay at every size from 0×0 to 44×14 draws without panicking.
#[test]
fn no_size_panics() {
    let mut app = sample_app();
    let overlays: [&dyn Fn(&mut App); 5] = [
        &|_app| {},
        &|app| {
            key(app, KeyCode::Char('?'));
        },
        &|app| {
            key(app, KeyCode::Char('d'));
        },
        &|app| {
            key(app, KeyCode::Char('y'));
        },
        &|app| {
            select_batch(app, "hr-portal-c9dsg");
            key(app, KeyCode::Char('a'));
        },
    ];
    for view in ["apps", "versions", "tenants", "ops", "batches", "rollouts", "events"] {
        for open in overlays {
            key(&mut app, KeyCode::Esc);
            key(&mut app, KeyCode::Esc);
            keys(&mut app, &format!(":{view}\n"));
            open(&mut app);
            for width in 0..=44 {
                for height in 0..=14 {
                    draw_on(&mut app, width, height);
                }
            }
        }
    }
}

#[test]
fn tenant_detail_shows_versions_strategy_and_the_operation_step_by_step() {
    let mut app = sample_app();
    keys(&mut app, ":tenants\n/apj-1\n");
    key(&mut app, KeyCode::Char('d'));
    insta::assert_snapshot!("detail_tenant", render(&mut app, 120, 30));
}
