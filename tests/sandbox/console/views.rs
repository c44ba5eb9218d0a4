//! The console drawn on ratatui's `TestBackend`: every view, the help, the detail and YAML panes,
//! each batch dialog, the connection-lost banner, input lines and tiny terminals. The data is
//! the fixed sample (demo seed + batches at a fixed moment), so the snapshots are stable.

use capdeck::cluster::stores::ConnectionState;
use capdeck::console::app::App;
use capdeck::console::draw::draw;
use capdeck::console::update::{Command, Msg, update};
use capdeck::console::views::DetailNeed;
use capdeck::demo::sample::{self, SampleObjects};
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
        if capdeck::console::queries::selected_batch(app).is_some_and(|batch| batch.name == name) {
            return;
        }
        key(app, KeyCode::Char('j'));
    }
    panic!("no batch {name}");
}

/// Three contexts as the fleet reads them: one with a batch awaiting approval and credentials at
/// risk, one with nothing open, one that cannot be reached.
fn sample_fleet(now: k8s_openapi::jiff::Timestamp) -> Vec<capdeck::fleet::FleetRow> {
    use capdeck::fleet::{CredentialRisk, FleetRow, OpenBatch, RowState};
    let later = |seconds: i64| k8s_openapi::jiff::Timestamp::from_second(now.as_second() + seconds).expect("time");
    let mut open = FleetRow::problem("prod-eu10", RowState::Open, String::new());
    open.why = None;
    open.namespace = Some("cap-shop".into());
    open.leader = "capdeck-7d9f-x2k".into();
    open.batches = vec![OpenBatch {
        name: "bookshop-4hx2p".into(),
        application: "bookshop".into(),
        phase: "AwaitingApproval".into(),
        reason: "ApprovalRequired".into(),
        state: "AwaitingApproval".into(),
        window_end: later(-120),
        old_credentials_revocable: Some(later(3 * 3600)),
    }];
    open.credentials = vec![CredentialRisk {
        secret: "bookshop-uaa".into(),
        verdict: "at-risk".into(),
        reason: "only 5m to spare".into(),
    }];
    open.freezes = Some(vec![capdeck::fleet::ActiveFreeze {
        target: "namespace cap-shop".into(),
        until: later(5 * 3600),
        by: "alice".into(),
        reason: Some("release weekend".into()),
    }]);
    open.change_windows = Some("Mon-Fri 22:00-05:00 Europe/Berlin".into());
    let mut clear = FleetRow::problem("prod-us20", RowState::Clear, String::new());
    clear.why = None;
    clear.leader = "no leader".into();
    clear.freezes = Some(Vec::new());
    let down = FleetRow::problem(
        "staging-ap11",
        RowState::Unreachable,
        "cannot reach the API server: connection refused (is the cluster up and the kubeconfig right?)".into(),
    );
    vec![open, clear, down]
}

#[test]
fn every_view() {
    let mut app = sample_app();
    let now = app.now;
    update(&mut app, Msg::Fleet(sample_fleet(now)));
    for (command, name) in [
        ("apps", "view_applications"),
        ("versions", "view_versions"),
        ("tenants", "view_tenants"),
        ("ops", "view_operations"),
        ("batches", "view_batches"),
        ("rollouts", "view_rollouts"),
        ("events", "view_events"),
        ("credentials", "view_credentials"),
        ("fleet", "view_fleet"),
    ] {
        keys(&mut app, &format!(":{command}\n"));
        insta::assert_snapshot!(name, render(&mut app, 160, 32));
        // A normal terminal and a small one: the header keeps the context, the engine's role and
        // the connection; names stay whole; `q quit` stays; cut cells end in `…`.
        for (width, height) in [(80, 24), (60, 15)] {
            let screen = render(&mut app, width, height);
            let lines: Vec<&str> = screen.lines().collect();
            let header = lines.first().copied().unwrap_or_default();
            assert!(header.contains("ctx prod-eu10") && header.contains("engine Leader"), "{name} {width}: {header}");
            assert!(header.contains("connected"), "{name} {width}: the connection state stays: {header}");
            assert!(lines.last().is_some_and(|footer| footer.contains("q quit")), "{name} {width}: {screen}");
            insta::assert_snapshot!(format!("{name}_{width}x{height}"), screen);
        }
    }
    // Batch names tell two batches of one application apart: never cut, even at 60 columns.
    keys(&mut app, ":batches\n");
    for width in [80, 60] {
        let screen = render(&mut app, width, 15);
        for batch in ["bookshop-4hx2p", "hr-portal-c9dsg", "travel-tdv6j", "bookshop-9v9ps"] {
            assert!(screen.contains(batch), "{batch} whole at {width} columns:\n{screen}");
        }
    }
}

