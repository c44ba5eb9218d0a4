//! `capdeck bench engine`: the engine at scale. The sandbox runs in a child process (so this
//! process's RSS is the engine's alone) and the engine talks to it over loopback HTTP.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::reads::ReadCounter;
use super::{SandboxChild, child_rss_mb, peak_rss_mb, round, rss_mb, spawn_sandbox, status_mb, tempfile_dir};
use crate::actions::{BatchAction, act};
use crate::api::{BatchPhase, RotationBatch};
use crate::bench::synthetic::{app_name, binding_name, namespace_of};
use crate::cluster::Scope;
use crate::cluster::stores::Stores;
use crate::engine::Role;
use crate::engine::config::{EngineConfig, EngineMode, LeaseSettings};
use crate::engine::metrics::{Metrics, WriteLabels};
use crate::plan::{CapIndex, PlanAction, Rotated, plan_application};

/// What `capdeck bench engine` measures with.
pub struct EngineBench {
    pub apps: usize,
    /// Deployments per application (each consumes every service).
    pub deployments_per_app: usize,
    /// Services (binding Secrets) per application.
    pub services_per_app: usize,
    /// Secrets nobody references.
    pub unreferenced_secrets: usize,
    /// Binding Secrets to rotate (one per application, first service).
    pub rotate: usize,
    /// Simulated rollout pace, replicas per second.
    pub pace: f64,
    /// How each batch's window ends: forced by a person, or on its own.
    pub windows: WindowEnd,
}

/// How the bench ends each batch's collection window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowEnd {
    /// `capdeck force --approve` on every batch as soon as it exists (a person's action: each
    /// batch carries a `Forced` Event, one write more than the unattended flow).
    Forced,
    /// The window ends on its own after `NATURAL_WINDOW`, nobody acts: the flow the issue's write
    /// budget and `tools/bench-peers` measure.
    Natural,
}

impl WindowEnd {
    fn as_str(self) -> &'static str {
        match self {
            Self::Forced => "forced",
            Self::Natural => "natural",
        }
    }
}

/// The collection window (`--rollout-delay`) when windows end on their own: long enough for the
/// bench to rotate every Secret inside it, short enough not to dominate the run.
const NATURAL_WINDOW: Duration = Duration::from_secs(5);

/// Every write the engine counts in `capdeck_api_writes_total` (verb, resource). Lease renewals
/// are not counted there, nor here.
const WRITES: [(&str, &str); 7] = [
    ("create", "rotationbatches"),
    ("update", "rotationbatches"),
    ("patch", "rotationbatches/status"),
    ("create", "secrets"),
    ("delete", "secrets"),
    ("update", "deployments"),
    ("create", "events"),
];

fn writes(metrics: &Metrics, verb: &str, resource: &str) -> u64 {
    metrics.api_writes.get_or_create(&WriteLabels { verb: verb.into(), resource: resource.into() }).get()
}

fn all_writes(metrics: &Metrics) -> u64 {
    WRITES.iter().map(|(verb, resource)| writes(metrics, verb, resource)).sum()
}

/// Each kind of write, counted now.
fn writes_by_request(metrics: &Metrics) -> Vec<u64> {
    WRITES.iter().map(|(verb, resource)| writes(metrics, verb, resource)).collect()
}

/// `{"patch rotationbatches/status": 4, …}`: what the writes since `before` were, per rotated
/// Deployment (kinds the rotation did not write are left out).
fn per_deployment_by_request(metrics: &Metrics, before: &[u64], rotated: u64) -> serde_json::Map<String, Value> {
    WRITES
        .iter()
        .zip(writes_by_request(metrics).iter().zip(before))
        .filter(|(_, (now, before))| now > before)
        .map(|((verb, resource), (now, before))| (format!("{verb} {resource}"), json!(ratio(now - before, rotated))))
        .collect()
}

#[allow(clippy::cast_precision_loss)]
fn ratio(writes: u64, deployments: u64) -> f64 {
    if deployments > 0 { round(writes as f64 / deployments as f64, 2) } else { 0.0 }
}

fn workload_writes(metrics: &Metrics) -> u64 {
    writes(metrics, "create", "secrets")
        + writes(metrics, "update", "deployments")
        + writes(metrics, "delete", "secrets")
}

async fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) -> anyhow::Result<Duration> {
    let started = Instant::now();
    while !check() {
        if started.elapsed() > limit {
            anyhow::bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(started.elapsed())
}

fn start_sandbox(args: &EngineBench, kubeconfig: &std::path::Path) -> anyhow::Result<(SandboxChild, String)> {
    let synthetic =
        format!("{}:{}:{}:{}", args.apps, args.deployments_per_app, args.services_per_app, args.unreferenced_secrets);
    spawn_sandbox(&["--simulate-workloads", "--pace", &args.pace.to_string(), "--synthetic", &synthetic], kubeconfig)
}

/// (Deployments planned, of which out of date) by the start-up re-check.
fn startup_recheck(stores: &Stores) -> (usize, usize) {
    let index = CapIndex::new(stores.applications.state(), stores.versions.state(), stores.tenants.state());
    let (mut planned_deployments, mut out_of_date) = (0, 0);
    for app in index.applications().iter().filter(|app| app.rollout_opted_in()) {
        let plan = plan_application(app, &Rotated::All, &index, stores);
        planned_deployments += plan.deployments.len();
        out_of_date += plan.deployments.iter().filter(|d| d.action == PlanAction::Restart).count();
    }
    (planned_deployments, out_of_date)
}

/// What rotating and rolling out cost.
struct Rotation {
    /// Deployments the engine restarted.
    deployments: u64,
    workload_writes: u64,
    /// Every write of the engine: the workload's plus its record (batch, status, Events).
    writes: u64,
    by_request: serde_json::Map<String, Value>,
    window_to_last_update_ms: f64,
    rollout_complete_ms: f64,
}

/// Rotate one binding Secret in each of `rotate` applications, end every window now (or let
/// them end on their own), and wait until every batch has rolled out.
async fn rotate_and_roll(
    args: &EngineBench,
    client: &kube::Client,
    stores: &Stores,
    metrics: &Metrics,
    rotate: usize,
) -> anyhow::Result<Rotation> {
    let before_all = all_writes(metrics);
    let before_by_request = writes_by_request(metrics);
    let before_workload = workload_writes(metrics);
    let before_restarted = metrics.deployments_restarted.get();
    rotate_one_binding_each(client, rotate).await?;
    let batch_store = stores.batches.clone();
    // A batch without a status collects: the engine writes none until its window ends. (Natural
    // windows may end while the bench waits: a batch that already went on counts too.)
    // The engine writes at its rate (25 a second by default): a storm of thousands of batches
    // takes minutes to open and to roll, which the limits allow for, twice over.
    let at_rate = |writes: usize| {
        let qps = crate::engine::write_rate::DEFAULT_QPS;
        Duration::from_secs_f64(if qps > 0.0 { 2.0 * writes as f64 / qps } else { 0.0 })
    };
    let opened = Duration::from_secs(120) + at_rate(rotate);
    wait_for("a batch per rotated application", opened, || {
        batch_store.state().iter().filter(|b| !b.is_terminal()).count() >= rotate
    })
    .await?;
    let batches: Vec<std::sync::Arc<RotationBatch>> = batch_store.state();
    let window_end = end_windows(client, args.windows, &batches).await?;
    let expected = rotate * args.deployments_per_app;
    let restarted = metrics.deployments_restarted.clone();
    // Per application: the batch's status writes, and per Deployment its VCAP Secret, the update
    // and the old Secret's deletion.
    let limit = Duration::from_secs(600) + at_rate(rotate * (3 + 3 * args.deployments_per_app));
    wait_for("every rotated Deployment updated", limit, || restarted.get() - before_restarted >= expected as u64)
        .await?;
    let window_to_last_update_ms = window_end.elapsed().as_secs_f64() * 1000.0;
    wait_for("every batch Succeeded", limit, || {
        batch_store.state().iter().filter(|b| b.phase() == BatchPhase::Succeeded).count() >= rotate
    })
    .await?;
    let rollout_complete_ms = window_end.elapsed().as_secs_f64() * 1000.0;
    let deployments = metrics.deployments_restarted.get() - before_restarted;
    Ok(Rotation {
        deployments,
        workload_writes: workload_writes(metrics) - before_workload,
        writes: all_writes(metrics) - before_all,
        by_request: per_deployment_by_request(metrics, &before_by_request, deployments),
        window_to_last_update_ms,
        rollout_complete_ms,
    })
}

/// The engine the bench runs: leading at once, no storm guard, its window as `--windows` says.
fn bench_engine_config(args: &EngineBench, max_parallel_rollouts: usize) -> EngineConfig {
    EngineConfig {
        rollout_delay: match args.windows {
            WindowEnd::Forced => Duration::from_secs(30),
            WindowEnd::Natural => NATURAL_WINDOW,
        },
        max_parallel_rollouts: max_parallel_rollouts.max(1),
        min_rollout_interval: Duration::ZERO,
        mode: EngineMode::Lead,
        lease: LeaseSettings {
            namespace: "default".into(),
            name: "capdeck-bench".into(),
            duration_seconds: 15,
            grace_seconds: 5,
        },
        identity: "bench".into(),
        progress_interval: Duration::from_millis(500),
        ..EngineConfig::default()
    }
}

/// Rotate one binding Secret in each of the first `rotate` applications.
async fn rotate_one_binding_each(client: &kube::Client, rotate: usize) -> anyhow::Result<()> {
    for app in 0..rotate {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace_of(app));
        let credentials = format!(
            r#"{{"clientid":"sb-{}-0","clientsecret":"rotated-{app}","url":"https://svc-0.example.com","tenantmode":"shared"}}"#,
            app_name(app)
        );
        let patch = json!({"stringData": {"credentials": credentials}});
        secrets.patch(&binding_name(app, 0), &PatchParams::default(), &Patch::Merge(patch)).await?;
    }
    Ok(())
}

/// End every batch's window now (forced, approved), or wait for them to end on their own: when
/// the windows ended, which the rollout times count from.
async fn end_windows(
    client: &kube::Client,
    windows: WindowEnd,
    batches: &[std::sync::Arc<RotationBatch>],
) -> anyhow::Result<Instant> {
    let window_end = match windows {
        WindowEnd::Forced => Instant::now(),
        // Timed from the last window's end.
        WindowEnd::Natural => {
            let last = batches.iter().map(|b| b.spec.window_end.0).max();
            let left = last.map_or(Duration::ZERO, |last| {
                Duration::try_from(last.duration_since(k8s_openapi::jiff::Timestamp::now())).unwrap_or(Duration::ZERO)
            });
            Instant::now() + left
        }
    };
    for batch in batches.iter().filter(|_| windows == WindowEnd::Forced) {
        act(
            client,
            &batch.namespace().unwrap_or_default(),
            &batch.name_any(),
            BatchAction::Force { approve: true },
            "bench",
            None,
            k8s_openapi::jiff::Timestamp::now(),
        )
        .await
        .map_err(|error| anyhow::anyhow!("forcing {}: {error}", batch.name_any()))?;
    }
    Ok(window_end)
}

/// This process's resident memory (MiB): all of it, the program's own pages (text mapped from the
/// file), and the anonymous rest (the heap with the allocator's slack, the threads' stacks).
fn memory_now() -> (f64, f64, f64) {
    let field = |name: &str| status_mb(name).unwrap_or(0.0);
    (rss_mb().unwrap_or(0.0), field("RssFile"), field("RssAnon"))
}

fn check(args: &EngineBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.apps > 0 && args.deployments_per_app > 0 && args.services_per_app > 0,
        "--apps, --deployments-per-app and --services-per-app must be at least 1"
    );
    anyhow::ensure!(args.pace.is_finite() && args.pace > 0.0, "--pace must be positive");
    Ok(())
}

