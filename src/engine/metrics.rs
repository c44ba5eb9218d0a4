//! The engine's Prometheus metrics (OpenMetrics text on the daemon's `/metrics`).

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub verb: String,
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BatchLabels {
    pub namespace: String,
    pub batch: String,
}

/// Cheap to clone: every field shares its value.
#[derive(Clone)]
pub struct Metrics {
    pub batches: Family<PhaseLabels, Gauge>,
    pub rotations: Counter,
    pub deployments_restarted: Counter,
    pub restarts_skipped: Family<ReasonLabels, Counter>,
    pub approval_wait_seconds: Histogram,
    pub rollout_duration_seconds: Histogram,
    pub leader: Gauge,
    pub api_writes: Family<WriteLabels, Counter>,
    /// Per open batch whose rotated Secrets' old credentials have a known revocation time.
    pub credentials_margin_seconds: Family<BatchLabels, Gauge>,
    /// Notifications a receiver accepted, and those it did not after every retry (per receiver).
    pub notifications_sent: Counter,
    pub notifications_failed: Counter,
    /// Open batches waiting for a change window to open (phase `Waiting`, outside the windows).
    pub batches_waiting_for_window: Gauge,
    /// Freezes in force over what this engine serves.
    pub freeze_active: Gauge,
    registry: Arc<Registry>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("capdeck");
        let batches = Family::<PhaseLabels, Gauge>::default();
        registry.register("batches", "RotationBatches by phase", batches.clone());
        let rotations = Counter::default();
        registry.register("rotations", "Binding Secret rotations detected", rotations.clone());
        let deployments_restarted = Counter::default();
        registry.register(
            "deployments_restarted",
            "Deployments pointed at a new VCAP Secret",
            deployments_restarted.clone(),
        );
        let restarts_skipped = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "restarts_skipped",
            "Affected Deployments not restarted, by reason",
            restarts_skipped.clone(),
        );
        let approval_wait_seconds = Histogram::new(exponential_buckets(1.0, 2.0, 16));
        registry.register(
            "approval_wait_seconds",
            "Time batches waited for an approval",
            approval_wait_seconds.clone(),
        );
        let rollout_duration_seconds = Histogram::new(exponential_buckets(1.0, 2.0, 16));
        registry.register(
            "rollout_duration_seconds",
            "Time from rollout start to the last Deployment done",
            rollout_duration_seconds.clone(),
        );
        let leader = Gauge::default();
        registry.register("leader", "1 while this engine holds the lease", leader.clone());
        let api_writes = Family::<WriteLabels, Counter>::default();
        registry.register("api_writes", "API writes the engine made, by verb and resource", api_writes.clone());
        let credentials_margin_seconds = Family::<BatchLabels, Gauge>::default();
        registry.register(
            "credentials_margin_seconds",
            "Per open batch: earliest revocation of its Secrets' old credentials minus when it would have rolled \
             (window end or now, plus the expected rollout); below the expected rollout it acts at once",
            credentials_margin_seconds.clone(),
        );
        let notifications_sent = Counter::default();
        registry.register(
            "notifications_sent",
            "Notifications a receiver accepted (one per receiver)",
            notifications_sent.clone(),
        );
        let notifications_failed = Counter::default();
        registry.register(
            "notifications_failed",
            "Notifications a receiver did not accept after every retry (one per receiver; the log names the host)",
            notifications_failed.clone(),
        );
        let batches_waiting_for_window = Gauge::default();
        registry.register(
            "batches_waiting_for_window",
            "Open batches waiting for their next change window to open (phase Waiting)",
            batches_waiting_for_window.clone(),
        );
        let freeze_active = Gauge::default();
        registry.register(
            "freeze_active",
            "Freezes in force over the namespaces this engine serves (capdeck freeze)",
            freeze_active.clone(),
        );
        Self {
            batches_waiting_for_window,
            freeze_active,
            credentials_margin_seconds,
            notifications_sent,
            notifications_failed,
            batches,
            rotations,
            deployments_restarted,
            restarts_skipped,
            approval_wait_seconds,
            rollout_duration_seconds,
            leader,
            api_writes,
            registry: Arc::new(registry),
        }
    }

    pub fn write(&self, verb: &str, resource: &str) {
        self.api_writes.get_or_create(&WriteLabels { verb: verb.into(), resource: resource.into() }).inc();
    }

    pub fn skipped(&self, reason: &str) {
        self.restarts_skipped.get_or_create(&ReasonLabels { reason: reason.into() }).inc();
    }

    /// OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_match_the_design() {
        let metrics = Metrics::new();
        metrics.batches.get_or_create(&PhaseLabels { phase: "Collecting".into() }).set(2);
        metrics.rotations.inc();
        metrics.skipped("unchanged");
        metrics.leader.set(1);
        metrics
            .credentials_margin_seconds
            .get_or_create(&BatchLabels { namespace: "ns".into(), batch: "app-x7k2q".into() })
            .set(-300);
        let text = metrics.encode();
        for name in [
            "capdeck_batches{phase=\"Collecting\"} 2",
            "capdeck_rotations_total 1",
            "capdeck_deployments_restarted_total 0",
            "capdeck_restarts_skipped_total{reason=\"unchanged\"} 1",
            "capdeck_approval_wait_seconds_bucket",
            "capdeck_rollout_duration_seconds_count",
            "capdeck_leader 1",
            "capdeck_notifications_sent_total 0",
            "capdeck_notifications_failed_total 0",
            "capdeck_batches_waiting_for_window 0",
            "capdeck_freeze_active 0",
            "capdeck_credentials_margin_seconds{namespace=\"ns\",batch=\"app-x7k2q\"} -300",
            "# EOF",
        ] {
            assert!(text.contains(name), "missing {name} in\n{text}");
        }
    }
}
