//! `capdeck bench ...`: measurements reported as numbers (never timed unit tests).

pub mod console;
pub mod engine;
mod pass_cpu;
pub mod reads;
pub mod sandbox;
pub mod synthetic;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A sandbox in a child process (so this process's numbers are the measured component's alone);
/// killed when dropped.
pub struct SandboxChild(pub Child);

impl Drop for SandboxChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `capdeck sandbox --listen 127.0.0.1:0 EXTRA... --kubeconfig-out KUBECONFIG` as a child
/// process; returns it and its URL.
pub fn spawn_sandbox(extra: &[&str], kubeconfig: &std::path::Path) -> anyhow::Result<(SandboxChild, String)> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(["sandbox", "--listen", "127.0.0.1:0"])
        .args(extra)
        .arg("--kubeconfig-out")
        .arg(kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout from the sandbox"))?;
    let child = SandboxChild(child);
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().ok_or_else(|| anyhow::anyhow!("the sandbox exited before serving"))??;
    let url = first
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .ok_or_else(|| anyhow::anyhow!("unexpected sandbox output: {first}"))?
        .to_string();
    // Keep reading in the background so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok((child, url))
}

/// A fresh directory under the temp dir for a bench's files.
pub fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    use rand::RngExt as _;
    let suffix: u64 = rand::rng().random();
    let dir = std::env::temp_dir().join(format!("capdeck-bench-{suffix:016x}"));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Peak resident set size of this process in MiB.
pub fn peak_rss_mb() -> Option<f64> {
    status_mb("VmHWM")
}

/// Resident set size of another process in MiB.
pub fn child_rss_mb(pid: u32) -> Option<f64> {
    proc_status_mb(&format!("/proc/{pid}/status"), "VmRSS")
}

/// CPU time this process's threads have used so far (Linux `/proc/self/task/*/schedstat`).
pub fn cpu_time() -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let text = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += text.split_whitespace().next().and_then(|ns| ns.parse::<u64>().ok()).unwrap_or(0);
    }
    Some(Duration::from_nanos(total))
}

/// A field of this process's `/proc/self/status` in kB (`VmRSS`, `RssFile`, `RssAnon`, ...) as
/// MiB, if available.
pub fn status_mb(field: &str) -> Option<f64> {
    proc_status_mb("/proc/self/status", field)
}

/// A field of a `/proc/PID/status` file in kB, as MiB.
fn proc_status_mb(path: &str, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(path).ok()?;
    let line = status.lines().find(|line| line.split(':').next() == Some(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Resident set size of this process in MiB (Linux `/proc/self/status`), if available.
pub fn rss_mb() -> Option<f64> {
    status_mb("VmRSS")
}

/// Percentile (0..=100) of durations, in milliseconds.
pub fn percentile_ms(samples: &mut [Duration], percentile: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let index = (((samples.len() - 1) as f64) * percentile / 100.0).round() as usize;
    samples[index.min(samples.len() - 1)].as_secs_f64() * 1000.0
}

/// Round to `digits` decimals for reports.
pub fn round(value: f64, digits: i32) -> f64 {
    let factor = 10f64.powi(digits);
    (value * factor).round() / factor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let mut samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&mut samples, 50.0), 51.0);
        assert_eq!(percentile_ms(&mut samples, 99.0), 99.0);
        assert_eq!(percentile_ms(&mut [], 50.0), 0.0);
    }
}