/// The Credentials view: hr-portal's rotated Secret keeps its old credentials 4 h (ok against a
/// 1 h window + 15 min rollout); Secrets without a ServiceBinding are unknown. Verdicts carry
/// their severity colour; the detail pane says when the old credentials die.
#[test]
fn credentials_view_colours_verdicts_and_details_the_deadline() {
    let mut app = sample_app();
    keys(&mut app, ":creds\n");
    let terminal = draw_on(&mut app, 160, 32);
    let buffer = terminal.backend().buffer();
    // Searched from the bottom: the first row is selected, and the selection has its own style.
    let cell_of = |needle: &str| {
        (0..buffer.area.height).rev().find_map(|y| {
            let line: String = (0..buffer.area.width).map(|x| buffer[(x, y)].symbol()).collect();
            line.find(needle).map(|x| (x as u16, y, line))
        })
    };
    let (x, y, line) = cell_of("hr-portal-uaa-bind").expect("hr-portal's Secret is listed");
    assert!(line.trim_end().ends_with("ok"), "{line}");
    let verdict_x = line.trim_end().len() as u16 - 2;
    assert_eq!(buffer[(verdict_x, y)].fg, app.theme.ok().fg.unwrap_or_default(), "ok in the ok colour: {line}");
    let _ = x;
    let (_, y, line) = cell_of("unknown").expect("a Secret without a ServiceBinding");
    let unknown_x = line.rfind("unknown").expect("verdict") as u16;
    assert_eq!(buffer[(unknown_x, y)].fg, app.theme.muted().fg.unwrap_or_default(), "{line}");

    keys(&mut app, "/hr-portal-uaa\n");
    key(&mut app, KeyCode::Char('d'));
    let screen = render(&mut app, 160, 32);
    assert!(
        screen
            .contains("old credentials hr-portal-uaa-bind-k3x9q (Secret hr-portal-uaa-bind-k3x9q) revocable in 3h59m"),
        "{screen}"
    );
    assert!(screen.contains("policy          every 168h, old kept 4h"), "{screen}");
}

/// The Credentials view says which settings judged its margins: the leading engine's when it
/// published them (an observing console judges as the leader does), else its own engine's.
#[test]
fn credentials_view_says_which_settings_judged_the_margins() {
    use capdeck::leadership::{EngineScope, LeaderView, PublishedSettings};
    let mut app = sample_app();
    keys(&mut app, ":creds\n");
    let timing = capdeck::credentials::Timing {
        window: std::time::Duration::from_secs(30),
        expected_rollout: std::time::Duration::from_secs(900),
    };
    std::sync::Arc::make_mut(&mut app.snapshot).credential_timing = Some(timing);
    assert!(render(&mut app, 160, 32).contains("margins: window 30s, expected rollout 15m (this console's engine)"));
    app.leader = Some(LeaderView::Leads {
        lease: "capdeck-system/capdeck-engine".into(),
        identity: "daemon-1".into(),
        renewed_ago: 1,
        scope: EngineScope::All,
        settings: Some(PublishedSettings {
            rollout_delay_seconds: 30,
            expected_rollout_seconds: 900,
            approval: "auto".into(),
            max_parallel_rollouts: 5,
            min_rollout_interval_seconds: 600,
            change_windows: None,
            on_deadline: None,
        }),
    });
    let screen = render(&mut app, 160, 32);
    assert!(screen.contains("margins: window 30s, expected rollout 15m (the leading engine's)"), "{screen}");
}

/// Styles, not only text: a stalled rollout row in the error colour, a write key struck through
/// while it is not allowed, the wide mode with horizontal scrolling.
#[test]
fn styles_of_a_stalled_row_and_a_disabled_key() {
    let mut app = sample_app();
    keys(&mut app, ":rollouts\n");
    let terminal = draw_on(&mut app, 80, 12);
    let buffer = terminal.backend().buffer();
    let stalled_row = (0..buffer.area.height)
        .find(|&y| (0..buffer.area.width).map(|x| buffer[(x, y)].symbol()).collect::<String>().contains("Stalled"))
        .expect("a stalled row");
    let error = app.theme.error().fg;
    assert_eq!(buffer[(0, stalled_row)].fg, error.unwrap_or_default(), "the stalled row is in the error colour");
    let footer = buffer.area.height - 1;
    let line: String = (0..buffer.area.width).map(|x| buffer[(x, footer)].symbol()).collect();
    // The selected row's batch (hr-portal-c9dsg) waits for an approval; its window has ended.
    let approve = line.find("a approve").expect("the approve key is listed") as u16;
    let force = line.find("F force").expect("the force key is listed") as u16;
    let struck = |x: u16| buffer[(x, footer)].modifier.contains(ratatui::style::Modifier::CROSSED_OUT);
    assert!(!struck(approve), "approve is allowed: {line}");
    assert!(struck(force), "force is struck through: the window has already ended: {line}");
    insta::assert_snapshot!("styles_rollouts_80x12", format!("{buffer:?}"));

    // Wide: every column at its natural width; → scrolls one column at a time.
    keys(&mut app, "w");
    let wide = render(&mut app, 80, 12);
    assert!(wide.contains("NAMESPACE") && wide.contains("VERSION"), "{wide}");
    key(&mut app, KeyCode::Right);
    let scrolled = render(&mut app, 80, 12);
    assert!(!scrolled.contains("NAMESPACE") && scrolled.contains("BATCH"), "{scrolled}");
}

