//! Many clusters: the fleet across kube contexts (one of them unreachable, one that never
//! answers), and notifications from the leading engine to receivers on loopback — one that
//! answers 500 and then 200, one that always fails, one that hangs — across a leader change.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capdeck::actions::{BatchAction, act};
use capdeck::api::BatchPhase;
use capdeck::engine::Role;
use capdeck::engine::config::{NotifyConfig, NotifyTarget, RetryPolicy};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use serde_json::{Value, json};

use crate::common::console::Console;
use crate::common::fixtures::AppOptions;
use crate::common::story_world::StoryWorld as _;
use crate::setup::{Engine, EngineExt as _, engine_config, load_current};
use crate::world::{Backend, World, eventually};

const LONG: Duration = Duration::from_secs(60);

/// A TCP port nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

/// A server that accepts connections and never answers (held until the test ends).
async fn silent_server() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (port, task)
}

/// The world's kubeconfig with more contexts: each (name, server) shares the world's user and
/// certificate authority. The world's own context stays current and is named `here`.
fn kubeconfig_with(world: &World, extra: &[(&str, String)], sandboxes: &[(&str, &str)], dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(&world.admin_kubeconfig).expect("kubeconfig");
    let mut config: Value = serde_saphyr::from_str(&text).expect("kubeconfig parses");
    let current = config["current-context"].as_str().expect("current context").to_string();
    let context = config["contexts"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["name"] == current.as_str()))
        .cloned()
        .expect("the current context");
    let cluster_name = context["context"]["cluster"].as_str().expect("cluster").to_string();
    let cluster = config["clusters"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["name"] == cluster_name.as_str()))
        .cloned()
        .expect("the cluster");
    let mut contexts = vec![json!({"name": "here", "context": context["context"].clone()})];
    let mut clusters = config["clusters"].as_array().cloned().unwrap_or_default();
    for (name, server) in extra {
        let mut entry = cluster.clone();
        entry["name"] = json!(name);
        entry["cluster"]["server"] = json!(server);
        clusters.push(entry);
        let mut named = context["context"].clone();
        named["cluster"] = json!(name);
        contexts.push(json!({"name": name, "context": named}));
    }
    // More control planes: sandboxes over HTTP, each with a user of its own.
    let mut users = config["users"].as_array().cloned().unwrap_or_default();
    for (name, url) in sandboxes {
        clusters.push(json!({"name": name, "cluster": {"server": url}}));
        contexts.push(json!({"name": name, "context": {"cluster": name, "user": format!("{name}-admin")}}));
        users.push(json!({"name": format!("{name}-admin"), "user": {"token": "capdeck-sandbox"}}));
    }
    config["users"] = json!(users);
    config["clusters"] = json!(clusters);
    config["contexts"] = json!(contexts);
    config["current-context"] = json!("here");
    let path = dir.join("fleet.kubeconfig");
    std::fs::write(&path, serde_json::to_vec(&config).expect("json")).expect("write kubeconfig");
    path
}

/// The world's API server URL, as its kubeconfig has it.
fn server(world: &World) -> String {
    let text = std::fs::read_to_string(&world.admin_kubeconfig).expect("kubeconfig");
    let config: Value = serde_saphyr::from_str(&text).expect("kubeconfig parses");
    config["clusters"][0]["cluster"]["server"].as_str().expect("server").to_string()
}

fn scheme(world: &World) -> &'static str {
    let text = std::fs::read_to_string(&world.admin_kubeconfig).unwrap_or_default();
    if text.contains("https://") { "https" } else { "http" }
}

