//! `capdeck bench console`: how fast the console draws and reacts, and what it costs at rest.
//!
//! 1. In process (measured second), on a 200×60 `TestBackend`: the sample data (demo seed + batches) plus
//!    `--tenants` more tenants, an application with a version per 100 of them and a tenant
//!    operation per 10. `snapshot_ms` (rows from objects, done on every cluster change),
//!    `first_frame_ms` (snapshot + the first draw), `frame_ms_p50/p99` (drawing the tenants view
//!    while scrolling through it), `update_ms_p99` (handling keys: moving, paging, filtering as
//!    you type, new data arriving).
//! 2. Live (measured first), for `--idle-seconds`: a sandbox child process holding the demo seed plus the same
//!    tenants, and the whole console runtime (stores, attached engine, 1 s tick) in this process
//!    over HTTP. `first_data_frame_ms` (start → first frame with the synced cluster), then
//!    `idle_cpu_percent` and `idle_frames_per_second` with nothing changing, and `rss_mb`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::{cpu_time, percentile_ms, round, rss_mb, spawn_sandbox, tempfile_dir};
use crate::api::CAPTenant;
use crate::cluster::ClusterTarget;
use crate::console::app::{App, Session};
use crate::console::keymap::Keymap;
use crate::console::runtime::{Options, run_console};
use crate::console::theme::Theme;
use crate::console::update::{Msg, update};
use crate::demo::sample::{self, SampleObjects};
use crate::engine::config::{EngineConfig, EngineMode, LeaseSettings};

/// What `capdeck bench console` measures with.
pub struct ConsoleBench {
    /// Tenants added to the demo data.
    pub tenants: usize,
    /// How long to measure the live console at rest (0 skips the live part).
    pub idle_seconds: u64,
}

const WIDTH: u16 = 200;
const HEIGHT: u16 = 60;

fn ms(duration: Duration) -> f64 {
    round(duration.as_secs_f64() * 1000.0, 3)
}

fn key(code: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub async fn run(args: &ConsoleBench) -> anyhow::Result<Value> {
    let mut report = serde_json::Map::new();
    report.insert("tenants".into(), json!(args.tenants));
    // Live first, so its rss_mb is not inflated by the in-process part's allocations.
    if args.idle_seconds > 0 {
        live(args, &mut report).await?;
    }
    in_process(args, &mut report)?;
    Ok(Value::Object(report))
}

fn in_process(args: &ConsoleBench, report: &mut serde_json::Map<String, Value>) -> anyhow::Result<()> {
    let mut objects = SampleObjects::demo().map_err(|error| anyhow::anyhow!("sample data: {error}"))?;
    objects.add_proportional(args.tenants);

    let started = Instant::now();
    let snapshot = objects.snapshot();
    let snapshot_time = started.elapsed();
    let mut app = sample::app(snapshot);
    update(&mut app, Msg::Resize { width: WIDTH, height: HEIGHT });
    let mut terminal = Terminal::new(TestBackend::new(WIDTH, HEIGHT))?;
    terminal.draw(|frame| crate::console::draw::draw(frame, &app))?;
    let first_frame = started.elapsed();

    let mut snapshots = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        std::hint::black_box(objects.snapshot());
        snapshots.push(started.elapsed());
    }

    // Scroll through the tenants view: a key, then a frame, as the runtime does.
    let mut frames = Vec::new();
    let mut updates = Vec::new();
    let mut step = |app: &mut App, msg: Msg, terminal: &mut Terminal<TestBackend>| -> anyhow::Result<()> {
        let started = Instant::now();
        update(app, msg);
        updates.push(started.elapsed());
        let started = Instant::now();
        terminal.draw(|frame| crate::console::draw::draw(frame, app))?;
        frames.push(started.elapsed());
        Ok(())
    };
    for ch in ":tenants".chars() {
        step(&mut app, key(KeyCode::Char(ch)), &mut terminal)?;
    }
    step(&mut app, key(KeyCode::Enter), &mut terminal)?;
    for round in 0..100 {
        let code = match round % 10 {
            0 => KeyCode::PageDown,
            9 => KeyCode::Char('G'),
            _ => KeyCode::Char('j'),
        };
        step(&mut app, key(code), &mut terminal)?;
    }
    step(&mut app, key(KeyCode::Char('g')), &mut terminal)?;
    // Filtering as you type re-filters every row on each key.
    for ch in "/bulk-01".chars() {
        step(&mut app, key(KeyCode::Char(ch)), &mut terminal)?;
    }
    step(&mut app, key(KeyCode::Esc), &mut terminal)?;
    // New data arriving (the same objects again): the selection is kept by identity.
    let fresh = Arc::new(objects.snapshot());
    for _ in 0..5 {
        step(&mut app, Msg::Snapshot(Arc::clone(&fresh)), &mut terminal)?;
    }
    report.insert("view_rows".into(), json!(app.snapshot.tenants.len()));
    report.insert("snapshot_ms_p50".into(), json!(round(percentile_ms(&mut snapshots, 50.0), 3)));
    report.insert("first_frame_ms".into(), json!(ms(first_frame)));
    report.insert("first_frame_snapshot_ms".into(), json!(ms(snapshot_time)));
    report.insert("frame_ms_p50".into(), json!(round(percentile_ms(&mut frames, 50.0), 3)));
    report.insert("frame_ms_p99".into(), json!(round(percentile_ms(&mut frames, 99.0), 3)));
    report.insert("update_ms_p50".into(), json!(round(percentile_ms(&mut updates, 50.0), 3)));
    report.insert("update_ms_p99".into(), json!(round(percentile_ms(&mut updates, 99.0), 3)));
    Ok(())
}