pub async fn run(args: &EngineBench, max_parallel_rollouts: usize) -> anyhow::Result<Value> {
    check(args)?;
    let rotate = args.rotate.min(args.apps);
    let dir = tempfile_dir()?;
    let kubeconfig = dir.join("kubeconfig");
    let seeding = Instant::now();
    let (child, url) = start_sandbox(args, &kubeconfig)?;
    let seed_ms = seeding.elapsed().as_secs_f64() * 1000.0;
    let mut config = kube::Config::new(url.parse()?);
    config.default_namespace = "default".into();
    // Every read counted: what syncing the stores costs the API server (requests and bytes).
    let reads = ReadCounter::default();
    let client = reads.client(config)?;
    let rss_start = rss_mb().unwrap_or(0.0);

    let cancel = CancellationToken::new();
    let metrics = Metrics::new();
    let started = Instant::now();
    let (stores, tasks) = Stores::start(&client, Scope::All, cancel.clone());
    let engine_config = bench_engine_config(args, max_parallel_rollouts);
    let engine_config_rate = engine_config.write_rate;
    let handle = crate::engine::spawn(client.clone(), stores.clone(), engine_config, metrics.clone(), cancel.clone());
    tokio::time::timeout(Duration::from_secs(600), stores.wait_ready())
        .await
        .map_err(|_| anyhow::anyhow!("stores did not sync in 10 minutes"))?;
    let sync_ms = started.elapsed().as_secs_f64() * 1000.0;
    let sync_reads = reads.since(&Default::default());

    // The start-up re-check, timed as the engine does it on the synced stores: application by
    // application, so no more than one application's payloads are held at once (a whole plan
    // of 5,000 Deployments would put the bench's copy into the engine's RSS).
    let planned = Instant::now();
    let (planned_deployments, out_of_date) = startup_recheck(&stores);
    let plan_ms = planned.elapsed().as_secs_f64() * 1000.0;

    let role = handle.role.clone();
    wait_for("the engine to lead", Duration::from_secs(60), || *role.borrow() == Role::Leader).await?;
    tokio::time::sleep(Duration::from_secs(3)).await; // the engine's own start-up pass settles
    let startup_writes = workload_writes(&metrics) + writes(&metrics, "create", "rotationbatches");
    let (rss_synced, rss_file, rss_anon) = memory_now();
    let pass_cpu = super::pass_cpu::per_touched_pass(&client, 40, || all_writes(&metrics)).await;

    // Rotate one binding Secret in each of `rotate` applications, then end every window now (or
    // let the windows end on their own).
    let rotation = rotate_and_roll(args, &client, &stores, &metrics, rotate).await?;
    let sandbox_rss = child_rss_mb(child.0.id()).unwrap_or(0.0);

    cancel.cancel();
    handle.join().await;
    for task in tasks.handles {
        let _ = task.await;
    }
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);

    Ok(json!({
        "apps": args.apps,
        "deployments_per_app": args.deployments_per_app,
        "services_per_app": args.services_per_app,
        "unreferenced_secrets": args.unreferenced_secrets,
        "max_parallel_rollouts": max_parallel_rollouts,
        "pace_replicas_per_second": args.pace,
        "seed_ms": round(seed_ms, 0),
        "sync_ms": round(sync_ms, 1),
        // Every request (and response byte) until the stores were ready: the lists, the first
        // watch requests, the reads of referenced Secrets.
        "sync_reads": sync_reads,
        "plan_ms": round(plan_ms, 1),
        "planned_deployments": planned_deployments,
        "startup_out_of_date": out_of_date,
        "startup_writes": startup_writes,
        "pass_cpu": pass_cpu,
        "windows": args.windows.as_str(),
        "rotated_secrets": rotate,
        "rotated_deployments": rotation.deployments,
        "rotation_writes": rotation.writes,
        "rotation_workload_writes": rotation.workload_writes,
        // The workload's own writes (VCAP Secret created, Deployment updated, old Secret deleted).
        "writes_per_deployment": ratio(rotation.workload_writes, rotation.deployments),
        // Every write of the engine: the workload's plus its record (batch, status, Events).
        "engine_writes_per_deployment": ratio(rotation.writes, rotation.deployments),
        "engine_writes_per_deployment_by_request": rotation.by_request,
        "write_rate": {"qps": engine_config_rate.0, "burst": engine_config_rate.1,
                       "throttled_seconds": round(metrics.write_throttled_seconds.get(), 2)},
        "window_to_last_update_ms": round(rotation.window_to_last_update_ms, 1),
        "rollout_complete_ms": round(rotation.rollout_complete_ms, 1),
        "rss_mb": round(rss_mb().unwrap_or(0.0), 1),
        "rss_mb_synced": round(rss_synced, 1),
        "rss_file_mb_synced": round(rss_file, 1),
        "rss_anon_mb_synced": round(rss_anon, 1),
        "rss_mb_before_sync": round(rss_start, 1),
        "rss_peak_mb": round(peak_rss_mb().unwrap_or(0.0), 1),
        "sandbox_rss_mb": round(sandbox_rss, 1),
    }))
}
