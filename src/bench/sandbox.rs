//! `capdeck bench sandbox`: request latency and memory of the sandbox API server with N objects,
//! through a real kube client over HTTP.

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

use super::{percentile_ms, round, rss_mb};
use crate::sandbox::{Sandbox, SandboxConfig};

pub struct SandboxBench {
    pub objects: usize,
}

/// Watch delivery: from a patch returning to its MODIFIED event arriving, 100 times.
async fn watch_delivery(secrets: &Api<Secret>, objects: usize) -> anyhow::Result<Vec<Duration>> {
    let current = secrets.list(&ListParams::default().limit(1)).await?.metadata.resource_version.unwrap_or_default();
    let mut stream = secrets.watch(&WatchParams::default().labels("shard=1").timeout(60), &current).await?.boxed();
    let mut delivery = Vec::new();
    for round_index in 0..100usize {
        let name = format!("bench-{:06}", (round_index * 10 + 1) % objects.max(1));
        let begin = Instant::now();
        secrets
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"round": round_index.to_string()}}})),
            )
            .await?;
        loop {
            match tokio::time::timeout(Duration::from_secs(5), stream.next()).await {
                Ok(Some(Ok(WatchEvent::Modified(_)))) => break,
                Ok(Some(Ok(_))) => {}
                _ => anyhow::bail!("watch event did not arrive"),
            }
        }
        delivery.push(begin.elapsed());
    }
    Ok(delivery)
}

/// A full list the way kube's watcher does it: pages of 500. How many items it listed.
async fn list_in_pages(secrets: &Api<Secret>) -> anyhow::Result<usize> {
    let mut listed = 0;
    let mut params = ListParams::default().limit(500);
    loop {
        let page = secrets.list(&params).await?;
        listed += page.items.len();
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(listed),
        }
    }
}

pub async fn run(bench: &SandboxBench) -> anyhow::Result<Value> {
    let rss_start = rss_mb().unwrap_or(0.0);
    let sandbox = Sandbox::new(SandboxConfig { history_limit: 10_000, ..SandboxConfig::default() });
    let served = sandbox.serve("127.0.0.1:0".parse()?).await?;
    let mut config = kube::Config::new(served.url.parse()?);
    config.default_namespace = "default".into();
    let client = kube::Client::try_from(config)?;
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());

    // Writes: N creates, one at a time, each a Secret with a 256-byte value and two labels.
    let payload = "x".repeat(256);
    let mut create = Vec::with_capacity(bench.objects);
    let started = Instant::now();
    for index in 0..bench.objects {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("bench-{index:06}"), "labels": {"app": "bench", "shard": (index % 10).to_string()}},
            "stringData": {"value": payload},
        }))?;
        let begin = Instant::now();
        secrets.create(&PostParams::default(), &secret).await?;
        create.push(begin.elapsed());
    }
    let create_total = started.elapsed();
    let rss_loaded = rss_mb().unwrap_or(0.0);

    let mut get = Vec::with_capacity(1000);
    for index in 0..1000.min(bench.objects) {
        let name = format!("bench-{:06}", (index * 7919) % bench.objects);
        let begin = Instant::now();
        secrets.get(&name).await?;
        get.push(begin.elapsed());
    }

    let begin = Instant::now();
    let listed = list_in_pages(&secrets).await?;
    let list_all = begin.elapsed();
    let begin = Instant::now();
    let selected = secrets.list(&ListParams::default().labels("shard=3")).await?.items.len();
    let list_selected = begin.elapsed();

    let mut delivery = watch_delivery(&secrets, bench.objects).await?;
    served.stop().await;

    #[allow(clippy::cast_precision_loss)]
    let per_object_kib = if bench.objects > 0 { (rss_loaded - rss_start) * 1024.0 / bench.objects as f64 } else { 0.0 };
    #[allow(clippy::cast_precision_loss)]
    let creates_per_second = bench.objects as f64 / create_total.as_secs_f64().max(1e-9);
    Ok(json!({
        "objects": bench.objects,
        "transport": "http (kube client, loopback)",
        "create_ms_p50": round(percentile_ms(&mut create, 50.0), 3),
        "create_ms_p99": round(percentile_ms(&mut create, 99.0), 3),
        "creates_per_second": round(creates_per_second, 0),
        "get_ms_p50": round(percentile_ms(&mut get, 50.0), 3),
        "get_ms_p99": round(percentile_ms(&mut get, 99.0), 3),
        "list_all_ms": round(list_all.as_secs_f64() * 1000.0, 1),
        "list_all_items": listed,
        "list_label_selected_ms": round(list_selected.as_secs_f64() * 1000.0, 1),
        "list_label_selected_items": selected,
        "watch_delivery_ms_p50": round(percentile_ms(&mut delivery, 50.0), 3),
        "watch_delivery_ms_p99": round(percentile_ms(&mut delivery, 99.0), 3),
        "rss_mb_empty": round(rss_start, 1),
        "rss_mb_loaded": round(rss_loaded, 1),
        "rss_kib_per_object": round(per_object_kib, 2),
    }))
}
