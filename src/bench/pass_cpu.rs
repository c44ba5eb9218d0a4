//! The CPU of the engine's passes at rest and when one namespace changes: each touch changes the
//! batch annotation of one Deployment of the first application's namespace (a change the engine's
//! stores see, which wakes a pass and, since the level-triggered re-check, re-plans that
//! namespace's applications). The process's own CPU time (the engine, its stores and this
//! bench's client; the sandbox runs in a child process) over the touches, less the same time at
//! rest, divided by the touches.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

/// CPU seconds (user + system) this process has used, from `/proc/self/stat`.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Milliseconds of CPU per pass woken by a change in one namespace (the first application's:
/// its first Deployment's metadata), beyond the CPU at rest over the same time; `None` where
/// `/proc` cannot say (docs/PERFORMANCE.md, "A pass at 5,000 applications").
/// `writes`: the engine's writes so far; touching metadata is no rotation, so it must write none.
pub async fn per_touched_pass(client: &kube::Client, touches: u32, writes: impl Fn() -> u64) -> Value {
    const GAP: Duration = Duration::from_millis(250);
    let namespace = super::synthetic::namespace_of(0);
    let deployment = format!("{}-v1-w0", super::synthetic::app_name(0));
    let rest_start = cpu_seconds();
    tokio::time::sleep(GAP * touches).await;
    let rest = rest_start.zip(cpu_seconds()).map(|(start, end)| end - start);
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &namespace);
    let (touched_start, writes_before) = (cpu_seconds(), writes());
    for touch in 0..touches {
        // The batch annotation (a name no batch has): a change the plan reads, so the engine's
        // stores count it as one (other metadata and status changes re-plan nothing).
        let patch =
            json!({"metadata": {"annotations": {crate::api::ANNOTATION_ROLLED_BY: format!("bench-touch-{touch}")}}});
        if let Err(error) = api.patch(&deployment, &PatchParams::default(), &Patch::Merge(&patch)).await {
            return json!({"error": crate::cluster::describe_error(&error)});
        }
        tokio::time::sleep(GAP).await;
    }
    let touched = touched_start.zip(cpu_seconds()).map(|(start, end)| end - start);
    let per_pass = touched.zip(rest).map(|(touched, rest)| (touched - rest).max(0.0) * 1000.0 / f64::from(touches));
    json!({
        "touches": touches,
        "cpu_ms_at_rest": rest.map(|s| (s * 1000.0).round()),
        "cpu_ms_touched": touched.map(|s| (s * 1000.0).round()),
        "cpu_ms_per_touched_pass": per_pass.map(|ms| (ms * 10.0).round() / 10.0),
        "writes": writes().saturating_sub(writes_before),
    })
}