/// `capdeck fleet` over seven contexts: the world (a batch awaiting approval, its engine leading)
/// under two names, a second control plane (a demo sandbox, no engine: its unsafe credentials), a
/// third that refuses the RotationBatches (forbidden), a closed port and two servers that never
/// answer. Every context is a row, those that cannot be read say why, and the contexts are read
/// at once (the two silent ones do not take twice the timeout). The console's fleet view at 80×24
/// shows the same, and Enter on the world's other name switches context onto its batch.
pub async fn fleet_shows_every_context_and_says_why_one_is_unreachable(backend: Backend) {
    let world = World::new(backend, "fleet").await;
    load_current(&world, &AppOptions { manual: true, ..AppOptions::default() }).await;
    let engine = Engine::on(&world, engine_config(&world, "engine-a")).await;
    engine.wait_for_role_within(Role::Leader, LONG).await;
    world.rotate_secret("bookshop-uaa").await;
    let batch = world.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await;

    // The second control plane: the demo's applications, no capdeck engine running there.
    let second = capdeck::sandbox::Sandbox::default();
    second.load_demo().expect("demo seed");
    let second_served = second.serve("127.0.0.1:0".parse().expect("address")).await.expect("serve");
    // A third that refuses this user the RotationBatches.
    let locked = capdeck::sandbox::Sandbox::default();
    locked.install_crds();
    locked.deny("list:rotationbatches".parse().expect("deny rule"));
    let locked_served = locked.serve("127.0.0.1:0".parse().expect("address")).await.expect("serve");
    let (silent, silent_task) = silent_server().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let down = format!("{}://127.0.0.1:{}", scheme(&world), closed_port());
    let hangs = format!("{}://127.0.0.1:{silent}", scheme(&world));
    // `there` is the world's server under another name: Enter on its row switches contexts.
    let there = server(&world);
    let kubeconfig = kubeconfig_with(
        &world,
        &[("down", down.clone()), ("hangs", hangs.clone()), ("hangs-too", hangs), ("there", there)],
        &[("second", &second_served.url), ("locked", &locked_served.url)],
        dir.path(),
    );
    let started = std::time::Instant::now();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_capdeck"))
        .args(["fleet", "--timeout", "6s", "-o", "json", "--lease-namespace", &world.ns])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .await
        .expect("capdeck fleet runs");
    let elapsed = started.elapsed();
    eprintln!("capdeck fleet over 7 contexts (2 silent, 6s timeout) on {}: {elapsed:?}", backend.label());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "contexts could not be read: exit 1\n{stdout}\n{stderr}");
    assert!(stderr.contains("4 of 7 context(s) could not be read: down, hangs, hangs-too, locked"), "{stderr}");
    let document: Value = serde_json::from_str(&stdout).expect("json");
    let all: Vec<Value> = document["fleet"].as_array().cloned().expect("rows");
    let of = |context: &str| -> Vec<&Value> { all.iter().filter(|row| row["context"] == context).collect() };
    let contexts: std::collections::BTreeSet<&str> = all.iter().filter_map(|row| row["context"].as_str()).collect();
    assert_eq!(
        contexts.into_iter().collect::<Vec<_>>(),
        ["down", "hangs", "hangs-too", "here", "locked", "second", "there"]
    );
    // The world's namespace (the shared kube-apiserver has other stories' namespaces too).
    let in_world = |context: &str| -> Value {
        of(context).into_iter().find(|row| row["namespace"] == world.ns.as_str()).cloned().unwrap_or_default()
    };
    let here = in_world("here");
    assert_eq!(here["state"], "open", "{stdout}");
    assert!(
        here["leader"].as_str().is_some_and(|leader| leader.starts_with("engine-a (")),
        "who leads and where: {here}"
    );
    assert_eq!(here["batches"][0]["name"].as_str(), Some(batch.name_any().as_str()), "{here}");
    assert_eq!(here["batches"][0]["phase"], "AwaitingApproval");
    assert_eq!(in_world("there")["batches"], here["batches"], "one server, two names");
    // The second control plane: the demo's Secrets with credentials at risk, and no engine.
    let second_rows = of("second");
    assert!(!second_rows.is_empty() && second_rows.iter().all(|row| row["leader"] == "no leader"), "{stdout}");
    let second_open: Vec<(&str, &str, &str)> = second_rows
        .iter()
        .flat_map(|row| {
            row["credentials"].as_array().into_iter().flatten().map(|c| {
                (
                    row["namespace"].as_str().unwrap_or(""),
                    c["secret"].as_str().unwrap_or(""),
                    c["verdict"].as_str().unwrap_or(""),
                )
            })
        })
        .collect();
    // The demo's bookshop binding keeps old credentials shorter than a 1h window and a 15m rollout,
    // but its Deployments already run the current credentials: nothing at risk (the verdict comes
    // from what the Pods run, as `capdeck credentials` says).
    assert_eq!(second_open, Vec::<(&str, &str, &str)>::new(), "{stdout}");
    let why = |context: &str| of(context).first().and_then(|row| row["why"].as_str()).unwrap_or_default().to_string();
    let state = |context: &str| of(context).first().map(|row| row["state"].clone()).unwrap_or_default();
    assert_eq!((of("down").len(), state("down")), (1, json!("unreachable")));
    assert_eq!(
        why("down"),
        format!("cannot connect to {down}: connection refused (is the cluster up and the kubeconfig right?)")
    );
    assert_eq!(state("hangs"), "unreachable");
    assert!(why("hangs").starts_with("no answer within 6s"), "{}", why("hangs"));
    assert!(why("hangs-too").starts_with("no answer within 6s"), "{}", why("hangs-too"));
    assert_eq!(state("locked"), "forbidden");
    assert!(why("locked").starts_with("cannot list RotationBatches: forbidden:"), "{}", why("locked"));
    // Read one after the other, the two silent contexts alone would take 12 s; read at once,
    // 6 s and the rest (6 s of room for a loaded machine).
    assert!(elapsed < Duration::from_secs(12), "contexts read concurrently: {elapsed:?}");

    let mut console = Console::start_fleet(&kubeconfig, &world.ns, (80, 24), capdeck::fleet::ContextList::All).await;
    let screen = console
        .until("the fleet's contexts", |s| {
            s.contains("here")
                && s.contains("second")
                && s.contains("there")
                && s.contains("down")
                && s.contains("hangs-too")
                && s.contains("1 awaiting")
        })
        .await;
    assert!(screen.lines().count() <= 24 && screen.lines().all(|line| line.chars().count() <= 80), "{screen}");
    assert!(screen.contains("unreachable"), "{screen}");
    // The world's row sorts last (contexts in kubeconfig order: here first); select it, Enter.
    // Filter to the other name's row, Enter: the console switches to that context and
    // namespace, on the row's batch.
    console.typed("/there\n");
    console.key(crossterm::event::KeyCode::Enter);
    let focus = format!("batch {}/{}", world.ns, batch.name_any());
    console
        .until(&format!("the batch in its context: {focus}"), |s| {
            // The header names the context whole (`ctx there`) or, short of room, alone.
            (s.contains("ctx there") || s.contains(" there │"))
                && s.contains("Batches [1/1]")
                && s.contains(focus.as_str())
        })
        .await;
    console.quit().await;
    silent_task.abort();
    engine.stop().await;
}

