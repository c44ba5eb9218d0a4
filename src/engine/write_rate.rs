//! The engine's client-side limit on writes: a token bucket, as client-go's and
//! controller-runtime's clients have one, so that a storm of rotations spreads its writes
//! instead of sending them as fast as the API server answers. Reads and the Lease's renewals are
//! not limited: only the engine's writes (batches, their status, VCAP Secrets, Deployments, the
//! old Secrets' deletes, Events).

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Writes per second by default: the Go CAP Operator's client allows 25 requests a second
/// (`CLIENT_QPS`), so capdeck in its place never writes faster than it on average.
/// controller-runtime's managers and kube-controller-manager allow 20 and 30, client-go's bare
/// default 5 and 10; all of them count reads too, where capdeck's reads are watches.
pub const DEFAULT_QPS: f64 = 25.0;
/// Writes allowed at once after a quiet spell. No second holds as many as the burst and one
/// second's rate, 25 + 25 = 50. The Go operator's client allows a burst of 50 (`CLIENT_BURST`),
/// but its reads share it: in a storm of 1,000 rotations its writes peaked at 54 a second, where
/// capdeck's, with a burst of 50, reached 60 (docs/PERFORMANCE.md, "the rotation storm"). A
/// burst of 25 keeps capdeck's peak under the Go operator's and still sends at once what starts a
/// batch's rollout at the default 5 rollouts at once (5 VCAP Secrets, 5 Deployments, its status).
pub const DEFAULT_BURST: u32 = 25;

/// The longest a write waits (`--write-qps` refuses rates under [`MIN_QPS`]; this bounds a rate
/// set by other means).
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// The smallest limit `--write-qps` takes: one write in 100 s (0 is no limit).
pub const MIN_QPS: f64 = 0.01;

/// A token bucket with reservations (first come, first served): each write takes a token, and
/// when none is left it waits for its own, which refills at `qps`.
#[derive(Debug)]
pub struct WriteRate {
    qps: f64,
    burst: f64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Tokens at `at`; below zero when writes are waiting for theirs.
    tokens: f64,
    at: Instant,
}

impl WriteRate {
    /// `None` when `qps` is 0 (no limit).
    pub fn new(qps: f64, burst: u32) -> Option<Self> {
        (qps > 0.0).then(|| {
            let burst = f64::from(burst.max(1));
            Self { qps, burst, bucket: Mutex::new(Bucket { tokens: burst, at: Instant::now() }) }
        })
    }

    /// Take a token, waiting for it if none is left. Returns how long this write waited.
    pub async fn acquire(&self) -> Duration {
        let wait = {
            let mut bucket = self.bucket.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let now = Instant::now();
            let refilled = now.saturating_duration_since(bucket.at).as_secs_f64() * self.qps;
            bucket.tokens = (bucket.tokens + refilled).min(self.burst) - 1.0;
            bucket.at = now;
            if bucket.tokens >= 0.0 {
                Duration::ZERO
            } else {
                // A rate too small to say in a Duration waits as long as a Duration can.
                Duration::try_from_secs_f64(-bucket.tokens / self.qps).unwrap_or(MAX_WAIT)
            }
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On tokio's paused clock (no real time passes): the burst goes at once, then one write
    /// every 1/qps, in the order they asked.
    #[tokio::test(start_paused = true)]
    async fn a_burst_goes_at_once_and_the_rest_at_the_rate() {
        let rate = WriteRate::new(2.0, 3).expect("limited");
        let start = Instant::now();
        let mut at = Vec::new();
        for _ in 0..7 {
            rate.acquire().await;
            at.push(start.elapsed().as_millis());
        }
        assert_eq!(at, [0, 0, 0, 500, 1000, 1500, 2000]);
        // A quiet spell refills the bucket, never above the burst.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let quiet = Instant::now();
        for _ in 0..4 {
            rate.acquire().await;
        }
        assert_eq!(quiet.elapsed().as_millis(), 500, "3 at once, the 4th after 1/qps");
    }

    #[tokio::test(start_paused = true)]
    async fn writers_at_once_share_the_rate_in_turn() {
        let rate = std::sync::Arc::new(WriteRate::new(10.0, 1).expect("limited"));
        let start = Instant::now();
        let tasks: Vec<_> = (0..5)
            .map(|_| {
                let rate = rate.clone();
                tokio::spawn(async move {
                    rate.acquire().await;
                    start.elapsed().as_millis()
                })
            })
            .collect();
        let mut at = Vec::new();
        for task in tasks {
            at.push(task.await.expect("task"));
        }
        at.sort_unstable();
        assert_eq!(at, [0, 100, 200, 300, 400]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_too_small_for_a_duration_waits_an_hour_not_a_panic() {
        let rate = WriteRate::new(1e-300, 1).expect("limited");
        assert_eq!(rate.acquire().await, Duration::ZERO);
        assert_eq!(rate.acquire().await, MAX_WAIT);
    }

    /// Whoever asks and whenever, no second of grants holds as many writes as the burst and one
    /// second's rate: grants fall on whole milliseconds, so a second's first and last are less
    /// than a second apart. That keeps a storm's peak at the defaults under 50 a second (an audit
    /// log counts arrivals, which network jitter under 1/qps can shift by one). Seeded: the same
    /// cases every run.
    #[test]
    fn no_second_holds_more_than_the_burst_and_one_seconds_rate() {
        use proptest::prelude::*;
        use proptest::test_runner::RngSeed;
        let config = ProptestConfig {
            cases: 128,
            failure_persistence: None,
            rng_seed: RngSeed::Fixed(47),
            ..ProptestConfig::default()
        };
        let writers = proptest::collection::vec((0u64..20_000, 1usize..80), 1..12);
        proptest!(config, |(qps in 1u32..60, burst in 1u32..80, writers in writers)| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .expect("a paused runtime");
            let granted = runtime.block_on(granted_at(f64::from(qps), burst, &writers));
            let total: usize = writers.iter().map(|(_, writes)| writes).sum();
            prop_assert_eq!(granted.len(), total, "every write is granted in the end");
            let most = granted
                .iter()
                .map(|from| granted.iter().filter(|at| **at >= *from && **at < *from + 1_000).count())
                .max()
                .unwrap_or(0);
            prop_assert!(most < (burst + qps) as usize, "{} writes in one second", most);
        });
        assert!(DEFAULT_QPS + f64::from(DEFAULT_BURST) <= 50.0, "the defaults' peak stays under the Go operator's 54");
    }

    /// Each writer arrives at its millisecond and writes its count one after another; the
    /// milliseconds since the start at which each write was granted.
    async fn granted_at(qps: f64, burst: u32, writers: &[(u64, usize)]) -> Vec<u64> {
        let rate = std::sync::Arc::new(WriteRate::new(qps, burst).expect("limited"));
        let start = Instant::now();
        let tasks: Vec<_> = writers
            .iter()
            .map(|&(arrives, writes)| {
                let rate = rate.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(arrives)).await;
                    let mut at = Vec::with_capacity(writes);
                    for _ in 0..writes {
                        rate.acquire().await;
                        at.push(u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX));
                    }
                    at
                })
            })
            .collect();
        let mut granted = Vec::new();
        for task in tasks {
            granted.extend(task.await.expect("writer"));
        }
        granted
    }

    #[test]
    fn zero_means_no_limit() {
        assert!(WriteRate::new(0.0, 30).is_none());
        assert!(WriteRate::new(0.5, 0).is_some_and(|rate| rate.burst == 1.0));
    }
}