/// `--readonly` does not advertise write keys at all.
#[test]
fn readonly_hides_write_keys() {
    let mut app = sample_app();
    app.session.readonly = true;
    keys(&mut app, ":batches\n");
    let screen = render(&mut app, 120, 12);
    let footer = screen.lines().last().unwrap_or_default();
    assert!(!footer.contains("approve") && !footer.contains("force") && !footer.contains("cancel"), "{footer}");
    assert!(footer.contains("q quit"), "{footer}");
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
    let objects = SampleObjects::demo().expect("sample");
    let mut app = sample::app(objects.snapshot());
    keys(&mut app, "/bookshop\n");
    let commands = key(&mut app, KeyCode::Char('d'));
    // The pane asks for the subscription dependencies; the runtime would work them out.
    let asked = DetailNeed::Dependencies { namespace: "cap-shop".into(), name: "bookshop".into() };
    assert!(commands.contains(&Command::Detail(asked)), "{commands:?}");
    assert!(render(&mut app, 140, 40).contains("working them out…"));
    let report = objects.dependencies("cap-shop", "bookshop").ok_or("no bookshop");
    update(
        &mut app,
        Msg::Dependencies {
            namespace: "cap-shop".into(),
            name: "bookshop".into(),
            report: report.map_err(String::from),
        },
    );
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

/// A batch whose Secret's old binding is known shows when those credentials may be revoked,
/// in the detail pane (the approve dialog's snapshot shows it too, in the warning colour).
#[test]
fn detail_pane_of_a_batch_says_when_its_old_credentials_die() {
    let mut app = sample_app();
    select_batch(&mut app, "hr-portal-c9dsg");
    key(&mut app, KeyCode::Char('d'));
    let screen = render(&mut app, 140, 40);
    assert!(screen.contains("old credentials revocable in 3h59m"), "{screen}");
    key(&mut app, KeyCode::Esc);
    select_batch(&mut app, "travel-tdv6j");
    key(&mut app, KeyCode::Char('d'));
    let screen = render(&mut app, 140, 40);
    assert!(!screen.contains("old credentials"), "no ServiceBinding for travel's Secrets: {screen}");
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
            ..ConnectionState::default()
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

/// `:ns ` lists the namespaces that exist (here the API server's answer) in a picker above the
/// command line; Tab walks it.
#[test]
fn namespace_picker_at_80x24() {
    let mut app = sample_app();
    let commands = {
        let mut commands = key(&mut app, KeyCode::Char(':'));
        for ch in "ns ".chars() {
            commands.extend(key(&mut app, KeyCode::Char(ch)));
        }
        commands
    };
    assert_eq!(commands, vec![Command::ListNamespaces]);
    update(&mut app, Msg::Namespaces(Ok(vec!["cap-hr".into(), "cap-shop".into(), "kube-system".into()])));
    key(&mut app, KeyCode::Tab);
    key(&mut app, KeyCode::Tab);
    let screen = render(&mut app, 80, 24);
    insta::assert_snapshot!("namespace_picker_80x24", screen);
    assert!(screen.contains(":ns cap-hr"), "{screen}");
}

/// Sorted by age, the oldest first: the header marks the column.
#[test]
fn sorted_by_a_column_at_80x24() {
    let mut app = sample_app();
    keys(&mut app, ":batches\n:sort -age\n");
    let screen = render(&mut app, 80, 24);
    insta::assert_snapshot!("sorted_batches_80x24", screen);
    assert!(screen.contains("▼"), "{screen}");
}

/// A message longer than the footer wraps (up to three rows) and `q quit` stays at its end; the
/// tab bar shortens to the views' short names, then to a window around the current view.
#[test]
fn long_messages_wrap_and_the_tab_bar_narrows() {
    let mut app = sample_app();
    keys(&mut app, ":rollouts\n");
    update(
        &mut app,
        Msg::Error(
            "approve cap-shop/bookshop-x7k2p: forbidden: User \"bob\" cannot patch resource \"rotationbatches\" in \
             API group \"capdeck.dev\" in the namespace \"cap-shop\" (ask for the capdeck-approver role)"
                .into(),
        ),
    );
    let screen = render(&mut app, 80, 24);
    insta::assert_snapshot!("long_message_80x24", screen);
    let footer: Vec<&str> = screen.lines().rev().take(3).collect();
    assert!(footer[0].contains("q quit") && footer[0].contains("capdeck-approver role"), "{screen}");
    assert!(footer[2].contains("approve cap-shop/bookshop-x7k2p"), "{screen}");
    let narrow = render(&mut app, 40, 24);
    insta::assert_snapshot!("tab_bar_40x24", narrow);
    let tabs = narrow.lines().nth(1).unwrap_or_default();
    assert!(tabs.contains("rollouts") && tabs.contains('‹'), "{narrow}");
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

/// The Pods pane (Enter on a rollout) and a Pod's log (`l`), at 80×24 and 120×30: the failing
/// Pod's status, restarts and last termination stay in view; the log opens at its end.
#[test]
fn pods_pane_and_a_pod_log() {
    use capdeck::readmodel::pods::{PodRow, RowKind};
    let mut app = sample_app();
    keys(&mut app, ":rollouts\n/travel-1-2-0-srv\n");
    let commands = key(&mut app, KeyCode::Enter);
    assert!(matches!(&commands[..], [Command::Pods { .. }]), "{commands:?}");
    let ago = |minutes: i64| app.now.checked_sub(k8s_openapi::jiff::SignedDuration::from_mins(minutes)).ok();
    let row =
        |kind, name: &str, status: &str, ready: &str, restarts, last: Option<&str>, secret: Option<&str>, age| PodRow {
            kind,
            name: name.into(),
            status: status.into(),
            ready: ready.into(),
            restarts,
            last_termination: last.map(str::to_string),
            secret: secret.map(str::to_string),
            created: ago(age),
            log_container: (kind == RowKind::Pod).then(|| "srv".into()),
        };
    let rows = vec![
        row(RowKind::ReplicaSet, "travel-1-2-0-srv-7d9", "current", "0/1", 4, None, Some("travel-1-2-0-srv-k2x9q"), 6),
        row(
            RowKind::Pod,
            "travel-1-2-0-srv-7d9-x2k4p",
            "CrashLoopBackOff",
            "0/1",
            4,
            Some("Error (exit code 1)"),
            None,
            6,
        ),
        row(RowKind::ReplicaSet, "travel-1-2-0-srv-6c4", "old", "2/2", 0, None, Some("travel-1-2-0-srv-s748w"), 90),
        row(RowKind::Pod, "travel-1-2-0-srv-6c4-a", "Running", "1/1", 0, None, None, 90),
        row(RowKind::Pod, "travel-1-2-0-srv-6c4-b", "Running", "1/1", 0, None, None, 90),
    ];
    update(&mut app, Msg::Pods { namespace: "cap-shop".into(), deployment: "travel-1-2-0-srv".into(), rows: Ok(rows) });
    key(&mut app, KeyCode::Char('j'));
    insta::assert_snapshot!("pods_pane_80x24", render(&mut app, 80, 24));
    insta::assert_snapshot!("pods_pane_120x30", render(&mut app, 120, 30));
    assert!(render(&mut app, 20, 5).contains('┌'), "a 20×5 terminal still draws the pane");
    let commands = key(&mut app, KeyCode::Char('l'));
    assert!(matches!(&commands[..], [Command::PodLog { pod, .. }] if pod == "travel-1-2-0-srv-7d9-x2k4p"));
    let lines = (1..=40)
        .map(|n| format!("[error] - Error: xsuaa token request failed: 401 Unauthorized (attempt {n})"))
        .collect();
    update(
        &mut app,
        Msg::PodLog { namespace: "cap-shop".into(), pod: "travel-1-2-0-srv-7d9-x2k4p".into(), lines: Ok(lines) },
    );
    insta::assert_snapshot!("pod_log_80x24", render(&mut app, 80, 24));
    assert!(render(&mut app, 20, 5).contains('┌'), "and the log");
    // It follows the end across a resize; g goes to the top, G back to following the end.
    assert!(render(&mut app, 120, 30).contains("(attempt 40)"));
    key(&mut app, KeyCode::Char('g'));
    let top = render(&mut app, 120, 30);
    assert!(top.contains("(attempt 1)") && !top.contains("(attempt 40)"), "{top}");
    key(&mut app, KeyCode::Char('G'));
    assert!(render(&mut app, 80, 24).contains("(attempt 40)"));
}

/// Every cell of the table as drawn on a `width`×`height` terminal is whole or cut with `…`:
/// the columns never need more than the terminal, whose edge would clip with no `…`.
fn assert_cells_whole_or_cut_with_an_ellipsis(app: &mut App, width: u16, height: u16, what: &str) {
    use capdeck::console::{draw::table_columns, table::SPACING, views};
    let terminal = draw_on(app, width, height);
    let buffer = terminal.backend().buffer();
    let (area, plan) = table_columns(app, ratatui::layout::Rect::new(0, 0, width, height));
    let used: u16 = plan.shown.iter().map(|(_, w)| w + SPACING).sum::<u16>().saturating_sub(SPACING);
    assert!(used <= area.width, "{what}: the columns need {used} of {} cells: {plan:?}", area.width);
    let columns = views::columns(app.route.view);
    let mut lines = vec![(area.y, columns.iter().map(|c| c.header.to_string()).collect::<Vec<_>>())];
    let on_screen = app.visible.iter().skip(app.cursor().offset).take(usize::from(area.height.saturating_sub(1)));
    for (row, &index) in on_screen.enumerate() {
        let cells = views::cells(app, app.route.view, index).expect("a row");
        lines.push((area.y + 1 + row as u16, cells.cells.iter().map(ToString::to_string).collect()));
    }
    for (y, texts) in lines {
        let mut x = area.x;
        for &(column, w) in &plan.shown {
            let drawn: String = (x..x + w).map(|x| buffer[(x, y)].symbol()).collect();
            let (drawn, full) = (drawn.trim_end(), texts[column].trim_end());
            let cut_well = drawn.strip_suffix('…').is_some_and(|kept| full.starts_with(kept));
            assert!(
                drawn == full || cut_well,
                "{what}: {} at row {y} shows {drawn:?} of {full:?}",
                columns[column].header
            );
            x += w + SPACING;
        }
    }
}

/// Issue 31: `w` (every column at full width) at 80×24 made the table wider than the terminal,
/// which cut `AwaitingApproval` to `AwaitingA` with no `…`. Now the wide mode shows the columns
/// that fit whole, says how many more ←/→ show, and no cell anywhere is cut without `…`.
#[test]
fn wide_mode_never_cuts_without_an_ellipsis_at_80x24() {
    let mut app = sample_app();
    let now = app.now;
    update(&mut app, Msg::Fleet(sample_fleet(now)));
    for view in ["apps", "versions", "tenants", "ops", "batches", "rollouts", "events", "credentials", "fleet"] {
        keys(&mut app, &format!(":{view}\n"));
        for (width, height) in [(80, 24), (60, 15), (120, 24)] {
            assert_cells_whole_or_cut_with_an_ellipsis(&mut app, width, height, &format!(":{view} at {width}"));
        }
        keys(&mut app, "w");
        for scroll in 0..capdeck::console::views::columns(app.route.view).len() {
            let what = format!(":{view} wide, scrolled {scroll} →");
            assert_cells_whole_or_cut_with_an_ellipsis(&mut app, 80, 24, &what);
            assert_cells_whole_or_cut_with_an_ellipsis(&mut app, 20, 5, &what);
            key(&mut app, KeyCode::Right);
        }
        keys(&mut app, "w");
    }
    keys(&mut app, ":apps\nw");
    let screen = render(&mut app, 80, 24);
    insta::assert_snapshot!("wide_applications_80x24", screen);
    assert!(screen.contains("wide: 1 more column →"), "{screen}");
    for _ in 0..3 {
        key(&mut app, KeyCode::Right);
    }
    let scrolled = render(&mut app, 80, 24);
    assert!(scrolled.contains("AwaitingApproval · 13s ago"), "→ shows the batch column whole: {scrolled}");
    assert!(scrolled.contains("wide: ← 3 more columns"), "{scrolled}");
}

/// Issue 31: at 120 columns the rollouts' VERSION and ACTION were cut (`hr-por…`, `Unchan…`)
/// while the message took the room, the key hints left out `w wide`, and the help's long lines
/// ran past its border. Now only the message gives way; the hints and the help fit.
#[test]
fn nothing_but_a_long_message_is_cut_at_120_columns() {
    let mut app = sample_app();
    keys(&mut app, ":rollouts\n");
    let screen = render(&mut app, 120, 14);
    insta::assert_snapshot!("view_rollouts_120x14", screen);
    for whole in ["hr-portal-2-3-0 ", "travel-1-2-0 ", "bookshop-1-10-0 ", "Unchanged", "VCAP_SERVICES"] {
        assert!(screen.contains(whole), "{whole} whole: {screen}");
    }
    assert_cells_whole_or_cut_with_an_ellipsis(&mut app, 120, 14, ":rollouts");
    let footer = screen.lines().last().unwrap_or_default();
    assert!(footer.contains("x cancel  d detail  y yaml  w wide  q quit"), "every key hint: {footer}");

    key(&mut app, KeyCode::Char('?'));
    let width = capdeck::console::overlay::popup_text_width(120);
    for line in capdeck::console::queries::help_lines(&app, width) {
        assert!(line.width() <= width, "a help line wider than the pane ({width}): {line}");
    }
    let help = render(&mut app, 120, 48);
    // The longest: why undo is disabled, which ran past the border.
    assert!(help.contains("can be undone)"), "{help}");
    key(&mut app, KeyCode::Char('G'));
    let end = render(&mut app, 120, 48);
    assert!(end.contains("on its batch)"), "the :fleet line's end: {end}");
}

/// A Freeze in force, in `namespace`, by bob until `until`.
fn freeze(namespace: &str, name: &str, until: &str, spec: serde_json::Value) -> std::sync::Arc<capdeck::api::Freeze> {
    let mut object = serde_json::json!({"apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"scope": "Namespace", "until": until,
                 "frozen": {"by": "bob", "at": "2026-11-20T08:00:00Z", "reason": "release weekend"}}});
    if let (Some(target), Some(extra)) = (object["spec"].as_object_mut(), spec.as_object()) {
        target.extend(extra.clone());
    }
    std::sync::Arc::new(serde_json::from_value(object).expect("a freeze"))
}

/// While a freeze holds what is in view, the header says so: the most relevant freeze (the
/// cluster's, honoured in the engine's Lease namespace), cut with `…` where it does not fit, and
/// how many more there are, never cut. The table gives up a row for it; the selection stays in
/// view. A tiny terminal still draws.
#[test]
fn a_freeze_in_view_shows_a_banner_under_the_header() {
    let mut app = sample_app();
    app.lease_namespace = Some("capdeck-system".into());
    let without = render(&mut app, 160, 32);
    std::sync::Arc::make_mut(&mut app.snapshot).freezes = vec![
        freeze("cap-shop", "namespace", "2026-11-21T18:00:00Z", serde_json::json!({})),
        freeze("capdeck-system", "cluster", "2026-11-20T18:00:00Z", serde_json::json!({"scope": "Cluster"})),
        // Lifted: a record, not a freeze in force.
        freeze(
            "cap-hr",
            "namespace",
            "2026-11-22T00:00:00Z",
            serde_json::json!({"lifted": {"by": "carol", "at": "2026-11-20T08:30:00Z"}}),
        ),
    ];
    let screen = render(&mut app, 160, 32);
    // TestBackend's text quotes each line.
    let lines: Vec<&str> = screen.lines().map(|line| line.trim_matches('"').trim_end()).collect();
    assert_eq!(lines[1], " ❄ cluster frozen until 2026-11-20T18:00:00Z by bob: release weekend (+1 more)", "{screen}");
    assert!(lines[0].contains("ctx prod-eu10"), "the header stays first: {screen}");
    let tabs = without.lines().nth(1).unwrap_or_default().trim_matches('"').trim_end();
    assert_eq!(lines[2], tabs, "the tab bar moves down one row");

    let narrow = render(&mut app, 80, 24);
    insta::assert_snapshot!("freeze_banner_80x24", narrow);
    assert_eq!(narrow.lines().nth(1).unwrap_or_default().trim_matches('"').trim_end(), lines[1], "whole at 80");
    assert!(narrow.lines().last().is_some_and(|footer| footer.contains("q quit")), "{narrow}");
    let cut = render(&mut app, 60, 15);
    let banner = cut.lines().nth(1).unwrap_or_default().trim_matches('"').trim_end();
    assert_eq!(banner, " ❄ cluster frozen until 2026-11-20T18:00:00Z by b… (+1 more)", "the count is never cut");

    // The last row selected: with the banner's row gone, it is still on screen.
    keys(&mut app, ":tenants\nG");
    let tenants = render(&mut app, 80, 24);
    let last = app.visible.last().map(|&index| app.snapshot.tenants[index].name.clone()).unwrap_or_default();
    assert!(tenants.contains(&last), "the selected {last} is shown under the banner: {tenants}");

    // Outside the engine's Lease namespace a cluster freeze holds nothing: the namespace's shows.
    app.lease_namespace = Some("elsewhere".into());
    let banner = render(&mut app, 160, 32).lines().nth(1).unwrap_or_default().trim_matches('"').trim_end().to_string();
    assert_eq!(banner, " ❄ namespace cap-shop frozen until 2026-11-21T18:00:00Z by bob: release weekend");

    insta::assert_snapshot!("freeze_banner_20x5", render(&mut app, 20, 5));
    for width in 0..=30 {
        for height in 0..=8 {
            draw_on(&mut app, width, height);
        }
    }
}

/// The sample's bookshop: its open batch waits for its change window (Friday 09:00 UTC, outside
/// `Mon-Fri 22:00-05:00 Europe/Berlin`), the windows set on the application.
fn waiting_bookshop(windows: &str) -> SampleObjects {
    use capdeck::api::rotation_batch::{ReadyReason, RotationBatchStatus};
    let mut objects = SampleObjects::demo().expect("sample");
    let app = objects.apps.iter_mut().find(|app| app.metadata.name.as_deref() == Some("bookshop")).expect("bookshop");
    std::sync::Arc::make_mut(app)
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("capdeck.dev/change-windows".into(), windows.into());
    let batch = objects.batch_mut("bookshop-4hx2p").expect("bookshop");
    let at = |text: &str| k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(text.parse().expect("time"));
    batch.spec.window_end = at("2026-11-20T08:59:00Z");
    let status = batch.status.get_or_insert_with(RotationBatchStatus::default);
    status.phase = capdeck::api::BatchPhase::Waiting;
    status.waiting_until = Some(at("2026-11-20T21:00:00Z"));
    if let Some(ready) = status.conditions.iter_mut().find(|c| c.type_ == "Ready") {
        ready.reason = ReadyReason::OutsideChangeWindow.as_str().into();
        ready.message = "outside the change windows; next opening 2026-11-20T21:00:00Z".into();
    }
    objects
}

/// A batch waiting for its window: `Waiting` in its colour, and when it goes on, in the batches
/// and applications views.
#[test]
fn a_waiting_batch_says_when_it_goes_on() {
    let mut app = sample::app(waiting_bookshop("Mon-Fri 22:00-05:00 Europe/Berlin").snapshot());
    keys(&mut app, ":batches\n");
    let terminal = draw_on(&mut app, 160, 32);
    let buffer = terminal.backend().buffer();
    let (x, y) = (0..buffer.area.height)
        .find_map(|y| {
            let line: String = (0..buffer.area.width).map(|x| buffer[(x, y)].symbol()).collect();
            line.contains("bookshop-4hx2p").then(|| (line.find("Waiting").expect("its phase") as u16, y))
        })
        .expect("the waiting batch");
    assert_eq!(buffer[(x, y)].fg, app.theme.info().fg.unwrap_or_default(), "Waiting has its own colour");
    let screen = render(&mut app, 160, 32);
    let row = screen.lines().find(|line| line.contains("bookshop-4hx2p")).unwrap_or_default();
    assert!(row.contains("opens in 12h"), "{row}");
    keys(&mut app, ":apps\n");
    let screen = render(&mut app, 160, 32);
    let row = screen.lines().find(|line| line.contains(" bookshop ")).unwrap_or_default();
    assert!(row.contains("Waiting · outside window · opens in 12h"), "{row}");
}

/// The batch detail names the application's change windows, where they come from and their next
/// three openings, and the freeze that holds it; with none set at any level, any hour; with
/// windows that cannot be read, the message that names the annotation, the object and the fix.
#[test]
fn the_batch_detail_shows_its_windows_openings_and_freeze() {
    use capdeck::leadership::{EngineScope, LeaderView, PublishedSettings};
    let windows = "Mon-Fri 22:00-05:00 Europe/Berlin; Sat-Sun 00:00-24:00 Europe/Berlin";
    let mut app = sample::app(waiting_bookshop(windows).snapshot());
    app.lease_namespace = Some("capdeck-system".into());
    std::sync::Arc::make_mut(&mut app.snapshot).freezes = vec![freeze(
        "cap-shop",
        "app-bookshop",
        "2026-11-20T18:00:00Z",
        serde_json::json!({"scope": "Application", "application": "bookshop"}),
    )];
    select_batch(&mut app, "bookshop-4hx2p");
    key(&mut app, KeyCode::Char('d'));
    let screen = render(&mut app, 140, 44);
    insta::assert_snapshot!("detail_batch_windows", screen);
    for line in [
        "state           Waiting · outside window, opens in 12h",
        "phase           Waiting (OutsideChangeWindow)",
        "window          1m ago",
        "change windows  Mon-Fri 22:00-05:00 Europe/Berlin; Sat-Sun 00:00-24:00 Europe/Berlin",
        "  from          annotation capdeck.dev/change-windows of CAPApplication cap-shop/bookshop",
        // Friday evening in Berlin runs on through the weekend: one opening.
        "next openings   2026-11-20T21:00:00Z → 2026-11-22T23:00:00Z (opens in 12h)",
        "                2026-11-23T21:00:00Z → 2026-11-24T04:00:00Z (opens in 3d12h)",
        "                2026-11-24T21:00:00Z → 2026-11-25T04:00:00Z (opens in 4d12h)",
        "freeze          CAPApplication cap-shop/bookshop frozen until 2026-11-20T18:00:00Z by bob: release weekend (ends in 9h)",
    ] {
        assert!(screen.contains(line), "{line:?} in\n{screen}");
    }

    // hr-portal sets none, nor does its namespace: with no leader known the cluster level is unknown…
    key(&mut app, KeyCode::Esc);
    select_batch(&mut app, "hr-portal-c9dsg");
    key(&mut app, KeyCode::Char('d'));
    let screen = render(&mut app, 140, 44);
    assert!(screen.contains("change windows  none on the application or its Namespace; the engine's --change-windows unknown (no leader said)"), "{screen}");
    assert!(screen.contains("freeze          none"), "{screen}");
    // …and with a leader that published none, any hour.
    key(&mut app, KeyCode::Esc);
    app.leader = Some(LeaderView::Leads {
        lease: "capdeck-system/capdeck-engine".into(),
        identity: "daemon-1".into(),
        renewed_ago: 1,
        scope: EngineScope::All,
        settings: Some(PublishedSettings {
            rollout_delay_seconds: 30,
            expected_rollout_seconds: 900,
            approval: "auto".into(),
            max_parallel_rollouts: 5,
            min_rollout_interval_seconds: 600,
            change_windows: None,
            on_deadline: None,
        }),
    });
    key(&mut app, KeyCode::Char('d'));
    assert!(render(&mut app, 140, 44).contains("change windows  none: any hour"));

    let mut app = sample::app(waiting_bookshop("Mon 25:00-26:00 UTC").snapshot());
    select_batch(&mut app, "bookshop-4hx2p");
    key(&mut app, KeyCode::Char('d'));
    let screen = render(&mut app, 200, 44);
    assert!(
        screen.contains(
            "change windows  unreadable: the annotation capdeck.dev/change-windows of CAPApplication cap-shop/bookshop \
             cannot be read: range 1"
        ),
        "{screen}"
    );
}

/// `Z` on an application: the freeze dialog with its length (`4h`) and the reason; it draws at
/// every size down to nothing.
#[test]
fn freeze_dialog() {
    let mut app = sample_app();
    keys(&mut app, "/hr-portal\n");
    key(&mut app, KeyCode::Char('Z'));
    keys(&mut app, "CAB freeze over the release");
    let screen = render(&mut app, 120, 24);
    insta::assert_snapshot!("dialog_freeze", screen);
    assert!(screen.contains("Freeze for: 4h"), "{screen}");
    assert!(screen.contains("old credentials revocable in 3h59m"), "freezing past it escalates: {screen}");
    for width in 0..=44 {
        for height in 0..=14 {
            draw_on(&mut app, width, height);
        }
    }
}

/// A console observing a daemon, scoped to one namespace: at 80 and 120 columns the header
/// shortens the scope, the user and the leader, it never drops them (at 160 they are whole).
#[test]
fn the_header_shortens_and_never_drops_scope_user_and_leader() {
    use capdeck::leadership::{EngineScope, LeaderView};
    let mut app = sample_app();
    app.role = capdeck::engine::Role::Observer;
    app.session.scope = "namespace cap-shop".into();
    app.session.user = Some("alice@example.com".into());
    app.leader = Some(LeaderView::Leads {
        lease: "capdeck-system/capdeck-engine".into(),
        identity: "capdeck-7d9c6b5f4-x2k4p".into(),
        renewed_ago: 3,
        scope: EngineScope::All,
        settings: None,
    });
    for width in [80, 120] {
        let screen = render(&mut app, width, 12);
        let header = screen.lines().next().unwrap_or_default().to_string();
        for needed in ["prod-eu10", "cap-shop", "Observer", "alice@examp", "leader capdeck-7", "●"] {
            assert!(header.contains(needed), "{width} columns: {needed:?} is missing from {header:?}");
        }
    }
    let wide = render(&mut app, 200, 12);
    let header = wide.lines().next().unwrap_or_default().to_string();
    assert!(
        header.contains("namespace cap-shop")
            && header.contains("user alice@example.com")
            && header.contains("(leader: capdeck-7d9c6b5f4-x2k4p in capdeck-system, renewed 3s ago)"),
        "{header}"
    );
}