/// What a loopback receiver does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Behaviour {
    /// 200 to every request.
    Accepts,
    /// 500 to the first request, 200 to every later one.
    FailsOnce,
    AlwaysFails,
    /// Reads the request and never answers.
    Hangs,
}

#[derive(Default)]
pub(crate) struct Received {
    /// Bodies answered 2xx.
    pub(crate) accepted: Vec<Value>,
    /// Requests seen (answered or not).
    requests: usize,
}

/// Notifications to one loopback receiver on `port` (from [`receiver`]), as cluster `cluster`.
pub(crate) fn loopback_notify(port: u16, cluster: &str) -> capdeck::engine::config::NotifyConfig {
    capdeck::engine::config::NotifyConfig {
        targets: vec![
            capdeck::engine::config::NotifyTarget::parse(&format!("http://127.0.0.1:{port}/hook")).expect("url"),
        ],
        cluster: cluster.into(),
        ..Default::default()
    }
}

pub(crate) async fn receiver(behaviour: Behaviour) -> (u16, Arc<Mutex<Received>>) {
    use axum::extract::State;
    use axum::http::StatusCode;
    let received = Arc::new(Mutex::new(Received::default()));
    let app = axum::Router::new()
        .route(
            "/hook",
            axum::routing::post(
                move |State(received): State<Arc<Mutex<Received>>>, body: axum::body::Bytes| async move {
                    let first = {
                        let mut r = received.lock().expect("lock");
                        r.requests += 1;
                        r.requests == 1
                    };
                    match behaviour {
                        Behaviour::Hangs => std::future::pending::<StatusCode>().await,
                        Behaviour::AlwaysFails => StatusCode::INTERNAL_SERVER_ERROR,
                        Behaviour::FailsOnce if first => StatusCode::INTERNAL_SERVER_ERROR,
                        Behaviour::FailsOnce | Behaviour::Accepts => {
                            let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                            received.lock().expect("lock").accepted.push(value);
                            StatusCode::OK
                        }
                    }
                },
            ),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, received)
}

