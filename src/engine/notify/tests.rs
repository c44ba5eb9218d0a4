use serde_json::json;

use super::*;
use crate::credentials::{Format, Source};
use crate::engine::config::NotifyTarget;

const NOW: i64 = 1_800_000_000;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).expect("time")
}

fn batch(name: &str, created: i64, status: serde_json::Value) -> Arc<RotationBatch> {
    Arc::new(crate::api::rotation_batch::testing::batch(json!({
        "metadata": {"name": name, "creationTimestamp": at(created).to_string()},
        "spec": {"windowEnd": at(created + 60).to_string()},
        "status": status,
    })))
}

fn ready(phase: &str, reason: &str, since: i64) -> serde_json::Value {
    json!({"phase": phase, "conditions": [{"type": "Ready", "status": "False", "reason": reason, "message": "m",
                                           "lastTransitionTime": at(since).to_string()}]})
}

fn record(event: &str, key: &str, secret: Option<&str>, when: i64) -> serde_json::Value {
    json!({"event": event, "key": key, "secret": secret, "at": at(when).to_string(), "by": "engine-a"})
}

fn report(secret: &str, verdict: Verdict) -> CredentialReport {
    CredentialReport {
        namespace: "ns".into(),
        secret: secret.into(),
        applications: vec!["app".into()],
        source: Source::SapBtp,
        service_binding: None,
        format: Format::Credentials,
        rotation: None,
        old_credentials: Vec::new(),
        certificates: Vec::new(),
        margin_seconds: None,
        verdict,
        reasons: vec!["only 5m to spare".into()],
    }
}

fn keys(due: &[Due]) -> Vec<(String, String)> {
    due.iter().map(|d| (d.batch.clone(), d.key.clone())).collect()
}

/// Every batch transition: which is due, which is not (recorded already, too old, not one).
#[test]
fn batch_transitions_are_due_once() {
    let recorded_awaiting = {
        let mut status = ready("AwaitingApproval", "ApprovalRequired", NOW - 10);
        status["notifications"] = json!([record("AwaitingApproval", "AwaitingApproval", None, NOW - 5)]);
        status
    };
    let mut retried_guard = ready("Held", "RolloutFailureGuard", NOW - 10);
    retried_guard["retriedAt"] = json!(at(NOW - 100).to_string());
    retried_guard["notifications"] = json!([record("HeldByFailureGuard", "HeldByFailureGuard@0", None, NOW - 200)]);
    let retried_key = format!("HeldByFailureGuard@{}", NOW - 100);
    let cases = [
        ("awaiting", ready("AwaitingApproval", "ApprovalRequired", NOW - 10), Some("AwaitingApproval")),
        ("awaiting-sent", recorded_awaiting, None),
        ("guard", ready("Held", "RolloutFailureGuard", NOW - 10), Some("HeldByFailureGuard@0")),
        ("guard-retried", retried_guard, Some(retried_key.as_str())),
        ("user-hold", ready("Held", "Held", NOW - 10), None),
        ("failed-now", ready("Failed", "RolloutFailed", NOW - 60), Some("Failed")),
        ("failed-long-ago", ready("Failed", "RolloutFailed", NOW - 7200), None),
        ("rolling", ready("RollingOut", "RollingOut", NOW - 10), None),
        ("succeeded", ready("Succeeded", "Succeeded", NOW - 10), None),
    ];
    for (name, status, expected) in cases {
        let found = due(&[batch(name, NOW - 1000, status)], &[], at(NOW));
        assert_eq!(found.first().map(|d| d.key.as_str()), expected, "{name}: {found:?}");
    }
}

/// A Secret's verdict: at-risk → unsafe → ok is three notifications; the same verdict again is
/// none; they go to the open batch and read the history of every batch of the application.
#[test]
fn credentials_transitions_follow_the_last_recorded_verdict() {
    let old = {
        let mut status = ready("Succeeded", "Succeeded", NOW - 5000);
        status["notifications"] =
            json!([record("CredentialsAtRisk", "CredentialsAtRisk:uaa:1", Some("uaa"), NOW - 4000)]);
        batch("old", NOW - 9000, status)
    };
    let open = batch("open", NOW - 100, ready("Collecting", "WindowOpen", NOW - 100));
    let batches = vec![old.clone(), open.clone()];
    // Still at risk (recorded on the old batch): nothing new.
    assert!(due(&batches, &[report("uaa", Verdict::AtRisk)], at(NOW)).is_empty());
    // Worse: unsafe, recorded on the open batch.
    let worse = due(&batches, &[report("uaa", Verdict::Unsafe)], at(NOW));
    assert_eq!(keys(&worse), vec![("open".to_string(), "CredentialsUnsafe:uaa:1".to_string())]);
    // Fine again: resolved. Unknown is not "fine".
    let resolved = due(&batches, &[report("uaa", Verdict::Ok)], at(NOW));
    assert_eq!(resolved.first().map(|d| d.event), Some(Event::CredentialsResolved));
    assert!(due(&batches, &[report("uaa", Verdict::Unknown)], at(NOW)).is_empty());
    // Never at risk and fine: nothing. A Secret of an application without a batch: nothing.
    assert!(due(&batches, &[report("xsuaa", Verdict::Ok)], at(NOW)).is_empty());
    let mut elsewhere = report("other", Verdict::Unsafe);
    elsewhere.applications = vec!["no-batch".into()];
    assert!(due(&batches, &[elsewhere], at(NOW)).is_empty());
    // Only terminal batches: the newest one records it.
    let only_old = due(&[old], &[report("uaa", Verdict::Unsafe)], at(NOW));
    assert_eq!(keys(&only_old), vec![("old".to_string(), "CredentialsUnsafe:uaa:2".to_string())]);
}