/// Tenants of the demo's bookshop, created through the API.
async fn create_tenants(client: &kube::Client, count: usize) -> anyhow::Result<()> {
    let tenants: Api<CAPTenant> = Api::namespaced(client.clone(), "cap-shop");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    anyhow::ensure!(namespaces.get_opt("cap-shop").await?.is_some(), "the demo seed has no cap-shop namespace");
    for index in 0..count {
        let tenant: CAPTenant = serde_json::from_value(json!({
            "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPTenant",
            "metadata": {"name": format!("bulk-tenant-{index:05}"), "namespace": "cap-shop"},
            "spec": {"capApplicationInstance": "bookshop", "subDomain": format!("bulk-{index:05}"),
                     "tenantId": format!("bulk-id-{index:05}"), "version": "1.10.0"}
        }))?;
        tenants.create(&PostParams::default(), &tenant).await?;
    }
    Ok(())
}

fn screen(buffer: &Buffer) -> String {
    buffer.content.iter().map(|cell| cell.symbol()).collect()
}

/// `kubectl get captenants -A` once: wall time, and peak RSS when `/usr/bin/time` is there.
fn kubectl_get_tenants(kubeconfig: &std::path::Path) -> Option<(f64, Option<f64>)> {
    let gnu_time = std::path::Path::new("/usr/bin/time");
    let kubectl = ["kubectl", "--kubeconfig", kubeconfig.to_str()?, "get", "captenants", "-A"];
    let mut command = if gnu_time.exists() {
        let mut command = std::process::Command::new(gnu_time);
        command.args(["-f", "capdeck-bench-rss-kb %M"]).args(kubectl);
        command
    } else {
        let mut command = std::process::Command::new(kubectl[0]);
        command.args(&kubectl[1..]);
        command
    };
    let started = Instant::now();
    let output = command.output().ok()?;
    let elapsed = ms(started.elapsed());
    if !output.status.success() {
        return None;
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let rss = stderr
        .lines()
        .find_map(|line| line.strip_prefix("capdeck-bench-rss-kb "))
        .and_then(|kb| kb.trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0);
    Some((elapsed, rss))
}

/// The console the live bench runs, with an engine that leads (its start-up pass included).
fn live_console(cluster: ClusterTarget) -> (App, Options) {
    let session = Session {
        server: String::new(),
        context: String::new(),
        scope: String::new(),
        user: None,
        readonly: false,
        demo_kubeconfig: None,
        log_dir: None,
    };
    let app = App::new(session, Theme::default(), vec!["dark".into()], Keymap::default(), Timestamp::now());
    let engine = EngineConfig {
        mode: EngineMode::Lead,
        lease: LeaseSettings {
            namespace: "capdeck-system".into(),
            name: "capdeck-bench".into(),
            ..LeaseSettings::default()
        },
        identity: "bench-console".into(),
        ..EngineConfig::default()
    };
    let options = Options {
        cluster,
        engine,
        readonly: false,
        user_theme_dir: None,
        started: std::time::Instant::now(),
        contexts: None,
        fleet: crate::fleet::FleetOptions::default(),
    };
    (app, options)
}

/// At rest for `window`: the frames drawn, the CPU used.
async fn measure_idle(
    frames: &mut watch::Receiver<Buffer>,
    window: Duration,
    report: &mut serde_json::Map<String, Value>,
) {
    frames.borrow_and_update();
    let mut frame_count = 0u64;
    let cpu_before = cpu_time().unwrap_or_default();
    let idle_started = Instant::now();
    while let Ok(Ok(())) = tokio::time::timeout(window.saturating_sub(idle_started.elapsed()), frames.changed()).await {
        frames.borrow_and_update();
        frame_count += 1;
    }
    let wall = idle_started.elapsed();
    let cpu = cpu_time().unwrap_or_default().saturating_sub(cpu_before);
    report.insert("idle_seconds".into(), json!(round(wall.as_secs_f64(), 1)));
    report.insert("idle_cpu_percent".into(), json!(round(cpu.as_secs_f64() / wall.as_secs_f64() * 100.0, 3)));
    #[allow(clippy::cast_precision_loss)]
    let per_second = frame_count as f64 / wall.as_secs_f64();
    report.insert("idle_frames_per_second".into(), json!(round(per_second, 2)));
}

async fn live(args: &ConsoleBench, report: &mut serde_json::Map<String, Value>) -> anyhow::Result<()> {
    let dir = tempfile_dir()?;
    let kubeconfig = dir.join("kubeconfig");
    let (_child, _url) = spawn_sandbox(&["--seed", "demo"], &kubeconfig)?;
    let cluster =
        ClusterTarget { kubeconfig: Some(kubeconfig.clone()), all_namespaces: true, ..ClusterTarget::default() };
    let connection = cluster.connect_for(crate::cluster::Requests::Watching).await?;
    create_tenants(&connection.client, args.tenants).await?;

    let (app, options) = live_console(cluster);
    let (keys, inputs) = mpsc::unbounded_channel();
    let (frames_tx, mut frames) = watch::channel(Buffer::default());
    let started = Instant::now();
    let console = tokio::spawn(async move {
        let mut terminal = Terminal::new(TestBackend::new(WIDTH, HEIGHT))?;
        run_console(&mut terminal, app, options, connection, inputs, Some(frames_tx)).await
    });
    // The header says "connected" (not "syncing") once every store has listed.
    let synced = tokio::time::timeout(Duration::from_secs(300), async {
        loop {
            if frames.changed().await.is_err() {
                return false;
            }
            let text = screen(&frames.borrow_and_update());
            if text.contains("● connected") && text.contains("Applications [4/4]") {
                return true;
            }
        }
    })
    .await;
    anyhow::ensure!(matches!(synced, Ok(true)), "the console did not show the synced cluster within 5 minutes");
    report.insert("first_data_frame_ms".into(), json!(ms(started.elapsed())));

    // Let the engine's start-up pass finish, then measure at rest.
    tokio::time::sleep(Duration::from_secs(3)).await;
    measure_idle(&mut frames, Duration::from_secs(args.idle_seconds), report).await;
    report.insert("rss_mb".into(), json!(round(rss_mb().unwrap_or(0.0), 1)));
    // The same cluster through kubectl, for comparison (skipped when kubectl is not installed).
    if let Some((elapsed_ms, rss)) = kubectl_get_tenants(&kubeconfig) {
        report.insert("kubectl_get_captenants_ms".into(), json!(round(elapsed_ms, 1)));
        if let Some(rss) = rss {
            report.insert("kubectl_rss_mb".into(), json!(round(rss, 1)));
        }
    }

    keys.send(key(KeyCode::Char('q'))).map_err(|_| anyhow::anyhow!("the console stopped early"))?;
    tokio::time::timeout(Duration::from_secs(30), console).await???;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
