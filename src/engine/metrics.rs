//! The engine's Prometheus metrics (OpenMetrics text on the daemon's `/metrics`).

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub phase: String,
}

/// A batch state in every surface's words: its word and its cause (`Held`, `failure guard`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: String,
    pub cause: String,
}

impl StateLabels {
    pub fn of(state: &crate::api::rotation_batch::BatchState) -> Self {
        Self { state: state.word().to_string(), cause: state.cause().unwrap_or_default().to_string() }
    }
}

/// A notification receiver by its name (`--notify NAME@URL`, else host#hash): never its URL.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReceiverLabels {
    pub receiver: String,
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AppLabels {
    pub namespace: String,
    pub application: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HeldLabels {
    pub namespace: String,
    pub application: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SecretLabels {
    pub namespace: String,
    pub secret: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SecretStateLabels {
    pub namespace: String,
    pub secret: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub verb: String,
    pub resource: String,
    /// The HTTP status, or `transport` when no answer came.
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionLabels {
    pub version: String,
}

/// Cheap to clone: every field shares its value. docs/METRICS.md lists them with their labels
/// and the bound on their series.
#[derive(Clone)]
pub struct Metrics {
    pub batches: Family<PhaseLabels, Gauge>,
    /// RotationBatches by state (`BatchState`'s word and cause, as the CLI and the console say it).
    pub batch_states: Family<StateLabels, Gauge>,
    pub rotations: Counter,
    pub deployments_restarted: Counter,
    pub restarts_skipped: Family<ReasonLabels, Counter>,
    pub approval_wait_seconds: Histogram,
    pub rollout_duration_seconds: Histogram,
    pub leader: Gauge,
    pub api_writes: Family<WriteLabels, Counter>,
    /// Time writes waited for the client-side write rate (`--write-qps`).
    pub write_throttled_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    /// Per open batch whose rotated Secrets' old credentials have a known revocation time.
    pub credentials_margin_seconds: Family<BatchLabels, Gauge>,
    /// Notifications a receiver accepted, and those it did not after every retry (per receiver).
    pub notifications_sent: Family<ReceiverLabels, Counter>,
    pub notifications_failed: Family<ReceiverLabels, Counter>,
    /// 1 while a receiver's last answer refused capdeck (401, 403, 404, 410; PagerDuty's 400), 0 once it accepts.
    pub notification_receiver_refusing: Family<ReceiverLabels, Gauge>,
    /// Open batches waiting for a change window to open (phase `Waiting`, outside the windows).
    pub batches_waiting_for_window: Gauge,
    /// Freezes in force over what this engine serves.
    pub freeze_active: Gauge,
    /// 1 while `/readyz` answers 200 (set when `/metrics` is scraped).
    pub ready: Gauge,
    /// Per open batch awaiting an approval: seconds since it began to wait.
    pub batch_awaiting_approval_seconds: Family<AppLabels, Gauge>,
    /// 1 per open batch in phase Held, by its condition reason.
    pub batch_held: Family<HeldLabels, Gauge>,
    /// 1 when the application's newest batch failed.
    pub batch_failed: Family<AppLabels, Gauge>,
    /// Per opted-in application: Deployments of versions in use that do not run their binding
    /// Secrets' current credentials and that no open batch is rolling (an undo, a cancel or a
    /// failure left them so, or a batch is about to open).
    pub deployments_out_of_date: Family<AppLabels, Gauge>,
    /// Per consumed binding Secret: its credentials margin, and its verdict.
    pub secret_credentials_margin_seconds: Family<SecretLabels, Gauge>,
    pub secret_credentials_state: Family<SecretStateLabels, Gauge>,
    /// Failed API requests: the engine's writes and its watches.
    pub api_errors: Family<ErrorLabels, Counter>,
    /// 1 while the leader sees the Go CAP Operator's Lease renewed.
    pub go_operator_running: Gauge,
    /// While the Go CAP Operator runs: applications both programs restart.
    pub applications_also_rolled_by_go_operator: Gauge,
    /// Objects the stores skip because they do not decode, by kind (`capdeck doctor` names them).
    pub undecodable_objects: Family<KindLabels, Gauge>,
    registry: Arc<Registry>,
    /// The labelled families by OpenMetrics name and type: they have no series until something
    /// is counted, and `encode` announces them anyway.
    labelled: Arc<Vec<(String, String)>>,
}

/// The registry while `Metrics::new` fills it, noting the labelled families as they come (they
/// have no series until something is counted; see [`Metrics::encode`]).
struct Registering {
    registry: Registry,
    labelled: Vec<(String, String)>,
}

impl Registering {
    fn register(&mut self, name: &str, help: &str, metric: impl Metric) {
        self.registry.register(name, help, metric);
    }

    fn labelled<F: Metric + TypedMetric>(&mut self, name: &str, help: &str, family: F) {
        self.labelled.push((format!("capdeck_{name}"), F::TYPE.as_str().to_string()));
        self.registry.register(name, help, family);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// What the metrics keep of one Secret's credentials report: a few words, where the report
/// holds its reasons and every old credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialSeries {
    pub namespace: String,
    pub secret: String,
    pub margin_seconds: Option<i64>,
    pub state: &'static str,
}

impl CredentialSeries {
    pub fn of(report: crate::credentials::CredentialReport) -> Self {
        Self {
            namespace: report.namespace,
            secret: report.secret,
            margin_seconds: report.margin_seconds,
            state: report.verdict.as_str(),
        }
    }
}

impl Metrics {
    // Table-like: one registration per metric, with its help text (docs/METRICS.md lists them).
    #[allow(clippy::too_many_lines)]
    pub fn new() -> Self {
        let mut registry = Registering { registry: Registry::with_prefix("capdeck"), labelled: Vec::new() };
        let batches = Family::<PhaseLabels, Gauge>::default();
        registry.labelled("batches", "RotationBatches by phase", batches.clone());
        let batch_states = Family::<StateLabels, Gauge>::default();
        registry.labelled(
            "batch_states",
            "RotationBatches by state, in the words of capdeck batches and the console",
            batch_states.clone(),
        );
        let rotations = Counter::default();
        registry.register("rotations", "Binding Secret rotations detected", rotations.clone());
        let deployments_restarted = Counter::default();
        registry.register(
            "deployments_restarted",
            "Deployments pointed at a new VCAP Secret",
            deployments_restarted.clone(),
        );
        let restarts_skipped = Family::<ReasonLabels, Counter>::default();
        registry.labelled(
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
        registry.labelled("api_writes", "API writes the engine made, by verb and resource", api_writes.clone());
        let write_throttled_seconds = Counter::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "write_throttled_seconds",
            "Time the engine's writes waited for its client-side write rate (--write-qps)",
            write_throttled_seconds.clone(),
        );
        let credentials_margin_seconds = Family::<BatchLabels, Gauge>::default();
        registry.labelled(
            "credentials_margin_seconds",
            "Per open batch: earliest revocation of its Secrets' old credentials minus when it would have rolled \
             (window end or now, plus the expected rollout); below the expected rollout it acts at once",
            credentials_margin_seconds.clone(),
        );
        let notifications_sent = Family::<ReceiverLabels, Counter>::default();
        registry.labelled(
            "notifications_sent",
            "Notifications a receiver accepted, by receiver",
            notifications_sent.clone(),
        );
        let notifications_failed = Family::<ReceiverLabels, Counter>::default();
        registry.labelled(
            "notifications_failed",
            "Notifications a receiver did not accept after every retry, by receiver (its name, never its URL)",
            notifications_failed.clone(),
        );
        let notification_receiver_refusing = Family::<ReceiverLabels, Gauge>::default();
        registry.labelled(
            "notification_receiver_refusing",
            "1 while a receiver's last answer refused capdeck (401, 403, 404, 410, PagerDuty's 400: its URL or key is wrong, revoked or \
             gone), 0 once it accepts again, by receiver",
            notification_receiver_refusing.clone(),
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
        let build_info = Family::<VersionLabels, Gauge>::default();
        registry.labelled("build_info", "Always 1; the capdeck version", build_info.clone());
        build_info.get_or_create(&VersionLabels { version: env!("CARGO_PKG_VERSION").into() }).set(1);
        let ready = Gauge::default();
        registry.register("ready", "1 while /readyz answers 200 (stores synced, lease state known)", ready.clone());
        let batch_awaiting_approval_seconds = Family::<AppLabels, Gauge>::default();
        registry.labelled(
            "batch_awaiting_approval_seconds",
            "Per open batch in phase AwaitingApproval: seconds since it began to wait for an approval",
            batch_awaiting_approval_seconds.clone(),
        );
        let batch_held = Family::<HeldLabels, Gauge>::default();
        registry.labelled(
            "batch_held",
            "1 per open batch in phase Held, by its condition reason (RolloutFailureGuard: the failure guard)",
            batch_held.clone(),
        );
        let deployments_out_of_date = Family::<AppLabels, Gauge>::default();
        registry.labelled(
            "deployments_out_of_date",
            "Per opted-in application: Deployments of versions in use not running their binding Secrets' current \
             credentials and not being rolled by an open batch",
            deployments_out_of_date.clone(),
        );
        let batch_failed = Family::<AppLabels, Gauge>::default();
        registry.labelled(
            "batch_failed",
            "1 when the application's newest RotationBatch is Failed (a retry or a newer batch clears it)",
            batch_failed.clone(),
        );
        let secret_credentials_margin_seconds = Family::<SecretLabels, Gauge>::default();
        registry.labelled(
            "secret_credentials_margin_seconds",
            "Per consumed binding Secret with a known margin: earliest revocation of its old credentials minus \
             when its batch would be rolled out (capdeck credentials)",
            secret_credentials_margin_seconds.clone(),
        );
        let secret_credentials_state = Family::<SecretStateLabels, Gauge>::default();
        registry.labelled(
            "secret_credentials_state",
            "1 per consumed binding Secret; state is its verdict: ok, unknown, at-risk, unsafe (docs/CREDENTIALS.md)",
            secret_credentials_state.clone(),
        );
        let api_errors = Family::<ErrorLabels, Counter>::default();
        registry.labelled(
            "api_errors",
            "API requests that failed: the engine's writes and its watches (verb watch), by HTTP status",
            api_errors.clone(),
        );
        let go_operator_running = Gauge::default();
        registry.register(
            "go_operator_running",
            "1 while the leader sees the Go CAP Operator's Lease renewed (looked at once a minute)",
            go_operator_running.clone(),
        );
        let applications_also_rolled_by_go_operator = Gauge::default();
        registry.register(
            "applications_also_rolled_by_go_operator",
            "While the Go CAP Operator runs: applications with spec.rolloutOnCredentialUpdate true, which it \
             restarts too (docs/COMPATIBILITY.md)",
            applications_also_rolled_by_go_operator.clone(),
        );
        let undecodable_objects = Family::<KindLabels, Gauge>::default();
        let help = "Objects the engine skips because they do not decode as their kind (capdeck doctor names them)";
        registry.labelled("undecodable_objects", help, undecodable_objects.clone());
        Self {
            undecodable_objects,
            ready,
            batch_awaiting_approval_seconds,
            batch_held,
            batch_failed,
            deployments_out_of_date,
            secret_credentials_margin_seconds,
            secret_credentials_state,
            api_errors,
            go_operator_running,
            applications_also_rolled_by_go_operator,
            batches_waiting_for_window,
            freeze_active,
            credentials_margin_seconds,
            notifications_sent,
            notifications_failed,
            notification_receiver_refusing,
            batches,
            batch_states,
            rotations,
            deployments_restarted,
            restarts_skipped,
            approval_wait_seconds,
            rollout_duration_seconds,
            leader,
            api_writes,
            write_throttled_seconds,
            registry: Arc::new(registry.registry),
            labelled: Arc::new(registry.labelled),
        }
    }

    /// How many objects of each kind the stores skip (`capdeck_undecodable_objects`).
    pub fn set_undecodable(&self, invalid: &[crate::cluster::stores::InvalidObject]) {
        self.undecodable_objects.clear();
        for object in invalid {
            self.undecodable_objects.get_or_create(&KindLabels { kind: object.kind.to_string() }).inc();
        }
    }

    pub fn write(&self, verb: &str, resource: &str) {
        self.api_writes.get_or_create(&WriteLabels { verb: verb.into(), resource: resource.into() }).inc();
    }

    /// Every consumed binding Secret's margin and verdict (`capdeck_secret_credentials_*`), in
    /// place of the last round's: cleared and set at once, so a scrape never finds them half done.
    pub fn set_credentials(&self, series: Vec<CredentialSeries>) {
        self.secret_credentials_margin_seconds.clear();
        self.secret_credentials_state.clear();
        for CredentialSeries { namespace, secret, margin_seconds, state } in series {
            let labels = SecretLabels { namespace, secret };
            if let Some(margin) = margin_seconds {
                self.secret_credentials_margin_seconds.get_or_create(&labels).set(margin);
            }
            self.secret_credentials_state
                .get_or_create(&SecretStateLabels {
                    namespace: labels.namespace,
                    secret: labels.secret,
                    state: state.into(),
                })
                .set(1);
        }
    }

    /// A failed API request: `code` is the HTTP status, or `transport` when no answer came.
    pub fn api_error(&self, verb: &str, resource: &str, error: &kube::Error) {
        let code = match error {
            kube::Error::Api(status) => status.code.to_string(),
            _ => "transport".to_string(),
        };
        self.api_errors.get_or_create(&ErrorLabels { verb: verb.into(), resource: resource.into(), code }).inc();
    }

    pub fn skipped(&self, reason: &str) {
        self.restarts_skipped.get_or_create(&ReasonLabels { reason: reason.into() }).inc();
    }

    /// OpenMetrics text. A labelled family without a series yet is still announced (its
    /// `# TYPE` line, which OpenMetrics allows without samples), so a scrape shows every metric
    /// the alerts and the dashboard name from the first moment.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        let missing: String = self
            .labelled
            .iter()
            .filter(|(name, _)| !out.contains(&format!("# TYPE {name} ")))
            .map(|(name, kind)| format!("# TYPE {name} {kind}\n"))
            .collect();
        if let Some(end) = out.rfind("# EOF") {
            out.insert_str(end, &missing);
        }
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
        metrics.notifications_failed.get_or_create(&ReceiverLabels { receiver: "pager".into() }).inc();
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
            "capdeck_notifications_failed_total{receiver=\"pager\"} 1",
            "capdeck_batches_waiting_for_window 0",
            "capdeck_freeze_active 0",
            "capdeck_credentials_margin_seconds{namespace=\"ns\",batch=\"app-x7k2q\"} -300",
            "capdeck_build_info{version=",
            "capdeck_ready 0",
            "capdeck_go_operator_running 0",
            "capdeck_applications_also_rolled_by_go_operator 0",
            "# EOF",
        ] {
            assert!(text.contains(name), "missing {name} in\n{text}");
        }
    }

    #[test]
    fn every_family_is_announced_before_its_first_series_and_once_after() {
        let metrics = Metrics::new();
        // The families registered as labelled, with the type OpenMetrics knows them by.
        let expected = [
            ("capdeck_batches", "gauge"),
            ("capdeck_batch_states", "gauge"),
            ("capdeck_restarts_skipped", "counter"),
            ("capdeck_api_writes", "counter"),
            ("capdeck_credentials_margin_seconds", "gauge"),
            ("capdeck_notifications_sent", "counter"),
            ("capdeck_notifications_failed", "counter"),
            ("capdeck_notification_receiver_refusing", "gauge"),
            ("capdeck_build_info", "gauge"),
            ("capdeck_batch_awaiting_approval_seconds", "gauge"),
            ("capdeck_batch_held", "gauge"),
            ("capdeck_deployments_out_of_date", "gauge"),
            ("capdeck_batch_failed", "gauge"),
            ("capdeck_secret_credentials_margin_seconds", "gauge"),
            ("capdeck_secret_credentials_state", "gauge"),
            ("capdeck_api_errors", "counter"),
            ("capdeck_undecodable_objects", "gauge"),
        ];
        let noted: Vec<(&str, &str)> = metrics.labelled.iter().map(|(n, k)| (n.as_str(), k.as_str())).collect();
        assert_eq!(noted, expected);
        let fresh = metrics.encode();
        for (name, kind) in expected {
            assert!(fresh.contains(&format!("# TYPE {name} {kind}\n")), "{name} announced:\n{fresh}");
        }
        assert!(fresh.ends_with("# EOF\n"), "{fresh}");
        metrics.skipped("unchanged");
        metrics.write("create", "secrets");
        let counted = metrics.encode();
        assert_eq!(counted.matches("# TYPE capdeck_restarts_skipped counter").count(), 1, "{counted}");
        assert_eq!(counted.matches("# TYPE capdeck_api_writes counter").count(), 1, "{counted}");
        // Every family the registry knows: none missing from the list.
        let types: Vec<&str> = counted.lines().filter_map(|line| line.strip_prefix("# TYPE ")).collect();
        let always_present = [
            "capdeck_rotations",
            "capdeck_deployments_restarted",
            "capdeck_approval_wait_seconds",
            "capdeck_rollout_duration_seconds",
            "capdeck_write_throttled_seconds",
            "capdeck_leader",
            "capdeck_batches_waiting_for_window",
            "capdeck_freeze_active",
            "capdeck_ready",
            "capdeck_go_operator_running",
            "capdeck_applications_also_rolled_by_go_operator",
            "capdeck_build_info",
        ];
        for line in types {
            let name = line.split_whitespace().next().unwrap_or_default();
            assert!(
                always_present.contains(&name) || expected.iter().any(|(family, _)| *family == name),
                "{name} is a family the test does not know: labelled (register_labelled) or always present?"
            );
        }
    }
}
