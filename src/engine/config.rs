//! Engine settings: `ROLLOUT_DELAY` parsing with upstream's rules, approval policy, pacing,
//! the storm guard, leader election, and the clock.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

mod receivers;
pub use crate::api::approval::ApprovalPolicy;

pub const DEFAULT_ROLLOUT_DELAY: Duration = crate::credentials::Timing::DEFAULT.window;
pub const MIN_ROLLOUT_DELAY: Duration = Duration::from_secs(30);

/// The rollout delay from `ROLLOUT_DELAY` / `--rollout-delay`, with upstream's rules: unset →
/// 1h; unparseable (also empty or blank) → 1h with an error; below 30s (0 and negatives
/// included) → 30s with an error. Go duration syntax (`1h30m`, `90s`, no `d`). The second
/// value is the error to log, if any.
pub fn parse_rollout_delay(value: Option<&str>) -> (Duration, Option<String>) {
    let Some(raw) = value else {
        return (DEFAULT_ROLLOUT_DELAY, None);
    };
    let text = raw.trim();
    // Go's time.ParseDuration refuses an empty string; kube's parser would read it as zero. Its
    // own words ("cannot parse float from empty string" for `abc`) say nothing to a person.
    let parsed: Option<kube::core::Duration> =
        if text.is_empty() { None } else { text.parse::<kube::core::Duration>().ok() };
    match parsed {
        None => (
            DEFAULT_ROLLOUT_DELAY,
            Some(format!(
                "ROLLOUT_DELAY={raw:?} is not a duration (use a Go duration such as 30s, 15m, 1h); using {}",
                humanize(DEFAULT_ROLLOUT_DELAY)
            )),
        ),
        Some(duration) => {
            // Converting to std::time::Duration drops the sign: check it first.
            let delay = (!duration.is_negative()).then(|| Duration::from(duration));
            match delay {
                Some(delay) if delay >= MIN_ROLLOUT_DELAY => (delay, None),
                _ => (
                    MIN_ROLLOUT_DELAY,
                    Some(format!(
                        "ROLLOUT_DELAY {raw:?} is below the minimum; using minimum {}",
                        humanize(MIN_ROLLOUT_DELAY)
                    )),
                ),
            }
        }
    }
}

pub use crate::api::go_duration::{GoDurationError, humanize, parse_go_duration};

/// The namespace `capdeck manifests` installs into (and the demo's lease lives in).
pub const INSTALL_NAMESPACE: &str = "capdeck-system";

/// Whether this engine may take the lease.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineMode {
    /// The daemon competes for the lease; the console observes (a console leads only when told).
    #[default]
    Auto,
    /// Never lead: watch and show only.
    Observe,
    /// Compete for the lease (what the daemon does).
    Lead,
}

/// Wall time for the engine. Production uses the system clock; tests use a clock that moves
/// with tokio time, so `tokio::time::pause()` can skip a 30 s window instantly.
#[derive(Clone, Debug)]
pub enum Clock {
    System,
    Tokio { wall: Timestamp, instant: tokio::time::Instant },
}

impl Clock {
    /// A clock that starts at the current wall time and advances with tokio time.
    pub fn tokio() -> Self {
        Self::Tokio { wall: Timestamp::now(), instant: tokio::time::Instant::now() }
    }

    pub fn now(&self) -> Timestamp {
        match self {
            Self::System => Timestamp::now(),
            Self::Tokio { wall, instant } => {
                let elapsed = k8s_openapi::jiff::SignedDuration::try_from(instant.elapsed()).unwrap_or_default();
                wall.checked_add(elapsed).unwrap_or(*wall)
            }
        }
    }

    /// Time left until `at` (zero if it passed).
    pub fn until(&self, at: Timestamp) -> Duration {
        let left = at.duration_since(self.now());
        Duration::try_from(left).unwrap_or(Duration::ZERO)
    }
}

pub use crate::leadership::LeaseSettings;

#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub rollout_delay: Duration,
    pub approval: ApprovalPolicy,
    /// Deployments rolling at once, across all batches.
    pub max_parallel_rollouts: usize,
    /// A Deployment capdeck rolled less than this ago needs an approval (storm guard).
    pub min_rollout_interval: Duration,
    /// The engine's writes per second and burst (`--write-qps`, `--write-burst`); 0: no limit.
    pub write_rate: (f64, u32),
    pub mode: EngineMode,
    pub lease: LeaseSettings,
    /// Lease holder identity (pod name or host plus a random suffix).
    pub identity: String,
    pub clock: Clock,
    /// How often progress is refreshed while Deployments roll.
    pub progress_interval: Duration,
    /// How long rolling a batch is expected to take: when the old credentials of a rotated Secret
    /// may be revoked less than this after the batch would have rolled, it acts at once.
    pub expected_rollout: Duration,
    /// The first stalled Deployment halts its batch (`RolloutFailureGuard`) while others wait.
    pub halt_on_failure: bool,
    /// A new Pod not ready for longer than this marks its Deployment `Failing`.
    pub readiness_timeout: Duration,
    /// Where the leading engine sends notifications (none: it sends none).
    pub notify: NotifyConfig,
    /// `--change-windows`: the cluster's default change windows (docs/WINDOWS.md); an
    /// application's or its namespace's annotation wins.
    pub change_windows: Option<crate::api::change_window::ChangeWindows>,
    /// `--on-deadline`: what a batch does when waiting for a window or a freeze would outlive
    /// its old credentials.
    pub on_deadline: OnDeadline,
}

/// When the next change window (or the end of a freeze) comes after the old credentials may be
/// revoked, less the expected rollout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OnDeadline {
    /// Ask a person at once (phase AwaitingApproval, reason DeadlineBeforeChangeWindow or
    /// DeadlineDuringFreeze, a notification)
    #[default]
    Ask,
    /// Roll at once, outside the window or the freeze (the batch's record says so)
    Roll,
}

