//! `capdeck bench ...`: measurements reported as numbers (never timed unit tests).

pub mod engine;
pub mod sandbox;

use std::time::Duration;

/// Resident set size of this process in MiB (Linux `/proc/self/status`), if available.
pub fn rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
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