pub(crate) fn accepted_events(received: &Mutex<Received>) -> Vec<(String, String)> {
    received
        .lock()
        .expect("lock")
        .accepted
        .iter()
        .map(|body| {
            (
                body["batch"].as_str().unwrap_or_default().to_string(),
                body["event"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Three receivers: one answers 500 then 200 (it gets every notification exactly once), one
/// always answers 500 (counted and recorded as failed, by host), one hangs (the rollout goes on
/// regardless). Engine A announces a batch awaiting approval, stops; engine B leads and announces
/// only what is new: the other application's batch, never the first one again.
pub async fn notifications_reach_a_loopback_receiver_once_across_a_leader_change(backend: Backend) {
    let world = World::new(backend, "notify").await;
    load_current(&world, &AppOptions { manual: true, ..AppOptions::default() }).await;
    load_current(&world, &AppOptions { name: "travel", manual: true, ..AppOptions::default() }).await;
    let workloads = world.workloads();
    let (flaky_port, flaky) = receiver(Behaviour::FailsOnce).await;
    let (failing_port, failing) = receiver(Behaviour::AlwaysFails).await;
    let (hanging_port, hanging) = receiver(Behaviour::Hangs).await;
    let notify = NotifyConfig {
        targets: vec![
            NotifyTarget::parse(&format!("http://127.0.0.1:{flaky_port}/hook?token=t0p")).expect("flaky"),
            // Named: the records, the log and doctor call it that, not by its host.
            NotifyTarget::parse(&format!("failing@http://localhost:{failing_port}/hook")).expect("failing"),
            NotifyTarget::parse(&format!("slack=http://127.0.0.1:{hanging_port}/hook")).expect("hanging"),
        ],
        cluster: "story".into(),
        signing: None,
        // The hanging receiver is still being waited for when the rollout is over.
        retry: RetryPolicy {
            attempts: 3,
            attempt_timeout: Duration::from_secs(120),
            first_backoff: Duration::from_millis(200),
        },
    };
    let config = |identity: &str| {
        let mut config = engine_config(&world, identity);
        config.notify = notify.clone();
        config
    };
    let a = Engine::on(&world, config("engine-a")).await;
    a.wait_for_role_within(Role::Leader, LONG).await;
    world.rotate_secret("bookshop-uaa").await;
    let bookshop = world.wait_phase("bookshop", BatchPhase::AwaitingApproval, LONG).await.name_any();
    eventually("the flaky receiver accepted the approval wait", LONG, || async {
        let events = accepted_events(&flaky);
        if events.is_empty() { Err("nothing yet".to_string()) } else { Ok(()) }
    })
    .await;
    assert_eq!(accepted_events(&flaky), vec![(bookshop.clone(), "AwaitingApproval".to_string())]);
    assert_eq!(flaky.lock().expect("lock").requests, 2, "a 500, then the retry");
    // The receiver that always fails: three tries, then counted, warned and noted on the batch.
    eventually("the failure noted on the batch", LONG, || async {
        let batch = world.batches("bookshop").await.pop();
        let records = batch.and_then(|b| b.status).map(|s| s.notifications).unwrap_or_default();
        match records.as_slice() {
            [record] if record.failed == ["failing"] => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(failing.lock().expect("lock").requests, 3);
    // Counted by receiver, by its name (never its URL, whose query holds a token).
    let metrics = a.metrics_text();
    assert!(metrics.contains("capdeck_notifications_failed_total{receiver=\"failing\"} 1"), "{metrics}");
    let sent: Vec<&str> =
        metrics.lines().filter(|line| line.starts_with("capdeck_notifications_sent_total{")).collect();
    assert!(
        matches!(sent.as_slice(), [line] if line.ends_with(" 1") && line.contains("receiver=\"127.0.0.1#")),
        "{metrics}"
    );
    assert!(!metrics.contains("t0p"), "a receiver's URL reached the metrics: {metrics}");
    // `capdeck doctor` says so, by host; a --notify-secret it is given must be readable.
    let doctor = |extra: &[&str]| {
        let mut args = vec!["doctor", "-n", world.ns.as_str(), "--lease-namespace", world.ns.as_str()];
        args.extend_from_slice(extra);
        let output = crate::setup::capdeck(&world.admin_kubeconfig, &args);
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
    };
    let report = doctor(&[]);
    let line = report.lines().find(|line| line.starts_with("notifications")).unwrap_or_default().to_string();
    assert!(line.contains("warn") && line.contains("1 of 1") && line.contains("did not reach failing"), "{report}");
    let missing = format!("{}/notify:url", world.ns);
    let report = doctor(&["--notify-secret", &missing]);
    let line = report.lines().find(|line| line.starts_with("notifications")).unwrap_or_default().to_string();
    assert!(line.contains("FAIL") && line.contains("does not exist"), "{report}");
    world
        .apply_objects(vec![json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "notify", "namespace": world.ns},
            "stringData": {"url": format!("http://127.0.0.1:{flaky_port}/hook?token=t0p")}})])
        .await;
    let report = doctor(&["--notify-secret", &missing]);
    let line = report.lines().find(|line| line.starts_with("notifications")).unwrap_or_default().to_string();
    assert!(line.contains("1 receiver(s) given here readable"), "{report}");
    assert!(!report.contains("t0p"), "the URL is never printed: {report}");

    // A hanging receiver does not hold the engine up: approve, and the batch rolls to the end
    // while the hanging receiver still holds the one request it got.
    act(&world.client, &world.ns, &bookshop, BatchAction::Approve, "alice", Some("CHG-7"), Timestamp::now())
        .await
        .expect("approve");
    world.wait_phase("bookshop", BatchPhase::Succeeded, LONG).await;
    assert_eq!(hanging.lock().expect("lock").requests, 1, "still waiting for its first answer");

    // Leader change: A stops, B leads. B announces the new batch, and not the first one again.
    a.stop().await;
    let b = Engine::on(&world, config("engine-b")).await;
    b.wait_for_role_within(Role::Leader, LONG).await;
    world.rotate_secret("travel-uaa").await;
    let travel = world.wait_phase("travel", BatchPhase::AwaitingApproval, LONG).await.name_any();
    eventually("the second batch announced", LONG, || async {
        if accepted_events(&flaky).len() >= 2 { Ok(()) } else { Err(format!("{:?}", accepted_events(&flaky))) }
    })
    .await;
    assert_eq!(
        accepted_events(&flaky),
        vec![(bookshop.clone(), "AwaitingApproval".to_string()), (travel.clone(), "AwaitingApproval".to_string())],
        "each transition once, across the leader change"
    );
    let travel_batch = world.batches("travel").await.pop().expect("travel batch");
    let records = travel_batch.status.map(|s| s.notifications).unwrap_or_default();
    assert_eq!(
        records.iter().map(|r| (r.event.as_str(), r.by.as_str())).collect::<Vec<_>>(),
        [("AwaitingApproval", "engine-b")]
    );
    let body = flaky.lock().expect("lock").accepted[1].clone();
    assert_eq!(body["version"], "capdeck.dev/notification/v1");
    assert_eq!((body["cluster"].as_str(), body["engine"].as_str()), (Some("story"), Some("engine-b")));
    assert!(!body.to_string().contains("first-secret"), "never a credential: {body}");
    b.stop().await;
    workloads.stop().await;
}