/// Re-read before recording: another engine recorded it meanwhile, so it is not sent again.
#[test]
fn a_transition_recorded_meanwhile_is_not_still_due() {
    let awaiting = batch("b", NOW - 100, ready("AwaitingApproval", "ApprovalRequired", NOW - 10));
    let found = due(std::slice::from_ref(&awaiting), &[], at(NOW));
    assert!(still_due(&awaiting, &found[0]));
    let mut status = ready("AwaitingApproval", "ApprovalRequired", NOW - 10);
    status["notifications"] = json!([record("AwaitingApproval", "AwaitingApproval", None, NOW - 1)]);
    assert!(!still_due(&batch("b", NOW - 100, status), &found[0]));
}

#[test]
fn targets_parse_without_repeating_the_url() {
    let slack = NotifyTarget::parse("https://hooks.slack.com/services/T0/B0/secret").expect("slack");
    assert_eq!((slack.host.as_str(), slack.format), ("hooks.slack.com", PayloadFormat::Slack));
    let json = NotifyTarget::parse("http://127.0.0.1:9000/hook?token=secret").expect("json");
    assert_eq!((json.host.as_str(), json.format), ("127.0.0.1", PayloadFormat::Json));
    let forced = NotifyTarget::parse("slack=https://chat.example.com/hook").expect("forced");
    assert_eq!(forced.format, PayloadFormat::Slack);
    assert!(!format!("{forced:?}").contains("/hook"), "Debug shows the name only: {forced:?}");
    // Named: two webhooks of one host differ, by the name given or a short hash of their URL.
    let oncall = NotifyTarget::parse("oncall@https://hooks.slack.com/services/T0/B1/other").expect("named");
    assert_eq!((oncall.name.as_str(), oncall.format), ("oncall", PayloadFormat::Slack));
    let named = NotifyTarget::parse("team-a@slack=https://chat.example.com/hook").expect("named, with a format");
    assert_eq!((named.name.as_str(), named.format), ("team-a", PayloadFormat::Slack));
    let other = NotifyTarget::parse("https://hooks.slack.com/services/T0/B1/other").expect("slack");
    assert!(slack.name.starts_with("hooks.slack.com#") && slack.name.len() == "hooks.slack.com#".len() + 6);
    assert_ne!(slack.name, other.name, "one host, two receivers: {} {}", slack.name, other.name);
    assert!(!slack.name.contains("secret") && !format!("{slack:?}").contains("secret"), "{slack:?}");
    // A URL's own userinfo is no name.
    let userinfo = NotifyTarget::parse("https://user:pw@example.com/hook").expect("userinfo");
    assert!(userinfo.name.starts_with("example.com#"), "{}", userinfo.name);
    for bad in ["ftp://example.com/secret-token", "not a url secret-token", "https:///secret-token"] {
        let error = NotifyTarget::parse(bad).expect_err(bad);
        assert!(!error.contains("secret-token"), "{error}");
    }
}

#[test]
fn payloads_are_versioned_json_or_slack_text() {
    let awaiting = batch("bookshop-x7k2p", NOW - 100, ready("AwaitingApproval", "ApprovalRequired", NOW - 10));
    let found = due(std::slice::from_ref(&awaiting), &[], at(NOW));
    let payload = Payload::new("prod-eu", "engine-a", &found[0], &awaiting, at(NOW));
    let json: serde_json::Value = serde_json::from_slice(&payload.body(PayloadFormat::Json)).expect("json");
    assert_eq!(json["version"], PAYLOAD_VERSION);
    assert_eq!(json["event"], "AwaitingApproval");
    assert_eq!(json["cluster"], "prod-eu");
    assert_eq!(json["batch"], "bookshop-x7k2p");
    assert_eq!(json["key"], "AwaitingApproval");
    let slack: serde_json::Value = serde_json::from_slice(&payload.body(PayloadFormat::Slack)).expect("slack");
    assert_eq!(slack.as_object().map(|o| o.len()), Some(1), "{slack}");
    let text = slack["text"].as_str().expect("text");
    assert!(text.starts_with("[prod-eu] ns/app: batch bookshop-x7k2p awaits approval"), "{text}");
    assert!(text.contains("capdeck approve ns/bookshop-x7k2p"), "{text}");
}

#[test]
fn doctor_counts_recent_records_and_failed_hosts() {
    let mut status = ready("Succeeded", "Succeeded", NOW - 10);
    let mut failed = record("Failed", "Failed", None, NOW - 60);
    failed["failed"] = json!(["hooks.slack.com"]);
    status["notifications"] = json!([failed, record("AwaitingApproval", "AwaitingApproval", None, NOW - 90_000)]);
    let health = recent(&[(*batch("b", NOW - 100_000, status)).clone()], at(NOW), 24 * 3600);
    assert_eq!(health, RecentNotifications { recorded: 1, failed: 1, hosts: vec!["hooks.slack.com".into()] });
}