pub use receivers::{
    NotifyConfig, NotifySecretRef, NotifyTarget, PayloadFormat, ReceiverPrefix, RetryPolicy, SecretKeyRef, SigningKey,
};

/// The expected rollout time unless `--expected-rollout` says otherwise.
pub const DEFAULT_EXPECTED_ROLLOUT: Duration = crate::credentials::Timing::DEFAULT.expected_rollout;

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            rollout_delay: DEFAULT_ROLLOUT_DELAY,
            approval: ApprovalPolicy::Auto,
            max_parallel_rollouts: 5,
            min_rollout_interval: Duration::from_secs(600),
            write_rate: (crate::engine::write_rate::DEFAULT_QPS, crate::engine::write_rate::DEFAULT_BURST),
            mode: EngineMode::Auto,
            lease: LeaseSettings::default(),
            identity: default_identity(),
            clock: Clock::System,
            progress_interval: Duration::from_secs(1),
            expected_rollout: DEFAULT_EXPECTED_ROLLOUT,
            halt_on_failure: true,
            readiness_timeout: Duration::from_secs(300),
            notify: NotifyConfig::default(),
            change_windows: None,
            on_deadline: OnDeadline::Ask,
        }
    }
}

impl EngineConfig {
    /// The window and expected rollout that credential margins are measured against.
    /// What this engine decides with, for its Lease (observers judge with the same numbers).
    /// This engine as a candidate for leadership.
    pub fn candidate(&self) -> crate::leadership::Candidate {
        crate::leadership::Candidate {
            lease: self.lease.clone(),
            identity: self.identity.clone(),
            settings: self.published_settings(),
        }
    }

    pub fn published_settings(&self) -> crate::leadership::PublishedSettings {
        crate::leadership::PublishedSettings {
            rollout_delay_seconds: self.rollout_delay.as_secs(),
            expected_rollout_seconds: self.expected_rollout.as_secs(),
            approval: self.approval.label().into(),
            max_parallel_rollouts: self.max_parallel_rollouts,
            min_rollout_interval_seconds: self.min_rollout_interval.as_secs(),
            change_windows: self.change_windows.as_ref().map(|windows| windows.text().to_string()),
            on_deadline: Some(
                match self.on_deadline {
                    OnDeadline::Ask => "ask",
                    OnDeadline::Roll => "roll",
                }
                .into(),
            ),
        }
    }

    pub fn credential_timing(&self) -> crate::credentials::Timing {
        crate::credentials::Timing { window: self.rollout_delay, expected_rollout: self.expected_rollout }
    }

    /// How this engine judges credentials: its timing, its `--change-windows`, where its Lease
    /// lives and its `--on-deadline` (what it also publishes on the Lease for observers).
    pub fn judging(&self) -> crate::credentials::Judging {
        crate::credentials::Judging {
            timing: self.credential_timing(),
            cluster_windows: self.change_windows.clone(),
            lease_namespace: Some(self.lease.namespace.clone()),
            deadline_rolls: self.on_deadline == OnDeadline::Roll,
        }
    }
}

/// `$POD_NAME` or `$HOSTNAME`, plus a random suffix so two processes on one host differ.
pub fn default_identity() -> String {
    use rand::RngExt as _;
    let base = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "capdeck".into());
    let suffix: u32 = rand::rng().random();
    format!("{base}-{suffix:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollout_delay_follows_upstream_table() {
        let cases: [(Option<&str>, Duration, bool); 9] = [
            (None, DEFAULT_ROLLOUT_DELAY, false),
            (Some(""), DEFAULT_ROLLOUT_DELAY, true),
            (Some("   "), DEFAULT_ROLLOUT_DELAY, true),
            (Some("not-a-duration"), DEFAULT_ROLLOUT_DELAY, true),
            (Some("banana"), DEFAULT_ROLLOUT_DELAY, true),
            (Some("2m"), Duration::from_secs(120), false),
            (Some(" 1h30m "), Duration::from_secs(5400), false),
            (Some("5s"), MIN_ROLLOUT_DELAY, true),
            (Some("-5m"), MIN_ROLLOUT_DELAY, true),
        ];
        for (input, expected, logs) in cases {
            let (delay, error) = parse_rollout_delay(input);
            assert_eq!(delay, expected, "{input:?}");
            assert_eq!(error.is_some(), logs, "{input:?}: {error:?}");
        }
        assert_eq!(parse_rollout_delay(Some("1d")).0, DEFAULT_ROLLOUT_DELAY, "no days in Go durations");
        assert_eq!(
            parse_rollout_delay(Some("abc")).1.as_deref(),
            Some(r#"ROLLOUT_DELAY="abc" is not a duration (use a Go duration such as 30s, 15m, 1h); using 1h"#),
            "the value, what is expected and the fallback, not the parser's words"
        );
        assert_eq!(
            parse_go_duration("-10m").map_err(|e| e.to_string()),
            Err("\"-10m\" must not be negative".to_string())
        );
        assert_eq!(parse_go_duration("10m"), Ok(Duration::from_secs(600)));
    }

    #[test]
    fn humanize_durations() {
        assert_eq!(humanize(Duration::from_secs(3600)), "1h");
        assert_eq!(humanize(Duration::from_secs(150)), "2m30s");
        assert_eq!(humanize(Duration::ZERO), "0s");
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_moves_with_paused_time() {
        let clock = Clock::tokio();
        let start = clock.now();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        let elapsed = clock.now().duration_since(start);
        assert_eq!(elapsed.as_secs(), 3600);
    }
}
